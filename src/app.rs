//! Wiring: sources → view store → admission → HTTPS server. Used by `serve` and by tests.

use crate::inflight::shared::SharedWorld;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::{info, warn};

use crate::admission::Admission;
use crate::config::{Config, LeaseRef};
use crate::inflight::world::World;
use crate::inventory::election::Candidate;
use crate::inventory::lease::SchedulerLease;
use crate::inventory::node_bands::NodeBands;
use crate::inventory::replicas::{Identity, Member, replicas_service, watch_replicas};
use crate::metrics_source::file::spawn_file_source;
use crate::metrics_source::prometheus::{PrometheusSource, spawn_refresher};
use crate::placement::Peers;
use crate::readiness::Readiness;
use crate::server::forward::Forwarder;
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
    pub world: Arc<SharedWorld>,
    pub metrics: Arc<Metrics>,
    pub tls: Arc<ServerTls>,
    membership: Option<Arc<Membership>>,
    stop: watch::Sender<bool>,
    server: JoinHandle<()>,
    background: Vec<JoinHandle<()>>,
}

/// Which optional parts to start.
#[derive(Debug, Clone)]
pub struct StartOptions {
    /// Look for a kube API (in-cluster or kubeconfig) for the node inventory and pod watch.
    pub use_cluster: bool,
    /// This replica's name and Service; `None`: read from the downward API when `use_cluster`.
    /// Given, the members can also be handed over with [`Running::publish_members`].
    pub identity: Option<Identity>,
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

    /// Takes `members` as the live replicas, as the EndpointSlice watch does on a change (for
    /// embedding and tests: without a cluster there is no watch). No-op without an identity.
    pub fn publish_members(&self, members: &[Member]) {
        if let Some(membership) = &self.membership {
            membership.publish(members);
        }
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
    let world = Arc::new(SharedWorld::new(World::for_config(&config)));
    let (stop, stopped) = watch::channel(false);
    let mut background = Vec::new();

    let source = match (&config.prometheus, &config.metrics_file) {
        (Some(prometheus), _) => {
            let source = Arc::new(PrometheusSource::new(prometheus.clone())?);
            background.push(spawn_refresher(
                source,
                store.clone(),
                world.clone(),
                metrics.clone(),
                config.max_staleness,
                wait_for(stopped.clone()),
            ));
            "prometheus"
        }
        (None, Some(path)) => {
            background.push(spawn_file_source(
                path.clone(),
                store.clone(),
                world.clone(),
                metrics.clone(),
                FILE_POLL,
            )?);
            "file"
        }
        (None, None) => {
            tracing::warn!(
                "no metrics source configured: every target pod is answered without a patch"
            );
            "none"
        }
    };
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

    let peers = Arc::new(Peers::default());
    let identity = options.identity.clone().or_else(|| {
        options
            .use_cluster
            .then(|| Identity::from_env(&config.service))
            .flatten()
    });
    if options.use_cluster && identity.is_none() {
        info!("POD_NAME or POD_NAMESPACE unset: deciding as a single replica");
    }
    let forwarder = match (&identity, config.forward.enabled, &config.client_ca) {
        // Forwarding only sharpens decisions: without it, this replica still serves.
        (Some(identity), true, None) => {
            match Forwarder::new(&identity.pod, &tls, config.forward.clone()) {
                Ok(forwarder) => Some(Arc::new(forwarder)),
                Err(error) => {
                    warn!(%error, "replicas do not forward reviews to each other");
                    None
                }
            }
        }
        (Some(_), true, Some(_)) => {
            info!("client certificates required: replicas do not forward reviews to each other");
            None
        }
        _ => None,
    };
    let candidate = identity.as_ref().and_then(|identity| {
        let address = std::env::var("POD_IP").ok().filter(|a| !a.is_empty());
        match (config.election.enabled, address) {
            (true, Some(address)) => Some(Candidate {
                identity: identity.clone(),
                address,
                port: config.listen.port(),
                settings: config.election.clone(),
            }),
            (true, None) => {
                info!("POD_IP unset: this replica does not stand for the deciding replica's Lease");
                None
            }
            (false, _) => None,
        }
    });
    let membership = identity
        .map(|identity| Arc::new(Membership::new(identity, peers.clone(), forwarder.clone())));
    // Routing by `spec.schedulerName` waits on the routed scheduler's Lease, which only a
    // cluster can tell.
    let lease = match (&config.scheduler_lease, config.mode.writes_scheduler_name()) {
        (Some(which), true) if options.use_cluster => {
            info!(lease = %which, scheduler = %config.scheduler_name,
                "pods are routed to the scheduler only while its lease is renewed");
            Some((which.clone(), Arc::new(SchedulerLease::of(which))))
        }
        (None, true) => {
            warn!(scheduler = %config.scheduler_name,
                "no scheduler lease known (scheduler_lease, or leaderElection in \
                 scheduler_config_file): pods are routed to the scheduler even while it is down");
            None
        }
        _ => None,
    };
    if options.use_cluster {
        background.push(spawn_cluster_watches(
            store.clone(),
            world.clone(),
            Watched {
                membership: membership.clone(),
                candidate,
                lease: lease.clone(),
                default_lease: config.default_scheduler_lease.clone(),
                heat_bands: config.placement.heat_bands.enabled.then(|| config.clone()),
            },
            readiness.clone(),
            metrics.clone(),
            stopped.clone(),
        ));
    }

    background.push(spawn_ledger_expiry(world.clone()));

    let listener = TcpListener::bind(config.listen)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", config.listen))?;
    let addr = listener.local_addr()?;
    let routed_lease = lease.as_ref().map(|(_, state)| state.clone());
    let admission =
        Admission::new(config.clone(), store.clone(), world.clone()).deciding_by(|decider| {
            let decider = decider.sharing_peers(peers);
            match routed_lease {
                Some(lease) => decider.routing_by(lease),
                None => decider,
            }
        });
    let mut state = AppState::new(admission, metrics.clone(), config.limits.clone())
        .with_readiness(readiness.clone());
    if let Some(forwarder) = forwarder {
        state = state.with_forwarder(forwarder);
    }
    let state = Arc::new(state);
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
        world,
        metrics,
        tls,
        membership,
        stop,
        server,
        background,
    })
}

