//! The allocatable and bound requests of a generated node, as the closed loops (the model's and
//! the real scheduler's) write them into their load snapshots.

use std::collections::BTreeMap;

/// A node of `cores` cores and 4 GiB per core, 110 pods, with `requested_cores` bound by
/// `pods` running pods (2 GiB of memory per requested core): (allocatable, requested).
pub(crate) fn node_resources(
    cores: u32,
    requested_cores: f64,
    pods: u32,
) -> (BTreeMap<String, String>, BTreeMap<String, String>) {
    let allocatable = BTreeMap::from([
        ("cpu".to_string(), cores.to_string()),
        ("memory".to_string(), format!("{}Gi", cores * 4)),
        ("pods".to_string(), "110".to_string()),
    ]);
    let requested = BTreeMap::from([
        (
            "cpu".to_string(),
            format!("{}m", (requested_cores * 1000.0) as i64),
        ),
        (
            "memory".to_string(),
            format!("{}Mi", (requested_cores * 2048.0) as i64),
        ),
        ("pods".to_string(), pods.to_string()),
    ]);
    (allocatable, requested)
}
