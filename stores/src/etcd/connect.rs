//! Reaching an etcd cluster: endpoints, client TLS, one client per member.
//!
//! `Status` and `Defragment` act on the member a request reaches, so every member gets its own
//! client bound to its own URL; a client over all endpoints would spread calls among members.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use etcd_client::{Certificate, Client, ConnectOptions, Identity, TlsOptions};
use futures::future::join_all;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use super::plan::{MemberObservation, MemberStatus};
use crate::Failure;

/// How long a cheap call (`Status`, `MemberList`, a read) may take before the member counts as
/// unreachable.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The connection flags every etcd subcommand takes.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct EndpointArgs {
    /// Client URLs of one or more members (comma-separated); the others are found through the
    /// member list.
    #[arg(long, value_delimiter = ',', required = true)]
    pub endpoints: Vec<String>,
    /// CA bundle (PEM) that signed the members' serving certificates.
    #[arg(long)]
    pub cacert: Option<PathBuf>,
    /// Client certificate (PEM), for clusters with `--client-cert-auth`.
    #[arg(long, requires = "key")]
    pub cert: Option<PathBuf>,
    /// Private key (PEM) of `--cert`.
    #[arg(long, requires = "cert")]
    pub key: Option<PathBuf>,
}

/// Where and how to connect, checked.
#[derive(Clone)]
pub struct Connection {
    pub endpoints: Vec<String>,
    tls: Option<TlsOptions>,
    /// The same TLS material as PEM (the CA, the client identity), for plain HTTPS requests to
    /// a member (`/metrics`).
    pem: Option<(Vec<u8>, Option<ClientIdentity>)>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("endpoints", &self.endpoints)
            .field("tls", &self.tls.is_some())
            .finish()
    }
}

impl EndpointArgs {
    /// Checks the flags and reads the TLS files. Everything wrong here is bad input.
    pub fn connection(&self) -> Result<Connection, Failure> {
        if self.cacert.is_none() && self.cert.is_some() {
            return Err(Failure::bad_input("--cert needs --cacert and https:// endpoints"));
        }
        let ca = self.cacert.as_deref().map(|p| read_pem("--cacert", p)).transpose()?;
        let identity = match (&self.cert, &self.key) {
            (Some(cert), Some(key)) => {
                Some(ClientIdentity { cert: read_pem("--cert", cert)?, key: read_pem("--key", key)? })
            }
            _ => None,
        };
        let source = |flag: &str| match flag {
            "ca" => format!("--cacert {}", display(&self.cacert)),
            "cert" => format!("--cert {}", display(&self.cert)),
            _ => format!("--key {}", display(&self.key)),
        };
        Connection::new(&self.endpoints, ca, identity, &source)
    }
}

/// What is wrong with an endpoint URL that no retry can fix, if anything: it must name a host
/// and a port other than 0, and nothing else (no user, path or query).
fn endpoint_problem(endpoint: &str) -> Option<String> {
    let url = match reqwest::Url::parse(endpoint) {
        Ok(url) => url,
        Err(err) => return Some(format!("{endpoint:?} is not a URL: {err}")),
    };
    if url.host_str().is_none_or(str::is_empty) {
        return Some(format!("{endpoint:?} names no host"));
    }
    if url.port() == Some(0) {
        return Some(format!("{endpoint:?}: port 0 is not a port etcd listens on"));
    }
    if !url.username().is_empty() || url.password().is_some() || url.path() != "/" || url.query().is_some() {
        return Some(format!("{endpoint:?}: give scheme://host:port only"));
    }
    None
}

fn display(path: &Option<PathBuf>) -> String {
    path.as_deref().map(|p| p.display().to_string()).unwrap_or_default()
}

fn read_pem(flag: &str, path: &Path) -> Result<Vec<u8>, Failure> {
    std::fs::read(path).map_err(|err| Failure::bad_input(format!("{flag} {}: {err}", path.display())))
}

/// A client certificate and its private key, PEM.
#[derive(Clone)]
pub struct ClientIdentity {
    pub cert: Vec<u8>,
    pub key: Vec<u8>,
}

