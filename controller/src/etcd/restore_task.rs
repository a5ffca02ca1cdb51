//! A Restore task: an etcd cluster run as a StatefulSet brought back from a snapshot after it lost
//! its quorum for good, in visible steps that survive a controller restart.
//!
//! ```text
//! CheckingSnapshot ─▶ ScalingDown ─▶ RestoringMembers ─▶ ScalingUp ─▶ WaitingForMembers ─▶ Done
//!  (Job 0: prove)     (replicas 0,    (Jobs 1..N: one     (replicas     (every member healthy,
//!                      pods gone)      per member claim)   as before)    revision ≥ snapshot's)
//! ```
//!
//! Where it stands is in the task's `status.restore` only, and each step's outcome is read again
//! from what it left (the Jobs, by their deterministic names; the StatefulSet; the members), so a
//! controller that restarts anywhere goes on from there. The replicas to scale back to are
//! recorded in the status one pass before the StatefulSet is scaled down, so that a restart
//! between the two never takes 0 for them. A failure stops at its step with the data intact
//! (each member's old data is moved aside by its Job, never deleted) and the status says how to
//! go on or back.
//!
//! [`admission`] and [`decide`] are pure; [`advance`] reads, applies and writes around them.

use groundskeeper_api::EtcdCluster;
use groundskeeper_api::maintenance_task::{MaintenanceTaskStatus, NodeProgress, NodeState};
use groundskeeper_api::restore::{RestoreMember, RestorePhase, RestoreStatus, RestoreStep, resolve_restore};
use groundskeeper_api::validate::Restore;
use groundskeeper_protocol::operation::RestoreMemberRequest;
use groundskeeper_protocol::result::ProveReport;
use groundskeeper_protocol::{Operation, Report};
use jiff::{SignedDuration, Timestamp};

use super::job::Step;
use super::snapshot_steps::{ProveTarget, SnapshotNaming, prove_step, scratch_for};
use crate::jobs::{ClaimVolume, JobState};

/// Where a restore Job mounts the member's data claim.
pub(crate) const MEMBER_VOLUME_DIR: &str = "/var/lib/etcd-member";

/// What a restore step's Job left, by step (0: the proof; 1..=N: the members in order).
#[derive(Debug, Clone, PartialEq)]
pub enum StepJob {
    Running,
    Succeeded(Option<Box<Report>>),
    /// Why, as the task's error says it.
    Failed(String),
}

/// What was read of the cluster for one pass.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RestoreFacts {
    /// The StatefulSet's `spec.replicas`; `None` when it is gone.
    pub replicas: Option<i32>,
    /// Its pods that still exist.
    pub pods: usize,
    /// Members healthy now and the highest revision they serve (read while waiting for them).
    pub healthy_members: usize,
    pub revision: Option<i64>,
    /// Why the members could not be asked, if so.
    pub members_unreachable: Option<String>,
    /// Why the restore may no longer start, as [`admission`] says it when asked again before
    /// anything is touched (the quorum came back while the snapshot was proven).
    pub refused: Option<String>,
    /// Members' data claims that do not exist (checked before anything is touched).
    pub missing_claims: Vec<String>,
}

/// The StatefulSet's pods as it reports them: how many are Ready of how many it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadyPods {
    pub ready: i32,
    pub replicas: i32,
}

/// What to do after a decision.
#[derive(Debug, Clone, PartialEq)]
pub enum RestoreAction {
    /// Create the Jobs of these steps.
    CreateJobs(Vec<usize>),
    /// Set the StatefulSet's `spec.replicas`.
    ScaleTo(i32),
    /// Nothing to do but look again (what is awaited is in the step's message).
    Wait,
    /// The cluster is back: complete the task with this line.
    Complete(String),
    /// Stop: fail the task with this error (the status says how to go on or back).
    Fail(String),
}

