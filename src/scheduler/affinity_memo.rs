//! Whether each node meets a pod's required node affinity, worked out once per run of pods that
//! share it. The pods of a burst carry one `nodeSelector` and one set of required terms, and
//! the scheduler filters every node for each of them: at 5,000 nodes and a 100 % sample the
//! lookups were the model's largest cost. A node's labels are never changed in place (a change
//! is a new `Arc`), so an answer holds while the node's labels are the same allocation; the
//! memo holds that allocation, so its address cannot be reused for other labels meanwhile.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::NodeSelectorTerm;

use super::node::ModelNode;
use super::pod::{PodFacts, required_node_affinity_matches};
use super::pods::Labels;

/// The required affinity last asked about, and each node's answer to it by index, with the
/// labels it was worked out on.
#[derive(Debug, Clone, Default)]
pub(crate) struct AffinityMemo {
    selector: Option<BTreeMap<String, String>>,
    terms: Vec<NodeSelectorTerm>,
    answers: Vec<Option<(Arc<Labels>, bool)>>,
    /// The pod asked about last can be answered from memory.
    memoised: bool,
}

impl AffinityMemo {
    /// Starts answering for `pod` over `nodes`: the answers kept are dropped unless the pod
    /// asks what the last one did. A pod whose terms name nodes by field (which the labels do
    /// not tell) is answered afresh for every node.
    pub(crate) fn begin(&mut self, pod: &PodFacts<'_>, nodes: usize) {
        self.memoised = !pod
            .required_terms
            .iter()
            .any(|t| t.match_fields.as_ref().is_some_and(|f| !f.is_empty()));
        if !self.memoised {
            return;
        }
        if self.selector.as_ref() != pod.node_selector || self.terms != pod.required_terms {
            self.selector = pod.node_selector.cloned();
            self.terms = pod.required_terms.to_vec();
            self.answers.clear();
        }
        self.answers.resize(nodes, None);
    }

    /// `required_node_affinity_matches(pod, node)` for node `index`, after [`Self::begin`]
    /// for this pod.
    pub(crate) fn matches(&mut self, pod: &PodFacts<'_>, index: usize, node: &ModelNode) -> bool {
        if !self.memoised {
            return required_node_affinity_matches(pod, node);
        }
        match &self.answers[index] {
            Some((seen, answer)) if Arc::ptr_eq(seen, &node.labels) => *answer,
            _ => {
                let answer = required_node_affinity_matches(pod, node);
                self.answers[index] = Some((node.labels.clone(), answer));
                answer
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::NodeSelectorRequirement;

    fn node(name: &str, pool: &str) -> ModelNode {
        ModelNode {
            name: name.into(),
            labels: Arc::new(BTreeMap::from([("pool".to_string(), pool.to_string())])),
            ..ModelNode::default()
        }
    }

    /// Every answer equals a fresh lookup, through a change of selector and a node relabelled.
    #[test]
    fn answers_follow_the_selector_and_the_labels() {
        let mut nodes = vec![node("a", "flink"), node("b", "batch")];
        let flink = BTreeMap::from([("pool".to_string(), "flink".to_string())]);
        let batch = BTreeMap::from([("pool".to_string(), "batch".to_string())]);
        let mut memo = AffinityMemo::default();
        let check = |memo: &mut AffinityMemo, pod: &PodFacts<'_>, nodes: &[ModelNode]| {
            memo.begin(pod, nodes.len());
            for (i, n) in nodes.iter().enumerate() {
                assert_eq!(
                    memo.matches(pod, i, n),
                    required_node_affinity_matches(pod, n)
                );
            }
        };
        let on = |selector| PodFacts {
            node_selector: Some(selector),
            ..PodFacts::default()
        };
        check(&mut memo, &on(&flink), &nodes);
        check(&mut memo, &on(&flink), &nodes);
        check(&mut memo, &on(&batch), &nodes);
        nodes[1] = node("b", "flink");
        check(&mut memo, &on(&batch), &nodes);
        assert!(!memo.matches(&on(&batch), 1, &nodes[1]));
    }

    #[test]
    fn terms_that_name_nodes_by_field_are_not_memoised() {
        let terms = [NodeSelectorTerm {
            match_fields: Some(vec![NodeSelectorRequirement {
                key: "metadata.name".into(),
                operator: "In".into(),
                values: Some(vec!["a".into()]),
            }]),
            ..NodeSelectorTerm::default()
        }];
        let pod = PodFacts {
            required_terms: &terms,
            ..PodFacts::default()
        };
        let mut memo = AffinityMemo::default();
        memo.begin(&pod, 2);
        assert!(!memo.memoised);
        let named = ModelNode {
            name: "a".into(),
            ..ModelNode::default()
        };
        let other = ModelNode {
            name: "b".into(),
            labels: named.labels.clone(),
            ..ModelNode::default()
        };
        // The same labels allocation, answered by name each time.
        assert!(memo.matches(&pod, 0, &named));
        assert!(!memo.matches(&pod, 0, &other));
    }
}
