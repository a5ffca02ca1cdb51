//! The Job controller and the kubelet, played on the in-memory API: for each new Job, its pods
//! are created, run, and their status and the Job's written the way Kubernetes writes them.
//!
//! What a pod's container does is up to the caller ([`RunContainer`]): it gets the container's
//! arguments and the Secret files mounted into it (materialised as temp files holding the
//! Secret's data) and returns what the container left behind (exit code, termination message).
//! Scenarios plug the runner's library in there; this crate stays free of it.
//!
//! Modelled: one pod per attempt, `Pending → Running → Succeeded | Failed` with the container's
//! `terminated` state (exit code, termination message); `backoffLimit` (retries, then
//! `BackoffLimitExceeded`); `podFailurePolicy` `FailJob` rules on exit codes; the interim and
//! final Job conditions of Kubernetes ≥ 1.31 (`SuccessCriteriaMet` + `Complete`,
//! `FailureTarget` + `Failed`), written together. A pod whose Secret (or key) is missing stays
//! pending forever, as in Kubernetes (`ContainerCreating`). `persistentVolumeClaim` volumes: each
//! claim (namespace and name) is one local folder, created empty on first use and kept across
//! pods and Jobs for the simulator's lifetime ([`JobSimulator::claim_dir`]), mounted writable at
//! the volume mount's path ([`MountedFiles::resolve`]); a pod whose claim does not exist waits
//! until it is created, then runs, as a pod stays Pending (unschedulable) until its claim
//! appears.
//!
//! Not modelled: parallelism and completions other than 1, `activeDeadlineSeconds`, TTL after
//! finished, suspended Jobs, deletion of a running Job's pods, retry backoff delays; the pod
//! object of a pod that cannot start yet (missing Secret or claim) is not created until it can;
//! claims are always bound (no PersistentVolume, StorageClass, access modes, capacity or
//! `readOnly`), and two pods mounting one claim at once are not refused.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Secret};
use serde_json::{Value, json};

use crate::apiserver::{ApiServer, ChangeKind, PatchFormat, ResourceId};

/// One run of a Job's container, as the kubelet would start it.
pub struct Container {
    /// The Job the pod belongs to.
    pub job: Value,
    /// The pod's name.
    pub pod: String,
    /// The container's `args`.
    pub args: Vec<String>,
    /// The Secret files mounted into the container.
    pub files: MountedFiles,
    /// Becomes true when the Job is deleted: its pod is being deleted, and a real kubelet sends
    /// the container SIGTERM (a container that models signals waits on this).
    pub deleted: tokio::sync::watch::Receiver<bool>,
}

/// Secret files mounted into a container, each written to a temp file with the Secret's data, and
/// claims' folders. The Secret files are removed when this is dropped; the claims' folders stay.
pub struct MountedFiles {
    by_mount_path: BTreeMap<PathBuf, PathBuf>,
    _dir: tempfile::TempDir,
}

impl MountedFiles {
    /// The local file standing for `mount_path` inside the container, if something is mounted
    /// there.
    pub fn local(&self, mount_path: &Path) -> Option<&Path> {
        self.by_mount_path.get(mount_path).map(PathBuf::as_path)
    }

    /// [`MountedFiles::local`] for a path that must be mounted (panics naming it otherwise).
    pub fn required(&self, mount_path: &Path) -> PathBuf {
        self.local(mount_path)
            .unwrap_or_else(|| {
                panic!(
                    "nothing is mounted at {} (mounted: {:?})",
                    mount_path.display(),
                    self.by_mount_path.keys().collect::<Vec<_>>()
                )
            })
            .to_path_buf()
    }

    /// Paths inside the container that have a file.
    pub fn mount_paths(&self) -> impl Iterator<Item = &Path> {
        self.by_mount_path.keys().map(PathBuf::as_path)
    }

    /// The local path standing for `path` inside the container: under the deepest mount that
    /// holds it (e.g. a file in a claim's folder). `None` when no mount holds it.
    pub fn resolve(&self, path: &Path) -> Option<PathBuf> {
        self.by_mount_path
            .iter()
            .filter_map(|(mount, local)| Some((mount, local, path.strip_prefix(mount).ok()?)))
            .max_by_key(|(mount, _, _)| mount.components().count())
            .map(
                |(_, local, rest)| {
                    if rest.as_os_str().is_empty() { local.clone() } else { local.join(rest) }
                },
            )
    }
}

