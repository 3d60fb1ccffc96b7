//! Where each node sits in the scheduler's order, where that can be known.

use std::sync::Arc;

use crate::config::scheduler::ListedNodeOrder;
use crate::scheduler::order::{listed_by_name, scheduler_order, zone_key};
use crate::view::ClusterView;

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
    let key = match listed {
        ListedNodeOrder::ByName => "order/positions/by-name",
        ListedNodeOrder::Unknown => "order/positions/listed-anywhere",
    };
    Positions(view.memo.get_or_compute(key.into(), || {
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
        let inventory = Inventory {
            nodes: nodes
                .iter()
                .map(|&(name, created, arrival)| {
                    let facts = NodeFacts {
                        ready: true,
                        created,
                        arrival,
                        ..NodeFacts::default()
                    };
                    (name.to_string(), facts)
                })
                .collect(),
        };
        // The nodes by position, those that could be anywhere first by name.
        let placed = |since: Option<std::time::SystemTime>, listed: ListedNodeOrder| {
            let view = ClusterView::build(&snapshot, Some(&inventory), &Default::default())
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
    }
}
