//! What a Cleanup MaintenanceTask means on a ScyllaCluster ([`ScyllaTarget`], the task
//! controller's view of this kind of target): whether the cluster may take one now, which nodes a
//! task cleans and in which order, which may start within the per-rack and per-cluster bounds,
//! and the thin layer around [`super::node_steps::step_holding`] that carries a running task
//! forward: its plan written before any Job, its node Jobs read back, each cleaned node recorded
//! on its member Service before the task says so, the next Jobs created within the bounds.

use std::collections::{BTreeMap, BTreeSet};

use futures::future::BoxFuture;
use jiff::Timestamp;
use kube::{Api, ResourceExt};

use groundskeeper_api::maintenance_task::{
    MaintenanceTask, MaintenanceTaskStatus, NodeProgress, NodeState, TargetKind,
};
use groundskeeper_api::scylla::ScyllaCluster;
use groundskeeper_api::scylla::coexistence::{Hold, NodeHashes, cleaned_while_waiting, held_nodes};
use groundskeeper_api::scylla::facts::{
    ClusterFacts, MemberFacts, cluster_facts, current_members, operator_cleanup, precondition_failures,
    topology_change,
};
use groundskeeper_api::validate::{Cleanup, Work, describe_errors};
use groundskeeper_protocol::{OperationKind, keys};

use super::apply::patch_ownership_record;
use super::decide::owned_by;
use super::decide::secret_wait;
use super::job::create_node_job;
use super::members_record::settled_record;
use super::model::{NODE_NOT_FOUND, SecretState};
use super::node_steps::{End, Holds, NodeJob, step_holding};
use super::observe::{
    fill_pod_addresses, list_member_services, list_operator_cleanup_jobs, read_datacenter_conditions,
    read_secret_state,
};
use super::ownership::{NodeDecision, OWNED_AT_LAST_CLEANUP, RecordState, RingView, decide_node};
use super::ownership_reader::read_cluster_views;
use super::record;
use super::settings::cluster_limits;
use crate::jobs::{self, JobObservation, JobState};
use crate::runtime::context::Context;
use crate::runtime::error::{Error, Result};
use crate::tasks::TargetFacts;
use crate::tasks::checked::CheckedTask;
use crate::tasks::controller::write_status;
use crate::tasks::lifecycle::waits_for_window;
use crate::tasks::status::{complete, fail, note_running, progress_of};
use crate::tasks::step_jobs::{NOT_SUPPORTED, step_job_name, step_of, task_jobs};
use crate::tasks::target::{ReadTarget, Target};
use groundskeeper_api::plan::{cleanup_nodes, fits_window, node_cleanup_estimate};
pub use groundskeeper_api::scylla::limits::limits;

/// Whether a cleanup may start on the cluster: the same preconditions as the automatic cleanup
/// (`docs/protocol.md`, "Scylla"), the agent token Secret, and readable concurrency annotations.
pub fn facts(cluster: Option<&ClusterFacts>, secret: &SecretState) -> TargetFacts {
    let Some(cluster) = cluster else {
        return TargetFacts::Missing;
    };
    let mut waiting = precondition_failures(cluster);
    if let Err(problems) = cluster_limits(cluster) {
        waiting.extend(problems.into_iter().map(|p| format!("waiting for a fix: {p}")));
    }
    waiting.extend(secret_wait(&cluster.namespace, secret));
    if waiting.is_empty() {
        TargetFacts::Ready
    } else {
        TargetFacts::Waiting {
            reason: format!("ScyllaCluster {}/{}: {}", cluster.namespace, cluster.name, waiting.join("; ")),
        }
    }
}

/// The nodes a task cleans ([`cleanup_nodes`]), each `Pending`. `Err` names a node that is not
/// a member.
pub(crate) fn plan_nodes(
    cleanup: &Cleanup,
    cluster: &ClusterFacts,
    members: &[MemberFacts],
) -> Result<Vec<NodeProgress>, String> {
    Ok(cleanup_nodes(cleanup, cluster, members)?
        .into_iter()
        .map(|m| NodeProgress {
            name: m.service.clone(),
            state: NodeState::Pending,
            ..NodeProgress::default()
        })
        .collect())
}

