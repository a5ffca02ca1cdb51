//! Observing an etcd cluster from the controller: one `Status` call per member and one
//! `MemberList`, nothing that blocks or loads the members.
//!
//! Every member the cluster lists is observed, not only those in `spec.endpoints`: a member
//! missing from the spec is asked on the client URLs it advertises. An endpoint that does not
//! answer and belongs to no listed member is reported as a member of its own (id 0), so that a
//! wrong or dead endpoint shows in the status instead of silently shrinking the cluster.

use std::fmt;

use etcd_client::Client;
use futures::future::join_all;
use groundskeeper_stores::etcd::connect::{ClientIdentity, Connection, REQUEST_TIMEOUT};
use groundskeeper_stores::etcd::plan::{MemberObservation, MemberStatus};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Secret;
use kube::api::ListParams;
use kube::{Api, ResourceExt};

use groundskeeper_api::etcd_cluster::{EtcdCluster, TLS_CA_KEY, TLS_CERT_KEY, TLS_KEY_KEY};
use groundskeeper_api::maintenance_task::{MaintenanceTask, TargetKind, TaskTarget};

use super::fleet::{FleetMember, id_collisions};
use super::model::{ClusterTaskView, Observed};
use super::policy::Policy;
use crate::runtime::context::Context;
use crate::runtime::error::{Error, Result};
use crate::runtime::scope;

/// Named here as well, where the observation's users have always found it.
pub use super::model::ObservedMember;

/// Client certificate material, PEM, from the EtcdCluster's TLS Secret. Never printed.
#[derive(Clone)]
pub struct ClientTls {
    pub ca: Vec<u8>,
    pub cert: Vec<u8>,
    pub key: Vec<u8>,
}

impl fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ClientTls { <redacted> }")
    }
}

/// What one `Status` call said.
#[derive(Debug, Clone)]
struct StatusAnswer {
    member_id: u64,
    is_learner: bool,
    revision: Option<i64>,
    status: MemberStatus,
}

impl ClientTls {
    /// The runner's connection settings for these endpoints: the controller observes with the
    /// same client, TLS checks and timeouts as the maintenance Jobs.
    fn connection(tls: Option<&Self>, endpoints: &[String]) -> Result<Connection, String> {
        let (ca, identity) = match tls {
            Some(tls) => {
                (Some(tls.ca.clone()), Some(ClientIdentity { cert: tls.cert.clone(), key: tls.key.clone() }))
            }
            None => (None, None),
        };
        let source = |piece: &str| format!("the client TLS Secret's {piece}");
        Connection::new(endpoints, ca, identity, &source).map_err(|failure| failure.message)
    }
}

/// Observes every member of the cluster reachable through `endpoints`.
pub async fn observe_cluster(endpoints: &[String], tls: Option<&ClientTls>) -> Vec<ObservedMember> {
    let connection = match ClientTls::connection(tls, endpoints) {
        Ok(connection) => connection,
        Err(why) => return endpoints.iter().map(|e| unknown_member(e, why.clone())).collect(),
    };
    let connection = &connection;
    let answers = join_all(endpoints.iter().map(|e| member_status(e, connection))).await;
    let answered: Vec<(&String, &StatusAnswer)> =
        endpoints.iter().zip(&answers).filter_map(|(e, a)| a.as_ref().ok().map(|a| (e, a))).collect();
    let Some(list) = member_list(&answered, connection).await else {
        // Nobody answered: each endpoint stands for a member we cannot see.
        return endpoints
            .iter()
            .zip(answers)
            .map(|(endpoint, answer)| unknown_member(endpoint, answer.err().unwrap_or_default()))
            .collect();
    };
    let mut observed = Vec::with_capacity(list.len());
    for listed in &list {
        observed.push(observe_listed(listed, &answered, connection).await);
    }
    for (endpoint, answer) in endpoints.iter().zip(answers) {
        let claimed = observed.iter().any(|m| same_url(&m.endpoint, endpoint))
            || list.iter().any(|m| m.client_urls.iter().any(|u| same_url(u, endpoint)));
        if let Err(err) = answer
            && !claimed
        {
            observed.push(unknown_member(endpoint, err));
        }
    }
    observed
}