/// What a container left behind when it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Termination {
    pub exit_code: i32,
    /// The content of its termination message file.
    pub message: String,
}

impl Termination {
    /// A container killed with its pod (SIGKILL) before it wrote anything.
    pub fn killed() -> Termination {
        Termination { exit_code: 137, message: String::new() }
    }
}

impl Container {
    /// Waits until `gate` opens (a test holding Jobs back). `false` when the Job is deleted
    /// first: as in Kubernetes its pod goes with it, and the container is killed before it did
    /// anything, never run later beside other Jobs.
    pub async fn wait_for_gate(&self, gate: &mut tokio::sync::watch::Receiver<bool>) -> bool {
        let mut deleted = self.deleted.clone();
        tokio::select! {
            _ = gate.wait_for(|open| *open) => true,
            _ = deleted.wait_for(|gone| *gone) => false,
        }
    }
}

/// Runs a container to its end.
pub type RunContainer = Arc<dyn Fn(Container) -> BoxFuture<'static, Termination> + Send + Sync>;

/// Groups Jobs for [`JobLog::max_running_per_group`] (e.g. by rack).
pub type GroupOf = Arc<dyn Fn(&Value) -> String + Send + Sync>;

/// What the simulated Job controller saw and did.
#[derive(Default, Debug, Clone)]
pub struct JobLog {
    /// Jobs in creation order: (job name, group).
    pub created: Vec<(String, String)>,
    /// Unfinished Jobs: name → group.
    pub running: BTreeMap<String, String>,
    /// Highest number of unfinished Jobs of one group at any moment.
    pub max_running_per_group: usize,
    /// Highest number of unfinished Jobs at any moment, all groups together.
    pub max_running_total: usize,
    /// Finished Jobs in order: (job name, exit code of its last pod).
    pub finished: Vec<(String, i32)>,
}

impl JobLog {
    pub fn created_names(&self) -> BTreeSet<String> {
        self.created.iter().map(|(name, _)| name.clone()).collect()
    }
}

/// How [`JobSimulator`] behaves.
pub struct Builder {
    server: Arc<ApiServer>,
    run: RunContainer,
    group_of: GroupOf,
    start_delay: Duration,
}

/// How often a pod waiting for its claim looks again.
const CLAIM_POLL: Duration = Duration::from_millis(50);

impl Builder {
    /// How Jobs are grouped in [`JobLog`]; by default all are one group (`""`).
    pub fn group_by(mut self, group_of: impl Fn(&Value) -> String + Send + Sync + 'static) -> Self {
        self.group_of = Arc::new(group_of);
        self
    }

    /// How long scheduling and image pull take before a Job's first pod runs (150 ms by
    /// default): long enough for a controller to see the Job in flight before it ends.
    pub fn start_delay(mut self, delay: Duration) -> Self {
        self.start_delay = delay;
        self
    }

    /// Starts reacting to Jobs created from now on.
    pub fn spawn(self) -> JobSimulator {
        let log = Arc::new(Mutex::new(JobLog::default()));
        let claims = Arc::new(
            tempfile::Builder::new()
                .prefix("groundskeeper-claims-")
                .tempdir()
                .expect("a temp dir for claims"),
        );
        let sim = Arc::new(Simulation {
            server: self.server.clone(),
            run: self.run,
            group_of: self.group_of,
            start_delay: self.start_delay,
            log: log.clone(),
            claims: claims.clone(),
            deleted: Mutex::new(BTreeMap::new()),
        });
        let mut changes = self.server.subscribe();
        // The revision of the last change handled: a test reading the log right after a wait on
        // the API would otherwise see the log lag behind (changes reach the simulator through a
        // channel), see [`JobSimulator::log_synced`].
        let (seen_sender, seen) = tokio::sync::watch::channel(self.server.revision());
        let task = tokio::spawn(async move {
            // Dropping the set (when this task is aborted) aborts the Jobs still running.
            let mut running = tokio::task::JoinSet::new();
            loop {
                let change = match changes.next().await {
                    Ok(Some(change)) => change,
                    Ok(None) => return,
                    Err(lagged) => panic!("the Job simulator missed changes: {lagged}"),
                };
                while running.try_join_next().is_some() {}
                if change.resource == ResourceId::of::<Job>() && change.kind == ChangeKind::Deleted {
                    sim.job_deleted(&change.object);
                }
                if change.resource == ResourceId::of::<Job>() && change.kind == ChangeKind::Added {
                    let sim = sim.clone();
                    let job = change.object.clone();
                    sim.job_added(&job);
                    sim.record_start(&job);
                    running.spawn(async move { sim.run_job(job).await });
                }
                seen_sender.send_replace(change.revision);
            }
        });
        JobSimulator { server: self.server, log, seen, task, claims }
    }
}