impl Connection {
    /// Checks endpoints and TLS material given as PEM bytes (from files, or from a Secret).
    /// `source` names where each piece came from (`"ca"`, `"cert"`, `"key"`) for error messages;
    /// the key's content is never put into one.
    pub fn new(
        endpoints: &[String],
        ca: Option<Vec<u8>>,
        identity: Option<ClientIdentity>,
        source: &dyn Fn(&str) -> String,
    ) -> Result<Self, Failure> {
        let endpoints: Vec<String> = endpoints
            .iter()
            .map(|e| e.trim().trim_end_matches('/').to_owned())
            .filter(|e| !e.is_empty())
            .collect();
        if endpoints.is_empty() {
            return Err(Failure::bad_input("--endpoints: no endpoint given"));
        }
        if let Some(endpoint) =
            endpoints.iter().find(|e| !(e.starts_with("http://") || e.starts_with("https://")))
        {
            return Err(Failure::bad_input(format!(
                "--endpoints: {endpoint:?} must start with http:// or https://"
            )));
        }
        if let Some(problem) = endpoints.iter().find_map(|e| endpoint_problem(e)) {
            return Err(Failure::bad_input(format!("--endpoints: {problem}")));
        }
        if endpoints.iter().any(|e| e.starts_with("https://")) && ca.is_none() {
            return Err(Failure::bad_input(
                "--cacert is required with https:// endpoints (the CA that signed the members' certificates)",
            ));
        }
        let pem = ca.clone().map(|ca| (ca, identity.clone()));
        let tls = match ca {
            Some(ca) => Some(tls_options(ca, identity, source)?),
            None => None,
        };
        Ok(Connection { endpoints, tls, pem })
    }
}

fn tls_options(
    ca: Vec<u8>,
    identity: Option<ClientIdentity>,
    source: &dyn Fn(&str) -> String,
) -> Result<TlsOptions, Failure> {
    if CertificateDer::pem_slice_iter(&ca).next().is_none() {
        return Err(Failure::bad_input(format!("{}: no PEM certificate in it", source("ca"))));
    }
    let mut tls = TlsOptions::new().ca_certificate(Certificate::from_pem(ca));
    if let Some(ClientIdentity { cert, key }) = identity {
        if CertificateDer::pem_slice_iter(&cert).next().is_none() {
            return Err(Failure::bad_input(format!("{}: no PEM certificate in it", source("cert"))));
        }
        if PrivateKeyDer::from_pem_slice(&key).is_err() {
            return Err(Failure::bad_input(format!("{}: no PEM private key in it", source("key"))));
        }
        tls = tls.identity(Identity::from_pem(cert, key));
    }
    Ok(tls)
}

impl Connection {
    /// Whether the members are reached over TLS.
    pub fn has_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// A member's Prometheus metrics (`GET <client URL>/metrics`), over the same TLS as its gRPC.
    pub async fn metrics(&self, url: &str, timeout: Duration) -> Result<String, String> {
        let mut builder = reqwest::Client::builder().timeout(timeout).connect_timeout(CONNECT_TIMEOUT);
        if let Some((ca, identity)) = &self.pem {
            for cert in reqwest::Certificate::from_pem_bundle(ca).map_err(|e| e.to_string())? {
                builder = builder.add_root_certificate(cert);
            }
            if let Some(ClientIdentity { cert, key }) = identity {
                let pem = [cert.as_slice(), b"\n", key.as_slice()].concat();
                builder = builder.identity(reqwest::Identity::from_pem(&pem).map_err(|e| e.to_string())?);
            }
        }
        let client = builder.build().map_err(|e| e.to_string())?;
        let response = client.get(format!("{url}/metrics")).send().await.map_err(|e| e.to_string())?;
        let response = response.error_for_status().map_err(|e| e.to_string())?;
        response.text().await.map_err(|e| e.to_string())
    }

