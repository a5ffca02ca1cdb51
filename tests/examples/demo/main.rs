//! The whole system on this machine, no Kubernetes cluster needed: `cargo xtask demo` (which
//! fetches an etcd binary first if none is at hand).
//!
//! groundskeeper's controllers run in this process against an in-memory Kubernetes API, with a
//! real throwaway 3-member etcd and Scylla Manager Agent stand-ins; a simulated Job controller and
//! kubelet run each Job's own arguments through `groundskeeper-job`. The walk-through creates a
//! ScyllaCluster and scales it out 3 → 6, creates an `EtcdCluster` and churns etcd until it is
//! fragmented, and prints what `kubectl get -w` would show meanwhile, then a before/after table.
//! It stops by itself, and on Ctrl-C (SIGINT), SIGTERM or SIGHUP stops early; either way the etcd
//! members are killed and every temporary folder removed.

mod etcd_walk;
mod explore;
mod jobs;
mod logs;
mod report;
mod say;
mod scylla_walk;
mod stage;
mod watch;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::OnceLock;
use std::time::Duration;

use clap::Parser;
use groundskeeper_e2e::etcd_cluster::{EtcdVersion, find_etcd};
use groundskeeper_e2e::scylla_operator::ScyllaOperator;

use crate::stage::Stage;

/// The walk-through of groundskeeper on this machine (see `cargo xtask demo`).
#[derive(Parser)]
struct Args {
    /// Run the same walk-through against the cluster of $KUBECONFIG. Not available: it says what
    /// is missing and does nothing.
    #[arg(long)]
    against_kubeconfig: bool,
    /// After the walk-through, keep everything running to be explored with the real `kubectl`
    /// (and `kubectl groundskeeper`), until Ctrl-C: a kubeconfig and commands to try are printed.
    #[arg(long)]
    keep: bool,
}

/// Set once the walk-through is over and the system is kept running: a signal then is the
/// normal end, not an early stop.
static KEEPING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The etcd data folder, kept to check at the end that it is gone.
static ETCD_DATA: OnceLock<PathBuf> = OnceLock::new();

