//! `snapshot list`: an EtcdCluster's snapshots as its status records them, the last proof that
//! one restores and whether the quorum is lost; and the lines `etcd status` and `task describe`
//! share with it (a proof, a copy).

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use serde::Serialize;

use groundskeeper_api::EtcdCluster;
use groundskeeper_api::etcd_cluster::EtcdClusterStatus;
use groundskeeper_api::maintenance_task::CopyStatus;
use groundskeeper_api::snapshot_catalog::{SnapshotProof, SnapshotRecord};

use super::{size, table, when};

/// Hex digits of a SHA-256 shown in tables (the whole one is in `-o yaml`).
const SHORT_SHA: usize = 12;

/// What `snapshot list -o json|yaml` prints: the records in the order of the table, with the
/// last proof and the quorum's state.
#[derive(Serialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotsView {
    pub cluster: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_snapshot_proof: Option<SnapshotProof>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quorum_lost_since: Option<Time>,
    pub snapshots: Vec<SnapshotRecord>,
}

/// The records of `cluster`, grouped by store (stores by name), newest first in each.
pub fn view(cluster: &EtcdCluster) -> SnapshotsView {
    let status = cluster.status.clone().unwrap_or_default();
    let mut snapshots = status.snapshots.clone();
    snapshots.sort_by(|a, b| {
        a.store.cmp(&b.store).then_with(|| {
            let key = |r: &SnapshotRecord| (r.written_at.as_ref().map(|t| t.0), r.revision, r.object.clone());
            key(b).cmp(&key(a))
        })
    });
    SnapshotsView {
        cluster: format!("{}/{}", cluster.namespace().unwrap_or_default(), cluster.name_any()),
        last_snapshot_proof: status.last_snapshot_proof,
        quorum_lost_since: status.quorum_lost_since,
        snapshots,
    }
}

/// `snapshot list`: the last proof and the quorum, then one row per snapshot.
pub fn list(cluster: &EtcdCluster, now: Timestamp) -> String {
    let view = view(cluster);
    let status = cluster.status.clone().unwrap_or_default();
    let name = cluster.name_any();
    let mut out = format!("EtcdCluster {}\n", view.cluster);
    out.push_str(&last_proof(view.last_snapshot_proof.as_ref(), now, &name));
    out.push('\n');
    out.push_str(&quorum(&status, now));
    out.push('\n');
    if view.snapshots.is_empty() {
        out.push_str(&format!(
            "\nNo snapshots recorded (status.snapshots lists what Snapshot, Delta, Copy and Verify tasks \
             wrote, copied or proved): take one with `kubectl groundskeeper task create snapshot --target {name}`\n"
        ));
        return out;
    }
    // The encoding column only when something is stored encoded: plain catalogs stay as narrow.
    let encoded = view.snapshots.iter().any(|r| r.encoding.is_some());
    let rows: Vec<Vec<String>> = view
        .snapshots
        .iter()
        .map(|r| {
            let mut row = vec![
                r.store.clone(),
                r.object.clone(),
                when(now, r.written_at.as_ref()),
                revision_cell(r),
                number(r.keys),
                size(r.size_bytes),
                r.sha256.as_deref().map_or("-".to_owned(), short_sha),
            ];
            if encoded {
                row.push(encoding_cell(r));
            }
            row.push(proof_cell(r.proof.as_ref()));
            row
        })
        .collect();
    let mut header = vec!["STORE", "NAME", "WRITTEN", "REVISION", "KEYS", "SIZE", "SHA-256"];
    if encoded {
        header.push("STORED AS");
    }
    header.push("PROOF");
    out.push('\n');
    out.push_str(&table(&header, &rows));
    out
}

/// Hex digits of a key id shown in tables (the whole one is in `-o yaml`, and in the runner's
/// message when a key is missing or another).
const SHORT_KEY_ID: usize = 8;

