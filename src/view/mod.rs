//! The immutable cluster view handlers read, swapped whole when a source publishes.
//!
//! Handlers never wait on Prometheus or the kube API: they load an `Arc<ClusterView>`.

pub(crate) mod heat;
pub(crate) mod memo;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use arc_swap::ArcSwapOption;
// Looked up for every in-flight node on every decision (see inflight::ledger).
use crate::hashing::HashMap;

use crate::cluster::occupancy::NodeRequests;
use crate::config::PlacementConfig;
use crate::facts::Inventory;
use crate::jobs::JobKey;
use crate::scheduler::{ModelNode, Resources};
use crate::snapshot::LoadSnapshot;
use crate::view::heat::{Load, NodeScale};

/// One candidate node: the scheduler model's node (name, labels, taints, cordon, allocatable;
/// read through `Deref`, and by the model itself as it is) with its readings and what the view
/// knows besides.
#[derive(Debug, Clone)]
pub struct NodeView {
    /// As the scheduler model reads it: its requests are left empty (the pod watch's and the
    /// ledger's are added per decision, see `placement::rank::standing`).
    pub(crate) node: ModelNode,
    /// Measured load, as fractions.
    pub(crate) load: Load,
    pub scale: NodeScale,
    /// Heat of the measured load alone (no in-flight pods).
    pub(crate) base_heat: f64,
    /// Hot on the measured load alone.
    pub(crate) base_hot: bool,
    pub(crate) ready: bool,
    /// The model node's `allocatable` is not empty (when it is, requests do not limit the node,
    /// as far as the webhook can tell).
    pub(crate) allocatable_known: bool,
    /// Requests on the node known without the pod watch (the snapshot file's `requested`).
    pub(crate) base_requested: NodeRequests,
    /// When the node was created and the order the node watch delivered it in (see
    /// [`crate::facts::NodeFacts`]); `None` and 0 without an inventory.
    pub created: Option<SystemTime>,
    pub(crate) arrival: u64,
    pub(crate) seen_joining: bool,
}

impl std::ops::Deref for NodeView {
    type Target = ModelNode;

    fn deref(&self) -> &ModelNode {
        &self.node
    }
}

impl AsRef<ModelNode> for NodeView {
    fn as_ref(&self) -> &ModelNode {
        &self.node
    }
}

/// All nodes with readings, sorted coolest first by `base_heat`. Built once and then only
/// read (not `Clone`: a changed copy would share the id): what is computed from it is
/// memoised under its `id`.
#[derive(Debug, Default)]
pub struct ClusterView {
    /// Unique per built view: tables aligned with `nodes` (the ledger's node numbers) are
    /// valid for the view of this id only.
    pub id: u64,
    pub(crate) taken_at: Option<SystemTime>,
    pub nodes: Vec<NodeView>,
    index: HashMap<String, usize>,
    /// Indexes into `nodes` of the nodes hot on measured load, hottest first.
    pub hot_nodes: Vec<usize>,
    /// Nodes the inventory knows that have no readings: never preferred.
    pub(crate) nodes_without_metrics: usize,
    /// Measured load of the running pods of each job.
    pub(crate) jobs: HashMap<JobKey, Vec<SiblingLoad>>,
    /// Node lists computed once per pod shape (see `placement::eligible_nodes`).
    pub(crate) memo: memo::NodeListMemo,
    /// When the default scheduler's node list was taken (its leader's Lease, see
    /// `inventory::lease`): nodes created later were appended to their zone in the order they
    /// joined; those before it were listed in name order. `None`: every node in name order.
    pub scheduler_since: Option<SystemTime>,
}

/// One running pod of a job, as measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct SiblingLoad {
    pub(crate) cpu_cores: f64,
    pub(crate) network_bytes_per_second: Option<f64>,
    /// How long it had been running when measured; `None` when unknown.
    pub(crate) running_secs: Option<f64>,
}

fn jobs_of(snapshot: &LoadSnapshot) -> HashMap<JobKey, Vec<SiblingLoad>> {
    let mut jobs: HashMap<JobKey, Vec<SiblingLoad>> = HashMap::default();
    for pod in &snapshot.pods {
        if let Some(job) = pod.job() {
            jobs.entry(job).or_default().push(SiblingLoad {
                cpu_cores: pod.cpu_cores,
                network_bytes_per_second: pod.network_bytes_per_second,
                running_secs: pod.running_secs,
            });
        }
    }
    jobs
}

fn requests_from(list: &BTreeMap<String, String>) -> Resources {
    let mut out = Resources::default();
    for (name, q) in list {
        if let Some(v) = crate::scheduler::quantity::amount(name, q) {
            *out.slot(name) += v;
        }
    }
    out
}

