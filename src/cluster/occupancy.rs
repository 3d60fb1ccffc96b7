//! What the scheduler's cache knows: the requests of every pod bound to each node, from the
//! cluster-wide pod watch. Kept compact: a 150,000-pod cluster fits in a few megabytes.

use crate::hashing::HashMap;

use super::changes::ChangeLog;
use crate::scheduler::{PodRequests, Resources};

/// An extended resource and its amount.
type Scalar = (Box<str>, i64);

/// A pod's requests without the allocation `Resources` may carry for extended resources.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct CompactRequests {
    milli_cpu: i64,
    memory: i64,
    ephemeral_storage: i64,
    non_zero_milli_cpu: i64,
    non_zero_memory: i64,
    scalar: Option<Box<[Scalar]>>,
}

impl CompactRequests {
    fn of(r: &PodRequests) -> Self {
        CompactRequests {
            milli_cpu: r.requested.milli_cpu,
            memory: r.requested.memory,
            ephemeral_storage: r.requested.ephemeral_storage,
            non_zero_milli_cpu: r.non_zero_milli_cpu,
            non_zero_memory: r.non_zero_memory,
            scalar: (!r.requested.scalar.is_empty()).then(|| {
                r.requested
                    .scalar
                    .iter()
                    .map(|(n, v)| (n.as_str().into(), *v))
                    .collect()
            }),
        }
    }

    fn apply(&self, node: &mut NodeRequests, sign: i64) {
        let r = &mut node.requested;
        r.milli_cpu += sign * self.milli_cpu;
        r.memory += sign * self.memory;
        r.ephemeral_storage += sign * self.ephemeral_storage;
        r.pods += sign;
        for (name, v) in self.scalar.iter().flatten() {
            *r.slot(name) += sign * v;
        }
        node.non_zero_milli_cpu += sign * self.non_zero_milli_cpu;
        node.non_zero_memory += sign * self.non_zero_memory;
    }
}

/// Requests bound to one node.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct NodeRequests {
    /// As written; `pods` counts the pods.
    pub(crate) requested: Resources,
    pub(crate) non_zero_milli_cpu: i64,
    pub(crate) non_zero_memory: i64,
}

/// 16 bytes a pod: the node and the request shape are numbers into tables of their own.
#[derive(Debug, Clone, Copy)]
struct Placed {
    node: u32,
    /// The list generation the pod was last seen in.
    generation: u32,
    /// Index into `shapes`: the pods of one Flink job all request the same.
    requests: u32,
    /// The pod's group number (see `PodGroups`), or [`NO_GROUP`]. Kept here rather than in a
    /// map of its own: the 16-byte key pads the entry to 32 bytes, with room for it.
    group: u32,
}

/// A pod counted without a group number.
pub(crate) const NO_GROUP: u32 = u32::MAX;

#[derive(Debug, Clone, Default)]
pub struct Occupancy {
    pods: HashMap<u128, Placed>,
    node_ids: HashMap<String, u32>,
    nodes: Vec<NodeRequests>,
    shapes: Vec<CompactRequests>,
    shape_ids: HashMap<CompactRequests, u32>,
    generation: u32,
    /// Numbers of the nodes whose requests changed.
    changes: ChangeLog,
}

/// A pod uid as a number: UUIDs (what the apiserver issues) exactly, anything else hashed.
pub(crate) fn pod_key(uid: &str) -> u128 {
    let hex: String = uid.chars().filter(|c| *c != '-').collect();
    if hex.len() == 32
        && let Ok(v) = u128::from_str_radix(&hex, 16)
    {
        return v;
    }
    use std::hash::BuildHasher;
    let state = foldhash::fast::FixedState::with_seed(0x7e57);
    // The top bit keeps hashed keys apart from any UUID of version < 8.
    (1 << 127) | u128::from(state.hash_one(uid))
}

impl Occupancy {
    #[cfg(test)]
    /// Records that pod `uid` is bound to `node` with `requests`; `None` for a pod that is not
    /// (or no longer) counted: pending, finished or deleted.
    pub(crate) fn set(&mut self, uid: &str, node: Option<&str>, requests: &PodRequests) {
        self.set_grouped(uid, node, requests, NO_GROUP);
    }

    /// As [`Self::set`], with the pod's group number, read back by [`Self::grouped`] and told
    /// when [`Self::end_relist_with`] drops the pod.
    pub(crate) fn set_grouped(
        &mut self,
        uid: &str,
        node: Option<&str>,
        requests: &PodRequests,
        group: u32,
    ) {
        let key = pod_key(uid);
        if let Some(old) = self.pods.remove(&key) {
            self.shapes[old.requests as usize].apply(&mut self.nodes[old.node as usize], -1);
            self.changes.record(old.node);
        }
        let Some(node) = node else { return };
        let id = self.number(node);
        let shape = CompactRequests::of(requests);
        let shape_id = match self.shape_ids.get(&shape) {
            Some(&s) => s,
            None => {
                let s = u32::try_from(self.shapes.len()).unwrap_or(u32::MAX);
                self.shapes.push(shape.clone());
                self.shape_ids.insert(shape, s);
                s
            }
        };
        self.shapes[shape_id as usize].apply(&mut self.nodes[id as usize], 1);
        self.changes.record(id);
        self.pods.insert(
            key,
            Placed {
                node: id,
                generation: self.generation,
                requests: shape_id,
                group,
            },
        );
    }

