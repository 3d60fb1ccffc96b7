//! Which requests carry a pod to steer: the CREATE of a pod, not opted out, not steered
//! already, not created bound, and matching the configured `targets`.

use k8s_openapi::api::core::v1::Pod;

use super::parse::pod_of;
use super::review::RequestIn;
use super::selector::{targets_match, targets_miss};
use crate::config::Targets;
use crate::inflight::note::ANNOTATION;

pub(crate) const SKIP_ANNOTATION: &str = "placement-webhook.io/skip";

/// The values of [`SKIP_ANNOTATION`] that opt a pod out, compared ASCII case-insensitively
/// (`"True"`, `"YES"`); the registration's `matchConditions` lists the same.
pub const SKIP_VALUES: [&str; 4] = ["true", "yes", "1", "on"];

/// Whether `value` of [`SKIP_ANNOTATION`] opts the pod out.
pub(crate) fn skips(value: &str) -> bool {
    SKIP_VALUES.iter().any(|v| v.eq_ignore_ascii_case(value))
}

/// Why a pod is not one to steer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum NotTarget {
    /// [`SKIP_ANNOTATION`] says true.
    OptedOut,
    /// It carries the decision annotation: a reinvocation.
    AlreadySteered,
    /// Created with `spec.nodeName`.
    Bound,
    /// Its labels miss the configured targets.
    Labels,
}

/// Why `pod` is not one to steer, when it is not.
pub(super) fn not_a_target(targets: &Targets, pod: &Pod) -> Option<NotTarget> {
    let empty = Default::default();
    let labels = pod.metadata.labels.as_ref().unwrap_or(&empty);
    let annotations = pod.metadata.annotations.as_ref();
    let opted_out = annotations
        .and_then(|a| a.get(SKIP_ANNOTATION))
        .is_some_and(|v| skips(v));
    // Our own mark: this is a reinvocation, the pod was already steered.
    let already_steered = annotations.is_some_and(|a| a.contains_key(ANNOTATION));
    // Created bound (`spec.nodeName`): no scheduler places it, so nothing to steer or charge.
    let already_bound = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| !n.is_empty());
    if opted_out {
        Some(NotTarget::OptedOut)
    } else if already_steered {
        Some(NotTarget::AlreadySteered)
    } else if already_bound {
        Some(NotTarget::Bound)
    } else if !targets_match(targets, labels) {
        Some(NotTarget::Labels)
    } else {
        None
    }
}

/// Why the server answers `request` without writing anything, in a sentence, when it is
/// not a pod to steer (an internal problem, which fails open, is not such a reason).
pub(crate) fn why_skipped(targets: &Targets, request: &RequestIn) -> Option<String> {
    if !is_pod_create(request) {
        let what = match (
            request.resource.group.as_str(),
            request.resource.resource.as_str(),
            request.sub_resource.as_deref().unwrap_or(""),
        ) {
            ("", "pods", "") => format!("a pod's {}", request.operation),
            ("", "pods", sub) => format!("the `{sub}` subresource of a pod"),
            ("", resource, _) => format!("a {resource} request"),
            (group, resource, _) => format!("a {group}/{resource} request"),
        };
        return Some(format!(
            "{what}: only the CREATE of a pod is steered (its placement cannot change later)"
        ));
    }
    let Some(object) = request.object.as_deref().filter(|o| o.get() != "null") else {
        return Some("the request carries no pod object".into());
    };
    let pod = pod_of(object, request).ok()?;
    let annotation = |key: &str| {
        pod.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(key))
            .map_or("", String::as_str)
            .to_owned()
    };
    Some(match not_a_target(targets, &pod)? {
        NotTarget::OptedOut => format!(
            "opted out: annotation {SKIP_ANNOTATION}: {:?}",
            annotation(SKIP_ANNOTATION)
        ),
        NotTarget::AlreadySteered => format!(
            "already steered: it carries {ANNOTATION} (a reinvocation after another webhook)"
        ),
        NotTarget::Bound => format!(
            "created bound to {} (spec.nodeName): no scheduler places it",
            pod.spec
                .as_ref()
                .and_then(|s| s.node_name.as_deref())
                .unwrap_or_default()
        ),
        NotTarget::Labels => {
            let empty = Default::default();
            let labels = pod.metadata.labels.as_ref().unwrap_or(&empty);
            let miss = targets_miss(targets, labels).unwrap_or_default();
            format!("not a target: {miss} (config `targets`)")
        }
    })
}

/// Only CREATE of a Pod itself: affinity and schedulerName are immutable afterwards, and
/// subresources (ephemeralcontainers, binding) may change nothing else.
pub(super) fn is_pod_create(request: &RequestIn) -> bool {
    request.operation == "CREATE"
        && request.resource.group.is_empty()
        && request.resource.resource == "pods"
        && request.sub_resource.as_deref().is_none_or(str::is_empty)
}
