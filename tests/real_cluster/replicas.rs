//! Two replicas as shipped: one Service (a per-connection balancer in front, as a Service's
//! virtual IP is), one EndpointSlice per replica, the shared Secret's certificate; reviews
//! spread over both, forwarded to the decider; the decider killed mid-burst and the other
//! deciding in its place.

use std::time::Duration;

use serde_json::Value;

use crate::fixture::{Cluster, FLINK, Setup, decision, serial};
use crate::support::kube::objects::{self, taskmanager};
use crate::support::kube::webhook::{NAMESPACE, sum};

const FORWARDED: &str = "placement_webhook_forwarded_reviews_total";
const REVIEWS: &str = "placement_webhook_reviews_total";

fn burst(from: usize, count: usize) -> Vec<Value> {
    (from..from + count)
        .map(|i| taskmanager(&format!("wordcount-taskmanager-1-{i}"), "wordcount", "1"))
        .collect()
}

/// Creates the pods 8 at a time, as Flink's resource manager does; every one must come back
/// steered.
async fn create_steered(cluster: &Cluster, pods: &[Value]) {
    for chunk in pods.chunks(8) {
        let created = objects::create_pods(&cluster.admin, FLINK, chunk).await;
        for pod in &created {
            assert!(
                decision(pod).is_some(),
                "{:?} not steered:\n{}",
                pod.metadata.name,
                cluster.logs()
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_forward_to_the_decider_and_the_other_takes_over_when_it_dies() {
    let _serial = serial().await;
    let mut setup = Setup::nodes(12);
    setup.replicas = 2;
    let mut cluster = Cluster::start(setup).await;
    assert!(cluster.balancer.is_some());
    let ca = cluster.ca_pem();

    create_steered(&cluster, &burst(0, 24)).await;
    let decider = cluster.replicas[0].metrics(&ca).await;
    let other = cluster.replicas[1].metrics(&ca).await;
    // The lowest-named replica decides; the other forwarded what the balancer sent it.
    assert_eq!(sum(&decider, FORWARDED, &[]), 0.0, "the decider forwarded");
    let answered = sum(&other, FORWARDED, &[("result", "answered")]);
    assert!(answered >= 1.0, "no review forwarded:\n{other}");
    assert_eq!(sum(&other, FORWARDED, &[("result", "failed")]), 0.0);
    // Every review was decided by the decider: those the balancer sent it and those forwarded.
    assert_eq!(sum(&decider, REVIEWS, &[]), 24.0);
    assert_eq!(sum(&other, REVIEWS, &[]), 0.0, "the other replica decided");

    // The decider dies mid-burst; its endpoint goes as the endpoint controller would take it.
    cluster.replicas[0].process.stop();
    tokio::time::sleep(Duration::from_millis(500)).await;
    create_steered(&cluster, &burst(24, 8)).await;
    let other = cluster.replicas[1].metrics(&ca).await;
    let not_answered = sum(&other, FORWARDED, &[("result", "failed")])
        + sum(&other, FORWARDED, &[("result", "resting")]);
    assert!(
        not_answered >= 1.0,
        "the survivor never found the decider gone:\n{other}"
    );
    cluster.plane.kubectl(&[
        "delete",
        "endpointslice",
        "-n",
        NAMESPACE,
        "placement-webhook-0",
    ]);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = cluster.replicas[1].metrics(&ca).await;
    create_steered(&cluster, &burst(32, 8)).await;
    let after = cluster.replicas[1].metrics(&ca).await;
    assert_eq!(
        sum(&after, FORWARDED, &[]),
        sum(&before, FORWARDED, &[]),
        "the survivor still forwards with no other replica listed"
    );
    assert_eq!(
        sum(&after, REVIEWS, &[]) - sum(&before, REVIEWS, &[]),
        8.0,
        "the survivor did not decide every review"
    );
    let names: Vec<String> = (0..40)
        .map(|i| format!("wordcount-taskmanager-1-{i}"))
        .collect();
    let bound = cluster.bound(FLINK, &names).await;
    assert_eq!(bound.len(), 40);
    let forbidden = cluster.forbidden_lines();
    assert!(forbidden.is_empty(), "{forbidden:?}");
}
