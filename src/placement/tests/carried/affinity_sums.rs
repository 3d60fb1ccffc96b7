//! InterPodAffinity's raw scores carried between reviews (`AffinitySumsCache::keep_best`)
//! against the same scores computed afresh from every group of the world: through random
//! sequences of what changes the world (charges, binds, forgets, expiry, the pod watch's pods of
//! the job, a new view), with the candidate set changing now and then and pods mirrored for one
//! read, the carried raw scores and their counts equal a fresh carry, and what they keep equals
//! what a fresh score keeps.

use crate::test_support::seeded;

use std::time::Instant;

use crate::config::PlacementConfig;
use crate::config::scheduler::SchedulerConfig;
use crate::inflight::ledger::Ledger;
use crate::inflight::world::World;
use crate::placement::eligible::groups_around::Surroundings;
use crate::placement::eligible::groups_around::{
    add_mirrored, around_affinity_score, view_domains,
};
use crate::placement::{DecisionCtx, PodDemand, RankIndexes, decide};
use crate::scheduler::PodGroup;
use crate::view::ClusterView;
use proptest::prelude::*;

use super::rank_index::{Fixture, Op, SHAPES, TTL, demand, gen_node, gen_op, name, pod, snapshot};

/// The weight and margin of the keep: InterPodAffinity's default weight, half a tier's gap.
const WEIGHT: i64 = 2;
const MARGIN: i64 = 50;

/// The shapes whose score counts the pods around them (kept apart by host; drawn to zones).
const SCORED: [usize; 2] = [3, 4];

proptest! {
    #![proptest_config(seeded::config(48))]

    #[test]
    fn carried_raw_scores_equal_a_fresh_computation(
        nodes in prop::collection::vec(gen_node(), 1..300),
        ops in prop::collection::vec(gen_op(), 1..60),
        mirror_every in 2usize..5,
        narrow_every in 3usize..7,
    ) {
        let policy = PlacementConfig::default();
        let scheduler = SchedulerConfig::default();
        let snapshot = snapshot(&nodes);
        let mut view = ClusterView::build(&snapshot, None, &policy);
        let shapes: Vec<_> = (0..SHAPES).map(pod).collect();
        let demands: Vec<PodDemand<'_>> = shapes.iter().map(|(p, l)| demand(p, *l)).collect();
        let indexes = RankIndexes::default();
        let cache = indexes.affinity_sums();
        let mut world = World::new(Ledger::new(TTL));
        world.align(view.id, view.nodes.iter().map(|n| n.name.as_str()));
        let mut steered: Vec<String> = Vec::new();
        let (mut reads, mut carried_reads) = (0, 0);
        let fixture = Fixture::new(&snapshot, &policy, &shapes, nodes.len());
        for (step, op) in ops.iter().enumerate() {
            match op {
                Op::Steer { shape } => {
                    let d = &demands[*shape];
                    let decision = decide(&DecisionCtx::new(d, &view, &world, &policy, &scheduler), 3);
                    let id = format!("pod-{step}");
                    world.charges.charge(&id, &decision.landing, d.load, &d.facts.requests, Instant::now());
                    world.set_group(&id, PodGroup::of_facts(&d.facts));
                    steered.push(id);
                }
                Op::Bind { k, node } => {
                    if let Some(id) = steered.get(k % steered.len().max(1)) {
                        world.charges.bind(id, &name(node % nodes.len()));
                    }
                }
                Op::Forget { k } => {
                    if let Some(id) = steered.get(k % steered.len().max(1)) {
                        world.charges.forget(id);
                    }
                }
                Op::Watch { .. } => {}
                Op::WatchJob { .. }
                | Op::WatchJobAlmostEverywhere { .. }
                | Op::ExpireAll
                | Op::NewView => fixture.apply(op, &mut world, &mut view),
            }
            // Every node now and then, else most of them (the candidates change: carried afresh).
            let candidates: Vec<u32> = (0..view.nodes.len() as u32)
                .filter(|p| step % narrow_every != 0 || p % 4 != 1)
                .collect();
            let mirrored: Vec<(usize, u32)> = if step % mirror_every == 0 {
                vec![(step % view.nodes.len(), 2), ((step * 7) % view.nodes.len(), 1)]
            } else {
                Vec::new()
            };
            for shape in SCORED {
                let facts = &demands[shape].facts;
                let at = Surroundings { facts, view: &view, world: &world };
                let kept = cache.keep_best(at, &mirrored, &candidates, WEIGHT, MARGIN);
                let domains = |key: &str| view_domains(&view, key);
                let mut fresh = around_affinity_score(facts, &world, &domains);
                add_mirrored(&mut fresh, facts, &mirrored, 1);
                let fresh_kept = fresh.keep_best(&candidates, WEIGHT, MARGIN);
                prop_assert_eq!(
                    kept, Some(fresh_kept),
                    "kept: shape {} after step {} ({:?})", shape, step, op
                );
                reads += 1;
                // Dropped only when more nodes were touched than there are candidates.
                if let Some((carried, fresh)) = cache.carried_and_fresh(at) {
                    prop_assert_eq!(
                        carried, fresh,
                        "carried: shape {} after step {} ({:?})", shape, step, op
                    );
                    carried_reads += 1;
                }
            }
        }
        prop_assert!(
            carried_reads * 2 >= reads,
            "carried in {} reads of {}", carried_reads, reads
        );
    }
}
