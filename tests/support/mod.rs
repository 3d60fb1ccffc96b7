pub mod exporter;
pub mod kube;
pub mod prometheus;
pub mod webhook;
