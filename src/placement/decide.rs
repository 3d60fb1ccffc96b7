//! `decide`: the ranked nodes and the node-affinity terms for one pod.

use k8s_openapi::api::core::v1::{
    NodeSelectorRequirement, NodeSelectorTerm, PreferredSchedulingTerm,
};

use super::constraints::{Ineligible, PodConstraints};
use super::heat::{Load, heat, is_hot};
use super::ledger::{Ledger, PodLoad};
use crate::config::{NodeMatch, PlacementConfig};
use crate::view::{ClusterView, NodeView};

/// A node chosen for a tier.
#[derive(Debug, Clone, PartialEq)]
pub struct RankedNode {
    pub name: String,
    /// Heat including in-flight pods.
    pub heat: f64,
    /// What a label-keyed term matches on (the label's value, else the node name).
    pub match_value: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TierChoice {
    pub weight: i32,
    pub nodes: Vec<RankedNode>,
}

/// Everything the patch needs, and what the decision annotation summarises.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Decision {
    /// Coolest first; empty tiers are dropped.
    pub tiers: Vec<TierChoice>,
    /// Hot eligible nodes named in the avoid term, hottest first.
    pub avoid: Vec<RankedNode>,
    pub avoid_weight: i32,
    /// Required requirements from pinning rules, ANDed into every required term.
    pub pinning: Vec<NodeSelectorRequirement>,
}

impl Decision {
    /// The nodes of the first tier: where the pod most likely lands.
    pub fn first_tier(&self) -> &[RankedNode] {
        self.tiers.first().map_or(&[], |t| t.nodes.as_slice())
    }

    pub fn prefers_anything(&self) -> bool {
        !self.tiers.is_empty() || !self.avoid.is_empty()
    }

    /// Preferred terms in the shape the apiserver validates (weights 1..100, one value per
    /// `matchFields` requirement).
    pub fn preferred_terms(&self, node_match: &NodeMatch) -> Vec<PreferredSchedulingTerm> {
        let mut terms = Vec::new();
        for tier in &self.tiers {
            match node_match {
                // matchFields takes exactly one value: one term per node.
                NodeMatch::Name => {
                    terms.extend(tier.nodes.iter().map(|n| PreferredSchedulingTerm {
                        weight: tier.weight,
                        preference: NodeSelectorTerm {
                            match_fields: Some(vec![name_requirement("In", &n.name)]),
                            match_expressions: None,
                        },
                    }))
                }
                NodeMatch::Label { key } => terms.push(PreferredSchedulingTerm {
                    weight: tier.weight,
                    preference: NodeSelectorTerm {
                        match_expressions: Some(vec![NodeSelectorRequirement {
                            key: key.clone(),
                            operator: "In".into(),
                            values: Some(
                                tier.nodes.iter().map(|n| n.match_value.clone()).collect(),
                            ),
                        }]),
                        match_fields: None,
                    },
                }),
            }
        }
        if !self.avoid.is_empty() && self.avoid_weight > 0 {
            // One term whose requirements AND together: "any node but these".
            let preference = match node_match {
                NodeMatch::Name => NodeSelectorTerm {
                    match_fields: Some(
                        self.avoid
                            .iter()
                            .map(|n| name_requirement("NotIn", &n.name))
                            .collect(),
                    ),
                    match_expressions: None,
                },
                NodeMatch::Label { key } => NodeSelectorTerm {
                    match_expressions: Some(vec![NodeSelectorRequirement {
                        key: key.clone(),
                        operator: "NotIn".into(),
                        values: Some(self.avoid.iter().map(|n| n.match_value.clone()).collect()),
                    }]),
                    match_fields: None,
                },
            };
            terms.push(PreferredSchedulingTerm {
                weight: self.avoid_weight,
                preference,
            });
        }
        terms
    }
}

fn name_requirement(operator: &str, node: &str) -> NodeSelectorRequirement {
    NodeSelectorRequirement {
        key: "metadata.name".into(),
        operator: operator.into(),
        values: Some(vec![node.to_string()]),
    }
}

/// A node's load with the in-flight pods counted on it.
pub fn effective_load(node: &NodeView, ledger: Option<&Ledger>) -> Load {
    match ledger.and_then(|l| l.extra(&node.name)) {
        None => node.load,
        Some(extra) => with_inflight(node, extra),
    }
}

fn with_inflight(node: &NodeView, extra: PodLoad) -> Load {
    Load {
        cpu: node.load.cpu + extra.cpu_cores / node.scale.cpu_cores,
        network_bytes_per_second: node.load.network_bytes_per_second
            + extra.network_bytes_per_second,
        memory: node.load.memory,
    }
}

fn match_value(node: &NodeView, node_match: &NodeMatch) -> String {
    match node_match {
        NodeMatch::Name => node.name.clone(),
        NodeMatch::Label { key } => node.labels.get(key).unwrap_or(&node.name).clone(),
    }
}

