//! Node selectors and taints with the scheduler's semantics (`nodeaffinity`, `v1helper`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{NodeSelectorRequirement, NodeSelectorTerm, Toleration};
use serde::{Deserialize, Serialize};

/// A node taint; `effect` is NoSchedule, PreferNoSchedule or NoExecute.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Taint {
    pub key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    pub effect: String,
}

impl Taint {
    /// NoSchedule and NoExecute filter; PreferNoSchedule only scores.
    pub(crate) fn filters(&self) -> bool {
        self.effect == "NoSchedule" || self.effect == "NoExecute"
    }
}

/// `labels[key]`. On the few labels a node usually carries, a scan comparing lengths first
/// beats the map's ordered search, which compares every key it passes byte by byte: the
/// scheduler model runs this for every node of every cycle.
pub(crate) fn label_value<'m>(
    labels: &'m BTreeMap<String, String>,
    key: &str,
) -> Option<&'m String> {
    const SCANNED: usize = 16;
    if labels.len() <= SCANNED {
        labels.iter().find(|(k, _)| *k == key).map(|(_, v)| v)
    } else {
        labels.get(key)
    }
}

/// One `matchExpressions` requirement; `None` when it is malformed (the whole term then never
/// matches, as upstream's parse errors make it).
fn label_requirement(
    req: &NodeSelectorRequirement,
    labels: &BTreeMap<String, String>,
) -> Option<bool> {
    let values = req.values.as_deref().unwrap_or_default();
    let value = label_value(labels, &req.key);
    match req.operator.as_str() {
        "Gt" | "Lt" => {
            let [bound] = values else { return None };
            let bound: i64 = bound.parse().ok()?;
            let Some(v) = value.and_then(|v| v.parse::<i64>().ok()) else {
                return Some(false);
            };
            Some(if req.operator == "Gt" {
                v > bound
            } else {
                v < bound
            })
        }
        operator => set_requirement(operator, values, value),
    }
}

/// The set-based operators node and pod label selectors share, on a label's `value`; `None` for
/// another operator or malformed values.
pub(crate) fn set_requirement(
    operator: &str,
    values: &[String],
    value: Option<&String>,
) -> Option<bool> {
    match operator {
        "In" | "NotIn" if values.is_empty() => None,
        "In" => Some(value.is_some_and(|v| values.contains(v))),
        "NotIn" => Some(value.is_none_or(|v| !values.contains(v))),
        "Exists" | "DoesNotExist" if !values.is_empty() => None,
        "Exists" => Some(value.is_some()),
        "DoesNotExist" => Some(value.is_none()),
        _ => None,
    }
}

/// One `matchExpressions` requirement holds (a malformed one never does).
pub(crate) fn requirement_matches(
    req: &NodeSelectorRequirement,
    labels: &BTreeMap<String, String>,
) -> bool {
    label_requirement(req, labels) == Some(true)
}

/// One `matchFields` requirement: In/NotIn with exactly one value. Only `metadata.name` exists
/// as a node field; any other key reads as empty.
fn field_requirement(req: &NodeSelectorRequirement, node_name: &str) -> Option<bool> {
    let [value] = req.values.as_deref().unwrap_or_default() else {
        return None;
    };
    let field = if req.key == "metadata.name" {
        node_name
    } else {
        ""
    };
    match req.operator.as_str() {
        "In" => Some(field == value),
        "NotIn" => Some(field != value),
        _ => None,
    }
}

pub(crate) fn is_empty_term(term: &NodeSelectorTerm) -> bool {
    term.match_expressions
        .as_deref()
        .unwrap_or_default()
        .is_empty()
        && term.match_fields.as_deref().unwrap_or_default().is_empty()
}

/// All requirements of a term hold (ANDed); an empty term matches nothing (it selects nothing
/// in a required selector and is skipped among preferred terms).
pub(crate) fn term_matches(
    term: &NodeSelectorTerm,
    node_name: &str,
    labels: &BTreeMap<String, String>,
) -> bool {
    term_matches_by(term, node_name, |_, r| requirement_matches(r, labels))
}

/// [`term_matches`] with each `matchExpressions` requirement (by its index) answered by
/// `label_ok`, for callers that answer some of them faster.
pub(crate) fn term_matches_by(
    term: &NodeSelectorTerm,
    node_name: &str,
    mut label_ok: impl FnMut(usize, &NodeSelectorRequirement) -> bool,
) -> bool {
    if is_empty_term(term) {
        return false;
    }
    let labels_ok = (term.match_expressions.iter().flatten())
        .enumerate()
        .all(|(i, r)| label_ok(i, r));
    labels_ok
        && (term.match_fields.iter().flatten())
            .all(|r| field_requirement(r, node_name) == Some(true))
}

