//! The Job of a Restore's step: the proof of the snapshot (step 0), then one member's data
//! restored on its claim (steps 1..=N).

use groundskeeper_api::EtcdCluster;
use groundskeeper_api::restore::{RestoreMember, RestoreStatus};
use groundskeeper_protocol::Operation;
use groundskeeper_protocol::operation::RestoreMemberRequest;

use super::super::job::Step;
use super::super::snapshot_steps::{
    ProveTarget, ReplayTarget, SCRATCH_MOUNT_DIR, SnapshotNaming, prove_step, replay_to, scratch_for,
};
use super::model::MEMBER_VOLUME_DIR;
use crate::jobs::ClaimVolume;
use groundskeeper_api::maintenance_task::DEFAULT_SNAPSHOT_FILE_NAME;
use groundskeeper_stores::etcd::retention::NameTemplate;

/// The name the replay of a Restore to a point in time saves its snapshot under: the default
/// template at the task's time, so that it is the cluster's newest full snapshot in the store
/// (deltas taken after the restore continue from it, retention counts it).
pub(crate) fn saved_name(naming: &SnapshotNaming) -> String {
    NameTemplate::parse(DEFAULT_SNAPSHOT_FILE_NAME, &naming.cluster)
        .map(|template| template.render(naming.time))
        .unwrap_or_else(|_| format!("{}-restored.db", naming.cluster))
}

/// The Job of `step`: 0 proves the snapshot, 1..=N restores member N−1 on its claim.
pub(crate) fn step_of_restore(
    status: &RestoreStatus,
    step: usize,
    store: &groundskeeper_api::snapshot_store::Store,
    encoding: &groundskeeper_api::snapshot_store::StoreEncoding,
    data_dir: &str,
    naming: &SnapshotNaming,
    cluster: &EtcdCluster,
) -> Option<Step> {
    let record = cluster.status.as_ref().and_then(|s| {
        s.snapshots.iter().find(|r| r.store == status.store && r.object == status.object).cloned()
    });
    let proof = prove_step(
        (store, encoding),
        DEFAULT_SNAPSHOT_FILE_NAME,
        naming,
        &ProveTarget { object: Some(status.object.clone()), record: record.clone() },
        cluster,
    );
    if step == 0 {
        return Some(match status.to_revision {
            Some(to_revision) => replay_to(
                (store, encoding),
                DEFAULT_SNAPSHOT_FILE_NAME,
                &ReplayTarget {
                    object: status.replayed_from.clone(),
                    to_revision,
                    save_as: Some(saved_name(naming)),
                },
                naming,
                cluster,
            ),
            None => proof,
        });
    }
    let member = status.members.get(step - 1)?;
    let Operation::SnapshotProve(request) = &proof.operation else {
        return None;
    };
    Some(Step {
        operation: Operation::RestoreMember(RestoreMemberRequest {
            from: request.from.clone(),
            object: status.object.clone(),
            expect_sha256: status.sha256.clone(),
            data_dir: format!("{MEMBER_VOLUME_DIR}/{}", data_dir.trim_matches('/')),
            name: member.name.clone(),
            initial_cluster: initial_cluster(&status.members),
            initial_advertise_peer_urls: member.peer_url.clone(),
            initial_cluster_token: status.cluster_token.clone(),
            keep_old_suffix: status.old_data_suffix.clone(),
            scratch_dir: SCRATCH_MOUNT_DIR.to_owned(),
            encryption_key_file: request.encryption_key_file.clone(),
        }),
        claims: proof
            .claims
            .iter()
            .cloned()
            .chain([ClaimVolume {
                claim_name: member.claim.clone(),
                mount_path: MEMBER_VOLUME_DIR.to_owned(),
            }])
            .collect(),
        secret_folders: proof.secret_folders.clone(),
        scratch: Some(scratch_for(cluster, record.as_ref())),
    })
}

fn initial_cluster(members: &[RestoreMember]) -> String {
    members.iter().map(|m| format!("{}={}", m.name, m.peer_url)).collect::<Vec<_>>().join(",")
}