/// The rack of every member: (datacenter, rack).
pub fn racks(members: &[MemberFacts]) -> BTreeMap<String, (String, String)> {
    members
        .iter()
        .filter_map(|m| Some((m.service.clone(), (m.datacenter.clone()?, m.rack.clone()?))))
        .collect()
}

/// The task controller's view of ScyllaClusters.
pub struct ScyllaTarget;

impl Target for ScyllaTarget {
    fn kind(&self) -> TargetKind {
        TargetKind::ScyllaCluster
    }

    fn read<'a>(
        &'a self,
        ctx: &'a Context,
        task: &'a MaintenanceTask,
    ) -> BoxFuture<'a, Result<Box<dyn ReadTarget>>> {
        Box::pin(async move { Ok(Box::new(ReadCluster::read(ctx, task).await?) as Box<dyn ReadTarget>) })
    }

    /// A ScyllaCluster's change wakes its unfinished tasks at once: a scale asked for stops the
    /// running cleanups within moments, not at the next requeue.
    fn wake_tasks_on_change(
        &self,
        controller: kube::runtime::Controller<MaintenanceTask>,
        ctx: &Context,
        namespace: Option<&str>,
        tasks: kube::runtime::reflector::Store<MaintenanceTask>,
    ) -> kube::runtime::Controller<MaintenanceTask> {
        let clusters = crate::runtime::scope::api::<ScyllaCluster>(&ctx.client, namespace);
        controller.watches(
            clusters,
            kube::runtime::watcher::Config::default(),
            move |cluster: ScyllaCluster| {
                crate::tasks::target::unfinished_tasks_of(
                    &tasks,
                    &TargetKind::ScyllaCluster,
                    cluster.namespace().as_deref(),
                    &cluster.name_any(),
                )
            },
        )
    }
}

/// A ScyllaCluster as the task controller read it; `None`: no such ScyllaCluster.
struct ReadCluster {
    found: Option<Box<ClusterView>>,
}

/// A ScyllaCluster with what the cleanup trigger reads of it: its facts, its member Services and
/// whether its agent token Secret is there.
struct ClusterView {
    cluster: ScyllaCluster,
    facts: ClusterFacts,
    members: Vec<MemberFacts>,
    secret: SecretState,
}

impl ReadCluster {
    async fn read(ctx: &Context, task: &MaintenanceTask) -> Result<Self> {
        let namespace = task.namespace().unwrap_or_default();
        let name = &task.spec.target.name;
        let cluster = Api::<ScyllaCluster>::namespaced(ctx.client.clone(), &namespace)
            .get_opt(name)
            .await
            .map_err(Error::kube(format!("get ScyllaCluster {namespace}/{name}")))?;
        let Some(cluster) = cluster else {
            return Ok(ReadCluster { found: None });
        };
        let services = list_member_services(&ctx.client, &namespace, name).await?;
        let secret = read_secret_state(&ctx.client, &namespace, name).await?;
        let view = ClusterView {
            facts: cluster_facts(&cluster),
            members: current_members(&services),
            cluster,
            secret,
        };
        Ok(ReadCluster { found: Some(Box::new(view)) })
    }
}

impl ReadTarget for ReadCluster {
    fn windows(&self) -> Option<std::result::Result<groundskeeper_api::maintenance_window::Windows, String>> {
        let view = self.found.as_deref()?;
        let object = format!(
            "ScyllaCluster {}/{}",
            view.cluster.namespace().unwrap_or_default(),
            view.cluster.name_any()
        );
        groundskeeper_api::maintenance_window::windows_from_annotations(view.cluster.annotations(), &object)
    }

    fn plan(&self, task: &CheckedTask) -> std::result::Result<groundskeeper_api::plan::TaskPlan, String> {
        let view = self
            .found
            .as_deref()
            .ok_or_else(|| format!("ScyllaCluster {} does not exist", task.spec.target.name))?;
        let cleanup = match task.valid().map(|valid| &valid.work) {
            Ok(Work::Cleanup(cleanup)) => cleanup,
            Ok(_) => return Err("only a Cleanup task runs on a ScyllaCluster".to_owned()),
            Err(errors) => return Err(describe_errors(errors)),
        };
        groundskeeper_api::plan::cleanup_plan(cleanup, &view.facts, &view.members)
    }

