//! A finished etcd task's outcome, written into its EtcdCluster's status: the etcd trigger's
//! memory of what was done. The last maintenance and its outcome drive the trigger's backoff and
//! its Degraded condition, the compacted revision and its time the compaction schedule, and each
//! member's last defragmentation shows in `status.members`. Tasks asked for by hand count like
//! automatic ones: a defragmentation just done by hand makes the automatic one not due.
//!
//! [`record`] is the pure part; [`record_task`] is what the task controller calls once, as an
//! etcd task becomes final, before it writes the task's final status: when that write fails, the
//! next reconciliation records again, and [`record`] sees the task named in
//! `status.lastMaintenanceTask` and changes nothing.

use groundskeeper_api::plan::{MAX_SAMPLES, WorkSample};
use groundskeeper_protocol::result::{DefragReport, ErrorKind, MemberDefragState};
use groundskeeper_protocol::{JobResult, OperationKind, Outcome, Report, keys};
use jiff::{SignedDuration, Timestamp};
use kube::api::{Patch, PatchParams};
use kube::{Api, Resource, ResourceExt};

use super::metrics::EtcdMetrics;
use super::model::{OUTCOME_FAILED, OUTCOME_SKIPPED, OUTCOME_SUCCEEDED};
use crate::jobs::{JobObservation, JobState};
use crate::runtime::context::{Context, PlannedEvent};
use crate::runtime::error::{Error, Result};
use crate::tasks::checked::CheckedTask;
use groundskeeper_api::etcd_cluster::{EtcdCluster, EtcdClusterStatus, EtcdMemberStatus, LastSnapshot};
use groundskeeper_api::maintenance_task::{
    MaintenanceTask, MaintenanceTaskStatus, SnapshotStatus, TargetKind, TaskState, TaskType,
};

/// Named here as well, where the record's users have always found it.
pub use super::model::is_maintenance;

/// A maintenance task that became final, as its cluster's status records it.
#[derive(Debug, Clone, PartialEq)]
pub struct FinishedTask {
    pub name: String,
    /// Completed or Failed (a Rejected task never ran: nothing to record).
    pub state: TaskState,
    /// Why it failed (its newest error), when it did.
    pub failure: Option<String>,
    /// Its step Jobs that finished, in step order.
    pub steps: Vec<FinishedStep>,
}

/// One finished step Job of a task.
#[derive(Debug, Clone, PartialEq)]
pub struct FinishedStep {
    pub job: String,
    /// The runner's result, or why it could not be read.
    pub result: std::result::Result<JobResult, String>,
}

/// What recording a task changes.
#[derive(Debug, Clone, PartialEq)]
pub struct Recorded {
    pub status: EtcdClusterStatus,
    /// `MaintenanceSucceeded`, `MaintenanceSkipped` or `MaintenanceFailed` (Warning).
    pub event: PlannedEvent,
    /// The runner's results read, for the metrics.
    pub results: Vec<JobResult>,
}

/// The status with `task`'s outcome recorded; `None` when it was recorded already.
pub fn record(previous: &EtcdClusterStatus, task: &FinishedTask, now: Timestamp) -> Option<Recorded> {
    if previous.last_maintenance_task.as_deref() == Some(task.name.as_str()) {
        return None;
    }
    let mut status = previous.clone();
    let results: Vec<JobResult> =
        task.steps.iter().filter_map(|step| step.result.as_ref().ok().cloned()).collect();
    for result in &results {
        apply_result(&mut status, result, now);
    }
    let outcome = outcome_of(task, &results);
    let message = describe(task);
    status.last_maintenance_task = Some(task.name.clone());
    status.last_maintenance_time = Some(now.into());
    status.last_maintenance_outcome = Some(outcome.to_owned());
    status.last_maintenance_message = Some(message.clone());
    let event = PlannedEvent {
        warning: outcome == OUTCOME_FAILED,
        reason: match outcome {
            OUTCOME_FAILED => "MaintenanceFailed",
            OUTCOME_SKIPPED => "MaintenanceSkipped",
            _ => "MaintenanceSucceeded",
        },
        note: message,
        related: None,
    };
    Some(Recorded { status, event, results })
}

