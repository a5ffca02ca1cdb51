//! The EtcdCluster controller's decision: a pure function of the spec, the observed members, the
//! cluster's maintenance tasks, the last status and the time.
//!
//! Rules, in order:
//! 1. A maintenance task of this cluster (Compact, Defragment or Maintenance, automatic or asked
//!    for by hand) queued or running means no new task: its outcome changes what is due, and
//!    the decision waits for it (written into the status by [`crate::etcd::record`]).
//!    "Queued or running" is read from the tasks that exist, so a controller restart cannot
//!    forget it, and a trigger never submits a task the queue would reject as a duplicate.
//! 2. No task while the spec is invalid, a member is unhealthy or unreachable, or the policy is
//!    disabled; nor within `checkInterval` of a failed or skipped one (backoff).
//! 3. Compaction before defragmentation: a due `periodic` compaction is a `Compact` task of its
//!    own (the defragmentation follows at a later decision, once the compaction has freed
//!    pages); in `revision` mode a due defragmentation is a `Maintenance` task whose defrag
//!    compacts first (`retainRevisions`), and a due compaction alone a `Compact` task.
//! 4. Defragmentation when the shared plan ([`plan_defrag`], the one `groundskeeper-job defrag`
//!    runs) finds a member over both thresholds and its preconditions hold: a `Maintenance` task
//!    when a compaction is due with it, else a `Defragment` task (a cluster without a compaction
//!    policy gets no compaction it did not ask for). Either carries the cluster's thresholds, so
//!    the task defragments exactly the members the trigger would have.
//!
//! The task's name is `<cluster>-<type>-<decision time in Unix seconds>`; rule 1 is what makes a
//! restarted controller submit nothing twice.

use groundskeeper_stores::etcd::plan::{
    DefragPolicy, MemberObservation, PlanOptions, Refusal, fragmented_percent, needs_defrag, plan_defrag,
};
use groundskeeper_stores::etcd::versions::{
    DEFRAG_RACE_FIXED_3_5, DEFRAG_RACE_FIXED_3_6, DefragRisk, defrag_risk,
};
use jiff::{SignedDuration, Timestamp};

use super::backups::{self, Attempts, RecoveryPoint};
use super::model::{OUTCOME_FAILED, OUTCOME_SUCCEEDED, ObservedMember};
use super::observe::cluster_revision;
use super::partition::{self, CLOCK_SKEWED, Finding, RevisionCheck};
use super::policy::{Backup, Compaction, Policy, SpecErrors};
use super::sampler::{self, LastCompaction};
use crate::conditions::Condition;
use crate::runtime::context::PlannedEvent;
use crate::tasks::hold::automatic_hold;
use groundskeeper_api::etcd_cluster::{
    EtcdBackupStatus, EtcdClusterStatus, EtcdMemberStatus, RevisionScheme,
};
use groundskeeper_api::maintenance_suspension::Suspension;
use groundskeeper_api::maintenance_task::{
    CompactConfig, DefragmentConfig, DeltaConfig, MaintenanceConfig, SnapshotConfig, TaskConfig, TaskState,
    TaskType,
};
use groundskeeper_api::maintenance_window::Windows;
use groundskeeper_api::snapshot_store::{Compression, SnapshotStoreSpec, Store};
use groundskeeper_protocol::names::bounded_name;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition as MetaCondition;

/// Named here as well, where the decision's users have always found them.
pub use super::model::{
    BACKUP_GAP, BACKUP_HELD, COMPACTION_HELD_BACK, ClusterTaskView, DEGRADED, DISABLED, Observed,
    PARTITION_ID_COLLISION, PROGRESSING, TLS_MOUNT_DIR, VERSION_RISK,
};

/// Shortest wait before the next reconciliation: the clock is never exact.
const MIN_REQUEUE: SignedDuration = SignedDuration::from_secs(1);
/// Requeue of a cluster whose spec is invalid: its next spec change wakes us anyway.
const INVALID_SPEC_REQUEUE: SignedDuration = SignedDuration::from_mins(10);
/// How soon a cluster stuck on an id collision looks again: the other cluster's fix does not
/// wake it.
const COLLISION_REQUEUE: SignedDuration = SignedDuration::from_secs(30);

/// The maintenance task the cluster waits for: the running one, else the first queued.
pub fn active_task(tasks: &[ClusterTaskView]) -> Option<&ClusterTaskView> {
    tasks
        .iter()
        .filter(|t| t.in_flight())
        .min_by_key(|t| (t.state != TaskState::InProgress, t.created, t.name.as_str()))
}

pub struct Input<'a> {
    pub cluster: &'a str,
    pub generation: Option<i64>,
    pub policy: Result<&'a Policy, &'a SpecErrors>,
    /// `spec.policy.enabled` as written, for the Disabled condition of an invalid spec.
    pub enabled: bool,
    pub observed: &'a Observed,
    /// Every MaintenanceTask whose target is this cluster, whatever its origin and state.
    pub tasks: &'a [ClusterTaskView],
    pub previous: &'a EtcdClusterStatus,
    /// The other clusters of its fleet (`namespace/name`) that claim its cluster id
    /// ([`super::fleet::id_collisions`]); empty for a cluster of no fleet.
    pub collisions: &'a [String],
    /// The cluster's maintenance suspensions in force now.
    pub suspensions: &'a [Suspension],
    /// Its maintenance windows, checked (`None`: it has none).
    pub windows: Option<&'a std::result::Result<Windows, String>>,
    pub now: Timestamp,
}

