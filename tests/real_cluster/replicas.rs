//! Two replicas as shipped: the Service the apiserver calls reaches only the deciding replica
//! (the Lease's holder writes itself into the Service's EndpointSlice; a balancer in front
//! follows that slice, as kube-proxy does), the other stays warm. Reviews go straight to the
//! decider: nothing is forwarded. The decider is SIGKILLed in the middle of a burst; the other
//! takes the Lease, writes itself into the slice, and steers again.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::fixture::{Cluster, FLINK, Setup, decision, serial};
use crate::living::{deciding_inflight, estimates_by_pod};
use crate::support::kube::objects::{self, taskmanager};
use crate::support::kube::webhook::{NAMESPACE, sum};

const FORWARDED: &str = "placement_webhook_forwarded_reviews_total";
const REVIEWS: &str = "placement_webhook_reviews_total";
const WEBHOOK: &str = "taskmanagers.placement-webhook.io";
/// Pods created one after another once the decider is killed, 100 ms apart.
const AFTER_KILL: usize = 80;
/// The longest the Service may send reviews nowhere after the decider dies (the Lease lapses
/// 3 s after its last renewal; the standby then takes it and writes the slice).
const STEERING_BACK: Duration = Duration::from_secs(5);

fn taskmanagers(from: usize, count: usize) -> Vec<Value> {
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
async fn reviews_reach_the_deciding_replica_and_a_standby_takes_over_when_it_is_killed() {
    let _serial = serial().await;
    let mut setup = Setup::nodes(12);
    setup.replicas = 2;
    let mut cluster = Cluster::start(setup).await;
    assert!(cluster.balancer.is_some());
    let ca = cluster.ca_pem();
    let decider = cluster.wait_for_decider(None).await;
    let standby = 1 - decider;

    create_steered(&cluster, &taskmanagers(0, 24)).await;
    let deciding = cluster.replicas[decider].metrics(&ca).await;
    let warm = cluster.replicas[standby].metrics(&ca).await;
    // Every review reached the decider: none went to the standby, none was forwarded.
    assert_eq!(
        sum(&deciding, REVIEWS, &[]),
        24.0,
        "reviews the decider took"
    );
    assert_eq!(sum(&warm, REVIEWS, &[]), 0.0, "reviews the standby took");
    assert_eq!(
        sum(&deciding, FORWARDED, &[]) + sum(&warm, FORWARDED, &[]),
        0.0
    );

    // Mid-burst: 8 more in flight, the decider SIGKILLed, then one pod every 100 ms.
    let (admin, in_flight) = (cluster.admin.clone(), taskmanagers(24, 8));
    let mut killed = Instant::now();
    let (in_burst, ()) = tokio::join!(objects::create_pods(&admin, FLINK, &in_flight), async {
        tokio::time::sleep(Duration::from_millis(20)).await;
        killed = Instant::now();
        cluster.replicas[decider].process.stop();
        // Its endpoint in the live set goes, as the EndpointSlice controller takes a dead pod's.
        cluster.plane.kubectl(&[
            "delete",
            "endpointslice",
            "-n",
            NAMESPACE,
            &format!("placement-webhook-{decider}"),
        ]);
    });
    let mut after: Vec<(Duration, bool)> = Vec::new();
    for pod in &taskmanagers(32, AFTER_KILL) {
        let created = objects::create_pod(&cluster.admin, FLINK, pod).await;
        after.push((killed.elapsed(), decision(&created).is_some()));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let new_decider = cluster.wait_for_decider(Some(decider)).await;
    assert_eq!(new_decider, standby);

    // Figures: what happened to each pod after the kill, from the pods and the apiserver.
    let unsteered_in_burst = in_burst.iter().filter(|p| decision(p).is_none()).count();
    let last_unsteered = after.iter().rposition(|(_, steered)| !steered);
    let steered_again = match last_unsteered {
        Some(i) => after.get(i + 1).map(|(at, _)| *at),
        None => after.first().map(|(at, _)| *at),
    }
    .expect("a steered pod after the takeover");
    let unsteered_after = after.iter().filter(|(_, steered)| !steered).count();
    let apiserver = cluster.plane.metrics();
    let failed_open = sum(
        &apiserver,
        "apiserver_admission_webhook_fail_open_count",
        &[("name", WEBHOOK)],
    );
    let survivor = cluster.replicas[standby].metrics(&ca).await;
    let forwarded = sum(&survivor, FORWARDED, &[]);
    println!(
        "takeover: decider placement-webhook-{decider} SIGKILLed mid-burst; \
         {unsteered_in_burst} of 8 in flight and {unsteered_after} of {AFTER_KILL} after admitted \
         unsteered (the apiserver failed open {failed_open} times); steering again {:.2} s \
         after the kill; the standby forwarded {forwarded} reviews; 0 refused",
        steered_again.as_secs_f64()
    );
    // Nothing refused (a refused create fails the test above); every pod the webhook did not
    // steer is one the apiserver counted as failed open.
    assert_eq!(
        failed_open,
        (unsteered_in_burst + unsteered_after) as f64,
        "pods admitted unsteered against the apiserver's fail-open count"
    );
    assert!(
        steered_again <= STEERING_BACK,
        "steering came back {steered_again:?} after the kill (target {STEERING_BACK:?})\n{}",
        cluster.logs()
    );

    // No pod charged twice, none lost: the new decider charges what every steered pod's
    // decision estimated, once (the pods never start here, so every charge stands).
    let estimates = estimates_by_pod(&cluster, FLINK).await;
    let estimated: f64 = estimates.values().sum();
    // A refresh after the takeover: the snapshot rewritten a second later (same loads).
    let asked = std::time::SystemTime::now();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    cluster.write_snapshot();
    let inflight = deciding_inflight(&cluster, &[standby], asked).await;
    let charged: f64 = inflight.charged.values().sum();
    println!(
        "  the new decider charges {charged:.2} cores for {} steered pods estimated at {estimated:.2}",
        estimates.len()
    );
    assert!(
        (charged - estimated).abs() < 0.01,
        "charged {charged:.2} cores against {estimated:.2} estimated"
    );

    let names: Vec<String> = (0..32 + AFTER_KILL)
        .map(|i| format!("wordcount-taskmanager-1-{i}"))
        .collect();
    let bound = cluster.bound(FLINK, &names).await;
    assert_eq!(bound.len(), names.len());
    let forbidden = cluster.forbidden_lines();
    assert!(forbidden.is_empty(), "{forbidden:?}");
}