/// Who this replica is, and what follows the replicas: the node partition its own decisions
/// use, and where it forwards the reviews that reach it while another replica decides.
struct Membership {
    identity: Identity,
    peers: Arc<Peers>,
    forwarder: Option<Arc<Forwarder>>,
    /// What the watches last said: the live replicas (`<service>-replicas`) and the members of
    /// the Service the apiserver calls (the deciding replica). `None` until listed.
    heard: std::sync::Mutex<Heard>,
}

#[derive(Default)]
struct Heard {
    live: Option<Vec<Member>>,
    serving: Option<Vec<Member>>,
}

impl Membership {
    fn new(identity: Identity, peers: Arc<Peers>, forwarder: Option<Arc<Forwarder>>) -> Self {
        Membership {
            identity,
            peers,
            forwarder,
            heard: std::sync::Mutex::default(),
        }
    }

    /// `members` as both lists at once, as where one Service selects every replica.
    fn publish(&self, members: &[Member]) {
        self.hear(|heard| {
            heard.live = Some(members.to_vec());
            heard.serving = Some(members.to_vec());
        });
    }

    fn publish_live(&self, members: &[Member]) {
        self.hear(|heard| heard.live = Some(members.to_vec()));
    }

    fn publish_serving(&self, members: &[Member]) {
        self.hear(|heard| heard.serving = Some(members.to_vec()));
    }

