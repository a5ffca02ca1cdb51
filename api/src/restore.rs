//! A Restore task's status: the steps that bring an etcd cluster run as a StatefulSet back from a
//! snapshot, each visible, and what the controller needs to resume any of them after a restart.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The steps of a restore, in order.
#[derive(
    Serialize, Deserialize, Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, JsonSchema,
)]
pub enum RestorePhase {
    /// The snapshot is fetched and proven to restore in a throwaway member; nothing of the
    /// cluster is touched yet.
    #[default]
    CheckingSnapshot,
    /// The StatefulSet is scaled to zero; the step ends once its pods are gone.
    ScalingDown,
    /// One Job per member moves its data aside and restores the snapshot into its volume.
    RestoringMembers,
    /// The StatefulSet is scaled back to its replicas.
    ScalingUp,
    /// Every member must answer, healthy, at a revision at least the snapshot's.
    WaitingForMembers,
    /// The cluster is back.
    Done,
}

impl RestorePhase {
    pub const ALL: [RestorePhase; 6] = [
        Self::CheckingSnapshot,
        Self::ScalingDown,
        Self::RestoringMembers,
        Self::ScalingUp,
        Self::WaitingForMembers,
        Self::Done,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::CheckingSnapshot => "CheckingSnapshot",
            Self::ScalingDown => "ScalingDown",
            Self::RestoringMembers => "RestoringMembers",
            Self::ScalingUp => "ScalingUp",
            Self::WaitingForMembers => "WaitingForMembers",
            Self::Done => "Done",
        }
    }

    /// The step after this one.
    pub fn next(self) -> Self {
        let at = Self::ALL.iter().position(|p| *p == self).unwrap_or(0);
        Self::ALL.get(at + 1).copied().unwrap_or(Self::Done)
    }
}

impl std::fmt::Display for RestorePhase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a Restore task stands.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RestoreStatus {
    /// The step it is at (`Done` once the cluster is back).
    pub phase: RestorePhase,
    /// The store of the snapshot: `pvc/NAME` or the bucket's URL.
    pub store: String,
    /// The snapshot's file or object name in that store. To a point in time: the full snapshot
    /// the replay starts from, then the snapshot the replay saved.
    pub object: String,
    /// To a point in time: the revision asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_revision: Option<i64>,
    /// To a point in time: the full snapshot the replay started from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replayed_from: Option<String>,
    /// To a point in time: the deltas replayed on it, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deltas: Vec<String>,
    /// SHA-256 of the whole snapshot file, hex: as the catalog recorded it, then as the proof
    /// found it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// The revision the snapshot holds: as the catalog recorded it, then as the proof's
    /// throwaway member served it. The restored members must reach at least this revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<i64>,
    /// The number of keys at that revision: as the catalog recorded it, then as the proof's
    /// throwaway member held them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keys: Option<i64>,
    /// The StatefulSet that runs the members.
    pub stateful_set: String,
    /// The replicas the StatefulSet is scaled back to: those it had before the restore, at least
    /// one per member. Recorded once the snapshot is proven, before it is scaled to zero.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub original_replicas: Option<i32>,
    /// The members restored, with the peer URL and claim of each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub members: Vec<RestoreMember>,
    /// The new cluster's token: restored members never join members of the old cluster.
    pub cluster_token: String,
    /// Each member's old data folder is kept beside it with this suffix.
    pub old_data_suffix: String,
    /// The highest revision seen while the quorum was there (the EtcdCluster's
    /// `status.lastRevisionWithQuorum`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_revision_before_loss: Option<i64>,
    /// How many revisions written after the snapshot's are lost: `lastRevisionBeforeLoss` minus
    /// `revision`. Set once the cluster is back, when both are known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost_revisions: Option<i64>,
    /// Every step, as it went.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<RestoreStep>,
    /// When it stopped at a step: how to go on, or back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery: Option<String>,
}

/// One member of the restored cluster.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RestoreMember {
    /// The member's name: its pod's name.
    pub name: String,
    /// The peer URL it is restored with: the first it advertised in the membership recorded while
    /// the quorum was there.
    pub peer_url: String,
    /// Its data volume's claim.
    pub claim: String,
}