/// What to do now.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// The status to write (conditions apart: see `conditions`).
    pub status: EtcdClusterStatus,
    pub conditions: Vec<Condition>,
    pub submit: Option<PlannedTask>,
    /// The backup task of `spec.backup` to submit (label `groundskeeper.dev/origin:
    /// backup-policy`), beside any maintenance task: backups have their own cadence.
    pub backup: Option<PlannedTask>,
    /// The backup policy's Failed tasks beyond `spec.backup.failedHistoryLimit`, to delete.
    pub delete_tasks: Vec<String>,
    pub events: Vec<PlannedEvent>,
    pub requeue_after: SignedDuration,
}

/// The MaintenanceTask to submit (label `groundskeeper.dev/origin: automatic`, owned by the
/// EtcdCluster).
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedTask {
    pub name: String,
    pub task_type: TaskType,
    pub config: TaskConfig,
    /// Why, for the Event and the Progressing condition.
    pub reason: String,
}

/// Whether the cluster is due for an observation and a decision now, or how long until it is.
///
/// Due on the check interval (or the next revision sample), and at once when the spec changed
/// or the maintenance task the cluster waits for is not the one the status names (one was
/// queued, or it ended: its outcome is in the status by then). Reconciliations triggered by
/// anything else, such as our own status writes or a task moving from queued to running, do
/// nothing: without this every status write would trigger another observation and another write.
pub fn check_due(
    previous: &EtcdClusterStatus,
    generation: Option<i64>,
    tasks: &[ClusterTaskView],
    now: Timestamp,
) -> Result<(), SignedDuration> {
    let spec_changed = previous.observed_generation != generation;
    let active = active_task(tasks);
    let backup_task = tasks.iter().find(|t| t.backup_in_flight()).map(|t| &t.name);
    // A gap the record stage wrote that no pass has answered yet: a full snapshot is due at once.
    let gap_unanswered = previous.backup.as_ref().is_some_and(|b| b.gap.is_some())
        && !previous.conditions.iter().any(|c| c.type_ == BACKUP_GAP && c.status == "True");
    let tasks_changed = gap_unanswered
        || active.map(|t| &t.name) != previous.active_task.as_ref()
        || active.and_then(|t| t.waits_for.as_ref()) != previous.active_task_waits_for.as_ref()
        || backup_task != previous.backup.as_ref().and_then(|b| b.active_task.as_ref());
    match &previous.next_check_time {
        Some(next) if !spec_changed && !tasks_changed && next.0 > now => Err(next.0.duration_since(now)),
        _ => Ok(()),
    }
}

