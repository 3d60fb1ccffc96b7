//! Properties of `placement::decide` and the preferred terms it yields, on generated clusters,
//! pods and policies, checked against an oracle written here from the README's rules (not from
//! the placement code).
//!
//! `decide.rs` covers CPU-only clusters with cordoned and nodeSelector-mismatched
//! nodes; these add NotReady nodes, taints (tolerated or not, filtering or not), required
//! affinity (Flink's blocklist), network and memory heat against known and unknown NIC
//! capacity, in-flight network load, generated heat weights and tiers, both node-match styles,
//! and the avoid term. Properties are read off the terms that go into the patch.

use crate::test_support::seeded;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::config::scheduler::SchedulerConfig;
use crate::config::{AvoidHot, HeatWeights, HotThresholds, NodeMatch, PlacementConfig, Tier};
use crate::inflight::ledger::{Ledger, PodLoad};
use crate::inflight::world::World;
use crate::placement::{
    DecisionCtx, PodConstraints, PodDemand, RankIndexes, decide, decide_indexed,
};
use crate::scheduler::PodFacts;
use crate::snapshot::{LoadSnapshot, NodeLoad, Taint};
use crate::view::ClusterView;
use k8s_openapi::api::core::v1::{Pod, PreferredSchedulingTerm};
use proptest::prelude::*;
use serde_json::json;

const HOSTNAME: &str = "kubernetes.io/hostname";
const CORES: f64 = 16.0;
const EPS: f64 = 1e-9;
/// The pod's CPU request: what it adds to a node, in cores.
const POD_CORES: f64 = 2.0;

