//! A Scylla Manager Agent stand-in following Scylla's own REST API description (the reference files, see [`crate::reference`]).
//!
//! HTTPS on 127.0.0.1 with a throwaway CA, the agent's bearer-token check (401 with the agent's
//! own body otherwise), and the Scylla REST routes groundskeeper uses, with Scylla's paths,
//! methods, query parameters, response shapes and error bodies. [`ROUTES`] lists them; a contract
//! test checks each against the reference files. Stricter than Scylla in one way, on purpose: a
//! query parameter the reference does not list for a route is refused with 400, so a typo in a
//! client shows up in tests instead of being silently ignored.
//!
//! Behaviour is set with [`AgentSpec`]: keyspaces and their replication, keyspaces whose cleanup
//! fails because the ring moves, a slow cleanup task, an older node without the task API or
//! without `mark_node_as_clean`, a cleanup left running by an earlier attempt, a cleanup that runs
//! until it is stopped, and the token ring. Every request is recorded ([`ScyllaAgent::calls`]).
//!
//! A running cleanup task shows in `GET /compaction_manager/compactions` as a `Cleanup`
//! compaction, as Scylla lists the compactions a cleanup runs; `abort_task` or
//! `stop_compaction?type=CLEANUP` ends it `failed`, as they end Scylla's, and the keyspace is then
//! recorded as stopped ([`ScyllaAgent::stopped_keyspaces`]), not cleaned.

use std::collections::{BTreeMap, BTreeSet};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use http::{Method, Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

/// What the agent answers to a missing or wrong token (scylla-manager's agent router).
pub const UNAUTHORIZED_BODY: &str = r#"{"message":"unauthorized","code":401}"#;
/// Scylla's refusal to clean while the ring moves.
pub const TOPOLOGY_CHANGING_MESSAGE: &str = "Can not perform cleanup operation when topology changes";
/// `type` of a cleanup task in Scylla's task manager (module `compaction`).
pub const CLEANUP_TASK_TYPE: &str = "cleanup compaction";
/// `task_type` of a running cleanup in `GET /compaction_manager/compactions`.
pub const CLEANUP_COMPACTION_TYPE: &str = "Cleanup";

/// How a keyspace is replicated, which decides whether it can hold stale data after scaling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyspaceKind {
    /// `LocalStrategy` (system, system_schema): node-local, nothing to clean.
    Local,
    /// Vnode-replicated: needs cleanup after the ring changes.
    Vnodes,
    /// Tablet-replicated: Scylla moves the data itself, cleanup is not supported.
    Tablets,
}

/// A route the stand-in serves: reference path template, method, the query parameters it takes
/// and what it returns (as the reference names the type).
#[derive(Debug, Clone, Copy)]
pub struct Route {
    pub method: &'static str,
    pub path: &'static str,
    pub query: &'static [&'static str],
    pub returns: &'static str,
}

/// Every Scylla route the stand-in serves. Anything else is Scylla's 404.
pub const ROUTES: &[Route] = &[
    Route { method: "GET", path: "/storage_service/load", query: &[], returns: "double" },
    Route { method: "GET", path: "/storage_service/schema_version", query: &[], returns: "string" },
    Route { method: "GET", path: "/storage_service/tokens", query: &[], returns: "array<string>" },
    Route { method: "GET", path: "/storage_service/tokens/{endpoint}", query: &[], returns: "array<string>" },
    Route {
        method: "GET",
        path: "/storage_service/keyspaces",
        query: &["type", "replication"],
        returns: "array<string>",
    },
    Route {
        method: "GET",
        path: "/storage_service/describe_ring/{keyspace}",
        query: &[],
        returns: "array<token_range>",
    },
    Route {
        method: "GET",
        path: "/storage_service/ownership/{keyspace}",
        query: &[],
        returns: "array<mapper>",
    },
    Route {
        method: "POST",
        path: "/storage_service/keyspace_cleanup/{keyspace}",
        query: &["cf"],
        returns: "long",
    },
    Route { method: "POST", path: "/storage_service/mark_node_as_clean", query: &[], returns: "void" },
    Route {
        method: "POST",
        path: "/tasks/compaction/keyspace_cleanup/{keyspace}",
        query: &["cf"],
        returns: "string",
    },
    Route {
        method: "GET",
        path: "/task_manager/list_module_tasks/{module}",
        query: &["internal", "keyspace", "table"],
        returns: "array<task_stats>",
    },
    Route { method: "GET", path: "/task_manager/task_status/{task_id}", query: &[], returns: "task_status" },
    Route {
        method: "GET",
        path: "/task_manager/wait_task/{task_id}",
        query: &["timeout"],
        returns: "task_status",
    },
    Route { method: "POST", path: "/task_manager/abort_task/{task_id}", query: &[], returns: "void" },
    Route { method: "GET", path: "/compaction_manager/compactions", query: &[], returns: "array<summary>" },
    Route { method: "POST", path: "/compaction_manager/stop_compaction", query: &["type"], returns: "void" },
];

