//! InterPodAffinity's filter (`filtering.go`): required terms, and existing pods' anti-affinity.

use crate::hashing::HashMap;

use k8s_openapi::api::core::v1::PodAffinityTerm;

use super::{existing_selects, incoming_selects};
use crate::scheduler::node::ModelNode;
use crate::scheduler::pod::PodFacts;
use crate::scheduler::pods::{AlikeMemo, ClusterPods, ExistingPod, Labels, term_selects};
#[cfg(test)]
use crate::scheduler::status::Code;

/// Why the filter rejects a node, in upstream's order of checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AffinityUnfit {
    /// The pod's required affinity is not met there (UnschedulableAndUnresolvable).
    Affinity,
    /// The pod's required anti-affinity selects a pod in the node's domain (Unschedulable).
    AntiAffinity,
    /// An existing pod's required anti-affinity selects the pod (Unschedulable).
    ExistingAntiAffinity,
}

impl AffinityUnfit {
    #[cfg(test)]
    pub(crate) fn code(self) -> Code {
        match self {
            AffinityUnfit::Affinity => Code::UnschedulableAndUnresolvable,
            AffinityUnfit::AntiAffinity | AffinityUnfit::ExistingAntiAffinity => {
                Code::Unschedulable
            }
        }
    }
}

type Pairs<'a> = HashMap<(&'a str, &'a str), i64>;

/// The pod and the node it is on, for the existing pods on nodes the cycle lists.
fn placed<'a, N: AsRef<ModelNode>>(
    cluster: &ClusterPods<'a>,
    nodes: &'a [N],
) -> impl Iterator<Item = (&'a ExistingPod, &'a ModelNode)> {
    cluster
        .pods
        .iter()
        .filter_map(move |p| nodes.get(p.node).map(|n| (p, n.as_ref())))
}

fn bump<'a>(pairs: &mut Pairs<'a>, key: &'a str, labels: &'a Labels, by: i64) {
    if let Some(value) = labels.get(key) {
        *pairs.entry((key, value.as_str())).or_insert(0) += by;
    }
}

/// What PreFilter computes for one pod: per (topology key, value), how many existing pods
/// match its required affinity (all terms), its required anti-affinity (any term), and carry a
/// required anti-affinity term that selects it.
#[derive(Debug, Clone)]
pub(crate) struct AffinityFilter<'a> {
    affinity: &'a [PodAffinityTerm],
    anti_affinity: &'a [PodAffinityTerm],
    affinity_counts: Pairs<'a>,
    anti_affinity_counts: Pairs<'a>,
    existing_anti_affinity_counts: Pairs<'a>,
    /// The pod matches all its own affinity terms (it may be the first of its group).
    matches_own_affinity: bool,
}

impl<'a> AffinityFilter<'a> {
    /// `None` when nothing constrains the pod (PreFilter skips the plugin).
    pub(crate) fn new<N: AsRef<ModelNode>>(
        pod: &PodFacts<'a>,
        nodes: &'a [N],
        cluster: &ClusterPods<'a>,
    ) -> Option<Self> {
        let affinity = pod.required_affinity();
        let anti_affinity = pod.required_anti_affinity();
        let mut existing_anti_affinity_counts = Pairs::default();
        let mut affinity_counts = Pairs::default();
        let mut anti_affinity_counts = Pairs::default();
        // Which terms select a pod, once per run of alike pods: (existing pods' required
        // anti-affinity terms that select the incoming pod, by topology key; all of the pod's
        // affinity terms select it; which of its anti-affinity terms do).
        let mut matched: AlikeMemo<(Vec<&'a str>, bool, Vec<bool>)> = AlikeMemo::default();
        for (p, node) in placed(cluster, nodes) {
            let (existing_keys, all_affinity, anti) = matched.get(p, || {
                let existing_keys = p
                    .group
                    .terms
                    .as_deref()
                    .map(|terms| {
                        terms
                            .required_anti_affinity
                            .iter()
                            .filter(|t| {
                                existing_selects(
                                    t,
                                    &p.group.namespace,
                                    pod,
                                    cluster.namespace_labels,
                                )
                            })
                            .map(|t| t.topology_key.as_str())
                            .collect()
                    })
                    .unwrap_or_default();
                let all_affinity = !affinity.is_empty()
                    && affinity
                        .iter()
                        .all(|t| incoming_selects(t, pod, cluster.namespace_labels, &p.kind()));
                let anti = anti_affinity
                    .iter()
                    .map(|t| incoming_selects(t, pod, cluster.namespace_labels, &p.kind()))
                    .collect();
                (existing_keys, all_affinity, anti)
            });
            let count = i64::from(p.count);
            for &key in existing_keys.iter() {
                bump(&mut existing_anti_affinity_counts, key, &node.labels, count);
            }
            if *all_affinity {
                for t in affinity {
                    bump(&mut affinity_counts, &t.topology_key, &node.labels, count);
                }
            }
            for (t, _) in anti_affinity.iter().zip(anti.iter()).filter(|(_, s)| **s) {
                bump(
                    &mut anti_affinity_counts,
                    &t.topology_key,
                    &node.labels,
                    count,
                );
            }
        }
        if existing_anti_affinity_counts.is_empty()
            && affinity.is_empty()
            && anti_affinity.is_empty()
        {
            return None;
        }
        let own_namespace_labels = cluster.namespace_labels.get(pod.namespace);
        let matches_own_affinity = !affinity.is_empty()
            && affinity.iter().all(|t| {
                term_selects(
                    t,
                    pod.namespace,
                    pod.namespace,
                    own_namespace_labels,
                    pod.labels(),
                )
            });
        Some(AffinityFilter {
            affinity,
            anti_affinity,
            affinity_counts,
            anti_affinity_counts,
            existing_anti_affinity_counts,
            matches_own_affinity,
        })
    }

    /// Filter: affinity, then anti-affinity, then existing pods' anti-affinity.
    pub(crate) fn check(&self, node: &ModelNode) -> Result<(), AffinityUnfit> {
        let count = |pairs: &Pairs<'_>, key: &str, value: &str| -> i64 {
            pairs.get(&(key, value)).copied().unwrap_or(0)
        };
        let mut pods_exist = true;
        for t in self.affinity {
            let Some(value) = node.labels.get(&t.topology_key) else {
                // All topology labels must exist on the node.
                return Err(AffinityUnfit::Affinity);
            };
            if count(&self.affinity_counts, &t.topology_key, value) <= 0 {
                pods_exist = false;
            }
        }
        // No pod anywhere matches yet, but the pod matches its own terms: it may go first.
        let may_go_first = self.affinity_counts.is_empty() && self.matches_own_affinity;
        if !(pods_exist || may_go_first) {
            return Err(AffinityUnfit::Affinity);
        }
        for t in self.anti_affinity {
            if let Some(value) = node.labels.get(&t.topology_key)
                && count(&self.anti_affinity_counts, &t.topology_key, value) > 0
            {
                return Err(AffinityUnfit::AntiAffinity);
            }
        }
        if !self.existing_anti_affinity_counts.is_empty()
            && node
                .labels
                .iter()
                .any(|(k, v)| count(&self.existing_anti_affinity_counts, k, v) > 0)
        {
            return Err(AffinityUnfit::ExistingAntiAffinity);
        }
        Ok(())
    }
}
