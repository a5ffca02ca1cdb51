//! The REST surface: URL routing, query parameters, status codes, and watch streams.

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, Method, StatusCode, Uri, header};
use serde_json::{Value, json};
use tokio::sync::broadcast;
use tokio::time::{Instant, Interval};

use super::error::ApiError;
use super::openapi;
use super::patch::PatchFormat;
use super::rbac::{Attributes, Grants};
use super::resources::{Propagation, ResourceId, ResourceType};
use super::schema::FieldValidation;
use super::selector::{FieldSelector, LabelSelector};
use super::store::{
    DeleteOptions, ListOptions, Notice, Store, Target, WatchRequest, WatchStart, WriteOptions, Written,
    watch_event,
};
use super::table::{self, IncludeObject};

/// A watch with no `timeoutSeconds` ends after this long (the real API picks 30–60 minutes).
const DEFAULT_WATCH_TIMEOUT: Duration = Duration::from_secs(1800);

pub(crate) struct App {
    pub store: Arc<Store>,
    pub bookmark_interval: Duration,
    /// Bearer tokens and what their ServiceAccounts may do; requests without a token are the
    /// harness and are not checked.
    pub tokens: HashMap<String, Grants>,
}

pub(crate) fn router(app: Arc<App>) -> Router {
    Router::new().fallback(handle).with_state(app)
}

async fn handle(
    State(app): State<Arc<App>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    match dispatch(&app, &method, &uri, &headers, &body) {
        Ok(response) => response,
        Err(error) => error_response(&error),
    }
}

