//! The webhook against a real control plane: etcd, kube-apiserver (RBAC on) and kube-scheduler
//! of the pinned release (tests/kube), the webhook installed from deploy/ and running as its
//! ServiceAccount; and the Helm chart against deploy/ (helm.rs, with the pinned helm). A missing
//! binary fails the test, in CI and out, naming the command that builds it.
//!
//! Each test starts its own control plane; they run one at a time (a lock), since each
//! apiserver takes a core while it starts and the machine may have only two.

#[path = "../support/node_resources.rs"]
mod node_resources;
#[path = "../support/mod.rs"]
mod support;

mod admission;
mod balancer;
mod band_writes;
mod closed_loop;
mod day;
mod differential;
mod fixture;
mod flink;
mod handover;
mod heat_bands;
mod helm;
mod install;
mod lifecycle;
mod live_metrics;
mod living;
mod lost_history;
mod lost_node;
mod replicas;
mod sample_window;
mod scheduler_crash;
mod scheduler_profile;
mod watches;
