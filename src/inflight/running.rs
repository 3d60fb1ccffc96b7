//! Running TaskManagers by job, from the pod watch: which pods' measured load estimates a new
//! pod of the same job. Only pods that name a job cheaply are kept (Flink's `app` and
//! `component: taskmanager` labels, or a steered pod's owner), so a 150,000-pod cluster costs
//! a few entries per TaskManager, not per pod. Where each one runs is kept too, for the
//! `hotspots` report.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use crate::hashing::HashMap;
use k8s_openapi::api::core::v1::Pod;

use crate::jobs::{self, COMPONENT_LABEL, JobKey, TASKMANAGER};
use crate::snapshot::LoadSnapshot;

#[derive(Debug, Clone, PartialEq)]
struct RunningPod {
    labels: BTreeMap<String, String>,
    owner: Option<String>,
    /// When its containers last started running.
    since: Option<SystemTime>,
    /// `spec.nodeName`.
    node: Option<String>,
    /// It carries the decision annotation.
    steered: bool,
}

/// A running pod, where it runs and for which job.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct PlacedPod {
    pub namespace: String,
    pub pod: String,
    pub job: JobKey,
    pub node: String,
    /// It carries the webhook's decision annotation.
    pub steered: bool,
}

#[derive(Debug, Clone, Default)]
pub struct RunningPods {
    /// By `namespace/name`.
    pods: HashMap<String, RunningPod>,
}

impl RunningPods {
    /// Records `pod` as it now is: kept while it runs and names a job, dropped otherwise.
    /// `steered`: it carries the decision annotation, so its owner names its job too.
    pub fn update(&mut self, pod: &Pod, deleted: bool, steered: bool) {
        let meta = &pod.metadata;
        let key = format!(
            "{}/{}",
            meta.namespace.as_deref().unwrap_or_default(),
            meta.name.as_deref().unwrap_or_default()
        );
        let running = pod
            .status
            .as_ref()
            .and_then(|s| s.phase.as_deref())
            .is_some_and(|p| p == "Running");
        let labels = meta.labels.as_ref();
        let taskmanager = labels
            .and_then(|l| l.get(COMPONENT_LABEL))
            .is_some_and(|c| c == TASKMANAGER);
        if deleted || !running || !(taskmanager || steered) {
            self.pods.remove(&key);
            return;
        }
        self.pods.insert(
            key,
            RunningPod {
                labels: labels.map(jobs::job_labels).unwrap_or_default(),
                owner: jobs::owner_uid(pod).map(str::to_string),
                since: started(pod),
                node: pod
                    .spec
                    .as_ref()
                    .and_then(|s| s.node_name.clone())
                    .filter(|n| !n.is_empty()),
                steered,
            },
        );
    }

    /// Every running pod with a node and a job, sorted by namespace and name.
    pub fn placed(&self) -> Vec<PlacedPod> {
        let mut placed: Vec<PlacedPod> = self
            .pods
            .iter()
            .filter_map(|(key, known)| {
                let (namespace, pod) = key.split_once('/')?;
                Some(PlacedPod {
                    job: JobKey::of(namespace, &known.labels, known.owner.as_deref())?,
                    namespace: namespace.to_string(),
                    pod: pod.to_string(),
                    node: known.node.clone()?,
                    steered: known.steered,
                })
            })
            .collect();
        placed.sort();
        placed
    }

    pub fn len(&self) -> usize {
        self.pods.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pods.is_empty()
    }

    /// Gives each pod reading of `snapshot` its job and how long it had been running; readings
    /// of pods not known running here are dropped (finished, not a TaskManager, or unknown).
    pub fn label(&self, snapshot: &mut LoadSnapshot) {
        let taken_at = snapshot.taken_at.unwrap_or_else(SystemTime::now);
        snapshot.pods.retain_mut(|reading| {
            let key = format!("{}/{}", reading.namespace, reading.pod);
            let Some(known) = self.pods.get(&key) else {
                return false;
            };
            reading.labels = known.labels.clone();
            reading.owner = known.owner.clone();
            reading.running_secs = known.since.map(|since| {
                taken_at
                    .duration_since(since)
                    .unwrap_or(Duration::ZERO)
                    .as_secs_f64()
            });
            true
        });
    }
}

