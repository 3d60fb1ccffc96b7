//! InterPodAffinity as upstream v1.33–v1.35 has it
//! (`pkg/scheduler/framework/plugins/interpodaffinity/{filtering,scoring}.go`): the filter for
//! required pod affinity, required pod anti-affinity and existing pods' required anti-affinity
//! against the incoming pod; the score for preferred terms both ways, plus existing pods'
//! required affinity at `hardPodAffinityWeight`. A term's `namespaceSelector` is read against the
//! namespaces' labels the caller passes.

use crate::hashing::HashMap;

use k8s_openapi::api::core::v1::{PodAffinityTerm, WeightedPodAffinityTerm};

use super::cycle::{Code, PodFacts};
use super::node::ModelNode;
use super::pods::{AlikeMemo, ClusterPods, ExistingPod, Labels, NO_LABELS, term_selects};
use super::scores::MAX_NODE_SCORE;

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
    pub fn code(self) -> Code {
        match self {
            AffinityUnfit::Affinity => Code::UnschedulableAndUnresolvable,
            AffinityUnfit::AntiAffinity | AffinityUnfit::ExistingAntiAffinity => {
                Code::Unschedulable
            }
        }
    }
}

type Pairs<'a> = HashMap<(&'a str, &'a str), i64>;

fn required(terms: Option<&Vec<PodAffinityTerm>>) -> &[PodAffinityTerm] {
    terms.map(Vec::as_slice).unwrap_or_default()
}

fn preferred(terms: Option<&Vec<WeightedPodAffinityTerm>>) -> &[WeightedPodAffinityTerm] {
    terms.map(Vec::as_slice).unwrap_or_default()
}

impl<'a> PodFacts<'a> {
    pub fn required_affinity(&self) -> &'a [PodAffinityTerm] {
        required(self.pod_affinity.and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_ref()
        }))
    }

    pub fn required_anti_affinity(&self) -> &'a [PodAffinityTerm] {
        required(self.pod_anti_affinity.and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_ref()
        }))
    }

    pub fn preferred_affinity(&self) -> &'a [WeightedPodAffinityTerm] {
        preferred(self.pod_affinity.and_then(|a| {
            a.preferred_during_scheduling_ignored_during_execution
                .as_ref()
        }))
    }

    pub fn preferred_anti_affinity(&self) -> &'a [WeightedPodAffinityTerm] {
        preferred(self.pod_anti_affinity.and_then(|a| {
            a.preferred_during_scheduling_ignored_during_execution
                .as_ref()
        }))
    }

    /// The pod has terms that count other pods (topology spread, pod affinity or
    /// anti-affinity): its pending siblings must count where they will land.
    pub fn counts_other_pods(&self) -> bool {
        !self.spread_constraints.is_empty()
            || self.pod_affinity.is_some()
            || self.pod_anti_affinity.is_some()
    }
}

/// The incoming pod's term selects an existing pod (its namespaceSelector merged into the
/// namespaces that exist, as PreFilter does).
fn incoming_selects(
    term: &PodAffinityTerm,
    pod: &PodFacts<'_>,
    cluster: &ClusterPods<'_>,
    target: &ExistingPod,
) -> bool {
    term_selects(
        term,
        pod.namespace,
        &target.namespace,
        cluster.namespace_labels.get(&*target.namespace),
        &target.labels,
    )
}

/// An existing pod's term selects the incoming pod (read against its namespace's labels).
fn existing_selects(
    term: &PodAffinityTerm,
    owner: &ExistingPod,
    pod: &PodFacts<'_>,
    cluster: &ClusterPods<'_>,
) -> bool {
    let ns_labels = cluster
        .namespace_labels
        .get(pod.namespace)
        .unwrap_or(&NO_LABELS);
    term_selects(
        term,
        &owner.namespace,
        pod.namespace,
        Some(ns_labels),
        pod.labels(),
    )
}

