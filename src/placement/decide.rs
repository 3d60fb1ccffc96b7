//! `decide`: where one pod should land, and the node-affinity terms that make the scheduler
//! put it there.
//!
//! 1. Candidates are the nodes the scheduler would accept (the pod's filters, and its requests
//!    against allocatable minus what is bound there and what steered pods are expected to
//!    bring) that are not hot.
//! 2. They are ranked by the utilisation this pod would leave behind in the dimensions it
//!    loads (CPU, NIC when it carries network, memory when configured), bottleneck first.
//! 3. Tier 1 is the best node, or, when the scheduler scores only a sample of the feasible
//!    nodes, as many of the best as it takes for one of them to be in the sample with
//!    `placement.sample_miss` odds against. Later tiers are fallbacks at much lower weights.
//! 4. The landing is predicted with the scheduler model: among tier-1 nodes the resource
//!    scores decide; under sampling, a node lands the pod when it is in the sample and every
//!    better-scored tier-1 node is not. The pod is charged there, by probability.

use std::hash::BuildHasher;

use k8s_openapi::api::core::v1::{
    NodeSelectorRequirement, NodeSelectorTerm, PreferredSchedulingTerm,
};

use super::constraints::{Ineligible, PodConstraints, eligible_nodes};
use super::rank_index::{RankIndex, RankIndexes};
use crate::config::scheduler::SchedulerConfig;
use crate::config::{NodeMatch, PlacementConfig};
use crate::inflight::ledger::{Ledger, NodeExtra, PodLoad};
use crate::inflight::occupancy::NodeRequests;
use crate::patch::{RequirementJson, TermJson};
use crate::scheduler::cycle::{PodFacts, resource_score};
use crate::scheduler::node::fits_in;
use crate::scheduler::{ModelNode, num_feasible_nodes_to_find};
use crate::view::heat::{Load, heat, is_hot};
use crate::view::{ClusterView, NodeView};

/// A node chosen for a tier.
#[derive(Debug, Clone, PartialEq)]
pub struct RankedNode {
    pub name: String,
    /// Bottleneck utilisation with this pod added (for the avoid list: heat now).
    pub heat: f64,
    /// Label-keyed terms can name this node: its value of the label is its name. Otherwise
    /// (or when terms go by name) a `metadata.name` requirement names it.
    pub by_label: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TierChoice {
    pub weight: i32,
    pub nodes: Vec<RankedNode>,
}

/// Everything the patch needs, and what the decision annotation summarises.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Decision {
    /// Coolest first; empty tiers are dropped.
    pub tiers: Vec<TierChoice>,
    /// Hot feasible nodes named in the avoid term, hottest first.
    pub avoid: Vec<RankedNode>,
    pub avoid_weight: i32,
    /// Required requirements from pinning rules, ANDed into every required term.
    pub pinning: Vec<NodeSelectorRequirement>,
    /// Where the model predicts the pod lands, with probabilities summing to 1.
    pub landing: Vec<(String, f64)>,
    /// Nodes the scheduler would find feasible (those without readings included).
    pub feasible: usize,
    /// Share of the feasible nodes the scheduler scores for one pod.
    pub sample_fraction: f64,
}

impl Decision {
    /// The nodes of the first tier.
    pub fn first_tier(&self) -> &[RankedNode] {
        self.tiers.first().map_or(&[], |t| t.nodes.as_slice())
    }

    pub fn prefers_anything(&self) -> bool {
        !self.tiers.is_empty() || !self.avoid.is_empty()
    }

