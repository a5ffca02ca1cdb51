//! The `MaintenanceSuspension` custom resource (`groundskeeper.dev/v1alpha1`): a target's
//! maintenance suspended, for a while or until the object is deleted, with a reason. While it is
//! in force, tasks of that target wait (saying who suspended it, why and until when), except
//! those of the types it allows (a snapshot during an incident freeze), and running tasks are
//! stopped or left to finish, as it says. It ends by itself at `spec.until`.
//!
//! `kubectl groundskeeper suspend TARGET --for 2h --reason …` makes one (recording who in
//! [`SUSPENDED_BY_ANNOTATION`]); `resume TARGET` deletes them.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::{CustomResource, KubeSchema, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::maintenance_task::{TaskTarget, TaskType};
use crate::validate::FieldError;

/// Annotation on a suspension: who made it (the plugin writes the kubeconfig user).
pub const SUSPENDED_BY_ANNOTATION: &str = "groundskeeper.dev/suspended-by";
/// Longest reason.
pub const MAX_REASON_LEN: usize = 1024;

/// A target's maintenance suspended.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[kube(
    group = "groundskeeper.dev",
    version = "v1alpha1",
    kind = "MaintenanceSuspension",
    namespaced,
    shortname = "msusp",
    category = "groundskeeper",
    doc = "A target's maintenance suspended, for a while or until deleted, with a reason.",
    printcolumn = r#"{"name": "Target", "type": "string", "jsonPath": ".spec.target.name"}"#,
    // A time in the future: as `date`, kubectl would show it as `<invalid>` (an age).
    printcolumn = r#"{"name": "Until", "type": "string", "jsonPath": ".spec.until"}"#,
    printcolumn = r#"{"name": "Running", "type": "string", "jsonPath": ".spec.runningTasks"}"#,
    printcolumn = r#"{"name": "Reason", "type": "string", "jsonPath": ".spec.reason"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct MaintenanceSuspensionSpec {
    /// The cluster whose maintenance is suspended, in this namespace.
    pub target: TaskTarget,
    /// Why, for whoever finds the tasks waiting.
    #[schemars(length(min = 1, max = MAX_REASON_LEN))]
    pub reason: String,
    /// When it ends by itself. Absent: when the object is deleted (`kubectl groundskeeper resume`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<Time>,
    /// Task types that go on while suspended, e.g. `[Snapshot]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 8))]
    pub allow_task_types: Vec<TaskType>,
    /// Tasks already running: `Wait` (left to finish; nothing new starts) or `Stop` (failed with
    /// code `Suspended`, their Jobs deleted, their pods stopped with SIGTERM).
    #[serde(default)]
    pub running_tasks: RunningTasks,
}

/// See [`MaintenanceSuspensionSpec::running_tasks`].
#[derive(Serialize, Deserialize, Debug, Clone, Copy, Default, PartialEq, Eq, JsonSchema)]
pub enum RunningTasks {
    #[default]
    Wait,
    Stop,
}

/// A suspension in force, as the task queue takes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Suspension {
    pub name: String,
    pub reason: String,
    pub by: String,
    pub until: Option<Timestamp>,
    pub allow: Vec<TaskType>,
    pub stop_running: bool,
}

impl Suspension {
    /// Whether tasks of `task_type` go on.
    pub fn allows(&self, task_type: &TaskType) -> bool {
        self.allow.contains(task_type)
    }

    /// `suspended by alice until … : reason`, for conditions and errors.
    pub fn describe(&self) -> String {
        let until = self.until.map_or_else(|| "until resumed".to_owned(), |t| format!("until {t}"));
        let allowed = if self.allow.is_empty() {
            String::new()
        } else {
            let types: Vec<&str> = self.allow.iter().map(TaskType::as_str).collect();
            format!("; {} tasks go on", types.join(", "))
        };
        format!(
            "maintenance suspended by {} {until} (MaintenanceSuspension {}): {}{allowed}",
            self.by, self.name, self.reason
        )
    }
}

/// The suspensions of `target` in force at `now` (not yet ended, spec valid), and the mistakes
/// of those that cannot be used.
pub fn in_force(
    suspensions: &[MaintenanceSuspension],
    target: &TaskTarget,
    now: Timestamp,
) -> (Vec<Suspension>, Vec<FieldError>) {
    let mut active = Vec::new();
    let mut errors = Vec::new();
    for object in
        suspensions.iter().filter(|s| s.spec.target == *target && s.metadata.deletion_timestamp.is_none())
    {
        match check(object) {
            Ok(suspension) if suspension.until.is_none_or(|until| until > now) => active.push(suspension),
            Ok(_) => {} // over
            Err(mut mistakes) => errors.append(&mut mistakes),
        }
    }
    active.sort_by(|a, b| a.name.cmp(&b.name));
    (active, errors)
}

