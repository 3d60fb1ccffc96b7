//! deploy/scheduler-profile's second scheduler as shipped, a leader and a standby, the leader
//! killed with SIGKILL (its Lease is not released) in the middle of a burst of TaskManagers
//! created as fast as the apiserver takes them, the webhook as installed with 2 replicas. The
//! webhook routes to the dead leader until the Lease has missed three renewals, then steers for
//! the default scheduler; the standby takes the Lease once its duration has run out and binds
//! every pod routed to the dead one. Every pod must be bound within the Lease's duration + 10 s
//! of the crash.
//!
//! `PLACEMENT_CRASH_STANDBY=0` runs the same burst with one scheduler replica (the layout
//! shipped before): what was routed to the dead leader stays Pending, and the test fails after
//! printing the same figures.

use std::collections::BTreeSet;
use std::time::{Duration, Instant, SystemTime};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;
use serde_json::Value;

use crate::fixture::{Cluster, FLINK, Setup, decision, serial};
use crate::support::kube::objects::{self, taskmanager};
use crate::support::kube::process::rss_mib;
use crate::support::kube::webhook::{NAMESPACE, repo_path};

const PROFILE: &str = "placement-scheduler";
const NODES: usize = 100;
/// TaskManagers created before the leader is killed, and in all.
const BEFORE_CRASH: usize = 300;
const BURST: usize = 1_500;
/// Creates in flight at once: as many as the apiserver and the webhook take.
const CONCURRENCY: usize = 32;
const ROUTED_LATE: &str = "placement_webhook_scheduler_routed_late_total";
const FALLBACKS: &str = "placement_webhook_scheduler_fallbacks_total";

/// One TaskManager as the apiserver stored it, and when its create returned.
struct Created {
    at: Instant,
    name: String,
    routed: bool,
}

impl Created {
    fn of(pod: &Pod) -> Created {
        assert!(
            decision(pod).is_some(),
            "{:?} not steered",
            pod.metadata.name
        );
        Created {
            at: Instant::now(),
            name: pod.metadata.name.clone().unwrap_or_default(),
            routed: pod.spec.as_ref().and_then(|s| s.scheduler_name.as_deref()) == Some(PROFILE),
        }
    }
}

/// The shipped Lease's duration (upstream's 15 s when the file does not set it).
fn lease_duration(config: &str) -> Duration {
    let parsed: Value = serde_saphyr::from_str(config).expect("scheduler config YAML");
    parsed["leaderElection"]["leaseDuration"]
        .as_str()
        .map_or(Duration::from_secs(15), |text| {
            humantime::parse_duration(text).expect("leaseDuration")
        })
}

/// The Lease's holder and when it took the Lease.
async fn holder(leases: &Api<Lease>) -> Option<(String, SystemTime)> {
    let spec = leases.get_opt(PROFILE).await.expect("get lease")?.spec?;
    let holder = spec.holder_identity.filter(|h| !h.is_empty())?;
    let acquired = SystemTime::from(spec.acquire_time?.0);
    Some((holder, acquired))
}

/// Creates TaskManagers `range` of the burst, [`CONCURRENCY`] at a time.
async fn create_burst(cluster: &Cluster, range: std::ops::Range<usize>) -> Vec<Created> {
    let pods: Vec<Value> = range
        .map(|i| {
            let name = format!("wordcount-taskmanager-1-{i}");
            taskmanager(&name, "wordcount", "500m")
        })
        .collect();
    objects::create_each(&cluster.admin, FLINK, &pods, CONCURRENCY, |p| {
        Created::of(&p)
    })
    .await
}

