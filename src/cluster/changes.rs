//! What changed lately (which nodes, or which group gained or lost a pod where), so that what is
//! derived from all of it (a ranking of the nodes for one pod shape, InterPodAffinity's sums for
//! one kind of pod) can catch up by reading the changes only.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};

/// Changes remembered; a reader further behind than this starts over from every node. A charge
/// touches ~50 nodes, so this is ~80 charges.
pub(crate) const CAPACITY: usize = 4096;

static NEXT_INSTANCE: AtomicU64 = AtomicU64::new(1);

/// The changes (by default node numbers), in order, the last [`CAPACITY`] of them.
#[derive(Debug)]
pub(crate) struct ChangeLog<T = u32> {
    /// Unique per log, and new for a clone: a reader's position in one log means nothing in
    /// another, even one that started as a copy.
    instance: u64,
    /// Changes recorded so far.
    head: u64,
    recent: VecDeque<T>,
}

/// A reader's position: the log it read and how far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct LogPosition {
    instance: u64,
    head: u64,
}

impl<T> Default for ChangeLog<T> {
    fn default() -> Self {
        ChangeLog {
            instance: NEXT_INSTANCE.fetch_add(1, Ordering::Relaxed),
            head: 0,
            recent: VecDeque::new(),
        }
    }
}

impl<T: Clone> Clone for ChangeLog<T> {
    fn clone(&self) -> Self {
        ChangeLog {
            recent: self.recent.clone(),
            head: self.head,
            ..ChangeLog::default()
        }
    }
}

impl<T: Clone> ChangeLog<T> {
    pub(crate) fn record(&mut self, number: T) {
        if self.recent.len() == CAPACITY {
            self.recent.pop_front();
        }
        self.recent.push_back(number);
        self.head += 1;
    }

    /// Where the log is now.
    pub(crate) fn position(&self) -> LogPosition {
        LogPosition {
            instance: self.instance,
            head: self.head,
        }
    }

    /// The changes since `seen` (oldest first, maybe repeated), or `None` when `seen` is from
    /// another log or further back than the log remembers.
    pub(crate) fn since(&self, seen: LogPosition) -> Option<impl Iterator<Item = T> + '_> {
        if seen.instance != self.instance || seen.head > self.head {
            return None;
        }
        let behind = usize::try_from(self.head - seen.head).ok()?;
        let skip = self.recent.len().checked_sub(behind)?;
        Some(self.recent.iter().skip(skip).cloned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reader_catches_up_from_its_position_until_the_log_forgets() {
        let mut log = ChangeLog::default();
        log.record(7);
        let seen = log.position();
        log.record(3);
        log.record(7);
        let changed: Vec<u32> = log.since(seen).into_iter().flatten().collect();
        assert_eq!(changed, vec![3, 7]);
        assert_eq!(log.since(log.position()).map(|c| c.count()), Some(0));

        let copy = log.clone();
        assert!(copy.since(seen).is_none(), "a copy is another log");

        for n in 0..CAPACITY as u32 {
            log.record(n);
        }
        assert!(log.since(seen).is_none(), "too far behind");
        let recent = log.position();
        log.record(1);
        assert_eq!(
            log.since(recent).map(|c| c.collect::<Vec<_>>()),
            Some(vec![1])
        );
    }
}