/// Query parameters the reference marks required, per route path.
const REQUIRED_QUERY: &[(&str, &str)] = &[("/compaction_manager/stop_compaction", "type")];

/// How the stand-in behaves. `Default` is a healthy, current node with Scylla's system keyspaces.
#[derive(Debug, Clone)]
pub struct AgentSpec {
    pub token: String,
    /// In the order `GET /storage_service/keyspaces` lists them.
    pub keyspaces: Vec<(String, KeyspaceKind)>,
    /// Cleanup of these keyspaces fails with [`TOPOLOGY_CHANGING_MESSAGE`].
    pub topology_changing: BTreeSet<String>,
    /// The cleanup task of these keyspaces ends `failed` (after it started fine).
    pub failing_tasks: BTreeSet<String>,
    /// How many `task_status` polls a cleanup task stays running, its progress rising each time.
    pub polls_until_done: u32,
    /// The node has the task manager and `/tasks/...` (Scylla 5.4+ / 2024.1+).
    pub task_api: bool,
    /// The node offers `POST /storage_service/mark_node_as_clean`.
    pub mark_node_as_clean: bool,
    /// A cleanup started by an earlier attempt is still running on this keyspace.
    pub stale_cleanup: Option<String>,
    /// The whole ring, in Scylla's order.
    pub ring: Vec<String>,
    /// Per-endpoint tokens; an endpoint not listed has none (bootstrapping).
    pub node_tokens: BTreeMap<String, Vec<String>>,
    /// How long a `wait_task` with a timeout lasts (Scylla waits up to the timeout while the task
    /// runs). Zero answers at once, which keeps tests fast; the demo waits so progress shows.
    pub wait_task_delay: Duration,
    /// What a proxy in front of the agent does to its answers.
    pub proxy: Proxy,
    /// The cluster this node belongs to and its address there (see the module documentation).
    pub member: Option<(cluster::Cluster, String)>,
    /// The node answers `describe_ring` and `ownership/{keyspace}` (with a cluster model).
    pub describe_ring: bool,
    /// What `GET /storage_service/load` answers: the bytes the node holds.
    pub load_bytes: f64,
    /// Ring changes racing a reader: right after this agent answered its n-th `describe_ring`
    /// (from 1), node (endpoint, datacenter, rack) joins the modelled cluster.
    pub joins_after_describe_ring: Vec<(usize, String, String, String)>,
}

/// A proxy between the runner and the agent, as some are found in front of it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Proxy {
    /// None: the agent's own answers.
    #[default]
    None,
    /// Error answers are replaced by the proxy's own page, which echoes the request's headers,
    /// the `Authorization` header included (as debugging proxies do).
    EchoHeadersOnError,
    /// Successful answers arrive as a page that is not JSON (a captive portal, a broken proxy).
    GarbledBodies,
    /// Every answer keeps its status but its body never ends: a JSON array of strings, sent in
    /// chunks without a declared length, for as long as the client reads.
    EndlessBodies,
}

impl Default for AgentSpec {
    fn default() -> Self {
        Self {
            token: "agent-token".to_owned(),
            keyspaces: vec![
                ("system".to_owned(), KeyspaceKind::Local),
                ("system_schema".to_owned(), KeyspaceKind::Local),
                ("system_distributed".to_owned(), KeyspaceKind::Vnodes),
                ("system_traces".to_owned(), KeyspaceKind::Vnodes),
            ],
            topology_changing: BTreeSet::new(),
            failing_tasks: BTreeSet::new(),
            polls_until_done: 0,
            task_api: true,
            mark_node_as_clean: true,
            stale_cleanup: None,
            ring: vec!["-1".to_owned(), "0".to_owned(), "1".to_owned()],
            node_tokens: BTreeMap::new(),
            wait_task_delay: Duration::ZERO,
            proxy: Proxy::None,
            member: None,
            describe_ring: true,
            load_bytes: 1_073_741_824.0,
            joins_after_describe_ring: Vec::new(),
        }
    }
}

impl AgentSpec {
    /// The node `endpoint` (its broadcast address) of `cluster`: ring, tokens, keyspaces and
    /// `describe_ring` come from the shared model.
    pub fn member_of(mut self, cluster: &cluster::Cluster, endpoint: &str) -> Self {
        self.member = Some((cluster.clone(), endpoint.to_owned()));
        self
    }

    /// A node that does not offer `describe_ring` nor `ownership/{keyspace}` (404), as an agent
    /// or a proxy limiting the routes it passes on.
    pub fn without_describe_ring(mut self) -> Self {
        self.describe_ring = false;
        self
    }

    /// Node `endpoint` joins the modelled cluster right after this agent answered its
    /// `answers`-th `describe_ring`: the ring moves between two reads of one reader.
    pub fn join_after_describe_ring(
        mut self,
        answers: usize,
        endpoint: &str,
        datacenter: &str,
        rack: &str,
    ) -> Self {
        self.joins_after_describe_ring.push((answers, endpoint.into(), datacenter.into(), rack.into()));
        self
    }

    pub fn load_bytes(mut self, bytes: f64) -> Self {
        self.load_bytes = bytes;
        self
    }

