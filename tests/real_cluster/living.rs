//! What the living-cluster tests share: the bound a burst is measured against (water-filling
//! it onto the nodes as really used), the node loads the webhook reads (the shipped queries over
//! the test's Prometheus), and waiting until those readings are right before a burst.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use placement_webhook::config::prometheus::{NodeMapping, PrometheusConfig};
use placement_webhook::metrics_source::PrometheusSource;

use crate::fixture::Cluster;
use crate::support::kube::objects::NodeSpec;
use crate::support::rng::Rng;

/// A node as really used: what its pods and background use and what its pods request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NodeUse {
    pub cores: f64,
    /// Cores in use: background, other workloads and TaskManagers (their eventual use, started
    /// or not).
    pub used: f64,
    /// Cores requested by the pods bound to it.
    pub requested: f64,
}

impl NodeUse {
    pub fn level(&self) -> f64 {
        self.used / self.cores
    }

    /// This node with `pods` more pods of `pod` on it.
    pub fn with(self, pods: usize, pod: PodUse) -> NodeUse {
        NodeUse {
            used: self.used + pods as f64 * pod.used,
            requested: self.requested + pods as f64 * pod.requested,
            ..self
        }
    }

    pub fn fits(&self, pod: PodUse) -> bool {
        self.requested + pod.requested <= self.cores + 1e-9
    }
}

/// One pod of a burst: the cores it will use and the cores it requests.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PodUse {
    pub used: f64,
    pub requested: f64,
}

/// Water-filling `pods` onto `nodes`: one at a time, in order, to the node it leaves least
/// busy, among those whose requests still fit it. The busiest level a node that took one ends
/// at: the bound no placement of the burst can beat.
pub fn water_filling(nodes: &[NodeUse], pods: &[PodUse]) -> f64 {
    let mut nodes = nodes.to_vec();
    let mut hottest: f64 = 0.0;
    for &pod in pods {
        let best = (0..nodes.len())
            .filter(|&i| nodes[i].fits(pod))
            .min_by(|&a, &b| {
                let after = |i: usize| nodes[i].with(1, pod).level();
                after(a).total_cmp(&after(b))
            })
            .expect("room for the burst");
        nodes[best] = nodes[best].with(1, pod);
        hottest = hottest.max(nodes[best].level());
    }
    hottest
}

/// The busiest node after a burst (`after`) among those that took one of its pods (`landed`
/// per node): the node [`above_bound`] measures.
pub fn hottest_landing(after: &[NodeUse], landed: &[usize]) -> Option<usize> {
    (0..after.len())
        .filter(|&i| landed[i] > 0)
        .max_by(|&a, &b| after[a].level().total_cmp(&after[b].level()))
}

/// How far a burst's hottest landing node ends above `bound`, in pods of that node's size
/// (`pod_size` cores each), and its level. `after` is every node as used after the burst;
/// `landed` the burst's pods per node.
pub fn above_bound(after: &[NodeUse], landed: &[usize], pod_size: f64, bound: f64) -> (f64, f64) {
    let Some(hottest) = hottest_landing(after, landed) else {
        return (0.0, bound);
    };
    let node = after[hottest];
    let one = pod_size / node.cores;
    ((node.level() - bound) / one, node.level())
}

/// A `targets:` line for a webhook config: the shipped TaskManager selector narrowed to pods
/// labelled `placement-test/variant: <variant>`, so a webhook serving one pool steers only
/// that pool's TaskManagers. Its ledger still charges the other webhooks' steered pods (seen
/// in the day: 140 entries for 70 of its own), so its gauges cover every pool.
pub fn targets(variant: &str) -> String {
    format!(
        "targets: {{match_labels: {{component: taskmanager, placement-test/variant: {variant}}}, \
         match_expressions: [{{key: type, operator: In, values: [flink-native-kubernetes, \
         flink-standalone-kubernetes]}}]}}\n"
    )
}

/// The node CPU busy fractions the webhook reads: the shipped queries over the test's
/// Prometheus, with `window` as the rate window; `None` while the series do not make a
/// snapshot yet (the first scrapes).
pub async fn readings(cluster: &Cluster, window: Duration) -> Option<BTreeMap<String, f64>> {
    let prometheus = cluster.prometheus.as_ref().expect("a living cluster");
    let config = PrometheusConfig {
        rate_window: window,
        node_mapping: NodeMapping::Uname,
        // Hundreds of nodes' series on a machine kwok keeps busy: the answer, however slow.
        query_timeout: Duration::from_secs(30),
        refresh_interval: Duration::from_secs(60),
        ..PrometheusConfig::for_url(&prometheus.url())
    };
    let source = PrometheusSource::new(config).expect("source");
    let (snapshot, _) = source.refresh(None).await.outcome.ok()?;
    Some(
        snapshot
            .nodes
            .into_iter()
            .map(|n| (n.name, n.cpu))
            .collect(),
    )
}

