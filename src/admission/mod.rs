//! From request bytes to response bytes: parse, target, decide, patch; fail open on anything
//! internal. A placement webhook never rejects a pod.

mod pod_read;
pub(crate) mod review;

use crate::inflight::shared::SharedLedger;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use k8s_openapi::api::core::v1::Pod;
use tracing::{debug, warn};

use crate::config::{Config, Mode, SchedulerConfig};
use crate::inflight::ledger::{Ledger, PodLoad};
use crate::inflight::note::{ANNOTATION, DecisionNote};
use crate::inventory::lease::{Liveness, SchedulerLease};
use crate::jobs::JobKey;
use crate::patch::{self, Changes};
use crate::placement::{self, Decision, Peers, PodConstraints, PodDemand, Replica};
use crate::scheduler::PodFacts;
use crate::scheduler::cores;
use crate::telemetry::Outcome;
use crate::view::{ClusterView, ViewStore};
use review::{API_VERSION, KIND, RequestIn, ResponseOut, ReviewIn, ReviewOut};

pub(crate) const SKIP_ANNOTATION: &str = "placement-webhook.io/skip";

/// The values of [`SKIP_ANNOTATION`] that opt a pod out, compared ASCII case-insensitively
/// (`"True"`, `"YES"`); the registration's `matchConditions` lists the same.
pub const SKIP_VALUES: [&str; 4] = ["true", "yes", "1", "on"];

/// Whether `value` of [`SKIP_ANNOTATION`] opts the pod out.
pub(crate) fn skips(value: &str) -> bool {
    SKIP_VALUES.iter().any(|v| v.eq_ignore_ascii_case(value))
}

/// A request that cannot be answered as an AdmissionReview: the caller maps it to a 4xx.
#[derive(Debug, thiserror::Error)]
pub enum BadReview {
    #[error("body is not JSON: {0}")]
    NotJson(String),
    #[error("body is not an AdmissionReview: {0}")]
    Shape(String),
    #[error("unsupported {0}: only admission.k8s.io/v1 AdmissionReview is served")]
    Version(String),
    #[error("AdmissionReview has no request")]
    NoRequest,
    #[error("AdmissionReview request has an empty uid")]
    NoUid,
}

/// An answered review.
#[derive(Debug)]
pub struct Answer {
    pub review: ReviewOut,
    pub(crate) outcome: Outcome,
    /// Set when a patch was written.
    pub(crate) mode: Option<&'static str>,
    /// Every feasible node was hot: the least bad were named.
    pub(crate) saturated: bool,
    /// A pod was decided for and no node was named, or none of those named is predicted to
    /// take it (none feasible, or none with room): it goes by the scheduler's own scores, and
    /// nothing is charged.
    pub(crate) named_none: bool,
    /// Steered with affinity for the default scheduler because the scheduler that
    /// `spec.schedulerName` would name has let its Lease lapse.
    pub(crate) fell_back: bool,
    /// Routed to that scheduler while a renewal of its Lease was late (see [`Liveness::Late`]).
    pub(crate) routed_late: bool,
}

/// A decision written into a response.
struct Steered {
    response: ResponseOut,
    mode: &'static str,
    saturated: bool,
    named_none: bool,
    fell_back: bool,
    routed_late: bool,
}

/// Everything a review needs; shared by the server and the `review` command.
pub struct Admission {
    config: Arc<Config>,
    store: Arc<ViewStore>,
    ledger: Arc<SharedLedger>,
    /// Breaks near-ties in this replica's own order (see `placement::decide`).
    salt: u64,
    /// The live replicas, when known (see `placement::replicas::replica`); kept current by the
    /// membership watch.
    peers: Arc<Peers>,
    /// Each pod shape's ranking of the nodes, kept up to date with the ledger.
    indexes: placement::RankIndexes,
    /// The last decision made to be charged predicted a landing (see
    /// [`Admission::decide_and_charge`]).
    charging: std::sync::atomic::AtomicBool,
    /// The routed scheduler's Lease, when routing is gated on it (see [`Route`]).
    lease: Option<Arc<SchedulerLease>>,
    /// The default scheduler, modelled with upstream's defaults, for pods steered to it while
    /// the routed scheduler's Lease is stale; and its rankings.
    fallback_scheduler: SchedulerConfig,
    fallback_indexes: placement::RankIndexes,
}

