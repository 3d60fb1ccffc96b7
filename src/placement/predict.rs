//! Where a pod lands among the nodes a decision names, as the scheduler's sampling and
//! resource scores will choose: the odds the pod is charged by.

use crate::placement::context::DecisionCtx;
use crate::placement::landing::{
    Coverage, Named, Window, landing_odds, landing_shares, order_positions,
};
use crate::placement::rank::standing::{Candidate, fill_risk, model_node_with};
use crate::scheduler::cycle::resource_score;

/// Where the pod lands among the named nodes (each with the weight of the terms it matches):
/// the NodeAffinity points their weights bring and the resource scores decide among those in
/// the sample (see `landing`).
/// Tier 1 takes the pod unless the room the pods ahead of this one may take there, or a run it
/// does not cover (`coverage`, tier 1's), passes it on: then the later tiers' nodes that can
/// take it are counted too.
pub(super) fn predict_landing(
    ctx: &DecisionCtx<'_>,
    tiers: &[Vec<(Candidate, i64)>],
    window: Window,
    coverage: Coverage,
) -> Vec<(String, f64)> {
    let DecisionCtx {
        pod,
        view,
        scheduler,
        inflight,
        ..
    } = *ctx;
    let positions = order_positions(view, scheduler.listed_node_order);
    let named_at = |i: usize, weight: i64| {
        let node = &view.nodes[i];
        let (bound, extra) = (inflight.bound(i, node), inflight.extra(i, node));
        let model = model_node_with(node, bound, extra);
        Named {
            position: positions.of(i),
            weight,
            score: resource_score(&pod.facts, &model, scheduler),
            available: 1.0 - fill_risk(node, bound, extra, &pod.facts),
        }
    };
    let Some(first) = tiers.first().filter(|t| !t.is_empty()) else {
        return Vec::new();
    };
    let mut nodes: Vec<usize> = first.iter().map(|(c, _)| c.index).collect();
    // `coverage` already holds tier 1: adding its nodes again would count those without a
    // known place twice.
    let mut named: Vec<Named> = first.iter().map(|&(c, w)| named_at(c.index, w)).collect();
    let may_fill = named.iter().any(|t| t.available < 1.0);
    if may_fill || !coverage.complete() {
        // With every tier-1 node sure to have room, a later node only takes the runs that
        // hold no tier-1 node.
        for &(c, weight) in tiers.iter().skip(1).flatten() {
            if may_fill || coverage.adds(positions.of(c.index)) {
                nodes.push(c.index);
                named.push(named_at(c.index, weight));
            }
        }
    }
    let odds = landing_odds(window, scheduler.weights.node_affinity, &named);
    landing_shares(view, nodes, odds)
}
