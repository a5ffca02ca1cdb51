//! Thin writes carrying out a [`Plan`]: seeded Service annotations, the automatic Cleanup task,
//! Events on the ScyllaCluster, and the two conditions through the shared status writer. Every
//! decision was taken in `decide`; here only the shape of each write is chosen.

use std::collections::BTreeMap;

use kube::api::{ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, Resource};

use groundskeeper_protocol::keys;

use super::decide::Plan;
use super::model::{Action, ConditionPlan, RecordChange, SeedReason};
use super::ownership::OWNED_AT_LAST_CLEANUP;
use crate::conditions::ConditionTarget;
use crate::conditions::{self, Condition};
use crate::runtime::context::{Context, PlannedEvent, related};
use crate::runtime::error::{Error, Result};
use crate::scylla::record::patch_service;
use groundskeeper_api::maintenance_task::{
    CleanupConfig, DEFAULT_TTL_SECONDS_AFTER_FINISHED, MaintenanceTask, MaintenanceTaskSpec,
    NodeCleanupConfig, TargetKind, TaskConfig, TaskTarget, TaskType,
};
use groundskeeper_api::scylla::{ScyllaCluster, ScyllaDBDatacenter};

/// Carries out `plan` for `cluster`: every action (one failing does not stop the others), then the
/// conditions. Returns the first error.
pub async fn apply(ctx: &Context, cluster: &ScyllaCluster, plan: &Plan) -> Result<()> {
    let mut first_error = None;
    for action in &plan.actions {
        if let Err(err) = apply_action(ctx, cluster, action).await {
            tracing::warn!(error = %err, ?action, "cleanup action failed");
            first_error.get_or_insert(err);
        }
    }
    if let Err(err) = write_conditions(ctx, cluster, plan).await {
        first_error.get_or_insert(err);
    }
    first_error.map_or(Ok(()), Err)
}

async fn apply_action(ctx: &Context, cluster: &ScyllaCluster, action: &Action) -> Result<()> {
    let namespace = cluster.metadata.namespace.clone().unwrap_or_default();
    match action {
        Action::SeedLastCleaned { service, hash, members, reason } => {
            patch_service(&ctx.client, &namespace, service, hash, members.as_ref()).await?;
            let why = match reason {
                SeedReason::Joined => "it just joined and holds no stale data",
                SeedReason::OnlyNodesLeft => {
                    "only nodes left the ring since its last cleanup: it lost no ranges"
                }
                SeedReason::NoRangeLost => "it still replicates every range it replicated when last cleaned",
                SeedReason::JoinedTogether => {
                    "it joined together with other nodes, so what it holds cannot be known: it is cleaned once"
                }
            };
            tracing::info!(%namespace, %service, "seeded last-cleaned ring hash: {why}");
            Ok(())
        }
        Action::RecordOwnership { service, value, change } => {
            patch_ownership_record(&ctx.client, &namespace, service, value).await?;
            let what = match change {
                RecordChange::Seeded => "seeded",
                RecordChange::Widened => "widened",
                RecordChange::Rebased => "kept for the node's new last-cleaned ring hash",
                RecordChange::ResetAfterOutsideCleanup => {
                    "reset to what the node replicates now, after scylla-operator cleaned it"
                }
            };
            tracing::info!(%namespace, %service, bytes = value.len(), "{what} the node's ownership record");
            Ok(())
        }
        Action::SubmitCleanupTask { name, nodes, per_node, ring_hash, retry_of } => {
            let task = cleanup_task(cluster, name, nodes, per_node, ring_hash)?;
            let api: Api<MaintenanceTask> = Api::namespaced(ctx.client.clone(), &namespace);
            match api.create(&PostParams::default(), &task).await {
                Ok(_) => {}
                // Submitted by an earlier pass that stopped before it could tell.
                Err(kube::Error::Api(status)) if status.code == 409 => return Ok(()),
                Err(err) => {
                    return Err(Error::kube(format!("create MaintenanceTask {namespace}/{name}"))(err));
                }
            }
            let after =
                retry_of.as_ref().map(|failed| format!(", after task {failed} failed")).unwrap_or_default();
            let note = format!(
                "submitted cleanup task {name} for {} node(s){after}: {}",
                nodes.len(),
                describe_nodes(nodes, per_node)
            );
            tracing::info!(%namespace, task = %name, nodes = nodes.len(), "submitted an automatic cleanup task");
            let submitted = related("groundskeeper.dev/v1alpha1", "MaintenanceTask", &namespace, name);
            let event = PlannedEvent {
                warning: false,
                reason: "CleanupTaskSubmitted",
                note,
                related: Some(submitted),
            };
            ctx.publish_events(&cluster.object_ref(&()), "Cleanup", &[event]).await;
            Ok(())
        }
    }
}