/// Whether a Restore may start now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    Admitted,
    /// The quorum is lost, but not for as long as the task asks yet: it waits (Pending) until
    /// `until`, and is turned away if the quorum comes back meanwhile.
    NotYet {
        reason: String,
        until: Timestamp,
    },
    /// Turned away for good (Rejected), saying what was seen.
    Refused(String),
}

/// Whether a Restore may start on `cluster` at `now`: a StatefulSet to restore, and a quorum
/// really lost for at least the time asked (unless overridden). A quorum that is there refuses
/// it; one lost more recently than that makes it wait.
///
/// `pods` is the StatefulSet's own word, a second witness: a majority of its pods Ready means the
/// members may well be fine and only the controller cannot reach them (a NetworkPolicy, say), so
/// the restore is refused whatever the EtcdCluster's status says.
pub fn admission(
    restore: &Restore,
    cluster: &EtcdCluster,
    pods: Option<ReadyPods>,
    now: Timestamp,
) -> Admission {
    let name = cluster.metadata.name.clone().unwrap_or_default();
    let Some(sts) = &cluster.spec.stateful_set else {
        return Admission::Refused(format!(
            "EtcdCluster {name} has no spec.statefulSet: a Restore scales and restores the StatefulSet \
             that runs the members; set spec.statefulSet.name (and dataVolumeClaimTemplate, dataDir) first"
        ));
    };
    if restore.override_quorum_check {
        return Admission::Admitted;
    }
    let verdict = quorum_lost_long_enough(cluster, restore.quorum_lost_for, now);
    if let Admission::Refused(_) = verdict {
        return verdict;
    }
    if let Some(pods) = pods
        && pods.replicas > 0
        && pods.ready * 2 > pods.replicas
    {
        return Admission::Refused(format!(
            "StatefulSet {} reports {} of {} pods Ready: a majority of the members may be serving, \
             whatever the controller could reach; a Restore replaces every member's data and is only for \
             a quorum lost for good. Check the members (and the controller's way to them); set \
             spec.config.restore.overrideQuorumCheck: true to restore anyway",
            sts.name, pods.ready, pods.replicas
        ));
    }
    verdict
}

fn quorum_lost_long_enough(cluster: &EtcdCluster, wanted: SignedDuration, now: Timestamp) -> Admission {
    let name = cluster.metadata.name.clone().unwrap_or_default();
    let status = cluster.status.clone().unwrap_or_default();
    let seen = format!(
        "{} of {} members healthy at {}",
        status.healthy_members.unwrap_or(0),
        status.member_count.unwrap_or(0),
        status
            .last_observed_time
            .as_ref()
            .map_or_else(|| "no observation yet".to_owned(), |t| t.0.to_string())
    );
    let Some(since) = status.quorum_lost_since.as_ref().map(|t| t.0) else {
        return Admission::Refused(format!(
            "EtcdCluster {name} has its quorum ({seen}): a Restore replaces every member's data and is \
             only for a quorum lost for good; set spec.config.restore.overrideQuorumCheck: true to \
             restore anyway"
        ));
    };
    let lost_for = now.duration_since(since);
    if lost_for < wanted {
        let until = since + wanted;
        return Admission::NotYet {
            reason: format!(
                "EtcdCluster {name} lost its quorum at {since} ({seen}), {}s ago: the restore waits until \
                 it has been lost for spec.config.restore.quorumLostForSeconds ({}s), at {until}, and is \
                 rejected if the quorum comes back meanwhile (overrideQuorumCheck: true starts it now)",
                lost_for.as_secs(),
                wanted.as_secs(),
            ),
            until,
        };
    }
    Admission::Admitted
}

/// The first 8 characters of a task's uid: a task created again under the same name (a runbook
/// applied twice) gets another token and old-data folder, never the first one's.
fn uid_part(uid: &str) -> String {
    uid.chars().filter(char::is_ascii_alphanumeric).take(8).collect()
}

