//! The scheduler model (`placement_webhook::scheduler`) against the real kube-scheduler of the
//! pinned release, on random clusters and pods from a fixed seed: the node the real scheduler
//! binds must be one the model finds feasible and scores highest (ties allowed), and a pod the
//! real scheduler leaves unschedulable must have no feasible node in the model.
//!
//! One control plane serves every case. A case is a cluster (its Nodes labelled with the
//! cluster's number, the previous cluster's Nodes and pods deleted first) with pods already
//! bound by `spec.nodeName`, then pods created one at a time, each waited for (bound, or
//! PodScheduled False with reason Unschedulable) and compared with the model fed what the
//! apiserver holds. A bound pod stays, so the next pod sees it; an unschedulable one is deleted
//! before the next is created.
//!
//! The scheduler's Node informer is not ordered with its Pod informer: before a cluster's first
//! pod, a probe pod that fits no Node of the cluster by cpu (and tolerates everything) must be
//! reported unschedulable on exactly this cluster's Nodes ("0/N nodes are available: N
//! Insufficient cpu"), so the scheduler's snapshot holds them and no Node of an earlier cluster.
//! Pods are one informer: what was created before a pod is in the scheduler's cache when the
//! pod is scheduled.
//!
//! The real scheduler runs its default profile with `percentageOfNodesToScore: 100` (every
//! feasible node is scored, as in the model; see [`SCHEDULER_CONFIG`]), and the model scores
//! NodeResourcesBalancedAllocation by v1.36's formula ([`model_config`]). Nodes report no
//! images, so ImageLocality scores every node 0; no pod has a priority, so preemption finds no
//! victim; no Service or ReplicaSet selects the pods, so PodTopologySpread's default constraints
//! do not apply.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};

use placement_webhook::config::scheduler::{BalancedAllocationFormula, SchedulerConfig};
use placement_webhook::inventory::nodes::node_facts;
use placement_webhook::scheduler::{
    ClusterPods, ExistingPod, Labels, ModelNode, NodeScore, PodFacts, PodFilters, PodRequests,
    filter_with, score_with,
};

use crate::fixture::serial;
use crate::support::kube::{ControlPlane, Options};

const SEED: u64 = 0x0046_D1FF_5EED;
const CLUSTERS: usize = 100;
const PODS_PER_CLUSTER: usize = 5;

/// The real scheduler's profile: the default one (NodeResourcesBalancedAllocation included,
/// which v1.36 scores by the change in balance the pod brings, kubernetes#135573), scoring
/// every feasible node.
const SCHEDULER_CONFIG: &str = "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: false
percentageOfNodesToScore: 100
";

/// The model of [`SCHEDULER_CONFIG`] as run by the pinned v1.36 scheduler: the default profile,
/// every feasible node scored, BalancedAllocation by v1.36's formula. With v1.35's
/// (`BalancedAllocationFormula::WithPod`) 20 of the 500 pods of this seed bind to a node the
/// model scores below its best.
fn model_config() -> SchedulerConfig {
    SchedulerConfig {
        percentage_of_nodes_to_score: 100,
        balanced_allocation_formula: BalancedAllocationFormula::ChangeInBalance,
        ..SchedulerConfig::default()
    }
}

/// The namespaces (and their `team` label) pods are created in.
const NAMESPACES: [(&str, &str); 2] = [("diff-a", "a"), ("diff-b", "b")];
const APPS: [&str; 4] = ["web", "db", "cache", "flink"];
const ROLES: [&str; 2] = ["main", "side"];
const ZONES: [&str; 3] = ["zone-a", "zone-b", "zone-c"];
const ZONE: &str = "topology.kubernetes.io/zone";
/// An extended resource some Nodes have and some pods request (requests equal to limits).
const GPU: &str = "example.com/gpu";
const HOSTNAME: &str = "kubernetes.io/hostname";
/// Every Node of cluster `c` carries this label with value `c`.
const CLUSTER_LABEL: &str = "differential.placement-webhook.io/cluster";

use crate::support::rng::Rng;

// ---- generated objects ----

