//! HTTP routes. Handlers stay thin: the work is in `admission`.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use axum::Router;
use axum::body::{Body, Bytes, HttpBody};
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use http_body_util::BodyExt;
use serde::Deserialize;
use tokio::sync::Semaphore;
use tracing::{Instrument, debug, info_span, warn};

use crate::admission::{self, Admission, BadReview, review::ResponseOut};
use crate::config::Limits;
use crate::hotspots;
use crate::readiness::Readiness;
use crate::server::forward::{FORWARDED_BY, Forwarded, Forwarder};
use crate::telemetry::{Metrics, ModeLabels, Outcome};

pub(crate) struct AppState {
    pub(crate) admission: Admission,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) limits: Limits,
    /// Reviews allowed in progress at once.
    pub(crate) permits: Semaphore,
    pub(crate) readiness: Arc<Readiness>,
    /// Where reviews are decided when several replicas run; `None`: always here.
    pub(crate) forwarder: Option<Arc<Forwarder>>,
}

impl AppState {
    /// State without cluster access: ready once a snapshot exists.
    pub(crate) fn new(admission: Admission, metrics: Arc<Metrics>, limits: Limits) -> Self {
        AppState {
            permits: Semaphore::new(limits.max_concurrent_reviews),
            admission,
            metrics,
            limits,
            readiness: Arc::new(Readiness::new()),
            forwarder: None,
        }
    }

    /// Uses `readiness`, which the inventory watches update.
    pub(crate) fn with_readiness(mut self, readiness: Arc<Readiness>) -> Self {
        self.readiness = readiness;
        self
    }

    /// Sends reviews on to the deciding replica `forwarder` follows.
    pub(crate) fn with_forwarder(mut self, forwarder: Arc<Forwarder>) -> Self {
        self.forwarder = Some(forwarder);
        self
    }
}

pub(crate) fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/mutate", post(mutate))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/debug/inflight", get(inflight))
        .with_state(state)
}

#[derive(Debug, Deserialize)]
struct MutateQuery {
    /// The apiserver's remaining budget, e.g. `10s`.
    timeout: Option<String>,
}

async fn mutate(
    State(state): State<Arc<AppState>>,
    Query(query): Query<MutateQuery>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let deadline = deadline(query.timeout.as_deref(), state.limits.request_timeout);
    if let Some(ct) = headers.get(header::CONTENT_TYPE)
        && !ct
            .to_str()
            .is_ok_and(|v| v.trim_start().starts_with("application/json"))
    {
        return reject(
            &state,
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "content-type must be application/json",
        );
    }
    let span = info_span!(
        "review",
        uid = tracing::field::Empty,
        outcome = tracing::field::Empty
    );
    let until = tokio::time::Instant::now() + deadline;
    // A review another replica sent on is decided here, whoever this replica takes the decider
    // to be: two replicas that disagree for a moment never bounce a review between them.
    let forwarder = state
        .forwarder
        .as_ref()
        .filter(|_| !headers.contains_key(FORWARDED_BY));
    let work = async {
        let mut body = body;
        match tokio::time::timeout_at(until, read_body(&mut body, state.limits.max_body_bytes))
            .await
        {
            Ok(Ok(bytes)) => match forwarder {
                Some(forwarder) => forward_or_answer(&state, forwarder, bytes, until).await,
                None => answer(&state, &bytes),
            },
            Ok(Err(BodyError::TooLarge)) => too_large(&state, &mut body, until).await,
            Ok(Err(BodyError::Read(e))) => reject(
                &state,
                StatusCode::BAD_REQUEST,
                &format!("body could not be read: {e}"),
            ),
            Err(_) => reject(
                &state,
                StatusCode::REQUEST_TIMEOUT,
                "request body not received within the deadline",
            ),
        }
    };
    work.instrument(span).await
}

