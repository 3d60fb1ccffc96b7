//! Cluster access and the kube watches: nodes into the view, pods and namespace labels into the
//! in-flight ledger.

pub use crate::facts::{Inventory, NodeFacts};

pub mod client;
pub(crate) mod election;
pub mod lease;
pub mod listing;
pub(crate) mod namespaces;
pub(crate) mod node_bands;
pub mod nodes;
pub mod pods;
pub mod replicas;
#[cfg(test)]
mod tests;
