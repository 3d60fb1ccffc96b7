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
pub(super) struct PendingTally {
    pub(super) groups: HashMap<usize, (Arc<PodGroup>, HashMap<u32, u32>)>,
    pub(super) changes: ChangeLog<GroupChange>,
}

impl PendingTally {
    /// One pod of `group` more (`add`) or less on the node numbered `node`.
    pub(super) fn count(&mut self, group: &Arc<PodGroup>, node: u32, add: bool) {
        let key = Arc::as_ptr(group) as usize;
        if add {
            let (_, on_node) = self
                .groups
                .entry(key)
                .or_insert_with(|| (group.clone(), HashMap::default()));
            *on_node.entry(node).or_insert(0) += 1;
            self.record(group, node, 1);
            return;
        }
        let Some((_, on_node)) = self.groups.get_mut(&key) else {
            return;
        };
        let mut counted = false;
        if let Some(count) = on_node.get_mut(&node) {
            *count -= 1;
            if *count == 0 {
                on_node.remove(&node);
            }
            counted = true;
        }
        if on_node.is_empty() {
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
