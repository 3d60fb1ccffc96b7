//! The webhook's own Prometheus metrics (`GET /metrics`), in one registry, and the default
//! log filter.

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;
use std::sync::{Mutex, PoisonError};

use crate::config::Mode;

mod handover;
mod heat_bands;
pub(crate) use handover::{Charged, HandoverMetrics, InflightByNode, NodeCharges};
pub(crate) use heat_bands::HeatBandMetrics;

/// The log filter when `RUST_LOG` is not set. kube's HTTP layer logs an ERROR for every failed
/// request (target `kube_client::client::builder`), and its watcher a WARN for every 403, so an
/// apiserver outage or missing RBAC would print one line per retry; the watches say "failing"
/// and "recovered" once themselves (`inventory::client::WatchHealth`). `RUST_LOG` overrides all
/// of it, e.g. `RUST_LOG=info,kube=debug` shows every retry.
pub const DEFAULT_LOG_FILTER: &str =
    "info,kube_client::client::builder=off,kube_runtime::watcher=error";

/// How a review ended; exposed in snake_case (`failed_open`).
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub(crate) enum Outcome {
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

impl Outcome {
    pub(crate) const ALL: [Outcome; 5] = [
        Outcome::Patched,
        Outcome::Skipped,
        Outcome::FailedOpen,
        Outcome::Overloaded,
        Outcome::Rejected,
    ];

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Outcome::Patched => "patched",
            Outcome::Skipped => "skipped",
            Outcome::FailedOpen => "failed_open",
            Outcome::Overloaded => "overloaded",
            Outcome::Rejected => "rejected",
        }
    }
}

// Written by hand for snake_case values: the derive writes the variant name as it is.
impl EncodeLabelValue for Outcome {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        std::fmt::Write::write_str(encoder, self.as_str())
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct OutcomeLabels {
    pub(crate) outcome: Outcome,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ModeLabels {
    pub(crate) mode: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct HotJobLabels {
    pub(crate) namespace: String,
    /// As `hotspots` names it: the `app` label, or `owner:<uid>`.
    pub(crate) job: String,
    /// `true` for pods the webhook steered, `false` for the others.
    pub(crate) steered: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct QueryLabels {
    pub(crate) query: &'static str,
}

/// Where a steered pod was bound, compared with the nodes it was steered to.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub(crate) enum Landing {
    /// On one of its first-tier nodes.
    FirstTier,
    /// On a node of a later tier.
    OtherTier,
    /// On a node it was not steered to.
    Elsewhere,
}

impl Landing {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Landing::FirstTier => "first_tier",
            Landing::OtherTier => "other_tier",
            Landing::Elsewhere => "elsewhere",
        }
    }
}

// Written by hand for snake_case values: the derive writes the variant name as it is.
impl EncodeLabelValue for Landing {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        std::fmt::Write::write_str(encoder, self.as_str())
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct LandingLabels {
    /// Exposed as `where` (the derive strips the raw-identifier prefix).
    pub(crate) r#where: Landing,
}

/// A node's heat now (0 idle, 1 saturated) and whether it is at or above a hot threshold.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct NodeHeat {
    pub(crate) heat: f64,
    pub(crate) hot: bool,
}

/// Which node of an observed pod a heat belongs to.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub(crate) enum Placement {
    /// The node the scheduler put the pod on.
    Scheduler,
    /// The node the webhook would have put it on first.
    Webhook,
}

impl EncodeLabelValue for Placement {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        std::fmt::Write::write_str(
            encoder,
            match self {
                Placement::Scheduler => "scheduler",
                Placement::Webhook => "webhook",
            },
        )
    }
}

/// What became of an attempt: a review sent on (`answered`, `failed`: decided here, or
/// `resting`: decided here after a recent failure) or a heat band write.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ResultLabels {
    pub(crate) result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct PlacementLabels {
    pub(crate) placement: Placement,
}

