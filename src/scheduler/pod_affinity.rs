//! InterPodAffinity as upstream v1.33–v1.35 has it
//! (`pkg/scheduler/framework/plugins/interpodaffinity/{filtering,scoring}.go`): the filter for
//! required pod affinity, required pod anti-affinity and existing pods' required anti-affinity
//! against the incoming pod; the score for preferred terms both ways, plus existing pods'
//! required affinity at `hardPodAffinityWeight`. A term's `namespaceSelector` is read against the
//! namespaces' labels the caller passes.

use crate::hashing::HashMap;

use k8s_openapi::api::core::v1::PodAffinityTerm;

use super::node::ModelNode;
use super::pod::PodFacts;
use std::collections::BTreeMap;

use super::domains::Domains;
use super::pods::{
    AffinityTerms, AlikeMemo, ClusterPods, ExistingPod, Labels, NO_LABELS, term_selects,
};
use super::scores::MAX_NODE_SCORE;
use super::status::Code;

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
        // Which terms select a pod, once per run of alike pods: (existing pods' required
        // anti-affinity terms that select the incoming pod, by topology key; all of the pod's
        // affinity terms select it; which of its anti-affinity terms do).
        let mut matched: AlikeMemo<(Vec<&'a str>, bool, Vec<bool>)> = AlikeMemo::default();
        for (p, node) in placed(cluster, nodes) {
            let (existing_keys, all_affinity, anti) = matched.get(p, || {
                let existing_keys = p
                    .terms
                    .as_deref()
                    .map(|terms| {
                        terms
                            .required_anti_affinity
                            .iter()
                            .filter(|t| {
                                existing_selects(t, &p.namespace, pod, cluster.namespace_labels)
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

/// Where a kind's namespace, labels and terms are: kinds at one address are alike.
type KindAddress = (*const u8, *const Labels, *const AffinityTerms);

/// Pods alike in namespace, labels and terms (one workload's): the score asks the same of
/// each, so it asks once per kind.
#[derive(Debug, Clone, Copy)]
pub struct PodKind<'a> {
    pub namespace: &'a str,
    pub labels: &'a Labels,
    pub terms: Option<&'a AffinityTerms>,
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

/// One topology key's domains and the weights summed in each (`scoreMap[key]`).
#[derive(Debug, Clone)]
struct KeyScores {
    key: String,
    domains: Domains,
    sums: Vec<i64>,
}

/// InterPodAffinity's Score and NormalizeScore for one pod, fed the pods around it kind by
/// kind: each kind's terms are matched once, then its pods add their weight to the domain of
/// the node they are on. Upstream sums per (topology key, value); here per domain number of
/// `domains(key)`, which is the same sum.
pub struct AffinityScore<'p, 'd> {
    pod: &'d PodFacts<'p>,
    namespace_labels: &'d BTreeMap<String, Labels>,
    hard_weight: i64,
    domains: &'d dyn Fn(&str) -> Domains,
    sums: AffinitySums,
    /// The last kind added and what each of its pods adds, by key slot.
    last: Option<(KindAddress, Vec<(usize, i64)>)>,
}

/// What the pods around one pod add to each topology domain: the part of an [`AffinityScore`]
/// that can be kept between decisions (for pods alike, over the same nodes) and brought up to
/// date with the pods that came and went since.
#[derive(Debug, Clone, Default)]
pub struct AffinitySums {
    keys: Vec<KeyScores>,
    /// Pods counted where a term matched and the node has the term's key, once per term (some
    /// did: upstream's score map is not empty).
    matched: i64,
}

impl<'p, 'd> AffinityScore<'p, 'd> {
    /// `hard_pod_affinity_weight`: the plugin argument (0 ignores existing pods' required
    /// affinity).
    pub fn new(
        pod: &'d PodFacts<'p>,
        namespace_labels: &'d BTreeMap<String, Labels>,
        hard_pod_affinity_weight: i32,
        domains: &'d dyn Fn(&str) -> Domains,
    ) -> Self {
        Self::with_sums(
            pod,
            namespace_labels,
            hard_pod_affinity_weight,
            domains,
            AffinitySums::default(),
        )
    }

    /// Goes on from `sums`, kept from an earlier score of a pod alike over the same nodes.
    pub fn with_sums(
        pod: &'d PodFacts<'p>,
        namespace_labels: &'d BTreeMap<String, Labels>,
        hard_pod_affinity_weight: i32,
        domains: &'d dyn Fn(&str) -> Domains,
        sums: AffinitySums,
    ) -> Self {
        AffinityScore {
            pod,
            namespace_labels,
            hard_weight: i64::from(hard_pod_affinity_weight),
            domains,
            sums,
            last: None,
        }
    }

    /// The sums so far, to go on from later.
    pub fn into_sums(self) -> AffinitySums {
        self.sums
    }

    /// Pods of `kind` on the nodes of `placements` (node index, pods there).
    pub fn add(&mut self, kind: PodKind<'_>, placements: impl IntoIterator<Item = (usize, u32)>) {
        self.add_pods(
            kind,
            placements
                .into_iter()
                .map(|(node, count)| (node, i64::from(count))),
        );
    }

    /// Pods of `kind` gained (`pods` > 0) or lost on the nodes of `placements`.
    pub fn add_pods(
        &mut self,
        kind: PodKind<'_>,
        placements: impl IntoIterator<Item = (usize, i64)>,
    ) {
        let address = kind.address();
        if self.last.as_ref().is_none_or(|(last, _)| *last != address) {
            let adds = self.adds(kind);
            self.last = Some((address, adds));
        }
        let Some((_, adds)) = &self.last else {
            return;
        };
        if adds.is_empty() {
            return;
        }
        for (node, pods) in placements {
            for &(slot, weight) in adds {
                let key = &mut self.sums.keys[slot];
                if let Some(domain) = key.domains.of_node(node) {
                    key.sums[domain] += weight * pods;
                    self.sums.matched += pods;
                }
            }
        }
    }

    /// What one pod of `kind` adds, by key slot: the incoming pod's preferred terms that
    /// select it, and its own terms that select the incoming pod.
    fn adds(&mut self, kind: PodKind<'_>) -> Vec<(usize, i64)> {
        let pod = self.pod;
        let mut adds: Vec<(&str, i64)> = Vec::new();
        for (terms, sign) in [
            (pod.preferred_affinity(), 1),
            (pod.preferred_anti_affinity(), -1),
        ] {
            for wt in terms {
                let t = &wt.pod_affinity_term;
                if incoming_selects(t, pod, self.namespace_labels, &kind) {
                    adds.push((t.topology_key.as_str(), sign * i64::from(wt.weight)));
                }
            }
        }
        if let Some(terms) = kind.terms {
            if self.hard_weight > 0 {
                for t in &terms.required_affinity {
                    if existing_selects(t, kind.namespace, pod, self.namespace_labels) {
                        adds.push((t.topology_key.as_str(), self.hard_weight));
                    }
                }
            }
            for (terms, sign) in [
                (&terms.preferred_affinity, 1),
                (&terms.preferred_anti_affinity, -1),
            ] {
                for wt in terms {
                    let t = &wt.pod_affinity_term;
                    if existing_selects(t, kind.namespace, pod, self.namespace_labels) {
                        adds.push((t.topology_key.as_str(), sign * i64::from(wt.weight)));
                    }
                }
            }
        }
        adds.into_iter()
            .map(|(key, weight)| (self.slot(key), weight))
            .collect()
    }

    /// The slot of `key`, its domains looked up the first time.
    fn slot(&mut self, key: &str) -> usize {
        let keys = &mut self.sums.keys;
        if let Some(slot) = keys.iter().position(|k| k.key == key) {
            return slot;
        }
        let domains = (self.domains)(key);
        keys.push(KeyScores {
            key: key.to_string(),
            sums: vec![0; domains.count()],
            domains,
        });
        keys.len() - 1
    }

    /// The scores of `candidates` (node indexes): 0..100, min-max normalised. `None` when
    /// PreScore skips (no term of either side matched anything), which scores every node 0.
    pub fn scores(&self, candidates: &[usize]) -> Option<Vec<i64>> {
        if candidates.is_empty() || self.sums.matched <= 0 {
            return None;
        }
        let mut scores: Vec<i64> = candidates.iter().map(|&i| self.raw(i)).collect();
        let min = scores.iter().copied().min().unwrap_or(0);
        let max = scores.iter().copied().max().unwrap_or(0);
        for s in &mut scores {
            *s = normalized(*s, min, max - min);
        }
        Some(scores)
    }

    /// Of `candidates` (node indexes), those whose score times `weight` is less than `margin`
    /// below the best's, as [`AffinityScore::scores`] would score them, without the scores:
    /// one pass for the range, one to keep. `None` when PreScore skips (every node scores 0).
    pub fn keep_best(&self, candidates: &[u32], weight: i64, margin: i64) -> Option<Vec<u32>> {
        if candidates.is_empty() || self.sums.matched <= 0 {
            return None;
        }
        // Each raw sum read once: the second pass compares them in order, without looking
        // up the node's domain again.
        let raws: Vec<i64> = match self.sums.keys.as_slice() {
            // The usual case, one topology key: a loop the compiler sees whole.
            [key] => candidates
                .iter()
                .map(|&i| key.domains.of_node(i as usize).map_or(0, |d| key.sums[d]))
                .collect(),
            _ => candidates.iter().map(|&i| self.raw(i as usize)).collect(),
        };
        let (min, max) = raws
            .iter()
            .fold((i64::MAX, i64::MIN), |(lo, hi), &s| (lo.min(s), hi.max(s)));
        let spread = max - min;
        // The best scores MAX_NODE_SCORE when the scores differ, and all score 0 when not.
        let best = if spread > 0 {
            MAX_NODE_SCORE * weight
        } else {
            0
        };
        let kept = |raw: i64| best - normalized(raw, min, spread) * weight < margin;
        if !kept(max) {
            return Some(Vec::new());
        }
        // The score rises with the raw sum: the lowest raw sum kept, found once, keeps the
        // nodes by one comparison each instead of a division.
        let (mut low, mut high) = (min, max);
        while low < high {
            let middle = low + (high - low) / 2;
            if kept(middle) {
                high = middle;
            } else {
                low = middle + 1;
            }
        }
        let lowest_kept = low;
        Some(
            candidates
                .iter()
                .zip(&raws)
                .filter(|&(_, &raw)| raw >= lowest_kept)
                .map(|(&i, _)| i)
                .collect(),
        )
    }

    /// Node `i`'s raw score: the weights of the pods around it, per topology key.
    fn raw(&self, i: usize) -> i64 {
        match self.sums.keys.as_slice() {
            // The usual case, one topology key: no inner loop.
            [key] => key.domains.of_node(i).map_or(0, |d| key.sums[d]),
            keys => keys
                .iter()
                .filter_map(|k| Some(k.sums[k.domains.of_node(i)?]))
                .sum(),
        }
    }
}

/// NormalizeScore: `raw` min-max scaled to 0..MAX_NODE_SCORE over scores `spread` apart.
fn normalized(raw: i64, min: i64, spread: i64) -> i64 {
    if spread > 0 {
        (MAX_NODE_SCORE as f64 * ((raw - min) as f64 / spread as f64)) as i64
    } else {
        0
    }
}

/// Score and NormalizeScore for each of `candidates` (indexes into `nodes`), over the pods of
/// `cluster`: see [`AffinityScore::scores`].
pub fn affinity_scores(
    pod: &PodFacts<'_>,
    nodes: &[ModelNode],
    candidates: &[usize],
    cluster: &ClusterPods<'_>,
) -> Option<Vec<i64>> {
    if candidates.is_empty() {
        return None;
    }
    let domains = |key: &str| Domains::of(nodes, key);
    let mut score = AffinityScore::new(
        pod,
        cluster.namespace_labels,
        cluster.hard_pod_affinity_weight,
        &domains,
    );
    for p in cluster.pods {
        score.add(p.kind(), [(p.node, p.count)]);
    }
    score.scores(candidates)
}
