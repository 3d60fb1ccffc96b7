//! Installed as users install it: every overlay under deploy/ accepted by the real apiserver,
//! and the webhook running under the shipped RBAC only, never refused.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use crate::fixture::{Cluster, FLINK, Setup, decision, serial};
use crate::support::kube::objects::taskmanager;
use crate::support::kube::webhook::{NAMESPACE, SERVICE_ACCOUNT, render};
use crate::support::kube::{ControlPlane, Options};

const OVERLAYS: [&str; 5] = [
    "deploy",
    "deploy/cert-manager",
    "deploy/monitoring",
    "deploy/no-heat-bands",
    "deploy/scheduler-profile",
];

/// `kubectl kustomize` of each overlay, applied server-side as shipped: deploy/ for real, the
/// others as a server-side dry run on top. Custom resources whose operators are absent
/// (cert-manager, Prometheus Operator) get a CRD that accepts any body first, so the apiserver
/// checks everything but their schema.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_overlay_is_accepted_by_the_apiserver() {
    let _serial = serial().await;
    let plane = ControlPlane::start(Options::default()).await;
    let plane = &plane;
    let served: BTreeSet<String> = plane
        .kubectl(&["api-versions"])
        .lines()
        .map(str::to_string)
        .collect();
    for overlay in OVERLAYS {
        let dry_run = overlay != "deploy";
        let rendered = render(plane, overlay);
        let docs: Vec<Value> = serde_saphyr::from_multiple(&rendered)
            .unwrap_or_else(|e| panic!("{overlay} renders YAML: {e}"));
        assert!(!docs.is_empty(), "{overlay} renders nothing");
        for doc in &docs {
            let api_version = doc["apiVersion"].as_str().expect("apiVersion");
            if !served.contains(api_version) {
                accept_any(plane, api_version, doc["kind"].as_str().expect("kind"));
            }
        }
        let mut args = vec!["apply", "--server-side", "--field-manager=install-test"];
        if dry_run {
            args.push("--dry-run=server");
        }
        args.extend(["-f", "-"]);
        let (ok, out, err) = plane.try_kubectl(&args, Some(&rendered));
        assert!(ok, "{overlay} refused by the apiserver:\n{err}\n{out}");
        assert_eq!(
            out.lines().count(),
            docs.len(),
            "{overlay}: one line per object expected:\n{out}"
        );
    }
}

/// A CRD for `kind` in `api_version`'s group that accepts any body (no operator here).
pub fn accept_any(plane: &ControlPlane, api_version: &str, kind: &str) {
    let (group, version) = api_version.split_once('/').expect("a group/version");
    let plural = format!("{}s", kind.to_lowercase());
    let (found, _, _) = plane.try_kubectl(&["get", "crd", &format!("{plural}.{group}")], None);
    if found {
        return;
    }
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{group}")},
        "spec": {
            "group": group,
            "names": {"kind": kind, "plural": plural, "singular": kind.to_lowercase()},
            "scope": "Namespaced",
            "versions": [{
                "name": version, "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {
                    "type": "object", "x-kubernetes-preserve-unknown-fields": true,
                }},
            }],
        },
    });
    plane.kubectl_with_input(&["apply", "-f", "-"], Some(&crd.to_string()));
    plane.kubectl(&[
        "wait",
        "--for=condition=Established",
        "--timeout=30s",
        &format!("crd/{plural}.{group}"),
    ]);
}

