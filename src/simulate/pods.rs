//! The pods besides the one being placed: the burst's own pods (names, uids) and the pods the
//! scheduler model sees while it places them, those already running in the cluster and the
//! burst's pods bound so far, for PodTopologySpread and InterPodAffinity.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use super::Cluster;
use crate::scheduler::cycle::{PodFacts, PodFilters, filter_with};
use crate::scheduler::pod_affinity::affinity_scores;
use crate::scheduler::pods::Labels;
use crate::scheduler::topology_spread::spread_scores;
use crate::scheduler::{ClusterPods, Cycle, ExistingPod, ModelNode, Scheduler};

/// The pods bound so far, as the scheduler's snapshot holds them.
#[derive(Debug, Clone)]
pub(super) struct PodsInView<'c> {
    pods: Vec<ExistingPod>,
    namespace_labels: &'c BTreeMap<String, Labels>,
}

impl<'c> PodsInView<'c> {
    /// The cluster's running pods, before the burst.
    pub(crate) fn new(cluster: &'c Cluster) -> Self {
        PodsInView {
            pods: cluster.existing_pods(),
            namespace_labels: cluster.namespace_labels(),
        }
    }

    /// A burst pod bound to node `node` (an index into the cluster's nodes).
    pub(crate) fn bind(&mut self, pod: &Pod, node: usize) {
        self.pods.push(ExistingPod::of(pod, node));
    }

    pub(crate) fn cluster_pods(&self) -> ClusterPods<'_> {
        ClusterPods::new(&self.pods, self.namespace_labels)
    }

    /// One scheduling cycle with these pods in view.
    pub(crate) fn schedule(
        &self,
        scheduler: &mut Scheduler,
        facts: &PodFacts<'_>,
        nodes: &[ModelNode],
    ) -> Cycle {
        scheduler.schedule_with(facts, nodes, &self.cluster_pods())
    }

    /// Indexes of the nodes every modelled filter accepts for the pod, those that look at
    /// these pods included (spread DoNotSchedule, required pod (anti-)affinity both ways).
    pub(crate) fn feasible(&self, facts: &PodFacts<'_>, nodes: &[ModelNode]) -> Vec<usize> {
        let cluster = self.cluster_pods();
        let others = PodFilters::new(facts, nodes, &cluster);
        (0..nodes.len())
            .filter(|&k| filter_with(facts, &nodes[k], &others).is_ok())
            .collect()
    }

    /// Of `feasible`, the nodes PodTopologySpread's `ScheduleAnyway` constraints and preferred
    /// pod (anti-)affinity score best: ideal water-filling honours what the pod asks for as
    /// the scheduler will (at weight 2 these scores outweigh the resource scores), so the bound
    /// is one the scheduler can reach. All of them when the pod asks for nothing of the kind.
    pub(crate) fn best_scored(
        &self,
        facts: &PodFacts<'_>,
        nodes: &[ModelNode],
        feasible: Vec<usize>,
    ) -> Vec<usize> {
        let cluster = self.cluster_pods();
        let spread = spread_scores(facts, nodes, &feasible, &cluster);
        let inter_pod = affinity_scores(facts, nodes, &feasible, &cluster);
        if spread.is_none() && inter_pod.is_none() {
            return feasible;
        }
        let total: Vec<i64> = (0..feasible.len())
            .map(|j| spread.as_ref().map_or(0, |s| s[j]) + inter_pod.as_ref().map_or(0, |s| s[j]))
            .collect();
        let best = total.iter().copied().max().unwrap_or(0);
        feasible
            .into_iter()
            .zip(total)
            .filter(|&(_, t)| t == best)
            .map(|(k, _)| k)
            .collect()
    }
}

pub(super) fn pod_of(value: &Value) -> Option<Pod> {
    serde_json::from_value(value.clone()).ok()
}

/// The `index`-th pod of the burst: a distinct name and uid, created now.
pub(super) fn nth_pod(template: &Value, index: usize) -> Value {
    let mut pod = template.clone();
    let base = template["metadata"]["name"]
        .as_str()
        .unwrap_or("taskmanager")
        .to_string();
    pod["metadata"]["name"] = json!(format!("{base}-{}", index + 1));
    pod["metadata"]["uid"] = json!(uid(index));
    pod
}

/// A uuid-shaped uid per pod.
pub(super) fn uid(index: usize) -> String {
    let mut z = (index as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    format!(
        "{:08x}-{:04x}-4{:03x}-9{:03x}-{:012x}",
        z >> 32,
        (z >> 16) & 0xffff,
        z & 0xfff,
        index & 0xfff,
        index
    )
}