/// The restore's starting status: the snapshot and members resolved, the phase first, the token
/// and the old-data suffix named after the task and its uid (the same after a restart).
pub fn start(
    cluster: &EtcdCluster,
    task: &str,
    task_uid: &str,
    store: &str,
    object: Option<&str>,
    claim_template: &str,
    now: Timestamp,
) -> Result<RestoreStatus, String> {
    let cluster_name = cluster.metadata.name.clone().unwrap_or_default();
    let sts = cluster.spec.stateful_set.as_ref().ok_or("no spec.statefulSet")?;
    let resolved = resolve_restore(cluster, store, object, &sts.name, claim_template)?;
    let record = resolved.record.as_ref();
    let mut status = RestoreStatus {
        phase: RestorePhase::CheckingSnapshot,
        store: resolved.store.clone(),
        object: resolved.object.clone(),
        sha256: record.and_then(|r| r.sha256.clone()),
        revision: record.and_then(|r| r.revision),
        keys: record.and_then(|r| r.keys),
        stateful_set: sts.name.clone(),
        original_replicas: None,
        members: resolved.members.clone(),
        cluster_token: format!("{cluster_name}-restored-{task}-{}", uid_part(task_uid)),
        old_data_suffix: format!(".pre-restore-{task}-{}", uid_part(task_uid)),
        last_revision_before_loss: resolved.last_revision_with_quorum,
        ..RestoreStatus::default()
    };
    enter(&mut status, RestorePhase::CheckingSnapshot, now, "fetching the snapshot and proving it restores");
    Ok(status)
}

/// One step forward from `status` given the Jobs' states by step and `facts`.
pub fn decide(
    mut status: RestoreStatus,
    jobs: &[(usize, StepJob)],
    facts: &RestoreFacts,
    now: Timestamp,
) -> (RestoreStatus, RestoreAction) {
    let job = |step: usize| jobs.iter().find(|(s, _)| *s == step).map(|(_, j)| j);
    loop {
        let action = match status.phase {
            RestorePhase::CheckingSnapshot => check_snapshot(&mut status, job(0), facts, now),
            RestorePhase::ScalingDown => scale_down(&mut status, facts, now),
            RestorePhase::RestoringMembers => restore_members(&mut status, &job, facts, now),
            RestorePhase::ScalingUp => scale_up(&mut status, facts, now),
            RestorePhase::WaitingForMembers => wait_for_members(&mut status, facts, now),
            RestorePhase::Done => Some(RestoreAction::Complete(done_line(&status))),
        };
        if let Some(action) = action {
            return (status, action);
        }
    }
}

/// `None`: the phase changed, decide again in the same pass.
fn check_snapshot(
    status: &mut RestoreStatus,
    proof: Option<&StepJob>,
    facts: &RestoreFacts,
    now: Timestamp,
) -> Option<RestoreAction> {
    match proof {
        None => Some(RestoreAction::CreateJobs(vec![0])),
        Some(StepJob::Running) => Some(RestoreAction::Wait),
        Some(StepJob::Failed(why)) => Some(fail(
            status,
            now,
            format!("the snapshot did not prove restorable: {why}"),
            "nothing of the cluster was touched. Name another snapshot (spec.config.restore.object) in a \
             new Restore task, or fix the store and create this one again"
                .to_owned(),
        )),
        Some(StepJob::Succeeded(report)) => {
            let proven = match report.as_deref() {
                Some(Report::SnapshotProve(report)) => report.clone(),
                _ => ProveReport::default(),
            };
            if !proven.proven {
                return Some(fail(
                    status,
                    now,
                    "the proof of the snapshot reported no success".to_owned(),
                    "nothing of the cluster was touched".to_owned(),
                ));
            }
            status.revision = proven.revision.or(status.revision);
            status.keys = proven.keys.or(status.keys);
            status.sha256 = proven.sha256.clone().or(status.sha256.take());
            let Some(replicas) = facts.replicas else {
                return Some(fail(
                    status,
                    now,
                    format!("StatefulSet {} does not exist", status.stateful_set),
                    "nothing of the cluster was touched; create the StatefulSet or correct spec.statefulSet"
                        .to_owned(),
                ));
            };
            if let Some(why) = &facts.refused {
                return Some(fail(
                    status,
                    now,
                    format!("the restore may no longer start: {why}"),
                    "nothing of the cluster was touched".to_owned(),
                ));
            }
            if !facts.missing_claims.is_empty() {
                return Some(fail(
                    status,
                    now,
                    format!("member claim(s) {} do not exist", facts.missing_claims.join(", ")),
                    "nothing of the cluster was touched; each member's data claim must exist (check \
                     spec.statefulSet.dataVolumeClaimTemplate), then create the Restore again"
                        .to_owned(),
                ));
            }
            // Recorded now, scaled down in the next pass: the status is written in between. At
            // least one pod per member: every member of the restored cluster must start.
            status.original_replicas = Some(replicas.max(status.members.len() as i32));
            let message = format!(
                "snapshot {} proven: revision {}, {} keys",
                status.object,
                number(status.revision),
                number(status.keys)
            );
            finish(status, now, &message);
            enter(
                status,
                RestorePhase::ScalingDown,
                now,
                &format!("scaling StatefulSet {} to 0", status.stateful_set),
            );
            Some(RestoreAction::Wait)
        }
    }
}

