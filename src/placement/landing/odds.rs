//! The odds each named node lands the pod, over every start of the run.

use super::Window;
use crate::scheduler::scores::MAX_NODE_SCORE;

/// A preferred node as the scheduler weighs it inside a run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Named {
    /// Its position in the scheduler's order; `None`: anywhere in it, so in a run by the
    /// sample's odds, independently of the others.
    pub(crate) position: Option<usize>,
    /// The summed weights of the preferred terms it matches (0: none).
    pub(crate) weight: i64,
    /// Its resource score (NodeResourcesFit + BalancedAllocation, weighted).
    pub(crate) score: i64,
    /// The odds it still has room when the scheduler reaches the pod (see
    /// `standing::fill_risk`): when it has none, the run's next best named node takes the pod.
    pub(crate) available: f64,
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
    // Alike, as the nodes that could be anywhere in one tier mostly are: with `X` of the
    // others binomial, `a * E[1 / (1 + X)]` is `(1 - (1 - a)^m) / m`.
    if let Some(&a) = open.first()
        && open.iter().all(|&o| o == a)
    {
        let m = open.len();
        let share = (1.0 - (1.0 - a).powi(i32::try_from(m).unwrap_or(i32::MAX))) / m as f64;
        return vec![share; m];
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::landing::testing::draws;

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

    /// Equal odds of room, taken at once, share as the node-by-node count does.
    #[test]
    fn alike_ties_share_as_counted_one_by_one() {
        for (a, m) in [
            (0.1, 1),
            (0.1, 59),
            (0.46, 11),
            (0.9, 7),
            (0.0, 3),
            (1.0, 4),
        ] {
            let fast = tie_shares(&vec![a; m]);
            // The last one a hair apart takes the general path.
            let mut apart = vec![a; m];
            apart[m - 1] = a * (1.0 - 1e-15);
            let slow = tie_shares(&apart);
            for (f, s) in fast.iter().zip(&slow) {
                assert!((f - s).abs() < 1e-9, "{a} x {m}: {fast:?} vs {slow:?}");
            }
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
}
