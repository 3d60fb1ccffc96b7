//! Placement with the scheduler's filters that count other pods: topology spread
//! (`DoNotSchedule`), required pod affinity and anti-affinity, and existing pods' required
//! anti-affinity, fed by the pod watch's events and the ledger's pending pods.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use crate::config::PlacementConfig;
use crate::config::scheduler::SchedulerConfig;
use crate::inflight::ledger::{Ledger, PodLoad};
use crate::inflight::world::World;
use crate::inventory::pods::apply_pod_event;
use crate::placement::{
    Decision, Ineligible, PodConstraints, PodDemand, Replica, assess_all, decide, decide_indexed,
};
use crate::placement::{DecisionCtx, RankIndexes};
use crate::scheduler::PodFacts;
use crate::scheduler::pods::PodGroup;
use crate::snapshot::{LoadSnapshot, NodeLoad};
use crate::view::ClusterView;
use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

const ZONE: &str = "topology.kubernetes.io/zone";

/// Six nodes, two per zone; zone a is the coolest, then b, then c.
fn view() -> ClusterView {
    let nodes = [
        ("a1", "a", 0.10),
        ("a2", "a", 0.12),
        ("b1", "b", 0.30),
        ("b2", "b", 0.32),
        ("c1", "c", 0.50),
        ("c2", "c", 0.52),
    ]
    .iter()
    .map(|(name, zone, cpu)| {
        let mut n = NodeLoad::new(*name, *cpu);
        Arc::make_mut(&mut n.labels).insert("kubernetes.io/hostname".into(), name.to_string());
        Arc::make_mut(&mut n.labels).insert(ZONE.into(), zone.to_string());
        n.cpu_capacity_cores = Some(16.0);
        n
    })
    .collect();
    view_of(nodes)
}

fn view_of(nodes: Vec<NodeLoad>) -> ClusterView {
    let snapshot = LoadSnapshot {
        window_samples: Default::default(),
        taken_at: None,
        pods: Vec::new(),
        nodes,
    };
    ClusterView::build(&snapshot, None, &PlacementConfig::default())
}

fn aligned_world(view: &ClusterView) -> World {
    let mut world = World::new(Ledger::new(Duration::from_secs(120)));
    world.align(view.id, view.nodes.iter().map(|n| n.name.as_str()));
    world
}

/// A TaskManager of job `job` with `spec` merged in.
fn taskmanager(job: &str, spec: Value) -> Pod {
    let mut spec = spec;
    spec["containers"] =
        json!([{"name": "flink-main-container", "resources": {"requests": {"cpu": "2"}}}]);
    serde_json::from_value(json!({
        "metadata": {"name": "tm", "namespace": "flink",
                     "labels": {"component": "taskmanager", "app": job}},
        "spec": spec
    }))
    .expect("pod")
}

/// A pod as the watch reports it once bound to `node`.
fn bound(name: &str, labels: Value, node: &str, spec: Value) -> Pod {
    let mut spec = spec;
    spec["nodeName"] = json!(node);
    spec["containers"] = json!([{"name": "c", "resources": {"requests": {"cpu": "100m"}}}]);
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "flink", "uid": format!("uid-{name}"),
                     "labels": labels, "creationTimestamp": "2020-01-01T00:00:00Z"},
        "spec": spec,
        "status": {"phase": "Running"}
    }))
    .expect("pod")
}

fn watch(world: &mut World, pod: &Pod) {
    apply_pod_event(world, pod, false, Instant::now(), SystemTime::now());
}

fn demand(p: &Pod) -> PodDemand<'_> {
    PodDemand {
        constraints: PodConstraints::of(p, &[]),
        facts: PodFacts::of(p),
        load: PodLoad {
            cpu_cores: 2.0,
            network_bytes_per_second: 0.0,
        },
        source: Default::default(),
    }
}

