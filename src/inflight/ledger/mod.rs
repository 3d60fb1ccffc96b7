//! The in-flight ledger: pods steered recently that neither the metrics nor (until they are
//! bound) the scheduler's cache show yet. Charges only: the requests of every bound pod are the
//! cluster picture's (`crate::cluster`), which sits beside the ledger in `inflight::world`.
//!
//! Metrics lag by a scrape interval plus a rate window, and inside a burst the scheduler binds
//! pods well after the webhook has answered them. So each steered pod charges its estimated
//! load and its requests where the scheduler model predicts it lands: wholly on one node when
//! the scheduler scores every node, split by landing probability when it samples. Once the pod
//! watch sees the pod bound, its load counts on its real node and its requests come from the
//! watch (the [`Occupancy`]). From then on the metrics decide ([`handover`]): the charge
//! shrinks to what they do not show yet and ends once their rate window covers the pod's run.
//! A pod not seen bound within `ttl` (or every pod, under `handover.rule: ttl`) is dropped then.
//!
//! Every operation costs O(shares) plus O(log n) for the expiry queue: nothing scans the
//! whole ledger, so a decision's lookups cost the same with 10 or 30,000 pods in flight.

use crate::hashing::HashMap;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant, SystemTime};

use crate::cluster::changes::ChangeLog;
use crate::cluster::pod_groups::PodGroups;
use crate::scheduler::PodRequests;
use crate::scheduler::pods::PodGroup;
use pending_groups::PendingGroups;
use std::sync::Arc;

mod decided;
pub(crate) mod handover;
mod heard;
mod node_extra;
mod pending_groups;
mod pending_tally;

use handover::HandoverPolicy;
pub(crate) use heard::HeardMix;
pub use node_extra::{NodeExtra, PodLoad};
pub(in crate::inflight) use pending_tally::PendingTally;

/// One node a pod may land on (its number, see `Ledger::node_names`) and the probability.
/// Packed to 12 bytes (no padding after the number): tens of thousands of entries may be in
/// flight with ~50 shares each. The probability stays f64: in f32, `p * (1 - p)` for p near 1
/// loses the variance. Fields are only ever read by value.
#[derive(Debug, Clone, Copy)]
#[repr(C, packed(4))]
struct Share {
    node: u32,
    p: f64,
}

impl Share {
    fn new(node: u32, p: f64) -> Self {
        Share { node, p }
    }

    fn parts(self) -> (u32, f64) {
        (self.node, self.p)
    }
}

#[derive(Debug, Clone)]
struct Entry {
    /// Where the pod may land and with what probability (summing to 1). Numbers, not names:
    /// at 5,000 nodes a pod may have ~50. Boxed: no spare capacity.
    shares: Box<[Share]>,
    /// The pod's estimated load.
    load: PodLoad,
    /// The part of `load` counted on its nodes: all of it until the metrics start to show it.
    charged: PodLoad,
    steered_at: Instant,
    /// `namespace/name`, once the pod watch has seen it bound: how its readings are found.
    pod: Option<Box<str>>,
    /// When its containers started running, as the pod watch last saw them.
    started: Option<SystemTime>,
    /// Not started, and its containers say it will not by itself (see `handover`): charged
    /// nothing until it starts.
    stuck: bool,
    /// Shared with the entries charged before it with the same requests: a burst's pods have
    /// one template.
    requests: Arc<PodRequests>,
    /// Bound: the single share is its node, and its requests count through the occupancy.
    bound: bool,
    /// Which charge this entry is: queue items of a forgotten earlier charge of the same id
    /// must not expire a later one.
    charge_seq: u64,
    /// For pods this replica decided, until their bind is counted: each share's node heat at
    /// decision time, in `shares` order (NaN: not known), for landing accuracy.
    decided_here: Option<Box<[f32]>>,
    /// Decided here and not yet reported by the pod watch.
    unheard: bool,
    /// The pod list (see [`Ledger::begin_relist`]) in which the pod watch last reported it, or
    /// in which it was charged.
    listed: u32,
    /// Its labels and terms, for the plugins that count other pods while it is pending.
    group: Option<Arc<PodGroup>>,
}

