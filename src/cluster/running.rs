//! Running TaskManagers by job, from the pod watch: which pods' measured load estimates a new
//! pod of the same job. Only pods that name a job cheaply are kept (Flink's `app` and
//! `component: taskmanager` labels, or a steered pod's owner). Where each one runs is kept too,
//! for the `hotspots` report.
//!
//! Kept compact, as every TaskManager of a large cluster is here: what the pods of a job share
//! (namespace, job labels, owner) is kept once per job, node names once per node, and of a
//! pod's name only what follows the part it shares with the name of its job's first pod
//! (`orders-taskmanager-1-` of `orders-taskmanager-1-17`). A pod costs 28 bytes, the end of
//! its name and an 8-byte index slot.

use std::collections::BTreeMap;
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::hashing::HashMap;
use k8s_openapi::api::core::v1::Pod;

use super::interner::Interner;
use super::since::Since;
use crate::jobs::{self, COMPONENT_LABEL, JobKey, TASKMANAGER};
use crate::snapshot::LoadSnapshot;

/// What the running pods of one job share.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct JobShape {
    namespace: Box<str>,
    /// The labels that name a job ([`jobs::job_labels`]), in key order.
    labels: Box<[(Box<str>, Box<str>)]>,
    owner: Option<Box<str>>,
    /// Its pods carry the decision annotation (the pods of one job nearly always agree).
    steered: bool,
}

impl JobShape {
    fn of(pod: &Pod, steered: bool) -> Self {
        let meta = &pod.metadata;
        JobShape {
            namespace: meta.namespace.as_deref().unwrap_or_default().into(),
            labels: meta
                .labels
                .as_ref()
                .map(jobs::job_labels)
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| (k.into_boxed_str(), v.into_boxed_str()))
                .collect(),
            owner: jobs::owner_uid(pod).map(Box::from),
            steered,
        }
    }

    fn labels(&self) -> BTreeMap<String, String> {
        self.labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }
}

/// No node: the pod names none.
const NO_NODE: u32 = u32::MAX;

/// 28 bytes a pod: the rest is shared.
#[derive(Debug, Clone, Copy)]
struct RunningPod {
    /// When its containers last started running.
    since: Since,
    /// Its number in `RunningPods::jobs`.
    job: u32,
    /// Its number in `RunningPods::nodes` (`spec.nodeName`), or [`NO_NODE`].
    node: u32,
    /// Its name: the first `prefix` bytes of its job's base name, then `len` bytes of
    /// `RunningPods::names` from `at`.
    at: u32,
    len: u16,
    prefix: u16,
}

/// A running pod, where it runs and for which job.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct PlacedPod {
    pub(crate) namespace: String,
    pub(crate) pod: String,
    pub(crate) job: JobKey,
    pub(crate) node: String,
    /// It carries the webhook's decision annotation.
    pub(crate) steered: bool,
}

#[derive(Debug, Clone, Default)]
pub struct RunningPods {
    /// Unordered, without gaps: a removed pod's place is taken by the last one.
    pods: Vec<RunningPod>,
    /// The ends of the pods' names, one after another.
    names: String,
    /// Bytes of `names` no pod uses any more; reclaimed once they are most of it.
    unused: usize,
    /// Each pod's place in `pods`, by a 32-bit hash of its namespace and name (from the map's
    /// own hasher: seeded per process).
    index: HashMap<u32, u32>,
    /// Places of pods whose hash another pod holds in `index`: collisions, a handful.
    collided: Vec<u32>,
    jobs: Interner<JobShape>,
    /// Each job's base name, by job number: the name of the pod it was first seen with.
    bases: Vec<Box<str>>,
    nodes: Interner<str>,
    /// Tests: every pod hashes alike, so that collisions are exercised.
    #[cfg(test)]
    collide_all: bool,
}

/// The longest start of `name` that is also the start of `base`, cut at a character.
fn shared_start(base: &str, name: &str) -> usize {
    let mut n = base
        .bytes()
        .zip(name.bytes())
        .take_while(|(a, b)| a == b)
        .count()
        .min(usize::from(u16::MAX));
    while !name.is_char_boundary(n) {
        n -= 1;
    }
    n
}