/// How a snapshot is stored: `zstd`, `zstd+aes-256-gcm (key 1a2b3c4d…)`, or `-` (as etcd sent it).
/// Never a key: only its id.
pub fn encoding_cell(record: &SnapshotRecord) -> String {
    let Some(encoding) = &record.encoding else {
        return "-".to_owned();
    };
    match &record.key_id {
        Some(id) if id.chars().count() > SHORT_KEY_ID => {
            format!("{encoding} (key {}…)", id.chars().take(SHORT_KEY_ID).collect::<String>())
        }
        Some(id) => format!("{encoding} (key {id})"),
        None => encoding.clone(),
    }
}

/// A full snapshot's revision, or a delta's span: `1200→1450 (+380 changes)`.
fn revision_cell(record: &SnapshotRecord) -> String {
    match (record.start_revision, record.changes) {
        (Some(start), Some(changes)) => format!("{start}→{} (+{changes} changes)", number(record.revision)),
        (Some(start), None) => format!("{start}→{}", number(record.revision)),
        _ => number(record.revision),
    }
}

fn number(value: Option<i64>) -> String {
    value.map_or("-".to_owned(), |n| n.to_string())
}

/// The first hex digits of a SHA-256.
pub fn short_sha(sha: &str) -> String {
    sha.chars().take(SHORT_SHA).collect()
}

/// A second-precision time.
fn at(time: &Time) -> String {
    time.0.round(jiff::Unit::Second).unwrap_or(time.0).to_string()
}

/// A snapshot's proof in a cell: `proven 2026-11-23T20:05:00Z rev 1200`, `FAILED: why`, or `-`.
pub fn proof_cell(proof: Option<&SnapshotProof>) -> String {
    match proof {
        None => "-".to_owned(),
        Some(proof) if proof.proven => {
            let mut cell = "proven".to_owned();
            if let Some(time) = &proof.at {
                cell.push_str(&format!(" {}", at(time)));
            }
            if let Some(revision) = proof.revision.or(proof.expected_revision) {
                cell.push_str(&format!(" rev {revision}"));
            }
            cell
        }
        Some(proof) if proof.message.is_empty() => "FAILED".to_owned(),
        Some(proof) => format!("FAILED: {}", proof.message),
    }
}

/// The cluster's last proof, in one line.
pub fn last_proof(proof: Option<&SnapshotProof>, now: Timestamp, cluster: &str) -> String {
    let Some(proof) = proof else {
        return format!(
            "no snapshot proven restorable yet: prove one with `kubectl groundskeeper task create verify \
             --target {cluster} --from STORE`"
        );
    };
    let task = proof.task.as_ref().map(|t| format!(", task {t}")).unwrap_or_default();
    let time = when(now, proof.at.as_ref());
    if proof.proven {
        let revision = proof.revision.or(proof.expected_revision).map_or("-".to_owned(), |r| r.to_string());
        format!(
            "last snapshot proven restorable at {time}, revision {revision}: {} in {}{task}",
            proof.object, proof.store
        )
    } else {
        let why = if proof.message.is_empty() { String::new() } else { format!(": {}", proof.message) };
        format!("last proof FAILED at {time}: {} in {}{task}{why}", proof.object, proof.store)
    }
}

/// Whether the quorum is lost, and since when: `quorum: LOST since …`, `quorum: held (…)`.
pub fn quorum(status: &EtcdClusterStatus, now: Timestamp) -> String {
    format!("quorum: {}", quorum_state(status, now))
}

/// The same without the word `quorum`, for a field of that name.
pub fn quorum_state(status: &EtcdClusterStatus, now: Timestamp) -> String {
    let healthy = match (status.healthy_members, status.member_count) {
        (Some(healthy), Some(count)) => format!(" ({healthy} of {count} members healthy)"),
        _ => String::new(),
    };
    match &status.quorum_lost_since {
        Some(since) => format!("LOST since {}{healthy}", when(now, Some(since))),
        None if status.last_observed_time.is_none() => "not observed yet".to_owned(),
        None => format!("held{healthy}"),
    }
}

