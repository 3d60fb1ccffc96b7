//! JSONPatch construction: only `add` operations, parents created when missing, nothing that
//! was there altered (KUBE_CONTRACT.md: a patch that fails to apply rejects the user's pod).

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, Patch, PatchOperation};
use k8s_openapi::api::core::v1::{NodeSelectorRequirement, PreferredSchedulingTerm};
use serde_json::{Value, json};

const PREFERRED: &str = "preferredDuringSchedulingIgnoredDuringExecution";
const REQUIRED: &str = "requiredDuringSchedulingIgnoredDuringExecution";
const DEFAULT_SCHEDULER: &str = "default-scheduler";

/// What to write into one pod.
#[derive(Debug, Clone, Default)]
pub struct Changes<'a> {
    pub preferred: Vec<PreferredSchedulingTerm>,
    /// Hard requirements ANDed into every required term.
    pub required: &'a [NodeSelectorRequirement],
    /// Set only when the pod uses the default scheduler.
    pub scheduler_name: Option<&'a str>,
    pub annotations: Vec<(&'a str, String)>,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum PatchError {
    #[error("pod has no object at {0}")]
    NotAnObject(&'static str),
    #[error("pod field {0} has an unexpected type")]
    UnexpectedType(&'static str),
}

/// Builds the patch for `pod` (the raw object from the review, so that `null` and missing
/// fields are told apart).
pub fn build(pod: &Value, changes: &Changes<'_>) -> Result<Patch, PatchError> {
    let mut ops = Vec::new();
    let spec = object_at(pod, &["spec"]).ok_or(PatchError::NotAnObject("/spec"))?;

    if !changes.preferred.is_empty() || !changes.required.is_empty() {
        node_affinity_ops(pod, changes, &mut ops)?;
    }

    if let Some(name) = changes.scheduler_name {
        let current = spec.get("schedulerName").and_then(Value::as_str);
        if current.is_none_or(|c| c.is_empty() || c == DEFAULT_SCHEDULER) {
            // `add` on an existing member replaces it (RFC 6902 §4.1).
            ops.push(add(&["spec", "schedulerName"], json!(name)));
        }
    }

    if !changes.annotations.is_empty() {
        match object_at(pod, &["metadata"]) {
            None => {
                let annotations: serde_json::Map<_, _> = changes
                    .annotations
                    .iter()
                    .map(|(k, v)| (k.to_string(), json!(v)))
                    .collect();
                ops.push(add(&["metadata"], json!({ "annotations": annotations })));
            }
            Some(_) if object_at(pod, &["metadata", "annotations"]).is_none() => {
                let annotations: serde_json::Map<_, _> = changes
                    .annotations
                    .iter()
                    .map(|(k, v)| (k.to_string(), json!(v)))
                    .collect();
                ops.push(add(
                    &["metadata", "annotations"],
                    Value::Object(annotations),
                ));
            }
            Some(_) => {
                for (key, value) in &changes.annotations {
                    ops.push(add(&["metadata", "annotations", key], json!(value)));
                }
            }
        }
    }
    Ok(Patch(ops))
}

fn node_affinity_ops(
    pod: &Value,
    changes: &Changes<'_>,
    ops: &mut Vec<PatchOperation>,
) -> Result<(), PatchError> {
    let preferred = serde_json::to_value(&changes.preferred)
        .map_err(|_| PatchError::UnexpectedType("preferred terms"))?;
    let required = serde_json::to_value(changes.required)
        .map_err(|_| PatchError::UnexpectedType("required terms"))?;
    let fresh_required =
        || json!({ "nodeSelectorTerms": [{ "matchExpressions": required.clone() }] });
    let fresh_node_affinity = || {
        let mut na = serde_json::Map::new();
        if !changes.preferred.is_empty() {
            na.insert(PREFERRED.into(), preferred.clone());
        }
        if !changes.required.is_empty() {
            na.insert(REQUIRED.into(), fresh_required());
        }
        Value::Object(na)
    };

    if object_at(pod, &["spec", "affinity"]).is_none() {
        ops.push(add(
            &["spec", "affinity"],
            json!({ "nodeAffinity": fresh_node_affinity() }),
        ));
        return Ok(());
    }
    let Some(node_affinity) = object_at(pod, &["spec", "affinity", "nodeAffinity"]) else {
        ops.push(add(
            &["spec", "affinity", "nodeAffinity"],
            fresh_node_affinity(),
        ));
        return Ok(());
    };
    let base = ["spec", "affinity", "nodeAffinity"];

    if !changes.preferred.is_empty() {
        let path = [&base[..], &[PREFERRED]].concat();
        match non_null(node_affinity.get(PREFERRED)) {
            None => ops.push(add(&path, preferred)),
            Some(Value::Array(_)) => {
                let append = [&path[..], &["-"]].concat();
                for term in changes.preferred.iter() {
                    let value = serde_json::to_value(term)
                        .map_err(|_| PatchError::UnexpectedType("preferred term"))?;
                    ops.push(add(&append, value));
                }
            }
            Some(_) => return Err(PatchError::UnexpectedType(PREFERRED)),
        }
    }

    if !changes.required.is_empty() {
        let path = [&base[..], &[REQUIRED]].concat();
        let Some(existing) = non_null(node_affinity.get(REQUIRED)) else {
            ops.push(add(&path, fresh_required()));
            return Ok(());
        };
        let existing = existing
            .as_object()
            .ok_or(PatchError::UnexpectedType(REQUIRED))?;
        let terms_path = [&path[..], &["nodeSelectorTerms"]].concat();
        let terms = match non_null(existing.get("nodeSelectorTerms")) {
            None => &Vec::new(),
            Some(Value::Array(terms)) => terms,
            Some(_) => return Err(PatchError::UnexpectedType("nodeSelectorTerms")),
        };
        if terms.is_empty() {
            ops.push(add(
                &terms_path,
                json!([{ "matchExpressions": required.clone() }]),
            ));
            return Ok(());
        }
        // Terms are ORed: a hard rule must be ANDed into each of them, never added beside them.
        for (i, term) in terms.iter().enumerate() {
            let index = i.to_string();
            let term_path = [&terms_path[..], &[index.as_str()]].concat();
            let expressions_path = [&term_path[..], &["matchExpressions"]].concat();
            match non_null(term.get("matchExpressions")) {
                None => ops.push(add(&expressions_path, required.clone())),
                Some(Value::Array(_)) => {
                    let append = [&expressions_path[..], &["-"]].concat();
                    for r in changes.required {
                        let value = serde_json::to_value(r)
                            .map_err(|_| PatchError::UnexpectedType("requirement"))?;
                        ops.push(add(&append, value));
                    }
                }
                Some(_) => return Err(PatchError::UnexpectedType("matchExpressions")),
            }
        }
    }
    Ok(())
}

fn add(path: &[&str], value: Value) -> PatchOperation {
    PatchOperation::Add(AddOperation {
        path: PointerBuf::from_tokens(path.iter().copied()),
        value,
    })
}

fn non_null(v: Option<&Value>) -> Option<&Value> {
    v.filter(|v| !v.is_null())
}

/// The object at `path`, or `None` when missing or `null`.
fn object_at<'v>(root: &'v Value, path: &[&str]) -> Option<&'v serde_json::Map<String, Value>> {
    path.iter()
        .try_fold(root, |v, key| non_null(v.get(key)))?
        .as_object()
}
