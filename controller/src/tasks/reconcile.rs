//! The task controller: the thin layer around the pure queue and lifecycle. One reconciliation
//! looks at one task's target: it reads every task of that target and the target itself, decides
//! (see [`super::lifecycle::decide`]), writes the statuses that changed, and carries the running
//! task's work forward one step: create the Job of its next step, or read its finished Jobs back
//! into the task's status.
//!
//! Restart safety comes from what is read, not remembered: a task is InProgress before any Job
//! of it exists (its status is written first), its Jobs have deterministic names and carry the
//! task's name and step in labels, and its result is read from the Jobs each time, so a
//! controller that stops at any point finds the same Jobs again and makes none twice.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Api, Resource, ResourceExt};

use groundskeeper_protocol::{Operation, keys};

use super::lifecycle::{Decision, TargetFacts, TargetPlan, TargetTasks, TaskView, decide};
use super::status::{apply_decision, complete, fail, progress_of};
use super::steps::{StepsState, steps_state};
use super::validate::{ValidTask, Work, validate};
use crate::api::maintenance_task::{
    MaintenanceTask, MaintenanceTaskStatus, NodeProgress, NodeState, SnapshotStatus, TargetKind, TaskState,
};
use crate::api::{EtcdCluster, scylla::ScyllaCluster};
use crate::conditions;
use crate::execution::{self, JobObservation, JobState, bounded_name};
use crate::results;
use crate::runtime::context::Context;
use crate::runtime::error::{Error, Result};
use crate::runtime::reconciler::{self, Reconciler};
use crate::runtime::scope;
use crate::targets;
use crate::targets::etcd::fleet::{self as fleet_slot, FleetTask};
use crate::targets::etcd::{SnapshotNaming, Step};
use crate::triggers::etcd::policy::Policy;
use crate::triggers::etcd::reconcile as etcd_trigger;
use crate::triggers::etcd::reconcile::{EtcdJob, etcd_job, job_limits};
use crate::triggers::scylla_cleanup::coexistence::is_reserved_job_name;
use crate::triggers::scylla_cleanup::decide::{ClusterFacts, MemberFacts, SecretState};
use crate::triggers::scylla_cleanup::observe as scylla_observe;

mod cleanup;

/// This controller's name in metrics and logs.
pub const CONTROLLER: &str = "tasks";
/// `lastErrors[].code` of a task whose step Job failed.
pub const JOB_FAILED: &str = "JobFailed";
/// `lastErrors[].code` of a task whose work this version cannot do on its target.
pub const NOT_SUPPORTED: &str = "NotSupported";

/// Runs the task controller until the process is told to stop.
pub async fn run(ctx: Arc<Context>) {
    scope::in_each_namespace(&ctx, |namespace| run_in(ctx.clone(), namespace)).await;
}

/// The task controller over the tasks of one namespace, or of all for `None`.
async fn run_in(ctx: Arc<Context>, namespace: Option<String>) {
    let tasks = scope::api::<MaintenanceTask>(&ctx.client, namespace.as_deref());
    let jobs = scope::api::<Job>(&ctx.client, namespace.as_deref());
    let ours = format!("{}={}", keys::MANAGED_BY_LABEL, keys::MANAGED_BY);
    let controller = Controller::new(tasks, watcher::Config::default())
        .owns(jobs, watcher::Config::default().labels(&ours));
    reconciler::run(controller, ctx, CONTROLLER, reconcile).await;
}

pub async fn reconcile(
    task: Arc<MaintenanceTask>,
    reconciler: Arc<Reconciler<MaintenanceTask>>,
) -> Result<Action> {
    let _timer = reconciler.ctx.metrics.reconcile_started(CONTROLLER);
    let action = reconcile_at(&task, &reconciler.ctx, Timestamp::now()).await?;
    reconciler.succeeded(&task);
    Ok(action)
}

