//! The scheduler's node order and sample window, as the webhook models them, against a real
//! kube-scheduler that says which nodes it scored for each pod (its log at `-v=10` has one
//! "Calculated node's final score for pod" line per scored node, in the order the nodes
//! passed its filters).
//!
//! Above 100 nodes the scheduler scores `numFeasibleNodesToFind` feasible nodes taken from a
//! rotating start in its cache's node order (`findNodesThatPassFilters` and
//! `nextStartNodeIndex` in `pkg/scheduler/schedule_one.go`, `nodeTree.list()` in
//! `pkg/scheduler/backend/cache/node_tree.go`). The cluster here has what makes that order
//! hard to guess: nodes created in shuffled name order before the scheduler starts, zones
//! keyed by the beta labels where a node has both, zoneless nodes, a second region, nodes that
//! join while the scheduler runs (several at a time), deleted nodes and nodes deleted and
//! created again. The webhook's side runs in process as in `serve`: its node watch and its
//! watch of the default scheduler's leader Lease feed a view (`order_positions`).
//!
//! What the scheduler's scores show, and the test asserts:
//! - each cycle's run begins exactly `numFeasibleNodesToFind` nodes after the last one's (every
//!   node fits every pod here);
//! - within each zone, the nodes that joined after the scheduler started follow the nodes it
//!   listed, in the order they joined, which is the webhook's order for them.
//!
//! What it shows and the webhook cannot model: the nodes the scheduler listed when it started
//! are in no order it can know. The apiserver streams them sorted by name
//! (`newCacheIntervalFromStore` in k8s.io/apiserver `pkg/storage/cacher/
//! watch_cache_interval.go`), but the informer collects a streamed list (WatchListClient, on by
//! default since v1.35) in a map and hands it on as `temporaryStore.List()` (client-go
//! `tools/cache/reflector.go`), a map's iteration order, different at every start. The test
//! prints how far that order is from name order.
//!
//! The scheduler filters with `parallelism: 1`, so the set it scores is exactly the run of
//! `numFeasibleNodesToFind` nodes from the start (with the default 16 workers, the nodes that
//! finish filtering first fill the sample, which blurs the run's far end).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{DeleteParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};
use tokio::sync::watch;

use placement_webhook::config::scheduler::ListedNodeOrder;
use placement_webhook::config::{LeaseRef, PlacementConfig};
use placement_webhook::placement::landing::order_positions;
use placement_webhook::readiness::Readiness;
use placement_webhook::scheduler::num_feasible_nodes_to_find;
use placement_webhook::snapshot::LoadSnapshot;
use placement_webhook::view::{ClusterView, ViewStore};

use crate::fixture::serial;
use crate::support::kube::{ControlPlane, Options, objects, webhook};
use crate::support::rng::Rng;

const SEED: u64 = 0x0046_5A3D_1E00;
const PERCENTAGE: i64 = 10;
const SCHEDULER_CONFIG: &str = "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
parallelism: 1
percentageOfNodesToScore: 10
";
const LISTED: usize = 360;
const JOINED: usize = 48;
const DELETED: usize = 14;
const RECREATED: usize = 2;
const PODS: usize = 24;
const NAMESPACE: &str = "sample";
const ZONE: &str = "topology.kubernetes.io/zone";
const REGION: &str = "topology.kubernetes.io/region";
const ZONE_BETA: &str = "failure-domain.beta.kubernetes.io/zone";

fn node_json(rng: &mut Rng, name: &str) -> Value {
    let mut labels = serde_json::Map::new();
    labels.insert("kubernetes.io/hostname".into(), json!(name));
    match rng.below(20) {
        // No zone at all: the empty zone key, a zone of its own in the order.
        0 => {}
        // Relabelled to the GA key with the old beta one kept: keyed by the beta one.
        1 | 2 => {
            labels.insert(ZONE.into(), json!(rng.pick(&["zone-a", "zone-b"])));
            labels.insert(ZONE_BETA.into(), json!("zone-old"));
        }
        // A second region with a zone named as in the first.
        3 => {
            labels.insert(REGION.into(), json!("east"));
            labels.insert(ZONE.into(), json!("zone-a"));
        }
        _ => {
            labels.insert(
                ZONE.into(),
                json!(rng.pick(&["zone-a", "zone-b", "zone-c"])),
            );
        }
    }
    let resources = json!({"cpu": "64", "memory": "256Gi", "pods": "110"});
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                "message": "created by the test"}],
        },
    })
}

