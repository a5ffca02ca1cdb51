//! Leader election on a `coordination.k8s.io/v1` Lease, so that two replicas never both act.
//!
//! The same protocol as client-go's leader election: a candidate takes the Lease over only when
//! its holder has not renewed it for `leaseDurationSeconds`, measured on the candidate's own
//! clock from the moment it first saw the current record (never by comparing the holder's
//! `renewTime` with the local clock, so clock skew between nodes cannot make two leaders).
//! Every write is a create or a replace carrying the `resourceVersion` it read, so two candidates
//! racing for the same Lease cannot both win. A leader that cannot renew within `renew_deadline`
//! (shorter than the lease duration) stops acting before anybody else may start.

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};
use tokio::time::Instant;

#[derive(Debug, Clone)]
pub struct LeaderElectionConfig {
    pub namespace: String,
    pub lease_name: String,
    /// Unique per replica: the pod name.
    pub identity: String,
    pub lease_duration: Duration,
    /// A leader that has not renewed for this long stops acting. Less than `lease_duration`.
    pub renew_deadline: Duration,
    pub retry_period: Duration,
}

impl LeaderElectionConfig {
    pub fn new(namespace: String, lease_name: String, identity: String) -> Self {
        Self {
            namespace,
            lease_name,
            identity,
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    #[error("lost the leader lease {namespace}/{name}: {why}")]
    Lost { namespace: String, name: String, why: String },
}

/// The Lease record as last seen, and when this replica first saw it (by its own clock).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Observation {
    holder: Option<String>,
    renew_time: Option<jiff::Timestamp>,
    seen_since: Instant,
}

impl Observation {
    fn of(lease: &Lease, previous: Option<&Observation>, now: Instant) -> Observation {
        let spec = lease.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.filter(|h| !h.is_empty());
        let renew_time = spec.renew_time.map(|t| t.0);
        match previous {
            Some(p) if p.holder == holder && p.renew_time == renew_time => p.clone(),
            _ => Observation { holder, renew_time, seen_since: now },
        }
    }
}

/// What a candidate does next with the Lease it just read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// No Lease yet: create it, held by us.
    Create,
    /// Free, expired or ours: write ourselves in as holder.
    Take,
    /// Someone else holds it and renews it: try again later.
    Wait { holder: String },
}

/// The pure core of the election: `lease` as just read, `observed` as seen since `seen_since`.
pub(crate) fn next_step(
    lease: Option<&Lease>,
    observed: Option<&Observation>,
    identity: &str,
    default_duration: Duration,
    now: Instant,
) -> Step {
    let Some(lease) = lease else { return Step::Create };
    let Some(observed) = observed else {
        return Step::Take;
    };
    let Some(holder) = observed.holder.clone() else {
        return Step::Take;
    };
    if holder == identity {
        return Step::Take;
    }
    let duration = lease
        .spec
        .as_ref()
        .and_then(|s| s.lease_duration_seconds)
        .filter(|d| *d > 0)
        .map(|d| Duration::from_secs(d as u64))
        .unwrap_or(default_duration);
    if now.duration_since(observed.seen_since) >= duration { Step::Take } else { Step::Wait { holder } }
}

/// The Lease written when `identity` takes or renews it.
fn held_by(current: Option<&Lease>, config: &LeaderElectionConfig) -> Lease {
    let now = MicroTime(jiff::Timestamp::now());
    let spec = current.and_then(|l| l.spec.clone()).unwrap_or_default();
    let already_ours = spec.holder_identity.as_deref() == Some(config.identity.as_str());
    let transitions = spec.lease_transitions.unwrap_or(0);
    Lease {
        metadata: ObjectMeta {
            name: Some(config.lease_name.clone()),
            namespace: Some(config.namespace.clone()),
            resource_version: current.and_then(|l| l.metadata.resource_version.clone()),
            ..current.map(|l| l.metadata.clone()).unwrap_or_default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(config.identity.clone()),
            lease_duration_seconds: Some(config.lease_duration.as_secs() as i32),
            acquire_time: if already_ours { spec.acquire_time } else { Some(now.clone()) },
            renew_time: Some(now),
            lease_transitions: Some(if already_ours || current.is_none() {
                transitions
            } else {
                transitions + 1
            }),
            ..spec
        }),
    }
}

