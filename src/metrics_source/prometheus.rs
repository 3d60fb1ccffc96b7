//! Live node load from Prometheus, refreshed in the background.
//!
//! One refresh sends the same handful of vectorized instant queries whatever the number of
//! nodes or pods, builds a whole [`LoadSnapshot`] and swaps it
//! into the view. The request path never waits on Prometheus: a failed refresh keeps the last
//! good snapshot, which ages until `max_staleness` makes admission fail open.

use crate::inflight::shared::SharedWorld;
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use base64::Engine;
use futures::future::join_all;
use reqwest::header::{AUTHORIZATION, HeaderValue};
use tracing::{Instrument, info, info_span, warn};

use super::handover::HandoverReader;
use super::readings::{self, BuildError, BuildReport, Readings, ResponseError, Series};
use crate::config::prometheus::{Auth, NodeMapping, PrometheusConfig};
use crate::facts::Inventory;
use crate::inflight::ledger::handover::Evidence;
use crate::snapshot::LoadSnapshot;
use crate::telemetry::{Metrics, QueryLabels};
use crate::view::ViewStore;

/// Responses larger than this are refused (5,000 nodes answer in well under 2 MiB).
const MAX_RESPONSE_BYTES: usize = 64 * 1024 * 1024;

/// The queries of one refresh, rendered once from the templates.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryPlan {
    pub(crate) cpu: String,
    pub(crate) network: String,
    pub(crate) cpu_cores: Option<String>,
    pub(crate) network_capacity: Option<String>,
    pub(crate) memory: Option<String>,
    pub(crate) uname: Option<String>,
    pub(crate) pod_cpu: Option<String>,
    pub(crate) pod_network: Option<String>,
    pub(crate) node_samples: Option<String>,
}

impl QueryPlan {
    pub(crate) fn new(config: &PrometheusConfig) -> Self {
        let window = format!("{}s", config.rate_window.as_secs().max(1));
        // The device regex sits inside a PromQL string literal.
        let devices = config
            .exclude_devices
            .replace('\\', "\\\\")
            .replace('"', "\\\"");
        let by = config.node_mapping.group_label();
        // Validated at start; an invalid one here (a config not validated) adds nothing.
        let extra = crate::config::prometheus::matchers(&config.extra_selector).unwrap_or_default();
        let render = |t: &str| {
            let t = if extra.is_empty() {
                // A selector of the extra matchers alone is left out whole.
                t.replace("{{extra_selector}}", "")
                    .replace("{extra_selector}", "")
            } else {
                t.replace(
                    "{{extra_selector}}",
                    &format!("{{{}}}", extra.trim_end_matches(',')),
                )
                .replace("{extra_selector}", &extra)
            };
            t.replace("{by}", by)
                .replace("{window}", &window)
                .replace("{exclude_devices}", &devices)
        };
        let q = &config.queries;
        QueryPlan {
            cpu: render(&q.cpu),
            network: render(&q.network),
            cpu_cores: q.cpu_cores.as_deref().map(render),
            network_capacity: q.network_capacity.as_deref().map(render),
            memory: q.memory.as_deref().map(render),
            uname: matches!(config.node_mapping, NodeMapping::Uname).then(|| render(&q.uname)),
            pod_cpu: q.pod_cpu.as_deref().map(render),
            // Without CPU readings there is no estimate to add network to.
            pod_network: q.pod_cpu.as_ref().and(q.pod_network.as_deref()).map(render),
            // Only the pods' readings are read over a node's span.
            node_samples: q
                .pod_cpu
                .as_ref()
                .and(q.node_samples.as_deref())
                .map(render),
        }
    }

