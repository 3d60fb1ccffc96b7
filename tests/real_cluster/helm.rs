//! The Helm chart (deploy/helm/placement-webhook) against the kustomize tree it mirrors: `helm
//! lint` passes, `helm template` renders the objects `kubectl kustomize` builds for deploy/ and
//! each overlay (up to the differences listed in [`DIFFERENCES`], which docs/helm.md documents),
//! the real apiserver accepts every rendering, and `helm install` / `helm uninstall` work as
//! documented under another release name and namespace. Helm and kubectl are the pinned ones
//! built by tests/kube/build.sh.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

use placement_webhook::config::Config;
use serde_json::{Map, Value};

use crate::fixture::serial;
use crate::install::accept_any;
use crate::support::kube::webhook::repo_path;
use crate::support::kube::{ControlPlane, Options, assets};

const CHART: &str = "deploy/helm/placement-webhook";
/// The release name and namespace the defaults are written for (README: "Install on a cluster").
const RELEASE: &str = "placement-webhook";
const NAMESPACE: &str = "placement-webhook";

/// What tells a `helm template` rendering from `kubectl kustomize` after normalisation, each
/// documented in docs/helm.md ("Differences from deploy/"). [`normalise`] removes exactly these.
const DIFFERENCES: [&str; 5] = [
    "no Namespace: Helm needs the release namespace before it installs into it, so the chart \
     cannot own it; create and label it first (deploy/base/namespace.yaml's labels)",
    "labels helm.sh/chart, app.kubernetes.io/managed-by, app.kubernetes.io/instance and \
     app.kubernetes.io/version on every object, and app.kubernetes.io/instance in every selector",
    "the ConfigMaps placement-webhook-config and placement-scheduler-config have fixed names \
     (kustomize's configMapGenerator appends a hash of their content)",
    "the pod templates carry checksum/config (webhook) and checksum/scheduler-config (both \
     Deployments with schedulerProfile.enabled): a change of a ConfigMap rolls the pods",
    "config.yaml and scheduler-config.yaml are written from values (key order, no comments, \
     0.0 written as 0): compared as parsed YAML, numbers by value",
];

/// Labels Helm's conventions add; removed from every label map and selector.
const HELM_LABELS: [&str; 4] = [
    "helm.sh/chart",
    "app.kubernetes.io/managed-by",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/version",
];
/// The ConfigMaps kustomize's configMapGenerator names `<name>-<hash>`.
const GENERATED: [&str; 2] = ["placement-webhook-config", "placement-scheduler-config"];
/// ConfigMap keys holding a YAML file.
const YAML_FILES: [&str; 2] = ["config.yaml", "scheduler-config.yaml"];
const CHECKSUMS: [&str; 2] = ["checksum/config", "checksum/scheduler-config"];

/// The chart's switches and the kustomizations that render the same objects.
const CASES: [(&str, &[&str], &[&str]); 5] = [
    ("defaults", &[], &["deploy"]),
    (
        "schedulerProfile",
        &["schedulerProfile.enabled=true"],
        &["deploy/scheduler-profile"],
    ),
    (
        "monitoring",
        &["monitoring.enabled=true"],
        &["deploy", "deploy/monitoring"],
    ),
    (
        "certManager",
        &["tls.certManager.enabled=true"],
        &["deploy/cert-manager"],
    ),
    (
        "noHeatBands",
        &["heatBands.enabled=false"],
        &["deploy/no-heat-bands"],
    ),
];

/// The cluster `helm template` renders for (helm's own default is 1.20): the pinned apiserver.
const KUBE_VERSION: &str = "1.36.0";

struct Tools {
    helm: PathBuf,
    kubectl: PathBuf,
    /// HELM_CACHE_HOME, HELM_CONFIG_HOME and HELM_DATA_HOME: nothing is written to $HOME.
    home: tempfile::TempDir,
}

impl Tools {
    /// The pinned helm and kubectl.
    fn find() -> Tools {
        let bin = assets();
        Tools {
            helm: bin.join("helm"),
            kubectl: bin.join("kubectl"),
            home: tempfile::tempdir().expect("helm home"),
        }
    }

