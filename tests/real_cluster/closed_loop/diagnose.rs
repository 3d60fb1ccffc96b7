//! What to read when a burst ends above its bound: the pods bound outside their first tier,
//! how many first-tier nodes still had room, and the scheduler's real node order around them.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{NodeSelectorRequirement, Pod, PreferredSchedulingTerm};
use kube::Api;
use kube::api::ListParams;

use super::generated::{Node, TASKMANAGER_CORES};
use super::timeline::Timeline;
use crate::fixture::{Cluster, decision, preferred};

/// The nodes a preferred term names (`In`).
fn term_nodes(term: &PreferredSchedulingTerm) -> Vec<String> {
    let values = |reqs: &Option<Vec<NodeSelectorRequirement>>| {
        reqs.iter()
            .flatten()
            .filter(|r| r.operator == "In")
            .flat_map(|r| r.values.iter().flatten().cloned())
            .collect::<Vec<_>>()
    };
    let mut all = values(&term.preference.match_expressions);
    all.extend(values(&term.preference.match_fields));
    all
}

/// Where a bound pod landed among the nodes its terms name.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Landed {
    /// On a node of its first tier (see [`first_tier`]).
    FirstTier,
    LaterTier,
    /// On a node no term names: its sample held no named node (or none with room), so the
    /// scheduler's request scores, which do not see heat, chose.
    Unnamed,
}

/// Whether `term` is of the first tier among `terms`: the terms are graded under sampling, the
/// first tier's never below half the heaviest weight.
fn first_tier(term: &PreferredSchedulingTerm, terms: &[PreferredSchedulingTerm]) -> bool {
    2 * term.weight > terms.iter().map(|t| t.weight).max().unwrap_or(0)
}

/// The node `pod` is bound to and how its terms named it; `None` while unbound.
fn landed(pod: &Pod) -> Option<(&str, Landed)> {
    let node = pod.spec.as_ref()?.node_name.as_deref()?;
    let terms = preferred(pod);
    let how = match terms
        .iter()
        .find(|t| term_nodes(t).iter().any(|n| n == node))
    {
        None => Landed::Unnamed,
        Some(t) if first_tier(t, terms) => Landed::FirstTier,
        Some(_) => Landed::LaterTier,
    };
    Some((node, how))
}

/// The pods bound to a node none of their terms names.
pub(super) fn bound_unnamed(pods: &[Pod]) -> std::collections::BTreeSet<String> {
    pods.iter()
        .filter(|pod| landed(pod).is_some_and(|(_, how)| how == Landed::Unnamed))
        .filter_map(|pod| pod.metadata.name.clone())
        .collect()
}

/// How many of `pods` are bound to a node of their first tier, read from each pod's terms and
/// the node the apiserver bound it to.
pub(super) fn bound_to_first_tier(pods: &[Pod]) -> usize {
    (pods.iter())
        .filter(|pod| landed(pod).is_some_and(|(_, how)| how == Landed::FirstTier))
        .count()
}

