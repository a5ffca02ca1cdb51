//! The StatefulSet stand-in (`groundskeeper_e2e::statefulset`) on the in-memory API with real
//! etcd 3.5: its pods come up Ready as one cluster on their claims' folders (the folders the Job
//! simulator mounts), scaling to zero stops every etcd and keeps the claims, scaling back brings
//! the same cluster back, and two members lost for good crash-loop without quorum until their
//! data is restored. A missing etcd 3.5 skips a test with a message, except under `CI=true`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use etcd_client::{Client, ConnectOptions};
use groundskeeper_e2e::apiserver::{ApiServer, ResourceId};
use groundskeeper_e2e::etcd_cluster::{CLUSTER_TURNS, EtcdVersion, etcd_or_skip, restore_tool_or_skip};
use groundskeeper_e2e::kubelet::{Container, JobSimulator, Termination};
use groundskeeper_e2e::statefulset::{EtcdPods, EtcdStatefulSet, MOUNT_PATH, PodState};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use serde_json::{Value, json};

use crate::harness::{jobs, names, wait_until};

const NAMESPACE: &str = "etcd";
const SET: &str = "main";
/// Guards against a stand-in that never settles; not a performance bound.
const GUARD: Duration = Duration::from_secs(60);

struct Stand {
    server: Arc<ApiServer>,
    jobs: JobSimulator,
    set: EtcdStatefulSet,
    binary: PathBuf,
}

/// A Job's container that checks that etcd's database is on the claim mounted at
/// [`MOUNT_PATH`]: exit 0 if it is.
async fn look_for_database(container: Container) -> Termination {
    let db = Path::new(MOUNT_PATH).join("default.etcd/member/snap/db");
    match container.files.resolve(&db) {
        Some(local) if local.is_file() => Termination { exit_code: 0, message: local.display().to_string() },
        other => Termination { exit_code: 1, message: format!("no database: {other:?}") },
    }
}

impl Stand {
    /// The stand-in for StatefulSet `etcd/main` (not created yet), three etcd 3.5 members.
    async fn start() -> Option<Stand> {
        let binary = etcd_or_skip(EtcdVersion::V3_5)?;
        let server = Arc::new(ApiServer::start().await.expect("the API server starts"));
        let jobs = JobSimulator::builder(server.clone(), look_for_database)
            .start_delay(Duration::from_millis(10))
            .spawn();
        let folders = jobs.claim_folders();
        let pods = EtcdPods::new(&binary, 3).expect("three members' ports");
        let set = EtcdStatefulSet::start(server.clone(), NAMESPACE, SET, pods, move |namespace, claim| {
            folders.dir(namespace, claim)
        });
        Some(Stand { server, jobs, set, binary })
    }

    fn pod_objects(&self) -> Vec<Pod> {
        self.server
            .list(&ResourceId::of::<Pod>(), Some(NAMESPACE))
            .into_iter()
            .map(|pod| serde_json::from_value(pod).expect("a Pod"))
            .collect()
    }

    fn pod_names(&self) -> Vec<String> {
        self.pod_objects().into_iter().filter_map(|pod| pod.metadata.name).collect()
    }

    fn ready_pods(&self) -> usize {
        self.pod_objects().iter().filter(|pod| is_ready(pod)).count()
    }

    fn statefulset(&self) -> StatefulSet {
        self.server.get_as(Some(NAMESPACE), SET).expect("the StatefulSet exists")
    }

    async fn wait_for(&self, what: &str, mut done: impl FnMut(&Stand) -> bool) {
        wait_until(
            what,
            GUARD,
            Duration::from_millis(100),
            || done(self),
            || {
                format!(
                    "stand-in: {:#?}\npods: {:#?}\nstatefulset status: {:#?}\nlogs:\n{}",
                    self.set.pods(),
                    self.server.list(&ResourceId::of::<Pod>(), Some(NAMESPACE)),
                    self.server.get_as::<StatefulSet>(Some(NAMESPACE), SET).and_then(|s| s.status),
                    self.set.logs()
                )
            },
        )
        .await;
    }

