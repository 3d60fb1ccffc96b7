//! One scheduling cycle: filter (with `numFeasibleNodesToFind` and a rotating start), score,
//! select, as `schedule_one.go` does for the plugins modelled here.

use k8s_openapi::api::core::v1::{
    NodeSelectorTerm, Pod, PodSpec, PreferredSchedulingTerm, Toleration,
};

use super::node::ModelNode;
use super::resources::PodRequests;
use super::scores::{
    MAX_NODE_SCORE, balanced_allocation, balanced_allocation_skips, default_normalize_score,
    intolerable_prefer_no_schedule, preferred_terms_score, resources_fit_score,
};
use super::terms::{any_term_matches, tolerated};
use crate::config::scheduler::SchedulerConfig;

const MIN_FEASIBLE_NODES_TO_FIND: i64 = 100;
const MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND: i64 = 5;

/// How many feasible nodes the scheduler looks for before scoring; `percentage` 0 is adaptive.
pub fn num_feasible_nodes_to_find(percentage: i64, num_all_nodes: i64) -> i64 {
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND {
        return num_all_nodes;
    }
    let mut percentage = percentage;
    if percentage == 0 {
        percentage = (50 - num_all_nodes / 125).max(MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND);
    }
    (num_all_nodes * percentage / 100).max(MIN_FEASIBLE_NODES_TO_FIND)
}

/// What the plugins read from a pod, taken from it once per cycle.
#[derive(Debug, Clone, Default)]
pub struct PodFacts<'a> {
    pub requests: PodRequests,
    pub tolerations: &'a [Toleration],
    pub node_selector: Option<&'a std::collections::BTreeMap<String, String>>,
    pub required_terms: &'a [NodeSelectorTerm],
    pub preferred_terms: &'a [PreferredSchedulingTerm],
}

impl<'a> PodFacts<'a> {
    pub fn of(pod: &'a Pod) -> Self {
        let Some(spec) = pod.spec.as_ref() else {
            return PodFacts::default();
        };
        let mut facts = PodFacts::of_spec(spec);
        facts.requests = PodRequests::of(pod);
        facts
    }

    /// Everything but the requests, which need the whole pod.
    pub fn of_spec(spec: &'a PodSpec) -> Self {
        let node_affinity = spec
            .affinity
            .as_ref()
            .and_then(|a| a.node_affinity.as_ref());
        PodFacts {
            requests: PodRequests::default(),
            tolerations: spec.tolerations.as_deref().unwrap_or_default(),
            node_selector: spec.node_selector.as_ref(),
            required_terms: node_affinity
                .and_then(|na| {
                    na.required_during_scheduling_ignored_during_execution
                        .as_ref()
                })
                .map(|r| r.node_selector_terms.as_slice())
                .unwrap_or_default(),
            preferred_terms: node_affinity
                .and_then(|na| {
                    na.preferred_during_scheduling_ignored_during_execution
                        .as_deref()
                })
                .unwrap_or_default(),
        }
    }
}

/// Why a node fails filtering, in upstream's plugin order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unfit {
    Unschedulable,
    Taint,
    NodeAffinity,
    Resources,
}

/// The filters that do not depend on requests: NodeUnschedulable, TaintToleration and
/// NodeAffinity (nodeSelector, then the required terms, ORed).
pub fn placement_filter(pod: &PodFacts<'_>, node: &ModelNode) -> Result<(), Unfit> {
    let unschedulable_taint = super::terms::Taint {
        key: "node.kubernetes.io/unschedulable".into(),
        value: None,
        effect: "NoSchedule".into(),
    };
    if node.unschedulable && !tolerated(pod.tolerations, &unschedulable_taint) {
        return Err(Unfit::Unschedulable);
    }
    if !node
        .taints
        .iter()
        .filter(|t| t.filters())
        .all(|t| tolerated(pod.tolerations, t))
    {
        return Err(Unfit::Taint);
    }
    if let Some(selector) = pod.node_selector
        && !selector.iter().all(|(k, v)| node.labels.get(k) == Some(v))
    {
        return Err(Unfit::NodeAffinity);
    }
    if !any_term_matches(pod.required_terms, &node.name, &node.labels) {
        return Err(Unfit::NodeAffinity);
    }
    Ok(())
}

/// Every modelled filter.
pub fn filter(pod: &PodFacts<'_>, node: &ModelNode) -> Result<(), Unfit> {
    placement_filter(pod, node)?;
    if !node.fits(&pod.requests) {
        return Err(Unfit::Resources);
    }
    Ok(())
}

/// One node's plugin scores, each already multiplied by its plugin weight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeScore {
    pub node: usize,
    pub node_affinity: i64,
    pub resources_fit: i64,
    pub balanced_allocation: i64,
    pub taint_toleration: i64,
}

impl NodeScore {
    pub fn total(&self) -> i64 {
        self.node_affinity + self.resources_fit + self.balanced_allocation + self.taint_toleration
    }
}