/// [`reconcile`] with the clock given.
pub async fn reconcile_at(task: &MaintenanceTask, ctx: &Context, now: Timestamp) -> Result<Action> {
    let namespace = task.namespace().unwrap_or_default();
    let api: Api<MaintenanceTask> = Api::namespaced(ctx.client.clone(), &namespace);
    let tasks: Vec<MaintenanceTask> = api
        .list(&ListParams::default())
        .await
        .map_err(Error::kube(format!("list MaintenanceTasks in {namespace}")))?
        .items
        .into_iter()
        .filter(|t| t.spec.target == task.spec.target)
        .collect();
    let mut target = Target::read(ctx, &namespace, task).await?;
    // The fleet bound: reading who holds the fleet's slots and starting this task are one step
    // for the fleet, so two clusters' tasks cannot both see a free slot and both start. Only
    // one controller acts at a time (leader election), so a lock in the process suffices.
    let _fleet_step = match target.fleet() {
        Some(_) => Some(FLEET_STEP.lock().await),
        None => None,
    };
    target.read_fleet_slot(ctx).await?;
    let mut input = TargetTasks {
        target: task.spec.target.clone(),
        facts: target.facts(),
        tasks: tasks.iter().map(|t| TaskView::of(t, now)).collect(),
    };
    let mut plan = decide(&input, now);
    // A task that would start now but has nowhere to write waits, the queue behind it too.
    if let Some(reason) = missing_claim(ctx, &namespace, &tasks, &plan).await? {
        input.facts = TargetFacts::Waiting { reason };
        plan = decide(&input, now);
    }
    record_queued(ctx, &namespace, &input);
    let mut look_again_soon = false;
    for decided in &plan.decisions {
        let Some(task) = tasks.iter().find(|t| t.name_any() == decided.name) else {
            continue;
        };
        look_again_soon |= carry_out(ctx, &api, task, &decided.decision, &target, now).await?;
    }
    let until_requeue = plan
        .requeue_at
        .map(|at| Duration::try_from(at.duration_since(now)).unwrap_or(Duration::from_secs(1)));
    let requeue = match (look_again_soon, until_requeue) {
        (true, Some(wait)) => wait.min(ctx.config.requeue_busy),
        (true, None) => ctx.config.requeue_busy,
        (false, Some(wait)) => wait.min(ctx.config.requeue_idle),
        (false, None) => ctx.config.requeue_idle,
    };
    Ok(Action::requeue(requeue.max(Duration::from_secs(1))))
}

/// Serialises the start of tasks on clusters of a fleet (see [`targets::etcd::fleet`]).
static FLEET_STEP: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// What the task controller read of a task's target.
enum Target {
    Etcd {
        cluster: Option<Box<EtcdCluster>>,
        /// Its fleet has no free maintenance slot: why, naming the holders.
        fleet_wait: Option<String>,
    },
    /// `None`: no such ScyllaCluster.
    Scylla(Option<Box<ScyllaTarget>>),
    /// A kind groundskeeper does not know: the task is rejected by its checks.
    Unknown,
}

/// A ScyllaCluster with what the cleanup trigger reads of it: its facts, its member Services and
/// whether its agent token Secret is there.
struct ScyllaTarget {
    cluster: ScyllaCluster,
    facts: ClusterFacts,
    members: Vec<MemberFacts>,
    secret: SecretState,
}

impl Target {
    async fn read(ctx: &Context, namespace: &str, task: &MaintenanceTask) -> Result<Self> {
        let name = &task.spec.target.name;
        match task.spec.target.kind {
            TargetKind::EtcdCluster => {
                let cluster = Api::<EtcdCluster>::namespaced(ctx.client.clone(), namespace)
                    .get_opt(name)
                    .await
                    .map_err(Error::kube(format!("get EtcdCluster {namespace}/{name}")))?
                    .map(Box::new);
                Ok(Target::Etcd {
                    cluster,
                    fleet_wait: None,
                })
            }
            TargetKind::ScyllaCluster => {
                let cluster = Api::<ScyllaCluster>::namespaced(ctx.client.clone(), namespace)
                    .get_opt(name)
                    .await
                    .map_err(Error::kube(format!("get ScyllaCluster {namespace}/{name}")))?;
                let Some(cluster) = cluster else {
                    return Ok(Target::Scylla(None));
                };
                let services = scylla_observe::list_member_services(&ctx.client, namespace, name).await?;
                let secret = scylla_observe::read_secret_state(&ctx.client, namespace, name).await?;
                Ok(Target::Scylla(Some(Box::new(ScyllaTarget {
                    facts: scylla_observe::cluster_facts(&cluster),
                    members: scylla_observe::current_members(&services),
                    cluster,
                    secret,
                }))))
            }
            _ => Ok(Target::Unknown),
        }
    }

