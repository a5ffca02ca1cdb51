//! Running the commands a task is made of.

use std::process::{Command, ExitCode, ExitStatus, Output};

/// Runs `command` to its end with this terminal, and exits as it did.
///
/// Ctrl-C reaches every process of the terminal's foreground group, the child included: the
/// child (the demo, cargo test) stops on it and cleans up after itself. This process ignores it
/// meanwhile, so it waits for that clean-up instead of handing the terminal back halfway.
pub fn run_to_end(mut command: Command) -> ExitCode {
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(err) => {
            eprintln!("error: cannot start {}: {err}", describe(&command));
            return ExitCode::FAILURE;
        }
    };
    ignore_interrupts();
    match child.wait() {
        Ok(status) => exit_code_of(status),
        Err(err) => {
            eprintln!("error: waiting for {}: {err}", describe(&command));
            ExitCode::FAILURE
        }
    }
}

/// Runs `command` with its output captured; `Err` says what went wrong, output included.
pub fn output(mut command: Command) -> Result<Output, String> {
    let what = describe(&command);
    let output = command.output().map_err(|err| format!("cannot start {what}: {err}"))?;
    if output.status.success() {
        return Ok(output);
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    let stdout = String::from_utf8_lossy(&output.stdout);
    Err(format!("{what} failed ({}):\n{}{}", output.status, stdout.trim_end(), stderr.trim_end()))
}

/// `command` without the variables `cargo run` set for this xtask (`CARGO_PKG_NAME=xtask`,
/// `CARGO_MANIFEST_DIR`, …). Cargo fingerprints a build script by the variables it watches as
/// cargo itself sees them, and ring's watches these: a cargo started from here would see them
/// changed since a cargo started by hand (clippy, `cargo build`) and rebuild ring and every crate
/// above it, the whole workspace included.
pub fn without_cargo_run_env(command: &mut Command) -> &mut Command {
    const SET_BY_CARGO_RUN: &[&str] = &["CARGO_CRATE_NAME", "CARGO_BIN_NAME", "CARGO_PRIMARY_PACKAGE"];
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        if name.starts_with("CARGO_PKG_")
            || name.starts_with("CARGO_MANIFEST_")
            || SET_BY_CARGO_RUN.contains(&&*name)
        {
            command.env_remove(&*name);
        }
    }
    command
}

/// `program arg arg…`, for messages.
pub fn describe(command: &Command) -> String {
    format!("{} {}", command.get_program().to_string_lossy(), arguments(command))
}

/// `arg arg…`, for messages.
pub fn arguments(command: &Command) -> String {
    command.get_args().map(|arg| arg.to_string_lossy().into_owned()).collect::<Vec<_>>().join(" ")
}

/// The shell's convention: a child killed by signal N exits 128 + N.
fn exit_code_of(status: ExitStatus) -> ExitCode {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => ExitCode::from(code.clamp(0, 255) as u8),
        (None, Some(signal)) => ExitCode::from((128 + signal).clamp(0, 255) as u8),
        (None, None) => ExitCode::FAILURE,
    }
}

fn ignore_interrupts() {
    // The C library's signal(2); std has no wrapper and this crate takes no dependencies.
    unsafe extern "C" {
        fn signal(signum: i32, handler: usize) -> usize;
    }
    const SIGINT: i32 = 2;
    const SIG_IGN: usize = 1;
    // SAFETY: installs the "ignore" disposition, no handler code runs; done after the child was
    // spawned, so the child keeps the default disposition.
    unsafe {
        signal(SIGINT, SIG_IGN);
    }
}
