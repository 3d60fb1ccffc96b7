//! `placement-webhook review`: one AdmissionReview answered exactly as the server would.

use crate::inflight::shared::SharedWorld;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use base64::Engine;

use crate::admission::{self, Admission, BadReview};
use crate::config::Config;
use crate::config::PlacementConfig;
use crate::inflight::ledger::handover::{Evidence, NodeHandover};
use crate::inflight::world::World;
use crate::inventory::Inventory;
use crate::inventory::listing::ClusterState;
use crate::inventory::pods::charge_listed;
use crate::metrics_source::prometheus::PrometheusSource;
use crate::placement::{self, Decision, NodeAssessment};
use crate::snapshot::LoadSnapshot;
use crate::view::ViewStore;

/// The response JSON the server would send against `snapshot`, and with `explain`, a node table
/// and the decoded patch on standard error; with `cluster`, on the cluster's nodes with their
/// labels, taints, allocatable and bound requests, as `serve` and `simulate` join them.
pub fn review_with(
    config: Config,
    snapshot: LoadSnapshot,
    cluster: Option<&ClusterState>,
    body: &[u8],
    explain: bool,
) -> anyhow::Result<String> {
    let snapshot = match cluster {
        Some(cluster) => crate::cli::simulate::with_cluster(snapshot, cluster)?,
        None => {
            if !snapshot.nodes.is_empty() && snapshot.nodes.iter().all(|n| n.labels.is_empty()) {
                eprintln!(
                    "note: the nodes carry no labels (no cluster was read, and the snapshot has \
                     none): a nodeSelector, node affinity or topology key matches no node"
                );
            }
            snapshot
        }
    };
    let world = Arc::new(SharedWorld::new(World::for_config(&config)));
    // The pods steered before, as a replica starting now would charge them: the decision and
    // the table read them, and the table shows each named node's part.
    let inflight = cluster.map(|cluster| {
        let now = (Instant::now(), SystemTime::now());
        let mut world = world.write();
        for pod in &cluster.steered {
            charge_listed(&mut world, pod, now);
        }
        (world.charges)
            .read_evidence(&Evidence::of(&snapshot), now.0)
            .by_node
    });
    let store = Arc::new(ViewStore::new(config.placement.clone()));
    store.publish_snapshot(snapshot);
    let config = Arc::new(config);
    let admission = Admission::new(config.clone(), store.clone(), world);
    // Before answering: the answer charges the ledger, and the table shows the same decision.
    let table = explain.then(|| node_table(&admission, body, inflight.as_deref()));
    let answer = match admission.review_bytes(body) {
        Ok(answer) => answer,
        Err(e) => anyhow::bail!("the server would answer HTTP {}: {e}", status_of(&e)),
    };
    if let Some(table) = table {
        eprint!("{table}{}", patch_text(&answer.review.response));
        if answer.outcome == crate::telemetry::Outcome::Skipped
            && let Some(why) = admission::parse(body)
                .ok()
                .and_then(|r| admission.why_skipped(&r))
        {
            eprintln!("(skipped: {why})");
        }
    }
    Ok(serde_json::to_string_pretty(&answer.review)?)
}

fn status_of(e: &BadReview) -> u16 {
    match e {
        BadReview::Shape(_) => 422,
        _ => 400,
    }
}

