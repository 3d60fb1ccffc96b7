//! The scheduler's filters that count other pods: PodTopologySpread's `DoNotSchedule`
//! constraints and InterPodAffinity's required terms (the pod's own, and existing pods'
//! required anti-affinity against it).
//!
//! Unlike the node filters (`constraints`), their answer changes with every pod bound or
//! steered, so it is not memoised per view: it is worked out for each decision, and only for
//! pods whose eligibility depends on other pods. Bound pods count where they are (the pod
//! watch); pods charged and not yet bound count where they most likely land, which is what
//! the scheduler will see by the time it reaches this pod.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::inflight::ledger::Ledger;
use crate::inflight::pod_groups::PodGroup;
use crate::scheduler::cycle::PodFacts;
use crate::scheduler::pod_affinity::AffinityUnfit;
use crate::scheduler::pods::term_selects;
use crate::scheduler::{ClusterPods, ExistingPod, PodFilters, SpreadUnfit, Unfit};
use crate::view::ClusterView;

use super::constraints::Ineligible;

/// Whether the pod's eligibility depends on the pods around it: it has a `DoNotSchedule`
/// spread constraint or a required pod (anti-)affinity term, or some bound pod's required
/// anti-affinity selects it.
pub fn applies(facts: &PodFacts<'_>, ledger: &Ledger) -> bool {
    facts
        .spread_constraints
        .iter()
        .any(|c| c.when_unsatisfiable == "DoNotSchedule")
        || !facts.required_affinity().is_empty()
        || !facts.required_anti_affinity().is_empty()
        || ledger
            .groups
            .with_required_anti_affinity()
            .iter()
            .any(|group| anti_affinity_selects(group, facts))
}

/// A required anti-affinity term of the group's pods selects the pod.
fn anti_affinity_selects(group: &PodGroup, facts: &PodFacts<'_>) -> bool {
    group.terms.as_ref().is_some_and(|terms| {
        terms.required_anti_affinity.iter().any(|term| {
            term_selects(
                term,
                &group.namespace,
                facts.namespace,
                None,
                facts.labels(),
            )
        })
    })
}

/// The pod's terms may select pods of other namespaces.
fn looks_beyond_namespace(facts: &PodFacts<'_>) -> bool {
    let terms = facts
        .required_affinity()
        .iter()
        .chain(facts.required_anti_affinity());
    let weighted = facts
        .preferred_affinity()
        .iter()
        .chain(facts.preferred_anti_affinity())
        .map(|w| &w.pod_affinity_term);
    terms.chain(weighted).any(|t| {
        t.namespace_selector.is_some() || t.namespaces.as_ref().is_some_and(|n| !n.is_empty())
    })
}

/// The pods the plugins may read for this pod, at their positions in `view` (which `ledger`
/// is aligned with): those of its namespace, and those whose terms reach out to other pods.
pub fn pods_around(facts: &PodFacts<'_>, view: &ClusterView, ledger: &Ledger) -> Vec<ExistingPod> {
    if !ledger.is_aligned(view.id) {
        return Vec::new();
    }
    let everywhere = looks_beyond_namespace(facts);
    let relevant = |group: &PodGroup| {
        everywhere || &*group.namespace == facts.namespace || group.terms.is_some()
    };
    let existing = |group: &Arc<PodGroup>, node: usize| ExistingPod {
        namespace: group.namespace.clone(),
        labels: group.labels.clone(),
        node,
        terminating: false,
        terms: group.terms.clone(),
    };
    let mut pods = Vec::new();
    for (group, on_node) in ledger.groups.groups() {
        if !relevant(group) {
            continue;
        }
        for &(number, count) in on_node {
            if let Some(position) = ledger.position_of_occupancy_number(number) {
                pods.extend((0..count).map(|_| existing(group, position)));
            }
        }
    }
    for (group, position) in ledger.pending_groups() {
        if relevant(group) {
            pods.push(existing(group, position));
        }
    }
    pods
}

/// The filters of one pod against the pods around it, ready to check each node.
pub struct AroundFilters<'a> {
    nodes: &'a [crate::scheduler::ModelNode],
    filters: PodFilters<'a>,
}

/// Namespace labels are not watched: a `namespaceSelector` other than `{}` selects no
/// namespace (see the README's limits).
static NO_NAMESPACE_LABELS: BTreeMap<String, crate::scheduler::pods::Labels> = BTreeMap::new();

impl<'a> AroundFilters<'a> {
    pub fn new(facts: &PodFacts<'a>, view: &'a ClusterView, pods: &'a [ExistingPod]) -> Self {
        let nodes = view.model_nodes();
        let cluster = ClusterPods::new(pods, &NO_NAMESPACE_LABELS);
        AroundFilters {
            nodes,
            filters: PodFilters::new(facts, nodes, &cluster),
        }
    }

    /// Why the node at `position` cannot take the pod, if it cannot.
    pub fn check(&self, facts: &PodFacts<'_>, position: usize) -> Result<(), Ineligible> {
        let Some(node) = self.nodes.get(position) else {
            return Ok(());
        };
        self.filters.check(facts, node).map_err(ineligible)
    }
}

fn ineligible(unfit: Unfit) -> Ineligible {
    match unfit {
        Unfit::TopologySpread(SpreadUnfit::MissingLabel) => Ineligible::SpreadLabel,
        Unfit::TopologySpread(SpreadUnfit::Skew) => Ineligible::SpreadSkew,
        Unfit::InterPodAffinity(AffinityUnfit::Affinity) => Ineligible::PodAffinity,
        Unfit::InterPodAffinity(AffinityUnfit::AntiAffinity) => Ineligible::PodAntiAffinity,
        Unfit::InterPodAffinity(AffinityUnfit::ExistingAntiAffinity) => {
            Ineligible::ExistingAntiAffinity
        }
        // The node filters are `constraints`' job; not produced here.
        Unfit::Unschedulable | Unfit::Taint | Unfit::NodeAffinity | Unfit::Resources => {
            Ineligible::RequiredAffinity
        }
    }
}

/// `eligible` (view positions) less the nodes the filters that count other pods reject;
/// `None` when the pod has no such filter.
pub fn restrict(
    eligible: &[u32],
    facts: &PodFacts<'_>,
    view: &ClusterView,
    ledger: &Ledger,
) -> Option<Arc<[u32]>> {
    if !applies(facts, ledger) {
        return None;
    }
    let pods = pods_around(facts, view, ledger);
    let filters = AroundFilters::new(facts, view, &pods);
    Some(
        eligible
            .iter()
            .copied()
            .filter(|&p| filters.check(facts, p as usize).is_ok())
            .collect(),
    )
}
