//! The webhook in the closed loop: each review through the real admission path of the replica
//! the apiserver sends it to, the scheduler model binding the patched pods, and the pod watch
//! delivering "created" and "bound" events back to every replica's ledger.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use base64::Engine;
use serde_json::{Value, json};

use super::pods::{PodsInView, nth_pod, pod_of, uid};
use super::{Burst, Cluster, Method, Outcome, Timing};
use crate::admission::Admission;
use crate::config::Config;
use crate::inflight::shared::SharedWorld;
use crate::inflight::world::World;
use crate::inventory::pods::{apply_pod_event, landing_of};
use crate::scheduler::cycle::PodFacts;
use crate::snapshot::LoadSnapshot;
use crate::telemetry::Landing;
use crate::view::ViewStore;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// At equal times: a bind happens before the watch reports it, and watch events reach
    /// the webhook before the next review.
    Bind {
        pod: usize,
    },
    Created {
        replica: usize,
        pod: usize,
    },
    Bound {
        replica: usize,
        pod: usize,
    },
    Admit {
        pod: usize,
    },
}

pub(super) fn webhook(
    cluster: &Cluster,
    config: &Config,
    burst: &Burst,
    timing: Timing,
    seed: u64,
    tick: &dyn Fn(),
) -> Outcome {
    let network = burst
        .configured_network
        .unwrap_or(burst.network_bytes_per_second);
    let replicas = Replicas::new(config, network, timing, seed);
    let mut snapshot = cluster.snapshot.clone();
    snapshot.taken_at = Some(SystemTime::now());
    replicas.publish(snapshot);
    let now = Moment::now();
    replicas.list(cluster, now);
    let run = BurstRun {
        seed,
        tick,
        at: now,
        first_index: 0,
    };
    replicas.burst(cluster, burst, &run).outcome
}

/// One moment on both clocks: the ledger's monotonic one and the wall clock pods are stamped
/// with.
#[derive(Debug, Clone, Copy)]
pub(super) struct Moment {
    pub(super) mono: Instant,
    pub(super) wall: SystemTime,
}

impl Moment {
    pub(super) fn now() -> Self {
        Moment {
            mono: Instant::now(),
            wall: SystemTime::now(),
        }
    }

    /// `d` later.
    pub(super) fn after(self, d: Duration) -> Self {
        Moment {
            mono: self.mono + d,
            wall: self.wall + d,
        }
    }
}

/// How one burst runs: the scheduler's seed, progress, when it arrives, and the number of its
/// first pod in the day (names and uids stay distinct across bursts).
pub(super) struct BurstRun<'a> {
    pub(super) seed: u64,
    pub(super) tick: &'a dyn Fn(),
    pub(super) at: Moment,
    pub(super) first_index: usize,
}

/// A burst's outcome and its pods as the webhook patched them (`None`: not created).
pub(super) struct Placed {
    pub(super) outcome: Outcome,
    pub(super) pods: Vec<Option<Value>>,
}

/// The webhook's replicas in the model: their view, ledgers and admission paths, which live
/// through every burst of a day as they do in a cluster.
pub(super) struct Replicas {
    store: Arc<ViewStore>,
    ledgers: Vec<Arc<SharedWorld>>,
    admissions: Vec<Admission>,
    names: Vec<String>,
    timing: Timing,
    config: Arc<Config>,
}

impl Replicas {
    /// `timing.replicas` replicas of `config`, charging `network` bytes per second to a pod
    /// without measured siblings.
    pub(super) fn new(config: &Config, network: f64, timing: Timing, seed: u64) -> Self {
        let mut config = config.clone();
        config.inflight.network_bytes_per_second = network;
        let config = Arc::new(config);
        let store = Arc::new(ViewStore::new(config.placement.clone()));
        let replicas = timing.replicas.max(1);
        let ledgers: Vec<Arc<SharedWorld>> = (0..replicas)
            .map(|_| Arc::new(SharedWorld::new(World::for_config(&config))))
            .collect();
        let admissions: Vec<Admission> = ledgers
            .iter()
            .enumerate()
            .map(|(r, world)| {
                Admission::with_salt(
                    config.clone(),
                    store.clone(),
                    world.clone(),
                    seed.wrapping_add(r as u64 + 1)
                        .wrapping_mul(0x9E37_79B9_7F4A_7C15),
                )
            })
            .collect();
        let names = (0..replicas)
            .map(|r| format!("placement-webhook-{r}"))
            .collect();
        Replicas {
            store,
            ledgers,
            admissions,
            names,
            timing,
            config,
        }
    }

