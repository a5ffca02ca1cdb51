//! The conditions we write, checked against scylla-operator's real CRDs
//! (scylla-operator's real CRDs, see `groundskeeper_e2e::reference`): `status.conditions` is a plain list there, and each
//! entry we produce satisfies the schema of its items.

use groundskeeper_controller::conditions::{Condition, ConditionStatus, merge_conditions};
use serde_json::{Value, json};

struct Target {
    crd_file: &'static str,
    version: &'static str,
}

const TARGETS: [Target; 2] = [
    Target { crd_file: "scyllaclusters.crd.yaml", version: "v1" },
    Target { crd_file: "scylladbdatacenters.crd.yaml", version: "v1alpha1" },
];

fn load_crd(file: &str) -> Value {
    let dir = groundskeeper_e2e::reference::scylla_dir(file).expect("checked by the test");
    let text = groundskeeper_e2e::reference::read(&dir, file);
    serde_saphyr::from_str(&text).unwrap_or_else(|err| panic!("parse {file}: {err}"))
}

/// `status.conditions` of one served version of a CRD, and whether that version has a status
/// subresource (the writer patches `/status`).
fn conditions_schema(target: &Target) -> (Value, bool) {
    let crd = load_crd(target.crd_file);
    let version = crd["spec"]["versions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == target.version)
        .unwrap_or_else(|| panic!("{}: no version {}", target.crd_file, target.version))
        .clone();
    let schema =
        version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]["conditions"].clone();
    assert!(schema.is_object(), "{}: no status.conditions", target.crd_file);
    (schema, version["subresources"]["status"].is_object())
}

/// Checks `value` against an OpenAPI v3 schema, as far as condition schemas use it.
fn validate(schema: &Value, value: &Value, path: &str) -> Result<(), String> {
    let fail = |what: String| Err(format!("{path}: {what}"));
    match schema["type"].as_str() {
        Some("object") => {
            let Some(object) = value.as_object() else {
                return fail(format!("not an object: {value}"));
            };
            for required in schema["required"].as_array().into_iter().flatten() {
                if !object.contains_key(required.as_str().unwrap()) {
                    return fail(format!("missing required field {required}"));
                }
            }
            for (key, field) in object {
                let Some(field_schema) = schema["properties"].get(key) else {
                    return fail(format!("field {key} is not in the schema (the API server would prune it)"));
                };
                validate(field_schema, field, &format!("{path}.{key}"))?;
            }
        }
        Some("string") => {
            let Some(text) = value.as_str() else {
                return fail(format!("not a string: {value}"));
            };
            let chars = text.chars().count() as u64;
            if let Some(max) = schema["maxLength"].as_u64().filter(|max| chars > *max) {
                return fail(format!("{chars} characters, more than maxLength {max}"));
            }
            if let Some(min) = schema["minLength"].as_u64().filter(|min| chars < *min) {
                return fail(format!("{chars} characters, fewer than minLength {min}"));
            }
            if let Some(pattern) = schema["pattern"].as_str()
                && !regex::Regex::new(pattern).unwrap().is_match(text)
            {
                return fail(format!("{text:?} does not match {pattern}"));
            }
            if schema["format"] == "date-time" && text.parse::<jiff::Timestamp>().is_err() {
                return fail(format!("{text:?} is not a date-time"));
            }
        }
        Some("integer") => {
            let Some(number) = value.as_i64() else {
                return fail(format!("not an integer: {value}"));
            };
            if let Some(min) = schema["minimum"].as_i64().filter(|min| number < *min) {
                return fail(format!("{number} is below minimum {min}"));
            }
        }
        Some("array") => {
            let Some(items) = value.as_array() else {
                return fail(format!("not a list: {value}"));
            };
            for (i, item) in items.iter().enumerate() {
                validate(&schema["items"], item, &format!("{path}[{i}]"))?;
            }
        }
        other => return fail(format!("schema type {other:?} not handled by this check")),
    }
    if let Some(allowed) = schema["enum"].as_array()
        && !allowed.contains(value)
    {
        return fail(format!("{value} is not one of {allowed:?}"));
    }
    Ok(())
}

