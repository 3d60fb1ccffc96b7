//! The cluster as the watches report it: the requests of every bound pod (the occupancy), their
//! labels and pod (anti-)affinity terms (the groups), the running TaskManagers by job, and every
//! namespace's labels. Fed by inventory's pod and namespace watches; read by placement through
//! `inflight::world::World`, which holds one picture beside the ledger's charges (one lock guards
//! both, and the view's node positions are numbered for both at once).

pub(crate) mod changes;
mod interner;
pub(crate) mod occupancy;
pub(crate) mod pod_groups;
pub(crate) mod running;
mod since;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;

use crate::scheduler::PodRequests;
use crate::scheduler::pods::Labels;
use occupancy::Occupancy;
use pod_groups::PodGroups;
use running::RunningPods;

/// What the watch read from one pod event, for [`ClusterPicture::record_pod`].
pub(crate) struct SeenPod<'a> {
    /// The key the occupancy counts the pod under.
    pub(crate) uid: &'a str,
    /// The node whose requests it occupies: bound, not finished, not deleted.
    pub(crate) node: Option<&'a str>,
    pub(crate) requests: &'a PodRequests,
    pub(crate) deleted: bool,
    /// It carries a decision note.
    pub(crate) steered: bool,
}

/// The watches' picture of the cluster's pods and namespaces.
#[derive(Debug, Clone, Default)]
pub struct ClusterPicture {
    /// Requests of every bound pod.
    pub occupancy: Occupancy,
    /// Running TaskManagers by job.
    pub running: RunningPods,
    /// Labels and pod (anti-)affinity terms of every bound pod.
    pub groups: PodGroups,
    /// Every namespace's labels (for `namespaceSelector`).
    namespace_labels: BTreeMap<String, Labels>,
    /// Bumped whenever `namespace_labels` changes.
    namespace_version: u64,
}

impl ClusterPicture {
    /// Records one pod the watch reported: its requests on the node it occupies (`node`: none
    /// once deleted or finished), its labels and terms in the groups, and, for a TaskManager,
    /// whether it runs. The occupancy keeps each pod's group number and the groups count pods
    /// by it: this is the one place that moves both.
    pub(crate) fn record_pod(&mut self, pod: &Pod, seen: SeenPod<'_>) {
        let SeenPod {
            uid,
            node,
            requests,
            deleted,
            steered,
        } = seen;
        let number = node.map(|n| self.occupancy.number(n));
        // The pod leaves the group it was in.
        let was = self.occupancy.grouped(uid);
        let group = self.groups.set(was, number, pod);
        self.occupancy.set_grouped(uid, node, requests, group);
        self.running.update(pod, deleted, steered);
    }

    /// The pod watch lists every pod again (at start, and when a watch cannot resume).
    pub(crate) fn begin_relist(&mut self) {
        self.occupancy.begin_relist();
    }

    /// A pod list is complete: pods it did not mention are dropped, their labels with them.
    pub(crate) fn end_relist(&mut self) {
        let groups = &mut self.groups;
        self.occupancy
            .end_relist_with(|node, group| groups.release(node, group));
    }

    /// Every namespace's labels, from the namespace watch.
    pub(crate) fn namespace_labels(&self) -> &BTreeMap<String, Labels> {
        &self.namespace_labels
    }

    pub(crate) fn set_namespace_labels(&mut self, labels: BTreeMap<String, Labels>) {
        if self.namespace_labels != labels {
            self.namespace_labels = labels;
            self.namespace_version += 1;
        }
    }

    /// Bumped whenever the namespaces' labels change.
    pub(crate) fn namespace_version(&self) -> u64 {
        self.namespace_version
    }
}
