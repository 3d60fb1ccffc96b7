//! The load of every node at one moment: what the placement code reads.
//!
//! The same struct is the documented static snapshot file format (`--metrics-file`) and what the
//! Prometheus source builds on each refresh.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

/// One node's measured load plus, for the no-cluster case, what the scheduler would filter on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeLoad {
    pub name: String,
    /// CPU busy fraction, 0..1.
    pub cpu: f64,
    /// Receive + transmit bytes per second on the counted devices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_bytes_per_second: Option<f64>,
    /// NIC speed in bytes per second; when missing, network is normalised by the busiest node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_capacity_bytes_per_second: Option<f64>,
    /// Memory used fraction, 0..1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<f64>,
    /// Allocatable CPU cores; lets the in-flight ledger turn a pod's CPU request into a busy fraction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_capacity_cores: Option<f64>,
    /// Shared with the view built from it (see `ModelNode::labels`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: Arc<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<Taint>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unschedulable: bool,
    /// What the scheduler filters on when there is no cluster access: allocatable resources as
    /// Kubernetes quantities (`{"cpu": "32", "memory": "128Gi", "pods": "110"}`) and the sum of
    /// the requests of the pods bound to the node (`"pods"` counts them).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub allocatable: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub requested: BTreeMap<String, String>,
    /// False when the node's Ready condition is not True (set from the inventory).
    #[serde(default = "default_true", skip_serializing_if = "Clone::clone")]
    pub(crate) ready: bool,
}

fn default_true() -> bool {
    true
}

impl NodeLoad {
    /// A node with only a CPU reading; the other fields at their defaults.
    pub fn new(name: impl Into<String>, cpu: f64) -> Self {
        NodeLoad {
            name: name.into(),
            cpu,
            network_bytes_per_second: None,
            network_capacity_bytes_per_second: None,
            memory: None,
            cpu_capacity_cores: None,
            labels: Arc::default(),
            taints: Vec::new(),
            allocatable: BTreeMap::new(),
            requested: BTreeMap::new(),
            unschedulable: false,
            ready: true,
        }
    }
}

pub use crate::scheduler::Taint;

/// One running pod's measured load: the estimate for new pods of the same job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PodReading {
    pub(crate) namespace: String,
    pub pod: String,
    /// CPU cores in use.
    pub(crate) cpu_cores: f64,
    /// Receive + transmit bytes per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) network_bytes_per_second: Option<f64>,
    /// The labels that name its job (`app`, `component`); see `jobs::JobKey`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) labels: BTreeMap<String, String>,
    /// Uid of its controller owner, for pods without Flink's labels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) owner: Option<String>,
    /// How long it had been running when the readings were taken; a rate over a window longer
    /// than that under-reads. Unknown: taken as settled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) running_secs: Option<f64>,
    /// The node it runs on, for `hotspots` without cluster access (the pod watch knows it
    /// otherwise). Placement does not read it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) node: Option<String>,
    /// It carries the webhook's decision annotation; for `hotspots`, as `node`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) steered: bool,
}

impl PodReading {
    pub(crate) fn job(&self) -> Option<crate::jobs::JobKey> {
        crate::jobs::JobKey::of(&self.namespace, &self.labels, self.owner.as_deref())
    }
}

/// Every node's load at `taken_at`, and the load of running pods whose job is known.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LoadSnapshot {
    /// When the readings were taken. A file without it is treated as fresh.
    #[serde(default, with = "rfc3339_opt", skip_serializing_if = "Option::is_none")]
    pub taken_at: Option<SystemTime>,
    pub nodes: Vec<NodeLoad>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pods: Vec<PodReading>,
    /// How many samples each node's exporter series held over the rate window, where Prometheus
    /// said: fewer than the window holds say the node's readings span only part of it (the
    /// in-flight ledger reads its pods over the same part).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub window_samples: BTreeMap<String, f64>,
}

