//! Whose decisions the pod watch reported lately: how the apiserver splits a burst's reviews
//! between the replicas, which it does per TCP connection, unevenly.

/// The decisions the pod watch reported lately, this replica's and the others', each count
/// decaying by `HeardMix::KEEP` per report: how the apiserver splits the reviews now.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct HeardMix {
    pub(crate) own: f64,
    pub(crate) others: f64,
}

impl HeardMix {
    /// Per report: about the last 50 reports count.
    const KEEP: f64 = 0.98;

    pub(super) fn add(&mut self, own: bool) {
        self.own = self.own * Self::KEEP + f64::from(u8::from(own));
        self.others = self.others * Self::KEEP + f64::from(u8::from(!own));
    }

    /// Decisions the other replicas (`others` of them) make per decision of this one: an even
    /// split until reports say otherwise (one report of each kind as the prior).
    pub(crate) fn others_per_own(&self, others: usize) -> f64 {
        (self.others + others as f64) / (self.own + 1.0)
    }
}