    pub fn keyspace(mut self, name: &str, kind: KeyspaceKind) -> Self {
        self.keyspaces.push((name.to_owned(), kind));
        self
    }

    pub fn topology_changing(mut self, keyspace: &str) -> Self {
        self.topology_changing.insert(keyspace.to_owned());
        self
    }

    pub fn failing_task(mut self, keyspace: &str) -> Self {
        self.failing_tasks.insert(keyspace.to_owned());
        self
    }

    pub fn wait_task_delay(mut self, delay: Duration) -> Self {
        self.wait_task_delay = delay;
        self
    }

    pub fn polls_until_done(mut self, polls: u32) -> Self {
        self.polls_until_done = polls;
        self
    }

    /// A cleanup task never finishes by itself: it runs until `abort_task` or
    /// `stop_compaction?type=CLEANUP` stops it (a large keyspace, seen from a short test).
    pub fn cleanup_runs_until_stopped(mut self) -> Self {
        self.polls_until_done = u32::MAX;
        self
    }

    /// An older node: no task manager, no `/tasks/...`, no `mark_node_as_clean`.
    pub fn old_node(mut self) -> Self {
        self.task_api = false;
        self.mark_node_as_clean = false;
        self
    }

    pub fn without_mark_node_as_clean(mut self) -> Self {
        self.mark_node_as_clean = false;
        self
    }

    pub fn stale_cleanup(mut self, keyspace: &str) -> Self {
        self.stale_cleanup = Some(keyspace.to_owned());
        self
    }

    pub fn ring(mut self, ring: &[&str]) -> Self {
        self.ring = ring.iter().map(|t| (*t).to_owned()).collect();
        self
    }

    pub fn node(mut self, endpoint: &str, tokens: &[&str]) -> Self {
        let tokens = tokens.iter().map(|t| (*t).to_owned()).collect();
        self.node_tokens.insert(endpoint.to_owned(), tokens);
        self
    }
}

/// One request as the stand-in received it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub method: String,
    pub path: String,
    pub query: Vec<(String, String)>,
    /// The bearer token was right.
    pub authorized: bool,
}

impl Call {
    /// `"POST /storage_service/keyspace_cleanup/ks"`.
    pub fn line(&self) -> String {
        format!("{} {}", self.method, self.path)
    }
}

#[derive(Debug, Clone)]
struct Task {
    id: String,
    keyspace: String,
    state: &'static str,
    error: String,
    polls: u32,
    /// Started by an earlier attempt, not by a request to this stand-in.
    stale: bool,
}

#[derive(Debug)]
struct State {
    spec: AgentSpec,
    calls: Vec<Call>,
    tasks: Vec<Task>,
    next_task: u64,
    stale_compaction_running: bool,
    cleaned: Vec<String>,
    /// Keyspaces whose cleanup task was ended by `abort_task` or `stop_compaction`.
    stopped: Vec<String>,
    marked_clean: bool,
    /// Bytes of every answer's body so far.
    served_bytes: u64,
    /// `describe_ring` answers so far.
    describe_ring_answers: usize,
    /// While true, running cleanup tasks make no progress ([`ScyllaAgent::hold_cleanups`]).
    held: bool,
}

