//! Heat bands: the band of a level, its hysteresis, and the labels a book asks for as a burst
//! charges the nodes.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::*;
use crate::inflight::ledger::{Ledger, PodLoad};
use crate::scheduler::PodRequests;
use crate::snapshot::{LoadSnapshot, NodeLoad};

fn bands() -> HeatBands {
    HeatBands {
        enabled: true,
        ..HeatBands::default()
    }
}

#[test]
fn a_level_falls_in_tenths_and_past_the_top_stays_in_the_top_band() {
    let config = bands();
    for (level, band) in [
        (0.0, 0),
        (0.05, 0),
        (0.1, 1),
        (0.37, 3),
        (0.99, 9),
        (1.4, 9),
        (f64::INFINITY, 9),
        (-0.2, 0),
        (f64::NAN, 0),
    ] {
        assert_eq!(band_of(level, &config, None), band, "level {level}");
    }
}

#[test]
fn a_band_holds_until_the_level_is_past_its_edge_by_the_hysteresis() {
    let config = bands();
    // Band 3 holds 0.30-0.40, and with a tenth of a band either side, 0.29-0.41.
    assert_eq!(band_of(0.405, &config, Some(3)), 3);
    assert_eq!(band_of(0.415, &config, Some(3)), 4);
    assert_eq!(band_of(0.295, &config, Some(3)), 3);
    assert_eq!(band_of(0.285, &config, Some(3)), 2);
    // A jump lands where the level is, not one band on.
    assert_eq!(band_of(0.75, &config, Some(3)), 7);
    // No previous band, or one past the bands configured: the band of the level.
    assert_eq!(band_of(0.405, &config, None), 4);
    assert_eq!(band_of(0.405, &config, Some(12)), 4);
    let sharp = HeatBands {
        hysteresis: 0.0,
        ..bands()
    };
    assert_eq!(band_of(0.405, &sharp, Some(3)), 4);
}

fn view_of(cpus: &[f64], labelled: Option<&str>) -> ClusterView {
    let snapshot = LoadSnapshot {
        taken_at: None,
        pods: Vec::new(),
        nodes: cpus
            .iter()
            .enumerate()
            .map(|(i, &cpu)| {
                let mut node = NodeLoad::new(format!("n{i}"), cpu);
                node.cpu_capacity_cores = Some(16.0);
                if let Some(value) = labelled {
                    Arc::make_mut(&mut node.labels).insert(bands().key, value.into());
                }
                node
            })
            .collect(),
    };
    ClusterView::build(&snapshot, None, &PlacementConfig::default())
}

fn policy() -> PlacementConfig {
    PlacementConfig {
        heat_bands: bands(),
        ..PlacementConfig::default()
    }
}

fn world_for(view: &ClusterView) -> World {
    let mut world = World::new(Ledger::new(Duration::from_secs(60)));
    world.align(view.id, view.nodes.iter().map(|n| n.name.as_str()));
    world
}

/// Charges `pods` TaskManagers of 2 cores to `node`.
fn charge(world: &mut World, node: &str, pods: usize) {
    for i in 0..pods {
        world.charges.charge(
            &format!("{node}-{i}-{}", world.charges.len()),
            &[(node.to_string(), 1.0)],
            PodLoad {
                cpu_cores: 2.0,
                network_bytes_per_second: 0.0,
            },
            &PodRequests::default(),
            Instant::now(),
        );
    }
}

fn sorted(mut changes: Vec<Relabel>) -> Vec<(String, u32)> {
    changes.sort_by(|a, b| a.node.cmp(&b.node));
    changes.into_iter().map(|c| (c.node, c.band)).collect()
}

#[test]
fn every_node_is_labelled_once_then_only_a_node_whose_band_moved() {
    let view = view_of(&[0.12, 0.55, 0.83, 0.9], None);
    let mut world = world_for(&view);
    let mut book = BandBook::default();
    let policy = policy();
    assert_eq!(
        sorted(book.changes(&view, &world, &policy)),
        [
            ("n0".into(), 1),
            ("n1".into(), 5),
            ("n2".into(), 8),
            // 0.9 is past the hot threshold's 0.85: the top band.
            ("n3".into(), 9),
        ]
    );
    assert!(
        book.changes(&view, &world, &policy).is_empty(),
        "nothing moved"
    );
    // Two TaskManagers of 2 cores on 16: n0 from 0.12 to 0.37.
    charge(&mut world, "n0", 2);
    assert_eq!(
        sorted(book.changes(&view, &world, &policy)),
        [("n0".into(), 3)]
    );
    assert!(book.changes(&view, &world, &policy).is_empty());
}

#[test]
fn labels_the_view_already_shows_are_not_written_again() {
    let view = view_of(&[0.12, 0.15], Some("1"));
    let world = world_for(&view);
    let mut book = BandBook::default();
    assert!(book.changes(&view, &world, &policy()).is_empty());
    // A label the webhook cannot read is written over.
    let view = view_of(&[0.12], Some("cool"));
    assert_eq!(
        sorted(book.changes(&view, &world_for(&view), &policy())),
        [("n0".into(), 1)]
    );
}

#[test]
fn a_failed_write_is_asked_for_again() {
    let view = view_of(&[0.42], Some("1"));
    let world = world_for(&view);
    let mut book = BandBook::default();
    assert_eq!(
        sorted(book.changes(&view, &world, &policy())),
        [("n0".into(), 4)]
    );
    assert!(book.changes(&view, &world, &policy()).is_empty());
    book.forget("n0");
    assert_eq!(
        sorted(book.changes(&view, &world, &policy())),
        [("n0".into(), 4)]
    );
}

#[test]
fn a_node_gone_from_the_view_is_forgotten() {
    let view = view_of(&[0.42, 0.2], None);
    let mut book = BandBook::default();
    book.changes(&view, &world_for(&view), &policy());
    let fewer = view_of(&[0.42], None);
    book.changes(&fewer, &world_for(&fewer), &policy());
    assert_eq!(book.known.len(), 1);
}
