//! A client for the Scylla Manager Agent, which proxies Scylla's REST API over HTTPS with a bearer
//! token (see Scylla's REST API description for the API, `docs/protocol.md` for the agent).
//!
//! Used by `groundskeeper-job cleanup` and by the controller's ring observer. Every call names
//! its method and path in errors; the token is never part of any message.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use reqwest::{Method, StatusCode, Url};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use serde::Deserialize;
use serde::de::DeserializeOwned;

use super::token::AuthToken;

/// The agent's HTTPS port as scylla-operator configures it.
pub const DEFAULT_AGENT_PORT: u16 = 10001;
/// How long an ordinary call may take unless told otherwise.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Scylla's refusal to clean while the token ring moves (the sync and the async cleanup call).
pub const TOPOLOGY_CHANGING_MESSAGE: &str = "Can not perform cleanup operation when topology changes";
/// Longest keyspace name accepted: Scylla keeps a directory per keyspace, and a file name
/// component is at most 255 bytes (CQL itself allows 48 characters).
pub const MAX_KEYSPACE_NAME_LEN: usize = 255;

/// How large an answer of each kind may be. Each bound fits the largest answer a real cluster
/// gives with a wide margin; anything larger is a broken node or something hostile in between,
/// and reading on would only cost memory (an endless body otherwise grows until the pod dies).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnswerSize {
    /// One object: a task's status or id, per-node ownership, an error body. 1 MiB.
    Small,
    /// `storage_service/keyspaces`: 4 MiB, over 80,000 keyspace names of 48 characters; a
    /// cluster with thousands of keyspaces is already far past what Scylla advises.
    Keyspaces,
    /// Token lists, task lists, running compactions: 32 MiB, the whole ring of 1,000 nodes of
    /// 256 tokens is under 6 MiB.
    List,
    /// `describe_ring`: one row per token, with its replicas (about 450 bytes at RF 3): 256 MiB
    /// fits 1,000 nodes of 256 tokens at RF 5.
    Ring,
}

impl AnswerSize {
    pub const fn limit_bytes(self) -> usize {
        const MIB: usize = 1024 * 1024;
        match self {
            AnswerSize::Small => MIB,
            AnswerSize::Keyspaces => 4 * MIB,
            AnswerSize::List => 32 * MIB,
            AnswerSize::Ring => 256 * MIB,
        }
    }
}

/// Error bodies are read this far at most: only an excerpt is ever shown.
const ERROR_BODY_LIMIT: usize = 64 * 1024;

#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// Node address (IP or DNS name); also the name the certificate is checked against.
    pub host: String,
    pub port: u16,
    pub token: AuthToken,
    /// PEM CA bundle. None: accept the agent's (by default self-signed) certificate as it is,
    /// still checking that the server holds its key.
    pub ca_pem: Option<Vec<u8>>,
    /// Limit for ordinary calls; the blocking cleanup call has none (it can run for hours).
    pub request_timeout: Duration,
}

impl AgentConfig {
    pub fn new(host: impl Into<String>, token: AuthToken) -> Self {
        Self {
            host: host.into(),
            port: DEFAULT_AGENT_PORT,
            token,
            ca_pem: None,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
        }
    }
}

/// Why a call to the agent failed. `request` is `"<METHOD> <path>"`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AgentError {
    #[error("{request}: the agent rejected the auth token (HTTP {status})")]
    Unauthorized { request: String, status: u16 },
    #[error("{request}: not offered by this node (HTTP 404)")]
    NotFound { request: String },
    #[error("{request}: {message}")]
    TopologyChanging { request: String, message: String },
    #[error("{request}: HTTP {status}: {message}")]
    Server { request: String, status: u16, message: String },
    #[error("{request}: no answer in time")]
    Timeout { request: String },
    #[error("{request}: the agent's TLS certificate was not accepted: {message}")]
    Certificate { request: String, message: String },
    #[error("{request}: {message}")]
    Transport { request: String, message: String },
    #[error("{request}: unexpected response: {message}")]
    Decode { request: String, message: String },
    #[error(
        "{request}: the answer is larger than {limit} bytes ({mib} MiB), more than any Scylla node \
         sends for it; the node or a proxy in between is broken, nothing more was read",
        mib = limit / (1024 * 1024)
    )]
    TooLarge { request: String, limit: usize },
    #[error("{what} {name:?}: {why}")]
    InvalidName { what: &'static str, name: String, why: &'static str },
    #[error("agent client: {0}")]
    Config(String),
}

