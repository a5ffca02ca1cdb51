//! Snapshot tasks end to end on the in-memory Kubernetes API with real etcd (3.4 and 3.5, 3
//! members on loopback): a person creates a `Snapshot` MaintenanceTask → the task controller
//! checks its PersistentVolumeClaim (a missing one keeps the task Pending, naming it) → creates
//! the Job mounting the claim → the simulated kubelet runs `groundskeeper-job snapshot` with the
//! Job's own arguments, the claim's folder standing for the volume → the file lands on the claim,
//! the task Completed with `status.snapshot`, the EtcdCluster's `status.lastSnapshot` set; and
//! retention keeps the newest of that cluster only.
//!
//! What plays which part: the task controller unchanged, with the RBAC of `manifests/`; the
//! Job controller and kubelet `groundskeeper_e2e::kubelet::JobSimulator` (claims are local
//! folders kept across Jobs); the runner's library in-process; etcd real. A missing etcd binary
//! skips a test with a message, except under `CI=true`.

use groundskeeper_e2e::etcd_writes::{WritePlan, Writes};
use groundskeeper_e2e::fixtures;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use groundskeeper_api::EtcdCluster;
use groundskeeper_api::maintenance_task::{MaintenanceTask, SnapshotStatus, TaskState};
use groundskeeper_controller::runtime::context::ControllerConfig;
use groundskeeper_e2e::apiserver::rbac::controller_grants;
use groundskeeper_e2e::apiserver::{ApiServer, ResourceId};
use groundskeeper_e2e::etcd_cluster::{self, ClusterOptions, EtcdVersion, etcd_or_skip};
use groundskeeper_e2e::kubelet::{Container, JobSimulator, Termination};
use groundskeeper_job::cli::{Cli, Command};
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use serde_json::{Value, json};
use tokio::sync::oneshot;

use crate::harness::{
    Controllers, Part, api_server, etcd_clusters, jobs, maintenance_tasks, names, wait_until,
};

const NAMESPACE: &str = "etcd";
const CLUSTER: &str = "main";
/// Guards against a scenario that never settles; not a performance bound.
const SETTLE_GUARD: Duration = Duration::from_secs(90);

/// Runs a snapshot Job's container: `groundskeeper-job snapshot` with the Job's own arguments,
/// `--output` resolved into the claim's folder, the result file standing for the termination
/// message. On a thread of its own, as it builds its own runtime like the binary.
async fn run_snapshot_job(container: Container) -> Termination {
    let args = container.args;
    let command = Cli::try_parse_args(args.clone())
        .unwrap_or_else(|e| panic!("{args:?} do not parse as groundskeeper-job's: {e}"))
        .command;
    let Command::Snapshot(mut snapshot) = command else {
        panic!("{args:?} is not a snapshot");
    };
    let output = snapshot.output.clone().expect("--output");
    snapshot.output = Some(
        container
            .files
            .resolve(&output)
            .unwrap_or_else(|| panic!("{} is on no mounted volume", output.display())),
    );
    let termination_log = tempfile::NamedTempFile::new().expect("a temp file");
    snapshot.result_file = termination_log.path().to_owned();
    let (exited, exit_code) = oneshot::channel();
    std::thread::spawn(move || {
        let _ = exited.send(groundskeeper_job::etcd::snapshot::main(snapshot));
    });
    let exit_code = exit_code.await.expect("the runner ends with an exit code");
    Termination {
        exit_code,
        message: std::fs::read_to_string(termination_log.path()).expect("the result file"),
    }
}

struct Scenario {
    server: Arc<ApiServer>,
    etcd: etcd_cluster::EtcdCluster,
    jobs: JobSimulator,
    controllers: Controllers,
}