    /// Runs helm with `args`; (success, stdout, stderr).
    fn try_helm(&self, args: &[&str]) -> (bool, String, String) {
        let home = self.home.path();
        let out = Command::new(&self.helm)
            .args(args)
            .env("HELM_CACHE_HOME", home.join("cache"))
            .env("HELM_CONFIG_HOME", home.join("config"))
            .env("HELM_DATA_HOME", home.join("data"))
            .output()
            .expect("helm runs");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    fn helm(&self, args: &[&str]) -> String {
        let (ok, out, err) = self.try_helm(args);
        assert!(ok, "helm {}:\n{err}{out}", args.join(" "));
        out
    }

    /// `helm template` of the chart as release `placement-webhook` in its namespace, with `sets`,
    /// for the pinned apiserver's version.
    fn template(&self, sets: &[&str]) -> String {
        self.template_for(KUBE_VERSION, sets)
    }

    /// [`Tools::template`] for a cluster of `kube_version`.
    fn template_for(&self, kube_version: &str, sets: &[&str]) -> String {
        self.template_release(RELEASE, NAMESPACE, kube_version, sets)
    }

    /// `helm template` of the chart as `release` in `namespace`, for a cluster of
    /// `kube_version`, with `sets`.
    fn template_release(
        &self,
        release: &str,
        namespace: &str,
        kube_version: &str,
        sets: &[&str],
    ) -> String {
        let chart = repo_path(CHART).display().to_string();
        let mut args = vec![
            "template",
            release,
            &chart,
            "--namespace",
            namespace,
            "--kube-version",
            kube_version,
        ];
        for set in sets {
            args.extend(["--set", set]);
        }
        self.helm(&args)
    }

    fn kustomize(&self, dir: &str) -> String {
        let out = Command::new(&self.kubectl)
            .arg("kustomize")
            .arg(repo_path(dir))
            .output()
            .expect("kubectl runs");
        assert!(
            out.status.success(),
            "kubectl kustomize {dir}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("UTF-8")
    }
}

fn parse(text: &str, what: &str) -> Vec<Value> {
    serde_saphyr::from_multiple::<Value>(text)
        .unwrap_or_else(|e| panic!("{what} is not YAML: {e}"))
        .into_iter()
        .filter(|d| !d.is_null())
        .collect()
}

fn key(doc: &Value) -> (String, String, String) {
    let s = |v: &Value| v.as_str().unwrap_or("").to_string();
    (
        s(&doc["kind"]),
        s(&doc["metadata"]["namespace"]),
        s(&doc["metadata"]["name"]),
    )
}

fn sorted(mut docs: Vec<Value>) -> Vec<Value> {
    docs.sort_by_key(key);
    docs
}

/// Removes Helm's labels from every label map and selector under `value`.
fn drop_helm_labels(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                if matches!(k.as_str(), "labels" | "matchLabels" | "selector")
                    && let Value::Object(labels) = v
                {
                    for label in HELM_LABELS {
                        labels.remove(label);
                    }
                }
                drop_helm_labels(v);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(drop_helm_labels),
        _ => {}
    }
}

/// Replaces every string equal to a key of `names` by its value.
fn rename(value: &mut Value, names: &[(String, String)]) {
    match value {
        Value::String(s) => {
            if let Some((_, to)) = names.iter().find(|(from, _)| from == s) {
                *s = to.clone();
            }
        }
        Value::Object(map) => map.values_mut().for_each(|v| rename(v, names)),
        Value::Array(items) => items.iter_mut().for_each(|v| rename(v, names)),
        _ => {}
    }
}

/// The YAML files in ConfigMaps, parsed (replaced by their value).
fn parse_files(doc: &mut Value) {
    if doc["kind"] != "ConfigMap" {
        return;
    }
    if let Some(data) = doc.get_mut("data").and_then(Value::as_object_mut) {
        for file in YAML_FILES {
            if let Some(Value::String(text)) = data.get(file) {
                let mut parsed: Value = serde_saphyr::from_str(text)
                    .unwrap_or_else(|e| panic!("{file} is not YAML: {e}"));
                numbers_as_floats(&mut parsed);
                data.insert(file.to_string(), parsed);
            }
        }
    }
}

/// Every number as a float: `0.0` and `0` are the same value to the webhook.
fn numbers_as_floats(value: &mut Value) {
    match value {
        Value::Number(n) => {
            if let Some(f) = n.as_f64().and_then(serde_json::Number::from_f64) {
                *n = f;
            }
        }
        Value::Object(map) => map.values_mut().for_each(numbers_as_floats),
        Value::Array(items) => items.iter_mut().for_each(numbers_as_floats),
        _ => {}
    }
}

/// A kustomize build, normalised: the Namespace taken out (returned apart), generated
/// ConfigMaps under their plain names, YAML files parsed.
fn normalise_kustomize(mut docs: Vec<Value>) -> (Vec<Value>, Vec<Value>) {
    let mut names = Vec::new();
    for doc in &docs {
        let (kind, _, name) = key(doc);
        if kind != "ConfigMap" {
            continue;
        }
        if let Some(plain) = GENERATED.iter().find(|g| {
            name.strip_prefix(&format!("{g}-")).is_some_and(|hash| {
                hash.len() == 10 && hash.chars().all(|c| c.is_ascii_alphanumeric())
            })
        }) {
            names.push((name.clone(), plain.to_string()));
        }
    }
    let (namespaces, mut docs): (Vec<Value>, Vec<Value>) =
        docs.drain(..).partition(|d| d["kind"] == "Namespace");
    for doc in &mut docs {
        rename(doc, &names);
        parse_files(doc);
    }
    (sorted(docs), namespaces)
}

/// A `helm template` rendering, normalised: Helm's labels and the checksum annotations taken out
/// (each checksum checked to be a SHA-256), YAML files parsed.
fn normalise_helm(mut docs: Vec<Value>) -> Vec<Value> {
    for doc in &mut docs {
        assert_ne!(doc["kind"], "Namespace", "the chart renders no Namespace");
        for label in HELM_LABELS {
            assert!(
                doc["metadata"]["labels"].get(label).is_some(),
                "{:?} lacks the label {label}",
                key(doc)
            );
        }
        drop_helm_labels(doc);
        if doc["kind"] == "Deployment" {
            let template = &mut doc["spec"]["template"]["metadata"];
            let annotations = template["annotations"]
                .as_object_mut()
                .expect("pod template annotations");
            assert!(
                annotations.contains_key(CHECKSUMS[0]) || annotations.contains_key(CHECKSUMS[1])
            );
            for checksum in CHECKSUMS {
                if let Some(sum) = annotations.remove(checksum) {
                    let sum = sum.as_str().expect("a string");
                    assert!(
                        sum.len() == 64 && sum.chars().all(|c| c.is_ascii_hexdigit()),
                        "{checksum}: {sum}"
                    );
                }
            }
            if annotations.is_empty() {
                template
                    .as_object_mut()
                    .expect("metadata")
                    .remove("annotations");
            }
        }
        parse_files(doc);
    }
    sorted(docs)
}

/// The first difference between two values, as a path and both sides.
fn first_difference(path: &str, a: &Value, b: &Value) -> Option<String> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            keys.into_iter().find_map(|k| {
                let none = Value::Null;
                first_difference(
                    &format!("{path}.{k}"),
                    x.get(k).unwrap_or(&none),
                    y.get(k).unwrap_or(&none),
                )
            })
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .find_map(|(i, (p, q))| first_difference(&format!("{path}[{i}]"), p, q)),
        _ if a == b => None,
        _ => Some(format!("{path}:\n  helm:      {a}\n  kustomize: {b}")),
    }
}