/// Upper bounds of the landing-heat histogram: heat is 0 (idle) .. 1 (saturated), a little
/// above 1 when a NIC is measured against the busiest node rather than its capacity.
const LANDING_HEAT_BUCKETS: [f64; 14] = [
    0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.2,
];

/// The handover rules, as `inflight_handover_rule` labels them.
pub(crate) const HANDOVER_RULES: [&str; 3] = ["pod_readings", "timing", "ttl"];

pub struct Metrics {
    registry: Registry,
    pub(crate) reviews: Family<OutcomeLabels, Counter>,
    pub(crate) review_duration: Histogram,
    pub(crate) patches: Family<ModeLabels, Counter>,
    pub(crate) snapshot_age_seconds: Gauge<f64, AtomicU64>,
    pub(crate) nodes_in_snapshot: Gauge,
    pub(crate) prometheus_query_errors: Family<QueryLabels, Counter>,
    pub(crate) prometheus_refresh_duration: Histogram,
    pub(crate) inflight_entries: Gauge,
    pub(crate) inflight_unheard: Gauge,
    pub(crate) inflight_evicted: Counter,
    pub(crate) saturated_decisions: Counter,
    pub(crate) empty_decisions: Counter,
    pub(crate) scheduler_fallbacks: Counter,
    pub(crate) scheduler_routed_late: Counter,
    pub(crate) forwarded: Family<ResultLabels, Counter>,
    pub(crate) heat_bands: HeatBandMetrics,
    pub(crate) landings: Family<LandingLabels, Counter>,
    pub(crate) landing_heat: Histogram,
    pub(crate) observed_heat: Family<PlacementLabels, Histogram, fn() -> Histogram>,
    pub(crate) observed_hot_landings: Counter,
    pub(crate) inventory_nodes: Gauge,
    pub(crate) inventory_ready: Gauge,
    pub(crate) taskmanagers_on_hot_nodes: Family<HotJobLabels, Gauge>,
    pub(crate) handover: HandoverMetrics,
    /// Held while that family is rebuilt and while the registry is encoded, so that a scrape
    /// never sees it half rebuilt by another.
    hot_jobs_lock: Mutex<()>,
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
        let inflight_unheard = Gauge::default();
        registry.register(
            "inflight_unheard",
            "Pods this replica steered that its pod watch has not reported yet",
            inflight_unheard.clone(),
        );
        let inflight_evicted = Counter::default();
        registry.register(
            "inflight_evicted",
            "Steered pods dropped from the ledger before their TTL to stay within inflight.max_entries or inflight.max_landings",
            inflight_evicted.clone(),
        );
        let landings = Family::<LandingLabels, Counter>::default();
        registry.register(
            "landings",
            "Steered pods seen bound, by where they landed relative to the nodes they were steered to",
            landings.clone(),
        );
        let saturated_decisions = Counter::default();
        registry.register(
            "saturated_decisions",
            "Decisions taken when no feasible node was under the hot thresholds: the least bad \
             were named, and the hottest avoided",
            saturated_decisions.clone(),
        );
        let empty_decisions = Counter::default();
        registry.register(
            "empty_decisions",
            "Patched decisions that named no node, or no node predicted to take the pod: it goes \
             by the scheduler's own scores and nothing is charged",
            empty_decisions.clone(),
        );
        let scheduler_fallbacks = Counter::default();
        registry.register(
            "scheduler_fallbacks",
            "Pods steered with affinity for the default scheduler instead of being routed to \
             scheduler_name, because that scheduler's leader Lease was not being renewed",
            scheduler_fallbacks.clone(),
        );
        let scheduler_routed_late = Counter::default();
        registry.register(
            "scheduler_routed_late",
            "Pods routed to scheduler_name while a renewal of its leader Lease was late (more \
             than 1.5 renewal periods old, not yet lapsed): after a crash these wait for a \
             standby scheduler to take the Lease",
            scheduler_routed_late.clone(),
        );
        let forwarded = Family::<ResultLabels, Counter>::default();
        registry.register(
            "forwarded_reviews",
            "Reviews this replica sent on to the deciding replica, by result (failed and resting: \
             decided here)",
            forwarded.clone(),
        );
        let heat_bands = HeatBandMetrics::register(&mut registry);
        let landing_heat = Histogram::new(LANDING_HEAT_BUCKETS);
        registry.register(
            "landing_heat",
            "Heat at decision time of the node a steered pod landed on (0 idle, 1 saturated)",
            landing_heat.clone(),
        );
        let observed_heat: Family<PlacementLabels, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(|| Histogram::new(LANDING_HEAT_BUCKETS));
        registry.register(
            "observed_heat",
            "Observe mode: heat, when its pod is seen bound, of the node the scheduler put the pod \
             on and of the node the webhook would have put it on",
            observed_heat.clone(),
        );
        let observed_hot_landings = Counter::default();
        registry.register(
            "observed_hot_landings",
            "Observe mode: pods the scheduler put on a hot node while the webhook would have \
             chosen a node that is not hot",
            observed_hot_landings.clone(),
        );
        let inventory_nodes = Gauge::default();
        registry.register(
            "inventory_nodes",
            "Nodes known from the apiserver (0 without cluster access)",
            inventory_nodes.clone(),
        );
        let inventory_ready = Gauge::default();
        registry.register(
            "inventory_ready",
            "1 when the node and pod watches have completed their first list, else 0",
            inventory_ready.clone(),
        );
        let taskmanagers_on_hot_nodes = Family::<HotJobLabels, Gauge>::default();
        registry.register(
            "taskmanagers_on_hot_nodes",
            "Running TaskManagers on nodes hot on measured load, by job and whether the webhook \
             steered them (one pair of series per job with running TaskManagers)",
            taskmanagers_on_hot_nodes.clone(),
        );
        let handover = HandoverMetrics::register(&mut registry, &HANDOVER_RULES);
        // prometheus-client leaves label families without children out of the exposition (as
        // the Go client does). Every label value known in advance starts at 0, so each family
        // is exposed from the first scrape and rate()/ratio rules see a series before the
        // first event.
        for outcome in Outcome::ALL {
            let _ = reviews.get_or_create(&OutcomeLabels { outcome });
        }
        for mode in [
            Mode::Affinity,
            Mode::SchedulerName,
            Mode::Both,
            Mode::Observe,
        ] {
            let _ = patches.get_or_create(&ModeLabels {
                mode: mode.as_str(),
            });
        }
        // The two queries every Prometheus refresh sends; optional ones appear when they fail.
        for query in ["cpu", "network"] {
            let _ = prometheus_query_errors.get_or_create(&QueryLabels { query });
        }
        for placement in [Placement::Scheduler, Placement::Webhook] {
            let _ = observed_heat.get_or_create(&PlacementLabels { placement });
        }
        for place in [Landing::FirstTier, Landing::OtherTier, Landing::Elsewhere] {
            let _ = landings.get_or_create(&LandingLabels { r#where: place });
        }
        for result in ["answered", "failed", "resting"] {
            let _ = forwarded.get_or_create(&ResultLabels { result });
        }
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
            inflight_unheard,
            inflight_evicted,
            landings,
            saturated_decisions,
            empty_decisions,
            scheduler_fallbacks,
            scheduler_routed_late,
            forwarded,
            heat_bands,
            landing_heat,
            observed_heat,
            observed_hot_landings,
            inventory_nodes,
            inventory_ready,
            taskmanagers_on_hot_nodes,
            handover,
            hot_jobs_lock: Mutex::new(()),
        }
    }