fn node_json(rng: &mut Rng, cluster: usize, name: &str, zones: usize, zoneless: bool) -> Value {
    let mut labels = serde_json::Map::new();
    labels.insert(HOSTNAME.into(), json!(name));
    labels.insert(CLUSTER_LABEL.into(), json!(cluster.to_string()));
    if !(zoneless && rng.chance(25)) {
        labels.insert(ZONE.into(), json!(ZONES[rng.below(zones)]));
    }
    if rng.chance(50) {
        labels.insert("disk".into(), json!(rng.pick(&["ssd", "hdd"])));
    }
    if rng.chance(80) {
        labels.insert(
            "tier".into(),
            json!(rng.pick(&["gold", "silver", "bronze"])),
        );
    }
    if rng.chance(70) {
        labels.insert(
            "cores".into(),
            json!(rng.pick(&[8, 16, 32, 64]).to_string()),
        );
    }
    let mut taints = Vec::new();
    if rng.chance(12) {
        taints.push(
            json!({"key": "dedicated", "value": rng.pick(&["flink", "spark"]),
            "effect": "NoSchedule"}),
        );
    }
    if rng.chance(20) {
        taints.push(json!({"key": "prefer-not", "value": rng.pick(&["a", "b"]),
            "effect": "PreferNoSchedule"}));
    }
    if rng.chance(8) {
        taints.push(json!({"key": "spot", "effect": "PreferNoSchedule"}));
    }
    let mut resources = json!({
        "cpu": format!("{}m", rng.range(4, 64) * 500),
        "memory": format!("{}Mi", rng.range(4, 128) * 1024),
        "pods": rng.pick(&[3, 5, 8, 16, 110]).to_string(),
    });
    if rng.chance(30) {
        resources[GPU] = json!(rng.range(1, 4).to_string());
    }
    let cordoned = rng.chance(10);
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": {"unschedulable": cordoned, "taints": taints},
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                "message": "created by the test"}],
        },
    })
}

/// Requests: mostly both cpu and memory, sometimes one omitted (the non-zero defaults score it),
/// now and then a large one.
fn requests(rng: &mut Rng, big: u64) -> Value {
    let mut r = serde_json::Map::new();
    if rng.chance(88) {
        let milli = if rng.chance(big) {
            rng.range(8, 40) * 1000
        } else {
            rng.range(1, 60) * 50
        };
        r.insert("cpu".into(), json!(format!("{milli}m")));
    }
    if rng.chance(88) {
        let mi = if rng.chance(big) {
            rng.range(32, 160) * 1024
        } else {
            rng.range(1, 48) * 128
        };
        r.insert("memory".into(), json!(format!("{mi}Mi")));
    }
    Value::Object(r)
}

fn pod_json(name: &str, labels: Value, spec: serde_json::Map<String, Value>) -> Value {
    let mut spec = spec;
    spec.insert("terminationGracePeriodSeconds".into(), json!(0));
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": labels}, "spec": spec})
}

fn container(requests: Value) -> Value {
    json!([{"name": "main", "image": "busybox", "resources": {"requests": requests}}])
}

/// The pod's containers: one or two, sometimes an init container and a sidecar (a restartable
/// init container), now and then a GPU; the requests the scheduler sums as upstream's
/// `resourcehelper.PodRequests` does.
fn containers(rng: &mut Rng, big: u64, spec: &mut serde_json::Map<String, Value>) {
    let mut main = vec![json!({"name": "main", "image": "busybox",
        "resources": {"requests": requests(rng, big)}})];
    if rng.chance(15) {
        main.push(json!({"name": "second", "image": "busybox",
            "resources": {"requests": requests(rng, 0)}}));
    }
    if rng.chance(8) {
        let gpus = rng.range(1, 2).to_string();
        main[0]["resources"]["limits"] = json!({GPU: gpus});
        main[0]["resources"]["requests"][GPU] = json!(gpus);
    }
    spec.insert("containers".into(), Value::Array(main));
    let mut init = Vec::new();
    if rng.chance(12) {
        init.push(json!({"name": "init", "image": "busybox",
            "resources": {"requests": requests(rng, big)}}));
    }
    if rng.chance(12) {
        init.push(
            json!({"name": "sidecar", "image": "busybox", "restartPolicy": "Always",
            "resources": {"requests": requests(rng, 0)}}),
        );
    }
    if !init.is_empty() {
        spec.insert("initContainers".into(), Value::Array(init));
    }
}

