//! What every subcommand shares: timing, writing the result, and the exit code.

use std::path::Path;
use std::time::{Duration, Instant};

use groundskeeper_protocol::result::{ErrorKind, ResultError};
use groundskeeper_protocol::{JobResult, Outcome, Report, exit};

/// Default `--result-file`: the kubelet copies it into the pod's termination message.
pub const DEFAULT_RESULT_FILE: &str = "/dev/termination-log";

/// A failure with its retry class, as every subcommand reports it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Failure {
    pub kind: ErrorKind,
    pub message: String,
}

impl Failure {
    pub fn bad_input(message: impl Into<String>) -> Self {
        Self {
            kind: ErrorKind::BadInput,
            message: message.into(),
        }
    }

    pub fn retryable(message: impl Into<String>) -> Self {
        Self {
            kind: ErrorKind::Retryable,
            message: message.into(),
        }
    }
}

/// Clock for one run: when it started, for the result.
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

pub struct RunClock {
    started_at: jiff::Timestamp,
    started: Instant,
}

impl RunClock {
    pub fn start() -> Self {
        Self {
            started_at: jiff::Timestamp::now(),
            started: Instant::now(),
        }
    }

    /// The result of a run that ended with `report`, either well or with `failure`.
    pub fn finish(&self, report: Report, outcome: Outcome, failure: Option<Failure>) -> JobResult {
        let mut result = JobResult::new(
            report,
            if failure.is_some() {
                Outcome::Failed
            } else {
                outcome
            },
            self.started_at.to_string(),
            self.started.elapsed().as_millis() as u64,
        );
        if let Some(failure) = failure {
            result.message = Some(failure.message.clone());
            result.error = Some(ResultError {
                kind: failure.kind,
                message: failure.message,
            });
        }
        result
    }
}

/// The process exit code for a result: see [`groundskeeper_protocol::exit`].
pub fn exit_code(result: &JobResult) -> i32 {
    match (&result.outcome, &result.error) {
        (Outcome::Succeeded | Outcome::Skipped, _) => exit::SUCCESS,
        (
            Outcome::Failed,
            Some(ResultError {
                kind: ErrorKind::BadInput,
                ..
            }),
        ) => exit::BAD_INPUT,
        (Outcome::Failed, _) => exit::RETRYABLE,
    }
}

/// Writes the result to `path` (shrunk to fit a termination message) and the full result to
/// stdout, so a person running the binary by hand sees it too. A result file that cannot be
/// written is logged, not fatal: the work is done either way.
pub fn report(result: &JobResult, path: &Path) {
    if let Err(err) = std::fs::write(path, result.to_termination_message()) {
        tracing::warn!(path = %path.display(), error = %err, "could not write the result file");
    }
    println!(
        "{}",
        serde_json::to_string_pretty(result).expect("results always serialise")
    );
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
            assert_eq!(
                exit_code(&finished(outcome, failure.clone())),
                code,
                "{outcome:?} {failure:?}"
            );
        }
    }

    #[test]
    fn a_failure_fails_the_run_and_is_explained() {
        let result = finished(Outcome::Succeeded, Some(Failure::bad_input("token file missing")));
        assert_eq!(result.outcome, Outcome::Failed);
        assert_eq!(result.message.as_deref(), Some("token file missing"));
        assert_eq!(result.error.unwrap().kind, ErrorKind::BadInput);
    }
}
