//! The steps of the tasks that write, copy and prove snapshots: the snapshot's name (from the
//! task's [`SnapshotNaming`]), where each store is mounted in the Job (a claim as a folder, a
//! bucket's credentials Secret as a folder) and what the runner is told. Pure: the task's work and
//! the cluster's catalog in, the Jobs' requests out.

use groundskeeper_api::EtcdCluster;
use groundskeeper_api::restore::full_at_or_before;
use groundskeeper_api::snapshot_catalog::SnapshotRecord;
use groundskeeper_api::snapshot_store::{BucketSpec, Store};
use groundskeeper_api::validate::{Copy, Delta, Snapshot, Verify};
use groundskeeper_protocol::Operation;
use groundskeeper_protocol::operation::{
    BucketLocation, CopyRequest, DeltaRequest, ObjectEncoding, ProveRequest, ReplayRequest, SnapshotOutput,
    SnapshotRequest, SnapshotRetention, SnapshotStore,
};
use groundskeeper_stores::etcd::retention::NameTemplate;
use jiff::Timestamp;

use super::job::{Step, etcd_target};
use super::policy::Policy;
use crate::jobs::{ClaimVolume, ScratchVolume, SecretFolder};

/// Where a Snapshot task's Job mounts its PersistentVolumeClaim.
pub(crate) const SNAPSHOT_MOUNT_DIR: &str = "/snapshots";

/// Where a store's credentials Secret is mounted, by the store's role (`to`, `from`).
pub(crate) const CREDENTIALS_MOUNT_DIR: &str = "/var/run/groundskeeper/store";
/// Where a proof's scratch folder is mounted.
pub(crate) const SCRATCH_MOUNT_DIR: &str = "/scratch";
/// Room for a proof's throwaway member when the cluster's size is not known.
const DEFAULT_SCRATCH_BYTES: i64 = 8 * 1024 * 1024 * 1024;

/// What names a task's snapshot: the cluster (`{cluster}`) and the task's own time (`{time}`),
/// the time its work started (else its creation): fixed once the task runs, so a controller
/// that restarts renders the same file name and makes no second Job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotNaming {
    pub cluster: String,
    pub time: Timestamp,
}

/// The snapshot file's name: the template rendered for the cluster at the task's time; `Err`
/// when that is no plain file name.
pub(crate) fn snapshot_file_name(snapshot: &Snapshot, naming: &SnapshotNaming) -> Result<String, String> {
    let template = NameTemplate::parse(&snapshot.file_name, &naming.cluster)
        .map_err(|why| format!("spec.config.snapshot.fileName: {why}"))?;
    Ok(template.render(naming.time))
}

/// One store as a Job sees it.
struct Mounted {
    store: SnapshotStore,
    claim: Option<ClaimVolume>,
    secret: Option<SecretFolder>,
}

/// `store` mounted for `role`: a claim at `mount_dir`, a bucket with its credentials Secret at
/// [`CREDENTIALS_MOUNT_DIR`]`-<role>`.
fn mounted(store: &Store, role: &str, mount_dir: &str) -> Mounted {
    match store {
        Store::Claim(claim) => Mounted {
            store: SnapshotStore::Folder(mount_dir.to_owned()),
            claim: Some(ClaimVolume { claim_name: claim.clone(), mount_path: mount_dir.to_owned() }),
            secret: None,
        },
        Store::Bucket(bucket) => {
            let credentials_dir = format!("{CREDENTIALS_MOUNT_DIR}-{role}");
            Mounted {
                store: SnapshotStore::Bucket(bucket_location(bucket, Some(&credentials_dir))),
                claim: None,
                secret: bucket
                    .credentials_secret
                    .as_ref()
                    .map(|secret| SecretFolder { secret_name: secret.clone(), mount_path: credentials_dir }),
            }
        }
    }
}

