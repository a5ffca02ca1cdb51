//! What a MaintenanceTask means on an EtcdCluster ([`EtcdTarget`], the task controller's view of
//! this kind of target): whether the cluster may take work now, the steps of the work (each a
//! `groundskeeper-job` request run as one Job, one after the other), and the task carried forward
//! step by step.

use futures::future::BoxFuture;
use jiff::Timestamp;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::api::ListParams;
use kube::{Api, ResourceExt};

use groundskeeper_api::EtcdCluster;
use groundskeeper_api::maintenance_task::{
    MaintenanceTask, MaintenanceTaskStatus, NodeProgress, NodeState, SnapshotStatus, TargetKind, TaskState,
};
use groundskeeper_api::validate::{Compact, ValidTask, Work};
use groundskeeper_protocol::operation::{CompactRequest, CompactTo, SnapshotOutput};
use groundskeeper_protocol::{Operation, keys};
use groundskeeper_stores::etcd::plan::CompactTarget;

use super::fleet_slot::{self, FleetTask};
use super::job::{CompactFirst, Step, compact_operation, create_step_job, defrag_with};
use super::model::is_maintenance;
use super::observe::all_clusters;
use super::policy::Policy;
use super::record;
use super::restore::model::Admission;
use super::snapshot_steps;
use super::task_progress::{progress_from_jobs, snapshot_status, summary};
use crate::jobs::{JobObservation, JobState};
use crate::runtime::context::Context;
use crate::runtime::error::{Error, Result};
use crate::runtime::scope;
use crate::tasks::TargetFacts;
use crate::tasks::checked::CheckedTask;
use crate::tasks::status::{complete, fail, progress_of};
use crate::tasks::step_jobs::{
    JOB_FAILED, NOT_SUPPORTED, failure_of, step_of, task_jobs, task_label, task_time,
};
use crate::tasks::steps::{StepsState, steps_state};
use crate::tasks::target::{ReadTarget, StartBlock, Target};

/// Named here as well, where the steps' users have always found it.
pub use super::snapshot_steps::SnapshotNaming;

/// The steps of `work` on `cluster` with `policy`, run one after the other, each one Job.
/// `Err` says why the work cannot be done on an EtcdCluster. (A Restore's steps are not Jobs
/// alone: see [`super::restore`].)
pub fn steps(
    work: &Work,
    policy: &Policy,
    naming: &SnapshotNaming,
    cluster: &EtcdCluster,
) -> Result<Vec<Step>, String> {
    // While the backup policy takes deltas, no compaction passes the newest revision backed up.
    let not_past = super::backups::compaction_limit(policy, cluster);
    match work {
        Work::Compact(compact) => Ok(vec![compaction(policy, compact, not_past).into()]),
        Work::Defragment(thresholds) => {
            Ok(vec![defrag_with(policy, thresholds, CompactFirst::default()).into()])
        }
        // The runner compacts before defragmenting when told how many revisions to keep; an
        // exact revision is a step of its own.
        Work::Maintenance { compact, defragment } => Ok(match compact.target {
            CompactTarget::RetainRevisions(keep) => {
                vec![defrag_with(policy, defragment, CompactFirst { retain: Some(keep), not_past }).into()]
            }
            CompactTarget::Revision(_) => vec![
                compaction(policy, compact, not_past).into(),
                defrag_with(policy, defragment, CompactFirst::default()).into(),
            ],
        }),
        Work::Snapshot(snapshot) => snapshot_steps::snapshot_steps(policy, snapshot, naming, cluster),
        Work::Copy(copy) => Ok(vec![snapshot_steps::copy_step(copy, naming)]),
        Work::Verify(verify) => Ok(vec![snapshot_steps::verify_step(verify, naming, cluster)]),
        Work::Delta(delta) => Ok(vec![snapshot_steps::delta_step(policy, delta, naming)]),
        Work::Restore(_) => Err("a Restore runs its own steps".into()),
        Work::Cleanup(_) => Err("a Cleanup task cleans a ScyllaCluster, not an EtcdCluster".into()),
    }
}

/// The claims a task's work reads or writes snapshots on.
fn claims_of(work: &Work) -> Vec<String> {
    use groundskeeper_api::snapshot_store::Store;
    let stores: Vec<&Store> = match work {
        Work::Snapshot(snapshot) => vec![&snapshot.store],
        Work::Copy(copy) => vec![&copy.from, &copy.to],
        Work::Verify(verify) => vec![&verify.from],
        Work::Delta(delta) => vec![&delta.to],
        Work::Restore(restore) => vec![&restore.from],
        _ => Vec::new(),
    };
    stores
        .into_iter()
        .filter_map(|store| match store {
            Store::Claim(claim) => Some(claim.clone()),
            Store::Bucket(_) => None,
        })
        .collect()
}

