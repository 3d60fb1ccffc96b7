//! What `/readyz` answers: set by the background sources, read by the HTTP handlers.
//!
//! Ready means the replica can steer pods as well as it ever will: a node-load snapshot exists
//! and, when the cluster is reachable, the node and pod watches have completed their first
//! list. Readiness only decides whether the Service sends this replica reviews; a replica that
//! does get a review still answers it, failing open when it must.

use std::sync::atomic::{AtomicBool, Ordering};

#[derive(Debug, Default)]
pub struct Readiness {
    /// A kube client was found at start: the node and pod watches run.
    cluster_access: AtomicBool,
    nodes_synced: AtomicBool,
    pods_synced: AtomicBool,
}

impl Readiness {
    pub fn new() -> Self {
        Self::default()
    }

    /// The node and pod watches run; readiness now waits for their first lists.
    pub(crate) fn set_cluster_access(&self) {
        self.cluster_access.store(true, Ordering::Release);
    }

    /// The node watch has completed its first list and published the node inventory.
    pub(crate) fn set_nodes_synced(&self) {
        self.nodes_synced.store(true, Ordering::Release);
    }

    /// The pod watch has completed its first list and charged the pods it found.
    pub(crate) fn set_pods_synced(&self) {
        self.pods_synced.store(true, Ordering::Release);
    }

    pub(crate) fn has_cluster_access(&self) -> bool {
        self.cluster_access.load(Ordering::Acquire)
    }

    pub(crate) fn nodes_synced(&self) -> bool {
        self.nodes_synced.load(Ordering::Acquire)
    }

    pub(crate) fn pods_synced(&self) -> bool {
        self.pods_synced.load(Ordering::Acquire)
    }

    /// Both watches have completed their first list (false without cluster access).
    pub(crate) fn inventory_synced(&self) -> bool {
        self.nodes_synced() && self.pods_synced()
    }

    /// `Ok` when ready; otherwise what is missing, in one line.
    pub(crate) fn check(&self, has_snapshot: bool) -> Result<(), String> {
        let mut missing = Vec::new();
        if !has_snapshot {
            missing.push("no node-load snapshot yet");
        }
        if self.has_cluster_access() {
            if !self.nodes_synced() {
                missing.push("node list not complete");
            }
            if !self.pods_synced() {
                missing.push("pod list not complete");
            }
        }
        if missing.is_empty() {
            Ok(())
        } else {
            Err(missing.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_cluster_access_a_snapshot_is_enough() {
        let r = Readiness::new();
        assert_eq!(r.check(false), Err("no node-load snapshot yet".into()));
        assert_eq!(r.check(true), Ok(()));
        assert!(!r.inventory_synced());
    }

    #[test]
    fn with_cluster_access_both_lists_are_needed() {
        let r = Readiness::new();
        r.set_cluster_access();
        assert_eq!(
            r.check(true),
            Err("node list not complete, pod list not complete".into())
        );
        r.set_nodes_synced();
        assert_eq!(r.check(true), Err("pod list not complete".into()));
        assert!(!r.inventory_synced());
        r.set_pods_synced();
        assert!(r.inventory_synced());
        assert_eq!(r.check(true), Ok(()));
        assert_eq!(r.check(false), Err("no node-load snapshot yet".into()));
    }
}
