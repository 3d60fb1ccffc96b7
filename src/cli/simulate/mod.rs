//! `placement-webhook simulate`: what a burst of TaskManagers would do to a cluster, with and
//! without the webhook, through the same closed loop the tests run (`simulate`).

mod day;
mod picture;
pub use day::{day_table, waves_of};
pub use picture::svg;

use std::fmt::Write as _;
use std::time::Duration;

use serde::Serialize;
use serde_json::{Value, json};

use crate::config::Config;
use crate::inventory::listing::ClusterState;
use crate::scheduler::Unfit;
use crate::scheduler::quantity::amount;
use crate::simulate::{Burst, Cluster, Figures, Method, Outcome, Timing, figures, run_observed};
use crate::snapshot::LoadSnapshot;

/// What to simulate; `simulate`'s flags.
#[derive(Debug, Clone)]
pub struct Request {
    pub pods: usize,
    /// Cores requested and used by each TaskManager (ignored with `pod`).
    pub cpu_cores: f64,
    pub memory: String,
    pub network_bytes_per_second: f64,
    /// A Pod object (e.g. from a job's pod template) instead of a generated TaskManager.
    pub pod: Option<Value>,
    pub replicas: usize,
    /// Share of the reviews the first replica gets (see `--split`); `None`: round robin.
    pub first_share: Option<f64>,
    /// Replicas forward their reviews to one deciding replica (`forward.enabled`).
    pub forwarding: bool,
    pub bind_lag: Duration,
    /// Seed of the scheduler's tie-breaking: the same input gives the same answer.
    pub seed: u64,
    /// The scheduler model holds the nodes it listed at its start in name order, where the
    /// webhook takes their order to be unknown (`--listed-in-name-order`).
    pub listed_in_name_order: bool,
}

/// `snapshot`'s nodes as the scheduler model holds them for `request`.
pub(crate) fn cluster_of(snapshot: LoadSnapshot, config: &Config, request: &Request) -> Cluster {
    let cluster = Cluster::new(snapshot, config);
    if request.listed_in_name_order {
        cluster.with_listed_in_name_order()
    } else {
        cluster
    }
}

/// One node after the burst, for the "hottest nodes" lists.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct NodeAfter {
    pub(crate) node: String,
    pub(crate) cpu_before: f64,
    pub(crate) cpu_after: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) nic_after: Option<f64>,
    pub(crate) pods: usize,
}

/// One method's result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct MethodReport {
    #[serde(flatten)]
    pub(crate) figures: Figures,
    /// The ten hottest nodes after the burst (by real CPU), hottest first.
    pub(crate) hottest_nodes: Vec<NodeAfter>,
}

/// The whole answer; the document `--json` prints. Field names are stable.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    pub(crate) nodes: usize,
    pub(crate) pods: usize,
    pub(crate) pod_cpu_cores: f64,
    pub(crate) pod_network_bytes_per_second: f64,
    /// The CPU hot threshold: `onto_busy` counts pods landing at or above it.
    pub(crate) hot_cpu: f64,
    /// Nodes the scheduler's filters reject for the pod before the burst (cordoned, tainted,
    /// not selected, full by requests): no method can place there.
    pub(crate) unfit_nodes: usize,
    pub(crate) scenario: Scenario,
    pub(crate) methods: Vec<MethodReport>,
    /// Per node, sorted by CPU before the burst: what the SVG draws.
    #[serde(skip)]
    pub(crate) bars: Vec<Bar>,
}

/// How the webhook hears of the burst (the `simulate` flags that shape its row).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Scenario {
    /// Webhook replicas sharing the burst.
    pub(crate) replicas: usize,
    /// Delay between a bind and the webhook hearing of it, in milliseconds.
    pub(crate) bind_lag_ms: f64,
    /// Share of the reviews the first replica gets (`--split`); absent: round robin.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) first_share: Option<f64>,
    /// Every review decided by one replica (`forward.enabled`, with several replicas).
    pub(crate) one_decider: bool,
}

