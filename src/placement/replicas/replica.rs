//! Which nodes this replica prefers when several replicas decide at once.
//!
//! The apiserver feeds replicas unevenly (per TCP connection), and a replica hears of another
//! replica's pods only through the pod watch, tens of milliseconds later. Two replicas deciding
//! at the same moment would both see the same coolest node. So the live replicas partition the
//! nodes by rendezvous hashing of (replica, node): each node has one owner, the partition is
//! the same on every replica that knows the same members, and a replica joining or leaving
//! moves only the nodes it gains or owned. A replica ranks another replica's node as if that
//! replica had just put one more pod there (see `standing`): it takes a foreign node only
//! when that node would still be the cooler with both pods on it.

use std::hash::BuildHasher;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use arc_swap::ArcSwapOption;

use crate::inflight::ledger::HeardMix;
use crate::view::ClusterView;
use crate::view::memo::MemoKey;

/// The live replicas, as this one knows them (the webhook Service's ready endpoints).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ReplicaSet {
    me: String,
    /// Sorted, distinct, `me` among them.
    members: Vec<String>,
    /// Identifies (me, members) in memo keys.
    key: u64,
}

impl ReplicaSet {
    /// `None` when there is nothing to partition: fewer than two members, or `me` not among
    /// them (not ready yet, or the membership is unknown).
    pub(crate) fn new(me: &str, members: impl IntoIterator<Item = String>) -> Option<Self> {
        let mut members: Vec<String> = members.into_iter().filter(|m| !m.is_empty()).collect();
        members.sort();
        members.dedup();
        if members.len() < 2 || !members.iter().any(|m| m == me) {
            return None;
        }
        let key = hasher().hash_one((me, &members));
        Some(ReplicaSet {
            me: me.to_string(),
            members,
            key,
        })
    }

    /// The partition for the decisions this replica takes itself. `None` when it is
    /// `decider`, the replica the others forward their reviews to: it decides every review it
    /// can be reached for, as a single replica does. The others keep their share for the
    /// reviews they decide themselves when it does not answer.
    pub(crate) fn for_own_decisions(
        me: &str,
        members: impl IntoIterator<Item = String>,
        decider: Option<&str>,
    ) -> Option<Self> {
        if decider == Some(me) {
            return None;
        }
        Self::new(me, members)
    }

    pub(crate) fn members(&self) -> &[String] {
        &self.members
    }

    /// The member that owns `node`: the highest rendezvous score.
    pub(crate) fn owner(&self, node: &str) -> &str {
        let score = |member: &String| hasher().hash_one((member.as_str(), node));
        self.members
            .iter()
            .max_by(|a, b| score(a).cmp(&score(b)).then_with(|| b.cmp(a)))
            .map_or("", String::as_str)
    }

    /// For each node of `view` (by position): 1 when this replica owns it. Once per view.
    pub(crate) fn owned(&self, view: &ClusterView) -> Arc<[u32]> {
        view.memo.get_or_compute(MemoKey::Owned(self.key), || {
            view.nodes
                .iter()
                .map(|n| u32::from(self.owner(&n.name) == self.me))
                .collect()
        })
    }

    /// Share of `view`'s nodes this replica owns.
    pub(crate) fn share(&self, view: &ClusterView) -> f64 {
        let owned = self.owned(view);
        if owned.is_empty() {
            return 0.0;
        }
        owned.iter().map(|&o| f64::from(o)).sum::<f64>() / owned.len() as f64
    }

    pub(in crate::placement) fn key(&self) -> u64 {
        self.key
    }
}

fn hasher() -> foldhash::fast::FixedState {
    // Fixed: every replica must compute the same partition.
    foldhash::fast::FixedState::with_seed(0x7265_706c_6963_6173)
}

/// What the membership watch publishes for this replica's own decisions.
#[derive(Debug, Default)]
pub(crate) struct Peers {
    /// The partition, while it decides beside others (see [`ReplicaSet::for_own_decisions`]).
    set: ArcSwapOption<ReplicaSet>,
    /// Known to decide alone: the only live replica, or the decider the others forward to.
    alone: AtomicBool,
    /// Another replica writes what the replicas share on the nodes (the heat bands): the
    /// decider this one forwards to, or without one the lowest-named.
    defers: AtomicBool,
    /// A complete member list has been handed over (the EndpointSlices listed, empty when
    /// no replica is ready yet): until then this replica cannot tell whether it or another one
    /// decides.
    known: AtomicBool,
}

