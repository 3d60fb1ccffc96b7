//! What a decision is: the tiers, the avoid list and the predicted landing, as data (the patch
//! writes them as preferred terms).

use std::sync::Arc;

use k8s_openapi::api::core::v1::NodeSelectorRequirement;

use crate::config::NodeMatch;
use crate::view::ClusterView;
use crate::view::memo::MemoKey;

/// A node chosen for a tier.
#[derive(Debug, Clone, PartialEq)]
pub struct RankedNode {
    pub name: String,
    /// Bottleneck utilisation with this pod added (for the avoid list: heat now).
    pub heat: f64,
    /// Label-keyed terms can name this node: its value of the label is its name. Otherwise
    /// (or when terms go by name) a `metadata.name` requirement names it.
    pub(crate) by_label: bool,
    /// The weight of the term that names it: its tier's, graded within its tier when
    /// the scheduler samples (for the avoid list: the avoid term's).
    pub(crate) weight: i32,
}

impl RankedNode {
    /// The node at `position` in `view` as a term names it, by `node_match`: a label-keyed
    /// term can name it when its value of the label is its name, so the term's values stay
    /// node names for everything that reads them back (landing accuracy, `simulate`);
    /// otherwise `metadata.name` does.
    pub(crate) fn of(named: &NamedBy<'_>, position: usize, heat: f64, weight: i32) -> Self {
        RankedNode {
            name: named.view.nodes[position].name.clone(),
            heat,
            by_label: named.by_label.as_ref().is_some_and(|m| m[position] == 1),
            weight,
        }
    }
}

/// How terms name the nodes of one view: which of them a label-keyed term can name.
pub(crate) struct NamedBy<'v> {
    view: &'v ClusterView,
    /// 1 for each node whose value of the label is its name; `None` when terms go by name.
    by_label: Option<Arc<[u32]>>,
}

impl<'v> NamedBy<'v> {
    /// Worked out once per view and key: a decision names up to a hundred nodes or more, and
    /// each would look its label up.
    pub(crate) fn new(view: &'v ClusterView, node_match: &NodeMatch) -> Self {
        let by_label = match node_match {
            NodeMatch::Name => None,
            NodeMatch::Label { key } => Some(view.memo.get_or_compute(
                MemoKey::LabelIsName(key.clone()),
                || {
                    (view.nodes.iter())
                        .map(|node| u32::from(node.labels.get(key) == Some(&node.name)))
                        .collect()
                },
            )),
        };
        NamedBy { view, by_label }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct TierChoice {
    /// The tier's configured weight: its best node's.
    pub(crate) weight: i32,
    pub nodes: Vec<RankedNode>,
}

/// Everything the patch needs, and what the decision annotation summarises.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Decision {
    /// Coolest first; empty tiers are dropped.
    pub tiers: Vec<TierChoice>,
    /// Hot feasible nodes named in the avoid term, hottest first.
    pub(crate) avoid: Vec<RankedNode>,
    pub(crate) avoid_weight: i32,
    /// Required requirements from pinning rules, ANDed into every required term.
    pub pinning: Vec<NodeSelectorRequirement>,
    /// Where the model predicts the pod lands, with probabilities summing to 1.
    pub landing: Vec<(String, f64)>,
    /// Nodes the scheduler would find feasible (those without readings included).
    pub(crate) feasible: usize,
    /// Share of the feasible nodes the scheduler scores for one pod.
    pub(crate) sample_fraction: f64,
    /// No feasible node was cool: the least bad hot ones are named.
    pub(crate) saturated: bool,
    /// Candidates ranked at or below this were near-ties of the best, taken in this replica's
    /// own order (`None`: no candidate).
    pub(crate) tie_limit: Option<f64>,
}

impl Decision {
    /// The nodes of the first tier.
    pub(crate) fn first_tier(&self) -> &[RankedNode] {
        self.tiers.first().map_or(&[], |t| t.nodes.as_slice())
    }
}
