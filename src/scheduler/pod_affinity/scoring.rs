//! InterPodAffinity's score (`scoring.go`): term weights summed per topology domain, normalised.

use std::collections::BTreeMap;

use super::{KindAddress, PodKind, existing_selects, incoming_selects};
use crate::scheduler::domains::Domains;
use crate::scheduler::node::ModelNode;
use crate::scheduler::pod::PodFacts;
use crate::scheduler::pods::{ClusterPods, Labels};
use crate::scheduler::scores::MAX_NODE_SCORE;

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
pub(crate) struct AffinityScore<'p, 'd> {
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
pub(crate) struct AffinitySums {
    keys: Vec<KeyScores>,
    /// Pods counted where a term matched and the node has the term's key, once per term (some
    /// did: upstream's score map is not empty).
    matched: i64,
}

impl<'p, 'd> AffinityScore<'p, 'd> {
    /// `hard_pod_affinity_weight`: the plugin argument (0 ignores existing pods' required
    /// affinity).
    pub(crate) fn new(
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
    pub(crate) fn with_sums(
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
    pub(crate) fn into_sums(self) -> AffinitySums {
        self.sums
    }

    /// Pods of `kind` on the nodes of `placements` (node index, pods there).
    pub(crate) fn add(
        &mut self,
        kind: PodKind<'_>,
        placements: impl IntoIterator<Item = (usize, u32)>,
    ) {
        self.add_pods(
            kind,
            placements
                .into_iter()
                .map(|(node, count)| (node, i64::from(count))),
        );
    }

    /// Pods of `kind` gained (`pods` > 0) or lost on the nodes of `placements`.
    pub(crate) fn add_pods(
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
    pub(crate) fn scores(&self, candidates: &[usize]) -> Option<Vec<i64>> {
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
    pub(crate) fn keep_best(
        &self,
        candidates: &[u32],
        weight: i64,
        margin: i64,
    ) -> Option<Vec<u32>> {
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
        self.keep_by_raws(candidates, &raws, (min, max), weight, margin)
    }

    /// What [`AffinityScore::keep_best`] keeps of `candidates`, given their raw scores and
    /// the lowest and highest of them.
    pub(super) fn keep_by_raws(
        &self,
        candidates: &[u32],
        raws: &[i64],
        (min, max): (i64, i64),
        weight: i64,
        margin: i64,
    ) -> Option<Vec<u32>> {
        if candidates.is_empty() || self.sums.matched <= 0 {
            return None;
        }
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
                .zip(raws)
                .filter(|&(_, &raw)| raw >= lowest_kept)
                .map(|(&i, _)| i)
                .collect(),
        )
    }

    /// How many topology keys the score sums over so far.
    pub(super) fn key_count(&self) -> usize {
        self.sums.keys.len()
    }

    /// The domains of the key in `slot`, and how many there are.
    pub(super) fn key_domains(&self, slot: usize) -> (&Domains, usize) {
        let key = &self.sums.keys[slot];
        (&key.domains, key.sums.len())
    }

    /// Node `i`'s raw score: the weights of the pods around it, per topology key.
    pub(super) fn raw(&self, i: usize) -> i64 {
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
pub(crate) fn affinity_scores<N: AsRef<ModelNode>>(
    pod: &PodFacts<'_>,
    nodes: &[N],
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
