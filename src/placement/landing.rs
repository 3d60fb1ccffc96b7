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

use crate::config::scheduler::ListedNodeOrder;
use crate::scheduler::order::{listed_by_name, scheduler_order, zone_key};
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

/// How many nodes, each in a sample of `fraction` independently, make it `miss`-unlikely
/// that none is; at least `at_least`.
pub(crate) fn tier_size_for_sample(fraction: f64, miss: f64, at_least: usize) -> usize {
    if fraction >= 1.0 || fraction <= 0.0 {
        return at_least;
    }
    let needed = (miss.ln() / (1.0 - fraction).ln()).ceil();
    at_least.max(needed as usize)
}

/// Which starts have a chosen node in their run, as the chosen positions in order; and how
/// many chosen nodes could be anywhere in the order, each in a run by the sample's odds.
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
    /// Chosen nodes without a known position.
    anywhere: usize,
    /// Enough of those that every run misses them all with at most the `miss` odds.
    anywhere_enough: usize,
}

impl Coverage {
    /// Coverage of `window`'s runs; nodes without a known position cover every run but for
    /// `miss` odds once there are enough of them.
    pub fn new(window: Window, miss: f64) -> Self {
        let fraction = if window.n == 0 {
            1.0
        } else {
            window.len as f64 / window.n as f64
        };
        Coverage {
            window,
            chosen: Vec::new(),
            long_gaps: 0,
            open: Vec::new(),
            anywhere: 0,
            anywhere_enough: tier_size_for_sample(fraction, miss, 1),
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

    /// A node at `place` (`None`: anywhere) would be in some run that may hold no chosen node:
    /// the stretch between the chosen nodes around it is longer than a run, or it could be
    /// anywhere and some run still is.
    pub fn adds(&self, place: Option<usize>) -> bool {
        if self.anywhere >= self.anywhere_enough {
            return false;
        }
        if self.window.whole() {
            return self.chosen.is_empty() && self.anywhere == 0;
        }
        if self.chosen.is_empty() {
            return true;
        }
        match place {
            None => self.long_gaps > 0,
            Some(position) => self.open.get(position).copied().unwrap_or(false),
        }
    }

    pub fn add(&mut self, place: Option<usize>) {
        let Some(position) = place else {
            self.anywhere += 1;
            return;
        };
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

    /// Every run holds a chosen node (those that could be anywhere: but for the `miss` odds).
    pub fn complete(&self) -> bool {
        self.anywhere >= self.anywhere_enough || !self.chosen.is_empty() && self.long_gaps == 0
    }
}

/// A preferred node as the scheduler weighs it inside a run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Named {
    /// Its position in the scheduler's order; `None`: anywhere in it, so in a run by the
    /// sample's odds, independently of the others.
    pub position: Option<usize>,
    /// The summed weights of the preferred terms it matches (0: none).
    pub weight: i64,
    /// Its resource score (NodeResourcesFit + BalancedAllocation, weighted).
    pub score: i64,
    /// The odds it still has room when the scheduler reaches the pod (see
    /// `standing::fill_risk`): when it has none, the run's next best named node takes the pod.
    pub available: f64,
}

impl Named {
    /// What decides inside a run whose named nodes weigh at most `heaviest`: NodeAffinity's
    /// points (its weights normalised to the run's heaviest, times the plugin's weight) plus
    /// the resource score.
    fn key(&self, heaviest: i64, affinity_weight: i64) -> i64 {
        let points = if heaviest > 0 {
            MAX_NODE_SCORE * self.weight / heaviest
        } else {
            0
        };
        points * affinity_weight + self.score
    }
}

/// `framework.MaxNodeScore`: what a normalised score is scaled to.
const MAX_NODE_SCORE: i64 = 100;

/// Landing odds of each named node: the best key inside the run wins, equal keys share; a node
/// that may have filled passes the pod, for the odds it has, to the next best inside the run.
/// A node that could be anywhere is in each run by the sample's odds: like a node in every run
/// that has room only that often. Odds sum to the share of runs that hold any of them (1 when
/// the coverage is complete and some node of every run surely has room).
pub(crate) fn landing_odds(window: Window, affinity_weight: i64, tier: &[Named]) -> Vec<f64> {
    let mut odds = vec![0.0; tier.len()];
    if tier.is_empty() || window.n == 0 {
        return odds;
    }
    if window.whole() {
        let sharing = Sharing {
            tier,
            affinity_weight,
        };
        sharing.share_run(0..tier.len(), 1.0, &mut odds);
        return odds;
    }
    let n = window.n;
    let in_run = window.len as f64 / n as f64;
    let tier: Vec<Named> = tier
        .iter()
        .map(|t| match t.position {
            Some(_) => *t,
            None => Named {
                available: t.available * in_run,
                ..*t
            },
        })
        .collect();
    let sharing = Sharing {
        tier: &tier,
        affinity_weight,
    };
    let anywhere: Vec<usize> = (0..tier.len())
        .filter(|&j| tier[j].position.is_none())
        .collect();
    // The named nodes with a place, in order of position, twice round (the second time one
    // order further on): a run from `start` holds exactly those at `start..start + len` of
    // it, so as the cuts go up the run's nodes are a window of it that only moves forward.
    let mut by_position: Vec<(usize, usize)> = tier
        .iter()
        .enumerate()
        .filter_map(|(j, t)| Some((t.position?, j)))
        .collect();
    if by_position.is_empty() {
        sharing.share_run(anywhere.iter().copied(), 1.0, &mut odds);
        return odds;
    }
    by_position.sort_unstable();
    // The starts where a node enters or leaves the run: the set of nodes in the run is
    // constant between two of them.
    let mut cuts: Vec<usize> = by_position
        .iter()
        .flat_map(|&(position, _)| [(position + n + 1 - window.len) % n, (position + 1) % n])
        .collect();
    cuts.sort_unstable();
    cuts.dedup();
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
        let inside = (from..to)
            .map(|k| round(k).1)
            .chain(anywhere.iter().copied());
        sharing.share_run(inside, starts, &mut odds);
    }
    odds
}

/// The named nodes and how the scheduler weighs their terms: what shares a run's pods out.
struct Sharing<'a> {
    tier: &'a [Named],
    /// NodeAffinity's weight in the profile.
    affinity_weight: i64,
}

