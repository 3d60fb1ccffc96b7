//! The kube layer against a mocked apiserver: recorded list responses, hand-written watch events.
//!
//! kube's watcher first LISTs (`/api/v1/nodes?&limit=500`), then WATCHes from the list's
//! resourceVersion (`?&watch=true&timeoutSeconds=290&allowWatchBookmarks=true&resourceVersion=…`),
//! and re-watches when a watch response ends; each test answers those requests in order.

use crate::inflight::shared::SharedWorld;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::config::PlacementConfig;
use crate::inflight::ledger::Ledger;
use crate::inflight::note::ANNOTATION;
use crate::inflight::world::World;
use crate::inventory::client::probe;
use crate::inventory::nodes::{node_facts, watch_nodes};
use crate::inventory::pods::watch_pods;
use crate::inventory::{Inventory, NodeFacts};
use crate::readiness::Readiness;
use crate::telemetry::NodeHeat;
use crate::view::ViewStore;
use http::{Request, Response, StatusCode};
use k8s_openapi::api::core::v1::Node;
use kube::Client;
use kube::client::Body;
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio::time::timeout;
use tower_test::mock::{self, Handle, SendResponse};

type MockHandle = Handle<Request<Body>, Response<Body>>;

const STEP: Duration = Duration::from_secs(5);
const WHOLE_TEST: Duration = Duration::from_secs(30);

fn fixture(name: &str) -> Value {
    let path = format!(
        "{}/tests/fixtures/apiserver/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The next request the client makes, with its decoded path and query.
async fn next_request(
    handle: &mut MockHandle,
) -> (Request<Body>, String, SendResponse<Response<Body>>) {
    let (request, send) = timeout(STEP, handle.next_request())
        .await
        .expect("no request in time")
        .expect("client gone");
    let uri = percent_decode(&request.uri().to_string());
    (request, uri, send)
}

fn json_response(status: StatusCode, body: &Value) -> Response<Body> {
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Body::from(serde_json::to_vec(body).unwrap()))
        .unwrap()
}

/// A watch response: one JSON event per line, ending the stream after the last one.
fn watch_response(events: &[Value]) -> Response<Body> {
    let mut body = Vec::new();
    for event in events {
        body.extend(serde_json::to_vec(event).unwrap());
        body.push(b'\n');
    }
    Response::new(Body::from(body))
}

fn status_error(code: u16, reason: &str) -> Response<Body> {
    json_response(
        StatusCode::from_u16(code).unwrap(),
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "etcdserver: request timed out", "reason": reason, "code": code}),
    )
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap();
                out.push(u8::from_str_radix(hex, 16).unwrap());
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).unwrap()
}

/// Polls `check` until it holds; panics after `STEP`.
async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let waited = timeout(STEP, async {
        while !check() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(waited.is_ok(), "timed out waiting for: {what}");
}

/// Spawns `task(shutdown)` and returns the trigger plus its join handle.
fn spawn_with_shutdown<F, Fut>(task: F) -> (oneshot::Sender<()>, tokio::task::JoinHandle<()>)
where
    F: FnOnce(Pin<Box<dyn Future<Output = ()> + Send>>) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = oneshot::channel::<()>();
    let shutdown = Box::pin(async move {
        let _ = rx.await;
    });
    (tx, tokio::spawn(task(shutdown)))
}

async fn stop(tx: oneshot::Sender<()>, task: tokio::task::JoinHandle<()>) {
    let _ = tx.send(());
    timeout(STEP, task)
        .await
        .expect("watch did not stop on shutdown")
        .unwrap();
}

fn listed_inventory() -> Inventory {
    let nodes: Vec<Node> =
        serde_json::from_value(fixture("nodes-list.json")["items"].clone()).unwrap();
    // The watch numbers the nodes in the order its first list delivered them.
    Inventory {
        nodes: nodes
            .iter()
            .enumerate()
            .map(|(arrival, node)| {
                let (name, facts) = node_facts(node);
                let arrival = arrival as u64;
                (name, NodeFacts { arrival, ..facts })
            })
            .collect(),
    }
}

