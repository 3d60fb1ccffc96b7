//! One scheduling cycle: filter (with `numFeasibleNodesToFind` and a rotating start), score,
//! select, as `schedule_one.go` does for the plugins modelled here.

use super::affinity_memo::AffinityMemo;
use super::node::ModelNode;
use super::pod::required_node_affinity_matches;
use super::pod_affinity::{AffinityFilter, AffinityUnfit, affinity_scores};
use super::pods::ClusterPods;
use super::preferred_terms::PreferredTerms;
use super::scores::{
    MAX_NODE_SCORE, balanced_allocation, balanced_allocation_skips, default_normalize_score,
    intolerable_prefer_no_schedule, resources_fit_score,
};
use super::terms::tolerated;
use super::topology_spread::{SpreadFilter, SpreadUnfit, spread_scores};
use crate::config::scheduler::SchedulerConfig;

pub(crate) use super::pod::PodFacts;

/// Score weights of the default profile for the plugins that look at other pods.
pub(crate) const POD_TOPOLOGY_SPREAD_WEIGHT: i64 = 2;
pub(crate) const INTER_POD_AFFINITY_WEIGHT: i64 = 2;

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

/// Why a node fails filtering, in upstream's plugin order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unfit {
    Unschedulable,
    Taint,
    NodeAffinity,
    Resources,
    TopologySpread(SpreadUnfit),
    InterPodAffinity(AffinityUnfit),
}

/// The filters that do not depend on requests: NodeUnschedulable, TaintToleration and
/// NodeAffinity (nodeSelector, then the required terms, ORed).
pub(crate) fn placement_filter(pod: &PodFacts<'_>, node: &ModelNode) -> Result<(), Unfit> {
    placement_filter_answered(pod, node, || required_node_affinity_matches(pod, node))
}

/// [`placement_filter`] with NodeAffinity's answer from `affinity_matches`, asked only when
/// the filters before it pass.
fn placement_filter_answered(
    pod: &PodFacts<'_>,
    node: &ModelNode,
    affinity_matches: impl FnOnce() -> bool,
) -> Result<(), Unfit> {
    if node.unschedulable && !tolerated(pod.tolerations, &unschedulable_taint()) {
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
    if !affinity_matches() {
        return Err(Unfit::NodeAffinity);
    }
    Ok(())
}

/// The taint NodeUnschedulable checks a cordoned node's pods against; built only for such a
/// node (the filter runs for every node of every cycle).
fn unschedulable_taint() -> super::terms::Taint {
    super::terms::Taint {
        key: "node.kubernetes.io/unschedulable".into(),
        value: None,
        effect: "NoSchedule".into(),
    }
}

/// Every modelled filter.
pub(crate) fn filter(pod: &PodFacts<'_>, node: &ModelNode) -> Result<(), Unfit> {
    placement_filter(pod, node)?;
    fit_filter(pod, node)
}

/// NodeResourcesFit.
fn fit_filter(pod: &PodFacts<'_>, node: &ModelNode) -> Result<(), Unfit> {
    if node.fits(&pod.requests) {
        Ok(())
    } else {
        Err(Unfit::Resources)
    }
}

/// What PreFilter computes for the plugins that look at other pods, once per cycle.
#[derive(Debug, Clone)]
pub struct PodFilters<'a> {
    spread: Option<SpreadFilter<'a>>,
    affinity: Option<AffinityFilter<'a>>,
}

impl<'a> PodFilters<'a> {
    pub fn new<N: AsRef<ModelNode>>(
        pod: &PodFacts<'a>,
        nodes: &'a [N],
        cluster: &ClusterPods<'a>,
    ) -> Self {
        PodFilters {
            spread: SpreadFilter::new(pod, nodes, cluster),
            affinity: AffinityFilter::new(pod, nodes, cluster),
        }
    }

    /// PodTopologySpread, then InterPodAffinity.
    pub(crate) fn check(&self, pod: &PodFacts<'_>, node: &ModelNode) -> Result<(), Unfit> {
        if let Some(spread) = &self.spread {
            spread.check(pod, node).map_err(Unfit::TopologySpread)?;
        }
        if let Some(affinity) = &self.affinity {
            affinity.check(node).map_err(Unfit::InterPodAffinity)?;
        }
        Ok(())
    }
}

/// Every modelled filter, those that look at other pods included.
pub fn filter_with(
    pod: &PodFacts<'_>,
    node: &ModelNode,
    others: &PodFilters<'_>,
) -> Result<(), Unfit> {
    filter(pod, node)?;
    others.check(pod, node)
}