/// Bytes of an oversized body read and thrown away, past the point where it is known to be too
/// large, before the 413 goes out.
///
/// Most clients send the whole body before they read (no `Expect: 100-continue`). Answering as
/// soon as the limit is crossed and closing would leave the rest of the body unread in the
/// socket: the kernel then resets the connection, which discards an answer still queued and
/// fails the client's writes, so the client sees a reset instead of the 413. Reading the rest
/// first lets the connection close cleanly (TLS close_notify, then FIN). The bound, and the
/// request deadline, keep a client from streaming to us forever; past them it gets the reset.
const OVERSIZE_DRAIN_BYTES: u64 = 16 << 20;

enum BodyError {
    /// Longer than the limit; the rest of the body is left in the stream.
    TooLarge,
    Read(axum::Error),
}

/// The whole body, or [`BodyError::TooLarge`] as soon as it is known to exceed `limit`.
async fn read_body(body: &mut Body, limit: usize) -> Result<Bytes, BodyError> {
    // A declared `Content-Length` over the limit needs no reading to be refused.
    if body.size_hint().lower() > limit as u64 {
        return Err(BodyError::TooLarge);
    }
    match http_body_util::Limited::new(&mut *body, limit)
        .collect()
        .await
    {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) => match e.downcast::<axum::Error>() {
            Ok(e) => Err(BodyError::Read(*e)),
            // `Limited` reports the exceeded limit with its own error type.
            Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(BodyError::TooLarge),
            Err(e) => Err(BodyError::Read(axum::Error::new(e))),
        },
    }
}

/// The 413, once the rest of the body is read (see [`OVERSIZE_DRAIN_BYTES`]).
async fn too_large(state: &AppState, body: &mut Body, until: tokio::time::Instant) -> Response {
    // What the declared `Content-Length` still promises (0 when none was declared).
    let remaining = body.size_hint().lower();
    let drained = if remaining > OVERSIZE_DRAIN_BYTES {
        // More than we would ever read: no point in reading part of it.
        false
    } else {
        tokio::time::timeout_at(until, drain(body, OVERSIZE_DRAIN_BYTES))
            .await
            .unwrap_or(false)
    };
    debug!(remaining, drained, "oversized body");
    let mut response = reject(
        state,
        StatusCode::PAYLOAD_TOO_LARGE,
        &format!("body larger than {} bytes", state.limits.max_body_bytes),
    );
    // The client has misbehaved once; it gets no second request on this connection.
    response.headers_mut().insert(
        header::CONNECTION,
        header::HeaderValue::from_static("close"),
    );
    response
}

/// Reads and discards at most `budget` more bytes of `body`; true when the body ended.
async fn drain(body: &mut Body, budget: u64) -> bool {
    let mut left = budget;
    while let Some(frame) = body.frame().await {
        let Ok(frame) = frame else {
            return false;
        };
        if let Some(data) = frame.data_ref() {
            match left.checked_sub(data.len() as u64) {
                Some(rest) => left = rest,
                None => return false,
            }
        }
    }
    true
}

fn answer(state: &AppState, body: &Bytes) -> Response {
    let started = Instant::now();
    let span = tracing::Span::current();
    // Over the limit: answer at once rather than queue past the apiserver's timeout.
    let Ok(_permit) = state.permits.try_acquire() else {
        return match admission::parse(body) {
            Ok(request) => {
                span.record("uid", request.uid.as_str());
                state.metrics.count_review(Outcome::Overloaded);
                let response = ResponseOut::allow(&request.uid)
                    .with_warning("placement-webhook: pod not steered: webhook overloaded");
                json_response(&response.into_review())
            }
            Err(e) => bad_review(state, e),
        };
    };
    match state.admission.review_bytes(body) {
        Ok(answer) => {
            span.record("uid", answer.review.response.uid.as_str());
            span.record("outcome", tracing::field::debug(&answer.outcome));
            let m = &state.metrics;
            m.count_review(answer.outcome);
            if answer.saturated {
                m.saturated_decisions.inc();
            }
            if answer.named_none {
                m.empty_decisions.inc();
            }
            if answer.fell_back {
                m.scheduler_fallbacks.inc();
            }
            if answer.routed_late {
                m.scheduler_routed_late.inc();
            }
            if let Some(mode) = answer.mode {
                m.patches.get_or_create(&ModeLabels { mode }).inc();
            }
            m.review_duration.observe(started.elapsed().as_secs_f64());
            json_response(&answer.review)
        }
        Err(e) => bad_review(state, e),
    }
}

