//! Real Apache Flink creating its TaskManager pods (tests/flink): Flink's own Kubernetes client
//! deploys a session cluster, its JobManager runs as a local process, and its resource manager
//! creates the pods through the apiserver, from a user's pod template, against the webhook
//! installed with two replicas, kube-scheduler and kwok. TaskManagers never register (no
//! container runs), so Flink replaces each once its registration timeout passes: the churn a
//! struggling job makes. A job of parallelism 20 is one burst; raising its upper bound to 30
//! (adaptive scheduler) is a second.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Service};
use kube::Api;
use kube::api::ListParams;
use kube::runtime::watcher;

use crate::fixture::{
    Cluster, FLINK, Setup, decision, landing_in_order, preferred, serial, wait_for_or,
};
use crate::living::{
    Inflight, NodeUse, PodUse, above_bound, busy_fraction, deciding_inflight, estimates_by_pod,
    hottest_landing, readings, shown_by_pod_at, wait_settled, water_filling, with_background,
};
use crate::support::kube::objects::{NodeSpec, annotation};
use crate::support::kube::webhook::{repo_path, sum};
use crate::support::rng::Rng;

const NODES: usize = 40;
const FIRST: usize = 20;
const RESCALED: usize = 30;
/// Prometheus scrapes kwok this often (seconds); the template's `placement-test/scrape-seconds`.
const SCRAPE: u32 = 5;
/// The webhooks' rate window and a sibling's `min_running`.
const WINDOW: u64 = 20;
/// What a TaskManager pod requests: Flink's `kubernetes.taskmanager.cpu.amount` and the
/// template's sidecar.
const TM_REQUESTS: f64 = 2.05;
/// What a running TaskManager uses: the template's `placement-test/cpu-cores`. The size a
/// placement row counts in.
const TM_USES: f64 = 1.5;
/// A node at or above this busy fraction is busy (the shipped `placement.hot.cpu`).
const BUSY: f64 = 0.85;
/// Flink's `kubernetes.cluster-id`: the Deployment's name and the pods' `app` label.
const CLUSTER_ID: &str = "steer";
/// Short, so that Flink replaces its first pods while the test runs; long enough that the
/// first burst's TaskManagers run past `min_running` before the rescale, as siblings.
const REG_TIMEOUT: &str = "60 s";
const REVIEWS: &str = "placement_webhook_reviews_total";
const FORWARDS: &str = "placement_webhook_forwarded_reviews_total";
const WEBHOOK: &str = "taskmanagers.placement-webhook.io";
/// The do-nothing webhook: its registration and its one hook.
const NOOP: &str = "placement-webhook-noop";
const NOOP_HOOK: &str = "noop.placement-webhook.io";

/// The tools tests/flink runs with; a missing one fails the test, naming what provides it.
fn prerequisites() {
    let checks: [(&str, &[&str]); 5] = [
        ("java", &["-version"]),
        ("mvn", &["-v"]),
        ("curl", &["--version"]),
        ("python3", &["--version"]),
        // Flink reads the TaskManager pod template only from /opt/flink/pod-template: the
        // JobManager runs in a private mount namespace with a tmpfs there (needs root).
        ("unshare", &["-m", "--propagation", "private", "true"]),
    ];
    let failed: Vec<String> = checks
        .iter()
        .filter(|(program, args)| {
            !Command::new(program)
                .args(*args)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        })
        .map(|(program, args)| format!("`{program} {}`", args.join(" ")))
        .collect();
    assert!(
        failed.is_empty(),
        "tests/flink needs a JDK (17+), Maven, curl, python3 and `unshare -m` (root); these \
         failed: {} (a JDK and Maven: `apt-get install default-jdk-headless maven`; \
         `unshare -m`: run as root)",
        failed.join(", ")
    );
}

/// tests/flink/run-jobmanager.sh against the test cluster; `down` when dropped, so that no
/// JobManager outlives a failing test.
struct Flink {
    script: PathBuf,
    run: PathBuf,
    envs: Vec<(&'static str, String)>,
}

impl Flink {
    fn new(kubeconfig: &Path, run: PathBuf) -> Flink {
        Flink {
            script: repo_path("tests/flink/run-jobmanager.sh"),
            envs: vec![
                ("KUBECONFIG", kubeconfig.display().to_string()),
                ("FLINK_NAMESPACE", FLINK.to_string()),
                ("CLUSTER_ID", CLUSTER_ID.to_string()),
                ("RUN_DIR", run.display().to_string()),
                ("SCHEDULER", "adaptive".to_string()),
                ("REG_TIMEOUT", REG_TIMEOUT.to_string()),
            ],
            run,
        }
    }

    /// Runs the script with `args` (blocking: a JobManager starts in tens of seconds); its
    /// output, or a panic with it and the end of the JobManager's log.
    fn run(&self, args: &[&str]) -> String {
        let out = tokio::task::block_in_place(|| {
            Command::new(&self.script)
                .args(args)
                .envs(self.envs.iter().map(|(k, v)| (k, v)))
                .stdin(Stdio::null())
                .output()
        })
        .unwrap_or_else(|e| panic!("run {}: {e}", self.script.display()));
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            out.status.success(),
            "run-jobmanager.sh {args:?}: {}\n{text}\n--- jm.log\n{}",
            out.status,
            self.log_tail(40)
        );
        text
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.run.join("jm.log")).unwrap_or_default()
    }

    fn log_tail(&self, lines: usize) -> String {
        let log = self.log();
        let all: Vec<&str> = log.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }
}