    /// The fleet of an EtcdCluster target that belongs to one.
    fn fleet(&self) -> Option<&str> {
        match self {
            Target::Etcd {
                cluster: Some(cluster),
                ..
            } => cluster.spec.partition.as_ref().map(|p| p.fleet.as_str()),
            _ => None,
        }
    }

    /// Whether its fleet has a maintenance slot free for it, read from every task and Job of
    /// the fleet's clusters.
    async fn read_fleet_slot(&mut self, ctx: &Context) -> Result<()> {
        let Some(fleet) = self.fleet().map(str::to_owned) else {
            return Ok(());
        };
        let Target::Etcd {
            cluster: Some(cluster),
            fleet_wait,
        } = self
        else {
            return Ok(());
        };
        let me = format!(
            "{}/{}",
            cluster.namespace().unwrap_or_default(),
            cluster.name_any()
        );
        let tasks = fleet_tasks(ctx, &fleet).await?;
        *fleet_wait = fleet_slot::slot_wait(&me, &fleet, ctx.config.fleet_max_concurrent, &tasks);
        Ok(())
    }

    fn facts(&self) -> TargetFacts {
        match self {
            Target::Etcd { cluster, fleet_wait } => {
                match (targets::etcd::facts(cluster.as_deref()), fleet_wait) {
                    (TargetFacts::Ready, Some(reason)) => TargetFacts::Waiting {
                        reason: reason.clone(),
                    },
                    (facts, _) => facts,
                }
            }
            Target::Scylla(Some(scylla)) => targets::scylla::facts(Some(&scylla.facts), &scylla.secret),
            Target::Scylla(None) => TargetFacts::Missing,
            Target::Unknown => TargetFacts::Missing,
        }
    }
}

/// The maintenance tasks of every cluster of `fleet`, with whether each has a Job.
async fn fleet_tasks(ctx: &Context, fleet: &str) -> Result<Vec<FleetTask>> {
    let clusters: Vec<String> = etcd_trigger::all_clusters(ctx)
        .await?
        .iter()
        .filter(|c| c.spec.partition.as_ref().is_some_and(|p| p.fleet == fleet))
        .map(|c| format!("{}/{}", c.namespace().unwrap_or_default(), c.name_any()))
        .collect();
    let ours = format!("{}={}", keys::MANAGED_BY_LABEL, keys::MANAGED_BY);
    let mut found = Vec::new();
    for namespace in scope::watched(&ctx.config) {
        let where_ = namespace.as_deref().unwrap_or("every namespace");
        let tasks = scope::api::<MaintenanceTask>(&ctx.client, namespace.as_deref())
            .list(&ListParams::default())
            .await
            .map_err(Error::kube(format!("list MaintenanceTasks in {where_}")))?
            .items;
        let jobs = scope::api::<Job>(&ctx.client, namespace.as_deref())
            .list(&ListParams::default().labels(&ours))
            .await
            .map_err(Error::kube(format!("list Jobs in {where_} with {ours}")))?
            .items;
        for task in &tasks {
            let task_namespace = task.namespace().unwrap_or_default();
            let cluster = format!("{task_namespace}/{}", task.spec.target.name);
            if task.spec.target.kind != TargetKind::EtcdCluster
                || !results::etcd_cluster::is_maintenance(&task.spec.task_type)
                || !clusters.contains(&cluster)
            {
                continue;
            }
            let label = task_label(task);
            let state = task.status.as_ref().and_then(|s| s.state).unwrap_or_default();
            found.push(FleetTask {
                cluster,
                task: task.name_any(),
                in_progress: state == TaskState::InProgress,
                finished: state.is_final(),
                has_job: jobs.iter().any(|job| {
                    job.metadata.namespace.as_deref() == Some(task_namespace.as_str())
                        && job.labels().get(keys::TASK_LABEL) == Some(&label)
                }),
            });
        }
    }
    Ok(found)
}