/// The taints a generated node may carry. The pod tolerates exactly `dedicated=flink:NoSchedule`.
#[derive(Debug, Clone, Copy, PartialEq)]
enum TaintKind {
    None,
    Tolerated,
    Untolerated,
    /// Same key and value, but NoExecute: the pod's toleration names NoSchedule only.
    UntoleratedNoExecute,
    /// PreferNoSchedule only scores, it does not filter.
    Soft,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Pool {
    Flink,
    General,
    Missing,
}

#[derive(Debug, Clone)]
struct GenNode {
    cpu: f64,
    network: Option<f64>,
    capacity: Option<f64>,
    memory: Option<f64>,
    cordoned: bool,
    not_ready: bool,
    taint: TaintKind,
    pool: Pool,
    blocked: bool,
}

fn gen_node() -> impl Strategy<Value = GenNode> {
    let taint = prop_oneof![
        4 => Just(TaintKind::None),
        1 => Just(TaintKind::Tolerated),
        1 => Just(TaintKind::Untolerated),
        1 => Just(TaintKind::UntoleratedNoExecute),
        1 => Just(TaintKind::Soft),
    ];
    let pool = prop_oneof![
        6 => Just(Pool::Flink),
        1 => Just(Pool::General),
        1 => Just(Pool::Missing),
    ];
    (
        (
            0.0..1.0f64,
            prop::option::of(0.0..1.3e9f64),
            prop::option::of(prop_oneof![Just(1.25e9), Just(3.125e9)]),
            prop::option::of(0.0..1.0f64),
        ),
        (
            prop::bool::weighted(0.1),
            prop::bool::weighted(0.1),
            taint,
            pool,
            prop::bool::weighted(0.1),
        ),
    )
        .prop_map(
            |((cpu, network, capacity, memory), (cordoned, not_ready, taint, pool, blocked))| {
                GenNode {
                    cpu,
                    network,
                    capacity,
                    memory,
                    cordoned,
                    not_ready,
                    taint,
                    pool,
                    blocked,
                }
            },
        )
}

fn name(i: usize) -> String {
    format!("node-{i:03}")
}

fn index(name: &str) -> usize {
    name.trim_start_matches("node-")
        .parse()
        .expect("generated node name")
}

fn snapshot(nodes: &[GenNode]) -> LoadSnapshot {
    let nodes = nodes
        .iter()
        .enumerate()
        .map(|(i, g)| {
            let mut n = NodeLoad::new(name(i), g.cpu);
            n.network_bytes_per_second = g.network;
            n.network_capacity_bytes_per_second = g.capacity;
            n.memory = g.memory;
            n.cpu_capacity_cores = Some(CORES);
            n.unschedulable = g.cordoned;
            n.ready = !g.not_ready;
            Arc::make_mut(&mut n.labels).insert(HOSTNAME.into(), name(i));
            match g.pool {
                Pool::Flink => {
                    Arc::make_mut(&mut n.labels).insert("node-pool".into(), "flink".into());
                }
                Pool::General => {
                    Arc::make_mut(&mut n.labels).insert("node-pool".into(), "general".into());
                }
                Pool::Missing => {}
            }
            let taint = |value: &str, effect: &str| Taint {
                key: "dedicated".into(),
                value: Some(value.into()),
                effect: effect.into(),
            };
            match g.taint {
                TaintKind::None => {}
                TaintKind::Tolerated => n.taints.push(taint("flink", "NoSchedule")),
                TaintKind::Untolerated => n.taints.push(taint("gpu", "NoSchedule")),
                TaintKind::UntoleratedNoExecute => n.taints.push(taint("flink", "NoExecute")),
                TaintKind::Soft => n.taints.push(Taint {
                    key: "spot".into(),
                    value: None,
                    effect: "PreferNoSchedule".into(),
                }),
            }
            n
        })
        .collect();
    LoadSnapshot {
        window_samples: Default::default(),
        taken_at: None,
        pods: Vec::new(),
        nodes,
    }
}

/// A Flink TaskManager with a nodeSelector, a toleration and Flink's blocklist as required
/// affinity.
fn pod(nodes: &[GenNode]) -> Pod {
    let blocked: Vec<String> = (0..nodes.len())
        .filter(|&i| nodes[i].blocked)
        .map(name)
        .collect();
    let mut spec = json!({
        "containers": [{"name": "flink-main-container", "resources": {"requests": {"cpu": "2"}}}],
        "nodeSelector": {"node-pool": "flink"},
        "tolerations": [
            {"key": "dedicated", "operator": "Equal", "value": "flink", "effect": "NoSchedule"}
        ]
    });
    if !blocked.is_empty() {
        spec["affinity"] = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": HOSTNAME, "operator": "NotIn", "values": blocked}]}]}}});
    }
    serde_json::from_value(json!({
        "metadata": {"name": "wc-taskmanager-1-1", "labels": {"component": "taskmanager"}},
        "spec": spec
    }))
    .expect("pod")
}

/// Whether the scheduler could place the pod on the node at all.
fn eligible(g: &GenNode) -> bool {
    let taint_ok = matches!(
        g.taint,
        TaintKind::None | TaintKind::Tolerated | TaintKind::Soft
    );
    !g.cordoned && !g.not_ready && taint_ok && g.pool == Pool::Flink && !g.blocked
}

/// Load with in-flight pods, as fractions, and whether the NIC capacity was known.
struct Oracle<'a> {
    nodes: &'a [GenNode],
    extra: Vec<PodLoad>,
    busiest_network: f64,
    weights: HeatWeights,
    hot: HotThresholds,
}

impl Oracle<'_> {
    fn cpu(&self, i: usize) -> f64 {
        self.nodes[i].cpu + self.extra[i].cpu_cores / CORES
    }

    fn network_fraction(&self, i: usize) -> f64 {
        let bytes = self.nodes[i].network.unwrap_or(0.0) + self.extra[i].network_bytes_per_second;
        let scale = self.nodes[i].capacity.unwrap_or(self.busiest_network);
        if scale > 0.0 { bytes / scale } else { 0.0 }
    }

    fn memory(&self, i: usize) -> f64 {
        self.nodes[i].memory.unwrap_or(0.0)
    }

    fn heat(&self, i: usize) -> f64 {
        let w = &self.weights;
        (w.cpu * self.cpu(i) + w.network * self.network_fraction(i) + w.memory * self.memory(i))
            / (w.cpu + w.network + w.memory)
    }

    fn hot(&self, i: usize) -> bool {
        self.cpu(i) >= self.hot.cpu
            || self.memory(i) >= self.hot.memory
            || (self.nodes[i].capacity.is_some() && self.network_fraction(i) >= self.hot.network)
    }
}

/// Nodes named positively by the terms, with the summed weight the scheduler would give them;
/// and the nodes named by the avoid (NotIn) term with its weight.
struct Read {
    preferred: BTreeMap<String, i32>,
    avoided: BTreeSet<String>,
    avoid_weight: i32,
}

