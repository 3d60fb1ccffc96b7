//! What a pod already says about where it may run, checked against one node.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{NodeSelectorRequirement, NodeSelectorTerm, Pod, Toleration};

use crate::config::PinningRule;
use crate::scheduler::terms::{any_term_matches, requirement_matches, tolerated};
use crate::view::memo::MemoKey;
use crate::view::{ClusterView, NodeView};

/// Why a node cannot take the pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ineligible {
    NotReady,
    Cordoned,
    Taint,
    NodeSelector,
    RequiredAffinity,
    Pinning,
    /// PodTopologySpread: the node lacks a `DoNotSchedule` constraint's topology key.
    SpreadLabel,
    /// PodTopologySpread: the pod there would exceed a `DoNotSchedule` constraint's maxSkew.
    SpreadSkew,
    /// InterPodAffinity: the pod's required affinity finds no matching pod in the domain.
    PodAffinity,
    /// InterPodAffinity: the pod's required anti-affinity matches a pod in the domain.
    PodAntiAffinity,
    /// InterPodAffinity: a pod in the domain has required anti-affinity against this one.
    ExistingAntiAffinity,
}

impl Ineligible {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Ineligible::NotReady => "not-ready",
            Ineligible::Cordoned => "cordoned",
            Ineligible::Taint => "taint",
            Ineligible::NodeSelector => "nodeSelector",
            Ineligible::RequiredAffinity => "required-affinity",
            Ineligible::Pinning => "pinning",
            Ineligible::SpreadLabel => "topology-spread-label",
            Ineligible::SpreadSkew => "topology-spread-skew",
            Ineligible::PodAffinity => "pod-affinity",
            Ineligible::PodAntiAffinity => "pod-anti-affinity",
            Ineligible::ExistingAntiAffinity => "existing-pod-anti-affinity",
        }
    }
}

/// The pod's filters, borrowed from the pod once per review.
#[derive(Debug, Default)]
pub struct PodConstraints<'a> {
    node_selector: Option<&'a BTreeMap<String, String>>,
    /// ORed terms; `None` when the pod has no required node affinity.
    required_terms: Option<&'a [NodeSelectorTerm]>,
    pub(crate) tolerations: &'a [Toleration],
    /// Requirements the pinning rules add for this pod (ANDed).
    pub(crate) pinning: Vec<NodeSelectorRequirement>,
}

impl<'a> PodConstraints<'a> {
    pub fn of(pod: &'a Pod, rules: &[PinningRule]) -> Self {
        let spec = pod.spec.as_ref();
        let required_terms = spec
            .and_then(|s| s.affinity.as_ref())
            .and_then(|a| a.node_affinity.as_ref())
            .and_then(|na| {
                na.required_during_scheduling_ignored_during_execution
                    .as_ref()
            })
            .map(|r| r.node_selector_terms.as_slice())
            // An empty term list fails validation anyway; it constrains nothing here.
            .filter(|terms| !terms.is_empty());
        let labels = pod.metadata.labels.as_ref();
        let pinning = rules
            .iter()
            .filter_map(|rule| {
                let value = labels?.get(&rule.pod_label)?;
                Some(NodeSelectorRequirement {
                    key: rule.node_label.clone(),
                    operator: "In".into(),
                    values: Some(vec![value.clone()]),
                })
            })
            .collect();
        PodConstraints {
            node_selector: spec.and_then(|s| s.node_selector.as_ref()),
            required_terms,
            tolerations: spec
                .and_then(|s| s.tolerations.as_deref())
                .unwrap_or_default(),
            pinning,
        }
    }

    /// The scheduler's filters that we can see, in the order it applies them.
    pub(crate) fn check(&self, node: &NodeView) -> Result<(), Ineligible> {
        if !node.ready {
            return Err(Ineligible::NotReady);
        }
        if node.unschedulable {
            return Err(Ineligible::Cordoned);
        }
        if !node
            .taints
            .iter()
            .filter(|t| t.filters())
            .all(|t| tolerated(self.tolerations, t))
        {
            return Err(Ineligible::Taint);
        }
        if let Some(selector) = self.node_selector
            && !selector.iter().all(|(k, v)| node.labels.get(k) == Some(v))
        {
            return Err(Ineligible::NodeSelector);
        }
        if let Some(terms) = self.required_terms
            && !any_term_matches(terms, &node.name, &node.labels)
        {
            return Err(Ineligible::RequiredAffinity);
        }
        if !self
            .pinning
            .iter()
            .all(|r| requirement_matches(r, &node.labels))
        {
            return Err(Ineligible::Pinning);
        }
        Ok(())
    }
}

impl PodConstraints<'_> {
    /// Everything [`PodConstraints::check`] reads from the pod, as a memo key. `None` if it
    /// cannot be written out (then nothing is memoised).
    pub(in crate::placement) fn memo_key(&self) -> Option<MemoKey> {
        serde_json::to_string(&(
            self.node_selector,
            self.required_terms,
            self.tolerations,
            &self.pinning,
        ))
        .ok()
        .map(MemoKey::Eligible)
    }
}

/// Positions in `view` of the nodes `constraints` allow, in view order. Worked out once per
/// view for each distinct set of filters: the pods of a burst share a few.
pub(crate) fn eligible_nodes(constraints: &PodConstraints<'_>, view: &ClusterView) -> Arc<[u32]> {
    let compute = || {
        (0..view.nodes.len())
            .filter(|&i| constraints.check(&view.nodes[i]).is_ok())
            .filter_map(|i| u32::try_from(i).ok())
            .collect()
    };
    match constraints.memo_key() {
        Some(key) => view.memo.get_or_compute(key, compute),
        None => compute().into(),
    }
}
