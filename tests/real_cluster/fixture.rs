//! One installed cluster: the control plane, nodes with a load snapshot, deploy/ applied, the
//! webhook's replicas running as its ServiceAccount, and a namespace labelled for injection.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::{Api, Client};
use serde_json::json;

use crate::balancer::{Balancer, endpoint_port};
use crate::support::kube::objects::{self, NodeSpec};
use crate::support::kube::process::Process;
use crate::support::kube::webhook::{
    self, NAMESPACE, Replica, ReplicaOptions, SERVICE_ACCOUNT, ServingCerts,
};
use crate::support::kube::{ControlPlane, Options, free_port};
use crate::support::prometheus::{KwokTargets, Prometheus};

/// The name the replicas' EndpointSlices give (FQDN: validation refuses loopback IPs); their
/// hosts file maps it to 127.0.0.1.
pub const REPLICAS_HOST: &str = "replicas.placement-webhook.test";

/// The installed Service's one EndpointSlice, which the deciding replica writes.
pub const DECIDER_SLICE: &str = "placement-webhook-decider";

/// The namespace labelled `placement-webhook.io/inject=enabled` the tests create pods in.
pub const FLINK: &str = "flink";

/// One control plane at a time: each apiserver takes a core while it starts.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Where each test's time holding the machine is appended, a line per test (`.ci/run` prints
/// them with its phases).
pub const SECONDS_FILE: &str = concat!(env!("CARGO_TARGET_TMPDIR"), "/real_cluster_seconds.tsv");

/// The machine, held by one test until dropped.
pub struct Serial {
    _held: tokio::sync::MutexGuard<'static, ()>,
    test: String,
    since: Instant,
}

pub async fn serial() -> Serial {
    let held = ONE_AT_A_TIME.lock().await;
    Serial {
        _held: held,
        // `#[tokio::test]` polls the test's future on the test's own thread, named after it.
        test: std::thread::current().name().unwrap_or("?").to_string(),
        since: Instant::now(),
    }
}

impl Drop for Serial {
    fn drop(&mut self) {
        use std::io::Write;
        let outcome = if std::thread::panicking() {
            "failed"
        } else {
            "passed"
        };
        let line = format!(
            "{:.0}\t{}\t{outcome}\n",
            self.since.elapsed().as_secs_f64(),
            self.test
        );
        // A record for the reader, not a check: a write that fails loses only the line.
        if let Ok(mut file) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(SECONDS_FILE)
        {
            let _ = file.write_all(line.as_bytes());
        }
    }
}

pub struct Setup {
    /// Nodes and their CPU busy fraction in the snapshot.
    pub nodes: Vec<(NodeSpec, f64)>,
    pub replicas: usize,
    /// KubeSchedulerConfiguration body for kube-scheduler (`Some("")`: defaults); `None`: no
    /// scheduler.
    pub scheduler: Option<String>,
    /// Appended to the shipped config.
    pub extra_config: String,
    pub apiserver_args: Vec<String>,
    /// What is installed: deploy/ or one of its overlays.
    pub overlay: &'static str,
    /// Objects of the overlay deleted once it is installed, before the webhook starts, as a
    /// cluster that refused them would have it: (namespace, `kind/name`).
    pub removed: Vec<(&'static str, &'static str)>,
    /// The snapshot file's body instead of one made from `nodes`' CPU.
    pub snapshot: Option<serde_json::Value>,
    /// Pods of other workloads, bound (`spec.nodeName`), created in namespace `running` before
    /// the webhook starts.
    pub running: Vec<serde_json::Value>,
    /// Nodes created once the scheduler and the webhook run (at the end of their zones in the
    /// scheduler's node order), with their CPU in the snapshot.
    pub late_nodes: Vec<(NodeSpec, f64)>,
    /// A living cluster: kwok runs the nodes and their pods and serves their metrics
    /// (tests/kube/kwok/metrics.yaml), a real Prometheus scrapes them every this many seconds,
    /// and `{prometheus}` in `extra_config` is its URL (the replicas read it instead of the
    /// snapshot file). Every node needs its `internal_ip`.
    pub living: Option<u32>,
    /// kube-controller-manager's controllers to run (e.g. `deployment-controller`), started
    /// once the nodes exist; empty: no controller-manager.
    pub controllers: Vec<&'static str>,
    /// Its extra flags.
    pub controller_manager_args: Vec<String>,
}

