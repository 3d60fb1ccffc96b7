//! The pod as placement sees it: its filters, its requests and the load it will add.

use k8s_openapi::api::core::v1::Pod;

use super::estimate::estimate;
use crate::config::Config;
use crate::inflight::ledger::PodLoad;
use crate::jobs::JobKey;
use crate::placement::{PodConstraints, PodDemand};
use crate::scheduler::PodFacts;
use crate::scheduler::cores;
use crate::view::ClusterView;

/// The pod as placement sees it: filters, requests and estimated load (from its job's
/// running pods in `view` when there are enough, else from its request).
pub fn demand<'a>(config: &Config, pod: &'a Pod, view: Option<&ClusterView>) -> PodDemand<'a> {
    let inflight = &config.inflight;
    let request = PodLoad {
        cpu_cores: cores::pod_cpu_cores(pod).unwrap_or(inflight.default_cpu_cores),
        network_bytes_per_second: inflight.network_bytes_per_second,
    };
    let siblings = view
        .zip(JobKey::of_pod(pod, ""))
        .and_then(|(view, job)| view.jobs.get(&job))
        .map_or(&[][..], Vec::as_slice);
    let estimate = estimate(
        request,
        cores::pod_cpu_limit_cores(pod),
        siblings,
        &inflight.estimate,
    );
    PodDemand {
        constraints: PodConstraints::of(pod, &config.placement.pinning),
        facts: PodFacts::of(pod),
        load: estimate.load,
        source: estimate.source,
    }
}
