//! The steps of the tasks that write, copy and prove snapshots: the snapshot's name (from the
//! task's [`SnapshotNaming`]), where each store is mounted in the Job (a claim as a folder, a
//! bucket's credentials Secret as a folder, the encryption key's Secret as a folder holding only
//! that key) and what the runner is told (how it writes: compressed, encrypted; the key that
//! opens what it reads). Pure: the task's work and the cluster's catalog in, the Jobs' requests
//! out. The controller never reads the key: it only names it in the Job.

use groundskeeper_api::EtcdCluster;
use groundskeeper_api::restore::full_at_or_before;
use groundskeeper_api::snapshot_catalog::SnapshotRecord;
use groundskeeper_api::snapshot_store::{BucketSpec, Store, StoreEncoding, ZSTD_LEVEL};
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
/// Where a store's encryption key Secret is mounted (only its key), by the store's role (`to`,
/// `from`): the runner reads `<folder>/<key>`.
pub(crate) const ENCRYPTION_MOUNT_DIR: &str = "/var/run/groundskeeper/encryption";
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
    /// The bucket's credentials, then the encryption key.
    secrets: Vec<SecretFolder>,
    /// Where the encryption key is, when the store has one.
    key_file: Option<String>,
    compress: bool,
}

impl Mounted {
    /// How a writer writes into this store (and opens its encrypted objects).
    fn writes(&self) -> ObjectEncoding {
        ObjectEncoding {
            zstd_level: self.compress.then_some(ZSTD_LEVEL),
            encryption_key_file: self.key_file.clone(),
        }
    }

    /// How a reader opens this store's objects: the key only (each object's own first bytes say
    /// how it was written).
    fn reads(&self) -> ObjectEncoding {
        ObjectEncoding { zstd_level: None, encryption_key_file: self.key_file.clone() }
    }
}

/// `store` mounted for `role`: a claim at `mount_dir`, a bucket with its credentials Secret at
/// [`CREDENTIALS_MOUNT_DIR`]`-<role>`, the key of `encoding`'s Secret (that one key only) at
/// [`ENCRYPTION_MOUNT_DIR`]`-<role>`.
fn mounted(store: &Store, encoding: &StoreEncoding, role: &str, mount_dir: &str) -> Mounted {
    let (store, claim, mut secrets) = match store {
        Store::Claim(claim) => (
            SnapshotStore::Folder(mount_dir.to_owned()),
            Some(ClaimVolume { claim_name: claim.clone(), mount_path: mount_dir.to_owned() }),
            Vec::new(),
        ),
        Store::Bucket(bucket) => {
            let credentials_dir = format!("{CREDENTIALS_MOUNT_DIR}-{role}");
            let secret = bucket.credentials_secret.as_ref().map(|secret| SecretFolder {
                secret_name: secret.clone(),
                mount_path: credentials_dir.clone(),
                item: None,
            });
            (
                SnapshotStore::Bucket(bucket_location(bucket, Some(&credentials_dir))),
                None,
                secret.into_iter().collect(),
            )
        }
    };
    let key_file = encoding.encryption.as_ref().map(|encryption| {
        let dir = format!("{ENCRYPTION_MOUNT_DIR}-{role}");
        let file = format!("{dir}/{}", encryption.key);
        secrets.push(SecretFolder {
            secret_name: encryption.secret_name.clone(),
            mount_path: dir,
            item: Some(encryption.key.clone()),
        });
        file
    });
    Mounted { store, claim, secrets, key_file, compress: encoding.compress }
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
pub fn snapshot_steps(
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
    let to = mounted(&snapshot.store, &snapshot.encoding, "to", SNAPSHOT_MOUNT_DIR);
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
            encoding: to.writes(),
        }),
        claims: to.claim.into_iter().collect(),
        secret_folders: to.secrets,
        scratch: None,
    }];
    if snapshot.verify {
        let prove = ProveTarget { object: Some(name), record: None };
        let store = (&snapshot.store, &snapshot.encoding);
        steps.push(prove_step(store, &snapshot.file_name, naming, &prove, cluster));
    }
    Ok(steps)
}

/// A Copy task's one step: objects carried as they are, so no key and no compression.
pub(crate) fn copy_step(copy: &Copy, naming: &SnapshotNaming) -> Step {
    let plain = StoreEncoding::default();
    let from = mounted(&copy.from, &plain, "from", "/snapshots-from");
    let to = mounted(&copy.to, &plain, "to", "/snapshots-to");
    Step {
        operation: Operation::SnapshotCopy(CopyRequest {
            from: from.store,
            to: to.store,
            file_name_template: copy.file_name.clone(),
            cluster: naming.cluster.clone(),
            only: copy.only.clone(),
        }),
        claims: from.claim.into_iter().chain(to.claim).collect(),
        secret_folders: from.secrets.into_iter().chain(to.secrets).collect(),
        scratch: None,
    }
}

