//! The `review` oracle: arbitrary bytes through the whole admission path, as the server runs
//! it. Shared by the fuzz target and the plain test run (tests/it/fuzz_regressions.rs).
//!
//! Never panics; a patch, when there is one, is valid base64 of a JSON patch that applies to
//! the request's object, and the answer always echoes the request uid with `allowed: true`.

use std::sync::{Arc, LazyLock};

use base64::Engine;
use k8s_openapi::api::core::v1::Pod;
use placement_webhook::admission::{self, Admission};
use placement_webhook::config::Config;
use placement_webhook::inflight::ledger::Ledger;
use placement_webhook::inflight::shared::SharedWorld;
use placement_webhook::inflight::world::World;
use placement_webhook::metrics_source::embedded_example;
use placement_webhook::snapshot::LoadSnapshot;
use placement_webhook::view::ViewStore;
use serde::Deserialize;
use serde_json::Value;

/// The embedded example cluster, read once.
static SNAPSHOT: LazyLock<LoadSnapshot> = LazyLock::new(|| {
    let mut snapshot = embedded_example().expect("the embedded example snapshot parses");
    // No reading time: the snapshot's age (written into every decision) stays 0 however long
    // the run takes, so an input takes the same path at any moment of the run.
    snapshot.taken_at = None;
    snapshot
});

/// Checks one input; panics when the answer breaks a rule above. True when it was patched.
pub fn check(data: &[u8]) -> bool {
    // A fresh view, ledger and admission per input, and a fixed tie-breaking salt: nothing an
    // earlier input left behind (memoised lists, indexes) changes the path this one takes.
    let config = Arc::new(Config::default());
    let store = Arc::new(ViewStore::new(config.placement.clone()));
    store.publish_snapshot(SNAPSHOT.clone());
    let world = Arc::new(SharedWorld::new(World::new(Ledger::new(
        config.inflight.ttl,
    ))));
    let admission = Admission::with_salt(config, store, world, 7);
    let Ok(answer) = admission.review_bytes(data) else {
        return false;
    };
    let response = &answer.review.response;
    assert!(response.allowed, "a placement webhook never rejects");
    // The answer must serialize: it is what goes on the wire.
    let wire = serde_json::to_vec(&answer.review).expect("the answer serializes");
    let _: Value = serde_json::from_slice(&wire).expect("the answer is JSON");

    assert_eq!(
        response.patch.is_some(),
        response.patch_type.is_some(),
        "patch and patchType go together"
    );
    let Some(b64) = &response.patch else {
        return false;
    };
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .expect("the patch is base64");
    let patch: json_patch::Patch =
        serde_json::from_slice(&bytes).expect("the patch is a JSON patch");
    for op in &patch.0 {
        assert!(
            matches!(op, json_patch::PatchOperation::Add(_)),
            "only add operations: {op:?}"
        );
    }
    // The oracle reads the object as the server does: into a Pod. Unknown fields are skipped
    // unread there, whatever they hold (a number beyond f64's range included), so the patch is
    // checked against that Pod written back as JSON.
    let request = admission::parse(data).expect("a patched request parses");
    let raw = request.object.as_deref().expect("a patch needs an object");
    let pod = admission::pod_of(raw, &request).expect("a patched object reads as a Pod");
    let mut read = serde_json::to_value(&pod).expect("a Pod writes as JSON");
    apply_and_check(&mut read, &patch, true);
    // Every object an apiserver sends is also plain JSON: there the patch must apply to the
    // object exactly as sent. One that is not (a number beyond f64) was checked above. The
    // webhook reads only the fields it uses, so an object malformed elsewhere is steered too:
    // the patch must apply to it, and keep it a Pod when it was one.
    if let Ok(mut object) = serde_json::from_str::<Value>(raw.get()) {
        let was_a_pod = Pod::deserialize(&object).is_ok();
        apply_and_check(&mut object, &patch, was_a_pod);
    }
    for op in &patch.0 {
        if let json_patch::PatchOperation::Add(add) = op {
            check_added(&add.value);
        }
    }
    true
}

/// The patch applies to `object`, and, when `a_pod` (the object was one), the result is
/// still a Pod.
fn apply_and_check(object: &mut Value, patch: &json_patch::Patch, a_pod: bool) {
    if let Err(e) = json_patch::patch(object, patch) {
        panic!("the patch does not apply: {e}\npatch: {patch:?}");
    }
    if a_pod && let Err(e) = Pod::deserialize(&*object) {
        panic!("the patched object is no longer a Pod: {e}");
    }
}

/// Weights 1..100 on preferred terms; `matchFields` only `metadata.name`, one value each.
fn check_added(value: &Value) {
    match value {
        Value::Object(map) => {
            if let (Some(weight), Some(_)) = (map.get("weight"), map.get("preference")) {
                let weight = weight.as_i64().expect("an integer weight");
                assert!(
                    (1..=100).contains(&weight),
                    "weight {weight} outside 1..100"
                );
            }
            if let Some(fields) = map.get("matchFields") {
                for requirement in fields.as_array().expect("matchFields is a list") {
                    assert_eq!(requirement["key"], "metadata.name", "{requirement}");
                    let values = requirement["values"].as_array().expect("values");
                    assert_eq!(
                        values.len(),
                        1,
                        "matchFields takes one value: {requirement}"
                    );
                }
            }
            map.values().for_each(check_added);
        }
        Value::Array(items) => items.iter().for_each(check_added),
        _ => {}
    }
}
