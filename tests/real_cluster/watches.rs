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
    let Some(cluster) = Cluster::start(setup).await else {
        return;
    };
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
    let Some(mut cluster) = Cluster::start(setup).await else {
        return;
    };
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
}