/// A suspension's spec checked: a reason, known task types, and an end after its creation.
pub fn check(object: &MaintenanceSuspension) -> Result<Suspension, Vec<FieldError>> {
    let name =
        format!("MaintenanceSuspension {}/{}", object.namespace().unwrap_or_default(), object.name_any());
    let mut errors = Vec::new();
    let mut error = |field: &str, message: String| {
        errors.push(FieldError { object: name.clone(), field: field.to_owned(), message })
    };
    let spec = &object.spec;
    if spec.reason.trim().is_empty() {
        error("spec.reason", "is empty: say why, for whoever finds the tasks waiting".to_owned());
    }
    for (i, task_type) in spec.allow_task_types.iter().enumerate() {
        if let TaskType::Unknown(text) = task_type {
            error(
                &format!("spec.allowTaskTypes[{i}]"),
                format!("{text:?} is not a task type: use one of {}", TaskType::KNOWN.join(", ")),
            );
        }
    }
    if let (Some(until), Some(created)) = (&spec.until, &object.metadata.creation_timestamp)
        && until.0 <= created.0
    {
        error(
            "spec.until",
            format!(
                "{} is not after the suspension was made ({}): a suspension in the past suspends nothing",
                until.0, created.0
            ),
        );
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok(Suspension {
        name: object.name_any(),
        reason: spec.reason.clone(),
        by: object
            .annotations()
            .get(SUSPENDED_BY_ANNOTATION)
            .cloned()
            .unwrap_or_else(|| "someone".to_owned()),
        until: spec.until.as_ref().map(|t| t.0),
        allow: spec.allow_task_types.clone(),
        stop_running: spec.running_tasks == RunningTasks::Stop,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn suspension(name: &str, spec: serde_json::Value) -> MaintenanceSuspension {
        let mut object = json!({
            "apiVersion": "groundskeeper.dev/v1alpha1", "kind": "MaintenanceSuspension",
            "metadata": {"name": name, "namespace": "etcd", "creationTimestamp": "2026-11-24T10:00:00Z",
                         "annotations": {SUSPENDED_BY_ANNOTATION: "alice"}},
            "spec": {"target": {"kind": "EtcdCluster", "name": "main"}, "reason": "incident 4711"}
        });
        for (key, value) in spec.as_object().unwrap() {
            object["spec"][key] = value.clone();
        }
        serde_json::from_value(object).unwrap()
    }

    fn main() -> TaskTarget {
        serde_json::from_value(json!({"kind": "EtcdCluster", "name": "main"})).unwrap()
    }

    #[test]
    fn a_suspension_is_in_force_until_it_ends_and_only_for_its_target() {
        let now: Timestamp = "2026-11-24T11:00:00Z".parse().unwrap();
        let all = [
            suspension(
                "for-two-hours",
                json!({"until": "2026-11-24T12:00:00Z", "allowTaskTypes": ["Snapshot"]}),
            ),
            suspension("over", json!({"until": "2026-11-24T10:30:00Z"})),
            suspension("other", json!({"target": {"kind": "EtcdCluster", "name": "other"}})),
        ];
        let (active, errors) = in_force(&all, &main(), now);
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(active.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), ["for-two-hours"]);
        assert!(active[0].allows(&TaskType::Snapshot));
        assert!(!active[0].allows(&TaskType::Defragment));
        let text = active[0].describe();
        assert!(text.contains("suspended by alice until 2026-11-24T12:00:00Z"), "{text}");
        assert!(text.contains("incident 4711; Snapshot tasks go on"), "{text}");
    }

    #[test]
    fn mistakes_name_the_field() {
        let cases = [
            (json!({"reason": " "}), "spec.reason", "is empty"),
            (json!({"until": "2026-11-24T09:00:00Z"}), "spec.until", "a suspension in the past"),
            (json!({"allowTaskTypes": ["Backup"]}), "spec.allowTaskTypes[0]", "is not a task type"),
        ];
        for (spec, field, message) in cases {
            let errors = check(&suspension("bad", spec.clone())).unwrap_err();
            assert!(
                errors.iter().any(|e| e.field == field && e.message.contains(message)),
                "{spec}: {errors:?}"
            );
            assert_eq!(errors[0].object, "MaintenanceSuspension etcd/bad");
        }
    }
}