fn assert_same(case: &str, helm: &[Value], kustomize: &[Value]) {
    let helm_keys: Vec<_> = helm.iter().map(key).collect();
    let kustomize_keys: Vec<_> = kustomize.iter().map(key).collect();
    assert_eq!(
        helm_keys, kustomize_keys,
        "{case}: the chart renders other objects (kind, namespace, name) than kustomize"
    );
    for (h, k) in helm.iter().zip(kustomize) {
        if let Some(diff) = first_difference("", h, k) {
            panic!(
                "{case}: {:?} differs at {diff}\n(documented differences: {DIFFERENCES:#?})",
                key(h)
            );
        }
    }
}

/// `helm lint --strict` (warnings fail too) of the defaults and of every switch at once.
#[test]
fn helm_lint_passes() {
    let tools = Tools::find();
    let chart = repo_path(CHART).display().to_string();
    for sets in [
        vec![],
        vec![
            "--set",
            "schedulerProfile.enabled=true,monitoring.enabled=true,tls.certManager.enabled=true,\
         heatBands.enabled=true",
        ],
        vec!["--set", "tls.caBundle=Y2E="],
    ] {
        let mut args = vec!["lint", "--strict", &chart, "--namespace", NAMESPACE];
        args.extend(sets.iter().copied());
        let out = tools.helm(&args);
        assert!(
            out.contains("1 chart(s) linted, 0 chart(s) failed"),
            "helm {}:\n{out}",
            args.join(" ")
        );
    }
}