/// The status with a completed Snapshot task's file as `lastSnapshot`; `None` when that task is
/// recorded already or its snapshot was not taken (the task's own status says why).
pub fn record_snapshot(
    previous: &EtcdClusterStatus,
    task: &str,
    snapshot: &SnapshotStatus,
    now: Timestamp,
) -> Option<EtcdClusterStatus> {
    if previous.last_snapshot.as_ref().is_some_and(|s| s.task == task) || snapshot.size_bytes.is_none() {
        return None;
    }
    let mut status = previous.clone();
    status.last_snapshot = Some(LastSnapshot {
        task: task.to_owned(),
        persistent_volume_claim: snapshot.persistent_volume_claim.clone(),
        file: snapshot.file.clone(),
        time: now.into(),
        revision: snapshot.revision,
        size_bytes: snapshot.size_bytes,
        size: snapshot.size.clone(),
        sha256: snapshot.sha256.clone(),
    });
    Some(status)
}

/// Failed when the task failed or a step's runner says so; Skipped when every step's runner
/// found nothing to do; else Succeeded.
fn outcome_of(task: &FinishedTask, results: &[JobResult]) -> &'static str {
    if task.state == TaskState::Failed || results.iter().any(|r| r.outcome == Outcome::Failed) {
        OUTCOME_FAILED
    } else if !results.is_empty()
        && results.len() == task.steps.len()
        && results.iter().all(|r| r.outcome == Outcome::Skipped)
    {
        OUTCOME_SKIPPED
    } else {
        OUTCOME_SUCCEEDED
    }
}

/// `MaintenanceTask <name>: <each step's result>[; <why it failed>]`, in one line.
fn describe(task: &FinishedTask) -> String {
    let mut parts: Vec<String> = task
        .steps
        .iter()
        .map(|step| match &step.result {
            Ok(result) => describe_result(result),
            Err(why) => format!("the result of Job {} is not readable: {why}", step.job),
        })
        .collect();
    if task.state == TaskState::Failed {
        parts.push(match &task.failure {
            Some(why) => format!("failed: {why}"),
            None => "failed".to_owned(),
        });
    }
    if parts.is_empty() {
        parts.push("completed without running a step".to_owned());
    }
    format!("MaintenanceTask {}: {}", task.name, parts.join("; "))
}

fn describe_result(result: &JobResult) -> String {
    let what = match &result.report {
        Report::Defrag(report) => {
            let done: Vec<_> = report.members.iter().filter(|m| m.defragmented).collect();
            let reclaimed: i64 = done.iter().map(|m| (m.db_size_before - m.db_size_after).max(0)).sum();
            let compacted =
                report.compacted_revision.map(|r| format!("compacted to revision {r}, ")).unwrap_or_default();
            let unknown = report.members.iter().filter(|m| m.state() == MemberDefragState::Unknown).count();
            let unknown = if unknown > 0 {
                format!(", {unknown} unknown (a defrag call was in flight when the run stopped)")
            } else {
                String::new()
            };
            format!(
                "{compacted}defragmented {} of {} member(s){unknown}, {reclaimed} bytes reclaimed",
                done.len(),
                report.members.len()
            )
        }
        Report::Compact(report) if report.already_compacted => {
            format!("revision {} was compacted already", report.compacted_revision)
        }
        Report::Compact(report) => format!("compacted to revision {}", report.compacted_revision),
        Report::Snapshot(report) => format!(
            "snapshot of revision {} written to {}",
            report.revision.map_or_else(|| "unknown".to_owned(), |r| r.to_string()),
            report.path
        ),
        Report::SnapshotCopy(report) => format!(
            "copied {} snapshot(s) ({} bytes) from {} to {}, {} already there, {} failed",
            report.copied.len(),
            report.bytes_copied,
            report.from,
            report.to,
            report.already_there.len(),
            report.failed.len()
        ),
        Report::SnapshotProve(report) => format!(
            "snapshot {} {} (revision {})",
            report.object,
            if report.proven { "proven restorable" } else { "not proven restorable" },
            report.revision.map_or_else(|| "unknown".to_owned(), |r| r.to_string()),
        ),
        Report::RestoreMember(report) => {
            format!("member {} restored from {} into {}", report.member, report.object, report.data_dir)
        }
        Report::SnapshotDelta(report) => format!(
            "delta of revisions {}..={} written to {}",
            report.start_revision + 1,
            report.end_revision,
            report.path
        ),
        Report::SnapshotReplay(report) => format!(
            "{} and {} delta(s) replayed to revision {}",
            report.object,
            report.deltas.len(),
            report.to_revision
        ),
        Report::Cleanup(_) => "unexpected cleanup result".to_owned(),
    };
    let mut line = format!("{:?}: {what}", result.outcome).to_lowercase();
    if let Some(error) = &result.error {
        let kind = match error.kind {
            ErrorKind::BadInput => "bad input",
            ErrorKind::Retryable => "retryable",
        };
        line.push_str(&format!("; {kind} error: {}", error.message));
    } else if let Some(message) = &result.message {
        line.push_str(&format!("; {message}"));
    }
    line
}

