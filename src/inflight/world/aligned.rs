//! The world read by position in one cluster view: which node of the view each ledger and
//! occupancy number is, and the changes since a reader's mark, so that per-view indexes follow
//! the charges and the bound pods without walking every node.

use std::sync::Arc;

use super::World;
use crate::cluster::changes::LogPosition;
use crate::cluster::occupancy::NodeRequests;
use crate::inflight::ledger::NodeExtra;
use crate::scheduler::pods::PodGroup;

#[derive(Debug, Clone, Default)]
pub(super) struct Alignment {
    pub(super) view_id: u64,
    /// (ledger number, occupancy number) for each view position.
    pub(super) numbers: Vec<(u32, u32)>,
    /// View position by ledger number and by occupancy number (`u32::MAX`: not in the view).
    pub(super) by_ledger_number: Vec<u32>,
    pub(super) by_occupancy_number: Vec<u32>,
    /// The ledger numbers below `by_ledger_number.len()` not in the view.
    pub(super) outside: Vec<u32>,
}

/// How far a reader has followed the group changes (pods gained and lost by each group, bound
/// and pending) of one world aligned with one view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct GroupMark {
    view_id: u64,
    bound: LogPosition,
    pending: LogPosition,
    namespaces: u64,
}

/// How far a reader has followed the changes of one world aligned with one view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct ChangeMark {
    view_id: u64,
    ledger: LogPosition,
    occupancy: LogPosition,
}

impl World {
    /// Pods charged and not yet bound, with their labels, group by group: each group with its
    /// pods counted at the position (in the aligned view) where they most likely land, which is
    /// where the plugins that count pods will find them.
    pub(crate) fn pending_by_group(
        &self,
    ) -> impl Iterator<Item = (&Arc<PodGroup>, impl Iterator<Item = (usize, u32)> + '_)> {
        let positions = &self.aligned.by_ledger_number;
        self.charges
            .pending_tally()
            .groups
            .values()
            .map(move |tally| {
                let placed = (tally.on_node.iter())
                    .filter_map(move |(&node, &count)| Some((in_view(positions, node)?, count)));
                (&tally.group, placed)
            })
    }

    /// How many pods [`Self::pending_by_group`] counts in the groups `keep` selects: each
    /// group's total less its pods on nodes outside the view (few or none), so a decision does
    /// not walk every node a burst's pods are counted on.
    pub(crate) fn pending_pods(&self, keep: impl Fn(&PodGroup) -> bool) -> usize {
        let aligned = &self.aligned;
        // Ledger numbers given since the alignment (nodes named by other replicas' notes).
        let later = aligned.by_ledger_number.len()..self.charges.numbered_nodes();
        let outside =
            (aligned.outside.iter().copied()).chain(later.filter_map(|n| u32::try_from(n).ok()));
        (self.charges.pending_tally().groups.values())
            .filter(|tally| keep(&tally.group))
            .map(|tally| {
                let away: u32 = (outside.clone())
                    .filter_map(|n| tally.on_node.get(&n))
                    .sum();
                (tally.pods - away) as usize
            })
            .sum()
    }

    /// The position in the aligned view of the node the occupancy numbers `number`.
    pub(crate) fn position_of_occupancy_number(&self, number: u32) -> Option<usize> {
        in_view(&self.aligned.by_occupancy_number, number)
    }

