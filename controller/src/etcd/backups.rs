//! Backups on their own (`spec.backup`), pure: the recovery point a store holds, which backup is
//! due, and how far groundskeeper's compaction may go while deltas are on.
//!
//! **The recovery point** is the newest revision a restore from the store reaches: the newest
//! full snapshot there (by the time it was written), then the deltas written after it that chain
//! from it (each starting where the one before ended), as the catalog (`status.snapshots`)
//! records them. A delta that does not chain (its
//! start is not the end of the chain) extends nothing.
//!
//! **What is due**, in order: nothing while a backup task of the policy is queued or running; a
//! full snapshot when the store holds none, when the cluster's revision is behind the recovery
//! point (it was restored, or replaced: a new timeline), when history a delta needed was
//! compacted away (a gap: only a full snapshot covers it), or when the newest is `fullEvery` old; else a delta once
//! `deltaEvery` passed since the chain's end was written and the cluster has changes the chain
//! does not hold (an idle cluster gets no Job). A run that ended without moving the chain (a
//! retryable failure) is tried again after the same interval, counted from its task's creation.
//!
//! **The compaction guard.** A delta reads history after the chain's end; a compaction past it
//! would delete changes no backup holds. So while deltas are on, groundskeeper's own compaction
//! (automatic, and the Jobs of Compact and Maintenance tasks) never goes past the recovery point:
//! [`compaction_limit`]. Compaction by others is not in its hands: the next delta finds its start
//! compacted, the gap is recorded, and a full snapshot is taken at once.

use jiff::{SignedDuration, Timestamp};

use groundskeeper_api::etcd_cluster::{BackupGap, EtcdCluster};
use groundskeeper_api::maintenance_task::{TaskState, TaskType};
use groundskeeper_api::snapshot_catalog::SnapshotRecord;

use super::model::ClusterTaskView;
use super::policy::{Backup, Policy};

/// Wait before a full snapshot that is due at once (none in the store, a gap) is asked for again
/// after an attempt that did not produce one, when no delta interval says otherwise.
pub(crate) const FULL_RETRY: SignedDuration = SignedDuration::from_mins(1);

/// How far a restore from one store reaches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecoveryPoint {
    /// The newest full snapshot, its revision and when it was written.
    pub full: String,
    pub full_revision: i64,
    pub full_at: Option<Timestamp>,
    /// The end of the chain (the full snapshot's revision when no delta follows it)…
    pub revision: i64,
    /// …when that was written, and by which object.
    pub at: Option<Timestamp>,
    pub newest: String,
    /// Deltas in the chain.
    pub deltas: usize,
}

/// The recovery point of `store` (`pvc/NAME` or a bucket URL) as the catalog records it; `None`
/// when it holds no full snapshot with a known revision.
pub fn recovery_point(catalog: &[SnapshotRecord], store: &str) -> Option<RecoveryPoint> {
    let in_store = || catalog.iter().filter(move |r| r.store == store);
    // The newest by time, not by revision: after a restore to an older point the cluster's
    // revisions start again below those of the snapshots taken before it.
    let full = in_store()
        .filter(|r| !r.is_delta() && r.revision.is_some())
        .max_by_key(|r| (r.written_at.as_ref().map(|t| t.0), r.revision))?;
    let full_revision = full.revision?;
    let mut point = RecoveryPoint {
        full: full.object.clone(),
        full_revision,
        full_at: full.written_at.as_ref().map(|t| t.0),
        revision: full_revision,
        at: full.written_at.as_ref().map(|t| t.0),
        newest: full.object.clone(),
        deltas: 0,
    };
    // Each link starts where the chain ends and ends later; the longest such delta is taken.
    while let Some(next) = in_store()
        .filter(|r| {
            r.start_revision == Some(point.revision) && r.revision.is_some_and(|end| end > point.revision)
        })
        .max_by_key(|r| r.revision)
    {
        point.revision = next.revision.unwrap_or(point.revision);
        point.at = next.written_at.as_ref().map(|t| t.0);
        point.newest = next.object.clone();
        point.deltas += 1;
    }
    Some(point)
}

/// Whether `gap` is still open: no full snapshot in the store holds the revisions it lost.
pub fn gap_open(gap: Option<&BackupGap>, point: Option<&RecoveryPoint>) -> bool {
    gap.is_some_and(|gap| point.is_none_or(|p| p.full_revision < gap.compacted_to))
}

/// The backup to submit now, and when the next one may be due.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackupPlan {
    /// `Snapshot` or `Delta`, with why.
    pub due: Option<(TaskType, String)>,
    /// When to look again (`None`: when the task in flight ends).
    pub next_at: Option<Timestamp>,
}

/// What the policy's backup tasks look like to the plan: whether one is in flight, and when the
/// newest full snapshot and delta were last asked for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Attempts {
    pub in_flight: bool,
    pub last_full: Option<Timestamp>,
    pub last_delta: Option<Timestamp>,
}

impl Attempts {
    /// The attempts among `tasks` (those of the backup policy: `is_ours`).
    pub fn of(tasks: &[ClusterTaskView], is_ours: impl Fn(&ClusterTaskView) -> bool) -> Attempts {
        let ours: Vec<&ClusterTaskView> = tasks.iter().filter(|t| is_ours(t)).collect();
        let last =
            |task_type: TaskType| ours.iter().filter(|t| t.task_type == task_type).map(|t| t.created).max();
        Attempts {
            in_flight: ours.iter().any(|t| !t.state.is_final()),
            last_full: last(TaskType::Snapshot),
            last_delta: last(TaskType::Delta),
        }
    }
}

