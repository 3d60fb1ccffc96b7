//! The labels and pod (anti-)affinity terms of every bound pod, for the scheduler's plugins that
//! look at other pods (PodTopologySpread, InterPodAffinity).
//!
//! Pods of one workload share their namespace, labels and terms: they are one [`PodGroup`],
//! interned and numbered, and each group counts its pods per node. A 150,000-pod cluster costs
//! a group number per pod (in the occupancy's entry for it) plus one group per distinct label
//! set.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

use super::changes::ChangeLog;
use super::occupancy::NO_GROUP;
#[cfg(doc)]
use super::occupancy::Occupancy;
use crate::hashing::HashMap;
use crate::scheduler::pods::Labels;

use crate::scheduler::pods::PodGroup;

#[derive(Debug, Default, Clone)]
struct GroupSlot {
    /// `None`: a free slot, its number kept in `PodGroups::free`.
    group: Option<Arc<PodGroup>>,
    pods: u32,
    /// Pods on each node, by occupancy node number, sorted by it: a group's pods sit on a few
    /// nodes, and a short sorted list costs a fraction of a hash map.
    on_node: Vec<(u32, u32)>,
}

/// A group gained (`delta` 1) or lost (-1) a pod on the node numbered `node` (by the
/// occupancy's numbers for bound pods, the ledger's for pending ones).
#[derive(Debug, Clone)]
pub(crate) struct GroupChange {
    pub(crate) group: Arc<PodGroup>,
    pub(crate) node: u32,
    pub(crate) delta: i32,
}

/// Bound pods by group and node. Which group each pod is in is kept by the occupancy, which
/// has room for the number in its entry for the pod (see [`Occupancy::set_grouped`]): no map
/// per pod here.
#[derive(Debug, Default, Clone)]
pub struct PodGroups {
    /// Groups by number; a pod names its group by that number, 4 bytes rather than a pointer.
    slots: Vec<GroupSlot>,
    /// Numbers of the free slots, reused first.
    free: Vec<u32>,
    /// The number of each group that has pods.
    ids: HashMap<Arc<PodGroup>, u32>,
    /// Bound pods in all groups.
    pods: usize,
    /// The groups with required anti-affinity: every new pod is checked against them, and
    /// they are few (usually none), so they are kept apart from the thousands of others.
    required_anti_affinity: Vec<Arc<PodGroup>>,
    /// Pods gained and lost, group by group, for readers that keep sums over the groups.
    changes: ChangeLog<GroupChange>,
}

impl PodGroups {
    /// The shared copy of `group` (kept only while a bound pod is in it).
    pub(crate) fn intern(&self, group: PodGroup) -> Arc<PodGroup> {
        match self.ids.get_key_value(&group) {
            Some((shared, _)) => shared.clone(),
            None => Arc::new(group),
        }
    }

    /// `pod` is bound to the node numbered `node` (`None`: not bound, finished or deleted);
    /// `was`: the node number and group number it was counted under, if it was. Returns its
    /// group number now ([`NO_GROUP`] when not bound), for the occupancy to keep.
    pub(crate) fn set(&mut self, was: Option<(u32, u32)>, node: Option<u32>, pod: &Pod) -> u32 {
        let Some(node) = node else {
            if let Some((at, id)) = was {
                self.release(at, id);
            }
            return NO_GROUP;
        };
        if let Some((at, id)) = was {
            if at == node
                && self.group(id).is_some_and(|group| {
                    group.labels.as_ref() == pod.metadata.labels.as_ref().unwrap_or(&Labels::new())
                })
            {
                return id;
            }
            self.release(at, id);
        }
        let id = self.number(PodGroup::of(pod));
        let Some(slot) = self.slots.get_mut(id as usize) else {
            return NO_GROUP;
        };
        slot.pods += 1;
        self.pods += 1;
        match slot.on_node.binary_search_by_key(&node, |&(n, _)| n) {
            Ok(i) => slot.on_node[i].1 += 1,
            Err(i) => slot.on_node.insert(i, (node, 1)),
        }
        if let Some(group) = &slot.group {
            self.changes.record(GroupChange {
                group: group.clone(),
                node,
                delta: 1,
            });
        }
        id
    }

    fn group(&self, id: u32) -> Option<&Arc<PodGroup>> {
        self.slots.get(id as usize)?.group.as_ref()
    }

    /// The number of `group`, given a slot on first sight (with no pods yet).
    fn number(&mut self, group: PodGroup) -> u32 {
        if let Some(&id) = self.ids.get(&group) {
            return id;
        }
        let group = Arc::new(group);
        if group.has_required_anti_affinity() {
            self.required_anti_affinity.push(group.clone());
        }
        let slot = GroupSlot {
            group: Some(group.clone()),
            pods: 0,
            on_node: Vec::new(),
        };
        let id = match self.free.pop() {
            Some(id) => {
                self.slots[id as usize] = slot;
                id
            }
            None => {
                self.slots.push(slot);
                u32::try_from(self.slots.len() - 1).unwrap_or(NO_GROUP)
            }
        };
        self.ids.insert(group, id);
        id
    }

