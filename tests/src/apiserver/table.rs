//! Table output (`Accept: application/json;as=Table;g=meta.k8s.io;v=v1`), what `kubectl get`
//! asks for and prints.
//!
//! As the real API: a custom resource's columns are `Name` then its CRD's
//! `additionalPrinterColumns` (a string column printed as Kubernetes' JSONPath prints a value, a
//! `date` column as a relative age such as `5m12s`, a missing value as an empty cell); the
//! built-in types groundskeeper touches have their usual columns (a Job's completions and
//! duration, a Pod's ready containers, status and restarts…), and any other type has `Name` and
//! `Created At`, as the API's default table. Each row carries the object's metadata as a
//! `PartialObjectMetadata` (`includeObject=Metadata`, the default), the whole object with
//! `includeObject=Object`, nothing with `None`.

use http::HeaderMap;
use jiff::Timestamp;
use serde_json::{Value, json};

use super::error::ApiError;
use super::resources::ResourceType;

/// A column of the CRD's `additionalPrinterColumns`.
#[derive(Clone, Debug, PartialEq)]
pub struct PrinterColumn {
    pub name: String,
    pub type_: String,
    pub format: String,
    pub description: String,
    pub priority: i64,
    pub json_path: String,
}

impl PrinterColumn {
    /// The column a CRD without `additionalPrinterColumns` gets.
    pub fn age() -> PrinterColumn {
        PrinterColumn {
            name: "Age".into(),
            type_: "date".into(),
            format: String::new(),
            description: String::new(),
            priority: 0,
            json_path: ".metadata.creationTimestamp".into(),
        }
    }

    /// The columns of a CRD version (`spec.versions[i]`), in order.
    pub fn of_version(version: &Value) -> Vec<PrinterColumn> {
        let Some(columns) = version["additionalPrinterColumns"].as_array() else { return Vec::new() };
        columns
            .iter()
            .map(|c| {
                let text = |field: &str| c[field].as_str().unwrap_or_default().to_string();
                PrinterColumn {
                    name: text("name"),
                    type_: text("type"),
                    format: text("format"),
                    description: text("description"),
                    priority: c["priority"].as_i64().unwrap_or(0),
                    json_path: text("jsonPath"),
                }
            })
            .collect()
    }
}

/// Whether the client asked for a Table (kubectl offers Table first, plain JSON after).
pub(crate) fn wants_table(headers: &HeaderMap) -> bool {
    headers.get_all(http::header::ACCEPT).iter().filter_map(|v| v.to_str().ok()).any(|accept| {
        accept.split(',').any(|offer| {
            let params: Vec<&str> = offer.split(';').map(str::trim).collect();
            params.contains(&"as=Table") && params.contains(&"g=meta.k8s.io")
        })
    })
}

/// What each row carries of its object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IncludeObject {
    None,
    Metadata,
    Object,
}

impl IncludeObject {
    pub(crate) fn parse(value: Option<&String>) -> Result<Self, ApiError> {
        match value.map(String::as_str) {
            None | Some("" | "Metadata") => Ok(IncludeObject::Metadata),
            Some("Object") => Ok(IncludeObject::Object),
            Some("None") => Ok(IncludeObject::None),
            Some(other) => Err(ApiError::bad_request(format!(
                "includeObject: Unsupported value: {other:?}: supported values: \"None\", \"Metadata\", \"Object\""
            ))),
        }
    }
}

/// The Table of `objects` (one for a GET of one object, all for a list).
pub(crate) fn table(
    rt: &ResourceType,
    objects: &[Value],
    resource_version: &str,
    continue_token: Option<&str>,
    include: IncludeObject,
    now: Timestamp,
) -> Value {
    let columns = columns_of(rt);
    let rows: Vec<Value> = objects
        .iter()
        .map(|object| {
            let cells: Vec<Value> = columns.iter().map(|c| c.cell(object, now)).collect();
            let mut row = json!({ "cells": cells });
            match include {
                IncludeObject::None => {}
                IncludeObject::Metadata => row["object"] = partial_metadata(object),
                IncludeObject::Object => row["object"] = object.clone(),
            }
            row
        })
        .collect();
    let mut metadata = json!({ "resourceVersion": resource_version });
    if let Some(token) = continue_token {
        metadata["continue"] = token.into();
    }
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
        "columnDefinitions": columns.iter().map(Column::definition).collect::<Vec<_>>(),
        "rows": rows,
    })
}