/// Where a review's pod goes and how it is steered there: the configured mode and scheduler,
/// or, while the scheduler that `spec.schedulerName` would name has let its Lease lapse,
/// affinity for the default scheduler (a pod routed to a scheduler that is down would stay
/// Pending with nobody to bind it).
struct Route<'a> {
    mode: Mode,
    scheduler: &'a SchedulerConfig,
    indexes: &'a placement::RankIndexes,
    /// The routed scheduler's Lease at this review, when routing is gated on it.
    lease: Option<Liveness>,
}

impl Route<'_> {
    /// Steered for the default scheduler because the routed one's Lease lapsed.
    fn fell_back(&self) -> bool {
        self.lease == Some(Liveness::Lapsed)
    }

    /// Routed to a scheduler whose Lease renewal is late.
    fn routed_late(&self) -> bool {
        self.lease == Some(Liveness::Late)
    }
}

/// Why a pod is not one to steer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NotTarget {
    /// [`SKIP_ANNOTATION`] says true.
    OptedOut,
    /// It carries the decision annotation: a reinvocation.
    AlreadySteered,
    /// Created with `spec.nodeName`.
    Bound,
    /// Its labels miss the configured targets.
    Labels,
}

/// Why a targeted pod was left without a patch.
#[derive(Debug, thiserror::Error)]
enum FailOpen {
    #[error("no node-load snapshot yet")]
    NoSnapshot,
    #[error(
        "node-load snapshot is stale: taken at {taken_at}, {age_secs}s ago (limit {limit_secs}s)"
    )]
    Stale {
        /// When the readings were taken (RFC 3339, UTC).
        taken_at: String,
        age_secs: u64,
        limit_secs: u64,
    },
    #[error("pod object could not be read: {0}")]
    UnreadablePod(String),
    #[error("patch could not be built: {0}")]
    Patch(#[from] patch::PatchError),
    #[error("patch could not be encoded: {0}")]
    Encode(#[from] serde_json::Error),
}

impl FailOpen {
    /// Caused by the metrics source rather than by this pod.
    fn is_source_state(&self) -> bool {
        matches!(self, FailOpen::NoSnapshot | FailOpen::Stale { .. })
    }
}

impl Admission {
    pub fn new(config: Arc<Config>, store: Arc<ViewStore>, ledger: Arc<SharedLedger>) -> Self {
        use std::hash::BuildHasher;
        // Random per process: two replicas order near-ties differently.
        let salt = std::collections::hash_map::RandomState::new().hash_one(0x5a17_u64);
        Self::with_salt(config, store, ledger, salt)
    }

    /// Like [`Admission::new`] with a chosen tie-breaking salt (repeatable runs).
    pub fn with_salt(
        config: Arc<Config>,
        store: Arc<ViewStore>,
        ledger: Arc<SharedLedger>,
        salt: u64,
    ) -> Self {
        // The ledger tags what this admission's policy counts, for its pods and the watch's.
        let tags_jobs = !config.placement.per_job.is_off();
        ledger.write().set_tags_jobs(tags_jobs);
        Admission {
            config,
            store,
            ledger,
            salt,
            peers: Arc::default(),
            indexes: placement::RankIndexes::default(),
            charging: std::sync::atomic::AtomicBool::new(true),
            lease: None,
            fallback_scheduler: SchedulerConfig::default(),
            fallback_indexes: placement::RankIndexes::default(),
        }
    }

    /// Routes pods to `scheduler_name` only while `lease` says its scheduler is alive.
    pub(crate) fn routing_by(mut self, lease: Arc<SchedulerLease>) -> Self {
        self.lease = Some(lease);
        self
    }

    /// This review's route (see [`Route`]).
    fn route(&self, now: SystemTime) -> Route<'_> {
        let mode = self.config.mode;
        let lease = self
            .lease
            .as_ref()
            .filter(|_| mode.writes_scheduler_name())
            .map(|lease| lease.liveness(now));
        if lease == Some(Liveness::Lapsed) {
            Route {
                mode: Mode::Affinity,
                scheduler: &self.fallback_scheduler,
                indexes: &self.fallback_indexes,
                lease,
            }
        } else {
            Route {
                mode,
                scheduler: &self.config.scheduler,
                indexes: &self.indexes,
                lease,
            }
        }
    }

    /// Reads the live replicas from `peers` (where the membership watch publishes them).
    pub(crate) fn sharing_peers(mut self, peers: Arc<Peers>) -> Self {
        self.peers = peers;
        self
    }

    /// Where the membership watch publishes the live replicas.
    pub(crate) fn peers(&self) -> &Peers {
        &self.peers
    }

    /// This replica as a decision sees it.
    pub(crate) fn replica(&self) -> Replica {
        Replica {
            salt: self.salt,
            set: self.peers.set(),
            alone: self.peers.alone(),
            ..Replica::default()
        }
    }

    /// The pod as placement sees it: filters, requests and estimated load (from its job's
    /// running pods in `view` when there are enough, else from its request).
    pub fn demand<'a>(&self, pod: &'a Pod, view: Option<&ClusterView>) -> PodDemand<'a> {
        let inflight = &self.config.inflight;
        let request = PodLoad {
            cpu_cores: cores::pod_cpu_cores(pod).unwrap_or(inflight.default_cpu_cores),
            network_bytes_per_second: inflight.network_bytes_per_second,
        };
        let siblings = view
            .zip(JobKey::of_pod(pod, ""))
            .and_then(|(view, job)| view.jobs.get(&job))
            .map_or(&[][..], Vec::as_slice);
        let estimate = placement::estimate::estimate(
            request,
            cores::pod_cpu_limit_cores(pod),
            siblings,
            &inflight.estimate,
        );
        PodDemand {
            constraints: PodConstraints::of(pod, &self.config.placement.pinning),
            facts: PodFacts::of(pod),
            load: estimate.load,
            source: estimate.source,
        }
    }

    /// Numbers the ledger's nodes by `view` (once per view), as decisions read them.
    fn align_ledger(&self, view: &ClusterView) {
        self.ledger
            .align_to(view.id, |ledger| ledger.align(view.id, node_names(view)));
    }

    /// The decision for `pod` against `view` as things stand, charging nothing.
    pub(crate) fn dry_decide(&self, pod: &Pod, view: &ClusterView) -> Decision {
        self.align_ledger(view);
        let route = self.route(SystemTime::now());
        self.decide_with(
            &self.demand(pod, Some(view)),
            view,
            &self.ledger.read(),
            &route,
        )
    }

    pub(crate) fn ledger(&self) -> &Arc<SharedLedger> {
        &self.ledger
    }

    /// Parses a request body and answers it.
    pub fn review_bytes(&self, body: &[u8]) -> Result<Answer, BadReview> {
        let request = parse(body)?;
        Ok(self.answer(&request, SystemTime::now()))
    }

    /// Answers one request. Never fails: problems become `allowed: true` without a patch.
    pub(crate) fn answer(&self, request: &RequestIn, now: SystemTime) -> Answer {
        let view = self.store.current();
        let (mut saturated, mut named_none, mut fell_back, mut routed_late) =
            (false, false, false, false);
        let (response, outcome, mode) = match self.steer(request, view.as_deref(), now) {
            Ok(Some(steered)) => {
                saturated = steered.saturated;
                named_none = steered.named_none;
                fell_back = steered.fell_back;
                routed_late = steered.routed_late;
                (steered.response, Outcome::Patched, Some(steered.mode))
            }
            Ok(None) => (ResponseOut::allow(&request.uid), Outcome::Skipped, None),
            Err(reason) => {
                let namespace = request.namespace.as_deref().unwrap_or("");
                if reason.is_source_state() {
                    // The metrics source logs its own state changes once; not per pod.
                    debug!(uid = %request.uid, namespace, %reason, "failing open");
                } else {
                    warn!(uid = %request.uid, namespace, %reason, "failing open");
                }
                let response = ResponseOut::allow(&request.uid)
                    .with_warning(&format!("placement-webhook: pod not steered: {reason}"));
                (response, Outcome::FailedOpen, None)
            }
        };
        Answer {
            review: response.into_review(),
            outcome,
            mode,
            saturated,
            named_none,
            fell_back,
            routed_late,
        }
    }

    /// `Ok(None)`: not ours to steer. `Ok(Some)`: a patched response.
    fn steer(
        &self,
        request: &RequestIn,
        view: Option<&ClusterView>,
        now: SystemTime,
    ) -> Result<Option<Steered>, FailOpen> {
        if !is_pod_create(request) {
            return Ok(None);
        }
        let Some(object) = request.object.as_deref().filter(|o| o.get() != "null") else {
            return Ok(None);
        };
        let pod = pod_of(object, request).map_err(|e| FailOpen::UnreadablePod(e.to_string()))?;
        self.steer_pod(request, &pod, view, now)
    }

    /// [`Self::steer`] for the Pod read from the request.
    fn steer_pod(
        &self,
        request: &RequestIn,
        pod: &Pod,
        view: Option<&ClusterView>,
        now: SystemTime,
    ) -> Result<Option<Steered>, FailOpen> {
        if !self.is_target(pod) {
            debug!(uid = %request.uid, "not a target");
            return Ok(None);
        }
        let view = view.ok_or(FailOpen::NoSnapshot)?;
        let age = view.age(now);
        if age > self.config.max_staleness {
            return Err(FailOpen::Stale {
                taken_at: view.taken_at.map_or_else(String::new, |t| {
                    humantime::format_rfc3339_seconds(t).to_string()
                }),
                age_secs: age.as_secs(),
                limit_secs: self.config.max_staleness.as_secs(),
            });
        }

        let dry_run = request.dry_run.unwrap_or(false);
        let demand = self.demand(pod, Some(view));
        let id = ledger_id(&request.uid);
        let route = self.route(now);
        if let (Some(lease), Some(liveness), false) = (&self.lease, route.lease, dry_run) {
            lease.record(liveness, now);
        }
        let decision = self.decide_and_charge(&demand, view, &id, !dry_run, &route);

        let mode = route.mode;
        let observing = mode.observes_only();
        let note = DecisionNote {
            id,
            mode: mode.as_str().into(),
            load: demand.load,
            estimate: demand.source.to_string(),
            nodes: decision.landing.clone(),
            avoided: decision.avoid.len(),
            snapshot_age_secs: age.as_secs(),
            would: observing
                .then(|| decision.first_tier().first())
                .flatten()
                .map(|n| (n.name.clone(), n.heat)),
        }
        .to_string();
        let changes = Changes {
            preferred: if mode.writes_affinity() {
                patch::Preferred::Json(decision.preferred_json(&self.config.placement.node_match))
            } else {
                patch::Preferred::default()
            },
            // Observe mode leaves every placement term as the pod's own.
            required: if observing { &[] } else { &decision.pinning },
            scheduler_name: mode
                .writes_scheduler_name()
                .then_some(self.config.scheduler_name.as_str()),
            annotations: vec![(ANNOTATION, note.clone())],
        };
        let patch = patch::build(pod, &changes)?;
        let mut response = ResponseOut::allow(&request.uid).with_patch(&patch)?;
        response.audit_annotations.insert("decision".into(), note);
        Ok(Some(Steered {
            response,
            mode: mode.as_str(),
            saturated: decision.saturated,
            named_none: decision.first_tier().is_empty() || decision.landing.is_empty(),
            fell_back: route.fell_back(),
            routed_late: route.routed_late(),
        }))
    }

    /// Decides and charges under one write lock while decisions are charged, so the pods of a
    /// burst see each other's charges, each decided once. Deciding against a read and deciding
    /// again when another charge raced it cost more than it saved: with every worker deciding,
    /// most decisions were raced and made two or three times. While decisions predict no
    /// landing (no node fits: nothing to charge), they are made beside each other under a read
    /// lock, and one that does predict a landing is charged if no write came in meanwhile,
    /// else decided again under the write lock. A review that charges nothing (the mode does
    /// not) decides under a read lock. While decisions are charged, a retry of a charged uid is
    /// told apart under the write lock it then decides under: checking it first under a read
    /// lock made every review wait twice behind the deciding writer, for the rare retry.
    fn decide_and_charge(
        &self,
        demand: &PodDemand<'_>,
        view: &ClusterView,
        id: &str,
        charge: bool,
        route: &Route<'_>,
    ) -> Decision {
        use std::sync::atomic::Ordering::Relaxed;
        let mode = route.mode;
        let charge = charge && (mode.writes_affinity() || mode.observes_only());
        self.align_ledger(view);
        if !charge {
            return self.decide_with(demand, view, &self.ledger.read(), route);
        }
        if !self.charging.load(Relaxed) {
            let (decision, seen, charged) = {
                let ledger = self.ledger.read();
                let decision = self.decide_with(demand, view, &ledger, route);
                (decision, self.ledger.writes(), ledger.contains(id))
            };
            if charged || decision.landing.is_empty() {
                return decision;
            }
            self.charging.store(true, Relaxed);
            if let Ok(mut ledger) = self.ledger.write_if_unchanged(seen) {
                charge_decision(&mut ledger, id, demand, &decision);
                return decision;
            }
        }
        let mut ledger = self.ledger.write();
        let decision = self.decide_with(demand, view, &ledger, route);
        if ledger.contains(id) {
            // A retry: decided again as the first time was, charged once.
            return decision;
        }
        if decision.landing.is_empty() {
            self.charging.store(false, Relaxed);
        } else {
            charge_decision(&mut ledger, id, demand, &decision);
        }
        decision
    }

    /// The decision, with its landing where the pod really goes: in observe mode the pod keeps
    /// its own terms, so it lands where the scheduler puts it unsteered.
    fn decide_with(
        &self,
        demand: &PodDemand<'_>,
        view: &ClusterView,
        ledger: &Ledger,
        route: &Route<'_>,
    ) -> Decision {
        let mut decision = placement::decide_indexed(
            &placement::DecisionCtx::new(
                demand,
                view,
                Some(ledger),
                &self.config.placement,
                route.scheduler,
            ),
            Replica {
                unheard: ledger.unheard(),
                heard: ledger.heard_mix(),
                ..self.replica()
            },
            route.indexes,
        );
        if route.mode.observes_only() {
            decision.landing =
                placement::unsteered_landing(demand, view, Some(ledger), route.scheduler);
        }
        decision
    }

    fn is_target(&self, pod: &Pod) -> bool {
        self.not_a_target(pod).is_none()
    }

    /// Why `pod` is not one to steer, when it is not.
    fn not_a_target(&self, pod: &Pod) -> Option<NotTarget> {
        let empty = Default::default();
        let labels = pod.metadata.labels.as_ref().unwrap_or(&empty);
        let annotations = pod.metadata.annotations.as_ref();
        let opted_out = annotations
            .and_then(|a| a.get(SKIP_ANNOTATION))
            .is_some_and(|v| skips(v));
        // Our own mark: this is a reinvocation, the pod was already steered.
        let already_steered = annotations.is_some_and(|a| a.contains_key(ANNOTATION));
        // Created bound (`spec.nodeName`): no scheduler places it, so nothing to steer or charge.
        let already_bound = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .is_some_and(|n| !n.is_empty());
        if opted_out {
            Some(NotTarget::OptedOut)
        } else if already_steered {
            Some(NotTarget::AlreadySteered)
        } else if already_bound {
            Some(NotTarget::Bound)
        } else if !placement::selector::targets_match(&self.config.targets, labels) {
            Some(NotTarget::Labels)
        } else {
            None
        }
    }

    /// Why the server answers `request` without writing anything, in a sentence, when it is
    /// not a pod to steer (an internal problem, which fails open, is not such a reason).
    pub(crate) fn why_skipped(&self, request: &RequestIn) -> Option<String> {
        if !is_pod_create(request) {
            let what = match (
                request.resource.group.as_str(),
                request.resource.resource.as_str(),
                request.sub_resource.as_deref().unwrap_or(""),
            ) {
                ("", "pods", "") => format!("a pod's {}", request.operation),
                ("", "pods", sub) => format!("the `{sub}` subresource of a pod"),
                ("", resource, _) => format!("a {resource} request"),
                (group, resource, _) => format!("a {group}/{resource} request"),
            };
            return Some(format!(
                "{what}: only the CREATE of a pod is steered (its placement cannot change later)"
            ));
        }
        let Some(object) = request.object.as_deref().filter(|o| o.get() != "null") else {
            return Some("the request carries no pod object".into());
        };
        let pod = pod_of(object, request).ok()?;
        let annotation = |key: &str| {
            pod.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(key))
                .map_or("", String::as_str)
                .to_owned()
        };
        Some(match self.not_a_target(&pod)? {
            NotTarget::OptedOut => format!(
                "opted out: annotation {SKIP_ANNOTATION}: {:?}",
                annotation(SKIP_ANNOTATION)
            ),
            NotTarget::AlreadySteered => format!(
                "already steered: it carries {ANNOTATION} (a reinvocation after another webhook)"
            ),
            NotTarget::Bound => format!(
                "created bound to {} (spec.nodeName): no scheduler places it",
                pod.spec
                    .as_ref()
                    .and_then(|s| s.node_name.as_deref())
                    .unwrap_or_default()
            ),
            NotTarget::Labels => {
                let empty = Default::default();
                let labels = pod.metadata.labels.as_ref().unwrap_or(&empty);
                let miss = placement::selector::targets_miss(&self.config.targets, labels)
                    .unwrap_or_default();
                format!("not a target: {miss} (config `targets`)")
            }
        })
    }

    pub(crate) fn config(&self) -> &Config {
        &self.config
    }

    pub(crate) fn store(&self) -> &ViewStore {
        &self.store
    }
}