    /// Preferred terms in the shape the apiserver validates (weights 1..100, one value per
    /// `matchFields` requirement).
    pub fn preferred_terms(&self, node_match: &NodeMatch) -> Vec<PreferredSchedulingTerm> {
        let owned = |requirements: Vec<RequirementJson<'_>>| {
            let owned: Vec<NodeSelectorRequirement> =
                requirements.iter().map(RequirementJson::to_k8s).collect();
            (!owned.is_empty()).then_some(owned)
        };
        self.terms(node_match)
            .into_iter()
            .map(|(weight, expressions, fields)| PreferredSchedulingTerm {
                weight,
                preference: NodeSelectorTerm {
                    match_expressions: owned(expressions),
                    match_fields: owned(fields),
                },
            })
            .collect()
    }

    /// [`Decision::preferred_terms`] as borrowed JSON terms, in the same order.
    pub fn preferred_json<'a>(&'a self, node_match: &'a NodeMatch) -> Vec<TermJson<'a>> {
        self.terms(node_match)
            .into_iter()
            .map(|(weight, expressions, fields)| TermJson::new(weight, expressions, fields))
            .collect()
    }

    /// Each term as (weight, matchExpressions, matchFields). By label, a tier is one term
    /// whose `In` lists its nodes (a pod spec about 10 KB smaller at 5,000 nodes than a term
    /// per node); a node the label does not name gets a `metadata.name` term of its own at the
    /// same weight, so it scores as its tier does. The avoid term is one term
    /// whose requirements AND together: "any node but these".
    fn terms<'a>(&'a self, node_match: &'a NodeMatch) -> Vec<RequirementTerm<'a>> {
        let key = match node_match {
            NodeMatch::Name => None,
            NodeMatch::Label { key } => Some(key.as_str()),
        };
        // Terms go by a label, and the node's value of it is its name.
        let named_by_label = |node: &RankedNode| key.is_some() && node.by_label;
        let by_label = |operator, nodes: &'a [RankedNode]| {
            let values: Vec<&str> = nodes
                .iter()
                .filter(|n| named_by_label(n))
                .map(|n| n.name.as_str())
                .collect();
            match key {
                Some(key) if !values.is_empty() => {
                    vec![RequirementJson::new(key, operator, values)]
                }
                _ => Vec::new(),
            }
        };
        // matchFields takes exactly one value: one requirement per node.
        let by_name = |operator, nodes: &'a [RankedNode]| {
            nodes
                .iter()
                .filter(move |n| !named_by_label(n))
                .map(move |n| RequirementJson::new(NAME_FIELD, operator, vec![&n.name]))
        };
        let mut terms = Vec::new();
        for tier in &self.tiers {
            let expressions = by_label("In", &tier.nodes);
            if !expressions.is_empty() {
                terms.push((tier.weight, expressions, Vec::new()));
            }
            terms.extend(by_name("In", &tier.nodes).map(|f| (tier.weight, Vec::new(), vec![f])));
        }
        if !self.avoid.is_empty() && self.avoid_weight > 0 {
            let expressions = by_label("NotIn", &self.avoid);
            let fields = by_name("NotIn", &self.avoid).collect();
            terms.push((self.avoid_weight, expressions, fields));
        }
        terms
    }
}

/// A preferred term's parts: weight, matchExpressions, matchFields.
type RequirementTerm<'a> = (i32, Vec<RequirementJson<'a>>, Vec<RequirementJson<'a>>);

/// The only field a `matchFields` requirement may name.
const NAME_FIELD: &str = "metadata.name";

/// The pod as placement sees it: its filters, its requests, its real load.
#[derive(Debug, Default)]
pub struct PodDemand<'a> {
    pub constraints: PodConstraints<'a>,
    /// Requests and the scheduler-facing parts of the spec.
    pub facts: PodFacts<'a>,
    /// Estimated real load it adds to its node.
    pub load: PodLoad,
    /// Where `load` came from.
    pub source: super::LoadSource,
}

/// A node's load with the in-flight pods counted on it (their expected load).
pub fn effective_load(node: &NodeView, ledger: Option<&Ledger>) -> Load {
    load_with(node, ledger.and_then(|l| l.extra(&node.name)), 0.0)
}