/// The part of a node's score that does not depend on the other nodes: NodeResourcesFit and
/// BalancedAllocation, weighted. What decides among nodes with equal affinity.
pub fn resource_score(pod: &PodFacts<'_>, node: &ModelNode, config: &SchedulerConfig) -> i64 {
    let w = &config.weights;
    let balanced = if balanced_allocation_skips(&pod.requests, &config.balanced_resources) {
        0
    } else {
        balanced_allocation(&pod.requests, node, &config.balanced_resources)
    };
    w.node_resources_fit * resources_fit_score(&pod.requests, node, &config.scoring_strategy)
        + w.balanced_allocation * balanced
}

/// Scores `candidates` (indexes into `nodes`) as the profile does for the plugins modelled.
pub fn score(
    pod: &PodFacts<'_>,
    nodes: &[ModelNode],
    candidates: &[usize],
    config: &SchedulerConfig,
) -> Vec<NodeScore> {
    let w = &config.weights;
    let mut affinity: Vec<i64> = candidates
        .iter()
        .map(|&i| preferred_terms_score(pod.preferred_terms, &nodes[i]))
        .collect();
    default_normalize_score(MAX_NODE_SCORE, false, &mut affinity);
    let mut taints: Vec<i64> = candidates
        .iter()
        .map(|&i| intolerable_prefer_no_schedule(pod.tolerations, &nodes[i].taints))
        .collect();
    default_normalize_score(MAX_NODE_SCORE, true, &mut taints);
    candidates
        .iter()
        .zip(affinity.into_iter().zip(taints))
        .map(|(&i, (affinity, taint))| {
            let node = &nodes[i];
            let balanced = if balanced_allocation_skips(&pod.requests, &config.balanced_resources) {
                0
            } else {
                balanced_allocation(&pod.requests, node, &config.balanced_resources)
            };
            NodeScore {
                node: i,
                node_affinity: w.node_affinity * affinity,
                resources_fit: w.node_resources_fit
                    * resources_fit_score(&pod.requests, node, &config.scoring_strategy),
                balanced_allocation: w.balanced_allocation * balanced,
                taint_toleration: w.taint_toleration * taint,
            }
        })
        .collect()
}

/// What one cycle did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cycle {
    /// The chosen node, `None` when no node passed filtering (the pod stays Pending).
    pub node: Option<usize>,
    /// The feasible nodes that were scored (the sample).
    pub sample: Vec<usize>,
}

/// The scheduler: its configuration and the state that carries from one cycle to the next.
#[derive(Debug, Clone)]
pub struct Scheduler {
    pub config: SchedulerConfig,
    /// Where the next search for feasible nodes starts (`nextStartNodeIndex`).
    next_start: usize,
    /// Random tie-breaking among equal best totals, as upstream's reservoir sampling does.
    rng: u64,
    /// The cache's listing order (indexes into the nodes); `None`: the nodes' own order.
    order: Option<Vec<usize>>,
}

impl Scheduler {
    pub fn new(config: SchedulerConfig, seed: u64) -> Self {
        Scheduler {
            config,
            next_start: 0,
            rng: seed | 1,
            order: None,
        }
    }

    /// Lists the nodes in `order` (see [`super::order`]) instead of their own order.
    pub fn with_order(mut self, order: Vec<usize>) -> Self {
        self.order = Some(order);
        self
    }

    /// Starts the rotation at `start` (a scheduler that has run for a while is anywhere).
    pub fn starting_at(mut self, start: usize) -> Self {
        self.next_start = start;
        self
    }

    fn next_random(&mut self) -> u64 {
        // xorshift64*: enough to break ties without favouring node names.
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Runs one cycle for `pod` over `nodes`, listed in the scheduler cache's order.
    pub fn schedule(&mut self, pod: &PodFacts<'_>, nodes: &[ModelNode]) -> Cycle {
        let n = nodes.len();
        if n == 0 {
            return Cycle {
                node: None,
                sample: Vec::new(),
            };
        }
        let wanted = num_feasible_nodes_to_find(
            i64::from(self.config.percentage_of_nodes_to_score),
            n as i64,
        ) as usize;
        let start = self.next_start % n;
        let mut sample = Vec::with_capacity(wanted.min(n));
        let mut processed = 0;
        for k in 0..n {
            let at = (start + k) % n;
            let i = match &self.order {
                Some(order) if order.len() == n => order[at],
                _ => at,
            };
            processed += 1;
            if filter(pod, &nodes[i]).is_ok() {
                sample.push(i);
                if sample.len() >= wanted {
                    break;
                }
            }
        }
        self.next_start = (start + processed) % n;
        let node = match sample.as_slice() {
            [] => None,
            [only] => Some(*only),
            _ => {
                let scores = score(pod, nodes, &sample, &self.config);
                let best = scores.iter().map(NodeScore::total).max().unwrap_or(0);
                let mut chosen = None;
                let mut seen = 0u64;
                for s in scores.iter().filter(|s| s.total() == best) {
                    seen += 1;
                    if self.next_random().is_multiple_of(seen) {
                        chosen = Some(s.node);
                    }
                }
                chosen
            }
        };
        Cycle { node, sample }
    }
}
