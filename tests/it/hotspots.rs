//! `placement-webhook hotspots` end to end: the real binary on the embedded cluster and on a
//! snapshot file, its JSON against the library's report, its answers to bad input, and the
//! gauge a running server exposes on /metrics.

use crate::support;

use std::process::Command;

use placement_webhook::cli::hotspots::report_for;
use placement_webhook::config::Config;
use placement_webhook::metrics_source::embedded_example;
use serde_json::{Value, json};
use support::webhook::{self_signed_client, start, test_config};

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_placement-webhook"));
    // Hermetic: never the developer's cluster, whatever kubeconfig they have.
    c.env("RUST_LOG", "off")
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .env_remove("KUBERNETES_SERVICE_HOST");
    c
}

fn hotspots(args: &[&str]) -> (String, String) {
    let out = bin().arg("hotspots").args(args).output().expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    (String::from_utf8_lossy(&out.stdout).into_owned(), stderr)
}

#[test]
fn embedded_cluster_table_names_the_taskmanagers_on_hot_nodes() {
    let (table, stderr) = hotspots(&[]);
    assert!(stderr.contains("embedded example cluster"), "{stderr}");
    assert!(
        table.starts_with("hot nodes: 2 of 24 "),
        "the embedded cluster has two hot nodes:\n{table}"
    );
    assert!(
        table.contains("taskmanagers on hot nodes: 3 of 9; of the 4 the webhook steered: 0\n"),
        "{table}"
    );
    // One line per TaskManager on a hot node: namespace, job, node, pod, readings, why, steered.
    let rows: Vec<Vec<&str>> = table
        .lines()
        .filter(|l| l.contains("-taskmanager-"))
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows,
        [
            [
                "flink",
                "clickstream",
                "worker-06",
                "clickstream-taskmanager-1-1",
                "0.09",
                "0.92",
                "0.55",
                "network",
                "no"
            ],
            [
                "flink",
                "orders",
                "worker-03",
                "orders-taskmanager-1-1",
                "0.93",
                "0.45",
                "0.77",
                "cpu",
                "no"
            ],
            [
                "flink",
                "orders",
                "worker-03",
                "orders-taskmanager-1-2",
                "0.93",
                "0.45",
                "0.77",
                "cpu",
                "no"
            ],
        ]
    );
    // The job summary, most affected first.
    let jobs: Vec<&str> = table
        .lines()
        .skip_while(|l| !l.contains("STEERED ON HOT"))
        .skip(1)
        .collect();
    let jobs: Vec<Vec<&str>> = jobs
        .iter()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        jobs,
        [
            ["flink", "orders", "4", "2", "0", "0", "0"],
            ["flink", "clickstream", "3", "1", "2", "0", "0"],
            ["risk", "fraud-scoring", "2", "0", "2", "0", "0"],
        ]
    );
}

#[test]
fn json_is_the_library_report_with_stable_names() {
    let (stdout, _) = hotspots(&["--json"]);
    let cli: Value = serde_json::from_str(&stdout).expect("one JSON document");
    let library = report_for(
        &Config::default(),
        &embedded_example().expect("embedded"),
        None,
    );
    assert_eq!(cli, serde_json::to_value(&library).expect("json"));
    assert_eq!(
        cli["totals"],
        json!({"nodes": 24, "hot_nodes": 2, "taskmanagers": 9, "on_hot_nodes": 3,
               "steered": 4, "steered_on_hot_nodes": 0, "on_nodes_without_readings": 0})
    );
    let mut hottest = cli["hot_nodes"][0].clone();
    let heat = hottest
        .as_object_mut()
        .and_then(|o| o.remove("heat"))
        .and_then(|h| h.as_f64())
        .expect("heat");
    // The default weights: 0.6 CPU, 0.4 network.
    assert!((heat - (0.6 * 0.93 + 0.4 * 558318000.0 / 1250000000.0)).abs() < 1e-9);
    assert_eq!(
        hottest,
        json!({"node": "worker-03", "cpu": 0.93, "network": 558318000.0 / 1250000000.0,
               "memory": 0.769, "hot_dimensions": ["cpu"], "taskmanagers": 2, "steered": 0})
    );
    assert_eq!(
        cli["taskmanagers_on_hot_nodes"][0],
        json!({"namespace": "flink", "job": "clickstream", "node": "worker-06",
               "pod": "clickstream-taskmanager-1-1", "node_cpu": 0.088,
               "node_network": 1150000000.0 / 1250000000.0, "node_memory": 0.551,
               "hot_dimensions": ["network"], "steered": false})
    );
    assert_eq!(
        cli["thresholds"],
        json!({"cpu": 0.85, "network": 0.85, "memory": 0.95})
    );
    assert_eq!(cli["taken_at"], Value::Null);
}

