//! End-to-end admission latency through a real kube-apiserver (v1.36.3, tests/kube): pod CREATE
//! at fixed rates on a cluster of `NODES` nodes and `RUNNING` running pods, with
//!
//! - this webhook as installed: deploy/ applied, 2 replicas, the Service reaching the Lease's
//!   holder only (a balancer following its EndpointSlice, as kube-proxy does), under its
//!   ServiceAccount's RBAC;
//! - `examples/minimal_webhook.rs` registered the same way (2 replicas behind a balancer, the
//!   same registration: URL, selectors, timeout);
//! - no webhook (the registration deleted).
//!
//! For each, the create's own p50/p99 (timed by the client: the apiserver's whole path) and the
//! apiserver's `apiserver_admission_webhook_admission_duration_seconds` for the webhook (mean
//! and p50/p99 from its buckets), as ratios to the minimal webhook, and the replicas' own time
//! in their handler. The three take turns at each rate, round after round, in an order that
//! rotates with the round, so a drift of the machine falls on all three alike; each figure pools
//! every round's creates (the p99 of all of them, the histograms summed), and every round's own
//! p99 is printed beside it. "no webhook" against the minimal one shows the noise left. No
//! scheduler runs: the created pods stay Pending and are deleted between rows.
//!
//! ```text
//! bash tests/kube/build.sh && cargo bench --bench apiserver_latency
//! NODES=5000 RUNNING=50000 RATES=50,200,500 SECONDS_PER_RATE=10 REPLICAS=2 ROUNDS=6 (defaults)
//! ```

#[path = "../tests/real_cluster/balancer.rs"]
mod balancer;
#[path = "../tests/real_cluster/fixture.rs"]
#[allow(dead_code)]
mod fixture;
#[path = "../tests/support/mod.rs"]
#[allow(dead_code)]
mod support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{DeleteParams, ListParams, PostParams};

use balancer::Balancer;
use fixture::{Cluster, FLINK, Setup};
use support::kube::objects::{NodeSpec, bound_pod, taskmanager};
use support::kube::process::Process;
use support::kube::webhook::{self, CONFIGURATION};

const WEBHOOK_NAME: &str = "taskmanagers.placement-webhook.io";
const METRIC: &str = "apiserver_admission_webhook_admission_duration_seconds";

fn env_usize(name: &str, default: usize) -> usize {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{name} must be a whole number, not {v:?}")),
        Err(_) => default,
    }
}

/// One measurement, or every round's pooled: what the client timed and what the apiserver timed.
struct Row {
    what: String,
    rate: usize,
    /// The creates' latencies (seconds), sorted.
    latencies: Vec<f64>,
    failed: usize,
    /// The apiserver's call histogram over the row: (le, count) and its sum and count.
    calls: Vec<(f64, f64)>,
    call_sum: f64,
    call_count: f64,
    /// Time inside the webhook's handler, over every replica (a forwarded review counts on
    /// both: the sender's time includes the decider's): (seconds, reviews).
    handled: (f64, f64),
}

impl Row {
    fn p(&self, q: f64) -> f64 {
        quantile(&self.latencies, q)
    }
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let at = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted[at]
}

/// The value of one line of Prometheus text format (the last field).
fn sample_value(line: &str) -> Option<f64> {
    line.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok())
}

/// The webhook's admission-duration histogram: (buckets le -> cumulative count, sum, count).
fn histogram(metrics: &str) -> (Vec<(f64, f64)>, f64, f64) {
    let matches =
        |l: &str| l.contains(&format!("name=\"{WEBHOOK_NAME}\"")) && l.contains("type=\"admit\"");
    let mut buckets = Vec::new();
    let (mut sum, mut count) = (0.0, 0.0);
    for line in metrics.lines().filter(|l| matches(l)) {
        if let Some(rest) = line.strip_prefix(&format!("{METRIC}_bucket{{")) {
            let le = rest
                .split("le=\"")
                .nth(1)
                .and_then(|s| s.split('"').next())
                .map(|s| {
                    if s == "+Inf" {
                        f64::INFINITY
                    } else {
                        s.parse().unwrap_or(f64::NAN)
                    }
                });
            if let (Some(le), Some(v)) = (le, sample_value(line)) {
                buckets.push((le, v));
            }
        } else if line.starts_with(&format!("{METRIC}_sum{{")) {
            sum += sample_value(line).unwrap_or(0.0);
        } else if line.starts_with(&format!("{METRIC}_count{{")) {
            count += sample_value(line).unwrap_or(0.0);
        }
    }
    // Several label sets (rejected, operation) share the buckets: add them up per bound.
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut merged: Vec<(f64, f64)> = Vec::new();
    for (le, v) in buckets {
        match merged.last_mut() {
            Some(last) if last.0 == le => last.1 += v,
            _ => merged.push((le, v)),
        }
    }
    (merged, sum, count)
}