/// The defaults render what `kubectl kustomize deploy` builds, each switch what its overlay
/// builds, after [`DIFFERENCES`] are normalised away (and nothing else).
#[test]
fn helm_template_renders_the_kustomize_objects() {
    let tools = Tools::find();
    for (case, sets, overlays) in CASES {
        let helm = normalise_helm(parse(&tools.template(sets), case));
        let built: Vec<Value> = overlays
            .iter()
            .flat_map(|dir| parse(&tools.kustomize(dir), dir))
            .collect();
        let (kustomize, namespaces) = normalise_kustomize(built);
        // The one object the chart leaves out is the namespace it installs into, whose labels
        // docs/helm.md tells to set.
        assert_eq!(namespaces.len(), 1, "{case}: one Namespace in {overlays:?}");
        assert_eq!(namespaces[0]["metadata"]["name"], NAMESPACE);
        let labels = namespaces[0]["metadata"]["labels"]
            .as_object()
            .expect("labels");
        assert_eq!(
            labels.get("pod-security.kubernetes.io/enforce"),
            Some(&Value::from("restricted"))
        );
        assert_same(case, &helm, &kustomize);
    }
}

/// Values reach the objects they name: image, replicas, caBundle (not with cert-manager),
/// webhook settings, and another release name renames every object and reference.
#[test]
fn helm_values_reach_the_objects() {
    let tools = Tools::find();
    let by_kind = |docs: &[Value], kind: &str| -> Value {
        docs.iter()
            .find(|d| d["kind"] == kind)
            .cloned()
            .unwrap_or_else(|| panic!("no {kind}"))
    };
    let docs = parse(
        &tools.template(&[
            "image.repository=registry.example.com/placement-webhook",
            "image.tag=0.1.1",
            "replicaCount=3",
            "tls.caBundle=Y2E=",
            "webhook.timeoutSeconds=5",
            "webhook.failurePolicy=Fail",
            "config.mode=observe",
        ]),
        "values",
    );
    let deployment = by_kind(&docs, "Deployment");
    assert_eq!(deployment["spec"]["replicas"], 3);
    assert_eq!(
        deployment["spec"]["template"]["spec"]["containers"][0]["image"],
        "registry.example.com/placement-webhook:0.1.1"
    );
    let hook = by_kind(&docs, "MutatingWebhookConfiguration")["webhooks"][0].clone();
    assert_eq!(hook["clientConfig"]["caBundle"], "Y2E=");
    assert_eq!(hook["timeoutSeconds"], 5);
    assert_eq!(hook["failurePolicy"], "Fail");
    let config = by_kind(&docs, "ConfigMap");
    let config: Value =
        serde_saphyr::from_str(config["data"]["config.yaml"].as_str().expect("config"))
            .expect("YAML");
    assert_eq!(config["mode"], "observe");
    // The default config loads as `serve` loads it.
    let defaults = parse(&tools.template(&[]), "defaults");
    let text = by_kind(&defaults, "ConfigMap")["data"]["config.yaml"].clone();
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("config.yaml");
    std::fs::write(&file, text.as_str().expect("config.yaml")).expect("write config");
    let loaded = Config::from_file(&file).unwrap_or_else(|e| panic!("the chart's config: {e}"));
    assert_eq!(loaded.listen.port(), 8443, "the container port");
    let default_sum = |sets: &[&str]| {
        let docs = parse(&tools.template(sets), "checksum");
        by_kind(&docs, "Deployment")["spec"]["template"]["metadata"]["annotations"][CHECKSUMS[0]]
            .clone()
    };
    assert_ne!(
        default_sum(&[]),
        default_sum(&["config.mode=observe"]),
        "a config change rolls the pods"
    );

    // With cert-manager the injector owns caBundle, whatever the value says.
    let docs = parse(
        &tools.template(&["tls.caBundle=Y2E=", "tls.certManager.enabled=true"]),
        "cert-manager",
    );
    let hook = by_kind(&docs, "MutatingWebhookConfiguration");
    assert!(
        hook["webhooks"][0]["clientConfig"]
            .get("caBundle")
            .is_none()
    );

    // A cluster older than 1.30 cannot enforce the policy: no node write is granted and the
    // bands stay off, whatever heatBands.enabled says.
    let docs = parse(&tools.template_for("1.29.0", &[]), "1.29");
    assert!(
        !docs
            .iter()
            .any(|d| d["kind"] == "ValidatingAdmissionPolicy")
    );
    let granted = docs.iter().filter(|d| d["kind"] == "ClusterRole");
    for role in granted {
        for rule in role["rules"].as_array().into_iter().flatten() {
            let verbs = rule["verbs"].as_array().cloned().unwrap_or_default();
            assert!(
                verbs
                    .iter()
                    .all(|v| ["get", "list", "watch"].contains(&v.as_str().unwrap_or(""))),
                "a write granted on 1.29: {role}"
            );
        }
    }
    let config: Value = serde_saphyr::from_str(
        by_kind(&docs, "ConfigMap")["data"]["config.yaml"]
            .as_str()
            .expect("config"),
    )
    .expect("YAML");
    assert_ne!(config["placement"]["heat_bands"]["enabled"], true);

    // Another release in another namespace: every name and namespace follows, and the config
    // names the webhook's own Service.
    let text = tools.template_release(
        "steering",
        "steering",
        KUBE_VERSION,
        &["schedulerProfile.enabled=true,monitoring.enabled=true,tls.certManager.enabled=true"],
    );
    let docs = parse(&text, "steering");
    for doc in &docs {
        let (kind, namespace, name) = key(doc);
        assert!(
            name.starts_with("steering-placement-webhook")
                || name.starts_with("placement-scheduler"),
            "{kind} {name}"
        );
        assert!(
            ["", "steering", "kube-system"].contains(&namespace.as_str()),
            "{kind} {name} in {namespace}"
        );
    }
    let names: BTreeSet<(String, String)> = docs
        .iter()
        .map(|d| {
            let (kind, _, name) = key(d);
            (kind, name)
        })
        .collect();
    let has = |kind: &str, name: &str| names.contains(&(kind.to_string(), name.to_string()));
    let service = "steering-placement-webhook";
    assert!(has("Service", service));
    let hook = docs
        .iter()
        .find(|d| d["kind"] == "MutatingWebhookConfiguration")
        .expect("registration");
    assert_eq!(
        hook["webhooks"][0]["clientConfig"]["service"]["name"],
        service
    );
    assert_eq!(
        hook["webhooks"][0]["clientConfig"]["service"]["namespace"],
        "steering"
    );
    let from = hook["metadata"]["annotations"]["cert-manager.io/inject-ca-from"]
        .as_str()
        .expect("inject-ca-from");
    let (ns, cert) = from.split_once('/').expect("namespace/name");
    assert_eq!(ns, "steering");
    assert!(has("Certificate", cert));
    let config = docs
        .iter()
        .find(|d| d["kind"] == "ConfigMap" && d["metadata"]["name"] == format!("{service}-config"))
        .expect("config");
    let config: Value =
        serde_saphyr::from_str(config["data"]["config.yaml"].as_str().expect("config"))
            .expect("YAML");
    assert_eq!(config["service"], service);
    assert_eq!(config["scheduler_name"], "placement-scheduler");
    // The scheduler profile scores every node: no bands to keep, no node write granted.
    assert_ne!(config["placement"]["heat_bands"]["enabled"], true);
    assert!(
        !docs
            .iter()
            .any(|d| d["kind"] == "ValidatingAdmissionPolicy")
    );
    // Without it the bands are kept, and the policy names the release's own account.
    let text = tools.template_release("steering", "steering", KUBE_VERSION, &[]);
    let docs = parse(&text, "steering, bands");
    let policy = docs
        .iter()
        .find(|d| d["kind"] == "ValidatingAdmissionPolicy")
        .expect("the heat bands' policy");
    assert_eq!(
        policy["spec"]["matchConditions"][0]["expression"],
        "request.userInfo.username.startsWith('system:serviceaccount:') \
         && request.userInfo.username.endsWith(':steering-placement-webhook')"
    );
    let excluded = &hook["webhooks"][0]["namespaceSelector"]["matchExpressions"][1];
    assert_eq!(excluded["operator"], "NotIn");
    assert_eq!(
        excluded["values"],
        serde_json::json!(["kube-system", "steering"])
    );
}

