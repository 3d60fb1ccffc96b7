//! The cluster's own `KubeSchedulerConfiguration` (`kubescheduler.config.k8s.io/v1`), read into
//! the model's [`SchedulerConfig`] for one profile, so the webhook predicts the scheduler from
//! the same file the scheduler reads.
//!
//! Only what the model uses is read: `percentageOfNodesToScore` (global, overridden per
//! profile), the score weights of NodeAffinity, NodeResourcesFit, NodeResourcesBalancedAllocation
//! and TaintToleration, and the args of the two resource plugins. A real file carries much more
//! (leader election, client connection, other plugins and their args): all of it is ignored.
//! Which NodeResourcesBalancedAllocation formula the scheduler uses, and in which order it holds
//! the nodes it listed at its start, depend on its release, not on the file:
//! [`SchedulerConfig::balanced_allocation_formula`] and [`SchedulerConfig::listed_node_order`]
//! stay the defaults here, and the webhook config's `scheduler:` section sets them.

use std::path::Path;

use serde::Deserialize;

use super::LeaseRef;
use super::scheduler::{
    ResourceWeight, SchedulerConfig, ScoringStrategy, ScoringStrategyType, UtilizationShapePoint,
};

pub(crate) const API_VERSION: &str = "kubescheduler.config.k8s.io/v1";
pub(crate) const KIND: &str = "KubeSchedulerConfiguration";
use crate::well_known::DEFAULT_SCHEDULER_NAME;

const TAINT_TOLERATION: &str = "TaintToleration";
const NODE_AFFINITY: &str = "NodeAffinity";
const NODE_RESOURCES_FIT: &str = "NodeResourcesFit";
const BALANCED_ALLOCATION: &str = "NodeResourcesBalancedAllocation";

#[derive(Debug, thiserror::Error)]
pub enum KubeSchedulerConfigError {
    // As in `ConfigError`: reasons are part of the message, not `#[source]`, so printed error
    // chains do not repeat them.
    #[error("cannot read KubeSchedulerConfiguration file {path}: {error}")]
    Read { path: String, error: std::io::Error },
    #[error("KubeSchedulerConfiguration file {path} is not valid: {}", error.without_snippet())]
    Parse {
        path: String,
        error: Box<serde_saphyr::Error>,
    },
    #[error("{path} is not a {API_VERSION} {KIND}: apiVersion {api_version:?}, kind {kind:?}")]
    WrongKind {
        path: String,
        api_version: String,
        kind: String,
    },
    #[error("{path} has no profile with schedulerName {name:?} (profiles: {available})")]
    ProfileNotFound {
        path: String,
        name: String,
        available: String,
    },
    #[error("{path}, profile {profile:?}: {problem}")]
    Invalid {
        path: String,
        profile: String,
        problem: String,
    },
    #[error("{path}: leaderElection.retryPeriod {value:?} is not a duration: {error}")]
    RetryPeriod {
        path: String,
        value: String,
        error: humantime::DurationError,
    },
}

/// Reads `path` and returns the model of its profile named `scheduler_name`.
pub fn load(
    path: &Path,
    scheduler_name: &str,
) -> Result<SchedulerConfig, KubeSchedulerConfigError> {
    let text = std::fs::read_to_string(path).map_err(|error| KubeSchedulerConfigError::Read {
        path: path.display().to_string(),
        error,
    })?;
    parse(&text, &path.display().to_string(), scheduler_name)
}

/// The leader Lease the scheduler of the file at `path` renews, with upstream's defaults
/// (`kube-system/kube-scheduler`); `None` when it runs without leader election.
pub(crate) fn load_leader_lease(path: &Path) -> Result<Option<LeaseRef>, KubeSchedulerConfigError> {
    let text = std::fs::read_to_string(path).map_err(|error| KubeSchedulerConfigError::Read {
        path: path.display().to_string(),
        error,
    })?;
    leader_lease(&text, &path.display().to_string())
}

