//! A synthetic node_exporter for many fake nodes at once, served over plain HTTP on loopback.
//!
//! Prometheus scrapes it with `honor_labels: true`, so every node's series keep their own
//! `instance` (`<ip>:9100`) and `node` labels, as they would behind kube-prometheus-stack
//! relabelling. Counters advance with wall time at the rates the test sets, so `rate()` over
//! them returns those loads.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::Router;
use axum::extract::State;
use axum::routing::get;

/// Traffic on devices the webhook must leave out (loopback, pod veths): large, so a query that
/// counted them would be far off.
pub const IGNORED_DEVICE_BYTES_PER_SECOND: f64 = 5.0e9;

/// What one fake node reports.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Emit {
    Normal,
    /// Every CPU and network sample is NaN.
    NaN,
    /// The node's series disappear from the scrape.
    Missing,
}

#[derive(Debug, Clone)]
pub struct FakeNode {
    pub name: String,
    pub ip: String,
    /// CPU busy fraction.
    pub busy: f64,
    /// Receive + transmit bytes per second on the physical NIC.
    pub network_bytes_per_second: f64,
    /// Link speed; 0: not reported.
    pub nic_bytes_per_second: f64,
    pub cores: u32,
    pub memory_used: f64,
    pub emit: Emit,
    idle_seconds: f64,
    busy_seconds: f64,
    received: f64,
    transmitted: f64,
    ignored: f64,
}

impl FakeNode {
    pub fn new(index: usize, busy: f64, network_bytes_per_second: f64) -> Self {
        FakeNode {
            name: format!("worker-{index:04}"),
            ip: format!(
                "10.{}.{}.{}",
                index / 65536 % 256,
                index / 256 % 256,
                index % 256
            ),
            busy,
            network_bytes_per_second,
            nic_bytes_per_second: 1.25e9,
            cores: 4,
            memory_used: 0.5,
            emit: Emit::Normal,
            idle_seconds: 1000.0,
            busy_seconds: 1000.0,
            received: 1.0e9,
            transmitted: 1.0e9,
            ignored: 1.0e9,
        }
    }

    pub fn instance(&self) -> String {
        format!("{}:9100", self.ip)
    }

    /// Counters move on by `dt` seconds at the current rates.
    fn advance(&mut self, dt: f64) {
        self.idle_seconds += dt * (1.0 - self.busy);
        self.busy_seconds += dt * self.busy;
        // Receive and transmit split 60/40: only their sum matters.
        self.received += dt * self.network_bytes_per_second * 0.6;
        self.transmitted += dt * self.network_bytes_per_second * 0.4;
        self.ignored += dt * IGNORED_DEVICE_BYTES_PER_SECOND;
    }
}

/// A running TaskManager as the kubelet's cAdvisor reports it.
#[derive(Debug, Clone)]
pub struct FakePod {
    pub namespace: String,
    pub name: String,
    /// Cores its main container uses.
    pub cpu_cores: f64,
    /// Receive + transmit bytes per second on its eth0.
    pub network_bytes_per_second: f64,
    /// Its CPU samples are NaN.
    pub nan: bool,
    cpu_seconds: f64,
    sidecar_seconds: f64,
    received: f64,
    transmitted: f64,
    loopback: f64,
}

impl FakePod {
    pub fn new(namespace: &str, name: &str, cpu_cores: f64, network_bytes_per_second: f64) -> Self {
        FakePod {
            namespace: namespace.into(),
            name: name.into(),
            cpu_cores,
            network_bytes_per_second,
            nan: false,
            cpu_seconds: 50.0,
            sidecar_seconds: 50.0,
            received: 1.0e9,
            transmitted: 1.0e9,
            loopback: 1.0e9,
        }
    }

    fn advance(&mut self, dt: f64) {
        self.cpu_seconds += dt * self.cpu_cores;
        // A busy sidecar in the same pod: not the TaskManager's load.
        self.sidecar_seconds += dt * 3.0;
        self.received += dt * self.network_bytes_per_second * 0.5;
        self.transmitted += dt * self.network_bytes_per_second * 0.5;
        self.loopback += dt * IGNORED_DEVICE_BYTES_PER_SECOND;
    }
}

