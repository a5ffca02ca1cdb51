//! `groundskeeper-controller`: runs the Scylla cleanup controller, its ring observer, the
//! EtcdCluster controller, the task and the schedule controllers in one process, behind leader election, with `/metrics`, `/healthz`
//! and `/readyz`.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, ValueEnum};
use groundskeeper_controller::runtime::context::Context;
use groundskeeper_controller::runtime::http::{self, Readiness};
use groundskeeper_controller::runtime::leader::{self, LeaderElectionConfig};
use groundskeeper_controller::runtime::metrics::Metrics;
use groundskeeper_controller::{Config, etcd, run_task_controller, schedules, scylla};

#[derive(Parser)]
#[command(name = "groundskeeper-controller", version, about)]
struct Cli {
    #[command(flatten)]
    config: Config,
    /// Address of the `/metrics`, `/healthz` and `/readyz` endpoints.
    #[arg(long, env = "GROUNDSKEEPER_HTTP_ADDR", default_value = "0.0.0.0:8080")]
    http_addr: SocketAddr,
    /// Which controllers to run.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "scylla-cleanup,ring-observer,etcd,tasks,schedules"
    )]
    controllers: Vec<Part>,
    /// Namespace of the leader-election Lease (the controller's own).
    #[arg(long, env = "POD_NAMESPACE", default_value = "groundskeeper")]
    leader_election_namespace: String,
    /// Name of the leader-election Lease.
    #[arg(long, env = "GROUNDSKEEPER_LEADER_ELECTION_LEASE", default_value = "groundskeeper-controller")]
    leader_election_lease: String,
    /// This replica's identity in the Lease (the pod name).
    #[arg(long, env = "POD_NAME")]
    identity: Option<String>,
    /// Act without leader election. Only safe with a single replica.
    #[arg(long)]
    no_leader_election: bool,
    /// Log as JSON lines instead of text.
    #[arg(long, env = "GROUNDSKEEPER_LOG_JSON")]
    log_json: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Part {
    /// Scylla node cleanup after scaling.
    ScyllaCleanup,
    /// Writes token-ring hashes where scylla-operator's sidecar does not.
    RingObserver,
    /// EtcdCluster compaction and defragmentation.
    Etcd,
    /// MaintenanceTasks: queued per target, run as Jobs, results in their status.
    Tasks,
    /// MaintenanceSchedules: MaintenanceTasks made on a cron schedule.
    Schedules,
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing(cli.log_json);
    // One TLS provider for the whole process: kube, reqwest and tonic all use ring.
    rustls::crypto::ring::default_provider()
        .install_default()
        .expect("no other TLS provider is installed before main");
    match run(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            tracing::error!(error = %err, "groundskeeper-controller stops");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> Result<(), Box<dyn std::error::Error>> {
    groundskeeper_controller::check_config(&cli.config)?;
    let client = kube::Client::try_default().await?;
    let metrics = Arc::new(Metrics::new());
    let readiness = Readiness::default();
    tokio::spawn(serve_http(cli.http_addr, metrics.clone(), readiness.clone()));

    let version = client.apiserver_version().await?;
    tracing::info!(kubernetes = %version.git_version, "reached the API server");
    readiness.set_ready();

    let ctx = Arc::new(cli.config.clone().context(client.clone(), metrics.clone()));
    let controllers = cli.controllers.clone();
    // Polled only once this replica leads (or at once without leader election).
    let work = async move {
        metrics.set_leader(true);
        run_until_shutdown(ctx, controllers).await;
    };
    if cli.no_leader_election {
        work.await;
        return Ok(());
    }
    let identity = cli.identity.clone().unwrap_or_else(hostname);
    let election =
        LeaderElectionConfig::new(cli.leader_election_namespace, cli.leader_election_lease, identity);
    // Losing the lease ends the process: a restart is the simple way to be sure nothing of the
    // old term keeps acting.
    leader::run_as_leader(client, election, work).await?;
    Ok(())
}

async fn run_until_shutdown(ctx: Arc<Context>, parts: Vec<Part>) {
    let controllers = parts.into_iter().map(|part| {
        let ctx = ctx.clone();
        let task: std::pin::Pin<Box<dyn Future<Output = ()> + Send>> = match part {
            Part::ScyllaCleanup => Box::pin(scylla::controller::run(ctx)),
            Part::RingObserver => Box::pin(scylla::ring_observer::run_ring_observer(ctx)),
            Part::Etcd => Box::pin(etcd::controller::run(ctx)),
            Part::Tasks => Box::pin(run_task_controller(ctx)),
            Part::Schedules => Box::pin(schedules::controller::run(ctx)),
        };
        task
    });
    tokio::select! {
        _ = futures::future::join_all(controllers) => tracing::warn!("every controller stopped"),
        _ = shutdown_signal() => tracing::info!("shutting down"),
    }
}

async fn serve_http(addr: SocketAddr, metrics: Arc<Metrics>, readiness: Readiness) {
    if let Err(err) = http::serve(addr, metrics, readiness).await {
        tracing::error!(%addr, error = %err, "the /metrics, /healthz and /readyz server stopped");
        std::process::exit(1);
    }
}

async fn shutdown_signal() {
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("SIGTERM can be handled");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate.recv() => {}
    }
}

fn hostname() -> String {
    std::fs::read_to_string("/etc/hostname")
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| format!("groundskeeper-{}", std::process::id()))
}

fn init_tracing(json: bool) {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    use std::io::IsTerminal;
    let builder =
        tracing_subscriber::fmt().with_env_filter(filter).with_ansi(std::io::stdout().is_terminal());
    if json { builder.json().init() } else { builder.init() }
}
