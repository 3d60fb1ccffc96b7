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
use crate::scheduler::pod_affinity::{AffinityScore, AffinitySums, CarriedRaws};
use crate::scheduler::pods::DEFAULT_HARD_POD_AFFINITY_WEIGHT;
use crate::scheduler::pods::PodGroup;
use crate::view::ClusterView;

use crate::placement::eligible::groups_around::{self, Surroundings, view_domains};

/// Kinds of pod kept; one more starts the set over (a steady webhook sees a few templates).
const KINDS_KEPT: usize = 64;

/// Nodes touched since the raw scores were carried that are kept to bring them up to date,
/// at least: past as many as there are candidates, they are carried afresh.
const TOUCHED_KEPT: usize = 64;

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
    /// The raw scores of the nodes last kept from, as of `sums` less the nodes of `touched`.
    carried: Option<CarriedRaws>,
    /// Nodes (view positions) whose pods changed in `sums` since `carried` was brought up
    /// to date.
    touched: Vec<usize>,
}

impl Kept {
    /// The sums were built afresh: nothing carried stands.
    fn start_over(&mut self) {
        self.carried = None;
        self.touched.clear();
    }

    fn touch(&mut self, positions: impl IntoIterator<Item = usize>) {
        self.touched.extend(positions);
        // Past one change per candidate, carrying afresh is cheaper.
        let Some(carried) = &self.carried else {
            self.touched.clear();
            return;
        };
        let most = carried.candidates().len().max(TOUCHED_KEPT);
        if self.touched.len() > most {
            self.touched.sort_unstable();
            self.touched.dedup();
            if self.touched.len() > most {
                self.start_over();
            }
        }
    }

    /// What `score` (these sums, brought up to date) keeps of `candidates`, by the carried raw
    /// scores brought up to date or carried afresh.
    fn keep_best(
        &mut self,
        score: &AffinityScore<'_, '_>,
        candidates: &[u32],
        weight: i64,
        margin: i64,
    ) -> Option<Vec<u32>> {
        let touched = std::mem::take(&mut self.touched);
        let carried = match self.carried.take() {
            Some(mut carried) if carried.fits(candidates, score) => {
                score.bring_up(&mut carried, &touched);
                carried
            }
            _ => score.carry(candidates),
        };
        let kept = score.keep_best_carried(&carried, weight, margin);
        self.carried = Some(carried);
        kept
    }
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
        self.read(facts, view, world, mirrored, |score, _| {
            score.scores(candidates)
        })
        .flatten()
    }

    /// What InterPodAffinity's score for this pod keeps of `candidates` (view positions), as
    /// [`AffinityScore::keep_best`] keeps them, from the raw scores carried since the last
    /// such read for this kind of pod over the same candidates, brought up to date with the
    /// domains whose pods changed; `None` when the world is not aligned with `view`.
    pub(crate) fn keep_best(
        &self,
        at: Surroundings<'_>,
        mirrored: &[(usize, u32)],
        candidates: &[u32],
        weight: i64,
        margin: i64,
    ) -> Option<Option<Vec<u32>>> {
        let Surroundings { facts, view, world } = at;
        self.read(facts, view, world, mirrored, |score, kept| {
            kept.keep_best(score, candidates, weight, margin)
        })
    }

    /// What `read` makes of InterPodAffinity's score for this pod (the kept sums brought up
    /// to date), with `mirrored` pods like this one counted for this read only; `None` when
    /// the world is not aligned with `view`.
    fn read<R>(
        &self,
        facts: &PodFacts<'_>,
        view: &ClusterView,
        world: &World,
        mirrored: &[(usize, u32)],
        read: impl FnOnce(&AffinityScore<'_, '_>, &mut Kept) -> R,
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
                        kept.touch([position]);
                    }
                }
                score
            }
            None => {
                kept.start_over();
                groups_around::around_affinity_score(facts, world, &domains)
            }
        };
        let mirrored_at = || mirrored.iter().map(|&(position, _)| position);
        groups_around::add_mirrored(&mut score, facts, mirrored, 1);
        kept.touch(mirrored_at());
        let read = read(&score, &mut kept);
        // Taken out again: the kept sums count only the world's pods.
        groups_around::add_mirrored(&mut score, facts, mirrored, -1);
        kept.touch(mirrored_at());
        kept.sums = score.into_sums();
        kept.mark = Some(now);
        Some(read)
    }
}

#[cfg(test)]
impl AffinitySumsCache {
    /// The raw scores carried for this kind of pod, brought up to date with the nodes touched
    /// since, beside the same raw scores carried afresh from every group of `world` over the
    /// same candidates; `None` when nothing is carried.
    pub(crate) fn carried_and_fresh(
        &self,
        at: Surroundings<'_>,
    ) -> Option<(CarriedRaws, CarriedRaws)> {
        let Surroundings { facts, view, world } = at;
        let kept = lock(&self.kinds).get(&PodGroup::of_facts(facts))?.clone();
        let kept = lock(&kept);
        let mut carried = kept.carried.clone()?;
        let domains = |key: &str| view_domains(view, key);
        let score = AffinityScore::with_sums(
            facts,
            world.cluster.namespace_labels(),
            DEFAULT_HARD_POD_AFFINITY_WEIGHT,
            &domains,
            kept.sums.clone(),
        );
        score.bring_up(&mut carried, &kept.touched);
        let fresh = groups_around::around_affinity_score(facts, world, &domains);
        let fresh = fresh.carry(carried.candidates());
        Some((carried, fresh))
    }
}