impl AgentError {
    /// Whether the same call may succeed later: server errors, timeouts, lost connections, a
    /// moving ring, and an answer that is not the JSON the API describes (a broken agent or a
    /// proxy in the way is not the user's input, and may be gone on the next try). Credentials,
    /// certificates, missing routes and bad requests will not change.
    pub fn is_retryable(&self) -> bool {
        match self {
            AgentError::TopologyChanging { .. }
            | AgentError::Timeout { .. }
            | AgentError::Transport { .. }
            | AgentError::Decode { .. } => true,
            AgentError::Server { status, .. } => *status >= 500 || *status == 408 || *status == 429,
            AgentError::Unauthorized { .. }
            | AgentError::NotFound { .. }
            | AgentError::Certificate { .. }
            | AgentError::TooLarge { .. }
            | AgentError::InvalidName { .. }
            | AgentError::Config(_) => false,
        }
    }
}

/// `type` of `GET /storage_service/keyspaces`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyspaceType {
    All,
    User,
    NonLocalStrategy,
}

/// `replication` of `GET /storage_service/keyspaces`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replication {
    All,
    Vnodes,
    Tablets,
}

impl KeyspaceType {
    fn as_param(self) -> &'static str {
        match self {
            KeyspaceType::All => "all",
            KeyspaceType::User => "user",
            KeyspaceType::NonLocalStrategy => "non_local_strategy",
        }
    }
}

impl Replication {
    fn as_param(self) -> &'static str {
        match self {
            Replication::All => "all",
            Replication::Vnodes => "vnodes",
            Replication::Tablets => "tablets",
        }
    }
}

/// `state` of a task-manager task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TaskState {
    Created,
    Running,
    Done,
    Failed,
    Suspended,
    #[default]
    #[serde(other)]
    Unknown,
}

impl TaskState {
    pub fn is_finished(self) -> bool {
        matches!(self, TaskState::Done | TaskState::Failed)
    }
}

impl fmt::Display for TaskState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TaskState::Created => "created",
            TaskState::Running => "running",
            TaskState::Done => "done",
            TaskState::Failed => "failed",
            TaskState::Suspended => "suspended",
            TaskState::Unknown => "unknown",
        })
    }
}

/// `task_status` model of `task_manager.json` (the fields groundskeeper reads).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct TaskStatus {
    pub id: String,
    #[serde(rename = "type")]
    pub task_type: String,
    pub state: TaskState,
    pub is_abortable: bool,
    pub error: String,
    pub keyspace: String,
    pub table: String,
    pub progress_units: String,
    pub progress_total: f64,
    pub progress_completed: f64,
}

/// `task_stats` model of `task_manager.json`: one entry of `list_module_tasks`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct TaskStats {
    pub task_id: String,
    #[serde(rename = "type")]
    pub task_type: String,
    pub state: TaskState,
    pub keyspace: String,
    pub table: String,
}

/// `summary` model of `compaction_manager.json`: one running compaction.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct CompactionSummary {
    pub id: String,
    pub ks: String,
    pub cf: String,
    pub task_type: String,
    pub completed: i64,
    pub total: i64,
    pub unit: String,
}

/// `endpoint_detail` model of `storage_service.json`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct EndpointDetail {
    pub host: String,
    pub datacenter: String,
    pub rack: String,
}