fn read_terms(terms: &[PreferredSchedulingTerm]) -> Result<Read, TestCaseError> {
    let mut read = Read {
        preferred: BTreeMap::new(),
        avoided: BTreeSet::new(),
        avoid_weight: 0,
    };
    for term in terms {
        prop_assert!(
            (1..=100).contains(&term.weight),
            "weight {} outside 1..100",
            term.weight
        );
        let requirements = term
            .preference
            .match_fields
            .iter()
            .flatten()
            .chain(term.preference.match_expressions.iter().flatten());
        for r in requirements {
            let values = r.values.as_deref().unwrap_or_default();
            prop_assert!(!values.is_empty(), "{r:?} has no values");
            match r.operator.as_str() {
                "In" => {
                    for v in values {
                        let previous = read.preferred.insert(v.clone(), term.weight);
                        prop_assert!(previous.is_none(), "{v} preferred twice");
                    }
                }
                "NotIn" => {
                    read.avoided.extend(values.iter().cloned());
                    read.avoid_weight = term.weight;
                }
                other => prop_assert!(false, "unexpected operator {other}"),
            }
        }
    }
    Ok(read)
}

fn gen_policy() -> impl Strategy<Value = PlacementConfig> {
    (
        // Tiers with non-increasing weights: the documented shape (coolest first).
        prop::collection::vec((1usize..6, 1i32..=100), 1..4),
        (0.0..1.0f64, 0.0..1.0f64, 0.0..1.0f64),
        (0i32..=100, 0usize..8),
        any::<bool>(),
    )
        .prop_filter("heat weights must not all be 0", |(_, (c, n, m), _, _)| {
            c + n + m > 0.01
        })
        .prop_map(
            |(mut tiers, (cpu, network, memory), (avoid_weight, max_nodes), by_label)| {
                tiers.sort_by_key(|t| std::cmp::Reverse(t.1));
                PlacementConfig {
                    weights: HeatWeights {
                        cpu,
                        network,
                        memory,
                    },
                    tiers: tiers
                        .into_iter()
                        .map(|(nodes, weight)| Tier { nodes, weight })
                        .collect(),
                    avoid_hot: AvoidHot {
                        weight: avoid_weight,
                        max_nodes,
                    },
                    node_match: if by_label {
                        NodeMatch::Label {
                            key: HOSTNAME.into(),
                        }
                    } else {
                        NodeMatch::Name
                    },
                    ..PlacementConfig::default()
                }
            },
        )
}

/// In-flight pods: (node index, cpu cores, bytes per second).
fn gen_inflight() -> impl Strategy<Value = Vec<(usize, f64, f64)>> {
    prop::collection::vec((0usize..80, 0.0..6.0f64, 0.0..4e8f64), 0..12)
}

struct Case {
    nodes: Vec<GenNode>,
    policy: PlacementConfig,
    terms: Vec<PreferredSchedulingTerm>,
    oracle_extra: Vec<PodLoad>,
}