/// Why a Snapshot task waits when its claim does not exist (Kubernetes would leave the Job's
/// pod Pending without a word).
pub(crate) fn missing_claim_reason(namespace: &str, claim: &str) -> String {
    format!(
        "PersistentVolumeClaim {claim} does not exist in namespace {namespace}: the snapshot is \
         written there. Create it (ReadWriteOnce is enough; room for spec.config.snapshot.retain \
         snapshots), or create a task that names an existing claim in \
         spec.config.snapshot.persistentVolumeClaim; the task starts once the claim exists"
    )
}

fn compaction(policy: &Policy, compact: &Compact, not_past: Option<i64>) -> Operation {
    let to = match compact.target {
        CompactTarget::RetainRevisions(keep) => CompactTo::RetainRevisions(keep),
        CompactTarget::Revision(revision) => CompactTo::Revision(revision),
    };
    match compact_operation(policy, to, not_past) {
        Operation::Compact(request) => {
            Operation::Compact(CompactRequest { physical: compact.physical || request.physical, ..request })
        }
        other => other,
    }
}

/// Whether `cluster` may take a task's work now.
pub fn facts(cluster: Option<&EtcdCluster>) -> TargetFacts {
    let Some(cluster) = cluster else {
        return TargetFacts::Missing;
    };
    let name = cluster.metadata.name.as_deref().unwrap_or_default();
    if let Err(errors) = Policy::from_spec(&cluster.spec) {
        return TargetFacts::Waiting {
            reason: format!("EtcdCluster {name} has an invalid spec ({errors}): fix it first"),
        };
    }
    let status = cluster.status.as_ref();
    let members = status.and_then(|s| s.member_count);
    let healthy = status.and_then(|s| s.healthy_members);
    match (healthy, members) {
        (Some(healthy), Some(members)) if healthy < members => TargetFacts::Waiting {
            reason: format!(
                "EtcdCluster {name}: {healthy} of {members} members were healthy at the last check \
                 (status.healthyMembers); maintenance needs every member healthy"
            ),
        },
        _ => TargetFacts::Ready,
    }
}

/// The task controller's view of EtcdClusters.
pub struct EtcdTarget;

impl Target for EtcdTarget {
    fn kind(&self) -> TargetKind {
        TargetKind::EtcdCluster
    }

    fn read<'a>(
        &'a self,
        ctx: &'a Context,
        task: &'a MaintenanceTask,
    ) -> BoxFuture<'a, Result<Box<dyn ReadTarget>>> {
        Box::pin(async move { Ok(Box::new(ReadCluster::read(ctx, task).await?) as Box<dyn ReadTarget>) })
    }
}

/// Serialises the start of tasks on clusters of a fleet (see [`crate::etcd::fleet_slot`]).
static FLEET_STEP: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// An EtcdCluster as the task controller read it.
struct ReadCluster {
    /// `None`: no such EtcdCluster.
    cluster: Option<Box<EtcdCluster>>,
    /// Its fleet has no free maintenance slot: why, naming the holders.
    fleet_wait: Option<String>,
    /// Held for the whole reconciliation when the cluster belongs to a fleet: reading who holds
    /// the fleet's slots and starting this task are one step for the fleet, so two clusters'
    /// tasks cannot both see a free slot and both start. Only one controller acts at a time
    /// (leader election), so a lock in the process suffices.
    _fleet_step: Option<tokio::sync::MutexGuard<'static, ()>>,
}

impl ReadCluster {
    async fn read(ctx: &Context, task: &MaintenanceTask) -> Result<Self> {
        let namespace = task.namespace().unwrap_or_default();
        let name = &task.spec.target.name;
        let cluster = Api::<EtcdCluster>::namespaced(ctx.client.clone(), &namespace)
            .get_opt(name)
            .await
            .map_err(Error::kube(format!("get EtcdCluster {namespace}/{name}")))?
            .map(Box::new);
        let Some(fleet) = cluster.as_ref().and_then(|c| c.spec.partition.as_ref()).map(|p| p.fleet.clone())
        else {
            return Ok(ReadCluster { cluster, fleet_wait: None, _fleet_step: None });
        };
        let fleet_step = FLEET_STEP.lock().await;
        let me = format!("{namespace}/{name}");
        let tasks = fleet_tasks(ctx, &fleet).await?;
        let fleet_wait =
            fleet_slot::slot_wait(&me, &fleet, super::config::Config::of(ctx).fleet_max_concurrent, &tasks);
        Ok(ReadCluster { cluster, fleet_wait, _fleet_step: Some(fleet_step) })
    }