/// The webhook replicas' own review-duration histogram: (sum, count) over every replica.
async fn handler_seconds(cluster: &Cluster) -> (f64, f64) {
    let (mut sum, mut count) = (0.0, 0.0);
    for text in cluster.metrics().await {
        for line in text.lines() {
            if line.starts_with("placement_webhook_review_duration_seconds_sum") {
                sum += sample_value(line).unwrap_or(0.0);
            } else if line.starts_with("placement_webhook_review_duration_seconds_count") {
                count += sample_value(line).unwrap_or(0.0);
            }
        }
    }
    (sum, count)
}

/// The bucket counts added between two readings.
fn histogram_delta(before: &[(f64, f64)], after: &[(f64, f64)]) -> Vec<(f64, f64)> {
    after
        .iter()
        .map(|(le, v)| {
            let was = before
                .iter()
                .find(|(l, _)| l == le)
                .map_or(0.0, |(_, w)| *w);
            (*le, v - was)
        })
        .collect()
}

/// The `q` quantile of cumulative bucket counts, interpolated inside its bucket.
fn histogram_quantile(delta: &[(f64, f64)], q: f64) -> Option<f64> {
    let total = delta.last()?.1;
    if total <= 0.0 {
        return None;
    }
    let rank = q * total;
    let mut lower = (0.0, 0.0);
    for &(le, cumulative) in delta {
        if cumulative >= rank {
            if le.is_infinite() {
                return Some(lower.0);
            }
            let span = cumulative - lower.1;
            let within = if span > 0.0 {
                (rank - lower.1) / span
            } else {
                1.0
            };
            return Some(lower.0 + (le - lower.0) * within);
        }
        lower = (le, cumulative);
    }
    None
}

/// Creates TaskManagers at `rate` per second for `seconds`, each in its own task; returns the
/// sorted latencies (seconds) of those created and the count that failed.
async fn drive(cluster: &Cluster, rate: usize, seconds: usize, prefix: &str) -> (Vec<f64>, usize) {
    let api = Api::<Pod>::namespaced(cluster.admin.clone(), FLINK);
    let total = rate * seconds;
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate as f64));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let mut tasks = futures::stream::FuturesUnordered::new();
    for i in 0..total {
        tick.tick().await;
        let api = api.clone();
        let pod: Pod = serde_json::from_value(taskmanager(&format!("{prefix}-{i:06}"), "job", "1"))
            .expect("pod");
        tasks.push(tokio::spawn(async move {
            let started = Instant::now();
            let ok = api.create(&PostParams::default(), &pod).await.is_ok();
            (ok, started.elapsed().as_secs_f64())
        }));
    }
    let mut latencies = Vec::with_capacity(total);
    let mut failed = 0;
    while let Some(done) = tasks.next().await {
        match done {
            Ok((true, took)) => latencies.push(took),
            _ => failed += 1,
        }
    }
    latencies.sort_by(f64::total_cmp);
    (latencies, failed)
}