    /// Waits until `n` pods are Ready and the StatefulSet's status says so for its generation.
    async fn wait_ready(&self, n: usize) {
        self.wait_for(&format!("{n} pods Ready"), |s| {
            let set = s.statefulset();
            let status = set.status.unwrap_or_default();
            s.ready_pods() == n
                && s.pod_names().len() == n
                && status.ready_replicas == Some(n as i32)
                && status.observed_generation == set.metadata.generation
        })
        .await;
    }

    async fn wait_no_pods(&self) {
        self.wait_for("no pod left", |s| {
            s.pod_names().is_empty()
                && s.set.pods().is_empty()
                && s.statefulset().status.is_some_and(|status| status.replicas == 0)
        })
        .await;
    }

    /// A client of ordinal `ordinal`'s etcd only, giving up on a request after `timeout`.
    async fn client(&self, ordinal: usize, timeout: Duration) -> Client {
        let options =
            ConnectOptions::new().with_connect_timeout(Duration::from_secs(2)).with_timeout(timeout);
        Client::connect([self.set.etcd().client_url(ordinal)], Some(options)).await.expect("an etcd client")
    }

    fn claim_names(&self) -> BTreeSet<String> {
        names(&self.server, &ResourceId::of::<PersistentVolumeClaim>(), NAMESPACE)
    }
}

fn is_ready(pod: &Pod) -> bool {
    let status = pod.status.clone().unwrap_or_default();
    status.phase.as_deref() == Some("Running")
        && status.conditions.unwrap_or_default().iter().any(|c| c.type_ == "Ready" && c.status == "True")
}

fn expected_claims() -> BTreeSet<String> {
    (0..3).map(|i| format!("data-{SET}-{i}")).collect()
}

