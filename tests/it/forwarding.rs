//! Replicas forwarding reviews to the deciding one, over real TLS: the decider decides and
//! charges its ledger, the replica that received the review only passes the answer on; a
//! review already forwarded is decided where it arrives; a decider that does not answer, or
//! does not serve the replicas' own certificate, leaves the review to the replica that got it.

use crate::support;

use placement_webhook::app::{self, Running, StartOptions};
use placement_webhook::cli::certs::{self, CertRequest};
use placement_webhook::config::Config;
use placement_webhook::inventory::replicas::{Identity, Member};
use support::webhook::{Client, client, taskmanager_review, test_config};

const SERVICE: &str = "placement-webhook";
const NAMESPACE: &str = "placement-webhook";
const HOST: &str = "placement-webhook.placement-webhook.svc";

struct Certs {
    _dir: tempfile::TempDir,
    ca_pem: String,
    config: Config,
}

/// A serving pair as the deployment's Secret holds it, written to files every replica reads.
fn shared_certs() -> Certs {
    let bundle = certs::generate(&CertRequest {
        service: SERVICE.into(),
        namespace: NAMESPACE.into(),
        days: 1,
        ip_addresses: Vec::new(),
    })
    .expect("certificates");
    let dir = tempfile::tempdir().expect("temp dir");
    let written = certs::write_files(dir.path(), &bundle).expect("written");
    let config = Config {
        tls_cert: Some(written.cert),
        tls_key: Some(written.key),
        ..test_config()
    };
    Certs {
        _dir: dir,
        ca_pem: bundle.ca_pem,
        config,
    }
}

async fn replica(config: &Config, name: &str) -> Running {
    app::start(
        config.clone(),
        StartOptions {
            use_cluster: false,
            identity: Some(Identity {
                pod: name.into(),
                namespace: NAMESPACE.into(),
                service: SERVICE.into(),
            }),
        },
    )
    .await
    .expect("replica starts")
}

fn member(name: &str, running: Option<&Running>) -> Member {
    Member {
        name: name.into(),
        url: running.map(|r| format!("https://127.0.0.1:{}", r.addr.port())),
    }
}

