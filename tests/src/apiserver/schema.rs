//! Custom resources held to their CRD's schema, as kube-apiserver holds them.
//!
//! The schemas are the CRD manifests' own (`schema.openAPIV3Schema` of the served version, see
//! [`super::crds`]): groundskeeper's from `manifests/crds/`, scylla-operator's ScyllaCluster and
//! ScyllaDBDatacenter from the reference folder when it is there. Without that folder those two
//! types have no schema and anything is stored as sent; SIG etcd-operator's EtcdCluster never has
//! one. A schema is prepared (patterns and CEL rules compiled) once per process, when an object of
//! its type is first written, so scylla-operator's 1 MB of CRDs are read only by the tests that
//! write its resources.
//!
//! What a write goes through, in kube-apiserver's order (`customresource_handler.go`, the
//! `customResourceStrategy`):
//!
//! 1. **Decoding** ([`decode`]): unknown fields are dropped — those the schema does not declare
//!    (kept under `x-kubernetes-preserve-unknown-fields`, in `additionalProperties` maps, and
//!    `apiVersion`/`kind`/`metadata` of the root and of `x-kubernetes-embedded-resource`
//!    objects) and the top-level `metadata` fields `ObjectMeta` does not have. Their paths are
//!    what `fieldValidation` reports. Then nulls of non-nullable fields without a default are
//!    dropped, and `default`s fill absent fields and non-nullable nulls (structural defaulting).
//! 2. **Validation** ([`validate`]), after the write's own rules built the object to store: the
//!    OpenAPI checks as kube-openapi makes them (types and formats, `nullable`, `enum`, bounds,
//!    lengths, item and property counts, `pattern`, `required`, `x-kubernetes-int-or-string`,
//!    maps), `x-kubernetes-list-type` `set`/`map` uniqueness, then — unless a blocking error was
//!    found — the `x-kubernetes-validations` CEL rules of every node (kube-cel), transition rules
//!    (those naming `oldSelf`) only on updates and where the old value exists. A `/status` write
//!    checks `status` against the status schema (the rest is the stored object's) and runs the
//!    CEL rules over the whole object. Errors are the 422 `Invalid` Status kubectl users see,
//!    with the real messages and one cause per field.
//!
//! Not modelled: `allOf`/`anyOf`/`oneOf`/`not`, `uniqueItems`, `additionalProperties: false`,
//! validation ratcheting (stored objects here always passed the schema they are held to),
//! ObjectMeta checks inside embedded resources, unknown fields nested inside `metadata`,
//! string formats other than `date-time`, `date`, `byte`, `uuid`, `ipv4`, `ipv6` and `cidr`
//! (others pass), CEL cost budgets, and the CEL functions kube-cel lacks (a rule using one is
//! reported as invalid, naming it).

mod go_format;
mod rules;
mod structural;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, OnceLock};

use serde_json::{Map, Value};

use super::error::{ErrorType, FieldError};
use super::resources::{ResourceId, ResourceType};
use super::store::Target;

/// One CRD version's schema, prepared to check objects against.
#[derive(Debug)]
pub struct Schema {
    /// The version's `schema.openAPIV3Schema`.
    pub open_api_v3: Value,
    /// The version's `subresources` (`status`, `scale`), `null` when it has none.
    pub subresources: Value,
    /// The version's `additionalPrinterColumns`, `null` when it declares none.
    pub printer_columns: Value,
    rules: rules::Rules,
    patterns: structural::Patterns,
}

impl Schema {
    fn new(version: &Value) -> Option<Schema> {
        let open_api_v3 = version.pointer("/schema/openAPIV3Schema")?.clone();
        Some(Schema {
            rules: rules::Rules::compile(&open_api_v3),
            patterns: structural::Patterns::compile(&open_api_v3),
            subresources: version["subresources"].clone(),
            printer_columns: version["additionalPrinterColumns"].clone(),
            open_api_v3,
        })
    }

    fn status(&self) -> Option<&Value> {
        self.open_api_v3.pointer("/properties/status")
    }
}

/// The schema custom resources of `rt` are held to, if its CRD is known (prepared on first use,
/// then kept for the process).
pub fn schema_of(rt: &ResourceType) -> Option<&'static Schema> {
    static SCHEMAS: OnceLock<Mutex<BTreeMap<ResourceId, Option<&'static Schema>>>> = OnceLock::new();
    let crd = rt.crd()?;
    let mut schemas = SCHEMAS.get_or_init(Default::default).lock().unwrap_or_else(|p| p.into_inner());
    *schemas
        .entry(rt.id.clone())
        .or_insert_with(|| Schema::new(&crd.version).map(|s| &*Box::leak(Box::new(s))))
}

