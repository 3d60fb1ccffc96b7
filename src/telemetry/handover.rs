//! The in-flight ledger's handover to the metrics: what is charged, what is counted twice, and
//! how long charges last.

use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use serde::Serialize;
use std::sync::atomic::AtomicU64;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct RuleLabels {
    pub(crate) rule: &'static str,
}

/// One resource's figures after a refresh.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub(crate) struct Charged {
    pub(crate) cpu_cores: f64,
    pub(crate) network_bytes_per_second: f64,
}

/// One node's figures after a refresh: what a decision there counts for steered pods the
/// metrics do not show yet, and what it counts twice.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct NodeCharges {
    pub(crate) node: Box<str>,
    pub(crate) charged: Charged,
    pub(crate) counted_twice: Charged,
}

/// The last refresh's handover by node, as `/debug/inflight` serves it: the nodes with a
/// charge or a load counted twice, in name order. Per node, so not in `/metrics`: a label per
/// node would be a series per node.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub(crate) struct InflightByNode {
    /// The handover rule in force; empty before the first refresh.
    pub(crate) rule: &'static str,
    /// When the refresh these figures were computed at was taken (RFC 3339): what the metrics
    /// showed then is what a decision reads beside the charges.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) taken_at: Option<String>,
    pub(crate) nodes: Vec<NodeCharges>,
}

#[derive(Debug)]
pub(crate) struct HandoverMetrics {
    charged_cpu: Gauge<f64, AtomicU64>,
    charged_network: Gauge<f64, AtomicU64>,
    twice_cpu: Gauge<f64, AtomicU64>,
    twice_network: Gauge<f64, AtomicU64>,
    age: Histogram,
    oldest: Gauge<f64, AtomicU64>,
    rule: Family<RuleLabels, Gauge>,
    by_node: ArcSwap<InflightByNode>,
}