/// Which backup is due at `now` (see the module's rules). `cluster_revision` is the cluster's
/// revision as just observed (`None`: no member answered, and no backup is asked for).
pub fn plan(
    backup: &Backup,
    point: Option<&RecoveryPoint>,
    gap: Option<&BackupGap>,
    attempts: Attempts,
    cluster_revision: Option<i64>,
    now: Timestamp,
) -> BackupPlan {
    if attempts.in_flight {
        return BackupPlan { due: None, next_at: None };
    }
    let retry = retry_after(backup);
    let Some(revision) = cluster_revision else {
        return BackupPlan { due: None, next_at: Some(now + retry) };
    };
    let at_once = match point {
        None => Some("the store holds no full snapshot of the cluster".to_owned()),
        Some(p) if revision < p.revision => Some(format!(
            "the cluster is at revision {revision}, before its backups' {} ({}): it was restored or \
             replaced, and deltas continue only from a full snapshot of it",
            p.revision, p.newest
        )),
        Some(p) => gap.filter(|_| gap_open(gap, point)).map(|g| {
            format!(
                "history after revision {} was compacted (to {}) before a delta read it: a full \
                 snapshot covers the gap (the newest, {}, is at revision {})",
                g.after_revision, g.compacted_to, p.full, p.full_revision
            )
        }),
    };
    let full_due_at = match (&at_once, point) {
        // An attempt since the newest full that did not replace it is retried an interval on.
        (None, Some(p)) => {
            let due = p.full_at.map_or(now, |t| t + backup.full_every);
            match attempts.last_full {
                Some(tried) if p.full_at.is_none_or(|full| tried > full) => due.max(tried + retry),
                _ => due,
            }
        }
        _ => attempts.last_full.map_or(now, |t| t + retry),
    };
    let full_reason = || {
        at_once.clone().unwrap_or_else(|| {
            format!(
                "the newest full snapshot, {}, is {:#} old or more (spec.backup.fullEvery)",
                point.map(|p| p.full.as_str()).unwrap_or_default(),
                backup.full_every
            )
        })
    };
    if full_due_at <= now {
        return BackupPlan { due: Some((TaskType::Snapshot, full_reason())), next_at: None };
    }
    let delta_due_at = match (backup.delta_every, point) {
        (Some(every), Some(p)) if revision > p.revision => {
            p.at.into_iter().chain(attempts.last_delta).max().map(|t| t + every)
        }
        // Nothing new since the chain's end: look again an interval from now.
        (Some(every), Some(_)) => Some(now + every),
        _ => None,
    };
    if let (Some(due_at), Some(p)) = (delta_due_at, point)
        && due_at <= now
    {
        let behind = revision - p.revision;
        let reason = format!(
            "{behind} revision(s) after {} ({}) are in no backup (spec.backup.deltaEvery {:#})",
            p.revision,
            p.newest,
            backup.delta_every.unwrap_or_default()
        );
        return BackupPlan { due: Some((TaskType::Delta, reason)), next_at: None };
    }
    let next_at = delta_due_at.into_iter().chain([full_due_at]).min();
    BackupPlan { due: None, next_at }
}

/// How long after an attempt that did not move the chain the next is asked for: the delta
/// interval, else [`FULL_RETRY`].
/// The policy's Failed tasks beyond the newest `failed_history_limit`, to delete: a policy that
/// fails every 30 s would otherwise fill the namespace until each one's TTL ran out.
pub fn failed_beyond_limit(tasks: &[ClusterTaskView], backup: &Backup) -> Vec<String> {
    let mut failed: Vec<&ClusterTaskView> =
        tasks.iter().filter(|t| t.backup_policy && t.state == TaskState::Failed).collect();
    // Newest first (names for a stable answer between equal times).
    failed.sort_by(|a, b| (b.created, &b.name).cmp(&(a.created, &a.name)));
    failed.into_iter().skip(backup.failed_history_limit).map(|t| t.name.clone()).collect()
}

pub fn retry_after(backup: &Backup) -> SignedDuration {
    backup.delta_every.unwrap_or(FULL_RETRY)
}

/// How far groundskeeper may compact `cluster` now (see [`limit_of`]), from its catalog.
pub fn compaction_limit(policy: &Policy, cluster: &EtcdCluster) -> Option<i64> {
    let backup = policy.backup.as_ref()?;
    let name = cluster.metadata.name.as_deref().unwrap_or_default();
    let catalog = cluster.status.as_ref().map(|s| s.snapshots.as_slice()).unwrap_or_default();
    limit_of(backup, recovery_point(catalog, &backup.store(name).display()).as_ref())
}

/// While `backup` takes deltas, the recovery point `point` of its store bounds compaction (0
/// while the store holds no full snapshot: no compaction at all); `None` when nothing holds
/// compaction back.
pub fn limit_of(backup: &Backup, point: Option<&RecoveryPoint>) -> Option<i64> {
    backup.delta_every.map(|_| point.map_or(0, |p| p.revision))
}

#[cfg(test)]
mod tests;
