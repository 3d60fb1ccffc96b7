//! A webhook server started in-process on loopback, and an HTTPS client that trusts it.

#![allow(dead_code)]

use std::path::PathBuf;
use std::time::Duration;

use base64::Engine;
use placement_webhook::app::{self, Running, StartOptions};
use placement_webhook::config::Config;
use serde_json::Value;

pub fn repo_path(relative: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(relative)
}

/// The example cluster and a loopback port; tests adjust the rest.
pub fn test_config() -> Config {
    Config {
        listen: "127.0.0.1:0".parse().expect("addr"),
        metrics_file: Some(repo_path("examples/cluster.json")),
        ..Config::default()
    }
}

pub async fn start(config: Config) -> Running {
    app::start(
        config,
        StartOptions {
            use_cluster: false,
            identity: None,
        },
    )
    .await
    .expect("webhook starts")
}

/// An HTTPS client that trusts exactly `ca_pem` and reaches `server_name` at the server's port.
pub fn client(running: &Running, ca_pem: &str, server_name: &str) -> Client {
    let cert = reqwest::Certificate::from_pem(ca_pem.as_bytes()).expect("CA PEM");
    let http = reqwest::Client::builder()
        .tls_certs_only([cert])
        .resolve(server_name, running.addr)
        .timeout(Duration::from_secs(10))
        .build()
        .expect("client");
    Client {
        http,
        base: format!("https://{server_name}:{}", running.addr.port()),
    }
}

/// A client for a server using its self-signed localhost certificate.
pub fn self_signed_client(running: &Running) -> Client {
    let pem = running
        .tls
        .self_signed_cert_pem()
        .expect("server uses a self-signed certificate");
    client(running, &pem, "localhost")
}

pub struct Client {
    pub http: reqwest::Client,
    pub base: String,
}

pub struct Reply {
    pub status: u16,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "status {} body is not JSON ({e}): {}",
                self.status,
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    /// The decoded JSONPatch, if the response carries one.
    pub fn patch(&self) -> Option<json_patch::Patch> {
        let review = self.json();
        let response = &review["response"];
        let b64 = response.get("patch")?;
        let b64 = b64
            .as_str()
            .expect("patch must be a base64 string on the wire");
        assert_eq!(response["patchType"], "JSONPatch");
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .expect("base64");
        Some(serde_json::from_slice(&bytes).expect("RFC 6902 array"))
    }
}

impl Client {
    pub async fn post(&self, path: &str, content_type: &str, body: Vec<u8>) -> Reply {
        let response = self
            .http
            .post(format!("{}{path}", self.base))
            .header("content-type", content_type)
            .body(body)
            .send()
            .await
            .expect("request completes");
        let status = response.status().as_u16();
        let body = response.bytes().await.expect("body").to_vec();
        Reply { status, body }
    }

    pub async fn review(&self, review: &Value) -> Reply {
        self.post(
            "/mutate?timeout=10s",
            "application/json",
            serde_json::to_vec(review).expect("json"),
        )
        .await
    }

    pub async fn get(&self, path: &str) -> Reply {
        let response = self
            .http
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .expect("request completes");
        let status = response.status().as_u16();
        let body = response.bytes().await.expect("body").to_vec();
        Reply { status, body }
    }
}

/// The example TaskManager review with a fresh uid.
pub fn taskmanager_review(uid: &str) -> Value {
    let text = std::fs::read_to_string(repo_path("examples/taskmanager-review.json"))
        .expect("example review");
    let mut review: Value = serde_json::from_str(&text).expect("json");
    review["request"]["uid"] = Value::from(uid);
    review
}

/// `after` keeps everything `before` had: objects keep their keys, arrays keep their elements
/// as a prefix, scalars stay equal; `null` may become anything.
pub fn assert_preserved(before: &Value, after: &Value, path: &str) {
    match (before, after) {
        (Value::Null, _) => {}
        (Value::Object(b), Value::Object(a)) => {
            for (k, v) in b {
                let p = format!("{path}/{k}");
                let av = a.get(k).unwrap_or_else(|| panic!("{p} removed"));
                if p == "/spec/schedulerName" && v == "default-scheduler" {
                    continue;
                }
                assert_preserved(v, av, &p);
            }
        }
        (Value::Array(b), Value::Array(a)) => {
            assert!(a.len() >= b.len(), "{path} shrank");
            for (i, (bv, av)) in b.iter().zip(a).enumerate() {
                assert_preserved(bv, av, &format!("{path}/{i}"));
            }
        }
        (b, a) => assert_eq!(b, a, "{path} changed"),
    }
}