impl Peers {
    /// `me` among the live `members`, `decider` the one reviews are forwarded to (if any).
    pub(crate) fn publish(&self, me: &str, members: &[String], decider: Option<&str>) {
        let set = ReplicaSet::for_own_decisions(me, members.iter().cloned(), decider);
        let only_me = !members.is_empty() && members.iter().all(|m| m == me);
        self.alone
            .store(decider == Some(me) || only_me, Ordering::Relaxed);
        // The node labels have one writer: the decider, or without one the lowest-named
        // member (two writers reading back each other's labels would relabel a node back
        // and forth).
        let writer = decider.or(members.iter().min().map(String::as_str));
        self.defers
            .store(writer.is_some_and(|w| w != me), Ordering::Relaxed);
        self.set.store(set.map(Arc::new));
        self.known.store(true, Ordering::Relaxed);
    }

    pub(crate) fn set(&self) -> Option<Arc<ReplicaSet>> {
        self.set.load_full()
    }

    pub(crate) fn alone(&self) -> bool {
        self.alone.load(Ordering::Relaxed)
    }

    /// Another replica writes the heat bands: the decider this one forwards its reviews to,
    /// or, where reviews are not forwarded, the lowest-named live replica.
    pub(crate) fn defers_to_another(&self) -> bool {
        self.defers.load(Ordering::Relaxed)
    }

    /// Whether the live replicas are known (see [`Peers::publish`]): before that, a replica
    /// that writes for all of them may be the one that should not.
    pub(crate) fn known(&self) -> bool {
        self.known.load(Ordering::Relaxed)
    }
}

/// What a decision knows of the replica deciding it.
#[derive(Debug, Clone, Default)]
pub struct Replica {
    /// Orders near-ties in this replica's own way.
    pub(crate) salt: u64,
    /// The live replicas; `None`: this replica decides as if alone (near-ties still salted).
    pub(crate) set: Option<Arc<ReplicaSet>>,
    /// Known to decide alone (see [`Peers`]): no other replica decides beside it, so it has no
    /// one to keep apart from with near-ties.
    pub(crate) alone: bool,
    /// Pods this replica decided that its pod watch has not reported yet (see
    /// [`crate::inflight::ledger::Ledger::unheard`]): the other replicas are taken to have
    /// decided as many that this one has not heard of.
    pub(crate) unheard: usize,
    /// Whose decisions the pod watch reported lately: how the reviews are split.
    pub(crate) heard: HeardMix,
    /// The scheduler scores every feasible node (set by the decision from the scheduler's
    /// configuration and the node count): a pod whose first-tier node another replica filled
    /// has no other named node in the sample to fall to.
    pub(crate) unsampled: bool,
}

impl From<u64> for Replica {
    fn from(salt: u64) -> Self {
        Replica {
            salt,
            ..Replica::default()
        }
    }
}

/// The nodes that are this replica's, and how another replica's nodes are weighed.
#[derive(Debug, Clone)]
pub(in crate::placement) struct Partition {
    /// By position in the view, 1 for this replica's nodes.
    pub(crate) owned: Arc<[u32]>,
    /// The rank the other replicas' unheard pods are taken to have filled their coolest nodes
    /// to (see [`Replica::mirrors`]); minus infinity when they are not.
    pub(crate) foreign_level: f64,
    /// Where that fill puts those pods: (position, pods), by position. Their requests take
    /// room there.
    pub(crate) filled: Vec<(usize, u32)>,
    /// The pods like the one decided that the scores that count pods count on the other
    /// replicas' nodes: the fill's, and one on each node (see `partition::partition_for`).
    pub(crate) mirrored: Vec<(usize, u32)>,
    /// Another replica's node with room for one pod only is left to its owner (see
    /// [`Replica::unsampled`]).
    pub(crate) last_room_theirs: bool,
    /// The other replicas decide next to nothing lately (see [`Replica::others_idle`]): their
    /// nodes rank as this one's own.
    pub(crate) others_idle: bool,
}

impl Partition {
    /// The node at `position` is another replica's and weighed as such: ranked as if its
    /// owner had just put a pod there too (not while the others are idle).
    pub(crate) fn weighs_as_foreign(&self, position: usize) -> bool {
        self.owned.get(position) == Some(&0) && !self.others_idle
    }

    /// Pods the other replicas are taken to be putting on the node at `position`, for its
    /// room: those of the fill, at least one where its last room is left to its owner.
    pub(crate) fn taken_at(&self, position: usize) -> u32 {
        if !self.weighs_as_foreign(position) {
            return 0;
        }
        let filled = self
            .filled
            .binary_search_by_key(&position, |&(p, _)| p)
            .map_or(0, |k| self.filled[k].1);
        filled.max(u32::from(self.last_room_theirs))
    }
}

/// Below this many decisions per other replica for each of this one's, as the watch reported
/// lately, the others are taken to be idle: the apiserver's connections feed this replica
/// alone. One in eight: about six of another replica's decisions heard after some fifty of
/// this one's bring its nodes' margin back.
const IDLE_BELOW: f64 = 0.125;

