//! Every committed input of the `review` fuzz target (seeds and the regressions fuzzing found),
//! through the admission path on the embedded cluster, in the plain test run: allowed, and a
//! patch, when there is one, applies to the object as the server reads it. The fuzz gate
//! (`.ci/fuzz.sh`) replays the same files under the fuzz build with the full oracle.

use std::path::Path;
use std::sync::Arc;

use base64::Engine;
use k8s_openapi::api::core::v1::Pod;
use placement_webhook::admission::{self, Admission};
use placement_webhook::config::Config;
use placement_webhook::inflight::ledger::Ledger;
use placement_webhook::inflight::shared::SharedWorld;
use placement_webhook::inflight::world::World;
use placement_webhook::metrics_source::embedded_example;
use placement_webhook::view::ViewStore;
use serde::Deserialize;

#[test]
fn committed_review_inputs_are_answered_with_patches_that_apply() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/review");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("the review corpus is committed")
        .map(|e| e.expect("a corpus entry").path())
        .collect();
    files.sort();
    let regressions = files
        .iter()
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("regression-"))
        })
        .count();
    assert!(regressions >= 1, "the regression inputs are committed");

    let config = Arc::new(Config::default());
    let store = Arc::new(ViewStore::new(config.placement.clone()));
    store.publish_snapshot(embedded_example().expect("the embedded snapshot parses"));
    let mut patched = 0;
    for path in &files {
        let body = std::fs::read(path).expect("a corpus file reads");
        let world = Arc::new(SharedWorld::new(World::new(Ledger::new(
            config.inflight.ttl,
        ))));
        let admission = Admission::new(config.clone(), store.clone(), world);
        let Ok(answer) = admission.review_bytes(&body) else {
            continue;
        };
        let response = &answer.review.response;
        assert!(response.allowed, "{}", path.display());
        let Some(encoded) = &response.patch else {
            continue;
        };
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .expect("base64");
        let patch: json_patch::Patch = serde_json::from_slice(&bytes).expect("a JSON patch");
        let request = admission::parse(&body).expect("parses");
        let raw = request.object.as_deref().expect("an object");
        let pod = admission::pod_of(raw, &request).expect("a Pod");
        let mut object = serde_json::to_value(&pod).expect("JSON");
        json_patch::patch(&mut object, &patch)
            .unwrap_or_else(|e| panic!("{}: the patch does not apply: {e}", path.display()));
        Pod::deserialize(&object).expect("still a Pod");
        patched += 1;
    }
    // The TaskManager seeds and the regression are steered on the embedded cluster.
    assert!(patched >= 2, "only {patched} inputs were patched");
}