    fn facts(&self) -> TargetFacts {
        match &self.found {
            Some(view) => facts(Some(&view.facts), &view.secret),
            None => TargetFacts::Missing,
        }
    }

    fn start_blocker<'a>(
        &'a self,
        _: &'a Context,
        _: &'a CheckedTask,
    ) -> BoxFuture<'a, Result<Option<crate::tasks::target::StartBlock>>> {
        Box::pin(async { Ok(None) })
    }

    fn advance<'a>(
        &'a self,
        ctx: &'a Context,
        task: &'a CheckedTask,
        status: MaintenanceTaskStatus,
        now: Timestamp,
    ) -> BoxFuture<'a, Result<MaintenanceTaskStatus>> {
        Box::pin(advance(ctx, task, status, self, now))
    }

    /// A Cleanup records each node on its member Service as it goes ([`super::record`]): nothing
    /// is left to write when it ends.
    fn record_outcome<'a>(
        &'a self,
        _: &'a Context,
        _: &'a CheckedTask,
        _: &'a MaintenanceTaskStatus,
        _: Timestamp,
    ) -> BoxFuture<'a, Result<()>> {
        Box::pin(async { Ok(()) })
    }
}

/// One step forward for a running Cleanup task.
async fn advance(
    ctx: &Context,
    task: &CheckedTask,
    mut status: MaintenanceTaskStatus,
    target: &ReadCluster,
    now: Timestamp,
) -> Result<MaintenanceTaskStatus> {
    let generation = task.metadata.generation;
    let Some(scylla) = &target.found else {
        return Ok(fail(status, NOT_SUPPORTED, "a Cleanup task cleans a ScyllaCluster", generation, now));
    };
    let (cluster, facts, members) = (&scylla.cluster, &scylla.facts, &scylla.members);
    let cleanup = match task.valid().map(|valid| &valid.work) {
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
            return Ok(fail(status, NOT_SUPPORTED, &describe_errors(errors), generation, now));
        }
    };
    if status.nodes.is_empty() {
        match plan_nodes(cleanup, facts, members) {
            Ok(nodes) if nodes.is_empty() => {
                return Ok(complete(status, "the cluster has no node to clean", generation, now));
            }
            Ok(nodes) => {
                // The plan is written before any Job exists: a restart finds the same nodes.
                let planned =
                    MaintenanceTaskStatus { progress: progress_of(&nodes), nodes, ..status.clone() };
                let api: Api<MaintenanceTask> = Api::namespaced(ctx.client.clone(), &facts.namespace);
                write_status(&api, task, &status, &planned).await?;
                status = planned;
            }
            Err(why) => return Ok(fail(status, NODE_NOT_FOUND, &why, generation, now)),
        }
    }
    let jobs = task_jobs(ctx, task).await?;
    let mut node_jobs = node_jobs(&jobs);
    let racks = racks(members);
    let name = task.name_any();
    // scylla-operator's own cleanup: a node it cleans or is about to clean waits (read only).
    let operator_jobs = list_operator_cleanup_jobs(&ctx.client, &facts.namespace, &facts.name).await?;
    let datacenter = read_datacenter_conditions(&ctx.client, &facts.namespace, &facts.name).await?;
    let operator = operator_cleanup(facts, &datacenter, &operator_jobs);
    let mut held =
        held_nodes(&operator, members.iter().map(|m| (m.service.as_str(), NodeHashes::of(&m.annotations))));
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
    let (no_longer_owed, left) = yield_and_fit(
        ctx,
        CleanupPass { task, cluster, facts, target, cleanup, members, now },
        &mut status,
        &mut node_jobs,
        &mut held,
    )
    .await?;
    let holds = Holds { held, cleaned_by_other, no_longer_owed };
    let pass = step_holding(
        status.nodes.clone(),
        &node_jobs,
        &racks,
        limits(cleanup, facts),
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
        // Recorded beside scylla-operator too: the node is clean for the Job's ring, and
        // scylla-operator, reading the same annotation, then owes it no second cleanup. (Once
        // scylla-operator is seen, a node starts only when clean for its ring, and nothing is
        // written; this is for a node that started before it was seen.)
        let recorded = member.and_then(|m| {
            let current = m.annotations.get(keys::CURRENT_TOKEN_RING_HASH);
            let last = m.annotations.get(keys::LAST_CLEANED_UP_TOKEN_RING_HASH);
            // Beside scylla-operator only the current ring is written: an older one could
            // overwrite the current ring scylla-operator has just recorded after its own Job.
            if operator.active.is_some() && job_hash != current {
                return None;
            }
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
        if let (Some(member), Some(sample)) = (member, cleanup_sample(&jobs, job)) {
            record::cleanup_sample(ctx, &facts.namespace, member, sample, job).await;
        }
        // Exit 0 says every keyspace the Job was given is clean: the ring is recorded above. What
        // it cleaned keyspace by keyspace is in its result only; unread, the ownership record
        // stays as it was (at worst a keyspace is cleaned again later, never missed).
        if let Some(why) = unreadable_result(&jobs, job) {
            tracing::warn!(node = %node.name, job, "ownership record left as it was: the Job's result cannot be read: {why}");
        } else if let Some(member) = member {
            let views = views.get_or_insert(read_views(ctx, cluster, facts, members).await);
            let cleaned = Cleaned { job_hash, last_cleaned: last_cleaned.as_deref() };
            record_ownership_after_cleanup(ctx, facts, member, cleaned, node, views).await?;
        }
        ctx.metrics.job_finished(OperationKind::Cleanup.as_str(), "succeeded");
    }
    for &index in &pass.failed {
        let node = &pass.nodes[index];
        let message = node.message.as_deref().unwrap_or("failed");
        record::node_failed(ctx, cluster, &node.name, node.job.as_deref().unwrap_or("?"), message).await;
        ctx.metrics.job_finished(OperationKind::Cleanup.as_str(), "failed");
    }
    for &index in &pass.start {
        create_node_job(ctx, task, cluster, members, cleanup, &pass.nodes[index].name, index).await?;
    }
    status.nodes = pass.nodes;
    status.progress = progress_of(&status.nodes);
    status.left_for_next_window = (left > 0).then(|| i32::try_from(left).unwrap_or(i32::MAX));
    if left > 0 && pass.end.is_none() {
        let pending = status.nodes.iter().filter(|n| n.state == NodeState::Pending).count();
        let why = status
            .nodes
            .iter()
            .find(|n| n.state == NodeState::Pending)
            .and_then(|n| n.message.clone())
            .unwrap_or_default();
        let line = format!(
            "{} of {} node(s) done; {left} of the {pending} pending left for the next maintenance \
             window (first: {why})",
            status.nodes.iter().filter(|n| n.state.is_finished()).count(),
            status.nodes.len()
        );
        status = note_running(status, &line, now);
    }
    Ok(match pass.end {
        None => status,
        Some(End::Completed { summary }) => complete(status, &summary, generation, now),
        Some(End::Failed { code, description }) => fail(status, code, &description, generation, now),
    })
}

/// One pass over a running Cleanup task, as [`yield_and_fit`] reads it.
struct CleanupPass<'a> {
    task: &'a MaintenanceTask,
    cluster: &'a ScyllaCluster,
    facts: &'a ClusterFacts,
    target: &'a ReadCluster,
    cleanup: &'a Cleanup,
    members: &'a [MemberFacts],
    now: Timestamp,
}