fn run(p: &Pod, view: &ClusterView, world: &World) -> Decision {
    let policy = PlacementConfig::default();
    let scheduler = SchedulerConfig::default();
    let d = demand(p);
    let ctx = DecisionCtx::new(&d, view, world, &policy, &scheduler);
    let walked = decide(&ctx, 7);
    let indexed = decide_indexed(&ctx, 7, &RankIndexes::default());
    assert_eq!(named(&walked), named(&indexed), "both paths decide alike");
    walked
}

fn named(decision: &Decision) -> Vec<String> {
    decision
        .tiers
        .iter()
        .flat_map(|t| t.nodes.iter().map(|n| n.name.clone()))
        .collect()
}

fn first_tier(decision: &Decision) -> Vec<String> {
    decision.tiers[0]
        .nodes
        .iter()
        .map(|n| n.name.clone())
        .collect()
}

fn eligibility(p: &Pod, view: &ClusterView, world: &World, node: &str) -> Option<Ineligible> {
    let policy = PlacementConfig::default();
    let decision = run(p, view, world);
    assess_all(
        &DecisionCtx::new(
            &demand(p),
            view,
            world,
            &policy,
            &SchedulerConfig::default(),
        ),
        &Replica::from(7),
        &decision,
    )
    .into_iter()
    .find(|a| a.name == node)
    .and_then(|a| a.eligibility.err())
}

/// A TaskManager of `wordcount` that prefers (weight 100) not to share a node with the job.
fn wordcount_apart() -> Pod {
    taskmanager(
        "wordcount",
        json!({"affinity": {"podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100,
                "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": "wordcount"}},
                                    "topologyKey": "kubernetes.io/hostname"}}]}}}),
    )
}

/// One of `wordcount`'s pods, bound to `node`, as the watch reports it.
fn watch_wordcount(world: &mut World, name: &str, node: &str) {
    watch(
        world,
        &bound(name, json!({"app": "wordcount"}), node, json!({})),
    );
}

fn zone_spread(job: &str) -> Value {
    json!({"topologySpreadConstraints": [{
        "maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": job}}}]})
}

#[test]
fn zone_spread_keeps_the_pod_out_of_the_zone_already_ahead() {
    let view = view();
    let mut world = aligned_world(&view);
    let tm = taskmanager("wordcount", zone_spread("wordcount"));
    // Without siblings every zone is open: the coolest zone's nodes lead.
    assert_eq!(named(&run(&tm, &view, &world))[0], "a1");
    // Two of the job's pods already run in zone a: a third there would make the skew 3.
    for (name, node) in [("w1", "a1"), ("w2", "a2")] {
        watch(
            &mut world,
            &bound(
                name,
                json!({"app": "wordcount"}),
                node,
                zone_spread("wordcount"),
            ),
        );
    }
    let decision = run(&tm, &view, &world);
    let first = first_tier(&decision);
    assert!(!first.is_empty(), "zones b and c stay open");
    assert!(first.iter().all(|n| !n.starts_with('a')), "first {first:?}");
    assert!(decision.landing.iter().all(|(n, _)| !n.starts_with('a')));
    // Zone a is closed as far as this replica knows, but pods it has not heard of may open it
    // again: the last tier keeps nodes of every zone.
    let last = &decision.tiers[decision.tiers.len() - 1];
    for zone in ['a', 'b', 'c'] {
        assert!(
            named(&decision).iter().any(|n| n.starts_with(zone)),
            "zone {zone} named: {:?}",
            named(&decision)
        );
    }
    assert!(last.weight < decision.tiers[0].weight);
    assert_eq!(
        eligibility(&tm, &view, &world, "a1"),
        Some(Ineligible::SpreadSkew)
    );
    assert_eq!(eligibility(&tm, &view, &world, "b1"), None);
    // Another job's pods do not count against this one.
    let other = taskmanager("other", zone_spread("other"));
    assert_eq!(named(&run(&other, &view, &world))[0], "a1");
}

