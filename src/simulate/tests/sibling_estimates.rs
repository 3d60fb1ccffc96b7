//! The closed loop with jobs whose TaskManagers use something else than they request: charged
//! from their running siblings' measured load, the burst lands closer to ideal water-filling
//! (computed on real use) than charged by requests. Run with `--nocapture` for the table.

use std::collections::BTreeMap;

use crate::config::Config;
use crate::simulate::{Burst, Cluster, Figures, Method, Timing, figures, run};
use crate::snapshot::{LoadSnapshot, NodeLoad, PodReading};
use serde_json::{Value, json};

use crate::test_support::rng::Rng;

const NIC: f64 = 1.25e9;

/// 40 nodes of 16 cores with CPU and NIC loads spread over a wide range, 2 cores requested.
fn nodes(seed: u64) -> Vec<NodeLoad> {
    let mut rng = Rng(seed);
    (0..40)
        .map(|i| {
            let name = format!("worker-{:03}", (i * 17) % 40);
            let mut node = NodeLoad::new(name, rng.between(0.10, 0.75));
            node.cpu_capacity_cores = Some(16.0);
            node.network_bytes_per_second = Some(rng.between(0.05, 0.60) * NIC);
            node.network_capacity_bytes_per_second = Some(NIC);
            node.allocatable = BTreeMap::from([
                ("cpu".to_string(), "16".to_string()),
                ("memory".to_string(), "64Gi".to_string()),
                ("pods".to_string(), "110".to_string()),
            ]);
            node.requested = BTreeMap::from([
                ("cpu".to_string(), "2".to_string()),
                ("memory".to_string(), "4Gi".to_string()),
                ("pods".to_string(), "2".to_string()),
            ]);
            node
        })
        .collect()
}

/// A TaskManager of job `app` with these CPU request and limit.
fn taskmanager(app: &str, request: &str, limit: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": format!("{app}-taskmanager"),
            "namespace": "flink",
            "labels": {"app": app, "component": "taskmanager",
                       "type": "flink-native-kubernetes"}
        },
        "spec": {
            "containers": [{
                "name": "flink-main-container", "image": "flink:1.20",
                "resources": {"requests": {"cpu": request, "memory": "2Gi"},
                              "limits": {"cpu": limit, "memory": "2Gi"}}
            }]
        }
    })
}

/// Six running siblings of `app`, measured within a few percent of what each pod really uses.
fn siblings(app: &str, cpu: f64, network: f64) -> Vec<PodReading> {
    (0..6)
        .map(|i| {
            let wobble = 1.0 + 0.02 * (i as f64 - 2.5);
            PodReading {
                namespace: "flink".into(),
                pod: format!("{app}-taskmanager-running-{i}"),
                cpu_cores: cpu * wobble,
                network_bytes_per_second: Some(network * wobble),
                labels: BTreeMap::from([
                    ("app".to_string(), app.to_string()),
                    ("component".to_string(), "taskmanager".to_string()),
                ]),
                owner: None,
                running_secs: Some(3600.0),
                node: None,
                steered: false,
            }
        })
        .collect()
}

struct Scenario {
    name: &'static str,
    request: &'static str,
    limit: &'static str,
    /// What each TaskManager really uses.
    cpu: f64,
    network: f64,
    pods: usize,
}

/// The hottest node that received a pod, in its bottleneck: CPU or NIC, whichever is higher.
fn hottest(f: &Figures) -> f64 {
    f.hottest_cpu.max(f.hottest_nic.unwrap_or(0.0))
}

#[test]
fn sibling_estimates_land_closer_to_ideal_than_requests() {
    let scenarios = [
        Scenario {
            name: "over-provisioned: 30% of request",
            request: "2",
            limit: "2",
            cpu: 0.6,
            network: 0.0,
            pods: 120,
        },
        Scenario {
            name: "CPU-bound: at its limit, 3x request",
            request: "1",
            limit: "3",
            cpu: 3.0,
            network: 0.0,
            pods: 60,
        },
        Scenario {
            name: "network-heavy: 100 MB/s each",
            request: "1",
            limit: "1",
            cpu: 0.5,
            network: 1.0e8,
            pods: 80,
        },
    ];
    let config = Config::default();
    let mut missed = Vec::new();
    println!(
        "\n{:<38} {:>8} {:>8} {:>8}   (hottest node that received a pod, CPU or NIC)",
        "scenario", "ideal", "request", "siblings"
    );
    for (k, s) in scenarios.iter().enumerate() {
        let app = format!("job-{k}");
        let burst = Burst {
            pod: taskmanager(&app, s.request, s.limit),
            count: s.pods,
            cpu_cores: s.cpu,
            network_bytes_per_second: s.network,
            // The operator's flat network estimate: nothing per pod.
            configured_network: Some(0.0),
        };
        let base = LoadSnapshot {
            window_samples: Default::default(),
            taken_at: None,
            nodes: nodes(0x51b1 + k as u64),
            pods: Vec::new(),
        };
        let measured = LoadSnapshot {
            window_samples: Default::default(),
            pods: siblings(&app, s.cpu, s.network),
            ..base.clone()
        };
        let webhook = Method::Webhook(Timing::typical(1));
        let outcome = |snapshot: &LoadSnapshot, method: Method| {
            let cluster = Cluster::new(snapshot.clone(), &config);
            let o = run(&cluster, &config, &burst, method, 7);
            figures(&cluster, &burst, &o, 0.7)
        };
        let ideal = outcome(&base, Method::Ideal);
        let by_request = outcome(&base, webhook);
        let by_siblings = outcome(&measured, webhook);
        for f in [&ideal, &by_request, &by_siblings] {
            assert_eq!(f.pending, 0, "{}: {}", s.name, f.method);
        }
        for f in [&by_request, &by_siblings] {
            let steered: usize = f.landings.map_or(0, |l| l.iter().sum());
            assert_eq!(steered, s.pods, "{}: every pod steered", s.name);
        }
        let (i, r, e) = (hottest(&ideal), hottest(&by_request), hottest(&by_siblings));
        println!("{:<38} {i:>8.3} {r:>8.3} {e:>8.3}", s.name);
        if (e - i).abs() >= (r - i).abs() {
            missed.push(format!(
                "{}: siblings {e:.3} not closer to ideal {i:.3} than requests {r:.3}",
                s.name
            ));
        }
    }
    assert!(missed.is_empty(), "{missed:#?}");
}
