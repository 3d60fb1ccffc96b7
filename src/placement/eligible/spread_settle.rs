//! Where a burst's pending pods end up under a `DoNotSchedule` spread over zones (or any key
//! wider than one node).
//!
//! The scheduler puts each pod into a domain its skew leaves open, whatever node the pod's
//! first tier named. A pending pod counts where its decision predicted it lands; when its
//! named domain had closed by its turn (another replica's pods, decided a few milliseconds
//! before, filled it), that prediction is wrong, and until the bind is seen the errors add up:
//! the next decisions read the domain counts off by a pod or more and name a domain that will
//! be closed. So the pending pods alike to the one decided are settled domain by domain as the
//! scheduler fills them: each in turn into an open domain, the one most of them named first.

use std::collections::BTreeMap;

use crate::scheduler::pod::{PodFacts, required_node_affinity_matches};
use crate::scheduler::pods::PodGroup;
use crate::scheduler::pods::{Labels, selector_matches};
use crate::scheduler::topology_spread::SpreadFilter;
use crate::scheduler::{ClusterPods, ExistingPod, ModelNode};
use crate::well_known::HOSTNAME;

/// Moves the pending pods of `pods` (those from `first_pending` on) alike to the pod `facts`
/// describes (its namespace and labels) into the domains the scheduler's spread filter lets
/// them into, one after another. Only for a pod with one `DoNotSchedule` constraint, on a key
/// other than the hostname, whose selector selects the pod itself; otherwise `pods` is left
/// as it is.
pub(in crate::placement) fn settle_pending<N: AsRef<ModelNode>>(
    facts: &PodFacts<'_>,
    nodes: &[N],
    namespaces: &BTreeMap<String, Labels>,
    pods: &mut Vec<ExistingPod>,
    first_pending: usize,
) {
    let mut hard = facts
        .spread_constraints
        .iter()
        .filter(|c| c.when_unsatisfiable == "DoNotSchedule");
    let (Some(constraint), None) = (hard.next(), hard.next()) else {
        return;
    };
    let key = constraint.topology_key.as_str();
    if key == HOSTNAME
        || first_pending >= pods.len()
        || !selector_matches(constraint.label_selector.as_ref(), facts.labels())
    {
        return;
    }
    let alike = |p: &ExistingPod| {
        !p.terminating
            && &*p.group.namespace == facts.namespace
            && *p.group.labels == *facts.labels()
    };
    let domain_of = |p: &ExistingPod| nodes.get(p.node).and_then(|n| n.as_ref().labels.get(key));
    // The domains the filter counts, and their pods without the alike pending ones.
    let (movable, kept): (Vec<ExistingPod>, Vec<ExistingPod>) =
        pods.drain(first_pending..).partition(|p| alike(p));
    pods.extend(kept);
    let mut counts: BTreeMap<String, i64> = {
        let cluster = ClusterPods::new(pods, namespaces);
        let Some(filter) = SpreadFilter::new(facts, nodes, &cluster) else {
            pods.extend(movable);
            return;
        };
        filter
            .domain_counts()
            .into_iter()
            .filter(|((k, _), _)| k == key)
            .map(|((_, value), n)| (value, n))
            .collect()
    };
    let (settled_here, elsewhere): (Vec<ExistingPod>, Vec<ExistingPod>) = movable
        .into_iter()
        .partition(|p| domain_of(p).is_some_and(|d| counts.contains_key(d)));
    pods.extend(elsewhere);
    if settled_here.is_empty() {
        return;
    }
    // Pods named into each domain and not placed yet by the walk below.
    let mut still_named: BTreeMap<&str, i64> = BTreeMap::new();
    for p in &settled_here {
        if let Some(d) = domain_of(p) {
            *still_named.entry(d.as_str()).or_insert(0) += i64::from(p.count);
        }
    }
    let total: i64 = still_named.values().sum();
    let max_skew = i64::from(constraint.max_skew.max(1));
    let min_domains = usize::try_from(constraint.min_domains.unwrap_or(1)).unwrap_or(1);
    let mut wanted: BTreeMap<String, i64> = counts.keys().map(|d| (d.clone(), 0)).collect();
    for _ in 0..total {
        let min = if counts.len() < min_domains {
            0
        } else {
            counts.values().copied().min().unwrap_or(0)
        };
        let open = counts
            .iter()
            .filter(|&(_, &c)| c + 1 - min <= max_skew)
            .map(|(d, _)| d.as_str());
        // The domain most of the pods still to place named; by name among equals.
        let Some(domain) = open
            .max_by(|a, b| {
                let named = |d: &str| still_named.get(d).copied().unwrap_or(0);
                named(a).cmp(&named(b)).then_with(|| b.cmp(a))
            })
            .map(str::to_string)
        else {
            break;
        };
        *counts.entry(domain.clone()).or_insert(0) += 1;
        *wanted.entry(domain.clone()).or_insert(0) += 1;
        if let Some(n) = still_named.get_mut(domain.as_str()) {
            *n -= 1;
        }
    }
    // Pods stay on their predicted nodes while their domain wants them; the domain's extra
    // pods go to its first node in view order (the coolest measured) that the filter counts.
    let template = ExistingPod {
        group: PodGroup::of_facts(facts),
        node: 0,
        terminating: false,
        count: 0,
    };
    for mut p in settled_here {
        let Some(want) = domain_of(&p).and_then(|d| wanted.get_mut(d.as_str())) else {
            continue;
        };
        let keep = i64::from(p.count).min(*want).max(0);
        *want -= keep;
        if keep > 0 {
            p.count = u32::try_from(keep).unwrap_or(u32::MAX);
            pods.push(p);
        }
    }
    for (domain, want) in wanted.into_iter().filter(|&(_, w)| w > 0) {
        let Some(node) = nodes.iter().map(AsRef::as_ref).position(|n| {
            n.labels.get(key) == Some(&domain) && required_node_affinity_matches(facts, n)
        }) else {
            continue;
        };
        pods.push(ExistingPod {
            node,
            count: u32::try_from(want).unwrap_or(u32::MAX),
            ..template.clone()
        });
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use k8s_openapi::api::core::v1::Pod;
    use serde_json::json;

    use super::*;
    use crate::scheduler::Resources;

    use crate::well_known::ZONE;

    fn nodes() -> Vec<ModelNode> {
        ["a", "b", "c", "a", "b", "c"]
            .iter()
            .enumerate()
            .map(|(i, zone)| {
                let labels: Labels = [(ZONE.to_string(), zone.to_string())].into();
                ModelNode::new(&format!("n{i}"), labels, Resources::default())
            })
            .collect()
    }

    fn taskmanager(max_skew: i32) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"namespace": "flink", "labels": {"app": "job", "component": "taskmanager"}},
            "spec": {
                "containers": [],
                "topologySpreadConstraints": [{
                    "maxSkew": max_skew,
                    "topologyKey": ZONE,
                    "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchLabels": {"app": "job"}}
                }]
            }
        }))
        .expect("pod")
    }

    fn on(node: usize, count: u32, facts: &PodFacts<'_>) -> ExistingPod {
        ExistingPod {
            group: PodGroup {
                terms: None,
                ..PodGroup::of_facts(facts)
            },
            node,
            terminating: false,
            count,
        }
    }

    /// Pods per zone, and the pods on each node.
    fn zones(pods: &[ExistingPod], nodes: &[ModelNode]) -> (BTreeMap<String, u32>, Vec<u32>) {
        let mut zones = BTreeMap::new();
        let mut per_node = vec![0; nodes.len()];
        for p in pods {
            *zones.entry(nodes[p.node].labels[ZONE].clone()).or_insert(0) += p.count;
            per_node[p.node] += p.count;
        }
        (zones, per_node)
    }

    #[test]
    fn pending_pods_named_in_a_closed_zone_settle_where_the_skew_lets_them() {
        let nodes = nodes();
        let pod = taskmanager(1);
        let facts = PodFacts::of(&pod);
        // One bound in zone a; three pending, all predicted on n3 (zone a).
        let mut pods = vec![on(0, 1, &facts), on(3, 3, &facts)];
        settle_pending(&facts, &nodes, &BTreeMap::new(), &mut pods, 1);
        let (zones, per_node) = zones(&pods, &nodes);
        // Zones b and c open first; then every zone is even and the pods' own choice (a) wins.
        assert_eq!(
            zones,
            [("a".into(), 2), ("b".into(), 1), ("c".into(), 1)].into()
        );
        assert_eq!(per_node[3], 1, "one pod stays where it was predicted");
        assert_eq!(
            per_node[1] + per_node[2],
            2,
            "the others go to the first node of b and c"
        );
    }

    #[test]
    fn predictions_the_skew_allows_stay_as_they_are() {
        let nodes = nodes();
        let pod = taskmanager(1);
        let facts = PodFacts::of(&pod);
        let mut pods = vec![on(0, 1, &facts), on(4, 1, &facts), on(5, 1, &facts)];
        let before = pods.clone();
        settle_pending(&facts, &nodes, &BTreeMap::new(), &mut pods, 1);
        assert_eq!(pods, before);
    }

    #[test]
    fn a_wider_skew_keeps_more_pods_where_they_were_named() {
        let nodes = nodes();
        let pod = taskmanager(2);
        let facts = PodFacts::of(&pod);
        let mut pods = vec![on(3, 4, &facts)];
        settle_pending(&facts, &nodes, &BTreeMap::new(), &mut pods, 0);
        let (zones, _) = zones(&pods, &nodes);
        // a, a (skew 2); then a is closed until c, the emptiest, catches up: b and b (first
        // by name among the open ones no pod named) before that.
        assert_eq!(zones, [("a".into(), 2), ("b".into(), 2)].into());
    }

    #[test]
    fn other_pods_and_other_constraints_are_left_alone() {
        let nodes = nodes();
        let pod = taskmanager(1);
        let facts = PodFacts::of(&pod);
        let mut other = on(3, 3, &facts);
        other.group.labels = Arc::new([("app".to_string(), "other".to_string())].into());
        let mut pods = vec![other];
        let before = pods.clone();
        settle_pending(&facts, &nodes, &BTreeMap::new(), &mut pods, 0);
        assert_eq!(pods, before, "not alike: counted where predicted");

        let mut hostname = taskmanager(1);
        if let Some(spec) = hostname.spec.as_mut()
            && let Some(constraints) = spec.topology_spread_constraints.as_mut()
        {
            constraints[0].topology_key = HOSTNAME.into();
        }
        let facts = PodFacts::of(&hostname);
        let mut pods = vec![on(3, 3, &facts)];
        let before = pods.clone();
        settle_pending(&facts, &nodes, &BTreeMap::new(), &mut pods, 0);
        assert_eq!(pods, before, "a spread over nodes is the filter's own");
    }
}