fn facts<'a>(inv: &'a Inventory, name: &str) -> &'a NodeFacts {
    inv.nodes
        .get(name)
        .unwrap_or_else(|| panic!("{name} missing"))
}

#[tokio::test]
async fn node_watch_publishes_the_list_then_watch_changes() {
    timeout(WHOLE_TEST, async {
        let (service, handle) = mock::pair::<Request<Body>, Response<Body>>();
        let mut handle = Box::pin(handle);
        let store = Arc::new(ViewStore::new(PlacementConfig::default()));
        let client = Client::new(service, "default");
        let s = store.clone();
        let readiness = Arc::new(Readiness::new());
        let r = readiness.clone();
        let (tx, task) = spawn_with_shutdown(move |shutdown| watch_nodes(client, s, r, shutdown));

        let (request, uri, send) = next_request(&mut handle).await;
        assert!(!readiness.nodes_synced(), "synced before any list");
        assert_eq!(request.method(), http::Method::GET);
        assert!(uri.starts_with("/api/v1/nodes?"), "{uri}");
        assert!(uri.contains("limit=500"), "{uri}");
        assert!(!uri.contains("watch=true"), "{uri}");
        let list = fixture("nodes-list.json");
        send.send_response(json_response(StatusCode::OK, &list));

        eventually("first inventory", || store.inventory().is_some()).await;
        eventually("node list synced", || readiness.nodes_synced()).await;
        let inv = store.inventory().unwrap();
        assert_eq!(*inv, listed_inventory());
        assert_eq!(inv.nodes.len(), 6);
        assert!(facts(&inv, "worker-1").ready && !facts(&inv, "worker-1").unschedulable);
        assert!(facts(&inv, "worker-2").unschedulable, "cordoned");
        assert!(!facts(&inv, "worker-3").ready, "NotReady");
        let gpu = facts(&inv, "gpu-1");
        assert_eq!(gpu.taints.len(), 1);
        assert_eq!(
            (
                gpu.taints[0].key.as_str(),
                gpu.taints[0].value.as_deref(),
                gpu.taints[0].effect.as_str()
            ),
            ("dedicated", Some("gpu"), "NoSchedule")
        );
        let flink_pool = inv
            .nodes
            .values()
            .filter(|f| f.labels.get("pool").map(String::as_str) == Some("flink"))
            .count();
        assert_eq!(flink_pool, 4);
        assert_eq!(facts(&inv, "worker-4").allocatable_cpu_cores, Some(15.89));
        assert_eq!(
            inv.node_by_internal_ip()
                .get("10.0.1.15")
                .map(String::as_str),
            Some("worker-5")
        );

        // The watch resumes from the list's resourceVersion.
        let (_, uri, send) = next_request(&mut handle).await;
        assert!(uri.starts_with("/api/v1/nodes?"), "{uri}");
        assert!(uri.contains("watch=true"), "{uri}");
        assert!(uri.contains("resourceVersion=918452"), "{uri}");
        assert!(uri.contains("allowWatchBookmarks=true"), "{uri}");
        let items = list["items"].as_array().unwrap();
        let mut cordoned = items
            .iter()
            .find(|n| n["metadata"]["name"] == "worker-1")
            .unwrap()
            .clone();
        cordoned["metadata"]["resourceVersion"] = json!("918500");
        cordoned["spec"]["unschedulable"] = json!(true);
        let mut gone = items
            .iter()
            .find(|n| n["metadata"]["name"] == "worker-5")
            .unwrap()
            .clone();
        gone["metadata"]["resourceVersion"] = json!("918510");
        send.send_response(watch_response(&[
            json!({"type": "MODIFIED", "object": cordoned}),
            json!({"type": "DELETED", "object": gone}),
            json!({"type": "BOOKMARK", "object": {"kind": "Node", "apiVersion": "v1",
                   "metadata": {"resourceVersion": "918600"}}}),
        ]));

        eventually("watch changes published", || {
            let inv = store.inventory().unwrap();
            inv.nodes.get("worker-1").is_some_and(|f| f.unschedulable)
                && !inv.nodes.contains_key("worker-5")
        })
        .await;
        assert_eq!(store.inventory().unwrap().nodes.len(), 5);

        // The stream ended: the watcher re-watches from the bookmark. Leave it pending.
        let (_, uri, _pending) = next_request(&mut handle).await;
        assert!(
            uri.contains("watch=true") && uri.contains("resourceVersion=918600"),
            "{uri}"
        );
        stop(tx, task).await;
    })
    .await
    .expect("test took too long");
}

