//! How one node stands for one pod: what the pod would leave behind there, with the in-flight
//! load and requests counted, and the order candidates are taken in. Read by the walk over
//! every node (`walk`) and by the ranking index (`rank_index`) alike.

use std::hash::BuildHasher;

use crate::cluster::occupancy::NodeRequests;
use crate::config::PlacementConfig;
use crate::inflight::ledger::NodeExtra;
use crate::inflight::world::World;
use crate::placement::context::{DecisionCtx, PodDemand};
use crate::placement::landing::{Coverage, Positions};
use crate::placement::replicas::replica::Partition;
use crate::scheduler::ModelNode;
use crate::scheduler::cycle::PodFacts;
use crate::scheduler::node::fits_in;
use crate::view::heat::Dimension;
use crate::view::heat::{Load, heat, is_hot};
use crate::view::memo::MemoKey;
use crate::view::{ClusterView, NodeView};

/// A node's load with the in-flight pods counted on it (their expected load).
pub(crate) fn effective_load(node: &NodeView, world: &World) -> Load {
    load_with(node, world.charges.extra(&node.name), 0.0)
}

/// A node's load with the in-flight pods' expected load plus `z` standard deviations of it:
/// a node that may well have received more pods than expected is not preferred as if it had
/// not.
pub(in crate::placement) fn load_with(node: &NodeView, extra: Option<NodeExtra>, z: f64) -> Load {
    let Some(extra) = extra else {
        return node.load;
    };
    let inflight = extra.cautious_load(z);
    Load {
        cpu: node.load.cpu + inflight.cpu_cores / node.scale.cpu_cores,
        network_bytes_per_second: node.load.network_bytes_per_second
            + inflight.network_bytes_per_second,
        memory: node.load.memory,
    }
}

/// The node as the scheduler's cache will see it once the in-flight pods are bound: what is
/// bound (`bound`, base + pod watch) plus the requests steered pods are expected to bring
/// (`extra`). The name stays empty: the resource plugins do not read it, and not copying it
/// keeps a scan of thousands of nodes free of allocations.
pub(in crate::placement) fn model_node_with(
    node: &NodeView,
    bound: Option<&NodeRequests>,
    extra: Option<NodeExtra>,
) -> ModelNode {
    let mut model = ModelNode {
        allocatable: node.allocatable.clone(),
        requested: node.base_requested.requested.clone(),
        non_zero_milli_cpu: node.base_requested.non_zero_milli_cpu,
        non_zero_memory: node.base_requested.non_zero_memory,
        unschedulable: node.unschedulable,
        ..ModelNode::default()
    };
    if let Some(bound) = bound {
        model.requested.add(&bound.requested);
        model.non_zero_milli_cpu += bound.non_zero_milli_cpu;
        model.non_zero_memory += bound.non_zero_memory;
    }
    if let Some(extra) = extra {
        model.requested.milli_cpu += extra.milli_cpu.round() as i64;
        model.requested.memory += extra.memory.round() as i64;
        model.requested.pods += extra.pods.round() as i64;
        model.non_zero_milli_cpu += extra.non_zero_milli_cpu.round() as i64;
        model.non_zero_memory += extra.non_zero_memory.round() as i64;
    }
    model
}

/// Requests fit, as NodeResourcesFit filters, counting what is bound (`bound`) and what steered
/// pods are expected to bring (`extra`) as [`model_node_with`] does, without building the
/// model node: the walk over every node runs this thousands of times per decision. A node whose
/// allocatable is unknown is not limited by requests as far as the webhook can tell.
pub(in crate::placement) fn fits_with(
    node: &NodeView,
    bound: Option<&NodeRequests>,
    extra: Option<NodeExtra>,
    pod: &PodFacts<'_>,
) -> bool {
    if !node.allocatable_known {
        return true;
    }
    fits_in(
        &node.allocatable,
        requested_with(node, bound, extra),
        &pod.requests,
    )
}

/// What is requested on `node` of each resource: its base, what is bound and what steered pods
/// are expected to bring, rounded as [`model_node_with`] rounds it.
fn requested_with<'a>(
    node: &'a NodeView,
    bound: Option<&'a NodeRequests>,
    extra: Option<NodeExtra>,
) -> impl Fn(&str) -> i64 + 'a {
    use crate::scheduler::resources::{CPU, MEMORY, PODS};
    move |name: &str| {
        let expected = extra.map_or(0, |x| match name {
            CPU => x.milli_cpu.round() as i64,
            MEMORY => x.memory.round() as i64,
            PODS => x.pods.round() as i64,
            _ => 0,
        });
        node.base_requested.requested.get(name)
            + bound.map_or(0, |b| b.requested.get(name))
            + expected
    }
}