#[test]
fn pending_siblings_count_where_they_will_land() {
    let view = view();
    let mut world = aligned_world(&view);
    let tm = taskmanager("wordcount", zone_spread("wordcount"));
    // Two siblings steered and not bound yet, both predicted on zone a's nodes.
    for (id, node) in [("p1", "a1"), ("p2", "a2")] {
        world.charges.charge(
            id,
            &[(node.to_string(), 1.0)],
            PodLoad {
                cpu_cores: 2.0,
                network_bytes_per_second: 0.0,
            },
            &Default::default(),
            Instant::now(),
        );
        world.set_group(id, PodGroup::of(&tm));
    }
    let first = first_tier(&run(&tm, &view, &world));
    assert!(first.iter().all(|n| !n.starts_with('a')), "first {first:?}");
    // Bound, they count through the watch instead, once.
    world.charges.bind("p1", "a1");
    world.charges.bind("p2", "a2");
    let chosen = first_tier(&run(&tm, &view, &world));
    assert!(
        chosen.iter().any(|n| n.starts_with('a')),
        "bound world entries without a watched pod count nowhere: {chosen:?}"
    );
}

#[test]
fn required_anti_affinity_to_a_noisy_workload_skips_its_nodes() {
    let view = view();
    let mut world = aligned_world(&view);
    for (name, node) in [("noisy-1", "a1"), ("noisy-2", "b1")] {
        watch(
            &mut world,
            &bound(name, json!({"app": "noisy"}), node, json!({})),
        );
    }
    let tm = taskmanager(
        "wordcount",
        json!({"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
            "topologyKey": "kubernetes.io/hostname",
            "labelSelector": {"matchLabels": {"app": "noisy"}}}]}}}),
    );
    let chosen = named(&run(&tm, &view, &world));
    assert_eq!(chosen[0], "a2");
    assert!(!chosen.contains(&"a1".to_string()) && !chosen.contains(&"b1".to_string()));
    assert_eq!(
        eligibility(&tm, &view, &world, "a1"),
        Some(Ineligible::PodAntiAffinity)
    );
    // The noisy pod goes away: its node is open again.
    let gone = bound("noisy-1", json!({"app": "noisy"}), "a1", json!({}));
    apply_pod_event(&mut world, &gone, true, Instant::now(), SystemTime::now());
    assert_eq!(named(&run(&tm, &view, &world))[0], "a1");
}

#[test]
fn an_existing_pods_required_anti_affinity_keeps_taskmanagers_away() {
    let view = view();
    let mut world = aligned_world(&view);
    let tm = taskmanager("wordcount", json!({}));
    watch(
        &mut world,
        &bound(
            "loner",
            json!({"app": "loner"}),
            "a1",
            json!({"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
                "topologyKey": ZONE,
                "labelSelector": {"matchLabels": {"component": "taskmanager"}}}]}}}),
        ),
    );
    let chosen = named(&run(&tm, &view, &world));
    assert!(
        chosen.iter().all(|n| !n.starts_with('a')),
        "the whole zone is closed: {chosen:?}"
    );
    assert_eq!(
        eligibility(&tm, &view, &world, "a2"),
        Some(Ineligible::ExistingAntiAffinity)
    );
    // A pod it does not select is not affected.
    let other: Pod = serde_json::from_value(json!({
        "metadata": {"name": "x", "namespace": "flink", "labels": {"component": "jobmanager"}},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]}
    }))
    .expect("pod");
    assert_eq!(named(&run(&other, &view, &world))[0], "a1");
}

#[test]
fn required_pod_affinity_with_no_match_anywhere_is_unresolvable_everywhere() {
    let view = view();
    let world = aligned_world(&view);
    let tm = taskmanager(
        "wordcount",
        json!({"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
            "topologyKey": ZONE,
            "labelSelector": {"matchLabels": {"app": "cache"}}}]}}}),
    );
    let decision = run(&tm, &view, &world);
    assert!(named(&decision).is_empty());
    assert!(decision.landing.is_empty());
    assert_eq!(
        eligibility(&tm, &view, &world, "a1"),
        Some(Ineligible::PodAffinity)
    );
}