/// A running Job controller + kubelet. Dropping it stops it, and the Jobs it was running, and
/// removes the claims' folders (once no [`ClaimFolders`] handle holds them any more).
pub struct JobSimulator {
    server: Arc<ApiServer>,
    log: Arc<Mutex<JobLog>>,
    seen: tokio::sync::watch::Receiver<u64>,
    task: tokio::task::JoinHandle<()>,
    claims: Arc<tempfile::TempDir>,
}

impl Drop for JobSimulator {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl JobSimulator {
    /// A simulator for `server` whose containers are run by `run`.
    pub fn builder<F, Fut>(server: Arc<ApiServer>, run: F) -> Builder
    where
        F: Fn(Container) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Termination> + Send + 'static,
    {
        Builder {
            server,
            run: Arc::new(move |container| Box::pin(run(container))),
            group_of: Arc::new(|_| String::new()),
            start_delay: Duration::from_millis(150),
        }
    }

    /// What happened so far, as far as the simulator has caught up with the API (it may lag
    /// behind the API by a few changes: see [`Self::log_synced`]).
    pub fn log(&self) -> JobLog {
        self.log.lock().expect("job log lock").clone()
    }

    /// What happened up to the API's current revision: waits until the simulator has handled
    /// every change committed so far, so that the log agrees with what a read of the API shows.
    /// Panics after 10 s (the simulator stopped).
    pub async fn log_synced(&self) -> JobLog {
        let revision = self.server.revision();
        let mut seen = self.seen.clone();
        tokio::time::timeout(Duration::from_secs(10), seen.wait_for(|seen| *seen >= revision))
            .await
            .unwrap_or_else(|_| panic!("the Job simulator never caught up with revision {revision}"))
            .unwrap_or_else(|_| panic!("the Job simulator stopped before revision {revision}"));
        self.log()
    }

    /// The local folder standing for the volume of PersistentVolumeClaim `namespace/claim`,
    /// created if no pod used it yet.
    pub fn claim_dir(&self, namespace: &str, claim: &str) -> PathBuf {
        claim_dir(self.claims.path(), namespace, claim)
    }

    /// The claims' folders, for another stand-in whose pods mount the same volumes (a
    /// StatefulSet's, see [`crate::statefulset`]).
    pub fn claim_folders(&self) -> ClaimFolders {
        ClaimFolders(self.claims.clone())
    }
}

/// The claims' folders of a [`JobSimulator`], shared: they stay while a handle holds them.
#[derive(Clone)]
pub struct ClaimFolders(Arc<tempfile::TempDir>);

impl ClaimFolders {
    /// [`JobSimulator::claim_dir`]: the folder of PersistentVolumeClaim `namespace/claim`.
    pub fn dir(&self, namespace: &str, claim: &str) -> PathBuf {
        claim_dir(self.0.path(), namespace, claim)
    }
}

fn claim_dir(root: &Path, namespace: &str, claim: &str) -> PathBuf {
    let dir = root.join(namespace).join(claim);
    std::fs::create_dir_all(&dir).expect("a claim's folder");
    dir
}

struct Simulation {
    server: Arc<ApiServer>,
    run: RunContainer,
    group_of: GroupOf,
    start_delay: Duration,
    log: Arc<Mutex<JobLog>>,
    claims: Arc<tempfile::TempDir>,
    /// Per Job (namespace/name): set when it is deleted.
    deleted: Mutex<BTreeMap<String, tokio::sync::watch::Sender<bool>>>,
}

fn pods() -> ResourceId {
    ResourceId::of::<Pod>()
}

fn jobs() -> ResourceId {
    ResourceId::of::<Job>()
}

impl Simulation {
    fn job_key(job: &Value) -> String {
        format!("{}/{}", namespace_of(job), name_of(job))
    }

