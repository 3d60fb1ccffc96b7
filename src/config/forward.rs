//! Forwarding reviews to one deciding replica.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Every replica sends the reviews it receives to one replica of the webhook's Service (the
/// lowest-named ready one), so that decisions are taken in one place whatever share of the
/// reviews the apiserver's connections give each replica; a replica that gets no answer in
/// time decides itself (see docs/design.md, "Several replicas").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ForwardConfig {
    pub enabled: bool,
    /// Longest wait for the deciding replica's answer (at most half of the apiserver's
    /// remaining budget is ever spent on it).
    #[serde(with = "humantime_serde")]
    pub(crate) timeout: Duration,
    /// After a failed forward, how long this replica decides by itself before trying again.
    #[serde(with = "humantime_serde")]
    pub(crate) retry_after: Duration,
}

impl Default for ForwardConfig {
    fn default() -> Self {
        ForwardConfig {
            enabled: true,
            timeout: Duration::from_millis(500),
            retry_after: Duration::from_secs(5),
        }
    }
}
