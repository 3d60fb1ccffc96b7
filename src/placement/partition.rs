//! This replica's share of the nodes for one decision: the live replicas' partition, the level
//! the other replicas' unheard pods are taken to have filled theirs to, and the pods the scores
//! that count pods count on their nodes.

use crate::placement::context::DecisionCtx;
use crate::placement::rank::standing::{load_with, pod_heat, room_with};
use crate::placement::replicas::replica::{Partition, Replica};

/// This replica's nodes, and the level the other replicas' unheard pods are taken to have
/// filled theirs to.
pub(super) fn partition_for(
    ctx: &DecisionCtx<'_>,
    replica: &Replica,
    eligible: &[u32],
) -> Option<Partition> {
    let DecisionCtx { pod, view, .. } = *ctx;
    let mut partition = replica.partition(view)?;
    if replica.mirrors() {
        (partition.foreign_level, partition.filled) =
            mirrored_level(ctx, eligible, &partition.owned, replica.unheard_elsewhere());
        partition.filled.sort_unstable();
    }
    partition.mirrored = partition.filled.clone();
    if !partition.others_idle && crate::placement::eligible::pod_level::scores_apply(&pod.facts) {
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

/// A node the mirror may fill: its position, its rank with no pod, what one pod adds, and
/// how many pods its requests leave room for.
struct FillNode {
    index: usize,
    empty: f64,
    step: f64,
    room: usize,
}

impl FillNode {
    /// Pods the node takes under `level`.
    fn takes(&self, level: f64) -> usize {
        (((level - self.empty) / self.step).floor().max(0.0) as usize).min(self.room)
    }
}

/// The other replicas' eligible nodes (`owned` 0) where `pod`'s requests fit.
fn foreign_fill_nodes(ctx: &DecisionCtx<'_>, eligible: &[u32], owned: &[u32]) -> Vec<FillNode> {
    let DecisionCtx {
        pod,
        view,
        policy,
        inflight,
        ..
    } = *ctx;
    let mut nodes = Vec::new();
    for index in eligible.iter().map(|&i| i as usize) {
        if owned.get(index) != Some(&0) {
            continue;
        }
        let node = &view.nodes[index];
        let extra = inflight.extra(index, node);
        let room = room_with(node, inflight.bound(index, node), extra, &pod.facts);
        if room == 0 {
            continue;
        }
        let load = load_with(node, extra, policy.uncertainty);
        // In levels a pod leaves behind (bottleneck, not the halfway rank).
        let before = pod_heat(node, &load, pod, policy, 0.0);
        let empty = before.rank;
        let step = pod_heat(node, &load, pod, policy, 1.0).bottleneck - before.bottleneck;
        if step.is_finite() && empty.is_finite() && step > 0.0 {
            nodes.push(FillNode {
                index,
                empty,
                step,
                room,
            });
        }
    }
    nodes
}

/// The rank `pods` pods like `pod`, water-filled over the other replicas' eligible nodes
/// (`owned` 0) where its requests fit, fill them to: the lowest level under which that many
/// fit, each node taking pods at the rank one adds there, as many as its requests leave room
/// for. Minus infinity when none fits, infinity when they do not all fit. With the level, the
/// pods each of those nodes is taken to have received: (position, pods).
fn mirrored_level(
    ctx: &DecisionCtx<'_>,
    eligible: &[u32],
    owned: &[u32],
    pods: usize,
) -> (f64, Vec<(usize, u32)>) {
    if pods == 0 {
        return (f64::NEG_INFINITY, Vec::new());
    }
    let nodes = foreign_fill_nodes(ctx, eligible, owned);
    let Some(lowest) = nodes.iter().map(|n| n.empty).min_by(f64::total_cmp) else {
        return (f64::NEG_INFINITY, Vec::new());
    };
    let fill = |level: f64| -> usize {
        nodes
            .iter()
            .map(|n| n.takes(level))
            .fold(0usize, usize::saturating_add)
    };
    let level = if fill(f64::MAX) < pods {
        // More pods than fit: the owners' nodes are as full as they get.
        f64::INFINITY
    } else {
        let widest = nodes.iter().map(|n| n.step).fold(0.0, f64::max);
        let highest = nodes.iter().map(|n| n.empty).fold(lowest, f64::max);
        let (mut low, mut high) = (lowest, highest + (pods as f64 + 1.0) * widest);
        for _ in 0..48 {
            let middle = (low + high) / 2.0;
            if fill(middle) >= pods {
                high = middle;
            } else {
                low = middle;
            }
        }
        high
    };
    let placed = nodes
        .iter()
        .filter_map(|n| {
            let pods = u32::try_from(n.takes(level)).unwrap_or(u32::MAX);
            (pods > 0).then_some((n.index, pods))
        })
        .collect();
    (level, placed)
}