    /// Whether `job` was deleted, as a watch its containers see.
    fn deletion_of(&self, job: &Value) -> tokio::sync::watch::Receiver<bool> {
        let mut deleted = self.deleted.lock().expect("deleted lock");
        deleted.entry(Self::job_key(job)).or_insert_with(|| tokio::sync::watch::channel(false).0).subscribe()
    }

    /// A new Job (perhaps under the name of one deleted before) is not deleted.
    fn job_added(&self, job: &Value) {
        let (sender, _) = tokio::sync::watch::channel(false);
        self.deleted.lock().expect("deleted lock").insert(Self::job_key(job), sender);
    }

    fn job_deleted(&self, job: &Value) {
        if let Some(sender) = self.deleted.lock().expect("deleted lock").get(&Self::job_key(job)) {
            sender.send_replace(true);
        }
    }

    fn record_start(&self, job: &Value) {
        let name = name_of(job).to_owned();
        let group = (self.group_of)(job);
        let mut log = self.log.lock().expect("job log lock");
        log.created.push((name.clone(), group.clone()));
        log.running.insert(name, group.clone());
        let in_group = log.running.values().filter(|g| **g == group).count();
        log.max_running_per_group = log.max_running_per_group.max(in_group);
        log.max_running_total = log.max_running_total.max(log.running.len());
    }

    fn record_end(&self, job: &str, exit_code: i32) {
        let mut log = self.log.lock().expect("job log lock");
        log.running.remove(job);
        log.finished.push((job.to_owned(), exit_code));
    }

    async fn run_job(&self, job: Value) {
        let name = name_of(&job).to_owned();
        let namespace = namespace_of(&job).to_owned();
        tokio::time::sleep(self.start_delay).await;
        let backoff_limit = job["spec"]["backoffLimit"].as_i64().unwrap_or(6);
        let mut failed = 0;
        loop {
            let Some((exit_code, pod)) = self.run_pod(&job).await else {
                // The pod could not start (e.g. its Secret is missing): it stays pending, as in Kubernetes.
                return;
            };
            if exit_code == 0 {
                self.finish_job(
                    &job,
                    json!({ "succeeded": 1, "failed": failed }),
                    "Complete",
                    "SuccessCriteriaMet",
                    "CompletionsReached",
                    "Reached expected number of succeeded pods",
                );
                self.record_end(&name, exit_code);
                return;
            }
            failed += 1;
            if let Some(index) = fail_job_rule(&job, exit_code) {
                let message = format!(
                    "Container {} for pod {namespace}/{pod} failed with exit code {exit_code} matching FailJob rule at index {index}",
                    container_of(&job)["name"].as_str().unwrap_or_default()
                );
                self.finish_job(
                    &job,
                    json!({ "failed": failed }),
                    "Failed",
                    "FailureTarget",
                    "PodFailurePolicy",
                    &message,
                );
                self.record_end(&name, exit_code);
                return;
            }
            if failed > backoff_limit {
                self.finish_job(
                    &job,
                    json!({ "failed": failed }),
                    "Failed",
                    "FailureTarget",
                    "BackoffLimitExceeded",
                    "Job has reached the specified backoff limit",
                );
                self.record_end(&name, exit_code);
                return;
            }
            self.patch_job_status(&job, json!({ "failed": failed, "active": 0 }));
        }
    }

    /// Runs one pod of `job` to its end; returns its exit code and name. `None`: the pod cannot
    /// start.
    async fn run_pod(&self, job: &Value) -> Option<(i32, String)> {
        let container = container_of(job);
        let args: Vec<String> = serde_json::from_value(container["args"].clone())
            .unwrap_or_else(|e| panic!("Job {}: container args are not strings: {e}", name_of(job)));
        self.wait_for_claims(job).await;
        let mut files = self.mount_secret_files(job)?;
        self.mount_claims(job, &mut files);
        let pod = self.create_pod(job);
        self.patch_job_status(job, json!({ "active": 1, "startTime": now() }));
        let deleted = self.deletion_of(job);
        let termination = (self.run)(Container {
            job: job.clone(),
            pod: pod.clone(),
            args,
            files,
            deleted: deleted.clone(),
        })
        .await;
        if *deleted.borrow() {
            // The Job is gone: its pod ended with it, and no other is started.
            self.record_end(name_of(job), termination.exit_code);
            return None;
        }
        let exit_code = termination.exit_code;
        let terminated = json!({
            "exitCode": exit_code,
            "reason": if exit_code == 0 { "Completed" } else { "Error" },
            "message": termination.message,
            "startedAt": now(), "finishedAt": now(),
            "containerID": format!("containerd://{pod}")
        });
        let status = json!({ "status": {
            "phase": if exit_code == 0 { "Succeeded" } else { "Failed" },
            "containerStatuses": [{
                "name": container["name"], "image": container["image"], "imageID": "",
                "ready": false, "restartCount": 0, "started": false,
                "state": { "terminated": terminated }
            }]
        }});
        self.server
            .patch(&pods(), Some(namespace_of(job)), &pod, PatchFormat::Merge, &status, true)
            .expect("pod status update");
        Some((exit_code, pod))
    }

