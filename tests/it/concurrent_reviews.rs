//! Reviews answered at the same time each see the charges of the others: a burst decided by
//! several workers at once gets the decisions it gets when decided one by one.

use std::sync::Arc;

use placement_webhook::admission::Admission;
use placement_webhook::config::Config;
use placement_webhook::inflight::ledger::Ledger;
use placement_webhook::inflight::shared::SharedWorld;
use placement_webhook::inflight::world::World;
use placement_webhook::metrics_source::embedded_example;
use placement_webhook::view::ViewStore;

const REVIEWS: usize = 96;
const WORKERS: usize = 4;

fn body(k: usize) -> Vec<u8> {
    let example = include_str!("../../examples/taskmanager-review.json");
    example
        .replace(
            "3f2a9c01-b7de-4c55-9e1a-0d4b6f8e2c17",
            &format!("00000000-0000-4000-8000-{k:012}"),
        )
        .into_bytes()
}

/// A fresh replica on the embedded cluster, its near-ties broken the same way every run.
fn replica() -> Admission {
    let config = Arc::new(Config::default());
    let store = Arc::new(ViewStore::new(config.placement.clone()));
    store.publish_snapshot(embedded_example().expect("the embedded snapshot parses"));
    let world = Arc::new(SharedWorld::new(World::new(Ledger::new(
        config.inflight.ttl,
    ))));
    Admission::with_salt(config, store, world, 7)
}

/// The decision of review `k`, as its audit annotation says (without the snapshot's age,
/// which a slow run may see tick).
fn decision(admission: &Admission, k: usize) -> String {
    let answer = admission.review_bytes(&body(k)).expect("a valid review");
    let response = &answer.review.response;
    assert!(response.allowed);
    let note = response
        .audit_annotations
        .get("decision")
        .cloned()
        .unwrap_or_default();
    assert!(note.contains(" land="), "a decision: {note}");
    note.split(" age=").next().unwrap_or_default().to_string()
}

#[test]
fn reviews_at_the_same_time_see_each_others_charges() {
    let serial = replica();
    let mut one_by_one: Vec<String> = (0..REVIEWS).map(|k| decision(&serial, k)).collect();
    // The burst moves the decisions: some later pod is sent elsewhere than the first.
    assert!(
        one_by_one.iter().any(|d| *d != one_by_one[0]),
        "{one_by_one:?}"
    );

    let shared = replica();
    let mut at_once: Vec<String> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..WORKERS)
            .map(|w| {
                let shared = &shared;
                scope.spawn(move || {
                    (w..REVIEWS)
                        .step_by(WORKERS)
                        .map(|k| decision(shared, k))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().expect("a worker"))
            .collect()
    });
    one_by_one.sort();
    at_once.sort();
    assert_eq!(at_once, one_by_one);
}
