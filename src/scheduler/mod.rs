//! A model of the default kube-scheduler (v1.33–v1.36): pure code, used by placement to
//! predict where a pod lands, by the closed-loop tests and by `simulate`.
//!
//! Modelled, with upstream's integer arithmetic and checked against upstream's unit-test
//! vectors: filters NodeUnschedulable, TaintToleration, NodeAffinity (nodeSelector and
//! required terms) and NodeResourcesFit (cpu, memory, storage, extended resources, pod count;
//! init containers, sidecars and overhead counted as upstream does); scores NodeAffinity,
//! NodeResourcesFit (LeastAllocated, MostAllocated, RequestedToCapacityRatio),
//! BalancedAllocation (by the release's formula: v1.36's change in balance the pod brings, or
//! v1.35's balance with the pod, [`scores::balanced_allocation`]) and TaintToleration;
//! `numFeasibleNodesToFind` with a rotating start.
//!
//! With the cluster's pods in view ([`ClusterPods`], passed to [`Scheduler::schedule_with`],
//! [`cycle::PodFilters`] and [`cycle::score_with`]), also PodTopologySpread
//! ([`topology_spread`]: DoNotSchedule filter with `minDomains`, `matchLabelKeys`,
//! `nodeAffinityPolicy` / `nodeTaintsPolicy`; ScheduleAnyway score; the system or listed default
//! constraints for pods without their own that a Service, ReplicaSet, StatefulSet or
//! ReplicationController selects, given as [`PodFacts::owner_selectors`]) and InterPodAffinity
//! ([`pod_affinity`]: required affinity, anti-affinity and existing pods' anti-affinity against
//! the pod; preferred terms both ways and existing pods' required affinity at
//! `hardPodAffinityWeight` in the score; `namespaces` and `namespaceSelector` against the
//! namespace labels given). Both score at the default profile's weight 2. [`Scheduler::schedule`]
//! keeps nothing in view, so these two plugins do nothing there.
//!
//! Not modelled: ImageLocality, ports, volumes, preemption; plugin weights for
//! PodTopologySpread and InterPodAffinity other than 2; InterPodAffinity's
//! `ignorePreferredTermsOfExistingPods`; the owner selectors' `matchExpressions` (owners are
//! given as label maps). A PodTopologySpread selector `{}` counts no existing pod, as v1.35's
//! `countPodsMatchSelector` has it.
//!
//! Against a real v1.36.3 kube-scheduler (`tests/real_cluster/differential.rs`, random clusters
//! and pods, its default profile scoring every feasible node) the model with v1.36's
//! BalancedAllocation formula agrees on every bind and every unschedulable pod (500 of 500);
//! with v1.35's it placed 20 of those 500 pods otherwise.

mod affinity_memo;
pub(crate) mod cores;
pub(crate) mod cycle;
pub(crate) mod domains;
pub(crate) mod node;
pub(crate) mod order;
pub(crate) mod pod;
pub(crate) mod pod_affinity;
pub(crate) mod pods;
mod preferred_terms;
pub(crate) mod quantity;
pub(crate) mod resources;
pub(crate) mod scores;
pub(crate) mod spread_defaults;
pub(crate) mod status;
pub(crate) mod terms;
pub(crate) mod topology_spread;

#[cfg(test)]
mod tests;

pub(crate) use cycle::{Cycle, Scheduler, Unfit};
pub use cycle::{NodeScore, PodFilters, filter_with, num_feasible_nodes_to_find, score_with};
pub use node::ModelNode;
pub use pod::PodFacts;
#[cfg(test)]
pub(crate) use pod_affinity::AffinityUnfit;
pub use pods::{AffinityTerms, ClusterPods, ExistingPod, Labels, PodGroup};
pub use resources::{PodRequests, Resources};
#[cfg(test)]
pub(crate) use spread_defaults::SpreadDefaults;
#[cfg(test)]
pub(crate) use status::Code;
pub use terms::Taint;
pub(crate) use topology_spread::SpreadUnfit;