/// When the pod's containers last started: the latest `running.startedAt` (a restart resets
/// the rate window), else the pod's start time.
fn started(pod: &Pod) -> Option<SystemTime> {
    let status = pod.status.as_ref()?;
    status
        .container_statuses
        .iter()
        .flatten()
        .filter_map(|c| c.state.as_ref()?.running.as_ref()?.started_at.as_ref())
        .map(|t| SystemTime::from(t.0))
        .max()
        .or_else(|| status.start_time.as_ref().map(|t| SystemTime::from(t.0)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::PodReading;

    fn pod(name: &str, labels: serde_json::Value, phase: &str, started: &str) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"namespace": "flink", "name": name, "labels": labels,
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                             "name": "jm", "uid": "owner-1", "controller": true}]},
            "spec": {"nodeName": format!("node-of-{name}"), "containers": []},
            "status": {"phase": phase, "startTime": "2026-11-23T09:00:00Z",
                       "containerStatuses": [{"name": "main", "image": "flink", "imageID": "",
                           "ready": true, "restartCount": 1,
                           "state": {"running": {"startedAt": started}}}]}
        }))
        .expect("pod")
    }

    fn reading(name: &str) -> PodReading {
        PodReading {
            namespace: "flink".into(),
            pod: name.into(),
            cpu_cores: 1.0,
            network_bytes_per_second: None,
            labels: BTreeMap::new(),
            owner: None,
            running_secs: None,
            node: None,
            steered: false,
        }
    }

    #[test]
    fn keeps_running_taskmanagers_and_labels_their_readings() {
        let tm = serde_json::json!({"app": "orders", "component": "taskmanager", "x": "y"});
        let mut running = RunningPods::default();
        running.update(
            &pod("tm-1", tm.clone(), "Running", "2026-11-23T09:50:00Z"),
            false,
            false,
        );
        running.update(
            &pod("tm-2", tm.clone(), "Pending", "2026-11-23T09:50:00Z"),
            false,
            false,
        );
        let other = serde_json::json!({"app": "web"});
        running.update(
            &pod("web-1", other.clone(), "Running", "2026-11-23T09:00:00Z"),
            false,
            false,
        );
        // A steered pod without Flink's labels: its owner names its job.
        running.update(
            &pod("steered", other, "Running", "2026-11-23T09:00:00Z"),
            false,
            true,
        );
        assert_eq!(running.len(), 2);
        let placed = running.placed();
        let summary: Vec<(&str, &str, String, bool)> = placed
            .iter()
            .map(|p| {
                (
                    p.pod.as_str(),
                    p.node.as_str(),
                    p.job.to_string(),
                    p.steered,
                )
            })
            .collect();
        assert_eq!(
            summary,
            [
                (
                    "steered",
                    "node-of-steered",
                    "flink/owner=owner-1".into(),
                    true
                ),
                ("tm-1", "node-of-tm-1", "flink/app=orders".into(), false),
            ]
        );
        assert!(placed.iter().all(|p| p.namespace == "flink"));

        let mut snapshot = LoadSnapshot {
            taken_at: humantime::parse_rfc3339("2026-11-23T10:00:00Z").ok(),
            nodes: Vec::new(),
            pods: ["tm-1", "tm-2", "web-1", "steered"].map(reading).to_vec(),
        };
        running.label(&mut snapshot);
        let names: Vec<&str> = snapshot.pods.iter().map(|p| p.pod.as_str()).collect();
        assert_eq!(names, ["tm-1", "steered"]);
        let tm1 = &snapshot.pods[0];
        // The container restarted at 09:50: ten minutes of running, not an hour.
        assert_eq!(tm1.running_secs, Some(600.0));
        assert_eq!(
            tm1.job().map(|j| j.to_string()),
            Some("flink/app=orders".into())
        );
        assert_eq!(
            snapshot.pods[1].job().map(|j| j.to_string()),
            Some("flink/owner=owner-1".into())
        );

        // Finished or deleted: gone.
        running.update(
            &pod("tm-1", tm.clone(), "Succeeded", "2026-11-23T09:50:00Z"),
            false,
            false,
        );
        running.update(
            &pod("steered", tm, "Running", "2026-11-23T09:00:00Z"),
            true,
            true,
        );
        assert!(running.is_empty());
    }
}