/// The automatic Cleanup task of `cluster` for `nodes`, owned by the cluster (it goes with it),
/// recording the ring it was submitted for.
pub(crate) fn cleanup_task(
    cluster: &ScyllaCluster,
    name: &str,
    nodes: &[String],
    per_node: &[NodeCleanupConfig],
    ring_hash: &str,
) -> Result<MaintenanceTask> {
    let namespace = cluster.metadata.namespace.clone().unwrap_or_default();
    let cluster_name = cluster.metadata.name.clone().unwrap_or_default();
    let owner = cluster.controller_owner_ref(&()).ok_or_else(|| Error::InvalidObject {
        object: format!("ScyllaCluster {namespace}/{cluster_name}"),
        field: "metadata.uid".into(),
        message: "missing: a task cannot be owned by it".into(),
    })?;
    Ok(MaintenanceTask {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(namespace),
            labels: Some(BTreeMap::from([
                (keys::MANAGED_BY_LABEL.to_owned(), keys::MANAGED_BY.to_owned()),
                (keys::ORIGIN_LABEL.to_owned(), keys::ORIGIN_AUTOMATIC.to_owned()),
            ])),
            annotations: Some(BTreeMap::from([(
                keys::CLEANUP_TOKEN_RING_HASH.to_owned(),
                ring_hash.to_owned(),
            )])),
            owner_references: Some(vec![owner]),
            ..ObjectMeta::default()
        },
        spec: MaintenanceTaskSpec {
            target: TaskTarget { kind: TargetKind::ScyllaCluster, name: cluster_name },
            task_type: TaskType::Cleanup,
            config: TaskConfig {
                cleanup: Some(CleanupConfig {
                    nodes: nodes.to_vec(),
                    per_node: per_node.to_vec(),
                    ..CleanupConfig::default()
                }),
                ..TaskConfig::default()
            },
            ttl_seconds_after_finished: DEFAULT_TTL_SECONDS_AFTER_FINISHED,
            ttl_seconds_after_failed: None,
            deadline_seconds: None,
            // Automatic: it waits for the target's maintenance windows whatever this says.
            wait_for_window: false,
            // The cluster asks that its automatic work be approved first.
            // Anything but absent or "false" asks for approval: a value that cannot be read holds
            // the work for a person rather than running it unreviewed.
            require_approval: cluster
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(keys::REQUIRE_APPROVAL))
                .is_some_and(|v| !v.trim().eq_ignore_ascii_case("false")),
        },
        status: None,
    })
}

