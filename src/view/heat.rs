//! How hot a node is: one number from its CPU, network and memory load.

use crate::config::{HeatWeights, HotThresholds};

/// A node's load: CPU and memory as busy fractions, network in bytes per second.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(crate) struct Load {
    pub(crate) cpu: f64,
    pub(crate) network_bytes_per_second: f64,
    pub(crate) memory: f64,
}

/// What turns absolute loads into fractions for one node.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NodeScale {
    pub(crate) cpu_cores: f64,
    /// NIC capacity when known, else the busiest node's traffic.
    pub(crate) network_bytes_per_second: f64,
    /// The scale is the NIC's real capacity (not the busiest node's traffic), so a network
    /// fraction near 1 means a saturated link.
    pub network_is_capacity: bool,
}

impl NodeScale {
    /// Network load as a fraction of the scale; 0 on a cluster with no traffic at all.
    pub(crate) fn network_fraction(&self, bytes_per_second: f64) -> f64 {
        if self.network_bytes_per_second > 0.0 {
            bytes_per_second / self.network_bytes_per_second
        } else {
            0.0
        }
    }
}

/// The weighted mean of the load fractions. Fractions may exceed 1 once in-flight pods are added.
pub(crate) fn heat(load: &Load, scale: &NodeScale, weights: &HeatWeights) -> f64 {
    let total = weights.cpu + weights.network + weights.memory;
    if total <= 0.0 {
        return 0.0;
    }
    (weights.cpu * load.cpu
        + weights.network * scale.network_fraction(load.network_bytes_per_second)
        + weights.memory * load.memory)
        / total
}

/// At or above any threshold: never preferred, named in the avoid term. Network counts only when
/// the NIC capacity is known: relative to the busiest node, someone is always at 1.0.
pub(crate) fn is_hot(load: &Load, scale: &NodeScale, hot: &HotThresholds) -> bool {
    load.cpu >= hot.cpu
        || load.memory >= hot.memory
        || (scale.network_is_capacity
            && scale.network_fraction(load.network_bytes_per_second) >= hot.network)
}

/// A load dimension: one that can make a node hot, or that bounds what a pod leaves behind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Dimension {
    Cpu,
    /// The NIC's bandwidth.
    Network,
    Memory,
}

impl Dimension {
    /// As reports name it (`hotspots`).
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Dimension::Cpu => "cpu",
            Dimension::Network => "network",
            Dimension::Memory => "memory",
        }
    }

    /// As the compact columns of `review --explain` name it.
    pub(crate) fn short(self) -> &'static str {
        match self {
            Dimension::Cpu => "cpu",
            Dimension::Network => "nic",
            Dimension::Memory => "mem",
        }
    }
}

/// Which thresholds of [`is_hot`] the load crosses, in the order cpu, network, memory; empty
/// exactly when the node is not hot.
pub(crate) fn hot_dimensions(
    load: &Load,
    scale: &NodeScale,
    hot: &HotThresholds,
) -> Vec<Dimension> {
    let mut out = Vec::new();
    if load.cpu >= hot.cpu {
        out.push(Dimension::Cpu);
    }
    if scale.network_is_capacity
        && scale.network_fraction(load.network_bytes_per_second) >= hot.network
    {
        out.push(Dimension::Network);
    }
    if load.memory >= hot.memory {
        out.push(Dimension::Memory);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCALE: NodeScale = NodeScale {
        cpu_cores: 8.0,
        network_bytes_per_second: 1000.0,
        network_is_capacity: true,
    };

    #[test]
    fn default_weights_mix_cpu_and_network() {
        let load = Load {
            cpu: 0.5,
            network_bytes_per_second: 250.0,
            memory: 0.9,
        };
        let h = heat(&load, &SCALE, &HeatWeights::default());
        assert!((h - (0.6 * 0.5 + 0.4 * 0.25)).abs() < 1e-12, "{h}");
    }

    #[test]
    fn weights_are_normalised() {
        let load = Load {
            cpu: 0.4,
            network_bytes_per_second: 400.0,
            memory: 0.4,
        };
        let w = HeatWeights {
            cpu: 3.0,
            network: 3.0,
            memory: 3.0,
        };
        assert!((heat(&load, &SCALE, &w) - 0.4).abs() < 1e-12);
    }

    #[test]
    fn idle_cluster_network_counts_zero() {
        let scale = NodeScale {
            cpu_cores: 4.0,
            network_bytes_per_second: 0.0,
            network_is_capacity: false,
        };
        assert_eq!(scale.network_fraction(0.0), 0.0);
    }

    #[test]
    fn network_makes_hot_only_against_real_capacity() {
        let busy_link = Load {
            cpu: 0.1,
            network_bytes_per_second: 900.0,
            memory: 0.0,
        };
        let hot = HotThresholds::default();
        assert!(is_hot(&busy_link, &SCALE, &hot));
        let relative = NodeScale {
            network_is_capacity: false,
            ..SCALE
        };
        assert!(!is_hot(&busy_link, &relative, &hot));
        let busy_cpu = Load {
            cpu: 0.9,
            ..Load::default()
        };
        assert!(is_hot(&busy_cpu, &relative, &hot));
        assert_eq!(
            hot_dimensions(&busy_link, &SCALE, &hot),
            [Dimension::Network]
        );
        assert!(hot_dimensions(&busy_link, &relative, &hot).is_empty());
        assert_eq!(hot_dimensions(&busy_cpu, &relative, &hot), [Dimension::Cpu]);
    }

    #[test]
    fn hot_dimensions_name_exactly_what_makes_a_node_hot() {
        let hot = HotThresholds::default();
        // A grid over each dimension below, at and above its threshold.
        for cpu in [0.5, hot.cpu, 0.99] {
            for net in [100.0, hot.network * 1000.0, 990.0] {
                for memory in [0.5, hot.memory, 0.99] {
                    let load = Load {
                        cpu,
                        network_bytes_per_second: net,
                        memory,
                    };
                    for scale in [
                        SCALE,
                        NodeScale {
                            network_is_capacity: false,
                            ..SCALE
                        },
                    ] {
                        let dims = hot_dimensions(&load, &scale, &hot);
                        assert_eq!(dims.is_empty(), !is_hot(&load, &scale, &hot), "{load:?}");
                        assert_eq!(dims.contains(&Dimension::Cpu), cpu >= hot.cpu);
                        assert_eq!(dims.contains(&Dimension::Memory), memory >= hot.memory);
                        assert_eq!(
                            dims.contains(&Dimension::Network),
                            scale.network_is_capacity && net >= hot.network * 1000.0
                        );
                    }
                }
            }
        }
    }
}
