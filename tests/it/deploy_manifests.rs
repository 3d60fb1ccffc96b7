//! The manifests under deploy/, as `kubectl kustomize` builds them: the safety properties of the
//! webhook registration, least-privilege RBAC, the pod's hardening, and a config the webhook
//! accepts.
//!
//! Needs kubectl (`.ci/validate-manifests.sh` installs one when it is missing). Without it the
//! tests fail under CI=true and only print a note elsewhere.

use crate::support;

use std::path::PathBuf;
use std::process::Command;

use placement_webhook::config::kube_scheduler;
use placement_webhook::config::{Config, Mode, SelectorOperator};
use serde_json::{Value, json};
use support::webhook::repo_path;

const NAMESPACE: &str = "placement-webhook";
const TLS_SECRET: &str = "placement-webhook-tls";
/// The second scheduler of deploy/scheduler-profile: its name, ServiceAccount and lease.
const SCHEDULER: &str = "placement-scheduler";

/// kubectl from $KUBECTL, else the pinned one `tests/kube/build.sh` builds (missing, the test
/// fails with that command).
fn kubectl() -> PathBuf {
    match std::env::var_os("KUBECTL").map(PathBuf::from) {
        Some(path) if path.is_file() => path,
        _ => support::kube::tool("kubectl"),
    }
}

/// The objects `kubectl kustomize <dir>` builds.
fn build(dir: &str) -> Vec<Value> {
    let kubectl = kubectl();
    let output = Command::new(&kubectl)
        .arg("kustomize")
        .arg(repo_path(dir))
        .output()
        .expect("kubectl runs");
    assert!(
        output.status.success(),
        "kubectl kustomize {dir} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8(output.stdout).expect("UTF-8 output");
    let docs: Vec<Value> = serde_saphyr::from_multiple::<Value>(&text)
        .expect("valid YAML documents")
        .into_iter()
        .filter(|v| !v.is_null())
        .collect();
    assert!(!docs.is_empty(), "{dir} builds to nothing");
    docs
}

fn all<'a>(docs: &'a [Value], kind: &str) -> Vec<&'a Value> {
    docs.iter().filter(|d| d["kind"] == kind).collect()
}

fn one<'a>(docs: &'a [Value], kind: &str) -> &'a Value {
    let found = all(docs, kind);
    assert_eq!(found.len(), 1, "expected exactly one {kind}");
    found[0]
}

fn strings(v: &Value) -> Vec<&str> {
    v.as_array()
        .unwrap_or_else(|| panic!("expected an array, got {v}"))
        .iter()
        .map(|s| {
            s.as_str()
                .unwrap_or_else(|| panic!("expected a string, got {s}"))
        })
        .collect()
}

fn check_webhook_registration(docs: &[Value]) {
    let config = one(docs, "MutatingWebhookConfiguration");
    let webhooks = config["webhooks"].as_array().expect("webhooks");
    assert_eq!(webhooks.len(), 1);
    let service = named(docs, "Service", Some(NAMESPACE), "placement-webhook");
    for hook in webhooks {
        assert_eq!(
            hook["failurePolicy"], "Ignore",
            "a placement webhook never blocks pods"
        );
        assert_eq!(hook["sideEffects"], "None");
        let timeout = hook["timeoutSeconds"].as_u64().expect("timeoutSeconds set");
        assert!((1..=5).contains(&timeout), "timeoutSeconds {timeout}");
        assert_eq!(timeout, 2);
        assert_eq!(hook["admissionReviewVersions"], json!(["v1"]));
        assert_eq!(hook["reinvocationPolicy"], "IfNeeded");
        assert_eq!(hook["matchPolicy"], "Equivalent");

        let rules = hook["rules"].as_array().expect("rules");
        assert_eq!(rules.len(), 1);
        for rule in rules {
            assert_eq!(strings(&rule["operations"]), ["CREATE"]);
            assert_eq!(strings(&rule["apiGroups"]), [""]);
            assert_eq!(strings(&rule["apiVersions"]), ["v1"]);
            assert_eq!(strings(&rule["resources"]), ["pods"], "no subresources");
        }
        assert!(
            !hook.to_string().contains("\"*\""),
            "no wildcard in the webhook registration"
        );

        let ns = &hook["namespaceSelector"];
        let expressions = ns["matchExpressions"].as_array().expect("matchExpressions");
        let inject = ns["matchLabels"]["placement-webhook.io/inject"] == "enabled"
            || expressions.iter().any(|e| {
                e["key"] == "placement-webhook.io/inject"
                    && e["operator"] == "In"
                    && strings(&e["values"]) == ["enabled"]
            });
        assert!(
            inject,
            "namespaceSelector must require the opt-in label: {ns}"
        );
        let excluded: Vec<&str> = expressions
            .iter()
            .filter(|e| e["key"] == "kubernetes.io/metadata.name" && e["operator"] == "NotIn")
            .flat_map(|e| strings(&e["values"]))
            .collect();
        for name in ["kube-system", NAMESPACE] {
            assert!(excluded.contains(&name), "{name} not excluded: {ns}");
        }

        // The opt-out condition holds the spellings of true the webhook accepts, in any case.
        let not_skipped = hook["matchConditions"]
            .as_array()
            .expect("matchConditions")
            .iter()
            .find(|c| c["name"] == "not-skipped")
            .and_then(|c| c["expression"].as_str())
            .expect("a not-skipped condition");
        assert!(
            not_skipped.contains(
                "!(object.metadata.annotations['placement-webhook.io/skip'].lowerAscii() in"
            ),
            "{not_skipped}"
        );
        let listed: Vec<String> = not_skipped
            .rsplit_once('[')
            .and_then(|(_, list)| list.split_once(']'))
            .expect("an `in [...]` list")
            .0
            .split(',')
            .map(|v| v.trim().trim_matches('\'').to_owned())
            .collect();
        assert_eq!(
            listed,
            placement_webhook::admission::SKIP_VALUES,
            "{not_skipped}"
        );

        // The apiserver only calls the webhook for pods its objectSelector matches: it must
        // select what the webhook's config targets.
        assert_eq!(
            hook["objectSelector"]["matchLabels"]["component"],
            "taskmanager"
        );

        let client = &hook["clientConfig"]["service"];
        assert_eq!(client["name"], service["metadata"]["name"]);
        assert_eq!(client["namespace"], NAMESPACE);
        assert_eq!(client["path"], "/mutate");
        assert_eq!(client["port"], 443);
        assert!(
            hook["clientConfig"].get("url").is_none(),
            "the webhook is reached through its Service"
        );
    }
}

