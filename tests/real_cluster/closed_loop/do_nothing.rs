//! The burst through a webhook that does nothing: the installed replicas, called for every
//! pod of their own namespace by a second registration, each pod opting out
//! (`placement-webhook.io/skip`), so each review is the same TLS round trip, parse and answer,
//! with no decision and no patch. Its time from the first create to the last bind, against the
//! webhook's, is what the decision and its terms cost the burst.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::PostParams;
use serde_json::Value;

use super::{burst_on_real_scheduler, delete_burst};
use crate::fixture::Cluster;
use crate::support::kube::objects;
use crate::support::kube::webhook::register_unconditional_copy;

const NAMESPACE: &str = "do-nothing";
const LABEL: (&str, &str) = ("closed-loop.test/do-nothing", "true");
const REVIEWS: &str = "placement_webhook_reviews_total";
const SKIPPED: [(&str, &str); 1] = [("outcome", "skipped")];

/// `pods` once more through the do-nothing webhook, after the plain burst's pods are deleted;
/// the time from the first create to the last bind. Fails when a pod was not reviewed.
pub(super) async fn burst(
    cluster: &Cluster,
    pods: &[Value],
    index: &BTreeMap<String, usize>,
) -> Duration {
    delete_burst(cluster, "plain").await;
    let labels = serde_json::json!({LABEL.0: LABEL.1});
    objects::create_namespace_labelled(&cluster.admin, NAMESPACE, labels).await;
    register_unconditional_copy(&cluster.plane, "placement-webhook-do-nothing", LABEL);
    let opted_out: Vec<Value> = pods.iter().cloned().map(opt_out).collect();
    wait_until_reviewed(cluster, &opted_out[0]).await;
    let before = cluster.metric_sum(REVIEWS, &SKIPPED).await;
    let (_, took) = burst_on_real_scheduler(cluster, NAMESPACE, &opted_out, index).await;
    let reviewed = cluster.metric_sum(REVIEWS, &SKIPPED).await - before;
    assert!(
        reviewed >= pods.len() as f64,
        "the do-nothing webhook reviewed {reviewed} of {} pods",
        pods.len()
    );
    took
}

/// The pod with `placement-webhook.io/skip: "true"`.
fn opt_out(mut pod: Value) -> Value {
    pod["metadata"]["annotations"]["placement-webhook.io/skip"] = Value::from("true");
    pod
}

/// Dry-run creates of `pod` until one reaches the webhook: the apiserver calls a
/// configuration only once its informer holds it. A minute at most.
async fn wait_until_reviewed(cluster: &Cluster, pod: &Value) {
    let pods = Api::<Pod>::namespaced(cluster.admin.clone(), NAMESPACE);
    let pod: Pod = serde_json::from_value(pod.clone()).expect("pod");
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let before = cluster.metric_sum(REVIEWS, &SKIPPED).await;
        pods.create(&dry_run, &pod).await.expect("dry-run create");
        if cluster.metric_sum(REVIEWS, &SKIPPED).await > before {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the do-nothing registration never took effect"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
