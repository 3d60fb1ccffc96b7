//! A real control plane for the tests: etcd, kube-apiserver (RBAC on) and, when asked,
//! kube-scheduler, built by `tests/kube/build.sh` from the pinned Go module and started on free
//! loopback ports, as controller-runtime's envtest does. Stopped by pid when dropped, pass or
//! fail.
//!
//! There is no kubelet: Nodes are API objects with a status written at create, pods bound by the
//! scheduler stay Pending, and objects are deleted with grace 0, unless a test starts kwok (nodes
//! and pods that start) or kube-controller-manager (Deployments, the garbage collector, the node
//! lifecycle controller).

#![allow(dead_code)]

pub mod objects;
pub mod process;
pub mod webhook;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use base64::Engine;
use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose, SanType,
};

pub use super::ports::free_port;
use process::Process;

/// The release the binaries are built from (tests/kube/go.mod).
pub const KUBERNETES_VERSION: &str = "v1.36.3";
/// The admin's bearer token (group system:masters).
const ADMIN_TOKEN: &str = "admin-token";
const BINARIES: [&str; 8] = [
    "etcd",
    "helm",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubectl",
    "mutator",
    "kwok",
];

/// One binary `tests/kube/build.sh` builds; missing, it fails the test with that command.
pub fn tool(name: &str) -> PathBuf {
    let path = assets_dir().join(name);
    assert!(
        path.is_file(),
        "{} is missing: run `bash tests/kube/build.sh`",
        path.display()
    );
    path
}

fn assets_dir() -> PathBuf {
    std::env::var_os("KUBE_ASSETS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/kube/bin"))
}

/// Where the binaries are: `$KUBE_ASSETS`, else `tests/kube/bin` (linked by the build script).
/// A missing binary fails the test, in CI and out, naming the command that builds it.
pub fn assets() -> PathBuf {
    let dir = assets_dir();
    let missing: Vec<&str> = BINARIES
        .iter()
        .copied()
        .filter(|b| !dir.join(b).is_file())
        .collect();
    assert!(
        missing.is_empty(),
        "test binaries missing in {} ({}): run `bash tests/kube/build.sh`",
        dir.display(),
        missing.join(", ")
    );
    dir
}

/// What to start besides etcd and the apiserver.
#[derive(Default, Clone)]
pub struct Options {
    /// Start kube-scheduler with this KubeSchedulerConfiguration body (its `clientConnection` is
    /// filled in); `Some(String::new())` starts it with the defaults.
    pub scheduler: Option<String>,
    /// Extra kube-apiserver flags.
    pub apiserver_args: Vec<String>,
}

impl Options {
    pub fn with_scheduler() -> Options {
        Options {
            scheduler: Some(String::new()),
            ..Options::default()
        }
    }
}

pub struct ControlPlane {
    pub bin: PathBuf,
    pub dir: tempfile::TempDir,
    pub apiserver_port: u16,
    pub etcd_port: u16,
    /// The CA that signed the apiserver's serving certificate.
    pub ca_pem: String,
    extra_apiserver_args: Vec<String>,
    etcd: Process,
    apiserver: Process,
    scheduler: Option<Process>,
}

