//! placement-webhook: a mutating admission webhook that steers Flink TaskManager pods onto
//! lightly loaded nodes by writing weighted preferred node affinity.

#![warn(unreachable_pub)]

pub mod admission;
pub mod app;
pub(crate) mod bands;
pub mod cli;
pub(crate) mod cluster;
pub mod config;
pub(crate) mod decider;
pub(crate) mod facts;
pub mod hashing;
pub mod hotspots;
pub mod inflight;
pub mod inventory;
pub(crate) mod jobs;
pub mod metrics_source;
pub mod patch;
pub mod placement;
pub mod readiness;
pub mod scheduler;
pub(crate) mod server;
pub mod simulate;
pub mod snapshot;
pub mod telemetry;
#[cfg(test)]
mod test_support;
pub mod view;
pub(crate) mod well_known;

/// Makes ring the process-wide rustls provider, which the kube and Prometheus clients use.
/// Idempotent: a provider installed earlier stays.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