#[derive(Debug, Clone)]
pub struct Ledger {
    ttl: Duration,
    /// When a bound pod's charge ends.
    handover: HandoverPolicy,
    /// Entries boxed: the map's slots stay small, so the map doubling its slots (which removals
    /// and inserts at a steady size make it do, through its tombstones) costs little.
    entries: HashMap<String, Box<Entry>>,
    /// Every node ever charged, numbered in order; nodes are few and long-lived.
    node_ids: HashMap<Box<str>, u32>,
    node_names: Vec<Box<str>>,
    /// By node number; all zero when nothing is in flight there.
    per_node: Vec<NodeExtra>,
    /// Entries by expiry, soonest first. Forgotten entries stay queued until their time comes
    /// and are skipped then (lazy deletion), so the queue holds at most one TTL of charges.
    expiry: BinaryHeap<Reverse<(Instant, u64, String)>>,
    next_seq: u64,
    /// Past this many entries, the charges that expire soonest go first: memory stays bounded
    /// whatever the rate of reviews.
    max_entries: usize,
    /// Past this many (pod, node) shares held by all entries, too: a decision under sampling
    /// predicts up to a hundred nodes or more, and each share is 16 bytes held (with the heat
    /// remembered for landing accuracy), so entries alone do not bound the memory.
    max_landings: usize,
    /// Shares held by all entries.
    landings: usize,
    /// Entries dropped early to stay within `max_entries` and `max_landings`.
    evicted: u64,
    /// Entries decided here that the pod watch has not reported yet.
    unheard: usize,
    /// Pod lists begun by the pod watch (its first and every relist).
    relists: u32,
    /// Whose decisions the pod watch reported lately.
    heard: HeardMix,
    /// The groups of pending pods, one copy per template.
    pending_groups: PendingGroups,
    /// The requests of the pod charged last.
    last_requests: Option<Arc<PodRequests>>,
    /// Pending pods with a group, by group (its address): the group and its pods counted by
    /// the node (ledger number) they most likely land on. What the plugins that count pods
    /// read, kept as pods come and go rather than gathered from every entry at each decision.
    pending_tally: PendingTally,
    /// A job's pending TaskManagers are tagged with their group even without terms that count
    /// other pods: the job's own bounds (`placement.per_job`) count them.
    tags_jobs: bool,
    /// Ledger numbers of the nodes whose in-flight load changed.
    changes: ChangeLog,
}

impl Ledger {
    /// A ledger holding at most `max_entries` pods (at least one).
    pub(crate) fn with_max_entries(self, max_entries: usize) -> Self {
        Ledger {
            max_entries: max_entries.max(1),
            ..self
        }
    }

    /// The ledger `config` describes: its ttl, its bounds, and whether it tags a job's pods.
    pub(crate) fn for_config(config: &crate::config::Config) -> Self {
        Ledger::new(config.inflight.ttl)
            .with_handover(HandoverPolicy::of(config))
            .with_max_entries(config.inflight.max_entries)
            .with_max_landings(config.inflight.max_landings)
            .tagging_jobs(!config.placement.per_job.is_off())
    }

    /// A ledger that tags a job's pending TaskManagers with their group (see [`Ledger::tag`]).
    pub(crate) fn tagging_jobs(mut self, on: bool) -> Self {
        self.set_tags_jobs(on);
        self
    }

    pub(crate) fn set_tags_jobs(&mut self, on: bool) {
        self.tags_jobs = on;
    }

