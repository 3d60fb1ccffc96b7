//! deploy/monitoring: the alerting rules (checked and unit-tested with promtool), the
//! PrometheusRule that ships them, the Grafana dashboard (its queries checked with promtool),
//! and that both only name metrics the webhook really exports.
//!
//! Needs `promtool`, built by `tests/prometheus/build.sh` from the pinned Prometheus module; without
//! it the tests fail with that command.

use crate::support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};
use support::webhook::{repo_path, self_signed_client, start, test_config};

const RULES: &str = "deploy/monitoring/rules/placement-webhook.rules.yaml";
const RULE_TESTS: &str = "deploy/monitoring/rules/placement-webhook.rules.test.yaml";
const PROMETHEUS_RULE: &str = "deploy/monitoring/prometheusrule.yaml";
const WEBHOOK: &str = "deploy/base/webhook.yaml";
const DASHBOARD: &str = "deploy/monitoring/dashboard.json";
const METRIC_PREFIX: &str = "placement_webhook_";

/// The pinned `promtool`, built by `tests/prometheus/build.sh`; missing, it fails the test with
/// that command.
fn promtool() -> PathBuf {
    support::prometheus::tool("promtool")
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
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
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
    let promtool = promtool();
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
    let promtool = promtool();
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

#[test]
fn down_alert_watches_the_job_the_service_monitor_scrapes() {
    // The Prometheus Operator names a ServiceMonitor's job after the value of the scraped
    // Service's `jobLabel` label (after the Service's name without one).
    let monitor = yaml("deploy/monitoring/servicemonitor.yaml");
    let text =
        std::fs::read_to_string(repo_path("deploy/base/service.yaml")).expect("service.yaml");
    let services: Vec<Value> = serde_saphyr::from_multiple(&text).expect("YAML");
    let selector = monitor["spec"]["selector"]["matchLabels"]
        .as_object()
        .expect("selector");
    let scraped: Vec<&Value> = services
        .iter()
        .filter(|d| d["kind"] == "Service")
        .filter(|d| {
            selector
                .iter()
                .all(|(k, v)| &d["metadata"]["labels"][k] == v)
        })
        .collect();
    assert_eq!(scraped.len(), 1, "the ServiceMonitor selects one Service");
    let label = monitor["spec"]["jobLabel"].as_str().expect("jobLabel");
    let job = scraped[0]["metadata"]["labels"][label]
        .as_str()
        .expect("the job label on the Service");
    let rules = yaml(RULES);
    let down = alert_rules(&rules)
        .into_iter()
        .find(|r| r["alert"] == "PlacementWebhookDown")
        .expect("the down alert");
    assert_eq!(
        down["expr"],
        format!("absent(up{{job=\"{job}\"}} == 1)"),
        "the down alert watches the job of the Service's targets"
    );
}

fn dashboard() -> Value {
    let text = std::fs::read_to_string(repo_path(DASHBOARD)).expect("dashboard file");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{DASHBOARD}: {e}"))
}

/// Every string under `value` whose key is `key` (any key when `None`), depth first.
fn strings_of<'a>(value: &'a Value, key: Option<&str>, out: &mut Vec<&'a str>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                match v {
                    Value::String(s) if key.is_none_or(|want| want == k) => out.push(s),
                    _ => strings_of(v, key, out),
                }
            }
        }
        Value::Array(items) => {
            for v in items {
                match v {
                    Value::String(s) if key.is_none() => out.push(s),
                    _ => strings_of(v, key, out),
                }
            }
        }
        _ => {}
    }
}

fn dashboard_exprs(dashboard: &Value) -> Vec<&str> {
    let mut exprs = Vec::new();
    strings_of(dashboard, Some("expr"), &mut exprs);
    exprs
}

/// A Grafana query as plain PromQL: the interval variables Grafana fills in become 5m.
fn as_promql(expr: &str) -> String {
    ["$__rate_interval", "$__interval", "$__range"]
        .iter()
        .fold(expr.to_owned(), |e, var| e.replace(var, "5m"))
}

/// The `placement_webhook_*` identifiers in `text`.
fn metric_names(text: &str) -> BTreeSet<String> {
    let is_ident = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':';
    let mut names = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find(METRIC_PREFIX) {
        let starts_word = !rest[..at].ends_with(is_ident);
        let tail = &rest[at..];
        let end = tail.find(|c: char| !is_ident(c)).unwrap_or(tail.len());
        if starts_word {
            names.insert(tail[..end].to_owned());
        }
        rest = &tail[end..];
    }
    names
}

