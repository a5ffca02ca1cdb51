use serde_json::{Value, json};

use super::*;

/// A task `etcd/t1` read from JSON the way the API would hand it over.
fn task(spec: Value) -> MaintenanceTask {
    serde_json::from_value(json!({
        "apiVersion": "groundskeeper.dev/v1alpha1",
        "kind": "MaintenanceTask",
        "metadata": {"name": "t1", "namespace": "etcd"},
        "spec": spec,
    }))
    .expect("task deserializes")
}

fn etcd(task_type: &str, config: Value) -> MaintenanceTask {
    task(json!({"target": {"kind": "EtcdCluster", "name": "main"}, "type": task_type, "config": config}))
}

fn scylla(config: Value) -> MaintenanceTask {
    task(json!({"target": {"kind": "ScyllaCluster", "name": "sc"}, "type": "Cleanup", "config": config}))
}

fn errors_of(task: &MaintenanceTask) -> Vec<String> {
    validate(task).expect_err("the task is rejected").iter().map(ToString::to_string).collect()
}

#[test]
fn every_type_with_its_defaults_is_valid() {
    let cases = [
        (
            scylla(json!({})),
            Work::Cleanup(Cleanup {
                keyspaces: vec![],
                nodes: vec![],
                max_concurrent_per_rack: None,
                max_concurrent: None,
                per_node: Default::default(),
            }),
        ),
        (
            etcd("Compact", json!({})),
            Work::Compact(Compact { target: CompactTarget::RetainRevisions(10_000), physical: false }),
        ),
        (
            etcd("Defragment", json!({})),
            Work::Defragment(DefragPolicy { min_defrag_bytes: 0, max_fragmented_percent: 0.0 }),
        ),
        (
            etcd("Maintenance", json!({})),
            Work::Maintenance {
                compact: Compact { target: CompactTarget::RetainRevisions(10_000), physical: false },
                defragment: DefragPolicy { min_defrag_bytes: 0, max_fragmented_percent: 0.0 },
            },
        ),
        (
            etcd("Snapshot", json!({})),
            Work::Snapshot(Snapshot {
                persistent_volume_claim: "main-snapshots".into(),
                store: Store::Claim("main-snapshots".into()),
                verify: false,
                file_name: "{cluster}-{time}.db".into(),
                retain: 5,
                rules: Default::default(),
                encoding: Default::default(),
            }),
        ),
    ];
    for (task, wanted) in cases {
        let valid = validate(&task).unwrap_or_else(|e| panic!("{}", describe_errors(&e)));
        assert_eq!(valid.work, wanted);
        assert_eq!(valid.namespace, "etcd");
        assert_eq!(valid.name, "t1");
        assert_eq!(valid.ttl_after_finished, SignedDuration::from_hours(1));
        assert_eq!(valid.deadline, None);
    }
}

#[test]
fn settings_given_are_carried_over() {
    let valid = validate(&scylla(json!({"cleanup": {
        "keyspaces": ["ks1", "ks2"],
        "nodes": ["sc-dc1-r1-0"],
        "maxConcurrentPerRack": 2,
        "maxConcurrent": 3,
    }})))
    .unwrap();
    assert_eq!(
        valid.work,
        Work::Cleanup(Cleanup {
            keyspaces: vec!["ks1".into(), "ks2".into()],
            nodes: vec!["sc-dc1-r1-0".into()],
            max_concurrent_per_rack: Some(2),
            max_concurrent: Some(3),
            per_node: Default::default(),
        })
    );
    let valid = validate(&scylla(json!({"cleanup": {"keyspaces": ["ks1"], "nodes": ["a-0", "a-1"],
        "perNode": [{"node": "a-1", "keyspaces": ["ks2"], "markNodeClean": true}]}})))
    .unwrap();
    let Work::Cleanup(cleanup) = valid.work else { panic!("{:?}", valid.work) };
    // A node with an entry cleans its own keyspaces; the others the task's, Scylla's flag left.
    let work = |keyspaces: &[&str], mark_node_clean| crate::validate::NodeWork {
        keyspaces: keyspaces.iter().map(|k| (*k).to_owned()).collect(),
        mark_node_clean,
    };
    assert_eq!(cleanup.work_of("a-1"), work(&["ks2"], true));
    assert_eq!(cleanup.work_of("a-0"), work(&["ks1"], false));
    let valid = validate(&etcd(
        "Maintenance",
        json!({"maintenance": {"compact": {"revision": 42, "physical": true}, "defragment": {"minDefragBytes": 5, "maxFragmentedPercent": 45.5}}}),
    ))
    .unwrap();
    assert_eq!(
        valid.work,
        Work::Maintenance {
            compact: Compact { target: CompactTarget::Revision(42), physical: true },
            defragment: DefragPolicy { min_defrag_bytes: 5, max_fragmented_percent: 45.5 },
        }
    );
    let valid = validate(&etcd(
        "Snapshot",
        json!({"snapshot": {"persistentVolumeClaim": "backups", "fileName": "etcd-{time}.db", "retain": 1}}),
    ))
    .unwrap();
    assert_eq!(
        valid.work,
        Work::Snapshot(Snapshot {
            persistent_volume_claim: "backups".into(),
            store: Store::Claim("backups".into()),
            verify: false,
            file_name: "etcd-{time}.db".into(),
            retain: 1,
            rules: Default::default(),
            encoding: Default::default(),
        })
    );
}

