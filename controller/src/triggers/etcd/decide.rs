//! The EtcdCluster controller's decision: a pure function of the spec, the observed members, the
//! cluster's maintenance Jobs, the last status and the time.
//!
//! Rules, in order:
//! 1. Results of Jobs that finished since the last status are recorded (each once: Jobs carry an
//!    attempt number, and the status remembers the newest one recorded).
//! 2. A Job in flight (any Job of this cluster that is not over, even one being deleted whose pod
//!    may still run) means no new Job: never two maintenance runs on one cluster. "In flight" is
//!    read from the Jobs that exist, so a controller restart cannot forget it.
//! 3. No Job while the spec is invalid, a member is unhealthy or unreachable, or the policy is
//!    disabled; nor within `checkInterval` of a failed or skipped run (backoff).
//! 4. Compaction before defragmentation: a due `periodic` compaction gets its own Job (the
//!    defragmentation follows at the next reconciliation, once the compaction has freed pages);
//!    in `revision` mode the defrag Job compacts first itself (`--compact-retain-revisions`).
//! 5. Defragmentation when the shared plan ([`plan_defrag`], the one `groundskeeper-job defrag`
//!    runs) finds a member over both thresholds and its preconditions hold.
//!
//! The Job's name is `<cluster>-maint-<attempt>` with the attempt one past the highest seen in
//! the status and in the existing Jobs, so two controllers deciding on the same state race for
//! the same name, and the loser gets AlreadyExists.

use groundskeeper_job::etcd::plan::{
    DefragPolicy, MemberObservation, PlanOptions, Refusal, fragmented_percent, needs_defrag, plan_defrag,
};
use groundskeeper_protocol::operation::{CompactRequest, CompactTo, DefragRequest, EtcdTarget, EtcdTlsFiles};
use groundskeeper_protocol::result::{DefragReport, ErrorKind, MemberDefragState};
use groundskeeper_protocol::{JobResult, Operation, Outcome, Report, keys};
use jiff::{SignedDuration, Timestamp};

use super::observe::{ObservedMember, cluster_revision};
use super::policy::{Compaction, Policy, SpecErrors};
use super::sampler::{self, LastCompaction};
use crate::api::etcd_cluster::{EtcdClusterStatus, EtcdMemberStatus};
use crate::conditions::Condition;
use crate::execution::spec::bounded_name;
use crate::execution::{JobObservation, JobState};

pub const PROGRESSING: &str = "DefragControllerProgressing";
pub const DEGRADED: &str = "DefragControllerDegraded";
pub const DISABLED: &str = "DefragControllerDisabled";

/// Label on this controller's Jobs: the attempt number the Job name ends with.
pub const ATTEMPT_LABEL: &str = "groundskeeper.dev/attempt";
/// Where the Job finds the client TLS Secret's files.
pub const TLS_MOUNT_DIR: &str = "/etc/groundskeeper/etcd-tls";
/// Shortest wait before the next reconciliation: the clock is never exact.
const MIN_REQUEUE: SignedDuration = SignedDuration::from_secs(1);
/// Requeue of a cluster whose spec is invalid: its next spec change wakes us anyway.
const INVALID_SPEC_REQUEUE: SignedDuration = SignedDuration::from_mins(10);

/// What the members looked like, if they were asked.
#[derive(Debug, Clone, PartialEq)]
pub enum Observed {
    /// Not asked: the spec is invalid.
    NotAttempted,
    /// The client TLS Secret could not be read, or the like: nobody could be asked.
    Failed(String),
    Members(Vec<ObservedMember>),
}

/// One maintenance Job of this cluster as the decision sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct MaintenanceJobView {
    pub name: String,
    pub attempt: u64,
    /// The Job is being deleted.
    pub deleting: bool,
    pub state: JobState,
}

impl MaintenanceJobView {
    /// The view of a Job listed with this controller's selector; `None` without an attempt label
    /// (not made by this controller: ignored rather than guessed at).
    /// The trigger's own Jobs, by their attempt label; and, while it runs, a MaintenanceTask's
    /// Job on the same cluster, as an in-flight Job of attempt 0: the trigger then creates no
    /// Job of its own beside it (the task's result is the task's, never recorded here).
    pub fn from_observation(job: &JobObservation) -> Option<Self> {
        if job.labels.contains_key(keys::TASK_LABEL) {
            return matches!(job.state, JobState::Running(_)).then(|| Self {
                name: job.name.clone(),
                attempt: 0,
                deleting: job.deleting,
                state: job.state.clone(),
            });
        }
        let attempt = job.labels.get(ATTEMPT_LABEL)?.parse().ok()?;
        Some(Self {
            name: job.name.clone(),
            attempt,
            deleting: job.deleting,
            state: job.state.clone(),
        })
    }

