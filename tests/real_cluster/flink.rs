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
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Service};
use kube::Api;
use kube::api::ListParams;
use kube::runtime::watcher;

use crate::fixture::{Cluster, FLINK, Setup, decision, landing_in_order, preferred, serial};
use crate::support::kube::objects::annotation;
use crate::support::kube::webhook::{repo_path, sum};

const NODES: usize = 40;
const FIRST: usize = 20;
const RESCALED: usize = 30;
/// Flink's `kubernetes.cluster-id`: the Deployment's name and the pods' `app` label.
const CLUSTER_ID: &str = "steer";
/// Short, so that Flink replaces its first pods while the test runs.
const REG_TIMEOUT: &str = "20 s";
const REVIEWS: &str = "placement_webhook_reviews_total";
const WEBHOOK: &str = "taskmanagers.placement-webhook.io";

/// The tools tests/flink runs with: `false` (skipped) outside CI when one is missing; under
/// `CI=true` the test fails, as for the control plane's binaries.
fn prerequisites() -> bool {
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
    if failed.is_empty() {
        return true;
    }
    let in_ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
    assert!(
        !in_ci,
        "tests/flink needs a JDK (17+), Maven, curl, python3 and `unshare -m` (root); these \
         failed: {} (.ci/run installs maven and default-jdk-headless)",
        failed.join(", ")
    );
    eprintln!(
        "SKIPPED: tests/flink needs these to succeed: {}",
        failed.join(", ")
    );
    false
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

/// (pods seen, pods not being deleted).
fn counts(seen: &Seen) -> (usize, usize) {
    let seen = seen.lock().expect("seen");
    (seen.len(), seen.values().filter(|(_, gone)| !gone).count())
}

/// Waits until `check` holds of (seen, live), `limit` at most.
async fn wait_pods(
    what: &str,
    seen: &Seen,
    flink: &Flink,
    limit: Duration,
    check: impl Fn(usize, usize) -> bool,
) {
    let started = Instant::now();
    loop {
        let (all, live) = counts(seen);
        if check(all, live) {
            return;
        }
        assert!(
            started.elapsed() < limit,
            "{what} after {limit:?}: {all} TaskManager pods seen, {live} live\n--- jm.log\n{}",
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

/// The pod names of the JobManager log's lines with `before` NAME `after`.
fn logged_pods(log: &str, before: &str, after: &str) -> BTreeSet<String> {
    log.lines()
        .filter_map(|line| {
            let (_, rest) = line.split_once(before)?;
            let (name, _) = rest.split_once(after)?;
            Some(name.to_string())
        })
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flinks_own_taskmanagers_are_steered_and_a_rescale_is_a_second_burst() {
    let _serial = serial().await;
    if !prerequisites() {
        return;
    }
    let test_started = Instant::now();
    let mut setup = Setup::nodes(NODES);
    setup.replicas = 2;
    let Some(cluster) = Cluster::start(setup).await else {
        return;
    };
    // The kubelet of every node: Flink starts a pod's registration timeout once it is
    // scheduled, and kwok removes the pods Flink deletes.
    let mut kwok = cluster.plane.spawn_kwok();
    let (seen, watch) = watch_taskmanagers(&cluster);
    let flink = Flink::new(
        &cluster.plane.admin_kubeconfig(),
        cluster.plane.dir.path().join("flink"),
    );

    let started = Instant::now();
    flink.run(&["up"]);
    let up = started.elapsed();

    let started = Instant::now();
    flink.run(&["submit", &FIRST.to_string()]);
    wait_pods(
        "the job's TaskManager pods never all existed",
        &seen,
        &flink,
        Duration::from_secs(120),
        |_, live| live >= FIRST,
    )
    .await;
    let first = started.elapsed();
    let before_rescale = counts(&seen).0;

    let started = Instant::now();
    flink.run(&["rescale", &RESCALED.to_string()]);
    wait_pods(
        "the rescale's TaskManager pods never all existed",
        &seen,
        &flink,
        Duration::from_secs(120),
        |_, live| live >= RESCALED,
    )
    .await;
    let second = started.elapsed();
    // Then Flink's own churn: pods past their registration timeout deleted and replaced.
    wait_pods(
        "Flink never replaced a TaskManager pod",
        &seen,
        &flink,
        Duration::from_secs(90),
        |all, _| all > RESCALED,
    )
    .await;

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
    kwok.assert_running();

    // Every pod Flink asked for was created: none refused by the apiserver (Flink logs each
    // failed create), each created one watched.
    let requested = logged_pods(&jm_log, "Creating new TaskManager pod with name ", " ");
    let created = logged_pods(&jm_log, "] - Pod ", " is created.");
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
    // webhook; the apiserver called it without a failure.
    let reviews = cluster.metric_sum(REVIEWS, &[]).await;
    let patched = cluster.metric_sum(REVIEWS, &[("outcome", "patched")]).await;
    let asked = requested.union(&seen.keys().cloned().collect()).count();
    assert!(
        reviews >= seen.len() as f64 && reviews <= asked as f64,
        "{reviews} reviews for {} pods created of {asked} requested",
        seen.len()
    );
    assert_eq!(patched, reviews, "reviews not patched");
    let apiserver = cluster.plane.metrics();
    for metric in [
        "apiserver_admission_webhook_fail_open_count",
        "apiserver_admission_webhook_rejection_count",
    ] {
        assert_eq!(
            sum(&apiserver, metric, &[("name", WEBHOOK)]),
            0.0,
            "{metric}"
        );
    }

    // What Flink's client created for the JobManager carries nothing of the webhook.
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
         Services {service_names:?}"
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
    println!("  test time: {:.1} s", test_started.elapsed().as_secs_f64());
}
