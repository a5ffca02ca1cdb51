//! The object store and the API's write semantics: resourceVersions, uid, generation, optimistic
//! concurrency, status subresource, finalizers, owner-reference garbage collection and the change
//! history that watches are served from. Everything runs under one lock, so a write and the
//! change it publishes are atomic and changes are published in resourceVersion order.

use std::collections::{BTreeMap, VecDeque};
use std::hash::BuildHasher;
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::{Map, Value, json};
use tokio::sync::broadcast;

use super::error::ApiError;
use super::patch::{self, PatchFormat};
use super::resources::{Generation, Propagation, Registry, ResourceId, ResourceType};
use super::schema::{self, FieldValidation};
use super::selector::{FieldSelector, LabelSelector};

/// What happened to an object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChangeKind {
    Added,
    Modified,
    Deleted,
}

/// One committed write, as watches and [`super::Changes`] see it.
#[derive(Clone, Debug)]
pub struct Change {
    pub resource: ResourceId,
    pub kind: ChangeKind,
    /// The object after the write (for a deletion: its last state, with the deletion's revision).
    pub object: Value,
    /// The object before the write (`None` for an addition).
    pub previous: Option<Value>,
    pub revision: u64,
}

/// What the store broadcasts to open watches.
#[derive(Clone, Debug)]
pub(crate) enum Notice {
    Change(Arc<Change>),
    /// The history was compacted: open watches end with 410 Gone, as when etcd compacts.
    Expired,
    /// The server is going away: open watches end.
    Shutdown,
}

/// Which part of an object a write addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    Main,
    Status,
}

/// Query options of a LIST (and of a DELETE on a collection).
#[derive(Clone, Debug, Default)]
pub struct ListOptions {
    pub labels: Option<LabelSelector>,
    pub fields: Option<FieldSelector>,
    pub limit: Option<usize>,
    /// Opaque continue token from a previous page.
    pub continue_token: Option<String>,
}

impl ListOptions {
    pub(crate) fn selects(&self, object: &Value) -> bool {
        self.labels.as_ref().is_none_or(|s| s.matches(object))
            && self.fields.as_ref().is_none_or(|s| s.matches(object))
    }
}

/// One page of a LIST.
#[derive(Clone, Debug)]
pub struct ListPage {
    pub items: Vec<Value>,
    pub revision: u64,
    pub continue_token: Option<String>,
}

/// `DeleteOptions` the server honours.
#[derive(Clone, Debug, Default)]
pub struct DeleteOptions {
    /// `dryRun=All`: the answer a deletion would give; nothing changes.
    pub dry_run: bool,
    pub propagation: Option<Propagation>,
    pub precondition_uid: Option<String>,
    pub precondition_resource_version: Option<String>,
}

/// The options of a write that kube-apiserver takes from the query (`dryRun`, `fieldValidation`).
#[derive(Clone, Copy, Debug, Default)]
pub struct WriteOptions {
    /// `dryRun=All`: everything is checked and the would-be object returned; nothing is stored.
    pub dry_run: bool,
    pub field_validation: FieldValidation,
}

/// What a write answers: the object stored (or that would be, for a dry run) and the warnings
/// the API sends with it (`unknown field "spec.foo"`).
#[derive(Clone, Debug)]
pub struct Written {
    pub object: Value,
    pub warnings: Vec<String>,
}

/// Where a watch starts.
#[derive(Clone, Debug, Default)]
pub struct WatchRequest {
    /// `None` for `""` or `"0"`: start from the current state, sent as ADDED events first.
    pub resource_version: Option<u64>,
    pub send_initial_events: bool,
    pub selection: ListOptions,
}

/// A watch ready to stream: what to send first, then what the receiver brings.
pub(crate) struct WatchStart {
    /// Current objects to send as ADDED (state-then-changes watches).
    pub initial: Vec<Value>,
    /// Past changes newer than the requested resourceVersion.
    pub replay: Vec<Arc<Change>>,
    pub receiver: broadcast::Receiver<Notice>,
    /// The store's revision when the watch started: every change up to it is in `initial`/`replay`.
    pub revision: u64,
}

type Key = (ResourceId, String, String);

struct Inner {
    revision: u64,
    objects: BTreeMap<Key, Value>,
    history: VecDeque<Arc<Change>>,
    history_limit: usize,
    /// Changes with a revision up to this one are no longer in `history`.
    compacted_through: u64,
    next_uid: u64,
}

pub(crate) struct Store {
    registry: Registry,
    inner: Mutex<Inner>,
    notices: broadcast::Sender<Notice>,
    uid_seed: u64,
}

