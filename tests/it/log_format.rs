//! `serve`'s logs as a log stack reads them: standard error into a file holds no terminal escape
//! codes, and `--log-format json` writes one JSON object per line.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The standard error of `serve` (with `extra` arguments) until it says it is serving.
fn serve_log(extra: &[&str]) -> String {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("stderr.log");
    let file = std::fs::File::create(&path).expect("log file");
    let mut child = Command::new(env!("CARGO_BIN_EXE_placement-webhook"))
        .args(extra)
        .args(["serve", "--no-cluster", "--listen", "127.0.0.1:0"])
        .env("RUST_LOG", "info")
        .env_remove("NO_COLOR")
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .stdout(Stdio::null())
        .stderr(Stdio::from(file))
        .spawn()
        .expect("serve starts");
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut text = String::new();
    while Instant::now() < deadline {
        text = std::fs::read_to_string(&path).unwrap_or_default();
        if text.contains("serving") {
            break;
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("serve exited ({status}):\n{text}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        text.contains("serving"),
        "no serving line within 60 s:\n{text}"
    );
    text
}

#[test]
fn text_logs_into_a_file_carry_no_escape_codes() {
    let text = serve_log(&[]);
    assert!(
        !text.contains('\x1b'),
        "escape codes in the file:\n{text:?}"
    );
    // The warning about the missing metrics source and the serving line, both readable.
    assert!(text.contains("WARN"), "{text}");
    assert!(text.contains(" INFO "), "{text}");
}

#[test]
fn json_logs_are_one_object_per_line() {
    let text = serve_log(&["--log-format", "json"]);
    assert!(!text.contains('\x1b'), "{text:?}");
    let lines: Vec<serde_json::Value> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let serving = lines
        .iter()
        .find(|l| l["message"] == "serving")
        .unwrap_or_else(|| panic!("no serving object in\n{text}"));
    assert_eq!(serving["level"], "INFO", "{serving}");
    assert_eq!(serving["mode"], "affinity", "{serving}");
    assert!(
        serving["addr"]
            .as_str()
            .is_some_and(|a| a.starts_with("127.0.0.1:")),
        "{serving}"
    );
    assert!(serving["timestamp"].is_string(), "{serving}");
    assert!(
        lines.iter().any(|l| l["level"] == "WARN"),
        "the missing metrics source is warned about:\n{text}"
    );
}

#[test]
fn an_unknown_log_format_is_refused() {
    let out = Command::new(env!("CARGO_BIN_EXE_placement-webhook"))
        .args(["--log-format", "xml", "review", "-"])
        .stdin(Stdio::null())
        .output()
        .expect("runs");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("json") && stderr.contains("text"),
        "{stderr}"
    );
}
