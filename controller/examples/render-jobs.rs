//! Writes the Jobs the controller builds, for a sample ScyllaCluster and a sample EtcdCluster,
//! as YAML into the directory given as the only argument. `.ci/run` validates them strictly
//! against Kubernetes' schemas, like the checked-in manifests: the objects the controller sends
//! are held to the same standard as the ones a person applies.
//!
//! `cargo run -p groundskeeper-controller --example render-jobs -- DIR`

use groundskeeper_protocol::operation::{
    DefragRequest, EtcdTarget, Operation, SnapshotOutput, SnapshotRequest, SnapshotRetention,
};
use std::path::PathBuf;
use std::sync::Arc;

use groundskeeper_api::EtcdCluster;
use groundskeeper_api::scylla::ScyllaCluster;
use groundskeeper_controller::etcd::job::{EtcdJob, etcd_job};
use groundskeeper_controller::jobs::{ClaimVolume, build_job};
use groundskeeper_controller::runtime::context::{Context, ControllerConfig};
use groundskeeper_controller::runtime::metrics::Metrics;
use groundskeeper_controller::scylla::job::{NodeCleanup, cleanup_job};
use groundskeeper_protocol::keys;
use http::{Request, Response};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::client::Body;
use serde_json::json;
use std::collections::BTreeMap;

