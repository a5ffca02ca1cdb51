//! What every subcommand shares: timing, writing the result, and the exit code.

use std::path::Path;
use std::time::{Duration, Instant};

use groundskeeper_protocol::result::{ErrorKind, ResultError};
use groundskeeper_protocol::{JobResult, Outcome, Report, exit};
pub use groundskeeper_stores::Failure;

/// Default `--result-file`: the kubelet copies it into the pod's termination message.
pub const DEFAULT_RESULT_FILE: &str = "/dev/termination-log";

/// Longest wait any flag may set: beyond it a deadline would overflow the clock, and no real
/// cleanup or defrag call needs more.
pub const MAX_WAIT: Duration = Duration::from_secs(7 * 24 * 3600);

/// A wait given on the command line, checked: neither zero nor longer than [`MAX_WAIT`].
pub fn check_wait(flag: &str, wait: Duration) -> Result<Duration, Failure> {
    if wait.is_zero() || wait > MAX_WAIT {
        return Err(Failure::bad_input(format!(
            "{flag} {wait:?}: must be more than zero and at most {} days",
            MAX_WAIT.as_secs() / 86_400
        )));
    }
    Ok(wait)
}

/// Clock for one run: when it started, for the result.
pub struct RunClock {
    started_at: jiff::Timestamp,
    started: Instant,
}

impl RunClock {
    pub fn start() -> Self {
        Self { started_at: jiff::Timestamp::now(), started: Instant::now() }
    }

    /// The result of a run that ended with `report`, either well or with `failure`.
    pub fn finish(&self, report: Report, outcome: Outcome, failure: Option<Failure>) -> JobResult {
        let mut result = JobResult::new(
            report,
            if failure.is_some() { Outcome::Failed } else { outcome },
            self.started_at.to_string(),
            self.started.elapsed().as_millis() as u64,
        );
        if let Some(failure) = failure {
            result.message = Some(failure.message.clone());
            result.error =
                Some(ResultError { kind: failure.kind, message: failure.message, reason: failure.reason });
        }
        result
    }
}

/// A stop asked for by a signal: which one, and by when the run must have written its result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stop {
    pub signal: &'static str,
    /// Remote work still in flight at this instant is given up on (reported as unknown) so the
    /// result is written before the grace period ends and SIGKILL comes.
    pub deadline: Instant,
}

impl Stop {
    /// The failure a stopped run reports: retryable, since the work was not finished.
    pub fn failure(&self, what: &str) -> Failure {
        Failure::retryable(format!(
            "stopped by signal ({}): {what}; a later run can finish the work",
            self.signal
        ))
    }
}

/// Time kept back from the grace period to write the result and exit: 5 s, or a quarter of a
/// grace period shorter than 20 s.
pub fn result_margin(grace: Duration) -> Duration {
    (grace / 4).min(Duration::from_secs(5))
}

/// When in-flight work is given up on, for a signal received at `received`.
pub fn stop_deadline(received: Instant, grace: Duration) -> Instant {
    received + grace.saturating_sub(result_margin(grace))
}

/// Asks a [`StopSignal::manual`] to stop.
pub struct StopHandle {
    sender: tokio::sync::watch::Sender<Option<Stop>>,
    grace: Duration,
}

impl StopHandle {
    /// Stops as `signal` (e.g. `"SIGTERM"`) would, its deadline the grace period from now.
    pub fn stop(&self, signal: &'static str) {
        let deadline = stop_deadline(Instant::now(), self.grace);
        self.sender.send_replace(Some(Stop { signal, deadline }));
    }
}

/// SIGTERM (Kubernetes deleting the pod, a Job deadline, a node drain) and SIGINT (Ctrl-C) as a
/// value the work can look at between steps and wait on while a call is in flight. Without it
/// the process would die at once with status 143, without a result, its remote work running on.
#[derive(Clone)]
pub struct StopSignal {
    receiver: tokio::sync::watch::Receiver<Option<Stop>>,
}

