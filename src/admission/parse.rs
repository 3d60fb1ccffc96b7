//! Reading a request: an AdmissionReview of the one version served, and its pod object.

use k8s_openapi::api::core::v1::Pod;

use super::pod_read;
use super::review::{API_VERSION, KIND, RequestIn, ReviewIn};

/// A request that cannot be answered as an AdmissionReview: the caller maps it to a 4xx.
#[derive(Debug, thiserror::Error)]
pub enum BadReview {
    #[error("body is not JSON: {0}")]
    NotJson(String),
    #[error("body is not an AdmissionReview: {0}")]
    Shape(String),
    #[error("unsupported {0}: only admission.k8s.io/v1 AdmissionReview is served")]
    Version(String),
    #[error("AdmissionReview has no request")]
    NoRequest,
    #[error("AdmissionReview request has an empty uid")]
    NoUid,
}

/// Reads an AdmissionReview request, checking what must hold to answer it at all.
pub fn parse(body: &[u8]) -> Result<RequestIn, BadReview> {
    // serde would read an array as the fields in order; an AdmissionReview is an object.
    if let Some(first) = body.iter().find(|b| !b.is_ascii_whitespace())
        && *first != b'{'
        && serde_json::from_slice::<serde::de::IgnoredAny>(body).is_ok()
    {
        let what = match first {
            b'[' => "an array",
            b'"' => "a string",
            b'n' => "null",
            b't' | b'f' => "a boolean",
            _ => "a number",
        };
        return Err(BadReview::Shape(format!(
            "{what}, not an object with apiVersion, kind and request"
        )));
    }
    let review: ReviewIn = serde_json::from_slice(body).map_err(|e| match e.classify() {
        serde_json::error::Category::Data => BadReview::Shape(e.to_string()),
        _ => BadReview::NotJson(e.to_string()),
    })?;
    if review.api_version != API_VERSION || review.kind != KIND {
        return Err(BadReview::Version(format!(
            "{}/{}",
            review.api_version, review.kind
        )));
    }
    let request = review.request.ok_or(BadReview::NoRequest)?;
    if request.uid.is_empty() {
        return Err(BadReview::NoUid);
    }
    Ok(request)
}

/// The request's pod object as a Pod. A CREATE may name the namespace in the request only; the
/// job key needs it, so the request's stands in (the patch does not write it).
pub fn pod_of(
    object: &serde_json::value::RawValue,
    request: &RequestIn,
) -> Result<Pod, serde_json::Error> {
    // Only the fields a decision and its patch read (see `pod_read`).
    let mut pod = pod_read::read_pod(object.get())?;
    if pod.metadata.namespace.as_deref().is_none_or(str::is_empty) {
        pod.metadata.namespace = request.namespace.clone();
    }
    Ok(pod)
}
