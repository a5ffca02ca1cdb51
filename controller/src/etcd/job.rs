//! The Job of one step of an etcd task: what the step runs ([`Step`]; the operations against the
//! cluster: [`etcd_target`], [`compact_operation`], [`defrag_with`]), and the Job that runs it,
//! `groundskeeper-job` with the step's operation, the cluster's client TLS Secret mounted, its
//! bounds and where its pod may run ([`etcd_job`]), created by [`create_step_job`].

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::ResourceExt;

use groundskeeper_api::etcd_cluster::{EtcdCluster, TLS_CA_KEY, TLS_CERT_KEY, TLS_KEY_KEY};
use groundskeeper_api::maintenance_task::MaintenanceTask;
use groundskeeper_protocol::Operation;
use groundskeeper_protocol::operation::{CompactRequest, CompactTo, DefragRequest, EtcdTarget, EtcdTlsFiles};
use groundskeeper_stores::etcd::plan::DefragPolicy;

use super::model::TLS_MOUNT_DIR;
use super::policy::Policy;
use crate::jobs::{self, ClaimVolume, MaintenanceJob, SecretFile};
use crate::runtime::context::{Context, JobLimits};
use crate::runtime::error::Result;
use crate::tasks::step_jobs::{owner_of, step_job_name, step_labels};

/// One step of a task: one Job running `operation`, with the claims it reads or writes, the
/// Secrets of the buckets it reaches and a scratch folder mounted.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub operation: Operation,
    pub claims: Vec<ClaimVolume>,
    pub secret_folders: Vec<crate::jobs::SecretFolder>,
    pub scratch: Option<crate::jobs::ScratchVolume>,
}

impl From<Operation> for Step {
    fn from(operation: Operation) -> Self {
        Step { operation, claims: Vec::new(), secret_folders: Vec::new(), scratch: None }
    }
}

/// The Job limits: the cluster's `spec.job`, else the controller's settings.
pub fn job_limits(policy: Option<&Policy>, defaults: &JobLimits) -> JobLimits {
    let Some(spec) = policy.map(|p| &p.job) else {
        return defaults.clone();
    };
    JobLimits {
        backoff_limit: spec.backoff_limit.unwrap_or(defaults.backoff_limit),
        active_deadline_seconds: spec.active_deadline_seconds.unwrap_or(defaults.active_deadline_seconds),
        ttl_seconds_after_finished: spec
            .ttl_seconds_after_finished
            .unwrap_or(defaults.ttl_seconds_after_finished),
    }
}

/// What differs between the Jobs run against one EtcdCluster.
pub struct EtcdJob {
    /// The object the Job works for: the EtcdCluster, or the MaintenanceTask.
    pub owner: OwnerReference,
    pub name: String,
    pub operation: Operation,
    /// Mounted under [`TLS_MOUNT_DIR`] when set.
    pub tls_secret: Option<String>,
    pub labels: BTreeMap<String, String>,
    pub limits: JobLimits,
    /// Claims mounted writable (a snapshot's folder).
    pub claim_volumes: Vec<ClaimVolume>,
    /// Secrets mounted whole (a bucket's credentials).
    pub secret_folders: Vec<crate::jobs::SecretFolder>,
    pub scratch: Option<crate::jobs::ScratchVolume>,
}

/// A Job against `cluster`, its client TLS Secret mounted where the operation expects it.
pub fn etcd_job(cluster: &EtcdCluster, ctx: &Context, job: EtcdJob) -> MaintenanceJob {
    let secret_files = job
        .tls_secret
        .iter()
        .flat_map(|secret| {
            [TLS_CA_KEY, TLS_CERT_KEY, TLS_KEY_KEY].map(|key| SecretFile {
                secret_name: secret.clone(),
                key: key.to_owned(),
                mount_path: format!("{TLS_MOUNT_DIR}/{key}"),
            })
        })
        .collect();
    MaintenanceJob {
        namespace: cluster.namespace().unwrap_or_default(),
        name: job.name,
        owner: job.owner,
        operation: job.operation,
        target: cluster.name_any(),
        node: None,
        extra_labels: job.labels,
        annotations: BTreeMap::new(),
        image: ctx.config.job_image.clone(),
        image_pull_policy: ctx.config.job_image_pull_policy.clone(),
        secret_files,
        claim_volumes: job.claim_volumes,
        secret_folders: job.secret_folders,
        scratch: job.scratch,
        scheduling: Default::default(),
        resources: None,
        limits: job.limits,
    }
}

/// The cluster's endpoints and, when it has a client TLS Secret, where the Job mounts its files.
pub fn etcd_target(policy: &Policy) -> EtcdTarget {
    use groundskeeper_api::etcd_cluster::{TLS_CA_KEY, TLS_CERT_KEY, TLS_KEY_KEY};
    let mounted = |key: &str| format!("{TLS_MOUNT_DIR}/{key}");
    EtcdTarget {
        endpoints: policy.endpoints.clone(),
        tls: policy.tls_secret.as_ref().map(|_| EtcdTlsFiles {
            ca: mounted(TLS_CA_KEY),
            cert: mounted(TLS_CERT_KEY),
            key: mounted(TLS_KEY_KEY),
        }),
    }
}

/// A compaction that waits until the freed pages are visible, so a defrag right after reclaims
/// them; never past `not_past` (the compaction guard of [`super::backups::compaction_limit`]).
pub(crate) fn compact_operation(policy: &Policy, to: CompactTo, not_past: Option<i64>) -> Operation {
    Operation::Compact(CompactRequest { etcd: etcd_target(policy), to, physical: true, not_past })
}

/// How far a defrag's compaction goes: current − `retain` revisions, never past `not_past`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct CompactFirst {
    pub retain: Option<i64>,
    pub not_past: Option<i64>,
}

/// A defrag of the cluster with `thresholds`, compacting first when `compact` says how far;
/// leadership and single-member settings from the cluster's policy.
pub(crate) fn defrag_with(policy: &Policy, thresholds: &DefragPolicy, compact: CompactFirst) -> Operation {
    Operation::Defrag(DefragRequest {
        etcd: etcd_target(policy),
        min_defrag_bytes: thresholds.min_defrag_bytes,
        max_fragmented_percent: thresholds.max_fragmented_percent,
        compact_retain_revisions: compact.retain,
        compact_not_past: compact.retain.and(compact.not_past),
        leader_turn: policy.leader_turn,
        leader_in_place_budget_seconds: policy.leader_in_place_budget_seconds,
        refuse_affected_versions: policy.refuse_affected_versions,
        quota_backend_bytes: policy.quota_backend_bytes,
        allow_single_member: policy.allow_single_member,
        // Set by the task controller for a task that waits for windows (see `etcd::task`).
        not_after: None,
        window_opened: None,
        expected_rates: Vec::new(),
    })
}

pub(crate) async fn create_step_job(
    ctx: &Context,
    task: &MaintenanceTask,
    cluster: &EtcdCluster,
    planned: &Step,
    step: usize,
) -> Result<()> {
    let operation = &planned.operation;
    let owner = owner_of(task)?;
    let policy = Policy::from_spec(&cluster.spec).ok();
    let labels = step_labels(task, step);
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
            claim_volumes: planned.claims.clone(),
            secret_folders: planned.secret_folders.clone(),
            scratch: planned.scratch.clone(),
        },
    );
    if jobs::create_job(&ctx.client, &job).await?.is_new() {
        ctx.metrics.job_created(operation.kind().as_str());
        tracing::info!(task = %task.name_any(), job = %job.name, step, "created the Job of a task's step");
    }
    Ok(())
}
