//! Where node load comes from: a static file or a live Prometheus.

pub(crate) mod file;
pub(crate) mod handover;
pub(crate) mod prometheus;
pub(crate) mod readings;

pub use file::embedded_example;
pub use prometheus::{PrometheusSource, RefreshError};
pub use readings::{BuildError, Readings, build_snapshot, parse_vector};