fn partial_metadata(object: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": object["metadata"],
    })
}

/// How a column finds its cell.
enum Cell {
    Name,
    /// A CRD column: its JSONPath and type.
    Path {
        path: String,
        type_: String,
    },
    /// The age of the RFC 3339 time at this JSON pointer.
    Age(&'static str),
    /// The time at this pointer as it is (the default table's `Created At`).
    Time(&'static str),
    /// A built-in column computed from the object.
    Built(fn(&Value, Timestamp) -> Value),
}

struct Column {
    name: String,
    type_: String,
    format: String,
    description: String,
    priority: i64,
    cell: Cell,
}

impl Column {
    fn new(name: &str, type_: &str, description: &str, cell: Cell) -> Self {
        Column {
            name: name.to_string(),
            type_: type_.to_string(),
            format: String::new(),
            description: description.to_string(),
            priority: 0,
            cell,
        }
    }

    fn name() -> Self {
        let mut column = Column::new(
            "Name",
            "string",
            "Name must be unique within a namespace. Is required when creating resources, although some \
             resources may allow a client to request the generation of an appropriate name \
             automatically. Name is primarily intended for creation idempotence and configuration \
             definition. Cannot be updated.",
            Cell::Name,
        );
        column.format = "name".into();
        column
    }

    fn age() -> Self {
        Column::new(
            "Age",
            "string",
            "CreationTimestamp is a timestamp representing the server time when this object was created.",
            Cell::Age("/metadata/creationTimestamp"),
        )
    }

    fn built(name: &str, type_: &str, description: &str, compute: fn(&Value, Timestamp) -> Value) -> Self {
        Column::new(name, type_, description, Cell::Built(compute))
    }

    fn wide(mut self) -> Self {
        self.priority = 1;
        self
    }

    fn definition(&self) -> Value {
        json!({
            "name": self.name,
            "type": self.type_,
            "format": self.format,
            "description": self.description,
            "priority": self.priority,
        })
    }

    fn cell(&self, object: &Value, now: Timestamp) -> Value {
        match &self.cell {
            Cell::Name => object["metadata"]["name"].clone(),
            Cell::Path { path, type_ } => path_cell(object, path, type_, now),
            Cell::Age(pointer) => age_cell(object.pointer(pointer), now),
            Cell::Time(pointer) => object.pointer(pointer).cloned().unwrap_or(Value::Null),
            Cell::Built(compute) => compute(object, now),
        }
    }
}

fn columns_of(rt: &ResourceType) -> Vec<Column> {
    if let Some(columns) = rt.printer_columns() {
        let mut all = vec![Column::name()];
        all.extend(columns.iter().map(|c| Column {
            name: c.name.clone(),
            type_: c.type_.clone(),
            format: c.format.clone(),
            description: if c.description.is_empty() {
                format!("Custom resource definition column (in JSONPath format): {}", c.json_path)
            } else {
                c.description.clone()
            },
            priority: c.priority,
            cell: Cell::Path { path: c.json_path.clone(), type_: c.type_.clone() },
        }));
        return all;
    }
    builtin_columns(rt).unwrap_or_else(|| {
        vec![
            Column::name(),
            Column::new(
                "Created At",
                "date",
                "CreationTimestamp is a timestamp representing the server time when this object was created.",
                Cell::Time("/metadata/creationTimestamp"),
            ),
        ]
    })
}

/// A CRD column's cell, as apiextensions-apiserver computes it.
fn path_cell(object: &Value, path: &str, type_: &str, now: Timestamp) -> Value {
    let Some(value) = json_path(object, path).into_iter().next() else { return Value::Null };
    match type_ {
        "string" => Value::String(print_value(value)),
        "integer" => value.as_f64().map(|n| json!(n as i64)).unwrap_or(Value::Null),
        "number" => value.as_f64().map(|n| json!(n)).unwrap_or(Value::Null),
        "boolean" => value.as_bool().map(Value::Bool).unwrap_or(Value::Null),
        "date" => match value.as_str() {
            Some(_) => age_cell(Some(value), now),
            None => Value::Null,
        },
        _ => Value::Null,
    }
}

/// A value as Kubernetes' JSONPath prints it: strings bare, anything else as JSON.
fn print_value(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

fn age_cell(time: Option<&Value>, now: Timestamp) -> Value {
    match time.and_then(Value::as_str) {
        None => Value::String("<unknown>".into()),
        Some(text) => match text.parse::<Timestamp>() {
            Ok(then) => Value::String(human_duration(now.as_second() - then.as_second())),
            Err(_) => Value::String("<invalid>".into()),
        },
    }
}

/// A duration in seconds as kubectl shows ages (apimachinery's `duration.HumanDuration`).
pub(crate) fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".into();
    }
    if seconds < 0 {
        return "0s".into();
    }
    if seconds < 120 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        return match seconds % 60 {
            0 => format!("{minutes}m"),
            s => format!("{minutes}m{s}s"),
        };
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = seconds / 3600;
    if hours < 8 {
        return match minutes % 60 {
            0 => format!("{hours}h"),
            m => format!("{hours}h{m}m"),
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        return match hours % 24 {
            0 => format!("{}d", hours / 24),
            h => format!("{}d{h}h", hours / 24),
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        return match (hours / 24) % 365 {
            0 => format!("{}y", hours / 24 / 365),
            d => format!("{}y{d}d", hours / 24 / 365),
        };
    }
    format!("{}y", hours / 24 / 365)
}

/// The values Kubernetes' JSONPath finds for a printer column's simple path: `.a.b`, `.a[0]`,
/// `.a[*].b` and filters `.a[?(@.type=='Ready')].b` (either quote), which is all CRD columns use.
pub(crate) fn json_path<'a>(object: &'a Value, path: &str) -> Vec<&'a Value> {
    let mut current = vec![object];
    for step in steps(path) {
        current = current.into_iter().flat_map(|value| step.apply(value)).collect();
    }
    current
}

enum Step {
    Field(String),
    Index(usize),
    All,
    Filter { field: String, equals: String },
}

impl Step {
    fn apply<'a>(&self, value: &'a Value) -> Vec<&'a Value> {
        match (self, value) {
            (Step::Field(name), Value::Object(map)) => map.get(name).into_iter().collect(),
            (Step::Index(i), Value::Array(items)) => items.get(*i).into_iter().collect(),
            (Step::All, Value::Array(items)) => items.iter().collect(),
            (Step::All, Value::Object(map)) => map.values().collect(),
            (Step::Filter { field, equals }, Value::Array(items)) => items
                .iter()
                .filter(|item| item.get(field).is_some_and(|v| print_value(v) == *equals))
                .collect(),
            _ => Vec::new(),
        }
    }
}