/// `token_range` model of `storage_service.json`: the range `(start_token, end_token]` (decimal
/// tokens; `start > end` for the range wrapping past the largest token, `start == end` for the
/// whole ring) and its replicas, primary first.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct TokenRange {
    pub start_token: String,
    pub end_token: String,
    pub endpoints: Vec<String>,
    pub endpoint_details: Vec<EndpointDetail>,
}

/// `mapper` model of `storage_service.json`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct Mapper {
    pub key: String,
    pub value: String,
}

/// Scylla's error body: `{"message": "...", "code": 500}` (the agent's own 401 has the same shape).
#[derive(Deserialize)]
struct ErrorBody {
    message: String,
}

#[derive(Clone)]
pub struct AgentClient {
    http: reqwest::Client,
    base: Url,
    token: AuthToken,
    request_timeout: Duration,
}

impl fmt::Debug for AgentClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AgentClient").field("base", &self.base.as_str()).finish_non_exhaustive()
    }
}

impl AgentClient {
    pub fn new(config: AgentConfig) -> Result<Self, AgentError> {
        let tls = tls_config(config.ca_pem.as_deref())?;
        let http = reqwest::Client::builder()
            .tls_backend_preconfigured(tls)
            .connect_timeout(config.request_timeout)
            // The agent is reached directly, pod to pod; a proxy from the environment would
            // only see the token.
            .no_proxy()
            .build()
            .map_err(|err| AgentError::Config(format!("cannot build the HTTPS client: {err}")))?;
        check_node_address(&config.host).map_err(AgentError::Config)?;
        if config.port == 0 {
            return Err(AgentError::Config("--agent-port 0: must be a port from 1 to 65535".into()));
        }
        let host = match config.host.parse::<std::net::Ipv6Addr>() {
            Ok(_) => format!("[{}]", config.host),
            Err(_) => config.host.clone(),
        };
        let base = Url::parse(&format!("https://{host}:{}/", config.port))
            .map_err(|err| AgentError::Config(format!("node address {:?}: {err}", config.host)))?;
        Ok(Self { http, base, token: config.token, request_timeout: config.request_timeout })
    }

    /// The agent's base URL, e.g. `https://10.0.0.1:10001/`.
    pub fn base_url(&self) -> &str {
        self.base.as_str()
    }

    /// `GET /storage_service/load`: the bytes of data the node holds on disk (a double).
    pub async fn load(&self) -> Result<f64, AgentError> {
        self.get(&["storage_service", "load"], &[], AnswerSize::Small).await
    }

    /// `GET /storage_service/tokens`: the whole ring, in Scylla's order.
    pub async fn tokens(&self) -> Result<Vec<String>, AgentError> {
        self.get(&["storage_service", "tokens"], &[], AnswerSize::List).await
    }

    /// `GET /storage_service/tokens/{endpoint}`: one node's tokens (empty while it bootstraps).
    pub async fn node_tokens(&self, endpoint: &str) -> Result<Vec<String>, AgentError> {
        self.get(&["storage_service", "tokens", endpoint], &[], AnswerSize::List).await
    }

    /// `GET /storage_service/keyspaces?type=..&replication=..`.
    pub async fn keyspaces(
        &self,
        keyspace_type: KeyspaceType,
        replication: Replication,
    ) -> Result<Vec<String>, AgentError> {
        let query = [("type", keyspace_type.as_param()), ("replication", replication.as_param())];
        let names: Vec<String> =
            self.get(&["storage_service", "keyspaces"], &query, AnswerSize::Keyspaces).await?;
        // A name no keyspace can have would reach a request path later: refuse the answer.
        for name in &names {
            if let Err(AgentError::InvalidName { name, why, .. }) = check_keyspace_name(name) {
                return Err(AgentError::InvalidName { what: "keyspace listed by the node", name, why });
            }
        }
        Ok(names)
    }

