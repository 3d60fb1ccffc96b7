//! `review --explain`'s rows: every node of the view, with why a decision chose it or not.

use crate::config::PlacementConfig;
use crate::placement::context::{DecisionCtx, PodDemand};
use crate::placement::decide::deciding;
use crate::placement::decision::Decision;
use crate::placement::eligibility::Eligibility;
use crate::placement::eligible::constraints::Ineligible;
use crate::placement::rank::standing::{
    PodHeat, Standing, effective_load, fits_with, load_with, standing,
};
use crate::placement::replicas::replica::Replica;
use crate::view::NodeView;
use crate::view::heat::{Load, heat, is_hot};

/// One row of `review --explain`: every node, with why it was or was not chosen.
#[derive(Debug, Clone)]
pub(crate) struct NodeAssessment {
    pub(crate) name: String,
    /// Heat now (weighted), with in-flight pods.
    pub(crate) heat: f64,
    pub(crate) network_fraction: f64,
    pub(crate) eligibility: Result<(), Ineligible>,
    /// Requests fit in what is left of allocatable.
    pub(crate) fits: bool,
    pub(crate) hot: bool,
    /// What the decision ranks the node on for this pod (eligible nodes whose requests fit).
    pub(crate) ranked: Option<PodHeat>,
    /// The utilisation the pod would leave behind, per dimension it loads.
    pub(crate) after: After,
    /// Another replica's node: ranked as if its owner had just put a pod there too.
    pub(crate) foreign: bool,
    /// Beyond the job's own bounds (`placement.per_job`): named only when no cool node is
    /// within them.
    pub(crate) beyond_job_bounds: bool,
    /// Passes every filter, but the scores that count other pods (InterPodAffinity, a
    /// ScheduleAnyway spread) put it too far behind the best for a tier to lift it.
    pub(crate) kept_out: bool,
    /// Tier number (1-based) when the node was chosen.
    pub(crate) tier: Option<usize>,
    /// Its term's weight where grading set it below its tier's.
    pub(crate) graded: Option<i32>,
    pub(crate) avoided: bool,
    /// Predicted landing probability.
    pub(crate) landing: f64,
}

/// The utilisation a pod would leave behind on a node: CPU always, the NIC when the pod carries
/// network, memory when the policy weighs it. In-flight pods counted as the decision counts them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct After {
    pub(crate) cpu: f64,
    pub(crate) nic: Option<f64>,
    pub(crate) memory: Option<f64>,
}

/// Every node's assessment for the decision `decision` taken by `replica`, in view order
/// (coolest measured first). Which nodes the decision could name (this replica's share, what
/// the scores that count other pods keep, the job's own bounds) is the decision's own
/// [`Eligibility`]; the per-node reasons and figures are worked out here, for the table only.
pub(crate) fn assess_all(
    ctx: &DecisionCtx<'_>,
    replica: &Replica,
    decision: &Decision,
) -> Vec<NodeAssessment> {
    let DecisionCtx {
        pod,
        view,
        world,
        policy,
        inflight,
        ..
    } = *ctx;
    let may_name = Eligibility::of(ctx, &deciding(ctx, replica.clone()), None);
    let nodes = view.nodes.len();
    let kept = may_name.kept.as_ref().map(|kept| kept.marks(nodes));
    let bounded = may_name
        .bounded
        .as_ref()
        .map(|bounded| bounded.marks(nodes));
    let partition = may_name.partition.as_ref();
    view.nodes
        .iter()
        .enumerate()
        .map(|(index, node)| {
            let load = effective_load(node, world);
            let eligibility = (pod.constraints.check(node)).and_then(|()| may_name.refused(index));
            let ranked = match eligibility.ok().map(|()| standing(ctx, index, partition)) {
                Some(Standing::Cool(heat) | Standing::Hot { pod: heat, .. }) => Some(heat),
                _ => None,
            };
            let kept_out = eligibility.is_ok()
                && kept.is_some_and(|kept| !kept.get(index).copied().unwrap_or(false));
            let cautious = load_with(node, inflight.extra(index, node), policy.uncertainty);
            // The tier that names the node, and its term's weight.
            let named = decision.tiers.iter().enumerate().find_map(|(k, t)| {
                let n = t.nodes.iter().find(|n| n.name == node.name)?;
                Some((k, n.weight))
            });
            NodeAssessment {
                name: node.name.clone(),
                heat: heat(&load, &node.scale, &policy.weights),
                network_fraction: node.scale.network_fraction(load.network_bytes_per_second),
                eligibility,
                fits: fits_with(
                    node,
                    world.cluster.occupancy.node(&node.name),
                    world.charges.extra(&node.name),
                    &pod.facts,
                ),
                hot: is_hot(&load, &node.scale, &policy.hot),
                ranked,
                after: after_of(node, &cautious, pod, policy),
                foreign: partition.is_some_and(|p| p.weighs_as_foreign(index)),
                kept_out,
                beyond_job_bounds: bounded
                    .is_some_and(|bounded| !bounded.get(index).copied().unwrap_or(false)),
                tier: named.map(|(k, _)| k + 1),
                graded: named
                    .filter(|&(k, weight)| weight < decision.tiers[k].weight)
                    .map(|(_, weight)| weight),
                avoided: decision.avoid.iter().any(|n| n.name == node.name),
                landing: decision
                    .landing
                    .iter()
                    .find(|(n, _)| *n == node.name)
                    .map_or(0.0, |(_, p)| *p),
            }
        })
        .collect()
}

fn after_of(node: &NodeView, load: &Load, pod: &PodDemand<'_>, policy: &PlacementConfig) -> After {
    let carries_network =
        pod.load.network_bytes_per_second > 0.0 && node.scale.network_bytes_per_second > 0.0;
    After {
        cpu: load.cpu + pod.load.cpu_cores / node.scale.cpu_cores,
        nic: carries_network.then(|| {
            node.scale
                .network_fraction(load.network_bytes_per_second + pod.load.network_bytes_per_second)
        }),
        memory: (policy.weights.memory > 0.0 && node.allocatable.memory > 0).then(|| {
            load.memory
                + pod.facts.requests.requested.memory as f64 / node.allocatable.memory as f64
        }),
    }
}