/// Applies `rendered` server-side (as a dry run when asked), after permissive CRDs for the
/// custom resources whose operators are absent; one line of output per object.
fn apply(plane: &ControlPlane, case: &str, rendered: &str, dry_run: bool) {
    let served: BTreeSet<String> = plane
        .kubectl(&["api-versions"])
        .lines()
        .map(str::to_string)
        .collect();
    let docs = parse(rendered, case);
    for doc in &docs {
        let api_version = doc["apiVersion"].as_str().expect("apiVersion");
        if !served.contains(api_version) {
            accept_any(plane, api_version, doc["kind"].as_str().expect("kind"));
        }
    }
    let mut args = vec!["apply", "--server-side", "--field-manager=helm-test"];
    if dry_run {
        args.push("--dry-run=server");
    }
    args.extend(["-f", "-"]);
    let (ok, out, err) = plane.try_kubectl(&args, Some(rendered));
    assert!(ok, "{case} refused by the apiserver:\n{err}\n{out}");
    assert_eq!(
        out.lines().count(),
        docs.len(),
        "{case}: one line per object expected:\n{out}"
    );
}

/// The namespace as docs/helm.md says to create it before `helm install`.
fn create_namespace(plane: &ControlPlane, namespace: &str) {
    plane.kubectl(&["create", "namespace", namespace]);
    plane.kubectl(&[
        "label",
        "namespace",
        namespace,
        "pod-security.kubernetes.io/enforce=restricted",
        "placement-webhook.io/inject=disabled",
    ]);
}

