//! The ranking index (`placement::decide_indexed`) against the walk over every node
//! (`placement::decide`): on generated clusters of up to 400 nodes (sampled above 100), through
//! random sequences of what changes the ledger (charges where the decision predicts, binds,
//! forgets, expiry, the pod watch's bound requests and bound pods of the job, a new view), both
//! give the same decision for every pod shape at every step.

use crate::test_support::seeded;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use crate::config::PlacementConfig;
use crate::config::scheduler::SchedulerConfig;
use crate::inflight::ledger::{Ledger, PodLoad};
use crate::inflight::world::World;
use crate::inventory::pods::apply_pod_event;
use crate::placement::{
    DecisionCtx, PodConstraints, PodDemand, RankIndexes, decide, decide_indexed,
};
use crate::scheduler::{PodFacts, PodGroup, PodRequests};
use crate::snapshot::{LoadSnapshot, NodeLoad};
use crate::view::ClusterView;
use k8s_openapi::api::core::v1::Pod;
use proptest::prelude::*;
use serde_json::json;

pub(super) const TTL: Duration = Duration::from_secs(60);

#[derive(Debug, Clone)]
pub(super) struct GenNode {
    cpu: f64,
    cores: u32,
    requested: f64,
    network: f64,
    other_pool: bool,
    cordoned: bool,
}

pub(super) fn gen_node() -> impl Strategy<Value = GenNode> {
    (
        0.0..1.0f64,
        prop::sample::select(vec![4u32, 8, 16]),
        0.0..1.0f64,
        0.0..1.0f64,
        prop::bool::weighted(0.1),
        prop::bool::weighted(0.05),
    )
        .prop_map(
            |(cpu, cores, requested, network, other_pool, cordoned)| GenNode {
                cpu,
                cores,
                requested,
                network,
                other_pool,
                cordoned,
            },
        )
}

#[derive(Debug, Clone)]
pub(super) enum Op {
    /// A pod of shape `shape` is decided and charged where the decision predicts it lands.
    Steer {
        shape: usize,
    },
    /// The `k`-th steered pod is bound to a node of its landing (or any node).
    Bind {
        k: usize,
        node: usize,
    },
    Forget {
        k: usize,
    },
    /// The pod watch sees a pod bound to `node` (or gone: `None`).
    Watch {
        pod: usize,
        node: Option<usize>,
    },
    /// The pod watch sees a pod of the job (of `shape`, with its labels and terms) bound to
    /// `node`, or gone.
    WatchJob {
        pod: usize,
        shape: usize,
        node: Option<usize>,
    },
    /// The pod watch sees pods of the job (of `shape`) bound on every node but every `gap`-th:
    /// the scores of the plugins that count pods then keep few nodes (read from their
    /// standings rather than through the index's sets).
    WatchJobAlmostEverywhere {
        shape: usize,
        gap: usize,
    },
    /// Every charge expires.
    ExpireAll,
    /// The view is rebuilt (a new id) from the same readings.
    NewView,
}

pub(super) fn gen_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0usize..SHAPES).prop_map(|shape| Op::Steer { shape }),
        2 => (0usize..64, 0usize..400).prop_map(|(k, node)| Op::Bind { k, node }),
        1 => (0usize..64).prop_map(|k| Op::Forget { k }),
        2 => (0usize..8, prop::option::of(0usize..400))
            .prop_map(|(pod, node)| Op::Watch { pod, node }),
        2 => (0usize..8, 0usize..SHAPES, prop::option::of(0usize..400))
            .prop_map(|(pod, shape, node)| Op::WatchJob { pod, shape, node }),
        1 => (0usize..SHAPES, 9usize..40)
            .prop_map(|(shape, gap)| Op::WatchJobAlmostEverywhere { shape, gap }),
        1 => Just(Op::ExpireAll),
        1 => Just(Op::NewView),
    ]
}