/// Whether anything accepts connections on 127.0.0.1:`port`.
fn listening(port: u16) -> bool {
    std::net::TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_millis(500)).is_ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_pods_come_up_ready_as_one_cluster_on_their_claims() {
    let _one = CLUSTER_TURNS.lock().await;
    let Some(stand) = Stand::start().await else {
        return;
    };
    stand.set.create_statefulset(3).expect("the StatefulSet");
    stand.wait_ready(3).await;

    let set = stand.statefulset();
    let status = set.status.clone().unwrap();
    assert_eq!((status.replicas, status.current_replicas, status.available_replicas), (3, Some(3), Some(3)));
    for (i, pod) in stand.pod_objects().iter().enumerate() {
        let name = format!("{SET}-{i}");
        assert_eq!(pod.metadata.name.as_deref(), Some(name.as_str()));
        let owner = &pod.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str(), owner.controller),
            ("StatefulSet", SET, Some(true))
        );
        assert_eq!(owner.uid, set.metadata.uid.clone().unwrap());
        let labels = pod.metadata.labels.clone().unwrap();
        assert_eq!(labels["statefulset.kubernetes.io/pod-name"], name);
        assert_eq!(labels["app.kubernetes.io/instance"], SET, "the template's labels");
        let spec = pod.spec.clone().unwrap();
        let claim = spec.volumes.unwrap()[0].persistent_volume_claim.clone().unwrap().claim_name;
        assert_eq!(claim, format!("data-{SET}-{i}"));
        let container = &pod.status.as_ref().unwrap().container_statuses.as_ref().unwrap()[0];
        assert!(container.ready && container.restart_count == 0, "{container:?}");
        assert!(container.state.as_ref().unwrap().running.is_some(), "{container:?}");
    }
    assert_eq!(stand.claim_names(), expected_claims());
    let claim: PersistentVolumeClaim = stand.server.get_as(Some(NAMESPACE), "data-main-2").unwrap();
    assert_eq!(claim.status.unwrap().phase.as_deref(), Some("Bound"));
    assert!(stand.set.pods().iter().all(|p| p.up && p.ready && p.restarts == 0), "{:?}", stand.set.pods());

    // One cluster: a write through one member is read through another; every member is there by
    // its pod's name and peer URL.
    let mut first = stand.client(0, Duration::from_secs(5)).await;
    first.put("greeting", "hello", None).await.expect("a write through main-0");
    let mut last = stand.client(2, Duration::from_secs(5)).await;
    let read = last.get("greeting", None).await.expect("a read through main-2");
    assert_eq!(read.kvs()[0].value(), b"hello");
    let members = last.member_list().await.expect("the member list");
    let mut seen: Vec<(String, Vec<String>)> =
        members.members().iter().map(|m| (m.name().to_owned(), m.peer_urls().to_vec())).collect();
    seen.sort();
    let wanted: Vec<(String, Vec<String>)> =
        (0..3).map(|i| (format!("{SET}-{i}"), vec![stand.set.etcd().peer_url(i)])).collect();
    assert_eq!(seen, wanted);

    // The data is on the claim's folder, the one a Job mounting that claim sees.
    assert!(stand.set.data_dir(1).join("member/snap/db").is_file());
    assert_eq!(stand.set.data_dir(1), stand.jobs.claim_dir(NAMESPACE, "data-main-1").join("default.etcd"));
    let job = json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": { "name": "look", "namespace": NAMESPACE },
        "spec": { "template": { "spec": {
            "restartPolicy": "Never",
            "containers": [{ "name": "look", "image": "i", "args": [],
                             "volumeMounts": [{ "name": "data", "mountPath": MOUNT_PATH }] }],
            "volumes": [{ "name": "data", "persistentVolumeClaim": { "claimName": "data-main-1" } }],
        }}},
    });
    stand.server.create(&jobs(), Some(NAMESPACE), job).expect("the Job");
    stand.wait_for("the Job finished", |s| !s.jobs.log().finished.is_empty()).await;
    assert_eq!(stand.jobs.log().finished, [("look".to_owned(), 0)], "the Job saw main-1's database");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scaling_to_zero_stops_every_member_and_scaling_back_brings_the_same_cluster() {
    let _one = CLUSTER_TURNS.lock().await;
    let Some(stand) = Stand::start().await else {
        return;
    };
    stand.set.create_statefulset(3).expect("the StatefulSet");
    stand.wait_ready(3).await;
    let mut client = stand.client(0, Duration::from_secs(5)).await;
    client.put("kept", "across the scale down", None).await.expect("a write");
    let before = client.member_list().await.expect("the member list");
    let cluster_id = before.header().unwrap().cluster_id();
    let mut member_ids: Vec<u64> = before.members().iter().map(|m| m.id()).collect();
    member_ids.sort();

    // A pod deleted by hand goes once its etcd stopped, and comes back as a new pod on the same
    // claim.
    let uid = |s: &Stand| s.server.get_as::<Pod>(Some(NAMESPACE), "main-1").and_then(|p| p.metadata.uid);
    let first_uid = uid(&stand).unwrap();
    stand.server.delete(&ResourceId::of::<Pod>(), Some(NAMESPACE), "main-1").expect("main-1 deleted");
    stand.wait_for("main-1 back as a new pod", |s| uid(s).is_some_and(|u| u != first_uid)).await;
    stand.wait_ready(3).await;
    assert_eq!(stand.set.pod(1).map(|p| p.restarts), Some(0), "a new pod counts from 0");

    // Record the order in which pods start being deleted and are gone.
    let order = Arc::new(Mutex::new((Vec::<String>::new(), Vec::<String>::new())));
    let mut changes = stand.server.subscribe();
    let recorder = {
        let order = order.clone();
        tokio::spawn(async move {
            while let Ok(Some(change)) = changes.next().await {
                if change.resource != ResourceId::of::<Pod>() {
                    continue;
                }
                let name = change.object["metadata"]["name"].as_str().unwrap_or_default().to_owned();
                let deleting = |o: &Value| o["metadata"]["deletionTimestamp"].is_string();
                let mut order = order.lock().unwrap();
                if deleting(&change.object) && !change.previous.as_ref().is_some_and(deleting) {
                    order.0.push(name.clone());
                }
                if change.kind == groundskeeper_e2e::apiserver::ChangeKind::Deleted {
                    order.1.push(name);
                }
            }
        })
    };
    stand.set.scale(0).expect("scale to 0");
    stand.wait_no_pods().await;
    // The recorder reads the changes behind the API: the last ones may still be on their way.
    stand
        .wait_for("the recorder saw every pod go", |_| {
            order.lock().unwrap().1.iter().collect::<BTreeSet<_>>().len() >= 3
        })
        .await;
    recorder.abort();
    let (deletions, gone) = order.lock().unwrap().clone();
    assert_eq!(
        deletions,
        ["main-2", "main-1", "main-0"],
        "deletions asked for from the highest ordinal down"
    );
    assert_eq!(gone.iter().collect::<BTreeSet<_>>().len(), 3, "{gone:?}");

    // Every etcd stopped: nothing listens on any client or peer port any more.
    let etcd = stand.set.etcd();
    for port in etcd.client_ports.iter().chain(&etcd.peer_ports) {
        assert!(!listening(*port), "port {port} still open");
    }
    // The claims and their data stay.
    assert_eq!(stand.claim_names(), expected_claims());
    for i in 0..3 {
        assert!(stand.set.data_dir(i).join("member/snap/db").is_file(), "member {i}'s data");
    }

    stand.set.scale(3).expect("scale to 3");
    stand.wait_ready(3).await;
    let mut client = stand.client(1, Duration::from_secs(5)).await;
    let read = client.get("kept", None).await.expect("a read after the scale up");
    assert_eq!(read.kvs()[0].value(), b"across the scale down");
    let after = client.member_list().await.expect("the member list");
    let mut ids: Vec<u64> = after.members().iter().map(|m| m.id()).collect();
    ids.sort();
    assert_eq!((after.header().unwrap().cluster_id(), ids), (cluster_id, member_ids), "the same cluster");
    assert!(stand.set.pods().iter().all(|p| p.restarts == 0), "new pods: {:?}", stand.set.pods());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_members_lost_for_good_crash_loop_without_quorum_until_their_data_is_restored() {
    let _one = CLUSTER_TURNS.lock().await;
    let Some(stand) = Stand::start().await else {
        return;
    };
    stand.set.create_statefulset(3).expect("the StatefulSet");
    stand.wait_ready(3).await;
    let mut client = stand.client(0, Duration::from_secs(3)).await;
    for i in 0..10 {
        client.put(format!("before/{i}"), "x", None).await.expect("a write");
    }
    let scratch = tempfile::tempdir().unwrap();
    let snapshot = scratch.path().join("snapshot.db");
    save_snapshot(&mut client, &snapshot).await;

    let lost: Vec<PathBuf> =
        [1, 2].iter().map(|i| stand.set.lose_member(*i).expect("the member's database")).collect();
    assert!(lost.iter().all(|db| std::fs::read(db).unwrap().starts_with(b"groundskeeper: ")), "{lost:?}");

    // Both crash-loop: restarted again and again, never Ready; main-0 runs on, alone.
    // Seen by the stand-in and written into the pods' status: the status follows the stand-in's
    // own state, so both are waited for.
    let crash_looping = |s: &Stand, restarts: u32| {
        let lost =
            |p: &PodState| p.ordinal > 0 && p.restarts >= restarts && !p.ready && p.last_exit_code == Some(2);
        let written = |pod: &Pod| {
            let statuses = pod.status.as_ref().and_then(|s| s.container_statuses.clone()).unwrap_or_default();
            statuses.first().is_some_and(|c| c.restart_count >= restarts as i32)
        };
        s.set.pods().iter().filter(|p| lost(p)).count() == 2
            && s.pod_objects().iter().filter(|p| p.metadata.name.as_deref() != Some("main-0")).all(written)
    };
    stand.wait_for("main-1 and main-2 restarted twice", |s| crash_looping(s, 2)).await;
    stand.wait_for("and again", |s| crash_looping(s, 3)).await;
    let main_0 = stand.set.pod(0).unwrap();
    assert!(main_0.up && main_0.restarts == 0, "{main_0:?}");
    for pod in stand.pod_objects().iter().filter(|p| p.metadata.name.as_deref() != Some("main-0")) {
        assert!(!is_ready(pod), "{pod:?}");
        let status = pod.status.clone().unwrap();
        assert_eq!(status.phase.as_deref(), Some("Running"), "a crash-looping pod is still Running");
        let container = &status.container_statuses.unwrap()[0];
        assert!(container.restart_count >= 3 && !container.ready, "{container:?}");
        let last = container.last_state.clone().unwrap().terminated.expect("lastState.terminated");
        assert_eq!(last.exit_code, 2, "etcd panics on the lost database: {last:?}");
    }
    assert!(stand.set.logs().contains("failed to open database"), "{}", stand.set.logs());
    assert_eq!(stand.statefulset().status.unwrap().ready_replicas, Some(1));

    // No quorum: a write through the member left times out.
    let write = client.put("after", "lost", None).await;
    assert!(write.is_err(), "a write without quorum: {write:?}");

    // Restored by hand, as a Restore task would: scale to 0 (every pod goes, Ready or not, under
    // Parallel), each member's data moved aside and restored from the snapshot, scale back.
    let Some(tool) = restore_tool_or_skip(EtcdVersion::V3_5, &stand.binary) else {
        return;
    };
    stand.set.scale(0).expect("scale to 0");
    stand.wait_no_pods().await;
    let etcd = stand.set.etcd().clone();
    for i in 0..3 {
        let data_dir = stand.set.data_dir(i);
        std::fs::rename(&data_dir, data_dir.with_extension("etcd.lost")).expect("the old data moved aside");
        let out = std::process::Command::new(&tool)
            .args(["snapshot", "restore"])
            .arg(&snapshot)
            .arg(format!("--name={SET}-{i}"))
            .arg(format!("--data-dir={}", data_dir.display()))
            .arg(format!("--initial-cluster={}", etcd.initial_cluster(SET)))
            .arg("--initial-cluster-token=restored")
            .arg(format!("--initial-advertise-peer-urls={}", etcd.peer_url(i)))
            .output()
            .expect("the restore tool runs");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    stand.set.scale(3).expect("scale to 3");
    stand.wait_ready(3).await;
    let mut client = stand.client(2, Duration::from_secs(5)).await;
    let keys = client.get("before/", Some(etcd_client::GetOptions::new().with_prefix())).await.unwrap();
    assert_eq!(keys.kvs().len(), 10, "the keys of the snapshot");
    client.put("after", "restored", None).await.expect("a write with quorum again");
}

/// `etcdctl snapshot save`, through the client.
async fn save_snapshot(client: &mut Client, path: &Path) {
    let mut stream = client.snapshot().await.expect("a snapshot stream");
    let mut bytes = Vec::new();
    while let Some(chunk) = stream.message().await.expect("a snapshot chunk") {
        bytes.extend_from_slice(chunk.blob());
    }
    std::fs::write(path, bytes).expect("the snapshot file");
}

/// Under `OrderedReady` (the default policy) the next pod is created only once the previous one
/// is Ready; etcd's first member answers nothing until a majority has started, so it never is
/// (why [`EtcdPods::statefulset`] asks for `Parallel`). Scaling down deletes that pod: it is the
/// first unhealthy one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ordered_ready_waits_for_each_pod_to_be_ready_before_the_next() {
    let _one = CLUSTER_TURNS.lock().await;
    let Some(stand) = Stand::start().await else {
        return;
    };
    let mut set = stand.set.etcd().statefulset(NAMESPACE, SET, 3);
    set["spec"]["podManagementPolicy"] = "OrderedReady".into();
    stand.server.create(&ResourceId::of::<StatefulSet>(), Some(NAMESPACE), set).expect("the StatefulSet");
    stand.wait_for("main-0's etcd runs", |s| s.set.pod(0).is_some_and(|p| p.up)).await;
    // Several probes and syncs later: still main-0 alone, not Ready.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(stand.pod_names(), ["main-0"]);
    assert_eq!(stand.ready_pods(), 0);
    let status = stand.statefulset().status.unwrap();
    assert_eq!((status.replicas, status.ready_replicas), (1, Some(0)));

    stand.set.scale(0).expect("scale to 0");
    stand.wait_no_pods().await;
    assert!(!listening(stand.set.etcd().client_ports[0]));
}