/// A running stand-in. Stops when dropped.
pub struct ScyllaAgent {
    addr: SocketAddr,
    ca_pem: String,
    state: Arc<Mutex<State>>,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for ScyllaAgent {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl ScyllaAgent {
    /// Starts serving on 127.0.0.1 (a free port) with a fresh CA.
    pub async fn start(spec: AgentSpec) -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let (ca_pem, tls) = throwaway_tls();
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the agent stand-in");
        let addr = listener.local_addr().expect("bound address");
        let mut tasks = Vec::new();
        if let (Some(keyspace), true) = (&spec.stale_cleanup, spec.task_api) {
            tasks.push(Task {
                id: task_id(0),
                keyspace: keyspace.clone(),
                state: "running",
                error: String::new(),
                polls: 0,
                stale: true,
            });
        }
        let state = Arc::new(Mutex::new(State {
            stale_compaction_running: spec.stale_cleanup.is_some(),
            spec,
            calls: Vec::new(),
            tasks,
            next_task: 1,
            cleaned: Vec::new(),
            stopped: Vec::new(),
            marked_clean: false,
            served_bytes: 0,
            describe_ring_answers: 0,
            held: false,
        }));
        let server = tokio::spawn(serve(listener, TlsAcceptor::from(Arc::new(tls)), state.clone()));
        Self { addr, ca_pem, state, server }
    }

    pub fn host(&self) -> String {
        self.addr.ip().to_string()
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// PEM of the CA that signed the server certificate (for `--agent-ca-file`).
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    pub fn token(&self) -> String {
        self.lock().spec.token.clone()
    }

    /// Every request so far, in order.
    pub fn calls(&self) -> Vec<Call> {
        self.lock().calls.clone()
    }

    /// `"<METHOD> <path>"` of every authorized request so far, in order.
    pub fn call_lines(&self) -> Vec<String> {
        self.calls().iter().filter(|c| c.authorized).map(Call::line).collect()
    }

    /// Keyspaces whose cleanup completed, in order.
    /// Bytes of every answer's body so far: what readers of this node were sent.
    pub fn served_bytes(&self) -> u64 {
        self.lock().served_bytes
    }

    pub fn cleaned_keyspaces(&self) -> Vec<String> {
        self.lock().cleaned.clone()
    }

    /// Keyspaces whose cleanup (started through this stand-in) is running now.
    pub fn running_cleanups(&self) -> Vec<String> {
        self.lock()
            .tasks
            .iter()
            .filter(|t| !t.stale && t.state == "running")
            .map(|t| t.keyspace.clone())
            .collect()
    }

    /// Keyspaces whose cleanup was stopped by `abort_task` or `stop_compaction`, in order.
    pub fn stopped_keyspaces(&self) -> Vec<String> {
        self.lock().stopped.clone()
    }

    /// The `type` of every authorized `POST /compaction_manager/stop_compaction`, in order.
    pub fn stop_compaction_types(&self) -> Vec<String> {
        self.calls()
            .iter()
            .filter(|c| c.authorized && c.method == "POST" && c.path == "/compaction_manager/stop_compaction")
            .map(|c| c.query.iter().find(|(k, _)| k == "type").map(|(_, v)| v.clone()).unwrap_or_default())
            .collect()
    }

    /// `mark_node_as_clean` was called.
    pub fn marked_clean(&self) -> bool {
        self.lock().marked_clean
    }

    /// A cleanup from an earlier attempt is still running.
    pub fn stale_cleanup_running(&self) -> bool {
        let state = self.lock();
        state.stale_compaction_running || state.tasks.iter().any(|t| t.stale && t.state == "running")
    }

    /// The ring changes (scaling); the observer should see it on its next read.
    /// As if Scylla restarted: every task it knew is forgotten (a `task_status` of one of them is
    /// then Scylla's 400 "task with id … not found"), and nothing it ran goes on.
    pub fn restart(&self) {
        self.lock().tasks.clear();
    }

    /// Holds every cleanup task of this node where it is (`true`) until released (`false`): a
    /// scenario that needs a cleanup still running at a later step of its own says so, instead of
    /// hoping the cleanup is slow enough.
    pub fn hold_cleanups(&self, held: bool) {
        self.lock().held = held;
    }

    pub fn set_ring(&self, ring: Vec<String>) {
        self.lock().spec.ring = ring;
    }

    pub fn set_node_tokens(&self, endpoint: &str, tokens: Vec<String>) {
        self.lock().spec.node_tokens.insert(endpoint.to_owned(), tokens);
    }

    /// Whether cleanup of `keyspace` fails because the ring moves.
    pub fn set_topology_changing(&self, keyspace: &str, changing: bool) {
        let mut state = self.lock();
        if changing {
            state.spec.topology_changing.insert(keyspace.to_owned());
        } else {
            state.spec.topology_changing.remove(keyspace);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().expect("agent stand-in state")
    }
}

fn task_id(n: u64) -> String {
    format!("6f1e2c3a-0000-4000-8000-{n:012x}")
}

/// A CA and a server certificate for 127.0.0.1 / localhost signed by it.
fn throwaway_tls() -> (String, rustls::ServerConfig) {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.distinguished_name.push(DnType::CommonName, "scylla-agent stand-in CA");
    let ca_key = KeyPair::generate().expect("CA key");
    let ca_cert = ca_params.self_signed(&ca_key).expect("CA certificate");
    let issuer = Issuer::new(ca_params, ca_key);

    let mut params =
        CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()]).expect("server params");
    params.distinguished_name.push(DnType::CommonName, "scylla-agent stand-in");
    let key = KeyPair::generate().expect("server key");
    let cert = params.signed_by(&key, &issuer).expect("server certificate");

    let config =
        rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_no_client_auth()
            .with_single_cert(
                vec![CertificateDer::from(cert.der().to_vec())],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
            )
            .expect("server TLS config");
    (ca_cert.pem(), config)
}

async fn serve(listener: TcpListener, acceptor: TlsAcceptor, state: Arc<Mutex<State>>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let acceptor = acceptor.clone();
        let state = state.clone();
        tokio::spawn(async move {
            // A client that rejects the certificate ends the handshake: nothing to serve.
            let Ok(tls) = acceptor.accept(stream).await else {
                return;
            };
            let service = service_fn(move |request: Request<Incoming>| {
                let state = state.clone();
                async move {
                    tokio::time::sleep(wait_before_answering(&state, &request)).await;
                    Ok::<_, Infallible>(handle(&state, &request))
                }
            });
            let _ =
                hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(tls), service).await;
        });
    }
}

/// [`AgentSpec::wait_task_delay`] for a `wait_task` with a timeout, else nothing.
fn wait_before_answering(state: &Mutex<State>, request: &Request<Incoming>) -> Duration {
    let uri = request.uri();
    let waits = request.method() == Method::GET
        && uri.path().starts_with("/task_manager/wait_task/")
        && uri.query().is_some_and(|q| q.contains("timeout="));
    if waits { state.lock().expect("agent stand-in state").spec.wait_task_delay } else { Duration::ZERO }
}