/// The webhook authenticates as deploy/'s ServiceAccount (a TokenRequest token) and does its
/// whole job under the shipped ClusterRole and Role: it lists and watches what it needs
/// (ready, steering), the apiserver refuses it nothing, and the account can do nothing more
/// than read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_webhook_needs_no_more_than_the_shipped_rbac() {
    let _serial = serial().await;
    let mut setup = Setup::nodes(3);
    setup.replicas = 2;
    let cluster = Cluster::start(setup).await;
    let pod = cluster
        .create(FLINK, &taskmanager("tm-rbac", "job", "1"))
        .await;
    assert!(decision(&pod).is_some(), "not steered:\n{}", cluster.logs());
    cluster
        .wait_metric("placement_webhook_inventory_ready", &[], 2.0)
        .await;
    let forbidden = cluster.forbidden_lines();
    assert!(forbidden.is_empty(), "refused by RBAC: {forbidden:?}");
    // Three nodes, every one scored: the heat bands deploy/ keeps stay idle (no terms on the
    // pod, no node written).
    let terms =
        serde_json::to_string(&pod.spec.as_ref().and_then(|s| s.affinity.as_ref())).expect("JSON");
    assert!(
        !terms.contains("heat-band"),
        "band terms under 100 nodes: {terms}"
    );
    let written = cluster
        .metric_sum(
            "placement_webhook_heat_band_writes_total",
            &[("result", "written")],
        )
        .await;
    assert_eq!(written, 0.0, "node writes under 100 nodes");

    let account = format!("system:serviceaccount:{NAMESPACE}:{SERVICE_ACCOUNT}");
    let can = |verb: &str, resource: &str, namespace: &str| {
        let (_, out, _) = cluster.plane.try_kubectl(
            &[
                "auth", "can-i", verb, resource, "-n", namespace, "--as", &account,
            ],
            None,
        );
        out.trim() == "yes"
    };
    for (verb, resource, namespace) in [
        ("watch", "nodes", "default"),
        ("list", "pods", FLINK),
        ("watch", "namespaces", "default"),
        ("watch", "endpointslices.discovery.k8s.io", NAMESPACE),
        (
            "watch",
            "leases.coordination.k8s.io/kube-scheduler",
            "kube-system",
        ),
        // The heat bands (the policy holds it to their label: real_cluster::heat_bands).
        ("patch", "nodes", "default"),
        // Which replica decides, and the Service's one endpoint its holder writes.
        (
            "patch",
            "leases.coordination.k8s.io/placement-webhook-decider",
            NAMESPACE,
        ),
        (
            "patch",
            "endpointslices.discovery.k8s.io/placement-webhook-decider",
            NAMESPACE,
        ),
    ] {
        assert!(can(verb, resource, namespace), "cannot {verb} {resource}");
    }
    for (verb, resource, namespace) in [
        ("create", "pods", FLINK),
        ("update", "nodes", "default"),
        ("create", "nodes", "default"),
        ("delete", "nodes", "default"),
        ("get", "secrets", NAMESPACE),
        ("list", "endpointslices.discovery.k8s.io", FLINK),
        ("create", "events", NAMESPACE),
        (
            "get",
            "leases.coordination.k8s.io/kube-controller-manager",
            "kube-system",
        ),
        (
            "update",
            "leases.coordination.k8s.io/kube-scheduler",
            "kube-system",
        ),
        // The two named writes in its namespace, and no more.
        ("create", "leases.coordination.k8s.io", NAMESPACE),
        ("patch", "leases.coordination.k8s.io/other", NAMESPACE),
        (
            "update",
            "leases.coordination.k8s.io/placement-webhook-decider",
            NAMESPACE,
        ),
        (
            "delete",
            "leases.coordination.k8s.io/placement-webhook-decider",
            NAMESPACE,
        ),
        ("create", "endpointslices.discovery.k8s.io", NAMESPACE),
        (
            "patch",
            "endpointslices.discovery.k8s.io/placement-webhook-replicas-abc",
            NAMESPACE,
        ),
        (
            "update",
            "endpointslices.discovery.k8s.io/placement-webhook-decider",
            NAMESPACE,
        ),
        (
            "delete",
            "endpointslices.discovery.k8s.io/placement-webhook-decider",
            NAMESPACE,
        ),
        ("patch", "services", NAMESPACE),
        (
            "patch",
            "endpointslices.discovery.k8s.io/placement-webhook-decider",
            FLINK,
        ),
    ] {
        assert!(
            !can(verb, resource, namespace),
            "may {verb} {resource} in {namespace}"
        );
    }
    // A node's status is its kubelet's.
    let (_, out, _) = cluster.plane.try_kubectl(
        &[
            "auth",
            "can-i",
            "patch",
            "nodes",
            "--subresource=status",
            "--as",
            &account,
        ],
        None,
    );
    assert_eq!(out.trim(), "no", "may patch nodes/status");
}
