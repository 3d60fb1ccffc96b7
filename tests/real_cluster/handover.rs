//! A second job's burst while the first job's load is only partly in the metrics, on a living
//! cluster: kwok starts the TaskManagers after a delay, their CPU reaches node-exporter series
//! that a real Prometheus scrapes, and the webhook (as installed, two replicas) reads that
//! Prometheus with the shipped queries.
//!
//! Five variants of the same two bursts, at once, each on a pool of the same nodes its pods are
//! held to by a nodeSelector:
//! - the handover on evidence (the webhook as installed, two replicas);
//! - the fixed ttl (the charge ends `ttl` after steering, before the metrics show the first
//!   burst; a webhook of its own);
//! - the second burst sent once the metrics have caught up with the first (the reference; a
//!   webhook of its own);
//! - a first burst that never starts (its containers wait with ImagePullBackOff), served by the
//!   installed webhook: its charges must end, so the second burst lands as on
//! - the same nodes with no first burst at all (the installed webhook; the reference).
//!
//! Each row is how far the second burst's hottest landing node ends above water-filling that
//! burst onto the nodes as the first left them (a burst that never started left them idle), in
//! TaskManagers of that node's size.
//!
//! CI runs the times at half scale (rate window 60 s, TaskManagers using CPU 30 s after
//! creation, the second burst 60 s after the first, also after one that never starts, ttl 45 s,
//! scrapes every 5 s); `PLACEMENT_HANDOVER_FULL_SCALE=1` runs the shipped 2-minute window, 60 s,
//! 120 s (300 s after a first burst that never starts) and 90 s.

use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime};

use serde_json::json;

use futures::future::join_all;

use crate::fixture::{Cluster, Setup, serial};
use crate::living::{
    NodeUse, PodUse, above_bound, counted_against_truth, deciding_inflight, hottest_landing,
    readings, shown_beyond_background_at, targets, wait_settled, water_filling,
};
use crate::support::kube::objects::{self, NodeSpec};
use crate::support::rng::Rng;

const NODES: usize = 60;
const POOL_LABEL: &str = "placement-test/pool";
/// The label a variant's namespace carries for its webhook's registration.
const VARIANT_LABEL: &str = "placement-test/variant";
const BURST: usize = 60;
const TM_CORES: f64 = 2.0;
const TASKMANAGER: PodUse = PodUse {
    used: TM_CORES,
    requested: TM_CORES,
};

/// The times of one run.
#[derive(Debug, Clone, Copy)]
struct Times {
    window: u64,
    /// A TaskManager uses CPU from this long after it was created.
    start: u64,
    /// The second burst this long after the first.
    gap: u64,
    /// The second burst this long after a first that never starts.
    stuck_gap: u64,
    ttl: u64,
    scrape: u32,
}