pub(super) fn snapshot(nodes: &[GenNode]) -> LoadSnapshot {
    LoadSnapshot {
        window_samples: Default::default(),
        taken_at: None,
        pods: Vec::new(),
        nodes: nodes
            .iter()
            .enumerate()
            .map(|(i, g)| {
                let name = format!("worker-{i:04}");
                let mut node = NodeLoad::new(name.clone(), g.cpu);
                node.cpu_capacity_cores = Some(f64::from(g.cores));
                node.network_bytes_per_second = Some(g.network * 1.25e9);
                node.network_capacity_bytes_per_second = Some(1.25e9);
                node.unschedulable = g.cordoned;
                let pool = if g.other_pool { "general" } else { "flink" };
                node.labels = Arc::new(BTreeMap::from([
                    ("kubernetes.io/hostname".to_string(), name),
                    ("node-pool".to_string(), pool.to_string()),
                    (
                        "topology.kubernetes.io/zone".to_string(),
                        format!("zone-{}", i % 3),
                    ),
                ]));
                node.allocatable = BTreeMap::from([
                    ("cpu".to_string(), g.cores.to_string()),
                    ("memory".to_string(), format!("{}Gi", g.cores * 4)),
                    ("pods".to_string(), "110".to_string()),
                ]);
                let requested_milli = (g.requested * f64::from(g.cores) * 1000.0) as i64;
                node.requested = BTreeMap::from([
                    ("cpu".to_string(), format!("{requested_milli}m")),
                    ("memory".to_string(), format!("{}Mi", requested_milli * 2)),
                ]);
                node
            })
            .collect(),
    }
}

pub(super) const SHAPES: usize = 5;

/// Five shapes: 2 cores, 4 cores carrying network, 1 core restricted to the flink pool, and two
/// of a job's TaskManagers the scheduler scores by the pods around them: kept apart by host
/// (preferred anti-affinity) and drawn to the zones that hold the job (preferred affinity).
pub(super) fn pod(shape: usize) -> (Pod, PodLoad) {
    let (cpu, selector, network) = match shape {
        0 | 3 | 4 => ("2", None, 0.0),
        1 => ("4", None, 2e8),
        _ => ("1", Some(json!({"node-pool": "flink"})), 0.0),
    };
    let job = json!({"matchLabels": {"app": "wordcount"}});
    let affinity = match shape {
        3 => json!({"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 100, "podAffinityTerm":
                {"labelSelector": job, "topologyKey": "kubernetes.io/hostname"}}]}}),
        4 => json!({"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 30, "podAffinityTerm":
                {"labelSelector": job, "topologyKey": "topology.kubernetes.io/zone"}}]}}),
        _ => json!(null),
    };
    let pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": format!("tm-{shape}"), "namespace": "flink",
                     "labels": {"app": "wordcount"}},
        "spec": {
            "nodeSelector": selector,
            "affinity": affinity,
            "containers": [{"name": "flink-main-container", "image": "flink:1.20",
                "resources": {"requests": {"cpu": cpu, "memory": "4Gi"}}}]
        }
    });
    let pod: Pod = serde_json::from_value(pod).expect("a valid pod");
    let cores: f64 = cpu.parse().expect("whole cores");
    (
        pod,
        PodLoad {
            cpu_cores: cores,
            network_bytes_per_second: network,
        },
    )
}

pub(super) fn demand(pod: &Pod, load: PodLoad) -> PodDemand<'_> {
    PodDemand {
        constraints: PodConstraints::of(pod, &[]),
        facts: PodFacts::of(pod),
        load,
        source: Default::default(),
    }
}