/// As [`load_leader_lease`], from the file's text; `origin` names it in errors.
pub(crate) fn leader_lease(
    text: &str,
    origin: &str,
) -> Result<Option<LeaseRef>, KubeSchedulerConfigError> {
    let file: File =
        serde_saphyr::from_str(text).map_err(|error| KubeSchedulerConfigError::Parse {
            path: origin.to_string(),
            error: Box::new(error),
        })?;
    let election = file.leader_election.unwrap_or_default();
    if election.leader_elect == Some(false) {
        return Ok(None);
    }
    let renewed_every = match election.retry_period.as_deref() {
        None => DEFAULT_RETRY_PERIOD,
        Some(text) => humantime::parse_duration(text).map_err(|error| {
            KubeSchedulerConfigError::RetryPeriod {
                path: origin.to_string(),
                value: text.to_string(),
                error,
            }
        })?,
    };
    Ok(Some(LeaseRef {
        namespace: election
            .resource_namespace
            .unwrap_or_else(|| "kube-system".into()),
        name: election
            .resource_name
            .unwrap_or_else(|| "kube-scheduler".into()),
        renewed_every: Some(renewed_every),
    }))
}

/// As [`load`], from the file's text; `origin` names it in errors.
pub(crate) fn parse(
    text: &str,
    origin: &str,
    scheduler_name: &str,
) -> Result<SchedulerConfig, KubeSchedulerConfigError> {
    let file: File =
        serde_saphyr::from_str(text).map_err(|error| KubeSchedulerConfigError::Parse {
            path: origin.to_string(),
            error: Box::new(error),
        })?;
    let api_version = file.api_version.unwrap_or_default();
    let kind = file.kind.unwrap_or_default();
    if api_version != API_VERSION || kind != KIND {
        return Err(KubeSchedulerConfigError::WrongKind {
            path: origin.to_string(),
            api_version,
            kind,
        });
    }
    // Upstream defaulting gives a file without profiles one default profile.
    let mut profiles = file.profiles.unwrap_or_default();
    if profiles.is_empty() {
        profiles.push(Profile::default());
    }
    let name_of = |p: &Profile| {
        p.scheduler_name
            .clone()
            .unwrap_or_else(|| DEFAULT_SCHEDULER_NAME.to_string())
    };
    let mut matching = profiles.iter().filter(|p| name_of(p) == scheduler_name);
    let Some(profile) = matching.next() else {
        return Err(KubeSchedulerConfigError::ProfileNotFound {
            path: origin.to_string(),
            name: scheduler_name.to_string(),
            available: profiles.iter().map(name_of).collect::<Vec<_>>().join(", "),
        });
    };
    let invalid = |problem: String| KubeSchedulerConfigError::Invalid {
        path: origin.to_string(),
        profile: scheduler_name.to_string(),
        problem,
    };
    if matching.next().is_some() {
        return Err(invalid(
            "more than one profile has this schedulerName".into(),
        ));
    }
    let config = profile_config(profile, file.percentage_of_nodes_to_score).map_err(invalid)?;
    let problems = config.problems();
    if !problems.is_empty() {
        return Err(invalid(problems.join("; ")));
    }
    Ok(config)
}

