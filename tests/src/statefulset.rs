//! The StatefulSet controller and the kubelet, played on the in-memory API for one etcd
//! StatefulSet (apps/v1): each pod is a real etcd process whose data folder is on its claim's
//! folder, the folder the Job simulator mounts for that claim ([`crate::kubelet::ClaimFolders`]),
//! so a Job mounting the claim sees (and may rewrite) the member's data, and scaling to zero
//! stops every process while the claims and their data stay.
//!
//! A scenario describes the pods with [`EtcdPods`] (binary, the claim template, the data folder
//! inside the claim, and each ordinal's client and peer port on 127.0.0.1, picked up front so
//! that an EtcdCluster can list the client URLs), creates the StatefulSet with
//! [`EtcdPods::statefulset`] or [`EtcdStatefulSet::create_statefulset`], and starts
//! [`EtcdStatefulSet`], which converges on the StatefulSet's `spec.replicas` from then on.
//!
//! Modelled, as the StatefulSet controller does it:
//! - for each ordinal below `spec.replicas`, the PersistentVolumeClaim `<template>-<set>-<i>`
//!   from `volumeClaimTemplates` if missing (Bound at once, kept when pods go: the default
//!   `Retain` policy), then the Pod `<set>-<i>` (the template's labels and annotations plus
//!   `statefulset.kubernetes.io/pod-name`, `apps.kubernetes.io/pod-index` and
//!   `controller-revision-hash`; the template's spec with `hostname`, `subdomain` and the claims'
//!   volumes; a controller ownerReference to the StatefulSet);
//! - `podManagementPolicy`: `OrderedReady` (the default) creates one pod at a time, each once its
//!   predecessors are Running and Ready, and removes pods one at a time from the highest ordinal,
//!   each once the previous one is gone, refusing to remove a pod that is not Ready unless it is
//!   the first unhealthy one (the real rule: scaling down blocks while other pods are
//!   unhealthy); `Parallel` creates and deletes every pod at once (deletions still asked for from
//!   the highest ordinal down);
//! - status: `replicas`, `readyReplicas`, `currentReplicas`, `updatedReplicas`,
//!   `availableReplicas`, `currentRevision`, `updateRevision`, `collisionCount` and
//!   `observedGeneration`.
//!
//! And as the kubelet does it:
//! - a pod runs etcd with `--name=<pod>` and `--data-dir=<claim folder>/<data dir>`, listening
//!   and advertising its ordinal's URLs; the first boot forms the cluster of every ordinal of
//!   [`EtcdPods`] (`--initial-cluster`, `--initial-cluster-state=new`, a token), flags etcd ignores
//!   once its data folder exists, as in a real StatefulSet;
//! - status as Kubernetes writes it: phase `Running`, `Ready` and `ContainersReady` True only while
//!   etcd answers a Status request on its client URL (a probe every 500 ms), `containerStatuses`
//!   with `state` (`running`, or `waiting` with `CrashLoopBackOff`), `lastState.terminated`
//!   (exit code) and `restartCount`. Ready says the member serves, not that the cluster has
//!   quorum: a running member whose peers are gone still answers and stays Ready (a `/health`
//!   probe would fail it), while a member starting without a majority answers nothing;
//! - `restartPolicy: Always`: an etcd that exits while its pod should run is started again after
//!   a back-off of 300 ms doubling up to 3 s (reset once it ran 10 s; Kubernetes uses 10 s up to
//!   5 min, which would make scenarios wait minutes), counting restarts, not Ready meanwhile;
//! - graceful deletion: a deleted pod stays (with `deletionTimestamp`) until its etcd has exited
//!   on SIGTERM, killed after `terminationGracePeriodSeconds` (30 s unless the template says
//!   otherwise), then goes. The in-memory API has no graceful pod deletion, so each pod carries
//!   the finalizer [`FINALIZER`] that this kubelet removes once its process is gone; a pod
//!   deleted by someone else (a scenario, a controller) goes the same way and, while its ordinal
//!   is below `spec.replicas`, is created again.
//!
//! Faults: [`EtcdStatefulSet::lose_member`] destroys a member's data for good (see there), and
//! [`EtcdStatefulSet::pods`] tells each pod's restart count and whether its etcd runs and answers.
//!
//! Dropping the stand-in kills every etcd it started (SIGKILL, as [`crate::etcd_cluster`] does)
//! and removes their logs; the claims' folders belong to whoever handed them in.
//!
//! Not modelled: the pod template's command, arguments and environment: etcd's flags come from
//! [`EtcdPods`], and the template states those a controller reads (`--name`, `--data-dir`,
//! `--initial-cluster` with each member's real peer URL, the state and token) but not the
//! per-member URLs, since here each member has its own loopback ports where a real template
//! names its peers by DNS (`$(POD_NAME).<serviceName>`) on fixed ports. Nor: probes declared in
//! the template, rolling updates of a changed template (the revision
//! hash changes but running pods are left alone), `updateStrategy`, `partition`,
//! `minReadySeconds`, `ordinals.start`, `persistentVolumeClaimRetentionPolicy` other than
//! `Retain`, the `scale` subresource (scale through `spec.replicas`), adoption and release of pods
//! by label selector (a pod is the set's by name and controller ownerReference), failed-pod
//! recreation (with `restartPolicy: Always` a pod never fails), the headless Service, more pods
//! than [`EtcdPods`] has ports for (such a pod waits with `CreateContainerConfigError`), and
//! TLS. Ports are picked once and kept: if another process took one while its member was
//! stopped, that member fails to start (and is restarted until the port is free again).

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use etcd_client::{Client, ConnectOptions};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use serde_json::{Value, json};
use tokio::sync::{Notify, watch};

