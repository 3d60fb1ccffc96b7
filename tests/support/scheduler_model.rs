//! A small model of how the default kube-scheduler (v1.33–v1.35) filters and scores a pod, so
//! tests can check what the webhook's preferred node affinity does once the scheduler reads it.
//!
//! Modelled, with upstream's integer arithmetic: NodeAffinity (filter and score),
//! NodeResourcesFit (filter, LeastAllocated score), NodeResourcesBalancedAllocation (score),
//! DefaultNormalizeScore and numFeasibleNodesToFind. Every formula is checked against the
//! upstream unit-test vectors in `tests/fixtures/scheduler-vectors.json`.
//!
//! Left out, because they give every node of the burst tests the same score or no score:
//! TaintToleration (no PreferNoSchedule taints, so a flat 300 everywhere), PodTopologySpread (no
//! Service or ReplicaSet selects native TaskManagers, so no default constraints apply),
//! InterPodAffinity (no pod affinity terms), ImageLocality, and the taint, port, volume and
//! unschedulable filters.

#![allow(dead_code)]

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Container, NodeAffinity, NodeSelectorRequirement, NodeSelectorTerm, Pod,
    PreferredSchedulingTerm,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

pub const MAX_NODE_SCORE: i64 = 100;
/// What LeastAllocated assumes for a container that omits a request (`schedutil` non-zero defaults).
pub const DEFAULT_MILLI_CPU_REQUEST: i64 = 100;
pub const DEFAULT_MEMORY_REQUEST: i64 = 200 * 1024 * 1024;
const MIN_FEASIBLE_NODES_TO_FIND: i32 = 100;
const MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND: i32 = 5;

/// Default plugin weights of the score plugins modelled here.
pub const NODE_AFFINITY_WEIGHT: i64 = 2;
pub const NODE_RESOURCES_FIT_WEIGHT: i64 = 1;
pub const BALANCED_ALLOCATION_WEIGHT: i64 = 1;

pub const CPU: &str = "cpu";
pub const MEMORY: &str = "memory";
const EPHEMERAL_STORAGE: &str = "ephemeral-storage";
const PODS: &str = "pods";

/// LeastAllocated's default resources and weights.
pub const FIT_RESOURCES: [(&str, i64); 2] = [(CPU, 1), (MEMORY, 1)];
/// BalancedAllocation's default resources.
pub const BALANCED_RESOURCES: [&str; 2] = [CPU, MEMORY];

/// Amounts in the scheduler's units: millicores for cpu, whole units (bytes, devices) otherwise.
pub type Resources = BTreeMap<String, i64>;

/// A node as the scheduler's cache sees it.
#[derive(Debug, Clone, Default)]
pub struct ModelNode {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub allocatable: Resources,
    /// Sum of the requests of the pods on the node, as written (filter, BalancedAllocation).
    pub requested: Resources,
    /// CPU and memory only, with the non-zero defaults for omitted requests (LeastAllocated).
    pub non_zero_requested: Resources,
    pub pod_count: i64,
}

impl ModelNode {
    pub fn new(name: &str, labels: BTreeMap<String, String>, allocatable: Resources) -> Self {
        ModelNode {
            name: name.to_string(),
            labels,
            allocatable,
            ..ModelNode::default()
        }
    }

    /// Accounts a pod bound to this node, as the scheduler cache does on assume/bind.
    pub fn add_pod(&mut self, pod: &Pod) {
        add_into(&mut self.requested, &pod_requests(pod, false));
        let non_zero = pod_requests(pod, true);
        for resource in [CPU, MEMORY] {
            *self.non_zero_requested.entry(resource.into()).or_default() +=
                non_zero.get(resource).copied().unwrap_or(0);
        }
        self.pod_count += 1;
    }
}

/// Builds a resource list from quantities, e.g. `[("cpu", "32"), ("memory", "128Gi")]`.
pub fn resources(pairs: &[(&str, &str)]) -> Resources {
    pairs
        .iter()
        .map(|(name, q)| (name.to_string(), amount(name, &Quantity(q.to_string()))))
        .collect()
}

