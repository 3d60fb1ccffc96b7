//! The Pod watch: the in-flight ledger's eyes on pods steered by any replica.
//!
//! **Running two or more replicas.** The apiserver spreads a burst of pod creations over all
//! webhook replicas, so at admission each replica sees only its own part of the burst and would
//! on its own keep steering pods to nodes another replica has just filled. Every replica
//! therefore also watches all target pods cluster-wide (a server-side label selector built from
//! `targets`). Each steered pod carries the `placement-webhook.io/decision` annotation with its
//! ledger id, its estimated load and its first-tier nodes:
//!
//! - a pod another replica steered shows up pending with that annotation: its load is charged to
//!   its first-tier nodes, split evenly, exactly as the steering replica charged it;
//! - once the scheduler binds it (`spec.nodeName` set), its whole load moves to that node;
//! - when it is deleted, or has Succeeded or Failed, its load is dropped; otherwise it ages out
//!   after `inflight.ttl` like any ledger entry, when the metrics have caught up with it.
//!
//! A pod's age comes from its `creationTimestamp`, so a replica that starts late, or re-lists,
//! does not count pods the metrics already show. The cost is one pod watch per replica, and the
//! replicas agree with a lag of the watch latency, typically well under a second. Pods that
//! vanish while a watch is down are not forgotten explicitly; the ttl bounds their effect.

use crate::inflight::shared::SharedWorld;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client};
use tracing::{debug, trace};

use super::client::WatchHealth;
use crate::cluster::{ClusterPicture, SeenPod};
use crate::config::Mode;
use crate::inflight::ledger::handover::pod_key;
use crate::inflight::note::{ANNOTATION, DecisionNote};
use crate::inflight::world::World;
use crate::readiness::Readiness;
use crate::scheduler::{PodFacts, PodRequests};
use crate::telemetry::{Landing, Metrics, NodeHeat};

/// What one pod event did to the ledger.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodEffect {
    /// Not a steered pod, or too old to matter: only its requests were counted.
    Ignored,
    /// Charged where its decision predicted it lands (a pending pod another replica steered).
    Charged,
    /// Its load now counts on the node it was bound to.
    Bound,
    /// Known already and still pending: nothing to do.
    Unchanged,
    /// Removed from the ledger (deleted, Succeeded or Failed).
    Forgotten,
}

/// The decision note a replica wrote on the pod, if any.
fn decision_note(pod: &Pod) -> Option<DecisionNote> {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION))
        .and_then(|text| DecisionNote::parse(text))
}

/// Records `pod` (with its `requests`) in the cluster's picture as a watch event or a list reads
/// it, and returns the decision note a replica wrote on it: the one reading of a pod for the
/// watch and for the one-shot list.
pub(crate) fn record_seen(
    picture: &mut ClusterPicture,
    pod: &Pod,
    deleted: bool,
    requests: &PodRequests,
) -> Option<DecisionNote> {
    let note = decision_note(pod);
    let seen = SeenPod {
        uid: &pod_uid(pod),
        node: occupied_node(pod, deleted),
        requests,
        deleted,
        steered: note.is_some(),
    };
    picture.record_pod(pod, seen);
    note
}

/// The node whose requests the pod occupies in the scheduler's cache: bound, not finished,
/// not deleted.
pub(crate) fn occupied_node(pod: &Pod, deleted: bool) -> Option<&str> {
    if deleted || is_finished(pod) {
        return None;
    }
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .filter(|n| !n.is_empty())
}

/// When a running pod's containers started; `None` before it runs.
fn running_since(pod: &Pod) -> Option<SystemTime> {
    let running = pod.status.as_ref()?.phase.as_deref() == Some("Running") && !stuck(pod);
    running
        .then(|| crate::cluster::running::started(pod))
        .flatten()
}

/// Why a container waits when it will not start by itself, as the kubelet reports it: an image
/// that cannot be pulled, a config or a runtime that refuses it, a crash loop. (A container that
/// is only starting waits as `ContainerCreating` or `PodInitializing`.)
const STUCK_REASONS: [&str; 10] = [
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "ErrImageNeverPull",
    "CreateContainerConfigError",
    "CreateContainerError",
    "RunContainerError",
    "CrashLoopBackOff",
    "PreStartHookError",
    "PostStartHookError",
];