/// What keeps pending nodes from starting in this pass besides scylla-operator, added to `held`:
/// a topology change (which also stops the running ones, see [`yield_to_topology`]) and the
/// maintenance window ([`left_for_next_window`]). Returns the interrupted nodes the new ring owes
/// nothing, and how many nodes were left for the next window.
async fn yield_and_fit(
    ctx: &Context,
    pass: CleanupPass<'_>,
    status: &mut MaintenanceTaskStatus,
    node_jobs: &mut BTreeMap<usize, (String, NodeJob)>,
    held: &mut BTreeMap<String, Hold>,
) -> Result<(BTreeSet<String>, usize)> {
    let CleanupPass { task, cluster, facts, target, cleanup, members, now } = pass;
    let topology = topology_change(facts, members.len());
    if let Some(why) = &topology {
        yield_to_topology(ctx, task, cluster, status, node_jobs, why, now).await?;
        for node in status.nodes.iter().filter(|n| n.state == NodeState::Pending) {
            let interrupted = match node.interruptions {
                0 => String::new(),
                n => format!("interrupted ({n}×) and "),
            };
            let why = format!("{interrupted}waits: {why}; it starts once the cluster settles, if still owed");
            held.entry(node.name.clone()).or_insert(Hold { why, ring: None });
        }
    }
    if topology.is_none() {
        hold_until_stopped_pods_ended(status, held, now);
    }
    let no_longer_owed = match topology {
        None if is_automatic(task) => {
            let mut owed_nothing = no_longer_owed(&status.nodes, cleanup, members);
            owed_nothing
                .extend(lost_nothing_since(ctx, cluster, facts, &status.nodes, cleanup, members).await);
            owed_nothing
        }
        _ => BTreeSet::new(),
    };
    // Skipped at once: a node owed nothing has no stopped pod's grace period to wait out.
    held.retain(|node, _| !no_longer_owed.contains(node));
    let deferred = if waits_for_window(task) {
        left_for_next_window(
            target,
            status,
            members,
            |node| held.contains_key(node) || no_longer_owed.contains(node),
            now,
        )
    } else {
        BTreeMap::new()
    };
    let left = deferred.len();
    held.extend(deferred);
    Ok((no_longer_owed, left))
}