pub fn decide(input: &Input) -> Decision {
    let mut status = input.previous.clone();
    status.observed_generation = input.generation;
    let mut events = Vec::new();
    let active = active_task(input.tasks);
    status.active_task = active.map(|t| t.name.clone());
    status.active_task_waits_for = active.and_then(|t| t.waits_for.clone());

    let policy = match input.policy {
        Ok(policy) => policy,
        Err(errors) => {
            status.next_check_time = Some((input.now + INVALID_SPEC_REQUEUE).into());
            return Decision {
                conditions: conditions(
                    input.enabled,
                    progressing(active, None),
                    Some(("InvalidSpec", errors.to_string())),
                ),
                status,
                submit: None,
                backup: None,
                delete_tasks: Vec::new(),
                events,
                requeue_after: INVALID_SPEC_REQUEUE,
            };
        }
    };

    if let (Some(partition), false) = (&policy.partition, input.collisions.is_empty()) {
        let message = super::fleet::collision_message(partition, input.collisions);
        let already_told = input
            .previous
            .conditions
            .iter()
            .any(|c| c.type_ == DEGRADED && c.reason == PARTITION_ID_COLLISION && c.message == message);
        if !already_told {
            events.push(PlannedEvent {
                warning: true,
                reason: PARTITION_ID_COLLISION,
                note: message.clone(),
                related: None,
            });
        }
        status.next_check_time = Some((input.now + COLLISION_REQUEUE).into());
        return Decision {
            conditions: conditions(
                policy.enabled,
                progressing(active, None),
                Some((PARTITION_ID_COLLISION, message)),
            ),
            status,
            submit: None,
            backup: None,
            delete_tasks: Vec::new(),
            events,
            requeue_after: COLLISION_REQUEUE,
        };
    }

    let members = match input.observed {
        Observed::Members(members) => members.as_slice(),
        _ => &[],
    };
    apply_observation(&mut status, members, input.now);
    let revision = cluster_revision(members);
    // Only when the members were asked: a controller that could not ask (its client TLS
    // Secret is missing, say) has seen nothing of the quorum, and a Restore must never be
    // admitted on that.
    if matches!(input.observed, Observed::Members(_)) {
        super::quorum::track_quorum(&mut status, members, revision, input.now);
    }
    let revisions = check_partition_revisions(policy, members, input.previous, input.now);
    if let Some(check) = &revisions {
        status.partition = Some(check.status.clone());
    }
    if !partitioned(policy) {
        status.partition = None;
    }
    status.revision = revision.or(status.revision);
    update_samples(&mut status, policy, revision, input.now);
    let clock_behind = revisions.as_ref().is_some_and(|c| matches!(c.finding, Finding::Behind { .. }));

    let mut requeue = requeue_for(policy, &status, input.now);
    let backups = policy.backup.as_ref().map(|backup| backup_pass(input, backup, &status, revision));
    if let Some(next) = backups.as_ref().and_then(|b| b.next_at) {
        requeue = requeue.min(next.duration_since(input.now));
    }
    let compaction_limit = backups.as_ref().and_then(|b| b.compaction_limit);
    let unhealthy = unhealthy_message(input.observed);
    let mut submit = None;
    let mut held = None;
    let mut held_back_from = None;
    let mut degraded = unhealthy.map(|m| ("MembersUnhealthy", m));
    if active.is_none() && degraded.is_none() && policy.enabled {
        match backoff_until(policy, &status) {
            Some(until) if until > input.now => requeue = requeue.min(until.duration_since(input.now)),
            _ => match plan_task(input, policy, &status, members, revision, clock_behind, compaction_limit) {
                Ok((planned, held_from)) => {
                    submit = planned;
                    held_back_from = held_from;
                }
                Err(refusal) => degraded = Some(refusal),
            },
        }
        // Due, but held: a suspension or a closed window means no task at all, not one waiting.
        if let Some(task) = &submit
            && let Some((why, until)) =
                automatic_hold(input.suspensions, input.windows, &task.task_type, input.now)
        {
            held = Some(format!("{} is due ({}) but held: {why}", task.task_type, task.reason));
            if let Some(until) = until.filter(|u| *u > input.now) {
                requeue = requeue.min(until.duration_since(input.now));
            }
            submit = None;
        }
    }
    if degraded.is_none() && status.last_maintenance_outcome.as_deref() == Some(OUTCOME_FAILED) {
        degraded = Some((
            "MaintenanceFailed",
            status
                .last_maintenance_message
                .clone()
                .unwrap_or_else(|| "the last maintenance task failed".to_owned()),
        ));
    }
    if degraded.is_none()
        && let Some(message) = super::quorum::failed_proof_message(&status)
    {
        degraded = Some(("SnapshotNotRestorable", message));
    }
    if let Some(task) = &submit {
        status.active_task = Some(task.name.clone());
        events.push(PlannedEvent {
            warning: false,
            reason: "MaintenanceTaskCreated",
            note: format!("MaintenanceTask {} ({}): {}", task.name, task.task_type, task.reason),
            related: None,
        });
    }
    let requeue_after = requeue.max(MIN_REQUEUE);
    status.next_check_time = Some((input.now + requeue_after).into());
    let progress = match held {
        Some(message) => (false, "Held", message),
        None => progressing(active, submit.as_ref()),
    };
    let mut conditions = conditions(policy.enabled, progress, degraded);
    conditions.push(version_condition(policy, &status.members));
    let backup = match backups {
        Some(pass) => {
            let (backup, backup_conditions, backup_events) = pass.finish(input, &mut status, held_back_from);
            conditions.extend(backup_conditions);
            events.extend(backup_events);
            backup
        }
        None => {
            status.backup = None;
            conditions.extend(conditions_without_backup_policy(&input.previous.conditions));
            None
        }
    };
    conditions.extend(super::quorum::proof_condition(&status));
    if let Some((condition, event)) = clock_condition(policy, revisions.as_ref(), input.previous) {
        conditions.push(condition);
        events.extend(event);
    }
    let delete_tasks = policy
        .backup
        .as_ref()
        .map(|backup| backups::failed_beyond_limit(input.tasks, backup))
        .unwrap_or_default();
    Decision { conditions, status, submit, backup, delete_tasks, events, requeue_after }
}

/// One pass of the backup policy: the recovery point of its store, the backup due (or held), and
/// how far compaction may go.
struct BackupPass {
    store: String,
    point: Option<RecoveryPoint>,
    submit: Option<PlannedTask>,
    /// The policy's task queued or running (or the one submitted now).
    active: Option<String>,
    held: Option<String>,
    next_at: Option<Timestamp>,
    compaction_limit: Option<i64>,
}