#[tokio::test]
async fn node_watch_retries_and_keeps_the_last_inventory() {
    timeout(WHOLE_TEST, async {
        let (service, handle) = mock::pair::<Request<Body>, Response<Body>>();
        let mut handle = Box::pin(handle);
        let store = Arc::new(ViewStore::new(PlacementConfig::default()));
        let client = Client::new(service, "default");
        let s = store.clone();
        let readiness = Arc::new(Readiness::new());
        let r = readiness.clone();
        let (tx, task) = spawn_with_shutdown(move |shutdown| watch_nodes(client, s, r, shutdown));

        // A failed list publishes nothing; the watcher lists again after a backoff.
        let (_, uri, send) = next_request(&mut handle).await;
        assert!(!uri.contains("watch=true"), "{uri}");
        send.send_response(status_error(500, "InternalError"));
        let (_, uri, send) = next_request(&mut handle).await;
        assert!(!uri.contains("watch=true"), "{uri}");
        assert!(store.inventory().is_none());
        assert!(!readiness.nodes_synced(), "a failed list is not a sync");
        send.send_response(json_response(StatusCode::OK, &fixture("nodes-list.json")));
        eventually("inventory after retry", || store.inventory().is_some()).await;
        eventually("node list synced", || readiness.nodes_synced()).await;
        let first = store.inventory().unwrap();

        // A failing watch is retried; the inventory keeps serving meanwhile.
        let (_, uri, send) = next_request(&mut handle).await;
        assert!(uri.contains("watch=true"), "{uri}");
        send.send_response(status_error(503, "ServiceUnavailable"));
        let (_, uri, _pending) = next_request(&mut handle).await;
        assert!(
            uri.contains("watch=true") && uri.contains("resourceVersion=918452"),
            "{uri}"
        );
        assert!(
            Arc::ptr_eq(&first, &store.inventory().unwrap()),
            "nothing republished"
        );
        assert_eq!(*first, listed_inventory());
        stop(tx, task).await;
    })
    .await
    .expect("test took too long");
}

/// Recorded pods with creation times moved to `age` ago, so they are within the ledger's ttl.
fn pods_list(age: Duration) -> Value {
    let created = k8s_openapi::jiff::Timestamp::try_from(SystemTime::now() - age).unwrap();
    let mut list = fixture("pods-list.json");
    for pod in list["items"].as_array_mut().unwrap() {
        pod["metadata"]["creationTimestamp"] = json!(created.to_string());
    }
    list
}

fn cpu(world: &SharedWorld, node: &str) -> f64 {
    world
        .read()
        .charges
        .extra(node)
        .map_or(0.0, |l| l.cpu_cores)
}

fn bound_milli_cpu(world: &SharedWorld, node: &str) -> i64 {
    world
        .read()
        .cluster
        .occupancy
        .node(node)
        .map_or(0, |n| n.requested.milli_cpu)
}

