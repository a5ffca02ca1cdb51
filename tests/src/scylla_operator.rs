//! scylla-operator, as far as groundskeeper sees it: the objects it writes for one ScyllaCluster
//! (the ScyllaCluster and its status, the ScyllaDBDatacenter, the member Services with the ring
//! hashes its sidecar reports, the agent token Secret) and what a scale-out changes in them.
//!
//! The objects are written as scylla-operator would have written them by the time a cluster is
//! settled. Where a scenario asks for it, [`ScyllaOperator::run_cleanup_controller`] also plays
//! scylla-operator's own cleanup controller (1.10+) beside groundskeeper. Scylla itself is played
//! by `scylla_agent`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use groundskeeper_protocol::keys;
use groundskeeper_protocol::ring_hash::ring_hash;
use k8s_openapi::ByteString;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Secret, Service};
use serde_json::{Value, json};

use crate::apiserver::{ApiError, ApiServer, PatchFormat, ResourceId};

/// Rack name → members, e.g. `[("a", 2), ("b", 1)]`.
pub type Racks = [(&'static str, i64)];

pub fn scylla_clusters() -> ResourceId {
    ResourceId::new("scylla.scylladb.com", "v1", "scyllaclusters")
}

pub fn scylla_datacenters() -> ResourceId {
    ResourceId::new("scylla.scylladb.com", "v1alpha1", "scylladbdatacenters")
}

pub fn services() -> ResourceId {
    ResourceId::of::<Service>()
}

/// Tokens of a ring of `nodes` nodes with two tokens each, in Scylla's (sorted) order.
pub fn ring(nodes: i64) -> Vec<String> {
    let count = nodes * 2;
    (0..count).map(|i| (i * 1_000_000 - count * 500_000).to_string()).collect()
}

/// The ring hash scylla-operator's sidecar writes for a ring of `nodes` nodes.
pub fn ring_hash_of(nodes: i64) -> String {
    ring_hash(&ring(nodes)).expect("the stand-in ring is valid")
}

/// How scylla-operator's cleanup controller seeds `last-cleaned-up-token-ring-hash`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seeding {
    /// v1.10 up to v1.21: a member Service with a current hash and no last-cleaned hash gets
    /// `last-cleaned = current` (a node that just joined is taken as clean).
    CurrentHash,
    /// Since scylla-operator PR #3574 (2026-08): every member Service gets `NeverCleanedUp`, so
    /// every node is cleaned once; a Service without the annotation is waited for.
    NeverCleanedUp,
}

/// One ScyllaCluster (one datacenter) as scylla-operator manages it.
#[derive(Debug, Clone)]
pub struct ScyllaOperator {
    pub namespace: String,
    pub cluster: String,
    pub datacenter: String,
    /// scylla-operator's own cleanup controller (1.10 and later) and how it seeds; `None`: a
    /// version before 1.10, without one. With one, the cluster's status carries its Job
    /// controller's conditions.
    pub cleanup: Option<Seeding>,
}

impl ScyllaOperator {
    /// The member Service (and pod) name: `<cluster>-<datacenter>-<rack>-<ordinal>`.
    pub fn member_name(&self, rack: &str, ordinal: i64) -> String {
        format!("{}-{}-{rack}-{ordinal}", self.cluster, self.datacenter)
    }

    pub fn member_names(&self, racks: &Racks) -> Vec<String> {
        racks
            .iter()
            .flat_map(|(rack, members)| (0..*members).map(move |o| self.member_name(rack, o)))
            .collect()
    }

    /// A settled cluster of `racks`: the ScyllaCluster and its status, optionally the
    /// ScyllaDBDatacenter (scylla-operator ≥ 1.11 keeps foreign conditions there), the member
    /// Services all clean for the current ring, and the agent token Secret.
    pub fn create(
        &self,
        server: &ApiServer,
        racks: &Racks,
        with_datacenter: bool,
        agent_token: &str,
    ) -> Result<(), ApiError> {
        server.create_as(&self.agent_token_secret(agent_token))?;
        let ns = Some(self.namespace.as_str());
        server.create(&scylla_clusters(), ns, self.cluster_object(racks))?;
        self.write_status(server, 1, racks)?;
        if with_datacenter {
            server.create(&scylla_datacenters(), ns, self.datacenter_object(racks))?;
            let status =
                json!({ "status": { "observedGeneration": 1, "conditions": self.settled_conditions(1) } });
            server.patch(&scylla_datacenters(), ns, &self.cluster, PatchFormat::Merge, &status, true)?;
        }
        let hash = ring_hash_of(members(racks));
        for (rack, count) in racks {
            for ordinal in 0..*count {
                server.create(&services(), ns, self.member_service(rack, ordinal, &hash, Some(&hash)))?;
            }
        }
        Ok(())
    }

    /// The new spec alone (its generation moves): a scale asked for, not yet carried out.
    pub fn take_spec(&self, server: &ApiServer, after: &Racks) -> Result<(), ApiError> {
        let spec = json!({ "spec": self.cluster_object(after)["spec"] });
        server.patch(
            &scylla_clusters(),
            Some(&self.namespace),
            &self.cluster,
            PatchFormat::Merge,
            &spec,
            false,
        )?;
        Ok(())
    }

    /// Member `name`'s sidecar reports the ring it sees.
    fn report_ring(&self, server: &ApiServer, name: &str, ring_hash: &str) -> Result<(), ApiError> {
        let sidecar = json!({ "metadata": { "annotations": { keys::CURRENT_TOKEN_RING_HASH: ring_hash } } });
        server.patch(&services(), Some(&self.namespace), name, PatchFormat::Merge, &sidecar, false)?;
        Ok(())
    }

    /// What scylla-operator does on a scale-out from `before` to `after`: the new spec
    /// (generation 2), new member Services as their pods are created (no last-cleaned hash yet,
    /// and no ring hash: their nodes have not joined), then, the nodes having joined in one ring
    /// change, every node's sidecar reporting the new ring, then the status catching up.
    pub fn scale_out(&self, server: &ApiServer, before: &Racks, after: &Racks) -> Result<(), ApiError> {
        let ns = Some(self.namespace.as_str());
        self.take_spec(server, after)?;
        let new_hash = ring_hash_of(members(after));
        let existing = |rack: &str| before.iter().find(|(r, _)| *r == rack).map_or(0, |(_, m)| *m);
        for (rack, count) in after {
            for ordinal in existing(rack)..*count {
                // Newer versions create the Service seeded with NeverCleanedUp.
                let seed = (self.cleanup == Some(Seeding::NeverCleanedUp)).then_some(keys::NEVER_CLEANED_UP);
                let mut service = self.member_service(rack, ordinal, &new_hash, seed);
                if let Some(annotations) = service["metadata"]["annotations"].as_object_mut() {
                    annotations.remove(keys::CURRENT_TOKEN_RING_HASH);
                }
                server.create(&services(), ns, service)?;
            }
        }
        for (rack, count) in after {
            for ordinal in 0..*count {
                self.report_ring(server, &self.member_name(rack, ordinal), &new_hash)?;
            }
        }
        self.write_status(server, 2, after)
    }

    /// What scylla-operator does on a scale-in from `before` to `after` (`generation` is the new
    /// spec's): the new spec, the highest ordinals of each rack decommissioned (their member
    /// Services deleted), the remaining nodes' sidecars reporting the smaller ring, then the status.
    pub fn scale_in(
        &self,
        server: &ApiServer,
        before: &Racks,
        after: &Racks,
        generation: i64,
    ) -> Result<(), ApiError> {
        let ns = Some(self.namespace.as_str());
        self.take_spec(server, after)?;
        let new_hash = ring_hash_of(members(after));
        for (rack, count) in before {
            let kept = after.iter().find(|(r, _)| r == rack).map_or(0, |(_, m)| *m);
            for ordinal in kept..*count {
                server.delete(&services(), ns, &self.member_name(rack, ordinal))?;
            }
            for ordinal in 0..kept {
                self.report_ring(server, &self.member_name(rack, ordinal), &new_hash)?;
            }
        }
        self.write_status(server, generation, after)
    }

    fn write_status(&self, server: &ApiServer, generation: i64, racks: &Racks) -> Result<(), ApiError> {
        let status = self.cluster_status(generation, racks);
        let ns = Some(self.namespace.as_str());
        server.patch(&scylla_clusters(), ns, &self.cluster, PatchFormat::Merge, &status, true)?;
        Ok(())
    }

    pub fn cluster_object(&self, racks: &Racks) -> Value {
        let racks: Vec<Value> = racks
            .iter()
            .map(|(name, members)| {
                json!({
                    "name": name,
                    "members": members,
                    "storage": { "capacity": "10Gi" },
                    "resources": { "requests": { "cpu": "1", "memory": "4Gi" } },
                    "placement": { "tolerations": [{ "key": "scylla", "operator": "Equal", "value": "true", "effect": "NoSchedule" }] }
                })
            })
            .collect();
        json!({
            "apiVersion": "scylla.scylladb.com/v1",
            "kind": "ScyllaCluster",
            "metadata": { "name": self.cluster, "namespace": self.namespace },
            "spec": {
                "version": "6.2.0",
                "agentVersion": "3.4.0",
                "datacenter": { "name": self.datacenter, "racks": racks }
            }
        })
    }

    /// `{"status": …}` of a settled ScyllaCluster at `generation`.
    pub fn cluster_status(&self, generation: i64, racks: &Racks) -> Value {
        let members = members(racks);
        let rack_status: serde_json::Map<String, Value> = racks
            .iter()
            .map(|(name, m)| {
                let status = json!({ "members": m, "readyMembers": m, "availableMembers": m, "updatedMembers": m, "version": "6.2.0" });
                (name.to_string(), status)
            })
            .collect();
        json!({ "status": {
            "observedGeneration": generation,
            "members": members, "readyMembers": members, "availableMembers": members,
            "rackCount": racks.len(),
            "racks": rack_status,
            "conditions": self.settled_conditions(generation),
        }})
    }

    /// [`settled_conditions`], with its Job controller's where it has the cleanup controller.
    pub fn settled_conditions(&self, generation: i64) -> Value {
        let mut conditions = settled_conditions(generation);
        if self.cleanup.is_some() {
            let list = conditions.as_array_mut().expect("a list");
            list.push(condition("JobControllerProgressing", "False", generation));
            list.push(condition("JobControllerDegraded", "False", generation));
        }
        conditions
    }

    pub fn datacenter_object(&self, racks: &Racks) -> Value {
        let racks: Vec<Value> = racks.iter().map(|(name, _)| json!({ "name": name })).collect();
        json!({
            "metadata": { "name": self.cluster, "namespace": self.namespace },
            "spec": {
                "clusterName": self.cluster,
                "scyllaDB": { "image": "docker.io/scylladb/scylla:6.2.0" },
                "scyllaDBManagerAgent": { "image": "docker.io/scylladb/scylla-manager-agent:3.4.0" },
                "datacenterName": self.datacenter,
                "racks": racks
            }
        })
    }

    /// A member Service with the ring hash the node's sidecar reports (`current`) and the one it
    /// was last cleaned for (`None`: a node that just joined).
    pub fn member_service(
        &self,
        rack: &str,
        ordinal: i64,
        current: &str,
        last_cleaned: Option<&str>,
    ) -> Value {
        let mut annotations = json!({ keys::CURRENT_TOKEN_RING_HASH: current });
        if let Some(last) = last_cleaned {
            annotations[keys::LAST_CLEANED_UP_TOKEN_RING_HASH] = last.into();
        }
        let name = self.member_name(rack, ordinal);
        json!({
            "metadata": {
                "name": name,
                "namespace": self.namespace,
                "labels": {
                    keys::SCYLLA_CLUSTER_LABEL: self.cluster,
                    keys::SCYLLA_DATACENTER_LABEL: self.datacenter,
                    keys::SCYLLA_RACK_LABEL: rack,
                    keys::SCYLLA_SERVICE_TYPE_LABEL: keys::SCYLLA_SERVICE_TYPE_MEMBER,
                    "app.kubernetes.io/managed-by": "scylla-operator",
                },
                "annotations": annotations,
            },
            "spec": {
                "type": "ClusterIP",
                "publishNotReadyAddresses": true,
                "ports": [{ "name": "agent-api", "port": keys::SCYLLA_AGENT_PORT, "protocol": "TCP" }],
                "selector": { "statefulset.kubernetes.io/pod-name": name }
            }
        })
    }

    /// `<cluster>-auth-token` with scylla-operator's `auth-token.yaml`.
    pub fn agent_token_secret(&self, token: &str) -> Secret {
        Secret {
            metadata: kube::api::ObjectMeta {
                name: Some(format!("{}-auth-token", self.cluster)),
                namespace: Some(self.namespace.clone()),
                ..Default::default()
            },
            data: Some(BTreeMap::from([(
                keys::SCYLLA_AGENT_TOKEN_SECRET_KEY.to_string(),
                ByteString(format!("auth_token: {token}\n").into_bytes()),
            )])),
            type_: Some("Opaque".into()),
            ..Default::default()
        }
    }
}

/// Label and annotation keys of scylla-operator's cleanup Jobs.
pub const NODE_JOB_TYPE_LABEL: &str = "scylla-operator.scylladb.com/node-job-type";
pub const NODE_JOB_LABEL: &str = "scylla-operator.scylladb.com/node-job";
pub const POD_TYPE_LABEL: &str = "scylla-operator.scylladb.com/pod-type";
/// Where its cleanup Job mounts the agent token file.
pub const CLEANUP_JOB_TOKEN_PATH: &str = "/etc/scylla-cleanup-job/auth-token.yaml";

/// What scylla-operator's cleanup controller stand-in did to Jobs, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CleanupControllerLog {
    /// Jobs it created: (name, ring hash).
    pub created: Vec<(String, String)>,
    /// Jobs it deleted (pruned).
    pub deleted: Vec<String>,
}