fn handle(state: &Mutex<State>, request: &Request<Incoming>) -> Response<Body> {
    let mut state = state.lock().expect("agent stand-in state");
    let query: Vec<(String, String)> = request.uri().query().map(parse_query).unwrap_or_default();
    let expected = format!("Bearer {}", state.spec.token);
    let authorized = request
        .headers()
        .get(http::header::AUTHORIZATION)
        .is_some_and(|v| v.as_bytes() == expected.as_bytes());
    state.calls.push(Call {
        method: request.method().to_string(),
        path: percent_decode(request.uri().path()),
        query: query.clone(),
        authorized,
    });
    if !authorized {
        return respond(StatusCode::UNAUTHORIZED, UNAUTHORIZED_BODY.to_owned());
    }
    let path = percent_decode(request.uri().path());
    let answer = match route(request.method(), &path) {
        Some((route, params)) => match check_query(route, &query) {
            Ok(()) => dispatch(&mut state, route, &params, &query),
            Err(err) => err.response(),
        },
        None => not_found(),
    };
    state.served_bytes += axum::body::HttpBody::size_hint(answer.body()).exact().unwrap_or(0);
    through_proxy(state.spec.proxy, request, answer)
}

/// The schema version the node reports: the cluster model's, which moves with every keyspace
/// created or altered; a fixed one without a model.
fn schema_version(state: &State) -> String {
    match &state.spec.member {
        Some((cluster, _)) => cluster.schema_version(),
        None => "5b1c2e0a-0000-1000-8000-000000000001".to_owned(),
    }
}

/// The agent's answer as `proxy` passes it on.
fn through_proxy(proxy: Proxy, request: &Request<Incoming>, answer: Response<Body>) -> Response<Body> {
    match proxy {
        Proxy::EchoHeadersOnError if !answer.status().is_success() => {
            let headers: Vec<String> = request
                .headers()
                .iter()
                .map(|(name, value)| format!("{name}: {}", String::from_utf8_lossy(value.as_bytes())))
                .collect();
            let page = format!(
                "<html><body><h1>502 Bad Gateway</h1><p>upstream answered {}</p><pre>{} {}\n{}</pre></body></html>",
                answer.status(),
                request.method(),
                request.uri(),
                headers.join("\n")
            );
            respond(StatusCode::BAD_GATEWAY, page)
        }
        Proxy::GarbledBodies if answer.status().is_success() => {
            respond(StatusCode::OK, "<html><body>Please sign in to continue</body></html>".to_owned())
        }
        Proxy::EndlessBodies => {
            let opening = futures::stream::once(async { Ok::<_, Infallible>(bytes_of("[")) });
            let chunk = format!("\"{}\",", "x".repeat(64 * 1024 - 4));
            let rest = futures::stream::repeat_with(move || Ok(bytes_of(&chunk)));
            Response::builder()
                .status(answer.status())
                .header(http::header::CONTENT_TYPE, "application/json")
                .body(Body::from_stream(futures::StreamExt::chain(opening, rest)))
                .expect("a valid response")
        }
        _ => answer,
    }
}

/// The route for a method and path, with the path parameters by name.
fn route(method: &Method, path: &str) -> Option<(&'static Route, BTreeMap<String, String>)> {
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    ROUTES.iter().find_map(|route| {
        if route.method != method.as_str() {
            return None;
        }
        let template: Vec<&str> = route.path.trim_start_matches('/').split('/').collect();
        if template.len() != segments.len() {
            return None;
        }
        let mut params = BTreeMap::new();
        for (t, s) in template.iter().zip(&segments) {
            match t.strip_prefix('{').and_then(|t| t.strip_suffix('}')) {
                Some(name) if !s.is_empty() => {
                    params.insert(name.to_owned(), (*s).to_owned());
                }
                Some(_) => return None,
                None if t == s => {}
                None => return None,
            }
        }
        Some((route, params))
    })
}

fn check_query(route: &Route, query: &[(String, String)]) -> Result<(), ScyllaError> {
    if let Some((name, _)) = query.iter().find(|(k, _)| !route.query.contains(&k.as_str())) {
        return Err(ScyllaError::new(
            StatusCode::BAD_REQUEST,
            &format!("unexpected query parameter '{name}' (not in the API description)"),
        ));
    }
    for (path, name) in REQUIRED_QUERY {
        if *path == route.path && !query.iter().any(|(k, _)| k == name) {
            return Err(ScyllaError::new(
                StatusCode::BAD_REQUEST,
                &format!("Missing mandatory parameter '{name}'"),
            ));
        }
    }
    Ok(())
}

