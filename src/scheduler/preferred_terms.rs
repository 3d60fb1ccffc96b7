//! NodeAffinity's score with a pod's preferred terms read once per cycle instead of once per
//! node: an `In` or `NotIn` with many values (the webhook's "any node but these" term names up
//! to 32 nodes) becomes a set, so each of the thousands of candidates costs a hash instead of a
//! comparison per value. Answers equal those of reading each term per node
//! ([`super::terms::term_matches`]), which the tests compare them with.

use std::collections::HashSet;

use k8s_openapi::api::core::v1::{NodeSelectorTerm, PreferredSchedulingTerm};

use super::node::ModelNode;
use super::terms::{is_empty_term, label_value, requirement_matches, term_matches_by};

/// From how many values a set beats scanning the list.
const SET_FROM: usize = 8;

/// The terms that can score: non-zero weight, not empty.
pub(crate) struct PreferredTerms<'a> {
    terms: Vec<Term<'a>>,
}

struct Term<'a> {
    weight: i64,
    term: &'a NodeSelectorTerm,
    /// By `matchExpressions` index: the values of a long `In` (`true`) or `NotIn` (`false`).
    sets: Vec<Option<(bool, HashSet<&'a str>)>>,
}

impl<'a> PreferredTerms<'a> {
    pub(crate) fn new(terms: &'a [PreferredSchedulingTerm]) -> Self {
        let terms = terms
            .iter()
            .filter(|t| t.weight != 0 && !is_empty_term(&t.preference))
            .map(|t| Term {
                weight: i64::from(t.weight),
                term: &t.preference,
                sets: (t.preference.match_expressions.iter().flatten())
                    .map(|r| {
                        let values = r.values.as_deref().unwrap_or_default();
                        let is_in = match r.operator.as_str() {
                            "In" => true,
                            "NotIn" => false,
                            _ => return None,
                        };
                        (values.len() >= SET_FROM)
                            .then(|| (is_in, values.iter().map(String::as_str).collect()))
                    })
                    .collect(),
            })
            .collect();
        PreferredTerms { terms }
    }

    /// Sum of the weights of the terms `node` matches.
    pub(crate) fn score(&self, node: &ModelNode) -> i64 {
        self.terms
            .iter()
            .filter(|t| {
                term_matches_by(t.term, &node.name, |i, r| match &t.sets[i] {
                    Some((is_in, values)) => {
                        let listed = label_value(&node.labels, &r.key)
                            .is_some_and(|v| values.contains(v.as_str()));
                        listed == *is_in
                    }
                    None => requirement_matches(r, &node.labels),
                })
            })
            .map(|t| t.weight)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::terms::term_matches;
    use k8s_openapi::api::core::v1::NodeSelectorRequirement;
    use proptest::prelude::*;
    use std::collections::BTreeMap;
    use std::sync::Arc;

    fn requirement(key: &str, operator: &str, values: &[usize]) -> NodeSelectorRequirement {
        NodeSelectorRequirement {
            key: key.into(),
            operator: operator.into(),
            values: Some(values.iter().map(|v| format!("n{v}")).collect()),
        }
    }

    /// Each term read per node, as the scheduler's own NodeAffinity score does.
    fn preferred_terms_score(terms: &[PreferredSchedulingTerm], node: &ModelNode) -> i64 {
        terms
            .iter()
            .filter(|t| t.weight != 0 && !is_empty_term(&t.preference))
            .filter(|t| term_matches(&t.preference, &node.name, &node.labels))
            .map(|t| i64::from(t.weight))
            .sum()
    }

    proptest! {
        #![proptest_config(crate::test_support::seeded::config(256))]
        /// Equal to the per-node reading for short and long lists, both operators, terms with
        /// several requirements and nodes with or without the label.
        #[test]
        fn scores_equal_the_per_node_reading(
            terms in prop::collection::vec(
                (0..3i32, prop::collection::vec(
                    (prop::sample::select(vec!["In", "NotIn", "Exists"]),
                     prop::sample::select(vec!["host", "zone"]),
                     prop::collection::vec(0..40usize, 0..20)),
                    0..3)),
                0..4),
            labelled in prop::collection::vec((0..40usize, any::<bool>()), 1..20),
        ) {
            let terms: Vec<PreferredSchedulingTerm> = terms
                .into_iter()
                .map(|(weight, reqs)| PreferredSchedulingTerm {
                    weight,
                    preference: NodeSelectorTerm {
                        match_expressions: Some(reqs.iter().map(|(op, key, values)| {
                            let values = if *op == "Exists" { &[][..] } else { &values[..] };
                            requirement(key, op, values)
                        }).collect()),
                        match_fields: None,
                    },
                })
                .collect();
            let compiled = PreferredTerms::new(&terms);
            for (value, has_label) in labelled {
                let mut labels = BTreeMap::from([("zone".to_string(), format!("n{}", value % 3))]);
                if has_label {
                    labels.insert("host".into(), format!("n{value}"));
                }
                let node = ModelNode {
                    name: format!("n{value}"),
                    labels: Arc::new(labels),
                    ..ModelNode::default()
                };
                prop_assert_eq!(compiled.score(&node), preferred_terms_score(&terms, &node));
            }
        }
    }
}
