//! A node lost as the real controllers see it: its kubelet (kwok) stops answering, so its Lease
//! lapses; kube-controller-manager's node lifecycle controller marks it not Ready and taints it
//! unreachable, and its taint eviction controller evicts the TaskManagers there, which stay
//! Terminating (no kubelet confirms them). The webhook charges nothing for the evicted pods and
//! steers their replacements around the node, which it still reads as cool.

use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime};

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::json;

use crate::fixture::{Cluster, FLINK, Setup, decision, landing, serial, wait_for, wait_for_or};
use crate::living::deciding_inflight;
use crate::support::kube::objects::taskmanager;

const NODES: usize = 12;
const BURST: usize = 24;
/// The label that takes a node out of kwok's hands.
const SILENT: &str = "placement-test/silent";
/// kwok renews each Lease every quarter of this.
const LEASE_SECONDS: u32 = 8;
/// The node lifecycle controller's grace before a silent node is not Ready.
const GRACE_SECONDS: u32 = 12;
/// How long a pod tolerates an unreachable node (the apiserver's default toleration).
const TOLERATION_SECONDS: u32 = 2;

/// `count` TaskManagers of `job`, with the default grace period, started by kwok this long
/// after they are bound.
async fn burst(cluster: &Cluster, job: &str, count: usize, start: &str) -> Vec<Pod> {
    let mut pods = Vec::new();
    for i in 1..=count {
        let mut manifest = taskmanager(&format!("{job}-taskmanager-1-{i}"), job, "2");
        manifest["metadata"]["annotations"] = json!({
            "pod-ready.stage.kwok.x-k8s.io/delay": start,
        });
        // A kubelet's default: a deleted pod waits for its kubelet to confirm it stopped.
        manifest["spec"]["terminationGracePeriodSeconds"] = json!(30);
        pods.push(cluster.create(FLINK, &manifest).await);
    }
    pods
}

fn names(pods: &[Pod]) -> Vec<String> {
    (pods.iter())
        .filter_map(|p| p.metadata.name.clone())
        .collect()
}

