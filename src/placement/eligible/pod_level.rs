//! The scheduler's filters that count other pods: PodTopologySpread's `DoNotSchedule`
//! constraints and InterPodAffinity's required terms (the pod's own, and existing pods'
//! required anti-affinity against it).
//!
//! Unlike the node filters (`constraints`), their answer changes with every pod bound or
//! steered, so it is not memoised per view: it is worked out for each decision, and only for
//! pods whose eligibility depends on other pods. Bound pods count where they are (the pod
//! watch); pods charged and not yet bound count where they most likely land, which is what
//! the scheduler will see by the time it reaches this pod.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::inflight::world::World;
use crate::scheduler::cycle::PodFacts;
use crate::scheduler::cycle::{INTER_POD_AFFINITY_WEIGHT, POD_TOPOLOGY_SPREAD_WEIGHT};
use crate::scheduler::pod_affinity::{AffinityScore, AffinityUnfit};
use crate::scheduler::pods::PodGroup;
use crate::scheduler::pods::{Labels, term_selects};
use crate::scheduler::topology_spread::{has_spread_score, spread_scores};
use crate::scheduler::{ClusterPods, ExistingPod, PodFilters, SpreadUnfit, Unfit};
use crate::view::ClusterView;

use crate::placement::eligible::affinity_sums::AffinitySumsCache;
use crate::placement::eligible::constraints::Ineligible;
use crate::placement::eligible::groups_around::{
    Surroundings, add_mirrored, around_affinity_score, for_each_bound_group,
    for_each_pending_group, reads_group, view_domains,
};

/// Whether the pod's eligibility depends on the pods around it: it has a `DoNotSchedule`
/// spread constraint or a required pod (anti-)affinity term, or some bound pod's required
/// anti-affinity selects it.
pub(crate) fn applies(facts: &PodFacts<'_>, world: &World) -> bool {
    facts
        .spread_constraints
        .iter()
        .any(|c| c.when_unsatisfiable == "DoNotSchedule")
        || !facts.required_affinity().is_empty()
        || !facts.required_anti_affinity().is_empty()
        || world
            .cluster
            .groups
            .with_required_anti_affinity()
            .iter()
            .any(|group| anti_affinity_selects(group, facts, world.cluster.namespace_labels()))
}

/// The pod has terms the scheduler scores by the pods around it: a `ScheduleAnyway` spread
/// constraint, or preferred pod affinity or anti-affinity.
pub(crate) fn scores_apply(facts: &PodFacts<'_>) -> bool {
    spread_scored(facts)
        || !facts.preferred_affinity().is_empty()
        || !facts.preferred_anti_affinity().is_empty()
}

/// The pod has a `ScheduleAnyway` spread constraint: PodTopologySpread's score reads the
/// pods around it one by one.
fn spread_scored(facts: &PodFacts<'_>) -> bool {
    facts
        .spread_constraints
        .iter()
        .any(|c| c.when_unsatisfiable != "DoNotSchedule")
}

/// A required anti-affinity term of the group's pods selects the pod.
fn anti_affinity_selects(
    group: &PodGroup,
    facts: &PodFacts<'_>,
    namespaces: &BTreeMap<String, Labels>,
) -> bool {
    let namespace_labels = namespaces.get(facts.namespace);
    group.terms.as_ref().is_some_and(|terms| {
        terms.required_anti_affinity.iter().any(|term| {
            term_selects(
                term,
                &group.namespace,
                facts.namespace,
                namespace_labels,
                facts.labels(),
            )
        })
    })
}

/// The pods the plugins may read for this pod, at their positions in `view` (which `world`
/// is aligned with), one entry per group and node counting its pods there: a burst's
/// thousands of pods of one template are matched against the pod's terms once per node, not
/// once per pod.
pub(crate) fn pods_around(
    facts: &PodFacts<'_>,
    view: &ClusterView,
    world: &World,
) -> Vec<ExistingPod> {
    let mut pods = Vec::new();
    if !world.is_aligned(view.id) {
        return pods;
    }
    let reads = reads_group(facts);
    let pod = |group: &PodGroup, (node, count): (usize, u32)| ExistingPod {
        group: group.clone(),
        node,
        terminating: false,
        count,
    };
    // Bound first, then pending: the pending pods of a zone spread settle into the domains
    // the scheduler will let them into (see `spread_settle`).
    for_each_bound_group(world, &reads, &mut |group, placed| {
        pods.extend(placed.map(|at| pod(group, at)));
    });
    let first_pending = pods.len();
    for_each_pending_group(world, &reads, &mut |group, placed| {
        pods.extend(placed.map(|at| pod(group, at)));
    });
    crate::placement::eligible::spread_settle::settle_pending(
        facts,
        &view.nodes,
        world.cluster.namespace_labels(),
        &mut pods,
        first_pending,
    );
    pods
}

