//! Score plugins with upstream's integer arithmetic: NodeResourcesFit (LeastAllocated,
//! MostAllocated, RequestedToCapacityRatio), NodeResourcesBalancedAllocation, NodeAffinity,
//! TaintToleration, and `helper.DefaultNormalizeScore`.

use k8s_openapi::api::core::v1::Toleration;

use super::node::ModelNode;
use super::resources::{CPU, EPHEMERAL_STORAGE, MEMORY, PODS, PodRequests};
use super::terms::{Taint, tolerated};
use crate::config::scheduler::{
    BalancedAllocationFormula, ScoringStrategy, ScoringStrategyType, UtilizationShapePoint,
};

pub(crate) const MAX_NODE_SCORE: i64 = 100;
/// RequestedToCapacityRatio shape scores are 0..10, scaled to 0..100.
const MAX_CUSTOM_PRIORITY_SCORE: i64 = 10;

/// Extended, hugepage and other scalar resources: skipped when the pod does not request them.
fn is_scalar(resource: &str) -> bool {
    ![CPU, MEMORY, EPHEMERAL_STORAGE, PODS].contains(&resource)
}

/// `calculateResourceAllocatableRequest`: (allocatable, requested with the pod), or `None` when
/// the resource does not take part for this node. `use_requested` reads requests as written;
/// otherwise cpu and memory use the non-zero defaults.
pub(crate) fn allocatable_and_requested(
    node: &ModelNode,
    pod: &PodRequests,
    resource: &str,
    use_requested: bool,
) -> Option<(i64, i64)> {
    allocatable_existing_and_pod(node, pod, resource, use_requested)
        .map(|(allocatable, existing, pod_request)| (allocatable, existing + pod_request))
}

/// As [`allocatable_and_requested`], with the node's requests before the pod and the pod's
/// apart: (allocatable, existing, pod), as `calculateNodeAllocatableRequest` fills
/// `allocatable`, `allocated` and `requested − allocated`.
pub(crate) fn allocatable_existing_and_pod(
    node: &ModelNode,
    pod: &PodRequests,
    resource: &str,
    use_requested: bool,
) -> Option<(i64, i64, i64)> {
    let pod_request = match resource {
        CPU if !use_requested => pod.non_zero_milli_cpu,
        MEMORY if !use_requested => pod.non_zero_memory,
        _ => pod.requested.get(resource),
    };
    if resource == PODS || (pod_request == 0 && is_scalar(resource)) {
        return None;
    }
    let allocatable = node.allocatable.get(resource);
    if allocatable == 0 {
        return None;
    }
    let existing = match resource {
        CPU if !use_requested => node.non_zero_milli_cpu,
        MEMORY if !use_requested => node.non_zero_memory,
        _ => node.requested.get(resource),
    };
    Some((allocatable, existing, pod_request))
}

/// `(capacity - requested) * 100 / capacity`, 0 once over capacity.
pub(crate) fn least_requested_score(requested: i64, capacity: i64) -> i64 {
    if capacity == 0 || requested > capacity {
        return 0;
    }
    (capacity - requested) * MAX_NODE_SCORE / capacity
}

/// `requested * 100 / capacity`, capped at 100.
pub(crate) fn most_requested_score(requested: i64, capacity: i64) -> i64 {
    if capacity == 0 {
        return 0;
    }
    requested.min(capacity) * MAX_NODE_SCORE / capacity
}

/// `helper.BuildBrokenLinearFunction` over the shape, scores already scaled to 0..100.
fn broken_linear(shape: &[UtilizationShapePoint], p: i64) -> i64 {
    for (i, point) in shape.iter().enumerate() {
        if p <= point.utilization {
            if i == 0 {
                return point.score * (MAX_NODE_SCORE / MAX_CUSTOM_PRIORITY_SCORE);
            }
            let prev = shape[i - 1];
            let (s0, s1) = (
                prev.score * (MAX_NODE_SCORE / MAX_CUSTOM_PRIORITY_SCORE),
                point.score * (MAX_NODE_SCORE / MAX_CUSTOM_PRIORITY_SCORE),
            );
            return s0
                + (s1 - s0) * (p - prev.utilization) / (point.utilization - prev.utilization);
        }
    }
    shape.last().map_or(0, |p| {
        p.score * (MAX_NODE_SCORE / MAX_CUSTOM_PRIORITY_SCORE)
    })
}

