//! deploy/monitoring: the alerting rules (checked and unit-tested with promtool), the
//! PrometheusRule that ships them, and their agreement with the webhook registration.
//!
//! Needs `promtool` (Debian package `prometheus`). Without it the tests fail under CI=true and
//! say SKIPPED elsewhere, as the tests that need a Prometheus do.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use support::webhook::repo_path;

const RULES: &str = "deploy/monitoring/rules/placement-webhook.rules.yaml";
const RULE_TESTS: &str = "deploy/monitoring/rules/placement-webhook.rules.test.yaml";
const PROMETHEUS_RULE: &str = "deploy/monitoring/prometheusrule.yaml";
const WEBHOOK: &str = "deploy/base/webhook.yaml";

/// The `promtool` binary, or `None` outside CI when it is not installed.
fn promtool() -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("promtool"))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        let in_ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
        assert!(
            !in_ci,
            "promtool is not installed: CI must install the Debian package `prometheus`"
        );
        eprintln!("SKIPPED: promtool is not installed (apt-get install prometheus)");
    }
    found
}

/// Runs promtool and returns its output; panics with that output when it fails.
fn run_promtool(promtool: &Path, args: &[&str], dir: &Path) -> String {
    let output = Command::new(promtool)
        .args(args)
        .current_dir(dir)
        .output()
        .expect("promtool runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.status.success(),
        "promtool {} failed:\n{text}",
        args.join(" ")
    );
    text
}

/// A YAML file of the repository as JSON values.
fn yaml(path: &str) -> Value {
    let text = std::fs::read_to_string(repo_path(path)).expect("readable file");
    serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn alert_rules(rules: &Value) -> Vec<&Value> {
    rules["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .flat_map(|g| g["rules"].as_array().expect("rules"))
        .filter(|r| r.get("alert").is_some())
        .collect()
}

#[test]
fn promtool_checks_the_rules() {
    let Some(promtool) = promtool() else { return };
    let out = run_promtool(
        &promtool,
        &["check", "rules", &repo_path(RULES).display().to_string()],
        &repo_path("."),
    );
    let count = alert_rules(&yaml(RULES)).len();
    assert!(
        out.contains(&format!("SUCCESS: {count} rules found")),
        "{out}"
    );
}

#[test]
fn promtool_unit_tests_of_the_alerts_pass() {
    let Some(promtool) = promtool() else { return };
    // rule_files in the test file are relative to it.
    let out = run_promtool(
        &promtool,
        &["test", "rules", "placement-webhook.rules.test.yaml"],
        &repo_path("deploy/monitoring/rules"),
    );
    assert!(out.contains("SUCCESS"), "{out}");
}

/// Each alert has a case where it fires and one where it stays silent, so that neither the
/// condition nor its `for:` goes untested.
#[test]
fn every_alert_has_a_firing_and_a_silent_case() {
    let tests = yaml(RULE_TESTS);
    let cases: Vec<&Value> = tests["tests"]
        .as_array()
        .expect("tests")
        .iter()
        .flat_map(|t| t["alert_rule_test"].as_array().expect("alert_rule_test"))
        .collect();
    for rule in alert_rules(&yaml(RULES)) {
        let name = &rule["alert"];
        let of_rule = || cases.iter().filter(|c| &c["alertname"] == name);
        let fires = |c: &&&Value| c["exp_alerts"].as_array().is_some_and(|a| !a.is_empty());
        assert!(
            of_rule().any(|c| fires(&c)),
            "{name}: no case where it fires"
        );
        assert!(
            of_rule().any(|c| !fires(&c)),
            "{name}: no case where it stays silent"
        );
    }
}

#[test]
fn every_alert_says_what_to_do() {
    let rules = yaml(RULES);
    let alerts = alert_rules(&rules);
    assert!(alerts.len() >= 8, "{} alerts", alerts.len());
    for rule in alerts {
        let name = rule["alert"].as_str().expect("alert name");
        assert!(
            name.starts_with("PlacementWebhook"),
            "{name}: alert names start with PlacementWebhook"
        );
        let severity = rule["labels"]["severity"].as_str().unwrap_or_default();
        assert!(
            ["warning", "critical"].contains(&severity),
            "{name}: severity {severity:?}"
        );
        let for_ = rule["for"].as_str().unwrap_or_default();
        assert!(
            humantime::parse_duration(for_).is_ok_and(|d| d.as_secs() >= 60),
            "{name}: `for` of at least a minute, not {for_:?}"
        );
        let summary = rule["annotations"]["summary"].as_str().unwrap_or_default();
        assert!(!summary.is_empty(), "{name}: no summary");
        let description = rule["annotations"]["description"]
            .as_str()
            .unwrap_or_default();
        for part in ["Likely:", "Runbook:"] {
            assert!(
                description.contains(part),
                "{name}: the description names no {part:?}"
            );
        }
    }
}

#[test]
fn prometheus_rule_ships_exactly_the_tested_rules() {
    let rule = yaml(PROMETHEUS_RULE);
    assert_eq!(rule["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(rule["kind"], "PrometheusRule");
    let labels = &rule["metadata"]["labels"];
    assert_eq!(labels["release"], "kube-prometheus-stack");
    assert_eq!(labels["app.kubernetes.io/name"], "placement-webhook");
    assert_eq!(
        rule["spec"]["groups"],
        yaml(RULES)["groups"],
        "{PROMETHEUS_RULE} spec.groups differs from {RULES}: edit both together"
    );
    let kustomization = yaml("deploy/monitoring/kustomization.yaml");
    assert!(
        kustomization["resources"]
            .as_array()
            .expect("resources")
            .iter()
            .any(|r| r == "prometheusrule.yaml"),
        "the monitoring overlay applies the PrometheusRule"
    );
}

/// The latency alert must fire before the apiserver gives up on the webhook.
#[test]
fn latency_alert_fires_under_the_webhook_timeout() {
    let webhook = yaml(WEBHOOK);
    let timeout = webhook["webhooks"][0]["timeoutSeconds"]
        .as_f64()
        .expect("timeoutSeconds");
    let rules = yaml(RULES);
    let slow = alert_rules(&rules)
        .into_iter()
        .find(|r| r["alert"] == "PlacementWebhookSlowReviews")
        .expect("the latency alert");
    let expr = slow["expr"].as_str().expect("expr");
    assert!(
        expr.contains("histogram_quantile(0.99")
            && expr.contains("placement_webhook_review_duration_seconds_bucket"),
        "{expr}"
    );
    let threshold: f64 = expr
        .rsplit_once('>')
        .and_then(|(_, t)| t.trim().parse().ok())
        .expect("`> threshold` at the end of the expression");
    assert!(
        threshold > 0.0 && threshold <= timeout / 2.0,
        "threshold {threshold}s leaves too little of timeoutSeconds {timeout}s"
    );
    let description = slow["annotations"]["description"].as_str().expect("text");
    assert!(
        description.contains(&format!("timeoutSeconds ({timeout} s")),
        "the description quotes the registration's timeout: {description}"
    );
}
