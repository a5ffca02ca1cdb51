//! A planned action as a plain value ([`MaintenanceJob`]) and the one function that turns it into
//! a Kubernetes Job ([`build_job`]).
//!
//! Every Job groundskeeper runs gets the same hardening: no retries on bad input
//! (`podFailurePolicy`), no API credentials, a restricted security context, a read-only root file
//! system, bounded run time and a TTL, and the result in the termination message.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::{
    Job, JobSpec, PodFailurePolicy, PodFailurePolicyOnExitCodesRequirement,
    PodFailurePolicyOnPodConditionsPattern, PodFailurePolicyRule,
};
use k8s_openapi::api::core::v1::{
    Affinity, Capabilities, Container, EmptyDirVolumeSource, KeyToPath, NodeAffinity,
    PersistentVolumeClaimVolumeSource, PodAffinity, PodAntiAffinity, PodSecurityContext, PodSpec,
    PodTemplateSpec, ResourceRequirements, SeccompProfile, SecretVolumeSource, SecurityContext, Toleration,
    Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use groundskeeper_protocol::{Operation, OperationKind, exit, keys};

use crate::runtime::context::JobLimits;

/// Name of the one container of every maintenance Job's pod.
pub const CONTAINER_NAME: &str = "groundskeeper-job";
/// Where the runner writes its result; the kubelet copies it into the pod status.
pub(crate) const TERMINATION_MESSAGE_PATH: &str = "/dev/termination-log";
/// uid and gid of the runner: `nonroot` of distroless images.
pub(crate) const RUN_AS_ID: i64 = 65532;
/// Size bound of the writable `/tmp` (the root file system is read-only).
pub(crate) const TMP_SIZE_LIMIT: &str = "64Mi";

/// A Secret key mounted as a read-only file.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SecretFile {
    /// Name of the Secret, in the Job's namespace.
    pub secret_name: String,
    /// Key inside the Secret.
    pub key: String,
    /// Absolute path of the file in the container, e.g. `/etc/groundskeeper/agent/auth-token.yaml`.
    pub mount_path: String,
}

/// A PersistentVolumeClaim mounted writable as a folder (e.g. where a snapshot is written).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClaimVolume {
    /// Name of the claim, in the Job's namespace.
    pub claim_name: String,
    /// Absolute path of the folder in the container.
    pub mount_path: String,
}

/// A Secret mounted read-only as a folder, one file per key: the whole Secret (credentials whose
/// keys the controller does not know in advance, such as an object store's), or only one of its
/// keys (`item`: an encryption key, nothing else of the Secret reaching the pod).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SecretFolder {
    pub secret_name: String,
    /// Absolute path of the folder in the container.
    pub mount_path: String,
    /// Only this key of the Secret, as the file of its name; `None`: every key.
    pub item: Option<String>,
}

/// A writable scratch folder (`emptyDir`) of bounded size, for work that needs room on disk
/// beside the read-only root file system (a throwaway etcd member).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ScratchVolume {
    pub mount_path: String,
    /// A quantity, e.g. `4Gi`.
    pub size_limit: String,
}

/// Where the Job's pod may run: copied from the workload it maintains, so that it fits the same
/// (tainted, labelled) nodes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Scheduling {
    pub tolerations: Vec<Toleration>,
    pub node_affinity: Option<NodeAffinity>,
    pub pod_affinity: Option<PodAffinity>,
    pub pod_anti_affinity: Option<PodAntiAffinity>,
    pub node_selector: BTreeMap<String, String>,
}

/// Everything that makes one maintenance Job. Built by a controller's planning step, turned into
/// a Job by [`build_job`] only.
#[derive(Clone, Debug, PartialEq)]
pub struct MaintenanceJob {
    pub namespace: String,
    pub name: String,
    /// The cluster object the Job works for (`controller: true`), so that the Job is
    /// garbage-collected with it and its events wake the owner's controller.
    pub owner: OwnerReference,
    /// What `groundskeeper-job` does: its arguments, and the [`keys::OPERATION_LABEL`] value.
    pub operation: Operation,
    /// Name of the cluster: the [`keys::TARGET_LABEL`] value.
    pub target: String,
    /// The node or member worked on, if the Job is per node: the [`keys::NODE_LABEL`] value.
    pub node: Option<String>,
    /// More labels, on the Job and its pods.
    pub extra_labels: BTreeMap<String, String>,
    /// Annotations on the Job and its pod template (e.g. [`keys::CLEANUP_TOKEN_RING_HASH`]).
    pub annotations: BTreeMap<String, String>,
    pub image: String,
    pub image_pull_policy: String,
    pub secret_files: Vec<SecretFile>,
    pub claim_volumes: Vec<ClaimVolume>,
    pub secret_folders: Vec<SecretFolder>,
    pub scratch: Option<ScratchVolume>,
    pub scheduling: Scheduling,
    pub resources: Option<ResourceRequirements>,
    pub limits: JobLimits,
}

