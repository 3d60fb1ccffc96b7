//! Where the scheduler puts a pod among the nodes its tier 1 names.
//!
//! Above 100 nodes the scheduler scores a sample: a contiguous run of its node order (see
//! `scheduler::order`) from a rotating start, long enough to hold `numFeasibleNodesToFind`
//! feasible nodes. The start is unknown, so it is taken as uniform over the order; a pod
//! lands on the best-scored tier-1 node inside its run. A tier-1 node that sits alone in its
//! stretch of the order takes every pod whose run covers that stretch, which independent
//! sampling odds would badly under-count; this model counts it exactly (up to the density of
//! infeasible nodes, taken as even). A node the scheduler listed at its start has no place
//! anyone outside knows (`order`): it is in a run by the sample's odds, independently of the
//! others, and enough of them cover every run but for `placement.sample_miss` odds
//! (`coverage`); among the nodes in a run, NodeAffinity's normalised points and the resource
//! scores decide (`odds`).

mod coverage;
mod odds;
mod order;

pub(crate) use coverage::{Coverage, tier_size_for_sample};
pub(crate) use odds::Named;
pub(crate) use odds::landing_odds;
pub use order::{Positions, order_positions};

use crate::view::ClusterView;

/// The sample as a run of the order: `len` consecutive positions of `n`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Window {
    pub(crate) n: usize,
    pub(crate) len: usize,
}

impl Window {
    /// A run that holds `wanted` of `feasible` feasible nodes, over `n` positions.
    pub(crate) fn new(n: usize, wanted: usize, feasible: usize) -> Self {
        let len = if feasible == 0 || wanted >= feasible {
            n
        } else {
            (wanted as f64 * n as f64 / feasible as f64).ceil() as usize
        };
        Window {
            n,
            len: len.clamp(1.min(n), n),
        }
    }

    /// Every position is in every sample.
    pub(crate) fn whole(&self) -> bool {
        self.len >= self.n
    }

    /// The run from `start` holds `position`.
    #[cfg(test)]
    fn holds(&self, start: usize, position: usize) -> bool {
        (position + self.n - start) % self.n < self.len
    }
}

/// The landing as a decision charges it and the annotation carries it: the nodes (positions in
/// `view`) with their `odds`, most likely first, the least likely dropped as long as together
/// they hold at most 1% of the total (they only lengthen the annotation), the rest scaled to
/// sum to one. Empty when no node has odds. Odds spread thin over many nodes are kept: dropping
/// each share under 1% would drop every one of a hundred equal shares.
pub(crate) fn landing_shares(
    view: &ClusterView,
    nodes: impl IntoIterator<Item = usize>,
    odds: Vec<f64>,
) -> Vec<(String, f64)> {
    let mut landing: Vec<(String, f64)> = nodes
        .into_iter()
        .zip(odds)
        .filter(|(_, p)| *p > 0.0)
        .map(|(i, p)| (view.nodes[i].name.clone(), p))
        .collect();
    landing.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    keep_likely(&mut landing);
    landing
}

/// Of `shares`, most likely first: drops the least likely while together they hold at most 1%
/// of the total, and scales the rest to sum to 1.
fn keep_likely<T>(shares: &mut Vec<(T, f64)>) {
    let total: f64 = shares.iter().map(|(_, p)| p).sum();
    let mut dropped = 0.0;
    while shares.len() > 1
        && let Some(&(_, p)) = shares.last()
        && dropped + p <= 0.01 * total
    {
        dropped += p;
        shares.pop();
    }
    let kept: f64 = shares.iter().map(|(_, p)| p).sum();
    for (_, p) in shares.iter_mut() {
        *p /= kept;
    }
}

/// What the tests of the submodules share.
#[cfg(test)]
mod testing {
    /// A seeded stream of draws below a bound (a fixed LCG: the same cases every run).
    pub(super) fn draws(mut seed: u64) -> impl FnMut(usize) -> usize {
        move |below: usize| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((seed >> 33) as usize) % below.max(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn odds_spread_thin_are_kept_and_only_a_small_tail_is_dropped() {
        // 139 equal shares of 0.7%: one is dropped (two would hold 1.4%), not all of them.
        let mut thin: Vec<(usize, f64)> = (0..139).map(|k| (k, 1.0 / 139.0)).collect();
        keep_likely(&mut thin);
        assert_eq!(thin.len(), 138);
        assert!((thin.iter().map(|(_, p)| p).sum::<f64>() - 1.0).abs() < 1e-9);
        // A tail holding 0.9% in all goes, the rest is scaled up.
        let mut tail = vec![(0, 0.6), (1, 0.391), (2, 0.005), (3, 0.004)];
        keep_likely(&mut tail);
        assert_eq!(tail.iter().map(|(k, _)| *k).collect::<Vec<_>>(), vec![0, 1]);
        assert!((tail[0].1 - 0.6 / 0.991).abs() < 1e-9);
        // One share is kept whatever its size.
        let mut one = vec![(7, 0.001)];
        keep_likely(&mut one);
        assert_eq!(one, vec![(7, 1.0)]);
    }

    #[test]
    fn window_spans_the_share_of_the_order_that_holds_the_wanted_feasible_nodes() {
        assert_eq!(Window::new(5000, 500, 5000).len, 500);
        assert_eq!(Window::new(5000, 500, 2500).len, 1000);
        assert!(Window::new(80, 100, 80).whole());
    }
}
