//! Reading a ScyllaCluster, its member Services, its Cleanup tasks and the agent token Secret
//! into a [`Snapshot`]. The API reads are thin; [`build_snapshot`] is pure. Objects that make no
//! sense are reported by `decide`, never panics.

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Pod, Secret, Service};
use kube::api::ListParams;
use kube::{Api, ResourceExt};
use serde_json::Value;

use groundskeeper_protocol::keys;

use super::agent::get_agent_token_secret;
use super::model::{SecretState, TaskFacts};
use super::ownership::RingView;
use super::ownership_reader::{ViewCache, read_cluster_views_cached};
use super::ring_quiet::RingQuiet;
use crate::runtime::context::Context;
use crate::runtime::error::{Error, Result};
use crate::tasks::hold::{automatic_hold, suspensions_of};
use groundskeeper_api::maintenance_task::TaskTarget;
use groundskeeper_api::maintenance_task::{MaintenanceTask, TargetKind, TaskType};
use groundskeeper_api::maintenance_window::windows_from_annotations;
use groundskeeper_api::scylla::coexistence::OperatorCleanup;
use groundskeeper_api::scylla::facts::{ClusterFacts, ConditionFacts, datacenter_conditions};
use groundskeeper_api::scylla::facts::{
    MemberFacts, cluster_facts, current_members, member_selector, operator_cleanup, operator_cleanup_selector,
};
use groundskeeper_api::scylla::{ScyllaCluster, ScyllaDBDatacenter};

/// Everything the decision needs, read from the API by `observe`.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    pub cluster: ClusterFacts,
    pub members: Vec<MemberFacts>,
    /// The cluster's Cleanup tasks, whoever asked for them.
    pub tasks: Vec<TaskFacts>,
    pub agent_token: SecretState,
    /// What every node replicates now, read through one node's agent, or why that is unknown.
    pub ownership: Result<Vec<RingView>, String>,
    /// scylla-operator's own cleanup of the cluster (see [`groundskeeper_api::scylla::coexistence`]).
    pub scylla_operator: OperatorCleanup,
    /// Why its automatic cleanup is held now (a suspension, a closed maintenance window): no
    /// task is submitted while there is one.
    pub holds: Vec<String>,
    /// Since when the ring has been as it is now: no task is submitted before it is quiet
    /// ([`super::ring_quiet`]).
    pub ring_quiet: RingQuiet,
    pub now: jiff::Timestamp,
}

/// The member Services (one per Scylla node) of the ScyllaCluster `namespace/cluster`.
pub(crate) async fn list_member_services(
    client: &kube::Client,
    namespace: &str,
    cluster: &str,
) -> Result<Vec<Service>> {
    let selector = member_selector(cluster);
    let services: Api<Service> = Api::namespaced(client.clone(), namespace);
    Ok(services
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(Error::kube(format!("list member Services in {namespace} with {selector}")))?
        .items)
}

/// The Cleanup tasks of ScyllaCluster `namespace/cluster`.
pub(crate) async fn list_cleanup_tasks(
    client: &kube::Client,
    namespace: &str,
    cluster: &str,
) -> Result<Vec<MaintenanceTask>> {
    let tasks: Api<MaintenanceTask> = Api::namespaced(client.clone(), namespace);
    Ok(tasks
        .list(&ListParams::default())
        .await
        .map_err(Error::kube(format!("list MaintenanceTasks in {namespace}")))?
        .items
        .into_iter()
        .filter(|t| is_cleanup_of(t, cluster))
        .collect())
}

/// A Cleanup task of ScyllaCluster `cluster` (in the task's namespace).
pub(crate) fn is_cleanup_of(task: &MaintenanceTask, cluster: &str) -> bool {
    task.spec.task_type == TaskType::Cleanup
        && task.spec.target.kind == TargetKind::ScyllaCluster
        && task.spec.target.name == cluster
}