impl Drop for Flink {
    fn drop(&mut self) {
        let _ = Command::new(&self.script)
            .arg("down")
            .envs(self.envs.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// Every TaskManager pod of the cluster the watch has seen, in its last version seen, and
/// whether it is being deleted or gone.
type Seen = Arc<Mutex<BTreeMap<String, (Pod, bool)>>>;

fn watch_taskmanagers(cluster: &Cluster) -> (Seen, tokio::task::JoinHandle<()>) {
    let seen: Seen = Arc::default();
    let api = Api::<Pod>::namespaced(cluster.admin.clone(), FLINK);
    let config =
        watcher::Config::default().labels(&format!("app={CLUSTER_ID},component=taskmanager"));
    let record = seen.clone();
    let task = tokio::spawn(async move {
        let mut events = watcher(api, config).boxed();
        while let Some(event) = events.next().await {
            let (pod, gone) = match event {
                Ok(watcher::Event::Apply(pod) | watcher::Event::InitApply(pod)) => {
                    let deleting = pod.metadata.deletion_timestamp.is_some();
                    (pod, deleting)
                }
                Ok(watcher::Event::Delete(pod)) => (pod, true),
                _ => continue,
            };
            let name = pod.metadata.name.clone().unwrap_or_default();
            record.lock().expect("seen").insert(name, (pod, gone));
        }
    });
    (seen, task)
}

/// The JobManager's pod, made from the Deployment Flink's client created by its ReplicaSet
/// (the controller-manager's controllers), once kwok runs it: 60 s at most.
async fn jobmanager_pod(cluster: &Cluster) -> Pod {
    let api = Api::<Pod>::namespaced(cluster.admin.clone(), FLINK);
    let selector = ListParams::default().labels(&format!("app={CLUSTER_ID},component=jobmanager"));
    let running = |p: &Pod| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
    wait_for_or(
        "no running JobManager pod from its Deployment",
        Duration::from_secs(60),
        || cluster.controller_manager_log_tail(30),
        || async {
            let pods = api.list(&selector).await.expect("list pods").items;
            match pods.as_slice() {
                [pod] if running(pod) => Some(pod.clone()),
                _ => None,
            }
        },
    )
    .await
}

/// Deletes the JobManager's Deployment, as Flink's documentation stops a session cluster, and
/// waits (60 s at most) until the garbage collector has taken every pod of the cluster: the
/// JobManager's and the TaskManagers', owned by the Deployment. How many were left to take.
async fn stop_session(cluster: &Cluster) -> usize {
    let pods = Api::<Pod>::namespaced(cluster.admin.clone(), FLINK);
    let selector = ListParams::default().labels(&format!("app={CLUSTER_ID}"));
    let before = pods.list(&selector).await.expect("list pods").items.len();
    Api::<Deployment>::namespaced(cluster.admin.clone(), FLINK)
        .delete(CLUSTER_ID, &kube::api::DeleteParams::default())
        .await
        .expect("delete the JobManager's Deployment");
    wait_for_or(
        "the session's pods left after its Deployment was deleted",
        Duration::from_secs(60),
        || cluster.controller_manager_log_tail(30),
        || async {
            let left = pods.list(&selector).await.expect("list pods").items;
            left.is_empty().then_some(())
        },
    )
    .await;
    before
}

/// The TaskManager pods the watch has seen so far.
#[derive(Debug, Clone, Copy)]
struct Counts {
    all: usize,
    /// Not being deleted.
    live: usize,
    /// Live, and bound to a node.
    bound: usize,
}

fn counts(seen: &Seen) -> Counts {
    let seen = seen.lock().expect("seen");
    let live = || seen.values().filter(|(_, gone)| !gone);
    Counts {
        all: seen.len(),
        live: live().count(),
        bound: live().filter(|(pod, _)| node_of(pod).is_some()).count(),
    }
}

/// The names of every pod seen so far.
fn names(seen: &Seen) -> BTreeSet<String> {
    seen.lock().expect("seen").keys().cloned().collect()
}

fn node_of(pod: &Pod) -> Option<&str> {
    pod.spec.as_ref()?.node_name.as_deref()
}

/// Waits until `check` holds of the counts, `limit` at most.
async fn wait_pods(
    what: &str,
    seen: &Seen,
    flink: &Flink,
    limit: Duration,
    check: impl Fn(Counts) -> bool,
) {
    let started = Instant::now();
    loop {
        let now = counts(seen);
        if check(now) {
            return;
        }
        assert!(
            started.elapsed() < limit,
            "{what} after {limit:?}: {now:?}\n--- jm.log\n{}",
            flink.log_tail(40)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The first node the decision note's landing names.
fn first_landing(note: &str) -> Option<String> {
    landing_in_order(note)
        .into_iter()
        .next()
        .map(|(node, _)| node)
}

/// What the JobManager logs around a pod's name (before, after) when it asks for the pod, and
/// once the apiserver has created it.
const REQUESTED: (&str, &str) = ("Creating new TaskManager pod with name ", " ");
const CREATED: (&str, &str) = ("] - Pod ", " is created.");

/// The JobManager log's lines with `before` NAME `after`: each NAME, with its line.
fn logged<'a>(
    log: &'a str,
    (before, after): (&'a str, &'a str),
) -> impl Iterator<Item = (&'a str, &'a str)> {
    log.lines().filter_map(move |line| {
        let (_, rest) = line.split_once(before)?;
        let (name, _) = rest.split_once(after)?;
        Some((name, line))
    })
}

/// The pod names of [`logged`].
fn logged_pods(log: &str, marker: (&str, &str)) -> BTreeSet<String> {
    logged(log, marker)
        .map(|(name, _)| name.to_string())
        .collect()
}

fn container_names(containers: Option<&Vec<k8s_openapi::api::core::v1::Container>>) -> Vec<&str> {
    containers
        .into_iter()
        .flatten()
        .map(|c| c.name.as_str())
        .collect()
}

/// What the user's template (tests/flink/conf/tm-pod-template.yaml) and Flink put in every
/// TaskManager pod, and the webhook must leave: a message for each thing missing.
fn kept_from_template(pod: &Pod) -> Vec<String> {
    let mut lost = Vec::new();
    let labels = pod.metadata.labels.clone().unwrap_or_default();
    for (key, value) in [
        ("app", CLUSTER_ID),
        ("component", "taskmanager"),
        ("type", "flink-native-kubernetes"),
        ("team", "data"),
    ] {
        if labels.get(key).map(String::as_str) != Some(value) {
            lost.push(format!("label {key}={value} (has {:?})", labels.get(key)));
        }
    }
    if annotation(pod, "example.com/owner") != Some("data-team") {
        lost.push("annotation example.com/owner".into());
    }
    let owned = pod
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.kind == "Deployment" && o.name == CLUSTER_ID);
    if !owned {
        lost.push(format!("ownerReference to Deployment {CLUSTER_ID}"));
    }
    let spec = pod.spec.as_ref();
    let containers = container_names(spec.map(|s| &s.containers));
    // Flink puts the template's other containers before its own.
    if containers != ["log-shipper", "flink-main-container"] {
        lost.push(format!(
            "containers log-shipper, flink-main-container (has {containers:?})"
        ));
    }
    let sidecar = spec
        .and_then(|s| s.containers.iter().find(|c| c.name == "log-shipper"))
        .and_then(|c| c.image.as_deref());
    if sidecar != Some("fluent/fluent-bit:3.0") {
        lost.push(format!("sidecar image (has {sidecar:?})"));
    }
    let init = container_names(spec.and_then(|s| s.init_containers.as_ref()));
    if init != ["fetch-artifacts"] {
        lost.push(format!("init container fetch-artifacts (has {init:?})"));
    }
    let volume = spec
        .and_then(|s| s.volumes.as_ref())
        .is_some_and(|v| v.iter().any(|v| v.name == "flink-logs"));
    if !volume {
        lost.push("volume flink-logs".into());
    }
    lost
}

/// A node of the living cluster: its cores and its background's busy fraction, which kwok
/// serves as the node's CPU and which is kept from the pods as reserved CPU.
struct TestNode {
    spec: NodeSpec,
    cores: f64,
    background: f64,
}

/// `NODES` nodes of 8-32 cores in three zones, busy as the day's pools are: a tenth hot
/// (0.85-0.98), a third warm, two fifths half busy, the rest cool. Seeded.
fn living_nodes() -> Vec<TestNode> {
    let mut rng = Rng(0xF1_1A2C);
    (0..NODES)
        .map(|i| {
            let cores = *rng.pick(&[8u32, 16, 16, 32]);
            let background = busy_fraction(&mut rng);
            let zone = format!("zone-{}", ["a", "b", "c"][i % 3]);
            let mut spec = NodeSpec::new(&format!("node-{i:03}"), &zone, cores);
            spec.internal_ip = Some(format!("10.9.0.{}", i + 1));
            with_background(&mut spec, f64::from(cores), background);
            TestNode {
                spec,
                cores: f64::from(cores),
                background,
            }
        })
        .collect()
}

/// The apiserver's timing of its calls to one webhook (its
/// `apiserver_admission_webhook_admission_duration_seconds`).
#[derive(Debug, Clone, Copy)]
struct Latency {
    calls: f64,
    mean_ms: f64,
    /// The upper bounds of the histogram buckets that hold the median and the 99th percentile.
    p50_ms: f64,
    p99_ms: f64,
}

fn webhook_latency(metrics: &str, webhook: &str) -> Latency {
    const HISTOGRAM: &str = "apiserver_admission_webhook_admission_duration_seconds";
    let labels = [("name", webhook), ("type", "admit")];
    let calls = sum(metrics, &format!("{HISTOGRAM}_count"), &labels);
    let seconds = sum(metrics, &format!("{HISTOGRAM}_sum"), &labels);
    // Cumulative counts by bucket bound, summed over the other labels.
    let mut buckets: BTreeMap<String, f64> = BTreeMap::new();
    for line in metrics.lines() {
        let Some(rest) = line.strip_prefix(&format!("{HISTOGRAM}_bucket{{")) else {
            continue;
        };
        if !labels
            .iter()
            .all(|(k, v)| rest.contains(&format!("{k}=\"{v}\"")))
        {
            continue;
        }
        let le = rest
            .split_once("le=\"")
            .and_then(|(_, r)| r.split_once('"'))
            .map(|(le, _)| le.to_string());
        let value = line.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok());
        if let (Some(le), Some(value)) = (le, value) {
            *buckets.entry(le).or_default() += value;
        }
    }
    let mut bounds: Vec<(f64, f64)> = buckets
        .into_iter()
        .map(|(le, n)| (le.parse().unwrap_or(f64::INFINITY), n))
        .collect();
    bounds.sort_by(|a, b| a.0.total_cmp(&b.0));
    let quantile = |q: f64| {
        bounds
            .iter()
            .find(|(_, n)| *n >= q * calls)
            .map_or(f64::NAN, |(le, _)| le * 1000.0)
    };
    Latency {
        calls,
        mean_ms: 1000.0 * seconds / calls.max(1.0),
        p50_ms: quantile(0.5),
        p99_ms: quantile(0.99),
    }
}

/// Milliseconds from Flink's "Creating new TaskManager pod" to its "Pod ... is created" for each
/// pod, read off the JobManager log's timestamps (`HH:mm:ss,SSS`), sorted.
fn flink_create_ms(log: &str) -> Vec<f64> {
    // The time is the first or second word (after a date, in Flink's default layout).
    let at = |line: &str| -> Option<f64> {
        let time = line
            .split(' ')
            .take(2)
            .find(|w| w.len() == 12 && w.as_bytes()[2] == b':')?;
        let (hms, ms) = time.split_once(',')?;
        let mut parts = hms.split(':').map(|p| p.parse::<f64>().ok());
        let (h, m, s) = (parts.next()??, parts.next()??, parts.next()??);
        Some(((h * 60.0 + m) * 60.0 + s) * 1000.0 + ms.parse::<f64>().ok()?)
    };
    let asked: BTreeMap<&str, f64> = logged(log, REQUESTED)
        .filter_map(|(name, line)| Some((name, at(line)?)))
        .collect();
    // Past midnight the clock wraps.
    let mut took: Vec<f64> = logged(log, CREATED)
        .filter_map(|(name, line)| Some((at(line)? - asked.get(name)?).rem_euclid(86_400_000.0)))
        .collect();
    took.sort_by(f64::total_cmp);
    took
}

/// The installed webhook's in-flight accounting at the deciding replica's last refresh, on
/// the node where each is largest, in cores: TaskManager load that neither the node's metrics
/// showed (each live pod's own series) nor the deciding replica charged; charged beyond what
/// the metrics missed (a deleted pod still charged, or an estimate above use); shown plus
/// charged beyond what the live TaskManagers carry, each its use or its estimate where that is
/// more (`over`: a double count, from the truth); and what the replica says it counts twice.
#[derive(Debug, Clone, Copy)]
struct Counted {
    nowhere: f64,
    beyond: f64,
    over: f64,
    twice: f64,
}

async fn counted(cluster: &Cluster, installed: usize, seen: &Seen) -> Counted {
    let replicas: Vec<usize> = (0..installed).collect();
    let Inflight {
        charged,
        twice,
        taken_at,
    } = deciding_inflight(cluster, &replicas, SystemTime::UNIX_EPOCH).await;
    let shown = shown_by_pod_at(cluster, FLINK, Duration::from_secs(WINDOW), taken_at).await;
    let estimates = estimates_by_pod(cluster, FLINK).await;
    // Per node: what the metrics miss of its live TaskManagers, less what is charged there;
    // and what is counted there beyond what they carry.
    let mut missed: BTreeMap<String, f64> = charged.iter().map(|(n, c)| (n.clone(), -c)).collect();
    let mut over: BTreeMap<String, f64> = charged.clone();
    for (name, (pod, gone)) in seen.lock().expect("seen").iter() {
        if let (false, Some(node)) = (*gone, node_of(pod)) {
            let seen = shown.get(name).copied().unwrap_or(0.0);
            *missed.entry(node.to_string()).or_default() += TM_USES - seen;
            let carried = TM_USES.max(estimates.get(name).copied().unwrap_or(0.0));
            *over.entry(node.to_string()).or_default() += seen - carried;
        }
    }
    Counted {
        nowhere: missed.values().copied().fold(0.0, f64::max),
        beyond: missed.values().map(|m| -m).fold(0.0, f64::max),
        over: over.values().copied().fold(0.0, f64::max),
        twice: twice.values().copied().fold(0.0, f64::max),
    }
}

/// One burst's placement, measured once its pods are bound.
struct Row {
    burst: &'static str,
    pods: usize,
    /// The hottest node the burst landed on, above water-filling, in TaskManagers of its size.
    above: f64,
    hottest: f64,
    bound: f64,
    hottest_node: String,
    /// Pods that landed on a node already busy.
    onto_busy: usize,
    /// Pods bound to the first node their decision named.
    on_first: usize,
    /// Pods whose load was estimated from running siblings.
    from_siblings: usize,
    /// Each node the burst landed on: its name, level before the burst (truth), pods landed.
    landings: Vec<(String, f64, usize)>,
}

/// The burst `members` (pod names) against water-filling it onto the nodes as really used:
/// background and every other live TaskManager (`seen`), each at its eventual use.
fn placement_row(
    burst: &'static str,
    nodes: &[TestNode],
    seen: &BTreeMap<String, (Pod, bool)>,
    members: &BTreeSet<String>,
) -> Row {
    let index: BTreeMap<&str, usize> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.spec.name.as_str(), i))
        .collect();
    let taskmanager = PodUse {
        used: TM_USES,
        requested: TM_REQUESTS,
    };
    let mut before: Vec<NodeUse> = nodes
        .iter()
        .map(|n| NodeUse {
            cores: n.cores,
            used: n.background * n.cores,
            requested: f64::from(n.spec.reserved_millicores) / 1000.0,
        })
        .collect();
    let mut landed = vec![0usize; nodes.len()];
    let (mut on_first, mut from_siblings) = (0, 0);
    for (name, (pod, gone)) in seen {
        if *gone {
            continue;
        }
        let node = node_of(pod).unwrap_or_else(|| panic!("{name} is not bound"));
        let i = index[node];
        if !members.contains(name) {
            before[i] = before[i].with(1, taskmanager);
            continue;
        }
        landed[i] += 1;
        let note = decision(pod).unwrap_or_default();
        if first_landing(note).as_deref() == Some(node) {
            on_first += 1;
        }
        if note.contains(" est=siblings:") {
            from_siblings += 1;
        }
    }
    let pods: usize = landed.iter().sum();
    let after: Vec<NodeUse> = before
        .iter()
        .zip(&landed)
        .map(|(node, k)| node.with(*k, taskmanager))
        .collect();
    let bound = water_filling(&before, &vec![taskmanager; pods]);
    let (above, hottest) = above_bound(&after, &landed, TM_USES, bound);
    let hottest_node = hottest_landing(&after, &landed).map_or_else(String::new, |i| {
        format!(
            "{} ({:.0} cores, background {:.2}, {} landed)",
            nodes[i].spec.name, nodes[i].cores, nodes[i].background, landed[i]
        )
    });
    let onto_busy = (0..nodes.len())
        .filter(|&i| before[i].level() >= BUSY)
        .map(|i| landed[i])
        .sum();
    let landings = (0..nodes.len())
        .filter(|&i| landed[i] > 0)
        .map(|i| (nodes[i].spec.name.clone(), before[i].level(), landed[i]))
        .collect();
    Row {
        landings,
        burst,
        pods,
        above,
        hottest,
        bound,
        hottest_node,
        onto_busy,
        on_first,
        from_siblings,
    }
}

fn print_rows(rows: &[Row]) {
    println!(
        "  {:<28} {:>5} {:>10} {:>8} {:>7} {:>9} {:>9} {:>9}  hottest landing node",
        "burst", "pods", "above TMs", "hottest", "bound", "onto busy", "on first", "siblings"
    );
    for r in rows {
        println!(
            "  {:<28} {:>5} {:>10.2} {:>8.3} {:>7.3} {:>9} {:>9} {:>9}  {}",
            r.burst,
            r.pods,
            r.above,
            r.hottest,
            r.bound,
            r.onto_busy,
            r.on_first,
            r.from_siblings,
            r.hottest_node
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flinks_own_taskmanagers_are_steered_and_a_rescale_is_a_second_burst() {
    let _serial = serial().await;
    prerequisites();
    let test_started = Instant::now();
    let nodes = living_nodes();
    let mut setup = Setup::nodes(0);
    setup.nodes = nodes
        .iter()
        .map(|n| (n.spec.clone(), n.background))
        .collect();
    setup.replicas = 2;
    // Real controllers for what Flink's client creates: the JobManager's Deployment makes its
    // pod (which the webhook must leave alone), and deleting the Deployment takes every object
    // it owns, the TaskManagers too.
    setup.controllers = vec![
        "deployment-controller",
        "replicaset-controller",
        "garbage-collector-controller",
    ];
    // A living cluster: kwok runs the pods (Flink starts a pod's registration timeout once it
    // is scheduled, and kwok removes the pods Flink deletes) and serves their CPU, which a real
    // Prometheus scrapes and the webhook reads with the shipped queries.
    setup.living = Some(SCRAPE);
    setup.extra_config = format!(
        "prometheus: {{url: '{{prometheus}}', refresh_interval: 5s, query_timeout: 4s, \
         rate_window: {WINDOW}s, node_mapping: {{by: uname}}}}\n\
         inflight: {{handover: {{rule: evidence, scrape_interval: {SCRAPE}s}}, \
         estimate: {{min_running: {WINDOW}s}}}}\n"
    );
    let mut cluster = Cluster::start(setup).await;
    // A do-nothing webhook beside it, called for the same pods: the same server answering
    // every review unchanged (its targets match no pod), so that the apiserver times both.
    let noop = cluster
        .start_second_webhook(
            NOOP,
            "targets: {match_labels: {placement-test/never: \"true\"}}\n\
             service: placement-webhook-noop\n",
            ("placement-test/noop", "on"),
        )
        .await;
    cluster.plane.kubectl(&[
        "patch",
        "mutatingwebhookconfiguration",
        NOOP,
        "--type=json",
        &format!(r#"-p=[{{"op":"replace","path":"/webhooks/0/name","value":"{NOOP_HOOK}"}}]"#),
    ]);
    cluster
        .plane
        .kubectl(&["label", "namespace", FLINK, "placement-test/noop=on"]);
    let expected: Vec<(String, f64)> = nodes
        .iter()
        .map(|n| (n.spec.name.clone(), n.background))
        .collect();
    wait_settled(&cluster, Duration::from_secs(WINDOW), &expected).await;
    let (seen, watch) = watch_taskmanagers(&cluster);
    let flink = Flink::new(
        &cluster.plane.admin_kubeconfig(),
        cluster.plane.dir.path().join("flink"),
    );
    let mut rows = Vec::new();

    let started = Instant::now();
    flink.run(&["up"]);
    let up = started.elapsed();
    let jobmanager = jobmanager_pod(&cluster).await;

    let started = Instant::now();
    flink.run(&["submit", &FIRST.to_string()]);
    wait_pods(
        "the job's TaskManager pods never all existed, bound",
        &seen,
        &flink,
        Duration::from_secs(120),
        |n| n.live >= FIRST && n.bound == n.live,
    )
    .await;
    let first = started.elapsed();
    let first_burst = names(&seen);
    let before_rescale = first_burst.len();
    rows.push(placement_row(
        "1: submit, parallelism 20",
        &nodes,
        &seen.lock().expect("seen"),
        &first_burst,
    ));

    // The first burst's TaskManagers run long enough to be measured (a rate window and two
    // scrapes past `min_running`): the rescale's pods are estimated from them.
    tokio::time::sleep(Duration::from_secs(WINDOW + 2 * u64::from(SCRAPE) + 5)).await;
    let at_rescale = counted(&cluster, noop, &seen).await;
    let started = Instant::now();
    flink.run(&["rescale", &RESCALED.to_string()]);
    wait_pods(
        "the rescale's TaskManager pods never all existed, bound",
        &seen,
        &flink,
        Duration::from_secs(120),
        |n| n.live >= RESCALED && n.bound == n.live,
    )
    .await;
    let second = started.elapsed();
    // What the metrics say as the rescale's pods start: the first burst's load, read.
    let read_at_end = readings(&cluster, Duration::from_secs(WINDOW))
        .await
        .unwrap_or_default();
    let second_burst: BTreeSet<String> = names(&seen).difference(&first_burst).cloned().collect();
    rows.push(placement_row(
        "2: rescale to 30",
        &nodes,
        &seen.lock().expect("seen"),
        &second_burst,
    ));
    let rescale_decisions: Vec<String> = {
        let seen = seen.lock().expect("seen");
        second_burst
            .iter()
            .filter_map(|name| {
                let (pod, _) = seen.get(name)?;
                Some(format!(
                    "{name} -> {}: {}",
                    node_of(pod).unwrap_or("-"),
                    decision(pod).unwrap_or("-")
                ))
            })
            .collect()
    };
    // Then Flink's own churn: pods past their registration timeout deleted and replaced.
    wait_pods(
        "Flink never replaced a TaskManager pod",
        &seen,
        &flink,
        Duration::from_secs(90),
        |n| n.all > RESCALED,
    )
    .await;

    // A refresh after the replacement: the charges follow Flink's deletes and creates.
    tokio::time::sleep(Duration::from_secs(2 * u64::from(SCRAPE))).await;
    let after_churn = counted(&cluster, noop, &seen).await;

    // Stopped before the count, so that Flink creates nothing the watch has not seen. Pods
    // watched until now had their request logged; while the JobManager shuts down its resource
    // manager may still create pods, with its logging already stopped.
    let before_stop: BTreeSet<String> = seen.lock().expect("seen").keys().cloned().collect();
    let log_path = flink.run.join("jm.log");
    drop(flink);
    let jm_log = std::fs::read_to_string(&log_path).expect("read the JobManager log");
    tokio::time::sleep(Duration::from_secs(2)).await;
    watch.abort();
    let seen = seen.lock().expect("seen").clone();
    if let Some(kwok) = cluster.kwok.as_mut() {
        kwok.assert_running();
    }

    // Every pod Flink asked for was created: none refused by the apiserver (Flink logs each
    // failed create), each created one watched.
    let requested = logged_pods(&jm_log, REQUESTED);
    let created = logged_pods(&jm_log, CREATED);
    let refused: Vec<&str> = jm_log
        .lines()
        .filter(|l| l.contains("Could not create pod"))
        .collect();
    assert!(refused.is_empty(), "pod creations refused:\n{refused:#?}");
    let unseen: Vec<&String> = created.iter().filter(|n| !seen.contains_key(*n)).collect();
    assert!(unseen.is_empty(), "created, never watched: {unseen:?}");
    let unrequested: Vec<&String> = before_stop
        .iter()
        .filter(|n| !requested.contains(*n))
        .collect();
    assert!(
        unrequested.is_empty(),
        "pods Flink did not log a request for: {unrequested:?}"
    );

    // Every one steered, and what the template and Flink put in kept.
    let mut unsteered = Vec::new();
    for (name, (pod, _)) in &seen {
        if decision(pod).is_none() || preferred(pod).is_empty() {
            unsteered.push(name.clone());
        }
        let lost = kept_from_template(pod);
        assert!(lost.is_empty(), "{name} lost {lost:?}");
    }
    assert!(
        unsteered.is_empty(),
        "not steered: {unsteered:?}\n{}",
        cluster.logs()
    );

    // Reviewed once each, and nothing else reviewed: the JobManager's objects never reached the
    // webhook; the apiserver called it without a failure. The apiserver's own count is the
    // calls; the replicas' review counts may exceed it by the forwards that fell back (a forward
    // that timed out after the decider answered is decided twice, once on each replica).
    let apiserver = cluster.plane.metrics();
    let calls = sum(
        &apiserver,
        "apiserver_admission_webhook_admission_duration_seconds_count",
        &[("name", WEBHOOK), ("type", "admit")],
    );
    // The JobManager's pod, made by its ReplicaSet, is not among them: the registration's
    // object selector keeps every pod but a TaskManager from the webhook.
    let asked = requested.union(&seen.keys().cloned().collect()).count();
    assert!(
        calls >= seen.len() as f64 && calls <= asked as f64,
        "the apiserver called the webhook {calls} times for {} pods created of {asked} requested",
        seen.len()
    );
    // The installed webhook's replicas: those before the do-nothing one.
    let installed: Vec<String> = cluster.metrics().await.into_iter().take(noop).collect();
    let installed_sum = |name: &str, labels: &[(&str, &str)]| -> f64 {
        installed.iter().map(|m| sum(m, name, labels)).sum()
    };
    let reviews = installed_sum(REVIEWS, &[]);
    let patched = installed_sum(REVIEWS, &[("outcome", "patched")]);
    let fell_back = installed_sum(FORWARDS, &[("result", "failed")]);
    assert!(
        reviews >= calls && reviews <= calls + fell_back,
        "{reviews} reviews counted by the replicas for {calls} calls, {fell_back} forwards failed"
    );
    assert_eq!(patched, reviews, "reviews not patched");
    for metric in [
        "apiserver_admission_webhook_fail_open_count",
        "apiserver_admission_webhook_rejection_count",
    ] {
        for hook in [WEBHOOK, NOOP_HOOK] {
            assert_eq!(
                sum(&apiserver, metric, &[("name", hook)]),
                0.0,
                "{metric} {hook}"
            );
        }
    }
    // Both webhooks were called for every create.
    let ours = webhook_latency(&apiserver, WEBHOOK);
    let nothing = webhook_latency(&apiserver, NOOP_HOOK);
    assert_eq!(ours.calls, nothing.calls, "calls to the two webhooks");
    let flink_ms = flink_create_ms(&jm_log);
    // The installed replicas' own time per review they answered (a forwarded review is timed
    // where it is decided): the decision's share of the apiserver's figure.
    let in_process_ms = 1000.0
        * installed_sum("placement_webhook_review_duration_seconds_sum", &[])
        / installed_sum("placement_webhook_review_duration_seconds_count", &[]).max(1.0);
    // The Service reaches the deciding replica only: no review takes a hop between replicas.
    let forwarded = installed_sum(FORWARDS, &[]);
    assert_eq!(forwarded, 0.0, "reviews forwarded between the replicas");

    // What Flink's client created for the JobManager, and the pod its Deployment made, carry
    // nothing of the webhook.
    let jobmanager: Pod = Api::<Pod>::namespaced(cluster.admin.clone(), FLINK)
        .get(jobmanager.metadata.name.as_deref().expect("a name"))
        .await
        .expect("the JobManager's pod");
    let selector = ListParams::default().labels(&format!("app={CLUSTER_ID}"));
    let deployments = Api::<Deployment>::namespaced(cluster.admin.clone(), FLINK)
        .list(&selector)
        .await
        .expect("list deployments")
        .items;
    let config_maps = Api::<ConfigMap>::namespaced(cluster.admin.clone(), FLINK)
        .list(&selector)
        .await
        .expect("list config maps")
        .items;
    let services = Api::<Service>::namespaced(cluster.admin.clone(), FLINK)
        .list(&selector)
        .await
        .expect("list services")
        .items;
    let names = |items: Vec<Option<String>>| {
        let mut names: Vec<String> = items.into_iter().flatten().collect();
        names.sort();
        names
    };
    let deployment_names = names(
        deployments
            .iter()
            .map(|d| d.metadata.name.clone())
            .collect(),
    );
    let config_map_names = names(
        config_maps
            .iter()
            .map(|c| c.metadata.name.clone())
            .collect(),
    );
    let service_names = names(services.iter().map(|s| s.metadata.name.clone()).collect());
    assert_eq!(deployment_names, [CLUSTER_ID]);
    assert_eq!(
        config_map_names,
        [
            format!("flink-config-{CLUSTER_ID}"),
            format!("pod-template-{CLUSTER_ID}")
        ]
    );
    assert_eq!(
        service_names,
        [CLUSTER_ID.to_string(), format!("{CLUSTER_ID}-rest")]
    );
    let touched: Vec<String> = deployments
        .iter()
        .map(|d| serde_json::to_string(d).expect("json"))
        .chain(
            config_maps
                .iter()
                .map(|c| serde_json::to_string(c).expect("json")),
        )
        .chain(
            services
                .iter()
                .map(|s| serde_json::to_string(s).expect("json")),
        )
        .chain([serde_json::to_string(&jobmanager).expect("json")])
        .filter(|text| text.contains("placement-webhook.io"))
        .collect();
    assert!(touched.is_empty(), "the webhook's mark on {touched:?}");
    let jm_affinity = deployments[0]
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .and_then(|s| s.affinity.as_ref());
    assert!(
        jm_affinity.is_none(),
        "the JobManager's pod template got affinity"
    );
    let jm_spec = jobmanager.spec.as_ref().expect("a spec");
    assert!(
        jm_spec.affinity.is_none()
            && jm_spec.scheduler_name.as_deref() == Some("default-scheduler"),
        "the JobManager's pod got affinity or another scheduler: {jm_spec:?}"
    );

    // Stopped as Flink's documentation says: the Deployment deleted, and the garbage collector
    // takes what it owns. The deciding replica's next refresh charges nothing.
    let stopping = SystemTime::now();
    let collected = stop_session(&cluster).await;
    let after_stop = deciding_inflight(&cluster, &[0, 1], stopping).await;
    let still_charged: f64 = after_stop.charged.values().sum();
    assert!(
        still_charged < 1e-6,
        "{still_charged:.2} cores charged after the session's pods were collected"
    );

    // Where the scheduler put them against where each decision said first.
    let bound: Vec<(&Pod, String)> = seen
        .values()
        .filter_map(|(pod, _)| Some((pod, pod.spec.as_ref()?.node_name.clone()?)))
        .collect();
    let on_first = bound
        .iter()
        .filter(|(pod, node)| decision(pod).and_then(first_landing).as_ref() == Some(node))
        .count();
    let replaced = seen.values().filter(|(_, gone)| *gone).count();
    let percent = |n: usize, of: usize| 100.0 * n as f64 / of.max(1) as f64;

    println!(
        "\nreal Flink 2.3 TaskManagers through the webhook ({NODES} nodes, 2 replicas, \
         kube-scheduler, kwok; adaptive scheduler, registration timeout {REG_TIMEOUT})"
    );
    println!(
        "  {:<52} {:>8.1} s",
        "JobManager up (mvn, Flink's client, local JM)",
        up.as_secs_f64()
    );
    println!(
        "  {:<52} {:>8.1} s",
        format!("burst 1: submit {FIRST} -> {FIRST} pods live"),
        first.as_secs_f64()
    );
    println!(
        "  {:<52} {:>8.1} s",
        format!("burst 2: rescale {RESCALED} -> {RESCALED} pods live"),
        second.as_secs_f64()
    );
    println!(
        "  {:<52} {:>10}",
        "pods created before the rescale", before_rescale
    );
    println!(
        "  {:<52} {:>10}",
        "pods Flink requested / created / watched",
        format!("{} / {} / {}", requested.len(), created.len(), seen.len())
    );
    println!("  {:<52} {:>10}", "refused", refused.len());
    println!(
        "  {:<52} {:>10}",
        "steered (decision + preferred affinity)",
        seen.len() - unsteered.len()
    );
    println!(
        "  {:<52} {:>10}",
        "deleted by Flink (registration timeout)", replaced
    );
    println!("  {:<52} {:>10}", "bound by kube-scheduler", bound.len());
    println!(
        "  {:<52} {:>10}",
        "bound to the decision's first node",
        format!("{on_first} ({:.0}%)", percent(on_first, bound.len()))
    );
    println!(
        "  {:<52} {:>10}",
        "JobManager objects with a webhook mark",
        touched.len()
    );
    println!(
        "  JobManager objects: Deployment {deployment_names:?}, ConfigMaps {config_map_names:?}, \
         Services {service_names:?}; its pod {} (not sent to the webhook, unchanged)",
        jobmanager.metadata.name.as_deref().unwrap_or("-")
    );
    println!(
        "  {:<52} {:>10}",
        "pods the garbage collector took with the Deployment", collected
    );
    if let Some((name, (pod, _))) = seen.iter().next() {
        let spec = pod.spec.as_ref();
        println!("one pod: {name}");
        println!(
            "  labels: {:?}",
            pod.metadata.labels.clone().unwrap_or_default()
        );
        for owner in pod.metadata.owner_references.iter().flatten() {
            println!(
                "  owner: {} {} (controller: {:?})",
                owner.kind, owner.name, owner.controller
            );
        }
        println!(
            "  containers: {:?}, init: {:?}, node: {:?}",
            container_names(spec.map(|s| &s.containers)),
            container_names(spec.and_then(|s| s.init_containers.as_ref())),
            spec.and_then(|s| s.node_name.as_deref())
        );
        println!("  decision: {}", decision(pod).unwrap_or("-"));
        println!(
            "  affinity: {}",
            serde_json::to_string(&spec.and_then(|s| s.affinity.as_ref())).expect("json")
        );
    }
    println!(
        "latency the apiserver measured per call: {:>6} calls, mean {:.1} ms, median <= {} ms, \
         p99 <= {} ms (the webhook); mean {:.1} ms, median <= {} ms, p99 <= {} ms (a do-nothing \
         webhook on the same server, same pods)",
        ours.calls,
        ours.mean_ms,
        ours.p50_ms,
        ours.p99_ms,
        nothing.mean_ms,
        nothing.p50_ms,
        nothing.p99_ms
    );
    println!(
        "  the webhook's mean call against the do-nothing webhook's: x{:.2}",
        ours.mean_ms / nothing.mean_ms
    );
    println!(
        "  the installed replicas' own time per review: mean {in_process_ms:.2} ms; \
         {forwarded} of {reviews} reviews forwarded (the Service reaches the deciding replica)"
    );
    let at = |q: f64| {
        flink_ms
            .get(((flink_ms.len() as f64 - 1.0) * q).round() as usize)
            .copied()
            .unwrap_or(f64::NAN)
    };
    println!(
        "Flink's pod creates (its log, request to created, both webhooks called): {} pods, \
         median {:.0} ms, p90 {:.0} ms, max {:.0} ms",
        flink_ms.len(),
        at(0.5),
        at(0.9),
        at(1.0)
    );
    println!(
        "placement of the bursts against water-filling them onto the nodes as used \
         (TaskManager = {TM_USES} cores used, {TM_REQUESTS} requested)"
    );
    print_rows(&rows);
    println!("in-flight accounting, on the worst node for each figure (cores):");
    for (when, c) in [
        ("at the rescale", at_rescale),
        ("after the churn", after_churn),
    ] {
        println!(
            "  {when:<16} counted nowhere {:.2}, charged beyond what the metrics miss {:.2}, \
             beyond what the pods carry (use or estimate) {:.2}, counted twice (ledger) {:.2}",
            c.nowhere, c.beyond, c.over, c.twice
        );
    }
    println!("the rescale's decisions:");
    for line in &rescale_decisions {
        println!("  {line}");
    }
    println!("  test time: {:.1} s", test_started.elapsed().as_secs_f64());

    // The charges follow the pods: at the rescale and after Flink's replacements, no node has
    // more than a TaskManager's load counted nowhere or counted twice, by the truth and by the
    // ledger.
    for (when, c) in [
        ("at the rescale", at_rescale),
        ("after the churn", after_churn),
    ] {
        assert!(
            c.nowhere <= TM_USES && c.over <= TM_USES && c.twice <= TM_USES,
            "{when}: {c:?} cores on the worst node"
        );
    }
    // Each burst within one TaskManager of the bound, every pod counted.
    for row in &rows {
        assert!(
            row.above <= 1.0,
            "burst {}: the hottest landing node ends {:.2} TaskManagers above the bound ({}); \
             where it landed (node, busy before it as really used, busy as read at the end, \
             pods): {:?}",
            row.burst,
            row.above,
            row.hottest_node,
            row.landings
                .iter()
                .map(|(node, level, pods)| format!(
                    "{node} {level:.3} {:.3} {pods}",
                    read_at_end.get(node).copied().unwrap_or(f64::NAN)
                ))
                .collect::<Vec<_>>()
        );
    }
    // The rescale's pods are charged what their running siblings use, not their request.
    let rescale = &rows[1];
    assert_eq!(
        rescale.from_siblings, rescale.pods,
        "rescale pods estimated from their siblings"
    );
}
