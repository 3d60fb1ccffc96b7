pub mod exporter;
pub mod kube;
pub mod node_resources;
pub mod prometheus;
pub mod rng;
pub mod webhook;