/// A member from the member list.
#[derive(Debug, Clone)]
struct ListedMember {
    id: u64,
    name: String,
    is_learner: bool,
    client_urls: Vec<String>,
    peer_urls: Vec<String>,
}

async fn observe_listed(
    listed: &ListedMember,
    answered: &[(&String, &StatusAnswer)],
    connection: &Connection,
) -> ObservedMember {
    let name = if listed.name.is_empty() {
        format!("{:x}", listed.id) // not started yet: etcd lists it without a name
    } else {
        listed.name.clone()
    };
    let observation = |endpoint: &str, status: Result<MemberStatus, String>, revision| ObservedMember {
        endpoint: endpoint.to_owned(),
        member: MemberObservation {
            id: listed.id,
            name: name.clone(),
            is_learner: listed.is_learner,
            status,
        },
        revision,
        peer_urls: listed.peer_urls.clone(),
    };
    if let Some((endpoint, answer)) = answered.iter().find(|(_, a)| a.member_id == listed.id) {
        return observation(endpoint, Ok(answer.status.clone()), answer.revision);
    }
    let mut errors = Vec::new();
    for url in &listed.client_urls {
        match member_status(url, connection).await {
            Ok(answer) if answer.member_id == listed.id => {
                return observation(url, Ok(answer.status), answer.revision);
            }
            Ok(answer) => errors.push(format!("{url} answered as member {:x}", answer.member_id)),
            Err(err) => errors.push(err),
        }
    }
    let endpoint = listed.client_urls.first().cloned().unwrap_or_default();
    let why = if errors.is_empty() { "advertises no client URL".to_owned() } else { errors.join("; ") };
    observation(&endpoint, Err(why), None)
}

fn unknown_member(endpoint: &str, error: String) -> ObservedMember {
    ObservedMember {
        endpoint: endpoint.to_owned(),
        member: MemberObservation { id: 0, name: endpoint.to_owned(), is_learner: false, status: Err(error) },
        revision: None,
        peer_urls: Vec::new(),
    }
}

fn same_url(a: &str, b: &str) -> bool {
    a.trim_end_matches('/') == b.trim_end_matches('/')
}

async fn connect(endpoint: &str, connection: &Connection) -> Result<Client, String> {
    connection
        .client(endpoint, Some(REQUEST_TIMEOUT))
        .await
        .map_err(|err| format!("{endpoint}: cannot connect: {err}"))
}

async fn member_status(endpoint: &str, connection: &Connection) -> Result<StatusAnswer, String> {
    let mut client = connect(endpoint, connection).await?;
    let status = client.status().await.map_err(|err| format!("{endpoint}: Status failed: {err}"))?;
    let header = status.header();
    Ok(StatusAnswer {
        member_id: header.map(|h| h.member_id()).unwrap_or_default(),
        is_learner: status.is_learner(),
        revision: header.map(|h| h.revision()),
        status: MemberStatus::from(&status),
    })
}

/// The member list, from the first endpoint that answered `Status` and then `MemberList`.
async fn member_list(
    answered: &[(&String, &StatusAnswer)],
    connection: &Connection,
) -> Option<Vec<ListedMember>> {
    for (endpoint, answer) in answered {
        let Ok(mut client) = connect(endpoint, connection).await else {
            continue;
        };
        match client.member_list().await {
            Ok(list) => {
                return Some(
                    list.members()
                        .iter()
                        .map(|m| ListedMember {
                            id: m.id(),
                            name: m.name().to_owned(),
                            // The member list is the authority on learners; Status agrees.
                            is_learner: m.is_learner() || (m.id() == answer.member_id && answer.is_learner),
                            client_urls: m.client_urls().to_vec(),
                            peer_urls: m.peer_urls().to_vec(),
                        })
                        .collect(),
                );
            }
            Err(err) => {
                tracing::debug!(%endpoint, error = %err, "MemberList failed; trying the next endpoint")
            }
        }
    }
    None
}