    /// Tags the pending pod `id` with its group when something may count it: its own terms
    /// count other pods (its siblings' terms then match it), or it is a job's TaskManager and
    /// the job's own bounds are on. Other pods are tagged only once bound, so a review stays
    /// cheap for the many pods without such terms. The one rule for pods decided here and
    /// pods another replica decided.
    pub(in crate::inflight) fn tag(
        &mut self,
        id: &str,
        facts: &crate::scheduler::PodFacts<'_>,
        bound: &PodGroups,
    ) {
        let counted = facts.counts_other_pods()
            || (self.tags_jobs && crate::jobs::taskmanager_app(facts.labels()).is_some());
        if counted {
            self.set_group(id, PodGroup::of_facts(facts), bound);
        }
    }

    /// A ledger whose entries predict at most `max_landings` (pod, node) landings in all; one
    /// entry more is always held, whatever its width.
    pub(crate) fn with_max_landings(self, max_landings: usize) -> Self {
        Ledger {
            max_landings: max_landings.max(1),
            ..self
        }
    }

    /// (pod, node) landings the entries predict in all (a bound pod: one).
    #[cfg(test)]
    pub(crate) fn landings(&self) -> usize {
        self.landings
    }

    pub fn new(ttl: Duration) -> Self {
        Ledger {
            ttl,
            handover: HandoverPolicy::FIXED_TTL,
            entries: HashMap::default(),
            node_ids: HashMap::default(),
            node_names: Vec::new(),
            per_node: Vec::new(),
            expiry: BinaryHeap::new(),
            next_seq: 0,
            max_entries: crate::config::DEFAULT_MAX_INFLIGHT,
            max_landings: crate::config::DEFAULT_MAX_LANDINGS,
            landings: 0,
            evicted: 0,
            unheard: 0,
            relists: 0,
            heard: HeardMix::default(),
            pending_groups: PendingGroups::default(),
            last_requests: None,
            pending_tally: PendingTally::default(),
            tags_jobs: false,
            changes: ChangeLog::default(),
        }
    }

    /// Records a steered pod, identified by `id`, that lands on one of `shares` with the given
    /// probabilities (normalised here). `steered_at` may lie in the past (a pod another replica
    /// steered); nothing older than `ttl` is recorded. An existing entry for `id` is left as it is.
    pub fn charge(
        &mut self,
        id: &str,
        shares: &[(String, f64)],
        load: PodLoad,
        requests: &PodRequests,
        steered_at: Instant,
    ) {
        let Some(expires) = steered_at.checked_add(self.ttl) else {
            return;
        };
        if expires <= Instant::now() {
            return;
        }
        self.insert(id, shares, (load, requests), steered_at, expires);
    }

    /// Records the charge of [`Ledger::charge`], its queue item due at `expires`.
    pub(super) fn insert(
        &mut self,
        id: &str,
        shares: &[(String, f64)],
        (load, requests): (PodLoad, &PodRequests),
        steered_at: Instant,
        expires: Instant,
    ) {
        let total: f64 = shares.iter().map(|(_, p)| p.max(0.0)).sum();
        if shares.is_empty() || total.is_nan() || total <= 0.0 || self.entries.contains_key(id) {
            return;
        }
        let entry = Entry {
            shares: shares
                .iter()
                .filter(|(_, p)| *p > 0.0)
                .map(|(n, p)| Share::new(self.node_id(n), p / total))
                .collect(),
            load,
            charged: load,
            steered_at,
            pod: None,
            started: None,
            stuck: false,
            requests: self.shared_requests(requests),
            bound: false,
            charge_seq: self.next_seq,
            decided_here: None,
            unheard: false,
            listed: self.relists,
            group: None,
        };
        self.next_seq += 1;
        let width = entry.shares.len();
        while (self.entries.len() >= self.max_entries || self.landings + width > self.max_landings)
            && self.evict_soonest()
        {}
        self.landings += width;
        self.apply(&entry, 1.0);
        self.expiry
            .push(Reverse((expires, entry.charge_seq, id.to_string())));
        self.entries.insert(id.to_string(), Box::new(entry));
    }

