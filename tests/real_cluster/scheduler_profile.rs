//! deploy/scheduler-profile as shipped: the stock kube-scheduler run with the overlay's own
//! KubeSchedulerConfiguration and ServiceAccount as a second scheduler, the webhook routing
//! TaskManagers to it only while its leader Lease is renewed. Stopped mid-burst with SIGTERM, it
//! releases its Lease and the pods created from then on go to the default scheduler and bind.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use serde_json::Value;

use crate::fixture::{Cluster, FLINK, Setup, decision, serial};
use crate::support::kube::objects::taskmanager;
use crate::support::kube::webhook::{NAMESPACE, repo_path};

const PROFILE: &str = "placement-scheduler";
const FALLBACKS: &str = "placement_webhook_scheduler_fallbacks_total";

fn scheduler_of(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.scheduler_name.as_deref())
        .unwrap_or("default-scheduler")
}

async fn create(cluster: &Cluster, name: &str) -> Pod {
    let pod: Value = taskmanager(name, "wordcount", "1");
    let pod = cluster.create(FLINK, &pod).await;
    assert!(
        decision(&pod).is_some(),
        "{name} not steered:\n{}",
        cluster.logs()
    );
    pod
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_go_to_the_second_scheduler_only_while_its_lease_is_renewed() {
    let _serial = serial().await;
    let config_file = repo_path("deploy/scheduler-profile/scheduler-config.yaml");
    let mut setup = Setup::nodes(8);
    setup.overlay = "deploy/scheduler-profile";
    setup.extra_config = format!("scheduler_config_file: {}\n", config_file.display());
    let cluster = Cluster::start(setup).await;
    // Before the second scheduler runs there is no Lease: steered for the default scheduler.
    let early = create(&cluster, "tm-early").await;
    assert_eq!(scheduler_of(&early), "default-scheduler");

    let kubeconfig = cluster.plane.service_account_kubeconfig(NAMESPACE, PROFILE);
    let shipped = std::fs::read_to_string(&config_file).expect("scheduler config");
    let mut second = cluster
        .plane
        .spawn_scheduler(PROFILE, &shipped, &kubeconfig);

    // Routed once its leader holds the Lease.
    let mut names = vec!["tm-early".to_string()];
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut routed = 0;
    for i in 0.. {
        let name = format!("tm-{i}");
        let pod = create(&cluster, &name).await;
        names.push(name);
        if scheduler_of(&pod) == PROFILE {
            routed += 1;
            if routed == 6 {
                break;
            }
        }
        assert!(
            Instant::now() < deadline,
            "never routed to {PROFILE}:\n{}",
            second.log_tail(30)
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    // The second scheduler binds what was routed to it.
    cluster.bound(FLINK, &names).await;

    // Stopped cleanly (SIGTERM, as the kubelet stops a pod): kube-scheduler releases its Lease
    // as it exits (ReleaseOnCancel), and the webhook falls back as soon as its Lease watch
    // hears it, not after missed renewals. (Killed with no standby: scheduler_crash.rs has
    // the shipped pair.)
    second.terminate();
    let stopped = Instant::now();
    let mut stranded = Vec::new();
    let mut after = Vec::new();
    for i in 0.. {
        let name = format!("tm-after-{i}");
        let pod = create(&cluster, &name).await;
        if scheduler_of(&pod) == PROFILE {
            assert!(after.is_empty(), "routed again after falling back");
            stranded.push(name);
        } else {
            after.push(name);
            if after.len() == 6 {
                break;
            }
        }
        assert!(
            stopped.elapsed() < Duration::from_secs(60),
            "still routed 60 s after the scheduler stopped"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let window = stopped.elapsed();
    // One pod a second, the first created as it exits: one pod at most while the release
    // reaches the webhook (three in the 3 s missed renewals would take; fourteen had the
    // Lease's duration counted).
    assert!(
        stranded.len() <= 1,
        "{} pods routed to the stopped scheduler in {window:.0?}: was its Lease released?",
        stranded.len()
    );
    // Every pod created after the Lease lapsed binds, through the default scheduler.
    cluster.bound(FLINK, &after).await;
    let fallbacks = cluster.metric_sum(FALLBACKS, &[]).await;
    assert!(fallbacks >= 7.0, "{fallbacks} fallbacks counted");
    // What was routed in the window stays Pending until it is deleted (Flink re-requests a
    // TaskManager that does not register in time).
    tokio::time::sleep(Duration::from_secs(2)).await;
    for name in &stranded {
        let pod = kube::Api::<Pod>::namespaced(cluster.admin.clone(), FLINK)
            .get(name)
            .await
            .expect("pod");
        assert!(
            pod.spec
                .as_ref()
                .and_then(|s| s.node_name.as_ref())
                .is_none(),
            "{name} bound with its scheduler stopped"
        );
    }
    let forbidden = cluster.forbidden_lines();
    assert!(forbidden.is_empty(), "{forbidden:?}");
    eprintln!(
        "second scheduler stopped with SIGTERM: {} pods routed to it after; {} created over \
         {window:.0?}, one a second, all bound by the default scheduler",
        stranded.len(),
        after.len()
    );
}
