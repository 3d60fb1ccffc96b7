//! `placement-webhook certs` end to end: the real binary makes a CA and a serving certificate,
//! the server serves them to a client that trusts only that CA under the Service's DNS name,
//! and a second run (a rotation: new CA with --force, or a new certificate from the kept CA with
//! --keep-ca) reaches the running server without a restart.

use crate::support;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine;
use placement_webhook::config::Config;
use rustls::RootCertStore;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use support::webhook::{client, start, taskmanager_review, test_config};

const SERVICE: &str = "placement-webhook";
const NAMESPACE: &str = "flink-system";
/// The name the apiserver uses for a Service reference.
const SERVER_NAME: &str = "placement-webhook.flink-system.svc";

/// Runs `placement-webhook certs` into `dir` with `extra` flags and returns the caBundle it
/// printed.
fn run_certs(dir: &Path, extra: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_placement-webhook"))
        .args([
            "certs",
            "--service",
            SERVICE,
            "--namespace",
            NAMESPACE,
            "--days",
            "7",
        ])
        .args(extra)
        .arg("--out")
        .arg(dir)
        .output()
        .expect("certs runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "certs failed: {stderr}");
    for file in ["ca.crt", "tls.crt", "tls.key"] {
        assert!(
            stderr.contains(&dir.join(file).display().to_string()),
            "stderr does not name {file}: {stderr}"
        );
    }
    let stdout = String::from_utf8(output.stdout).expect("UTF-8 stdout");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "stdout is the caBundle alone: {stdout:?}");
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(lines[0])
        .expect("caBundle is base64");
    assert_eq!(
        decoded,
        std::fs::read(dir.join("ca.crt")).expect("ca.crt"),
        "caBundle is the base64 of ca.crt"
    );
    let mode = std::fs::metadata(dir.join("tls.key"))
        .expect("tls.key")
        .permissions()
        .mode();
    assert_eq!(
        mode & 0o777,
        0o600,
        "private key readable by its owner only"
    );
    lines[0].to_string()
}

fn read_pem(path: &Path) -> String {
    std::fs::read_to_string(path).expect("PEM file")
}

fn leaf_der(dir: &Path) -> CertificateDer<'static> {
    CertificateDer::from_pem_slice(read_pem(&dir.join("tls.crt")).as_bytes()).expect("tls.crt")
}

/// One TLS handshake with `addr`, trusting only `ca_pem`, verifying `SERVER_NAME`; returns the
/// leaf certificate the server sent.
async fn served_leaf(
    addr: std::net::SocketAddr,
    ca_pem: &str,
) -> std::io::Result<CertificateDer<'static>> {
    let mut roots = RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(ca_pem.as_bytes()).expect("CA PEM"))
        .expect("CA as root");
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("protocol versions")
    .with_root_certificates(roots)
    .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    let name = ServerName::try_from(SERVER_NAME).expect("server name");
    let stream = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await?;
    let (_, conn) = stream.get_ref();
    conn.peer_certificates()
        .and_then(|chain| chain.first())
        .map(|leaf| leaf.clone().into_owned())
        .ok_or_else(|| std::io::Error::other("no peer certificate"))
}

/// A full AdmissionReview over TLS, trusting only `ca_pem`: answered, allowed and patched.
async fn review_is_answered(running: &placement_webhook::app::Running, ca_pem: &str, uid: &str) {
    let https = client(running, ca_pem, SERVER_NAME);
    let review = taskmanager_review(uid);
    let reply = https.review(&review).await;
    assert_eq!(
        reply.status,
        200,
        "{}",
        String::from_utf8_lossy(&reply.body)
    );
    let out = reply.json();
    assert_eq!(out["response"]["uid"], uid);
    assert_eq!(out["response"]["allowed"], true);
    assert!(reply.patch().is_some(), "TaskManager is steered: {out}");
}

