//! Which Flink job a pod belongs to, so that a new TaskManager's load can be estimated from the
//! TaskManagers of the same job that already run. Data only.

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;

use k8s_openapi::api::core::v1::Pod;

/// The label Flink's native Kubernetes integration sets to the cluster id on every pod.
pub(crate) const APP_LABEL: &str = "app";
/// `component: taskmanager` marks a TaskManager (`jobmanager` its JobManager).
pub(crate) const COMPONENT_LABEL: &str = "component";
pub(crate) const TASKMANAGER: &str = "taskmanager";

/// One job's line of the hot-node report (`hotspots`), which the webhook also exports as gauges.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JobSummary {
    pub namespace: String,
    pub job: String,
    pub taskmanagers: usize,
    pub on_hot_nodes: usize,
    pub steered: usize,
    pub steered_on_hot_nodes: usize,
    pub on_nodes_without_readings: usize,
}

/// A job: its namespace and either the Flink cluster id of its TaskManagers or the pods' owner.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct JobKey {
    pub(crate) namespace: String,
    pub(crate) by: JobBy,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum JobBy {
    /// The `app` label of a `component: taskmanager` pod.
    App(String),
    /// The uid of the pod's controller (or first) owner.
    Owner(String),
}

impl JobKey {
    /// The job of a pod with these labels and owner; `None` when neither says.
    pub(crate) fn of(
        namespace: &str,
        labels: &BTreeMap<String, String>,
        owner: Option<&str>,
    ) -> Option<Self> {
        let by = match (labels.get(APP_LABEL), labels.get(COMPONENT_LABEL)) {
            (Some(app), Some(component)) if component == TASKMANAGER && !app.is_empty() => {
                JobBy::App(app.clone())
            }
            _ => JobBy::Owner(owner.filter(|o| !o.is_empty())?.to_string()),
        };
        Some(JobKey {
            namespace: namespace.to_string(),
            by,
        })
    }

    /// The job of `pod`; `namespace` stands in when the object names none (a CREATE review
    /// may carry the namespace in the request only).
    pub(crate) fn of_pod(pod: &Pod, namespace: &str) -> Option<Self> {
        let meta = &pod.metadata;
        let namespace = meta
            .namespace
            .as_deref()
            .filter(|n| !n.is_empty())
            .unwrap_or(namespace);
        let empty = BTreeMap::new();
        JobKey::of(
            namespace,
            meta.labels.as_ref().unwrap_or(&empty),
            owner_uid(pod),
        )
    }
}

impl fmt::Display for JobKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.by {
            JobBy::App(app) => write!(f, "{}/app={app}", self.namespace),
            JobBy::Owner(uid) => write!(f, "{}/owner={uid}", self.namespace),
        }
    }
}

/// The Flink cluster id of a TaskManager (the `app` label of a `component: taskmanager` pod);
/// `None` for other pods.
pub(crate) fn taskmanager_app(labels: &BTreeMap<String, String>) -> Option<&str> {
    let app = labels.get(APP_LABEL)?;
    (labels.get(COMPONENT_LABEL).map(String::as_str) == Some(TASKMANAGER) && !app.is_empty())
        .then_some(app.as_str())
}

/// The uid of the pod's controller owner, else of its first owner.
pub(crate) fn owner_uid(pod: &Pod) -> Option<&str> {
    let owners = pod.metadata.owner_references.as_deref()?;
    owners
        .iter()
        .find(|o| o.controller == Some(true))
        .or(owners.first())
        .map(|o| o.uid.as_str())
}

/// The labels [`JobKey::of`] reads, and nothing else: what is worth keeping per running pod.
pub(crate) fn job_labels(labels: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    labels
        .iter()
        .filter(|(k, _)| *k == APP_LABEL || *k == COMPONENT_LABEL)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
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

    #[test]
    fn taskmanagers_by_app_else_by_owner() {
        let tm = labels(&[("app", "orders"), ("component", "taskmanager"), ("x", "y")]);
        let key = JobKey::of("flink", &tm, Some("u1")).expect("job");
        assert_eq!(key.to_string(), "flink/app=orders");
        let jm = labels(&[("app", "orders"), ("component", "jobmanager")]);
        assert_eq!(
            JobKey::of("flink", &jm, Some("u1")).map(|k| k.to_string()),
            Some("flink/owner=u1".into())
        );
        assert_eq!(JobKey::of("flink", &jm, None), None);
        assert_eq!(JobKey::of("flink", &labels(&[]), Some("")), None);
        assert_eq!(
            job_labels(&tm),
            labels(&[("app", "orders"), ("component", "taskmanager")])
        );
    }
}
