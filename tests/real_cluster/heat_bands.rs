//! Heat bands as deploy/ installs them: the webhook labels every node with its band under the
//! shipped RBAC once the scheduler samples the nodes (above 100), its patch carries the band
//! terms, and the ValidatingAdmissionPolicy holds its node writes to that one label.

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;
use std::time::{Duration, Instant};

use crate::fixture::{Cluster, FLINK, Setup, serial};
use crate::support::kube::client_from_kubeconfig;
use crate::support::kube::objects::{self, taskmanager};

const KEY: &str = "placement-webhook.io/heat-band";
const OVERLAY: &str = "deploy";
/// The fewest nodes the default scheduler samples (it scores every node of 100 or fewer).
const SAMPLED: usize = 101;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_webhook_labels_every_node_with_its_band_and_may_write_nothing_else() {
    let _serial = serial().await;
    let mut setup = Setup::nodes(SAMPLED);
    setup.overlay = OVERLAY;
    setup.replicas = 1;
    let mut cluster = Cluster::start(setup).await;
    cluster
        .wait_metric(
            "placement_webhook_heat_band_writes_total",
            &[("result", "written")],
            SAMPLED as f64,
        )
        .await;
    let admin = Api::<Node>::all(cluster.admin.clone());
    let nodes = admin.list(&Default::default()).await.expect("nodes").items;
    for node in &nodes {
        let band = node.metadata.labels.as_ref().and_then(|l| l.get(KEY));
        assert!(
            band.is_some_and(|b| b.parse::<u32>().is_ok_and(|b| b < 16)),
            "{:?}: band {band:?}",
            node.metadata.name
        );
    }
    let name = nodes[0].metadata.name.clone().expect("a name");
    puts_back_what_another_writer_moved(&admin, &name).await;
    // A restart with every band right writes nothing: it reads the bands back.
    let replica = &mut cluster.replicas[0];
    replica.process.stop();
    replica.process.start();
    replica.wait_ready(&cluster.certs.ca_pem()).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let written = cluster
        .metric_sum(
            "placement_webhook_heat_band_writes_total",
            &[("result", "written")],
        )
        .await;
    assert_eq!(written, 0.0, "writes after a restart with every band right");

    // A steered pod grades every node: four terms on the band after the named tiers, one a
    // bit of the band's score (15 - band; weights 8, 4, 2, 1).
    let pod = cluster
        .create(FLINK, &taskmanager("tm-bands", "job", "1"))
        .await;
    let terms = serde_json::to_value(pod.spec.and_then(|s| {
        s.affinity?
            .node_affinity?
            .preferred_during_scheduling_ignored_during_execution
    }))
    .expect("terms");
    let band_terms: Vec<_> = terms
        .as_array()
        .expect("preferred terms")
        .iter()
        .filter(|t| t["preference"]["matchExpressions"][0]["key"] == KEY)
        .collect();
    assert_eq!(band_terms.len(), 4, "{terms:#}");
    for band in 0..16 {
        let label = json!(band.to_string());
        let score: i64 = (band_terms.iter())
            .filter(|t| {
                let requirement = &t["preference"]["matchExpressions"][0];
                requirement["operator"] == "In"
                    && (requirement["values"].as_array()).is_some_and(|v| v.contains(&label))
            })
            .map(|t| t["weight"].as_i64().expect("a weight"))
            .sum();
        assert_eq!(score, 15 - band, "band {band}: {terms:#}");
    }

    // The webhook's own account: the band, and nothing else on a node.
    let webhook = Api::<Node>::all(client_from_kubeconfig(&cluster.webhook_kubeconfig).await);
    policy_in_force(&webhook, &name).await;
    merge(&webhook, &name, json!({"metadata": {"labels": {KEY: "7"}}}))
        .await
        .expect("the webhook may set a band");
    merge(
        &webhook,
        &name,
        json!({"metadata": {"labels": {KEY: "15"}}}),
    )
    .await
    .expect("the webhook may set the top band");
    refuses_all_but_the_band(&webhook, &name, "the webhook's account").await;
    // The same ServiceAccount name installed in another namespace (an overlay's `namespace:`)
    // is held alike: granted the node patch, it may still write nothing but the band.
    let elsewhere = another_namespaces_account(&cluster).await;
    merge(
        &elsewhere,
        &name,
        json!({"metadata": {"labels": {KEY: "3"}}}),
    )
    .await
    .expect("the band, from another namespace's install");
    refuses_all_but_the_band(&elsewhere, &name, "another namespace's install").await;
    let left = admin
        .get(&nodes[0].metadata.name.clone().expect("a name"))
        .await
        .expect("node");
    assert_eq!(left.spec.and_then(|s| s.unschedulable), None);
    // Anyone else is not held by the policy.
    admin
        .patch(
            &nodes[0].metadata.name.clone().expect("a name"),
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"team": "data"}}})),
        )
        .await
        .expect("the admin relabels a node");
    assert_eq!(
        cluster
            .metric_sum(
                "placement_webhook_heat_band_writes_total",
                &[("result", "refused")]
            )
            .await,
        0.0,
        "the webhook's own writes were refused:\n{}",
        cluster.logs()
    );
}