/// NodeResourcesFit score of `node` for the pod under `strategy`.
pub(crate) fn resources_fit_score(
    pod: &PodRequests,
    node: &ModelNode,
    strategy: &ScoringStrategy,
) -> i64 {
    let (mut score, mut weight_sum) = (0, 0);
    for r in &strategy.resources {
        let Some((allocatable, requested)) = allocatable_and_requested(node, pod, &r.name, false)
        else {
            continue;
        };
        let s = match strategy.kind {
            ScoringStrategyType::LeastAllocated => least_requested_score(requested, allocatable),
            ScoringStrategyType::MostAllocated => most_requested_score(requested, allocatable),
            ScoringStrategyType::RequestedToCapacityRatio => {
                let utilization = if requested > allocatable {
                    100
                } else {
                    requested * 100 / allocatable
                };
                broken_linear(&strategy.shape, utilization)
            }
        };
        score += s * r.weight;
        weight_sum += r.weight;
    }
    if weight_sum == 0 {
        return 0;
    }
    match strategy.kind {
        ScoringStrategyType::RequestedToCapacityRatio => {
            (score as f64 / weight_sum as f64).round() as i64
        }
        _ => score / weight_sum,
    }
}

/// v1.35 and earlier: `trunc((1 - std) * 100)` over the request fractions (each capped at 1).
/// Float operations in upstream's order, so results truncate identically. (The vectors' form:
/// the model scores pairs, read from the node.)
#[cfg(test)]
pub(crate) fn balanced_resource_scorer(requested: &[i64], allocatable: &[i64]) -> i64 {
    balanced_of_pairs(requested.iter().copied().zip(allocatable.iter().copied()))
}

/// `balanced_resource_scorer` over (requested, allocatable) pairs, read twice instead of
/// collected: the landing model scores every named node with it, per decision.
fn balanced_of_pairs(pairs: impl Iterator<Item = (i64, i64)> + Clone) -> i64 {
    let fractions = pairs
        .filter(|&(_, a)| a != 0)
        .map(|(r, a)| (r as f64 / a as f64).min(1.0));
    let n = fractions.clone().count();
    let std = match n {
        0 | 1 => 0.0,
        2 => {
            let mut two = fractions;
            let (first, second) = (two.next().unwrap_or(0.0), two.next().unwrap_or(0.0));
            ((first - second) / 2.0).abs()
        }
        n => {
            let mean = fractions.clone().sum::<f64>() / n as f64;
            let sum: f64 = fractions.map(|f| (f - mean) * (f - mean)).sum();
            (sum / n as f64).sqrt()
        }
    };
    ((1.0 - std) * MAX_NODE_SCORE as f64) as i64
}

/// The formula after kubernetes/kubernetes#135573 (v1.36), which scores the change in
/// balance: `50 + (50 + S_with - S_without) / 2`, S being the v1.35 score.
#[cfg(test)]
pub(crate) fn balanced_score_change(
    with_pod: &[i64],
    without_pod: &[i64],
    allocatable: &[i64],
) -> i64 {
    let with = balanced_resource_scorer(with_pod, allocatable);
    let without = balanced_resource_scorer(without_pod, allocatable);
    change_in_balance(with, without)
}

/// `balancedResourceScorer` (v1.36) from the two v1.35 scores: 50..100, 75 when the pod leaves
/// the balance as it was. Integer division truncates toward zero, as Go's does.
fn change_in_balance(with_pod: i64, without_pod: i64) -> i64 {
    MAX_NODE_SCORE / 2 + (MAX_NODE_SCORE / 2 + with_pod - without_pod) / 2
}