    /// (name, query) pairs in a fixed order: the same count for 5 nodes or 5,000.
    pub fn queries(&self) -> Vec<(&'static str, &str)> {
        let mut out = vec![
            ("cpu", self.cpu.as_str()),
            ("network", self.network.as_str()),
        ];
        for (name, q) in [
            ("cpu_cores", &self.cpu_cores),
            ("network_capacity", &self.network_capacity),
            ("memory", &self.memory),
            ("uname", &self.uname),
            ("pod_cpu", &self.pod_cpu),
            ("pod_network", &self.pod_network),
            ("node_samples", &self.node_samples),
        ] {
            if let Some(q) = q {
                out.push((name, q.as_str()));
            }
        }
        out
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("prometheus url: {0}")]
    Url(String),
    // The cause is part of the message, not a source: a printed chain would say it twice.
    #[error("cannot read {path}: {error}")]
    Read { path: String, error: std::io::Error },
    #[error("prometheus CA bundle: {0}")]
    Ca(String),
    #[error("prometheus client: {0}")]
    Client(String),
}

/// One query that did not produce a vector.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryFailure {
    pub query: &'static str,
    pub(crate) error: String,
}

/// Why a refresh published nothing.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RefreshError {
    /// No connection, or it broke: every query fails alike, so the queries are not named.
    #[error("Prometheus at {url} cannot be reached: {cause}")]
    Unreachable { url: String, cause: String },
    #[error("{query} query failed: {error}")]
    Query { query: &'static str, error: String },
    #[error("credentials: {0}")]
    Credentials(String),
    #[error(transparent)]
    Build(#[from] BuildError),
    #[error("{0}")]
    Internal(String),
}

/// What one refresh did.
#[derive(Debug)]
pub struct Refresh {
    pub outcome: Result<(LoadSnapshot, BuildReport), RefreshError>,
    /// Every failed query, the optional ones included.
    pub failures: Vec<QueryFailure>,
    pub queries_sent: usize,
    pub duration: Duration,
}

/// A Prometheus HTTP API client with the rendered queries.
pub struct PrometheusSource {
    client: prometheus_http_query::Client,
    config: PrometheusConfig,
    plan: QueryPlan,
}

impl PrometheusSource {
    pub fn new(config: PrometheusConfig) -> Result<Self, SourceError> {
        crate::install_crypto_provider();
        let mut builder = reqwest::Client::builder()
            // The whole exchange is bounded in `run`; this only bounds connecting.
            .connect_timeout(config.query_timeout)
            .pool_max_idle_per_host(8);
        if let Some(path) = &config.ca_file {
            let pem = std::fs::read(path).map_err(|error| SourceError::Read {
                path: path.display().to_string(),
                error,
            })?;
            let certs = reqwest::Certificate::from_pem_bundle(&pem)
                .map_err(|e| SourceError::Ca(e.to_string()))?;
            builder = builder.tls_certs_merge(certs);
        }
        let http = builder
            .build()
            .map_err(|e| SourceError::Client(e.to_string()))?;
        let client = prometheus_http_query::Client::from(http, &config.url)
            .map_err(|e| SourceError::Url(e.to_string()))?;
        Ok(PrometheusSource {
            plan: QueryPlan::new(&config),
            client,
            config,
        })
    }

    pub fn config(&self) -> &PrometheusConfig {
        &self.config
    }

    pub fn plan(&self) -> &QueryPlan {
        &self.plan
    }

    /// Runs every query at once and builds a snapshot from the answers.
    pub async fn refresh(&self, inventory: Option<&Inventory>) -> Refresh {
        let started = Instant::now();
        let taken_at = SystemTime::now();
        let queries = self.plan.queries();
        let queries_sent = queries.len();
        let auth = match self.authorization() {
            Ok(auth) => auth,
            Err(e) => {
                return Refresh {
                    outcome: Err(RefreshError::Credentials(e)),
                    failures: Vec::new(),
                    queries_sent: 0,
                    duration: started.elapsed(),
                };
            }
        };
        let answers = join_all(queries.iter().map(|(_, q)| self.run(q, auth.as_ref()))).await;

        let mut readings = Readings::default();
        let mut failures = Vec::new();
        let mut required_failure = None;
        for ((name, promql), answer) in queries.iter().zip(answers) {
            let series = match answer {
                Ok(series) => series,
                Err(error) => {
                    let (unreachable, error) = match error {
                        QueryError::Unreachable(cause) => (true, cause),
                        QueryError::Failed(error) => (false, error),
                    };
                    tracing::debug!(query = name, promql, %error, "Prometheus query failed");
                    if matches!(*name, "cpu" | "network" | "uname") && required_failure.is_none() {
                        required_failure = Some(if unreachable {
                            RefreshError::Unreachable {
                                url: self.config.url.clone(),
                                cause: error.clone(),
                            }
                        } else {
                            RefreshError::Query {
                                query: name,
                                error: error.clone(),
                            }
                        });
                    }
                    failures.push(QueryFailure { query: name, error });
                    continue;
                }
            };
            match *name {
                "cpu" => readings.cpu = series,
                "network" => readings.network = series,
                "cpu_cores" => readings.cpu_cores = Some(series),
                "network_capacity" => readings.network_capacity = Some(series),
                "memory" => readings.memory = Some(series),
                "pod_cpu" => readings.pod_cpu = Some(series),
                "pod_network" => readings.pod_network = Some(series),
                "node_samples" => readings.node_samples = Some(series),
                _ => readings.uname = Some(series),
            }
        }
        let outcome = match required_failure {
            Some(e) => Err(e),
            None => {
                let node_by_ip = inventory.map(Inventory::node_by_internal_ip);
                let mapping = self.config.node_mapping.clone();
                off_the_workers(move || {
                    readings::build_snapshot(&readings, &mapping, node_by_ip.as_ref(), taken_at)
                })
                .await
                .map_err(RefreshError::Internal)
                .and_then(|built| built.map_err(RefreshError::from))
            }
        };
        Refresh {
            outcome,
            failures,
            queries_sent,
            duration: started.elapsed(),
        }
    }

    fn authorization(&self) -> Result<Option<HeaderValue>, String> {
        let read = |path: &PathBuf| {
            std::fs::read_to_string(path)
                .map(|s| s.trim().to_string())
                .map_err(|e| format!("cannot read {}: {e}", path.display()))
        };
        let value = match &self.config.auth {
            None => return Ok(None),
            Some(Auth::Bearer { token_file }) => format!("Bearer {}", read(token_file)?),
            Some(Auth::Basic {
                username,
                password_file,
            }) => {
                let pair = format!("{username}:{}", read(password_file)?);
                format!(
                    "Basic {}",
                    base64::engine::general_purpose::STANDARD.encode(pair)
                )
            }
        };
        let mut header = HeaderValue::from_str(&value)
            .map_err(|_| "credentials hold invalid bytes".to_string())?;
        header.set_sensitive(true);
        Ok(Some(header))
    }

    async fn run(
        &self,
        query: &str,
        auth: Option<&HeaderValue>,
    ) -> Result<Vec<Series>, QueryError> {
        let budget = self.config.query_timeout;
        let mut request = self
            .client
            .query(query)
            .timeout(i64::try_from(budget.as_millis()).unwrap_or(i64::MAX));
        if let Some(auth) = auth {
            request = request.header(AUTHORIZATION, auth.clone());
        }
        let exchange = async {
            let unreachable = |e: prometheus_http_query::Error| QueryError::Unreachable(cause(&e));
            let mut response = request.get_raw().await.map_err(unreachable)?;
            let status = response.status();
            let mut body = Vec::new();
            while let Some(chunk) = response
                .chunk()
                .await
                .map_err(|e| QueryError::Unreachable(cause(&e)))?
            {
                if body.len() + chunk.len() > MAX_RESPONSE_BYTES {
                    return Err(QueryError::Failed(format!(
                        "response larger than {MAX_RESPONSE_BYTES} bytes"
                    )));
                }
                body.extend_from_slice(&chunk);
            }
            match off_the_workers(move || readings::parse_vector(&body))
                .await
                .map_err(QueryError::Failed)?
            {
                Ok(series) => Ok(series),
                // An error page from a proxy says less than its status.
                Err(ResponseError::Garbage(_)) if !status.is_success() => {
                    Err(QueryError::Failed(format!("HTTP {status}")))
                }
                Err(e) => Err(QueryError::Failed(e.to_string())),
            }
        };
        tokio::time::timeout(budget, exchange)
            .await
            .map_err(|_| QueryError::Failed(format!("no answer within {budget:?}")))?
    }
}

/// Why one query got no vector.
enum QueryError {
    /// The request could not be sent or its answer not received.
    Unreachable(String),
    /// Prometheus (or whatever answered) gave no usable answer.
    Failed(String),
}

/// What went wrong under a client error, without the request's URL (which holds the whole
/// encoded query): the causes after the one that names the URL.
fn cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut chain = Vec::new();
    let mut next = Some(error);
    while let Some(e) = next {
        chain.push(e.to_string());
        next = e.source();
    }
    let after_url = chain
        .iter()
        .rposition(|text| text.contains("url ("))
        .map_or(0, |i| i + 1);
    if after_url < chain.len() {
        chain[after_url..].join(": ")
    } else {
        // Only the URL's own message: say it without the query string.
        with_causes(error)
            .split(" for url (")
            .next()
            .unwrap_or_default()
            .to_string()
    }
}

