//! What one decision reads, gathered once per review: the pod, the cluster as this replica
//! sees it, what it has steered and not yet seen land, and the two configurations.

use super::standing::{InFlight, PodDemand};
use crate::config::PlacementConfig;
use crate::config::scheduler::SchedulerConfig;
use crate::inflight::ledger::Ledger;
use crate::view::ClusterView;

/// The inputs of one decision, passed whole to each of its steps.
#[derive(Clone, Copy)]
pub struct DecisionCtx<'a> {
    pub pod: &'a PodDemand<'a>,
    pub view: &'a ClusterView,
    /// This replica's charges and the pod watch's picture; `None` before either exists.
    pub ledger: Option<&'a Ledger>,
    pub policy: &'a PlacementConfig,
    pub scheduler: &'a SchedulerConfig,
    /// The ledger's counts read per node of `view`.
    pub(super) inflight: InFlight<'a>,
}

impl<'a> DecisionCtx<'a> {
    pub fn new(
        pod: &'a PodDemand<'a>,
        view: &'a ClusterView,
        ledger: Option<&'a Ledger>,
        policy: &'a PlacementConfig,
        scheduler: &'a SchedulerConfig,
    ) -> Self {
        DecisionCtx {
            pod,
            view,
            ledger,
            policy,
            scheduler,
            inflight: InFlight::new(ledger, view),
        }
    }
}