/// Tries once to become (or stay) the holder. `Ok(true)` when we hold the Lease now.
async fn try_take(
    api: &Api<Lease>,
    config: &LeaderElectionConfig,
    observed: &mut Option<Observation>,
) -> kube::Result<bool> {
    let lease = api.get_opt(&config.lease_name).await?;
    let now = Instant::now();
    *observed = lease.as_ref().map(|l| Observation::of(l, observed.as_ref(), now));
    let step = next_step(lease.as_ref(), observed.as_ref(), &config.identity, config.lease_duration, now);
    let written = match step {
        Step::Wait { holder } => {
            tracing::debug!(%holder, "leader lease held by another replica");
            return Ok(false);
        }
        Step::Create => api.create(&PostParams::default(), &held_by(None, config)).await,
        Step::Take => {
            api.replace(&config.lease_name, &PostParams::default(), &held_by(lease.as_ref(), config)).await
        }
    };
    match written {
        Ok(_) => Ok(true),
        // Another candidate wrote first: it wins this round.
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
        Err(err) => Err(err),
    }
}

/// Waits until this replica holds the Lease, then runs `work` while renewing it. Returns when
/// `work` ends (and then gives the Lease up), or with an error as soon as leadership is lost:
/// the caller must stop acting at once (exiting the process is the simple, safe way).
pub async fn run_as_leader<F: Future<Output = ()>>(
    client: Client,
    config: LeaderElectionConfig,
    work: F,
) -> Result<(), LeaderError> {
    let api: Api<Lease> = Api::namespaced(client, &config.namespace);
    let mut observed = None;
    loop {
        match try_take(&api, &config, &mut observed).await {
            Ok(true) => break,
            Ok(false) => {}
            Err(err) => tracing::warn!(error = %err, "could not read or write the leader lease"),
        }
        tokio::time::sleep(config.retry_period).await;
    }
    tracing::info!(identity = %config.identity, lease = %config.lease_name, "became leader");
    let result = tokio::select! {
        _ = work => Ok(()),
        lost = keep_renewing(&api, &config) => Err(lost),
    };
    if result.is_ok() {
        release(&api, &config).await;
    }
    result
}

async fn keep_renewing(api: &Api<Lease>, config: &LeaderElectionConfig) -> LeaderError {
    let renew_every = config.retry_period.min(config.renew_deadline / 2);
    let mut last_renewed = Instant::now();
    let lost = |why: String| LeaderError::Lost {
        namespace: config.namespace.clone(),
        name: config.lease_name.clone(),
        why,
    };
    loop {
        tokio::time::sleep(renew_every).await;
        match renew(api, config).await {
            Ok(()) => last_renewed = Instant::now(),
            Err(RenewError::Taken(holder)) => return lost(format!("now held by {holder}")),
            Err(RenewError::Failed(why)) => {
                tracing::warn!(%why, "could not renew the leader lease");
                if last_renewed.elapsed() >= config.renew_deadline {
                    return lost(format!("not renewed for {:?}: {why}", config.renew_deadline));
                }
            }
        }
    }
}

enum RenewError {
    Taken(String),
    Failed(String),
}

async fn renew(api: &Api<Lease>, config: &LeaderElectionConfig) -> Result<(), RenewError> {
    let lease = api.get(&config.lease_name).await.map_err(|e| RenewError::Failed(e.to_string()))?;
    let holder = lease.spec.as_ref().and_then(|s| s.holder_identity.clone()).unwrap_or_default();
    if holder != config.identity {
        return Err(RenewError::Taken(holder));
    }
    api.replace(&config.lease_name, &PostParams::default(), &held_by(Some(&lease), config))
        .await
        .map(|_| ())
        .map_err(|e| RenewError::Failed(e.to_string()))
}

