//! Acceptance test of the product: a burst of 100 Flink TaskManagers arrives within one metrics
//! refresh on a 40-node cluster whose CPU load is skewed and whose resource requests do not track
//! real usage. Each pod goes through the real admission path, its patch is applied, and the
//! scheduler model places it. The hottest node afterwards is compared with a naive "everyone to
//! the coolest node" preference and with ideal water-filling.
//!
//! Run with `cargo test --test burst -- --nocapture` to see the figures.

#[path = "support/scheduler_model.rs"]
mod scheduler_model;

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use base64::Engine;
use k8s_openapi::api::core::v1::Pod;
use placement_webhook::admission::Admission;
use placement_webhook::config::Config;
use placement_webhook::placement::ledger::Ledger;
use placement_webhook::placement::note::{ANNOTATION, DecisionNote};
use placement_webhook::snapshot::{LoadSnapshot, NodeLoad};
use placement_webhook::view::ViewStore;
use scheduler_model::{ModelNode, fits_resources, node_affinity_filter, resources, schedule};
use serde_json::{Value, json};

const NODES: usize = 40;
const PODS: usize = 100;
const NODE_CORES: f64 = 32.0;
/// The TaskManager's main container: what each placed pod adds to its node's real CPU.
const TM_CORES: f64 = 2.0;
/// 10 GbE, in bytes per second.
const NIC_BYTES_PER_SECOND: f64 = 1.25e9;
/// Nodes at least this busy before the burst: TaskManagers sent there are the harm to avoid.
const BUSY: f64 = 0.70;

/// One node of the test cluster: what Prometheus measures and what the scheduler sees.
struct NodeSpec {
    name: String,
    /// Measured CPU busy fraction.
    busy: f64,
    network_bytes_per_second: f64,
    /// Cores already requested by running pods: unrelated to `busy` on purpose.
    requested_cores: u32,
}

/// Skewed, deterministic load: 4 busy nodes holding few requests, 26 middling ones, 10 nearly
/// idle nodes whose pods over-request. Names are a permutation so name order says nothing.
fn cluster() -> Vec<NodeSpec> {
    (0..NODES)
        .map(|i| {
            let (busy, requested_cores) = match i {
                0..4 => ([0.80, 0.77, 0.74, 0.70][i], [4, 6, 5, 4][i]),
                4..30 => (
                    0.30 + ((i * 11) % 26) as f64 * 0.012,
                    10 + (i * 5 % 7) as u32,
                ),
                _ => (0.03 + (i - 30) as f64 * 0.012, 16 + (i * 3 % 7) as u32),
            };
            NodeSpec {
                name: format!("worker-{:02}", (i * 17) % NODES),
                busy,
                network_bytes_per_second: 30e6 + busy * 150e6 + ((i * 37) % 11) as f64 * 5e6,
                requested_cores,
            }
        })
        .collect()
}

fn labels(name: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("kubernetes.io/hostname".to_string(), name.to_string()),
        ("kubernetes.io/os".to_string(), "linux".to_string()),
        ("node-pool".to_string(), "flink".to_string()),
    ])
}

fn snapshot(specs: &[NodeSpec]) -> LoadSnapshot {
    LoadSnapshot {
        taken_at: Some(SystemTime::now()),
        nodes: specs
            .iter()
            .map(|s| {
                let mut n = NodeLoad::new(s.name.clone(), s.busy);
                n.cpu_capacity_cores = Some(NODE_CORES);
                n.network_bytes_per_second = Some(s.network_bytes_per_second);
                n.network_capacity_bytes_per_second = Some(NIC_BYTES_PER_SECOND);
                n.labels = labels(&s.name);
                n
            })
            .collect(),
    }
}

/// The scheduler's view before the burst: 32 cores / 128Gi each, existing requests bound.
fn model_nodes(specs: &[NodeSpec]) -> Vec<ModelNode> {
    specs
        .iter()
        .map(|s| {
            let allocatable = resources(&[("cpu", "32"), ("memory", "128Gi"), ("pods", "110")]);
            let mut node = ModelNode::new(&s.name, labels(&s.name), allocatable);
            let existing: Pod = serde_json::from_value(json!({"spec": {"containers": [{
                "name": "existing",
                "resources": {"requests": {
                    "cpu": s.requested_cores.to_string(),
                    "memory": format!("{}Gi", s.requested_cores * 3)
                }}
            }]}}))
            .expect("existing pod");
            node.add_pod(&existing);
            node
        })
        .collect()
}

