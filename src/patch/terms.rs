//! A decision in the apiserver's words: its tiers and avoid list as weighted preferred node
//! affinity terms, built once and written either as k8s types or as JSON borrowing the
//! decision's node names.

use k8s_openapi::api::core::v1::{
    NodeSelectorRequirement, NodeSelectorTerm, PreferredSchedulingTerm,
};
use serde::Serialize;

use crate::config::{HeatBands, NodeMatch};
use crate::placement::{Decision, RankedNode};

/// Preferred terms in the shape the apiserver validates (weights 1..100, one value per
/// `matchFields` requirement).
pub fn preferred_terms(
    decision: &Decision,
    node_match: &NodeMatch,
) -> Vec<PreferredSchedulingTerm> {
    let owned = |requirements: Vec<RequirementJson<'_>>| {
        let owned: Vec<NodeSelectorRequirement> =
            requirements.iter().map(RequirementJson::to_k8s).collect();
        (!owned.is_empty()).then_some(owned)
    };
    terms(decision, node_match)
        .into_iter()
        .map(|(weight, expressions, fields)| PreferredSchedulingTerm {
            weight,
            preference: NodeSelectorTerm {
                match_expressions: owned(expressions),
                match_fields: owned(fields),
            },
        })
        .collect()
}

/// [`preferred_terms`] as borrowed JSON terms, in the same order.
pub fn preferred_json<'a>(decision: &'a Decision, node_match: &'a NodeMatch) -> Vec<TermJson<'a>> {
    terms(decision, node_match)
        .into_iter()
        .map(|(weight, expressions, fields)| TermJson::new(weight, expressions, fields))
        .collect()
}

/// The terms that grade every node by its heat band (see `bands`): a node in band b scores
/// `weight` × (bands - 1 - b), a node without the label nothing, from one term per bit of that
/// score: `key In` the bands whose score has the bit, weighing `weight` × 2^bit. Empty unless
/// the bands are kept.
pub fn band_terms(config: &HeatBands) -> Vec<TermJson<'_>> {
    if !config.enabled {
        return Vec::new();
    }
    let bands = config.bands.min(BAND_VALUES.len() as u32);
    let Some(top) = bands.checked_sub(1) else {
        return Vec::new();
    };
    (0..config.term_count())
        .rev()
        .map(|bit| {
            let values: Vec<&str> = (0..bands)
                .filter(|band| (top - band) >> bit & 1 == 1)
                .map(|band| BAND_VALUES[band as usize])
                .collect();
            let within = RequirementJson::new(&config.key, "In", values);
            TermJson::new(config.weight << bit, vec![within], Vec::new())
        })
        .collect()
}

/// Band numbers as label values (config: at most 20 bands).
const BAND_VALUES: [&str; 20] = [
    "0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "13", "14", "15", "16",
    "17", "18", "19",
];

/// Each term as (weight, matchExpressions, matchFields). By label, a tier is one term
/// whose `In` lists its nodes (a pod spec about 10 KB smaller at 5,000 nodes than a term
/// per node); a node the label does not name gets a `metadata.name` term of its own at the
/// same weight, so it scores as its tier does. The avoid term is one term
/// whose requirements AND together: "any node but these".
fn terms<'a>(decision: &'a Decision, node_match: &'a NodeMatch) -> Vec<RequirementTerm<'a>> {
    let key = match node_match {
        NodeMatch::Name => None,
        NodeMatch::Label { key } => Some(key.as_str()),
    };
    // Terms go by a label, and the node's value of it is its name.
    let named_by_label = |node: &RankedNode| key.is_some() && node.by_label;
    let by_label = |operator, nodes: &'a [RankedNode]| {
        let values: Vec<&str> = nodes
            .iter()
            .filter(|n| named_by_label(n))
            .map(|n| n.name.as_str())
            .collect();
        match key {
            Some(key) if !values.is_empty() => {
                vec![RequirementJson::new(key, operator, values)]
            }
            _ => Vec::new(),
        }
    };
    // matchFields takes exactly one value: one requirement per node.
    let by_name = |operator, nodes: &'a [RankedNode]| {
        nodes
            .iter()
            .filter(move |n| !named_by_label(n))
            .map(move |n| RequirementJson::new(NAME_FIELD, operator, vec![&n.name]))
    };
    let mut terms = Vec::new();
    // Nodes of one weight, in order: a graded tier is one term per weight.
    let runs = decision
        .tiers
        .iter()
        .flat_map(|tier| tier.nodes.chunk_by(|a, b| a.weight == b.weight));
    for nodes in runs {
        let weight = nodes[0].weight;
        let expressions = by_label("In", nodes);
        if !expressions.is_empty() {
            terms.push((weight, expressions, Vec::new()));
        }
        terms.extend(by_name("In", nodes).map(|f| (weight, Vec::new(), vec![f])));
    }
    if !decision.avoid.is_empty() && decision.avoid_weight > 0 {
        let expressions = by_label("NotIn", &decision.avoid);
        let fields = by_name("NotIn", &decision.avoid).collect();
        terms.push((decision.avoid_weight, expressions, fields));
    }
    terms
}