fn app_selector(rng: &mut Rng) -> Value {
    if rng.chance(75) {
        json!({"matchLabels": {"app": rng.pick(&APPS)}})
    } else {
        json!({"matchExpressions": [{"key": "app", "operator": "In",
            "values": rng.some(&APPS, 2)}]})
    }
}

/// A pod (anti-)affinity term: apps by label, hostname or zone, in the pod's own namespace or
/// in namespaces listed or selected.
fn pod_term(rng: &mut Rng) -> Value {
    let mut term = json!({
        "labelSelector": app_selector(rng),
        "topologyKey": if rng.chance(50) { HOSTNAME } else { ZONE },
    });
    match rng.below(8) {
        0 => term["namespaces"] = json!([rng.pick(&NAMESPACES).0]),
        1 => term["namespaceSelector"] = json!({}),
        2 => term["namespaceSelector"] = json!({"matchLabels": {"team": "b"}}),
        _ => {}
    }
    term
}

fn weighted_pod_terms(rng: &mut Rng) -> Value {
    let n = rng.range(1, 2);
    Value::Array(
        (0..n)
            .map(|_| json!({"weight": rng.range(1, 100), "podAffinityTerm": pod_term(rng)}))
            .collect(),
    )
}

/// Pod affinity and anti-affinity, each required and/or preferred; `None` when the dice say no.
fn pod_affinity(rng: &mut Rng, chance: u64) -> serde_json::Map<String, Value> {
    let mut affinity = serde_json::Map::new();
    for (kind, required_chance) in [("podAffinity", 35), ("podAntiAffinity", 50)] {
        if !rng.chance(chance) {
            continue;
        }
        let mut part = serde_json::Map::new();
        if rng.chance(required_chance) {
            part.insert(
                "requiredDuringSchedulingIgnoredDuringExecution".into(),
                json!([pod_term(rng)]),
            );
        }
        if part.is_empty() || rng.chance(50) {
            part.insert(
                "preferredDuringSchedulingIgnoredDuringExecution".into(),
                weighted_pod_terms(rng),
            );
        }
        affinity.insert(kind.into(), Value::Object(part));
    }
    affinity
}

fn labels(rng: &mut Rng) -> Value {
    json!({"app": rng.pick(&APPS), "role": rng.pick(&ROLES)})
}

/// A pod already running on `node`, placed there by `spec.nodeName`.
fn bound_json(rng: &mut Rng, name: &str, node: &str) -> Value {
    let labels = labels(rng);
    let mut spec = serde_json::Map::new();
    spec.insert("nodeName".into(), json!(node));
    containers(rng, 0, &mut spec);
    let affinity = pod_affinity(rng, 12);
    if !affinity.is_empty() {
        spec.insert("affinity".into(), Value::Object(affinity));
    }
    pod_json(name, labels, spec)
}

fn node_requirement(rng: &mut Rng, nodes: &[String]) -> Value {
    match rng.below(10) {
        8 => json!({"key": "cores", "operator": "Gt", "values": [rng.pick(&["8", "16", "32"])]}),
        9 => json!({"key": "cores", "operator": "Lt", "values": [rng.pick(&["16", "64"])]}),
        0 => json!({"key": "tier", "operator": "In", "values": rng.some(&["gold", "silver"], 2)}),
        1 => json!({"key": "tier", "operator": "NotIn", "values": ["bronze"]}),
        2 => json!({"key": "disk", "operator": "Exists"}),
        3 => json!({"key": "disk", "operator": "DoesNotExist"}),
        4 => json!({"key": ZONE, "operator": "In", "values": rng.some(&ZONES, 2)}),
        5 => json!({"key": HOSTNAME, "operator": "NotIn", "values": rng.some(nodes, 3)}),
        6 => json!({"key": HOSTNAME, "operator": "In", "values": rng.some(nodes, 4)}),
        _ => json!({"key": "disk", "operator": "In", "values": ["ssd"]}),
    }
}

