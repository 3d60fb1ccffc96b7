//! Cluster access: a kube client when there is a cluster, `None` otherwise.
//!
//! The webhook must start and serve without a cluster (local runs, `review` against a snapshot
//! file), so a missing or unreachable apiserver is not an error: the node list then comes from
//! the snapshot.

use std::time::Duration;

use kube::{Client, Config};
use tracing::{info, warn};

/// How long the first call to the apiserver may take before we give up on it.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// A client from the in-cluster environment or a kubeconfig, checked with one request.
///
/// `None` when there is no configuration (logged once at info) or the apiserver does not answer
/// within [`PROBE_TIMEOUT`] (logged at warn).
pub async fn try_client() -> Option<Client> {
    match Config::infer().await {
        Ok(config) => probe(config, PROBE_TIMEOUT).await,
        Err(error) => {
            info!(%error, "no cluster access: using the snapshot's node list");
            None
        }
    }
}

/// Builds a client from `config` and keeps it only if the apiserver answers `/version` in time.
#[tracing::instrument(name = "kube_probe", skip_all, fields(cluster = %config.cluster_url))]
pub async fn probe(config: Config, timeout: Duration) -> Option<Client> {
    // Two rustls providers are linked (ring, and aws-lc-rs through reqwest), so rustls cannot
    // pick one by itself and kube's TLS setup would panic. Prefer ring, as the rest of the crate
    // does; an error only means a provider was installed already.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = match Client::try_from(config) {
        Ok(client) => client,
        Err(error) => {
            warn!(%error, "cannot build a kube client: using the snapshot's node list");
            return None;
        }
    };
    match tokio::time::timeout(timeout, client.apiserver_version()).await {
        Ok(Ok(version)) => {
            info!(version = %version.git_version, "connected to the apiserver");
            Some(client)
        }
        Ok(Err(error)) => {
            warn!(%error, "apiserver unreachable: using the snapshot's node list");
            None
        }
        Err(_) => {
            warn!(
                timeout_ms = timeout.as_millis() as u64,
                "apiserver did not answer in time: using the snapshot's node list"
            );
            None
        }
    }
}

/// Remembers whether a watch is failing, so errors are logged once per change of state and not
/// once per retry (the watcher retries with backoff for as long as the apiserver is away).
#[derive(Debug, Default)]
pub(crate) struct WatchHealth {
    failing: bool,
}

impl WatchHealth {
    pub(crate) fn failed(&mut self, what: &str, error: &dyn std::fmt::Display) {
        if !self.failing {
            self.failing = true;
            warn!(%error, "{what} watch failing; retrying with backoff, last good state kept");
        } else {
            tracing::debug!(%error, "{what} watch still failing");
        }
    }

    pub(crate) fn ok(&mut self, what: &str) {
        if self.failing {
            self.failing = false;
            info!("{what} watch recovered");
        }
    }
}
