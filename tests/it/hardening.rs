//! Clients that stall or send too much: they must not hold the server, and it keeps serving
//! others.

use crate::support;

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

/// Sends one review whose body is `body_len` bytes, all of it at once and without
/// `Expect: 100-continue` (as most clients do), then reads the head of the answer.
///
/// Like most clients it sends the whole request before it reads: a failed write is a failed
/// exchange, since such a client never gets to read the answer.
async fn post_oversized(
    running: &placement_webhook::app::Running,
    connector: &tokio_rustls::TlsConnector,
    body_len: usize,
) -> Result<Vec<u8>, String> {
    let tcp = TcpStream::connect(running.addr)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let name = rustls_pki_types::ServerName::try_from("localhost").expect("name");
    let mut tls = connector
        .connect(name, tcp)
        .await
        .map_err(|e| format!("handshake: {e}"))?;
    let mut request = format!(
        "POST /mutate?timeout=5s HTTP/1.1\r\nhost: localhost\r\n\
         content-type: application/json\r\ncontent-length: {body_len}\r\n\r\n"
    )
    .into_bytes();
    request.resize(request.len() + body_len, b' ');
    tls.write_all(&request)
        .await
        .map_err(|e| format!("sending the body: {e}"))?;
    tls.flush().await.map_err(|e| format!("flush: {e}"))?;
    // The status line and headers are enough.
    let read_head = async {
        let mut answer = Vec::new();
        let mut chunk = [0u8; 4096];
        while !answer.windows(4).any(|w| w == b"\r\n\r\n") {
            match tls.read(&mut chunk).await {
                Ok(0) => break,
                Ok(n) => answer.extend_from_slice(&chunk[..n]),
                Err(e) => return Err(format!("reading the answer: {e}")),
            }
        }
        Ok(answer)
    };
    tokio::time::timeout(Duration::from_secs(10), read_head)
        .await
        .unwrap_or_else(|_| Err("no answer within 10 s".to_owned()))
}

#[tokio::test]
async fn oversized_body_without_expect_always_reads_the_413() {
    // Large enough that the rest of the body does not fit in the socket buffers at once.
    const LIMIT: usize = 1 << 20;
    const ATTEMPTS: usize = 50;
    let mut config = test_config();
    config.limits = Limits {
        max_body_bytes: LIMIT,
        ..Limits::default()
    };
    let running = start(config).await;
    let pem = running.tls.self_signed_cert_pem().expect("self-signed");
    let connector = connector(&pem);
    let mut failures = Vec::new();
    for attempt in 0..ATTEMPTS {
        // Two to four times the limit, the same sizes every run.
        let body_len = LIMIT * (2 + attempt % 3);
        match post_oversized(&running, &connector, body_len).await {
            // It also tells the client that this connection is done.
            Ok(answer)
                if answer.starts_with(b"HTTP/1.1 413 ")
                    && String::from_utf8_lossy(&answer)
                        .to_ascii_lowercase()
                        .contains("\r\nconnection: close\r\n") => {}
            Ok(answer) => failures.push(format!(
                "#{attempt} ({body_len} bytes): {:?}",
                String::from_utf8_lossy(&answer[..answer.len().min(80)])
            )),
            Err(e) => failures.push(format!("#{attempt} ({body_len} bytes): {e}")),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {ATTEMPTS} oversized posts did not read the 413:\n{}",
        failures.len(),
        failures.join("\n")
    );
    // The server is still fine afterwards.
    let reply = self_signed_client(&running)
        .review(&taskmanager_review("uid-after-413"))
        .await;
    assert_eq!(reply.status, 200);
    running.stop().await;
}
