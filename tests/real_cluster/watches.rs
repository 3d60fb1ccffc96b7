//! The webhook's watches against the real apiserver: node changes seen at once, an apiserver
//! gone and back with etcd compacted meanwhile (the resumed watch is answered 410 Gone and the
//! webhook lists again), nothing charged twice.

use std::time::{Duration, Instant};

use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use serde_json::json;

use crate::fixture::{Cluster, FLINK, Setup, decision, landing, serial};
use crate::support::kube::client_from_kubeconfig;
use crate::support::kube::objects::{self, bound_pod, taskmanager};

const INFLIGHT: &str = "placement_webhook_inflight_entries";

/// Where the decision for a new TaskManager says it lands.
async fn landing_of_new(cluster: &Cluster, name: &str, pod: serde_json::Value) -> Vec<String> {
    let pod = cluster.create(FLINK, &pod).await;
    let note = decision(&pod).unwrap_or_else(|| panic!("{name} not steered"));
    landing(note).into_keys().collect()
}

async fn patch_node(client: &Client, node: &str, patch: serde_json::Value) {
    Api::<k8s_openapi::api::core::v1::Node>::all(client.clone())
        .patch(node, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("patch node");
}

/// A cordon, a taint and a label change on a Node reach the next decision within a second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_changes_reach_the_next_decision_within_a_second() {
    let _serial = serial().await;
    let mut setup = Setup::nodes(4);
    // No scheduler: the pods stay where the decisions put them, charged (1 of 16 cores each,
    // too little to move the coolest node behind the next).
    setup.scheduler = None;
    let cluster = Cluster::start(setup).await;
    let coolest = "node-003";
    let mut changes = 0;
    let mut step = async |change: serde_json::Value, what: &str, pod: serde_json::Value| {
        patch_node(&cluster.admin, coolest, change).await;
        tokio::time::sleep(Duration::from_secs(1)).await;
        changes += 1;
        let name = format!("tm-{changes}");
        let mut pod = pod;
        pod["metadata"]["name"] = json!(name);
        let land = landing_of_new(&cluster, &name, pod).await;
        (what.to_string(), land)
    };
    let plain = taskmanager("x", "job", "1");

    let (_, before) = step(
        json!({"metadata": {"labels": {"seen": "0"}}}),
        "",
        plain.clone(),
    )
    .await;
    assert_eq!(before, [coolest], "the coolest node first");

    let (what, land) = step(
        json!({"spec": {"unschedulable": true}}),
        "cordon",
        plain.clone(),
    )
    .await;
    assert!(!land.contains(&coolest.to_string()), "{what}: {land:?}");
    step(
        json!({"spec": {"unschedulable": null}}),
        "uncordon",
        plain.clone(),
    )
    .await;

    let taint = json!({"spec": {"taints": [{"key": "dedicated", "value": "other", "effect": "NoSchedule"}]}});
    let (what, land) = step(taint, "taint", plain.clone()).await;
    assert!(!land.contains(&coolest.to_string()), "{what}: {land:?}");
    let (_, land) = step(json!({"spec": {"taints": null}}), "untaint", plain.clone()).await;
    assert_eq!(land, [coolest], "untainted");

    let mut selecting = plain.clone();
    selecting["spec"]["nodeSelector"] = json!({"pool": "flink"});
    let (what, land) = step(
        json!({"metadata": {"labels": {"pool": "flink"}}}),
        "label",
        selecting,
    )
    .await;
    assert_eq!(land, [coolest], "{what}");
}