/// Stops the task's running cleanups so that a topology change is not held up (in ScyllaDB a
/// cleanup blocks a bootstrap or decommission of its node until it ends): each running node's
/// Job is deleted (its pod gets SIGTERM, on which the runner stops the cleanup on the node: task
/// abort, then `stop_compaction`), and the node goes back to pending, interrupted: neither
/// failed nor clean.
async fn yield_to_topology(
    ctx: &Context,
    task: &MaintenanceTask,
    cluster: &ScyllaCluster,
    status: &mut MaintenanceTaskStatus,
    node_jobs: &mut BTreeMap<usize, (String, NodeJob)>,
    why: &str,
    now: Timestamp,
) -> Result<()> {
    let namespace = task.namespace().unwrap_or_default();
    let running: Vec<usize> =
        node_jobs.iter().filter(|(_, (_, job))| *job == NodeJob::Running).map(|(index, _)| *index).collect();
    for index in running {
        let Some((job, _)) = node_jobs.remove(&index) else { continue };
        jobs::delete_job(&ctx.client, &namespace, &job).await?;
        let Some(node) = status.nodes.get_mut(index) else { continue };
        node.state = NodeState::Pending;
        node.started_at = None;
        node.interruptions += 1;
        node.interrupted_at = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now));
        node.message = Some(format!(
            "interrupted: {why}; its cleanup (Job {job}) was stopped so as not to hold the change up, \
             and runs again once the cluster settles if the node is still owed one"
        ));
        tracing::info!(task = %task.name_any(), node = %node.name, %job, "stopped a node's cleanup for a topology change: {why}");
        record::node_interrupted(ctx, cluster, &node.name, &job, why).await;
    }
    Ok(())
}

