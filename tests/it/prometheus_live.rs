//! The Prometheus source against a real Prometheus scraping the synthetic exporter.
//!
//! Needs the `prometheus` binary: under `CI=true` its absence fails these tests.

use crate::support;

use placement_webhook::inflight::note::DecisionNote;
use std::collections::HashMap;
use std::time::{Duration, Instant};

use placement_webhook::config::prometheus::{NodeMapping, PrometheusConfig};
use placement_webhook::config::{Config, PlacementConfig};
use placement_webhook::inventory::{Inventory, NodeFacts};
use placement_webhook::metrics_source::PrometheusSource;
use placement_webhook::snapshot::LoadSnapshot;
use serde_json::Value;
use support::exporter::{Emit, Exporter, FakeNode};
use support::prometheus::{self, Prometheus};
use support::webhook;

const NODES: usize = 12;

/// Node i: CPU 0.05 + 0.06 i, network 20 MB/s × (i + 1) on a 1.25 GB/s NIC, so nodes 0..2 are
/// the coolest; the last node runs at 95 % CPU: hot.
fn fleet(count: usize) -> Vec<FakeNode> {
    let mut nodes: Vec<FakeNode> = (0..count)
        .map(|i| FakeNode::new(i, 0.05 + 0.06 * i as f64, 2.0e7 * (i + 1) as f64))
        .collect();
    if let Some(last) = nodes.last_mut() {
        last.busy = 0.95;
    }
    nodes
}

fn source_config(url: &str, mapping: NodeMapping) -> PrometheusConfig {
    PrometheusConfig {
        refresh_interval: Duration::from_secs(1),
        query_timeout: Duration::from_millis(900),
        rate_window: Duration::from_secs(5),
        node_mapping: mapping,
        ..PrometheusConfig::for_url(url)
    }
}

fn inventory_of(nodes: &[FakeNode]) -> Inventory {
    Inventory {
        nodes: nodes
            .iter()
            .map(|n| {
                let facts = NodeFacts {
                    ready: true,
                    internal_ip: Some(n.ip.clone()),
                    ..NodeFacts::default()
                };
                (n.name.clone(), facts)
            })
            .collect(),
    }
}

