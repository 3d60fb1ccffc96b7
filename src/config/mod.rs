//! Typed configuration: one YAML file, every key with a default, validated once at start.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub(crate) mod election;
pub(crate) mod forward;
pub(crate) mod heat_bands;
pub(crate) mod inflight;
pub mod kube_scheduler;
pub(crate) mod names;
pub mod prometheus;

use names::is_qualified_name;
use prometheus::PrometheusConfig;

pub mod scheduler;

pub(crate) use election::ElectionConfig;
pub(crate) use forward::ForwardConfig;
pub use heat_bands::HeatBands;
pub(crate) use inflight::{
    DEFAULT_MAX_INFLIGHT, DEFAULT_MAX_LANDINGS, EstimateConfig, HandoverRule, InflightConfig,
};
pub(crate) use scheduler::SchedulerConfig;

/// A Lease: for the scheduler's, its `leaderElection.resourceNamespace` and `resourceName`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LeaseRef {
    pub(crate) namespace: String,
    pub(crate) name: String,
    /// How often its holder renews it (`leaderElection.retryPeriod`, upstream 2 s). Three
    /// periods without a renewal and it counts as lapsed, when that comes before its
    /// `leaseDurationSeconds` run out. Unset: only `leaseDurationSeconds` counts.
    #[serde(
        default,
        with = "humantime_serde",
        skip_serializing_if = "Option::is_none"
    )]
    pub(crate) renewed_every: Option<Duration>,
}

impl LeaseRef {
    /// The Lease `namespace/name`, lapsing only at its `leaseDurationSeconds`.
    pub fn named(namespace: &str, name: &str) -> Self {
        LeaseRef {
            namespace: namespace.into(),
            name: name.into(),
            renewed_every: None,
        }
    }
}

impl std::fmt::Display for LeaseRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Address the HTTPS server binds.
    pub listen: SocketAddr,
    /// Serving certificate and key (PEM). Without them `serve` makes a self-signed one for localhost.
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    /// When set, clients must present a certificate signed by this CA (apiserver client auth).
    pub client_ca: Option<PathBuf>,
    /// Static snapshot file; used when no Prometheus is configured.
    pub metrics_file: Option<PathBuf>,
    pub mode: Mode,
    /// Profile set in `spec.schedulerName` by the `scheduler_name` and `both` modes.
    pub scheduler_name: String,
    /// Older snapshots are not used: the webhook fails open instead.
    #[serde(with = "humantime_serde")]
    pub max_staleness: Duration,
    pub targets: Targets,
    pub placement: PlacementConfig,
    pub inflight: InflightConfig,
    pub prometheus: Option<PrometheusConfig>,
    pub limits: Limits,
    /// The cluster's own KubeSchedulerConfiguration file. When set, `scheduler` is read from
    /// its profile (`scheduler_name` in schedulerName/both mode, else `default-scheduler`) when
    /// the config is loaded; keys given in `scheduler` override the file's.
    pub scheduler_config_file: Option<PathBuf>,
    /// The cluster's kube-scheduler, as the placement model predicts it.
    pub scheduler: SchedulerConfig,
    /// The leader Lease of the scheduler that `scheduler_name` names (schedulerName/both
    /// modes): pods are routed there only while its holder renews it, else steered with
    /// affinity for the default scheduler. Read from `scheduler_config_file`'s `leaderElection`
    /// when not given; with neither, pods are always routed.
    pub scheduler_lease: Option<LeaseRef>,
    /// The default scheduler's leader Lease. When its leader took it tells which nodes that
    /// scheduler listed at its start (their order: `scheduler.listed_node_order`) and which
    /// joined later (appended in the order they joined). `null`: every node as listed.
    pub default_scheduler_lease: Option<LeaseRef>,
    /// The webhook's own Service, which the apiserver calls: its one endpoint is the deciding
    /// replica. The live replicas are the ready pods behind `<service>-replicas` (this pod is
    /// `POD_NAME` in `POD_NAMESPACE`).
    pub service: String,
    /// Which replica decides: the holder of the Lease `<service>-decider`.
    pub election: ElectionConfig,
    /// Reviews that reach another replica (during a takeover) sent on to the deciding one.
    pub forward: ForwardConfig,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: SocketAddr::from(([0, 0, 0, 0], 8443)),
            tls_cert: None,
            tls_key: None,
            client_ca: None,
            metrics_file: None,
            mode: Mode::Affinity,
            scheduler_name: "placement-scheduler".into(),
            max_staleness: Duration::from_secs(120),
            targets: Targets::default(),
            placement: PlacementConfig::default(),
            inflight: InflightConfig::default(),
            prometheus: None,
            limits: Limits::default(),
            scheduler_config_file: None,
            scheduler: SchedulerConfig::default(),
            scheduler_lease: None,
            default_scheduler_lease: Some(LeaseRef::named("kube-system", "kube-scheduler")),
            service: "placement-webhook".into(),
            election: ElectionConfig::default(),
            forward: ForwardConfig::default(),
        }
    }
}

