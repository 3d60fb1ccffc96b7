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
    /// How long a steered pod's estimated load is charged while the pod watch has not seen it
    /// bound (a pod the scheduler cannot place, or no pod watch at all); under
    /// `handover.rule: ttl`, how long every charge lasts.
    #[serde(with = "humantime_serde")]
    pub ttl: Duration,
    /// When a bound pod's charge ends: once the metrics show its load.
    pub(crate) handover: HandoverConfig,
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
            handover: HandoverConfig::default(),
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

/// How a bound pod's charge ends (docs/design.md, "Handover on evidence").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct HandoverConfig {
    pub(crate) rule: HandoverRule,
    /// How often Prometheus scrapes the node and pod series: the newest sample a refresh reads
    /// may be this old.
    #[serde(with = "humantime_serde")]
    pub(crate) scrape_interval: Duration,
    /// A bound pod whose containers have not started this long after it was steered is taken
    /// to be stuck, as one whose containers wait with a reason that says they will not start
    /// by themselves (an image that cannot be pulled, a bad config, a crash loop) is at once:
    /// its charge is set aside until it starts. Long enough for a large image's pull.
    #[serde(with = "humantime_serde")]
    pub(crate) not_started_after: Duration,
}

impl Default for HandoverConfig {
    fn default() -> Self {
        HandoverConfig {
            rule: HandoverRule::Evidence,
            // kube-prometheus-stack's default.
            scrape_interval: Duration::from_secs(30),
            not_started_after: Duration::from_secs(600),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum HandoverRule {
    /// A bound pod is charged until the metrics show it, and only what they do not show yet.
    Evidence,
    /// Every charge ends `ttl` after the pod was steered, whatever the metrics show.
    Ttl,
}
