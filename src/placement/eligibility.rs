//! Which nodes one decision may name, worked out once for either ranking source (the walk, the
//! rank index): the pod's own filters, this replica's share, what the scores that count other
//! pods keep, and the job's own bounds.

use std::cell::OnceCell;
use std::sync::Arc;

use crate::config::PlacementConfig;
use crate::config::scheduler::SchedulerConfig;
use crate::placement::context::DecisionCtx;
use crate::placement::eligible::affinity_sums::AffinitySumsCache;
use crate::placement::eligible::constraints::{Ineligible, eligible_nodes};
use crate::placement::eligible::groups_around::Surroundings;
use crate::placement::eligible::per_job::within_bounds;
use crate::placement::eligible::pod_level::{Around, restrict};
use crate::placement::partition::partition_for;
use crate::placement::replicas::replica::{Partition, Replica};

/// Some nodes of the view, as the walk reads them (their positions) and as a rank index does
/// (a mark per view position, made when first asked for).
pub(super) struct Allowed {
    pub(super) positions: Arc<[u32]>,
    marks: OnceCell<Vec<bool>>,
}

impl Allowed {
    fn new(positions: impl Into<Arc<[u32]>>) -> Self {
        Allowed {
            positions: positions.into(),
            marks: OnceCell::new(),
        }
    }

    /// A mark for each of the view's `nodes` positions: allowed or not.
    pub(super) fn marks(&self, nodes: usize) -> &[bool] {
        self.marks.get_or_init(|| {
            let mut marks = vec![false; nodes];
            for &position in self.positions.iter() {
                if let Some(mark) = marks.get_mut(position as usize) {
                    *mark = true;
                }
            }
            marks
        })
    }
}

/// The nodes a decision may name, by view position.
pub(super) struct Eligibility {
    /// Those the pod's own filters pass.
    pub(super) node_eligible: Arc<[u32]>,
    /// This replica's share, when replicas partition the nodes.
    pub(super) partition: Option<Partition>,
    /// Those the scores that count other pods keep, when such scores apply.
    pub(super) kept: Option<Allowed>,
    /// Those the filters that count other pods pass, when such filters or scores apply: as
    /// feasible to the scheduler as the kept ones, so its sample is sized by all of them.
    pub(super) passing: Option<Arc<[u32]>>,
    /// Of the kept nodes, those within the job's own bounds, when it has any.
    pub(super) bounded: Option<Allowed>,
    /// The nodes of `node_eligible` the filters that count other pods refuse, and why, by
    /// position.
    refused: Vec<(u32, Ineligible)>,
}

impl Eligibility {
    /// Works it out for the pod of `ctx` as `replica` decides it. The scores that count
    /// other pods read the world's groups, or, with `sums`, InterPodAffinity's sums a rank
    /// index keeps across decisions.
    pub(super) fn of(
        ctx: &DecisionCtx<'_>,
        replica: &Replica,
        sums: Option<&AffinitySumsCache>,
    ) -> Eligibility {
        let DecisionCtx {
            pod,
            view,
            world,
            policy,
            scheduler,
            ..
        } = *ctx;
        let node_eligible = eligible_nodes(&pod.constraints, view);
        let partition = partition_for(ctx, replica, &node_eligible);
        let mirrored = partition.as_ref().map_or(&[][..], |p| &p.mirrored);
        let around = match sums {
            Some(sums) => Around::Kept { sums, mirrored },
            None => Around::Read { mirrored },
        };
        let at = Surroundings {
            facts: &pod.facts,
            view,
            world,
        };
        let restriction = restrict(at, &node_eligible, around, affinity_gap(policy, scheduler));
        let (kept, passing, refused) = restriction.map_or((None, None, Vec::new()), |r| {
            (Some(r.kept), Some(r.passing), r.refused)
        });
        let allowed = kept.as_deref().unwrap_or(&node_eligible);
        let bounded = within_bounds(allowed, &pod.facts, view, world, &policy.per_job);
        let (kept, bounded) = (kept.map(Allowed::new), bounded.map(Allowed::new));
        Eligibility {
            node_eligible,
            partition,
            kept,
            passing,
            bounded,
            refused,
        }
    }

    /// Why the filters that count other pods refuse the node at `position`, as this
    /// decision found (`Ok` for a node they pass or did not check).
    pub(super) fn refused(&self, position: usize) -> Result<(), Ineligible> {
        let found = (self.refused).binary_search_by_key(&position, |&(p, _)| p as usize);
        found.map_or(Ok(()), |k| Err(self.refused[k].1))
    }

    /// Every node that passes the filters, those the scores leave out included.
    pub(super) fn passing(&self) -> &Arc<[u32]> {
        self.passing.as_ref().unwrap_or(&self.node_eligible)
    }

    /// The scores that count other pods leave some of the nodes that pass the filters out.
    pub(super) fn narrowed(&self) -> bool {
        self.kept
            .as_ref()
            .is_some_and(|kept| kept.positions.len() < self.passing().len())
    }
}

/// The NodeAffinity points between a first-tier node and a node of the next tier (or an
/// unnamed one), as the scheduler weighs them when a first-tier node is in its sample.
fn affinity_gap(policy: &PlacementConfig, scheduler: &SchedulerConfig) -> i64 {
    let first = policy.tiers.first().map_or(0, |t| i64::from(t.weight));
    let next = policy.tiers.get(1).map_or(0, |t| i64::from(t.weight));
    if first <= 0 {
        return 0;
    }
    scheduler.weights.node_affinity * 100 * (first - next).max(0) / first
}
