//! Keeps the heat bands on the nodes: after each change of the world (a charge, a pod the
//! watch heard), of the view (a refresh) or of the labels read back, the nodes whose label is
//! not their band are relabelled, the most harmful first, within the write cap and the
//! backoffs of [`super::pace`]. Only the deciding replica writes while the others forward their
//! reviews to it; it reconciles against the labels the node watch reads back, so a replica
//! that takes over or restarts writes only the nodes whose band is wrong. Off the admission
//! path: a review never waits on a node write.

use std::future::Future;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use futures::{StreamExt, stream};
use http_body_util::BodyExt;
use kube::Client;
use kube::api::{Patch, PatchParams};
use tokio::time::Instant;
use tracing::{debug, info, warn};

use super::pace::{Answer, Pace};
use super::{BandBook, Relabel};
use crate::config::Config;
use crate::hashing::HashMap;
use crate::inflight::shared::SharedWorld;
use crate::inventory::node_bands::NodeBands;
use crate::placement::Peers;
use crate::telemetry::Metrics;
use crate::view::ViewStore;

/// How often the world's write count, the view and the labels read back are looked at: a
/// burst charges a pod every few milliseconds, and a band is worth moving before the
/// scheduler binds the next pods.
const LOOK_EVERY: Duration = Duration::from_millis(20);
/// Every node is looked at this often even when nothing seems to have changed: a write whose
/// read-back never came is checked against what the watch shows.
const LOOK_AT_ALL_EVERY: Duration = Duration::from_secs(5);
/// Node writes in flight at once.
const WRITES_AT_ONCE: usize = 16;
/// A write that has not answered by then is taken to have failed (and backs off).
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// After the apiserver refuses a write (no RBAC for it, or the policy): how long before trying
/// again.
const REFUSED_PAUSE: Duration = Duration::from_secs(60);
/// How long a replica that watches its peers waits to learn them before it writes as if
/// alone (their EndpointSlices unreadable, say): the decider's labels must not be overwritten
/// by a replica that has not yet heard it is not the decider.
const MEMBERSHIP_GRACE: Duration = Duration::from_secs(30);
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
    /// The labels as the node watch reads them back.
    pub(crate) on_nodes: Arc<NodeBands>,
}

/// What became of one write.
enum Written {
    Done,
    /// The node is gone.
    Gone,
    Refused,
    /// The apiserver answered 429, with its Retry-After when it gave one.
    TooMany(Option<Duration>),
    /// A 5xx, a timeout, no connection.
    Failed,
    /// Not sent: another replica writes the bands now.
    Deferred,
}

impl Keeper {
    /// Runs until `shutdown` completes.
    #[tracing::instrument(name = "heat_bands", skip_all, fields(key = %self.config.placement.heat_bands.key))]
    pub(crate) async fn run(self, shutdown: impl Future<Output = ()> + Send) {
        let bands = &self.config.placement.heat_bands;
        let mut pace =
            Pace::new(NonZeroU32::new(bands.writes_per_second).unwrap_or(NonZeroU32::MIN));
        let mut book = BandBook::default();
        // Since when each node's label has been wrong and not yet written.
        let mut wanted_since: HashMap<String, Instant> = HashMap::default();
        let mut seen = None;
        let mut looked_at_all = Instant::now();
        let mut shutdown = std::pin::pin!(shutdown);
        let started = Instant::now();
        info!(
            writes_per_second = bands.writes_per_second,
            "keeping heat bands on the nodes"
        );
        loop {
            tokio::select! {
                () = &mut shutdown => return,
                () = tokio::time::sleep(LOOK_EVERY) => {}
            }
            if self.defers(started) {
                // What this replica wrote may be moved meanwhile: once it writes again (the
                // decider gone), it starts from what the nodes carry.
                book = BandBook::default();
                wanted_since.clear();
                seen = None;
                self.metrics.heat_bands.left(0, 0.0);
                continue;
            }
            let Some(view) = self.store.current() else {
                continue;
            };
            if !self.on_nodes.listed() {
                continue;
            }
            if !super::needed(&view, &self.config.scheduler) {
                // Every node scored: nothing to grade; once the cluster is sampled, every node
                // whose label is not its band is written, as at install.
                self.metrics.heat_bands.left(0, 0.0);
                continue;
            }
            let now = Instant::now();
            let state = (view.id, self.world.writes(), self.on_nodes.version());
            if seen == Some(state)
                && wanted_since.is_empty()
                && now.duration_since(looked_at_all) < LOOK_AT_ALL_EVERY
            {
                continue;
            }
            seen = Some(state);
            looked_at_all = now;
            let changes = {
                let world = self.world.read();
                self.on_nodes.read(|on_nodes| {
                    book.changes(
                        &view,
                        &world,
                        &self.config.placement,
                        on_nodes,
                        now.into_std(),
                    )
                })
            };
            let wanted: crate::hashing::HashSet<&str> =
                changes.iter().map(|c| c.node.as_str()).collect();
            wanted_since.retain(|node, _| wanted.contains(node.as_str()));
            pace.keep_only(|node| wanted.contains(node));
            let paused = pace.paused(now);
            let mut batch = Vec::new();
            for change in changes {
                wanted_since.entry(change.node.clone()).or_insert(now);
                if paused || pace.waits(&change.node, now) || !pace.take() {
                    // Looked at again next time, from what the node carries then.
                    book.forget(&change.node);
                } else {
                    batch.push(change);
                }
            }
            let refused = self
                .send(batch, &mut book, &mut pace, &mut wanted_since)
                .await;
            let oldest = wanted_since
                .values()
                .map(|since| now.duration_since(*since).as_secs_f64())
                .fold(0.0, f64::max);
            self.metrics.heat_bands.left(wanted_since.len(), oldest);
            if refused {
                warn!(
                    pause_secs = REFUSED_PAUSE.as_secs(),
                    "the apiserver refused a node label write: are the webhook's node patch \
                     right and the heat bands policy installed as shipped?"
                );
                tokio::select! {
                    () = &mut shutdown => return,
                    () = tokio::time::sleep(REFUSED_PAUSE) => {}
                }
            }
        }
    }

