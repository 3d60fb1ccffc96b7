//! Where the scheduler puts a pod among the nodes its tier 1 names.
//!
//! Above 100 nodes the scheduler scores a sample: a contiguous run of its node order (see
//! `scheduler::order`) from a rotating start, long enough to hold `numFeasibleNodesToFind`
//! feasible nodes. The start is unknown, so it is taken as uniform over the order; a pod
//! lands on the best-scored tier-1 node inside its run. A tier-1 node that sits alone in its
//! stretch of the order takes every pod whose run covers that stretch, which independent
//! sampling odds would badly under-count; this model counts it exactly (up to the density of
//! infeasible nodes, taken as even).

use std::sync::Arc;

use crate::scheduler::order::{scheduler_order, zone_key};
use crate::view::ClusterView;

/// The sample as a run of the order: `len` consecutive positions of `n`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Window {
    pub n: usize,
    pub len: usize,
}

impl Window {
    /// A run that holds `wanted` of `feasible` feasible nodes, over `n` positions.
    pub fn new(n: usize, wanted: usize, feasible: usize) -> Self {
        let len = if feasible == 0 || wanted >= feasible {
            n
        } else {
            (wanted as f64 * n as f64 / feasible as f64).ceil() as usize
        };
        Window {
            n,
            len: len.clamp(1.min(n), n),
        }
    }

    /// Every position is in every sample.
    pub fn whole(&self) -> bool {
        self.len >= self.n
    }

    /// The run from `start` holds `position`.
    #[cfg(test)]
    fn holds(&self, start: usize, position: usize) -> bool {
        (position + self.n - start) % self.n < self.len
    }
}

/// Each node of `view` (by position) at its place in the scheduler's order: zones round-robin;
/// within a zone, the nodes the scheduler listed when it started in name order, then those
/// that joined later in the order they joined. Once per view.
pub fn order_positions(view: &ClusterView) -> Arc<[u32]> {
    view.memo.get_or_compute("order/positions".into(), || {
        let names: Vec<&str> = view.nodes.iter().map(|n| n.name.as_str()).collect();
        let zones: Vec<String> = view.nodes.iter().map(|n| zone_key(&n.labels)).collect();
        let order = scheduler_order(&names, &zones, &joined_later(view));
        let mut positions = vec![0u32; view.nodes.len()];
        for (position, &index) in order.iter().enumerate() {
            positions[index] = u32::try_from(position).unwrap_or(u32::MAX);
        }
        positions
    })
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

/// Which starts have a chosen node in their run, as the chosen positions in order.
#[derive(Debug, Clone)]
pub(crate) struct Coverage {
    window: Window,
    chosen: Vec<usize>,
    /// Stretches between consecutive chosen nodes longer than a run: kept as nodes are added,
    /// so `complete` is asked for free once per candidate.
    long_gaps: usize,
    /// Per position, once a node is chosen: it is not chosen and lies in a stretch longer
    /// than a run. Kept as nodes are added (a stretch only shrinks, so each position closes
    /// once), so `adds` is a lookup: a decision asks it of thousands of candidates.
    open: Vec<bool>,
}

impl Coverage {
    pub fn new(window: Window) -> Self {
        Coverage {
            window,
            chosen: Vec::new(),
            long_gaps: 0,
            open: Vec::new(),
        }
    }

    /// The stretch from one chosen position to the next, going round.
    fn gap(&self, from: usize, to: usize) -> usize {
        let n = self.window.n;
        match (to + n - from) % n {
            0 => n,
            gap => gap,
        }
    }

    fn is_long(&self, from: usize, to: usize) -> bool {
        self.gap(from, to) > self.window.len
    }

    /// The chosen positions around `position` (which is not chosen): before and after it.
    fn neighbours(&self, position: usize) -> (usize, usize) {
        let after = self.chosen.partition_point(|&p| p < position);
        let next = self.chosen.get(after).copied().unwrap_or(self.chosen[0]);
        let before = if after == 0 {
            self.chosen[self.chosen.len() - 1]
        } else {
            self.chosen[after - 1]
        };
        (before, next)
    }

    /// Some run would hold a node at `position` and none chosen so far: the stretch between
    /// the chosen nodes around it is longer than a run.
    pub fn adds(&self, position: usize) -> bool {
        if self.window.whole() {
            return self.chosen.is_empty();
        }
        if self.chosen.is_empty() {
            return true;
        }
        self.open.get(position).copied().unwrap_or(false)
    }

    pub fn add(&mut self, position: usize) {
        let Err(at) = self.chosen.binary_search(&position) else {
            return;
        };
        if self.chosen.is_empty() {
            self.long_gaps = usize::from(self.is_long(position, position));
            if !self.window.whole() {
                self.open = vec![true; self.window.n];
            }
        } else {
            let (before, next) = self.neighbours(position);
            let now_long = usize::from(self.is_long(before, position))
                + usize::from(self.is_long(position, next));
            self.long_gaps = self.long_gaps + now_long - usize::from(self.is_long(before, next));
            for (from, to) in [(before, position), (position, next)] {
                if !self.is_long(from, to) {
                    self.close_between(from, to);
                }
            }
        }
        if let Some(open) = self.open.get_mut(position) {
            *open = false;
        }
        self.chosen.insert(at, position);
    }

    /// No position strictly between `from` and `to` (going round) adds any more.
    fn close_between(&mut self, from: usize, to: usize) {
        let n = self.open.len();
        if from >= n || to >= n {
            return;
        }
        if from < to {
            self.open[from + 1..to].fill(false);
        } else {
            self.open[from + 1..].fill(false);
            self.open[..to].fill(false);
        }
    }

    /// Every run holds a chosen node.
    pub fn complete(&self) -> bool {
        !self.chosen.is_empty() && self.long_gaps == 0
    }
}

/// A preferred node as the scheduler weighs it inside a run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Named {
    /// Its position in the scheduler's order.
    pub position: usize,
    /// 0 for tier 1, 1 for the cover tier: the affinity gap between levels outweighs the
    /// resource scores.
    pub level: u8,
    /// Its resource score (NodeResourcesFit + BalancedAllocation, weighted).
    pub score: i64,
    /// The odds it still has room when the scheduler reaches the pod (see
    /// `standing::fill_risk`): when it has none, the run's next best named node takes the pod.
    pub available: f64,
}