/// Per-member defrag results and the compacted revision, into the status.
fn apply_result(status: &mut EtcdClusterStatus, result: &JobResult, now: Timestamp) {
    let finished_at = result
        .started_at
        .parse::<Timestamp>()
        .ok()
        .and_then(|t| t.checked_add(SignedDuration::from_millis(result.duration_ms as i64)).ok())
        .unwrap_or(now);
    let compacted = match &result.report {
        Report::Defrag(report) => {
            apply_defrag(status, report, finished_at);
            report.compacted_revision
        }
        Report::Compact(report) => Some(report.compacted_revision).filter(|r| *r > 0),
        Report::Cleanup(_)
        | Report::Snapshot(_)
        | Report::SnapshotCopy(_)
        | Report::SnapshotProve(_)
        | Report::RestoreMember(_)
        | Report::SnapshotDelta(_)
        | Report::SnapshotReplay(_) => None,
    };
    if let Some(revision) = compacted {
        status.last_compacted_revision = Some(status.last_compacted_revision.unwrap_or(0).max(revision));
        status.last_compaction_time = Some(finished_at.into());
    }
}

fn apply_defrag(status: &mut EtcdClusterStatus, report: &DefragReport, finished_at: Timestamp) {
    for done in report.members.iter().filter(|m| m.defragmented) {
        let reclaimed = (done.db_size_before - done.db_size_after).max(0);
        let entry = match status.members.iter_mut().find(|m| m.id == done.id) {
            Some(entry) => entry,
            None => {
                status.members.push(EtcdMemberStatus {
                    name: done.name.clone(),
                    id: done.id.clone(),
                    ..Default::default()
                });
                status.members.last_mut().expect("just pushed")
            }
        };
        entry.last_defrag_time = Some(finished_at.into());
        entry.last_bytes_reclaimed = Some(reclaimed);
        // What the next plan expects of this member: its size and how long it took.
        entry
            .defrag_history
            .push(WorkSample { bytes: Some(done.db_size_before), seconds: done.duration_ms as f64 / 1000.0 });
        let excess = entry.defrag_history.len().saturating_sub(MAX_SAMPLES);
        entry.defrag_history.drain(..excess);
    }
}

/// The task as [`record`] takes it: its final status and its finished step Jobs (those without
/// a step label are not its steps).
pub(crate) fn finished_task(
    task: &MaintenanceTask,
    status: &MaintenanceTaskStatus,
    jobs: &[JobObservation],
) -> FinishedTask {
    let mut steps: Vec<(usize, FinishedStep)> = jobs
        .iter()
        .filter_map(|job| {
            let step: usize = job.labels.get(keys::TASK_STEP_LABEL)?.parse().ok()?;
            let finished = match &job.state {
                JobState::Succeeded(finished) | JobState::Failed(finished) => finished,
                JobState::Running(_) => return None,
            };
            let result = finished.result.clone().map_err(|why| why.to_string());
            Some((step, FinishedStep { job: job.name.clone(), result }))
        })
        .collect();
    steps.sort_by_key(|(step, _)| *step);
    FinishedTask {
        name: task.name_any(),
        state: status.state.unwrap_or_default(),
        failure: status.last_errors.last().map(|e| e.description.clone()),
        steps: steps.into_iter().map(|(_, step)| step).collect(),
    }
}

/// Records a task that just became final (`status`) in its EtcdCluster's status, then publishes
/// the Event and counts the results; a completed Snapshot task becomes `lastSnapshot`. Tasks of
/// other targets, rejected tasks and tasks whose cluster is gone record nothing.
pub(crate) async fn record_task(
    ctx: &Context,
    task: &CheckedTask,
    status: &MaintenanceTaskStatus,
    jobs: &[JobObservation],
    now: Timestamp,
) -> Result<()> {
    if task.spec.target.kind != TargetKind::EtcdCluster {
        return Ok(());
    }
    if matches!(
        task.spec.task_type,
        TaskType::Snapshot | TaskType::Copy | TaskType::Verify | TaskType::Delta | TaskType::Restore
    ) {
        record_catalog(ctx, task, status, jobs, now).await?;
    }
    if task.spec.task_type == TaskType::Snapshot {
        return record_snapshot_task(ctx, task, status, now).await;
    }
    let ran = matches!(status.state, Some(TaskState::Completed | TaskState::Failed));
    if !is_maintenance(&task.spec.task_type) || !ran {
        return Ok(());
    }
    let finished = finished_task(task, status, jobs);
    let written = update_status(ctx, task, |previous| {
        record(previous, &finished, now).map(|recorded| (recorded.status.clone(), recorded))
    })
    .await?;
    if let Some((cluster, recorded)) = written {
        let namespace = task.namespace().unwrap_or_default();
        count(ctx, &namespace, &task.spec.target.name, &recorded.results);
        ctx.publish_events(&cluster.object_ref(&()), "Maintain", std::slice::from_ref(&recorded.event)).await;
    }
    Ok(())
}