    fn in_flight(&self) -> bool {
        matches!(self.state, JobState::Running(_))
    }
}

pub struct Input<'a> {
    pub cluster: &'a str,
    pub generation: Option<i64>,
    pub policy: Result<&'a Policy, &'a SpecErrors>,
    /// `spec.policy.enabled` as written, for the Disabled condition of an invalid spec.
    pub enabled: bool,
    pub observed: &'a Observed,
    pub jobs: &'a [MaintenanceJobView],
    pub previous: &'a EtcdClusterStatus,
    pub now: Timestamp,
}

/// What to do now.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// The status to write (conditions apart: see `conditions`).
    pub status: EtcdClusterStatus,
    pub conditions: Vec<Condition>,
    pub create: Option<PlannedJob>,
    pub events: Vec<PlannedEvent>,
    /// Results recorded now, for the metrics.
    pub recorded: Vec<JobResult>,
    pub requeue_after: SignedDuration,
}

/// The Job to create.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedJob {
    pub name: String,
    pub attempt: u64,
    /// A defrag or a compaction, rendered into the Job's arguments.
    pub operation: Operation,
    /// Mount the client TLS Secret (its name) under [`TLS_MOUNT_DIR`].
    pub tls_secret: Option<String>,
    /// Why, for the Event and the Progressing condition.
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedEvent {
    pub warning: bool,
    /// CamelCase.
    pub reason: &'static str,
    pub note: String,
}

/// What the last maintenance run came to, kept in the status for the backoff.
pub const OUTCOME_SUCCEEDED: &str = "Succeeded";
pub const OUTCOME_SKIPPED: &str = "Skipped";
pub const OUTCOME_FAILED: &str = "Failed";

/// Whether the cluster is due for an observation and a decision now, or how long until it is.
///
/// Due on the check interval (or the next revision sample), and at once when the spec changed,
/// a Job finished since the last status, or the Job in flight is not the one the status names
/// (created, or deleted by someone). Reconciliations triggered by anything else, such as our own
/// status writes, do nothing: without this every status write would trigger another observation
/// and another write.
pub fn check_due(
    previous: &EtcdClusterStatus,
    generation: Option<i64>,
    jobs: &[MaintenanceJobView],
    now: Timestamp,
) -> Result<(), SignedDuration> {
    let spec_changed = previous.observed_generation != generation;
    let finished = jobs
        .iter()
        .any(|j| !j.in_flight() && j.attempt > previous.last_recorded_attempt);
    let in_flight = jobs.iter().filter(|j| j.in_flight()).max_by_key(|j| j.attempt);
    let jobs_changed = in_flight.map(|j| &j.name) != previous.active_job.as_ref();
    match &previous.next_check_time {
        Some(next) if !spec_changed && !finished && !jobs_changed && next.0 > now => {
            Err(next.0.duration_since(now))
        }
        _ => Ok(()),
    }
}

