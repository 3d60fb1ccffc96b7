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

use crate::config::scheduler::SchedulerConfig;
use crate::placement::context::DecisionCtx;
use crate::placement::decision::{Decision, NamedBy, RankedNode, TierChoice};
use crate::placement::eligibility::Eligibility;
use crate::placement::landing::{Coverage, Window, order_positions, tier_size_for_sample};
use crate::placement::predict::predict_landing;
use crate::placement::rank::grading::{Grading, tier_weights};
use crate::placement::rank::rank_index::{RankIndex, RankIndexes};
use crate::placement::rank::spread_cover::cover_spread_domains;
use crate::placement::rank::standing::{Candidate, Ranking, load_with, pod_heat, tie_breakers};
use crate::placement::rank::walk::Walk;
use crate::placement::ranking_source::{Indexed, RankingSource, Walks};
use crate::placement::replicas::replica::Replica;
use crate::scheduler::num_feasible_nodes_to_find;
use crate::view::ClusterView;

/// The most nodes a fallback tier grows by for the pods of its kind not bound yet: keeps the
/// patch a few kilobytes when a burst of thousands is pending.
const MAX_TAKEN_AHEAD: usize = 200;

/// Ranks the nodes this pod can land on and builds the tiers, the avoid list and the
/// predicted landing. `replica` says which replica decides: its salt breaks near-ties, its
/// membership (when known) which nodes are its own. Walks every node: the reference
/// [`decide_indexed`] is held to.
pub fn decide(ctx: &DecisionCtx<'_>, replica: impl Into<Replica>) -> Decision {
    let replica = deciding(ctx, replica);
    let eligibility = Eligibility::of(ctx, &replica, None);
    let walks = Walks::new(ctx, &replica, &eligibility);
    let picked = pick_from(ctx, &replica, &walks, &eligibility);
    decision(ctx, &replica, &eligibility, picked)
}

/// [`decide`], reading the ranking of this pod's shape from `indexes` (brought up to date
/// with the nodes the world changed since) instead of walking every node, when the world is
/// aligned with the view. Same decision.
pub fn decide_indexed(
    ctx: &DecisionCtx<'_>,
    replica: impl Into<Replica>,
    indexes: &RankIndexes,
) -> Decision {
    let DecisionCtx {
        pod,
        view,
        world,
        policy,
        inflight,
        ..
    } = *ctx;
    let replica = deciding(ctx, replica);
    if !inflight.aligned {
        return decide(ctx, replica);
    }
    // Which nodes such a pod may take changes with every pod bound or steered, and the level
    // the other replicas' unheard pods reach with every decision of a replica that mirrors
    // them: the per-shape index follows neither; the walk does.
    if crate::placement::eligible::pod_level::applies(&pod.facts, world) || replica.mirrors() {
        return decide(ctx, replica);
    }
    let Some(slot) = indexes.slot(view, pod, policy, &replica) else {
        return decide(ctx, replica);
    };
    // Scores that count other pods, and the job's own bounds, keep some nodes of the shape's
    // ranking for this pod only: the index is read through them.
    let eligibility = Eligibility::of(ctx, &replica, Some(indexes.affinity_sums()));
    // The index is held while it catches up and is read, not while the answer is built.
    let picked = {
        let mut index = RankIndexes::lock(&slot);
        let index = RankIndex::up_to_date(&mut index, ctx, world, &replica);
        pick_from(ctx, &replica, &Indexed { index, view }, &eligibility)
    };
    decision(ctx, &replica, &eligibility, picked)
}

/// The tiers and the avoid list from `source`: within the job's own bounds while some cool
/// node is there, else over the nodes the scores keep, else (when those hold no cool node)
/// over every node that passes the filters.
fn pick_from<S: RankingSource>(
    ctx: &DecisionCtx<'_>,
    replica: &Replica,
    source: &S,
    eligibility: &Eligibility,
) -> Picked {
    let ranking = match eligibility.bounded.as_ref().map(|b| source.over(Some(b))) {
        Some(within) if within.any_cool() => within,
        _ => source.over(eligibility.kept.as_ref()),
    };
    let wide = eligibility.narrowed().then_some(|| source.over(None));
    pick_cool_first(ctx, ranking, wide, replica.alone && replica.set.is_none())
}

