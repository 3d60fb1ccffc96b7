//! How the cluster's kube-scheduler is configured, as far as the model needs it: a cluster
//! with a custom KubeSchedulerConfiguration describes itself here, so the webhook predicts
//! the scheduler it really has. Defaults are the upstream default profile (v1.33–v1.36), with
//! v1.36's NodeResourcesBalancedAllocation formula ([`BalancedAllocationFormula`]).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SchedulerConfig {
    /// `percentageOfNodesToScore`: 0 is upstream's adaptive default (all nodes up to 100,
    /// then about 50 − n/125 percent, at least 5% and at least 100 nodes).
    pub percentage_of_nodes_to_score: u32,
    pub weights: PluginWeights,
    pub scoring_strategy: ScoringStrategy,
    /// Resources NodeResourcesBalancedAllocation compares.
    pub balanced_resources: Vec<String>,
    /// How NodeResourcesBalancedAllocation scores: set by the scheduler's release, not by its
    /// KubeSchedulerConfiguration.
    pub balanced_allocation_formula: BalancedAllocationFormula,
    /// The order the scheduler holds the nodes it listed when it started: set by its release.
    pub listed_node_order: ListedNodeOrder,
}

/// Where, in the scheduler's node order, the nodes it listed at its start sit (nodes that
/// joined later are appended to their zone in the order they joined, whatever the release).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ListedNodeOrder {
    /// v1.35 and later: the informer's first list is streamed (WatchListClient) and handed on
    /// in a Go map's order, different at every start. The webhook takes each listed node to
    /// be anywhere in the order.
    #[default]
    Unknown,
    /// Up to v1.34: a plain LIST, in name order.
    ByName,
}

/// NodeResourcesBalancedAllocation's formula, which depends on the kube-scheduler release.
/// S is `trunc((1 − std) × 100)` over the resources' request fractions (each capped at 1).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BalancedAllocationFormula {
    /// v1.36 and later (kubernetes#135573): the change in balance the pod brings,
    /// `50 + (50 + S_with_pod − S_without_pod) / 2` in integers.
    #[default]
    ChangeInBalance,
    /// Up to v1.35: the balance with the pod, `S_with_pod`.
    WithPod,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        SchedulerConfig {
            percentage_of_nodes_to_score: 0,
            weights: PluginWeights::default(),
            scoring_strategy: ScoringStrategy::default(),
            balanced_resources: vec!["cpu".into(), "memory".into()],
            balanced_allocation_formula: BalancedAllocationFormula::default(),
            listed_node_order: ListedNodeOrder::default(),
        }
    }
}

/// Score plugin weights of the profile (`plugins.score.enabled[].weight`); 0 disables a plugin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PluginWeights {
    pub(crate) node_affinity: i64,
    pub(crate) node_resources_fit: i64,
    pub(crate) balanced_allocation: i64,
    pub(crate) taint_toleration: i64,
}

impl Default for PluginWeights {
    fn default() -> Self {
        PluginWeights {
            node_affinity: 2,
            node_resources_fit: 1,
            balanced_allocation: 1,
            taint_toleration: 3,
        }
    }
}

/// `NodeResourcesFitArgs.scoringStrategy`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ScoringStrategy {
    #[serde(rename = "type")]
    pub(crate) kind: ScoringStrategyType,
    pub(crate) resources: Vec<ResourceWeight>,
    /// `requestedToCapacityRatio.shape`, used by that strategy only.
    pub(crate) shape: Vec<UtilizationShapePoint>,
}

impl Default for ScoringStrategy {
    fn default() -> Self {
        ScoringStrategy {
            kind: ScoringStrategyType::LeastAllocated,
            resources: vec![
                ResourceWeight {
                    name: "cpu".into(),
                    weight: 1,
                },
                ResourceWeight {
                    name: "memory".into(),
                    weight: 1,
                },
            ],
            shape: vec![
                UtilizationShapePoint {
                    utilization: 0,
                    score: 10,
                },
                UtilizationShapePoint {
                    utilization: 100,
                    score: 0,
                },
            ],
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum ScoringStrategyType {
    LeastAllocated,
    MostAllocated,
    RequestedToCapacityRatio,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ResourceWeight {
    pub(crate) name: String,
    pub(crate) weight: i64,
}

/// One point of the RequestedToCapacityRatio shape: utilization 0..100, score 0..10.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct UtilizationShapePoint {
    pub(crate) utilization: i64,
    pub(crate) score: i64,
}

impl SchedulerConfig {
    /// Every problem found, named by its key.
    pub(crate) fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.percentage_of_nodes_to_score > 100 {
            problems.push("scheduler.percentage_of_nodes_to_score must be 0..100".into());
        }
        let w = &self.weights;
        for (name, v) in [
            ("node_affinity", w.node_affinity),
            ("node_resources_fit", w.node_resources_fit),
            ("balanced_allocation", w.balanced_allocation),
            ("taint_toleration", w.taint_toleration),
        ] {
            if !(0..=100).contains(&v) {
                problems.push(format!("scheduler.weights.{name} must be 0..100"));
            }
        }
        let s = &self.scoring_strategy;
        if s.resources.is_empty() {
            problems.push("scheduler.scoring_strategy.resources needs at least one".into());
        }
        for (i, r) in s.resources.iter().enumerate() {
            if r.weight < 1 || r.weight > 100 || r.name.is_empty() {
                problems.push(format!(
                    "scheduler.scoring_strategy.resources[{i}]: name set, weight 1..100"
                ));
            }
        }
        if s.kind == ScoringStrategyType::RequestedToCapacityRatio {
            let ascending = s
                .shape
                .windows(2)
                .all(|p| p[0].utilization < p[1].utilization);
            let in_range = s
                .shape
                .iter()
                .all(|p| (0..=100).contains(&p.utilization) && (0..=10).contains(&p.score));
            if s.shape.is_empty() || !ascending || !in_range {
                problems.push(
                    "scheduler.scoring_strategy.shape: utilization 0..100 ascending, score 0..10"
                        .into(),
                );
            }
        }
        problems
    }
}
