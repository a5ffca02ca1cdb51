//! `groundskeeper-job`: one piece of maintenance against one data store, then a result.
//!
//! Progress goes to stderr; the result JSON to `--result-file` (the pod's termination message by
//! default) and to stdout. Exit codes: see `groundskeeper_protocol::exit`. The local computations
//! (`ring-hash`, `revision`) print their answer and write no result.

use std::io::Read;
use std::process::ExitCode;

use clap::Parser;
use groundskeeper_job::cli::{Cli, Command};
use groundskeeper_job::run;
use groundskeeper_protocol::{Outcome, exit, ring_hash_from_json};

fn main() -> ExitCode {
    init_tracing();
    // One TLS provider for the whole process (see the workspace Cargo.toml).
    rustls::crypto::ring::default_provider()
        .install_default()
        .expect("no other TLS provider is installed before main");
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => return ExitCode::from(refuse_arguments(err) as u8),
    };
    // The default hook would print the panic's text as it is: it may hold a URL with a password.
    std::panic::set_hook(Box::new(|info| {
        eprintln!("groundskeeper-job panicked: {}", groundskeeper_stores::failure::shown(info.to_string()));
    }));
    let code = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| dispatch(cli.command))) {
        Ok(code) => code,
        Err(panic) => report_panic(panic.as_ref()),
    };
    ExitCode::from(code as u8)
}

fn dispatch(command: Command) -> i32 {
    match command {
        Command::RingHash => ring_hash_from_stdin(),
        Command::Defrag(args) => groundskeeper_job::etcd::defrag::main(args),
        Command::Compact(args) => groundskeeper_job::etcd::compact::main(args),
        Command::Snapshot(args) => groundskeeper_job::etcd::snapshot::main(args),
        Command::SnapshotCopy(args) => groundskeeper_job::etcd::copy::main(args),
        Command::SnapshotProve(args) => groundskeeper_job::etcd::prove::main(args),
        Command::RestoreMember(args) => groundskeeper_job::etcd::restore_member::main(args),
        Command::SnapshotDelta(args) => groundskeeper_job::etcd::delta::main(args),
        Command::SnapshotReplay(args) => groundskeeper_job::etcd::delta::replay::main(args),
        Command::Cleanup(args) => groundskeeper_job::scylla::cleanup::main(args),
        Command::Revision(args) => groundskeeper_job::revision::main(args),
    }
}

/// A panic is a defect, whatever the input: the run still writes a result (retryable: nothing
/// says the input was wrong) and exits 1 rather than 101 without one.
fn report_panic(panic: &(dyn std::any::Any + Send)) -> i32 {
    let what = panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".to_owned());
    let args: Vec<String> = std::env::args().skip(1).collect();
    let message = format!(
        "groundskeeper-job stopped on an internal error ({what}); this is a defect: please report it \
         with the Job's log. What the run had done is not known; a retry starts it again"
    );
    let message = groundskeeper_stores::failure::shown(message);
    tracing::error!("{message}");
    let Some(report) = groundskeeper_job::cli::empty_report_for(&args) else {
        return exit::RETRYABLE;
    };
    let result =
        run::RunClock::start().finish(report, Outcome::Failed, Some(run::Failure::retryable(message)));
    run::report(&result, &groundskeeper_job::cli::result_file_in(&args));
    run::exit_code(&result)
}

/// Help and version are printed as clap prints them. Any other mistake in the arguments is bad
/// input, and a run that started writes its result all the same: to `--result-file` when the
/// arguments name one, else the default, and to stdout.
fn refuse_arguments(err: clap::Error) -> i32 {
    use clap::error::ErrorKind as Kind;
    if matches!(
        err.kind(),
        Kind::DisplayHelp | Kind::DisplayVersion | Kind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        let _ = err.print();
        return exit::SUCCESS;
    }
    let _ = err.print();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(report) = groundskeeper_job::cli::empty_report_for(&args) else {
        return exit::BAD_INPUT; // no maintenance subcommand: nothing to report on
    };
    let text = err.to_string();
    let first_line = text.lines().next().unwrap_or_default();
    let message = format!(
        "{}; see `groundskeeper-job {} --help`",
        first_line.trim_start_matches("error: "),
        args.first().map(String::as_str).unwrap_or_default()
    );
    let result =
        run::RunClock::start().finish(report, Outcome::Failed, Some(run::Failure::bad_input(message)));
    run::report(&result, &groundskeeper_job::cli::result_file_in(&args));
    run::exit_code(&result)
}

fn ring_hash_from_stdin() -> i32 {
    let mut body = String::new();
    if let Err(err) = std::io::stdin().read_to_string(&mut body) {
        eprintln!("error: cannot read the token ring from stdin: {err}");
        return exit::BAD_INPUT;
    }
    match ring_hash_from_json(&body) {
        Ok(hash) => {
            println!("{hash}");
            exit::SUCCESS
        }
        Err(err) => {
            eprintln!("error: {err}");
            exit::BAD_INPUT
        }
    }
}

fn init_tracing() {
    use std::io::IsTerminal;
    use tracing_subscriber::EnvFilter;
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        // Job logs are read from files: colour codes only where a person watches a terminal.
        .with_ansi(std::io::stderr().is_terminal())
        .with_env_filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")))
        .init();
}