/// A node's load with the in-flight pods' expected load plus `z` standard deviations of it:
/// a node that may well have received more pods than expected is not preferred as if it had
/// not.
fn load_with(node: &NodeView, extra: Option<NodeExtra>, z: f64) -> Load {
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
fn model_node_with(
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
fn fits_with(
    node: &NodeView,
    bound: Option<&NodeRequests>,
    extra: Option<NodeExtra>,
    pod: &PodFacts<'_>,
) -> bool {
    use crate::scheduler::resources::{CPU, MEMORY, PODS};
    if !node.allocatable_known {
        return true;
    }
    // Same rounding of expected requests as `model_node_with`.
    let requested = |name: &str| {
        let expected = extra.map_or(0, |x| match name {
            CPU => x.milli_cpu.round() as i64,
            MEMORY => x.memory.round() as i64,
            PODS => x.pods.round() as i64,
            _ => 0,
        });
        node.base_requested.requested.get(name)
            + bound.map_or(0, |b| b.requested.get(name))
            + expected
    };
    fits_in(&node.allocatable, requested, &pod.requests)
}

/// The ledger's counts for each node of one view: by position when the ledger is aligned with
/// the view (see [`Ledger::align`]), else by name. Both give the same numbers.
#[derive(Clone, Copy)]
pub(super) struct InFlight<'a> {
    ledger: Option<&'a Ledger>,
    aligned: bool,
}

impl<'a> InFlight<'a> {
    pub fn new(ledger: Option<&'a Ledger>, view: &ClusterView) -> Self {
        InFlight {
            ledger,
            aligned: ledger.is_some_and(|l| l.is_aligned(view.id)),
        }
    }

    fn extra(&self, position: usize, node: &NodeView) -> Option<NodeExtra> {
        let ledger = self.ledger?;
        if self.aligned {
            ledger.extra_at(position)
        } else {
            ledger.extra(&node.name)
        }
    }

    fn bound(&self, position: usize, node: &NodeView) -> Option<&'a NodeRequests> {
        let ledger = self.ledger?;
        if self.aligned {
            ledger.bound_at(position)
        } else {
            ledger.occupancy.node(&node.name)
        }
    }
}

/// What the pod would leave behind on a node, in the dimensions it loads.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PodHeat {
    /// The highest utilisation: CPU, NIC when the pod carries network, memory when configured.
    pub bottleneck: f64,
    /// Their sum, to tell equal bottlenecks apart.
    pub sum: f64,
    /// The pod would take a NIC of known capacity to the hot threshold or past it.
    pub nic_over: bool,
}

/// The utilisation the pod leaves behind in the dimensions it loads, bottleneck first. With
/// `share` 0: the same dimensions without the pod.
pub fn pod_heat(
    node: &NodeView,
    load: &Load,
    pod: &PodDemand<'_>,
    policy: &PlacementConfig,
    share: f64,
) -> PodHeat {
    let cpu = load.cpu + share * pod.load.cpu_cores / node.scale.cpu_cores;
    let mut heat = PodHeat {
        bottleneck: cpu,
        sum: cpu,
        nic_over: false,
    };
    if pod.load.network_bytes_per_second > 0.0 && node.scale.network_bytes_per_second > 0.0 {
        let net = node.scale.network_fraction(
            load.network_bytes_per_second + share * pod.load.network_bytes_per_second,
        );
        heat.bottleneck = heat.bottleneck.max(net);
        heat.sum += net;
        heat.nic_over = node.scale.network_is_capacity && net >= policy.hot.network;
    }
    if policy.weights.memory > 0.0 && node.allocatable.memory > 0 {
        let mem = load.memory
            + share * pod.facts.requests.requested.memory as f64 / node.allocatable.memory as f64;
        heat.bottleneck = heat.bottleneck.max(mem);
        heat.sum += mem;
    }
    heat
}

/// How many tier-1 nodes make it `miss`-unlikely that none is in a sample of `fraction`.
pub fn tier_size_for_sample(fraction: f64, miss: f64, at_least: usize) -> usize {
    if fraction >= 1.0 || fraction <= 0.0 {
        return at_least;
    }
    let needed = (miss.ln() / (1.0 - fraction).ln()).ceil();
    at_least.max(needed as usize)
}

/// One feasible node and how this pod would leave it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Candidate {
    pub index: usize,
    pub heat: PodHeat,
    pub tie: u32,
}

impl Candidate {
    /// Coolest first. A NIC is never pushed past the hot threshold to relieve CPU: such nodes
    /// come last. The position settles what the tie rank does not (a 32-bit hash collision).
    pub fn order(&self, other: &Self) -> std::cmp::Ordering {
        self.heat
            .nic_over
            .cmp(&other.heat.nic_over)
            .then(self.heat.bottleneck.total_cmp(&other.heat.bottleneck))
            .then(self.heat.sum.total_cmp(&other.heat.sum))
            .then(self.tie.cmp(&other.tie))
            .then(self.index.cmp(&other.index))
    }

