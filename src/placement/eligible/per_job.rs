//! A job's own spread (`placement.per_job`, off by default): one job's TaskManagers are not
//! concentrated beyond a bound on a node or a zone. Its pods count where the pod watch has them
//! (running or bound) and where its steered, not yet bound pods most likely land.

use crate::config::PerJob;
use crate::inflight::world::World;
use crate::jobs::taskmanager_app as app_of;
use crate::scheduler::PodFacts;
use crate::scheduler::pods::PodGroup;
use crate::view::ClusterView;

use crate::well_known::ZONE;

/// The job's pods on each node, by position in `view` (which `world` is aligned with).
fn pods_per_node(facts: &PodFacts<'_>, app: &str, view: &ClusterView, world: &World) -> Vec<u32> {
    let mut per_node = vec![0u32; view.nodes.len()];
    let of_job = |group: &PodGroup| {
        &*group.namespace == facts.namespace && app_of(&group.labels) == Some(app)
    };
    crate::placement::eligible::groups_around::for_each_group(world, of_job, |_, placed| {
        for (position, count) in placed {
            if let Some(n) = per_node.get_mut(position) {
                *n = n.saturating_add(count);
            }
        }
    });
    per_node
}

/// Of `allowed` (view positions), the nodes within the job's bounds: none holding
/// `max_per_node` of the job's pods, none in a zone that would hold more than `max_per_zone`
/// of them with this pod. A bound that would leave no node is not applied. `None` when no
/// bound applies (off, not a TaskManager, the world not aligned) or none excludes a node.
pub(crate) fn within_bounds(
    allowed: &[u32],
    facts: &PodFacts<'_>,
    view: &ClusterView,
    world: &World,
    per_job: &PerJob,
) -> Option<Vec<u32>> {
    if per_job.is_off() || !world.is_aligned(view.id) {
        return None;
    }
    let app = app_of(facts.labels())?;
    let per_node = pods_per_node(facts, app, view, world);
    let mut kept: Vec<u32> = allowed.to_vec();
    let mut narrow = |keep: &dyn Fn(usize) -> bool| {
        let narrower: Vec<u32> = kept.iter().copied().filter(|&p| keep(p as usize)).collect();
        if !narrower.is_empty() {
            kept = narrower;
        }
    };
    if let Some(max) = per_job.max_per_node {
        narrow(&|p| per_node.get(p).copied().unwrap_or(0) < max);
    }
    if let Some(share) = per_job.max_per_zone {
        let zones = crate::placement::eligible::groups_around::view_domains(view, ZONE);
        let mut per_zone = vec![0u64; zones.count()];
        for (position, &pods) in per_node.iter().enumerate() {
            if let Some(zone) = zones.of_node(position) {
                per_zone[zone] += u64::from(pods);
            }
        }
        let with_this_one = per_zone.iter().sum::<u64>() as f64 + 1.0;
        narrow(&|p| {
            zones
                .of_node(p)
                .is_none_or(|zone| (per_zone[zone] as f64 + 1.0) <= share * with_this_one + 1e-9)
        });
    }
    (kept.len() < allowed.len()).then_some(kept)
}