/// The load snapshot `config` names (Prometheus or a file); with the cluster's `inventory`, Prometheus instances are matched to nodes
/// by InternalIP as `serve` matches them.
pub async fn load_snapshot_with(
    config: &Config,
    inventory: Option<&Inventory>,
) -> anyhow::Result<LoadSnapshot> {
    if let Some(prom) = &config.prometheus {
        let source = PrometheusSource::new(prom.clone())?;
        let refresh = source.refresh(inventory).await;
        // A refresh that fails says why in one line (each query is logged at debug); one
        // that succeeds notes the optional queries that did not answer.
        let (snapshot, report) = refresh.outcome?;
        for failure in &refresh.failures {
            eprintln!("note: {} query failed: {}", failure.query, failure.error);
        }
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

/// The node table: every node, why it was or was not chosen, and the predicted landing;
/// `inflight`, the charges of the pods steered before by node (`None`: no cluster was read).
fn node_table(admission: &Admission, body: &[u8], inflight: Option<&[NodeHandover]>) -> String {
    let mut out = String::new();
    // As the server reads it.
    let request = admission::parse(body).ok();
    // Why nothing is written comes first; the ranking after it only says what would be done.
    let skipped = request.as_ref().and_then(|r| admission.why_skipped(r));
    if let Some(why) = &skipped {
        let _ = writeln!(
            out,
            "skipped: {why}; nothing is written (no patch, nothing charged)\n\nwhat it would \
             do were it a target:\n"
        );
    }
    let pod = request
        .as_ref()
        .and_then(|request| admission::pod_of(request.object.as_deref()?, request).ok());
    match (pod, admission.store().current()) {
        (Some(pod), Some(view)) => {
            let decision = admission.dry_decide(&pod, &view);
            let demand = admission::demand(admission.config(), &pod, Some(&view));
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
            if let Some(weight) = placement::eligible::own_spread::own_hostname_anti_affinity(&pod)
            {
                let _ = writeln!(
                    out,
                    "note: {}\n",
                    placement::eligible::own_spread::note(weight)
                );
            }
            let placement = &admission.config().placement;
            let replica = admission.decider().replica();
            // The ledger is the one the decision read (empty, aligned with the view): the
            // filters that count other pods see the same pods.
            let mut rows = placement::assess_all(
                &placement::DecisionCtx::new(
                    &demand,
                    &view,
                    &admission.decider().world().read(),
                    placement,
                    &admission.config().scheduler,
                ),
                &replica,
                &decision,
            );
            rows.sort_by(explain_order);
            out.push_str(&rows_table(&rows));
            out.push_str(&why_not_chosen(&rows, &decision, placement));
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
            if skipped.is_some() {
                let _ = writeln!(
                    out,
                    "predicted landing were it a target (not charged): {}",
                    if landing.is_empty() {
                        "none".to_string()
                    } else {
                        landing.join(", ")
                    }
                );
            } else if landing.is_empty() {
                let _ = writeln!(
                    out,
                    "predicted landing: none (land=none): the scheduler is predicted to find no \
                     node that can take it ({} feasible), so the pod will stay Pending until one \
                     can; nothing is charged",
                    decision.feasible
                );
            } else {
                let _ = writeln!(
                    out,
                    "predicted landing (charged so): {}",
                    landing.join(", ")
                );
            }
            out.push_str(&inflight_on(&decision, inflight));
            // Read here, not in every decision: it counts the whole view.
            let replica = admission.decider().replica();
            match replica.set.as_ref().map(|set| set.share(&view)) {
                Some(share) if replica.others_idle() => {
                    let _ = writeln!(
                        out,
                        "replica share: this replica owns {:.0}% of the nodes; the watch reports \
                         almost only this replica's decisions lately, so the others' nodes rank \
                         as its own",
                        share * 100.0
                    );
                }
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
            if admission.config().mode.observes_only() {
                let _ = writeln!(
                    out,
                    "observe mode: the pod keeps its own terms, so it is charged where the \
                     scheduler puts it alone; the webhook would put it on {}",
                    decision
                        .first_tier()
                        .first()
                        .map_or("no node", |n| n.name.as_str())
                );
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

/// What is in flight on the nodes the decision names first: charged for pods steered before
/// that the metrics do not show yet, and counted twice.
fn inflight_on(decision: &Decision, inflight: Option<&[NodeHandover]>) -> String {
    let Some(inflight) = inflight else {
        return "in flight: not known (no cluster read: the pods steered before are not \
                charged)\n"
            .to_string();
    };
    let named: Vec<String> = decision
        .first_tier()
        .iter()
        .map(|n| {
            let here = inflight.iter().find(|h| *h.node == *n.name);
            let (charged, twice) = here.map_or((0.0, 0.0), |h| {
                (h.charged.cpu_cores, h.counted_twice.cpu_cores)
            });
            format!("{} {charged:.2} / {twice:.2}", n.name)
        })
        .collect();
    if named.is_empty() {
        return String::new();
    }
    format!(
        "in flight on the first tier (cores charged for steered pods the metrics do not show \
         yet / counted twice): {}\n",
        named.join(", ")
    )
}

/// Feasible nodes first, in the decision's order (cool before hot, then by rank), then the
/// others by name.
fn explain_order(a: &NodeAssessment, b: &NodeAssessment) -> std::cmp::Ordering {
    let key = |r: &NodeAssessment| {
        // Only an eligible node whose requests fit is ranked.
        r.ranked.map(|h| (r.hot, h.nic_over, h.rank))
    };
    match (key(a), key(b)) {
        (Some(x), Some(y)) => {
            x.0.cmp(&y.0)
                .then(x.1.cmp(&y.1))
                .then(x.2.total_cmp(&y.2))
                .then_with(|| a.name.cmp(&b.name))
        }
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => a.name.cmp(&b.name),
    }
}

/// The table: what the decision ranks each node on, the dimension that decided, and the
/// outcome.
fn rows_table(rows: &[NodeAssessment]) -> String {
    let mut out = String::new();
    out.push_str(
        "RANK: the utilisation in the dimensions this pod loads (the highest, BY) halfway \
         through the pod, in-flight pods counted; cool nodes first, lowest first. CPU: with the \
         pod. NIC: with the pod for a pod with a network estimate, else the NIC's load now (a \
         busy one adds a bounded penalty). HEAT: the node's weighted heat now.\n\n",
    );
    let _ = writeln!(
        out,
        "{:<24} {:>6} {:>4} {:>6} {:>6} {:>6} {:<22} {:>5} {:>7}",
        "NODE", "RANK", "BY", "CPU", "NIC", "HEAT", "ELIGIBLE", "TIER", "LANDING"
    );
    for r in rows {
        let eligible = match (r.eligibility, r.fits, r.hot) {
            (Err(why), _, _) => format!("no ({})", why.as_str()),
            (Ok(()), false, _) => "no (requests full)".to_string(),
            (Ok(()), true, true) => "hot".to_string(),
            (Ok(()), true, false) if r.foreign => "yes (other replica)".to_string(),
            (Ok(()), true, false) => "yes".to_string(),
        };
        let tier = match (r.tier, r.avoided) {
            (Some(t), _) => match r.graded {
                Some(weight) => format!("{t}@{weight}"),
                None => t.to_string(),
            },
            (None, true) => "avoid".to_string(),
            (None, false) => "-".to_string(),
        };
        let landing = if r.landing > 0.0 {
            format!("{:.0}%", r.landing * 100.0)
        } else {
            "-".to_string()
        };
        let (rank, by) = match r.ranked {
            Some(h) => (format!("{:.3}", h.rank), h.by.short()),
            None => ("-".to_string(), "-"),
        };
        let _ = writeln!(
            out,
            "{:<24} {:>6} {:>4} {:>6.3} {:>6.3} {:>6.3} {:<22} {:>5} {:>7}",
            r.name,
            rank,
            by,
            r.after.cpu,
            r.after.nic.unwrap_or(r.network_fraction),
            r.heat,
            eligible,
            tier,
            landing
        );
    }
    out
}

/// How many of the best feasible nodes left out of tier 1 are explained.
const EXPLAINED_LOSERS: usize = 3;

/// Why the best feasible nodes left out of tier 1 lost to it.
fn why_not_chosen(
    rows: &[NodeAssessment],
    decision: &Decision,
    policy: &PlacementConfig,
) -> String {
    let mut out = String::new();
    let first_rank = rows
        .iter()
        .filter(|r| r.tier == Some(1))
        .filter_map(|r| r.ranked.map(|h| h.rank))
        .fold(f64::INFINITY, f64::min);
    let losers = rows
        .iter()
        .filter(|r| !r.hot && r.tier != Some(1))
        .filter_map(|r| Some((r, r.ranked?)))
        .take(EXPLAINED_LOSERS);
    for (r, heat) in losers {
        let why = if r.foreign {
            "another replica's node: ranked as if its owner had just put a pod there too"
                .to_string()
        } else if r.kept_out {
            "the scores that count other pods (InterPodAffinity, a ScheduleAnyway spread) put \
             it too far behind the best node for a tier to lift it"
                .to_string()
        } else if r.beyond_job_bounds {
            "the job's own spread: it holds as many of the job's pods as placement.per_job \
             allows (on the node or in its zone)"
                .to_string()
        } else if decision.tie_limit.is_some_and(|limit| heat.rank <= limit) {
            "a near-tie of the best: this replica takes near-ties in its own order".to_string()
        } else if heat.quiet_nic > 0.0
            && heat.rank - policy.nic_penalty * heat.quiet_nic <= first_rank
        {
            format!(
                "its NIC carries traffic (load {:.2}): +{:.3} on the rank",
                heat.quiet_nic,
                policy.nic_penalty * heat.quiet_nic
            )
        } else if first_rank.is_finite() {
            format!(
                "ranks {:.3} behind tier 1, on {}",
                heat.rank - first_rank,
                heat.by.short()
            )
        } else {
            "no tier 1".to_string()
        };
        let _ = writeln!(out, "not first: {} ({why})", r.name);
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
