//! A step's result as per-member progress of its task (`status.nodes[]`), and in one line.

use groundskeeper_protocol::result::{CompactReport, DefragReport, MemberDefragState, SnapshotReport};
use groundskeeper_protocol::{JobResult, Outcome, Report};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use groundskeeper_api::maintenance_task::{NodeProgress, NodeState, SnapshotStatus};

use crate::jobs::{JobObservation, JobState};
use crate::tasks::step_jobs::step_of;

/// The members a finished defrag or compact step reports, as the task's per-member progress.
/// A compaction acts on the whole cluster, so it is one entry named after the cluster.
pub(crate) fn member_progress(
    result: &JobResult,
    job: &str,
    cluster: &str,
    finished_at: Option<Time>,
) -> Vec<NodeProgress> {
    match &result.report {
        Report::Defrag(report) => defrag_members(report, result.outcome, job, finished_at),
        Report::Compact(report) => vec![compaction(report, result, job, cluster, finished_at)],
        Report::Snapshot(report) => vec![snapshot_member(report, result, job, cluster, finished_at)],
        Report::SnapshotCopy(report) => {
            vec![step_entry(cluster, result, job, finished_at, copy_line(report))]
        }
        Report::SnapshotProve(report) => {
            vec![step_entry(cluster, result, job, finished_at, proof_line(report))]
        }
        Report::RestoreMember(report) => {
            vec![step_entry(&report.member, result, job, finished_at, restore_member_line(report))]
        }
        // No task runs these yet.
        Report::Cleanup(_) | Report::SnapshotDelta(_) | Report::SnapshotReplay(_) => Vec::new(),
    }
}

/// One entry for a step that works on the whole cluster (or one member), its line for people
/// unless the runner's own message says more.
fn step_entry(
    name: &str,
    result: &JobResult,
    job: &str,
    finished_at: Option<Time>,
    line: String,
) -> NodeProgress {
    NodeProgress {
        name: name.to_owned(),
        state: match result.outcome {
            Outcome::Failed => NodeState::Failed,
            Outcome::Skipped => NodeState::Skipped,
            Outcome::Succeeded => NodeState::Succeeded,
        },
        job: Some(job.to_owned()),
        completed_at: finished_at,
        message: Some(match &result.error {
            Some(error) => format!("{line}: {}", error.message),
            None => line,
        }),
        ..NodeProgress::default()
    }
}

/// A copy in one line: how many copied (and bytes), already there, failed.
pub fn copy_line(report: &groundskeeper_protocol::result::CopyReport) -> String {
    format!(
        "copied {} snapshot(s), {} ({} bytes), from {} to {}; {} already there, {} failed",
        report.copied.len(),
        mib(report.bytes_copied),
        report.bytes_copied,
        report.from,
        report.to,
        report.already_there.len(),
        report.failed.len()
    )
}

/// A proof in one line.
pub fn proof_line(report: &groundskeeper_protocol::result::ProveReport) -> String {
    let number = |n: Option<i64>| n.map_or_else(|| "?".to_owned(), |n| n.to_string());
    if report.proven {
        format!(
            "snapshot {} proven restorable: a throwaway member served revision {} with {} keys",
            report.object,
            number(report.revision),
            number(report.keys)
        )
    } else if report.object.is_empty() {
        "no snapshot was proven".to_owned()
    } else {
        format!(
            "snapshot {} NOT proven restorable (revision {} of {} expected, {} keys of {} expected)",
            report.object,
            number(report.revision),
            number(report.expected_revision),
            number(report.keys),
            number(report.expected_keys)
        )
    }
}

fn restore_member_line(report: &groundskeeper_protocol::result::RestoreMemberReport) -> String {
    let old =
        report.old_data_moved_to.as_ref().map(|to| format!(", old data kept at {to}")).unwrap_or_default();
    let again = if report.already_restored { " (done by an earlier run)" } else { "" };
    format!("restored from {} into {}{old}{again}", report.object, report.data_dir)
}

fn mib(bytes: u64) -> String {
    format!("{:.2} MiB", bytes as f64 / (1024.0 * 1024.0))
}

