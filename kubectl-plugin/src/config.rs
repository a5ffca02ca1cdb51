//! `--config key=value` and `--config-file`: the config of a task's type, read against the
//! MaintenanceTask CRD's own schema (the fields and their types the API server knows), so that a
//! typo or a wrong type is refused here, naming the field, before anything is created.

use kube::CustomResourceExt;
use serde_json::{Map, Value};

use groundskeeper_api::maintenance_task::{MaintenanceTask, TaskConfig, TaskType};

/// The `spec.config.<member>` schema of `task_type`, from the CRD.
fn member_schema(member: &str) -> Value {
    let crd = serde_json::to_value(MaintenanceTask::crd()).expect("the CRD serialises");
    crd.pointer(&format!(
        "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/config/properties/{member}"
    ))
    .cloned()
    .unwrap_or(Value::Null)
}

fn fields_of(schema: &Value) -> Vec<String> {
    schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default()
}

fn type_of(schema: &Value) -> &str {
    schema.get("type").and_then(Value::as_str).unwrap_or("")
}

/// The config of `task_type` from an optional document and `key=value` settings (applied on top).
pub fn task_config(
    task_type: &TaskType,
    document: Option<&str>,
    settings: &[String],
) -> Result<TaskConfig, String> {
    let Some(member) = task_type.config_member() else {
        return Err(format!("unknown task type {task_type}"));
    };
    let schema = member_schema(member);
    let path = format!("spec.config.{member}");
    let mut config = match document {
        Some(text) => {
            let value: Value = serde_saphyr::from_str(text)
                .map_err(|e| format!("--config-file: not a YAML or JSON document: {e}"))?;
            match value {
                Value::Object(_) => {}
                Value::Null => {}
                _ => return Err(format!("--config-file: {path} must be a mapping of its fields")),
            }
            check_document(&value, &schema, &path)?;
            value
        }
        None => Value::Null,
    };
    if config.is_null() && (document.is_some() || !settings.is_empty()) {
        config = Value::Object(Map::new());
    }
    for setting in settings {
        set(&mut config, &schema, &path, setting)?;
    }
    if config.is_null() {
        return Ok(TaskConfig::default());
    }
    let wrapped = Value::Object(Map::from_iter([(member.to_owned(), config)]));
    serde_json::from_value(wrapped).map_err(|e| format!("{path}: {e}"))
}

/// Refuses fields the schema does not know, anywhere in the document.
fn check_document(value: &Value, schema: &Value, path: &str) -> Result<(), String> {
    let Value::Object(map) = value else {
        return Ok(());
    };
    let known = fields_of(schema);
    for (key, inner) in map {
        let Some(field) = schema.pointer(&format!("/properties/{key}")) else {
            return Err(format!(
                "--config-file: {path} has no field {key:?}; its fields: {}",
                known.join(", ")
            ));
        };
        if type_of(field) == "object" {
            check_document(inner, field, &format!("{path}.{key}"))?;
        }
    }
    Ok(())
}

/// Applies one `key=value` (key with dots for nested fields) to `config`.
fn set(config: &mut Value, schema: &Value, path: &str, setting: &str) -> Result<(), String> {
    let Some((key, text)) = setting.split_once('=') else {
        return Err(format!("--config {setting}: expected KEY=VALUE, e.g. {}", example(schema)));
    };
    let parts: Vec<&str> = key.split('.').collect();
    let mut field_schema = schema;
    let mut field_path = path.to_owned();
    for (i, part) in parts.iter().enumerate() {
        let Some(field) = field_schema.pointer(&format!("/properties/{part}")) else {
            return Err(format!(
                "--config {setting}: {field_path} has no field {part:?}; its fields: {}",
                fields_of(field_schema).join(", ")
            ));
        };
        field_path = format!("{field_path}.{part}");
        if i + 1 < parts.len() && type_of(field) != "object" {
            return Err(format!("--config {setting}: {field_path} has no fields"));
        }
        field_schema = field;
    }
    let value = typed(field_schema, text)
        .map_err(|wanted| format!("--config {setting}: {field_path} takes {wanted}, not {text:?}"))?;
    let mut target = config;
    for part in &parts[..parts.len() - 1] {
        target = object_of(target).entry(part.to_string()).or_insert_with(|| Value::Object(Map::new()));
    }
    object_of(target).insert(parts[parts.len() - 1].to_owned(), value);
    Ok(())
}

/// `value` as a mapping, made one if it was not (an empty field in a document).
fn object_of(value: &mut Value) -> &mut Map<String, Value> {
    if !value.is_object() {
        *value = Value::Object(Map::new());
    }
    value.as_object_mut().expect("made an object just above")
}

