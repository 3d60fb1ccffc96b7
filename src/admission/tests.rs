//! Admission's pipeline on the embedded example: the partial pod read, retries, bound pods.

use super::review::ReviewIn;
use super::*;
use crate::inflight::ledger::Ledger;
use crate::inflight::world::World;
use crate::metrics_source::file::embedded_example;
use serde_json::{Value, json};

/// A replica with the default configuration on the embedded snapshot, its store and ledger.
fn on_the_example() -> (Admission, Arc<ViewStore>, Arc<SharedWorld>) {
    let config = Arc::new(Config::default());
    let store = Arc::new(ViewStore::new(config.placement.clone()));
    store.publish_snapshot(embedded_example().expect("embedded snapshot"));
    let world = Arc::new(SharedWorld::new(World::new(Ledger::new(
        config.inflight.ttl,
    ))));
    let admission = Admission::with_salt(config, store.clone(), world.clone(), 7);
    (admission, store, world)
}

/// The example review's pod, changed by `edit`, as a dry run (nothing is charged, so
/// every read decides against the same ledger).
fn request(edit: impl FnOnce(&mut Value)) -> RequestIn {
    let mut review: Value =
        serde_json::from_str(include_str!("../../examples/taskmanager-review.json"))
            .expect("example review");
    edit(&mut review["request"]["object"]);
    review["request"]["dryRun"] = json!(true);
    let review: ReviewIn = serde_json::from_value(review).expect("a review");
    review.request.expect("a request")
}

/// Reading only the fields used answers every pod as reading the whole Pod does: the same
/// patch, warnings and decision, for pods that use each field read (and some that do not).
#[test]
fn the_partial_read_answers_as_the_full_pod() {
    let (admission, store, _) = on_the_example();
    let view = store.current();
    let now = SystemTime::now();
    let edits: Vec<fn(&mut Value)> = vec![
        |_| {},
        |o| {
            o["spec"]["initContainers"] = json!([
                {"name": "sidecar", "image": "x", "restartPolicy": "Always",
                 "resources": {"requests": {"cpu": "3", "memory": "1Gi"}}},
                {"name": "setup", "image": "y", "resources": {"limits": {"cpu": "8"}}}
            ]);
            o["spec"]["overhead"] = json!({"cpu": "500m"});
        },
        |o| {
            o["spec"]["topologySpreadConstraints"] = json!([
                {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
                 "whenUnsatisfiable": "DoNotSchedule",
                 "labelSelector": {"matchLabels": {"app": "wordcount"}}}
            ]);
            o["spec"]["tolerations"] = json!([{"operator": "Exists"}]);
        },
        |o| {
            o["spec"]["affinity"] = json!({"podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 50,
                  "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname",
                    "labelSelector": {"matchLabels": {"app": "wordcount"}}}}]}});
            o["spec"]["schedulerName"] = json!("default-scheduler");
        },
        |o| {
            o["spec"]["nodeSelector"] = json!({"kubernetes.io/os": "linux"});
            o["metadata"]
                .as_object_mut()
                .map(|m| m.remove("annotations"));
        },
        // Metadata holding only fields the decision does not read, and no spec at all.
        |o| o["metadata"] = json!({"creationTimestamp": "2026-01-01T00:00:00Z"}),
        |o| {
            o.as_object_mut().map(|m| m.remove("spec"));
        },
    ];
    let mut patched = 0;
    for (k, edit) in edits.into_iter().enumerate() {
        let request = request(edit);
        let object = request.object.as_deref().expect("an object");
        let mut full: Pod = serde_json::from_str(object.get()).expect("full pod");
        if full.metadata.namespace.is_none() {
            full.metadata.namespace = request.namespace.clone();
        }
        let read = pod_of(object, &request).expect("read pod");
        // The demand the decision reads (requests, constraints, load), then the answer.
        let answer = |pod: &Pod| {
            let demand = format!("{:?}", demand(admission.config(), pod, view.as_deref()));
            match admission.steer_pod(&request, pod, view.as_deref(), now) {
                Ok(Some(steered)) => format!("{demand}\n{:?}", steered.response),
                Ok(None) => format!("{demand}\nnot steered"),
                Err(reason) => format!("{demand}\nfailed open: {reason}"),
            }
        };
        let (from_full, from_read) = (answer(&full), answer(&read));
        assert_eq!(from_read, from_full, "pod variant {k}");
        patched += usize::from(from_full.contains("JSONPatch"));
    }
    assert!(patched >= 5, "most variants are steered: {patched}");
}

/// A retry of a review that was charged is answered, and charged nothing more, also while
/// decisions are charged under the write lock (after the first charge of a burst).
#[test]
fn a_retry_is_answered_and_charged_once() {
    let (admission, store, world) = on_the_example();
    let review = |uid: &str| {
        let mut review: Value =
            serde_json::from_str(include_str!("../../examples/taskmanager-review.json"))
                .expect("example review");
        review["request"]["uid"] = json!(uid);
        let review: ReviewIn = serde_json::from_value(review).expect("a review");
        let request = review.request.expect("a request");
        let answer = admission.answer(&request, SystemTime::now());
        assert!(answer.review.response.patch.is_some(), "{uid} is steered");
    };
    let nodes: Vec<String> = store
        .current()
        .expect("a view")
        .nodes
        .iter()
        .map(|n| n.name.clone())
        .collect();
    let charged = || {
        let world = world.read();
        let per_node: Vec<String> = nodes
            .iter()
            .map(|n| format!("{:?}", world.charges.extra(n)))
            .collect();
        (world.charges.len(), per_node)
    };
    review("aa000000-0000-0000-0000-000000000000");
    review("ba000000-0000-0000-0000-000000000000");
    let before = charged();
    assert_eq!(before.0, 2);
    for uid in [
        "aa000000-0000-0000-0000-000000000000",
        "ba000000-0000-0000-0000-000000000000",
    ] {
        review(uid);
        assert_eq!(charged(), before, "a retry of {uid} charged again");
    }
    review("ca000000-0000-0000-0000-000000000000");
    assert_eq!(charged().0, 3, "a new uid is charged");
}

/// A pod created with `spec.nodeName` is bound already: no scheduler places it, so it is
/// neither patched nor charged, while the same pod unbound is both.
#[test]
fn a_pod_created_bound_is_left_alone_and_not_charged() {
    let (admission, _, world) = on_the_example();
    let review = |uid: &str, node_name: Option<&str>| {
        let mut review: Value =
            serde_json::from_str(include_str!("../../examples/taskmanager-review.json"))
                .expect("example review");
        review["request"]["uid"] = json!(uid);
        if let Some(node) = node_name {
            review["request"]["object"]["spec"]["nodeName"] = json!(node);
        }
        let review: ReviewIn = serde_json::from_value(review).expect("a review");
        let request = review.request.expect("a request");
        admission.answer(&request, SystemTime::now())
    };
    let bound = review("da000000-0000-0000-0000-000000000000", Some("worker-05"));
    assert!(
        bound.review.response.patch.is_none(),
        "a bound pod is patched"
    );
    assert_eq!(bound.outcome, Outcome::Skipped);
    assert_eq!(world.read().charges.len(), 0, "a bound pod is charged");

    let unbound = review("ea000000-0000-0000-0000-000000000000", Some(""));
    assert!(
        unbound.review.response.patch.is_some(),
        "an empty nodeName is unbound"
    );
    assert_eq!(world.read().charges.len(), 1);
}
