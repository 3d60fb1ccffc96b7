//! The patch step: a decision written into the response, as the patch and the decision note.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;

use super::FailOpen;
use super::review::{RequestIn, ResponseOut};
use crate::config::Config;
use crate::decider::Decided;
use crate::inflight::note::{ANNOTATION, DecisionNote};
use crate::patch::{self, Changes};
use crate::placement::PodDemand;

/// A decision written into a response.
pub(super) struct Steered {
    pub(super) response: ResponseOut,
    pub(super) mode: &'static str,
    pub(super) saturated: bool,
    pub(super) named_none: bool,
    pub(super) fell_back: bool,
    pub(super) routed_late: bool,
}

/// What the response to one steered pod is written from.
pub(super) struct Reply<'a> {
    pub(super) config: &'a Config,
    pub(super) request: &'a RequestIn,
    pub(super) pod: &'a Pod,
    pub(super) demand: &'a PodDemand<'a>,
    pub(super) decided: &'a Decided<'a>,
    pub(super) snapshot_age: Duration,
}

impl Reply<'_> {
    /// The patched response; `id` is the decision's ledger id, which the note carries.
    pub(super) fn steered(self, id: String) -> Result<Steered, FailOpen> {
        let Decided { decision, route } = self.decided;
        let mode = route.mode;
        let observing = mode.observes_only();
        let note = DecisionNote {
            id,
            mode: mode.as_str().into(),
            load: self.demand.load,
            estimate: self.demand.source.to_string(),
            nodes: decision.landing.clone(),
            avoided: decision.avoid.len(),
            snapshot_age_secs: self.snapshot_age.as_secs(),
            would: observing
                .then(|| decision.first_tier().first())
                .flatten()
                .map(|n| (n.name.clone(), n.heat)),
        }
        .to_string();
        let changes = Changes {
            preferred: if mode.writes_affinity() {
                let placement = &self.config.placement;
                let mut terms = patch::preferred_json(decision, &placement.node_match);
                // Where the scheduler scores every feasible node, the tiers reach each pod's
                // sample: no band terms (and the keeper writes no bands, `bands::needed`).
                if decision.sample_fraction < 1.0 {
                    terms.extend(patch::band_terms(&placement.heat_bands));
                }
                patch::Preferred::Json(terms)
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
        let patch = patch::build(self.pod, &changes)?;
        let mut response = ResponseOut::allow(&self.request.uid).with_patch(&patch)?;
        response.audit_annotations.insert("decision".into(), note);
        Ok(Steered {
            response,
            mode: mode.as_str(),
            saturated: decision.saturated,
            named_none: decision.first_tier().is_empty() || decision.landing.is_empty(),
            fell_back: route.fell_back(),
            routed_late: route.routed_late(),
        })
    }
}