/// Runs CPU-bound work (parsing megabytes of JSON at 5,000 nodes, rebuilding the view) on the
/// blocking pool, so the async workers keep answering reviews meanwhile.
/// A panic there becomes an error: the refresher keeps running.
async fn off_the_workers<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, String> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| format!("internal error: {e}"))
}

/// An error and its causes on one line: client errors hide the useful part in their sources.
fn with_causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(e) = cause {
        text.push_str(": ");
        text.push_str(&e.to_string());
        cause = e.source();
    }
    text
}

/// The source's state, logged when it changes rather than on every refresh or request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Health {
    Starting,
    /// The last refresh published a snapshot of this many nodes, leaving out this many.
    Fresh {
        nodes: usize,
        left_out: usize,
    },
    /// Refreshes fail; the last good snapshot is still young enough to use.
    Failing,
    /// Refreshes fail and the last good snapshot (if any) is older than `max_staleness`.
    Stale,
}

impl Health {
    /// The state after a refresh, given how old the newest published snapshot is.
    pub(crate) fn after(
        refreshed: Option<(usize, usize)>,
        age: Option<Duration>,
        max_staleness: Duration,
    ) -> Health {
        match (refreshed, age) {
            (Some((nodes, left_out)), _) => Health::Fresh { nodes, left_out },
            (None, Some(age)) if age <= max_staleness => Health::Failing,
            (None, _) => Health::Stale,
        }
    }
}