/// The decision from what was picked: the spread domains covered, then the weights, the
/// avoid term and the landing.
fn decision(
    ctx: &DecisionCtx<'_>,
    replica: &Replica,
    eligibility: &Eligibility,
    mut picked: Picked,
) -> Decision {
    let DecisionCtx {
        pod, view, policy, ..
    } = *ctx;
    let domains = crate::placement::eligible::pod_level::spread_domains(&pod.facts, view);
    if !domains.is_empty() && !picked.saturated {
        // Every spread domain, those this replica sees closed included: by the time the
        // scheduler reaches the pod, pods this replica has not heard of may have moved which
        // one is open.
        let ties = tie_breakers(view, replica.salt);
        let partition = eligibility.partition.as_ref();
        let cool_anywhere = Walk::new(ctx, &eligibility.node_eligible, &ties, partition);
        // Sized for the sample as the tiers are: a domain's few named nodes are often all
        // outside it, and the pod then stacks on whichever node its request scores favour.
        // And for the sample of every domain open, the smallest: where this replica sees one
        // domain open, the tiers are sized for a scheduler that scores all of it, but by the
        // time it reaches the pod more may be open, and it samples them (with three per domain,
        // 1 pod in 600 went to a node nothing named at 2,000 nodes, in every run).
        let all_open = ctx.view.nodes_without_metrics + eligibility.node_eligible.len();
        let fraction = picked
            .sample_fraction
            .min(nodes_to_score(ctx.view, ctx.scheduler) as f64 / all_open.max(1) as f64);
        let per_domain = tier_size_for_sample(
            fraction,
            policy.sample_miss,
            crate::placement::rank::spread_cover::SPREAD_DOMAIN_NODES,
        );
        cover_spread_domains(
            &mut picked.tiers,
            &cool_anywhere.candidates,
            &domains,
            policy,
            per_domain,
        );
    }
    finish(ctx, picked)
}

/// Picks from `favoured`, the nodes the pod-level scores keep; when it holds no cool node and
/// `wide` (every node that passes the filters, when the scores left some out) does, picks
/// from `wide` instead and avoids the favoured hot nodes, hottest first: they are what the
/// scheduler would take instead. At the default weights a first-tier node's NodeAffinity
/// points over an avoided node match InterPodAffinity's whole range: against preferred
/// anti-affinity alone, a cool node named there ties a favoured node at worst, and naming it
/// does no worse than naming the hot ones or nothing.
fn pick_cool_first<R: Ranking>(
    ctx: &DecisionCtx<'_>,
    mut favoured: R,
    wide: Option<impl FnOnce() -> R>,
    alone: bool,
) -> Picked {
    if !favoured.any_cool()
        && let Some(mut wide) = wide.map(|wide| wide())
        && wide.any_cool()
    {
        return pick(ctx, &mut wide, Some(&mut favoured), alone);
    }
    pick(ctx, &mut favoured, None, alone)
}

/// How many feasible nodes the scheduler looks for per pod in `view` (its nodes without
/// metrics included): its sample's size when that many pass its filters.
pub(super) fn nodes_to_score(view: &ClusterView, scheduler: &SchedulerConfig) -> usize {
    let all_nodes = view.nodes.len() + view.nodes_without_metrics;
    num_feasible_nodes_to_find(
        i64::from(scheduler.percentage_of_nodes_to_score),
        all_nodes as i64,
    ) as usize
}

/// `replica` as it decides in `ctx`: told whether the scheduler samples there.
pub(super) fn deciding(ctx: &DecisionCtx<'_>, replica: impl Into<Replica>) -> Replica {
    Replica {
        unsampled: scores_every_node(ctx.view, ctx.scheduler),
        ..replica.into()
    }
}

/// The scheduler scores every feasible node of `view`, whatever passes its filters.
pub(crate) fn scores_every_node(view: &ClusterView, scheduler: &SchedulerConfig) -> bool {
    nodes_to_score(view, scheduler) >= view.nodes.len() + view.nodes_without_metrics
}

/// What a decision reads from the ranking; taken at once, so an index is held no longer.
struct Picked {
    /// Feasible nodes, those without readings included.
    feasible: usize,
    sample_fraction: f64,
    window: Window,
    /// The runs tier 1 covers, as picked (spread domains add to the last tier, never to tier 1).
    first_coverage: Coverage,
    /// Each configured tier's candidates, in naming order: the first named, then those that
    /// complete the coverage of the scheduler's runs.
    tiers: Vec<Vec<Candidate>>,
    /// No feasible node is cool: the least bad hot ones are named.
    saturated: bool,
    /// Hot feasible nodes to avoid, hottest first: (heat, index).
    hot: Vec<(f64, usize)>,
    tie_limit: Option<f64>,
    /// What this pod adds to the best node's bottleneck: one pod's worth of heat.
    pod_adds: f64,
}