/// Holds an interrupted node until its stopped pod has surely ended (its termination grace
/// period after it was stopped): the stopped runner's last calls on the node (`abort_task`,
/// `stop_compaction?type=CLEANUP`, which stops every cleanup there) must not stop the new one.
fn hold_until_stopped_pods_ended(
    status: &MaintenanceTaskStatus,
    held: &mut BTreeMap<String, Hold>,
    now: Timestamp,
) {
    let grace = jiff::SignedDuration::from_secs(
        groundskeeper_protocol::exit::TERMINATION_GRACE_PERIOD_SECONDS as i64,
    );
    for node in status.nodes.iter().filter(|n| n.state == NodeState::Pending) {
        let Some(until) = node.interrupted_at.as_ref().and_then(|at| at.0.checked_add(grace).ok()) else {
            continue;
        };
        if now < until {
            let why = format!(
                "interrupted ({}×); starts again once its stopped cleanup's pod has surely ended (at {until}), \
                 so that the stopped runner's last calls on the node cannot stop the new cleanup",
                node.interruptions
            );
            held.entry(node.name.clone()).or_insert(Hold { why, ring: None });
        }
    }
}

/// Nodes of an automatic task interrupted by a topology change that the new ring owes nothing:
/// cleaned for their current ring since (their last-cleaned hash is their current one). Nodes
/// whose keyspaces the ownership rule chose are left to run: their work does not follow from the
/// ring hash.
fn no_longer_owed(nodes: &[NodeProgress], cleanup: &Cleanup, members: &[MemberFacts]) -> BTreeSet<String> {
    nodes
        .iter()
        .filter(|n| {
            n.state == NodeState::Pending && n.interruptions > 0 && !cleanup.per_node.contains_key(&n.name)
        })
        .filter(|n| {
            members.iter().any(|m| {
                let current = m.annotations.get(keys::CURRENT_TOKEN_RING_HASH);
                m.service == n.name
                    && current.is_some()
                    && current == m.annotations.get(keys::LAST_CLEANED_UP_TOKEN_RING_HASH)
            })
        })
        .map(|n| n.name.clone())
        .collect()
}

/// Interrupted nodes of an automatic task whose keyspaces the ownership rule chose, that the new
/// ring owes nothing: by their ownership record they replicate again every range of those
/// keyspaces they held (a scale-out undone by a scale-in before their cleanup ended). Ring views
/// are read only when there is such a node; unread or unknown, the node runs.
async fn lost_nothing_since(
    ctx: &Context,
    cluster: &ScyllaCluster,
    facts: &ClusterFacts,
    nodes: &[NodeProgress],
    cleanup: &Cleanup,
    members: &[MemberFacts],
) -> BTreeSet<String> {
    let interrupted: Vec<&NodeProgress> = nodes
        .iter()
        .filter(|n| {
            n.state == NodeState::Pending && n.interruptions > 0 && cleanup.per_node.contains_key(&n.name)
        })
        .collect();
    if interrupted.is_empty() {
        return BTreeSet::new();
    }
    let (views, members) = read_views(ctx, cluster, facts, members).await;
    interrupted
        .into_iter()
        .filter(|node| {
            let Some(member) = members.iter().find(|m| m.service == node.name) else {
                return false;
            };
            let record = RecordState::from_annotation(
                member.annotations.get(OWNED_AT_LAST_CLEANUP).map(String::as_str),
            );
            let now = owned_by(&views, member);
            let NodeDecision::Ownership { clean, fallback } =
                decide_node(&record, now.as_ref().map_err(String::as_str))
            else {
                return false;
            };
            // The keyspaces it was to clean (none named: all) are all known, and none lost.
            let chosen = &cleanup.per_node[&node.name].keyspaces;
            let concerned = |k: &String| chosen.is_empty() || chosen.contains(k);
            !clean.keys().any(concerned) && !fallback.keys().any(concerned)
        })
        .map(|node| node.name.clone())
        .collect()
}

fn is_automatic(task: &MaintenanceTask) -> bool {
    task.labels().get(keys::ORIGIN_LABEL).map(String::as_str) == Some(keys::ORIGIN_AUTOMATIC)
}