fn steps(path: &str) -> Vec<Step> {
    let mut steps = Vec::new();
    let mut rest = path.trim().trim_start_matches('{').trim_end_matches('}').trim_start_matches('$');
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('.') {
            let end = after.find(['.', '[']).unwrap_or(after.len());
            if end > 0 {
                steps.push(Step::Field(after[..end].to_string()));
            }
            rest = &after[end..];
        } else if let Some(after) = rest.strip_prefix('[') {
            let end = after.find(']').unwrap_or(after.len());
            steps.push(bracket(&after[..end]));
            rest = after.get(end + 1..).unwrap_or_default();
        } else {
            let end = rest.find(['.', '[']).unwrap_or(rest.len());
            steps.push(Step::Field(rest[..end].to_string()));
            rest = &rest[end..];
        }
    }
    steps
}

fn bracket(inner: &str) -> Step {
    let inner = inner.trim();
    if inner == "*" {
        return Step::All;
    }
    if let Ok(i) = inner.parse() {
        return Step::Index(i);
    }
    let filter = inner.strip_prefix("?(").and_then(|f| f.strip_suffix(')'));
    if let Some((left, right)) = filter.and_then(|f| f.split_once("==")) {
        let field = left.trim().trim_start_matches("@.").to_string();
        let equals = right.trim().trim_matches(['\'', '"']).to_string();
        return Step::Filter { field, equals };
    }
    Step::Field(inner.trim_matches(['\'', '"']).to_string())
}

