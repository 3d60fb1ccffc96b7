pub mod exporter;
pub mod kube;
pub mod ports;
pub mod prometheus;
pub mod rng;
pub mod webhook;
