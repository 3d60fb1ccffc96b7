//! Where each node sits in the scheduler's order, where that can be known.

use std::sync::Arc;

use crate::config::scheduler::ListedNodeOrder;
use crate::scheduler::order::{listed_by_name, scheduler_order, zone_key};
use crate::view::ClusterView;
use crate::view::memo::MemoKey;

/// Each node's place in the scheduler's order, where it can be known.
#[derive(Debug, Clone)]
pub struct Positions(Arc<[u32]>);

impl Positions {
    /// A node the scheduler listed at its start, in an order no one outside can know.
    const ANYWHERE: u32 = u32::MAX;

    /// The position of node `i` (by view position) in the scheduler's order; `None` when it
    /// could be anywhere.
    pub fn of(&self, i: usize) -> Option<usize> {
        self.0
            .get(i)
            .copied()
            .filter(|&p| p != Self::ANYWHERE)
            .map(|p| p as usize)
    }
}

/// Each node of `view` (by position) at its place in the scheduler's order: zones round-robin;
/// within a zone, the nodes the scheduler listed when it started (in name order, when
/// `listed` says the release keeps that order; anywhere otherwise), then those that joined
/// later in the order they joined. Once per view.
pub fn order_positions(view: &ClusterView, listed: ListedNodeOrder) -> Positions {
    Positions(view.memo.get_or_compute(MemoKey::Positions(listed), || {
        let names: Vec<&str> = view.nodes.iter().map(|n| n.name.as_str()).collect();
        let zones: Vec<String> = view.nodes.iter().map(|n| zone_key(&n.labels)).collect();
        let late = joined_later(view);
        // Listed nodes taken in name order place the late joiners behind them, in their
        // zones: right in length whatever their real order.
        let order = scheduler_order(&zones, listed_by_name(&names, &late), &late);
        let mut positions = vec![Positions::ANYWHERE; view.nodes.len()];
        for (position, &index) in order.iter().enumerate() {
            positions[index] = u32::try_from(position).unwrap_or(u32::MAX);
        }
        if listed == ListedNodeOrder::Unknown {
            let mut is_late = vec![false; view.nodes.len()];
            for &i in &late {
                is_late[i] = true;
            }
            for (position, late) in positions.iter_mut().zip(is_late) {
                if !late {
                    *position = Positions::ANYWHERE;
                }
            }
        }
        for i in order_unknown_within_second(view, &late, &zones) {
            positions[i] = Positions::ANYWHERE;
        }
        positions
    }))
}

/// Indexes of the nodes created after the default scheduler took its node list, in the order
/// they joined: by creation second, then by the order the node watch delivered them (the
/// apiserver's order, which the scheduler's informer sees too). A node created within the
/// second the list was taken counts as listed: creation times are whole seconds.
fn joined_later(view: &ClusterView) -> Vec<usize> {
    let Some(since) = view.scheduler_since else {
        return Vec::new();
    };
    let listed_second = whole_seconds(since);
    let mut late: Vec<usize> = (0..view.nodes.len())
        .filter(|&i| {
            view.nodes[i]
                .created
                .is_some_and(|c| whole_seconds(c) > listed_second)
        })
        .collect();
    late.sort_by_key(|&i| {
        let n = &view.nodes[i];
        (n.created.map(whole_seconds), n.arrival, n.name.as_str())
    });
    late
}

/// The late joiners whose place among the others of their zone created in the same second
/// no one outside the scheduler knows: the watch listed some of them (after a restart of the
/// webhook, or a gap in its watch) rather than seeing them join, and a list is in name order.
/// The scheduler's informer had them in the order they joined. A burst of nodes joining at
/// once (a cluster being built, an autoscaler's scale-up) puts hundreds in one second: placed
/// by name, every one of them would be wrong by up to that many positions.
fn order_unknown_within_second(view: &ClusterView, late: &[usize], zones: &[String]) -> Vec<usize> {
    let mut groups: crate::hashing::HashMap<(&str, u64), (Vec<usize>, bool)> = Default::default();
    for &i in late {
        let node = &view.nodes[i];
        let second = node.created.map_or(0, whole_seconds);
        let (members, all_seen) = groups
            .entry((zones[i].as_str(), second))
            .or_insert_with(|| (Vec::new(), true));
        members.push(i);
        *all_seen &= node.seen_joining;
    }
    let mut unknown: Vec<usize> = groups
        .into_values()
        .filter(|(members, all_seen)| members.len() > 1 && !all_seen)
        .flat_map(|(members, _)| members)
        .collect();
    unknown.sort_unstable();
    unknown
}