    /// `GET /storage_service/describe_ring/{keyspace}`: every range of the ring with its replicas
    /// for a vnode keyspace, in no particular order. One row per token of the cluster (25,600
    /// for 100 nodes of 256 vnodes): fetch it once per replication, not per keyspace. A tablet
    /// keyspace has no per-keyspace ring (Scylla answers HTTP 500).
    pub async fn describe_ring(&self, keyspace: &str) -> Result<Vec<TokenRange>, AgentError> {
        check_keyspace_name(keyspace)?;
        self.get(&["storage_service", "describe_ring", keyspace], &[], AnswerSize::Ring).await
    }

    /// `GET /storage_service/schema_version`: the node's schema version. It moves with every
    /// schema change (a keyspace's replication among them), so an unchanged version means the
    /// replication settings read before still hold.
    pub async fn schema_version(&self) -> Result<String, AgentError> {
        self.get(&["storage_service", "schema_version"], &[], AnswerSize::Small).await
    }

    /// `GET /storage_service/ownership/{keyspace}`: per node address, the share of the ring it
    /// replicates for `keyspace` (as Scylla formats a `float`). Small (one row per node), and the
    /// same for keyspaces replicated alike.
    pub async fn effective_ownership(&self, keyspace: &str) -> Result<Vec<Mapper>, AgentError> {
        check_keyspace_name(keyspace)?;
        self.get(&["storage_service", "ownership", keyspace], &[], AnswerSize::Small).await
    }

    /// `POST /tasks/compaction/keyspace_cleanup/{keyspace}`: starts a cleanup, returns its task
    /// id. `NotFound` where the node has no task API (older Scylla).
    pub async fn start_keyspace_cleanup(&self, keyspace: &str) -> Result<String, AgentError> {
        check_keyspace_name(keyspace)?;
        let path = ["tasks", "compaction", "keyspace_cleanup", keyspace];
        self.call(Method::POST, &path, &[], Some(self.request_timeout), AnswerSize::Small).await
    }

    /// `POST /storage_service/keyspace_cleanup/{keyspace}`: cleans and returns when done. No client
    /// timeout: on a large node this takes hours, and giving up would not stop it anyway.
    pub async fn keyspace_cleanup_blocking(&self, keyspace: &str) -> Result<(), AgentError> {
        check_keyspace_name(keyspace)?;
        let path = ["storage_service", "keyspace_cleanup", keyspace];
        self.call_ignoring_body(Method::POST, &path, &[], None).await
    }

    /// `GET /task_manager/task_status/{task_id}`.
    pub async fn task_status(&self, task_id: &str) -> Result<TaskStatus, AgentError> {
        self.get(&["task_manager", "task_status", task_id], &[], AnswerSize::Small).await
    }

    /// `GET /task_manager/wait_task/{task_id}?timeout=<seconds>`: the status once the task is
    /// finished; HTTP 408 (a retryable `Server` error) when `timeout` passes first.
    pub async fn wait_task(
        &self,
        task_id: &str,
        timeout: Option<Duration>,
    ) -> Result<TaskStatus, AgentError> {
        let seconds = timeout.map(|t| t.as_secs().max(1).to_string());
        let query: Vec<(&str, &str)> = seconds.iter().map(|s| ("timeout", s.as_str())).collect();
        let client_timeout = timeout.map(|t| t + self.request_timeout);
        let path = ["task_manager", "wait_task", task_id];
        self.call(Method::GET, &path, &query, client_timeout, AnswerSize::Small).await
    }

    /// `GET /task_manager/list_module_tasks/{module}`.
    pub async fn module_tasks(&self, module: &str) -> Result<Vec<TaskStats>, AgentError> {
        self.get(&["task_manager", "list_module_tasks", module], &[], AnswerSize::List).await
    }