#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    // The causes are part of the messages and not sources: printed as a chain (`{:#}`), they
    // would be said twice.
    #[error("cannot read snapshot file {path}: {error}")]
    Read { path: String, error: std::io::Error },
    #[error("snapshot is not valid JSON of the documented format: {0}")]
    Parse(serde_json::Error),
    #[error("snapshot node or pod {node:?}: {problem}")]
    Invalid { node: String, problem: &'static str },
}

impl LoadSnapshot {
    /// Parses and validates the documented snapshot format.
    pub(crate) fn from_json(text: &str) -> Result<Self, SnapshotError> {
        let snapshot: LoadSnapshot = serde_json::from_str(text).map_err(SnapshotError::Parse)?;
        snapshot.validate()?;
        Ok(snapshot)
    }

    pub fn from_file(path: &std::path::Path) -> Result<Self, SnapshotError> {
        let text = std::fs::read_to_string(path).map_err(|error| SnapshotError::Read {
            path: path.display().to_string(),
            error,
        })?;
        Self::from_json(&text)
    }

    /// Rejects readings no measurement can produce, so the placement code never meets them.
    pub fn validate(&self) -> Result<(), SnapshotError> {
        for node in &self.nodes {
            let invalid = |problem| SnapshotError::Invalid {
                node: node.name.clone(),
                problem,
            };
            if node.name.is_empty() {
                return Err(invalid("name is empty"));
            }
            if !is_fraction(node.cpu) {
                return Err(invalid("cpu must be a busy fraction in 0..1"));
            }
            if node.memory.is_some_and(|m| !is_fraction(m)) {
                return Err(invalid("memory must be a used fraction in 0..1"));
            }
            let non_negative = |v: Option<f64>| v.is_none_or(|v| v.is_finite() && v >= 0.0);
            if !non_negative(node.network_bytes_per_second) {
                return Err(invalid("network_bytes_per_second must be finite and >= 0"));
            }
            if !non_negative(node.network_capacity_bytes_per_second)
                || node.network_capacity_bytes_per_second == Some(0.0)
            {
                return Err(invalid("network_capacity_bytes_per_second must be > 0"));
            }
            if !non_negative(node.cpu_capacity_cores) || node.cpu_capacity_cores == Some(0.0) {
                return Err(invalid("cpu_capacity_cores must be > 0"));
            }
            let quantities_ok = |list: &BTreeMap<String, String>| {
                list.iter().all(|(name, q)| {
                    crate::scheduler::quantity::amount(name, q).is_some_and(|v| v >= 0)
                })
            };
            if !quantities_ok(&node.allocatable) {
                return Err(invalid(
                    "allocatable holds an unreadable or negative quantity",
                ));
            }
            if !quantities_ok(&node.requested) {
                return Err(invalid(
                    "requested holds an unreadable or negative quantity",
                ));
            }
        }
        for pod in &self.pods {
            let invalid = |problem| SnapshotError::Invalid {
                node: format!("{}/{}", pod.namespace, pod.pod),
                problem,
            };
            let non_negative = |v: Option<f64>| v.is_none_or(|v| v.is_finite() && v >= 0.0);
            if pod.pod.is_empty() || pod.namespace.is_empty() {
                return Err(invalid("a pod reading needs namespace and pod"));
            }
            if pod.node.as_deref().is_some_and(str::is_empty) {
                return Err(invalid("node, when given, must not be empty"));
            }
            if !non_negative(Some(pod.cpu_cores))
                || !non_negative(pod.network_bytes_per_second)
                || !non_negative(pod.running_secs)
            {
                return Err(invalid("pod readings must be finite and >= 0"));
            }
        }
        if let Some((node, _)) =
            (self.window_samples.iter()).find(|(_, n)| !(n.is_finite() && **n >= 1.0))
        {
            return Err(SnapshotError::Invalid {
                node: node.clone(),
                problem: "window_samples must count at least one sample",
            });
        }
        Ok(())
    }
}

