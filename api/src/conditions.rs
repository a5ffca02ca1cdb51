//! Merging our conditions into a list other controllers share: a pure function.
//!
//! `status.conditions` of scylla-operator's objects is a plain list (no list-map), rebuilt or
//! extended by several writers. Entries we do not own are kept exactly as read, unknown fields
//! included, which is why the list is handled as JSON values rather than typed conditions.

use jiff::Timestamp;
use serde_json::{Map, Value};

/// Longest `message` the Kubernetes condition schema accepts (bytes).
pub const MESSAGE_MAX_LEN: usize = 32768;

/// `status` of a condition.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConditionStatus {
    True,
    False,
    Unknown,
}

impl ConditionStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ConditionStatus::True => "True",
            ConditionStatus::False => "False",
            ConditionStatus::Unknown => "Unknown",
        }
    }
}

impl From<bool> for ConditionStatus {
    fn from(value: bool) -> Self {
        if value { ConditionStatus::True } else { ConditionStatus::False }
    }
}

/// One condition we own, as decided; times and generation are filled in by [`merge_conditions`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Condition {
    /// CamelCase, e.g. `CleanupControllerProgressing`.
    pub type_: String,
    pub status: ConditionStatus,
    /// CamelCase, must match `^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`.
    pub reason: String,
    /// For people: what is happening and, when something is wrong, what to do.
    pub message: String,
}

impl Condition {
    pub fn new(
        type_: impl Into<String>,
        status: impl Into<ConditionStatus>,
        reason: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Self { type_: type_.into(), status: status.into(), reason: reason.into(), message: message.into() }
    }
}

/// The `status` of condition `type_` in a list of conditions, if present.
pub fn condition_status<'a>(conditions: &'a [Value], type_: &str) -> Option<&'a str> {
    conditions
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(type_))
        .and_then(|c| c.get("status"))
        .and_then(Value::as_str)
}

/// `existing` with `ours` merged in: entries of other types kept as they are and where they are;
/// ours replacing the entry of the same type in place, or appended in the order given.
/// `lastTransitionTime` is `now` only for entries whose status changed (or that are new);
/// `observedGeneration` is the generation of the object the list belongs to.
pub fn merge_conditions(
    existing: &[Value],
    ours: &[Condition],
    observed_generation: Option<i64>,
    now: Timestamp,
) -> Vec<Value> {
    let mut merged: Vec<Value> = Vec::with_capacity(existing.len() + ours.len());
    let mut placed = vec![false; ours.len()];
    for entry in existing {
        let type_ = entry.get("type").and_then(Value::as_str);
        match ours.iter().position(|c| Some(c.type_.as_str()) == type_) {
            None => merged.push(entry.clone()),
            // A second entry of one of our types (a list written by hand): drop it, one is enough.
            Some(i) if placed[i] => {}
            Some(i) => {
                placed[i] = true;
                merged.push(render(&ours[i], Some(entry), observed_generation, now));
            }
        }
    }
    for (condition, _) in ours.iter().zip(&placed).filter(|(_, placed)| !**placed) {
        merged.push(render(condition, None, observed_generation, now));
    }
    merged
}

/// One of our conditions as a JSON entry, keeping the previous transition time if its status
/// did not change.
fn render(
    condition: &Condition,
    previous: Option<&Value>,
    observed_generation: Option<i64>,
    now: Timestamp,
) -> Value {
    let status = condition.status.as_str();
    let previous_time = previous
        .filter(|p| p.get("status").and_then(Value::as_str) == Some(status))
        .and_then(|p| p.get("lastTransitionTime"))
        .and_then(Value::as_str)
        .filter(|t| t.parse::<Timestamp>().is_ok());
    let transition_time = previous_time.map_or_else(|| format_time(now), str::to_owned);
    let mut entry = Map::new();
    entry.insert("type".into(), condition.type_.clone().into());
    entry.insert("status".into(), status.into());
    if let Some(generation) = observed_generation {
        entry.insert("observedGeneration".into(), generation.into());
    }
    entry.insert("lastTransitionTime".into(), transition_time.into());
    entry.insert("reason".into(), condition.reason.clone().into());
    entry.insert("message".into(), truncate(&condition.message, MESSAGE_MAX_LEN).into());
    Value::Object(entry)
}

/// RFC 3339 in whole seconds and UTC, as Kubernetes writes `metav1.Time`.
pub fn format_time(time: Timestamp) -> String {
    time.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// `text` cut to at most `max_len` bytes, on a character boundary.
pub fn truncate(text: &str, max_len: usize) -> String {
    if text.len() <= max_len {
        return text.to_owned();
    }
    let mut cut = max_len;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    text[..cut].to_owned()
}