/// The member a snapshot was streamed from (the cluster, when the run never chose one).
fn snapshot_member(
    report: &SnapshotReport,
    result: &JobResult,
    job: &str,
    cluster: &str,
    finished_at: Option<Time>,
) -> NodeProgress {
    NodeProgress {
        name: report.member.clone().unwrap_or_else(|| cluster.to_owned()),
        state: match result.outcome {
            Outcome::Failed => NodeState::Failed,
            Outcome::Skipped => NodeState::Skipped,
            Outcome::Succeeded => NodeState::Succeeded,
        },
        job: Some(job.to_owned()),
        completed_at: finished_at,
        message: result.message.clone(),
        ..NodeProgress::default()
    }
}

/// A Snapshot task's file: where it goes (a claim or a bucket), and once its Job succeeded what
/// the runner reports.
pub fn snapshot_status(
    claim: Option<&str>,
    bucket: Option<&str>,
    file: &str,
    result: Option<&JobResult>,
) -> SnapshotStatus {
    let mut status = SnapshotStatus {
        persistent_volume_claim: if bucket.is_some() {
            String::new()
        } else {
            claim.unwrap_or_default().to_owned()
        },
        bucket: bucket.map(str::to_owned),
        file: file.to_owned(),
        ..SnapshotStatus::default()
    };
    let Some(JobResult { report: Report::Snapshot(report), outcome: Outcome::Succeeded, .. }) = result else {
        return status;
    };
    let bytes = i64::try_from(report.size_bytes).unwrap_or(i64::MAX);
    status.size_bytes = Some(bytes);
    status.size = Some(mib(report.size_bytes));
    status.revision = report.revision;
    status.keys = report.keys;
    status.member = report.member.clone();
    status.member_id = report.member_id.clone();
    status.from_leader = report.from_leader;
    status.sha256 = report.sha256.clone();
    status.encoding = report.stored.encoding.clone();
    status.key_id = report.stored.key_id.clone();
    status.content_bytes = report.stored.content_bytes.and_then(|b| i64::try_from(b).ok());
    status.duration_seconds = Some(report.stream_duration_ms as f64 / 1000.0);
    status.deleted = report.deleted.clone();
    status.deleted_count =
        (report.retain.is_some()).then(|| i64::from(report.deleted_count).max(report.deleted.len() as i64));
    status.deleted_deltas_count =
        (report.deleted_deltas_count > 0).then(|| i64::from(report.deleted_deltas_count));
    status.kept_bytes = report.kept_bytes.map(|b| i64::try_from(b).unwrap_or(i64::MAX));
    status.over_limit_bytes = report.over_limit_bytes.map(|b| i64::try_from(b).unwrap_or(i64::MAX));
    status.retention_errors = report.retention_errors.clone();
    status
}

/// One line for a Snapshot task's `lastOperation`: the file, its size, revision and checksum,
/// and what retention deleted.
pub fn snapshot_summary(snapshot: &SnapshotStatus) -> String {
    let mut line = format!(
        "snapshot of revision {}{} from {} written to {}/{}: {} ({} bytes) in {:.1}s, sha256 {}",
        snapshot.revision.map_or_else(|| "unknown".to_owned(), |r| r.to_string()),
        snapshot.keys.map(|k| format!(" ({k} keys)")).unwrap_or_default(),
        snapshot.member.as_deref().unwrap_or("unknown member"),
        snapshot.bucket.as_deref().unwrap_or(&snapshot.persistent_volume_claim),
        snapshot.file,
        snapshot.size.as_deref().unwrap_or("?"),
        snapshot.size_bytes.unwrap_or_default(),
        snapshot.duration_seconds.unwrap_or_default(),
        snapshot.sha256.as_deref().unwrap_or("unknown"),
    );
    // A few names in the line; all of them are in `status.snapshot.deleted`.
    const NAMED: usize = 5;
    let count = snapshot.deleted_count.unwrap_or(snapshot.deleted.len() as i64);
    if count > 0 {
        let named = &snapshot.deleted[..snapshot.deleted.len().min(NAMED)];
        let more = count - named.len() as i64;
        line.push_str(&format!(
            "; retention deleted {count} older snapshot(s): {}{}",
            named.join(", "),
            if more > 0 { format!(" and {more} more") } else { String::new() }
        ));
    }
    if let Some(deltas) = snapshot.deleted_deltas_count {
        line.push_str(&format!("; retention deleted {deltas} delta(s) no rule keeps"));
    }
    if let Some(bytes) = snapshot.kept_bytes {
        line.push_str(&format!("; {} ({bytes} bytes) of backups kept", mib(bytes.max(0) as u64)));
    }
    if let Some(bytes) = snapshot.over_limit_bytes {
        line.push_str(&format!(
            "; the newest full snapshot and its deltas alone weigh {} ({bytes} bytes), over \
             retention.maxTotalSize: raise it, or take full snapshots more often",
            mib(bytes.max(0) as u64)
        ));
    }
    if !snapshot.retention_errors.is_empty() {
        line.push_str(&format!(
            "; could not delete: {} (delete them by hand)",
            snapshot.retention_errors.join("; ")
        ));
    }
    line
}

