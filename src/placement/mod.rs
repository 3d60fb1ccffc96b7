//! Pure placement decisions: from a pod, the cluster view and the policy to ranked nodes and terms.

pub(crate) mod affinity_sums;
pub(crate) mod assess;
pub(crate) mod constraints;
mod context;
pub mod decide;
pub(crate) mod decision;
mod eligibility;
pub(crate) mod estimate;
mod grading;
mod groups_around;
pub mod landing;
pub mod own_spread;
mod partition;
pub(crate) mod per_job;
pub(crate) mod pod_level;
mod predict;
pub(crate) mod rank_index;
mod ranking_source;
pub(crate) mod replica;
pub(crate) mod selector;
mod spread_cover;
mod spread_settle;
pub(crate) mod standing;
pub(crate) mod unsteered;
mod walk;

#[cfg(test)]
mod tests;

pub(crate) use assess::{NodeAssessment, assess_all};
pub use constraints::{Ineligible, PodConstraints};
pub use context::DecisionCtx;
pub use context::PodDemand;
pub use decide::{decide, decide_indexed};
pub use decision::{Decision, RankedNode, TierChoice};
pub use estimate::{Estimate, LoadSource};
pub use rank_index::RankIndexes;
#[cfg(test)]
pub(crate) use replica::ReplicaSet;
pub(crate) use replica::{Peers, Replica};
pub(crate) use unsteered::unsteered_landing;