/// Gives the Lease up on a clean shutdown, so the next replica need not wait for it to expire.
async fn release(api: &Api<Lease>, config: &LeaderElectionConfig) {
    let Ok(mut lease) = api.get(&config.lease_name).await else {
        return;
    };
    let spec = lease.spec.get_or_insert_default();
    if spec.holder_identity.as_deref() != Some(config.identity.as_str()) {
        return;
    }
    spec.holder_identity = None;
    spec.lease_duration_seconds = Some(1);
    if let Err(err) = api.replace(&config.lease_name, &PostParams::default(), &lease).await {
        tracing::warn!(error = %err, "could not release the leader lease");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(holder: Option<&str>, renewed_at_secs: i64, duration: Option<i32>) -> Lease {
        Lease {
            metadata: ObjectMeta {
                name: Some("l".into()),
                resource_version: Some("7".into()),
                ..Default::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: holder.map(str::to_owned),
                renew_time: Some(MicroTime(jiff::Timestamp::from_second(renewed_at_secs).unwrap())),
                lease_duration_seconds: duration,
                ..Default::default()
            }),
        }
    }

    const DURATION: Duration = Duration::from_secs(15);

    #[tokio::test(start_paused = true)]
    async fn next_step_table() {
        let t0 = Instant::now();
        let later = |secs| t0 + Duration::from_secs(secs);
        struct Case {
            name: &'static str,
            lease: Option<Lease>,
            seen_since: Option<Instant>,
            now: Instant,
            want: Step,
        }
        let other = || lease(Some("other"), 100, Some(15));
        let cases = [
            Case { name: "no lease", lease: None, seen_since: None, now: t0, want: Step::Create },
            Case {
                name: "held by us",
                lease: Some(lease(Some("me"), 100, Some(15))),
                seen_since: Some(t0),
                now: t0,
                want: Step::Take,
            },
            Case {
                name: "released (empty holder)",
                lease: Some(lease(Some(""), 100, Some(1))),
                seen_since: Some(t0),
                now: t0,
                want: Step::Take,
            },
            Case {
                name: "no holder",
                lease: Some(lease(None, 100, None)),
                seen_since: Some(t0),
                now: t0,
                want: Step::Take,
            },
            Case {
                name: "held, just seen",
                lease: Some(other()),
                seen_since: Some(t0),
                now: t0,
                want: Step::Wait { holder: "other".into() },
            },
            Case {
                name: "held, unchanged for less than its duration",
                lease: Some(other()),
                seen_since: Some(t0),
                now: later(14),
                want: Step::Wait { holder: "other".into() },
            },
            Case {
                name: "held, unchanged for its duration",
                lease: Some(other()),
                seen_since: Some(t0),
                now: later(15),
                want: Step::Take,
            },
            Case {
                name: "the lease's own duration wins over ours",
                lease: Some(lease(Some("other"), 100, Some(60))),
                seen_since: Some(t0),
                now: later(30),
                want: Step::Wait { holder: "other".into() },
            },
            Case {
                name: "no duration on the lease: ours",
                lease: Some(lease(Some("other"), 100, None)),
                seen_since: Some(t0),
                now: later(16),
                want: Step::Take,
            },
        ];
        for case in cases {
            let observed = case.lease.as_ref().zip(case.seen_since).map(|(l, since)| {
                let mut o = Observation::of(l, None, since);
                o.seen_since = since;
                o
            });
            let step = next_step(case.lease.as_ref(), observed.as_ref(), "me", DURATION, case.now);
            assert_eq!(step, case.want, "{}", case.name);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_renewal_restarts_the_expiry_clock() {
        let t0 = Instant::now();
        let first = Observation::of(&lease(Some("other"), 100, Some(15)), None, t0);
        // Same record seen again later: still counted from t0.
        let same =
            Observation::of(&lease(Some("other"), 100, Some(15)), Some(&first), t0 + Duration::from_secs(10));
        assert_eq!(same.seen_since, t0);
        // Renewed: counted from when the new record was first seen.
        let renewed_at = t0 + Duration::from_secs(12);
        let renewed = Observation::of(&lease(Some("other"), 110, Some(15)), Some(&same), renewed_at);
        assert_eq!(renewed.seen_since, renewed_at);
        let step = next_step(
            Some(&lease(Some("other"), 110, Some(15))),
            Some(&renewed),
            "me",
            DURATION,
            t0 + Duration::from_secs(20),
        );
        assert_eq!(step, Step::Wait { holder: "other".into() });
    }

    #[test]
    fn taking_over_counts_a_transition_and_renewing_does_not() {
        let config = LeaderElectionConfig::new("ns".into(), "l".into(), "me".into());
        let mut theirs = lease(Some("other"), 100, Some(15));
        theirs.spec.as_mut().unwrap().lease_transitions = Some(3);
        let taken = held_by(Some(&theirs), &config);
        let spec = taken.spec.as_ref().unwrap();
        assert_eq!(spec.holder_identity.as_deref(), Some("me"));
        assert_eq!(spec.lease_transitions, Some(4));
        assert_eq!(
            taken.metadata.resource_version.as_deref(),
            Some("7"),
            "replace must carry the version read"
        );
        let renewed = held_by(Some(&taken), &config);
        assert_eq!(renewed.spec.as_ref().unwrap().lease_transitions, Some(4));
        assert_eq!(renewed.spec.as_ref().unwrap().acquire_time, spec.acquire_time);
        let created = held_by(None, &config);
        assert_eq!(created.spec.as_ref().unwrap().lease_transitions, Some(0));
        assert_eq!(created.metadata.resource_version, None);
    }
}
