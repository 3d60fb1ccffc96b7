//! Keeps the heat bands on the nodes: after each change of the world (a charge, a pod the
//! watch heard) or of the view (a refresh), the nodes whose band moved are relabelled. Only
//! the deciding replica writes while the others forward their reviews to it. Off the
//! admission path: a review never waits on a node write, and a write that fails is tried
//! again at the next change.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::{StreamExt, stream};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use tracing::{debug, info, warn};

use super::{BandBook, Relabel};
use crate::config::Config;
use crate::inflight::shared::SharedWorld;
use crate::placement::Peers;
use crate::telemetry::Metrics;
use crate::view::ViewStore;

/// How often the world's write count and the view are looked at: a burst charges a pod every
/// few milliseconds, and a band is worth moving before the scheduler binds the next pods.
const LOOK_EVERY: Duration = Duration::from_millis(20);
/// Node writes in flight at once.
const WRITES_AT_ONCE: usize = 16;
/// After the apiserver refuses a write (no RBAC for it): how long before trying again.
const REFUSED_PAUSE: Duration = Duration::from_secs(60);
/// The field manager the writes are made as.
const MANAGER: &str = "placement-webhook";

/// What the keeper reads and reports to.
pub(crate) struct Keeper {
    pub(crate) client: Client,
    pub(crate) config: Arc<Config>,
    pub(crate) store: Arc<ViewStore>,
    pub(crate) world: Arc<SharedWorld>,
    pub(crate) metrics: Arc<Metrics>,
    /// The replicas: while another one decides, it alone writes the bands (two writers, each
    /// from its own charges, would relabel a node back and forth).
    pub(crate) peers: Option<Arc<Peers>>,
}

/// What became of one write.
enum Written {
    Done,
    /// The node is gone.
    Gone,
    Refused,
    Failed,
}

impl Keeper {
    /// Runs until `shutdown` completes.
    #[tracing::instrument(name = "heat_bands", skip_all, fields(key = %self.config.placement.heat_bands.key))]
    pub(crate) async fn run(self, shutdown: impl Future<Output = ()> + Send) {
        let nodes = Api::<Node>::all(self.client.clone());
        let mut book = BandBook::default();
        let mut seen = None;
        let mut shutdown = std::pin::pin!(shutdown);
        info!("keeping heat bands on the nodes");
        loop {
            tokio::select! {
                () = &mut shutdown => return,
                () = tokio::time::sleep(LOOK_EVERY) => {}
            }
            if self.peers.as_ref().is_some_and(|p| p.defers_to_another()) {
                // What this replica wrote may have been moved since: once it writes again
                // (the decider gone), every node is looked at afresh.
                book = BandBook::default();
                seen = None;
                continue;
            }
            let Some(view) = self.store.current() else {
                continue;
            };
            let now = (view.id, self.world.writes());
            if seen == Some(now) {
                continue;
            }
            let changes = {
                let world = self.world.read();
                book.changes(&view, &world, &self.config.placement)
            };
            seen = Some(now);
            if changes.is_empty() {
                continue;
            }
            let results: Vec<(Relabel, Written)> = stream::iter(changes)
                .map(|change| self.write(&nodes, change))
                .buffer_unordered(WRITES_AT_ONCE)
                .collect()
                .await;
            let mut refused = false;
            for (change, written) in results {
                let result = match written {
                    Written::Done => "written",
                    Written::Gone => "gone",
                    Written::Refused => "refused",
                    Written::Failed => "failed",
                };
                self.metrics.heat_band_writes(result);
                if !matches!(written, Written::Done) {
                    book.forget(&change.node);
                    // Looked at again at the next tick, changed world or not.
                    seen = None;
                }
                refused |= matches!(written, Written::Refused);
            }
            if refused {
                warn!(
                    pause_secs = REFUSED_PAUSE.as_secs(),
                    "the apiserver refused a node label write: is the webhook's RBAC for heat \
                     bands installed (deploy/heat-bands)?"
                );
                tokio::select! {
                    () = &mut shutdown => return,
                    () = tokio::time::sleep(REFUSED_PAUSE) => {}
                }
            }
        }
    }

    async fn write(&self, nodes: &Api<Node>, change: Relabel) -> (Relabel, Written) {
        let key = &self.config.placement.heat_bands.key;
        let patch = serde_json::json!({"metadata": {"labels": {key: change.band.to_string()}}});
        let params = PatchParams {
            field_manager: Some(MANAGER.into()),
            ..PatchParams::default()
        };
        let written = match nodes
            .patch(&change.node, &params, &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {
                debug!(node = %change.node, band = change.band, "relabelled");
                Written::Done
            }
            Err(kube::Error::Api(status)) if status.is_not_found() => Written::Gone,
            Err(kube::Error::Api(status)) if status.is_forbidden() || status.code == 422 => {
                debug!(node = %change.node, code = status.code, message = %status.message, "refused");
                Written::Refused
            }
            Err(error) => {
                debug!(node = %change.node, %error, "write failed");
                Written::Failed
            }
        };
        (change, written)
    }
}