    /// `POST /task_manager/abort_task/{task_id}`. False when Scylla says the task cannot be
    /// aborted (HTTP 403 on this path means that, not bad credentials).
    pub async fn abort_task(&self, task_id: &str) -> Result<bool, AgentError> {
        let path = ["task_manager", "abort_task", task_id];
        match self.call_ignoring_body(Method::POST, &path, &[], Some(self.request_timeout)).await {
            Ok(()) => Ok(true),
            Err(AgentError::Unauthorized { status: 403, .. }) => Ok(false),
            Err(err) => Err(err),
        }
    }

    /// `GET /compaction_manager/compactions`: compactions running now (cleanups included).
    pub async fn compactions(&self) -> Result<Vec<CompactionSummary>, AgentError> {
        self.get(&["compaction_manager", "compactions"], &[], AnswerSize::List).await
    }

    /// `POST /compaction_manager/stop_compaction?type=<TYPE>` (`CLEANUP`, `COMPACTION`, ...).
    pub async fn stop_compaction(&self, compaction_type: &str) -> Result<(), AgentError> {
        let path = ["compaction_manager", "stop_compaction"];
        let query = [("type", compaction_type)];
        self.call_ignoring_body(Method::POST, &path, &query, Some(self.request_timeout)).await
    }

    /// `POST /storage_service/mark_node_as_clean`: resets Scylla's own "cleanup needed" flag.
    /// False where the node does not offer it (older Scylla).
    pub async fn mark_node_as_clean(&self) -> Result<bool, AgentError> {
        let path = ["storage_service", "mark_node_as_clean"];
        match self.call_ignoring_body(Method::POST, &path, &[], Some(self.request_timeout)).await {
            Ok(()) => Ok(true),
            Err(AgentError::NotFound { .. }) => Ok(false),
            Err(err) => Err(err),
        }
    }

    async fn get<T: DeserializeOwned>(
        &self,
        path: &[&str],
        query: &[(&str, &str)],
        size: AnswerSize,
    ) -> Result<T, AgentError> {
        self.call(Method::GET, path, query, Some(self.request_timeout), size).await
    }

    async fn call<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &[&str],
        query: &[(&str, &str)],
        timeout: Option<Duration>,
        size: AnswerSize,
    ) -> Result<T, AgentError> {
        let (request, body) = self.send(method, path, query, timeout, size).await?;
        serde_json::from_str(&body)
            .map_err(|err| AgentError::Decode { request, message: format!("{err} in {}", excerpt(&body)) })
    }

    async fn call_ignoring_body(
        &self,
        method: Method,
        path: &[&str],
        query: &[(&str, &str)],
        timeout: Option<Duration>,
    ) -> Result<(), AgentError> {
        self.send(method, path, query, timeout, AnswerSize::Small).await.map(|_| ())
    }

    /// Sends one request; returns `"<METHOD> <path>"` and the body of a 2xx answer, read up to
    /// `size`'s bound.
    async fn send(
        &self,
        method: Method,
        path: &[&str],
        query: &[(&str, &str)],
        timeout: Option<Duration>,
        size: AnswerSize,
    ) -> Result<(String, String), AgentError> {
        let url = self.url(path, query)?;
        let request = format!("{method} {}", url.path());
        let mut builder = self
            .http
            .request(method, url)
            .bearer_auth(self.token.expose())
            .header(reqwest::header::ACCEPT, "application/json");
        if let Some(timeout) = timeout {
            builder = builder.timeout(timeout);
        }
        let response = builder.send().await.map_err(|err| transport_error(&request, &err))?;
        let status = response.status();
        if !status.is_success() {
            let body = read_bounded(response, ERROR_BODY_LIMIT, &request, Overflow::Truncate).await?;
            // Whatever the node or a proxy echoes, the token goes no further than this.
            return Err(status_error(request, status, &self.token.redact(&body)));
        }
        let body = read_bounded(response, size.limit_bytes(), &request, Overflow::Refuse).await?;
        Ok((request, self.token.redact(&body)))
    }

    fn url(&self, path: &[&str], query: &[(&str, &str)]) -> Result<Url, AgentError> {
        for segment in path {
            check_path_segment(segment)?;
        }
        let mut url = self.base.clone();
        url.path_segments_mut().expect("an https URL has a path").clear().extend(path);
        if !query.is_empty() {
            url.query_pairs_mut().extend_pairs(query);
        }
        Ok(url)
    }
}

