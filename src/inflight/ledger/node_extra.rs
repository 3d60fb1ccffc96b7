//! The in-flight load and requests the ledger counts on one node.

use super::Entry;

/// Estimated load one pod adds to a node.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct PodLoad {
    pub cpu_cores: f64,
    pub network_bytes_per_second: f64,
}

/// The expected in-flight load and requests on one node.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct NodeExtra {
    pub(crate) cpu_cores: f64,
    pub(crate) network_bytes_per_second: f64,
    /// Expected requests of steered pods not yet bound (probability-weighted).
    pub(crate) milli_cpu: f64,
    pub(crate) memory: f64,
    pub(crate) non_zero_milli_cpu: f64,
    pub(crate) non_zero_memory: f64,
    pub(crate) pods: f64,
    /// Variance of the count of steered pods not yet bound that land here: how far the pods
    /// arriving before the next one may stray from `pods`.
    pub(crate) pods_variance: f64,
    /// Variance of the in-flight CPU (cores²) and network (bytes²/s²) that landing
    /// probabilities below 1 leave: where sampling makes the landing uncertain.
    pub(crate) cpu_variance: f64,
    pub(crate) network_variance: f64,
}

impl NodeExtra {
    /// Adds (`sign` 1) or removes (`sign` -1) `entry`'s share `p` of landing here.
    pub(super) fn add(&mut self, entry: &Entry, p: f64, sign: f64) {
        let share = sign * p;
        let load = entry.charged;
        self.cpu_cores += load.cpu_cores * share;
        self.network_bytes_per_second += load.network_bytes_per_second * share;
        let spread = sign * p * (1.0 - p);
        self.cpu_variance += spread * load.cpu_cores.powi(2);
        self.network_variance += spread * load.network_bytes_per_second.powi(2);
        if !entry.bound {
            let r = &entry.requests;
            self.milli_cpu += r.requested.milli_cpu as f64 * share;
            self.memory += r.requested.memory as f64 * share;
            self.non_zero_milli_cpu += r.non_zero_milli_cpu as f64 * share;
            self.non_zero_memory += r.non_zero_memory as f64 * share;
            self.pods += share;
            self.pods_variance += spread;
        }
    }

    pub(super) fn is_negligible(&self) -> bool {
        self.cpu_cores.abs() < 1e-9
            && self.network_bytes_per_second.abs() < 1e-3
            && self.pods.abs() < 1e-9
    }

    #[cfg(test)]
    pub(crate) fn load(&self) -> PodLoad {
        PodLoad {
            cpu_cores: self.cpu_cores,
            network_bytes_per_second: self.network_bytes_per_second,
        }
    }

    /// The expected load plus `z` standard deviations: what the node may well carry when
    /// landings are uncertain. Equal to [`NodeExtra::load`] when every landing is certain.
    pub(crate) fn cautious_load(&self, z: f64) -> PodLoad {
        PodLoad {
            cpu_cores: self.cpu_cores + z * self.cpu_variance.max(0.0).sqrt(),
            network_bytes_per_second: self.network_bytes_per_second
                + z * self.network_variance.max(0.0).sqrt(),
        }
    }
}
