//! Which nodes a decision may name: the pod's own constraints, the scheduler's filters that
//! count other pods (spread, inter-pod affinity), a job's bounds, and the sums they keep.

pub(crate) mod affinity_sums;
pub(crate) mod constraints;
pub(crate) mod groups_around;
pub mod own_spread;
pub(crate) mod per_job;
pub(crate) mod pod_level;
pub(crate) mod spread_settle;