/// A Verify's (or a Snapshot's with `verify`) proof, for `task describe`.
pub fn proof(proof: &SnapshotProof, now: Timestamp) -> String {
    let mut out = String::new();
    let mut field =
        |name: &str, value: String| out.push_str(&format!("  {:<12}{value}\n", format!("{name}:")));
    field("Snapshot", format!("{} in {}", proof.object, proof.store));
    field(
        "Outcome",
        if proof.proven {
            "proven restorable".to_owned()
        } else {
            "FAILED: it did not restore as recorded".to_owned()
        },
    );
    field("At", when(now, proof.at.as_ref()));
    field("Revision", served_of_expected(proof.revision, proof.expected_revision));
    field("Keys", served_of_expected(proof.keys, proof.expected_keys));
    if let Some(sha) = &proof.sha256 {
        field("SHA-256", sha.clone());
    }
    if !proof.message.is_empty() {
        field("Message", proof.message.clone());
    }
    out
}

/// `1200 (recorded 1200)`: what the restored member served beside what was recorded.
fn served_of_expected(served: Option<i64>, expected: Option<i64>) -> String {
    match (served, expected) {
        (Some(served), Some(expected)) => format!("{served} (recorded {expected})"),
        (Some(served), None) => served.to_string(),
        (None, Some(expected)) => format!("- (recorded {expected})"),
        (None, None) => "-".to_owned(),
    }
}

