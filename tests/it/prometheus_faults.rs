//! The Prometheus source against a misbehaving Prometheus API: errors, garbage, slowness,
//! wrong result types, failing optional queries, and credentials on the wire.
//!
//! A real Prometheus cannot be made to answer like a broken proxy, so this one is a small
//! in-process HTTP server; `prometheus_live.rs` covers the real thing.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use placement_webhook::config::prometheus::{Auth, PrometheusConfig};
use placement_webhook::metrics_source::{PrometheusSource, RefreshError};
use serde::Deserialize;

#[derive(Clone, Copy, PartialEq, Debug)]
enum Behaviour {
    Healthy,
    /// 503 with an HTML page, as a proxy in front of a dead Prometheus answers.
    ProxyError,
    /// 200 with a body that is not the Prometheus API.
    Garbage,
    /// 400 with the API's error envelope.
    BadQuery,
    /// Answers long after the query timeout.
    Slow,
    /// A range vector instead of an instant vector.
    Matrix,
    /// Healthy, but the memory query fails.
    MemoryFails,
}

#[derive(Default)]
struct Seen {
    authorization: Vec<String>,
    queries: usize,
}

#[derive(Clone)]
struct Fake {
    behaviour: Arc<Mutex<Behaviour>>,
    seen: Arc<Mutex<Seen>>,
}

#[derive(Deserialize)]
struct QueryParams {
    query: String,
}

