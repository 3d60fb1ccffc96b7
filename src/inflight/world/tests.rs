//! The world's two halves read together: pending pods' groups at view positions.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::World;
use crate::inflight::ledger::Ledger;
use crate::inflight::ledger::tests::{TWO_CPU, requests, shares};
use crate::scheduler::pods::PodGroup;

/// Every pending (group, position, pods).
fn pending_groups(l: &World) -> Vec<(&Arc<PodGroup>, usize, u32)> {
    l.pending_by_group()
        .flat_map(|(group, placed)| placed.map(move |(position, count)| (group, position, count)))
        .collect()
}

#[test]
fn pending_pods_of_one_template_are_counted_together_until_bound_or_gone() {
    let mut l = World::new(Ledger::new(Duration::from_secs(60)));
    let now = Instant::now();
    let group = || PodGroup {
        namespace: "flink".into(),
        labels: Arc::new([("app".to_string(), "wordcount".to_string())].into()),
        terms: None,
    };
    for (id, node) in [("p1", "a"), ("p2", "a"), ("p3", "b")] {
        l.charges.charge(
            id,
            &shares(&[(node, 0.7), ("c", 0.3)]),
            TWO_CPU,
            &requests(),
            now,
        );
        l.set_group(id, group());
    }
    l.align(1, ["a", "b", "c"].into_iter());
    let mut counts: Vec<(usize, u32)> = pending_groups(&l)
        .into_iter()
        .map(|(_, p, n)| (p, n))
        .collect();
    counts.sort_unstable();
    assert_eq!(counts, vec![(0, 2), (1, 1)]);
    let groups: Vec<*const PodGroup> = pending_groups(&l)
        .into_iter()
        .map(|(g, _, _)| Arc::as_ptr(g))
        .collect();
    assert!(groups.windows(2).all(|w| w[0] == w[1]), "one shared copy");
    assert!(l.charges.bind("p1", "c"));
    l.charges.forget("p3");
    let counts: Vec<(usize, u32)> = pending_groups(&l)
        .into_iter()
        .map(|(_, p, n)| (p, n))
        .collect();
    assert_eq!(counts, vec![(0, 1)]);
    l.charges.forget("p2");
    assert_eq!(pending_groups(&l).len(), 0);
}

#[test]
fn pending_pods_are_those_counted_in_the_view() {
    let mut l = World::new(Ledger::new(Duration::from_secs(60)));
    let now = Instant::now();
    let group = PodGroup {
        namespace: "flink".into(),
        labels: Arc::new([("app".to_string(), "wordcount".to_string())].into()),
        terms: None,
    };
    let counted = |l: &World| pending_groups(l).iter().map(|&(_, _, n)| n as usize).sum();
    let charge = |l: &mut World, id: &str, node: &str| {
        l.charges
            .charge(id, &shares(&[(node, 1.0)]), TWO_CPU, &requests(), now);
        l.set_group(id, group.clone());
    };
    for (id, node) in [("p1", "a"), ("p2", "b"), ("p3", "b"), ("p4", "c")] {
        charge(&mut l, id, node);
    }
    // "b" is not in the view; "z" is numbered after the alignment.
    l.align(1, ["c", "a"].into_iter());
    charge(&mut l, "p5", "z");
    charge(&mut l, "p6", "a");
    assert_eq!((l.pending_pods(|_| true), counted(&l)), (3, 3));
    assert_eq!(l.pending_pods(|g| &*g.namespace == "other"), 0);
    l.charges.forget("p1");
    assert!(l.charges.bind("p6", "b"));
    assert_eq!((l.pending_pods(|_| true), counted(&l)), (1, 1));
}

#[test]
fn a_jobs_taskmanager_is_tagged_only_while_the_jobs_bounds_are_on() {
    let taskmanager: k8s_openapi::api::core::v1::Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"namespace": "flink",
                     "labels": {"app": "wordcount", "component": "taskmanager"}},
        "spec": {"containers": [{"name": "flink-main-container"}]},
    }))
    .expect("pod");
    let facts = crate::scheduler::PodFacts::of(&taskmanager);
    for tags_jobs in [false, true] {
        let mut l = World::new(Ledger::new(Duration::from_secs(60)).tagging_jobs(tags_jobs));
        l.charges.charge(
            "p1",
            &shares(&[("a", 1.0)]),
            TWO_CPU,
            &requests(),
            Instant::now(),
        );
        l.tag("p1", &facts);
        l.align(1, ["a"].into_iter());
        assert_eq!(
            pending_groups(&l).len(),
            usize::from(tags_jobs),
            "{tags_jobs}"
        );
    }
}
