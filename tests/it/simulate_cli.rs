//! `placement-webhook simulate` end to end: the real binary, its JSON against the library's
//! closed loop (one code path), its picture parsed as XML, and its answers to bad input.

use std::process::Command;
use std::time::Duration;

use placement_webhook::cli::simulate::{self, Request};
use placement_webhook::config::Config;
use placement_webhook::metrics_source::embedded_example;
use placement_webhook::simulate::{Cluster, Method, Timing, figures, run};
use placement_webhook::snapshot::{LoadSnapshot, NodeLoad};
use serde_json::Value;

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_placement-webhook"));
    // Hermetic: never the developer's cluster, whatever kubeconfig they have.
    c.env("RUST_LOG", "off")
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .env_remove("KUBERNETES_SERVICE_HOST");
    c
}

fn request(pods: usize) -> Request {
    Request {
        pods,
        cpu_cores: 2.0,
        memory: "4Gi".into(),
        network_bytes_per_second: 0.0,
        pod: None,
        replicas: 1,
        first_share: None,
        forwarding: true,
        bind_lag: Duration::from_millis(10),
        seed: 1,
        listed_in_name_order: false,
    }
}

fn simulate_json(args: &[&str]) -> Value {
    let out = bin()
        .arg("simulate")
        .args(args)
        .arg("--json")
        .output()
        .expect("runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON document")
}

/// The CLI's figures are the library's closed loop for the same input, and the webhook row is
/// exactly what `simulate::run` gives.
fn assert_same_as_library(snapshot: LoadSnapshot, cli: &Value, pods: usize) {
    let config = Config::default();
    let report = simulate::simulate(snapshot.clone(), &config, &request(pods)).expect("runs");
    // Through the same text the CLI prints: serde_json reads some decimals back to the
    // neighbouring float (1.0150000000000001 as 1.015) unless built with `float_roundtrip`.
    let text = serde_json::to_string(&report).expect("json");
    assert_eq!(
        cli,
        &serde_json::from_str::<Value>(&text).expect("one JSON document")
    );
    let cluster = Cluster::new(snapshot, &config);
    let burst = simulate::burst_of(&request(pods)).expect("burst");
    let webhook = figures(
        &cluster,
        &burst,
        &run(
            &cluster,
            &config,
            &burst,
            Method::Webhook(Timing::typical(1)),
            1,
        ),
        config.placement.hot.cpu,
    );
    assert_eq!(
        cli["methods"][1]["hottest_cpu"].as_f64(),
        Some(webhook.hottest_cpu)
    );
    assert_eq!(cli["methods"][1]["method"], "webhook, bind lag 10ms");
    for key in [
        "hottest_cpu",
        "onto_busy",
        "nodes_used",
        "most_pods_on_one_node",
        "pending",
    ] {
        assert!(cli["methods"][0].get(key).is_some(), "{key} missing");
    }
}

#[test]
fn embedded_cluster_json_equals_the_library_loop() {
    let cli = simulate_json(&["--pods", "60"]);
    assert_eq!(cli["nodes"], 24);
    // worker-10 is cordoned, worker-12 tainted: the scheduler's filters turn the pod away.
    assert_eq!(cli["unfit_nodes"], 2);
    assert_eq!(cli["scenario"]["replicas"], 1);
    assert_eq!(cli["scenario"]["bind_lag_ms"], 10.0);
    assert!(cli["scenario"].get("first_share").is_none(), "round robin");
    assert_same_as_library(embedded_example().expect("embedded"), &cli, 60);
    // The webhook does better than the scheduler alone on this cluster.
    let hot = |i: usize| cli["methods"][i]["hottest_cpu"].as_f64().expect("number");
    assert!(hot(1) < hot(0), "webhook {} vs none {}", hot(1), hot(0));
}

fn generated(nodes: usize) -> LoadSnapshot {
    LoadSnapshot {
        window_samples: Default::default(),
        taken_at: None,
        pods: Vec::new(),
        nodes: (0..nodes)
            .map(|i| {
                let mut n = NodeLoad::new(format!("node-{i:04}"), ((i * 37) % 90) as f64 / 100.0);
                n.cpu_capacity_cores = Some(if i % 2 == 0 { 16.0 } else { 32.0 });
                n
            })
            .collect(),
    }
}

#[test]
fn generated_500_node_snapshot_json_equals_the_library_loop() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("cluster.json");
    let snapshot = generated(500);
    std::fs::write(&path, serde_json::to_string(&snapshot).expect("json")).expect("write");
    let cli = simulate_json(&[
        "--metrics-file",
        path.to_str().expect("utf-8"),
        "--pods",
        "300",
    ]);
    assert_eq!(cli["nodes"], 500);
    assert_same_as_library(snapshot, &cli, 300);
}

