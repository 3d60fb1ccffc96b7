//! The `prometheus` section: where node load is read and how series map to nodes. Plain data
//! and its validation; the client that uses it is `metrics_source::prometheus`.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PrometheusConfig {
    /// Base URL of Prometheus or a compatible querier (Thanos, Mimir: include the path prefix).
    pub url: String,
    #[serde(with = "humantime_serde")]
    pub refresh_interval: Duration,
    /// Per-query budget, sent to Prometheus too; well under `refresh_interval`.
    #[serde(with = "humantime_serde")]
    pub query_timeout: Duration,
    /// The `rate()` window: at least four scrape intervals.
    #[serde(with = "humantime_serde")]
    pub rate_window: Duration,
    pub node_mapping: NodeMapping,
    /// Network devices left out of the bandwidth sum (a PromQL regex).
    pub exclude_devices: String,
    pub auth: Option<Auth>,
    /// PEM CA bundle trusted for an `https` URL, besides the system roots.
    pub ca_file: Option<PathBuf>,
    /// Label matchers every series read must also match, e.g. `cluster="prod"` for a
    /// Prometheus that holds several clusters: filled in where a template says
    /// `{extra_selector}`, as every default template does. Empty: none.
    pub extra_selector: String,
    pub queries: QueryTemplates,
}

impl Default for PrometheusConfig {
    fn default() -> Self {
        PrometheusConfig {
            url: String::new(),
            refresh_interval: Duration::from_secs(15),
            query_timeout: Duration::from_secs(5),
            rate_window: Duration::from_secs(120),
            node_mapping: NodeMapping::default(),
            exclude_devices: "lo|veth.*|cali.*|flannel.*|cni.*|docker.*".into(),
            auth: None,
            ca_file: None,
            extra_selector: String::new(),
            queries: QueryTemplates::default(),
        }
    }
}

/// Credentials sent with every query.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Auth {
    /// `Authorization: Bearer <file contents>`; the file is re-read each refresh, so projected
    /// service-account tokens rotate.
    Bearer { token_file: PathBuf },
    Basic {
        username: String,
        password_file: PathBuf,
    },
}

/// PromQL templates. `{by}` is the grouping label of the node mapping, `{window}` the rate
/// window, `{exclude_devices}` the device regex, `{extra_selector}` the configured extra
/// matchers, each followed by a comma, at the start of a selector's braces
/// (`metric{{extra_selector}mode="idle"}`); `metric{{extra_selector}}` for a selector with no
/// matchers of its own (it is left out whole while there are none). Optional queries can be
/// turned off with `null`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct QueryTemplates {
    /// CPU busy fraction, 0..1.
    pub(crate) cpu: String,
    /// Receive + transmit bytes per second.
    pub(crate) network: String,
    /// CPU cores, for the in-flight ledger when no inventory knows the node.
    pub(crate) cpu_cores: Option<String>,
    /// NIC speed in bytes per second.
    pub(crate) network_capacity: Option<String>,
    /// Memory used fraction, 0..1.
    pub(crate) memory: Option<String>,
    /// `instance` → `nodename`, used by the `uname` node mapping only.
    pub(crate) uname: String,
    /// CPU cores used by each running TaskManager, labelled `namespace` and `pod` (cAdvisor
    /// series, as kube-prometheus-stack scrapes them): new pods of a job are estimated from
    /// their running siblings.
    pub(crate) pod_cpu: Option<String>,
    /// Receive + transmit bytes per second of each pod, labelled `namespace` and `pod`.
    pub(crate) pod_network: Option<String>,
    /// How many samples each node's exporter series holds over the window: a node whose series
    /// is younger than the window (it just joined, its exporter or Prometheus restarted) is read
    /// over the span it has, and the in-flight ledger reads its pods over the same span.
    pub(crate) node_samples: Option<String>,
}