/// One step of a restore.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RestoreStep {
    pub phase: RestorePhase,
    /// `Running`, `Succeeded` or `Failed`.
    pub state: String,
    /// When the step began.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,
    /// When the step succeeded or failed; absent while it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<Time>,
    /// What happened, in one line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// A Restore's snapshot and members, resolved from the task and the cluster's status.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedRestore {
    pub store: String,
    pub object: String,
    /// What the catalog knows of the snapshot (nothing when it was named by hand and is not in
    /// the catalog: the proof step reads it from the snapshot itself).
    pub record: Option<crate::snapshot_catalog::SnapshotRecord>,
    pub members: Vec<RestoreMember>,
    /// The highest revision seen while the quorum was there.
    pub last_revision_with_quorum: Option<i64>,
}

impl ResolvedRestore {
    /// The revisions written after the snapshot, as far as the status saw: what the restore loses.
    pub fn lost_revisions(&self) -> Option<i64> {
        let snapshot = self.record.as_ref()?.revision?;
        Some((self.last_revision_with_quorum? - snapshot).max(0))
    }
}

/// The snapshot a Restore of `cluster` from `store` (`pvc/NAME` or a bucket URL) uses — `object`,
/// else the newest proven one there — and its members: the membership last listed with quorum,
/// each member a pod of `stateful_set` with its data on claim `<claim_template>-<pod>`. `Err`
/// says what is missing and what to do.
pub fn resolve_restore(
    cluster: &crate::EtcdCluster,
    store: &str,
    object: Option<&str>,
    to_revision: Option<i64>,
    stateful_set: &str,
    claim_template: &str,
) -> Result<ResolvedRestore, String> {
    let name = cluster.metadata.name.clone().unwrap_or_default();
    let status = cluster.status.clone().unwrap_or_default();
    let record = match (object, to_revision) {
        (Some(object), _) => {
            status.snapshots.iter().find(|r| r.store == store && r.object == object).cloned()
        }
        (None, Some(revision)) => {
            Some(full_at_or_before(&status.snapshots, store, revision).cloned().ok_or_else(|| {
                let oldest = status
                    .snapshots
                    .iter()
                    .filter(|r| r.store == store && !r.is_delta())
                    .filter_map(|r| r.revision)
                    .min();
                match oldest {
                    Some(oldest) => format!(
                        "spec.config.restore.toRevision {revision} is before the oldest full snapshot of \
                         EtcdCluster {name} in {store} (revision {oldest}): nothing restores to it; give \
                         a later revision"
                    ),
                    None => format!(
                        "EtcdCluster {name} has no full snapshot in {store} (status.snapshots): nothing \
                         restores to revision {revision}; take one first, or name one in \
                         spec.config.restore.object"
                    ),
                }
            })?)
        }
        (None, None) => Some(
            crate::snapshot_catalog::newest_proven(&status.snapshots, store).cloned().ok_or_else(|| {
                format!(
                    "EtcdCluster {name} has no snapshot in {store} proven to restore (status.snapshots): \
                     name one in spec.config.restore.object, or prove one first with a Verify task"
                )
            })?,
        ),
    };
    let object =
        object.map(str::to_owned).or_else(|| record.as_ref().map(|r| r.object.clone())).unwrap_or_default();
    let members = restore_members(&name, &status.membership, stateful_set, claim_template)?;
    Ok(ResolvedRestore {
        store: store.to_owned(),
        object,
        record,
        members,
        last_revision_with_quorum: status.last_revision_with_quorum,
    })
}

/// The revision a Restore goes to: `toRevision`, or for `toTime` the revision of the newest
/// backup of `store` written at or before that time ([`revision_at`]); `None`: the snapshot's own.
pub fn target_revision(
    restore: &crate::validate::Restore,
    catalog: &[crate::snapshot_catalog::SnapshotRecord],
    now: jiff::Timestamp,
) -> Result<Option<i64>, String> {
    match (restore.to_revision, restore.to_time) {
        (Some(revision), _) => Ok(Some(revision)),
        (None, Some(time)) if time > now => Err(format!(
            "spec.config.restore.toTime {time} is in the future (now {now}): give the time to go back to"
        )),
        (None, Some(time)) => revision_at(catalog, &restore.from.display(), time).map(Some),
        (None, None) => Ok(None),
    }
}

