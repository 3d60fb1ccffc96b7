//! The webhook installed on the test control plane as a user installs it: `deploy/` rendered by
//! the pinned kubectl and applied, a serving certificate from the `certs` command, the release's
//! own binary started as `serve` with the shipped config, authenticated by a TokenRequest token
//! of deploy/'s ServiceAccount (so every call it makes is checked by the shipped RBAC). Only the
//! webhook's address differs: there are no pods or Service network here, so the registration
//! names `https://127.0.0.1:<port>/mutate` instead of the Service.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::process::Process;
use super::{ControlPlane, free_port};

pub const NAMESPACE: &str = "placement-webhook";
pub const SERVICE_ACCOUNT: &str = "placement-webhook";
pub const CONFIGURATION: &str = "placement-webhook";

pub fn binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_placement-webhook"))
}

pub fn repo_path(relative: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(relative)
}

/// The serving pair every replica shares (the Secret's), for the Service's names and 127.0.0.1.
pub struct ServingCerts {
    pub dir: PathBuf,
    /// base64 of the CA's PEM, as the `certs` command prints it.
    pub ca_bundle: String,
}

impl ServingCerts {
    /// Runs `placement-webhook certs ... --ip 127.0.0.1 --out <dir>/certs`.
    pub fn generate(dir: &Path) -> ServingCerts {
        let out = dir.join("certs");
        let output = Command::new(binary())
            .args([
                "certs",
                "--service",
                SERVICE_ACCOUNT,
                "--namespace",
                NAMESPACE,
            ])
            .args(["--ip", "127.0.0.1", "--out"])
            .arg(&out)
            .output()
            .expect("run certs");
        assert!(
            output.status.success(),
            "certs: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        ServingCerts {
            dir: out,
            ca_bundle: String::from_utf8_lossy(&output.stdout).trim().to_string(),
        }
    }

    pub fn cert(&self) -> PathBuf {
        self.dir.join("tls.crt")
    }

    pub fn key(&self) -> PathBuf {
        self.dir.join("tls.key")
    }

    pub fn ca_pem(&self) -> String {
        std::fs::read_to_string(self.dir.join("ca.crt")).expect("ca.crt")
    }
}

/// Renders `deploy/<overlay>` with the pinned kubectl's kustomize.
pub fn render(plane: &ControlPlane, overlay: &str) -> String {
    plane.kubectl(&["kustomize", &repo_path(overlay).display().to_string()])
}

/// Applies `overlay` (deploy/ or one of its overlays) as rendered, then points the registration
/// at `url` with `ca_bundle`.
pub fn install(plane: &ControlPlane, overlay: &str, url: &str, ca_bundle: &str) {
    let rendered = render(plane, overlay);
    plane.kubectl_with_input(
        &["apply", "--server-side", "--field-manager=test", "-f", "-"],
        Some(&rendered),
    );
    register_at(plane, url, ca_bundle);
}

/// Points the shipped registration at `url` (instead of the Service) with `ca_bundle`.
pub fn register_at(plane: &ControlPlane, url: &str, ca_bundle: &str) {
    let patch = json!([{
        "op": "replace",
        "path": "/webhooks/0/clientConfig",
        "value": {"url": url, "caBundle": ca_bundle},
    }]);
    plane.kubectl(&[
        "patch",
        "mutatingwebhookconfiguration",
        CONFIGURATION,
        "--type=json",
        "-p",
        &patch.to_string(),
    ]);
}

/// A second registration: the shipped one copied as `name`, calling `url` for the pods of the
/// namespaces labelled `label` (key, value) instead of the shipped selector's.
pub fn register_copy(
    plane: &ControlPlane,
    name: &str,
    url: &str,
    ca_bundle: &str,
    label: (&str, &str),
) {
    apply_copy(plane, name, |hook| {
        hook["clientConfig"] = json!({"url": url, "caBundle": ca_bundle});
        hook["namespaceSelector"] = json!({"matchLabels": {label.0: label.1}});
    });
}

/// A second registration of the installed webhook itself (the shipped one copied as `name`,
/// its address kept) for every pod of the namespaces labelled `label`, with no
/// `matchConditions`: a pod that opts out is sent all the same, and the webhook answers it
/// unchanged. What a webhook that does nothing costs a pod's creation.
pub fn register_unconditional_copy(plane: &ControlPlane, name: &str, label: (&str, &str)) {
    apply_copy(plane, name, |hook| {
        hook["namespaceSelector"] = json!({"matchLabels": {label.0: label.1}});
        if let Some(hook) = hook.as_object_mut() {
            hook.remove("matchConditions");
        }
    });
}