impl Scenario {
    async fn start(version: EtcdVersion) -> Option<Scenario> {
        let binary = etcd_or_skip(version)?;
        let _ = rustls::crypto::ring::default_provider().install_default();
        let etcd = etcd_cluster::EtcdCluster::start(&binary, ClusterOptions::default())
            .await
            .expect("the etcd cluster starts");
        etcd.fill(1_000_000).await.expect("fill");
        let server = api_server(controller_grants()).await;
        let cluster = json!({
            "apiVersion": "groundskeeper.dev/v1alpha1",
            "kind": "EtcdCluster",
            "metadata": { "name": CLUSTER, "namespace": NAMESPACE },
            // No automatic maintenance: only the tasks created here run.
            "spec": { "endpoints": etcd.client_urls(), "policy": { "enabled": false } },
        });
        server.create(&etcd_clusters(), Some(NAMESPACE), cluster).expect("the EtcdCluster");
        let jobs = JobSimulator::builder(server.clone(), run_snapshot_job).spawn();
        let controllers = Controllers::start(&server, ControllerConfig::default(), &[Part::Tasks]);
        Some(Scenario { server, etcd, jobs, controllers })
    }

    /// Stops the task controller as a crash would and starts it again, with nothing carried
    /// over but what the API holds.
    async fn restart_task_controller(&mut self) {
        self.controllers.restart(Part::Tasks).await;
    }

    fn create_claim(&self, name: &str) {
        let claim: PersistentVolumeClaim = serde_json::from_value(json!({
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": { "name": name, "namespace": NAMESPACE },
            "spec": { "accessModes": ["ReadWriteOnce"], "resources": { "requests": { "storage": "1Gi" } } },
        }))
        .unwrap();
        self.server.create_as(&claim).expect("the claim");
    }

    fn create_snapshot_task(&self, name: &str, config: Value) {
        let task = fixtures::task(NAMESPACE, name, "Snapshot").target(CLUSTER).config(config).json();
        self.server.create(&maintenance_tasks(), Some(NAMESPACE), task).expect("the MaintenanceTask");
    }

    fn task(&self, name: &str) -> MaintenanceTask {
        self.server.get_as(Some(NAMESPACE), name).expect("the MaintenanceTask exists")
    }

    fn task_state(&self, name: &str) -> Option<TaskState> {
        self.task(name).status.and_then(|s| s.state)
    }

    fn cluster(&self) -> EtcdCluster {
        self.server.get_as(Some(NAMESPACE), CLUSTER).expect("the EtcdCluster exists")
    }

    fn job_names(&self) -> Vec<String> {
        names(&self.server, &jobs(), NAMESPACE).into_iter().collect()
    }

    async fn wait_for(&self, what: &str, mut done: impl FnMut(&Scenario) -> bool) {
        wait_until(
            what,
            SETTLE_GUARD,
            Duration::from_millis(50),
            || done(self),
            || {
                let tasks = self.server.list(&maintenance_tasks(), Some(NAMESPACE));
                format!("jobs: {:#?}\ntasks: {tasks:#?}", self.jobs.log())
            },
        )
        .await;
    }

    /// Creates the task and waits until it Completed; its snapshot status.
    async fn snapshot(&self, name: &str, config: Value) -> SnapshotStatus {
        self.create_snapshot_task(name, config);
        self.wait_for(&format!("task {name} finished"), |s| {
            s.task_state(name).is_some_and(TaskState::is_final)
        })
        .await;
        let status = self.task(name).status.unwrap();
        assert_eq!(status.state, Some(TaskState::Completed), "{status:#?}");
        status.snapshot.expect("status.snapshot")
    }
}

fn files_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

groundskeeper_e2e::for_each_etcd_version!(
    a_snapshot_task_waits_for_its_claim_then_writes_a_checked_file_on_it,
    retention_keeps_the_newest_snapshots_of_the_cluster_only,
);

