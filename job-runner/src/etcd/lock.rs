//! One defrag or compaction run at a time per etcd cluster: an advisory lock kept in the cluster
//! itself. Two runs started together (a Job retried while its first pod still runs, a task and a
//! hand-run) would otherwise each defragment every member, one after the other, or compact while
//! a member is being defragmented (etcd 3.8 refuses a defrag during a compaction; earlier
//! versions let the two contend for the member's backend).
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
use futures::future::select_ok;

use crate::run::Failure;

/// The lock's lease id: "gndkdfrg" in ASCII, a positive 63-bit number no other tool picks.
pub const LOCK_LEASE_ID: i64 = 0x676e_646b_6466_7267;
/// A lock whose holder stopped renewing it ends this long after its last renewal.
pub const LEASE_TTL_SECONDS: i64 = 60;
/// How often the holder renews it: a renewal may go to a member that a defrag blocks for a
/// while, so several renewals fit in one lease.
const RENEW_EVERY: Duration = Duration::from_secs(10);
/// How long one member may take to answer a renewal or a release before the next is asked: a
/// member that died or froze must not hold the lock (or the end of the run) up.
const MEMBER_ANSWER_TIMEOUT: Duration = Duration::from_secs(2);

/// How long a release keeps asking while no member takes it: an election after the leader died
/// takes a second or two, and the lease would otherwise outlive the run by a minute.
const RELEASE_WITHIN: Duration = Duration::from_secs(10);
const RELEASE_RETRY_EVERY: Duration = Duration::from_millis(250);

/// What taking the lock gave.
pub enum Acquired {
    Held(Box<DefragLock>),
    /// The cluster's space is exhausted: it grants no lease, the lock's included.
    NoSpace(String),
}

/// A held lock. Release it with [`DefragLock::release`]; dropped unreleased, it stops being
/// renewed and ends with its lease.
///
/// It keeps a client for every member: the lease lives in the cluster, not in a member, so it is
/// renewed and released through whichever member answers. Through one member only, a member that
/// died during the run would keep the lock held for its whole lease after the run.
pub struct DefragLock {
    clients: Vec<Client>,
    renewing: tokio::task::JoinHandle<()>,
}

impl Drop for DefragLock {
    fn drop(&mut self) {
        self.renewing.abort();
    }
}

impl DefragLock {
    /// Takes the lock through the first of `clients` (one per member, in the order to try them),
    /// or says for how long another run holds it.
    pub async fn acquire(clients: Vec<Client>) -> Result<Acquired, Failure> {
        let Some(mut client) = clients.first().cloned() else {
            return Err(Failure::retryable("no etcd member answered to take the defrag lock"));
        };
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
                    "cannot take the cluster's maintenance lock (lease {LOCK_LEASE_ID:x}): {e}"
                )));
            }
        }
        let renewing = tokio::spawn(renew(clients.clone()));
        Ok(Acquired::Held(Box::new(Self { clients, renewing })))
    }

    /// Gives the lock back at once, through every member in parallel: the first that answers
    /// ends it (a lease already gone counts as released). When none does (the member that died
    /// was the leader, and the others have not elected a new one yet) it asks again, for up to
    /// [`RELEASE_WITHIN`]: after that the lock ends with its lease.
    pub async fn release(self) {
        self.renewing.abort();
        let deadline = tokio::time::Instant::now() + RELEASE_WITHIN;
        loop {
            let revokes = self.clients.iter().cloned().map(|client| Box::pin(revoke(client)));
            let error = match select_ok(revokes).await {
                Ok(((), _)) => {
                    tracing::info!("defrag lock released");
                    return;
                }
                Err(error) => error,
            };
            if tokio::time::Instant::now() + RELEASE_RETRY_EVERY >= deadline {
                tracing::warn!(%error, "no member took the release of the defrag lock; it ends with its lease");
                return;
            }
            tokio::time::sleep(RELEASE_RETRY_EVERY).await;
        }
    }
}

async fn revoke(mut client: Client) -> Result<(), String> {
    match tokio::time::timeout(MEMBER_ANSWER_TIMEOUT, client.lease_revoke(LOCK_LEASE_ID)).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) if e.to_string().contains("requested lease not found") => Ok(()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("no answer within {MEMBER_ANSWER_TIMEOUT:?}")),
    }
}

/// Why a run does not start: another holds the lock, for `left` more seconds unless renewed.
pub fn refusal(left: Option<i64>) -> String {
    let left = match left {
        Some(seconds) if seconds >= 0 => format!(", its lease has {seconds}s left unless renewed"),
        _ => String::new(),
    };
    format!(
        "another defrag or compaction run holds this cluster's lock (lease {LOCK_LEASE_ID:x}{left}); \
         nothing was done, retry once it has finished (a holder that died lets go {LEASE_TTL_SECONDS}s \
         after it last renewed the lock)"
    )
}

/// Renews the lease every [`RENEW_EVERY`] through the member that answered last, moving on to the
/// next member when one does not answer in time.
async fn renew(clients: Vec<Client>) {
    let mut next = 0;
    loop {
        tokio::time::sleep(RENEW_EVERY).await;
        let mut renewed = false;
        for attempt in 0..clients.len() {
            let index = (next + attempt) % clients.len();
            if renew_through(clients[index].clone()).await {
                next = index;
                renewed = true;
                break;
            }
        }
        if !renewed {
            tracing::warn!(
                "no member took the renewal of the defrag lock; it ends with its lease unless a renewal gets through"
            );
        }
    }
}

/// One renewal through one member: true once it answered with the lease still alive (opening
/// the keep-alive stream sends the first renewal and reads its answer).
async fn renew_through(mut client: Client) -> bool {
    matches!(
        tokio::time::timeout(MEMBER_ANSWER_TIMEOUT, client.lease_keep_alive(LOCK_LEASE_ID)).await,
        Ok(Ok(_))
    )
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
