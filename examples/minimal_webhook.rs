//! The load-test baseline: a mutating webhook written the way kube-rs's own admission example
//! is (axum over axum-server with rustls, `AdmissionReview<DynamicObject>`, one label added by a
//! JSON patch), with no placement decision. The body is read and written with serde_json
//! directly: what axum's `Json` does, whose feature this crate does not build. `benches/load.sh` runs it next to the real server
//! with the same certificate, body and load, so the ratio between the two is what our request
//! path costs beyond the minimum.
//!
//! ```text
//! cargo run --release --example minimal_webhook -- CERT.pem KEY.pem 127.0.0.1:18444 [ANSWER.json]
//! ```
//!
//! With `ANSWER.json` (a recorded `response` of `placement-webhook`: its `patch` and
//! `auditAnnotations`) it answers every review with that patch and those annotations instead of
//! its label: the cost of writing the webhook's answer (the patch's bytes as recorded, base64 in
//! the review) with no decision behind it, which is the floor any decision adds to.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;

use axum::Router;
use axum::body::Bytes;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum_server::tls_rustls::RustlsConfig;
use base64::Engine;
use json_patch::jsonptr::PointerBuf;
use json_patch_v4 as json_patch;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview};
use kube::core::{DynamicObject, Resource, ResourceExt};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let (Some(cert), Some(key), Some(listen)) = (args.next(), args.next(), args.next()) else {
        anyhow::bail!("usage: minimal_webhook CERT.pem KEY.pem ADDRESS:PORT [ANSWER.json]");
    };
    let listen: SocketAddr = listen.parse()?;
    let answer = match args.next() {
        Some(path) => Some(Arc::new(Answer::read(&path)?)),
        None => None,
    };
    // rustls is built with ring only; say so once instead of letting it guess.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let tls = RustlsConfig::from_config(http11_only(&cert, &key)?);
    let app = Router::new().route(
        "/mutate",
        post(move |body: Bytes| {
            let answer = answer.clone();
            async move { mutate_handler(body, answer.as_deref()) }
        }),
    );
    axum_server::bind_rustls(listen, tls)
        .serve(app.into_make_service())
        .await?;
    Ok(())
}

/// The serving pair, offering HTTP/1.1 only (ALPN): the apiserver calls a webhook registered
/// by Service over HTTP/1.1 (`NextProtos` in k8s.io/apiserver `pkg/util/webhook/client.go`,
/// kubernetes#75791) and offers HTTP/2 only to a URL at a loopback address. The benches
/// register both webhooks by such a URL; offering HTTP/2 here would give this baseline alone one
/// multiplexed connection, which no Service-registered webhook gets.
fn http11_only(cert: &str, key: &str) -> anyhow::Result<Arc<rustls::ServerConfig>> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let chain = CertificateDer::pem_file_iter(cert)
        .with_context(|| format!("reading {cert}"))?
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("parsing {cert}"))?;
    let key = PrivateKeyDer::from_pem_file(key).with_context(|| format!("reading {key}"))?;
    let mut config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(chain, key)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// A recorded answer of the webhook, given back to every review as the webhook writes it: the
/// patch as a base64 string (kube-rs's `AdmissionResponse` writes its bytes as an array of
/// numbers, kube-rs#1781, which would make the floor several times the webhook's own bytes).
struct Answer {
    /// The recorded `response`, its `uid` replaced in each answer.
    response: serde_json::Value,
}

impl Answer {
    fn read(path: &str) -> anyhow::Result<Self> {
        let text = std::fs::read(path).with_context(|| format!("reading {path}"))?;
        let response: serde_json::Value =
            serde_json::from_slice(&text).with_context(|| format!("parsing {path}"))?;
        let patch = response
            .get("patch")
            .and_then(serde_json::Value::as_str)
            .with_context(|| format!("{path} has no patch"))?;
        let patch = base64::engine::general_purpose::STANDARD
            .decode(patch)
            .with_context(|| format!("decoding the patch of {path}"))?;
        // Refuse what is not a JSON patch rather than replaying it blindly.
        serde_json::from_slice::<json_patch::Patch>(&patch)
            .with_context(|| format!("parsing the patch of {path}"))?;
        Ok(Self { response })
    }

    fn answer(&self, uid: &str) -> Response {
        let mut response = self.response.clone();
        response["uid"] = serde_json::Value::String(uid.to_string());
        let review = serde_json::json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "response": response,
        });
        match serde_json::to_vec(&review) {
            Ok(bytes) => ([(header::CONTENT_TYPE, "application/json")], bytes).into_response(),
            Err(err) => (StatusCode::INTERNAL_SERVER_ERROR, err.to_string()).into_response(),
        }
    }
}

fn mutate_handler(body: Bytes, answer: Option<&Answer>) -> Response {
    let review: AdmissionReview<DynamicObject> = match serde_json::from_slice(&body) {
        Ok(review) => review,
        Err(err) => return (StatusCode::UNPROCESSABLE_ENTITY, err.to_string()).into_response(),
    };
    let req: AdmissionRequest<DynamicObject> = match review.try_into() {
        Ok(req) => req,
        Err(err) => return json(&AdmissionResponse::invalid(err.to_string()).into_review()),
    };
    if let (Some(answer), Some(_)) = (answer, &req.object) {
        return answer.answer(&req.uid);
    }
    let mut res = AdmissionResponse::from(&req);
    if let Some(obj) = req.object {
        res = match mutate(res.clone(), &obj) {
            Ok(res) => res,
            Err(err) => res.deny(err.to_string()),
        };
    }
    json(&res.into_review())
}

fn json(review: &AdmissionReview<DynamicObject>) -> Response {
    match serde_json::to_vec(review) {
        Ok(bytes) => ([(header::CONTENT_TYPE, "application/json")], bytes).into_response(),
        Err(err) => (StatusCode::INTERNAL_SERVER_ERROR, err.to_string()).into_response(),
    }
}

/// Adds the `admission` label (and the labels map when missing), as the upstream example does.
fn mutate(
    res: AdmissionResponse,
    obj: &DynamicObject,
) -> Result<AdmissionResponse, kube::core::admission::SerializePatchError> {
    if obj.labels().contains_key("admission") {
        return Ok(res);
    }
    let mut patches = Vec::new();
    if obj.meta().labels.is_none() {
        patches.push(json_patch::PatchOperation::Add(json_patch::AddOperation {
            path: PointerBuf::from_tokens(["metadata", "labels"]),
            value: serde_json::json!({}),
        }));
    }
    patches.push(json_patch::PatchOperation::Add(json_patch::AddOperation {
        path: PointerBuf::from_tokens(["metadata", "labels", "admission"]),
        value: serde_json::Value::String("modified-by-admission-controller".into()),
    }));
    res.with_patch(json_patch::Patch(patches))
}
