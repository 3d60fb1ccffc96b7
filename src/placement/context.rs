//! What one decision reads, gathered once per review: the pod (its demand), the cluster as
//! this replica sees it, what it has steered and not yet seen land (read per node through
//! `InFlight`), and the two configurations.

use crate::cluster::occupancy::NodeRequests;
use crate::config::PlacementConfig;
use crate::config::scheduler::SchedulerConfig;
use crate::inflight::ledger::{NodeExtra, PodLoad};
use crate::inflight::world::World;
use crate::placement::eligible::constraints::PodConstraints;
use crate::scheduler::cycle::PodFacts;
use crate::view::{ClusterView, NodeView};

/// The inputs of one decision, passed whole to each of its steps.
#[derive(Clone, Copy)]
pub struct DecisionCtx<'a> {
    pub(crate) pod: &'a PodDemand<'a>,
    pub(crate) view: &'a ClusterView,
    /// This replica's charges and the watches' picture of the cluster. Always one: a replica
    /// starts with an empty world, so no filter that counts other pods is switched off by its
    /// absence.
    pub(crate) world: &'a World,
    pub(crate) policy: &'a PlacementConfig,
    pub(crate) scheduler: &'a SchedulerConfig,
    /// The charges and bound requests read per node of `view`.
    pub(super) inflight: InFlight<'a>,
}

impl<'a> DecisionCtx<'a> {
    pub fn new(
        pod: &'a PodDemand<'a>,
        view: &'a ClusterView,
        world: &'a World,
        policy: &'a PlacementConfig,
        scheduler: &'a SchedulerConfig,
    ) -> Self {
        DecisionCtx {
            pod,
            view,
            world,
            policy,
            scheduler,
            inflight: InFlight::new(world, view),
        }
    }
}

/// The pod as placement sees it: its filters, its requests, its real load.
#[derive(Debug, Default)]
pub struct PodDemand<'a> {
    pub constraints: PodConstraints<'a>,
    /// Requests and the scheduler-facing parts of the spec.
    pub facts: PodFacts<'a>,
    /// Estimated real load it adds to its node.
    pub load: PodLoad,
    /// Where `load` came from.
    pub source: LoadSource,
}

/// The charges and bound requests of each node of one view: by position when the world is aligned with
/// the view (see [`World::align`]), else by name. Both give the same numbers.
#[derive(Clone, Copy)]
pub(super) struct InFlight<'a> {
    world: &'a World,
    pub(crate) aligned: bool,
}

impl<'a> InFlight<'a> {
    pub(crate) fn new(world: &'a World, view: &ClusterView) -> Self {
        InFlight {
            world,
            aligned: world.is_aligned(view.id),
        }
    }

    pub(crate) fn extra(&self, position: usize, node: &NodeView) -> Option<NodeExtra> {
        let world = self.world;
        if self.aligned {
            world.extra_at(position)
        } else {
            world.charges.extra(&node.name)
        }
    }

    pub(crate) fn bound(&self, position: usize, node: &NodeView) -> Option<&'a NodeRequests> {
        let world = self.world;
        if self.aligned {
            world.bound_at(position)
        } else {
            world.cluster.occupancy.node(&node.name)
        }
    }
}

/// Where an estimate came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LoadSource {
    /// The pod's CPU request and the configured network estimate.
    #[default]
    Request,
    /// A percentile of this many running siblings' readings.
    Siblings(usize),
}

impl std::fmt::Display for LoadSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LoadSource::Request => f.write_str("request"),
            LoadSource::Siblings(n) => write!(f, "siblings:{n}"),
        }
    }
}
