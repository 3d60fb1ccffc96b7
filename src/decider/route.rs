//! Where a review's pod goes and how it is steered there.

use std::time::SystemTime;

use crate::config::{Mode, SchedulerConfig};
use crate::inventory::lease::Liveness;
use crate::placement::RankIndexes;

/// The configured mode and scheduler, or, while the scheduler that `spec.schedulerName` would
/// name has let its Lease lapse, affinity for the default scheduler (a pod routed to a
/// scheduler that is down would stay Pending with nobody to bind it).
pub(crate) struct Route<'a> {
    pub(crate) mode: Mode,
    pub(super) scheduler: &'a SchedulerConfig,
    pub(super) indexes: &'a RankIndexes,
    /// The routed scheduler's Lease at this review, when routing is gated on it.
    pub(super) lease: Option<Liveness>,
}

impl Route<'_> {
    /// Steered for the default scheduler because the routed one's Lease lapsed.
    pub(crate) fn fell_back(&self) -> bool {
        self.lease == Some(Liveness::Lapsed)
    }

    /// Routed to a scheduler whose Lease renewal is late.
    pub(crate) fn routed_late(&self) -> bool {
        self.lease == Some(Liveness::Late)
    }
}

impl super::Decider {
    /// This review's route.
    pub(crate) fn route(&self, now: SystemTime) -> Route<'_> {
        let mode = self.config.mode;
        let lease = self
            .lease
            .as_ref()
            .filter(|_| mode.writes_scheduler_name())
            .map(|lease| lease.liveness(now));
        if lease == Some(Liveness::Lapsed) {
            Route {
                mode: Mode::Affinity,
                scheduler: &self.fallback_scheduler,
                indexes: &self.fallback_indexes,
                lease,
            }
        } else {
            Route {
                mode,
                scheduler: &self.config.scheduler,
                indexes: &self.indexes,
                lease,
            }
        }
    }
}