impl Named {
    /// What decides inside a run: the level first, then the score.
    fn key(&self) -> (std::cmp::Reverse<u8>, i64) {
        (std::cmp::Reverse(self.level), self.score)
    }
}

/// Landing odds of each named node: the best key inside the run wins, equal keys share; a node
/// that may have filled passes the pod, for the odds it has, to the next best inside the run.
/// Odds sum to the share of runs that hold any of them (1 when the coverage is complete and
/// some node of every run surely has room).
pub(crate) fn landing_odds(window: Window, tier: &[Named]) -> Vec<f64> {
    let mut odds = vec![0.0; tier.len()];
    if tier.is_empty() || window.n == 0 {
        return odds;
    }
    if window.whole() {
        share_run(tier, 0..tier.len(), 1.0, &mut odds);
        return odds;
    }
    let n = window.n;
    // The starts where a node enters or leaves the run: the set of nodes in the run is
    // constant between two of them.
    let mut cuts: Vec<usize> = tier
        .iter()
        .flat_map(|t| [(t.position + n + 1 - window.len) % n, (t.position + 1) % n])
        .collect();
    cuts.sort_unstable();
    cuts.dedup();
    // The named nodes in order of position, twice round (the second time one order further
    // on): a run from `start` holds exactly those at `start..start + len` of it, so as the
    // cuts go up the run's nodes are a window of it that only moves forward.
    let mut by_position: Vec<(usize, usize)> = tier
        .iter()
        .enumerate()
        .map(|(j, t)| (t.position, j))
        .collect();
    by_position.sort_unstable();
    let count = by_position.len();
    let round = |k: usize| {
        if k < count {
            by_position[k]
        } else {
            let (position, j) = by_position[k - count];
            (position + n, j)
        }
    };
    let (mut from, mut to) = (0, 0);
    for (k, &start) in cuts.iter().enumerate() {
        let end = cuts.get(k + 1).copied().unwrap_or(cuts[0] + n);
        let starts = (end - start) as f64 / n as f64;
        while from < count && round(from).0 < start {
            from += 1;
        }
        to = to.max(from);
        while to < from + count && round(to).0 < start + window.len {
            to += 1;
        }
        share_run(tier, (from..to).map(|k| round(k).1), starts, &mut odds);
    }
    odds
}

