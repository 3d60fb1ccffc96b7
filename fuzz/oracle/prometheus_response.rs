//! The `prometheus_response` oracle (the fuzz target and tests/it/fuzz_regressions.rs share
//! it): raw Prometheus `/api/v1/query` response bodies → readings → snapshot → a decision.
//!
//! Input: one byte choosing the node mapping, then up to six response bodies separated by 0xFF
//! (never part of UTF-8 JSON): cpu, network, cpu_cores, network_capacity, memory, uname.
//! Never panics; a snapshot that is built passes the snapshot file format's validation (the
//! placement code relies on it), names each node once, and can be decided on.

use std::collections::BTreeSet;
use std::time::{Duration, SystemTime};

use placement_webhook::config::PlacementConfig;
use placement_webhook::config::prometheus::NodeMapping;
use placement_webhook::config::scheduler::SchedulerConfig;
use placement_webhook::inflight::ledger::Ledger;
use placement_webhook::inflight::world::World;
use placement_webhook::metrics_source::{Readings, build_snapshot, parse_vector};
use placement_webhook::placement::{DecisionCtx, PodDemand, decide};
use placement_webhook::view::ClusterView;

/// Checks one input; panics when a rule above is broken. True when a snapshot was built.
pub fn check(data: &[u8]) -> bool {
    let Some((&selector, rest)) = data.split_first() else {
        return false;
    };
    let mapping = match selector % 4 {
        0 => NodeMapping::Label {
            name: "node".into(),
        },
        1 => NodeMapping::Label {
            name: "instance".into(),
        },
        2 => NodeMapping::Uname,
        _ => NodeMapping::InternalIp,
    };
    let ips: placement_webhook::hashing::HashMap<String, String> = [
        ("10.0.0.1".to_string(), "worker-1".to_string()),
        ("fd00::2".to_string(), "worker-2".to_string()),
    ]
    .into_iter()
    .collect();

    let mut bodies = rest.split(|&b| b == 0xFF).map(parse_vector);
    let mut required = || bodies.next().map(Result::ok).unwrap_or_default();
    // A failed cpu or network query fails the refresh: nothing to build.
    let (Some(cpu), Some(network)) = (required(), required()) else {
        return false;
    };
    let mut optional = || required();
    let readings = Readings {
        cpu,
        network,
        cpu_cores: optional(),
        network_capacity: optional(),
        memory: optional(),
        uname: optional(),
        pod_cpu: optional(),
        pod_network: optional(),
        node_samples: optional(),
    };
    let taken_at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let Ok((snapshot, _report)) = build_snapshot(&readings, &mapping, Some(&ips), taken_at) else {
        return false;
    };
    if let Err(e) = snapshot.validate() {
        panic!("a snapshot built from Prometheus fails validation: {e}\n{snapshot:?}");
    }
    assert!(
        (snapshot.window_samples.values()).all(|n| n.is_finite() && *n >= 1.0),
        "a node's sample count is not a count: {:?}",
        snapshot.window_samples
    );
    let names: BTreeSet<&str> = snapshot.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names.len(), snapshot.nodes.len(), "a node appears twice");
    assert!(
        !snapshot.nodes.is_empty(),
        "an empty snapshot is an error, not a snapshot"
    );

    let policy = PlacementConfig::default();
    let view = ClusterView::build(&snapshot, None, &policy);
    let demand = PodDemand::default();
    let scheduler = SchedulerConfig::default();
    let decision = decide(
        &DecisionCtx::new(
            &demand,
            &view,
            &World::new(Ledger::new(Duration::from_secs(90))),
            &policy,
            &scheduler,
        ),
        0,
    );
    for tier in &decision.tiers {
        for node in &tier.nodes {
            assert!(node.heat.is_finite(), "non-finite heat for {}", node.name);
        }
    }
    true
}
