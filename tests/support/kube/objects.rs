//! API objects the tests create: Nodes with a status (no kubelet writes one), Flink pods, and
//! helpers that create many at once and wait for the scheduler's binds.

use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};

/// A pod annotated with this never runs: kwok's `pod-waiting` stage (tests/kube/kwok/stages.yaml)
/// holds its containers waiting with the annotation's value as their reason
/// (`ImagePullBackOff`, `CrashLoopBackOff`, ...).
pub const WAITING_REASON: &str = "placement-test/waiting-reason";

/// One Node to create: name, zone, allocatable CPU cores.
#[derive(Clone, Debug)]
pub struct NodeSpec {
    pub name: String,
    pub zone: String,
    pub cores: u32,
    pub labels: Vec<(String, String)>,
    pub annotations: Vec<(String, String)>,
    /// The InternalIP a kubelet would report (kwok's stages keep it); none by default.
    pub internal_ip: Option<String>,
    /// CPU kept from the pods (system and other reserved), in millicores: allocatable is the
    /// cores less this. 0 by default.
    pub reserved_millicores: u32,
}

impl NodeSpec {
    pub fn new(name: &str, zone: &str, cores: u32) -> NodeSpec {
        NodeSpec {
            name: name.into(),
            zone: zone.into(),
            cores,
            labels: Vec::new(),
            annotations: Vec::new(),
            internal_ip: None,
            reserved_millicores: 0,
        }
    }

    pub fn to_json(&self) -> Value {
        let mut labels = serde_json::Map::new();
        labels.insert("kubernetes.io/hostname".into(), json!(self.name));
        labels.insert("kubernetes.io/os".into(), json!("linux"));
        labels.insert("topology.kubernetes.io/zone".into(), json!(self.zone));
        for (k, v) in &self.labels {
            labels.insert(k.clone(), json!(v));
        }
        let resources = json!({
            "cpu": self.cores.to_string(),
            "memory": format!("{}Gi", self.cores * 4),
            "pods": "110",
        });
        let mut allocatable = resources.clone();
        if self.reserved_millicores > 0 {
            allocatable["cpu"] = json!(format!(
                "{}m",
                (self.cores * 1000).saturating_sub(self.reserved_millicores)
            ));
        }
        let mut node = json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": self.name, "labels": labels},
            "status": {
                "capacity": resources,
                "allocatable": allocatable,
                "conditions": [{
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "created by the test",
                    "lastHeartbeatTime": now(),
                    "lastTransitionTime": now(),
                }],
            },
        });
        for (k, v) in &self.annotations {
            node["metadata"]["annotations"][k] = json!(v);
        }
        if let Some(ip) = &self.internal_ip {
            // A living node's CPUs for kwok's node-exporter (tests/kube/kwok/metrics.yaml):
            // it serves one series per CPU, 64 at most.
            node["metadata"]["annotations"]["placement-test/cores"] =
                json!(self.cores.min(64).to_string());
            node["status"]["addresses"] = json!([
                {"type": "InternalIP", "address": ip},
                {"type": "Hostname", "address": self.name},
            ]);
        }
        node
    }
}

fn now() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

/// A namespace; `inject`: labelled for the webhook.
pub async fn create_namespace(client: &Client, name: &str, inject: bool) {
    let mut labels = serde_json::Map::new();
    if inject {
        labels.insert("placement-webhook.io/inject".into(), json!("enabled"));
    }
    create_namespace_labelled(client, name, Value::Object(labels)).await;
}

/// Creates namespace `name` with `labels` (a JSON object).
pub async fn create_namespace_labelled(client: &Client, name: &str, labels: Value) {
    let ns: Namespace = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": name, "labels": labels},
    }))
    .expect("namespace");
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .expect("create namespace");
}

/// Creates the nodes, 32 requests at a time.
pub async fn create_nodes(client: &Client, nodes: &[NodeSpec]) {
    let api = Api::<Node>::all(client.clone());
    futures::stream::iter(nodes.iter().map(|spec| {
        let api = api.clone();
        async move {
            let node: Node = serde_json::from_value(spec.to_json()).expect("node");
            api.create(&PostParams::default(), &node)
                .await
                .map(|_| ())
                .map_err(|e| format!("node {}: {e}", spec.name))
        }
    }))
    .buffer_unordered(32)
    .try_collect::<Vec<()>>()
    .await
    .expect("create nodes");
}

/// A Flink TaskManager of job `job` requesting `cpu` (a quantity), as Flink's native
/// Kubernetes integration labels it.
pub fn taskmanager(name: &str, job: &str, cpu: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": {
                "app": job,
                "component": "taskmanager",
                "type": "flink-native-kubernetes",
            },
        },
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 0,
            "containers": [{
                "name": "flink-main-container",
                "image": "flink:1.20",
                "resources": {
                    "requests": {"cpu": cpu, "memory": "1Gi"},
                    "limits": {"cpu": cpu, "memory": "1Gi"},
                },
            }],
        },
    })
}