fn defrag_members(
    report: &DefragReport,
    outcome: Outcome,
    job: &str,
    finished_at: Option<Time>,
) -> Vec<NodeProgress> {
    report
        .members
        .iter()
        .map(|member| {
            let state = node_state(member.state(), outcome);
            NodeProgress {
                name: member.name.clone(),
                state,
                job: Some(job.to_owned()),
                completed_at: finished_at.clone(),
                message: Some(with_leader_turn(report, &member.name, &member.reason)),
                bytes_reclaimed: member
                    .defragmented
                    .then(|| (member.db_size_before - member.db_size_after).max(0)),
                db_size_before: Some(member.db_size_before),
                db_size_after: Some(member.db_size_after),
                compacted_revision: report.compacted_revision,
                ..NodeProgress::default()
            }
        })
        .collect()
}

/// The leader's message says how its turn was decided (in place or leadership moved first, on
/// what prediction) and what it took.
fn with_leader_turn(report: &DefragReport, member: &str, reason: &str) -> String {
    match &report.leader_turn {
        Some(turn) if turn.member == member => {
            let actual = turn.actual_ms.map(|ms| format!("; its defrag took {:.1}s", ms as f64 / 1000.0));
            format!(
                "{reason}; leader's turn ({}): {}{}",
                turn.policy,
                turn.reason,
                actual.unwrap_or_default()
            )
        }
        _ => reason.to_owned(),
    }
}

/// A member's state in the task from what the runner says happened to it (read from the older
/// runners' wording where the result has no `state`).
fn node_state(member: MemberDefragState, outcome: Outcome) -> NodeState {
    match (member, outcome) {
        (MemberDefragState::Defragmented, _) => NodeState::Succeeded,
        // A defrag whose end the runner could not see counts as failed: the next run looks at
        // the member again, and the message says it may well be defragmented.
        (MemberDefragState::Stopped | MemberDefragState::Failed | MemberDefragState::Unknown, _) => {
            NodeState::Failed
        }
        (MemberDefragState::NotReached, Outcome::Failed) => NodeState::Pending,
        (
            MemberDefragState::NotReached
            | MemberDefragState::Skipped
            | MemberDefragState::Planned
            | MemberDefragState::Deferred,
            _,
        ) => NodeState::Skipped,
    }
}

fn compaction(
    report: &CompactReport,
    result: &JobResult,
    job: &str,
    cluster: &str,
    finished_at: Option<Time>,
) -> NodeProgress {
    let state = match result.outcome {
        Outcome::Failed => NodeState::Failed,
        Outcome::Skipped => NodeState::Skipped,
        Outcome::Succeeded => NodeState::Succeeded,
    };
    let message = if report.already_compacted {
        format!("revision {} was compacted already", report.compacted_revision)
    } else {
        format!("compacted to revision {} (current {})", report.compacted_revision, report.current_revision)
    };
    NodeProgress {
        name: cluster.to_owned(),
        state,
        job: Some(job.to_owned()),
        completed_at: finished_at,
        message: Some(result.message.clone().unwrap_or(message)),
        compacted_revision: (report.compacted_revision > 0).then_some(report.compacted_revision),
        ..NodeProgress::default()
    }
}