/// The cores each of `nodes` (spec, background busy fraction) showed beyond its background, as
/// the shipped CPU query over a `window` read it `at` a past moment (a replica's last refresh):
/// what a decision then read of its pods. Every node must have been read.
pub async fn shown_beyond_background_at(
    cluster: &Cluster,
    window: Duration,
    at: std::time::SystemTime,
    nodes: &[(NodeSpec, f64)],
) -> ByNode {
    let prometheus = cluster.prometheus.as_ref().expect("a living cluster");
    let config = PrometheusConfig {
        rate_window: window,
        ..PrometheusConfig::for_url(&prometheus.url())
    };
    let source = PrometheusSource::new(config).expect("source");
    let cpu = (source.plan().queries().into_iter())
        .find(|(name, _)| *name == "cpu")
        .map(|(_, q)| q.to_string())
        .expect("a cpu query");
    let by_instance: BTreeMap<String, f64> = (prometheus.query_at(&cpu, Some(at)).await)
        .into_iter()
        .filter_map(|(labels, busy)| Some((labels.get("instance")?.clone(), busy)))
        .collect();
    nodes
        .iter()
        .map(|(spec, busy)| {
            let ip = spec.internal_ip.as_deref().expect("an InternalIP");
            let Some(read) = by_instance.get(&format!("{ip}:9100")) else {
                panic!("{} not read at {at:?}: {by_instance:?}", spec.name);
            };
            (spec.name.clone(), (read - busy) * f64::from(spec.cores))
        })
        .collect()
}

/// A node's load counted against what its TaskManagers really carry (`carried`, cores), from
/// what its metrics showed beyond its background (`shown`) and what the webhook charged there:
/// (over, under). Over is what the charge adds beyond the load the metrics miss. A node the
/// exporter reads above what its pods carry (kwok credits a node's CPU counter high now and
/// then, see [`wait_settled`]) is not counted over for that: the webhook reads what a node
/// exporter says, and only its charge can count a TaskManager twice.
pub fn counted_against_truth(shown: f64, charged: f64, carried: f64) -> (f64, f64) {
    let over = shown + charged - carried.max(shown);
    let under = carried - shown - charged;
    (over, under)
}

/// How long a node's reading counts for [`wait_settled`] when a later answer lacks the node.
const RECENT_READING: Duration = Duration::from_secs(10);