fn times() -> Times {
    if std::env::var_os("PLACEMENT_HANDOVER_FULL_SCALE").is_some() {
        Times {
            window: 120,
            start: 60,
            gap: 120,
            stuck_gap: 300,
            ttl: 90,
            scrape: 15,
        }
    } else {
        Times {
            window: 60,
            start: 30,
            gap: 60,
            stuck_gap: 60,
            ttl: 45,
            scrape: 5,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Variant {
    Evidence,
    FixedTtl,
    CaughtUp,
    /// The first burst never starts.
    Stuck,
    /// No first burst.
    Unloaded,
}

impl Variant {
    const ALL: [Variant; 5] = [
        Variant::Evidence,
        Variant::FixedTtl,
        Variant::CaughtUp,
        Variant::Stuck,
        Variant::Unloaded,
    ];

    fn pool(self) -> &'static str {
        match self {
            Variant::Evidence => "evidence",
            Variant::FixedTtl => "fixed-ttl",
            Variant::CaughtUp => "caught-up",
            Variant::Stuck => "stuck",
            Variant::Unloaded => "unloaded",
        }
    }

    /// The variant whose webhook reviews its pods: the installed one, unless it has its own.
    fn served_by(self) -> Variant {
        match self {
            Variant::FixedTtl | Variant::CaughtUp => self,
            Variant::Evidence | Variant::Stuck | Variant::Unloaded => Variant::Evidence,
        }
    }

    fn namespace(self) -> String {
        format!("handover-{}", self.pool())
    }

    /// When its second burst comes, after the first.
    fn gap(self, times: Times) -> u64 {
        match self {
            // The window covers the first burst's run, and one refresh has read it.
            Variant::CaughtUp => times.start + times.window + 3 * u64::from(times.scrape),
            Variant::Stuck | Variant::Unloaded => times.stuck_gap,
            Variant::Evidence | Variant::FixedTtl => times.gap,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Variant::Evidence => "handover on evidence",
            Variant::FixedTtl => "fixed ttl",
            Variant::CaughtUp => "metrics caught up",
            Variant::Stuck => "first never started",
            Variant::Unloaded => "no first burst",
        }
    }
}

/// A pool's nodes: their spec (cores, pool label, InternalIP, background CPU annotation) and
/// busy fraction, the same in every pool.
fn nodes(variant: Variant) -> Vec<(NodeSpec, f64)> {
    let mut rng = Rng(0x05EC_011D);
    let p = Variant::ALL.iter().position(|v| *v == variant).unwrap_or(0);
    (0..NODES)
        .map(|i| {
            let cores = *rng.pick(&[8u32, 16, 16, 32, 32, 64]);
            let busy = 0.10 + 0.70 * rng.below(1000) as f64 / 1000.0;
            let mut spec = NodeSpec::new(
                &format!("{}-{i:03}", variant.pool()),
                &format!("zone-{}", ["a", "b", "c"][i % 3]),
                cores,
            );
            spec.labels.push((POOL_LABEL.into(), variant.pool().into()));
            spec.internal_ip = Some(format!("10.{}.0.{}", p + 1, i + 1));
            spec.annotations.push((
                "placement-test/background-cpu-cores".into(),
                format!("{:.3}", busy * f64::from(cores)),
            ));
            (spec, busy)
        })
        .collect()
}

fn taskmanager(name: &str, job: &str, times: Times, variant: Variant) -> serde_json::Value {
    let start = times.start;
    let mut pod = objects::taskmanager(name, job, "2");
    pod["spec"]["nodeSelector"] = json!({POOL_LABEL: variant.pool()});
    pod["metadata"]["labels"][VARIANT_LABEL] = json!(variant.served_by().pool());
    pod["metadata"]["annotations"] = json!({
        "placement-test/cpu-cores": format!("{TM_CORES}"),
        "placement-test/scrape-seconds": format!("{}", times.scrape),
        "pod-ready.stage.kwok.x-k8s.io/delay": format!("{start}s"),
        // kwok's jitter is the latest start, not a spread added to the delay.
        "pod-ready.stage.kwok.x-k8s.io/jitter-delay": format!("{}s", start + 2),
    });
    if variant == Variant::Stuck && job == "first" {
        pod["metadata"]["annotations"][objects::WAITING_REASON] = json!("ImagePullBackOff");
    }
    pod
}

/// What one run measured.
#[derive(Debug)]
struct Row {
    variant: Variant,
    /// Hottest landing node of the second burst against water-filling, in its TaskManagers.
    above: f64,
    hottest: f64,
    ideal: f64,
    /// The first burst as counted just before the second.
    before: Before,
    /// The hottest landing node: its name, the first and second bursts' pods on it, how many
    /// of the second's named it, and one of their decision notes.
    hottest_node: String,
    on_hottest: (usize, usize, usize),
    note: String,
}

/// The nodes as really used with `pods` TaskManagers on each.
fn in_use(nodes: &[(NodeSpec, f64)], pods: &[usize]) -> Vec<NodeUse> {
    nodes
        .iter()
        .zip(pods)
        .map(|((spec, busy), &on)| {
            let cores = f64::from(spec.cores);
            NodeUse {
                cores,
                used: busy * cores,
                requested: 0.0,
            }
            .with(on, TASKMANAGER)
        })
        .collect()
}

/// Creates a job's burst in a variant's pool and waits until every pod is bound; pods by node
/// index.
async fn burst(cluster: &Cluster, variant: Variant, job: &str, times: Times) -> Vec<usize> {
    let names: Vec<String> = (0..BURST)
        .map(|i| format!("{job}-taskmanager-1-{i}"))
        .collect();
    let pods: Vec<serde_json::Value> = names
        .iter()
        .map(|name| taskmanager(name, job, times, variant))
        .collect();
    let namespace = variant.namespace();
    objects::create_many(&cluster.admin, &namespace, &pods, 16).await;
    let bound = cluster.bound(&namespace, &names).await;
    let prefix = format!("{}-", variant.pool());
    let mut on = vec![0; NODES];
    for node in bound.values() {
        let i: usize = node
            .strip_prefix(&prefix)
            .and_then(|n| n.parse().ok())
            .expect("a node of the pool");
        on[i] += 1;
    }
    on
}

/// How long `job`'s TaskManagers have been running, on average (0 for one not running).
async fn running_for(cluster: &Cluster, variant: Variant, job: &str) -> f64 {
    let pods = kube::Api::<k8s_openapi::api::core::v1::Pod>::namespaced(
        cluster.admin.clone(),
        &variant.namespace(),
    )
    .list(&kube::api::ListParams::default().labels(&format!("app={job}")))
    .await
    .expect("list pods");
    let now = std::time::SystemTime::now();
    let ran: Vec<f64> = pods
        .items
        .iter()
        .map(|pod| {
            pod.status
                .as_ref()
                .and_then(|s| s.container_statuses.as_ref())
                .and_then(|c| {
                    c.first()?
                        .state
                        .as_ref()?
                        .running
                        .as_ref()?
                        .started_at
                        .clone()
                })
                .map_or(0.0, |t| {
                    now.duration_since(std::time::SystemTime::from(t.0))
                        .map_or(0.0, |d| d.as_secs_f64())
                })
        })
        .collect();
    ran.iter().sum::<f64>() / ran.len().max(1) as f64
}

/// A variant's webhook config: the times, the handover rule, and targets narrowed to the
/// variant's TaskManagers (see [`targets`]).
fn config(times: Times, rule: &str, variant: Variant) -> String {
    format!(
        "{targets}prometheus: {{url: '{{prometheus}}', refresh_interval: {scrape}s, query_timeout: {timeout}s, \
         rate_window: {window}s, node_mapping: {{by: uname}}}}\n\
         inflight: {{ttl: {ttl}s, handover: {{rule: {rule}, scrape_interval: {scrape}s}}, \
         default_cpu_cores: 1}}\n",
        scrape = times.scrape,
        timeout = times.scrape.saturating_sub(1).max(1),
        window = times.window,
        ttl = times.ttl,
        targets = targets(variant.pool()),
    )
}

/// The cluster of the three pools, each variant's webhook serving its own namespace: the
/// installed one (two replicas) the evidence pool, one replica each the others. Each
/// variant's replicas, by index in `cluster.replicas`.
async fn start(times: Times) -> (Cluster, BTreeMap<usize, Vec<usize>>) {
    let mut setup = Setup::nodes(0);
    setup.nodes = Variant::ALL.iter().flat_map(|v| nodes(*v)).collect();
    setup.replicas = 2;
    setup.living = Some(times.scrape);
    // Without the heat bands: the variants' webhooks share one cluster's nodes, and each would
    // keep the one band label on every node from its own charges. What is compared here is how
    // charges end, not the bands (real_cluster::closed_loop gates those).
    setup.overlay = "deploy/no-heat-bands";
    setup.extra_config = config(times, "evidence", Variant::Evidence);
    let mut cluster = Cluster::start(setup).await;
    let url = cluster.prometheus.as_ref().expect("living").url();
    // The installed webhook serves the evidence pool, the stuck one and the unloaded one.
    let mut replicas = BTreeMap::from([(0, vec![0, 1]), (3, vec![0, 1]), (4, vec![0, 1])]);
    for (at, variant, rule) in [
        (1, Variant::FixedTtl, "ttl"),
        (2, Variant::CaughtUp, "evidence"),
    ] {
        let name = format!("placement-webhook-{}", variant.pool());
        // A Service of its own (none exists): it decides alone.
        let extra = format!(
            "{}service: {name}\n",
            config(times, rule, variant).replace("{prometheus}", &url)
        );
        let index = cluster
            .start_second_webhook(&name, &extra, (VARIANT_LABEL, variant.pool()))
            .await;
        replicas.insert(at, vec![index]);
    }
    for variant in Variant::ALL {
        let labels = match variant.served_by() {
            Variant::Evidence => json!({"placement-webhook.io/inject": "enabled"}),
            other => json!({VARIANT_LABEL: other.pool()}),
        };
        objects::create_namespace_labelled(&cluster.admin, &variant.namespace(), labels).await;
    }
    (cluster, replicas)
}

/// The first burst's load just before a variant's second burst: shown, charged, counted
/// twice and counted nowhere.
#[derive(Debug, Clone)]
struct Before {
    /// Each node's busy fraction as the shipped queries read it.
    read: BTreeMap<String, f64>,
    /// Of the first burst's load, the part the webhook's metrics showed.
    shown: f64,
    /// How long the first burst's TaskManagers had been running, on average, in seconds.
    ran: f64,
    /// The variant's webhook's charged and counted-twice CPU: over every pool, since a
    /// replica charges every steered pod it sees.
    charged: f64,
    counted_twice: f64,
    /// The TaskManagers' load of every pool neither shown nor charged, in cores.
    uncounted: f64,
    /// What the deciding replica charges on this pool's nodes, in cores.
    on_pool: f64,
    /// On the node of the pool where each is largest: the first burst's load the node's
    /// metrics show plus what the deciding replica charges there, beyond what its TaskManagers
    /// really carry or the metrics show, whichever is more (`over`), and short of what they
    /// carry (`under`), in cores ([`counted_against_truth`]). From the truth: each TaskManager
    /// of the first burst uses its 2 cores once it starts (none if it never does).
    over: f64,
    under: f64,
    /// The node counted most over: what it carries, shows and is charged.
    over_node: String,
}

/// What a variant's webhook counts of the first burst just before its second. Taken for every
/// variant due at that moment before any of them creates pods: a replica's gauges cover every
/// pool, and pods another pool is creating then are not charged until its next refresh.
async fn before(
    cluster: &Cluster,
    replicas: &[usize],
    (variant, first): (Variant, &[usize]),
    times: Times,
) -> Before {
    let window = Duration::from_secs(times.window);
    let nodes = nodes(variant);
    let read = readings(cluster, window)
        .await
        .expect("a snapshot of the settled cluster");
    let first_load = BURST as f64 * TM_CORES;
    let shown: f64 = nodes
        .iter()
        .map(|(spec, busy)| {
            (read.get(&spec.name).copied().unwrap_or(*busy) - busy) * f64::from(spec.cores)
        })
        .sum::<f64>()
        / first_load;
    let ran = running_for(cluster, variant, "first").await;
    let ca = cluster.ca_pem();
    let (mut charged, mut counted_twice) = (0.0f64, 0.0f64);
    // The deciding replica holds the charges.
    for &i in replicas {
        let metrics = cluster.replicas[i].metrics(&ca).await;
        let gauge = |name: &str| crate::support::kube::webhook::sum(&metrics, name, &[]);
        charged = charged.max(gauge("placement_webhook_inflight_charged_cpu_cores"));
        counted_twice =
            counted_twice.max(gauge("placement_webhook_inflight_counted_twice_cpu_cores"));
    }
    // A replica charges every pod it sees steered, by any of the three webhooks, and its
    // gauges sum them over the cluster: the load it should count is that of every pool.
    let uncounted = (steered_load(cluster).await - charged).max(0.0);
    let inflight = deciding_inflight(cluster, replicas, SystemTime::UNIX_EPOCH).await;
    // What the metrics showed at the deciding replica's last refresh, beside its charges then.
    let shown_then = shown_beyond_background_at(cluster, window, inflight.taken_at, &nodes).await;
    let (mut on_pool, mut over, mut under, mut over_node) = (0.0, 0.0f64, 0.0f64, String::new());
    for ((spec, _), &pods) in nodes.iter().zip(first) {
        let shown = shown_then[&spec.name];
        let charged_here = inflight.charged.get(&spec.name).copied().unwrap_or(0.0);
        on_pool += charged_here;
        let carried = pods as f64 * TM_CORES;
        let (over_here, under_here) = counted_against_truth(shown, charged_here, carried);
        if over_here > over {
            over = over_here;
            over_node = format!(
                "{}: {pods} TaskManagers carry {carried:.1}, shown {shown:.2}, charged {charged_here:.2}",
                spec.name,
            );
        }
        under = under.max(under_here);
    }
    Before {
        on_pool,
        over,
        under,
        over_node,
        read,
        shown,
        ran,
        charged,
        counted_twice,
        uncounted,
    }
}

/// The variant's second burst, and its row.
async fn second_burst(
    cluster: &Cluster,
    variant: Variant,
    times: Times,
    first: &[usize],
    before: Before,
) -> Row {
    let nodes = nodes(variant);
    let second = burst(cluster, variant, "second", times).await;
    let as_first_left = in_use(&nodes, first);
    let ideal = water_filling(&as_first_left, &[TASKMANAGER; BURST]);
    let both: Vec<usize> = first.iter().zip(&second).map(|(a, b)| a + b).collect();
    let after = in_use(&nodes, &both);
    let (above, hottest) = above_bound(&after, &second, TM_CORES, ideal);
    let at = hottest_landing(&after, &second).unwrap_or(0);
    let hottest_node = nodes[at].0.name.clone();
    let (named, note) = naming(cluster, variant, &hottest_node).await;
    let note = format!(
        "read {:.3} before (really {:.3}, idle {:.3}); {note}",
        before.read.get(&hottest_node).copied().unwrap_or(f64::NAN),
        as_first_left[at].level(),
        nodes[at].1
    );
    Row {
        variant,
        above,
        hottest,
        ideal,
        before,
        on_hottest: (first[at], second[at], named),
        hottest_node,
        note,
    }
}

/// Of the second burst's pods bound to `node`: how many the webhook had named for it, and the
/// decision note of one.
async fn naming(cluster: &Cluster, variant: Variant, node: &str) -> (usize, String) {
    let pods = kube::Api::<k8s_openapi::api::core::v1::Pod>::namespaced(
        cluster.admin.clone(),
        &variant.namespace(),
    )
    .list(&kube::api::ListParams::default().labels("app=second"))
    .await
    .expect("list pods");
    let notes: Vec<&str> = pods
        .items
        .iter()
        .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node))
        .filter_map(|p| crate::fixture::decision(p))
        .collect();
    let named = notes
        .iter()
        .filter(|n| crate::fixture::landing(n).contains_key(node))
        .count();
    (named, notes.first().map_or("none", |n| n).to_string())
}