/// Another writer sets node `name`'s band wrong (and then removes it): the webhook reads the
/// label back and puts its band back within a few seconds.
async fn puts_back_what_another_writer_moved(admin: &Api<Node>, name: &str) {
    let band_of = |node: &Node| (node.metadata.labels.as_ref()).and_then(|l| l.get(KEY).cloned());
    let right = band_of(&admin.get(name).await.expect("node")).expect("a band");
    let wrong = if right == "15" { "0" } else { "15" };
    for moved in [json!(wrong), json!(null)] {
        merge(admin, name, json!({"metadata": {"labels": {KEY: moved}}}))
            .await
            .expect("the admin moves the band");
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let now = band_of(&admin.get(name).await.expect("node"));
            if now.as_deref() == Some(right.as_str()) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{name}: band {now:?} 10 s after another writer set {moved}, not {right}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

async fn merge(
    nodes: &Api<Node>,
    name: &str,
    patch: serde_json::Value,
) -> Result<Node, kube::Error> {
    nodes
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
}

/// Every write to node `name` but a band number on the band label, each in its own request,
/// is refused by the policy (not by RBAC, not by validation).
async fn refuses_all_but_the_band(nodes: &Api<Node>, name: &str, who: &str) {
    let owner = json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "gone",
        "uid": "00000000-0000-0000-0000-000000000001"}]);
    for (what, patch) in [
        (
            "another label",
            json!({"metadata": {"labels": {"node-pool": "mine"}}}),
        ),
        (
            "a label removed",
            json!({"metadata": {"labels": {"kubernetes.io/hostname": null}}}),
        ),
        (
            "a band that is not a number",
            json!({"metadata": {"labels": {KEY: "cool"}}}),
        ),
        (
            "a band past the configured sixteen",
            json!({"metadata": {"labels": {KEY: "16"}}}),
        ),
        ("band 42", json!({"metadata": {"labels": {KEY: "42"}}})),
        (
            "a band with a leading zero",
            json!({"metadata": {"labels": {KEY: "07"}}}),
        ),
        (
            "an annotation",
            json!({"metadata": {"annotations": {"note": "x"}}}),
        ),
        (
            "a finalizer",
            json!({"metadata": {"finalizers": ["example.com/hold"]}}),
        ),
        (
            "an ownerReference to an owner that does not exist",
            json!({"metadata": {"ownerReferences": owner}}),
        ),
        (
            "a taint",
            json!({"spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]}}),
        ),
        ("a cordon", json!({"spec": {"unschedulable": true}})),
    ] {
        match merge(nodes, name, patch).await {
            Err(kube::Error::Api(status)) => {
                assert!(
                    status.code == 403 || status.code == 422,
                    "{who}, {what}: {} {}",
                    status.code,
                    status.message
                );
                assert!(
                    status.message.contains("placement webhook")
                        || status.message.contains("heat band"),
                    "{who}, {what}: refused by something else: {}",
                    status.message
                );
            }
            other => panic!("{who}, {what}: not refused: {other:?}"),
        }
    }
    let api = nodes.clone();
    assert!(
        api.delete(name, &Default::default()).await.is_err(),
        "{who}: a node deleted"
    );
}

/// A ServiceAccount named as the webhook's in namespace `elsewhere`, bound to the overlay's
/// node patch ClusterRole, as a client.
async fn another_namespaces_account(cluster: &Cluster) -> Api<Node> {
    use k8s_openapi::api::core::v1::ServiceAccount;
    use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
    let namespace = "elsewhere";
    objects::create_namespace(&cluster.admin, namespace, false).await;
    let account: ServiceAccount = serde_json::from_value(json!({
        "metadata": {"name": "placement-webhook", "namespace": namespace}
    }))
    .expect("a ServiceAccount");
    Api::<ServiceAccount>::namespaced(cluster.admin.clone(), namespace)
        .create(&Default::default(), &account)
        .await
        .expect("ServiceAccount created");
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "placement-webhook-heat-bands-elsewhere"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
            "name": "placement-webhook-heat-bands"},
        "subjects": [{"kind": "ServiceAccount", "name": "placement-webhook",
            "namespace": namespace}]
    }))
    .expect("a ClusterRoleBinding");
    Api::<ClusterRoleBinding>::all(cluster.admin.clone())
        .create(&Default::default(), &binding)
        .await
        .expect("ClusterRoleBinding created");
    let token = cluster
        .plane
        .service_account_token(namespace, "placement-webhook");
    let path = cluster.plane.dir.path().join("elsewhere.kubeconfig");
    std::fs::write(
        &path,
        cluster.plane.kubeconfig_with_token("elsewhere", &token),
    )
    .expect("kubeconfig written");
    Api::<Node>::all(client_from_kubeconfig(&path).await)
}

/// Waits until the apiserver enforces the overlay's ValidatingAdmissionPolicy: it does once its
/// informers hold the policy and its binding, a moment after they are created, and a write in
/// between passes unchecked. Probes with a dry run of a write the policy refuses, for at most a
/// minute.
async fn policy_in_force(webhook: &Api<Node>, node: &str) {
    let probe = json!({"metadata": {"labels": {"node-pool": "probe"}}});
    let dry_run = PatchParams {
        dry_run: true,
        ..PatchParams::default()
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match webhook.patch(node, &dry_run, &Patch::Merge(&probe)).await {
            Err(kube::Error::Api(status)) if status.code == 403 || status.code == 422 => return,
            other => assert!(
                Instant::now() < deadline,
                "the policy refuses nothing a minute after the install: {other:?}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
