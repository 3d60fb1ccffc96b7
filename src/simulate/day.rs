//! A day in the model: bursts in waves minutes apart, each TaskManager using its CPU once its
//! containers start, the metrics showing that load over the rate window a scrape later, read at
//! each refresh; the webhook's replicas and their charges live through the day as they do in a
//! cluster, and hand each pod's charge over to the metrics as the served webhook does.
//!
//! The metrics here follow the same timing the handover rule assumes (a pod's load shown in
//! proportion to its run within the window, a scrape late), so the model checks placement over
//! time, not the rule's reading of a real Prometheus: `tests/real_cluster/day.rs` does that.
//! Under `handover.rule: ttl` each charge ends `inflight.ttl` after its pod was steered.

use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use super::figures::{Figures, figures};
use super::pods::{PodsInView, nth_pod, pod_of};
use super::webhook::{BurstRun, Moment, Replicas, note_in, watch};
use super::{Burst, Cluster, Method, Timing, place_in_order};
use crate::config::{Config, HandoverRule};
use crate::inflight::ledger::handover::Evidence;
use crate::inflight::world::World;
use crate::scheduler::cycle::PodFacts;
use crate::snapshot::{LoadSnapshot, PodReading};

/// One wave: `burst` arrives `at` into the day, and its TaskManagers start `start_delay`
/// after they are created.
#[derive(Debug, Clone)]
pub struct Wave {
    pub at: Duration,
    pub burst: Burst,
    pub start_delay: Duration,
}

/// When the metrics show a pod: refreshed every `refresh`, the newest sample up to `scrape`
/// old, rated over `window`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MetricsTiming {
    pub refresh: Duration,
    pub scrape: Duration,
    pub window: Duration,
}

impl MetricsTiming {
    /// As `config` reads Prometheus (its defaults without a Prometheus section).
    pub fn of(config: &Config) -> Self {
        let prometheus = config.prometheus.clone().unwrap_or_default();
        MetricsTiming {
            refresh: prometheus.refresh_interval,
            scrape: config.inflight.handover.scrape_interval,
            window: prometheus.rate_window,
        }
    }

    /// The share of a pod's load the metrics read at `read` show, for a pod started at
    /// `started` (none before it starts).
    fn shown(&self, started: Duration, read: Duration) -> f64 {
        let ran = read.saturating_sub(started).saturating_sub(self.scrape);
        (ran.as_secs_f64() / self.window.as_secs_f64().max(1e-3)).clamp(0.0, 1.0)
    }

    /// The last refresh at or before `t`.
    fn refreshed_by(&self, t: Duration) -> Duration {
        let every = self.refresh.as_micros().max(1);
        Duration::from_micros(((t.as_micros() / every) * every) as u64)
    }
}

/// What steers the day's pods.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Steering {
    /// The webhook as `config` has it (its handover rule included).
    Webhook(Timing),
    /// The default scheduler alone.
    NoWebhook,
}

/// One wave's result: the figures of where its pods went, read against the nodes as really
/// used (every earlier TaskManager's eventual load, started or not), and the lowest its
/// hottest landing node could end on the same nodes.
#[derive(Debug, Clone, PartialEq)]
pub struct WaveRow {
    pub at: Duration,
    pub figures: Figures,
    /// The lowest the hottest landing node could end (each pod onto the feasible node it
    /// leaves least busy), as a busy fraction.
    pub bound: f64,
    /// The hottest landing node above `bound`, in TaskManagers of that node's size.
    pub above: f64,
    /// The TaskManager CPU neither shown by the metrics nor charged, on the node where it is
    /// largest, when the wave arrived (webhook runs).
    pub uncounted: Option<f64>,
}

/// A TaskManager placed earlier in the day.
struct Placed {
    node: usize,
    node_name: String,
    /// Its start reported by the pod watch.
    heard_started: bool,
    cpu: f64,
    network: f64,
    steered: Duration,
    started: Duration,
    /// As the webhook patched it (webhook runs).
    object: Value,
    id: Option<String>,
}