/// The conditions of the ScyllaDBDatacenter of the same name, where scylla-operator writes its
/// Job controller's conditions first (and this trigger its own); none where there is no such
/// object (older scylla-operators) or its kind is not served.
pub(crate) async fn read_datacenter_conditions(
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> Result<Vec<ConditionFacts>> {
    let api: Api<ScyllaDBDatacenter> = Api::namespaced(client.clone(), namespace);
    match api.get_opt(name).await {
        Ok(found) => Ok(found.as_ref().map(datacenter_conditions).unwrap_or_default()),
        // A cluster without the ScyllaDBDatacenter kind (scylla-operator before 1.15).
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(Vec::new()),
        Err(err) => Err(Error::kube(format!("get ScyllaDBDatacenter {namespace}/{name}"))(err)),
    }
}

/// Reads everything the decision for `cluster` needs, the ring views afresh.
pub async fn observe(ctx: &Context, cluster: &ScyllaCluster, now: jiff::Timestamp) -> Result<Snapshot> {
    observe_with(ctx, cluster, now, &ViewCache::default()).await
}

/// [`observe`], the ring views from `views` where nothing they depend on moved.
pub(crate) async fn observe_with(
    ctx: &Context,
    cluster: &ScyllaCluster,
    now: jiff::Timestamp,
    views: &ViewCache,
) -> Result<Snapshot> {
    let client = &ctx.client;
    let namespace = cluster.metadata.namespace.clone().unwrap_or_default();
    let name = cluster.metadata.name.clone().unwrap_or_default();
    let services = list_member_services(client, &namespace, &name).await?;
    let tasks = list_cleanup_tasks(client, &namespace, &name).await?;
    let agent_token = read_secret_state(client, &namespace, &name).await?;
    let operator_jobs = list_operator_cleanup_jobs(client, &namespace, &name).await?;
    let mut snapshot = build_snapshot(cluster, &services, &tasks, agent_token, now);
    fill_pod_addresses(client, cluster, &mut snapshot.members).await?;
    let datacenter = read_datacenter_conditions(client, &namespace, &name).await?;
    snapshot.scylla_operator = operator_cleanup(&snapshot.cluster, &datacenter, &operator_jobs);
    snapshot.ownership = read_ownership(ctx, cluster, &snapshot, views).await;
    snapshot.holds = automatic_holds(ctx, cluster, &namespace, &name, now).await?;
    Ok(snapshot)
}

/// Why the cluster's automatic cleanup is held now: a suspension of it that does not allow
/// Cleanup, or its maintenance windows (annotations) closed or unreadable.
async fn automatic_holds(
    ctx: &Context,
    cluster: &ScyllaCluster,
    namespace: &str,
    name: &str,
    now: jiff::Timestamp,
) -> Result<Vec<String>> {
    let target = TaskTarget { kind: TargetKind::ScyllaCluster, name: name.to_owned() };
    let suspensions = suspensions_of(ctx, namespace, &target, now).await?;
    let windows =
        windows_from_annotations(cluster.annotations(), &format!("ScyllaCluster {namespace}/{name}"));
    Ok(automatic_hold(&suspensions, windows.as_ref(), &TaskType::Cleanup, now)
        .map(|(why, _)| why)
        .into_iter()
        .collect())
}

/// The ring views, unless nothing can be cleaned anyway (turned off, no agent token).
async fn read_ownership(
    ctx: &Context,
    cluster: &ScyllaCluster,
    snapshot: &Snapshot,
    views: &ViewCache,
) -> Result<Vec<RingView>, String> {
    let disabled = snapshot.cluster.annotations.get(keys::MAINTENANCE_ENABLED).is_some_and(|v| v == "false");
    if disabled
        || snapshot.agent_token != SecretState::Present
        || cluster.metadata.deletion_timestamp.is_some()
    {
        views.forget(&snapshot.cluster.namespace, &snapshot.cluster.name);
        return Err("not read: no cleanup can start".into());
    }
    read_cluster_views_cached(
        ctx,
        views,
        &snapshot.cluster.namespace,
        &snapshot.cluster.name,
        &snapshot.members,
    )
    .await
}

/// Whether the cluster's nodes broadcast their pod IP (`spec.exposeOptions.broadcastOptions.nodes.type:
/// PodIP`), not their member Service's ClusterIP.
pub(crate) fn broadcasts_pod_ip(cluster: &ScyllaCluster) -> bool {
    cluster
        .spec
        .expose_options
        .as_ref()
        .and_then(|o| o.pointer("/broadcastOptions/nodes/type"))
        .and_then(Value::as_str)
        == Some("PodIP")
}

/// Where the cluster's nodes broadcast their pod IP, each member's address is its pod's IP.
pub async fn fill_pod_addresses(
    client: &kube::Client,
    cluster: &ScyllaCluster,
    members: &mut [MemberFacts],
) -> Result<()> {
    if !broadcasts_pod_ip(cluster) {
        return Ok(());
    }
    let namespace = cluster.metadata.namespace.clone().unwrap_or_default();
    let name = cluster.metadata.name.clone().unwrap_or_default();
    let selector = format!("{}={name}", keys::SCYLLA_CLUSTER_LABEL);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &namespace);
    let pods = pods
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(Error::kube(format!("list Pods in {namespace} with {selector}")))?;
    for member in members.iter_mut() {
        // Pod name = member Service name.
        let pod = pods.items.iter().find(|p| p.metadata.name.as_deref() == Some(&member.service));
        member.address = pod.and_then(|p| p.status.as_ref()?.pod_ip.clone());
    }
    Ok(())
}