use crate::apiserver::{ApiError, ApiServer, PatchFormat, ResourceId};
use crate::etcd_cluster::{binary_version, log_tail, send_signal, spawn_logged};
use crate::kubelet::{name_of, now};
use crate::net::free_ports;

/// Where the pod template mounts the data claim.
pub const MOUNT_PATH: &str = "/var/run/etcd";

/// The finalizer standing for graceful pod termination (see the module documentation).
pub const FINALIZER: &str = "groundskeeper.dev/stand-in-graceful-termination";

const BACKOFF_INITIAL: Duration = Duration::from_millis(300);
const BACKOFF_CAP: Duration = Duration::from_secs(3);
/// A container that ran this long starts its next back-off from the beginning.
const BACKOFF_RESET: Duration = Duration::from_secs(10);
const PROBE_PERIOD: Duration = Duration::from_millis(500);
const PROBE_TIMEOUT: Duration = Duration::from_millis(800);
/// How often a running container is checked for an exit.
const POLL: Duration = Duration::from_millis(100);
/// A sync without any change seen, as a safety net.
const RESYNC: Duration = Duration::from_secs(1);
const DEFAULT_GRACE: Duration = Duration::from_secs(30);
/// Lines of each pod's log in [`EtcdStatefulSet::logs`]: enough for the line before a Go panic's
/// stack trace.
const LOG_LINES: usize = 40;

/// The pods of one etcd StatefulSet: what runs, where its data lives, and each ordinal's ports.
#[derive(Debug, Clone)]
pub struct EtcdPods {
    pub binary: PathBuf,
    /// What the binary reports (`3.5.1`).
    pub version: String,
    /// The name of the `volumeClaimTemplates` entry holding the data (`data`): ordinal `i`'s
    /// claim is `<claim_template>-<set>-<i>`.
    pub claim_template: String,
    /// etcd's data folder inside the claim (`default.etcd`): `--data-dir` is
    /// `<MOUNT_PATH>/<data_dir>` in the template.
    pub data_dir: String,
    /// Per ordinal: the port etcd serves clients on, on 127.0.0.1.
    pub client_ports: Vec<u16>,
    /// Per ordinal: the port etcd talks to its peers on, on 127.0.0.1.
    pub peer_ports: Vec<u16>,
    /// `--initial-cluster-token` of the first boot.
    pub token: String,
}

impl EtcdPods {
    /// Pods for a cluster of `members` running `binary` (see
    /// [`crate::etcd_cluster::etcd_or_skip`]), on free loopback ports picked now, with claim
    /// template `data` and data folder `default.etcd`.
    pub fn new(binary: &Path, members: usize) -> Result<EtcdPods, String> {
        let version = binary_version(binary)
            .ok_or_else(|| format!("{} does not run (its --version failed)", binary.display()))?;
        let ports = free_ports(2 * members)?;
        Ok(EtcdPods {
            binary: binary.to_owned(),
            version,
            claim_template: "data".into(),
            data_dir: "default.etcd".into(),
            client_ports: ports[..members].to_vec(),
            peer_ports: ports[members..].to_vec(),
            token: format!("groundskeeper-sts-{}", ports[0]),
        })
    }

    /// How many ordinals have ports: the members of the first boot.
    pub fn members(&self) -> usize {
        self.client_ports.len()
    }

    pub fn client_url(&self, ordinal: usize) -> String {
        format!("http://127.0.0.1:{}", self.client_ports[ordinal])
    }

    pub fn peer_url(&self, ordinal: usize) -> String {
        format!("http://127.0.0.1:{}", self.peer_ports[ordinal])
    }

    /// Every ordinal's client URL: an EtcdCluster's `spec.endpoints`.
    pub fn client_urls(&self) -> Vec<String> {
        (0..self.members()).map(|i| self.client_url(i)).collect()
    }

    /// The claim of ordinal `ordinal` of StatefulSet `set`.
    pub fn claim(&self, set: &str, ordinal: usize) -> String {
        format!("{}-{set}-{ordinal}", self.claim_template)
    }

    /// `<set>-0=<peer URL 0>,<set>-1=…`: every member by name and peer URL.
    pub fn initial_cluster(&self, set: &str) -> String {
        (0..self.members()).map(|i| format!("{set}-{i}={}", self.peer_url(i))).collect::<Vec<_>>().join(",")
    }

    /// etcd's flags for ordinal `ordinal`, its data in `data_dir`.
    fn args(&self, set: &str, ordinal: usize, data_dir: &Path) -> Vec<String> {
        let client = self.client_url(ordinal);
        let peer = self.peer_url(ordinal);
        vec![
            format!("--name={set}-{ordinal}"),
            format!("--data-dir={}", data_dir.display()),
            format!("--listen-client-urls={client}"),
            format!("--advertise-client-urls={client}"),
            format!("--listen-peer-urls={peer}"),
            format!("--initial-advertise-peer-urls={peer}"),
            format!("--initial-cluster={}", self.initial_cluster(set)),
            "--initial-cluster-state=new".into(),
            format!("--initial-cluster-token={}", self.token),
            "--logger=zap".into(),
        ]
    }

