//! The owner of the decision's state: this replica's world (its charges, beside the watches'
//! picture of the cluster), each pod shape's ranking carried between reviews, the live
//! replicas and the routed scheduler's Lease, behind one lock protocol. Admission hands it a
//! pod's demand and a view; it answers with the decision, charged or not.

mod charging;
mod route;

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::SystemTime;

use crate::config::{Config, SchedulerConfig};
use crate::inflight::shared::SharedWorld;
use crate::inventory::lease::SchedulerLease;
use crate::placement::{Decision, Peers, PodDemand, RankIndexes, Replica};
use crate::view::ClusterView;

pub(crate) use route::Route;

/// Decides for one replica; shared by the server and the `review` command.
pub(crate) struct Decider {
    config: Arc<Config>,
    world: Arc<SharedWorld>,
    /// Breaks near-ties in this replica's own order (see `placement::decide`).
    salt: u64,
    /// The live replicas, when known (see `placement::replicas::replica`); kept current by the
    /// membership watch.
    peers: Arc<Peers>,
    /// Each pod shape's ranking of the nodes, kept up to date with the world.
    indexes: RankIndexes,
    /// The last decision made to be charged predicted a landing (see `charging`).
    charging: AtomicBool,
    /// The routed scheduler's Lease, when routing is gated on it (see [`Route`]).
    lease: Option<Arc<SchedulerLease>>,
    /// The default scheduler, modelled with upstream's defaults, for pods steered to it while
    /// the routed scheduler's Lease is stale; and its rankings.
    fallback_scheduler: SchedulerConfig,
    fallback_indexes: RankIndexes,
}

/// A review's decision and the route it was made for.
pub(crate) struct Decided<'a> {
    pub(crate) decision: Decision,
    pub(crate) route: Route<'a>,
}

impl Decider {
    pub(crate) fn new(config: Arc<Config>, world: Arc<SharedWorld>, salt: u64) -> Self {
        // The ledger tags what this policy counts, for its pods and the watch's.
        let tags_jobs = !config.placement.per_job.is_off();
        world.write().charges.set_tags_jobs(tags_jobs);
        Decider {
            config,
            world,
            salt,
            peers: Arc::default(),
            indexes: RankIndexes::default(),
            charging: AtomicBool::new(true),
            lease: None,
            fallback_scheduler: SchedulerConfig::default(),
            fallback_indexes: RankIndexes::default(),
        }
    }

    /// Routes pods to `scheduler_name` only while `lease` says its scheduler is alive.
    pub(crate) fn routing_by(mut self, lease: Arc<SchedulerLease>) -> Self {
        self.lease = Some(lease);
        self
    }

    /// Reads the live replicas from `peers` (where the membership watch publishes them).
    pub(crate) fn sharing_peers(mut self, peers: Arc<Peers>) -> Self {
        self.peers = peers;
        self
    }

    /// Where the membership watch publishes the live replicas.
    pub(crate) fn peers(&self) -> &Peers {
        &self.peers
    }

    /// This replica as a decision sees it.
    pub(crate) fn replica(&self) -> Replica {
        Replica {
            salt: self.salt,
            set: self.peers.set(),
            alone: self.peers.alone(),
            ..Replica::default()
        }
    }

    pub(crate) fn world(&self) -> &Arc<SharedWorld> {
        &self.world
    }

    /// The decision for a review's pod: the Lease's state is recorded and the decision
    /// charged, unless the review is a dry run.
    pub(crate) fn decide(
        &self,
        demand: &PodDemand<'_>,
        view: &ClusterView,
        id: &str,
        dry_run: bool,
        now: SystemTime,
    ) -> Decided<'_> {
        let route = self.route(now);
        if let (Some(lease), Some(liveness), false) = (&self.lease, route.lease, dry_run) {
            lease.record(liveness, now);
        }
        let decision = self.decide_and_charge(demand, view, id, !dry_run, &route);
        Decided { decision, route }
    }

    /// The decision for `demand` against `view` as things stand, charging nothing.
    pub(crate) fn dry_decide(&self, demand: &PodDemand<'_>, view: &ClusterView) -> Decision {
        self.align_world(view);
        let route = self.route(SystemTime::now());
        self.decide_with(demand, view, &self.world.read(), &route)
    }
}
