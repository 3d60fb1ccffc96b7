//! The pods already in the cluster, as the plugins that look at other pods (PodTopologySpread,
//! InterPodAffinity) need them, and label selectors with `metav1.LabelSelectorAsSelector`
//! semantics.
//!
//! An [`ExistingPod`] keeps only its namespace, its labels, its node and, for the few pods that
//! have them, its pod (anti-)affinity terms. Labels and terms are behind `Arc` so that the pods of
//! one workload can share them (a pod watch interns them); the pod itself costs a few words.

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    Affinity, Pod, PodAffinity, PodAffinityTerm, PodAntiAffinity, WeightedPodAffinityTerm,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

use super::spread_defaults::SpreadDefaults;

pub type Labels = BTreeMap<String, String>;

/// Labels of nothing: what a pod or namespace without labels has.
pub(crate) static NO_LABELS: Labels = BTreeMap::new();

/// What the plugins that look at other pods read from a pod besides its node: its namespace,
/// its labels and its own pod (anti-)affinity terms. The pods of one workload are one group,
/// sharing one copy.
#[derive(Debug, Clone, PartialEq)]
pub struct PodGroup {
    pub(crate) namespace: Arc<str>,
    pub(crate) labels: Arc<Labels>,
    /// `None` for the (many) pods without any.
    pub(crate) terms: Option<Arc<AffinityTerms>>,
}

// The terms hold no floating-point number: equality is reflexive.
impl Eq for PodGroup {}

impl Hash for PodGroup {
    // The terms are left out of the hash (they have no `Hash`): the pods of one namespace and
    // label set nearly always share them, and equality still compares them.
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.namespace.hash(state);
        self.labels.hash(state);
    }
}

impl PodGroup {
    pub(crate) fn of(pod: &Pod) -> Self {
        PodGroup {
            namespace: Arc::from(pod.metadata.namespace.as_deref().unwrap_or_default()),
            labels: Arc::new(pod.metadata.labels.clone().unwrap_or_default()),
            terms: AffinityTerms::of(pod.spec.as_ref().and_then(|s| s.affinity.as_ref()))
                .map(Arc::new),
        }
    }

    /// The group as the plugins read it, borrowed.
    pub(crate) fn kind(&self) -> PodKind<'_> {
        PodKind {
            namespace: &self.namespace,
            labels: &self.labels,
            terms: self.terms.as_deref(),
        }
    }

    /// The group's pods carry required anti-affinity terms: the scheduler checks every new pod
    /// against them (the symmetric part of InterPodAffinity).
    pub(crate) fn has_required_anti_affinity(&self) -> bool {
        self.terms
            .as_ref()
            .is_some_and(|t| !t.required_anti_affinity.is_empty())
    }
}

/// Where a kind's namespace, labels and terms are: kinds at one address are alike.
pub(crate) type KindAddress = (*const u8, *const Labels, *const AffinityTerms);

/// A pod group borrowed, from a [`PodGroup`] or from the incoming pod: the plugins ask the same
/// of every pod of a kind, so they ask once per kind.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PodKind<'a> {
    pub(crate) namespace: &'a str,
    pub(crate) labels: &'a Labels,
    pub(crate) terms: Option<&'a AffinityTerms>,
}

impl PodKind<'_> {
    /// Two kinds that share their namespace, labels and terms by address are alike.
    pub(crate) fn address(&self) -> KindAddress {
        (
            self.namespace.as_ptr(),
            self.labels,
            self.terms.map_or(std::ptr::null(), |t| t),
        )
    }
}

/// A pod bound (or assumed) to a node, as the scheduler's snapshot holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct ExistingPod {
    pub(crate) group: PodGroup,
    /// Index into the nodes of the cycle; a pod on a node the cycle does not list is ignored.
    pub(crate) node: usize,
    /// A deletion timestamp is set: PodTopologySpread no longer counts it.
    pub(crate) terminating: bool,
    /// How many pods this entry stands for: pods alike in group, node and deletion each count,
    /// but are matched against the terms once.
    pub(crate) count: u32,
}