/// Why the task about to start waits, when it is a Snapshot whose PersistentVolumeClaim does not
/// exist (its Job's pod would stay Pending, without a word, until the claim appears).
async fn missing_claim(
    ctx: &Context,
    namespace: &str,
    tasks: &[MaintenanceTask],
    plan: &TargetPlan,
) -> Result<Option<String>> {
    let starting = plan
        .decisions
        .iter()
        .filter(|d| d.decision == Decision::Start)
        .filter_map(|d| tasks.iter().find(|t| t.name_any() == d.name));
    for task in starting {
        let Ok(ValidTask {
            work: Work::Snapshot(snapshot),
            ..
        }) = validate(task)
        else {
            continue;
        };
        let claim = &snapshot.persistent_volume_claim;
        let found = Api::<PersistentVolumeClaim>::namespaced(ctx.client.clone(), namespace)
            .get_opt(claim)
            .await
            .map_err(Error::kube(format!(
                "get PersistentVolumeClaim {namespace}/{claim}"
            )))?;
        if found.is_none() {
            return Ok(Some(targets::etcd::missing_claim_reason(namespace, claim)));
        }
    }
    Ok(None)
}

fn record_queued(ctx: &Context, namespace: &str, input: &TargetTasks) {
    let mut by_type: BTreeMap<String, i64> = BTreeMap::new();
    for task in input.tasks.iter().filter(|t| t.state == TaskState::Pending) {
        *by_type.entry(task.task_type.to_string()).or_default() += 1;
    }
    ctx.metrics.tasks.queued(namespace, &input.target.name, by_type);
}

/// Carries out one decision on `task`; true when it should be looked at again soon: its work
/// runs, or it waits for its target (whose changes do not wake this controller).
async fn carry_out(
    ctx: &Context,
    api: &Api<MaintenanceTask>,
    task: &MaintenanceTask,
    decision: &Decision,
    target: &Target,
    now: Timestamp,
) -> Result<bool> {
    let before = task.status.clone().unwrap_or_default();
    match decision {
        Decision::Delete => {
            delete_task(api, task).await?;
            Ok(false)
        }
        Decision::Start | Decision::KeepRunning => {
            let started = apply_decision(before.clone(), decision, task.metadata.generation, now);
            // InProgress is written before any Job exists, so a restart finds the task running.
            write_status(api, task, &before, &started).await?;
            let after = advance(ctx, task, started.clone(), target, now).await?;
            record_outcome(ctx, task, &started, &after, now).await?;
            write_status(api, task, &started, &after).await?;
            finished_metrics(ctx, task, &started, &after, now);
            Ok(after.state == Some(TaskState::InProgress))
        }
        Decision::FailDeadline { .. } | Decision::FailTargetGone { .. } => {
            let after = apply_decision(before.clone(), decision, task.metadata.generation, now);
            record_outcome(ctx, task, &before, &after, now).await?;
            write_status(api, task, &before, &after).await?;
            stop_jobs(ctx, task).await?;
            finished_metrics(ctx, task, &before, &after, now);
            Ok(false)
        }
        Decision::Reject { .. } | Decision::Wait { .. } | Decision::Nothing => {
            let after = apply_decision(before.clone(), decision, task.metadata.generation, now);
            write_status(api, task, &before, &after).await?;
            finished_metrics(ctx, task, &before, &after, now);
            Ok(matches!(decision, Decision::Wait { .. }))
        }
    }
}

/// When the task becomes final in this reconciliation, its outcome goes to its target's status
/// ([`results::etcd_cluster::record_task`]), where the etcd trigger keeps its memory. Called
/// before the final status is written: if that write fails, the next reconciliation records
/// again (once: the target's status names the task it recorded).
async fn record_outcome(
    ctx: &Context,
    task: &MaintenanceTask,
    before: &MaintenanceTaskStatus,
    after: &MaintenanceTaskStatus,
    now: Timestamp,
) -> Result<()> {
    let is_final = |s: &MaintenanceTaskStatus| s.state.is_some_and(|state| state.is_final());
    // A Cleanup records each node on its member Service as it goes; only etcd tasks have an
    // outcome to write on their target.
    if is_final(before) || !is_final(after) || task.spec.target.kind != TargetKind::EtcdCluster {
        return Ok(());
    }
    let jobs = task_jobs(ctx, task).await?;
    results::etcd_cluster::record_task(ctx, task, after, &jobs, now).await
}