fn node_term(rng: &mut Rng, nodes: &[String]) -> Value {
    if rng.chance(10) {
        return json!({"matchFields": [{"key": "metadata.name",
            "operator": rng.pick(&["In", "NotIn"]), "values": [rng.pick(nodes)]}]});
    }
    let n = rng.range(1, 2);
    json!({"matchExpressions": (0..n).map(|_| node_requirement(rng, nodes)).collect::<Vec<_>>()})
}

/// Preferred node affinity: mostly as the webhook writes it (weight 100 on one node by
/// hostname, 20 on a few others, sometimes 10 on every node but a few hot ones), else a few
/// random terms.
fn preferred_node_terms(rng: &mut Rng, nodes: &[String]) -> Value {
    if rng.chance(60) {
        let count = 1 + rng.range(1, 4) as usize;
        let picked = rng.some(nodes, count);
        let mut terms = vec![json!({"weight": 100, "preference": {"matchExpressions": [
            {"key": HOSTNAME, "operator": "In", "values": [picked[0]]}]}})];
        if picked.len() > 1 {
            terms.push(json!({"weight": 20, "preference": {"matchExpressions": [
                {"key": HOSTNAME, "operator": "In", "values": picked[1..]}]}}));
        }
        if rng.chance(30) {
            terms.push(json!({"weight": 10, "preference": {"matchExpressions": [
                {"key": HOSTNAME, "operator": "NotIn", "values": rng.some(nodes, 3)}]}}));
        }
        return Value::Array(terms);
    }
    let n = rng.range(1, 3);
    Value::Array(
        (0..n)
            .map(|_| json!({"weight": rng.range(1, 100), "preference": node_term(rng, nodes)}))
            .collect(),
    )
}

fn tolerations(rng: &mut Rng) -> Value {
    let all = [
        json!({"key": "dedicated", "operator": "Equal", "value": "flink", "effect": "NoSchedule"}),
        json!({"key": "dedicated", "operator": "Exists"}),
        json!({"key": "prefer-not", "operator": "Exists", "effect": "PreferNoSchedule"}),
        json!({"key": "prefer-not", "operator": "Equal", "value": "a"}),
        json!({"key": "spot", "operator": "Exists"}),
        json!({"key": "node.kubernetes.io/unschedulable", "operator": "Exists",
            "effect": "NoSchedule"}),
        json!({"operator": "Exists"}),
    ];
    let n = rng.range(1, 2) as usize;
    Value::Array(rng.some(&all, n))
}

fn spread_constraints(rng: &mut Rng, own_app: &str) -> Value {
    // Two constraints may not share a (topologyKey, whenUnsatisfiable) pair: one per key.
    let keys = if rng.chance(50) {
        [ZONE, HOSTNAME]
    } else {
        [HOSTNAME, ZONE]
    };
    let n = rng.range(1, 2) as usize;
    Value::Array(
        keys[..n]
            .iter()
            .map(|&key| {
                let hard = rng.chance(50);
                let selector = if rng.chance(60) {
                    json!({"matchLabels": {"app": own_app}})
                } else {
                    app_selector(rng)
                };
                let mut c = json!({
                    "maxSkew": rng.range(1, 3),
                    "topologyKey": key,
                    "whenUnsatisfiable": if hard { "DoNotSchedule" } else { "ScheduleAnyway" },
                    "labelSelector": selector,
                });
                if hard && rng.chance(15) {
                    c["minDomains"] = json!(rng.range(2, 4));
                }
                if rng.chance(15) {
                    c["nodeAffinityPolicy"] = json!("Ignore");
                }
                if rng.chance(15) {
                    c["nodeTaintsPolicy"] = json!("Honor");
                }
                if rng.chance(10) {
                    c["matchLabelKeys"] = json!(["role"]);
                }
                c
            })
            .collect(),
    )
}