fn scale_down(status: &mut RestoreStatus, facts: &RestoreFacts, now: Timestamp) -> Option<RestoreAction> {
    match facts.replicas {
        None => Some(fail(
            status,
            now,
            format!("StatefulSet {} is gone", status.stateful_set),
            "no member's data was touched yet".to_owned(),
        )),
        Some(replicas) if replicas != 0 => match &facts.refused {
            // Asked again right before anything is touched.
            Some(why) => Some(fail(
                status,
                now,
                format!("the restore may no longer start: {why}"),
                format!(
                    "nothing of the cluster was touched (StatefulSet {} was not scaled)",
                    status.stateful_set
                ),
            )),
            None => Some(RestoreAction::ScaleTo(0)),
        },
        Some(_) if facts.pods > 0 => {
            set_message(
                status,
                format!("waiting for {} pod(s) of StatefulSet {} to stop", facts.pods, status.stateful_set),
            );
            Some(RestoreAction::Wait)
        }
        Some(_) => {
            finish(status, now, &format!("StatefulSet {} at 0 replicas, its pods gone", status.stateful_set));
            let members = status.members.len();
            enter(status, RestorePhase::RestoringMembers, now, &format!("restoring {members} member(s)"));
            None
        }
    }
}

fn restore_members<'a>(
    status: &mut RestoreStatus,
    job: &impl Fn(usize) -> Option<&'a StepJob>,
    facts: &RestoreFacts,
    now: Timestamp,
) -> Option<RestoreAction> {
    let steps: Vec<usize> = (1..=status.members.len()).collect();
    let missing: Vec<usize> = steps.iter().copied().filter(|s| job(*s).is_none()).collect();
    let running = steps.iter().filter(|s| matches!(job(**s), Some(StepJob::Running))).count();
    if !missing.is_empty() {
        // A member's data is moved aside only while no etcd runs on it: someone (GitOps, a
        // person) scaling the StatefulSet back up stops the restore before another Job starts.
        if facts.replicas != Some(0) || facts.pods > 0 {
            return Some(fail(
                status,
                now,
                format!(
                    "StatefulSet {} is running again ({} replicas, {} pods) while members are restored",
                    status.stateful_set,
                    number(facts.replicas.map(i64::from)),
                    facts.pods
                ),
                members_recovery(status),
            ));
        }
        // A claim store is mounted by every member Job: one at a time, so that a ReadWriteOnce
        // claim can follow each member's volume from node to node.
        if status.store.starts_with("pvc/") {
            return Some(match running {
                0 => RestoreAction::CreateJobs(vec![missing[0]]),
                _ => RestoreAction::Wait,
            });
        }
        return Some(RestoreAction::CreateJobs(missing));
    }
    let failed: Vec<String> = steps
        .iter()
        .filter_map(|s| match job(*s) {
            Some(StepJob::Failed(why)) => Some(format!("{}: {why}", status.members[s - 1].name)),
            _ => None,
        })
        .collect();
    if running > 0 {
        set_message(status, format!("{} of {} member(s) restored", steps.len() - running, steps.len()));
        return Some(RestoreAction::Wait);
    }
    if !failed.is_empty() {
        let recovery = members_recovery(status);
        return Some(fail(
            status,
            now,
            format!("restoring member(s) failed: {}", failed.join("; ")),
            recovery,
        ));
    }
    finish(status, now, &format!("{} member(s) restored from {}", steps.len(), status.object));
    let replicas = status.original_replicas.unwrap_or(status.members.len() as i32);
    enter(
        status,
        RestorePhase::ScalingUp,
        now,
        &format!("scaling StatefulSet {} to {replicas}", status.stateful_set),
    );
    None
}