    /// The StatefulSet `namespace/name` these pods are, with `replicas`, as a person would write
    /// it: `podManagementPolicy: Parallel`, since etcd's members need one another to serve at
    /// all (a first member alone answers nothing until a majority has started, so under
    /// `OrderedReady` its pod would never be Ready and the next one never created); the etcd
    /// container with `--name=$(POD_NAME)`, `--data-dir=/var/run/etcd/<data_dir>`,
    /// `--initial-cluster` (each member's real peer URL), the cluster state and token; the data
    /// claim mounted at [`MOUNT_PATH`]; `volumeClaimTemplates` with that claim.
    pub fn statefulset(&self, namespace: &str, name: &str, replicas: i32) -> Value {
        let labels = json!({ "app.kubernetes.io/name": "etcd", "app.kubernetes.io/instance": name });
        let args = [
            "--name=$(POD_NAME)".to_owned(),
            format!("--data-dir={MOUNT_PATH}/{}", self.data_dir),
            format!("--initial-cluster={}", self.initial_cluster(name)),
            "--initial-cluster-state=new".to_owned(),
            format!("--initial-cluster-token={}", self.token),
        ];
        json!({
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": { "name": name, "namespace": namespace, "labels": labels },
            "spec": {
                "replicas": replicas,
                "serviceName": name,
                "podManagementPolicy": "Parallel",
                "selector": { "matchLabels": labels },
                "template": {
                    "metadata": { "labels": labels },
                    "spec": {
                        "terminationGracePeriodSeconds": 10,
                        "containers": [{
                            "name": "etcd",
                            "image": format!("quay.io/coreos/etcd:v{}", self.version),
                            "command": ["etcd"],
                            "args": args,
                            "env": [{
                                "name": "POD_NAME",
                                "valueFrom": { "fieldRef": { "fieldPath": "metadata.name" } },
                            }],
                            "volumeMounts": [{ "name": self.claim_template, "mountPath": MOUNT_PATH }],
                        }],
                    },
                },
                "volumeClaimTemplates": [{
                    "metadata": { "name": self.claim_template },
                    "spec": {
                        "accessModes": ["ReadWriteOnce"],
                        "resources": { "requests": { "storage": "1Gi" } },
                    },
                }],
            },
        })
    }
}

/// What the kubelet knows of one pod, for scenarios.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodState {
    pub ordinal: usize,
    pub name: String,
    /// Its etcd process runs.
    pub up: bool,
    /// Its etcd answered the last probe (the pod's `Ready`).
    pub ready: bool,
    /// How many times its etcd was started again after exiting (`restartCount`).
    pub restarts: u32,
    /// The exit code of its etcd's last exit, if it exited.
    pub last_exit_code: Option<i32>,
    /// The pod is being deleted.
    pub terminating: bool,
}

/// The folder of a claim: (namespace, claim) → folder, created if missing.
type ClaimDir = Box<dyn Fn(&str, &str) -> PathBuf + Send + Sync>;

/// A running StatefulSet controller and kubelet for one etcd StatefulSet. Dropping it kills its
/// etcd processes.
pub struct EtcdStatefulSet {
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

struct Shared {
    server: Arc<ApiServer>,
    namespace: String,
    name: String,
    etcd: EtcdPods,
    claim_dir: ClaimDir,
    /// The processes' logs, one file per pod kept across restarts.
    logs: tempfile::TempDir,
    /// The pods the kubelet runs, by ordinal.
    runs: Mutex<BTreeMap<usize, Run>>,
    /// Set when the stand-in is dropped: nothing starts any more.
    closed: AtomicBool,
    /// Containers say here that their state changed.
    wake: Arc<Notify>,
}

impl Drop for EtcdStatefulSet {
    fn drop(&mut self) {
        self.task.abort();
        let runs = self.shared.lock_runs();
        self.shared.closed.store(true, Ordering::SeqCst);
        for run in runs.values() {
            run.task.abort();
            run.container.kill_for_good();
        }
    }
}

impl EtcdStatefulSet {
    /// Starts playing StatefulSet `namespace/name` (which may not exist yet) on `server`, its pods
    /// described by `etcd`, a claim's folder given by `claim_dir(namespace, claim)` (for the
    /// Job simulator's: `let folders = jobs.claim_folders();` then
    /// `move |ns, claim| folders.dir(ns, claim)`). Needs a Tokio runtime.
    pub fn start(
        server: Arc<ApiServer>,
        namespace: &str,
        name: &str,
        etcd: EtcdPods,
        claim_dir: impl Fn(&str, &str) -> PathBuf + Send + Sync + 'static,
    ) -> EtcdStatefulSet {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let logs = tempfile::Builder::new()
            .prefix("groundskeeper-sts-logs-")
            .tempdir()
            .expect("a temp dir for the pods' logs");
        let shared = Arc::new(Shared {
            server: server.clone(),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            etcd,
            claim_dir: Box::new(claim_dir),
            logs,
            runs: Mutex::new(BTreeMap::new()),
            closed: AtomicBool::new(false),
            wake: Arc::new(Notify::new()),
        });
        let changes = server.subscribe();
        let task = tokio::spawn(shared.clone().run(changes));
        EtcdStatefulSet { shared, task }
    }

    /// What the pods are.
    pub fn etcd(&self) -> &EtcdPods {
        &self.shared.etcd
    }

    /// Creates the StatefulSet ([`EtcdPods::statefulset`]) with `replicas`.
    pub fn create_statefulset(&self, replicas: i32) -> Result<Value, ApiError> {
        let s = &self.shared;
        let set = s.etcd.statefulset(&s.namespace, &s.name, replicas);
        s.server.create(&set_type(), Some(&s.namespace), set)
    }

    /// Sets the StatefulSet's `spec.replicas`, as `kubectl scale` would.
    pub fn scale(&self, replicas: i32) -> Result<Value, ApiError> {
        let s = &self.shared;
        let patch = json!({ "spec": { "replicas": replicas } });
        s.server.patch(&set_type(), Some(&s.namespace), &s.name, PatchFormat::Merge, &patch, false)
    }

    /// The claim of ordinal `ordinal` (`data-<set>-<i>`).
    pub fn claim(&self, ordinal: usize) -> String {
        self.shared.etcd.claim(&self.shared.name, ordinal)
    }

    /// The local folder of ordinal `ordinal`'s claim.
    pub fn claim_dir(&self, ordinal: usize) -> PathBuf {
        (self.shared.claim_dir)(&self.shared.namespace, &self.claim(ordinal))
    }