/// One step forward for a running task: the Job of its next step, or its end once every step's
/// Job finished.
async fn advance(
    ctx: &Context,
    task: &MaintenanceTask,
    status: MaintenanceTaskStatus,
    target: &Target,
    now: Timestamp,
) -> Result<MaintenanceTaskStatus> {
    if let Target::Scylla(_) = target {
        return cleanup::advance(ctx, task, status, target, now).await;
    }
    let generation = task.metadata.generation;
    let naming = SnapshotNaming {
        cluster: task.spec.target.name.clone(),
        time: task_time(task, &status, now),
    };
    let (cluster, steps) = match work_on(task, target, &naming) {
        Ok(found) => found,
        Err(why) => return Ok(fail(status, NOT_SUPPORTED, &why, generation, now)),
    };
    let jobs = task_jobs(ctx, task).await?;
    let mut status = status;
    status.nodes = progress_from_jobs(&jobs, &cluster.name_any());
    status.snapshot = snapshot_progress(&steps, &jobs, &mut status.nodes, &cluster.name_any());
    status.progress = progress_of(&status.nodes);
    let states: Vec<(usize, &JobState)> = jobs
        .iter()
        .filter_map(|j| step_of(j).map(|s| (s, &j.state)))
        .collect();
    match steps_state(steps.len(), &states) {
        StepsState::Start(step) => {
            create_step_job(ctx, task, &cluster, &steps[step], step).await?;
            Ok(status)
        }
        StepsState::Running(_) => Ok(status),
        StepsState::Failed(step) => {
            let why = failure_of(&jobs, step);
            Ok(fail(status, JOB_FAILED, &why, generation, now))
        }
        StepsState::Done => {
            let summary = match &status.snapshot {
                Some(snapshot) => results::snapshot_summary(snapshot),
                None => results::summary(&status.nodes),
            };
            Ok(complete(status, &summary, generation, now))
        }
    }
}

/// `{time}` of a task's snapshot: when its work started, as its status says (written before any
/// Job exists), else its creation. Both stay as they are across restarts.
fn task_time(task: &MaintenanceTask, status: &MaintenanceTaskStatus, now: Timestamp) -> Timestamp {
    status
        .started_at
        .as_ref()
        .or(task.metadata.creation_timestamp.as_ref())
        .map_or(now, |t| t.0)
}

/// A Snapshot task's `status.snapshot` (`None` for other work), and its member's entry while
/// the Job runs (once it finished, [`progress_from_jobs`] has the runner's own).
fn snapshot_progress(
    steps: &[Step],
    jobs: &[JobObservation],
    nodes: &mut Vec<NodeProgress>,
    cluster: &str,
) -> Option<SnapshotStatus> {
    let (step, request, claim) = steps.iter().enumerate().find_map(|(i, step)| match step {
        Step {
            operation: Operation::Snapshot(request),
            claim: Some(claim),
        } => Some((i, request, claim)),
        _ => None,
    })?;
    let file = request.output.rsplit('/').next().unwrap_or_default();
    let job = jobs.iter().find(|j| step_of(j) == Some(step));
    let result = match job.map(|j| &j.state) {
        Some(JobState::Succeeded(finished) | JobState::Failed(finished)) => finished.result.as_ref().ok(),
        _ => None,
    };
    if let Some(job) = job
        && matches!(job.state, JobState::Running(_))
        && nodes.is_empty()
    {
        nodes.push(NodeProgress {
            name: cluster.to_owned(),
            state: NodeState::Running,
            job: Some(job.name.clone()),
            message: Some(format!(
                "streaming a snapshot into PersistentVolumeClaim {}, file {file}",
                claim.claim_name
            )),
            ..NodeProgress::default()
        });
    }
    Some(results::snapshot_status(&claim.claim_name, file, result))
}

/// The target cluster and the steps of the task's work on it, or why there are none.
fn work_on(
    task: &MaintenanceTask,
    target: &Target,
    naming: &SnapshotNaming,
) -> std::result::Result<(EtcdCluster, Vec<Step>), String> {
    let work = validate(task)
        .map_err(|errors| super::validate::describe_errors(&errors))?
        .work;
    match target {
        Target::Etcd {
            cluster: Some(cluster),
            ..
        } => {
            let policy = Policy::from_spec(&cluster.spec).map_err(|errors| {
                format!("EtcdCluster {} has an invalid spec: {errors}", cluster.name_any())
            })?;
            let steps = targets::etcd::steps(&work, &policy, naming)?;
            Ok((cluster.as_ref().clone(), steps))
        }
        Target::Scylla(_) => Err("only a Cleanup task runs on a ScyllaCluster".into()),
        _ => Err("the target is gone".into()),
    }
}