impl Setup {
    /// `n` nodes of 16 cores in three zones, CPU busy from 0.9 down in even steps.
    pub fn nodes(n: usize) -> Setup {
        let nodes = (0..n)
            .map(|i| {
                let name = format!("node-{i:03}");
                let zone = format!("zone-{}", ["a", "b", "c"][i % 3]);
                let cpu = 0.9 - 0.8 * i as f64 / n.max(2).saturating_sub(1) as f64;
                (NodeSpec::new(&name, &zone, 16), cpu)
            })
            .collect();
        Setup {
            nodes,
            replicas: 1,
            scheduler: Some(String::new()),
            extra_config: String::new(),
            apiserver_args: Vec::new(),
            overlay: "deploy",
            removed: Vec::new(),
            snapshot: None,
            running: Vec::new(),
            late_nodes: Vec::new(),
            living: None,
            controllers: Vec::new(),
            controller_manager_args: Vec::new(),
        }
    }
}

pub struct Cluster {
    pub admin: Client,
    pub certs: ServingCerts,
    pub webhook_kubeconfig: PathBuf,
    pub snapshot: PathBuf,
    pub replicas: Vec<Replica>,
    pub balancer: Option<Balancer>,
    pub nodes: Vec<(NodeSpec, f64)>,
    extra_config: String,
    overlay: &'static str,
    /// The replicas' hosts file, when there are several (see [`REPLICAS_HOST`]).
    hosts: Option<PathBuf>,
    /// A living cluster's Prometheus and kwok (see [`Setup::living`]).
    pub prometheus: Option<Prometheus>,
    /// Held: kwok stops when the cluster is dropped.
    pub kwok: Option<Process>,
    /// Held: kube-controller-manager, when the setup names controllers.
    pub controller_manager: Option<Process>,
    // Last: dropped after the replicas, so they never see their apiserver vanish first.
    pub plane: ControlPlane,
}

impl Cluster {
    /// The end of kube-controller-manager's log, for a failure's message.
    pub fn controller_manager_log_tail(&self, lines: usize) -> String {
        self.controller_manager
            .as_ref()
            .map_or_else(|| "no controller-manager".into(), |p| p.log_tail(lines))
    }