/// A text element's content, trimmed.
fn text_of<'a>(node: roxmltree::Node<'a, 'a>) -> String {
    node.text().unwrap_or_default().trim().to_string()
}

fn number(node: roxmltree::Node<'_, '_>, name: &str) -> f64 {
    node.attribute(name)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{name} of {node:?}"))
}

/// The points of a polyline.
fn points(node: roxmltree::Node<'_, '_>) -> Vec<(f64, f64)> {
    node.attribute("points")
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|xy| {
            let (x, y) = xy.split_once(',')?;
            Some((x.parse().ok()?, y.parse().ok()?))
        })
        .collect()
}

#[test]
fn the_picture_has_a_bar_per_node_and_the_threshold() {
    let dir = tempfile::tempdir().expect("tempdir");
    let svg = dir.path().join("burst.svg");
    let out = bin()
        .args(["simulate", "--pods", "40", "--svg"])
        .arg(&svg)
        .output()
        .expect("runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&svg).expect("svg written");
    let doc = roxmltree::Document::parse(&text).expect("the SVG is XML");
    let width = number(doc.root_element(), "width");
    let rects = |fill: &str| {
        doc.descendants()
            .filter(|n| n.has_tag_name("rect") && n.attribute("fill") == Some(fill))
            .count()
    };
    // One bar per node: grey where the pod could go, pale where it could not (worker-10 is
    // cordoned, worker-12 tainted); each colour once more as its legend swatch.
    assert_eq!(rects("#969696"), 22 + 1, "CPU-before bars");
    assert_eq!(rects("#E4E4E4"), 2 + 1, "nodes that could not take a pod");
    assert!(
        rects("#266EBF") > 1 && rects("#D64541") > 1,
        "added CPU drawn"
    );
    let texts: Vec<roxmltree::Node> = doc
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .collect();
    let find = |wanted: &str| texts.iter().copied().find(|t| text_of(*t) == wanted);

    // The legend.
    for entry in [
        "CPU before the burst",
        "added without the webhook",
        "added with the webhook",
        "ideal water-filling (CPU and NIC; no mark: no pod there)",
        "hot threshold (85% CPU)",
        "could not take a pod: tainted, cordoned",
        "NIC hot before the burst (the webhook avoids it)",
    ] {
        assert!(find(entry).is_some(), "legend entry {entry:?} missing");
    }
    // worker-06's NIC is hot (its CPU is not): marked over its bar, and once in the legend.
    let marks = doc
        .descendants()
        .filter(|n| n.has_tag_name("polygon") && n.attribute("fill") == Some("#E68C14"))
        .count();
    assert_eq!(marks, 1 + 1, "NIC-hot marks");

    // The hot threshold: one black line across the bars, its value written at its right end.
    let lines: Vec<Vec<(f64, f64)>> = doc
        .descendants()
        .filter(|n| {
            n.has_tag_name("polyline")
                && n.attribute("stroke") == Some("#000000")
                && n.attribute("stroke-width") == Some("2")
        })
        .map(points)
        .filter(|p| p.len() == 2 && p[0].1 == p[1].1 && p[1].0 - p[0].0 > width / 2.0)
        .collect();
    assert_eq!(lines.len(), 1, "the hot threshold as one horizontal line");
    let (end_x, line_y) = lines[0][1];
    let label = find("hot 85%").expect("the threshold is labelled");
    assert!(number(label, "x") > end_x && (number(label, "y") - line_y).abs() < 2.0);

    // The level ideal water-filling reaches: a short green mark on the nodes it fills.
    let ideal = doc
        .descendants()
        .filter(|n| n.has_tag_name("polyline") && n.attribute("stroke") == Some("#147832"))
        .count();
    assert!(ideal > 2, "ideal level drawn ({ideal})");

    // The nodes that could not take a pod: a cross and the reason over each.
    let crosses = doc
        .descendants()
        .filter(|n| n.has_tag_name("line") && n.attribute("stroke") == Some("#505050"))
        .count();
    assert_eq!(
        crosses,
        2 * (2 + 1),
        "two strokes a cross, one cross in the legend"
    );
    assert!(find("cordoned").is_some() && find("tainted").is_some());

    // Title and the scenario.
    assert!(find("Real CPU per node before and after a burst of 40 TaskManagers").is_some());
    let subtitle = texts
        .iter()
        .map(|t| text_of(*t))
        .find(|t| t.starts_with("24 nodes"))
        .expect("a subtitle with the scenario");
    for part in [
        "2 could not take a pod",
        "40 pods of 2 cores",
        "1 webhook replica",
        "bind lag 10ms",
    ] {
        assert!(subtitle.contains(part), "{subtitle:?} lacks {part:?}");
    }

    // The x axis names the nodes under their bars: every node once, no fractional ticks.
    let mut names: Vec<String> = texts
        .iter()
        .map(|t| text_of(*t))
        .filter(|t| t.starts_with("worker-"))
        .collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), 24);
    for t in texts.iter().map(|t| text_of(*t)) {
        let fractional = t.contains('.') && t.chars().all(|c| c.is_ascii_digit() || c == '.');
        assert!(!fractional, "a fractional label: {t:?}");
    }

    // Nothing cut: every horizontal text within the canvas, at a generous 0.62 em a character.
    for t in texts.iter().filter(|t| t.attribute("transform").is_none()) {
        let x = number(*t, "x");
        let w = text_of(*t).chars().count() as f64 * 0.62 * number(*t, "font-size");
        let (from, to) = match t.attribute("text-anchor") {
            Some("middle") => (x - w / 2.0, x + w / 2.0),
            Some("end") => (x - w, x),
            _ => (x, x + w),
        };
        assert!(
            from >= 0.0 && to <= width,
            "{:?} spans {from:.0}..{to:.0} of {width}",
            text_of(*t)
        );
    }
    // The table still goes to standard output.
    assert!(String::from_utf8_lossy(&out.stdout).contains("ideal water-filling"));
}

