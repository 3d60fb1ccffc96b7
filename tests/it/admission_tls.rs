//! Realistic reviews through the real HTTPS server: every answer checked, every patch applied.

use crate::support;

use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::Pod;
use placement_webhook::config::{Config, Mode};
use placement_webhook::inflight::note::DecisionNote;
use placement_webhook::snapshot::LoadSnapshot;
use serde_json::{Value, json};
use support::webhook::{
    Client, Reply, assert_preserved, self_signed_client, start, taskmanager_review, test_config,
};

const DECISION: &str = "placement-webhook.io/decision";

/// Checks the envelope and returns the patched object (or the original when there is no patch).
fn check_answer(review: &Value, reply: &Reply) -> (Value, bool) {
    assert_eq!(
        reply.status,
        200,
        "{}",
        String::from_utf8_lossy(&reply.body)
    );
    let out = reply.json();
    assert_eq!(out["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(out["kind"], "AdmissionReview");
    assert_eq!(out["response"]["uid"], review["request"]["uid"]);
    assert_eq!(out["response"]["allowed"], true);
    let object = review["request"]["object"].clone();
    match reply.patch() {
        None => {
            assert!(
                out["response"].get("patchType").is_none(),
                "patchType without patch"
            );
            (object, false)
        }
        Some(patch) => {
            for op in &patch.0 {
                assert!(matches!(op, json_patch::PatchOperation::Add(_)), "{op:?}");
            }
            let mut patched = object.clone();
            json_patch::patch(&mut patched, &patch).expect("patch applies to the original");
            assert_preserved(&object, &patched, "");
            let pod: Pod =
                serde_json::from_value(patched.clone()).expect("patched object is a Pod");
            let na = pod
                .spec
                .and_then(|s| s.affinity)
                .and_then(|a| a.node_affinity);
            for term in na
                .and_then(|na| na.preferred_during_scheduling_ignored_during_execution)
                .into_iter()
                .flatten()
            {
                assert!((1..=100).contains(&term.weight), "weight {}", term.weight);
            }
            (patched, true)
        }
    }
}

async fn expect_patched(client: &Client, review: &Value) -> Value {
    let reply = client.review(review).await;
    let (patched, has_patch) = check_answer(review, &reply);
    assert!(
        has_patch,
        "expected a patch: {}",
        String::from_utf8_lossy(&reply.body)
    );
    let note = patched["metadata"]["annotations"][DECISION]
        .as_str()
        .expect("decision annotation");
    assert!(!note.contains('\n'));
    assert_eq!(
        reply.json()["response"]["auditAnnotations"]["decision"],
        note
    );
    patched
}

async fn expect_unchanged(client: &Client, review: &Value) -> Value {
    let reply = client.review(review).await;
    let (_, has_patch) = check_answer(review, &reply);
    assert!(
        !has_patch,
        "expected no patch: {}",
        String::from_utf8_lossy(&reply.body)
    );
    reply.json()
}

#[tokio::test]
async fn taskmanager_is_steered_to_cool_eligible_nodes() {
    let running = start(test_config()).await;
    let client = self_signed_client(&running);
    let patched = expect_patched(&client, &taskmanager_review("uid-tm-1")).await;
    let na = &patched["spec"]["affinity"]["nodeAffinity"];
    // The pod's own required term (Flink blocklist) is untouched and first.
    assert_eq!(
        na["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchExpressions"]
            [0]["values"],
        json!(["worker-14"])
    );
    let preferred = na["preferredDuringSchedulingIgnoredDuringExecution"]
        .as_array()
        .expect("preferred terms");
    // The nodes a term prefers: by hostname label (the default, one term per tier) or, for a
    // node without the label, by name. The example cluster's hostname labels are node names.
    let preferred_nodes = |term: &Value| -> Vec<String> {
        let requirements = |kind: &str| term["preference"][kind].as_array().cloned();
        let expressions = requirements("matchExpressions").unwrap_or_default();
        let fields = requirements("matchFields").unwrap_or_default();
        expressions
            .iter()
            .filter(|e| e["key"] == "kubernetes.io/hostname")
            .chain(fields.iter().filter(|f| f["key"] == "metadata.name"))
            .filter(|r| r["operator"] == "In")
            .flat_map(|r| r["values"].as_array().cloned().unwrap_or_default())
            .map(|v| v.as_str().expect("node").to_string())
            .collect()
    };
    let named: Vec<String> = preferred.iter().flat_map(preferred_nodes).collect();
    // One top node the scheduler will take, then fallbacks at a much lower weight.
    let top: Vec<String> = preferred
        .iter()
        .filter(|t| t["weight"] == 100)
        .flat_map(preferred_nodes)
        .collect();
    assert_eq!(top.len(), 1, "{preferred:?}");
    assert!(named.len() > 1, "{preferred:?}");
    assert!(
        preferred
            .iter()
            .all(|t| t["preference"]["matchFields"].is_null()),
        "every node's hostname label is its name: no term names a node by field: {preferred:?}"
    );
    // Not the blocklisted, cordoned, tainted or other-pool nodes, even though they look idle.
    for never in ["worker-14", "worker-10", "worker-12", "worker-17"] {
        assert!(
            !named.iter().any(|n| n == never),
            "{never} preferred: {named:?}"
        );
    }
    // The podAntiAffinity of the template survives.
    assert!(patched["spec"]["affinity"]["podAntiAffinity"].is_object());
    running.stop().await;
}

#[tokio::test]
async fn non_targets_and_other_operations_are_answered_unchanged() {
    let running = start(test_config()).await;
    let client = self_signed_client(&running);

    let mut jobmanager = taskmanager_review("uid-jm");
    jobmanager["request"]["object"]["metadata"]["labels"]["component"] = json!("jobmanager");
    expect_unchanged(&client, &jobmanager).await;

    let mut plain = taskmanager_review("uid-plain");
    plain["request"]["object"]["metadata"]["labels"] = json!({"app": "nginx"});
    expect_unchanged(&client, &plain).await;

    let mut deployment = taskmanager_review("uid-deploy");
    deployment["request"]["resource"] =
        json!({"group": "apps", "version": "v1", "resource": "deployments"});
    deployment["request"]["kind"] = json!({"group": "apps", "version": "v1", "kind": "Deployment"});
    expect_unchanged(&client, &deployment).await;

    for op in ["UPDATE", "DELETE", "CONNECT"] {
        let mut r = taskmanager_review(&format!("uid-{op}"));
        r["request"]["operation"] = json!(op);
        if op == "DELETE" {
            r["request"]["oldObject"] = r["request"]["object"].take();
        }
        expect_unchanged(&client, &r).await;
    }

    let mut ephemeral = taskmanager_review("uid-eph");
    ephemeral["request"]["subResource"] = json!("ephemeralcontainers");
    ephemeral["request"]["operation"] = json!("UPDATE");
    expect_unchanged(&client, &ephemeral).await;
    let mut binding = taskmanager_review("uid-binding");
    binding["request"]["subResource"] = json!("binding");
    expect_unchanged(&client, &binding).await;

    // The usual spellings of true, in any case, opt out.
    for value in ["true", "True", "YES", "yes", "1", "on", "On"] {
        let mut opted_out = taskmanager_review(&format!("uid-skip-{value}"));
        opted_out["request"]["object"]["metadata"]["annotations"]["placement-webhook.io/skip"] =
            json!(value);
        expect_unchanged(&client, &opted_out).await;
    }
    // Spellings of false, and other values, do not.
    for value in ["false", "no", "0", "off", ""] {
        let mut kept = taskmanager_review(&format!("uid-kept-{value}"));
        kept["request"]["object"]["metadata"]["annotations"]["placement-webhook.io/skip"] =
            json!(value);
        expect_patched(&client, &kept).await;
    }
    running.stop().await;
}

#[tokio::test]
async fn reinvocation_is_idempotent() {
    let running = start(test_config()).await;
    let client = self_signed_client(&running);
    let patched = expect_patched(&client, &taskmanager_review("uid-first")).await;
    let mut again = taskmanager_review("uid-second");
    again["request"]["object"] = patched;
    expect_unchanged(&client, &again).await;
    running.stop().await;
}

#[tokio::test]
async fn dry_run_is_answered_but_not_recorded() {
    let running = start(test_config()).await;
    let client = self_signed_client(&running);
    let mut dry = taskmanager_review("uid-dry");
    dry["request"]["dryRun"] = json!(true);
    expect_patched(&client, &dry).await;
    assert_eq!(
        running.world.read().charges.len(),
        0,
        "dry run entered the ledger"
    );
    expect_patched(&client, &taskmanager_review("uid-real")).await;
    assert_eq!(running.world.read().charges.len(), 1);
    running.stop().await;
}

#[tokio::test]
async fn generate_name_pod_without_namespace_in_object() {
    let running = start(test_config()).await;
    let client = self_signed_client(&running);
    let mut r = taskmanager_review("uid-gen");
    let meta = &mut r["request"]["object"]["metadata"];
    meta.as_object_mut().expect("metadata").remove("name");
    meta.as_object_mut().expect("metadata").remove("namespace");
    meta["generateName"] = json!("wordcount-taskmanager-");
    meta["labels"]["type"] = json!("flink-standalone-kubernetes");
    meta.as_object_mut()
        .expect("metadata")
        .remove("annotations");
    r["request"]["name"] = json!("");
    let patched = expect_patched(&client, &r).await;
    assert!(patched["metadata"]["annotations"][DECISION].is_string());
    running.stop().await;
}

#[tokio::test]
async fn stale_or_missing_snapshot_fails_open_with_a_warning() {
    let mut config = test_config();
    config.max_staleness = Duration::from_secs(60);
    let running = start(config).await;
    let client = self_signed_client(&running);
    let mut stale = LoadSnapshot::from_file(&support::webhook::repo_path("examples/cluster.json"))
        .expect("example");
    stale.taken_at = Some(SystemTime::now() - Duration::from_secs(3600));
    running.store.publish_snapshot(stale);
    let out = expect_unchanged(&client, &taskmanager_review("uid-stale")).await;
    let warning = out["response"]["warnings"][0].as_str().expect("warning");
    assert!(warning.contains("stale"), "{warning}");
    running.stop().await;

    let mut no_source = test_config();
    no_source.metrics_file = None;
    let running = start(no_source).await;
    let client = self_signed_client(&running);
    let out = expect_unchanged(&client, &taskmanager_review("uid-none")).await;
    assert!(
        out["response"]["warnings"][0]
            .as_str()
            .expect("warning")
            .contains("no node-load snapshot")
    );
    let metrics = String::from_utf8(client.get("/metrics").await.body).expect("utf8");
    assert!(metrics.contains("outcome=\"failed_open\"} 1"), "{metrics}");
    // Nothing refreshed, nothing in flight: the by-node figures are empty, not an error.
    let inflight: serde_json::Value =
        serde_json::from_slice(&client.get("/debug/inflight").await.body).expect("JSON");
    assert_eq!(inflight, serde_json::json!({"rule": "", "nodes": []}));
    running.stop().await;
}

#[tokio::test]
async fn scheduler_name_mode_sets_the_profile_but_keeps_custom_schedulers() {
    let config = Config {
        mode: Mode::SchedulerName,
        scheduler_name: "flink-spread".into(),
        ..test_config()
    };
    let running = start(config).await;
    let client = self_signed_client(&running);
    let patched = expect_patched(&client, &taskmanager_review("uid-sn")).await;
    assert_eq!(patched["spec"]["schedulerName"], "flink-spread");
    assert!(
        patched["spec"]["affinity"]["nodeAffinity"]
            .get("preferredDuringSchedulingIgnoredDuringExecution")
            .is_none()
    );
    let mut custom = taskmanager_review("uid-volcano");
    custom["request"]["object"]["spec"]["schedulerName"] = json!("volcano");
    let patched = expect_patched(&client, &custom).await;
    assert_eq!(patched["spec"]["schedulerName"], "volcano");
    running.stop().await;
}

#[tokio::test]
async fn observe_mode_writes_only_the_decision_and_charges_the_unsteered_landing() {
    let config = Config {
        mode: Mode::Observe,
        ..test_config()
    };
    let running = start(config).await;
    let client = self_signed_client(&running);
    let review = taskmanager_review("uid-observe-1");
    let patched = expect_patched(&client, &review).await;
    // Every placement term is the pod's own.
    let original = &review["request"]["object"]["spec"];
    assert_eq!(patched["spec"]["affinity"], original["affinity"]);
    assert_eq!(patched["spec"]["schedulerName"], original["schedulerName"]);
    let note = patched["metadata"]["annotations"][DECISION]
        .as_str()
        .expect("note");
    let note = DecisionNote::parse(note).expect("a decision note");
    assert_eq!(note.mode, "observe");
    // The webhook's choice is named; the charge is where the scheduler puts the pod alone.
    let (would, _) = note.would.clone().expect("the webhook's choice");
    assert!(!note.nodes.is_empty());
    let charged = running
        .world
        .read()
        .charges
        .shares(&note.id)
        .expect("charged");
    let charged: Vec<&str> = charged.iter().map(|(n, _)| n.as_str()).collect();
    let landing: Vec<&str> = note.nodes.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(charged, landing);
    // Left to itself, the scheduler shares the pod among the nodes whose requests score the
    // same (every feasible node of the example cluster), the webhook's choice only one of them.
    assert!(landing.len() > 3, "{landing:?}");
    assert!(landing.contains(&would.as_str()), "{landing:?} vs {would}");
    let metrics = String::from_utf8(client.get("/metrics").await.body).expect("utf8");
    assert!(
        metrics.contains("placement_webhook_patches_total{mode=\"observe\"} 1"),
        "{metrics}"
    );
    running.stop().await;
}

#[tokio::test]
async fn a_pod_no_node_can_take_is_counted_as_an_empty_decision() {
    let running = start(test_config()).await;
    let client = self_signed_client(&running);
    expect_patched(&client, &taskmanager_review("uid-fits")).await;
    let mut review = taskmanager_review("uid-nowhere");
    // No node of the example cluster carries this label: none is feasible.
    review["request"]["object"]["spec"]["nodeSelector"] = json!({"pool": "nowhere"});
    let patched = expect_patched(&client, &review).await;
    assert!(
        patched["spec"]["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
            .is_null(),
        "{patched}"
    );
    let metrics = String::from_utf8(client.get("/metrics").await.body).expect("utf8");
    assert!(
        metrics.contains("placement_webhook_empty_decisions_total 1\n"),
        "{metrics}"
    );
    running.stop().await;
}

#[tokio::test]
async fn large_pod_gets_a_small_targeted_patch() {
    let running = start(test_config()).await;
    let client = self_signed_client(&running);
    let mut r = taskmanager_review("uid-big");
    let env: Vec<Value> = (0..4000)
        .map(|i| json!({"name": format!("VAR_{i}"), "value": "x".repeat(32)}))
        .collect();
    r["request"]["object"]["spec"]["containers"][1]["env"] = json!(env);
    assert!(serde_json::to_vec(&r).expect("json").len() > 200_000);
    let reply = client.review(&r).await;
    check_answer(&r, &reply);
    let patch = reply.patch().expect("patch");
    assert!(serde_json::to_vec(&patch).expect("json").len() < 4096);
    running.stop().await;
}

#[tokio::test]
async fn malformed_requests_get_clear_answers_and_the_server_keeps_serving() {
    let running = start(test_config()).await;
    let client = self_signed_client(&running);
    let valid = serde_json::to_vec(&taskmanager_review("uid-valid")).expect("json");
    let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000)).into_bytes();
    let mut invalid_utf8 = valid.clone();
    invalid_utf8.splice(20..20, [0xff, 0xfe, 0xfd]);
    let mut wrong_version = taskmanager_review("uid-v1beta1");
    wrong_version["apiVersion"] = json!("admission.k8s.io/v1beta1");
    let mut no_uid = taskmanager_review("x");
    no_uid["request"]
        .as_object_mut()
        .expect("request")
        .remove("uid");
    let mut wrong_types = taskmanager_review("uid-types");
    wrong_types["request"]["operation"] = json!(42);
    let mut bad_pod = taskmanager_review("uid-bad-pod");
    bad_pod["request"]["object"]["spec"]["containers"] = json!("not a list");
    let mut null_object = taskmanager_review("uid-null");
    null_object["request"]["object"] = Value::Null;
    let huge = {
        let mut r = taskmanager_review("uid-huge");
        r["request"]["object"]["metadata"]["annotations"]["filler"] = json!("x".repeat(4 << 20));
        serde_json::to_vec(&r).expect("json")
    };
    let cases: Vec<(&str, Vec<u8>, &[u16])> = vec![
        ("empty", Vec::new(), &[400]),
        ("not json", b"hello".to_vec(), &[400]),
        ("truncated", valid[..valid.len() / 2].to_vec(), &[400]),
        ("10,000-deep nesting", deep, &[400, 422]),
        ("invalid utf-8", invalid_utf8, &[400]),
        (
            "wrong apiVersion",
            serde_json::to_vec(&wrong_version).expect("json"),
            &[400],
        ),
        (
            "missing uid",
            serde_json::to_vec(&no_uid).expect("json"),
            &[422],
        ),
        (
            "wrong field types",
            serde_json::to_vec(&wrong_types).expect("json"),
            &[422],
        ),
        ("json array", b"[1,2,3]".to_vec(), &[422]),
        ("4 MiB body", huge, &[413]),
    ];
    for (name, body, statuses) in cases {
        let reply = client.post("/mutate", "application/json", body).await;
        assert!(
            statuses.contains(&reply.status),
            "{name}: status {} not in {statuses:?}: {}",
            reply.status,
            String::from_utf8_lossy(&reply.body)
        );
        assert!(!reply.body.is_empty(), "{name}: no message");
        expect_patched(
            &client,
            &taskmanager_review(&format!("uid-after-{}", name.len())),
        )
        .await;
    }
    // A pod that does not parse, or no pod at all, is allowed without a patch.
    let out = expect_unchanged(&client, &bad_pod).await;
    assert!(
        out["response"]["warnings"][0]
            .as_str()
            .expect("warning")
            .contains("could not be read")
    );
    expect_unchanged(&client, &null_object).await;
    // Wrong content type.
    let reply = client.post("/mutate", "text/plain", valid.clone()).await;
    assert_eq!(reply.status, 415);
    // The apiserver always appends ?timeout=; other routes and methods are not found.
    assert_eq!(client.get("/mutate").await.status, 405);
    assert_eq!(client.get("/nope").await.status, 404);
    expect_patched(&client, &taskmanager_review("uid-final")).await;
    running.stop().await;
}

#[tokio::test]
async fn health_and_metrics_endpoints() {
    let running = start(test_config()).await;
    let client = self_signed_client(&running);
    assert_eq!(client.get("/healthz").await.status, 200);
    assert_eq!(client.get("/readyz").await.status, 200);
    expect_patched(&client, &taskmanager_review("uid-m1")).await;
    let mut jm = taskmanager_review("uid-m2");
    jm["request"]["object"]["metadata"]["labels"]["component"] = json!("jobmanager");
    expect_unchanged(&client, &jm).await;
    let reply = client.get("/metrics").await;
    assert_eq!(reply.status, 200);
    let text = String::from_utf8(reply.body).expect("utf8");
    for want in [
        "placement_webhook_reviews_total{outcome=\"patched\"} 1",
        "placement_webhook_reviews_total{outcome=\"skipped\"} 1",
        "placement_webhook_patches_total{mode=\"affinity\"} 1",
        "placement_webhook_review_duration_seconds_count 2",
        "placement_webhook_nodes_in_snapshot 24",
        "placement_webhook_snapshot_age_seconds 0",
        // The steered pod, which no pod watch has reported (there is none here).
        "placement_webhook_inflight_entries 1\n",
        "placement_webhook_inflight_unheard 1\n",
    ] {
        assert!(text.contains(want), "missing {want:?} in\n{text}");
    }
    running.stop().await;
}

/// SIGTERM's path: a review whose body is still arriving when shutdown starts is answered.
#[tokio::test]
async fn shutdown_lets_in_flight_reviews_finish() {
    use rustls_pki_types::pem::PemObject;
    use std::sync::Arc;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let mut running = start(test_config()).await;
    let pem = running.tls.self_signed_cert_pem().expect("self-signed");
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pki_types::CertificateDer::pem_slice_iter(pem.as_bytes()) {
        roots.add(cert.expect("cert")).expect("root");
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("versions")
    .with_root_certificates(roots)
    .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(running.addr)
        .await
        .expect("connect");
    let name = rustls_pki_types::ServerName::try_from("localhost").expect("name");
    let mut tls = connector.connect(name, tcp).await.expect("handshake");

    let body = serde_json::to_vec(&taskmanager_review("uid-draining")).expect("json");
    let head = format!(
        "POST /mutate?timeout=10s HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    tls.write_all(head.as_bytes()).await.expect("head");
    tls.write_all(&body[..body.len() / 2])
        .await
        .expect("first half");
    tls.flush().await.expect("flush");
    tokio::time::sleep(Duration::from_millis(100)).await;

    running.shutdown();
    tokio::time::sleep(Duration::from_millis(100)).await;
    // New connections are refused once shutdown has begun.
    assert!(
        tokio::net::TcpStream::connect(running.addr).await.is_err(),
        "listener still accepting"
    );
    tls.write_all(&body[body.len() / 2..])
        .await
        .expect("second half");
    let mut response = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), tls.read_to_end(&mut response))
        .await
        .expect("answered before the drain timeout")
        .ok();
    let text = String::from_utf8_lossy(&response);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.contains("\"patch\""), "{text}");
    tokio::time::timeout(Duration::from_secs(5), running.wait())
        .await
        .expect("server finished after the last review");
}