fn backup_pass(
    input: &Input,
    backup: &Backup,
    status: &EtcdClusterStatus,
    revision: Option<i64>,
) -> BackupPass {
    let store = backup.store(input.cluster).display();
    let point = backups::recovery_point(&status.snapshots, &store);
    let gap = status.backup.as_ref().filter(|b| b.store == store).and_then(|b| b.gap.as_ref());
    let attempts = Attempts::of(input.tasks, |t| t.backup_policy);
    let mut plan = backups::plan(backup, point.as_ref(), gap, attempts, revision, input.now);
    let mut held = None;
    if let Some((task_type, reason)) = &plan.due
        && let Some((why, until)) = automatic_hold(input.suspensions, None, task_type, input.now)
    {
        held = Some(format!("{task_type} is due ({reason}) but held: {why}"));
        let retry = backups::retry_after(backup);
        plan.next_at = Some(until.filter(|u| *u > input.now).unwrap_or(input.now + retry));
        plan.due = None;
    }
    let submit = plan.due.map(|(task_type, reason)| PlannedTask {
        name: task_name(input.cluster, &task_type, input.now),
        config: backup_config(backup, &task_type, input.cluster),
        task_type,
        reason,
    });
    let active = submit
        .as_ref()
        .map(|t| t.name.clone())
        .or_else(|| input.tasks.iter().find(|t| t.backup_in_flight()).map(|t| t.name.clone()));
    BackupPass {
        compaction_limit: backups::limit_of(backup, point.as_ref()),
        store,
        point,
        submit,
        active,
        held,
        next_at: plan.next_at,
    }
}

/// The Snapshot or Delta task's config: the policy's store, names and retention.
fn backup_config(backup: &Backup, task_type: &TaskType, cluster: &str) -> TaskConfig {
    let store = backup.store(cluster);
    let compression = backup.encoding.compress.then_some(Compression::Zstd);
    let encryption = backup.encoding.encryption.clone();
    let spec = match &store {
        Store::Claim(claim) => SnapshotStoreSpec {
            persistent_volume_claim: Some(claim.clone()),
            bucket: None,
            compression,
            encryption: encryption.clone(),
        },
        Store::Bucket(bucket) => SnapshotStoreSpec {
            persistent_volume_claim: None,
            bucket: Some(bucket.clone()),
            compression,
            encryption: encryption.clone(),
        },
    };
    match task_type {
        TaskType::Delta => TaskConfig {
            delta: Some(DeltaConfig {
                to: Some(spec),
                file_name: Some(backup.file_name.clone()),
                start_revision: None,
            }),
            ..TaskConfig::default()
        },
        _ => TaskConfig {
            snapshot: Some(SnapshotConfig {
                persistent_volume_claim: spec.persistent_volume_claim,
                bucket: spec.bucket,
                file_name: backup.file_name.clone(),
                retain: backup.retain,
                retention: backup.retention.clone(),
                verify: false,
                compression,
                encryption,
            }),
            ..TaskConfig::default()
        },
    }
}

impl BackupPass {
    /// `status.backup`, the conditions `BackupGap` and `CompactionHeldBack`, and the Events of a
    /// gap found or closed; the task to submit.
    fn finish(
        self,
        input: &Input,
        status: &mut EtcdClusterStatus,
        held_back_from: Option<i64>,
    ) -> (Option<PlannedTask>, Vec<Condition>, Vec<PlannedEvent>) {
        let previous = input.previous.backup.as_ref().filter(|b| b.store == self.store);
        let recorded_gap = previous.and_then(|b| b.gap.clone());
        let gap = recorded_gap.clone().filter(|g| backups::gap_open(Some(g), self.point.as_ref()));
        let caught_up = |p: &RecoveryPoint| status.revision.is_some_and(|r| r <= p.revision);
        let recovery_point_time = self.point.as_ref().and_then(|p| {
            if caught_up(p) {
                Some(input.now.into())
            } else if previous.and_then(|b| b.recovery_point_revision) == Some(p.revision) {
                previous.and_then(|b| b.recovery_point_time.clone()).or_else(|| p.at.map(Into::into))
            } else {
                p.at.map(Into::into)
            }
        });
        let mut events = Vec::new();
        let gap_condition = match &gap {
            Some(g) => {
                let message = format!(
                    "history after revision {} was compacted to revision {} (not by groundskeeper: etcd's \
                     --auto-compaction-* or another client) before delta {} read it: those changes are in \
                     no backup; a full snapshot is taken at once",
                    g.after_revision, g.compacted_to, g.task
                );
                let told =
                    input.previous.conditions.iter().any(|c| c.type_ == BACKUP_GAP && c.status == "True");
                if !told {
                    events.push(PlannedEvent {
                        warning: true,
                        reason: BACKUP_GAP,
                        note: message.clone(),
                        related: None,
                    });
                }
                Condition::new(BACKUP_GAP, true, "HistoryCompacted", message)
            }
            None => {
                if let (Some(closed), Some(p)) = (&recorded_gap, &self.point) {
                    events.push(PlannedEvent {
                        warning: false,
                        reason: "BackupGapClosed",
                        note: format!(
                            "full snapshot {} at revision {} covers the changes compacted after revision {}",
                            p.full, p.full_revision, closed.after_revision
                        ),
                        related: None,
                    });
                }
                Condition::new(
                    BACKUP_GAP,
                    false,
                    "NoGap",
                    "no history was compacted away before a delta read it",
                )
            }
        };
        let held_condition = match (held_back_from, self.compaction_limit) {
            (Some(wanted), Some(limit)) => Condition::new(
                COMPACTION_HELD_BACK,
                true,
                "BackupsBehind",
                format!(
                    "compaction to revision {wanted} is held at revision {limit}, the newest backed up in {} \
                     (spec.backup.deltaEvery is set: compaction never passes the backups)",
                    self.store
                ),
            ),
            _ => Condition::new(
                COMPACTION_HELD_BACK,
                false,
                "NotHeld",
                "compaction is not held back by the backups",
            ),
        };
        let mut conditions = vec![gap_condition, held_condition];
        if let Some(why) = &self.held {
            conditions.push(Condition::new(BACKUP_HELD, true, "Held", why.clone()));
        } else if input.previous.conditions.iter().any(|c| c.type_ == BACKUP_HELD) {
            conditions.push(Condition::new(BACKUP_HELD, false, "NotHeld", "backups are not held"));
        }
        status.backup = Some(EtcdBackupStatus {
            store: self.store.clone(),
            recovery_point_revision: self.point.as_ref().map(|p| p.revision),
            recovery_point_time,
            newest: self.point.as_ref().map(|p| p.newest.clone()),
            active_task: self.active.clone(),
            compaction_held_from: held_back_from,
            last_gap: recorded_gap.clone().or_else(|| previous.and_then(|b| b.last_gap.clone())),
            gap,
        });
        if let Some(task) = &self.submit {
            events.push(PlannedEvent {
                warning: false,
                reason: "BackupTaskCreated",
                note: format!("MaintenanceTask {} ({}): {}", task.name, task.task_type, task.reason),
                related: None,
            });
        }
        (self.submit, conditions, events)
    }
}

