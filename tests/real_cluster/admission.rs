//! The admission contract through the real apiserver: what it sends, what it applies and
//! validates, what the real scheduler then does with the patched pod.

use std::time::{Duration, Instant};

use kube::api::PostParams;
use serde_json::json;

use crate::fixture::{
    Cluster, FLINK, Setup, decision, landing, preferred, preferred_terms, serial,
};
use crate::support::kube::free_port;
use crate::support::kube::objects::{self, create_namespace, taskmanager};
use crate::support::kube::webhook::{self, Replica, ReplicaOptions};

const INFLIGHT: &str = "placement_webhook_inflight_entries";
const REVIEWS: &str = "placement_webhook_reviews_total";
const LANDINGS: &str = "placement_webhook_landings_total";

/// A TaskManager created in a labelled namespace is patched; the patched pod passes the
/// apiserver's validation; the real scheduler binds it where the decision said it would land,
/// and the webhook's pod watch counts the landing as on a first-tier node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_taskmanager_is_patched_validated_and_bound_where_the_decision_said() {
    let _serial = serial().await;
    let cluster = Cluster::start(Setup::nodes(8)).await;
    let mut names = Vec::new();
    let mut notes = Vec::new();
    for i in 0..4 {
        let name = format!("wordcount-taskmanager-1-{i}");
        let pod = cluster
            .create(FLINK, &taskmanager(&name, "wordcount", "2"))
            .await;
        let note = decision(&pod)
            .unwrap_or_else(|| panic!("{name} not steered:\n{}", cluster.logs()))
            .to_string();
        assert!(
            preferred_terms(&pod) >= 1,
            "{name}: no preferred node affinity"
        );
        names.push(name);
        notes.push(note);
        // One at a time: each decision sees the last one bound, as the model of a lone pod says.
        let bound = cluster.bound(FLINK, &names).await;
        let node = &bound[names.last().expect("a name")];
        let land = landing(notes.last().expect("a note"));
        let (predicted, percent) = land
            .iter()
            .max_by_key(|(_, p)| **p)
            .unwrap_or_else(|| panic!("no landing in {:?}", notes.last()));
        assert_eq!(
            node, predicted,
            "pod {i} bound to {node}, the decision said {predicted} at {percent}%"
        );
    }
    cluster
        .wait_metric(LANDINGS, &[("where", "first_tier")], 4.0)
        .await;
    assert_eq!(
        cluster
            .metric_sum(LANDINGS, &[("where", "elsewhere")])
            .await,
        0.0
    );
    // The coolest nodes took them: none went to the hottest half of the cluster.
    let bound = cluster.bound(FLINK, &names).await;
    for node in bound.values() {
        let cpu = cluster
            .nodes
            .iter()
            .find(|(n, _)| &n.name == node)
            .map(|(_, cpu)| *cpu)
            .expect("a known node");
        assert!(cpu < 0.5, "a TaskManager went to {node} at {cpu} CPU");
    }
    assert!(
        cluster.forbidden_lines().is_empty(),
        "{:?}",
        cluster.forbidden_lines()
    );
}

/// What the webhook must leave alone is created unchanged and charged nowhere: a TaskManager in
/// an unlabelled namespace, a JobManager, a pod with the skip annotation, a pod created bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_it_must_not_steer_are_created_unchanged_and_uncharged() {
    let _serial = serial().await;
    let cluster = Cluster::start(Setup::nodes(4)).await;
    create_namespace(&cluster.admin, "plain", false).await;
    let unlabelled = cluster
        .create("plain", &taskmanager("tm-unlabelled-ns", "job", "1"))
        .await;
    let mut jobmanager = taskmanager("jm", "job", "1");
    jobmanager["metadata"]["labels"]["component"] = json!("jobmanager");
    let jobmanager = cluster.create(FLINK, &jobmanager).await;
    let mut skipped = taskmanager("tm-skip", "job", "1");
    skipped["metadata"]["annotations"] = json!({"placement-webhook.io/skip": "true"});
    let skipped = cluster.create(FLINK, &skipped).await;
    let mut bound = taskmanager("tm-bound", "job", "1");
    bound["spec"]["nodeName"] = json!("node-003");
    let bound = cluster.create(FLINK, &bound).await;
    for pod in [&unlabelled, &jobmanager, &skipped, &bound] {
        let name = pod.metadata.name.as_deref().unwrap_or("?");
        assert_eq!(decision(pod), None, "{name} was steered");
        assert_eq!(preferred_terms(pod), 0, "{name} got node affinity");
    }
    // The bound pod reached the webhook (its labels match) and was answered unpatched; the
    // others were filtered by the registration before any call.
    cluster
        .wait_metric(REVIEWS, &[("outcome", outcome("skipped"))], 1.0)
        .await;
    assert_eq!(
        cluster
            .metric_sum(REVIEWS, &[("outcome", outcome("patched"))])
            .await,
        0.0
    );
    assert_eq!(
        cluster.metric_sum(INFLIGHT, &[]).await,
        0.0,
        "something was charged"
    );
}

