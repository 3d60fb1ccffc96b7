//! The Node watch: turns kube Nodes into [`NodeFacts`] and publishes the [`Inventory`].

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client};
use tokio::time::Instant;
use tracing::{debug, info};

use super::client::WatchHealth;
use super::node_bands::NodeBands;
use super::{Inventory, NodeFacts};
use crate::readiness::Readiness;
use crate::scheduler::cores::parse_cpu_cores;
use crate::snapshot::Taint;
use crate::view::ViewStore;

/// Node status heartbeats change objects often; the view is rebuilt at most this often.
pub(crate) const PUBLISH_INTERVAL: Duration = Duration::from_secs(1);

/// The facts the placement code needs from one Node, keyed by its name.
pub fn node_facts(node: &Node) -> (String, NodeFacts) {
    let name = node.metadata.name.clone().unwrap_or_default();
    let labels = node.metadata.labels.clone().unwrap_or_default();
    let spec = node.spec.as_ref();
    let taints = spec
        .and_then(|s| s.taints.as_deref())
        .unwrap_or_default()
        .iter()
        .map(|t| Taint {
            key: t.key.clone(),
            value: t.value.clone().filter(|v| !v.is_empty()),
            effect: t.effect.clone(),
        })
        .collect();
    let unschedulable = spec.and_then(|s| s.unschedulable).unwrap_or(false);
    let status = node.status.as_ref();
    // No Ready condition (a node still registering) counts as not ready, like the scheduler does.
    let ready = status
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default()
        .iter()
        .any(|c| c.type_ == "Ready" && c.status == "True");
    let allocatable_cpu_cores = status
        .and_then(|s| s.allocatable.as_ref())
        .and_then(|a| a.get("cpu"))
        .and_then(|q| parse_cpu_cores(&q.0));
    let allocatable = status
        .and_then(|s| s.allocatable.as_ref())
        .map(crate::scheduler::Resources::from_list)
        .unwrap_or_default();
    let internal_ip = status
        .and_then(|s| s.addresses.as_deref())
        .unwrap_or_default()
        .iter()
        .find(|a| a.type_ == "InternalIP")
        .map(|a| a.address.clone());
    let created = node
        .metadata
        .creation_timestamp
        .as_ref()
        .map(|t| std::time::SystemTime::from(t.0));
    (
        name,
        NodeFacts {
            labels: labels.into(),
            taints,
            unschedulable,
            ready,
            allocatable_cpu_cores,
            allocatable,
            internal_ip,
            created,
            arrival: 0,
            seen_joining: false,
        },
    )
}

/// Every node in the reflector's store.
pub fn inventory_from(nodes: &[Arc<Node>]) -> Inventory {
    Inventory {
        nodes: nodes.iter().map(|n| node_facts(n)).collect(),
    }
}

/// The order nodes arrived in, by uid: what [`NodeFacts::arrival`] and
/// [`NodeFacts::seen_joining`] hold.
#[derive(Debug, Default)]
struct Arrivals {
    next: u64,
    by_uid: crate::hashing::HashMap<String, (u64, bool)>,
}

impl Arrivals {
    /// A node listed or watched (`joining`: delivered by a watch event, as it joined):
    /// numbered the first time its uid is seen (a relist keeps the numbers of the nodes it
    /// lists again).
    fn saw(&mut self, node: &Node, joining: bool) {
        if let Some(uid) = &node.metadata.uid
            && !self.by_uid.contains_key(uid)
        {
            self.by_uid.insert(uid.clone(), (self.next, joining));
            self.next += 1;
        }
    }

    fn gone(&mut self, node: &Node) {
        if let Some(uid) = &node.metadata.uid {
            self.by_uid.remove(uid);
        }
    }

    /// Forgets nodes no longer listed (deleted while the watch was re-listing).
    fn keep_only(&mut self, nodes: &[Arc<Node>]) {
        if self.by_uid.len() > nodes.len() {
            let listed: std::collections::HashSet<&str> = nodes
                .iter()
                .filter_map(|n| n.metadata.uid.as_deref())
                .collect();
            self.by_uid.retain(|uid, _| listed.contains(uid.as_str()));
        }
    }

    /// The node's number, and whether it was seen joining.
    fn of(&self, node: &Node) -> (u64, bool) {
        node.metadata
            .uid
            .as_ref()
            .and_then(|uid| self.by_uid.get(uid))
            .copied()
            .unwrap_or((u64::MAX, false))
    }
}