/// Pods like this one that another replica is taken to have placed unheard (the mirror, see
/// `placement::replicas::replica`) count in InterPodAffinity's score where they are taken to be: a
/// TaskManager kept apart from its job's others keeps off those nodes too.
#[test]
fn mirrored_pods_count_in_the_affinity_score() {
    use crate::placement::eligible::groups_around::Surroundings;
    use crate::placement::eligible::pod_level::{Around, around_affinity_scores, restrict};
    let view = view();
    let world = aligned_world(&view);
    let tm = taskmanager(
        "wordcount",
        json!({"affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
            "weight": 100,
            "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname",
                                "labelSelector": {"matchLabels": {"app": "wordcount"}}}}]}}}),
    );
    let d = demand(&tm);
    let all: Vec<usize> = (0..view.nodes.len()).collect();
    assert_eq!(
        around_affinity_scores(&d.facts, &view, &world, &[], &all),
        None,
        "no pod of the job anywhere: the score does not apply"
    );
    let a1 = view.nodes.iter().position(|n| n.name == "a1").expect("a1");
    let scores = around_affinity_scores(&d.facts, &view, &world, &[(a1, 1)], &all)
        .expect("the mirrored pod is scored");
    for (k, score) in scores.iter().enumerate() {
        assert_eq!(*score, if k == a1 { 0 } else { 100 }, "node {k}");
    }
    let eligible: std::sync::Arc<[u32]> = (0..6).collect();
    let at = Surroundings {
        facts: &d.facts,
        view: &view,
        world: &world,
    };
    let allowed = restrict(
        at,
        &eligible,
        Around::Read {
            mirrored: &[(a1, 1)],
        },
        160,
    )
    .expect("scores apply");
    assert_eq!(allowed.passing.len(), 6, "no filter counts pods here");
    assert_eq!(allowed.kept.len(), 5);
    assert!(!allowed.kept.contains(&(a1 as u32)));
}

/// Two replicas, `a` deciding: its own nodes at 0.30, `b`'s at 0.10. Another replica's node
/// ranks as if its owner had just put a pod there, in InterPodAffinity's score too: a
/// TaskManager kept apart from its job's others stays on `a`'s nodes, where a pod without that
/// term takes `b`'s cooler ones; once the watch reports that `b` gets no reviews, its nodes are
/// `a`'s to take. Both decision paths agree.
#[test]
fn another_replicas_nodes_count_their_owners_pod_in_the_affinity_score() {
    use crate::inflight::ledger::HeardMix;
    use crate::placement::ReplicaSet;
    use std::sync::Arc;
    let set = Arc::new(ReplicaSet::new("a", ["a".to_string(), "b".to_string()]).expect("set"));
    let view = view_of(
        (0..20)
            .map(|i| {
                let name = format!("n{i:02}");
                let cpu = if set.owner(&name) == "a" { 0.30 } else { 0.10 };
                let mut n = NodeLoad::new(&name, cpu);
                Arc::make_mut(&mut n.labels).insert("kubernetes.io/hostname".into(), name);
                n.cpu_capacity_cores = Some(16.0);
                n
            })
            .collect(),
    );
    let world = aligned_world(&view);
    let apart = taskmanager(
        "wordcount",
        json!({"affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
            "weight": 100,
            "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname",
                                "labelSelector": {"matchLabels": {"app": "wordcount"}}}}]}}}),
    );
    let plain = taskmanager("wordcount", json!({}));
    // One set of indexes for every decision, as a replica keeps them: the mirrored pods count
    // for the decision that mirrors them only.
    let indexes = RankIndexes::default();
    let owners = |p: &Pod, heard: HeardMix| {
        let replica = Replica {
            salt: 1,
            set: Some(set.clone()),
            unheard: 0,
            heard,
            ..Replica::default()
        };
        let policy = PlacementConfig::default();
        let scheduler = SchedulerConfig::default();
        let walked = decide(
            &DecisionCtx::new(&demand(p), &view, &world, &policy, &scheduler),
            replica.clone(),
        );
        let indexed = decide_indexed(
            &DecisionCtx::new(&demand(p), &view, &world, &policy, &scheduler),
            replica,
            &indexes,
        );
        assert_eq!(named(&walked), named(&indexed), "both paths decide alike");
        let owners: std::collections::BTreeSet<String> = first_tier(&walked)
            .iter()
            .map(|n| set.owner(n).to_string())
            .collect();
        owners.into_iter().collect::<Vec<_>>()
    };
    assert_eq!(owners(&plain, HeardMix::default()), ["b"]);
    assert_eq!(owners(&apart, HeardMix::default()), ["a"]);
    let b_gets_nothing = HeardMix {
        own: 50.0,
        others: 0.0,
    };
    assert_eq!(owners(&apart, b_gets_nothing), ["b"]);
    assert_eq!(owners(&apart, HeardMix::default()), ["a"]);
}

