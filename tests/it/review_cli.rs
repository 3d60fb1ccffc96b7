//! `placement-webhook review --explain`: the table shows what the decision ranks on.

use std::process::Command;

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_placement-webhook"));
    // Hermetic: never the developer's cluster, whatever kubeconfig they have.
    c.env("RUST_LOG", "off")
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .env_remove("KUBERNETES_SERVICE_HOST");
    c
}

fn repo(path: &str) -> String {
    format!("{}/{path}", env!("CARGO_MANIFEST_DIR"))
}

/// The explanation (standard error) of reviewing the example TaskManager with `config`.
fn explain(config: Option<&str>) -> String {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cmd = bin();
    cmd.args([
        "review",
        &repo("examples/taskmanager-review.json"),
        "--explain",
    ]);
    if let Some(config) = config {
        let path = dir.path().join("config.yaml");
        std::fs::write(&path, config).expect("config written");
        cmd.arg("--config").arg(&path);
    }
    let out = cmd.output().expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{stderr}");
    stderr
}

/// (node, rank, by, eligible, tier) of each table row.
fn rows(text: &str) -> Vec<(String, Option<f64>, String, String, String)> {
    text.lines()
        .skip_while(|l| !l.starts_with("NODE"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty() && !l.starts_with("not first"))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (
                f[0].to_string(),
                f[1].parse().ok(),
                f[2].to_string(),
                f[6].to_string(),
                f[f.len() - 2].to_string(),
            )
        })
        .collect()
}

#[test]
fn the_table_is_sorted_by_what_the_decision_ranks_on() {
    let text = explain(None);
    let rows = rows(&text);
    assert_eq!(rows.len(), 24, "{text}");
    // Tier 1 is the first row: the coolest by the decision's own figure.
    assert_eq!(rows[0].4, "1", "{text}");
    let cool: Vec<f64> = rows
        .iter()
        .filter(|r| r.3 == "yes")
        .map(|r| r.1.expect("a feasible node has a rank"))
        .collect();
    assert!(cool.len() > 5, "{text}");
    assert!(
        cool.windows(2).all(|w| w[0] <= w[1]),
        "cool nodes in rank order: {cool:?}"
    );
    // The dimension that decided is named for every ranked node; ineligible ones have none.
    for (node, rank, by, eligible, _) in &rows {
        match rank {
            Some(_) => assert!(["cpu", "nic", "mem"].contains(&by.as_str()), "{node}: {by}"),
            None => assert!(eligible.starts_with("no"), "{node}: {eligible}"),
        }
    }
    // The best nodes left out of tier 1 say why.
    let reasons: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("not first:"))
        .collect();
    assert_eq!(reasons.len(), 3, "{text}");
    assert!(reasons[0].contains(&rows[1].0), "{reasons:?}");
}

#[test]
fn observe_mode_says_what_the_webhook_would_have_done() {
    let text = explain(Some("mode: observe\n"));
    let first = rows(&text)
        .into_iter()
        .find(|r| r.4 == "1")
        .expect("a tier-1 node")
        .0;
    assert!(
        text.contains(&format!(
            "observe mode: the pod keeps its own terms, so it is charged where the scheduler puts it alone; the webhook would put it on {first}"
        )),
        "{text}"
    );
}

/// The explanation (standard error) of reviewing the example TaskManager on the nodes of
/// `snapshot` (a `--metrics-file`), with `args`.
fn review_on_snapshot(snapshot: &str, args: &[&str]) -> String {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("snapshot.json");
    std::fs::write(&path, snapshot).expect("snapshot written");
    let out = bin()
        .arg("review")
        .arg(repo("examples/taskmanager-review.json"))
        .arg("--metrics-file")
        .arg(&path)
        .args(args)
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{stderr}");
    stderr
}

/// (stdout, stderr) of `review --explain` on the example review changed by `edit`.
fn review_edited(edit: impl FnOnce(&mut serde_json::Value)) -> (String, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut review: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(repo("examples/taskmanager-review.json")).expect("example"),
    )
    .expect("JSON");
    edit(&mut review);
    let path = dir.path().join("review.json");
    std::fs::write(&path, review.to_string()).expect("review written");
    let out = bin()
        .arg("review")
        .arg(&path)
        .arg("--explain")
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{stderr}");
    (String::from_utf8_lossy(&out.stdout).to_string(), stderr)
}

#[test]
fn unlabelled_nodes_are_said_to_match_no_selector() {
    let stderr = review_on_snapshot(
        r#"{"nodes":[{"name":"worker-01","cpu":0.2},{"name":"worker-02","cpu":0.4}]}"#,
        &[],
    );
    assert!(
        stderr.contains("note: the nodes carry no labels (no cluster was read"),
        "{stderr}"
    );
    // The example cluster's nodes have labels: nothing to say.
    let (_, stderr) = review_edited(|_| {});
    assert!(!stderr.contains("carry no labels"), "{stderr}");
    // Nor does it know the pods steered before: it says so rather than showing nothing charged.
    assert!(
        stderr.contains("in flight: not known (no cluster read"),
        "{stderr}"
    );
}

