//! The world's pod groups the plugins read for a pod, and InterPodAffinity's score fed them.

use std::sync::Arc;

use crate::inflight::world::World;
use crate::scheduler::PodFacts;
use crate::scheduler::domains::Domains;
use crate::scheduler::pod_affinity::AffinityScore;
use crate::scheduler::pods::DEFAULT_HARD_POD_AFFINITY_WEIGHT;
use crate::scheduler::pods::PodGroup;
use crate::view::ClusterView;
use crate::view::memo::MemoKey;

/// A pod among the pods the world places around it, in a view the world is aligned with:
/// what the filters and scores that count pods read.
#[derive(Clone, Copy)]
pub(crate) struct Surroundings<'a> {
    pub(crate) facts: &'a PodFacts<'a>,
    pub(crate) view: &'a ClusterView,
    pub(crate) world: &'a World,
}

/// The pod's terms may select pods of other namespaces.
fn looks_beyond_namespace(facts: &PodFacts<'_>) -> bool {
    let terms = facts
        .required_affinity()
        .iter()
        .chain(facts.required_anti_affinity());
    let weighted = facts
        .preferred_affinity()
        .iter()
        .chain(facts.preferred_anti_affinity())
        .map(|w| &w.pod_affinity_term);
    terms.chain(weighted).any(|t| {
        t.namespace_selector.is_some() || t.namespaces.as_ref().is_some_and(|n| !n.is_empty())
    })
}

/// Each group of pods the plugins may read for this pod, with its pods by position in the
/// view the world is aligned with: those of its namespace, and those whose terms reach out to
/// other pods.
fn for_each_group_around<'l>(
    facts: &PodFacts<'_>,
    world: &'l World,
    visit: impl FnMut(&'l Arc<PodGroup>, &mut dyn Iterator<Item = (usize, u32)>),
) {
    for_each_group(world, reads_group(facts), visit);
}

/// Whether the plugins may read the pods of a group for this pod: those of its namespace, and
/// those whose terms reach out to other pods (all, when its own terms look beyond its
/// namespace).
pub(in crate::placement) fn reads_group<'f>(
    facts: &'f PodFacts<'_>,
) -> impl Fn(&PodGroup) -> bool + 'f {
    let everywhere = looks_beyond_namespace(facts);
    move |group: &PodGroup| {
        everywhere || &*group.namespace == facts.namespace || group.terms.is_some()
    }
}

/// Each group `keep` selects, with its pods by position in the view the world is aligned
/// with: bound groups (the pod watch) first, then pending ones (steered, counted where they
/// most likely land), each group's pods side by side.
pub(in crate::placement) fn for_each_group<'l>(
    world: &'l World,
    keep: impl Fn(&PodGroup) -> bool,
    mut visit: impl FnMut(&'l Arc<PodGroup>, &mut dyn Iterator<Item = (usize, u32)>),
) {
    for_each_bound_group(world, &keep, &mut visit);
    for_each_pending_group(world, &keep, &mut visit);
}

/// [`for_each_group`]'s bound groups (the pod watch).
pub(in crate::placement) fn for_each_bound_group<'l>(
    world: &'l World,
    keep: &impl Fn(&PodGroup) -> bool,
    visit: &mut impl FnMut(&'l Arc<PodGroup>, &mut dyn Iterator<Item = (usize, u32)>),
) {
    for (group, on_node) in world.cluster.groups.groups() {
        if keep(group) {
            let mut placed = on_node.iter().filter_map(|&(number, count)| {
                Some((world.position_of_occupancy_number(number)?, count))
            });
            visit(group, &mut placed);
        }
    }
}

/// [`for_each_group`]'s pending groups (steered, counted where they most likely land).
pub(in crate::placement) fn for_each_pending_group<'l>(
    world: &'l World,
    keep: &impl Fn(&PodGroup) -> bool,
    visit: &mut impl FnMut(&'l Arc<PodGroup>, &mut dyn Iterator<Item = (usize, u32)>),
) {
    for (group, mut placed) in world.pending_by_group() {
        if keep(group) {
            visit(group, &mut placed);
        }
    }
}

/// Counts `mirrored` pods like this one in `score` (`sign` 1), or takes them out again (-1).
pub(in crate::placement) fn add_mirrored(
    score: &mut AffinityScore<'_, '_>,
    facts: &PodFacts<'_>,
    mirrored: &[(usize, u32)],
    sign: i64,
) {
    if mirrored.is_empty() {
        return;
    }
    let alike = PodGroup::of_facts(facts);
    let pods = mirrored
        .iter()
        .map(|&(position, pods)| (position, sign * i64::from(pods)));
    score.add_pods(alike.kind(), pods);
}

/// InterPodAffinity's score for this pod fed every group of `world` it reads.
pub(in crate::placement) fn around_affinity_score<'p, 'd>(
    facts: &'d PodFacts<'p>,
    world: &'d World,
    domains: &'d dyn Fn(&str) -> Domains,
) -> AffinityScore<'p, 'd> {
    let mut score = AffinityScore::new(
        facts,
        world.cluster.namespace_labels(),
        DEFAULT_HARD_POD_AFFINITY_WEIGHT,
        domains,
    );
    for_each_group_around(facts, world, |group, placed| {
        score.add(group.kind(), placed);
    });
    score
}

/// The domains of topology key `key` over the view's nodes, numbered once per view.
pub(in crate::placement) fn view_domains(view: &ClusterView, key: &str) -> Domains {
    Domains::from(
        view.memo
            .get_or_compute(MemoKey::Domains(key.to_string()), || {
                Domains::numbered(&view.nodes, key)
            }),
    )
}

/// Pods steered and not yet bound in the groups this pod's terms read: each may take, before
/// the scheduler reaches this pod, a node its scores would favour.
pub(in crate::placement) fn pending_read(facts: &PodFacts<'_>, world: &World) -> usize {
    world.pending_pods(reads_group(facts))
}