    /// Ordinal `ordinal`'s etcd data folder: `<claim folder>/<data_dir>`.
    pub fn data_dir(&self, ordinal: usize) -> PathBuf {
        self.shared.data_dir(ordinal)
    }

    /// The pods the kubelet runs (or is stopping), in ordinal order.
    pub fn pods(&self) -> Vec<PodState> {
        let runs = self.shared.lock_runs();
        runs.iter().map(|(ordinal, run)| run.state(*ordinal)).collect()
    }

    /// [`EtcdStatefulSet::pods`] for one ordinal; `None` when no pod of that ordinal runs.
    pub fn pod(&self, ordinal: usize) -> Option<PodState> {
        self.shared.lock_runs().get(&ordinal).map(|run| run.state(ordinal))
    }

    /// The end of each pod's etcd log (every start of an ordinal's etcd appends to one file), for
    /// failure messages.
    pub fn logs(&self) -> String {
        (0..self.shared.etcd.members())
            .filter_map(|ordinal| {
                let log = self.shared.log_path(ordinal);
                log.exists()
                    .then(|| format!("[{}-{ordinal}]\n{}", self.shared.name, log_tail(&log, LOG_LINES)))
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Loses member `ordinal` for good, as a lost disk or a corrupted database would: its etcd is
    /// killed (SIGKILL: a crash, not a stop) and its bbolt database `member/snap/db` overwritten
    /// with text, so etcd refuses it at every start ("failed to open database: invalid
    /// database", exit code 2) and the pod crash-loops. Its WAL stays, as it would on a disk
    /// whose database went bad. Why not an emptied data folder: etcd 3.5 refuses that too, but
    /// only while another member holding the cluster answers on its peer URL ("member … has
    /// already been bootstrapped", asked of the peers at start, since `--initial-cluster-state`
    /// is `new`); a database that cannot be opened fails on its own, whatever the other members
    /// do, as a permanent loss must. Once new data replaces the data folder (a restore), the
    /// pod's next start runs again.
    ///
    /// Done under the pod's process lock, so the kubelet cannot start it again in between.
    /// Returns the database's path; fails when the member has no database yet.
    pub fn lose_member(&self, ordinal: usize) -> Result<PathBuf, String> {
        let db = self.data_dir(ordinal).join("member/snap/db");
        if !db.is_file() {
            return Err(format!("member {ordinal} has no database at {} to lose", db.display()));
        }
        let runs = self.shared.lock_runs();
        let mut process = runs.get(&ordinal).map(|run| run.container.lock_process());
        if let Some(process) = process.as_mut() {
            process.kill();
        }
        let size = std::fs::metadata(&db).map(|m| m.len() as usize).unwrap_or(0).max(64 * 1024);
        let line = b"groundskeeper: this member's disk was lost (EtcdStatefulSet::lose_member)\n";
        let garbage: Vec<u8> = line.iter().copied().cycle().take(size).collect();
        std::fs::write(&db, garbage).map_err(|e| format!("{}: {e}", db.display()))?;
        Ok(db)
    }
}

fn set_type() -> ResourceId {
    ResourceId::of::<StatefulSet>()
}

fn pod_type() -> ResourceId {
    ResourceId::of::<Pod>()
}

fn claim_type() -> ResourceId {
    ResourceId::of::<PersistentVolumeClaim>()
}

impl Shared {
    fn lock_runs(&self) -> MutexGuard<'_, BTreeMap<usize, Run>> {
        self.runs.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn data_dir(&self, ordinal: usize) -> PathBuf {
        let claim = self.etcd.claim(&self.name, ordinal);
        (self.claim_dir)(&self.namespace, &claim).join(&self.etcd.data_dir)
    }

    fn log_path(&self, ordinal: usize) -> PathBuf {
        self.logs.path().join(format!("{}-{ordinal}.log", self.name))
    }

    /// Syncs on every change to the StatefulSet or a pod of its namespace, on every container
    /// state change, and every [`RESYNC`]. Each sync reads everything again from the API, so a
    /// change missed (a lagging subscription) costs nothing.
    async fn run(self: Arc<Self>, mut changes: crate::apiserver::Changes) {
        loop {
            self.sync();
            tokio::select! {
                change = changes.next() => {
                    // The server is gone; a change or a lag both mean: sync again.
                    if let Ok(None) = change {
                        return;
                    }
                }
                _ = self.wake.notified() => {}
                _ = tokio::time::sleep(RESYNC) => {}
            }
        }
    }

    fn sync(&self) {
        self.kubelet(&self.pods());
        let Some(set) = self.server.get(&set_type(), Some(&self.namespace), &self.name) else {
            return;
        };
        self.control(&set, &self.pods());
        self.write_set_status(&set, &self.pods());
    }

    /// The pods of the set by ordinal: named `<set>-<i>`, with the set as controller.
    fn pods(&self) -> BTreeMap<usize, Value> {
        let prefix = format!("{}-", self.name);
        self.server
            .list(&pod_type(), Some(&self.namespace))
            .into_iter()
            .filter_map(|pod| {
                let ordinal = name_of(&pod).strip_prefix(&prefix)?.parse::<usize>().ok()?;
                let owned = pod["metadata"]["ownerReferences"].as_array()?.iter().any(|r| {
                    r["kind"] == "StatefulSet" && r["name"] == self.name.as_str() && r["controller"] == true
                });
                owned.then_some((ordinal, pod))
            })
            .collect()
    }

    // --- the kubelet ---

    /// Starts a run for each pod without one, stops the runs of pods being deleted (or gone),
    /// lets deleted pods go once their run ended, and writes the running pods' status.
    fn kubelet(&self, pods: &BTreeMap<usize, Value>) {
        let mut runs = self.lock_runs();
        if self.closed.load(Ordering::SeqCst) {
            return;
        }
        for (ordinal, run) in runs.iter() {
            match pods.get(ordinal) {
                Some(pod) if uid_of(pod) == run.uid && !is_deleting(pod) => {}
                _ => run.stop(),
            }
        }
        runs.retain(|ordinal, run| {
            if !run.task.is_finished() {
                return true;
            }
            if let Some(pod) = pods.get(ordinal).filter(|pod| uid_of(pod) == run.uid) {
                self.write_pod_status(pod, run);
                self.remove_finalizer(name_of(pod), uid_of(pod));
            }
            false
        });
        for (ordinal, pod) in pods {
            if runs.contains_key(ordinal) {
                continue; // its run, or an earlier pod's run still stopping
            }
            if is_deleting(pod) {
                self.remove_finalizer(name_of(pod), uid_of(pod));
                continue;
            }
            runs.insert(*ordinal, self.start_run(*ordinal, pod));
        }
        for (ordinal, run) in runs.iter() {
            if let Some(pod) = pods.get(ordinal).filter(|pod| uid_of(pod) == run.uid) {
                self.write_pod_status(pod, run);
            }
        }
    }

    fn start_run(&self, ordinal: usize, pod: &Value) -> Run {
        let launch = (ordinal < self.etcd.members()).then(|| Launch {
            binary: self.etcd.binary.clone(),
            args: self.etcd.args(&self.name, ordinal, &self.data_dir(ordinal)),
            log: self.log_path(ordinal),
            client_url: self.etcd.client_url(ordinal),
        });
        let grace = pod["spec"]["terminationGracePeriodSeconds"]
            .as_u64()
            .map(Duration::from_secs)
            .unwrap_or(DEFAULT_GRACE);
        let container = Arc::new(Container::new(ordinal, self.etcd.members()));
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(supervise(container.clone(), launch, grace, stopped, self.wake.clone()));
        Run {
            name: name_of(pod).to_owned(),
            uid: uid_of(pod).to_owned(),
            scheduled_at: now(),
            container_name: pod["spec"]["containers"][0]["name"].as_str().unwrap_or("etcd").to_owned(),
            image: pod["spec"]["containers"][0]["image"].as_str().unwrap_or_default().to_owned(),
            container,
            stop,
            task,
        }
    }

    fn write_pod_status(&self, pod: &Value, run: &Run) {
        let status = json!({ "status": run.pod_status() });
        // The pod may be gone meanwhile: nothing to write then.
        let _ = self.server.patch(
            &pod_type(),
            Some(&self.namespace),
            name_of(pod),
            PatchFormat::Merge,
            &status,
            true,
        );
    }

    /// Lets pod `name` go (if it is still the one with `uid`).
    fn remove_finalizer(&self, name: &str, uid: &str) {
        let Some(pod) =
            self.server.get(&pod_type(), Some(&self.namespace), name).filter(|pod| uid_of(pod) == uid)
        else {
            return;
        };
        let Some(finalizers) = pod["metadata"]["finalizers"].as_array() else {
            return;
        };
        let kept: Vec<&Value> = finalizers.iter().filter(|f| *f != FINALIZER).collect();
        if kept.len() == finalizers.len() {
            return;
        }
        let patch = json!({ "metadata": { "finalizers": kept, "resourceVersion": pod["metadata"]["resourceVersion"] } });
        // A conflict (the pod changed meanwhile) is tried again at the next sync.
        let _ =
            self.server.patch(&pod_type(), Some(&self.namespace), name, PatchFormat::Merge, &patch, false);
    }

    // --- the StatefulSet controller ---

    /// One pass of the StatefulSet controller's rules (see the module documentation).
    fn control(&self, set: &Value, pods: &BTreeMap<usize, Value>) {
        if is_deleting(set) {
            return;
        }
        let replicas = set["spec"]["replicas"].as_u64().unwrap_or(1) as usize;
        let monotonic = set["spec"]["podManagementPolicy"].as_str() != Some("Parallel");
        for ordinal in 0..replicas {
            match pods.get(&ordinal) {
                None => {
                    self.ensure_claims(set, ordinal);
                    self.create_pod(set, ordinal);
                    if monotonic {
                        return;
                    }
                }
                Some(pod) if monotonic && (is_deleting(pod) || !is_running_and_ready(pod)) => return,
                Some(_) => {}
            }
        }
        let first_unhealthy = pods.iter().find(|(_, pod)| !is_healthy(pod)).map(|(ordinal, _)| *ordinal);
        for (ordinal, pod) in pods.range(replicas..).rev() {
            if is_deleting(pod) {
                if monotonic {
                    return;
                }
                continue;
            }
            if monotonic && !is_running_and_ready(pod) && Some(*ordinal) != first_unhealthy {
                return;
            }
            let _ = self.server.delete(&pod_type(), Some(&self.namespace), name_of(pod));
            if monotonic {
                return;
            }
        }
    }

    fn ensure_claims(&self, set: &Value, ordinal: usize) {
        let Some(templates) = set["spec"]["volumeClaimTemplates"].as_array() else {
            return;
        };
        for template in templates {
            let name = format!("{}-{}-{ordinal}", name_of(template), self.name);
            if self.server.get(&claim_type(), Some(&self.namespace), &name).is_some() {
                continue;
            }
            let mut labels = template["metadata"]["labels"].as_object().cloned().unwrap_or_default();
            if let Some(selector) = set["spec"]["selector"]["matchLabels"].as_object() {
                labels.extend(selector.clone());
            }
            let claim = json!({
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": { "name": name, "namespace": self.namespace, "labels": labels },
                "spec": template["spec"],
            });
            if self.server.create(&claim_type(), Some(&self.namespace), claim).is_ok() {
                let status = json!({ "status": {
                    "phase": "Bound",
                    "accessModes": template["spec"]["accessModes"],
                    "capacity": template["spec"]["resources"]["requests"],
                }});
                let _ = self.server.patch(
                    &claim_type(),
                    Some(&self.namespace),
                    &name,
                    PatchFormat::Merge,
                    &status,
                    true,
                );
            }
        }
    }

    fn create_pod(&self, set: &Value, ordinal: usize) {
        let template = &set["spec"]["template"];
        let name = format!("{}-{ordinal}", self.name);
        let mut labels = template["metadata"]["labels"].as_object().cloned().unwrap_or_default();
        labels.insert("statefulset.kubernetes.io/pod-name".into(), name.clone().into());
        labels.insert("apps.kubernetes.io/pod-index".into(), ordinal.to_string().into());
        labels.insert("controller-revision-hash".into(), revision(set).into());
        let mut spec = template["spec"].clone();
        spec["hostname"] = name.clone().into();
        spec["subdomain"] = set["spec"]["serviceName"].clone();
        let mut volumes = spec["volumes"].as_array().cloned().unwrap_or_default();
        for claim in set["spec"]["volumeClaimTemplates"].as_array().into_iter().flatten() {
            let volume = name_of(claim);
            volumes.retain(|v| v["name"] != volume);
            volumes.push(json!({
                "name": volume,
                "persistentVolumeClaim": { "claimName": format!("{volume}-{}-{ordinal}", self.name) },
            }));
        }
        spec["volumes"] = volumes.into();
        let pod = json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": self.namespace,
                "labels": labels,
                "annotations": template["metadata"]["annotations"],
                "ownerReferences": [{
                    "apiVersion": "apps/v1", "kind": "StatefulSet", "name": self.name,
                    "uid": set["metadata"]["uid"], "controller": true, "blockOwnerDeletion": true,
                }],
                "finalizers": [FINALIZER],
            },
            "spec": spec,
        });
        // Already there: created by an earlier pass this one did not see yet.
        let _ = self.server.create(&pod_type(), Some(&self.namespace), pod);
    }

