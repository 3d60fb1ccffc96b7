//! PodTopologySpread as upstream v1.33–v1.35 has it
//! (`pkg/scheduler/framework/plugins/podtopologyspread/{common,filtering,scoring,plugin}.go`):
//! the filter for `whenUnsatisfiable: DoNotSchedule` and the score for `ScheduleAnyway`, with
//! `minDomains`, `matchLabelKeys`, `nodeAffinityPolicy` / `nodeTaintsPolicy` and the
//! cluster-level default constraints (which apply only to a pod without constraints of its own
//! that a Service, ReplicaSet, StatefulSet or ReplicationController selects).

use std::collections::BTreeMap;

use crate::hashing::HashMap;

use k8s_openapi::api::core::v1::TopologySpreadConstraint;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use super::node::ModelNode;
use super::pod::{PodFacts, required_node_affinity_matches};
use super::pods::{
    AlikeMemo, ClusterPods, ExistingPod, Labels, selector_matches, selects_everything,
};
use super::scores::MAX_NODE_SCORE;
use super::spread_defaults::{SCHEDULE_ANYWAY, SpreadDefaults};
#[cfg(test)]
use super::status::Code;
use super::terms::tolerated;
use crate::well_known::HOSTNAME;

const DO_NOT_SCHEDULE: &str = "DoNotSchedule";

/// Why the filter rejects a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpreadUnfit {
    /// The node lacks a constraint's topology key (UnschedulableAndUnresolvable).
    MissingLabel,
    /// Placing the pod there would exceed a constraint's maxSkew (Unschedulable).
    Skew,
}

impl SpreadUnfit {
    #[cfg(test)]
    pub(crate) fn code(self) -> Code {
        match self {
            SpreadUnfit::MissingLabel => Code::UnschedulableAndUnresolvable,
            SpreadUnfit::Skew => Code::Unschedulable,
        }
    }
}

/// A parsed selector: the labelSelector (or nothing / everything) ANDed with exact pairs (from
/// `matchLabelKeys`, or the owners' selectors for the default constraints).
#[derive(Debug, Clone)]
enum Base<'a> {
    Nothing,
    Everything,
    Selector(&'a LabelSelector),
}

#[derive(Debug, Clone)]
struct Selector<'a> {
    base: Base<'a>,
    pairs: Vec<(&'a str, &'a str)>,
}

impl Selector<'_> {
    fn matches(&self, labels: &Labels) -> bool {
        let base = match self.base {
            Base::Nothing => false,
            Base::Everything => true,
            Base::Selector(s) => selector_matches(Some(s), labels),
        };
        base && self
            .pairs
            .iter()
            .all(|(k, v)| labels.get(*k).is_some_and(|l| l == v))
    }

    /// `labels.Selector.Empty()`: no requirement at all; counts no pod (`countPodsMatchSelector`).
    fn is_empty(&self) -> bool {
        self.pairs.is_empty()
            && match self.base {
                Base::Nothing => false,
                Base::Everything => true,
                Base::Selector(s) => selects_everything(s),
            }
    }
}

#[derive(Debug, Clone)]
struct Constraint<'a> {
    max_skew: i64,
    key: &'a str,
    selector: Selector<'a>,
    min_domains: i64,
    honor_node_affinity: bool,
    honor_node_taints: bool,
}

impl Constraint<'_> {
    /// `matchNodeInclusionPolicies`: whether the node's pods and domain count at all.
    fn includes(&self, pod: &PodFacts<'_>, node: &ModelNode) -> bool {
        if self.honor_node_affinity && !required_node_affinity_matches(pod, node) {
            return false;
        }
        !(self.honor_node_taints
            && node
                .taints
                .iter()
                .any(|t| t.filters() && !tolerated(pod.tolerations, t)))
    }

    fn is_hostname(&self) -> bool {
        self.key == HOSTNAME
    }
}

/// `filterTopologySpreadConstraints`: the constraints with `action`, selectors parsed and
/// `matchLabelKeys` ANDed in.
fn convert<'a>(
    constraints: &'a [TopologySpreadConstraint],
    pod_labels: &'a Labels,
    action: &str,
) -> Vec<Constraint<'a>> {
    constraints
        .iter()
        .filter(|c| c.when_unsatisfiable == action)
        .map(|c| {
            let base = match &c.label_selector {
                None => Base::Nothing,
                Some(s) => Base::Selector(s),
            };
            let pairs = match base {
                // Merging into a selector that selects nothing keeps it selecting nothing.
                Base::Nothing => Vec::new(),
                _ => c
                    .match_label_keys
                    .iter()
                    .flatten()
                    .filter_map(|k| pod_labels.get_key_value(k))
                    .map(|(k, v)| (k.as_str(), v.as_str()))
                    .collect(),
            };
            Constraint {
                max_skew: i64::from(c.max_skew),
                key: &c.topology_key,
                selector: Selector { base, pairs },
                min_domains: i64::from(c.min_domains.unwrap_or(1)),
                honor_node_affinity: c.node_affinity_policy.as_deref() != Some("Ignore"),
                honor_node_taints: c.node_taints_policy.as_deref() == Some("Honor"),
            }
        })
        .collect()
}

