//! The `x-kubernetes-validations` CEL rules of a schema, evaluated with kube-cel as
//! kube-apiserver evaluates them (`apiextensions-apiserver/pkg/apiserver/schema/cel`, Kubernetes
//! 1.33): at every node that has a value, `oldSelf` being the old object's value at the same
//! place (by property, map key, or `x-kubernetes-list-map-keys` for `map` lists), transition rules
//! skipped where there is none.
//!
//! Each node's rules are compiled on their own (the node's schema with the rules below it
//! removed, so that types and formats still shape the values), so that their errors are placed,
//! ordered and worded here: `spec: Invalid value: "object": MESSAGE`, at the rule's `fieldPath`
//! when it has one, `Forbidden`/`Required`/`Duplicate` for the rule's `reason`.

use kube_cel::{CompiledSchema, ErrorKind, ValidationError};
use serde_json::Value;

use super::go_format::quote;
use super::{ByNode, each_node, escape_pointer};
use crate::apiserver::error::{ErrorType, FieldError};

#[derive(Debug, Default)]
pub(crate) struct Rules(ByNode<CompiledSchema>);

impl Rules {
    pub fn compile(schema: &Value) -> Self {
        let mut compiled = ByNode::new();
        each_node(schema, "", &mut |node, pointer| {
            if node
                .get("x-kubernetes-validations")
                .is_some_and(|r| r.as_array().is_some_and(|r| !r.is_empty()))
            {
                compiled
                    .insert(pointer.to_string(), kube_cel::compile_schema(&without_nested_rules(node, true)));
            }
        });
        Rules(compiled)
    }

    /// The rules' field errors for `object` (`old`: the stored object, on updates).
    pub fn check(&self, schema: &Value, object: &Value, old: Option<&Value>) -> Vec<FieldError> {
        let mut errors = Vec::new();
        if !self.0.is_empty() {
            self.node(schema, "", object, old, "", &mut errors);
        }
        errors
    }

    fn node(
        &self,
        schema: &Value,
        pointer: &str,
        value: &Value,
        old: Option<&Value>,
        path: &str,
        errors: &mut Vec<FieldError>,
    ) {
        if value.is_null() {
            return;
        }
        if let Some(compiled) = self.0.get(pointer)
            && let Err(failures) = kube_cel::validate_compiled(compiled, value, old)
        {
            errors.extend(failures.iter().map(|failure| field_error(schema, path, failure)));
        }
        match value {
            Value::Object(map) => {
                for (key, child) in map {
                    let old_child = old.and_then(|o| o.get(key));
                    if let Some(property) = schema.get("properties").and_then(|p| p.get(key)) {
                        let pointer = format!("{pointer}/properties/{}", escape_pointer(key));
                        self.node(
                            property,
                            &pointer,
                            child,
                            old_child,
                            &super::child_path(path, key),
                            errors,
                        );
                    } else if let Some(values) = schema.get("additionalProperties").filter(|s| s.is_object())
                    {
                        let pointer = format!("{pointer}/additionalProperties");
                        self.node(values, &pointer, child, old_child, &format!("{path}[{key}]"), errors);
                    }
                }
            }
            Value::Array(items) => {
                let Some(item_schema) = schema.get("items") else { return };
                let pointer = format!("{pointer}/items");
                for (i, item) in items.iter().enumerate() {
                    let old_item = old.and_then(|o| correlated_item(schema, item, o));
                    self.node(item_schema, &pointer, item, old_item, &format!("{path}[{i}]"), errors);
                }
            }
            _ => {}
        }
    }
}

/// The node with the rules of its descendants removed (its own kept when `keep` is true).
fn without_nested_rules(node: &Value, keep: bool) -> Value {
    match node {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(key, _)| keep || key.as_str() != "x-kubernetes-validations")
                .map(|(key, child)| {
                    let child = match key.as_str() {
                        "properties" => map_values(child, |c| without_nested_rules(c, false)),
                        "items" | "additionalProperties" => without_nested_rules(child, false),
                        _ => child.clone(),
                    };
                    (key.clone(), child)
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

fn map_values(object: &Value, f: impl Fn(&Value) -> Value) -> Value {
    match object {
        Value::Object(map) => Value::Object(map.iter().map(|(k, v)| (k.clone(), f(v))).collect()),
        other => other.clone(),
    }
}

/// The old item an item of a `map` list corresponds to (same key fields); items of other lists
/// have none, as in the real API.
fn correlated_item<'a>(schema: &Value, item: &Value, old: &'a Value) -> Option<&'a Value> {
    if schema.get("x-kubernetes-list-type").and_then(Value::as_str) != Some("map") {
        return None;
    }
    let keys: Vec<&str> =
        schema.get("x-kubernetes-list-map-keys")?.as_array()?.iter().filter_map(Value::as_str).collect();
    old.as_array()?.iter().find(|o| keys.iter().all(|k| o.get(*k) == item.get(*k)))
}

/// A rule's failure as kube-apiserver reports it at the node `path` of schema `schema`.
fn field_error(schema: &Value, path: &str, failure: &ValidationError) -> FieldError {
    let node_type = quote(schema.get("type").and_then(Value::as_str).unwrap_or_default());
    if failure.kind != ErrorKind::ValidationFailure {
        return FieldError {
            kind: ErrorType::Invalid,
            field: field_or_nil(path),
            value: Some(node_type),
            detail: failure_detail(schema, failure),
        };
    }
    let relative = failure.field_path.trim_start_matches('.');
    let field = match (path, relative) {
        (path, "") => field_or_nil(path),
        ("", relative) => relative.to_string(),
        (path, relative) => format!("{path}.{relative}"),
    };
    let detail = failure.message.trim().to_string();
    match failure.reason.as_deref() {
        Some("FieldValueForbidden") => FieldError { kind: ErrorType::Forbidden, field, value: None, detail },
        Some("FieldValueRequired") => FieldError { kind: ErrorType::Required, field, value: None, detail },
        Some("FieldValueDuplicate") => {
            FieldError { kind: ErrorType::Duplicate, field, value: Some(node_type), detail: String::new() }
        }
        _ => FieldError { kind: ErrorType::Invalid, field, value: Some(node_type), detail },
    }
}

fn field_or_nil(path: &str) -> String {
    if path.is_empty() { "<nil>".into() } else { path.to_string() }
}

/// What a rule that could not be evaluated says: `ERROR evaluating rule: MESSAGE-OR-RULE`.
fn failure_detail(schema: &Value, failure: &ValidationError) -> String {
    let declared = schema
        .get("x-kubernetes-validations")
        .and_then(Value::as_array)
        .and_then(|rules| rules.iter().find(|r| r["rule"].as_str() == Some(failure.rule.as_str())));
    let message = declared.and_then(|r| r["message"].as_str()).map(str::trim).unwrap_or_default();
    let named = if message.is_empty() { failure.rule.trim() } else { message };
    match failure.kind {
        ErrorKind::EvaluationError => {
            let cause =
                std::error::Error::source(failure).map_or_else(|| failure.message.clone(), |s| s.to_string());
            format!("{cause} evaluating rule: {named}")
        }
        _ => format!("{} (rule: {named})", failure.message),
    }
}