#[test]
fn ttl_zero_and_a_deadline_are_valid() {
    let mut t = etcd("Compact", json!({"compact": {"retainRevisions": 0}}));
    t.spec.ttl_seconds_after_finished = 0;
    t.spec.deadline_seconds = Some(1);
    let valid = validate(&t).unwrap();
    assert_eq!(valid.ttl_after_finished, SignedDuration::ZERO);
    assert_eq!(valid.deadline, Some(SignedDuration::from_secs(1)));
    assert_eq!(
        valid.work,
        Work::Compact(Compact { target: CompactTarget::RetainRevisions(0), physical: false })
    );
}

#[test]
fn every_mistake_names_the_task_the_field_and_what_to_do() {
    let with = |mut t: MaintenanceTask, edit: fn(&mut MaintenanceTaskSpec)| {
        edit(&mut t.spec);
        t
    };
    let cases: Vec<(MaintenanceTask, &str)> = vec![
        (
            etcd("Purge", json!({})),
            "MaintenanceTask etcd/t1: spec.type: \"Purge\" is not a task type: use one of Cleanup, Compact, Defragment, Maintenance, Snapshot",
        ),
        (
            task(json!({"target": {"kind": "Deployment", "name": "x"}, "type": "Compact"})),
            "MaintenanceTask etcd/t1: spec.target.kind: \"Deployment\" is not a target kind: use ScyllaCluster or EtcdCluster",
        ),
        (
            task(json!({"target": {"kind": "EtcdCluster", "name": "main"}, "type": "Cleanup"})),
            "MaintenanceTask etcd/t1: spec.target.kind: type Cleanup works on a ScyllaCluster, not an EtcdCluster",
        ),
        (
            task(json!({"target": {"kind": "ScyllaCluster", "name": "sc"}, "type": "Defragment"})),
            "MaintenanceTask etcd/t1: spec.target.kind: type Defragment works on an EtcdCluster, not a ScyllaCluster",
        ),
        (
            task(json!({"target": {"kind": "EtcdCluster", "name": ""}, "type": "Compact"})),
            "MaintenanceTask etcd/t1: spec.target.name: is empty: name the ScyllaCluster or EtcdCluster",
        ),
        (
            with(etcd("Compact", json!({})), |s| s.target.name = "x".repeat(254)),
            "spec.target.name: is 254 characters long; the most is 253",
        ),
        (
            etcd("Defragment", json!({"compact": {}})),
            "MaintenanceTask etcd/t1: spec.config.compact: is set but spec.type is Defragment: remove it (only spec.config.defragment may be set)",
        ),
        (
            with(etcd("Compact", json!({})), |s| s.ttl_seconds_after_finished = -1),
            "MaintenanceTask etcd/t1: spec.ttlSecondsAfterFinished: -1 is negative: give 0",
        ),
        (
            with(etcd("Compact", json!({})), |s| s.ttl_seconds_after_failed = Some(-5)),
            "MaintenanceTask etcd/t1: spec.ttlSecondsAfterFailed: -5 is negative: give 0",
        ),
        (
            with(etcd("Compact", json!({})), |s| s.deadline_seconds = Some(0)),
            "MaintenanceTask etcd/t1: spec.deadlineSeconds: 0 is not positive: give 1 or more",
        ),
        (
            etcd("Compact", json!({"compact": {"retainRevisions": 10, "revision": 5}})),
            "MaintenanceTask etcd/t1: spec.config.compact: retainRevisions and revision are both set: give one of them",
        ),
        (
            etcd("Compact", json!({"compact": {"retainRevisions": -5}})),
            "MaintenanceTask etcd/t1: spec.config.compact.retainRevisions: -5 is negative: give 0 or more",
        ),
        (
            etcd("Compact", json!({"compact": {"revision": 0}})),
            "MaintenanceTask etcd/t1: spec.config.compact.revision: 0 is not a revision: give 1 or more",
        ),
        (
            etcd("Maintenance", json!({"maintenance": {"compact": {"revision": -1}}})),
            "spec.config.maintenance.compact.revision: -1 is not a revision",
        ),
        (
            etcd("Defragment", json!({"defragment": {"maxFragmentedPercent": 120.0}})),
            "spec.config.defragment.maxFragmentedPercent: 120 is not between 0 and 100",
        ),
        (
            etcd("Defragment", json!({"defragment": {"maxFragmentedPercent": -0.5}})),
            "spec.config.defragment.maxFragmentedPercent: -0.5 is not between 0 and 100",
        ),
        (
            etcd("Maintenance", json!({"maintenance": {"defragment": {"minDefragBytes": -1}}})),
            "spec.config.maintenance.defragment.minDefragBytes: -1 is negative",
        ),
        (
            scylla(json!({"cleanup": {"keyspaces": ["ks", ""]}})),
            "spec.config.cleanup.keyspaces[1]: is empty: give a name, or leave the list empty to clean every keyspace that needs it",
        ),
        (
            scylla(json!({"cleanup": {"keyspaces": ["ks", "ks"]}})),
            "spec.config.cleanup.keyspaces[1]: \"ks\" is listed twice",
        ),
        (
            scylla(json!({"cleanup": {"nodes": ["Node_1"]}})),
            "spec.config.cleanup.nodes[0]: \"Node_1\" is not a member Service name",
        ),
        (
            scylla(json!({"cleanup": {"nodes": ["x".repeat(64)]}})),
            "spec.config.cleanup.nodes[0]: is 64 characters long; the most is 63",
        ),
        (
            scylla(json!({"cleanup": {"nodes": vec!["n"; 1001]}})),
            "spec.config.cleanup.nodes: lists 1001 names; the most is 1000",
        ),
        (
            scylla(json!({"cleanup": {"nodes": ["a-0"], "perNode": [{"node": "a-1", "keyspaces": ["ks"]}]}})),
            "spec.config.cleanup.perNode[0].node: \"a-1\" is not listed in spec.config.cleanup.nodes",
        ),
        (
            scylla(json!({"cleanup": {"nodes": ["a-0"], "perNode": [{"node": "a-0"}, {"node": "a-0"}]}})),
            "spec.config.cleanup.perNode[1].node: \"a-0\" has two entries",
        ),
        (
            scylla(
                json!({"cleanup": {"nodes": ["a-0"], "perNode": [{"node": "a-0", "keyspaces": ["ks", "ks"]}]}}),
            ),
            "spec.config.cleanup.perNode[0].keyspaces[1]: \"ks\" is listed twice",
        ),
        (
            scylla(json!({"cleanup": {"maxConcurrentPerRack": 0}})),
            "spec.config.cleanup.maxConcurrentPerRack: 0 is not positive: give 1 or more",
        ),
        (
            scylla(json!({"cleanup": {"maxConcurrent": -2}})),
            "spec.config.cleanup.maxConcurrent: -2 is not positive",
        ),
        (
            etcd("Snapshot", json!({"snapshot": {"persistentVolumeClaim": ""}})),
            "spec.config.snapshot.persistentVolumeClaim: is empty: name a PersistentVolumeClaim",
        ),
        (
            etcd("Snapshot", json!({"snapshot": {"fileName": "dir/{cluster}.db"}})),
            "spec.config.snapshot.fileName: \"dir/{cluster}.db\" holds a '/'",
        ),
        (
            etcd("Snapshot", json!({"snapshot": {"fileName": "{cluster}-{date}.db"}})),
            "spec.config.snapshot.fileName: \"{cluster}-{date}.db\" holds a brace that is not part of {cluster} or {time}",
        ),
        (etcd("Snapshot", json!({"snapshot": {"fileName": ""}})), "spec.config.snapshot.fileName: is empty"),
        (
            etcd("Snapshot", json!({"snapshot": {"fileName": ".."}})),
            "spec.config.snapshot.fileName: file name template \"..\" names a folder",
        ),
        (
            etcd("Snapshot", json!({"snapshot": {"fileName": format!("{}{{cluster}}", "x".repeat(245))}})),
            "the most is 246",
        ),
        (
            etcd("Snapshot", json!({"snapshot": {"retain": 0}})),
            "spec.config.snapshot.retain: 0 is not positive",
        ),
        (
            etcd("Snapshot", json!({"snapshot": {"retention": {"tiers": [{"every": "1d", "for": "12h"}]}}})),
            "spec.config.snapshot.retention.tiers[0].for: 12h is not longer than every 24h",
        ),
        (
            etcd(
                "Snapshot",
                json!({"snapshot": {"retention": {"tiers": [{"every": "hourly", "for": "7d"}]}}}),
            ),
            "spec.config.snapshot.retention.tiers[0].every: \"hourly\" is not a duration",
        ),
        (
            etcd("Snapshot", json!({"snapshot": {"retention": {"keepWithin": "1mo"}}})),
            "spec.config.snapshot.retention.keepWithin: \"1mo\" counts months or years",
        ),
        (
            etcd("Snapshot", json!({"snapshot": {"retention": {"keepDeltasFor": "0s"}}})),
            "spec.config.snapshot.retention.keepDeltasFor: 0s is not positive",
        ),
        (
            etcd("Snapshot", json!({"snapshot": {"retention": {"maxTotalSize": "50GB"}}})),
            "spec.config.snapshot.retention.maxTotalSize: \"50GB\" is not a size",
        ),
        (
            etcd("Snapshot", json!({"snapshot": {"fileName": "etcd.db", "retention": {"keepWithin": "1d"}}})),
            "spec.config.snapshot.retention: needs {time} in spec.config.snapshot.fileName \"etcd.db\"",
        ),
    ];
    for (task, wanted) in cases {
        let errors = errors_of(&task);
        assert!(errors.iter().any(|e| e.contains(wanted)), "wanted {wanted:?} in {errors:?}");
    }
}

