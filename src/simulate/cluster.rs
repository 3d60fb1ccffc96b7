//! The cluster a burst lands on, as both sides see it: the snapshot the webhook reads, and the
//! nodes the scheduler model places on, in the order the scheduler cache lists them, and the
//! pods already running on them.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;

use super::Burst;
use crate::config::Config;
use crate::config::scheduler::ListedNodeOrder;
use crate::scheduler::cycle::{PodFacts, PodFilters, filter_with};
use crate::scheduler::order::{listed_by_name, scheduler_order, zone_key};
use crate::scheduler::pods::Labels;
use crate::scheduler::{ClusterPods, ExistingPod, ModelNode, Resources, Scheduler, Unfit};
use crate::snapshot::LoadSnapshot;

/// The cluster as both sides see it: the snapshot the webhook reads, and the nodes the
/// scheduler model places on (allocatable and requests from the same snapshot).
#[derive(Debug, Clone)]
pub struct Cluster {
    pub(crate) snapshot: LoadSnapshot,
    pub(crate) nodes: Vec<ModelNode>,
    /// Real capacity for the load arithmetic.
    pub(crate) cores: Vec<f64>,
    pub(crate) nic: Vec<Option<f64>>,
    /// The nodes that joined after the scheduler started (indexes into `nodes`, in the order
    /// they joined): the end of their zones in its order.
    late: Vec<usize>,
    /// The scheduler holds the nodes it listed at its start in name order, whatever the
    /// webhook takes their order to be (see [`Cluster::with_listed_in_name_order`]).
    listed_in_name_order: bool,
    /// Pods already running, with the index of their node; their requests are in `nodes`.
    pods: Vec<(Pod, usize)>,
    namespace_labels: BTreeMap<String, Labels>,
}

impl Cluster {
    pub fn new(snapshot: LoadSnapshot, config: &Config) -> Self {
        let mut nodes = Vec::with_capacity(snapshot.nodes.len());
        let mut cores = Vec::with_capacity(snapshot.nodes.len());
        let mut nic = Vec::with_capacity(snapshot.nodes.len());
        for n in &snapshot.nodes {
            let node_cores = n
                .cpu_capacity_cores
                .unwrap_or(config.placement.default_node_cpu_cores);
            let mut allocatable = quantities(&n.allocatable);
            if allocatable.milli_cpu == 0 {
                allocatable.milli_cpu = (node_cores * 1000.0) as i64;
            }
            if allocatable.memory == 0 {
                // Unknown memory: nothing the burst would exhaust.
                allocatable.memory = 1 << 50;
            }
            if allocatable.pods == 0 {
                allocatable.pods = 110;
            }
            let mut model = ModelNode::new(&n.name, n.labels.clone(), allocatable);
            model.taints = n.taints.clone();
            model.unschedulable = n.unschedulable;
            let requested = quantities(&n.requested);
            model.non_zero_milli_cpu = requested.milli_cpu;
            model.non_zero_memory = requested.memory;
            model.requested = requested;
            nodes.push(model);
            cores.push(node_cores);
            nic.push(n.network_capacity_bytes_per_second);
        }
        Cluster {
            snapshot,
            nodes,
            cores,
            nic,
            late: Vec::new(),
            listed_in_name_order: false,
            pods: Vec::new(),
            namespace_labels: BTreeMap::new(),
        }
    }

    /// The same cluster where the nodes `late` (indexes, in the order they joined) were added
    /// after the scheduler started: they sit at the end of their zones in its order.
    pub fn with_late_joiners(mut self, late: &[usize]) -> Self {
        self.late = late.to_vec();
        self
    }

    /// The same cluster where the scheduler holds the nodes it listed at its start in name
    /// order, even where its release (`scheduler.listed_node_order: unknown`) has the webhook
    /// take each of them to be anywhere: nodes that joined in name order, so that nodes of
    /// like load that joined together sit together in the order, unknown to the webhook.
    pub(crate) fn with_listed_in_name_order(mut self) -> Self {
        self.listed_in_name_order = true;
        self
    }