fn dispatch(
    state: &mut State,
    route: &Route,
    params: &BTreeMap<String, String>,
    query: &[(String, String)],
) -> Response<Body> {
    let param = |name: &str| params.get(name).cloned().unwrap_or_default();
    let query_value = |name: &str| query.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
    let task_api = state.spec.task_api;
    match route.path {
        "/storage_service/load" => ok(json!(state.spec.load_bytes)),
        "/storage_service/schema_version" => ok(json!(schema_version(state))),
        "/storage_service/tokens" => ok(json!(ring(state))),
        "/storage_service/tokens/{endpoint}" => ok(json!(node_tokens(state, &param("endpoint")))),
        "/storage_service/describe_ring/{keyspace}" if state.spec.describe_ring => {
            let answer = describe_ring(state, &param("keyspace"));
            join_after_describe_ring(state);
            answer
        }
        "/storage_service/ownership/{keyspace}" if state.spec.describe_ring => {
            effective_ownership(state, &param("keyspace"))
        }
        "/storage_service/keyspaces" => {
            keyspaces(state, query_value("type").as_deref(), query_value("replication").as_deref())
        }
        "/storage_service/keyspace_cleanup/{keyspace}" => cleanup_blocking(state, &param("keyspace")),
        "/storage_service/mark_node_as_clean" if state.spec.mark_node_as_clean => {
            state.marked_clean = true;
            ok(Value::Null)
        }
        "/tasks/compaction/keyspace_cleanup/{keyspace}" if task_api => {
            cleanup_async(state, &param("keyspace"))
        }
        "/task_manager/list_module_tasks/{module}" if task_api => {
            module_tasks(state, &param("module"), query_value("keyspace").as_deref())
        }
        "/task_manager/task_status/{task_id}" if task_api => task_status(state, &param("task_id"), 1),
        "/task_manager/wait_task/{task_id}" if task_api => {
            wait_task(state, &param("task_id"), query_value("timeout").is_some())
        }
        "/task_manager/abort_task/{task_id}" if task_api => abort_task(state, &param("task_id")),
        "/compaction_manager/compactions" => compactions(state),
        "/compaction_manager/stop_compaction" => {
            stop_compaction(state, &query_value("type").unwrap_or_default())
        }
        _ => not_found(),
    }
}

fn ring(state: &State) -> Vec<String> {
    match &state.spec.member {
        Some((cluster, _)) => cluster.ring().iter().map(i64::to_string).collect(),
        None => state.spec.ring.clone(),
    }
}

fn node_tokens(state: &State, endpoint: &str) -> Vec<String> {
    match &state.spec.member {
        Some((cluster, _)) => cluster.node_tokens(endpoint).iter().map(i64::to_string).collect(),
        None => state.spec.node_tokens.get(endpoint).cloned().unwrap_or_default(),
    }
}

/// The keyspaces with their kinds, from the cluster model when there is one.
fn keyspace_kinds(state: &State) -> Vec<(String, KeyspaceKind)> {
    match &state.spec.member {
        Some((cluster, _)) => {
            cluster.keyspaces().into_iter().map(|(name, strategy)| (name, strategy.kind())).collect()
        }
        None => state.spec.keyspaces.clone(),
    }
}

/// Scylla answers an unknown keyspace with 400 and a tablet keyspace (no per-keyspace ring)
/// with an internal error, 500.
fn describe_ring(state: &State, keyspace: &str) -> Response<Body> {
    let Some((cluster, endpoint)) = &state.spec.member else {
        return not_found();
    };
    match cluster.describe_ring_json(keyspace, endpoint) {
        Ok(rows) => ok(rows),
        Err(err @ cluster::ClusterError::PerTable(_)) => {
            scylla_error(StatusCode::INTERNAL_SERVER_ERROR, &err.to_string())
        }
        Err(err) => scylla_error(StatusCode::BAD_REQUEST, &err.to_string()),
    }
}

/// The joins [`AgentSpec::join_after_describe_ring`] scheduled after the answer just given.
fn join_after_describe_ring(state: &mut State) {
    state.describe_ring_answers += 1;
    let Some((cluster, _)) = &state.spec.member else {
        return;
    };
    for (after, endpoint, datacenter, rack) in &state.spec.joins_after_describe_ring {
        if *after == state.describe_ring_answers {
            cluster.join(endpoint, datacenter, rack).expect("a scheduled join of the model");
        }
    }
}

/// The `mapper` list Scylla answers: `{"key": address, "value": share}` by address.
fn effective_ownership(state: &State, keyspace: &str) -> Response<Body> {
    let Some((cluster, endpoint)) = &state.spec.member else {
        return not_found();
    };
    match cluster.effective_ownership(keyspace, endpoint) {
        Ok(shares) => ok(Value::Array(
            shares.into_iter().map(|(key, share)| json!({"key": key, "value": share.to_string()})).collect(),
        )),
        Err(err @ cluster::ClusterError::PerTable(_)) => {
            scylla_error(StatusCode::INTERNAL_SERVER_ERROR, &err.to_string())
        }
        Err(err) => scylla_error(StatusCode::BAD_REQUEST, &err.to_string()),
    }
}

