use groundskeeper_protocol::OperationKind;
use groundskeeper_stores::etcd::plan::DefragPolicy;
use serde_json::json;

use super::*;
use crate::etcd::snapshot_steps::{SNAPSHOT_MOUNT_DIR, snapshot_file_name};
use crate::jobs::ClaimVolume;
use groundskeeper_api::snapshot_store::Store;
use groundskeeper_api::validate::Snapshot;

fn cluster(status: serde_json::Value) -> EtcdCluster {
    serde_json::from_value(json!({
        "apiVersion": "groundskeeper.dev/v1alpha1",
        "kind": "EtcdCluster",
        "metadata": {"name": "main", "namespace": "etcd"},
        "spec": {"endpoints": ["http://e-0:2379", "http://e-1:2379", "http://e-2:2379"]},
        "status": status,
    }))
    .unwrap()
}

fn policy() -> Policy {
    Policy::from_spec(&cluster(json!({})).spec).unwrap()
}

fn every_member() -> DefragPolicy {
    DefragPolicy { min_defrag_bytes: 0, max_fragmented_percent: 0.0 }
}

fn naming() -> SnapshotNaming {
    SnapshotNaming { cluster: "main".into(), time: "2026-01-02T15:04:05.9Z".parse().unwrap() }
}

/// Each step as the runner's arguments, joined.
fn rendered(work: &Work) -> Vec<String> {
    steps(work, &policy(), &naming(), &cluster(json!({})))
        .unwrap()
        .iter()
        .map(|step| step.operation.to_args().join(" "))
        .collect()
}

#[test]
fn each_kind_of_work_becomes_its_steps() {
    let keep = Compact { target: CompactTarget::RetainRevisions(10_000), physical: false };
    let exact = Compact { target: CompactTarget::Revision(77), physical: false };
    let endpoints = "--endpoints http://e-0:2379,http://e-1:2379,http://e-2:2379";
    let cases: Vec<(&str, Work, Vec<String>)> = vec![
        (
            "compact keeping revisions",
            Work::Compact(keep),
            vec![format!("compact {endpoints} --physical --retain-revisions 10000")],
        ),
        (
            "defragment every member",
            Work::Defragment(every_member()),
            vec![format!("defrag {endpoints} --min-defrag-bytes 0 --max-fragmented-percent 0")],
        ),
        (
            "maintenance keeping revisions: one defrag that compacts first",
            Work::Maintenance { compact: keep, defragment: every_member() },
            vec![format!(
                "defrag {endpoints} --min-defrag-bytes 0 --max-fragmented-percent 0 \
                 --compact-retain-revisions 10000"
            )],
        ),
        (
            "maintenance to an exact revision: compact, then defrag",
            Work::Maintenance { compact: exact, defragment: every_member() },
            vec![
                format!("compact {endpoints} --physical --revision 77"),
                format!("defrag {endpoints} --min-defrag-bytes 0 --max-fragmented-percent 0"),
            ],
        ),
    ];
    for (name, work, wanted) in cases {
        assert_eq!(rendered(&work), wanted, "{name}");
    }
}

/// A snapshot is one Job that mounts the claim and names its file by the cluster and the task's
/// time (to the second), with retention told which files are the cluster's.
#[test]
fn a_snapshot_is_one_step_writing_to_its_claim() {
    let endpoints = "--endpoints http://e-0:2379,http://e-1:2379,http://e-2:2379";
    // (template, file)
    for (template, file) in [
        ("{cluster}-{time}.db", "main-20260102T150405Z.db"),
        ("etcd-{time}", "etcd-20260102T150405Z"),
        ("{cluster}.db", "main.db"),
    ] {
        let work = Work::Snapshot(Snapshot {
            encoding: Default::default(),
            persistent_volume_claim: "snaps".into(),
            store: Store::Claim("snaps".into()),
            verify: false,
            file_name: template.into(),
            retain: 3,
            rules: Default::default(),
        });
        let planned = steps(&work, &policy(), &naming(), &cluster(json!({}))).unwrap();
        assert_eq!(planned.len(), 1, "{template}");
        assert_eq!(
            planned[0].operation.to_args().join(" "),
            format!(
                "snapshot {endpoints} --output /snapshots/{file} --retain 3 \
                 --file-name-template {template} --cluster main"
            )
        );
        assert_eq!(
            planned[0].claims,
            [ClaimVolume { claim_name: "snaps".into(), mount_path: SNAPSHOT_MOUNT_DIR.into() }]
        );
    }
}

