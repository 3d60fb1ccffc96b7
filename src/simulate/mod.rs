//! The closed loop: a burst of pods through the real admission path, placed by the scheduler
//! model, with the pod watch fed back to the webhook as a cluster would feed it. Used by the
//! closed-loop tests and by `placement-webhook simulate`: one code path for both.
//!
//! Time is virtual: reviews arrive every `review_interval` (the apiserver sends them
//! concurrently), the scheduler binds one pod every `bind_interval` in admission order, and the
//! watch delivers "created" and "bound" events `watch_lag` later (or, in the "binds after the
//! burst" mode, only once every pod has been admitted).

pub mod cluster;
pub mod figures;

use crate::inflight::shared::SharedLedger;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use base64::Engine;
use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use crate::admission::Admission;
use crate::config::Config;
use crate::inflight::ledger::Ledger;
use crate::inventory::pods::{apply_pod_event, landing_of};
use crate::placement::ReplicaSet;
use crate::scheduler::cycle::PodFacts;
use crate::scheduler::{ModelNode, PodRequests, Scheduler};
use crate::telemetry::Landing;
use crate::view::ViewStore;

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
    pub replicas: usize,
    pub review_interval: Duration,
    pub bind_interval: Duration,
    /// `None`: no watch event reaches the webhook until the whole burst is admitted.
    pub watch_lag: Option<Duration>,
    /// Share of the reviews the apiserver sends to the first replica (the rest round robin
    /// to the others); `None`: round robin over all.
    pub first_share: Option<f64>,
    /// The last replica joins (is ready, gets reviews, counts in the membership) only from
    /// this pod of the burst on.
    pub join_at: Option<usize>,
    /// Replicas know each other (the membership watch); `false`: each decides as if alone.
    pub membership: bool,
}

impl Timing {
    /// 100 reviews answered in about 0.3 s, binds every 10 ms, watch events 10 ms later.
    pub fn typical(replicas: usize) -> Self {
        Timing {
            replicas,
            review_interval: Duration::from_millis(3),
            bind_interval: Duration::from_millis(10),
            watch_lag: Some(Duration::from_millis(10)),
            first_share: None,
            join_at: None,
            membership: true,
        }
    }

