use kube::CustomResourceExt;
use serde_json::{Value, json};

use super::*;

fn spec(value: Value) -> MaintenanceTaskSpec {
    serde_json::from_value(value).expect("spec deserializes")
}

/// The `openAPIV3Schema` of `spec`, as generated into the CRD.
fn spec_schema() -> Value {
    let crd = serde_json::to_value(MaintenanceTask::crd()).unwrap();
    crd.pointer("/spec/versions/0/schema/openAPIV3Schema/properties/spec").cloned().expect("spec schema")
}

fn rules_of(schema: &Value) -> Vec<String> {
    schema
        .get("x-kubernetes-validations")
        .and_then(Value::as_array)
        .map(|rules| rules.iter().map(|r| r["rule"].as_str().unwrap().to_owned()).collect())
        .unwrap_or_default()
}

#[test]
fn a_minimal_spec_takes_the_documented_defaults() {
    let spec = spec(json!({"target": {"kind": "EtcdCluster", "name": "main"}, "type": "Defragment"}));
    assert_eq!(spec.task_type, TaskType::Defragment);
    assert_eq!(spec.target.kind, TargetKind::EtcdCluster);
    assert_eq!(spec.ttl_seconds_after_finished, 3600);
    assert_eq!(spec.deadline_seconds, None);
    assert!(spec.config.is_empty());
}

#[test]
fn config_members_take_their_defaults() {
    let defrag: DefragmentConfig = serde_json::from_value(json!({})).unwrap();
    assert_eq!(defrag.min_defrag_bytes, 0);
    assert_eq!(defrag.max_fragmented_percent, 0.0);
    let snapshot: SnapshotConfig = serde_json::from_value(json!({})).unwrap();
    assert_eq!(snapshot, SnapshotConfig::default());
    assert_eq!(snapshot.file_name, "{cluster}-{time}.db");
    assert_eq!(snapshot.retain, 5);
    let compact: CompactConfig = serde_json::from_value(json!({})).unwrap();
    assert_eq!(compact, CompactConfig::default());
}

#[test]
fn unknown_type_and_kind_are_kept_as_written() {
    let spec = spec(json!({"target": {"kind": "Deployment", "name": "x"}, "type": "Purge"}));
    assert_eq!(spec.task_type, TaskType::Unknown("Purge".into()));
    assert_eq!(spec.target.kind, TargetKind::Unknown("Deployment".into()));
    let back = serde_json::to_value(&spec).unwrap();
    assert_eq!(back["type"], "Purge");
    assert_eq!(back["target"]["kind"], "Deployment");
}

#[test]
fn known_names_round_trip() {
    for name in TaskType::KNOWN {
        let parsed = TaskType::parse(name);
        assert!(parsed.is_known(), "{name}");
        assert_eq!(parsed.as_str(), *name);
        assert!(parsed.config_member().is_some());
        assert!(parsed.target_kind().is_some());
    }
    for name in TargetKind::KNOWN {
        assert_eq!(TargetKind::parse(name).as_str(), *name);
    }
    assert!(!TaskType::parse("cleanup").is_known(), "names are case-sensitive");
}

#[test]
fn only_cleanup_works_on_scylla() {
    assert_eq!(TaskType::Cleanup.target_kind(), Some(TargetKind::ScyllaCluster));
    for etcd_type in [TaskType::Compact, TaskType::Defragment, TaskType::Maintenance, TaskType::Snapshot] {
        assert_eq!(etcd_type.target_kind(), Some(TargetKind::EtcdCluster));
    }
}

#[test]
fn an_empty_config_is_not_written() {
    let spec = spec(json!({"target": {"kind": "EtcdCluster", "name": "main"}, "type": "Compact"}));
    let written = serde_json::to_value(&spec).unwrap();
    assert!(written.get("config").is_none(), "{written}");
    assert!(written.get("deadlineSeconds").is_none(), "{written}");
}

#[test]
fn members_set_names_every_member_given() {
    let config: TaskConfig =
        serde_json::from_value(json!({"compact": {}, "snapshot": {"retain": 2}})).unwrap();
    assert_eq!(config.members_set(), vec!["compact", "snapshot"]);
}

#[test]
fn the_crd_is_namespaced_with_a_status_subresource_and_columns() {
    let crd = MaintenanceTask::crd();
    assert_eq!(crd.metadata.name.as_deref(), Some("maintenancetasks.groundskeeper.dev"));
    assert_eq!(crd.spec.scope, "Namespaced");
    assert_eq!(crd.spec.names.short_names, Some(vec!["mtask".to_owned()]));
    assert_eq!(crd.spec.names.categories, Some(vec!["groundskeeper".to_owned()]));
    let version = &crd.spec.versions[0];
    assert_eq!(version.name, "v1alpha1");
    assert!(version.subresources.as_ref().unwrap().status.is_some());
    let columns: Vec<_> = version
        .additional_printer_columns
        .as_ref()
        .unwrap()
        .iter()
        .map(|c| (c.name.as_str(), c.json_path.as_str()))
        .collect();
    assert_eq!(
        columns,
        vec![
            ("Type", ".spec.type"),
            ("Target", ".spec.target.name"),
            ("State", ".status.state"),
            ("Waiting For", ".status.waitingFor"),
            ("Progress", ".status.progress"),
            ("Next Window", ".status.leftForNextWindow"),
            ("Age", ".metadata.creationTimestamp"),
        ]
    );
}