    /// [`Self::bound_at`]. Once per view: a no-op while the view stays the same.
    pub fn align<'a>(&mut self, view_id: u64, names: impl Iterator<Item = &'a str>) {
        if self.is_aligned(view_id) {
            return;
        }
        let numbers: Vec<(u32, u32)> = names
            .map(|name| {
                let number = self.charges.node_id(name);
                (number, self.cluster.occupancy.number(name))
            })
            .collect();
        let reverse = |numbers: &mut dyn Iterator<Item = u32>| {
            let mut by_number = Vec::new();
            for (position, number) in numbers.enumerate() {
                let number = number as usize;
                if by_number.len() <= number {
                    by_number.resize(number + 1, u32::MAX);
                }
                by_number[number] = u32::try_from(position).unwrap_or(u32::MAX);
            }
            by_number
        };
        let by_ledger_number = reverse(&mut numbers.iter().map(|n| n.0));
        let outside = (0..)
            .zip(&by_ledger_number)
            .filter(|&(_, &position)| position == u32::MAX)
            .map(|(number, _)| number)
            .collect();
        self.aligned = Alignment {
            view_id,
            by_ledger_number,
            by_occupancy_number: reverse(&mut numbers.iter().map(|n| n.1)),
            outside,
            numbers,
        };
    }

    /// Where the group change logs are now, for [`Self::group_changes_since`].
    pub(crate) fn group_mark(&self) -> GroupMark {
        GroupMark {
            view_id: self.aligned.view_id,
            bound: self.cluster.groups.changes().position(),
            pending: self.charges.pending_tally().changes.position(),
            namespaces: self.cluster.namespace_version(),
        }
    }

    /// The pods each group gained and lost since `mark`, at positions in the aligned view:
    /// (group, position, pods). `None` when that cannot be told: `mark` is from another view,
    /// ledger or namespace list, or further back than the logs remember.
    pub(crate) fn group_changes_since(
        &self,
        mark: GroupMark,
    ) -> Option<impl Iterator<Item = (Arc<PodGroup>, usize, i64)> + '_> {
        if mark.view_id != self.aligned.view_id
            || !self.is_aligned(mark.view_id)
            || mark.namespaces != self.cluster.namespace_version()
        {
            return None;
        }
        let bound = self.cluster.groups.changes().since(mark.bound)?;
        let pending = self.charges.pending_tally().changes.since(mark.pending)?;
        let bound = bound.filter_map(move |c| {
            let position = in_view(&self.aligned.by_occupancy_number, c.node)?;
            Some((c.group, position, i64::from(c.delta)))
        });
        let pending = pending.filter_map(move |c| {
            let position = in_view(&self.aligned.by_ledger_number, c.node)?;
            Some((c.group, position, i64::from(c.delta)))
        });
        Some(bound.chain(pending))
    }

    /// Where the change logs are now, for [`Self::changed_positions`].
    pub(crate) fn change_mark(&self) -> ChangeMark {
        ChangeMark {
            view_id: self.aligned.view_id,
            ledger: self.charges.changes().position(),
            occupancy: self.cluster.occupancy.changes().position(),
        }
    }

    /// Positions in the aligned view of the nodes whose in-flight load or bound requests
    /// changed since `mark` (maybe repeated); `None` when that cannot be told: `mark` is from
    /// another view or ledger, or further back than the logs remember.
    pub(crate) fn changed_positions(&self, mark: ChangeMark) -> Option<Vec<usize>> {
        if mark.view_id != self.aligned.view_id || !self.is_aligned(mark.view_id) {
            return None;
        }
        let mut positions: Vec<usize> = (self.charges.changes())
            .since(mark.ledger)?
            .filter_map(|n| in_view(&self.aligned.by_ledger_number, n))
            .collect();
        positions.extend(
            self.cluster
                .occupancy
                .changes()
                .since(mark.occupancy)?
                .filter_map(|n| in_view(&self.aligned.by_occupancy_number, n)),
        );
        Some(positions)
    }

    /// Whether [`Self::align`] was last called for the view `view_id` (never for id 0).
    pub(crate) fn is_aligned(&self, view_id: u64) -> bool {
        view_id != 0 && self.aligned.view_id == view_id
    }

    /// [`Self::extra`] of the node at `position` in the aligned view.
    pub(crate) fn extra_at(&self, position: usize) -> Option<NodeExtra> {
        let (number, _) = *self.aligned.numbers.get(position)?;
        self.charges.extra_by_number(number)
    }

    /// The occupancy's bound requests of the node at `position` in the aligned view.
    pub(crate) fn bound_at(&self, position: usize) -> Option<&NodeRequests> {
        let (_, number) = *self.aligned.numbers.get(position)?;
        self.cluster.occupancy.at(number)
    }
}

/// The view position `by_number` (an [`Alignment`] map) gives the node numbered `number`, if it
/// is in the view.
pub(super) fn in_view(by_number: &[u32], number: u32) -> Option<usize> {
    by_number
        .get(number as usize)
        .filter(|&&p| p != u32::MAX)
        .map(|&p| p as usize)
}
