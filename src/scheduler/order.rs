//! The order the scheduler cache lists nodes in (`pkg/scheduler/backend/cache/node_tree.go`,
//! `nodeTree.list()`): zones in the order their first node was added, round-robin across zones,
//! nodes in insertion order within a zone. The zone key is region + zone (`GetZoneKey` in
//! `k8s.io/component-helpers/node/topology`), where the deprecated
//! `failure-domain.beta.kubernetes.io` labels win over the GA ones when a node has both. Nodes
//! that joined after the scheduler started are appended to their zone in the order they
//! joined. Those it listed at its start came in its informer's first list, whose order no one
//! outside can know since v1.35 (a streamed list is handed on in a map's order; see
//! `tests/real_cluster/sample_window.rs`); before, a plain LIST gave them in name order
//! (`SchedulerConfig::listed_node_order`). The sample of one pod is a contiguous run of this
//! order from a rotating start (`schedule_one.go`).

use std::collections::BTreeMap;

use crate::well_known::{REGION, REGION_BETA, ZONE, ZONE_BETA};

/// A node's zone key as the scheduler cache forms it: empty when the node has neither label.
/// Upstream reads the beta label first and the GA one only when the beta one is absent.
pub(crate) fn zone_key(labels: &BTreeMap<String, String>) -> String {
    let get = |ga: &str, beta: &str| {
        labels
            .get(beta)
            .or_else(|| labels.get(ga))
            .map_or("", String::as_str)
    };
    let (region, zone) = (get(REGION, REGION_BETA), get(ZONE, ZONE_BETA));
    if region.is_empty() && zone.is_empty() {
        return String::new();
    }
    // Upstream joins with ":\x00:" so that no region/zone pair collides with another.
    format!("{region}:\x00:{zone}")
}

/// The cache's listing order of nodes given in insertion order, by their zone keys: the
/// result holds indexes into `zones_in_insertion_order`.
pub(crate) fn node_tree_order<S: AsRef<str>>(zones_in_insertion_order: &[S]) -> Vec<usize> {
    let mut zone_names: Vec<&str> = Vec::new();
    let mut tree: Vec<Vec<usize>> = Vec::new();
    for (i, zone) in zones_in_insertion_order.iter().enumerate() {
        let zone = zone.as_ref();
        match zone_names.iter().position(|z| *z == zone) {
            Some(z) => tree[z].push(i),
            None => {
                zone_names.push(zone);
                tree.push(vec![i]);
            }
        }
    }
    let total = zones_in_insertion_order.len();
    let mut list = Vec::with_capacity(total);
    let mut depth = 0;
    while list.len() < total {
        for zone in &tree {
            if let Some(&node) = zone.get(depth) {
                list.push(node);
            }
        }
        depth += 1;
    }
    list
}

/// The order for nodes with zone keys `zones` when the scheduler's informer delivered `listed`
/// (indexes, in that order) at its start and `late` (indexes, in the order they joined) after.
pub(crate) fn scheduler_order(
    zones: &[String],
    listed: impl IntoIterator<Item = usize>,
    late: &[usize],
) -> Vec<usize> {
    let mut inserted: Vec<usize> = listed.into_iter().filter(|&i| i < zones.len()).collect();
    inserted.extend(late.iter().copied().filter(|&i| i < zones.len()));
    let zones_inserted: Vec<&str> = inserted.iter().map(|&i| zones[i].as_str()).collect();
    node_tree_order(&zones_inserted)
        .into_iter()
        .map(|k| inserted[k])
        .collect()
}

/// The nodes named `names` that are not `late`, in name order: a plain LIST's order.
pub(crate) fn listed_by_name(names: &[&str], late: &[usize]) -> Vec<usize> {
    let mut listed: Vec<usize> = (0..names.len()).filter(|i| !late.contains(i)).collect();
    listed.sort_by(|&a, &b| names[a].cmp(names[b]));
    listed
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Upstream `node_tree_test.go` `TestNodeTree_List`-style: three zones, uneven sizes.
    #[test]
    fn round_robin_across_zones_in_insertion_order() {
        let zones = ["a", "a", "b", "c", "a", "b", "a"];
        // a: 0 1 4 6, b: 2 5, c: 3
        assert_eq!(node_tree_order(&zones), vec![0, 2, 3, 1, 5, 4, 6]);
    }

    #[test]
    fn names_first_then_late_joiners_appended_to_their_zone() {
        let names = ["n-3", "n-1", "n-2", "n-0"];
        let zones: Vec<String> = ["z1", "z2", "z1", "z2"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        // Without late joiners: by name n-0(z2) n-1(z2) n-2(z1) n-3(z1): zones z2 then z1.
        let order = |late: &[usize]| scheduler_order(&zones, listed_by_name(&names, late), late);
        assert_eq!(order(&[]), vec![3, 2, 1, 0]);
        // n-0 joined late: n-1(z2) n-2(z1) n-3(z1), then n-0 appended to z2.
        assert_eq!(order(&[3]), vec![1, 2, 3, 0]);
    }

    #[test]
    fn zone_key_uses_region_and_zone_the_beta_labels_first() {
        let labels = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>()
        };
        assert_eq!(zone_key(&labels(&[])), "");
        assert_eq!(
            zone_key(&labels(&[(REGION, "eu"), (ZONE, "eu-1")])),
            "eu:\x00:eu-1"
        );
        assert_eq!(zone_key(&labels(&[(ZONE_BETA, "z")])), ":\x00:z");
        // A node relabelled to the GA keys that kept its old beta ones is keyed by the beta
        // ones (`GetZoneKey` reads `failure-domain.beta.kubernetes.io/*` first).
        assert_eq!(
            zone_key(&labels(&[
                (REGION, "eu"),
                (ZONE, "eu-1"),
                (REGION_BETA, "old"),
                (ZONE_BETA, "old-1")
            ])),
            "old:\x00:old-1"
        );
        assert_eq!(
            zone_key(&labels(&[(ZONE, "eu-1"), (REGION_BETA, "old")])),
            "old:\x00:eu-1"
        );
    }
}