/// How many more pods with `pod`'s requests fit on `node` ([`fits_with`]'s count): unbounded
/// when its allocatable is unknown.
pub(in crate::placement) fn room_with(
    node: &NodeView,
    bound: Option<&NodeRequests>,
    extra: Option<NodeExtra>,
    pod: &PodFacts<'_>,
) -> usize {
    use crate::scheduler::resources::PODS;
    if !node.allocatable_known {
        return usize::MAX;
    }
    let requested = requested_with(node, bound, extra);
    let free = |name: &str| (node.allocatable.get(name) - requested(name)).max(0);
    let mut room = if node.allocatable.pods > 0 {
        free(PODS) as usize
    } else {
        usize::MAX
    };
    for (name, value) in pod.requests.requested.iter() {
        if name != PODS && value > 0 {
            room = room.min((free(name) / value) as usize);
        }
    }
    room
}

/// Fill risks below this are taken as none: they would only lengthen the landing's arithmetic.
const NEGLIGIBLE_FILL_RISK: f64 = 1e-3;

/// The odds that the steered pods expected on `node` and not yet bound (`extra`) take the
/// last of its room for `pod` before the scheduler reaches it: they are ahead of it in the
/// scheduler's queue, and their count spreads around its expectation as their landings do
/// (taken as normal, with a half-pod continuity correction). 0 when nothing is pending there
/// or the node's room is not limited as far as the webhook can tell.
pub(in crate::placement) fn fill_risk(
    node: &NodeView,
    bound: Option<&NodeRequests>,
    extra: Option<NodeExtra>,
    pod: &PodFacts<'_>,
) -> f64 {
    let Some(extra) = extra.filter(|x| x.pods > 0.0) else {
        return 0.0;
    };
    let room = room_with(node, bound, None, pod);
    if room == usize::MAX {
        return 0.0;
    }
    let margin = room as f64 - 0.5 - extra.pods;
    let spread = extra.pods_variance.max(0.0).sqrt();
    let risk = if spread < 1e-6 {
        if margin < 0.0 { 1.0 } else { 0.0 }
    } else {
        normal_upper_tail(margin / spread)
    };
    if risk < NEGLIGIBLE_FILL_RISK {
        0.0
    } else {
        risk
    }
}

/// P(Z > z) for a standard normal Z (Abramowitz and Stegun 26.2.17, within 1e-7).
fn normal_upper_tail(z: f64) -> f64 {
    if z < 0.0 {
        return 1.0 - normal_upper_tail(-z);
    }
    let t = 1.0 / (1.0 + 0.231_641_9 * z);
    let density = (-0.5 * z * z).exp() / (2.0 * std::f64::consts::PI).sqrt();
    let poly = t
        * (0.319_381_530
            + t * (-0.356_563_782
                + t * (1.781_477_937 + t * (-1.821_255_978 + t * 1.330_274_429))));
    density * poly
}

/// What the pod would leave behind on a node, in the dimensions it loads.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct PodHeat {
    /// The highest utilisation: CPU, NIC when the pod carries network, memory when configured.
    pub(crate) bottleneck: f64,
    /// The dimension of `bottleneck`.
    pub(crate) by: Dimension,
    /// Their sum, to tell equal bottlenecks apart.
    pub(crate) sum: f64,
    /// The pod would take a NIC of known capacity to the hot threshold or past it.
    pub(crate) nic_over: bool,
    /// What candidates are ranked by: the bottleneck halfway through the pod (the level it
    /// sits at, as water fills a vessel), plus the NIC penalty for a pod without a network
    /// estimate, plus on another replica's node what one more pod adds there (see `replica`).
    /// Halfway, not after: a pod that adds little where the bottleneck is already high (a
    /// NIC-bound node, a large node that is busy) is not sent there ahead of a node that is
    /// cooler now but where it adds more; nor, as the level before it would have it, onto a
    /// small node where it adds a lot.
    pub(crate) rank: f64,
    /// For a pod without a network estimate, the node's NIC load (a share of its link speed,
    /// or of the busiest node's traffic; at most 1): what the NIC penalty and the tie order
    /// read. 0 for a pod whose traffic is ranked in `bottleneck`.
    pub(crate) quiet_nic: f64,
}

/// Near-ties are told apart by the NIC load of a pod without a network estimate, in steps of
/// this share, before the deciding replica's own order: a node whose NIC is among the busiest
/// is not a tie for a TaskManager (it shuffles all the same), while nodes alike enough still
/// spread over the replicas.
const NIC_TIE_STEP: f64 = 0.25;