#[test]
fn all_mistakes_are_reported_together() {
    let mut t = task(json!({
        "target": {"kind": "ScyllaCluster", "name": ""},
        "type": "Compact",
        "config": {"compact": {"retainRevisions": -1}, "snapshot": {}},
    }));
    t.spec.ttl_seconds_after_finished = -1;
    let fields: Vec<_> = validate(&t).unwrap_err().into_iter().map(|e| e.field).collect();
    assert_eq!(
        fields,
        vec![
            "spec.target.name",
            "spec.target.kind",
            "spec.config.snapshot",
            "spec.ttlSecondsAfterFinished",
            "spec.config.compact.retainRevisions",
        ]
    );
}

#[test]
fn an_unknown_type_is_not_also_blamed_for_its_config_or_kind() {
    let errors = errors_of(&etcd("Purge", json!({"compact": {}, "cleanup": {}})));
    assert_eq!(errors.len(), 1, "{errors:?}");
}

#[test]
fn a_task_without_namespace_is_named_by_its_name() {
    let mut t = etcd("Purge", json!({}));
    t.metadata.namespace = None;
    assert!(errors_of(&t)[0].starts_with("MaintenanceTask t1: spec.type"));
}

#[test]
fn errors_describe_as_one_line() {
    let mut t = etcd("Compact", json!({}));
    t.spec.ttl_seconds_after_finished = -1;
    t.spec.deadline_seconds = Some(0);
    let line = describe_errors(&validate(&t).unwrap_err());
    assert!(line.contains("-1 is negative"), "{line}");
    assert!(line.contains("; MaintenanceTask etcd/t1: spec.deadlineSeconds"), "{line}");
    assert!(!line.contains('\n'));
}