    /// `requests` as the last charge's when they are the same, else as the new last.
    fn shared_requests(&mut self, requests: &PodRequests) -> Arc<PodRequests> {
        match &self.last_requests {
            Some(last) if **last == *requests => last.clone(),
            _ => {
                let shared = Arc::new(requests.clone());
                self.last_requests = Some(shared.clone());
                shared
            }
        }
    }

    /// The pod `id` was bound to `node`: its whole load counts there from now on, and its
    /// requests leave the ledger (the occupancy counts them). False when there is no such pod.
    pub(crate) fn bind(&mut self, id: &str, node: &str) -> bool {
        let Some(entry) = self.entries.get(id) else {
            return false;
        };
        let node_id = self.node_ids.get(node).copied();
        if entry.bound && node_id.is_some() && entry.shares.first().map(|s| s.parts().0) == node_id
        {
            return true;
        }
        let entry = Entry::clone(entry);
        self.untally(&entry);
        self.apply(&entry, -1.0);
        self.landings -= entry.shares.len();
        let bound = Entry {
            shares: Box::new([Share::new(self.node_id(node), 1.0)]),
            bound: true,
            ..entry
        };
        self.landings += 1;
        self.apply(&bound, 1.0);
        self.entries.insert(id.to_string(), Box::new(bound));
        true
    }

    /// The labels and terms of the pending pod `id`, interned with the `bound` pods' groups.
    pub(in crate::inflight) fn set_group(&mut self, id: &str, group: PodGroup, bound: &PodGroups) {
        // A burst's pods share one template: its pending pods share one copy (the bound pods'
        // when some are bound), so the plugins match the burst's pods once (see `AlikeMemo`),
        // however the reviews of several bursts interleave.
        let group = self
            .pending_groups
            .share(group, |group| bound.intern(group));
        let Some(entry) = self.entries.get_mut(id) else {
            return;
        };
        let old = entry.group.replace(group.clone());
        if entry.bound {
            return;
        }
        let Some(node) = most_likely(entry) else {
            return;
        };
        if let Some(old) = old {
            self.pending_tally.count(&old, node, false);
        }
        self.pending_tally.count(&group, node, true);
    }

    /// The pod watch lists every pod again (at start, and when a watch cannot resume, e.g. 410
    /// Gone after a compaction).
    pub(in crate::inflight) fn begin_relist(&mut self) {
        self.relists = self.relists.wrapping_add(1);
    }

    /// A pod list is complete: the charges of steered pods the watch had reported before and
    /// this list did not mention (deleted while the watch was away) end. A charge the watch
    /// never reported stays: its pod may be younger than the list.
    pub(in crate::inflight) fn end_relist(&mut self) {
        let gone: Vec<String> = self
            .entries
            .iter()
            .filter(|(_, e)| !e.unheard && e.listed != self.relists)
            .map(|(id, _)| id.clone())
            .collect();
        for id in gone {
            self.forget(&id);
        }
    }

    /// The pod is gone (deleted, or failed before running).
    pub(crate) fn forget(&mut self, id: &str) {
        if let Some(entry) = self.entries.remove(id) {
            self.landings -= entry.shares.len();
            if entry.unheard {
                self.unheard -= 1;
            }
            self.untally(&entry);
            self.apply(&entry, -1.0);
        }
    }

    /// Drops entries the metrics have absorbed by now: only the expired part of the queue is
    /// visited.
    pub(crate) fn expire(&mut self, now: Instant) {
        while let Some(Reverse((expires, _, _))) = self.expiry.peek() {
            if *expires > now {
                break;
            }
            let Some(Reverse((_, seq, id))) = self.expiry.pop() else {
                break;
            };
            // Skip queue items whose entry was forgotten (and maybe charged again since).
            let Some(entry) = self.entries.get(&id).filter(|e| e.charge_seq == seq) else {
                continue;
            };
            if entry.bound && self.handover.on_evidence() {
                // The metrics end it; queued again so that it stays evictable.
                self.expiry.push(Reverse((now + self.ttl, seq, id)));
            } else {
                self.forget(&id);
            }
        }
    }

