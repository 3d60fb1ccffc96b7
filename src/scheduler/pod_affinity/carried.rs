//! InterPodAffinity's raw scores of one set of candidates, carried from one score to the next
//! for pods alike: a burst's reviews differ by a charge or two, so only the candidates in the
//! domains those pods touched are scored again, and the lowest and highest raw scores are read
//! from a count of them rather than from a pass over every candidate.

use std::collections::BTreeMap;

use super::scoring::AffinityScore;

/// The raw score of each candidate (view positions, in order) as of the score that last
/// brought it up to date, with the candidates of each domain at hand.
#[derive(Debug, Clone)]
pub(crate) struct CarriedRaws {
    candidates: Vec<u32>,
    raws: Vec<i64>,
    /// How many candidates have each raw score.
    counts: BTreeMap<i64, u32>,
    /// Per topology key of the score (its slots, in order): the candidates of each domain.
    members: Vec<DomainMembers>,
}

/// Two carries are alike when they score the same candidates alike: the domains' members are
/// looked up for the keys the score summed over when it carried, which a fresh score (that saw
/// fewer kinds of pod) may not have yet.
impl PartialEq for CarriedRaws {
    fn eq(&self, other: &Self) -> bool {
        self.candidates == other.candidates
            && self.raws == other.raws
            && self.counts == other.counts
    }
}

/// The candidates (indexes into `candidates`) of each domain of one key, domain by domain.
#[derive(Debug, Clone)]
struct DomainMembers {
    /// `starts[d]..starts[d + 1]` of `order` are domain `d`'s candidates.
    starts: Vec<u32>,
    order: Vec<u32>,
}

impl DomainMembers {
    fn of(domains: impl Fn(usize) -> Option<usize>, count: usize, candidates: &[u32]) -> Self {
        let in_domain: Vec<Option<usize>> = candidates
            .iter()
            .map(|&p| domains(p as usize).filter(|&d| d < count))
            .collect();
        let mut starts = vec![0u32; count + 1];
        for d in in_domain.iter().flatten() {
            starts[d + 1] += 1;
        }
        for d in 0..count {
            starts[d + 1] += starts[d];
        }
        let mut next = starts.clone();
        let mut order = vec![0u32; starts[count] as usize];
        for (k, d) in in_domain.iter().enumerate() {
            if let Some(d) = *d {
                order[next[d] as usize] = k as u32;
                next[d] += 1;
            }
        }
        DomainMembers { starts, order }
    }

    fn of_domain(&self, domain: usize) -> &[u32] {
        match (self.starts.get(domain), self.starts.get(domain + 1)) {
            (Some(&from), Some(&to)) => &self.order[from as usize..to as usize],
            _ => &[],
        }
    }
}

impl CarriedRaws {
    /// Carries for `candidates`.
    pub(crate) fn fits(&self, candidates: &[u32], score: &AffinityScore<'_, '_>) -> bool {
        self.candidates == candidates && self.members.len() == score.key_count()
    }

    /// The candidates.
    pub(crate) fn candidates(&self) -> &[u32] {
        &self.candidates
    }

    /// Raw scores, candidate by candidate.
    pub(crate) fn raws(&self) -> &[i64] {
        &self.raws
    }

    /// The lowest and highest raw score; `None` without candidates.
    pub(crate) fn range(&self) -> Option<(i64, i64)> {
        let low = self.counts.first_key_value()?.0;
        let high = self.counts.last_key_value()?.0;
        Some((*low, *high))
    }
}

impl AffinityScore<'_, '_> {
    /// The raw scores of `candidates` (view positions), to carry to later scores.
    pub(crate) fn carry(&self, candidates: &[u32]) -> CarriedRaws {
        let raws: Vec<i64> = candidates.iter().map(|&p| self.raw(p as usize)).collect();
        let mut counts = BTreeMap::new();
        for &raw in &raws {
            *counts.entry(raw).or_insert(0) += 1;
        }
        let members = (0..self.key_count())
            .map(|slot| {
                let (domains, count) = self.key_domains(slot);
                DomainMembers::of(|p| domains.of_node(p), count, candidates)
            })
            .collect();
        CarriedRaws {
            candidates: candidates.to_vec(),
            raws,
            counts,
            members,
        }
    }

    /// Brings `carried` up to date with this score, where pods were gained or lost on the
    /// nodes at `touched` (view positions) since it was: a pod changes the sums of its node's
    /// domains only, so only the candidates in those domains score differently.
    pub(crate) fn bring_up(&self, carried: &mut CarriedRaws, touched: &[usize]) {
        let mut domains: Vec<(usize, usize)> = touched
            .iter()
            .flat_map(|&position| {
                (0..self.key_count()).filter_map(move |slot| {
                    let (domains, _) = self.key_domains(slot);
                    domains.of_node(position).map(|d| (slot, d))
                })
            })
            .collect();
        domains.sort_unstable();
        domains.dedup();
        for (slot, domain) in domains {
            let Some(members) = carried.members.get(slot) else {
                continue;
            };
            for &k in members.of_domain(domain) {
                let k = k as usize;
                let now = self.raw(carried.candidates[k] as usize);
                let before = std::mem::replace(&mut carried.raws[k], now);
                if before == now {
                    continue;
                }
                if let Some(count) = carried.counts.get_mut(&before) {
                    *count -= 1;
                    if *count == 0 {
                        carried.counts.remove(&before);
                    }
                }
                *carried.counts.entry(now).or_insert(0) += 1;
            }
        }
    }

    /// [`AffinityScore::keep_best`] over the carried candidates, read from `carried` (brought
    /// up to date with this score).
    pub(crate) fn keep_best_carried(
        &self,
        carried: &CarriedRaws,
        weight: i64,
        margin: i64,
    ) -> Option<Vec<u32>> {
        let (min, max) = carried.range()?;
        self.keep_by_raws(
            carried.candidates(),
            carried.raws(),
            (min, max),
            weight,
            margin,
        )
    }
}
