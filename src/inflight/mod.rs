//! What the webhook knows that neither the metrics nor the scheduler's cache show yet: pods
//! steered and not yet visible in the load (the ledger: charges only), the world a decision
//! reads (the ledger beside the watches' picture of the cluster, see `crate::cluster`, under one
//! lock: `shared`), and the decision annotation through which replicas share their decisions.
//! Fed by admission and the pod watch; read by placement.

pub mod ledger;
pub mod note;
pub mod shared;
pub mod world;