/// Unheard decisions from which a replica mirrors them onto the other replicas' nodes: fewer
/// is the watch's usual lag, which ranking a foreign node as if its owner had just put one
/// more pod there already covers.
const MIRROR_FROM: usize = 2;

impl Replica {
    /// Its nodes and how it weighs the others' (with no foreign level); `None` when it decides
    /// alone.
    pub(in crate::placement) fn partition(&self, view: &ClusterView) -> Option<Partition> {
        let set = self.set.as_ref()?;
        Some(Partition {
            owned: set.owned(view),
            foreign_level: f64::NEG_INFINITY,
            filled: Vec::new(),
            mirrored: Vec::new(),
            others_idle: self.others_idle(),
            last_room_theirs: self.unsampled,
        })
    }

    /// The watch reported lately almost only this replica's decisions (not before it reported
    /// any: an even split is the prior). A replica fed alone then ranks the others' nodes as
    /// its own instead of keeping off half the cluster for pods nobody is placing; until the
    /// watch reports the others' first few decisions, a burst that moves to them can meet
    /// this replica on their nodes.
    pub(crate) fn others_idle(&self) -> bool {
        let Some(set) = &self.set else {
            return false;
        };
        let others = set.members().len().saturating_sub(1).max(1);
        self.heard.others_per_own(others) / (others as f64) < IDLE_BELOW
    }

    /// The watch runs behind this replica's own decisions: the other replicas are taken to
    /// have decided, in the split the watch reported lately, pods this one has not heard of,
    /// water-filled over their own nodes as this one fills its own. Without this, a replica
    /// that saw the others' nodes as untouched would pile onto their coolest while their
    /// owners fill them too.
    pub(in crate::placement) fn mirrors(&self) -> bool {
        self.unheard_elsewhere() >= MIRROR_FROM
    }

    /// The pods the other replicas are taken to have decided unheard, all together: as many
    /// per decision of this one as the watch reported lately (an even split before it has).
    pub(in crate::placement) fn unheard_elsewhere(&self) -> usize {
        let Some(set) = &self.set else {
            return 0;
        };
        let others = set.members().len().saturating_sub(1);
        (self.unheard as f64 * self.heard.others_per_own(others)).round() as usize
    }

    /// Memo and index key part: the salt and the membership.
    pub(in crate::placement) fn key(&self) -> String {
        match &self.set {
            Some(set) => format!(
                "{}/{:x}/{}/{}",
                self.salt,
                set.key(),
                self.others_idle(),
                self.unsampled
            ),
            None => self.salt.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(me: &str, members: &[&str]) -> Option<ReplicaSet> {
        ReplicaSet::new(me, members.iter().map(|m| m.to_string()))
    }

    #[test]
    fn others_are_idle_only_once_the_watch_reports_almost_only_this_replica() {
        let replica = |own: f64, others: f64| Replica {
            set: set("a", &["a", "b"]).map(Arc::new),
            heard: HeardMix { own, others },
            ..Replica::default()
        };
        // Nothing reported yet: an even split.
        assert!(!replica(0.0, 0.0).others_idle());
        assert!(!replica(25.0, 25.0).others_idle());
        // 80/20, from either side: the margin holds.
        assert!(!replica(40.0, 10.0).others_idle());
        assert!(!replica(10.0, 40.0).others_idle());
        // Fed alone for a while.
        assert!(replica(50.0, 0.0).others_idle());
        // Another replica's decisions heard again.
        assert!(!replica(45.0, 6.0).others_idle());
        // Alone, there are no others.
        assert!(!Replica::default().others_idle());
    }

    #[test]
    fn no_partition_alone_or_unknown() {
        assert!(set("a", &["a"]).is_none());
        assert!(set("c", &["a", "b"]).is_none());
        assert!(set("a", &[]).is_none());
    }

    #[test]
    fn every_member_agrees_on_each_owner_and_shares_are_fair() {
        let a = set("a", &["a", "b", "c"]).expect("a set");
        let b = set("b", &["c", "b", "a"]).expect("a set");
        let mut counts = std::collections::BTreeMap::new();
        for i in 0..3000 {
            let node = format!("worker-{i:05}");
            assert_eq!(a.owner(&node), b.owner(&node));
            *counts.entry(a.owner(&node).to_string()).or_insert(0) += 1;
        }
        for (member, count) in counts {
            assert!(
                (850..1150).contains(&count),
                "{member} owns {count} of 3000"
            );
        }
    }

    #[test]
    fn a_member_leaving_moves_only_its_nodes() {
        let three = set("a", &["a", "b", "c"]).expect("a set");
        let two = set("a", &["a", "b"]).expect("a set");
        for i in 0..2000 {
            let node = format!("n{i}");
            let before = three.owner(&node);
            if before != "c" {
                assert_eq!(two.owner(&node), before, "{node} moved");
            }
        }
    }
}
