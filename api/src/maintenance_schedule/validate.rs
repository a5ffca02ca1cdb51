//! A MaintenanceSchedule's spec, checked: its expression and time zone, its limits, and the task
//! template as a MaintenanceTask's spec is checked. Every mistake names the schedule and the
//! field; all of them are reported at once.

use jiff::SignedDuration;
use kube::ResourceExt;

use super::calendar::{Calendar, Calendars, time_zone_named};
use super::{ConcurrencyPolicy, MaintenanceSchedule};
use crate::maintenance_task::{MaintenanceTask, MaintenanceTaskSpec};
use crate::validate::{FieldError, validate};

/// A schedule whose spec passed every check.
#[derive(Debug, Clone)]
pub struct ValidSchedule {
    pub calendar: Calendar,
    pub suspend: bool,
    pub concurrency_policy: ConcurrencyPolicy,
    pub starting_deadline: Option<SignedDuration>,
    pub successful_history: usize,
    pub failed_history: usize,
    pub task_spec: MaintenanceTaskSpec,
}

pub fn schedule_display_name(schedule: &MaintenanceSchedule) -> String {
    match schedule.namespace() {
        Some(namespace) => format!("MaintenanceSchedule {namespace}/{}", schedule.name_any()),
        None => format!("MaintenanceSchedule {}", schedule.name_any()),
    }
}

/// The schedule's spec checked, or every mistake in it.
pub fn validate_schedule(schedule: &MaintenanceSchedule) -> Result<ValidSchedule, Vec<FieldError>> {
    validate_schedule_with(schedule, &Calendars::default())
}

/// [`validate_schedule`], its calendar taken from (or added to) `calendars`.
pub fn validate_schedule_with(
    schedule: &MaintenanceSchedule,
    calendars: &Calendars,
) -> Result<ValidSchedule, Vec<FieldError>> {
    let object = schedule_display_name(schedule);
    let spec = &schedule.spec;
    let mut errors = Vec::new();
    let mut error = |field: &str, message: String| {
        errors.push(FieldError { object: object.clone(), field: field.to_owned(), message })
    };
    // The zone on its own first, so that a wrong expression and a wrong zone are both told.
    let zone_known = match time_zone_named(&spec.time_zone) {
        Ok(_) => true,
        Err(err) => {
            error("spec.timeZone", err.to_string());
            false
        }
    };
    let zone = if zone_known { spec.time_zone.as_str() } else { "UTC" };
    let calendar = match calendars.get(&spec.schedule, zone) {
        Ok(calendar) => zone_known.then_some(calendar),
        Err(err) => {
            error("spec.schedule", err.to_string());
            None
        }
    };
    if let Some(seconds) = spec.starting_deadline_seconds
        && seconds < 1
    {
        error(
            "spec.startingDeadlineSeconds",
            format!(
                "{seconds} is not positive: give the seconds after a run's time it may still start, or leave it out"
            ),
        );
    }
    for (field, limit) in [
        ("spec.successfulTasksHistoryLimit", spec.successful_tasks_history_limit),
        ("spec.failedTasksHistoryLimit", spec.failed_tasks_history_limit),
    ] {
        if !(0..=100).contains(&limit) {
            error(field, format!("{limit}: keep 0 to 100 tasks"));
        }
    }
    // A restore replaces every member's data: a person confirms one, a calendar never does.
    if spec.task_template.spec.task_type == crate::maintenance_task::TaskType::Restore {
        error(
            "spec.taskTemplate.spec.type",
            "Restore cannot be scheduled: it replaces every member's data and is confirmed by a person \
             for a cluster that lost its quorum; create a Restore MaintenanceTask when one is needed \
             (schedule Verify to prove the snapshots restore)"
                .to_owned(),
        );
    }
    // The template as the task it makes: its mistakes under the template's path.
    let task = MaintenanceTask::new(&format!("{}-run", schedule.name_any()), spec.task_template.spec.clone());
    if let Err(task_errors) = validate(&task) {
        for task_error in task_errors {
            let field = task_error.field.replacen("spec.", "spec.taskTemplate.spec.", 1);
            error(&field, task_error.message);
        }
    }
    match calendar {
        Some(calendar) if errors.is_empty() => Ok(ValidSchedule {
            calendar,
            suspend: spec.suspend,
            concurrency_policy: spec.concurrency_policy,
            starting_deadline: spec.starting_deadline_seconds.map(SignedDuration::from_secs),
            successful_history: spec.successful_tasks_history_limit.max(0) as usize,
            failed_history: spec.failed_tasks_history_limit.max(0) as usize,
            task_spec: spec.task_template.spec.clone(),
        }),
        _ => Err(errors),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schedule(spec: serde_json::Value) -> MaintenanceSchedule {
        let mut object = json!({
            "apiVersion": "groundskeeper.dev/v1alpha1",
            "kind": "MaintenanceSchedule",
            "metadata": {"name": "nightly", "namespace": "db"},
            "spec": {
                "schedule": "0 3 * * *",
                "taskTemplate": {"spec": {"target": {"kind": "EtcdCluster", "name": "main"}, "type": "Snapshot"}}
            }
        });
        for (key, value) in spec.as_object().unwrap() {
            object["spec"][key] = value.clone();
        }
        serde_json::from_value(object).unwrap()
    }

    #[test]
    fn a_good_schedule_passes_with_its_defaults() {
        let valid = validate_schedule(&schedule(json!({}))).unwrap();
        assert_eq!(valid.concurrency_policy, ConcurrencyPolicy::Forbid);
        assert_eq!((valid.successful_history, valid.failed_history), (3, 1));
    }

    #[test]
    fn every_mistake_names_the_schedule_and_the_field() {
        let cases = [
            (json!({"schedule": "0 3 * *"}), "spec.schedule", "is not a cron expression"),
            (json!({"schedule": "0 0 31 2 *"}), "spec.schedule", "never happens"),
            (json!({"timeZone": "Europe/Atlantis"}), "spec.timeZone", "is not a time zone"),
            (json!({"startingDeadlineSeconds": 0}), "spec.startingDeadlineSeconds", "is not positive"),
            (json!({"failedTasksHistoryLimit": -1}), "spec.failedTasksHistoryLimit", "keep 0 to 100"),
            (
                json!({"taskTemplate": {"spec": {"target": {"kind": "EtcdCluster", "name": "main"}, "type": "Cleanup"}}}),
                "spec.taskTemplate.spec.target.kind",
                "type Cleanup works on a ScyllaCluster",
            ),
            (
                json!({"taskTemplate": {"spec": {"target": {"kind": "EtcdCluster", "name": "main"}, "type": "Restore",
                    "config": {"restore": {"confirm": true, "from": {"persistentVolumeClaim": "s"}}}}}}),
                "spec.taskTemplate.spec.type",
                "Restore cannot be scheduled",
            ),
        ];
        for (spec, field, message) in cases {
            let errors = validate_schedule(&schedule(spec.clone())).unwrap_err();
            let error =
                errors.iter().find(|e| e.field == field).unwrap_or_else(|| panic!("{spec}: {errors:?}"));
            assert_eq!(error.object, "MaintenanceSchedule db/nightly");
            assert!(error.message.contains(message), "{spec}: {}", error.message);
        }
    }

    #[test]
    fn all_mistakes_at_once() {
        let errors = validate_schedule(&schedule(json!({"schedule": "nope", "startingDeadlineSeconds": -5})))
            .unwrap_err();
        assert_eq!(errors.len(), 2, "{errors:?}");
    }
}