/// PreScore: a pod requesting none of `resources` is skipped (kubernetes#129138).
pub(crate) fn balanced_allocation_skips(pod: &PodRequests, resources: &[String]) -> bool {
    resources.iter().all(|r| pod.requested.get(r) == 0)
}

/// BalancedAllocation score of `node` for the pod, on requests as written, by `formula`.
pub(crate) fn balanced_allocation(
    pod: &PodRequests,
    node: &ModelNode,
    resources: &[String],
    formula: BalancedAllocationFormula,
) -> i64 {
    // Each resource's figures are looked up once: they are read twice (four times for the
    // change in balance) below. (with the pod, without, allocatable); (0, 0, 0) for a
    // resource that does not take part, which the scorer skips as upstream does.
    let looked_up = |resource: &String| {
        allocatable_existing_and_pod(node, pod, resource, true)
            .map_or((0, 0, 0), |(a, existing, p)| (existing + p, existing, a))
    };
    let score = |figures: &[(i64, i64, i64)]| {
        let with = balanced_of_pairs(figures.iter().map(|&(with, _, a)| (with, a)));
        match formula {
            BalancedAllocationFormula::WithPod => with,
            BalancedAllocationFormula::ChangeInBalance => {
                let without =
                    balanced_of_pairs(figures.iter().map(|&(_, without, a)| (without, a)));
                change_in_balance(with, without)
            }
        }
    };
    let mut figures = [(0, 0, 0); 4];
    if resources.len() <= figures.len() {
        for (slot, resource) in figures.iter_mut().zip(resources) {
            *slot = looked_up(resource);
        }
        return score(&figures[..resources.len()]);
    }
    let figures: Vec<(i64, i64, i64)> = resources.iter().map(looked_up).collect();
    score(&figures)
}

/// TaintToleration raw score: PreferNoSchedule taints the pod does not tolerate (lower is
/// better; normalized reversed).
pub(crate) fn intolerable_prefer_no_schedule(tolerations: &[Toleration], taints: &[Taint]) -> i64 {
    let relevant: Vec<Toleration> = tolerations
        .iter()
        .filter(|t| {
            t.effect
                .as_deref()
                .is_none_or(|e| e.is_empty() || e == "PreferNoSchedule")
        })
        .cloned()
        .collect();
    taints
        .iter()
        .filter(|t| t.effect == "PreferNoSchedule" && !tolerated(&relevant, t))
        .count() as i64
}