    /// Tie order first: how near-ties are taken.
    pub fn tie_order(&self, other: &Self) -> std::cmp::Ordering {
        self.tie.cmp(&other.tie).then_with(|| self.order(other))
    }
}

/// How one eligible node stands for this pod.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Standing {
    /// Its requests do not fit.
    Full,
    /// Feasible but hot: never preferred; its weighted heat ranks it for the avoid list.
    Hot(f64),
    /// Feasible and not hot: what the pod would leave behind there.
    Cool(PodHeat),
}

/// How the node at `index` stands for `pod`, with in-flight load and requests counted.
pub(super) fn standing(
    index: usize,
    view: &ClusterView,
    inflight: InFlight<'_>,
    pod: &PodDemand<'_>,
    policy: &PlacementConfig,
) -> Standing {
    let node = &view.nodes[index];
    let extra = inflight.extra(index, node);
    if !fits_with(node, inflight.bound(index, node), extra, &pod.facts) {
        return Standing::Full;
    }
    let load = load_with(node, extra, policy.uncertainty);
    if is_hot(&load, &node.scale, &policy.hot) {
        return Standing::Hot(heat(&load, &node.scale, &policy.weights));
    }
    Standing::Cool(pod_heat(node, &load, pod, policy, 1.0))
}

/// The feasible nodes in the orders a decision reads them: by walking every node
/// ([`Walk`]) or from an index kept up to date (`RankIndex`). Both give the same answers.
pub(super) trait Ranking {
    /// Feasible nodes with readings.
    fn feasible(&self) -> usize;
    /// The coolest candidate.
    fn best(&self) -> Option<Candidate>;
    /// The first `used` candidates as named: those `is_tied` (a prefix of the order) first,
    /// in tie order, then the rest in order.
    fn named(&mut self, used: usize, is_tied: &dyn Fn(&Candidate) -> bool) -> Vec<Candidate>;
    /// At most `max` hot feasible nodes, hottest first (then by name): (heat, index).
    fn hottest(&mut self, max: usize) -> Vec<(f64, usize)>;
}

/// Every eligible node assessed once.
struct Walk<'v> {
    view: &'v ClusterView,
    candidates: Vec<Candidate>,
    hot: Vec<(f64, usize)>,
    feasible: usize,
}

impl<'v> Walk<'v> {
    fn new(
        view: &'v ClusterView,
        eligible: &[u32],
        ties: &[u32],
        inflight: InFlight<'_>,
        pod: &PodDemand<'_>,
        policy: &PlacementConfig,
    ) -> Self {
        let mut walk = Walk {
            view,
            candidates: Vec::with_capacity(eligible.len()),
            hot: Vec::new(),
            feasible: 0,
        };
        for index in eligible.iter().map(|&i| i as usize) {
            match standing(index, view, inflight, pod, policy) {
                Standing::Full => continue,
                Standing::Hot(heat) => walk.hot.push((heat, index)),
                Standing::Cool(heat) => walk.candidates.push(Candidate {
                    index,
                    heat,
                    tie: ties[index],
                }),
            }
            walk.feasible += 1;
        }
        walk
    }
}

impl Ranking for Walk<'_> {
    fn feasible(&self) -> usize {
        self.feasible
    }

    fn best(&self) -> Option<Candidate> {
        self.candidates.iter().min_by(|a, b| a.order(b)).copied()
    }

    fn named(&mut self, used: usize, is_tied: &dyn Fn(&Candidate) -> bool) -> Vec<Candidate> {
        let mut candidates = std::mem::take(&mut self.candidates);
        let tied = candidates.iter().filter(|c| is_tied(c)).count();
        // Only the first `used` are named: select them, then sort just those.
        if tied >= used {
            // Every named node is a near-tie: the rest of the ranking does not matter.
            candidates.retain(|c| is_tied(c));
            if candidates.len() > used && used > 0 {
                candidates.select_nth_unstable_by(used - 1, Candidate::tie_order);
            }
            candidates.truncate(used);
            candidates.sort_by(Candidate::tie_order);
        } else {
            if candidates.len() > used && used > 0 {
                candidates.select_nth_unstable_by(used - 1, Candidate::order);
            }
            candidates.truncate(used);
            candidates.sort_by(Candidate::order);
            candidates[..tied].sort_by(Candidate::tie_order);
        }
        candidates
    }

    fn hottest(&mut self, max: usize) -> Vec<(f64, usize)> {
        let view = self.view;
        let hottest_first = |a: &(f64, usize), b: &(f64, usize)| {
            b.0.total_cmp(&a.0)
                .then_with(|| view.nodes[a.1].name.cmp(&view.nodes[b.1].name))
        };
        let mut hot = std::mem::take(&mut self.hot);
        if hot.len() > max && max > 0 {
            hot.select_nth_unstable_by(max - 1, hottest_first);
        }
        hot.truncate(max);
        hot.sort_by(hottest_first);
        hot
    }
}