#[test]
fn the_spec_schema_carries_the_cel_rules() {
    let schema = spec_schema();
    let rules = rules_of(&schema);
    assert!(rules.contains(&"self == oldSelf".to_owned()), "{rules:?}");
    assert!(rules.iter().any(|r| r.contains("self.target.kind == 'ScyllaCluster'")));
    for member in ["cleanup", "compact", "defragment", "maintenance", "snapshot"] {
        assert!(
            rules.iter().any(|r| r.contains(&format!("!has(self.config.{member})"))),
            "no union rule for {member}: {rules:?}"
        );
    }
    let compact = &schema["properties"]["config"]["properties"]["compact"];
    assert_eq!(rules_of(compact), vec!["!has(self.retainRevisions) || !has(self.revision)".to_owned()]);
    let nested = &schema["properties"]["config"]["properties"]["maintenance"]["properties"]["compact"];
    assert_eq!(rules_of(nested), rules_of(compact));
}

#[test]
fn the_spec_schema_keeps_its_defaults_and_bounds() {
    let schema = spec_schema();
    let props = &schema["properties"];
    assert_eq!(props["ttlSecondsAfterFinished"]["default"], 3600);
    assert_eq!(props["ttlSecondsAfterFinished"]["minimum"], 0.0);
    assert_eq!(props["deadlineSeconds"]["minimum"], 1.0);
    assert_eq!(
        props["type"]["enum"],
        json!([
            "Cleanup",
            "Compact",
            "Defragment",
            "Maintenance",
            "Snapshot",
            "Copy",
            "Verify",
            "Delta",
            "Restore"
        ])
    );
    assert_eq!(props["target"]["properties"]["kind"]["enum"], json!(["ScyllaCluster", "EtcdCluster"]));
    let percent = &props["config"]["properties"]["defragment"]["properties"]["maxFragmentedPercent"];
    assert_eq!((percent["minimum"].clone(), percent["maximum"].clone()), (json!(0.0), json!(100.0)));
}

/// Every string and list a CEL rule can reach (the whole spec, through `self == oldSelf`) has a
/// bound, so that a real API server can bound the rules' cost and accepts the CRD.
#[test]
fn every_string_and_list_in_the_spec_is_bounded() {
    fn walk(path: &str, schema: &Value, unbounded: &mut Vec<String>) {
        match schema.get("type").and_then(Value::as_str) {
            Some("string") if schema.get("maxLength").is_none() => unbounded.push(path.to_owned()),
            Some("array") if schema.get("maxItems").is_none() => unbounded.push(path.to_owned()),
            _ => {}
        }
        if let Some(items) = schema.get("items") {
            walk(&format!("{path}[]"), items, unbounded);
        }
        if let Some(Value::Object(props)) = schema.get("properties") {
            for (name, prop) in props {
                walk(&format!("{path}.{name}"), prop, unbounded);
            }
        }
    }
    let mut unbounded = Vec::new();
    walk("spec", &spec_schema(), &mut unbounded);
    assert!(unbounded.is_empty(), "unbounded in the spec: {unbounded:?}");
}

#[test]
fn the_status_round_trips() {
    let status: MaintenanceTaskStatus = serde_json::from_value(json!({
        "state": "InProgress",
        "initiatedAt": "2030-01-01T00:00:00Z",
        "startedAt": "2030-01-01T00:00:05Z",
        "progress": "1/3",
        "lastErrors": [{"code": "JobFailed", "description": "exit 1", "observedAt": "2030-01-01T00:01:00Z"}],
        "lastOperation": {"state": "InProgress", "description": "started", "lastUpdateTime": "2030-01-01T00:00:05Z"},
        "nodes": [{"name": "sc-dc-r-0", "state": "Succeeded", "job": "cleanup-sc-dc-r-0", "keyspacesCleaned": ["ks"]}]
    }))
    .unwrap();
    assert_eq!(status.state, Some(TaskState::InProgress));
    assert_eq!(status.nodes[0].state, NodeState::Succeeded);
    let back: MaintenanceTaskStatus = serde_json::from_value(serde_json::to_value(&status).unwrap()).unwrap();
    assert_eq!(back, status);
}

#[test]
fn final_states_are_the_three_endings() {
    let finals: Vec<_> = [
        TaskState::Pending,
        TaskState::InProgress,
        TaskState::Completed,
        TaskState::Failed,
        TaskState::Rejected,
    ]
    .into_iter()
    .filter(|s| s.is_final())
    .collect();
    assert_eq!(finals, vec![TaskState::Completed, TaskState::Failed, TaskState::Rejected]);
}
