//! The model's day: a second job's burst while the first job's load is half-way into the
//! metrics, with the charges handed over on evidence, on the fixed ttl, and with the metrics
//! already caught up (the 60 nodes of 8-64 cores).

use std::time::Duration;

use serde_json::json;

use super::closed_loop::{Rng, Spec, burst, snapshot};
use crate::config::{Config, HandoverRule};
use crate::simulate::day::{Steering, Wave, WaveRow, run_day};
use crate::simulate::{Burst, Cluster, Timing};

fn nodes() -> Vec<Spec> {
    let mut rng = Rng::seeded(63);
    (0..60)
        .map(|i| {
            let cores = [8, 16, 32, 64][i % 4];
            Spec {
                cores,
                cpu: rng.range(0.05, 0.75),
                // Idle NICs: the bound (water-filling) and the figures read CPU alike.
                nic: 0.0,
                requested_cores: f64::from(cores) * rng.range(0.1, 0.4),
                zone: None,
            }
        })
        .collect()
}

/// 60 TaskManagers of job `job`.
fn job(job: &str) -> Burst {
    let mut burst = burst(60, 0.0);
    burst.pod["metadata"]["name"] = json!(format!("{job}-taskmanager-1"));
    burst.pod["metadata"]["labels"]["app"] = json!(job);
    burst
}

/// The first job at 0 s, the second `second` later; every TaskManager starts `start` after
/// it is created.
fn waves(second: u64, start: u64) -> Vec<Wave> {
    let start_delay = Duration::from_secs(start);
    vec![
        Wave {
            at: Duration::ZERO,
            burst: job("first"),
            start_delay,
        },
        Wave {
            at: Duration::from_secs(second),
            burst: job("second"),
            start_delay,
        },
    ]
}

fn day(config: &Config, waves: &[Wave]) -> Vec<WaveRow> {
    let cluster = Cluster::new(snapshot(&nodes()), config);
    run_day(
        &cluster,
        config,
        waves,
        Steering::Webhook(Timing::typical(2)),
        7,
    )
}

fn print(name: &str, rows: &[WaveRow]) {
    for r in rows {
        println!(
            "{name:<14} {:>4}s  above {:+.2}  hottest {:.3}  bound {:.3}  uncounted {:.1}",
            r.at.as_secs(),
            r.above,
            r.figures.hottest_cpu,
            r.bound,
            r.uncounted.unwrap_or(0.0)
        );
    }
}

#[test]
fn a_second_burst_counts_the_first_until_the_metrics_show_it() {
    let evidence_config = Config::default();
    let mut ttl_config = Config::default();
    ttl_config.inflight.handover.rule = HandoverRule::Ttl;
    ttl_config.inflight.ttl = Duration::from_secs(90);
    // 120 s after the first burst, whose TaskManagers started after 60 s: a quarter of the
    // 2-minute window shows them (a scrape late).
    let evidence = day(&evidence_config, &waves(120, 60));
    let ttl = day(&ttl_config, &waves(120, 60));
    let caught_up = day(&evidence_config, &waves(600, 0));
    print("evidence", &evidence);
    print("fixed ttl", &ttl);
    print("caught up", &caught_up);
    let second = |rows: &[WaveRow]| rows[1].clone();
    let (evidence, ttl, caught_up) = (second(&evidence), second(&ttl), second(&caught_up));
    assert!(evidence.above <= 1.0, "evidence {:+.2}", evidence.above);
    assert!(
        evidence.above <= caught_up.above + 0.5,
        "evidence {:+.2}, caught up {:+.2}",
        evidence.above,
        caught_up.above
    );
    let one_taskmanager = 2.0;
    assert!(
        evidence.uncounted.unwrap_or(f64::INFINITY) <= one_taskmanager,
        "{:?}",
        evidence.uncounted
    );
    assert!(
        ttl.uncounted.unwrap_or(0.0) > one_taskmanager,
        "the fixed ttl counted at most {:?} cores nowhere on a node",
        ttl.uncounted
    );
}
