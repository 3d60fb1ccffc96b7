//! Where the scheduler puts a pod left to itself, without terms of ours: observe mode charges
//! the world there, so that the decisions after it see the cluster the unsteered pods make.
//!
//! Among the feasible nodes (filters, and requests with what is bound and in flight) the
//! resource scores decide; under sampling, the best-scored node inside the run wins (see
//! `landing`). The pod's own preferred terms and PreferNoSchedule taints are not scored: the
//! templates observe mode is meant for carry neither.

use crate::config::scheduler::SchedulerConfig;
use crate::inflight::world::World;
use crate::placement::context::{InFlight, PodDemand};
use crate::placement::decide::nodes_to_score;
use crate::placement::eligible::constraints::eligible_nodes;
use crate::placement::landing::{
    Named, Window, landing_odds, landing_shares, order_positions, tier_size_for_sample,
};
use crate::placement::rank::standing::{fits_with, model_node_with};
use crate::scheduler::cycle::resource_score;
use crate::view::ClusterView;

/// At least this many best-scored nodes are weighed, more under sampling: enough that a run
/// of the order almost always holds one of them.
const WEIGHED: usize = 16;
/// Runs that hold none of the weighed nodes, at most (their pods are shared among the rest).
const MISSED_RUNS: f64 = 0.01;
/// A bound on the nodes weighed: the odds cost grows with their square.
const MOST_WEIGHED: usize = 256;

/// The predicted landing of `pod` without the webhook's terms: nodes with probabilities
/// summing to 1, most likely first; empty when no node fits.
pub(crate) fn unsteered_landing(
    pod: &PodDemand<'_>,
    view: &ClusterView,
    world: &World,
    scheduler: &SchedulerConfig,
) -> Vec<(String, f64)> {
    let inflight = InFlight::new(world, view);
    let mut scored: Vec<(i64, usize)> = eligible_nodes(&pod.constraints, view)
        .iter()
        .map(|&i| i as usize)
        .filter_map(|i| {
            let node = &view.nodes[i];
            let (bound, extra) = (inflight.bound(i, node), inflight.extra(i, node));
            fits_with(node, bound, extra, &pod.facts).then(|| {
                let model = model_node_with(node, bound, extra);
                (resource_score(&pod.facts, &model, scheduler), i)
            })
        })
        .collect();
    if scored.is_empty() {
        return Vec::new();
    }
    let feasible = scored.len() + view.nodes_without_metrics;
    let wanted = nodes_to_score(view, scheduler);
    let fraction = (wanted as f64 / feasible as f64).min(1.0);
    let weighed = tier_size_for_sample(fraction, MISSED_RUNS, WEIGHED).min(MOST_WEIGHED);
    // Best score first; equal scores in view order, so the answer is the same every time.
    let best_first = |a: &(i64, usize), b: &(i64, usize)| b.0.cmp(&a.0).then(a.1.cmp(&b.1));
    if scored.len() > weighed {
        scored.select_nth_unstable_by(weighed - 1, best_first);
        scored.truncate(weighed);
    }
    scored.sort_by(best_first);

    let positions = order_positions(view, scheduler.listed_node_order);
    let named: Vec<Named> = scored
        .iter()
        .map(|&(score, i)| Named {
            position: positions.of(i),
            weight: 0,
            score,
            available: 1.0,
        })
        .collect();
    let window = Window::new(view.nodes.len(), wanted, feasible);
    let odds = landing_odds(window, scheduler.weights.node_affinity, &named);
    landing_shares(view, scored.iter().map(|&(_, i)| i), odds)
}
