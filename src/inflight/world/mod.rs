//! What a decision reads beyond the metrics view: this replica's charges (the [`Ledger`]) and
//! the watches' picture of the cluster ([`ClusterPicture`]), side by side, with the view's node
//! positions numbered for both at once ([`Alignment`]). One lock guards the whole world (see
//! `shared`): a decision reads it as one consistent `&World`, and the few changes that touch
//! both halves (a pending pod's group interned with the bound pods', a relist, an alignment)
//! are made here.

mod aligned;

use crate::cluster::ClusterPicture;
use crate::inflight::ledger::Ledger;
use crate::scheduler::PodFacts;
use aligned::Alignment;

pub(crate) use aligned::{ChangeMark, GroupMark};

#[derive(Debug, Clone)]
pub struct World {
    /// Pods steered and not yet visible in the load: charges only.
    pub charges: Ledger,
    /// The watches' picture of the cluster: bound pods' requests and groups, running
    /// TaskManagers, namespaces.
    pub cluster: ClusterPicture,
    /// Node numbers by position in one view, so a decision's walk over every node looks its
    /// in-flight load and bound requests up without hashing a name.
    aligned: Alignment,
}

impl World {
    /// A world of `charges` and an empty picture (the watches fill it).
    pub fn new(charges: Ledger) -> Self {
        World {
            charges,
            cluster: ClusterPicture::default(),
            aligned: Alignment::default(),
        }
    }

    /// The world `config` describes: its ledger (see [`Ledger::for_config`]).
    pub(crate) fn for_config(config: &crate::config::Config) -> Self {
        World::new(Ledger::for_config(config))
    }

    /// The labels and terms of the pending pod `id`, interned with the bound pods' groups.
    #[cfg(test)]
    pub(crate) fn set_group(&mut self, id: &str, group: crate::scheduler::pods::PodGroup) {
        self.charges.set_group(id, group, &self.cluster.groups);
    }

    /// Tags the pending pod `id` with its group when something may count it (see
    /// [`Ledger::tag`]).
    pub(crate) fn tag(&mut self, id: &str, facts: &PodFacts<'_>) {
        self.charges.tag(id, facts, &self.cluster.groups);
    }

    /// The pod watch lists every pod again (at start, and when a watch cannot resume, e.g. 410
    /// Gone after a compaction).
    pub(crate) fn begin_relist(&mut self) {
        self.charges.begin_relist();
        self.cluster.begin_relist();
    }

    /// A pod list is complete: pods it did not mention are dropped (see
    /// [`ClusterPicture::end_relist`]), their labels with them, and so are the charges of steered
    /// pods the watch had reported before (see [`Ledger::end_relist`]).
    pub(crate) fn end_relist(&mut self) {
        self.cluster.end_relist();
        self.charges.end_relist();
    }
}

#[cfg(test)]
mod tests;