/// scylla-operator's cleanup controller, running until dropped.
pub struct CleanupController {
    log: Arc<Mutex<CleanupControllerLog>>,
    /// Syncs done so far.
    syncs: Arc<std::sync::atomic::AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for CleanupController {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl CleanupController {
    pub fn log(&self) -> CleanupControllerLog {
        self.log.lock().expect("log lock").clone()
    }

    /// How many times it has synced: a test waits for the next one to meet its clock at a
    /// chosen phase.
    pub fn syncs(&self) -> u64 {
        self.syncs.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl ScyllaOperator {
    /// Plays scylla-operator's cleanup controller (`MakeJobs`, `syncJobs` and the member Service
    /// annotations of its ScyllaDBDatacenter controller) for this cluster, every 20 ms:
    /// 1. seeds `last-cleaned-…` as [`Seeding`] says and records each completed Job's
    ///    `cleanup-token-ring-hash` as its node's `last-cleaned-…`;
    /// 2. while any member Service lacks either hash, does nothing more (it waits for them);
    /// 3. prunes (deletes) its Jobs for nodes that no longer need one, and its finished Jobs for
    ///    another ring than the one a node needs now (a new Job follows at the next sync);
    /// 4. when the cluster is settled (observed generation, StatefulSetControllerProgressing not
    ///    True, Available True, Degraded False), creates `cleanup-<service>` for every node whose
    ///    hashes differ, all at once.
    ///
    /// Its Jobs are selected by its labels only; it never looks at groundskeeper's.
    pub fn run_cleanup_controller(&self, server: Arc<ApiServer>) -> CleanupController {
        self.run_cleanup_controller_every(server, Duration::from_millis(20))
    }

    /// [`ScyllaOperator::run_cleanup_controller`] syncing every `period`, on its own clock.
    pub fn run_cleanup_controller_every(
        &self,
        server: Arc<ApiServer>,
        period: Duration,
    ) -> CleanupController {
        let seeding = self.cleanup.expect("a scylla-operator with a cleanup controller");
        let log = Arc::new(Mutex::new(CleanupControllerLog::default()));
        let syncs = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let operator = self.clone();
        let (written, counted) = (log.clone(), syncs.clone());
        let task = tokio::spawn(async move {
            let mut ticks = tokio::time::interval(period);
            loop {
                ticks.tick().await;
                operator.sync_cleanup(&server, seeding, &written);
                counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
        });
        CleanupController { log, syncs, task }
    }

    fn sync_cleanup(&self, server: &ApiServer, seeding: Seeding, log: &Mutex<CleanupControllerLog>) {
        let ns = Some(self.namespace.as_str());
        let members: Vec<Value> = server
            .list(&services(), ns)
            .into_iter()
            .filter(|s| {
                let labels = &s["metadata"]["labels"];
                labels[keys::SCYLLA_CLUSTER_LABEL] == self.cluster.as_str()
                    && labels[keys::SCYLLA_SERVICE_TYPE_LABEL] == keys::SCYLLA_SERVICE_TYPE_MEMBER
            })
            .collect();
        let jobs: BTreeMap<String, Value> = server
            .list(&ResourceId::of::<Job>(), ns)
            .into_iter()
            .filter(|j| {
                let labels = &j["metadata"]["labels"];
                labels[NODE_JOB_TYPE_LABEL] == "Cleanup"
                    && labels[keys::SCYLLA_CLUSTER_LABEL] == self.cluster.as_str()
            })
            .map(|j| (j["metadata"]["name"].as_str().unwrap_or_default().to_owned(), j))
            .collect();
        // 1. The member Services' annotations.
        let mut hashes: BTreeMap<String, (Option<String>, Option<String>)> = BTreeMap::new();
        for service in &members {
            let name = service["metadata"]["name"].as_str().unwrap_or_default().to_owned();
            let annotations = &service["metadata"]["annotations"];
            let current = annotations[keys::CURRENT_TOKEN_RING_HASH].as_str().map(str::to_owned);
            let mut last = annotations[keys::LAST_CLEANED_UP_TOKEN_RING_HASH].as_str().map(str::to_owned);
            if last.is_none() {
                last = match seeding {
                    Seeding::NeverCleanedUp => Some(keys::NEVER_CLEANED_UP.to_owned()),
                    Seeding::CurrentHash => current.clone(),
                };
            }
            if let Some(job) = jobs.get(&format!("cleanup-{name}"))
                && job["status"]["completionTime"].is_string()
                && let Some(hash) = job["metadata"]["annotations"][keys::CLEANUP_TOKEN_RING_HASH].as_str()
            {
                last = Some(hash.to_owned());
            }
            let found = annotations[keys::LAST_CLEANED_UP_TOKEN_RING_HASH].as_str();
            if let Some(last) = last.as_deref().filter(|l| Some(*l) != found) {
                let patch =
                    json!({ "metadata": { "annotations": { keys::LAST_CLEANED_UP_TOKEN_RING_HASH: last } } });
                let _ = server.patch(&services(), ns, &name, PatchFormat::Merge, &patch, false);
            }
            hashes.insert(name, (current, last));
        }
        // 2. Every node's state must be known.
        if hashes.values().any(|(current, last)| current.is_none() || last.is_none()) {
            return;
        }
        let required: BTreeMap<String, String> = hashes
            .iter()
            .filter_map(|(name, (current, last))| {
                let current = current.clone()?;
                (Some(&current) != last.as_ref()).then(|| (format!("cleanup-{name}"), current))
            })
            .collect();
        // 3. Prune: Jobs no longer required, and finished Jobs for another ring than the one
        //    required now (their hash is recorded above; the new Job follows at the next sync).
        let stale = |name: &String, job: &Value| {
            let hash = job["metadata"]["annotations"][keys::CLEANUP_TOKEN_RING_HASH].as_str();
            let finished = job["status"]["completionTime"].is_string()
                || job["status"]["conditions"]
                    .as_array()
                    .is_some_and(|c| c.iter().any(|c| c["type"] == "Failed" && c["status"] == "True"));
            match required.get(name) {
                None => true,
                Some(wanted) => finished && hash != Some(wanted.as_str()),
            }
        };
        for name in jobs.iter().filter(|(name, job)| stale(name, job)).map(|(name, _)| name) {
            if server.delete(&ResourceId::of::<Job>(), ns, name).is_ok() {
                log.lock().expect("log lock").deleted.push(name.clone());
            }
        }
        // 4. Create, once settled.
        if !self.settled(server) {
            return;
        }
        for (job, hash) in &required {
            if jobs.contains_key(job) {
                continue;
            }
            let node = job.trim_start_matches("cleanup-");
            if server.create(&ResourceId::of::<Job>(), ns, self.cleanup_job(node, hash)).is_ok() {
                log.lock().expect("log lock").created.push((job.clone(), hash.clone()));
            }
        }
    }

    /// scylla-operator's gate for cleanup Jobs, read from the ScyllaCluster's status.
    fn settled(&self, server: &ApiServer) -> bool {
        let Some(sc) = server.get(&scylla_clusters(), Some(&self.namespace), &self.cluster) else {
            return false;
        };
        let status = &sc["status"];
        let is = |type_: &str, value: &str| {
            status["conditions"]
                .as_array()
                .is_some_and(|c| c.iter().any(|c| c["type"] == type_ && c["status"] == value))
        };
        sc["metadata"]["generation"] == status["observedGeneration"]
            && !is("StatefulSetControllerProgressing", "True")
            && is("Available", "True")
            && is("Degraded", "False")
    }

    /// The cleanup Job scylla-operator makes for `node` (`MakeJobs`): its labels and annotation,
    /// the agent token mounted, `cleanup-job --node-address=…` (here the member Service's DNS
    /// name, where scylla-operator passes the node's broadcast address).
    pub fn cleanup_job(&self, node: &str, ring_hash: &str) -> Value {
        let labels = json!({
            keys::SCYLLA_CLUSTER_LABEL: self.cluster,
            NODE_JOB_LABEL: node,
            NODE_JOB_TYPE_LABEL: "Cleanup",
        });
        let mut pod_labels = labels.clone();
        pod_labels[POD_TYPE_LABEL] = "cleanup-job".into();
        let annotations = json!({ keys::CLEANUP_TOKEN_RING_HASH: ring_hash });
        json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {
                "name": format!("cleanup-{node}"), "namespace": self.namespace,
                "labels": labels, "annotations": annotations,
            },
            "spec": {
                "manualSelector": false,
                "template": {
                    "metadata": { "labels": pod_labels, "annotations": annotations },
                    "spec": {
                        "restartPolicy": "OnFailure",
                        "containers": [{
                            "name": "cleanup", "image": "scylladb/scylla-operator:latest",
                            "imagePullPolicy": "IfNotPresent",
                            "args": [
                                "cleanup-job",
                                format!("--manager-auth-config-path={CLEANUP_JOB_TOKEN_PATH}"),
                                format!("--node-address={node}.{}.svc", self.namespace),
                            ],
                            "volumeMounts": [{
                                "name": "scylla-manager-agent-token", "readOnly": true,
                                "mountPath": CLEANUP_JOB_TOKEN_PATH, "subPath": keys::SCYLLA_AGENT_TOKEN_SECRET_KEY,
                            }],
                        }],
                        "volumes": [{
                            "name": "scylla-manager-agent-token",
                            "secret": { "secretName": format!("{}-auth-token", self.cluster) },
                        }],
                    }
                }
            }
        })
    }
}

pub fn members(racks: &Racks) -> i64 {
    racks.iter().map(|(_, m)| m).sum()
}

fn condition(type_: &str, status: &str, generation: i64) -> Value {
    json!({
        "type": type_, "status": status, "reason": "AsExpected", "message": "",
        "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": generation
    })
}

/// Conditions scylla-operator reports for a settled cluster at `generation`.
pub fn settled_conditions(generation: i64) -> Value {
    json!([
        condition("Available", "True", generation),
        condition("Progressing", "False", generation),
        condition("Degraded", "False", generation),
        condition("StatefulSetControllerProgressing", "False", generation),
    ])
}