/// The utilisation the pod leaves behind in the dimensions it loads, bottleneck first. With
/// `share` 0: the same dimensions without the pod. Its rank is read halfway through the last
/// pod (`share` - 1/2): see [`PodHeat::rank`].
pub(crate) fn pod_heat(
    node: &NodeView,
    load: &Load,
    pod: &PodDemand<'_>,
    policy: &PlacementConfig,
    share: f64,
) -> PodHeat {
    let with_network =
        pod.load.network_bytes_per_second > 0.0 && node.scale.network_bytes_per_second > 0.0;
    let with_memory = policy.weights.memory > 0.0 && node.allocatable.memory > 0;
    // Each dimension the pod loads, with `share` of it added.
    let at = |share: f64| {
        let cpu = load.cpu + share * pod.load.cpu_cores / node.scale.cpu_cores;
        let net = node.scale.network_fraction(
            load.network_bytes_per_second + share * pod.load.network_bytes_per_second,
        );
        let mem = with_memory.then(|| {
            load.memory
                + share * pod.facts.requests.requested.memory as f64
                    / node.allocatable.memory as f64
        });
        (cpu, net, mem)
    };
    let (cpu, net, mem) = at(share);
    let mut after = PodHeat {
        bottleneck: cpu,
        by: Dimension::Cpu,
        sum: cpu,
        nic_over: false,
        rank: 0.0,
        quiet_nic: 0.0,
    };
    if with_network {
        if net > after.bottleneck {
            after.bottleneck = net;
            after.by = Dimension::Network;
        }
        after.sum += net;
        after.nic_over = node.scale.network_is_capacity && net >= policy.hot.network;
    } else {
        // No estimate of its traffic, but it has some: a busy NIC still counts, boundedly.
        after.quiet_nic = net.min(1.0);
    }
    if let Some(mem) = mem {
        if mem > after.bottleneck {
            after.bottleneck = mem;
            after.by = Dimension::Memory;
        }
        after.sum += mem;
    }
    let level = if share > 0.0 {
        let (cpu, net, mem) = at((share - 0.5).max(0.0));
        let mut level = cpu;
        if with_network {
            level = level.max(net);
        }
        mem.map_or(level, |mem| level.max(mem))
    } else {
        after.bottleneck
    };
    after.rank = level + policy.nic_penalty * after.quiet_nic;
    after
}

/// One feasible node and how this pod would leave it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(in crate::placement) struct Candidate {
    pub(crate) index: usize,
    pub(crate) heat: PodHeat,
    pub(crate) tie: u32,
}

impl Candidate {
    /// Coolest first. A NIC is never pushed past the hot threshold to relieve CPU: such nodes
    /// come last. The position settles what the tie rank does not (a 32-bit hash collision).
    pub(crate) fn order(&self, other: &Self) -> std::cmp::Ordering {
        self.heat
            .nic_over
            .cmp(&other.heat.nic_over)
            .then(self.heat.rank.total_cmp(&other.heat.rank))
            .then(self.heat.bottleneck.total_cmp(&other.heat.bottleneck))
            .then(self.heat.sum.total_cmp(&other.heat.sum))
            .then(self.tie.cmp(&other.tie))
            .then(self.index.cmp(&other.index))
    }

    /// How near-ties are taken: a pod without a network estimate by its NIC load in coarse
    /// steps first, then in tie order (the deciding replica's own), then in order.
    pub(crate) fn tie_order(&self, other: &Self) -> std::cmp::Ordering {
        // Saturating: a NaN load shares step 0.
        let step = |c: &Self| (c.heat.quiet_nic / NIC_TIE_STEP).floor() as u32;
        step(self)
            .cmp(&step(other))
            .then(self.tie.cmp(&other.tie))
            .then_with(|| self.order(other))
    }
}

/// How one eligible node stands for this pod.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(in crate::placement) enum Standing {
    /// Its requests do not fit.
    Full,
    /// Feasible but hot: preferred only when every feasible node is (least bad first); its
    /// weighted heat ranks it for the avoid list.
    Hot { heat: f64, pod: PodHeat },
    /// Feasible and not hot: what the pod would leave behind there.
    Cool(PodHeat),
}