/// Creates one TaskManager of `job`.
async fn create_one(cluster: &Cluster, name: &str, job: &str) -> Created {
    Created::of(&cluster.create(FLINK, &taskmanager(name, job, "500m")).await)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_leader_strands_no_pod_because_its_standby_binds_them() {
    let _serial = serial().await;
    let config_file = repo_path("deploy/scheduler-profile/scheduler-config.yaml");
    let shipped = std::fs::read_to_string(&config_file).expect("scheduler config");
    let lease = lease_duration(&shipped);
    let with_standby = std::env::var("PLACEMENT_CRASH_STANDBY").map_or(true, |v| v != "0");
    let mut setup = Setup::nodes(NODES);
    setup.overlay = "deploy/scheduler-profile";
    setup.replicas = 2;
    setup.extra_config = format!("scheduler_config_file: {}\n", config_file.display());
    let cluster = Cluster::start(setup).await;
    let kubeconfig = cluster.plane.service_account_kubeconfig(NAMESPACE, PROFILE);

    // The leader first, then the standby, so which one leads is known.
    let leases = Api::<Lease>::namespaced(cluster.admin.clone(), NAMESPACE);
    let mut leader = cluster
        .plane
        .spawn_scheduler("placement-scheduler-a", &shipped, &kubeconfig);
    let started = Instant::now();
    let (first_holder, _) = loop {
        if let Some(held) = holder(&leases).await {
            break held;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the leader never took the Lease:\n{}",
            leader.log_tail(30)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let mut standby = with_standby.then(|| {
        cluster
            .plane
            .spawn_scheduler("placement-scheduler-b", &shipped, &kubeconfig)
    });
    if let Some(standby) = &mut standby {
        // Its caches are filled before it campaigns (upstream's server.go).
        while !standby
            .log()
            .to_lowercase()
            .contains("attempting to acquire leader lease")
        {
            standby.assert_running();
            assert!(
                started.elapsed() < Duration::from_secs(90),
                "the standby never campaigned:\n{}",
                standby.log_tail(30)
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    // Routed once the webhook has seen the Lease renewed.
    let mut created = Vec::new();
    for i in 0.. {
        created.push(create_one(&cluster, &format!("tm-probe-{i}"), "probe").await);
        if created.last().is_some_and(|c| c.routed) {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "never routed to {PROFILE}:\n{}",
            cluster.logs()
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }

    // The burst, and the leader killed in its middle.
    let burst_started = Instant::now();
    created.extend(create_burst(&cluster, 0..BEFORE_CRASH).await);
    // What the standby costs: the same caches as the leader, filled while it waits.
    let memory = (
        rss_mib(leader.pid()),
        standby.as_ref().and_then(|s| rss_mib(s.pid())),
    );
    leader.stop();
    let crashed = Instant::now();
    let crashed_at = SystemTime::now();
    created.extend(create_burst(&cluster, BEFORE_CRASH..BURST).await);
    let burst_took = burst_started.elapsed();
    // Then one every 200 ms until the webhook has fallen back and routes again (to the new
    // leader), or the deadline.
    let deadline = crashed + lease + Duration::from_secs(10);
    for i in 0.. {
        let fell_back = created.iter().any(|c| c.at > crashed && !c.routed);
        if fell_back && created.last().is_some_and(|c| c.routed) {
            break;
        }
        if Instant::now() + Duration::from_secs(2) > deadline {
            break;
        }
        created.push(create_one(&cluster, &format!("tm-after-{i}"), "wordcount").await);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // Every pod bound by the deadline.
    let api = Api::<Pod>::namespaced(cluster.admin.clone(), FLINK);
    let names: BTreeSet<&str> = created.iter().map(|c| c.name.as_str()).collect();
    let (pending, last_bind) = loop {
        let list = api.list(&ListParams::default()).await.expect("list pods");
        let pending: Vec<String> = list
            .items
            .iter()
            .filter(|p| names.contains(p.metadata.name.as_deref().unwrap_or_default()))
            .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_none())
            .filter_map(|p| p.metadata.name.clone())
            .collect();
        if pending.is_empty() {
            break (pending, Some(crashed.elapsed()));
        }
        if Instant::now() >= deadline {
            break (pending, None);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };

    let after_crash: Vec<&Created> = created.iter().filter(|c| c.at > crashed).collect();
    let routed_to_dead = after_crash.iter().take_while(|c| c.routed).count();
    let fallback = after_crash
        .iter()
        .find(|c| !c.routed)
        .map(|c| c.at - crashed);
    let takeover = holder(&leases)
        .await
        .filter(|(who, _)| *who != first_holder)
        .map(|(_, at)| at.duration_since(crashed_at).unwrap_or_default());
    let routed_late = cluster.metric_sum(ROUTED_LATE, &[]).await;
    let fallbacks = cluster.metric_sum(FALLBACKS, &[]).await;
    let mib = |m: Option<f64>| m.map_or("-".to_string(), |m| format!("{m:.0} MiB"));
    let secs = |d: Option<Duration>| {
        d.map_or("never".to_string(), |d| format!("{:.1} s", d.as_secs_f64()))
    };
    eprintln!(
        "scheduler crash ({} replica(s) of {PROFILE}, SIGKILL after {BEFORE_CRASH} of {BURST} \
         TaskManagers, {NODES} nodes, lease {} s):\n\
         \x20 burst created in {:.1} s ({:.0} pods/s)\n\
         \x20 routed to the dead leader after the crash: {routed_to_dead} \
         (counted late by the webhook: {routed_late})\n\
         \x20 webhook fell back after: {} ({fallbacks} pods steered for the default scheduler)\n\
         \x20 standby took the Lease after: {}\n\
         \x20 last pod bound after: {}\n\
         \x20 Pending at crash + lease + 10 s: {} of {}\n\
         \x20 resident memory before the crash: leader {}, standby {}",
        if with_standby { 2 } else { 1 },
        lease.as_secs(),
        burst_took.as_secs_f64(),
        BURST as f64 / burst_took.as_secs_f64(),
        secs(fallback),
        secs(takeover),
        secs(last_bind),
        pending.len(),
        created.len(),
        mib(memory.0),
        mib(memory.1),
    );

    assert!(
        routed_to_dead > 0,
        "no pod was routed to the leader after it died: the crash came too late to test anything"
    );
    assert!(
        pending.is_empty(),
        "{} pods still Pending {} s after the crash, e.g. {:?}\n{}",
        pending.len(),
        (lease + Duration::from_secs(10)).as_secs(),
        &pending[..pending.len().min(5)],
        standby.as_ref().map_or(String::new(), |s| s.log_tail(20)),
    );
    assert!(fallback.is_some(), "the webhook never fell back");
    assert!(takeover.is_some(), "the standby never took the Lease");
    assert!(
        routed_late >= 1.0,
        "no pod counted as routed on a late renewal"
    );
    let logs: String = cluster.replicas.iter().map(|r| r.log()).collect();
    assert!(
        logs.contains("scheduler lease lapsed"),
        "no log line for the lapse:\n{}",
        cluster.logs()
    );
    let forbidden = cluster.forbidden_lines();
    assert!(forbidden.is_empty(), "{forbidden:?}");
}
