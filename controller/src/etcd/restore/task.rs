//! One pass of a Restore task, and the task's status from the restore's.

use groundskeeper_api::EtcdCluster;
use groundskeeper_api::maintenance_task::{MaintenanceTaskStatus, NodeProgress, NodeState};
use groundskeeper_api::restore::{RestorePhase, RestoreStatus};
use groundskeeper_api::validate::Restore;
use jiff::Timestamp;

use super::super::job::create_step_job;
use super::super::snapshot_steps::SnapshotNaming;
use super::apply::scale;
use super::decide::{admission, decide, start};
use super::job::step_of_restore;
use super::model::{Admission, RESTORE_FAILED, RestoreAction, StepJob};
use super::observe::{claim_template, missing_claims, read_facts, read_stateful_set, ready_pods, step_job};

/// One pass of a Restore task: read the StatefulSet, its pods, the task's Jobs and (while waiting
/// for them) the members; [`decide`]; apply what it says; return the task's status.
pub(crate) async fn advance(
    ctx: &crate::runtime::context::Context,
    task: &groundskeeper_api::maintenance_task::MaintenanceTask,
    status: MaintenanceTaskStatus,
    cluster: &EtcdCluster,
    restore: &Restore,
    now: Timestamp,
) -> crate::runtime::error::Result<MaintenanceTaskStatus> {
    use crate::tasks::status::{complete, fail as fail_task};
    use crate::tasks::step_jobs::{failure_of, step_of, task_jobs, task_time};
    use kube::ResourceExt;

    let generation = task.metadata.generation;
    let namespace = task.namespace().unwrap_or_default();
    let Some(spec) = cluster.spec.stateful_set.clone() else {
        let why = format!("EtcdCluster {} has no spec.statefulSet", cluster.name_any());
        return Ok(fail_task(status, RESTORE_FAILED, &why, generation, now));
    };
    let stateful_set = read_stateful_set(ctx, &namespace, &spec.name).await?;
    let template = match claim_template(&spec, stateful_set.as_ref()) {
        Ok(template) => template,
        Err(why) => return Ok(fail_task(status, RESTORE_FAILED, &why, generation, now)),
    };
    let restore_status = match status.restore.clone() {
        Some(started) => started,
        None => {
            match start(cluster, &task.name_any(), &task.uid().unwrap_or_default(), restore, &template, now) {
                Ok(started) => started,
                Err(why) => return Ok(fail_task(status, RESTORE_FAILED, &why, generation, now)),
            }
        }
    };
    let jobs = task_jobs(ctx, task).await?;
    let states: Vec<(usize, StepJob)> = jobs
        .iter()
        .filter_map(|job| {
            let step = step_of(job)?;
            Some((step, step_job(&job.state, || failure_of(&jobs, step))))
        })
        .collect();
    let mut facts = read_facts(ctx, &namespace, cluster, stateful_set.as_ref(), restore_status.phase).await?;
    if matches!(restore_status.phase, RestorePhase::CheckingSnapshot | RestorePhase::ScalingDown) {
        facts.refused = match admission(restore, cluster, ready_pods(stateful_set.as_ref()), now) {
            Admission::Refused(why) => Some(why),
            Admission::Admitted | Admission::NotYet { .. } => None,
        };
    }
    // Looked at once the proof passed (the step reads them then), not on every pass of a proof
    // that may run for minutes.
    let proven = states.iter().any(|(step, job)| *step == 0 && matches!(job, StepJob::Succeeded(_)));
    if restore_status.phase == RestorePhase::CheckingSnapshot && proven {
        facts.missing_claims = missing_claims(ctx, &namespace, &restore_status).await?;
    }
    let (next, action) = decide(restore_status, &states, &facts, now);
    let naming = SnapshotNaming { cluster: cluster.name_any(), time: task_time(task, &status, now) };
    let data_dir = spec
        .data_dir
        .clone()
        .unwrap_or_else(|| groundskeeper_api::etcd_cluster::DEFAULT_STATEFUL_SET_DATA_DIR.to_owned());
    let status = with_restore(status, next.clone());
    match action {
        RestoreAction::CreateJobs(steps) => {
            for step in steps {
                if let Some(planned) = step_of_restore(
                    &next,
                    step,
                    &restore.from,
                    &restore.encoding,
                    &data_dir,
                    &naming,
                    cluster,
                ) {
                    create_step_job(ctx, task, cluster, &planned, step).await?;
                }
            }
            Ok(status)
        }
        RestoreAction::ScaleTo(replicas) => {
            scale(ctx, &namespace, &spec.name, replicas).await?;
            Ok(status)
        }
        RestoreAction::Wait => Ok(status),
        RestoreAction::Complete(line) => Ok(complete(status, &line, generation, now)),
        RestoreAction::Fail(why) => Ok(fail_task(status, RESTORE_FAILED, &why, generation, now)),
    }
}

/// The task's per-step entries (`status.nodes`) from the restore's steps.
pub(crate) fn restore_nodes(status: &RestoreStatus) -> Vec<NodeProgress> {
    status
        .steps
        .iter()
        .map(|step| NodeProgress {
            name: step.phase.to_string(),
            state: match step.state.as_str() {
                "Succeeded" => NodeState::Succeeded,
                "Failed" => NodeState::Failed,
                _ => NodeState::Running,
            },
            started_at: step.started_at.clone(),
            completed_at: step.completed_at.clone(),
            message: step.message.clone(),
            ..NodeProgress::default()
        })
        .collect()
}

/// `status` of the task with its restore and progress set.
pub(crate) fn with_restore(
    mut status: MaintenanceTaskStatus,
    restore: RestoreStatus,
) -> MaintenanceTaskStatus {
    let at = RestorePhase::ALL.iter().position(|p| *p == restore.phase).unwrap_or(0);
    status.progress = Some(format!("{at}/{} {}", RestorePhase::ALL.len() - 1, restore.phase));
    status.nodes = restore_nodes(&restore);
    status.restore = Some(restore);
    status
}