    /// The same cluster later in a day: its nodes read as `snapshot` has them (the same
    /// nodes), and `pods` bound since besides those running at the start.
    pub(crate) fn later(&self, snapshot: LoadSnapshot, pods: Vec<Pod>, config: &Config) -> Cluster {
        let mut later = Cluster::new(snapshot, config);
        later.late = self.late.clone();
        later.listed_in_name_order = self.listed_in_name_order;
        later.namespace_labels = self.namespace_labels.clone();
        let running = self.pods.iter().map(|(pod, _)| pod.clone());
        later.with_pods(running.chain(pods).collect())
    }

    /// The same cluster with `pods` already running: bound pods (`spec.nodeName` set) with
    /// their namespace and labels. Their requests count on their nodes (the snapshot's
    /// `requested` is taken to leave them out, as a pod watch would add them); their real load
    /// is the snapshot's. A pod without a node, or on a node the snapshot lacks, is left out.
    pub(crate) fn with_pods(mut self, pods: Vec<Pod>) -> Self {
        let index: std::collections::HashMap<&str, usize> = self
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.name.as_str(), i))
            .collect();
        let placed: Vec<(Pod, usize)> = pods
            .into_iter()
            .filter_map(|pod| {
                let node = pod.spec.as_ref()?.node_name.as_deref()?;
                let k = *index.get(node)?;
                Some((pod, k))
            })
            .collect();
        for (pod, k) in &placed {
            self.nodes[*k].add_pod(&crate::scheduler::PodRequests::of(pod));
        }
        self.pods.extend(placed);
        self
    }

    #[cfg(test)]
    /// The same cluster with these namespace labels (for `namespaceSelector`).
    pub(crate) fn with_namespace_labels(mut self, labels: BTreeMap<String, Labels>) -> Self {
        self.namespace_labels = labels;
        self
    }

    /// The pods already running, each with the index of its node in `nodes`.
    pub(crate) fn bound_pods(&self) -> impl Iterator<Item = (&Pod, usize)> {
        self.pods.iter().map(|(pod, k)| (pod, *k))
    }

    /// The pods already running as the scheduler model sees them.
    pub(crate) fn existing_pods(&self) -> Vec<ExistingPod> {
        self.bound_pods()
            .map(|(pod, k)| ExistingPod::of(pod, k))
            .collect()
    }

    pub(crate) fn namespace_labels(&self) -> &BTreeMap<String, Labels> {
        &self.namespace_labels
    }

    /// The scheduler cache's listing order (indexes into `nodes`) for the scheduler of `seed`:
    /// the nodes it listed at its start in name order, or, as a v1.35+ scheduler holds them,
    /// in an order of the seed's own (unless [`Cluster::with_listed_in_name_order`]); then
    /// those that joined later.
    fn scheduler_order(&self, listed_order: ListedNodeOrder, seed: u64) -> Vec<usize> {
        let names: Vec<&str> = self.nodes.iter().map(|n| n.name.as_str()).collect();
        let zones: Vec<String> = self.nodes.iter().map(|n| zone_key(&n.labels)).collect();
        let mut listed = listed_by_name(&names, &self.late);
        if listed_order == ListedNodeOrder::Unknown && !self.listed_in_name_order {
            fastrand::Rng::with_seed(seed).shuffle(&mut listed);
        }
        scheduler_order(&zones, listed, &self.late)
    }

    /// The scheduler as it runs over this cluster: its order, and a start somewhere in it.
    pub(super) fn scheduler(&self, config: &Config, seed: u64) -> Scheduler {
        let n = self.nodes.len().max(1) as u64;
        let start = (seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 11) % n;
        let order = self.scheduler_order(config.scheduler.listed_node_order, seed);
        Scheduler::new(config.scheduler.clone(), seed)
            .with_order(order)
            .starting_at(start as usize)
    }

    /// Real CPU busy fraction of node `i` with `pods` burst pods on it.
    pub(crate) fn cpu_after(&self, i: usize, pods: usize, burst: &Burst) -> f64 {
        self.snapshot.nodes[i].cpu + pods as f64 * burst.cpu_cores / self.cores[i]
    }

    /// NIC use of node `i` with `pods` burst pods on it, when its capacity is known.
    pub(crate) fn nic_after(&self, i: usize, pods: usize, burst: &Burst) -> Option<f64> {
        let bytes = self.snapshot.nodes[i]
            .network_bytes_per_second
            .unwrap_or(0.0)
            + pods as f64 * burst.network_bytes_per_second;
        self.nic[i].map(|cap| bytes / cap)
    }

    /// Per node, why the scheduler's filters reject the burst's pod before the burst (cordoned,
    /// tainted, not selected, full by requests, spread, pod affinity against the running pods);
    /// `None`: the node can take it. The same filters decide where the other methods may
    /// place, ideal water-filling included.
    pub(crate) fn unfit(&self, burst: &Burst) -> Vec<Option<Unfit>> {
        let Some(pod) = super::pod_of(&burst.pod) else {
            return vec![None; self.nodes.len()];
        };
        let facts = PodFacts::of(&pod);
        let existing = self.existing_pods();
        let cluster = ClusterPods::new(&existing, &self.namespace_labels);
        let others = PodFilters::new(&facts, &self.nodes, &cluster);
        self.nodes
            .iter()
            .map(|node| filter_with(&facts, node, &others).err())
            .collect()
    }

    /// max(CPU, NIC) of node `i` with `pods` burst pods on it.
    pub(crate) fn bottleneck(&self, i: usize, pods: usize, burst: &Burst) -> f64 {
        let cpu = self.cpu_after(i, pods, burst);
        self.nic_after(i, pods, burst).map_or(cpu, |n| cpu.max(n))
    }
}