/// `kubectl create --dry-run=server`: the pod comes back patched, nothing is stored and nothing
/// is charged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_side_dry_run_is_patched_and_not_charged() {
    let _serial = serial().await;
    let cluster = Cluster::start(Setup::nodes(4)).await;
    let pod = objects::create_pod_with(
        &cluster.admin,
        FLINK,
        &taskmanager("tm-dry", "job", "1"),
        &PostParams {
            dry_run: true,
            ..PostParams::default()
        },
    )
    .await;
    assert!(decision(&pod).is_some(), "the dry run was not patched");
    assert!(preferred_terms(&pod) >= 1);
    let manifest = taskmanager("tm-dry-kubectl", "job", "1").to_string();
    let out = cluster.plane.kubectl_with_input(
        &[
            "create",
            "-n",
            FLINK,
            "--dry-run=server",
            "-o",
            "json",
            "-f",
            "-",
        ],
        Some(&manifest),
    );
    assert!(out.contains("placement-webhook.io/decision"), "{out}");
    cluster
        .wait_metric(REVIEWS, &[("outcome", outcome("patched"))], 2.0)
        .await;
    assert_eq!(
        cluster.metric_sum(INFLIGHT, &[]).await,
        0.0,
        "a dry run was charged"
    );
    let (found, _, _) = cluster
        .plane
        .try_kubectl(&["get", "pod", "-n", FLINK, "tm-dry"], None);
    assert!(!found, "a dry run was stored");
}

/// A second mutating webhook, called after ours, changes the pod: the apiserver calls ours again
/// (`reinvocationPolicy: IfNeeded`), which adds no second copy of its terms and no second
/// charge.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reinvocation_adds_no_second_copy_and_no_second_charge() {
    let _serial = serial().await;
    let cluster = Cluster::start(Setup::nodes(4)).await;
    let port = free_port();
    let _mutator = crate::support::kube::process::Process::spawn(
        "mutator",
        &cluster.plane.bin.join("mutator"),
        &[
            format!("--addr=127.0.0.1:{port}"),
            format!("--cert={}", cluster.certs.cert().display()),
            format!("--key={}", cluster.certs.key().display()),
        ],
        &[],
        cluster.plane.dir.path().join("mutator.log"),
    );
    // Named to sort after ours: configurations are called in name order.
    let registration = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "zz-test-mutator"},
        "webhooks": [{
            "name": "mutator.test.io",
            "admissionReviewVersions": ["v1"],
            "clientConfig": {
                "url": format!("https://127.0.0.1:{port}/mutate"),
                "caBundle": cluster.certs.ca_bundle,
            },
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                       "resources": ["pods"]}],
            "failurePolicy": "Fail",
            "sideEffects": "None",
            "timeoutSeconds": 5,
            "reinvocationPolicy": "Never",
        }],
    });
    cluster
        .plane
        .kubectl_with_input(&["apply", "-f", "-"], Some(&registration.to_string()));
    // Wait until the apiserver calls the other webhook, with pods ours is not sent.
    create_namespace(&cluster.admin, "plain", false).await;
    create_when_registered(&cluster, "plain", "probe", "mutator.test/touched").await;
    let pod = cluster
        .create(FLINK, &taskmanager("tm-reinvoked", "job", "1"))
        .await;
    assert!(objects::annotation(&pod, "mutator.test/touched").is_some());
    assert!(decision(&pod).is_some(), "not steered");
    assert!(preferred_terms(&pod) >= 1);
    let reviews = cluster.metric_sum(REVIEWS, &[]).await;
    assert_eq!(
        reviews,
        2.0,
        "the apiserver should call ours twice (first and reinvoked)\n{}",
        cluster.logs()
    );
    assert_eq!(
        cluster
            .metric_sum(REVIEWS, &[("outcome", outcome("patched"))])
            .await,
        1.0
    );
    assert_eq!(
        cluster.metric_sum(INFLIGHT, &[]).await,
        1.0,
        "charged twice"
    );
    let keys: Vec<String> = preferred(&pod)
        .iter()
        .map(|t| format!("{:?}", t.preference))
        .collect();
    let mut unique = keys.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), keys.len(), "a term written twice: {keys:?}");
}

