//! Pure placement decisions: from a pod, the cluster view and the policy to ranked nodes and terms.
//!
//! The decision sits here: its context (`context`), the nodes it may name (`eligibility`, with
//! this replica's share, `partition`), the decision itself (`decide`, `decision`, reading its
//! rankings through `ranking_source`), where the pod is predicted to land (`predict`, and
//! `unsteered` for a pod left to the scheduler) and `review --explain`'s rows (`assess`). What
//! it draws on has a room of its own; a room reads no file above it but `context`, and none
//! reads a room that reads it (`rank/` reads the three others, which read no room):
//! - `eligible/`: what a pod's constraints and the scheduler's filters that count other pods allow;
//! - `rank/`: how the nodes rank for the pod, walked or read from the rank index, and the weight
//!   of each named term;
//! - `landing/`: the scheduler's sample and scores among the nodes named;
//! - `replicas/`: the live replica set.

pub(crate) mod assess;
mod context;
pub mod decide;
pub(crate) mod decision;
mod eligibility;
pub mod eligible;
pub mod landing;
mod partition;
mod predict;
pub(crate) mod rank;
mod ranking_source;
pub(crate) mod replicas;
pub(crate) mod unsteered;

#[cfg(test)]
mod tests;

pub(crate) use assess::{NodeAssessment, assess_all};
pub use context::DecisionCtx;
pub use context::{LoadSource, PodDemand};
pub use decide::{decide, decide_indexed};
pub use decision::{Decision, RankedNode, TierChoice};
pub use eligible::constraints::{Ineligible, PodConstraints};
pub use rank::rank_index::RankIndexes;
#[cfg(test)]
pub(crate) use replicas::replica::ReplicaSet;
pub(crate) use replicas::replica::{Peers, Replica};
pub(crate) use unsteered::unsteered_landing;