#[test]
fn a_snapshot_name_that_is_no_plain_file_name_is_refused() {
    for (template, says) in [("..", "names a folder"), ("a/{time}", "'/'")] {
        let work = Snapshot {
            encoding: Default::default(),
            persistent_volume_claim: "snaps".into(),
            store: Store::Claim("snaps".into()),
            verify: false,
            file_name: template.into(),
            retain: 1,
            rules: Default::default(),
        };
        let why = snapshot_file_name(&work, &naming()).unwrap_err();
        assert!(why.contains(says), "{template}: {why}");
        assert!(why.starts_with("spec.config.snapshot.fileName"), "{why}");
    }
}

#[test]
fn a_missing_claim_is_named_with_what_to_do() {
    let why = missing_claim_reason("etcd", "main-snapshots");
    assert!(why.contains("PersistentVolumeClaim main-snapshots does not exist in namespace etcd"), "{why}");
    assert!(why.contains("Create it"), "{why}");
}

#[test]
fn the_cluster_takes_work_only_when_present_valid_and_healthy() {
    let healthy = cluster(json!({"memberCount": 3, "healthyMembers": 3}));
    let sick = cluster(json!({"memberCount": 3, "healthyMembers": 2}));
    let mut invalid = healthy.clone();
    invalid.spec.endpoints = vec!["e-0:2379".into()];
    let waits = |facts: TargetFacts, needle: &str| match facts {
        TargetFacts::Waiting { reason } => assert!(reason.contains(needle), "{reason}"),
        other => panic!("{other:?}: wanted a wait mentioning {needle}"),
    };
    assert_eq!(facts(None), TargetFacts::Missing);
    assert_eq!(facts(Some(&healthy)), TargetFacts::Ready);
    assert_eq!(facts(Some(&cluster(json!({})))), TargetFacts::Ready);
    waits(facts(Some(&sick)), "2 of 3 members");
    waits(facts(Some(&invalid)), "invalid spec");
}

#[test]
fn steps_are_the_runner_operations_they_say() {
    let kinds: Vec<OperationKind> = steps(
        &Work::Maintenance {
            compact: Compact { target: CompactTarget::Revision(5), physical: true },
            defragment: every_member(),
        },
        &policy(),
        &naming(),
        &cluster(json!({})),
    )
    .unwrap()
    .iter()
    .map(|step| step.operation.kind())
    .collect();
    assert_eq!(kinds, [OperationKind::Compact, OperationKind::Defrag]);
}

mod window {
    use super::*;
    use groundskeeper_protocol::operation::DefragRequest;
    use serde_json::json;

    fn cluster() -> EtcdCluster {
        serde_json::from_value(json!({
            "apiVersion": "groundskeeper.dev/v1alpha1", "kind": "EtcdCluster",
            "metadata": {"name": "main", "namespace": "etcd"},
            "spec": {"endpoints": ["http://e:2379"],
                     "maintenanceWindows": {"timeZone": "UTC", "windows": ["Mon-Fri 01:00-05:00"]}},
            "status": {"members": [
                {"name": "etcd-0", "id": "a", "endpoint": "http://e0:2379",
                 "defragHistory": [{"bytes": 100, "seconds": 1.0}, {"bytes": 300, "seconds": 1.0}, {"bytes": 200, "seconds": 1.0}]},
                {"name": "etcd-1", "id": "b", "endpoint": "http://e1:2379"}
            ]}
        }))
        .unwrap()
    }

    fn task(origin: &str, wait_for_window: bool) -> MaintenanceTask {
        serde_json::from_value(json!({
            "apiVersion": "groundskeeper.dev/v1alpha1", "kind": "MaintenanceTask",
            "metadata": {"name": "t", "namespace": "etcd", "labels": {"groundskeeper.dev/origin": origin}},
            "spec": {"target": {"kind": "EtcdCluster", "name": "main"}, "type": "Defragment", "waitForWindow": wait_for_window}
        }))
        .unwrap()
    }

    fn defrag() -> Step {
        Operation::Defrag(DefragRequest::default()).into()
    }

    fn window_of(step: &Step) -> (Option<String>, Vec<(String, f64)>) {
        match &step.operation {
            Operation::Defrag(request) => {
                let opened =
                    request.window_opened.as_deref().map(|o| format!(" opened {o}")).unwrap_or_default();
                (request.not_after.clone().map(|n| n + &opened), request.expected_rates.clone())
            }
            other => panic!("{other:?}"),
        }
    }

