//! `placement::decide` on hand-made clusters: what is preferred, what never is.

use crate::test_support::seeded;

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::config::scheduler::{ListedNodeOrder, SchedulerConfig};
use crate::config::{PinningRule, PlacementConfig};
use crate::inflight::ledger::{Ledger, PodLoad};
use crate::inflight::world::World;
use crate::placement::DecisionCtx;
use crate::placement::landing::Window;
use crate::placement::{Decision, PodConstraints, PodDemand, decide, unsteered_landing};
use crate::scheduler::PodFacts;
use crate::scheduler::num_feasible_nodes_to_find;
use crate::snapshot::{LoadSnapshot, NodeLoad, Taint};
use crate::view::ClusterView;
use k8s_openapi::api::core::v1::Pod;
use proptest::prelude::*;
use serde_json::json;

fn node(name: &str, cpu: f64) -> NodeLoad {
    let mut n = NodeLoad::new(name, cpu);
    Arc::make_mut(&mut n.labels).insert("kubernetes.io/hostname".into(), name.into());
    Arc::make_mut(&mut n.labels).insert("node-pool".into(), "flink".into());
    n.cpu_capacity_cores = Some(16.0);
    n
}

fn pod(spec: serde_json::Value) -> Pod {
    let mut spec = spec;
    spec["containers"] = json!([{"name": "flink-main-container",
        "resources": {"requests": {"cpu": "2"}}}]);
    serde_json::from_value(json!({
        "metadata": {"name": "tm", "labels": {"component": "taskmanager", "flink-pool": "blue"}},
        "spec": spec
    }))
    .expect("pod")
}

/// The pod as placement sees it: a 2-core TaskManager with no network estimate.
fn demand<'a>(p: &'a Pod, rules: &[PinningRule]) -> PodDemand<'a> {
    demand_with_network(p, rules, 0.0)
}

fn demand_with_network<'a>(p: &'a Pod, rules: &[PinningRule], bytes: f64) -> PodDemand<'a> {
    PodDemand {
        constraints: PodConstraints::of(p, rules),
        facts: PodFacts::of(p),
        load: PodLoad {
            cpu_cores: 2.0,
            network_bytes_per_second: bytes,
        },
        source: Default::default(),
    }
}

/// A replica's ledger before anything is charged or watched.
fn no_charges() -> World {
    World::new(Ledger::new(Duration::from_secs(90)))
}

fn run(d: &PodDemand<'_>, view: &ClusterView, world: &World, policy: &PlacementConfig) -> Decision {
    decide(
        &DecisionCtx::new(d, view, world, policy, &SchedulerConfig::default()),
        7,
    )
}

fn names(decision: &Decision) -> Vec<Vec<String>> {
    decision
        .tiers
        .iter()
        .map(|t| t.nodes.iter().map(|n| n.name.clone()).collect())
        .collect()
}

fn all_named(decision: &Decision) -> Vec<String> {
    names(decision).into_iter().flatten().collect()
}

#[test]
fn coolest_eligible_nodes_fill_the_tiers_in_order() {
    let cpus = [0.5, 0.1, 0.3, 0.2, 0.6, 0.4, 0.7, 0.05, 0.35, 0.45, 0.25];
    let snapshot = LoadSnapshot {
        window_samples: Default::default(),
        taken_at: None,
        pods: Vec::new(),
        nodes: cpus
            .iter()
            .enumerate()
            .map(|(i, c)| node(&format!("n{i:02}"), *c))
            .collect(),
    };
    let policy = PlacementConfig::default();
    let view = ClusterView::build(&snapshot, None, &policy);
    let p = pod(json!({}));
    let d = run(&demand(&p, &[]), &view, &no_charges(), &policy);
    assert_eq!(
        names(&d),
        vec![vec!["n07"], vec!["n01", "n03", "n10", "n02", "n08", "n05"]]
    );
    assert_eq!(d.tiers[0].weight, 100);
    assert_eq!(d.tiers[1].weight, 20);
    // Under 100 nodes the scheduler scores every feasible node: the top node takes the pod.
    assert_eq!(d.landing, vec![("n07".to_string(), 1.0)]);
    assert!(d.avoid.is_empty(), "no node is hot");
}