/// What to do with a body longer than its bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Overflow {
    /// An answer to use: a longer one is an error.
    Refuse,
    /// An error body, only ever shown as an excerpt: keep the start, drop the rest.
    Truncate,
}

/// Reads a body chunk by chunk, never holding more than `limit` bytes of it: a declared length
/// over the bound is refused before reading, an endless body as soon as it passes the bound.
async fn read_bounded(
    mut response: reqwest::Response,
    limit: usize,
    request: &str,
    overflow: Overflow,
) -> Result<String, AgentError> {
    let too_large = || AgentError::TooLarge { request: request.to_owned(), limit };
    if overflow == Overflow::Refuse && response.content_length().is_some_and(|length| length > limit as u64) {
        return Err(too_large());
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|err| transport_error(request, &err))? {
        if body.len() + chunk.len() > limit {
            if overflow == Overflow::Refuse {
                return Err(too_large());
            }
            body.extend_from_slice(&chunk[..limit - body.len()]);
            break;
        }
        body.extend_from_slice(&chunk);
    }
    Ok(String::from_utf8_lossy(&body).into_owned())
}

/// A keyspace name Scylla could have: letters, digits and underscores (CQL's `\w+`, quoted
/// or not), at most [`MAX_KEYSPACE_NAME_LEN`]. Anything else placed in a request path could
/// name another path (`..`) or another keyspace (a newline the URL parser drops).
pub fn check_keyspace_name(name: &str) -> Result<(), AgentError> {
    let invalid = |why| Err(AgentError::InvalidName { what: "keyspace", name: name.to_owned(), why });
    if name.is_empty() || name.len() > MAX_KEYSPACE_NAME_LEN {
        return invalid("a keyspace name has 1 to 255 characters");
    }
    if !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return invalid("a keyspace name has only letters, digits and underscores");
    }
    Ok(())
}

/// A value placed in a request path (a task id, a node address, a keyspace): only characters
/// those values have, and never `.` or `..`, which URL parsing resolves to another path even
/// when percent-encoded.
fn check_path_segment(segment: &str) -> Result<(), AgentError> {
    let invalid = |why| Err(AgentError::InvalidName { what: "path segment", name: segment.to_owned(), why });
    if segment.is_empty() || segment == "." || segment == ".." {
        return invalid("an empty, `.` or `..` segment names another path");
    }
    if segment.len() > MAX_KEYSPACE_NAME_LEN
        || !segment.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':'))
    {
        return invalid("only letters, digits and `_-.:` are sent in a request path, up to 255 of them");
    }
    Ok(())
}

fn status_error(request: String, status: StatusCode, body: &str) -> AgentError {
    let message =
        serde_json::from_str::<ErrorBody>(body).map(|e| e.message).unwrap_or_else(|_| excerpt(body));
    match status.as_u16() {
        401 | 403 => AgentError::Unauthorized { request, status: status.as_u16() },
        404 => AgentError::NotFound { request },
        _ if message.contains(TOPOLOGY_CHANGING_MESSAGE) => AgentError::TopologyChanging { request, message },
        code => AgentError::Server { request, status: code, message },
    }
}

fn transport_error(request: &str, err: &reqwest::Error) -> AgentError {
    let request = request.to_owned();
    if err.is_timeout() {
        return AgentError::Timeout { request };
    }
    if let Some(message) = certificate_problem(err) {
        return AgentError::Certificate { request, message };
    }
    AgentError::Transport { request, message: error_chain(err) }
}