    pub(super) fn config(&self) -> &Config {
        &self.config
    }

    pub(super) fn ledgers(&self) -> &[Arc<SharedWorld>] {
        &self.ledgers
    }

    /// A refresh: the view every replica decides on.
    pub(super) fn publish(&self, snapshot: LoadSnapshot) {
        self.store.publish_snapshot(snapshot);
    }

    /// The namespaces and the pods already running, as each replica's watches list them.
    pub(super) fn list(&self, cluster: &Cluster, at: Moment) {
        for world in &self.ledgers {
            world
                .write()
                .cluster
                .set_namespace_labels(cluster.namespace_labels().clone());
        }
        for (pod, k) in cluster.bound_pods() {
            let Ok(mut object) = serde_json::to_value(pod) else {
                continue;
            };
            object["metadata"]["creationTimestamp"] = created(at);
            for world in &self.ledgers {
                watch(world, &object, Some((&cluster.nodes[k].name, None)), at);
            }
        }
    }

    /// `count` replicas in the membership, as the membership watch publishes them.
    fn publish_members(&self, count: usize) {
        if !self.timing.membership {
            return;
        }
        // The decider is the first replica, the lowest-named.
        let decider = self.timing.one_decider().then_some(self.names[0].as_str());
        for (r, admission) in self.admissions.iter().enumerate() {
            admission
                .decider()
                .peers()
                .publish(&self.names[r], &self.names[..count], decider);
        }
    }

