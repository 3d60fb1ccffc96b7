//! From request bytes to response bytes: parse, target, decide, patch; fail open on anything
//! internal. A placement webhook never rejects a pod. Each step has its file: `parse` reads the
//! review, `target` says whether its pod is one to steer, `demand` (with `estimate`) what the
//! pod will need, the [`Decider`] decides and charges, `respond` writes the patch.

mod demand;
mod estimate;
mod parse;
mod pod_read;
mod respond;
pub(crate) mod review;
mod selector;
mod target;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::SystemTime;

use k8s_openapi::api::core::v1::Pod;
use tracing::{debug, warn};

use crate::config::Config;
use crate::decider::Decider;
use crate::inflight::shared::SharedWorld;
use crate::patch;
use crate::telemetry::Outcome;
use crate::view::{ClusterView, ViewStore};
use respond::Steered;
use review::{RequestIn, ResponseOut, ReviewOut};

pub use demand::demand;
pub use parse::{BadReview, parse, pod_of};
pub use target::SKIP_VALUES;

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
    /// Routed to that scheduler while a renewal of its Lease was late (see
    /// [`crate::inventory::lease::Liveness::Late`]).
    pub(crate) routed_late: bool,
}

/// Everything a review needs; shared by the server and the `review` command.
pub struct Admission {
    config: Arc<Config>,
    store: Arc<ViewStore>,
    decider: Decider,
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
    pub fn new(config: Arc<Config>, store: Arc<ViewStore>, world: Arc<SharedWorld>) -> Self {
        use std::hash::BuildHasher;
        // Random per process: two replicas order near-ties differently.
        let salt = std::collections::hash_map::RandomState::new().hash_one(0x5a17_u64);
        Self::with_salt(config, store, world, salt)
    }

    /// Like [`Admission::new`] with a chosen tie-breaking salt (repeatable runs).
    pub fn with_salt(
        config: Arc<Config>,
        store: Arc<ViewStore>,
        world: Arc<SharedWorld>,
        salt: u64,
    ) -> Self {
        Admission {
            decider: Decider::new(config.clone(), world, salt),
            config,
            store,
        }
    }

    /// Sets up its decider: the peers it shares, the Lease it routes by.
    pub(crate) fn deciding_by(mut self, decide: impl FnOnce(Decider) -> Decider) -> Self {
        self.decider = decide(self.decider);
        self
    }

    pub(crate) fn decider(&self) -> &Decider {
        &self.decider
    }

    /// Why the server answers `request` without writing anything, when its pod is not one to
    /// steer (see [`target::why_skipped`]).
    pub(crate) fn why_skipped(&self, request: &RequestIn) -> Option<String> {
        target::why_skipped(&self.config.targets, request)
    }

    /// The decision for `pod` against `view` as things stand, charging nothing.
    pub(crate) fn dry_decide(&self, pod: &Pod, view: &ClusterView) -> crate::placement::Decision {
        (self.decider).dry_decide(&demand(&self.config, pod, Some(view)), view)
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
        if !target::is_pod_create(request) {
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
        if target::not_a_target(&self.config.targets, pod).is_some() {
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

        let demand = demand(&self.config, pod, Some(view));
        let id = ledger_id(&request.uid);
        let decided = (self.decider).decide(&demand, view, &id, request.dry_run == Some(true), now);
        let steered = respond::Reply {
            config: &self.config,
            request,
            pod,
            demand: &demand,
            decided: &decided,
            snapshot_age: age,
        }
        .steered(id)?;
        Ok(Some(steered))
    }

    pub(crate) fn config(&self) -> &Config {
        &self.config
    }

    pub(crate) fn store(&self) -> &ViewStore {
        &self.store
    }
}

/// A short token from the request uid: unique per webhook call, safe inside the annotation.
fn ledger_id(uid: &str) -> String {
    uid.chars()
        .filter(char::is_ascii_alphanumeric)
        .take(16)
        .collect()
}