/// The rustls certificate error behind a failed connection, if that is what failed. rustls'
/// error sits inside an `io::Error`, whose `source()` skips it, so each link is unwrapped.
fn certificate_problem(err: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut current = Some(err);
    while let Some(err) = current {
        let tls = err.downcast_ref::<rustls::Error>().or_else(|| {
            err.downcast_ref::<std::io::Error>()
                .and_then(|io| io.get_ref())
                .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        });
        if let Some(tls @ (rustls::Error::InvalidCertificate(_) | rustls::Error::NoCertificatesPresented)) =
            tls
        {
            return Some(tls.to_string());
        }
        // Some connector layers box the I/O error where it cannot be downcast; rustls' own
        // wording still identifies a rejected certificate.
        let text = err.to_string();
        if let Some(at) = text.find("invalid peer certificate") {
            return Some(text[at..].to_owned());
        }
        current = err.source();
    }
    None
}

fn error_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut message = err.to_string();
    let mut current = err.source();
    while let Some(err) = current {
        let text = err.to_string();
        if !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
        current = err.source();
    }
    message
}

fn excerpt(body: &str) -> String {
    const LIMIT: usize = 300;
    let body = body.trim();
    if body.is_empty() {
        return "(empty body)".to_owned();
    }
    match body.char_indices().nth(LIMIT) {
        Some((cut, _)) => format!("{}…", &body[..cut]),
        None => body.to_owned(),
    }
}

/// TLS for the agent, with the ring provider only. With a CA bundle the certificate is verified
/// against it for the node address; without one any certificate is taken (the agent's default
/// one is self-signed) but the handshake signature is still checked.
fn tls_config(ca_pem: Option<&[u8]>) -> Result<rustls::ClientConfig, AgentError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|err| AgentError::Config(format!("TLS versions: {err}")))?;
    let mut config = match ca_pem {
        Some(pem) => builder.with_root_certificates(root_store(pem)?).with_no_client_auth(),
        None => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyServerCertificate {
                algorithms: provider.signature_verification_algorithms,
            }))
            .with_no_client_auth(),
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

fn root_store(pem: &[u8]) -> Result<rustls::RootCertStore, AgentError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|err| AgentError::Config(format!("CA file is not valid PEM: {err}")))?;
    if certs.is_empty() {
        return Err(AgentError::Config("CA file holds no PEM certificate".to_owned()));
    }
    let mut roots = rustls::RootCertStore::empty();
    for cert in certs {
        roots.add(cert).map_err(|err| AgentError::Config(format!("CA file certificate: {err}")))?;
    }
    Ok(roots)
}