    fn write_set_status(&self, set: &Value, pods: &BTreeMap<usize, Value>) {
        let ready = pods.values().filter(|pod| is_running_and_ready(pod)).count();
        let current = pods.values().filter(|pod| !is_deleting(pod)).count();
        let revision = revision(set);
        let status = json!({ "status": {
            "observedGeneration": set["metadata"]["generation"],
            "replicas": pods.len(),
            "readyReplicas": ready,
            "currentReplicas": current,
            "updatedReplicas": current,
            "availableReplicas": ready,
            "currentRevision": revision,
            "updateRevision": revision,
            "collisionCount": 0,
        }});
        let _ = self.server.patch(
            &set_type(),
            Some(&self.namespace),
            &self.name,
            PatchFormat::Merge,
            &status,
            true,
        );
    }
}

/// `<set>-<hash of the pod template>`, as `controller-revision-hash` and the status name it.
fn revision(set: &Value) -> String {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    set["spec"]["template"].to_string().hash(&mut hasher);
    format!("{}-{:010x}", name_of(set), hasher.finish() & 0xff_ffff_ffff)
}

fn uid_of(object: &Value) -> &str {
    object["metadata"]["uid"].as_str().unwrap_or_default()
}

fn is_deleting(object: &Value) -> bool {
    object["metadata"]["deletionTimestamp"].is_string()
}

fn is_running_and_ready(pod: &Value) -> bool {
    let ready = pod["status"]["conditions"]
        .as_array()
        .is_some_and(|conditions| conditions.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"));
    pod["status"]["phase"] == "Running" && ready
}

fn is_healthy(pod: &Value) -> bool {
    is_running_and_ready(pod) && !is_deleting(pod)
}

/// How to start one pod's etcd.
struct Launch {
    binary: PathBuf,
    args: Vec<String>,
    log: PathBuf,
    client_url: String,
}

/// One pod object run by the kubelet, from its creation until its process is gone.
struct Run {
    name: String,
    uid: String,
    scheduled_at: String,
    container_name: String,
    image: String,
    container: Arc<Container>,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Run {
    fn stop(&self) {
        self.stop.send_replace(true);
    }

    fn state(&self, ordinal: usize) -> PodState {
        let state = self.container.state();
        PodState {
            ordinal,
            name: self.name.clone(),
            up: matches!(state.phase, Phase::Running { .. }),
            ready: state.ready,
            restarts: state.restarts,
            last_exit_code: match (&state.phase, &state.last) {
                (Phase::Terminated(exit), _) | (_, Some(exit)) => Some(exit.code),
                _ => None,
            },
            terminating: *self.stop.borrow(),
        }
    }

    /// The pod's status as the kubelet writes it.
    fn pod_status(&self) -> Value {
        let state = self.container.state();
        let ready = state.ready && matches!(state.phase, Phase::Running { .. });
        let phase = match &state.phase {
            _ if !state.ever_started => "Pending",
            Phase::Terminated(exit) if exit.code == 0 => "Succeeded",
            Phase::Terminated(_) => "Failed",
            _ => "Running",
        };
        let condition = |type_: &str, ok: bool, since: &str| {
            let mut c = json!({
                "type": type_, "status": if ok { "True" } else { "False" },
                "lastProbeTime": null, "lastTransitionTime": since,
            });
            if !ok {
                c["reason"] = "ContainersNotReady".into();
                c["message"] = format!("containers with unready status: [{}]", self.container_name).into();
            }
            c
        };
        let container_id = format!("containerd://{}-{}", self.uid, state.restarts);
        let container_state = match &state.phase {
            Phase::Waiting { reason, message } => {
                json!({ "waiting": { "reason": reason, "message": message } })
            }
            Phase::Running { started_at } => json!({ "running": { "startedAt": started_at } }),
            Phase::Terminated(exit) => json!({ "terminated": exit.to_json(&container_id) }),
        };
        let last_state = match &state.last {
            Some(exit) => {
                json!({ "terminated": exit.to_json(&format!("containerd://{}-{}", self.uid, exit.run)) })
            }
            None => json!({}),
        };
        json!({
            "phase": phase,
            "conditions": [
                condition("PodReadyToStartContainers", true, &self.scheduled_at),
                condition("Initialized", true, &self.scheduled_at),
                condition("Ready", ready, &state.ready_since),
                condition("ContainersReady", ready, &state.ready_since),
                condition("PodScheduled", true, &self.scheduled_at),
            ],
            "hostIP": "127.0.0.1", "hostIPs": [{ "ip": "127.0.0.1" }],
            "podIP": "127.0.0.1", "podIPs": [{ "ip": "127.0.0.1" }],
            "startTime": self.scheduled_at,
            "qosClass": "BestEffort",
            "containerStatuses": [{
                "name": self.container_name, "image": self.image, "imageID": "",
                "containerID": container_id,
                "ready": ready, "started": matches!(state.phase, Phase::Running { .. }),
                "restartCount": state.restarts,
                "state": container_state, "lastState": last_state,
            }],
        })
    }
}

/// One pod's container: its process and what the kubelet reports of it.
struct Container {
    process: Mutex<Process>,
    state: Mutex<ContainerState>,
}

#[derive(Default)]
struct Process {
    child: Option<Child>,
    /// The exit of a child reaped by someone else than the supervisor (a fault injected).
    reaped: Option<ExitStatus>,
    /// The stand-in was dropped: nothing starts any more.
    closed: bool,
}

impl Process {
    /// SIGKILL and reap, if running.
    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            self.reaped = child.wait().ok();
        }
    }
}

#[derive(Debug, Clone)]
struct ContainerState {
    phase: Phase,
    ready: bool,
    /// When `ready` last changed (the Ready condition's lastTransitionTime).
    ready_since: String,
    restarts: u32,
    /// The last exit, while running again or waiting (`lastState`).
    last: Option<Exit>,
    ever_started: bool,
}

#[derive(Debug, Clone)]
enum Phase {
    Waiting {
        reason: &'static str,
        message: String,
    },
    Running {
        started_at: String,
    },
    /// Stopped for good: the pod is being deleted.
    Terminated(Exit),
}

#[derive(Debug, Clone)]
struct Exit {
    code: i32,
    started_at: String,
    finished_at: String,
    /// Which start of the container it ended (its restart count then).
    run: u32,
}

impl Exit {
    fn to_json(&self, container_id: &str) -> Value {
        json!({
            "exitCode": self.code,
            "reason": if self.code == 0 { "Completed" } else { "Error" },
            "startedAt": self.started_at, "finishedAt": self.finished_at,
            "containerID": container_id,
        })
    }
}

/// The exit code Kubernetes reports: the process's, or 128 + the signal that ended it.
fn exit_code(status: ExitStatus) -> i32 {
    status.code().or_else(|| status.signal().map(|signal| 128 + signal)).unwrap_or(-1)
}

impl Container {
    fn new(ordinal: usize, members: usize) -> Container {
        let phase = if ordinal < members {
            Phase::Waiting { reason: "ContainerCreating", message: String::new() }
        } else {
            Phase::Waiting {
                reason: "CreateContainerConfigError",
                message: format!(
                    "the stand-in has ports for ordinals 0..{members} only (EtcdPods::new made for {members} members)"
                ),
            }
        };
        Container {
            process: Mutex::new(Process::default()),
            state: Mutex::new(ContainerState {
                phase,
                ready: false,
                ready_since: now(),
                restarts: 0,
                last: None,
                ever_started: false,
            }),
        }
    }