/// One bar of the picture.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Bar {
    pub(crate) node: String,
    pub(crate) cpu_before: f64,
    pub(crate) added_without: f64,
    pub(crate) added_with: f64,
    /// What ideal water-filling adds.
    pub(crate) added_ideal: f64,
    /// Why the node could not take the pod at all; `None`: it could.
    pub(crate) unfit: Option<Unfit>,
    /// Its NIC was at or above the hot threshold before the burst: the webhook steers away
    /// from it whatever its CPU.
    pub(crate) nic_hot: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum SimulateError {
    #[error("--pods must be at least 1")]
    NoPods,
    #[error("--cpu must be a positive number of cores")]
    BadCpu,
    #[error("--memory {0:?} is not a Kubernetes quantity")]
    BadMemory(String),
    #[error("--split {0} needs one share per replica, each 0..1, summing to 1")]
    BadSplit(String),
    #[error("--replicas must be at least 1")]
    NoReplicas,
    #[error("the snapshot has no nodes")]
    NoNodes,
    #[error("the pod file is not a Pod: {0}")]
    NotAPod(String),
    #[error(
        "none of the cluster's {0} nodes has load readings in the snapshot \
         (--no-cluster simulates the snapshot alone)"
    )]
    NoReadingsForCluster(usize),
}

/// The snapshot's readings on the cluster as the apiserver lists it: only nodes the cluster
/// has, with their labels, taints, allocatable and bound requests from the API (as `serve`
/// joins them). The snapshot's own node facts stand in only without a cluster.
pub fn with_cluster(
    mut snapshot: LoadSnapshot,
    cluster: &ClusterState,
) -> Result<LoadSnapshot, SimulateError> {
    snapshot.nodes.retain_mut(|node| {
        let Some(facts) = cluster.inventory.nodes.get(&node.name) else {
            return false;
        };
        node.labels = facts.labels.clone();
        node.taints = facts.taints.clone();
        node.unschedulable = facts.unschedulable;
        node.ready = facts.ready;
        if let Some(cores) = facts.allocatable_cpu_cores {
            node.cpu_capacity_cores = Some(cores);
        }
        if facts.allocatable != Default::default() {
            node.allocatable = facts.allocatable.to_list();
        }
        node.requested = cluster
            .pods
            .occupancy
            .node(&node.name)
            .map(|bound| bound.requested.to_list())
            .unwrap_or_default();
        true
    });
    if snapshot.nodes.is_empty() {
        return Err(SimulateError::NoReadingsForCluster(
            cluster.inventory.nodes.len(),
        ));
    }
    Ok(snapshot)
}

/// `50MB/s`, `400Mi/s`, `1.25e9` as bytes per second.
pub fn parse_bytes_per_second(text: &str) -> Option<f64> {
    let t = text.trim().trim_end_matches("/s").trim_end_matches('B');
    let v = amount("memory", t)?;
    (v >= 0).then_some(v as f64)
}

/// A Pod object from YAML or JSON text; the one-line reason when it is not one.
pub fn pod_from_text(text: &str) -> Result<Value, SimulateError> {
    let value: Value = serde_saphyr::from_str(text)
        .map_err(|e| SimulateError::NotAPod(one_line(&e.to_string())))?;
    if value.get("kind").and_then(Value::as_str) != Some("Pod") {
        return Err(SimulateError::NotAPod("kind is not Pod".into()));
    }
    serde_json::from_value::<k8s_openapi::api::core::v1::Pod>(value.clone())
        .map_err(|e| SimulateError::NotAPod(one_line(&e.to_string())))?;
    if value["spec"]["containers"]
        .as_array()
        .is_none_or(Vec::is_empty)
    {
        return Err(SimulateError::NotAPod("it has no containers".into()));
    }
    Ok(value)
}

fn one_line(text: &str) -> String {
    text.lines().next().unwrap_or_default().to_string()
}

/// A native-mode TaskManager of the given size, as the apiserver passes it after defaulting.
pub(crate) fn taskmanager(cpu_cores: f64, memory: &str) -> Value {
    let cpu = format!("{}m", (cpu_cores * 1000.0).round() as i64);
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "simulated-taskmanager",
            "namespace": "flink",
            "labels": {"app": "simulated", "component": "taskmanager",
                       "type": "flink-native-kubernetes"}
        },
        "spec": {
            "restartPolicy": "Never",
            "schedulerName": "default-scheduler",
            "containers": [{
                "name": "flink-main-container",
                "image": "flink",
                "resources": {"requests": {"cpu": cpu, "memory": memory},
                              "limits": {"cpu": cpu, "memory": memory}}
            }]
        }
    })
}

