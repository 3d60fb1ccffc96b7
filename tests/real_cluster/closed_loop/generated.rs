//! The generated clusters and pods of the closed loop: nodes of 16-64 cores in three zones with
//! a running pod of another workload each, the load snapshot the webhook reads, TaskManagers as
//! Flink's native mode creates them, and another workload's pods created meanwhile.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use placement_webhook::snapshot::{LoadSnapshot, NodeLoad};
use serde_json::{Value, json};

use crate::fixture::Cluster;
use crate::support::rng::Rng;

pub(super) const BUSY: f64 = 0.70;
/// 10 GbE, in bytes per second.
const NIC: f64 = 1.25e9;
pub(super) const LANDINGS: &str = "placement_webhook_landings_total";
/// What a TaskManager requests: its main container and its log sidecar.
pub(super) const TASKMANAGER_CORES: f64 = 2.1;

pub(super) struct Node {
    pub(super) name: String,
    pub(super) zone: usize,
    pub(super) cores: u32,
    pub(super) cpu: f64,
    pub(super) nic: f64,
    pub(super) requested_cores: f64,
}

/// How full a generated cluster is.
#[derive(Clone, Copy)]
pub(super) struct Load {
    /// Share of the nodes that are busy (55-90% CPU); the rest are at 5-50%.
    busy: f64,
    /// What the running pods request, as a share of the node's cores.
    requested: (f64, f64),
}

pub(super) const LIGHT: Load = Load {
    busy: 0.33,
    requested: (0.1, 0.5),
};
pub(super) const HEAVY: Load = Load {
    busy: 0.5,
    requested: (0.3, 0.7),
};

/// `n` nodes loaded as `load` says; names a permutation of positions, so name order says
/// nothing about load.
pub(super) fn generate(n: usize, seed: u64, load: Load) -> Vec<Node> {
    let mut rng = Rng(seed);
    let stride = name_stride(n);
    (0..n)
        .map(|i| {
            let cores = [16, 32, 64][(rng.unit() * 3.0) as usize % 3];
            let busy = rng.unit() < load.busy;
            let cpu = if busy {
                rng.between(0.55, 0.9)
            } else {
                rng.between(0.05, 0.5)
            };
            Node {
                name: format!("worker-{:05}", (i * stride) % n),
                zone: i % 3,
                cores,
                cpu,
                nic: rng.between(0.05, 0.6),
                requested_cores: (f64::from(cores)
                    * rng.between(load.requested.0, load.requested.1))
                .floor(),
            }
        })
        .collect()
}

/// Names are position x stride (mod n), the stride coprime with n: a permutation.
fn name_stride(n: usize) -> usize {
    (1..n)
        .rev()
        .find(|s| gcd(*s, n) == 1 && *s > n / 3)
        .unwrap_or(1)
}

/// The same nodes in the order they join (the tests create nodes in order, many a second)
/// coolest first, as when a new pool or an autoscaler's batch of idle nodes joined together:
/// the scheduler's order then follows load. Names and zones are given by the new positions as
/// [`generate`] gives them, so neither says anything about load.
pub(super) fn joined_coolest_first(mut nodes: Vec<Node>) -> Vec<Node> {
    nodes.sort_by(|a, b| a.cpu.total_cmp(&b.cpu));
    let n = nodes.len();
    let stride = name_stride(n);
    for (i, node) in nodes.iter_mut().enumerate() {
        node.name = format!("worker-{:05}", (i * stride) % n);
        node.zone = i % 3;
    }
    nodes
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 { a } else { gcd(b, a % b) }
}

pub(super) fn labels(node: &Node) -> Vec<(String, String)> {
    vec![
        ("node-pool".into(), "flink".into()),
        ("topology.kubernetes.io/region".into(), "eu-west".into()),
        ("topology.kubernetes.io/zone".into(), zone_name(node.zone)),
    ]
}

pub(super) fn zone_name(zone: usize) -> String {
    format!("eu-west-{}", ["a", "b", "c"][zone % 3])
}

