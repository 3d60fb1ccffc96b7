//! The closed loop: a burst of pods through the real admission path, placed by the scheduler
//! model, with the pod watch fed back to the webhook as a cluster would feed it. Used by the
//! closed-loop tests and by `placement-webhook simulate`: one code path for both.
//!
//! Time is virtual: reviews arrive every `review_interval` (the apiserver sends them
//! concurrently), the scheduler binds one pod every `bind_interval` in admission order (or, in
//! the "binds after burst" mode, only once every pod has been admitted), and the watch delivers
//! "created" and "bound" events `watch_lag` later (or, when the watch stays silent through the
//! burst, only once every pod has been admitted).
//!
//! The cluster may hold pods already running ([`Cluster::with_pods`]). Every method schedules
//! with them and the burst's pods bound so far in view (PodTopologySpread, InterPodAffinity),
//! and the webhook's replicas list them through their pod watch before the burst.

pub(crate) mod cluster;
pub mod day;
pub mod figures;
mod pods;
#[cfg(test)]
mod tests;
mod webhook;

use std::time::Duration;

use serde_json::{Value, json};

use crate::config::Config;
use crate::scheduler::Scheduler;
use crate::scheduler::cycle::PodFacts;
use pods::{PodsInView, nth_pod, pod_of};

pub use cluster::Cluster;
pub use figures::{Figures, figures};

/// What arrives: `count` copies of `pod` (a Pod object as the apiserver sends it after
/// defaulting), each adding `cpu_cores` and `network_bytes_per_second` of real load.
#[derive(Debug, Clone)]
pub struct Burst {
    pub pod: Value,
    pub count: usize,
    pub cpu_cores: f64,
    pub network_bytes_per_second: f64,
    /// The webhook's `inflight.network_bytes_per_second` (what it charges a pod without
    /// measured siblings); `None`: the pods' real network, as a well-informed operator sets it.
    pub configured_network: Option<f64>,
}

/// How the webhook hears about the burst.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timing {
    pub(crate) replicas: usize,
    pub(crate) review_interval: Duration,
    pub(crate) bind_interval: Duration,
    /// `None`: no watch event reaches the webhook until the whole burst is admitted (the
    /// replicas hear nothing of each other's pods, created or bound, through the burst).
    pub(crate) watch_lag: Option<Duration>,
    /// The scheduler binds only once the whole burst is admitted (its queue drains after the
    /// burst): the watch reports each pod created as usual, and bound only after the burst.
    pub(crate) binds_after_burst: bool,
    /// Share of the reviews the apiserver sends to the first replica (the rest round robin
    /// to the others); `None`: round robin over all.
    pub(crate) first_share: Option<f64>,
    /// The last replica joins (is ready, gets reviews, counts in the membership) only from
    /// this pod of the burst on.
    pub(crate) join_at: Option<usize>,
    /// Replicas know each other (the membership watch); `false`: each decides as if alone.
    pub(crate) membership: bool,
    /// With the membership known, every replica forwards its reviews to the lowest-named one,
    /// which decides them all (the default install); `false`: that replica does not answer,
    /// and each decides the reviews it receives, with its share of the nodes.
    pub(crate) forwarding: bool,
}

impl Timing {
    /// 100 reviews answered in about 0.3 s, binds every 10 ms, watch events 10 ms later.
    pub fn typical(replicas: usize) -> Self {
        Timing {
            replicas,
            review_interval: Duration::from_millis(3),
            bind_interval: Duration::from_millis(10),
            watch_lag: Some(Duration::from_millis(10)),
            binds_after_burst: false,
            first_share: None,
            join_at: None,
            membership: true,
            forwarding: true,
        }
    }

    /// Whether the replicas' reviews are all decided by the first one (the lowest-named, which
    /// is in the membership from the start).
    pub(crate) fn one_decider(&self) -> bool {
        self.forwarding && self.membership && self.replicas > 1
    }

    /// Which replica the apiserver sends pod `index` to.
    pub(crate) fn replica_for(&self, index: usize) -> usize {
        let present = self.members_at(index);
        match self.first_share {
            // An even spread of the first replica's share over the burst.
            Some(share) if present > 1 => {
                let first = |i: usize| (i as f64 * share).floor();
                if first(index + 1) > first(index) {
                    0
                } else {
                    let others = index - first(index) as usize;
                    1 + others % (present - 1)
                }
            }
            _ => index % present,
        }
    }