/// Each node with what it cleans: `a-0 (ks1, ks2)`, or the bare name for every keyspace.
fn describe_nodes(nodes: &[String], per_node: &[NodeCleanupConfig]) -> String {
    nodes
        .iter()
        .map(|node| match per_node.iter().find(|p| &p.node == node) {
            Some(only) => format!("{node} ({})", only.keyspaces.join(", ")),
            None => node.clone(),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The merge patch writing a node's ownership record.
pub(crate) fn ownership_record_patch(value: &str) -> serde_json::Value {
    serde_json::json!({ "metadata": { "annotations": { OWNED_AT_LAST_CLEANUP: value } } })
}

/// Writes `value` as member Service `service`'s ownership record.
pub(crate) async fn patch_ownership_record(
    client: &kube::Client,
    namespace: &str,
    service: &str,
    value: &str,
) -> Result<()> {
    let api: Api<k8s_openapi::api::core::v1::Service> = Api::namespaced(client.clone(), namespace);
    api.patch(service, &PatchParams::default(), &Patch::Merge(&ownership_record_patch(value)))
        .await
        .map_err(Error::kube(format!(
            "patch annotation {OWNED_AT_LAST_CLEANUP} of Service {namespace}/{service}"
        )))?;
    Ok(())
}

/// The plan's conditions as the shared writer takes them.
pub fn conditions(plan: &Plan) -> [Condition; 2] {
    let convert = |c: &ConditionPlan| Condition::new(c.type_, c.status, c.reason.clone(), c.message.clone());
    [convert(&plan.progressing), convert(&plan.degraded)]
}

/// Writes the conditions on the ScyllaDBDatacenter of the same name when there is one, else on
/// the ScyllaCluster.
pub async fn write_conditions(ctx: &Context, cluster: &ScyllaCluster, plan: &Plan) -> Result<()> {
    let namespace = cluster.metadata.namespace.clone().unwrap_or_default();
    let name = cluster.metadata.name.clone().unwrap_or_default();
    let target = scylla_condition_target(&ctx.client, &namespace, &name).await?;
    conditions::write_conditions(&ctx.client, &target, &conditions(plan), ctx.config.status_write_attempts)
        .await?;
    Ok(())
}

/// Where the conditions of ScyllaCluster `namespace/name` go: its ScyllaDBDatacenter (same name)
/// when there is one, because scylla-operator keeps foreign conditions there and copies them up;
/// else the ScyllaCluster itself (older scylla-operators, without ScyllaDBDatacenters).
pub async fn scylla_condition_target(
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> Result<ConditionTarget> {
    let datacenter = ConditionTarget::of::<ScyllaDBDatacenter>(namespace, name);
    match datacenter.api(client).get_metadata_opt(name).await {
        Ok(Some(_)) => Ok(datacenter),
        Ok(None) => Ok(ConditionTarget::of::<ScyllaCluster>(namespace, name)),
        // The CRD itself is not installed: the same answer as "no such object".
        Err(kube::Error::Api(status)) if status.code == 404 => {
            Ok(ConditionTarget::of::<ScyllaCluster>(namespace, name))
        }
        Err(err) => Err(Error::kube(format!("get {}", datacenter.describe()))(err)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(annotations: &[(&str, &str)]) -> ScyllaCluster {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "scylla.scylladb.com/v1", "kind": "ScyllaCluster",
            "metadata": {"name": "basic", "namespace": "db", "uid": "u",
                         "annotations": annotations.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<BTreeMap<_, _>>()},
            "spec": {}
        }))
        .unwrap()
    }

    /// The automatic cleanup awaits approval where the cluster's annotation is there and not
    /// "false" (a value that cannot be read errs on the side of a person's review).
    #[test]
    fn an_automatic_cleanup_asks_for_approval_where_its_cluster_says_so() {
        let nodes = ["basic-dc-a-0".to_owned()];
        let asks = |annotations: &[(&str, &str)]| {
            cleanup_task(&cluster(annotations), "t", &nodes, &[], "hash").unwrap().spec.require_approval
        };
        assert!(!asks(&[]));
        assert!(asks(&[(keys::REQUIRE_APPROVAL, "true")]));
        assert!(asks(&[(keys::REQUIRE_APPROVAL, " True ")]));
        assert!(!asks(&[(keys::REQUIRE_APPROVAL, "false")]));
        assert!(asks(&[(keys::REQUIRE_APPROVAL, "yes")]));
        assert!(!asks(&[(keys::REQUIRE_APPROVAL, "FALSE")]));
    }
}
