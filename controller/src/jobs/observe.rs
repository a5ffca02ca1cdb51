//! Reading a Job and its pods back into what happened: a pure function of observed objects.
//!
//! The Job's conditions say whether it is over; the newest terminated pod's termination message
//! holds the runner's [`JobResult`]. Since Kubernetes 1.31 the Job controller first sets
//! `FailureTarget` / `SuccessCriteriaMet` and only later, once every pod has stopped,
//! `Failed` / `Complete`. The outcome is decided at the first of the two, so both count.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ContainerStateTerminated, Pod};

use groundskeeper_protocol::JobResult;

use super::spec::CONTAINER_NAME;

/// Label the Job controller puts on a Job's pods: the Job's name.
pub const JOB_NAME_LABEL: &str = "batch.kubernetes.io/job-name";
/// The same, as Kubernetes before 1.27 wrote it (still written alongside).
pub const LEGACY_JOB_NAME_LABEL: &str = "job-name";

/// Where a Job stands.
#[derive(Clone, Debug, PartialEq)]
pub enum JobState {
    /// Not over yet: pending, running, or between retries.
    Running(Attempts),
    /// Over, successfully.
    Succeeded(Finished),
    /// Over, unsuccessfully: retries used up, bad input, deadline exceeded.
    Failed(Finished),
}

/// Progress of a Job that is not over.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Attempts {
    /// Pods running or pending.
    pub active: i32,
    /// Pods that failed so far (each counts against `backoffLimit`).
    pub failed: i32,
}

/// A Job that is over.
#[derive(Clone, Debug, PartialEq)]
pub struct Finished {
    /// Reason of the deciding Job condition: `BackoffLimitExceeded`, `PodFailurePolicy`,
    /// `DeadlineExceeded`, `CompletionsReached`, … (empty when Kubernetes gave none).
    pub reason: String,
    /// Message of the deciding Job condition.
    pub message: String,
    /// The runner's result, from the newest terminated pod.
    pub result: Result<JobResult, ResultError>,
}

impl Finished {
    /// What a person should read about a failed Job: the runner's own words first, else the
    /// Job's condition.
    pub(crate) fn explanation(&self) -> String {
        match &self.result {
            Ok(result) => result
                .error
                .as_ref()
                .map(|e| e.message.clone())
                .or_else(|| result.message.clone())
                .unwrap_or_else(|| self.condition_text()),
            Err(err) => format!("{} ({err})", self.condition_text()),
        }
    }

    fn condition_text(&self) -> String {
        match (self.reason.is_empty(), self.message.is_empty()) {
            (true, true) => "the Job failed without saying why".to_owned(),
            (false, true) => self.reason.clone(),
            (true, false) => self.message.clone(),
            (false, false) => format!("{}: {}", self.reason, self.message),
        }
    }

    /// False when retrying cannot help: the runner said bad input, or the pod failure policy
    /// failed the Job on the bad-input exit code.
    pub fn retryable(&self) -> bool {
        use groundskeeper_protocol::result::ErrorKind;
        let bad_input =
            matches!(&self.result, Ok(r) if r.error.as_ref().is_some_and(|e| e.kind == ErrorKind::BadInput));
        !(bad_input || self.reason == "PodFailurePolicy")
    }
}

/// Why a finished Job's result cannot be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ResultError {
    #[error("Job {job}: no pod left to read the result from (deleted or garbage-collected)")]
    NoPod { job: String },
    #[error("Job {job}: no pod of it has terminated")]
    NotTerminated { job: String },
    #[error(
        "Job {job}: pod {pod}: container {CONTAINER_NAME} left no result \
         (exit code {exit_code}, reason {reason:?})"
    )]
    Empty { job: String, pod: String, exit_code: i32, reason: String },
    #[error("Job {job}: pod {pod}: termination message is not a groundskeeper result: {error}")]
    Malformed { job: String, pod: String, error: String },
}

/// A Job as the controllers see it: identity, what it was made for, where it stands.
#[derive(Clone, Debug, PartialEq)]
pub struct JobObservation {
    pub namespace: String,
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    /// The Job is being deleted: it neither counts as running nor should it be acted upon again.
    pub deleting: bool,
    /// uid of its controlling owner (the cluster, or the task it runs for).
    pub owner_uid: Option<String>,
    pub state: JobState,
}