/// The snapshot the webhook reads and the model's cluster is built from (the model takes the
/// running pod's requests from `requested`; the webhook, from the pod watch).
pub(super) fn snapshot(nodes: &[Node]) -> LoadSnapshot {
    LoadSnapshot {
        window_samples: Default::default(),
        taken_at: Some(std::time::SystemTime::now()),
        pods: Vec::new(),
        nodes: nodes
            .iter()
            .map(|s| {
                let mut node = NodeLoad::new(s.name.clone(), s.cpu);
                node.cpu_capacity_cores = Some(f64::from(s.cores));
                node.network_bytes_per_second = Some(s.nic * NIC);
                node.network_capacity_bytes_per_second = Some(NIC);
                let mut all: BTreeMap<String, String> = labels(s).into_iter().collect();
                all.insert("kubernetes.io/hostname".into(), s.name.clone());
                node.labels = Arc::new(all);
                (node.allocatable, node.requested) =
                    crate::node_resources::node_resources(s.cores, s.requested_cores, 1);
                node
            })
            .collect(),
    }
}

/// What the job's pod template adds to its TaskManagers.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Template {
    Plain,
    /// Preferred anti-affinity to the job's own TaskManagers by hostname, weight 100: one per
    /// node first, as many Flink templates ask.
    Apart,
    /// Zone topology spread of the job's TaskManagers, maxSkew 1, DoNotSchedule.
    ZoneSpread,
}

/// A native-mode TaskManager: a log sidecar and `flink-main-container`, requests equal to
/// limits, with what `template` adds.
pub(super) fn taskmanager(name: &str, template: Template) -> Value {
    let mut pod = plain_taskmanager(name);
    let job = json!({"app": "clickstream", "component": "taskmanager"});
    match template {
        Template::Plain => {}
        Template::Apart => {
            pod["spec"]["affinity"] = json!({"podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [{
                    "weight": 100,
                    "podAffinityTerm": {
                        "topologyKey": "kubernetes.io/hostname",
                        "labelSelector": {"matchLabels": job}
                    }
                }]
            }});
        }
        Template::ZoneSpread => {
            pod["spec"]["topologySpreadConstraints"] = json!([{
                "maxSkew": 1,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": job}
            }]);
        }
    }
    pod
}

fn plain_taskmanager(name: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": {"app": "clickstream", "component": "taskmanager",
                       "type": "flink-native-kubernetes"}
        },
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 0,
            "nodeSelector": {"node-pool": "flink"},
            "containers": [
                {"name": "log-shipper", "image": "fluent/fluent-bit:3.1",
                 "resources": {"requests": {"cpu": "100m", "memory": "64Mi"},
                               "limits": {"cpu": "100m", "memory": "64Mi"}}},
                {"name": "flink-main-container", "image": "flink:1.20",
                 "resources": {"requests": {"cpu": "2", "memory": "4Gi"},
                               "limits": {"cpu": "2", "memory": "4Gi"}}}
            ]
        }
    })
}

pub(super) fn running_pod(node: &Node) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": format!("other-{}", node.name), "labels": {"app": "other"}},
        "spec": {
            "nodeName": node.name,
            "terminationGracePeriodSeconds": 0,
            "containers": [{
                "name": "main",
                "image": "busybox",
                "resources": {"requests": {
                    "cpu": format!("{}m", (node.requested_cores * 1000.0) as i64),
                    "memory": format!("{}Mi", (node.requested_cores * 2048.0) as i64),
                }},
            }],
        },
    })
}

/// Pods of another workload (no TaskManagers, so never steered) created at a steady rate in
/// namespace `running`, for the default scheduler to bind among the burst's pods.
pub(super) struct OtherWorkload {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<usize>,
}

impl OtherWorkload {
    pub(super) fn start(cluster: &Cluster, per_second: u32) -> OtherWorkload {
        let (stop, mut stopped) = tokio::sync::oneshot::channel();
        let api = Api::<Pod>::namespaced(cluster.admin.clone(), "running");
        let task = tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1) / per_second);
            let mut created = 0;
            loop {
                tokio::select! {
                    _ = &mut stopped => return created,
                    _ = tick.tick() => {}
                }
                let pod: Pod = serde_json::from_value(json!({
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": format!("web-{created:05}"), "labels": {"app": "web"}},
                    "spec": {
                        "terminationGracePeriodSeconds": 0,
                        "containers": [{"name": "main", "image": "nginx",
                            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}]
                    }
                }))
                .expect("a pod");
                api.create(&kube::api::PostParams::default(), &pod)
                    .await
                    .expect("create a pod of the other workload");
                created += 1;
            }
        });
        OtherWorkload { stop, task }
    }

    /// Stops creating pods; how many were created.
    pub(super) async fn stop(self) -> usize {
        let _ = self.stop.send(());
        self.task.await.expect("the other workload's task")
    }
}