    /// Forgets the live entry that expires soonest; false when there is none.
    fn evict_soonest(&mut self) -> bool {
        while let Some(Reverse((_, seq, id))) = self.expiry.pop() {
            if self.entries.get(&id).is_some_and(|e| e.charge_seq == seq) {
                self.forget(&id);
                self.evicted += 1;
                return true;
            }
        }
        false
    }

    /// Entries dropped before their time to stay within the entry limit, so far.
    pub(crate) fn evicted(&self) -> u64 {
        self.evicted
    }

    /// The in-flight load and requests counted on `node`.
    pub(crate) fn extra(&self, node: &str) -> Option<NodeExtra> {
        self.extra_by_number(*self.node_ids.get(node)?)
    }

    /// Where the pod `id` is expected to land, with probabilities; bound pods have one node.
    pub fn shares(&self, id: &str) -> Option<Vec<(String, f64)>> {
        self.entries.get(id).map(|e| {
            e.shares
                .iter()
                .map(|s| {
                    let (n, p) = s.parts();
                    (self.node_names[n as usize].to_string(), p)
                })
                .collect()
        })
    }

    pub(crate) fn contains(&self, id: &str) -> bool {
        self.entries.contains_key(id)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// A pending entry leaves the tally of pending groups.
    fn untally(&mut self, entry: &Entry) {
        if let (false, Some(group), Some(node)) = (entry.bound, &entry.group, most_likely(entry)) {
            self.pending_tally.count(group, node, false);
        }
    }

    /// How many nodes have a number.
    pub(in crate::inflight) fn numbered_nodes(&self) -> usize {
        self.node_names.len()
    }

    /// [`Self::extra`] of the node numbered `number`.
    pub(in crate::inflight) fn extra_by_number(&self, number: u32) -> Option<NodeExtra> {
        (self.per_node.get(number as usize).copied()).filter(|x| !x.is_negligible())
    }

    /// Pending pods with a group, by group and node.
    pub(in crate::inflight) fn pending_tally(&self) -> &PendingTally {
        &self.pending_tally
    }

    /// Ledger numbers of the nodes whose in-flight load changed.
    pub(in crate::inflight) fn changes(&self) -> &ChangeLog {
        &self.changes
    }

    /// The number of `node`, given it on first sight.
    pub(in crate::inflight) fn node_id(&mut self, node: &str) -> u32 {
        if let Some(&id) = self.node_ids.get(node) {
            return id;
        }
        let id = u32::try_from(self.node_names.len()).unwrap_or(u32::MAX);
        self.node_ids.insert(node.into(), id);
        self.node_names.push(node.into());
        self.per_node.push(NodeExtra::default());
        id
    }

    fn apply(&mut self, entry: &Entry, sign: f64) {
        for (node, p) in entry.shares.iter().map(|s| s.parts()) {
            let Some(total) = self.per_node.get_mut(node as usize) else {
                continue;
            };
            total.add(entry, p, sign);
            // Float residue must not keep a node looking busy forever.
            if total.is_negligible() {
                *total = NodeExtra::default();
            }
            self.changes.record(node);
        }
    }
}

/// The node (ledger number) the entry most likely lands on.
fn most_likely(entry: &Entry) -> Option<u32> {
    entry
        .shares
        .iter()
        .map(|s| s.parts())
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(node, _)| node)
}

#[cfg(test)]
mod properties;

#[cfg(test)]
pub(in crate::inflight) mod tests {
    use super::*;
    use crate::scheduler::Resources;

    pub(in crate::inflight) const TWO_CPU: PodLoad = PodLoad {
        cpu_cores: 2.0,
        network_bytes_per_second: 100.0,
    };

    pub(in crate::inflight) fn requests() -> PodRequests {
        let requested = Resources::parse(&[("cpu", "2"), ("memory", "4Gi")]).expect("quantities");
        PodRequests {
            non_zero_milli_cpu: requested.milli_cpu,
            non_zero_memory: requested.memory,
            requested,
        }
    }

