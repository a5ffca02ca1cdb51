//! The one way tests wait for something to happen: poll a condition until it holds, bounded.
//!
//! The bound guards against a system that never gets there (the test fails naming what it waited
//! for, and what `diagnose` says of the system then); it is not a performance bound: speed is the
//! benchmarks' business.

use std::time::Duration;

/// How long a test waits before giving up, where it has no bound of its own.
pub const GUARD: Duration = Duration::from_secs(120);

/// How often a condition is looked at again, where the caller does not say.
pub const EVERY: Duration = Duration::from_millis(20);

/// Polls `done` every `every` until it holds; after `guard` fails the test naming `what`, with
/// what `diagnose` says of the system then.
pub async fn wait_until(
    what: &str,
    guard: Duration,
    every: Duration,
    mut done: impl FnMut() -> bool,
    diagnose: impl FnOnce() -> String,
) {
    let deadline = tokio::time::Instant::now() + guard;
    while !done() {
        if tokio::time::Instant::now() > deadline {
            panic!("never reached within {guard:?}: {what}\n{}", diagnose());
        }
        tokio::time::sleep(every).await;
    }
}

/// What `future` gives (the next event of a stream, a task's end), awaited for [`GUARD`] at
/// most; after that the test fails naming `what`.
pub async fn within<T>(what: &str, future: impl std::future::Future<Output = T>) -> T {
    match tokio::time::timeout(GUARD, future).await {
        Ok(value) => value,
        Err(_) => panic!("never came within {GUARD:?}: {what}"),
    }
}

/// [`wait_until`] with the usual bound and pace, and nothing more to say on failure.
pub async fn eventually(what: &str, done: impl FnMut() -> bool) {
    wait_until(what, GUARD, EVERY, done, String::new).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_condition_that_never_holds_fails_naming_it_after_the_guard() {
        let waited = tokio::spawn(wait_until("the moon", GUARD, EVERY, || false, || "still none".into()));
        let failure = waited.await.expect_err("it gives up");
        let text = failure.into_panic();
        let text = text.downcast_ref::<String>().expect("a message");
        assert!(text.contains("never reached within 120s: the moon\nstill none"), "{text}");
    }

    #[tokio::test(start_paused = true)]
    async fn what_never_comes_fails_naming_it_after_the_guard() {
        let waited = tokio::spawn(within("the next event", std::future::pending::<()>()));
        let text = waited.await.expect_err("it gives up").into_panic();
        let text = text.downcast_ref::<String>().expect("a message");
        assert!(text.contains("never came within 120s: the next event"), "{text}");
        assert_eq!(within("a ready value", async { 7 }).await, 7);
    }

    #[tokio::test(start_paused = true)]
    async fn a_condition_that_holds_ends_the_wait() {
        let mut polls = 0;
        eventually("three polls", || {
            polls += 1;
            polls == 3
        })
        .await;
        assert_eq!(polls, 3);
    }
}