async fn a_snapshot_task_waits_for_its_claim_then_writes_a_checked_file_on_it(version: EtcdVersion) {
    const TASK: &str = "before-upgrade";
    let Some(mut scenario) = Scenario::start(version).await else {
        return;
    };
    let writes =
        Writes::start(scenario.etcd.client(None).await.expect("a client"), WritePlan::distinct_keys());

    // No claim yet: the task waits, naming it, and no Job is made (its pod would hang Pending).
    scenario.create_snapshot_task(TASK, json!({}));
    scenario
        .wait_for("the task waits for its claim", |s| {
            s.task(TASK).status.is_some_and(|st| {
                st.conditions.iter().any(|c| {
                    c.type_ == "Queued"
                        && c.status == "True"
                        && c.message.contains("PersistentVolumeClaim main-snapshots does not exist")
                })
            })
        })
        .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(scenario.task_state(TASK), Some(TaskState::Pending));
    assert!(scenario.job_names().is_empty(), "{:?}", scenario.job_names());

    // The claim created: the task proceeds, under writes. A controller restart once its Job
    // exists renders the same Job and file name: one of each.
    scenario.create_claim("main-snapshots");
    scenario.wait_for("its Job created", |s| !s.job_names().is_empty()).await;
    scenario.restart_task_controller().await;
    scenario.wait_for("the task finished", |s| s.task_state(TASK).is_some_and(TaskState::is_final)).await;
    let written = writes.stop().await.puts.len();
    assert!(written > 0, "the writer wrote");

    let status = scenario.task(TASK).status.unwrap();
    assert_eq!(status.state, Some(TaskState::Completed), "{status:#?}");
    let snapshot = status.snapshot.clone().expect("status.snapshot");
    assert_eq!(snapshot.persistent_volume_claim, "main-snapshots");
    assert!(snapshot.file.starts_with("main-") && snapshot.file.ends_with("Z.db"), "{snapshot:?}");
    let line = status.last_operation.unwrap().description;
    assert!(line.contains(&snapshot.file), "{line}");
    assert!(line.contains("MiB"), "{line}");

    // The file on the claim is one etcd restores, and is what the status says.
    let path: PathBuf = scenario.jobs.claim_dir(NAMESPACE, "main-snapshots").join(&snapshot.file);
    let checked = groundskeeper_job::etcd::snapshot::check_file(&path)
        .unwrap_or_else(|f| panic!("{}: {}", path.display(), f.message));
    assert_eq!(snapshot.revision, checked.revision, "{snapshot:?}");
    assert_eq!(snapshot.sha256.as_deref(), Some(checked.sha256.as_str()));
    assert_eq!(snapshot.size_bytes, Some(checked.size as i64));
    assert!(snapshot.member.is_some() && snapshot.duration_seconds.is_some(), "{snapshot:?}");
    assert_eq!(
        files_in(path.parent().unwrap()),
        std::slice::from_ref(&snapshot.file),
        "no temporary file left"
    );

    let last = scenario.cluster().status.unwrap().last_snapshot.expect("lastSnapshot");
    assert_eq!(
        (last.task.as_str(), last.file.as_str(), last.revision, last.size_bytes),
        (TASK, snapshot.file.as_str(), snapshot.revision, snapshot.size_bytes)
    );
    assert_eq!(scenario.job_names(), [format!("{TASK}-0")], "one Job");
}

