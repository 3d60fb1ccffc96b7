//! What the plugins read from a pod, and whether a node meets its required node affinity.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    NodeSelectorTerm, Pod, PodAffinity, PodAffinityTerm, PodAntiAffinity, PodSpec,
    PreferredSchedulingTerm, Toleration, TopologySpreadConstraint, WeightedPodAffinityTerm,
};

use super::node::ModelNode;
use super::pods::{AffinityTerms, Labels, NO_LABELS, PodGroup};
use super::resources::PodRequests;
use super::terms::{any_term_matches, label_value};

/// What the plugins read from a pod, taken from it once per cycle.
#[derive(Debug, Clone, Default)]
pub struct PodFacts<'a> {
    pub requests: PodRequests,
    pub(crate) tolerations: &'a [Toleration],
    pub(crate) node_selector: Option<&'a BTreeMap<String, String>>,
    pub(crate) required_terms: &'a [NodeSelectorTerm],
    pub(crate) preferred_terms: &'a [PreferredSchedulingTerm],
    /// The pod's namespace and labels (PodTopologySpread, InterPodAffinity).
    pub(crate) namespace: &'a str,
    pub(crate) labels: Option<&'a Labels>,
    pub(crate) spread_constraints: &'a [TopologySpreadConstraint],
    pub(crate) pod_affinity: Option<&'a PodAffinity>,
    pub(crate) pod_anti_affinity: Option<&'a PodAntiAffinity>,
    /// The selectors of the Services, ReplicaSets, StatefulSets and ReplicationControllers that
    /// select the pod: with none, the default spread constraints do not apply to it. Not in the
    /// pod itself; the caller fills it in.
    pub(crate) owner_selectors: &'a [Labels],
}

impl<'a> PodFacts<'a> {
    pub fn of(pod: &'a Pod) -> Self {
        let mut facts = PodFacts::without_requests(pod);
        if pod.spec.is_some() {
            facts.requests = PodRequests::of(pod);
        }
        facts
    }

    /// Everything but the requests, which cost a walk over the containers.
    pub(crate) fn without_requests(pod: &'a Pod) -> Self {
        let mut facts = match pod.spec.as_ref() {
            Some(spec) => PodFacts::of_spec(spec),
            None => PodFacts::default(),
        };
        facts.namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        facts.labels = pod.metadata.labels.as_ref();
        facts
    }

    pub(crate) fn labels(&self) -> &'a Labels {
        self.labels.unwrap_or(&NO_LABELS)
    }

    /// Everything from the spec; the requests need the whole pod, the namespace and labels its
    /// metadata.
    pub(crate) fn of_spec(spec: &'a PodSpec) -> Self {
        let node_affinity = spec
            .affinity
            .as_ref()
            .and_then(|a| a.node_affinity.as_ref());
        PodFacts {
            requests: PodRequests::default(),
            tolerations: spec.tolerations.as_deref().unwrap_or_default(),
            node_selector: spec.node_selector.as_ref(),
            required_terms: node_affinity
                .and_then(|na| {
                    na.required_during_scheduling_ignored_during_execution
                        .as_ref()
                })
                .map(|r| r.node_selector_terms.as_slice())
                .unwrap_or_default(),
            preferred_terms: node_affinity
                .and_then(|na| {
                    na.preferred_during_scheduling_ignored_during_execution
                        .as_deref()
                })
                .unwrap_or_default(),
            spread_constraints: spec
                .topology_spread_constraints
                .as_deref()
                .unwrap_or_default(),
            pod_affinity: spec.affinity.as_ref().and_then(|a| a.pod_affinity.as_ref()),
            pod_anti_affinity: spec
                .affinity
                .as_ref()
                .and_then(|a| a.pod_anti_affinity.as_ref()),
            ..PodFacts::default()
        }
    }
}

fn required(terms: Option<&Vec<PodAffinityTerm>>) -> &[PodAffinityTerm] {
    terms.map(Vec::as_slice).unwrap_or_default()
}

fn preferred(terms: Option<&Vec<WeightedPodAffinityTerm>>) -> &[WeightedPodAffinityTerm] {
    terms.map(Vec::as_slice).unwrap_or_default()
}

impl<'a> PodFacts<'a> {
    pub(crate) fn required_affinity(&self) -> &'a [PodAffinityTerm] {
        required(self.pod_affinity.and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_ref()
        }))
    }

    pub(crate) fn required_anti_affinity(&self) -> &'a [PodAffinityTerm] {
        required(self.pod_anti_affinity.and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_ref()
        }))
    }

    pub(crate) fn preferred_affinity(&self) -> &'a [WeightedPodAffinityTerm] {
        preferred(self.pod_affinity.and_then(|a| {
            a.preferred_during_scheduling_ignored_during_execution
                .as_ref()
        }))
    }

    pub(crate) fn preferred_anti_affinity(&self) -> &'a [WeightedPodAffinityTerm] {
        preferred(self.pod_anti_affinity.and_then(|a| {
            a.preferred_during_scheduling_ignored_during_execution
                .as_ref()
        }))
    }

    /// The pod has terms that count other pods (topology spread, pod affinity or
    /// anti-affinity): its pending siblings must count where they will land.
    pub(crate) fn counts_other_pods(&self) -> bool {
        !self.spread_constraints.is_empty()
            || self.pod_affinity.is_some()
            || self.pod_anti_affinity.is_some()
    }
}

/// `nodeaffinity.GetRequiredNodeAffinity(pod).Match(node)`: the nodeSelector and the required
/// node affinity terms.
pub(crate) fn required_node_affinity_matches(pod: &PodFacts<'_>, node: &ModelNode) -> bool {
    pod.node_selector.is_none_or(|selector| {
        selector
            .iter()
            .all(|(k, v)| label_value(&node.labels, k) == Some(v))
    }) && any_term_matches(pod.required_terms, &node.name, &node.labels)
}

impl PodGroup {
    /// The group of the pod `facts` describes.
    pub(crate) fn of_facts(facts: &PodFacts<'_>) -> Self {
        PodGroup {
            namespace: std::sync::Arc::from(facts.namespace),
            labels: std::sync::Arc::new(facts.labels().clone()),
            terms: AffinityTerms::of_parts(facts.pod_affinity, facts.pod_anti_affinity)
                .map(std::sync::Arc::new),
        }
    }
}
