//! The ranking of every node for one pod shape, kept up to date as the world changes.
//!
//! A decision needs the coolest few hundred feasible nodes, the hottest few, and how many are
//! feasible. Walking every node for that costs the same at every review; but between two
//! reviews the world changes on the few dozen nodes one charge touches. So each pod shape
//! (filters, requests, load) keeps its nodes in ordered sets, and a review re-assesses only
//! the nodes the world's change logs name since the shape's last review: a decision costs
//! O(changed nodes x log n) plus what it names, whatever the world holds.

use std::cmp::Ordering;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::hashing::HashMap;
use crate::view::memo::MemoKey;

use crate::config::{HeatWeights, HotThresholds, PlacementConfig};
use crate::inflight::world::{ChangeMark, World};
use crate::placement::context::{DecisionCtx, PodDemand};
use crate::placement::eligible::affinity_sums::AffinitySumsCache;
use crate::placement::rank::standing::{Candidate, PodHeat, Standing, standing, tie_breakers};
use crate::placement::replicas::replica::{Partition, Replica};
use crate::scheduler::resources::PodRequests;
use crate::view::ClusterView;

mod ranking;

pub(in crate::placement) use ranking::Restricted;

/// Pod shapes indexed per view; others are decided by walking every node. A burst is a few
/// shapes (one per Flink job), and each index holds a few hundred kilobytes at 5,000 nodes.
pub(crate) const MAX_SHAPES: usize = 16;

/// One shape's index, built on first use.
pub(crate) type Slot = Arc<Mutex<Option<RankIndex>>>;

/// The indexes of the current view, by pod shape.
#[derive(Debug, Default)]
pub struct RankIndexes {
    shapes: Mutex<Shapes>,
    /// InterPodAffinity's sums for the kinds of pod decided lately (see `affinity_sums`).
    affinity_sums: AffinitySumsCache,
}

#[derive(Debug, Default)]
struct Shapes {
    view_id: u64,
    by_key: HashMap<ShapeKey, Slot>,
}

impl RankIndexes {
    pub(crate) fn affinity_sums(&self) -> &AffinitySumsCache {
        &self.affinity_sums
    }

    /// The index slot for `pod`'s shape in `view`; `None` when the shape cannot be keyed or
    /// [`MAX_SHAPES`] are indexed already. A new view drops the indexes of the last.
    pub(crate) fn slot(
        &self,
        view: &ClusterView,
        pod: &PodDemand<'_>,
        policy: &PlacementConfig,
        replica: &Replica,
    ) -> Option<Slot> {
        let key = shape_key(pod, policy, replica)?;
        let mut shapes = self.shapes.lock().unwrap_or_else(|e| e.into_inner());
        if shapes.view_id != view.id {
            shapes.by_key.clear();
            shapes.view_id = view.id;
        }
        if let Some(slot) = shapes.by_key.get(&key) {
            return Some(slot.clone());
        }
        if shapes.by_key.len() >= MAX_SHAPES {
            return None;
        }
        let slot = Slot::default();
        shapes.by_key.insert(key, slot.clone());
        Some(slot)
    }

    /// A slot's index, exclusively. A panic while updating may have left it half-updated:
    /// then it is dropped and built again.
    pub(crate) fn lock(slot: &Slot) -> MutexGuard<'_, Option<RankIndex>> {
        slot.lock().unwrap_or_else(|e| {
            let mut index = e.into_inner();
            *index = None;
            index
        })
    }

    #[cfg(test)]
    /// Shapes indexed for the current view.
    pub(crate) fn len(&self) -> usize {
        self.shapes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .by_key
            .len()
    }

    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What makes two pods rank the nodes alike: the filters, requests and load of the pod, the
/// policy that ranks, and the replica's own order and partition.
#[derive(Debug, PartialEq, Eq, Hash)]
struct ShapeKey {
    filters: MemoKey,
    requests: PodRequests,
    /// The load, uncertainty, thresholds and weights, by their bits: distinct values stay
    /// distinct keys, without formatting a float at each review.
    figures: [u64; 9],
    replica: String,
}

/// Everything a node's standing depends on besides the node and the world.
fn shape_key(pod: &PodDemand<'_>, policy: &PlacementConfig, replica: &Replica) -> Option<ShapeKey> {
    // Taken apart whole: a field added to either must be added to the key.
    let HotThresholds {
        cpu: hot_cpu,
        network: hot_network,
        memory: hot_memory,
    } = policy.hot;
    let HeatWeights {
        cpu,
        network,
        memory,
    } = policy.weights;
    Some(ShapeKey {
        filters: pod.constraints.memo_key()?,
        requests: pod.facts.requests.clone(),
        figures: [
            pod.load.cpu_cores,
            pod.load.network_bytes_per_second,
            policy.uncertainty,
            hot_cpu,
            hot_network,
            hot_memory,
            cpu,
            network,
            memory,
        ]
        .map(f64::to_bits),
        replica: replica.key(),
    })
}

/// A candidate in decision order.
#[derive(Debug, Clone, Copy)]
struct ByOrder(Candidate);