    /// The cluster and the steps of the task's work on it, or why there are none.
    fn work_on(
        &self,
        task: &CheckedTask,
        naming: &SnapshotNaming,
    ) -> std::result::Result<(&EtcdCluster, Vec<Step>), String> {
        let work = task.work()?;
        let Some(cluster) = &self.cluster else {
            return Err("the target is gone".into());
        };
        let policy = Policy::from_spec(&cluster.spec)
            .map_err(|errors| format!("EtcdCluster {} has an invalid spec: {errors}", cluster.name_any()))?;
        Ok((cluster, steps(work, &policy, naming, cluster)?))
    }

    async fn advance(
        &self,
        ctx: &Context,
        task: &CheckedTask,
        status: MaintenanceTaskStatus,
        now: Timestamp,
    ) -> Result<MaintenanceTaskStatus> {
        let generation = task.metadata.generation;
        if let (Ok(ValidTask { work: Work::Restore(restore), .. }), Some(cluster)) =
            (task.valid(), &self.cluster)
        {
            return super::restore::task::advance(ctx, task, status, cluster, restore, now).await;
        }
        let naming =
            SnapshotNaming { cluster: task.spec.target.name.clone(), time: task_time(task, &status, now) };
        let (cluster, steps) = match self.work_on(task, &naming) {
            Ok(found) => found,
            Err(why) => return Ok(fail(status, NOT_SUPPORTED, &why, generation, now)),
        };
        let jobs = task_jobs(ctx, task).await?;
        let mut status = status;
        status.nodes = progress_from_jobs(&jobs, &cluster.name_any());
        status.snapshot = snapshot_progress(&steps, &jobs, &mut status.nodes, &cluster.name_any());
        if let Ok(valid) = task.valid() {
            status.proof = super::snapshot_record::task_proof(
                &valid.work,
                &task.name_any(),
                &finished_results(&jobs),
                now,
            );
            status.copy = super::snapshot_record::task_copy(&finished_results(&jobs));
            status.delta = super::snapshot_record::task_delta(&finished_results(&jobs));
            status.replay = super::snapshot_record::task_replay(&finished_results(&jobs));
        }
        status.progress = progress_of(&status.nodes);
        let left = super::task_progress::left_for_next_window(&jobs);
        status.left_for_next_window = (left > 0).then(|| i32::try_from(left).unwrap_or(i32::MAX));
        let states: Vec<(usize, &JobState)> =
            jobs.iter().filter_map(|j| step_of(j).map(|s| (s, &j.state))).collect();
        match steps_state(steps.len(), &states) {
            StepsState::Start(step) => {
                let planned = within_window(&steps[step], task, cluster, now);
                let planned = told_earlier_results(&planned, step, &jobs);
                create_step_job(ctx, task, cluster, &planned, step).await?;
                Ok(status)
            }
            StepsState::Running(_) => Ok(status),
            StepsState::Failed(step) => {
                Ok(fail(status, JOB_FAILED, &failure_of(&jobs, step), generation, now))
            }
            StepsState::Done => {
                let summary = match (&status.snapshot, &status.proof) {
                    (Some(snapshot), None) => super::task_progress::snapshot_summary(snapshot),
                    (Some(snapshot), Some(proof)) => format!(
                        "{}; {}",
                        super::task_progress::snapshot_summary(snapshot),
                        super::snapshot_record::proof_summary(proof)
                    ),
                    (None, Some(proof)) => super::snapshot_record::proof_summary(proof),
                    (None, None) => summary(&status.nodes),
                };
                Ok(complete(status, &summary, generation, now))
            }
        }
    }
}

impl ReadTarget for ReadCluster {
    fn windows(&self) -> Option<std::result::Result<groundskeeper_api::maintenance_window::Windows, String>> {
        let cluster = self.cluster.as_deref()?;
        let object =
            format!("EtcdCluster {}/{}", cluster.namespace().unwrap_or_default(), cluster.name_any());
        groundskeeper_api::maintenance_window::windows_of(
            cluster.spec.maintenance_windows.as_ref(),
            &object,
            "spec.maintenanceWindows",
        )
    }

