//! The `MaintenanceSchedule` custom resource (`groundskeeper.dev/v1alpha1`): MaintenanceTasks
//! made from a template on a cron schedule in a time zone, e.g. a nightly snapshot, a weekly
//! compaction and defragmentation.
//!
//! Runs follow [`calendar`]: the wall clock of an IANA time zone, daylight saving included. A run
//! that was missed (the controller was down) is not made up for, beyond the latest one, and that
//! one only while it is within `startingDeadlineSeconds`. The tasks a schedule made carry its
//! label ([`SCHEDULE_LABEL`]) and an owner reference, so they go when it goes.

pub mod calendar;
pub mod validate;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::maintenance_task::{MAX_NAME_LEN, MaintenanceTaskSpec, TaskState};

/// Label on every task a schedule made: the schedule's name.
pub const SCHEDULE_LABEL: &str = "groundskeeper.dev/schedule";
/// Annotation on every task a schedule made: the run it stands for (RFC 3339).
pub const SCHEDULED_TIME_ANNOTATION: &str = "groundskeeper.dev/scheduled-time";
/// Default `spec.timeZone`.
pub const DEFAULT_TIME_ZONE: &str = "UTC";
/// Default `spec.successfulTasksHistoryLimit`.
pub const DEFAULT_SUCCESSFUL_HISTORY: i32 = 3;
/// Default `spec.failedTasksHistoryLimit`.
pub const DEFAULT_FAILED_HISTORY: i32 = 1;
/// Most entries `status.recentTasks` keeps.
pub const MAX_RECENT_TASKS: usize = 10;
/// The condition saying whether the schedule runs: True with reason `Scheduled`, False with
/// `Suspended` or `InvalidSpec`.
pub const READY: &str = "Ready";

/// MaintenanceTasks made from a template on a cron schedule.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[kube(
    group = "groundskeeper.dev",
    version = "v1alpha1",
    kind = "MaintenanceSchedule",
    namespaced,
    status = "MaintenanceScheduleStatus",
    shortname = "msched",
    category = "groundskeeper",
    doc = "MaintenanceTasks made from a template on a cron schedule in a time zone.",
    printcolumn = r#"{"name": "Schedule", "type": "string", "jsonPath": ".spec.schedule"}"#,
    printcolumn = r#"{"name": "Time zone", "type": "string", "jsonPath": ".spec.timeZone"}"#,
    printcolumn = r#"{"name": "Suspend", "type": "boolean", "jsonPath": ".spec.suspend"}"#,
    printcolumn = r#"{"name": "Last run", "type": "date", "jsonPath": ".status.lastScheduleTime"}"#,
    printcolumn = r#"{"name": "Next run", "type": "string", "jsonPath": ".status.nextScheduleTime"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct MaintenanceScheduleSpec {
    /// When tasks are made: a cron expression of five fields (minute hour day-of-month month
    /// day-of-week, Sunday 0 or 7; a day of month and a day of week both set match either), or
    /// `@hourly`, `@daily`, `@weekly`, `@monthly`, `@yearly`.
    #[schemars(length(min = 1, max = calendar::MAX_EXPRESSION_LEN))]
    pub schedule: String,
    /// The IANA time zone the expression is read in, e.g. `Europe/Berlin`. A run at a time the
    /// clock skips (spring forward) happens once, when the clock jumps; one at a time that
    /// happens twice (fall back), once, the first time.
    #[serde(default = "default_time_zone")]
    #[schemars(length(min = 1, max = 64))]
    pub time_zone: String,
    /// No new task is made while true; tasks already made are left alone. Runs that fall while
    /// suspended are skipped, not made up for when it is lifted.
    #[serde(default)]
    pub suspend: bool,
    /// What to do when a run comes and the task of the previous one is not finished: `Forbid`
    /// (skip the run), `Replace` (delete the previous task if it is still Pending, else skip), or
    /// `Allow` (make the task anyway; the task queue still rejects a duplicate of work waiting or
    /// running on the same target).
    #[serde(default)]
    pub concurrency_policy: ConcurrencyPolicy,
    /// A run that could not be made on time (the controller was down) is made late only within
    /// this many seconds of its time. Absent: the latest missed run is made however late, once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub starting_deadline_seconds: Option<i64>,
    /// Completed tasks kept (the newest); older ones are deleted.
    #[serde(default = "default_successful_history")]
    #[schemars(range(min = 0, max = 100))]
    pub successful_tasks_history_limit: i32,
    /// Failed or rejected tasks kept (the newest); older ones are deleted.
    #[serde(default = "default_failed_history")]
    #[schemars(range(min = 0, max = 100))]
    pub failed_tasks_history_limit: i32,
    /// The task each run makes.
    pub task_template: TaskTemplate,
}

fn default_time_zone() -> String {
    DEFAULT_TIME_ZONE.to_owned()
}

fn default_successful_history() -> i32 {
    DEFAULT_SUCCESSFUL_HISTORY
}

fn default_failed_history() -> i32 {
    DEFAULT_FAILED_HISTORY
}