struct Fleet {
    nodes: BTreeMap<String, FakeNode>,
    pods: Vec<FakePod>,
    last: Instant,
    scrapes: u64,
    /// Scrapes answered 503 (the exporter timing out or down) while set.
    failing: bool,
    failed: u64,
}

impl Fleet {
    fn advance(&mut self) {
        let now = Instant::now();
        let dt = now.duration_since(self.last).as_secs_f64();
        self.last = now;
        for node in self.nodes.values_mut() {
            node.advance(dt);
        }
        for pod in &mut self.pods {
            pod.advance(dt);
        }
    }
}

/// A running exporter; stops when dropped.
pub struct Exporter {
    pub addr: SocketAddr,
    fleet: Arc<Mutex<Fleet>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Exporter {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Exporter {
    pub async fn start(nodes: Vec<FakeNode>) -> Exporter {
        Self::start_with_pods(nodes, Vec::new()).await
    }

    /// Also serves cAdvisor's container series for `pods`.
    pub async fn start_with_pods(nodes: Vec<FakeNode>, pods: Vec<FakePod>) -> Exporter {
        let fleet = Arc::new(Mutex::new(Fleet {
            pods,
            nodes: nodes.into_iter().map(|n| (n.name.clone(), n)).collect(),
            last: Instant::now(),
            scrapes: 0,
            failing: false,
            failed: 0,
        }));
        let app = Router::new()
            .route("/metrics", get(metrics))
            .with_state(fleet.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind exporter");
        let addr = listener.local_addr().expect("exporter addr");
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Exporter { addr, fleet, task }
    }

    /// Changes one node; counters keep their history up to now.
    pub fn update(&self, name: &str, change: impl FnOnce(&mut FakeNode)) {
        let mut fleet = self.fleet.lock().expect("fleet");
        fleet.advance();
        change(fleet.nodes.get_mut(name).expect("known fake node"));
    }

    /// Changes every node, in name order with its index; counters keep their history up to now.
    pub fn update_each(&self, mut change: impl FnMut(usize, &mut FakeNode)) {
        let mut fleet = self.fleet.lock().expect("fleet");
        fleet.advance();
        for (i, node) in fleet.nodes.values_mut().enumerate() {
            change(i, node);
        }
    }

    pub fn nodes(&self) -> Vec<FakeNode> {
        self.fleet
            .lock()
            .expect("fleet")
            .nodes
            .values()
            .cloned()
            .collect()
    }

    pub fn scrapes(&self) -> u64 {
        self.fleet.lock().expect("fleet").scrapes
    }

    /// From now on every scrape fails (503), as a timed-out or restarting exporter's does.
    pub fn fail_scrapes(&self) {
        self.fleet.lock().expect("fleet").failing = true;
    }

    /// Scrapes failed since [`Exporter::fail_scrapes`].
    pub fn failed_scrapes(&self) -> u64 {
        self.fleet.lock().expect("fleet").failed
    }
}

async fn metrics(State(fleet): State<Arc<Mutex<Fleet>>>) -> Result<String, axum::http::StatusCode> {
    let mut fleet = fleet.lock().expect("fleet");
    fleet.advance();
    if fleet.failing {
        fleet.failed += 1;
        return Err(axum::http::StatusCode::SERVICE_UNAVAILABLE);
    }
    fleet.scrapes += 1;
    let mut out = exposition(fleet.nodes.values());
    out.push_str(&pod_exposition(&fleet.pods));
    Ok(out)
}

/// cAdvisor's per-container CPU and per-pod network counters, as the kubelet exposes them.
pub fn pod_exposition(pods: &[FakePod]) -> String {
    let mut out = String::new();
    if pods.is_empty() {
        return out;
    }
    let labels = |p: &FakePod| format!("namespace=\"{}\",pod=\"{}\"", p.namespace, p.name);
    out.push_str("# TYPE container_cpu_usage_seconds_total counter\n");
    for p in pods {
        let main = if p.nan { f64::NAN } else { p.cpu_seconds };
        let _ = writeln!(
            out,
            "container_cpu_usage_seconds_total{{{},container=\"flink-main-container\",cpu=\"total\"}} {main}",
            labels(p)
        );
        let _ = writeln!(
            out,
            "container_cpu_usage_seconds_total{{{},container=\"log-shipper\",cpu=\"total\"}} {}",
            labels(p),
            p.sidecar_seconds
        );
    }
    let received: fn(&FakePod) -> f64 = |p| p.received;
    let transmitted: fn(&FakePod) -> f64 = |p| p.transmitted;
    for (family, value) in [
        ("container_network_receive_bytes_total", received),
        ("container_network_transmit_bytes_total", transmitted),
    ] {
        let _ = writeln!(out, "# TYPE {family} counter");
        for p in pods {
            let _ = writeln!(
                out,
                "{family}{{{},interface=\"eth0\"}} {}",
                labels(p),
                value(p)
            );
            let _ = writeln!(
                out,
                "{family}{{{},interface=\"lo\"}} {}",
                labels(p),
                p.loopback
            );
        }
    }
    out
}

/// The text exposition format, one metric family at a time.
pub fn exposition<'a>(nodes: impl Iterator<Item = &'a FakeNode> + Clone) -> String {
    let mut out = String::with_capacity(4096);
    let shown = nodes.filter(|n| n.emit != Emit::Missing);
    let value = |n: &FakeNode, v: f64| if n.emit == Emit::NaN { f64::NAN } else { v };
    let labels = |n: &FakeNode| format!("instance=\"{}\",node=\"{}\"", n.instance(), n.name);

    out.push_str("# TYPE node_uname_info gauge\n");
    for n in shown.clone() {
        let _ = writeln!(
            out,
            "node_uname_info{{{},nodename=\"{}\",sysname=\"Linux\"}} 1",
            labels(n),
            n.name
        );
    }
    out.push_str("# TYPE node_cpu_seconds_total counter\n");
    for n in shown.clone() {
        for cpu in 0..n.cores {
            // Every core runs at the node's busy fraction, so the average over cores is exact.
            let per_core = |seconds: f64| value(n, seconds + 100.0 * f64::from(cpu));
            let _ = writeln!(
                out,
                "node_cpu_seconds_total{{{},cpu=\"{cpu}\",mode=\"idle\"}} {}",
                labels(n),
                per_core(n.idle_seconds)
            );
            let _ = writeln!(
                out,
                "node_cpu_seconds_total{{{},cpu=\"{cpu}\",mode=\"user\"}} {}",
                labels(n),
                per_core(n.busy_seconds)
            );
        }
    }
    let received: fn(&FakeNode) -> f64 = |n| n.received;
    let transmitted: fn(&FakeNode) -> f64 = |n| n.transmitted;
    for (family, share) in [
        ("node_network_receive_bytes_total", received),
        ("node_network_transmit_bytes_total", transmitted),
    ] {
        let _ = writeln!(out, "# TYPE {family} counter");
        for n in shown.clone() {
            let _ = writeln!(
                out,
                "{family}{{{},device=\"eth0\"}} {}",
                labels(n),
                value(n, share(n))
            );
            for device in ["lo", "veth3f2a9c01", "cali0a1b2c3d4e5"] {
                let _ = writeln!(
                    out,
                    "{family}{{{},device=\"{device}\"}} {}",
                    labels(n),
                    n.ignored
                );
            }
        }
    }
    out.push_str("# TYPE node_network_speed_bytes gauge\n");
    // A NIC that reports no link speed (common on cloud VMs) has no series at all.
    for n in shown.clone().filter(|n| n.nic_bytes_per_second > 0.0) {
        let _ = writeln!(
            out,
            "node_network_speed_bytes{{{},device=\"eth0\"}} {}",
            labels(n),
            n.nic_bytes_per_second
        );
        let _ = writeln!(
            out,
            "node_network_speed_bytes{{{},device=\"lo\"}} -1",
            labels(n)
        );
    }
    let total_memory = 64.0 * 1024.0 * 1024.0 * 1024.0;
    out.push_str("# TYPE node_memory_MemTotal_bytes gauge\n");
    for n in shown.clone() {
        let _ = writeln!(
            out,
            "node_memory_MemTotal_bytes{{{}}} {total_memory}",
            labels(n)
        );
    }
    out.push_str("# TYPE node_memory_MemAvailable_bytes gauge\n");
    for n in shown {
        let _ = writeln!(
            out,
            "node_memory_MemAvailable_bytes{{{}}} {}",
            labels(n),
            total_memory * (1.0 - n.memory_used)
        );
    }
    out
}