/// The store's revision: the highest any member reported (a member that lags reports less).
pub fn cluster_revision(members: &[ObservedMember]) -> Option<i64> {
    members.iter().filter_map(|m| m.revision).max()
}

/// The other clusters of `cluster`'s fleet, in the namespaces this controller looks after, that
/// claim its cluster id.
pub(super) async fn fleet_collisions(ctx: &Context, cluster: &EtcdCluster) -> Result<Vec<String>> {
    if cluster.spec.partition.is_none() {
        return Ok(Vec::new());
    }
    let fleet: Vec<FleetMember> = all_clusters(ctx).await?.iter().map(fleet_member).collect();
    Ok(id_collisions(&fleet_member(cluster), &fleet))
}

/// Every EtcdCluster in the namespaces this controller looks after.
pub(crate) async fn all_clusters(ctx: &Context) -> Result<Vec<EtcdCluster>> {
    let mut all = Vec::new();
    for namespace in scope::watched(&ctx.config) {
        let api: Api<EtcdCluster> = scope::api(&ctx.client, namespace.as_deref());
        let listed = api.list(&ListParams::default()).await.map_err(Error::kube(format!(
            "list EtcdClusters in {}",
            namespace.as_deref().unwrap_or("every namespace")
        )))?;
        all.extend(listed.items);
    }
    Ok(all)
}

fn fleet_member(cluster: &EtcdCluster) -> FleetMember {
    FleetMember {
        namespace: cluster.namespace().unwrap_or_default(),
        name: cluster.name_any(),
        partition: cluster.spec.partition.clone(),
    }
}

/// The MaintenanceTasks whose target is the cluster, whoever created them.
pub(super) async fn cluster_tasks(
    ctx: &Context,
    namespace: &str,
    name: &str,
    now: Timestamp,
) -> Result<Vec<ClusterTaskView>> {
    let target = TaskTarget { kind: TargetKind::EtcdCluster, name: name.to_owned() };
    Ok(Api::<MaintenanceTask>::namespaced(ctx.client.clone(), namespace)
        .list(&ListParams::default())
        .await
        .map_err(Error::kube(format!("list MaintenanceTasks in {namespace}")))?
        .items
        .iter()
        .filter(|task| task.spec.target == target)
        .map(|task| ClusterTaskView::of(task, now))
        .collect())
}

/// The PEM files of the client TLS Secret. Errors name the Secret and key, never the content.
pub async fn read_client_tls(
    client: &kube::Client,
    namespace: &str,
    secret_name: &str,
) -> std::result::Result<ClientTls, String> {
    let what = format!("client TLS Secret {namespace}/{secret_name} (spec.tls.secretName)");
    let secret = Api::<Secret>::namespaced(client.clone(), namespace)
        .get(secret_name)
        .await
        .map_err(|err| format!("{what}: {err}"))?;
    let data = secret.data.unwrap_or_default();
    let key = |key: &str| {
        data.get(key).map(|bytes| bytes.0.clone()).filter(|bytes| !bytes.is_empty()).ok_or_else(|| {
            format!(
                "{what}: has no key {key:?} (keys {TLS_CA_KEY}, {TLS_CERT_KEY}, {TLS_KEY_KEY} are needed)"
            )
        })
    };
    Ok(ClientTls { ca: key(TLS_CA_KEY)?, cert: key(TLS_CERT_KEY)?, key: key(TLS_KEY_KEY)? })
}

/// Reads the client TLS Secret, if any, and asks every member.
pub(crate) async fn observe_members(client: &kube::Client, namespace: &str, policy: &Policy) -> Observed {
    let tls = match &policy.tls_secret {
        Some(secret) => match read_client_tls(client, namespace, secret).await {
            Ok(tls) => Some(tls),
            Err(why) => return Observed::Failed(why),
        },
        None => None,
    };
    Observed::Members(observe_cluster(&policy.endpoints, tls.as_ref()).await)
}
