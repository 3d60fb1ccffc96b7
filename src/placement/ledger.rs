//! The in-flight ledger: load of pods steered recently that the metrics cannot show yet.
//!
//! Metrics lag by a scrape interval plus a rate window, so without this every pod of a burst
//! would see the same "coolest" node. Each steered pod charges its estimated load to the nodes it
//! was steered to (split evenly: we do not know which one the scheduler picks) until it is bound,
//! then to its real node, until `ttl` after it was steered.
//!
//! A pod bound to none of the nodes it was steered to tells us the scheduler would not take
//! those nodes (most often: their resource requests are full, which the metrics cannot show).
//! They are "passed over" and not preferred again until that pod's entry expires, so the
//! next pods of the burst are steered to nodes that can take them.

// Looked up for many nodes on every decision: foldhash is much faster than SipHash on short
// keys and still seeded per process.
use foldhash::{HashMap, HashMapExt};
use std::time::{Duration, Instant};

/// Estimated load one pod adds to a node.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct PodLoad {
    pub cpu_cores: f64,
    pub network_bytes_per_second: f64,
}

impl PodLoad {
    fn scaled(self, share: f64) -> Self {
        PodLoad {
            cpu_cores: self.cpu_cores * share,
            network_bytes_per_second: self.network_bytes_per_second * share,
        }
    }

    fn add(&mut self, other: PodLoad) {
        self.cpu_cores += other.cpu_cores;
        self.network_bytes_per_second += other.network_bytes_per_second;
    }
}

#[derive(Debug, Clone)]
struct Entry {
    nodes: Vec<String>,
    load: PodLoad,
    expires: Instant,
    bound: bool,
}

#[derive(Debug, Clone)]
pub struct Ledger {
    ttl: Duration,
    entries: HashMap<String, Entry>,
    per_node: HashMap<String, PodLoad>,
    /// Nodes a steered pod was bound away from, until when.
    passed_over: HashMap<String, Instant>,
}

impl Ledger {
    pub fn new(ttl: Duration) -> Self {
        Ledger {
            ttl,
            entries: HashMap::new(),
            per_node: HashMap::new(),
            passed_over: HashMap::new(),
        }
    }

    /// Records a steered pod, identified by `id`, whose load goes to one of `nodes`.
    /// `steered_at` may lie in the past (a pod another replica steered); nothing older than
    /// `ttl` is recorded. An existing entry for `id` is left as it is.
    pub fn charge(&mut self, id: &str, nodes: &[String], load: PodLoad, steered_at: Instant) {
        if nodes.is_empty() || self.entries.contains_key(id) {
            return;
        }
        let Some(expires) = steered_at.checked_add(self.ttl) else {
            return;
        };
        if expires <= Instant::now() {
            return;
        }
        let entry = Entry {
            nodes: nodes.to_vec(),
            load,
            expires,
            bound: false,
        };
        self.apply(&entry, 1.0);
        self.entries.insert(id.to_string(), entry);
    }

    /// The pod `id` was bound to `node`: its whole load counts there from now on.
    /// Returns false when the ledger has no such pod.
    pub fn bind(&mut self, id: &str, node: &str) -> bool {
        let Some(entry) = self.entries.get(id).cloned() else {
            return false;
        };
        if entry.bound && entry.nodes.first().map(String::as_str) == Some(node) {
            return true;
        }
        if !entry.bound && !entry.nodes.iter().any(|n| n == node) {
            for skipped in &entry.nodes {
                let until = self
                    .passed_over
                    .entry(skipped.clone())
                    .or_insert(entry.expires);
                *until = (*until).max(entry.expires);
            }
        }
        self.apply(&entry, -1.0);
        let bound = Entry {
            nodes: vec![node.to_string()],
            bound: true,
            ..entry
        };
        self.apply(&bound, 1.0);
        self.entries.insert(id.to_string(), bound);
        true
    }

    /// The pod is gone (deleted, or failed before running).
    pub fn forget(&mut self, id: &str) {
        if let Some(entry) = self.entries.remove(id) {
            self.apply(&entry, -1.0);
        }
    }

    /// Drops entries the metrics have absorbed by now.
    pub fn expire(&mut self, now: Instant) {
        let expired: Vec<String> = self
            .entries
            .iter()
            .filter(|(_, e)| e.expires <= now)
            .map(|(id, _)| id.clone())
            .collect();
        for id in expired {
            self.forget(&id);
        }
        self.passed_over.retain(|_, until| *until > now);
    }