/// The nodes the score keeps, read off its raw sums' range, are those its normalised scores
/// keep: within half the first tier's lead of the best. Random placements of the job's pods
/// (taken as mirrored), one topology key and two.
#[test]
fn kept_nodes_match_the_normalised_scores() {
    use crate::placement::eligible::groups_around::Surroundings;
    use crate::placement::eligible::pod_level::{Around, around_affinity_scores, restrict};
    use crate::scheduler::cycle::INTER_POD_AFFINITY_WEIGHT;
    let view = view();
    let world = aligned_world(&view);
    let term = |key: &str, weight: u32| {
        json!({"weight": weight, "podAffinityTerm": {"topologyKey": key,
            "labelSelector": {"matchLabels": {"app": "wordcount"}}}})
    };
    let apart = json!({"affinity": {"podAntiAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [term("kubernetes.io/hostname", 100)]}}});
    let both = json!({"affinity": {
        "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution":
            [term("kubernetes.io/hostname", 60)]},
        "podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [term(ZONE, 30)]}}});
    let all: Vec<usize> = (0..view.nodes.len()).collect();
    let eligible: std::sync::Arc<[u32]> = (0..view.nodes.len() as u32).collect();
    let mut state = 0x2545_f491_u64;
    let mut next = move || {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1);
        state >> 33
    };
    let mut kept_some = 0;
    for spec in [apart, both] {
        let tm = taskmanager("wordcount", spec);
        let d = demand(&tm);
        for gap in [40, 160, 200] {
            for _ in 0..100 {
                let mirrored: Vec<(usize, u32)> = all
                    .iter()
                    .map(|&k| (k, (next() % 4) as u32))
                    .filter(|&(_, pods)| pods > 0)
                    .collect();
                let expected: Vec<u32> =
                    match around_affinity_scores(&d.facts, &view, &world, &mirrored, &all) {
                        None => eligible.to_vec(),
                        Some(scores) => {
                            let total = |s: i64| s * INTER_POD_AFFINITY_WEIGHT;
                            let best = scores.iter().map(|&s| total(s)).max().unwrap_or(0);
                            let margin = (gap / 2).max(1);
                            eligible
                                .iter()
                                .copied()
                                .filter(|&k| best - total(scores[k as usize]) < margin)
                                .collect()
                        }
                    };
                let at = Surroundings {
                    facts: &d.facts,
                    view: &view,
                    world: &world,
                };
                let kept = restrict(
                    at,
                    &eligible,
                    Around::Read {
                        mirrored: &mirrored,
                    },
                    gap,
                )
                .map(|r| r.kept.to_vec())
                .unwrap_or_else(|| eligible.to_vec());
                assert_eq!(kept, expected, "gap {gap}, pods {mirrored:?}");
                kept_some += usize::from(kept.len() < eligible.len());
            }
        }
    }
    assert!(
        kept_some > 100,
        "the scores left nodes out only {kept_some} times"
    );
}

/// Preferred anti-affinity that keeps few nodes worth naming (the job's pods are on all the
/// others) does not shrink the scheduler's sample: it still samples among every feasible
/// node, so the first tier covers its runs rather than naming one node as if every node
/// were scored, and the landing is spread over those nodes rather than empty.
#[test]
fn nodes_a_score_leaves_out_still_count_towards_the_sample() {
    let nodes: Vec<NodeLoad> = (0..400)
        .map(|i| {
            let name = format!("n{i:03}");
            let mut n = NodeLoad::new(&name, 0.2 + 0.5 * ((i * 37) % 100) as f64 / 100.0);
            Arc::make_mut(&mut n.labels).insert("kubernetes.io/hostname".into(), name);
            n.cpu_capacity_cores = Some(16.0);
            n
        })
        .collect();
    let view = view_of(nodes);
    let mut world = aligned_world(&view);
    // One of the job's TaskManagers on every node but every tenth.
    for i in (0..400).filter(|i| i % 10 != 0) {
        let name = format!("w{i}");
        watch_wordcount(&mut world, &name, &format!("n{i:03}"));
    }
    let tm = wordcount_apart();
    let decision = run(&tm, &view, &world);
    assert_eq!(decision.feasible, 400, "every node is feasible");
    assert!(
        decision.sample_fraction < 0.5,
        "the scheduler samples: {}",
        decision.sample_fraction
    );
    let first = first_tier(&decision);
    assert!(
        first.len() > 1,
        "one node cannot be in every run: {first:?}"
    );
    let free = |name: &String| name[1..].parse::<usize>().is_ok_and(|i| i % 10 == 0);
    assert!(
        first.iter().all(free),
        "only nodes without the job: {first:?}"
    );
    assert!(
        decision.landing.len() > 1,
        "the landing is spread: {:?}",
        decision.landing
    );
}

/// The nodes preferred anti-affinity favours (those without the job) are all hot: the tiers
/// name the cool nodes it puts behind, and the favoured hot ones are avoided, instead of
/// naming the hot ones or nothing.
#[test]
fn when_the_nodes_the_scores_favour_are_hot_the_cool_ones_are_named_and_those_avoided() {
    let nodes: Vec<NodeLoad> = [
        ("n0", 0.20),
        ("n1", 0.25),
        ("n2", 0.30),
        ("n3", 0.35),
        ("n4", 0.90),
        ("n5", 0.92),
    ]
    .iter()
    .map(|(name, cpu)| {
        let mut n = NodeLoad::new(*name, *cpu);
        Arc::make_mut(&mut n.labels).insert("kubernetes.io/hostname".into(), name.to_string());
        n.cpu_capacity_cores = Some(16.0);
        n
    })
    .collect();
    let view = view_of(nodes);
    let mut world = aligned_world(&view);
    for node in ["n0", "n1", "n2", "n3"] {
        watch_wordcount(&mut world, &format!("w-{node}"), node);
    }
    let tm = wordcount_apart();
    let decision = run(&tm, &view, &world);
    assert!(!decision.saturated, "cool nodes exist: {decision:?}");
    assert_eq!(first_tier(&decision), ["n0"], "the coolest, sibling or not");
    let named = named(&decision);
    assert!(
        !named.iter().any(|n| n == "n4" || n == "n5"),
        "the hot nodes are not named: {named:?}"
    );
    let avoided: Vec<&str> = decision.avoid.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(
        avoided,
        ["n5", "n4"],
        "the favoured hot nodes, hottest first"
    );
}

/// `placement.per_job`: a node holding `max_per_node` of the job's pods, or a zone that would
/// hold more than `max_per_zone` of them, is not named while another node is; other jobs'
/// pods do not count; the index and the walk agree.
#[test]
fn a_jobs_own_spread_keeps_it_off_full_nodes_and_zones() {
    use crate::config::PerJob;
    let view = view();
    let mut world = aligned_world(&view);
    for (name, app, node) in [
        ("w1", "wordcount", "a1"),
        ("w2", "wordcount", "a1"),
        ("o1", "other", "a2"),
        ("o2", "other", "a2"),
    ] {
        watch(
            &mut world,
            &bound(
                name,
                json!({"app": app, "component": "taskmanager"}),
                node,
                json!({}),
            ),
        );
    }
    let tm = taskmanager("wordcount", json!({}));
    let decide_with = |per_job: PerJob| {
        let policy = PlacementConfig {
            per_job,
            ..PlacementConfig::default()
        };
        let scheduler = SchedulerConfig::default();
        let walked = decide(
            &DecisionCtx::new(&demand(&tm), &view, &world, &policy, &scheduler),
            7,
        );
        let indexed = decide_indexed(
            &DecisionCtx::new(&demand(&tm), &view, &world, &policy, &scheduler),
            7,
            &RankIndexes::default(),
        );
        assert_eq!(walked, indexed, "both paths decide alike");
        named(&walked)
    };
    assert_eq!(decide_with(PerJob::default())[0], "a1", "off: the coolest");
    let per_node = decide_with(PerJob {
        max_per_node: Some(2),
        max_per_zone: None,
    });
    assert!(!per_node.contains(&"a1".to_string()), "{per_node:?}");
    assert_eq!(per_node[0], "a2", "another job's pods do not count");
    // `review --explain` says why the coolest node was left out.
    let policy = PlacementConfig {
        per_job: PerJob {
            max_per_node: Some(2),
            max_per_zone: None,
        },
        ..PlacementConfig::default()
    };
    let scheduler = SchedulerConfig::default();
    let decision = decide(
        &DecisionCtx::new(&demand(&tm), &view, &world, &policy, &scheduler),
        7,
    );
    let beyond: Vec<String> = assess_all(
        &DecisionCtx::new(&demand(&tm), &view, &world, &policy, &scheduler),
        &Replica::from(7),
        &decision,
    )
    .into_iter()
    .filter(|a| a.beyond_job_bounds)
    .map(|a| a.name)
    .collect();
    assert_eq!(beyond, vec!["a1".to_string()]);
    let per_zone = decide_with(PerJob {
        max_per_node: None,
        max_per_zone: Some(0.5),
    });
    assert!(per_zone.iter().all(|n| !n.starts_with('a')), "{per_zone:?}");
    assert!(
        per_zone[0].starts_with('b'),
        "the next coolest zone: {per_zone:?}"
    );
    // A bound that leaves no node is not applied.
    let everywhere = decide_with(PerJob {
        max_per_node: Some(1),
        max_per_zone: Some(0.01),
    });
    assert!(!everywhere.is_empty());
}

/// `review --explain` reads which nodes the decision could name from the decision's own
/// eligibility: the nodes holding the job's pods, which its preferred anti-affinity puts far
/// behind the others, pass every filter but are marked as left out by the scores, and the
/// decision names none of them.
#[test]
fn explain_marks_the_nodes_the_scores_leave_out() {
    let view = view();
    let mut world = aligned_world(&view);
    for (name, node) in [("w1", "a1"), ("w2", "a2"), ("w3", "b1")] {
        watch_wordcount(&mut world, name, node);
    }
    let tm = wordcount_apart();
    let policy = PlacementConfig::default();
    let scheduler = SchedulerConfig::default();
    let demand = demand(&tm);
    let ctx = DecisionCtx::new(&demand, &view, &world, &policy, &scheduler);
    let decision = decide(&ctx, 7);
    let rows = assess_all(&ctx, &Replica::from(7), &decision);
    let kept_out: Vec<&str> = rows
        .iter()
        .filter(|a| a.kept_out)
        .map(|a| a.name.as_str())
        .collect();
    assert_eq!(kept_out, ["a1", "a2", "b1"], "the job's nodes");
    assert!(rows.iter().all(|a| !a.kept_out || a.eligibility.is_ok()));
    let named = named(&decision);
    assert!(
        !named.iter().any(|n| kept_out.contains(&n.as_str())),
        "named {named:?}, left out {kept_out:?}"
    );
    assert!(!named.is_empty());
}