/// The webhook's own ClusterRole reads and nothing more; the one write an install may add, the
/// heat bands' node patch, is in a ClusterRole of its own ([`check_heat_bands`]).
fn check_rbac(docs: &[Value]) {
    let roles = all(docs, "ClusterRole");
    let bands = roles
        .iter()
        .filter(|r| r["metadata"]["name"] == "placement-webhook-heat-bands")
        .count();
    assert_eq!(roles.len(), 1 + bands, "no other ClusterRole");
    let role = named(docs, "ClusterRole", None, "placement-webhook");
    for rule in role["rules"].as_array().expect("rules") {
        assert_eq!(strings(&rule["apiGroups"]), [""]);
        for resource in strings(&rule["resources"]) {
            assert!(
                ["nodes", "pods", "namespaces"].contains(&resource),
                "{resource}"
            );
        }
        for verb in strings(&rule["verbs"]) {
            assert!(
                ["get", "list", "watch"].contains(&verb),
                "write verb {verb}"
            );
        }
        assert!(rule.get("nonResourceURLs").is_none());
        assert!(rule.get("resourceNames").is_none());
    }
    let text = role.to_string();
    assert!(!text.contains("\"*\""), "wildcard in {text}");
    assert!(!text.contains("secrets"), "secrets in {text}");
    // In its own namespace: read the EndpointSlices of its Service (the live replicas), nothing
    // more; in kube-system: read the default scheduler's leader lease, nothing more.
    let in_namespace = |kind: &str, namespace: &str| -> &Value {
        let found: Vec<&Value> = all(docs, kind)
            .into_iter()
            .filter(|d| d["metadata"]["namespace"] == namespace)
            .collect();
        assert_eq!(found.len(), 1, "expected one {kind} in {namespace}");
        found[0]
    };
    for (namespace, rules) in [
        (
            NAMESPACE,
            // Reads the replicas' slices; writes two objects by name: the deciding replica's
            // Lease and the Service's slice its holder fills.
            json!([{"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"],
                    "verbs": ["get", "list", "watch"]},
                   {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"],
                    "resourceNames": ["placement-webhook-decider"], "verbs": ["patch"]},
                   {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                    "resourceNames": ["placement-webhook-decider"], "verbs": ["get", "patch"]}]),
        ),
        (
            "kube-system",
            json!([{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                    "resourceNames": ["kube-scheduler"], "verbs": ["get", "list", "watch"]}]),
        ),
    ] {
        let role = in_namespace("Role", namespace);
        assert_eq!(role["rules"], rules, "the Role in {namespace}");
        let binding = in_namespace("RoleBinding", namespace);
        assert_eq!(binding["roleRef"]["name"], role["metadata"]["name"]);
        assert_eq!(
            binding["subjects"],
            json!([{"kind": "ServiceAccount", "name": "placement-webhook", "namespace": NAMESPACE}])
        );
    }
    assert_eq!(all(docs, "Role").len(), 2, "no other Role");

    let binding = named(docs, "ClusterRoleBinding", None, "placement-webhook");
    assert_eq!(binding["roleRef"]["name"], role["metadata"]["name"]);
    let account = one(docs, "ServiceAccount");
    assert_eq!(
        binding["subjects"],
        json!([{"kind": "ServiceAccount", "name": account["metadata"]["name"], "namespace": NAMESPACE}])
    );
}