impl Default for QueryTemplates {
    fn default() -> Self {
        QueryTemplates {
            // A series younger than the window (a node that just joined, an exporter that just
            // started) is read by its slope over the samples it has: rate() would extrapolate
            // its increase over the whole window and read it almost idle, hence almost busy.
            cpu: concat!(
                r#"1 - avg by ({by}) ((rate(node_cpu_seconds_total{{extra_selector}mode="idle"}[{window}])"#,
                r#" and node_cpu_seconds_total{{extra_selector}mode="idle"} offset {window})"#,
                r#" or deriv(node_cpu_seconds_total{{extra_selector}mode="idle"}[{window}]))"#
            )
            .into(),
            // Two sums, not one rate over a name regex: rate() drops the name, and receive and
            // transmit of one device would then clash.
            network: concat!(
                r#"sum by ({by}) ((rate(node_network_receive_bytes_total{{extra_selector}device!~"{exclude_devices}"}[{window}])"#,
                r#" and node_network_receive_bytes_total{{extra_selector}device!~"{exclude_devices}"} offset {window})"#,
                r#" or deriv(node_network_receive_bytes_total{{extra_selector}device!~"{exclude_devices}"}[{window}]))"#,
                r#" + sum by ({by}) ((rate(node_network_transmit_bytes_total{{extra_selector}device!~"{exclude_devices}"}[{window}])"#,
                r#" and node_network_transmit_bytes_total{{extra_selector}device!~"{exclude_devices}"} offset {window})"#,
                r#" or deriv(node_network_transmit_bytes_total{{extra_selector}device!~"{exclude_devices}"}[{window}]))"#
            )
            .into(),
            cpu_cores: Some(r#"count by ({by}) (node_cpu_seconds_total{{extra_selector}mode="idle"})"#.into()),
            network_capacity: Some(
                r#"max by ({by}) (node_network_speed_bytes{{extra_selector}device!~"{exclude_devices}"} > 0)"#.into(),
            ),
            memory: Some(
                "1 - sum by ({by}) (node_memory_MemAvailable_bytes{{extra_selector}}) / sum by ({by}) (node_memory_MemTotal_bytes{{extra_selector}})".into(),
            ),
            // An instance whose last scrape failed has no current sample (Prometheus marks its
            // series stale) while its rates over the window still read: it keeps the name it
            // had within the window, so one failed scrape does not drop its node from a refresh.
            uname: concat!(
                "max by (instance, nodename) (node_uname_info{{extra_selector}})",
                " or max by (instance, nodename) (last_over_time(node_uname_info{{extra_selector}}[{window}])",
                " unless on (instance) node_uname_info{{extra_selector}})"
            )
            .into(),
            pod_cpu: Some(
                r#"sum by (namespace, pod) (rate(container_cpu_usage_seconds_total{{extra_selector}container="flink-main-container"}[{window}]))"#.into(),
            ),
            // The pod's own network namespace: its interfaces are eth0 and lo.
            pod_network: Some(concat!(
                r#"sum by (namespace, pod) (rate(container_network_receive_bytes_total{{extra_selector}interface!~"{exclude_devices}"}[{window}]))"#,
                r#" + sum by (namespace, pod) (rate(container_network_transmit_bytes_total{{extra_selector}interface!~"{exclude_devices}"}[{window}]))"#
            ).into()),
            // One series a node, from the exporter its CPU and network come from.
            node_samples: Some(
                "max by ({by}) (count_over_time(node_uname_info{{extra_selector}}[{window}]))"
                    .into(),
            ),
        }
    }
}

impl PrometheusConfig {
    /// A config for `url` with every other key at its default.
    pub fn for_url(url: &str) -> Self {
        PrometheusConfig {
            url: url.into(),
            ..PrometheusConfig::default()
        }
    }