/// A pod for the scheduler, and the namespace to create it in.
fn target_json(rng: &mut Rng, name: &str, nodes: &[String]) -> (&'static str, Value) {
    let namespace = rng.pick(&NAMESPACES).0;
    let labels = labels(rng);
    let own_app = labels["app"].as_str().unwrap_or_default().to_string();
    let mut spec = serde_json::Map::new();
    containers(rng, 5, &mut spec);
    if rng.chance(15) {
        let (key, value) = *rng.pick(&[("disk", "ssd"), ("tier", "gold"), (ZONE, "zone-a")]);
        spec.insert("nodeSelector".into(), json!({key: value}));
    }
    let mut node_affinity = serde_json::Map::new();
    if rng.chance(20) {
        let n = rng.range(1, 2);
        let terms: Vec<Value> = (0..n).map(|_| node_term(rng, nodes)).collect();
        node_affinity.insert(
            "requiredDuringSchedulingIgnoredDuringExecution".into(),
            json!({"nodeSelectorTerms": terms}),
        );
    }
    if rng.chance(60) {
        node_affinity.insert(
            "preferredDuringSchedulingIgnoredDuringExecution".into(),
            preferred_node_terms(rng, nodes),
        );
    }
    let mut affinity = pod_affinity(rng, 30);
    if !node_affinity.is_empty() {
        affinity.insert("nodeAffinity".into(), Value::Object(node_affinity));
    }
    if !affinity.is_empty() {
        spec.insert("affinity".into(), Value::Object(affinity));
    }
    if rng.chance(35) {
        spec.insert("tolerations".into(), tolerations(rng));
    }
    if rng.chance(35) {
        spec.insert(
            "topologySpreadConstraints".into(),
            spread_constraints(rng, &own_app),
        );
    }
    (namespace, pod_json(name, labels, spec))
}

// ---- the real scheduler ----

#[derive(Debug, Clone, PartialEq)]
enum Outcome {
    Bound(String),
    /// The PodScheduled condition's message.
    Unschedulable(String),
}

/// Waits until the scheduler binds the pod or reports it unschedulable (30 s at most).
async fn outcome(api: &Api<Pod>, name: &str) -> Outcome {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let pod = api.get(name).await.expect("get pod");
        if let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.clone()) {
            return Outcome::Bound(node);
        }
        let unschedulable = pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .find(|c| {
                c.type_ == "PodScheduled"
                    && c.status == "False"
                    && c.reason.as_deref() == Some("Unschedulable")
            });
        if let Some(c) = unschedulable {
            return Outcome::Unschedulable(c.message.clone().unwrap_or_default());
        }
        assert!(
            Instant::now() < deadline,
            "pod {name} neither bound nor unschedulable after 30 s"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// From "0/12 nodes are available: 3 Too many pods, 12 Insufficient cpu. preemption: ...":
/// (12, 12), the nodes in the scheduler's snapshot and those short of cpu.
fn probe_counts(message: &str) -> Option<(usize, usize)> {
    let rest = message.strip_prefix("0/")?;
    let (total, rest) = rest.split_once(" nodes are available: ")?;
    let reasons = rest.split(". ").next()?.trim_end_matches('.');
    let short = reasons
        .split(", ")
        .find_map(|r| r.strip_suffix(" Insufficient cpu"))?;
    Some((total.parse().ok()?, short.parse().ok()?))
}

/// Waits until the scheduler's snapshot holds exactly the `nodes` Nodes of `cluster` (see the
/// module's documentation).
async fn wait_snapshot(client: &Client, cluster: usize, nodes: usize) {
    let (namespace, _) = NAMESPACES[0];
    let api = Api::<Pod>::namespaced(client.clone(), namespace);
    for attempt in 0..100 {
        let name = format!("probe-{cluster}-{attempt}");
        let mut spec = serde_json::Map::new();
        spec.insert(
            "nodeSelector".into(),
            json!({CLUSTER_LABEL: cluster.to_string()}),
        );
        spec.insert("tolerations".into(), json!([{"operator": "Exists"}]));
        spec.insert("containers".into(), container(json!({"cpu": "1000"})));
        let probe = pod_json(&name, json!({"probe": "true"}), spec);
        create(client, namespace, &probe).await;
        let result = outcome(&api, &name).await;
        delete_now(&api, &name).await;
        match &result {
            Outcome::Unschedulable(m) if probe_counts(m) == Some((nodes, nodes)) => return,
            Outcome::Unschedulable(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            Outcome::Bound(node) => panic!("the probe was bound to {node}"),
        }
    }
    panic!("the scheduler never saw exactly the {nodes} nodes of cluster {cluster}");
}

async fn create(client: &Client, namespace: &str, pod: &Value) {
    let pod: Pod = serde_json::from_value(pod.clone()).expect("pod");
    Api::<Pod>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &pod)
        .await
        .unwrap_or_else(|e| panic!("create pod {:?}: {e}", pod.metadata.name));
}

async fn delete_now(api: &Api<Pod>, name: &str) {
    api.delete(name, &DeleteParams::default().grace_period(0))
        .await
        .expect("delete pod");
}

/// Deletes every pod of the namespaces and every Node of earlier clusters.
async fn clear(client: &Client) {
    let now = DeleteParams::default().grace_period(0);
    for (namespace, _) in NAMESPACES {
        Api::<Pod>::namespaced(client.clone(), namespace)
            .delete_collection(&now, &ListParams::default())
            .await
            .expect("delete pods");
    }
    Api::<Node>::all(client.clone())
        .delete_collection(&now, &ListParams::default().labels(CLUSTER_LABEL))
        .await
        .expect("delete nodes");
}

async fn create_all<K>(api: Api<K>, objects: Vec<Value>)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    futures::stream::iter(objects.into_iter().map(|o| {
        let api = api.clone();
        async move {
            let object: K = serde_json::from_value(o).expect("object");
            api.create(&PostParams::default(), &object)
                .await
                .map(|_| ())
        }
    }))
    .buffer_unordered(16)
    .try_collect::<Vec<()>>()
    .await
    .expect("create objects");
}