impl Store {
    pub fn new(registry: Registry, history_limit: usize) -> Self {
        let (notices, _) = broadcast::channel(65_536);
        Store {
            registry,
            inner: Mutex::new(Inner {
                revision: 1,
                objects: BTreeMap::new(),
                history: VecDeque::new(),
                history_limit: history_limit.max(1),
                compacted_through: 0,
                next_uid: 0,
            }),
            notices,
            uid_seed: std::collections::hash_map::RandomState::new().hash_one(0u64),
        }
    }

    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    pub fn resource(&self, id: &ResourceId) -> Result<&ResourceType, ApiError> {
        self.registry.get(id).ok_or_else(ApiError::no_such_resource)
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves no half-written object (writes are single inserts).
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn revision(&self) -> u64 {
        self.lock().revision
    }

    pub(crate) fn subscribe(&self) -> broadcast::Receiver<Notice> {
        self.notices.subscribe()
    }

    pub fn get(&self, rt: &ResourceType, ns: Option<&str>, name: &str) -> Result<Value, ApiError> {
        let key = item_key(rt, ns, name)?;
        self.lock().objects.get(&key).cloned().ok_or_else(|| ApiError::not_found(rt, name))
    }

    pub fn list(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        options: &ListOptions,
    ) -> Result<ListPage, ApiError> {
        scope_check(rt, ns)?;
        let inner = self.lock();
        let after = options.continue_token.as_deref().map(decode_continue).transpose()?;
        let mut items = Vec::new();
        let mut continue_token = None;
        for ((_, namespace, name), object) in in_scope(&inner.objects, rt, ns) {
            if after
                .as_ref()
                .is_some_and(|(n, m)| (namespace.as_str(), name.as_str()) <= (n.as_str(), m.as_str()))
            {
                continue;
            }
            if !options.selects(object) {
                continue;
            }
            if options.limit.is_some_and(|limit| items.len() >= limit) {
                let (last_ns, last_name) = last_key(&items);
                continue_token = Some(format!("{last_ns}/{last_name}"));
                break;
            }
            items.push(object.clone());
        }
        Ok(ListPage { items, revision: inner.revision, continue_token })
    }

    pub fn create(&self, rt: &ResourceType, ns: Option<&str>, body: Value) -> Result<Value, ApiError> {
        self.create_with(rt, ns, body, &WriteOptions::default()).map(|written| written.object)
    }

    pub fn create_with(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        body: Value,
        options: &WriteOptions,
    ) -> Result<Written, ApiError> {
        scope_check(rt, ns)?;
        let (body, warnings) = decode(rt, body, options, Decoder::Body)?;
        let mut inner = self.lock();
        let mut object = self.prepare_create(&mut inner, rt, ns, body)?;
        let name = name_of(&object).to_string();
        let key = item_key(rt, ns, &name)?;
        check_schema(rt, &name, &object, None, Target::Main)?;
        if inner.objects.contains_key(&key) {
            return Err(ApiError::already_exists(rt, &name));
        }
        if !options.dry_run {
            inner.revision += 1;
            set_resource_version(&mut object, inner.revision);
            inner.objects.insert(key, object.clone());
            self.publish(&mut inner, rt, ChangeKind::Added, object.clone(), None);
        }
        Ok(Written { object, warnings })
    }

    pub fn update(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
        body: Value,
        target: Target,
    ) -> Result<Value, ApiError> {
        self.update_with(rt, ns, name, body, target, &WriteOptions::default()).map(|written| written.object)
    }

    pub fn update_with(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
        body: Value,
        target: Target,
        options: &WriteOptions,
    ) -> Result<Written, ApiError> {
        let key = item_key(rt, ns, name)?;
        check_target(rt, target)?;
        let (body, warnings) = decode(rt, body, options, Decoder::Body)?;
        let mut inner = self.lock();
        let existing = inner.objects.get(&key).cloned().ok_or_else(|| ApiError::not_found(rt, name))?;
        let new = prepare_update(rt, name, &existing, body, target)?;
        check_schema(rt, name, &new, Some(&existing), target)?;
        let object = match options.dry_run {
            true => would_update(rt, &existing, new),
            false => self.commit_update(&mut inner, rt, key, existing, new)?,
        };
        Ok(Written { object, warnings })
    }

    pub fn patch(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
        format: PatchFormat,
        patch_body: &Value,
        target: Target,
    ) -> Result<Value, ApiError> {
        let options = WriteOptions::default();
        self.patch_with(rt, ns, name, format, patch_body, target, &options).map(|written| written.object)
    }

    #[allow(clippy::too_many_arguments)]
    pub fn patch_with(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
        format: PatchFormat,
        patch_body: &Value,
        target: Target,
        options: &WriteOptions,
    ) -> Result<Written, ApiError> {
        let key = item_key(rt, ns, name)?;
        check_target(rt, target)?;
        let mut inner = self.lock();
        let existing = inner.objects.get(&key).cloned().ok_or_else(|| ApiError::not_found(rt, name))?;
        let patched = apply_patch(rt, name, &existing, format, patch_body)?;
        let (patched, warnings) = decode(rt, patched, options, Decoder::Patch)?;
        let new = prepare_update(rt, name, &existing, patched, target)?;
        check_schema(rt, name, &new, Some(&existing), target)?;
        let object = match options.dry_run {
            true => would_update(rt, &existing, new),
            false => self.commit_update(&mut inner, rt, key, existing, new)?,
        };
        Ok(Written { object, warnings })
    }

    pub fn delete(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
        options: &DeleteOptions,
    ) -> Result<Value, ApiError> {
        let key = item_key(rt, ns, name)?;
        let mut inner = self.lock();
        match options.dry_run {
            true => would_delete(&inner, rt, &key, options),
            false => self.delete_in(&mut inner, rt, key, options),
        }
    }

    pub fn delete_collection(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        selection: &ListOptions,
        options: &DeleteOptions,
    ) -> Result<Vec<Value>, ApiError> {
        scope_check(rt, ns)?;
        let mut inner = self.lock();
        let keys: Vec<Key> = in_scope(&inner.objects, rt, ns)
            .filter(|(_, object)| selection.selects(object))
            .map(|(key, _)| key.clone())
            .collect();
        keys.into_iter()
            .map(|key| match options.dry_run {
                true => would_delete(&inner, rt, &key, options),
                false => self.delete_in(&mut inner, rt, key, options),
            })
            .collect()
    }

    pub(crate) fn watch(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        request: &WatchRequest,
    ) -> Result<WatchStart, ApiError> {
        scope_check(rt, ns)?;
        let inner = self.lock();
        let from_state = request.send_initial_events || request.resource_version.is_none();
        let (initial, replay) = match request.resource_version {
            _ if from_state => {
                let initial = in_scope(&inner.objects, rt, ns)
                    .filter(|(_, object)| request.selection.selects(object))
                    .map(|(_, object)| object.clone())
                    .collect();
                (initial, Vec::new())
            }
            Some(from) if from < inner.compacted_through => {
                return Err(ApiError::gone(format!(
                    "too old resource version: {from} ({})",
                    inner.compacted_through + 1
                )));
            }
            Some(from) => {
                let replay = inner.history.iter().filter(|c| c.revision > from).cloned().collect();
                (Vec::new(), replay)
            }
            None => unreachable!("handled as from_state"),
        };
        Ok(WatchStart { initial, replay, receiver: self.notices.subscribe(), revision: inner.revision })
    }

    /// Drops the whole change history and ends open watches with 410 Gone, as after an etcd
    /// compaction: watchers must list again.
    pub fn expire_watches(&self) {
        let mut inner = self.lock();
        inner.history.clear();
        inner.compacted_through = inner.revision;
        let _ = self.notices.send(Notice::Expired);
    }

    pub(crate) fn shutdown(&self) {
        let _ = self.notices.send(Notice::Shutdown);
    }

    fn publish(
        &self,
        inner: &mut Inner,
        rt: &ResourceType,
        kind: ChangeKind,
        object: Value,
        previous: Option<Value>,
    ) {
        let change =
            Arc::new(Change { resource: rt.id.clone(), kind, object, previous, revision: inner.revision });
        inner.history.push_back(change.clone());
        while inner.history.len() > inner.history_limit {
            if let Some(dropped) = inner.history.pop_front() {
                inner.compacted_through = dropped.revision;
            }
        }
        // No receiver is fine: nobody watches.
        let _ = self.notices.send(Notice::Change(change));
    }

    fn prepare_create(
        &self,
        inner: &mut Inner,
        rt: &ResourceType,
        ns: Option<&str>,
        body: Value,
    ) -> Result<Value, ApiError> {
        let Value::Object(mut object) = body else {
            return Err(ApiError::bad_request("the request body must be a JSON object"));
        };
        check_type_meta(rt, &object)?;
        object.insert("apiVersion".into(), rt.id.api_version().into());
        object.insert("kind".into(), rt.kind.clone().into());
        let meta = object
            .entry("metadata")
            .or_insert_with(|| json!({}))
            .as_object_mut()
            .ok_or_else(|| ApiError::bad_request("metadata must be an object"))?;
        if meta.get("resourceVersion").and_then(Value::as_str).is_some_and(|rv| !rv.is_empty()) {
            // The real API refuses this in its storage layer, with a 500.
            return Err(ApiError::internal("resourceVersion should not be set on objects to be created"));
        }
        match (rt.namespaced, ns, meta.get("namespace").and_then(Value::as_str)) {
            (true, Some(url), Some(body)) if !body.is_empty() && body != url => {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            (true, Some(url), _) => {
                meta.insert("namespace".into(), url.into());
            }
            _ => {
                meta.remove("namespace");
            }
        }
        let name = self.choose_name(inner, rt, ns, meta)?;
        meta.insert("name".into(), name.into());
        inner.next_uid += 1;
        meta.insert("uid".into(), self.uid(inner.next_uid).into());
        meta.insert("creationTimestamp".into(), now().into());
        for field in ["deletionTimestamp", "deletionGracePeriodSeconds", "managedFields", "generation"] {
            meta.remove(field);
        }
        if rt.generation == Generation::Tracked {
            meta.insert("generation".into(), 1.into());
        }
        let mut object = Value::Object(object);
        defaults_on_create(rt, &mut object);
        Ok(object)
    }

    fn choose_name(
        &self,
        inner: &Inner,
        rt: &ResourceType,
        ns: Option<&str>,
        meta: &Map<String, Value>,
    ) -> Result<String, ApiError> {
        if let Some(name) = meta.get("name").and_then(Value::as_str).filter(|n| !n.is_empty()) {
            check_name(rt, name)?;
            return Ok(name.to_string());
        }
        let Some(prefix) = meta.get("generateName").and_then(Value::as_str).filter(|p| !p.is_empty()) else {
            return Err(ApiError::invalid(
                rt,
                "",
                "metadata.name: Required value: name or generateName is required".into(),
            ));
        };
        const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
        let state = std::collections::hash_map::RandomState::new();
        for attempt in 0u64.. {
            let mut n = state.hash_one((inner.revision, attempt));
            let suffix: String = (0..5)
                .map(|_| {
                    let c = ALPHABET[(n % ALPHABET.len() as u64) as usize] as char;
                    n /= ALPHABET.len() as u64;
                    c
                })
                .collect();
            let name = format!("{prefix}{suffix}");
            if !inner.objects.contains_key(&item_key(rt, ns, &name)?) {
                check_name(rt, &name)?;
                return Ok(name);
            }
        }
        unreachable!("the loop above only ends by returning")
    }

    fn uid(&self, n: u64) -> String {
        let hex = format!("{:016x}{n:016x}", self.uid_seed);
        format!("{}-{}-{}-{}-{}", &hex[0..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..32])
    }

    fn commit_update(
        &self,
        inner: &mut Inner,
        rt: &ResourceType,
        key: Key,
        existing: Value,
        mut new: Value,
    ) -> Result<Value, ApiError> {
        if let Some(rv) = existing.pointer("/metadata/resourceVersion").cloned() {
            new["metadata"]["resourceVersion"] = rv;
        }
        bump_generation(rt, &existing, &mut new);
        if new == existing {
            // The real API writes nothing for a no-op update: no new resourceVersion, no event.
            return Ok(existing);
        }
        if is_deleting(&new) && finalizers(&new).is_empty() {
            return Ok(self.remove(inner, rt, key, new, rt.default_propagation));
        }
        inner.revision += 1;
        set_resource_version(&mut new, inner.revision);
        inner.objects.insert(key, new.clone());
        self.publish(inner, rt, ChangeKind::Modified, new.clone(), Some(existing));
        Ok(new)
    }

    fn delete_in(
        &self,
        inner: &mut Inner,
        rt: &ResourceType,
        key: Key,
        options: &DeleteOptions,
    ) -> Result<Value, ApiError> {
        let name = key.2.clone();
        let existing = inner.objects.get(&key).cloned().ok_or_else(|| ApiError::not_found(rt, &name))?;
        check_preconditions(rt, &name, &existing, options)?;
        if finalizers(&existing).is_empty() {
            let propagation = options.propagation.unwrap_or(rt.default_propagation);
            return Ok(self.remove(inner, rt, key, existing, propagation));
        }
        if is_deleting(&existing) {
            return Ok(existing);
        }
        let mut new = existing.clone();
        new["metadata"]["deletionTimestamp"] = now().into();
        new["metadata"]["deletionGracePeriodSeconds"] = 0.into();
        if rt.generation == Generation::Tracked {
            new["metadata"]["generation"] = (generation(&existing) + 1).into();
        }
        inner.revision += 1;
        set_resource_version(&mut new, inner.revision);
        inner.objects.insert(key, new.clone());
        self.publish(inner, rt, ChangeKind::Modified, new.clone(), Some(existing));
        Ok(new)
    }

    /// Removes an object for good, then collects its dependents the way the garbage collector does.
    fn remove(
        &self,
        inner: &mut Inner,
        rt: &ResourceType,
        key: Key,
        mut object: Value,
        propagation: Propagation,
    ) -> Value {
        let previous = inner.objects.remove(&key);
        inner.revision += 1;
        set_resource_version(&mut object, inner.revision);
        self.publish(inner, rt, ChangeKind::Deleted, object.clone(), previous);
        let uid = object.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or_default().to_string();
        self.collect_dependents(inner, &uid, propagation);
        object
    }

    fn collect_dependents(&self, inner: &mut Inner, owner_uid: &str, propagation: Propagation) {
        let dependents: Vec<Key> = inner
            .objects
            .iter()
            .filter(|(_, object)| owner_uids(object).iter().any(|uid| uid == owner_uid))
            .map(|(key, _)| key.clone())
            .collect();
        for key in dependents {
            let Some(rt) = self.registry.get(&key.0).cloned() else {
                continue;
            };
            let Some(dependent) = inner.objects.get(&key).cloned() else {
                continue;
            };
            let other_owner_alive =
                owner_uids(&dependent).iter().any(|uid| uid != owner_uid && uid_exists(&inner.objects, uid));
            if propagation == Propagation::Orphan || other_owner_alive {
                let mut new = dependent.clone();
                if let Some(Value::Array(refs)) = new.pointer_mut("/metadata/ownerReferences") {
                    refs.retain(|r| r.get("uid").and_then(Value::as_str) != Some(owner_uid));
                }
                let _ = self.commit_update(inner, &rt, key, dependent, new);
            } else {
                let options =
                    DeleteOptions { propagation: Some(Propagation::Delete), ..DeleteOptions::default() };
                let _ = self.delete_in(inner, &rt, key, &options);
            }
        }
    }
}

/// The watch event a change means to a watch with this scope and selection, if any: an object
/// that starts matching the selectors is ADDED, one that stops matching is DELETED.
pub(crate) fn watch_event<'a>(
    change: &'a Change,
    rt: &ResourceType,
    ns: Option<&str>,
    selection: &ListOptions,
) -> Option<(&'static str, &'a Value)> {
    if change.resource != rt.id {
        return None;
    }
    if let Some(ns) = ns
        && change.object.pointer("/metadata/namespace").and_then(Value::as_str) != Some(ns)
    {
        return None;
    }
    let now = selection.selects(&change.object);
    let before = change.previous.as_ref().is_some_and(|p| selection.selects(p));
    let kind = match change.kind {
        ChangeKind::Added => now.then_some("ADDED"),
        ChangeKind::Deleted => (now || before).then_some("DELETED"),
        ChangeKind::Modified => match (before, now) {
            (true, true) => Some("MODIFIED"),
            (false, true) => Some("ADDED"),
            (true, false) => Some("DELETED"),
            (false, false) => None,
        },
    }?;
    Some((kind, &change.object))
}

fn item_key(rt: &ResourceType, ns: Option<&str>, name: &str) -> Result<Key, ApiError> {
    match (rt.namespaced, ns) {
        (true, Some(ns)) => Ok((rt.id.clone(), ns.to_string(), name.to_string())),
        (false, None) => Ok((rt.id.clone(), String::new(), name.to_string())),
        _ => Err(ApiError::no_such_resource()),
    }
}

/// `/status` exists only for types with the status subresource.
fn check_target(rt: &ResourceType, target: Target) -> Result<(), ApiError> {
    if target == Target::Status && !rt.status_subresource {
        return Err(ApiError::no_such_resource());
    }
    Ok(())
}

fn scope_check(rt: &ResourceType, ns: Option<&str>) -> Result<(), ApiError> {
    if !rt.namespaced && ns.is_some() {
        return Err(ApiError::no_such_resource());
    }
    Ok(())
}

fn in_scope<'a>(
    objects: &'a BTreeMap<Key, Value>,
    rt: &'a ResourceType,
    ns: Option<&'a str>,
) -> impl Iterator<Item = (&'a Key, &'a Value)> + 'a {
    objects
        .range((rt.id.clone(), String::new(), String::new())..)
        .take_while(move |((id, _, _), _)| *id == rt.id)
        .filter(move |((_, namespace, _), _)| ns.is_none_or(|ns| ns == namespace))
}