    pub(crate) fn validate(&self) -> Result<(), String> {
        let mut problems = Vec::new();
        match reqwest::Url::parse(&self.url) {
            Ok(u) if matches!(u.scheme(), "http" | "https") => {}
            Ok(u) => problems.push(format!("url scheme {:?} is not http or https", u.scheme())),
            Err(e) => problems.push(format!("url {:?}: {e}", self.url)),
        }
        if self.refresh_interval < Duration::from_secs(1) {
            problems.push("refresh_interval must be >= 1s".into());
        }
        if self.query_timeout.is_zero() || self.query_timeout >= self.refresh_interval {
            problems.push("query_timeout must be > 0 and shorter than refresh_interval".into());
        }
        if self.rate_window < Duration::from_secs(1) {
            problems.push("rate_window must be >= 1s".into());
        }
        if !is_label_name(self.node_mapping.group_label()) {
            problems.push(format!(
                "node_mapping label {:?} is not a Prometheus label name",
                self.node_mapping.group_label()
            ));
        }
        let q = &self.queries;
        if q.cpu.trim().is_empty() || q.network.trim().is_empty() || q.uname.trim().is_empty() {
            problems
                .push("queries.cpu, queries.network and queries.uname must not be empty".into());
        }
        for (name, template) in q.all() {
            for unknown in placeholders(template).filter(|p| !PLACEHOLDERS.contains(p)) {
                problems.push(format!(
                    "queries.{name}: unknown placeholder {{{unknown}}} (known: {})",
                    PLACEHOLDERS.map(|p| format!("{{{p}}}")).join(", ")
                ));
            }
        }
        if let Err(e) = matchers(&self.extra_selector) {
            problems.push(format!("extra_selector {:?}: {e}", self.extra_selector));
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("; "))
        }
    }
}

/// The placeholders a query template may hold.
pub(crate) const PLACEHOLDERS: [&str; 4] = ["by", "window", "exclude_devices", "extra_selector"];

impl QueryTemplates {
    /// Every template that is set, with its key.
    pub(crate) fn all(&self) -> impl Iterator<Item = (&'static str, &str)> {
        [
            ("cpu", Some(&self.cpu)),
            ("network", Some(&self.network)),
            ("cpu_cores", self.cpu_cores.as_ref()),
            ("network_capacity", self.network_capacity.as_ref()),
            ("memory", self.memory.as_ref()),
            ("uname", Some(&self.uname)),
            ("pod_cpu", self.pod_cpu.as_ref()),
            ("pod_network", self.pod_network.as_ref()),
            ("node_samples", self.node_samples.as_ref()),
        ]
        .into_iter()
        .filter_map(|(name, t)| Some((name, t?.as_str())))
    }
}

/// The names in `{name}` of a template: a brace holding a label name alone, which PromQL never
/// writes (its matchers always have an operator).
fn placeholders(template: &str) -> impl Iterator<Item = &str> {
    template.split('{').skip(1).filter_map(|rest| {
        let (name, _) = rest.split_once('}')?;
        is_label_name(name).then_some(name)
    })
}

/// `extra_selector` as the matchers it holds, each with its comma: `a="x",b=~"y",`. Checks
/// each is `label op "value"`, so a typo is a config error at start rather than a PromQL
/// error at every refresh.
pub(crate) fn matchers(selector: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = selector.trim();
    while !rest.is_empty() {
        let name_end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        let name = &rest[..name_end];
        if !is_label_name(name) {
            return Err(format!("expected a label name at {rest:?}"));
        }
        let after = rest[name_end..].trim_start();
        let Some(op) = ["=~", "!~", "!=", "="]
            .into_iter()
            .find(|op| after.starts_with(op))
        else {
            return Err(format!("expected =, !=, =~ or !~ after {name}"));
        };
        let value = after[op.len()..].trim_start();
        let Some(body) = value.strip_prefix('"') else {
            return Err(format!("expected a double-quoted value after {name}{op}"));
        };
        // The closing quote: the first one not escaped by a backslash.
        let mut escaped = false;
        let Some(close) = body.char_indices().find_map(|(i, c)| {
            let end = c == '"' && !escaped;
            escaped = c == '\\' && !escaped;
            end.then_some(i)
        }) else {
            return Err(format!("the value of {name} is not closed"));
        };
        out.push_str(&format!("{name}{op}\"{}\",", &body[..close]));
        rest = body[close + 1..].trim_start();
        if let Some(next) = rest.strip_prefix(',') {
            rest = next.trim_start();
        } else if !rest.is_empty() {
            return Err(format!("expected a comma before {rest:?}"));
        }
    }
    Ok(out)
}

