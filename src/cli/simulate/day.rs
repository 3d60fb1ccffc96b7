//! `simulate --waves`: the burst again at each time of a day, a new job each wave, its
//! TaskManagers starting late and the metrics following them (see `simulate::day`).

use std::fmt::Write as _;
use std::time::Duration;

use serde_json::json;

use super::{Request, SimulateError, burst_of, timing};
use crate::config::{Config, HandoverRule};
use crate::simulate::day::{MetricsTiming, Steering, Wave, WaveRow, run_day};
use crate::snapshot::LoadSnapshot;

/// The waves `request` describes at `at` (in time order), each a new job whose TaskManagers start
/// `start_delay` after they are created.
pub fn waves_of(
    request: &Request,
    at: &[Duration],
    start_delay: Duration,
) -> Result<Vec<Wave>, SimulateError> {
    let burst = burst_of(request)?;
    let mut at = at.to_vec();
    at.sort();
    Ok(at
        .iter()
        .enumerate()
        .map(|(k, &at)| {
            let mut burst = burst.clone();
            let metadata = &mut burst.pod["metadata"];
            let name = metadata["name"]
                .as_str()
                .unwrap_or("taskmanager")
                .to_string();
            metadata["name"] = json!(format!("wave{}-{name}", k + 1));
            if let Some(app) = metadata["labels"]["app"].as_str().map(str::to_string) {
                metadata["labels"]["app"] = json!(format!("{app}-{}", k + 1));
            }
            Wave {
                at,
                burst,
                start_delay,
            }
        })
        .collect())
}

/// The day on `snapshot` as a table: for each wave, the webhook as configured, the same
/// webhook on the fixed ttl (when the configuration hands over on evidence) and no webhook.
pub fn day_table(
    snapshot: LoadSnapshot,
    config: &Config,
    request: &Request,
    waves: &[Wave],
) -> Result<String, SimulateError> {
    if snapshot.nodes.is_empty() {
        return Err(SimulateError::NoNodes);
    }
    let cluster = super::cluster_of(snapshot, config, request);
    let webhook = Steering::Webhook(timing(request));
    let mut runs: Vec<(&str, Vec<WaveRow>)> = vec![(
        "webhook",
        run_day(&cluster, config, waves, webhook, request.seed),
    )];
    if config.inflight.handover.rule == HandoverRule::Evidence {
        let mut ttl = config.clone();
        ttl.inflight.handover.rule = HandoverRule::Ttl;
        runs.push((
            "fixed ttl",
            run_day(&cluster, &ttl, waves, webhook, request.seed),
        ));
    }
    runs.push((
        "no webhook",
        run_day(&cluster, config, waves, Steering::NoWebhook, request.seed),
    ));
    let metrics = MetricsTiming::of(config);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "a day of {} waves of {} TaskManagers on {} nodes; the metrics refreshed every {}s, \
         a scrape {}s late, rated over {}s\n",
        waves.len(),
        request.pods,
        cluster.nodes.len(),
        metrics.refresh.as_secs(),
        metrics.scrape.as_secs(),
        metrics.window.as_secs()
    );
    let _ = writeln!(
        out,
        "{:>6}  {:<11} {:>6} {:>9} {:>8} {:>7} {:>10}",
        "at", "method", "placed", "above TMs", "hottest", "bound", "uncounted"
    );
    for (k, wave) in waves.iter().enumerate() {
        for (name, rows) in &runs {
            let row = &rows[k];
            let _ = writeln!(
                out,
                "{:>5}s  {:<11} {:>6} {:>+9.2} {:>8.3} {:>7.3} {:>10}",
                wave.at.as_secs(),
                name,
                row.figures.pods - row.figures.pending,
                row.above,
                row.figures.hottest_cpu,
                row.bound,
                row.uncounted.map_or("-".to_string(), |u| format!("{u:.1}"))
            );
        }
    }
    out.push_str(
        "\nabove TMs: the hottest landing node above the lowest it could end, in TaskManagers \
         of its size, on the nodes as really used (every earlier TaskManager at its eventual \
         load); uncounted: TaskManager CPU cores neither shown by the metrics nor charged, on \
         the node where most, when the wave arrived\n",
    );
    Ok(out)
}
