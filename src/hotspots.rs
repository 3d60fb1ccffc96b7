//! Where it hurts now: which TaskManagers run on hot nodes, by job and node, and whether the
//! pods the webhook steered stayed off those nodes.
//!
//! Read-only and pure: the input is the view the decisions use (hot means hot on measured
//! load, as `ClusterView::hot_nodes`) and the running pods with their nodes (the pod watch, or
//! a snapshot file's `pods` with `node`). Nothing here evicts or changes anything.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use crate::cluster::running::PlacedPod;
use crate::config::HotThresholds;
use crate::jobs::{COMPONENT_LABEL, JobBy, JobKey, TASKMANAGER};
use crate::snapshot::LoadSnapshot;
use crate::view::heat::{Dimension, hot_dimensions};
use crate::view::{ClusterView, NodeView};

/// The whole report. Field names are part of the `--json` interface: they only ever get added.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// When the node readings were taken (RFC 3339), when known.
    pub(crate) taken_at: Option<String>,
    /// The thresholds that make a node hot (`placement.hot`).
    pub(crate) thresholds: Thresholds,
    pub(crate) totals: Totals,
    /// Every node hot on measured load, hottest first.
    pub(crate) hot_nodes: Vec<HotNode>,
    /// Every TaskManager on a hot node, by namespace, job, node and pod.
    pub(crate) taskmanagers_on_hot_nodes: Vec<Row>,
    /// Every job with running TaskManagers: the ones with most on hot nodes first.
    pub(crate) jobs: Vec<JobSummary>,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub(crate) struct Thresholds {
    pub(crate) cpu: f64,
    pub(crate) network: f64,
    pub(crate) memory: f64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub(crate) struct Totals {
    /// Nodes with readings.
    pub(crate) nodes: usize,
    pub(crate) hot_nodes: usize,
    pub(crate) taskmanagers: usize,
    pub(crate) on_hot_nodes: usize,
    /// TaskManagers carrying the webhook's decision annotation.
    pub(crate) steered: usize,
    pub(crate) steered_on_hot_nodes: usize,
    /// On a node without readings: neither hot nor cool as far as the webhook knows.
    pub(crate) on_nodes_without_readings: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct HotNode {
    pub(crate) node: String,
    /// CPU busy fraction.
    pub(crate) cpu: f64,
    /// Network as a fraction of the NIC's capacity (of the busiest node's traffic when the
    /// capacity is unknown; then it never makes the node hot).
    pub(crate) network: f64,
    pub(crate) memory: f64,
    pub(crate) heat: f64,
    /// Which thresholds it crosses: `cpu`, `network`, `memory`.
    pub(crate) hot_dimensions: Vec<&'static str>,
    pub(crate) taskmanagers: usize,
    pub(crate) steered: usize,
}

/// One TaskManager on a hot node.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Row {
    pub(crate) namespace: String,
    /// See [`job_name`].
    pub(crate) job: String,
    pub(crate) node: String,
    pub(crate) pod: String,
    pub(crate) node_cpu: f64,
    pub(crate) node_network: f64,
    pub(crate) node_memory: f64,
    pub(crate) hot_dimensions: Vec<&'static str>,
    pub(crate) steered: bool,
}

pub use crate::jobs::JobSummary;

/// A job as the report names it: the Flink cluster id (`app` label) of its TaskManagers, or
/// `owner:<uid>` for a steered pod without Flink's labels.
pub(crate) fn job_name(job: &JobKey) -> String {
    match &job.by {
        JobBy::App(app) => app.clone(),
        JobBy::Owner(uid) => format!("owner:{uid}"),
    }
}

/// The running TaskManagers a snapshot file describes: its `pods` that name a `node`, a job,
/// and are TaskManagers (`component: taskmanager`) or steered.
pub(crate) fn placed_from_snapshot(snapshot: &LoadSnapshot) -> Vec<PlacedPod> {
    let mut placed: Vec<PlacedPod> = snapshot
        .pods
        .iter()
        .filter(|p| {
            p.steered
                || p.labels
                    .get(COMPONENT_LABEL)
                    .is_some_and(|c| c == TASKMANAGER)
        })
        .filter_map(|p| {
            Some(PlacedPod {
                job: p.job()?,
                namespace: p.namespace.clone(),
                pod: p.pod.clone(),
                node: p.node.clone()?,
                steered: p.steered,
            })
        })
        .collect();
    placed.sort();
    placed.dedup_by(|a, b| a.namespace == b.namespace && a.pod == b.pod);
    placed
}

/// The report for `pods` running on the nodes of `view`. `hot` must be the thresholds the view
/// was built with (it only names the crossed dimensions; whether a node is hot is the view's).
pub(crate) fn report(view: &ClusterView, pods: &[PlacedPod], hot: &HotThresholds) -> Report {
    let dimensions = |n: &NodeView| -> Vec<&'static str> {
        hot_dimensions(&n.load, &n.scale, hot)
            .into_iter()
            .map(Dimension::as_str)
            .collect()
    };
    let network = |n: &NodeView| n.scale.network_fraction(n.load.network_bytes_per_second);

    let mut totals = Totals {
        nodes: view.nodes.len(),
        hot_nodes: view.hot_nodes.len(),
        ..Totals::default()
    };
    let mut jobs: BTreeMap<&JobKey, JobSummary> = BTreeMap::new();
    let mut per_node: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    let mut rows = Vec::new();
    for pod in pods {
        let job = jobs.entry(&pod.job).or_insert_with(|| JobSummary {
            namespace: pod.job.namespace.clone(),
            job: job_name(&pod.job),
            taskmanagers: 0,
            on_hot_nodes: 0,
            steered: 0,
            steered_on_hot_nodes: 0,
            on_nodes_without_readings: 0,
        });
        totals.taskmanagers += 1;
        job.taskmanagers += 1;
        if pod.steered {
            totals.steered += 1;
            job.steered += 1;
        }
        let Some(node) = view.node(&pod.node) else {
            totals.on_nodes_without_readings += 1;
            job.on_nodes_without_readings += 1;
            continue;
        };
        if !node.base_hot {
            continue;
        }
        totals.on_hot_nodes += 1;
        job.on_hot_nodes += 1;
        let counts = per_node.entry(node.name.as_str()).or_default();
        counts.0 += 1;
        if pod.steered {
            totals.steered_on_hot_nodes += 1;
            job.steered_on_hot_nodes += 1;
            counts.1 += 1;
        }
        rows.push(Row {
            namespace: pod.namespace.clone(),
            job: job_name(&pod.job),
            node: node.name.clone(),
            pod: pod.pod.clone(),
            node_cpu: node.load.cpu,
            node_network: network(node),
            node_memory: node.load.memory,
            hot_dimensions: dimensions(node),
            steered: pod.steered,
        });
    }
    rows.sort_by(|a, b| {
        (&a.namespace, &a.job, &a.node, &a.pod).cmp(&(&b.namespace, &b.job, &b.node, &b.pod))
    });
    let hot_nodes = view
        .hot_nodes
        .iter()
        .map(|&i| {
            let n = &view.nodes[i];
            let (taskmanagers, steered) =
                per_node.get(n.name.as_str()).copied().unwrap_or_default();
            HotNode {
                node: n.name.clone(),
                cpu: n.load.cpu,
                network: network(n),
                memory: n.load.memory,
                heat: n.base_heat,
                hot_dimensions: dimensions(n),
                taskmanagers,
                steered,
            }
        })
        .collect();
    let mut jobs: Vec<JobSummary> = jobs.into_values().collect();
    // Stable: ties keep the namespace/job order of the map.
    jobs.sort_by_key(|j| std::cmp::Reverse(j.on_hot_nodes));
    Report {
        taken_at: view
            .taken_at
            .map(|t| humantime::format_rfc3339_seconds(t).to_string()),
        thresholds: Thresholds {
            cpu: hot.cpu,
            network: hot.network,
            memory: hot.memory,
        },
        totals,
        hot_nodes,
        taskmanagers_on_hot_nodes: rows,
        jobs,
    }
}

