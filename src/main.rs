use std::io::Read;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use placement_webhook::config::{Config, Mode};

// A review allocates and frees many short-lived objects (the pod, the terms, the patch) on
// every worker thread; glibc's malloc spent about a third of the server's time on them.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Steers Flink TaskManager pods onto lightly loaded nodes.
#[derive(Parser)]
#[command(name = "placement-webhook", version)]
struct Cli {
    /// Log lines on standard error: `text` (coloured only on a terminal) or `json` (one object
    /// per line, for a log stack).
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the admission webhook over HTTPS.
    #[command(after_help = "Environment:\n  \
        RUST_LOG       log filter, e.g. info or info,kube=debug (default: info, without kube's \
        per-retry lines)\n  \
        POD_NAME       this replica's pod name (the downward API; deploy/ sets it)\n  \
        POD_NAMESPACE  its namespace; with POD_NAME, the replicas find each other through the \
        Service's endpoints\n  \
        KUBECONFIG     the cluster to watch outside a pod (in a pod: its service account)")]
    Serve {
        #[command(flatten)]
        common: CommonArgs,
        /// Address to listen on [default: 0.0.0.0:8443].
        #[arg(long)]
        listen: Option<SocketAddr>,
        /// Serving certificate (PEM); without it a self-signed localhost certificate is made.
        /// Re-read every 2 s: a renewed Secret needs no restart.
        #[arg(long, requires = "tls_key")]
        tls_cert: Option<PathBuf>,
        /// The serving certificate's private key (PEM, PKCS#8, PKCS#1 or SEC1).
        #[arg(long, requires = "tls_cert")]
        tls_key: Option<PathBuf>,
        /// Require client certificates signed by this CA.
        #[arg(long)]
        client_ca: Option<PathBuf>,
        /// Use no cluster, even when a kubeconfig or a service account is found: no node, pod
        /// or namespace watches (nodes come from the load snapshot alone).
        #[arg(long)]
        no_cluster: bool,
    },
    /// Answer one AdmissionReview from a file (or - for stdin) exactly as the server would.
    Review {
        /// AdmissionReview JSON file, or - for standard input.
        file: PathBuf,
        #[command(flatten)]
        common: CommonArgs,
        /// Print a table of nodes and the decoded patch to standard error.
        #[arg(long)]
        explain: bool,
        /// Use no cluster, even when a kubeconfig or a service account is found: nodes and
        /// their labels come from the load snapshot alone.
        #[arg(long)]
        no_cluster: bool,
    },
    /// What a burst of TaskManagers would do to the cluster, with and without the webhook.
    Simulate {
        #[command(flatten)]
        common: CommonArgs,
        /// How many TaskManagers arrive at once.
        #[arg(long, default_value_t = 200)]
        pods: usize,
        /// Cores each TaskManager requests and uses.
        #[arg(long, default_value_t = 2.0, allow_negative_numbers = true)]
        cpu: f64,
        /// Memory each TaskManager requests (a Kubernetes quantity).
        #[arg(long, default_value = "4Gi")]
        memory: String,
        /// Network each TaskManager moves, e.g. 50MB/s.
        #[arg(long, default_value = "0")]
        network: String,
        /// A TaskManager pod (YAML or JSON) from a real job's pod template, used as it is.
        #[arg(long)]
        pod_file: Option<PathBuf>,
        /// Webhook replicas sharing the burst.
        #[arg(long, default_value_t = 1)]
        replicas: usize,
        /// How the apiserver splits the reviews between the replicas, e.g. 0.8,0.2 (first share
        /// to the first replica, the rest round robin to the others); default: round robin.
        #[arg(long, value_delimiter = ',')]
        split: Vec<f64>,
        /// Delay between a bind and the webhook hearing of it.
        #[arg(long, default_value = "10ms")]
        bind_lag: humantime::Duration,
        /// Write the picture to this SVG file.
        #[arg(long)]
        svg: Option<PathBuf>,
        /// Print the result as one JSON document.
        #[arg(long)]
        json: bool,
        /// Use no cluster, even when a kubeconfig or a service account is found: nodes and
        /// requests come from the load snapshot alone.
        #[arg(long)]
        no_cluster: bool,
        /// A day instead of one burst: the burst again at each of these times (e.g.
        /// 0s,2m,5m), a new job each time, with the metrics following the TaskManagers as
        /// they start; prints a table per wave.
        #[arg(long, value_delimiter = ',')]
        waves: Vec<humantime::Duration>,
        /// With --waves: how long after it is created a TaskManager starts using its CPU.
        #[arg(long, default_value = "60s")]
        start_delay: humantime::Duration,
        /// The scheduler holds the nodes in name order, where its release has the webhook take
        /// them to be anywhere: nodes that joined in name order, like loads side by side.
        #[arg(long)]
        listed_in_name_order: bool,
    },
    /// Which TaskManagers run on hot nodes right now, by job and node; read-only.
    Hotspots {
        #[command(flatten)]
        common: CommonArgs,
        /// Print the report as one JSON document.
        #[arg(long)]
        json: bool,
        /// Use no cluster, even when a kubeconfig or a service account is found: nodes and
        /// pods come from the load snapshot alone.
        #[arg(long)]
        no_cluster: bool,
    },
    /// Make a CA and a serving certificate for the webhook Service; the caBundle (base64 of
    /// the CA) goes to standard output, what was written to standard error.
    ///
    /// Writes ca.crt, ca.key (the CA's key, mode 0600: not for the Secret), tls.crt and tls.key
    /// into --out. A directory that already holds a CA is refused: --keep-ca signs a new serving
    /// certificate with that CA (the caBundle stays), --force makes a new CA.
    Certs {
        /// Name of the webhook's Service (`placement-webhook` in deploy/).
        #[arg(long)]
        service: String,
        /// Namespace of the Service (`placement-webhook` in deploy/).
        #[arg(long)]
        namespace: String,
        /// Directory for the files (created when missing).
        #[arg(long)]
        out: PathBuf,
        /// Days the certificates are valid (a kept CA's own end still bounds the new one).
        #[arg(long, default_value_t = 365)]
        days: u32,
        /// Also valid for this IP address (repeat for several), for a webhook registered by URL.
        #[arg(long = "ip")]
        ip_addresses: Vec<std::net::IpAddr>,
        /// Sign a new serving certificate with the CA already in --out (ca.crt and ca.key).
        #[arg(long, conflicts_with = "force")]
        keep_ca: bool,
        /// Replace a CA already in --out with a new one.
        #[arg(long)]
        force: bool,
    },
}

#[derive(Args)]
struct CommonArgs {
    /// YAML config file; flags override it.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Static node-load snapshot (JSON, see docs/snapshot-format.md); replaces the config's
    /// `prometheus` source.
    #[arg(long, conflicts_with = "prometheus_url")]
    metrics_file: Option<PathBuf>,
    /// Prometheus base URL for live node load; replaces the config's `metrics_file`, keeps the
    /// rest of its `prometheus` section.
    #[arg(long)]
    prometheus_url: Option<String>,
    /// What to write into a targeted pod: affinity, schedulerName, both or observe.
    #[arg(long, value_parser = parse_mode)]
    mode: Option<Mode>,
}

fn parse_mode(text: &str) -> Result<Mode, String> {
    [
        Mode::Affinity,
        Mode::SchedulerName,
        Mode::Both,
        Mode::Observe,
    ]
    .into_iter()
    .find(|mode| mode.as_str() == text)
    .ok_or_else(|| format!("{text:?} is not one of affinity, schedulerName, both, observe"))
}

impl CommonArgs {
    fn load(&self) -> anyhow::Result<Config> {
        let overrides = |config: &mut Config| self.apply(config);
        Ok(match &self.config {
            Some(path) => Config::from_file_overridden(path, overrides)?,
            None => {
                let mut config = Config::default();
                overrides(&mut config);
                config
            }
        })
    }