/// The deciding replica's answer when it gives one in time, else this replica's own.
async fn forward_or_answer(
    state: &AppState,
    forwarder: &Forwarder,
    body: Bytes,
    until: tokio::time::Instant,
) -> Response {
    let result = match forwarder.forward(body.clone(), until).await {
        Forwarded::Answered {
            status,
            content_type,
            body,
        } => {
            state.metrics.count_forward("answered");
            let mut response = (status, body).into_response();
            let headers = response.headers_mut();
            if let Some(content_type) = content_type {
                headers.insert(header::CONTENT_TYPE, content_type);
            }
            // The apiserver's next review opens a new connection, which the Service sends to
            // the deciding replica: a connection kept from before a takeover forwards once.
            headers.insert(
                header::CONNECTION,
                header::HeaderValue::from_static("close"),
            );
            return response;
        }
        Forwarded::NotSent => None,
        Forwarded::Resting => Some("resting"),
        Forwarded::Failed(error) => {
            tracing::debug!(%error, "no answer from the decider: deciding here");
            Some("failed")
        }
    };
    if let Some(result) = result {
        state.metrics.count_forward(result);
    }
    answer(state, &body)
}

fn bad_review(state: &AppState, e: BadReview) -> Response {
    let status = match e {
        BadReview::Shape(_) => StatusCode::UNPROCESSABLE_ENTITY,
        _ => StatusCode::BAD_REQUEST,
    };
    reject(state, status, &e.to_string())
}

fn reject(state: &AppState, status: StatusCode, message: &str) -> Response {
    state.metrics.count_review(Outcome::Rejected);
    warn!(status = status.as_u16(), message, "review rejected");
    (status, format!("{message}\n")).into_response()
}

fn json_response<T: serde::Serialize>(value: &T) -> Response {
    match serde_json::to_vec(value) {
        Ok(bytes) => ([(header::CONTENT_TYPE, "application/json")], bytes).into_response(),
        // Our own types always serialize; this arm only keeps the server from panicking.
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

/// The apiserver's `?timeout=` (rounded up to whole seconds), capped by our own limit, minus a
/// margin so the answer still reaches it in time.
fn deadline(timeout: Option<&str>, limit: Duration) -> Duration {
    let asked = timeout
        .and_then(|t| humantime::parse_duration(t).ok())
        .unwrap_or(limit)
        .min(limit);
    asked
        .saturating_sub(asked / 10)
        .max(Duration::from_millis(100))
}

/// 200 once this replica can steer pods (see `readiness`), else 503 with what is missing. It
/// only moves the replica in and out of the Service's endpoints: reviews that do arrive are
/// always answered, failing open when needed.
async fn readyz(State(state): State<Arc<AppState>>) -> Response {
    let has_snapshot = state.admission.store().current().is_some();
    match state.readiness.check(has_snapshot) {
        Ok(()) => (StatusCode::OK, "ready\n").into_response(),
        Err(missing) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {missing}\n"),
        )
            .into_response(),
    }
}

async fn metrics(State(state): State<Arc<AppState>>) -> Response {
    let m = &state.metrics;
    m.set_inventory_nodes(
        state
            .admission
            .store()
            .inventory()
            .map_or(0, |inventory| inventory.nodes.len()),
    );
    m.set_inventory_ready(state.readiness.inventory_synced());
    match state.admission.store().current() {
        Some(view) => {
            m.snapshot_age_seconds
                .set(view.age(SystemTime::now()).as_secs_f64());
            m.nodes_in_snapshot.set(view.nodes.len() as i64);
        }
        None => {
            m.snapshot_age_seconds.set(-1.0);
            m.nodes_in_snapshot.set(0);
        }
    }
    let (ledger_len, unheard, evicted, watched) = {
        let world = state.admission.decider().world().read();
        // Who runs where: the pod watch when there is one.
        let watched = state
            .readiness
            .has_cluster_access()
            .then(|| world.cluster.running.placed());
        (
            world.charges.len(),
            world.charges.unheard(),
            world.charges.evicted(),
            watched,
        )
    };
    let hot_jobs = match state.admission.store().current() {
        Some(view) => {
            let pods = match watched {
                Some(pods) => pods,
                // Without cluster access, the snapshot file's pods that name a node.
                None => state
                    .admission
                    .store()
                    .snapshot()
                    .map(|s| hotspots::placed_from_snapshot(&s))
                    .unwrap_or_default(),
            };
            hotspots::report(&view, &pods, &state.admission.config().placement.hot).jobs
        }
        None => Vec::new(),
    };
    m.set_taskmanagers_on_hot_nodes(&hot_jobs);
    m.inflight_entries.set(ledger_len as i64);
    m.inflight_unheard.set(unheard as i64);
    // The ledger counts; the counter catches up at each scrape.
    m.inflight_evicted
        .inc_by(evicted.saturating_sub(m.inflight_evicted.get()));
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        m.encode(),
    )
        .into_response()
}