fn vector(values: &[(&str, f64)], label: &str) -> String {
    let result: Vec<String> = values
        .iter()
        .map(|(node, v)| {
            format!(r#"{{"metric":{{"{label}":"{node}","nodename":"{node}"}},"value":[1700000000.0,"{v}"]}}"#)
        })
        .collect();
    format!(
        r#"{{"status":"success","data":{{"resultType":"vector","result":[{}]}}}}"#,
        result.join(",")
    )
}

async fn query(
    State(fake): State<Fake>,
    Query(params): Query<QueryParams>,
    headers: HeaderMap,
) -> Response {
    let behaviour = *fake.behaviour.lock().expect("behaviour");
    {
        let mut seen = fake.seen.lock().expect("seen");
        seen.queries += 1;
        if let Some(auth) = headers.get("authorization").and_then(|v| v.to_str().ok()) {
            seen.authorization.push(auth.to_string());
        }
    }
    let q = params.query;
    let json = |body: String| ([("content-type", "application/json")], body).into_response();
    match behaviour {
        Behaviour::ProxyError => {
            return (
                StatusCode::SERVICE_UNAVAILABLE,
                "<html>502 Bad Gateway</html>",
            )
                .into_response();
        }
        Behaviour::Garbage => return (StatusCode::OK, "not json at all").into_response(),
        Behaviour::BadQuery => {
            return (
                StatusCode::BAD_REQUEST,
                [("content-type", "application/json")],
                r#"{"status":"error","errorType":"bad_data","error":"1:1: parse error"}"#,
            )
                .into_response();
        }
        Behaviour::Slow => tokio::time::sleep(Duration::from_secs(10)).await,
        Behaviour::Matrix => {
            return json(
                r#"{"status":"success","data":{"resultType":"matrix","result":[]}}"#.into(),
            );
        }
        Behaviour::MemoryFails if q.contains("MemAvailable") => {
            return (StatusCode::INTERNAL_SERVER_ERROR, "boom").into_response();
        }
        Behaviour::Healthy | Behaviour::MemoryFails => {}
    }
    let nodes = |a: f64, b: f64, c: f64| vec![("n1", a), ("n2", b), ("n3", c)];
    let body = if q.contains("count_over_time(node_uname_info") {
        // The samples of each node over the window: n3's series is young.
        vector(&nodes(8.0, 8.0, 2.0), "instance")
    } else if q.contains("node_uname_info") {
        vector(&nodes(1.0, 1.0, 1.0), "instance")
    } else if q.contains("MemAvailable") {
        vector(&nodes(0.5, 0.6, 0.7), "instance")
    } else if q.contains("node_network_speed_bytes") {
        vector(&nodes(1.25e9, 1.25e9, 1.25e9), "instance")
    } else if q.starts_with("count") {
        vector(&nodes(8.0, 8.0, 8.0), "instance")
    } else if q.contains("node_network_receive") {
        vector(&nodes(1e6, 2e6, 3e6), "instance")
    } else {
        vector(&nodes(0.1, 0.2, 0.3), "instance")
    };
    json(body)
}

async fn start_fake(behaviour: Behaviour) -> (String, Fake, tokio::task::JoinHandle<()>) {
    let fake = Fake {
        behaviour: Arc::new(Mutex::new(behaviour)),
        seen: Arc::new(Mutex::new(Seen::default())),
    };
    let app = Router::new()
        .route("/api/v1/query", get(query))
        .with_state(fake.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (url, fake, task)
}

fn config(url: &str) -> PrometheusConfig {
    PrometheusConfig {
        query_timeout: Duration::from_millis(700),
        ..PrometheusConfig::for_url(url)
    }
}

#[tokio::test]
async fn healthy_answers_build_a_snapshot_with_every_reading() {
    let (url, fake, _task) = start_fake(Behaviour::Healthy).await;
    let source = PrometheusSource::new(config(&url)).expect("source");
    let refresh = source.refresh(None).await;
    let (snapshot, report) = refresh.outcome.expect("snapshot");
    assert_eq!(snapshot.nodes.len(), 3);
    let n2 = &snapshot.nodes[1];
    assert_eq!(n2.name, "n2");
    assert_eq!(n2.cpu, 0.2);
    assert_eq!(n2.network_bytes_per_second, Some(2e6));
    assert_eq!(n2.memory, Some(0.6));
    assert_eq!(n2.cpu_capacity_cores, Some(8.0));
    assert_eq!(report.incomplete_nodes, Vec::<String>::new());
    assert_eq!(snapshot.window_samples.get("n3"), Some(&2.0));
    assert_eq!(refresh.queries_sent, 9);
    assert_eq!(fake.seen.lock().expect("seen").queries, 9);
}

#[tokio::test]
async fn every_fault_is_a_clear_refresh_error() {
    for (behaviour, expected) in [
        (Behaviour::ProxyError, "HTTP 503"),
        (Behaviour::Garbage, "not a Prometheus API answer"),
        (Behaviour::BadQuery, "parse error"),
        (Behaviour::Slow, "no answer within"),
        (Behaviour::Matrix, "not an instant vector"),
    ] {
        let (url, _fake, _task) = start_fake(behaviour).await;
        let source = PrometheusSource::new(config(&url)).expect("source");
        let started = Instant::now();
        let refresh = source.refresh(None).await;
        let elapsed = started.elapsed();
        match &refresh.outcome {
            Err(RefreshError::Query { query, error }) => {
                assert_eq!(*query, "cpu", "{behaviour:?}");
                assert!(error.contains(expected), "{behaviour:?}: {error}");
            }
            other => panic!("{behaviour:?}: expected a query error, got {other:?}"),
        }
        assert_eq!(
            refresh.failures.len(),
            9,
            "{behaviour:?}: every query failed"
        );
        // Queries run at once: a slow Prometheus costs one timeout, not one per query.
        assert!(
            elapsed < Duration::from_millis(2500),
            "{behaviour:?}: refresh took {elapsed:?}"
        );
    }
}

#[tokio::test]
async fn a_failing_optional_query_leaves_its_readings_out() {
    let (url, _fake, _task) = start_fake(Behaviour::MemoryFails).await;
    let source = PrometheusSource::new(config(&url)).expect("source");
    let refresh = source.refresh(None).await;
    let (snapshot, _) = refresh.outcome.expect("snapshot without memory");
    assert!(snapshot.nodes.iter().all(|n| n.memory.is_none()));
    assert!(
        snapshot
            .nodes
            .iter()
            .all(|n| n.cpu_capacity_cores == Some(8.0))
    );
    assert_eq!(refresh.failures.len(), 1);
    assert_eq!(refresh.failures[0].query, "memory");
}

#[tokio::test]
async fn credentials_are_sent_and_re_read_each_refresh() {
    let (url, fake, _task) = start_fake(Behaviour::Healthy).await;
    let dir = tempfile::tempdir().expect("tmp");
    let token = dir.path().join("token");
    std::fs::write(&token, "first-token\n").expect("token");
    let source = PrometheusSource::new(PrometheusConfig {
        auth: Some(Auth::Bearer {
            token_file: token.clone(),
        }),
        ..config(&url)
    })
    .expect("source");
    source.refresh(None).await.outcome.expect("refresh");
    std::fs::write(&token, "second-token").expect("rotate");
    source.refresh(None).await.outcome.expect("refresh");
    let seen = std::mem::take(&mut fake.seen.lock().expect("seen").authorization);
    assert_eq!(seen.len(), 18);
    assert!(seen[..9].iter().all(|a| a == "Bearer first-token"));
    assert!(seen[9..].iter().all(|a| a == "Bearer second-token"));

    let password = dir.path().join("password");
    std::fs::write(&password, "s3cret").expect("password");
    let source = PrometheusSource::new(PrometheusConfig {
        auth: Some(Auth::Basic {
            username: "flink".into(),
            password_file: password,
        }),
        ..config(&url)
    })
    .expect("source");
    source.refresh(None).await.outcome.expect("refresh");
    let seen = std::mem::take(&mut fake.seen.lock().expect("seen").authorization);
    // base64("flink:s3cret")
    assert!(
        seen.iter().all(|a| a == "Basic Zmxpbms6czNjcmV0"),
        "{seen:?}"
    );

    let missing = PrometheusSource::new(PrometheusConfig {
        auth: Some(Auth::Bearer {
            token_file: dir.path().join("absent"),
        }),
        ..config(&url)
    })
    .expect("source");
    let refresh = missing.refresh(None).await;
    assert!(
        matches!(refresh.outcome, Err(RefreshError::Credentials(ref m)) if m.contains("absent"))
    );
}