/// Exposed series names per metric family of an OpenMetrics text: counters are exposed as
/// `<name>_total`, histograms as `<name>_bucket`, `_sum` and `_count`.
fn exposed_series(exposition: &str) -> Vec<(String, Vec<String>)> {
    exposition
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .map(|l| {
            let (name, kind) = l.split_once(' ').expect("# TYPE name kind");
            let series = match kind {
                "counter" => vec![format!("{name}_total")],
                "gauge" => vec![name.to_owned()],
                "histogram" => ["_bucket", "_sum", "_count"]
                    .iter()
                    .map(|s| format!("{name}{s}"))
                    .collect(),
                other => panic!("{name}: metric type {other} not handled here"),
            };
            (name.to_owned(), series)
        })
        .collect()
}

#[test]
fn dashboard_queries_are_valid_promql() {
    let promtool = promtool();
    let dashboard = dashboard();
    let exprs = dashboard_exprs(&dashboard);
    assert!(exprs.len() >= 10, "{} queries", exprs.len());
    // promtool checks expressions in rules files: one recording rule per query. JSON is YAML.
    let rules: Vec<Value> = exprs
        .iter()
        .enumerate()
        .map(|(i, e)| json!({"record": format!("dashboard:query_{i}"), "expr": as_promql(e)}))
        .collect();
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("dashboard-queries.yaml");
    let file = json!({"groups": [{"name": "dashboard", "rules": rules}]});
    std::fs::write(&path, file.to_string()).expect("write rules");
    let out = run_promtool(
        &promtool,
        &["check", "rules", &path.display().to_string()],
        dir.path(),
    );
    assert!(
        out.contains(&format!("SUCCESS: {} rules found", exprs.len())),
        "{out}"
    );
}

#[test]
fn dashboard_uses_the_datasource_variable_and_ships_to_the_grafana_sidecar() {
    let dashboard = dashboard();
    let variables = dashboard["templating"]["list"]
        .as_array()
        .expect("templating");
    assert!(
        variables.iter().any(|v| v["name"] == "datasource"
            && v["type"] == "datasource"
            && v["query"] == "prometheus"),
        "a $datasource variable of Prometheus data sources"
    );
    let panels = dashboard["panels"].as_array().expect("panels");
    let mut queried = 0;
    for panel in panels.iter().filter(|p| p["type"] != "row") {
        let title = &panel["title"];
        assert_eq!(panel["datasource"]["uid"], "${datasource}", "{title}");
        let targets = panel["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "{title} has no query");
        for target in targets {
            assert_eq!(target["datasource"]["uid"], "${datasource}", "{title}");
            queried += 1;
        }
    }
    assert_eq!(queried, dashboard_exprs(&dashboard).len());

    let kustomization = yaml("deploy/monitoring/kustomization.yaml");
    let generator = kustomization["configMapGenerator"]
        .as_array()
        .expect("configMapGenerator")
        .iter()
        .find(|g| {
            g["files"].as_array().is_some_and(|f| {
                f.iter()
                    .any(|f| f.as_str().is_some_and(|f| f.ends_with("=dashboard.json")))
            })
        })
        .expect("a ConfigMap generated from dashboard.json");
    assert_eq!(generator["options"]["labels"]["grafana_dashboard"], "1");
    assert_eq!(generator["options"]["disableNameSuffixHash"], true);
}

/// Every metric the dashboard and the alerts name is one the server exports (checked against a
/// real server's /metrics), and every exported family is on the dashboard.
#[tokio::test]
async fn dashboard_and_alerts_name_only_exported_metrics() {
    let running = start(test_config()).await;
    let client = self_signed_client(&running);
    let reply = client.get("/metrics").await;
    running.stop().await;
    assert_eq!(reply.status, 200);
    let exposition = String::from_utf8(reply.body).expect("UTF-8");
    let families = exposed_series(&exposition);
    assert!(families.len() >= 12, "{exposition}");
    let exported: BTreeSet<&str> = families
        .iter()
        .flat_map(|(_, series)| series.iter().map(String::as_str))
        .collect();

    let dashboard = dashboard();
    let on_dashboard: BTreeSet<String> = dashboard_exprs(&dashboard)
        .iter()
        .flat_map(|e| metric_names(e))
        .collect();
    let mut rule_strings = Vec::new();
    let rules = yaml(RULES);
    strings_of(&rules, None, &mut rule_strings);
    let in_rules: BTreeSet<String> = rule_strings.iter().flat_map(|s| metric_names(s)).collect();
    assert!(in_rules.len() >= 8, "{in_rules:?}");
    for (what, names) in [("dashboard", &on_dashboard), ("alert rules", &in_rules)] {
        for name in names {
            assert!(
                exported.contains(name.as_str()),
                "the {what} names {name}, which /metrics does not expose:\n{exposition}"
            );
        }
    }
    for (family, series) in &families {
        assert!(
            series.iter().any(|s| on_dashboard.contains(s)),
            "{family} is exported but not on the dashboard"
        );
    }

    // Label values: snake_case as exported (all known in advance, so all are there at 0), and
    // every value the rules, their promtool tests and the dashboard match on is one of them.
    let values = label_values(&exposition);
    for (label, value) in &values {
        // `mode` carries the config's own spelling (`schedulerName`).
        if [
            "outcome",
            "where",
            "placement",
            "result",
            "query",
            "steered",
        ]
        .contains(&label.as_str())
        {
            assert!(
                value
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'),
                "{label}=\"{value}\" is not snake_case"
            );
        }
    }
    let mut matched = rule_strings.clone();
    let rule_tests = yaml(RULE_TESTS);
    strings_of(&rule_tests, None, &mut matched);
    matched.extend(dashboard_exprs(&dashboard));
    let mut checked = 0;
    for text in matched {
        for label in ["outcome", "where", "placement", "result"] {
            for value in matched_values(text, label) {
                checked += 1;
                assert!(
                    values.contains(&(label.to_owned(), value.clone())),
                    "{label}=\"{value}\" in {text:?} is not a value /metrics exports"
                );
            }
        }
    }
    assert!(checked >= 10, "{checked} label values checked");
}

/// (label, value) of every sample of an exposition.
fn label_values(exposition: &str) -> BTreeSet<(String, String)> {
    exposition
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            l.split_once('{')?
                .1
                .split_once('}')
                .map(|(labels, _)| labels)
        })
        .flat_map(|labels| labels.split("\","))
        .filter_map(|pair| {
            let (label, value) = pair.split_once("=\"")?;
            Some((label.to_owned(), value.trim_end_matches('"').to_owned()))
        })
        .collect()
}