/// A Copy's outcome, for `task describe`.
pub fn copy(copy: &CopyStatus) -> String {
    let mut out = format!("  {} → {}\n", copy.from, copy.to);
    let list = |names: &[String]| if names.is_empty() { "none".to_owned() } else { names.join(", ") };
    let mut field =
        |name: &str, value: String| out.push_str(&format!("  {:<15}{value}\n", format!("{name}:")));
    let bytes = copy.bytes_copied.map(|b| format!(", {}", size(Some(b)))).unwrap_or_default();
    field("Copied", format!("{}{bytes}: {}", copy.copied.len(), list(&copy.copied)));
    field("Already there", format!("{}: {}", copy.already_there.len(), list(&copy.already_there)));
    field("Failed", format!("{}: {}", copy.failed.len(), list(&copy.failed)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn now() -> Timestamp {
        "2026-11-23T21:00:00Z".parse().unwrap()
    }

    fn cluster(status: serde_json::Value) -> EtcdCluster {
        serde_json::from_value(json!({
            "apiVersion": "groundskeeper.dev/v1alpha1",
            "kind": "EtcdCluster",
            "metadata": {"name": "main", "namespace": "etcd"},
            "spec": {"endpoints": ["http://a:2379"]},
            "status": status,
        }))
        .unwrap()
    }

    fn catalog() -> serde_json::Value {
        json!([
            {"store": "s3://backups/etcd", "object": "main-20261123T180000Z.db", "writtenAt": "2026-11-23T18:00:10Z",
             "revision": 1100, "keys": 320, "sizeBytes": 12582912, "sha256": "0123456789abcdef0123",
             "proof": {"store": "s3://backups/etcd", "object": "main-20261123T180000Z.db", "proven": true,
                       "at": "2026-11-23T18:05:00Z", "revision": 1100, "expectedRevision": 1100}},
            {"store": "pvc/main-snapshots", "object": "main-20261123T200000Z.db", "writtenAt": "2026-11-23T20:00:05Z",
             "revision": 1200, "keys": 340, "sizeBytes": 13631488, "sha256": "fedcba9876543210fedc"},
            {"store": "s3://backups/etcd", "object": "main-20261123T200000Z.db", "writtenAt": "2026-11-23T20:01:00Z",
             "revision": 1200, "keys": 340, "sizeBytes": 13631488, "sha256": "fedcba9876543210fedc",
             "proof": {"store": "s3://backups/etcd", "object": "main-20261123T200000Z.db", "proven": false,
                       "message": "the restored member holds 339 keys, 340 were recorded"}}
        ])
    }

    #[test]
    fn the_list_groups_by_store_newest_first_with_the_proof_and_quorum_above() {
        let c = cluster(json!({
            "lastObservedTime": "2026-11-23T20:59:00Z", "memberCount": 3, "healthyMembers": 1,
            "quorumLostSince": "2026-11-23T20:48:00Z",
            "snapshots": catalog(),
            "lastSnapshotProof": {"store": "s3://backups/etcd", "object": "main-20261123T180000Z.db", "proven": true,
                                  "at": "2026-11-23T18:05:00Z", "revision": 1100, "task": "verify-1"}
        }));
        assert_eq!(
            list(&c, now()),
            "\
EtcdCluster etcd/main
last snapshot proven restorable at 2026-11-23T18:05:00Z (2h ago), revision 1100: main-20261123T180000Z.db in s3://backups/etcd, task verify-1
quorum: LOST since 2026-11-23T20:48:00Z (12m ago) (1 of 3 members healthy)

STORE                NAME                       WRITTEN                          REVISION   KEYS   SIZE                  SHA-256        PROOF
pvc/main-snapshots   main-20261123T200000Z.db   2026-11-23T20:00:05Z (59m ago)   1200       340    13.0 MiB (13631488)   fedcba987654   -
s3://backups/etcd    main-20261123T200000Z.db   2026-11-23T20:01:00Z (59m ago)   1200       340    13.0 MiB (13631488)   fedcba987654   FAILED: the restored member holds 339 keys, 340 were recorded
s3://backups/etcd    main-20261123T180000Z.db   2026-11-23T18:00:10Z (2h ago)    1100       320    12.0 MiB (12582912)   0123456789ab   proven 2026-11-23T18:05:00Z rev 1100
"
        );
    }

    /// A column says how each is stored, with the key's id (never a key), once one is encoded.
    #[test]
    fn encoded_snapshots_show_their_encoding_and_key_id() {
        let c = cluster(json!({"snapshots": [
            {"store": "pvc/main-snapshots", "object": "main-20261123T200000Z.db", "writtenAt": "2026-11-23T20:00:05Z",
             "revision": 1200, "keys": 340, "sizeBytes": 3631488, "encoding": "zstd+aes-256-gcm",
             "keyId": "1a2b3c4d5e6f7081", "contentBytes": 13631488},
            {"store": "pvc/main-snapshots", "object": "main-20261123T190000Z.db", "writtenAt": "2026-11-23T19:00:05Z",
             "revision": 1100, "keys": 320, "sizeBytes": 3631000, "encoding": "zstd"},
            {"store": "pvc/main-snapshots", "object": "main-20261123T180000Z.db", "writtenAt": "2026-11-23T18:00:05Z",
             "revision": 1000, "keys": 300, "sizeBytes": 12582912}
        ]}));
        let text = list(&c, now());
        assert!(text.contains("SHA-256   STORED AS "), "{text}");
        let row = |name: &str| text.lines().find(|l| l.contains(name)).unwrap().to_owned();
        assert!(row("T200000Z").contains("zstd+aes-256-gcm (key 1a2b3c4d…)"), "{text}");
        assert!(row("T190000Z").contains(" zstd "), "{text}");
        assert!(row("T180000Z").contains(" -   "), "{text}");
        // A plain catalog has no such column.
        let plain = cluster(json!({"snapshots": [
            {"store": "pvc/s", "object": "main-20261123T180000Z.db", "revision": 1000}
        ]}));
        assert!(!list(&plain, now()).contains("STORED AS"));
    }

    #[test]
    fn a_delta_shows_its_span_and_changes() {
        let c = cluster(json!({"snapshots": [
            {"store": "pvc/main-snapshots", "object": "main-20261123T200000Z.db", "writtenAt": "2026-11-23T20:00:05Z",
             "revision": 1200, "keys": 340, "sizeBytes": 13631488},
            {"store": "pvc/main-snapshots",
             "object": "main-20261123T205000Z-0000000000000001200-0000000000000001350.delta",
             "writtenAt": "2026-11-23T20:50:02Z", "startRevision": 1200, "revision": 1350, "changes": 380,
             "sizeBytes": 41943}
        ]}));
        let text = list(&c, now());
        let delta = text.lines().find(|l| l.contains(".delta")).expect("the delta's row");
        assert!(delta.contains("1200→1350 (+380 changes)"), "{text}");
        assert!(delta.contains("(41943)"), "{text}");
        let full = text.lines().find(|l| l.contains("T200000Z.db")).unwrap();
        assert!(full.contains(" 1200 ") && full.contains(" 340 "), "{text}");
    }

    #[test]
    fn the_lines_above_the_table() {
        type Case = (&'static str, serde_json::Value, &'static [&'static str]);
        let cases: &[Case] = &[
            (
                "nothing known",
                json!({}),
                &[
                    "no snapshot proven restorable yet: prove one with `kubectl groundskeeper task create verify --target main --from STORE`\n",
                    "quorum: not observed yet\n",
                    "No snapshots recorded",
                    "task create snapshot --target main`\n",
                ],
            ),
            (
                "a failed last proof, quorum held",
                json!({"lastObservedTime": "2026-11-23T20:59:00Z", "memberCount": 3, "healthyMembers": 3,
                       "lastSnapshotProof": {"store": "pvc/s", "object": "a.db", "proven": false,
                                             "at": "2026-11-23T20:30:00Z", "message": "etcd did not start"}}),
                &[
                    "last proof FAILED at 2026-11-23T20:30:00Z (30m ago): a.db in pvc/s: etcd did not start\n",
                    "quorum: held (3 of 3 members healthy)\n",
                ],
            ),
        ];
        for (what, status, wanted) in cases {
            let got = list(&cluster(status.clone()), now());
            for line in *wanted {
                assert!(got.contains(line), "{what}: missing {line:?} in\n{got}");
            }
        }
    }

    #[test]
    fn proof_cells() {
        let proof = |value: serde_json::Value| -> SnapshotProof { serde_json::from_value(value).unwrap() };
        let cases = [
            (None, "-"),
            (
                Some(proof(
                    json!({"store": "s", "object": "o", "proven": true, "at": "2026-11-23T18:05:00.4Z", "revision": 7}),
                )),
                "proven 2026-11-23T18:05:00Z rev 7",
            ),
            (
                Some(proof(json!({"store": "s", "object": "o", "proven": true, "expectedRevision": 9}))),
                "proven rev 9",
            ),
            (Some(proof(json!({"store": "s", "object": "o", "proven": false}))), "FAILED"),
            (
                Some(proof(json!({"store": "s", "object": "o", "proven": false, "message": "bad"}))),
                "FAILED: bad",
            ),
        ];
        for (given, wanted) in cases {
            assert_eq!(proof_cell(given.as_ref()), wanted, "{given:?}");
        }
    }

    #[test]
    fn the_view_keeps_the_table_order() {
        let c = cluster(json!({"snapshots": catalog()}));
        let order: Vec<(String, String)> =
            view(&c).snapshots.into_iter().map(|r| (r.store, r.object)).collect();
        assert_eq!(
            order,
            [
                ("pvc/main-snapshots".to_owned(), "main-20261123T200000Z.db".to_owned()),
                ("s3://backups/etcd".to_owned(), "main-20261123T200000Z.db".to_owned()),
                ("s3://backups/etcd".to_owned(), "main-20261123T180000Z.db".to_owned()),
            ]
        );
    }

    #[test]
    fn a_proof_and_a_copy_for_describe() {
        let proven: SnapshotProof = serde_json::from_value(json!({
            "store": "s3://b", "object": "a.db", "proven": false, "at": "2026-11-23T20:55:00Z",
            "revision": 10, "expectedRevision": 10, "keys": 9, "expectedKeys": 10, "sha256": "abc",
            "message": "the restored member holds 9 keys, 10 were recorded"
        }))
        .unwrap();
        assert_eq!(
            proof(&proven, now()),
            "  Snapshot:   a.db in s3://b\n  Outcome:    FAILED: it did not restore as recorded\n  At:         2026-11-23T20:55:00Z (5m ago)\n  Revision:   10 (recorded 10)\n  Keys:       9 (recorded 10)\n  SHA-256:    abc\n  Message:    the restored member holds 9 keys, 10 were recorded\n"
        );
        let copied: CopyStatus = serde_json::from_value(json!({
            "from": "pvc/main-snapshots", "to": "s3://b", "copied": ["a.db", "b.db"], "alreadyThere": ["c.db"],
            "bytesCopied": 2097152
        }))
        .unwrap();
        assert_eq!(
            copy(&copied),
            "  pvc/main-snapshots → s3://b\n  Copied:        2, 2.0 MiB (2097152): a.db, b.db\n  Already there: 1: c.db\n  Failed:        0: none\n"
        );
    }
}