/// The whole day with `steering`; `seed` drives the scheduler and the replicas' salts.
pub fn run_day(
    cluster: &Cluster,
    config: &Config,
    waves: &[Wave],
    steering: Steering,
    seed: u64,
) -> Vec<WaveRow> {
    let timing = MetricsTiming::of(config);
    let zero = Moment::now();
    let network = waves.first().map_or(0.0, |w| {
        w.burst
            .configured_network
            .unwrap_or(w.burst.network_bytes_per_second)
    });
    let replicas = match steering {
        Steering::Webhook(t) => Some(Replicas::new(config, network, t, seed)),
        Steering::NoWebhook => None,
    };
    if let Some(replicas) = &replicas {
        replicas.list(cluster, zero);
    }
    let mut placed: Vec<Placed> = Vec::new();
    let mut rows = Vec::with_capacity(waves.len());
    let mut first_index = 0;
    for (k, wave) in waves.iter().enumerate() {
        let t = wave.at;
        let read_at = timing.refreshed_by(t);
        let now = zero.after(t);
        let pods: Vec<Pod> = placed.iter().filter_map(bound_pod).collect();
        let readings = readings(
            cluster,
            &placed,
            Some((&timing, read_at)),
            zero.wall + read_at,
        );
        let decided_on = cluster.later(readings.clone(), pods.clone(), config);
        let uncounted = replicas.as_ref().map(|replicas| {
            hand_over(replicas, &mut placed, &readings, now, t);
            uncounted(replicas, cluster, &placed, |p: &Placed| {
                timing.shown(p.started, read_at)
            })
        });
        // The nodes as really used: every earlier TaskManager at its eventual load.
        let truth = cluster.later(
            self::readings(cluster, &placed, None, zero.wall + t),
            pods,
            config,
        );
        let tick = || {};
        let seed = seed.wrapping_add(k as u64);
        let (outcome, objects) = match &replicas {
            Some(replicas) => {
                replicas.publish(readings);
                let run = BurstRun {
                    seed,
                    tick: &tick,
                    at: now,
                    first_index,
                };
                let placed = replicas.burst(&decided_on, &wave.burst, &run);
                (placed.outcome, placed.pods)
            }
            None => {
                let outcome = place_in_order(
                    &decided_on,
                    config,
                    &wave.burst,
                    Method::NoWebhook,
                    seed,
                    &tick,
                    |i, _| nth_pod(&wave.burst.pod, first_index + i),
                );
                let objects = (0..wave.burst.count)
                    .map(|i| Some(nth_pod(&wave.burst.pod, first_index + i)))
                    .collect();
                (outcome, objects)
            }
        };
        let busy = config.placement.hot.cpu;
        let figures = figures(&truth, &wave.burst, &outcome, busy);
        let bound = lowest_hottest(&truth, &wave.burst);
        let above = if figures.one_pod_on_hottest > 0.0 {
            (figures.hottest_cpu - bound) / figures.one_pod_on_hottest
        } else {
            0.0
        };
        for (landed, object) in outcome.landed.iter().zip(objects) {
            let (Some(node), Some(object)) = (landed, object) else {
                continue;
            };
            placed.push(Placed {
                node: *node,
                node_name: cluster.nodes[*node].name.clone(),
                heard_started: false,
                cpu: wave.burst.cpu_cores,
                network: wave.burst.network_bytes_per_second,
                steered: t,
                started: t + wave.start_delay,
                id: note_in(&object).map(|n| n.id),
                object,
            });
        }
        first_index += wave.burst.count;
        rows.push(WaveRow {
            at: t,
            figures,
            bound,
            above,
            uncounted,
        });
    }
    rows
}

/// The lowest the hottest landing node can end: each pod onto the feasible node it leaves
/// least busy (CPU), the scheduler's filters holding with the pods placed so far.
fn lowest_hottest(cluster: &Cluster, burst: &Burst) -> f64 {
    let mut nodes = cluster.nodes.clone();
    let mut view = PodsInView::new(cluster);
    let mut pods_on = vec![0usize; nodes.len()];
    let mut hottest: f64 = 0.0;
    for i in 0..burst.count {
        let Some(pod) = pod_of(&nth_pod(&burst.pod, i)) else {
            break;
        };
        let facts = PodFacts::of(&pod);
        let after = |k: usize| cluster.cpu_after(k, pods_on[k] + 1, burst);
        let Some(best) = view
            .feasible(&facts, &nodes)
            .into_iter()
            .min_by(|&a, &b| after(a).total_cmp(&after(b)))
        else {
            continue;
        };
        hottest = hottest.max(after(best));
        nodes[best].add_pod(&facts.requests);
        view.bind(&pod, best);
        pods_on[best] += 1;
    }
    hottest
}

