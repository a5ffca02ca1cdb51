//! A Restore decided, pure: whether it may start ([`admission`]), its starting status
//! ([`start`]), and each step forward from what the last pass left ([`decide`]).

use groundskeeper_api::EtcdCluster;
use groundskeeper_api::restore::{RestorePhase, RestoreStatus, RestoreStep, resolve_restore};
use groundskeeper_api::validate::Restore;
use groundskeeper_protocol::Report;
use jiff::{SignedDuration, Timestamp};

use super::model::{Admission, ReadyPods, RestoreAction, RestoreFacts, StepJob};

/// Whether a Restore may start on `cluster` at `now`: a StatefulSet to restore, and a quorum
/// really lost for at least the time asked (unless overridden). A quorum that is there refuses
/// it; one lost more recently than that makes it wait.
///
/// `pods` is the StatefulSet's own word, a second witness: a majority of its pods Ready means the
/// members may well be fine and only the controller cannot reach them (a NetworkPolicy, say), so
/// the restore is refused whatever the EtcdCluster's status says.
pub(crate) fn admission(
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
pub(crate) fn start(
    cluster: &EtcdCluster,
    task: &str,
    task_uid: &str,
    restore: &Restore,
    claim_template: &str,
    now: Timestamp,
) -> Result<RestoreStatus, String> {
    let cluster_name = cluster.metadata.name.clone().unwrap_or_default();
    let sts = cluster.spec.stateful_set.as_ref().ok_or("no spec.statefulSet")?;
    let catalog = cluster.status.as_ref().map(|s| s.snapshots.as_slice()).unwrap_or_default();
    let to_revision = groundskeeper_api::restore::target_revision(restore, catalog, now)?;
    let store = restore.from.display();
    let resolved =
        resolve_restore(cluster, &store, restore.object.as_deref(), to_revision, &sts.name, claim_template)?;
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
        to_revision,
        replayed_from: to_revision.map(|_| resolved.object.clone()),
        ..RestoreStatus::default()
    };
    let doing = match to_revision {
        Some(revision) => format!(
            "replaying {} and the deltas after it to revision {revision} in a throwaway member, and saving \
             its snapshot",
            resolved.object
        ),
        None => "fetching the snapshot and proving it restores".to_owned(),
    };
    enter(&mut status, RestorePhase::CheckingSnapshot, now, &doing);
    Ok(status)
}

/// One step forward from `status` given the Jobs' states by step and `facts`.
pub(crate) fn decide(
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

/// What the first step proved, into the status: the snapshot's revision, keys and checksum as
/// the throwaway member found them; to a point in time, the snapshot the replay saved (restored
/// from then on) and the deltas replayed. `Err` when it did not prove what was asked.
fn take_proof(status: &mut RestoreStatus, report: Option<&Report>) -> Result<(), String> {
    match (report, status.to_revision) {
        (Some(Report::SnapshotReplay(replay)), Some(to_revision)) => {
            let saved = replay.saved.as_ref().filter(|_| replay.replayed && replay.revisions_exact);
            let Some(saved) = saved.filter(|_| replay.revision == Some(to_revision)) else {
                return Err(format!(
                    "the replay to revision {to_revision} reported no saved snapshot serving it (revision \
                     served: {:?})",
                    replay.revision
                ));
            };
            status.object = saved.object.clone();
            status.sha256 = Some(saved.sha256.clone());
            status.revision = Some(to_revision);
            status.keys = replay.keys;
            status.deltas = replay.deltas.clone();
            Ok(())
        }
        (Some(Report::SnapshotProve(proven)), None) if proven.proven => {
            status.revision = proven.revision.or(status.revision);
            status.keys = proven.keys.or(status.keys);
            status.sha256 = proven.sha256.clone().or(status.sha256.take());
            Ok(())
        }
        _ => Err("the proof of the snapshot reported no success".to_owned()),
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
            if let Err(why) = take_proof(status, report.as_deref()) {
                return Some(fail(status, now, why, "nothing of the cluster was touched".to_owned()));
            }
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
pub(crate) fn members_recovery(status: &RestoreStatus) -> String {
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
