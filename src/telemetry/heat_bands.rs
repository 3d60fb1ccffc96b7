//! The heat band keeper's writes: what became of each, and what is left to write.

use std::sync::atomic::AtomicU64;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::ResultLabels;

/// What the results of a write are called (`placement_webhook_heat_band_writes_total`).
pub(crate) const WRITE_RESULTS: [&str; 5] = ["written", "gone", "refused", "failed", "throttled"];

#[derive(Debug)]
pub(crate) struct HeatBandMetrics {
    writes: Family<ResultLabels, Counter>,
    backlog: Gauge,
    oldest_unwritten: Gauge<f64, AtomicU64>,
}

impl HeatBandMetrics {
    pub(crate) fn register(registry: &mut Registry) -> Self {
        let writes = Family::<ResultLabels, Counter>::default();
        registry.register(
            "heat_band_writes",
            "Node label writes keeping the heat bands (placement.heat_bands), by result: \
             written, gone (the node was deleted), refused (no RBAC for it, or the policy), \
             failed (a 5xx or a timeout: the node backs off), throttled (429: every write holds)",
            writes.clone(),
        );
        for result in WRITE_RESULTS {
            let _ = writes.get_or_create(&ResultLabels { result });
        }
        let backlog = Gauge::default();
        registry.register(
            "heat_band_backlog",
            "Nodes whose heat band label differs from their band and is not written yet (held \
             by the write cap, a backoff or a pause the apiserver asked for)",
            backlog.clone(),
        );
        let oldest_unwritten = Gauge::<f64, AtomicU64>::default();
        registry.register(
            "heat_band_oldest_unwritten_seconds",
            "How long the longest-waiting band change of the backlog has waited (0: none)",
            oldest_unwritten.clone(),
        );
        HeatBandMetrics {
            writes,
            backlog,
            oldest_unwritten,
        }
    }

    /// One write, by what became of it (one of [`WRITE_RESULTS`]).
    pub(crate) fn wrote(&self, result: &'static str) {
        self.writes.get_or_create(&ResultLabels { result }).inc();
    }

    /// What is left to write after a round: `backlog` nodes, the oldest waiting `oldest_secs`.
    pub(crate) fn left(&self, backlog: usize, oldest_secs: f64) {
        self.backlog.set(i64::try_from(backlog).unwrap_or(i64::MAX));
        self.oldest_unwritten.set(oldest_secs);
    }
}
