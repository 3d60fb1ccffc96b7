//! Where node load comes from: a static file or a live Prometheus.

pub mod file;
pub mod prometheus;
pub mod readings;
