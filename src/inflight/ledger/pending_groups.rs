//! The groups of pending pods, one copy per template.

use std::sync::Arc;

use crate::hashing::HashSet;
use crate::scheduler::pods::PodGroup;

/// The groups of pending pods, one copy per template: reviews of several jobs arrive
/// interleaved, and a copy per pod (its labels and terms) costs about a kilobyte of every
/// ledger entry.
#[derive(Debug, Default, Clone)]
pub(crate) struct PendingGroups {
    shared: HashSet<Arc<PodGroup>>,
    /// How many were kept after the last sweep of the groups no pod holds any more: the next
    /// sweep comes when that many more were added (64 at least).
    kept_at_sweep: usize,
}

impl PendingGroups {
    /// The shared copy of `group`: the one held already, or `intern`'s (the bound pods' copy,
    /// or a new one), kept from now on.
    pub(crate) fn share(
        &mut self,
        group: PodGroup,
        intern: impl FnOnce(PodGroup) -> Arc<PodGroup>,
    ) -> Arc<PodGroup> {
        if let Some(shared) = self.shared.get(&group) {
            return shared.clone();
        }
        if self.shared.len() >= (2 * self.kept_at_sweep).max(64) {
            self.shared.retain(|group| Arc::strong_count(group) > 1);
            self.kept_at_sweep = self.shared.len();
        }
        let shared = intern(group);
        self.shared.insert(shared.clone());
        shared
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::pod_groups::PodGroups;
    use k8s_openapi::api::core::v1::Pod;

    fn pod(namespace: &str, labels: serde_json::Value) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"namespace": namespace, "labels": labels},
            "spec": {"containers": []}
        }))
        .expect("pod")
    }

    /// Pending pods of two jobs reviewed in turn share one copy per job, and a copy no pod
    /// holds any more goes at a sweep.
    #[test]
    fn pending_pods_of_interleaved_jobs_share_one_group_per_job() {
        let mut pending = PendingGroups::default();
        let bound = PodGroups::default();
        let job = |name: &str| PodGroup::of(&pod("flink", serde_json::json!({"app": name})));
        let mut held = Vec::new();
        for _ in 0..10 {
            for name in ["a", "b"] {
                held.push(pending.share(job(name), |g| bound.intern(g)));
            }
        }
        assert!(Arc::ptr_eq(&held[0], &held[18]));
        assert!(Arc::ptr_eq(&held[1], &held[19]));
        assert!(!Arc::ptr_eq(&held[0], &held[1]));
        assert_eq!(pending.shared.len(), 2);
        // Job "a"'s pods are gone; 63 more jobs come: at 64 groups a sweep drops "a" and keeps
        // "b", still held.
        held.retain(|g| g.labels.get("app").map(String::as_str) == Some("b"));
        for k in 0..63 {
            held.push(pending.share(job(&format!("job-{k}")), |g| bound.intern(g)));
        }
        assert_eq!(pending.shared.len(), 64, "63 jobs and b");
        let b_again = pending.share(job("b"), |g| bound.intern(g));
        assert!(Arc::ptr_eq(&held[0], &b_again));
    }
}