    /// Starts everything and waits until every replica is ready.
    pub async fn start(setup: Setup) -> Cluster {
        let plane = ControlPlane::start(Options {
            scheduler: setup.scheduler.clone(),
            apiserver_args: setup.apiserver_args.clone(),
        })
        .await;
        let admin = plane.client().await;
        let specs: Vec<NodeSpec> = setup.nodes.iter().map(|(n, _)| n.clone()).collect();
        objects::create_nodes(&admin, &specs).await;
        if !setup.running.is_empty() {
            objects::create_namespace(&admin, "running", false).await;
            objects::create_many(&admin, "running", &setup.running, 32).await;
        }
        let controller_manager = (!setup.controllers.is_empty()).then(|| {
            plane.spawn_controller_manager(&setup.controllers, &setup.controller_manager_args)
        });
        let (kwok, prometheus, extra_config) = match setup.living {
            Some(scrape) => {
                let binary = crate::support::prometheus::binary();
                let (kwok, address) = plane.spawn_kwok_with_metrics().await;
                let nodes = specs
                    .iter()
                    .map(|n| {
                        let ip = n
                            .internal_ip
                            .clone()
                            .expect("a living node has an InternalIP");
                        (n.name.clone(), ip)
                    })
                    .collect();
                let targets = KwokTargets {
                    kwok: address,
                    nodes,
                };
                let prometheus = Prometheus::start_scraping_kwok(binary, &targets, scrape).await;
                let extra = setup
                    .extra_config
                    .replace("{prometheus}", &prometheus.url());
                (Some(kwok), Some(prometheus), extra)
            }
            None => (None, None, setup.extra_config),
        };

        let certs = ServingCerts::generate(plane.dir.path());
        let ports: Vec<u16> = (0..setup.replicas).map(|_| free_port()).collect();
        let balancer = if setup.replicas > 1 {
            Some(Balancer::following(admin.clone(), NAMESPACE, DECIDER_SLICE).await)
        } else {
            None
        };
        let url = match &balancer {
            Some(b) => format!("https://127.0.0.1:{}/mutate", b.addr.port()),
            // No replica yet (the test starts it): registered where none listens for now.
            None => format!(
                "https://127.0.0.1:{}/mutate",
                ports.first().copied().unwrap_or_else(free_port)
            ),
        };
        webhook::install(&plane, setup.overlay, &url, &certs.ca_bundle);
        for (namespace, object) in &setup.removed {
            plane.kubectl(&["delete", "--namespace", namespace, object]);
        }
        let webhook_kubeconfig = plane.service_account_kubeconfig(NAMESPACE, SERVICE_ACCOUNT);
        let snapshot = plane.dir.path().join("snapshot.json");
        let mut cluster = Cluster {
            admin,
            certs,
            webhook_kubeconfig,
            snapshot,
            replicas: Vec::new(),
            balancer,
            nodes: setup.nodes,
            extra_config,
            overlay: setup.overlay,
            hosts: None,
            prometheus,
            kwok,
            controller_manager,
            plane,
        };
        match &setup.snapshot {
            Some(body) => {
                std::fs::write(&cluster.snapshot, body.to_string()).expect("write snapshot")
            }
            None => cluster.write_snapshot(),
        }
        if setup.replicas > 1 {
            let hosts = cluster.plane.dir.path().join("hosts");
            std::fs::write(
                &hosts,
                format!("127.0.0.1 localhost\n127.0.0.1 {REPLICAS_HOST}\n"),
            )
            .expect("write hosts");
            cluster.hosts = Some(hosts);
            cluster.serve_decider_by_name();
            cluster.publish_endpoints(&ports).await;
        }
        for (i, port) in ports.iter().enumerate() {
            cluster.start_replica(&format!("placement-webhook-{i}"), *port);
        }
        for replica in &mut cluster.replicas {
            replica.wait_ready(&cluster.certs.ca_pem()).await;
        }
        if setup.replicas > 1 {
            cluster.wait_for_decider(None).await;
        }
        if !setup.late_nodes.is_empty() {
            let specs: Vec<NodeSpec> = setup.late_nodes.iter().map(|(n, _)| n.clone()).collect();
            objects::create_nodes(&cluster.admin, &specs).await;
            cluster.nodes.extend(setup.late_nodes);
            // The node watches (webhook and scheduler) see them well within this.
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
        objects::create_namespace(&cluster.admin, FLINK, true).await;
        cluster
    }

    /// Writes the snapshot file from the nodes' loads, taken now.
    pub fn write_snapshot(&self) {
        let loads: Vec<(String, f64)> = self
            .nodes
            .iter()
            .map(|(n, cpu)| (n.name.clone(), *cpu))
            .collect();
        std::fs::write(&self.snapshot, webhook::snapshot(&loads).to_string())
            .expect("write snapshot");
    }

    pub fn start_replica(&mut self, name: &str, port: u16) {
        let replica = self.launch(name, port, &self.extra_config, self.hosts.as_deref());
        self.replicas.push(replica);
    }

    /// A replica on the shipped config with `extra_config`, serving on `port`.
    fn launch(&self, name: &str, port: u16, extra_config: &str, hosts: Option<&Path>) -> Replica {
        Replica::start(
            self.plane.dir.path(),
            ReplicaOptions {
                name,
                overlay: self.overlay,
                certs: &self.certs,
                metrics_file: &self.snapshot,
                extra_config,
                kubeconfig: &self.webhook_kubeconfig,
                port: Some(port),
                hosts,
                pod_address: hosts.map(|_| REPLICAS_HOST),
            },
        )
    }

    /// Starts a webhook beside the installed one: one replica on the shipped config with
    /// `extra_config` (which names a `service:` of its own, published with it alone), registered
    /// as `name` for the namespaces labelled `label`. Its index in `replicas`.
    pub async fn start_second_webhook(
        &mut self,
        name: &str,
        extra_config: &str,
        label: (&str, &str),
    ) -> usize {
        let port = free_port();
        let mut replica = self.launch(name, port, extra_config, None);
        replica.wait_ready(&self.certs.ca_pem()).await;
        // Its Service's one endpoint: it knows it decides alone, as a one-replica install does.
        self.publish_endpoint(name, name, port);
        webhook::register_copy(
            &self.plane,
            name,
            &format!("https://127.0.0.1:{port}/mutate"),
            &self.certs.ca_bundle,
            label,
        );
        self.replicas.push(replica);
        self.replicas.len() - 1
    }

    /// The live replicas, as the EndpointSlice controller keeps them for the headless Service
    /// `placement-webhook-replicas`: one slice per replica (ports are per slice), addressed by a
    /// name that resolves to loopback (EndpointSlice validation refuses loopback IPs).
    async fn publish_endpoints(&self, ports: &[u16]) {
        for (i, port) in ports.iter().enumerate() {
            let pod = format!("placement-webhook-{i}");
            self.publish_endpoint("placement-webhook-replicas", &pod, *port);
        }
    }

    /// The installed Service's slice, as an FQDN slice: the replicas write `REPLICAS_HOST` (their
    /// `POD_IP` here) into it, which an IPv4 slice refuses. Labels and name as installed.
    fn serve_decider_by_name(&self) {
        self.plane
            .kubectl(&["delete", "endpointslice", "-n", NAMESPACE, DECIDER_SLICE]);
        let slice = json!({
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "name": DECIDER_SLICE,
                "namespace": NAMESPACE,
                "labels": {
                    "kubernetes.io/service-name": "placement-webhook",
                    "endpointslice.kubernetes.io/managed-by": "placement-webhook",
                },
            },
            "addressType": "FQDN",
            "endpoints": [],
        });
        self.plane.kubectl_with_input(
            &["apply", "--server-side", "--field-manager=test", "-f", "-"],
            Some(&slice.to_string()),
        );
    }