/// A preferred term's parts: weight, matchExpressions, matchFields.
type RequirementTerm<'a> = (i32, Vec<RequirementJson<'a>>, Vec<RequirementJson<'a>>);

/// The only field a `matchFields` requirement may name.
const NAME_FIELD: &str = "metadata.name";

/// A preferred term as JSON borrowing its strings: serialises as the
/// [`PreferredSchedulingTerm`] of the same content does, without a copy of every node name.
#[derive(Debug, Clone, Serialize)]
pub struct TermJson<'a> {
    preference: SelectorTermJson<'a>,
    weight: i32,
}

#[derive(Debug, Clone, Serialize)]
struct SelectorTermJson<'a> {
    #[serde(rename = "matchExpressions", skip_serializing_if = "Vec::is_empty")]
    match_expressions: Vec<RequirementJson<'a>>,
    #[serde(rename = "matchFields", skip_serializing_if = "Vec::is_empty")]
    match_fields: Vec<RequirementJson<'a>>,
}

/// A node selector requirement as JSON borrowing its strings.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct RequirementJson<'a> {
    key: &'a str,
    operator: &'static str,
    values: Vec<&'a str>,
}

impl<'a> RequirementJson<'a> {
    pub(crate) fn new(key: &'a str, operator: &'static str, values: Vec<&'a str>) -> Self {
        RequirementJson {
            key,
            operator,
            values,
        }
    }

    /// The same requirement as the k8s type.
    pub(crate) fn to_k8s(&self) -> NodeSelectorRequirement {
        NodeSelectorRequirement {
            key: self.key.to_string(),
            operator: self.operator.to_string(),
            values: Some(self.values.iter().map(|v| v.to_string()).collect()),
        }
    }
}

impl<'a> TermJson<'a> {
    /// A term whose requirements (expressions and fields) all AND together.
    pub(crate) fn new(
        weight: i32,
        match_expressions: Vec<RequirementJson<'a>>,
        match_fields: Vec<RequirementJson<'a>>,
    ) -> Self {
        TermJson {
            weight,
            preference: SelectorTermJson {
                match_expressions,
                match_fields,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    /// NodeAffinity points a node labelled `band` scores from `terms`.
    fn score(terms: &[TermJson<'_>], band: Option<&str>) -> i64 {
        let terms = serde_json::to_value(terms).unwrap_or_default();
        let terms = terms.as_array().cloned().unwrap_or_default();
        terms
            .iter()
            .filter(|term| {
                let values = &term["preference"]["matchExpressions"][0]["values"];
                let listed = values.as_array().cloned().unwrap_or_default();
                band.is_some_and(|band| listed.contains(&Value::from(band)))
            })
            .map(|term| term["weight"].as_i64().unwrap_or_default())
            .sum()
    }

    #[test]
    fn a_band_scores_its_distance_from_the_top_from_one_term_a_bit() {
        for bands in 2..=20u32 {
            let bands = HeatBands {
                enabled: true,
                bands,
                ..HeatBands::default()
            };
            // The heaviest term, of the highest bit, within 100.
            let most = 100 >> (bands.term_count() - 1);
            for weight in [1, most] {
                let config = HeatBands {
                    weight,
                    ..bands.clone()
                };
                let bands = config.bands;
                let mut problems = Vec::new();
                config.problems(&mut problems);
                assert!(problems.is_empty(), "{bands} bands: {problems:?}");
                let terms = band_terms(&config);
                assert_eq!(terms.len() as u32, config.term_count(), "{bands} bands");
                assert!(terms.iter().all(|t| (1..=100).contains(&t.weight)));
                for band in 0..bands {
                    let expected = i64::from(weight) * i64::from(bands - 1 - band);
                    let label = band.to_string();
                    assert_eq!(
                        score(&terms, Some(&label)),
                        expected,
                        "{bands} bands, band {band}"
                    );
                }
                assert_eq!(score(&terms, None), 0);
            }
        }
    }

    #[test]
    fn a_weight_whose_heaviest_term_passes_100_is_refused() {
        let config = HeatBands {
            enabled: true,
            bands: 16,
            weight: 13,
            ..HeatBands::default()
        };
        let mut problems = Vec::new();
        config.problems(&mut problems);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            band_terms(&HeatBands::default()).is_empty(),
            "off: no terms"
        );
    }
}