/// A native-mode TaskManager as the Flink resource manager creates it (after apiserver
/// defaulting): a pod-template sidecar before `flink-main-container`, requests equal to limits.
fn taskmanager(index: usize) -> Value {
    let name = format!("clickstream-taskmanager-1-{}", index + 1);
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "flink-jobs",
            "labels": {
                "app": "clickstream",
                "component": "taskmanager",
                "type": "flink-native-kubernetes"
            },
            "ownerReferences": [{
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "name": "clickstream",
                "uid": "5b0c7a0e-1f3c-4d27-9d43-3c1f7a9e2b11",
                "controller": true,
                "blockOwnerDeletion": true
            }]
        },
        "spec": {
            "restartPolicy": "Never",
            "serviceAccountName": "flink",
            "serviceAccount": "flink",
            "schedulerName": "default-scheduler",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "enableServiceLinks": true,
            "preemptionPolicy": "PreemptLowerPriority",
            "priority": 0,
            "securityContext": {},
            "tolerations": [
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                 "effect": "NoExecute", "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists",
                 "effect": "NoExecute", "tolerationSeconds": 300}
            ],
            "containers": [
                {
                    "name": "log-shipper",
                    "image": "fluent/fluent-bit:3.1",
                    "resources": {
                        "requests": {"cpu": "100m", "memory": "64Mi"},
                        "limits": {"cpu": "100m", "memory": "64Mi"}
                    },
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File",
                    "imagePullPolicy": "IfNotPresent"
                },
                {
                    "name": "flink-main-container",
                    "image": "flink:1.20",
                    "imagePullPolicy": "IfNotPresent",
                    "args": ["bash", "-c", format!(
                        "kubernetes-taskmanager.sh -Dtaskmanager.resource-id='{name}'")],
                    "ports": [{"name": "rpc", "containerPort": 6122, "protocol": "TCP"}],
                    "resources": {
                        "requests": {"cpu": "2", "memory": "4Gi"},
                        "limits": {"cpu": "2", "memory": "4Gi"}
                    },
                    "volumeMounts": [{"name": "flink-config-volume", "mountPath": "/opt/flink/conf"}],
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File"
                }
            ],
            "volumes": [{
                "name": "flink-config-volume",
                "configMap": {"name": "flink-config-clickstream", "defaultMode": 420}
            }]
        },
        "status": {}
    })
}

/// A fresh, uuid-shaped uid per review (splitmix64), distinct in its leading characters.
fn uid(index: usize) -> String {
    let mut z = (index as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    format!(
        "{:08x}-{:04x}-4{:03x}-9{:03x}-{:012x}",
        z >> 32,
        (z >> 16) & 0xffff,
        z & 0xfff,
        index & 0xfff,
        index
    )
}

fn review(uid: &str, pod: &Value) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
            "requestResource": {"group": "", "version": "v1", "resource": "pods"},
            "name": pod["metadata"]["name"],
            "namespace": "flink-jobs",
            "operation": "CREATE",
            "userInfo": {"username": "system:serviceaccount:flink-jobs:flink"},
            "object": pod,
            "oldObject": null,
            "dryRun": false,
            "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}
        }
    }))
    .expect("review encodes")
}

/// Where each pod of the burst landed, in arrival order.
struct Placement {
    label: &'static str,
    nodes: Vec<String>,
}

struct Figures {
    hottest: f64,
    /// Pods sent to nodes already at least `BUSY` before the burst: what the webhook exists to stop.
    onto_busy: usize,
    hottest_node: String,
    distinct: usize,
    most_pods: usize,
    most_pods_node: String,
}