/// Observes a Job together with its pods (any order; pods of other Jobs are ignored).
pub fn observe(job: &Job, pods: &[Pod]) -> JobObservation {
    JobObservation {
        namespace: job.metadata.namespace.clone().unwrap_or_default(),
        name: job.metadata.name.clone().unwrap_or_default(),
        labels: job.metadata.labels.clone().unwrap_or_default(),
        annotations: job.metadata.annotations.clone().unwrap_or_default(),
        deleting: job.metadata.deletion_timestamp.is_some(),
        owner_uid: job
            .metadata
            .owner_references
            .iter()
            .flatten()
            .find(|owner| owner.controller == Some(true))
            .map(|owner| owner.uid.clone()),
        state: observe_job(job, pods),
    }
}

/// Where `job` stands, its result read from the newest terminated pod among `pods`.
pub fn observe_job(job: &Job, pods: &[Pod]) -> JobState {
    let status = job.status.clone().unwrap_or_default();
    let conditions = status.conditions.unwrap_or_default();
    let is_true =
        |types: &[&str]| conditions.iter().find(|c| c.status == "True" && types.contains(&c.type_.as_str()));
    let finished = |condition: &k8s_openapi::api::batch::v1::JobCondition| Finished {
        reason: condition.reason.clone().unwrap_or_default(),
        message: condition.message.clone().unwrap_or_default(),
        result: read_result(job, pods),
    };
    if let Some(condition) = is_true(&["Failed", "FailureTarget"]) {
        return JobState::Failed(finished(condition));
    }
    if let Some(condition) = is_true(&["Complete", "SuccessCriteriaMet"]) {
        return JobState::Succeeded(finished(condition));
    }
    JobState::Running(Attempts { active: status.active.unwrap_or(0), failed: status.failed.unwrap_or(0) })
}

/// The result in the termination message of the newest pod of `job` whose container terminated.
pub fn read_result(job: &Job, pods: &[Pod]) -> Result<JobResult, ResultError> {
    let job_name = format!(
        "{}/{}",
        job.metadata.namespace.as_deref().unwrap_or_default(),
        job.metadata.name.as_deref().unwrap_or_default()
    );
    let own_pods: Vec<&Pod> = pods.iter().filter(|pod| belongs_to(pod, job)).collect();
    if own_pods.is_empty() {
        return Err(ResultError::NoPod { job: job_name });
    }
    let newest =
        own_pods.into_iter().filter_map(|pod| terminated_container(pod).map(|t| (pod, t))).max_by_key(
            |(pod, _)| (pod.metadata.creation_timestamp.as_ref().map(|t| t.0), pod.metadata.name.clone()),
        );
    let Some((pod, terminated)) = newest else {
        return Err(ResultError::NotTerminated { job: job_name });
    };
    let pod_name = pod.metadata.name.clone().unwrap_or_default();
    let message = terminated.message.as_deref().unwrap_or_default().trim();
    if message.is_empty() {
        return Err(ResultError::Empty {
            job: job_name,
            pod: pod_name,
            exit_code: terminated.exit_code,
            reason: terminated.reason.clone().unwrap_or_default(),
        });
    }
    JobResult::parse(message).map_err(|err| ResultError::Malformed {
        job: job_name,
        pod: pod_name,
        error: err.to_string(),
    })
}

/// A pod belongs to the Job unless its job-name label or its controller says otherwise: a Job
/// deleted and re-created under the same name may leave pods of the old one behind for a while.
fn belongs_to(pod: &Pod, job: &Job) -> bool {
    let labels = pod.metadata.labels.as_ref();
    let job_name = job.metadata.name.as_deref().unwrap_or_default();
    let named_for_job = [JOB_NAME_LABEL, LEGACY_JOB_NAME_LABEL]
        .iter()
        .filter_map(|key| labels.and_then(|l| l.get(*key)))
        .all(|value| value == job_name);
    if !named_for_job {
        return false;
    }
    let Some(job_uid) = job.metadata.uid.as_deref() else {
        return true;
    };
    let controller =
        pod.metadata.owner_references.iter().flatten().find(|owner| owner.controller == Some(true));
    controller.is_none_or(|owner| owner.uid == job_uid)
}

/// The terminated state of the runner's container (the only container, whatever its name).
fn terminated_container(pod: &Pod) -> Option<&ContainerStateTerminated> {
    let statuses = pod.status.as_ref()?.container_statuses.as_ref()?;
    let status = statuses.iter().find(|s| s.name == CONTAINER_NAME).or_else(|| statuses.first())?;
    status.state.as_ref()?.terminated.as_ref()
}