impl ClusterView {
    /// Joins readings with the inventory (when there is one). Only nodes with readings are
    /// candidates; where the inventory knows a node, its facts win over the snapshot's.
    pub fn build(
        snapshot: &LoadSnapshot,
        inventory: Option<&Inventory>,
        policy: &PlacementConfig,
    ) -> Self {
        let busiest_network = snapshot
            .nodes
            .iter()
            .filter_map(|n| n.network_bytes_per_second)
            .fold(0.0_f64, f64::max);
        let mut nodes: Vec<NodeView> = snapshot
            .nodes
            .iter()
            .filter_map(|n| {
                let facts = match inventory {
                    Some(inv) => Some(inv.nodes.get(&n.name)?),
                    None => None,
                };
                let scale = NodeScale {
                    cpu_cores: facts
                        .and_then(|f| f.allocatable_cpu_cores)
                        .or(n.cpu_capacity_cores)
                        .unwrap_or(policy.default_node_cpu_cores),
                    network_bytes_per_second: n
                        .network_capacity_bytes_per_second
                        .unwrap_or(busiest_network),
                    network_is_capacity: n.network_capacity_bytes_per_second.is_some(),
                };
                let load = Load {
                    cpu: n.cpu,
                    network_bytes_per_second: n.network_bytes_per_second.unwrap_or(0.0),
                    memory: n.memory.unwrap_or(0.0),
                };
                let (labels, taints, unschedulable, ready) = match facts {
                    Some(f) => (f.labels.clone(), &f.taints, f.unschedulable, f.ready),
                    None => (n.labels.clone(), &n.taints, n.unschedulable, n.ready),
                };
                let allocatable = match facts {
                    Some(f) if f.allocatable != Resources::default() => f.allocatable.clone(),
                    _ => requests_from(&n.allocatable),
                };
                // The snapshot's requests stand in for the pod watch only without a cluster.
                let requested = requests_from(&n.requested);
                let base_requested = NodeRequests {
                    non_zero_milli_cpu: requested.milli_cpu,
                    non_zero_memory: requested.memory,
                    requested,
                };
                let allocatable_known = allocatable != Resources::default();
                Some(NodeView {
                    node: ModelNode {
                        taints: taints.clone(),
                        unschedulable,
                        ..ModelNode::new(&n.name, labels, allocatable)
                    },
                    base_hot: crate::view::heat::is_hot(&load, &scale, &policy.hot),
                    base_heat: crate::view::heat::heat(&load, &scale, &policy.weights),
                    load,
                    scale,
                    ready,
                    allocatable_known,
                    base_requested: if inventory.is_some() {
                        NodeRequests::default()
                    } else {
                        base_requested
                    },
                    created: facts.and_then(|f| f.created),
                    arrival: facts.map_or(0, |f| f.arrival),
                    seen_joining: facts.is_some_and(|f| f.seen_joining),
                })
            })
            .collect();
        nodes.sort_by(|a, b| {
            a.base_heat
                .total_cmp(&b.base_heat)
                .then_with(|| a.name.cmp(&b.name))
        });
        nodes.dedup_by(|a, b| a.name == b.name);
        let index = nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.name.clone(), i))
            .collect();
        let nodes_without_metrics = inventory.map_or(0, |inv| {
            inv.nodes
                .keys()
                .filter(|name| !snapshot.nodes.iter().any(|n| &n.name == *name))
                .count()
        });
        let hot_nodes = (0..nodes.len())
            .rev()
            .filter(|&i| nodes[i].base_hot)
            .collect();
        ClusterView {
            id: memo::next_view_id(),
            taken_at: snapshot.taken_at,
            nodes,
            index,
            hot_nodes,
            nodes_without_metrics,
            jobs: jobs_of(snapshot),
            memo: memo::NodeListMemo::default(),
            scheduler_since: None,
        }
    }

    /// The view, with the time the default scheduler listed its nodes (see
    /// [`ClusterView::scheduler_since`]).
    pub(crate) fn with_scheduler_since(self, since: Option<SystemTime>) -> Self {
        ClusterView {
            scheduler_since: since,
            ..self
        }
    }

    pub fn node(&self, name: &str) -> Option<&NodeView> {
        self.index.get(name).map(|&i| &self.nodes[i])
    }

    pub(crate) fn age(&self, now: SystemTime) -> std::time::Duration {
        self.taken_at
            .and_then(|t| now.duration_since(t).ok())
            .unwrap_or_default()
    }
}

/// Holds the latest snapshot and inventory and the view built from them.
pub struct ViewStore {
    policy: PlacementConfig,
    view: ArcSwapOption<ClusterView>,
    sources: Mutex<Sources>,
}

#[derive(Default)]
struct Sources {
    snapshot: Option<Arc<LoadSnapshot>>,
    inventory: Option<Arc<Inventory>>,
    scheduler_since: Option<SystemTime>,
}

impl ViewStore {
    pub fn new(policy: PlacementConfig) -> Self {
        ViewStore {
            policy,
            view: ArcSwapOption::empty(),
            sources: Mutex::new(Sources::default()),
        }
    }

    /// The view handlers use; `None` until the first snapshot arrives.
    pub fn current(&self) -> Option<Arc<ClusterView>> {
        self.view.load_full()
    }

    pub(crate) fn snapshot(&self) -> Option<Arc<LoadSnapshot>> {
        self.lock().snapshot.clone()
    }

    pub fn inventory(&self) -> Option<Arc<Inventory>> {
        self.lock().inventory.clone()
    }

    pub fn publish_snapshot(&self, snapshot: LoadSnapshot) {
        let mut sources = self.lock();
        sources.snapshot = Some(Arc::new(snapshot));
        self.rebuild(&sources);
    }

    pub(crate) fn publish_inventory(&self, inventory: Inventory) {
        let mut sources = self.lock();
        sources.inventory = Some(Arc::new(inventory));
        self.rebuild(&sources);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Sources> {
        // A panic while holding this lock leaves plain data behind: keep using it.
        self.sources.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// When the default scheduler's leader took its node list (its Lease's `acquireTime`).
    pub fn publish_scheduler_since(&self, since: Option<SystemTime>) {
        let mut sources = self.lock();
        if sources.scheduler_since != since {
            sources.scheduler_since = since;
            self.rebuild(&sources);
        }
    }

    fn rebuild(&self, sources: &Sources) {
        if let Some(snapshot) = &sources.snapshot {
            let view = ClusterView::build(snapshot, sources.inventory.as_deref(), &self.policy)
                .with_scheduler_since(sources.scheduler_since);
            self.view.store(Some(Arc::new(view)));
        }
    }
}
