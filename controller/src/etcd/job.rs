//! The Job of one step of an etcd task: `groundskeeper-job` with the step's operation, the
//! cluster's client TLS Secret mounted, its bounds and where its pod may run.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::ResourceExt;

use groundskeeper_api::etcd_cluster::{EtcdCluster, TLS_CA_KEY, TLS_CERT_KEY, TLS_KEY_KEY};
use groundskeeper_protocol::Operation;

use super::decide::TLS_MOUNT_DIR;
use super::policy::Policy;
use crate::jobs::{ClaimVolume, MaintenanceJob, SecretFile};
use crate::runtime::context::{Context, JobLimits};

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
