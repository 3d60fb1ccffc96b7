//! Flags over the config, as `--help` says: each flag that has a config key overrides what the
//! shipped `deploy/base/config.yaml` says, for `serve`, `review`, `simulate` and `hotspots`.
//! The shipped config names the in-cluster Prometheus, which no test machine reaches: a flag
//! that did not override it fails these commands or starts `serve` on the wrong source.

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const SHIPPED: &str = "deploy/base/config.yaml";
const SNAPSHOT: &str = "examples/cluster.json";
const REVIEW: &str = "examples/taskmanager-review.json";

fn repo(path: &str) -> String {
    format!("{}/{path}", env!("CARGO_MANIFEST_DIR"))
}

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_placement-webhook"));
    // Hermetic: never the developer's cluster, whatever kubeconfig they have.
    c.env("KUBECONFIG", "/nonexistent/kubeconfig")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .stdin(Stdio::null());
    c
}

fn run(args: &[&str]) -> Output {
    bin()
        .env("RUST_LOG", "off")
        .args(args)
        .output()
        .expect("runs")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `review` of the example TaskManager under the shipped config, with `flags`.
fn review_shipped(flags: &[&str]) -> Output {
    let (review, config) = (repo(REVIEW), repo(SHIPPED));
    let mut args = vec![
        "review",
        review.as_str(),
        "--no-cluster",
        "--config",
        &config,
    ];
    args.extend_from_slice(flags);
    run(&args)
}

/// The decoded JSONPatch of a `review` answer.
fn patch_of(out: &Output) -> Vec<Value> {
    assert!(out.status.success(), "{}", stderr(out));
    let answer: Value = serde_json::from_slice(&out.stdout).expect("a JSON answer");
    let response = &answer["response"];
    assert_eq!(response["allowed"], true, "{answer}");
    let patch = response["patch"]
        .as_str()
        .unwrap_or_else(|| panic!("no patch in {answer}"));
    use base64::Engine;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(patch)
        .expect("base64 patch");
    serde_json::from_slice(&bytes).expect("a JSON patch")
}

fn paths(patch: &[Value]) -> Vec<&str> {
    patch.iter().filter_map(|op| op["path"].as_str()).collect()
}

#[test]
fn metrics_file_replaces_the_configured_prometheus_for_review() {
    let snapshot = repo(SNAPSHOT);
    let patch = patch_of(&review_shipped(&["--metrics-file", &snapshot]));
    assert!(
        paths(&patch).iter().any(|p| p.contains("affinity")),
        "the shipped mode writes node affinity: {patch:?}"
    );
}

#[test]
fn prometheus_url_replaces_the_configured_one() {
    // Nothing listens on port 1: the error names the flag's URL, not the shipped one.
    let out = review_shipped(&["--prometheus-url", "http://127.0.0.1:1"]);
    let text = stderr(&out);
    assert!(!out.status.success(), "{text}");
    assert!(text.contains("127.0.0.1:1"), "{text}");
    assert!(!text.contains("monitoring.svc"), "{text}");
    assert_eq!(text.trim().lines().count(), 1, "one line: {text}");
}

#[test]
fn mode_replaces_the_configured_one() {
    let snapshot = repo(SNAPSHOT);
    let patch = patch_of(&review_shipped(&[
        "--metrics-file",
        &snapshot,
        "--mode",
        "schedulerName",
    ]));
    let paths = paths(&patch);
    assert!(paths.contains(&"/spec/schedulerName"), "{patch:?}");
    assert!(
        !paths.iter().any(|p| p.contains("affinity")),
        "schedulerName mode writes no affinity: {patch:?}"
    );
}

#[test]
fn an_unknown_mode_is_one_line_and_a_failure() {
    let out = review_shipped(&["--mode", "sideways"]);
    let text = stderr(&out);
    assert!(!out.status.success(), "{text}");
    assert!(
        text.contains("sideways") && text.contains("affinity"),
        "{text}"
    );
}

#[test]
fn metrics_file_and_prometheus_url_together_are_refused() {
    let snapshot = repo(SNAPSHOT);
    let out = review_shipped(&[
        "--metrics-file",
        &snapshot,
        "--prometheus-url",
        "http://127.0.0.1:1",
    ]);
    let text = stderr(&out);
    assert!(!out.status.success(), "{text}");
    assert!(text.contains("cannot be used with"), "{text}");
}

#[test]
fn metrics_file_replaces_the_configured_prometheus_for_simulate_and_hotspots() {
    let (config, snapshot) = (repo(SHIPPED), repo(SNAPSHOT));
    for command in [
        vec!["simulate", "--pods", "20", "--json"],
        vec!["hotspots", "--json"],
    ] {
        let mut args = command.clone();
        args.extend([
            "--no-cluster",
            "--config",
            &config,
            "--metrics-file",
            &snapshot,
        ]);
        let out = run(&args);
        assert!(out.status.success(), "{command:?}: {}", stderr(&out));
        let answer: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{command:?}: not JSON ({e})"));
        assert!(answer.is_object(), "{command:?}: {answer}");
    }
}

#[test]
fn serve_takes_listen_metrics_file_and_mode_over_the_shipped_config() {
    let (config, snapshot) = (repo(SHIPPED), repo(SNAPSHOT));
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("stderr.log");
    let file = std::fs::File::create(&path).expect("log file");
    let mut child = bin()
        .args(["--log-format", "json", "serve", "--no-cluster"])
        .args(["--config", &config, "--metrics-file", &snapshot])
        .args(["--listen", "127.0.0.1:0", "--mode", "observe"])
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::from(file))
        .spawn()
        .expect("serve starts");
    let deadline = Instant::now() + Duration::from_secs(60);
    let serving = loop {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let found = text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|l| l["message"] == "serving");
        if let Some(line) = found {
            break line;
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("serve exited ({status}):\n{text}");
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("no serving line within 60 s:\n{text}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(serving["source"], "file", "{serving}");
    assert_eq!(serving["mode"], "observe", "{serving}");
    assert!(
        serving["addr"]
            .as_str()
            .is_some_and(|a| a.starts_with("127.0.0.1:") && !a.ends_with(":8443")),
        "{serving}"
    );
}