/// `DefragVersionRisk`: True while a member runs an etcd version whose defrag can corrupt data
/// when it overlaps a snapshot apply, naming the members, their versions, the fix and what the
/// runner does about it.
pub(crate) fn version_condition(policy: &Policy, members: &[EtcdMemberStatus]) -> Condition {
    let mut affected: Vec<(String, DefragRisk)> =
        members.iter().filter_map(|m| Some((m.name.clone(), defrag_risk(m.version.as_deref()?)?))).collect();
    if affected.is_empty() {
        return Condition::new(
            VERSION_RISK,
            false,
            "NoAffectedVersion",
            "no member runs an affected etcd version",
        );
    }
    affected.sort_by(|a, b| a.0.cmp(&b.0));
    let named: Vec<String> =
        affected.iter().map(|(name, risk)| format!("{name} ({})", risk.version)).collect();
    let handling = if policy.refuse_affected_versions {
        "they are not defragmented (spec.policy.refuseAffectedVersions); upgrade them"
    } else {
        "each is defragmented only when caught up with the leader right before its turn; upgrade, or \
         set spec.policy.refuseAffectedVersions to skip them"
    };
    let message = format!(
        "{}: a defrag that overlaps a snapshot apply can corrupt a member's data (etcd #20650, #20653), \
         fixed in {} (3.6: {}); {handling}",
        named.join(", "),
        DEFRAG_RACE_FIXED_3_5,
        DEFRAG_RACE_FIXED_3_6,
    );
    Condition::new(VERSION_RISK, true, "AffectedVersion", message)
}

/// The backup conditions a cluster had, False now that it has no backup policy.
fn conditions_without_backup_policy(previous: &[MetaCondition]) -> Vec<Condition> {
    [BACKUP_GAP, COMPACTION_HELD_BACK, BACKUP_HELD]
        .into_iter()
        .filter(|type_| previous.iter().any(|c| c.type_ == *type_))
        .map(|type_| Condition::new(type_, false, "NoBackupPolicy", "spec.backup is not set"))
        .collect()
}

fn partitioned(policy: &Policy) -> bool {
    policy.partition.as_ref().is_some_and(|p| p.revision_scheme == RevisionScheme::Partitioned)
}

/// The members' revisions taken apart, for a `Partitioned` cluster whose members answered.
fn check_partition_revisions(
    policy: &Policy,
    members: &[ObservedMember],
    previous: &EtcdClusterStatus,
    now: Timestamp,
) -> Option<RevisionCheck> {
    let partition = policy.partition.as_ref().filter(|_| partitioned(policy))?;
    let revisions: Vec<(String, i64)> =
        members.iter().filter_map(|m| Some((m.member.name.clone(), m.revision?))).collect();
    partition::check_revisions(partition, &revisions, previous, now)
}