    fn plan(&self, task: &CheckedTask) -> std::result::Result<groundskeeper_api::plan::TaskPlan, String> {
        let cluster = self
            .cluster
            .as_deref()
            .ok_or_else(|| format!("EtcdCluster {} does not exist", task.spec.target.name))?;
        let work = task.work()?;
        let target = format!("{}/{}", cluster.namespace().unwrap_or_default(), cluster.name_any());
        groundskeeper_api::plan::etcd_plan(work, cluster, &target)
    }

    fn facts(&self) -> TargetFacts {
        match (facts(self.cluster.as_deref()), &self.fleet_wait) {
            (TargetFacts::Ready, Some(reason)) => TargetFacts::Waiting { reason: reason.clone() },
            (facts, _) => facts,
        }
    }

    /// A Restore is for a cluster that lost its quorum: it does not wait for healthy members (its
    /// admission checks what it needs), and it goes before the other waiting tasks.
    fn facts_for(&self, tasks: &[MaintenanceTask]) -> TargetFacts {
        let restoring =
            tasks.iter().any(|t| t.spec.task_type == groundskeeper_api::maintenance_task::TaskType::Restore);
        match (self.facts(), &self.cluster) {
            (TargetFacts::Waiting { .. }, Some(_)) if restoring => TargetFacts::Ready,
            (facts, _) => facts,
        }
    }

    /// A task whose PersistentVolumeClaim does not exist waits (its Job's pod would stay Pending,
    /// without a word, until the claim appears); a Restore that may not run is turned away.
    fn start_blocker<'a>(
        &'a self,
        ctx: &'a Context,
        task: &'a CheckedTask,
    ) -> BoxFuture<'a, Result<Option<StartBlock>>> {
        Box::pin(async move {
            let Ok(valid) = task.valid() else {
                return Ok(None);
            };
            if let (Work::Restore(restore), Some(cluster)) = (&valid.work, &self.cluster) {
                let namespace = task.namespace().unwrap_or_default();
                let stateful_set = match &cluster.spec.stateful_set {
                    Some(sts) => {
                        super::restore::observe::read_stateful_set(ctx, &namespace, &sts.name).await?
                    }
                    None => None,
                };
                let pods = super::restore::observe::ready_pods(stateful_set.as_ref());
                match super::restore::decide::admission(restore, cluster, pods, ctx.clock.now()) {
                    Admission::Admitted => {}
                    Admission::NotYet { reason, until } => {
                        return Ok(Some(StartBlock::Wait { reason, until: Some(until) }));
                    }
                    Admission::Refused(why) => return Ok(Some(StartBlock::Reject(why))),
                }
            }
            let namespace = task.namespace().unwrap_or_default();
            for claim in claims_of(&valid.work) {
                let found = Api::<PersistentVolumeClaim>::namespaced(ctx.client.clone(), &namespace)
                    .get_opt(&claim)
                    .await
                    .map_err(Error::kube(format!("get PersistentVolumeClaim {namespace}/{claim}")))?;
                if found.is_none() {
                    return Ok(Some(StartBlock::Wait {
                        reason: missing_claim_reason(&namespace, &claim),
                        until: None,
                    }));
                }
            }
            Ok(None)
        })
    }

    fn advance<'a>(
        &'a self,
        ctx: &'a Context,
        task: &'a CheckedTask,
        status: MaintenanceTaskStatus,
        now: Timestamp,
    ) -> BoxFuture<'a, Result<MaintenanceTaskStatus>> {
        Box::pin(ReadCluster::advance(self, ctx, task, status, now))
    }

    /// A finished task's outcome goes to its EtcdCluster's status ([`record::record_task`]),
    /// where the etcd trigger keeps its memory.
    fn record_outcome<'a>(
        &'a self,
        ctx: &'a Context,
        task: &'a CheckedTask,
        after: &'a MaintenanceTaskStatus,
        now: Timestamp,
    ) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let jobs = task_jobs(ctx, task).await?;
            record::record_task(ctx, task, after, &jobs, now).await
        })
    }
}