/// Some container of `pod` has restarted: it ran before.
fn restarted(pod: &Pod) -> bool {
    (pod.status.as_ref())
        .and_then(|s| s.container_statuses.as_ref())
        .is_some_and(|statuses| statuses.iter().any(|c| c.restart_count > 0))
}

/// Some container of `pod` (an init container included) waits for a reason of
/// [`STUCK_REASONS`]: it loads its node with nothing, and will not until someone acts.
fn stuck(pod: &Pod) -> bool {
    let Some(status) = pod.status.as_ref() else {
        return false;
    };
    (status.init_container_statuses.iter().flatten())
        .chain(status.container_statuses.iter().flatten())
        .filter_map(|c| c.state.as_ref()?.waiting.as_ref()?.reason.as_deref())
        .any(|reason| STUCK_REASONS.contains(&reason))
}

fn is_finished(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .is_some_and(|p| p == "Succeeded" || p == "Failed")
}

/// The key the occupancy counts a pod under: its uid, else namespace/name.
pub(crate) fn pod_uid(pod: &Pod) -> String {
    match pod.metadata.uid.as_deref() {
        Some(uid) if !uid.is_empty() => uid.to_string(),
        _ => format!(
            "{}/{}",
            pod.metadata.namespace.as_deref().unwrap_or_default(),
            pod.metadata.name.as_deref().unwrap_or_default()
        ),
    }
}

/// Applies one watched pod to the ledger: its requests to the occupancy (every pod), and for a
/// steered pod its in-flight entry.
///
/// `now_instant` and `now_wall` are the same moment on the monotonic and the wall clock: the
/// pod's age on the wall clock places its steering time on the ledger's monotonic clock.
pub fn apply_pod_event(
    world: &mut World,
    pod: &Pod,
    deleted: bool,
    now_instant: Instant,
    now_wall: SystemTime,
) -> PodEffect {
    let requests = PodRequests::of(pod);
    let note = record_seen(&mut world.cluster, pod, deleted, &requests);
    let Some(note) = note else {
        return PodEffect::Ignored;
    };
    let event = SteeredEvent {
        pod,
        note: &note,
        requests: &requests,
        deleted,
    };
    apply_steered(world, event, (now_instant, now_wall))
}

/// A steered pod listed once, as `review` lists the cluster: charged as the pod watch charges
/// it, leaving its requests to the listing's own picture.
pub(crate) fn charge_listed(world: &mut World, pod: &Pod, now: (Instant, SystemTime)) {
    if let Some(note) = decision_note(pod) {
        let event = SteeredEvent {
            pod,
            note: &note,
            requests: &PodRequests::of(pod),
            deleted: false,
        };
        apply_steered(world, event, now);
    }
}

/// A steered pod as the pod watch reports it, with its decision note and requests.
struct SteeredEvent<'a> {
    pod: &'a Pod,
    note: &'a DecisionNote,
    requests: &'a PodRequests,
    deleted: bool,
}

/// The in-flight entry of a steered pod.
fn apply_steered(
    world: &mut World,
    event: SteeredEvent<'_>,
    (now_instant, now_wall): (Instant, SystemTime),
) -> PodEffect {
    let SteeredEvent {
        pod,
        note,
        requests,
        deleted,
    } = event;
    let node = occupied_node(pod, deleted);
    world.charges.heard(&note.id);
    // A pod being deleted (scaled down, evicted from a lost node) is leaving: its load ends
    // with its containers, and on a node that never answers again it may stay so for ever.
    // Its requests still hold the node until it is gone, as the scheduler counts them.
    let leaving = pod.metadata.deletion_timestamp.is_some();
    if deleted || leaving || is_finished(pod) {
        if world.charges.contains(&note.id) {
            world.charges.forget(&note.id);
            return PodEffect::Forgotten;
        }
        return PodEffect::Ignored;
    }
    if let Some(node) = node {
        if !world.charges.contains(&note.id) {
            let Some(steered_at) = steered_at(pod, now_instant, now_wall) else {
                return PodEffect::Ignored;
            };
            world.charges.charge(
                &note.id,
                &[(node.to_string(), 1.0)],
                note.load,
                requests,
                steered_at,
            );
            heard_if_recent(world, &note.id);
            // Steered before the ttl (a replica starting meets every bound pod): charged by
            // evidence, not by age, while the metrics cannot show it whole. Not a pod whose
            // container restarted: the metrics showed it running before, and a charge that
            // ended at its handover is not charged again.
            if !restarted(pod) {
                world.charges.charge_unshown(
                    &note.id,
                    node,
                    (note.load, requests),
                    steered_at,
                    (running_since(pod), now_wall),
                );
            }
        }
        // Absent after charge: older than the ttl, the metrics show it already.
        return if world.charges.bind(&note.id, node) {
            let key = pod_key(
                pod.metadata.namespace.as_deref().unwrap_or_default(),
                pod.metadata.name.as_deref().unwrap_or_default(),
            );
            world
                .charges
                .started(&note.id, &key, running_since(pod), stuck(pod));
            PodEffect::Bound
        } else {
            PodEffect::Ignored
        };
    }
    if world.charges.contains(&note.id) {
        return PodEffect::Unchanged;
    }
    let Some(steered_at) = steered_at(pod, now_instant, now_wall) else {
        return PodEffect::Ignored;
    };
    world
        .charges
        .charge(&note.id, &note.nodes, note.load, requests, steered_at);
    heard_if_recent(world, &note.id);
    // Another replica's pod: tagged by the rule its own pods follow.
    world.tag(&note.id, &PodFacts::without_requests(pod));
    if world.charges.contains(&note.id) {
        PodEffect::Charged
    } else {
        PodEffect::Ignored
    }
}

