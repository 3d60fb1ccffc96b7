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
    /// How many bands: band b holds the levels from b/bands up to (b+1)/bands; the top band
    /// also holds every node past it and every hot node.
    pub bands: u32,
    /// The weight of each term `key Lt b` (b = 1 .. bands - 1): a node in band b matches
    /// bands - 1 - b of them. The scheduler scales NodeAffinity points to the best node in its
    /// sample, so in a sample no tier names the bands grade at full strength whatever the
    /// weight; a small one leaves a named node's lead over an unnamed one as it was.
    pub weight: i32,
    /// A node changes band only once its level is this share of a band past the band's
    /// edge, so that a level wavering at an edge does not relabel the node at each refresh.
    pub hysteresis: f64,
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
            bands: 10,
            weight: 1,
            hysteresis: 0.1,
            writes_per_second: 100,
        }
    }
}

impl HeatBands {
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
        if !(1..=100).contains(&self.weight) {
            out.push("placement.heat_bands.weight must be 1..100".into());
        }
        if !(1..=10_000).contains(&self.writes_per_second) {
            out.push("placement.heat_bands.writes_per_second must be 1..10000".into());
        }
        if !(self.hysteresis >= 0.0 && self.hysteresis < 0.5) {
            out.push("placement.heat_bands.hysteresis must be in [0, 0.5)".into());
        }
    }
}
