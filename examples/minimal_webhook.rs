//! The load-test baseline: a mutating webhook written the way kube-rs's own admission example
//! is (axum over axum-server with rustls, `AdmissionReview<DynamicObject>`, one label added by a
//! JSON patch), with no placement decision. The body is read and written with serde_json
//! directly: what axum's `Json` does, whose feature this crate does not build. `benches/load.sh` runs it next to the real server
//! with the same certificate, body and load, so the ratio between the two is what our request
//! path costs beyond the minimum.
//!
//! ```text
//! cargo run --release --example minimal_webhook -- CERT.pem KEY.pem 127.0.0.1:18444
//! ```

use std::net::SocketAddr;

use axum::Router;
use axum::body::Bytes;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum_server::tls_rustls::RustlsConfig;
use json_patch::jsonptr::PointerBuf;
use json_patch_v4 as json_patch;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview};
use kube::core::{DynamicObject, Resource, ResourceExt};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let (Some(cert), Some(key), Some(listen)) = (args.next(), args.next(), args.next()) else {
        anyhow::bail!("usage: minimal_webhook CERT.pem KEY.pem ADDRESS:PORT");
    };
    let listen: SocketAddr = listen.parse()?;
    // rustls is built with ring only; say so once instead of letting it guess.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let tls = RustlsConfig::from_pem_file(cert, key).await?;
    let app = Router::new().route("/mutate", post(mutate_handler));
    axum_server::bind_rustls(listen, tls)
        .serve(app.into_make_service())
        .await?;
    Ok(())
}

async fn mutate_handler(body: Bytes) -> Response {
    let review: AdmissionReview<DynamicObject> = match serde_json::from_slice(&body) {
        Ok(review) => review,
        Err(err) => return (StatusCode::UNPROCESSABLE_ENTITY, err.to_string()).into_response(),
    };
    let req: AdmissionRequest<DynamicObject> = match review.try_into() {
        Ok(req) => req,
        Err(err) => return json(&AdmissionResponse::invalid(err.to_string()).into_review()),
    };
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