fn whole_seconds(t: std::time::SystemTime) -> u64 {
    t.duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Nodes listed when the scheduler started are in name order; those created later follow
    /// in the order they joined (creation second, then the watch's order); without the time
    /// the scheduler's leader took its Lease, every node is in name order.
    #[test]
    fn nodes_created_after_the_scheduler_listed_follow_in_the_order_they_joined() {
        use crate::facts::{Inventory, NodeFacts};
        use std::time::{Duration, UNIX_EPOCH};
        let at = |secs: u64| Some(UNIX_EPOCH + Duration::from_secs(secs));
        // One zone: the order is the zone's list. (name, created, arrival)
        let nodes = [
            ("d", at(100), 0),
            ("b", at(100), 1),
            ("a", at(205), 5),
            ("c", at(203), 3),
            ("e", at(203), 2),
            ("f", at(200), 4),
        ];
        let snapshot: crate::snapshot::LoadSnapshot = serde_json::from_value(serde_json::json!({
            "nodes": nodes.iter().map(|(name, _, _)| serde_json::json!({"name": name, "cpu": 0.5}))
                .collect::<Vec<_>>(),
        }))
        .expect("snapshot");
        // `seen_joining`: the watch delivered each node as it joined, not in a list.
        let inventory = |seen_joining: bool| Inventory {
            nodes: nodes
                .iter()
                .map(|&(name, created, arrival)| {
                    let facts = NodeFacts {
                        ready: true,
                        created,
                        arrival,
                        seen_joining,
                        ..NodeFacts::default()
                    };
                    (name.to_string(), facts)
                })
                .collect(),
        };
        let seen = inventory(true);
        // The nodes by position, those that could be anywhere first by name.
        let placed_in = |inventory: &Inventory, since: Option<std::time::SystemTime>, listed| {
            let view = ClusterView::build(&snapshot, Some(inventory), &Default::default())
                .with_scheduler_since(since);
            let positions = order_positions(&view, listed);
            let mut names: Vec<(Option<usize>, String)> = view
                .nodes
                .iter()
                .enumerate()
                .map(|(i, n)| (positions.of(i), n.name.clone()))
                .collect();
            names.sort_unstable();
            names
        };
        let placed = |since, listed| placed_in(&seen, since, listed);
        let order = |since| -> Vec<String> {
            let names = placed(since, ListedNodeOrder::ByName);
            assert!(names.iter().all(|(p, _)| p.is_some()));
            names.into_iter().map(|(_, n)| n).collect()
        };
        assert_eq!(order(None), ["a", "b", "c", "d", "e", "f"]);
        // Taken at 200.4 s: f (created in that second) counts as listed.
        let since = UNIX_EPOCH + Duration::from_millis(200_400);
        assert_eq!(order(Some(since)), ["b", "d", "f", "e", "c", "a"]);
        // Before every node: all joined later, by creation second then arrival.
        assert_eq!(order(at(50)), ["d", "b", "f", "e", "c", "a"]);
        // A release whose listed nodes could be anywhere: only the joiners have a place,
        // behind the three listed ones.
        let known =
            |since| -> Vec<(Option<usize>, String)> { placed(since, ListedNodeOrder::Unknown) };
        let named = |list: &[(Option<usize>, &str)]| -> Vec<(Option<usize>, String)> {
            list.iter().map(|&(p, n)| (p, n.to_string())).collect()
        };
        assert_eq!(
            known(Some(since)),
            named(&[
                (None, "b"),
                (None, "d"),
                (None, "f"),
                (Some(3), "e"),
                (Some(4), "c"),
                (Some(5), "a")
            ])
        );
        assert!(known(None).iter().all(|(p, _)| p.is_none()));
        // Listed by the watch (say after a restart of the webhook): the nodes that joined in
        // the same second as others could be in either order, so anywhere; a node alone in its
        // second keeps its place.
        let listed = inventory(false);
        assert_eq!(
            placed_in(&listed, Some(since), ListedNodeOrder::ByName),
            named(&[
                (None, "c"),
                (None, "e"),
                (Some(0), "b"),
                (Some(1), "d"),
                (Some(2), "f"),
                (Some(5), "a")
            ])
        );
        assert_eq!(
            placed_in(&listed, at(50), ListedNodeOrder::ByName),
            named(&[
                (None, "b"),
                (None, "c"),
                (None, "d"),
                (None, "e"),
                (Some(2), "f"),
                (Some(5), "a")
            ])
        );
    }
}