#[tokio::main]
async fn main() {
    let dir = PathBuf::from(std::env::args().nth(1).expect("usage: render-jobs DIR"));
    std::fs::create_dir_all(&dir).expect("the output directory can be created");
    let config = ControllerConfig::default();

    let scylla: ScyllaCluster = serde_json::from_value(json!({
        "apiVersion": "scylla.scylladb.com/v1", "kind": "ScyllaCluster",
        "metadata": {"name": "simple-cluster", "namespace": "scylla", "uid": "8b0e3f0e-0000-4000-8000-000000000001"},
        "spec": {"version": "6.2.0", "agentVersion": "3.4.0", "datacenter": {"name": "us-east-1", "racks": [{
            "name": "us-east-1a", "members": 3, "storage": {"capacity": "100Gi"},
            "placement": {
                "tolerations": [{"key": "role", "operator": "Equal", "value": "scylla", "effect": "NoSchedule"}],
                "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1a"]}]}
                ]}},
                "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "podAffinityTerm": {
                    "topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "scylla"}}}}]}
            }
        }]}}
    }))
    .expect("a valid ScyllaCluster");
    let hash = "znqy/aBReVlJDtCopwdiTnIM/tKxDLyBD1vT1hPmz5EYmdT7+UkkYYNPRleGTwkiVwsMedQOnzz9VJGQYMEcNg==";
    let task = k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
        api_version: "groundskeeper.dev/v1alpha1".into(),
        kind: "MaintenanceTask".into(),
        name: "simple-cluster-cleanup-1763900000".into(),
        uid: "8b0e3f0e-0000-4000-8000-000000000003".into(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    };
    let cleanup = cleanup_job(
        &scylla,
        &config,
        NodeCleanup {
            job: "simple-cluster-cleanup-1763900000-0".into(),
            owner: task,
            service: "simple-cluster-us-east-1-us-east-1a-0".into(),
            rack: "us-east-1a".into(),
            ring_hash: Some(hash.into()),
            keyspaces: Vec::new(),
            mark_node_clean: false,
            labels: [(
                groundskeeper_protocol::keys::TASK_LABEL.to_owned(),
                "simple-cluster-cleanup-1763900000".to_owned(),
            )]
            .into(),
        },
    );
    write(&dir, "cleanup-job.yaml", &build_job(&cleanup));

    let etcd: EtcdCluster = serde_json::from_value(json!({
        "apiVersion": "groundskeeper.dev/v1alpha1", "kind": "EtcdCluster",
        "metadata": {"name": "main", "namespace": "etcd", "uid": "8b0e3f0e-0000-4000-8000-000000000002"},
        "spec": {"endpoints": ["https://etcd-0.etcd:2379"], "tls": {"secretName": "etcd-client-tls"}}
    }))
    .expect("a valid EtcdCluster");
    // Rendering makes no API call: the client's service is never answered.
    let (service, _never_answered) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let ctx = Context::new(kube::Client::new(service, "default"), config.clone(), Arc::new(Metrics::new()));
    // The first step of an automatic Defragment task, as the task controller builds it.
    let task = "main-defragment-1767225600";
    let maintenance = etcd_job(
        &etcd,
        &ctx,
        EtcdJob {
            owner: OwnerReference {
                api_version: "groundskeeper.dev/v1alpha1".into(),
                kind: "MaintenanceTask".into(),
                name: task.into(),
                uid: "8b0e3f0e-0000-4000-8000-000000000003".into(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            },
            name: format!("{task}-0"),
            operation: Operation::Defrag(DefragRequest {
                etcd: EtcdTarget { endpoints: vec!["https://etcd-0.etcd:2379".into()], tls: None },
                min_defrag_bytes: 100_000_000,
                max_fragmented_percent: 45.0,
                ..DefragRequest::default()
            }),
            tls_secret: Some("etcd-client-tls".into()),
            labels: BTreeMap::from([
                (keys::TASK_LABEL.to_owned(), task.to_owned()),
                (keys::TASK_STEP_LABEL.to_owned(), "0".to_owned()),
            ]),
            limits: config.job_limits.clone(),
            claim_volumes: Vec::new(),
            secret_folders: Vec::new(),
            scratch: None,
        },
    );
    write(&dir, "etcd-maintenance-job.yaml", &build_job(&maintenance));

    // The Job of a Snapshot task, its claim mounted, as the task controller builds it.
    let task = "before-upgrade";
    let snapshot = etcd_job(
        &etcd,
        &ctx,
        EtcdJob {
            owner: OwnerReference {
                api_version: "groundskeeper.dev/v1alpha1".into(),
                kind: "MaintenanceTask".into(),
                name: task.into(),
                uid: "8b0e3f0e-0000-4000-8000-000000000004".into(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            },
            name: format!("{task}-0"),
            operation: Operation::Snapshot(SnapshotRequest {
                etcd: EtcdTarget { endpoints: vec!["https://etcd-0.etcd:2379".into()], tls: None },
                output: SnapshotOutput::File("/snapshots/main-20260102T150405Z.db".into()),
                retention: Some(SnapshotRetention {
                    retain: 5,
                    file_name_template: "{cluster}-{time}.db".into(),
                    cluster: "main".into(),
                    tiers: vec!["1d:30d".into()],
                    keep_deltas_for: Some("1d".into()),
                    ..SnapshotRetention::default()
                }),
                encoding: Default::default(),
            }),
            tls_secret: Some("etcd-client-tls".into()),
            labels: BTreeMap::from([
                (keys::TASK_LABEL.to_owned(), task.to_owned()),
                (keys::TASK_STEP_LABEL.to_owned(), "0".to_owned()),
            ]),
            limits: config.job_limits.clone(),
            claim_volumes: vec![ClaimVolume {
                claim_name: "main-snapshots".into(),
                mount_path: "/snapshots".into(),
            }],
            secret_folders: Vec::new(),
            scratch: None,
        },
    );
    write(&dir, "etcd-snapshot-job.yaml", &build_job(&snapshot));

    // A Snapshot task into a bucket, compressed and encrypted, proven after: its two Jobs as the
    // task's steps make them (the bucket's credentials and the key's Secret, that one key only,
    // mounted read-only).
    let task = "encoded";
    let policy = groundskeeper_controller::etcd::policy::Policy::from_spec(&etcd.spec).expect("a valid spec");
    let work = groundskeeper_api::validate::Snapshot {
        persistent_volume_claim: String::new(),
        store: groundskeeper_api::snapshot_store::Store::Bucket(
            groundskeeper_api::snapshot_store::BucketSpec {
                url: "s3://backups/etcd/main".into(),
                endpoint: Some("https://minio.backup.svc:9000".into()),
                credentials_secret: Some("backup-s3".into()),
                ..Default::default()
            },
        ),
        verify: true,
        file_name: "{cluster}-{time}.db".into(),
        retain: 5,
        rules: Default::default(),
        encoding: groundskeeper_api::snapshot_store::StoreEncoding {
            compress: true,
            encryption: Some(groundskeeper_api::snapshot_store::EncryptionSpec {
                secret_name: "backup-key".into(),
                key: "key".into(),
            }),
        },
    };
    let naming = groundskeeper_controller::etcd::snapshot_steps::SnapshotNaming {
        cluster: "main".into(),
        time: "2026-01-02T15:04:05Z".parse().expect("a time"),
    };
    let steps =
        groundskeeper_controller::etcd::snapshot_steps::snapshot_steps(&policy, &work, &naming, &etcd)
            .expect("the steps");
    for (n, step) in steps.into_iter().enumerate() {
        let job = etcd_job(
            &etcd,
            &ctx,
            EtcdJob {
                owner: OwnerReference {
                    api_version: "groundskeeper.dev/v1alpha1".into(),
                    kind: "MaintenanceTask".into(),
                    name: task.into(),
                    uid: "8b0e3f0e-0000-4000-8000-000000000005".into(),
                    controller: Some(true),
                    block_owner_deletion: Some(true),
                },
                name: format!("{task}-{n}"),
                operation: step.operation,
                tls_secret: Some("etcd-client-tls".into()),
                labels: BTreeMap::from([
                    (keys::TASK_LABEL.to_owned(), task.to_owned()),
                    (keys::TASK_STEP_LABEL.to_owned(), n.to_string()),
                ]),
                limits: config.job_limits.clone(),
                claim_volumes: step.claims,
                secret_folders: step.secret_folders,
                scratch: step.scratch,
            },
        );
        write(&dir, &format!("etcd-snapshot-encoded-job-{n}.yaml"), &build_job(&job));
    }
}

fn write(dir: &std::path::Path, file: &str, job: &k8s_openapi::api::batch::v1::Job) {
    let mut value = serde_json::to_value(job).expect("Jobs serialise");
    value["apiVersion"] = json!("batch/v1");
    value["kind"] = json!("Job");
    let path = dir.join(file);
    std::fs::write(&path, serde_saphyr::to_string(&value).expect("YAML")).expect("written");
    println!("wrote {}", path.display());
}
