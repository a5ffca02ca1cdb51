//! Runs the etcd Jobs of the simulated kubelet through the runner itself (shared by the
//! scenarios with real etcd clusters).

use groundskeeper_e2e::kubelet::{Container, Termination};
use groundskeeper_job::cli::{Cli, Command};
use groundskeeper_stores::etcd::connect::EndpointArgs;
use tokio::sync::{oneshot, watch};

/// Runs a maintenance Job's container once `gate` is open: `groundskeeper-job`'s subcommand
/// entry point (what its `main` calls) with the Job's own arguments, the TLS files they name
/// replaced by the simulator's copies of the mounted Secret, the result file standing for the
/// termination message. On a thread of its own, as it builds its own runtime like the binary.
pub async fn run_etcd_job(container: Container, mut gate: watch::Receiver<bool>) -> Termination {
    let _ = gate.wait_for(|open| *open).await;
    let job = container.job["metadata"]["name"].as_str().unwrap_or_default().to_owned();
    let args = container.args;
    let command = Cli::try_parse_args(args.clone())
        .unwrap_or_else(|e| panic!("Job {job}: its args {args:?} do not parse as groundskeeper-job's: {e}"))
        .command;
    let files = &container.files;
    let mount = |connection: &mut EndpointArgs| {
        for path in [&mut connection.cacert, &mut connection.cert, &mut connection.key] {
            if let Some(p) = path.as_mut() {
                *p = files.required(p);
            }
        }
    };
    let termination_log = tempfile::NamedTempFile::new().expect("a temp file");
    let result_file = termination_log.path().to_owned();
    let (exited, exit_code) = oneshot::channel();
    let run: Box<dyn FnOnce() -> i32 + Send> = match command {
        Command::Defrag(mut args) => {
            mount(&mut args.connection);
            args.result_file = result_file;
            Box::new(move || groundskeeper_job::etcd::defrag::main(args))
        }
        Command::Compact(mut args) => {
            mount(&mut args.connection);
            args.result_file = result_file;
            Box::new(move || groundskeeper_job::etcd::compact::main(args))
        }
        Command::Snapshot(mut args) => {
            mount(&mut args.connection);
            args.result_file = result_file;
            Box::new(move || groundskeeper_job::etcd::snapshot::main(args))
        }
        _ => panic!("Job {job}: {args:?} is not a subcommand these scenarios run"),
    };
    std::thread::spawn(move || {
        let _ = exited.send(run());
    });
    let exit_code = exit_code.await.expect("the runner ends with an exit code");
    Termination {
        exit_code,
        message: std::fs::read_to_string(termination_log.path()).expect("the result file"),
    }
}