fn profile_config(
    profile: &Profile,
    global_percentage: Option<i64>,
) -> Result<SchedulerConfig, String> {
    // The profile's value wins over the global one; neither set is 0, the adaptive default.
    let percentage = profile
        .percentage_of_nodes_to_score
        .or(global_percentage)
        .unwrap_or(0);
    let percentage_of_nodes_to_score = u32::try_from(percentage)
        .ok()
        .filter(|p| *p <= 100)
        .ok_or_else(|| format!("percentageOfNodesToScore {percentage} is not in 0..100"))?;

    let plugins = profile.plugins.clone().unwrap_or_default();
    let mut config = SchedulerConfig {
        percentage_of_nodes_to_score,
        ..SchedulerConfig::default()
    };
    let defaults = config.weights.clone();
    let w = &mut config.weights;
    w.taint_toleration = score_weight(&plugins, TAINT_TOLERATION, defaults.taint_toleration);
    w.node_affinity = score_weight(&plugins, NODE_AFFINITY, defaults.node_affinity);
    w.node_resources_fit = score_weight(&plugins, NODE_RESOURCES_FIT, defaults.node_resources_fit);
    w.balanced_allocation =
        score_weight(&plugins, BALANCED_ALLOCATION, defaults.balanced_allocation);

    let mut fit_args = None;
    let mut balanced_args = None;
    for entry in profile.plugin_config.iter().flatten() {
        let slot = match entry.name.as_str() {
            NODE_RESOURCES_FIT => &mut fit_args,
            BALANCED_ALLOCATION => &mut balanced_args,
            _ => continue,
        };
        // Upstream validation rejects a repeated plugin config as well.
        if slot.is_some() {
            return Err(format!("pluginConfig names {} more than once", entry.name));
        }
        *slot = Some(entry.args.clone().unwrap_or(serde_json::Value::Null));
    }
    if let Some(args) = fit_args {
        config.scoring_strategy = scoring_strategy(args)?;
    }
    if let Some(args) = balanced_args {
        let args: BalancedAllocationArgs = args_of(BALANCED_ALLOCATION, args)?;
        let names: Vec<String> = args
            .resources
            .unwrap_or_default()
            .into_iter()
            .map(|r| r.name)
            .collect();
        // SetDefaults_NodeResourcesBalancedAllocationArgs: no resources means cpu and memory.
        if !names.is_empty() {
            config.balanced_resources = names;
        }
    }
    Ok(config)
}

/// The weight a score plugin ends up with, as upstream builds a profile: the default plugins
/// are `multiPoint` entries with weights (TaintToleration 3, NodeAffinity 2, NodeResourcesFit 1,
/// NodeResourcesBalancedAllocation 1); `mergePluginSet` in
/// k8s.io/kubernetes `pkg/scheduler/apis/config/v1/default_plugins.go` lets a custom `enabled`
/// entry replace a default one and `disabled` (or `"*"`) drop defaults; the framework
/// (`pkg/scheduler/framework/runtime/framework.go`, `expandMultiPointPlugins` and
/// `getScoreWeights`) lets a `score.enabled` entry win over `multiPoint`, skips `multiPoint`
/// plugins disabled for `score` (all of them under `"*"`), and reads a weight of 0 or none as 1.
/// 0 here means the plugin does not score.
fn score_weight(plugins: &Plugins, name: &str, default_weight: i64) -> i64 {
    let score = plugins.score.clone().unwrap_or_default();
    let multi_point = plugins.multi_point.clone().unwrap_or_default();
    if let Some(p) = score.enabled_entry(name) {
        return effective_weight(p.weight);
    }
    if score.disables(name) {
        return 0;
    }
    if let Some(p) = multi_point.enabled_entry(name) {
        return effective_weight(p.weight);
    }
    if multi_point.disables(name) {
        return 0;
    }
    default_weight
}

fn effective_weight(weight: Option<i64>) -> i64 {
    match weight {
        None | Some(0) => 1,
        Some(w) => w,
    }
}