/// See [`MaintenanceScheduleSpec::concurrency_policy`].
#[derive(Serialize, Deserialize, Debug, Clone, Copy, Default, PartialEq, Eq, JsonSchema)]
pub enum ConcurrencyPolicy {
    #[default]
    Forbid,
    Replace,
    Allow,
}

impl ConcurrencyPolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            ConcurrencyPolicy::Forbid => "Forbid",
            ConcurrencyPolicy::Replace => "Replace",
            ConcurrencyPolicy::Allow => "Allow",
        }
    }
}

/// The task a run makes: labels and annotations to add, and its spec.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskTemplate {
    #[serde(default, skip_serializing_if = "TemplateMetadata::is_empty")]
    pub metadata: TemplateMetadata,
    /// A MaintenanceTask's spec, checked as one (but changeable: a task's spec is immutable, a
    /// template's is not).
    #[schemars(schema_with = "template_spec_schema")]
    pub spec: MaintenanceTaskSpec,
}

/// MaintenanceTaskSpec's schema without its immutability rule, which holds for a task and would
/// make every schedule's template impossible to change.
fn template_spec_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let mut schema = <MaintenanceTaskSpec as JsonSchema>::json_schema(generator);
    if let Some(rules) = schema.get_mut("x-kubernetes-validations").and_then(|r| r.as_array_mut()) {
        rules.retain(|rule| rule.get("rule").and_then(|r| r.as_str()) != Some("self == oldSelf"));
    }
    schema
}

/// Labels and annotations of the tasks a schedule makes (the schedule adds its own).
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, JsonSchema)]
pub struct TemplateMetadata {
    /// Labels put on each task made. The schedule sets `groundskeeper.dev/schedule` (its name) and
    /// `groundskeeper.dev/origin: schedule` over any given here.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub labels: std::collections::BTreeMap<String, String>,
    /// Annotations put on each task made. The schedule sets `groundskeeper.dev/scheduled-time`
    /// (the run, RFC 3339) over any given here.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub annotations: std::collections::BTreeMap<String, String>,
}

impl TemplateMetadata {
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.annotations.is_empty()
    }
}

/// What a schedule did and will do.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MaintenanceScheduleStatus {
    /// The run the newest task stands for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_schedule_time: Option<Time>,
    /// When the newest Completed task finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_successful_time: Option<Time>,
    /// The next run (RFC 3339, UTC), absent while suspended or invalid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_schedule_time: Option<String>,
    /// The same in the schedule's time zone, for people, e.g. `2026-11-25 03:00 CET`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_schedule_local: Option<String>,
    /// Tasks this schedule made that are not finished.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub active: Vec<String>,
    /// The newest tasks this schedule made (at most 10), newest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_RECENT_TASKS))]
    pub recent_tasks: Vec<ScheduledTask>,
    /// The last run that made no task, and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_skipped: Option<SkippedRun>,
    /// `Ready`: True (`Scheduled`) while runs make tasks; False (`Suspended`, `InvalidSpec`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The `metadata.generation` this status was written for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// One task a schedule made.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScheduledTask {
    /// The MaintenanceTask's name: `<schedule>-<the run's minutes since the Unix epoch>` (the
    /// schedule's name cut short with a hash when the whole would pass 63 characters).
    #[schemars(length(max = MAX_NAME_LEN))]
    pub name: String,
    /// The run it stands for.
    pub scheduled_time: Time,
    /// Its state when last seen (absent until the task controller saw it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<TaskState>,
}

/// A run that made no task.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SkippedRun {
    /// The run that made no task.
    pub scheduled_time: Time,
    /// `Suspended`, `ConcurrencyForbid` or `MissedDeadline`.
    pub reason: String,
    /// Why, for people.
    pub message: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_fill_what_a_minimal_schedule_leaves_out() {
        let spec: MaintenanceScheduleSpec = serde_json::from_value(serde_json::json!({
            "schedule": "0 3 * * *",
            "taskTemplate": {"spec": {"target": {"kind": "EtcdCluster", "name": "main"}, "type": "Snapshot"}}
        }))
        .unwrap();
        assert_eq!(spec.time_zone, "UTC");
        assert!(!spec.suspend);
        assert_eq!(spec.concurrency_policy, ConcurrencyPolicy::Forbid);
        assert_eq!(spec.starting_deadline_seconds, None);
        assert_eq!((spec.successful_tasks_history_limit, spec.failed_tasks_history_limit), (3, 1));
    }

    #[test]
    fn the_template_can_be_changed_though_a_task_cannot() {
        use kube::CustomResourceExt;
        let schedule = serde_json::to_string(&MaintenanceSchedule::crd()).unwrap();
        assert!(!schedule.contains("self == oldSelf"), "the template carries the task's immutability rule");
        assert!(schedule.contains("type Cleanup needs target kind ScyllaCluster"), "the other rules stay");
        let task = serde_json::to_string(&crate::MaintenanceTask::crd()).unwrap();
        assert!(task.contains("self == oldSelf"));
    }
}
