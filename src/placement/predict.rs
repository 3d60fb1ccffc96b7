//! Where a pod lands among the nodes a decision names, as the scheduler's sampling and
//! resource scores will choose: the odds the pod is charged by.

use super::context::DecisionCtx;
use super::landing::{Coverage, Named, Window, landing_odds, landing_shares, order_positions};
use super::standing::{Candidate, fill_risk, model_node_with};
use crate::scheduler::cycle::resource_score;

/// Where the pod lands among the named nodes: the scheduler gives each tier's nodes equal
/// affinity, so the resource scores decide among a tier's nodes in its sample (see `landing`).
/// Tier 1 takes the pod unless the room the pods ahead of this one may take there, or a run it
/// does not cover (`coverage`, tier 1's), passes it on: then the later tiers' nodes that can
/// take it are counted too.
pub(super) fn predict_landing(
    ctx: &DecisionCtx<'_>,
    tiers: &[Vec<Candidate>],
    window: Window,
    mut coverage: Coverage,
) -> Vec<(String, f64)> {
    let DecisionCtx {
        pod,
        view,
        scheduler,
        inflight,
        ..
    } = *ctx;
    let positions = order_positions(view, scheduler.listed_node_order);
    let named_at = |i: usize, level: usize| {
        let node = &view.nodes[i];
        let (bound, extra) = (inflight.bound(i, node), inflight.extra(i, node));
        let model = model_node_with(node, bound, extra);
        Named {
            position: positions.of(i),
            level: u8::try_from(level).unwrap_or(u8::MAX),
            score: resource_score(&pod.facts, &model, scheduler),
            available: 1.0 - fill_risk(node, bound, extra, &pod.facts),
        }
    };
    let Some(first) = tiers.first().filter(|t| !t.is_empty()) else {
        return Vec::new();
    };
    let mut nodes: Vec<usize> = first.iter().map(|c| c.index).collect();
    let mut named: Vec<Named> = nodes.iter().map(|&i| named_at(i, 0)).collect();
    for t in &named {
        coverage.add(t.position);
    }
    let may_fill = named.iter().any(|t| t.available < 1.0);
    if may_fill || !coverage.complete() {
        // With every tier-1 node sure to have room, a later node only takes the runs that
        // hold no tier-1 node.
        let later = tiers.iter().enumerate().skip(1);
        for (level, tier) in later {
            for c in tier {
                if may_fill || coverage.adds(positions.of(c.index)) {
                    nodes.push(c.index);
                    named.push(named_at(c.index, level));
                }
            }
        }
    }
    let odds = landing_odds(window, &named);
    landing_shares(view, nodes, odds)
}