fn run(nodes: Vec<GenNode>, policy: PlacementConfig, inflight: &[(usize, f64, f64)]) -> Case {
    let snapshot = snapshot(&nodes);
    let view = ClusterView::build(&snapshot, None, &policy);
    let mut world = World::new(Ledger::new(Duration::from_secs(60)));
    let mut extra = vec![PodLoad::default(); nodes.len()];
    for (k, &(i, cpu_cores, bytes)) in inflight.iter().enumerate() {
        let i = i % nodes.len();
        let load = PodLoad {
            cpu_cores,
            network_bytes_per_second: bytes,
        };
        world.charges.charge(
            &format!("pod-{k}"),
            &[(name(i), 1.0)],
            load,
            &Default::default(),
            Instant::now(),
        );
        extra[i].cpu_cores += cpu_cores;
        extra[i].network_bytes_per_second += bytes;
    }
    let p = pod(&nodes);
    let demand = PodDemand {
        constraints: PodConstraints::of(&p, &[]),
        facts: PodFacts::of(&p),
        load: PodLoad {
            cpu_cores: POD_CORES,
            network_bytes_per_second: 0.0,
        },
        source: Default::default(),
    };
    let scheduler = SchedulerConfig::default();
    let decision = decide(
        &DecisionCtx::new(&demand, &view, &world, &policy, &scheduler),
        7,
    );
    // The server's path: the ledger numbered by view position, the filters memoised.
    let mut aligned = world.clone();
    aligned.align(view.id, view.nodes.iter().map(|n| n.name.as_str()));
    assert!(aligned.is_aligned(view.id));
    let again = decide(
        &DecisionCtx::new(&demand, &view, &aligned, &policy, &scheduler),
        7,
    );
    assert_eq!(
        again, decision,
        "aligned lookups and the memo change the decision"
    );
    // The server's index, kept up to date charge by charge: every decision on the way equals
    // the walk's.
    let indexes = RankIndexes::default();
    let mut growing = World::new(Ledger::new(Duration::from_secs(60)));
    growing.align(view.id, view.nodes.iter().map(|n| n.name.as_str()));
    for (k, &(i, cpu_cores, bytes)) in inflight.iter().enumerate() {
        let walked = decide(
            &DecisionCtx::new(&demand, &view, &growing, &policy, &scheduler),
            7,
        );
        let indexed = decide_indexed(
            &DecisionCtx::new(&demand, &view, &growing, &policy, &scheduler),
            7,
            &indexes,
        );
        assert_eq!(indexed, walked, "the index changes the decision");
        let load = PodLoad {
            cpu_cores,
            network_bytes_per_second: bytes,
        };
        growing.charges.charge(
            &format!("pod-{k}"),
            &[(name(i % nodes.len()), 1.0)],
            load,
            &Default::default(),
            Instant::now(),
        );
    }
    let indexed = decide_indexed(
        &DecisionCtx::new(&demand, &view, &growing, &policy, &scheduler),
        7,
        &indexes,
    );
    assert_eq!(indexed, decision, "the index changes the decision");
    let terms = crate::patch::preferred_terms(&decision, &policy.node_match);
    Case {
        nodes,
        policy,
        terms,
        oracle_extra: extra,
    }
}

fn oracle(case: &Case) -> Oracle<'_> {
    Oracle {
        nodes: &case.nodes,
        extra: case.oracle_extra.clone(),
        busiest_network: case
            .nodes
            .iter()
            .filter_map(|g| g.network)
            .fold(0.0, f64::max),
        weights: case.policy.weights.clone(),
        hot: case.policy.hot.clone(),
    }
}