fn quantities(list: &std::collections::BTreeMap<String, String>) -> Resources {
    let mut out = Resources::default();
    for (name, q) in list {
        if let Some(v) = crate::scheduler::quantity::amount(name, q) {
            *out.slot(name) += v;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::NodeLoad;
    use serde_json::json;

    fn pod(name: &str, node: Option<&str>, cpu: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "batch", "labels": {"app": "noisy"}},
            "spec": {"nodeName": node, "containers": [
                {"name": "main", "resources": {"requests": {"cpu": cpu}}}
            ]}
        }))
        .expect("pod")
    }

    #[test]
    fn running_pods_count_on_their_nodes_only() {
        let snapshot = LoadSnapshot {
            window_samples: Default::default(),
            nodes: vec![NodeLoad::new("a", 0.1), NodeLoad::new("b", 0.2)],
            ..LoadSnapshot::default()
        };
        let cluster = Cluster::new(snapshot, &Config::default()).with_pods(vec![
            pod("on-b", Some("b"), "1500m"),
            pod("pending", None, "1"),
            pod("gone", Some("c"), "1"),
        ]);
        assert_eq!(cluster.nodes[0].requested.milli_cpu, 0);
        assert_eq!(cluster.nodes[1].requested.milli_cpu, 1500);
        assert_eq!(cluster.nodes[1].requested.pods, 1);
        let existing = cluster.existing_pods();
        assert_eq!(
            existing.len(),
            1,
            "no node, or one the snapshot lacks: left out"
        );
        assert_eq!(existing[0].node, 1);
        assert_eq!(&*existing[0].group.namespace, "batch");
    }

    #[test]
    fn listed_nodes_sit_in_name_order_only_when_told() {
        // One zone, so the order is the listed nodes' order itself.
        let names: Vec<String> = (0..40).map(|i| format!("node-{i:02}")).collect();
        let snapshot = LoadSnapshot {
            window_samples: Default::default(),
            nodes: names.iter().map(|n| NodeLoad::new(n, 0.5)).collect(),
            ..LoadSnapshot::default()
        };
        let config = Config::default();
        assert_eq!(config.scheduler.listed_node_order, ListedNodeOrder::Unknown);
        let by_name: Vec<usize> = (0..names.len()).collect();
        let shuffled = Cluster::new(snapshot.clone(), &config)
            .scheduler_order(config.scheduler.listed_node_order, 7);
        assert_ne!(shuffled, by_name, "an order of the seed's own");
        let told = Cluster::new(snapshot, &config).with_listed_in_name_order();
        for seed in [1, 7, 99] {
            assert_eq!(
                told.scheduler_order(config.scheduler.listed_node_order, seed),
                by_name
            );
        }
        let later = told.later(told.snapshot.clone(), Vec::new(), &config);
        assert_eq!(
            later.scheduler_order(config.scheduler.listed_node_order, 7),
            by_name
        );
    }
}