async fn clear(cluster: &Cluster) {
    let api = Api::<Pod>::namespaced(cluster.admin.clone(), FLINK);
    api.delete_collection(
        &DeleteParams::default().grace_period(0),
        &ListParams::default(),
    )
    .await
    .expect("delete pods");
    let deadline = Instant::now() + Duration::from_secs(120);
    while !api
        .list(&ListParams::default().limit(1))
        .await
        .expect("list")
        .items
        .is_empty()
    {
        assert!(Instant::now() < deadline, "pods not deleted");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

async fn measure(cluster: &Cluster, what: &str, rate: usize, seconds: usize, round: usize) -> Row {
    clear(cluster).await;
    // Warm the connections and the webhook's caches.
    drive(cluster, 20, 1, &format!("warm-{rate}")).await;
    let (before, sum0, count0) = histogram(&cluster.plane.metrics());
    let (handled0, reviews0) = handler_seconds(cluster).await;
    let (latencies, failed) = drive(cluster, rate, seconds, &format!("tm-{rate}")).await;
    let (after, sum1, count1) = histogram(&cluster.plane.metrics());
    let (handled1, reviews1) = handler_seconds(cluster).await;
    let row = Row {
        what: what.to_string(),
        rate,
        latencies,
        failed,
        calls: histogram_delta(&before, &after),
        call_sum: sum1 - sum0,
        call_count: count1 - count0,
        handled: if what == "placement-webhook" {
            (handled1 - handled0, reviews1 - reviews0)
        } else {
            (0.0, 0.0)
        },
    };
    eprintln!(
        "round {round}: {what} at {rate}/s: p99 {:.1} ms",
        row.p(0.99) * 1000.0
    );
    row
}

/// Two minimal webhooks with the webhook's serving pair, behind a balancer of their own.
async fn start_minimal(cluster: &Cluster) -> (Vec<Process>, Balancer) {
    let status = std::process::Command::new("cargo")
        // The bench profile, as `cargo bench` built the library: no rebuild either way.
        .args([
            "build",
            "--profile",
            "bench",
            "--example",
            "minimal_webhook",
        ])
        .status()
        .expect("cargo");
    assert!(status.success(), "building examples/minimal_webhook failed");
    let binary = webhook::repo_path("target/release/examples/minimal_webhook");
    let mut processes = Vec::new();
    let mut backends = Vec::new();
    for i in 0..2 {
        let port = support::kube::free_port();
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        processes.push(Process::spawn(
            &format!("minimal-{i}"),
            &binary,
            &[
                cluster.certs.cert().display().to_string(),
                cluster.certs.key().display().to_string(),
                addr.to_string(),
            ],
            &[],
            cluster.plane.dir.path().join(format!("minimal-{i}.log")),
        ));
        backends.push(addr);
    }
    for addr in &backends {
        let deadline = Instant::now() + Duration::from_secs(30);
        while tokio::net::TcpStream::connect(addr).await.is_err() {
            assert!(Instant::now() < deadline, "minimal webhook not listening");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    (processes, Balancer::start(backends).await)
}

/// One row per webhook and rate, every round's pooled, and every round's own p99 (to see the
/// spread).
fn pooled(samples: Vec<Row>, rates: &[usize]) -> Vec<(Row, Vec<f64>)> {
    let mut rows = Vec::new();
    for what in ["placement-webhook", "minimal webhook", "no webhook"] {
        for &rate in rates {
            let mut pool = Row {
                what: what.to_string(),
                rate,
                latencies: Vec::new(),
                failed: 0,
                calls: Vec::new(),
                call_sum: 0.0,
                call_count: 0.0,
                handled: (0.0, 0.0),
            };
            let mut p99s = Vec::new();
            for row in samples.iter().filter(|r| r.what == what && r.rate == rate) {
                p99s.push(row.p(0.99));
                pool.latencies.extend(&row.latencies);
                pool.failed += row.failed;
                for &(le, n) in &row.calls {
                    match pool.calls.iter_mut().find(|(l, _)| *l == le) {
                        Some(bucket) => bucket.1 += n,
                        None => pool.calls.push((le, n)),
                    }
                }
                pool.call_sum += row.call_sum;
                pool.call_count += row.call_count;
                pool.handled.0 += row.handled.0;
                pool.handled.1 += row.handled.1;
            }
            if p99s.is_empty() {
                continue;
            }
            pool.latencies.sort_by(f64::total_cmp);
            pool.calls.sort_by(|a, b| a.0.total_cmp(&b.0));
            rows.push((pool, p99s));
        }
    }
    rows
}

fn ms(v: Option<f64>) -> String {
    v.map_or("-".into(), |s| format!("{:.1}", s * 1000.0))
}

fn ratio(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}x", a / b),
        _ => "-".into(),
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    // `cargo bench` passes `--bench`; this bench takes no arguments of its own.
    let nodes = env_usize("NODES", 5000);
    let running = env_usize("RUNNING", 50_000);
    let seconds = env_usize("SECONDS_PER_RATE", 10);
    let rounds = env_usize("ROUNDS", 6).max(1);
    let rates: Vec<usize> = std::env::var("RATES")
        .unwrap_or_else(|_| "50,200,500".into())
        .split(',')
        .map(|r| {
            r.trim()
                .parse()
                .expect("RATES: whole numbers, comma-separated")
        })
        .collect();

    let mut setup = Setup::nodes(0);
    setup.nodes = (0..nodes)
        .map(|i| {
            let spec = NodeSpec::new(
                &format!("node-{i:05}"),
                &format!("zone-{}", ["a", "b", "c"][i % 3]),
                64,
            );
            (spec, 0.1 + 0.8 * ((i * 7919) % nodes) as f64 / nodes as f64)
        })
        .collect();
    setup.running = (0..running)
        .map(|i| {
            bound_pod(
                &format!("other-{i:06}"),
                &format!("node-{:05}", i % nodes),
                "100m",
            )
        })
        .collect();
    setup.replicas = env_usize("REPLICAS", 2);
    setup.scheduler = None;
    let started = Instant::now();
    let cluster = Cluster::start(setup).await;
    eprintln!(
        "{nodes} nodes, {running} running pods, webhook installed in {:.0?}",
        started.elapsed()
    );

    // The registration as installed: its URL to come back to after the minimal webhook, and
    // the whole object to create again after "no webhook" deleted it.
    let installed = cluster.plane.kubectl(&[
        "get",
        "mutatingwebhookconfiguration",
        CONFIGURATION,
        "-o",
        "jsonpath={.webhooks[0].clientConfig.url}",
    ]);
    let mut registration: serde_json::Value = serde_json::from_str(&cluster.plane.kubectl(&[
        "get",
        "mutatingwebhookconfiguration",
        CONFIGURATION,
        "-o",
        "json",
    ]))
    .expect("registration JSON");
    if let Some(meta) = registration["metadata"].as_object_mut() {
        for field in [
            "resourceVersion",
            "uid",
            "creationTimestamp",
            "managedFields",
            "generation",
        ] {
            meta.remove(field);
        }
    }
    let registration = registration.to_string();
    let (_minimal, minimal_balancer) = start_minimal(&cluster).await;
    let minimal_url = format!("https://127.0.0.1:{}/mutate", minimal_balancer.addr.port());
    // The three take turns at each rate, in an order that rotates with the round: this machine
    // drifts (and at the highest rate tips over now and then), so rows measured apart would
    // compare two moments.
    let turns = [
        ("placement-webhook", Some(installed.as_str())),
        ("minimal webhook", Some(minimal_url.as_str())),
        ("no webhook", None),
    ];
    let mut registered = true;
    let mut samples = Vec::new();
    for round in 1..=rounds {
        for &rate in &rates {
            for turn in 0..turns.len() {
                let (what, url) = turns[(turn + round) % turns.len()];
                match (url, registered) {
                    (Some(url), true) => {
                        webhook::register_at(&cluster.plane, url, &cluster.certs.ca_bundle)
                    }
                    (Some(url), false) => {
                        cluster
                            .plane
                            .kubectl_with_input(&["create", "-f", "-"], Some(&registration));
                        webhook::register_at(&cluster.plane, url, &cluster.certs.ca_bundle);
                    }
                    (None, true) => {
                        cluster.plane.kubectl(&[
                            "delete",
                            "mutatingwebhookconfiguration",
                            CONFIGURATION,
                        ]);
                    }
                    (None, false) => {}
                }
                registered = url.is_some();
                tokio::time::sleep(Duration::from_secs(3)).await;
                samples.push(measure(&cluster, what, rate, seconds, round).await);
            }
        }
    }
    let rows = pooled(samples, &rates);

    println!(
        "\npod CREATE through kube-apiserver {}: {nodes} nodes, {running} running pods, \
         {seconds} s per rate and turn, {rounds} rounds pooled",
        support::kube::KUBERNETES_VERSION
    );
    println!(
        "{:<18} {:>6} {:>7} {:>6} {:>7} {:>8} {:>9} {:>8} {:>8} {:>9} {:>8} {:>7}  p99 per round",
        "webhook",
        "rate/s",
        "created",
        "failed",
        "p50 ms",
        "p99 ms",
        "call mean",
        "call p50",
        "call p99",
        "p99 / min",
        "call p99 / min",
        "handler ms"
    );
    let minimal = |rate: usize| {
        rows.iter()
            .find(|(r, _)| r.what == "minimal webhook" && r.rate == rate)
            .map(|(r, _)| r)
    };
    for (row, p99s) in &rows {
        let base = minimal(row.rate);
        let per_round: Vec<String> = p99s.iter().map(|s| format!("{:.1}", s * 1000.0)).collect();
        let call_mean = (row.call_count > 0.0).then(|| row.call_sum / row.call_count);
        let call_p99 = histogram_quantile(&row.calls, 0.99);
        println!(
            "{:<18} {:>6} {:>7} {:>6} {:>7.1} {:>8.1} {:>9} {:>8} {:>8} {:>9} {:>8} {:>7}  {}",
            row.what,
            row.rate,
            row.latencies.len(),
            row.failed,
            row.p(0.5) * 1000.0,
            row.p(0.99) * 1000.0,
            ms(call_mean),
            ms(histogram_quantile(&row.calls, 0.5)),
            ms(call_p99),
            ratio(Some(row.p(0.99)), base.map(|b| b.p(0.99))),
            ratio(
                call_p99,
                base.and_then(|b| histogram_quantile(&b.calls, 0.99))
            ),
            (row.handled.1 > 0.0)
                .then(|| row.handled.0 / row.handled.1)
                .map_or("-".into(), |s| format!("{:.2}", s * 1000.0)),
            per_round.join(" / "),
        );
    }
}