/// Another replica's pod, reported for the first time, counts in the split of the reviews only
/// when it was charged (steered within the ttl): a re-list's old pods say nothing of the split
/// now.
fn heard_if_recent(world: &mut World, id: &str) {
    if world.charges.contains(id) {
        world.charges.heard_from_another();
    }
}

/// Where a bound pod this replica decided landed, relative to its decision, and the heat its
/// node had then; once per pod (`None` afterwards, and for pods another replica decided).
///
/// The tier is read off the pod's own preferred terms: the node named by the heaviest term is
/// first tier, a node named by a lighter one another tier, any other node elsewhere.
pub(crate) fn landing_of(world: &mut World, pod: &Pod) -> Option<(Landing, Option<f64>)> {
    let note = note_of(pod).filter(|n| n.mode != Mode::Observe.as_str())?;
    let node = occupied_node(pod, false)?;
    let heats = world.charges.take_decision(&note.id)?;
    let terms = pod
        .spec
        .as_ref()
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|na| {
            na.preferred_during_scheduling_ignored_during_execution
                .as_deref()
        })
        .unwrap_or_default();
    let names = |t: &k8s_openapi::api::core::v1::PreferredSchedulingTerm| {
        let p = &t.preference;
        p.match_fields
            .iter()
            .flatten()
            .chain(p.match_expressions.iter().flatten())
            .filter(|r| r.operator == "In")
            .any(|r| r.values.iter().flatten().any(|v| v == node))
    };
    let top = terms.iter().map(|t| t.weight).max().unwrap_or(0);
    let weight = terms.iter().filter(|t| names(t)).map(|t| t.weight).max();
    // The first tier is graded under sampling, down to halfway to the next tier's weight: a
    // weight over half the top one is the first tier's (the default tiers: 60-100 against 20).
    let place = match weight {
        Some(w) if 2 * w > top => Landing::FirstTier,
        Some(_) => Landing::OtherTier,
        None => Landing::Elsewhere,
    };
    let heat = heats
        .iter()
        .find(|(n, _)| n == node)
        .map(|(_, h)| f64::from(*h));
    Some((place, heat))
}

fn note_of(pod: &Pod) -> Option<DecisionNote> {
    pod.metadata
        .annotations
        .as_ref()?
        .get(ANNOTATION)
        .and_then(|text| DecisionNote::parse(text))
}

/// An observed pod (observe mode) this replica decided, seen bound.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Observed {
    /// Where the scheduler put it.
    pub(crate) landed: String,
    /// Where the webhook would have put it first, when it named a node.
    pub(crate) would: Option<String>,
}

/// Where a bound pod this replica observed landed, and where the webhook would have put it;
/// once per pod (`None` afterwards, for steered pods and for pods another replica decided).
pub(crate) fn observed_of(world: &mut World, pod: &Pod) -> Option<Observed> {
    let note = note_of(pod).filter(|n| n.mode == Mode::Observe.as_str())?;
    let node = occupied_node(pod, false)?;
    world.charges.take_decision(&note.id)?;
    Some(Observed {
        landed: node.to_string(),
        would: note.would.map(|(node, _)| node),
    })
}