    /// The replica the Service's slice names (the Lease's holder), waiting until it names one
    /// other than `not` (at most 30 s). Its index in `replicas`.
    pub async fn wait_for_decider(&self, not: Option<usize>) -> usize {
        let slices = Api::<EndpointSlice>::namespaced(self.admin.clone(), NAMESPACE);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let slice = slices.get(DECIDER_SLICE).await.ok();
            let port = slice.as_ref().and_then(endpoint_port);
            let named = port.and_then(|port| self.replicas.iter().position(|r| r.port == port));
            if let Some(i) = named.filter(|i| Some(*i) != not) {
                return i;
            }
            assert!(
                Instant::now() < deadline,
                "no deciding replica in the Service's slice after 30 s: {slice:?}\n{}",
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The EndpointSlice of `service` for the replica `pod` (its `POD_NAME`) on `port`.
    fn publish_endpoint(&self, service: &str, pod: &str, port: u16) {
        let slice = json!({
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "name": pod,
                "namespace": NAMESPACE,
                "labels": {"kubernetes.io/service-name": service},
            },
            "addressType": "FQDN",
            "ports": [{"name": "https", "port": port, "protocol": "TCP"}],
            "endpoints": [{
                "addresses": [REPLICAS_HOST],
                "conditions": {"ready": true},
                "targetRef": {"kind": "Pod", "name": pod, "namespace": NAMESPACE},
            }],
        });
        self.plane.kubectl_with_input(
            &["apply", "--server-side", "--field-manager=test", "-f", "-"],
            Some(&slice.to_string()),
        );
    }

    pub fn ca_pem(&self) -> String {
        self.certs.ca_pem()
    }

    /// Every replica's `/metrics`, summed by the caller.
    pub async fn metrics(&self) -> Vec<String> {
        let ca = self.ca_pem();
        let mut all = Vec::new();
        for replica in &self.replicas {
            all.push(replica.metrics(&ca).await);
        }
        all
    }

    /// The sum over replicas of `name{labels}`.
    pub async fn metric_sum(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.metrics()
            .await
            .iter()
            .map(|m| webhook::sum(m, name, labels))
            .sum()
    }

    /// Waits until `metric_sum(name, labels)` reaches `at_least` (20 s at most).
    pub async fn wait_metric(&self, name: &str, labels: &[(&str, &str)], at_least: f64) -> f64 {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let value = self.metric_sum(name, labels).await;
            if value >= at_least {
                return value;
            }
            assert!(
                Instant::now() < deadline,
                "{name}{labels:?} = {value} after 20 s, expected at least {at_least}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Creates a pod in `namespace`; returns it as the apiserver stored it.
    pub async fn create(&self, namespace: &str, pod: &serde_json::Value) -> Pod {
        objects::create_pod(&self.admin, namespace, pod).await
    }

    /// Waits for the scheduler to bind every named pod; name -> node.
    pub async fn bound(&self, namespace: &str, names: &[String]) -> BTreeMap<String, String> {
        objects::wait_bound(&self.admin, namespace, names).await
    }

    /// Every replica's log, for a failure message.
    pub fn logs(&self) -> String {
        self.replicas
            .iter()
            .map(|r| format!("--- {}\n{}", r.name, r.process.log_tail(30)))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Lines of the replicas' logs that say the apiserver refused them (403).
    pub fn forbidden_lines(&self) -> Vec<String> {
        self.replicas
            .iter()
            .flat_map(|r| {
                r.log()
                    .lines()
                    .filter(|l| l.to_lowercase().contains("forbidden"))
                    .map(str::to_string)
                    .collect::<Vec<_>>()
            })
            .collect()
    }
}

/// The decision note's landing: node -> percent, from `land=` (`node-07:100` or
/// `node-0{7:62,3:38}`).
pub fn landing(note: &str) -> BTreeMap<String, u32> {
    landing_in_order(note).into_iter().collect()
}

/// [`landing`] in the order the note names the nodes.
pub fn landing_in_order(note: &str) -> Vec<(String, u32)> {
    let Some(value) = note
        .split(' ')
        .find_map(|field| field.strip_prefix("land="))
    else {
        return Vec::new();
    };
    let (front, inner, back) = match (value.find('{'), value.rfind('}')) {
        (Some(open), Some(close)) => (&value[..open], &value[open + 1..close], &value[close + 1..]),
        _ => ("", value, ""),
    };
    inner
        .split(',')
        .filter(|part| !part.is_empty() && *part != "none")
        .filter_map(|part| {
            let (middle, percent) = part.rsplit_once(':')?;
            Some((format!("{front}{middle}{back}"), percent.parse().ok()?))
        })
        .collect()
}

/// Polls `check` every 200 ms until it answers `Some`, for `limit` at most.
pub async fn wait_for<T, F: std::future::Future<Output = Option<T>>>(
    what: &str,
    limit: Duration,
    check: impl FnMut() -> F,
) -> T {
    wait_for_or(what, limit, String::new, check).await
}

/// [`wait_for`], failing with what `context` says then (a process's log, say).
pub async fn wait_for_or<T, F: std::future::Future<Output = Option<T>>>(
    what: &str,
    limit: Duration,
    context: impl FnOnce() -> String,
    mut check: impl FnMut() -> F,
) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(found) = check().await {
            return found;
        }
        if Instant::now() >= deadline {
            panic!("{what} after {limit:?}\n{}", context());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The decision annotation of a pod, if the webhook wrote one.
pub fn decision(pod: &Pod) -> Option<&str> {
    objects::annotation(pod, "placement-webhook.io/decision")
}

/// The preferred node affinity terms of a pod.
pub fn preferred(pod: &Pod) -> &[k8s_openapi::api::core::v1::PreferredSchedulingTerm] {
    pod.spec
        .as_ref()
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| {
            n.preferred_during_scheduling_ignored_during_execution
                .as_deref()
        })
        .unwrap_or_default()
}

/// How many preferred node affinity terms a pod has.
pub fn preferred_terms(pod: &Pod) -> usize {
    preferred(pod).len()
}

#[test]
fn landing_reads_both_spellings() {
    let one =
        landing("id=1 mode=affinity cpu=2 net=0 est=request land=node-007:100 avoid=0 age=1s");
    assert_eq!(
        one.into_iter().collect::<Vec<_>>(),
        [("node-007".to_string(), 100)]
    );
    let two = landing("id=1 land=node-0{07:62,13:38} avoid=0");
    assert_eq!(two.get("node-007"), Some(&62));
    assert_eq!(two.get("node-013"), Some(&38));
    assert!(landing("id=1 land= avoid=0").is_empty());
}
