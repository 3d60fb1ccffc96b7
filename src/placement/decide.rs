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

use super::constraints::{Ineligible, eligible_nodes};
use super::decision::{Decision, RankedNode, TierChoice};
use super::rank_index::{RankIndex, RankIndexes};
use super::standing::{
    Candidate, InFlight, PodDemand, Ranking, Standing, effective_load, fits_with, load_with,
    model_node_with, pod_heat, standing, tie_breakers,
};
use crate::config::scheduler::SchedulerConfig;
use crate::config::{NodeMatch, PlacementConfig};
use crate::inflight::ledger::Ledger;
use crate::scheduler::cycle::resource_score;
use crate::scheduler::num_feasible_nodes_to_find;
use crate::view::heat::{Load, heat, is_hot};
use crate::view::{ClusterView, NodeView};

/// How many tier-1 nodes make it `miss`-unlikely that none is in a sample of `fraction`.
pub fn tier_size_for_sample(fraction: f64, miss: f64, at_least: usize) -> usize {
    if fraction >= 1.0 || fraction <= 0.0 {
        return at_least;
    }
    let needed = (miss.ln() / (1.0 - fraction).ln()).ceil();
    at_least.max(needed as usize)
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