/// The pending nodes (but those `decided_already`: held, or skipped as no longer owed) that may
/// not start now because the maintenance window is closed or would close before their expected
/// end (from each node's own cleanup history), with why. A node
/// expected to take longer than the whole window starts as the first thing in one; nodes that
/// run are never stopped by a window closing.
fn left_for_next_window(
    target: &ReadCluster,
    status: &MaintenanceTaskStatus,
    members: &[MemberFacts],
    decided_already: impl Fn(&str) -> bool,
    now: Timestamp,
) -> BTreeMap<String, Hold> {
    // Windows that cannot be read start nothing new; the task controller says why.
    let Some(windows) = target.windows() else {
        return BTreeMap::new();
    };
    let state = windows.as_ref().map(|w| w.state_at(now));
    let nothing_since = |opened: Timestamp| {
        !status
            .nodes
            .iter()
            .any(|n| n.state == NodeState::Running || n.started_at.as_ref().is_some_and(|t| t.0 >= opened))
    };
    let mut deferred = BTreeMap::new();
    for node in status.nodes.iter().filter(|n| n.state == NodeState::Pending && !decided_already(&n.name)) {
        let annotations = members
            .iter()
            .find(|m| m.service == node.name)
            .map(|m| m.annotations.clone())
            .unwrap_or_default();
        let expected = node_cleanup_estimate(&annotations);
        let why = match (&state, &windows) {
            (Ok(state), Ok(windows)) => {
                fits_window(state, now, expected.seconds, nothing_since, |at| windows.local(at)).err()
            }
            (_, Err(why)) => Some(format!("waits: the maintenance windows cannot be read: {why}")),
            (Err(_), Ok(_)) => None,
        };
        if let Some(why) = why {
            let why = format!("{why} (expected from {})", expected.from);
            deferred
                .insert(node.name.clone(), groundskeeper_api::scylla::coexistence::Hold { why, ring: None });
        }
    }
    deferred
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
    Cleaned { job_hash, last_cleaned }: Cleaned<'_>,
    node: &NodeProgress,
    (views, addressed): &(Result<Vec<RingView>, String>, Vec<MemberFacts>),
) -> Result<()> {
    let current = member.annotations.get(keys::CURRENT_TOKEN_RING_HASH);
    let member = addressed.iter().find(|m| m.service == member.service).unwrap_or(member);
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
    jobs.iter().filter_map(|job| Some((step_of(job)?, (job.name.clone(), node_job(job))))).collect()
}

/// How long the cleanup of succeeded Job `name` took and how much data its node held, from its
/// result; `None` when the result cannot be read or the node had nothing to clean.
fn cleanup_sample(jobs: &[JobObservation], name: &str) -> Option<groundskeeper_api::plan::WorkSample> {
    let JobState::Succeeded(finished) = &jobs.iter().find(|j| j.name == name)?.state else {
        return None;
    };
    let result = finished.result.as_ref().ok()?;
    let groundskeeper_protocol::Report::Cleanup(report) = &result.report else {
        return None;
    };
    (result.outcome == groundskeeper_protocol::Outcome::Succeeded).then(|| {
        groundskeeper_api::plan::WorkSample {
            bytes: report.load_bytes,
            seconds: result.duration_ms as f64 / 1000.0,
        }
    })
}

/// Why the result of succeeded Job `name` cannot be read, if it cannot.
fn unreadable_result(jobs: &[JobObservation], name: &str) -> Option<String> {
    match &jobs.iter().find(|j| j.name == name)?.state {
        JobState::Succeeded(finished) => finished.result.as_ref().err().map(ToString::to_string),
        _ => None,
    }
}

fn node_job(job: &JobObservation) -> NodeJob {
    match &job.state {
        JobState::Running(_) => NodeJob::Running,
        JobState::Succeeded(finished) => match &finished.result {
            Ok(result) => NodeJob::Succeeded {
                keyspaces: record::keyspaces_cleaned(result),
                message: result.message.clone().unwrap_or_else(|| "cleaned".to_owned()),
            },
            // The runner's exit code is the outcome; the result only its details.
            Err(why) => NodeJob::Succeeded {
                keyspaces: Vec::new(),
                message: format!("cleaned (the Job succeeded), but which keyspaces is not known: {why}"),
            },
        },
        JobState::Failed(finished) => {
            NodeJob::Failed { message: finished.explanation(), retryable: finished.retryable() }
        }
    }
}

#[cfg(test)]
mod tests;