proptest! {
    #![proptest_config(seeded::config(512))]

    /// Every term goes into the patch with a weight of 1..100, whatever the policy; an avoid
    /// weight of 0 writes no avoid term at all.
    #[test]
    fn every_term_weight_is_1_to_100(
        nodes in prop::collection::vec(gen_node(), 1..80),
        policy in gen_policy(),
        inflight in gen_inflight(),
    ) {
        let case = run(nodes, policy, &inflight);
        let read = read_terms(&case.terms)?;
        if case.policy.avoid_hot.weight == 0 {
            prop_assert!(read.avoided.is_empty(), "avoid term written with weight 0");
        }
    }

    /// Only eligible, not hot nodes are preferred: never a cordoned or NotReady node, one with
    /// an untolerated NoSchedule/NoExecute taint, one the nodeSelector or the required affinity
    /// (Flink's blocklist) excludes, nor one hot on CPU, memory or a known NIC capacity, with
    /// in-flight pods counted.
    #[test]
    fn ineligible_and_hot_nodes_are_never_preferred(
        nodes in prop::collection::vec(gen_node(), 1..80),
        policy in gen_policy(),
        inflight in gen_inflight(),
    ) {
        let case = run(nodes, policy, &inflight);
        let o = oracle(&case);
        let read = read_terms(&case.terms)?;
        let candidates = (0..case.nodes.len()).filter(|&i| eligible(&case.nodes[i]) && !o.hot(i)).count();
        // Hot nodes are named only when every eligible node is hot (the cluster is saturated):
        // then the least bad are.
        let saturated = candidates == 0;
        for preferred in read.preferred.keys() {
            let i = index(preferred);
            prop_assert!(eligible(&case.nodes[i]), "{preferred} is ineligible: {:?}", case.nodes[i]);
            prop_assert!(saturated || !o.hot(i), "{preferred} is hot: cpu {} net {} mem {}",
                o.cpu(i), o.network_fraction(i), o.memory(i));
        }
        if saturated {
            let hot_eligible = (0..case.nodes.len()).filter(|&i| eligible(&case.nodes[i])).count();
            let wanted: usize = case.policy.tiers.iter().map(|t| t.nodes).sum();
            prop_assert_eq!(read.preferred.len(), hot_eligible.min(wanted));
            return Ok(());
        }
        // As many nodes as the tiers ask for, when there are enough candidates.
        let wanted: usize = case.policy.tiers.iter().map(|t| t.nodes).sum();
        prop_assert_eq!(read.preferred.len(), candidates.min(wanted));
    }

    /// Between two eligible, not hot nodes, the one this CPU-only pod would leave cooler (CPU
    /// with in-flight pods and the pod itself, plus the bounded penalty of a busy NIC: the pod
    /// carries traffic nobody estimated) never gets less preferred weight than the other,
    /// unless the two are within the tie band, where each replica orders them its own way.
    #[test]
    fn a_hotter_node_never_outranks_a_cooler_one(
        nodes in prop::collection::vec(gen_node(), 1..80),
        policy in gen_policy(),
        inflight in gen_inflight(),
    ) {
        let case = run(nodes, policy, &inflight);
        let o = oracle(&case);
        let read = read_terms(&case.terms)?;
        let candidates: Vec<usize> = (0..case.nodes.len())
            .filter(|&i| eligible(&case.nodes[i]) && !o.hot(i))
            .collect();
        let weight = |i: usize| read.preferred.get(&name(i)).copied().unwrap_or(0);
        for &a in &candidates {
            for &b in &candidates {
                let after = |i: usize| {
                    o.cpu(i)
                        + POD_CORES / CORES
                        + case.policy.nic_penalty * o.network_fraction(i).min(1.0)
                };
                let band = case.policy.tie_band * POD_CORES / CORES;
                if after(a) < after(b) - band - EPS {
                    prop_assert!(weight(a) >= weight(b),
                        "{} (cpu after {}, weight {}) ranked below {} (cpu after {}, weight {})",
                        name(a), after(a), weight(a), name(b), after(b), weight(b));
                }
            }
        }
    }

    /// The avoid term names only eligible hot nodes, at most `max_nodes`, the hottest ones;
    /// every eligible hot node when they fit.
    #[test]
    fn avoid_term_names_the_hottest_eligible_hot_nodes(
        nodes in prop::collection::vec(gen_node(), 1..80),
        policy in gen_policy(),
        inflight in gen_inflight(),
    ) {
        let case = run(nodes, policy, &inflight);
        let o = oracle(&case);
        let read = read_terms(&case.terms)?;
        let max = case.policy.avoid_hot.max_nodes;
        prop_assert!(read.avoided.len() <= max);
        let hot: Vec<usize> = (0..case.nodes.len())
            .filter(|&i| eligible(&case.nodes[i]) && o.hot(i))
            .collect();
        for avoided in &read.avoided {
            let i = index(avoided);
            prop_assert!(hot.contains(&i), "{avoided} avoided but not an eligible hot node");
            prop_assert!(!read.preferred.contains_key(avoided), "{avoided} both preferred and avoided");
        }
        if case.policy.avoid_hot.weight > 0 {
            // When every eligible node is hot, the least bad are named instead of avoided.
            let named_hot = hot.iter().filter(|&&i| read.preferred.contains_key(&name(i))).count();
            prop_assert_eq!(read.avoided.len(), (hot.len() - named_hot).min(max));
            prop_assert!(read.avoided.is_empty() || read.avoid_weight == case.policy.avoid_hot.weight);
            let coolest_avoided = read.avoided.iter().map(|n| o.heat(index(n))).fold(f64::INFINITY, f64::min);
            for &i in &hot {
                if !read.avoided.contains(&name(i)) && !read.preferred.contains_key(&name(i)) {
                    prop_assert!(o.heat(i) <= coolest_avoided + EPS,
                        "{} (heat {}) left out of the avoid term for a cooler node ({})",
                        name(i), o.heat(i), coolest_avoided);
                }
            }
        }
    }
}