/// How to go on or back once members' data may have been moved aside.
pub fn members_recovery(status: &RestoreStatus) -> String {
    format!(
        "StatefulSet {} stays at 0 replicas. Each member whose restore ran has its old data beside the \
         restored one, at <dataDir>{}. To go back: on each member's claim move that folder back to \
         <dataDir> (remove the restored one), then scale the StatefulSet to {}. To go on: fix the cause \
         and create a new Restore task (it redoes the members)",
        status.stateful_set,
        status.old_data_suffix,
        number(status.original_replicas.map(i64::from))
    )
}

fn scale_up(status: &mut RestoreStatus, facts: &RestoreFacts, now: Timestamp) -> Option<RestoreAction> {
    let replicas = status.original_replicas.unwrap_or(status.members.len() as i32);
    match facts.replicas {
        None => Some(fail(
            status,
            now,
            format!("StatefulSet {} is gone", status.stateful_set),
            format!("every member's data is restored; recreate the StatefulSet with {replicas} replicas"),
        )),
        Some(current) if current != replicas => Some(RestoreAction::ScaleTo(replicas)),
        Some(_) => {
            finish(status, now, &format!("StatefulSet {} at {replicas} replicas", status.stateful_set));
            let revision = number(status.revision);
            enter(
                status,
                RestorePhase::WaitingForMembers,
                now,
                &format!("waiting for every member to be healthy at revision {revision} or later"),
            );
            None
        }
    }
}

fn wait_for_members(
    status: &mut RestoreStatus,
    facts: &RestoreFacts,
    now: Timestamp,
) -> Option<RestoreAction> {
    let members = status.members.len();
    let at_revision = match (facts.revision, status.revision) {
        (Some(now_at), Some(snapshot)) => now_at >= snapshot,
        (Some(_), None) => true,
        (None, _) => false,
    };
    if facts.healthy_members >= members && at_revision {
        status.lost_revisions = match (status.last_revision_before_loss, status.revision) {
            (Some(last), Some(snapshot)) => Some((last - snapshot).max(0)),
            _ => None,
        };
        let message = format!("{members} member(s) healthy at revision {}", number(facts.revision));
        finish(status, now, &message);
        enter(status, RestorePhase::Done, now, "the cluster is back");
        finish(status, now, &done_line(status));
        return Some(RestoreAction::Complete(done_line(status)));
    }
    let why = facts.members_unreachable.as_ref().map(|w| format!(" ({w})")).unwrap_or_default();
    set_message(
        status,
        format!(
            "{} of {members} member(s) healthy, revision {}{why}",
            facts.healthy_members,
            number(facts.revision)
        ),
    );
    Some(RestoreAction::Wait)
}

