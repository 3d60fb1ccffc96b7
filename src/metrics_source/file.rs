//! A static snapshot file (`--metrics-file`), re-read when it changes.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tracing::{info, warn};

use super::handover::HandoverReader;
use crate::inflight::ledger::handover::Evidence;
use crate::inflight::shared::SharedWorld;
use crate::snapshot::{LoadSnapshot, SnapshotError};
use crate::telemetry::Metrics;
use crate::view::ViewStore;

/// The example cluster shipped in `examples/cluster.json`, used by `review` when no source is given.
pub(crate) const EMBEDDED_EXAMPLE: &str = include_str!("../../examples/cluster.json");

pub fn embedded_example() -> Result<LoadSnapshot, SnapshotError> {
    LoadSnapshot::from_json(EMBEDDED_EXAMPLE)
}

/// Loads `path` into `store` now, then re-reads it every `every` and publishes it when its
/// bytes changed and still parse (a bad edit keeps the last good snapshot).
pub(crate) fn spawn_file_source(
    path: PathBuf,
    store: Arc<ViewStore>,
    world: Arc<SharedWorld>,
    metrics: Arc<Metrics>,
    every: Duration,
) -> Result<tokio::task::JoinHandle<()>, SnapshotError> {
    let first = std::fs::read(&path).map_err(|error| SnapshotError::Read {
        path: path.display().to_string(),
        error,
    })?;
    let snapshot = LoadSnapshot::from_json(&String::from_utf8_lossy(&first))?;
    let mut handovers = HandoverReader::default();
    let evidence = Evidence::of(&snapshot);
    store.publish_snapshot(snapshot);
    handovers.read(&world, &evidence, &metrics);
    info!(path = %path.display(), "node load from snapshot file");
    Ok(tokio::spawn(async move {
        let mut last = first;
        let mut interval = tokio::time::interval(every);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            interval.tick().await;
            let Ok(bytes) = tokio::fs::read(&path).await else {
                continue;
            };
            if bytes == last {
                continue;
            }
            match LoadSnapshot::from_json(&String::from_utf8_lossy(&bytes)) {
                Ok(snapshot) => {
                    info!(path = %path.display(), nodes = snapshot.nodes.len(), "snapshot file reloaded");
                    let evidence = Evidence::of(&snapshot);
                    store.publish_snapshot(snapshot);
                    handovers.read(&world, &evidence, &metrics);
                }
                Err(e) => {
                    warn!(path = %path.display(), error = %e, "snapshot file changed but is invalid: keeping the last one")
                }
            }
            last = bytes;
        }
    }))
}