impl RunningPods {
    /// The hash of a pod's namespace and name, the name given in parts.
    fn hash(&self, namespace: &str, name: [&[u8]; 2]) -> u32 {
        #[cfg(test)]
        if self.collide_all {
            return 0;
        }
        let mut hasher = self.index.hasher().build_hasher();
        hasher.write(namespace.as_bytes());
        hasher.write_u8(0xff);
        // Byte by byte: a name hashes alike however it is split.
        for &b in name.iter().copied().flatten() {
            hasher.write_u8(b);
        }
        hasher.finish() as u32
    }

    /// The pod's name in two parts: the start it shares with its job's base name, and the
    /// rest.
    fn name_of(&self, pod: &RunningPod) -> [&str; 2] {
        let base = self.bases.get(pod.job as usize).map_or("", |b| &**b);
        let start = usize::from(pod.prefix);
        let at = pod.at as usize;
        [
            base.get(..start).unwrap_or_default(),
            self.names
                .get(at..at + usize::from(pod.len))
                .unwrap_or_default(),
        ]
    }

    fn namespace_of(&self, pod: &RunningPod) -> &str {
        self.jobs.get(pod.job).map_or("", |job| &job.namespace)
    }

    fn hash_at(&self, at: u32) -> u32 {
        let pod = &self.pods[at as usize];
        let [start, rest] = self.name_of(pod);
        self.hash(self.namespace_of(pod), [start.as_bytes(), rest.as_bytes()])
    }

    fn is(&self, at: u32, namespace: &str, name: &str) -> bool {
        let Some(pod) = self.pods.get(at as usize) else {
            return false;
        };
        let [start, rest] = self.name_of(pod);
        name.len() == start.len() + rest.len()
            && name.starts_with(start)
            && name.ends_with(rest)
            && self.namespace_of(pod) == namespace
    }

    /// The place of the pod `namespace/name`, whose hash is `hash`.
    fn find(&self, hash: u32, namespace: &str, name: &str) -> Option<u32> {
        let &at = self.index.get(&hash)?;
        if self.is(at, namespace, name) {
            return Some(at);
        }
        // Only a pod whose hash is taken is kept apart, so nothing is there when none is.
        self.collided
            .iter()
            .copied()
            .find(|&c| self.is(c, namespace, name))
    }

    /// Keeps the end of `name` (of a pod of job number `job`) in `names`: where, how long, and
    /// how much of the job's base name comes first. `None` past 64 KiB of name or 4 GiB of
    /// names, which no apiserver object has.
    fn keep_name(&mut self, job: u32, name: &str) -> Option<(u32, u16, u16)> {
        let base = self.bases.get(job as usize).map_or("", |b| &**b);
        let start = shared_start(base, name);
        let rest = name.get(start..)?;
        let len = u16::try_from(rest.len()).ok()?;
        let at = u32::try_from(self.names.len()).ok()?;
        u32::try_from(self.names.len() + rest.len()).ok()?;
        self.names.push_str(rest);
        Some((at, len, u16::try_from(start).ok()?))
    }

    /// Rewrites `names` without the unused bytes once they are most of it.
    fn tidy(&mut self) {
        if self.unused <= 4096 || self.unused <= self.names.len() / 2 {
            return;
        }
        let mut names = String::with_capacity(self.names.len() - self.unused);
        for pod in &mut self.pods {
            let at = pod.at as usize;
            let rest = self
                .names
                .get(at..at + usize::from(pod.len))
                .unwrap_or_default();
            pod.at = u32::try_from(names.len()).unwrap_or(u32::MAX);
            names.push_str(rest);
        }
        self.names = names;
        self.unused = 0;
    }

    /// One pod less holds job number `job`.
    fn release_job(&mut self, job: u32) {
        if self.jobs.release(job)
            && let Some(base) = self.bases.get_mut(job as usize)
        {
            *base = Box::default();
        }
    }

    /// Drops the pod at `at`, whose hash is `hash`.
    fn remove(&mut self, hash: u32, at: u32) {
        if self.index.get(&hash) == Some(&at) {
            self.index.remove(&hash);
            // A pod kept apart under the same hash takes the freed slot.
            if let Some(p) = self.collided.iter().position(|&c| self.hash_at(c) == hash) {
                let promoted = self.collided.swap_remove(p);
                self.index.insert(hash, promoted);
            }
        } else {
            self.collided.retain(|&c| c != at);
        }
        let gone = self.pods.swap_remove(at as usize);
        self.unused += usize::from(gone.len);
        self.release_job(gone.job);
        self.nodes.release(gone.node);
        // The last pod moved into `at`: point its slot there.
        let from = u32::try_from(self.pods.len()).unwrap_or(u32::MAX);
        if at < from {
            let moved = self.hash_at(at);
            match self.index.get_mut(&moved) {
                Some(slot) if *slot == from => *slot = at,
                _ => {
                    if let Some(c) = self.collided.iter_mut().find(|c| **c == from) {
                        *c = at;
                    }
                }
            }
        }
        self.tidy();
    }