    pub(in crate::inflight) fn shares(n: &[(&str, f64)]) -> Vec<(String, f64)> {
        n.iter().map(|(s, p)| (s.to_string(), *p)).collect()
    }

    #[test]
    fn charge_by_probability_then_bind_moves_everything() {
        let mut l = Ledger::new(Duration::from_secs(60));
        let now = Instant::now();
        l.charge(
            "p1",
            &shares(&[("a", 3.0), ("b", 1.0)]),
            TWO_CPU,
            &requests(),
            now,
        );
        let a = l.extra("a").expect("a");
        assert_eq!((a.cpu_cores, a.milli_cpu, a.pods), (1.5, 1500.0, 0.75));
        assert_eq!(l.extra("b").map(|x| x.cpu_cores), Some(0.5));
        assert!(l.bind("p1", "c"));
        assert_eq!(l.extra("a"), None);
        let c = l.extra("c").expect("c");
        assert_eq!(c.load(), TWO_CPU);
        assert_eq!(
            c.pods, 0.0,
            "requests of a bound pod come from the occupancy"
        );
        assert_eq!(l.shares("p1"), Some(shares(&[("c", 1.0)])));
        assert!(!l.bind("unknown", "c"));
    }

    #[test]
    fn own_decisions_count_as_unheard_until_the_watch_reports_or_drops_them() {
        let mut l = Ledger::new(Duration::from_secs(60));
        let now = Instant::now();
        for id in ["p1", "p2", "p3"] {
            l.charge(id, &shares(&[("a", 1.0)]), TWO_CPU, &requests(), now);
        }
        // Another replica's pod (charged from its note) is never unheard.
        l.charge("other", &shares(&[("a", 1.0)]), TWO_CPU, &requests(), now);
        for id in ["p1", "p2", "p3"] {
            l.remember_decision(id, vec![("a".into(), 0.5)]);
        }
        l.remember_decision("p1", vec![("a".into(), 0.5)]);
        assert_eq!(l.unheard(), 3);
        l.heard("p1");
        l.heard("p1");
        l.heard("other");
        assert_eq!(l.unheard(), 2);
        l.forget("p2");
        assert_eq!(l.unheard(), 1);
        assert!(l.bind("p3", "a"));
        assert_eq!(
            l.unheard(),
            1,
            "a bind seen only by the ledger is not a report"
        );
        l.expire(now + Duration::from_secs(61));
        assert_eq!(l.unheard(), 0);
    }

    #[test]
    fn charge_is_idempotent_per_pod() {
        let mut l = Ledger::new(Duration::from_secs(60));
        let now = Instant::now();
        l.charge("p1", &shares(&[("a", 1.0)]), TWO_CPU, &requests(), now);
        l.charge("p1", &shares(&[("a", 1.0)]), TWO_CPU, &requests(), now);
        assert_eq!(l.extra("a").map(|x| x.load()), Some(TWO_CPU));
        assert_eq!(l.len(), 1);
    }

    #[test]
    fn entries_expire_and_forget_clears() {
        let mut l = Ledger::new(Duration::from_secs(60));
        let now = Instant::now();
        l.charge("p1", &shares(&[("a", 1.0)]), TWO_CPU, &requests(), now);
        l.charge("p2", &shares(&[("a", 1.0)]), TWO_CPU, &requests(), now);
        l.forget("p2");
        assert_eq!(l.extra("a").map(|x| x.load()), Some(TWO_CPU));
        l.expire(now + Duration::from_secs(61));
        assert!(l.is_empty());
        assert_eq!(l.extra("a"), None);
    }

