//! The lock protocol: how a decision reads the world and charges it, so that the pods of a
//! burst see each other's charges and each is decided once.

use std::time::Instant;

use super::{Decider, Route};
use crate::inflight::world::World;
use crate::placement::{Decision, PodDemand, Replica};
use crate::view::ClusterView;

impl Decider {
    /// Numbers the world's nodes by `view` (once per view), as decisions read them.
    pub(super) fn align_world(&self, view: &ClusterView) {
        self.world
            .align_to(view.id, |world| world.align(view.id, node_names(view)));
    }

    /// Decides and charges under one write lock while decisions are charged, so the pods of a
    /// burst see each other's charges, each decided once. Deciding against a read and deciding
    /// again when another charge raced it cost more than it saved: with every worker deciding,
    /// most decisions were raced and made two or three times. While decisions predict no
    /// landing (no node fits: nothing to charge), they are made beside each other under a read
    /// lock, and one that does predict a landing is charged if no write came in meanwhile,
    /// else decided again under the write lock. A review that charges nothing (the mode does
    /// not) decides under a read lock. While decisions are charged, a retry of a charged uid is
    /// told apart under the write lock it then decides under: checking it first under a read
    /// lock made every review wait twice behind the deciding writer, for the rare retry.
    pub(super) fn decide_and_charge(
        &self,
        demand: &PodDemand<'_>,
        view: &ClusterView,
        id: &str,
        charge: bool,
        route: &Route<'_>,
    ) -> Decision {
        use std::sync::atomic::Ordering::Relaxed;
        let mode = route.mode;
        let charge = charge && (mode.writes_affinity() || mode.observes_only());
        self.align_world(view);
        if !charge {
            return self.decide_with(demand, view, &self.world.read(), route);
        }
        if !self.charging.load(Relaxed) {
            let (decision, seen, charged) = {
                let world = self.world.read();
                let decision = self.decide_with(demand, view, &world, route);
                (decision, self.world.writes(), world.charges.contains(id))
            };
            if charged || decision.landing.is_empty() {
                return decision;
            }
            self.charging.store(true, Relaxed);
            if let Ok(mut world) = self.world.write_if_unchanged(seen) {
                charge_decision(&mut world, id, demand, &decision);
                return decision;
            }
        }
        let mut world = self.world.write();
        let decision = self.decide_with(demand, view, &world, route);
        if world.charges.contains(id) {
            // A retry: decided again as the first time was, charged once.
            return decision;
        }
        if decision.landing.is_empty() {
            self.charging.store(false, Relaxed);
        } else {
            charge_decision(&mut world, id, demand, &decision);
        }
        decision
    }

    /// The decision, with its landing where the pod really goes: in observe mode the pod keeps
    /// its own terms, so it lands where the scheduler puts it unsteered.
    pub(super) fn decide_with(
        &self,
        demand: &PodDemand<'_>,
        view: &ClusterView,
        world: &World,
        route: &Route<'_>,
    ) -> Decision {
        let mut decision = crate::placement::decide_indexed(
            &crate::placement::DecisionCtx::new(
                demand,
                view,
                world,
                &self.config.placement,
                route.scheduler,
            ),
            Replica {
                unheard: world.charges.unheard(),
                heard: world.charges.heard_mix(),
                ..self.replica()
            },
            route.indexes,
        );
        if route.mode.observes_only() {
            decision.landing =
                crate::placement::unsteered_landing(demand, view, world, route.scheduler);
        }
        decision
    }
}

fn node_names(view: &ClusterView) -> impl Iterator<Item = &str> {
    view.nodes.iter().map(|n| n.name.as_str())
}

/// Charges the pod where `decision` predicts it lands, and remembers the decision's heats
/// there for landing accuracy.
fn charge_decision(world: &mut World, id: &str, demand: &PodDemand<'_>, decision: &Decision) {
    world.charges.charge(
        id,
        &decision.landing,
        demand.load,
        &demand.facts.requests,
        Instant::now(),
    );
    world.tag(id, &demand.facts);
    // The landing nodes are tier-1 nodes; at 5,000 nodes there are ~50 of each.
    let first: crate::hashing::HashMap<&str, f32> = decision
        .first_tier()
        .iter()
        .map(|n| (n.name.as_str(), n.heat as f32))
        .collect();
    let heats = decision
        .landing
        .iter()
        .filter_map(|(name, _)| Some((name.clone(), *first.get(name.as_str())?)))
        .collect();
    world.charges.remember_decision(id, heats);
}