/// Creates pods in `namespace` until one comes back with `annotation` (another webhook's
/// registration takes a moment to reach the apiserver's admission chain).
async fn create_when_registered(cluster: &Cluster, namespace: &str, name: &str, annotation: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    for attempt in 0.. {
        let pod = cluster
            .create(
                namespace,
                &taskmanager(&format!("{name}-{attempt}"), "job", "1"),
            )
            .await;
        if objects::annotation(&pod, annotation).is_some() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the other webhook is never called"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The webhook down, slow beyond `timeoutSeconds`, or serving a certificate the caBundle does
/// not trust: pods are created unchanged within the timeout (`failurePolicy: Ignore`), and the
/// apiserver's own metrics count the failed calls.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_down_slow_or_untrusted_never_blocks_a_pod() {
    let _serial = serial().await;
    let mut cluster = Cluster::start(Setup::nodes(4)).await;
    let timeout = Duration::from_secs(2);

    // Down: nothing listens.
    cluster.replicas[0].process.stop();
    let started = Instant::now();
    let pod = cluster
        .create(FLINK, &taskmanager("tm-down", "job", "1"))
        .await;
    assert_eq!(decision(&pod), None);
    assert!(started.elapsed() < timeout + Duration::from_secs(3));

    // Slow: a listener that accepts and never answers.
    let port = cluster.replicas[0].port;
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .expect("bind the webhook's port");
    let hold = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    let started = Instant::now();
    let pod = cluster
        .create(FLINK, &taskmanager("tm-slow", "job", "1"))
        .await;
    let took = started.elapsed();
    assert_eq!(decision(&pod), None);
    assert!(
        took >= timeout - Duration::from_millis(200),
        "answered in {took:?}"
    );
    assert!(took < timeout + Duration::from_secs(3), "took {took:?}");
    hold.abort();
    let _ = hold.await;

    // Untrusted: the webhook serves, but the registration trusts another CA.
    cluster.replicas.clear();
    let other = webhook::ServingCerts::generate(&cluster.plane.dir.path().join("other"));
    let mut replica = Replica::start(
        cluster.plane.dir.path(),
        ReplicaOptions {
            name: "placement-webhook-0",
            overlay: "deploy",
            certs: &other,
            metrics_file: &cluster.snapshot,
            extra_config: "",
            kubeconfig: &cluster.webhook_kubeconfig,
            port: Some(port),
            hosts: None,
            pod_address: None,
        },
    );
    replica.wait_ready(&other.ca_pem()).await;
    let pod = cluster
        .create(FLINK, &taskmanager("tm-untrusted", "job", "1"))
        .await;
    assert_eq!(decision(&pod), None);
    assert_eq!(
        webhook::sum(&replica.metrics(&other.ca_pem()).await, REVIEWS, &[]),
        0.0,
        "a review was answered over an untrusted connection"
    );

    // The apiserver counts each failed call against the webhook, failing open.
    let metrics = cluster.plane.metrics();
    let failed = webhook::sum(
        &metrics,
        "apiserver_admission_webhook_fail_open_count",
        &[("name", "taskmanagers.placement-webhook.io")],
    );
    assert!(
        failed >= 3.0,
        "fail-open count {failed}:\n{}",
        grep(&metrics, "webhook")
    );
    let calls = webhook::sum(
        &metrics,
        "apiserver_admission_webhook_admission_duration_seconds_count",
        &[
            ("name", "taskmanagers.placement-webhook.io"),
            ("type", "admit"),
        ],
    );
    assert!(calls >= 3.0, "{calls} calls timed");
}

fn grep(text: &str, word: &str) -> String {
    text.lines()
        .filter(|l| l.contains(word) && !l.starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `mode: observe` writes only the decision note; `mode: schedulerName` sets the scheduler and
/// no affinity; `mode: both` sets both. Each pod passes the apiserver's validation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_mode_writes_what_it_says_through_the_apiserver() {
    let _serial = serial().await;
    for (mode, scheduler, affinity) in [
        ("observe", "default-scheduler", false),
        ("schedulerName", "placement-aware", false),
        ("both", "placement-aware", true),
    ] {
        let mut setup = Setup::nodes(4);
        setup.scheduler = None;
        setup.extra_config = format!("mode: {mode}\nscheduler_name: placement-aware\n");
        let cluster = Cluster::start(setup).await;
        let pod = wait_steered(&cluster, &format!("tm-{}", mode.to_lowercase())).await;
        let note = decision(&pod).expect("a decision note");
        assert!(note.contains(&format!("mode={mode}")), "{note}");
        let scheduler_name = pod.spec.as_ref().and_then(|s| s.scheduler_name.clone());
        assert_eq!(scheduler_name.as_deref(), Some(scheduler), "{mode}");
        assert_eq!(preferred_terms(&pod) > 0, affinity, "{mode}: affinity");
    }
}

/// Creates TaskManagers until one is steered (a re-registration takes a moment to reach the
/// admission chain).
async fn wait_steered(cluster: &Cluster, name: &str) -> k8s_openapi::api::core::v1::Pod {
    let deadline = Instant::now() + Duration::from_secs(20);
    for attempt in 0.. {
        let pod = cluster
            .create(
                FLINK,
                &taskmanager(&format!("{name}-{attempt}"), "job", "1"),
            )
            .await;
        if decision(&pod).is_some() {
            return pod;
        }
        assert!(
            Instant::now() < deadline,
            "never steered:\n{}",
            cluster.logs()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    unreachable!()
}

/// The `outcome` label value of `placement_webhook_reviews_total` for an outcome.
pub fn outcome(name: &str) -> &str {
    name
}