/// Refreshes every `refresh_interval` until `shutdown` completes.
pub(crate) fn spawn_refresher(
    source: Arc<PrometheusSource>,
    store: Arc<ViewStore>,
    world: Arc<SharedWorld>,
    metrics: Arc<Metrics>,
    max_staleness: Duration,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(source.config().refresh_interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut health = Health::Starting;
        let mut last_good: Option<Instant> = None;
        let mut handovers = HandoverReader::default();
        let refresher = async {
            loop {
                tick.tick().await;
                let refresh = source
                    .refresh(store.inventory().as_deref())
                    .instrument(info_span!("prometheus_refresh", url = %source.config().url))
                    .await;
                metrics
                    .prometheus_refresh_duration
                    .observe(refresh.duration.as_secs_f64());
                for failure in &refresh.failures {
                    metrics
                        .prometheus_query_errors
                        .get_or_create(&QueryLabels {
                            query: failure.query,
                        })
                        .inc();
                }
                let Refresh {
                    outcome,
                    failures,
                    queries_sent,
                    duration,
                } = refresh;
                let published = match outcome {
                    Ok((mut snapshot, report)) => {
                        let counts = (snapshot.nodes.len(), report.incomplete_nodes.len());
                        if !snapshot.pods.is_empty() {
                            // Which job each measured pod runs for: the pod watch knows.
                            let world = world.read();
                            world.cluster.running.label(&mut snapshot);
                        }
                        let evidence = Evidence::of(&snapshot);
                        let store = store.clone();
                        let published = off_the_workers(move || store.publish_snapshot(snapshot))
                            .await
                            .map(|()| (counts, report))
                            .map_err(RefreshError::Internal);
                        // After the view: a decision never sees a charge gone before the
                        // metrics that show it.
                        if published.is_ok() {
                            handovers.read(&world, &evidence, &metrics);
                        }
                        published
                    }
                    Err(e) => Err(e),
                };
                let (refreshed, error) = match published {
                    Ok(done) => {
                        last_good = Some(Instant::now());
                        (Some(done), None)
                    }
                    Err(e) => {
                        tracing::debug!(error = %e, "refresh failed");
                        (None, Some(e))
                    }
                };
                let next = Health::after(
                    refreshed.as_ref().map(|(c, _)| *c),
                    last_good.map(|t| t.elapsed()),
                    max_staleness,
                );
                if next != health {
                    match (&next, refreshed, error) {
                        (Health::Fresh { nodes, left_out }, Some((_, report)), _) => {
                            info!(
                                nodes,
                                left_out,
                                left_out_examples = ?report.incomplete_nodes.iter().take(5).collect::<Vec<_>>(),
                                unmapped_series = report.unmapped_series,
                                non_finite_values = report.non_finite_values,
                                queries = queries_sent,
                                duration_ms = duration.as_millis() as u64,
                                "node load from Prometheus"
                            );
                            for f in &failures {
                                warn!(query = f.query, error = %f.error, "optional Prometheus query failed: its readings are left out");
                            }
                        }
                        (Health::Failing, _, error) => warn!(
                            error = %error.map(|e| e.to_string()).unwrap_or_default(),
                            "Prometheus refresh failed: keeping the last snapshot until it is older than max_staleness"
                        ),
                        (Health::Stale, _, error) => warn!(
                            error = %error.map(|e| e.to_string()).unwrap_or_default(),
                            "no fresh node load: target pods are admitted without a patch until Prometheus answers"
                        ),
                        _ => {}
                    }
                    health = next;
                }
            }
        };
        tokio::select! {
            _ = refresher => {},
            _ = shutdown => {},
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_queries_render_for_each_mapping() {
        let mut config = PrometheusConfig::for_url("http://prometheus:9090");
        config.rate_window = Duration::from_secs(60);
        let plan = QueryPlan::new(&config);
        assert_eq!(
            plan.cpu,
            concat!(
                r#"1 - avg by (instance) ((rate(node_cpu_seconds_total{mode="idle"}[60s])"#,
                r#" and node_cpu_seconds_total{mode="idle"} offset 60s)"#,
                r#" or deriv(node_cpu_seconds_total{mode="idle"}[60s]))"#
            )
        );
        assert!(
            plan.network
                .contains(r#"device!~"lo|veth.*|cali.*|flannel.*|cni.*|docker.*""#)
        );
        // Whatever the number of nodes and pods: five node queries, the uname join, the
        // running pods' CPU and network, and the nodes' samples over the window.
        assert_eq!(plan.queries().len(), 9);
        assert!(plan.pod_cpu.as_deref().is_some_and(|q| q.contains("[60s]")));
        assert_eq!(
            plan.node_samples.as_deref(),
            Some("max by (instance) (count_over_time(node_uname_info[60s]))")
        );

        config.node_mapping = NodeMapping::Label {
            name: "node".into(),
        };
        config.queries.memory = None;
        let plan = QueryPlan::new(&config);
        assert!(plan.cpu.contains("avg by (node)"));
        assert_eq!(plan.uname, None);
        let names: Vec<_> = plan.queries().iter().map(|(n, _)| *n).collect();
        assert_eq!(
            names,
            [
                "cpu",
                "network",
                "cpu_cores",
                "network_capacity",
                "pod_cpu",
                "pod_network",
                "node_samples"
            ]
        );
        config.queries.pod_cpu = None;
        let plan = QueryPlan::new(&config);
        assert_eq!(plan.pod_network, None, "network alone estimates nothing");
        assert_eq!(plan.node_samples, None, "no pod is read over a node's span");
    }

    #[test]
    fn the_extra_selector_reaches_every_series_read() {
        let mut config = PrometheusConfig::for_url("http://p:9090");
        let plain = QueryPlan::new(&config);
        config.extra_selector = r#"cluster="prod", env=~"a|b""#.into();
        config.rate_window = Duration::from_secs(60);
        let plan = QueryPlan::new(&config);
        assert_eq!(
            plan.cpu,
            concat!(
                r#"1 - avg by (instance) ((rate(node_cpu_seconds_total{cluster="prod",env=~"a|b",mode="idle"}[60s])"#,
                r#" and node_cpu_seconds_total{cluster="prod",env=~"a|b",mode="idle"} offset 60s)"#,
                r#" or deriv(node_cpu_seconds_total{cluster="prod",env=~"a|b",mode="idle"}[60s]))"#
            )
        );
        assert_eq!(
            plan.memory.as_deref(),
            Some(
                r#"1 - sum by (instance) (node_memory_MemAvailable_bytes{cluster="prod",env=~"a|b"}) / sum by (instance) (node_memory_MemTotal_bytes{cluster="prod",env=~"a|b"})"#
            )
        );
        assert_eq!(
            plan.uname.as_deref(),
            Some(concat!(
                r#"max by (instance, nodename) (node_uname_info{cluster="prod",env=~"a|b"})"#,
                r#" or max by (instance, nodename) (last_over_time(node_uname_info{cluster="prod",env=~"a|b"}[60s])"#,
                r#" unless on (instance) node_uname_info{cluster="prod",env=~"a|b"})"#
            ))
        );
        // Every series of every query, and nothing else changed.
        for ((name, q), (_, before)) in plan.queries().into_iter().zip(plain.queries()) {
            let series = before.matches("_total").count() + before.matches("_bytes").count()
                - before.matches("_bytes_total").count()
                + before.matches("node_uname_info").count();
            assert_eq!(
                q.matches(r#"cluster="prod""#).count(),
                series,
                "{name}: {q}"
            );
            assert_eq!(
                q.replace(r#"cluster="prod",env=~"a|b","#, "")
                    .replace(r#"{cluster="prod",env=~"a|b"}"#, ""),
                before
                    .replace("[120s]", "[60s]")
                    .replace("offset 120s", "offset 60s"),
                "{name}"
            );
            assert!(!q.contains("extra_selector"), "{name}: {q}");
        }
        // Without one the queries are as they always were.
        assert_eq!(
            plain.memory.as_deref(),
            Some(
                "1 - sum by (instance) (node_memory_MemAvailable_bytes) / sum by (instance) (node_memory_MemTotal_bytes)"
            )
        );
    }

    #[test]
    fn device_regex_is_escaped_inside_the_string_literal() {
        let mut config = PrometheusConfig::for_url("http://p:9090");
        config.exclude_devices = r#"lo|eth\d+"x"#.into();
        assert!(
            QueryPlan::new(&config)
                .network
                .contains(r#"device!~"lo|eth\\d+\"x""#)
        );
    }

    #[test]
    fn health_follows_refreshes_and_staleness() {
        let limit = Duration::from_secs(120);
        assert_eq!(
            Health::after(Some((5, 1)), None, limit),
            Health::Fresh {
                nodes: 5,
                left_out: 1
            }
        );
        assert_eq!(
            Health::after(None, Some(Duration::from_secs(30)), limit),
            Health::Failing
        );
        assert_eq!(
            Health::after(None, Some(Duration::from_secs(121)), limit),
            Health::Stale
        );
        assert_eq!(Health::after(None, None, limit), Health::Stale);
    }

    #[tokio::test]
    async fn unreachable_prometheus_is_said_once_with_its_url() {
        let mut config = PrometheusConfig::for_url("http://127.0.0.1:9");
        config.query_timeout = Duration::from_millis(500);
        let source = PrometheusSource::new(config).expect("source");
        let refresh = source.refresh(None).await;
        let Err(error @ RefreshError::Unreachable { .. }) = &refresh.outcome else {
            panic!("{:?}", refresh.outcome);
        };
        let text = error.to_string();
        assert!(
            text.starts_with("Prometheus at http://127.0.0.1:9 cannot be reached: "),
            "{text}"
        );
        assert!(text.contains("refused"), "{text}");
        // Not the encoded query.
        assert!(!text.contains("query="), "{text}");
        assert_eq!(refresh.failures.len(), refresh.queries_sent);
        assert_eq!(refresh.queries_sent, 9);
    }
}
