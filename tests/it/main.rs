//! The tests that need no control plane, one module per area, in one binary (one link, one
//! copy of the dependencies on disk). Some start a real Prometheus (tests/prometheus/build.sh;
//! missing, they fail) or the webhook over real TLS. The tests against a
//! real kube-apiserver and kube-scheduler are the other binary, `tests/real_cluster`: they run
//! one at a time, each with the machine to itself.

#[path = "../support/mod.rs"]
mod support;

mod admission_tls;
mod certs_serve;
mod concurrent_reviews;
mod deploy_manifests;
mod error_messages;
mod flags_over_config;
mod forwarding;
mod fuzz_regressions;
mod hardening;
mod hotspots;
mod layering;
mod log_format;
mod monitoring;
mod prometheus_faults;
mod prometheus_live;
mod readme_commands;
mod review_cli;
mod simulate_cli;