/// When the pod was steered, on the monotonic clock: its creation (admission happens just
/// before). A creation time ahead of our clock (skew) counts as now; a pod without one (never
/// so from the apiserver) as well. `None` when the moment predates what `Instant` can express.
fn steered_at(pod: &Pod, now_instant: Instant, now_wall: SystemTime) -> Option<Instant> {
    let age = pod
        .metadata
        .creation_timestamp
        .as_ref()
        .and_then(|t| now_wall.duration_since(SystemTime::from(t.0)).ok())
        .unwrap_or(Duration::ZERO);
    now_instant.checked_sub(age)
}

/// Finished pods hold no requests; when a pod finishes, the watch reports it deleted.
pub(crate) const UNFINISHED_PODS: &str = "status.phase!=Succeeded,status.phase!=Failed";

/// What the watch tells about this replica's decisions once their pods are bound.
enum Seen {
    Steered(Landing, Option<f64>),
    Observed(Observed),
}

/// Watches every unfinished pod cluster-wide (the scheduler's cache counts the requests of all
/// of them) and keeps `ledger` in step until `shutdown` completes. `node_heat` reads a node's
/// heat now, for comparing an observed pod's node with the webhook's choice.
///
/// The ledger lock is held only for one [`apply_pod_event`] call, never across an await.
#[tracing::instrument(name = "pod_watch", skip_all)]
pub(crate) async fn watch_pods(
    client: Client,
    world: Arc<SharedWorld>,
    readiness: Arc<Readiness>,
    metrics: Arc<Metrics>,
    node_heat: impl Fn(&str) -> Option<NodeHeat> + Send,
    shutdown: impl Future<Output = ()> + Send,
) {
    let config = watcher::Config::default().fields(UNFINISHED_PODS);
    let events = watcher::watcher(Api::<Pod>::all(client), config).default_backoff();
    let mut events = std::pin::pin!(events);
    let mut shutdown = std::pin::pin!(shutdown);
    let mut health = WatchHealth::default();
    loop {
        let event = tokio::select! {
            () = &mut shutdown => {
                debug!("pod watch stopped");
                return;
            }
            event = events.next() => event,
        };
        let (pod, deleted) = match event {
            Some(Ok(Event::Apply(pod) | Event::InitApply(pod))) => (pod, false),
            Some(Ok(Event::Delete(pod))) => (pod, true),
            Some(Ok(Event::Init)) => {
                health.ok("pod");
                lock(&world).begin_relist();
                continue;
            }
            Some(Ok(Event::InitDone)) => {
                // Pods that vanished while the watch was away are not in the new list.
                lock(&world).end_relist();
                readiness.set_pods_synced();
                continue;
            }
            Some(Err(error)) => {
                health.failed("pod", &error);
                continue;
            }
            None => {
                debug!("pod watch ended");
                return;
            }
        };
        health.ok("pod");
        let (effect, landed) = {
            let mut world = lock(&world);
            let effect =
                apply_pod_event(&mut world, &pod, deleted, Instant::now(), SystemTime::now());
            let landed = match effect {
                PodEffect::Bound => landing_of(&mut world, &pod)
                    .map(|(place, heat)| Seen::Steered(place, heat))
                    .or_else(|| observed_of(&mut world, &pod).map(Seen::Observed)),
                _ => None,
            };
            (effect, landed)
        };
        match landed {
            Some(Seen::Steered(place, heat)) => metrics.count_landing(place, heat),
            Some(Seen::Observed(seen)) => metrics.count_observed(
                node_heat(&seen.landed),
                seen.would.as_deref().and_then(&node_heat),
            ),
            None => {}
        }
        if effect != PodEffect::Ignored {
            debug!(
                pod = pod.metadata.name.as_deref().unwrap_or_default(),
                namespace = pod.metadata.namespace.as_deref().unwrap_or_default(),
                ?effect,
                "ledger updated from pod watch"
            );
        } else {
            trace!(
                pod = pod.metadata.name.as_deref().unwrap_or_default(),
                "pod event ignored"
            );
        }
    }
}

