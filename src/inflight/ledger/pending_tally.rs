//! Pods steered and not yet bound, counted by group on the node each most likely lands on:
//! where the scheduler plugins that count pods will find them.

use std::sync::Arc;

use crate::cluster::changes::ChangeLog;
use crate::cluster::pod_groups::GroupChange;
use crate::hashing::HashMap;
use crate::scheduler::pods::PodGroup;

/// Pending pods with a group, by group (its address): the group and its pods counted by the
/// node (ledger number) they most likely land on; and each count's change, for readers that
/// keep sums over them.
#[derive(Debug, Clone, Default)]
pub(in crate::inflight) struct PendingTally {
    pub(in crate::inflight) groups: HashMap<usize, GroupTally>,
    pub(in crate::inflight) changes: ChangeLog<GroupChange>,
}

/// One group's pending pods: on each node (ledger number), and in all.
#[derive(Debug, Clone)]
pub(in crate::inflight) struct GroupTally {
    pub(in crate::inflight) group: Arc<PodGroup>,
    pub(in crate::inflight) on_node: HashMap<u32, u32>,
    /// The sum of `on_node`: read once per decision, which should not walk every node.
    pub(in crate::inflight) pods: u32,
}

impl PendingTally {
    /// One pod of `group` more (`add`) or less on the node numbered `node`.
    pub(super) fn count(&mut self, group: &Arc<PodGroup>, node: u32, add: bool) {
        let key = Arc::as_ptr(group) as usize;
        if add {
            let tally = self.groups.entry(key).or_insert_with(|| GroupTally {
                group: group.clone(),
                on_node: HashMap::default(),
                pods: 0,
            });
            *tally.on_node.entry(node).or_insert(0) += 1;
            tally.pods += 1;
            self.record(group, node, 1);
            return;
        }
        let Some(tally) = self.groups.get_mut(&key) else {
            return;
        };
        let mut counted = false;
        if let Some(count) = tally.on_node.get_mut(&node) {
            *count -= 1;
            if *count == 0 {
                tally.on_node.remove(&node);
            }
            tally.pods -= 1;
            counted = true;
        }
        if tally.on_node.is_empty() {
            self.groups.remove(&key);
        }
        if counted {
            self.record(group, node, -1);
        }
    }

    fn record(&mut self, group: &Arc<PodGroup>, node: u32, delta: i32) {
        self.changes.record(GroupChange {
            group: group.clone(),
            node,
            delta,
        });
    }
}