/// Each node's place among near-ties, from its name and this replica's `salt`: the same for
/// every decision, different on each replica. Hashed once per view.
pub(super) fn tie_breakers(view: &ClusterView, salt: u64) -> std::sync::Arc<[u32]> {
    view.memo.get_or_compute(format!("ties/{salt}"), || {
        let hasher = foldhash::fast::FixedState::with_seed(salt);
        view.nodes
            .iter()
            .map(|n| (hasher.hash_one(&n.name) >> 32) as u32)
            .collect()
    })
}

/// Ranks the nodes this pod can land on and builds the tiers, the avoid list and the
/// predicted landing. `salt` breaks near-ties differently on each replica. Walks every node:
/// the reference [`decide_indexed`] is held to.
pub fn decide(
    pod: &PodDemand<'_>,
    view: &ClusterView,
    ledger: Option<&Ledger>,
    policy: &PlacementConfig,
    scheduler: &SchedulerConfig,
    salt: u64,
) -> Decision {
    let ties = tie_breakers(view, salt);
    let inflight = InFlight::new(ledger, view);
    let eligible = eligible_nodes(&pod.constraints, view);
    let mut walk = Walk::new(view, &eligible, &ties, inflight, pod, policy);
    decide_from(&mut walk, pod, view, inflight, policy, scheduler)
}

/// [`decide`], reading the ranking of this pod's shape from `indexes` (brought up to date
/// with the nodes the ledger changed since) instead of walking every node, when the ledger is
/// aligned with the view. Same decision.
pub fn decide_indexed(
    pod: &PodDemand<'_>,
    view: &ClusterView,
    ledger: Option<&Ledger>,
    policy: &PlacementConfig,
    scheduler: &SchedulerConfig,
    salt: u64,
    indexes: &RankIndexes,
) -> Decision {
    let inflight = InFlight::new(ledger, view);
    match (ledger, inflight.aligned) {
        (Some(ledger), true) => {
            let Some(slot) = indexes.slot(view, pod, policy, salt) else {
                return decide(pod, view, Some(ledger), policy, scheduler, salt);
            };
            // The index is held while it catches up and is read, not while the answer is built.
            let picked = {
                let mut index = RankIndexes::lock(&slot);
                let index = RankIndex::up_to_date(&mut index, view, ledger, pod, policy, salt);
                pick(index, pod, view, inflight, policy, scheduler)
            };
            finish(picked, pod, view, inflight, policy, scheduler)
        }
        _ => decide(pod, view, ledger, policy, scheduler, salt),
    }
}

/// What a decision reads from the ranking; taken at once, so an index is held no longer.
struct Picked {
    /// Feasible nodes, those without readings included.
    feasible: usize,
    sample_fraction: f64,
    first_size: usize,
    /// Size of each tier after the first, sized for the sample.
    later_sizes: Vec<usize>,
    /// In naming order: tier 1, then the later tiers.
    named: Vec<Candidate>,
    /// Hot feasible nodes to avoid, hottest first: (heat, index).
    hot: Vec<(f64, usize)>,
}