fn decode_continue(token: &str) -> Result<(String, String), ApiError> {
    token
        .split_once('/')
        .map(|(ns, name)| (ns.to_string(), name.to_string()))
        .ok_or_else(|| ApiError::bad_request(format!("invalid continue token {token:?}")))
}

fn last_key(items: &[Value]) -> (String, String) {
    let last = items.last().cloned().unwrap_or(Value::Null);
    let field = |f: &str| last.pointer(f).and_then(Value::as_str).unwrap_or_default().to_string();
    (field("/metadata/namespace"), field("/metadata/name"))
}

fn check_type_meta(rt: &ResourceType, object: &Map<String, Value>) -> Result<(), ApiError> {
    let api_version = object.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
    let kind = object.get("kind").and_then(Value::as_str).unwrap_or_default();
    if !api_version.is_empty() && api_version != rt.id.api_version() {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({api_version}) does not match the expected API version ({})",
            rt.id.api_version()
        )));
    }
    if !kind.is_empty() && kind != rt.kind {
        return Err(ApiError::bad_request(format!(
            "the kind in the data ({kind}) does not match the expected kind ({})",
            rt.kind
        )));
    }
    Ok(())
}

/// Names must be DNS subdomains (RFC 1123): lowercase alphanumerics, '-' and '.', ≤ 253 chars.
fn check_name(rt: &ResourceType, name: &str) -> Result<(), ApiError> {
    let valid = name.len() <= 253
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    if valid {
        Ok(())
    } else {
        Err(ApiError::invalid(
            rt,
            name,
            format!(
                "metadata.name: Invalid value: {name:?}: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"
            ),
        ))
    }
}