/// scylla-operator's cleanup Jobs of ScyllaCluster `namespace/cluster`: read, never written.
pub(crate) async fn list_operator_cleanup_jobs(
    client: &kube::Client,
    namespace: &str,
    cluster: &str,
) -> Result<Vec<Job>> {
    let selector = operator_cleanup_selector(cluster);
    crate::jobs::list_jobs(client, namespace, &selector).await
}

/// Whether the agent token Secret exists and holds its key. The token itself is not kept.
pub(crate) async fn read_secret_state(
    client: &kube::Client,
    namespace: &str,
    cluster: &str,
) -> Result<SecretState> {
    let (name, secret) = get_agent_token_secret(client, namespace, cluster).await?;
    Ok(secret_state(&name, secret.as_ref()))
}

pub(crate) fn secret_state(name: &str, secret: Option<&Secret>) -> SecretState {
    let Some(secret) = secret else {
        return SecretState::Missing { name: name.to_owned() };
    };
    let key = keys::SCYLLA_AGENT_TOKEN_SECRET_KEY;
    let has_key = secret.data.as_ref().is_some_and(|d| d.contains_key(key))
        || secret.string_data.as_ref().is_some_and(|d| d.contains_key(key));
    if has_key {
        SecretState::Present
    } else {
        SecretState::MissingKey { name: name.to_owned(), key: key.to_owned() }
    }
}

/// The snapshot of one ScyllaCluster: pure.
pub fn build_snapshot(
    cluster: &ScyllaCluster,
    services: &[Service],
    tasks: &[MaintenanceTask],
    agent_token: SecretState,
    now: jiff::Timestamp,
) -> Snapshot {
    let cluster = cluster_facts(cluster);
    Snapshot {
        scylla_operator: operator_cleanup(&cluster, &[], &[]),
        cluster,
        members: current_members(services),
        tasks: tasks.iter().map(|t| task_facts(t, now)).collect(),
        agent_token,
        ownership: Err("not read".into()),
        holds: Vec::new(),
        // The trigger sets it from what it saw before (`controller::reconcile`).
        ring_quiet: RingQuiet::settled_long_ago(),
        now,
    }
}

fn task_facts(task: &MaintenanceTask, now: jiff::Timestamp) -> TaskFacts {
    let status = task.status.clone().unwrap_or_default();
    let queued = status
        .conditions
        .iter()
        .find(|c| c.type_ == groundskeeper_api::maintenance_task::QUEUED && c.status == "True");
    TaskFacts {
        name: task.name_any(),
        automatic: task.labels().get(keys::ORIGIN_LABEL).map(String::as_str) == Some(keys::ORIGIN_AUTOMATIC),
        state: status.state.unwrap_or_default(),
        created: task.metadata.creation_timestamp.as_ref().map_or(now, |t| t.0),
        completed_at: status.completed_at.map(|t| t.0),
        ring_hash: task.annotations().get(keys::CLEANUP_TOKEN_RING_HASH).cloned(),
        progress: status.progress,
        last_error: status.last_errors.last().map(|e| (e.code.clone(), e.description.clone())),
        waiting_for: queued.map(|c| c.message.clone()),
    }
}