    /// Replaces the `taskmanagers_on_hot_nodes` series with one pair per job of `jobs`: a job
    /// no longer running disappears.
    pub fn set_taskmanagers_on_hot_nodes(&self, jobs: &[crate::jobs::JobSummary]) {
        let _held = self
            .hot_jobs_lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        self.taskmanagers_on_hot_nodes.clear();
        for job in jobs {
            let not_steered = job.on_hot_nodes.saturating_sub(job.steered_on_hot_nodes);
            for (steered, count) in [("true", job.steered_on_hot_nodes), ("false", not_steered)] {
                let labels = HotJobLabels {
                    namespace: job.namespace.clone(),
                    job: job.job.clone(),
                    steered,
                };
                self.taskmanagers_on_hot_nodes
                    .get_or_create(&labels)
                    .set(i64::try_from(count).unwrap_or(i64::MAX));
            }
        }
    }

    pub(crate) fn count_review(&self, outcome: Outcome) {
        self.reviews.get_or_create(&OutcomeLabels { outcome }).inc();
    }

    /// Counts one review sent on to the deciding replica, by `result` (`answered`, `failed` or
    /// `resting`).
    pub(crate) fn count_forward(&self, result: &'static str) {
        self.forwarded.get_or_create(&ResultLabels { result }).inc();
    }