    /// Which replica the apiserver sends pod `index` to.
    pub fn replica_for(&self, index: usize) -> usize {
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
    pub fn label(&self) -> String {
        match self {
            Method::NoWebhook => "no webhook".into(),
            Method::Webhook(t) => {
                let binds = match t.watch_lag {
                    None => "binds after burst".to_string(),
                    Some(lag) => format!("binds +{}ms", lag.as_millis()),
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
pub fn run_observed(
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
            let coolest = facts
                .iter()
                .flat_map(|f| feasible(f, &cluster.nodes))
                .min_by(|&a, &b| {
                    cluster
                        .bottleneck(a, 0, burst)
                        .total_cmp(&cluster.bottleneck(b, 0, burst))
                });
            let name = coolest.map(|i| cluster.nodes[i].name.clone());
            place_in_order(cluster, config, burst, method, seed, tick, |_, mut pod| {
                if let Some(name) = &name {
                    pod["spec"]["affinity"] = json!({"nodeAffinity": {
                        "preferredDuringSchedulingIgnoredDuringExecution": [{
                            "weight": 100,
                            "preference": {"matchFields": [
                                {"key": "metadata.name", "operator": "In", "values": [name]}
                            ]}
                        }]
                    }});
                }
                pod
            })
        }
        Method::Ideal => ideal(cluster, config, burst, None, tick),
        Method::IdealInSample => {
            let mut scheduler = cluster.scheduler(config, seed);
            ideal(cluster, config, burst, Some(&mut scheduler), tick)
        }
        Method::Webhook(timing) => webhook(cluster, config, burst, timing, seed, tick),
    }
}

/// Indexes of the nodes the scheduler's filters accept for the pod.
fn feasible<'a>(
    facts: &'a PodFacts<'_>,
    nodes: &'a [ModelNode],
) -> impl Iterator<Item = usize> + 'a {
    (0..nodes.len()).filter(|&k| crate::scheduler::cycle::filter(facts, &nodes[k]).is_ok())
}

fn pod_of(value: &Value) -> Option<Pod> {
    serde_json::from_value(value.clone()).ok()
}

/// The `index`-th pod of the burst: a distinct name and uid, created now.
fn nth_pod(template: &Value, index: usize) -> Value {
    let mut pod = template.clone();
    let base = template["metadata"]["name"]
        .as_str()
        .unwrap_or("taskmanager")
        .to_string();
    pod["metadata"]["name"] = json!(format!("{base}-{}", index + 1));
    pod["metadata"]["uid"] = json!(uid(index));
    pod
}

/// A uuid-shaped uid per pod.
fn uid(index: usize) -> String {
    let mut z = (index as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    format!(
        "{:08x}-{:04x}-4{:03x}-9{:03x}-{:012x}",
        z >> 32,
        (z >> 16) & 0xffff,
        z & 0xfff,
        index & 0xfff,
        index
    )
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
    let mut scheduler = cluster.scheduler(config, seed);
    let landed = (0..burst.count)
        .map(|i| {
            tick();
            let pod = pod_of(&prepare(i, nth_pod(&burst.pod, i)))?;
            let facts = PodFacts::of(&pod);
            let node = scheduler.schedule(&facts, &nodes).node?;
            nodes[node].add_pod(&facts.requests);
            Some(node)
        })
        .collect();
    Outcome {
        method,
        landed,
        preferred_outside_sample: 0,
        with_preferences: 0,
        predicted_landing_held: 0,
        landings: [0; 3],
    }
}

/// Water-filling over every feasible node, or, with `sampler`, over the sample it scores.
fn ideal(
    cluster: &Cluster,
    config: &Config,
    burst: &Burst,
    mut sampler: Option<&mut Scheduler>,
    tick: &dyn Fn(),
) -> Outcome {
    let mut nodes = cluster.nodes.clone();
    let mut pods_on = vec![0usize; nodes.len()];
    let hot_nic = config.placement.hot.network;
    let landed = (0..burst.count)
        .map(|i| {
            tick();
            let pod = pod_of(&nth_pod(&burst.pod, i))?;
            let facts = PodFacts::of(&pod);
            let feasible: Vec<usize> = match sampler.as_deref_mut() {
                Some(scheduler) => scheduler.schedule(&facts, &nodes).sample,
                None => feasible(&facts, &nodes).collect(),
            };
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
            pods_on[best] += 1;
            Some(best)
        })
        .collect();
    Outcome {
        method: if sampler.is_some() {
            Method::IdealInSample
        } else {
            Method::Ideal
        },
        landed,
        preferred_outside_sample: 0,
        with_preferences: 0,
        predicted_landing_held: 0,
        landings: [0; 3],
    }
}

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

fn webhook(
    cluster: &Cluster,
    config: &Config,
    burst: &Burst,
    timing: Timing,
    seed: u64,
    tick: &dyn Fn(),
) -> Outcome {
    let mut config = config.clone();
    config.inflight.network_bytes_per_second = burst
        .configured_network
        .unwrap_or(burst.network_bytes_per_second);
    let config = Arc::new(config);
    let store = Arc::new(ViewStore::new(config.placement.clone()));
    let mut snapshot = cluster.snapshot.clone();
    snapshot.taken_at = Some(SystemTime::now());
    store.publish_snapshot(snapshot);
    let replicas = timing.replicas.max(1);
    let ledgers: Vec<Arc<SharedLedger>> = (0..replicas)
        .map(|_| {
            Arc::new(SharedLedger::new(
                Ledger::new(config.inflight.ttl).with_max_entries(config.inflight.max_entries),
            ))
        })
        .collect();
    let admissions: Vec<Admission> = ledgers
        .iter()
        .enumerate()
        .map(|(r, ledger)| {
            Admission::with_salt(
                config.clone(),
                store.clone(),
                ledger.clone(),
                seed.wrapping_add(r as u64 + 1)
                    .wrapping_mul(0x9E37_79B9_7F4A_7C15),
            )
        })
        .collect();

    let names: Vec<String> = (0..replicas)
        .map(|r| format!("placement-webhook-{r}"))
        .collect();
    let publish_members = |count: usize| {
        for (r, admission) in admissions.iter().enumerate() {
            let set = timing
                .membership
                .then(|| ReplicaSet::new(&names[r], names[..count].iter().cloned()))
                .flatten();
            admission.replicas().store(set.map(Arc::new));
        }
    };
    let mut members = timing.members_at(0);
    publish_members(members);

    // The schedule, in virtual microseconds.
    let us = |d: Duration| d.as_micros() as u64;
    let admit_at = |i: usize| i as u64 * us(timing.review_interval);
    let mut bind_at = Vec::with_capacity(burst.count);
    let mut last = 0;
    for i in 0..burst.count {
        last = last.max(admit_at(i)) + us(timing.bind_interval);
        bind_at.push(last);
    }
    let burst_end = admit_at(burst.count.saturating_sub(1)) + 1;
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
    let mut scheduler = cluster.scheduler(&config, seed);
    let mut patched: Vec<Option<Value>> = vec![None; burst.count];
    let mut landed: Vec<Option<usize>> = vec![None; burst.count];
    let mut outcome = Outcome {
        method: Method::Webhook(timing),
        landed: Vec::new(),
        preferred_outside_sample: 0,
        with_preferences: 0,
        predicted_landing_held: 0,
        landings: [0; 3],
    };
    let mut predicted: Vec<Vec<String>> = vec![Vec::new(); burst.count];
    for (_, event) in events {
        match event {
            Event::Admit { pod } => {
                let object = nth_pod(&burst.pod, pod);
                let review = review_of(&object, pod);
                if timing.members_at(pod) != members {
                    members = timing.members_at(pod);
                    publish_members(members);
                }
                let admission = &admissions[timing.replica_for(pod)];
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
                predicted[pod] = predicted_nodes(&doc);
                patched[pod] = Some(doc);
            }
            Event::Bind { pod } => {
                tick();
                let Some(object) = patched[pod].as_ref().and_then(pod_of) else {
                    continue;
                };
                let facts = PodFacts::of(&object);
                let cycle = scheduler.schedule(&facts, &nodes);
                let preferred = preferred_names(&facts);
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
                    landed[pod] = Some(k);
                }
            }
            Event::Created { replica, pod } => {
                if let Some(object) = &patched[pod] {
                    watch(&ledgers[replica], object, None);
                }
            }
            Event::Bound { replica, pod } => {
                if let (Some(object), Some(k)) = (&patched[pod], landed[pod])
                    && let Some((place, _)) = watch(&ledgers[replica], object, Some(&nodes[k].name))
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
    outcome
}

/// The nodes the decision annotation says the pod lands on.
fn predicted_nodes(doc: &Value) -> Vec<String> {
    doc["metadata"]["annotations"][crate::inflight::note::ANNOTATION]
        .as_str()
        .and_then(crate::inflight::note::DecisionNote::parse)
        .map(|n| n.nodes.into_iter().map(|(name, _)| name).collect())
        .unwrap_or_default()
}

/// Node names a pod's preferred `In` terms name (by field or by label value).
fn preferred_names<'a>(facts: &'a PodFacts<'_>) -> BTreeSet<&'a str> {
    let mut names = BTreeSet::new();
    for term in facts.preferred_terms {
        let requirements = term
            .preference
            .match_fields
            .iter()
            .flatten()
            .chain(term.preference.match_expressions.iter().flatten());
        for r in requirements.filter(|r| r.operator == "In") {
            names.extend(r.values.iter().flatten().map(String::as_str));
        }
    }
    names
}

/// One pod event as the watch delivers it to a replica; for a bind of a pod this replica
/// decided, where it landed (the landing-accuracy metric's reading).
fn watch(
    ledger: &SharedLedger,
    object: &Value,
    node: Option<&str>,
) -> Option<(Landing, Option<f64>)> {
    let mut pod = object.clone();
    pod["metadata"]["creationTimestamp"] =
        json!(humantime::format_rfc3339_seconds(SystemTime::now()).to_string());
    if let Some(node) = node {
        pod["spec"]["nodeName"] = json!(node);
        pod["status"] = json!({"phase": "Running"});
    } else {
        pod["status"] = json!({"phase": "Pending"});
    }
    let pod = pod_of(&pod)?;
    let mut ledger = ledger.write();
    apply_pod_event(&mut ledger, &pod, false, Instant::now(), SystemTime::now());
    node.and_then(|_| landing_of(&mut ledger, &pod))
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

/// Requests of the burst pod, for callers that size scenarios.
pub fn pod_requests(burst: &Burst) -> PodRequests {
    pod_of(&burst.pod)
        .map(|p| PodRequests::of(&p))
        .unwrap_or_default()
}
