//! What a person reads off a burst: how hot the nodes that received pods ended up, how many pods
//! went onto nodes that were already busy, how spread the burst was.

use serde::Serialize;

use super::{Burst, Cluster, Outcome};

/// One method's result. Field names are part of `simulate --json`: keep them stable.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Figures {
    pub(crate) method: String,
    pub pods: usize,
    /// Pods that no node could take (they stay Pending).
    pub(crate) pending: usize,
    /// Highest real CPU busy fraction, after the burst, of a node that received a pod.
    pub hottest_cpu: f64,
    pub hottest_cpu_node: Option<String>,
    /// Utilisation one more pod adds on that node (the target's tolerance).
    pub one_pod_on_hottest: f64,
    /// Highest NIC use after the burst of a node that received a pod (known capacity only).
    pub hottest_nic: Option<f64>,
    /// Pods that landed on a node whose CPU or NIC was already at or above `busy` when they
    /// landed (earlier pods of the burst counted).
    pub onto_busy: usize,
    pub(crate) busy: f64,
    pub nodes_used: usize,
    pub most_pods_on_one_node: usize,
    /// Share of the pods with preferred nodes that had none in the scheduler's sample.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) preferred_outside_sample: Option<f64>,
    /// Share of the steered pods that landed where the webhook predicted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) landed_as_predicted: Option<f64>,
    /// Landing accuracy as `placement_webhook_landings_total` counts it: first tier, another
    /// tier, elsewhere (webhook runs only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub landings: Option<[usize; 3]>,
}

pub fn figures(cluster: &Cluster, burst: &Burst, outcome: &Outcome, busy: f64) -> Figures {
    let mut pods_on = vec![0usize; cluster.nodes.len()];
    let mut onto_busy = 0;
    for &node in outcome.landed.iter().flatten() {
        if cluster.bottleneck(node, pods_on[node], burst) >= busy {
            onto_busy += 1;
        }
        pods_on[node] += 1;
    }
    let used: Vec<usize> = (0..pods_on.len()).filter(|&i| pods_on[i] > 0).collect();
    let hottest = used.iter().copied().max_by(|&a, &b| {
        cluster
            .cpu_after(a, pods_on[a], burst)
            .total_cmp(&cluster.cpu_after(b, pods_on[b], burst))
    });
    let hottest_nic = used
        .iter()
        .filter_map(|&i| cluster.nic_after(i, pods_on[i], burst))
        .fold(None, |acc: Option<f64>, v| {
            Some(acc.map_or(v, |a| a.max(v)))
        });
    let steered = outcome.landed.iter().flatten().count();
    Figures {
        method: outcome.method.label(),
        pods: outcome.landed.len(),
        pending: outcome.landed.iter().filter(|l| l.is_none()).count(),
        hottest_cpu: hottest.map_or(0.0, |i| cluster.cpu_after(i, pods_on[i], burst)),
        hottest_cpu_node: hottest.map(|i| cluster.nodes[i].name.clone()),
        one_pod_on_hottest: hottest.map_or(0.0, |i| burst.cpu_cores / cluster.cores[i]),
        hottest_nic,
        onto_busy,
        busy,
        nodes_used: used.len(),
        most_pods_on_one_node: pods_on.iter().copied().max().unwrap_or(0),
        preferred_outside_sample: (outcome.with_preferences > 0)
            .then(|| outcome.preferred_outside_sample as f64 / outcome.with_preferences as f64),
        landed_as_predicted: (matches!(outcome.method, super::Method::Webhook(_)) && steered > 0)
            .then(|| outcome.predicted_landing_held as f64 / steered as f64),
        landings: matches!(outcome.method, super::Method::Webhook(_)).then_some(outcome.landings),
    }
}
