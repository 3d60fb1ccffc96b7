//! A model of the default kube-scheduler (v1.33–v1.35): pure code, used by placement to
//! predict where a pod lands, by the closed-loop tests and by `simulate`.
//!
//! Modelled, with upstream's integer arithmetic and checked against upstream's unit-test
//! vectors: filters NodeUnschedulable, TaintToleration, NodeAffinity (nodeSelector and
//! required terms) and NodeResourcesFit (cpu, memory, storage, extended resources, pod count;
//! init containers, sidecars and overhead counted as upstream does); scores NodeAffinity,
//! NodeResourcesFit (LeastAllocated, MostAllocated, RequestedToCapacityRatio),
//! BalancedAllocation and TaintToleration; `numFeasibleNodesToFind` with a rotating start.
//!
//! Not modelled: PodTopologySpread and InterPodAffinity (Flink TaskManagers carry no spread
//! constraints or pod affinity by default), ImageLocality, ports, volumes, preemption.

pub mod cores;
pub mod cycle;
pub mod node;
pub mod order;
pub mod pod_affinity;
pub mod pods;
pub mod quantity;
pub mod resources;
pub mod scores;
pub mod terms;
pub mod topology_spread;

pub use cycle::{Code, Cycle, PodFacts, PodFilters, Scheduler, Unfit, num_feasible_nodes_to_find};
pub use node::ModelNode;
pub use pod_affinity::AffinityUnfit;
pub use pods::{AffinityTerms, ClusterPods, ExistingPod};
pub use resources::{PodRequests, Resources};
pub use terms::Taint;
pub use topology_spread::{SpreadDefaults, SpreadUnfit};