pub fn decide(input: &Input) -> Decision {
    let mut status = input.previous.clone();
    status.observed_generation = input.generation;
    let mut events = Vec::new();
    let recorded = record_finished_jobs(input, &mut status, &mut events);
    let in_flight = input
        .jobs
        .iter()
        .filter(|j| j.in_flight())
        .max_by_key(|j| j.attempt);
    status.active_job = in_flight.map(|j| j.name.clone());
    status.last_attempt = input
        .jobs
        .iter()
        .map(|j| j.attempt)
        .chain([status.last_attempt])
        .max()
        .unwrap_or(0);

    let policy = match input.policy {
        Ok(policy) => policy,
        Err(errors) => {
            status.next_check_time = Some((input.now + INVALID_SPEC_REQUEUE).into());
            return Decision {
                conditions: conditions(
                    input.enabled,
                    progressing(in_flight, None),
                    Some(("InvalidSpec", errors.to_string())),
                ),
                status,
                create: None,
                events,
                recorded,
                requeue_after: INVALID_SPEC_REQUEUE,
            };
        }
    };

    let members = match input.observed {
        Observed::Members(members) => members.as_slice(),
        _ => &[],
    };
    apply_observation(&mut status, members, input.now);
    let revision = cluster_revision(members);
    status.revision = revision.or(status.revision);
    update_samples(&mut status, policy, revision, input.now);

    let mut requeue = requeue_for(policy, &status, input.now);
    let unhealthy = unhealthy_message(input.observed);
    let mut create = None;
    let mut degraded = unhealthy.map(|m| ("MembersUnhealthy", m));
    if in_flight.is_none() && degraded.is_none() && policy.enabled {
        match backoff_until(policy, &status) {
            Some(until) if until > input.now => requeue = requeue.min(until.duration_since(input.now)),
            _ => match plan_job(input, policy, &status, members, revision) {
                Ok(planned) => create = planned,
                Err(refusal) => degraded = Some(refusal),
            },
        }
    }
    if degraded.is_none() && status.last_maintenance_outcome.as_deref() == Some(OUTCOME_FAILED) {
        degraded = Some((
            "MaintenanceFailed",
            status
                .last_maintenance_message
                .clone()
                .unwrap_or_else(|| "the last maintenance Job failed".to_owned()),
        ));
    }
    if let Some(job) = &create {
        status.last_attempt = job.attempt;
        status.active_job = Some(job.name.clone());
        events.push(PlannedEvent {
            warning: false,
            reason: "MaintenanceJobCreated",
            note: format!("Job {}: {}", job.name, job.reason),
        });
    }
    let requeue_after = requeue.max(MIN_REQUEUE);
    status.next_check_time = Some((input.now + requeue_after).into());
    Decision {
        conditions: conditions(policy.enabled, progressing(in_flight, create.as_ref()), degraded),
        status,
        create,
        events,
        recorded,
        requeue_after,
    }
}

fn progressing(
    in_flight: Option<&MaintenanceJobView>,
    created: Option<&PlannedJob>,
) -> (bool, &'static str, String) {
    match (created, in_flight) {
        (Some(job), _) => (true, "JobCreated", format!("Job {}: {}", job.name, job.reason)),
        (None, Some(job)) => (true, "JobRunning", format!("Job {} is running", job.name)),
        (None, None) => (false, "Idle", "no maintenance Job in flight".to_owned()),
    }
}

