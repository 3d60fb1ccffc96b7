//! Reading a rank index: its nodes in decision order, over every node or those a score keeps.

use std::cell::OnceCell;
use std::collections::btree_set;
use std::ops::Bound::{Excluded, Included, Unbounded};

use super::{ByHeat, ByOrder, RankIndex};
use crate::placement::landing::{Coverage, Positions};
use crate::placement::rank::standing::{Candidate, Ranking, Standing, cover_in_order};

impl RankIndex {
    /// The ranking of the nodes `allowed` marks (by view position), or of every node.
    pub(crate) fn ranking<'a>(&'a self, allowed: Option<&'a [bool]>) -> Restricted<'a> {
        let few = allowed.and_then(|allowed| {
            let count = allowed.iter().filter(|&&kept| kept).count();
            (count * FEW_BELOW < allowed.len()).then(|| self.few(allowed, count))
        });
        Restricted {
            index: self,
            allowed,
            few,
            best: OnceCell::new(),
            cool_read: Vec::new(),
            cool_all_read: false,
        }
    }

    /// The nodes `allowed` marks, in the orders the sets keep, read from their standings.
    fn few(&self, allowed: &[bool], count: usize) -> Few {
        let mut few = Few {
            cool: Vec::with_capacity(count),
            hot: Vec::new(),
            hot_order: Vec::new(),
        };
        let marked = allowed
            .iter()
            .enumerate()
            .filter(|&(_, &kept)| kept)
            .map(|(index, _)| index);
        for index in marked {
            match self.standings.get(index).copied().flatten() {
                Some(Standing::Cool(heat)) => few.cool.push(self.candidate(index, heat).0),
                Some(Standing::Hot { heat, pod }) => {
                    few.hot.push(self.by_heat(index, heat));
                    few.hot_order.push(self.candidate(index, pod).0);
                }
                Some(Standing::Full) | None => {}
            }
        }
        few.cool.sort_by(Candidate::order);
        few.hot.sort();
        few.hot_order.sort_by(Candidate::order);
        few
    }
}

/// Below one node in this many marked, a restricted ranking reads the marked nodes' standings
/// into short sorted lists rather than reading the sets past every node left out: a score
/// that keeps a handful of nodes would otherwise cost a pass over the whole index.
const FEW_BELOW: usize = 8;

/// The few nodes a restricted ranking reads, sorted as the sets are.
struct Few {
    cool: Vec<Candidate>,
    hot: Vec<ByHeat>,
    hot_order: Vec<Candidate>,
}

/// An index read over some nodes only: those the scores of the plugins that count pods keep
/// for one pod (see `pod_level::best_scored`), which other pods of its shape may not share.
pub(crate) struct Restricted<'a> {
    index: &'a RankIndex,
    allowed: Option<&'a [bool]>,
    few: Option<Few>,
    /// The first cool node read through: a decision asks for it several times, and finding
    /// it walks the set past every node left out before it.
    best: OnceCell<Option<Candidate>>,
    /// The cool nodes read through so far, in order. A decision scans them once per tier for
    /// the runs its tier leaves out, often to the end when the nodes read through leave
    /// stretches of the order empty: the set's walk past every node left out is done once.
    cool_read: Vec<&'a ByOrder>,
    /// `cool_read` holds every cool node read through.
    cool_all_read: bool,
}

impl<'a> Restricted<'a> {
    fn keeps(&self, position: usize) -> bool {
        keeps(self.allowed, position)
    }