/// The defaults and initial status the real API gives the built-in types groundskeeper uses.
/// Custom resources with a status subresource lose any status sent on create.
fn defaults_on_create(rt: &ResourceType, object: &mut Value) {
    match (rt.id.group.as_str(), rt.id.plural.as_str()) {
        ("batch", "jobs") => {
            object.as_object_mut().map(|o| o.remove("status"));
            default_job(object);
        }
        ("", "pods") => object["status"] = json!({ "phase": "Pending" }),
        ("", "services") => object["status"] = json!({ "loadBalancer": {} }),
        ("", "namespaces") => object["status"] = json!({ "phase": "Active" }),
        _ if rt.status_subresource => {
            object.as_object_mut().map(|o| o.remove("status"));
        }
        _ => {}
    }
}

/// Job defaults: counts, completion mode, and the selector + pod labels tying pods to the Job.
fn default_job(job: &mut Value) {
    let uid = job["metadata"]["uid"].clone();
    let name = job["metadata"]["name"].clone();
    if !job["spec"].is_object() {
        job["spec"] = json!({});
    }
    let spec = &mut job["spec"];
    for (field, value) in [
        ("parallelism", json!(1)),
        ("completions", json!(1)),
        ("backoffLimit", json!(6)),
        ("completionMode", json!("NonIndexed")),
        ("suspend", json!(false)),
    ] {
        if spec.get(field).is_none_or(Value::is_null) {
            spec[field] = value;
        }
    }
    if spec.get("manualSelector").and_then(Value::as_bool) != Some(true) {
        spec["selector"] = json!({ "matchLabels": { "batch.kubernetes.io/controller-uid": uid } });
        if !spec["template"]["metadata"]["labels"].is_object() {
            spec["template"]["metadata"]["labels"] = json!({});
        }
        let labels = &mut spec["template"]["metadata"]["labels"];
        labels["batch.kubernetes.io/controller-uid"] = uid.clone();
        labels["batch.kubernetes.io/job-name"] = name.clone();
        labels["controller-uid"] = uid;
        labels["job-name"] = name;
    }
}

