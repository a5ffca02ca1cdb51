//! One defrag run at a time per etcd cluster: an advisory lock kept in the cluster itself. Two
//! runs started together (a Job retried while its first pod still runs, a task and a hand-run)
//! would otherwise each defragment every member, one after the other.
//!
//! The lock is a lease with a fixed id ([`LOCK_LEASE_ID`]): etcd grants a lease id once, so the
//! first run's grant succeeds and the second's is refused ("lease already exists"). A lease
//! writes no key and moves no revision, so the lock leaves the keyspace and its history exactly
//! as they were (a key would add revisions that a revision-based compaction policy then counts).
//!
//! The second run does not wait: it ends retryable (exit 1), saying how long the holder's lease
//! has left, and its Job's retry comes back later. A holder that dies without releasing the lock
//! (SIGKILL, a lost node) holds it until its lease expires, [`LEASE_TTL_SECONDS`] after its last
//! renewal. A cluster whose space is exhausted (`NOSPACE` alarm) grants no lease: the run goes on
//! without the lock there ([`Acquired::NoSpace`]), since freeing that space is what it is for,
//! and a second run could not take the lock either.

use std::time::Duration;

use etcd_client::{Client, LeaseGrantOptions};

use crate::run::Failure;

/// The lock's lease id: "gndkdfrg" in ASCII, a positive 63-bit number no other tool picks.
pub const LOCK_LEASE_ID: i64 = 0x676e_646b_6466_7267;
/// A lock whose holder stopped renewing it ends this long after its last renewal.
pub const LEASE_TTL_SECONDS: i64 = 60;
/// How often the holder renews it: a renewal may go to a member that a defrag blocks for a
/// while, so several renewals fit in one lease.
const RENEW_EVERY: Duration = Duration::from_secs(10);

/// What taking the lock gave.
pub enum Acquired {
    Held(Box<DefragLock>),
    /// The cluster's space is exhausted: it grants no lease, the lock's included.
    NoSpace(String),
}

/// A held lock. Release it with [`DefragLock::release`]; dropped unreleased, it stops being
/// renewed and ends with its lease.
pub struct DefragLock {
    client: Client,
    renewing: tokio::task::JoinHandle<()>,
}

impl Drop for DefragLock {
    fn drop(&mut self) {
        self.renewing.abort();
    }
}

impl DefragLock {
    /// Takes the lock, or says for how long another run holds it.
    pub async fn acquire(mut client: Client) -> Result<Acquired, Failure> {
        let grant = LeaseGrantOptions::new().with_id(LOCK_LEASE_ID);
        match client.lease_grant(LEASE_TTL_SECONDS, Some(grant)).await {
            Ok(_) => {}
            Err(e) if e.to_string().contains("database space exceeded") => {
                return Ok(Acquired::NoSpace(e.to_string()));
            }
            Err(e) if e.to_string().contains("lease already exists") => {
                let left = client.lease_time_to_live(LOCK_LEASE_ID, None).await.map(|t| t.ttl()).ok();
                return Err(Failure::retryable(refusal(left)));
            }
            Err(e) => {
                return Err(Failure::retryable(format!(
                    "cannot take the defrag lock (lease {LOCK_LEASE_ID:x}): {e}"
                )));
            }
        }
        let renewing = tokio::spawn(renew(client.clone()));
        Ok(Acquired::Held(Box::new(Self { client, renewing })))
    }

    /// Gives the lock back at once.
    pub async fn release(mut self) {
        self.renewing.abort();
        if let Err(e) = self.client.lease_revoke(LOCK_LEASE_ID).await {
            tracing::warn!(error = %e, "could not release the defrag lock; it ends with its lease");
        }
    }
}

/// Why a run does not start: another holds the lock, for `left` more seconds unless renewed.
pub fn refusal(left: Option<i64>) -> String {
    let left = match left {
        Some(seconds) if seconds >= 0 => format!(", its lease has {seconds}s left unless renewed"),
        _ => String::new(),
    };
    format!(
        "another defrag run holds this cluster's lock (lease {LOCK_LEASE_ID:x}{left}); nothing was \
         done, retry once it has finished (a holder that died lets go {LEASE_TTL_SECONDS}s after it \
         last renewed the lock)"
    )
}

async fn renew(mut client: Client) {
    let Ok((mut keeper, mut answers)) = client.lease_keep_alive(LOCK_LEASE_ID).await else {
        tracing::warn!("could not renew the defrag lock; it ends with its lease");
        return;
    };
    loop {
        tokio::time::sleep(RENEW_EVERY).await;
        if keeper.keep_alive().await.is_err() || answers.message().await.is_err() {
            tracing::warn!(
                "renewing the defrag lock failed; it ends with its lease unless a renewal gets through"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_refusal_says_what_to_do() {
        let message = refusal(Some(42));
        assert!(message.contains("lease 676e646b64667267, its lease has 42s left"), "{message}");
        assert!(message.contains("nothing was done, retry once it has finished"), "{message}");
        assert!(!refusal(None).contains("left unless"), "no figure when the lease could not be read");
    }
}
