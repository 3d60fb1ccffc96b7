//! A real Prometheus (built by `tests/prometheus/build.sh` from the pinned module) on a loopback port, scraping the
//! synthetic exporter every second, or the node-exporter and cAdvisor series kwok serves for
//! the nodes of a test cluster. Stopped by its own pid when dropped, pass or fail.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::ports::free_port;

/// The pinned `prometheus` binary.
pub fn binary() -> PathBuf {
    tool("prometheus")
}

/// `prometheus` or `promtool` as `tests/prometheus/build.sh` builds them (release 3.16.0);
/// missing, the test fails with that command.
pub fn tool(name: &str) -> PathBuf {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/prometheus/bin")
        .join(name);
    assert!(
        path.is_file(),
        "{} is missing: run `bash tests/prometheus/build.sh`",
        path.display()
    );
    path
}

pub struct Prometheus {
    binary: PathBuf,
    dir: tempfile::TempDir,
    pub port: u16,
    child: Option<Child>,
}

impl Prometheus {
    /// Starts Prometheus scraping `targets` every second and waits until it is ready.
    pub async fn start(binary: PathBuf, targets: &[SocketAddr]) -> Prometheus {
        Self::start_scraping_every(binary, targets, 1).await
    }

    /// Starts Prometheus scraping `targets` every `seconds` and waits until it is ready.
    pub async fn start_scraping_every(
        binary: PathBuf,
        targets: &[SocketAddr],
        seconds: u32,
    ) -> Prometheus {
        let dir = tempfile::tempdir().expect("prometheus dir");
        let targets: Vec<String> = targets.iter().map(|a| format!("\"{a}\"")).collect();
        let config = format!(
            "{}scrape_configs:\n  - job_name: synthetic-nodes\n    honor_labels: true\n    \
             static_configs:\n      - targets: [{}]\n",
            global(seconds),
            targets.join(", ")
        );
        Self::start_with(binary, dir, &config).await
    }

    /// Starts Prometheus scraping, every `seconds`, the series kwok serves for each node of a
    /// cluster (tests/kube/kwok/metrics.yaml), found through kwok's `/discovery/prometheus`,
    /// and labelled as a kube-prometheus install labels its exporters': job `node-exporter`
    /// with `instance="<InternalIP>:9100"`, job `kubelet` (cAdvisor) with
    /// `instance="<InternalIP>:10250"`, both with `node`.
    ///
    /// kwok's targets name their node only in their path, and its metric expressions cannot
    /// read a node's addresses, so the addresses come from `targets.nodes`; a node not listed
    /// there (one created later) is scraped with its name as `instance`. (Kubernetes discovery
    /// would know them, but it needs the nodes' kubelets, which kwok's nodes have not.)
    pub async fn start_scraping_kwok(
        binary: PathBuf,
        targets: &KwokTargets,
        seconds: u32,
    ) -> Prometheus {
        let dir = tempfile::tempdir().expect("prometheus dir");
        // kwok lists a target per node and Metric object: each job keeps its Metric's.
        let job = |name: &str, metric: &str, port: u16| {
            let mut job = format!(
                "  - job_name: {name}\n    http_sd_configs:\n      \
                 - {{url: 'http://{}/discovery/prometheus', refresh_interval: {seconds}s}}\n    \
                 relabel_configs:\n      \
                 - {{source_labels: [metrics_name], regex: '{metric}', action: keep}}\n      \
                 - {{source_labels: [__metrics_path__], regex: '/metrics/nodes/([^/]+)/.*', \
                 target_label: node}}\n      \
                 - {{source_labels: [node], target_label: instance}}\n",
                targets.kwok
            );
            for (node, ip) in &targets.nodes {
                job.push_str(&format!(
                    "      - {{source_labels: [node], regex: '{}', target_label: instance, \
                     replacement: '{ip}:{port}'}}\n",
                    node.replace('.', "\\.")
                ));
            }
            job + "      - {regex: metrics_name, action: labeldrop}\n"
        };
        let config = format!(
            "{}scrape_configs:\n{}{}",
            global(seconds),
            job("node-exporter", "node-exporter", 9100),
            job("kubelet", "cadvisor", 10250)
        );
        Self::start_with(binary, dir, &config).await
    }