#[test]
fn a_pod_that_fits_nowhere_is_said_so() {
    let out = bin()
        .args(["simulate", "--pods", "3", "--cpu", "500"])
        .output()
        .expect("runs");
    assert!(out.status.success());
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("3 of 3 pods fit on no node"), "{table}");
}

#[test]
fn bad_input_gets_one_line_and_a_non_zero_exit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let not_a_pod = dir.path().join("cm.yaml");
    std::fs::write(
        &not_a_pod,
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
    )
    .expect("write");
    let garbage = dir.path().join("garbage.yaml");
    std::fs::write(&garbage, "{{{ not yaml").expect("write");
    let empty = dir.path().join("empty.json");
    std::fs::write(&empty, r#"{"nodes": []}"#).expect("write");
    let missing = dir.path().join("missing.yaml");
    let cases: Vec<(Vec<String>, &str)> = vec![
        (vec!["--pods".into(), "0".into()], "--pods"),
        (vec!["--cpu".into(), "-1".into()], "--cpu"),
        (vec!["--memory".into(), "lots".into()], "--memory"),
        (vec!["--network".into(), "fast".into()], "--network"),
        (
            vec!["--pod-file".into(), missing.display().to_string()],
            "cannot read",
        ),
        (
            vec!["--pod-file".into(), not_a_pod.display().to_string()],
            "not a Pod",
        ),
        (
            vec!["--pod-file".into(), garbage.display().to_string()],
            "not a Pod",
        ),
        (
            vec!["--metrics-file".into(), empty.display().to_string()],
            "no nodes",
        ),
        (
            vec!["--waves".into(), "0s,2m".into(), "--json".into()],
            "--waves prints a table: --svg and --json are for one burst",
        ),
    ];
    for (args, says) in cases {
        let out = bin().arg("simulate").args(&args).output().expect("runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} accepted");
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        let lines: Vec<&str> = stderr.lines().filter(|l| !l.starts_with("note:")).collect();
        assert_eq!(lines.len(), 1, "{args:?}: {stderr}");
        assert!(
            lines[0].starts_with("placement-webhook: ") && lines[0].contains(says),
            "{args:?}: {stderr}"
        );
    }
}

#[test]
fn a_pod_file_is_used_as_it_is() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("tm.yaml");
    // Only nodes labelled pool=flink: the nodeSelector must be honoured.
    std::fs::write(
        &path,
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: tm\n  labels: {component: taskmanager, type: flink-native-kubernetes}\nspec:\n  nodeSelector: {no-such-label: x}\n  containers:\n    - name: flink-main-container\n      resources: {requests: {cpu: '1', memory: 2Gi}}\n",
    )
    .expect("write");
    let cli = simulate_json(&["--pods", "5", "--pod-file", path.to_str().expect("utf-8")]);
    for m in cli["methods"].as_array().expect("methods") {
        assert_eq!(m["pending"], 5, "the nodeSelector matches no node: {m}");
    }
    assert_eq!(cli["unfit_nodes"], 24);
    assert_eq!(cli["pod_cpu_cores"], 1.0);
}