/// The TaskManager load of every pool the metrics do not show yet: each TaskManager's cores
/// less what its own cAdvisor series shows over the window. A TaskManager that never starts
/// carries none.
async fn steered_load(cluster: &Cluster) -> f64 {
    let prometheus = cluster.prometheus.as_ref().expect("a living cluster");
    let mut load = 0.0;
    for variant in Variant::ALL {
        let pods = kube::Api::<k8s_openapi::api::core::v1::Pod>::namespaced(
            cluster.admin.clone(),
            &variant.namespace(),
        )
        .list(&kube::api::ListParams::default())
        .await
        .expect("list pods");
        let starting = (pods.items.iter())
            .filter(|p| {
                (p.metadata.annotations.as_ref())
                    .is_none_or(|a| !a.contains_key(objects::WAITING_REASON))
            })
            .count();
        load += starting as f64 * TM_CORES;
    }
    let shown = prometheus
        .query(&format!(
            "sum(rate(container_cpu_usage_seconds_total{{namespace=~\"handover-.*\",container=\"flink-main-container\"}}[{}s]))",
            times().window
        ))
        .await
        .first()
        .map_or(0.0, |s| s.1);
    load - shown
}

/// The three variants at once: the first bursts together, each second burst after its gap.
async fn run() -> Vec<Row> {
    let _serial = serial().await;
    let times = times();
    let (cluster, replicas) = start(times).await;
    let window = Duration::from_secs(times.window);
    let expected: Vec<(String, f64)> = Variant::ALL
        .iter()
        .flat_map(|v| nodes(*v))
        .map(|(n, b)| (n.name.clone(), b))
        .collect();
    wait_settled(&cluster, window, &expected).await;

    let first_at = Instant::now();
    let firsts = join_all(Variant::ALL.iter().map(|v| async {
        match v {
            Variant::Unloaded => vec![0; NODES],
            _ => burst(&cluster, *v, "first", times).await,
        }
    }))
    .await;
    // What the first burst loads each node with: nothing where it never started.
    let loading: Vec<Vec<usize>> = (Variant::ALL.iter().zip(&firsts))
        .map(|(v, first)| match v {
            Variant::Stuck => vec![0; NODES],
            _ => first.clone(),
        })
        .collect();
    // The variants due at the same moment take their measures first, then burst together.
    let mut gaps: Vec<u64> = Variant::ALL.iter().map(|v| v.gap(times)).collect();
    gaps.sort_unstable();
    gaps.dedup();
    let mut rows = Vec::new();
    for gap in gaps {
        tokio::time::sleep(
            (first_at + Duration::from_secs(gap)).saturating_duration_since(Instant::now()),
        )
        .await;
        let due: Vec<usize> = (0..Variant::ALL.len())
            .filter(|&at| Variant::ALL[at].gap(times) == gap)
            .collect();
        let measured = join_all(due.iter().map(|&at| {
            let variant = (Variant::ALL[at], loading[at].as_slice());
            before(&cluster, &replicas[&at], variant, times)
        }))
        .await;
        let bursts = due.iter().zip(measured).map(|(&at, measured)| {
            second_burst(&cluster, Variant::ALL[at], times, &loading[at], measured)
        });
        rows.extend(join_all(bursts).await);
    }
    // Rows in the order of `Variant::ALL`.
    rows.sort_by_key(|r| Variant::ALL.iter().position(|v| *v == r.variant));
    rows
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_burst_counts_the_first_until_the_metrics_show_it() {
    let rows = run().await;
    println!(
        "{:<22} {:>9} {:>8} {:>7} {:>9} {:>12} {:>9} {:>13} {:>11} {:>9} {:>9} {:>9}",
        "second burst",
        "above TMs",
        "hottest",
        "ideal",
        "first ran",
        "first shown",
        "charged",
        "counted twice",
        "uncounted",
        "on pool",
        "over",
        "under"
    );
    for r in &rows {
        println!(
            "{:<22} {:>+9.2} {:>8.3} {:>7.3} {:>8.0}s {:>11.0}% {:>9.1} {:>13.1} {:>11.1} {:>9.1} {:>9.2} {:>9.2}",
            r.variant.name(),
            r.above,
            r.hottest,
            r.ideal,
            r.before.ran,
            r.before.shown * 100.0,
            r.before.charged,
            r.before.counted_twice,
            r.before.uncounted,
            r.before.on_pool,
            r.before.over,
            r.before.under
        );
    }
    for r in &rows {
        println!(
            "{}: counted most over on {}",
            r.variant.name(),
            r.before.over_node
        );
    }
    for r in &rows {
        let (first, second, named) = r.on_hottest;
        println!(
            "{}: hottest {} took {second} of the second burst ({named} named it) over {first} of the first; one: {}",
            r.variant.name(),
            r.hottest_node,
            r.note
        );
    }
    let [evidence, fixed, caught_up, stuck, unloaded] =
        [&rows[0], &rows[1], &rows[2], &rows[3], &rows[4]];
    assert!(
        evidence.above <= 1.0,
        "the second burst ends {:.2} TaskManagers above water-filling",
        evidence.above
    );
    assert!(
        evidence.above - caught_up.above <= 0.5,
        "{:.2} TaskManagers above, {:.2} with the metrics caught up",
        evidence.above,
        caught_up.above
    );
    assert!(
        evidence.before.uncounted <= TM_CORES,
        "{:.1} cores of the first burst counted nowhere at the second",
        evidence.before.uncounted
    );
    assert!(
        fixed.before.uncounted > evidence.before.uncounted,
        "the fixed ttl dropped charges the metrics did not show yet"
    );
    // Per node, from the truth: what the metrics show plus what the webhook charges against
    // what the first burst's TaskManagers carry, within one TaskManager's load either way
    // wherever charges end on evidence. (The fixed ttl's charges end early by design.)
    for r in [evidence, caught_up, stuck] {
        assert!(
            r.before.over <= TM_CORES && r.before.under <= TM_CORES,
            "{}: a node counted {:.2} cores over and one {:.2} under what its TaskManagers carry",
            r.variant.name(),
            r.before.over,
            r.before.under
        );
    }
    // Pods that never start hold no charge by the second burst, and it lands as on the same
    // nodes with no first burst at all.
    assert!(
        stuck.before.on_pool < 1e-6,
        "{:.1} cores still charged for TaskManagers that never started",
        stuck.before.on_pool
    );
    assert!(
        stuck.above - unloaded.above <= 0.5,
        "{:.2} TaskManagers above after a first burst that never started, {:.2} with none",
        stuck.above,
        unloaded.above
    );
}
