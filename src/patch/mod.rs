//! JSONPatch construction: only `add` operations, parents created when missing, nothing that
//! was there altered: a mutating webhook's patch that fails to apply fails the creation of the
//! user's pod, whatever the webhook's failure policy.

use std::collections::BTreeMap;

use json_patch::jsonptr::PointerBuf;
use k8s_openapi::api::core::v1::{NodeSelectorRequirement, Pod, PodSpec, PreferredSchedulingTerm};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;
use serde_json::value::RawValue;

use crate::well_known::DEFAULT_SCHEDULER_NAME;

mod terms;

pub use terms::{TermJson, band_terms, preferred_json, preferred_terms};

const PREFERRED: &str = "preferredDuringSchedulingIgnoredDuringExecution";
const REQUIRED: &str = "requiredDuringSchedulingIgnoredDuringExecution";

/// Preferred terms to add: as k8s types, or as JSON borrowed from a decision (what the
/// server writes: no copy of each node name first). Both write the same JSON.
#[derive(Debug, Clone)]
pub enum Preferred<'a> {
    Terms(Vec<PreferredSchedulingTerm>),
    Json(Vec<TermJson<'a>>),
}

impl Default for Preferred<'_> {
    fn default() -> Self {
        Preferred::Terms(Vec::new())
    }
}

impl From<Vec<PreferredSchedulingTerm>> for Preferred<'_> {
    fn from(terms: Vec<PreferredSchedulingTerm>) -> Self {
        Preferred::Terms(terms)
    }
}

impl Serialize for Preferred<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Preferred::Terms(terms) => terms.serialize(serializer),
            Preferred::Json(terms) => terms.serialize(serializer),
        }
    }
}

impl Preferred<'_> {
    pub(crate) fn is_empty(&self) -> bool {
        match self {
            Preferred::Terms(terms) => terms.is_empty(),
            Preferred::Json(terms) => terms.is_empty(),
        }
    }

    /// Each term as JSON text, in order.
    fn each(&self) -> Result<Vec<Box<RawValue>>, serde_json::Error> {
        match self {
            Preferred::Terms(terms) => terms.iter().map(serde_json::value::to_raw_value).collect(),
            Preferred::Json(terms) => terms.iter().map(serde_json::value::to_raw_value).collect(),
        }
    }
}

/// What to write into one pod.
#[derive(Debug, Clone, Default)]
pub struct Changes<'a> {
    pub preferred: Preferred<'a>,
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
    #[error("patch value could not be encoded: {0}")]
    Encode(String),
}

/// An RFC 6902 patch of `add` operations whose values are JSON text already: written from
/// the typed terms in one pass, without building a tree of values for a patch of hundreds of
/// terms. [`JsonPatch::to_json_patch`] reads it back as the json-patch crate's type (to apply
/// or inspect it).
#[derive(Debug, Default, Serialize)]
#[serde(transparent)]
pub struct JsonPatch(Vec<AddOp>);

#[derive(Debug, Serialize)]
struct AddOp {
    op: &'static str,
    path: String,
    value: Box<RawValue>,
}

impl JsonPatch {
    /// The RFC 6902 JSON array.
    pub fn to_bytes(&self) -> Result<Vec<u8>, serde_json::Error> {
        serde_json::to_vec(self)
    }

    #[cfg(test)]
    /// The same patch as the json-patch crate's operations.
    pub(crate) fn to_json_patch(&self) -> Result<json_patch::Patch, serde_json::Error> {
        serde_json::from_slice(&self.to_bytes()?)
    }
}

/// `{"matchExpressions": [...]}`: one node selector term.
#[derive(Serialize)]
struct ExpressionsTerm<'a> {
    #[serde(rename = "matchExpressions")]
    match_expressions: &'a [NodeSelectorRequirement],
}

/// A required node affinity of one term.
#[derive(Serialize)]
struct FreshRequired<'a> {
    #[serde(rename = "nodeSelectorTerms")]
    node_selector_terms: [ExpressionsTerm<'a>; 1],
}

#[derive(Serialize)]
struct FreshNodeAffinity<'a> {
    #[serde(
        rename = "preferredDuringSchedulingIgnoredDuringExecution",
        skip_serializing_if = "Preferred::is_empty"
    )]
    preferred: &'a Preferred<'a>,
    #[serde(
        rename = "requiredDuringSchedulingIgnoredDuringExecution",
        skip_serializing_if = "Option::is_none"
    )]
    required: Option<FreshRequired<'a>>,
}

#[derive(Serialize)]
struct FreshAffinity<'a> {
    #[serde(rename = "nodeAffinity")]
    node_affinity: FreshNodeAffinity<'a>,
}

#[derive(Serialize)]
struct FreshMetadata<'a> {
    annotations: BTreeMap<&'a str, &'a str>,
}