/// The runner's view of a bucket: its URL, its settings (endpoint and region first, then the
/// options; `allow_http` when the endpoint is plain http) and where its credentials are mounted.
pub(crate) fn bucket_location(bucket: &BucketSpec, credentials_dir: Option<&str>) -> BucketLocation {
    let mut options = Vec::new();
    if let Some(endpoint) = &bucket.endpoint {
        options.push(("endpoint".to_owned(), endpoint.clone()));
        if endpoint.starts_with("http://") {
            options.push(("allow_http".to_owned(), "true".to_owned()));
        }
    }
    if let Some(region) = &bucket.region {
        options.push(("region".to_owned(), region.clone()));
    }
    options.extend(bucket.options.iter().map(|(k, v)| (k.clone(), v.clone())));
    BucketLocation {
        url: bucket.url.trim_end_matches('/').to_owned(),
        options,
        credentials_dir: bucket.credentials_secret.as_ref().and(credentials_dir).map(str::to_owned),
    }
}

/// A Snapshot task's steps: the snapshot to its claim or bucket, then its proof when asked.
pub(crate) fn snapshot_steps(
    policy: &Policy,
    snapshot: &Snapshot,
    naming: &SnapshotNaming,
    cluster: &EtcdCluster,
) -> Result<Vec<Step>, String> {
    let name = snapshot_file_name(snapshot, naming)?;
    let rules = &snapshot.rules;
    let retention = Some(SnapshotRetention {
        retain: snapshot.retain,
        file_name_template: snapshot.file_name.clone(),
        cluster: naming.cluster.clone(),
        keep_within: rules.keep_within.clone(),
        tiers: rules.tiers.clone(),
        keep_deltas_for: rules.keep_deltas_for.clone(),
        max_total_bytes: rules.max_total_bytes,
    });
    let to = mounted(&snapshot.store, "to", SNAPSHOT_MOUNT_DIR);
    let output = match &to.store {
        SnapshotStore::Folder(dir) => SnapshotOutput::File(format!("{dir}/{name}")),
        SnapshotStore::Bucket(bucket) => {
            SnapshotOutput::Object { bucket: bucket.clone(), name: name.clone() }
        }
    };
    let mut steps = vec![Step {
        operation: Operation::Snapshot(SnapshotRequest {
            etcd: etcd_target(policy),
            output,
            retention,
            encoding: ObjectEncoding::default(),
        }),
        claims: to.claim.into_iter().collect(),
        secret_folders: to.secret.into_iter().collect(),
        scratch: None,
    }];
    if snapshot.verify {
        let prove = ProveTarget { object: Some(name), record: None };
        steps.push(prove_step(&snapshot.store, &snapshot.file_name, naming, &prove, cluster));
    }
    Ok(steps)
}

/// A Copy task's one step.
pub(crate) fn copy_step(copy: &Copy, naming: &SnapshotNaming) -> Step {
    let from = mounted(&copy.from, "from", "/snapshots-from");
    let to = mounted(&copy.to, "to", "/snapshots-to");
    Step {
        operation: Operation::SnapshotCopy(CopyRequest {
            from: from.store,
            to: to.store,
            file_name_template: copy.file_name.clone(),
            cluster: naming.cluster.clone(),
            only: copy.only.clone(),
        }),
        claims: from.claim.into_iter().chain(to.claim).collect(),
        secret_folders: from.secret.into_iter().chain(to.secret).collect(),
        scratch: None,
    }
}

/// A Delta task's one step: through any member, into the store where the cluster's full
/// snapshots are (mounted where a Snapshot task mounts it).
pub(crate) fn delta_step(policy: &Policy, delta: &Delta, naming: &SnapshotNaming) -> Step {
    let to = mounted(&delta.to, "to", SNAPSHOT_MOUNT_DIR);
    Step {
        operation: Operation::SnapshotDelta(DeltaRequest {
            etcd: etcd_target(policy),
            to: to.store,
            file_name_template: delta.file_name.clone(),
            cluster: naming.cluster.clone(),
            start_revision: delta.start_revision,
            end_revision: None,
            encoding: ObjectEncoding::default(),
        }),
        claims: to.claim.into_iter().collect(),
        secret_folders: to.secret.into_iter().collect(),
        scratch: None,
    }
}

/// Which snapshot a proof restores, and what the catalog recorded of it.
pub(crate) struct ProveTarget {
    /// `None`: the runner takes the newest in the store.
    pub object: Option<String>,
    pub record: Option<SnapshotRecord>,
}