/// The webhook's apiserver stops; through a second apiserver on the same etcd, a steered pod is
/// deleted, another workload fills the coolest node and etcd's history is compacted; the first
/// apiserver comes back. The webhook's watches, resumed from a compacted resourceVersion, list
/// again: the deleted pod's charge is gone, the full node is avoided, and no pod is charged
/// twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_apiserver_restart_over_a_compacted_history_relists_without_double_charges() {
    let _serial = serial().await;
    let mut setup = Setup::nodes(6);
    // Unbound, steered pods stay charged: what a relist could count twice.
    setup.scheduler = None;
    let mut cluster = Cluster::start(setup).await;
    let coolest = "node-005";
    let names: Vec<String> = (0..3).map(|i| format!("tm-{i}")).collect();
    for name in &names {
        let pod = cluster.create(FLINK, &taskmanager(name, "job", "1")).await;
        assert!(decision(&pod).is_some());
    }
    cluster.wait_metric(INFLIGHT, &[], 3.0).await;
    assert_eq!(cluster.metric_sum(INFLIGHT, &[]).await, 3.0);

    let (mut second, kubeconfig) = cluster.plane.second_apiserver().await;
    cluster.plane.stop_apiserver();
    let other = client_from_kubeconfig(&kubeconfig).await;
    objects::delete_pod_now(&other, FLINK, "tm-0").await;
    objects::create_namespace(&other, "other", false).await;
    objects::create_pod(&other, "other", &bound_pod("filler", coolest, "15")).await;
    cluster.plane.compact_etcd().await;
    cluster.plane.start_apiserver().await;
    second.stop();

    // The deleted pod's charge goes once the watch has listed again.
    // The watches retry with backoff (up to 30 s between attempts) while the apiserver is away.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let inflight = cluster.metric_sum(INFLIGHT, &[]).await;
        if inflight == 2.0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{inflight} pods charged 60 s after the apiserver came back:\n{}",
            cluster.logs()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let land = landing_of_new(&cluster, "tm-3", taskmanager("tm-3", "job", "2")).await;
    assert!(!land.is_empty(), "no landing");
    assert!(
        !land.contains(&coolest.to_string()),
        "the filled node was not seen: {land:?}"
    );
    cluster.wait_metric(INFLIGHT, &[], 3.0).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        cluster.metric_sum(INFLIGHT, &[]).await,
        3.0,
        "charged twice"
    );
    let log = cluster.replicas[0].log();
    assert!(
        log.contains("watch failing") && log.contains("recovered"),
        "the watches never noticed the apiserver go:\n{}",
        cluster.logs()
    );
    // Resumed from a compacted resourceVersion: answered 410 Gone, and listed again.
    assert!(
        log.contains("code: 410"),
        "no watch was answered 410 Gone:\n{}",
        cluster.logs()
    );
}

/// At start the webhook lists 5,000 Nodes and 20,000 Pods in pages and misses none: every node
/// but one is full of bound pods, so the only node a TaskManager fits on is the one left, the
/// hottest in the snapshot; a single pod missed would make a cooler node look free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_thousand_nodes_and_twenty_thousand_pods_are_listed_in_pages_at_start() {
    let _serial = serial().await;
    const NODES: usize = 5_000;
    let mut setup = Setup::nodes(0);
    setup.scheduler = None;
    setup.nodes = (0..NODES)
        .map(|i| {
            let spec = crate::support::kube::objects::NodeSpec::new(
                &format!("node-{i:04}"),
                &format!("zone-{}", ["a", "b", "c"][i % 3]),
                16,
            );
            (spec, if i == NODES - 1 { 0.8 } else { 0.2 })
        })
        .collect();
    // The webhook starts only once everything exists: its first list is what is checked.
    setup.replicas = 0;
    let started = Instant::now();
    let mut cluster = Cluster::start(setup).await;
    let nodes_created = started.elapsed();
    objects::create_namespace(&cluster.admin, "running", false).await;
    // Four pods of 4 cores on each node but the last, which gets three of 1 core.
    let pods: Vec<serde_json::Value> = (0..NODES)
        .flat_map(|n| {
            let last = n == NODES - 1;
            (0..4).filter(move |p| !last || *p < 3).map(move |p| {
                bound_pod(
                    &format!("other-{n:04}-{p}"),
                    &format!("node-{n:04}"),
                    if last { "1" } else { "4" },
                )
            })
        })
        .collect();
    assert_eq!(pods.len(), 4 * NODES - 1);
    objects::create_many(&cluster.admin, "running", &pods, 32).await;
    let pods_created = started.elapsed();
    let lists_before = list_requests(&cluster);

    let port = crate::support::kube::free_port();
    crate::support::kube::webhook::register_at(
        &cluster.plane,
        &format!("https://127.0.0.1:{port}/mutate"),
        &cluster.certs.ca_bundle,
    );
    cluster.start_replica("placement-webhook-0", port);
    let ca = cluster.ca_pem();
    cluster.replicas[0].wait_ready(&ca).await;
    let ready = started.elapsed();
    assert_eq!(
        cluster
            .metric_sum("placement_webhook_inventory_nodes", &[])
            .await,
        NODES as f64
    );
    let pages = list_requests(&cluster) - lists_before;
    assert!(
        pages >= (4 * NODES / 500) as f64,
        "{pages} pod LIST requests: the 20,000 pods were not read in pages"
    );
    let land = landing_of_new(&cluster, "tm-0", taskmanager("tm-0", "job", "2")).await;
    assert_eq!(land, [format!("node-{:04}", NODES - 1)]);
    eprintln!(
        "5,000 nodes created in {:.0?}, 19,999 pods by {:.0?}, webhook ready by {:.0?} \
         ({pages} pod pages)",
        nodes_created, pods_created, ready
    );
}

/// LIST requests for pods the apiserver has served so far.
fn list_requests(cluster: &Cluster) -> f64 {
    crate::support::kube::webhook::sum(
        &cluster.plane.metrics(),
        "apiserver_request_total",
        &[("resource", "pods"), ("verb", "LIST")],
    )
}