fn figures(specs: &[NodeSpec], placement: &Placement) -> Figures {
    let mut pods: BTreeMap<&str, usize> = BTreeMap::new();
    for node in &placement.nodes {
        *pods.entry(node.as_str()).or_default() += 1;
    }
    let cpu_after = |s: &NodeSpec| {
        s.busy + pods.get(s.name.as_str()).copied().unwrap_or(0) as f64 * TM_CORES / NODE_CORES
    };
    let hottest = specs
        .iter()
        .max_by(|a, b| cpu_after(a).total_cmp(&cpu_after(b)))
        .expect("nodes");
    let (most_node, most) = pods
        .iter()
        .max_by_key(|(name, n)| (**n, std::cmp::Reverse(**name)))
        .expect("pods placed");
    let onto_busy = specs
        .iter()
        .filter(|s| s.busy >= BUSY)
        .map(|s| pods.get(s.name.as_str()).copied().unwrap_or(0))
        .sum();
    Figures {
        hottest: cpu_after(hottest),
        onto_busy,
        hottest_node: hottest.name.clone(),
        distinct: pods.len(),
        most_pods: *most,
        most_pods_node: most_node.to_string(),
    }
}

fn report(specs: &[NodeSpec], placement: &Placement) -> f64 {
    let f = figures(specs, placement);
    let before = |name: &str| {
        specs
            .iter()
            .find(|s| s.name == name)
            .map_or(0.0, |s| s.busy)
    };
    println!(
        "{:<21} hottest node after burst {:5.1}% ({}, {:.0}% before) | {:2} distinct nodes | {:2} pods onto nodes >= {:.0}% busy | most pods on one node: {} ({}, {:.0}% before)",
        placement.label,
        f.hottest * 100.0,
        f.hottest_node,
        before(&f.hottest_node) * 100.0,
        f.distinct,
        f.onto_busy,
        BUSY * 100.0,
        f.most_pods,
        f.most_pods_node,
        before(&f.most_pods_node) * 100.0,
    );
    f.hottest
}

fn place(nodes: &mut [ModelNode], pod: &Pod) -> String {
    let name = schedule(pod, nodes)
        .unwrap_or_else(|| panic!("pod {:?} would stay Pending", pod.metadata.name.as_deref()));
    nodes
        .iter_mut()
        .find(|n| n.name == name)
        .expect("scheduled onto a known node")
        .add_pod(pod);
    name
}

/// The product: each review through the admission path, its patch applied, the pod scheduled by
/// the model; with `bind_feedback`, the ledger hears where the pod was bound, as the pod watcher
/// tells it.
fn webhook(specs: &[NodeSpec], bind_feedback: bool) -> Placement {
    let config = Arc::new(Config::default());
    let store = Arc::new(ViewStore::new(config.placement.clone()));
    store.publish_snapshot(snapshot(specs));
    let ledger = Arc::new(Mutex::new(Ledger::new(config.inflight.ttl)));
    let admission = Admission::new(config.clone(), store.clone(), ledger.clone());

    let mut nodes = model_nodes(specs);
    let mut placed = Vec::with_capacity(PODS);
    let mut ids = HashSet::new();
    for i in 0..PODS {
        let object = taskmanager(i);
        let answer = admission
            .review_bytes(&review(&uid(i), &object))
            .expect("review is well formed");
        let response = &answer.review.response;
        assert!(response.allowed, "pod {i} rejected");
        let encoded = response
            .patch
            .as_deref()
            .unwrap_or_else(|| panic!("pod {i} not patched: {:?}", response.warnings));
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .expect("patch is base64");
        let patch: json_patch::Patch = serde_json::from_slice(&bytes).expect("patch is JSONPatch");
        let mut doc = object;
        json_patch::patch(&mut doc, &patch.0).expect("patch applies to the pod");
        let pod: Pod = serde_json::from_value(doc).expect("patched object is a Pod");

        let node = place(&mut nodes, &pod);
        let note = pod
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(ANNOTATION))
            .and_then(|text| DecisionNote::parse(text))
            .expect("decision annotation");
        assert!(ids.insert(note.id.clone()), "ledger id {} reused", note.id);
        if bind_feedback {
            assert!(ledger.lock().expect("ledger").bind(&note.id, &node));
        }
        placed.push(node);
    }
    Placement {
        label: if bind_feedback {
            "webhook"
        } else {
            "webhook without bind"
        },
        nodes: placed,
    }
}