/// Accepts whatever certificate the agent shows (there is no CA to check it against) while still
/// verifying that the server signed the handshake with that certificate's key.
#[derive(Debug)]
struct AnyServerCertificate {
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for AnyServerCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// The node's address must be a host name or an IP address and nothing else: with URL syntax
/// (`host:port/`, `user@host`, a path or a query) it could send the bearer token to another port
/// or host than the node's agent.
pub fn check_node_address(address: &str) -> Result<(), String> {
    let refuse = |why: &str| {
        Err(format!(
            "--node-address {address:?}: {why}; give the node's host name or IP address only \
             (the port is --agent-port)"
        ))
    };
    if address.parse::<std::net::IpAddr>().is_ok() {
        return Ok(());
    }
    let name = address.strip_suffix('.').unwrap_or(address);
    if name.is_empty() || name.len() > 253 {
        return refuse("not a host name (1 to 253 characters)");
    }
    for label in name.split('.') {
        let valid = !label.is_empty()
            && label.len() <= 63
            && !label.starts_with('-')
            && !label.ends_with('-')
            && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
        if !valid {
            return refuse("not a host name (letters, digits and hyphens between dots) nor an IP address");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {

    #[test]
    fn the_node_address_is_a_host_or_an_ip_and_nothing_else() {
        let accepted = [
            "10.0.0.5",
            "fd00::1",
            "sc-dc-r1-0.scylla.svc",
            "sc-dc-r1-0.scylla.svc.cluster.local.",
            "localhost",
        ];
        for address in accepted {
            assert_eq!(check_node_address(address), Ok(()), "{address}");
        }
        let refused = [
            "evil.example:443/",
            "node:10001",
            "user@node",
            "https://node",
            "node/path",
            "node?x=1",
            "node#x",
            "",
            " node",
            "-node",
            "no..de",
            "[fd00::1]",
        ];
        for address in refused {
            let why = check_node_address(address).expect_err(address);
            assert!(why.contains("--node-address"), "{address}: {why}");
        }
    }
    use super::*;

    fn error(status: u16, body: &str) -> AgentError {
        status_error("POST /x".into(), StatusCode::from_u16(status).unwrap(), body)
    }

    #[test]
    fn errors_are_classified_from_status_and_scylla_body() {
        let topology = format!(r#"{{"message": "{TOPOLOGY_CHANGING_MESSAGE}", "code": 500}}"#);
        for (status, body, retryable, kind) in [
            (401, r#"{"message":"unauthorized","code":401}"#, false, "Unauthorized"),
            (403, "", false, "Unauthorized"),
            (404, r#"{"message": "Not found", "code": 404}"#, false, "NotFound"),
            (400, r#"{"message": "Keyspace x Does not exist", "code": 400}"#, false, "Server"),
            (500, topology.as_str(), true, "TopologyChanging"),
            (500, r#"{"message": "boom", "code": 500}"#, true, "Server"),
            (503, "<html>bad gateway</html>", true, "Server"),
            (408, "", true, "Server"),
        ] {
            let err = error(status, body);
            assert_eq!(err.is_retryable(), retryable, "{status} {body}: {err:?}");
            assert!(format!("{err:?}").starts_with(kind), "{status} {body}: {err:?}");
        }
    }

    #[test]
    fn server_errors_carry_scylla_message() {
        let err = error(400, r#"{"message": "Keyspace x Does not exist", "code": 400}"#);
        assert_eq!(err.to_string(), "POST /x: HTTP 400: Keyspace x Does not exist");
    }

    #[test]
    fn urls_encode_path_segments_and_bracket_ipv6() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let token = AuthToken::new("t").unwrap();
        let client = AgentClient::new(AgentConfig::new("fd00::1", token)).unwrap();
        assert_eq!(client.base_url(), "https://[fd00::1]:10001/");
        let url = client.url(&["storage_service", "tokens", "fd00::2"], &[("type", "all")]).unwrap();
        assert_eq!(url.as_str(), "https://[fd00::1]:10001/storage_service/tokens/fd00::2?type=all");
        for segment in ["a/b", "..", ".", "", "ks\n", "ks%2e", "ks?x", "ks#x", "ks\\x", "k s"] {
            let err = client.url(&["storage_service", "tokens", segment], &[]).unwrap_err();
            assert!(matches!(err, AgentError::InvalidName { .. }), "{segment:?}: {err:?}");
            assert!(!err.is_retryable(), "{segment:?}");
        }
    }

    #[test]
    fn keyspace_names_are_those_scylla_can_have() {
        for name in ["ks", "My_Keyspace_2", "system_auth", &"k".repeat(MAX_KEYSPACE_NAME_LEN)] {
            assert!(check_keyspace_name(name).is_ok(), "{name}");
        }
        for name in [
            "",
            "..",
            ".",
            "ks\n",
            "ks/x",
            "ks-x",
            "ks x",
            "ks.t",
            "ké",
            &"k".repeat(MAX_KEYSPACE_NAME_LEN + 1),
        ] {
            let err = check_keyspace_name(name).unwrap_err();
            assert!(err.to_string().starts_with(&format!("keyspace {name:?}: ")), "{err}");
        }
    }

    #[test]
    fn a_ca_file_without_certificates_is_refused() {
        let err = root_store(b"not a certificate").unwrap_err();
        assert!(err.to_string().contains("no PEM certificate"), "{err}");
    }
}
