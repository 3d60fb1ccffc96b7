//! The labels and pod (anti-)affinity terms of every bound pod, for the scheduler's plugins that
//! look at other pods (PodTopologySpread, InterPodAffinity).
//!
//! Pods of one workload share their namespace, labels and terms: they are one [`PodGroup`],
//! interned, and each group counts its pods per node. A 150,000-pod cluster costs one map slot
//! per pod plus one group per distinct label set.

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

use super::occupancy::pod_key;
use crate::hashing::HashMap;
use crate::scheduler::PodFacts;
use crate::scheduler::pods::{AffinityTerms, Labels};

/// What the plugins read from an existing pod besides its node; shared by the pods of a workload.
#[derive(Debug, Clone, PartialEq)]
pub struct PodGroup {
    pub namespace: Arc<str>,
    pub labels: Arc<Labels>,
    pub terms: Option<Arc<AffinityTerms>>,
}

// The terms hold no floating-point number: equality is reflexive.
impl Eq for PodGroup {}

impl Hash for PodGroup {
    // The terms are left out of the hash (they have no `Hash`): the pods of one namespace and
    // label set nearly always share them, and equality still compares them.
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.namespace.hash(state);
        self.labels.hash(state);
    }
}

impl PodGroup {
    pub fn of(pod: &Pod) -> Self {
        PodGroup {
            namespace: Arc::from(pod.metadata.namespace.as_deref().unwrap_or_default()),
            labels: Arc::new(pod.metadata.labels.clone().unwrap_or_default()),
            terms: AffinityTerms::of(pod.spec.as_ref().and_then(|s| s.affinity.as_ref()))
                .map(Arc::new),
        }
    }

    /// The group of the pod `facts` describes.
    pub fn of_facts(facts: &PodFacts<'_>) -> Self {
        PodGroup {
            namespace: Arc::from(facts.namespace),
            labels: Arc::new(facts.labels().clone()),
            terms: AffinityTerms::of_parts(facts.pod_affinity, facts.pod_anti_affinity)
                .map(Arc::new),
        }
    }

    /// The group's pods carry required anti-affinity terms: the scheduler checks every new pod
    /// against them (the symmetric part of InterPodAffinity).
    pub fn has_required_anti_affinity(&self) -> bool {
        self.terms
            .as_ref()
            .is_some_and(|t| !t.required_anti_affinity.is_empty())
    }
}

#[derive(Debug, Default, Clone)]
struct GroupCounts {
    /// Pods on each node, by occupancy node number.
    on_node: HashMap<u32, u32>,
    pods: u32,
}

/// Bound pods by group and node.
#[derive(Debug, Default, Clone)]
pub struct PodGroups {
    groups: HashMap<Arc<PodGroup>, GroupCounts>,
    /// Each bound pod's group and node number.
    pods: HashMap<u128, (Arc<PodGroup>, u32)>,
    /// The groups with required anti-affinity: every new pod is checked against them, and
    /// they are few (usually none), so they are kept apart from the thousands of others.
    required_anti_affinity: Vec<Arc<PodGroup>>,
}

impl PodGroups {
    /// The shared copy of `group` (kept only while a bound pod is in it).
    pub fn intern(&self, group: PodGroup) -> Arc<PodGroup> {
        match self.groups.get_key_value(&group) {
            Some((shared, _)) => shared.clone(),
            None => Arc::new(group),
        }
    }

    /// Pod `uid` is bound to the node numbered `node` (`None`: not bound, finished or deleted).
    pub fn set(&mut self, uid: &str, node: Option<u32>, pod: &Pod) {
        let key = pod_key(uid);
        let Some(node) = node else {
            self.remove(key);
            return;
        };
        if let Some((group, at)) = self.pods.get(&key)
            && *at == node
            && group.labels.as_ref() == pod.metadata.labels.as_ref().unwrap_or(&Labels::new())
        {
            return;
        }
        self.remove(key);
        let group = self.intern(PodGroup::of(pod));
        if group.has_required_anti_affinity() && !self.groups.contains_key(&group) {
            self.required_anti_affinity.push(group.clone());
        }
        let counts = self.groups.entry(group.clone()).or_default();
        counts.pods += 1;
        *counts.on_node.entry(node).or_default() += 1;
        self.pods.insert(key, (group, node));
    }

    fn remove(&mut self, key: u128) {
        let Some((group, node)) = self.pods.remove(&key) else {
            return;
        };
        let Some(counts) = self.groups.get_mut(&group) else {
            return;
        };
        counts.pods -= 1;
        if counts.pods == 0 {
            self.groups.remove(&group);
            self.required_anti_affinity
                .retain(|g| !Arc::ptr_eq(g, &group));
            return;
        }
        if let Some(n) = counts.on_node.get_mut(&node) {
            *n -= 1;
            if *n == 0 {
                counts.on_node.remove(&node);
            }
        }
    }

    /// Keeps only the pods `keep` accepts (a relist's end drops the pods it did not mention).
    pub fn retain(&mut self, mut keep: impl FnMut(u128) -> bool) {
        let gone: Vec<u128> = self.pods.keys().copied().filter(|k| !keep(*k)).collect();
        for key in gone {
            self.remove(key);
        }
    }

    /// Every group with its pods per node number.
    pub fn groups(&self) -> impl Iterator<Item = (&Arc<PodGroup>, &HashMap<u32, u32>)> {
        self.groups.iter().map(|(g, c)| (g, &c.on_node))
    }

    /// The groups whose pods have required anti-affinity terms.
    pub fn with_required_anti_affinity(&self) -> &[Arc<PodGroup>] {
        &self.required_anti_affinity
    }

    pub fn pods(&self) -> usize {
        self.pods.len()
    }

    pub fn len(&self) -> usize {
        self.groups.len()
    }

    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
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

    #[test]
    fn pods_of_one_workload_share_a_group_and_count_per_node() {
        let mut g = PodGroups::default();
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
        assert_eq!((on_node.get(&1), on_node.get(&2)), (Some(&2), Some(&1)));
        assert!(Arc::ptr_eq(shared, &g.intern(PodGroup::of(&tm))));
        // Moved, unbound, then gone altogether.
        g.set("c", Some(3), &tm);
        g.set("b", None, &tm);
        g.set("a", None, &tm);
        let (_, on_node) = g
            .groups()
            .find(|(group, _)| &*group.namespace == "flink")
            .expect("flink group");
        assert_eq!(on_node.iter().collect::<Vec<_>>(), vec![(&3, &1)]);
        g.retain(|_| false);
        assert!(g.is_empty());
        assert_eq!(g.pods(), 0);
    }

    #[test]
    fn groups_with_required_anti_affinity_are_listed_while_they_have_pods() {
        let mut g = PodGroups::default();
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
        let mut g = PodGroups::default();
        g.set("a", Some(1), &pod("ns", serde_json::json!({"v": "1"})));
        g.set("a", Some(1), &pod("ns", serde_json::json!({"v": "2"})));
        assert_eq!((g.len(), g.pods()), (1, 1));
        let (group, _) = g.groups().next().expect("one group");
        assert_eq!(group.labels.get("v").map(String::as_str), Some("2"));
    }
}
