//! Where a decision reads its rankings: walked over the eligible nodes, or read from the rank
//! index of the pod's shape. Either answers the same questions over the same nodes (the job's
//! bounds, the nodes the scores keep, every node that passes the filters), so `decide` runs
//! one pipeline over both.

use std::cell::OnceCell;
use std::sync::Arc;

use crate::placement::context::DecisionCtx;
use crate::placement::eligibility::{Allowed, Eligibility};
use crate::placement::rank::rank_index::{RankIndex, Restricted};
use crate::placement::rank::standing::{Ranking, tie_breakers};
use crate::placement::rank::walk::{Walk, count_feasible};
use crate::placement::replicas::replica::{Partition, Replica};
use crate::view::ClusterView;

/// Where a decision reads its rankings: a walk over the nodes, or a rank index.
pub(super) trait RankingSource {
    type Over<'s>: Ranking
    where
        Self: 's;
    /// The ranking of the nodes `allowed`, or of every node that passes the pod's filters.
    fn over<'s>(&'s self, allowed: Option<&'s Allowed>) -> Self::Over<'s>;
}

/// Rankings walked over the eligible nodes.
pub(super) struct Walks<'c, 'v> {
    ctx: &'c DecisionCtx<'v>,
    ties: Arc<[u32]>,
    partition: Option<&'c Partition>,
    passing: &'c [u32],
    /// Counted once, whichever of the walks reads it.
    feasible: OnceCell<usize>,
}

impl<'c, 'v> Walks<'c, 'v> {
    pub(super) fn new(
        ctx: &'c DecisionCtx<'v>,
        replica: &Replica,
        eligibility: &'c Eligibility,
    ) -> Self {
        Walks {
            ctx,
            ties: tie_breakers(ctx.view, replica.salt),
            partition: eligibility.partition.as_ref(),
            passing: eligibility.passing(),
            feasible: OnceCell::new(),
        }
    }
}

impl<'v> RankingSource for Walks<'_, 'v> {
    type Over<'s>
        = Walk<'v>
    where
        Self: 's;

    fn over<'s>(&'s self, allowed: Option<&'s Allowed>) -> Walk<'v> {
        let ctx = self.ctx;
        let eligible = allowed.map_or(self.passing, |a| &a.positions);
        let mut walk = Walk::new(ctx, eligible, &self.ties, self.partition);
        // The scheduler's sample is sized by every node that passes its filters.
        if eligible.len() < self.passing.len() {
            walk.feasible = *self
                .feasible
                .get_or_init(|| count_feasible(self.passing, ctx.view, ctx.inflight, ctx.pod));
        }
        walk
    }
}

/// Rankings read from the rank index of the pod's shape.
pub(super) struct Indexed<'i> {
    pub(super) index: &'i RankIndex,
    pub(super) view: &'i ClusterView,
}

impl RankingSource for Indexed<'_> {
    type Over<'s>
        = Restricted<'s>
    where
        Self: 's;

    fn over<'s>(&'s self, allowed: Option<&'s Allowed>) -> Restricted<'s> {
        self.index
            .ranking(allowed.map(|a| a.marks(self.view.nodes.len())))
    }
}