/// The replica's charge on `node`, in cores, at a refresh taken now: the snapshot file is
/// written again (a new `taken_at`), and `/debug/inflight` read once the replica has read it.
async fn charged_on(cluster: &Cluster, node: &str) -> f64 {
    let asked = SystemTime::now();
    // The snapshot's time is in whole seconds: a second later, it is after `asked`.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    cluster.write_snapshot();
    let inflight = deciding_inflight(cluster, &[0], asked).await;
    inflight.charged.get(node).copied().unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_node_is_tainted_and_evicted_by_the_controllers_and_steered_around() {
    let _serial = serial().await;
    let mut setup = Setup::nodes(NODES);
    setup.apiserver_args = vec![
        format!("--default-unreachable-toleration-seconds={TOLERATION_SECONDS}"),
        format!("--default-not-ready-toleration-seconds={TOLERATION_SECONDS}"),
    ];
    let cluster = Cluster::start(setup).await;
    let mut kwok = (cluster.plane).spawn_kwok_managing(&format!("!{SILENT}"), LEASE_SECONDS);
    let leases = Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(
        cluster.admin.clone(),
        "kube-node-lease",
    );
    wait_for(
        "not every node has a Lease",
        Duration::from_secs(60),
        || async {
            let n = leases
                .list(&ListParams::default())
                .await
                .expect("leases")
                .items
                .len();
            (n >= NODES).then_some(())
        },
    )
    .await;
    // Started once kwok keeps every node's Lease, so that no node starts out silent.
    let controllers = cluster.plane.spawn_controller_manager(
        &["node-lifecycle-controller", "taint-eviction-controller"],
        &[
            "--node-monitor-period=1s".into(),
            format!("--node-monitor-grace-period={GRACE_SECONDS}s"),
        ],
    );

    // Still starting (pulling, say) when their node is lost: charged whole until then.
    let first = burst(&cluster, "first", BURST, "10m").await;
    let bound = cluster.bound(FLINK, &names(&first)).await;
    let mut on: BTreeMap<&str, usize> = BTreeMap::new();
    for node in bound.values() {
        *on.entry(node.as_str()).or_default() += 1;
    }
    let (lost, held) = (on.iter())
        .max_by_key(|&(name, n)| (*n, std::cmp::Reverse(*name)))
        .map(|(name, n)| (name.to_string(), *n))
        .expect("a node");
    let pods = Api::<Pod>::namespaced(cluster.admin.clone(), FLINK);
    let charged_before = charged_on(&cluster, &lost).await;

    // The node stops answering.
    let nodes = Api::<Node>::all(cluster.admin.clone());
    let silenced = Instant::now();
    nodes
        .patch(
            &lost,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {SILENT: "true"}}})),
        )
        .await
        .expect("label the node");
    let unreachable = |n: &Node| {
        let not_ready = (n.status.as_ref().and_then(|s| s.conditions.as_ref()))
            .into_iter()
            .flatten()
            .any(|c| c.type_ == "Ready" && c.status != "True");
        let taints: Vec<(String, String)> = (n.spec.as_ref().and_then(|s| s.taints.as_ref()))
            .into_iter()
            .flatten()
            .map(|t| (t.key.clone(), t.effect.clone()))
            .collect();
        let tainted = ["NoSchedule", "NoExecute"].iter().all(|effect| {
            taints.contains(&("node.kubernetes.io/unreachable".into(), (*effect).into()))
        });
        not_ready && tainted
    };
    let limit = Duration::from_secs(u64::from(GRACE_SECONDS) + 60);
    wait_for_or(
        "the silent node never not Ready and tainted",
        limit,
        || controllers.log_tail(40),
        || async { unreachable(&nodes.get(&lost).await.expect("node")).then_some(()) },
    )
    .await;
    let tainted_after = silenced.elapsed();
    let evicted = wait_for_or(
        "its TaskManagers never evicted",
        Duration::from_secs(60),
        || controllers.log_tail(40),
        || async {
            let items = pods.list(&ListParams::default()).await.expect("pods").items;
            let on_lost: Vec<&Pod> = (items.iter())
                .filter(|p| {
                    p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(lost.as_str())
                })
                .collect();
            let leaving = on_lost
                .iter()
                .filter(|p| p.metadata.deletion_timestamp.is_some())
                .count();
            (leaving == held && on_lost.len() == held).then_some(leaving)
        },
    )
    .await;
    let evicted_after = silenced.elapsed();
    // The deciding replica has heard the evictions: nothing charged there.
    let charged_after = charged_on(&cluster, &lost).await;

    // Their replacements, as Flink asks for them: none named for the lost node, none bound there.
    let second = burst(&cluster, "second", held, "1s").await;
    let rebound = cluster.bound(FLINK, &names(&second)).await;
    let named: Vec<String> = (second.iter())
        .filter(|p| decision(p).is_some_and(|d| landing(d).contains_key(&lost)))
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    let there: Vec<&String> = (rebound.iter())
        .filter(|(_, node)| **node == lost)
        .map(|(name, _)| name)
        .collect();
    let first_named = (first.iter())
        .filter(|p| decision(p).is_some_and(|d| landing(d).contains_key(&lost)))
        .count();
    println!(
        "lost node {lost}: held {held} of {BURST} TaskManagers ({first_named} decisions named it), \
         charged {charged_before:.1} cores; not Ready and tainted unreachable {:.1} s after it \
         went silent (grace {GRACE_SECONDS} s), {evicted} evicted after {:.1} s (toleration \
         {TOLERATION_SECONDS} s), left Terminating, charged {charged_after:.1}; of {held} \
         replacements {} named it and {} bound there",
        tainted_after.as_secs_f64(),
        evicted_after.as_secs_f64(),
        named.len(),
        there.len()
    );
    assert!(
        first_named > 0,
        "no decision named {lost} before it was lost"
    );
    assert!(
        charged_before >= held as f64 * 2.0 - 1e-6,
        "{charged_before:.1} cores charged for the {held} starting TaskManagers on {lost}"
    );
    assert!(
        charged_after < 1e-6,
        "{charged_after:.1} cores still charged for the evicted TaskManagers on {lost}"
    );
    assert!(
        named.is_empty(),
        "replacements named the lost node: {named:?}"
    );
    assert!(
        there.is_empty(),
        "replacements bound to the lost node: {there:?}"
    );
    kwok.assert_running();
}