/// The `fieldValidation` directive of a write: what to do with unknown fields.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FieldValidation {
    /// Refuse the write (400), naming every unknown field.
    Strict,
    /// Drop them, with one `Warning` header each: kube-apiserver's default.
    #[default]
    Warn,
    /// Drop them silently.
    Ignore,
}

impl FieldValidation {
    /// The query parameter's value; `None` for one the API does not know.
    pub fn parse(value: Option<&str>) -> Option<Self> {
        match value.unwrap_or_default() {
            "" | "Warn" => Some(FieldValidation::Warn),
            "Strict" => Some(FieldValidation::Strict),
            "Ignore" => Some(FieldValidation::Ignore),
            _ => None,
        }
    }
}

/// Decodes a written body (or a patched object) as the API's codec does: drops unknown fields,
/// drops non-nullable nulls without a default, applies defaults. Returns the unknown fields'
/// paths (`spec.foo`, `spec.items[0].bar`, `metadata.foo`), metadata's first, the others sorted.
pub(crate) fn decode(schema: &Schema, object: &mut Value) -> Vec<String> {
    let mut unknown = drop_unknown_metadata(object);
    let mut pruned = Vec::new();
    prune(object, Some(&schema.open_api_v3), true, "", &mut pruned);
    pruned.sort();
    unknown.extend(pruned);
    prune_nulls(object, Some(&schema.open_api_v3));
    apply_defaults(object, &schema.open_api_v3);
    unknown
}

/// The field errors of the object a write would store (`old`: the stored one, for updates).
pub(crate) fn validate(
    schema: &Schema,
    object: &Value,
    old: Option<&Value>,
    target: Target,
) -> Vec<FieldError> {
    let mut errors = match (target, schema.status(), object.get("status")) {
        (Target::Main, _, _) => structural::validate(&schema.open_api_v3, object, "", &schema.patterns),
        (Target::Status, Some(status_schema), Some(status)) => {
            structural::validate(status_schema, status, "status", &schema.patterns)
        }
        (Target::Status, _, _) => Vec::new(),
    };
    let old_list_errors = old.map(|old| structural::list_types(&schema.open_api_v3, old));
    if old_list_errors.is_none_or(|e| e.is_empty()) {
        errors.extend(structural::list_types(&schema.open_api_v3, object));
    }
    if errors.iter().any(blocks_rules) {
        errors.push(FieldError {
            kind: ErrorType::Invalid,
            field: "<nil>".into(),
            value: Some(go_format::quote("null")),
            detail: "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation".into(),
        });
    } else {
        errors.extend(schema.rules.check(&schema.open_api_v3, object, old));
    }
    errors
}

/// Errors after which kube-apiserver does not evaluate the CEL rules (`hasBlockingErr`).
fn blocks_rules(error: &FieldError) -> bool {
    matches!(
        error.kind,
        ErrorType::NotSupported
            | ErrorType::Required
            | ErrorType::TooLong
            | ErrorType::TooMany
            | ErrorType::TypeInvalid
    )
}

/// The fields of `ObjectMeta`: other top-level `metadata` fields are dropped when decoding.
const OBJECT_META_FIELDS: [&str; 15] = [
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

fn drop_unknown_metadata(object: &mut Value) -> Vec<String> {
    let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) else {
        return Vec::new();
    };
    let unknown: Vec<String> =
        meta.keys().filter(|k| !OBJECT_META_FIELDS.contains(&k.as_str())).cloned().collect();
    for key in &unknown {
        meta.remove(key);
    }
    unknown.iter().map(|k| format!("metadata.{k}")).collect()
}

fn is_true(schema: &Value, extension: &str) -> bool {
    schema.get(extension).and_then(Value::as_bool) == Some(true)
}

/// The schema of `key` in an object of `schema`: a declared property, else `additionalProperties`.
fn field_schema<'a>(schema: &'a Value, key: &str) -> Option<&'a Value> {
    schema
        .get("properties")
        .and_then(|p| p.get(key))
        .or_else(|| schema.get("additionalProperties").filter(|a| a.is_object()))
}

/// The path of `key` under `parent`, as `UnknownFieldPathOptions` writes it.
fn child_path(parent: &str, key: &str) -> String {
    if parent.is_empty() { key.to_string() } else { format!("{parent}.{key}") }
}

/// Structural pruning (`pruning.PruneWithOptions`): what the schema does not declare goes, and its
/// path is recorded. The root, like embedded resources, keeps `apiVersion`, `kind` and `metadata`.
fn prune(value: &mut Value, schema: Option<&Value>, root: bool, path: &str, unknown: &mut Vec<String>) {
    if let Some(schema) = schema
        && is_true(schema, "x-kubernetes-preserve-unknown-fields")
    {
        return prune_below_preserved(value, schema, root, path, unknown);
    }
    match value {
        Value::Object(map) => prune_object(map, schema, root, path, unknown),
        Value::Array(items) => {
            let item_schema = schema.and_then(|s| s.get("items"));
            for (i, item) in items.iter_mut().enumerate() {
                prune(item, item_schema, false, &format!("{path}[{i}]"), unknown);
            }
        }
        _ => {}
    }
}