#[tokio::test]
async fn pod_watch_keeps_the_ledger_in_step_with_other_replicas() {
    timeout(WHOLE_TEST, async {
        let (service, handle) = mock::pair::<Request<Body>, Response<Body>>();
        let mut handle = Box::pin(handle);
        let world = Arc::new(SharedWorld::new(World::new(Ledger::new(
            Duration::from_secs(90),
        ))));
        let client = Client::new(service, "default");
        let l = world.clone();
        let readiness = Arc::new(crate::readiness::Readiness::new());
        let metrics = Arc::new(crate::telemetry::Metrics::new());
        let (r, m) = (readiness.clone(), metrics.clone());
        let (tx, task) = spawn_with_shutdown(move |shutdown| {
            watch_pods(client, l, r, m, |_: &str| None, shutdown)
        });

        // Every unfinished pod: the scheduler counts the requests of all of them.
        let selector = "fieldSelector=status.phase!=Succeeded,status.phase!=Failed&";
        let (_, uri, send) = next_request(&mut handle).await;
        assert!(uri.starts_with("/api/v1/pods?"), "cluster-wide: {uri}");
        assert!(uri.contains(selector), "{uri}");
        assert!(!uri.contains("labelSelector"), "{uri}");
        assert!(!uri.contains("watch=true"), "{uri}");
        let list = pods_list(Duration::from_secs(5));
        send.send_response(json_response(StatusCode::OK, &list));

        // Pending pod → split over its first tier; bound pod → its node; the unannotated and the
        // failed pods leave no trace.
        eventually("listed pods charged", || world.read().charges.len() == 2).await;
        eventually("pod list complete", || readiness.pods_synced()).await;
        // The two running TaskManagers are the siblings new pods of the job are estimated from.
        assert_eq!(world.read().cluster.running.len(), 2);
        // As if this replica had decided the pending pod: its bind is counted here, once.
        (world.write().charges).remember_decision("9b3e1f20a7c4", vec![("worker-1".into(), 0.25)]);
        assert_eq!(cpu(&world, "worker-1"), 1.0);
        assert_eq!(cpu(&world, "worker-4"), 1.0 + 2.0);
        assert_eq!(cpu(&world, "worker-5"), 0.0);
        // Requests: every bound, unfinished pod, annotated or not.
        assert_eq!(bound_milli_cpu(&world, "worker-4"), 2000);
        assert_eq!(bound_milli_cpu(&world, "worker-5"), 2000);
        assert_eq!(
            bound_milli_cpu(&world, "worker-1"),
            0,
            "failed pods hold nothing"
        );

        let (_, uri, send) = next_request(&mut handle).await;
        assert!(
            uri.contains("watch=true") && uri.contains("resourceVersion=918700"),
            "{uri}"
        );
        assert!(uri.contains(selector), "{uri}");
        let items = list["items"].as_array().unwrap();
        let mut bound = items[0].clone();
        bound["metadata"]["resourceVersion"] = json!("918720");
        bound["spec"]["nodeName"] = json!("worker-1");
        bound["spec"]["affinity"] = json!({"nodeAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 100, "preference": {"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": ["worker-1"]}]}},
            {"weight": 20, "preference": {"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": ["worker-4"]}]}}
        ]}});
        let mut deleted = items[1].clone();
        deleted["metadata"]["resourceVersion"] = json!("918730");
        send.send_response(watch_response(&[
            json!({"type": "MODIFIED", "object": bound}),
            json!({"type": "DELETED", "object": deleted}),
        ]));

        eventually("bind and delete applied", || {
            cpu(&world, "worker-4") == 0.0 && cpu(&world, "worker-1") == 2.0
        })
        .await;
        assert_eq!(world.read().charges.len(), 1);
        assert_eq!(
            world.read().cluster.running.len(),
            1,
            "the deleted one is gone"
        );
        assert_eq!(bound_milli_cpu(&world, "worker-1"), 2000);
        let exported = metrics.encode();
        assert!(
            exported.contains("placement_webhook_landings_total{where=\"first_tier\"} 1\n"),
            "{exported}"
        );
        assert!(
            exported.contains("placement_webhook_landing_heat_count 1\n"),
            "{exported}"
        );

        let (_, uri, _pending) = next_request(&mut handle).await;
        assert!(
            uri.contains("watch=true") && uri.contains("resourceVersion=918730"),
            "{uri}"
        );
        stop(tx, task).await;
    })
    .await
    .expect("test took too long");
}

