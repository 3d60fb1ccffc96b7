//! placement-webhook: a mutating admission webhook that steers Flink TaskManager pods onto
//! lightly loaded nodes by writing weighted preferred node affinity.

pub mod admission;
pub mod config;
pub mod inventory;
pub mod metrics_source;
pub mod placement;
pub mod snapshot;
pub mod telemetry;
pub mod view;
pub mod patch;
