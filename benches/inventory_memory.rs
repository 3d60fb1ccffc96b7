//! Memory of what the webhook keeps about the cluster: 5,000 nodes and 150,000 pods, listed the
//! way the apiserver pages them (500 a page, as kube's watcher asks), parsed and applied to the
//! ledger's occupancy exactly as the pod watch does, and the view built over the nodes. The
//! watch keeps each pod's labels and pod (anti-)affinity terms too (for PodTopologySpread and
//! InterPodAffinity), grouped by workload: half the jobs here carry a preferred anti-affinity.
//! Every pod is a running TaskManager, so each is also kept by job (what estimates a new pod's
//! load, and the `hotspots` report).
//!
//! `cargo bench --bench inventory_memory` prints the resident set before, after and at its
//! peak. Target: under 64 MiB.

use std::time::{Duration, Instant, SystemTime};

use k8s_openapi::api::core::v1::{Node, Pod};
use placement_webhook::config::Config;
use placement_webhook::inflight::ledger::Ledger;
use placement_webhook::inflight::world::World;
use placement_webhook::inventory::nodes::inventory_from;
use placement_webhook::inventory::pods::apply_pod_event;
use placement_webhook::snapshot::{LoadSnapshot, NodeLoad};
use placement_webhook::view::ClusterView;
use serde_json::{Value, json};

const NODES: usize = 5000;
const PODS: usize = 150_000;
const PAGE: usize = 500;

fn status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn node(i: usize) -> Value {
    let name = format!("worker-{i:05}");
    json!({
        "metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
            "node.kubernetes.io/instance-type": "m6i.8xlarge",
            "topology.kubernetes.io/zone": format!("zone-{}", i % 3), "node-pool": "flink"}},
        "spec": {"taints": if i.is_multiple_of(17) { json!([{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]) } else { json!([]) }},
        "status": {
            "allocatable": {"cpu": "31850m", "memory": "125Gi", "pods": "110", "ephemeral-storage": "95Gi"},
            "conditions": [{"type": "Ready", "status": "True"}],
            "addresses": [{"type": "InternalIP", "address": format!("10.{}.{}.{}", i / 65536, (i / 256) % 256, i % 256)}]
        }
    })
}

/// A TaskManager-like pod: what the list carries per pod is what costs parsing, not memory.
fn pod(i: usize) -> Value {
    let job = i / 30;
    json!({
        "metadata": {
            "name": format!("job-{job}-taskmanager-1-{}", i % 30),
            "namespace": format!("team-{}", job % 40),
            "uid": format!("{:08x}-0000-4000-8000-{:012x}", i, i),
            "creationTimestamp": "2026-11-23T10:00:00Z",
            "labels": {"app": format!("job-{job}"), "component": "taskmanager", "type": "flink-native-kubernetes"},
            "annotations": {"placement-webhook.io/decision": format!(
                "id={i:016x} mode=affinity cpu=2 net=0 nodes=worker-{:05}:1.00 avoid=0 age=4s", i % NODES)}
        },
        "spec": {
            "nodeName": format!("worker-{:05}", i % NODES),
            "containers": [
                {"name": "log-shipper", "image": "fluent/fluent-bit:3.1",
                 "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}},
                {"name": "flink-main-container", "image": "flink:1.20",
                 "args": ["bash", "-c", "kubernetes-taskmanager.sh"],
                 "resources": {"requests": {"cpu": "2", "memory": "4Gi"}, "limits": {"cpu": "2", "memory": "4Gi"}}}
            ],
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}],
            "affinity": if job.is_multiple_of(2) { json!({"podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "podAffinityTerm": {
                    "topologyKey": "kubernetes.io/hostname",
                    "labelSelector": {"matchLabels": {"app": format!("job-{job}")}}}}]}}) } else { json!(null) }
        },
        "status": {"phase": "Running"}
    })
}

fn main() {
    // `cargo bench` passes `--bench`; anything else (e.g. `cargo test --benches`) only checks
    // that it builds and runs on a small list.
    let full = std::env::args().any(|a| a == "--bench");
    let (nodes, pods) = if full { (NODES, PODS) } else { (50, 1500) };
    let before = status_kib("VmRSS:");
    let started = Instant::now();

    let node_objects: Vec<Node> = (0..nodes)
        .map(|i| serde_json::from_value(node(i)).expect("node"))
        .collect();
    let arcs: Vec<std::sync::Arc<Node>> =
        node_objects.into_iter().map(std::sync::Arc::new).collect();
    let inventory = inventory_from(&arcs);
    drop(arcs);
    let snapshot = LoadSnapshot {
        window_samples: Default::default(),
        taken_at: Some(SystemTime::now()),
        pods: Vec::new(),
        nodes: (0..nodes)
            .map(|i| NodeLoad::new(format!("worker-{i:05}"), (i % 90) as f64 / 100.0))
            .collect(),
    };
    let config = Config::default();
    let view = ClusterView::build(&snapshot, Some(&inventory), &config.placement);

    let mut world = World::new(Ledger::new(Duration::from_secs(90)));
    for page in (0..pods).step_by(PAGE) {
        let items: Vec<Value> = (page..(page + PAGE).min(pods)).map(pod).collect();
        let body =
            serde_json::to_vec(&json!({"kind": "PodList", "apiVersion": "v1", "items": items}))
                .expect("list");
        let list: Value = serde_json::from_slice(&body).expect("list parses");
        for item in list["items"].as_array().into_iter().flatten() {
            let pod: Pod = serde_json::from_value(item.clone()).expect("pod");
            apply_pod_event(&mut world, &pod, false, Instant::now(), SystemTime::now());
        }
    }
    let after = status_kib("VmRSS:");
    let peak = status_kib("VmHWM:");
    println!(
        "{} nodes, {} pods ({} counted, {} label groups): RSS before {:.1} MiB, after {:.1} MiB, peak {:.1} MiB; {:.1} s",
        view.nodes.len(),
        pods,
        world.cluster.occupancy.pods(),
        world.cluster.groups.len(),
        mib(before),
        mib(after),
        mib(peak),
        started.elapsed().as_secs_f64()
    );
    assert_eq!(
        world.cluster.occupancy.pods(),
        pods,
        "every bound pod counted"
    );
    assert_eq!(
        world.cluster.groups.pods(),
        pods,
        "every bound pod's labels kept"
    );
    assert_eq!(
        world.cluster.running.len(),
        pods,
        "every running TaskManager kept"
    );
    std::hint::black_box((&view, &world, &inventory));
}