/// A Verify task's one step: the snapshot it names, else the newest of that store the catalog
/// knows (so that the recorded revision and keys are checked), else the runner's newest.
pub(crate) fn verify_step(verify: &Verify, naming: &SnapshotNaming, cluster: &EtcdCluster) -> Step {
    if let Some(to_revision) = verify.to_revision {
        return replay_step(verify, to_revision, naming, cluster);
    }
    let store = verify.from.display();
    let catalog = cluster.status.as_ref().map(|s| s.snapshots.as_slice()).unwrap_or_default();
    let record = match &verify.object {
        Some(object) => catalog.iter().find(|r| r.store == store && &r.object == object).cloned(),
        None => catalog
            .iter()
            .filter(|r| r.store == store && !r.is_delta())
            .max_by_key(|r| r.written_at.clone())
            .cloned(),
    };
    let object = verify.object.clone().or_else(|| record.as_ref().map(|r| r.object.clone()));
    prove_step(&verify.from, &verify.file_name, naming, &ProveTarget { object, record }, cluster)
}

/// A Verify to a point in time: the full snapshot it names, else the newest full snapshot of the
/// store the catalog knows at or before the revision (the runner takes the store's newest when
/// the catalog knows none), its deltas replayed up to the revision.
fn replay_step(verify: &Verify, to_revision: i64, naming: &SnapshotNaming, cluster: &EtcdCluster) -> Step {
    let target = ReplayTarget { object: verify.object.clone(), to_revision, save_as: None };
    replay_to(&verify.from, &verify.file_name, &target, naming, cluster)
}

/// What a replay restores and to where.
pub(crate) struct ReplayTarget {
    /// The full snapshot to start from; `None`: the newest at or before the revision.
    pub object: Option<String>,
    pub to_revision: i64,
    /// Save the proven member's snapshot in the store under this name.
    pub save_as: Option<String>,
}

/// The replay of `store`'s full snapshot and deltas up to `target.to_revision` in a throwaway
/// member (a Verify to a point in time; the first step of a Restore to one).
pub(crate) fn replay_to(
    store: &Store,
    template: &str,
    target: &ReplayTarget,
    naming: &SnapshotNaming,
    cluster: &EtcdCluster,
) -> Step {
    let catalog = cluster.status.as_ref().map(|s| s.snapshots.as_slice()).unwrap_or_default();
    let display = store.display();
    let record = match &target.object {
        Some(object) => catalog.iter().find(|r| r.store == display && &r.object == object),
        None => full_at_or_before(catalog, &display, target.to_revision),
    };
    let from = mounted(store, "from", SNAPSHOT_MOUNT_DIR);
    Step {
        operation: Operation::SnapshotReplay(ReplayRequest {
            from: from.store,
            object: target.object.clone().or_else(|| record.map(|r| r.object.clone())),
            file_name_template: template.to_owned(),
            cluster: naming.cluster.clone(),
            to_revision: Some(target.to_revision),
            expect_keys: None,
            scratch_dir: SCRATCH_MOUNT_DIR.to_owned(),
            save_as: target.save_as.clone(),
            encoding: ObjectEncoding::default(),
        }),
        claims: from.claim.into_iter().collect(),
        secret_folders: from.secret.into_iter().collect(),
        scratch: Some(scratch_for(cluster, record)),
    }
}

/// A proof of one snapshot of `store`, told what was recorded of it when that is known.
pub(crate) fn prove_step(
    store: &Store,
    template: &str,
    naming: &SnapshotNaming,
    target: &ProveTarget,
    cluster: &EtcdCluster,
) -> Step {
    let from = mounted(store, "from", SNAPSHOT_MOUNT_DIR);
    let record = target.record.as_ref();
    Step {
        operation: Operation::SnapshotProve(ProveRequest {
            from: from.store,
            object: target.object.clone(),
            file_name_template: template.to_owned(),
            cluster: naming.cluster.clone(),
            expect_revision: record.and_then(|r| r.revision),
            expect_keys: record.and_then(|r| r.keys),
            expect_sha256: record.and_then(|r| r.sha256.clone()),
            scratch_dir: SCRATCH_MOUNT_DIR.to_owned(),
            encryption_key_file: None,
        }),
        claims: from.claim.into_iter().collect(),
        secret_folders: from.secret.into_iter().collect(),
        scratch: Some(scratch_for(cluster, record)),
    }
}