/// The pod (anti-)affinity terms of an existing pod, as `framework.PodInfo` parses them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AffinityTerms {
    pub(crate) required_affinity: Vec<PodAffinityTerm>,
    pub(crate) required_anti_affinity: Vec<PodAffinityTerm>,
    pub(crate) preferred_affinity: Vec<WeightedPodAffinityTerm>,
    pub(crate) preferred_anti_affinity: Vec<WeightedPodAffinityTerm>,
}

impl AffinityTerms {
    /// The terms of `affinity`, `None` when it has no pod (anti-)affinity term at all.
    pub(crate) fn of(affinity: Option<&Affinity>) -> Option<Self> {
        let affinity = affinity?;
        Self::of_parts(
            affinity.pod_affinity.as_ref(),
            affinity.pod_anti_affinity.as_ref(),
        )
    }

    /// [`AffinityTerms::of`] from the two parts of an affinity.
    pub(crate) fn of_parts(
        pa: Option<&PodAffinity>,
        paa: Option<&PodAntiAffinity>,
    ) -> Option<Self> {
        let terms = AffinityTerms {
            required_affinity: pa
                .and_then(|a| {
                    a.required_during_scheduling_ignored_during_execution
                        .clone()
                })
                .unwrap_or_default(),
            required_anti_affinity: paa
                .and_then(|a| {
                    a.required_during_scheduling_ignored_during_execution
                        .clone()
                })
                .unwrap_or_default(),
            preferred_affinity: pa
                .and_then(|a| {
                    a.preferred_during_scheduling_ignored_during_execution
                        .clone()
                })
                .unwrap_or_default(),
            preferred_anti_affinity: paa
                .and_then(|a| {
                    a.preferred_during_scheduling_ignored_during_execution
                        .clone()
                })
                .unwrap_or_default(),
        };
        let empty = terms.required_affinity.is_empty()
            && terms.required_anti_affinity.is_empty()
            && terms.preferred_affinity.is_empty()
            && terms.preferred_anti_affinity.is_empty();
        (!empty).then_some(terms)
    }
}

impl ExistingPod {
    /// A pod on node `node`, its labels and terms not shared with any other pod.
    pub fn of(pod: &Pod, node: usize) -> Self {
        ExistingPod {
            group: PodGroup::of(pod),
            node,
            terminating: pod.metadata.deletion_timestamp.is_some(),
            count: 1,
        }
    }

    pub(crate) fn kind(&self) -> PodKind<'_> {
        self.group.kind()
    }
}

/// One answer per run of alike pods: the plugins ask the same of every pod (does a term select
/// it, does one of its terms select the incoming pod), and pods of one template come side by
/// side sharing their namespace, labels and terms (see [`ExistingPod::count`]). The answer
/// for the last pod is kept while the next shares all three, by pointer.
pub(crate) struct AlikeMemo<T> {
    last: Option<KindAddress>,
    answer: Option<T>,
}

impl<T> Default for AlikeMemo<T> {
    fn default() -> Self {
        AlikeMemo {
            last: None,
            answer: None,
        }
    }
}

impl<T> AlikeMemo<T> {
    /// The answer for `pod`: the last one when `pod` is alike the last pod asked about.
    pub(crate) fn get(&mut self, pod: &ExistingPod, compute: impl FnOnce() -> T) -> &T {
        let key = pod.kind().address();
        if self.last != Some(key) {
            self.last = Some(key);
            self.answer = None;
        }
        self.answer.get_or_insert_with(compute)
    }
}

/// What the plugins that look at other pods read besides the nodes and the incoming pod.
#[derive(Debug, Clone, Copy)]
pub struct ClusterPods<'a> {
    pub(crate) pods: &'a [ExistingPod],
    /// Labels of every namespace, for `namespaceSelector`; a namespace absent here has none.
    pub(crate) namespace_labels: &'a BTreeMap<String, Labels>,
    /// PodTopologySpread's cluster-level default constraints.
    pub(crate) spread_defaults: &'a SpreadDefaults,
    /// InterPodAffinity's `hardPodAffinityWeight` (1 by default; 0 ignores existing pods'
    /// required affinity when scoring).
    pub(crate) hard_pod_affinity_weight: i32,
}