fn keyspaces(state: &State, kind: Option<&str>, replication: Option<&str>) -> Response<Body> {
    let by_type = |name: &str, k: KeyspaceKind| match kind.unwrap_or("all") {
        "user" => !name.starts_with("system"),
        "non_local_strategy" => k != KeyspaceKind::Local,
        _ => true,
    };
    // Scylla filters on "uses tablets": local keyspaces count as not tablets.
    let by_replication = |k: KeyspaceKind| match replication.unwrap_or("all") {
        "vnodes" => k != KeyspaceKind::Tablets,
        "tablets" => k == KeyspaceKind::Tablets,
        _ => true,
    };
    let names: Vec<String> = keyspace_kinds(state)
        .into_iter()
        .filter(|(name, k)| by_type(name, *k) && by_replication(*k))
        .map(|(name, _)| name)
        .collect();
    ok(json!(names))
}

/// Scylla's checks before any cleanup: the keyspace exists, and the ring is not moving. Keyspaces
/// that need no cleanup are answered without doing any (as newer Scylla does).
fn cleanup_preconditions(state: &State, keyspace: &str) -> Result<Option<KeyspaceKind>, ScyllaError> {
    let kinds = keyspace_kinds(state);
    let Some((_, kind)) = kinds.iter().find(|(n, _)| n == keyspace) else {
        return Err(ScyllaError::new(
            StatusCode::BAD_REQUEST,
            &format!("Keyspace {keyspace} Does not exist"),
        ));
    };
    if *kind != KeyspaceKind::Vnodes {
        return Ok(None);
    }
    if state.spec.topology_changing.contains(keyspace) {
        return Err(ScyllaError::new(StatusCode::INTERNAL_SERVER_ERROR, TOPOLOGY_CHANGING_MESSAGE));
    }
    Ok(Some(*kind))
}

fn cleanup_blocking(state: &mut State, keyspace: &str) -> Response<Body> {
    match cleanup_preconditions(state, keyspace) {
        Ok(Some(_)) => {
            record_cleaned(state, keyspace);
            ok(json!(0))
        }
        Ok(None) => ok(json!(0)),
        Err(err) => err.response(),
    }
}

/// A cleanup finished: recorded, and in the cluster model the node keeps only what it replicates.
fn record_cleaned(state: &mut State, keyspace: &str) {
    if let Some((cluster, endpoint)) = &state.spec.member {
        cluster.cleaned(endpoint, keyspace);
    }
    state.cleaned.push(keyspace.to_owned());
}

fn cleanup_async(state: &mut State, keyspace: &str) -> Response<Body> {
    if let Err(err) = cleanup_preconditions(state, keyspace) {
        return err.response();
    }
    let id = task_id(state.next_task);
    state.next_task += 1;
    state.tasks.push(Task {
        id: id.clone(),
        keyspace: keyspace.to_owned(),
        state: "running",
        error: String::new(),
        polls: 0,
        stale: false,
    });
    ok(json!(id))
}

/// Advances the task by `polls` (a `wait_task` finishes it) and returns its status.
fn task_status(state: &mut State, id: &str, polls: u32) -> Response<Body> {
    let polls_until_done = state.spec.polls_until_done;
    let failing = state.spec.failing_tasks.clone();
    let Some(task) = state.tasks.iter_mut().find(|t| t.id == id) else {
        return scylla_error(StatusCode::BAD_REQUEST, &format!("task with id {id} not found"));
    };
    let mut finished_now = false;
    if task.state == "running" && !task.stale && !state.held {
        task.polls = task.polls.saturating_add(polls);
        if task.polls > polls_until_done {
            finished_now = true;
            if failing.contains(&task.keyspace) {
                task.state = "failed";
                task.error = "std::runtime_error (cleanup failed: injected by the stand-in)".into();
            } else {
                task.state = "done";
            }
        }
    }
    let status = task_status_json(task, polls_until_done);
    if finished_now && status["state"] == "done" {
        let keyspace = task.keyspace.clone();
        record_cleaned(state, &keyspace);
    }
    ok(status)
}

/// Without a timeout the wait lasts until the task is finished. With one, the stand-in waits
/// only [`AgentSpec::wait_task_delay`] (nothing by default): the timeout counts as one poll, and
/// a task still running gets Scylla's 408.
fn wait_task(state: &mut State, id: &str, with_timeout: bool) -> Response<Body> {
    let response = task_status(state, id, if with_timeout { 1 } else { u32::MAX });
    let still_running = state.tasks.iter().any(|t| t.id == id && t.state == "running");
    if response.status() == StatusCode::OK && still_running {
        return scylla_error(StatusCode::REQUEST_TIMEOUT, "Timed out waiting for the task");
    }
    response
}