/// `NodeResourcesFitArgs.scoringStrategy`, defaulted as `SetDefaults_NodeResourcesFitArgs`
/// does (`pkg/scheduler/apis/config/v1/defaults.go`).
fn scoring_strategy(args: serde_json::Value) -> Result<ScoringStrategy, String> {
    let args: NodeResourcesFitArgs = args_of(NODE_RESOURCES_FIT, args)?;
    let Some(strategy) = args.scoring_strategy else {
        return Ok(ScoringStrategy::default());
    };
    let kind_name = strategy.kind.unwrap_or_default();
    let kind = match kind_name.as_str() {
        "LeastAllocated" => ScoringStrategyType::LeastAllocated,
        "MostAllocated" => ScoringStrategyType::MostAllocated,
        "RequestedToCapacityRatio" => ScoringStrategyType::RequestedToCapacityRatio,
        // Upstream validation rejects any other type, an empty one included.
        other => {
            return Err(format!(
                "pluginConfig {NODE_RESOURCES_FIT}: scoringStrategy.type {other:?} is not \
                 LeastAllocated, MostAllocated or RequestedToCapacityRatio"
            ));
        }
    };
    let mut resources: Vec<ResourceWeight> = strategy
        .resources
        .unwrap_or_default()
        .into_iter()
        .map(|r| ResourceWeight {
            name: r.name,
            weight: effective_weight(r.weight),
        })
        .collect();
    if resources.is_empty() {
        resources = ScoringStrategy::default().resources;
    }
    // The shape only matters to RequestedToCapacityRatio, which has no default one: without
    // it the empty shape fails validation, as upstream does.
    let shape = match strategy.requested_to_capacity_ratio.and_then(|r| r.shape) {
        Some(points) => points
            .into_iter()
            .map(|p| UtilizationShapePoint {
                utilization: p.utilization,
                score: p.score,
            })
            .collect(),
        None if kind == ScoringStrategyType::RequestedToCapacityRatio => Vec::new(),
        None => ScoringStrategy::default().shape,
    };
    Ok(ScoringStrategy {
        kind,
        resources,
        shape,
    })
}

/// Plugin args are typed by the plugin's name, so they are read in a second step.
fn args_of<T: Default + for<'de> Deserialize<'de>>(
    plugin: &str,
    args: serde_json::Value,
) -> Result<T, String> {
    if args.is_null() {
        return Ok(T::default());
    }
    serde_json::from_value(args).map_err(|e| format!("pluginConfig {plugin}: args: {e}"))
}