/// Every steered pod bound to a node outside its first tier, and every pod on the hottest node,
/// with its decision note, what its terms named and how many first-tier nodes still had room:
/// what to read when the hottest node is above the bound. Returns the hottest node's story in
/// one line (its load before, and each pod it took with how its terms named it), for a failed
/// check's message: a long log is cut before the lines above reach it.
pub(super) fn print_strays_and_hottest(
    pods: &[Pod],
    nodes: &[Node],
    index: &BTreeMap<String, usize>,
    (hottest, order): (Option<&str>, &BTreeMap<String, usize>),
    timeline: Option<&Timeline>,
) -> String {
    let mut on_hottest: Vec<String> = Vec::new();
    // Cores requested on each node as the scheduler saw it, taking the pods to be bound in
    // creation order (their names' order): which named nodes still had room for a pod.
    let mut requested: BTreeMap<&str, f64> = nodes
        .iter()
        .map(|n| (n.name.as_str(), n.requested_cores))
        .collect();
    let mut in_order: Vec<&Pod> = pods.iter().collect();
    in_order.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    for pod in in_order {
        let Some((node, how)) = landed(pod) else {
            continue;
        };
        let terms = preferred(pod);
        let room = |name: &str| {
            index.get(name).is_some_and(|&i| {
                f64::from(nodes[i].cores) - requested.get(name).copied().unwrap_or(0.0)
                    >= TASKMANAGER_CORES - 1e-9
            })
        };
        let first: Vec<String> = terms
            .iter()
            .filter(|t| first_tier(t, terms))
            .flat_map(term_nodes)
            .collect();
        let first_with_room = (first.iter().filter(|n| room(n)).count(), first.len());
        // The longest stretch of the scheduler's order between two first-tier nodes with room.
        let mut places: Vec<usize> = first
            .iter()
            .filter(|n| room(n))
            .filter_map(|n| order.get(n).copied())
            .collect();
        places.sort_unstable();
        let widest_gap = places
            .windows(2)
            .map(|w| w[1] - w[0])
            .chain(
                places
                    .first()
                    .zip(places.last())
                    .map(|(a, b)| a + order.len() - b),
            )
            .max();
        if let Some(used) = requested.get_mut(node) {
            *used += TASKMANAGER_CORES;
        }
        if Some(node) == hottest {
            let name = pod.metadata.name.as_deref().unwrap_or("?");
            on_hottest.push(match timeline {
                Some(timeline) => format!("{} {how:?}", timeline.at_bind(name, node)),
                None => format!("{name} {how:?}"),
            });
        }
        if how == Landed::FirstTier && Some(node) != hottest {
            continue;
        }
        let cpu = index.get(node).map_or(f64::NAN, |&i| nodes[i].cpu);
        let sizes: Vec<String> = terms
            .iter()
            .map(|t| format!("{}x{}", t.weight, term_nodes(t).len()))
            .collect();
        eprintln!(
            "{}: {} on {node} (cpu before {cpu:.2}, {how:?}), terms {sizes:?}, \
             tier-1 nodes with room then {first_with_room:?}, widest gap {widest_gap:?}, note {:?}",
            match how {
                Landed::Unnamed => "stray",
                Landed::FirstTier => "on the hottest",
                Landed::LaterTier => "on a later tier",
            },
            pod.metadata.name.as_deref().unwrap_or("?"),
            decision(pod).unwrap_or("none")
        );
    }
    let before = hottest
        .and_then(|name| index.get(name))
        .map_or(f64::NAN, |&i| nodes[i].cpu);
    let bands = match (timeline, hottest) {
        (Some(timeline), Some(node)) => format!("; its bands {}", timeline.bands_of(node)),
        _ => String::new(),
    };
    format!(
        "{} (cpu before {before:.2}) took {}{bands}",
        hottest.unwrap_or("?"),
        on_hottest.join(", ")
    )
}

/// Each node's place in the scheduler's order, when it ran before every node joined: zones
/// round-robin, each zone's nodes in the order they were created. Nodes here are never updated,
/// so their resourceVersion is their creation's.
pub(super) async fn scheduler_order(cluster: &Cluster) -> BTreeMap<String, usize> {
    let mut all = Api::<k8s_openapi::api::core::v1::Node>::all(cluster.admin.clone())
        .list(&ListParams::default())
        .await
        .expect("list nodes")
        .items;
    let version = |n: &k8s_openapi::api::core::v1::Node| {
        n.metadata
            .resource_version
            .as_deref()
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(u64::MAX)
    };
    all.sort_by_key(version);
    let mut zones: Vec<(String, Vec<String>)> = Vec::new();
    for node in &all {
        let labels = node.metadata.labels.clone().unwrap_or_default();
        let zone = format!(
            "{}:\x00:{}",
            labels
                .get("topology.kubernetes.io/region")
                .cloned()
                .unwrap_or_default(),
            labels
                .get("topology.kubernetes.io/zone")
                .cloned()
                .unwrap_or_default()
        );
        let name = node.metadata.name.clone().unwrap_or_default();
        match zones.iter_mut().find(|(z, _)| *z == zone) {
            Some((_, names)) => names.push(name),
            None => zones.push((zone, vec![name])),
        }
    }
    let mut order = BTreeMap::new();
    let longest = zones.iter().map(|(_, n)| n.len()).max().unwrap_or(0);
    for k in 0..longest {
        for (_, names) in &zones {
            if let Some(name) = names.get(k) {
                let place = order.len();
                order.insert(name.clone(), place);
            }
        }
    }
    order
}
