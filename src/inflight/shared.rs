//! The world (charges and cluster picture) as the reviews, the watches and the refresher share it.
//!
//! Reviews decide under a read lock, side by side, and take the write lock only to charge.
//! Every write is counted, so a review can tell whether the world changed while it decided
//! (and decide again rather than charge a decision that did not see another pod's charge).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use super::world::World;

#[derive(Debug)]
pub struct SharedWorld {
    world: RwLock<World>,
    writes: AtomicU64,
    /// The view [`Self::align_to`] last left the world aligned with (0: none): read without
    /// the lock, so that a review on the same view does not queue behind a deciding writer
    /// just to learn that nothing is to be done.
    aligned_view: AtomicU64,
}

impl SharedWorld {
    pub fn new(world: World) -> Self {
        SharedWorld {
            world: RwLock::new(world),
            writes: AtomicU64::new(0),
            aligned_view: AtomicU64::new(0),
        }
    }

    /// Shared access. A panic while writing leaves plain numbers behind: they are still used.
    pub fn read(&self) -> RwLockReadGuard<'_, World> {
        self.world.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Exclusive access, counted as a write.
    pub(crate) fn write(&self) -> RwLockWriteGuard<'_, World> {
        let guard = self.world.write().unwrap_or_else(|e| e.into_inner());
        self.writes.fetch_add(1, Ordering::AcqRel);
        guard
    }

    /// Exclusive access if no write happened since [`Self::writes`] said `seen`; else the
    /// number of writes now. Held or not, the lock is taken once.
    pub(crate) fn write_if_unchanged(&self, seen: u64) -> Result<RwLockWriteGuard<'_, World>, u64> {
        let guard = self.world.write().unwrap_or_else(|e| e.into_inner());
        // Writes are counted under the write lock, so this is exact.
        let now = self.writes.load(Ordering::Acquire);
        if now != seen {
            return Err(now);
        }
        self.writes.fetch_add(1, Ordering::AcqRel);
        Ok(guard)
    }

    /// Aligns the world with the view `view_id` (by `align`) unless it is already. Once the
    /// world is aligned with a view, reviews on that view pass with one atomic read. Reviews
    /// racing across a view change may leave the mark on the other view: the next review on
    /// the current one looks again under the lock and puts it right.
    pub(crate) fn align_to(&self, view_id: u64, align: impl FnOnce(&mut World)) {
        if view_id != 0 && self.aligned_view.load(Ordering::Acquire) == view_id {
            return;
        }
        if !self.read().is_aligned(view_id) {
            let mut world = self.write();
            if !world.is_aligned(view_id) {
                align(&mut world);
            }
        }
        self.aligned_view.store(view_id, Ordering::Release);
    }

    /// Writes so far; read it under [`Self::read`] to know what that read saw.
    pub(crate) fn writes(&self) -> u64 {
        self.writes.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inflight::ledger::Ledger;
    use std::time::Duration;

    #[test]
    fn a_write_in_between_is_seen() {
        let shared = SharedWorld::new(World::new(Ledger::new(Duration::from_secs(60))));
        let seen = {
            let _read = shared.read();
            shared.writes()
        };
        assert!(shared.write_if_unchanged(seen).is_ok());
        let stale = seen;
        assert_eq!(shared.write_if_unchanged(stale).err(), Some(seen + 1));
        let now = shared.writes();
        drop(shared.write());
        assert!(shared.write_if_unchanged(now).is_err());
        assert!(shared.write_if_unchanged(now + 1).is_ok());
    }

    #[test]
    fn alignment_is_checked_under_the_lock_once_per_view() {
        let shared = SharedWorld::new(World::new(Ledger::new(Duration::from_secs(60))));
        let mut aligned = 0;
        let mut align = |view: u64| {
            shared.align_to(view, |l| {
                aligned += 1;
                l.align(view, ["a", "b"].into_iter());
            })
        };
        align(7);
        align(7);
        align(8);
        align(7);
        assert_eq!(aligned, 3, "each change of view aligns, a repeat does not");
        assert!(shared.read().is_aligned(7));
        // Aligned behind the mark's back (another view in between): looked at again.
        shared.write().align(9, ["a"].into_iter());
        let before = shared.writes();
        shared.align_to(9, |_| panic!("aligned already"));
        assert_eq!(shared.writes(), before, "nothing written");
        shared.align_to(7, |l| l.align(7, ["a", "b"].into_iter()));
        assert!(shared.read().is_aligned(7));
    }
}