impl StopSignal {
    /// Listens for SIGTERM and SIGINT from now on. Must be called inside a tokio runtime.
    pub fn listen(grace: Duration) -> std::io::Result<Self> {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate())?;
        let mut interrupt = signal(SignalKind::interrupt())?;
        let (sender, receiver) = tokio::sync::watch::channel(None);
        tokio::spawn(async move {
            let signal = tokio::select! {
                _ = term.recv() => "SIGTERM",
                _ = interrupt.recv() => "SIGINT",
            };
            tracing::warn!(
                signal,
                grace_period_s = grace.as_secs_f64(),
                "stop requested: stopping the remote work that can be stopped, starting nothing new"
            );
            let deadline = stop_deadline(Instant::now(), grace);
            let _ = sender.send(Some(Stop { signal, deadline }));
            // Handlers stay installed: a second signal must not kill the run before its result
            // is written.
            std::future::pending::<()>().await;
        });
        Ok(Self { receiver })
    }

    /// Listens as [`StopSignal::listen`] does; where signal handlers cannot be installed, says so
    /// and runs without (the process then dies on a signal as it would by default).
    pub fn listen_or_warn(grace: Duration) -> Self {
        Self::listen(grace).unwrap_or_else(|err| {
            tracing::warn!(error = %err, "cannot install the SIGTERM/SIGINT handlers; a signal will end the run without a result");
            Self::never()
        })
    }

    /// A stop asked for by whoever holds the handle, as a signal would ask for it (a library
    /// caller that learns of the stop otherwise: a test's stand-in kubelet deleting the pod).
    pub fn manual(grace: Duration) -> (Self, StopHandle) {
        let (sender, receiver) = tokio::sync::watch::channel(None);
        (Self { receiver }, StopHandle { sender, grace })
    }

    /// A stop that never comes (library callers that handle signals themselves).
    pub fn never() -> Self {
        let (sender, receiver) = tokio::sync::watch::channel(None);
        // Kept open for good: a closed channel would read as "no more changes" anyway, but an
        // open one keeps `requested` simply pending.
        std::mem::forget(sender);
        Self { receiver }
    }

    /// The stop, if one was asked for.
    pub fn get(&self) -> Option<Stop> {
        *self.receiver.borrow()
    }

    /// Waits until a stop is asked for (cancel-safe).
    pub async fn requested(&self) -> Stop {
        let mut receiver = self.receiver.clone();
        // The guard `wait_for` returns must not live across an await (the future stays Send).
        let stop = receiver.wait_for(Option::is_some).await.ok().and_then(|stop| *stop);
        match stop {
            Some(stop) => stop,
            None => std::future::pending().await,
        }
    }

    /// Waits until a stop was asked for and its deadline has passed (cancel-safe).
    pub async fn deadline_passed(&self) -> Stop {
        let stop = self.requested().await;
        tokio::time::sleep_until(stop.deadline.into()).await;
        stop
    }
}

/// The process exit code for a result: see [`groundskeeper_protocol::exit`].
pub fn exit_code(result: &JobResult) -> i32 {
    match (&result.outcome, &result.error) {
        (Outcome::Succeeded | Outcome::Skipped, _) => exit::SUCCESS,
        (Outcome::Failed, Some(ResultError { kind: ErrorKind::BadInput, .. })) => exit::BAD_INPUT,
        (Outcome::Failed, _) => exit::RETRYABLE,
    }
}

/// Writes the result to `path` (shrunk to fit a termination message) and the full result to
/// stdout, so a person running the binary by hand sees it too, then logs how the run ended and
/// its peak memory.
///
/// A result file that cannot be written (its folder is a file, the disk is full, the file
/// system is read-only) does not change the exit code: the exit code alone tells the controller
/// whether the work is done, to be retried, or refused, and retrying done work to report it again
/// could cost hours (a node cleanup) or a second snapshot. The failure is logged as an error, and
/// what a failed write left behind is emptied, so the controller reads "no result" (and says
/// so) rather than half a result. See `docs/results.md`.
pub fn report(result: &JobResult, path: &Path) {
    // Every message built from a failure is already shown without URLs' user-info; the summaries
    // a run builds itself go through the same cleaning here.
    let mut result = result.clone();
    result.report = without_userinfo(&result.report);
    result.message = result.message.map(groundskeeper_stores::failure::shown);
    if let Some(error) = &mut result.error {
        error.message = groundskeeper_stores::failure::shown(std::mem::take(&mut error.message));
    }
    let result = &result;
    if let Err(err) = write_result_file(path, &result.to_termination_message()) {
        tracing::error!(
            path = %path.display(),
            error = %err,
            exit_code = exit_code(result),
            "could not write the result file: the exit code still tells the outcome, the details are on stdout only"
        );
    }
    println!("{}", serde_json::to_string_pretty(result).expect("results always serialise"));
    match peak_memory_bytes() {
        Some(peak) => tracing::info!(
            outcome = ?result.outcome,
            duration_ms = result.duration_ms,
            peak_memory = %format!("{} MiB ({peak} bytes)", groundskeeper_protocol::result::mib(peak)),
            "run finished"
        ),
        None => tracing::info!(outcome = ?result.outcome, duration_ms = result.duration_ms, "run finished"),
    }
}