    /// The flags over the config: a load source given on the command line is the only one.
    fn apply(&self, config: &mut Config) {
        if let Some(path) = &self.metrics_file {
            config.metrics_file = Some(path.clone());
            config.prometheus = None;
        }
        if let Some(url) = &self.prometheus_url {
            // The flag sets the URL; the rest of a configured prometheus section stays.
            let mut prometheus = config.prometheus.take().unwrap_or_default();
            prometheus.url = url.clone();
            config.prometheus = Some(prometheus);
            config.metrics_file = None;
        }
        if let Some(mode) = self.mode {
            config.mode = mode;
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // One-shot commands speak through their output; their logs default to warnings.
    init_tracing(matches!(cli.command, Command::Serve { .. }), cli.log_format);
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("placement-webhook: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// The cluster as the apiserver lists it when one is configured and answers (`None` otherwise),
/// and the load snapshot matched to its nodes.
async fn cluster_and_snapshot(
    config: &placement_webhook::config::Config,
    use_cluster: bool,
) -> anyhow::Result<(
    placement_webhook::snapshot::LoadSnapshot,
    Option<placement_webhook::inventory::listing::ClusterState>,
)> {
    use placement_webhook::inventory::{client, listing};
    let client = if use_cluster {
        client::try_client().await
    } else {
        None
    };
    let cluster = match client {
        Some(client) => match listing::list_cluster(client).await {
            Ok(state) => {
                eprintln!(
                    "note: nodes and requests from the apiserver: {} nodes, {} bound pods",
                    state.inventory.nodes.len(),
                    state.pods.occupancy.pods()
                );
                Some(state)
            }
            Err(e) => {
                eprintln!("note: cannot list the cluster ({e}): nodes from the snapshot");
                None
            }
        },
        None => None,
    };
    let inventory = cluster.as_ref().map(|c| &c.inventory);
    let snapshot = placement_webhook::cli::review::load_snapshot_with(config, inventory).await?;
    Ok((snapshot, cluster))
}

fn init_tracing(serving: bool, format: LogFormat) {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new(if serving {
            placement_webhook::telemetry::DEFAULT_LOG_FILTER
        } else {
            "warn,kube_client::client::builder=off"
        })
    });
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Json => logs.json().flatten_event(true).with_ansi(false).init(),
        // Escape codes only where a terminal reads them, never into a file or a pod's log.
        LogFormat::Text => {
            let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
            logs.with_ansi(std::io::stderr().is_terminal() && !no_color)
                .init()
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Runtime::new()?;
    match cli.command {
        Command::Serve {
            common,
            listen,
            tls_cert,
            tls_key,
            client_ca,
            no_cluster,
        } => {
            let mut config = common.load()?;
            if let Some(listen) = listen {
                config.listen = listen;
            }
            if tls_cert.is_some() {
                config.tls_cert = tls_cert;
                config.tls_key = tls_key;
            }
            if client_ca.is_some() {
                config.client_ca = client_ca;
            }
            config.validate()?;
            runtime.block_on(serve(config, !no_cluster))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Review {
            file,
            common,
            explain,
            no_cluster,
        } => {
            let config = common.load()?;
            config.validate()?;
            let body = read_input(&file)?;
            let (snapshot, cluster) =
                runtime.block_on(cluster_and_snapshot(&config, !no_cluster))?;
            let out = placement_webhook::cli::review::review_with(
                config,
                snapshot,
                cluster.as_ref(),
                &body,
                explain,
            )?;
            println!("{out}");
            Ok(ExitCode::SUCCESS)
        }
        Command::Simulate {
            common,
            pods,
            cpu,
            memory,
            network,
            pod_file,
            replicas,
            split,
            bind_lag,
            svg,
            json,
            no_cluster,
            waves,
            start_delay,
            listed_in_name_order,
        } => {
            use placement_webhook::cli;
            let config = common.load()?;
            config.validate()?;
            let network_bytes_per_second = cli::simulate::parse_bytes_per_second(&network)
                .ok_or_else(|| {
                    anyhow::anyhow!("--network {network:?} is not a rate like 50MB/s")
                })?;
            let pod = match &pod_file {
                Some(path) => {
                    let text = std::fs::read_to_string(path)
                        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
                    Some(
                        cli::simulate::pod_from_text(&text)
                            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?,
                    )
                }
                None => None,
            };
            let first_share = cli::simulate::first_share(&split, replicas)?;
            let request = cli::simulate::Request {
                pods,
                cpu_cores: cpu,
                memory,
                network_bytes_per_second,
                pod,
                replicas,
                first_share,
                forwarding: config.forward.enabled,
                bind_lag: bind_lag.into(),
                seed: 1,
                listed_in_name_order,
            };
            // Flags are checked before anything is loaded.
            cli::simulate::burst_of(&request)?;
            if !waves.is_empty() && (svg.is_some() || json) {
                anyhow::bail!("--waves prints a table: --svg and --json are for one burst");
            }
            let waves: Vec<std::time::Duration> = waves.into_iter().map(Into::into).collect();
            let waves = cli::simulate::waves_of(&request, &waves, start_delay.into())?;
            if let Some(weight) = request
                .pod
                .as_ref()
                .and_then(|pod| serde_json::from_value(pod.clone()).ok())
                .and_then(|pod| {
                    placement_webhook::placement::eligible::own_spread::own_hostname_anti_affinity(
                        &pod,
                    )
                })
            {
                eprintln!(
                    "note: {}",
                    placement_webhook::placement::eligible::own_spread::note(weight)
                );
            }
            let (snapshot, cluster) =
                runtime.block_on(cluster_and_snapshot(&config, !no_cluster))?;
            let snapshot = match &cluster {
                Some(cluster) => cli::simulate::with_cluster(snapshot, cluster)?,
                None => snapshot,
            };
            if !waves.is_empty() {
                print!(
                    "{}",
                    cli::simulate::day_table(snapshot, &config, &request, &waves)?
                );
                return Ok(ExitCode::SUCCESS);
            }
            // Progress on stderr when it is a terminal; indicatif stays quiet otherwise.
            let bar = indicatif::ProgressBar::with_draw_target(
                Some((cli::simulate::runs(&config) * request.pods) as u64),
                indicatif::ProgressDrawTarget::stderr(),
            );
            let report =
                cli::simulate::simulate_observed(snapshot, &config, &request, &|| bar.inc(1));
            bar.finish_and_clear();
            let report = report?;
            if let Some(path) = &svg {
                let picture = cli::simulate::svg(&report)
                    .map_err(|e| anyhow::anyhow!("cannot draw the picture: {e}"))?;
                std::fs::write(path, picture)
                    .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
            }
            if json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                print!("{}", cli::simulate::table(&report));
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Hotspots {
            common,
            json,
            no_cluster,
        } => {
            use placement_webhook::{cli, hotspots};
            let config = common.load()?;
            config.validate()?;
            let (snapshot, cluster) =
                runtime.block_on(cluster_and_snapshot(&config, !no_cluster))?;
            let report = cli::hotspots::report_for(&config, &snapshot, cluster.as_ref());
            if json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                print!("{}", hotspots::table(&report));
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Certs {
            service,
            namespace,
            out,
            days,
            ip_addresses,
            keep_ca,
            force,
        } => {
            use placement_webhook::cli::certs::{self, CertRequest};
            let request = CertRequest {
                service,
                namespace,
                days,
                ip_addresses,
            };
            let bundle = if keep_ca {
                certs::renew(&request, &out)?
            } else {
                if !force {
                    certs::refuse_existing_ca(&out)?;
                }
                certs::generate(&request)?
            };
            let written = certs::write_files(&out, &bundle)?;
            eprintln!("placement-webhook: {written}; the caBundle follows on stdout");
            println!("{}", bundle.ca_bundle());
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn read_input(file: &PathBuf) -> anyhow::Result<Vec<u8>> {
    if file.as_os_str() == "-" {
        let mut body = Vec::new();
        std::io::stdin().read_to_end(&mut body)?;
        Ok(body)
    } else {
        std::fs::read(file).map_err(|e| anyhow::anyhow!("cannot read {}: {e}", file.display()))
    }
}

async fn serve(config: Config, use_cluster: bool) -> anyhow::Result<()> {
    let mut running = placement_webhook::app::start(
        config,
        placement_webhook::app::StartOptions {
            use_cluster,
            identity: None,
        },
    )
    .await?;
    shutdown_signal().await;
    running.shutdown();
    running.wait().await;
    Ok(())
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = term.recv() => {},
                _ = tokio::signal::ctrl_c() => {},
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
    tracing::info!("shutdown signal received");
}