/// The revision of the newest backup of `store` written at or before `time`, by the catalog: the
/// newest full snapshot written by then, followed by the deltas of its chain written by then (each
/// starting where the one before ended). `Err` says why the time cannot be resolved: no full
/// snapshot that old, or deltas the catalog no longer lists (it keeps the newest entries only).
pub fn revision_at(
    catalog: &[crate::snapshot_catalog::SnapshotRecord],
    store: &str,
    time: jiff::Timestamp,
) -> Result<i64, String> {
    let written = |r: &crate::snapshot_catalog::SnapshotRecord| r.written_at.as_ref().map(|t| t.0);
    let in_store =
        || catalog.iter().filter(|r| r.store == store && r.revision.is_some() && written(r).is_some());
    let full = in_store()
        .filter(|r| !r.is_delta() && written(r) <= Some(time))
        .max_by_key(|r| (written(r), r.revision))
        .ok_or_else(|| match in_store().filter(|r| !r.is_delta()).filter_map(written).min() {
            Some(oldest) => format!(
                "spec.config.restore.toTime {time} is before the oldest full snapshot in {store} (written \
                 {oldest}): nothing restores to that time; give a later one"
            ),
            None => format!("no full snapshot of {store} is in the catalog: nothing restores to {time}"),
        })?;
    let since = written(full);
    let mut deltas: Vec<_> =
        in_store().filter(|r| r.is_delta() && written(r) >= since && written(r) <= Some(time)).collect();
    deltas.sort_by_key(|d| (d.start_revision, d.revision));
    let mut end = full.revision.unwrap_or_default();
    for delta in deltas {
        match delta.start_revision {
            Some(start) if start == end => end = delta.revision.unwrap_or(end),
            Some(start) if start > end => {
                return Err(format!(
                    "the catalog no longer lists the deltas of {store} between revisions {end} and {start} \
                     (it keeps the newest entries): spec.config.restore.toTime cannot be resolved; give \
                     toRevision instead (kubectl groundskeeper snapshot list shows the revisions)"
                ));
            }
            // A delta of another timeline (written after a restore to an older point): not ours.
            _ => {}
        }
    }
    Ok(end)
}

/// The newest full snapshot of `store` at or before `revision` in the catalog: where a replay to
/// that revision starts.
pub fn full_at_or_before<'a>(
    catalog: &'a [crate::snapshot_catalog::SnapshotRecord],
    store: &str,
    revision: i64,
) -> Option<&'a crate::snapshot_catalog::SnapshotRecord> {
    catalog
        .iter()
        .filter(|r| r.store == store && !r.is_delta() && r.revision.is_some_and(|r| r <= revision))
        .max_by_key(|r| (r.revision, r.written_at.as_ref().map(|t| t.0)))
}