/// What a finished Snapshot, Copy or Verify task wrote, copied or proved, into the cluster's
/// snapshot catalog ([`super::snapshot_record`]).
async fn record_catalog(
    ctx: &Context,
    task: &CheckedTask,
    status: &MaintenanceTaskStatus,
    jobs: &[JobObservation],
    now: Timestamp,
) -> Result<()> {
    let Ok(valid) = task.valid() else {
        return Ok(());
    };
    let finished = finished_task(task, status, jobs);
    let results: Vec<JobResult> =
        finished.steps.iter().filter_map(|s| s.result.as_ref().ok().cloned()).collect();
    let name = task.name_any();
    update_status(ctx, task, |previous| {
        super::snapshot_record::record_snapshot_work(previous, &name, &valid.work, &results, now)
            .map(|next| (next, ()))
    })
    .await?;
    Ok(())
}

/// A completed Snapshot task's file, as the cluster's `lastSnapshot`.
async fn record_snapshot_task(
    ctx: &Context,
    task: &MaintenanceTask,
    status: &MaintenanceTaskStatus,
    now: Timestamp,
) -> Result<()> {
    let (Some(TaskState::Completed), Some(snapshot)) = (status.state, &status.snapshot) else {
        return Ok(());
    };
    let name = task.name_any();
    let written = update_status(ctx, task, |previous| {
        record_snapshot(previous, &name, snapshot, now).map(|next| (next, ()))
    })
    .await?;
    if written.is_some() {
        ctx.metrics.job_finished(OperationKind::Snapshot.as_str(), "succeeded");
    }
    Ok(())
}

/// Reads the task's EtcdCluster, applies `change` to its status and writes the result with the
/// resourceVersion read, so that the etcd trigger's own writes and this one never undo each
/// other: a conflict reads again. `None` when the cluster is gone or `change` had nothing to do.
async fn update_status<T>(
    ctx: &Context,
    task: &MaintenanceTask,
    change: impl Fn(&EtcdClusterStatus) -> Option<(EtcdClusterStatus, T)>,
) -> Result<Option<(EtcdCluster, T)>> {
    let namespace = task.namespace().unwrap_or_default();
    let name = &task.spec.target.name;
    let api = Api::<EtcdCluster>::namespaced(ctx.client.clone(), &namespace);
    let attempts = ctx.config.status_write_attempts.max(1);
    let mut attempt = 0;
    loop {
        attempt += 1;
        let Some(cluster) =
            api.get_opt(name).await.map_err(Error::kube(format!("get EtcdCluster {namespace}/{name}")))?
        else {
            return Ok(None);
        };
        let previous = cluster.status.clone().unwrap_or_default();
        let Some((next, value)) = change(&previous) else {
            return Ok(None);
        };
        let mut patch = crate::conditions::status_patch(&previous, &next)
            .map_err(Error::json(format!("EtcdCluster {namespace}/{name} status")))?;
        patch["metadata"] = serde_json::json!({"resourceVersion": cluster.resource_version()});
        match api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch)).await {
            Ok(_) => return Ok(Some((cluster, value))),
            // Written by the trigger since it was read: read it again.
            Err(kube::Error::Api(status)) if status.code == 409 && attempt < attempts => {}
            Err(err) => {
                return Err(Error::kube(format!(
                    "record MaintenanceTask {} in the status of EtcdCluster {namespace}/{name}",
                    task.name_any()
                ))(err));
            }
        }
    }
}

fn count(ctx: &Context, namespace: &str, cluster: &str, results: &[JobResult]) {
    for result in results {
        ctx.metrics.family::<EtcdMetrics>().recorded(namespace, cluster, result);
        let outcome = serde_json::to_value(result.outcome)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        let operation = match result.report {
            Report::Compact(_) => OperationKind::Compact,
            _ => OperationKind::Defrag,
        };
        ctx.metrics.job_finished(operation.as_str(), &outcome);
    }
}