/// The readings a refresh gives: each node's own load and what the metrics show of each
/// TaskManager on it, and each started TaskManager's own series; with `read` `None`, every
/// TaskManager at its eventual load (the nodes as really used).
fn readings(
    cluster: &Cluster,
    placed: &[Placed],
    read: Option<(&MetricsTiming, Duration)>,
    taken_at: SystemTime,
) -> LoadSnapshot {
    let mut snapshot = cluster.snapshot.clone();
    snapshot.taken_at = Some(taken_at);
    for p in placed {
        let share = read.map_or(1.0, |(timing, at)| timing.shown(p.started, at));
        let node = &mut snapshot.nodes[p.node];
        node.cpu += p.cpu * share / cluster.cores[p.node];
        if let Some(bytes) = &mut node.network_bytes_per_second {
            *bytes += p.network * share;
        }
        let Some((_, at)) = read.filter(|_| share > 0.0) else {
            continue;
        };
        snapshot.pods.push(PodReading {
            namespace: text(&p.object["metadata"]["namespace"]),
            pod: text(&p.object["metadata"]["name"]),
            cpu_cores: p.cpu * share,
            network_bytes_per_second: Some(p.network * share),
            labels: p.object["metadata"]["labels"]
                .as_object()
                .map(|l| {
                    l.iter()
                        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                        .collect()
                })
                .unwrap_or_default(),
            owner: None,
            running_secs: Some(at.saturating_sub(p.started).as_secs_f64()),
            node: Some(p.node_name.clone()),
            steered: p.id.is_some(),
        });
    }
    snapshot
}

fn text(value: &Value) -> String {
    value.as_str().unwrap_or_default().to_string()
}

/// A placed TaskManager as the scheduler's cache holds it: bound to its node.
fn bound_pod(p: &Placed) -> Option<Pod> {
    let mut object = p.object.clone();
    object["spec"]["nodeName"] = json!(p.node_name);
    pod_of(&object)
}

/// What the replicas hear before the wave: the TaskManagers started since the last one (each
/// replica's pod watch), the refresh's readings (each pod's charge handed over as far as they
/// show it), and under the fixed ttl, the charges older than it ended.
fn hand_over(
    replicas: &Replicas,
    placed: &mut [Placed],
    readings: &LoadSnapshot,
    now: Moment,
    t: Duration,
) {
    let zero_wall = now.wall - t;
    let evidence = Evidence::of(readings);
    let config = replicas.config();
    let ttl = (config.inflight.handover.rule == HandoverRule::Ttl).then_some(config.inflight.ttl);
    let started: Vec<usize> = (0..placed.len())
        .filter(|&i| !placed[i].heard_started && placed[i].started <= t)
        .collect();
    for world in replicas.ledgers() {
        for &i in &started {
            let p = &placed[i];
            let bound = Some((p.node_name.as_str(), Some(zero_wall + p.started)));
            watch(world, &p.object, bound, now);
        }
        let mut world = world.write();
        world.charges.read_evidence(&evidence, now.mono);
        if let Some(ttl) = ttl {
            for p in placed.iter().filter(|p| t >= p.steered + ttl) {
                if let Some(id) = &p.id {
                    world.charges.forget(id);
                }
            }
        }
    }
    for i in started {
        placed[i].heard_started = true;
    }
}

/// The TaskManager CPU the replica charging the most counts nowhere: neither shown by the
/// `readings` nor charged, on the node where it is largest.
fn uncounted(
    replicas: &Replicas,
    cluster: &Cluster,
    placed: &[Placed],
    shown: impl Fn(&Placed) -> f64,
) -> f64 {
    let mut unshown = vec![0.0; cluster.nodes.len()];
    for p in placed {
        unshown[p.node] += p.cpu * (1.0 - shown(p));
    }
    let charged = |world: &World, i: usize| {
        (world.charges)
            .extra(&cluster.nodes[i].name)
            .map_or(0.0, |x| x.cpu_cores)
    };
    // Each replica's charge by node, read once; the deciding one charges the most.
    let by_replica: Vec<Vec<f64>> = replicas
        .ledgers()
        .iter()
        .map(|world| {
            let world = world.read();
            (0..unshown.len()).map(|i| charged(&world, i)).collect()
        })
        .collect();
    let total = |charges: &Vec<f64>| charges.iter().sum::<f64>();
    let deciding = by_replica
        .iter()
        .max_by(|a, b| total(a).total_cmp(&total(b)));
    let Some(deciding) = deciding else {
        return unshown.into_iter().fold(0.0, f64::max);
    };
    (0..unshown.len())
        .map(|i| unshown[i] - deciding[i])
        .fold(0.0, f64::max)
}