/// Every rendering is accepted by the real apiserver: the defaults applied server-side, each
/// switch as a server-side dry run on top. Then the chart installed with `helm install` itself,
/// all switches on, as release `steering` in its own namespace, and uninstalled without a trace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn helm_renderings_are_accepted_by_the_apiserver() {
    let _serial = serial().await;
    let tools = Tools::find();
    let plane = ControlPlane::start(Options::default()).await;
    create_namespace(&plane, NAMESPACE);
    for (case, sets, _) in CASES {
        apply(&plane, case, &tools.template(sets), case != "defaults");
    }

    let kubeconfig = plane.admin_kubeconfig().display().to_string();
    let chart = repo_path(CHART).display().to_string();
    create_namespace(&plane, "steering");
    let helm = |args: &[&str]| {
        let mut all = vec!["--kubeconfig", &kubeconfig, "--namespace", "steering"];
        all.extend_from_slice(args);
        tools.helm(&all)
    };
    helm(&[
        "install",
        "steering",
        &chart,
        "--set",
        "schedulerProfile.enabled=true,monitoring.enabled=true,tls.certManager.enabled=true,\
         heatBands.enabled=true",
    ]);
    let installed = |selector: &str| -> BTreeSet<String> {
        let kinds = "serviceaccounts,configmaps,services,deployments.apps,\
                     endpointslices.discovery.k8s.io,leases.coordination.k8s.io,\
                     poddisruptionbudgets.policy,roles.rbac.authorization.k8s.io,\
                     rolebindings.rbac.authorization.k8s.io,\
                     clusterroles.rbac.authorization.k8s.io,\
                     clusterrolebindings.rbac.authorization.k8s.io,\
                     mutatingwebhookconfigurations.admissionregistration.k8s.io,\
                     validatingadmissionpolicies.admissionregistration.k8s.io,\
                     validatingadmissionpolicybindings.admissionregistration.k8s.io,\
                     certificates.cert-manager.io,issuers.cert-manager.io,\
                     servicemonitors.monitoring.coreos.com,prometheusrules.monitoring.coreos.com";
        plane
            .kubectl(&["get", kinds, "-A", "-l", selector, "-o", "name"])
            .lines()
            .map(str::to_string)
            .collect()
    };
    let release = "app.kubernetes.io/instance=steering";
    let objects = installed(release);
    let rendered = parse(&helm(&["get", "manifest", "steering"]), "helm get manifest");
    assert_eq!(
        objects.len(),
        rendered.len(),
        "every object of the release is on the apiserver: {objects:#?}"
    );
    let status = helm(&["status", "steering", "-o", "json"]);
    let status: Map<String, Value> = serde_json::from_str(&status).expect("status JSON");
    assert_eq!(status["info"]["status"], "deployed");
    helm(&["uninstall", "steering"]);
    let left = installed(release);
    assert!(left.is_empty(), "left behind by helm uninstall: {left:#?}");
    // The defaults applied above are untouched by the other release.
    assert!(!installed("app.kubernetes.io/instance=placement-webhook").is_empty());
}