// ---- the model ----

/// What the model says about one pod, and a report of every node for a failure message.
struct Verdict {
    feasible: Vec<usize>,
    /// Each feasible node's scores, when there are two or more (one is chosen unscored).
    scores: Vec<NodeScore>,
    nodes: Vec<ModelNode>,
    report: String,
}

impl Verdict {
    fn best(&self) -> Vec<&str> {
        let best = self.scores.iter().map(NodeScore::total).max();
        match self.feasible.as_slice() {
            [only] => vec![self.nodes[*only].name.as_str()],
            _ => self
                .scores
                .iter()
                .filter(|s| Some(s.total()) == best)
                .map(|s| self.nodes[s.node].name.as_str())
                .collect(),
        }
    }
}

/// The model fed the cluster's Nodes, its bound pods but `target`, and `target` as stored.
fn model(
    nodes: &[Node],
    pods: &[Pod],
    target: &Pod,
    namespace_labels: &BTreeMap<String, Labels>,
) -> Verdict {
    let mut model_nodes: Vec<ModelNode> = nodes
        .iter()
        .map(|n| {
            let (name, facts) = node_facts(n);
            ModelNode {
                taints: facts.taints,
                unschedulable: facts.unschedulable,
                ..ModelNode::new(&name, facts.labels, facts.allocatable)
            }
        })
        .collect();
    let index: BTreeMap<String, usize> = model_nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.name.clone(), i))
        .collect();
    let mut existing = Vec::new();
    for pod in pods {
        let same = pod.metadata.name == target.metadata.name
            && pod.metadata.namespace == target.metadata.namespace;
        let node = pod.spec.as_ref().and_then(|s| s.node_name.as_ref());
        let Some(&i) = node.and_then(|n| index.get(n)) else {
            continue;
        };
        if same {
            continue;
        }
        model_nodes[i].add_pod(&PodRequests::of(pod));
        existing.push(ExistingPod::of(pod, i));
    }
    let config = model_config();
    let cluster = ClusterPods::new(&existing, namespace_labels);
    let facts = PodFacts::of(target);
    let filters = PodFilters::new(&facts, &model_nodes, &cluster);
    let verdicts: Vec<_> = model_nodes
        .iter()
        .map(|n| filter_with(&facts, n, &filters))
        .collect();
    let feasible: Vec<usize> = (0..model_nodes.len())
        .filter(|&i| verdicts[i].is_ok())
        .collect();
    let scores = if feasible.len() > 1 {
        score_with(&facts, &model_nodes, &feasible, &config, Some(&cluster))
    } else {
        Vec::new()
    };
    let mut report = String::new();
    for (i, n) in model_nodes.iter().enumerate() {
        let _ = write!(
            report,
            "  {} zone={:?} taints={:?} cordoned={} alloc={}m/{}Mi/{} req={}m/{}Mi/{} nz={}m/{}Mi: ",
            n.name,
            n.labels.get(ZONE),
            n.taints
                .iter()
                .map(|t| format!("{}={:?}:{}", t.key, t.value, t.effect))
                .collect::<Vec<_>>(),
            n.unschedulable,
            n.allocatable.milli_cpu,
            n.allocatable.memory >> 20,
            n.allocatable.pods,
            n.requested.milli_cpu,
            n.requested.memory >> 20,
            n.requested.pods,
            n.non_zero_milli_cpu,
            n.non_zero_memory >> 20,
        );
        match (&verdicts[i], scores.iter().find(|s| s.node == i)) {
            (Err(unfit), _) => {
                let _ = writeln!(report, "unfit {unfit:?}");
            }
            (Ok(()), Some(s)) => {
                let _ = writeln!(
                    report,
                    "total {} (affinity {} fit {} balanced {} taint {} spread {} pod-affinity {})",
                    s.total(),
                    s.node_affinity,
                    s.resources_fit,
                    s.balanced_allocation,
                    s.taint_toleration,
                    s.pod_topology_spread,
                    s.inter_pod_affinity
                );
            }
            (Ok(()), None) => {
                let _ = writeln!(report, "feasible");
            }
        }
    }
    Verdict {
        feasible,
        scores,
        nodes: model_nodes,
        report,
    }
}