/// Builds the patch for `pod`, the review's object as read once into its type. A `null` field
/// reads as a missing one, and the patch treats them alike: `add` creates a member or replaces
/// it (RFC 6902 §4.1), so either way the parent is written whole. Metadata that reads as empty
/// may be missing altogether, so it is written whole too.
pub fn build(pod: &Pod, changes: &Changes<'_>) -> Result<JsonPatch, PatchError> {
    let mut ops = Vec::new();
    let spec = pod.spec.as_ref().ok_or(PatchError::NotAnObject("/spec"))?;

    if !changes.preferred.is_empty() || !changes.required.is_empty() {
        node_affinity_ops(spec, changes, &mut ops)?;
    }

    if let Some(name) = changes.scheduler_name {
        let current = spec.scheduler_name.as_deref();
        if current.is_none_or(|c| c.is_empty() || c == DEFAULT_SCHEDULER_NAME) {
            ops.push(add(&["spec", "schedulerName"], name)?);
        }
    }

    if !changes.annotations.is_empty() {
        let annotations = || -> BTreeMap<&str, &str> {
            changes
                .annotations
                .iter()
                .map(|(k, v)| (*k, v.as_str()))
                .collect()
        };
        if pod.metadata == ObjectMeta::default() {
            ops.push(add(
                &["metadata"],
                FreshMetadata {
                    annotations: annotations(),
                },
            )?);
        } else if pod.metadata.annotations.is_none() {
            ops.push(add(&["metadata", "annotations"], annotations())?);
        } else {
            for (key, value) in &changes.annotations {
                ops.push(add(&["metadata", "annotations", key], value)?);
            }
        }
    }
    Ok(JsonPatch(ops))
}

fn node_affinity_ops(
    spec: &PodSpec,
    changes: &Changes<'_>,
    ops: &mut Vec<AddOp>,
) -> Result<(), PatchError> {
    let required = changes.required;
    let fresh_required = || FreshRequired {
        node_selector_terms: [ExpressionsTerm {
            match_expressions: required,
        }],
    };
    let fresh_node_affinity = || FreshNodeAffinity {
        preferred: &changes.preferred,
        required: (!required.is_empty()).then(fresh_required),
    };

    let Some(affinity) = &spec.affinity else {
        ops.push(add(
            &["spec", "affinity"],
            FreshAffinity {
                node_affinity: fresh_node_affinity(),
            },
        )?);
        return Ok(());
    };
    let Some(node_affinity) = &affinity.node_affinity else {
        ops.push(add(
            &["spec", "affinity", "nodeAffinity"],
            fresh_node_affinity(),
        )?);
        return Ok(());
    };
    let base = ["spec", "affinity", "nodeAffinity"];

    if !changes.preferred.is_empty() {
        let path = [&base[..], &[PREFERRED]].concat();
        if node_affinity
            .preferred_during_scheduling_ignored_during_execution
            .is_none()
        {
            ops.push(add(&path, &changes.preferred)?);
        } else {
            let append = [&path[..], &["-"]].concat();
            let terms = changes
                .preferred
                .each()
                .map_err(|e| PatchError::Encode(e.to_string()))?;
            for term in terms {
                ops.push(add(&append, term)?);
            }
        }
    }

    if !required.is_empty() {
        let path = [&base[..], &[REQUIRED]].concat();
        let Some(existing) = &node_affinity.required_during_scheduling_ignored_during_execution
        else {
            ops.push(add(&path, fresh_required())?);
            return Ok(());
        };
        let terms_path = [&path[..], &["nodeSelectorTerms"]].concat();
        let terms = &existing.node_selector_terms;
        if terms.is_empty() {
            // Missing, `null` or empty: written whole.
            ops.push(add(
                &terms_path,
                [ExpressionsTerm {
                    match_expressions: required,
                }],
            )?);
            return Ok(());
        }
        // Terms are ORed: a hard rule must be ANDed into each of them, never added beside them.
        for (i, term) in terms.iter().enumerate() {
            let index = i.to_string();
            let term_path = [&terms_path[..], &[index.as_str()]].concat();
            let expressions_path = [&term_path[..], &["matchExpressions"]].concat();
            if term.match_expressions.is_none() {
                ops.push(add(&expressions_path, required)?);
            } else {
                let append = [&expressions_path[..], &["-"]].concat();
                for r in required {
                    ops.push(add(&append, r)?);
                }
            }
        }
    }
    Ok(())
}

fn add(path: &[&str], value: impl Serialize) -> Result<AddOp, PatchError> {
    Ok(AddOp {
        op: "add",
        path: PointerBuf::from_tokens(path.iter().copied()).to_string(),
        value: serde_json::value::to_raw_value(&value)
            .map_err(|e| PatchError::Encode(e.to_string()))?,
    })
}

#[cfg(test)]
mod properties;