fn pick(
    ranking: &mut dyn Ranking,
    pod: &PodDemand<'_>,
    view: &ClusterView,
    inflight: InFlight<'_>,
    policy: &PlacementConfig,
    scheduler: &SchedulerConfig,
) -> Picked {
    let feasible = ranking.feasible() + view.nodes_without_metrics;
    let all_nodes = view.nodes.len() + view.nodes_without_metrics;
    let wanted = num_feasible_nodes_to_find(
        i64::from(scheduler.percentage_of_nodes_to_score),
        all_nodes as i64,
    );
    let sample_fraction = if feasible == 0 {
        1.0
    } else {
        (wanted as f64 / feasible as f64).min(1.0)
    };
    // Every tier is sized for the sample: a pod whose tier-1 nodes all fall outside it still
    // finds cool nodes of tier 2 there, not just whatever the resource scores favour.
    let tier_size =
        |configured: usize| tier_size_for_sample(sample_fraction, policy.sample_miss, configured);
    let first_size = tier_size(policy.tiers.first().map_or(1, |t| t.nodes));
    let later_sizes: Vec<usize> = policy
        .tiers
        .iter()
        .skip(1)
        .map(|t| tier_size(t.nodes))
        .collect();
    let used = first_size + later_sizes.iter().sum::<usize>();

    // Near-ties (within `tie_band` of what this pod adds to the best node): each replica takes
    // them in its own order, so replicas deciding at the same moment rarely pick the same node.
    let tied_below = ranking.best().map(|best| {
        let node = &view.nodes[best.index];
        let load = load_with(node, inflight.extra(best.index, node), policy.uncertainty);
        let before = pod_heat(node, &load, pod, policy, 0.0);
        let band = policy.tie_band * (best.heat.bottleneck - before.bottleneck).max(0.0);
        (best.heat.nic_over, best.heat.bottleneck + band)
    });
    let is_tied = |c: &Candidate| {
        tied_below.is_some_and(|(nic_over, limit)| {
            c.heat.nic_over == nic_over && c.heat.bottleneck <= limit
        })
    };
    let named = ranking.named(used, &is_tied);
    let hot = if policy.avoid_hot.weight == 0 || policy.avoid_hot.max_nodes == 0 {
        Vec::new()
    } else {
        ranking.hottest(policy.avoid_hot.max_nodes)
    };
    Picked {
        feasible,
        sample_fraction,
        first_size,
        later_sizes,
        named,
        hot,
    }
}

fn decide_from(
    ranking: &mut dyn Ranking,
    pod: &PodDemand<'_>,
    view: &ClusterView,
    inflight: InFlight<'_>,
    policy: &PlacementConfig,
    scheduler: &SchedulerConfig,
) -> Decision {
    let picked = pick(ranking, pod, view, inflight, policy, scheduler);
    finish(picked, pod, view, inflight, policy, scheduler)
}

/// The tiers, the avoid list and the landing from what was picked.
fn finish(
    picked: Picked,
    pod: &PodDemand<'_>,
    view: &ClusterView,
    inflight: InFlight<'_>,
    policy: &PlacementConfig,
    scheduler: &SchedulerConfig,
) -> Decision {
    let ranked = |c: &Candidate| {
        let node = &view.nodes[c.index];
        RankedNode {
            name: node.name.clone(),
            heat: c.heat.bottleneck,
            by_label: by_label(node, &policy.node_match),
        }
    };
    let mut rest = picked.named.iter();
    let sizes = std::iter::once(picked.first_size).chain(picked.later_sizes.iter().copied());
    let tiers: Vec<TierChoice> = policy
        .tiers
        .iter()
        .zip(sizes)
        .map(|(tier, size)| TierChoice {
            weight: tier.weight,
            nodes: rest.by_ref().take(size).map(ranked).collect(),
        })
        .filter(|t| !t.nodes.is_empty())
        .collect();

    let first: Vec<usize> = picked
        .named
        .iter()
        .take(picked.first_size)
        .map(|c| c.index)
        .collect();
    let landing = predict_landing(
        pod,
        view,
        inflight,
        scheduler,
        &first,
        picked.sample_fraction,
    );
    let avoid = picked
        .hot
        .iter()
        .map(|&(h, i)| RankedNode {
            name: view.nodes[i].name.clone(),
            heat: h,
            by_label: by_label(&view.nodes[i], &policy.node_match),
        })
        .collect();

    Decision {
        tiers,
        avoid,
        avoid_weight: policy.avoid_hot.weight,
        pinning: pod.constraints.pinning.clone(),
        landing,
        feasible: picked.feasible,
        sample_fraction: picked.sample_fraction,
    }
}