/// A quantity in the scheduler's unit for `resource`, rounded up like `MilliValue`/`Value`.
/// Panics on text the apiserver would not accept: a model should not guess.
pub fn amount(resource: &str, quantity: &Quantity) -> i64 {
    let text = quantity.0.trim();
    fn unreadable(text: &str, resource: &str) -> ! {
        panic!("unreadable quantity {text:?} for {resource}")
    }
    let end = text
        .find(|c: char| !(c.is_ascii_digit() || matches!(c, '.' | '+' | '-')))
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(end);
    let negative = number.starts_with('-');
    let digits = number.trim_start_matches(['+', '-']);
    let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
    if whole.is_empty() && fraction.is_empty() {
        unreadable(text, resource);
    }
    let mantissa: i128 = format!("{whole}{fraction}")
        .parse()
        .unwrap_or_else(|_| unreadable(text, resource));
    let (binary_power, mut exp10): (u32, i32) = match suffix {
        "" => (0, 0),
        "n" => (0, -9),
        "u" => (0, -6),
        "m" => (0, -3),
        "k" => (0, 3),
        "M" => (0, 6),
        "G" => (0, 9),
        "T" => (0, 12),
        "P" => (0, 15),
        "E" => (0, 18),
        "Ki" => (10, 0),
        "Mi" => (20, 0),
        "Gi" => (30, 0),
        "Ti" => (40, 0),
        "Pi" => (50, 0),
        "Ei" => (60, 0),
        s if s.starts_with(['e', 'E']) => (
            0,
            s[1..]
                .parse()
                .unwrap_or_else(|_| unreadable(text, resource)),
        ),
        _ => unreadable(text, resource),
    };
    exp10 -= fraction.len() as i32;
    if resource == CPU {
        exp10 += 3;
    }
    let scaled = mantissa << binary_power;
    let value = if exp10 >= 0 {
        scaled * 10_i128.pow(exp10 as u32)
    } else {
        let divisor = 10_i128.pow((-exp10) as u32);
        (scaled + divisor - 1) / divisor
    };
    let value = if negative { -value } else { value };
    i64::try_from(value).unwrap_or_else(|_| unreadable(text, resource))
}

fn add_into(total: &mut Resources, more: &Resources) {
    for (name, value) in more {
        *total.entry(name.clone()).or_default() += value;
    }
}

fn max_into(total: &mut Resources, other: &Resources) {
    for (name, value) in other {
        let entry = total.entry(name.clone()).or_default();
        *entry = (*entry).max(*value);
    }
}

fn container_requests(container: &Container, non_missing_defaults: bool) -> Resources {
    let mut requests: Resources = container
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
        .into_iter()
        .flatten()
        .map(|(name, q)| (name.clone(), amount(name, q)))
        .collect();
    if non_missing_defaults {
        // Only an omitted request is defaulted; an explicit 0 stays 0.
        requests
            .entry(CPU.into())
            .or_insert(DEFAULT_MILLI_CPU_REQUEST);
        requests
            .entry(MEMORY.into())
            .or_insert(DEFAULT_MEMORY_REQUEST);
    }
    requests
}

/// The pod's effective requests (`resourcehelper.PodRequests`): containers summed, restartable
/// init containers (sidecars) added, the largest init-phase need if larger, plus overhead.
/// Requests are read as the object holds them: the apiserver copied limits into missing requests
/// before admission.
pub fn pod_requests(pod: &Pod, non_missing_defaults: bool) -> Resources {
    let Some(spec) = pod.spec.as_ref() else {
        return Resources::new();
    };
    let mut total = Resources::new();
    for container in &spec.containers {
        add_into(
            &mut total,
            &container_requests(container, non_missing_defaults),
        );
    }
    let mut sidecars = Resources::new();
    let mut init_phase = Resources::new();
    for container in spec.init_containers.iter().flatten() {
        let own = container_requests(container, non_missing_defaults);
        let during = if container.restart_policy.as_deref() == Some("Always") {
            add_into(&mut total, &own);
            add_into(&mut sidecars, &own);
            sidecars.clone()
        } else {
            let mut with_sidecars = own;
            add_into(&mut with_sidecars, &sidecars);
            with_sidecars
        };
        max_into(&mut init_phase, &during);
    }
    max_into(&mut total, &init_phase);
    if let Some(overhead) = spec.overhead.as_ref() {
        let overhead = overhead
            .iter()
            .map(|(name, q)| (name.clone(), amount(name, q)))
            .collect();
        add_into(&mut total, &overhead);
    }
    total
}

/// Extended, hugepage and other scalar resources: skipped by resource scoring when the pod does
/// not request them.
fn is_scalar(resource: &str) -> bool {
    ![CPU, MEMORY, EPHEMERAL_STORAGE, PODS].contains(&resource)
}