fn node_names(view: &ClusterView) -> impl Iterator<Item = &str> {
    view.nodes.iter().map(|n| n.name.as_str())
}

/// Charges the pod where `decision` predicts it lands, and remembers the decision's heats
/// there for landing accuracy.
fn charge_decision(ledger: &mut Ledger, id: &str, demand: &PodDemand<'_>, decision: &Decision) {
    ledger.charge(
        id,
        &decision.landing,
        demand.load,
        &demand.facts.requests,
        Instant::now(),
    );
    ledger.tag(id, &demand.facts);
    // The landing nodes are tier-1 nodes; at 5,000 nodes there are ~50 of each.
    let first: crate::hashing::HashMap<&str, f32> = decision
        .first_tier()
        .iter()
        .map(|n| (n.name.as_str(), n.heat as f32))
        .collect();
    let heats = decision
        .landing
        .iter()
        .filter_map(|(name, _)| Some((name.clone(), *first.get(name.as_str())?)))
        .collect();
    ledger.remember_decision(id, heats);
}

/// Reads an AdmissionReview request, checking what must hold to answer it at all.
pub fn parse(body: &[u8]) -> Result<RequestIn, BadReview> {
    // serde would read an array as the fields in order; an AdmissionReview is an object.
    if let Some(first) = body.iter().find(|b| !b.is_ascii_whitespace())
        && *first != b'{'
        && serde_json::from_slice::<serde::de::IgnoredAny>(body).is_ok()
    {
        let what = match first {
            b'[' => "an array",
            b'"' => "a string",
            b'n' => "null",
            b't' | b'f' => "a boolean",
            _ => "a number",
        };
        return Err(BadReview::Shape(format!(
            "{what}, not an object with apiVersion, kind and request"
        )));
    }
    let review: ReviewIn = serde_json::from_slice(body).map_err(|e| match e.classify() {
        serde_json::error::Category::Data => BadReview::Shape(e.to_string()),
        _ => BadReview::NotJson(e.to_string()),
    })?;
    if review.api_version != API_VERSION || review.kind != KIND {
        return Err(BadReview::Version(format!(
            "{}/{}",
            review.api_version, review.kind
        )));
    }
    let request = review.request.ok_or(BadReview::NoRequest)?;
    if request.uid.is_empty() {
        return Err(BadReview::NoUid);
    }
    Ok(request)
}

