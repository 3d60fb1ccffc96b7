//! Cluster access and the kube watches: nodes into the view, pods into the in-flight ledger.

pub use crate::facts::{Inventory, NodeFacts};

pub mod client;
pub mod listing;
pub mod nodes;
pub mod pods;
pub mod replicas;
