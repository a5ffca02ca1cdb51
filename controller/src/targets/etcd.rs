//! Tasks on an EtcdCluster: each step a `groundskeeper-job` request, and whether the cluster may
//! take work now.

use groundskeeper_job::etcd::compact::CompactTarget;
use groundskeeper_job::etcd::retention::NameTemplate;
use groundskeeper_protocol::Operation;
use groundskeeper_protocol::operation::{CompactRequest, CompactTo, SnapshotRequest, SnapshotRetention};
use jiff::Timestamp;

use crate::api::EtcdCluster;
use crate::execution::ClaimVolume;
use crate::tasks::TargetFacts;
use crate::tasks::validate::{Compact, Snapshot, Work};
use crate::triggers::etcd::decide::{compact_operation, defrag_with, etcd_target};
use crate::triggers::etcd::policy::Policy;

/// Where a Snapshot task's Job mounts its PersistentVolumeClaim.
pub const SNAPSHOT_MOUNT_DIR: &str = "/snapshots";

/// One step of a task: one Job running `operation`, with `claim` mounted when it writes to a
/// volume.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub operation: Operation,
    pub claim: Option<ClaimVolume>,
}

impl From<Operation> for Step {
    fn from(operation: Operation) -> Self {
        Step {
            operation,
            claim: None,
        }
    }
}

/// What names a task's snapshot: the cluster (`{cluster}`) and the task's own time (`{time}`),
/// the time its work started (else its creation): fixed once the task runs, so a controller
/// that restarts renders the same file name and makes no second Job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotNaming {
    pub cluster: String,
    pub time: Timestamp,
}

/// The steps of `work` on a cluster with `policy`, run one after the other, each one Job.
/// `Err` says why the work cannot be done on an EtcdCluster.
pub fn steps(work: &Work, policy: &Policy, naming: &SnapshotNaming) -> Result<Vec<Step>, String> {
    match work {
        Work::Compact(compact) => Ok(vec![compaction(policy, compact).into()]),
        Work::Defragment(thresholds) => Ok(vec![defrag_with(policy, thresholds, None).into()]),
        // The runner compacts before defragmenting when told how many revisions to keep; an
        // exact revision is a step of its own.
        Work::Maintenance { compact, defragment } => Ok(match compact.target {
            CompactTarget::RetainRevisions(keep) => vec![defrag_with(policy, defragment, Some(keep)).into()],
            CompactTarget::Revision(_) => vec![
                compaction(policy, compact).into(),
                defrag_with(policy, defragment, None).into(),
            ],
        }),
        Work::Snapshot(snapshot) => Ok(vec![snapshot_step(policy, snapshot, naming)?]),
        Work::Cleanup(_) => Err("a Cleanup task cleans a ScyllaCluster, not an EtcdCluster".into()),
    }
}

/// The snapshot file's name: the template rendered for the cluster at the task's time; `Err`
/// when that is no plain file name.
pub fn snapshot_file_name(snapshot: &Snapshot, naming: &SnapshotNaming) -> Result<String, String> {
    let template = NameTemplate::parse(&snapshot.file_name, &naming.cluster)
        .map_err(|why| format!("spec.config.snapshot.fileName: {why}"))?;
    Ok(template.render(naming.time))
}

/// One Job that mounts the claim at [`SNAPSHOT_MOUNT_DIR`], writes the snapshot there and then
/// keeps the cluster's last `retain` snapshots on it.
fn snapshot_step(policy: &Policy, snapshot: &Snapshot, naming: &SnapshotNaming) -> Result<Step, String> {
    let file = snapshot_file_name(snapshot, naming)?;
    Ok(Step {
        operation: Operation::Snapshot(SnapshotRequest {
            etcd: etcd_target(policy),
            output: format!("{SNAPSHOT_MOUNT_DIR}/{file}"),
            retention: Some(SnapshotRetention {
                retain: snapshot.retain,
                file_name_template: snapshot.file_name.clone(),
                cluster: naming.cluster.clone(),
            }),
        }),
        claim: Some(ClaimVolume {
            claim_name: snapshot.persistent_volume_claim.clone(),
            mount_path: SNAPSHOT_MOUNT_DIR.to_owned(),
        }),
    })
}

/// Why a Snapshot task waits when its claim does not exist (Kubernetes would leave the Job's
/// pod Pending without a word).
pub fn missing_claim_reason(namespace: &str, claim: &str) -> String {
    format!(
        "PersistentVolumeClaim {claim} does not exist in namespace {namespace}: the snapshot is \
         written there. Create it (ReadWriteOnce is enough; room for spec.config.snapshot.retain \
         snapshots), or create a task that names an existing claim in \
         spec.config.snapshot.persistentVolumeClaim; the task starts once the claim exists"
    )
}

fn compaction(policy: &Policy, compact: &Compact) -> Operation {
    let to = match compact.target {
        CompactTarget::RetainRevisions(keep) => CompactTo::RetainRevisions(keep),
        CompactTarget::Revision(revision) => CompactTo::Revision(revision),
    };
    match compact_operation(policy, to) {
        Operation::Compact(request) => Operation::Compact(CompactRequest {
            physical: compact.physical || request.physical,
            ..request
        }),
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

pub mod fleet;

#[cfg(test)]
mod tests;
