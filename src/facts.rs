//! What the kube API says about nodes: the facts the scheduler filters on. Data only: the
//! node watch (`inventory::nodes`) produces it, the view reads it.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::hashing::HashMap;

use crate::snapshot::Taint;

/// One node as the inventory knows it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NodeFacts {
    /// Shared with the view built from it (see `ModelNode::labels`).
    pub labels: Arc<BTreeMap<String, String>>,
    pub taints: Vec<Taint>,
    pub unschedulable: bool,
    /// The Ready condition is True.
    pub ready: bool,
    /// Allocatable CPU in cores.
    pub allocatable_cpu_cores: Option<f64>,
    /// Everything allocatable, in the scheduler's units.
    pub allocatable: crate::scheduler::Resources,
    pub internal_ip: Option<String>,
    /// `metadata.creationTimestamp` (whole seconds).
    pub created: Option<std::time::SystemTime>,
    /// The order the node watch first delivered the node in: its first list in name order,
    /// then watch events in the apiserver's order, which is the order the scheduler's own
    /// informer delivers them in. Orders nodes created within the same second.
    pub arrival: u64,
    /// The watch delivered the node as it joined (an event after a complete list), so
    /// `arrival` is the order it joined in; a node first seen in a list was numbered in name
    /// order, which says nothing of its order among nodes created in the same second.
    pub seen_joining: bool,
}

/// Every node the kube API reported, by name.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Inventory {
    pub nodes: HashMap<String, NodeFacts>,
}

impl Inventory {
    /// InternalIP → node name, for mapping Prometheus `instance` hosts to nodes.
    pub(crate) fn node_by_internal_ip(&self) -> HashMap<String, String> {
        self.nodes
            .iter()
            .filter_map(|(name, facts)| Some((facts.internal_ip.clone()?, name.clone())))
            .collect()
    }
}