    fn hear(&self, update: impl FnOnce(&mut Heard)) {
        let mut heard = self.heard.lock().unwrap_or_else(|e| e.into_inner());
        update(&mut heard);
        // Until the Service's members are listed, nobody is known to decide.
        let Some(serving) = heard.serving.as_deref() else {
            return;
        };
        // The Service's one endpoint decides (the Lease's holder wrote it there). Where the
        // Service selects every replica, the lowest-named decides only while the others
        // forward to it.
        let decider = (self.forwarder.is_some() || serving.len() == 1)
            .then(|| Member::decider(serving))
            .flatten()
            .map(|d| d.name.as_str());
        let mut names: Vec<String> = (heard.live.iter().flatten())
            .chain(serving)
            .map(|m| m.name.clone())
            .collect();
        names.sort();
        names.dedup();
        self.peers.publish(&self.identity.pod, &names, decider);
        if let Some(forwarder) = &self.forwarder {
            forwarder.follow(serving);
        }
    }
}

/// Connects to the apiserver (retrying with backoff while a configured one does not answer),
/// then watches nodes and pods until shutdown. Without cluster configuration: nothing to do.
/// The optional watches: the replicas' EndpointSlices and the routed scheduler's Lease.
struct Watched {
    membership: Option<Arc<Membership>>,
    /// This replica standing for the deciding replica's Lease.
    candidate: Option<Candidate>,
    lease: Option<(LeaseRef, Arc<SchedulerLease>)>,
    /// The default scheduler's leader Lease: when its node list was taken.
    default_lease: Option<LeaseRef>,
    /// The config, when heat bands are kept on the nodes.
    heat_bands: Option<Arc<Config>>,
}