    /// The burst through the replicas and the scheduler model on `cluster`.
    pub(super) fn burst(&self, cluster: &Cluster, burst: &Burst, run: &BurstRun<'_>) -> Placed {
        let timing = self.timing;
        let replicas = self.ledgers.len();
        let mut members = timing.members_at(0);
        self.publish_members(members);

        // The schedule, in virtual microseconds.
        let us = |d: Duration| d.as_micros() as u64;
        let admit_at = |i: usize| i as u64 * us(timing.review_interval);
        let burst_end = admit_at(burst.count.saturating_sub(1)) + 1;
        let mut bind_at = Vec::with_capacity(burst.count);
        let mut last = if timing.binds_after_burst {
            burst_end
        } else {
            0
        };
        for i in 0..burst.count {
            last = last.max(admit_at(i)) + us(timing.bind_interval);
            bind_at.push(last);
        }
        let deliver = |t: u64| match timing.watch_lag {
            Some(lag) => t + us(lag),
            None => t.max(burst_end),
        };
        let mut events: Vec<(u64, Event)> = Vec::with_capacity(burst.count * (2 + 2 * replicas));
        for (i, &bound) in bind_at.iter().enumerate() {
            events.push((admit_at(i), Event::Admit { pod: i }));
            events.push((bound, Event::Bind { pod: i }));
            for replica in 0..replicas {
                events.push((deliver(admit_at(i)), Event::Created { replica, pod: i }));
                events.push((deliver(bound), Event::Bound { replica, pod: i }));
            }
        }
        events.sort();

        let mut nodes = cluster.nodes.clone();
        let mut view = PodsInView::new(cluster);
        let mut scheduler = cluster.scheduler(&self.config, run.seed);
        let mut patched: Vec<Option<Value>> = vec![None; burst.count];
        let mut landed: Vec<Option<usize>> = vec![None; burst.count];
        let mut outcome = Outcome::placed(Method::Webhook(timing), Vec::new());
        let mut predicted: Vec<Vec<String>> = vec![Vec::new(); burst.count];
        let mut bands = BandKeepers::new(self, &nodes);
        bands.keep(self, &mut nodes);
        for (_, event) in events {
            if matches!(event, Event::Admit { .. } | Event::Bound { .. }) {
                // After the event before: a review's charge, or a bind a replica heard.
                bands.keep(self, &mut nodes);
            }
            match event {
                Event::Admit { pod } => {
                    let index = run.first_index + pod;
                    let object = nth_pod(&burst.pod, index);
                    let review = review_of(&object, index);
                    if timing.members_at(pod) != members {
                        members = timing.members_at(pod);
                        self.publish_members(members);
                    }
                    // Forwarded, a review is decided by the first replica about a millisecond
                    // later: the reviews stay 3 ms apart and in order, so the decision is taken
                    // here with the same events before it.
                    let decider = if timing.one_decider() {
                        0
                    } else {
                        timing.replica_for(pod)
                    };
                    let admission = &self.admissions[decider];
                    let Ok(answer) = admission.review_bytes(&review) else {
                        patched[pod] = Some(object);
                        continue;
                    };
                    let mut doc = object;
                    if let Some(encoded) = answer.review.response.patch.as_deref()
                        && let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(encoded)
                        && let Ok(patch) = serde_json::from_slice::<json_patch::Patch>(&bytes)
                    {
                        // A patch that does not apply would reject the pod: keep it visible.
                        if json_patch::patch(&mut doc, &patch.0).is_err() {
                            continue;
                        }
                    }
                    doc["metadata"]["creationTimestamp"] = created(run.at);
                    predicted[pod] = predicted_nodes(&doc);
                    patched[pod] = Some(doc);
                }
                Event::Bind { pod } => {
                    (run.tick)();
                    let Some(object) = patched[pod].as_ref().and_then(pod_of) else {
                        continue;
                    };
                    let facts = PodFacts::of(&object);
                    let cycle = view.schedule(&mut scheduler, &facts, &nodes);
                    let preferred = preferred_names(&facts, &self.config.placement.heat_bands.key);
                    if !preferred.is_empty() && !cycle.sample.is_empty() {
                        outcome.with_preferences += 1;
                        if !cycle
                            .sample
                            .iter()
                            .any(|&k| preferred.contains(nodes[k].name.as_str()))
                        {
                            outcome.preferred_outside_sample += 1;
                        }
                    }
                    if let Some(k) = cycle.node {
                        if predicted[pod].iter().any(|n| *n == nodes[k].name) {
                            outcome.predicted_landing_held += 1;
                        }
                        nodes[k].add_pod(&facts.requests);
                        view.bind(&object, k);
                        landed[pod] = Some(k);
                    }
                }
                Event::Created { replica, pod } => {
                    if let Some(object) = &patched[pod] {
                        watch(&self.ledgers[replica], object, None, run.at);
                    }
                }
                Event::Bound { replica, pod } => {
                    if let (Some(object), Some(k)) = (&patched[pod], landed[pod])
                        && let Some((place, _)) = watch(
                            &self.ledgers[replica],
                            object,
                            Some((&nodes[k].name, None)),
                            run.at,
                        )
                    {
                        let slot = match place {
                            Landing::FirstTier => 0,
                            Landing::OtherTier => 1,
                            Landing::Elsewhere => 2,
                        };
                        outcome.landings[slot] += 1;
                    }
                }
            }
        }
        outcome.landed = landed;
        Placed {
            outcome,
            pods: patched,
        }
    }
}

/// The heat band keeper (when the config keeps bands) of the first replica, the lowest-named,
/// which alone writes them as in the webhook, writing straight into the model's node labels:
/// the real keeper's writes take milliseconds, far less than the time between a review and
/// its bind.
struct BandKeepers {
    book: Option<crate::bands::BandBook>,
    position: crate::hashing::HashMap<String, usize>,
    /// The bands on the model's nodes, as a node watch would read them back.
    on_nodes: crate::hashing::HashMap<String, u32>,
}

impl BandKeepers {
    fn new(webhook: &Replicas, nodes: &[crate::scheduler::ModelNode]) -> Self {
        let keeping = webhook.config.placement.heat_bands.enabled;
        BandKeepers {
            book: keeping.then(crate::bands::BandBook::default),
            position: (nodes.iter().enumerate())
                .map(|(k, n)| (n.name.clone(), k))
                .collect(),
            on_nodes: crate::hashing::HashMap::default(),
        }
    }