/// The columns the real API prints for the built-in types groundskeeper touches.
fn builtin_columns(rt: &ResourceType) -> Option<Vec<Column>> {
    let columns = match (rt.id.group.as_str(), rt.kind.as_str()) {
        ("batch", "Job") => vec![
            Column::name(),
            Column::built("Status", "string", "Status of the job.", job_status),
            Column::built("Completions", "string", "The completion status of the job.", job_completions),
            Column::built("Duration", "string", "Time required to complete the job.", job_duration),
            Column::age(),
            Column::built("Containers", "string", "Names of each container in the template.", |o, _| {
                containers(o, "/spec/template/spec/containers", "name")
            })
            .wide(),
            Column::built(
                "Images",
                "string",
                "Images referenced by each container in the template.",
                |o, _| containers(o, "/spec/template/spec/containers", "image"),
            )
            .wide(),
        ],
        ("", "Pod") => vec![
            Column::name(),
            Column::built("Ready", "string", "The aggregate readiness state of this pod.", pod_ready),
            Column::built(
                "Status",
                "string",
                "The aggregate status of the containers in this pod.",
                pod_status,
            ),
            Column::built(
                "Restarts",
                "string",
                "The number of times the containers in this pod have been restarted.",
                pod_restarts,
            ),
            Column::age(),
            Column::built("IP", "string", "The IP address assigned to the pod.", |o, _| {
                text_at(o, "/status/podIP")
            })
            .wide(),
            Column::built("Node", "string", "The name of the node where the pod runs.", |o, _| {
                text_at(o, "/spec/nodeName")
            })
            .wide(),
        ],
        ("apps", "StatefulSet") => vec![
            Column::name(),
            Column::built("Ready", "string", "Number of the pod with ready state.", |o, _| {
                let ready = o.pointer("/status/readyReplicas").and_then(Value::as_i64).unwrap_or(0);
                let wanted = o.pointer("/spec/replicas").and_then(Value::as_i64).unwrap_or(1);
                json!(format!("{ready}/{wanted}"))
            }),
            Column::age(),
        ],
        ("", "ConfigMap") => vec![
            Column::name(),
            Column::built("Data", "integer", "Number of data in the ConfigMap.", |o, _| {
                let count = |f: &str| o[f].as_object().map_or(0, |m| m.len());
                json!(count("data") + count("binaryData"))
            }),
            Column::age(),
        ],
        ("", "Secret") => vec![
            Column::name(),
            Column::built("Type", "string", "The type of the secret.", |o, _| {
                json!(o["type"].as_str().unwrap_or("Opaque"))
            }),
            Column::built("Data", "integer", "Number of data in the secret.", |o, _| {
                json!(o["data"].as_object().map_or(0, |m| m.len()))
            }),
            Column::age(),
        ],
        ("coordination.k8s.io", "Lease") => vec![
            Column::name(),
            Column::built("Holder", "string", "The holder of the lease.", |o, _| {
                text_at(o, "/spec/holderIdentity")
            }),
            Column::age(),
        ],
        ("", "Namespace") => vec![
            Column::name(),
            Column::built("Status", "string", "The status of the namespace.", |o, _| {
                json!(o.pointer("/status/phase").and_then(Value::as_str).unwrap_or("Active"))
            }),
            Column::age(),
        ],
        ("", "Event") => vec![
            Column::built("Last Seen", "string", "Time since the event was last seen.", |o, now| {
                let seen = ["/lastTimestamp", "/eventTime", "/metadata/creationTimestamp"]
                    .iter()
                    .find_map(|p| o.pointer(p).filter(|v| v.is_string()));
                age_cell(seen, now)
            }),
            Column::built("Type", "string", "Type of this event.", |o, _| text_at(o, "/type")),
            Column::built("Reason", "string", "Reason why this event was generated.", |o, _| {
                text_at(o, "/reason")
            }),
            Column::built("Object", "string", "The object this event is about.", |o, _| {
                let kind = o.pointer("/involvedObject/kind").and_then(Value::as_str).unwrap_or_default();
                let name = o.pointer("/involvedObject/name").and_then(Value::as_str).unwrap_or_default();
                json!(format!("{}/{name}", kind.to_lowercase()))
            }),
            Column::built(
                "Message",
                "string",
                "A human-readable description of the status of this operation.",
                |o, _| text_at(o, "/message"),
            ),
        ],
        _ => return None,
    };
    Some(columns)
}

fn text_at(object: &Value, pointer: &str) -> Value {
    json!(object.pointer(pointer).and_then(Value::as_str).unwrap_or("<none>"))
}

fn containers(object: &Value, pointer: &str, field: &str) -> Value {
    let items = object.pointer(pointer).and_then(Value::as_array).cloned().unwrap_or_default();
    let names: Vec<&str> = items.iter().filter_map(|c| c[field].as_str()).collect();
    json!(names.join(","))
}

fn has_condition(object: &Value, type_: &str) -> bool {
    object
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|conditions| conditions.iter().any(|c| c["type"] == type_ && c["status"] == "True"))
}