#[test]
fn service_names_are_dns_labels() {
    for (name, ok) in [
        ("sc-dc1-rack1-0", true),
        ("a", true),
        ("0abc", false),
        ("abc-", false),
        ("ab_c", false),
        ("Abc", false),
    ] {
        assert_eq!(is_dns_label(name), ok, "{name}");
    }
}

#[test]
fn snapshot_stores_copies_proofs_and_restores_are_checked() {
    let bucket =
        json!({"url": "s3://backups/etcd", "endpoint": "http://minio:9000", "credentialsSecret": "s3"});
    let valid = validate(&etcd("Snapshot", json!({"snapshot": {"bucket": bucket, "verify": true}}))).unwrap();
    let Work::Snapshot(snapshot) = valid.work else { panic!("a snapshot") };
    assert!(snapshot.verify);
    assert!(matches!(&snapshot.store, Store::Bucket(b) if b.url == "s3://backups/etcd"));

    let copy = validate(&etcd(
        "Copy",
        json!({"copy": {"from": {"persistentVolumeClaim": "main-snapshots"}, "to": {"bucket": bucket}}}),
    ))
    .unwrap();
    let Work::Copy(copy) = copy.work else { panic!("a copy") };
    assert_eq!(
        (copy.from.display(), copy.to.display()),
        ("pvc/main-snapshots".into(), "s3://backups/etcd".into())
    );
    assert_eq!(copy.file_name, "{cluster}-{time}.db");

    let verify = validate(&etcd("Verify", json!({}))).unwrap();
    let Work::Verify(verify) = verify.work else { panic!("a verify") };
    assert_eq!(verify.from, Store::Claim("main-snapshots".into()));

    let delta = validate(&etcd("Delta", json!({}))).unwrap();
    let Work::Delta(delta) = delta.work else { panic!("a delta") };
    assert_eq!(
        delta,
        Delta {
            to: Store::Claim("main-snapshots".into()),
            encoding: Default::default(),
            file_name: "{cluster}-{time}.db".into(),
            start_revision: None
        }
    );
    let delta =
        validate(&etcd("Delta", json!({"delta": {"to": {"bucket": bucket}, "startRevision": 0}}))).unwrap();
    let Work::Delta(delta) = delta.work else { panic!("a delta") };
    assert_eq!((delta.to.display(), delta.start_revision), ("s3://backups/etcd".into(), Some(0)));

    let restore = validate(&etcd(
        "Restore",
        json!({"restore": {"confirm": true, "from": {"bucket": bucket}, "object": "main-1.db"}}),
    ))
    .unwrap();
    let Work::Restore(restore) = restore.work else { panic!("a restore") };
    assert_eq!(restore.quorum_lost_for, SignedDuration::from_secs(300));
    assert!(!restore.override_quorum_check);

    let to_a_point = validate(&etcd("Verify", json!({"verify": {"toRevision": 1200}}))).unwrap();
    let Work::Verify(to_a_point) = to_a_point.work else { panic!("a verify") };
    assert_eq!(to_a_point.to_revision, Some(1200));

    let cases: [(&str, Value, &str, &str); 13] = [
        ("Verify", json!({"verify": {"toRevision": 0}}), "spec.config.verify.toRevision", "start at 1"),
        (
            "Restore",
            json!({"restore": {"confirm": true, "from": {"persistentVolumeClaim": "s"}, "toTime": "yesterday"}}),
            "spec.config.restore.toTime",
            "write it as RFC 3339",
        ),
        (
            "Restore",
            json!({"restore": {"confirm": true, "from": {"persistentVolumeClaim": "s"}, "toTime": "2026-11-29T10:00:00Z", "toRevision": 5}}),
            "spec.config.restore",
            "sets both toRevision and toTime",
        ),
        ("Delta", json!({"delta": {"startRevision": -1}}), "spec.config.delta.startRevision", "is negative"),
        ("Delta", json!({"delta": {"fileName": "a/{time}.db"}}), "spec.config.delta.fileName", "holds a '/'"),
        ("Delta", json!({"delta": {"to": {}}}), "spec.config.delta.to", "names no store"),
        ("Restore", json!({}), "spec.config.restore", "confirm: true"),
        (
            "Restore",
            json!({"restore": {"from": {"persistentVolumeClaim": "s"}}}),
            "spec.config.restore.confirm",
            "set confirm: true",
        ),
        (
            "Restore",
            json!({"restore": {"confirm": true, "from": {"persistentVolumeClaim": "s"}, "object": "a/b"}}),
            "spec.config.restore.object",
            "not a plain name",
        ),
        (
            "Copy",
            json!({"copy": {"from": {"persistentVolumeClaim": "s"}, "to": {"persistentVolumeClaim": "s"}}}),
            "spec.config.copy.to",
            "same store",
        ),
        (
            "Copy",
            json!({"copy": {"from": {}, "to": {"persistentVolumeClaim": "s"}}}),
            "spec.config.copy.from",
            "names no store",
        ),
        (
            "Verify",
            json!({"verify": {"from": {"bucket": {"url": "backups"}}}}),
            "spec.config.verify.from.bucket.url",
            "not a URL",
        ),
        (
            "Snapshot",
            json!({"snapshot": {"bucket": {"url": "s3://b", "options": {"aws_secret_access_key": "x"}}}}),
            "spec.config.snapshot.bucket.options.aws_secret_access_key",
            "credentialsSecret",
        ),
    ];
    for (task_type, config, field, words) in cases {
        let errors = validate(&etcd(task_type, config.clone())).unwrap_err();
        assert!(
            errors.iter().any(|e| e.field == field && e.message.contains(words)),
            "{task_type} {config}: {errors:?}"
        );
    }
}