/// Watches all Nodes and publishes the inventory to `store` until `shutdown` completes.
///
/// Watch errors are retried with backoff; meanwhile the last published inventory keeps
/// serving. Publishing is throttled to one per [`PUBLISH_INTERVAL`] and skipped when nothing
/// the placement code reads has changed (most node updates are status heartbeats). The first
/// publication, after the first complete list, marks the node list synced in `readiness`.
#[tracing::instrument(name = "node_watch", skip_all, fields(resource = "nodes"))]
pub async fn watch_nodes(
    client: Client,
    store: Arc<ViewStore>,
    readiness: Arc<Readiness>,
    shutdown: impl Future<Output = ()> + Send,
) {
    watch_nodes_leaving_out(client, store, readiness, None, shutdown).await;
}

/// [`watch_nodes`], the heat band label taken off every node and read into `bands` instead:
/// in the view, each relabel would change the inventory and rebuild the view of every node
/// once a second through a burst (at 5,000 nodes reviews then took past the apiserver's
/// timeout); beside it, the keeper reads back what is on the nodes.
pub(crate) async fn watch_nodes_leaving_out(
    client: Client,
    store: Arc<ViewStore>,
    readiness: Arc<Readiness>,
    bands: Option<Arc<NodeBands>>,
    shutdown: impl Future<Output = ()> + Send,
) {
    let (reader, writer) = reflector::store::<Node>();
    let events = watcher::watcher(Api::<Node>::all(client), watcher::Config::default())
        .default_backoff()
        .reflect(writer);
    let mut events = std::pin::pin!(events);
    let mut shutdown = std::pin::pin!(shutdown);
    let mut health = WatchHealth::default();
    let mut publisher = Publisher {
        bands,
        ..Publisher::default()
    };

    loop {
        let deadline = publisher.due();
        tokio::select! {
            () = &mut shutdown => {
                debug!("node watch stopped");
                return;
            }
            () = sleep_until_opt(deadline) => {
                // Only due after InitDone: the inventory now holds a complete list.
                publisher.publish(&reader, &store);
                readiness.set_nodes_synced();
            }
            event = events.next() => match event {
                Some(Ok(event)) => {
                    health.ok("node");
                    // Marks the store dirty; the deadline branch publishes, now or when the
                    // interval since the last publication has passed.
                    publisher.note(&event);
                }
                Some(Err(error)) => health.failed("node", &error),
                None => {
                    // The watcher stream never ends on its own; keep serving what we have.
                    info!("node watch ended");
                    return;
                }
            },
        }
    }
}