    /// A pod counted on the node numbered `node` in the group numbered `group` is gone (also
    /// when the occupancy drops it at a relist's end).
    pub(crate) fn release(&mut self, node: u32, group: u32) {
        let Some(slot) = self.slots.get_mut(group as usize) else {
            return;
        };
        if slot.pods == 0 {
            return;
        }
        // What leaves the per-node counts (a reader's sums follow them): the pod's own count,
        // or, for the group's last pod, every count left.
        if let Some(group) = &slot.group {
            let mut record = |node: u32, count: u32| {
                self.changes.record(GroupChange {
                    group: group.clone(),
                    node,
                    delta: -i32::try_from(count).unwrap_or(i32::MAX),
                });
            };
            if slot.pods == 1 {
                for &(n, count) in &slot.on_node {
                    record(n, count);
                }
            } else if slot
                .on_node
                .binary_search_by_key(&node, |&(n, _)| n)
                .is_ok()
            {
                record(node, 1);
            }
        }
        slot.pods -= 1;
        self.pods -= 1;
        if slot.pods == 0 {
            if let Some(shared) = slot.group.take() {
                self.ids.remove(&shared);
                self.required_anti_affinity
                    .retain(|g| !Arc::ptr_eq(g, &shared));
            }
            slot.on_node = Vec::new();
            self.free.push(group);
            return;
        }
        if let Ok(i) = slot.on_node.binary_search_by_key(&node, |&(n, _)| n) {
            slot.on_node[i].1 -= 1;
            if slot.on_node[i].1 == 0 {
                slot.on_node.remove(i);
            }
        }
    }

    /// The pods gained and lost since a reader's mark.
    pub(crate) fn changes(&self) -> &ChangeLog<GroupChange> {
        &self.changes
    }

    /// Every group with its pods per node number, sorted by node number.
    pub(crate) fn groups(&self) -> impl Iterator<Item = (&Arc<PodGroup>, &[(u32, u32)])> {
        self.slots
            .iter()
            .filter_map(|s| Some((s.group.as_ref()?, s.on_node.as_slice())))
    }

    /// The groups whose pods have required anti-affinity terms.
    pub(crate) fn with_required_anti_affinity(&self) -> &[Arc<PodGroup>] {
        &self.required_anti_affinity
    }

    pub fn pods(&self) -> usize {
        self.pods
    }

    pub fn len(&self) -> usize {
        self.ids.len()
    }

    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(namespace: &str, labels: serde_json::Value) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"namespace": namespace, "labels": labels},
            "spec": {"containers": []}}))
        .expect("pod")
    }

    /// The groups with what the occupancy keeps for them: each pod's node and group numbers.
    #[derive(Default)]
    struct Bound {
        groups: PodGroups,
        pods: std::collections::HashMap<&'static str, (u32, u32)>,
    }

    impl Bound {
        fn set(&mut self, uid: &'static str, node: Option<u32>, pod: &Pod) {
            let was = self.pods.remove(uid);
            let group = self.groups.set(was, node, pod);
            if let Some(node) = node {
                self.pods.insert(uid, (node, group));
            }
        }

        /// Every pod gone, as when a relist mentions none of them.
        fn drop_all(&mut self) {
            for (_, (node, group)) in self.pods.drain() {
                self.groups.release(node, group);
            }
        }
    }

    impl std::ops::Deref for Bound {
        type Target = PodGroups;
        fn deref(&self) -> &PodGroups {
            &self.groups
        }
    }

    #[test]
    fn pods_of_one_workload_share_a_group_and_count_per_node() {
        let mut g = Bound::default();
        let tm = pod("flink", serde_json::json!({"app": "tm"}));
        g.set("a", Some(1), &tm);
        g.set("b", Some(1), &tm);
        g.set("c", Some(2), &tm);
        g.set(
            "d",
            Some(2),
            &pod("other", serde_json::json!({"app": "tm"})),
        );
        assert_eq!((g.len(), g.pods()), (2, 4));
        let (shared, on_node) = g
            .groups()
            .find(|(group, _)| &*group.namespace == "flink")
            .expect("flink group");
        assert_eq!(on_node, [(1, 2), (2, 1)]);
        assert!(Arc::ptr_eq(shared, &g.intern(PodGroup::of(&tm))));
        // Moved, unbound, then gone altogether.
        g.set("c", Some(3), &tm);
        g.set("b", None, &tm);
        g.set("a", None, &tm);
        let (_, on_node) = g
            .groups()
            .find(|(group, _)| &*group.namespace == "flink")
            .expect("flink group");
        assert_eq!(on_node, [(3, 1)]);
        g.drop_all();
        assert!(g.is_empty());
        assert_eq!(g.pods(), 0);
    }

    #[test]
    fn groups_with_required_anti_affinity_are_listed_while_they_have_pods() {
        let mut g = Bound::default();
        let mut loner = pod("ns", serde_json::json!({"app": "loner"}));
        loner.spec = serde_json::from_value(serde_json::json!({"containers": [], "affinity": {
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": "kubernetes.io/hostname", "labelSelector": {}}]}}}))
        .expect("spec");
        g.set(
            "plain",
            Some(1),
            &pod("ns", serde_json::json!({"app": "x"})),
        );
        assert!(g.with_required_anti_affinity().is_empty());
        g.set("l1", Some(1), &loner);
        g.set("l2", Some(2), &loner);
        assert_eq!(g.with_required_anti_affinity().len(), 1);
        g.set("l1", None, &loner);
        assert_eq!(g.with_required_anti_affinity().len(), 1);
        g.set("l2", None, &loner);
        assert!(g.with_required_anti_affinity().is_empty());
    }

    #[test]
    fn relabelled_pod_changes_group() {
        let mut g = Bound::default();
        g.set("a", Some(1), &pod("ns", serde_json::json!({"v": "1"})));
        g.set("a", Some(1), &pod("ns", serde_json::json!({"v": "2"})));
        assert_eq!((g.len(), g.pods()), (1, 1));
        let (group, _) = g.groups().next().expect("one group");
        assert_eq!(group.labels.get("v").map(String::as_str), Some("2"));
    }
}
