//! A fault-injecting HTTP proxy in front of the S3 server, so that a real server fails on cue:
//! every request is forwarded as it came (its `Host` header included, so SigV4 signatures still
//! match at the server), except those a [`Fault`] picks, which the proxy answers itself with an
//! S3 error and never forwards.
//!
//! The proxy runs on a thread and runtime of its own, so a test may block on a child process
//! (the runner) while the proxy serves it.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use http::StatusCode;
use http::request::Parts;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;

/// Which requests fail, and how.
pub struct Fault {
    /// Picks the requests that fail.
    pub matches: Box<dyn Fn(&Parts) -> bool + Send + Sync>,
    pub status: StatusCode,
}

impl Fault {
    /// A `500 InternalError` for every request `matches` picks.
    pub fn server_error(matches: impl Fn(&Parts) -> bool + Send + Sync + 'static) -> Self {
        Self { matches: Box::new(matches), status: StatusCode::INTERNAL_SERVER_ERROR }
    }
}

/// An S3 copy (`CopyObject`, `UploadPartCopy`): the request that records a snapshot's metadata.
pub fn is_copy(parts: &Parts) -> bool {
    parts.headers.contains_key("x-amz-copy-source")
}

struct Shared {
    upstream: SocketAddr,
    fault: Mutex<Option<Fault>>,
    failed: AtomicUsize,
}

/// A running proxy; dropped, it stops.
pub struct FaultProxy {
    /// `http://127.0.0.1:PORT`, to give as the store's endpoint.
    pub endpoint: String,
    shared: Arc<Shared>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl FaultProxy {
    /// Starts a proxy to `upstream` (`http://127.0.0.1:PORT`) that forwards everything.
    pub fn start(upstream: &str) -> std::io::Result<Self> {
        let upstream: SocketAddr = upstream
            .trim_start_matches("http://")
            .parse()
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("{upstream}: {e}")))?;
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let endpoint = format!("http://{}", listener.local_addr()?);
        let shared = Arc::new(Shared { upstream, fault: Mutex::new(None), failed: AtomicUsize::new(0) });
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let serving = shared.clone();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            runtime.block_on(serve(listener, serving, stopped));
        });
        Ok(Self { endpoint, shared, stop: Some(stop), thread: Some(thread) })
    }

    /// From now on, requests `fault` picks fail.
    pub fn fail(&self, fault: Fault) {
        *self.shared.fault.lock().unwrap() = Some(fault);
    }

    /// From now on, everything is forwarded again.
    pub fn heal(&self) {
        *self.shared.fault.lock().unwrap() = None;
    }

    /// How many requests the proxy failed so far.
    pub fn failed(&self) -> usize {
        self.shared.failed.load(Ordering::SeqCst)
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn serve(
    listener: std::net::TcpListener,
    shared: Arc<Shared>,
    mut stopped: tokio::sync::oneshot::Receiver<()>,
) {
    let listener = tokio::net::TcpListener::from_std(listener).expect("a tokio listener");
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(_) => continue,
            },
            _ = &mut stopped => return,
        };
        let shared = shared.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request| handle(shared.clone(), request));
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

type Answer = http::Response<http_body_util::Either<Incoming, String>>;

async fn handle(shared: Arc<Shared>, request: http::Request<Incoming>) -> Result<Answer, std::io::Error> {
    let (parts, body) = request.into_parts();
    let status = shared.fault.lock().unwrap().as_ref().filter(|f| (f.matches)(&parts)).map(|f| f.status);
    if let Some(status) = status {
        shared.failed.fetch_add(1, Ordering::SeqCst);
        let text = format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>InternalError</Code>\
             <Message>injected by the test's proxy</Message><Resource>{}</Resource></Error>",
            parts.uri.path()
        );
        let mut answer = http::Response::new(http_body_util::Either::Right(text));
        *answer.status_mut() = status;
        return Ok(answer);
    }
    let stream = tokio::net::TcpStream::connect(shared.upstream).await?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(std::io::Error::other)?;
    tokio::spawn(connection);
    let answer =
        sender.send_request(http::Request::from_parts(parts, body)).await.map_err(std::io::Error::other)?;
    Ok(answer.map(http_body_util::Either::Left))
}
