//! What the hop to the deciding replica costs: the same review sent to the decider directly and
//! to another replica that forwards it, both over TLS on loopback with kept-alive connections.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use placement_webhook::app::{self, Running, StartOptions};
use placement_webhook::cli::certs::{self, CertRequest};
use placement_webhook::config::Config;
use placement_webhook::inventory::replicas::{Identity, Member};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const REVIEW: &str = include_str!("../examples/taskmanager-review.json");
const HOST: &str = "placement-webhook.placement-webhook.svc";

async fn replica(config: &Config, name: &str) -> Running {
    app::start(
        config.clone(),
        StartOptions {
            use_cluster: false,
            identity: Some(Identity {
                pod: name.into(),
                namespace: "placement-webhook".into(),
                service: "placement-webhook".into(),
            }),
        },
    )
    .await
    .expect("replica starts")
}

fn forwarding(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let bundle = certs::generate(&CertRequest {
        service: "placement-webhook".into(),
        namespace: "placement-webhook".into(),
        days: 1,
        ip_addresses: Vec::new(),
    })
    .expect("certificates");
    let dir = tempfile::tempdir().expect("temp dir");
    let written = certs::write_files(dir.path(), &bundle).expect("written");
    let config = Config {
        listen: "127.0.0.1:0".parse().expect("addr"),
        metrics_file: Some(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/cluster.json").into()),
        tls_cert: Some(written.cert),
        tls_key: Some(written.key),
        ..Config::default()
    };
    let (decider, other) = runtime.block_on(async {
        (
            replica(&config, "placement-webhook-a").await,
            replica(&config, "placement-webhook-b").await,
        )
    });
    let members: Vec<Member> = [
        ("placement-webhook-a", &decider),
        ("placement-webhook-b", &other),
    ]
    .iter()
    .map(|(name, running)| Member {
        name: (*name).into(),
        url: Some(format!("https://127.0.0.1:{}", running.addr.port())),
    })
    .collect();
    decider.publish_members(&members);
    other.publish_members(&members);

    let client = |running: &Running| {
        let ca = reqwest::Certificate::from_pem(bundle.ca_pem.as_bytes()).expect("CA");
        let http = reqwest::Client::builder()
            .tls_certs_only([ca])
            .resolve(HOST, running.addr)
            .timeout(Duration::from_secs(10))
            .build()
            .expect("client");
        (
            http,
            format!("https://{HOST}:{}/mutate", running.addr.port()),
        )
    };
    let mut group = c.benchmark_group("review_over_tls");
    for (label, running) in [("to_the_decider", &decider), ("forwarded", &other)] {
        let (http, url) = client(running);
        group.bench_function(label, |b| {
            b.iter(|| {
                runtime.block_on(async {
                    let reply = http
                        .post(&url)
                        .header("content-type", "application/json")
                        .body(REVIEW)
                        .send()
                        .await
                        .expect("sent");
                    assert_eq!(reply.status(), 200);
                    black_box(reply.bytes().await.expect("body"))
                })
            })
        });
    }
    group.finish();
    // Every forwarded review was answered by the decider, none decided by the other replica.
    let text = other.metrics.encode();
    assert!(
        text.contains("placement_webhook_forwarded_reviews_total{result=\"failed\"} 0"),
        "{text}"
    );
    runtime.block_on(async {
        decider.stop().await;
        other.stop().await;
    });
}

criterion_group!(benches, forwarding);
criterion_main!(benches);