    /// Records `pod` as it now is: kept while it runs and names a job, dropped otherwise.
    /// `steered`: it carries the decision annotation, so its owner names its job too.
    pub fn update(&mut self, pod: &Pod, deleted: bool, steered: bool) {
        let meta = &pod.metadata;
        let namespace = meta.namespace.as_deref().unwrap_or_default();
        let name = meta.name.as_deref().unwrap_or_default();
        let hash = self.hash(namespace, [name.as_bytes(), &[]]);
        let at = self.find(hash, namespace, name);
        let running = pod
            .status
            .as_ref()
            .and_then(|s| s.phase.as_deref())
            .is_some_and(|p| p == "Running");
        let taskmanager = meta
            .labels
            .as_ref()
            .and_then(|l| l.get(COMPONENT_LABEL))
            .is_some_and(|c| c == TASKMANAGER);
        if deleted || !running || !(taskmanager || steered) {
            if let Some(at) = at {
                self.remove(hash, at);
            }
            return;
        }
        let shape = JobShape::of(pod, steered);
        let (job, first) = self.jobs.hold(&shape, || Arc::new(shape.clone()));
        if first {
            if self.bases.len() <= job as usize {
                self.bases.resize(job as usize + 1, Box::default());
            }
            self.bases[job as usize] = name.into();
        }
        let node = match pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .filter(|n| !n.is_empty())
        {
            Some(node) => self.nodes.hold(node, || Arc::from(node)).0,
            None => NO_NODE,
        };
        let since = Since::of(started(pod));
        let kept = match at.and_then(|at| Some((at, *self.pods.get(at as usize)?))) {
            // Its name is kept against its job's base name: kept anew for another job.
            Some((_, known)) if known.job != job => self.keep_name(job, name),
            Some((_, known)) => Some((known.at, known.len, known.prefix)),
            None => self.keep_name(job, name),
        };
        let Some((name_at, len, prefix)) = kept else {
            // Beyond what a pod's name can be: not kept.
            self.release_job(job);
            self.nodes.release(node);
            if let Some(at) = at {
                self.remove(hash, at);
            }
            return;
        };
        let now = RunningPod {
            since,
            job,
            node,
            at: name_at,
            len,
            prefix,
        };
        if let Some(at) = at
            && let Some(known) = self.pods.get_mut(at as usize)
        {
            let was = std::mem::replace(known, now);
            if was.at != name_at {
                self.unused += usize::from(was.len);
            }
            // Held anew above before these are released: an unchanged job keeps its number.
            self.release_job(was.job);
            self.nodes.release(was.node);
            self.tidy();
            return;
        }
        let Ok(at) = u32::try_from(self.pods.len()) else {
            self.unused += usize::from(len);
            self.release_job(job);
            self.nodes.release(node);
            return;
        };
        self.pods.push(now);
        match self.index.entry(hash) {
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(at);
            }
            std::collections::hash_map::Entry::Occupied(_) => self.collided.push(at),
        }
    }

    /// Every running pod with a node and a job, sorted by namespace and name.
    pub(crate) fn placed(&self) -> Vec<PlacedPod> {
        // Each job's key once, not once per pod.
        let keys: Vec<Option<JobKey>> = self
            .jobs
            .by_number()
            .map(|shape| {
                let shape = shape?;
                JobKey::of(&shape.namespace, &shape.labels(), shape.owner.as_deref())
            })
            .collect();
        let mut placed: Vec<PlacedPod> = self
            .pods
            .iter()
            .filter_map(|known| {
                let shape = self.jobs.get(known.job)?;
                Some(PlacedPod {
                    job: keys.get(known.job as usize)?.clone()?,
                    namespace: shape.namespace.to_string(),
                    pod: self.name_of(known).concat(),
                    node: self.nodes.get(known.node)?.to_string(),
                    steered: shape.steered,
                })
            })
            .collect();
        placed.sort();
        placed
    }

    pub fn len(&self) -> usize {
        self.pods.len()
    }

    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.pods.is_empty()
    }

    /// Gives each pod reading of `snapshot` its job and how long it had been running; readings
    /// of pods not known running here are dropped (finished, not a TaskManager, or unknown).
    pub fn label(&self, snapshot: &mut LoadSnapshot) {
        let taken_at = snapshot.taken_at.unwrap_or_else(SystemTime::now);
        snapshot.pods.retain_mut(|reading| {
            let hash = self.hash(&reading.namespace, [reading.pod.as_bytes(), &[]]);
            let Some(known) = self
                .find(hash, &reading.namespace, &reading.pod)
                .and_then(|at| self.pods.get(at as usize))
            else {
                return false;
            };
            let Some(shape) = self.jobs.get(known.job) else {
                return false;
            };
            reading.labels = shape.labels();
            reading.owner = shape.owner.as_deref().map(str::to_string);
            reading.running_secs = known.since.get().map(|since| {
                taken_at
                    .duration_since(since)
                    .unwrap_or(Duration::ZERO)
                    .as_secs_f64()
            });
            true
        });
    }
}