impl PartialEq for ByOrder {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for ByOrder {}
impl PartialOrd for ByOrder {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for ByOrder {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.order(&other.0)
    }
}

/// A hot node, hottest first, then by name.
#[derive(Debug, Clone, Copy)]
struct ByHeat {
    heat: f64,
    name_rank: u32,
    index: usize,
}

impl PartialEq for ByHeat {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for ByHeat {}
impl PartialOrd for ByHeat {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for ByHeat {
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .heat
            .total_cmp(&self.heat)
            .then(self.name_rank.cmp(&other.name_rank))
            .then(self.index.cmp(&other.index))
    }
}

/// Each node's place in name order, once per view.
fn name_ranks(view: &ClusterView) -> Arc<[u32]> {
    view.memo.get_or_compute(MemoKey::NameRanks, || {
        let mut by_name: Vec<usize> = (0..view.nodes.len()).collect();
        by_name.sort_by(|&a, &b| view.nodes[a].name.cmp(&view.nodes[b].name));
        let mut ranks = vec![0; view.nodes.len()];
        for (rank, &index) in by_name.iter().enumerate() {
            ranks[index] = u32::try_from(rank).unwrap_or(u32::MAX);
        }
        ranks
    })
}

/// One pod shape's nodes, ranked as of the world's `mark`.
#[derive(Debug)]
pub(crate) struct RankIndex {
    view_id: u64,
    mark: ChangeMark,
    /// By view position; `None` for nodes the shape's filters exclude.
    standings: Vec<Option<Standing>>,
    cool: BTreeSet<ByOrder>,
    hot: BTreeSet<ByHeat>,
    /// The hot nodes again, least bad for this pod first (named when every node is hot).
    hot_order: BTreeSet<ByOrder>,
    feasible: usize,
    ties: Arc<[u32]>,
    /// This replica's nodes and how it weighs the others'; `None` when it decides alone.
    partition: Option<Partition>,
    name_ranks: Arc<[u32]>,
}

impl RankIndex {
    /// The index in `slot`, built or brought up to date with `world` (aligned with `view`).
    pub(crate) fn up_to_date<'s>(
        slot: &'s mut Option<RankIndex>,
        ctx: &DecisionCtx<'_>,
        world: &World,
        replica: &Replica,
    ) -> &'s mut RankIndex {
        let view = ctx.view;
        let current = slot.take().filter(|index| index.view_id == view.id);
        let caught_up = current.and_then(|mut index| {
            let mut changed = world.changed_positions(index.mark)?;
            // Past one change per node, building afresh is cheaper.
            if changed.len() > index.standings.len() {
                return None;
            }
            changed.sort_unstable();
            changed.dedup();
            for position in changed {
                index.reassess(ctx, position);
            }
            index.mark = world.change_mark();
            Some(index)
        });
        slot.insert(caught_up.unwrap_or_else(|| Self::build(ctx, world, replica)))
    }

    fn build(ctx: &DecisionCtx<'_>, world: &World, replica: &Replica) -> RankIndex {
        let DecisionCtx { pod, view, .. } = *ctx;
        let mut index = RankIndex {
            view_id: view.id,
            mark: world.change_mark(),
            standings: vec![None; view.nodes.len()],
            cool: BTreeSet::new(),
            hot: BTreeSet::new(),
            hot_order: BTreeSet::new(),
            feasible: 0,
            ties: tie_breakers(view, replica.salt),
            partition: replica.partition(view),
            name_ranks: name_ranks(view),
        };
        for &position in
            crate::placement::eligible::constraints::eligible_nodes(&pod.constraints, view).iter()
        {
            let position = position as usize;
            let now = standing(ctx, position, index.partition.as_ref());
            index.insert(position, now);
            index.standings[position] = Some(now);
        }
        index
    }

    /// Moves the node at `position` (if eligible) to where it stands now.
    fn reassess(&mut self, ctx: &DecisionCtx<'_>, position: usize) {
        let Some(Some(before)) = self.standings.get(position).copied() else {
            return;
        };
        let now = standing(ctx, position, self.partition.as_ref());
        if now == before {
            return;
        }
        self.remove(position, before);
        self.insert(position, now);
        self.standings[position] = Some(now);
    }

    fn candidate(&self, index: usize, heat: PodHeat) -> ByOrder {
        ByOrder(Candidate {
            index,
            heat,
            tie: self.ties[index],
        })
    }

    fn by_heat(&self, index: usize, heat: f64) -> ByHeat {
        ByHeat {
            heat,
            name_rank: self.name_ranks[index],
            index,
        }
    }

    fn insert(&mut self, index: usize, standing: Standing) {
        match standing {
            Standing::Full => return,
            Standing::Hot { heat, pod } => {
                self.hot_order.insert(self.candidate(index, pod));
                self.hot.insert(self.by_heat(index, heat))
            }
            Standing::Cool(heat) => self.cool.insert(self.candidate(index, heat)),
        };
        self.feasible += 1;
    }

    fn remove(&mut self, index: usize, standing: Standing) {
        match standing {
            Standing::Full => return,
            Standing::Hot { heat, pod } => {
                self.hot_order.remove(&self.candidate(index, pod));
                self.hot.remove(&self.by_heat(index, heat))
            }
            Standing::Cool(heat) => self.cool.remove(&self.candidate(index, heat)),
        };
        self.feasible -= 1;
    }
}