/// Each member of `membership` as a pod of `stateful_set` (`<stateful_set>-<ordinal>`).
fn restore_members(
    cluster: &str,
    membership: &[crate::etcd_cluster::KnownMember],
    stateful_set: &str,
    claim_template: &str,
) -> Result<Vec<RestoreMember>, String> {
    if membership.is_empty() {
        return Err(format!(
            "EtcdCluster {cluster} has no membership recorded (status.membership is written while the \
             quorum is there): the members' peer URLs are not known, so the cluster cannot be rebuilt \
             by a task; restore by hand (docs/snapshots.md)"
        ));
    }
    let mut members = Vec::new();
    for member in membership {
        let ordinal =
            member.name.strip_prefix(&format!("{stateful_set}-")).and_then(|o| o.parse::<u32>().ok());
        if ordinal.is_none() {
            return Err(format!(
                "member {:?} of EtcdCluster {cluster} is not a pod of StatefulSet {stateful_set} (its \
                 name must be the pod's, {stateful_set}-N, as with --name=$(POD_NAME))",
                member.name
            ));
        }
        let Some(peer_url) = member.peer_urls.first() else {
            return Err(format!("member {} of EtcdCluster {cluster} has no peer URL recorded", member.name));
        };
        members.push(RestoreMember {
            name: member.name.clone(),
            peer_url: peer_url.clone(),
            claim: format!("{claim_template}-{}", member.name),
        });
    }
    members.sort_by_key(|m| m.name.rsplit('-').next().and_then(|o| o.parse::<u32>().ok()));
    Ok(members)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::EtcdCluster;
    use crate::etcd_cluster::{EtcdClusterSpec, EtcdClusterStatus, KnownMember};
    use crate::snapshot_catalog::{SnapshotProof, SnapshotRecord};

    fn cluster(membership: &[(&str, &str)], snapshots: Vec<SnapshotRecord>) -> EtcdCluster {
        let mut cluster = EtcdCluster::new(
            "main",
            EtcdClusterSpec {
                endpoints: vec!["http://a:2379".into()],
                tls: None,
                policy: Default::default(),
                job: Default::default(),
                partition: None,
                maintenance_windows: None,
                stateful_set: None,
                backup: None,
            },
        );
        cluster.status = Some(EtcdClusterStatus {
            membership: membership
                .iter()
                .map(|(name, peer)| KnownMember {
                    name: (*name).into(),
                    id: "1".into(),
                    peer_urls: vec![(*peer).into()],
                })
                .collect(),
            snapshots,
            last_revision_with_quorum: Some(150),
            ..EtcdClusterStatus::default()
        });
        cluster
    }

    fn proven(object: &str, revision: i64, proven: bool) -> SnapshotRecord {
        SnapshotRecord {
            store: "s3://b".into(),
            object: object.into(),
            revision: Some(revision),
            proof: Some(SnapshotProof { proven, ..SnapshotProof::default() }),
            ..SnapshotRecord::default()
        }
    }

    #[test]
    fn the_newest_proven_snapshot_and_the_recorded_membership_are_used() {
        let members = [("etcd-1", "http://etcd-1.etcd:2380"), ("etcd-0", "http://etcd-0.etcd:2380")];
        let c = cluster(&members, vec![proven("a", 100, true), proven("b", 120, false)]);
        let resolved = resolve_restore(&c, "s3://b", None, None, "etcd", "data").unwrap();
        assert_eq!(resolved.object, "a");
        assert_eq!(resolved.lost_revisions(), Some(50));
        let names: Vec<_> = resolved.members.iter().map(|m| (m.name.as_str(), m.claim.as_str())).collect();
        assert_eq!(names, [("etcd-0", "data-etcd-0"), ("etcd-1", "data-etcd-1")]);
    }

    #[test]
    fn what_cannot_be_resolved_says_what_to_do() {
        let members = [("etcd-0", "http://etcd-0.etcd:2380")];
        let none_proven = cluster(&members, vec![proven("b", 120, false)]);
        let why = resolve_restore(&none_proven, "s3://b", None, None, "etcd", "data").unwrap_err();
        assert!(why.contains("Verify"), "{why}");
        let named = resolve_restore(&none_proven, "s3://b", Some("x.db"), None, "etcd", "data").unwrap();
        assert_eq!((named.object.as_str(), named.record), ("x.db", None));
        let strangers = cluster(&[("node-a", "http://a:2380")], vec![]);
        let why = resolve_restore(&strangers, "s3://b", Some("x.db"), None, "etcd", "data").unwrap_err();
        assert!(why.contains("not a pod of StatefulSet etcd"), "{why}");
        let unknown = cluster(&[], vec![]);
        assert!(
            resolve_restore(&unknown, "s3://b", Some("x"), None, "etcd", "data")
                .unwrap_err()
                .contains("membership")
        );
    }

    /// The revision of a time: the newest full snapshot written by then and its chain's deltas
    /// written by then; a time before every full snapshot, or deltas the catalog no longer lists,
    /// refused saying why.
    #[test]
    fn a_time_resolves_to_the_newest_backup_written_by_then() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
        let t = |second: i64| jiff::Timestamp::from_second(1_780_000_000 + second).unwrap();
        let record = |object: &str, start: Option<i64>, revision: i64, second: i64| SnapshotRecord {
            store: "s3://b".into(),
            object: object.into(),
            start_revision: start,
            revision: Some(revision),
            written_at: Some(Time(t(second))),
            ..SnapshotRecord::default()
        };
        let catalog = vec![
            record("f1.db", None, 100, 0),
            record("d1", Some(100), 120, 30),
            record("d2", Some(120), 150, 60),
            record("f2.db", None, 180, 90),
            record("d3", Some(180), 200, 120),
            SnapshotRecord { store: "pvc/other".into(), ..record("elsewhere", Some(200), 900, 125) },
        ];
        for (second, revision) in [(0, 100), (29, 100), (30, 120), (75, 150), (90, 180), (500, 200)] {
            assert_eq!(revision_at(&catalog, "s3://b", t(second)), Ok(revision), "at {second}");
        }
        let before = revision_at(&catalog, "s3://b", t(-1)).unwrap_err();
        assert!(before.contains("before the oldest full snapshot"), "{before}");
        let gap: Vec<SnapshotRecord> = catalog.iter().filter(|r| r.object != "d1").cloned().collect();
        let missing = revision_at(&gap, "s3://b", t(70)).unwrap_err();
        assert!(
            missing.contains("between revisions 100 and 120") && missing.contains("toRevision"),
            "{missing}"
        );
        assert_eq!(revision_at(&gap, "s3://b", t(95)), Ok(180), "a newer full snapshot needs no old delta");
    }
}
