//! Tasks on an EtcdCluster: each step a `groundskeeper-job` request, and whether the cluster may
//! take work now.

use groundskeeper_job::etcd::compact::CompactTarget;
use groundskeeper_protocol::Operation;
use groundskeeper_protocol::operation::{CompactRequest, CompactTo};

use crate::api::EtcdCluster;
use crate::tasks::TargetFacts;
use crate::tasks::validate::{Compact, Work};
use crate::triggers::etcd::decide::{compact_operation, defrag_with};
use crate::triggers::etcd::policy::Policy;

/// The steps of `work` on a cluster with `policy`, run one after the other, each one Job.
/// `Err` says why the work cannot be done on an EtcdCluster by this version.
pub fn steps(work: &Work, policy: &Policy) -> Result<Vec<Operation>, String> {
    match work {
        Work::Compact(compact) => Ok(vec![compaction(policy, compact)]),
        Work::Defragment(thresholds) => Ok(vec![defrag_with(policy, thresholds, None)]),
        // The runner compacts before defragmenting when told how many revisions to keep; an
        // exact revision is a step of its own.
        Work::Maintenance { compact, defragment } => Ok(match compact.target {
            CompactTarget::RetainRevisions(keep) => vec![defrag_with(policy, defragment, Some(keep))],
            CompactTarget::Revision(_) => {
                vec![compaction(policy, compact), defrag_with(policy, defragment, None)]
            }
        }),
        Work::Snapshot(_) => Err(
            "Snapshot tasks are not run by this version of groundskeeper yet: \
                                  delete this task and take the snapshot with etcdctl"
                .into(),
        ),
        Work::Cleanup(_) => Err("a Cleanup task cleans a ScyllaCluster, not an EtcdCluster".into()),
    }
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
