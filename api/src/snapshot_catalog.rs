//! What an EtcdCluster's status keeps of its snapshots: every snapshot its tasks wrote or copied,
//! by store, with what it holds and whether it was proven to restore; the catalog the plugin's
//! `snapshot list` shows and a Restore picks its snapshot from.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Most snapshots `status.snapshots` keeps (the newest).
pub const MAX_CATALOG_ENTRIES: usize = 50;

/// One snapshot in one store.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotRecord {
    /// `pvc/NAME` or the bucket's URL.
    pub store: String,
    /// The file's or object's name in it.
    pub object: String,
    /// When it was written there (the end of the task's Job).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub written_at: Option<Time>,
    /// The highest revision the snapshot holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<i64>,
    /// Set for a delta (an incremental snapshot): it holds the changes after this revision up
    /// to `revision`, and restores only on top of a full snapshot or delta ending here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_revision: Option<i64>,
    /// A delta's changes (puts and deletes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changes: Option<i64>,
    /// Keys at that revision, counted when the snapshot was taken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keys: Option<i64>,
    /// Size of the file in bytes, etcd's 32-byte SHA-256 trailer included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_bytes: Option<i64>,
    /// For people, e.g. `12.34 MiB`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<String>,
    /// SHA-256 of the whole file, hex.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// How it is stored: `zstd`, `aes-256-gcm` or `zstd+aes-256-gcm`; absent: as etcd sent it.
    /// `sizeBytes` and `sha256` are of the bytes stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encoding: Option<String>,
    /// The id of the key it is encrypted with (the first bytes of the key's SHA-256, never the
    /// key): the key needed to open it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_id: Option<String>,
    /// Size of the snapshot or delta once decoded, when it is stored encoded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_bytes: Option<i64>,
    /// The task that wrote or copied it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    /// The last proof of this snapshot, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proof: Option<SnapshotProof>,
}

/// Whether a snapshot was proven to restore: restored into a throwaway member, started, and found
/// serving the revision and holding the keys recorded when it was taken.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotProof {
    /// `pvc/NAME` or the bucket's URL.
    pub store: String,
    /// The snapshot's file or object name in that store.
    pub object: String,
    /// True: it restored and served what was recorded.
    pub proven: bool,
    /// When the proof ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<Time>,
    /// The revision the restored member served.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<i64>,
    /// The revision it had to serve: the one recorded when the snapshot was taken (in the catalog,
    /// else in the object's metadata), else the highest the file holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_revision: Option<i64>,
    /// The number of keys the restored member held at that revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keys: Option<i64>,
    /// The number of keys it had to hold: the count recorded when the snapshot was taken (in the
    /// catalog, else in the object's metadata). Absent: none was recorded, and the keys were not
    /// compared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_keys: Option<i64>,
    /// SHA-256 of the whole snapshot file the proof fetched, hex (what `sha256sum FILE` prints).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// The task that ran the proof.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    /// In one line: what was proven, or what failed.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

/// `records` with `record` put in: the entry of the same store and object replaced (its proof
/// kept when the snapshot is the same, by checksum), else added; the oldest dropped beyond
/// [`MAX_CATALOG_ENTRIES`].
pub fn with_record(mut records: Vec<SnapshotRecord>, mut record: SnapshotRecord) -> Vec<SnapshotRecord> {
    if let Some(at) = records.iter().position(|r| r.store == record.store && r.object == record.object) {
        let old = records.remove(at);
        if record.proof.is_none() && old.sha256.is_some() && old.sha256 == record.sha256 {
            record.proof = old.proof;
        }
    }
    records.push(record);
    // Deltas come every few minutes: over the limit the oldest deltas leave first, so that they
    // never push the full snapshots they build on (and the proofs of those) out of the catalog.
    while records.len() > MAX_CATALOG_ENTRIES {
        let oldest_delta = records.iter().position(SnapshotRecord::is_delta);
        records.remove(oldest_delta.unwrap_or(0));
    }
    records
}

impl SnapshotRecord {
    /// An incremental snapshot: the changes after `start_revision`, not a db of its own.
    pub fn is_delta(&self) -> bool {
        self.start_revision.is_some()
    }
}

/// `records` with `proof` attached to its snapshot (added to the catalog when unknown there).
pub fn with_proof(mut records: Vec<SnapshotRecord>, proof: &SnapshotProof) -> Vec<SnapshotRecord> {
    match records.iter_mut().find(|r| r.store == proof.store && r.object == proof.object) {
        Some(record) => record.proof = Some(proof.clone()),
        None => {
            records = with_record(
                records,
                SnapshotRecord {
                    store: proof.store.clone(),
                    object: proof.object.clone(),
                    revision: proof.expected_revision.or(proof.revision),
                    keys: proof.expected_keys.or(proof.keys),
                    sha256: proof.sha256.clone(),
                    proof: Some(proof.clone()),
                    ..SnapshotRecord::default()
                },
            )
        }
    }
    records
}

/// `records` without the snapshots `deleted` from `store` (retention).
pub fn without_deleted(records: Vec<SnapshotRecord>, store: &str, deleted: &[String]) -> Vec<SnapshotRecord> {
    records.into_iter().filter(|r| !(r.store == store && deleted.contains(&r.object))).collect()
}