    /// A client bound to one URL. `timeout` bounds every request of this client.
    pub async fn client(&self, url: &str, timeout: Option<Duration>) -> Result<Client, etcd_client::Error> {
        let mut options = ConnectOptions::new().with_connect_timeout(CONNECT_TIMEOUT);
        if let Some(timeout) = timeout {
            options = options.with_timeout(timeout);
        }
        if let (Some(tls), true) = (&self.tls, url.starts_with("https://")) {
            options = options.with_tls(tls.clone());
        }
        Client::connect([url], Some(options)).await
    }
}

/// A member as the member list gives it, with the URL we reach it at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub id: u64,
    pub name: String,
    pub is_learner: bool,
    /// A URL from `--endpoints` that answered as this member, else its first advertised client URL.
    pub url: Option<String>,
}

/// The cluster's members and a client for each.
pub struct Cluster {
    pub connection: Connection,
    pub members: Vec<Member>,
    clients: HashMap<u64, Client>,
}

impl Cluster {
    /// Finds the members through the first endpoint that answers. Unreachable: retryable.
    pub async fn discover(connection: Connection) -> Result<Self, Failure> {
        let mut url_of_member: HashMap<u64, String> = HashMap::new();
        let mut list = None;
        let mut errors = Vec::new();
        let mut clusters: Vec<(String, u64)> = Vec::new();
        for endpoint in &connection.endpoints {
            match member_list_via(&connection, endpoint).await {
                Ok(answer) => {
                    url_of_member.entry(answer.member_id).or_insert_with(|| endpoint.clone());
                    clusters.push((endpoint.clone(), answer.cluster_id));
                    list.get_or_insert(answer.members);
                }
                Err(err) => errors.push((endpoint.clone(), error_chain(&err))),
            }
        }
        if let Some(mixed) = mixed_clusters(&clusters) {
            return Err(Failure::bad_input(mixed));
        }
        let Some(list) = list else {
            return Err(unreachable_failure(&errors, connection.tls.is_some()));
        };
        let members: Vec<Member> = list
            .iter()
            .map(|m| Member {
                id: m.id(),
                name: if m.name().is_empty() {
                    format!("{:x}", m.id()) // a member added but not started has no name yet
                } else {
                    m.name().to_owned()
                },
                is_learner: m.is_learner(),
                url: None,
            })
            .collect();
        let mut members = members;
        let mut clients = HashMap::new();
        for (member, advertised) in members.iter_mut().zip(&list) {
            // The URLs it advertises first (each names this member alone), then the endpoint
            // that answered as it (which may be shared: a Service that happened to pick it); the
            // first that answers as this very member is its URL.
            let candidates: Vec<&String> =
                advertised.client_urls().iter().chain(url_of_member.get(&member.id)).collect();
            member.url = candidates.first().map(|url| url.to_string());
            if let Some((url, client)) = verified_client(&connection, member.id, &candidates).await {
                member.url = Some(url);
                clients.insert(member.id, client);
            } else if let Some(url) = &member.url
                && let Ok(client) = connection.client(url, Some(REQUEST_TIMEOUT)).await
            {
                // Nothing answered as the member now (it may be down): its first URL, whose
                // answers `status_of` checks each time.
                clients.insert(member.id, client);
            }
        }
        Ok(Self { connection, members, clients })
    }

    /// A client of some member that answered (the lowest id: the same one each time).
    pub fn any_client(&self) -> Option<Client> {
        let id = self.clients.keys().min()?;
        self.clients.get(id).cloned()
    }

    /// A client for every member that answered, lowest id first.
    pub fn clients(&self) -> Vec<Client> {
        let mut ids: Vec<&u64> = self.clients.keys().collect();
        ids.sort();
        ids.into_iter().map(|id| self.clients[id].clone()).collect()
    }

    pub fn member(&self, id: u64) -> Option<&Member> {
        self.members.iter().find(|m| m.id == id)
    }

    /// A client for one member, for cheap calls (bounded by [`REQUEST_TIMEOUT`]).
    pub fn client_of(&self, id: u64) -> Result<Client, String> {
        match (self.clients.get(&id), self.member(id)) {
            (Some(client), _) => Ok(client.clone()),
            (None, Some(Member { url: None, .. })) => Err("advertises no client URL".into()),
            (None, _) => Err("could not set up a client for it".into()),
        }
    }

