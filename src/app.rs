//! Wiring: sources → view store → admission → HTTPS server. Used by `serve` and by tests.

use crate::inflight::shared::SharedLedger;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwapOption;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::info;

use crate::admission::Admission;
use crate::config::Config;
use crate::inflight::ledger::Ledger;
use crate::inventory::replicas::Identity;
use crate::metrics_source::file::spawn_file_source;
use crate::metrics_source::prometheus::{PrometheusSource, spawn_refresher};
use crate::placement::ReplicaSet;
use crate::readiness::Readiness;
use crate::server::tls::{CertSource, ServerTls};
use crate::server::{self, AppState};
use crate::telemetry::{Metrics, NodeHeat};
use crate::view::ViewStore;

/// How often the TLS files and the snapshot file are re-read.
const FILE_POLL: Duration = Duration::from_secs(2);

/// A running webhook.
pub struct Running {
    pub addr: SocketAddr,
    pub store: Arc<ViewStore>,
    pub ledger: Arc<SharedLedger>,
    pub metrics: Arc<Metrics>,
    /// What `/readyz` answers; the inventory watches set it.
    pub readiness: Arc<Readiness>,
    pub tls: Arc<ServerTls>,
    stop: watch::Sender<bool>,
    server: JoinHandle<()>,
    background: Vec<JoinHandle<()>>,
}

/// Which optional parts to start.
#[derive(Debug, Clone, Copy)]
pub struct StartOptions {
    /// Look for a kube API (in-cluster or kubeconfig) for the node inventory and pod watch.
    pub use_cluster: bool,
}

impl Running {
    /// Stops accepting, lets in-flight reviews finish, stops the background tasks.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = self.server.await;
        for task in self.background {
            task.abort();
        }
    }

    /// Resolves when the server has finished (after a shutdown signal).
    pub async fn wait(&mut self) {
        let _ = (&mut self.server).await;
    }

    /// Asks the server to shut down gracefully.
    pub fn shutdown(&self) {
        let _ = self.stop.send(true);
    }
}

pub async fn start(config: Config, options: StartOptions) -> anyhow::Result<Running> {
    crate::install_crypto_provider();
    let config = Arc::new(config);
    let metrics = Arc::new(Metrics::new());
    let readiness = Arc::new(Readiness::new());
    let store = Arc::new(ViewStore::new(config.placement.clone()));
    let ledger = Arc::new(SharedLedger::new(
        Ledger::new(config.inflight.ttl)
            .with_max_entries(config.inflight.max_entries)
            .with_max_landings(config.inflight.max_landings),
    ));
    let (stop, stopped) = watch::channel(false);
    let mut background = Vec::new();

    let source = match (&config.prometheus, &config.metrics_file) {
        (Some(prometheus), _) => {
            let source = Arc::new(PrometheusSource::new(prometheus.clone())?);
            background.push(spawn_refresher(
                source,
                store.clone(),
                ledger.clone(),
                metrics.clone(),
                config.max_staleness,
                wait_for(stopped.clone()),
            ));
            "prometheus"
        }
        (None, Some(path)) => {
            background.push(spawn_file_source(path.clone(), store.clone(), FILE_POLL)?);
            "file"
        }
        (None, None) => {
            tracing::warn!(
                "no metrics source configured: every target pod is answered without a patch"
            );
            "none"
        }
    };
    let replicas = Arc::new(ArcSwapOption::<ReplicaSet>::empty());
    if options.use_cluster {
        let identity = crate::inventory::replicas::Identity::from_env(&config.service);
        if identity.is_none() {
            info!("POD_NAME or POD_NAMESPACE unset: deciding as a single replica");
        }
        background.push(spawn_cluster_watches(
            store.clone(),
            ledger.clone(),
            identity.map(|identity| (identity, replicas.clone())),
            readiness.clone(),
            metrics.clone(),
            stopped.clone(),
        ));
    }

    background.push(spawn_ledger_expiry(ledger.clone()));

    let cert_source = match (&config.tls_cert, &config.tls_key) {
        (Some(cert), Some(key)) => CertSource::Files {
            cert: cert.clone(),
            key: key.clone(),
        },
        _ => CertSource::SelfSigned,
    };
    let tls = Arc::new(ServerTls::new(cert_source, config.client_ca.as_deref())?);
    background.push(
        tls.clone()
            .spawn_reloader(FILE_POLL, wait_for(stopped.clone())),
    );

    let listener = TcpListener::bind(config.listen).await?;
    let addr = listener.local_addr()?;
    let admission =
        Admission::new(config.clone(), store.clone(), ledger.clone()).sharing_replicas(replicas);
    let state = Arc::new(
        AppState::new(admission, metrics.clone(), config.limits.clone())
            .with_readiness(readiness.clone()),
    );
    info!(%addr, mode = config.mode.as_str(), source, "serving");
    let server = tokio::spawn(server::serve(
        listener,
        tls.clone(),
        state,
        wait_for(stopped),
    ));
    Ok(Running {
        addr,
        store,
        ledger,
        metrics,
        readiness,
        tls,
        stop,
        server,
        background,
    })
}

/// Connects to the apiserver (retrying with backoff while a configured one does not answer),
/// then watches nodes and pods until shutdown. Without cluster configuration: nothing to do.
fn spawn_cluster_watches(
    store: Arc<ViewStore>,
    ledger: Arc<SharedLedger>,
    membership: Option<(Identity, Arc<ArcSwapOption<ReplicaSet>>)>,
    readiness: Arc<Readiness>,
    metrics: Arc<Metrics>,
    stopped: watch::Receiver<bool>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let Some(client) = crate::inventory::client::connect(wait_for(stopped.clone())).await
        else {
            return;
        };
        info!("kube API reachable: watching nodes, pods and namespaces");
        readiness.set_cluster_access();
        let heat_store = store.clone();
        let replicas = {
            let (client, stopped) = (client.clone(), stopped.clone());
            async move {
                if let Some((identity, published)) = membership {
                    let publish = |members: &[String]| {
                        let set = ReplicaSet::new(&identity.pod, members.iter().cloned());
                        published.store(set.map(Arc::new));
                    };
                    crate::inventory::replicas::watch_replicas(
                        client,
                        &identity,
                        publish,
                        wait_for(stopped),
                    )
                    .await;
                }
            }
        };
        tokio::join!(
            replicas,
            crate::inventory::nodes::watch_nodes(
                client.clone(),
                store,
                readiness.clone(),
                wait_for(stopped.clone()),
            ),
            crate::inventory::namespaces::watch_namespaces(
                client.clone(),
                ledger.clone(),
                wait_for(stopped.clone()),
            ),
            crate::inventory::pods::watch_pods(
                client,
                ledger,
                readiness,
                metrics,
                move |node: &str| heat_store.current()?.node(node).map(|n| NodeHeat {
                    heat: n.base_heat,
                    hot: n.base_hot,
                }),
                wait_for(stopped)
            ),
        );
    })
}

async fn wait_for(mut stopped: watch::Receiver<bool>) {
    let _ = stopped.wait_for(|s| *s).await;
}

fn spawn_ledger_expiry(ledger: Arc<SharedLedger>) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tick.tick().await;
            ledger.write().expire(Instant::now());
        }
    })
}