/// The burst `request` describes, checked.
pub fn burst_of(request: &Request) -> Result<Burst, SimulateError> {
    if request.pods == 0 {
        return Err(SimulateError::NoPods);
    }
    if request.replicas == 0 {
        return Err(SimulateError::NoReplicas);
    }
    let pod = match &request.pod {
        Some(pod) => pod.clone(),
        None => {
            if !(request.cpu_cores.is_finite() && request.cpu_cores > 0.0) {
                return Err(SimulateError::BadCpu);
            }
            if amount("memory", &request.memory).is_none_or(|m| m <= 0) {
                return Err(SimulateError::BadMemory(request.memory.clone()));
            }
            taskmanager(request.cpu_cores, &request.memory)
        }
    };
    let cpu_cores = serde_json::from_value::<k8s_openapi::api::core::v1::Pod>(pod.clone())
        .ok()
        .and_then(|p| crate::scheduler::cores::pod_cpu_cores(&p))
        .unwrap_or(request.cpu_cores);
    Ok(Burst {
        pod,
        count: request.pods,
        cpu_cores,
        network_bytes_per_second: request.network_bytes_per_second,
        configured_network: None,
    })
}

/// The first replica's share of the reviews from `--split` (one share per replica, summing to
/// 1); `None` when no split is given.
pub fn first_share(split: &[f64], replicas: usize) -> Result<Option<f64>, SimulateError> {
    if split.is_empty() {
        return Ok(None);
    }
    let total: f64 = split.iter().sum();
    if split.len() != replicas.max(1)
        || split.iter().any(|s| !s.is_finite() || *s < 0.0)
        || (total - 1.0).abs() > 1e-6
    {
        return Err(SimulateError::BadSplit(format!("{split:?}")));
    }
    Ok(Some(split[0]))
}

/// The methods compared, in table order.
pub(crate) fn methods(request: &Request) -> [Method; 3] {
    [
        Method::NoWebhook,
        Method::Webhook(timing(request)),
        Method::Ideal,
    ]
}

/// How the webhook's replicas hear of the burst the flags describe.
fn timing(request: &Request) -> Timing {
    Timing {
        replicas: request.replicas,
        watch_lag: Some(request.bind_lag),
        first_share: request.first_share,
        forwarding: request.forwarding,
        ..Timing::typical(request.replicas)
    }
}

/// How many times the burst is run: once per method, and once more for the webhook without
/// `placement.per_job` when that is configured.
pub fn runs(config: &Config) -> usize {
    3 + usize::from(!config.placement.per_job.is_off())
}

/// Runs the burst with every method on `snapshot`.
pub fn simulate(
    snapshot: LoadSnapshot,
    config: &Config,
    request: &Request,
) -> Result<Report, SimulateError> {
    simulate_observed(snapshot, config, request, &|| {})
}