fn lock(world: &SharedWorld) -> std::sync::RwLockWriteGuard<'_, World> {
    // A panic elsewhere while holding the lock leaves plain data behind: keep using it.
    world.write()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inflight::ledger::{Ledger, PodLoad};

    const TTL: Duration = Duration::from_secs(90);
    const NOTE: &str =
        "id=abc123 mode=affinity cpu=2 net=1000 nodes=worker-1:0.25,worker-4:0.75 avoid=0 age=3s";

    fn pod(
        note: Option<&str>,
        node: Option<&str>,
        phase: &str,
        age_secs: u64,
    ) -> (Pod, SystemTime) {
        let now_wall = SystemTime::now();
        let created = now_wall - Duration::from_secs(age_secs);
        let created = k8s_openapi::jiff::Timestamp::try_from(created).unwrap();
        let mut meta = serde_json::json!({
            "name": "job-taskmanager-1-1",
            "namespace": "flink",
            "uid": "0f5c4c86-5a71-4d0e-9c25-2f1d0c9b7a10",
            "labels": {"component": "taskmanager", "type": "flink-native-kubernetes"},
            "creationTimestamp": created.to_string(),
        });
        if let Some(note) = note {
            meta["annotations"] = serde_json::json!({ ANNOTATION: note });
        }
        let mut spec = serde_json::json!({"containers": [{"name": "flink-main-container",
            "resources": {"requests": {"cpu": "2", "memory": "4Gi"}}}]});
        if let Some(node) = node {
            spec["nodeName"] = node.into();
        }
        let pod = serde_json::from_value(serde_json::json!({
            "metadata": meta, "spec": spec, "status": {"phase": phase},
        }))
        .unwrap();
        (pod, now_wall)
    }

    fn apply(world: &mut World, pod: &(Pod, SystemTime), deleted: bool) -> PodEffect {
        apply_pod_event(world, &pod.0, deleted, Instant::now(), pod.1)
    }

    fn cpu(world: &World, node: &str) -> f64 {
        world.charges.extra(node).map_or(0.0, |l| l.cpu_cores)
    }

    fn bound_milli_cpu(world: &World, node: &str) -> i64 {
        world
            .cluster
            .occupancy
            .node(node)
            .map_or(0, |n| n.requested.milli_cpu)
    }

    #[test]
    fn a_listed_steered_pod_is_charged_on_its_node_and_its_requests_left_to_the_listing() {
        let mut l = World::new(Ledger::new(TTL));
        let bound = pod(Some(NOTE), Some("worker-1"), "Pending", 3);
        charge_listed(&mut l, &bound.0, (Instant::now(), bound.1));
        assert_eq!(cpu(&l, "worker-1"), 2.0);
        assert_eq!(bound_milli_cpu(&l, "worker-1"), 0);
        let unsteered = pod(None, Some("worker-2"), "Pending", 3);
        charge_listed(&mut l, &unsteered.0, (Instant::now(), unsteered.1));
        assert_eq!(l.charges.len(), 1);
    }

    /// `pod` with its main container waiting for `reason`, or running since a minute ago.
    fn with_container(mut pod: (Pod, SystemTime), waiting: Option<&str>) -> (Pod, SystemTime) {
        let state = match waiting {
            Some(reason) => serde_json::json!({"waiting": {"reason": reason}}),
            None => {
                serde_json::json!({"running": {"startedAt": k8s_openapi::jiff::Timestamp::try_from(
                pod.1 - Duration::from_secs(60)).unwrap().to_string()}})
            }
        };
        let status = pod.0.status.get_or_insert_default();
        status.container_statuses = Some(vec![
            serde_json::from_value(serde_json::json!({"name": "flink-main-container",
                "image": "flink", "imageID": "", "ready": false, "restartCount": 0,
                "state": state}))
            .unwrap(),
        ]);
        pod
    }

    /// The status of the main container [`with_container`] gave `pod`.
    fn main_container(
        pod: &mut (Pod, SystemTime),
    ) -> &mut k8s_openapi::api::core::v1::ContainerStatus {
        let status = pod.0.status.as_mut().expect("a status");
        &mut status
            .container_statuses
            .as_mut()
            .expect("container statuses")[0]
    }

    #[test]
    fn a_pod_being_deleted_is_charged_nothing_though_its_requests_hold_the_node() {
        let mut l = World::new(Ledger::new(TTL));
        let mut bound = pod(Some(NOTE), Some("worker-1"), "Running", 3);
        apply(&mut l, &bound, false);
        assert_eq!(cpu(&l, "worker-1"), 2.0);
        bound.0.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::try_from(bound.1).unwrap(),
            ));
        assert_eq!(apply(&mut l, &bound, false), PodEffect::Forgotten);
        assert_eq!(cpu(&l, "worker-1"), 0.0, "its charge ends as it leaves");
        assert_eq!(bound_milli_cpu(&l, "worker-1"), 2000, "its request stays");
        assert_eq!(
            apply(&mut l, &bound, false),
            PodEffect::Ignored,
            "and is not charged again"
        );
        assert_eq!(cpu(&l, "worker-1"), 0.0);
    }

    #[test]
    fn a_bound_pod_stuck_pulling_its_image_loads_its_node_with_nothing_until_it_runs() {
        let mut l = World::new(Ledger::new(TTL));
        for (phase, waiting, charged, what) in [
            (
                "Pending",
                Some("ContainerCreating"),
                2.0,
                "starting: charged whole",
            ),
            ("Pending", Some("ImagePullBackOff"), 0.0, "stuck: nothing"),
            ("Running", None, 2.0, "running: charged whole again"),
            (
                "Running",
                Some("CrashLoopBackOff"),
                0.0,
                "a crash loop: nothing",
            ),
        ] {
            let event = with_container(pod(Some(NOTE), Some("worker-1"), phase, 3), waiting);
            apply(&mut l, &event, false);
            assert_eq!(cpu(&l, "worker-1"), charged, "{what}");
            assert_eq!(l.charges.len(), 1, "{what}: set aside, not forgotten");
        }
    }

    #[test]
    fn pods_without_a_note_only_count_their_requests() {
        let mut l = World::new(Ledger::new(TTL));
        for note in [None, Some("not a decision")] {
            let p = pod(note, None, "Pending", 1);
            assert_eq!(apply(&mut l, &p, false), PodEffect::Ignored);
            assert_eq!(bound_milli_cpu(&l, "worker-1"), 0, "pending holds nothing");
            let p = pod(note, Some("worker-1"), "Running", 1);
            assert_eq!(apply(&mut l, &p, false), PodEffect::Ignored);
            assert_eq!(bound_milli_cpu(&l, "worker-1"), 2000);
            assert_eq!(apply(&mut l, &p, true), PodEffect::Ignored);
            assert_eq!(bound_milli_cpu(&l, "worker-1"), 0, "deleted");
        }
        assert!(l.charges.is_empty());
    }

    #[test]
    fn only_recent_pods_of_other_replicas_count_in_the_split() {
        let mut l = World::new(Ledger::new(TTL));
        // A re-list's pod steered long ago says nothing of how reviews are split now.
        let old = pod(Some(NOTE), Some("worker-4"), "Running", 600);
        assert_eq!(apply(&mut l, &old, false), PodEffect::Ignored);
        assert_eq!(l.charges.heard_mix().others, 0.0);
        let recent = pod(Some(NOTE), None, "Pending", 1);
        assert_eq!(apply(&mut l, &recent, false), PodEffect::Charged);
        assert_eq!(l.charges.heard_mix().others, 1.0);
        // Its bind is the same pod: not counted again.
        let bound = pod(Some(NOTE), Some("worker-4"), "Running", 1);
        assert_eq!(apply(&mut l, &bound, false), PodEffect::Bound);
        assert_eq!(l.charges.heard_mix().others, 1.0);
    }

    #[test]
    fn bound_pods_keep_their_group_until_gone_or_unlisted() {
        let mut l = World::new(Ledger::new(TTL));
        let (mut a, now) = pod(None, Some("worker-1"), "Running", 1);
        let mut b = a.clone();
        b.metadata.uid = Some("0f5c4c86-5a71-4d0e-9c25-2f1d0c9b7a11".into());
        apply_pod_event(&mut l, &a, false, Instant::now(), now);
        apply_pod_event(&mut l, &b, false, Instant::now(), now);
        assert_eq!((l.cluster.groups.len(), l.cluster.groups.pods()), (1, 2));
        // Relabelled: another group; moved: counted on its new node.
        a.metadata.labels = Some([("app".to_string(), "other".to_string())].into());
        a.spec.as_mut().expect("spec").node_name = Some("worker-2".into());
        apply_pod_event(&mut l, &a, false, Instant::now(), now);
        assert_eq!((l.cluster.groups.len(), l.cluster.groups.pods()), (2, 2));
        let on_nodes: Vec<usize> = l.cluster.groups.groups().map(|(_, on)| on.len()).collect();
        assert_eq!(on_nodes, [1, 1]);
        // A relist that mentions only `a` drops `b` and its group.
        l.cluster.occupancy.begin_relist();
        apply_pod_event(&mut l, &a, false, Instant::now(), now);
        l.end_relist();
        assert_eq!((l.cluster.groups.len(), l.cluster.groups.pods()), (1, 1));
        assert_eq!(l.cluster.occupancy.pods(), 1);
        apply_pod_event(&mut l, &a, true, Instant::now(), now);
        assert!(l.cluster.groups.is_empty());
        assert_eq!(
            (l.cluster.groups.pods(), l.cluster.occupancy.pods()),
            (0, 0)
        );
    }

    /// A steered pod the watch had reported, deleted while the watch was away, is not in the
    /// next list: its charge goes with it. A charge the watch never reported stays.
    #[test]
    fn a_relist_drops_the_charges_of_steered_pods_it_no_longer_lists() {
        let mut l = World::new(Ledger::new(TTL));
        let p = pod(Some(NOTE), None, "Pending", 2);
        assert_eq!(apply(&mut l, &p, false), PodEffect::Charged);
        l.charges.charge(
            "unheard",
            &[("worker-2".to_string(), 1.0)],
            PodLoad::default(),
            &PodRequests::default(),
            Instant::now(),
        );
        l.charges.remember_decision("unheard", Vec::new());
        assert_eq!(l.charges.len(), 2);
        // Listed again: kept.
        l.begin_relist();
        assert_eq!(apply(&mut l, &p, false), PodEffect::Unchanged);
        l.end_relist();
        assert_eq!(l.charges.len(), 2);
        // Not listed: its charge goes; the one never reported stays.
        l.begin_relist();
        l.end_relist();
        assert_eq!(l.charges.len(), 1);
        assert!(l.charges.contains("unheard"));
        assert_eq!(cpu(&l, "worker-4"), 0.0);
    }

    #[test]
    fn pending_pod_from_another_replica_is_charged_where_it_lands() {
        let mut l = World::new(Ledger::new(TTL));
        let p = pod(Some(NOTE), None, "Pending", 2);
        assert_eq!(apply(&mut l, &p, false), PodEffect::Charged);
        assert_eq!(cpu(&l, "worker-1"), 0.5);
        assert_eq!(cpu(&l, "worker-4"), 1.5);
        assert_eq!(
            l.charges.extra("worker-4").map(|x| x.milli_cpu),
            Some(1500.0)
        );
        // The same pod seen again (a status update) changes nothing.
        assert_eq!(apply(&mut l, &p, false), PodEffect::Unchanged);
        assert_eq!(cpu(&l, "worker-1"), 0.5);
        assert_eq!(l.charges.len(), 1);
    }

    #[test]
    fn own_pod_is_not_charged_twice() {
        let mut l = World::new(Ledger::new(TTL));
        let landing = vec![("worker-1".to_string(), 1.0)];
        let load = PodLoad {
            cpu_cores: 2.0,
            network_bytes_per_second: 1000.0,
        };
        l.charges.charge(
            "abc123",
            &landing,
            load,
            &Default::default(),
            Instant::now(),
        );
        let p = pod(Some(NOTE), None, "Pending", 0);
        assert_eq!(apply(&mut l, &p, false), PodEffect::Unchanged);
        assert_eq!(cpu(&l, "worker-1"), 2.0);
    }

    #[test]
    fn bound_pod_moves_to_its_node() {
        let mut l = World::new(Ledger::new(TTL));
        apply(&mut l, &pod(Some(NOTE), None, "Pending", 2), false);
        let bound = pod(Some(NOTE), Some("worker-4"), "Pending", 3);
        assert_eq!(apply(&mut l, &bound, false), PodEffect::Bound);
        assert_eq!(cpu(&l, "worker-1"), 0.0);
        assert_eq!(cpu(&l, "worker-4"), 2.0);
        // Requests now come from the occupancy, once.
        assert_eq!(l.charges.extra("worker-4").map(|x| x.milli_cpu), Some(0.0));
        assert_eq!(bound_milli_cpu(&l, "worker-4"), 2000);
        // Running on the same node: still counted once.
        let running = pod(Some(NOTE), Some("worker-4"), "Running", 5);
        assert_eq!(apply(&mut l, &running, false), PodEffect::Bound);
        assert_eq!(cpu(&l, "worker-4"), 2.0);
    }

    #[test]
    fn bound_pod_first_seen_is_charged_to_its_node() {
        let mut l = World::new(Ledger::new(TTL));
        let p = pod(Some(NOTE), Some("worker-7"), "Running", 5);
        assert_eq!(apply(&mut l, &p, false), PodEffect::Bound);
        assert_eq!(cpu(&l, "worker-7"), 2.0);
        assert_eq!(cpu(&l, "worker-1"), 0.0);
        assert_eq!(
            l.charges
                .extra("worker-7")
                .map(|x| x.network_bytes_per_second),
            Some(1000.0)
        );
    }

    #[test]
    fn deleted_or_finished_pods_are_forgotten() {
        for (phase, deleted) in [("Running", true), ("Succeeded", false), ("Failed", false)] {
            let mut l = World::new(Ledger::new(TTL));
            apply(
                &mut l,
                &pod(Some(NOTE), Some("worker-1"), "Running", 2),
                false,
            );
            let gone = pod(Some(NOTE), Some("worker-1"), phase, 4);
            assert_eq!(
                apply(&mut l, &gone, deleted),
                PodEffect::Forgotten,
                "{phase}"
            );
            assert!(l.charges.is_empty());
            assert_eq!(cpu(&l, "worker-1"), 0.0);
            // A second delete of an unknown pod is harmless.
            assert_eq!(apply(&mut l, &gone, deleted), PodEffect::Ignored);
        }
    }

    #[test]
    fn pods_older_than_the_ttl_are_not_charged() {
        let mut l = World::new(Ledger::new(TTL));
        let pending = pod(Some(NOTE), None, "Pending", 600);
        assert_eq!(apply(&mut l, &pending, false), PodEffect::Ignored);
        let bound = pod(Some(NOTE), Some("worker-1"), "Running", 600);
        assert_eq!(apply(&mut l, &bound, false), PodEffect::Ignored);
        assert!(l.charges.is_empty());
    }

    #[test]
    fn a_replica_starting_charges_an_old_bound_pod_by_evidence_not_by_age() {
        let evidence = || {
            World::new(Ledger::new(TTL).with_handover(
                crate::inflight::ledger::handover::HandoverPolicy::evidence(
                    Duration::from_secs(120),
                    Duration::from_secs(30),
                ),
            ))
        };
        // Created ten minutes ago, still pulling its image: the metrics show none of it.
        let mut l = evidence();
        let pulling = with_container(
            pod(Some(NOTE), Some("worker-1"), "Pending", 600),
            Some("ContainerCreating"),
        );
        assert_eq!(apply(&mut l, &pulling, false), PodEffect::Bound);
        assert_eq!(cpu(&l, "worker-1"), 2.0);
        assert_eq!(
            l.charges.heard_mix().others,
            0.0,
            "an old pod says nothing of the split"
        );
        // Running a minute: not shown whole yet either.
        let mut l = evidence();
        let young = with_container(pod(Some(NOTE), Some("worker-1"), "Running", 600), None);
        assert_eq!(apply(&mut l, &young, false), PodEffect::Bound);
        // Running for longer than the window and the scrape: the metrics show it.
        let mut l = evidence();
        let mut shown = with_container(pod(Some(NOTE), Some("worker-1"), "Running", 600), None);
        let started = k8s_openapi::jiff::Timestamp::try_from(shown.1 - Duration::from_secs(300))
            .unwrap()
            .to_string();
        main_container(&mut shown).state =
            serde_json::from_value(serde_json::json!({"running": {"startedAt": started}})).ok();
        assert_eq!(apply(&mut l, &shown, false), PodEffect::Ignored);
        assert!(l.charges.is_empty());
        // Its container restarted a minute ago: it ran before, it is not charged again.
        let mut l = evidence();
        let mut again = with_container(pod(Some(NOTE), Some("worker-1"), "Running", 600), None);
        main_container(&mut again).restart_count = 1;
        assert_eq!(apply(&mut l, &again, false), PodEffect::Ignored);
        assert!(l.charges.is_empty());
    }

    #[test]
    fn creation_time_ahead_of_our_clock_counts_as_now() {
        let mut l = World::new(Ledger::new(TTL));
        let (p, now_wall) = pod(Some(NOTE), None, "Pending", 0);
        let behind = now_wall - Duration::from_secs(30);
        assert_eq!(
            apply_pod_event(&mut l, &p, false, Instant::now(), behind),
            PodEffect::Charged
        );
    }
}