/// The value of one sample line of the exposition, 0 when absent.
fn sample(running: &Running, line_start: &str) -> f64 {
    running
        .metrics
        .encode()
        .lines()
        .find_map(|l| l.strip_prefix(line_start))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

const PATCHED: &str = "placement_webhook_reviews_total{outcome=\"patched\"}";

fn forwarded(running: &Running, result: &str) -> f64 {
    sample(
        running,
        &format!("placement_webhook_forwarded_reviews_total{{result=\"{result}\"}}"),
    )
}

async fn send(client: &Client, uid: &str) -> serde_json::Value {
    let review = taskmanager_review(uid);
    let reply = client.review(&review).await;
    assert_eq!(
        reply.status,
        200,
        "{}",
        String::from_utf8_lossy(&reply.body)
    );
    let out = reply.json();
    assert_eq!(out["response"]["uid"], uid);
    assert_eq!(out["response"]["allowed"], true);
    out
}

#[tokio::test]
async fn the_lowest_named_replica_decides_what_the_others_receive() {
    let certs = shared_certs();
    let a = replica(&certs.config, "placement-webhook-a").await;
    let b = replica(&certs.config, "placement-webhook-b").await;
    let members = [
        member("placement-webhook-a", Some(&a)),
        member("placement-webhook-b", Some(&b)),
    ];
    a.publish_members(&members);
    b.publish_members(&members);
    let to_b = client(&b, &certs.ca_pem, HOST);

    let out = send(&to_b, "forwarded-1").await;
    assert!(out["response"]["patch"].is_string(), "{out}");
    // Decided and charged on a; b only passed the answer on.
    assert_eq!(sample(&a, PATCHED), 1.0);
    assert_eq!(sample(&b, PATCHED), 0.0);
    assert_eq!(forwarded(&b, "answered"), 1.0);
    assert_eq!(a.world.read().charges.len(), 1);
    assert_eq!(b.world.read().charges.len(), 0);

    // What a receives, a decides.
    let to_a = client(&a, &certs.ca_pem, HOST);
    send(&to_a, "direct-1").await;
    assert_eq!(sample(&a, PATCHED), 2.0);
    assert_eq!(forwarded(&a, "answered"), 0.0);
    assert_eq!(a.world.read().charges.len(), 2);

    // Malformed input gets the decider's 4xx, passed on, and does not stop the forwarding.
    let reply = to_b
        .post("/mutate", "application/json", b"{\"kind\":".to_vec())
        .await;
    assert!((400..500).contains(&reply.status), "{}", reply.status);
    send(&to_b, "forwarded-2").await;
    assert_eq!(forwarded(&b, "answered"), 3.0);
    assert_eq!(a.world.read().charges.len(), 3);
    a.stop().await;
    b.stop().await;
}

#[tokio::test]
async fn replicas_that_disagree_on_the_decider_never_bounce_a_review() {
    let certs = shared_certs();
    let a = replica(&certs.config, "placement-webhook-a").await;
    let b = replica(&certs.config, "placement-webhook-b").await;
    // b takes a for the decider; a, whose own slice has no address yet, takes b.
    b.publish_members(&[
        member("placement-webhook-a", Some(&a)),
        member("placement-webhook-b", Some(&b)),
    ]);
    a.publish_members(&[
        member("placement-webhook-a", None),
        member("placement-webhook-b", Some(&b)),
    ]);
    let to_b = client(&b, &certs.ca_pem, HOST);
    send(&to_b, "once").await;
    assert_eq!(sample(&a, PATCHED), 1.0);
    assert_eq!(sample(&b, PATCHED), 0.0);
    assert_eq!(forwarded(&a, "answered"), 0.0);
    a.stop().await;
    b.stop().await;
}

#[tokio::test]
async fn a_decider_that_is_gone_leaves_the_review_here_and_is_retried_later() {
    let certs = shared_certs();
    let a = replica(&certs.config, "placement-webhook-a").await;
    let gone = member("placement-webhook-a", Some(&a));
    a.stop().await;
    let b = replica(&certs.config, "placement-webhook-b").await;
    b.publish_members(&[gone, member("placement-webhook-b", Some(&b))]);
    let to_b = client(&b, &certs.ca_pem, HOST);

    let out = send(&to_b, "fallback-1").await;
    assert!(out["response"]["patch"].is_string(), "{out}");
    assert_eq!(forwarded(&b, "failed"), 1.0);
    // Within `forward.retry_after`, b does not try again: no waiting on every review.
    send(&to_b, "fallback-2").await;
    assert_eq!(forwarded(&b, "resting"), 1.0);
    assert_eq!(forwarded(&b, "failed"), 1.0);
    assert_eq!(sample(&b, PATCHED), 2.0);
    assert_eq!(b.world.read().charges.len(), 2);
    b.stop().await;
}

#[tokio::test]
async fn a_decider_serving_another_certificate_is_not_trusted() {
    let certs = shared_certs();
    let other = shared_certs();
    let impostor = replica(&other.config, "placement-webhook-a").await;
    let b = replica(&certs.config, "placement-webhook-b").await;
    b.publish_members(&[
        member("placement-webhook-a", Some(&impostor)),
        member("placement-webhook-b", Some(&b)),
    ]);
    let to_b = client(&b, &certs.ca_pem, HOST);
    send(&to_b, "not-trusted").await;
    assert_eq!(forwarded(&b, "failed"), 1.0);
    assert_eq!(sample(&b, PATCHED), 1.0);
    assert_eq!(sample(&impostor, PATCHED), 0.0);
    impostor.stop().await;
    b.stop().await;
}