impl ControlPlane {
    /// Starts etcd and the apiserver (and the scheduler when asked) and waits until they are
    /// ready.
    pub async fn start(options: Options) -> ControlPlane {
        let bin = assets();
        placement_webhook::install_crypto_provider();
        let dir = tempfile::tempdir().expect("control plane dir");
        let etcd_port = free_port();
        let peer_port = free_port();
        let apiserver_port = free_port();
        let pki = Pki::generate();
        std::fs::write(dir.path().join("apiserver.crt"), &pki.serving_cert).expect("write");
        std::fs::write(dir.path().join("apiserver.key"), &pki.serving_key).expect("write");
        std::fs::write(dir.path().join("sa.key"), &pki.service_account_key).expect("write");
        std::fs::write(dir.path().join("sa.pub"), &pki.service_account_public).expect("write");
        std::fs::write(
            dir.path().join("tokens.csv"),
            format!("{ADMIN_TOKEN},admin,admin-uid,\"system:masters\"\n"),
        )
        .expect("write");

        let path = |name: &str| dir.path().join(name).display().to_string();
        let etcd = Process::spawn(
            "etcd",
            &bin.join("etcd"),
            &[
                format!("--data-dir={}", path("etcd")),
                format!("--listen-client-urls=http://127.0.0.1:{etcd_port}"),
                format!("--advertise-client-urls=http://127.0.0.1:{etcd_port}"),
                format!("--listen-peer-urls=http://127.0.0.1:{peer_port}"),
                format!("--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}"),
                format!("--initial-cluster=default=http://127.0.0.1:{peer_port}"),
                "--unsafe-no-fsync".into(),
                "--log-level=warn".into(),
            ],
            &[],
            dir.path().join("etcd.log"),
        );
        let apiserver_args = apiserver_args(
            dir.path(),
            etcd_port,
            apiserver_port,
            &options.apiserver_args,
        );
        let apiserver = Process::spawn(
            "kube-apiserver",
            &bin.join("kube-apiserver"),
            &apiserver_args,
            &[],
            dir.path().join("apiserver.log"),
        );
        let mut plane = ControlPlane {
            bin,
            dir,
            apiserver_port,
            etcd_port,
            extra_apiserver_args: options.apiserver_args,
            ca_pem: pki.ca_pem,
            etcd,
            apiserver,
            scheduler: None,
        };
        let admin = plane.kubeconfig_with_token("admin", ADMIN_TOKEN);
        std::fs::write(plane.dir.path().join("admin.kubeconfig"), admin).expect("write");
        plane.wait_ready().await;
        if let Some(config) = options.scheduler {
            plane.start_scheduler(&config);
        }
        plane
    }

    pub fn server_url(&self) -> String {
        format!("https://127.0.0.1:{}", self.apiserver_port)
    }