    /// Counts one steered pod seen bound; `heat` is the heat its node had at decision time,
    /// when the decision knew that node.
    pub(crate) fn count_landing(&self, place: Landing, heat: Option<f64>) {
        self.landings
            .get_or_create(&LandingLabels { r#where: place })
            .inc();
        if let Some(heat) = heat.filter(|h| h.is_finite()) {
            self.landing_heat.observe(heat);
        }
    }

    /// Counts one observed pod seen bound: the heat now of the node the scheduler chose and of
    /// the node the webhook would have chosen, and whether the pod landed on a hot node the
    /// webhook would have avoided.
    pub(crate) fn count_observed(&self, landed: Option<NodeHeat>, would: Option<NodeHeat>) {
        for (placement, node) in [(Placement::Scheduler, landed), (Placement::Webhook, would)] {
            if let Some(node) = node.filter(|n| n.heat.is_finite()) {
                self.observed_heat
                    .get_or_create(&PlacementLabels { placement })
                    .observe(node.heat);
            }
        }
        if landed.is_some_and(|n| n.hot) && would.is_some_and(|n| !n.hot) {
            self.observed_hot_landings.inc();
        }
    }

    /// Nodes known from the apiserver.
    pub(crate) fn set_inventory_nodes(&self, nodes: usize) {
        self.inventory_nodes
            .set(i64::try_from(nodes).unwrap_or(i64::MAX));
    }

    /// Whether the node and pod watches have completed their first list.
    pub(crate) fn set_inventory_ready(&self, ready: bool) {
        self.inventory_ready.set(i64::from(ready));
    }

    /// The registry in the Prometheus text exposition format.
    pub fn encode(&self) -> String {
        let _held = self
            .hot_jobs_lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `# TYPE` lines of an exposition, as (name, type).
    fn families(text: &str) -> Vec<(String, String)> {
        text.lines()
            .filter_map(|l| l.strip_prefix("# TYPE "))
            .filter_map(|l| l.split_once(' '))
            .map(|(n, t)| (n.to_owned(), t.to_owned()))
            .collect()
    }

    #[test]
    fn every_family_is_exposed_before_any_sample() {
        let text = Metrics::new().encode();
        let got = families(&text);
        for (name, kind) in [
            ("placement_webhook_reviews", "counter"),
            ("placement_webhook_review_duration_seconds", "histogram"),
            ("placement_webhook_patches", "counter"),
            ("placement_webhook_empty_decisions", "counter"),
            ("placement_webhook_forwarded_reviews", "counter"),
            ("placement_webhook_snapshot_age_seconds", "gauge"),
            ("placement_webhook_nodes_in_snapshot", "gauge"),
            ("placement_webhook_prometheus_query_errors", "counter"),
            (
                "placement_webhook_prometheus_refresh_duration_seconds",
                "histogram",
            ),
            ("placement_webhook_inflight_entries", "gauge"),
            ("placement_webhook_landings", "counter"),
            ("placement_webhook_landing_heat", "histogram"),
            ("placement_webhook_inventory_nodes", "gauge"),
            ("placement_webhook_inventory_ready", "gauge"),
        ] {
            assert!(
                got.iter().any(|(n, k)| n == name && k == kind),
                "{name} ({kind}) missing from\n{text}"
            );
        }
        assert!(
            text.contains("# HELP placement_webhook_landings "),
            "{text}"
        );
    }

    #[test]
    fn outcomes_are_labelled_in_snake_case() {
        let m = Metrics::new();
        m.count_review(Outcome::FailedOpen);
        let text = m.encode();
        for want in [
            "placement_webhook_reviews_total{outcome=\"patched\"} 0\n",
            "placement_webhook_reviews_total{outcome=\"skipped\"} 0\n",
            "placement_webhook_reviews_total{outcome=\"failed_open\"} 1\n",
            "placement_webhook_reviews_total{outcome=\"overloaded\"} 0\n",
            "placement_webhook_reviews_total{outcome=\"rejected\"} 0\n",
        ] {
            assert!(text.contains(want), "missing {want:?} in\n{text}");
        }
    }

    #[test]
    fn landings_are_labelled_where_in_snake_case() {
        let m = Metrics::new();
        m.count_landing(Landing::FirstTier, Some(0.12));
        m.count_landing(Landing::FirstTier, None);
        m.count_landing(Landing::OtherTier, Some(0.3));
        m.count_landing(Landing::Elsewhere, Some(f64::NAN));
        let text = m.encode();
        for want in [
            "placement_webhook_landings_total{where=\"first_tier\"} 2",
            "placement_webhook_landings_total{where=\"other_tier\"} 1",
            "placement_webhook_landings_total{where=\"elsewhere\"} 1",
            // Only the two finite heats are observed.
            "placement_webhook_landing_heat_count 2",
            "placement_webhook_landing_heat_bucket{le=\"0.15\"} 1",
            "placement_webhook_landing_heat_bucket{le=\"0.3\"} 2",
        ] {
            assert!(text.contains(want), "missing {want:?} in\n{text}");
        }
    }

    #[test]
    fn hot_taskmanagers_by_job_replace_the_previous_set() {
        use crate::jobs::JobSummary;
        let job = |name: &str, on_hot, steered_on_hot| JobSummary {
            namespace: "flink".into(),
            job: name.into(),
            taskmanagers: 10,
            on_hot_nodes: on_hot,
            steered: 5,
            steered_on_hot_nodes: steered_on_hot,
            on_nodes_without_readings: 0,
        };
        let m = Metrics::new();
        m.set_taskmanagers_on_hot_nodes(&[job("orders", 3, 1), job("clicks", 0, 0)]);
        let text = m.encode();
        for want in [
            "placement_webhook_taskmanagers_on_hot_nodes{namespace=\"flink\",job=\"orders\",steered=\"true\"} 1\n",
            "placement_webhook_taskmanagers_on_hot_nodes{namespace=\"flink\",job=\"orders\",steered=\"false\"} 2\n",
            "placement_webhook_taskmanagers_on_hot_nodes{namespace=\"flink\",job=\"clicks\",steered=\"false\"} 0\n",
        ] {
            assert!(text.contains(want), "missing {want:?} in\n{text}");
        }
        m.set_taskmanagers_on_hot_nodes(&[job("clicks", 1, 0)]);
        let text = m.encode();
        assert!(!text.contains("job=\"orders\""), "{text}");
        assert!(
            text.contains(
                "placement_webhook_taskmanagers_on_hot_nodes{namespace=\"flink\",job=\"clicks\",steered=\"false\"} 1\n"
            ),
            "{text}"
        );
    }

    #[test]
    fn inventory_gauges() {
        let m = Metrics::new();
        let text = m.encode();
        assert!(
            text.contains("placement_webhook_inventory_nodes 0\n"),
            "{text}"
        );
        assert!(
            text.contains("placement_webhook_inventory_ready 0\n"),
            "{text}"
        );
        m.set_inventory_nodes(42);
        m.set_inventory_ready(true);
        let text = m.encode();
        assert!(
            text.contains("placement_webhook_inventory_nodes 42\n"),
            "{text}"
        );
        assert!(
            text.contains("placement_webhook_inventory_ready 1\n"),
            "{text}"
        );
    }
}