/// Fields the real API refuses to change after creation, per type.
fn immutable_fields(rt: &ResourceType) -> &'static [&'static str] {
    match (rt.id.group.as_str(), rt.id.plural.as_str()) {
        ("batch", "jobs") => &["/spec/selector", "/spec/template", "/spec/completionMode"],
        ("", "secrets") | ("", "configmaps") => &[],
        _ => &[],
    }
}

/// Builds the object an update (PUT, or the result of a PATCH) would store.
fn prepare_update(
    rt: &ResourceType,
    name: &str,
    existing: &Value,
    body: Value,
    target: Target,
) -> Result<Value, ApiError> {
    let Value::Object(mut object) = body else {
        return Err(ApiError::bad_request("the request body must be a JSON object"));
    };
    check_type_meta(rt, &object)?;
    let meta = object.get("metadata").and_then(Value::as_object).cloned().unwrap_or_default();
    let body_name = meta.get("name").and_then(Value::as_str).unwrap_or(name);
    if body_name != name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({name})"
        )));
    }
    let stored_rv = existing.pointer("/metadata/resourceVersion").and_then(Value::as_str);
    match meta.get("resourceVersion").and_then(Value::as_str) {
        Some(rv) if !rv.is_empty() && Some(rv) != stored_rv => return Err(ApiError::stale(rt, name)),
        _ => {}
    }
    if target == Target::Status {
        let mut new = existing.clone();
        match object.remove("status") {
            Some(status) => new["status"] = status,
            None => {
                new.as_object_mut().map(|o| o.remove("status"));
            }
        }
        return Ok(new);
    }
    object.insert("apiVersion".into(), rt.id.api_version().into());
    object.insert("kind".into(), rt.kind.clone().into());
    let mut new = Value::Object(object);
    if !new["metadata"].is_object() {
        new["metadata"] = json!({});
    }
    for field in [
        "name",
        "namespace",
        "uid",
        "creationTimestamp",
        "generation",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
    ] {
        match existing["metadata"].get(field) {
            Some(value) => new["metadata"][field] = value.clone(),
            None => {
                new["metadata"].as_object_mut().map(|m| m.remove(field));
            }
        }
    }
    new["metadata"].as_object_mut().map(|m| m.remove("managedFields"));
    if rt.status_subresource {
        match existing.get("status") {
            Some(status) => new["status"] = status.clone(),
            None => {
                new.as_object_mut().map(|o| o.remove("status"));
            }
        }
    }
    for pointer in immutable_fields(rt) {
        if existing.pointer(pointer) != new.pointer(pointer) {
            return Err(ApiError::invalid(
                rt,
                name,
                format!(
                    "{}: Invalid value: field is immutable",
                    pointer.trim_start_matches('/').replace('/', ".")
                ),
            ));
        }
    }
    Ok(new)
}

