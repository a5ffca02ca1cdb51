//! Exit codes of `groundskeeper-job`.
//!
//! A Job's `podFailurePolicy` fails the Job at once on [`BAD_INPUT`]: retrying cannot fix a wrong
//! token or an unknown keyspace, and a retry storm against a data store helps nobody.
//! Everything else (including panics, exit 101) counts against `backoffLimit`.

/// The work was done, or there was nothing to do.
pub const SUCCESS: i32 = 0;
/// The work failed in a way that may pass on retry: 5xx, topology changing, timeouts, a member
/// that is down.
pub const RETRYABLE: i32 = 1;
/// Bad input or credentials: malformed arguments or token file, 401/403, unknown keyspace, a
/// future revision. Also clap's own exit code for usage errors, on purpose.
pub const BAD_INPUT: i32 = 2;