fn main() -> ExitCode {
    let args = Args::parse();
    if args.against_kubeconfig {
        return refuse_real_cluster();
    }
    let _ = rustls::crypto::ring::default_provider().install_default();
    logs::install();
    let runtime = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("error: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let code = runtime.block_on(run_until_stopped(args.keep));
    // Every task still running goes with the runtime: Jobs' pods and their mounted files too.
    drop(runtime);
    report_leftovers();
    code
}

/// The walk-through, or less of it when a signal comes first. Either way everything it started
/// is stopped (dropped) before this returns.
async fn run_until_stopped(keep: bool) -> ExitCode {
    let outcome = {
        let walk = walk_through(keep);
        tokio::pin!(walk);
        tokio::select! {
            // First, so the signal handlers are in place before anything is started.
            biased;
            signal = stop_signal() => Err(signal),
            result = &mut walk => Ok(result),
        }
    };
    match outcome {
        Ok(Ok(())) => ExitCode::SUCCESS,
        Ok(Err(err)) => {
            eprintln!("\nerror: {err}");
            ExitCode::FAILURE
        }
        Err(signal) if KEEPING.load(std::sync::atomic::Ordering::SeqCst) => {
            println!("\n{signal}: stopping everything");
            ExitCode::SUCCESS
        }
        Err(signal) => {
            say::line(format!("{signal}: stopped early"));
            ExitCode::from(130)
        }
    }
}

async fn walk_through(keep: bool) -> Result<(), String> {
    say::start_clock();
    introduce();
    let etcd_binary = etcd_binary()?;
    let scylla = ScyllaOperator {
        namespace: "scylla".into(),
        cluster: "basic".into(),
        datacenter: "us-east-1".into(),
        cleanup: None,
    };
    say::line(format!(
        "starting the in-memory Kubernetes API, a 3-member etcd ({}), 6 Scylla agent stand-ins, \
         the Job simulator and groundskeeper's controllers",
        etcd_binary.display()
    ));
    let stage = Stage::start(&etcd_binary, scylla, scylla_walk::AFTER).await?;
    let _ = ETCD_DATA.set(stage.etcd.dir().to_path_buf());
    stage.describe();
    let scylla = scylla_walk::walk(&stage).await?;
    let etcd = etcd_walk::walk(&stage).await?;
    stage.step("before and after").await;
    report::print(&scylla, &etcd);
    println!("\nwall time: {:.1} s", say::elapsed().as_secs_f64());
    if keep {
        explore::keep_running(&stage).await?;
    }
    Ok(())
}

fn introduce() {
    println!(
        "groundskeeper, the whole system on this machine: its controllers, the Jobs they create, \
         and groundskeeper-job doing the work.\n\
         \n\
         The Kubernetes API here is an in-memory stand-in, not a kube-apiserver. It keeps objects \
         as JSON in this process and serves what kube's client and watches use (resourceVersions, \
         list/watch with selectors, the status subresource, patches, optimistic concurrency, owner \
         garbage collection, RBAC for the controller's token), and holds custom resources to their \
         CRDs (schema, pruning, defaults, CEL rules) with the printer columns and OpenAPI kubectl \
         reads. It does not do: scheduling, nodes, real pods, containers or images, admission \
         webhooks, server-side apply. Jobs are played by a simulated Job controller and kubelet.\n"
    );
}

/// The etcd `cargo xtask demo` found or fetched (it sets GROUNDSKEEPER_ETCD_3_x), 3.5 first.
fn etcd_binary() -> Result<PathBuf, String> {
    let found = [EtcdVersion::V3_5, EtcdVersion::V3_4].into_iter().map(find_etcd).collect::<Vec<_>>();
    found.iter().find_map(|f| f.clone().ok()).ok_or_else(|| {
        let why: Vec<String> = found.into_iter().filter_map(Result::err).collect();
        format!("no etcd binary: {}. `cargo xtask demo` fetches one into target/tools/.", why.join("; "))
    })
}

/// Waits until `done` holds, checking every 50 ms; after `guard`, gives up naming `what`.
pub async fn wait_until(what: &str, guard: Duration, mut done: impl FnMut() -> bool) -> Result<(), String> {
    let deadline = tokio::time::Instant::now() + guard;
    while !done() {
        if tokio::time::Instant::now() > deadline {
            return Err(format!("gave up after {guard:?} waiting for: {what}"));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

async fn stop_signal() -> &'static str {
    use tokio::signal::unix::{SignalKind, signal};
    let listen = |kind| signal(kind).expect("signal handlers can be installed");
    let (mut interrupt, mut terminate, mut hangup) =
        (listen(SignalKind::interrupt()), listen(SignalKind::terminate()), listen(SignalKind::hangup()));
    tokio::select! {
        _ = interrupt.recv() => "SIGINT",
        _ = terminate.recv() => "SIGTERM",
        _ = hangup.recv() => "SIGHUP",
    }
}

/// Says whether anything outlived the walk-through: child processes (etcd members) or the etcd
/// data folder.
fn report_leftovers() {
    let children = living_children();
    let data = ETCD_DATA.get().filter(|dir| dir.exists());
    match (children.is_empty(), data) {
        (true, None) => println!("left behind: nothing (etcd members stopped, temporary folders removed)"),
        _ => eprintln!(
            "left behind: child processes {children:?}, etcd data {}",
            data.map_or("removed".into(), |d| d.display().to_string())
        ),
    }
}

/// Child processes of this one that still exist, from `/proc/self/task/*/children`.
fn living_children() -> Vec<String> {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    tasks
        .filter_map(Result::ok)
        .filter_map(|task| std::fs::read_to_string(task.path().join("children")).ok())
        .flat_map(|pids| pids.split_whitespace().map(str::to_owned).collect::<Vec<_>>())
        .collect()
}

/// `--against-kubeconfig`: refused, saying what it would take.
fn refuse_real_cluster() -> ExitCode {
    let kubeconfig = std::env::var_os("KUBECONFIG")
        .map(|k| format!("KUBECONFIG is set ({})", Path::new(&k).display()))
        .unwrap_or_else(|| "KUBECONFIG is not set".into());
    eprintln!(
        "--against-kubeconfig: not available; nothing was done ({kubeconfig}).\n\
         \n\
         The same walk-through on a real cluster needs what this demo cannot create by itself:\n\
         - groundskeeper installed there (`kubectl apply -k manifests/install/cluster-wide`, or \
         install/namespaced), and the groundskeeper-job image (`docker build --target job .`) pullable by the \
         cluster's nodes, since the Jobs run there and not in this process;\n\
         - an etcd cluster the Jobs' pods can reach, with its client certificate in a Secret (the \
         throwaway etcd here listens on this machine's loopback only);\n\
         - a ScyllaCluster run by scylla-operator, with Scylla Manager Agents (the agents here are \
         stand-ins with no Scylla behind them).\n\
         It has not been built because it could not be tried: no kube-apiserver can be installed \
         where this demo was written.\n\
         \n\
         What runs against a real cluster today: KUBECONFIG=<file> cargo xtask test --test real_cluster \
         (the CRDs apply and become Established; the cleanup controller creates a Job for a fake \
         ScyllaCluster)."
    );
    ExitCode::from(2)
}