    /// One member's status, or why it could not be had. An answer from another member (its URL
    /// is shared, a Service in front of several members, and the connection moved) is refused.
    pub async fn status_of(&self, id: u64) -> Result<MemberStatus, String> {
        let mut client = self.client_of(id)?;
        let status = client.status().await.map_err(|e| e.to_string())?;
        answered_as(&status, id)?;
        Ok(MemberStatus::from(&status))
    }

    /// Every member's status, asked in parallel.
    pub async fn observe(&self) -> Vec<MemberObservation> {
        let statuses = join_all(self.members.iter().map(|m| self.status_of(m.id))).await;
        self.members
            .iter()
            .zip(statuses)
            .map(|(m, status)| MemberObservation {
                id: m.id,
                name: m.name.clone(),
                is_learner: m.is_learner,
                status,
            })
            .collect()
    }
}

/// What one endpoint said of itself and its cluster.
struct MemberListAnswer {
    member_id: u64,
    cluster_id: u64,
    members: Vec<etcd_client::Member>,
}

/// Err unless `status` came from member `id`, naming both and what to do.
pub fn answered_as(status: &etcd_client::StatusResponse, id: u64) -> Result<(), String> {
    match status.header().map(|h| h.member_id()) {
        Some(answered) if answered == id => Ok(()),
        answered => Err(format!(
            "its URL was answered by member {:x}, not by {id:x}: a URL shared by several members (a \
             Service in front of them) cannot address one member; list every member's own URL in the \
             endpoints",
            answered.unwrap_or_default()
        )),
    }
}

/// A client on the first of `urls` that answers as member `id`.
async fn verified_client(connection: &Connection, id: u64, urls: &[&String]) -> Option<(String, Client)> {
    for url in urls {
        let Ok(mut client) = connection.client(url, Some(REQUEST_TIMEOUT)).await else {
            continue;
        };
        if client.status().await.is_ok_and(|status| answered_as(&status, id).is_ok()) {
            return Some((url.to_string(), client));
        }
    }
    None
}

async fn member_list_via(
    connection: &Connection,
    endpoint: &str,
) -> Result<MemberListAnswer, etcd_client::Error> {
    let mut client = connection.client(endpoint, Some(REQUEST_TIMEOUT)).await?;
    let status = client.status().await?;
    let header = status.header();
    let list = client.member_list().await?;
    Ok(MemberListAnswer {
        member_id: header.map(|h| h.member_id()).unwrap_or_default(),
        cluster_id: header.map(|h| h.cluster_id()).unwrap_or_default(),
        members: list.members().to_vec(),
    })
}

/// An error with every cause under it, outermost first: the transport's own message ("transport
/// error") says nothing of a certificate that was refused.
pub fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// Whether a connection error is the server's certificate being refused: a CA that does not
/// sign it, or a name it is not valid for. Retrying cannot fix either.
pub fn is_certificate_refusal(error: &str) -> bool {
    ["invalid peer certificate", "UnknownIssuer", "NotValidForName", "certificate verify failed"]
        .iter()
        .any(|sign| error.contains(sign))
}

/// Why no endpoint answered. When every endpoint refused on its certificate the input is wrong
/// (exit 2, as for the Scylla agent's certificate); anything else may pass (exit 1).
pub fn unreachable_failure(errors: &[(String, String)], tls: bool) -> Failure {
    let each: Vec<String> = errors.iter().map(|(e, why)| format!("{e}: {why}")).collect();
    if tls && !errors.is_empty() && errors.iter().all(|(_, why)| is_certificate_refusal(why)) {
        return Failure::bad_input(format!(
            "every etcd endpoint's certificate was refused: {}; --cacert must be the CA that \
             signed the etcd members' client (server) certificates, and each endpoint a name or \
             address those certificates are valid for",
            each.join("; ")
        ));
    }
    Failure::retryable(format!("no etcd endpoint answered: {}", each.join("; ")))
}