    /// A pod steered to `node` was recently bound elsewhere: do not prefer it for now.
    pub fn passed_over(&self, node: &str) -> bool {
        self.passed_over.contains_key(node)
    }

    /// The in-flight load counted on `node`.
    pub fn extra(&self, node: &str) -> Option<PodLoad> {
        self.per_node.get(node).copied()
    }

    /// Nodes that carry in-flight load.
    pub fn nodes(&self) -> impl Iterator<Item = (&str, PodLoad)> {
        self.per_node.iter().map(|(n, l)| (n.as_str(), *l))
    }

    pub fn contains(&self, id: &str) -> bool {
        self.entries.contains_key(id)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn apply(&mut self, entry: &Entry, sign: f64) {
        let share = sign / entry.nodes.len() as f64;
        for node in &entry.nodes {
            let total = self.per_node.entry(node.clone()).or_default();
            total.add(entry.load.scaled(share));
            // Float residue must not keep a node looking busy forever.
            if total.cpu_cores.abs() < 1e-9 && total.network_bytes_per_second.abs() < 1e-3 {
                self.per_node.remove(node);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TWO_CPU: PodLoad = PodLoad {
        cpu_cores: 2.0,
        network_bytes_per_second: 100.0,
    };

    fn names(n: &[&str]) -> Vec<String> {
        n.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn charge_splits_then_bind_moves_everything() {
        let mut l = Ledger::new(Duration::from_secs(60));
        let now = Instant::now();
        l.charge("p1", &names(&["a", "b"]), TWO_CPU, now);
        assert_eq!(l.extra("a").map(|x| x.cpu_cores), Some(1.0));
        assert_eq!(l.extra("b").map(|x| x.cpu_cores), Some(1.0));
        assert!(l.bind("p1", "c"));
        assert_eq!(l.extra("a"), None);
        assert_eq!(l.extra("c"), Some(TWO_CPU));
        assert!(!l.bind("unknown", "c"));
    }

    #[test]
    fn binding_elsewhere_passes_over_the_steered_nodes_until_expiry() {
        let mut l = Ledger::new(Duration::from_secs(60));
        let now = Instant::now();
        l.charge("p1", &names(&["a", "b"]), TWO_CPU, now);
        l.charge("p2", &names(&["c"]), TWO_CPU, now);
        assert!(l.bind("p1", "z"));
        assert!(l.passed_over("a") && l.passed_over("b"));
        assert!(l.bind("p2", "c"));
        assert!(!l.passed_over("c"), "bound where steered");
        // Re-binding an already bound pod says nothing new.
        assert!(l.bind("p2", "y"));
        assert!(!l.passed_over("c"));
        l.expire(now + Duration::from_secs(61));
        assert!(!l.passed_over("a"));
    }

    #[test]
    fn charge_is_idempotent_per_pod() {
        let mut l = Ledger::new(Duration::from_secs(60));
        let now = Instant::now();
        l.charge("p1", &names(&["a"]), TWO_CPU, now);
        l.charge("p1", &names(&["a"]), TWO_CPU, now);
        assert_eq!(l.extra("a"), Some(TWO_CPU));
        assert_eq!(l.len(), 1);
    }

    #[test]
    fn entries_expire_and_forget_clears() {
        let mut l = Ledger::new(Duration::from_secs(60));
        let now = Instant::now();
        l.charge("p1", &names(&["a"]), TWO_CPU, now);
        l.charge("p2", &names(&["a"]), TWO_CPU, now);
        l.forget("p2");
        assert_eq!(l.extra("a"), Some(TWO_CPU));
        l.expire(now + Duration::from_secs(61));
        assert!(l.is_empty());
        assert_eq!(l.extra("a"), None);
    }

    #[test]
    fn old_pods_are_not_recorded() {
        let mut l = Ledger::new(Duration::from_secs(60));
        let long_ago = Instant::now()
            .checked_sub(Duration::from_secs(120))
            .expect("the monotonic clock reaches two minutes back");
        l.charge("old", &names(&["a"]), TWO_CPU, long_ago);
        assert!(l.is_empty());
    }
}