    /// Sends `batch`, a few at a time, and records each answer; true when one was refused.
    async fn send(
        &self,
        batch: Vec<Relabel>,
        book: &mut BandBook,
        pace: &mut Pace,
        wanted_since: &mut HashMap<String, Instant>,
    ) -> bool {
        if batch.is_empty() {
            return false;
        }
        let results: Vec<(Relabel, Written)> = stream::iter(batch)
            .map(|change| self.write(change))
            .buffer_unordered(WRITES_AT_ONCE)
            .collect()
            .await;
        let now = Instant::now();
        let mut refused = false;
        for (change, written) in results {
            let (result, answer) = match written {
                Written::Done => (Some("written"), Some(Answer::Written)),
                Written::Gone => (Some("gone"), None),
                Written::Refused => (Some("refused"), None),
                Written::TooMany(asked) => (Some("throttled"), Some(Answer::TooMany(asked))),
                Written::Failed => (Some("failed"), Some(Answer::Failed)),
                Written::Deferred => (None, None),
            };
            if let Some(result) = result {
                self.metrics.heat_bands.wrote(result);
            }
            if let Some(answer) = answer {
                pace.answered(&change.node, answer, now);
            }
            match written {
                Written::Done | Written::Gone => {
                    wanted_since.remove(&change.node);
                }
                _ => book.forget(&change.node),
            }
            refused |= matches!(written, Written::Refused);
        }
        refused
    }

    /// Another replica writes the bands, or may: the peers are watched but not known yet.
    fn defers(&self, started: Instant) -> bool {
        self.peers.as_ref().is_some_and(|peers| {
            peers.defers_to_another() || (!peers.known() && started.elapsed() < MEMBERSHIP_GRACE)
        })
    }

    async fn write(&self, change: Relabel) -> (Relabel, Written) {
        // A round of writes takes a while: the decider may have become known meanwhile.
        if self.peers.as_ref().is_some_and(|p| p.defers_to_another()) {
            return (change, Written::Deferred);
        }
        let key = &self.config.placement.heat_bands.key;
        // A merge patch's null removes the label.
        let value = change.band.map(|band| band.to_string());
        let patch = serde_json::json!({"metadata": {"labels": {key: value}}});
        let params = PatchParams {
            field_manager: Some(MANAGER.into()),
            ..PatchParams::default()
        };
        let request = match kube::core::Request::new("/api/v1/nodes").patch(
            &change.node,
            &params,
            &Patch::Merge(&patch),
        ) {
            Ok(request) => request.map(kube::client::Body::from),
            Err(error) => {
                debug!(node = %change.node, %error, "no request for the node");
                return (change, Written::Failed);
            }
        };
        // Sent raw rather than through `Api::patch`, which drops the Retry-After header a 429
        // carries (API Priority and Fairness answers in plain text, not a Status).
        let response = match tokio::time::timeout(WRITE_TIMEOUT, self.client.send(request)).await {
            Ok(Ok(response)) => response,
            Ok(Err(error)) => {
                debug!(node = %change.node, %error, "write failed");
                return (change, Written::Failed);
            }
            Err(_) => {
                debug!(node = %change.node, "write timed out");
                return (change, Written::Failed);
            }
        };
        let status = response.status();
        let retry_after = response
            .headers()
            .get(http::header::RETRY_AFTER)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        // Read to its end so that the connection serves the next write.
        let _ = response.into_body().collect().await;
        let written = match status.as_u16() {
            200..=299 => {
                debug!(node = %change.node, band = ?change.band, "relabelled");
                Written::Done
            }
            404 => Written::Gone,
            403 | 422 => {
                debug!(node = %change.node, code = status.as_u16(), "refused");
                Written::Refused
            }
            429 => Written::TooMany(retry_after),
            code => {
                debug!(node = %change.node, code, "write failed");
                Written::Failed
            }
        };
        (change, written)
    }
}