/// Endpoints of more than one etcd cluster (by the cluster id each answered with), described;
/// `None` when they all belong to one. One run maintains one cluster: narrowing the list to
/// whichever answered first would maintain a cluster nobody chose.
pub fn mixed_clusters(answers: &[(String, u64)]) -> Option<String> {
    let mut by_cluster: Vec<(u64, Vec<&str>)> = Vec::new();
    for (endpoint, cluster) in answers {
        match by_cluster.iter_mut().find(|(c, _)| c == cluster) {
            Some((_, endpoints)) => endpoints.push(endpoint),
            None => by_cluster.push((*cluster, vec![endpoint])),
        }
    }
    if by_cluster.len() < 2 {
        return None;
    }
    let each: Vec<String> = by_cluster
        .iter()
        .map(|(cluster, endpoints)| format!("{} → cluster {cluster:x}", endpoints.join(", ")))
        .collect();
    Some(format!(
        "--endpoints name members of {} different etcd clusters ({}); give the endpoints of one \
         cluster",
        by_cluster.len(),
        each.join("; ")
    ))
}

impl From<&etcd_client::StatusResponse> for MemberStatus {
    fn from(status: &etcd_client::StatusResponse) -> Self {
        MemberStatus {
            db_size: status.db_size(),
            db_size_in_use: status.raft_used_db_size(),
            leader: status.leader(),
            raft_term: status.raft_term(),
            raft_index: status.raft_index(),
            raft_applied_index: status.raft_applied_index(),
            errors: status.errors().to_vec(),
            version: status.version().to_owned(),
            db_size_quota: status.db_size_quota(),
        }
    }
}

#[cfg(test)]
mod tests {
    use groundskeeper_protocol::result::ErrorKind;

    use super::*;

    fn answers(list: &[(&str, u64)]) -> Vec<(String, u64)> {
        list.iter().map(|(e, c)| (e.to_string(), *c)).collect()
    }

    #[test]
    fn endpoints_of_two_clusters_are_refused_naming_both() {
        assert_eq!(mixed_clusters(&answers(&[("a:2379", 7), ("b:2379", 7)])), None);
        assert_eq!(mixed_clusters(&[]), None);
        let message =
            mixed_clusters(&answers(&[("a:2379", 0xa1), ("b:2379", 0xb2), ("c:2379", 0xa1)])).unwrap();
        assert_eq!(
            message,
            "--endpoints name members of 2 different etcd clusters (a:2379, c:2379 → cluster a1; \
             b:2379 → cluster b2); give the endpoints of one cluster"
        );
    }

    #[test]
    fn a_refused_certificate_everywhere_is_bad_input_anything_else_retryable() {
        let refused = "transport error: invalid peer certificate: UnknownIssuer".to_owned();
        let down = "transport error: tcp connect error: Connection refused (os error 111)".to_owned();
        let cases = [
            (
                "every endpoint refused the CA",
                vec![refused.clone(), refused.clone()],
                true,
                ErrorKind::BadInput,
            ),
            (
                "one endpoint down, one refused",
                vec![refused.clone(), down.clone()],
                true,
                ErrorKind::Retryable,
            ),
            ("all down", vec![down.clone()], true, ErrorKind::Retryable),
            ("no TLS asked for", vec![refused.clone()], false, ErrorKind::Retryable),
            ("no endpoint at all", vec![], true, ErrorKind::Retryable),
        ];
        for (name, errors, tls, kind) in cases {
            let errors: Vec<(String, String)> =
                errors.into_iter().enumerate().map(|(i, e)| (format!("https://m{i}:2379"), e)).collect();
            let failure = unreachable_failure(&errors, tls);
            assert_eq!(failure.kind, kind, "{name}: {}", failure.message);
            if kind == ErrorKind::BadInput {
                assert!(failure.message.contains("--cacert must be the CA"), "{name}: {}", failure.message);
            }
        }
    }

    #[test]
    fn the_error_chain_keeps_the_causes() {
        #[derive(Debug)]
        struct Outer(std::io::Error);
        impl std::fmt::Display for Outer {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("transport error")
            }
        }
        impl std::error::Error for Outer {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let inner = std::io::Error::other("invalid peer certificate: UnknownIssuer");
        assert_eq!(error_chain(&Outer(inner)), "transport error: invalid peer certificate: UnknownIssuer");
    }
}
