//! The reference ranking: every eligible node assessed for one pod, in one pass. The rank
//! index (`rank_index`) keeps the same answer up to date across decisions; this walk is what
//! it is held to, and what pods whose eligible nodes change with every decision use.

use crate::placement::context::{DecisionCtx, InFlight, PodDemand};
use crate::placement::landing::{Coverage, Positions};
use crate::placement::rank::standing::{
    Candidate, Ranking, Standing, cover_in_order, fits_with, standing,
};
use crate::placement::replicas::replica::Partition;
use crate::view::ClusterView;

/// Every eligible node assessed once.
pub(in crate::placement) struct Walk<'v> {
    view: &'v ClusterView,
    pub(in crate::placement) candidates: Vec<Candidate>,
    hot: Vec<(f64, usize)>,
    hot_candidates: Vec<Candidate>,
    pub(in crate::placement) feasible: usize,
}

impl<'v> Walk<'v> {
    pub(in crate::placement) fn new(
        ctx: &DecisionCtx<'v>,
        eligible: &[u32],
        ties: &[u32],
        partition: Option<&Partition>,
    ) -> Self {
        let DecisionCtx {
            pod: _,
            view,
            policy: _,
            inflight: _,
            ..
        } = *ctx;
        let mut walk = Walk {
            view,
            candidates: Vec::with_capacity(eligible.len()),
            hot: Vec::new(),
            hot_candidates: Vec::new(),
            feasible: 0,
        };
        for index in eligible.iter().map(|&i| i as usize) {
            let candidate = |heat| Candidate {
                index,
                heat,
                tie: ties[index],
            };
            match standing(ctx, index, partition) {
                Standing::Full => continue,
                Standing::Hot { heat, pod } => {
                    walk.hot.push((heat, index));
                    walk.hot_candidates.push(candidate(pod));
                }
                Standing::Cool(heat) => walk.candidates.push(candidate(heat)),
            }
            walk.feasible += 1;
        }
        walk
    }
}

/// How many of `nodes` the pod's requests fit on: the scheduler's feasible nodes.
pub(in crate::placement) fn count_feasible(
    nodes: &[u32],
    view: &ClusterView,
    inflight: InFlight<'_>,
    pod: &PodDemand<'_>,
) -> usize {
    nodes
        .iter()
        .map(|&i| i as usize)
        .filter(|&index| {
            let node = &view.nodes[index];
            fits_with(
                node,
                inflight.bound(index, node),
                inflight.extra(index, node),
                &pod.facts,
            )
        })
        .count()
}

/// The first `used` of `candidates` in naming order: those `is_tied` first in tie order, then
/// the rest in order.
fn first_named(
    mut candidates: Vec<Candidate>,
    used: usize,
    is_tied: &dyn Fn(&Candidate) -> bool,
) -> Vec<Candidate> {
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

impl Ranking for Walk<'_> {
    fn feasible(&self) -> usize {
        self.feasible
    }

    fn best(&self) -> Option<Candidate> {
        self.candidates.iter().min_by(|a, b| a.order(b)).copied()
    }

    fn any_cool(&self) -> bool {
        !self.candidates.is_empty()
    }

    fn named(&mut self, used: usize, is_tied: &dyn Fn(&Candidate) -> bool) -> Vec<Candidate> {
        first_named(self.candidates.clone(), used, is_tied)
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

    fn least_bad(&mut self, max: usize) -> Vec<Candidate> {
        first_named(self.hot_candidates.clone(), max, &|_| false)
    }

    fn cover(
        &mut self,
        hot: bool,
        coverage: &mut Coverage,
        positions: &Positions,
        taken: &dyn Fn(usize) -> bool,
    ) -> Vec<Candidate> {
        let list = if hot {
            &mut self.hot_candidates
        } else {
            &mut self.candidates
        };
        list.sort_by(Candidate::order);
        cover_in_order(list.iter().copied(), coverage, positions, taken)
    }
}