/// Refreshes until the snapshot holds `expected` nodes with enough rate history.
async fn refreshed(
    source: &PrometheusSource,
    inventory: Option<&Inventory>,
    expected: usize,
) -> LoadSnapshot {
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        let refresh = source.refresh(inventory).await;
        let outcome = format!("{:?}", refresh.outcome.as_ref().map(|(s, _)| s.nodes.len()));
        if let Ok((snapshot, _)) = refresh.outcome
            && snapshot.nodes.len() == expected
        {
            // Three scrapes into the window are enough for rate(); wait for a full window.
            tokio::time::sleep(source.config().rate_window).await;
            let again = source.refresh(inventory).await;
            return again.outcome.expect("refresh after warm-up").0;
        }
        assert!(
            Instant::now() < deadline,
            "no {expected}-node snapshot after 40 s: last {outcome}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

fn assert_matches_fleet(snapshot: &LoadSnapshot, fleet: &[FakeNode], mapping: &str) {
    let by_name: HashMap<&str, _> = snapshot
        .nodes
        .iter()
        .map(|n| (n.name.as_str(), n))
        .collect();
    assert_eq!(by_name.len(), fleet.len(), "{mapping}: node count");
    for expected in fleet {
        let got = by_name
            .get(expected.name.as_str())
            .unwrap_or_else(|| panic!("{mapping}: {} missing", expected.name));
        assert!(
            (got.cpu - expected.busy).abs() < 0.03,
            "{mapping}: {} cpu {} vs {}",
            expected.name,
            got.cpu,
            expected.busy
        );
        let net = got.network_bytes_per_second.expect("network reading");
        let want = expected.network_bytes_per_second;
        assert!(
            (net - want).abs() / want < 0.05,
            "{mapping}: {} network {net} vs {want} (excluded devices counted?)",
            expected.name
        );
        assert_eq!(
            got.network_capacity_bytes_per_second,
            Some(expected.nic_bytes_per_second)
        );
        assert_eq!(got.cpu_capacity_cores, Some(f64::from(expected.cores)));
        let memory = got.memory.expect("memory reading");
        assert!(
            (memory - expected.memory_used).abs() < 1e-6,
            "{mapping}: memory {memory}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readings_match_the_exporter_under_each_node_mapping() {
    let binary = prometheus::binary();
    let fleet = fleet(NODES);
    let exporter = Exporter::start(fleet.clone()).await;
    let prom = Prometheus::start(binary, &[exporter.addr]).await;
    let inventory = inventory_of(&fleet);

    for (label, mapping, inventory, queries) in [
        ("uname", NodeMapping::Uname, None, 9),
        (
            "label node",
            NodeMapping::Label {
                name: "node".into(),
            },
            None,
            8,
        ),
        ("internal_ip", NodeMapping::InternalIp, Some(&inventory), 8),
    ] {
        let source = PrometheusSource::new(source_config(&prom.url(), mapping)).expect("source");
        assert_eq!(source.plan().queries().len(), queries, "{label}");
        let snapshot = refreshed(&source, inventory, NODES).await;
        assert_matches_fleet(&snapshot, &fleet, label);
    }
    assert!(exporter.scrapes() >= 5, "prometheus scraped the exporter");
}

/// Nodes whose series are a few seconds old, read over the shipped 2-minute window: the
/// default queries read them by their slope, not by a rate that spreads a few seconds of
/// increase over the whole window (CPU almost fully busy, network almost nothing), and count
/// the samples the window holds of each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_younger_than_the_rate_window_read_their_real_load() {
    let binary = prometheus::binary();
    let fleet = fleet(NODES);
    let exporter = Exporter::start(fleet.clone()).await;
    let prom = Prometheus::start(binary, &[exporter.addr]).await;
    let config = PrometheusConfig {
        rate_window: Duration::from_secs(120),
        ..source_config(&prom.url(), NodeMapping::Uname)
    };
    let source = PrometheusSource::new(config).expect("source");
    let deadline = Instant::now() + Duration::from_secs(30);
    let snapshot = loop {
        // Four scrapes: a slope over a second or two of samples is too noisy to compare.
        if exporter.scrapes() >= 4
            && let Ok((snapshot, _)) = source.refresh(None).await.outcome
            && snapshot.nodes.len() == NODES
        {
            break snapshot;
        }
        assert!(Instant::now() < deadline, "no snapshot after 30 s");
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert!(
        exporter.scrapes() < 60,
        "the series are younger than half the window"
    );
    assert_matches_fleet(&snapshot, &fleet, "young series");
    // Each node's samples over the window are counted, so its pods are read over the span its
    // own readings cover (the in-flight ledger); a second's scrapes fill 120 of them.
    for node in &fleet {
        let samples = snapshot.window_samples.get(&node.name).copied();
        assert!(
            samples.is_some_and(|n| (4.0..119.0).contains(&n)),
            "{}: {samples:?} samples over the window",
            node.name
        );
    }
}

/// An exporter whose last scrape failed: Prometheus marks its series stale at once, so
/// `node_uname_info` has no current sample while the node's rates over the window still read.
/// The shipped join keeps the name the instance had within the window, and the refresh still
/// holds every node. Its CPU reads no cooler than it is: the idle counter's missing samples
/// make `1 - idle` read busier, by about the share of the window they left out (the network's
/// rates read lower by as much: docs/configuration.md says so).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_scrape_leaves_every_node_in_the_refresh() {
    let binary = prometheus::binary();
    let fleet = fleet(NODES);
    let exporter = Exporter::start(fleet.clone()).await;
    let prom = Prometheus::start(binary, &[exporter.addr]).await;
    let config = PrometheusConfig {
        rate_window: Duration::from_secs(20),
        query_timeout: Duration::from_secs(2),
        refresh_interval: Duration::from_secs(3),
        ..source_config(&prom.url(), NodeMapping::Uname)
    };
    let source = PrometheusSource::new(config).expect("source");
    refreshed(&source, None, NODES).await;
    exporter.fail_scrapes();
    let deadline = Instant::now() + Duration::from_secs(20);
    while exporter.failed_scrapes() < 2 {
        assert!(Instant::now() < deadline, "Prometheus stopped scraping");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(
        prom.query("node_uname_info").await.is_empty(),
        "a failed scrape leaves no current node_uname_info sample"
    );
    let snapshot = source
        .refresh(None)
        .await
        .outcome
        .expect("a refresh after a failed scrape")
        .0;
    let read: HashMap<&str, f64> = snapshot
        .nodes
        .iter()
        .map(|n| (n.name.as_str(), n.cpu))
        .collect();
    assert_eq!(read.len(), NODES, "every node in the refresh: {read:?}");
    for node in &fleet {
        let cpu = read[node.name.as_str()];
        assert!(
            cpu >= node.busy - 0.03,
            "{} reads {cpu:.3} busy, cooler than its {:.3}",
            node.name,
            node.busy
        );
    }
}

/// A TaskManager review without the example's nodeSelector and blocklist, which name labels
/// the Prometheus-only (no inventory) nodes do not carry.
fn plain_taskmanager_review(uid: &str) -> Value {
    let mut review = webhook::taskmanager_review(uid);
    let spec = &mut review["request"]["object"]["spec"];
    if let Some(spec) = spec.as_object_mut() {
        spec.remove("nodeSelector");
        spec.remove("affinity");
    }
    review
}

/// First-tier nodes named by the decision annotation, read from the patched pod.
fn first_tier(sent: &Value, reply: &webhook::Reply) -> Vec<String> {
    let patch = reply.patch().expect("a patch");
    let mut pod = sent["request"]["object"].clone();
    json_patch::patch(&mut pod, &patch).expect("patch applies");
    let note = pod["metadata"]["annotations"]["placement-webhook.io/decision"]
        .as_str()
        .expect("decision annotation");
    DecisionNote::parse(note)
        .expect("a decision note")
        .nodes
        .into_iter()
        .map(|(node, _)| node)
        .collect()
}

fn webhook_config(url: &str, max_staleness: Duration) -> Config {
    Config {
        metrics_file: None,
        max_staleness,
        prometheus: Some(source_config(
            url,
            NodeMapping::Label {
                name: "node".into(),
            },
        )),
        // Exact answers: no near-tie shuffling between the coolest nodes.
        placement: placement_webhook::config::PlacementConfig {
            tie_band: 0.0,
            ..webhook::test_config().placement
        },
        ..webhook::test_config()
    }
}

async fn wait_for_nodes(running: &placement_webhook::app::Running, count: usize) {
    let deadline = Instant::now() + Duration::from_secs(40);
    while running
        .store
        .current()
        .is_none_or(|v| v.nodes.len() != count)
    {
        assert!(Instant::now() < deadline, "webhook never saw {count} nodes");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // A full rate window of history, so readings are steady.
    tokio::time::sleep(Duration::from_secs(6)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decisions_prefer_the_cool_nodes_and_the_cli_reads_prometheus() {
    let binary = prometheus::binary();
    let exporter = Exporter::start(fleet(NODES)).await;
    let prom = Prometheus::start(binary, &[exporter.addr]).await;
    let running = webhook::start(webhook_config(&prom.url(), Duration::from_secs(120))).await;
    wait_for_nodes(&running, NODES).await;
    let client = webhook::self_signed_client(&running);

    let sent = plain_taskmanager_review("live-1");
    let reply = client.review(&sent).await;
    assert_eq!(reply.status, 200);
    // One landing node, the coolest: the scheduler scores every node of a small cluster.
    assert_eq!(first_tier(&sent, &reply), ["worker-0000"]);
    // The 95 % node is hot: never preferred, named in the avoid term.
    let view = running.store.current().expect("view");
    let hot: Vec<_> = view
        .hot_nodes
        .iter()
        .map(|&i| view.nodes[i].name.clone())
        .collect();
    assert_eq!(hot, ["worker-0011"]);

    // The dry-run CLI: --prometheus-url over a config file that sets the rate window (a series
    // younger than the default 2 m window reads low) and no near-tie band (exact answers),
    // default uname mapping.
    let dir = tempfile::tempdir().expect("tmp");
    let config_path = dir.path().join("config.yaml");
    std::fs::write(
        &config_path,
        "prometheus:\n  url: http://unused.invalid:9090\n  rate_window: 5s\nplacement:\n  tie_band: 0\n",
    )
    .expect("write config");
    let review_path = dir.path().join("review.json");
    let sent = plain_taskmanager_review("cli-1");
    std::fs::write(&review_path, sent.to_string()).expect("write");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_placement-webhook"))
        .arg("review")
        .arg(&review_path)
        .arg("--prometheus-url")
        .arg(prom.url())
        .arg("--config")
        .arg(&config_path)
        .arg("--explain")
        .output()
        .expect("run review");
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{stderr}");
    let answer = webhook::Reply {
        status: 200,
        body: out.stdout,
    };
    assert_eq!(answer.json()["response"]["uid"], "cli-1");
    assert_eq!(first_tier(&sent, &answer), ["worker-0000"], "{stderr}");
    // No running siblings of this job: charged what it requests.
    assert!(
        stderr.contains("charged load: 2.100 cores, 0 B/s network, from its request"),
        "{stderr}"
    );
    let note = answer.json()["response"]["auditAnnotations"]["decision"].to_string();
    assert!(note.contains(" est=request "), "{note}");
    running.stop().await;
}

/// Answers a review and returns (patched, warning text).
/// The value of one exposed series (0 when absent).
fn sample(metrics: &str, series: &str) -> f64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or(0.0)
}

async fn probe(client: &webhook::Client, uid: &str) -> (Option<Vec<String>>, String) {
    let sent = plain_taskmanager_review(uid);
    let reply = client.review(&sent).await;
    assert_eq!(reply.status, 200, "the webhook keeps answering");
    let review = reply.json();
    assert_eq!(review["response"]["allowed"], true);
    let warnings = review["response"]["warnings"].to_string();
    let patched = reply.patch().is_some().then(|| first_tier(&sent, &reply));
    (patched, warnings)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn faults_keep_the_last_snapshot_then_fail_open_and_recover() {
    let binary = prometheus::binary();
    let fleet = fleet(6);
    let exporter = Exporter::start(fleet.clone()).await;
    let mut prom = Prometheus::start(binary, &[exporter.addr]).await;
    let max_staleness = Duration::from_secs(4);
    let running = webhook::start(webhook_config(&prom.url(), max_staleness)).await;
    wait_for_nodes(&running, 6).await;
    let client = webhook::self_signed_client(&running);
    let (patched, _) = probe(&client, "f-1").await;
    assert_eq!(
        patched.expect("patched").first().map(String::as_str),
        Some("worker-0000")
    );

    // The two coolest nodes go bad: NaN readings, and series that vanish.
    exporter.update("worker-0000", |n| n.emit = Emit::NaN);
    exporter.update("worker-0001", |n| n.emit = Emit::Missing);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let view = running.store.current().expect("view");
        let names: Vec<_> = view.nodes.iter().map(|n| n.name.as_str()).collect();
        if !names.contains(&"worker-0000") && !names.contains(&"worker-0001") {
            assert_eq!(names.len(), 4);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "bad nodes still in the view: {names:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (patched, _) = probe(&client, "f-2").await;
    let tier = patched.expect("still patched");
    assert!(
        !tier
            .iter()
            .any(|n| n == "worker-0000" || n == "worker-0001"),
        "a node without readings was preferred: {tier:?}"
    );

    // Prometheus goes away: the last snapshot serves until max_staleness, then fail open.
    prom.stop();
    let stopped = Instant::now();
    let mut served_stale_free = false;
    let mut failed_open = false;
    let mut n = 0;
    while stopped.elapsed() < max_staleness + Duration::from_secs(6) {
        n += 1;
        let (patched, warnings) = probe(&client, &format!("down-{n}")).await;
        match patched {
            Some(_) => {
                assert!(!failed_open, "patched again while Prometheus is still down");
                served_stale_free = true;
            }
            None => {
                assert!(
                    warnings.contains("stale"),
                    "fail-open warning names the reason: {warnings}"
                );
                failed_open = true;
            }
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(
        served_stale_free,
        "the last good snapshot was used while young"
    );
    assert!(failed_open, "stale snapshot made the webhook fail open");
    let metrics = String::from_utf8(client.get("/metrics").await.body).expect("utf8");
    // These series exist at 0 from the start: the counts must have moved.
    assert!(
        sample(
            &metrics,
            "placement_webhook_prometheus_query_errors_total{query=\"cpu\"}"
        ) >= 1.0,
        "query errors are counted:\n{metrics}"
    );
    assert!(
        sample(
            &metrics,
            "placement_webhook_reviews_total{outcome=\"failed_open\"}"
        ) >= 1.0,
        "fail-open reviews are counted:\n{metrics}"
    );

    // Prometheus comes back, the nodes recover: patches resume.
    exporter.update("worker-0000", |n| n.emit = Emit::Normal);
    exporter.update("worker-0001", |n| n.emit = Emit::Normal);
    prom.restart().await;
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        n += 1;
        if probe(&client, &format!("up-{n}")).await.0.is_some() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no patch after Prometheus came back"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    running.stop().await;
}

/// A pod as the pod watch sees it: running since `started_secs` ago.
fn running_pod(name: &str, app: &str, started_secs: u64) -> k8s_openapi::api::core::v1::Pod {
    let started = k8s_openapi::jiff::Timestamp::try_from(
        std::time::SystemTime::now() - Duration::from_secs(started_secs),
    )
    .expect("timestamp");
    serde_json::from_value(serde_json::json!({
        "metadata": {"namespace": "flink", "name": name,
                     "labels": {"app": app, "component": "taskmanager"}},
        "status": {"phase": "Running", "containerStatuses": [{
            "name": "flink-main-container", "image": "flink", "imageID": "", "ready": true,
            "restartCount": 0, "state": {"running": {"startedAt": started.to_string()}}}]}
    }))
    .expect("pod")
}

/// A new TaskManager of `app` requesting 2 cores, limited to 4.
fn new_taskmanager(app: &str) -> k8s_openapi::api::core::v1::Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"namespace": "flink", "name": format!("{app}-tm-new"),
                     "labels": {"app": app, "component": "taskmanager"}},
        "spec": {"containers": [{"name": "flink-main-container", "image": "flink",
            "resources": {"requests": {"cpu": "2", "memory": "4Gi"},
                          "limits": {"cpu": "4", "memory": "4Gi"}}}]}
    }))
    .expect("pod")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_taskmanagers_are_estimated_from_their_running_siblings() {
    use placement_webhook::admission;
    use placement_webhook::inflight::ledger::Ledger;
    use placement_webhook::inflight::world::World;
    use placement_webhook::placement::LoadSource;
    use placement_webhook::view::ViewStore;
    use std::sync::Arc;
    use support::exporter::FakePod;

    let binary = prometheus::binary();
    let hour = 3600;
    // (pod, job, cores used, network bytes/s, running for seconds, NaN samples)
    let running: &[(&str, &str, f64, f64, u64, bool)] = &[
        // Over-provisioned: a third of its 2-core request.
        ("lazy-1", "lazy", 0.6, 1e6, hour, false),
        ("lazy-2", "lazy", 0.6, 1e6, hour, false),
        ("lazy-3", "lazy", 0.7, 1e6, hour, false),
        // CPU-bound: past its request, held at the 4-core limit.
        ("busy-1", "busy", 4.5, 1e6, hour, false),
        ("busy-2", "busy", 4.5, 1e6, hour, false),
        // Network-heavy.
        ("chatty-1", "chatty", 0.5, 1e8, hour, false),
        ("chatty-2", "chatty", 0.5, 1e8, hour, false),
        ("chatty-3", "chatty", 0.5, 1.2e8, hour, false),
        // One readable sibling only: the other's samples are NaN.
        ("flaky-1", "flaky", 1.0, 1e6, hour, true),
        ("flaky-2", "flaky", 1.0, 1e6, hour, false),
        // Just started: their rates read low.
        ("fresh-1", "fresh", 1.0, 1e6, 10, false),
        ("fresh-2", "fresh", 1.0, 1e6, 10, false),
    ];
    let pods = running
        .iter()
        .map(|&(name, _, cpu, net, _, nan)| {
            let mut pod = FakePod::new("flink", name, cpu, net);
            pod.nan = nan;
            pod
        })
        .chain([FakePod::new("flink", "not-watched", 9.0, 0.0)])
        .collect();
    let exporter = Exporter::start_with_pods(fleet(4), pods).await;
    let prom = Prometheus::start(binary, &[exporter.addr]).await;
    let source = PrometheusSource::new(source_config(
        &prom.url(),
        NodeMapping::Label {
            name: "node".into(),
        },
    ))
    .expect("source");
    let mut snapshot = refreshed(&source, None, 4).await;
    assert!(
        snapshot.pods.iter().all(|p| p.pod != "flaky-1"),
        "NaN readings are dropped"
    );

    // What the pod watch knows: which pods run, for which job, since when.
    let mut world = World::new(Ledger::new(Duration::from_secs(90)));
    for &(name, app, _, _, since, _) in running {
        world
            .cluster
            .running
            .update(&running_pod(name, app, since), false, false);
    }
    world.cluster.running.label(&mut snapshot);
    assert!(snapshot.pods.iter().all(|p| p.pod != "not-watched"));

    let config = Config::default();
    let store = Arc::new(ViewStore::new(config.placement.clone()));
    store.publish_snapshot(snapshot);
    let view = store.current().expect("view");
    let close = |got: f64, want: f64| (got - want).abs() <= 0.05 * want;
    for (app, cpu, net, source) in [
        ("lazy", 0.6, 1e6, LoadSource::Siblings(3)),
        ("busy", 4.0, 1e6, LoadSource::Siblings(2)),
        ("chatty", 0.5, 1e8, LoadSource::Siblings(3)),
        ("flaky", 2.0, 0.0, LoadSource::Request),
        ("fresh", 2.0, 0.0, LoadSource::Request),
        ("unknown", 2.0, 0.0, LoadSource::Request),
    ] {
        let pod = new_taskmanager(app);
        let demand = admission::demand(&config, &pod, Some(&view));
        assert_eq!(demand.source, source, "{app}");
        assert!(
            close(demand.load.cpu_cores, cpu),
            "{app}: cpu {} vs {cpu}",
            demand.load.cpu_cores
        );
        assert!(
            close(demand.load.network_bytes_per_second, net),
            "{app}: network {} vs {net}",
            demand.load.network_bytes_per_second
        );
    }
}

/// One node at the cluster's highest traffic with a touch less CPU than five nodes whose NICs
/// are idle, one warm node and one hot one. `link_speed`: whether the NICs report it.
fn fleet_with_one_busy_nic(link_speed: bool) -> Vec<FakeNode> {
    let mut nodes: Vec<FakeNode> = (0..8)
        .map(|i| {
            let (busy, net) = match i {
                0 => (0.29, 6.0e8),
                1..=5 => (0.30, 1.0e6),
                6 => (0.60, 5.0e7),
                _ => (0.95, 1.0e6),
            };
            FakeNode::new(i, busy, net)
        })
        .collect();
    if !link_speed {
        for n in &mut nodes {
            n.nic_bytes_per_second = 0.0;
        }
    }
    nodes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_nic_is_not_first_for_a_taskmanager_without_a_network_estimate() {
    let binary = prometheus::binary();
    for link_speed in [false, true] {
        let exporter = Exporter::start(fleet_with_one_busy_nic(link_speed)).await;
        let prom = Prometheus::start(binary.clone(), &[exporter.addr]).await;
        // Exact ranking (no near-tie band), then the default band.
        for tie_band in [0.0, PlacementConfig::default().tie_band] {
            let mut config = webhook_config(&prom.url(), Duration::from_secs(120));
            config.placement.tie_band = tie_band;
            let running = webhook::start(config).await;
            wait_for_nodes(&running, 8).await;
            let view = running.store.current().expect("view");
            let busy = view.node("worker-0000").expect("busy-NIC node");
            assert_eq!(busy.scale.network_is_capacity, link_speed);
            let client = webhook::self_signed_client(&running);
            for k in 0..3 {
                let sent =
                    plain_taskmanager_review(&format!("quiet-nic-{link_speed}-{tie_band}-{k}"));
                let reply = client.review(&sent).await;
                let first = first_tier(&sent, &reply);
                assert!(
                    first.iter().all(|n| n != "worker-0000")
                        && [
                            "worker-0001",
                            "worker-0002",
                            "worker-0003",
                            "worker-0004",
                            "worker-0005"
                        ]
                        .contains(&first[0].as_str()),
                    "link speed {link_speed}, tie band {tie_band}, review {k}: {first:?}"
                );
            }
            running.stop().await;
        }
    }
}