/// The pod's own constraints with `action`, or, when it has none at all, the default ones with
/// the selector merged from its owners' (`helper.DefaultSelector`); no owner, no defaults.
fn constraints<'a>(
    pod: &PodFacts<'a>,
    defaults: &'a SpreadDefaults,
    action: &str,
) -> Vec<Constraint<'a>> {
    if !pod.spread_constraints.is_empty() {
        return convert(pod.spread_constraints, pod.labels(), action);
    }
    let mut constraints = convert(defaults.constraints(), pod.labels(), action);
    if constraints.is_empty() {
        return constraints;
    }
    let merged: BTreeMap<&str, &str> = pod
        .owner_selectors
        .iter()
        .flatten()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    if merged.is_empty() {
        return Vec::new();
    }
    for c in &mut constraints {
        c.selector = Selector {
            base: Base::Everything,
            pairs: merged.iter().map(|(k, v)| (*k, *v)).collect(),
        };
    }
    constraints
}

/// For each constraint, the pods on each node it counts (`countPodsMatchSelector`): same
/// namespace as the incoming pod, not terminating, selected; an empty selector counts none.
fn matching_per_node(
    constraints: &[Constraint<'_>],
    namespace: &str,
    pods: &[ExistingPod],
    nodes: usize,
) -> Vec<Vec<i64>> {
    let mut counts = vec![vec![0i64; nodes]; constraints.len()];
    let mut selected = AlikeMemo::default();
    for p in pods {
        if p.terminating || p.node >= nodes {
            continue;
        }
        let selected: &Vec<bool> = selected.get(p, || {
            constraints
                .iter()
                .map(|c| {
                    &*p.group.namespace == namespace
                        && !c.selector.is_empty()
                        && c.selector.matches(&p.group.labels)
                })
                .collect()
        });
        for (per_node, _) in counts.iter_mut().zip(selected).filter(|(_, s)| **s) {
            per_node[p.node] += i64::from(p.count);
        }
    }
    counts
}

fn has_all_keys(node: &ModelNode, constraints: &[Constraint<'_>]) -> bool {
    constraints.iter().all(|c| node.labels.contains_key(c.key))
}

/// What PreFilter computes for one pod: its DoNotSchedule constraints and, for each, the
/// matching pods per eligible domain.
#[derive(Debug, Clone)]
pub(crate) struct SpreadFilter<'a> {
    constraints: Vec<Constraint<'a>>,
    counts: Vec<HashMap<&'a str, i64>>,
    /// The global minimum each constraint's skew is taken against (`minMatchNum`).
    min_match: Vec<i64>,
}

impl<'a> SpreadFilter<'a> {
    /// `None` when the pod has no DoNotSchedule constraint (PreFilter skips the plugin).
    pub(crate) fn new<N: AsRef<ModelNode>>(
        pod: &PodFacts<'a>,
        nodes: &'a [N],
        cluster: &ClusterPods<'a>,
    ) -> Option<Self> {
        let constraints = constraints(pod, cluster.spread_defaults, DO_NOT_SCHEDULE);
        if constraints.is_empty() {
            return None;
        }
        let per_node = matching_per_node(&constraints, pod.namespace, cluster.pods, nodes.len());
        let mut counts = vec![HashMap::default(); constraints.len()];
        for (i, node) in nodes.iter().map(AsRef::as_ref).enumerate() {
            if !has_all_keys(node, &constraints) {
                continue;
            }
            for (ci, c) in constraints.iter().enumerate() {
                if !c.includes(pod, node) {
                    continue;
                }
                if let Some(value) = node.labels.get(c.key) {
                    *counts[ci].entry(value.as_str()).or_insert(0) += per_node[ci][i];
                }
            }
        }
        let min_match = constraints
            .iter()
            .zip(&counts)
            .map(|(c, domains)| {
                if (domains.len() as i64) < c.min_domains {
                    0
                } else {
                    domains
                        .values()
                        .copied()
                        .min()
                        .unwrap_or(i64::from(i32::MAX))
                }
            })
            .collect();
        Some(SpreadFilter {
            constraints,
            counts,
            min_match,
        })
    }

    /// Filter: every constraint's skew with the pod on `node` within maxSkew.
    pub(crate) fn check(&self, pod: &PodFacts<'_>, node: &ModelNode) -> Result<(), SpreadUnfit> {
        for ((c, domains), min) in self
            .constraints
            .iter()
            .zip(&self.counts)
            .zip(&self.min_match)
        {
            let Some(value) = node.labels.get(c.key) else {
                return Err(SpreadUnfit::MissingLabel);
            };
            let self_match = i64::from(c.selector.matches(pod.labels()));
            let matching = domains.get(value.as_str()).copied().unwrap_or(0);
            if matching + self_match - min > c.max_skew {
                return Err(SpreadUnfit::Skew);
            }
        }
        Ok(())
    }

    /// Matching pods per (topology key, domain) over the eligible domains
    /// (`TpPairToMatchNum`; constraints on the same key add up).
    pub(crate) fn domain_counts(&self) -> BTreeMap<(String, String), i64> {
        let mut out = BTreeMap::new();
        for (c, domains) in self.constraints.iter().zip(&self.counts) {
            for (value, n) in domains {
                *out.entry((c.key.to_string(), value.to_string()))
                    .or_insert(0) += n;
            }
        }
        out
    }
}

/// PodTopologySpread scores `pod` at all: it has `ScheduleAnyway` constraints of its own, or
/// the cluster's defaults apply to it ([`spread_scores`] is `None` otherwise).
pub(crate) fn has_spread_score(pod: &PodFacts<'_>, cluster: &ClusterPods<'_>) -> bool {
    !constraints(pod, cluster.spread_defaults, SCHEDULE_ANYWAY).is_empty()
}

/// Score and NormalizeScore for the ScheduleAnyway constraints, for each of `candidates`
/// (indexes into `nodes`, the nodes that passed filtering): 0..100, higher where fewer matching
/// pods are. `None` when PreScore skips (no such constraint), which scores every node 0.
pub(crate) fn spread_scores<N: AsRef<ModelNode>>(
    pod: &PodFacts<'_>,
    nodes: &[N],
    candidates: &[usize],
    cluster: &ClusterPods<'_>,
) -> Option<Vec<i64>> {
    if nodes.is_empty() {
        return None;
    }
    let constraints = constraints(pod, cluster.spread_defaults, SCHEDULE_ANYWAY);
    if constraints.is_empty() {
        return None;
    }
    // Only the system defaults let a node without every topology key still be scored.
    let require_all = !pod.spread_constraints.is_empty()
        || !matches!(cluster.spread_defaults, SpreadDefaults::System);
    let qualifies = |node: &ModelNode| !require_all || has_all_keys(node, &constraints);
    let ignored: Vec<bool> = candidates
        .iter()
        .map(|&i| !qualifies(nodes[i].as_ref()))
        .collect();
    let scored_nodes = ignored.iter().filter(|ignored| !**ignored).count();
    let mut domains: Vec<HashMap<&str, i64>> = vec![HashMap::default(); constraints.len()];
    for (&i, _) in candidates.iter().zip(&ignored).filter(|(_, ig)| !**ig) {
        for (c, d) in constraints.iter().zip(domains.iter_mut()) {
            if !c.is_hostname() {
                let value = nodes[i]
                    .as_ref()
                    .labels
                    .get(c.key)
                    .map_or("", String::as_str);
                d.entry(value).or_insert(0);
            }
        }
    }
    let weights: Vec<f64> = constraints
        .iter()
        .zip(&domains)
        .map(|(c, d)| {
            let size = if c.is_hostname() {
                scored_nodes
            } else {
                d.len()
            };
            ((size + 2) as f64).ln()
        })
        .collect();
    let per_node = matching_per_node(&constraints, pod.namespace, cluster.pods, nodes.len());
    for (i, node) in nodes.iter().map(AsRef::as_ref).enumerate() {
        if !qualifies(node) {
            continue;
        }
        for (ci, c) in constraints.iter().enumerate() {
            if c.is_hostname() || !c.includes(pod, node) {
                continue;
            }
            let value = node.labels.get(c.key).map_or("", String::as_str);
            if let Some(count) = domains[ci].get_mut(value) {
                *count += per_node[ci][i];
            }
        }
    }
    let raw: Vec<i64> = candidates
        .iter()
        .zip(&ignored)
        .map(|(&i, &ignored)| {
            if ignored {
                return 0;
            }
            let mut score = 0.0;
            for (ci, c) in constraints.iter().enumerate() {
                let Some(value) = nodes[i].as_ref().labels.get(c.key) else {
                    continue;
                };
                let count = if c.is_hostname() {
                    per_node[ci][i]
                } else {
                    domains[ci].get(value.as_str()).copied().unwrap_or(0)
                };
                score += count as f64 * weights[ci] + (c.max_skew - 1) as f64;
            }
            score.round() as i64
        })
        .collect();
    Some(normalize(&raw, &ignored))
}

/// NormalizeScore: ignored nodes 0; all zero → 100 each; else `100 * (max + min - s) / max`.
fn normalize(raw: &[i64], ignored: &[bool]) -> Vec<i64> {
    let scored = || {
        raw.iter()
            .zip(ignored)
            .filter(|(_, ig)| !**ig)
            .map(|(s, _)| *s)
    };
    let min = scored().min().unwrap_or(i64::MAX);
    let max = scored().max().unwrap_or(0).max(0);
    raw.iter()
        .zip(ignored)
        .map(|(&s, &ignored)| {
            if ignored {
                0
            } else if max == 0 {
                MAX_NODE_SCORE
            } else {
                MAX_NODE_SCORE * (max + min - s) / max
            }
        })
        .collect()
}