/// The newest snapshot in `store` proven to restore: the last written there (then the highest
/// revision). Not by revision first: a restore sets the revisions back to the snapshot's, so a
/// snapshot taken after a restore holds a lower revision than the ones from before it.
pub fn newest_proven<'a>(records: &'a [SnapshotRecord], store: &str) -> Option<&'a SnapshotRecord> {
    records
        .iter()
        .filter(|r| r.store == store && r.proof.as_ref().is_some_and(|p| p.proven))
        .max_by(|a, b| (&a.written_at, a.revision).cmp(&(&b.written_at, b.revision)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(store: &str, object: &str, revision: i64, sha: &str) -> SnapshotRecord {
        SnapshotRecord {
            store: store.into(),
            object: object.into(),
            revision: Some(revision),
            sha256: Some(sha.into()),
            ..SnapshotRecord::default()
        }
    }

    fn proof(store: &str, object: &str, proven: bool) -> SnapshotProof {
        SnapshotProof { store: store.into(), object: object.into(), proven, ..SnapshotProof::default() }
    }

    #[test]
    fn a_record_replaces_the_same_object_and_keeps_its_proof_only_for_the_same_bytes() {
        let records = with_proof(vec![record("pvc/s", "a.db", 10, "aa")], &proof("pvc/s", "a.db", true));
        let same = with_record(records.clone(), record("pvc/s", "a.db", 10, "aa"));
        assert_eq!(same.len(), 1);
        assert!(same[0].proof.as_ref().unwrap().proven);
        let other = with_record(records, record("pvc/s", "a.db", 12, "bb"));
        assert_eq!(other.len(), 1);
        assert_eq!(other[0].proof, None, "another snapshot under the same name is not proven");
    }

    #[test]
    fn the_catalog_keeps_the_newest_entries() {
        let mut records = Vec::new();
        for i in 0..(MAX_CATALOG_ENTRIES as i64 + 5) {
            records = with_record(records, record("s3://b", &format!("{i}.db"), i, "x"));
        }
        assert_eq!(records.len(), MAX_CATALOG_ENTRIES);
        assert_eq!(records[0].object, "5.db");
    }

    /// Deltas every few minutes never push the full snapshots out: over the limit the oldest
    /// delta leaves first, and the fulls go only when no delta is left to go.
    #[test]
    fn deltas_leave_the_catalog_before_full_snapshots() {
        let delta = |i: i64| SnapshotRecord {
            start_revision: Some(i),
            ..record("s3://b", &format!("{i}.delta"), i + 1, "d")
        };
        let mut records =
            vec![record("s3://b", "full-1.db", 1, "f1"), record("s3://b", "full-2.db", 2, "f2")];
        for i in 0..(MAX_CATALOG_ENTRIES as i64 * 2) {
            records = with_record(records, delta(i));
        }
        assert_eq!(records.len(), MAX_CATALOG_ENTRIES);
        let fulls: Vec<&str> = records.iter().filter(|r| !r.is_delta()).map(|r| r.object.as_str()).collect();
        assert_eq!(fulls, ["full-1.db", "full-2.db"]);
        let oldest_delta_kept = records.iter().find(|r| r.is_delta()).unwrap().object.clone();
        assert_eq!(oldest_delta_kept, format!("{}.delta", MAX_CATALOG_ENTRIES as i64 + 2));
        for i in 0..(MAX_CATALOG_ENTRIES as i64) {
            records = with_record(records, record("s3://b", &format!("full-{}.db", i + 3), i + 3, "f"));
        }
        assert!(records.iter().all(|r| !r.is_delta()), "deltas go before any full snapshot");
        assert_eq!(records[0].object, "full-3.db");
    }

    #[test]
    fn the_newest_proven_snapshot_of_a_store_is_chosen() {
        let mut records = vec![
            record("s3://b", "1.db", 10, "a"),
            record("s3://b", "2.db", 20, "b"),
            record("s3://b", "3.db", 30, "c"),
            record("pvc/s", "4.db", 40, "d"),
        ];
        for (object, proven) in [("1.db", true), ("2.db", true), ("3.db", false)] {
            records = with_proof(records, &proof("s3://b", object, proven));
        }
        records = with_proof(records, &proof("pvc/s", "4.db", true));
        assert_eq!(newest_proven(&records, "s3://b").map(|r| r.object.as_str()), Some("2.db"));
        let records = without_deleted(records, "s3://b", &["2.db".to_owned()]);
        assert_eq!(newest_proven(&records, "s3://b").map(|r| r.object.as_str()), Some("1.db"));
    }

    /// After a restore the revisions start again from the snapshot's: the snapshot written last
    /// is the newest, whatever its revision.
    #[test]
    fn the_newest_proven_is_the_last_written_not_the_highest_revision() {
        let at = |second: i64| Some(Time(jiff::Timestamp::from_second(1_900_000_000 + second).unwrap()));
        let mut before = record("s3://b", "before-restore.db", 1300, "a");
        before.written_at = at(0);
        let mut after = record("s3://b", "after-restore.db", 1050, "b");
        after.written_at = at(60);
        let mut records = vec![before, after];
        for object in ["before-restore.db", "after-restore.db"] {
            records = with_proof(records, &proof("s3://b", object, true));
        }
        assert_eq!(newest_proven(&records, "s3://b").map(|r| r.object.as_str()), Some("after-restore.db"));
    }
}