async fn retention_keeps_the_newest_snapshots_of_the_cluster_only(version: EtcdVersion) {
    let Some(scenario) = Scenario::start(version).await else {
        return;
    };
    scenario.create_claim("shared");
    let dir = scenario.jobs.claim_dir(NAMESPACE, "shared");
    // Another cluster's snapshot (whose name starts with this one's), an unrelated file, and a
    // temporary file an interrupted run of this cluster left.
    let others = [
        "main-2-20200101T000000Z.db".to_owned(),
        "other-20200101T000000Z.db".to_owned(),
        "README.txt".to_owned(),
    ];
    for name in &others {
        std::fs::write(dir.join(name), b"not ours").unwrap();
    }
    std::fs::write(dir.join(".main-20200101T000000Z.db.partial"), b"half").unwrap();

    let config = json!({ "persistentVolumeClaim": "shared", "retain": 2 });
    let mut taken = Vec::new();
    for name in ["snap-1", "snap-2", "snap-3"] {
        let snapshot = scenario.snapshot(name, config.clone()).await;
        taken.push(snapshot);
        // Names hold the time to the second: the next task starts in a later second.
        tokio::time::sleep(Duration::from_millis(1100)).await;
    }
    let files: Vec<&str> = taken.iter().map(|s| s.file.as_str()).collect();
    assert!(files[0] < files[1] && files[1] < files[2], "{files:?}");
    assert!(taken[0].deleted.is_empty() && taken[1].deleted.is_empty(), "{taken:#?}");
    assert_eq!(taken[2].deleted, [files[0]], "the oldest of the cluster goes");

    let mut wanted: Vec<String> = others.to_vec();
    wanted.extend([files[1].to_owned(), files[2].to_owned()]);
    wanted.sort();
    assert_eq!(files_in(&dir), wanted, "the two newest of main, and everything else");
    let last = scenario.cluster().status.unwrap().last_snapshot.expect("lastSnapshot");
    assert_eq!((last.task.as_str(), last.file.as_str()), ("snap-3", files[2]));
}

/// The kubelet stand-in's claims, without etcd: a pod whose claim does not exist waits until it
/// is created, and what a Job writes on a claim is there for the next Job.
#[tokio::test]
async fn claims_hold_pods_until_created_and_keep_files_across_jobs() {
    let server = Arc::new(ApiServer::builder().start().await.expect("the API server starts"));
    let sim = JobSimulator::builder(server.clone(), |container: Container| async move {
        let dir = container.files.resolve(Path::new("/data")).expect("the claim is mounted");
        let before = files_in(&dir).len();
        let job = container.job["metadata"]["name"].as_str().unwrap().to_owned();
        std::fs::write(dir.join(job), b"x").unwrap();
        Termination { exit_code: 0, message: before.to_string() }
    })
    .start_delay(Duration::from_millis(10))
    .spawn();
    let job = |name: &str| {
        json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": { "name": name, "namespace": NAMESPACE },
            "spec": { "template": { "spec": {
                "restartPolicy": "Never",
                "containers": [{ "name": "c", "image": "i", "args": [],
                                 "volumeMounts": [{ "name": "d", "mountPath": "/data" }] }],
                "volumes": [{ "name": "d", "persistentVolumeClaim": { "claimName": "data" } }],
            }}},
        })
    };
    server.create(&jobs(), Some(NAMESPACE), job("first")).unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(sim.log().finished.is_empty(), "runs before its claim exists");
    let claim: PersistentVolumeClaim = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": { "name": "data", "namespace": NAMESPACE },
    }))
    .unwrap();
    server.create_as(&claim).unwrap();
    let wait_finished = |n: usize| {
        let sim = &sim;
        async move {
            let guard = tokio::time::Instant::now() + SETTLE_GUARD;
            while sim.log().finished.len() < n {
                assert!(tokio::time::Instant::now() < guard, "{:?}", sim.log());
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    wait_finished(1).await;
    server.create(&jobs(), Some(NAMESPACE), job("second")).unwrap();
    wait_finished(2).await;
    assert_eq!(files_in(&sim.claim_dir(NAMESPACE, "data")), ["first", "second"]);
    let pod_said: Vec<String> = server
        .list(&ResourceId::new("", "v1", "pods"), Some(NAMESPACE))
        .iter()
        .map(|p| {
            p["status"]["containerStatuses"][0]["state"]["terminated"]["message"].as_str().unwrap().to_owned()
        })
        .collect();
    assert_eq!(pod_said, ["0", "1"], "the second pod saw the first one's file");
}