/// Waits until every replica's snapshot holds every node and the readings are right: each of
/// `nodes` (name, busy fraction) within 0.03 of it.
///
/// At the end, one node in twenty may still read high and one in fifty wrong otherwise (low, or
/// not read), printed. On a two-core machine kwok now and then credits a node's CPU counter
/// with more than its pods use, for minutes: one to five nodes of 600, 0.05-0.18 high, in three
/// of four runs, once nine, and lately 13 and 15 (0.03-0.17 high), every one high
/// (docs/design.md, "A day on a living cluster"). The day's bound is drawn from the truth, not
/// from the readings, so a node read high only looks hotter to the webhook than it is: it can
/// make a burst end further above the bound, never nearer. A node read low could draw the
/// webhook onto it, so those stay at one in fifty.
pub async fn wait_settled(cluster: &Cluster, window: Duration, nodes: &[(String, f64)]) {
    // Each node's series are a query's work and a scrape of kwok's: more nodes, more patience.
    let patience = Duration::from_secs(180) + Duration::from_millis(20) * nodes.len() as u32;
    let deadline = Instant::now() + patience;
    // Each node's latest reading within the last few seconds: one answer of the test's own
    // reader now and then lacks a node the replicas' snapshots hold (once, 1 of 600 at the
    // deadline), which says nothing about whether the readings have settled.
    let mut latest: BTreeMap<String, (Instant, f64)> = BTreeMap::new();
    loop {
        let now = Instant::now();
        for (name, busy) in readings(cluster, window).await.unwrap_or_default() {
            latest.insert(name, (now, busy));
        }
        latest.retain(|_, (at, _)| now.duration_since(*at) < RECENT_READING);
        let read: BTreeMap<&str, f64> = (latest.iter())
            .map(|(name, &(_, busy))| (name.as_str(), busy))
            .collect();
        let reads_right = |(name, busy): &&(String, f64)| {
            read.get(name.as_str())
                .is_some_and(|r| (r - busy).abs() < 0.03)
        };
        let right = nodes.iter().filter(reads_right).count();
        let in_snapshots = cluster.metrics().await.iter().all(|m| {
            crate::support::kube::webhook::sum(m, "placement_webhook_nodes_in_snapshot", &[])
                >= nodes.len() as f64
        });
        if right == nodes.len() && in_snapshots {
            return;
        }
        if Instant::now() >= deadline {
            let misread: Vec<(&String, f64, Option<f64>)> = (nodes.iter())
                .filter(|node| !reads_right(node))
                .map(|(name, busy)| (name, *busy, read.get(name.as_str()).copied()))
                .collect();
            let high = (misread.iter())
                .filter(|&&(_, busy, r)| r.is_some_and(|r| r > busy))
                .count();
            let otherwise = misread.len() - high;
            let wrong: Vec<String> = (misread.iter())
                .map(|(name, busy, r)| format!("{name} {busy:.3} read {r:?}"))
                .collect();
            if in_snapshots && high <= nodes.len() / 20 && otherwise <= nodes.len() / 50 {
                println!(
                    "{right} of {} nodes read right after {patience:?} ({high} high); read \
                     wrong: {wrong:?}",
                    nodes.len()
                );
                return;
            }
            panic!(
                "{right} of {} nodes read right after {patience:?} (wrong: {wrong:?}); scrapes: {}\n{}",
                nodes.len(),
                scrapes(cluster).await,
                cluster.logs()
            );
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// How Prometheus's scrapes of kwok go: targets up of all, and the slowest scrape.
pub async fn scrapes(cluster: &Cluster) -> String {
    let Some(prometheus) = cluster.prometheus.as_ref() else {
        return "no Prometheus".into();
    };
    let one = |series: Vec<(BTreeMap<String, String>, f64)>| series.first().map_or(0.0, |s| s.1);
    let up = one(prometheus.query("sum(up)").await);
    let targets = one(prometheus.query("count(up)").await);
    let slowest = one(prometheus.query("max(scrape_duration_seconds)").await);
    let mean = one(prometheus.query("avg(scrape_duration_seconds)").await);
    format!("{up} of {targets} targets up, scrapes {mean:.2} s on average, {slowest:.2} s at most")
}

#[test]
fn water_filling_levels_the_coolest_nodes_within_their_requests() {
    let pod = PodUse {
        used: 2.0,
        requested: 2.0,
    };
    let node = |cores: f64, busy: f64, requested: f64| NodeUse {
        cores,
        used: busy * cores,
        requested,
    };
    // Two pods fill the cool 8-core node's requests; the rest go to the 16-core one.
    let nodes = [node(8.0, 0.1, 4.0), node(16.0, 0.5, 0.0)];
    assert!((water_filling(&nodes, &[pod; 2]) - 0.6).abs() < 1e-9);
    assert!((water_filling(&nodes, &[pod; 4]) - 0.75).abs() < 1e-9);
    let after = [nodes[0].with(2, pod), nodes[1].with(2, pod)];
    let (above, hottest) = above_bound(&after, &[2, 2], pod.used, 0.75);
    assert!((hottest - 0.75).abs() < 1e-9 && above.abs() < 1e-9);
}

/// A node's background busy fraction, drawn as the living-cluster tests' nodes are: a tenth
/// 0.85-0.98, a third 0.55-0.85, two fifths 0.30-0.55, the rest 0.05-0.30.
pub fn busy_fraction(rng: &mut Rng) -> f64 {
    let (lo, hi) = match rng.below(100) {
        0..10 => (0.85, 0.98),
        10..45 => (0.55, 0.85),
        45..85 => (0.30, 0.55),
        _ => (0.05, 0.30),
    };
    lo + (hi - lo) * rng.below(1000) as f64 / 1000.0
}

/// The background's cores (`busy` of `cores`), rounded up to a millicore: what is kept from
/// the pods, as system-reserved and other workloads' requests do, so that no node is asked for
/// more than its cores.
pub fn reserved_millicores(cores: f64, busy: f64) -> u32 {
    (busy * cores * 1000.0).ceil() as u32
}

/// Gives `spec` a background of `busy` of its `cores`: kwok serves it as the node's CPU beyond
/// its pods' (tests/kube/kwok/metrics.yaml), and it is kept from the pods.
pub fn with_background(spec: &mut NodeSpec, cores: f64, busy: f64) {
    spec.annotations.push((
        "placement-test/background-cpu-cores".into(),
        format!("{:.3}", busy * cores),
    ));
    spec.reserved_millicores = reserved_millicores(cores, busy);
}

/// CPU cores by node name.
pub type ByNode = BTreeMap<String, f64>;

/// TaskManager load the metrics show by pod in `namespace`: each pod's own cAdvisor series over
/// the `window`, which the node series read alike, as it read `at` a past moment (a replica's
/// last refresh).
pub async fn shown_by_pod_at(
    cluster: &Cluster,
    namespace: &str,
    window: Duration,
    at: std::time::SystemTime,
) -> ByNode {
    over_window_by_pod(cluster, ("rate", Some(at)), namespace, window).await
}

/// How many samples each pod's own cAdvisor series in `namespace` holds over the `window`: a
/// pod that ran through the whole window has one a scrape, and fewer say Prometheus missed some
/// of its scrapes (its rate then reads low whatever the webhook counts).
pub async fn samples_by_pod(
    cluster: &Cluster,
    namespace: &str,
    window: Duration,
    at: Option<std::time::SystemTime>,
) -> ByNode {
    over_window_by_pod(cluster, ("count_over_time", at), namespace, window).await
}

/// The CPU cores each steered pod in `namespace` was estimated at, by pod, from its decision
/// note (`cpu=`).
pub async fn estimates_by_pod(cluster: &Cluster, namespace: &str) -> ByNode {
    let pods =
        kube::Api::<k8s_openapi::api::core::v1::Pod>::namespaced(cluster.admin.clone(), namespace)
            .list(&kube::api::ListParams::default())
            .await
            .expect("list pods");
    (pods.items.iter())
        .filter_map(|pod| {
            let note = crate::fixture::decision(pod)?;
            let cpu = note
                .split(' ')
                .find_map(|field| field.strip_prefix("cpu="))?;
            Some((pod.metadata.name.clone()?, cpu.parse().ok()?))
        })
        .collect()
}

/// `function` over the `window` of each TaskManager's CPU series in `namespace`, by pod, as
/// it read at a moment (`None`: now).
async fn over_window_by_pod(
    cluster: &Cluster,
    (function, at): (&str, Option<std::time::SystemTime>),
    namespace: &str,
    window: Duration,
) -> ByNode {
    let prometheus = cluster.prometheus.as_ref().expect("a living cluster");
    let query = format!(
        "sum by (pod) ({function}(container_cpu_usage_seconds_total{{namespace=\"{namespace}\",\
         container=\"flink-main-container\"}}[{}s]))",
        window.as_secs()
    );
    prometheus
        .query_at(&query, at)
        .await
        .into_iter()
        .filter_map(|(labels, value)| Some((labels.get("pod")?.clone(), value)))
        .collect()
}

/// The deciding replica's CPU charged and counted twice by node at a refresh, from its
/// `/debug/inflight`, and when that refresh was taken.
pub struct Inflight {
    pub charged: ByNode,
    pub twice: ByNode,
    pub taken_at: std::time::SystemTime,
}

/// The [`Inflight`] of the first refresh taken after `after` (waited for, 90 s at most): of
/// `replicas` (indexes in `cluster.replicas`), the one charging the most (it holds the charges
/// of the pods it decided).
pub async fn deciding_inflight(
    cluster: &Cluster,
    replicas: &[usize],
    after: std::time::SystemTime,
) -> Inflight {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        if let Some(inflight) = deciding_inflight_now(cluster, replicas).await
            && inflight.taken_at > after
        {
            return inflight;
        }
        assert!(
            Instant::now() < deadline,
            "no refresh of replicas {replicas:?} after {after:?} in 90 s"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The deciding replica's last [`Inflight`]; `None` before it has refreshed.
async fn deciding_inflight_now(cluster: &Cluster, replicas: &[usize]) -> Option<Inflight> {
    let ca = cluster.ca_pem();
    let mut most: Option<(f64, ByNode, ByNode, Option<std::time::SystemTime>)> = None;
    for &i in replicas {
        let doc = cluster.replicas[i].inflight(&ca).await;
        let taken_at = doc["taken_at"].as_str().map(|t| {
            humantime::parse_rfc3339_weak(t).unwrap_or_else(|e| panic!("taken_at {t:?}: {e}"))
        });
        let (mut charged, mut twice) = (ByNode::new(), ByNode::new());
        for node in doc["nodes"].as_array().into_iter().flatten() {
            let name = node["node"].as_str().expect("node name").to_string();
            let cpu = |field: &str| node[field]["cpu_cores"].as_f64().expect("cores");
            charged.insert(name.clone(), cpu("charged"));
            twice.insert(name, cpu("counted_twice"));
        }
        let total: f64 = charged.values().sum();
        if most.as_ref().is_none_or(|(t, ..)| total > *t) {
            most = Some((total, charged, twice, taken_at));
        }
    }
    let (_, charged, twice, taken_at) = most?;
    Some(Inflight {
        charged,
        twice,
        taken_at: taken_at?,
    })
}
