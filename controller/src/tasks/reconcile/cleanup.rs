//! The thin layer around [`crate::tasks::cleanup::step`]: a running Cleanup task's plan written
//! before any Job, its node Jobs read back, each cleaned node recorded on its member Service
//! before the task says so, the next Jobs created within the bounds.

use std::collections::BTreeMap;

use jiff::Timestamp;
use kube::{Api, ResourceExt};

use groundskeeper_protocol::{OperationKind, keys};

use super::{NOT_SUPPORTED, Target, owner_of, step_job_name, step_of, task_jobs, task_label, write_status};
use crate::api::maintenance_task::{MaintenanceTask, MaintenanceTaskStatus, NodeProgress};
use crate::api::scylla::ScyllaCluster;
use crate::execution::{self, JobObservation, JobState};
use crate::results::scylla_cleanup as record;
use crate::runtime::context::Context;
use crate::runtime::error::Result;
use crate::targets::scylla::{self as scylla, NodeCleanup};
use crate::tasks::cleanup::{End, Holds, NODE_NOT_FOUND, NodeJob, step_holding};
use crate::tasks::status::{complete, fail, progress_of};
use crate::tasks::validate::{Cleanup, Work, describe_errors, validate};
use crate::triggers::scylla_cleanup::apply::patch_ownership_record;
use crate::triggers::scylla_cleanup::coexistence::{NodeHashes, cleaned_while_waiting, held_nodes};
use crate::triggers::scylla_cleanup::decide::{ClusterFacts, MemberFacts, settled_record};
use crate::triggers::scylla_cleanup::observe as scylla_observe;
use crate::triggers::scylla_cleanup::observe::fill_pod_addresses;
use crate::triggers::scylla_cleanup::ownership::RingView;
use crate::triggers::scylla_cleanup::ownership_reader::read_cluster_views;