/// An apiserver address nothing listens on: bound, then dropped, so the port is (almost
/// certainly) closed now.
fn closed_port_apiserver() -> kube::Config {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    kube::Config::new(format!("http://127.0.0.1:{port}").parse().unwrap())
}

#[tokio::test]
async fn probe_gives_up_on_a_closed_port() {
    let config = closed_port_apiserver();
    let client = timeout(STEP, probe(config, Duration::from_secs(3)))
        .await
        .unwrap();
    assert!(client.is_none());
}

#[tokio::test]
async fn probe_does_not_hang_on_a_silent_apiserver() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    // Accepts connections and never answers.
    let silent = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((conn, _)) = listener.accept().await {
            held.push(conn);
        }
    });
    let config = kube::Config::new(format!("http://{addr}").parse().unwrap());
    let started = tokio::time::Instant::now();
    let client = timeout(STEP, probe(config, Duration::from_millis(300)))
        .await
        .unwrap();
    assert!(client.is_none());
    assert!(started.elapsed() < Duration::from_secs(2));
    silent.abort();
}

#[tokio::test]
async fn probe_keeps_a_client_that_answers() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(answer_version_once(listener));
    let config = kube::Config::new(format!("http://{addr}").parse().unwrap());
    let client = timeout(STEP, probe(config, Duration::from_secs(3)))
        .await
        .unwrap();
    assert!(client.is_some());
    server.await.unwrap();
}

/// An apiserver that answers one `GET /version`.
async fn answer_version_once(listener: tokio::net::TcpListener) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (mut conn, _) = listener.accept().await.unwrap();
    let mut request = Vec::new();
    let mut buf = [0u8; 1024];
    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = conn.read(&mut buf).await.unwrap();
        assert!(n > 0, "client closed early");
        request.extend_from_slice(&buf[..n]);
    }
    assert!(
        request.starts_with(b"GET /version "),
        "{}",
        String::from_utf8_lossy(&request)
    );
    let body = json!({"major": "1", "minor": "33", "gitVersion": "v1.33.1",
        "gitCommit": "8adc0f041b8e7ad1d30e29cc59c6ae7a15e19828", "gitTreeState": "clean",
        "buildDate": "2025-05-15T08:19:08Z", "goVersion": "go1.24.2", "compiler": "gc",
        "platform": "linux/amd64"})
    .to_string();
    let response = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    conn.write_all(response.as_bytes()).await.unwrap();
}

#[tokio::test]
async fn try_client_returns_promptly() {
    // Whatever this machine offers (nothing, a kubeconfig, an in-cluster account), the answer
    // comes within the probe timeout plus configuration loading.
    let result = timeout(
        Duration::from_secs(10),
        crate::inventory::client::try_client(),
    )
    .await;
    assert!(result.is_ok(), "try_client hung");
}

/// An apiserver that is down when the webhook starts is retried until it answers.
#[tokio::test]
async fn connect_retries_until_the_apiserver_answers() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    // Down at first: the port refuses connections until the server starts below.
    drop(listener);
    let config = kube::Config::new(format!("http://{addr}").parse().unwrap());
    let connecting = tokio::spawn(crate::inventory::client::connect_to(
        config,
        Duration::from_millis(100),
        std::future::pending(),
    ));
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(!connecting.is_finished(), "gave up or connected to nothing");
    let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
    let server = tokio::spawn(answer_version_once(listener));
    let client = timeout(Duration::from_secs(10), connecting)
        .await
        .expect("connected once the apiserver answered")
        .unwrap();
    assert!(client.is_some());
    server.await.unwrap();
}