/// A Delta task's one step: through any member, into the store where the cluster's full
/// snapshots are (mounted where a Snapshot task mounts it).
pub(crate) fn delta_step(policy: &Policy, delta: &Delta, naming: &SnapshotNaming) -> Step {
    let to = mounted(&delta.to, &delta.encoding, "to", SNAPSHOT_MOUNT_DIR);
    let encoding = to.writes();
    Step {
        operation: Operation::SnapshotDelta(DeltaRequest {
            etcd: etcd_target(policy),
            to: to.store,
            file_name_template: delta.file_name.clone(),
            cluster: naming.cluster.clone(),
            start_revision: delta.start_revision,
            end_revision: None,
            encoding,
        }),
        claims: to.claim.into_iter().collect(),
        secret_folders: to.secrets,
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
    let store = (&verify.from, &verify.encoding);
    prove_step(store, &verify.file_name, naming, &ProveTarget { object, record }, cluster)
}

/// A Verify to a point in time: the full snapshot it names, else the newest full snapshot of the
/// store the catalog knows at or before the revision (the runner takes the store's newest when
/// the catalog knows none), its deltas replayed up to the revision.
fn replay_step(verify: &Verify, to_revision: i64, naming: &SnapshotNaming, cluster: &EtcdCluster) -> Step {
    let target = ReplayTarget { object: verify.object.clone(), to_revision, save_as: None };
    replay_to((&verify.from, &verify.encoding), &verify.file_name, &target, naming, cluster)
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
/// member (a Verify to a point in time; the first step of a Restore to one, which saves the
/// member's snapshot into the store written with the store's encoding).
pub(crate) fn replay_to(
    (store, encoding): (&Store, &StoreEncoding),
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
    let from = mounted(store, encoding, "from", SNAPSHOT_MOUNT_DIR);
    // A replay that saves writes; one that does not only reads.
    let encoding = if target.save_as.is_some() { from.writes() } else { from.reads() };
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
            encoding,
        }),
        claims: from.claim.into_iter().collect(),
        secret_folders: from.secrets,
        scratch: Some(scratch_for(cluster, record)),
    }
}