/// One node's plugin scores, each already multiplied by its plugin weight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeScore {
    pub node: usize,
    pub node_affinity: i64,
    pub resources_fit: i64,
    pub balanced_allocation: i64,
    pub taint_toleration: i64,
    /// 0 unless the cycle was given the cluster's pods.
    pub pod_topology_spread: i64,
    pub inter_pod_affinity: i64,
}

impl NodeScore {
    pub fn total(&self) -> i64 {
        self.node_affinity
            + self.resources_fit
            + self.balanced_allocation
            + self.taint_toleration
            + self.pod_topology_spread
            + self.inter_pod_affinity
    }
}

/// The part of a node's score that does not depend on the other nodes: NodeResourcesFit and
/// BalancedAllocation, weighted. What decides among nodes with equal affinity.
pub(crate) fn resource_score(
    pod: &PodFacts<'_>,
    node: &ModelNode,
    config: &SchedulerConfig,
) -> i64 {
    let w = &config.weights;
    w.node_resources_fit * resources_fit_score(&pod.requests, node, &config.scoring_strategy)
        + w.balanced_allocation * balanced_score(pod, node, config)
}

/// NodeResourcesBalancedAllocation, unweighted, by the configured formula: 0 when PreScore
/// skips the pod.
fn balanced_score(pod: &PodFacts<'_>, node: &ModelNode, config: &SchedulerConfig) -> i64 {
    if balanced_allocation_skips(&pod.requests, &config.balanced_resources) {
        return 0;
    }
    balanced_allocation(
        &pod.requests,
        node,
        &config.balanced_resources,
        config.balanced_allocation_formula,
    )
}

/// Scores `candidates` (indexes into `nodes`) as the profile does for the plugins modelled;
/// PodTopologySpread and InterPodAffinity only when `cluster` is given.
pub fn score_with(
    pod: &PodFacts<'_>,
    nodes: &[ModelNode],
    candidates: &[usize],
    config: &SchedulerConfig,
    cluster: Option<&ClusterPods<'_>>,
) -> Vec<NodeScore> {
    let w = &config.weights;
    let weighted = |scores: Option<Vec<i64>>, weight: i64| -> Vec<i64> {
        scores.map_or_else(
            || vec![0; candidates.len()],
            |s| s.into_iter().map(|s| s * weight).collect(),
        )
    };
    let spread = weighted(
        cluster.and_then(|c| spread_scores(pod, nodes, candidates, c)),
        POD_TOPOLOGY_SPREAD_WEIGHT,
    );
    let inter_pod = weighted(
        cluster.and_then(|c| affinity_scores(pod, nodes, candidates, c)),
        INTER_POD_AFFINITY_WEIGHT,
    );
    let preferred = PreferredTerms::new(pod.preferred_terms);
    let mut affinity: Vec<i64> = candidates
        .iter()
        .map(|&i| preferred.score(&nodes[i]))
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
        .zip(spread.into_iter().zip(inter_pod))
        .map(|((&i, (affinity, taint)), (spread, inter_pod))| {
            let node = &nodes[i];
            NodeScore {
                node: i,
                node_affinity: w.node_affinity * affinity,
                resources_fit: w.node_resources_fit
                    * resources_fit_score(&pod.requests, node, &config.scoring_strategy),
                balanced_allocation: w.balanced_allocation * balanced_score(pod, node, config),
                taint_toleration: w.taint_toleration * taint,
                pod_topology_spread: spread,
                inter_pod_affinity: inter_pod,
            }
        })
        .collect()
}

/// What one cycle did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Cycle {
    /// The chosen node, `None` when no node passed filtering (the pod stays Pending).
    pub(crate) node: Option<usize>,
    /// The feasible nodes that were scored (the sample).
    pub(crate) sample: Vec<usize>,
}

/// The scheduler: its configuration and the state that carries from one cycle to the next.
#[derive(Debug, Clone)]
pub(crate) struct Scheduler {
    pub(crate) config: SchedulerConfig,
    /// Where the next search for feasible nodes starts (`nextStartNodeIndex`).
    next_start: usize,
    /// Random tie-breaking among equal best totals, as upstream's reservoir sampling does.
    rng: u64,
    /// The cache's listing order (indexes into the nodes); `None`: the nodes' own order.
    order: Option<Vec<usize>>,
    /// Each node's answer to the last required node affinity the filter asked about.
    affinity: AffinityMemo,
}

