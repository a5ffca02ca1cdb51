//! `groundskeeper-job`: one piece of maintenance against one data store, then a result.
//!
//! Progress goes to stderr; the result JSON to `--result-file` (the pod's termination message by
//! default) and to stdout. Exit codes: see `groundskeeper_protocol::exit`.

use std::io::Read;
use std::process::ExitCode;

use clap::Parser;
use groundskeeper_job::cli::{Cli, Command};
use groundskeeper_protocol::{exit, ring_hash_from_json};

fn main() -> ExitCode {
    init_tracing();
    // One TLS provider for the whole process (see the workspace Cargo.toml).
    rustls::crypto::ring::default_provider()
        .install_default()
        .expect("no other TLS provider is installed before main");
    let cli = Cli::parse();
    let code = match cli.command {
        Command::RingHash => ring_hash_from_stdin(),
        Command::Defrag(args) => groundskeeper_job::etcd::defrag::main(args),
        Command::Compact(args) => groundskeeper_job::etcd::compact::main(args),
        Command::Cleanup(args) => groundskeeper_job::scylla::cleanup::main(args),
    };
    ExitCode::from(code as u8)
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