fn prune_object(
    map: &mut Map<String, Value>,
    schema: Option<&Value>,
    root: bool,
    path: &str,
    unknown: &mut Vec<String>,
) {
    let embedded = root || schema.is_some_and(|s| is_true(s, "x-kubernetes-embedded-resource"));
    let mut dropped = Vec::new();
    for (key, child) in map.iter_mut() {
        if embedded && matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
            continue;
        }
        match schema.and_then(|s| field_schema(s, key)) {
            Some(child_schema) => prune(child, Some(child_schema), false, &child_path(path, key), unknown),
            None => dropped.push(key.clone()),
        }
    }
    for key in dropped {
        map.remove(&key);
        unknown.push(child_path(path, &key));
    }
}

/// Under `x-kubernetes-preserve-unknown-fields` unknown fields stay, but declared ones are still
/// pruned below (`skipPrune`).
fn prune_below_preserved(
    value: &mut Value,
    schema: &Value,
    root: bool,
    path: &str,
    unknown: &mut Vec<String>,
) {
    match value {
        Value::Object(map) => {
            let embedded = root || is_true(schema, "x-kubernetes-embedded-resource");
            for (key, child) in map.iter_mut() {
                if embedded && matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                if let Some(child_schema) = field_schema(schema, key) {
                    prune(child, Some(child_schema), false, &child_path(path, key), unknown);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter_mut().enumerate() {
                    prune_below_preserved(item, item_schema, false, &format!("{path}[{i}]"), unknown);
                }
            }
        }
        _ => {}
    }
}

fn nullable(schema: &Value) -> bool {
    is_true(schema, "nullable")
}

/// `PruneNonNullableNullsWithoutDefaults`: a null where the schema allows none and has no
/// default is dropped; one with a default is left to defaulting.
fn prune_nulls(value: &mut Value, schema: Option<&Value>) {
    match value {
        Value::Object(map) => {
            let mut dropped = Vec::new();
            for (key, child) in map.iter_mut() {
                let child_schema = schema.and_then(|s| field_schema(s, key));
                let droppable = child_schema.is_some_and(|s| !nullable(s) && s.get("default").is_none());
                if child.is_null() && droppable {
                    dropped.push(key.clone());
                } else {
                    prune_nulls(child, child_schema);
                }
            }
            for key in dropped {
                map.remove(&key);
            }
        }
        Value::Array(items) => {
            let item_schema = schema.and_then(|s| s.get("items"));
            items.iter_mut().for_each(|item| prune_nulls(item, item_schema));
        }
        _ => {}
    }
}

/// Structural defaulting (`defaulting.Default`): an absent field, or a non-nullable null, gets its
/// default; then defaults apply inside (a default object gets its own fields' defaults too).
fn apply_defaults(value: &mut Value, schema: &Value) {
    match value {
        Value::Object(map) => {
            if let Some(Value::Object(properties)) = schema.get("properties") {
                for (key, property) in properties {
                    let Some(default) = property.get("default") else { continue };
                    let absent = map.get(key).is_none_or(|v| v.is_null() && !nullable(property));
                    if absent {
                        map.insert(key.clone(), default.clone());
                    }
                }
            }
            for (key, child) in map.iter_mut() {
                let Some(child_schema) = field_schema(schema, key) else { continue };
                if child.is_null()
                    && !nullable(child_schema)
                    && let Some(default) = child_schema.get("default")
                {
                    *child = default.clone();
                }
                apply_defaults(child, child_schema);
            }
        }
        Value::Array(items) => {
            let Some(item_schema) = schema.get("items") else { return };
            for item in items {
                if item.is_null()
                    && !nullable(item_schema)
                    && let Some(default) = item_schema.get("default")
                {
                    *item = default.clone();
                }
                apply_defaults(item, item_schema);
            }
        }
        _ => {}
    }
}

/// Each compiled thing of a schema, by the JSON pointer of the node it belongs to.
type ByNode<T> = HashMap<String, T>;

/// Calls `visit` on every node of `schema` with its JSON pointer (`/properties/spec/items`…).
fn each_node(schema: &Value, pointer: &str, visit: &mut dyn FnMut(&Value, &str)) {
    visit(schema, pointer);
    if let Some(Value::Object(properties)) = schema.get("properties") {
        for (key, child) in properties {
            each_node(child, &format!("{pointer}/properties/{}", escape_pointer(key)), visit);
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(child) = schema.get(key).filter(|c| c.is_object()) {
            each_node(child, &format!("{pointer}/{key}"), visit);
        }
    }
}

fn escape_pointer(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}