#[test]
fn a_pod_no_node_can_take_is_said_to_stay_pending() {
    let (stdout, stderr) = review_edited(|r| {
        // No node of the example cluster carries this label.
        r["request"]["object"]["spec"]["nodeSelector"] = serde_json::json!({"pool": "nowhere"});
    });
    assert!(
        stderr.contains("predicted landing: none (land=none)"),
        "{stderr}"
    );
    assert!(stderr.contains("the pod will stay Pending"), "{stderr}");
    let answer: serde_json::Value = serde_json::from_str(&stdout).expect("a review");
    let note = answer["response"]["auditAnnotations"]["decision"]
        .as_str()
        .expect("a decision note");
    assert!(note.contains(" land=none avoid="), "{note}");
}

/// The first line of an explanation after the notes about where the load came from.
fn first_said(stderr: &str) -> &str {
    stderr
        .lines()
        .find(|l| !l.starts_with("note:") && !l.trim().is_empty())
        .unwrap_or("")
}

#[test]
fn a_skipped_pod_is_said_first_to_be_skipped_and_why() {
    use serde_json::json;
    type Edit = fn(&mut serde_json::Value);
    let cases: [(Edit, &str); 5] = [
        (
            |r| r["request"]["object"]["metadata"]["labels"]["component"] = json!("jobmanager"),
            "skipped: not a target: label `component=jobmanager`, not `component=taskmanager`",
        ),
        (
            |r| {
                let labels = r["request"]["object"]["metadata"]["labels"]
                    .as_object_mut()
                    .expect("labels");
                labels.remove("type");
            },
            "skipped: not a target: no `type` label (one of flink-native-kubernetes, flink-standalone-kubernetes)",
        ),
        (
            |r| {
                r["request"]["object"]["metadata"]["annotations"]["placement-webhook.io/skip"] =
                    json!("Yes")
            },
            "skipped: opted out: annotation placement-webhook.io/skip: \"Yes\"",
        ),
        (
            |r| r["request"]["operation"] = json!("UPDATE"),
            "skipped: a pod's UPDATE: only the CREATE of a pod is steered",
        ),
        (
            |r| r["request"]["subResource"] = json!("status"),
            "skipped: the `status` subresource of a pod: only the CREATE of a pod is steered",
        ),
    ];
    for (edit, want) in cases {
        let (stdout, stderr) = review_edited(edit);
        assert!(first_said(&stderr).starts_with(want), "{want}\n{stderr}");
        assert!(
            first_said(&stderr).ends_with("nothing is written (no patch, nothing charged)"),
            "{stderr}"
        );
        // The ranking only as what it would do.
        assert!(
            stderr.contains("what it would do were it a target:"),
            "{stderr}"
        );
        assert!(!stderr.contains("(charged so)"), "{stderr}");
        assert!(
            stderr.contains("predicted landing were it a target (not charged): "),
            "{stderr}"
        );
        let answer: serde_json::Value = serde_json::from_str(&stdout).expect("a review");
        assert!(answer["response"]["patch"].is_null(), "{stdout}");
    }
    // A target is not said to be skipped.
    let (_, stderr) = review_edited(|_| {});
    assert!(first_said(&stderr).starts_with("charged load:"), "{stderr}");
    assert!(!stderr.contains("skipped"), "{stderr}");
}

#[test]
fn the_templates_own_spread_per_node_is_noted() {
    // The example TaskManager carries a preferred anti-affinity (weight 50) against its job.
    let (_, stderr) = review_edited(|_| {});
    assert!(
        stderr.contains(
            "note: the pod's own preferred pod anti-affinity (weight 50, topology kubernetes.io/hostname, against pods with its labels)"
        ),
        "{stderr}"
    );
    let (_, stderr) = review_edited(|r| {
        let affinity = r["request"]["object"]["spec"]["affinity"]
            .as_object_mut()
            .expect("affinity");
        affinity.remove("podAntiAffinity");
    });
    assert!(!stderr.contains("anti-affinity"), "{stderr}");
}

/// Above 100 nodes the scheduler scores a sample: tier 1 names many nodes, their terms graded by
/// heat, and the table says which weight each got.
#[test]
fn a_sampled_decision_shows_its_graded_tier() {
    // 400 nodes of 16 cores: twenty cool ones from 5% busy, three percent apart (a 2-core
    // TaskManager adds 12.5%), the rest 90% busy.
    let nodes: Vec<serde_json::Value> = (0..400)
        .map(|i| {
            serde_json::json!({
                "name": format!("worker-{i:03}"),
                "cpu": if i < 20 { 0.05 + f64::from(i) * 0.03 } else { 0.9 },
                "cpu_capacity_cores": 16.0,
                // What the example TaskManager's node selector asks for.
                "labels": {"node-pool": "flink"}
            })
        })
        .collect();
    let snapshot = serde_json::json!({ "nodes": nodes }).to_string();
    let stderr = review_on_snapshot(&snapshot, &["--explain"]);
    let tiers: Vec<String> = rows(&stderr).into_iter().map(|r| r.4).collect();
    let first: Vec<&String> = tiers
        .iter()
        .filter(|t| *t == "1" || t.starts_with("1@"))
        .collect();
    // 46% of 400 sampled: enough nodes that a sample misses them all at most 0.2% of the time.
    assert!(first.len() >= 8, "{first:?}\n{stderr}");
    assert!(
        tiers.iter().any(|t| t == "1"),
        "the best keeps the full weight"
    );
    let graded: Vec<i32> = first
        .iter()
        .filter_map(|t| t.strip_prefix("1@")?.parse().ok())
        .collect();
    assert!(!graded.is_empty(), "{stderr}");
    assert!(graded.iter().all(|w| (60..100).contains(w)), "{graded:?}");
}