    /// A kubeconfig that authenticates with `token`.
    pub fn kubeconfig_with_token(&self, user: &str, token: &str) -> String {
        let ca = base64::engine::general_purpose::STANDARD.encode(self.ca_pem.as_bytes());
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: test\n  cluster:\n    server: {}\n    \
             certificate-authority-data: {ca}\nusers:\n- name: {user}\n  user:\n    token: {token}\n\
             contexts:\n- name: test\n  context:\n    cluster: test\n    user: {user}\n\
             current-context: test\n",
            self.server_url()
        )
    }

    pub fn admin_kubeconfig(&self) -> PathBuf {
        self.dir.path().join("admin.kubeconfig")
    }

    /// A client as the cluster admin.
    pub async fn client(&self) -> Client {
        client_from_kubeconfig(&self.admin_kubeconfig()).await
    }

    /// Waits until `/readyz` answers 200 (60 s at most).
    pub async fn wait_ready(&mut self) {
        let http = reqwest::Client::builder()
            .tls_certs_only([reqwest::Certificate::from_pem(self.ca_pem.as_bytes()).expect("CA")])
            .timeout(Duration::from_secs(5))
            .build()
            .expect("client");
        let url = format!("{}/readyz", self.server_url());
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            self.etcd.assert_running();
            self.apiserver.assert_running();
            if let Ok(r) = http.get(&url).bearer_auth(ADMIN_TOKEN).send().await
                && r.status().is_success()
            {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "kube-apiserver not ready after 90 s:\n{}",
                self.apiserver.log_tail(40)
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Starts kube-scheduler with `config` (a KubeSchedulerConfiguration's body without
    /// `clientConnection`; empty: the defaults, leader election on as in a real cluster, so its
    /// leader Lease `kube-system/kube-scheduler` exists) as the cluster admin.
    pub fn start_scheduler(&mut self, config: &str) {
        self.start_scheduler_logging(config, 1);
    }

    /// [`Self::start_scheduler`] at log level `verbosity` (10: every node's scores, per pod).
    pub fn start_scheduler_logging(&mut self, config: &str, verbosity: u8) {
        let body = if config.trim().is_empty() {
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
        } else {
            config
        };
        let scheduler = self.spawn_scheduler_logging(
            "kube-scheduler",
            body,
            &self.admin_kubeconfig(),
            verbosity,
        );
        self.scheduler = Some(scheduler);
    }

    /// Starts kwok as the kubelet of every node: nodes Ready with a node Lease, pods started
    /// and deleted by the stages in tests/kube/kwok/stages.yaml; stopped when dropped.
    pub fn spawn_kwok(&self) -> Process {
        self.spawn_kwok_with(&["stages.yaml"]).0
    }

    /// [`Self::spawn_kwok`] for the nodes `label_selector` selects only, renewing their Leases
    /// every quarter of `lease_seconds`: a node labelled out of the selection stops answering,
    /// as a node whose kubelet is gone (its Lease lapses, its pods are left as they are).
    pub fn spawn_kwok_managing(&self, label_selector: &str, lease_seconds: u32) -> Process {
        let manage = [
            format!("--manage-nodes-with-label-selector={label_selector}"),
            format!("--node-lease-duration-seconds={lease_seconds}"),
        ];
        self.spawn_kwok_configured(&["stages.yaml"], &manage).0
    }

    /// [`Self::spawn_kwok`] that also serves each node's node-exporter and cAdvisor metrics,
    /// following its pods (tests/kube/kwok/metrics.yaml), at the address returned; waits until
    /// that answers.
    pub async fn spawn_kwok_with_metrics(&self) -> (Process, SocketAddr) {
        let (mut kwok, address) = self.spawn_kwok_with(&["stages.yaml", "metrics.yaml"]);
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(2))
            .build()
            .expect("client");
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            kwok.assert_running();
            if let Ok(r) = http.get(format!("http://{address}/healthz")).send().await
                && r.status().is_success()
            {
                return (kwok, address);
            }
            assert!(
                Instant::now() < deadline,
                "kwok not serving at {address} after 60 s:\n{}",
                kwok.log_tail(40)
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// kwok with these files of tests/kube/kwok as `--config`, and the address its server
    /// listens on.
    fn spawn_kwok_with(&self, configs: &[&str]) -> (Process, SocketAddr) {
        let manage = [
            "--manage-all-nodes=true".to_string(),
            "--node-lease-duration-seconds=40".into(),
        ];
        self.spawn_kwok_configured(configs, &manage)
    }

    /// kwok with `configs` and `manage` (which nodes, their Leases).
    fn spawn_kwok_configured(&self, configs: &[&str], manage: &[String]) -> (Process, SocketAddr) {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/kube/kwok");
        let address = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let mut args = vec![
            format!("--kubeconfig={}", self.admin_kubeconfig().display()),
            format!("--server-address={address}"),
        ];
        args.extend(manage.iter().cloned());
        args.extend(
            configs
                .iter()
                .map(|c| format!("--config={}", dir.join(c).display())),
        );
        let kwok = Process::spawn(
            "kwok",
            &self.bin.join("kwok"),
            &args,
            &[],
            self.dir.path().join("kwok.log"),
        );
        (kwok, address)
    }

    /// Starts another kube-scheduler named `name` with `config` (a KubeSchedulerConfiguration,
    /// its `clientConnection` without a kubeconfig), connecting with `kubeconfig`; stopped when
    /// dropped.
    pub fn spawn_scheduler(&self, name: &str, config: &str, kubeconfig: &Path) -> Process {
        self.spawn_scheduler_logging(name, config, kubeconfig, 1)
    }

    fn spawn_scheduler_logging(
        &self,
        name: &str,
        config: &str,
        kubeconfig: &Path,
        verbosity: u8,
    ) -> Process {
        let body = with_kubeconfig(config, kubeconfig);
        let path = self.dir.path().join(format!("{name}.yaml"));
        std::fs::write(&path, body).expect("write scheduler config");
        Process::spawn(
            name,
            &self.bin.join("kube-scheduler"),
            &[
                format!("--config={}", path.display()),
                format!("--secure-port={}", free_port()),
                "--bind-address=127.0.0.1".into(),
                format!("--v={verbosity}"),
            ],
            &[],
            self.dir.path().join(format!("{name}.log")),
        )
    }

    /// Starts kube-controller-manager as the cluster admin with only `controllers` (its names,
    /// e.g. `deployment-controller`) and `extra` flags, no leader election and no serving port;
    /// stopped when dropped.
    pub fn spawn_controller_manager(&self, controllers: &[&str], extra: &[String]) -> Process {
        let mut args = vec![
            format!("--kubeconfig={}", self.admin_kubeconfig().display()),
            format!("--controllers={}", controllers.join(",")),
            "--leader-elect=false".into(),
            "--secure-port=0".into(),
            "--v=1".into(),
        ];
        args.extend(extra.iter().cloned());
        Process::spawn(
            "kube-controller-manager",
            &self.bin.join("kube-controller-manager"),
            &args,
            &[],
            self.dir.path().join("controller-manager.log"),
        )
    }

    pub fn stop_scheduler(&mut self) {
        if let Some(mut scheduler) = self.scheduler.take() {
            scheduler.stop();
        }
    }

    /// Kills the apiserver and starts it again on the same port and etcd; waits until ready.
    pub async fn restart_apiserver(&mut self) {
        self.apiserver.stop();
        self.apiserver.start();
        self.wait_ready().await;
    }

    /// Stops the apiserver (the one every client here was given).
    pub fn stop_apiserver(&mut self) {
        self.apiserver.stop();
    }

    /// Starts the stopped apiserver again on the same port; waits until ready.
    pub async fn start_apiserver(&mut self) {
        self.apiserver.start();
        self.wait_ready().await;
    }

    /// A second apiserver on the same etcd, as in a control plane of several; its admin
    /// kubeconfig is returned beside it.
    pub async fn second_apiserver(&self) -> (Process, PathBuf) {
        let port = free_port();
        let args = apiserver_args(
            self.dir.path(),
            self.etcd_port,
            port,
            &self.extra_apiserver_args,
        );
        let mut process = Process::spawn(
            "kube-apiserver-2",
            &self.bin.join("kube-apiserver"),
            &args,
            &[],
            self.dir.path().join("apiserver-2.log"),
        );
        let kubeconfig = self.dir.path().join("admin-2.kubeconfig");
        let text = self
            .kubeconfig_with_token("admin", ADMIN_TOKEN)
            .replace(&self.server_url(), &format!("https://127.0.0.1:{port}"));
        std::fs::write(&kubeconfig, text).expect("write kubeconfig");
        let http = reqwest::Client::builder()
            .tls_certs_only([reqwest::Certificate::from_pem(self.ca_pem.as_bytes()).expect("CA")])
            .timeout(Duration::from_secs(5))
            .build()
            .expect("client");
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            process.assert_running();
            if let Ok(r) = http
                .get(format!("https://127.0.0.1:{port}/readyz"))
                .bearer_auth(ADMIN_TOKEN)
                .send()
                .await
                && r.status().is_success()
            {
                return (process, kubeconfig);
            }
            assert!(Instant::now() < deadline, "second apiserver not ready");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Runs the pinned kubectl as the admin; panics with its output when it fails.
    pub fn kubectl(&self, args: &[&str]) -> String {
        self.kubectl_with_input(args, None)
    }

    /// [`Self::kubectl`] with `input` on its standard input.
    pub fn kubectl_with_input(&self, args: &[&str], input: Option<&str>) -> String {
        let (ok, stdout, stderr) = self.try_kubectl(args, input);
        assert!(ok, "kubectl {}: {stderr}{stdout}", args.join(" "));
        stdout
    }

    /// Runs kubectl; (success, stdout, stderr).
    pub fn try_kubectl(&self, args: &[&str], input: Option<&str>) -> (bool, String, String) {
        use std::io::Write;
        let mut child = std::process::Command::new(self.bin.join("kubectl"))
            .arg(format!(
                "--kubeconfig={}",
                self.admin_kubeconfig().display()
            ))
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("start kubectl");
        let mut stdin = child.stdin.take().expect("stdin");
        if let Some(input) = input {
            stdin.write_all(input.as_bytes()).expect("kubectl stdin");
        }
        drop(stdin);
        let out = child.wait_with_output().expect("kubectl runs");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// The apiserver's `/metrics` text.
    pub fn metrics(&self) -> String {
        self.kubectl(&["get", "--raw", "/metrics"])
    }

    pub fn apiserver_log(&self) -> String {
        self.apiserver.log()
    }

    pub fn scheduler_log(&self) -> String {
        self.scheduler
            .as_ref()
            .map(Process::log)
            .unwrap_or_default()
    }

    /// A kubeconfig file (`<name>.kubeconfig` in the plane's directory) that authenticates as
    /// `namespace/name`'s ServiceAccount with a TokenRequest token.
    pub fn service_account_kubeconfig(&self, namespace: &str, name: &str) -> PathBuf {
        let token = self.service_account_token(namespace, name);
        let path = self.dir.path().join(format!("{name}.kubeconfig"));
        std::fs::write(&path, self.kubeconfig_with_token(name, &token)).expect("write kubeconfig");
        path
    }

    /// A bearer token for `namespace/name`'s ServiceAccount, from the TokenRequest API.
    pub fn service_account_token(&self, namespace: &str, name: &str) -> String {
        let token = self.kubectl(&["create", "token", name, "-n", namespace, "--duration=2h"]);
        token.trim().to_string()
    }

    /// Compacts etcd's history up to its current revision (through etcd's JSON gateway), so a
    /// watch resumed from an older resourceVersion is answered 410 Gone.
    pub async fn compact_etcd(&self) {
        let http = reqwest::Client::new();
        let base = format!("http://127.0.0.1:{}", self.etcd_port);
        let status: serde_json::Value = http
            .post(format!("{base}/v3/kv/range"))
            .json(&serde_json::json!({"key": "AA==", "limit": 1}))
            .send()
            .await
            .expect("etcd answers")
            .json()
            .await
            .expect("etcd JSON");
        let revision = status["header"]["revision"]
            .as_str()
            .expect("a revision")
            .to_string();
        let reply = http
            .post(format!("{base}/v3/kv/compaction"))
            .json(&serde_json::json!({"revision": revision, "physical": true}))
            .send()
            .await
            .expect("etcd answers");
        assert!(reply.status().is_success(), "compaction refused");
    }
}

/// kube-apiserver's flags for a loopback control plane.
fn apiserver_args(dir: &Path, etcd_port: u16, port: u16, extra: &[String]) -> Vec<String> {
    let path = |name: &str| dir.join(name).display().to_string();
    let mut args = vec![
        format!("--etcd-servers=http://127.0.0.1:{etcd_port}"),
        format!("--secure-port={port}"),
        "--bind-address=127.0.0.1".into(),
        "--advertise-address=127.0.0.1".into(),
        "--endpoint-reconciler-type=none".into(),
        "--authorization-mode=RBAC".into(),
        format!("--token-auth-file={}", path("tokens.csv")),
        format!("--tls-cert-file={}", path("apiserver.crt")),
        format!("--tls-private-key-file={}", path("apiserver.key")),
        format!("--cert-dir={}", path(&format!("certs-{port}"))),
        "--service-cluster-ip-range=10.96.0.0/16".into(),
        "--service-account-issuer=https://kubernetes.default.svc".into(),
        format!("--service-account-key-file={}", path("sa.pub")),
        format!("--service-account-signing-key-file={}", path("sa.key")),
        // No kubelet or controller-manager: nothing would ever untaint a new Node or mint the
        // tokens ServiceAccount admission mounts.
        "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition".into(),
        "--v=1".into(),
    ];
    args.extend(extra.iter().cloned());
    args
}

/// A kube client from a kubeconfig file.
pub async fn client_from_kubeconfig(path: &Path) -> Client {
    let kubeconfig = Kubeconfig::read_from(path).expect("kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("client config");
    Client::try_from(config).expect("client")
}

/// The apiserver's serving pair (for 127.0.0.1 and localhost) signed by a fresh CA, and the
/// ServiceAccount token signing key.
struct Pki {
    ca_pem: String,
    serving_cert: String,
    serving_key: String,
    service_account_key: String,
    service_account_public: String,
}

impl Pki {
    fn generate() -> Pki {
        let mut ca = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        ca.distinguished_name
            .push(DnType::CommonName, "test control plane CA");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_key = KeyPair::generate().expect("CA key");
        let ca_cert = ca.self_signed(&ca_key).expect("CA");
        let issuer = Issuer::new(ca, ca_key);
        let mut serving = CertificateParams::new(vec!["localhost".to_string()]).expect("params");
        serving
            .subject_alt_names
            .push(SanType::IpAddress("127.0.0.1".parse().expect("ip")));
        serving
            .distinguished_name
            .push(DnType::CommonName, "kube-apiserver");
        let key = KeyPair::generate().expect("serving key");
        let cert = serving.signed_by(&key, &issuer).expect("serving cert");
        let sa_key = KeyPair::generate().expect("service account key");
        Pki {
            ca_pem: ca_cert.pem(),
            serving_cert: cert.pem(),
            serving_key: key.serialize_pem(),
            service_account_key: sa_key.serialize_pem(),
            service_account_public: sa_key.public_key_pem(),
        }
    }
}

/// `config` (a KubeSchedulerConfiguration) connecting with `kubeconfig`: added to its own
/// top-level `clientConnection` (its QPS and burst kept) or as one.
fn with_kubeconfig(config: &str, kubeconfig: &Path) -> String {
    let line = format!("  kubeconfig: {}", kubeconfig.display());
    let mut lines: Vec<String> = config.trim_end().lines().map(str::to_string).collect();
    match lines
        .iter()
        .position(|l| l.trim_end() == "clientConnection:")
    {
        Some(at) => lines.insert(at + 1, line),
        None => lines.extend(["clientConnection:".to_string(), line]),
    }
    lines.join("\n") + "\n"
}