/// Ranks the nodes this pod can land on, coolest first, and builds the tiers and the avoid list.
///
/// Walks the view in order of measured heat and stops once the next node's measured heat
/// exceeds the worst one kept: in-flight load only ever adds heat, so no later node can win.
/// On a large cluster that is a few dozen nodes, not all of them.
pub fn decide(
    pod: &PodConstraints<'_>,
    view: &ClusterView,
    ledger: Option<&Ledger>,
    policy: &PlacementConfig,
) -> Decision {
    let wanted: usize = policy.tiers.iter().map(|t| t.nodes).sum();
    // (heat, index into view.nodes), kept sorted, at most `wanted` long.
    let mut best: Vec<(f64, usize)> = Vec::with_capacity(wanted + 1);
    for (i, node) in view.nodes.iter().enumerate() {
        if best.len() == wanted && best.last().is_some_and(|&(h, _)| node.base_heat > h) {
            break;
        }
        if node.base_hot {
            continue;
        }
        // Arithmetic first, the label checks last: once in-flight pods have raised the
        // coolest nodes, most nodes walked past lose on heat alone.
        let load = effective_load(node, ledger);
        if is_hot(&load, &node.scale, &policy.hot) {
            continue;
        }
        let h = heat(&load, &node.scale, &policy.weights);
        let at = best
            .partition_point(|&(bh, bi)| bh < h || (bh == h && view.nodes[bi].name < node.name));
        if at >= wanted
            || pod.check(node).is_err()
            || ledger.is_some_and(|l| l.passed_over(&node.name))
        {
            continue;
        }
        best.insert(at, (h, i));
        best.truncate(wanted);
    }

    let mut ranked = best.into_iter().map(|(h, i)| RankedNode {
        name: view.nodes[i].name.clone(),
        heat: h,
        match_value: match_value(&view.nodes[i], &policy.node_match),
    });
    let tiers = policy
        .tiers
        .iter()
        .map(|tier| TierChoice {
            weight: tier.weight,
            nodes: ranked.by_ref().take(tier.nodes).collect(),
        })
        .filter(|t| !t.nodes.is_empty())
        .collect();

    Decision {
        tiers,
        avoid: avoid_list(pod, view, ledger, policy),
        avoid_weight: policy.avoid_hot.weight,
        pinning: pod.pinning.clone(),
    }
}

/// Hot nodes the pod could land on, hottest first: measured-hot ones plus those that in-flight
/// pods made hot.
///
/// Nodes without in-flight load keep their measured heat, so the view's hottest-first list
/// gives them in order: only the first `max_nodes` eligible ones can make the cut. Nodes with
/// in-flight load are few and are checked one by one.
fn avoid_list(
    pod: &PodConstraints<'_>,
    view: &ClusterView,
    ledger: Option<&Ledger>,
    policy: &PlacementConfig,
) -> Vec<RankedNode> {
    let max = policy.avoid_hot.max_nodes;
    if policy.avoid_hot.weight == 0 || max == 0 {
        return Vec::new();
    }
    let has_inflight = |node: &NodeView| ledger.is_some_and(|l| l.extra(&node.name).is_some());
    let measured = view
        .hot_nodes
        .iter()
        .map(|&i| &view.nodes[i])
        .filter(|node| !has_inflight(node) && pod.check(node).is_ok())
        .take(max)
        .map(|node| (node.base_heat, node));
    let inflight = ledger
        .into_iter()
        .flat_map(|l| l.nodes())
        .filter_map(|(name, extra)| {
            let node = view.node(name)?;
            let load = with_inflight(node, extra);
            is_hot(&load, &node.scale, &policy.hot)
                .then(|| (heat(&load, &node.scale, &policy.weights), node))
        })
        .filter(|(_, node)| pod.check(node).is_ok());
    let mut hot: Vec<(f64, &NodeView)> = measured.chain(inflight).collect();
    hot.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.name.cmp(&b.1.name)));
    hot.truncate(max);
    hot.into_iter()
        .map(|(h, node)| RankedNode {
            name: node.name.clone(),
            heat: h,
            match_value: match_value(node, &policy.node_match),
        })
        .collect()
}

/// One row of `review --explain`: every node, with why it was or was not chosen.
#[derive(Debug, Clone)]
pub struct NodeAssessment {
    pub name: String,
    pub heat: f64,
    pub load: Load,
    pub network_fraction: f64,
    pub eligibility: Result<(), Ineligible>,
    pub hot: bool,
    /// A pod steered here was recently bound elsewhere.
    pub passed_over: bool,
    /// Tier number (1-based) when the node was chosen.
    pub tier: Option<usize>,
    pub avoided: bool,
}

/// Every node's assessment for the decision `decision`, in view order (coolest measured first).
pub fn assess_all(
    pod: &PodConstraints<'_>,
    view: &ClusterView,
    ledger: Option<&Ledger>,
    policy: &PlacementConfig,
    decision: &Decision,
) -> Vec<NodeAssessment> {
    view.nodes
        .iter()
        .map(|node| {
            let load = effective_load(node, ledger);
            NodeAssessment {
                name: node.name.clone(),
                heat: heat(&load, &node.scale, &policy.weights),
                network_fraction: node.scale.network_fraction(load.network_bytes_per_second),
                load,
                eligibility: pod.check(node),
                hot: is_hot(&load, &node.scale, &policy.hot),
                passed_over: ledger.is_some_and(|l| l.passed_over(&node.name)),
                tier: decision
                    .tiers
                    .iter()
                    .position(|t| t.nodes.iter().any(|n| n.name == node.name))
                    .map(|p| p + 1),
                avoided: decision.avoid.iter().any(|n| n.name == node.name),
            }
        })
        .collect()
}