/// Every pod prefers the same single coolest node (weight 100): what a metrics-aware scorer
/// without in-flight accounting amounts to.
fn coolest_node_for_all(specs: &[NodeSpec]) -> Placement {
    let mut nodes = model_nodes(specs);
    let probe: Pod = serde_json::from_value(taskmanager(0)).expect("pod");
    let coolest = specs
        .iter()
        .filter(|s| {
            let node = nodes.iter().find(|n| n.name == s.name).expect("node");
            node_affinity_filter(&probe, node) && fits_resources(&probe, node)
        })
        .min_by(|a, b| a.busy.total_cmp(&b.busy))
        .expect("an eligible node")
        .name
        .clone();
    let placed = (0..PODS)
        .map(|i| {
            let mut object = taskmanager(i);
            object["spec"]["affinity"] = json!({"nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [{
                    "weight": 100,
                    "preference": {"matchFields": [
                        {"key": "metadata.name", "operator": "In", "values": [coolest]}
                    ]}
                }]
            }});
            let pod: Pod = serde_json::from_value(object).expect("pod");
            place(&mut nodes, &pod)
        })
        .collect();
    Placement {
        label: "coolest node for all",
        nodes: placed,
    }
}

/// Water-filling: each pod on the node with the lowest real CPU so far that can take it.
fn ideal(specs: &[NodeSpec]) -> Placement {
    let mut nodes = model_nodes(specs);
    let mut cpu: Vec<f64> = specs.iter().map(|s| s.busy).collect();
    let placed = (0..PODS)
        .map(|i| {
            let pod: Pod = serde_json::from_value(taskmanager(i)).expect("pod");
            let best = (0..nodes.len())
                .filter(|&k| {
                    node_affinity_filter(&pod, &nodes[k]) && fits_resources(&pod, &nodes[k])
                })
                .min_by(|&a, &b| {
                    cpu[a]
                        .total_cmp(&cpu[b])
                        .then_with(|| nodes[a].name.cmp(&nodes[b].name))
                })
                .expect("some node fits");
            cpu[best] += TM_CORES / NODE_CORES;
            nodes[best].add_pod(&pod);
            nodes[best].name.clone()
        })
        .collect();
    Placement {
        label: "ideal water-filling",
        nodes: placed,
    }
}

#[test]
fn burst_of_taskmanagers_spreads_close_to_ideal() {
    let specs = cluster();
    let measured_max = specs.iter().map(|s| s.busy).fold(0.0, f64::max);
    println!(
        "{PODS} TaskManagers ({TM_CORES} cores each) onto {NODES} nodes of {NODE_CORES} cores; hottest before: {:.1}%",
        measured_max * 100.0
    );
    let steered = webhook(&specs, true);
    let baseline = report(&specs, &coolest_node_for_all(&specs));
    let with_bind = report(&specs, &steered);
    let without_bind = report(&specs, &webhook(&specs, false));
    let best = report(&specs, &ideal(&specs));
    let onto_busy = steered
        .nodes
        .iter()
        .filter(|n| specs.iter().any(|s| &s.name == *n && s.busy >= BUSY))
        .count();
    assert_eq!(
        onto_busy, 0,
        "webhook sent {onto_busy} TaskManagers onto nodes already >= 70% busy"
    );

    assert!(
        with_bind - best <= 0.10,
        "webhook leaves the hottest node at {:.1}%, ideal {:.1}%",
        with_bind * 100.0,
        best * 100.0
    );
    assert!(
        baseline - with_bind >= 0.10,
        "webhook ({:.1}%) not clearly better than one coolest node for all ({:.1}%)",
        with_bind * 100.0,
        baseline * 100.0
    );
    assert!(
        without_bind - best <= 0.10,
        "without bind feedback the hottest node reaches {:.1}%, ideal {:.1}%",
        without_bind * 100.0,
        best * 100.0
    );
}
