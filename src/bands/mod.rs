//! Heat bands: which band each node's label should hold, from its measured load and the
//! in-flight pods this replica knows of (pure; [`keeper`] writes them).
//!
//! A decision names a few of the coolest nodes. When the scheduler samples, a pod's sample
//! may hold none of them, and then its own scores choose, blind to heat. The band terms
//! (`patch`) grade every labelled node, so the best-scored node of any sample is among its
//! coolest. The bands follow the charges: a node a burst fills moves up as the webhook
//! charges it, before the scheduler binds the pods (docs/design.md, "Heat bands").

pub(crate) mod keeper;

use crate::config::{HeatBands, PlacementConfig};
use crate::hashing::HashMap;
use crate::inflight::world::World;
use crate::placement::rank::standing::effective_load;
use crate::view::heat::is_hot;
use crate::view::{ClusterView, NodeView};

/// A node's level: its busiest dimension as a fraction, with the in-flight pods counted (CPU;
/// the NIC where its link speed is known, a share of the busiest node's traffic saying
/// nothing about room; memory where the heat weighs it). Hot nodes sit past every band.
pub(crate) fn level(node: &NodeView, world: &World, policy: &PlacementConfig) -> f64 {
    let load = effective_load(node, world);
    if is_hot(&load, &node.scale, &policy.hot) {
        return f64::INFINITY;
    }
    let mut level = load.cpu;
    if node.scale.network_is_capacity {
        level = level.max(node.scale.network_fraction(load.network_bytes_per_second));
    }
    if policy.weights.memory > 0.0 {
        level = level.max(load.memory);
    }
    level
}

/// The band of `level` (0 coolest .. bands - 1), kept at `previous` while the level is
/// within the hysteresis of that band's edges.
pub(crate) fn band_of(level: f64, config: &HeatBands, previous: Option<u32>) -> u32 {
    let top = config.bands.saturating_sub(1);
    let scaled = level * f64::from(config.bands);
    // NaN reads as 0; past the top (or hot) stays in the top band.
    let raw = if scaled >= f64::from(top) {
        top
    } else {
        scaled.max(0.0) as u32
    };
    match previous {
        Some(p) if p <= top && p != raw => {
            let low = f64::from(p) - config.hysteresis;
            let high = f64::from(p + 1) + config.hysteresis;
            let inside = (p == 0 || scaled >= low) && (p == top || scaled < high);
            if inside { p } else { raw }
        }
        _ => raw,
    }
}

/// One label to write: `node`'s band is now `band`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Relabel {
    pub(crate) node: String,
    pub(crate) band: u32,
}

/// The band each node's label holds as far as this replica knows: what it wrote, or, for a
/// node it has not written, what the view read on the node. Compared with what this replica
/// last knew rather than with the view, which reads labels back a second or more later: a
/// band written is not written again before the view shows it, and two replicas whose
/// charges differ for a moment do not take turns relabelling the node.
#[derive(Debug, Default)]
pub(crate) struct BandBook {
    known: HashMap<String, u32>,
    /// The view the book was last pruned to: nodes gone from it are forgotten.
    view: u64,
}

impl BandBook {
    /// The labels to write for `view` with `world`'s charges, each taken as written.
    pub(crate) fn changes(
        &mut self,
        view: &ClusterView,
        world: &World,
        policy: &PlacementConfig,
    ) -> Vec<Relabel> {
        let config = &policy.heat_bands;
        if self.view != view.id {
            self.view = view.id;
            let names: crate::hashing::HashSet<&str> =
                view.nodes.iter().map(|n| n.name.as_str()).collect();
            self.known.retain(|name, _| names.contains(name.as_str()));
        }
        let mut out = Vec::new();
        for node in &view.nodes {
            let labelled = || {
                let value = node.labels.get(&config.key)?;
                value.parse::<u32>().ok()
            };
            let known = self.known.get(&node.name).copied().or_else(labelled);
            let band = band_of(level(node, world, policy), config, known);
            if known != Some(band) {
                self.known.insert(node.name.clone(), band);
                out.push(Relabel {
                    node: node.name.clone(),
                    band,
                });
            }
        }
        out
    }

    /// A write failed: the node's band is looked at afresh next time.
    pub(crate) fn forget(&mut self, node: &str) {
        self.known.remove(node);
    }
}

#[cfg(test)]
mod tests;