/// `calculateResourceAllocatableRequest`: (allocatable, requested with the pod), or `None` when the
/// resource does not take part for this node.
fn allocatable_and_requested(
    node: &ModelNode,
    resource: &str,
    pod_request: i64,
    use_requested: bool,
) -> Option<(i64, i64)> {
    if resource == PODS || (pod_request == 0 && is_scalar(resource)) {
        return None;
    }
    let allocatable = node.allocatable.get(resource).copied().unwrap_or(0);
    if allocatable == 0 {
        return None;
    }
    let existing = if !use_requested && (resource == CPU || resource == MEMORY) {
        &node.non_zero_requested
    } else {
        &node.requested
    };
    Some((
        allocatable,
        existing.get(resource).copied().unwrap_or(0) + pod_request,
    ))
}

// ---- NodeResourcesFit ----

/// `(capacity - requested) * 100 / capacity`, 0 once over capacity.
pub fn least_requested_score(requested: i64, capacity: i64) -> i64 {
    if capacity == 0 || requested > capacity {
        return 0;
    }
    (capacity - requested) * MAX_NODE_SCORE / capacity
}

/// LeastAllocated score of `node` for `pod`: weighted integer mean over `weights`.
pub fn least_allocated(pod: &Pod, node: &ModelNode, weights: &[(&str, i64)]) -> i64 {
    let pod_request = pod_requests(pod, true);
    let (mut score, mut weight_sum) = (0, 0);
    for &(resource, weight) in weights {
        let request = pod_request.get(resource).copied().unwrap_or(0);
        if let Some((allocatable, requested)) =
            allocatable_and_requested(node, resource, request, false)
        {
            score += least_requested_score(requested, allocatable) * weight;
            weight_sum += weight;
        }
    }
    if weight_sum == 0 {
        0
    } else {
        score / weight_sum
    }
}

/// The Fit filter: every non-zero request must fit in what is left, and one more pod must fit.
pub fn fits_resources(pod: &Pod, node: &ModelNode) -> bool {
    if let Some(&max_pods) = node.allocatable.get(PODS)
        && node.pod_count + 1 > max_pods
    {
        return false;
    }
    pod_requests(pod, false)
        .iter()
        .filter(|(name, value)| name.as_str() != PODS && **value > 0)
        .all(|(name, value)| {
            let allocatable = node.allocatable.get(name).copied().unwrap_or(0);
            let requested = node.requested.get(name).copied().unwrap_or(0);
            *value <= allocatable - requested
        })
}

// ---- NodeResourcesBalancedAllocation ----

/// v1.35 and earlier: `trunc((1 - std) * 100)` over the request fractions (each capped at 1).
/// Float operations in upstream's order, so results truncate identically.
pub fn balanced_resource_scorer(requested: &[i64], allocatable: &[i64]) -> i64 {
    let fractions: Vec<f64> = requested
        .iter()
        .zip(allocatable)
        .filter(|(_, a)| **a != 0)
        .map(|(r, a)| (*r as f64 / *a as f64).min(1.0))
        .collect();
    let std = match fractions.len() {
        0 | 1 => 0.0,
        2 => ((fractions[0] - fractions[1]) / 2.0).abs(),
        n => {
            let mean = fractions.iter().sum::<f64>() / n as f64;
            let sum: f64 = fractions.iter().map(|f| (f - mean) * (f - mean)).sum();
            (sum / n as f64).sqrt()
        }
    };
    ((1.0 - std) * MAX_NODE_SCORE as f64) as i64
}

/// The formula after kubernetes/kubernetes#135573 (v1.36), which scores the change in balance:
/// `50 + (50 + S_with - S_without) / 2`, S being the v1.35 score. Taken from the fixture's
/// description of it; not used by `schedule`, which models v1.33–v1.35.
pub fn balanced_score_change(with_pod: &[i64], without_pod: &[i64], allocatable: &[i64]) -> i64 {
    let with = balanced_resource_scorer(with_pod, allocatable);
    let without = balanced_resource_scorer(without_pod, allocatable);
    MAX_NODE_SCORE / 2 + (MAX_NODE_SCORE / 2 + with - without) / 2
}

/// PreScore: a pod requesting none of `resources` is skipped (kubernetes#129138).
pub fn balanced_allocation_skips(pod: &Pod, resources: &[&str]) -> bool {
    let request = pod_requests(pod, false);
    resources
        .iter()
        .all(|r| request.get(*r).copied().unwrap_or(0) == 0)
}

/// BalancedAllocation score of `node` for `pod`, on requests as written (no non-zero defaults).
pub fn balanced_allocation(pod: &Pod, node: &ModelNode, resources: &[&str]) -> i64 {
    let pod_request = pod_requests(pod, false);
    let mut requested = vec![0; resources.len()];
    let mut allocatable = vec![0; resources.len()];
    for (i, resource) in resources.iter().enumerate() {
        let request = pod_request.get(*resource).copied().unwrap_or(0);
        if let Some((a, r)) = allocatable_and_requested(node, resource, request, true) {
            allocatable[i] = a;
            requested[i] = r;
        }
    }
    balanced_resource_scorer(&requested, &allocatable)
}

