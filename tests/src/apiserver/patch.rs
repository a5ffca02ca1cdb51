//! PATCH bodies: JSON merge patch (RFC 7386), JSON patch (RFC 6902) and strategic merge patch.
//!
//! Strategic merge patch is merge patch plus, for the list fields below, merging list items by
//! their merge key (`$patch: delete` on an item removes it; `[{"$patch": "replace"}, …]` replaces
//! the list) and set-merging `metadata.finalizers`. Other directives (`$retainKeys`,
//! `$setElementOrder/…`) are accepted and ignored; `$deleteFromPrimitiveList/<field>` is honoured.
//! Every list not named here is replaced whole, as it is for atomic lists in the real API.

use serde_json::{Map, Value};

/// The patch formats, by their `Content-Type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchFormat {
    Merge,
    Json,
    Strategic,
    Apply,
}

impl PatchFormat {
    pub fn from_content_type(content_type: &str) -> Option<Self> {
        match content_type.split(';').next().unwrap_or("").trim() {
            "application/merge-patch+json" => Some(PatchFormat::Merge),
            "application/json-patch+json" => Some(PatchFormat::Json),
            "application/strategic-merge-patch+json" => Some(PatchFormat::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+cbor" => Some(PatchFormat::Apply),
            _ => None,
        }
    }
}

/// Applies a JSON patch; the error text says which operation failed.
pub fn json_patch(target: &mut Value, patch: &Value) -> Result<(), String> {
    let operations: json_patch::Patch =
        serde_json::from_value(patch.clone()).map_err(|e| format!("invalid JSON patch: {e}"))?;
    json_patch::patch(target, &operations.0).map_err(|e| e.to_string())
}

/// How the items of a list field are merged by a strategic merge patch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ListMerge {
    ByKey(&'static str),
    Set,
    Replace,
}

/// The list fields of the built-in types with a merge strategy (their `patchMergeKey`).
fn list_merge(path: &[String], field: &str) -> ListMerge {
    let inside_container =
        path.iter().any(|p| matches!(p.as_str(), "containers" | "initContainers" | "ephemeralContainers"));
    match field {
        "conditions" => ListMerge::ByKey("type"),
        "containers" | "initContainers" | "ephemeralContainers" | "env" | "volumes" | "imagePullSecrets" => {
            ListMerge::ByKey("name")
        }
        "volumeMounts" => ListMerge::ByKey("mountPath"),
        "volumeDevices" => ListMerge::ByKey("devicePath"),
        "ports" if inside_container => ListMerge::ByKey("containerPort"),
        "ports" => ListMerge::ByKey("port"),
        "ownerReferences" => ListMerge::ByKey("uid"),
        "finalizers" => ListMerge::Set,
        _ => ListMerge::Replace,
    }
}

/// Applies a strategic merge patch to `target`.
pub fn strategic_merge(target: &mut Value, patch: &Value) -> Result<(), String> {
    let Value::Object(patch) = patch else {
        return Err("a strategic merge patch must be a JSON object".into());
    };
    merge_map(target, patch, &mut Vec::new())
}

fn merge_map(target: &mut Value, patch: &Map<String, Value>, path: &mut Vec<String>) -> Result<(), String> {
    match patch.get("$patch").and_then(Value::as_str) {
        Some("replace") => {
            *target = Value::Object(without_directives(patch));
            return Ok(());
        }
        Some("delete") => {
            *target = Value::Null;
            return Ok(());
        }
        Some(other) => return Err(format!("unknown patch directive $patch: {other}")),
        None => {}
    }
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Value::Object(map) = target else { unreachable!("made an object above") };
    for (key, value) in patch {
        if key.starts_with('$') {
            continue;
        }
        path.push(key.clone());
        match value {
            Value::Null => {
                map.remove(key);
            }
            Value::Object(inner) => {
                let slot = map.entry(key.clone()).or_insert(Value::Null);
                merge_map(slot, inner, path)?;
                if slot.is_null() {
                    map.remove(key);
                }
            }
            Value::Array(items) => {
                let current = map.remove(key);
                let merged = merge_list(current, items, list_merge(path, key), path)?;
                map.insert(key.clone(), merged);
            }
            scalar => {
                map.insert(key.clone(), scalar.clone());
            }
        }
        path.pop();
    }
    // Removals from primitive lists apply after the fields are merged.
    for (key, value) in patch {
        if let Some(field) = key.strip_prefix("$deleteFromPrimitiveList/")
            && let (Some(Value::Array(items)), Value::Array(gone)) = (map.get_mut(field), value)
        {
            items.retain(|item| !gone.contains(item));
        }
    }
    Ok(())
}

fn merge_list(
    current: Option<Value>,
    patch: &[Value],
    how: ListMerge,
    path: &mut Vec<String>,
) -> Result<Value, String> {
    let replace_all = patch.iter().any(|item| item.get("$patch").and_then(Value::as_str) == Some("replace"));
    let current = match current {
        Some(Value::Array(items)) if !replace_all => items,
        _ => Vec::new(),
    };
    match how {
        ListMerge::Replace => Ok(Value::Array(patch.to_vec())),
        _ if replace_all => {
            Ok(Value::Array(patch.iter().filter(|item| item.get("$patch").is_none()).cloned().collect()))
        }
        ListMerge::Set => {
            let mut items = current;
            for item in patch {
                if !items.contains(item) {
                    items.push(item.clone());
                }
            }
            Ok(Value::Array(items))
        }
        ListMerge::ByKey(key) => merge_keyed_list(current, patch, key, path),
    }
}

fn merge_keyed_list(
    mut items: Vec<Value>,
    patch: &[Value],
    key: &str,
    path: &mut Vec<String>,
) -> Result<Value, String> {
    for entry in patch {
        let Value::Object(entry_map) = entry else {
            return Err(format!("list {} is merged by {key:?}: its items must be objects", path.join(".")));
        };
        let Some(wanted) = entry_map.get(key) else {
            return Err(format!("list {} is merged by {key:?}: an item lacks it", path.join(".")));
        };
        let position = items.iter().position(|item| item.get(key) == Some(wanted));
        let deleting = entry_map.get("$patch").and_then(Value::as_str) == Some("delete");
        match (position, deleting) {
            (Some(i), true) => {
                items.remove(i);
            }
            (None, true) => {}
            (Some(i), false) => merge_map(&mut items[i], entry_map, path)?,
            (None, false) => items.push(Value::Object(without_directives(entry_map))),
        }
    }
    Ok(Value::Array(items))
}

fn without_directives(map: &Map<String, Value>) -> Map<String, Value> {
    map.iter().filter(|(k, _)| !k.starts_with('$')).map(|(k, v)| (k.clone(), v.clone())).collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn smp(target: Value, patch: Value) -> Value {
        let mut target = target;
        strategic_merge(&mut target, &patch).unwrap();
        target
    }

    #[test]
    fn conditions_merge_by_type() {
        let job = json!({ "status": { "conditions": [
            { "type": "Complete", "status": "False" },
            { "type": "Other", "status": "True" }
        ]}});
        let patched = smp(
            job,
            json!({ "status": { "conditions": [
                { "type": "Complete", "status": "True", "reason": "Done" },
                { "type": "Failed", "status": "False" }
            ]}}),
        );
        assert_eq!(
            patched["status"]["conditions"],
            json!([
                { "type": "Complete", "status": "True", "reason": "Done" },
                { "type": "Other", "status": "True" },
                { "type": "Failed", "status": "False" }
            ])
        );
    }

    #[test]
    fn item_delete_list_replace_and_atomic_lists() {
        let pod = json!({ "spec": {
            "containers": [{ "name": "a", "image": "x", "ports": [{ "containerPort": 80 }] }, { "name": "b" }],
            "tolerations": [{ "key": "t1" }]
        }});
        let patched = smp(
            pod.clone(),
            json!({ "spec": {
                "containers": [{ "name": "b", "$patch": "delete" }, { "name": "a", "ports": [{ "containerPort": 81 }] }],
                "tolerations": [{ "key": "t2" }]
            }}),
        );
        assert_eq!(
            patched["spec"]["containers"],
            json!([
                { "name": "a", "image": "x", "ports": [{ "containerPort": 80 }, { "containerPort": 81 }] }
            ])
        );
        assert_eq!(patched["spec"]["tolerations"], json!([{ "key": "t2" }]));
        let replaced =
            smp(pod, json!({ "spec": { "containers": [{ "$patch": "replace" }, { "name": "c" }] } }));
        assert_eq!(replaced["spec"]["containers"], json!([{ "name": "c" }]));
    }

    #[test]
    fn finalizers_set_merge_and_null_deletes() {
        let object = json!({ "metadata": { "finalizers": ["a"], "labels": { "x": "1", "y": "2" } } });
        let patched = smp(
            object,
            json!({ "metadata": {
                "finalizers": ["a", "b"], "labels": { "x": null },
                "$deleteFromPrimitiveList/finalizers": ["a"]
            }}),
        );
        assert_eq!(patched["metadata"], json!({ "finalizers": ["b"], "labels": { "y": "2" } }));
    }

    #[test]
    fn merge_key_missing_is_an_error() {
        let mut target = json!({ "status": { "conditions": [] } });
        let err =
            strategic_merge(&mut target, &json!({ "status": { "conditions": [{ "status": "True" }] } }));
        assert!(err.unwrap_err().contains("status.conditions"));
    }

    #[test]
    fn content_types() {
        assert_eq!(PatchFormat::from_content_type("application/merge-patch+json"), Some(PatchFormat::Merge));
        assert_eq!(
            PatchFormat::from_content_type("application/strategic-merge-patch+json; charset=utf-8"),
            Some(PatchFormat::Strategic)
        );
        assert_eq!(PatchFormat::from_content_type("application/json-patch+json"), Some(PatchFormat::Json));
        assert_eq!(PatchFormat::from_content_type("application/apply-patch+yaml"), Some(PatchFormat::Apply));
        assert_eq!(PatchFormat::from_content_type("text/plain"), None);
    }
}