    fn lock_process(&self) -> MutexGuard<'_, Process> {
        self.process.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn lock_state(&self) -> MutexGuard<'_, ContainerState> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn state(&self) -> ContainerState {
        self.lock_state().clone()
    }

    /// Starts etcd; an error when it cannot be started or the stand-in is gone.
    fn start(&self, launch: &Launch) -> Result<(), String> {
        let mut process = self.lock_process();
        if process.closed {
            return Err("the stand-in was dropped".into());
        }
        process.child = Some(spawn_logged(&launch.binary, &launch.args, &launch.log)?);
        process.reaped = None;
        let mut state = self.lock_state();
        state.phase = Phase::Running { started_at: now() };
        state.ever_started = true;
        Ok(())
    }

    /// The process's exit, once it exited.
    fn poll_exit(&self) -> Option<ExitStatus> {
        let mut process = self.lock_process();
        if let Some(status) = process.reaped.take() {
            return Some(status);
        }
        let status = process.child.as_mut()?.try_wait().ok()??;
        process.child = None;
        Some(status)
    }

    /// Records the probe's answer; whether that changed readiness.
    fn set_ready(&self, ready: bool) -> bool {
        let mut state = self.lock_state();
        let ready = ready && matches!(state.phase, Phase::Running { .. });
        if state.ready == ready {
            return false;
        }
        state.ready = ready;
        state.ready_since = now();
        true
    }