#[test]
fn a_retention_policy_reaches_the_work_as_the_runner_takes_it() {
    let task = etcd(
        "Snapshot",
        json!({"snapshot": {"retain": 3, "retention": {
            "keepWithin": "2d", "keepDeltasFor": "1d", "maxTotalSize": "50Gi",
            "tiers": [{"every": "1h", "for": "7d"}, {"every": " 1d", "for": "30d "}]
        }}}),
    );
    let valid = validate(&task).unwrap_or_else(|e| panic!("{}", describe_errors(&e)));
    let Work::Snapshot(snapshot) = valid.work else { panic!("{:?}", valid.work) };
    assert_eq!(
        snapshot.rules,
        RetentionRules {
            keep_within: Some("2d".into()),
            tiers: vec!["1h:7d".into(), "1d:30d".into()],
            keep_deltas_for: Some("1d".into()),
            max_total_bytes: Some(50 << 30),
        }
    );
}

#[test]
fn compression_and_encryption_are_checked_naming_the_field() {
    let key = json!({"secretName": "backup-key"});
    let task = etcd(
        "Snapshot",
        json!({"snapshot": {"bucket": {"url": "s3://b/p"}, "compression": "zstd", "encryption": key}}),
    );
    let Work::Snapshot(snapshot) = validate(&task).unwrap().work else { panic!("a snapshot") };
    assert!(snapshot.encoding.compress);
    let encryption = snapshot.encoding.encryption.unwrap();
    assert_eq!((encryption.secret_name.as_str(), encryption.key.as_str()), ("backup-key", "key"));
    let delta = etcd(
        "Delta",
        json!({"delta": {"to": {"persistentVolumeClaim": "s", "encryption": {"secretName": "k", "key": "aes.key"}}}}),
    );
    let Work::Delta(delta) = validate(&delta).unwrap().work else { panic!("a delta") };
    assert_eq!(delta.encoding.encryption.unwrap().key, "aes.key");
    for (task, field) in [
        (
            etcd("Snapshot", json!({"snapshot": {"encryption": {"secretName": "Backup_Key"}}})),
            "spec.config.snapshot.encryption.secretName",
        ),
        (
            etcd("Snapshot", json!({"snapshot": {"encryption": {"secretName": "k", "key": "a/b"}}})),
            "spec.config.snapshot.encryption.key",
        ),
        (
            etcd(
                "Verify",
                json!({"verify": {"from": {"persistentVolumeClaim": "s", "encryption": {"secretName": "-k"}}}}),
            ),
            "spec.config.verify.from.encryption.secretName",
        ),
        (
            etcd(
                "Restore",
                json!({"restore": {"confirm": true, "from": {"persistentVolumeClaim": "s", "encryption": {"secretName": "k", "key": ""}}}}),
            ),
            "spec.config.restore.from.encryption.key",
        ),
        (
            etcd(
                "Copy",
                json!({"copy": {"from": {"persistentVolumeClaim": "a", "compression": "zstd"}, "to": {"persistentVolumeClaim": "b"}}}),
            ),
            "spec.config.copy.from.compression",
        ),
        (
            etcd(
                "Copy",
                json!({"copy": {"from": {"persistentVolumeClaim": "a"}, "to": {"persistentVolumeClaim": "b", "encryption": key}}}),
            ),
            "spec.config.copy.to.encryption",
        ),
    ] {
        let errors = validate(&task).unwrap_err();
        assert!(errors.iter().any(|e| e.field == field), "{field}: {errors:?}");
    }
}

