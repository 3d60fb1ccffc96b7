//! Both plugins in one scheduling cycle, and the kept nodes read from the scores.

use super::affinity::{preferred, security_in, team_namespaces, weighted};
use super::spread::{HOST, hard, spread_pod};
use super::*;

/// `Scheduler::schedule_with` filters with both plugins and adds their weighted scores; with
/// no constraint and no pod in view it decides as `schedule` does.
#[test]
fn cycle_applies_both_plugins() {
    use crate::config::scheduler::SchedulerConfig;
    use crate::scheduler::Scheduler;
    use crate::scheduler::cycle::score_with;
    let alloc =
        Resources::parse(&[("cpu", "8"), ("memory", "16Gi"), ("pods", "110")]).expect("quantities");
    let nodes: Vec<ModelNode> = (0..6)
        .map(|i| {
            let zone = format!("z{}", i % 3);
            let name = format!("n{i}");
            let pairs = [
                ("topology.kubernetes.io/zone", zone.as_str()),
                (HOST, name.as_str()),
            ];
            ModelNode::new(&name, labels(&pairs), alloc.clone())
        })
        .collect();
    let tm = [("app", "tm")];
    // Zones z0 and z1 hold one TaskManager each, z2 none.
    let existing = vec![plain(&nodes, "n0", &tm), plain(&nodes, "n1", &tm)];
    let namespaces = BTreeMap::new();
    let cluster = ClusterPods::new(&existing, &namespaces);
    let spread = spread_pod(
        &tm,
        vec![hard(
            1,
            "topology.kubernetes.io/zone",
            json!({"matchLabels": {"app": "tm"}}),
        )],
        json!({}),
    );
    let facts = PodFacts::of(&spread);
    let mut scheduler = Scheduler::new(SchedulerConfig::default(), 7);
    let cycle = scheduler.schedule_with(&facts, &nodes, &cluster);
    assert_eq!(
        cycle.sample,
        vec![2, 5],
        "only zone z2 keeps the skew within 1"
    );

    // Preferred anti-affinity on the hostname: the nodes holding a TaskManager lose 200 points.
    let apart = pod(
        "",
        &tm,
        preferred(
            vec![],
            vec![json!({"weight": 100, "podAffinityTerm": {
                "labelSelector": {"matchLabels": {"app": "tm"}}, "topologyKey": HOST}})],
        ),
    );
    let facts = PodFacts::of(&apart);
    let all: Vec<usize> = (0..nodes.len()).collect();
    let scores = score_with(
        &facts,
        &nodes,
        &all,
        &SchedulerConfig::default(),
        Some(&cluster),
    );
    let inter_pod: Vec<i64> = scores.iter().map(|s| s.inter_pod_affinity).collect();
    assert_eq!(inter_pod, vec![0, 0, 200, 200, 200, 200]);
    assert!(
        scores.iter().all(|s| s.pod_topology_spread == 0),
        "no owner, no defaults"
    );

    // Nothing in view: the same node as the plain cycle, seed for seed.
    let plain_pod = pod("", &tm, json!({}));
    let facts = PodFacts::of(&plain_pod);
    let none = ClusterPods::new(&[], &namespaces);
    for seed in 0..8 {
        let a = Scheduler::new(SchedulerConfig::default(), seed).schedule(&facts, &nodes);
        let b =
            Scheduler::new(SchedulerConfig::default(), seed).schedule_with(&facts, &nodes, &none);
        assert_eq!(a, b);
    }
}

/// `AffinityScore::keep_best` keeps exactly the nodes whose weighted normalised score trails
/// the best by less than the margin, as the scores themselves say, whatever the sums' spread
/// (preferred affinity and anti-affinity on one node each, pods spread unevenly).
#[test]
fn keep_best_keeps_what_the_scores_keep() {
    use crate::scheduler::domains::Domains;
    use crate::scheduler::pod_affinity::AffinityScore;
    let nodes: Vec<ModelNode> = (0..13)
        .map(|k| node(&format!("n{k}"), &[("hostname", &format!("n{k}"))]))
        .collect();
    // Uneven counts: several nodes share a raw sum, some nodes have none.
    let mut existing = Vec::new();
    for (k, count) in [0, 1, 1, 2, 3, 5, 8, 0, 13, 2, 7, 4, 6]
        .into_iter()
        .enumerate()
    {
        for _ in 0..count {
            existing.push(plain(&nodes, &format!("n{k}"), &[("security", "S1")]));
        }
        if k % 3 == 0 {
            existing.push(plain(&nodes, &format!("n{k}"), &[("security", "S2")]));
        }
    }
    let namespaces = team_namespaces();
    let cluster = ClusterPods::new(&existing, &namespaces);
    let domains = |key: &str| Domains::of(&nodes, key);
    let all: Vec<usize> = (0..nodes.len()).collect();
    let positions: Vec<u32> = (0..nodes.len() as u32).collect();
    let mut cases = 0;
    for (affinity, anti) in [(1, 0), (0, 1), (3, 5), (7, 2)] {
        let mut terms = (Vec::new(), Vec::new());
        if affinity > 0 {
            terms
                .0
                .push(weighted(affinity, security_in(&["S2"]), "hostname"));
        }
        if anti > 0 {
            terms
                .1
                .push(weighted(anti, security_in(&["S1"]), "hostname"));
        }
        let incoming = pod("", &[], preferred(terms.0, terms.1));
        let facts = PodFacts::of(&incoming);
        let mut score = AffinityScore::new(&facts, cluster.namespace_labels, 1, &domains);
        for p in cluster.pods {
            score.add(p.kind(), [(p.node, p.count)]);
        }
        let scores = score.scores(&all).expect("some term matched");
        for weight in [1, 2, 3] {
            for margin in [1, 7, 25, 50, 99, 100, 150, 301] {
                let best = scores.iter().copied().max().unwrap_or(0) * weight;
                let expected: Vec<u32> = (0..nodes.len())
                    .filter(|&k| best - scores[k] * weight < margin)
                    .map(|k| k as u32)
                    .collect();
                let kept = score.keep_best(&positions, weight, margin).expect("scored");
                assert_eq!(kept, expected, "weight {weight}, margin {margin}");
                cases += 1;
            }
        }
    }
    assert_eq!(cases, 96);
}