#[tokio::test]
async fn generated_certificates_are_served_and_rotated_without_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    // A directory that does not exist yet: `certs` creates it.
    let tls_dir = dir.path().join("tls");
    let first_bundle = run_certs(&tls_dir, &[]);
    let first_ca = read_pem(&tls_dir.join("ca.crt"));
    let first_leaf = leaf_der(&tls_dir);

    let config = Config {
        tls_cert: Some(tls_dir.join("tls.crt")),
        tls_key: Some(tls_dir.join("tls.key")),
        ..test_config()
    };
    config.validate().expect("config");
    let running = start(config).await;

    assert_eq!(
        served_leaf(running.addr, &first_ca)
            .await
            .expect("handshake"),
        first_leaf
    );
    review_is_answered(&running, &first_ca, "certs-serve-1").await;

    // Rotation: a second run with --force replaces CA, certificate and key in place.
    let second_bundle = run_certs(&tls_dir, &["--force"]);
    assert_ne!(second_bundle, first_bundle, "a new CA each run");
    let second_ca = read_pem(&tls_dir.join("ca.crt"));
    let second_leaf = leaf_der(&tls_dir);
    assert_ne!(second_leaf, first_leaf);

    // The server re-reads its files every 2 s.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match served_leaf(running.addr, &second_ca).await {
            Ok(leaf) if leaf == second_leaf => break,
            Ok(leaf) => panic!("served neither the old nor the new certificate: {leaf:?}"),
            Err(e) => assert!(
                Instant::now() < deadline,
                "new certificate not served within 10 s: {e}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    review_is_answered(&running, &second_ca, "certs-serve-2").await;
    assert!(
        served_leaf(running.addr, &first_ca).await.is_err(),
        "the old CA no longer verifies what is served"
    );
    running.stop().await;
}

#[tokio::test]
async fn a_kept_ca_signs_the_next_certificate_and_the_ca_bundle_stays() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tls_dir = dir.path().join("tls");
    let bundle = run_certs(&tls_dir, &[]);
    let ca = read_pem(&tls_dir.join("ca.crt"));
    let first_leaf = leaf_der(&tls_dir);

    // A second run without a flag writes nothing and says what to do.
    let output = Command::new(env!("CARGO_BIN_EXE_placement-webhook"))
        .args(["certs", "--service", SERVICE, "--namespace", NAMESPACE])
        .arg("--out")
        .arg(&tls_dir)
        .output()
        .expect("certs runs");
    assert!(!output.status.success());
    assert!(output.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&format!(
            "{} already holds a CA",
            tls_dir.join("ca.crt").display()
        )) && stderr.contains("--keep-ca")
            && stderr.contains("--force"),
        "{stderr}"
    );
    assert_eq!(read_pem(&tls_dir.join("ca.crt")), ca);
    assert_eq!(leaf_der(&tls_dir), first_leaf);

    let config = Config {
        tls_cert: Some(tls_dir.join("tls.crt")),
        tls_key: Some(tls_dir.join("tls.key")),
        ..test_config()
    };
    let running = start(config).await;
    review_is_answered(&running, &ca, "certs-keep-1").await;

    // --keep-ca: a new serving certificate, the same CA and caBundle.
    assert_eq!(run_certs(&tls_dir, &["--keep-ca"]), bundle);
    assert_eq!(read_pem(&tls_dir.join("ca.crt")), ca);
    let second_leaf = leaf_der(&tls_dir);
    assert_ne!(second_leaf, first_leaf);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let leaf = served_leaf(running.addr, &ca)
            .await
            .expect("the kept CA verifies what is served throughout");
        if leaf == second_leaf {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "new certificate not served within 10 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    review_is_answered(&running, &ca, "certs-keep-2").await;
    running.stop().await;
}

#[test]
fn certs_refuses_bad_input_without_writing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out");
    let output = Command::new(env!("CARGO_BIN_EXE_placement-webhook"))
        .args(["certs", "--service", "Not_A_Name", "--namespace", NAMESPACE])
        .arg("--out")
        .arg(&out)
        .output()
        .expect("certs runs");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("Not_A_Name"), "{stderr}");
    assert!(output.stdout.is_empty());
    assert!(!out.exists(), "nothing written for invalid input");
}