/// `report` with the user-info of every URL in its text fields removed (a store's path or URL as
/// given on the command line may carry a password).
fn without_userinfo(report: &Report) -> Report {
    fn clean(value: &mut serde_json::Value) {
        match value {
            serde_json::Value::String(text) => *text = groundskeeper_stores::failure::without_userinfo(text),
            serde_json::Value::Array(items) => items.iter_mut().for_each(clean),
            serde_json::Value::Object(fields) => fields.values_mut().for_each(clean),
            _ => {}
        }
    }
    let Ok(mut value) = serde_json::to_value(report) else { return report.clone() };
    clean(&mut value);
    serde_json::from_value(value).unwrap_or_else(|_| report.clone())
}

/// Writes `text` to `path` whole, or leaves the file empty: a write cut short by a full disk
/// would otherwise leave the start of a JSON document.
fn write_result_file(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut file = std::fs::File::create(path)?;
    // A full disk may only show when the data is flushed; `/dev/null` and the like cannot be.
    let regular = file.metadata().is_ok_and(|m| m.is_file());
    let written =
        file.write_all(text.as_bytes()).and_then(|()| if regular { file.sync_all() } else { Ok(()) });
    if written.is_err() {
        let _ = file.set_len(0);
    }
    written
}

/// The process's peak resident memory (`VmHWM` of `/proc/self/status`), where Linux tells it.
pub fn peak_memory_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.trim_start_matches("VmHWM:").trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;
    use groundskeeper_protocol::result::CompactReport;

    fn finished(outcome: Outcome, failure: Option<Failure>) -> JobResult {
        RunClock::start().finish(Report::Compact(CompactReport::default()), outcome, failure)
    }

    #[test]
    fn exit_codes_follow_the_outcome_and_the_failure_kind() {
        for (outcome, failure, code) in [
            (Outcome::Succeeded, None, exit::SUCCESS),
            (Outcome::Skipped, None, exit::SUCCESS),
            (Outcome::Succeeded, Some(Failure::bad_input("x")), exit::BAD_INPUT),
            (Outcome::Succeeded, Some(Failure::retryable("x")), exit::RETRYABLE),
            (Outcome::Failed, None, exit::RETRYABLE),
        ] {
            assert_eq!(exit_code(&finished(outcome, failure.clone())), code, "{outcome:?} {failure:?}");
        }
    }

    #[test]
    fn in_flight_work_is_given_up_on_before_the_grace_period_ends() {
        let now = Instant::now();
        // (grace period, given up on after)
        for (grace, after) in [
            (Duration::from_secs(60), Duration::from_secs(55)),
            (Duration::from_secs(30), Duration::from_secs(25)),
            (Duration::from_secs(20), Duration::from_secs(15)),
            (Duration::from_secs(8), Duration::from_secs(6)),
            (Duration::from_secs(1), Duration::from_millis(750)),
        ] {
            assert_eq!(stop_deadline(now, grace), now + after, "{grace:?}");
        }
    }

    #[test]
    fn a_stopped_run_is_retryable_and_names_the_signal() {
        let stop = Stop { signal: "SIGTERM", deadline: Instant::now() };
        let result = finished(Outcome::Failed, Some(stop.failure("3 member(s) not reached")));
        assert_eq!(exit_code(&result), exit::RETRYABLE);
        let message = result.message.unwrap();
        assert!(message.contains("stopped by signal (SIGTERM)"), "{message}");
    }

    #[test]
    fn a_failure_fails_the_run_and_is_explained() {
        let result = finished(Outcome::Succeeded, Some(Failure::bad_input("token file missing")));
        assert_eq!(result.outcome, Outcome::Failed);
        assert_eq!(result.message.as_deref(), Some("token file missing"));
        assert_eq!(result.error.unwrap().kind, ErrorKind::BadInput);
    }
}