fn done_line(status: &RestoreStatus) -> String {
    let lost = match (status.lost_revisions, status.last_revision_before_loss) {
        (Some(lost), Some(last)) => format!(
            "; {lost} revision(s) written after the snapshot are lost (revisions {} to {last}, the last \
             seen before the quorum was lost)",
            status.revision.map_or(0, |r| r + 1)
        ),
        _ => "; the revisions written after the snapshot are lost (the last one before the loss is unknown)"
            .to_owned(),
    };
    format!(
        "restored {} member(s) of StatefulSet {} from {} in {} at revision {}{lost}; old data kept at \
         <dataDir>{} on each member's claim (delete it once satisfied)",
        status.members.len(),
        status.stateful_set,
        status.object,
        status.store,
        number(status.revision),
        status.old_data_suffix
    )
}

fn number(n: Option<i64>) -> String {
    n.map_or_else(|| "unknown".to_owned(), |n| n.to_string())
}

fn enter(status: &mut RestoreStatus, phase: RestorePhase, now: Timestamp, message: &str) {
    status.phase = phase;
    status.steps.push(RestoreStep {
        phase,
        state: "Running".to_owned(),
        started_at: Some(now.into()),
        completed_at: None,
        message: Some(message.to_owned()),
    });
}

fn current(status: &mut RestoreStatus) -> Option<&mut RestoreStep> {
    let phase = status.phase;
    status.steps.iter_mut().rev().find(|s| s.phase == phase)
}

fn set_message(status: &mut RestoreStatus, message: String) {
    if let Some(step) = current(status) {
        step.message = Some(message);
    }
}

fn finish(status: &mut RestoreStatus, now: Timestamp, message: &str) {
    if let Some(step) = current(status) {
        step.state = "Succeeded".to_owned();
        step.completed_at = Some(now.into());
        step.message = Some(message.to_owned());
    }
}

fn fail(status: &mut RestoreStatus, now: Timestamp, why: String, recovery: String) -> RestoreAction {
    if let Some(step) = current(status) {
        step.state = "Failed".to_owned();
        step.completed_at = Some(now.into());
        step.message = Some(why.clone());
    }
    status.recovery = Some(recovery.clone());
    RestoreAction::Fail(format!("{} at step {}: {why}. {recovery}", "restore stopped", status.phase))
}

/// The Job of `step`: 0 proves the snapshot, 1..=N restores member N−1 on its claim.
pub fn step_of_restore(
    status: &RestoreStatus,
    step: usize,
    store: &groundskeeper_api::snapshot_store::Store,
    data_dir: &str,
    naming: &SnapshotNaming,
    cluster: &EtcdCluster,
) -> Option<Step> {
    let record = cluster.status.as_ref().and_then(|s| {
        s.snapshots.iter().find(|r| r.store == status.store && r.object == status.object).cloned()
    });
    let proof = prove_step(
        store,
        groundskeeper_api::maintenance_task::DEFAULT_SNAPSHOT_FILE_NAME,
        naming,
        &ProveTarget { object: Some(status.object.clone()), record: record.clone() },
        cluster,
    );
    if step == 0 {
        return Some(proof);
    }
    let member = status.members.get(step - 1)?;
    let Operation::SnapshotProve(request) = &proof.operation else {
        return None;
    };
    Some(Step {
        operation: Operation::RestoreMember(RestoreMemberRequest {
            from: request.from.clone(),
            object: status.object.clone(),
            expect_sha256: status.sha256.clone(),
            data_dir: format!("{MEMBER_VOLUME_DIR}/{}", data_dir.trim_matches('/')),
            name: member.name.clone(),
            initial_cluster: initial_cluster(&status.members),
            initial_advertise_peer_urls: member.peer_url.clone(),
            initial_cluster_token: status.cluster_token.clone(),
            keep_old_suffix: status.old_data_suffix.clone(),
            scratch_dir: super::snapshot_steps::SCRATCH_MOUNT_DIR.to_owned(),
        }),
        claims: proof
            .claims
            .iter()
            .cloned()
            .chain([ClaimVolume {
                claim_name: member.claim.clone(),
                mount_path: MEMBER_VOLUME_DIR.to_owned(),
            }])
            .collect(),
        secret_folders: proof.secret_folders.clone(),
        scratch: Some(scratch_for(cluster, record.as_ref())),
    })
}

