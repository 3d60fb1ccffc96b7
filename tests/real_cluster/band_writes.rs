//! What the heat bands cost a cluster at rest while each node's load wanders, measured where
//! it lands: the webhook as `deploy/` installs it (two replicas), a real Prometheus scraping
//! every node's node-exporter series at the shipped refresh (15 s) from the synthetic exporter,
//! each node's CPU a random walk, nothing in flight. The writes are counted by a Node watcher of
//! the test's own (what every Node watcher in a cluster receives, with its bytes), beside the
//! replicas' own count; the keeper's model (`bands::tests`) carries the same walk.
//!
//! A measurement (ignored): `PLACEMENT_REST_NODES` (500), `PLACEMENT_REST_MINUTES` (10) and
//! `PLACEMENT_REST_DRIFT` (0.02, the walk's standard deviation a minute as a share of a node)
//! set the run; run with `--nocapture`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::runtime::watcher;

use crate::fixture::{Cluster, Setup, serial};
use crate::support::exporter::{Exporter, FakeNode};
use crate::support::prometheus::{self, Prometheus};
use crate::support::rng::Rng;

const KEY: &str = "placement-webhook.io/heat-band";
/// The shipped `prometheus.refresh_interval`, and the scrape interval here.
const REFRESH_SECONDS: u32 = 15;
/// How often the walk moves the nodes' load.
const STEP: Duration = Duration::from_secs(5);

fn setting<T: std::str::FromStr>(name: &str, default: T) -> T {
    match std::env::var(name) {
        Ok(value) => value
            .parse()
            .unwrap_or_else(|_| panic!("{name}={value:?} is not a number")),
        Err(_) => default,
    }
}

/// Band label changes a Node watcher saw, and the bytes of the objects it received for them.
#[derive(Default)]
struct Watched {
    relabels: AtomicU64,
    bytes: AtomicU64,
}

/// Watches every Node: counts the events whose band label differs from the one before.
fn watch_bands(cluster: &Cluster) -> (Arc<Watched>, tokio::task::JoinHandle<()>) {
    let watched = Arc::new(Watched::default());
    let api = Api::<Node>::all(cluster.admin.clone());
    let counts = watched.clone();
    let task = tokio::spawn(async move {
        let mut last = std::collections::HashMap::<String, Option<String>>::new();
        let mut events = std::pin::pin!(watcher(api, watcher::Config::default()));
        while let Some(event) = events.next().await {
            let node = match event {
                Ok(watcher::Event::Apply(node) | watcher::Event::InitApply(node)) => node,
                _ => continue,
            };
            let name = node.metadata.name.clone().unwrap_or_default();
            let band = (node.metadata.labels.as_ref()).and_then(|l| l.get(KEY).cloned());
            let before = last.insert(name, band.clone());
            if before.is_some_and(|before| before != band) {
                counts.relabels.fetch_add(1, Ordering::Relaxed);
                let size = serde_json::to_vec(&node).map_or(0, |b| b.len());
                counts.bytes.fetch_add(size as u64, Ordering::Relaxed);
            }
        }
    });
    (watched, task)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: minutes of wall time"]
async fn band_writes_at_rest_while_each_nodes_load_wanders() {
    let _serial = serial().await;
    let nodes: usize = setting("PLACEMENT_REST_NODES", 500);
    let minutes: f64 = setting("PLACEMENT_REST_MINUTES", 10.0);
    let drift: f64 = setting("PLACEMENT_REST_DRIFT", 0.02);

    let mut rng = Rng(0x5EED_0081);
    let mut setup = Setup::nodes(nodes);
    let fleet: Vec<FakeNode> = (setup.nodes.iter().enumerate())
        .map(|(i, (spec, _))| {
            let mut node = FakeNode::new(i, 0.05 + 0.85 * rng.unit(), 0.0);
            node.name = spec.name.clone();
            node.cores = spec.cores;
            node
        })
        .collect();
    let exporter = Exporter::start(fleet).await;
    let prometheus =
        Prometheus::start_scraping_every(prometheus::binary(), &[exporter.addr], REFRESH_SECONDS)
            .await;
    setup.replicas = 2;
    setup.extra_config = format!(
        "prometheus: {{url: '{}', refresh_interval: {REFRESH_SECONDS}s, query_timeout: 10s, \
         rate_window: 2m, node_mapping: {{by: uname}}}}\n",
        prometheus.url()
    );
    let cluster = Cluster::start(setup).await;
    let written = || {
        cluster.metric_sum(
            "placement_webhook_heat_band_writes_total",
            &[("result", "written")],
        )
    };
    // Every node labelled once (the install), then two refreshes more to settle.
    let deadline = Instant::now() + Duration::from_secs(300);
    while written().await < nodes as f64 {
        assert!(
            Instant::now() < deadline,
            "not every node labelled in 300 s"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    tokio::time::sleep(Duration::from_secs(2 * u64::from(REFRESH_SECONDS))).await;
    let install = written().await;

    let (watched, watch) = watch_bands(&cluster);
    tokio::time::sleep(Duration::from_secs(5)).await;
    let start = written().await;
    let started = Instant::now();
    let per_step = drift * (STEP.as_secs_f64() / 60.0).sqrt();
    while started.elapsed().as_secs_f64() < minutes * 60.0 {
        let steps: Vec<f64> = (0..nodes).map(|_| rng.normal()).collect();
        exporter.update_each(|i, node| {
            node.busy = (node.busy + per_step * steps[i]).clamp(0.01, 0.99);
        });
        tokio::time::sleep(STEP).await;
    }
    let hours = started.elapsed().as_secs_f64() / 3600.0;
    let writes = written().await - start;
    // The watcher a moment to receive the last of them.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let relabels = watched.relabels.load(Ordering::Relaxed) as f64;
    let bytes = watched.bytes.load(Ordering::Relaxed) as f64;
    watch.abort();
    let refused = cluster
        .metric_sum(
            "placement_webhook_heat_band_writes_total",
            &[("result", "refused")],
        )
        .await;
    eprintln!(
        "{nodes} nodes, load wandering {:.1} % a minute, {minutes} min: install {install} writes; \
         at rest {writes} writes by the replicas' count, {relabels} band changes a Node watcher \
         saw ({:.2} per node per hour, target at most 6), {:.0} bytes each, {:.0} bytes an hour \
         to every Node watcher; refused {refused}",
        drift * 100.0,
        relabels / nodes as f64 / hours,
        bytes / relabels.max(1.0),
        bytes / hours,
    );
    assert_eq!(refused, 0.0, "band writes refused:\n{}", cluster.logs());
    assert_eq!(
        install, nodes as f64,
        "the install labels each node once (one writer)"
    );
    // Every write the replicas count is a band change a watcher sees: no write that changes
    // nothing. (The watcher may also see writes made after the count was read.)
    assert!(
        writes <= relabels,
        "the replicas counted {writes} writes, a watcher saw {relabels} band changes"
    );
    assert!(
        relabels / nodes as f64 / hours <= 6.0,
        "{:.2} writes per node per hour at rest",
        relabels / nodes as f64 / hours
    );
}