/// How the cases went, to show the test compares something.
#[derive(Default, Debug)]
struct Tally {
    cases: usize,
    bound: usize,
    unschedulable: usize,
    /// Bound among two or more feasible nodes, the best a strict subset of them.
    decided_by_score: usize,
    disagreements: Vec<String>,
}

async fn run_cluster(
    client: &Client,
    rng: &mut Rng,
    cluster: usize,
    namespace_labels: &BTreeMap<String, Labels>,
    tally: &mut Tally,
) {
    clear(client).await;
    let n = rng.range(5, 40) as usize;
    let zones = rng.range(1, 3) as usize;
    let zoneless = rng.chance(15);
    let names: Vec<String> = (0..n).map(|i| format!("c{cluster:03}-n{i:02}")).collect();
    let nodes: Vec<Value> = names
        .iter()
        .map(|name| node_json(rng, cluster, name, zones, zoneless))
        .collect();
    create_all(Api::<Node>::all(client.clone()), nodes).await;
    let mut bound: BTreeMap<&str, Vec<Value>> = BTreeMap::new();
    for (i, node) in names.iter().enumerate() {
        for k in 0..rng.range(0, 3) {
            let namespace = rng.pick(&NAMESPACES).0;
            let pod = bound_json(rng, &format!("b{cluster:03}-{i:02}-{k}"), node);
            bound.entry(namespace).or_default().push(pod);
        }
    }
    for (namespace, pods) in bound {
        create_all(Api::<Pod>::namespaced(client.clone(), namespace), pods).await;
    }
    wait_snapshot(client, cluster, n).await;

    let node_api = Api::<Node>::all(client.clone());
    let in_cluster = ListParams::default().labels(&format!("{CLUSTER_LABEL}={cluster}"));
    for k in 0..PODS_PER_CLUSTER {
        let name = format!("t{cluster:03}-{k}");
        let (namespace, pod) = target_json(rng, &name, &names);
        let api = Api::<Pod>::namespaced(client.clone(), namespace);
        create(client, namespace, &pod).await;
        let real = outcome(&api, &name).await;
        let nodes = node_api.list(&in_cluster).await.expect("list nodes").items;
        let mut pods = Vec::new();
        for (ns, _) in NAMESPACES {
            let list = Api::<Pod>::namespaced(client.clone(), ns)
                .list(&ListParams::default())
                .await
                .expect("list pods");
            pods.extend(list.items);
        }
        let target = api.get(&name).await.expect("get pod");
        let verdict = model(&nodes, &pods, &target, namespace_labels);
        tally.cases += 1;
        let disagreement = match &real {
            Outcome::Bound(node) => {
                tally.bound += 1;
                let best = verdict.best();
                if verdict.feasible.len() > 1 && best.len() < verdict.feasible.len() {
                    tally.decided_by_score += 1;
                }
                (!best.contains(&node.as_str())).then(|| {
                    format!(
                        "bound to {node}; the model's best: {best:?} of {} feasible",
                        verdict.feasible.len()
                    )
                })
            }
            Outcome::Unschedulable(message) => {
                tally.unschedulable += 1;
                (!verdict.feasible.is_empty()).then(|| {
                    format!(
                        "unschedulable ({message}); the model finds {} feasible",
                        verdict.feasible.len()
                    )
                })
            }
        };
        if let Some(what) = disagreement {
            tally.disagreements.push(format!(
                "cluster {cluster} pod {namespace}/{name}: {what}\npod spec: {}\nnodes:\n{}",
                serde_json::to_string(&pod["spec"]).unwrap_or_default(),
                verdict.report
            ));
        }
        if matches!(real, Outcome::Unschedulable(_)) {
            delete_now(&api, &name).await;
        }
    }
}

