use groundskeeper_job::etcd::plan::DefragPolicy;
use groundskeeper_protocol::OperationKind;
use serde_json::json;

use super::*;
use crate::tasks::validate::Snapshot;

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
    DefragPolicy {
        min_defrag_bytes: 0,
        max_fragmented_percent: 0.0,
    }
}

/// Each step as the runner's arguments, joined.
fn rendered(work: &Work) -> Vec<String> {
    steps(work, &policy())
        .unwrap()
        .iter()
        .map(|op| op.to_args().join(" "))
        .collect()
}

#[test]
fn each_kind_of_work_becomes_its_steps() {
    let keep = Compact {
        target: CompactTarget::RetainRevisions(10_000),
        physical: false,
    };
    let exact = Compact {
        target: CompactTarget::Revision(77),
        physical: false,
    };
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
            vec![format!(
                "defrag {endpoints} --min-defrag-bytes 0 --max-fragmented-percent 0"
            )],
        ),
        (
            "maintenance keeping revisions: one defrag that compacts first",
            Work::Maintenance {
                compact: keep,
                defragment: every_member(),
            },
            vec![format!(
                "defrag {endpoints} --min-defrag-bytes 0 --max-fragmented-percent 0 \
                 --compact-retain-revisions 10000"
            )],
        ),
        (
            "maintenance to an exact revision: compact, then defrag",
            Work::Maintenance {
                compact: exact,
                defragment: every_member(),
            },
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

#[test]
fn work_this_version_cannot_do_on_etcd_says_so() {
    let snapshot = Work::Snapshot(Snapshot {
        persistent_volume_claim: "snaps".into(),
        file_name: "{cluster}-{time}.db".into(),
        retain: 5,
    });
    let why = steps(&snapshot, &policy()).unwrap_err();
    assert!(why.contains("not run by this version"), "{why}");
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
            compact: Compact {
                target: CompactTarget::Revision(5),
                physical: true,
            },
            defragment: every_member(),
        },
        &policy(),
    )
    .unwrap()
    .iter()
    .map(Operation::kind)
    .collect();
    assert_eq!(kinds, [OperationKind::Compact, OperationKind::Defrag]);
}