/// Checks the Deployment and returns its pod spec.
fn check_deployment(docs: &[Value]) -> &Value {
    let deployment = one(docs, "Deployment");
    assert_eq!(deployment["metadata"]["namespace"], NAMESPACE);
    assert_eq!(deployment["spec"]["replicas"], 2);
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(
        pod["serviceAccountName"],
        one(docs, "ServiceAccount")["metadata"]["name"]
    );
    let anti =
        &pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"];
    assert!(
        anti.as_array()
            .expect("preferred anti-affinity")
            .iter()
            .any(|t| t["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"),
        "replicas spread by hostname: {anti}"
    );

    let pod_sc = &pod["securityContext"];
    assert_eq!(pod_sc["runAsNonRoot"], true);
    assert_eq!(pod_sc["runAsUser"], 65532);
    assert_eq!(pod_sc["seccompProfile"]["type"], "RuntimeDefault");
    assert!(pod.get("hostNetwork").is_none() && pod.get("hostPID").is_none());

    let containers = pod["containers"].as_array().expect("containers");
    assert_eq!(containers.len(), 1);
    let c = &containers[0];
    let sc = &c["securityContext"];
    assert_eq!(sc["runAsNonRoot"], true);
    assert_eq!(sc["runAsUser"], 65532);
    assert_eq!(sc["readOnlyRootFilesystem"], true);
    assert_eq!(sc["allowPrivilegeEscalation"], false);
    assert_eq!(sc["capabilities"]["drop"], json!(["ALL"]));
    assert!(sc["capabilities"].get("add").is_none());
    assert_eq!(sc["seccompProfile"]["type"], "RuntimeDefault");
    assert_ne!(sc["privileged"], true);
    for kind in ["requests", "limits"] {
        for resource in ["cpu", "memory"] {
            assert!(
                c["resources"][kind][resource].is_string(),
                "{kind}.{resource} missing"
            );
        }
    }
    for (probe, path) in [("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")] {
        let get = &c[probe]["httpGet"];
        assert_eq!(get["path"], path);
        assert_eq!(get["scheme"], "HTTPS");
        assert_eq!(get["port"], "https");
    }
    assert_eq!(
        c["ports"],
        json!([{"name": "https", "containerPort": 8443, "protocol": "TCP"}])
    );
    assert_eq!(
        strings(&c["args"]),
        [
            "serve",
            "--config",
            "/etc/placement-webhook/config.yaml",
            "--tls-cert",
            "/etc/placement-webhook/tls/tls.crt",
            "--tls-key",
            "/etc/placement-webhook/tls/tls.key",
            "--log-format",
            "json",
        ]
    );

    // The TLS Secret is a volume mounted as a directory (no subPath), so kubelet's updates
    // reach the running server.
    let volumes = pod["volumes"].as_array().expect("volumes");
    let tls = volumes
        .iter()
        .find(|v| v["secret"]["secretName"] == TLS_SECRET)
        .expect("TLS Secret volume");
    let mount = c["volumeMounts"]
        .as_array()
        .expect("volumeMounts")
        .iter()
        .find(|m| m["name"] == tls["name"])
        .expect("TLS volume mounted");
    assert_eq!(mount["mountPath"], "/etc/placement-webhook/tls");
    assert!(mount.get("subPath").is_none(), "subPath never sees updates");
    assert_eq!(mount["readOnly"], true);

    // The Service the apiserver calls selects nothing: its one EndpointSlice is the deciding
    // replica's, written by the holder of the Lease of the same name (created empty here).
    let service = named(docs, "Service", Some(NAMESPACE), "placement-webhook");
    assert_eq!(
        service["spec"]["ports"],
        json!([{"name": "https", "port": 443, "targetPort": 8443, "protocol": "TCP"}])
    );
    assert!(service["spec"].get("selector").is_none(), "{service}");
    let slice = one(docs, "EndpointSlice");
    assert_eq!(slice["metadata"]["name"], "placement-webhook-decider");
    assert_eq!(
        slice["metadata"]["labels"]["kubernetes.io/service-name"],
        "placement-webhook"
    );
    assert_eq!(
        slice["ports"][0]["name"],
        service["spec"]["ports"][0]["name"]
    );
    assert_eq!(slice["endpoints"], json!([]));
    let lease = one(docs, "Lease");
    assert_eq!(lease["metadata"]["name"], "placement-webhook-decider");
    // The live replicas: a headless Service selecting the webhook's pods.
    let replicas = named(
        docs,
        "Service",
        Some(NAMESPACE),
        "placement-webhook-replicas",
    );
    assert_eq!(replicas["spec"]["clusterIP"], "None");
    let labels = &deployment["spec"]["template"]["metadata"]["labels"];
    for (k, v) in replicas["spec"]["selector"].as_object().expect("selector") {
        assert_eq!(&labels[k], v, "Service selects the webhook pods");
    }
    let env = c["env"].as_array().expect("env");
    assert!(
        env.iter()
            .any(|e| e["name"] == "POD_IP"
                && e["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"),
        "POD_IP from the downward API"
    );

    let pdb = one(docs, "PodDisruptionBudget");
    assert_eq!(pdb["spec"]["minAvailable"], 1);
    for (k, v) in pdb["spec"]["selector"]["matchLabels"]
        .as_object()
        .expect("PDB selector")
    {
        assert_eq!(&labels[k], v, "PDB selects the webhook pods");
    }
    pod
}

/// The mounted ConfigMap's config loads and validates, and agrees with the objectSelector.
fn check_config(docs: &[Value], pod: &Value) {
    let config_volume = pod["volumes"]
        .as_array()
        .expect("volumes")
        .iter()
        .find(|v| v.get("configMap").is_some())
        .expect("config volume");
    let name = &config_volume["configMap"]["name"];
    let map = all(docs, "ConfigMap")
        .into_iter()
        .find(|m| &m["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("ConfigMap {name} is not in the build"));
    let text = map["data"]["config.yaml"]
        .as_str()
        .expect("config.yaml key");
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("config.yaml");
    std::fs::write(&path, text).expect("write config");
    let config = Config::from_file(&path).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(config.listen.port(), 8443, "the Service targets 8443");

    let hook = &one(docs, "MutatingWebhookConfiguration")["webhooks"][0];
    let selector = &hook["objectSelector"];
    let labels: Vec<(&String, &str)> = selector["matchLabels"]
        .as_object()
        .expect("matchLabels")
        .iter()
        .map(|(k, v)| (k, v.as_str().expect("label value")))
        .collect();
    let targets: Vec<(&String, &str)> = config
        .targets
        .match_labels
        .iter()
        .map(|(k, v)| (k, v.as_str()))
        .collect();
    assert_eq!(labels, targets, "objectSelector.matchLabels vs targets");
    let expressions = selector["matchExpressions"]
        .as_array()
        .expect("expressions");
    assert_eq!(expressions.len(), config.targets.match_expressions.len());
    for (e, r) in expressions.iter().zip(&config.targets.match_expressions) {
        let operator = match r.operator {
            SelectorOperator::In => "In",
            SelectorOperator::NotIn => "NotIn",
            SelectorOperator::Exists => "Exists",
            SelectorOperator::DoesNotExist => "DoesNotExist",
        };
        assert_eq!(e["key"], r.key.as_str());
        assert_eq!(e["operator"], operator);
        assert_eq!(strings(&e["values"]), r.values);
    }
}

fn check_base(docs: &[Value]) {
    check_webhook_registration(docs);
    check_rbac(docs);
    let pod = check_deployment(docs);
    // The downward API names the replica: it finds itself among its Service's endpoints.
    let env = &pod["containers"][0]["env"];
    for (name, field) in [
        ("POD_NAME", "metadata.name"),
        ("POD_NAMESPACE", "metadata.namespace"),
    ] {
        assert!(
            env.as_array()
                .expect("env")
                .iter()
                .any(|e| e["name"] == name && e["valueFrom"]["fieldRef"]["fieldPath"] == field),
            "{name} from {field}"
        );
    }
    check_config(docs, pod);
    let namespace = one(docs, "Namespace");
    assert_eq!(namespace["metadata"]["name"], NAMESPACE);
    for doc in docs {
        let kind = doc["kind"].as_str().expect("kind");
        let cluster_scoped = [
            "Namespace",
            "ClusterRole",
            "ClusterRoleBinding",
            "MutatingWebhookConfiguration",
            "ValidatingAdmissionPolicy",
            "ValidatingAdmissionPolicyBinding",
        ];
        // The one exception: read access to the default scheduler's lease, in kube-system.
        let scheduler_lease = doc["metadata"]["name"] == "placement-webhook-scheduler-order"
            && doc["metadata"]["namespace"] == "kube-system";
        if !cluster_scoped.contains(&kind) && !scheduler_lease {
            assert_eq!(doc["metadata"]["namespace"], NAMESPACE, "{kind}");
        }
        assert_ne!(kind, "Secret", "no Secret (and so no key) is shipped");
    }
}

#[test]
fn base_install_is_safe() {
    let docs = build("deploy");
    check_base(&docs);
    // A static install carries no CA injection annotation (and no caBundle until the user adds it).
    let hook = one(&docs, "MutatingWebhookConfiguration");
    assert!(
        hook["metadata"]["annotations"]
            .get("cert-manager.io/inject-ca-from")
            .is_none()
    );
}

#[test]
fn cert_manager_overlay_injects_the_ca_of_the_serving_certificate() {
    let docs = build("deploy/cert-manager");
    check_base(&docs);
    let hook = one(&docs, "MutatingWebhookConfiguration");
    let from = hook["metadata"]["annotations"]["cert-manager.io/inject-ca-from"]
        .as_str()
        .expect("inject-ca-from annotation");
    let (ns, name) = from.split_once('/').expect("<namespace>/<name>");
    assert!(
        hook["webhooks"][0]["clientConfig"]
            .get("caBundle")
            .is_none(),
        "the injector owns caBundle"
    );
    let certs = all(&docs, "Certificate");
    let cert = certs
        .iter()
        .find(|c| c["metadata"]["namespace"] == ns && c["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("inject-ca-from names {from}, which is not in the build"));
    assert_eq!(
        cert["spec"]["secretName"], TLS_SECRET,
        "the Secret the pods mount"
    );
    assert_ne!(cert["spec"]["isCA"], true);
    let names = strings(&cert["spec"]["dnsNames"]);
    for dns in [
        "placement-webhook",
        "placement-webhook.placement-webhook",
        "placement-webhook.placement-webhook.svc",
        "placement-webhook.placement-webhook.svc.cluster.local",
    ] {
        assert!(names.contains(&dns), "{dns} missing from {names:?}");
    }

    // issuer chain: serving cert ← CA Issuer ← CA Certificate ← self-signed Issuer.
    let issuer = |name: &Value| {
        all(&docs, "Issuer")
            .into_iter()
            .find(|i| &i["metadata"]["name"] == name && i["metadata"]["namespace"] == NAMESPACE)
            .unwrap_or_else(|| panic!("Issuer {name} missing"))
    };
    assert_eq!(cert["spec"]["issuerRef"]["kind"], "Issuer");
    let ca_issuer = issuer(&cert["spec"]["issuerRef"]["name"]);
    let ca_secret = &ca_issuer["spec"]["ca"]["secretName"];
    let ca_cert = certs
        .iter()
        .find(|c| &c["spec"]["secretName"] == ca_secret)
        .expect("a Certificate writes the CA Secret");
    assert_eq!(ca_cert["spec"]["isCA"], true);
    let root = issuer(&ca_cert["spec"]["issuerRef"]["name"]);
    assert!(root["spec"].get("selfSigned").is_some());
}

#[test]
fn monitoring_overlay_scrapes_the_webhook_service() {
    let (monitoring, base) = (build("deploy/monitoring"), build("deploy"));
    let monitor = one(&monitoring, "ServiceMonitor");
    assert_eq!(monitor["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(monitor["metadata"]["namespace"], NAMESPACE);
    // Every replica is scraped: the headless Service, not the one the apiserver calls.
    let service = named(
        &base,
        "Service",
        Some(NAMESPACE),
        "placement-webhook-replicas",
    );
    for (k, v) in monitor["spec"]["selector"]["matchLabels"]
        .as_object()
        .expect("selector")
    {
        assert_eq!(&service["metadata"]["labels"][k], v);
    }
    let endpoint = &monitor["spec"]["endpoints"][0];
    assert_eq!(endpoint["port"], service["spec"]["ports"][0]["name"]);
    assert_eq!(endpoint["scheme"], "https");
    assert_eq!(endpoint["path"], "/metrics");
    assert_eq!(
        endpoint["tlsConfig"]["serverName"],
        "placement-webhook.placement-webhook.svc"
    );
    assert_ne!(endpoint["tlsConfig"]["insecureSkipVerify"], true);
}

fn named<'a>(docs: &'a [Value], kind: &str, namespace: Option<&str>, name: &str) -> &'a Value {
    let found: Vec<&Value> = all(docs, kind)
        .into_iter()
        .filter(|d| d["metadata"]["name"] == name)
        .filter(|d| namespace.is_none_or(|ns| d["metadata"]["namespace"] == ns))
        .collect();
    assert_eq!(found.len(), 1, "expected exactly one {kind} {name}");
    found[0]
}

/// The text of the file at `path` in `container`, from the ConfigMap volume of `pod` mounted
/// there (as a directory, or as that one file through subPath).
fn mounted_file<'a>(docs: &'a [Value], pod: &Value, container: &Value, path: &str) -> &'a str {
    for mount in container["volumeMounts"].as_array().expect("volumeMounts") {
        let at = mount["mountPath"].as_str().expect("mountPath");
        let key = match mount["subPath"].as_str() {
            Some(sub) if at == path => sub,
            Some(_) => continue,
            None => match path.strip_prefix(at).and_then(|r| r.strip_prefix('/')) {
                Some(rest) => rest,
                None => continue,
            },
        };
        let volume = pod["volumes"]
            .as_array()
            .expect("volumes")
            .iter()
            .find(|v| v["name"] == mount["name"])
            .unwrap_or_else(|| panic!("no volume {} for {at}", mount["name"]));
        let map_name = volume["configMap"]["name"]
            .as_str()
            .unwrap_or_else(|| panic!("{path} is not from a ConfigMap: {volume}"));
        let map = named(docs, "ConfigMap", pod_namespace(docs, pod), map_name);
        return map["data"][key]
            .as_str()
            .unwrap_or_else(|| panic!("ConfigMap {map_name} has no key {key}"));
    }
    panic!("nothing is mounted at {path}");
}

/// The namespace of the Deployment whose pod spec is `pod`.
fn pod_namespace<'a>(docs: &'a [Value], pod: &Value) -> Option<&'a str> {
    all(docs, "Deployment")
        .into_iter()
        .find(|d| &d["spec"]["template"]["spec"] == pod)
        .and_then(|d| d["metadata"]["namespace"].as_str())
}

fn binds_scheduler_account(binding: &Value) -> bool {
    binding["subjects"]
        == json!([{"kind": "ServiceAccount", "name": SCHEDULER, "namespace": NAMESPACE}])
}

#[test]
fn scheduler_profile_overlay_runs_the_scheduler_the_webhook_models() {
    let (docs, base) = (
        build("deploy/scheduler-profile"),
        build("deploy/no-heat-bands"),
    );
    check_webhook_registration(&docs);

    // The stock kube-scheduler, probed on its HTTPS port, within the namespace's `restricted`
    // Pod Security level.
    let scheduler = named(&docs, "Deployment", Some(NAMESPACE), SCHEDULER);
    let pod = &scheduler["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], SCHEDULER);
    // A leader and a standby that takes the Lease when the leader crashes, on different nodes
    // where it can, and a drain never takes both.
    assert_eq!(scheduler["spec"]["replicas"], 2);
    let spread = &pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
        [0]["podAffinityTerm"];
    assert_eq!(spread["topologyKey"], "kubernetes.io/hostname");
    assert_eq!(
        spread["labelSelector"]["matchLabels"],
        scheduler["spec"]["selector"]["matchLabels"]
    );
    let budget = named(&docs, "PodDisruptionBudget", Some(NAMESPACE), SCHEDULER);
    assert_eq!(budget["spec"]["minAvailable"], 1);
    assert_eq!(
        budget["spec"]["selector"], scheduler["spec"]["selector"],
        "the budget covers the scheduler's pods"
    );
    let containers = pod["containers"].as_array().expect("containers");
    assert_eq!(containers.len(), 1);
    let c = &containers[0];
    assert_eq!(c["image"], "registry.k8s.io/kube-scheduler:v1.33.0");
    let config_path = c["command"]
        .as_array()
        .into_iter()
        .chain(c["args"].as_array())
        .flatten()
        .find_map(|a| a.as_str()?.strip_prefix("--config="))
        .expect("--config=PATH");
    for (probe, path) in [("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")] {
        let get = &c[probe]["httpGet"];
        assert_eq!(get["path"], path);
        assert_eq!(get["scheme"], "HTTPS");
        assert_eq!(get["port"], 10259);
    }
    for resource in ["cpu", "memory"] {
        assert!(
            c["resources"]["requests"][resource].is_string(),
            "requests.{resource} missing"
        );
    }
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    let sc = &c["securityContext"];
    assert_eq!(sc["allowPrivilegeEscalation"], false);
    assert_eq!(sc["capabilities"]["drop"], json!(["ALL"]));
    assert_eq!(sc["seccompProfile"]["type"], "RuntimeDefault");

    // Its KubeSchedulerConfiguration: the profile scores every node, and leader election uses
    // a lease of its own.
    let scheduler_text = mounted_file(&docs, pod, c, config_path);
    let dir = tempfile::tempdir().expect("tempdir");
    let scheduler_file = dir.path().join("scheduler-config.yaml");
    std::fs::write(&scheduler_file, scheduler_text).expect("write scheduler config");
    let model = kube_scheduler::load(&scheduler_file, SCHEDULER).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(model.percentage_of_nodes_to_score, 100);
    let raw: Value = serde_saphyr::from_str(scheduler_text).expect("YAML");
    let election = &raw["leaderElection"];
    assert_eq!(election["leaderElect"], true);
    assert_eq!(election["resourceName"], SCHEDULER);
    assert_eq!(election["resourceNamespace"], NAMESPACE);

    // RBAC as in "Configure Multiple Schedulers", plus the lease.
    for role in ["system:kube-scheduler", "system:volume-scheduler"] {
        assert!(
            all(&docs, "ClusterRoleBinding").iter().any(|b| b["roleRef"]
                == json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role})
                && binds_scheduler_account(b)),
            "no ClusterRoleBinding of {SCHEDULER} to {role}"
        );
    }
    assert!(
        all(&docs, "RoleBinding")
            .iter()
            .any(|b| b["metadata"]["namespace"] == "kube-system"
                && b["roleRef"]["kind"] == "Role"
                && b["roleRef"]["name"] == "extension-apiserver-authentication-reader"
                && binds_scheduler_account(b)),
        "no RoleBinding to extension-apiserver-authentication-reader in kube-system"
    );
    let lease_binding = all(&docs, "RoleBinding")
        .into_iter()
        .find(|b| b["metadata"]["namespace"] == NAMESPACE && binds_scheduler_account(b))
        .expect("a RoleBinding for the lease");
    let lease_role = named(
        &docs,
        "Role",
        Some(NAMESPACE),
        lease_binding["roleRef"]["name"]
            .as_str()
            .expect("role name"),
    );
    let lease_rules = lease_role["rules"].as_array().expect("rules");
    for verb in ["get", "update"] {
        assert!(
            lease_rules
                .iter()
                .any(|r| strings(&r["apiGroups"]) == ["coordination.k8s.io"]
                    && strings(&r["resources"]) == ["leases"]
                    && r["resourceNames"] == json!([SCHEDULER])
                    && strings(&r["verbs"]).contains(&verb)),
            "{verb} on lease {SCHEDULER} not granted: {lease_role}"
        );
    }
    assert!(
        !lease_role.to_string().contains("\"*\""),
        "wildcard in {lease_role}"
    );

    // The webhook routes steered pods to that scheduler and reads the same file.
    let webhook = named(&docs, "Deployment", Some(NAMESPACE), "placement-webhook");
    let webhook_pod = &webhook["spec"]["template"]["spec"];
    let webhook_container = &webhook_pod["containers"][0];
    let config_text = mounted_file(
        &docs,
        webhook_pod,
        webhook_container,
        "/etc/placement-webhook/config.yaml",
    );
    let config: Config = serde_saphyr::from_str(config_text).unwrap_or_else(|e| panic!("{e}"));
    // Both: the affinity steers, the schedulerName routes to the profile scoring every node.
    assert_eq!(config.mode, Mode::Both);
    assert_eq!(config.scheduler_name, SCHEDULER);
    let file = config
        .scheduler_config_file
        .as_ref()
        .and_then(|p| p.to_str())
        .expect("scheduler_config_file set");
    assert_eq!(
        mounted_file(&docs, webhook_pod, webhook_container, file),
        scheduler_text,
        "the webhook reads the scheduler's own file"
    );

    // Loaded as `serve` loads it, with the file where this test put it.
    let config_file = dir.path().join("config.yaml");
    let local = config_text.replace(file, &scheduler_file.display().to_string());
    std::fs::write(&config_file, local).expect("write config");
    let loaded = Config::from_file(&config_file).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(loaded.scheduler, model);

    // Apart from those keys, the overlay's config is the base's.
    let base_webhook = named(&base, "Deployment", Some(NAMESPACE), "placement-webhook");
    let base_text = mounted_file(
        &base,
        &base_webhook["spec"]["template"]["spec"],
        &base_webhook["spec"]["template"]["spec"]["containers"][0],
        "/etc/placement-webhook/config.yaml",
    );
    // The profile scores every node: the bands are off (and no node write is granted).
    assert!(!loaded.placement.heat_bands.enabled);
    let without_routing = |text: &str| {
        let mut v: Value = serde_saphyr::from_str(text).expect("YAML");
        let map = v.as_object_mut().expect("a mapping");
        for key in ["mode", "scheduler_name", "scheduler_config_file"] {
            map.remove(key);
        }
        if let Some(placement) = map.get_mut("placement").and_then(Value::as_object_mut) {
            placement.remove("heat_bands");
        }
        v
    };
    assert_eq!(
        without_routing(config_text),
        without_routing(base_text),
        "deploy/scheduler-profile/config.yaml drifted from deploy/base/config.yaml"
    );
}

/// The Helm chart keeps copies of what Helm cannot read from outside the chart: the dashboard
/// and the alerting rules byte for byte, and the base config as the `config` value (equal as
/// YAML). tests/real_cluster/helm.rs compares the chart's renderings with these builds.
#[test]
fn helm_chart_copies_match_deploy() {
    let chart = repo_path("deploy/helm/placement-webhook");
    for (copy, original) in [
        ("files/dashboard.json", "deploy/monitoring/dashboard.json"),
        (
            "files/placement-webhook.rules.yaml",
            "deploy/monitoring/rules/placement-webhook.rules.yaml",
        ),
    ] {
        let read =
            |p: PathBuf| std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        assert!(
            read(chart.join(copy)) == read(repo_path(original)),
            "{copy} in the chart differs from {original}: copy it again"
        );
    }
    let yaml = |p: PathBuf| -> Value {
        let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        serde_saphyr::from_str(&text).expect("YAML")
    };
    let values = yaml(chart.join("values.yaml"));
    assert_eq!(
        values["config"],
        yaml(repo_path("deploy/base/config.yaml")),
        "the chart's config value drifted from deploy/base/config.yaml"
    );
}

/// deploy/ keeps the heat bands (the component deploy/heat-bands): it is deploy/no-heat-bands
/// plus the right to patch Nodes, a ValidatingAdmissionPolicy (bound to deny) holding the
/// webhook's account to the band label, and the base config with the bands on: nothing else
/// changes. deploy/cert-manager keeps them too.
#[test]
fn deploy_keeps_the_heat_bands_and_no_heat_bands_leaves_out_only_them() {
    let (docs, base) = (build("deploy"), build("deploy/no-heat-bands"));
    check_base(&base);
    check_heat_bands(&docs, &base);
    check_heat_bands(&build("deploy/cert-manager"), &base);
}

/// `docs` is `base` (bands off) plus the heat bands' RBAC, policy and config.
fn check_heat_bands(docs: &[Value], base: &[Value]) {
    let key = |d: &Value| {
        format!(
            "{}/{}/{}",
            d["kind"].as_str().unwrap_or_default(),
            d["metadata"]["namespace"].as_str().unwrap_or_default(),
            d["metadata"]["name"].as_str().unwrap_or_default()
        )
    };
    let bands_objects = [
        "ClusterRole//placement-webhook-heat-bands",
        "ClusterRoleBinding//placement-webhook-heat-bands",
        "ValidatingAdmissionPolicy//placement-webhook-heat-bands",
        "ValidatingAdmissionPolicyBinding//placement-webhook-heat-bands",
    ];
    for object in bands_objects {
        assert!(docs.iter().any(|d| key(d) == object), "{object} missing");
        assert!(
            !base.iter().any(|d| key(d) == object),
            "{object} without bands"
        );
    }
    // Nothing else is added: the config's name carries a hash of its content, the one object
    // renamed.
    let config_maps = |docs: &[Value]| all(docs, "ConfigMap").len();
    assert_eq!(config_maps(docs), config_maps(base));
    let others = docs
        .iter()
        .map(key)
        .filter(|k| !bands_objects.contains(&k.as_str()))
        .filter(|k| !k.starts_with("ConfigMap/"))
        .filter(|k| !base.iter().any(|b| key(b) == *k))
        .collect::<Vec<_>>();
    let certificates = docs.len() - base.len() - bands_objects.len();
    assert!(
        others.len() == certificates
            && others
                .iter()
                .all(|k| k.starts_with("Certificate/") || k.starts_with("Issuer/")),
        "added besides the bands: {others:?}"
    );
    let policy = named(
        docs,
        "ValidatingAdmissionPolicy",
        None,
        "placement-webhook-heat-bands",
    );
    let role = named(docs, "ClusterRole", None, "placement-webhook-heat-bands");
    assert_eq!(
        role["rules"],
        json!([{"apiGroups": [""], "resources": ["nodes"], "verbs": ["patch"]}])
    );
    let binding = named(
        docs,
        "ClusterRoleBinding",
        None,
        "placement-webhook-heat-bands",
    );
    assert_eq!(
        binding["subjects"],
        json!([{"kind": "ServiceAccount", "name": "placement-webhook", "namespace": NAMESPACE}])
    );
    assert_eq!(policy["spec"]["failurePolicy"], "Fail");
    let condition = policy["spec"]["matchConditions"][0]["expression"]
        .as_str()
        .expect("a match condition");
    // Any namespace's ServiceAccount of the webhook's name: an overlay's `namespace:` moves it.
    assert_eq!(
        condition,
        "request.userInfo.username.startsWith('system:serviceaccount:') \
         && request.userInfo.username.endsWith(':placement-webhook')"
    );
    let policy_binding = named(
        docs,
        "ValidatingAdmissionPolicyBinding",
        None,
        "placement-webhook-heat-bands",
    );
    assert_eq!(policy_binding["spec"]["validationActions"], json!(["Deny"]));

    // The config: the base's with the bands on, under the key the policy names.
    let config_text = |docs: &[Value]| -> String {
        let webhook = named(docs, "Deployment", Some(NAMESPACE), "placement-webhook");
        mounted_file(
            docs,
            &webhook["spec"]["template"]["spec"],
            &webhook["spec"]["template"]["spec"]["containers"][0],
            "/etc/placement-webhook/config.yaml",
        )
        .to_string()
    };
    let text = config_text(docs);
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("config.yaml");
    std::fs::write(&file, &text).expect("write config");
    let loaded = Config::from_file(&file).unwrap_or_else(|e| panic!("{e}"));
    let bands = &loaded.placement.heat_bands;
    assert!(bands.enabled);
    let base_text = config_text(base);
    std::fs::write(&file, &base_text).expect("write config");
    let off = Config::from_file(&file).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        !off.placement.heat_bands.enabled,
        "deploy/no-heat-bands keeps them"
    );
    assert!(
        policy["spec"]["variables"][0]["expression"]
            .as_str()
            .is_some_and(|e| e == format!("'{}'", bands.key)),
        "the policy names the config's key {}",
        bands.key
    );
    assert_eq!(
        policy["spec"]["variables"][1],
        json!({"name": "bands", "expression": bands.bands.to_string()}),
        "the policy allows the config's band numbers"
    );
    let without_bands = |text: &str| {
        let mut v: Value = serde_saphyr::from_str(text).expect("YAML");
        if let Some(placement) = v["placement"].as_object_mut() {
            placement.remove("heat_bands");
        }
        v
    };
    assert_eq!(
        without_bands(&text),
        without_bands(&base_text),
        "deploy/no-heat-bands/config.yaml drifted from deploy/base/config.yaml"
    );
}