/// The request's pod object as a Pod. A CREATE may name the namespace in the request only; the
/// job key needs it, so the request's stands in (the patch does not write it).
pub fn pod_of(
    object: &serde_json::value::RawValue,
    request: &RequestIn,
) -> Result<Pod, serde_json::Error> {
    // Only the fields a decision and its patch read (see `pod_read`).
    let mut pod = pod_read::read_pod(object.get())?;
    if pod.metadata.namespace.as_deref().is_none_or(str::is_empty) {
        pod.metadata.namespace = request.namespace.clone();
    }
    Ok(pod)
}

/// Only CREATE of a Pod itself: affinity and schedulerName are immutable afterwards, and
/// subresources (ephemeralcontainers, binding) may change nothing else.
fn is_pod_create(request: &RequestIn) -> bool {
    request.operation == "CREATE"
        && request.resource.group.is_empty()
        && request.resource.resource == "pods"
        && request.sub_resource.as_deref().is_none_or(str::is_empty)
}

/// A short token from the request uid: unique per webhook call, safe inside the annotation.
fn ledger_id(uid: &str) -> String {
    uid.chars()
        .filter(char::is_ascii_alphanumeric)
        .take(16)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inflight::ledger::Ledger;
    use crate::metrics_source::file::embedded_example;
    use serde_json::{Value, json};

    /// A replica with the default configuration on the embedded snapshot, its store and ledger.
    fn on_the_example() -> (Admission, Arc<ViewStore>, Arc<SharedLedger>) {
        let config = Arc::new(Config::default());
        let store = Arc::new(ViewStore::new(config.placement.clone()));
        store.publish_snapshot(embedded_example().expect("embedded snapshot"));
        let ledger = Arc::new(SharedLedger::new(Ledger::new(config.inflight.ttl)));
        let admission = Admission::with_salt(config, store.clone(), ledger.clone(), 7);
        (admission, store, ledger)
    }

    /// The example review's pod, changed by `edit`, as a dry run (nothing is charged, so
    /// every read decides against the same ledger).
    fn request(edit: impl FnOnce(&mut Value)) -> RequestIn {
        let mut review: Value =
            serde_json::from_str(include_str!("../../examples/taskmanager-review.json"))
                .expect("example review");
        edit(&mut review["request"]["object"]);
        review["request"]["dryRun"] = json!(true);
        let review: ReviewIn = serde_json::from_value(review).expect("a review");
        review.request.expect("a request")
    }

    /// Reading only the fields used answers every pod as reading the whole Pod does: the same
    /// patch, warnings and decision, for pods that use each field read (and some that do not).
    #[test]
    fn the_partial_read_answers_as_the_full_pod() {
        let (admission, store, _) = on_the_example();
        let view = store.current();
        let now = SystemTime::now();
        let edits: Vec<fn(&mut Value)> = vec![
            |_| {},
            |o| {
                o["spec"]["initContainers"] = json!([
                    {"name": "sidecar", "image": "x", "restartPolicy": "Always",
                     "resources": {"requests": {"cpu": "3", "memory": "1Gi"}}},
                    {"name": "setup", "image": "y", "resources": {"limits": {"cpu": "8"}}}
                ]);
                o["spec"]["overhead"] = json!({"cpu": "500m"});
            },
            |o| {
                o["spec"]["topologySpreadConstraints"] = json!([
                    {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
                     "whenUnsatisfiable": "DoNotSchedule",
                     "labelSelector": {"matchLabels": {"app": "wordcount"}}}
                ]);
                o["spec"]["tolerations"] = json!([{"operator": "Exists"}]);
            },
            |o| {
                o["spec"]["affinity"] = json!({"podAntiAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 50,
                      "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname",
                        "labelSelector": {"matchLabels": {"app": "wordcount"}}}}]}});
                o["spec"]["schedulerName"] = json!("default-scheduler");
            },
            |o| {
                o["spec"]["nodeSelector"] = json!({"kubernetes.io/os": "linux"});
                o["metadata"]
                    .as_object_mut()
                    .map(|m| m.remove("annotations"));
            },
            // Metadata holding only fields the decision does not read, and no spec at all.
            |o| o["metadata"] = json!({"creationTimestamp": "2026-01-01T00:00:00Z"}),
            |o| {
                o.as_object_mut().map(|m| m.remove("spec"));
            },
        ];
        let mut patched = 0;
        for (k, edit) in edits.into_iter().enumerate() {
            let request = request(edit);
            let object = request.object.as_deref().expect("an object");
            let mut full: Pod = serde_json::from_str(object.get()).expect("full pod");
            if full.metadata.namespace.is_none() {
                full.metadata.namespace = request.namespace.clone();
            }
            let read = pod_of(object, &request).expect("read pod");
            // The demand the decision reads (requests, constraints, load), then the answer.
            let answer = |pod: &Pod| {
                let demand = format!("{:?}", admission.demand(pod, view.as_deref()));
                match admission.steer_pod(&request, pod, view.as_deref(), now) {
                    Ok(Some(steered)) => format!("{demand}\n{:?}", steered.response),
                    Ok(None) => format!("{demand}\nnot steered"),
                    Err(reason) => format!("{demand}\nfailed open: {reason}"),
                }
            };
            let (from_full, from_read) = (answer(&full), answer(&read));
            assert_eq!(from_read, from_full, "pod variant {k}");
            patched += usize::from(from_full.contains("JSONPatch"));
        }
        assert!(patched >= 5, "most variants are steered: {patched}");
    }

    /// A retry of a review that was charged is answered, and charged nothing more, also while
    /// decisions are charged under the write lock (after the first charge of a burst).
    #[test]
    fn a_retry_is_answered_and_charged_once() {
        let (admission, store, ledger) = on_the_example();
        let review = |uid: &str| {
            let mut review: Value =
                serde_json::from_str(include_str!("../../examples/taskmanager-review.json"))
                    .expect("example review");
            review["request"]["uid"] = json!(uid);
            let review: ReviewIn = serde_json::from_value(review).expect("a review");
            let request = review.request.expect("a request");
            let answer = admission.answer(&request, SystemTime::now());
            assert!(answer.review.response.patch.is_some(), "{uid} is steered");
        };
        let nodes: Vec<String> = store
            .current()
            .expect("a view")
            .nodes
            .iter()
            .map(|n| n.name.clone())
            .collect();
        let charged = || {
            let ledger = ledger.read();
            let per_node: Vec<String> = nodes
                .iter()
                .map(|n| format!("{:?}", ledger.extra(n)))
                .collect();
            (ledger.len(), per_node)
        };
        review("aa000000-0000-0000-0000-000000000000");
        review("ba000000-0000-0000-0000-000000000000");
        let before = charged();
        assert_eq!(before.0, 2);
        for uid in [
            "aa000000-0000-0000-0000-000000000000",
            "ba000000-0000-0000-0000-000000000000",
        ] {
            review(uid);
            assert_eq!(charged(), before, "a retry of {uid} charged again");
        }
        review("ca000000-0000-0000-0000-000000000000");
        assert_eq!(charged().0, 3, "a new uid is charged");
    }

    /// A pod created with `spec.nodeName` is bound already: no scheduler places it, so it is
    /// neither patched nor charged, while the same pod unbound is both.
    #[test]
    fn a_pod_created_bound_is_left_alone_and_not_charged() {
        let (admission, _, ledger) = on_the_example();
        let review = |uid: &str, node_name: Option<&str>| {
            let mut review: Value =
                serde_json::from_str(include_str!("../../examples/taskmanager-review.json"))
                    .expect("example review");
            review["request"]["uid"] = json!(uid);
            if let Some(node) = node_name {
                review["request"]["object"]["spec"]["nodeName"] = json!(node);
            }
            let review: ReviewIn = serde_json::from_value(review).expect("a review");
            let request = review.request.expect("a request");
            admission.answer(&request, SystemTime::now())
        };
        let bound = review("da000000-0000-0000-0000-000000000000", Some("worker-05"));
        assert!(
            bound.review.response.patch.is_none(),
            "a bound pod is patched"
        );
        assert_eq!(bound.outcome, Outcome::Skipped);
        assert_eq!(ledger.read().len(), 0, "a bound pod is charged");

        let unbound = review("ea000000-0000-0000-0000-000000000000", Some(""));
        assert!(
            unbound.review.response.patch.is_some(),
            "an empty nodeName is unbound"
        );
        assert_eq!(ledger.read().len(), 1);
    }
}
