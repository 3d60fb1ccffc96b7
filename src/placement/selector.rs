//! Label and node-selector matching with the kube-scheduler's semantics.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{NodeSelectorRequirement, NodeSelectorTerm, Toleration};

use crate::config::{LabelRequirement, SelectorOperator, Targets};
use crate::snapshot::Taint;

/// Does a pod with these labels match the configured target selector?
pub fn targets_match(targets: &Targets, labels: &BTreeMap<String, String>) -> bool {
    targets
        .match_labels
        .iter()
        .all(|(k, v)| labels.get(k) == Some(v))
        && targets
            .match_expressions
            .iter()
            .all(|r| label_requirement_matches(r, labels))
}

fn label_requirement_matches(r: &LabelRequirement, labels: &BTreeMap<String, String>) -> bool {
    let value = labels.get(&r.key);
    match r.operator {
        SelectorOperator::In => value.is_some_and(|v| r.values.contains(v)),
        SelectorOperator::NotIn => value.is_none_or(|v| !r.values.contains(v)),
        SelectorOperator::Exists => value.is_some(),
        SelectorOperator::DoesNotExist => value.is_none(),
    }
}

/// One `matchExpressions` requirement against node labels.
pub fn expression_matches(
    req: &NodeSelectorRequirement,
    labels: &BTreeMap<String, String>,
) -> bool {
    let value = labels.get(&req.key);
    let values = req.values.as_deref().unwrap_or_default();
    match req.operator.as_str() {
        "In" => value.is_some_and(|v| values.contains(v)),
        "NotIn" => value.is_none_or(|v| !values.contains(v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" | "Lt" => {
            let (Some(v), [bound]) = (value, values) else {
                return false;
            };
            match (v.parse::<i64>(), bound.parse::<i64>()) {
                (Ok(v), Ok(b)) if req.operator == "Gt" => v > b,
                (Ok(v), Ok(b)) => v < b,
                _ => false,
            }
        }
        _ => false,
    }
}

/// One `matchFields` requirement; only `metadata.name` exists.
pub fn field_matches(req: &NodeSelectorRequirement, node_name: &str) -> bool {
    if req.key != "metadata.name" {
        return false;
    }
    let values = req.values.as_deref().unwrap_or_default();
    match req.operator.as_str() {
        "In" => values.iter().any(|v| v == node_name),
        "NotIn" => values.iter().all(|v| v != node_name),
        _ => false,
    }
}

/// A required-affinity term: every requirement must hold; an empty term matches nothing.
pub fn term_matches(
    term: &NodeSelectorTerm,
    node_name: &str,
    labels: &BTreeMap<String, String>,
) -> bool {
    let expressions = term.match_expressions.as_deref().unwrap_or_default();
    let fields = term.match_fields.as_deref().unwrap_or_default();
    if expressions.is_empty() && fields.is_empty() {
        return false;
    }
    expressions.iter().all(|r| expression_matches(r, labels))
        && fields.iter().all(|r| field_matches(r, node_name))
}

/// Whether any toleration tolerates the taint (v1 `Toleration.ToleratesTaint`).
pub fn tolerated(tolerations: &[Toleration], taint: &Taint) -> bool {
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
        assert!(expression_matches(&req("zone", "In", &["a", "b"]), &l));
        assert!(!expression_matches(&req("zone", "NotIn", &["a"]), &l));
        assert!(expression_matches(&req("missing", "NotIn", &["a"]), &l));
        assert!(expression_matches(&req("zone", "Exists", &[]), &l));
        assert!(expression_matches(&req("missing", "DoesNotExist", &[]), &l));
        assert!(expression_matches(&req("cores", "Gt", &["8"]), &l));
        assert!(!expression_matches(&req("cores", "Lt", &["8"]), &l));
        assert!(!expression_matches(&req("zone", "Gt", &["8"]), &l));
        assert!(!expression_matches(&req("zone", "Bogus", &["a"]), &l));
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
    }

    #[test]
    fn fields_match_node_name_only() {
        assert!(field_matches(&req("metadata.name", "In", &["n1"]), "n1"));
        assert!(!field_matches(
            &req("metadata.name", "NotIn", &["n1"]),
            "n1"
        ));
        assert!(!field_matches(&req("metadata.uid", "In", &["n1"]), "n1"));
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
