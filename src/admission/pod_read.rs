//! The parts of a Pod a decision and its patch read, and nothing else.
//!
//! A review's Pod carries much the webhook never looks at: container images, commands,
//! environment, ports, mounts, probes, volumes, security contexts, status. Reading it into a
//! full `k8s_openapi` Pod builds all of that and drops it again; this reads the fields used
//! (the metadata, the spec's placement fields, each container's name, resources and restart
//! policy) and skips the rest unparsed, then fills a `Pod` with them so that everything
//! downstream keeps its types.
//!
//! Metadata is read whole: the patch adds `/metadata/annotations` or `/metadata` depending on
//! what is there, and must not take a metadata object that holds only unread fields for an
//! empty one.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, Container, Pod, PodSpec, ResourceRequirements, Toleration, TopologySpreadConstraint,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PodParts {
    /// Checked as the full Pod checks them: an object that says it is something else is not
    /// read as a Pod.
    #[serde(default)]
    api_version: Option<String>,
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    metadata: ObjectMeta,
    #[serde(default)]
    spec: Option<SpecParts>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SpecParts {
    #[serde(default)]
    containers: Vec<ContainerParts>,
    #[serde(default)]
    init_containers: Option<Vec<ContainerParts>>,
    #[serde(default)]
    overhead: Option<BTreeMap<String, Quantity>>,
    #[serde(default)]
    node_selector: Option<BTreeMap<String, String>>,
    #[serde(default)]
    affinity: Option<Affinity>,
    #[serde(default)]
    tolerations: Option<Vec<Toleration>>,
    #[serde(default)]
    topology_spread_constraints: Option<Vec<TopologySpreadConstraint>>,
    #[serde(default)]
    scheduler_name: Option<String>,
    /// Set at CREATE, the pod is bound already: no scheduler will place it.
    #[serde(default)]
    node_name: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ContainerParts {
    #[serde(default)]
    name: String,
    #[serde(default)]
    resources: Option<ResourceRequirements>,
    #[serde(default)]
    restart_policy: Option<String>,
}

impl From<ContainerParts> for Container {
    fn from(parts: ContainerParts) -> Self {
        Container {
            name: parts.name,
            resources: parts.resources,
            restart_policy: parts.restart_policy,
            ..Container::default()
        }
    }
}

impl From<SpecParts> for PodSpec {
    fn from(parts: SpecParts) -> Self {
        let containers =
            |list: Vec<ContainerParts>| list.into_iter().map(Container::from).collect();
        PodSpec {
            containers: containers(parts.containers),
            init_containers: parts.init_containers.map(containers),
            overhead: parts.overhead,
            node_selector: parts.node_selector,
            affinity: parts.affinity,
            tolerations: parts.tolerations,
            topology_spread_constraints: parts.topology_spread_constraints,
            scheduler_name: parts.scheduler_name,
            node_name: parts.node_name,
            ..PodSpec::default()
        }
    }
}

/// The Pod in `json` with only the fields this webhook reads set.
pub(crate) fn read_pod(json: &str) -> Result<Pod, serde_json::Error> {
    use serde::de::Error;
    let parts: PodParts = serde_json::from_str(json)?;
    if parts.api_version.as_deref().is_some_and(|v| v != "v1") {
        return Err(serde_json::Error::custom("apiVersion is not v1"));
    }
    if parts.kind.as_deref().is_some_and(|k| k != "Pod") {
        return Err(serde_json::Error::custom("kind is not Pod"));
    }
    Ok(Pod {
        metadata: parts.metadata,
        spec: parts.spec.map(PodSpec::from),
        status: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The full Pod with every field the reader skips cleared.
    fn only_read_fields(mut pod: Pod) -> Pod {
        pod.status = None;
        if let Some(spec) = pod.spec.take() {
            let keep = |c: Container| Container {
                name: c.name,
                resources: c.resources,
                restart_policy: c.restart_policy,
                ..Container::default()
            };
            pod.spec = Some(PodSpec {
                containers: spec.containers.into_iter().map(keep).collect(),
                init_containers: spec
                    .init_containers
                    .map(|list| list.into_iter().map(keep).collect()),
                overhead: spec.overhead,
                node_selector: spec.node_selector,
                affinity: spec.affinity,
                tolerations: spec.tolerations,
                topology_spread_constraints: spec.topology_spread_constraints,
                scheduler_name: spec.scheduler_name,
                node_name: spec.node_name,
                ..PodSpec::default()
            });
        }
        pod
    }

    #[test]
    fn reads_every_field_it_keeps_as_the_full_pod_has_it() {
        let review: serde_json::Value =
            serde_json::from_str(include_str!("../../examples/taskmanager-review.json"))
                .expect("example review");
        let mut object = review["request"]["object"].clone();
        // Every kept field present at once, besides what the example carries.
        object["spec"]["initContainers"] = serde_json::json!([
            {"name": "sidecar", "image": "x", "restartPolicy": "Always",
             "resources": {"requests": {"cpu": "250m"}}},
            {"name": "setup", "image": "y", "command": ["true"],
             "resources": {"limits": {"memory": "1Gi"}}}
        ]);
        object["spec"]["overhead"] = serde_json::json!({"cpu": "100m"});
        object["spec"]["nodeSelector"] = serde_json::json!({"pool": "flink"});
        object["spec"]["topologySpreadConstraints"] = serde_json::json!([
            {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
             "whenUnsatisfiable": "DoNotSchedule",
             "labelSelector": {"matchLabels": {"app": "wordcount"}}}
        ]);
        object["status"] = serde_json::json!({"phase": "Pending"});
        let text = object.to_string();
        let full: Pod = serde_json::from_str(&text).expect("full pod");
        let read = read_pod(&text).expect("read pod");
        assert_eq!(read, only_read_fields(full.clone()));
        // And it skipped something: the example's images and the status.
        assert_ne!(read, full);
    }

    #[test]
    fn a_pod_without_spec_or_metadata_reads_as_such() {
        assert_eq!(read_pod("{}").expect("empty"), Pod::default());
        let pod = read_pod(r#"{"metadata":{"name":"a"}}"#).expect("no spec");
        assert_eq!(pod.metadata.name.as_deref(), Some("a"));
        assert!(pod.spec.is_none());
    }

    #[test]
    fn malformed_kept_fields_are_errors() {
        assert!(read_pod(r#"{"spec":{"containers":5}}"#).is_err());
        assert!(read_pod(r#"{"spec":{"affinity":5}}"#).is_err());
        assert!(read_pod("5").is_err());
        assert!(read_pod(r#"{"apiVersion":"v0","kind":"Pod"}"#).is_err());
        assert!(read_pod(r#"{"apiVersion":"v1","kind":"Node"}"#).is_err());
        assert!(read_pod(r#"{"apiVersion":"v1","kind":"Pod"}"#).is_ok());
        assert!(read_pod(r#"{"metadata":{"labels":[1]}}"#).is_err());
    }
}