/// The maintenance tasks of every cluster of `fleet`, with whether each has a Job.
async fn fleet_tasks(ctx: &Context, fleet: &str) -> Result<Vec<FleetTask>> {
    let clusters: Vec<String> = all_clusters(ctx)
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
                || !is_maintenance(&task.spec.task_type)
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

/// A Snapshot task's `status.snapshot` (`None` for other work), and its member's entry while
/// the Job runs (once it finished, [`progress_from_jobs`] has the runner's own).
fn snapshot_progress(
    steps: &[Step],
    jobs: &[JobObservation],
    nodes: &mut Vec<NodeProgress>,
    cluster: &str,
) -> Option<SnapshotStatus> {
    let (step, request) = steps.iter().enumerate().find_map(|(i, step)| match &step.operation {
        Operation::Snapshot(request) => Some((i, request)),
        _ => None,
    })?;
    let claim = steps[step].claims.first().map(|c| c.claim_name.clone());
    let bucket = match &request.output {
        SnapshotOutput::Object { bucket, .. } => Some(bucket.url.clone()),
        SnapshotOutput::File(_) => None,
    };
    let file = request.output.name();
    let place = match (&claim, &bucket) {
        (_, Some(bucket)) => format!("bucket {bucket}, object {file}"),
        (claim, None) => {
            format!("PersistentVolumeClaim {}, file {file}", claim.as_deref().unwrap_or_default())
        }
    };
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
            message: Some(format!("streaming a snapshot into {place}")),
            ..NodeProgress::default()
        });
    }
    Some(snapshot_status(claim.as_deref(), bucket.as_deref(), file, result))
}

/// The runner's results of the task's finished steps, in step order.
fn finished_results(jobs: &[JobObservation]) -> Vec<groundskeeper_protocol::JobResult> {
    let mut found: Vec<(usize, groundskeeper_protocol::JobResult)> = jobs
        .iter()
        .filter_map(|job| {
            let step = step_of(job)?;
            match &job.state {
                JobState::Succeeded(finished) | JobState::Failed(finished) => {
                    Some((step, finished.result.as_ref().ok()?.clone()))
                }
                JobState::Running(_) => None,
            }
        })
        .collect();
    found.sort_by_key(|(step, _)| *step);
    found.into_iter().map(|(_, result)| result).collect()
}

/// A proof after a snapshot, told what the snapshot's Job reported (its revision, keys and
/// checksum). Other steps as they are.
fn told_earlier_results(planned: &Step, step: usize, jobs: &[JobObservation]) -> Step {
    let earlier = step.checked_sub(1).and_then(|before| jobs.iter().find(|j| step_of(j) == Some(before)));
    match earlier.map(|j| &j.state) {
        Some(JobState::Succeeded(finished)) => match finished.result.as_ref().ok().map(|r| &r.report) {
            Some(groundskeeper_protocol::Report::Snapshot(report)) => {
                snapshot_steps::with_snapshot_result(planned, report)
            }
            _ => planned.clone(),
        },
        _ => planned.clone(),
    }
}

/// A defrag step of a task that waits for windows, told the end of the window it runs in and
/// each member's rate from its earlier defrags: the runner starts no member that would overrun
/// it (a window closed by now leaves every member for the next one). Other steps as they are.
pub(crate) fn within_window(
    planned: &Step,
    task: &MaintenanceTask,
    cluster: &EtcdCluster,
    now: Timestamp,
) -> Step {
    let Operation::Defrag(request) = &planned.operation else {
        return planned.clone();
    };
    if !crate::tasks::lifecycle::waits_for_window(task) {
        return planned.clone();
    }
    let object = format!("EtcdCluster {}/{}", cluster.namespace().unwrap_or_default(), cluster.name_any());
    let windows = groundskeeper_api::maintenance_window::windows_of(
        cluster.spec.maintenance_windows.as_ref(),
        &object,
        "spec.maintenanceWindows",
    );
    let Some(Ok(windows)) = windows else {
        return planned.clone();
    };
    let (not_after, opened) = match windows.state_at(now) {
        groundskeeper_api::maintenance_window::WindowState::Open { opened, closes } => (closes, Some(opened)),
        groundskeeper_api::maintenance_window::WindowState::Closed { .. } => (now, None),
    };
    let members = cluster.status.as_ref().map(|s| s.members.as_slice()).unwrap_or_default();
    let expected_rates = members
        .iter()
        .filter_map(|m| Some((m.name.clone(), groundskeeper_api::plan::median_rate(&m.defrag_history)?)))
        .collect();
    let request = groundskeeper_protocol::operation::DefragRequest {
        not_after: Some(not_after.to_string()),
        window_opened: opened.map(|o| o.to_string()),
        expected_rates,
        ..request.clone()
    };
    Step { operation: Operation::Defrag(request), ..planned.clone() }
}

#[cfg(test)]
mod tests;