    /// The node number and group number pod `uid` is counted under, if it is.
    pub(crate) fn grouped(&self, uid: &str) -> Option<(u32, u32)> {
        self.pods.get(&pod_key(uid)).map(|p| (p.node, p.group))
    }

    /// Whether pod `uid` is counted on `node`.
    #[cfg(test)]
    fn is_on(&self, uid: &str, node: &str) -> bool {
        self.pods
            .get(&pod_key(uid))
            .is_some_and(|p| self.node_ids.get(node) == Some(&p.node))
    }

    /// The list is complete: drops the pods it did not mention.
    #[cfg(test)]
    fn end_relist(&mut self) {
        self.end_relist_with(|_, _| {});
    }

    pub(crate) fn node(&self, name: &str) -> Option<&NodeRequests> {
        self.node_ids.get(name).map(|&id| &self.nodes[id as usize])
    }

    /// The number of `node`, given it on first sight; numbers never change.
    pub(crate) fn number(&mut self, node: &str) -> u32 {
        if let Some(&id) = self.node_ids.get(node) {
            return id;
        }
        let id = u32::try_from(self.nodes.len()).unwrap_or(u32::MAX);
        self.node_ids.insert(node.to_string(), id);
        self.nodes.push(NodeRequests::default());
        id
    }

    /// The requests bound to the node numbered `number` (see [`Self::number`]).
    pub(crate) fn at(&self, number: u32) -> Option<&NodeRequests> {
        self.nodes.get(number as usize)
    }

    pub fn pods(&self) -> usize {
        self.pods.len()
    }

    /// A full list starts: pods it does not mention again are dropped at [`Self::end_relist`].
    /// Until then the old counts stand, so decisions never see an empty cluster.
    pub(crate) fn begin_relist(&mut self) {
        self.generation = self.generation.wrapping_add(1);
    }

    /// As [`Self::end_relist`], telling `dropped` the node number and group number of each
    /// pod dropped.
    pub(crate) fn end_relist_with(&mut self, mut dropped: impl FnMut(u32, u32)) {
        let generation = self.generation;
        let (nodes, shapes, changes) = (&mut self.nodes, &self.shapes, &mut self.changes);
        self.pods.retain(|_, p| {
            let keep = p.generation == generation;
            if !keep {
                shapes[p.requests as usize].apply(&mut nodes[p.node as usize], -1);
                changes.record(p.node);
                dropped(p.node, p.group);
            }
            keep
        });
    }

    /// Numbers of the nodes whose requests changed, lately.
    pub(crate) fn changes(&self) -> &ChangeLog {
        &self.changes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(cpu: &str, memory: &str) -> PodRequests {
        let requested = Resources::parse(&[("cpu", cpu), ("memory", memory)]).expect("quantities");
        PodRequests {
            non_zero_milli_cpu: requested.milli_cpu,
            non_zero_memory: requested.memory,
            requested,
        }
    }

    #[test]
    fn bind_move_and_finish() {
        let mut o = Occupancy::default();
        let uid = "5b0c7a0e-1f3c-4d27-9d43-3c1f7a9e2b11";
        o.set(uid, None, &req("2", "4Gi"));
        assert!(o.node("a").is_none());
        o.set(uid, Some("a"), &req("2", "4Gi"));
        o.set("other", Some("a"), &req("500m", "1Gi"));
        let a = o.node("a").expect("a");
        assert_eq!((a.requested.milli_cpu, a.requested.pods), (2500, 2));
        assert!(o.is_on(uid, "a"));
        // Seen again on another node (never in practice; the last word wins).
        o.set(uid, Some("b"), &req("2", "4Gi"));
        assert_eq!(o.node("a").map(|n| n.requested.milli_cpu), Some(500));
        assert_eq!(o.node("b").map(|n| n.requested.memory), Some(4 << 30));
        o.set(uid, None, &req("2", "4Gi"));
        o.set("other", None, &PodRequests::default());
        assert_eq!(o.node("a"), Some(&NodeRequests::default()));
        assert_eq!(o.node("b"), Some(&NodeRequests::default()));
        assert_eq!(o.pods(), 0);
    }

    #[test]
    fn relist_drops_pods_it_no_longer_mentions() {
        let mut o = Occupancy::default();
        o.set("gone", Some("a"), &req("1", "1Gi"));
        o.set("stays", Some("a"), &req("2", "1Gi"));
        o.begin_relist();
        assert_eq!(
            o.node("a").map(|n| n.requested.pods),
            Some(2),
            "old counts stand"
        );
        o.set("stays", Some("a"), &req("2", "1Gi"));
        o.end_relist();
        assert_eq!(o.node("a").map(|n| n.requested.milli_cpu), Some(2000));
        assert_eq!(o.pods(), 1);
    }

    #[test]
    fn extended_resources_are_counted() {
        let mut o = Occupancy::default();
        let mut r = req("1", "1Gi");
        *r.requested.slot("nvidia.com/gpu") = 2;
        o.set("p", Some("gpu-1"), &r);
        assert_eq!(
            o.node("gpu-1").map(|n| n.requested.get("nvidia.com/gpu")),
            Some(2)
        );
        o.set("p", None, &r);
        assert_eq!(
            o.node("gpu-1").map(|n| n.requested.get("nvidia.com/gpu")),
            Some(0)
        );
    }
}