fn conditions(
    enabled: bool,
    progressing: (bool, &'static str, String),
    degraded: Option<(&'static str, String)>,
) -> Vec<Condition> {
    let (degraded_status, degraded_reason, degraded_message) = match degraded {
        Some((reason, message)) => (true, reason, message),
        None => (
            false,
            "AsExpected",
            "members healthy, maintenance as planned".to_owned(),
        ),
    };
    let disabled = if enabled {
        Condition::new(DISABLED, false, "Enabled", "automatic maintenance is enabled")
    } else {
        Condition::new(
            DISABLED,
            true,
            "DisabledBySpec",
            "spec.policy.enabled is false: members are observed, no Job is created",
        )
    };
    vec![
        Condition::new(PROGRESSING, progressing.0, progressing.1, progressing.2),
        Condition::new(DEGRADED, degraded_status, degraded_reason, degraded_message),
        disabled,
    ]
}

/// Records the results of Jobs finished since the last status, oldest first.
fn record_finished_jobs(
    input: &Input,
    status: &mut EtcdClusterStatus,
    events: &mut Vec<PlannedEvent>,
) -> Vec<JobResult> {
    let mut finished: Vec<&MaintenanceJobView> = input
        .jobs
        .iter()
        .filter(|j| !j.in_flight() && j.attempt > input.previous.last_recorded_attempt)
        .collect();
    finished.sort_by_key(|j| j.attempt);
    let mut recorded = Vec::new();
    for job in finished {
        status.last_recorded_attempt = job.attempt;
        status.last_maintenance_time = Some(input.now.into());
        let (outcome, message, result) = summarize(job);
        status.last_maintenance_outcome = Some(outcome.to_owned());
        status.last_maintenance_message = Some(message.clone());
        events.push(PlannedEvent {
            warning: outcome == OUTCOME_FAILED,
            reason: match outcome {
                OUTCOME_FAILED => "MaintenanceFailed",
                OUTCOME_SKIPPED => "MaintenanceSkipped",
                _ => "MaintenanceSucceeded",
            },
            note: message,
        });
        if let Some(result) = result {
            apply_result(status, &result, input.now);
            recorded.push(result);
        }
    }
    recorded
}

/// Outcome, a one-line summary, and the runner's result when it could be read.
fn summarize(job: &MaintenanceJobView) -> (&'static str, String, Option<JobResult>) {
    let (finished, job_failed) = match &job.state {
        JobState::Succeeded(f) => (f, false),
        JobState::Failed(f) => (f, true),
        JobState::Running(_) => unreachable!("only finished Jobs are summarized"),
    };
    let result = match &finished.result {
        Ok(result) => result.clone(),
        Err(err) if job_failed => {
            let why = [finished.reason.as_str(), finished.message.as_str()]
                .iter()
                .filter(|s| !s.is_empty())
                .copied()
                .collect::<Vec<_>>()
                .join(": ");
            return (
                OUTCOME_FAILED,
                format!("Job {} failed ({why}); {err}", job.name),
                None,
            );
        }
        Err(err) => {
            return (
                OUTCOME_SUCCEEDED,
                format!("Job {} succeeded; its result is not readable: {err}", job.name),
                None,
            );
        }
    };
    let outcome = match (job_failed, result.outcome) {
        (true, _) | (_, Outcome::Failed) => OUTCOME_FAILED,
        (false, Outcome::Skipped) => OUTCOME_SKIPPED,
        (false, Outcome::Succeeded) => OUTCOME_SUCCEEDED,
    };
    let message = format!("Job {}: {}", job.name, describe_result(&result));
    (outcome, message, Some(result))
}

fn describe_result(result: &JobResult) -> String {
    let what = match &result.report {
        Report::Defrag(report) => {
            let done: Vec<_> = report.members.iter().filter(|m| m.defragmented).collect();
            let reclaimed: i64 = done
                .iter()
                .map(|m| (m.db_size_before - m.db_size_after).max(0))
                .sum();
            let compacted = report
                .compacted_revision
                .map(|r| format!("compacted to revision {r}, "))
                .unwrap_or_default();
            let unknown = report
                .members
                .iter()
                .filter(|m| m.state() == MemberDefragState::Unknown)
                .count();
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
        .and_then(|t| {
            t.checked_add(SignedDuration::from_millis(result.duration_ms as i64))
                .ok()
        })
        .unwrap_or(now);
    let compacted = match &result.report {
        Report::Defrag(report) => {
            apply_defrag(status, report, finished_at);
            report.compacted_revision
        }
        Report::Compact(report) => Some(report.compacted_revision).filter(|r| *r > 0),
        Report::Cleanup(_) => None,
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
    }
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
    status.members = members
        .iter()
        .map(|observed| member_status(observed, &previous))
        .collect();
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
        db_size: status.map(|s| s.db_size),
        db_size_in_use: status.map(|s| s.db_size_in_use),
        fragmentation_percent: status.map(|s| (fragmented_percent(s) * 10.0).round() / 10.0),
        leader: member.id != 0 && leader_id == member.id,
        healthy: member.unhealthy_because().is_none(),
        learner: member.is_learner,
        message: member.unhealthy_because(),
        last_defrag_time: earlier.and_then(|p| p.last_defrag_time.clone()),
        last_bytes_reclaimed: earlier.and_then(|p| p.last_bytes_reclaimed),
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
            (!sick.is_empty()).then(|| {
                format!(
                    "{}; no maintenance until every member is healthy",
                    sick.join("; ")
                )
            })
        }
    }
}

fn update_samples(status: &mut EtcdClusterStatus, policy: &Policy, revision: Option<i64>, now: Timestamp) {
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

/// The Job to create now, `Ok(None)` when nothing is due, `Err` when something is due but a
/// precondition keeps it from being done (reported as Degraded).
fn plan_job(
    input: &Input,
    policy: &Policy,
    status: &EtcdClusterStatus,
    members: &[ObservedMember],
    revision: Option<i64>,
) -> Result<Option<PlannedJob>, (&'static str, String)> {
    let attempt = status.last_attempt + 1;
    let name = job_name(input.cluster, attempt);
    let last = LastCompaction {
        time: status.last_compaction_time.as_ref().map(|t| t.0),
        revision: status.last_compacted_revision,
    };
    let compact_to = match policy.compaction {
        Some(Compaction::Periodic { retention }) => {
            sampler::due(&status.revision_samples, input.now, retention, last)
        }
        _ => None,
    };
    if let Some(revision) = compact_to {
        let operation = compact_operation(policy, CompactTo::Revision(revision));
        let reason =
            format!("periodic compaction to revision {revision}, sampled at least the retention ago");
        return Ok(Some(planned(name, attempt, operation, policy, reason)));
    }
    let observations: Vec<MemberObservation> = members.iter().map(|m| m.member.clone()).collect();
    let over = over_thresholds(policy, &observations);
    let revision_compaction = match policy.compaction {
        Some(Compaction::Revision { keep }) => {
            revision_compaction_due(policy, status, revision, keep, input.now)
        }
        _ => None,
    };
    if !over.is_empty() {
        let options = PlanOptions {
            move_leader: policy.move_leader,
            allow_single_member: policy.allow_single_member,
            ..PlanOptions::default()
        };
        return match plan_defrag(&defrag_policy(policy), &options, &observations) {
            Ok(plan) if !plan.is_empty() => {
                let operation = defrag_operation(policy, revision_compaction);
                let reason = format!("defragmentation of {}", over.join(", "));
                Ok(Some(planned(name, attempt, operation, policy, reason)))
            }
            Ok(_) => Ok(None),
            Err(refusal) => Err(refusal_condition(&refusal, &over)),
        };
    }
    if let Some(keep) = revision_compaction {
        let operation = compact_operation(policy, CompactTo::RetainRevisions(keep));
        let reason = format!("compaction keeping the last {keep} revisions");
        return Ok(Some(planned(name, attempt, operation, policy, reason)));
    }
    Ok(None)
}

fn refusal_condition(refusal: &Refusal, over: &[String]) -> (&'static str, String) {
    let reason = match refusal {
        Refusal::TooFewVotingMembers { .. } => "TooFewMembers",
        Refusal::NoStableLeader { .. } => "NoStableLeader",
        Refusal::Unhealthy { .. } | Refusal::NoMembers => "MembersUnhealthy",
    };
    (
        reason,
        format!(
            "defragmentation of {} is due but not done: {refusal}",
            over.join(", ")
        ),
    )
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
    let recent = status
        .last_compaction_time
        .as_ref()
        .is_some_and(|t| now - policy.check_interval < t.0);
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

fn planned(name: String, attempt: u64, operation: Operation, policy: &Policy, reason: String) -> PlannedJob {
    PlannedJob {
        name,
        attempt,
        operation,
        tls_secret: policy.tls_secret.clone(),
        reason,
    }
}

/// The cluster's endpoints and, when it has a client TLS Secret, where the Job mounts its files.
fn etcd_target(policy: &Policy) -> EtcdTarget {
    use crate::api::etcd_cluster::{TLS_CA_KEY, TLS_CERT_KEY, TLS_KEY_KEY};
    let mounted = |key: &str| format!("{TLS_MOUNT_DIR}/{key}");
    EtcdTarget {
        endpoints: policy.endpoints.clone(),
        tls: policy.tls_secret.as_ref().map(|_| EtcdTlsFiles {
            ca: mounted(TLS_CA_KEY),
            cert: mounted(TLS_CERT_KEY),
            key: mounted(TLS_KEY_KEY),
        }),
    }
}

/// A compaction that waits until the freed pages are visible, so a defrag right after reclaims
/// them.
pub fn compact_operation(policy: &Policy, to: CompactTo) -> Operation {
    Operation::Compact(CompactRequest {
        etcd: etcd_target(policy),
        to,
        physical: true,
    })
}

/// A defrag with the cluster's thresholds, compacting to current − `retain` first when given.
fn defrag_operation(policy: &Policy, retain: Option<i64>) -> Operation {
    defrag_with(policy, &defrag_policy(policy), retain)
}

/// A defrag of the cluster with `thresholds`, compacting to current − `retain` first when given;
/// leadership and single-member settings from the cluster's policy.
pub fn defrag_with(policy: &Policy, thresholds: &DefragPolicy, retain: Option<i64>) -> Operation {
    Operation::Defrag(DefragRequest {
        etcd: etcd_target(policy),
        min_defrag_bytes: thresholds.min_defrag_bytes,
        max_fragmented_percent: thresholds.max_fragmented_percent,
        compact_retain_revisions: retain,
        no_move_leader: !policy.move_leader,
        allow_single_member: policy.allow_single_member,
    })
}

/// `<cluster>-maint-<attempt>`, shortened to a valid Job name when the cluster's name is long
/// (with a hash of the full name, so that two long names sharing a prefix do not collide).
pub fn job_name(cluster: &str, attempt: u64) -> String {
    bounded_name(cluster, &format!("-maint-{attempt}"))
}
