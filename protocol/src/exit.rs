//! Exit codes of `groundskeeper-job`, and how long it has to end when asked to stop.
//!
//! A Job's `podFailurePolicy` fails the Job at once on [`BAD_INPUT`]: retrying cannot fix a wrong
//! token or an unknown keyspace, and a retry storm against a data store helps nobody.
//! Everything else (including panics, exit 101) counts against `backoffLimit`.

/// The work was done, or there was nothing to do.
pub const SUCCESS: i32 = 0;
/// The work failed in a way that may pass on retry: 5xx, topology changing, timeouts, a member
/// that is down. Also a run stopped by SIGTERM or SIGINT: its work was not finished, and a
/// later run can finish it.
pub const RETRYABLE: i32 = 1;
/// Bad input or credentials: malformed arguments or token file, 401/403, unknown keyspace, a
/// future revision. Also clap's own exit code for usage errors, on purpose.
pub const BAD_INPUT: i32 = 2;

/// `terminationGracePeriodSeconds` of every Job's pod, and the runner's default
/// `--grace-period-seconds`: between SIGTERM and SIGKILL the runner stops the remote work it can
/// stop and writes its result. 60 s rather than Kubernetes' 30 s: an etcd defrag already
/// running is let finish (a db of a few GiB takes tens of seconds), and stopping a Scylla
/// cleanup is two calls that may each take seconds on a busy node.
pub const TERMINATION_GRACE_PERIOD_SECONDS: u64 = 60;