fn error_response(error: &ApiError) -> Response {
    let code = StatusCode::from_u16(error.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    json_response(code, &error.to_status())
}

fn json_response(code: StatusCode, body: &Value) -> Response {
    (code, [(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response()
}

/// What a URL addresses.
enum Route {
    Version,
    ApiVersions,
    GroupList,
    OpenApiV2,
    OpenApiIndex,
    OpenApiDocument { group: String, version: String },
    ResourceList { group: String, version: String },
    Resource { id: ResourceId, namespace: Option<String>, name: Option<String>, status: bool },
}

fn route(path: &str) -> Result<Route, ApiError> {
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let (group, version, rest) = match segments.as_slice() {
        ["version"] => return Ok(Route::Version),
        ["api"] => return Ok(Route::ApiVersions),
        ["apis"] => return Ok(Route::GroupList),
        ["openapi", "v2"] => return Ok(Route::OpenApiV2),
        ["openapi", "v3"] => return Ok(Route::OpenApiIndex),
        ["openapi", "v3", "api", version] => {
            return Ok(Route::OpenApiDocument { group: String::new(), version: version.to_string() });
        }
        ["openapi", "v3", "apis", group, version] => {
            return Ok(Route::OpenApiDocument { group: group.to_string(), version: version.to_string() });
        }
        ["api", version, rest @ ..] => ("", *version, rest),
        ["apis", group, version, rest @ ..] => (*group, *version, rest),
        _ => return Err(ApiError::no_such_resource()),
    };
    let (namespace, rest) = match rest {
        [] => {
            return Ok(Route::ResourceList { group: group.to_string(), version: version.to_string() });
        }
        ["namespaces", ns, rest @ ..] if !rest.is_empty() => (Some(ns.to_string()), rest),
        rest => (None, rest),
    };
    let (plural, name, status) = match rest {
        [plural] => (*plural, None, false),
        [plural, name] => (*plural, Some(name.to_string()), false),
        [plural, name, "status"] => (*plural, Some(name.to_string()), true),
        _ => return Err(ApiError::no_such_resource()),
    };
    Ok(Route::Resource { id: ResourceId::new(group, version, plural), namespace, name, status })
}

fn dispatch(
    app: &App,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Response, ApiError> {
    let query = Query::<HashMap<String, String>>::try_from_uri(uri)
        .map(|q| q.0)
        .map_err(|e| ApiError::bad_request(format!("malformed query: {e}")))?;
    let store = &app.store;
    let (id, namespace, name, status) = match route(uri.path())? {
        Route::Version => return Ok(json_response(StatusCode::OK, &version_info())),
        Route::ApiVersions => return Ok(json_response(StatusCode::OK, &api_versions())),
        Route::GroupList => return Ok(json_response(StatusCode::OK, &group_list(store))),
        Route::OpenApiV2 => {
            let body = openapi::empty_v2_protobuf();
            return Ok(
                ([(header::CONTENT_TYPE, openapi::EMPTY_V2_PROTOBUF_CONTENT_TYPE)], body).into_response()
            );
        }
        Route::OpenApiIndex => return Ok(json_response(StatusCode::OK, &openapi::index(store.registry()))),
        Route::OpenApiDocument { group, version } => {
            let document = openapi::document(store.registry(), &group, &version)
                .ok_or_else(ApiError::no_such_resource)?;
            return Ok(json_response(StatusCode::OK, &document));
        }
        Route::ResourceList { group, version } => {
            return Ok(json_response(StatusCode::OK, &resource_list(store, &group, &version)?));
        }
        Route::Resource { id, namespace, name, status } => (id, namespace, name, status),
    };
    authorize(app, headers, method, &query, &id, namespace.as_deref(), name.as_deref(), status)?;
    let rt = store.resource(&id)?.clone();
    let ns = namespace.as_deref();
    let target = if status { Target::Status } else { Target::Main };
    let ok = |object: Value| Ok(json_response(StatusCode::OK, &object));
    match (method.clone(), name) {
        (Method::GET, None) if is_true(query.get("watch")) => watch(app, &rt, ns, &query, headers),
        (Method::GET, None) => {
            let page = store.list(&rt, ns, &list_options(&rt, &query)?)?;
            match table_asked(headers, &query)? {
                Some(include) => ok(table::table(
                    &rt,
                    &page.items,
                    &page.revision.to_string(),
                    page.continue_token.as_deref(),
                    include,
                    jiff::Timestamp::now(),
                )),
                None => ok(list_body(&rt, page)),
            }
        }
        (Method::POST, None) => {
            let written = store.create_with(&rt, ns, parse_body(body)?, &write_options(&query)?)?;
            Ok(written_response(StatusCode::CREATED, written))
        }
        (Method::DELETE, None) => {
            let deleted = store.delete_collection(
                &rt,
                ns,
                &list_options(&rt, &query)?,
                &delete_options(&query, body)?,
            )?;
            ok(list_body(
                &rt,
                super::store::ListPage { items: deleted, revision: store.revision(), continue_token: None },
            ))
        }
        (Method::GET, Some(name)) => {
            let object = store.get(&rt, ns, &name)?;
            match table_asked(headers, &query)? {
                Some(include) => {
                    let revision =
                        object["metadata"]["resourceVersion"].as_str().unwrap_or_default().to_string();
                    ok(table::table(&rt, &[object], &revision, None, include, jiff::Timestamp::now()))
                }
                None => ok(object),
            }
        }
        (Method::PUT, Some(name)) => {
            let written =
                store.update_with(&rt, ns, &name, parse_body(body)?, target, &write_options(&query)?)?;
            Ok(written_response(StatusCode::OK, written))
        }
        (Method::PATCH, Some(name)) => {
            let content_type = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
            let format = PatchFormat::from_content_type(content_type).ok_or_else(|| {
                ApiError::unsupported_media_type(format!(
                    "the body of the request was in an unknown format ({content_type:?}) - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json"
                ))
            })?;
            // Refuse server-side apply before parsing: its body is YAML.
            let patch = if format == PatchFormat::Apply { Value::Null } else { parse_body(body)? };
            let options = write_options(&query)?;
            Ok(written_response(
                StatusCode::OK,
                store.patch_with(&rt, ns, &name, format, &patch, target, &options)?,
            ))
        }
        (Method::DELETE, Some(name)) => ok(store.delete(&rt, ns, &name, &delete_options(&query, body)?)?),
        (method, _) => Err(ApiError::method_not_allowed(format!("{method} is not supported here"))),
    }
}

/// RBAC for requests with a bearer token (see the `rbac` module); 401 for an unknown token.
#[allow(clippy::too_many_arguments)]
fn authorize(
    app: &App,
    headers: &HeaderMap,
    method: &Method,
    query: &HashMap<String, String>,
    id: &ResourceId,
    namespace: Option<&str>,
    name: Option<&str>,
    status: bool,
) -> Result<(), ApiError> {
    let Some(authorization) = headers.get(header::AUTHORIZATION) else {
        return Ok(());
    };
    let token = authorization.to_str().ok().and_then(|v| v.strip_prefix("Bearer ")).unwrap_or_default();
    let grants = app.tokens.get(token).ok_or_else(ApiError::unauthorized)?;
    let verb = match (method, name) {
        (&Method::GET, Some(_)) => "get",
        (&Method::GET, None) if is_true(query.get("watch")) => "watch",
        (&Method::GET, None) => "list",
        (&Method::POST, _) => "create",
        (&Method::PUT, _) => "update",
        (&Method::PATCH, _) => "patch",
        (&Method::DELETE, Some(_)) => "delete",
        (&Method::DELETE, None) => "deletecollection",
        _ => return Ok(()), // refused as unsupported further on
    };
    grants.authorize(&Attributes {
        verb: verb.to_owned(),
        api_group: id.group.clone(),
        resource: if status { format!("{}/status", id.plural) } else { id.plural.clone() },
        namespace: namespace.map(str::to_owned),
        name: name.map(str::to_owned),
    })
}

/// `Some` (with what each row carries) when the client asked for a Table.
fn table_asked(
    headers: &HeaderMap,
    query: &HashMap<String, String>,
) -> Result<Option<IncludeObject>, ApiError> {
    if !table::wants_table(headers) {
        return Ok(None);
    }
    IncludeObject::parse(query.get("includeObject")).map(Some)
}

fn is_true(value: Option<&String>) -> bool {
    matches!(value.map(String::as_str), Some("true" | "1"))
}

fn parse_body(body: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("the request body is not valid JSON: {e}")))
}

fn list_options(rt: &ResourceType, query: &HashMap<String, String>) -> Result<ListOptions, ApiError> {
    let labels = query
        .get("labelSelector")
        .map(|s| LabelSelector::parse(s))
        .transpose()
        .map_err(ApiError::bad_request)?;
    let fields = query
        .get("fieldSelector")
        .map(|s| FieldSelector::parse(s, rt))
        .transpose()
        .map_err(ApiError::bad_request)?;
    let limit = match query.get("limit").map(|l| l.parse::<usize>()) {
        Some(Ok(0)) | None => None,
        Some(Ok(limit)) => Some(limit),
        Some(Err(_)) => return Err(ApiError::bad_request("limit must be a non-negative integer")),
    };
    Ok(ListOptions {
        labels,
        fields,
        limit,
        continue_token: query.get("continue").filter(|c| !c.is_empty()).cloned(),
    })
}

fn list_body(rt: &ResourceType, page: super::store::ListPage) -> Value {
    let mut metadata = json!({ "resourceVersion": page.revision.to_string() });
    if let Some(token) = page.continue_token {
        metadata["continue"] = token.into();
    }
    json!({
        "kind": rt.list_kind(),
        "apiVersion": rt.id.api_version(),
        "metadata": metadata,
        "items": page.items,
    })
}

fn delete_options(query: &HashMap<String, String>, body: &[u8]) -> Result<DeleteOptions, ApiError> {
    let body: Value = if body.iter().all(u8::is_ascii_whitespace) { json!({}) } else { parse_body(body)? };
    let policy =
        query.get("propagationPolicy").map(String::as_str).or_else(|| body["propagationPolicy"].as_str());
    let propagation = match policy {
        Some("Orphan") => Some(Propagation::Orphan),
        Some("Background" | "Foreground") => Some(Propagation::Delete),
        Some(other) => {
            return Err(ApiError::bad_request(format!("unknown propagationPolicy {other:?}")));
        }
        None => match body["orphanDependents"].as_bool() {
            Some(true) => Some(Propagation::Orphan),
            Some(false) => Some(Propagation::Delete),
            None => None,
        },
    };
    let precondition = |field: &str| body["preconditions"][field].as_str().map(str::to_string);
    // kube sends `dryRun` in the DeleteOptions body, kubectl in the query.
    let dry_run_in_body = body["dryRun"].as_array().is_some_and(|v| v.iter().any(|d| d == "All"));
    Ok(DeleteOptions {
        dry_run: dry_run(query)? || dry_run_in_body,
        propagation,
        precondition_uid: precondition("uid"),
        precondition_resource_version: precondition("resourceVersion"),
    })
}

/// `dryRun=All`, the one value the API knows.
fn dry_run(query: &HashMap<String, String>) -> Result<bool, ApiError> {
    match query.get("dryRun").map(String::as_str) {
        None => Ok(false),
        Some("All") => Ok(true),
        Some(other) => Err(ApiError::bad_request(format!(
            "dryRun: Unsupported value: []string{{{other:?}}}: supported values: \"All\""
        ))),
    }
}

/// `dryRun` and `fieldValidation` of a create, update or patch.
fn write_options(query: &HashMap<String, String>) -> Result<WriteOptions, ApiError> {
    let directive = query.get("fieldValidation").map(String::as_str);
    let field_validation = FieldValidation::parse(directive).ok_or_else(|| {
        ApiError::bad_request(format!(
            "fieldValidation: Unsupported value: {:?}: supported values: \"\", \"Ignore\", \"Strict\", \"Warn\"",
            directive.unwrap_or_default()
        ))
    })?;
    Ok(WriteOptions { dry_run: dry_run(query)?, field_validation })
}

/// A write's object, with a `Warning: 299` header per warning, as the API sends them.
fn written_response(code: StatusCode, written: Written) -> Response {
    let mut response = json_response(code, &written.object);
    for warning in &written.warnings {
        let escaped = warning.replace('\\', "\\\\").replace('"', "\\\"");
        if let Ok(value) = http::HeaderValue::from_str(&format!("299 - \"{escaped}\"")) {
            response.headers_mut().append(header::WARNING, value);
        }
    }
    response
}

/// `""` and `"0"` mean "from the current state"; anything else must be a revision.
fn parse_resource_version(value: Option<&String>) -> Result<Option<u64>, ApiError> {
    match value.map(String::as_str) {
        None | Some("" | "0") => Ok(None),
        Some(rv) => rv
            .parse()
            .map(Some)
            .map_err(|_| ApiError::bad_request(format!("invalid resource version {rv:?}"))),
    }
}

fn watch(
    app: &App,
    rt: &ResourceType,
    ns: Option<&str>,
    query: &HashMap<String, String>,
    headers: &HeaderMap,
) -> Result<Response, ApiError> {
    let table = table_asked(headers, query)?;
    let send_initial_events = is_true(query.get("sendInitialEvents"));
    if send_initial_events && query.get("resourceVersionMatch").map(String::as_str) != Some("NotOlderThan") {
        return Err(ApiError::bad_request(
            "sendInitialEvents is forbidden for watch unless resourceVersionMatch is set to NotOlderThan",
        ));
    }
    let request = WatchRequest {
        resource_version: parse_resource_version(query.get("resourceVersion"))?,
        send_initial_events,
        selection: ListOptions { limit: None, continue_token: None, ..list_options(rt, query)? },
    };
    let timeout = query
        .get("timeoutSeconds")
        .and_then(|t| t.parse().ok())
        .map(Duration::from_secs)
        .unwrap_or(DEFAULT_WATCH_TIMEOUT);
    let bookmarks = is_true(query.get("allowWatchBookmarks"))
        .then(|| tokio::time::interval_at(Instant::now() + app.bookmark_interval, app.bookmark_interval));
    let mut stream = WatchStream {
        rt: rt.clone(),
        ns: ns.map(str::to_string),
        selection: request.selection.clone(),
        queue: VecDeque::new(),
        receiver: None,
        start_revision: 0,
        seen: 0,
        deadline: Instant::now() + timeout,
        table,
        bookmarks,
        finished: false,
    };
    match app.store.watch(rt, ns, &request) {
        Ok(start) => stream.begin(start, send_initial_events),
        // A resourceVersion older than the history is answered inside the stream, as the API does.
        Err(error) if error.code == 410 => {
            stream.queue.push_back(error_line(&error));
            stream.finished = true;
        }
        Err(error) => return Err(error),
    }
    let body = Body::from_stream(futures::stream::unfold(stream, WatchStream::next_chunk));
    Ok((StatusCode::OK, [(header::CONTENT_TYPE, "application/json")], body).into_response())
}

/// One open watch: lines queued to send, and the store's notices still to translate.
struct WatchStream {
    rt: ResourceType,
    ns: Option<String>,
    selection: ListOptions,
    queue: VecDeque<Bytes>,
    receiver: Option<broadcast::Receiver<Notice>>,
    start_revision: u64,
    /// Every change up to this revision has been considered: what bookmarks promise.
    seen: u64,
    deadline: Instant,
    /// Objects sent as one-row Tables (`kubectl get -w`), with what each row carries.
    table: Option<IncludeObject>,
    bookmarks: Option<Interval>,
    finished: bool,
}

impl WatchStream {
    fn begin(&mut self, start: WatchStart, send_initial_events: bool) {
        for object in &start.initial {
            self.queue.push_back(self.object_line("ADDED", object));
        }
        for change in &start.replay {
            self.translate(change);
        }
        self.start_revision = start.revision;
        self.seen = start.revision;
        if send_initial_events {
            let annotations = json!({ "k8s.io/initial-events-end": "true" });
            self.queue.push_back(self.bookmark_line(Some(annotations)));
        }
        self.receiver = Some(start.receiver);
    }

    fn translate(&mut self, change: &super::store::Change) {
        if let Some((kind, object)) = watch_event(change, &self.rt, self.ns.as_deref(), &self.selection) {
            let line = self.object_line(kind, object);
            self.queue.push_back(line);
        }
    }

    /// An event about `object`: the object itself, or its one-row Table.
    fn object_line(&self, kind: &str, object: &Value) -> Bytes {
        match self.table {
            None => event_line(kind, object),
            Some(include) => {
                let revision = object["metadata"]["resourceVersion"].as_str().unwrap_or_default();
                let row = table::table(
                    &self.rt,
                    std::slice::from_ref(object),
                    revision,
                    None,
                    include,
                    jiff::Timestamp::now(),
                );
                event_line(kind, &row)
            }
        }
    }

    fn bookmark_line(&self, annotations: Option<Value>) -> Bytes {
        let mut metadata = json!({ "resourceVersion": self.seen.to_string() });
        if let Some(annotations) = annotations {
            metadata["annotations"] = annotations;
        }
        let object =
            json!({ "kind": self.rt.kind, "apiVersion": self.rt.id.api_version(), "metadata": metadata });
        event_line("BOOKMARK", &object)
    }

    fn absorb(&mut self, notice: Result<Notice, broadcast::error::RecvError>) {
        match notice {
            Ok(Notice::Change(change)) => {
                if change.revision > self.start_revision {
                    self.translate(&change);
                }
                self.seen = self.seen.max(change.revision);
            }
            Ok(Notice::Expired) | Err(broadcast::error::RecvError::Lagged(_)) => {
                let error = ApiError::gone(format!("too old resource version: {}", self.seen));
                self.queue.push_back(error_line(&error));
                self.finished = true;
            }
            Ok(Notice::Shutdown) | Err(broadcast::error::RecvError::Closed) => self.finished = true,
        }
    }

    async fn next_chunk(mut self) -> Option<(Result<Bytes, Infallible>, Self)> {
        loop {
            if let Some(chunk) = self.queue.pop_front() {
                return Some((Ok(chunk), self));
            }
            if self.finished {
                return None;
            }
            let receiver = self.receiver.as_mut()?;
            tokio::select! {
                () = tokio::time::sleep_until(self.deadline) => self.finished = true,
                () = tick(self.bookmarks.as_mut()) => self.queue.push_back(self.bookmark_line(None)),
                notice = receiver.recv() => self.absorb(notice),
            }
        }
    }
}

async fn tick(interval: Option<&mut Interval>) {
    match interval {
        Some(interval) => {
            interval.tick().await;
        }
        None => std::future::pending().await,
    }
}

fn event_line(kind: &str, object: &Value) -> Bytes {
    let mut line = json!({ "type": kind, "object": object }).to_string();
    line.push('\n');
    Bytes::from(line)
}

fn error_line(error: &ApiError) -> Bytes {
    event_line("ERROR", &error.to_status())
}

fn version_info() -> Value {
    json!({
        "major": "1",
        "minor": "33",
        "gitVersion": "v1.33.0+groundskeeper-in-memory",
        "gitCommit": "",
        "gitTreeState": "clean",
        "buildDate": "",
        "goVersion": "",
        "compiler": "",
        "platform": "linux/amd64",
    })
}

fn api_versions() -> Value {
    json!({ "kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [] })
}

fn group_list(store: &Store) -> Value {
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    for rt in store.registry().all().filter(|rt| !rt.id.group.is_empty()) {
        match groups.iter_mut().find(|(g, _)| *g == rt.id.group) {
            Some((_, versions)) if !versions.contains(&rt.id.version) => versions.push(rt.id.version.clone()),
            Some(_) => {}
            None => groups.push((rt.id.group.clone(), vec![rt.id.version.clone()])),
        }
    }
    let groups: Vec<Value> = groups
        .into_iter()
        .map(|(name, versions)| {
            let versions: Vec<Value> = versions
                .iter()
                .map(|v| json!({ "groupVersion": format!("{name}/{v}"), "version": v }))
                .collect();
            json!({ "name": name, "versions": versions, "preferredVersion": versions[0] })
        })
        .collect();
    json!({ "kind": "APIGroupList", "apiVersion": "v1", "groups": groups })
}

fn resource_list(store: &Store, group: &str, version: &str) -> Result<Value, ApiError> {
    let verbs = json!(["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]);
    let mut resources = Vec::new();
    for rt in store.registry().all().filter(|rt| rt.id.group == group && rt.id.version == version) {
        let entry = |name: String, verbs: Value| json!({ "name": name, "singularName": "", "namespaced": rt.namespaced, "kind": rt.kind, "verbs": verbs });
        let mut main = entry(rt.id.plural.clone(), verbs.clone());
        let (singular, short_names, categories) = names_of(rt);
        main["singularName"] = singular.into();
        if !short_names.is_empty() {
            main["shortNames"] = json!(short_names);
        }
        if !categories.is_empty() {
            main["categories"] = json!(categories);
        }
        resources.push(main);
        if rt.status_subresource {
            resources.push(entry(format!("{}/status", rt.id.plural), json!(["get", "patch", "update"])));
        }
    }
    if resources.is_empty() {
        return Err(ApiError::no_such_resource());
    }
    let group_version = if group.is_empty() { version.to_string() } else { format!("{group}/{version}") };
    Ok(
        json!({ "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources }),
    )
}

/// A type's singular name, short names and categories, as discovery lists them: a CRD's own
/// `spec.names`, the built-ins' usual ones (`kubectl get po`).
fn names_of(rt: &ResourceType) -> (String, Vec<String>, Vec<String>) {
    let strings = |value: &Value| -> Vec<String> {
        value
            .as_array()
            .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_string)).collect())
            .unwrap_or_default()
    };
    if let Some(crd) = rt.crd() {
        let singular = crd.names["singular"].as_str().map_or_else(|| rt.kind.to_lowercase(), str::to_string);
        return (singular, strings(&crd.names["shortNames"]), strings(&crd.names["categories"]));
    }
    let short: &[&str] = match (rt.id.group.as_str(), rt.id.plural.as_str()) {
        ("", "pods") => &["po"],
        ("", "services") => &["svc"],
        ("", "configmaps") => &["cm"],
        ("", "namespaces") => &["ns"],
        ("", "persistentvolumeclaims") => &["pvc"],
        ("", "events") | ("events.k8s.io", "events") => &["ev"],
        ("", "serviceaccounts") => &["sa"],
        ("apps", "statefulsets") => &["sts"],
        ("apps", "deployments") => &["deploy"],
        _ => &[],
    };
    (rt.kind.to_lowercase(), short.iter().map(|s| s.to_string()).collect(), Vec::new())
}
