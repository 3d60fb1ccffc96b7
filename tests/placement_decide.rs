//! `placement::decide` on hand-made clusters: what is preferred, what never is.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use placement_webhook::config::{PinningRule, PlacementConfig};
use placement_webhook::placement::ledger::{Ledger, PodLoad};
use placement_webhook::placement::{Decision, PodConstraints, decide};
use placement_webhook::snapshot::{LoadSnapshot, NodeLoad, Taint};
use placement_webhook::view::ClusterView;
use proptest::prelude::*;
use serde_json::json;

fn node(name: &str, cpu: f64) -> NodeLoad {
    let mut n = NodeLoad::new(name, cpu);
    n.labels
        .insert("kubernetes.io/hostname".into(), name.into());
    n.labels.insert("node-pool".into(), "flink".into());
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
        taken_at: None,
        nodes: cpus
            .iter()
            .enumerate()
            .map(|(i, c)| node(&format!("n{i:02}"), *c))
            .collect(),
    };
    let policy = PlacementConfig::default();
    let view = ClusterView::build(&snapshot, None, &policy);
    let p = pod(json!({}));
    let d = decide(&PodConstraints::of(&p, &[]), &view, None, &policy);
    assert_eq!(
        names(&d),
        vec![
            vec!["n07", "n01", "n03"],
            vec!["n10", "n02", "n08", "n05", "n09", "n00"]
        ]
    );
    assert_eq!(d.tiers[0].weight, 100);
    assert_eq!(d.tiers[1].weight, 40);
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
    other_pool
        .labels
        .insert("node-pool".into(), "general".into());
    let blocked = node("blocked", 0.01);
    let hot = node("hot", 0.95);
    let mut saturated_nic = node("saturated-nic", 0.1);
    saturated_nic.network_bytes_per_second = Some(1.2e9);
    saturated_nic.network_capacity_bytes_per_second = Some(1.25e9);
    let ok = node("ok", 0.5);
    let snapshot = LoadSnapshot {
        taken_at: None,
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
    let d = decide(&PodConstraints::of(&p, &[]), &view, None, &policy);
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
        taken_at: None,
        nodes: vec![tainted, node("plain", 0.5)],
    };
    let policy = PlacementConfig::default();
    let view = ClusterView::build(&snapshot, None, &policy);
    let p = pod(json!({"tolerations": [
        {"key": "dedicated", "operator": "Equal", "value": "flink", "effect": "NoSchedule"}]}));
    let d = decide(&PodConstraints::of(&p, &[]), &view, None, &policy);
    assert_eq!(all_named(&d), vec!["dedicated", "plain"]);
}

#[test]
fn pinning_rule_filters_and_is_returned() {
    let mut blue = node("blue-1", 0.6);
    blue.labels.insert("pool".into(), "blue".into());
    let mut green = node("green-1", 0.1);
    green.labels.insert("pool".into(), "green".into());
    let snapshot = LoadSnapshot {
        taken_at: None,
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
    let d = decide(&PodConstraints::of(&p, &rules), &view, None, &policy);
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
        taken_at: None,
        nodes: vec![node("a", 0.10), node("b", 0.12), node("c", 0.30)],
    };
    let policy = PlacementConfig {
        tiers: vec![placement_webhook::config::Tier {
            nodes: 1,
            weight: 100,
        }],
        ..Default::default()
    };
    let view = ClusterView::build(&snapshot, None, &policy);
    let p = pod(json!({}));
    let constraints = PodConstraints::of(&p, &[]);
    let mut ledger = Ledger::new(Duration::from_secs(60));
    let first = decide(&constraints, &view, Some(&ledger), &policy);
    assert_eq!(all_named(&first), vec!["a"]);
    // 2 cores on a 16-core node is +0.125 CPU: "a" becomes hotter than "b".
    ledger.charge(
        "p1",
        &["a".to_string()],
        PodLoad {
            cpu_cores: 2.0,
            network_bytes_per_second: 0.0,
        },
        Instant::now(),
    );
    let second = decide(&constraints, &view, Some(&ledger), &policy);
    assert_eq!(all_named(&second), vec!["b"]);
}

proptest! {
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
            if *other_pool { n.labels.insert("node-pool".into(), "general".into()); }
            n
        }).collect();
        let snapshot = LoadSnapshot { taken_at: None, nodes };
        let policy = PlacementConfig::default();
        let view = ClusterView::build(&snapshot, None, &policy);
        let mut ledger = Ledger::new(Duration::from_secs(60));
        for (k, (i, cores)) in charged.iter().enumerate() {
            let target = format!("n{}", i % loads.len());
            ledger.charge(&k.to_string(), &[target], PodLoad { cpu_cores: *cores, network_bytes_per_second: 0.0 }, Instant::now());
        }
        let p = pod(json!({"nodeSelector": {"node-pool": "flink"}}));
        let constraints = PodConstraints::of(&p, &[]);
        let d = decide(&constraints, &view, Some(&ledger), &policy);
        let effective = |name: &str| {
            let i: usize = name[1..].parse().expect("index");
            let extra = ledger.extra(name).map_or(0.0, |e| e.cpu_cores) / 16.0;
            loads[i].0 + extra
        };
        let chosen = all_named(&d);
        for t in &d.tiers { prop_assert!((1..=100).contains(&t.weight)); }
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
                prop_assert!(chosen.len() == 9 && e >= worst - 1e-12,
                    "{name} ({e}) left out while a hotter node ({worst}) was chosen");
            }
        }
        // Within the chosen list, order is coolest first.
        let heats: Vec<f64> = chosen.iter().map(|n| effective(n)).collect();
        prop_assert!(heats.windows(2).all(|w| w[0] <= w[1] + 1e-12), "{heats:?}");
    }
}