/// What the webhook writes into a targeted pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Mode {
    /// Weighted preferred node affinity.
    Affinity,
    /// `spec.schedulerName` set to the configured profile.
    SchedulerName,
    Both,
    /// Shadow: decide as `affinity` would, write only the decision annotation, and compare
    /// where the scheduler puts the pod with where the webhook would have.
    Observe,
}

impl Mode {
    pub(crate) fn writes_affinity(self) -> bool {
        matches!(self, Mode::Affinity | Mode::Both)
    }
    pub(crate) fn writes_scheduler_name(self) -> bool {
        matches!(self, Mode::SchedulerName | Mode::Both)
    }
    /// Decides and charges the ledger, but leaves the pod's placement terms alone.
    pub(crate) fn observes_only(self) -> bool {
        self == Mode::Observe
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Affinity => "affinity",
            Mode::SchedulerName => "schedulerName",
            Mode::Both => "both",
            Mode::Observe => "observe",
        }
    }
}

/// Which pods are steered: a label selector in the Kubernetes shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Targets {
    pub match_labels: BTreeMap<String, String>,
    pub match_expressions: Vec<LabelRequirement>,
}

impl Default for Targets {
    fn default() -> Self {
        Targets {
            match_labels: BTreeMap::from([("component".into(), "taskmanager".into())]),
            match_expressions: vec![LabelRequirement {
                key: "type".into(),
                operator: SelectorOperator::In,
                values: vec![
                    "flink-native-kubernetes".into(),
                    "flink-standalone-kubernetes".into(),
                ],
            }],
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LabelRequirement {
    pub key: String,
    pub operator: SelectorOperator,
    #[serde(default)]
    pub values: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SelectorOperator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

/// Everything `placement::decide` reads besides the pod and the view.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PlacementConfig {
    pub weights: HeatWeights,
    pub hot: HotThresholds,
    /// Preferred tiers, coolest first. Large weight gaps survive resource scoring: the
    /// scheduler counts NodeAffinity's score twice (docs/design.md, "How it works in depth").
    pub tiers: Vec<Tier>,
    pub avoid_hot: AvoidHot,
    pub node_match: NodeMatch,
    /// Node-group pinning rules, written as required node affinity.
    pub pinning: Vec<PinningRule>,
    /// Assumed allocatable cores of a node whose capacity is unknown (ledger arithmetic only).
    pub default_node_cpu_cores: f64,
    /// When the scheduler scores only a sample of the feasible nodes, tier 1 names enough
    /// nodes that none of them is in the sample with at most this probability.
    pub sample_miss: f64,
    /// Candidates within this share of what the pod adds to the best node count as tied;
    /// each replica orders them its own way, so replicas deciding at once rarely pick the
    /// same node. 0.5: within half a pod of the best. A replica known to decide alone takes
    /// exact ties only for a pod the scheduler scores on every feasible node.
    pub tie_band: f64,
    /// Nodes are ranked on their expected in-flight load plus this many standard deviations
    /// of it, where sampling leaves the landing uncertain (0: expected load only).
    pub uncertainty: f64,
    /// When no feasible node is under the hot thresholds, keep naming the least bad ones
    /// (water-filling past the thresholds) instead of leaving the pod to request scores.
    pub saturated: bool,
    /// For a pod without a network estimate (Flink TaskManagers shuffle all the same): added
    /// to a node's rank, times its NIC's load (a share of its link speed, or of the busiest
    /// node's traffic when link speeds are unknown). 0.05: the busiest NIC counts as five
    /// points of CPU.
    pub nic_penalty: f64,
    /// A job's own spread over nodes and zones (off by default).
    pub per_job: PerJob,
    /// Graded coverage of every node by a heat band label (off by default).
    pub heat_bands: HeatBands,
}

/// How far one job's TaskManagers may concentrate (off when unset). A job is a namespace and
/// the `app` label of `component: taskmanager` pods (Flink's native integration); its pods
/// count where they run, are bound or are steered and not bound yet.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PerJob {
    /// A node holding this many of the job's pods is not a candidate while another is.
    pub(crate) max_per_node: Option<u32>,
    /// A zone (`topology.kubernetes.io/zone`) that would hold more than this share of the
    /// job's pods with this one is not a candidate while another is.
    pub(crate) max_per_zone: Option<f64>,
}

impl PerJob {
    pub(crate) fn is_off(&self) -> bool {
        self.max_per_node.is_none() && self.max_per_zone.is_none()
    }
}

impl Default for PlacementConfig {
    fn default() -> Self {
        PlacementConfig {
            weights: HeatWeights::default(),
            hot: HotThresholds::default(),
            // One top node the resource scores cannot overturn (200 affinity points against
            // at most 150), fallbacks far below it. Tier 1 grows by itself
            // when the scheduler samples.
            tiers: vec![
                Tier {
                    nodes: 1,
                    weight: 100,
                },
                Tier {
                    nodes: 6,
                    weight: 20,
                },
            ],
            avoid_hot: AvoidHot::default(),
            node_match: NodeMatch::default(),
            pinning: Vec::new(),
            default_node_cpu_cores: 16.0,
            sample_miss: 0.002,
            tie_band: 0.5,
            uncertainty: 1.0,
            saturated: true,
            nic_penalty: 0.05,
            per_job: PerJob::default(),
            heat_bands: HeatBands::default(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HeatWeights {
    pub(crate) cpu: f64,
    pub(crate) network: f64,
    pub(crate) memory: f64,
}

impl Default for HeatWeights {
    fn default() -> Self {
        HeatWeights {
            cpu: 0.6,
            network: 0.4,
            memory: 0.0,
        }
    }
}

/// A node at or above any of these fractions is hot: never preferred, and named in the avoid term.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HotThresholds {
    pub cpu: f64,
    pub(crate) network: f64,
    pub(crate) memory: f64,
}

impl Default for HotThresholds {
    fn default() -> Self {
        HotThresholds {
            cpu: 0.85,
            network: 0.85,
            memory: 0.95,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tier {
    /// How many nodes this tier names.
    pub(crate) nodes: usize,
    /// Preferred term weight, 1..100.
    pub(crate) weight: i32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AvoidHot {
    /// Weight of the "any node but these hot ones" term; 0 turns it off.
    pub(crate) weight: i32,
    /// The hottest nodes named at most, so the patch stays small on large clusters.
    pub(crate) max_nodes: usize,
}

impl Default for AvoidHot {
    fn default() -> Self {
        AvoidHot {
            weight: 1,
            max_nodes: 32,
        }
    }
}

/// How a preferred term names a node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "by", rename_all = "snake_case", deny_unknown_fields)]
pub enum NodeMatch {
    /// `matchFields metadata.name`, one term per node (the apiserver allows one value each).
    Name,
    /// `matchExpressions <key> In [...]`, one term per tier, for the nodes whose value of the
    /// label is their name (the kubelet's `kubernetes.io/hostname` usually is); any other node
    /// is named by `metadata.name` in a term of its own.
    Label { key: String },
}

/// The label every kubelet sets, one value per node.
pub(crate) const HOSTNAME_LABEL: &str = crate::well_known::HOSTNAME;

/// By the hostname label: a tier is one term, not one per node, so a steered pod carries a
/// few KB of affinity at 5,000 nodes instead of about 15 KB.
impl Default for NodeMatch {
    fn default() -> Self {
        NodeMatch::Label {
            key: HOSTNAME_LABEL.to_string(),
        }
    }
}

/// Pods labelled `pod_label=V` may only run on nodes labelled `node_label=V`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PinningRule {
    pub(crate) pod_label: String,
    pub(crate) node_label: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Reviews processed at once; more are answered at once with `allowed:true` and no patch.
    pub max_concurrent_reviews: usize,
    /// Time allowed for a client to send request headers (slowloris guard).
    #[serde(with = "humantime_serde")]
    pub header_read_timeout: Duration,
    /// Upper bound on one review when the apiserver sends no `?timeout=`.
    #[serde(with = "humantime_serde")]
    pub request_timeout: Duration,
    /// Largest request body accepted (the apiserver sends at most 3 MiB).
    pub max_body_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_concurrent_reviews: 1024,
            header_read_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(10),
            max_body_bytes: 3 * 1024 * 1024,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    // The reasons are part of the message and deliberately not `#[source]`: callers print
    // error chains, which would repeat them.
    #[error("cannot read config file {path}: {error}")]
    Read { path: String, error: std::io::Error },
    /// One line (`... at line L, column C`), without the source snippet the parser can draw.
    /// Boxed: the parser's error is large and `Result<_, ConfigError>` is returned often.
    #[error("config file {path} is not valid: {}", error.without_snippet())]
    Parse {
        path: String,
        error: Box<serde_saphyr::Error>,
    },
    #[error("invalid config: {0}")]
    Invalid(String),
    #[error(transparent)]
    SchedulerFile(#[from] kube_scheduler::KubeSchedulerConfigError),
}

impl Config {
    pub fn from_file(path: &Path) -> Result<Self, ConfigError> {
        Self::from_file_overridden(path, |_| {})
    }

    /// As [`Config::from_file`], with `overrides` (the command line's flags) applied to what the
    /// file says before anything is derived from it: a `--mode` picks the scheduler profile
    /// read from `scheduler_config_file` as the file's own `mode` would.
    pub fn from_file_overridden(
        path: &Path,
        overrides: impl FnOnce(&mut Config),
    ) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|error| ConfigError::Read {
            path: path.display().to_string(),
            error,
        })?;
        let mut config: Config =
            serde_saphyr::from_str(&text).map_err(|error| ConfigError::Parse {
                path: path.display().to_string(),
                error: Box::new(error),
            })?;
        overrides(&mut config);
        if let Some(file) = &config.scheduler_config_file {
            let profile = if config.mode.writes_scheduler_name() {
                config.scheduler_name.as_str()
            } else {
                crate::well_known::DEFAULT_SCHEDULER_NAME
            };
            let from_file = kube_scheduler::load(file, profile)?;
            config.scheduler = with_explicit_scheduler_keys(from_file, &text)?;
            if config.mode.writes_scheduler_name() && config.scheduler_lease.is_none() {
                config.scheduler_lease = kube_scheduler::load_leader_lease(file)?;
            }
        }
        config.validate()?;
        Ok(config)
    }

    /// Checks what types cannot; every problem found is named.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let mut problems = Vec::new();
        let p = &self.placement;
        let w = &p.weights;
        for (name, v) in [("cpu", w.cpu), ("network", w.network), ("memory", w.memory)] {
            if !(v.is_finite() && v >= 0.0) {
                problems.push(format!("placement.weights.{name} must be >= 0"));
            }
        }
        if w.cpu + w.network + w.memory <= 0.0 {
            problems.push("placement.weights must not all be 0".into());
        }
        let h = &p.hot;
        for (name, v) in [("cpu", h.cpu), ("network", h.network), ("memory", h.memory)] {
            if !(v > 0.0 && v <= 1.0) {
                problems.push(format!("placement.hot.{name} must be in (0, 1]"));
            }
        }
        if p.tiers.is_empty() {
            problems.push("placement.tiers needs at least one tier".into());
        }
        for (i, t) in p.tiers.iter().enumerate() {
            if !(1..=100).contains(&t.weight) {
                problems.push(format!("placement.tiers[{i}].weight must be 1..100"));
            }
            if t.nodes == 0 {
                problems.push(format!("placement.tiers[{i}].nodes must be >= 1"));
            }
        }
        if p.tiers.windows(2).any(|t| t[1].weight >= t[0].weight) {
            problems.push("placement.tiers weights must decrease from tier to tier".into());
        }
        if !(p.sample_miss > 0.0 && p.sample_miss <= 0.5) {
            problems.push("placement.sample_miss must be in (0, 0.5]".into());
        }
        if !(p.uncertainty >= 0.0 && p.uncertainty <= 5.0) {
            problems.push("placement.uncertainty must be in [0, 5]".into());
        }
        if !(p.nic_penalty >= 0.0 && p.nic_penalty <= 1.0) {
            problems.push("placement.nic_penalty must be in [0, 1]".into());
        }
        if p.per_job.max_per_node == Some(0) {
            problems.push("placement.per_job.max_per_node must be >= 1".into());
        }
        if p.per_job
            .max_per_zone
            .is_some_and(|s| !(s > 0.0 && s <= 1.0))
        {
            problems.push("placement.per_job.max_per_zone must be in (0, 1]".into());
        }
        p.heat_bands.problems(&mut problems);
        if !(p.tie_band >= 0.0 && p.tie_band <= 1.0) {
            problems.push("placement.tie_band must be in [0, 1]".into());
        }
        if !(0..=100).contains(&p.avoid_hot.weight) {
            problems.push("placement.avoid_hot.weight must be 0..100".into());
        }
        if let NodeMatch::Label { key } = &p.node_match
            && !is_qualified_name(key)
        {
            problems.push(format!(
                "placement.node_match.key {key:?} is not a valid label key"
            ));
        }
        for (i, rule) in p.pinning.iter().enumerate() {
            for key in [&rule.pod_label, &rule.node_label] {
                if !is_qualified_name(key) {
                    problems.push(format!(
                        "placement.pinning[{i}]: {key:?} is not a valid label key"
                    ));
                }
            }
        }
        if !(p.default_node_cpu_cores.is_finite() && p.default_node_cpu_cores > 0.0) {
            problems.push("placement.default_node_cpu_cores must be > 0".into());
        }
        if self.max_staleness.is_zero() {
            problems.push("max_staleness must be > 0".into());
        }
        if self.tls_cert.is_some() != self.tls_key.is_some() {
            problems.push("tls_cert and tls_key go together".into());
        }
        if self.scheduler_name.is_empty() && self.mode.writes_scheduler_name() {
            problems.push("scheduler_name must be set for mode schedulerName/both".into());
        }
        let i = &self.inflight;
        if !(i.network_bytes_per_second.is_finite() && i.network_bytes_per_second >= 0.0) {
            problems.push("inflight.network_bytes_per_second must be >= 0".into());
        }
        if !(i.default_cpu_cores.is_finite() && i.default_cpu_cores >= 0.0) {
            problems.push("inflight.default_cpu_cores must be >= 0".into());
        }
        if i.max_entries == 0 {
            problems.push("inflight.max_entries must be >= 1".into());
        }
        if i.max_landings == 0 {
            problems.push("inflight.max_landings must be >= 1".into());
        }
        let e = &i.estimate;
        if e.min_siblings == 0 {
            problems.push("inflight.estimate.min_siblings must be >= 1".into());
        }
        if !(0.0..=1.0).contains(&e.percentile) {
            problems.push("inflight.estimate.percentile must be in 0..1".into());
        }
        if !(e.min_cpu_cores.is_finite() && e.min_cpu_cores >= 0.0) {
            problems.push("inflight.estimate.min_cpu_cores must be >= 0".into());
        }
        if self.limits.max_concurrent_reviews == 0 {
            problems.push("limits.max_concurrent_reviews must be >= 1".into());
        }
        if self.limits.max_body_bytes < 1024 {
            problems.push("limits.max_body_bytes must be >= 1024".into());
        }
        if let Some(prom) = &self.prometheus
            && let Err(e) = prom.validate()
        {
            problems.push(format!("prometheus: {e}"));
        }
        problems.extend(self.scheduler.problems());
        if self.election.enabled {
            problems.extend(self.election.problems());
        }
        if self.forward.enabled && self.forward.timeout.is_zero() {
            problems.push("forward.timeout must be above 0 while forward.enabled".into());
        }
        for (i, r) in self.targets.match_expressions.iter().enumerate() {
            let needs_values = matches!(r.operator, SelectorOperator::In | SelectorOperator::NotIn);
            if needs_values == r.values.is_empty() {
                problems.push(format!(
                    "targets.match_expressions[{i}]: In/NotIn need values, Exists/DoesNotExist none"
                ));
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(ConfigError::Invalid(problems.join("; ")))
        }
    }
}

/// `from_file` overlaid with the keys the config file's own `scheduler:` section sets, so
/// that section stays an override of the KubeSchedulerConfiguration file key by key (maps
/// merge, lists are replaced whole). Parsed typed defaults cannot tell a key that was set from
/// one that was left out, so the section is read again as plain data.
fn with_explicit_scheduler_keys(
    from_file: SchedulerConfig,
    config_text: &str,
) -> Result<SchedulerConfig, ConfigError> {
    #[derive(Deserialize)]
    struct SchedulerSection {
        #[serde(default)]
        scheduler: Option<serde_json::Value>,
    }
    let invalid = |e: &dyn std::fmt::Display| ConfigError::Invalid(format!("scheduler: {e}"));
    // The text already parsed as a `Config`, so this parse cannot fail on its own.
    let section: SchedulerSection =
        serde_saphyr::from_str(config_text).map_err(|e| invalid(&e.without_snippet()))?;
    let Some(explicit) = section.scheduler else {
        return Ok(from_file);
    };
    let mut merged = serde_json::to_value(&from_file).map_err(|e| invalid(&e))?;
    overlay(&mut merged, explicit);
    serde_json::from_value(merged).map_err(|e| invalid(&e))
}

fn overlay(base: &mut serde_json::Value, over: serde_json::Value) {
    match (base, over) {
        (serde_json::Value::Object(base), serde_json::Value::Object(over)) => {
            for (key, value) in over {
                match base.get_mut(&key) {
                    Some(slot) => overlay(slot, value),
                    None => {
                        base.insert(key, value);
                    }
                }
            }
        }
        (slot, value) => *slot = value,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_file_gives_valid_defaults() {
        let c: Config = serde_saphyr::from_str("{}").expect("parse");
        assert_eq!(c, Config::default());
        c.validate().expect("defaults are valid");
    }

    #[test]
    fn unknown_keys_are_rejected() {
        let err = serde_saphyr::from_str::<Config>("mdoe: affinity").expect_err("typo accepted");
        assert!(err.to_string().contains("mdoe"), "{err}");
    }

    #[test]
    fn parse_errors_name_the_unknown_key_and_its_line() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("config.yaml");
        std::fs::write(
            &path,
            "mode: affinity\nplacement:\n  tiers: [{nodes: 2, weight: 50}]\n  avoid_hot:\n    wieght: 10\n",
        )
        .expect("write");
        let msg = Config::from_file(&path)
            .expect_err("typo accepted")
            .to_string();
        eprintln!("{msg}");
        assert!(msg.contains("wieght"), "{msg}");
        assert!(msg.contains("line 5,"), "{msg}");
        assert!(msg.contains("config.yaml"), "{msg}");
    }

    #[test]
    fn invalid_values_are_named() {
        let c: Config = serde_saphyr::from_str(
            "placement:\n  tiers: [{nodes: 2, weight: 300}]\n  hot: {cpu: 0}\n  \
             per_job: {max_per_node: 0, max_per_zone: 1.5}\nmax_staleness: 0s\n",
        )
        .expect("parse");
        let msg = c.validate().expect_err("invalid").to_string();
        for part in [
            "tiers[0].weight",
            "hot.cpu",
            "per_job.max_per_node",
            "per_job.max_per_zone",
            "max_staleness",
        ] {
            assert!(msg.contains(part), "{part} missing from {msg}");
        }
    }

    #[test]
    fn the_scheduler_model_is_read_from_the_kube_scheduler_file() {
        let dir = tempfile::tempdir().expect("temp dir");
        let kube = dir.path().join("scheduler-config.yaml");
        std::fs::write(
            &kube,
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n\
             percentageOfNodesToScore: 30\n\
             profiles:\n\
             - schedulerName: default-scheduler\n\
             - schedulerName: exact\n  percentageOfNodesToScore: 100\n  \
               plugins: {score: {enabled: [{name: NodeAffinity, weight: 4}]}}\n",
        )
        .expect("write");
        let config_at = |body: &str| {
            let path = dir.path().join("config.yaml");
            let text = format!("scheduler_config_file: {}\n{body}", kube.display());
            std::fs::write(&path, text).expect("write");
            Config::from_file(&path)
        };

        // affinity mode: the default scheduler's profile.
        let c = config_at("").expect("valid");
        assert_eq!(c.scheduler.percentage_of_nodes_to_score, 30);
        assert_eq!(c.scheduler.weights.node_affinity, 2);
        // The file does not say which release reads it: the default formula.
        assert_eq!(
            c.scheduler.balanced_allocation_formula,
            scheduler::BalancedAllocationFormula::ChangeInBalance
        );

        // schedulerName mode: the profile pods are routed to.
        let c = config_at("mode: schedulerName\nscheduler_name: exact\n").expect("valid");
        assert_eq!(c.scheduler.percentage_of_nodes_to_score, 100);
        assert_eq!(c.scheduler.weights.node_affinity, 4);

        // An explicit `scheduler:` section overrides the file key by key.
        let c = config_at(
            "mode: both\nscheduler_name: exact\n\
             scheduler: {weights: {taint_toleration: 1}, balanced_resources: [cpu],\n\
               balanced_allocation_formula: with_pod, listed_node_order: by_name}\n",
        )
        .expect("valid");
        assert_eq!(
            c.scheduler.percentage_of_nodes_to_score, 100,
            "from the file"
        );
        assert_eq!(c.scheduler.weights.node_affinity, 4, "from the file");
        assert_eq!(c.scheduler.weights.taint_toleration, 1, "overridden");
        assert_eq!(c.scheduler.balanced_resources, ["cpu"], "overridden");
        assert_eq!(
            c.scheduler.balanced_allocation_formula,
            scheduler::BalancedAllocationFormula::WithPod,
            "kept from the webhook's config"
        );
        assert_eq!(
            c.scheduler.listed_node_order,
            scheduler::ListedNodeOrder::ByName,
            "kept from the webhook's config"
        );

        let msg = config_at("mode: schedulerName\n")
            .expect_err("no placement-scheduler profile")
            .to_string();
        assert!(msg.contains("scheduler-config.yaml"), "{msg}");
        assert!(msg.contains("placement-scheduler"), "{msg}");
    }

    #[test]
    fn modes_and_node_match_parse() {
        let c: Config = serde_saphyr::from_str(
            "mode: both\nplacement:\n  node_match: {by: label, key: kubernetes.io/hostname}\n",
        )
        .expect("parse");
        assert_eq!(c.mode, Mode::Both);
        assert_eq!(
            c.placement.node_match,
            NodeMatch::Label {
                key: "kubernetes.io/hostname".into()
            }
        );
    }
}