/// Shares `mass` (the runs holding exactly `inside`) among the nodes `inside`: the best key
/// takes it, equal keys alike, and what they may pass on for lack of room goes to the next
/// best key, and so on.
fn share_run(
    tier: &[Named],
    inside: impl Iterator<Item = usize> + Clone,
    mass: f64,
    odds: &mut [f64],
) {
    let mut rest = mass;
    let mut below: Option<(std::cmp::Reverse<u8>, i64)> = None;
    loop {
        let Some(best) = inside
            .clone()
            .map(|j| tier[j].key())
            .filter(|k| below.is_none_or(|b| *k < b))
            .max()
        else {
            return;
        };
        let group = inside.clone().filter(|&j| tier[j].key() == best);
        if group.clone().all(|j| tier[j].available >= 1.0) {
            let winners = group.clone().count() as f64;
            for j in group {
                odds[j] += rest / winners;
            }
            return;
        }
        let members: Vec<usize> = group.collect();
        let open: Vec<f64> = members
            .iter()
            .map(|&j| tier[j].available.clamp(0.0, 1.0))
            .collect();
        for (&j, share) in members.iter().zip(tie_shares(&open)) {
            odds[j] += rest * share;
        }
        rest *= open.iter().map(|a| 1.0 - a).product::<f64>();
        if rest <= 0.0 {
            return;
        }
        below = Some(best);
    }
}

/// Equally scored nodes, each with room at the odds `open`: the odds each takes the pod, the
/// scheduler choosing evenly among those with room (`open[k]` times the mean of 1 / (1 + how
/// many of the others have room)).
fn tie_shares(open: &[f64]) -> Vec<f64> {
    (0..open.len())
        .map(|k| {
            // How many of the others have room: its distribution, one node at a time.
            let mut others = vec![1.0];
            for (m, &a) in open.iter().enumerate() {
                if m == k {
                    continue;
                }
                let mut next = vec![0.0; others.len() + 1];
                for (x, &p) in others.iter().enumerate() {
                    next[x] += p * (1.0 - a);
                    next[x + 1] += p * a;
                }
                others = next;
            }
            let mean_share: f64 = others
                .iter()
                .enumerate()
                .map(|(x, p)| p / (1 + x) as f64)
                .sum();
            open[k] * mean_share
        })
        .collect()
}

/// The landing as a decision charges it and the annotation carries it: the nodes (positions in
/// `view`) with their `odds`, most likely first, the least likely dropped as long as together
/// they hold at most 1% of the total (they only lengthen the annotation), the rest scaled to
/// sum to one. Empty when no node has odds. Odds spread thin over many nodes are kept: dropping
/// each share under 1% would drop every one of a hundred equal shares.
pub(crate) fn landing_shares(
    view: &ClusterView,
    nodes: impl IntoIterator<Item = usize>,
    odds: Vec<f64>,
) -> Vec<(String, f64)> {
    let mut landing: Vec<(String, f64)> = nodes
        .into_iter()
        .zip(odds)
        .filter(|(_, p)| *p > 0.0)
        .map(|(i, p)| (view.nodes[i].name.clone(), p))
        .collect();
    landing.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    keep_likely(&mut landing);
    landing
}