#[test]
fn ineligible_and_hot_nodes_are_never_preferred() {
    let mut cordoned = node("cordoned", 0.01);
    cordoned.unschedulable = true;
    let mut not_ready = node("not-ready", 0.01);
    not_ready.ready = false;
    let mut tainted = node("tainted", 0.01);
    tainted.taints.push(Taint {
        key: "dedicated".into(),
        value: Some("gpu".into()),
        effect: "NoSchedule".into(),
    });
    let mut soft_taint = node("soft-taint", 0.02);
    soft_taint.taints.push(Taint {
        key: "spot".into(),
        value: None,
        effect: "PreferNoSchedule".into(),
    });
    let mut other_pool = node("other-pool", 0.01);
    Arc::make_mut(&mut other_pool.labels).insert("node-pool".into(), "general".into());
    let blocked = node("blocked", 0.01);
    let hot = node("hot", 0.95);
    let mut saturated_nic = node("saturated-nic", 0.1);
    saturated_nic.network_bytes_per_second = Some(1.2e9);
    saturated_nic.network_capacity_bytes_per_second = Some(1.25e9);
    let ok = node("ok", 0.5);
    let snapshot = LoadSnapshot {
        window_samples: Default::default(),
        taken_at: None,
        pods: Vec::new(),
        nodes: vec![
            cordoned,
            not_ready,
            tainted,
            soft_taint,
            other_pool,
            blocked,
            hot,
            saturated_nic,
            ok,
        ],
    };
    let policy = PlacementConfig::default();
    let view = ClusterView::build(&snapshot, None, &policy);
    // Flink's blocklist is a required hostname NotIn.
    let p = pod(json!({
        "nodeSelector": {"node-pool": "flink"},
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "NotIn", "values": ["blocked"]}]}]}}}
    }));
    let d = run(&demand(&p, &[]), &view, &no_charges(), &policy);
    assert_eq!(all_named(&d), vec!["soft-taint", "ok"]);
    let avoided: Vec<_> = d.avoid.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(
        avoided,
        vec!["hot", "saturated-nic"],
        "hot eligible nodes, hottest first"
    );
}

#[test]
fn tolerated_taints_keep_nodes_eligible() {
    let mut tainted = node("dedicated", 0.01);
    tainted.taints.push(Taint {
        key: "dedicated".into(),
        value: Some("flink".into()),
        effect: "NoSchedule".into(),
    });
    let snapshot = LoadSnapshot {
        window_samples: Default::default(),
        taken_at: None,
        pods: Vec::new(),
        nodes: vec![tainted, node("plain", 0.5)],
    };
    let policy = PlacementConfig::default();
    let view = ClusterView::build(&snapshot, None, &policy);
    let p = pod(json!({"tolerations": [
        {"key": "dedicated", "operator": "Equal", "value": "flink", "effect": "NoSchedule"}]}));
    let d = run(&demand(&p, &[]), &view, &no_charges(), &policy);
    assert_eq!(all_named(&d), vec!["dedicated", "plain"]);
}

#[test]
fn pinning_rule_filters_and_is_returned() {
    let mut blue = node("blue-1", 0.6);
    Arc::make_mut(&mut blue.labels).insert("pool".into(), "blue".into());
    let mut green = node("green-1", 0.1);
    Arc::make_mut(&mut green.labels).insert("pool".into(), "green".into());
    let snapshot = LoadSnapshot {
        window_samples: Default::default(),
        taken_at: None,
        pods: Vec::new(),
        nodes: vec![blue, green],
    };
    let rules = [PinningRule {
        pod_label: "flink-pool".into(),
        node_label: "pool".into(),
    }];
    let policy = PlacementConfig {
        pinning: rules.to_vec(),
        ..Default::default()
    };
    let view = ClusterView::build(&snapshot, None, &policy);
    let p = pod(json!({}));
    let d = run(&demand(&p, &rules), &view, &no_charges(), &policy);
    assert_eq!(all_named(&d), vec!["blue-1"]);
    assert_eq!(d.pinning.len(), 1);
    assert_eq!(d.pinning[0].key, "pool");
    assert_eq!(
        d.pinning[0].values.as_deref(),
        Some(&["blue".to_string()][..])
    );
}