    /// A defrag step of a task that waits for windows runs until the window's end at each
    /// member's median rate; outside a window (the step came late) nothing may start; tasks that
    /// do not wait for windows and other steps are left as they are.
    #[test]
    fn a_defrag_step_is_told_the_end_of_its_window() {
        let inside: Timestamp = "2026-11-24T02:00:00Z".parse().unwrap();
        let (not_after, rates) =
            window_of(&within_window(&defrag(), &task("automatic", false), &cluster(), inside));
        assert_eq!(not_after.as_deref(), Some("2026-11-24T05:00:00Z opened 2026-11-24T01:00:00Z"));
        assert_eq!(rates, vec![("etcd-0".to_owned(), 200.0)], "the median rate; no history, no entry");
        let after: Timestamp = "2026-11-24T06:00:00Z".parse().unwrap();
        let (not_after, _) = window_of(&within_window(&defrag(), &task("manual", true), &cluster(), after));
        assert_eq!(not_after.as_deref(), Some("2026-11-24T06:00:00Z"), "closed: nothing fits");
        let (not_after, rates) =
            window_of(&within_window(&defrag(), &task("manual", false), &cluster(), inside));
        assert_eq!((not_after, rates.len()), (None, 0), "a task by hand ignores windows");
        let compact: Step = Operation::Compact(groundskeeper_protocol::operation::CompactRequest {
            etcd: Default::default(),
            to: groundskeeper_protocol::operation::CompactTo::Revision(5),
            physical: false,
            not_past: None,
        })
        .into();
        assert_eq!(within_window(&compact, &task("automatic", false), &cluster(), inside), compact);
    }
}

/// A snapshot to a bucket with a proof: the object named by the template, the credentials Secret
/// mounted whole, then a proof of that object with a scratch folder; the proof is told what the
/// snapshot's Job reported.
#[test]
fn a_snapshot_to_a_bucket_then_its_proof() {
    let bucket = groundskeeper_api::snapshot_store::BucketSpec {
        url: "s3://backups/etcd".into(),
        endpoint: Some("http://127.0.0.1:9000".into()),
        credentials_secret: Some("s3".into()),
        ..Default::default()
    };
    let work = Work::Snapshot(Snapshot {
        encoding: Default::default(),
        persistent_volume_claim: "main-snapshots".into(),
        store: Store::Bucket(bucket),
        verify: true,
        file_name: "{cluster}-{time}.db".into(),
        retain: 2,
        rules: groundskeeper_api::validate::RetentionRules {
            keep_within: None,
            tiers: vec!["1h:7d".into()],
            keep_deltas_for: Some("1d".into()),
            max_total_bytes: Some(1 << 30),
        },
    });
    let planned = steps(&work, &policy(), &naming(), &cluster(json!({}))).unwrap();
    assert_eq!(planned.len(), 2);
    let creds = "/var/run/groundskeeper/store";
    assert_eq!(
        planned[0].operation.to_args().join(" "),
        format!(
            "snapshot --endpoints http://e-0:2379,http://e-1:2379,http://e-2:2379 --to s3://backups/etcd \
             --to-option endpoint=http://127.0.0.1:9000 --to-option allow_http=true --to-credentials {creds}-to \
             --object main-20260102T150405Z.db --retain 2 --file-name-template {{cluster}}-{{time}}.db --cluster main \
             --keep-tier 1h:7d --keep-deltas-for 1d --max-total-bytes 1073741824"
        )
    );
    assert!(planned[0].claims.is_empty());
    assert_eq!(planned[0].secret_folders[0].secret_name, "s3");
    let report = groundskeeper_protocol::result::SnapshotReport {
        revision: Some(42),
        keys: Some(7),
        sha256: Some("ab".into()),
        ..Default::default()
    };
    let told = snapshot_steps::with_snapshot_result(&planned[1], &report);
    assert_eq!(
        told.operation.to_args().join(" "),
        format!(
            "snapshot-prove --from s3://backups/etcd --from-option endpoint=http://127.0.0.1:9000 \
             --from-option allow_http=true --from-credentials {creds}-from --object main-20260102T150405Z.db \
             --file-name-template {{cluster}}-{{time}}.db --cluster main --expect-revision 42 --expect-keys 7 \
             --expect-sha256 ab --scratch-dir /scratch"
        )
    );
    assert_eq!(told.scratch.as_ref().map(|s| s.size_limit.as_str()), Some("8Gi"), "unknown size: 8 GiB");
}