/// The last refresh's in-flight charges and load counted twice, by node (JSON).
async fn inflight(State(state): State<Arc<AppState>>) -> Response {
    match serde_json::to_vec(&*state.metrics.handover.by_node()) {
        Ok(body) => ([(header::CONTENT_TYPE, "application/json")], body).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadline_follows_apiserver_budget() {
        let limit = Duration::from_secs(10);
        assert_eq!(deadline(Some("2s"), limit), Duration::from_millis(1800));
        assert_eq!(deadline(Some("30s"), limit), Duration::from_secs(9));
        assert_eq!(deadline(None, limit), Duration::from_secs(9));
        assert_eq!(deadline(Some("garbage"), limit), Duration::from_secs(9));
        assert_eq!(deadline(Some("0s"), limit), Duration::from_millis(100));
    }

    fn chunked(chunks: &[usize]) -> Body {
        let frames: Vec<Result<Bytes, std::io::Error>> = chunks
            .iter()
            .map(|&n| Ok(Bytes::from(vec![b' '; n])))
            .collect();
        Body::from_stream(futures::stream::iter(frames))
    }

    #[tokio::test]
    async fn read_body_stops_at_the_limit_and_leaves_the_rest() {
        let mut body = chunked(&[600, 600, 600]);
        assert!(matches!(
            read_body(&mut body, 1000).await,
            Err(BodyError::TooLarge)
        ));
        // The third chunk is still there to be drained.
        assert!(drain(&mut body, 600).await);

        let mut body = chunked(&[600, 400]);
        let bytes = read_body(&mut body, 1000).await.ok().expect("fits");
        assert_eq!(bytes.len(), 1000);
    }

    #[tokio::test]
    async fn declared_length_over_the_limit_is_refused_unread() {
        let mut body = Body::from(vec![b' '; 1001]);
        assert!(matches!(
            read_body(&mut body, 1000).await,
            Err(BodyError::TooLarge)
        ));
        assert_eq!(body.size_hint().exact(), Some(1001), "nothing was read");
    }

    #[tokio::test]
    async fn drain_gives_up_past_its_budget() {
        assert!(drain(&mut chunked(&[100, 100]), 200).await);
        assert!(!drain(&mut chunked(&[100, 100, 1]), 200).await);
        let mut failing = Body::from_stream(futures::stream::iter([
            Ok(Bytes::from_static(b"x")),
            Err(std::io::Error::other("cut")),
        ]));
        assert!(!drain(&mut failing, 200).await);
    }
}

#[cfg(test)]
mod overload_tests {
    use crate::inflight::shared::SharedWorld;

    use axum::body::Body;
    use axum::http::Request;
    use tower::ServiceExt;

    use super::*;
    use crate::config::Config;
    use crate::inflight::ledger::Ledger;
    use crate::inflight::world::World;
    use crate::view::ViewStore;

    fn state(max: usize) -> Arc<AppState> {
        let config = Arc::new(Config::default());
        let store = Arc::new(ViewStore::new(config.placement.clone()));
        store.publish_snapshot(crate::metrics_source::file::embedded_example().expect("example"));
        let world = Arc::new(SharedWorld::new(World::new(Ledger::new(
            config.inflight.ttl,
        ))));
        let limits = Limits {
            max_concurrent_reviews: max,
            ..Limits::default()
        };
        Arc::new(AppState::new(
            Admission::new(config, store, world),
            Arc::new(Metrics::new()),
            limits,
        ))
    }

    fn review_request() -> Request<Body> {
        let body = include_str!("../../examples/taskmanager-review.json");
        Request::post("/mutate?timeout=2s")
            .header("content-type", "application/json")
            .body(Body::from(body))
            .expect("request")
    }

    async fn answer_of(state: Arc<AppState>) -> serde_json::Value {
        let response = router(state)
            .oneshot(review_request())
            .await
            .expect("infallible");
        assert_eq!(response.status(), StatusCode::OK);
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .expect("body");
        serde_json::from_slice(&bytes).expect("json")
    }

    #[tokio::test]
    async fn over_the_limit_answers_at_once_without_patch() {
        let state = state(1);
        let held = state.permits.try_acquire().expect("the only permit");
        let out = answer_of(state.clone()).await;
        assert_eq!(out["response"]["allowed"], true);
        assert_eq!(
            out["response"]["uid"],
            "3f2a9c01-b7de-4c55-9e1a-0d4b6f8e2c17"
        );
        assert!(out["response"].get("patch").is_none());
        assert!(
            out["response"]["warnings"][0]
                .as_str()
                .expect("warning")
                .contains("overloaded")
        );
        assert!(state.metrics.encode().contains("outcome=\"overloaded\"} 1"));
        drop(held);
        let out = answer_of(state).await;
        assert!(
            out["response"]["patch"].is_string(),
            "served again once a permit is free"
        );
    }
}

#[cfg(test)]
mod readiness_tests {
    use crate::inflight::shared::SharedWorld;

    use axum::body::Body;
    use axum::http::Request;
    use tower::ServiceExt;

    use super::*;
    use crate::config::Config;
    use crate::facts::{Inventory, NodeFacts};
    use crate::inflight::ledger::Ledger;
    use crate::inflight::world::World;
    use crate::view::ViewStore;

    fn state(readiness: Arc<Readiness>) -> Arc<AppState> {
        let config = Arc::new(Config::default());
        let store = Arc::new(ViewStore::new(config.placement.clone()));
        let world = Arc::new(SharedWorld::new(World::new(Ledger::new(
            config.inflight.ttl,
        ))));
        Arc::new(
            AppState::new(
                Admission::new(config, store, world),
                Arc::new(Metrics::new()),
                Limits::default(),
            )
            .with_readiness(readiness),
        )
    }

    async fn get(state: &Arc<AppState>, path: &str) -> (StatusCode, String) {
        let response = router(state.clone())
            .oneshot(Request::get(path).body(Body::empty()).expect("request"))
            .await
            .expect("infallible");
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .expect("body");
        (status, String::from_utf8_lossy(&bytes).into_owned())
    }

    fn publish_snapshot(state: &AppState) {
        state
            .admission
            .store()
            .publish_snapshot(crate::metrics_source::file::embedded_example().expect("example"));
    }

    #[tokio::test]
    async fn without_cluster_access_ready_once_a_snapshot_exists() {
        let state = state(Arc::new(Readiness::new()));
        assert_eq!(
            get(&state, "/readyz").await,
            (
                StatusCode::SERVICE_UNAVAILABLE,
                "not ready: no node-load snapshot yet\n".into()
            )
        );
        publish_snapshot(&state);
        assert_eq!(
            get(&state, "/readyz").await,
            (StatusCode::OK, "ready\n".into())
        );
        let (_, metrics) = get(&state, "/metrics").await;
        assert!(
            metrics.contains("placement_webhook_inventory_ready 0\n"),
            "{metrics}"
        );
        assert!(
            metrics.contains("placement_webhook_inventory_nodes 0\n"),
            "{metrics}"
        );
    }

    fn hot_series(metrics: &str) -> Vec<&str> {
        let mut series: Vec<&str> = metrics
            .lines()
            .filter(|l| l.starts_with("placement_webhook_taskmanagers_on_hot_nodes{"))
            .collect();
        series.sort_unstable();
        series
    }

    #[tokio::test]
    async fn hot_taskmanagers_come_from_the_pod_watch_when_there_is_one() {
        let readiness = Arc::new(Readiness::new());
        let state = state(readiness.clone());
        let (_, metrics) = get(&state, "/metrics").await;
        assert!(hot_series(&metrics).is_empty(), "no view, no series");

        publish_snapshot(&state);
        // Without cluster access: the snapshot file's pods (see examples/cluster.json).
        let (_, metrics) = get(&state, "/metrics").await;
        assert_eq!(hot_series(&metrics).len(), 6, "{metrics}");

        readiness.set_cluster_access();
        let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"namespace": "stream", "name": "ads-taskmanager-1-1",
                         "labels": {"app": "ads", "component": "taskmanager"}},
            "spec": {"nodeName": "worker-03", "containers": []},
            "status": {"phase": "Running"}
        }))
        .expect("pod");
        state
            .admission
            .decider()
            .world()
            .write()
            .cluster
            .running
            .update(&pod, false, true);
        // With it: the watched pods only; the file's pods no longer count.
        let (_, metrics) = get(&state, "/metrics").await;
        assert_eq!(
            hot_series(&metrics),
            [
                "placement_webhook_taskmanagers_on_hot_nodes{namespace=\"stream\",job=\"ads\",steered=\"false\"} 0",
                "placement_webhook_taskmanagers_on_hot_nodes{namespace=\"stream\",job=\"ads\",steered=\"true\"} 1",
            ]
        );
    }

    #[tokio::test]
    async fn with_cluster_access_ready_after_both_lists() {
        let readiness = Arc::new(Readiness::new());
        readiness.set_cluster_access();
        let state = state(readiness.clone());
        publish_snapshot(&state);
        let (status, body) = get(&state, "/readyz").await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(
            body,
            "not ready: node list not complete, pod list not complete\n"
        );

        let nodes =
            ["worker-01", "worker-02", "worker-03"].map(|n| (n.to_owned(), NodeFacts::default()));
        state.admission.store().publish_inventory(Inventory {
            nodes: nodes.into_iter().collect(),
        });
        readiness.set_nodes_synced();
        let (status, body) = get(&state, "/readyz").await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(body, "not ready: pod list not complete\n");

        readiness.set_pods_synced();
        assert_eq!(
            get(&state, "/readyz").await,
            (StatusCode::OK, "ready\n".into())
        );
        let (_, metrics) = get(&state, "/metrics").await;
        assert!(
            metrics.contains("placement_webhook_inventory_ready 1\n"),
            "{metrics}"
        );
        assert!(
            metrics.contains("placement_webhook_inventory_nodes 3\n"),
            "{metrics}"
        );
    }
}