impl HandoverMetrics {
    /// Registers the family under `registry`; every rule in `rules` starts at 0.
    pub(crate) fn register(registry: &mut Registry, rules: &[&'static str]) -> Self {
        let gauge = |registry: &mut Registry, name: &str, help: &str| {
            let g = Gauge::<f64, AtomicU64>::default();
            registry.register(name, help, g.clone());
            g
        };
        let charged_cpu = gauge(
            registry,
            "inflight_charged_cpu_cores",
            "CPU cores the ledger charges for steered pods the metrics do not show yet, at the last refresh",
        );
        let charged_network = gauge(
            registry,
            "inflight_charged_network_bytes_per_second",
            "Network bytes per second the ledger charges for steered pods the metrics do not show yet",
        );
        let twice_cpu = gauge(
            registry,
            "inflight_counted_twice_cpu_cores",
            "CPU cores of bound pods both charged by the ledger and shown by the metrics, beyond their estimate",
        );
        let twice_network = gauge(
            registry,
            "inflight_counted_twice_network_bytes_per_second",
            "Network bytes per second of bound pods both charged by the ledger and shown by the metrics",
        );
        let age = Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
            15.0, 1.5, 12,
        ));
        registry.register(
            "inflight_handover_age_seconds",
            "How long after it was steered a pod's charge ended because the metrics showed it",
            age.clone(),
        );
        let oldest = gauge(
            registry,
            "inflight_oldest_charge_seconds",
            "How long ago the oldest pod the ledger still charges was steered, at the last \
             refresh (0: none): a pod still starting, or bound and not yet shown by the metrics; \
             one stuck or not started after inflight.handover.not_started_after is charged nothing",
        );
        let rule = Family::<RuleLabels, Gauge>::default();
        registry.register(
            "inflight_handover_rule",
            "1 for the rule that ended charges at the last refresh: pod_readings (the pods' own \
             series), timing (no pod series: the rate window's timing alone) or ttl",
            rule.clone(),
        );
        for rule_name in rules {
            let _ = rule.get_or_create(&RuleLabels { rule: rule_name });
        }
        HandoverMetrics {
            charged_cpu,
            charged_network,
            twice_cpu,
            twice_network,
            age,
            oldest,
            rule,
            by_node: ArcSwap::default(),
        }
    }

    /// Keeps the last refresh's figures by node.
    pub(crate) fn publish_by_node(&self, by_node: InflightByNode) {
        self.by_node.store(Arc::new(by_node));
    }

    /// The last refresh's figures by node.
    pub(crate) fn by_node(&self) -> Arc<InflightByNode> {
        self.by_node.load_full()
    }

    /// One refresh's handover: the rule in force, the loads, and the ages of the charges ended.
    pub(crate) fn record(
        &self,
        rule: &'static str,
        charged: Charged,
        twice: Charged,
        (ages, oldest): (&[Duration], Duration),
    ) {
        self.oldest.set(oldest.as_secs_f64());
        self.charged_cpu.set(charged.cpu_cores);
        self.charged_network.set(charged.network_bytes_per_second);
        self.twice_cpu.set(twice.cpu_cores);
        self.twice_network.set(twice.network_bytes_per_second);
        for age in ages {
            self.age.observe(age.as_secs_f64());
        }
        // One write per label: a scrape between them may see both rules at 1 for a moment.
        self.rule.get_or_create(&RuleLabels { rule }).set(1);
        for other in super::HANDOVER_RULES {
            if other != rule {
                self.rule.get_or_create(&RuleLabels { rule: other }).set(0);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_refresh_by_node_is_kept_whole_and_serialised_as_documented() {
        let mut registry = Registry::default();
        let metrics = HandoverMetrics::register(&mut registry, &super::super::HANDOVER_RULES);
        let node = |name: &str, cpu: f64| NodeCharges {
            node: name.into(),
            charged: Charged {
                cpu_cores: cpu,
                network_bytes_per_second: 2e6,
            },
            counted_twice: Charged::default(),
        };
        metrics.publish_by_node(InflightByNode {
            rule: "pod_readings",
            taken_at: Some("2026-11-22T10:00:00.000Z".into()),
            nodes: vec![node("worker-1", 2.0), node("worker-7", 1.5)],
        });
        metrics.publish_by_node(InflightByNode {
            rule: "pod_readings",
            taken_at: Some("2026-11-22T10:00:15.000Z".into()),
            nodes: vec![node("worker-7", 1.5)],
        });
        let json = serde_json::to_value(&*metrics.by_node()).expect("serialises");
        assert_eq!(
            json,
            serde_json::json!({"rule": "pod_readings", "taken_at": "2026-11-22T10:00:15.000Z", "nodes": [{
                "node": "worker-7",
                "charged": {"cpu_cores": 1.5, "network_bytes_per_second": 2e6},
                "counted_twice": {"cpu_cores": 0.0, "network_bytes_per_second": 0.0}
            }]})
        );
    }

    #[test]
    fn the_rule_in_force_is_the_only_one_at_one() {
        let mut registry = Registry::default();
        let metrics = HandoverMetrics::register(&mut registry, &super::super::HANDOVER_RULES);
        let load = Charged {
            cpu_cores: 3.0,
            network_bytes_per_second: 10.0,
        };
        metrics.record(
            "timing",
            load,
            Charged::default(),
            (&[Duration::from_secs(100)], Duration::from_secs(140)),
        );
        metrics.record(
            "pod_readings",
            load,
            Charged::default(),
            (&[], Duration::from_secs(20)),
        );
        let at_one: Vec<&str> = super::super::HANDOVER_RULES
            .into_iter()
            .filter(|rule| metrics.rule.get_or_create(&RuleLabels { rule }).get() == 1)
            .collect();
        assert_eq!(at_one, ["pod_readings"]);
        assert_eq!(metrics.charged_cpu.get(), 3.0);
        assert_eq!(
            metrics.oldest.get(),
            20.0,
            "the last refresh's oldest charge"
        );
    }
}