impl MaintenanceJob {
    /// The labels put on the Job and its pods: managed-by, operation, target, node, extras.
    pub fn labels(&self) -> BTreeMap<String, String> {
        let mut labels = self.extra_labels.clone();
        labels.insert(keys::MANAGED_BY_LABEL.to_owned(), keys::MANAGED_BY.to_owned());
        labels.insert(keys::OPERATION_LABEL.to_owned(), self.operation.kind().as_str().to_owned());
        labels.insert(keys::TARGET_LABEL.to_owned(), self.target.clone());
        if let Some(node) = &self.node {
            labels.insert(keys::NODE_LABEL.to_owned(), node.clone());
        }
        labels
    }
}

/// The label selector of every Job groundskeeper made for `operation` on `target`.
pub fn job_selector(operation: OperationKind, target: &str) -> String {
    format!(
        "{}={},{}={operation},{}={target}",
        keys::MANAGED_BY_LABEL,
        keys::MANAGED_BY,
        keys::OPERATION_LABEL,
        keys::TARGET_LABEL
    )
}

/// The Job for a planned action.
pub fn build_job(plan: &MaintenanceJob) -> Job {
    let labels = plan.labels();
    let annotations = (!plan.annotations.is_empty()).then(|| plan.annotations.clone());
    Job {
        metadata: ObjectMeta {
            name: Some(plan.name.clone()),
            namespace: Some(plan.namespace.clone()),
            labels: Some(labels.clone()),
            annotations: annotations.clone(),
            owner_references: Some(vec![OwnerReference { controller: Some(true), ..plan.owner.clone() }]),
            ..Default::default()
        },
        spec: Some(JobSpec {
            backoff_limit: Some(plan.limits.backoff_limit),
            active_deadline_seconds: Some(plan.limits.active_deadline_seconds),
            ttl_seconds_after_finished: Some(plan.limits.ttl_seconds_after_finished),
            pod_failure_policy: Some(pod_failure_policy()),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta { labels: Some(labels), annotations, ..Default::default() }),
                spec: Some(pod_spec(plan)),
            },
            ..Default::default()
        }),
        status: None,
    }
}

/// Bad input fails the Job at once (no retry can fix it); a pod evicted or preempted does not
/// count against `backoffLimit` (the work was interrupted, not wrong).
fn pod_failure_policy() -> PodFailurePolicy {
    PodFailurePolicy {
        rules: vec![
            PodFailurePolicyRule {
                action: "FailJob".to_owned(),
                on_exit_codes: Some(PodFailurePolicyOnExitCodesRequirement {
                    container_name: Some(CONTAINER_NAME.to_owned()),
                    operator: "In".to_owned(),
                    values: vec![exit::BAD_INPUT],
                }),
                on_pod_conditions: None,
            },
            PodFailurePolicyRule {
                action: "Ignore".to_owned(),
                on_exit_codes: None,
                on_pod_conditions: Some(vec![PodFailurePolicyOnPodConditionsPattern {
                    type_: "DisruptionTarget".to_owned(),
                    status: "True".to_owned(),
                }]),
            },
        ],
    }
}

fn pod_spec(plan: &MaintenanceJob) -> PodSpec {
    let scheduling = &plan.scheduling;
    let affinity = Affinity {
        node_affinity: scheduling.node_affinity.clone(),
        pod_affinity: scheduling.pod_affinity.clone(),
        pod_anti_affinity: scheduling.pod_anti_affinity.clone(),
    };
    let has_affinity = affinity != Affinity::default();
    PodSpec {
        // podFailurePolicy requires Never: the Job controller, not the kubelet, retries.
        restart_policy: Some("Never".to_owned()),
        // The runner talks to the data store only, never to Kubernetes.
        automount_service_account_token: Some(false),
        enable_service_links: Some(false),
        security_context: Some(PodSecurityContext {
            run_as_non_root: Some(true),
            run_as_user: Some(RUN_AS_ID),
            run_as_group: Some(RUN_AS_ID),
            // The group of mounted files. A fresh claim's volume is owned by root: fsGroup has the
            // kubelet give its root to this group, group-writable and setgid, so the non-root
            // runner can write there (and files it writes stay in the group). OnRootMismatch:
            // a claim full of snapshots is not chown'ed file by file at every start.
            fs_group: Some(RUN_AS_ID),
            fs_group_change_policy: (!plan.claim_volumes.is_empty()).then(|| "OnRootMismatch".to_owned()),
            seccomp_profile: Some(runtime_default_seccomp()),
            ..Default::default()
        }),
        tolerations: (!scheduling.tolerations.is_empty()).then(|| scheduling.tolerations.clone()),
        affinity: has_affinity.then_some(affinity),
        node_selector: (!scheduling.node_selector.is_empty()).then(|| scheduling.node_selector.clone()),
        containers: vec![container(plan)],
        volumes: Some(volumes(plan)),
        // Explicit, and the runner's own default: between SIGTERM and SIGKILL it stops the remote
        // work it can stop, lets an etcd defrag in flight end, and writes its result.
        termination_grace_period_seconds: Some(exit::TERMINATION_GRACE_PERIOD_SECONDS as i64),
        ..Default::default()
    }
}

