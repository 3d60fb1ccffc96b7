//! InterPodAffinity as upstream v1.33–v1.35 has it
//! (`pkg/scheduler/framework/plugins/interpodaffinity/{filtering,scoring}.go`): the filter for
//! required pod affinity, required pod anti-affinity and existing pods' required anti-affinity
//! against the incoming pod; the score for preferred terms both ways, plus existing pods'
//! required affinity at `hardPodAffinityWeight`. A term's `namespaceSelector` is read against the
//! namespaces' labels the caller passes.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodAffinityTerm;

use super::pod::PodFacts;
use super::pods::{Labels, NO_LABELS, term_selects};

mod carried;
mod filtering;
mod scoring;

pub(crate) use carried::CarriedRaws;
pub(crate) use filtering::AffinityFilter;
pub(crate) use filtering::AffinityUnfit;
pub(crate) use scoring::AffinitySums;
pub(crate) use scoring::{AffinityScore, affinity_scores};

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

pub(crate) use super::pods::KindAddress;
pub(crate) use super::pods::PodKind;