fn apply_patch(
    rt: &ResourceType,
    name: &str,
    existing: &Value,
    format: PatchFormat,
    body: &Value,
) -> Result<Value, ApiError> {
    let mut patched = existing.clone();
    match format {
        PatchFormat::Merge => {
            if !body.is_object() {
                return Err(ApiError::bad_request("a merge patch must be a JSON object"));
            }
            json_patch::merge(&mut patched, body);
        }
        PatchFormat::Json => patch::json_patch(&mut patched, body)
            .map_err(|e| ApiError::invalid(rt, name, format!("the JSON patch does not apply: {e}")))?,
        PatchFormat::Strategic if !rt.strategic_merge => {
            return Err(ApiError::unsupported_media_type(format!(
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml (strategic merge patch is not supported for {})",
                rt.qualified_plural()
            )));
        }
        PatchFormat::Strategic => patch::strategic_merge(&mut patched, body).map_err(|e| {
            ApiError::invalid(rt, name, format!("the strategic merge patch does not apply: {e}"))
        })?,
        PatchFormat::Apply => {
            return Err(ApiError::unsupported_media_type(
                "server-side apply (application/apply-patch+yaml) is not supported by this in-memory API server; use a merge, JSON or strategic merge patch",
            ));
        }
    }
    Ok(patched)
}