/// Of `shares`, most likely first: drops the least likely while together they hold at most 1%
/// of the total, and scales the rest to sum to 1.
fn keep_likely<T>(shares: &mut Vec<(T, f64)>) {
    let total: f64 = shares.iter().map(|(_, p)| p).sum();
    let mut dropped = 0.0;
    while shares.len() > 1
        && let Some(&(_, p)) = shares.last()
        && dropped + p <= 0.01 * total
    {
        dropped += p;
        shares.pop();
    }
    let kept: f64 = shares.iter().map(|(_, p)| p).sum();
    for (_, p) in shares.iter_mut() {
        *p /= kept;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(list: &[(usize, u8, i64)]) -> Vec<Named> {
        list.iter()
            .map(|&(position, level, score)| Named {
                position,
                level,
                score,
                available: 1.0,
            })
            .collect()
    }

    #[test]
    fn odds_spread_thin_are_kept_and_only_a_small_tail_is_dropped() {
        // 139 equal shares of 0.7%: one is dropped (two would hold 1.4%), not all of them.
        let mut thin: Vec<(usize, f64)> = (0..139).map(|k| (k, 1.0 / 139.0)).collect();
        keep_likely(&mut thin);
        assert_eq!(thin.len(), 138);
        assert!((thin.iter().map(|(_, p)| p).sum::<f64>() - 1.0).abs() < 1e-9);
        // A tail holding 0.9% in all goes, the rest is scaled up.
        let mut tail = vec![(0, 0.6), (1, 0.391), (2, 0.005), (3, 0.004)];
        keep_likely(&mut tail);
        assert_eq!(tail.iter().map(|(k, _)| *k).collect::<Vec<_>>(), vec![0, 1]);
        assert!((tail[0].1 - 0.6 / 0.991).abs() < 1e-9);
        // One share is kept whatever its size.
        let mut one = vec![(7, 0.001)];
        keep_likely(&mut one);
        assert_eq!(one, vec![(7, 1.0)]);
    }

    #[test]
    fn a_node_alone_in_its_stretch_takes_every_run_that_holds_it() {
        // 100 positions, runs of 10. Two good nodes side by side at 0 and 1, a weaker one
        // alone at 50.
        let window = Window { n: 100, len: 10 };
        let odds = landing_odds(window, &named(&[(0, 0, 90), (1, 0, 80), (50, 0, 10)]));
        // The alone node wins all 10 runs that hold it, though it scores worst.
        assert!((odds[2] - 0.10).abs() < 1e-12, "{odds:?}");
        // Node 0 wins every run holding it (10); node 1 only the run starting at 1.
        assert!((odds[0] - 0.10).abs() < 1e-12, "{odds:?}");
        assert!((odds[1] - 0.01).abs() < 1e-12, "{odds:?}");
    }

    /// The odds by trying every start and every set of nodes with room: the best key inside
    /// each run among those with room wins, equal keys share.
    fn brute_odds(window: Window, tier: &[Named]) -> Vec<f64> {
        let mut brute = vec![0.0; tier.len()];
        for with_room in 0..1usize << tier.len() {
            let chance: f64 = tier
                .iter()
                .enumerate()
                .map(|(j, t)| {
                    if with_room & (1 << j) != 0 {
                        t.available
                    } else {
                        1.0 - t.available
                    }
                })
                .product();
            if chance == 0.0 {
                continue;
            }
            for start in 0..window.n {
                let inside: Vec<usize> = (0..tier.len())
                    .filter(|&j| with_room & (1 << j) != 0)
                    .filter(|&j| window.holds(start, tier[j].position))
                    .collect();
                let Some(best) = inside.iter().map(|&j| tier[j].key()).max() else {
                    continue;
                };
                let winners: Vec<usize> = inside
                    .into_iter()
                    .filter(|&j| tier[j].key() == best)
                    .collect();
                for &j in &winners {
                    brute[j] += chance / window.n as f64 / winners.len() as f64;
                }
            }
        }
        brute
    }

    /// A seeded stream of draws below a bound (a fixed LCG: the same cases every run).
    fn draws(mut seed: u64) -> impl FnMut(usize) -> usize {
        move |below: usize| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((seed >> 33) as usize) % below.max(1)
        }
    }

    #[test]
    fn odds_match_brute_force_over_every_start() {
        let window = Window { n: 37, len: 6 };
        let tier = named(&[
            (3, 0, 5),
            (5, 0, 7),
            (20, 0, 7),
            (33, 1, 1),
            (35, 1, 9),
            (2, 1, 50),
        ]);
        let odds = landing_odds(window, &tier);
        let brute = brute_odds(window, &tier);
        for (a, b) in odds.iter().zip(&brute) {
            assert!((a - b).abs() < 1e-12, "{odds:?} vs {brute:?}");
        }
    }

    /// Every start tried, for seeded random orders, runs and tiers (ties, both levels,
    /// nodes side by side and alone).
    #[test]
    fn odds_match_brute_force_on_random_tiers() {
        let mut next = draws(0x9e37_79b9);
        for _ in 0..500 {
            let n = 1 + next(60);
            let window = Window {
                n,
                len: 1 + next(n),
            };
            let mut positions: Vec<usize> = (0..n).collect();
            let count = 1 + next(n.min(10));
            let tier: Vec<Named> = (0..count)
                .map(|_| Named {
                    position: positions.swap_remove(next(positions.len())),
                    level: next(2) as u8,
                    score: next(4) as i64,
                    // Most surely have room; some may fill first, one in a while surely.
                    available: [1.0, 1.0, 0.9, 0.5, 0.25, 0.0][next(6)],
                })
                .collect();
            let odds = landing_odds(window, &tier);
            let brute = brute_odds(window, &tier);
            for (a, b) in odds.iter().zip(&brute) {
                assert!(
                    (a - b).abs() < 1e-9,
                    "{window:?} {tier:?}: {odds:?} vs {brute:?}"
                );
            }
        }
    }

    /// `adds` against the stretches worked out from scratch, for seeded random additions.
    #[test]
    fn coverage_adds_matches_the_stretches_from_scratch() {
        let mut next = draws(0x2545_f491);
        for _ in 0..300 {
            let n = 1 + next(80);
            let window = Window {
                n,
                len: 1 + next(n),
            };
            let mut coverage = Coverage::new(window);
            let mut chosen: Vec<usize> = Vec::new();
            for _ in 0..1 + next(12) {
                for position in 0..n {
                    // Some run holds `position` and no chosen node.
                    let expected = !chosen.contains(&position)
                        && (0..n).any(|start| {
                            window.holds(start, position)
                                && !chosen.iter().any(|&c| window.holds(start, c))
                        });
                    assert_eq!(
                        coverage.adds(position),
                        expected,
                        "{window:?} chosen {chosen:?} position {position}"
                    );
                }
                let expected_complete = !chosen.is_empty()
                    && (0..n).all(|start| chosen.iter().any(|&c| window.holds(start, c)));
                assert_eq!(
                    coverage.complete(),
                    expected_complete,
                    "{window:?} {chosen:?}"
                );
                let position = next(n);
                coverage.add(position);
                if !chosen.contains(&position) {
                    chosen.push(position);
                }
            }
        }
    }

    #[test]
    fn coverage_adds_only_nodes_in_stretches_longer_than_a_run() {
        let mut coverage = Coverage::new(Window { n: 100, len: 30 });
        assert!(coverage.adds(10));
        coverage.add(10);
        assert!(!coverage.complete());
        assert!(coverage.adds(35));
        coverage.add(35);
        coverage.add(62);
        // Gaps 25, 27, 48: the last is longer than a run.
        assert!(!coverage.complete());
        assert!(!coverage.adds(20));
        assert!(coverage.adds(80));
        coverage.add(85);
        assert!(coverage.complete());
        assert!(!coverage.adds(90));
    }

    #[test]
    fn window_spans_the_share_of_the_order_that_holds_the_wanted_feasible_nodes() {
        assert_eq!(Window::new(5000, 500, 5000).len, 500);
        assert_eq!(Window::new(5000, 500, 2500).len, 1000);
        assert!(Window::new(80, 100, 80).whole());
    }

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
        let order = |since: Option<std::time::SystemTime>| {
            let view = ClusterView::build(&snapshot, Some(&inventory), &Default::default())
                .with_scheduler_since(since);
            let positions = order_positions(&view);
            let mut names: Vec<(u32, String)> = view
                .nodes
                .iter()
                .enumerate()
                .map(|(i, n)| (positions[i], n.name.clone()))
                .collect();
            names.sort_unstable();
            names.into_iter().map(|(_, n)| n).collect::<Vec<_>>()
        };
        assert_eq!(order(None), ["a", "b", "c", "d", "e", "f"]);
        // Taken at 200.4 s: f (created in that second) counts as listed.
        let since = UNIX_EPOCH + Duration::from_millis(200_400);
        assert_eq!(order(Some(since)), ["b", "d", "f", "e", "c", "a"]);
        // Before every node: all joined later, by creation second then arrival.
        assert_eq!(order(at(50)), ["d", "b", "f", "e", "c", "a"]);
    }
}