    /// Every Secret file the container mounts, written to temp files; `None` when a Secret or
    /// one of its keys is missing (the kubelet cannot start the pod).
    fn mount_secret_files(&self, job: &Value) -> Option<MountedFiles> {
        let template = &job["spec"]["template"];
        let dir = tempfile::Builder::new()
            .prefix("groundskeeper-pod-")
            .tempdir()
            .expect("a temp dir for mounted files");
        let mut by_mount_path = BTreeMap::new();
        let no_mounts = Vec::new();
        let mounts = container_of(job)["volumeMounts"].as_array().unwrap_or(&no_mounts);
        for (i, mount) in mounts.iter().enumerate() {
            let Some(volume) = template["spec"]["volumes"]
                .as_array()
                .and_then(|volumes| volumes.iter().find(|v| v["name"] == mount["name"]))
            else {
                continue;
            };
            let Some(secret_name) = volume["secret"]["secretName"].as_str() else {
                continue; // emptyDir and the like: nothing to hand over
            };
            let secret: Secret = self.server.get_as(Some(namespace_of(job)), secret_name)?;
            let data = secret.data.unwrap_or_default();
            let mount_path = PathBuf::from(mount["mountPath"].as_str()?);
            // A subPath mount is one file of the volume; otherwise the volume is a directory with
            // a file per key (or per listed item).
            let files: Vec<(PathBuf, &str)> = match mount["subPath"].as_str() {
                Some(sub_path) => {
                    vec![(mount_path.clone(), volume_key(volume, sub_path)?)]
                }
                None => volume_files(volume, &data)
                    .into_iter()
                    .map(|(path, key)| (mount_path.join(path), key))
                    .collect(),
            };
            for (n, (path, key)) in files.into_iter().enumerate() {
                let content = &data.get(key)?.0;
                let local = dir.path().join(format!("{i}-{n}"));
                std::fs::write(&local, content).expect("write a mounted Secret file");
                by_mount_path.insert(path, local);
            }
        }
        Some(MountedFiles { by_mount_path, _dir: dir })
    }

    /// The claims the pod's volumes name, as (mount path, claim name).
    fn claim_mounts(job: &Value) -> Vec<(PathBuf, String)> {
        let template = &job["spec"]["template"];
        let no_mounts = Vec::new();
        let mounts = container_of(job)["volumeMounts"].as_array().unwrap_or(&no_mounts);
        mounts
            .iter()
            .filter_map(|mount| {
                let volume =
                    template["spec"]["volumes"].as_array()?.iter().find(|v| v["name"] == mount["name"])?;
                let claim = volume["persistentVolumeClaim"]["claimName"].as_str()?;
                Some((PathBuf::from(mount["mountPath"].as_str()?), claim.to_owned()))
            })
            .collect()
    }

    /// Returns once every claim the pod mounts exists (a pod is not scheduled before).
    async fn wait_for_claims(&self, job: &Value) {
        for (_, claim) in Self::claim_mounts(job) {
            while self.server.get_as::<PersistentVolumeClaim>(Some(namespace_of(job)), &claim).is_none() {
                tokio::time::sleep(CLAIM_POLL).await;
            }
        }
    }

    fn mount_claims(&self, job: &Value, files: &mut MountedFiles) {
        for (mount_path, claim) in Self::claim_mounts(job) {
            let dir = claim_dir(self.claims.path(), namespace_of(job), &claim);
            files.by_mount_path.insert(mount_path, dir);
        }
    }