/// A running pod of another workload bound to `node` (created with `spec.nodeName`).
pub fn bound_pod(name: &str, node: &str, cpu: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "other"}},
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 0,
            "containers": [{
                "name": "main",
                "image": "busybox",
                "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}},
            }],
        },
    })
}

pub async fn create_pod(client: &Client, namespace: &str, pod: &Value) -> Pod {
    create_pod_with(client, namespace, pod, &PostParams::default()).await
}

pub async fn create_pod_with(
    client: &Client,
    namespace: &str,
    pod: &Value,
    params: &PostParams,
) -> Pod {
    let pod: Pod = serde_json::from_value(pod.clone()).expect("pod");
    Api::<Pod>::namespaced(client.clone(), namespace)
        .create(params, &pod)
        .await
        .unwrap_or_else(|e| panic!("create pod {:?}: {e}", pod.metadata.name))
}

/// Creates the pods all at once; returns them as created (patched by webhooks).
pub async fn create_pods(client: &Client, namespace: &str, pods: &[Value]) -> Vec<Pod> {
    create_each(client, namespace, pods, pods.len().max(1), |pod| pod).await
}

/// Creates many pods, `concurrency` requests at a time, keeping nothing of the answers.
pub async fn create_many(client: &Client, namespace: &str, pods: &[Value], concurrency: usize) {
    create_each(client, namespace, pods, concurrency, drop).await;
}

/// Creates `pod`, sending it again when the request did not reach the apiserver (a connection
/// a burst of hundreds of creates at once lost: `client error (SendRequest)`, once in a day
/// test). A resent create that finds the pod made (the first had arrived after all) takes it
/// as stored. An answer from the apiserver is never resent.
async fn create_resent(api: &Api<Pod>, pod: &Pod) -> Result<Pod, kube::Error> {
    const SENDS: u32 = 4;
    let mut sent = 0;
    loop {
        sent += 1;
        match api.create(&PostParams::default(), pod).await {
            Err(kube::Error::Service(error)) if sent < SENDS => {
                eprintln!(
                    "create {:?} not sent ({error}); sending again",
                    pod.metadata.name
                );
                tokio::time::sleep(Duration::from_millis(500) * sent).await;
            }
            Err(kube::Error::Api(status)) if sent > 1 && status.code == 409 => {
                let name = pod.metadata.name.as_deref().unwrap_or_default();
                return api.get(name).await;
            }
            answer => return answer,
        }
    }
}

/// Creates the pods, `concurrency` at a time, in order; `keep` takes each as created.
pub async fn create_each<T>(
    client: &Client,
    namespace: &str,
    pods: &[Value],
    concurrency: usize,
    keep: impl Fn(Pod) -> T,
) -> Vec<T> {
    let api = Api::<Pod>::namespaced(client.clone(), namespace);
    let keep = &keep;
    futures::stream::iter(pods.iter().map(|pod| {
        let api = api.clone();
        async move {
            let pod: Pod = serde_json::from_value(pod.clone()).expect("pod");
            create_resent(&api, &pod)
                .await
                .map(keep)
                .map_err(|e| format!("pod {:?}: {e}", pod.metadata.name))
        }
    }))
    .buffered(concurrency)
    .try_collect::<Vec<T>>()
    .await
    .expect("create pods")
}

/// Waits until every named pod has a node (60 s at most); returns name -> node.
pub async fn wait_bound(
    client: &Client,
    namespace: &str,
    names: &[String],
) -> std::collections::BTreeMap<String, String> {
    let api = Api::<Pod>::namespaced(client.clone(), namespace);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let list = api.list(&ListParams::default()).await.expect("list pods");
        let bound: std::collections::BTreeMap<String, String> = list
            .items
            .iter()
            .filter_map(|p| {
                let name = p.metadata.name.clone()?;
                let node = p.spec.as_ref()?.node_name.clone()?;
                names.contains(&name).then_some((name, node))
            })
            .collect();
        if bound.len() == names.len() {
            return bound;
        }
        assert!(
            Instant::now() < deadline,
            "{} of {} pods bound after 60 s",
            bound.len(),
            names.len()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

pub async fn delete_pod_now(client: &Client, namespace: &str, name: &str) {
    Api::<Pod>::namespaced(client.clone(), namespace)
        .delete(name, &DeleteParams::default().grace_period(0))
        .await
        .expect("delete pod");
}

/// The pod's annotations, or none.
pub fn annotation<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}