fn initial_cluster(members: &[RestoreMember]) -> String {
    members.iter().map(|m| format!("{}={}", m.name, m.peer_url)).collect::<Vec<_>>().join(",")
}

/// What a Job's state says for [`decide`].
pub fn step_job(state: &JobState, failure: impl FnOnce() -> String) -> StepJob {
    match state {
        JobState::Running(_) => StepJob::Running,
        JobState::Succeeded(finished) => {
            StepJob::Succeeded(finished.result.as_ref().ok().map(|r| Box::new(r.report.clone())))
        }
        JobState::Failed(_) => StepJob::Failed(failure()),
    }
}

/// The task's per-step entries (`status.nodes`) from the restore's steps.
pub fn restore_nodes(status: &RestoreStatus) -> Vec<NodeProgress> {
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
pub fn with_restore(mut status: MaintenanceTaskStatus, restore: RestoreStatus) -> MaintenanceTaskStatus {
    let at = RestorePhase::ALL.iter().position(|p| *p == restore.phase).unwrap_or(0);
    status.progress = Some(format!("{at}/{} {}", RestorePhase::ALL.len() - 1, restore.phase));
    status.nodes = restore_nodes(&restore);
    status.restore = Some(restore);
    status
}

#[cfg(test)]
mod tests;

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
        None => match start(
            cluster,
            &task.name_any(),
            &task.uid().unwrap_or_default(),
            &restore.from.display(),
            restore.object.as_deref(),
            &template,
            now,
        ) {
            Ok(started) => started,
            Err(why) => return Ok(fail_task(status, RESTORE_FAILED, &why, generation, now)),
        },
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
                if let Some(planned) =
                    step_of_restore(&next, step, &restore.from, &data_dir, &naming, cluster)
                {
                    super::job::create_step_job(ctx, task, cluster, &planned, step).await?;
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

/// The task's error code when a restore stops at a step.
pub(crate) const RESTORE_FAILED: &str = "RestoreFailed";

/// The StatefulSet's Ready pods of its replicas, as its status reports them.
pub(crate) fn ready_pods(
    stateful_set: Option<&k8s_openapi::api::apps::v1::StatefulSet>,
) -> Option<ReadyPods> {
    let set = stateful_set?;
    let replicas = set.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    let ready = set.status.as_ref().and_then(|s| s.ready_replicas).unwrap_or(0);
    Some(ReadyPods { ready, replicas })
}

/// The members' data claims that do not exist.
async fn missing_claims(
    ctx: &crate::runtime::context::Context,
    namespace: &str,
    status: &RestoreStatus,
) -> crate::runtime::error::Result<Vec<String>> {
    let api = kube::Api::<k8s_openapi::api::core::v1::PersistentVolumeClaim>::namespaced(
        ctx.client.clone(),
        namespace,
    );
    let mut missing = Vec::new();
    for member in &status.members {
        let found = api.get_opt(&member.claim).await.map_err(crate::runtime::error::Error::kube(format!(
            "get PersistentVolumeClaim {namespace}/{}",
            member.claim
        )))?;
        if found.is_none() {
            missing.push(member.claim.clone());
        }
    }
    Ok(missing)
}

pub(crate) async fn read_stateful_set(
    ctx: &crate::runtime::context::Context,
    namespace: &str,
    name: &str,
) -> crate::runtime::error::Result<Option<k8s_openapi::api::apps::v1::StatefulSet>> {
    kube::Api::<k8s_openapi::api::apps::v1::StatefulSet>::namespaced(ctx.client.clone(), namespace)
        .get_opt(name)
        .await
        .map_err(crate::runtime::error::Error::kube(format!("get StatefulSet {namespace}/{name}")))
}

/// The data claims' template: the spec's, else the StatefulSet's only one.
pub(crate) fn claim_template(
    spec: &groundskeeper_api::etcd_cluster::EtcdStatefulSet,
    stateful_set: Option<&k8s_openapi::api::apps::v1::StatefulSet>,
) -> Result<String, String> {
    if let Some(template) = &spec.data_volume_claim_template {
        return Ok(template.clone());
    }
    let templates: Vec<String> = stateful_set
        .and_then(|s| s.spec.as_ref())
        .and_then(|s| s.volume_claim_templates.as_ref())
        .map(|t| t.iter().filter_map(|c| c.metadata.name.clone()).collect())
        .unwrap_or_default();
    match templates.as_slice() {
        [only] => Ok(only.clone()),
        [] => Err(format!(
            "StatefulSet {} has no volumeClaimTemplates (or is gone): its members' data claims cannot be \
             named; set spec.statefulSet.dataVolumeClaimTemplate",
            spec.name
        )),
        many => Err(format!(
            "StatefulSet {} has several volumeClaimTemplates ({}): name the members' data one in \
             spec.statefulSet.dataVolumeClaimTemplate",
            spec.name,
            many.join(", ")
        )),
    }
}

async fn read_facts(
    ctx: &crate::runtime::context::Context,
    namespace: &str,
    cluster: &EtcdCluster,
    stateful_set: Option<&k8s_openapi::api::apps::v1::StatefulSet>,
    phase: RestorePhase,
) -> crate::runtime::error::Result<RestoreFacts> {
    let mut facts = RestoreFacts {
        replicas: stateful_set.map(|s| s.spec.as_ref().and_then(|spec| spec.replicas).unwrap_or(1)),
        ..RestoreFacts::default()
    };
    if let Some(stateful_set) = stateful_set {
        facts.pods = count_pods(ctx, namespace, stateful_set).await?;
    }
    if phase == RestorePhase::WaitingForMembers {
        let policy = match super::policy::Policy::from_spec(&cluster.spec) {
            Ok(policy) => policy,
            Err(errors) => {
                facts.members_unreachable = Some(format!("the EtcdCluster's spec is invalid: {errors}"));
                return Ok(facts);
            }
        };
        match super::observe::observe_members(&ctx.client, namespace, &policy).await {
            super::model::Observed::Members(members) => {
                facts.healthy_members = members
                    .iter()
                    .filter(|m| m.member.id != 0 && m.member.unhealthy_because().is_none())
                    .count();
                facts.revision = super::observe::cluster_revision(&members);
            }
            super::model::Observed::Failed(why) => facts.members_unreachable = Some(why),
            super::model::Observed::NotAttempted => {}
        }
    }
    Ok(facts)
}

/// The StatefulSet's pods that still exist (by its selector).
async fn count_pods(
    ctx: &crate::runtime::context::Context,
    namespace: &str,
    stateful_set: &k8s_openapi::api::apps::v1::StatefulSet,
) -> crate::runtime::error::Result<usize> {
    let labels = stateful_set.spec.as_ref().and_then(|s| s.selector.match_labels.clone()).unwrap_or_default();
    let selector = labels.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",");
    let pods = kube::Api::<k8s_openapi::api::core::v1::Pod>::namespaced(ctx.client.clone(), namespace)
        .list(&kube::api::ListParams::default().labels(&selector))
        .await
        .map_err(crate::runtime::error::Error::kube(format!("list pods in {namespace} with {selector}")))?;
    Ok(pods.items.len())
}

async fn scale(
    ctx: &crate::runtime::context::Context,
    namespace: &str,
    name: &str,
    replicas: i32,
) -> crate::runtime::error::Result<()> {
    let patch = serde_json::json!({"spec": {"replicas": replicas}});
    kube::Api::<k8s_openapi::api::apps::v1::StatefulSet>::namespaced(ctx.client.clone(), namespace)
        .patch(name, &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&patch))
        .await
        .map_err(crate::runtime::error::Error::kube(format!(
            "scale StatefulSet {namespace}/{name} to {replicas}"
        )))?;
    tracing::info!(statefulset = %name, replicas, "scaled a StatefulSet for a restore");
    Ok(())
}