async fn create_namespaces(client: &Client) -> BTreeMap<String, Labels> {
    let api = Api::<Namespace>::all(client.clone());
    for (name, team) in NAMESPACES {
        let ns: Namespace = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": {"team": team}},
        }))
        .expect("namespace");
        api.create(&PostParams::default(), &ns)
            .await
            .expect("create namespace");
    }
    api.list(&ListParams::default())
        .await
        .expect("list namespaces")
        .items
        .into_iter()
        .map(|ns| {
            (
                ns.metadata.name.unwrap_or_default(),
                ns.metadata.labels.unwrap_or_default(),
            )
        })
        .collect()
}

/// 500 pods on 100 random clusters: the real scheduler's choice is always among the model's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_agrees_with_the_real_scheduler_on_random_clusters() {
    let _serial = serial().await;
    let plane = ControlPlane::start(Options {
        scheduler: Some(SCHEDULER_CONFIG.to_string()),
        ..Options::default()
    })
    .await;
    let started = Instant::now();
    let client = plane.client().await;
    let namespace_labels = create_namespaces(&client).await;
    let mut rng = Rng(SEED);
    let mut tally = Tally::default();
    for cluster in 0..CLUSTERS {
        run_cluster(&client, &mut rng, cluster, &namespace_labels, &mut tally).await;
    }
    eprintln!(
        "differential: {} pods, {} bound ({} decided by score), {} unschedulable, {} \
         disagreements, {:.0?}",
        tally.cases,
        tally.bound,
        tally.decided_by_score,
        tally.unschedulable,
        tally.disagreements.len(),
        started.elapsed()
    );
    assert!(
        tally.disagreements.is_empty(),
        "{} of {} pods placed otherwise than the model says:\n\n{}\n\nscheduler log tail:\n{}",
        tally.disagreements.len(),
        tally.cases,
        tally.disagreements.join("\n\n"),
        {
            let log = plane.scheduler_log();
            let lines: Vec<&str> = log.lines().collect();
            lines[lines.len().saturating_sub(20)..].join("\n")
        }
    );
    assert_eq!(tally.cases, CLUSTERS * PODS_PER_CLUSTER);
    // The cases compare something: most pods bind where the scores (not the filters alone)
    // decide, and some find no node.
    assert!(
        tally.decided_by_score * 2 > tally.cases,
        "too few pods decided by score: {tally:?}"
    );
    assert!(tally.unschedulable > 0, "no unschedulable pod: {tally:?}");
}

#[test]
fn probe_message_counts() {
    let m = "0/12 nodes are available: 3 Too many pods, 12 Insufficient cpu. preemption: 0/12 \
             nodes are available: 12 No preemption victims found for incoming pod.";
    assert_eq!(probe_counts(m), Some((12, 12)));
    let stale = "0/20 nodes are available: 8 node(s) didn't match Pod's node affinity/selector, \
                 12 Insufficient cpu.";
    assert_eq!(probe_counts(stale), Some((20, 12)));
    assert_eq!(
        probe_counts("0/3 nodes are available: 3 node(s) were unschedulable."),
        None
    );
}
