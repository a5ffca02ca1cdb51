//! What the EtcdCluster's status keeps for a restore after a lost quorum (pure): since when fewer
//! than a majority of the members have been healthy, the highest revision seen while the quorum
//! was there, the membership (names and peer URLs) as last listed with quorum; and the condition
//! that says whether the last proof of a snapshot passed.

use groundskeeper_api::conditions::Condition;
use groundskeeper_api::etcd_cluster::{EtcdClusterStatus, KnownMember};
use jiff::Timestamp;

use super::model::ObservedMember;

/// Condition type: whether the last snapshot proven (or tried) restores.
pub const SNAPSHOT_RESTORABLE: &str = "SnapshotRestorable";

/// Updates the quorum fields of `status` from one observation of the members (`members` empty:
/// nobody answered). `expected` is how many voting members the cluster has as far as anyone
/// knows: the members listed now, else the membership recorded with quorum.
pub fn track_quorum(
    status: &mut EtcdClusterStatus,
    members: &[ObservedMember],
    revision: Option<i64>,
    now: Timestamp,
) {
    let voters: Vec<&ObservedMember> =
        members.iter().filter(|m| !m.member.is_learner && m.member.id != 0).collect();
    let expected = voters.len().max(status.membership.len());
    let healthy = voters.iter().filter(|m| m.member.unhealthy_because().is_none()).count();
    if expected > 0 && healthy * 2 > expected {
        status.quorum_lost_since = None;
        let listed_ids: Vec<String> = voters.iter().map(|m| m.member.id_hex()).collect();
        // Every member new: a cluster restored from a snapshot (new members, revisions from the
        // snapshot's on), whose highest revision starts again.
        let new_cluster =
            !status.membership.is_empty() && !status.membership.iter().any(|m| listed_ids.contains(&m.id));
        if let Some(revision) = revision {
            status.last_revision_with_quorum = Some(match status.last_revision_with_quorum {
                Some(last) if !new_cluster => last.max(revision),
                _ => revision,
            });
        }
        let listed: Vec<KnownMember> = voters
            .iter()
            .map(|m| KnownMember {
                name: m.member.name.clone(),
                id: m.member.id_hex(),
                peer_urls: m.peer_urls.clone(),
            })
            .collect();
        // A member that has not started yet is listed without name; keep the last full list.
        if listed.iter().all(|m| !m.peer_urls.is_empty() && m.name != m.id) {
            status.membership = listed;
        }
    } else if status.quorum_lost_since.is_none() {
        status.quorum_lost_since = Some(now.into());
    }
}

/// `SnapshotRestorable` from the last proof in `status`; `None` before any proof.
pub fn proof_condition(status: &EtcdClusterStatus) -> Option<Condition> {
    let proof = status.last_snapshot_proof.as_ref()?;
    let at = proof.at.as_ref().map(|t| t.0.to_string()).unwrap_or_else(|| "an unknown time".to_owned());
    Some(if proof.proven {
        Condition::new(
            SNAPSHOT_RESTORABLE,
            true,
            "Proven",
            format!(
                "snapshot {} in {} proven restorable at {at}, revision {}",
                proof.object,
                proof.store,
                proof.revision.map_or_else(|| "unknown".to_owned(), |r| r.to_string())
            ),
        )
    } else {
        Condition::new(
            SNAPSHOT_RESTORABLE,
            false,
            "ProofFailed",
            failed_proof_message(status).unwrap_or_default(),
        )
    })
}

/// Why the cluster is degraded by its last proof: `None` unless that proof failed.
pub fn failed_proof_message(status: &EtcdClusterStatus) -> Option<String> {
    let proof = status.last_snapshot_proof.as_ref().filter(|p| !p.proven)?;
    Some(format!(
        "snapshot {} in {} did not prove restorable{}: {}; take a new snapshot and verify it (task types \
         Snapshot with verify: true, or Verify)",
        proof.object,
        proof.store,
        proof.task.as_ref().map(|t| format!(" (MaintenanceTask {t})")).unwrap_or_default(),
        if proof.message.is_empty() { "no reason given" } else { &proof.message }
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use groundskeeper_stores::etcd::plan::{MemberObservation, MemberStatus};

    fn member(id: u64, healthy: bool) -> ObservedMember {
        ObservedMember {
            endpoint: format!("http://etcd-{id}:2379"),
            member: MemberObservation {
                id,
                name: format!("etcd-{id}"),
                is_learner: false,
                status: if healthy {
                    Ok(MemberStatus { leader: 1, ..MemberStatus::default() })
                } else {
                    Err("connection refused".into())
                },
            },
            revision: healthy.then_some(100 + id as i64),
            peer_urls: vec![format!("http://etcd-{id}:2380")],
        }
    }

    #[test]
    fn quorum_is_lost_from_the_first_observation_without_a_majority_until_one_with() {
        let t0: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let t1 = t0 + jiff::SignedDuration::from_secs(60);
        let mut status = EtcdClusterStatus::default();
        track_quorum(&mut status, &[member(1, true), member(2, true), member(3, false)], Some(102), t0);
        assert_eq!(status.quorum_lost_since, None);
        assert_eq!(status.last_revision_with_quorum, Some(102));
        assert_eq!(status.membership.len(), 3);

        for now in [t0, t1] {
            track_quorum(&mut status, &[member(1, true), member(2, false), member(3, false)], Some(500), now);
            assert_eq!(status.quorum_lost_since.as_ref().map(|t| t.0), Some(t0), "kept from the first");
        }
        assert_eq!(status.last_revision_with_quorum, Some(102), "not raised without quorum");
        // Nobody answers: still lost, the membership kept.
        track_quorum(&mut status, &[], None, t1);
        assert_eq!(status.membership.len(), 3);
        assert!(status.quorum_lost_since.is_some());
        track_quorum(&mut status, &[member(1, true), member(2, true), member(3, true)], Some(103), t1);
        assert_eq!(status.quorum_lost_since, None);
        assert_eq!(status.last_revision_with_quorum, Some(103));
    }

    /// After a restore every member is new and the revisions start from the snapshot's: the
    /// highest revision seen with quorum starts again, so a later restore counts what it loses
    /// from the restored cluster's revisions.
    #[test]
    fn a_cluster_of_new_members_starts_its_highest_revision_again() {
        let t0: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let mut status = EtcdClusterStatus::default();
        track_quorum(&mut status, &[member(1, true), member(2, true), member(3, true)], Some(1300), t0);
        assert_eq!(status.last_revision_with_quorum, Some(1300));
        // One member replaced: the same cluster.
        track_quorum(&mut status, &[member(1, true), member(2, true), member(4, true)], Some(1200), t0);
        assert_eq!(status.last_revision_with_quorum, Some(1300));
        // Every member new: restored.
        track_quorum(&mut status, &[member(7, true), member(8, true), member(9, true)], Some(1050), t0);
        assert_eq!(status.last_revision_with_quorum, Some(1050));
        let ids: Vec<&str> = status.membership.iter().map(|m| m.id.as_str()).collect();
        assert_eq!(ids.len(), 3);
    }
}