/// The Jobs of this task (by label, and owned by this very task: a task deleted and created
/// again under the same name does not inherit the old one's Jobs).
async fn task_jobs(ctx: &Context, task: &MaintenanceTask) -> Result<Vec<JobObservation>> {
    let namespace = task.namespace().unwrap_or_default();
    let selector = format!("{}={}", keys::TASK_LABEL, task_label(task));
    let jobs = execution::observe_jobs(&ctx.client, &namespace, &selector).await?;
    let uid = task.metadata.uid.clone();
    let owned = |job: &JobObservation| uid.is_none() || job.owner_uid.is_none() || job.owner_uid == uid;
    Ok(jobs
        .into_iter()
        .filter(|job| !job.deleting && owned(job))
        .collect())
}

fn step_of(job: &JobObservation) -> Option<usize> {
    job.labels.get(keys::TASK_STEP_LABEL)?.parse().ok()
}

/// The task's name as a label value (at most 63 characters).
fn task_label(task: &MaintenanceTask) -> String {
    bounded_name(&task.name_any(), "")
}

/// `<task>-<step>`, shortened with a hash of the task's name when too long. Never a name of
/// scylla-operator's cleanup Jobs (`cleanup-<member service>`, in the same namespace): a task
/// named `cleanup-…` gets `gk-<hash of its name>-<task>-<step>` instead. Its Jobs are found by
/// their labels, not their names, so tasks that started under the plain form keep theirs.
pub fn step_job_name(task: &str, step: usize) -> String {
    let suffix = format!("-{step}");
    let name = bounded_name(task, &suffix);
    if !is_reserved_job_name(&name) {
        return name;
    }
    bounded_name(&format!("gk-{}-{task}", execution::name_hash(task)), &suffix)
}

/// Per-member progress from the results of the finished step Jobs, later steps' entries
/// replacing earlier ones of the same member.
fn progress_from_jobs(jobs: &[JobObservation], cluster: &str) -> Vec<NodeProgress> {
    let mut ordered: Vec<&JobObservation> = jobs.iter().filter(|j| step_of(j).is_some()).collect();
    ordered.sort_by_key(|j| step_of(j));
    let mut nodes: Vec<NodeProgress> = Vec::new();
    for job in ordered {
        let finished = match &job.state {
            JobState::Succeeded(finished) | JobState::Failed(finished) => finished,
            JobState::Running(_) => continue,
        };
        let Ok(result) = &finished.result else { continue };
        for node in results::member_progress(result, &job.name, cluster, None) {
            match nodes.iter_mut().find(|n| n.name == node.name) {
                Some(existing) => *existing = node,
                None => nodes.push(node),
            }
        }
    }
    nodes
}

/// Why step `step` failed, from its Job's result, else its conditions.
fn failure_of(jobs: &[JobObservation], step: usize) -> String {
    let Some(job) = jobs.iter().find(|j| step_of(j) == Some(step)) else {
        return format!("step {} failed", step + 1);
    };
    let JobState::Failed(finished) = &job.state else {
        return format!("step {} failed", step + 1);
    };
    let why = match &finished.result {
        Ok(result) => result
            .error
            .as_ref()
            .map(|e| e.message.clone())
            .or_else(|| result.message.clone())
            .unwrap_or_else(|| finished.message.clone()),
        Err(unreadable) => format!("{}: {unreadable}", finished.reason),
    };
    format!(
        "step {} (Job {}) failed: {why}; see `kubectl logs job/{}`",
        step + 1,
        job.name,
        job.name
    )
}

/// The owner reference a task's Jobs carry: deleting the task deletes them.
fn owner_of(task: &MaintenanceTask) -> Result<OwnerReference> {
    task.controller_owner_ref(&())
        .ok_or_else(|| Error::InvalidObject {
            object: format!("MaintenanceTask {}", task.name_any()),
            field: "metadata.uid".into(),
            message: "missing: the object was not read from the API server".into(),
        })
}