/// The pod watch's event for a pod of the job of `template`: bound to `node`, or gone.
pub(super) fn watch_job(world: &mut World, template: &Pod, pod: &str, node: Option<&str>) {
    let mut bound = template.clone();
    bound.metadata.name = Some(format!("job-{pod}"));
    bound.metadata.uid = Some(format!("job-uid-{pod}"));
    if let Some(spec) = bound.spec.as_mut() {
        spec.node_name = node.map(str::to_string);
    }
    bound.status = Some(serde_json::from_value(json!({"phase": "Running"})).expect("a pod status"));
    apply_pod_event(
        world,
        &bound,
        node.is_none(),
        Instant::now(),
        SystemTime::now(),
    );
}

pub(super) fn name(i: usize) -> String {
    format!("worker-{i:04}")
}

/// What the property tests change alike from one generated cluster: the pod watch's pods of
/// the job, expiry, a new view.
pub(super) struct Fixture<'a> {
    snapshot: &'a LoadSnapshot,
    policy: &'a PlacementConfig,
    shapes: &'a [(Pod, PodLoad)],
    nodes: usize,
}

impl<'a> Fixture<'a> {
    pub(super) fn new(
        snapshot: &'a LoadSnapshot,
        policy: &'a PlacementConfig,
        shapes: &'a [(Pod, PodLoad)],
        nodes: usize,
    ) -> Self {
        Fixture {
            snapshot,
            policy,
            shapes,
            nodes,
        }
    }

    /// Applies `op` when it is one of the changes made alike; the others are left to the test.
    pub(super) fn apply(&self, op: &Op, world: &mut World, view: &mut ClusterView) {
        match op {
            Op::WatchJob { pod, shape, node } => {
                let on = node.map(|n| name(n % self.nodes));
                watch_job(
                    world,
                    &self.shapes[*shape].0,
                    &format!("{pod}"),
                    on.as_deref(),
                );
            }
            Op::WatchJobAlmostEverywhere { shape, gap } => {
                for n in (0..self.nodes).filter(|n| n % gap != 0) {
                    let pod = format!("everywhere-{shape}-{n}");
                    watch_job(world, &self.shapes[*shape].0, &pod, Some(&name(n)));
                }
            }
            Op::ExpireAll => world.charges.expire(Instant::now() + TTL * 2),
            Op::NewView => {
                *view = ClusterView::build(self.snapshot, None, self.policy);
                world.align(view.id, view.nodes.iter().map(|n| n.name.as_str()));
            }
            Op::Steer { .. } | Op::Bind { .. } | Op::Forget { .. } | Op::Watch { .. } => {}
        }
    }
}

proptest! {
    #![proptest_config(seeded::config(48))]

    #[test]
    fn the_index_decides_as_the_walk_does(
        nodes in prop::collection::vec(gen_node(), 1..400),
        ops in prop::collection::vec(gen_op(), 1..60),
    ) {
        let policy = PlacementConfig::default();
        let scheduler = SchedulerConfig::default();
        let snapshot = snapshot(&nodes);
        let mut view = ClusterView::build(&snapshot, None, &policy);
        let shapes: Vec<(Pod, PodLoad)> = (0..SHAPES).map(pod).collect();
        let demands: Vec<PodDemand<'_>> = shapes.iter().map(|(p, l)| demand(p, *l)).collect();
        let indexes = RankIndexes::default();
        let mut world = World::new(Ledger::new(TTL));
        world.align(view.id, view.nodes.iter().map(|n| n.name.as_str()));
        let mut steered: Vec<(String, usize)> = Vec::new();
        let fixture = Fixture::new(&snapshot, &policy, &shapes, nodes.len());
        for (step, op) in ops.iter().enumerate() {
            match op {
                Op::Steer { shape } => {
                    let d = &demands[*shape];
                    let decision = decide(&DecisionCtx::new(d, &view, &world, &policy, &scheduler), 3);
                    let id = format!("pod-{step}");
                    world.charges.charge(&id, &decision.landing, d.load, &d.facts.requests, Instant::now());
                    world.set_group(&id, PodGroup::of_facts(&d.facts));
                    steered.push((id, *shape));
                }
                Op::Bind { k, node } => {
                    if let Some((id, _)) = steered.get(k % steered.len().max(1)) {
                        let to = (world.charges)
                            .shares(id)
                            .and_then(|s| s.first().map(|(n, _)| n.clone()))
                            .unwrap_or_else(|| name(node % nodes.len()));
                        world.charges.bind(id, &to);
                    }
                }
                Op::Forget { k } => {
                    if let Some((id, _)) = steered.get(k % steered.len().max(1)) {
                        world.charges.forget(id);
                    }
                }
                Op::Watch { pod, node } => {
                    let requests: PodRequests = demands[pod % SHAPES].facts.requests.clone();
                    let on = node.map(|n| name(n % nodes.len()));
                    world.cluster.occupancy.set(&format!("watched-{pod}"), on.as_deref(), &requests);
                }
                Op::WatchJob { .. }
                | Op::WatchJobAlmostEverywhere { .. }
                | Op::ExpireAll
                | Op::NewView => fixture.apply(op, &mut world, &mut view),
            }
            for (shape, d) in demands.iter().enumerate() {
                let walked = decide(&DecisionCtx::new(d, &view, &world, &policy, &scheduler), 3);
                let indexed =
                    decide_indexed(&DecisionCtx::new(d, &view, &world, &policy, &scheduler), 3, &indexes);
                prop_assert_eq!(
                    &indexed, &walked,
                    "shape {} after step {} ({:?})", shape, step, op
                );
            }
        }
        prop_assert!(!indexes.is_empty(), "no shape was indexed");
    }
}

