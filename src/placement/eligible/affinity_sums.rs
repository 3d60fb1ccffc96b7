//! InterPodAffinity's sums per topology domain, kept from one decision to the next for the
//! kinds of pod a webhook sees again and again (a burst's TaskManagers share one template) and
//! brought up to date with the pods each group gained and lost since, instead of read again
//! from every group of the world at each review.
//!
//! The sums are those `pod_level::around_affinity_scores` builds from scratch; the walk
//! (`decide`) still builds them so, and the index path that reads these is held to it.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::hashing::HashMap;
use crate::inflight::world::{GroupMark, World};
use crate::scheduler::cycle::PodFacts;
use crate::scheduler::pod_affinity::{AffinityScore, AffinitySums};
use crate::scheduler::pods::DEFAULT_HARD_POD_AFFINITY_WEIGHT;
use crate::scheduler::pods::PodGroup;
use crate::view::ClusterView;

use crate::placement::eligible::groups_around::{self, view_domains};

/// Kinds of pod kept; one more starts the set over (a steady webhook sees a few templates).
const KINDS_KEPT: usize = 64;

/// The sums kept, by the kind of pod scored (namespace, labels and terms).
#[derive(Debug, Default)]
pub(crate) struct AffinitySumsCache {
    kinds: Mutex<HashMap<PodGroup, Arc<Mutex<Kept>>>>,
}

#[derive(Debug, Default)]
struct Kept {
    /// Where the world's group changes were when `sums` was last brought up to date.
    mark: Option<GroupMark>,
    sums: AffinitySums,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl AffinitySumsCache {
    /// InterPodAffinity's scores of `candidates` (view positions) for this pod, as
    /// [`crate::placement::eligible::pod_level::around_affinity_scores`] gives them.
    pub(crate) fn scores(
        &self,
        facts: &PodFacts<'_>,
        view: &ClusterView,
        world: &World,
        mirrored: &[(usize, u32)],
        candidates: &[usize],
    ) -> Option<Vec<i64>> {
        self.read(facts, view, world, mirrored, |score| {
            score.scores(candidates)
        })
        .flatten()
    }

    /// What `read` makes of InterPodAffinity's score for this pod (the kept sums brought up
    /// to date), with `mirrored` pods like this one counted for this read only; `None` when
    /// the world is not aligned with `view`.
    pub(crate) fn read<R>(
        &self,
        facts: &PodFacts<'_>,
        view: &ClusterView,
        world: &World,
        mirrored: &[(usize, u32)],
        read: impl FnOnce(&AffinityScore<'_, '_>) -> R,
    ) -> Option<R> {
        if !world.is_aligned(view.id) {
            return None;
        }
        let kind = PodGroup::of_facts(facts);
        let kept = {
            let mut kinds = lock(&self.kinds);
            if kinds.len() >= KINDS_KEPT && !kinds.contains_key(&kind) {
                kinds.clear();
            }
            kinds.entry(kind).or_default().clone()
        };
        // A panic mid-update leaves no mark: the sums are then built again.
        let mut kept = lock(&kept);
        let mark = kept.mark.take();
        let sums = std::mem::take(&mut kept.sums);
        let now = world.group_mark();
        let domains = |key: &str| view_domains(view, key);
        let mut score = match mark.and_then(|mark| world.group_changes_since(mark)) {
            Some(changes) => {
                let mut score = AffinityScore::with_sums(
                    facts,
                    world.cluster.namespace_labels(),
                    DEFAULT_HARD_POD_AFFINITY_WEIGHT,
                    &domains,
                    sums,
                );
                let reads = groups_around::reads_group(facts);
                for (group, position, pods) in changes {
                    if reads(&group) {
                        score.add_pods(group.kind(), [(position, pods)]);
                    }
                }
                score
            }
            None => groups_around::around_affinity_score(facts, world, &domains),
        };
        groups_around::add_mirrored(&mut score, facts, mirrored, 1);
        let read = read(&score);
        // Taken out again: the kept sums count only the world's pods.
        groups_around::add_mirrored(&mut score, facts, mirrored, -1);
        kept.sums = score.into_sums();
        kept.mark = Some(now);
        Some(read)
    }
}
