//! Heat bands: a coarse label of each node's heat the webhook keeps on the node, and the
//! preferred terms that read it, so that every node of whatever sample the scheduler takes is
//! graded by heat, not only the few a decision names (docs/design.md, "Heat bands").

use serde::{Deserialize, Serialize};

use super::names::is_qualified_name;

/// Off unless enabled: keeping the bands writes node labels, which needs RBAC the install
/// grants (deploy/heat-bands, or the chart's `heatBands.enabled`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HeatBands {
    /// Keep a band on every node with readings and add the terms on it to each steered pod.
    pub enabled: bool,
    /// The node label the band is kept in; nothing else on a node is written.
    pub key: String,
    /// How many bands: band b holds the levels from b × `band_width` up to (b + 1) ×
    /// `band_width`; the top band also holds every level past it. The default reaches past a
    /// full node (1.5 and up), so that hot nodes, and nodes the charges in flight fill past
    /// their size, are graded among themselves: late in a burst a sample may hold no other.
    pub bands: u32,
    /// The share of a node's level one band spans.
    pub band_width: f64,
    /// The CPU cores of the pod the bands grade the nodes for: a node's level is its level
    /// once it has taken one such pod, so that of two nodes equally busy the larger, which a
    /// pod heats less, grades cooler (as water-filling would place the pod). Set it to the
    /// TaskManagers' CPU (Flink's `kubernetes.taskmanager.cpu`, by default one per slot: 1).
    pub pod_cores: f64,
    /// A node in band b scores `weight` × (bands - 1 - b) NodeAffinity points, a node without
    /// the label none: binary-weighted terms (`key In` the bands with one bit of that number
    /// set, weighing `weight` × 2^bit), so the bands cost log2(bands) terms, not one per band.
    /// The scheduler scales NodeAffinity points to the best node in its sample, so in a sample
    /// no tier names the bands grade at full strength whatever the weight; a small one leaves
    /// a named node's lead over an unnamed one as it was.
    pub weight: i32,
    /// A node moves to a hotter band only once its level is this share of a band past the
    /// band's upper edge, so that a level wavering at an edge does not relabel the node at
    /// each refresh.
    pub hysteresis: f64,
    /// A node moves to a cooler band only once its level is this share of a band below the
    /// band's lower edge. Wider than `hysteresis` on purpose: a label that reads hotter than
    /// its node only draws fewer pods there, one that reads cooler draws pods onto heat. So a
    /// wandering load is taken up at once and let down slowly, and writes at rest fall about
    /// threefold (docs/design.md, "Limits").
    pub cooling_hysteresis: f64,
    /// At most this many node writes a second from the replica that keeps the bands (a
    /// second's worth at once): labelling 5,000 nodes at install takes 50 s at the default,
    /// and a burst moves about one band a pod. Failed writes back off with jitter and a 429
    /// holds every write for its Retry-After.
    pub writes_per_second: u32,
}

impl Default for HeatBands {
    fn default() -> Self {
        HeatBands {
            enabled: false,
            key: "placement-webhook.io/heat-band".into(),
            bands: 16,
            band_width: 0.1,
            pod_cores: 1.0,
            weight: 1,
            hysteresis: 0.1,
            cooling_hysteresis: 1.0,
            writes_per_second: 100,
        }
    }
}

impl HeatBands {
    /// How many terms grade the bands: one per bit of the highest score, bands - 1.
    pub(crate) fn term_count(&self) -> u32 {
        u32::BITS - self.bands.saturating_sub(1).leading_zeros()
    }

    pub(crate) fn problems(&self, out: &mut Vec<String>) {
        if !is_qualified_name(&self.key) {
            out.push(format!(
                "placement.heat_bands.key {:?} is not a valid label key",
                self.key
            ));
        }
        if !(2..=20).contains(&self.bands) {
            out.push("placement.heat_bands.bands must be 2..20".into());
        }
        let heaviest = i64::from(self.weight) << self.term_count().saturating_sub(1).min(8);
        if self.weight < 1 || heaviest > 100 {
            out.push(format!(
                "placement.heat_bands.weight must be at least 1 and, doubled for each of the \
                 {} band terms after the first, at most 100",
                self.term_count()
            ));
        }
        if !(self.pod_cores.is_finite() && self.pod_cores >= 0.0 && self.pod_cores <= 1024.0) {
            out.push("placement.heat_bands.pod_cores must be in [0, 1024]".into());
        }
        if !(self.band_width.is_finite() && self.band_width > 0.0 && self.band_width <= 1.0) {
            out.push("placement.heat_bands.band_width must be in (0, 1]".into());
        }
        if !(1..=10_000).contains(&self.writes_per_second) {
            out.push("placement.heat_bands.writes_per_second must be 1..10000".into());
        }
        if !(self.hysteresis >= 0.0 && self.hysteresis < 0.5) {
            out.push("placement.heat_bands.hysteresis must be in [0, 0.5)".into());
        }
        if !(self.cooling_hysteresis >= 0.0 && self.cooling_hysteresis <= 2.0) {
            out.push("placement.heat_bands.cooling_hysteresis must be in [0, 2]".into());
        }
    }
}