/// Picks the tiers from `ranking`; the hot nodes to avoid from `avoided` when given (the
/// favoured nodes the scheduler would take instead), else from `ranking` too.
fn pick(
    ctx: &DecisionCtx<'_>,
    ranking: &mut dyn Ranking,
    avoided: Option<&mut dyn Ranking>,
    alone: bool,
) -> Picked {
    let DecisionCtx {
        pod,
        view,
        policy,
        scheduler,
        inflight,
        ..
    } = *ctx;
    let feasible = ranking.feasible() + view.nodes_without_metrics;
    let wanted = nodes_to_score(view, scheduler);
    let sample_fraction = if feasible == 0 {
        1.0
    } else {
        (wanted as f64 / feasible as f64).min(1.0)
    };
    let window = Window::new(view.nodes.len(), wanted, feasible);
    // Every tier is sized for the sample: a pod whose tier-1 nodes all fall outside it still
    // finds cool nodes of tier 2 there, not just whatever the resource scores favour. Tier 1
    // is chosen from this many by the coverage of the runs.
    let tier_size =
        |configured: usize| tier_size_for_sample(sample_fraction, policy.sample_miss, configured);
    // A pod whose scores count its own kind (preferred pod (anti-)affinity, a `ScheduleAnyway`
    // spread) finds the nodes those scores favour taken by the pods of its kind decided before
    // it and not bound yet, whatever their predicted landing said: the fallback tiers hold that
    // many more.
    let taken_ahead = if crate::placement::eligible::pod_level::scores_apply(&pod.facts) {
        crate::placement::eligible::groups_around::pending_read(&pod.facts, ctx.world)
            .min(MAX_TAKEN_AHEAD)
    } else {
        0
    };
    let configured_first = policy.tiers.first().map_or(1, |t| t.nodes);
    let pool = tier_size(configured_first);
    let later_sizes: Vec<usize> = policy
        .tiers
        .iter()
        .skip(1)
        .map(|t| tier_size(t.nodes) + taken_ahead)
        .collect();
    let used = pool + later_sizes.iter().sum::<usize>();

    // Near-ties (within `tie_band` of what this pod adds to the best node): each replica takes
    // them in its own order, so replicas deciding at the same moment rarely pick the same node,
    // and under sampling their equal weights let the sample spread pods over them. A replica
    // known to decide alone (`alone`: the only one, or the one the others forward to) whose pod
    // the scheduler scores on every feasible node has neither to serve: it names the coolest,
    // exact ties alone in its own order. With the band there, a small node tied with a large
    // best took a pod that left it up to half its own pod beyond the level water-filling
    // reaches, in an order a random salt set.
    let tie_band = if alone && sample_fraction >= 1.0 {
        0.0
    } else {
        policy.tie_band
    };
    let pod_adds = ranking.best().map(|best| {
        let node = &view.nodes[best.index];
        let load = load_with(node, inflight.extra(best.index, node), policy.uncertainty);
        let before = pod_heat(node, &load, pod, policy, 0.0);
        (best.heat.bottleneck - before.bottleneck).max(0.0)
    });
    let tied_below = ranking
        .best()
        .zip(pod_adds)
        .map(|(best, adds)| (best.heat.nic_over, best.heat.rank + tie_band * adds));
    let is_tied = |c: &Candidate| {
        tied_below
            .is_some_and(|(nic_over, limit)| c.heat.nic_over == nic_over && c.heat.rank <= limit)
    };
    let mut named = ranking.named(used, &is_tied);
    // Every feasible node is hot: keep water-filling, least bad first, rather than leave the
    // pod to the scheduler's request scores.
    let saturated = named.is_empty() && policy.saturated && ranking.feasible() > 0;
    if saturated {
        named = ranking.least_bad(used);
    }
    let hot = if policy.avoid_hot.weight == 0 || policy.avoid_hot.max_nodes == 0 {
        Vec::new()
    } else {
        let max = policy.avoid_hot.max_nodes + if saturated { used } else { 0 };
        match avoided {
            Some(avoided) => avoided.hottest(max),
            None => ranking.hottest(max),
        }
    };

    // Each tier: its configured count, then any candidate that some run would otherwise miss
    // (a node a run holds may be full by the time the pod is scheduled: the next tier is there).
    let positions = order_positions(view, scheduler.listed_node_order);
    let mut remaining = named;
    let mut tiers: Vec<Vec<Candidate>> = Vec::with_capacity(policy.tiers.len());
    let mut first_coverage = Coverage::new(window, policy.sample_miss);
    for (k, tier) in policy.tiers.iter().enumerate() {
        let size = if k == 0 {
            configured_first
        } else {
            later_sizes[k - 1]
        };
        let mut coverage = Coverage::new(window, policy.sample_miss);
        let mut chosen = Vec::new();
        let mut left = Vec::with_capacity(remaining.len());
        for c in remaining {
            let place = positions.of(c.index);
            let adds = !window.whole() && coverage.adds(place);
            if chosen.len() < size.min(tier.nodes.max(1)) || adds {
                coverage.add(place);
                chosen.push(c);
            } else {
                left.push(c);
            }
        }
        // A stretch of the order the best candidates leave out: its own best joins the tier,
        // or the pods whose sample it is would go by request scores alone.
        if !window.whole() && !chosen.is_empty() && !coverage.complete() {
            let mut named: Vec<usize> = tiers
                .iter()
                .flatten()
                .chain(&chosen)
                .chain(&left)
                .map(|c| c.index)
                .collect();
            named.sort_unstable();
            let taken = |i: usize| named.binary_search(&i).is_ok();
            let added = ranking.cover(saturated, &mut coverage, &positions, &taken);
            chosen.extend(added);
        }
        // Later tiers still hold their sample-sized count, coverage or not.
        if k > 0 {
            let missing = size.saturating_sub(chosen.len());
            let extra: Vec<Candidate> = left.drain(..missing.min(left.len())).collect();
            chosen.extend(extra);
        }
        tiers.push(chosen);
        remaining = left;
        if k == 0 {
            first_coverage = coverage;
        }
    }
    Picked {
        feasible,
        sample_fraction,
        window,
        first_coverage,
        tiers,
        saturated,
        hot,
        tie_limit: tied_below.map(|(_, limit)| limit),
        pod_adds: pod_adds.unwrap_or(0.0),
    }
}

