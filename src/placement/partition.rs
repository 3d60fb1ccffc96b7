//! This replica's share of the nodes for one decision: the live replicas' partition, the level
//! the other replicas' unheard pods are taken to have filled theirs to, and the pods the scores
//! that count pods count on their nodes.

use super::replica::{Partition, Replica};
use super::standing::{InFlight, PodDemand, mirrored_level};
use crate::config::PlacementConfig;
use crate::view::ClusterView;

/// This replica's nodes, and the level the other replicas' unheard pods are taken to have
/// filled theirs to.
pub(super) fn partition_for(
    replica: &Replica,
    view: &ClusterView,
    eligible: &[u32],
    inflight: InFlight<'_>,
    pod: &PodDemand<'_>,
    policy: &PlacementConfig,
) -> Option<Partition> {
    let mut partition = replica.partition(view)?;
    if replica.mirrors() {
        (partition.foreign_level, partition.filled) = mirrored_level(
            view,
            eligible,
            inflight,
            pod,
            policy,
            &partition.owned,
            replica.unheard_elsewhere(),
        );
        partition.filled.sort_unstable();
    }
    partition.mirrored = partition.filled.clone();
    if !partition.others_idle && super::pod_level::scores_apply(&pod.facts) {
        // Another replica's node ranks as if its owner had just put a pod there in the scores
        // that count pods too: a pod that keeps apart from its kind does not take the node
        // its owner took a moment ago, which the scheduler would then rank below a free one.
        let mut pods = vec![0u32; view.nodes.len()];
        for &(position, count) in &partition.filled {
            pods[position] = count;
        }
        for &position in eligible {
            let position = position as usize;
            if partition.weighs_as_foreign(position) {
                pods[position] = pods[position].max(1);
            }
        }
        partition.mirrored = (pods.into_iter().enumerate())
            .filter(|&(_, count)| count > 0)
            .collect();
    }
    Some(partition)
}
