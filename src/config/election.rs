//! Which replica decides: the holder of the webhook's Lease.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The replicas hold a Lease (`<service>-decider` in their namespace); its holder writes itself
/// as the only endpoint of the webhook's Service (the EndpointSlice `<service>-decider`), so the
/// apiserver's reviews reach the deciding replica directly. The others stay warm and take the
/// Lease once its holder stops renewing it (see docs/design.md, "Several replicas").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ElectionConfig {
    pub enabled: bool,
    /// How long a renewal holds the Lease (whole seconds, as the Lease counts them): a
    /// standby takes over at most this long after the holder's last renewal.
    #[serde(with = "humantime_serde")]
    pub(crate) lease_duration: Duration,
    /// The holder renews this long before its renewal runs out (whole seconds).
    #[serde(with = "humantime_serde")]
    pub(crate) renew_before: Duration,
}

impl Default for ElectionConfig {
    fn default() -> Self {
        ElectionConfig {
            enabled: true,
            lease_duration: Duration::from_secs(3),
            renew_before: Duration::from_secs(1),
        }
    }
}

impl ElectionConfig {
    /// What is wrong with the settings, if anything.
    pub(crate) fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        let whole = |d: Duration| d.subsec_nanos() == 0;
        if !whole(self.lease_duration) || !whole(self.renew_before) {
            problems.push("election.lease_duration and renew_before are whole seconds".into());
        }
        if self.renew_before.is_zero() || self.renew_before >= self.lease_duration {
            problems.push("election.renew_before must be above 0 and below lease_duration".into());
        }
        problems
    }
}
