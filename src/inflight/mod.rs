//! What the webhook knows that the metrics do not show yet: pods steered and not yet visible in
//! the load (the ledger), the requests of every bound pod (the occupancy), and the decision
//! annotation through which replicas share their decisions. Fed by admission and the pod watch;
//! read by placement.

pub(crate) mod changes;
mod interner;
pub mod ledger;
pub mod note;
pub(crate) mod occupancy;
pub mod pod_groups;
pub(crate) mod running;
pub mod shared;
mod since;
