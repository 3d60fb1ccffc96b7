//! `admission.k8s.io/v1` AdmissionReview on the wire.
//!
//! Own types rather than kube-core's: its `AdmissionResponse` serializes the patch as an array
//! of numbers (kube-rs#1781) where the apiserver wants a base64 string, and a request whose
//! object does not parse as a Pod must still be answered with its uid.

use std::collections::BTreeMap;

use base64::Engine;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

pub(crate) const API_VERSION: &str = "admission.k8s.io/v1";
pub(crate) const KIND: &str = "AdmissionReview";

// `expecting`: what an error says was expected, in the API's words, not this type's name.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", expecting = "an AdmissionReview object")]
pub(crate) struct ReviewIn {
    pub(crate) api_version: String,
    pub(crate) kind: String,
    pub(crate) request: Option<RequestIn>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(expecting = "a resource object (group, version, resource)")]
pub(crate) struct GroupVersionResource {
    #[serde(default)]
    pub(crate) group: String,
    #[serde(default)]
    pub(crate) resource: String,
}

#[derive(Debug, Deserialize)]
#[serde(
    rename_all = "camelCase",
    expecting = "an AdmissionReview request object"
)]
pub struct RequestIn {
    pub(crate) uid: String,
    #[serde(default)]
    pub(crate) resource: GroupVersionResource,
    #[serde(default)]
    pub(crate) sub_resource: Option<String>,
    #[serde(default)]
    pub(crate) namespace: Option<String>,
    pub(crate) operation: String,
    /// The object as raw JSON: read once, into a Pod, when the review is one to steer.
    #[serde(default)]
    pub object: Option<Box<RawValue>>,
    #[serde(default)]
    pub(crate) dry_run: Option<bool>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReviewOut {
    pub(crate) api_version: &'static str,
    pub(crate) kind: &'static str,
    pub response: ResponseOut,
}

#[derive(Debug, Serialize, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ResponseOut {
    pub(crate) uid: String,
    pub allowed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch_type: Option<&'static str>,
    /// Base64 of the RFC 6902 JSON array.
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "as_is")]
    pub patch: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) warnings: Vec<String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub audit_annotations: BTreeMap<String, String>,
}

/// Base64 needs no escaping: written as it is, not scanned character by character for
/// escapes (a patch naming hundreds of nodes is tens of kilobytes).
fn as_is<S: serde::Serializer>(text: &Option<String>, serializer: S) -> Result<S::Ok, S::Error> {
    use serde::ser::Error;
    match text {
        Some(text) => RawValue::from_string(format!("\"{text}\""))
            .map_err(S::Error::custom)?
            .serialize(serializer),
        None => serializer.serialize_none(),
    }
}

impl ResponseOut {
    /// `allowed: true`, nothing changed.
    pub(crate) fn allow(uid: &str) -> Self {
        ResponseOut {
            uid: uid.to_string(),
            allowed: true,
            ..Default::default()
        }
    }

    /// Attaches a JSONPatch: `patchType` and `patch` always together.
    pub(crate) fn with_patch(
        mut self,
        patch: &crate::patch::JsonPatch,
    ) -> Result<Self, serde_json::Error> {
        let bytes = patch.to_bytes()?;
        self.patch_type = Some("JSONPatch");
        self.patch = Some(base64::engine::general_purpose::STANDARD.encode(bytes));
        Ok(self)
    }

    /// A warning the apiserver will keep: one line, bounded length.
    pub(crate) fn with_warning(mut self, text: &str) -> Self {
        let line: String = text
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .take(200)
            .collect();
        self.warnings.push(line);
        self
    }

    pub(crate) fn into_review(self) -> ReviewOut {
        ReviewOut {
            api_version: API_VERSION,
            kind: KIND,
            response: self,
        }
    }
}