/// Shutdown ends the retries.
#[tokio::test]
async fn connect_stops_on_shutdown() {
    let config = closed_port_apiserver();
    let result = timeout(
        Duration::from_secs(5),
        crate::inventory::client::connect_to(
            config,
            Duration::from_millis(50),
            tokio::time::sleep(Duration::from_millis(300)),
        ),
    )
    .await
    .expect("returned on shutdown");
    assert!(result.is_none());
}

#[tokio::test]
async fn simulate_reads_nodes_and_bound_requests_from_the_apiserver() {
    use crate::cli::simulate::{self, SimulateError};
    use crate::config::Config;
    use crate::inventory::listing::list_cluster;
    use crate::snapshot::{LoadSnapshot, NodeLoad};

    let (service, handle) = mock::pair::<Request<Body>, Response<Body>>();
    let mut handle = Box::pin(handle);
    let listing = tokio::spawn(list_cluster(Client::new(service, "default")));
    timeout(WHOLE_TEST, async {
        // Nodes in two pages: the continue token is passed on.
        let nodes = fixture("nodes-list.json");
        let items = nodes["items"].as_array().unwrap();
        let mut first = nodes.clone();
        first["items"] = json!(items[..2]);
        first["metadata"]["continue"] = json!("page-2");
        let mut second = nodes.clone();
        second["items"] = json!(items[2..]);
        let (_, uri, send) = next_request(&mut handle).await;
        assert!(
            uri.starts_with("/api/v1/nodes?") && uri.contains("limit=500"),
            "{uri}"
        );
        send.send_response(json_response(StatusCode::OK, &first));
        let (_, uri, send) = next_request(&mut handle).await;
        assert!(uri.contains("continue=page-2"), "{uri}");
        send.send_response(json_response(StatusCode::OK, &second));
        let (_, uri, send) = next_request(&mut handle).await;
        assert!(uri.starts_with("/api/v1/pods?"), "{uri}");
        assert!(
            uri.contains("fieldSelector=status.phase!=Succeeded,status.phase!=Failed"),
            "{uri}"
        );
        send.send_response(json_response(StatusCode::OK, &fixture("pods-list.json")));
    })
    .await
    .expect("test took too long");
    let cluster = listing.await.unwrap().expect("listed");
    assert_eq!(cluster.inventory.nodes.len(), 6);
    // Running pods on worker-4 and worker-5; the pending and the failed pod hold nothing.
    assert_eq!(cluster.pods.occupancy.pods(), 2);
    // The steered ones are kept for `review` to charge as a replica starting now would.
    let steered: Vec<&str> = cluster
        .steered
        .iter()
        .filter_map(|p| p.metadata.name.as_deref())
        .collect();
    assert_eq!(
        steered,
        [
            "orders-enrichment-taskmanager-1-1",
            "orders-enrichment-taskmanager-1-2",
            "orders-enrichment-taskmanager-1-4"
        ]
    );

    // The snapshot knows a node the cluster does not (left out) and gives worker-4 facts the
    // cluster contradicts (the cluster's win).
    let mut snapshot = LoadSnapshot::default();
    for (name, cpu) in [
        ("worker-1", 0.2),
        ("worker-4", 0.1),
        ("worker-5", 0.9),
        ("gone", 0.0),
    ] {
        let mut node = NodeLoad::new(name, cpu);
        node.allocatable = [("cpu".to_string(), "64".to_string())].into();
        snapshot.nodes.push(node);
    }
    // hotspots: the listed running TaskManagers (one steered on worker-4, one not on worker-5,
    // which is hot); the pending and the failed one do not run anywhere.
    let placed = cluster.pods.running.placed();
    let placed: Vec<(&str, &str, bool)> = placed
        .iter()
        .map(|p| (p.pod.as_str(), p.node.as_str(), p.steered))
        .collect();
    assert_eq!(
        placed,
        [
            ("orders-enrichment-taskmanager-1-2", "worker-4", true),
            ("orders-enrichment-taskmanager-1-3", "worker-5", false),
        ]
    );
    let hot = crate::cli::hotspots::report_for(&Config::default(), &snapshot, Some(&cluster));
    assert_eq!(
        (
            hot.totals.taskmanagers,
            hot.totals.on_hot_nodes,
            hot.totals.steered,
            hot.totals.steered_on_hot_nodes
        ),
        (2, 1, 1, 0)
    );
    assert_eq!(hot.taskmanagers_on_hot_nodes[0].node, "worker-5");
    assert_eq!(hot.jobs[0].job, "orders-enrichment");

    let joined = simulate::with_cluster(snapshot.clone(), &cluster).expect("joined");
    let names: Vec<&str> = joined.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["worker-1", "worker-4", "worker-5"]);
    let worker4 = &joined.nodes[1];
    assert_eq!(worker4.allocatable["cpu"], "15890m");
    assert_eq!(worker4.cpu_capacity_cores, Some(15.89));
    assert_eq!(worker4.requested["cpu"], "2000m");
    assert_eq!(worker4.requested["memory"], (4_i64 << 30).to_string());
    assert_eq!(worker4.requested["pods"], "1");
    assert!(joined.nodes[0].requested.is_empty());

    // The burst is simulated on the cluster's allocatable: worker-1 (3.5 cores) takes one
    // 2-core TaskManager at most, worker-4 (15.89, 2 bound) six, worker-5 (3.92, 2 bound) none.
    let request = simulate::Request {
        pods: 20,
        cpu_cores: 2.0,
        memory: "1Gi".into(),
        network_bytes_per_second: 0.0,
        pod: None,
        replicas: 1,
        first_share: None,
        forwarding: true,
        bind_lag: Duration::from_millis(10),
        seed: 1,
        listed_in_name_order: false,
    };
    let report = simulate::simulate(joined, &Config::default(), &request).expect("report");
    for method in &report.methods {
        assert_eq!(
            method.figures.pending,
            20 - 1 - 6,
            "{}",
            method.figures.method
        );
        for node in &method.hottest_nodes {
            let most = match node.node.as_str() {
                "worker-1" => 1,
                "worker-4" => 6,
                _ => 0,
            };
            assert!(node.pods <= most, "{}: {node:?}", method.figures.method);
        }
    }

    // review reads the cluster too: a TaskManager selecting `pool: flink` goes to a node the
    // cluster labels so (the snapshot alone has no labels: no node matches).
    let review = json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "c1a55e7e-0000-0000-0000-000000000001",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": "flink",
            "operation": "CREATE",
            "object": {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "tm-1", "namespace": "flink", "labels": {
                    "app": "orders", "component": "taskmanager", "type": "flink-native-kubernetes"}},
                "spec": {
                    "nodeSelector": {"pool": "flink"},
                    "containers": [{"name": "flink-main-container", "image": "flink",
                        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]
                }
            }
        }
    })
    .to_string();
    let landing = |cluster| {
        let out = crate::cli::review::review_with(
            Config::default(),
            snapshot.clone(),
            cluster,
            review.as_bytes(),
            false,
        )
        .expect("answered");
        let answer: serde_json::Value = serde_json::from_str(&out).expect("JSON");
        let note = answer["response"]["auditAnnotations"]["decision"]
            .as_str()
            .expect("a decision")
            .to_owned();
        note.split_whitespace()
            .find_map(|f| f.strip_prefix("land="))
            .expect("land=")
            .to_owned()
    };
    let with_cluster = landing(Some(&cluster));
    assert!(
        ["worker-1:100", "worker-4:100"].contains(&with_cluster.as_str()),
        "{with_cluster}"
    );
    assert_eq!(landing(None), "none");

    // No snapshot node in the cluster: a clear error, not an empty simulation.
    snapshot.nodes.retain(|n| n.name == "gone");
    let err = simulate::with_cluster(snapshot, &cluster).unwrap_err();
    assert!(
        matches!(err, SimulateError::NoReadingsForCluster(6)),
        "{err}"
    );
}