impl Scheduler {
    pub(crate) fn new(config: SchedulerConfig, seed: u64) -> Self {
        Scheduler {
            config,
            next_start: 0,
            rng: seed | 1,
            order: None,
            affinity: AffinityMemo::default(),
        }
    }

    /// Lists the nodes in `order` (see [`super::order`]) instead of their own order.
    pub(crate) fn with_order(mut self, order: Vec<usize>) -> Self {
        self.order = Some(order);
        self
    }

    /// Starts the rotation at `start` (a scheduler that has run for a while is anywhere).
    pub(crate) fn starting_at(mut self, start: usize) -> Self {
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

    /// Runs one cycle for `pod` over `nodes`, listed in the scheduler cache's order, with no
    /// other pod in view (PodTopologySpread and InterPodAffinity do nothing).
    #[cfg(test)]
    pub(crate) fn schedule(&mut self, pod: &PodFacts<'_>, nodes: &[ModelNode]) -> Cycle {
        self.run(pod, nodes, None)
    }

    /// [`Scheduler::schedule`] with the cluster's pods: PodTopologySpread and InterPodAffinity
    /// filter and score as upstream does.
    pub(crate) fn schedule_with(
        &mut self,
        pod: &PodFacts<'_>,
        nodes: &[ModelNode],
        cluster: &ClusterPods<'_>,
    ) -> Cycle {
        self.run(pod, nodes, Some(cluster))
    }

    fn run(
        &mut self,
        pod: &PodFacts<'_>,
        nodes: &[ModelNode],
        cluster: Option<&ClusterPods<'_>>,
    ) -> Cycle {
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
        let others = cluster.map(|c| PodFilters::new(pod, nodes, c));
        self.affinity.begin(pod, n);
        let mut sample = Vec::with_capacity(wanted.min(n));
        let mut processed = 0;
        for k in 0..n {
            let at = (start + k) % n;
            let i = match &self.order {
                Some(order) if order.len() == n => order[at],
                _ => at,
            };
            processed += 1;
            let node = &nodes[i];
            let affinity = &mut self.affinity;
            // `filter_with`, its NodeAffinity answer from the memo.
            let fits = placement_filter_answered(pod, node, || affinity.matches(pod, i, node))
                .and_then(|()| fit_filter(pod, node))
                .and_then(|()| others.as_ref().map_or(Ok(()), |o| o.check(pod, node)));
            if fits.is_ok() {
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
                let scores = score_with(pod, nodes, &sample, &self.config, cluster);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::scheduler::BalancedAllocationFormula;
    use crate::scheduler::resources::{CPU, MEMORY};

    /// Both ways of scoring a node, the cycle's and the resource score placement ranks by,
    /// follow the configured BalancedAllocation formula.
    #[test]
    fn balanced_allocation_is_scored_by_the_configured_formula() {
        // Upstream's "requested resources at node capacity", node2: cpu 3000 -> 6000/6000,
        // memory 5000/10000 either way: 75 with the pod (v1.35), 62 as a change (v1.36).
        let mut node = ModelNode::default();
        *node.allocatable.slot(CPU) = 6000;
        *node.allocatable.slot(MEMORY) = 10000;
        *node.requested.slot(CPU) = 3000;
        *node.requested.slot(MEMORY) = 5000;
        let mut pod = PodFacts::default();
        *pod.requests.requested.slot(CPU) = 3000;
        let nodes = [node];
        let fit_only = |formula| SchedulerConfig {
            weights: crate::config::scheduler::PluginWeights {
                balanced_allocation: 0,
                ..Default::default()
            },
            balanced_allocation_formula: formula,
            ..SchedulerConfig::default()
        };
        for (formula, balanced) in [
            (BalancedAllocationFormula::WithPod, 75),
            (BalancedAllocationFormula::ChangeInBalance, 62),
        ] {
            let config = SchedulerConfig {
                balanced_allocation_formula: formula,
                ..SchedulerConfig::default()
            };
            let scored = score_with(&pod, &nodes, &[0], &config, None);
            assert_eq!(scored[0].balanced_allocation, balanced, "{formula:?}");
            assert_eq!(
                resource_score(&pod, &nodes[0], &config),
                resource_score(&pod, &nodes[0], &fit_only(formula)) + balanced,
                "{formula:?}"
            );
        }
        assert_eq!(
            SchedulerConfig::default().balanced_allocation_formula,
            BalancedAllocationFormula::ChangeInBalance
        );
    }
}