// ---- NodeAffinity ----

fn parse_int(text: &str) -> Option<i64> {
    text.parse().ok()
}

/// One `matchExpressions` requirement; `None` when it is malformed (the whole term then never
/// matches, as upstream's parse errors make it).
fn label_requirement(
    req: &NodeSelectorRequirement,
    labels: &BTreeMap<String, String>,
) -> Option<bool> {
    let values = req.values.as_deref().unwrap_or_default();
    let value = labels.get(&req.key);
    match req.operator.as_str() {
        "In" | "NotIn" if values.is_empty() => None,
        "In" => Some(value.is_some_and(|v| values.contains(v))),
        "NotIn" => Some(value.is_none_or(|v| !values.contains(v))),
        "Exists" | "DoesNotExist" if !values.is_empty() => None,
        "Exists" => Some(value.is_some()),
        "DoesNotExist" => Some(value.is_none()),
        "Gt" | "Lt" => {
            let [bound] = values else { return None };
            let bound = parse_int(bound)?;
            let Some(v) = value.and_then(|v| parse_int(v)) else {
                return Some(false);
            };
            Some(if req.operator == "Gt" {
                v > bound
            } else {
                v < bound
            })
        }
        _ => None,
    }
}

/// One `matchFields` requirement: In/NotIn with exactly one value. Only `metadata.name` exists
/// as a node field; any other key reads as empty.
fn field_requirement(req: &NodeSelectorRequirement, node_name: &str) -> Option<bool> {
    let [value] = req.values.as_deref().unwrap_or_default() else {
        return None;
    };
    let field = if req.key == "metadata.name" {
        node_name
    } else {
        ""
    };
    match req.operator.as_str() {
        "In" => Some(field == value),
        "NotIn" => Some(field != value),
        _ => None,
    }
}

fn is_empty_term(term: &NodeSelectorTerm) -> bool {
    term.match_expressions
        .as_deref()
        .unwrap_or_default()
        .is_empty()
        && term.match_fields.as_deref().unwrap_or_default().is_empty()
}

/// All requirements of a non-empty term hold (ANDed). Callers drop empty terms first: they
/// select nothing in a required selector and are skipped among preferred terms.
pub fn term_matches(term: &NodeSelectorTerm, node: &ModelNode) -> bool {
    let labels = term
        .match_expressions
        .iter()
        .flatten()
        .map(|r| label_requirement(r, &node.labels));
    let fields = term
        .match_fields
        .iter()
        .flatten()
        .map(|r| field_requirement(r, &node.name));
    let results: Option<Vec<bool>> = labels.chain(fields).collect();
    results.is_some_and(|all| all.into_iter().all(|ok| ok))
}

/// Sum of the weights of the preferred terms `node` matches; weight-0 and empty terms count 0.
pub fn preferred_terms_score(terms: &[PreferredSchedulingTerm], node: &ModelNode) -> i64 {
    terms
        .iter()
        .filter(|t| t.weight != 0 && !is_empty_term(&t.preference))
        .filter(|t| term_matches(&t.preference, node))
        .map(|t| i64::from(t.weight))
        .sum()
}

fn pod_preferred_terms(pod: &Pod) -> &[PreferredSchedulingTerm] {
    pod.spec
        .as_ref()
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|na| {
            na.preferred_during_scheduling_ignored_during_execution
                .as_deref()
        })
        .unwrap_or_default()
}

/// PreScore: skipped when neither the pod nor the profile's `addedAffinity` prefers anything.
pub fn node_affinity_skips(pod: &Pod, added: Option<&NodeAffinity>) -> bool {
    pod_preferred_terms(pod).is_empty() && added.is_none()
}

/// Raw NodeAffinity score (before normalization): added terms plus the pod's own.
pub fn node_affinity_score(pod: &Pod, added: Option<&NodeAffinity>, node: &ModelNode) -> i64 {
    let added_terms = added
        .and_then(|a| {
            a.preferred_during_scheduling_ignored_during_execution
                .as_deref()
        })
        .unwrap_or_default();
    preferred_terms_score(added_terms, node) + preferred_terms_score(pod_preferred_terms(pod), node)
}

