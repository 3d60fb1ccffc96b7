//! A Prometheus that comes back without its data while a burst is being handed over: every
//! node's series begins anew, so the shipped queries read each node by its slope over the few
//! samples it has (`deriv()`), which shows the TaskManagers that ran before whole, while their
//! own series, read with `rate()` over the whole window, show only the part since the restart.
//! The webhook counts each node's samples (`queries.node_samples`) and reads its pods over the
//! same span: what the node shows plus what the webhook charges must stay within one
//! TaskManager of what the node's TaskManagers carry, node by node, from the truth.

use std::time::{Duration, Instant, SystemTime};

use serde_json::json;

use crate::fixture::{Cluster, FLINK, Setup, serial};
use crate::living::{
    counted_against_truth, deciding_inflight, shown_beyond_background_at, wait_settled,
    with_background,
};
use crate::support::kube::objects::{self, NodeSpec};

const NODES: usize = 20;
const CORES: u32 = 16;
const BUSY: f64 = 0.2;
const TASKMANAGERS: usize = 60;
const TM_CORES: f64 = 2.0;
const SCRAPE: u32 = 5;
const WINDOW: u64 = 60;

fn nodes() -> Vec<(NodeSpec, f64)> {
    (0..NODES)
        .map(|i| {
            let mut spec = NodeSpec::new(
                &format!("node-{i:03}"),
                &format!("zone-{}", ["a", "b", "c"][i % 3]),
                CORES,
            );
            spec.internal_ip = Some(format!("10.7.0.{}", i + 1));
            with_background(&mut spec, f64::from(CORES), BUSY);
            (spec, BUSY)
        })
        .collect()
}

fn taskmanager(i: usize) -> serde_json::Value {
    let mut pod = objects::taskmanager(&format!("history-taskmanager-1-{i}"), "history", "2");
    pod["metadata"]["annotations"] = json!({
        "placement-test/cpu-cores": format!("{TM_CORES}"),
        "placement-test/scrape-seconds": format!("{SCRAPE}"),
        "pod-ready.stage.kwok.x-k8s.io/delay": "3s",
        "pod-ready.stage.kwok.x-k8s.io/jitter-delay": "6s",
    });
    pod
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prometheus_that_lost_its_data_counts_no_running_taskmanager_twice() {
    let _serial = serial().await;
    let mut setup = Setup::nodes(0);
    setup.nodes = nodes();
    setup.living = Some(SCRAPE);
    setup.overlay = "deploy/no-heat-bands";
    setup.extra_config = format!(
        "prometheus: {{url: '{{prometheus}}', refresh_interval: {SCRAPE}s, query_timeout: 4s, \
         rate_window: {WINDOW}s, node_mapping: {{by: uname}}}}\n\
         inflight: {{handover: {{rule: evidence, scrape_interval: {SCRAPE}s}}, default_cpu_cores: 1}}\n"
    );
    let mut cluster = Cluster::start(setup).await;
    let window = Duration::from_secs(WINDOW);
    let expected: Vec<(String, f64)> = nodes().iter().map(|(n, b)| (n.name.clone(), *b)).collect();
    wait_settled(&cluster, window, &expected).await;

    let pods: Vec<serde_json::Value> = (0..TASKMANAGERS).map(taskmanager).collect();
    let names: Vec<String> = (0..TASKMANAGERS)
        .map(|i| format!("history-taskmanager-1-{i}"))
        .collect();
    let created = Instant::now();
    objects::create_many(&cluster.admin, FLINK, &pods, 16).await;
    let bound = cluster.bound(FLINK, &names).await;
    // Every TaskManager runs (3-9 s after creation) and is partly shown: then the data goes.
    tokio::time::sleep((Duration::from_secs(20)).saturating_sub(created.elapsed())).await;
    let restarted = SystemTime::now();
    cluster
        .prometheus
        .as_mut()
        .expect("a living cluster")
        .restart_empty()
        .await;

    // The first refresh after three scrapes of the new data: each node's series spans 15 s of
    // the 60 s window, and the TaskManagers have run through all of it.
    let due = restarted + Duration::from_secs(3 * u64::from(SCRAPE));
    let inflight = deciding_inflight(&cluster, &[0], due).await;
    let shown_then =
        shown_beyond_background_at(&cluster, window, inflight.taken_at, &nodes()).await;
    let mut on = [0usize; NODES];
    for node in bound.values() {
        let i: usize = (node.strip_prefix("node-"))
            .and_then(|n| n.parse().ok())
            .expect("a node of the test");
        on[i] += 1;
    }
    let (mut over, mut under) = (0.0f64, 0.0f64);
    println!("node      carried  shown  charged   (cores, at the refresh after the restart)");
    for (i, (spec, _)) in nodes().iter().enumerate() {
        let shown = shown_then[&spec.name];
        let here = inflight.charged.get(&spec.name).copied().unwrap_or(0.0);
        let carried = on[i] as f64 * TM_CORES;
        println!("{}  {carried:>7.1}  {shown:>5.2}  {here:>7.2}", spec.name);
        let (over_here, under_here) = counted_against_truth(shown, here, carried);
        over = over.max(over_here);
        under = under.max(under_here);
    }
    println!(
        "after Prometheus lost its data: at most {over:.2} cores counted over and {under:.2} under \
         what a node's TaskManagers carry"
    );
    assert!(
        over <= TM_CORES && under <= TM_CORES,
        "a node counted {over:.2} cores over and one {under:.2} under its TaskManagers' load"
    );
}
