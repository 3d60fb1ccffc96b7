//! Cluster access: a kube client when there is a cluster, `None` otherwise.
//!
//! The webhook must start and serve without a cluster (local runs, `review` against a snapshot
//! file), so a missing or unreachable apiserver is not an error: the node list then comes from
//! the snapshot.

use std::time::Duration;

use http::HeaderValue;
use http::header::USER_AGENT as USER_AGENT_HEADER;
use kube::{Client, Config};
use tracing::{info, warn};

/// How long the first call to the apiserver may take before we give up on it.
pub(crate) const PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// Sent with every apiserver request, so that audit logs, metrics and API Priority and Fairness
/// name this component and its version (kube sends no User-Agent of its own).
pub(crate) const USER_AGENT: &str = concat!("placement-webhook/", env!("CARGO_PKG_VERSION"));

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

/// Backoff between attempts to reach a configured apiserver that does not answer.
pub(crate) const RETRY_FIRST: Duration = Duration::from_secs(1);
pub(crate) const RETRY_MAX: Duration = Duration::from_secs(60);

/// A client once the apiserver answers. `None` at once when there is no cluster configuration
/// (snapshot-only mode); a configured apiserver that does not answer is retried with backoff
/// (1 s doubling to 60 s) until it does, or until `shutdown`.
pub(crate) async fn connect(shutdown: impl std::future::Future<Output = ()>) -> Option<Client> {
    let config = match Config::infer().await {
        Ok(config) => config,
        Err(error) => {
            info!(%error, "no cluster access: using the snapshot's node list");
            return None;
        }
    };
    connect_to(config, RETRY_FIRST, shutdown).await
}

/// [`connect`] to a given apiserver, the first retry after `first_wait`.
pub(crate) async fn connect_to(
    config: Config,
    first_wait: Duration,
    shutdown: impl std::future::Future<Output = ()>,
) -> Option<Client> {
    let retry = async {
        let mut wait = first_wait;
        loop {
            if let Some(client) = probe(config.clone(), PROBE_TIMEOUT).await {
                return client;
            }
            info!(
                retry_in_secs = wait.as_secs(),
                "apiserver not reachable yet: serving from the snapshot, retrying"
            );
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(RETRY_MAX);
        }
    };
    tokio::select! {
        client = retry => Some(client),
        () = shutdown => None,
    }
}

/// Builds a client from `config` and keeps it only if the apiserver answers `/version` in time.
#[tracing::instrument(name = "kube_probe", skip_all, fields(cluster = %config.cluster_url))]
pub(crate) async fn probe(config: Config, timeout: Duration) -> Option<Client> {
    // Two rustls providers are linked (ring, and aws-lc-rs through reqwest), so rustls cannot
    // pick one by itself and kube's TLS setup would panic. Prefer ring, as the rest of the crate
    // does; an error only means a provider was installed already.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = match Client::try_from(with_user_agent(config)) {
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

/// `config` with our User-Agent in place of any configured one.
fn with_user_agent(mut config: Config) -> Config {
    config.headers.retain(|(name, _)| name != USER_AGENT_HEADER);
    config
        .headers
        .push((USER_AGENT_HEADER, HeaderValue::from_static(USER_AGENT)));
    config
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

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tracing_subscriber::EnvFilter;

    use super::*;

    /// Reads one request's head from the first connection, answers it as `/version` would.
    async fn answer_version(listener: tokio::net::TcpListener) -> String {
        let (mut conn, _) = listener.accept().await.expect("accept");
        let mut request = Vec::new();
        let mut buf = [0u8; 1024];
        while !request.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = conn.read(&mut buf).await.expect("read");
            assert!(n > 0, "client closed early");
            request.extend_from_slice(&buf[..n]);
        }
        let body = r#"{"major":"1","minor":"33","gitVersion":"v1.33.1","gitCommit":"x","gitTreeState":"clean","buildDate":"2025-05-15T08:19:08Z","goVersion":"go1.24.2","compiler":"gc","platform":"linux/amd64"}"#;
        let response = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        conn.write_all(response.as_bytes()).await.expect("write");
        String::from_utf8_lossy(&request).into_owned()
    }

    #[tokio::test]
    async fn apiserver_requests_carry_our_user_agent() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let server = tokio::spawn(answer_version(listener));
        let mut config = Config::new(format!("http://{addr}").parse().expect("url"));
        // A user agent from elsewhere (e.g. a kubeconfig) is replaced, not sent twice.
        config.headers.push((
            USER_AGENT_HEADER,
            HeaderValue::from_static("someone-else/1.0"),
        ));
        let client = probe(config, Duration::from_secs(3)).await;
        assert!(client.is_some(), "the probe got its answer");
        let request = server.await.expect("server task").to_ascii_lowercase();
        let agents: Vec<&str> = request
            .lines()
            .filter_map(|l| l.strip_prefix("user-agent:"))
            .map(str::trim)
            .collect();
        assert_eq!(
            agents,
            [format!("placement-webhook/{}", env!("CARGO_PKG_VERSION"))],
            "{request}"
        );
    }

    /// Log lines written through a subscriber with `filter` while probing a closed port.
    async fn logs_of_a_failed_probe(filter: &str) -> String {
        #[derive(Clone, Default)]
        struct Sink(Arc<Mutex<Vec<u8>>>);
        impl Write for Sink {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                self.0.lock().expect("sink").extend_from_slice(buf);
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let sink = Sink::default();
        let writer = sink.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter(EnvFilter::new(filter))
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .finish();
        // Bind then drop: the port is (almost certainly) closed now.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("free port")
            .port();
        let config = Config::new(format!("http://127.0.0.1:{port}").parse().expect("url"));
        // The test runtime has one thread: everything below logs to this subscriber.
        let _guard = tracing::subscriber::set_default(subscriber);
        assert!(probe(config, Duration::from_secs(3)).await.is_none());
        let bytes = sink.0.lock().expect("sink").clone();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    #[tokio::test]
    async fn default_log_filter_drops_kube_per_request_errors_and_keeps_ours() {
        // Without the filter's directives, kube's HTTP layer logs the failed request at ERROR...
        let everything = logs_of_a_failed_probe("info").await;
        assert!(
            everything
                .lines()
                .any(|l| l.contains("ERROR") && l.contains("kube_client::client::builder")),
            "kube no longer logs failed requests there; revisit DEFAULT_LOG_FILTER:\n{everything}"
        );
        // ...with them, only our own one-line account remains.
        let filtered = logs_of_a_failed_probe(crate::telemetry::DEFAULT_LOG_FILTER).await;
        assert!(!filtered.contains("ERROR"), "{filtered}");
        assert!(
            filtered.contains("apiserver unreachable: using the snapshot's node list"),
            "{filtered}"
        );
    }
}