/// Default plugin arguments for [`ClusterPods`].
pub(crate) static SYSTEM_SPREAD_DEFAULTS: SpreadDefaults = SpreadDefaults::System;
pub(crate) const DEFAULT_HARD_POD_AFFINITY_WEIGHT: i32 = 1;

impl<'a> ClusterPods<'a> {
    /// `pods` with the default plugin arguments.
    pub fn new(pods: &'a [ExistingPod], namespace_labels: &'a BTreeMap<String, Labels>) -> Self {
        ClusterPods {
            pods,
            namespace_labels,
            spread_defaults: &SYSTEM_SPREAD_DEFAULTS,
            hard_pod_affinity_weight: DEFAULT_HARD_POD_AFFINITY_WEIGHT,
        }
    }
}

/// One requirement; `None` when malformed (upstream's conversion fails).
fn requirement(req: &LabelSelectorRequirement, labels: &Labels) -> Option<bool> {
    let values = req.values.as_deref().unwrap_or_default();
    super::terms::set_requirement(&req.operator, values, labels.get(&req.key))
}

/// A selector that has no requirement (`{}`): it selects everything (`labels.Everything()`).
pub(crate) fn selects_everything(selector: &LabelSelector) -> bool {
    selector.match_labels.as_ref().is_none_or(|m| m.is_empty())
        && selector
            .match_expressions
            .as_deref()
            .unwrap_or_default()
            .is_empty()
}

/// Whether `selector` selects `labels`: a missing selector selects nothing, an empty one
/// everything, a malformed one nothing.
pub(crate) fn selector_matches(selector: Option<&LabelSelector>, labels: &Labels) -> bool {
    let Some(selector) = selector else {
        return false;
    };
    let labels_ok = selector
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    labels_ok
        && selector
            .match_expressions
            .iter()
            .flatten()
            .all(|r| requirement(r, labels) == Some(true))
}

/// `AffinityTerm.Matches`: the term of a pod in namespace `owner_namespace` selects `target`
/// (in `target_namespace`, whose labels are `target_namespace_labels`, `None` when the
/// namespace is unknown) when the namespace is listed or selected and the labels are selected.
pub(crate) fn term_selects(
    term: &PodAffinityTerm,
    owner_namespace: &str,
    target_namespace: &str,
    target_namespace_labels: Option<&Labels>,
    target_labels: &Labels,
) -> bool {
    let listed = term.namespaces.as_deref().unwrap_or_default();
    let namespace_ok = if listed.is_empty() && term.namespace_selector.is_none() {
        target_namespace == owner_namespace
    } else {
        listed.iter().any(|n| n == target_namespace)
            || term.namespace_selector.as_ref().is_some_and(|s| {
                selects_everything(s)
                    || target_namespace_labels.is_some_and(|l| selector_matches(Some(s), l))
            })
    };
    namespace_ok && selector_matches(term.label_selector.as_ref(), target_labels)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn selectors_nil_empty_and_expressions() {
        let l = labels(&[("app", "tm"), ("job", "a")]);
        assert!(!selector_matches(None, &l), "nil selects nothing");
        assert!(selector_matches(Some(&LabelSelector::default()), &l));
        let sel: LabelSelector = serde_json::from_value(serde_json::json!({
            "matchLabels": {"app": "tm"},
            "matchExpressions": [{"key": "job", "operator": "In", "values": ["a", "b"]},
                                 {"key": "x", "operator": "DoesNotExist"}]}))
        .expect("selector");
        assert!(selector_matches(Some(&sel), &l));
        let bad: LabelSelector = serde_json::from_value(serde_json::json!({
            "matchExpressions": [{"key": "job", "operator": "In"}]}))
        .expect("selector");
        assert!(
            !selector_matches(Some(&bad), &l),
            "malformed selects nothing"
        );
    }

    #[test]
    fn existing_pod_keeps_terms_only_when_present() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"namespace": "flink", "labels": {"app": "tm"}},
            "spec": {"containers": [], "affinity": {"nodeAffinity": {}}}}))
        .expect("pod");
        let p = ExistingPod::of(&pod, 3);
        assert_eq!(&*p.group.namespace, "flink");
        assert_eq!(p.node, 3);
        assert!(p.group.terms.is_none());
    }
}
