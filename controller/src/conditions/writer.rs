//! Writing our conditions into a shared `status.conditions` list without clobbering anyone.
//!
//! Read the object, merge, and write the whole list back through the status subresource with a
//! JSON merge patch that carries the `resourceVersion` that was read. Another writer in between
//! makes the API server answer 409 Conflict; we then read again and retry, a bounded number of
//! times. Nothing is written when the merge changes nothing.

use jiff::Timestamp;
use kube::Api;
use kube::api::{ApiResource, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};

use groundskeeper_api::conditions::{Condition, merge_conditions};

use crate::runtime::error::{Error, Result};

/// The object whose `status.conditions` we write.
#[derive(Clone, Debug)]
pub struct ConditionTarget {
    pub resource: ApiResource,
    pub namespace: String,
    pub name: String,
}

impl ConditionTarget {
    /// A namespaced object of a statically known kind.
    pub fn of<K: kube::Resource<DynamicType = ()>>(namespace: &str, name: &str) -> Self {
        Self {
            resource: ApiResource::erase::<K>(&()),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        }
    }

    /// `Kind namespace/name`, for errors and logs.
    pub fn describe(&self) -> String {
        format!("{} {}/{}", self.resource.kind, self.namespace, self.name)
    }

    pub fn api(&self, client: &kube::Client) -> Api<DynamicObject> {
        Api::namespaced_with(client.clone(), &self.namespace, &self.resource)
    }
}

/// What [`write_conditions`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteOutcome {
    /// The list changed and was written.
    Written,
    /// Our conditions were already as wanted: nothing was written.
    Unchanged,
}

/// Merges `ours` into the target's `status.conditions` and writes the list back, retrying on
/// conflicts up to `max_attempts` reads in all.
pub async fn write_conditions(
    client: &kube::Client,
    target: &ConditionTarget,
    ours: &[Condition],
    max_attempts: u32,
) -> Result<WriteOutcome> {
    write_conditions_at(client, target, ours, max_attempts, Timestamp::now).await
}

/// [`write_conditions`] with the clock given, for tests.
pub async fn write_conditions_at(
    client: &kube::Client,
    target: &ConditionTarget,
    ours: &[Condition],
    max_attempts: u32,
    now: impl Fn() -> Timestamp,
) -> Result<WriteOutcome> {
    let api = target.api(client);
    for _ in 0..max_attempts {
        let object =
            api.get(&target.name).await.map_err(Error::kube(format!("get {}", target.describe())))?;
        let existing = existing_conditions(&object, target)?;
        let merged = merge_conditions(&existing, ours, object.metadata.generation, now());
        if merged == existing {
            return Ok(WriteOutcome::Unchanged);
        }
        let patch = conditions_patch(object.metadata.resource_version.as_deref(), &merged);
        match api.patch_status(&target.name, &PatchParams::default(), &Patch::Merge(&patch)).await {
            Ok(_) => return Ok(WriteOutcome::Written),
            Err(kube::Error::Api(status)) if status.code == 409 => continue,
            Err(err) => {
                return Err(Error::kube(format!("patch status.conditions of {}", target.describe()))(err));
            }
        }
    }
    Err(Error::Conflict { object: target.describe(), attempts: max_attempts })
}

/// The JSON merge patch replacing `status.conditions` if, and only if, the object is still at
/// `resource_version`. (A merge patch replaces lists as a whole: the whole list is sent.)
pub fn conditions_patch(resource_version: Option<&str>, conditions: &[Value]) -> Value {
    json!({
        "metadata": { "resourceVersion": resource_version },
        "status": { "conditions": conditions },
    })
}

fn existing_conditions(object: &DynamicObject, target: &ConditionTarget) -> Result<Vec<Value>> {
    match object.data.get("status").and_then(|s| s.get("conditions")) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => Ok(items.clone()),
        Some(other) => Err(Error::InvalidObject {
            object: target.describe(),
            field: "status.conditions".into(),
            message: format!("expected a list, found {other}"),
        }),
    }
}

/// The JSON merge patch turning a whole status `previous` into `next`: every field of `next`, and
/// a null for each field `previous` had and `next` has not (a merge patch keeps what it does not
/// name). For statuses groundskeeper owns whole (EtcdCluster, MaintenanceTask).
pub fn status_patch<S: serde::Serialize>(previous: &S, next: &S) -> serde_json::Result<Value> {
    let to_map = |status: &S| {
        serde_json::to_value(status).map(|value| match value {
            Value::Object(map) => map,
            _ => serde_json::Map::new(),
        })
    };
    let (before, mut after) = (to_map(previous)?, to_map(next)?);
    for key in before.keys() {
        after.entry(key.clone()).or_insert(Value::Null);
    }
    Ok(serde_json::json!({ "status": after }))
}
