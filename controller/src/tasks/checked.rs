//! A MaintenanceTask checked once: the task controller checks each task of a target when it
//! reads them ([`groundskeeper_api::validate::validate`]) and hands the verdict down with the
//! task, so that the queue, the plan, the start, each step and the record of its outcome read the
//! same verdict instead of checking the spec again. A [`CheckedTask`] can only be had by checking
//! (its fields are private), so whoever holds one holds the verdict on its spec.

use std::ops::Deref;

use groundskeeper_api::maintenance_task::{MaintenanceTask, MaintenanceTaskStatus};
use groundskeeper_api::validate::{FieldError, ValidTask, Work, describe_errors, validate};

/// A task with what the checks said of its spec.
#[derive(Debug, Clone)]
pub struct CheckedTask {
    task: MaintenanceTask,
    verdict: Result<ValidTask, Vec<FieldError>>,
}

impl CheckedTask {
    /// Checks `task`'s spec.
    pub fn check(task: MaintenanceTask) -> Self {
        let verdict = validate(&task);
        CheckedTask { task, verdict }
    }

    /// The task as read.
    pub fn task(&self) -> &MaintenanceTask {
        &self.task
    }

    /// The spec checked and defaulted, or what is wrong with it, field by field.
    pub fn valid(&self) -> Result<&ValidTask, &[FieldError]> {
        self.verdict.as_ref().map_err(Vec::as_slice)
    }

    /// What the task does, or what is wrong with its spec in one sentence
    /// ([`describe_errors`]).
    pub fn work(&self) -> Result<&Work, String> {
        self.valid().map(|valid| &valid.work).map_err(describe_errors)
    }

    /// The task with another status. The checks read the spec, the name and the namespace,
    /// never the status: the verdict holds.
    pub fn set_status(&mut self, status: Option<MaintenanceTaskStatus>) {
        self.task.status = status;
    }
}

impl Deref for CheckedTask {
    type Target = MaintenanceTask;

    fn deref(&self) -> &MaintenanceTask {
        &self.task
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(spec: serde_json::Value) -> MaintenanceTask {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "groundskeeper.dev/v1alpha1", "kind": "MaintenanceTask",
            "metadata": {"name": "t", "namespace": "etcd"}, "spec": spec
        }))
        .expect("a MaintenanceTask")
    }

    #[test]
    fn the_verdict_is_the_checks_and_outlives_a_status_change() {
        let good = task(
            serde_json::json!({"target": {"kind": "EtcdCluster", "name": "main"}, "type": "Defragment"}),
        );
        let mut checked = CheckedTask::check(good.clone());
        assert_eq!(checked.valid().ok(), validate(&good).ok().as_ref());
        checked.set_status(Some(MaintenanceTaskStatus::default()));
        assert_eq!(checked.valid().ok(), validate(&good).ok().as_ref());
        assert_eq!(checked.task().status, Some(MaintenanceTaskStatus::default()));

        let bad =
            task(serde_json::json!({"target": {"kind": "EtcdCluster", "name": "main"}, "type": "Defragment",
                                          "ttlSecondsAfterFinished": -1}));
        let checked = CheckedTask::check(bad.clone());
        let errors = validate(&bad).unwrap_err();
        assert_eq!(checked.valid().unwrap_err(), errors.as_slice());
        assert_eq!(checked.work().unwrap_err(), describe_errors(&errors));
        assert_eq!(kube::ResourceExt::name_any(&*checked), "t");
    }
}