/// Condition `ClockSkewed` of a `Partitioned` cluster, and its Event when it changes: a Warning
/// when a skew (or a foreign cluster id) is first found or its kind changes, a Normal one when it
/// clears. Without a fresh observation the condition stays as it was; a cluster that is no
/// longer `Partitioned` gets it False once, if it had it.
fn clock_condition(
    policy: &Policy,
    check: Option<&RevisionCheck>,
    previous: &EtcdClusterStatus,
) -> Option<(Condition, Option<PlannedEvent>)> {
    let before = previous.conditions.iter().find(|c| c.type_ == CLOCK_SKEWED);
    let Some(partition) = policy.partition.as_ref().filter(|_| partitioned(policy)) else {
        let not_partitioned = Condition::new(
            CLOCK_SKEWED,
            false,
            "NotPartitioned",
            "spec.partition.revisionScheme is not Partitioned: revisions are not times",
        );
        return before.map(|_| (not_partitioned, None));
    };
    let Some(check) = check else {
        let kept = before?;
        let kept =
            Condition::new(CLOCK_SKEWED, kept.status == "True", kept.reason.clone(), kept.message.clone());
        return Some((kept, None));
    };
    let skewed = check.finding != Finding::InStep;
    let reason = check.finding.reason();
    let message = check.finding.message(partition);
    let was_skewed = before.filter(|c| c.status == "True");
    let event = match (skewed, was_skewed) {
        (true, Some(was)) if was.reason == reason => None,
        (true, _) => Some(PlannedEvent { warning: true, reason, note: message.clone(), related: None }),
        (false, Some(_)) => {
            Some(PlannedEvent { warning: false, reason, note: message.clone(), related: None })
        }
        (false, None) => None,
    };
    Some((Condition::new(CLOCK_SKEWED, skewed, reason, message), event))
}

fn progressing(
    active: Option<&ClusterTaskView>,
    submitted: Option<&PlannedTask>,
) -> (bool, &'static str, String) {
    match (submitted, active) {
        (Some(task), _) => (
            true,
            "TaskCreated",
            format!("MaintenanceTask {} ({}): {}", task.name, task.task_type, task.reason),
        ),
        (None, Some(task)) if task.state == TaskState::InProgress => {
            (true, "TaskRunning", format!("MaintenanceTask {} ({}) is running", task.name, task.task_type))
        }
        (None, Some(task)) => (
            true,
            "TaskQueued",
            match &task.waits_for {
                Some(why) => format!("MaintenanceTask {} ({}) is queued: {why}", task.name, task.task_type),
                None => format!("MaintenanceTask {} ({}) is queued", task.name, task.task_type),
            },
        ),
        (None, None) => (false, "Idle", "no maintenance task queued or running".to_owned()),
    }
}

