//! Per-node numbers computed once per view and shared by every review that reads it.
//!
//! A burst is hundreds of pods of a few shapes (one per Flink job): which nodes a shape's
//! filters allow does not change until the view does, so it is worked out once per shape.
//! Likewise each node's tie-breaking rank.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::config::scheduler::ListedNodeOrder;
use crate::hashing::HashMap;

/// Distinct keys kept per view; past it, lists are computed and not kept (a namespace of
/// one-off pod shapes must not grow memory).
pub(crate) const CAPACITY: usize = 256;

static NEXT_VIEW_ID: AtomicU64 = AtomicU64::new(1);

/// A process-unique view id (0 is the default, never built, view).
pub(crate) fn next_view_id() -> u64 {
    NEXT_VIEW_ID.fetch_add(1, Ordering::Relaxed)
}

/// What a memoised list was computed from.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum MemoKey {
    /// The nodes a pod's own filters allow; what the filters read, written out.
    Eligible(String),
    /// Each node's place in the scheduler's order, the listed nodes taken as this says.
    Positions(ListedNodeOrder),
    /// Each node's domain under this topology key, numbered.
    Domains(String),
    /// Each node: 1 when the replica set with this key's member owns it.
    Owned(u64),
    /// Each node's place among near-ties under this salt.
    Ties(u64),
    /// Each node's place in name order.
    NameRanks,
    /// Each node: 1 when its value of this label is its name.
    LabelIsName(String),
}

/// Lists of `u32` (node positions, or one number per node), by what they were computed from.
#[derive(Default)]
pub(crate) struct NodeListMemo {
    lists: Mutex<HashMap<MemoKey, Arc<[u32]>>>,
}

impl NodeListMemo {
    /// The list for `key`, computed by `compute` the first time only.
    pub(crate) fn get_or_compute(
        &self,
        key: MemoKey,
        compute: impl FnOnce() -> Vec<u32>,
    ) -> Arc<[u32]> {
        if let Some(list) = self.lock().get(&key) {
            return list.clone();
        }
        // Computed outside the lock: two reviews of a new shape may both compute it, and
        // neither waits for the other.
        let list: Arc<[u32]> = compute().into();
        let mut lists = self.lock();
        if lists.len() < CAPACITY {
            lists.entry(key).or_insert_with(|| list.clone());
        }
        list
    }

    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<MemoKey, Arc<[u32]>>> {
        // Only whole lists are inserted: a panic elsewhere leaves nothing half-written.
        self.lists.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl std::fmt::Debug for NodeListMemo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeListMemo")
            .field("lists", &self.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn computes_once_per_key_and_stops_keeping_at_capacity() {
        let memo = NodeListMemo::default();
        let calls = std::cell::Cell::new(0);
        let compute = || {
            calls.set(calls.get() + 1);
            vec![1, 2]
        };
        assert_eq!(
            &*memo.get_or_compute(MemoKey::Domains("a".into()), compute),
            &[1, 2]
        );
        assert_eq!(
            &*memo.get_or_compute(MemoKey::Domains("a".into()), compute),
            &[1, 2]
        );
        assert_eq!(calls.get(), 1);
        for i in 0..CAPACITY + 10 {
            memo.get_or_compute(MemoKey::Ties(i as u64), Vec::new);
        }
        assert_eq!(memo.len(), CAPACITY);
        memo.get_or_compute(MemoKey::NameRanks, compute);
        memo.get_or_compute(MemoKey::NameRanks, compute);
        assert_eq!(calls.get(), 3, "a key past capacity is computed every time");
    }
}