async fn create_step_job(
    ctx: &Context,
    task: &MaintenanceTask,
    cluster: &EtcdCluster,
    planned: &Step,
    step: usize,
) -> Result<()> {
    let operation = &planned.operation;
    let owner = owner_of(task)?;
    let policy = Policy::from_spec(&cluster.spec).ok();
    let labels = BTreeMap::from([
        (keys::TASK_LABEL.to_owned(), task_label(task)),
        (keys::TASK_STEP_LABEL.to_owned(), step.to_string()),
    ]);
    let job = etcd_job(
        cluster,
        ctx,
        EtcdJob {
            owner,
            name: step_job_name(&task.name_any(), step),
            operation: operation.clone(),
            tls_secret: policy.as_ref().and_then(|p| p.tls_secret.clone()),
            labels,
            limits: job_limits(policy.as_ref(), &ctx.config.job_limits),
            claim_volumes: planned.claim.iter().cloned().collect(),
        },
    );
    if execution::create_job(&ctx.client, &job).await?.is_new() {
        ctx.metrics.job_created(operation.kind().as_str());
        tracing::info!(task = %task.name_any(), job = %job.name, step, "created the Job of a task's step");
    }
    Ok(())
}

/// Deletes the task's Jobs (their pods get SIGTERM): a task that failed its deadline or lost its
/// target stops its work.
async fn stop_jobs(ctx: &Context, task: &MaintenanceTask) -> Result<()> {
    let namespace = task.namespace().unwrap_or_default();
    for job in task_jobs(ctx, task).await? {
        if matches!(job.state, JobState::Running(_)) {
            execution::delete_job(&ctx.client, &namespace, &job.name).await?;
        }
    }
    Ok(())
}

async fn delete_task(api: &Api<MaintenanceTask>, task: &MaintenanceTask) -> Result<()> {
    match api.delete(&task.name_any(), &DeleteParams::background()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(err) => Err(Error::kube(format!("delete MaintenanceTask {}", task.name_any()))(err)),
    }
}

async fn write_status(
    api: &Api<MaintenanceTask>,
    task: &MaintenanceTask,
    before: &MaintenanceTaskStatus,
    after: &MaintenanceTaskStatus,
) -> Result<()> {
    if before == after {
        return Ok(());
    }
    let name = task.name_any();
    let patch = conditions::status_patch(before, after).map_err(Error::json("MaintenanceTask status"))?;
    api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(Error::kube(format!("write status of MaintenanceTask {name}")))?;
    Ok(())
}

/// Counts a task that became final in this reconciliation.
fn finished_metrics(
    ctx: &Context,
    task: &MaintenanceTask,
    before: &MaintenanceTaskStatus,
    after: &MaintenanceTaskStatus,
    now: Timestamp,
) {
    let is_final = |s: &MaintenanceTaskStatus| s.state.is_some_and(|state| state.is_final());
    if is_final(before) || !is_final(after) {
        return;
    }
    let created = task
        .metadata
        .creation_timestamp
        .as_ref()
        .map(|t| t.0)
        .unwrap_or(now);
    let seconds = now.duration_since(created).as_secs_f64();
    let state = after.state.map(|s| s.to_string()).unwrap_or_default();
    ctx.metrics
        .tasks
        .finished(&task.spec.task_type.to_string(), &state, seconds);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A task's Jobs never take a name of scylla-operator's cleanup Jobs, whatever the task is
    /// called, and two tasks never share one.
    #[test]
    fn step_job_names_stay_out_of_scylla_operators_names() {
        assert_eq!(step_job_name("clean-now", 2), "clean-now-2");
        let tasks = [
            "cleanup-now",
            "cleanup-basic-us-east-1-a",
            "gk-cleanup-now",
            "cleanup",
            "cleanup-a-very-long-task-name-that-goes-on-and-on-and-on-until-it-is-cut",
        ];
        let mut names = std::collections::BTreeSet::new();
        for task in tasks {
            for step in [0, 1, 12] {
                let name = step_job_name(task, step);
                assert!(!is_reserved_job_name(&name), "{task}/{step}: {name}");
                assert!(name.len() <= 63, "{name}");
                assert!(name.ends_with(&format!("-{step}")), "{name}");
                assert!(names.insert(name.clone()), "{task}/{step}: {name} taken twice");
            }
        }
        assert!(step_job_name("cleanup-now", 0).starts_with("gk-"));
        assert!(step_job_name("cleanup-now", 0).contains("-cleanup-now-0"));
    }
}