/// InterPodAffinity's scores of `candidates` (view positions) for this pod, read group by
/// group from the world without listing the pods (see [`AffinityScore`]), with `mirrored`
/// pods like this one counted too (see [`restrict`]).
pub(crate) fn around_affinity_scores(
    facts: &PodFacts<'_>,
    view: &ClusterView,
    world: &World,
    mirrored: &[(usize, u32)],
    candidates: &[usize],
) -> Option<Vec<i64>> {
    read_around(facts, view, world, mirrored, |score| {
        score.scores(candidates)
    })
    .flatten()
}

/// What `read` makes of InterPodAffinity's score for this pod over every group of `world`
/// and `mirrored`; `None` when the world is not aligned with `view`.
fn read_around<R>(
    facts: &PodFacts<'_>,
    view: &ClusterView,
    world: &World,
    mirrored: &[(usize, u32)],
    read: impl FnOnce(&AffinityScore<'_, '_>) -> R,
) -> Option<R> {
    if !world.is_aligned(view.id) {
        return None;
    }
    let domains = |key: &str| view_domains(view, key);
    let mut score = around_affinity_score(facts, world, &domains);
    add_mirrored(&mut score, facts, mirrored, 1);
    Some(read(&score))
}

/// How the scores that count other pods read them.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Around<'a> {
    /// Every group of the world, and `mirrored`: pods like this one that other replicas are
    /// taken to have placed unheard, (position, pods).
    Read { mirrored: &'a [(usize, u32)] },
    /// InterPodAffinity's sums kept from earlier decisions and brought up to date, and
    /// `mirrored` as in `Read`.
    Kept {
        sums: &'a AffinitySumsCache,
        mirrored: &'a [(usize, u32)],
    },
}

/// The filters of one pod against the pods around it, ready to check each node.
pub(crate) struct AroundFilters<'a> {
    nodes: &'a [crate::view::NodeView],
    filters: PodFilters<'a>,
}

impl<'a> AroundFilters<'a> {
    /// `namespaces`: every namespace's labels (the world's, from the namespace watch).
    pub(crate) fn new(
        facts: &PodFacts<'a>,
        view: &'a ClusterView,
        pods: &'a [ExistingPod],
        namespaces: &'a BTreeMap<String, Labels>,
    ) -> Self {
        let nodes = &view.nodes;
        let cluster = ClusterPods::new(pods, namespaces);
        AroundFilters {
            nodes,
            filters: PodFilters::new(facts, nodes, &cluster),
        }
    }

    /// Why the node at `position` cannot take the pod, if it cannot.
    pub(crate) fn check(&self, facts: &PodFacts<'_>, position: usize) -> Result<(), Ineligible> {
        let Some(node) = self.nodes.get(position) else {
            return Ok(());
        };
        self.filters.check(facts, node).map_err(ineligible)
    }
}

fn ineligible(unfit: Unfit) -> Ineligible {
    match unfit {
        Unfit::TopologySpread(SpreadUnfit::MissingLabel) => Ineligible::SpreadLabel,
        Unfit::TopologySpread(SpreadUnfit::Skew) => Ineligible::SpreadSkew,
        Unfit::InterPodAffinity(AffinityUnfit::Affinity) => Ineligible::PodAffinity,
        Unfit::InterPodAffinity(AffinityUnfit::AntiAffinity) => Ineligible::PodAntiAffinity,
        Unfit::InterPodAffinity(AffinityUnfit::ExistingAntiAffinity) => {
            Ineligible::ExistingAntiAffinity
        }
        // The node filters are `constraints`' job; not produced here.
        Unfit::Unschedulable | Unfit::Taint | Unfit::NodeAffinity | Unfit::Resources => {
            Ineligible::RequiredAffinity
        }
    }
}

/// What the plugins that count other pods leave of the eligible nodes (view positions, in
/// order).
#[derive(Debug, Clone)]
pub(crate) struct Restriction {
    /// Those their filters pass: the nodes the scheduler finds feasible, which set how much of
    /// the cluster its sample holds.
    pub(crate) passing: Arc<[u32]>,
    /// Those of `passing` their scores keep (see [`best_scored`]): the nodes worth naming.
    pub(crate) kept: Arc<[u32]>,
    /// The eligible nodes their filters refuse, with the filter's reason, in order:
    /// `review --explain` reads them back rather than filtering again.
    pub(crate) refused: Vec<(u32, Ineligible)>,
}

