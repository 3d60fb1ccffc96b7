//! Which runs of the scheduler's order the nodes chosen so far cover.

use super::Window;

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
    pub(crate) fn new(window: Window, miss: f64) -> Self {
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
    pub(crate) fn adds(&self, place: Option<usize>) -> bool {
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

    pub(crate) fn add(&mut self, place: Option<usize>) {
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
    pub(crate) fn complete(&self) -> bool {
        self.anywhere >= self.anywhere_enough || !self.chosen.is_empty() && self.long_gaps == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::landing::testing::draws;

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
}