/// [`simulate`], calling `tick` once per pod placed by each method ([`runs`] x pods in all).
pub fn simulate_observed(
    snapshot: LoadSnapshot,
    config: &Config,
    request: &Request,
    tick: &dyn Fn(),
) -> Result<Report, SimulateError> {
    if snapshot.nodes.is_empty() {
        return Err(SimulateError::NoNodes);
    }
    let burst = burst_of(request)?;
    let cluster = cluster_of(snapshot, config, request);
    let hot = config.placement.hot.cpu;
    let mut outcomes: Vec<Outcome> = methods(request)
        .into_iter()
        .map(|m| run_observed(&cluster, config, &burst, m, request.seed, tick))
        .collect();
    let compared = outcomes.len();
    // With a job's own spread configured, the webhook again without it: what the bound costs
    // and what it spreads ("most on one").
    if !config.placement.per_job.is_off() {
        let mut unbounded = config.clone();
        unbounded.placement.per_job = Default::default();
        let webhook = methods(request)[1];
        outcomes.push(run_observed(
            &cluster,
            &unbounded,
            &burst,
            webhook,
            request.seed,
            tick,
        ));
    }
    let pods_on = |o: &Outcome| {
        let mut on = vec![0usize; cluster.nodes.len()];
        for &k in o.landed.iter().flatten() {
            on[k] += 1;
        }
        on
    };
    let methods: Vec<MethodReport> = outcomes
        .iter()
        .enumerate()
        .map(|(k, o)| {
            let on = pods_on(o);
            let mut nodes: Vec<NodeAfter> = (0..cluster.nodes.len())
                .map(|i| NodeAfter {
                    node: cluster.nodes[i].name.clone(),
                    cpu_before: cluster.snapshot.nodes[i].cpu,
                    cpu_after: cluster.cpu_after(i, on[i], &burst),
                    nic_after: cluster.nic_after(i, on[i], &burst),
                    pods: on[i],
                })
                .collect();
            nodes.sort_by(|a, b| b.cpu_after.total_cmp(&a.cpu_after));
            nodes.truncate(10);
            let mut figures = figures(&cluster, &burst, o, hot);
            if k >= compared {
                figures.method = format!("{}, per_job off", figures.method);
            }
            MethodReport {
                figures,
                hottest_nodes: nodes,
            }
        })
        .collect();
    let on_by = |wanted: fn(&Method) -> bool| {
        outcomes
            .iter()
            .find(|o| wanted(&o.method))
            .map_or_else(|| vec![0; cluster.nodes.len()], pods_on)
    };
    let without = on_by(|m| *m == Method::NoWebhook);
    let with = on_by(|m| matches!(m, Method::Webhook(_)));
    let ideal = on_by(|m| *m == Method::Ideal);
    let unfit = cluster.unfit(&burst);
    let added = |pods: usize, i: usize| pods as f64 * burst.cpu_cores / cluster.cores[i];
    let nic_hot = |i: usize| {
        let node = &cluster.snapshot.nodes[i];
        node.network_bytes_per_second
            .zip(node.network_capacity_bytes_per_second)
            .is_some_and(|(used, capacity)| {
                capacity > 0.0 && used / capacity >= config.placement.hot.network
            })
    };
    let mut bars: Vec<Bar> = (0..cluster.nodes.len())
        .map(|i| Bar {
            node: cluster.nodes[i].name.clone(),
            cpu_before: cluster.snapshot.nodes[i].cpu,
            added_without: added(without[i], i),
            added_with: added(with[i], i),
            added_ideal: added(ideal[i], i),
            unfit: unfit[i],
            nic_hot: nic_hot(i),
        })
        .collect();
    bars.sort_by(|a, b| a.cpu_before.total_cmp(&b.cpu_before));
    Ok(Report {
        nodes: cluster.nodes.len(),
        pods: burst.count,
        pod_cpu_cores: burst.cpu_cores,
        pod_network_bytes_per_second: burst.network_bytes_per_second,
        hot_cpu: hot,
        unfit_nodes: unfit.iter().flatten().count(),
        scenario: Scenario {
            replicas: request.replicas,
            bind_lag_ms: request.bind_lag.as_secs_f64() * 1e3,
            first_share: request.first_share,
            one_decider: timing(request).one_decider(),
        },
        methods,
        bars,
    })
}

fn percent(v: f64) -> String {
    format!("{:.0}%", v * 100.0)
}

/// The table a person reads at a glance.
pub fn table(report: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} TaskManagers of {} cores onto {} nodes",
        report.pods, report.pod_cpu_cores, report.nodes
    );
    let _ = writeln!(
        out,
        "\n{:<34} {:>9} {:>9} {:>14} {:>11} {:>12}",
        "method", "hot CPU", "hot NIC", "pods onto hot", "nodes used", "most on one"
    );
    for m in &report.methods {
        let f = &m.figures;
        let _ = writeln!(
            out,
            "{:<34} {:>9} {:>9} {:>14} {:>11} {:>12}",
            f.method,
            percent(f.hottest_cpu),
            f.hottest_nic.map_or("-".into(), percent),
            f.onto_busy,
            f.nodes_used,
            f.most_pods_on_one_node
        );
    }
    let _ = writeln!(
        out,
        "\nhot CPU, hot NIC: the hottest node that received a pod, after the burst: its measured\n  \
         load plus the pods just placed, over its capacity (over 100%: more than the node has).\n\
         pods onto hot: pods placed on a node already at or above {} CPU.\n\
         most on one: the most pods of the burst on one node, which one node's loss takes at\n  \
         once (placement.per_job.max_per_node bounds it).\n\
         ideal water-filling balances CPU and NIC together: its hot CPU can be above the\n  \
         webhook's where it keeps a NIC cooler.",
        percent(report.hot_cpu)
    );
    for m in &report.methods {
        if m.figures.pending > 0 {
            let _ = writeln!(
                out,
                "{}: {} of {} pods fit on no node (they stay Pending)",
                m.figures.method, m.figures.pending, report.pods
            );
        }
    }
    for m in &report.methods {
        let _ = writeln!(
            out,
            "\nhottest nodes after the burst, {}:",
            m.figures.method
        );
        for n in &m.hottest_nodes {
            let _ = writeln!(
                out,
                "  {:<24} {:>5} -> {:>5}  (+{} pods)",
                n.node,
                percent(n.cpu_before),
                percent(n.cpu_after),
                n.pods
            );
        }
    }
    out
}