/// Conditions as the cleanup controller writes them, and the edge cases of the merge.
fn our_conditions() -> Vec<Condition> {
    vec![
        Condition::new("CleanupControllerProgressing", true, "CleaningUp", "cleaning sc-dc-r1-0 (ring h==)"),
        Condition::new("CleanupControllerProgressing", false, "AsExpected", ""),
        Condition::new("CleanupControllerDegraded", true, "JobFailed", "Job scylla/cleanup-x failed: 401"),
        Condition::new("CleanupControllerDegraded", false, "AsExpected", ""),
        Condition::new(
            "CleanupControllerProgressing",
            ConditionStatus::Unknown,
            "PreconditionsNotMet",
            "waiting",
        ),
        Condition::new(
            "CleanupControllerDegraded",
            true,
            "Reason_with:colons,and_commas",
            "x".repeat(40_000),
        ),
    ]
}

#[test]
fn conditions_are_a_plain_list_on_a_status_subresource() {
    if groundskeeper_e2e::reference::scylla_dir("conditions_are_a_plain_list_on_a_status_subresource")
        .is_none()
    {
        return;
    }
    for target in TARGETS {
        let (schema, has_status_subresource) = conditions_schema(&target);
        assert_eq!(schema["type"], "array", "{}", target.crd_file);
        // A list-map would merge by type on the server; a plain (atomic) list is replaced as a
        // whole, which is why the writer sends the whole list with a resourceVersion.
        assert!(
            matches!(schema.get("x-kubernetes-list-type"), None | Some(Value::String(_)))
                && schema["x-kubernetes-list-type"] != "map",
            "{}: status.conditions is a list-map: {schema}",
            target.crd_file
        );
        assert!(schema.get("x-kubernetes-list-map-keys").is_none(), "{}", target.crd_file);
        assert!(has_status_subresource, "{}: no status subresource", target.crd_file);
    }
}

#[test]
fn every_condition_we_write_satisfies_the_item_schema() {
    if groundskeeper_e2e::reference::scylla_dir("every_condition_we_write_satisfies_the_item_schema")
        .is_none()
    {
        return;
    }
    let foreign = json!({"type": "Available", "status": "True", "reason": "AsExpected", "message": "",
                         "lastTransitionTime": "2025-12-24T10:00:00Z", "observedGeneration": 3});
    for target in TARGETS {
        let (schema, _) = conditions_schema(&target);
        for condition in our_conditions() {
            // Both shapes the writer produces: a fresh entry, and one replacing an earlier entry.
            let fresh = merge_conditions(
                std::slice::from_ref(&foreign),
                std::slice::from_ref(&condition),
                Some(4),
                jiff::Timestamp::now(),
            );
            let replaced =
                merge_conditions(&fresh, std::slice::from_ref(&condition), Some(5), jiff::Timestamp::now());
            for list in [fresh, replaced] {
                let list = Value::Array(list);
                validate(&schema, &list, &format!("{}: status.conditions", target.crd_file))
                    .unwrap_or_else(|err| panic!("{err}"));
            }
        }
    }
}

#[test]
fn the_check_itself_catches_what_the_api_server_would_reject() {
    if groundskeeper_e2e::reference::scylla_dir("the_check_itself_catches_what_the_api_server_would_reject")
        .is_none()
    {
        return;
    }
    let (schema, _) = conditions_schema(&TARGETS[1]);
    let good = json!({"type": "CleanupControllerDegraded", "status": "False", "reason": "AsExpected", "message": "",
                      "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 1});
    validate(&schema, &json!([good]), "ok").unwrap();
    let broken = |field: &str, value: Value| {
        let mut condition = good.clone();
        if value.is_null() {
            condition.as_object_mut().unwrap().remove(field);
        } else {
            condition[field] = value;
        }
        condition
    };
    for (name, condition, wanted) in [
        ("no reason", broken("reason", Value::Null), "missing required field"),
        ("empty reason", broken("reason", json!("")), "minLength"),
        ("reason with a space", broken("reason", json!("Cleaning Up")), "does not match"),
        ("status not in the enum", broken("status", json!("Yes")), "is not one of"),
        ("time not a date-time", broken("lastTransitionTime", json!("today")), "date-time"),
        ("negative generation", broken("observedGeneration", json!(-1)), "minimum"),
        ("type too long", broken("type", json!("A".repeat(317))), "maxLength"),
        ("unknown field", broken("severity", json!("high")), "not in the schema"),
    ] {
        let err = validate(&schema, &json!([condition]), "c").unwrap_err();
        assert!(err.contains(wanted), "{name}: {err}");
    }
}
