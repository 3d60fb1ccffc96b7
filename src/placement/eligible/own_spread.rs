//! A pod template's own preferred pod anti-affinity against its job's pods per node.
//!
//! The scheduler scales each scoring plugin to 0-100 before weighing them: InterPodAffinity's
//! scores are scaled between the lowest and the highest node, so a preferred anti-affinity
//! term on `kubernetes.io/hostname` against the pod's own labels gives every node without one
//! of its pods the full 100, whatever the term's weight, and ties the webhook's weight-100 node
//! affinity. The scheduler then spreads the job one pod per node first, whatever the load.
//! `review --explain` and `simulate` say so.

use k8s_openapi::api::core::v1::Pod;

use crate::scheduler::pods::term_selects;

/// The topology of a term that spreads pods one per node.
use crate::well_known::HOSTNAME;

/// The highest weight of `pod`'s preferred pod anti-affinity terms on `kubernetes.io/hostname`
/// that select the pod itself (its own labels, in its own namespace); `None` without one.
pub fn own_hostname_anti_affinity(pod: &Pod) -> Option<i32> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    let empty = Default::default();
    let labels = pod.metadata.labels.as_ref().unwrap_or(&empty);
    pod.spec
        .as_ref()?
        .affinity
        .as_ref()?
        .pod_anti_affinity
        .as_ref()?
        .preferred_during_scheduling_ignored_during_execution
        .as_deref()?
        .iter()
        .filter(|w| w.weight > 0 && w.pod_affinity_term.topology_key == HOSTNAME)
        .filter(|w| term_selects(&w.pod_affinity_term, namespace, namespace, None, labels))
        .map(|w| w.weight)
        .max()
}

/// What such a term does, in a sentence for `review --explain` and `simulate`.
pub fn note(weight: i32) -> String {
    format!(
        "the pod's own preferred pod anti-affinity (weight {weight}, topology {HOSTNAME}, \
         against pods with its labels) scores as much as the webhook's node affinity: the \
         scheduler scales each to 0-100 whatever the weight, so it spreads the job one pod per \
         node first, whatever the load. To let load decide, drop the term from the pod template \
         and bound pods per node with placement.per_job (max_per_node) instead"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(anti: serde_json::Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "tm", "namespace": "flink",
                         "labels": {"app": "orders", "component": "taskmanager"}},
            "spec": {"containers": [{"name": "c"}],
                     "affinity": {"podAntiAffinity": {
                         "preferredDuringSchedulingIgnoredDuringExecution": anti}}}
        }))
        .expect("a pod")
    }

    fn term(weight: i32, key: &str, selector: serde_json::Value) -> serde_json::Value {
        json!({"weight": weight, "podAffinityTerm": {"topologyKey": key, "labelSelector": selector}})
    }

    #[test]
    fn only_a_hostname_term_against_the_pods_own_labels_counts() {
        let own = json!({"matchLabels": {"app": "orders"}});
        assert_eq!(
            own_hostname_anti_affinity(&pod(json!([
                term(30, HOSTNAME, own.clone()),
                term(100, HOSTNAME, own.clone())
            ]))),
            Some(100)
        );
        for other in [
            term(100, crate::well_known::ZONE, own.clone()),
            term(100, HOSTNAME, json!({"matchLabels": {"app": "clicks"}})),
            // No selector selects nothing.
            json!({"weight": 100, "podAffinityTerm": {"topologyKey": HOSTNAME}}),
        ] {
            assert_eq!(
                own_hostname_anti_affinity(&pod(json!([other.clone()]))),
                None,
                "{other}"
            );
        }
        let mut elsewhere = pod(json!([term(100, HOSTNAME, own)]));
        if let Some(t) = elsewhere
            .spec
            .as_mut()
            .and_then(|s| s.affinity.as_mut())
            .and_then(|a| a.pod_anti_affinity.as_mut())
            .and_then(|a| {
                a.preferred_during_scheduling_ignored_during_execution
                    .as_mut()
            })
            .and_then(|t| t.first_mut())
        {
            t.pod_affinity_term.namespaces = Some(vec!["other".into()]);
        }
        assert_eq!(
            own_hostname_anti_affinity(&elsewhere),
            None,
            "another namespace"
        );
    }
}
