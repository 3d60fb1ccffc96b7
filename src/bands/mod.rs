//! Heat bands: which band each node's label should hold, from its measured load and the
//! in-flight pods this replica knows of (pure; [`keeper`] writes them).
//!
//! A decision names a few of the coolest nodes. When the scheduler samples, a pod's sample
//! may hold none of them, and then its own scores choose, blind to heat. The band terms
//! (`patch`) grade every labelled node, so the best-scored node of any sample is among its
//! coolest. The bands follow the charges: a node a burst fills moves up as the webhook
//! charges it, before the scheduler binds the pods (docs/design.md, "Heat bands").

pub(crate) mod keeper;
pub(crate) mod pace;

use crate::config::{HeatBands, PlacementConfig, SchedulerConfig};
use std::time::{Duration, Instant};

use crate::hashing::HashMap;
use crate::inflight::world::World;
use crate::placement::rank::standing::effective_load;
use crate::view::heat::is_hot;
use crate::view::{ClusterView, NodeView};

/// Whether the bands have work in `view`: only where the scheduler samples the nodes (above
/// 100 at the default percentage). Where it scores every node, each pod's sample holds the
/// nodes its tiers name, and the bands stay idle: no node writes, no terms.
pub(crate) fn needed(view: &ClusterView, scheduler: &SchedulerConfig) -> bool {
    !crate::placement::decide::scores_every_node(view, scheduler)
}

/// A node's level: its busiest dimension as a fraction, with the in-flight pods counted (CPU,
/// with one more pod of `pod_cores`: a pod heats a small node more than a large one; the NIC
/// where its link speed is known, a share of the busiest node's traffic saying nothing about
/// room; memory where the heat weighs it or it makes the node hot). Hot nodes are graded by it
/// too, not set apart: a sample late in a burst may hold nothing else.
pub(crate) fn level(node: &NodeView, world: &World, policy: &PlacementConfig) -> f64 {
    let load = effective_load(node, world);
    let next_pod = policy.heat_bands.pod_cores / node.scale.cpu_cores;
    let mut level = load.cpu + if next_pod.is_finite() { next_pod } else { 0.0 };
    if node.scale.network_is_capacity {
        level = level.max(node.scale.network_fraction(load.network_bytes_per_second));
    }
    if policy.weights.memory > 0.0 || is_hot(&load, &node.scale, &policy.hot) {
        level = level.max(load.memory);
    }
    level
}

/// The band of `level` (0 coolest .. bands - 1), kept at `previous` while the level is
/// within that band's edges widened by the hysteresis above and the cooling hysteresis
/// below.
pub(crate) fn band_of(level: f64, config: &HeatBands, previous: Option<u32>) -> u32 {
    let top = config.bands.saturating_sub(1);
    let scaled = level / config.band_width;
    // NaN reads as 0; past the top stays in the top band.
    let raw = if scaled >= f64::from(top) {
        top
    } else {
        scaled.max(0.0) as u32
    };
    match previous {
        Some(p) if p <= top && p != raw => {
            let low = f64::from(p) - config.cooling_hysteresis;
            let high = f64::from(p + 1) + config.hysteresis;
            let inside = (p == 0 || scaled >= low) && (p == top || scaled < high);
            if inside { p } else { raw }
        }
        _ => raw,
    }
}

/// One label to write: `node`'s band is now `band` (`None`: the label comes off, the node has
/// no readings), and how much a pod is drawn there meanwhile (see [`BandBook::changes`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Relabel {
    pub(crate) node: String,
    pub(crate) band: Option<u32>,
    /// Bands the label now reads cooler than it should (negative: hotter); an absent label
    /// counts as past the top band, as the terms read it.
    pub(crate) harm: i64,
}

/// How long a label this replica wrote is taken to be on the node before the node watch shows
/// it: after that, what the watch reads is what is there.
pub(crate) const READ_BACK: Duration = Duration::from_secs(10);

/// The labels this replica wrote that the node watch has not shown yet. Everything else is
/// read back from the nodes (`inventory::node_bands`): a replica that takes over or restarts
/// writes only the nodes whose band is wrong, and what another writer set is seen and
/// corrected, not remembered over.
#[derive(Debug, Default)]
pub(crate) struct BandBook {
    written: HashMap<String, (Option<u32>, Instant)>,
}

impl BandBook {
    /// The labels to write for `view` with `world`'s charges, the nodes carrying `on_nodes`:
    /// each taken as written at `now` (see [`BandBook::forget`] for one that was not), the
    /// most harmful first (a label cooler than its node draws pods), then coolest first.
    /// Nodes with a band but no readings lose it: they are graded as the hottest.
    pub(crate) fn changes(
        &mut self,
        view: &ClusterView,
        world: &World,
        policy: &PlacementConfig,
        on_nodes: &HashMap<String, u32>,
        now: Instant,
    ) -> Vec<Relabel> {
        let config = &policy.heat_bands;
        self.written
            .retain(|_, (_, at)| now.saturating_duration_since(*at) < READ_BACK);
        let rank = |band: Option<u32>| i64::from(band.unwrap_or(config.bands));
        let mut out = Vec::new();
        let mut relabel = |book: &mut BandBook, node: &str, want: Option<u32>, known| {
            if known != want {
                book.written.insert(node.to_string(), (want, now));
                out.push(Relabel {
                    node: node.to_string(),
                    band: want,
                    harm: rank(want) - rank(known),
                });
            }
        };
        for node in &view.nodes {
            let known = self.known(&node.name, on_nodes);
            let band = band_of(level(node, world, policy), config, known);
            relabel(self, &node.name, Some(band), known);
        }
        for name in on_nodes.keys() {
            if view.node(name).is_none() {
                let known = self.known(name, on_nodes);
                relabel(self, name, None, known);
            }
        }
        // Stable: among equals the view's order, coolest first.
        out.sort_by_key(|change| std::cmp::Reverse(change.harm));
        out
    }

    /// What `node` carries as far as this replica knows: what it wrote lately, else what the
    /// watch read. A write the watch shows is no longer remembered.
    fn known(&mut self, node: &str, on_nodes: &HashMap<String, u32>) -> Option<u32> {
        let read = on_nodes.get(node).copied();
        match self.written.get(node) {
            Some(&(band, _)) if band == read => {
                self.written.remove(node);
                read
            }
            Some(&(band, _)) => band,
            None => read,
        }
    }

    /// A write failed or was not sent: the node's band is looked at afresh next time.
    pub(crate) fn forget(&mut self, node: &str) {
        self.written.remove(node);
    }
}

#[cfg(test)]
mod tests;
