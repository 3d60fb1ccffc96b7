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
    pub fn filters(&self) -> bool {
        self.effect == "NoSchedule" || self.effect == "NoExecute"
    }
}

/// One `matchExpressions` requirement; `None` when it is malformed (the whole term then never
/// matches, as upstream's parse errors make it).
fn label_requirement(
    req: &NodeSelectorRequirement,
    labels: &BTreeMap<String, String>,
) -> Option<bool> {
    let values = req.values.as_deref().unwrap_or_default();
    let value = labels.get(&req.key);
    match req.operator.as_str() {
        "In" | "NotIn" if values.is_empty() => None,
        "In" => Some(value.is_some_and(|v| values.contains(v))),
        "NotIn" => Some(value.is_none_or(|v| !values.contains(v))),
        "Exists" | "DoesNotExist" if !values.is_empty() => None,
        "Exists" => Some(value.is_some()),
        "DoesNotExist" => Some(value.is_none()),
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
        _ => None,
    }
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

pub fn is_empty_term(term: &NodeSelectorTerm) -> bool {
    term.match_expressions
        .as_deref()
        .unwrap_or_default()
        .is_empty()
        && term.match_fields.as_deref().unwrap_or_default().is_empty()
}

/// All requirements of a term hold (ANDed); an empty term matches nothing (it selects nothing
/// in a required selector and is skipped among preferred terms).
pub fn term_matches(
    term: &NodeSelectorTerm,
    node_name: &str,
    labels: &BTreeMap<String, String>,
) -> bool {
    if is_empty_term(term) {
        return false;
    }
    let mut labels_ok = term
        .match_expressions
        .iter()
        .flatten()
        .map(|r| label_requirement(r, labels));
    let mut fields_ok = term
        .match_fields
        .iter()
        .flatten()
        .map(|r| field_requirement(r, node_name));
    labels_ok.all(|ok| ok == Some(true)) && fields_ok.all(|ok| ok == Some(true))
}

/// Required terms are ORed; an empty list constrains nothing.
pub fn any_term_matches(
    terms: &[NodeSelectorTerm],
    node_name: &str,
    labels: &BTreeMap<String, String>,
) -> bool {
    terms.is_empty() || terms.iter().any(|t| term_matches(t, node_name, labels))
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