/// The `task_status` model of `task_manager.json`.
fn task_status_json(task: &Task, polls_until_done: u32) -> Value {
    let total = 1000.0;
    let completed = match task.state {
        "done" => total,
        _ => total * f64::from(task.polls.min(polls_until_done)) / (f64::from(polls_until_done.max(1)) + 1.0),
    };
    json!({
        "id": task.id,
        "type": CLEANUP_TASK_TYPE,
        "kind": "node",
        "scope": "keyspace",
        "state": task.state,
        "is_abortable": true,
        "start_time": "2026-11-21T12:00:00Z",
        "end_time": if task.state == "running" { "1970-01-01T00:00:00Z" } else { "2026-11-21T12:05:00Z" },
        "error": task.error,
        "parent_id": "00000000-0000-0000-0000-000000000000",
        "sequence_number": 1,
        "shard": 0,
        "keyspace": task.keyspace,
        "table": "",
        "entity": "",
        "progress_units": "",
        "progress_total": total,
        "progress_completed": completed,
        "children_ids": [],
    })
}

/// The `task_stats` model of `task_manager.json`.
fn task_stats_json(task: &Task) -> Value {
    json!({
        "task_id": task.id,
        "state": task.state,
        "type": CLEANUP_TASK_TYPE,
        "kind": "node",
        "scope": "keyspace",
        "keyspace": task.keyspace,
        "table": "",
        "entity": "",
        "sequence_number": 1,
        "shard": 0,
        "start_time": "2026-11-21T12:00:00Z",
        "end_time": "1970-01-01T00:00:00Z",
    })
}

fn module_tasks(state: &State, module: &str, keyspace: Option<&str>) -> Response<Body> {
    if module != "compaction" {
        return ok(json!([]));
    }
    let tasks: Vec<Value> = state
        .tasks
        .iter()
        .filter(|t| keyspace.is_none_or(|k| k == t.keyspace))
        .map(task_stats_json)
        .collect();
    ok(Value::Array(tasks))
}

fn abort_task(state: &mut State, id: &str) -> Response<Body> {
    let Some(task) = state.tasks.iter_mut().find(|t| t.id == id) else {
        return scylla_error(StatusCode::BAD_REQUEST, &format!("task with id {id} not found"));
    };
    if task.state == "running" {
        task.state = "failed";
        task.error = "abort requested".into();
        if task.stale {
            state.stale_compaction_running = false;
        } else {
            let keyspace = task.keyspace.clone();
            state.stopped.push(keyspace);
        }
    }
    ok(Value::Null)
}

/// The `summary` model of `compaction_manager.json`, for the cleanups running: the one an
/// earlier attempt left, and those of running tasks.
fn compactions(state: &State) -> Response<Body> {
    let stale = state
        .spec
        .stale_cleanup
        .iter()
        .filter(|_| state.stale_compaction_running)
        .map(|keyspace| (task_id(0), keyspace));
    let tasks =
        state.tasks.iter().filter(|t| !t.stale && t.state == "running").map(|t| (t.id.clone(), &t.keyspace));
    let running: Vec<Value> = stale
        .chain(tasks)
        .map(|(id, keyspace)| {
            json!({
                "id": id,
                "ks": keyspace,
                "cf": "t",
                "completed": 4096,
                "total": 65536,
                "task_type": CLEANUP_COMPACTION_TYPE,
                "unit": "bytes",
            })
        })
        .collect();
    ok(Value::Array(running))
}

fn stop_compaction(state: &mut State, compaction_type: &str) -> Response<Body> {
    const TYPES: &[&str] = &["COMPACTION", "CLEANUP", "SCRUB", "UPGRADE", "RESHAPE"];
    if !TYPES.contains(&compaction_type) {
        return scylla_error(StatusCode::BAD_REQUEST, &format!("Invalid compaction type: {compaction_type}"));
    }
    if compaction_type == "CLEANUP" {
        state.stale_compaction_running = false;
        for task in state.tasks.iter_mut().filter(|t| t.state == "running") {
            task.state = "failed";
            task.error = "compaction stopped by user request".into();
            if !task.stale {
                state.stopped.push(task.keyspace.clone());
            }
        }
    }
    ok(Value::Null)
}

fn ok(body: Value) -> Response<Body> {
    // Scylla answers `void` with an empty JSON body.
    let text = if body.is_null() { String::new() } else { body.to_string() };
    respond(StatusCode::OK, text)
}

/// An error Scylla answers with, before it becomes a response.
struct ScyllaError {
    status: StatusCode,
    message: String,
}

impl ScyllaError {
    fn new(status: StatusCode, message: &str) -> Self {
        Self { status, message: message.to_owned() }
    }

    fn response(self) -> Response<Body> {
        scylla_error(self.status, &self.message)
    }
}

/// Scylla's (seastar's) error body.
fn scylla_error(status: StatusCode, message: &str) -> Response<Body> {
    let body = json!({"message": message, "code": status.as_u16()});
    respond(status, body.to_string())
}

fn not_found() -> Response<Body> {
    scylla_error(StatusCode::NOT_FOUND, "Not found")
}

fn bytes_of(text: &str) -> axum::body::Bytes {
    axum::body::Bytes::copy_from_slice(text.as_bytes())
}

fn respond(status: StatusCode, body: String) -> Response<Body> {
    Response::builder()
        .status(status)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Body::from(body))
        .expect("a valid response")
}

fn parse_query(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
        match (bytes[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

pub mod cluster;

#[cfg(test)]
mod contract;