fn is_label_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// How a series names its node.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(tag = "by", rename_all = "snake_case", deny_unknown_fields)]
pub enum NodeMapping {
    /// A label already holds the node name (`node`, `nodename`, `instance`…); a `:port`
    /// suffix is dropped.
    Label { name: String },
    /// `instance` joined with `node_uname_info{nodename}`: plain node_exporter, and the
    /// kube-prometheus-stack default where `instance` is `<ip>:9100`.
    #[default]
    Uname,
    /// The host part of `instance` is a node's InternalIP, as the node inventory knows it.
    InternalIp,
}

impl NodeMapping {
    /// The label every query aggregates by.
    pub(crate) fn group_label(&self) -> &str {
        match self {
            NodeMapping::Label { name } => name,
            NodeMapping::Uname | NodeMapping::InternalIp => "instance",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_parses_with_defaults_and_validates() {
        let config: PrometheusConfig = serde_saphyr::from_str(
            "url: https://thanos:10902/prefix\nnode_mapping: {by: label, name: nodename}\nauth: {type: basic, username: u, password_file: /p}\n",
        )
        .expect("parse");
        assert_eq!(config.refresh_interval, Duration::from_secs(15));
        config.validate().expect("valid");
        for bad in [
            "url: ftp://x",
            "url: http://x\nquery_timeout: 20s",
            "url: http://x\nnode_mapping: {by: label, name: 'bad-label'}",
            "url: ''",
        ] {
            let c: PrometheusConfig = serde_saphyr::from_str(bad).expect("parse");
            assert!(c.validate().is_err(), "accepted {bad}");
        }
        assert!(serde_saphyr::from_str::<PrometheusConfig>("url: x\nrefresh: 1s").is_err());
    }

    #[test]
    fn an_unknown_placeholder_is_named_at_start() {
        let mut c = PrometheusConfig::for_url("http://p:9090");
        c.queries.memory = Some("avg by ({by}) (m[{windw}])".into());
        c.queries.pod_cpu = Some("sum(x{a=\"{b}\"})".into());
        let msg = c.validate().expect_err("a misspelt placeholder");
        assert!(
            msg.contains(
                "queries.memory: unknown placeholder {windw} (known: {by}, {window}, {exclude_devices}, {extra_selector})"
            ),
            "{msg}"
        );
        // Inside a PromQL string a brace-enclosed name is still a placeholder that was never filled.
        assert!(
            msg.contains("queries.pod_cpu: unknown placeholder {b}"),
            "{msg}"
        );
        assert!(!msg.contains("{by} ("), "{msg}");
        // The defaults hold known placeholders only; matchers in braces are not placeholders.
        PrometheusConfig::for_url("http://p:9090")
            .validate()
            .expect("defaults");
    }

    #[test]
    fn the_extra_selector_is_checked_at_start() {
        for (given, want) in [
            ("", ""),
            (r#"cluster="prod""#, r#"cluster="prod","#),
            (
                r#" cluster = "prod" , env!~"dev|test", "#,
                r#"cluster="prod",env!~"dev|test","#,
            ),
            (r#"a="x\"y,z""#, r#"a="x\"y,z","#),
        ] {
            assert_eq!(matchers(given).as_deref(), Ok(want), "{given}");
            let mut c = PrometheusConfig::for_url("http://p:9090");
            c.extra_selector = given.into();
            c.validate().expect(given);
        }
        for bad in [
            "cluster=prod",
            r#"{cluster="prod"}"#,
            r#"cluster=="prod""#,
            r#"cluster="prod" env="x""#,
            r#"cluster="prod"#,
            r#"9x="a""#,
        ] {
            let mut c = PrometheusConfig::for_url("http://p:9090");
            c.extra_selector = bad.into();
            let msg = c.validate().expect_err(bad);
            assert!(msg.starts_with("extra_selector "), "{bad}: {msg}");
        }
    }
}