/// Applies the shipped registration copied as `name`, each of its webhooks changed by `edit`.
fn apply_copy(plane: &ControlPlane, name: &str, edit: impl Fn(&mut Value)) {
    let shipped = plane.kubectl(&[
        "get",
        "mutatingwebhookconfiguration",
        CONFIGURATION,
        "-o",
        "json",
    ]);
    let mut copy: Value = serde_json::from_str(&shipped).expect("registration JSON");
    copy["metadata"] = json!({"name": name});
    for hook in copy["webhooks"].as_array_mut().expect("webhooks") {
        edit(hook);
    }
    plane.kubectl_with_input(
        &["apply", "--server-side", "--field-manager=test", "-f", "-"],
        Some(&copy.to_string()),
    );
}

/// The config shipped in `overlay` (its config.yaml, or the base's) with the listen address
/// changed and the Prometheus section replaced by a snapshot file (`metrics_file`). `extra` is
/// YAML: a top-level `key: value` line whose key the shipped config sets replaces that key's
/// whole block (a `prometheus:` line too, which then wins over the file); the rest is appended.
pub fn config_text(overlay: &str, listen: &str, metrics_file: &Path, extra: &str) -> String {
    let own = repo_path(&format!("{overlay}/config.yaml"));
    let source = if own.is_file() {
        own
    } else {
        repo_path("deploy/base/config.yaml")
    };
    let shipped = std::fs::read_to_string(&source).expect("shipped config");
    assert!(
        shipped.contains("listen: 0.0.0.0:8443"),
        "config.yaml moved"
    );
    let top_key = |line: &str| -> Option<String> {
        let (key, _) = line.split_once(':')?;
        (!line.starts_with([' ', '#', '-']) && !key.is_empty()).then(|| key.to_string())
    };
    let mut replacements: Vec<(String, String)> =
        vec![("listen".into(), format!("listen: {listen}"))];
    let mut appended = String::new();
    for line in extra.lines() {
        match top_key(line) {
            Some(key) if shipped.lines().any(|l| top_key(l).as_deref() == Some(&key)) => {
                replacements.push((key, line.to_string()));
            }
            _ => {
                appended.push_str(line);
                appended.push('\n');
            }
        }
    }
    let mut out = String::new();
    // Inside a top-level block that is left out or replaced whole: its indented lines go too.
    let mut skipping = false;
    for line in shipped.lines() {
        if skipping && (line.starts_with(' ') || line.is_empty()) {
            continue;
        }
        skipping = false;
        let key = top_key(line);
        let replaced = key
            .as_ref()
            .and_then(|key| replacements.iter().find(|(k, _)| k == key))
            .map(|(_, l)| l.clone());
        if key.as_deref() == Some("prometheus") || replaced.is_some() {
            // The test's own Prometheus, when it gives one (on one line), else none.
            skipping = true;
            if let Some(own) = replaced {
                out.push_str(&own);
                out.push('\n');
            }
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out.push_str(&format!("metrics_file: {}\n", metrics_file.display()));
    out.push_str(&appended);
    out
}

/// A node-load snapshot file body, taken now: `(node, cpu busy fraction)`.
pub fn snapshot(nodes: &[(String, f64)]) -> Value {
    let taken_at = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    json!({
        "taken_at": taken_at,
        "nodes": nodes.iter().map(|(name, cpu)| json!({
            "name": name,
            "cpu": cpu,
            "memory": 0.3,
        })).collect::<Vec<_>>(),
    })
}

/// One webhook replica: the release binary as `serve`.
pub struct Replica {
    pub name: String,
    pub port: u16,
    pub process: Process,
    dir: PathBuf,
}

/// How to start a replica.
pub struct ReplicaOptions<'a> {
    pub name: &'a str,
    /// The deploy/ overlay whose config it runs with.
    pub overlay: &'a str,
    pub certs: &'a ServingCerts,
    /// The snapshot file the config names.
    pub metrics_file: &'a Path,
    /// Appended to the shipped config.
    pub extra_config: &'a str,
    /// A kubeconfig for the webhook (the ServiceAccount's token).
    pub kubeconfig: &'a Path,
    pub port: Option<u16>,
    /// Run with this file as its `/etc/hosts` (a private mount namespace), as a pod runs with
    /// the hosts file its kubelet writes: the names in the replicas' EndpointSlices resolve.
    pub hosts: Option<&'a Path>,
    /// Its `POD_IP`: where the Service reaches it while it holds the deciding replica's Lease.
    pub pod_address: Option<&'a str>,
}

impl Replica {
    pub fn start(dir: &Path, options: ReplicaOptions<'_>) -> Replica {
        let port = options.port.unwrap_or_else(free_port);
        let config = dir.join(format!("{}.config.yaml", options.name));
        std::fs::write(
            &config,
            config_text(
                options.overlay,
                &format!("127.0.0.1:{port}"),
                options.metrics_file,
                options.extra_config,
            ),
        )
        .expect("write config");
        let mut args: Vec<String> = vec![
            "serve".into(),
            format!("--config={}", config.display()),
            format!("--tls-cert={}", options.certs.cert().display()),
            format!("--tls-key={}", options.certs.key().display()),
        ];
        let program = match options.hosts {
            Some(hosts) => {
                let mut wrapped: Vec<String> = [
                    "-m",
                    "--propagation",
                    "private",
                    "sh",
                    "-c",
                    "mount --bind \"$0\" /etc/hosts && exec \"$@\"",
                ]
                .map(String::from)
                .into();
                wrapped.push(hosts.display().to_string());
                wrapped.push(binary().display().to_string());
                wrapped.append(&mut args);
                args = wrapped;
                PathBuf::from("unshare")
            }
            None => binary(),
        };
        let mut env = vec![
            (
                "KUBECONFIG".into(),
                options.kubeconfig.display().to_string(),
            ),
            ("POD_NAME".into(), options.name.to_string()),
            ("POD_NAMESPACE".into(), NAMESPACE.into()),
            // The watcher's own debug lines name the errors it restarts on (410 Gone).
            ("RUST_LOG".into(), "info,kube_runtime::watcher=debug".into()),
            ("NO_COLOR".into(), "1".into()),
        ];
        // Several replicas: each stands for the deciding replica's Lease, and its holder writes
        // where it serves into the Service's slice (a name its hosts file resolves).
        if let Some(address) = options.pod_address {
            env.push(("POD_IP".into(), address.to_string()));
        }
        let process = Process::spawn(
            options.name,
            &program,
            &args,
            &env,
            dir.join(format!("{}.log", options.name)),
        );
        Replica {
            name: options.name.to_string(),
            port,
            process,
            dir: dir.to_path_buf(),
        }
    }

    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    /// Waits until `/readyz` answers 200: the snapshot is read and the watches have listed.
    pub async fn wait_ready(&mut self, ca_pem: &str) {
        let http = https_client(ca_pem);
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            self.process.assert_running();
            if let Ok(r) = http.get(format!("{}/readyz", self.url())).send().await
                && r.status().is_success()
            {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{} not ready after 60 s:\n{}",
                self.name,
                self.process.log_tail(40)
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The webhook's `/metrics` text.
    pub async fn metrics(&self, ca_pem: &str) -> String {
        self.get(ca_pem, "/metrics").await
    }

    /// `/debug/inflight`: the last refresh's charges and load counted twice, by node.
    pub async fn inflight(&self, ca_pem: &str) -> serde_json::Value {
        let text = self.get(ca_pem, "/debug/inflight").await;
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("inflight JSON: {e}: {text}"))
    }

    /// The body of `GET path`.
    async fn get(&self, ca_pem: &str, path: &str) -> String {
        https_client(ca_pem)
            .get(format!("{}{path}", self.url()))
            .send()
            .await
            .unwrap_or_else(|e| panic!("{path}: {e}"))
            .text()
            .await
            .unwrap_or_else(|e| panic!("{path} text: {e}"))
    }

    pub fn log(&self) -> String {
        self.process.log()
    }
}

pub fn https_client(ca_pem: &str) -> reqwest::Client {
    reqwest::Client::builder()
        .tls_certs_only([reqwest::Certificate::from_pem(ca_pem.as_bytes()).expect("CA")])
        .timeout(Duration::from_secs(5))
        .build()
        .expect("client")
}

/// The values of the samples of `name` whose labels contain every `label="value"` pair.
fn samples<'a>(
    metrics: &'a str,
    name: &'a str,
    labels: &'a [(&'a str, &'a str)],
) -> impl Iterator<Item = f64> + 'a {
    metrics
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter(move |l| {
            l.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
        })
        .filter(move |l| {
            labels
                .iter()
                .all(|(k, v)| l.contains(&format!("{k}=\"{v}\"")))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse().ok())
}

/// The value of the first sample of `name` whose labels contain every `label="value"` pair.
pub fn sample(metrics: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    samples(metrics, name, labels).next()
}

/// The sum of every sample of `name` whose labels contain the pairs.
pub fn sum(metrics: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    samples(metrics, name, labels).sum()
}