    async fn start_with(binary: PathBuf, dir: tempfile::TempDir, config: &str) -> Prometheus {
        std::fs::write(dir.path().join("prometheus.yml"), config).expect("write config");
        let mut prometheus = Prometheus {
            binary,
            dir,
            port: free_port(),
            child: None,
        };
        prometheus.launch().await;
        prometheus
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Kills the process (by its pid) and waits for it.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same port with the same data.
    pub async fn restart(&mut self) {
        self.stop();
        self.launch().await;
    }

    /// Starts it again on the same port with no data, as a Prometheus without a persistent
    /// volume comes back: every series begins anew.
    pub async fn restart_empty(&mut self) {
        self.stop();
        let data = self.dir.path().join("data");
        if data.exists() {
            std::fs::remove_dir_all(&data).expect("remove prometheus data");
        }
        self.launch().await;
    }

    async fn launch(&mut self) {
        let log = std::fs::File::create(self.dir.path().join("prometheus.log")).expect("log file");
        let child = Command::new(&self.binary)
            .arg(format!(
                "--config.file={}",
                self.dir.path().join("prometheus.yml").display()
            ))
            .arg(format!(
                "--storage.tsdb.path={}",
                self.dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{}", self.port))
            .arg("--storage.tsdb.retention.time=1h")
            .arg("--log.level=warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start prometheus");
        self.child = Some(child);
        self.wait_ready().await;
    }

    async fn wait_ready(&mut self) {
        placement_webhook::install_crypto_provider();
        let client = reqwest::Client::new();
        let ready = format!("{}/-/ready", self.url());
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                panic!("prometheus exited early ({status}): {}", self.log());
            }
            if let Ok(r) = client.get(&ready).send().await
                && r.status().is_success()
            {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "prometheus not ready after 30 s: {}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("prometheus.log")).unwrap_or_default()
    }

    /// An instant query's vector: each series' labels and value.
    pub async fn query(&self, promql: &str) -> Vec<(BTreeMap<String, String>, f64)> {
        self.query_at(promql, None).await
    }

    /// An instant query's vector evaluated `at` a past moment (`None`: now).
    pub async fn query_at(
        &self,
        promql: &str,
        at: Option<std::time::SystemTime>,
    ) -> Vec<(BTreeMap<String, String>, f64)> {
        let mut params = vec![("query", promql.to_string())];
        if let Some(at) = at {
            let seconds = at
                .duration_since(std::time::UNIX_EPOCH)
                .expect("after 1970")
                .as_secs_f64();
            params.push(("time", format!("{seconds:.3}")));
        }
        let reply: serde_json::Value = reqwest::Client::new()
            .get(format!("{}/api/v1/query", self.url()))
            .query(&params)
            .send()
            .await
            .expect("prometheus answers")
            .json()
            .await
            .expect("prometheus JSON");
        assert_eq!(reply["status"], "success", "{promql}: {reply}");
        reply["data"]["result"]
            .as_array()
            .unwrap_or_else(|| panic!("{promql}: not a vector: {reply}"))
            .iter()
            .map(|series| {
                let labels = serde_json::from_value(series["metric"].clone()).expect("labels");
                let value = series["value"][1]
                    .as_str()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or_else(|| panic!("{promql}: value of {series}"));
                (labels, value)
            })
            .collect()
    }

    /// Waits until exactly `targets` scrape targets are up, as in a cluster whose monitoring
    /// runs already.
    pub async fn wait_targets_up(&self, targets: usize) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let up = self.query("count(up == 1)").await;
            let count = up.first().map_or(0.0, |s| s.1) as usize;
            if count == targets {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{count} of {targets} scrape targets up after 30 s\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}

/// What [`Prometheus::start_scraping_kwok`] scrapes.
pub struct KwokTargets {
    /// kwok's `--server-address`.
    pub kwok: SocketAddr,
    /// Each node's name and InternalIP.
    pub nodes: Vec<(String, String)>,
}

fn global(seconds: u32) -> String {
    format!(
        "global:\n  scrape_interval: {seconds}s\n  scrape_timeout: {seconds}s\n  \
         evaluation_interval: {seconds}s\n"
    )
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        self.stop();
    }
}