#[test]
fn a_snapshot_file_with_pods_on_nodes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("snapshot.json");
    let snapshot = json!({
        "taken_at": "2026-11-23T10:00:00Z",
        "nodes": [
            {"name": "a", "cpu": 0.97},
            {"name": "b", "cpu": 0.20}
        ],
        "pods": [
            {"namespace": "etl", "pod": "nightly-taskmanager-1-1", "cpu_cores": 1,
             "labels": {"app": "nightly", "component": "taskmanager"}, "node": "a",
             "steered": true},
            {"namespace": "etl", "pod": "nightly-taskmanager-1-2", "cpu_cores": 1,
             "labels": {"app": "nightly", "component": "taskmanager"}, "node": "b"},
            {"namespace": "etl", "pod": "nightly-taskmanager-1-3", "cpu_cores": 1,
             "labels": {"app": "nightly", "component": "taskmanager"}, "node": "gone"}
        ]
    });
    std::fs::write(&path, snapshot.to_string()).expect("write");
    let path = path.to_str().expect("utf-8");
    let (stdout, _) = hotspots(&["--metrics-file", path, "--json"]);
    let cli: Value = serde_json::from_str(&stdout).expect("json");
    assert_eq!(cli["taken_at"], "2026-11-23T10:00:00Z");
    assert_eq!(
        cli["jobs"],
        json!([{"namespace": "etl", "job": "nightly", "taskmanagers": 3, "on_hot_nodes": 1,
                "steered": 1, "steered_on_hot_nodes": 1, "on_nodes_without_readings": 1}])
    );
    assert_eq!(
        cli["taskmanagers_on_hot_nodes"][0]["pod"],
        "nightly-taskmanager-1-1"
    );
    assert_eq!(cli["taskmanagers_on_hot_nodes"][0]["steered"], true);
    let (table, _) = hotspots(&["--metrics-file", path]);
    assert!(
        table.contains("taskmanagers on nodes without readings: 1\n"),
        "{table}"
    );
    assert!(
        table.contains("readings taken at 2026-11-23T10:00:00Z\n"),
        "{table}"
    );
}

#[test]
fn bad_input_gets_one_line_and_a_non_zero_exit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let garbage = dir.path().join("garbage.json");
    std::fs::write(&garbage, "{{{ not json").expect("write");
    let out_of_range = dir.path().join("range.json");
    std::fs::write(&out_of_range, r#"{"nodes": [{"name": "a", "cpu": 1.5}]}"#).expect("write");
    let bad_config = dir.path().join("config.yaml");
    std::fs::write(&bad_config, "placement: [not, a, map]\n").expect("write");
    let missing = dir.path().join("missing.json");
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec!["--metrics-file".into(), missing.display().to_string()],
            "cannot read",
        ),
        (
            vec!["--metrics-file".into(), garbage.display().to_string()],
            "not valid JSON",
        ),
        (
            vec!["--metrics-file".into(), out_of_range.display().to_string()],
            "busy fraction",
        ),
        (
            vec!["--config".into(), bad_config.display().to_string()],
            "config file",
        ),
    ];
    for (args, says) in cases {
        let out = bin().arg("hotspots").args(&args).output().expect("runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}: no report on bad input");
        let lines: Vec<&str> = stderr.lines().filter(|l| !l.starts_with("note:")).collect();
        assert_eq!(lines.len(), 1, "{args:?}: {stderr}");
        assert!(
            lines[0].starts_with("placement-webhook: ") && lines[0].contains(says),
            "{args:?}: {stderr}"
        );
    }
}

#[tokio::test]
async fn the_server_exposes_taskmanagers_on_hot_nodes_by_job() {
    // The example cluster as a snapshot file, no cluster access: its pods name their nodes.
    let running = start(test_config()).await;
    let reply = self_signed_client(&running).get("/metrics").await;
    running.stop().await;
    assert_eq!(reply.status, 200);
    let text = String::from_utf8(reply.body).expect("UTF-8");
    let mut series: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("placement_webhook_taskmanagers_on_hot_nodes{"))
        .collect();
    series.sort_unstable();
    assert_eq!(
        series,
        [
            r#"placement_webhook_taskmanagers_on_hot_nodes{namespace="flink",job="clickstream",steered="false"} 1"#,
            r#"placement_webhook_taskmanagers_on_hot_nodes{namespace="flink",job="clickstream",steered="true"} 0"#,
            r#"placement_webhook_taskmanagers_on_hot_nodes{namespace="flink",job="orders",steered="false"} 2"#,
            r#"placement_webhook_taskmanagers_on_hot_nodes{namespace="flink",job="orders",steered="true"} 0"#,
            r#"placement_webhook_taskmanagers_on_hot_nodes{namespace="risk",job="fraud-scoring",steered="false"} 0"#,
            r#"placement_webhook_taskmanagers_on_hot_nodes{namespace="risk",job="fraud-scoring",steered="true"} 0"#,
        ]
    );
    assert!(
        text.contains("# TYPE placement_webhook_taskmanagers_on_hot_nodes gauge\n"),
        "{text}"
    );
}