/// The values `text` matches `label` on: `label="a"`, and each alternative of `label=~"a|b"`.
fn matched_values(text: &str, label: &str) -> Vec<String> {
    let mut out = Vec::new();
    for op in ["=\"", "=~\""] {
        let needle = format!("{label}{op}");
        for (at, _) in text.match_indices(&needle) {
            let starts_word =
                !text[..at].ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_');
            let rest = &text[at + needle.len()..];
            if let (true, Some((value, _))) = (starts_word, rest.split_once('"')) {
                out.extend(value.split('|').map(str::to_owned));
            }
        }
    }
    out
}

/// docs/metrics.md has a row for every family a replica can export.
#[test]
fn docs_name_every_exported_family() {
    use placement_webhook::hotspots::JobSummary;
    let metrics = placement_webhook::telemetry::Metrics::new();
    // The one family without children until a job runs.
    metrics.set_taskmanagers_on_hot_nodes(&[JobSummary {
        namespace: "flink".into(),
        job: "orders".into(),
        taskmanagers: 1,
        on_hot_nodes: 1,
        steered: 0,
        steered_on_hot_nodes: 0,
        on_nodes_without_readings: 0,
    }]);
    let docs = std::fs::read_to_string(repo_path("docs/metrics.md")).expect("docs/metrics.md");
    let rows: Vec<&str> = docs.lines().filter(|l| l.starts_with("| `")).collect();
    let families = exposed_series(&metrics.encode());
    assert!(families.len() >= 20, "{families:?}");
    for (family, series) in families {
        assert!(
            rows.iter().any(|row| series
                .iter()
                .chain([&family])
                .any(|s| row.starts_with(&format!("| `{s}`"))
                    || row.starts_with(&format!("| `{s}{{")))),
            "docs/metrics.md has no row for {family}"
        );
    }
}

#[test]
fn metric_names_are_found_whole() {
    let names = metric_names(
        "sum(rate(placement_webhook_reviews_total{a=\"b\"}[5m])) / x_placement_webhook_no \
         + placement_webhook_review_duration_seconds_bucket",
    );
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    assert_eq!(
        names,
        [
            "placement_webhook_review_duration_seconds_bucket",
            "placement_webhook_reviews_total"
        ]
    );
}