    /// The nodes of `set` (a set or a range of one, in its order) read through.
    fn in_order<'s>(
        &'s self,
        set: impl Iterator<Item = &'s ByOrder> + 's,
    ) -> impl Iterator<Item = Candidate> + 's {
        set.map(|c| c.0).filter(|c| self.keeps(c.index))
    }

    /// The cool nodes read through, in decision order.
    fn cool(&self) -> Box<dyn Iterator<Item = Candidate> + '_> {
        match &self.few {
            Some(few) => Box::new(few.cool.iter().copied()),
            None => Box::new(self.in_order(self.index.cool.iter())),
        }
    }

    /// The cool set from the best node read through on (none: no cool node is read through).
    /// Every node before it is one the scores leave out, so a scan that starts here skips a
    /// second walk past them (`best` walked them once).
    fn cool_set_from_best(&self) -> Option<btree_set::Range<'a, ByOrder>> {
        let best = self.best()?;
        Some(self.index.cool.range((Included(ByOrder(best)), Unbounded)))
    }

    /// The cool nodes read through, in decision order, read from the best on.
    fn cool_from_best(&self) -> Box<dyn Iterator<Item = Candidate> + '_> {
        if self.few.is_some() {
            return self.cool();
        }
        match self.cool_set_from_best() {
            Some(set) => Box::new(self.in_order(set)),
            None => Box::new(std::iter::empty()),
        }
    }

    /// [`cover_in_order`] over the cool nodes read through: those read by an earlier scan
    /// first, then the set from the last of them on, each remembered as it is read.
    fn cover_cool(
        &mut self,
        coverage: &mut Coverage,
        positions: &Positions,
        taken: &dyn Fn(usize) -> bool,
    ) -> Vec<Candidate> {
        let mut added = cover_in_order(
            self.cool_read.iter().map(|c| c.0),
            coverage,
            positions,
            taken,
        );
        if self.cool_all_read || coverage.complete() {
            return added;
        }
        let (index, allowed) = (self.index, self.allowed);
        let rest = match self.cool_read.last() {
            Some(&last) => index.cool.range((Excluded(last), Unbounded)),
            None => match self.cool_set_from_best() {
                Some(set) => set,
                None => {
                    self.cool_all_read = true;
                    return added;
                }
            },
        };
        let read = &mut self.cool_read;
        let kept = rest
            .filter(|c| keeps(allowed, c.0.index))
            .inspect(|&c| read.push(c))
            .map(|c| c.0);
        added.extend(cover_in_order(kept, coverage, positions, taken));
        // The scan stops early only once every run is covered: otherwise it read to the end.
        self.cool_all_read = !coverage.complete();
        added
    }

    /// The hot nodes read through, least bad for the pod first.
    fn hot_in_order(&self) -> Box<dyn Iterator<Item = Candidate> + '_> {
        match &self.few {
            Some(few) => Box::new(few.hot_order.iter().copied()),
            None => Box::new(self.in_order(self.index.hot_order.iter())),
        }
    }
}

/// `allowed` (none: every node) keeps the node at `position`.
fn keeps(allowed: Option<&[bool]>, position: usize) -> bool {
    allowed.is_none_or(|allowed| allowed.get(position).copied().unwrap_or(false))
}

impl Ranking for Restricted<'_> {
    /// Every feasible node of the shape, those read through or not: no filter that counts
    /// pods applies on this path, so the nodes the scores (or the job's bounds) leave out are
    /// still in the scheduler's sample, whose size this sets.
    fn feasible(&self) -> usize {
        self.index.feasible
    }

    fn best(&self) -> Option<Candidate> {
        *self.best.get_or_init(|| self.cool().next())
    }

    fn named(&mut self, used: usize, is_tied: &dyn Fn(&Candidate) -> bool) -> Vec<Candidate> {
        let mut in_order = self.cool_from_best();
        // The near-ties are a prefix of the order (the best's NIC side, up to a heat).
        let mut named = Vec::with_capacity(used);
        let mut first_untied = None;
        for c in in_order.by_ref() {
            if !is_tied(&c) {
                first_untied = Some(c);
                break;
            }
            named.push(c);
        }
        if named.len() >= used {
            if used > 0 && named.len() > used {
                named.select_nth_unstable_by(used - 1, Candidate::tie_order);
            }
            named.truncate(used);
            named.sort_by(Candidate::tie_order);
            return named;
        }
        named.sort_by(Candidate::tie_order);
        named.extend(first_untied);
        let missing = used.saturating_sub(named.len());
        named.extend(in_order.take(missing));
        named
    }

    fn hottest(&mut self, max: usize) -> Vec<(f64, usize)> {
        let hottest = |h: &ByHeat| (h.heat, h.index);
        match &self.few {
            Some(few) => few.hot.iter().take(max).map(hottest).collect(),
            None => self
                .index
                .hot
                .iter()
                .filter(|h| self.keeps(h.index))
                .take(max)
                .map(hottest)
                .collect(),
        }
    }

    fn least_bad(&mut self, max: usize) -> Vec<Candidate> {
        self.hot_in_order().take(max).collect()
    }

    fn cover(
        &mut self,
        hot: bool,
        coverage: &mut Coverage,
        positions: &Positions,
        taken: &dyn Fn(usize) -> bool,
    ) -> Vec<Candidate> {
        if !hot && self.few.is_none() {
            return self.cover_cool(coverage, positions, taken);
        }
        let in_order = if hot {
            self.hot_in_order()
        } else {
            self.cool()
        };
        cover_in_order(in_order, coverage, positions, taken)
    }
}