async fn sleep_until_opt(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Leading- and trailing-edge throttle for inventory publication.
#[derive(Default)]
struct Publisher {
    /// The store has been filled by a complete list at least once.
    ready: bool,
    /// The store changed since the last publication.
    dirty: bool,
    last_publish: Option<Instant>,
    last: Option<Inventory>,
    arrivals: Arrivals,
    /// The heat bands, read off every node into a store of their own (see
    /// [`watch_nodes_leaving_out`]).
    bands: Option<Arc<NodeBands>>,
}

impl Publisher {
    /// Records an event that the reflector has already applied to its store.
    fn note(&mut self, event: &Event<Node>) {
        let bands = self.bands.as_deref();
        match event {
            // The reflector swaps its buffer in only at InitDone: the store is untouched before.
            Event::Init => {}
            Event::InitApply(node) => {
                self.arrivals.saw(node, false);
                bands.inspect(|b| b.saw(node));
            }
            Event::InitDone => {
                self.ready = true;
                self.dirty = true;
            }
            // Only after a complete list: a node first seen here was created since.
            Event::Apply(node) => {
                self.arrivals.saw(node, true);
                bands.inspect(|b| b.saw(node));
                self.dirty = true;
            }
            Event::Delete(node) => {
                self.arrivals.gone(node);
                bands.inspect(|b| b.gone(node));
                self.dirty = true;
            }
        }
    }

    /// The earliest moment the next publication may happen.
    fn earliest(&self) -> Instant {
        self.last_publish
            .map_or_else(Instant::now, |t| t + PUBLISH_INTERVAL)
    }

    /// When to publish next, if there is anything to publish.
    fn due(&self) -> Option<Instant> {
        (self.ready && self.dirty).then(|| self.earliest())
    }

    fn publish(&mut self, reader: &Store<Node>, store: &ViewStore) {
        self.dirty = false;
        self.last_publish = Some(Instant::now());
        let nodes = reader.state();
        self.arrivals.keep_only(&nodes);
        if let Some(bands) = &self.bands {
            bands.keep_only(nodes.iter().filter_map(|n| n.metadata.name.as_deref()));
            bands.set_listed();
        }
        let left_out = self.bands.as_deref().map(NodeBands::key);
        let inventory = Inventory {
            nodes: nodes
                .iter()
                .map(|node| {
                    let (name, mut facts) = node_facts(node);
                    if let Some(key) = left_out
                        && facts.labels.contains_key(key)
                    {
                        Arc::make_mut(&mut facts.labels).remove(key);
                    }
                    let (arrival, seen_joining) = self.arrivals.of(node);
                    let facts = NodeFacts {
                        arrival,
                        seen_joining,
                        ..facts
                    };
                    (name, facts)
                })
                .collect(),
        };
        if self.last.as_ref() == Some(&inventory) {
            return;
        }
        info!(nodes = inventory.nodes.len(), "publishing node inventory");
        store.publish_inventory(inventory.clone());
        self.last = Some(inventory);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture() -> Vec<Node> {
        let text = include_str!("../../tests/fixtures/apiserver/nodes-list.json");
        let list: serde_json::Value = serde_json::from_str(text).unwrap();
        serde_json::from_value(list["items"].clone()).unwrap()
    }

    fn facts(name: &str) -> NodeFacts {
        let nodes = fixture();
        let node = nodes
            .iter()
            .find(|n| n.metadata.name.as_deref() == Some(name))
            .unwrap();
        let (n, f) = node_facts(node);
        assert_eq!(n, name);
        f
    }

    #[test]
    fn ready_node() {
        let f = facts("worker-1");
        assert!(f.ready);
        assert!(!f.unschedulable);
        assert!(f.taints.is_empty());
        assert_eq!(f.allocatable_cpu_cores, Some(3.5));
        assert_eq!(f.internal_ip.as_deref(), Some("10.0.1.11"));
        assert_eq!(
            f.labels.get("kubernetes.io/hostname").map(String::as_str),
            Some("worker-1")
        );
        assert_eq!(f.labels.get("pool").map(String::as_str), Some("flink"));
    }

    #[test]
    fn cordoned_node() {
        let f = facts("worker-2");
        assert!(f.ready);
        assert!(f.unschedulable);
        assert_eq!(
            f.taints,
            vec![Taint {
                key: "node.kubernetes.io/unschedulable".into(),
                value: None,
                effect: "NoSchedule".into(),
            }]
        );
        assert_eq!(f.allocatable_cpu_cores, Some(4.0));
    }

    #[test]
    fn not_ready_node() {
        let f = facts("worker-3");
        assert!(!f.ready);
        assert!(!f.unschedulable);
        let effects: Vec<&str> = f.taints.iter().map(|t| t.effect.as_str()).collect();
        assert_eq!(effects, ["NoSchedule", "NoExecute"]);
        assert_eq!(f.allocatable_cpu_cores, Some(1.5));
    }

    #[test]
    fn tainted_node() {
        let f = facts("gpu-1");
        assert!(f.ready);
        assert_eq!(
            f.taints,
            vec![Taint {
                key: "dedicated".into(),
                value: Some("gpu".into()),
                effect: "NoSchedule".into(),
            }]
        );
        assert_eq!(f.internal_ip.as_deref(), Some("10.0.2.21"));
    }

    #[test]
    fn bare_node_has_safe_defaults() {
        let node: Node =
            serde_json::from_value(serde_json::json!({"metadata": {"name": "new"}})).unwrap();
        let (name, f) = node_facts(&node);
        assert_eq!(name, "new");
        assert!(!f.ready, "no Ready condition yet: not ready");
        assert_eq!(f.allocatable_cpu_cores, None);
        assert_eq!(f.internal_ip, None);
    }

    #[test]
    fn publication_waits_for_a_full_list_then_is_throttled() {
        let node = fixture().remove(0);
        let mut p = Publisher::default();
        p.note(&Event::Init);
        p.note(&Event::InitApply(node.clone()));
        assert_eq!(p.due(), None, "store not filled yet");
        p.note(&Event::InitDone);
        let due = p.due().unwrap();
        assert!(due <= Instant::now(), "first publication is immediate");
        let published = Instant::now();
        p.dirty = false;
        p.last_publish = Some(published);
        assert_eq!(p.due(), None, "nothing new");
        p.note(&Event::Apply(node));
        assert_eq!(p.due(), Some(published + PUBLISH_INTERVAL));
    }

    #[test]
    fn the_band_is_off_every_node_in_the_view_read_back_beside_it_and_its_moves_publish_nothing() {
        const BAND: &str = "placement-webhook.io/heat-band";
        let (reader, mut writer) = kube::runtime::reflector::store::<Node>();
        let mut node = fixture().remove(0);
        let band = |node: &mut Node, value: &str| {
            (node.metadata.labels.get_or_insert_default()).insert(BAND.into(), value.into());
        };
        band(&mut node, "3");
        let bands = Arc::new(NodeBands::new(BAND));
        let mut publisher = Publisher {
            bands: Some(bands.clone()),
            ..Publisher::default()
        };
        for event in [Event::Init, Event::InitApply(node.clone()), Event::InitDone] {
            writer.apply_watcher_event(&event);
            publisher.note(&event);
        }
        let store = ViewStore::new(crate::config::PlacementConfig::default());
        let name = node.metadata.name.clone().unwrap_or_default();
        assert!(!bands.listed(), "listed once published");
        publisher.publish(&reader, &store);
        assert!(bands.listed());
        assert_eq!(bands.read(|b| b.get(&name).copied()), Some(3));
        let first = store.inventory().expect("published");
        assert!(
            first
                .nodes
                .iter()
                .all(|(_, f)| !f.labels.contains_key(BAND))
        );
        assert!(first.nodes.iter().any(|(_, f)| !f.labels.is_empty()));
        band(&mut node, "4");
        let moved = Event::Apply(node);
        writer.apply_watcher_event(&moved);
        publisher.note(&moved);
        assert_eq!(bands.read(|b| b.get(&name).copied()), Some(4), "read back");
        publisher.publish(&reader, &store);
        let second = store.inventory().expect("published");
        assert!(
            Arc::ptr_eq(&first, &second),
            "a band moved: nothing to publish"
        );
    }

    #[test]
    fn inventory_holds_every_node() {
        let nodes: Vec<Arc<Node>> = fixture().into_iter().map(Arc::new).collect();
        let inv = inventory_from(&nodes);
        assert_eq!(inv.nodes.len(), nodes.len());
        assert_eq!(
            inv.node_by_internal_ip()
                .get("10.0.1.11")
                .map(String::as_str),
            Some("worker-1")
        );
    }

    /// Nodes are numbered in the order the watch delivered them first: the list's order, then
    /// watch events; a relist keeps the numbers, a node created again under the same name gets
    /// a new one. Only those a watch event delivered first were seen joining.
    #[test]
    fn arrival_is_the_order_nodes_were_first_delivered_in() {
        let node = |name: &str, uid: &str| -> Arc<Node> {
            Arc::new(
                serde_json::from_value(serde_json::json!({
                    "metadata": {"name": name, "uid": uid}
                }))
                .unwrap(),
            )
        };
        let (a, b, c) = (node("a", "1"), node("b", "2"), node("c", "3"));
        let mut p = Publisher::default();
        p.note(&Event::Init);
        p.note(&Event::InitApply((*b).clone()));
        p.note(&Event::InitApply((*a).clone()));
        p.note(&Event::InitDone);
        p.note(&Event::Apply((*c).clone()));
        assert_eq!(
            [&a, &b, &c].map(|n| p.arrivals.of(n)),
            [(1, false), (0, false), (2, true)],
            "list order, then watch order"
        );
        p.note(&Event::Init);
        p.note(&Event::InitApply((*c).clone()));
        p.note(&Event::InitApply((*a).clone()));
        p.note(&Event::InitDone);
        p.arrivals.keep_only(&[a.clone(), c.clone()]);
        assert_eq!(
            [&a, &c].map(|n| p.arrivals.of(n)),
            [(1, false), (2, true)],
            "kept by a relist"
        );
        assert_eq!(p.arrivals.of(&b), (u64::MAX, false), "gone while relisting");
        p.note(&Event::Delete((*a).clone()));
        let again = node("a", "4");
        p.note(&Event::Apply((*again).clone()));
        assert_eq!(
            p.arrivals.of(&again),
            (3, true),
            "created again: joins last"
        );
        // Created while the watch was down: its order among nodes of its second is not known.
        let d = node("d", "5");
        p.note(&Event::Init);
        p.note(&Event::InitApply((*d).clone()));
        p.note(&Event::InitDone);
        assert_eq!(p.arrivals.of(&d), (4, false), "first seen in a relist");
    }
}