fn spawn_cluster_watches(
    store: Arc<ViewStore>,
    world: Arc<SharedWorld>,
    watched: Watched,
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
        let Watched {
            membership,
            candidate,
            lease,
            default_lease,
            heat_bands,
        } = watched;
        // The bands are read back beside the view, not into it.
        let on_nodes = (heat_bands.as_ref())
            .map(|config| Arc::new(NodeBands::new(&config.placement.heat_bands.key)));
        let heat_bands = {
            let keeper = heat_bands.zip(on_nodes.clone()).map(|(config, on_nodes)| {
                crate::bands::keeper::Keeper {
                    client: client.clone(),
                    config,
                    store: store.clone(),
                    world: world.clone(),
                    metrics: metrics.clone(),
                    peers: membership.as_ref().map(|m| m.peers.clone()),
                    on_nodes,
                }
            });
            let stopped = stopped.clone();
            async move {
                if let Some(keeper) = keeper {
                    keeper.run(wait_for(stopped)).await;
                }
            }
        };
        let lease = {
            let (client, stopped) = (client.clone(), stopped.clone());
            async move {
                if let Some((which, state)) = lease {
                    crate::inventory::lease::follow_routed(client, which, state, wait_for(stopped))
                        .await;
                }
            }
        };
        let default_lease = {
            let (client, stopped, store) = (client.clone(), stopped.clone(), store.clone());
            async move {
                if let Some(which) = default_lease {
                    crate::inventory::lease::follow_default(
                        client,
                        which,
                        wait_for(stopped),
                        move |since| store.publish_scheduler_since(since),
                    )
                    .await;
                }
            }
        };
        let replicas = {
            let (client, stopped) = (client.clone(), stopped.clone());
            async move {
                let Some(membership) = membership else {
                    return;
                };
                let Identity {
                    namespace, service, ..
                } = &membership.identity;
                let live = replicas_service(service);
                tokio::join!(
                    watch_replicas(
                        client.clone(),
                        namespace,
                        &live,
                        |members: &[Member]| membership.publish_live(members),
                        wait_for(stopped.clone()),
                    ),
                    watch_replicas(
                        client,
                        namespace,
                        service,
                        |members: &[Member]| membership.publish_serving(members),
                        wait_for(stopped),
                    ),
                );
            }
        };
        let election = {
            let (client, stopped) = (client.clone(), stopped.clone());
            async move {
                if let Some(candidate) = candidate {
                    crate::inventory::election::stand(client, candidate, wait_for(stopped)).await;
                }
            }
        };
        tokio::join!(
            replicas,
            election,
            heat_bands,
            lease,
            default_lease,
            crate::inventory::nodes::watch_nodes_leaving_out(
                client.clone(),
                store,
                readiness.clone(),
                on_nodes,
                wait_for(stopped.clone()),
            ),
            crate::inventory::namespaces::watch_namespaces(
                client.clone(),
                world.clone(),
                wait_for(stopped.clone()),
            ),
            crate::inventory::pods::watch_pods(
                client,
                world,
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

fn spawn_ledger_expiry(world: Arc<SharedWorld>) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tick.tick().await;
            world.write().charges.expire(Instant::now());
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ForwardConfig;

    fn membership(me: &str, forwarding: bool) -> Membership {
        crate::install_crypto_provider();
        let tls = ServerTls::new(CertSource::SelfSigned, None).expect("self-signed TLS");
        Membership::new(
            Identity {
                pod: me.into(),
                namespace: "placement-webhook".into(),
                service: "placement-webhook".into(),
            },
            Arc::default(),
            forwarding.then(|| {
                Arc::new(Forwarder::new(me, &tls, ForwardConfig::default()).expect("forwarder"))
            }),
        )
    }

    fn members() -> Vec<Member> {
        ["webhook-a", "webhook-b"]
            .iter()
            .enumerate()
            .map(|(i, name)| Member {
                name: (*name).into(),
                url: Some(format!("https://10.0.0.{}:8443", i + 1)),
            })
            .collect()
    }

    #[test]
    fn the_decider_decides_as_one_replica_and_the_others_keep_their_share_for_fallbacks() {
        let decider = membership("webhook-a", true);
        // Until the members are listed, no replica knows whether it decides; listed and none
        // ready yet, each writes as if alone.
        assert!(!decider.peers.known());
        decider.publish(&[]);
        assert!(decider.peers.known());
        assert!(!decider.peers.defers_to_another());
        decider.publish(&members());
        assert!(decider.peers.known());
        assert!(decider.peers.set().is_none());
        assert!(decider.peers.alone());
        assert!(decider.forwarder.as_ref().is_some_and(|f| f.decides_here()));

        let other = membership("webhook-b", true);
        other.publish(&members());
        let set = other
            .peers
            .set()
            .expect("a partition for its own decisions");
        assert!(!other.peers.alone());
        assert_eq!(set.members(), ["webhook-a", "webhook-b"]);
        assert!(other.forwarder.as_ref().is_some_and(|f| !f.decides_here()));
        // The decider alone writes the heat bands.
        assert!(!decider.peers.defers_to_another());
        assert!(other.peers.defers_to_another());

        // Without forwarding, every replica partitions the nodes, the lowest-named too.
        let alone = membership("webhook-a", false);
        alone.publish(&members());
        assert!(alone.peers.set().is_some());
        assert!(!alone.peers.alone());
        // With no decider, the lowest-named replica alone writes the bands.
        assert!(!alone.peers.defers_to_another());
        let second = membership("webhook-b", false);
        second.publish(&members());
        assert!(second.peers.defers_to_another());
    }

    #[test]
    fn the_replica_the_service_names_decides_and_the_live_others_forward_to_it() {
        // The Lease's holder, webhook-b, is the Service's one endpoint; both are live.
        let serving = vec![members()[1].clone()];
        let holder = membership("webhook-b", true);
        holder.publish_live(&members());
        assert!(
            !holder.peers.known(),
            "known before the Service's members are listed"
        );
        holder.publish_serving(&serving);
        assert!(holder.peers.alone());
        assert!(holder.forwarder.as_ref().is_some_and(|f| f.decides_here()));
        assert!(!holder.peers.defers_to_another());

        let standby = membership("webhook-a", true);
        standby.publish_serving(&serving);
        standby.publish_live(&members());
        assert!(!standby.peers.alone());
        assert!(
            standby
                .forwarder
                .as_ref()
                .is_some_and(|f| !f.decides_here())
        );
        assert!(standby.peers.defers_to_another(), "two band writers");
        let set = standby.peers.set().expect("a share for its own decisions");
        assert_eq!(set.members(), ["webhook-a", "webhook-b"]);

        // Without forwarding the holder still decides as one: the Service sends it every review.
        let unforwarded = membership("webhook-b", false);
        unforwarded.publish_live(&members());
        unforwarded.publish_serving(&serving);
        assert!(unforwarded.peers.alone());
    }
}