/// Which request decoded the object: a strict decoding error of a create or an update names the
/// kind it could not be handled as; a patch's says only what was unknown.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Decoder {
    Body,
    Patch,
}

/// Decodes a custom resource against its schema (unknown fields dropped, defaults applied), with
/// the `fieldValidation` directive: unknown fields refused (400), warned about, or dropped silently.
fn decode(
    rt: &ResourceType,
    mut object: Value,
    options: &WriteOptions,
    decoder: Decoder,
) -> Result<(Value, Vec<String>), ApiError> {
    let Some(schema) = rt.schema().filter(|_| object.is_object()) else {
        return Ok((object, Vec::new()));
    };
    let unknown: Vec<String> =
        schema::decode(schema, &mut object).iter().map(|path| format!("unknown field \"{path}\"")).collect();
    match options.field_validation {
        FieldValidation::Strict if !unknown.is_empty() => {
            let strict = format!("strict decoding error: {}", unknown.join(", "));
            Err(ApiError::bad_request(match decoder {
                Decoder::Patch => strict,
                Decoder::Body => format!(
                    "{kind} in version \"{version}\" cannot be handled as a {kind}: {strict}",
                    kind = rt.kind,
                    version = rt.id.version
                ),
            }))
        }
        FieldValidation::Warn => Ok((object, unknown)),
        FieldValidation::Strict | FieldValidation::Ignore => Ok((object, Vec::new())),
    }
}