/// `text` as the schema's type, or what it takes.
fn typed(field: &Value, text: &str) -> Result<Value, String> {
    match type_of(field) {
        "integer" => text.parse::<i64>().map(Value::from).map_err(|_| "an integer".to_owned()),
        "number" => text
            .parse::<f64>()
            .ok()
            .filter(|n| n.is_finite())
            .map(Value::from)
            .ok_or_else(|| "a number".to_owned()),
        "boolean" => match text {
            "true" => Ok(Value::Bool(true)),
            "false" => Ok(Value::Bool(false)),
            _ => Err("true or false".to_owned()),
        },
        "array" => Ok(Value::Array(
            text.split(',').filter(|s| !s.is_empty()).map(|s| Value::String(s.to_owned())).collect(),
        )),
        "object" => Err(format!("fields of its own (KEY.FIELD=VALUE: {})", fields_of(field).join(", "))),
        _ => Ok(Value::String(text.to_owned())),
    }
}

fn example(schema: &Value) -> String {
    fields_of(schema).first().map(|f| format!("{f}=…")).unwrap_or_else(|| "field=value".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use groundskeeper_api::maintenance_task::{CompactConfig, DefragmentConfig, SnapshotConfig};

    fn settings(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn settings_take_the_schema_types() {
        let config =
            task_config(&TaskType::Compact, None, &settings(&["retainRevisions=1000", "physical=true"]))
                .unwrap();
        assert_eq!(
            config.compact,
            Some(CompactConfig { retain_revisions: Some(1000), revision: None, physical: true })
        );
        let config =
            task_config(&TaskType::Defragment, None, &settings(&["maxFragmentedPercent=30.5"])).unwrap();
        assert_eq!(
            config.defragment,
            Some(DefragmentConfig { min_defrag_bytes: 0, max_fragmented_percent: 30.5 })
        );
        let config =
            task_config(&TaskType::Cleanup, None, &settings(&["keyspaces=ks1,ks2", "maxConcurrent=2"]))
                .unwrap();
        let cleanup = config.cleanup.unwrap();
        assert_eq!(cleanup.keyspaces, vec!["ks1", "ks2"]);
        assert_eq!(cleanup.max_concurrent, Some(2));
        let config = task_config(
            &TaskType::Maintenance,
            None,
            &settings(&["compact.retainRevisions=5", "defragment.minDefragBytes=7"]),
        )
        .unwrap();
        let maintenance = config.maintenance.unwrap();
        assert_eq!(maintenance.compact.unwrap().retain_revisions, Some(5));
        assert_eq!(maintenance.defragment.unwrap().min_defrag_bytes, 7);
    }

    #[test]
    fn nothing_given_is_the_types_defaults() {
        assert!(task_config(&TaskType::Defragment, None, &[]).unwrap().is_empty());
        let config = task_config(&TaskType::Snapshot, None, &settings(&["retain=3"])).unwrap();
        assert_eq!(config.snapshot, Some(SnapshotConfig { retain: 3, ..SnapshotConfig::default() }));
    }

    #[test]
    fn a_document_then_settings_on_top() {
        let document = "persistentVolumeClaim: backups\nretain: 2\n";
        let config = task_config(&TaskType::Snapshot, Some(document), &settings(&["retain=4"])).unwrap();
        let snapshot = config.snapshot.unwrap();
        assert_eq!(snapshot.persistent_volume_claim.as_deref(), Some("backups"));
        assert_eq!(snapshot.retain, 4);
        let json = r#"{"retainRevisions": 10}"#;
        let config = task_config(&TaskType::Compact, Some(json), &[]).unwrap();
        assert_eq!(config.compact.unwrap().retain_revisions, Some(10));
    }

    #[test]
    fn mistakes_name_the_field() {
        let cases: &[(TaskType, Option<&str>, &[&str], &str)] = &[
            (
                TaskType::Compact,
                None,
                &["retain=5"],
                "--config retain=5: spec.config.compact has no field \"retain\"; its fields: physical, retainRevisions, revision",
            ),
            (
                TaskType::Compact,
                None,
                &["retainRevisions=many"],
                "spec.config.compact.retainRevisions takes an integer, not \"many\"",
            ),
            (TaskType::Compact, None, &["physical=yes"], "spec.config.compact.physical takes true or false"),
            (TaskType::Defragment, None, &["maxFragmentedPercent"], "expected KEY=VALUE"),
            (
                TaskType::Maintenance,
                None,
                &["compact=1"],
                "spec.config.maintenance.compact takes fields of its own",
            ),
            (
                TaskType::Maintenance,
                None,
                &["compact.bogus=1"],
                "spec.config.maintenance.compact has no field \"bogus\"",
            ),
            (
                TaskType::Snapshot,
                Some("retian: 3"),
                &[],
                "--config-file: spec.config.snapshot has no field \"retian\"",
            ),
            (TaskType::Snapshot, Some("- a"), &[], "must be a mapping"),
            (TaskType::Snapshot, Some("retain: x"), &[], "spec.config.snapshot: "),
        ];
        for (task_type, document, given, wanted) in cases {
            let err = task_config(task_type, *document, &settings(given)).unwrap_err();
            assert!(err.contains(wanted), "{given:?} {document:?}: {err}");
        }
    }
}
