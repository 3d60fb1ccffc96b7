//! What the binary says when something is wrong: the address it cannot listen on, when a stale
//! snapshot was taken, a review of the wrong shape in the API's words, each cause once.

use std::process::{Command, Output, Stdio};

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_placement-webhook"));
    c.env("RUST_LOG", "off")
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .env_remove("KUBERNETES_SERVICE_HOST");
    c
}

fn example_review() -> String {
    format!(
        "{}/examples/taskmanager-review.json",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// `review -` of `body`: its output.
fn review_stdin(body: &str) -> Output {
    use std::io::Write;
    let mut child = bin()
        .args(["review", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("review starts");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(body.as_bytes())
        .expect("body written");
    child.wait_with_output().expect("review runs")
}

#[test]
fn an_address_in_use_is_named() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let addr = taken.local_addr().expect("address");
    let out = bin()
        .args(["serve", "--no-cluster", "--listen", &addr.to_string()])
        .output()
        .expect("serve runs");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("cannot listen on {addr}: ")) && stderr.contains("in use"),
        "{stderr}"
    );
}

#[test]
fn a_stale_snapshot_says_when_it_was_taken() {
    let dir = tempfile::tempdir().expect("tempdir");
    let snapshot = dir.path().join("old.json");
    std::fs::write(
        &snapshot,
        r#"{"taken_at":"2019-02-03T04:05:06Z","nodes":[{"name":"worker-01","cpu":0.2}]}"#,
    )
    .expect("snapshot written");
    let out = bin()
        .arg("review")
        .arg(example_review())
        .arg("--metrics-file")
        .arg(&snapshot)
        .output()
        .expect("review runs");
    assert!(out.status.success());
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout).expect("a review");
    let warning = answer["response"]["warnings"][0]
        .as_str()
        .expect("a warning");
    assert!(
        warning.contains("node-load snapshot is stale: taken at 2019-02-03T04:05:06Z, "),
        "{warning}"
    );
}

#[test]
fn a_review_of_the_wrong_shape_names_no_internal_type() {
    for (body, want) in [
        (
            "[]",
            "HTTP 422: body is not an AdmissionReview: an array, not an object with apiVersion, kind and request",
        ),
        (
            r#""review""#,
            "HTTP 422: body is not an AdmissionReview: a string, not an object",
        ),
        (
            r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":[]}"#,
            "expected an AdmissionReview request object",
        ),
        (
            r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","operation":"CREATE","resource":7}}"#,
            "expected a resource object (group, version, resource)",
        ),
    ] {
        let out = review_stdin(body);
        assert!(!out.status.success(), "{body}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(want), "{body}: {stderr}");
        for internal in ["ReviewIn", "RequestIn", "GroupVersionResource", "struct "] {
            assert!(!stderr.contains(internal), "{body}: {stderr}");
        }
    }
}

#[test]
fn a_missing_field_is_reported_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let snapshot = dir.path().join("bad.json");
    std::fs::write(&snapshot, r#"{"nodes":[{"name":"worker-01"}]}"#).expect("written");
    let out = bin()
        .arg("review")
        .arg(example_review())
        .arg("--metrics-file")
        .arg(&snapshot)
        .output()
        .expect("review runs");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.matches("missing field `cpu`").count(), 1, "{stderr}");

    let missing = dir.path().join("absent.json");
    let out = bin()
        .arg("review")
        .arg(example_review())
        .arg("--metrics-file")
        .arg(&missing)
        .output()
        .expect("review runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stderr.matches("No such file or directory").count(),
        1,
        "{stderr}"
    );

    let out = review_stdin(
        r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u"}}"#,
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stderr.matches("missing field `operation`").count(),
        1,
        "{stderr}"
    );
}

#[test]
fn a_misspelt_query_placeholder_is_a_config_error_at_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("config.yaml");
    std::fs::write(
        &config,
        "prometheus:\n  url: http://127.0.0.1:1\n  queries:\n    cpu: '1 - avg by ({by}) (rate(node_cpu_seconds_total{mode=\"idle\"}[{windw}]))'\n",
    )
    .expect("config written");
    let out = bin()
        .arg("review")
        .arg(example_review())
        .arg("--config")
        .arg(&config)
        .output()
        .expect("review runs");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("queries.cpu: unknown placeholder {windw}"),
        "{stderr}"
    );
    // Refused before any query is sent.
    assert!(!stderr.contains("query failed"), "{stderr}");
}

#[test]
fn an_unreachable_prometheus_is_one_line_with_its_url_and_cause() {
    // A port nothing listens on: bound, then closed.
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port");
    let url = format!("http://{addr}");
    let out = bin()
        .arg("review")
        .arg(example_review())
        .args(["--prometheus-url", &url])
        .output()
        .expect("review runs");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(
        lines[0].starts_with(&format!(
            "placement-webhook: Prometheus at {url} cannot be reached: "
        )) && lines[0].contains("Connection refused"),
        "{stderr}"
    );
    // No query, encoded or not.
    for query in ["query=", "node_cpu_seconds_total", "%28"] {
        assert!(!stderr.contains(query), "{stderr}");
    }
}
