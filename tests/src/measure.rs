//! Measuring a child process for benchmarks: wall time and peak resident memory.

use std::process::Command;
use std::time::{Duration, Instant};

/// What one measured run of a command gave.
#[derive(Debug, Clone, Copy)]
pub struct Measured {
    /// Exit code, or -1 when the process was killed by a signal.
    pub exit_code: i32,
    pub wall: Duration,
    /// Peak resident set size (`ru_maxrss`), KiB.
    pub peak_rss_kib: i64,
}

/// Runs `command` to its end and measures it.
#[allow(clippy::zombie_processes)] // reaped by wait4, which also yields the rusage
pub fn run_measured(command: &mut Command) -> std::io::Result<Measured> {
    let started = Instant::now();
    let child = command.spawn()?;
    let (exit_code, usage) = wait_with_rusage(child.id() as libc::pid_t)?;
    Ok(Measured { exit_code, wall: started.elapsed(), peak_rss_kib: usage.ru_maxrss })
}

/// `wait4`: reaps the child and returns its exit code and resource usage.
fn wait_with_rusage(pid: libc::pid_t) -> std::io::Result<(i32, libc::rusage)> {
    let mut status = 0;
    // SAFETY: rusage is plain data; wait4 fills it for the child we spawned and reaps it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    if reaped != pid {
        return Err(std::io::Error::last_os_error());
    }
    let code = if libc::WIFEXITED(status) { libc::WEXITSTATUS(status) } else { -1 };
    Ok((code, usage))
}

/// Writes back every dirty page (sync(2)), so that a measured phase does not pay for the writes
/// of what ran before it.
pub fn flush_disk() {
    // SAFETY: sync(2) takes no arguments and cannot fail.
    unsafe { libc::sync() };
}

/// One measured run of `groundskeeper-job`: its wall time, its own peak memory and its result.
pub struct JobRun {
    pub wall: Duration,
    /// The runner's own `VmHWM`, bytes, as it logs it when it ends (a child's `ru_maxrss` is not
    /// used for it: on Linux it starts from the peak of the process that spawned it); a member it
    /// starts is not included.
    pub peak_bytes: u64,
    pub result: groundskeeper_protocol::JobResult,
}

/// Runs `binary` (a `groundskeeper-job`) with `args` to its end, its result in
/// `work/result.json` and its log in `work/runner.log`. Panics when it fails.
pub fn run_job(binary: &str, work: &std::path::Path, args: &[String]) -> JobRun {
    let result_file = work.join("result.json");
    let log = work.join("runner.log");
    let measured = run_measured(
        Command::new(binary)
            .args(args)
            .arg("--result-file")
            .arg(&result_file)
            .env("NO_COLOR", "1")
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(&log).expect("a log file")),
    )
    .expect("the runner runs");
    let text = std::fs::read_to_string(&result_file).expect("a result");
    let result = groundskeeper_protocol::JobResult::parse(&text).expect("a result");
    assert_eq!(measured.exit_code, 0, "{args:?}: {:?}", result.message);
    let log = std::fs::read_to_string(&log).unwrap_or_default();
    let peak_bytes = runner_peak_bytes(&log).expect("the runner logs its peak memory when it finishes");
    JobRun { wall: measured.wall, peak_bytes, result }
}

/// The bytes in `peak_memory=… MiB (N bytes)` of `groundskeeper-job`'s last "run finished" log
/// line.
fn runner_peak_bytes(log: &str) -> Option<u64> {
    let line = log.lines().rev().find(|l| l.contains("run finished") && l.contains("peak_memory"))?;
    let before = &line[..line.find(" bytes)")?];
    before[before.rfind('(')? + 1..].parse().ok()
}

/// A benchmark's setting from the environment: `name` as a number, else `default`.
pub fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// `12.34 MiB (12939428 B)`: sizes in MiB beside bytes, as the benchmarks print them.
pub fn mib(bytes: u64) -> String {
    format!("{:.2} MiB ({bytes} B)", bytes as f64 / (1024.0 * 1024.0))
}

/// The median of `values` (the upper one of an even count).
pub fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted[sorted.len() / 2]
}