/// `eligible` (view positions) less the nodes the filters that count other pods reject, and
/// less the nodes the scores of those plugins put too far behind the best (see
/// [`best_scored`]); `None` when the pod has no such filter or score.
pub(crate) fn restrict(
    at: Surroundings<'_>,
    eligible: &Arc<[u32]>,
    around: Around<'_>,
    affinity_gap: i64,
) -> Option<Restriction> {
    let Surroundings { facts, view, world } = at;
    let filtered = applies(facts, world);
    let scored = scores_apply(facts);
    if !filtered && !scored {
        return None;
    }
    // PodTopologySpread reads the pods one by one; InterPodAffinity's score reads the groups.
    let pods = if filtered || spread_scored(facts) {
        pods_around(facts, view, world)
    } else {
        Vec::new()
    };
    let mut refused = Vec::new();
    let passing: Arc<[u32]> = if filtered {
        let filters = AroundFilters::new(facts, view, &pods, world.cluster.namespace_labels());
        eligible
            .iter()
            .copied()
            .filter(|&p| match filters.check(facts, p as usize) {
                Ok(()) => true,
                Err(why) => {
                    refused.push((p, why));
                    false
                }
            })
            .collect()
    } else {
        Arc::clone(eligible)
    };
    let kept = if scored {
        best_scored(at, &passing, &pods, around, affinity_gap).into()
    } else {
        passing.clone()
    };
    Some(Restriction {
        passing,
        kept,
        refused,
    })
}

/// The nodes of `allowed` whose PodTopologySpread and InterPodAffinity scores (weighted, as
/// the scheduler normalises them over the nodes that pass filtering) trail the best by less
/// than half of `affinity_gap`, the NodeAffinity points between the first tier and the
/// next. A node further behind would be named in vain: the scheduler would prefer an
/// unnamed or lower-tier node that these plugins favour, and the landing would be mispredicted.
/// `pods`: the pods around, for PodTopologySpread's score.
pub(crate) fn best_scored(
    at: Surroundings<'_>,
    allowed: &[u32],
    pods: &[ExistingPod],
    around: Around<'_>,
    affinity_gap: i64,
) -> Vec<u32> {
    let Surroundings { facts, view, world } = at;
    let nodes = &view.nodes;
    let margin = (affinity_gap / 2).max(1);
    let cluster = ClusterPods::new(pods, world.cluster.namespace_labels());
    if !has_spread_score(facts, &cluster) {
        // InterPodAffinity alone: kept by its raw scores' range, without the scores.
        let weight = INTER_POD_AFFINITY_WEIGHT;
        let kept = match around {
            Around::Kept { sums, mirrored } => {
                sums.keep_best(at, mirrored, allowed, weight, margin)
            }
            Around::Read { mirrored } => read_around(facts, view, world, mirrored, |score| {
                score.keep_best(allowed, weight, margin)
            }),
        };
        return kept.flatten().unwrap_or_else(|| allowed.to_vec());
    }
    let candidates: Vec<usize> = allowed.iter().map(|&p| p as usize).collect();
    let spread = spread_scores(facts, nodes, &candidates, &cluster);
    let inter_pod = match around {
        Around::Kept { sums, mirrored } => sums.scores(facts, view, world, mirrored, &candidates),
        Around::Read { mirrored } => {
            around_affinity_scores(facts, view, world, mirrored, &candidates)
        }
    };
    let weighted = |scores: &Option<Vec<i64>>, k: usize, weight: i64| {
        scores
            .as_ref()
            .and_then(|s| s.get(k))
            .map_or(0, |v| v * weight)
    };
    let total = |k: usize| {
        weighted(&spread, k, POD_TOPOLOGY_SPREAD_WEIGHT)
            + weighted(&inter_pod, k, INTER_POD_AFFINITY_WEIGHT)
    };
    let Some(best) = (0..candidates.len()).map(total).max() else {
        return Vec::new();
    };
    allowed
        .iter()
        .enumerate()
        .filter(|&(k, _)| best - total(k) < margin)
        .map(|(_, &p)| p)
        .collect()
}

/// The domains (topology values) of the pod's `DoNotSchedule` spread constraints, for each
/// node position: a burst's later pods may find the first tier's domain closed by pods this
/// replica has not heard of yet (another replica's), so every open domain keeps a named node.
pub(crate) fn spread_domains(
    facts: &PodFacts<'_>,
    view: &ClusterView,
) -> Vec<(String, Vec<usize>)> {
    let mut out = Vec::new();
    for constraint in facts
        .spread_constraints
        .iter()
        .filter(|c| c.when_unsatisfiable == "DoNotSchedule")
    {
        let key = &constraint.topology_key;
        if key == crate::well_known::HOSTNAME {
            // One node per domain: covering every domain would name every node.
            continue;
        }
        let mut domains: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        for (position, node) in view.nodes.iter().enumerate() {
            if let Some(value) = node.labels.get(key) {
                domains.entry(value.as_str()).or_default().push(position);
            }
        }
        out.extend(
            domains
                .into_iter()
                .map(|(value, positions)| (format!("{key}={value}"), positions)),
        );
    }
    out
}