/// With `placement.per_job` configured, `simulate` runs the webhook again without it: the
/// bounded row keeps "most on one" within `max_per_node`, the other shows what it would be.
#[test]
fn a_jobs_own_spread_is_shown_with_and_without() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("config.yaml");
    std::fs::write(&config, "placement:\n  per_job: {max_per_node: 3}\n").expect("write");
    let config = config.to_str().expect("utf-8 path");
    let report = simulate_json(&["--pods", "30", "--no-cluster", "--config", config]);
    let methods = report["methods"].as_array().expect("methods");
    assert_eq!(methods.len(), 4, "{methods:?}");
    assert_eq!(methods[1]["method"], "webhook, bind lag 10ms");
    assert_eq!(methods[3]["method"], "webhook, bind lag 10ms, per_job off");
    let most = |k: usize| {
        methods[k]["most_pods_on_one_node"]
            .as_u64()
            .expect("a count")
    };
    assert!(most(1) <= 3, "bounded: {}", most(1));
    assert!(most(3) > 3, "unbounded: {}", most(3));
    // Without the section, three rows as before.
    let plain = simulate_json(&["--pods", "30", "--no-cluster"]);
    assert_eq!(plain["methods"].as_array().map(Vec::len), Some(3));
}

/// A pod template whose own preferred anti-affinity spreads the job one pod per node is told so.
#[test]
fn a_pod_files_own_spread_per_node_is_noted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = |anti: &str| {
        let path = dir.path().join("tm.yaml");
        std::fs::write(
            &path,
            format!(
                "apiVersion: v1\nkind: Pod\nmetadata:\n  name: tm\n  labels: {{app: orders, component: taskmanager, type: flink-native-kubernetes}}\nspec:\n{anti}  containers:\n    - name: flink-main-container\n      resources: {{requests: {{cpu: '1', memory: 2Gi}}}}\n"
            ),
        )
        .expect("write");
        let out = bin()
            .args(["simulate", "--pods", "3", "--pod-file"])
            .arg(&path)
            .output()
            .expect("runs");
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{stderr}");
        stderr
    };
    let stderr = run(
        "  affinity:\n    podAntiAffinity:\n      preferredDuringSchedulingIgnoredDuringExecution:\n        - weight: 100\n          podAffinityTerm:\n            topologyKey: kubernetes.io/hostname\n            labelSelector: {matchLabels: {app: orders}}\n",
    );
    assert!(
        stderr.contains(
            "note: the pod's own preferred pod anti-affinity (weight 100, topology kubernetes.io/hostname"
        ) && stderr.contains("placement.per_job"),
        "{stderr}"
    );
    assert!(!run("").contains("anti-affinity"));
}

/// The table names its columns for what they count and says how to read them.
#[test]
fn the_table_says_what_its_columns_count() {
    let out = bin()
        .args(["simulate", "--pods", "10"])
        .output()
        .expect("runs");
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{table}");
    let header = table
        .lines()
        .find(|l| l.starts_with("method "))
        .expect("a header");
    let columns: Vec<&str> = header
        .split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    assert_eq!(
        columns,
        [
            "method",
            "hot CPU",
            "hot NIC",
            "pods onto hot",
            "nodes used",
            "most on one"
        ],
        "{table}"
    );
    for said in [
        "over 100%: more than the node has",
        "pods onto hot: pods placed on a node already at or above 85% CPU.",
        "most on one: the most pods of the burst on one node",
        "ideal water-filling balances CPU and NIC together",
    ] {
        assert!(table.contains(said), "{said}\n{table}");
    }
    assert!(table.contains("\nwebhook, bind lag 10ms "), "{table}");
}

/// `--waves`: a row per wave and method, the day's rows the library's `run_day` for the same
/// input (its refusal of the one-burst outputs is among the bad input above).
#[test]
fn a_day_of_waves_prints_a_row_per_wave_and_method() {
    let out = bin()
        .args([
            "simulate",
            "--pods",
            "20",
            "--waves",
            "2m,0s",
            "--start-delay",
            "60s",
        ])
        .output()
        .expect("runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: Vec<Vec<&str>> = stdout
        .lines()
        .filter(|l| {
            l.trim_start()
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_digit())
        })
        .map(|l| l.split_whitespace().collect())
        .collect();
    let firsts: Vec<(&str, &str)> = rows.iter().map(|r| (r[0], r[1])).collect();
    assert_eq!(
        firsts,
        [
            ("0s", "webhook"),
            ("0s", "fixed"),
            ("0s", "no"),
            ("120s", "webhook"),
            ("120s", "fixed"),
            ("120s", "no"),
        ],
        "{stdout}"
    );
    // The webhook's second wave, as the library computes it.
    let config = Config::default();
    let waves = simulate::waves_of(
        &request(20),
        &[Duration::ZERO, Duration::from_secs(120)],
        Duration::from_secs(60),
    )
    .expect("waves");
    let cluster = Cluster::new(embedded_example().expect("example"), &config);
    let day = placement_webhook::simulate::day::run_day(
        &cluster,
        &config,
        &waves,
        placement_webhook::simulate::day::Steering::Webhook(Timing::typical(1)),
        1,
    );
    assert_eq!(rows[3][3], format!("{:+.2}", day[1].above), "{stdout}");
}
