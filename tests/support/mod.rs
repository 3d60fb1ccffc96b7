pub mod exporter;
pub mod prometheus;
pub mod webhook;