/// The pod and the node it is on, for the existing pods on nodes the cycle lists.
fn placed<'a>(
    cluster: &ClusterPods<'a>,
    nodes: &'a [ModelNode],
) -> impl Iterator<Item = (&'a ExistingPod, &'a ModelNode)> {
    cluster
        .pods
        .iter()
        .filter_map(move |p| nodes.get(p.node).map(|n| (p, n)))
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
pub struct AffinityFilter<'a> {
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
    pub fn new(
        pod: &PodFacts<'a>,
        nodes: &'a [ModelNode],
        cluster: &ClusterPods<'a>,
    ) -> Option<Self> {
        let affinity = pod.required_affinity();
        let anti_affinity = pod.required_anti_affinity();
        let mut existing_anti_affinity_counts = Pairs::default();
        let mut affinity_counts = Pairs::default();
        let mut anti_affinity_counts = Pairs::default();
        for (p, node) in placed(cluster, nodes) {
            if let Some(terms) = p.terms.as_deref() {
                for t in &terms.required_anti_affinity {
                    if existing_selects(t, p, pod, cluster) {
                        bump(
                            &mut existing_anti_affinity_counts,
                            &t.topology_key,
                            &node.labels,
                            i64::from(p.count),
                        );
                    }
                }
            }
            if !affinity.is_empty()
                && affinity
                    .iter()
                    .all(|t| incoming_selects(t, pod, cluster, p))
            {
                for t in affinity {
                    bump(
                        &mut affinity_counts,
                        &t.topology_key,
                        &node.labels,
                        i64::from(p.count),
                    );
                }
            }
            for t in anti_affinity {
                if incoming_selects(t, pod, cluster, p) {
                    bump(
                        &mut anti_affinity_counts,
                        &t.topology_key,
                        &node.labels,
                        i64::from(p.count),
                    );
                }
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
    pub fn check(&self, node: &ModelNode) -> Result<(), AffinityUnfit> {
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

/// Per topology key, per value: the summed weights (`scoreMap`).
type TopologyScore<'a> = HashMap<&'a str, HashMap<&'a str, i64>>;

/// Adds `weight` to the domain of `node` for `key`; a key's map is made for `domains` domains
/// (at most one per existing pod), so it does not grow step by step.
fn add<'a>(
    scores: &mut TopologyScore<'a>,
    key: &'a str,
    node: &'a ModelNode,
    weight: i64,
    domains: usize,
) {
    if let Some(value) = node.labels.get(key) {
        *scores
            .entry(key)
            .or_insert_with(|| HashMap::with_capacity_and_hasher(domains, Default::default()))
            .entry(value.as_str())
            .or_insert(0) += weight;
    }
}

/// Score and NormalizeScore for each of `candidates` (indexes into `nodes`): 0..100, min-max
/// normalised. `None` when PreScore skips (no term of either side matched anything), which
/// scores every node 0.
pub fn affinity_scores(
    pod: &PodFacts<'_>,
    nodes: &[ModelNode],
    candidates: &[usize],
    cluster: &ClusterPods<'_>,
) -> Option<Vec<i64>> {
    if candidates.is_empty() {
        return None;
    }
    let preferred_affinity = pod.preferred_affinity();
    let preferred_anti_affinity = pod.preferred_anti_affinity();
    let has_constraints = !preferred_affinity.is_empty() || !preferred_anti_affinity.is_empty();
    let hard_weight = i64::from(cluster.hard_pod_affinity_weight);
    let mut scores = TopologyScore::default();
    let domains = cluster.pods.len().min(nodes.len());
    // What one pod of a run of alike pods adds, by topology key.
    let mut adds: AlikeMemo<Vec<(&str, i64)>> = AlikeMemo::default();
    for (p, node) in placed(cluster, nodes) {
        if node.labels.is_empty() || (!has_constraints && p.terms.is_none()) {
            continue;
        }
        let adds = adds.get(p, || {
            let mut adds = Vec::new();
            for (terms, sign) in [(preferred_affinity, 1), (preferred_anti_affinity, -1)] {
                for wt in terms {
                    let t = &wt.pod_affinity_term;
                    if incoming_selects(t, pod, cluster, p) {
                        adds.push((t.topology_key.as_str(), sign * i64::from(wt.weight)));
                    }
                }
            }
            let Some(terms) = p.terms.as_deref() else {
                return adds;
            };
            if hard_weight > 0 {
                for t in &terms.required_affinity {
                    if existing_selects(t, p, pod, cluster) {
                        adds.push((t.topology_key.as_str(), hard_weight));
                    }
                }
            }
            for (terms, sign) in [
                (&terms.preferred_affinity, 1),
                (&terms.preferred_anti_affinity, -1),
            ] {
                for wt in terms {
                    let t = &wt.pod_affinity_term;
                    if existing_selects(t, p, pod, cluster) {
                        adds.push((t.topology_key.as_str(), sign * i64::from(wt.weight)));
                    }
                }
            }
            adds
        });
        for &(key, weight) in adds {
            add(&mut scores, key, node, weight * i64::from(p.count), domains);
        }
    }
    if scores.is_empty() {
        return None;
    }
    let raw: Vec<i64> = candidates
        .iter()
        .map(|&i| {
            scores
                .iter()
                .filter_map(|(key, values)| {
                    let value = nodes[i].labels.get(*key)?;
                    values.get(value.as_str()).copied()
                })
                .sum()
        })
        .collect();
    let min = raw.iter().copied().min().unwrap_or(0);
    let max = raw.iter().copied().max().unwrap_or(0);
    let spread = max - min;
    Some(
        raw.iter()
            .map(|&s| {
                if spread > 0 {
                    (MAX_NODE_SCORE as f64 * ((s - min) as f64 / spread as f64)) as i64
                } else {
                    0
                }
            })
            .collect(),
    )
}