fn job_status(object: &Value, _: Timestamp) -> Value {
    let status = if has_condition(object, "Complete") {
        "Complete"
    } else if has_condition(object, "Failed") {
        "Failed"
    } else if has_condition(object, "Suspended") {
        "Suspended"
    } else if object.pointer("/metadata/deletionTimestamp").is_some() {
        "Terminating"
    } else {
        "Running"
    };
    json!(status)
}

fn job_completions(object: &Value, _: Timestamp) -> Value {
    let succeeded = object.pointer("/status/succeeded").and_then(Value::as_i64).unwrap_or(0);
    match object.pointer("/spec/completions").and_then(Value::as_i64) {
        Some(completions) => json!(format!("{succeeded}/{completions}")),
        None => {
            let parallelism = object.pointer("/spec/parallelism").and_then(Value::as_i64).unwrap_or(1);
            json!(format!("{succeeded}/1 of {parallelism}"))
        }
    }
}

fn job_duration(object: &Value, now: Timestamp) -> Value {
    let at = |pointer: &str| {
        object.pointer(pointer).and_then(Value::as_str).and_then(|t| t.parse::<Timestamp>().ok())
    };
    match at("/status/startTime") {
        None => json!(""),
        Some(start) => {
            let end = at("/status/completionTime").unwrap_or(now);
            json!(human_duration(end.as_second() - start.as_second()))
        }
    }
}

fn pod_ready(object: &Value, _: Timestamp) -> Value {
    let statuses =
        object.pointer("/status/containerStatuses").and_then(Value::as_array).cloned().unwrap_or_default();
    let total = object.pointer("/spec/containers").and_then(Value::as_array).map_or(0, Vec::len);
    let ready = statuses.iter().filter(|s| s["ready"] == true).count();
    json!(format!("{ready}/{total}"))
}

fn pod_status(object: &Value, _: Timestamp) -> Value {
    if object.pointer("/metadata/deletionTimestamp").is_some() {
        return json!("Terminating");
    }
    let statuses =
        object.pointer("/status/containerStatuses").and_then(Value::as_array).cloned().unwrap_or_default();
    for status in &statuses {
        for state in ["waiting", "terminated"] {
            if let Some(reason) = status["state"][state]["reason"].as_str() {
                return json!(reason);
            }
        }
    }
    json!(object.pointer("/status/phase").and_then(Value::as_str).unwrap_or("Pending"))
}

fn pod_restarts(object: &Value, _: Timestamp) -> Value {
    let statuses =
        object.pointer("/status/containerStatuses").and_then(Value::as_array).cloned().unwrap_or_default();
    json!(statuses.iter().filter_map(|s| s["restartCount"].as_i64()).sum::<i64>().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_read_as_kubectl_shows_them() {
        let cases = [
            (-5, "<invalid>"),
            (-1, "0s"),
            (0, "0s"),
            (119, "119s"),
            (120, "2m"),
            (125, "2m5s"),
            (600, "10m"),
            (3 * 3600 - 1, "179m"),
            (3 * 3600, "3h"),
            (3 * 3600 + 60, "3h1m"),
            (8 * 3600, "8h"),
            (48 * 3600, "2d"),
            (49 * 3600, "2d1h"),
            (8 * 86400, "8d"),
            (2 * 365 * 86400, "2y"),
            (2 * 365 * 86400 + 86400, "2y1d"),
            (9 * 365 * 86400, "9y"),
        ];
        for (seconds, shown) in cases {
            assert_eq!(human_duration(seconds), shown, "{seconds} s");
        }
    }

    #[test]
    fn printer_column_paths_find_fields_items_and_filtered_conditions() {
        let object = json!({
            "spec": {"type": "Compact", "list": [1, 2]},
            "status": {"conditions": [
                {"type": "Queued", "status": "True", "reason": "AwaitingApproval"},
                {"type": "Ready", "status": "False", "reason": "Pending"},
            ]},
        });
        assert_eq!(json_path(&object, ".spec.type"), vec![&json!("Compact")]);
        assert_eq!(json_path(&object, ".spec.list[1]"), vec![&json!(2)]);
        assert_eq!(
            json_path(&object, ".status.conditions[?(@.type=='Queued')].reason"),
            vec![&json!("AwaitingApproval")]
        );
        assert_eq!(
            json_path(&object, ".status.conditions[?(@.type==\"Ready\")].status"),
            vec![&json!("False")]
        );
        assert!(json_path(&object, ".status.missing.deeper").is_empty());
        assert_eq!(json_path(&object, ".status.conditions[*].type").len(), 2);
    }
}