fn conditions(
    enabled: bool,
    progressing: (bool, &'static str, String),
    degraded: Option<(&'static str, String)>,
) -> Vec<Condition> {
    let (degraded_status, degraded_reason, degraded_message) = match degraded {
        Some((reason, message)) => (true, reason, message),
        None => (false, "AsExpected", "members healthy, maintenance as planned".to_owned()),
    };
    let disabled = if enabled {
        Condition::new(DISABLED, false, "Enabled", "automatic maintenance is enabled")
    } else {
        Condition::new(
            DISABLED,
            true,
            "DisabledBySpec",
            "spec.policy.enabled is false: members are observed, no task is submitted",
        )
    };
    vec![
        Condition::new(PROGRESSING, progressing.0, progressing.1, progressing.2),
        Condition::new(DEGRADED, degraded_status, degraded_reason, degraded_message),
        disabled,
    ]
}

/// The members as observed now, keeping what only earlier statuses know (last defrag).
fn apply_observation(status: &mut EtcdClusterStatus, members: &[ObservedMember], now: Timestamp) {
    if members.is_empty() {
        // Nobody was asked or nobody answered: keep the last picture, marked unhealthy below.
        for member in &mut status.members {
            member.healthy = false;
        }
        status.healthy_members = Some(0);
        return;
    }
    let previous = std::mem::take(&mut status.members);
    status.members = members.iter().map(|observed| member_status(observed, &previous)).collect();
    status.last_observed_time = Some(now.into());
    status.member_count = Some(status.members.len() as i32);
    status.healthy_members = Some(status.members.iter().filter(|m| m.healthy).count() as i32);
    status.max_fragmentation = status
        .members
        .iter()
        .filter_map(|m| m.fragmentation_percent)
        .max_by(f64::total_cmp)
        .map(|p| format!("{p:.1}%"));
}

fn member_status(observed: &ObservedMember, previous: &[EtcdMemberStatus]) -> EtcdMemberStatus {
    let member = &observed.member;
    let id = member.id_hex();
    let earlier = previous.iter().find(|p| p.id == id);
    let status = member.status.as_ref().ok();
    let leader_id = status.map(|s| s.leader).unwrap_or(0);
    EtcdMemberStatus {
        name: member.name.clone(),
        id,
        endpoint: observed.endpoint.clone(),
        peer_urls: observed.peer_urls.clone(),
        db_size: status.map(|s| s.db_size),
        db_size_in_use: status.map(|s| s.db_size_in_use),
        fragmentation_percent: status.map(|s| (fragmented_percent(s) * 10.0).round() / 10.0),
        leader: member.id != 0 && leader_id == member.id,
        healthy: member.unhealthy_because().is_none(),
        learner: member.is_learner,
        version: status.map(|s| s.version.clone()).filter(|v| !v.is_empty()),
        raft_term: status.and_then(|s| i64::try_from(s.raft_term).ok()),
        message: member.unhealthy_because(),
        last_defrag_time: earlier.and_then(|p| p.last_defrag_time.clone()),
        last_bytes_reclaimed: earlier.and_then(|p| p.last_bytes_reclaimed),
        defrag_history: earlier.map(|p| p.defrag_history.clone()).unwrap_or_default(),
    }
}

/// `Some(message)` naming every unhealthy member and its endpoint, if any.
fn unhealthy_message(observed: &Observed) -> Option<String> {
    match observed {
        Observed::NotAttempted => None,
        Observed::Failed(why) => Some(format!("members not observed: {why}")),
        Observed::Members(members) if members.is_empty() => Some("no member answered".to_owned()),
        Observed::Members(members) => {
            let sick: Vec<String> = members
                .iter()
                .filter_map(|m| {
                    m.member
                        .unhealthy_because()
                        .map(|why| format!("member {} ({}): {why}", m.member.name, m.endpoint))
                })
                .collect();
            (!sick.is_empty())
                .then(|| format!("{}; no maintenance until every member is healthy", sick.join("; ")))
        }
    }
}

fn update_samples(status: &mut EtcdClusterStatus, policy: &Policy, revision: Option<i64>, now: Timestamp) {
    if partitioned(policy) {
        // Composite revisions are times: the target comes from the clock, nothing is sampled.
        status.revision_samples.clear();
        return;
    }
    match (policy.compaction, revision) {
        (Some(Compaction::Periodic { retention }), Some(revision)) => {
            status.revision_samples = sampler::record(&status.revision_samples, now, revision, retention);
        }
        (Some(Compaction::Periodic { .. }), None) => {}
        // Samples only serve `periodic` mode; another mode (or none) drops them.
        _ => status.revision_samples.clear(),
    }
}

/// When the next observation is due: the check interval, or sooner when a revision sample is.
fn requeue_for(policy: &Policy, status: &EtcdClusterStatus, now: Timestamp) -> SignedDuration {
    let mut requeue = policy.check_interval;
    if let Some(Compaction::Periodic { retention }) = policy.compaction
        && !partitioned(policy)
        && let Some(next) = sampler::next_sample_at(&status.revision_samples, retention)
    {
        requeue = requeue.min(next.duration_since(now));
    }
    requeue
}

/// A failed or skipped run is not retried within a check interval.
fn backoff_until(policy: &Policy, status: &EtcdClusterStatus) -> Option<Timestamp> {
    let outcome = status.last_maintenance_outcome.as_deref()?;
    if outcome == OUTCOME_SUCCEEDED {
        return None;
    }
    Some(status.last_maintenance_time.as_ref()?.0 + policy.check_interval)
}

/// What [`plan_task`] found: the task to submit (if any), and the revision a compaction due would
/// have gone to when the backups held it back.
type Planned = (Option<PlannedTask>, Option<i64>);

/// The task to submit now, `Ok(None)` when nothing is due, `Err` when something is due but a
/// precondition keeps it from being done (reported as Degraded).
fn plan_task(
    input: &Input,
    policy: &Policy,
    status: &EtcdClusterStatus,
    members: &[ObservedMember],
    revision: Option<i64>,
    clock_behind: bool,
    compaction_limit: Option<i64>,
) -> Result<Planned, (&'static str, String)> {
    let last = LastCompaction {
        time: status.last_compaction_time.as_ref().map(|t| t.0),
        revision: status.last_compacted_revision,
    };
    let compact_to = match (policy.compaction, &policy.partition) {
        (Some(Compaction::Periodic { retention }), Some(partition)) if partitioned(policy) => {
            partition::compaction_due(partition, retention, revision, last, clock_behind, input.now)
                .map(|r| (r, "the first revision of the retention ago, from its time"))
        }
        (Some(Compaction::Periodic { retention }), _) => {
            sampler::due(&status.revision_samples, input.now, retention, last)
                .map(|r| (r, "sampled at least the retention ago"))
        }
        _ => None,
    };
    // While the backup policy takes deltas, compaction stops at the recovery point.
    let (compact_to, mut held_back_from) = match (compact_to, compaction_limit) {
        (Some((wanted, _)), Some(limit)) if wanted > limit => {
            let last = status.last_compacted_revision.unwrap_or(0);
            ((limit > last).then_some((limit, "held back at the newest revision backed up")), Some(wanted))
        }
        (compact_to, _) => (compact_to, None),
    };
    let planned = |task_type: TaskType, config: TaskConfig, reason: String| PlannedTask {
        name: task_name(input.cluster, &task_type, input.now),
        task_type,
        config,
        reason,
    };
    if let Some((revision, how)) = compact_to {
        let config =
            TaskConfig { compact: Some(physical_compaction(None, Some(revision))), ..TaskConfig::default() };
        let reason = format!("periodic compaction to revision {revision}, {how}");
        return Ok((Some(planned(TaskType::Compact, config, reason)), held_back_from));
    }
    let observations: Vec<MemberObservation> = members.iter().map(|m| m.member.clone()).collect();
    let over = over_thresholds(policy, &observations);
    let revision_compaction = match policy.compaction {
        Some(Compaction::Revision { keep }) => {
            let due = revision_compaction_due(policy, status, revision, keep, input.now);
            // The Job holds its target at the limit too (`--not-past`); here it is not asked for
            // when the limit leaves nothing to compact.
            match (due, revision, compaction_limit) {
                (Some(_), Some(current), Some(limit)) if current - keep > limit => {
                    held_back_from = Some(current - keep);
                    due.filter(|_| limit > status.last_compacted_revision.unwrap_or(0))
                }
                _ => due,
            }
        }
        _ => None,
    };
    if !over.is_empty() {
        let options = PlanOptions {
            leader_turn: policy.leader_turn,
            allow_single_member: policy.allow_single_member,
            refuse_affected_versions: policy.refuse_affected_versions,
            ..PlanOptions::default()
        };
        let planned_defrag = match plan_defrag(&defrag_policy(policy), &options, &observations) {
            Ok(plan) if !plan.is_empty() => {
                let thresholds = DefragmentConfig {
                    min_defrag_bytes: policy.min_defrag_bytes,
                    max_fragmented_percent: policy.max_fragmented_percent,
                };
                let reason = format!("defragmentation of {}", over.join(", "));
                Ok(Some(match revision_compaction {
                    Some(keep) => planned(
                        TaskType::Maintenance,
                        TaskConfig {
                            maintenance: Some(MaintenanceConfig {
                                compact: Some(physical_compaction(Some(keep), None)),
                                defragment: Some(thresholds),
                            }),
                            ..TaskConfig::default()
                        },
                        format!("{reason}, compacting to keep the last {keep} revisions first"),
                    ),
                    None => planned(
                        TaskType::Defragment,
                        TaskConfig { defragment: Some(thresholds), ..TaskConfig::default() },
                        reason,
                    ),
                }))
            }
            Ok(_) => Ok(None),
            Err(refusal) => Err(refusal_condition(&refusal, &over)),
        };
        return planned_defrag.map(|task| (task, held_back_from));
    }
    if let Some(keep) = revision_compaction {
        let config =
            TaskConfig { compact: Some(physical_compaction(Some(keep), None)), ..TaskConfig::default() };
        let reason = format!("compaction keeping the last {keep} revisions");
        return Ok((Some(planned(TaskType::Compact, config, reason)), held_back_from));
    }
    Ok((None, held_back_from))
}

/// A compaction that waits until the freed pages are visible, so that a defragmentation after
/// it reclaims them (as [`super::job::compact_operation`] renders it).
fn physical_compaction(retain_revisions: Option<i64>, revision: Option<i64>) -> CompactConfig {
    CompactConfig { retain_revisions, revision, physical: true }
}

fn refusal_condition(refusal: &Refusal, over: &[String]) -> (&'static str, String) {
    let reason = match refusal {
        Refusal::TooFewVotingMembers { .. } => "TooFewMembers",
        Refusal::NoStableLeader { .. } => "NoStableLeader",
        Refusal::Unhealthy { .. } | Refusal::NoMembers => "MembersUnhealthy",
    };
    (reason, format!("defragmentation of {} is due but not done: {refusal}", over.join(", ")))
}

/// `revision` mode: keep the last `keep` revisions, compacting at most once per check interval
/// and only when the target moved past what was compacted last.
fn revision_compaction_due(
    policy: &Policy,
    status: &EtcdClusterStatus,
    revision: Option<i64>,
    keep: i64,
    now: Timestamp,
) -> Option<i64> {
    let target = revision? - keep;
    if target <= status.last_compacted_revision.unwrap_or(0) {
        return None;
    }
    let recent = status.last_compaction_time.as_ref().is_some_and(|t| now - policy.check_interval < t.0);
    (!recent).then_some(keep)
}

fn defrag_policy(policy: &Policy) -> DefragPolicy {
    DefragPolicy {
        min_defrag_bytes: policy.min_defrag_bytes,
        max_fragmented_percent: policy.max_fragmented_percent,
    }
}

/// Names of the voting members over both thresholds.
fn over_thresholds(policy: &Policy, members: &[MemberObservation]) -> Vec<String> {
    let thresholds = defrag_policy(policy);
    members
        .iter()
        .filter(|m| !m.is_learner)
        .filter(|m| m.status.as_ref().is_ok_and(|s| needs_defrag(&thresholds, s).0))
        .map(|m| m.name.clone())
        .collect()
}

/// `<cluster>-<type>-<decision time in Unix seconds>` (type in lower case), shortened to a valid
/// name when the cluster's name is long (with a hash of the full name, so that two long names
/// sharing a prefix do not collide). The name is also a label value of the task's Jobs.
pub fn task_name(cluster: &str, task_type: &TaskType, decided_at: Timestamp) -> String {
    let suffix = format!("-{}-{}", task_type.as_str().to_lowercase(), decided_at.as_second());
    bounded_name(cluster, &suffix)
}
