//! The one scripted Kubernetes API of the HTTP-level tests: a client whose server answers a script
//! of exchanges in order, checks each request against what the script expects, and hands back
//! every request it saw. A request the script does not expect fails the test; so does a script
//! the client stops short of, unless the test says the rest may go unused.

use std::pin::pin;
use std::sync::Arc;

use groundskeeper_controller::runtime::context::{Context, ControllerConfig};
use groundskeeper_controller::runtime::metrics::Metrics;
use http::{Method, Request, Response, StatusCode};
use kube::client::Body;
use serde_json::{Value, json};
use tower_test::mock::{self, Handle};

type MockHandle = Handle<Request<Body>, Response<Body>>;

/// How an exchange recognises its request.
#[derive(Debug, Clone)]
enum Expect {
    /// Method and path (any query).
    Path { method: Method, path: String },
    /// Method, and the path with its query exactly.
    Uri { method: Method, uri: String },
    /// Method, and the path with its query starting with this.
    UriPrefix { method: Method, prefix: String },
    /// Any request.
    Any,
}

/// One request the test expects, and the answer it gets.
#[derive(Debug, Clone)]
pub struct Exchange {
    expect: Expect,
    body: Option<Value>,
    status: StatusCode,
    response: Value,
}

impl Exchange {
    /// A request of `method` on `path` (any query), answered with `status` and `response`.
    pub fn new(method: Method, path: &str, status: u16, response: Value) -> Self {
        Self::expecting(Expect::Path { method, path: path.to_owned() }, status, response)
    }

    /// A request of `method` on exactly `uri` (path and query).
    pub fn uri(method: Method, uri: &str, status: u16, response: Value) -> Self {
        Self::expecting(Expect::Uri { method, uri: uri.to_owned() }, status, response)
    }

    /// A request of `method` whose path and query start with `prefix`.
    pub fn prefix(method: Method, prefix: &str, status: u16, response: Value) -> Self {
        Self::expecting(Expect::UriPrefix { method, prefix: prefix.to_owned() }, status, response)
    }

    /// Whatever request comes next.
    pub fn any(status: u16, response: Value) -> Self {
        Self::expecting(Expect::Any, status, response)
    }

    /// The request's body must be exactly `body`.
    pub fn with_body(mut self, body: Value) -> Self {
        self.body = Some(body);
        self
    }

    fn expecting(expect: Expect, status: u16, response: Value) -> Self {
        Self { expect, body: None, status: StatusCode::from_u16(status).expect("an HTTP status"), response }
    }

    fn check(&self, request: &Request<Body>) {
        let (method, uri) = (request.method(), request.uri());
        match &self.expect {
            Expect::Path { method: want, path } => {
                assert_eq!(method, want, "method of {uri}");
                assert_eq!(uri.path(), path, "path of {method} {uri}");
            }
            Expect::Uri { method: want, uri: wanted } => {
                assert_eq!(method, want, "method of {uri}");
                assert_eq!(uri.to_string(), *wanted);
            }
            Expect::UriPrefix { method: want, prefix } => {
                assert_eq!(method, want, "method of {uri}");
                assert!(uri.to_string().starts_with(prefix.as_str()), "{uri} does not start with {prefix}");
            }
            Expect::Any => {}
        }
    }
}

/// A request as the server saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: Method,
    /// Path and query.
    pub uri: String,
    pub content_type: Option<String>,
    /// The JSON body; `Null` when empty.
    pub body: Value,
}

/// The server side of a scripted API: what it saw, once the test is done with the client.
pub struct Server {
    task: tokio::task::JoinHandle<(Vec<Seen>, MockHandle)>,
}

impl Server {
    /// Every request seen, once the script ended (or the client stopped, where allowed).
    pub async fn seen(self) -> Vec<Seen> {
        self.task.await.expect("the scripted API panicked").0
    }

    /// Every request seen, and none after the script: call after the last user of the client is
    /// dropped.
    pub async fn seen_and_nothing_more(self) -> Vec<Seen> {
        let (seen, mut handle) = self.task.await.expect("the scripted API panicked");
        if let Some((request, _)) = pin!(&mut handle).next_request().await {
            panic!("unexpected request {} {} after the script", request.method(), request.uri());
        }
        seen
    }
}

/// A client whose API server answers `script` in order; a client that stops before the script
/// ends fails the test.
pub fn scripted(script: Vec<Exchange>) -> (kube::Client, Server) {
    start(script, false)
}

/// As [`scripted`], but the client may stop before the script ends (the rest goes unused).
pub fn scripted_up_to(script: Vec<Exchange>) -> (kube::Client, Server) {
    start(script, true)
}

/// A controller context (default configuration) over a [`scripted`] API.
pub fn scripted_context(script: Vec<Exchange>) -> (Arc<Context>, Server) {
    let (client, server) = scripted(script);
    (Arc::new(Context::new(client, ControllerConfig::default(), Arc::new(Metrics::new()))), server)
}

fn start(script: Vec<Exchange>, may_end_early: bool) -> (kube::Client, Server) {
    let (service, handle) = mock::pair::<Request<Body>, Response<Body>>();
    let task = tokio::spawn(serve(handle, script, may_end_early));
    (kube::Client::new(service, "default"), Server { task })
}

async fn serve(
    mut handle: MockHandle,
    script: Vec<Exchange>,
    may_end_early: bool,
) -> (Vec<Seen>, MockHandle) {
    let mut seen = Vec::new();
    for expected in script {
        let Some((request, send)) = pin!(&mut handle).next_request().await else {
            assert!(may_end_early, "the client stopped before the script ended, at {expected:?}");
            break;
        };
        expected.check(&request);
        let content_type =
            request.headers().get(http::header::CONTENT_TYPE).map(|v| v.to_str().unwrap().to_owned());
        let (method, uri) = (request.method().clone(), request.uri().to_string());
        let bytes = request.into_body().collect_bytes().await.unwrap();
        let body = if bytes.is_empty() { Value::Null } else { serde_json::from_slice(&bytes).unwrap() };
        if let Some(want) = &expected.body {
            assert_eq!(&body, want, "body of {method} {uri}");
        }
        seen.push(Seen { method, uri, content_type, body });
        let response = Response::builder()
            .status(expected.status)
            .body(Body::from(serde_json::to_vec(&expected.response).unwrap()))
            .unwrap();
        send.send_response(response);
    }
    (seen, handle)
}

/// Every request seen by the API of `ctx`, once `ctx` is dropped, and none beyond the script.
pub async fn assert_no_more_requests(ctx: Arc<Context>, server: Server) -> Vec<Seen> {
    drop(ctx);
    server.seen_and_nothing_more().await
}

/// A Kubernetes `Status` failure answer.
pub fn status(code: u16, reason: &str, message: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code, "reason": reason, "message": message})
}

/// The `404 NotFound` answer.
pub fn not_found() -> Value {
    status(404, "NotFound", "not found")
}