#[tokio::test]
async fn pod_watch_compares_an_observed_pods_node_with_the_webhooks_choice() {
    timeout(WHOLE_TEST, async {
        let (service, handle) = mock::pair::<Request<Body>, Response<Body>>();
        let mut handle = Box::pin(handle);
        let world = Arc::new(SharedWorld::new(World::new(Ledger::new(Duration::from_secs(90)))));
        let client = Client::new(service, "default");
        let readiness = Arc::new(crate::readiness::Readiness::new());
        let metrics = Arc::new(crate::telemetry::Metrics::new());
        let (l, r, m) = (world.clone(), readiness.clone(), metrics.clone());
        // The view's heat now: the scheduler's node is hot, the webhook's choice is not.
        let node_heat = |node: &str| match node {
            "worker-4" => Some(NodeHeat {
                heat: 0.92,
                hot: true,
            }),
            "worker-5" => Some(NodeHeat {
                heat: 0.31,
                hot: false,
            }),
            _ => None,
        };
        let (tx, task) =
            spawn_with_shutdown(move |shutdown| watch_pods(client, l, r, m, node_heat, shutdown));

        // One pending pod this replica observed: charged where the scheduler puts it alone.
        let mut observed = pods_list(Duration::from_secs(2))["items"][0].clone();
        observed["metadata"]["annotations"][ANNOTATION] = json!(
            "id=5d0bserved mode=observe cpu=2 net=0 est=request nodes=worker-4:1.00 avoid=0 age=1s would=worker-5:0.31"
        );
        observed["spec"]
            .as_object_mut()
            .expect("spec")
            .remove("nodeName");
        observed["status"] = json!({"phase": "Pending"});
        let list = json!({"apiVersion": "v1", "kind": "PodList",
            "metadata": {"resourceVersion": "918700"}, "items": [observed.clone()]});
        let (_, _, send) = next_request(&mut handle).await;
        send.send_response(json_response(StatusCode::OK, &list));
        eventually("the observed pod charged", || cpu(&world, "worker-4") == 2.0).await;
        world.write().charges.remember_decision("5d0bserved", Vec::new());

        let (_, uri, send) = next_request(&mut handle).await;
        assert!(uri.contains("watch=true"), "{uri}");
        let mut bound = observed;
        bound["metadata"]["resourceVersion"] = json!("918720");
        bound["spec"]["nodeName"] = json!("worker-4");
        bound["status"] = json!({"phase": "Running"});
        send.send_response(watch_response(&[
            json!({"type": "MODIFIED", "object": bound}),
        ]));

        let counted = |m: &crate::telemetry::Metrics| {
            m.encode()
                .contains("placement_webhook_observed_hot_landings_total 1\n")
        };
        eventually("the observed bind counted", || counted(&metrics)).await;
        let exported = metrics.encode();
        for line in [
            "placement_webhook_observed_heat_count{placement=\"scheduler\"} 1\n",
            "placement_webhook_observed_heat_count{placement=\"webhook\"} 1\n",
            // 0.92 on the scheduler's node, 0.31 on the webhook's.
            "placement_webhook_observed_heat_bucket{le=\"0.9\",placement=\"scheduler\"} 0\n",
            "placement_webhook_observed_heat_bucket{le=\"1.0\",placement=\"scheduler\"} 1\n",
            "placement_webhook_observed_heat_bucket{le=\"0.3\",placement=\"webhook\"} 0\n",
            "placement_webhook_observed_heat_bucket{le=\"0.4\",placement=\"webhook\"} 1\n",
            // Not a steered pod: no steered landing counted.
            "placement_webhook_landings_total{where=\"elsewhere\"} 0\n",
        ] {
            assert!(exported.contains(line), "{line} in {exported}");
        }
        stop(tx, task).await;
    })
    .await
    .expect("test took too long");
}