/// The tiers, the avoid list and the landing from what was picked.
fn finish(ctx: &DecisionCtx<'_>, picked: Picked) -> Decision {
    let DecisionCtx {
        pod, view, policy, ..
    } = *ctx;
    let grading = Grading {
        sampled: !picked.window.whole(),
        tie_limit: picked.tie_limit,
        pod_adds: picked.pod_adds,
    };
    let weights = tier_weights(policy, &picked.tiers, &grading);
    let named_by = NamedBy::new(view, &policy.node_match);
    let tiers: Vec<TierChoice> = policy
        .tiers
        .iter()
        .zip(picked.tiers.iter().zip(&weights))
        .filter(|(_, (chosen, _))| !chosen.is_empty())
        .map(|(tier, (chosen, weights))| TierChoice {
            weight: tier.weight,
            nodes: chosen
                .iter()
                .zip(weights)
                .map(|(c, &w)| RankedNode::of(&named_by, c.index, c.heat.bottleneck, w))
                .collect(),
        })
        .collect();

    // A node named in a tier is not avoided too (when saturated, every feasible node is hot).
    let named = |i: usize| picked.tiers.iter().flatten().any(|c| c.index == i);
    let avoid: Vec<RankedNode> = picked
        .hot
        .iter()
        .filter(|&&(_, i)| !picked.saturated || !named(i))
        .take(policy.avoid_hot.max_nodes)
        .map(|&(h, i)| RankedNode::of(&named_by, i, h, policy.avoid_hot.weight))
        .collect();
    // Every node the avoid term does not name matches it: the named ones too.
    let avoid_bonus = if avoid.is_empty() {
        0
    } else {
        policy.avoid_hot.weight.max(0)
    };
    let weighted: Vec<Vec<(Candidate, i64)>> = picked
        .tiers
        .iter()
        .zip(&weights)
        .map(|(chosen, weights)| {
            chosen
                .iter()
                .zip(weights)
                .map(|(c, &w)| (*c, i64::from(w + avoid_bonus)))
                .collect()
        })
        .collect();
    let landing = predict_landing(ctx, &weighted, picked.window, picked.first_coverage);

    Decision {
        tiers,
        avoid,
        avoid_weight: policy.avoid_hot.weight,
        pinning: pod.constraints.pinning.clone(),
        landing,
        feasible: picked.feasible,
        sample_fraction: picked.sample_fraction,
        saturated: picked.saturated,
        tie_limit: picked.tie_limit,
    }
}