impl Sharing<'_> {
    /// Shares `mass` (the runs holding exactly `inside`) among the nodes `inside` that have
    /// room. NodeAffinity normalises the weights to the heaviest node it scores, so the odds
    /// are summed over which weight is the heaviest with room: for each, the runs where every
    /// heavier node is out, less those where this weight's nodes are out too (counted at the
    /// next weight).
    fn share_run(&self, inside: impl Iterator<Item = usize>, mass: f64, odds: &mut [f64]) {
        let tier = self.tier;
        let mut members: Vec<usize> = inside.collect();
        members.sort_by_key(|&j| std::cmp::Reverse(tier[j].weight));
        let mut heavier_out = mass;
        let mut k = 0;
        while k < members.len() && heavier_out != 0.0 {
            let heaviest = tier[members[k]].weight;
            let end = k + members[k..]
                .iter()
                .take_while(|&&j| tier[j].weight == heaviest)
                .count();
            let all_out: f64 = members[k..end]
                .iter()
                .map(|&j| 1.0 - tier[j].available.clamp(0.0, 1.0))
                .product();
            self.share_by_key(&members[k..], heaviest, heavier_out, odds);
            if end < members.len() && all_out > 0.0 {
                self.share_by_key(&members[end..], heaviest, -heavier_out * all_out, odds);
            }
            heavier_out *= all_out;
            k = end;
        }
    }

    /// Shares `mass` among `members`, scored with `heaviest` as the heaviest weight: the best
    /// key takes it, equal keys alike, and what they may pass on for lack of room goes to the
    /// next best key, and so on.
    fn share_by_key(&self, members: &[usize], heaviest: i64, mass: f64, odds: &mut [f64]) {
        let tier = self.tier;
        let mut keyed: Vec<(i64, usize)> = members
            .iter()
            .map(|&j| (tier[j].key(heaviest, self.affinity_weight), j))
            .collect();
        keyed.sort_by_key(|&(key, _)| std::cmp::Reverse(key));
        let mut rest = mass;
        for group in keyed.chunk_by(|a, b| a.0 == b.0) {
            if group.iter().all(|&(_, j)| tier[j].available >= 1.0) {
                let winners = group.len() as f64;
                for &(_, j) in group {
                    odds[j] += rest / winners;
                }
                return;
            }
            let open: Vec<f64> = group
                .iter()
                .map(|&(_, j)| tier[j].available.clamp(0.0, 1.0))
                .collect();
            for (&(_, j), share) in group.iter().zip(tie_shares(&open)) {
                odds[j] += rest * share;
            }
            rest *= open.iter().map(|a| 1.0 - a).product::<f64>();
            if rest == 0.0 {
                return;
            }
        }
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

    /// The scheduler's default NodeAffinity weight.
    const AFFINITY: i64 = 2;

    /// Nodes at (position, tier, resource score): tier 0 weighs 110, tier 1 30 (the default
    /// tiers' 100 and 20, each with the avoid term's 10).
    fn named(list: &[(usize, u8, i64)]) -> Vec<Named> {
        list.iter()
            .map(|&(position, tier, score)| Named {
                position: Some(position),
                weight: if tier == 0 { 110 } else { 30 },
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
        let odds = landing_odds(
            window,
            AFFINITY,
            &named(&[(0, 0, 90), (1, 0, 80), (50, 0, 10)]),
        );
        // The alone node wins all 10 runs that hold it, though it scores worst.
        assert!((odds[2] - 0.10).abs() < 1e-12, "{odds:?}");
        // Node 0 wins every run holding it (10); node 1 only the run starting at 1.
        assert!((odds[0] - 0.10).abs() < 1e-12, "{odds:?}");
        assert!((odds[1] - 0.01).abs() < 1e-12, "{odds:?}");
    }

    /// The odds by trying every start and every set of nodes with room and, of those that
    /// could be anywhere, every set in the run: the best key inside each run among those with
    /// room wins, equal keys share.
    fn brute_odds(window: Window, tier: &[Named]) -> Vec<f64> {
        let mut brute = vec![0.0; tier.len()];
        let in_run = if window.whole() {
            1.0
        } else {
            window.len as f64 / window.n as f64
        };
        let bit = |set: usize, j: usize, odds: f64| {
            if set & (1 << j) != 0 {
                odds
            } else {
                1.0 - odds
            }
        };
        let anywhere: usize = (0..tier.len())
            .filter(|&j| tier[j].position.is_none())
            .map(|j| 1 << j)
            .sum();
        // Every subset of the nodes that could be anywhere.
        let samples: Vec<usize> = (0..=anywhere).filter(|s| s & !anywhere == 0).collect();
        for (with_room, sampled) in
            (0..1usize << tier.len()).flat_map(|r| samples.iter().map(move |&s| (r, s)))
        {
            let chance: f64 = tier
                .iter()
                .enumerate()
                .map(|(j, t)| match t.position {
                    Some(_) if sampled & (1 << j) == 0 => 1.0,
                    Some(_) => 0.0,
                    None => bit(sampled, j, in_run),
                } * bit(with_room, j, t.available))
                .product();
            if chance == 0.0 {
                continue;
            }
            for start in 0..window.n {
                let inside: Vec<usize> = (0..tier.len())
                    .filter(|&j| with_room & (1 << j) != 0)
                    .filter(|&j| {
                        tier[j]
                            .position
                            .map_or(sampled & (1 << j) != 0, |p| window.holds(start, p))
                    })
                    .collect();
                // NodeAffinity normalises to the heaviest node it scores.
                let heaviest = inside.iter().map(|&j| tier[j].weight).max().unwrap_or(0);
                let key = |j: usize| tier[j].key(heaviest, AFFINITY);
                let Some(best) = inside.iter().map(|&j| key(j)).max() else {
                    continue;
                };
                let winners: Vec<usize> = inside.into_iter().filter(|&j| key(j) == best).collect();
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
        let odds = landing_odds(window, AFFINITY, &tier);
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
                    // One in four could be anywhere.
                    position: Some(positions.swap_remove(next(positions.len())))
                        .filter(|_| next(4) > 0),
                    // Graded weights, and scores that can overturn them.
                    weight: [0, 30, 60, 95, 110][next(5)],
                    score: 40 * next(4) as i64,
                    // Most surely have room; some may fill first, one in a while surely.
                    available: [1.0, 1.0, 0.9, 0.5, 0.25, 0.0][next(6)],
                })
                .collect();
            let odds = landing_odds(window, AFFINITY, &tier);
            let brute = brute_odds(window, &tier);
            for (a, b) in odds.iter().zip(&brute) {
                assert!(
                    (a - b).abs() < 1e-9,
                    "{window:?} {tier:?}: {odds:?} vs {brute:?}"
                );
            }
        }
    }

    /// `adds` against the stretches worked out from scratch, for seeded random additions,
    /// some of nodes that could be anywhere.
    #[test]
    fn coverage_adds_matches_the_stretches_from_scratch() {
        let mut next = draws(0x2545_f491);
        let miss = 0.3;
        for _ in 0..300 {
            let n = 1 + next(80);
            let window = Window {
                n,
                len: 1 + next(n),
            };
            let enough = tier_size_for_sample(window.len as f64 / n as f64, miss, 1);
            let mut coverage = Coverage::new(window, miss);
            let mut chosen: Vec<usize> = Vec::new();
            let mut anywhere = 0;
            for _ in 0..1 + next(12) {
                let uncovered = |start: usize| !chosen.iter().any(|&c| window.holds(start, c));
                let short = anywhere < enough;
                for position in 0..n {
                    // Some run holds `position` and no chosen node.
                    let expected = short
                        && !chosen.contains(&position)
                        && (0..n).any(|start| window.holds(start, position) && uncovered(start));
                    assert_eq!(
                        coverage.adds(Some(position)),
                        expected,
                        "{window:?} chosen {chosen:?} + {anywhere} position {position}"
                    );
                }
                let expected = short && (0..n).any(uncovered);
                assert_eq!(coverage.adds(None), expected, "{window:?} {chosen:?}");
                let expected_complete =
                    !short || !chosen.is_empty() && (0..n).all(|start| !uncovered(start));
                assert_eq!(
                    coverage.complete(),
                    expected_complete,
                    "{window:?} {chosen:?} + {anywhere}"
                );
                if next(4) == 0 {
                    coverage.add(None);
                    anywhere += 1;
                } else {
                    let position = next(n);
                    coverage.add(Some(position));
                    if !chosen.contains(&position) {
                        chosen.push(position);
                    }
                }
            }
        }
    }

    /// Nodes that could be anywhere complete the coverage once enough of them make missing
    /// them all `miss`-unlikely: 0.9^22 < 0.1 < 0.9^21.
    #[test]
    fn nodes_anywhere_cover_every_run_once_enough_are_chosen() {
        let mut coverage = Coverage::new(Window { n: 1000, len: 100 }, 0.1);
        for _ in 0..21 {
            assert!(coverage.adds(None));
            coverage.add(None);
            assert!(!coverage.complete());
        }
        coverage.add(None);
        assert!(coverage.complete());
        assert!(!coverage.adds(None) && !coverage.adds(Some(500)));
    }

    #[test]
    fn coverage_adds_only_nodes_in_stretches_longer_than_a_run() {
        let mut coverage = Coverage::new(Window { n: 100, len: 30 }, 0.002);
        assert!(coverage.adds(Some(10)));
        coverage.add(Some(10));
        assert!(!coverage.complete());
        assert!(coverage.adds(Some(35)));
        coverage.add(Some(35));
        coverage.add(Some(62));
        // Gaps 25, 27, 48: the last is longer than a run.
        assert!(!coverage.complete());
        assert!(!coverage.adds(Some(20)));
        assert!(coverage.adds(Some(80)));
        coverage.add(Some(85));
        assert!(coverage.complete());
        assert!(!coverage.adds(Some(90)));
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
