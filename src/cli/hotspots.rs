//! `placement-webhook hotspots`: the [`hotspots`] report for the configured
//! source, from the same view the decisions use.

use crate::config::Config;
use crate::hotspots::{self, Report};
use crate::inventory::listing::ClusterState;
use crate::snapshot::LoadSnapshot;
use crate::view::ClusterView;

/// With the cluster listed, its running pods say who runs where (as the pod watch does in
/// `serve`); without, the snapshot's `pods` that name a `node`.
pub fn report_for(
    config: &Config,
    snapshot: &LoadSnapshot,
    cluster: Option<&ClusterState>,
) -> Report {
    let view = ClusterView::build(snapshot, cluster.map(|c| &c.inventory), &config.placement);
    let pods = match cluster {
        Some(cluster) => cluster.pods.running.placed(),
        None => hotspots::placed_from_snapshot(snapshot),
    };
    hotspots::report(&view, &pods, &config.placement.hot)
}