/// One step forward for a running Cleanup task.
pub(super) async fn advance(
    ctx: &Context,
    task: &MaintenanceTask,
    mut status: MaintenanceTaskStatus,
    target: &Target,
    now: Timestamp,
) -> Result<MaintenanceTaskStatus> {
    let generation = task.metadata.generation;
    let Target::Scylla(Some(scylla)) = target else {
        return Ok(fail(
            status,
            NOT_SUPPORTED,
            "a Cleanup task cleans a ScyllaCluster",
            generation,
            now,
        ));
    };
    let (cluster, facts, members) = (&scylla.cluster, &scylla.facts, &scylla.members);
    let cleanup = match validate(task).map(|valid| valid.work) {
        Ok(Work::Cleanup(cleanup)) => cleanup,
        Ok(_) => {
            return Ok(fail(
                status,
                NOT_SUPPORTED,
                "only a Cleanup task runs on a ScyllaCluster",
                generation,
                now,
            ));
        }
        Err(errors) => {
            return Ok(fail(
                status,
                NOT_SUPPORTED,
                &describe_errors(&errors),
                generation,
                now,
            ));
        }
    };
    if status.nodes.is_empty() {
        match scylla::plan_nodes(&cleanup, facts, members) {
            Ok(nodes) if nodes.is_empty() => {
                return Ok(complete(
                    status,
                    "the cluster has no node to clean",
                    generation,
                    now,
                ));
            }
            Ok(nodes) => {
                // The plan is written before any Job exists: a restart finds the same nodes.
                let planned = MaintenanceTaskStatus {
                    progress: progress_of(&nodes),
                    nodes,
                    ..status.clone()
                };
                let api: Api<MaintenanceTask> = Api::namespaced(ctx.client.clone(), &facts.namespace);
                write_status(&api, task, &status, &planned).await?;
                status = planned;
            }
            Err(why) => return Ok(fail(status, NODE_NOT_FOUND, &why, generation, now)),
        }
    }
    let jobs = task_jobs(ctx, task).await?;
    let node_jobs = node_jobs(&jobs);
    let racks = scylla::racks(members);
    let name = task.name_any();
    // scylla-operator's own cleanup: a node it cleans or is about to clean waits (read only).
    let operator_jobs =
        scylla_observe::list_operator_cleanup_jobs(&ctx.client, &facts.namespace, &facts.name).await?;
    let operator = scylla_observe::operator_cleanup(facts, &operator_jobs);
    let held = held_nodes(
        &operator,
        members
            .iter()
            .map(|m| (m.service.as_str(), NodeHashes::of(&m.annotations))),
    );
    let cleaned_by_other = status
        .nodes
        .iter()
        .filter(|n| !held.contains_key(&n.name))
        .filter(|n| {
            members.iter().any(|m| {
                m.service == n.name
                    && cleaned_while_waiting(n.waited_for_ring.as_deref(), NodeHashes::of(&m.annotations))
            })
        })
        .map(|n| n.name.clone())
        .collect();
    let holds = Holds {
        held,
        cleaned_by_other,
    };
    let pass = step_holding(
        status.nodes.clone(),
        &node_jobs,
        &racks,
        scylla::limits(&cleanup, facts),
        &holds,
        |index| step_job_name(&name, index),
        now,
    );
    // Read once per pass, and only when a node finished.
    let mut views = None;
    for &index in &pass.succeeded {
        let node = &pass.nodes[index];
        let job = node.job.as_deref().unwrap_or_default();
        let job_hash = jobs
            .iter()
            .find(|j| j.name == job)
            .and_then(|j| j.annotations.get(keys::CLEANUP_TOKEN_RING_HASH));
        let member = members.iter().find(|m| m.service == node.name);
        let settled = settled_record(facts, members);
        // Where scylla-operator cleans too, last-cleaned is its to write: a node of ours started
        // only when it was clean for its ring, so there is nothing to record anyway.
        let recorded = member.filter(|_| operator.active.is_none()).and_then(|m| {
            let current = m.annotations.get(keys::CURRENT_TOKEN_RING_HASH);
            let last = m.annotations.get(keys::LAST_CLEANED_UP_TOKEN_RING_HASH);
            record::cleaned_record(
                job_hash.map(String::as_str),
                current.map(String::as_str),
                last.map(String::as_str),
                settled.as_ref(),
            )
        });
        let last_cleaned = recorded.as_ref().map(|(hash, _)| hash.clone()).or_else(|| {
            member.and_then(|m| m.annotations.get(keys::LAST_CLEANED_UP_TOKEN_RING_HASH).cloned())
        });
        record::node_cleaned(ctx, cluster, &node.name, job, recorded).await?;
        if let Some(member) = member {
            let views = views.get_or_insert(read_views(ctx, cluster, facts, members).await);
            let cleaned = Cleaned {
                job_hash,
                last_cleaned: last_cleaned.as_deref(),
            };
            record_ownership_after_cleanup(ctx, facts, member, cleaned, node, views).await?;
        }
        ctx.metrics
            .job_finished(OperationKind::Cleanup.as_str(), "succeeded");
    }
    for &index in &pass.failed {
        let node = &pass.nodes[index];
        let message = node.message.as_deref().unwrap_or("failed");
        record::node_failed(
            ctx,
            cluster,
            &node.name,
            node.job.as_deref().unwrap_or("?"),
            message,
        )
        .await;
        ctx.metrics
            .job_finished(OperationKind::Cleanup.as_str(), "failed");
    }
    for &index in &pass.start {
        create_node_job(
            ctx,
            task,
            cluster,
            members,
            &cleanup,
            &pass.nodes[index].name,
            index,
        )
        .await?;
    }
    status.nodes = pass.nodes;
    status.progress = progress_of(&status.nodes);
    Ok(match pass.end {
        None => status,
        Some(End::Completed { summary }) => complete(status, &summary, generation, now),
        Some(End::Failed { code, description }) => fail(status, code, &description, generation, now),
    })
}

/// The cluster's ring views, read through a node's agent, for the ownership records.
async fn read_views(
    ctx: &Context,
    cluster: &ScyllaCluster,
    facts: &ClusterFacts,
    members: &[MemberFacts],
) -> (Result<Vec<RingView>, String>, Vec<MemberFacts>) {
    let mut members = members.to_vec();
    if let Err(err) = fill_pod_addresses(&ctx.client, cluster, &mut members).await {
        return (Err(err.to_string()), members);
    }
    let views = read_cluster_views(ctx, &facts.namespace, &facts.name, &members).await;
    (views, members)
}