    fn exit_of(state: &ContainerState, status: ExitStatus) -> Exit {
        let started_at = match &state.phase {
            Phase::Running { started_at } => started_at.clone(),
            _ => now(),
        };
        Exit { code: exit_code(status), started_at, finished_at: now(), run: state.restarts }
    }

    /// The process exited on its own: the container waits to be started again.
    fn exited(&self, status: ExitStatus, backoff: Duration) {
        let mut state = self.lock_state();
        let exit = Self::exit_of(&state, status);
        state.phase = Phase::Waiting {
            reason: "CrashLoopBackOff",
            message: format!("back-off {backoff:?} restarting failed container (exit code {})", exit.code),
        };
        state.last = Some(exit);
        if state.ready {
            state.ready = false;
            state.ready_since = now();
        }
    }

    /// Stopped for good (the pod is being deleted): its last exit, if it ran.
    fn terminated(&self, status: Option<ExitStatus>) {
        let mut state = self.lock_state();
        let exit = match status {
            Some(status) => Self::exit_of(&state, status),
            None => state.last.clone().unwrap_or(Exit {
                code: 0,
                started_at: now(),
                finished_at: now(),
                run: state.restarts,
            }),
        };
        state.phase = Phase::Terminated(exit);
        state.ready = false;
    }