/// A proof of one snapshot of `store`, told what was recorded of it when that is known, given
/// the store's key when it has one.
pub(crate) fn prove_step(
    (store, encoding): (&Store, &StoreEncoding),
    template: &str,
    naming: &SnapshotNaming,
    target: &ProveTarget,
    cluster: &EtcdCluster,
) -> Step {
    let from = mounted(store, encoding, "from", SNAPSHOT_MOUNT_DIR);
    let key_file = from.reads().encryption_key_file;
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
            encryption_key_file: key_file,
        }),
        claims: from.claim.into_iter().collect(),
        secret_folders: from.secrets,
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
            encoding: Default::default(),
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
            encoding: Default::default(),
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

    fn encrypted(compress: bool) -> StoreEncoding {
        StoreEncoding {
            compress,
            encryption: Some(groundskeeper_api::snapshot_store::EncryptionSpec {
                secret_name: "backup-key".into(),
                key: "key".into(),
            }),
        }
    }

    fn main_cluster() -> EtcdCluster {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "groundskeeper.dev/v1alpha1", "kind": "EtcdCluster",
            "metadata": {"name": "main", "namespace": "etcd"},
            "spec": {"endpoints": ["http://e-0:2379"]},
        }))
        .unwrap()
    }

    fn folders(step: &Step) -> Vec<(&str, &str, Option<&str>)> {
        step.secret_folders
            .iter()
            .map(|f| (f.secret_name.as_str(), f.mount_path.as_str(), f.item.as_deref()))
            .collect()
    }

    /// A writer compresses and encrypts; its proof (a reader) gets the key only; the Secret is
    /// mounted with that one key, beside the bucket's credentials.
    #[test]
    fn an_encoded_snapshot_is_written_compressed_and_encrypted_and_proven_with_the_key() {
        let spec: groundskeeper_api::etcd_cluster::EtcdClusterSpec =
            serde_json::from_value(serde_json::json!({"endpoints": ["http://e-0:2379"]})).unwrap();
        let policy = Policy::from_spec(&spec).unwrap();
        let bucket = BucketSpec {
            url: "s3://backups/etcd".into(),
            credentials_secret: Some("s3".into()),
            ..BucketSpec::default()
        };
        let snapshot = Snapshot {
            persistent_volume_claim: "main-snapshots".into(),
            store: Store::Bucket(bucket),
            verify: true,
            file_name: "{cluster}-{time}.db".into(),
            retain: 5,
            rules: Default::default(),
            encoding: encrypted(true),
        };
        let naming = SnapshotNaming { cluster: "main".into(), time: "2026-01-01T00:00:00Z".parse().unwrap() };
        let steps = snapshot_steps(&policy, &snapshot, &naming, &main_cluster()).unwrap();
        let args = steps[0].operation.to_args().join(" ");
        assert!(args.contains("--compression zstd"), "{args}");
        assert!(!args.contains("--compression-level"), "level 3 is the runner's default: {args}");
        assert!(args.contains("--encryption-key /var/run/groundskeeper/encryption-to/key"), "{args}");
        assert_eq!(
            folders(&steps[0]),
            [
                ("s3", "/var/run/groundskeeper/store-to", None),
                ("backup-key", "/var/run/groundskeeper/encryption-to", Some("key"))
            ]
        );
        let prove = steps[1].operation.to_args().join(" ");
        assert!(prove.starts_with("snapshot-prove "), "{prove}");
        assert!(prove.contains("--encryption-key /var/run/groundskeeper/encryption-from/key"), "{prove}");
        assert!(!prove.contains("--compression"), "{prove}");
        assert_eq!(
            folders(&steps[1])[1],
            ("backup-key", "/var/run/groundskeeper/encryption-from", Some("key"))
        );
        // Plain: no flag, no key mounted.
        let plain = Snapshot { encoding: StoreEncoding::default(), ..snapshot };
        let steps = snapshot_steps(&policy, &plain, &naming, &main_cluster()).unwrap();
        for step in &steps {
            let args = step.operation.to_args().join(" ");
            assert!(!args.contains("--compression") && !args.contains("--encryption-key"), "{args}");
            assert_eq!(folders(step), [("s3", step.secret_folders[0].mount_path.as_str(), None)]);
        }
    }

    /// A delta is written as the store says; a Verify (to a point in time or not) only reads; the
    /// replay of a Restore to a point in time writes its saved snapshot as the store says.
    #[test]
    fn deltas_write_encoded_and_verifies_and_replays_read_with_the_key() {
        let spec: groundskeeper_api::etcd_cluster::EtcdClusterSpec =
            serde_json::from_value(serde_json::json!({"endpoints": ["http://e-0:2379"]})).unwrap();
        let policy = Policy::from_spec(&spec).unwrap();
        let naming = SnapshotNaming { cluster: "main".into(), time: "2026-01-01T00:00:00Z".parse().unwrap() };
        let delta = Delta {
            to: Store::Claim("snaps".into()),
            file_name: "{cluster}-{time}.db".into(),
            start_revision: None,
            encoding: encrypted(true),
        };
        let args = delta_step(&policy, &delta, &naming).operation.to_args().join(" ");
        assert!(
            args.contains("--compression zstd --encryption-key /var/run/groundskeeper/encryption-to/key"),
            "{args}"
        );
        let verify = Verify {
            from: Store::Claim("snaps".into()),
            object: None,
            file_name: "{cluster}-{time}.db".into(),
            to_revision: None,
            encoding: encrypted(false),
        };
        for verify in [verify.clone(), Verify { to_revision: Some(10), ..verify }] {
            let step = verify_step(&verify, &naming, &main_cluster());
            let args = step.operation.to_args().join(" ");
            assert!(args.contains("--encryption-key /var/run/groundskeeper/encryption-from/key"), "{args}");
            assert!(!args.contains("--compression"), "{args}");
            assert_eq!(
                folders(&step),
                [("backup-key", "/var/run/groundskeeper/encryption-from", Some("key"))]
            );
        }
        let target = ReplayTarget { object: None, to_revision: 10, save_as: Some("main-x.db".into()) };
        let encoding = encrypted(true);
        let step = replay_to(
            (&Store::Claim("snaps".into()), &encoding),
            "{cluster}-{time}.db",
            &target,
            &naming,
            &main_cluster(),
        );
        let args = step.operation.to_args().join(" ");
        assert!(args.contains("--save-as main-x.db"), "{args}");
        assert!(args.contains("--compression zstd"), "{args}");
        assert!(args.contains("--encryption-key /var/run/groundskeeper/encryption-from/key"), "{args}");
    }

    /// A copy carries objects as they are: it is never given a key nor told to compress.
    #[test]
    fn a_copy_gets_neither_key_nor_compression() {
        let bucket = BucketSpec {
            url: "s3://b".into(),
            credentials_secret: Some("s3".into()),
            ..BucketSpec::default()
        };
        let copy = Copy {
            from: Store::Claim("a".into()),
            to: Store::Bucket(bucket),
            file_name: "{cluster}-{time}.db".into(),
            only: vec![],
        };
        let naming = SnapshotNaming { cluster: "main".into(), time: "2026-01-01T00:00:00Z".parse().unwrap() };
        let step = copy_step(&copy, &naming);
        let args = step.operation.to_args().join(" ");
        assert!(!args.contains("--encryption-key") && !args.contains("--compression"), "{args}");
        assert_eq!(folders(&step), [("s3", "/var/run/groundskeeper/store-to", None)]);
    }
}