/// One line for `lastOperation` and the Completed condition: what the whole task did, with sizes
/// in MiB beside the exact bytes.
pub fn summary(nodes: &[NodeProgress]) -> String {
    let defragmented = nodes.iter().filter(|n| n.bytes_reclaimed.is_some()).count();
    let reclaimed: i64 = nodes.iter().filter_map(|n| n.bytes_reclaimed).sum();
    let compacted = nodes.iter().filter_map(|n| n.compacted_revision).max();
    let mut parts = Vec::new();
    if let Some(revision) = compacted {
        parts.push(format!("compacted to revision {revision}"));
    }
    if defragmented > 0 {
        parts.push(format!(
            "defragmented {defragmented} member(s), {} reclaimed ({reclaimed} bytes)",
            mebibytes(reclaimed)
        ));
    }
    if parts.is_empty() { "nothing needed doing".to_owned() } else { parts.join("; ") }
}

fn mebibytes(bytes: i64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

/// Per-member progress from the results of the finished step Jobs, later steps' entries
/// replacing earlier ones of the same member.
pub(crate) fn progress_from_jobs(jobs: &[JobObservation], cluster: &str) -> Vec<NodeProgress> {
    let mut ordered: Vec<&JobObservation> = jobs.iter().filter(|j| step_of(j).is_some()).collect();
    ordered.sort_by_key(|j| step_of(j));
    let mut nodes: Vec<NodeProgress> = Vec::new();
    for job in ordered {
        let finished = match &job.state {
            JobState::Succeeded(finished) | JobState::Failed(finished) => finished,
            JobState::Running(_) => continue,
        };
        let Ok(result) = &finished.result else { continue };
        for node in member_progress(result, &job.name, cluster, None) {
            match nodes.iter_mut().find(|n| n.name == node.name) {
                Some(existing) => *existing = node,
                None => nodes.push(node),
            }
        }
    }
    nodes
}

/// How many members the last defrag step left for the next maintenance window.
pub(crate) fn left_for_next_window(jobs: &[JobObservation]) -> usize {
    let last_defrag = jobs
        .iter()
        .filter(|j| step_of(j).is_some())
        .filter_map(|j| match &j.state {
            JobState::Succeeded(finished) | JobState::Failed(finished) => Some((step_of(j), finished)),
            JobState::Running(_) => None,
        })
        .filter_map(|(step, finished)| match &finished.result.as_ref().ok()?.report {
            Report::Defrag(report) => Some((step, report)),
            _ => None,
        })
        .max_by_key(|(step, _)| *step);
    last_defrag.map_or(0, |(_, report)| {
        report.members.iter().filter(|m| m.state() == MemberDefragState::Deferred).count()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use groundskeeper_protocol::result::MemberDefrag;

    fn member(name: &str, before: i64, after: i64, defragmented: bool, reason: &str) -> MemberDefrag {
        MemberDefrag {
            name: name.into(),
            id: "1".into(),
            db_size_before: before,
            db_size_after: after,
            defragmented,
            duration_ms: 10,
            was_leader: false,
            reason: reason.into(),
            state: None,
        }
    }

    fn defrag(outcome: Outcome, members: Vec<MemberDefrag>) -> JobResult {
        let report = DefragReport { compacted_revision: Some(42), members, ..DefragReport::default() };
        JobResult::new(Report::Defrag(report), outcome, "t".into(), 1)
    }

    #[test]
    fn defragmented_members_succeed_with_what_they_gave_back() {
        let result = defrag(
            Outcome::Succeeded,
            vec![
                member("m0", 9_000_000, 3_000_000, true, "over"),
                member("m1", 1_000_000, 1_000_000, false, "db 1000000 bytes: under the minimum"),
            ],
        );
        let nodes = member_progress(&result, "job-0", "main", None);
        let states: Vec<_> = nodes.iter().map(|n| (n.name.as_str(), n.state, n.bytes_reclaimed)).collect();
        assert_eq!(states, [("m0", NodeState::Succeeded, Some(6_000_000)), ("m1", NodeState::Skipped, None)]);
        assert!(nodes.iter().all(|n| n.compacted_revision == Some(42) && n.job.as_deref() == Some("job-0")));
        assert_eq!(
            summary(&nodes),
            "compacted to revision 42; defragmented 1 member(s), 5.7 MiB reclaimed (6000000 bytes)"
        );
    }

    #[test]
    fn the_leaders_message_says_how_its_turn_was_decided() {
        let mut result = defrag(
            Outcome::Succeeded,
            vec![
                member("m1", 9_000_000, 3_000_000, true, "over"),
                member("m0", 9_000_000, 3_000_000, true, "over"),
            ],
        );
        let Report::Defrag(report) = &mut result.report else { unreachable!() };
        report.leader_turn = Some(groundskeeper_protocol::result::LeaderTurn {
            member: "m0".into(),
            policy: "auto".into(),
            choice: groundskeeper_protocol::result::LeaderChoice::InPlace,
            reason: "predicted 1.2s (…) ≤ the 5.0s budget: in place, no transfer".into(),
            predicted_ms: Some(1200),
            budget_ms: 5000,
            rate_bytes_per_second: Some(7_500_000),
            rate_from: Some("this run's followers (1)".into()),
            actual_ms: Some(1400),
        });
        let nodes = member_progress(&result, "j", "main", None);
        assert_eq!(nodes[0].message.as_deref(), Some("over"));
        assert_eq!(
            nodes[1].message.as_deref(),
            Some(
                "over; leader's turn (auto): predicted 1.2s (…) ≤ the 5.0s budget: in place, no transfer; its defrag took 1.4s"
            )
        );
    }

    #[test]
    fn a_failed_run_fails_the_member_it_stopped_at_and_leaves_those_not_reached_pending() {
        let result = defrag(
            Outcome::Failed,
            vec![
                member("m0", 9, 3, true, "over"),
                member("m1", 9, 9, false, "stopped: member m2 became unhealthy"),
                member("m2", 9, 9, false, "not reached: the run stopped earlier"),
                member("m3", 9, 9, false, "db 9 bytes: under the minimum"),
            ],
        );
        let states: Vec<_> =
            member_progress(&result, "j", "main", None).into_iter().map(|n| n.state).collect();
        assert_eq!(states, [NodeState::Succeeded, NodeState::Failed, NodeState::Pending, NodeState::Skipped]);
    }

    #[test]
    fn a_compaction_is_one_entry_for_the_cluster() {
        let report = CompactReport {
            current_revision: 100,
            compacted_revision: 90,
            physical: true,
            already_compacted: false,
            held_back_from: None,
        };
        let result = JobResult::new(Report::Compact(report), Outcome::Succeeded, "t".into(), 1);
        let nodes = member_progress(&result, "j", "main", None);
        assert_eq!(nodes.len(), 1);
        assert_eq!((nodes[0].name.as_str(), nodes[0].state), ("main", NodeState::Succeeded));
        assert_eq!(nodes[0].compacted_revision, Some(90));
        assert_eq!(summary(&nodes), "compacted to revision 90");
        assert_eq!(summary(&[]), "nothing needed doing");
    }

    /// Runners that write `state` are read by it, whatever the reason's wording.
    #[test]
    fn member_states_written_by_the_runner_decide_the_node_state() {
        use MemberDefragState::*;
        for (state, outcome, want) in [
            (Defragmented, Outcome::Failed, NodeState::Succeeded),
            (Unknown, Outcome::Failed, NodeState::Failed),
            (Stopped, Outcome::Failed, NodeState::Failed),
            (Failed, Outcome::Failed, NodeState::Failed),
            (NotReached, Outcome::Failed, NodeState::Pending),
            (Skipped, Outcome::Failed, NodeState::Skipped),
            (Planned, Outcome::Succeeded, NodeState::Skipped),
        ] {
            let mut m = member("m0", 9, 9, state == Defragmented, "whatever the wording");
            m.state = Some(state);
            let nodes = member_progress(&defrag(outcome, vec![m]), "j", "main", None);
            assert_eq!(nodes[0].state, want, "{state:?}");
        }
    }
}