/// The NodeAffinity filter: `nodeSelector` labels, then the required terms (ORed).
pub fn node_affinity_filter(pod: &Pod, node: &ModelNode) -> bool {
    let Some(spec) = pod.spec.as_ref() else {
        return true;
    };
    let selector_ok = spec
        .node_selector
        .iter()
        .flatten()
        .all(|(k, v)| node.labels.get(k) == Some(v));
    let required = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|na| {
            na.required_during_scheduling_ignored_during_execution
                .as_ref()
        });
    let required_ok = required.is_none_or(|r| {
        r.node_selector_terms
            .iter()
            .filter(|t| !is_empty_term(t))
            .any(|t| term_matches(t, node))
    });
    selector_ok && required_ok
}

// ---- helpers and the scheduling cycle ----

/// `helper.DefaultNormalizeScore`: `max_priority * s / max` (integer), optionally reversed;
/// all zero stays zero (or becomes `max_priority` when reversed).
pub fn default_normalize_score(max_priority: i64, reverse: bool, scores: &mut [i64]) {
    let max = scores.iter().copied().max().unwrap_or(0).max(0);
    if max == 0 {
        if reverse {
            scores.iter_mut().for_each(|s| *s = max_priority);
        }
        return;
    }
    for s in scores.iter_mut() {
        let normalized = max_priority * *s / max;
        *s = if reverse {
            max_priority - normalized
        } else {
            normalized
        };
    }
}

/// How many feasible nodes the scheduler looks for before scoring; `percentage` 0 is adaptive.
pub fn num_feasible_nodes_to_find(percentage: i32, num_all_nodes: i32) -> i32 {
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND {
        return num_all_nodes;
    }
    let mut percentage = percentage;
    if percentage == 0 {
        percentage = (50 - num_all_nodes / 125).max(MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND);
    }
    (num_all_nodes * percentage / 100).max(MIN_FEASIBLE_NODES_TO_FIND)
}

/// One node's modelled plugin scores, each already multiplied by its plugin weight.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeScore {
    pub node: String,
    pub node_affinity: i64,
    pub least_allocated: i64,
    pub balanced_allocation: i64,
}

impl NodeScore {
    pub fn total(&self) -> i64 {
        self.node_affinity + self.least_allocated + self.balanced_allocation
    }
}

/// The nodes the scheduler would score for `pod`: those passing the modelled filters, up to
/// `numFeasibleNodesToFind` with the adaptive percentage. Upstream starts each search where the
/// previous one stopped; the model always starts at the first node (the same below 100 nodes).
pub fn feasible<'a>(pod: &Pod, nodes: &'a [ModelNode]) -> Vec<&'a ModelNode> {
    let wanted = num_feasible_nodes_to_find(0, i32::try_from(nodes.len()).unwrap_or(i32::MAX));
    nodes
        .iter()
        .filter(|n| node_affinity_filter(pod, n) && fits_resources(pod, n))
        .take(usize::try_from(wanted).unwrap_or(usize::MAX))
        .collect()
}

/// Scores `candidates` the way the default profile does for the plugins modelled here.
pub fn score(pod: &Pod, candidates: &[&ModelNode]) -> Vec<NodeScore> {
    let mut affinity: Vec<i64> = if node_affinity_skips(pod, None) {
        vec![0; candidates.len()]
    } else {
        candidates
            .iter()
            .map(|n| node_affinity_score(pod, None, n))
            .collect()
    };
    default_normalize_score(MAX_NODE_SCORE, false, &mut affinity);
    let balanced_skipped = balanced_allocation_skips(pod, &BALANCED_RESOURCES);
    candidates
        .iter()
        .zip(affinity)
        .map(|(node, affinity)| NodeScore {
            node: node.name.clone(),
            node_affinity: NODE_AFFINITY_WEIGHT * affinity,
            least_allocated: NODE_RESOURCES_FIT_WEIGHT * least_allocated(pod, node, &FIT_RESOURCES),
            balanced_allocation: if balanced_skipped {
                0
            } else {
                BALANCED_ALLOCATION_WEIGHT * balanced_allocation(pod, node, &BALANCED_RESOURCES)
            },
        })
        .collect()
}

/// The node the scheduler picks for `pod`, or `None` when no node passes filtering (the pod
/// stays Pending). A single feasible node is taken without scoring. Upstream picks at random
/// among equal best totals; the model takes the lowest name so runs are repeatable.
pub fn schedule(pod: &Pod, nodes: &[ModelNode]) -> Option<String> {
    let candidates = feasible(pod, nodes);
    match candidates.as_slice() {
        [] => None,
        [only] => Some(only.name.clone()),
        _ => score(pod, &candidates)
            .into_iter()
            .max_by(|a, b| a.total().cmp(&b.total()).then_with(|| b.node.cmp(&a.node)))
            .map(|s| s.node),
    }
}