/// Where the pod lands among the tier-1 nodes `first` (indexes into the view): the scheduler
/// gives them equal affinity, so the resource scores decide; under sampling each is in the
/// sample with probability `fraction`, and lands the pod when every better one is not.
fn predict_landing(
    pod: &PodDemand<'_>,
    view: &ClusterView,
    inflight: InFlight<'_>,
    scheduler: &SchedulerConfig,
    first: &[usize],
    fraction: f64,
) -> Vec<(String, f64)> {
    let mut scored: Vec<(i64, usize)> = first
        .iter()
        .map(|&i| {
            let node = &view.nodes[i];
            let model = model_node_with(node, inflight.bound(i, node), inflight.extra(i, node));
            (resource_score(&pod.facts, &model, scheduler), i)
        })
        .collect();
    scored.sort_by_key(|s| std::cmp::Reverse(s.0));
    let mut landing: Vec<(String, f64)> = Vec::with_capacity(scored.len());
    let mut none_better = 1.0;
    let mut at = 0;
    while at < scored.len() {
        // Equal scores: upstream picks at random among them.
        let group = scored[at..]
            .iter()
            .take_while(|s| s.0 == scored[at].0)
            .count();
        let p_group = none_better * (1.0 - (1.0 - fraction).powi(group as i32));
        for &(_, i) in &scored[at..at + group] {
            landing.push((view.nodes[i].name.clone(), p_group / group as f64));
        }
        none_better *= (1.0 - fraction).powi(group as i32);
        at += group;
    }
    // Negligible shares only lengthen the annotation.
    let total: f64 = landing.iter().map(|(_, p)| p).sum();
    landing.retain(|(_, p)| *p >= 0.01 * total);
    let kept: f64 = landing.iter().map(|(_, p)| p).sum();
    for (_, p) in &mut landing {
        *p /= kept;
    }
    landing
}

/// Whether a label-keyed term can name `node`: its value of the label is its name, so the
/// term's values stay node names for everything that reads them back (landing accuracy,
/// `simulate`). A node whose label says otherwise is named by `metadata.name`.
fn by_label(node: &NodeView, node_match: &NodeMatch) -> bool {
    match node_match {
        NodeMatch::Name => false,
        NodeMatch::Label { key } => node.labels.get(key) == Some(&node.name),
    }
}

/// One row of `review --explain`: every node, with why it was or was not chosen.
#[derive(Debug, Clone)]
pub struct NodeAssessment {
    pub name: String,
    /// Heat now (weighted), with in-flight pods.
    pub heat: f64,
    pub load: Load,
    pub network_fraction: f64,
    pub eligibility: Result<(), Ineligible>,
    /// Requests fit in what is left of allocatable.
    pub fits: bool,
    pub hot: bool,
    /// Tier number (1-based) when the node was chosen.
    pub tier: Option<usize>,
    pub avoided: bool,
    /// Predicted landing probability.
    pub landing: f64,
}

/// Every node's assessment for the decision `decision`, in view order (coolest measured first).
pub fn assess_all(
    pod: &PodDemand<'_>,
    view: &ClusterView,
    ledger: Option<&Ledger>,
    policy: &PlacementConfig,
    decision: &Decision,
) -> Vec<NodeAssessment> {
    view.nodes
        .iter()
        .map(|node| {
            let load = effective_load(node, ledger);
            NodeAssessment {
                name: node.name.clone(),
                heat: heat(&load, &node.scale, &policy.weights),
                network_fraction: node.scale.network_fraction(load.network_bytes_per_second),
                load,
                eligibility: pod.constraints.check(node),
                fits: fits_with(
                    node,
                    ledger.and_then(|l| l.occupancy.node(&node.name)),
                    ledger.and_then(|l| l.extra(&node.name)),
                    &pod.facts,
                ),
                hot: is_hot(&load, &node.scale, &policy.hot),
                tier: decision
                    .tiers
                    .iter()
                    .position(|t| t.nodes.iter().any(|n| n.name == node.name))
                    .map(|p| p + 1),
                avoided: decision.avoid.iter().any(|n| n.name == node.name),
                landing: decision
                    .landing
                    .iter()
                    .find(|(n, _)| *n == node.name)
                    .map_or(0.0, |(_, p)| *p),
            }
        })
        .collect()
}