/// Room for the fetched snapshot and the restored member: three times the largest db observed
/// (or the snapshot's size), at least 1 GiB.
pub(crate) fn scratch_for(cluster: &EtcdCluster, record: Option<&SnapshotRecord>) -> ScratchVolume {
    let observed = cluster.status.as_ref().and_then(|s| s.members.iter().filter_map(|m| m.db_size).max());
    let bytes = record.and_then(|r| r.size_bytes).or(observed).map_or(DEFAULT_SCRATCH_BYTES, |b| b * 3);
    let gib = (bytes as f64 / (1024.0 * 1024.0 * 1024.0)).ceil().max(1.0) as i64;
    ScratchVolume { mount_path: SCRATCH_MOUNT_DIR.to_owned(), size_limit: format!("{gib}Gi") }
}

/// A prove step after a snapshot step, told what the snapshot's Job reported it holds.
pub(crate) fn with_snapshot_result(
    step: &Step,
    report: &groundskeeper_protocol::result::SnapshotReport,
) -> Step {
    let Operation::SnapshotProve(request) = &step.operation else {
        return step.clone();
    };
    let request = ProveRequest {
        expect_revision: request.expect_revision.or(report.revision),
        expect_keys: request.expect_keys.or(report.keys),
        expect_sha256: request.expect_sha256.clone().or_else(|| report.sha256.clone()),
        ..request.clone()
    };
    Step { operation: Operation::SnapshotProve(request), ..step.clone() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn a_bucket_is_told_its_settings_and_where_its_credentials_are() {
        let bucket = BucketSpec {
            url: "s3://backups/etcd/".into(),
            endpoint: Some("http://minio:9000".into()),
            region: Some("eu-1".into()),
            options: BTreeMap::from([("virtual_hosted_style_request".into(), "false".into())]),
            credentials_secret: Some("s3".into()),
        };
        let location = bucket_location(&bucket, Some("/c"));
        assert_eq!(location.url, "s3://backups/etcd");
        let keys: Vec<&str> = location.options.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["endpoint", "allow_http", "region", "virtual_hosted_style_request"]);
        assert_eq!(location.credentials_dir.as_deref(), Some("/c"));
        let ambient = BucketSpec { credentials_secret: None, ..bucket };
        assert_eq!(bucket_location(&ambient, Some("/c")).credentials_dir, None);
    }

    #[test]
    fn a_copy_between_two_claims_mounts_both() {
        let copy = Copy {
            from: Store::Claim("a".into()),
            to: Store::Claim("b".into()),
            file_name: "{cluster}-{time}.db".into(),
            only: vec![],
        };
        let naming = SnapshotNaming { cluster: "main".into(), time: "2026-01-01T00:00:00Z".parse().unwrap() };
        let step = copy_step(&copy, &naming);
        let mounts: Vec<(&str, &str)> =
            step.claims.iter().map(|c| (c.claim_name.as_str(), c.mount_path.as_str())).collect();
        assert_eq!(mounts, [("a", "/snapshots-from"), ("b", "/snapshots-to")]);
        assert_eq!(
            step.operation.to_args().join(" "),
            "snapshot-copy --from /snapshots-from --to /snapshots-to --file-name-template {cluster}-{time}.db \
             --cluster main"
        );
    }

    /// To a point in time: the newest full snapshot at or before the revision, never a delta,
    /// never one after it.
    #[test]
    fn a_verify_to_a_revision_replays_from_the_newest_full_snapshot_before_it() {
        let cluster: EtcdCluster = serde_json::from_value(serde_json::json!({
            "apiVersion": "groundskeeper.dev/v1alpha1", "kind": "EtcdCluster",
            "metadata": {"name": "main", "namespace": "etcd"},
            "spec": {"endpoints": ["http://e-0:2379"]},
            "status": {"snapshots": [
                {"store": "pvc/snaps", "object": "main-1.db", "revision": 100, "writtenAt": "2026-01-01T01:00:00Z"},
                {"store": "pvc/snaps", "object": "main-2.db", "revision": 200, "writtenAt": "2026-01-01T02:00:00Z"},
                {"store": "pvc/snaps", "object": "main-2-200-250.delta", "startRevision": 200, "revision": 250,
                 "writtenAt": "2026-01-01T02:10:00Z"},
                {"store": "pvc/snaps", "object": "main-3.db", "revision": 300, "writtenAt": "2026-01-01T03:00:00Z"},
                {"store": "s3://other", "object": "main-9.db", "revision": 240, "writtenAt": "2026-01-01T02:30:00Z"},
            ]},
        }))
        .unwrap();
        let naming = SnapshotNaming { cluster: "main".into(), time: "2026-01-01T04:00:00Z".parse().unwrap() };
        let verify = |to: i64, object: Option<&str>| Verify {
            from: Store::Claim("snaps".into()),
            object: object.map(str::to_owned),
            file_name: "{cluster}-{time}.db".into(),
            to_revision: Some(to),
        };
        let chosen = |step: Step| match step.operation {
            Operation::SnapshotReplay(request) => (request.object, request.to_revision),
            other => panic!("a replay: {other:?}"),
        };
        let cases = [
            (250, None, Some("main-2.db")),
            (200, None, Some("main-2.db")),
            (299, None, Some("main-2.db")),
            (300, None, Some("main-3.db")),
            (150, None, Some("main-1.db")),
            (50, None, None),
            (250, Some("main-1.db"), Some("main-1.db")),
        ];
        for (to, object, wanted) in cases {
            let step = verify_step(&verify(to, object), &naming, &cluster);
            assert_eq!(step.claims.len(), 1);
            assert!(step.scratch.is_some());
            assert_eq!(chosen(step), (wanted.map(str::to_owned), Some(to)), "to {to}, object {object:?}");
        }
    }

    #[test]
    fn a_delta_goes_where_the_full_snapshots_are() {
        let naming = SnapshotNaming { cluster: "main".into(), time: "2026-01-01T00:00:00Z".parse().unwrap() };
        let spec: groundskeeper_api::etcd_cluster::EtcdClusterSpec =
            serde_json::from_value(serde_json::json!({"endpoints": ["http://e-0:2379"]})).unwrap();
        let policy = Policy::from_spec(&spec).unwrap();
        let to_claim = Delta {
            to: Store::Claim("snaps".into()),
            file_name: "{cluster}-{time}.db".into(),
            start_revision: None,
        };
        let step = delta_step(&policy, &to_claim, &naming);
        let mounts: Vec<(&str, &str)> =
            step.claims.iter().map(|c| (c.claim_name.as_str(), c.mount_path.as_str())).collect();
        assert_eq!(mounts, [("snaps", SNAPSHOT_MOUNT_DIR)]);
        let Operation::SnapshotDelta(request) = &step.operation else { panic!("a delta: {step:?}") };
        assert_eq!(request.to, SnapshotStore::Folder(SNAPSHOT_MOUNT_DIR.into()));
        assert_eq!((request.start_revision, request.end_revision), (None, None));
        assert_eq!(request.cluster, "main");
        let bucket = BucketSpec {
            url: "s3://backups/etcd".into(),
            endpoint: None,
            region: Some("eu-1".into()),
            options: BTreeMap::new(),
            credentials_secret: Some("s3".into()),
        };
        let to_bucket = Delta { to: Store::Bucket(bucket), start_revision: Some(42), ..to_claim };
        let step = delta_step(&policy, &to_bucket, &naming);
        assert!(step.claims.is_empty());
        let folders: Vec<(&str, &str)> =
            step.secret_folders.iter().map(|f| (f.secret_name.as_str(), f.mount_path.as_str())).collect();
        assert_eq!(folders, [("s3", "/var/run/groundskeeper/store-to")]);
        let args = step.operation.to_args().join(" ");
        assert!(args.starts_with("snapshot-delta "), "{args}");
        assert!(args.contains("--to s3://backups/etcd --to-option region=eu-1 --to-credentials /var/run/groundskeeper/store-to"), "{args}");
        assert!(
            args.ends_with("--file-name-template {cluster}-{time}.db --cluster main --start-revision 42"),
            "{args}"
        );
    }
}