/// When the pod's containers last started: the latest `running.startedAt` (a restart resets
/// the rate window), else the pod's start time.
pub(crate) fn started(pod: &Pod) -> Option<SystemTime> {
    let status = pod.status.as_ref()?;
    status
        .container_statuses
        .iter()
        .flatten()
        .filter_map(|c| c.state.as_ref()?.running.as_ref()?.started_at.as_ref())
        .map(|t| SystemTime::from(t.0))
        .max()
        .or_else(|| status.start_time.as_ref().map(|t| SystemTime::from(t.0)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::PodReading;
    use std::time::UNIX_EPOCH;

    fn pod(name: &str, labels: serde_json::Value, phase: &str, started: &str) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"namespace": "flink", "name": name, "labels": labels,
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                             "name": "jm", "uid": "owner-1", "controller": true}]},
            "spec": {"nodeName": format!("node-of-{name}"), "containers": []},
            "status": {"phase": phase, "startTime": "2026-11-23T09:00:00Z",
                       "containerStatuses": [{"name": "main", "image": "flink", "imageID": "",
                           "ready": true, "restartCount": 1,
                           "state": {"running": {"startedAt": started}}}]}
        }))
        .expect("pod")
    }

    fn reading(name: &str) -> PodReading {
        PodReading {
            namespace: "flink".into(),
            pod: name.into(),
            cpu_cores: 1.0,
            network_bytes_per_second: None,
            labels: BTreeMap::new(),
            owner: None,
            running_secs: None,
            node: None,
            steered: false,
        }
    }

    #[test]
    fn keeps_running_taskmanagers_and_labels_their_readings() {
        let tm = serde_json::json!({"app": "orders", "component": "taskmanager", "x": "y"});
        let mut running = RunningPods::default();
        running.update(
            &pod("tm-1", tm.clone(), "Running", "2026-11-23T09:50:00Z"),
            false,
            false,
        );
        running.update(
            &pod("tm-2", tm.clone(), "Pending", "2026-11-23T09:50:00Z"),
            false,
            false,
        );
        let other = serde_json::json!({"app": "web"});
        running.update(
            &pod("web-1", other.clone(), "Running", "2026-11-23T09:00:00Z"),
            false,
            false,
        );
        // A steered pod without Flink's labels: its owner names its job.
        running.update(
            &pod("steered", other, "Running", "2026-11-23T09:00:00Z"),
            false,
            true,
        );
        assert_eq!(running.len(), 2);
        let placed = running.placed();
        let summary: Vec<(&str, &str, String, bool)> = placed
            .iter()
            .map(|p| {
                (
                    p.pod.as_str(),
                    p.node.as_str(),
                    p.job.to_string(),
                    p.steered,
                )
            })
            .collect();
        assert_eq!(
            summary,
            [
                (
                    "steered",
                    "node-of-steered",
                    "flink/owner=owner-1".into(),
                    true
                ),
                ("tm-1", "node-of-tm-1", "flink/app=orders".into(), false),
            ]
        );
        assert!(placed.iter().all(|p| p.namespace == "flink"));

        let mut snapshot = LoadSnapshot {
            window_samples: Default::default(),
            taken_at: humantime::parse_rfc3339("2026-11-23T10:00:00Z").ok(),
            nodes: Vec::new(),
            pods: ["tm-1", "tm-2", "web-1", "steered"].map(reading).to_vec(),
        };
        running.label(&mut snapshot);
        let names: Vec<&str> = snapshot.pods.iter().map(|p| p.pod.as_str()).collect();
        assert_eq!(names, ["tm-1", "steered"]);
        let tm1 = &snapshot.pods[0];
        // The container restarted at 09:50: ten minutes of running, not an hour.
        assert_eq!(tm1.running_secs, Some(600.0));
        assert_eq!(
            tm1.job().map(|j| j.to_string()),
            Some("flink/app=orders".into())
        );
        assert_eq!(
            snapshot.pods[1].job().map(|j| j.to_string()),
            Some("flink/owner=owner-1".into())
        );

        // Finished or deleted: gone.
        running.update(
            &pod("tm-1", tm.clone(), "Succeeded", "2026-11-23T09:50:00Z"),
            false,
            false,
        );
        running.update(
            &pod("steered", tm, "Running", "2026-11-23T09:00:00Z"),
            true,
            true,
        );
        assert!(running.is_empty());
    }

    /// A pod as the reference keeps it: where, its start, its job labels and owner.
    type RefPod = (
        PlacedPod,
        Option<SystemTime>,
        BTreeMap<String, String>,
        Option<String>,
    );

    /// The straightforward keeping this one replaced: one entry per pod, by `namespace/name`.
    #[derive(Default)]
    struct Reference {
        pods: std::collections::HashMap<String, RefPod>,
    }

    impl Reference {
        fn update(&mut self, pod: &Pod, deleted: bool, steered: bool) {
            let meta = &pod.metadata;
            let (namespace, name) = (
                meta.namespace.clone().unwrap_or_default(),
                meta.name.clone().unwrap_or_default(),
            );
            let key = format!("{namespace}/{name}");
            let running = pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
            let labels = meta.labels.clone().unwrap_or_default();
            let taskmanager = labels
                .get(COMPONENT_LABEL)
                .is_some_and(|c| c == TASKMANAGER);
            if deleted || !running || !(taskmanager || steered) {
                self.pods.remove(&key);
                return;
            }
            let labels = jobs::job_labels(&labels);
            let owner = jobs::owner_uid(pod).map(str::to_string);
            let placed = PlacedPod {
                job: JobKey::of(&namespace, &labels, owner.as_deref()).unwrap_or(JobKey {
                    namespace: String::new(),
                    by: jobs::JobBy::App(String::new()),
                }),
                namespace,
                pod: name,
                node: pod
                    .spec
                    .as_ref()
                    .and_then(|s| s.node_name.clone())
                    .unwrap_or_default(),
                steered,
            };
            self.pods.insert(key, (placed, started(pod), labels, owner));
        }

        fn placed(&self) -> Vec<PlacedPod> {
            let mut placed: Vec<PlacedPod> = self
                .pods
                .values()
                .filter(|(p, _, labels, owner)| {
                    !p.node.is_empty()
                        && JobKey::of(&p.namespace, labels, owner.as_deref()).is_some()
                })
                .map(|(p, ..)| p.clone())
                .collect();
            placed.sort();
            placed
        }
    }

    /// Names sharing starts, some cut inside a character (`é` and `è` share their first byte),
    /// and one never seen.
    const NAMES: [&str; 6] = ["pod-0", "pod-1", "pod-\u{e9}", "pod-\u{e8}", "p", "pod-2"];

    /// One pod as the watch may see it: `seed` picks its namespace, name, labels, owner, node,
    /// phase and start.
    fn varied_pod(seed: u32) -> Pod {
        let pick = |shift: u32, n: u32| (seed >> shift) % n;
        let labels = match pick(6, 4) {
            0 => serde_json::json!({"app": "a", "component": "taskmanager"}),
            1 => serde_json::json!({"app": "b", "component": "taskmanager", "x": "y"}),
            2 => serde_json::json!({"app": "a", "component": "jobmanager"}),
            _ => serde_json::json!({"component": "taskmanager"}),
        };
        let owners = if pick(8, 3) == 0 {
            serde_json::json!([])
        } else {
            serde_json::json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "o",
                "uid": format!("owner-{}", pick(8, 3)), "controller": true}])
        };
        let node = match pick(10, 4) {
            0 => serde_json::json!(null),
            1 => serde_json::json!(""),
            n => serde_json::json!(format!("node-{n}")),
        };
        let phase = ["Running", "Running", "Pending", "Succeeded"][pick(12, 4) as usize];
        serde_json::from_value(serde_json::json!({
            "metadata": {"namespace": format!("ns-{}", pick(0, 2)),
                         "name": NAMES[pick(1, 5) as usize],
                         "labels": labels, "ownerReferences": owners},
            "spec": {"nodeName": node, "containers": []},
            "status": {"phase": phase,
                       "startTime": format!("2026-11-23T09:0{}:00Z", pick(14, 10))}
        }))
        .expect("pod")
    }

    #[test]
    fn start_times_survive_their_compact_form() {
        let epoch = UNIX_EPOCH;
        for time in [
            None,
            Some(epoch),
            Some(epoch + Duration::new(1_795_000_000, 123_456_789)),
            Some(epoch - Duration::new(5, 300_000_000)),
            Some(epoch - Duration::new(7, 0)),
        ] {
            assert_eq!(Since::of(time).get(), time, "{time:?}");
        }
    }

    #[test]
    fn unused_name_bytes_are_reclaimed() {
        let mut running = RunningPods::default();
        let name = |i: usize| format!("{i:03}-{}", "x".repeat(100));
        let tm = |i: usize| {
            let mut p = pod(
                "x",
                serde_json::json!({"app": "a", "component": "taskmanager"}),
                "Running",
                "2026-11-23T09:50:00Z",
            );
            p.metadata.name = Some(name(i));
            p
        };
        for i in 0..200 {
            running.update(&tm(i), false, false);
        }
        for i in 0..150 {
            running.update(&tm(i), true, false);
        }
        // 20 KiB once; at most twice what the 50 left use, unused bytes included.
        assert!(
            running.names.len() <= 2 * 50 * 104,
            "{}",
            running.names.len()
        );
        let names: Vec<String> = running.placed().into_iter().map(|p| p.pod).collect();
        assert_eq!(names, (150..200).map(name).collect::<Vec<_>>());
    }

    proptest::proptest! {
        /// Random watch events, with real hashes and with every pod colliding: the same pods,
        /// jobs, nodes and readings as the straightforward keeping.
        #[test]
        fn matches_the_straightforward_keeping(
            events in proptest::collection::vec((0u32..1 << 16, 0u8..8), 1..80),
            collide_all: bool,
        ) {
            let mut running = RunningPods { collide_all, ..RunningPods::default() };
            let mut reference = Reference::default();
            for (seed, how) in events {
                let pod = varied_pod(seed);
                let (deleted, steered) = (how == 0, how % 3 == 1);
                running.update(&pod, deleted, steered);
                reference.update(&pod, deleted, steered);
                proptest::prop_assert_eq!(running.len(), reference.pods.len());
                proptest::prop_assert_eq!(running.placed(), reference.placed());
            }
            let names: Vec<(String, String)> = (0..2)
                .flat_map(|ns| {
                    NAMES
                        .map(|p| (format!("ns-{ns}"), p.to_string()))
                })
                .collect();
            let mut snapshot = LoadSnapshot {
                window_samples: Default::default(),
                taken_at: humantime::parse_rfc3339("2026-11-23T10:00:00Z").ok(),
                nodes: Vec::new(),
                pods: names
                    .iter()
                    .map(|(ns, p)| PodReading { namespace: ns.clone(), ..reading(p) })
                    .collect(),
            };
            running.label(&mut snapshot);
            let labelled: Vec<_> = snapshot
                .pods
                .iter()
                .map(|r| (r.namespace.clone(), r.pod.clone(), r.labels.clone(), r.owner.clone(), r.running_secs))
                .collect();
            let taken_at = snapshot.taken_at.unwrap_or(SystemTime::UNIX_EPOCH);
            let expected: Vec<_> = names
                .iter()
                .filter_map(|(ns, p)| {
                    let (_, since, labels, owner) = reference.pods.get(&format!("{ns}/{p}"))?;
                    let secs = since.map(|s| taken_at.duration_since(s).unwrap_or(Duration::ZERO).as_secs_f64());
                    Some((ns.clone(), p.clone(), labels.clone(), owner.clone(), secs))
                })
                .collect();
            proptest::prop_assert_eq!(labelled, expected);
            // Everything gone: nothing shared is left behind.
            for ns in 0..2 {
                for p in 0..5 {
                    let gone = varied_pod(ns | (p << 1));
                    running.update(&gone, true, false);
                }
            }
            proptest::prop_assert!(running.is_empty());
            proptest::prop_assert!(running.index.is_empty() && running.collided.is_empty());
            proptest::prop_assert!(running.jobs.is_empty() && running.nodes.is_empty());
        }
    }
}
