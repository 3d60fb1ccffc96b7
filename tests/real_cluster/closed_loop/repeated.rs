//! Issue 59's scenarios run again and again on the real scheduler, each on new seeds, at
//! 2,000 and 5,000 nodes: a measurement (ignored), a row per run and the table, then each run
//! held to [`check_banded`], as the gate holds its one run of each.

use super::{
    COOL_JOINED_FIRST_BANDED, FIVE_THOUSAND_COOL_JOINED_FIRST, FIVE_THOUSAND_LATE_JOINERS,
    LATE_JOINERS, NO_READABLE_LEASE, OTHER_PODS_MEANWHILE, Run, SCHEDULER_RESTARTED, Scenario,
    bound, check_banded, run, taskmanagers_above_bound,
};
use crate::fixture::serial;

/// The target's scenarios at 2,000 nodes, each installed with deploy/ (the heat bands on).
const AT_2000: [Scenario; 5] = [
    LATE_JOINERS,
    SCHEDULER_RESTARTED,
    COOL_JOINED_FIRST_BANDED,
    NO_READABLE_LEASE,
    OTHER_PODS_MEANWHILE,
];

/// The same scenarios at 5,000 nodes (2,000 TaskManagers; 150 late where 2,000 has 60).
const AT_5000: [Scenario; 5] = [
    FIVE_THOUSAND_LATE_JOINERS,
    Scenario {
        name: "5,000 busy nodes, scheduler restarted",
        seed: 5010,
        restarted: true,
        ..FIVE_THOUSAND_LATE_JOINERS
    },
    FIVE_THOUSAND_COOL_JOINED_FIRST,
    Scenario {
        name: "5,000 busy nodes, scheduler restarted, no readable Lease",
        seed: 5030,
        restarted: true,
        lease_readable: false,
        ..FIVE_THOUSAND_LATE_JOINERS
    },
    Scenario {
        name: "5,000 busy nodes, other pods meanwhile",
        seed: 5040,
        others_per_second: 10,
        ..FIVE_THOUSAND_LATE_JOINERS
    },
];

/// An unsigned number from the environment, `unset` when it is not set.
fn number(name: &str, unset: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(unset)
}

/// Each scenario run again and again, a new cluster each time (the scenario's seed plus the
/// run's index; run 0 is the gate's where the gate has the scenario): `CLOSED_LOOP_RUNS` runs
/// at 2,000 nodes (10 unless set), `CLOSED_LOOP_RUNS_AT_5000` at 5,000 (3 unless set).
/// `CLOSED_LOOP_FIRST_RUN` and `CLOSED_LOOP_FIRST_RUN_AT_5000` (0 unless set) skip the runs
/// before them, so a measurement can be taken in parts; `CLOSED_LOOP_ONLY` keeps the scenarios
/// whose name holds it. The first run of each scenario also times the do-nothing webhook. A
/// row per run as it ends, the table once all have, then each checked by [`check_banded`].
/// About 2 minutes a run at 2,000 nodes, 4 at 5,000.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: about 3 hours at the default counts"]
async fn banded_scenarios_run_repeatedly() {
    let _serial = serial().await;
    let only = std::env::var("CLOSED_LOOP_ONLY").unwrap_or_default();
    let plan = [
        (
            &AT_2000,
            number("CLOSED_LOOP_FIRST_RUN", 0),
            number("CLOSED_LOOP_RUNS", 10),
        ),
        (
            &AT_5000,
            number("CLOSED_LOOP_FIRST_RUN_AT_5000", 0),
            number("CLOSED_LOOP_RUNS_AT_5000", 3),
        ),
    ];
    let mut rows = Vec::new();
    for (scenarios, first, count) in plan {
        for scenario in scenarios.iter().filter(|s| s.name.contains(&only)) {
            for k in first..first + count {
                let scenario = Scenario {
                    seed: scenario.seed + k,
                    do_nothing: k == first,
                    ..*scenario
                };
                let run = run(scenario).await;
                let line = row(scenario.name, scenario.seed, &run);
                eprintln!("run: {line}");
                rows.push((scenario, line, run));
            }
        }
    }
    eprintln!(
        "\nscenario | seed | TaskManagers above the bound (every pod) | on the first named node \
         | bound where no term named | onto busy nodes (bound) | band writes in the burst \
         | node affinity bytes per pod | first create to last bind: webhook / none / do-nothing"
    );
    for (_, line, _) in &rows {
        eprintln!("{line}");
    }
    for (scenario, _, run) in &rows {
        check_banded(scenario, run);
    }
}

/// One row of [`banded_scenarios_run_repeatedly`]'s table.
fn row(name: &str, seed: u64, run: &Run) -> String {
    let pods = run.real_webhook.pods.max(1);
    let first = run.real_webhook.landings.map_or(0, |[first, _, _]| first);
    let cost = &run.cost;
    let secs = |d: std::time::Duration| format!("{:.1}", d.as_secs_f64());
    format!(
        "{name} | {seed} | {:+.2} | {:.1} % | {} | {} ({}) | {} | {:.0} | {} / {} / {} s",
        taskmanagers_above_bound(run, &run.real_webhook),
        100.0 * first as f64 / pods as f64,
        run.unnamed,
        run.real_webhook.onto_busy,
        bound(run).onto_busy,
        cost.band_writes
            .map_or("-".to_string(), |(_, burst)| format!("{burst:.0}")),
        cost.affinity_bytes,
        secs(cost.took.webhook),
        secs(cost.took.none),
        cost.took.do_nothing.map_or("-".to_string(), secs),
    )
}
