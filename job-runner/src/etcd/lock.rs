//! One defrag run at a time per etcd cluster: an advisory lock kept in the cluster itself, a key
//! written only if it does not exist, attached to a lease the run keeps alive. Two runs started
//! together (a Job retried while its first pod still runs, a task and a hand-run) would otherwise
//! each defragment every member, one after the other.
//!
//! The second run does not wait: it ends retryable (exit 1) naming the holder, and its Job's
//! retry comes back later. A holder that dies without releasing the lock (SIGKILL, a lost node)
//! holds it until its lease expires, [`LEASE_TTL_SECONDS`] later.
//!
//! A cluster whose space is exhausted (`NOSPACE` alarm) takes no write, not even the lock's: the
//! run goes on without it there ([`Acquired::NoSpace`]), since freeing that space is what it is
//! for, and a second run could not take the lock either.

use std::time::Duration;

use etcd_client::{Client, Compare, CompareOp, PutOptions, Txn, TxnOp, TxnOpResponse};

use crate::run::Failure;

/// The lock's key. Outside `/registry`, where kube-apiserver keeps its objects.
pub const LOCK_KEY: &str = "/groundskeeper/defrag-lock";
/// A lock whose holder stopped renewing it ends this long after its last renewal.
pub const LEASE_TTL_SECONDS: i64 = 60;
/// How often the holder renews it: a renewal may go to a member that a defrag blocks for a
/// while, so several renewals fit in one lease.
const RENEW_EVERY: Duration = Duration::from_secs(10);

/// What taking the lock gave.
pub enum Acquired {
    Held(Box<DefragLock>),
    /// The cluster's space is exhausted: no key can be written, the lock included.
    NoSpace(String),
}

/// etcd's answer to a write while its `NOSPACE` alarm is raised.
fn is_no_space(error: &etcd_client::Error) -> bool {
    error.to_string().contains("database space exceeded")
}

/// A held lock. Release it with [`DefragLock::release`]; dropped unreleased, it stops being
/// renewed and ends with its lease.
pub struct DefragLock {
    client: Client,
    lease: i64,
    renewing: tokio::task::JoinHandle<()>,
}

impl Drop for DefragLock {
    fn drop(&mut self) {
        self.renewing.abort();
    }
}

impl DefragLock {
    /// Takes the lock for `holder` (who and since when, for the one refused), or says who has it.
    pub async fn acquire(mut client: Client, holder: &str) -> Result<Acquired, Failure> {
        let cannot = |e: &etcd_client::Error| {
            Failure::retryable(format!("cannot take the defrag lock ({LOCK_KEY}): {e}"))
        };
        let lease = match client.lease_grant(LEASE_TTL_SECONDS, None).await {
            Ok(lease) => lease.id(),
            Err(e) if is_no_space(&e) => return Ok(Acquired::NoSpace(e.to_string())),
            Err(e) => return Err(cannot(&e)),
        };
        let take = Txn::new()
            .when([Compare::create_revision(LOCK_KEY, CompareOp::Equal, 0)])
            .and_then([TxnOp::put(
                LOCK_KEY,
                holder,
                Some(PutOptions::new().with_lease(lease)),
            )])
            .or_else([TxnOp::get(LOCK_KEY, None)]);
        let answer = match client.txn(take).await {
            Ok(answer) => answer,
            Err(e) => {
                let _ = client.lease_revoke(lease).await;
                if is_no_space(&e) {
                    return Ok(Acquired::NoSpace(e.to_string()));
                }
                return Err(cannot(&e));
            }
        };
        if !answer.succeeded() {
            let _ = client.lease_revoke(lease).await;
            return Err(Failure::retryable(refusal(&holder_of(answer.op_responses()))));
        }
        let renewing = tokio::spawn(renew(client.clone(), lease));
        Ok(Acquired::Held(Box::new(Self {
            client,
            lease,
            renewing,
        })))
    }

    /// Gives the lock back at once (its lease revoked, the key with it).
    pub async fn release(mut self) {
        self.renewing.abort();
        if let Err(e) = self.client.lease_revoke(self.lease).await {
            tracing::warn!(error = %e, "could not release the defrag lock; it ends with its lease");
        }
    }
}

/// The holder the refused transaction read back.
fn holder_of(responses: Vec<TxnOpResponse>) -> String {
    responses
        .into_iter()
        .find_map(|response| match response {
            TxnOpResponse::Get(get) => get
                .kvs()
                .first()
                .map(|kv| String::from_utf8_lossy(kv.value()).into_owned()),
            _ => None,
        })
        .unwrap_or_else(|| "a holder that left no name".to_owned())
}

/// Why a run does not start: another holds the lock.
pub fn refusal(holder: &str) -> String {
    format!(
        "another defrag run holds this cluster's lock ({LOCK_KEY}: {holder}); nothing was done, \
         retry once it has finished (a holder that died lets go {LEASE_TTL_SECONDS}s after it \
         last renewed the lock)"
    )
}

/// Who takes the lock: the pod (or host), the process and the time, for the one refused.
pub fn holder_name(now: &str) -> String {
    let host = std::env::var("POD_NAME")
        .or_else(|_| std::env::var("HOSTNAME"))
        .unwrap_or_else(|_| "unknown host".to_owned());
    format!(
        "groundskeeper-job on {host}, pid {}, since {now}",
        std::process::id()
    )
}

async fn renew(mut client: Client, lease: i64) {
    let Ok((mut keeper, mut answers)) = client.lease_keep_alive(lease).await else {
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
    fn the_refusal_names_the_holder_and_what_to_do() {
        let message =
            refusal("groundskeeper-job on main-defragment-1-0-abcde, pid 1, since 2026-11-23T12:00:00Z");
        assert!(
            message.contains("/groundskeeper/defrag-lock: groundskeeper-job on main-defragment-1-0-abcde")
        );
        assert!(message.contains("nothing was done, retry once it has finished"));
    }
}