    /// The replicas in the membership when pod `index` arrives.
    fn members_at(&self, index: usize) -> usize {
        let replicas = self.replicas.max(1);
        match self.join_at {
            Some(at) if index < at && replicas > 1 => replicas - 1,
            _ => replicas,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Method {
    /// The default scheduler alone.
    NoWebhook,
    /// This webhook, as configured.
    Webhook(Timing),
    /// Every pod prefers the coolest feasible node at the start of the burst.
    CoolestForAll,
    /// Water-filling: each pod to the feasible node with the lowest bottleneck utilisation
    /// (max of CPU and NIC) whose NIC stays under the hot threshold.
    Ideal,
    /// Water-filling within the scheduler's sample: the best any steering can do when the
    /// scheduler scores only a run of its order (the bound sampling sets).
    IdealInSample,
}

impl Method {
    pub(crate) fn label(&self) -> String {
        match self {
            Method::NoWebhook => "no webhook".into(),
            Method::Webhook(t) => {
                let binds = match t.watch_lag {
                    None => "watch silent in burst".to_string(),
                    Some(_) if t.binds_after_burst => "binds after burst".to_string(),
                    Some(lag) => format!("bind lag {}ms", lag.as_millis()),
                };
                let mut label = if t.replicas == 1 {
                    format!("webhook, {binds}")
                } else {
                    format!("webhook x{}, {binds}", t.replicas)
                };
                if let Some(share) = t.first_share {
                    label += &format!(", {:.0}% to one", share * 100.0);
                }
                if let Some(at) = t.join_at {
                    label += &format!(", one joins at pod {at}");
                }
                if t.replicas > 1 && !t.membership {
                    label += ", no membership";
                } else if t.replicas > 1 && !t.forwarding {
                    label += ", decider gone";
                }
                label
            }
            Method::CoolestForAll => "coolest node for all".into(),
            Method::Ideal => "ideal water-filling".into(),
            Method::IdealInSample => "ideal within the sample".into(),
        }
    }
}

/// Where each pod of the burst landed, in arrival order; `None` stayed Pending.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub method: Method,
    pub landed: Vec<Option<usize>>,
    /// Pods whose preferred nodes were all outside the scheduler's sample, of those that had
    /// preferred nodes and were scored.
    pub preferred_outside_sample: usize,
    pub with_preferences: usize,
    /// Pods that landed on a node the webhook predicted.
    pub predicted_landing_held: usize,
    /// Landing accuracy as the webhook counts it: first tier, another tier, elsewhere.
    pub landings: [usize; 3],
}

impl Outcome {
    /// Where `method` put the pods, with nothing counted about samples or landings.
    pub fn placed(method: Method, landed: Vec<Option<usize>>) -> Outcome {
        Outcome {
            method,
            landed,
            preferred_outside_sample: 0,
            with_preferences: 0,
            predicted_landing_held: 0,
            landings: [0; 3],
        }
    }
}

/// Runs the burst with `method`. `seed` drives the scheduler's tie-breaking and the replicas'
/// salts, so a run is repeatable.
pub fn run(
    cluster: &Cluster,
    config: &Config,
    burst: &Burst,
    method: Method,
    seed: u64,
) -> Outcome {
    run_observed(cluster, config, burst, method, seed, &|| {})
}

/// [`run`], calling `tick` once per pod placed (progress for long runs).
pub(crate) fn run_observed(
    cluster: &Cluster,
    config: &Config,
    burst: &Burst,
    method: Method,
    seed: u64,
    tick: &dyn Fn(),
) -> Outcome {
    match method {
        Method::NoWebhook => {
            place_in_order(cluster, config, burst, method, seed, tick, |_, pod| pod)
        }
        Method::CoolestForAll => {
            let probe = pod_of(&burst.pod);
            let facts = probe.as_ref().map(PodFacts::of);
            let view = PodsInView::new(cluster);
            let coolest = facts
                .iter()
                .flat_map(|f| view.feasible(f, &cluster.nodes))
                .min_by(|&a, &b| {
                    cluster
                        .bottleneck(a, 0, burst)
                        .total_cmp(&cluster.bottleneck(b, 0, burst))
                });
            let name = coolest.map(|i| cluster.nodes[i].name.clone());
            place_in_order(cluster, config, burst, method, seed, tick, |_, mut pod| {
                if let Some(name) = &name {
                    // Only the preferred terms: the pod's required node affinity and pod
                    // (anti-)affinity still hold.
                    let preferred = "preferredDuringSchedulingIgnoredDuringExecution";
                    pod["spec"]["affinity"]["nodeAffinity"][preferred] = json!([{
                        "weight": 100,
                        "preference": {"matchFields": [
                            {"key": "metadata.name", "operator": "In", "values": [name]}
                        ]}
                    }]);
                }
                pod
            })
        }
        Method::Ideal => ideal(cluster, config, burst, None, tick),
        Method::IdealInSample => {
            let mut scheduler = cluster.scheduler(config, seed);
            ideal(cluster, config, burst, Some(&mut scheduler), tick)
        }
        Method::Webhook(timing) => webhook::webhook(cluster, config, burst, timing, seed, tick),
    }
}

/// Each pod, as `prepare` makes it, through the scheduler model one after another.
fn place_in_order(
    cluster: &Cluster,
    config: &Config,
    burst: &Burst,
    method: Method,
    seed: u64,
    tick: &dyn Fn(),
    prepare: impl Fn(usize, Value) -> Value,
) -> Outcome {
    let mut nodes = cluster.nodes.clone();
    let mut view = PodsInView::new(cluster);
    let mut scheduler = cluster.scheduler(config, seed);
    let landed = (0..burst.count)
        .map(|i| {
            tick();
            let pod = pod_of(&prepare(i, nth_pod(&burst.pod, i)))?;
            let facts = PodFacts::of(&pod);
            let node = view.schedule(&mut scheduler, &facts, &nodes).node?;
            nodes[node].add_pod(&facts.requests);
            view.bind(&pod, node);
            Some(node)
        })
        .collect();
    Outcome::placed(method, landed)
}

/// Water-filling over every feasible node, or, with `sampler`, over the sample it scores.
/// Feasible as the scheduler's filters have it, with the pods bound so far in view: the hard
/// pod-level constraints hold; the preferred ones and ScheduleAnyway spread do not steer it
/// (it is about heat).
fn ideal(
    cluster: &Cluster,
    config: &Config,
    burst: &Burst,
    mut sampler: Option<&mut Scheduler>,
    tick: &dyn Fn(),
) -> Outcome {
    let mut nodes = cluster.nodes.clone();
    let mut view = PodsInView::new(cluster);
    let mut pods_on = vec![0usize; nodes.len()];
    let hot_nic = config.placement.hot.network;
    let landed = (0..burst.count)
        .map(|i| {
            tick();
            let pod = pod_of(&nth_pod(&burst.pod, i))?;
            let facts = PodFacts::of(&pod);
            let feasible: Vec<usize> = match sampler.as_deref_mut() {
                Some(scheduler) => view.schedule(scheduler, &facts, &nodes).sample,
                None => view.feasible(&facts, &nodes),
            };
            let feasible = view.best_scored(&facts, &nodes, feasible);
            let nic_ok = |k: usize| {
                cluster
                    .nic_after(k, pods_on[k] + 1, burst)
                    .is_none_or(|n| n < hot_nic)
            };
            let best = feasible
                .iter()
                .copied()
                .filter(|&k| nic_ok(k))
                .chain(feasible.iter().copied())
                .min_by(|&a, &b| {
                    // Keeping the NIC under the hot threshold comes first.
                    (!nic_ok(a))
                        .cmp(&!nic_ok(b))
                        .then(
                            cluster
                                .bottleneck(a, pods_on[a], burst)
                                .total_cmp(&cluster.bottleneck(b, pods_on[b], burst)),
                        )
                        .then_with(|| nodes[a].name.cmp(&nodes[b].name))
                })?;
            nodes[best].add_pod(&facts.requests);
            view.bind(&pod, best);
            pods_on[best] += 1;
            Some(best)
        })
        .collect();
    let method = if sampler.is_some() {
        Method::IdealInSample
    } else {
        Method::Ideal
    };
    Outcome::placed(method, landed)
}
