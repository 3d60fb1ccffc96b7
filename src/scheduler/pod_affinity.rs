//! InterPodAffinity as upstream v1.33–v1.35 has it
//! (`pkg/scheduler/framework/plugins/interpodaffinity/{filtering,scoring}.go`): the filter for
//! required pod affinity, required pod anti-affinity and existing pods' required anti-affinity
//! against the incoming pod; the score for preferred terms both ways, plus existing pods'
//! required affinity at `hardPodAffinityWeight`. A term's `namespaceSelector` is read against the
//! namespaces' labels the caller passes.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodAffinityTerm;

use super::pod::PodFacts;
use super::pods::{AffinityTerms, ExistingPod, Labels, NO_LABELS, term_selects};

mod filtering;
mod scoring;

pub use filtering::AffinityFilter;
pub use filtering::AffinityUnfit;
pub(crate) use scoring::AffinitySums;
pub use scoring::{AffinityScore, affinity_scores};

/// The incoming pod's term selects pods of `target` (its namespaceSelector merged into the
/// namespaces that exist, as PreFilter does).
fn incoming_selects(
    term: &PodAffinityTerm,
    pod: &PodFacts<'_>,
    namespace_labels: &BTreeMap<String, Labels>,
    target: &PodKind<'_>,
) -> bool {
    term_selects(
        term,
        pod.namespace,
        target.namespace,
        namespace_labels.get(target.namespace),
        target.labels,
    )
}

/// A term of a pod in `owner_namespace` selects the incoming pod (read against its
/// namespace's labels).
fn existing_selects(
    term: &PodAffinityTerm,
    owner_namespace: &str,
    pod: &PodFacts<'_>,
    namespace_labels: &BTreeMap<String, Labels>,
) -> bool {
    let ns_labels = namespace_labels.get(pod.namespace).unwrap_or(&NO_LABELS);
    term_selects(
        term,
        owner_namespace,
        pod.namespace,
        Some(ns_labels),
        pod.labels(),
    )
}

/// Where a kind's namespace, labels and terms are: kinds at one address are alike.
type KindAddress = (*const u8, *const Labels, *const AffinityTerms);

/// Pods alike in namespace, labels and terms (one workload's): the score asks the same of
/// each, so it asks once per kind.
#[derive(Debug, Clone, Copy)]
pub struct PodKind<'a> {
    pub(crate) namespace: &'a str,
    pub(crate) labels: &'a Labels,
    pub(crate) terms: Option<&'a AffinityTerms>,
}

impl PodKind<'_> {
    /// Two kinds that share their namespace, labels and terms by address are alike.
    fn address(&self) -> KindAddress {
        (
            self.namespace.as_ptr(),
            self.labels,
            self.terms.map_or(std::ptr::null(), |t| t),
        )
    }
}

impl ExistingPod {
    pub fn kind(&self) -> PodKind<'_> {
        PodKind {
            namespace: &self.namespace,
            labels: &self.labels,
            terms: self.terms.as_deref(),
        }
    }
}