/// A node's succeeded cleanup: the ring its Job cleaned for, and the node's `last-cleaned-…` once
/// the cleanup is recorded.
struct Cleaned<'a> {
    job_hash: Option<&'a String>,
    last_cleaned: Option<&'a str>,
}

/// Writes what a node owned when its cleanup succeeded, only while its ring is still the one the
/// Job cleaned for: after a ring change, the record stays as it was and the ring-hash rule or the
/// next ownership decision sees the change.
async fn record_ownership_after_cleanup(
    ctx: &Context,
    facts: &ClusterFacts,
    member: &MemberFacts,
    Cleaned {
        job_hash,
        last_cleaned,
    }: Cleaned<'_>,
    node: &NodeProgress,
    (views, addressed): &(Result<Vec<RingView>, String>, Vec<MemberFacts>),
) -> Result<()> {
    let current = member.annotations.get(keys::CURRENT_TOKEN_RING_HASH);
    let member = addressed
        .iter()
        .find(|m| m.service == member.service)
        .unwrap_or(member);
    let value = match record::ownership_after_cleanup(
        views,
        member,
        job_hash,
        current,
        &node.keyspaces_cleaned,
        last_cleaned,
    ) {
        Ok(value) => value,
        Err(why) => {
            tracing::info!(namespace = %facts.namespace, node = %member.service, "ownership record left as it was: {why}");
            return Ok(());
        }
    };
    patch_ownership_record(&ctx.client, &facts.namespace, &member.service, &value).await
}

/// Each node's Job (by the step label: the node's index) as the pure step reads it.
fn node_jobs(jobs: &[JobObservation]) -> BTreeMap<usize, (String, NodeJob)> {
    jobs.iter()
        .filter_map(|job| Some((step_of(job)?, (job.name.clone(), node_job(job)))))
        .collect()
}

fn node_job(job: &JobObservation) -> NodeJob {
    match &job.state {
        JobState::Running(_) => NodeJob::Running,
        JobState::Succeeded(finished) => {
            let keyspaces = finished
                .result
                .as_ref()
                .map(record::keyspaces_cleaned)
                .unwrap_or_default();
            let message = finished
                .result
                .as_ref()
                .ok()
                .and_then(|r| r.message.clone())
                .unwrap_or_else(|| "cleaned".to_owned());
            NodeJob::Succeeded { keyspaces, message }
        }
        JobState::Failed(finished) => NodeJob::Failed {
            message: finished.explanation(),
            retryable: finished.retryable(),
        },
    }
}

async fn create_node_job(
    ctx: &Context,
    task: &MaintenanceTask,
    cluster: &ScyllaCluster,
    members: &[MemberFacts],
    cleanup: &Cleanup,
    service: &str,
    index: usize,
) -> Result<()> {
    let owner = owner_of(task)?;
    let member = members.iter().find(|m| m.service == service);
    let work = cleanup.work_of(service);
    let job = scylla::cleanup_job(
        cluster,
        &ctx.config,
        NodeCleanup {
            job: step_job_name(&task.name_any(), index),
            owner,
            service: service.to_owned(),
            rack: member.and_then(|m| m.rack.clone()).unwrap_or_default(),
            ring_hash: member.and_then(|m| m.annotations.get(keys::CURRENT_TOKEN_RING_HASH).cloned()),
            keyspaces: work.keyspaces,
            mark_node_clean: work.mark_node_clean,
            labels: BTreeMap::from([
                (keys::TASK_LABEL.to_owned(), task_label(task)),
                (keys::TASK_STEP_LABEL.to_owned(), index.to_string()),
            ]),
        },
    );
    if execution::create_job(&ctx.client, &job).await?.is_new() {
        ctx.metrics.job_created(job.operation.kind().as_str());
        tracing::info!(task = %task.name_any(), job = %job.name, node = service, "created the cleanup Job of a task's node");
    }
    Ok(())
}
