//! `placement-webhook review`: one AdmissionReview answered exactly as the server would.

use crate::inflight::shared::SharedLedger;
use std::fmt::Write as _;
use std::sync::Arc;

use base64::Engine;

use crate::admission::{self, Admission, BadReview};
use crate::config::Config;
use crate::inflight::ledger::Ledger;
use crate::inventory::Inventory;
use crate::metrics_source::prometheus::PrometheusSource;
use crate::placement;
use crate::snapshot::LoadSnapshot;
use crate::view::ViewStore;

/// The response JSON the server would send, and with `explain`, a node table and the decoded
/// patch on standard error.
pub async fn review(config: Config, body: &[u8], explain: bool) -> anyhow::Result<String> {
    let snapshot = load_snapshot(&config).await?;
    let store = Arc::new(ViewStore::new(config.placement.clone()));
    store.publish_snapshot(snapshot);
    let ledger = Arc::new(SharedLedger::new(
        Ledger::new(config.inflight.ttl).with_max_entries(config.inflight.max_entries),
    ));
    let config = Arc::new(config);
    let admission = Admission::new(config.clone(), store.clone(), ledger);
    // Before answering: the answer charges the ledger, and the table shows the same decision.
    let table = explain.then(|| node_table(&admission, body));
    let answer = match admission.review_bytes(body) {
        Ok(answer) => answer,
        Err(e) => anyhow::bail!("the server would answer HTTP {}: {e}", status_of(&e)),
    };
    if let Some(table) = table {
        eprint!("{table}{}", patch_text(&answer.review.response));
    }
    Ok(serde_json::to_string_pretty(&answer.review)?)
}

fn status_of(e: &BadReview) -> u16 {
    match e {
        BadReview::Shape(_) => 422,
        _ => 400,
    }
}

pub async fn load_snapshot(config: &Config) -> anyhow::Result<LoadSnapshot> {
    load_snapshot_with(config, None).await
}

/// [`load_snapshot`]; with the cluster's `inventory`, Prometheus instances are matched to nodes
/// by InternalIP as `serve` matches them.
pub async fn load_snapshot_with(
    config: &Config,
    inventory: Option<&Inventory>,
) -> anyhow::Result<LoadSnapshot> {
    if let Some(prom) = &config.prometheus {
        let source = PrometheusSource::new(prom.clone())?;
        let refresh = source.refresh(inventory).await;
        for failure in &refresh.failures {
            eprintln!("note: {} query failed: {}", failure.query, failure.error);
        }
        let (snapshot, report) = refresh.outcome?;
        if !report.incomplete_nodes.is_empty() {
            eprintln!(
                "note: {} node(s) without both CPU and network readings left out",
                report.incomplete_nodes.len()
            );
        }
        return Ok(snapshot);
    }
    match &config.metrics_file {
        Some(path) => Ok(LoadSnapshot::from_file(path)?),
        None => {
            eprintln!(
                "note: no --metrics-file or --prometheus-url: using the embedded example cluster"
            );
            Ok(crate::metrics_source::file::embedded_example()?)
        }
    }
}

/// The node table: every node, why it was or was not chosen, and the predicted landing.
fn node_table(admission: &Admission, body: &[u8]) -> String {
    let mut out = String::new();
    // As the server reads it.
    let pod = admission::parse(body)
        .ok()
        .and_then(|request| admission::pod_of(request.object.as_deref()?, &request).ok());
    match (pod, admission.store().current()) {
        (Some(pod), Some(view)) => {
            let decision = admission.dry_decide(&pod, &view);
            let demand = admission.demand(&pod, Some(&view));
            let _ = writeln!(
                out,
                "charged load: {:.3} cores, {:.0} B/s network, from {}\n",
                demand.load.cpu_cores,
                demand.load.network_bytes_per_second,
                match demand.source {
                    placement::LoadSource::Request => "its request".to_string(),
                    placement::LoadSource::Siblings(n) => format!(
                        "{n} running pods of its job ({} percentile)",
                        admission.config().inflight.estimate.percentile
                    ),
                }
            );
            let placement = &admission.config().placement;
            let rows = placement::assess_all(&demand, &view, None, placement, &decision);
            let _ = writeln!(
                out,
                "{:<24} {:>6} {:>6} {:>7} {:<22} {:>5} {:>7}",
                "NODE", "HEAT", "CPU", "NET", "ELIGIBLE", "TIER", "LANDING"
            );
            for r in rows {
                let eligible = match (r.eligibility, r.fits, r.hot) {
                    (Err(why), _, _) => format!("no ({})", why.as_str()),
                    (Ok(()), false, _) => "no (requests full)".to_string(),
                    (Ok(()), true, true) => "hot".to_string(),
                    (Ok(()), true, false) => "yes".to_string(),
                };
                let tier = match (r.tier, r.avoided) {
                    (Some(t), _) => t.to_string(),
                    (None, true) => "avoid".to_string(),
                    (None, false) => "-".to_string(),
                };
                let landing = if r.landing > 0.0 {
                    format!("{:.0}%", r.landing * 100.0)
                } else {
                    "-".to_string()
                };
                let _ = writeln!(
                    out,
                    "{:<24} {:>6.3} {:>6.3} {:>7.3} {:<22} {:>5} {:>7}",
                    r.name, r.heat, r.load.cpu, r.network_fraction, eligible, tier, landing
                );
            }
            let _ = writeln!(
                out,
                "\nfeasible nodes: {}; the scheduler scores {:.0}% of them per pod, a run of its \
                 node order from an unknown start",
                decision.feasible,
                decision.sample_fraction * 100.0
            );
            let landing: Vec<String> = decision
                .landing
                .iter()
                .map(|(node, p)| format!("{node} {:.0}%", p * 100.0))
                .collect();
            let _ = writeln!(
                out,
                "predicted landing (charged so): {}",
                if landing.is_empty() {
                    "none".to_string()
                } else {
                    landing.join(", ")
                }
            );
            // Read here, not in every decision: it counts the whole view.
            match admission.replica().set.map(|set| set.share(&view)) {
                Some(share) => {
                    let _ = writeln!(
                        out,
                        "replica share: this replica owns {:.0}% of the nodes; another replica's \
                         node is ranked as if its owner had just put a pod there too",
                        share * 100.0
                    );
                }
                None => out.push_str("replica share: alone (no other replica known)\n"),
            }
            if decision.saturated {
                out.push_str(
                    "cluster saturated: no feasible node is under the hot thresholds; the least \
                     bad are named, the hottest avoided\n",
                );
            }
        }
        _ => out.push_str("(no pod object or no snapshot: no node table)\n"),
    }
    out
}

/// The decoded patch and the warnings.
fn patch_text(response: &admission::review::ResponseOut) -> String {
    let mut out = String::new();
    match &response.patch {
        Some(b64) => {
            let decoded = base64::engine::general_purpose::STANDARD
                .decode(b64)
                .ok()
                .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok())
                .and_then(|v| serde_json::to_string_pretty(&v).ok())
                .unwrap_or_else(|| "(undecodable)".into());
            let _ = writeln!(out, "\npatch:\n{decoded}");
        }
        None => out.push_str("\nno patch\n"),
    }
    for w in &response.warnings {
        let _ = writeln!(out, "warning: {w}");
    }
    out
}