/// Creates `nodes`, `parallel` at a time (several at once: their order is the apiserver's).
async fn create_nodes(client: &Client, nodes: &[Value], parallel: usize) {
    let api = Api::<Node>::all(client.clone());
    futures::stream::iter(nodes.iter().map(|body| {
        let api = api.clone();
        async move {
            let node: Node = serde_json::from_value(body.clone()).expect("node");
            api.create(&PostParams::default(), &node).await.map(|_| ())
        }
    }))
    .buffer_unordered(parallel)
    .try_collect::<Vec<()>>()
    .await
    .expect("create nodes");
}

async fn delete_node(client: &Client, name: &str) {
    Api::<Node>::all(client.clone())
        .delete(name, &DeleteParams::default().grace_period(0))
        .await
        .expect("delete node");
}

fn pod(name: &str, cpu: &str) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "tolerations": [{"operator": "Exists"}],
            "containers": [{"name": "main", "image": "busybox",
                "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}],
        },
    }))
    .expect("pod")
}

/// Waits until the scheduler's snapshot holds `nodes` Nodes: a pod no node can take is
/// reported "0/N nodes are available" (a failed filter on every node moves the start on by
/// the whole order: not at all).
async fn wait_scheduler_sees(client: &Client, nodes: usize) {
    let api = Api::<Pod>::namespaced(client.clone(), NAMESPACE);
    let deadline = Instant::now() + Duration::from_secs(60);
    for attempt in 0.. {
        let name = format!("probe-{nodes}-{attempt}");
        api.create(&PostParams::default(), &pod(&name, "100000"))
            .await
            .expect("create probe");
        let seen = loop {
            let probe = api.get(&name).await.expect("get probe");
            let message = probe
                .status
                .and_then(|s| s.conditions)
                .into_iter()
                .flatten()
                .find(|c| c.type_ == "PodScheduled" && c.status == "False")
                .and_then(|c| c.message);
            if let Some(m) = message {
                break m
                    .strip_prefix("0/")
                    .and_then(|r| r.split_once(' '))
                    .and_then(|(n, _)| n.parse::<usize>().ok());
            }
            assert!(Instant::now() < deadline, "probe {name} never reported");
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        api.delete(&name, &DeleteParams::default().grace_period(0))
            .await
            .expect("delete probe");
        if seen == Some(nodes) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the scheduler never saw {nodes} nodes (last: {seen:?})"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn wait_bound(api: &Api<Pod>, name: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let p = api.get(name).await.expect("get pod");
        if p.spec.and_then(|s| s.node_name).is_some() {
            return;
        }
        assert!(Instant::now() < deadline, "{name} not bound in 30 s");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The Lease's `acquireTime` once a holder has it.
async fn leader_since(client: &Client) -> SystemTime {
    let api = Api::<Lease>::namespaced(client.clone(), "kube-system");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(lease) = api.get("kube-scheduler").await
            && let Some(since) = placement_webhook::inventory::lease::acquired(Some(&lease))
        {
            return since;
        }
        assert!(
            Instant::now() < deadline,
            "the scheduler never took its lease"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Every scored node per pod, in the order of the log: `pod -> nodes`.
fn scored(log: &str) -> BTreeMap<String, Vec<String>> {
    let field = |line: &str, key: &str| -> Option<String> {
        let at = line.find(&format!(" {key}=\""))? + key.len() + 3;
        let rest = &line[at..];
        Some(rest[..rest.find('"')?].to_string())
    };
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for line in log
        .lines()
        .filter(|l| l.contains("\"Calculated node's final score for pod\""))
    {
        if let (Some(pod), Some(node)) = (field(line, "pod"), field(line, "node")) {
            out.entry(pod).or_default().push(node);
        }
    }
    out
}

fn name_order(nodes: usize, i: usize) -> String {
    // Names spaced out so that joiners sort among the listed nodes.
    format!("node-{:05}", i * 7919 % (nodes * 10))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_order_and_sample_window_are_those_the_real_scheduler_scores() {
    let _serial = serial().await;
    let mut plane = ControlPlane::start(Options::default()).await;
    let client = plane.client().await;
    objects::create_namespace(&client, NAMESPACE, false).await;
    let mut rng = Rng(SEED);
    let total = LISTED + JOINED;
    let names: Vec<String> = (0..total).map(|i| name_order(total, i)).collect();
    let bodies: Vec<Value> = names.iter().map(|n| node_json(&mut rng, n)).collect();

    // Listed at the scheduler's start, created in shuffled order.
    let mut listed: Vec<usize> = (0..LISTED).collect();
    for i in (1..listed.len()).rev() {
        listed.swap(i, rng.below(i + 1));
    }
    let listed_bodies: Vec<Value> = listed.iter().map(|&i| bodies[i].clone()).collect();
    create_nodes(&client, &listed_bodies, 8).await;
    plane.start_scheduler_logging(SCHEDULER_CONFIG, 10);
    wait_scheduler_sees(&client, LISTED).await;
    let since = leader_since(&client).await;

    // The webhook's watches, as `serve` runs them.
    let store = Arc::new(ViewStore::new(PlacementConfig::default()));
    let (stop, stopped) = watch::channel(false);
    let shutdown = move || {
        let mut stopped = stopped.clone();
        async move {
            let _ = stopped.wait_for(|s| *s).await;
        }
    };
    tokio::spawn(placement_webhook::inventory::nodes::watch_nodes(
        client.clone(),
        store.clone(),
        Arc::new(Readiness::new()),
        shutdown(),
    ));
    let lease_store = store.clone();
    tokio::spawn(placement_webhook::inventory::lease::follow_default(
        client.clone(),
        LeaseRef::named("kube-system", "kube-scheduler"),
        shutdown(),
        move |since| lease_store.publish_scheduler_since(since),
    ));
    let deadline = Instant::now() + Duration::from_secs(30);
    while store.inventory().map_or(0, |i| i.nodes.len()) < LISTED {
        assert!(Instant::now() < deadline, "the node watch never listed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Creation times are whole seconds: joiners start in a later second than the lease's.
    let after_lease = since + Duration::from_secs(1);
    if let Ok(wait) = after_lease.duration_since(SystemTime::now()) {
        tokio::time::sleep(wait + Duration::from_millis(50)).await;
    }

    // Joiners four at a time, in shuffled order; deletions; two nodes created again.
    let mut joiners: Vec<Value> = bodies[LISTED..].to_vec();
    for i in (1..joiners.len()).rev() {
        joiners.swap(i, rng.below(i + 1));
    }
    let (first, second) = joiners.split_at(JOINED / 2);
    create_nodes(&client, first, 4).await;
    let gone = rng.some(&listed, DELETED + RECREATED);
    for &i in &gone {
        delete_node(&client, &names[i]).await;
    }
    create_nodes(&client, second, 4).await;
    let again: Vec<Value> = gone[..RECREATED]
        .iter()
        .map(|&i| bodies[i].clone())
        .collect();
    create_nodes(&client, &again, 1).await;
    let n = LISTED + JOINED - DELETED;
    wait_scheduler_sees(&client, n).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while store.inventory().map_or(0, |i| i.nodes.len()) != n {
        assert!(Instant::now() < deadline, "the node watch never caught up");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;

    // A view of every node, as `serve` builds it from a snapshot and the inventory.
    let inventory = store.inventory().expect("inventory");
    let loads: Vec<(String, f64)> = inventory.nodes.keys().map(|n| (n.clone(), 0.5)).collect();
    let snapshot: LoadSnapshot =
        serde_json::from_value(webhook::snapshot(&loads)).expect("snapshot");
    store.publish_snapshot(snapshot);
    let view = store.current().expect("view");
    assert_eq!(view.nodes.len(), n);
    assert!(
        view.scheduler_since.is_some(),
        "no lease time reached the view"
    );
    // A v1.36 scheduler's listed nodes could be anywhere: the webhook places only those that
    // joined later.
    let positions = order_positions(&view, ListedNodeOrder::Unknown);
    let position_of: BTreeMap<&str, Option<usize>> = view
        .nodes
        .iter()
        .enumerate()
        .map(|(i, node)| (node.name.as_str(), positions.of(i)))
        .collect();
    let api = Api::<Pod>::namespaced(client.clone(), NAMESPACE);
    for k in 0..PODS {
        let name = format!("p-{k:03}");
        api.create(&PostParams::default(), &pod(&name, "100m"))
            .await
            .expect("create pod");
        wait_bound(&api, &name).await;
    }
    let _ = stop.send(true);
    let scored = scored(&plane.scheduler_log());

    let len = num_feasible_nodes_to_find(PERCENTAGE, n as i64) as usize;
    let logged: Vec<&Vec<String>> = (0..PODS)
        .map(|k| {
            scored
                .get(&format!("{NAMESPACE}/p-{k:03}"))
                .unwrap_or_else(|| panic!("no scores logged for p-{k:03}"))
        })
        .collect();
    for (k, nodes) in logged.iter().enumerate() {
        assert_eq!(
            nodes.len(),
            len,
            "pod {k}: scored {} nodes, not {len}",
            nodes.len()
        );
    }
    // One filter worker checks the order from the start and the scores are logged in the
    // order the nodes passed: pod k's lines are the run from the first pod's start + k * len.
    let real: Vec<&str> = logged
        .iter()
        .flat_map(|nodes| nodes.iter().map(String::as_str))
        .take(n)
        .collect();
    for (k, nodes) in logged.iter().enumerate() {
        let run: Vec<&str> = (0..len).map(|i| real[(k * len + i) % n]).collect();
        let logged: Vec<&str> = nodes.iter().map(String::as_str).collect();
        assert_eq!(
            logged, run,
            "pod {k} scored another run than the start moved on by {len} gives"
        );
    }
    // Per zone (keyed as `GetZoneKey` keys it: the beta labels first), the scheduler's list
    // of that zone's nodes, as a cycle from wherever the first pod's run began.
    let zone_of = |name: &str| {
        let labels = &view.node(name).expect("in the view").labels;
        let get = |beta: &str, ga: &str| labels.get(beta).or_else(|| labels.get(ga)).cloned();
        let region = get("failure-domain.beta.kubernetes.io/region", REGION);
        (
            region.unwrap_or_default(),
            get(ZONE_BETA, ZONE).unwrap_or_default(),
        )
    };
    let mut zones: BTreeMap<(String, String), Vec<&str>> = BTreeMap::new();
    for name in &real {
        zones.entry(zone_of(name)).or_default().push(name);
    }
    // The webhook's order, per zone: the nodes that joined after the scheduler listed its
    // nodes, by position.
    let joined = |name: &str| is_late(&view, name, since);
    let mut checked = 0;
    let mut listed_in_name_order = (0, 0);
    for (zone, cycle) in &zones {
        let mut expected: Vec<&str> = cycle.iter().copied().filter(|n| joined(n)).collect();
        for name in cycle {
            assert_eq!(
                position_of[name].is_some(),
                joined(name),
                "{name}: placed by the webhook, or not, as it joined later, or not"
            );
        }
        expected.sort_by_key(|n| position_of[n]);
        let Some(&first) = expected.first() else {
            continue;
        };
        let at = cycle.iter().position(|n| *n == first).expect("in its zone");
        let after: Vec<&str> = (0..expected.len())
            .map(|k| cycle[(at + k) % cycle.len()])
            .collect();
        assert_eq!(
            after, expected,
            "zone {zone:?}: the nodes that joined later are not appended in the order they \
             joined"
        );
        checked += expected.len();
        // What is left is the scheduler's own list of the zone at its start.
        let listed: Vec<&str> = (expected.len()..cycle.len())
            .map(|k| cycle[(at + k) % cycle.len()])
            .collect();
        listed_in_name_order.0 += listed.windows(2).filter(|w| w[0] < w[1]).count();
        listed_in_name_order.1 += listed.len().saturating_sub(1);
    }
    assert_eq!(
        checked,
        JOINED + RECREATED,
        "every joiner and every node created again joined later"
    );
    eprintln!(
        "sample window: {n} nodes in {} zones, runs of {len}, {PODS} pods: every run began \
         {len} nodes on from the last; the {checked} nodes that joined later sit at the end \
         of their zones in the order they joined; of the nodes listed at the scheduler's \
         start, {} of {} neighbours are in name order (its informer's initial list is a map's \
         order)",
        zones.len(),
        listed_in_name_order.0,
        listed_in_name_order.1
    );
}

/// The node was created in a later second than the scheduler's leader took its Lease.
fn is_late(view: &ClusterView, name: &str, since: SystemTime) -> bool {
    let secs = |t: SystemTime| {
        t.duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
    };
    view.node(name)
        .and_then(|n| n.created)
        .is_some_and(|c| secs(c) > secs(since))
}
