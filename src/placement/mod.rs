//! Pure placement decisions: from a pod, the cluster view and the policy to ranked nodes and terms.

pub mod constraints;
pub mod decide;
pub mod estimate;
pub mod rank_index;
pub mod selector;

pub use constraints::{Ineligible, PodConstraints};
pub use decide::{Decision, PodDemand, RankedNode, TierChoice, assess_all, decide, decide_indexed};
pub use estimate::{Estimate, LoadSource};
pub use rank_index::RankIndexes;
