//! A task's Jobs, whatever its target: found by labels and owner, named deterministically (so a
//! restarted controller finds the same Jobs and makes none twice), read back step by step.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::{Resource, ResourceExt};
use std::collections::BTreeMap;

use groundskeeper_api::maintenance_task::{MaintenanceTask, MaintenanceTaskStatus};
use groundskeeper_protocol::keys;

use crate::jobs::{self, JobObservation, JobState, bounded_name};
use crate::runtime::context::Context;
use crate::runtime::error::{Error, Result};

/// `lastErrors[].code` of a task whose step Job failed.
pub(crate) const JOB_FAILED: &str = "JobFailed";
/// `lastErrors[].code` of a task whose work this version cannot do on its target.
pub(crate) const NOT_SUPPORTED: &str = "NotSupported";

/// The Jobs of this task (by label, and owned by this very task: a task deleted and created
/// again under the same name does not inherit the old one's Jobs).
pub(crate) async fn task_jobs(ctx: &Context, task: &MaintenanceTask) -> Result<Vec<JobObservation>> {
    let namespace = task.namespace().unwrap_or_default();
    let selector = format!("{}={}", keys::TASK_LABEL, task_label(task));
    let jobs = jobs::observe_jobs(&ctx.client, &namespace, &selector).await?;
    let uid = task.metadata.uid.clone();
    let owned = |job: &JobObservation| uid.is_none() || job.owner_uid.is_none() || job.owner_uid == uid;
    Ok(jobs.into_iter().filter(|job| !job.deleting && owned(job)).collect())
}

/// The step (or node index) a task's Job runs, from its label.
pub(crate) fn step_of(job: &JobObservation) -> Option<usize> {
    job.labels.get(keys::TASK_STEP_LABEL)?.parse().ok()
}

/// The task's name as a label value (at most 63 characters).
pub(crate) fn task_label(task: &MaintenanceTask) -> String {
    bounded_name(&task.name_any(), "")
}

/// The labels tying a Job to its task and step.
pub(crate) fn step_labels(task: &MaintenanceTask, step: usize) -> BTreeMap<String, String> {
    BTreeMap::from([
        (keys::TASK_LABEL.to_owned(), task_label(task)),
        (keys::TASK_STEP_LABEL.to_owned(), step.to_string()),
    ])
}

/// `<task>-<step>`, shortened with a hash of the task's name when too long. Never a name another
/// controller owns ([`keys::RESERVED_JOB_NAME_PREFIX`]: scylla-operator's cleanup Jobs, in the
/// same namespace): a task named `cleanup-…` gets `gk-<hash of its name>-<task>-<step>` instead.
/// Its Jobs are found by their labels, not their names, so tasks that started under the plain
/// form keep theirs.
pub fn step_job_name(task: &str, step: usize) -> String {
    let suffix = format!("-{step}");
    let name = bounded_name(task, &suffix);
    if !name.starts_with(keys::RESERVED_JOB_NAME_PREFIX) {
        return name;
    }
    bounded_name(&format!("gk-{}-{task}", jobs::name_hash(task)), &suffix)
}

/// The owner reference a task's Jobs carry: deleting the task deletes them.
pub fn owner_of(task: &MaintenanceTask) -> Result<OwnerReference> {
    task.controller_owner_ref(&()).ok_or_else(|| Error::InvalidObject {
        object: format!("MaintenanceTask {}", task.name_any()),
        field: "metadata.uid".into(),
        message: "missing: the object was not read from the API server".into(),
    })
}

/// Why step `step` failed, from its Job's result, else its conditions.
pub(crate) fn failure_of(jobs: &[JobObservation], step: usize) -> String {
    let Some(job) = jobs.iter().find(|j| step_of(j) == Some(step)) else {
        return format!("step {} failed", step + 1);
    };
    let JobState::Failed(finished) = &job.state else {
        return format!("step {} failed", step + 1);
    };
    let why = match &finished.result {
        Ok(result) => result
            .error
            .as_ref()
            .map(|e| e.message.clone())
            .or_else(|| result.message.clone())
            .unwrap_or_else(|| finished.message.clone()),
        Err(unreadable) => format!("{}: {unreadable}", finished.reason),
    };
    format!("step {} (Job {}) failed: {why}; see `kubectl logs job/{}`", step + 1, job.name, job.name)
}

/// `{time}` of a task's work: when it started, as its status says (written before any Job
/// exists), else its creation. Both stay as they are across restarts.
pub(crate) fn task_time(task: &MaintenanceTask, status: &MaintenanceTaskStatus, now: Timestamp) -> Timestamp {
    status.started_at.as_ref().or(task.metadata.creation_timestamp.as_ref()).map_or(now, |t| t.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A task's Jobs never take a name of scylla-operator's cleanup Jobs, whatever the task is
    /// called, and two tasks never share one.
    #[test]
    fn step_job_names_stay_out_of_reserved_names() {
        assert_eq!(step_job_name("clean-now", 2), "clean-now-2");
        let tasks = [
            "cleanup-now",
            "cleanup-basic-us-east-1-a",
            "gk-cleanup-now",
            "cleanup",
            "cleanup-a-very-long-task-name-that-goes-on-and-on-and-on-until-it-is-cut",
        ];
        let mut names = std::collections::BTreeSet::new();
        for task in tasks {
            for step in [0, 1, 12] {
                let name = step_job_name(task, step);
                assert!(!name.starts_with(keys::RESERVED_JOB_NAME_PREFIX), "{task}/{step}: {name}");
                assert!(name.len() <= 63, "{name}");
                assert!(name.ends_with(&format!("-{step}")), "{name}");
                assert!(names.insert(name.clone()), "{task}/{step}: {name} taken twice");
            }
        }
        assert!(step_job_name("cleanup-now", 0).starts_with("gk-"));
        assert!(step_job_name("cleanup-now", 0).contains("-cleanup-now-0"));
    }
}
