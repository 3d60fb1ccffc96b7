//! The `inflight` section: how long and how much the ledger remembers of steered pods, and how
//! a new pod's load is estimated.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Steered pods remembered at once by default: far more than a scheduler binds in a TTL, at a
/// few hundred bytes each.
pub(crate) const DEFAULT_MAX_INFLIGHT: usize = 32_768;

/// (pod, node) landings the in-flight ledger holds at most by default (16 bytes each): 8 MiB,
/// 16 per pod at `DEFAULT_MAX_INFLIGHT` pods. A decision under default sampling on thousands of
/// nodes predicts tens to a hundred or more.
pub(crate) const DEFAULT_MAX_LANDINGS: usize = 1 << 19;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct InflightConfig {
    /// How long a steered pod's estimated load is added to its nodes: until the metrics window
    /// (scrape interval + rate window) has absorbed it.
    #[serde(with = "humantime_serde")]
    pub ttl: Duration,
    /// Estimated network load of one pod.
    pub(crate) network_bytes_per_second: f64,
    /// CPU assumed for a pod that declares no request or limit.
    pub(crate) default_cpu_cores: f64,
    /// Estimating a new pod's load from the running pods of its job.
    pub(crate) estimate: EstimateConfig,
    /// Most steered pods remembered at once; past it the oldest charges are dropped early.
    pub max_entries: usize,
    /// Most (pod, node) predicted landings remembered at once, over all pods; past it the oldest
    /// charges are dropped early too.
    pub(crate) max_landings: usize,
}

impl Default for InflightConfig {
    fn default() -> Self {
        InflightConfig {
            ttl: Duration::from_secs(90),
            network_bytes_per_second: 0.0,
            default_cpu_cores: 1.0,
            estimate: EstimateConfig::default(),
            max_entries: DEFAULT_MAX_INFLIGHT,
            max_landings: DEFAULT_MAX_LANDINGS,
        }
    }
}

/// A new TaskManager is charged what its job's running TaskManagers use, when enough of them
/// have been measured long enough; else its request (and `network_bytes_per_second`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct EstimateConfig {
    /// Siblings with readings needed to use them; fewer: the request.
    pub(crate) min_siblings: usize,
    /// Which percentile of the siblings' readings (0.5: the median; higher is more cautious).
    pub(crate) percentile: f64,
    /// The CPU estimate never goes below this many cores (idle siblings do not make a pod free).
    pub(crate) min_cpu_cores: f64,
    /// A sibling counts once it has run this long: a rate over a window longer than its life
    /// reads low. At least the Prometheus rate window.
    #[serde(with = "humantime_serde")]
    pub(crate) min_running: Duration,
}

impl Default for EstimateConfig {
    fn default() -> Self {
        EstimateConfig {
            min_siblings: 2,
            percentile: 0.5,
            min_cpu_cores: 0.1,
            min_running: Duration::from_secs(180),
        }
    }
}