/// `compression` only where something is written: a Verify only reads, and so does a Restore
/// unless it saves a replayed snapshot (to a point in time); `encryption` wherever objects are
/// read or written, never on a copy.
#[test]
fn compression_is_refused_where_nothing_is_written() {
    let zstd_claim = json!({"persistentVolumeClaim": "s", "compression": "zstd"});
    let refused = [
        (etcd("Verify", json!({"verify": {"from": zstd_claim}})), "spec.config.verify.from.compression"),
        (
            etcd("Restore", json!({"restore": {"confirm": true, "from": zstd_claim}})),
            "spec.config.restore.from.compression",
        ),
        (
            etcd("Copy", json!({"copy": {"from": {"persistentVolumeClaim": "a"}, "to": zstd_claim}})),
            "spec.config.copy.to.compression",
        ),
        (
            etcd("Snapshot", json!({"snapshot": {"encryption": {"secretName": "a..b"}}})),
            "spec.config.snapshot.encryption.secretName",
        ),
        (
            etcd(
                "Delta",
                json!({"delta": {"to": {"persistentVolumeClaim": "s", "encryption": {"secretName": "k", "key": "k y"}}}}),
            ),
            "spec.config.delta.to.encryption.key",
        ),
    ];
    for (task, field) in refused {
        let errors = validate(&task).unwrap_err();
        assert!(errors.iter().any(|e| e.field == field), "{field}: {errors:?}");
        let error = errors.iter().find(|e| e.field == field).unwrap();
        assert!(
            error.message.contains("remove it") || error.message.contains("is not a Secret"),
            "{error:?}"
        );
    }
    let key = json!({"secretName": "backup-key", "key": "aes.key"});
    let saves = etcd(
        "Restore",
        json!({"restore": {"confirm": true, "toRevision": 10,
                           "from": {"persistentVolumeClaim": "s", "compression": "zstd", "encryption": key}}}),
    );
    let Work::Restore(restore) = validate(&saves).unwrap().work else { panic!("a restore") };
    assert!(restore.encoding.compress);
    assert_eq!(restore.encoding.encryption.unwrap().key, "aes.key");
    let verify =
        etcd("Verify", json!({"verify": {"from": {"persistentVolumeClaim": "s", "encryption": key}}}));
    let Work::Verify(verify) = validate(&verify).unwrap().work else { panic!("a verify") };
    assert!(!verify.encoding.compress);
    assert_eq!(verify.encoding.encryption.unwrap().secret_name, "backup-key");
    // `none` says what the default says, anywhere but on a copy.
    let plain =
        etcd("Verify", json!({"verify": {"from": {"persistentVolumeClaim": "s", "compression": "none"}}}));
    assert!(validate(&plain).is_ok());
}