/// Required terms are ORed; an empty list constrains nothing.
pub(crate) fn any_term_matches(
    terms: &[NodeSelectorTerm],
    node_name: &str,
    labels: &BTreeMap<String, String>,
) -> bool {
    terms.is_empty() || terms.iter().any(|t| term_matches(t, node_name, labels))
}

/// Whether any toleration tolerates the taint (v1 `Toleration.ToleratesTaint`).
pub(crate) fn tolerated(tolerations: &[Toleration], taint: &Taint) -> bool {
    tolerations.iter().any(|t| {
        let effect_ok = t
            .effect
            .as_deref()
            .is_none_or(|e| e.is_empty() || e == taint.effect);
        let key = t.key.as_deref().unwrap_or_default();
        let operator = t.operator.as_deref().unwrap_or("Equal");
        let key_ok = key == taint.key || (key.is_empty() && operator == "Exists");
        let value_ok = match operator {
            "Exists" => true,
            "Equal" | "" => {
                t.value.as_deref().unwrap_or_default() == taint.value.as_deref().unwrap_or_default()
            }
            _ => false,
        };
        effect_ok && key_ok && value_ok
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn req(key: &str, op: &str, values: &[&str]) -> NodeSelectorRequirement {
        NodeSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: Some(values.iter().map(|v| v.to_string()).collect()),
        }
    }

    #[test]
    fn expression_operators() {
        let l = labels(&[("zone", "a"), ("cores", "16")]);
        assert!(requirement_matches(&req("zone", "In", &["a", "b"]), &l));
        assert!(!requirement_matches(&req("zone", "NotIn", &["a"]), &l));
        assert!(requirement_matches(&req("missing", "NotIn", &["a"]), &l));
        assert!(requirement_matches(&req("zone", "Exists", &[]), &l));
        assert!(requirement_matches(
            &req("missing", "DoesNotExist", &[]),
            &l
        ));
        assert!(requirement_matches(&req("cores", "Gt", &["8"]), &l));
        assert!(!requirement_matches(&req("cores", "Lt", &["8"]), &l));
        assert!(!requirement_matches(&req("zone", "Gt", &["8"]), &l));
        assert!(!requirement_matches(&req("zone", "Bogus", &["a"]), &l));
        assert!(
            !requirement_matches(&req("zone", "In", &[]), &l),
            "In needs values"
        );
    }

    #[test]
    fn flink_blocklist_term_excludes_named_hosts() {
        let term = NodeSelectorTerm {
            match_expressions: Some(vec![req("kubernetes.io/hostname", "NotIn", &["bad-1"])]),
            match_fields: None,
        };
        let bad = labels(&[("kubernetes.io/hostname", "bad-1")]);
        let good = labels(&[("kubernetes.io/hostname", "good-1")]);
        assert!(!term_matches(&term, "bad-1", &bad));
        assert!(term_matches(&term, "good-1", &good));
        assert!(!term_matches(&NodeSelectorTerm::default(), "good-1", &good));
        assert!(
            any_term_matches(&[], "good-1", &good),
            "no terms constrain nothing"
        );
    }

    #[test]
    fn fields_match_node_name_only() {
        let field = |key: &str, op: &str| NodeSelectorTerm {
            match_fields: Some(vec![req(key, op, &["n1"])]),
            match_expressions: None,
        };
        let none = BTreeMap::new();
        assert!(term_matches(&field("metadata.name", "In"), "n1", &none));
        assert!(!term_matches(&field("metadata.name", "NotIn"), "n1", &none));
        assert!(!term_matches(&field("metadata.uid", "In"), "n1", &none));
    }

    #[test]
    fn tolerations() {
        let taint = Taint {
            key: "dedicated".into(),
            value: Some("flink".into()),
            effect: "NoSchedule".into(),
        };
        let equal = Toleration {
            key: Some("dedicated".into()),
            operator: Some("Equal".into()),
            value: Some("flink".into()),
            effect: Some("NoSchedule".into()),
            ..Default::default()
        };
        let wrong_value = Toleration {
            value: Some("spark".into()),
            ..equal.clone()
        };
        let exists_all = Toleration {
            operator: Some("Exists".into()),
            ..Default::default()
        };
        let other_effect = Toleration {
            effect: Some("NoExecute".into()),
            ..equal.clone()
        };
        assert!(tolerated(std::slice::from_ref(&equal), &taint));
        assert!(!tolerated(&[wrong_value], &taint));
        assert!(tolerated(&[exists_all], &taint));
        assert!(!tolerated(&[other_effect], &taint));
        assert!(!tolerated(&[], &taint));
    }
}