fn is_fraction(v: f64) -> bool {
    v.is_finite() && (0.0..=1.0).contains(&v)
}

mod rfc3339_opt {
    use std::time::SystemTime;

    use serde::{Deserialize, Deserializer, Serializer};

    pub(crate) fn serialize<S: Serializer>(
        value: &Option<SystemTime>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match value {
            Some(t) => s.serialize_str(&humantime::format_rfc3339_millis(*t).to_string()),
            None => s.serialize_none(),
        }
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<SystemTime>, D::Error> {
        let text: Option<String> = Option::deserialize(d)?;
        text.map(|t| humantime::parse_rfc3339_weak(&t).map_err(serde::de::Error::custom))
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minimal_node_needs_only_name_and_cpu() {
        let s = LoadSnapshot::from_json(r#"{"nodes":[{"name":"n1","cpu":0.5}]}"#).expect("valid");
        assert_eq!(s.nodes, vec![NodeLoad::new("n1", 0.5)]);
        assert_eq!(s.taken_at, None);
    }

    #[test]
    fn taken_at_round_trips() {
        let s = LoadSnapshot::from_json(
            r#"{"taken_at":"2026-01-01T00:00:00Z","nodes":[{"name":"n1","cpu":0.1}]}"#,
        )
        .expect("valid");
        assert!(s.taken_at.is_some(), "taken_at read");
        let again = LoadSnapshot::from_json(&serde_json::to_string(&s).expect("ser")).expect("re");
        assert_eq!(again, s);
    }

    #[test]
    fn pod_node_and_steered_are_optional_and_round_trip() {
        let text = r#"{"nodes":[],"pods":[
            {"namespace":"f","pod":"a","cpu_cores":1},
            {"namespace":"f","pod":"b","cpu_cores":1,"node":"n1","steered":true}]}"#;
        let s = LoadSnapshot::from_json(text).expect("valid");
        assert_eq!(
            (s.pods[0].node.as_deref(), s.pods[0].steered),
            (None, false)
        );
        assert_eq!(
            (s.pods[1].node.as_deref(), s.pods[1].steered),
            (Some("n1"), true)
        );
        // Absent stays absent when written back.
        let written = serde_json::to_value(&s).expect("ser");
        assert_eq!(written["pods"][0].get("node"), None);
        assert_eq!(written["pods"][0].get("steered"), None);
        assert_eq!(written["pods"][1]["steered"], true);
        let again: LoadSnapshot = serde_json::from_value(written).expect("re");
        assert_eq!(again, s);
    }

    #[test]
    fn rejects_out_of_range_readings() {
        for bad in [
            r#"{"nodes":[{"name":"n1","cpu":1.5}]}"#,
            r#"{"nodes":[{"name":"","cpu":0.5}]}"#,
            r#"{"nodes":[{"name":"n1","cpu":0.5,"memory":-0.1}]}"#,
            r#"{"nodes":[{"name":"n1","cpu":0.5,"network_bytes_per_second":-1}]}"#,
            r#"{"nodes":[{"name":"n1","cpu":0.5,"network_capacity_bytes_per_second":0}]}"#,
            r#"{"nodes":[{"name":"n1"}]}"#,
            r#"{"nodes":[{"name":"n1","cpu":0.5,"allocatable":{"cpu":"lots"}}]}"#,
            r#"{"nodes":[{"name":"n1","cpu":0.5,"requested":{"memory":"-1Gi"}}]}"#,
            r#"{"nodes":[],"pods":[{"namespace":"f","pod":"p","cpu_cores":1,"node":""}]}"#,
            r#"{"nodes":[{"name":"n1","cpu":0.5}],"window_samples":{"n1":0}}"#,
        ] {
            assert!(LoadSnapshot::from_json(bad).is_err(), "accepted {bad}");
        }
    }
}
