//! Clients that stall: they must not hold the server, and it keeps serving others.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use placement_webhook::config::Limits;
use rustls_pki_types::pem::PemObject;
use support::webhook::{self_signed_client, start, taskmanager_review, test_config};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn connector(pem: &str) -> tokio_rustls::TlsConnector {
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
    tokio_rustls::TlsConnector::from(Arc::new(config))
}

fn short_timeouts() -> placement_webhook::config::Config {
    let mut config = test_config();
    config.limits = Limits {
        header_read_timeout: Duration::from_millis(400),
        request_timeout: Duration::from_secs(2),
        ..Limits::default()
    };
    config
}

/// Reads until the server closes; returns what it sent and how long that took.
async fn read_until_closed<S: AsyncReadExt + Unpin>(stream: &mut S) -> (Vec<u8>, Duration) {
    let started = Instant::now();
    let mut buf = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut buf))
        .await
        .expect("server closes a stalled connection well within 10 s");
    (buf, started.elapsed())
}

#[tokio::test]
async fn stalled_handshake_and_stalled_headers_are_cut_off() {
    let running = start(short_timeouts()).await;
    let client = self_signed_client(&running);

    // A TCP client that never starts TLS.
    let mut silent = TcpStream::connect(running.addr).await.expect("connect");
    // A TLS client that sends half a request line and stops (slowloris).
    let pem = running.tls.self_signed_cert_pem().expect("self-signed");
    let tcp = TcpStream::connect(running.addr).await.expect("connect");
    let name = rustls_pki_types::ServerName::try_from("localhost").expect("name");
    let mut slow = connector(&pem).connect(name, tcp).await.expect("handshake");
    slow.write_all(b"POST /mutate HTTP/1.1\r\nhost: loc")
        .await
        .expect("write");
    slow.flush().await.expect("flush");

    // Others are served meanwhile.
    let reply = client.review(&taskmanager_review("uid-meanwhile")).await;
    assert_eq!(reply.status, 200);
    assert!(reply.patch().is_some());

    let (_, silent_for) = read_until_closed(&mut silent).await;
    let (sent, slow_for) = read_until_closed(&mut slow).await;
    assert!(
        silent_for < Duration::from_secs(3),
        "handshake stall held {silent_for:?}"
    );
    assert!(
        slow_for < Duration::from_secs(3),
        "header stall held {slow_for:?}"
    );
    let text = String::from_utf8_lossy(&sent);
    assert!(
        text.is_empty() || text.starts_with("HTTP/1.1 408"),
        "{text}"
    );
    running.stop().await;
}

#[tokio::test]
async fn stalled_body_gets_408_within_the_apiserver_deadline() {
    let running = start(short_timeouts()).await;
    let pem = running.tls.self_signed_cert_pem().expect("self-signed");
    let tcp = TcpStream::connect(running.addr).await.expect("connect");
    let name = rustls_pki_types::ServerName::try_from("localhost").expect("name");
    let mut slow = connector(&pem).connect(name, tcp).await.expect("handshake");
    slow.write_all(
        b"POST /mutate?timeout=1s HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: 5000\r\n\r\n{\"apiVersion\":",
    )
    .await
    .expect("write");
    slow.flush().await.expect("flush");
    let (sent, took) = read_until_closed(&mut slow).await;
    let text = String::from_utf8_lossy(&sent);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(
        took < Duration::from_millis(1500),
        "answered after {took:?}"
    );
    running.stop().await;
}