    #[test]
    fn a_forgotten_charge_does_not_expire_a_later_one_of_the_same_pod() {
        let mut l = Ledger::new(Duration::from_secs(60));
        let now = Instant::now();
        l.charge("p1", &shares(&[("a", 1.0)]), TWO_CPU, &requests(), now);
        l.forget("p1");
        let later = now + Duration::from_secs(30);
        l.charge("p1", &shares(&[("b", 1.0)]), TWO_CPU, &requests(), later);
        l.expire(now + Duration::from_secs(61));
        assert_eq!(l.extra("b").map(|x| x.load()), Some(TWO_CPU));
        assert_eq!(l.len(), 1);
        l.expire(later + Duration::from_secs(60));
        assert!(l.is_empty());
        assert_eq!(l.extra("b"), None);
    }

    #[test]
    fn past_the_limit_the_soonest_to_expire_goes_first() {
        let now = Instant::now();
        let mut l = Ledger::new(Duration::from_secs(60)).with_max_entries(2);
        l.charge(
            "old",
            &shares(&[("a", 1.0)]),
            TWO_CPU,
            &requests(),
            now - Duration::from_secs(10),
        );
        l.charge(
            "mid",
            &shares(&[("a", 1.0)]),
            TWO_CPU,
            &requests(),
            now - Duration::from_secs(5),
        );
        l.forget("mid");
        l.charge("mid", &shares(&[("b", 1.0)]), TWO_CPU, &requests(), now);
        l.charge("new", &shares(&[("b", 1.0)]), TWO_CPU, &requests(), now);
        assert_eq!(l.len(), 2);
        assert!(!l.contains("old"), "the oldest charge went first");
        assert!(
            l.contains("mid"),
            "a forgotten earlier charge does not evict a later one"
        );
        assert_eq!(l.evicted(), 1);
        assert_eq!(l.extra("a"), None);
        assert_eq!(l.extra("b").map(|x| x.cpu_cores), Some(4.0));
    }

    #[test]
    fn past_the_landing_budget_the_soonest_to_expire_goes_first() {
        let now = Instant::now();
        let mut l = Ledger::new(Duration::from_secs(60)).with_max_landings(5);
        let wide = shares(&[("a", 0.5), ("b", 0.25), ("c", 0.25)]);
        l.charge(
            "old",
            &wide,
            TWO_CPU,
            &requests(),
            now - Duration::from_secs(10),
        );
        l.charge(
            "mid",
            &shares(&[("a", 0.5), ("d", 0.5)]),
            TWO_CPU,
            &requests(),
            now,
        );
        assert_eq!((l.len(), l.landings()), (2, 5));
        // Three more landings: the oldest charge goes, its three landings with it.
        l.charge("new", &wide, TWO_CPU, &requests(), now);
        assert_eq!((l.len(), l.landings(), l.evicted()), (2, 5, 1));
        assert!(!l.contains("old"));
        assert_eq!(l.extra("c").map(|x| x.cpu_cores), Some(0.5));
        // A bind holds one landing, a forgotten pod none.
        assert!(l.bind("new", "c"));
        assert_eq!(l.landings(), 3);
        l.forget("mid");
        assert_eq!((l.len(), l.landings()), (1, 1));
        // One entry is held whatever its width.
        let widest: Vec<(String, f64)> = (0..8).map(|i| (format!("n{i}"), 0.125)).collect();
        l.charge("widest", &widest, TWO_CPU, &requests(), now);
        assert_eq!((l.len(), l.landings(), l.evicted()), (1, 8, 2));
        assert_eq!(l.extra("n7").map(|x| x.cpu_cores), Some(0.25));
    }

    #[test]
    fn old_pods_and_empty_shares_are_not_recorded() {
        let mut l = Ledger::new(Duration::from_secs(60));
        let long_ago = Instant::now()
            .checked_sub(Duration::from_secs(120))
            .expect("the monotonic clock reaches two minutes back");
        l.charge(
            "old",
            &shares(&[("a", 1.0)]),
            TWO_CPU,
            &requests(),
            long_ago,
        );
        l.charge("none", &[], TWO_CPU, &requests(), Instant::now());
        l.charge(
            "zero",
            &shares(&[("a", 0.0)]),
            TWO_CPU,
            &requests(),
            Instant::now(),
        );
        assert!(l.is_empty());
    }
}