fn runtime_default_seccomp() -> SeccompProfile {
    SeccompProfile { type_: "RuntimeDefault".to_owned(), localhost_profile: None }
}

fn container(plan: &MaintenanceJob) -> Container {
    let mut mounts =
        vec![VolumeMount { name: "tmp".to_owned(), mount_path: "/tmp".to_owned(), ..Default::default() }];
    mounts.extend(plan.secret_files.iter().enumerate().map(|(i, file)| VolumeMount {
        name: secret_volume_name(i),
        mount_path: file.mount_path.clone(),
        sub_path: Some(file.key.clone()),
        read_only: Some(true),
        ..Default::default()
    }));
    mounts.extend(plan.claim_volumes.iter().enumerate().map(|(i, claim)| VolumeMount {
        name: claim_volume_name(i),
        mount_path: claim.mount_path.clone(),
        read_only: Some(false),
        ..Default::default()
    }));
    mounts.extend(plan.secret_folders.iter().enumerate().map(|(i, folder)| VolumeMount {
        name: secret_folder_volume_name(i),
        mount_path: folder.mount_path.clone(),
        read_only: Some(true),
        ..Default::default()
    }));
    if let Some(scratch) = &plan.scratch {
        mounts.push(VolumeMount {
            name: SCRATCH_VOLUME.to_owned(),
            mount_path: scratch.mount_path.clone(),
            ..Default::default()
        });
    }
    Container {
        name: CONTAINER_NAME.to_owned(),
        image: Some(plan.image.clone()),
        image_pull_policy: Some(plan.image_pull_policy.clone()),
        args: Some(plan.operation.to_args()),
        resources: plan.resources.clone(),
        termination_message_path: Some(TERMINATION_MESSAGE_PATH.to_owned()),
        // File, not FallbackToLogsOnError: logs are progress for people, never a result.
        termination_message_policy: Some("File".to_owned()),
        security_context: Some(SecurityContext {
            read_only_root_filesystem: Some(true),
            allow_privilege_escalation: Some(false),
            run_as_non_root: Some(true),
            capabilities: Some(Capabilities { drop: Some(vec!["ALL".to_owned()]), add: None }),
            seccomp_profile: Some(runtime_default_seccomp()),
            ..Default::default()
        }),
        volume_mounts: Some(mounts),
        ..Default::default()
    }
}

fn secret_volume_name(index: usize) -> String {
    format!("secret-{index}")
}

fn secret_folder_volume_name(index: usize) -> String {
    format!("secret-folder-{index}")
}

const SCRATCH_VOLUME: &str = "scratch";

fn claim_volume_name(index: usize) -> String {
    format!("claim-{index}")
}

fn volumes(plan: &MaintenanceJob) -> Vec<Volume> {
    let mut volumes = vec![Volume {
        name: "tmp".to_owned(),
        empty_dir: Some(EmptyDirVolumeSource {
            medium: None,
            size_limit: Some(Quantity(TMP_SIZE_LIMIT.to_owned())),
        }),
        ..Default::default()
    }];
    volumes.extend(plan.secret_files.iter().enumerate().map(|(i, file)| Volume {
        name: secret_volume_name(i),
        secret: Some(SecretVolumeSource {
            secret_name: Some(file.secret_name.clone()),
            items: Some(vec![KeyToPath { key: file.key.clone(), path: file.key.clone(), mode: None }]),
            // Owner-read only; fsGroup makes the file readable by the runner's group.
            default_mode: Some(0o440),
            optional: Some(false),
        }),
        ..Default::default()
    }));
    volumes.extend(plan.claim_volumes.iter().enumerate().map(|(i, claim)| Volume {
        name: claim_volume_name(i),
        persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
            claim_name: claim.claim_name.clone(),
            read_only: Some(false),
        }),
        ..Default::default()
    }));
    volumes.extend(plan.secret_folders.iter().enumerate().map(|(i, folder)| {
        Volume {
            name: secret_folder_volume_name(i),
            secret: Some(SecretVolumeSource {
                secret_name: Some(folder.secret_name.clone()),
                items: folder
                    .item
                    .as_ref()
                    .map(|key| vec![KeyToPath { key: key.clone(), path: key.clone(), mode: None }]),
                default_mode: Some(0o440),
                optional: Some(false),
            }),
            ..Default::default()
        }
    }));
    if let Some(scratch) = &plan.scratch {
        volumes.push(Volume {
            name: SCRATCH_VOLUME.to_owned(),
            empty_dir: Some(EmptyDirVolumeSource {
                medium: None,
                size_limit: Some(Quantity(scratch.size_limit.clone())),
            }),
            ..Default::default()
        });
    }
    volumes
}