/// `helper.DefaultNormalizeScore`: `max_priority * s / max` (integer), optionally reversed;
/// all zero stays zero (or becomes `max_priority` when reversed).
pub(crate) fn default_normalize_score(max_priority: i64, reverse: bool, scores: &mut [i64]) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use BalancedAllocationFormula::{ChangeInBalance, WithPod};

    /// Up to four resources are scored from a buffer on the stack, more from a vector: both
    /// give, by either formula, what the figures collected first and scored as upstream does
    /// give.
    #[test]
    fn balanced_allocation_matches_the_collected_figures_for_any_number_of_resources() {
        let names = [
            CPU,
            MEMORY,
            EPHEMERAL_STORAGE,
            PODS,
            "example.com/gpu",
            "example.com/fpga",
        ];
        let mut node = ModelNode::default();
        let mut pod = PodRequests::default();
        for (k, name) in names.iter().enumerate() {
            let k = k as i64;
            *node.allocatable.slot(name) = 1000 * (k + 1);
            *node.requested.slot(name) = 150 * k + 10;
            *pod.requested.slot(name) = 70 * (k + 2);
        }
        // One resource the node does not have: skipped, as upstream skips zero allocatable.
        *pod.requested.slot("example.com/absent") = 5;
        for count in 1..=names.len() + 1 {
            let resources: Vec<String> = names
                .iter()
                .map(|n| n.to_string())
                .chain(["example.com/absent".to_string()])
                .take(count)
                .collect();
            let (mut with, mut without, mut allocatable) = (Vec::new(), Vec::new(), Vec::new());
            for r in &resources {
                let (a, existing, p) =
                    allocatable_existing_and_pod(&node, &pod, r, true).unwrap_or((0, 0, 0));
                with.push(existing + p);
                without.push(existing);
                allocatable.push(a);
            }
            assert_eq!(
                balanced_allocation(&pod, &node, &resources, WithPod),
                balanced_resource_scorer(&with, &allocatable),
                "{count} resources, with the pod"
            );
            assert_eq!(
                balanced_allocation(&pod, &node, &resources, ChangeInBalance),
                balanced_score_change(&with, &without, &allocatable),
                "{count} resources, change in balance"
            );
        }
        // The figures differ enough that the score is not the same for every count.
        let cpu_memory = [CPU.to_string(), MEMORY.to_string()];
        assert_ne!(
            balanced_allocation(&pod, &node, &cpu_memory, WithPod),
            MAX_NODE_SCORE
        );
    }

    /// One node of an upstream case: allocatable and the existing pods' requests as written
    /// (cpu in millicores), by resource.
    fn node(allocatable: &[(&str, i64)], existing: &[(&str, i64)]) -> ModelNode {
        let mut node = ModelNode::default();
        for &(name, amount) in allocatable {
            *node.allocatable.slot(name) = amount;
        }
        for &(name, amount) in existing {
            *node.requested.slot(name) = amount;
        }
        node
    }

    fn pod(requests: &[(&str, i64)]) -> PodRequests {
        let mut pod = PodRequests::default();
        for &(name, amount) in requests {
            *pod.requested.slot(name) = amount;
        }
        pod
    }

    fn names(resources: &[&str]) -> Vec<String> {
        resources.iter().map(|r| r.to_string()).collect()
    }

    const GPU: &str = "nvidia.com/gpu";

    /// `TestNodeResourcesBalancedAllocation` of k8s.io/kubernetes v1.36.3
    /// (`pkg/scheduler/framework/plugins/noderesources/balanced_allocation_test.go`): its
    /// cases' pods, nodes and existing pods, summed per node, and its expected scores. Each
    /// case's comment there gives v1.35's scores without and with the pod (`Score: 73 (85 ->
    /// 82)`); those are the `WithPod` figures.
    #[test]
    fn balanced_allocation_gives_upstream_v1_36_scores() {
        let cpu_memory = names(&[CPU, MEMORY]);
        let with_gpu = names(&[CPU, MEMORY, GPU]);
        // Containers (1000m, 2000) and (2000m, 3000).
        let cpu_and_memory = pod(&[(CPU, 3000), (MEMORY, 5000)]);
        // (case, pod, resources, node, v1.36's score, v1.35's score)
        let cases = [
            (
                "nothing scheduled, resources requested, differently sized nodes: node1",
                cpu_and_memory.clone(),
                &cpu_memory,
                node(&[(CPU, 4000), (MEMORY, 10000)], &[]),
                68,
                87,
            ),
            (
                "nothing scheduled, resources requested, differently sized nodes: node2",
                cpu_and_memory.clone(),
                &cpu_memory,
                node(&[(CPU, 6000), (MEMORY, 10000)], &[]),
                75,
                100,
            ),
            (
                "resources requested, pods scheduled with resources: node1",
                cpu_and_memory.clone(),
                &cpu_memory,
                node(&[(CPU, 10000), (MEMORY, 20000)], &[(CPU, 3000)]),
                73,
                82,
            ),
            (
                "resources requested, pods scheduled with resources: node2",
                cpu_and_memory.clone(),
                &cpu_memory,
                node(
                    &[(CPU, 10000), (MEMORY, 20000)],
                    &[(CPU, 3000), (MEMORY, 5000)],
                ),
                74,
                95,
            ),
            (
                "resources requested, pods scheduled with resources, differently sized nodes: node2",
                cpu_and_memory.clone(),
                &cpu_memory,
                node(
                    &[(CPU, 10000), (MEMORY, 50000)],
                    &[(CPU, 3000), (MEMORY, 5000)],
                ),
                70,
                80,
            ),
            (
                "nodes to reach min/max score: node1",
                pod(&[(MEMORY, 5000)]),
                &cpu_memory,
                node(&[(CPU, 3000), (MEMORY, 5000)], &[(CPU, 3000)]),
                100,
                100,
            ),
            (
                "nodes to reach min/max score: node2",
                pod(&[(MEMORY, 5000)]),
                &cpu_memory,
                node(&[(CPU, 3000), (MEMORY, 5000)], &[]),
                50,
                50,
            ),
            (
                "requested resources at node capacity: node1",
                pod(&[(CPU, 3000)]),
                &cpu_memory,
                node(&[(CPU, 6000), (MEMORY, 10000)], &[(CPU, 3000)]),
                62,
                50,
            ),
            (
                "requested resources at node capacity: node2",
                pod(&[(CPU, 3000)]),
                &cpu_memory,
                node(
                    &[(CPU, 6000), (MEMORY, 10000)],
                    &[(CPU, 3000), (MEMORY, 5000)],
                ),
                62,
                75,
            ),
            (
                "scalar resource is included if pod requests it (3 resources): node1",
                pod(&[(GPU, 1)]),
                &with_gpu,
                node(
                    &[(CPU, 3500), (MEMORY, 40000), (GPU, 8)],
                    &[(CPU, 3000), (MEMORY, 5000), (GPU, 3)],
                ),
                75,
                70,
            ),
            (
                "scalar resource is included if pod requests it (3 resources): node2",
                pod(&[(GPU, 1)]),
                &with_gpu,
                node(
                    &[(CPU, 3500), (MEMORY, 40000), (GPU, 8)],
                    &[(CPU, 3000), (MEMORY, 5000)],
                ),
                76,
                65,
            ),
            (
                "scalar resource is not included if pod doesn't request it: node1 (has it)",
                cpu_and_memory.clone(),
                &with_gpu,
                node(&[(CPU, 3500), (MEMORY, 40000), (GPU, 8)], &[]),
                56,
                63,
            ),
            (
                "scalar resource is not included if pod doesn't request it: node2 (lacks it)",
                cpu_and_memory.clone(),
                &with_gpu,
                node(&[(CPU, 3500), (MEMORY, 40000)], &[]),
                56,
                63,
            ),
            // Upstream's node1 of this case has the resource through DRA, which the model does
            // not read; its node2 lacks it, as a node without the extended resource does.
            (
                "include DRA resource: node2, lacking the resource the pod requests",
                pod(&[("extended.resource.dra.io/something", 1)]),
                &names(&[CPU, MEMORY, "extended.resource.dra.io/something"]),
                node(
                    &[(CPU, 3500), (MEMORY, 40000)],
                    &[(CPU, 3000), (MEMORY, 5000)],
                ),
                75,
                63,
            ),
        ];
        for (name, pod, resources, node, change_in_balance, with_pod) in &cases {
            assert_eq!(
                balanced_allocation(pod, node, resources, ChangeInBalance),
                *change_in_balance,
                "{name}"
            );
            assert_eq!(
                balanced_allocation(pod, node, resources, WithPod),
                *with_pod,
                "{name}, v1.35"
            );
        }
    }

    /// The formula decides which node the plugin prefers: in upstream's 3-resource case,
    /// node1 balances better with the pod (v1.35 prefers it) while the pod improves node2's
    /// balance more (v1.36 prefers node2).
    #[test]
    fn the_formula_choice_turns_the_preference() {
        let resources = names(&[CPU, MEMORY, GPU]);
        let pod = pod(&[(GPU, 1)]);
        let allocatable = [(CPU, 3500), (MEMORY, 40000), (GPU, 8)];
        let node1 = node(&allocatable, &[(CPU, 3000), (MEMORY, 5000), (GPU, 3)]);
        let node2 = node(&allocatable, &[(CPU, 3000), (MEMORY, 5000)]);
        let score =
            |node: &ModelNode, formula| balanced_allocation(&pod, node, &resources, formula);
        assert!(score(&node1, WithPod) > score(&node2, WithPod));
        assert!(score(&node1, ChangeInBalance) < score(&node2, ChangeInBalance));
    }
}