#[test]
fn inflight_load_moves_the_next_pod_elsewhere() {
    let snapshot = LoadSnapshot {
        window_samples: Default::default(),
        taken_at: None,
        pods: Vec::new(),
        nodes: vec![node("a", 0.10), node("b", 0.12), node("c", 0.30)],
    };
    // No tie band: "a" and "b" are within half a pod of each other.
    let policy = PlacementConfig {
        tiers: vec![crate::config::Tier {
            nodes: 1,
            weight: 100,
        }],
        tie_band: 0.0,
        ..Default::default()
    };
    let view = ClusterView::build(&snapshot, None, &policy);
    let p = pod(json!({}));
    let d = demand(&p, &[]);
    let mut world = World::new(Ledger::new(Duration::from_secs(60)));
    let first = run(&d, &view, &world, &policy);
    assert_eq!(all_named(&first), vec!["a"]);
    // 2 cores on a 16-core node is +0.125 CPU: "a" becomes hotter than "b".
    world.charges.charge(
        "p1",
        &first.landing,
        d.load,
        &d.facts.requests,
        Instant::now(),
    );
    let second = run(&d, &view, &world, &policy);
    assert_eq!(all_named(&second), vec!["b"]);
}

/// A node of `cores` cores with `requested` cores already requested by bound pods.
fn sized(name: &str, cpu: f64, cores: u32, requested: u32) -> NodeLoad {
    let mut n = node(name, cpu);
    n.cpu_capacity_cores = Some(f64::from(cores));
    n.allocatable = [
        ("cpu", cores.to_string()),
        ("memory", format!("{}Gi", cores * 4)),
        ("pods", "110".into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    n.requested = [
        ("cpu", requested.to_string()),
        ("memory", format!("{requested}Gi")),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    n
}

#[test]
fn nodes_full_by_requests_are_never_preferred() {
    // The coolest node by real CPU has 1 core of requests left: the scheduler must skip it.
    let snapshot = LoadSnapshot {
        window_samples: Default::default(),
        taken_at: None,
        pods: Vec::new(),
        nodes: vec![
            sized("idle-but-full", 0.05, 16, 15),
            sized("busier", 0.40, 16, 4),
        ],
    };
    let policy = PlacementConfig::default();
    let view = ClusterView::build(&snapshot, None, &policy);
    let p = pod(json!({}));
    let d = run(&demand(&p, &[]), &view, &no_charges(), &policy);
    assert_eq!(all_named(&d), vec!["busier"]);
    assert_eq!(d.feasible, 1);
}

#[test]
fn requests_of_steered_pods_fill_a_node_before_they_are_bound() {
    // Room for 3 TaskManagers of 2 cores on the cool node.
    let snapshot = LoadSnapshot {
        window_samples: Default::default(),
        taken_at: None,
        pods: Vec::new(),
        nodes: vec![sized("cool", 0.05, 16, 10), sized("warm", 0.50, 16, 0)],
    };
    let policy = PlacementConfig::default();
    let view = ClusterView::build(&snapshot, None, &policy);
    let p = pod(json!({}));
    let d = demand(&p, &[]);
    let mut world = World::new(Ledger::new(Duration::from_secs(60)));
    let mut landed = Vec::new();
    for k in 0..5 {
        let decision = run(&d, &view, &world, &policy);
        let (node, p) = decision.landing[0].clone();
        assert_eq!(p, 1.0);
        world.charges.charge(
            &format!("p{k}"),
            &decision.landing,
            d.load,
            &d.facts.requests,
            Instant::now(),
        );
        landed.push(node);
    }
    assert_eq!(landed, vec!["cool", "cool", "cool", "warm", "warm"]);
}

#[test]
fn a_node_the_pods_ahead_may_fill_passes_its_odds_to_the_next_tier() {
    // Room for 3 TaskManagers of 2 cores on the cool node; 4 pods still pending may land there
    // or on `spare`, evenly: 2 expected, and 3 or 4 (fill) with odds 5/16.
    let snapshot = LoadSnapshot {
        window_samples: Default::default(),
        taken_at: None,
        pods: Vec::new(),
        nodes: vec![
            sized("cool", 0.05, 16, 10),
            sized("warm", 0.60, 16, 0),
            sized("spare", 0.90, 64, 0),
        ],
    };
    let policy = PlacementConfig::default();
    let view = ClusterView::build(&snapshot, None, &policy);
    let p = pod(json!({}));
    let d = demand(&p, &[]);
    let mut world = World::new(Ledger::new(Duration::from_secs(60)));
    let alone = run(&d, &view, &world, &policy);
    assert_eq!(alone.landing, vec![("cool".to_string(), 1.0)]);
    let even = [("cool".to_string(), 0.5), ("spare".to_string(), 0.5)];
    for k in 0..4 {
        world.charges.charge(
            &format!("p{k}"),
            &even,
            d.load,
            &d.facts.requests,
            Instant::now(),
        );
    }
    let decision = run(&d, &view, &world, &policy);
    assert_eq!(names(&decision), vec![vec!["cool"], vec!["warm"]]);
    let odds: std::collections::BTreeMap<&str, f64> = decision
        .landing
        .iter()
        .map(|(n, p)| (n.as_str(), *p))
        .collect();
    // The normal tail at (3 - 0.5 - 2) / 1 standard deviation: 0.31.
    assert!((odds["warm"] - 0.3085).abs() < 1e-3, "{odds:?}");
    assert!((odds["cool"] + odds["warm"] - 1.0).abs() < 1e-9, "{odds:?}");
}

#[test]
fn a_network_heavy_pod_avoids_busy_nics_a_cpu_only_pod_does_not() {
    let nic = 1.25e9;
    let mut busy_nic = node("busy-nic", 0.10);
    busy_nic.network_bytes_per_second = Some(0.80 * nic);
    busy_nic.network_capacity_bytes_per_second = Some(nic);
    let mut busy_cpu = node("busy-cpu", 0.45);
    busy_cpu.network_bytes_per_second = Some(0.05 * nic);
    busy_cpu.network_capacity_bytes_per_second = Some(nic);
    let snapshot = LoadSnapshot {
        window_samples: Default::default(),
        taken_at: None,
        pods: Vec::new(),
        nodes: vec![busy_nic, busy_cpu],
    };
    let policy = PlacementConfig::default();
    let view = ClusterView::build(&snapshot, None, &policy);
    let p = pod(json!({}));
    let cpu_only = run(&demand(&p, &[]), &view, &no_charges(), &policy);
    assert_eq!(
        cpu_only.landing[0].0, "busy-nic",
        "its NIC is no concern of a CPU-only pod"
    );
    // 50 MB/s more would take the busy NIC to 84%: the bottleneck there beats CPU elsewhere.
    let heavy = run(
        &demand_with_network(&p, &[], 5e7),
        &view,
        &no_charges(),
        &policy,
    );
    assert_eq!(heavy.landing[0].0, "busy-cpu");
}

/// A pod is ranked by the level it sits at, halfway through its own load: not sent onto a node
/// already busier, where it adds little, ahead of a cooler one where it adds more.
#[test]
fn a_pod_is_ranked_halfway_through_its_own_load() {
    let nic = 1.25e9;
    // NIC at 75%: 50 MB/s adds 4 points. The CPU node: 2 cores of 16 add 12.5 points.
    let mut nic_bound = node("nic-bound", 0.05);
    nic_bound.network_bytes_per_second = Some(0.75 * nic);
    nic_bound.network_capacity_bytes_per_second = Some(nic);
    let cpu_node = |name: &str, cpu: f64| {
        let mut n = node(name, cpu);
        n.network_bytes_per_second = Some(0.10 * nic);
        n.network_capacity_bytes_per_second = Some(nic);
        n
    };
    // No near-ties: the order alone decides.
    let policy = PlacementConfig {
        tie_band: 0.0,
        ..PlacementConfig::default()
    };
    let p = pod(json!({}));
    let heavy = demand_with_network(&p, &[], 5e7);
    let first = |cpu: f64| {
        let snapshot = LoadSnapshot {
            window_samples: Default::default(),
            taken_at: None,
            pods: Vec::new(),
            nodes: vec![nic_bound.clone(), cpu_node("cpu", cpu)],
        };
        let view = ClusterView::build(&snapshot, None, &policy);
        run(&heavy, &view, &no_charges(), &policy).landing[0]
            .0
            .clone()
    };
    // After the pod the NIC-bound node would win (0.79 against 0.805); halfway it is 0.77
    // against 0.7425, and the cooler node takes the pod.
    assert_eq!(first(0.68), "cpu");
    // Halfway 0.77 against 0.7725: the NIC-bound node, where the pod now sits lower.
    assert_eq!(first(0.71), "nic-bound");
}

/// Above 100 nodes the sample is a run of the scheduler's order from an unknown start: tier 1
/// holds a node in every run, so no pod falls to the request scores alone. Where the order of
/// the nodes the scheduler listed is unknown (v1.35+), tier 1 holds enough nodes that the
/// sample misses them all with at most `sample_miss` odds.
#[test]
fn tier_one_covers_every_run_of_the_scheduler_order() {
    for listed_node_order in [ListedNodeOrder::ByName, ListedNodeOrder::Unknown] {
        let scheduler = SchedulerConfig {
            listed_node_order,
            ..SchedulerConfig::default()
        };
        for count in [50, 500, 5000] {
            let snapshot = LoadSnapshot {
                window_samples: Default::default(),
                taken_at: None,
                pods: Vec::new(),
                nodes: (0..count)
                    .map(|i| node(&format!("n{i:05}"), 0.1 + (i % 97) as f64 * 0.005))
                    .collect(),
            };
            let policy = PlacementConfig::default();
            let view = ClusterView::build(&snapshot, None, &policy);
            let p = pod(json!({}));
            let d = decide(
                &DecisionCtx::new(&demand(&p, &[]), &view, &no_charges(), &policy, &scheduler),
                7,
            );
            let wanted = num_feasible_nodes_to_find(0, count as i64) as usize;
            let window = Window::new(count, wanted, count);
            let first = d.first_tier();
            if window.whole() {
                assert_eq!(first.len(), 1, "{count} nodes");
            } else if listed_node_order == ListedNodeOrder::ByName {
                // No zone labels: the order is by name, and the names sort as the indexes.
                let mut positions: Vec<usize> = first
                    .iter()
                    .map(|n| n.name[1..].parse().expect("index"))
                    .collect();
                positions.sort_unstable();
                let gaps = positions
                    .windows(2)
                    .map(|w| w[1] - w[0])
                    .chain(std::iter::once(
                        positions[0] + count - positions[positions.len() - 1],
                    ));
                for gap in gaps {
                    assert!(
                        gap <= window.len,
                        "{count} nodes: a run of {} misses tier 1 ({positions:?})",
                        window.len
                    );
                }
                assert!(
                    positions.len() < 3 * count / window.len,
                    "{count} nodes: {} in tier 1",
                    positions.len()
                );
            } else {
                // Each node in the sample at len / n, independently: the fewest that make
                // missing them all at most `sample_miss`-likely.
                let out = 1.0 - window.len as f64 / count as f64;
                let missed = |k: usize| out.powi(k as i32);
                assert!(missed(first.len()) <= policy.sample_miss, "{count} nodes");
                assert!(
                    missed(first.len() - 1) > policy.sample_miss,
                    "{count} nodes"
                );
                // Graded: the coolest at the tier's weight, none below halfway to the next.
                let weights: Vec<i32> = first.iter().map(|n| n.weight).collect();
                let coolest = first
                    .iter()
                    .min_by(|a, b| a.heat.total_cmp(&b.heat))
                    .expect("a first tier");
                assert_eq!(coolest.weight, 100, "{weights:?}");
                assert!(
                    weights.iter().all(|&w| (60..=100).contains(&w)),
                    "{weights:?}"
                );
            }
            let total: f64 = d.landing.iter().map(|(_, p)| p).sum();
            assert!(
                (total - 1.0).abs() < 1e-9,
                "{count} nodes, {listed_node_order:?}: {total}"
            );
            let named: Vec<&str> = first.iter().map(|n| n.name.as_str()).collect();
            assert!(d.landing.iter().all(|(n, _)| named.contains(&n.as_str())));
        }
    }
}

#[test]
fn replicas_take_near_ties_in_their_own_order() {
    // Ten nodes within half a pod (0.0625) of each other, one clearly hotter.
    let mut nodes: Vec<NodeLoad> = (0..10)
        .map(|i| node(&format!("n{i}"), 0.20 + i as f64 * 0.005))
        .collect();
    nodes.push(node("warm", 0.5));
    let policy = PlacementConfig::default();
    let view = view_of(nodes, &policy);
    let p = pod(json!({}));
    let d = demand(&p, &[]);
    let picks: std::collections::BTreeSet<String> = (0..40)
        .map(|salt| {
            let decision = decide(
                &DecisionCtx::new(
                    &d,
                    &view,
                    &no_charges(),
                    &policy,
                    &SchedulerConfig::default(),
                ),
                salt,
            );
            decision.landing[0].0.clone()
        })
        .collect();
    assert!(picks.len() >= 5, "replicas mostly agree: {picks:?}");
    assert!(
        !picks.contains("warm"),
        "only near-ties are shuffled: {picks:?}"
    );
    // The same replica (salt) decides the same way.
    let again = |salt| run_salted(&d, &view, &policy, salt);
    assert_eq!(again(3), again(3));
}

/// A replica known to decide alone, for a scheduler that scores every node, has no one to keep
/// apart from: whatever its salt, it names the coolest of the near-ties.
#[test]
fn a_replica_known_to_decide_alone_names_the_coolest_near_tie() {
    let nodes: Vec<NodeLoad> = (0..10)
        .map(|i| node(&format!("n{i}"), 0.20 + i as f64 * 0.005))
        .collect();
    let policy = PlacementConfig::default();
    let view = view_of(nodes, &policy);
    let p = pod(json!({}));
    let d = demand(&p, &[]);
    let scheduler = SchedulerConfig::default();
    let picks: std::collections::BTreeSet<String> = (0..40)
        .map(|salt| {
            let alone = crate::placement::Replica {
                salt,
                alone: true,
                ..crate::placement::Replica::default()
            };
            let world = no_charges();
            let ctx = DecisionCtx::new(&d, &view, &world, &policy, &scheduler);
            decide(&ctx, alone).landing[0].0.clone()
        })
        .collect();
    assert_eq!(picks.into_iter().collect::<Vec<_>>(), ["n0"]);
}

/// Two replicas, `a` deciding: its own nodes at 0.30, `b`'s at 0.10. A foreign node is ranked
/// as if `b` had just put a pod there too (0.35 after this pod, cooler than 0.425 at home); when
/// the watch runs behind, as if `b` had also decided as many unheard pods as `a`, water-filled
/// over its own nodes: home is cooler then. Once the watch has reported that `b` gets no reviews,
/// nothing is mirrored.
#[test]
fn a_replica_the_watch_runs_behind_mirrors_the_others_unheard_pods() {
    use crate::inflight::ledger::HeardMix;
    use crate::placement::{Replica, ReplicaSet};
    use std::sync::Arc;
    let set = Arc::new(ReplicaSet::new("a", ["a".to_string(), "b".to_string()]).expect("set"));
    let nodes: Vec<NodeLoad> = (0..20)
        .map(|i| {
            let name = format!("n{i}");
            let cpu = if set.owner(&name) == "a" { 0.30 } else { 0.10 };
            node(&name, cpu)
        })
        .collect();
    assert!((4..=16).contains(&nodes.iter().filter(|n| n.cpu > 0.2).count()));
    let policy = PlacementConfig::default();
    let view = view_of(nodes, &policy);
    let p = pod(json!({}));
    let d = demand(&p, &[]);
    let owner_of_landing = |unheard: usize, heard: HeardMix| {
        let replica = Replica {
            salt: 1,
            set: Some(set.clone()),
            unheard,
            heard,
            ..Replica::default()
        };
        let decision = decide(
            &DecisionCtx::new(
                &d,
                &view,
                &no_charges(),
                &policy,
                &SchedulerConfig::default(),
            ),
            replica,
        );
        set.owner(&decision.landing[0].0).to_string()
    };
    assert_eq!(owner_of_landing(0, HeardMix::default()), "b");
    assert_eq!(
        owner_of_landing(1, HeardMix::default()),
        "b",
        "the usual lag"
    );
    assert_eq!(owner_of_landing(20, HeardMix::default()), "a");
    let b_gets_nothing = HeardMix {
        own: 50.0,
        others: 0.0,
    };
    assert_eq!(owner_of_landing(20, b_gets_nothing), "b");
}

/// Two replicas, `a` deciding: its own nodes at 0.30 with room to spare, `b`'s at 0.10 with
/// room for one more 2-core pod. Where the scheduler scores every node, the pod whose
/// first-tier node another replica fills meanwhile has no named node left in the sample:
/// `b`'s last room is left to `b`. Under sampling, other first-tier nodes in the sample catch
/// such a pod, and `b`'s cooler nodes are named.
#[test]
fn another_replicas_last_room_is_left_to_it_where_every_node_is_scored() {
    use crate::placement::ReplicaSet;
    use std::sync::Arc;
    let set = Arc::new(ReplicaSet::new("a", ["a".to_string(), "b".to_string()]).expect("set"));
    let owners = |count: usize| {
        let nodes: Vec<NodeLoad> = (0..count)
            .map(|i| {
                let name = format!("n{i:03}");
                if set.owner(&name) == "a" {
                    sized(&name, 0.30, 16, 4)
                } else {
                    sized(&name, 0.10, 16, 14)
                }
            })
            .collect();
        let decision = decide_as_a(&set, 0, &view_of(nodes, &PlacementConfig::default()));
        let owners: std::collections::BTreeSet<String> = decision
            .first_tier()
            .iter()
            .map(|n| set.owner(&n.name).to_string())
            .collect();
        owners.into_iter().collect::<Vec<_>>()
    };
    assert_eq!(owners(20), ["a"]);
    assert_eq!(owners(400), ["b"], "under sampling");
}

/// Two replicas, `a` deciding with the watch far behind, under sampling: half of `b`'s nodes
/// are idle with room for one more pod, the other half at 0.40 with room to spare, `a`'s own at
/// 0.60. The pods `b` is taken to have decided unheard fill its idle nodes' room first, so `a`
/// names none of them; with the watch current, they are the coolest and named.
#[test]
fn the_others_unheard_pods_take_the_room_they_fill() {
    use crate::placement::ReplicaSet;
    use std::sync::Arc;
    let set = Arc::new(ReplicaSet::new("a", ["a".to_string(), "b".to_string()]).expect("set"));
    let mut idle = Vec::new();
    let nodes: Vec<NodeLoad> = (0..400)
        .map(|i| {
            let name = format!("n{i:03}");
            if set.owner(&name) == "a" {
                sized(&name, 0.60, 16, 4)
            } else if i % 2 == 0 {
                idle.push(name.clone());
                sized(&name, 0.05, 16, 14)
            } else {
                sized(&name, 0.40, 16, 4)
            }
        })
        .collect();
    let view = view_of(nodes, &PlacementConfig::default());
    let named_idle = |unheard: usize| {
        all_named(&decide_as_a(&set, unheard, &view))
            .into_iter()
            .filter(|n| idle.contains(n))
            .count()
    };
    assert!(
        named_idle(0) > 0,
        "the watch current: the idle nodes are the coolest"
    );
    assert_eq!(named_idle(idle.len() + 10), 0);
}

/// A 2-core TaskManager decided by replica `a` of `set`, with `unheard` of its decisions not
/// reported by the watch yet.
fn decide_as_a(
    set: &std::sync::Arc<crate::placement::ReplicaSet>,
    unheard: usize,
    view: &ClusterView,
) -> Decision {
    let p = pod(json!({}));
    let replica = crate::placement::Replica {
        salt: 1,
        set: Some(set.clone()),
        unheard,
        ..Default::default()
    };
    let policy = PlacementConfig::default();
    decide(
        &DecisionCtx::new(
            &demand(&p, &[]),
            view,
            &no_charges(),
            &policy,
            &SchedulerConfig::default(),
        ),
        replica,
    )
}

/// The view of a snapshot of `nodes` alone.
fn view_of(nodes: Vec<NodeLoad>, policy: &PlacementConfig) -> ClusterView {
    let snapshot = LoadSnapshot {
        window_samples: Default::default(),
        taken_at: None,
        pods: Vec::new(),
        nodes,
    };
    ClusterView::build(&snapshot, None, policy)
}

fn run_salted(
    d: &PodDemand<'_>,
    view: &ClusterView,
    policy: &PlacementConfig,
    salt: u64,
) -> String {
    decide(
        &DecisionCtx::new(d, view, &no_charges(), policy, &SchedulerConfig::default()),
        salt,
    )
    .landing[0]
        .0
        .clone()
}

proptest! {
    #![proptest_config(seeded::config(256))]
    /// On random clusters: weights stay 1..100, ineligible or hot nodes never appear, and no
    /// chosen node is hotter than an eligible cool node left out.
    #[test]
    fn ranking_properties(
        loads in prop::collection::vec((0.0..1.0f64, any::<bool>(), any::<bool>()), 1..60),
        charged in prop::collection::vec((0usize..60, 0.0..8.0f64), 0..10),
    ) {
        let nodes: Vec<NodeLoad> = loads.iter().enumerate().map(|(i, (cpu, cordoned, other_pool))| {
            let mut n = node(&format!("n{i}"), *cpu);
            n.unschedulable = *cordoned;
            if *other_pool { Arc::make_mut(&mut n.labels).insert("node-pool".into(), "general".into()); }
            n
        }).collect();
        let snapshot = LoadSnapshot { taken_at: None, nodes, pods: Vec::new(), window_samples: Default::default() };
        // No tie band: the strict order is checked.
        let policy = PlacementConfig { tie_band: 0.0, ..PlacementConfig::default() };
        let view = ClusterView::build(&snapshot, None, &policy);
        let mut world = World::new(Ledger::new(Duration::from_secs(60)));
        for (k, (i, cores)) in charged.iter().enumerate() {
            let target = format!("n{}", i % loads.len());
            world.charges.charge(&k.to_string(), &[(target, 1.0)], PodLoad { cpu_cores: *cores, network_bytes_per_second: 0.0 }, &Default::default(), Instant::now());
        }
        let p = pod(json!({"nodeSelector": {"node-pool": "flink"}}));
        let d = run(&demand(&p, &[]), &view, &world, &policy);
        let effective = |name: &str| {
            let i: usize = name[1..].parse().expect("index");
            let extra = world.charges.extra(name).map_or(0.0, |e| e.cpu_cores) / 16.0;
            loads[i].0 + extra
        };
        let chosen = all_named(&d);
        for t in &d.tiers { prop_assert!((1..=100).contains(&t.weight)); }
        let eligible = |i: usize| !loads[i].1 && !loads[i].2;
        let any_cool = (0..loads.len()).any(|i| eligible(i) && effective(&format!("n{i}")) < policy.hot.cpu);
        prop_assert_eq!(d.saturated, !any_cool && (0..loads.len()).any(eligible));
        if d.saturated {
            // Every eligible node is hot: the least bad are named, least bad first.
            for name in &chosen {
                let i: usize = name[1..].parse().expect("index");
                prop_assert!(eligible(i), "{name} is ineligible");
            }
            let heats: Vec<f64> = chosen.iter().map(|n| effective(n)).collect();
            prop_assert!(heats.windows(2).all(|w| w[0] <= w[1] + 1e-12), "{heats:?}");
            prop_assert!(d.avoid.iter().all(|a| !chosen.contains(&a.name)));
            return Ok(());
        }
        for name in &chosen {
            let i: usize = name[1..].parse().expect("index");
            prop_assert!(!loads[i].1 && !loads[i].2, "{name} is ineligible");
            prop_assert!(effective(name) < policy.hot.cpu, "{name} is hot");
        }
        let worst = chosen.iter().map(|n| effective(n)).fold(0.0, f64::max);
        for (i, (_, cordoned, other)) in loads.iter().enumerate() {
            let name = format!("n{i}");
            let e = effective(&name);
            if !cordoned && !other && e < policy.hot.cpu && !chosen.contains(&name) {
                prop_assert!(chosen.len() == 7 && e >= worst - 1e-12,
                    "{name} ({e}) left out while a hotter node ({worst}) was chosen");
            }
        }
        // Within the chosen list, order is coolest first.
        let heats: Vec<f64> = chosen.iter().map(|n| effective(n)).collect();
        prop_assert!(heats.windows(2).all(|w| w[0] <= w[1] + 1e-12), "{heats:?}");
    }
}

#[test]
fn left_to_itself_the_pod_goes_where_requests_are_lowest() {
    // The scheduler's resource scores favour the least requested node, however hot it runs:
    // that is where an unsteered (observed) pod is charged, not where the webhook would steer.
    let snapshot = LoadSnapshot {
        window_samples: Default::default(),
        taken_at: None,
        pods: Vec::new(),
        nodes: vec![
            sized("cool-but-requested", 0.05, 16, 12),
            sized("hot-but-empty", 0.85, 16, 0),
            sized("full", 0.01, 16, 15),
        ],
    };
    let policy = PlacementConfig::default();
    let view = ClusterView::build(&snapshot, None, &policy);
    let p = pod(json!({}));
    let d = demand(&p, &[]);
    let landing = unsteered_landing(&d, &view, &no_charges(), &SchedulerConfig::default());
    assert_eq!(landing, vec![("hot-but-empty".to_string(), 1.0)]);
    assert_eq!(
        all_named(&run(&d, &view, &no_charges(), &policy)),
        vec!["cool-but-requested"]
    );

    // Two equal nodes share the pod.
    let snapshot = LoadSnapshot {
        window_samples: Default::default(),
        taken_at: None,
        pods: Vec::new(),
        nodes: vec![sized("a", 0.3, 16, 4), sized("b", 0.6, 16, 4)],
    };
    let view = ClusterView::build(&snapshot, None, &policy);
    let landing = unsteered_landing(&d, &view, &no_charges(), &SchedulerConfig::default());
    assert_eq!(
        landing,
        vec![("a".to_string(), 0.5), ("b".to_string(), 0.5)]
    );

    // No node fits: no landing.
    let snapshot = LoadSnapshot {
        window_samples: Default::default(),
        taken_at: None,
        pods: Vec::new(),
        nodes: vec![sized("full", 0.01, 16, 15)],
    };
    let view = ClusterView::build(&snapshot, None, &policy);
    assert!(unsteered_landing(&d, &view, &no_charges(), &SchedulerConfig::default()).is_empty());
}
