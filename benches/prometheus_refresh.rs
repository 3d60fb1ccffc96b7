//! Refresh cost against a real Prometheus at 50 / 500 / 5,000 fake nodes, and admission latency
//! with and without a refresh running.
//!
//! `cargo bench --bench prometheus_refresh` (needs the Prometheus `bash tests/prometheus/build.sh`
//! builds). For each size it
//! starts the synthetic exporter and Prometheus, waits for rate data, times refreshes, then
//! serves reviews over TLS from the webhook twice: idle, and while refreshes run back to back.
//! Prometheus and the load generator share this machine's cores with the webhook, so the
//! latency comparison is a worst case.

#[path = "../tests/support/exporter.rs"]
mod exporter;
#[path = "../tests/support/ports.rs"]
mod ports;
#[path = "../tests/support/prometheus.rs"]
mod prometheus;
#[path = "../tests/support/webhook.rs"]
mod webhook;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use exporter::{Exporter, FakeNode};
use placement_webhook::config::Config;
use placement_webhook::config::prometheus::PrometheusConfig;
use placement_webhook::metrics_source::PrometheusSource;
use prometheus::Prometheus;
use serde_json::Value;

const SIZES: [usize; 3] = [50, 500, 5_000];
const REFRESHES: usize = 10;
const REVIEWS: usize = 3_000;

fn fleet(count: usize) -> Vec<FakeNode> {
    (0..count)
        .map(|i| {
            let mut node = FakeNode::new(
                i,
                0.05 + 0.9 * ((i * 37) % 100) as f64 / 100.0,
                1.0e6 * ((i * 53) % 100) as f64,
            );
            // Two cores keep 5,000 nodes at ~75,000 series per scrape.
            node.cores = 2;
            node
        })
        .collect()
}

fn source_config(url: &str) -> PrometheusConfig {
    PrometheusConfig {
        refresh_interval: Duration::from_secs(3600),
        query_timeout: Duration::from_secs(10),
        rate_window: Duration::from_secs(30),
        ..PrometheusConfig::for_url(url)
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn review(uid: usize) -> Value {
    let mut review = webhook::taskmanager_review(&format!("bench-{uid}"));
    let request = &mut review["request"];
    // Dry runs leave the ledger alone, so both phases decide over the same state.
    request["dryRun"] = Value::Bool(true);
    if let Some(spec) = request["object"]["spec"].as_object_mut() {
        spec.remove("nodeSelector");
        spec.remove("affinity");
    }
    review
}

async fn latencies(client: &webhook::Client, from: usize) -> Vec<Duration> {
    let mut out = Vec::with_capacity(REVIEWS);
    for i in 0..REVIEWS {
        let body = review(from + i);
        let started = Instant::now();
        let reply = client.review(&body).await;
        out.push(started.elapsed());
        assert_eq!(reply.status, 200);
        assert!(reply.patch().is_some(), "review {i} was not patched");
    }
    out.sort();
    out
}

fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1e3)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let binary = prometheus::binary();
    let mut rows = Vec::new();
    for n in SIZES {
        let exporter = Exporter::start(fleet(n)).await;
        let prom = Prometheus::start_scraping_every(binary.clone(), &[exporter.addr], 5).await;
        let source = PrometheusSource::new(source_config(&prom.url())).expect("source");

        // Rate data for every node: two scrapes inside the window.
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let refresh = source.refresh(None).await;
            if let Ok((snapshot, _)) = &refresh.outcome
                && snapshot.nodes.len() == n
            {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{n} nodes never all had readings"
            );
            tokio::time::sleep(Duration::from_secs(1)).await;
        }

        let mut durations = Vec::with_capacity(REFRESHES);
        let mut queries = 0;
        for _ in 0..REFRESHES {
            let refresh = source.refresh(None).await;
            assert!(
                refresh.outcome.is_ok(),
                "refresh failed: {:?}",
                refresh.outcome.err()
            );
            queries = refresh.queries_sent;
            durations.push(refresh.duration);
        }
        durations.sort();

        let config = Config {
            metrics_file: None,
            prometheus: Some(source_config(&prom.url())),
            ..webhook::test_config()
        };
        let running = webhook::start(config).await;
        while running.store.current().is_none_or(|v| v.nodes.len() != n) {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let client = webhook::self_signed_client(&running);
        // Warm the connection and caches.
        let _ = latencies(&client, 0).await;
        let idle = latencies(&client, REVIEWS).await;

        let stop = Arc::new(AtomicBool::new(false));
        let refreshes = Arc::new(AtomicUsize::new(0));
        let background = {
            let (stop, refreshes, store) = (stop.clone(), refreshes.clone(), running.store.clone());
            let source = PrometheusSource::new(source_config(&prom.url())).expect("source");
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    if let Ok((snapshot, _)) = source.refresh(None).await.outcome {
                        store.publish_snapshot(snapshot);
                        refreshes.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        };
        let busy = latencies(&client, 2 * REVIEWS).await;
        stop.store(true, Ordering::Relaxed);
        let _ = background.await;
        running.stop().await;

        rows.push(format!(
            "| {n} | {queries} | {} | {} | {} / {} | {} / {} | {} |",
            ms(percentile(&durations, 0.5)),
            ms(durations[durations.len() - 1]),
            ms(percentile(&idle, 0.5)),
            ms(percentile(&idle, 0.99)),
            ms(percentile(&busy, 0.5)),
            ms(percentile(&busy, 0.99)),
            refreshes.load(Ordering::Relaxed),
        ));
        eprintln!("{}", rows[rows.len() - 1]);
        drop(prom);
        drop(exporter);
    }
    println!(
        "| nodes | queries per refresh | refresh p50 ms | refresh max ms | review p50 / p99 ms, idle | review p50 / p99 ms, refreshing | refreshes during |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    for row in rows {
        println!("{row}");
    }
}