    fn keep(&mut self, webhook: &Replicas, nodes: &mut [crate::scheduler::ModelNode]) {
        let (Some(book), Some(world)) = (&mut self.book, webhook.ledgers.first()) else {
            return;
        };
        let Some(view) = webhook.store.current() else {
            return;
        };
        if !crate::bands::needed(&view, &webhook.config.scheduler) {
            return;
        }
        let policy = &webhook.config.placement;
        let key = &policy.heat_bands.key;
        // The model's clock does not run: what a replica wrote is read back at once.
        let now = std::time::Instant::now();
        for change in book.changes(&view, &world.read(), policy, &self.on_nodes, now) {
            let Some(&k) = self.position.get(&change.node) else {
                continue;
            };
            let labels = Arc::make_mut(&mut nodes[k].labels);
            match change.band {
                Some(band) => {
                    labels.insert(key.clone(), band.to_string());
                    self.on_nodes.insert(change.node, band);
                }
                None => {
                    labels.remove(key);
                    self.on_nodes.remove(&change.node);
                }
            }
        }
    }
}

/// The nodes the decision annotation says the pod lands on.
fn predicted_nodes(doc: &Value) -> Vec<String> {
    note_in(doc)
        .map(|n| n.nodes.into_iter().map(|(name, _)| name).collect())
        .unwrap_or_default()
}

/// The decision annotation of a pod as the webhook patched it.
pub(super) fn note_in(doc: &Value) -> Option<crate::inflight::note::DecisionNote> {
    doc["metadata"]["annotations"][crate::inflight::note::ANNOTATION]
        .as_str()
        .and_then(crate::inflight::note::DecisionNote::parse)
}

/// Node names a pod's preferred `In` terms name (by field or by label value), the heat band
/// terms (by `band_key`) aside: they list bands, not nodes.
fn preferred_names<'a>(facts: &'a PodFacts<'_>, band_key: &str) -> BTreeSet<&'a str> {
    let mut names = BTreeSet::new();
    for term in facts.preferred_terms {
        let requirements = term
            .preference
            .match_fields
            .iter()
            .flatten()
            .chain(term.preference.match_expressions.iter().flatten());
        for r in requirements.filter(|r| r.operator == "In" && r.key != band_key) {
            names.extend(r.values.iter().flatten().map(String::as_str));
        }
    }
    names
}

/// A creation timestamp at `at`.
fn created(at: Moment) -> Value {
    json!(humantime::format_rfc3339_seconds(at.wall).to_string())
}

/// One pod event as the watch delivers it to a replica at `at`: created, or bound to a node
/// (and running since a time, once started); for a bind of a pod this replica decided, where
/// it landed (the landing-accuracy metric's reading).
pub(super) fn watch(
    world: &SharedWorld,
    object: &Value,
    bound: Option<(&str, Option<SystemTime>)>,
    at: Moment,
) -> Option<(Landing, Option<f64>)> {
    let mut pod = object.clone();
    if pod["metadata"]["creationTimestamp"].is_null() {
        pod["metadata"]["creationTimestamp"] = created(at);
    }
    match bound {
        Some((node, started)) => {
            pod["spec"]["nodeName"] = json!(node);
            pod["status"] = json!({"phase": "Running"});
            if let Some(started) = started {
                pod["status"]["startTime"] =
                    json!(humantime::format_rfc3339_seconds(started).to_string());
            }
        }
        None => pod["status"] = json!({"phase": "Pending"}),
    }
    let pod = pod_of(&pod)?;
    let mut world = world.write();
    apply_pod_event(&mut world, &pod, false, at.mono, at.wall);
    bound.and_then(|_| landing_of(&mut world, &pod))
}

fn review_of(object: &Value, index: usize) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid(index ^ 0x5a5a5a),
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "name": object["metadata"]["name"],
            "namespace": object["metadata"]["namespace"],
            "operation": "CREATE",
            "object": object,
            "oldObject": null,
            "dryRun": false,
        }
    }))
    .unwrap_or_default()
}