// The subset of the v1 API the model reads. No `deny_unknown_fields`: everything else in a
// real file is not the model's business. Lists are `Option` so an explicit `null` reads as
// absent, as it does upstream.

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct File {
    api_version: Option<String>,
    kind: Option<String>,
    percentage_of_nodes_to_score: Option<i64>,
    profiles: Option<Vec<Profile>>,
    leader_election: Option<LeaderElection>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct LeaderElection {
    leader_elect: Option<bool>,
    resource_name: Option<String>,
    resource_namespace: Option<String>,
    /// A Go duration ("2s").
    retry_period: Option<String>,
}

/// Upstream's `leaderElection.retryPeriod`: how often a leader renews its Lease.
const DEFAULT_RETRY_PERIOD: std::time::Duration = std::time::Duration::from_secs(2);

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Profile {
    scheduler_name: Option<String>,
    percentage_of_nodes_to_score: Option<i64>,
    plugins: Option<Plugins>,
    plugin_config: Option<Vec<PluginConfigEntry>>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Plugins {
    multi_point: Option<PluginSet>,
    score: Option<PluginSet>,
}

#[derive(Debug, Clone, Default, Deserialize)]
struct PluginSet {
    enabled: Option<Vec<Plugin>>,
    disabled: Option<Vec<Plugin>>,
}

impl PluginSet {
    fn enabled_entry(&self, name: &str) -> Option<&Plugin> {
        self.enabled.iter().flatten().find(|p| p.name == name)
    }

    fn disables(&self, name: &str) -> bool {
        self.disabled
            .iter()
            .flatten()
            .any(|p| p.name == name || p.name == "*")
    }
}

#[derive(Debug, Clone, Deserialize)]
struct Plugin {
    name: String,
    weight: Option<i64>,
}

#[derive(Debug, Deserialize)]
struct PluginConfigEntry {
    name: String,
    args: Option<serde_json::Value>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct NodeResourcesFitArgs {
    scoring_strategy: Option<ScoringStrategyArgs>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ScoringStrategyArgs {
    #[serde(rename = "type")]
    kind: Option<String>,
    resources: Option<Vec<ResourceSpec>>,
    requested_to_capacity_ratio: Option<RequestedToCapacityRatioArgs>,
}

#[derive(Debug, Deserialize)]
struct ResourceSpec {
    name: String,
    weight: Option<i64>,
}

#[derive(Debug, Deserialize)]
struct RequestedToCapacityRatioArgs {
    shape: Option<Vec<ShapePoint>>,
}

#[derive(Debug, Deserialize)]
struct ShapePoint {
    utilization: i64,
    score: i64,
}

#[derive(Debug, Default, Deserialize)]
struct BalancedAllocationArgs {
    resources: Option<Vec<ResourceSpec>>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::scheduler::PluginWeights;

    fn read(text: &str, name: &str) -> Result<SchedulerConfig, KubeSchedulerConfigError> {
        parse(text, "scheduler-config.yaml", name)
    }

    const HEADER: &str =
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n";

    /// The Lease a scheduler renews: upstream's defaults, the file's own names, none when
    /// leader election is off; and the overlay's file names its own.
    #[test]
    fn the_leader_lease_follows_leader_election() {
        let lease = |body: &str| leader_lease(&format!("{HEADER}{body}"), "test").expect("parses");
        let named = |namespace: &str, name: &str| {
            Some(LeaseRef {
                renewed_every: Some(std::time::Duration::from_secs(2)),
                ..LeaseRef::named(namespace, name)
            })
        };
        assert_eq!(lease(""), named("kube-system", "kube-scheduler"));
        assert_eq!(
            lease("leaderElection: {leaderElect: true, resourceName: s, resourceNamespace: ns}"),
            named("ns", "s")
        );
        assert_eq!(lease("leaderElection: {leaderElect: false}"), None);
        assert_eq!(
            lease("leaderElection: {retryPeriod: 500ms}").and_then(|l| l.renewed_every),
            Some(std::time::Duration::from_millis(500))
        );
        assert_eq!(
            lease("leaderElection: {retryPeriod: 1m30s}").and_then(|l| l.renewed_every),
            Some(std::time::Duration::from_secs(90))
        );
        assert!(
            leader_lease(
                &format!("{HEADER}leaderElection: {{retryPeriod: soon}}"),
                "f"
            )
            .is_err()
        );
        let shipped = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/deploy/scheduler-profile/scheduler-config.yaml"
        );
        // Renewed every second: a crashed leader's Lease lapses for the webhook after 3 s.
        assert_eq!(
            load_leader_lease(Path::new(shipped)).expect("shipped file"),
            Some(LeaseRef {
                renewed_every: Some(std::time::Duration::from_secs(1)),
                ..LeaseRef::named("placement-webhook", "placement-scheduler")
            })
        );
    }

    #[test]
    fn the_upstream_default_profile_is_the_default_model() {
        for body in ["", "profiles: []\n", "profiles:\n  - {}\n"] {
            let config = read(&format!("{HEADER}{body}"), DEFAULT_SCHEDULER_NAME).expect(body);
            assert_eq!(config, SchedulerConfig::default(), "{body:?}");
        }
    }

    #[test]
    fn a_profile_scoring_every_node_with_a_custom_weight() {
        let text = format!(
            "{HEADER}leaderElection: {{leaderElect: true, resourceName: placement-scheduler}}
clientConnection: {{qps: 50}}
profiles:
  - schedulerName: default-scheduler
  - schedulerName: placement-scheduler
    percentageOfNodesToScore: 100
    plugins:
      score:
        enabled:
          - {{name: NodeAffinity, weight: 5}}
          - {{name: ImageLocality, weight: 3}}
          - {{name: SomeOutOfTreePlugin, weight: 7}}
"
        );
        let config = read(&text, "placement-scheduler").expect("valid");
        assert_eq!(config.percentage_of_nodes_to_score, 100);
        assert_eq!(
            config.weights,
            PluginWeights {
                node_affinity: 5,
                ..PluginWeights::default()
            }
        );
        let other = read(&text, DEFAULT_SCHEDULER_NAME).expect("valid");
        assert_eq!(other, SchedulerConfig::default());
    }

    #[test]
    fn zero_or_missing_weights_read_as_one() {
        let text = format!(
            "{HEADER}profiles:
  - plugins:
      score:
        enabled: [{{name: TaintToleration, weight: 0}}]
      multiPoint:
        enabled: [{{name: NodeAffinity}}]
"
        );
        let w = read(&text, DEFAULT_SCHEDULER_NAME).expect("valid").weights;
        assert_eq!(w.taint_toleration, 1);
        assert_eq!(
            w.node_affinity, 1,
            "a re-configured default loses its weight"
        );
        assert_eq!(w.node_resources_fit, 1);
    }

    #[test]
    fn most_allocated_with_resource_weights() {
        let text = format!(
            "{HEADER}profiles:
  - schedulerName: bin-packing
    pluginConfig:
      - name: NodeResourcesFit
        args:
          apiVersion: kubescheduler.config.k8s.io/v1
          kind: NodeResourcesFitArgs
          ignoredResources: [example.com/foo]
          scoringStrategy:
            type: MostAllocated
            resources: [{{name: cpu, weight: 3}}, {{name: memory}}, {{name: nvidia.com/gpu, weight: 5}}]
      - name: NodeResourcesBalancedAllocation
        args: {{resources: [{{name: cpu, weight: 1}}, {{name: nvidia.com/gpu, weight: 1}}]}}
      - name: PodTopologySpread
        args: {{defaultingType: List}}
"
        );
        let config = read(&text, "bin-packing").expect("valid");
        let s = &config.scoring_strategy;
        assert_eq!(s.kind, ScoringStrategyType::MostAllocated);
        let resources: Vec<(&str, i64)> = s
            .resources
            .iter()
            .map(|r| (r.name.as_str(), r.weight))
            .collect();
        assert_eq!(
            resources,
            [("cpu", 3), ("memory", 1), ("nvidia.com/gpu", 5)]
        );
        assert_eq!(config.balanced_resources, ["cpu", "nvidia.com/gpu"]);
        assert_eq!(config.weights, PluginWeights::default());
    }

    #[test]
    fn requested_to_capacity_ratio_needs_its_shape() {
        let with_shape = format!(
            "{HEADER}profiles:
  - pluginConfig:
      - name: NodeResourcesFit
        args:
          scoringStrategy:
            type: RequestedToCapacityRatio
            requestedToCapacityRatio:
              shape: [{{utilization: 0, score: 0}}, {{utilization: 100, score: 10}}]
"
        );
        let config = read(&with_shape, DEFAULT_SCHEDULER_NAME).expect("valid");
        assert_eq!(
            config.scoring_strategy.kind,
            ScoringStrategyType::RequestedToCapacityRatio
        );
        assert_eq!(config.scoring_strategy.shape[1].score, 10);
        assert_eq!(
            config.scoring_strategy.resources,
            ScoringStrategy::default().resources
        );

        let without = format!(
            "{HEADER}profiles:
  - pluginConfig:
      - name: NodeResourcesFit
        args: {{scoringStrategy: {{type: RequestedToCapacityRatio}}}}
"
        );
        let msg = read(&without, DEFAULT_SCHEDULER_NAME)
            .expect_err("no shape")
            .to_string();
        assert!(msg.contains("shape"), "{msg}");
    }

    #[test]
    fn profile_percentage_overrides_the_global_one() {
        let text = format!(
            "{HEADER}percentageOfNodesToScore: 40
profiles:
  - schedulerName: default-scheduler
  - schedulerName: exact
    percentageOfNodesToScore: 100
  - schedulerName: sampled
    percentageOfNodesToScore: 0
"
        );
        let pct = |name| {
            read(&text, name)
                .expect("valid")
                .percentage_of_nodes_to_score
        };
        assert_eq!(pct(DEFAULT_SCHEDULER_NAME), 40, "global value");
        assert_eq!(pct("exact"), 100);
        assert_eq!(pct("sampled"), 0, "0 in the profile is adaptive, not unset");

        let out_of_range = format!("{HEADER}percentageOfNodesToScore: 120\n");
        let msg = read(&out_of_range, DEFAULT_SCHEDULER_NAME)
            .expect_err("120%")
            .to_string();
        assert!(msg.contains("percentageOfNodesToScore"), "{msg}");
    }

    #[test]
    fn disabled_plugins_do_not_score() {
        let text = format!(
            "{HEADER}profiles:
  - schedulerName: some-disabled
    plugins:
      score:
        disabled: [{{name: NodeResourcesBalancedAllocation}}]
      multiPoint:
        disabled: [{{name: TaintToleration}}]
  - schedulerName: all-disabled
    plugins:
      score:
        disabled: [{{name: '*'}}]
        enabled: [{{name: NodeResourcesFit, weight: 4}}]
  - schedulerName: multipoint-all-disabled
    plugins:
      multiPoint:
        disabled: [{{name: '*'}}]
        enabled: [{{name: NodeAffinity, weight: 2}}]
"
        );
        let w = |name| read(&text, name).expect("valid").weights;
        assert_eq!(
            w("some-disabled"),
            PluginWeights {
                balanced_allocation: 0,
                taint_toleration: 0,
                ..PluginWeights::default()
            }
        );
        assert_eq!(
            w("all-disabled"),
            PluginWeights {
                node_affinity: 0,
                node_resources_fit: 4,
                balanced_allocation: 0,
                taint_toleration: 0,
            }
        );
        assert_eq!(
            w("multipoint-all-disabled"),
            PluginWeights {
                node_affinity: 2,
                node_resources_fit: 0,
                balanced_allocation: 0,
                taint_toleration: 0,
            }
        );
    }

    #[test]
    fn a_missing_profile_is_named_with_the_file() {
        let text = format!("{HEADER}profiles:\n  - schedulerName: other\n  - {{}}\n");
        let err = read(&text, "placement-scheduler").expect_err("not there");
        assert!(matches!(
            err,
            KubeSchedulerConfigError::ProfileNotFound { .. }
        ));
        let msg = err.to_string();
        for part in [
            "scheduler-config.yaml",
            "\"placement-scheduler\"",
            "other, default-scheduler",
        ] {
            assert!(msg.contains(part), "{part} missing from {msg}");
        }
    }

    #[test]
    fn another_kind_or_version_is_refused() {
        for text in [
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeProxyConfiguration\n",
            "apiVersion: kubescheduler.config.k8s.io/v1beta3\nkind: KubeSchedulerConfiguration\n",
            "profiles: []\n",
        ] {
            let err = read(text, DEFAULT_SCHEDULER_NAME).expect_err(text);
            assert!(
                matches!(err, KubeSchedulerConfigError::WrongKind { .. }),
                "{err}"
            );
            let msg = err.to_string();
            assert!(msg.contains("scheduler-config.yaml"), "{msg}");
            assert!(
                msg.contains("is not a kubescheduler.config.k8s.io/v1 KubeSchedulerConfiguration"),
                "{msg}"
            );
        }
    }

    #[test]
    fn unparsable_yaml_and_unknown_strategies_are_errors() {
        let msg = read(
            &format!("{HEADER}profiles: [{{percentageOfNodesToScore: lots}}]\n"),
            DEFAULT_SCHEDULER_NAME,
        )
        .expect_err("not a number")
        .to_string();
        assert!(msg.contains("scheduler-config.yaml"), "{msg}");
        assert!(msg.contains("line 3"), "{msg}");

        let msg = read(
            &format!(
                "{HEADER}profiles:\n  - pluginConfig: [{{name: NodeResourcesFit, args: {{scoringStrategy: {{type: Packed}}}}}}]\n"
            ),
            DEFAULT_SCHEDULER_NAME,
        )
        .expect_err("unknown strategy")
        .to_string();
        assert!(msg.contains("\"Packed\""), "{msg}");
    }

    #[test]
    fn load_names_a_missing_file() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("absent.yaml");
        let msg = load(&path, DEFAULT_SCHEDULER_NAME)
            .expect_err("missing")
            .to_string();
        assert!(msg.contains("absent.yaml"), "{msg}");
    }
}