    fn create_pod(&self, job: &Value) -> String {
        let template = &job["spec"]["template"];
        let job_name = name_of(job);
        let pod = json!({
            "metadata": {
                "generateName": format!("{job_name}-"),
                "labels": template["metadata"]["labels"],
                "annotations": template["metadata"]["annotations"],
                "ownerReferences": [{
                    "apiVersion": "batch/v1", "kind": "Job", "name": job_name,
                    "uid": job["metadata"]["uid"], "controller": true, "blockOwnerDeletion": true
                }]
            },
            "spec": template["spec"],
        });
        let namespace = namespace_of(job);
        let pod = self.server.create(&pods(), Some(namespace), pod).expect("pod creation");
        let name = name_of(&pod).to_owned();
        self.server
            .patch(
                &pods(),
                Some(namespace),
                &name,
                PatchFormat::Merge,
                &json!({ "status": { "phase": "Running", "startTime": now() } }),
                true,
            )
            .expect("pod status update");
        name
    }

    fn patch_job_status(&self, job: &Value, status: Value) {
        // The Job may be gone (deleted by its owner's garbage collection): nothing to write then.
        let _ = self.server.patch(
            &jobs(),
            Some(namespace_of(job)),
            name_of(job),
            PatchFormat::Merge,
            &json!({ "status": status }),
            true,
        );
    }

    /// Since Kubernetes 1.31 the Job controller writes the interim condition (`SuccessCriteriaMet`
    /// / `FailureTarget`) and, once no pod runs, the final one; both are written here at once.
    fn finish_job(
        &self,
        job: &Value,
        counts: Value,
        final_type: &str,
        interim_type: &str,
        reason: &str,
        message: &str,
    ) {
        let condition = |type_: &str| json!({ "type": type_, "status": "True", "reason": reason, "message": message, "lastProbeTime": now(), "lastTransitionTime": now() });
        let mut status = json!({
            "active": 0, "ready": 0, "terminating": 0,
            "conditions": [condition(interim_type), condition(final_type)],
        });
        if let Some(counts) = counts.as_object() {
            for (k, v) in counts {
                status[k] = v.clone();
            }
        }
        if final_type == "Complete" {
            status["completionTime"] = now().into();
        }
        self.patch_job_status(job, status);
    }
}

/// The key a file of a Secret volume at `path` holds: the listed item's key, or `path` itself.
fn volume_key<'a>(volume: &'a Value, path: &'a str) -> Option<&'a str> {
    match volume["secret"]["items"].as_array() {
        Some(items) => items.iter().find(|item| item["path"] == path).and_then(|item| item["key"].as_str()),
        None => Some(path),
    }
}

/// The files of a Secret volume: (path in the volume, key).
fn volume_files<'a>(
    volume: &'a Value,
    data: &'a BTreeMap<String, k8s_openapi::ByteString>,
) -> Vec<(&'a str, &'a str)> {
    match volume["secret"]["items"].as_array() {
        Some(items) => {
            items.iter().filter_map(|item| Some((item["path"].as_str()?, item["key"].as_str()?))).collect()
        }
        None => data.keys().map(|k| (k.as_str(), k.as_str())).collect(),
    }
}

fn container_of(job: &Value) -> &Value {
    &job["spec"]["template"]["spec"]["containers"][0]
}

pub(crate) fn name_of(object: &Value) -> &str {
    object["metadata"]["name"].as_str().unwrap_or_default()
}

pub(crate) fn namespace_of(object: &Value) -> &str {
    object["metadata"]["namespace"].as_str().unwrap_or_default()
}

/// Index of the podFailurePolicy rule failing the Job at once on this exit code, if any.
fn fail_job_rule(job: &Value, exit_code: i32) -> Option<usize> {
    let rules = job["spec"]["podFailurePolicy"]["rules"].as_array()?;
    rules.iter().position(|rule| {
        let codes = &rule["onExitCodes"];
        let listed = codes["values"]
            .as_array()
            .is_some_and(|v| v.iter().any(|c| c.as_i64() == Some(exit_code.into())));
        rule["action"] == "FailJob"
            && ((codes["operator"] == "In" && listed) || (codes["operator"] == "NotIn" && !listed))
    })
}

/// Now, to the second, as the API server writes times.
pub(crate) fn now() -> String {
    jiff::Timestamp::from_second(jiff::Timestamp::now().as_second()).expect("now is a valid time").to_string()
}
