//! The webhook's own Prometheus metrics (`GET /metrics`), in one registry.

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;

/// How a review ended.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelValue)]
pub enum Outcome {
    /// A targeted pod received a patch.
    Patched,
    /// Not a target (other kind, operation, labels, opt-out, reinvocation): answered unchanged.
    Skipped,
    /// A target answered without patch because of an internal problem (no/stale snapshot, error).
    FailedOpen,
    /// Answered without patch because too many reviews were in progress.
    Overloaded,
    /// The request could not be read as an AdmissionReview (4xx).
    Rejected,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    pub outcome: Outcome,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ModeLabels {
    pub mode: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct QueryLabels {
    pub query: &'static str,
}

pub struct Metrics {
    registry: Registry,
    pub reviews: Family<OutcomeLabels, Counter>,
    pub review_duration: Histogram,
    pub patches: Family<ModeLabels, Counter>,
    pub snapshot_age_seconds: Gauge<f64, AtomicU64>,
    pub nodes_in_snapshot: Gauge,
    pub prometheus_query_errors: Family<QueryLabels, Counter>,
    pub prometheus_refresh_duration: Histogram,
    pub inflight_entries: Gauge,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("placement_webhook");
        let reviews = Family::<OutcomeLabels, Counter>::default();
        registry.register(
            "reviews",
            "Admission reviews answered, by outcome",
            reviews.clone(),
        );
        // 50 µs .. ~1.6 s: the interesting part is well under a millisecond.
        let review_duration = Histogram::new(
            prometheus_client::metrics::histogram::exponential_buckets(0.00005, 2.0, 16),
        );
        registry.register(
            "review_duration_seconds",
            "Time from request body read to response built",
            review_duration.clone(),
        );
        let patches = Family::<ModeLabels, Counter>::default();
        registry.register("patches", "Patches written, by mode", patches.clone());
        let snapshot_age_seconds = Gauge::<f64, AtomicU64>::default();
        registry.register(
            "snapshot_age_seconds",
            "Age of the node-load snapshot in use (-1 when there is none)",
            snapshot_age_seconds.clone(),
        );
        let nodes_in_snapshot = Gauge::default();
        registry.register(
            "nodes_in_snapshot",
            "Nodes with load readings in the current snapshot",
            nodes_in_snapshot.clone(),
        );
        let prometheus_query_errors = Family::<QueryLabels, Counter>::default();
        registry.register(
            "prometheus_query_errors",
            "Failed Prometheus queries, by query",
            prometheus_query_errors.clone(),
        );
        let prometheus_refresh_duration = Histogram::new(
            prometheus_client::metrics::histogram::exponential_buckets(0.005, 2.0, 12),
        );
        registry.register(
            "prometheus_refresh_duration_seconds",
            "Duration of one snapshot refresh from Prometheus",
            prometheus_refresh_duration.clone(),
        );
        let inflight_entries = Gauge::default();
        registry.register(
            "inflight_entries",
            "Steered pods whose estimated load is still counted on their nodes",
            inflight_entries.clone(),
        );
        Metrics {
            registry,
            reviews,
            review_duration,
            patches,
            snapshot_age_seconds,
            nodes_in_snapshot,
            prometheus_query_errors,
            prometheus_refresh_duration,
            inflight_entries,
        }
    }

    pub fn count_review(&self, outcome: Outcome) {
        self.reviews.get_or_create(&OutcomeLabels { outcome }).inc();
    }

    /// The registry in the Prometheus text exposition format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}