/// A job's pods on a long stretch of the scheduler's order (names in order, zones round robin,
/// so the names' order): the pod kept apart from them is named only from the other nodes, no
/// tier covers the runs inside the stretch, and each tier's scan for uncovered runs reads every
/// node the score keeps (the index reads its set once and replays it for the next tier).
#[test]
fn the_index_decides_as_the_walk_does_when_no_tier_covers_every_run() {
    let nodes: Vec<GenNode> = (0..300)
        .map(|i| GenNode {
            cpu: 0.1 + f64::from(i % 11) * 0.04,
            cores: 16,
            requested: 0.2,
            network: 0.1,
            other_pool: false,
            cordoned: false,
        })
        .collect();
    let policy = PlacementConfig::default();
    let scheduler = SchedulerConfig::default();
    let snapshot = snapshot(&nodes);
    let view = ClusterView::build(&snapshot, None, &policy);
    let (template, load) = pod(3);
    let d = demand(&template, load);
    let indexes = RankIndexes::default();
    let mut world = World::new(Ledger::new(TTL));
    world.align(view.id, view.nodes.iter().map(|n| n.name.as_str()));
    for n in 0..200 {
        watch_job(
            &mut world,
            &template,
            &format!("stretch-{n}"),
            Some(&name(n)),
        );
    }
    for step in 0..6 {
        let walked = decide(&DecisionCtx::new(&d, &view, &world, &policy, &scheduler), 3);
        let indexed = decide_indexed(
            &DecisionCtx::new(&d, &view, &world, &policy, &scheduler),
            3,
            &indexes,
        );
        assert_eq!(indexed, walked, "step {step}");
        // Named only off the stretch, in more than one tier.
        let named: Vec<&str> = walked
            .tiers
            .iter()
            .flat_map(|t| t.nodes.iter().map(|n| n.name.as_str()))
            .collect();
        assert!(walked.tiers.len() >= 2, "step {step}: {:?}", walked.tiers);
        assert!(
            named.iter().all(|n| n >= &name(200).as_str()),
            "step {step}: {named:?}"
        );
        world.charges.charge(
            &format!("pod-{step}"),
            &walked.landing,
            d.load,
            &d.facts.requests,
            Instant::now(),
        );
        world.set_group(&format!("pod-{step}"), PodGroup::of_facts(&d.facts));
    }
    assert!(!indexes.is_empty(), "the shape was not indexed");
}