fn yes_no(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

/// Width of a text column: its header or its longest value.
fn width<'a>(header: &str, values: impl Iterator<Item = &'a str>) -> usize {
    values.map(str::len).fold(header.len(), usize::max)
}

/// The report as text: totals, hot nodes, the TaskManagers on them, jobs.
pub fn table(report: &Report) -> String {
    let mut out = String::new();
    let t = &report.totals;
    let th = &report.thresholds;
    let _ = writeln!(
        out,
        "hot nodes: {} of {} (hot at cpu >= {}, network >= {} of NIC capacity, memory >= {})",
        t.hot_nodes, t.nodes, th.cpu, th.network, th.memory
    );
    let _ = writeln!(
        out,
        "taskmanagers on hot nodes: {} of {}; of the {} the webhook steered: {}",
        t.on_hot_nodes, t.taskmanagers, t.steered, t.steered_on_hot_nodes
    );
    if t.on_nodes_without_readings > 0 {
        let _ = writeln!(
            out,
            "taskmanagers on nodes without readings: {}",
            t.on_nodes_without_readings
        );
    }
    if let Some(taken_at) = &report.taken_at {
        let _ = writeln!(out, "readings taken at {taken_at}");
    }

    if !report.hot_nodes.is_empty() {
        let node_w = width("HOT NODE", report.hot_nodes.iter().map(|n| n.node.as_str()));
        let _ = writeln!(
            out,
            "\n{:<node_w$}  {:>4}  {:>4}  {:>4}  {:>4}  {:<18}  {:>3}  STEERED",
            "HOT NODE", "CPU", "NET", "MEM", "HEAT", "HOT ON", "TMS"
        );
        for n in &report.hot_nodes {
            let _ = writeln!(
                out,
                "{:<node_w$}  {:>4.2}  {:>4.2}  {:>4.2}  {:>4.2}  {:<18}  {:>3}  {}",
                n.node,
                n.cpu,
                n.network,
                n.memory,
                n.heat,
                n.hot_dimensions.join(","),
                n.taskmanagers,
                n.steered
            );
        }
    }

    let rows = &report.taskmanagers_on_hot_nodes;
    if !rows.is_empty() {
        let ns_w = width("NAMESPACE", rows.iter().map(|r| r.namespace.as_str()));
        let job_w = width("JOB", rows.iter().map(|r| r.job.as_str()));
        let node_w = width("NODE", rows.iter().map(|r| r.node.as_str()));
        let pod_w = width("POD", rows.iter().map(|r| r.pod.as_str()));
        let _ = writeln!(
            out,
            "\n{:<ns_w$}  {:<job_w$}  {:<node_w$}  {:<pod_w$}  {:>4}  {:>4}  {:>4}  {:<18}  STEERED",
            "NAMESPACE", "JOB", "NODE", "POD", "CPU", "NET", "MEM", "HOT ON"
        );
        for r in rows {
            let _ = writeln!(
                out,
                "{:<ns_w$}  {:<job_w$}  {:<node_w$}  {:<pod_w$}  {:>4.2}  {:>4.2}  {:>4.2}  {:<18}  {}",
                r.namespace,
                r.job,
                r.node,
                r.pod,
                r.node_cpu,
                r.node_network,
                r.node_memory,
                r.hot_dimensions.join(","),
                yes_no(r.steered)
            );
        }
    }

    let jobs = &report.jobs;
    if jobs.is_empty() {
        out.push_str(
            "\nno running TaskManagers known: with cluster access the pod list names them; \
             without it, the snapshot's pods that name a node\n",
        );
    } else {
        let ns_w = width("NAMESPACE", jobs.iter().map(|j| j.namespace.as_str()));
        let job_w = width("JOB", jobs.iter().map(|j| j.job.as_str()));
        let _ = writeln!(
            out,
            "\n{:<ns_w$}  {:<job_w$}  {:>3}  {:>6}  {:>7}  {:>14}  NO READINGS",
            "NAMESPACE", "JOB", "TMS", "ON HOT", "STEERED", "STEERED ON HOT"
        );
        for j in jobs {
            let _ = writeln!(
                out,
                "{:<ns_w$}  {:<job_w$}  {:>3}  {:>6}  {:>7}  {:>14}  {}",
                j.namespace,
                j.job,
                j.taskmanagers,
                j.on_hot_nodes,
                j.steered,
                j.steered_on_hot_nodes,
                j.on_nodes_without_readings
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::PlacementConfig;
    use crate::snapshot::{NodeLoad, PodReading};

    fn node(name: &str, cpu: f64, net: f64, memory: f64) -> NodeLoad {
        let mut n = NodeLoad::new(name, cpu);
        n.network_bytes_per_second = Some(net);
        n.network_capacity_bytes_per_second = Some(1000.0);
        n.memory = Some(memory);
        n
    }

    fn tm(app: &str, pod: &str, node: Option<&str>, steered: bool) -> PodReading {
        PodReading {
            namespace: "flink".into(),
            pod: pod.into(),
            cpu_cores: 1.0,
            network_bytes_per_second: None,
            labels: [("app", app), ("component", "taskmanager")]
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .into(),
            owner: None,
            running_secs: None,
            node: node.map(str::to_string),
            steered,
        }
    }

    /// Three hot nodes (one per dimension), two cool ones; two jobs.
    fn cluster() -> LoadSnapshot {
        LoadSnapshot {
            window_samples: Default::default(),
            taken_at: humantime::parse_rfc3339("2026-11-23T10:00:00Z").ok(),
            nodes: vec![
                node("hot-cpu", 0.95, 100.0, 0.5),
                node("hot-net", 0.20, 900.0, 0.5),
                node("hot-mem", 0.30, 100.0, 0.97),
                node("cool-1", 0.10, 100.0, 0.2),
                node("cool-2", 0.20, 200.0, 0.3),
            ],
            pods: vec![
                tm("orders", "orders-tm-1", Some("hot-cpu"), false),
                tm("orders", "orders-tm-2", Some("hot-cpu"), false),
                tm("orders", "orders-tm-3", Some("cool-1"), true),
                tm("orders", "orders-tm-4", Some("gone-node"), false),
                tm("clicks", "clicks-tm-1", Some("hot-net"), true),
                tm("clicks", "clicks-tm-2", Some("cool-2"), true),
                // No node: not placed. A JobManager: not a TaskManager.
                tm("clicks", "clicks-tm-3", None, false),
                PodReading {
                    labels: [("app", "orders"), ("component", "jobmanager")]
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .into(),
                    ..tm("orders", "orders-jm", Some("hot-mem"), false)
                },
            ],
        }
    }

    fn report_of(snapshot: &LoadSnapshot) -> Report {
        let policy = PlacementConfig::default();
        let view = ClusterView::build(snapshot, None, &policy);
        report(&view, &placed_from_snapshot(snapshot), &policy.hot)
    }

    #[test]
    fn names_every_taskmanager_on_a_hot_node_by_job_and_node() {
        let r = report_of(&cluster());
        let rows: Vec<(&str, &str, &str, Vec<&str>, bool)> = r
            .taskmanagers_on_hot_nodes
            .iter()
            .map(|r| {
                (
                    r.job.as_str(),
                    r.node.as_str(),
                    r.pod.as_str(),
                    r.hot_dimensions.clone(),
                    r.steered,
                )
            })
            .collect();
        assert_eq!(
            rows,
            [
                ("clicks", "hot-net", "clicks-tm-1", vec!["network"], true),
                ("orders", "hot-cpu", "orders-tm-1", vec!["cpu"], false),
                ("orders", "hot-cpu", "orders-tm-2", vec!["cpu"], false),
            ]
        );
        let first = &r.taskmanagers_on_hot_nodes[0];
        assert_eq!(first.namespace, "flink");
        assert_eq!(
            (first.node_cpu, first.node_network, first.node_memory),
            (0.2, 0.9, 0.5)
        );
        assert_eq!(
            r.totals,
            Totals {
                nodes: 5,
                hot_nodes: 3,
                taskmanagers: 6,
                on_hot_nodes: 3,
                steered: 3,
                steered_on_hot_nodes: 1,
                on_nodes_without_readings: 1,
            }
        );
        assert_eq!(r.taken_at.as_deref(), Some("2026-11-23T10:00:00Z"));
    }

    #[test]
    fn jobs_that_suffer_most_come_first() {
        let r = report_of(&cluster());
        let jobs: Vec<(&str, usize, usize, usize, usize, usize)> = r
            .jobs
            .iter()
            .map(|j| {
                (
                    j.job.as_str(),
                    j.taskmanagers,
                    j.on_hot_nodes,
                    j.steered,
                    j.steered_on_hot_nodes,
                    j.on_nodes_without_readings,
                )
            })
            .collect();
        assert_eq!(jobs, [("orders", 4, 2, 1, 0, 1), ("clicks", 2, 1, 2, 1, 0)]);
    }

    #[test]
    fn hot_nodes_hottest_first_with_their_taskmanagers() {
        let r = report_of(&cluster());
        let nodes: Vec<(&str, Vec<&str>, usize, usize)> = r
            .hot_nodes
            .iter()
            .map(|n| {
                (
                    n.node.as_str(),
                    n.hot_dimensions.clone(),
                    n.taskmanagers,
                    n.steered,
                )
            })
            .collect();
        // Heat: 0.6 cpu + 0.4 network, memory unweighted by default.
        assert_eq!(
            nodes,
            [
                ("hot-cpu", vec!["cpu"], 2, 0),
                ("hot-net", vec!["network"], 1, 1),
                // The JobManager there is not counted.
                ("hot-mem", vec!["memory"], 0, 0),
            ]
        );
        assert!(r.hot_nodes.windows(2).all(|w| w[0].heat >= w[1].heat));
    }

    #[test]
    fn a_cool_cluster_has_nothing_to_report_but_its_jobs() {
        let mut snapshot = cluster();
        for n in &mut snapshot.nodes {
            n.cpu = 0.1;
            n.network_bytes_per_second = Some(10.0);
            n.memory = Some(0.1);
        }
        let r = report_of(&snapshot);
        assert!(r.hot_nodes.is_empty());
        assert!(r.taskmanagers_on_hot_nodes.is_empty());
        assert_eq!(r.totals.on_hot_nodes, 0);
        assert_eq!(r.jobs.len(), 2);
        let text = table(&r);
        assert!(text.starts_with("hot nodes: 0 of 5"), "{text}");
        assert!(!text.contains("HOT NODE"), "{text}");
    }

    #[test]
    fn without_pods_the_table_says_where_they_come_from() {
        let mut snapshot = cluster();
        snapshot.pods.clear();
        let text = table(&report_of(&snapshot));
        assert!(text.contains("no running TaskManagers known"), "{text}");
        assert!(
            text.contains("HOT NODE"),
            "hot nodes are still listed:\n{text}"
        );
    }

    #[test]
    fn owner_jobs_are_named_by_uid_and_duplicates_count_once() {
        let mut snapshot = cluster();
        let mut steered = tm("x", "bare", Some("hot-cpu"), true);
        steered.labels.clear();
        steered.owner = Some("uid-7".into());
        snapshot.pods = vec![steered.clone(), steered];
        let r = report_of(&snapshot);
        assert_eq!(r.totals.taskmanagers, 1);
        assert_eq!(r.taskmanagers_on_hot_nodes[0].job, "owner:uid-7");
    }

    #[test]
    fn json_names_are_stable() {
        let value = serde_json::to_value(report_of(&cluster())).expect("json");
        let keys = |v: &serde_json::Value| -> Vec<String> {
            let mut k: Vec<String> = v.as_object().expect("object").keys().cloned().collect();
            k.sort();
            k
        };
        assert_eq!(
            keys(&value),
            [
                "hot_nodes",
                "jobs",
                "taken_at",
                "taskmanagers_on_hot_nodes",
                "thresholds",
                "totals"
            ]
        );
        assert_eq!(
            keys(&value["taskmanagers_on_hot_nodes"][0]),
            [
                "hot_dimensions",
                "job",
                "namespace",
                "node",
                "node_cpu",
                "node_memory",
                "node_network",
                "pod",
                "steered"
            ]
        );
        assert_eq!(
            keys(&value["jobs"][0]),
            [
                "job",
                "namespace",
                "on_hot_nodes",
                "on_nodes_without_readings",
                "steered",
                "steered_on_hot_nodes",
                "taskmanagers"
            ]
        );
        assert_eq!(
            keys(&value["hot_nodes"][0]),
            [
                "cpu",
                "heat",
                "hot_dimensions",
                "memory",
                "network",
                "node",
                "steered",
                "taskmanagers"
            ]
        );
        assert_eq!(
            keys(&value["totals"]),
            [
                "hot_nodes",
                "nodes",
                "on_hot_nodes",
                "on_nodes_without_readings",
                "steered",
                "steered_on_hot_nodes",
                "taskmanagers"
            ]
        );
    }
}
