//! kwok as the kubelet of the test cluster (tests/kube/kwok): nodes Ready with a node Lease, a
//! steered TaskManager bound by the real scheduler, then started (Running and Ready) after the
//! delay its annotations set, and removed once deleted after its grace period; one that cannot
//! pull its image waiting with that reason and never running. The ground the scenarios of a
//! living cluster stand on.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::{DeleteParams, ListParams};
use serde_json::json;

use crate::fixture::{Cluster, FLINK, Setup, decision, serial, wait_for};
use crate::support::kube::objects::{self, taskmanager};

const NODES: usize = 6;
/// kwok's stages start the pod's containers this long after it was bound (at most `JITTER`).
const START: Duration = Duration::from_secs(3);
const JITTER: Duration = Duration::from_secs(4);

fn condition(
    conditions: Option<&Vec<k8s_openapi::api::core::v1::PodCondition>>,
    kind: &str,
) -> bool {
    conditions
        .into_iter()
        .flatten()
        .any(|c| c.type_ == kind && c.status == "True")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kwok_starts_a_steered_taskmanager_after_its_delay_and_removes_it_once_deleted() {
    let _serial = serial().await;
    let cluster = Cluster::start(Setup::nodes(NODES)).await;
    let mut kwok = cluster.plane.spawn_kwok();

    // Every node Ready, each with its Lease in kube-node-lease.
    let nodes = Api::<Node>::all(cluster.admin.clone());
    let leases = Api::<Lease>::namespaced(cluster.admin.clone(), "kube-node-lease");
    wait_for(
        "nodes not Ready with a Lease",
        Duration::from_secs(60),
        || async {
            let ready = nodes
                .list(&ListParams::default())
                .await
                .expect("list nodes")
                .items
                .iter()
                .filter(|n| {
                    n.status
                        .as_ref()
                        .and_then(|s| s.conditions.as_ref())
                        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
                })
                .count();
            let leased = leases
                .list(&ListParams::default())
                .await
                .expect("list leases")
                .items
                .len();
            (ready == NODES && leased >= NODES).then_some(())
        },
    )
    .await;

    // A TaskManager whose containers start 3-4 s after kwok sees it bound.
    let mut manifest = taskmanager("wordcount-taskmanager-1-1", "wordcount", "1");
    manifest["metadata"]["annotations"] = json!({
        "pod-create.stage.kwok.x-k8s.io/delay": "100ms",
        "pod-create.stage.kwok.x-k8s.io/jitter-delay": "200ms",
        "pod-ready.stage.kwok.x-k8s.io/delay": format!("{}s", START.as_secs()),
        "pod-ready.stage.kwok.x-k8s.io/jitter-delay": format!("{}s", JITTER.as_secs()),
    });
    manifest["spec"]["terminationGracePeriodSeconds"] = json!(3);
    let created = Instant::now();
    let pod = cluster.create(FLINK, &manifest).await;
    assert!(decision(&pod).is_some(), "not steered:\n{}", cluster.logs());
    let pods = Api::<Pod>::namespaced(cluster.admin.clone(), FLINK);
    let name = "wordcount-taskmanager-1-1";

    let (bound, phases) = wait_for("never bound", Duration::from_secs(30), || async {
        let pod = pods.get(name).await.expect("get pod");
        let node = pod.spec.as_ref()?.node_name.clone()?;
        let phase = pod.status.as_ref()?.phase.clone().unwrap_or_default();
        Some((node, phase))
    })
    .await;
    let bound_after = created.elapsed();
    assert_eq!(
        phases, "Pending",
        "started before its delay ({bound_after:?} after creation)"
    );

    wait_for(
        "never Running and Ready",
        Duration::from_secs(30),
        || async {
            let pod = pods.get(name).await.expect("get pod");
            let status = pod.status?;
            (status.phase.as_deref() == Some("Running")
                && condition(status.conditions.as_ref(), "Ready")
                && status.start_time.is_some())
            .then_some(())
        },
    )
    .await;
    let started_after = created.elapsed();
    assert!(
        started_after >= START,
        "Running {started_after:?} after creation, before its {START:?} delay"
    );

    // One that cannot pull its image (placement-test/waiting-reason) waits with the kubelet's
    // reason and never runs, past the delay that started the first.
    let stuck_name = "wordcount-taskmanager-1-2";
    let mut stuck = taskmanager(stuck_name, "wordcount", "1");
    stuck["metadata"]["annotations"] = manifest["metadata"]["annotations"].clone();
    stuck["metadata"]["annotations"][objects::WAITING_REASON] = json!("ImagePullBackOff");
    let stuck_created = Instant::now();
    cluster.create(FLINK, &stuck).await;
    let waiting = |pod: &Pod| -> Option<String> {
        let statuses = pod.status.as_ref()?.container_statuses.as_ref()?;
        statuses
            .first()?
            .state
            .as_ref()?
            .waiting
            .as_ref()?
            .reason
            .clone()
    };
    wait_for(
        "never waiting with ImagePullBackOff",
        Duration::from_secs(30),
        || async {
            let pod = pods.get(stuck_name).await.expect("get pod");
            (waiting(&pod).as_deref() == Some("ImagePullBackOff")).then_some(())
        },
    )
    .await;
    tokio::time::sleep(
        (START + JITTER + Duration::from_secs(2)).saturating_sub(stuck_created.elapsed()),
    )
    .await;
    let pod = pods.get(stuck_name).await.expect("get pod");
    let phase = pod.status.as_ref().and_then(|s| s.phase.clone());
    assert_eq!(phase.as_deref(), Some("Pending"), "the waiting pod ran");
    assert_eq!(waiting(&pod).as_deref(), Some("ImagePullBackOff"));

    // Deleted: gone once kwok has seen its grace period out.
    pods.delete(name, &DeleteParams::default())
        .await
        .expect("delete pod");
    let deleted = Instant::now();
    wait_for(
        "deleted pod never removed",
        Duration::from_secs(30),
        || async {
            pods.get_opt(name)
                .await
                .expect("get pod")
                .is_none()
                .then_some(())
        },
    )
    .await;
    eprintln!(
        "kwok: {NODES} nodes Ready with Leases; {name} steered, bound to {bound} in {:.1} s, \
         Running and Ready after {:.1} s (delay {}-{} s), removed {:.1} s after its delete",
        bound_after.as_secs_f64(),
        started_after.as_secs_f64(),
        START.as_secs(),
        JITTER.as_secs(),
        deleted.elapsed().as_secs_f64()
    );
    kwok.assert_running();
}