/// How the node at `index` stands for `pod`, with in-flight load and requests counted.
/// `partition`: this replica's nodes and how it weighs the others' (see `replica`); `None`
/// when it decides alone.
pub(in crate::placement) fn standing(
    ctx: &DecisionCtx<'_>,
    index: usize,
    partition: Option<&Partition>,
) -> Standing {
    let DecisionCtx {
        pod,
        view,
        policy,
        inflight,
        ..
    } = *ctx;
    let node = &view.nodes[index];
    let extra = inflight.extra(index, node);
    if !fits_with(node, inflight.bound(index, node), extra, &pod.facts) {
        return Standing::Full;
    }
    let taken = partition.map_or(0, |p| p.taken_at(index));
    if taken > 0
        && room_with(node, inflight.bound(index, node), extra, &pod.facts) <= taken as usize
    {
        // Its owner may be putting pods there right now, into the room this pod would need.
        return Standing::Full;
    }
    let load = load_with(node, extra, policy.uncertainty);
    let mut after = pod_heat(node, &load, pod, policy, 1.0);
    if let Some(partition) = partition {
        // Other replicas decide too (a replica set has two members at least).
        let both = pod_heat(node, &load, pod, policy, 2.0);
        if partition.weighs_as_foreign(index) {
            // Its owner may be putting a pod there right now: ranked as if both pods landed,
            // and no cooler than the level its owner's unheard pods are taken to have reached.
            after.rank = both.rank;
            if partition.foreign_level > f64::NEG_INFINITY {
                // Its owner's pods reach the level; the next one there sits half a pod above.
                let empty = pod_heat(node, &load, pod, policy, 0.0).bottleneck;
                after.rank = after
                    .rank
                    .max(partition.foreign_level + (after.bottleneck - empty) / 2.0);
            }
        }
        // Another replica may be adding a pod anywhere before this one hears of it: a NIC is
        // not taken to its threshold on the assumption that none does.
        after.nic_over = both.nic_over;
    }
    if is_hot(&load, &node.scale, &policy.hot) {
        return Standing::Hot {
            heat: heat(&load, &node.scale, &policy.weights),
            pod: after,
        };
    }
    Standing::Cool(after)
}

/// The feasible nodes in the orders a decision reads them: by walking every node
/// (`walk::Walk`) or from an index kept up to date (`RankIndex`). Both give the same answers.
pub(in crate::placement) trait Ranking {
    /// Feasible nodes with readings.
    fn feasible(&self) -> usize;
    /// The coolest candidate.
    fn best(&self) -> Option<Candidate>;
    /// Some candidate is cool (what `best` answers, where finding the best costs more).
    fn any_cool(&self) -> bool {
        self.best().is_some()
    }
    /// The first `used` candidates as named: those `is_tied` (a prefix of the order) first,
    /// in tie order, then the rest in order.
    fn named(&mut self, used: usize, is_tied: &dyn Fn(&Candidate) -> bool) -> Vec<Candidate>;
    /// At most `max` hot feasible nodes, hottest first (then by name): (heat, index).
    fn hottest(&mut self, max: usize) -> Vec<(f64, usize)>;
    /// At most `max` hot feasible nodes, least bad for this pod first ([`Candidate::order`]).
    fn least_bad(&mut self, max: usize) -> Vec<Candidate>;
    /// In order, the candidates (`hot` ones or cool ones) not `taken` whose position extends
    /// `coverage`, each added to it, until it is complete.
    fn cover(
        &mut self,
        hot: bool,
        coverage: &mut Coverage,
        positions: &Positions,
        taken: &dyn Fn(usize) -> bool,
    ) -> Vec<Candidate>;
}

/// [`Ranking::cover`] over candidates already in order.
pub(in crate::placement) fn cover_in_order(
    in_order: impl Iterator<Item = Candidate>,
    coverage: &mut Coverage,
    positions: &Positions,
    taken: &dyn Fn(usize) -> bool,
) -> Vec<Candidate> {
    let mut added = Vec::new();
    for c in in_order {
        if coverage.complete() {
            break;
        }
        let place = positions.of(c.index);
        if coverage.adds(place) && !taken(c.index) {
            coverage.add(place);
            added.push(c);
        }
    }
    added
}

/// Each node's place among near-ties, from its name and this replica's `salt`: the same for
/// every decision, different on each replica. Hashed once per view.
pub(in crate::placement) fn tie_breakers(view: &ClusterView, salt: u64) -> std::sync::Arc<[u32]> {
    view.memo.get_or_compute(MemoKey::Ties(salt), || {
        let hasher = foldhash::fast::FixedState::with_seed(salt);
        view.nodes
            .iter()
            .map(|n| (hasher.hash_one(&n.name) >> 32) as u32)
            .collect()
    })
}