/// The schema's checks of the object a write would store (422 `Invalid` with every cause).
fn check_schema(
    rt: &ResourceType,
    name: &str,
    object: &Value,
    old: Option<&Value>,
    target: Target,
) -> Result<(), ApiError> {
    let Some(schema) = rt.schema() else { return Ok(()) };
    let errors = schema::validate(schema, object, old, target);
    if errors.is_empty() { Ok(()) } else { Err(ApiError::invalid_fields(rt, name, &errors)) }
}

/// What an update would store, for a dry run: the stored resourceVersion, the next generation.
fn would_update(rt: &ResourceType, existing: &Value, mut new: Value) -> Value {
    if let Some(rv) = existing.pointer("/metadata/resourceVersion").cloned() {
        new["metadata"]["resourceVersion"] = rv;
    }
    bump_generation(rt, existing, &mut new);
    new
}

/// What a deletion would answer, for a dry run: the object, marked for deletion when finalizers
/// hold it.
fn would_delete(
    inner: &Inner,
    rt: &ResourceType,
    key: &Key,
    options: &DeleteOptions,
) -> Result<Value, ApiError> {
    let name = &key.2;
    let mut object = inner.objects.get(key).cloned().ok_or_else(|| ApiError::not_found(rt, name))?;
    check_preconditions(rt, name, &object, options)?;
    if !finalizers(&object).is_empty() && !is_deleting(&object) {
        object["metadata"]["deletionTimestamp"] = now().into();
        object["metadata"]["deletionGracePeriodSeconds"] = 0.into();
    }
    Ok(object)
}

fn check_preconditions(
    rt: &ResourceType,
    name: &str,
    existing: &Value,
    options: &DeleteOptions,
) -> Result<(), ApiError> {
    let meta = |f: &str| existing["metadata"][f].as_str().unwrap_or_default().to_string();
    if let Some(uid) = &options.precondition_uid
        && *uid != meta("uid")
    {
        let why =
            format!("Precondition failed: UID in precondition: {uid}, UID in object meta: {}", meta("uid"));
        return Err(ApiError::conflict(rt, name, &why));
    }
    if let Some(rv) = &options.precondition_resource_version
        && *rv != meta("resourceVersion")
    {
        let why = format!(
            "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
            meta("resourceVersion")
        );
        return Err(ApiError::conflict(rt, name, &why));
    }
    Ok(())
}

/// Generation goes up when anything outside `metadata` (and `status`, for types with the status
/// subresource) changes, or when deletion starts.
fn bump_generation(rt: &ResourceType, existing: &Value, new: &mut Value) {
    if rt.generation != Generation::Tracked {
        return;
    }
    let strip = |object: &Value| {
        let mut object = object.clone();
        if let Some(map) = object.as_object_mut() {
            map.remove("metadata");
            if rt.status_subresource {
                map.remove("status");
            }
        }
        object
    };
    let deletion_started = is_deleting(new) && !is_deleting(existing);
    let current = generation(existing);
    let next = if strip(existing) != strip(new) || deletion_started { current + 1 } else { current };
    new["metadata"]["generation"] = next.into();
}

fn generation(object: &Value) -> i64 {
    object.pointer("/metadata/generation").and_then(Value::as_i64).unwrap_or(0)
}

fn is_deleting(object: &Value) -> bool {
    object.pointer("/metadata/deletionTimestamp").is_some_and(|v| !v.is_null())
}

fn finalizers(object: &Value) -> Vec<Value> {
    object.pointer("/metadata/finalizers").and_then(Value::as_array).cloned().unwrap_or_default()
}

fn owner_uids(object: &Value) -> Vec<String> {
    object
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .map(|refs| refs.iter().filter_map(|r| r["uid"].as_str().map(str::to_string)).collect())
        .unwrap_or_default()
}

fn uid_exists(objects: &BTreeMap<Key, Value>, uid: &str) -> bool {
    objects.values().any(|o| o.pointer("/metadata/uid").and_then(Value::as_str) == Some(uid))
}

fn name_of(object: &Value) -> &str {
    object.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default()
}

fn set_resource_version(object: &mut Value, revision: u64) {
    object["metadata"]["resourceVersion"] = revision.to_string().into();
}

/// RFC 3339 in whole seconds, as `metadata.creationTimestamp` is.
fn now() -> String {
    jiff::Timestamp::from_second(jiff::Timestamp::now().as_second())
        .expect("the current time is a valid timestamp")
        .to_string()
}