    /// SIGTERM, then SIGKILL after `grace`; the exit, if a process ran.
    async fn terminate(&self, grace: Duration) -> Option<ExitStatus> {
        if let Some(child) = self.lock_process().child.as_ref() {
            send_signal(child, libc::SIGTERM);
        }
        let deadline = Instant::now() + grace;
        loop {
            {
                let mut process = self.lock_process();
                if let Some(status) = process.reaped.take() {
                    return Some(status);
                }
                let child = process.child.as_mut()?;
                if let Ok(Some(status)) = child.try_wait() {
                    process.child = None;
                    return Some(status);
                }
                if Instant::now() > deadline {
                    process.kill();
                    return process.reaped.take();
                }
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Kills the process, if any, and keeps any other from starting (the stand-in is dropped).
    fn kill_for_good(&self) {
        let mut process = self.lock_process();
        process.closed = true;
        process.kill();
    }
}

/// How one container's process ended, seen from its supervisor.
enum Ended {
    Exited(ExitStatus),
    Stopped,
}

/// The kubelet's work for one pod: start etcd, probe it, start it again after a back-off when it
/// exits, and stop it (SIGTERM, SIGKILL after `grace`) when the pod is deleted.
async fn supervise(
    container: Arc<Container>,
    launch: Option<Launch>,
    grace: Duration,
    mut stop: watch::Receiver<bool>,
    wake: Arc<Notify>,
) {
    let Some(launch) = launch else {
        // Cannot run: wait until the pod goes.
        let _ = stop.wait_for(|stop| *stop).await;
        container.terminated(None);
        wake.notify_one();
        return;
    };
    let mut backoff = BACKOFF_INITIAL;
    loop {
        let started = Instant::now();
        let ended = match container.start(&launch) {
            Ok(()) => {
                wake.notify_one();
                watch_process(&container, &launch, &mut stop, &wake).await
            }
            // Cannot start: an exit with code 128, as a container runtime reports it; the reason
            // goes to the pod's log.
            Err(why) => {
                let _ =
                    std::fs::OpenOptions::new().create(true).append(true).open(&launch.log).and_then(
                        |mut log| std::io::Write::write_all(&mut log, format!("{why}\n").as_bytes()),
                    );
                Ended::Exited(ExitStatus::from_raw(128 << 8))
            }
        };
        let status = match ended {
            Ended::Exited(status) => status,
            Ended::Stopped => {
                let status = container.terminate(grace).await;
                container.terminated(status);
                wake.notify_one();
                return;
            }
        };
        if started.elapsed() > BACKOFF_RESET {
            backoff = BACKOFF_INITIAL;
        }
        container.exited(status, backoff);
        wake.notify_one();
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = stop.wait_for(|stop| *stop) => {
                container.terminated(None);
                wake.notify_one();
                return;
            }
        }
        backoff = (backoff * 2).min(BACKOFF_CAP);
        container.lock_state().restarts += 1;
    }
}

/// Watches a running process until it exits or the pod is stopped, probing it meanwhile.
async fn watch_process(
    container: &Container,
    launch: &Launch,
    stop: &mut watch::Receiver<bool>,
    wake: &Notify,
) -> Ended {
    let mut next_probe = Instant::now();
    loop {
        if *stop.borrow() {
            return Ended::Stopped;
        }
        if let Some(status) = container.poll_exit() {
            return Ended::Exited(status);
        }
        if Instant::now() >= next_probe {
            let ready = answers(&launch.client_url).await;
            next_probe = Instant::now() + PROBE_PERIOD;
            // An exit during the probe is seen first.
            if container.poll_exit_pending() {
                continue;
            }
            if container.set_ready(ready) {
                wake.notify_one();
            }
            continue;
        }
        tokio::select! {
            _ = tokio::time::sleep(POLL) => {}
            _ = stop.wait_for(|stop| *stop) => {}
        }
    }
}

impl Container {
    /// Whether the process has exited (without reaping it: [`Container::poll_exit`] does).
    fn poll_exit_pending(&self) -> bool {
        let mut process = self.lock_process();
        if process.reaped.is_some() {
            return true;
        }
        match process.child.as_mut() {
            // try_wait reaps: keep what it found for poll_exit.
            Some(child) => match child.try_wait() {
                Ok(Some(status)) => {
                    process.child = None;
                    process.reaped = Some(status);
                    true
                }
                _ => false,
            },
            None => true,
        }
    }
}

/// Whether etcd answers a Status request at `url` (the readiness probe).
async fn answers(url: &str) -> bool {
    let options = ConnectOptions::new().with_connect_timeout(PROBE_TIMEOUT).with_timeout(PROBE_TIMEOUT);
    let probe = async {
        let mut client = Client::connect([url], Some(options)).await.ok()?;
        client.status().await.ok()
    };
    matches!(tokio::time::timeout(PROBE_TIMEOUT * 2, probe).await, Ok(Some(_)))
}
