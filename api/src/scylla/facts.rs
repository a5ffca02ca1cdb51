//! What groundskeeper reads of a ScyllaCluster and its member Services, as plain facts: pure
//! functions of the objects, shared by the controller's decisions and the kubectl plugin's
//! screens, so that both say the same thing about a cluster.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Service;
use kube::ResourceExt;
use serde_json::Value;

use groundskeeper_protocol::keys;

use super::ScyllaCluster;
use super::coexistence::{self, JobPhase, OperatorCleanup, OperatorJob};

/// Condition types this trigger owns.
pub const PROGRESSING: &str = "CleanupControllerProgressing";

pub const DEGRADED: &str = "CleanupControllerDegraded";

/// scylla-operator's condition gating cleanup while StatefulSets roll.
pub const STATEFUL_SET_CONTROLLER_PROGRESSING: &str = "StatefulSetControllerProgressing";

#[derive(Debug, Clone, PartialEq, Default)]
pub struct ClusterFacts {
    pub namespace: String,
    pub name: String,
    pub generation: Option<i64>,
    pub observed_generation: Option<i64>,
    pub conditions: Vec<ConditionFacts>,
    pub annotations: BTreeMap<String, String>,
    /// `spec.externalSeeds` is empty: every node of the ring has a member Service here.
    pub single_datacenter: bool,
    /// The members its spec asks for, all racks together.
    pub spec_members: i64,
    /// The members its racks have now, as scylla-operator's status says (`status.racks.*.members`).
    pub status_members: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConditionFacts {
    pub type_: String,
    pub status: String,
    pub reason: String,
    pub message: String,
}

/// A member Service (one per Scylla node), with its annotations as found.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MemberFacts {
    pub service: String,
    pub uid: Option<String>,
    /// `scylla/datacenter` label.
    pub datacenter: Option<String>,
    /// `scylla/rack` label.
    pub rack: Option<String>,
    /// The address Scylla knows the node by (its broadcast address), when known.
    pub address: Option<String>,
    pub annotations: BTreeMap<String, String>,
}

/// SHA-512 in standard padded base64: 88 characters ending in `==`.
pub fn looks_like_ring_hash(value: &str) -> bool {
    value.len() == 88
        && value.ends_with("==")
        && value[..86].bytes().all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
}

pub fn shorten(value: &str) -> String {
    if value.chars().count() <= 100 {
        return value.to_owned();
    }
    let cut: String = value.chars().take(100).collect();
    format!("{cut}…")
}

/// Members ordered by datacenter, rack, then ordinal (numerically: `-10` after `-9`).
pub fn sorted_members(members: &[MemberFacts]) -> Vec<&MemberFacts> {
    let mut sorted: Vec<&MemberFacts> = members.iter().collect();
    sorted.sort_by_key(|m| (m.datacenter.clone(), m.rack.clone(), ordinal_key(&m.service)));
    sorted
}

fn ordinal_key(service: &str) -> (String, u64) {
    match service.rsplit_once('-') {
        Some((prefix, n)) if n.parse::<u64>().is_ok() => (prefix.to_owned(), n.parse().unwrap_or(0)),
        _ => (service.to_owned(), 0),
    }
}

/// Why the cluster's topology is changing, if it is: a scale asked for and not carried out yet
/// (a spec scylla-operator has not observed, whose member count is not the `members` member
/// Services there are), its StatefulSets rolling out (`StatefulSetControllerProgressing`:
/// members joining, leaving or restarting), or its racks' member count (its status) not the
/// spec's. A running cleanup yields to it: in ScyllaDB a
/// cleanup blocks a bootstrap or decommission of the node until it ends (scylladb #26605). A spec
/// edit that changes no member count (a repair schedule, say) is not one: cleanups that ran for
/// hours are not thrown away for it.
pub fn topology_change(cluster: &ClusterFacts, members: usize) -> Option<String> {
    let unobserved = cluster.generation.is_some() && cluster.observed_generation != cluster.generation;
    if unobserved && usize::try_from(cluster.spec_members).ok() != Some(members) {
        return Some(format!(
            "a scale was asked for (the spec asks for {} members, {members} member Services are there)",
            cluster.spec_members
        ));
    }
    let rolling = cluster
        .conditions
        .iter()
        .find(|c| c.type_ == STATEFUL_SET_CONTROLLER_PROGRESSING && c.status == "True")
        .map(|c| {
            format!("its StatefulSets are changing ({STATEFUL_SET_CONTROLLER_PROGRESSING}{})", explain(c))
        });
    // Members joining or leaving that only the rack status shows (the spec observed, the
    // StatefulSet condition not raised yet).
    rolling.or_else(|| {
        let now = cluster.status_members.filter(|n| !unobserved && *n != cluster.spec_members)?;
        Some(format!(
            "members are joining or leaving (its racks have {now} members, the spec asks for {})",
            cluster.spec_members
        ))
    })
}

/// The cluster preconditions (`docs/protocol.md`, "Scylla"), each failing one as "waiting for …".
pub fn precondition_failures(cluster: &ClusterFacts) -> Vec<String> {
    let mut waiting = Vec::new();
    match (cluster.generation, cluster.observed_generation) {
        (Some(g), Some(o)) if g == o => {}
        (g, o) => waiting.push(format!(
            "waiting for scylla-operator to observe generation {} (status.observedGeneration is {})",
            g.map_or("?".into(), |g| g.to_string()),
            o.map_or("unset".into(), |o| o.to_string())
        )),
    }
    let condition = |type_: &str| cluster.conditions.iter().find(|c| c.type_ == type_);
    if condition(STATEFUL_SET_CONTROLLER_PROGRESSING).is_some_and(|c| c.status == "True") {
        waiting.push(format!("waiting for {STATEFUL_SET_CONTROLLER_PROGRESSING} to clear"));
    }
    match condition("Available") {
        Some(c) if c.status == "True" => {}
        Some(c) => waiting.push(format!("waiting for Available=True (is {}{})", c.status, explain(c))),
        None => waiting.push("waiting for Available=True (condition not set yet)".into()),
    }
    match condition("Degraded") {
        Some(c) if c.status == "False" => {}
        // scylla-operator counts our own Degraded into its aggregate: do not let our own report
        // (a failed Job on one node, say) stop cleanup of all the others.
        Some(c) if c.status == "True" && degraded_only_by_us(cluster) => {}
        Some(c) => waiting.push(format!("waiting for Degraded=False (is {}{})", c.status, explain(c))),
        None => waiting.push("waiting for Degraded=False (condition not set yet)".into()),
    }
    waiting
}

fn degraded_only_by_us(cluster: &ClusterFacts) -> bool {
    let mut others = cluster
        .conditions
        .iter()
        .filter(|c| c.type_ != "Degraded" && c.type_.ends_with("Degraded") && c.status == "True");
    let ours = cluster.conditions.iter().any(|c| c.type_ == DEGRADED && c.status == "True");
    ours && others.all(|c| c.type_ == DEGRADED)
}

fn explain(c: &ConditionFacts) -> String {
    match (c.reason.is_empty(), c.message.is_empty()) {
        (true, true) => String::new(),
        (false, true) => format!(": {}", c.reason),
        (true, false) => format!(": {}", shorten(&c.message)),
        (false, false) => format!(": {}: {}", c.reason, shorten(&c.message)),
    }
}

/// Label selector of the member Services (one per node) of ScyllaCluster `cluster`.
pub fn member_selector(cluster: &str) -> String {
    format!(
        "{}={cluster},{}={}",
        keys::SCYLLA_CLUSTER_LABEL,
        keys::SCYLLA_SERVICE_TYPE_LABEL,
        keys::SCYLLA_SERVICE_TYPE_MEMBER
    )
}

/// Label selector of scylla-operator's cleanup Jobs of ScyllaCluster `cluster`.
pub fn operator_cleanup_selector(cluster: &str) -> String {
    format!(
        "{}={},{}={cluster}",
        coexistence::NODE_JOB_TYPE_LABEL,
        coexistence::NODE_JOB_TYPE_CLEANUP,
        keys::SCYLLA_CLUSTER_LABEL
    )
}

/// What groundskeeper knows of scylla-operator's cleanup of a cluster: its Job controller's
/// conditions in the cluster's status and in its ScyllaDBDatacenter's (`datacenter_conditions`,
/// where scylla-operator writes them first and older versions alone), its cleanup Jobs, and the
/// trigger's own memory of having seen either before: its `CleanupControllerProgressing` with
/// reason [`coexistence::SCYLLA_OPERATOR_CLEANS_UP`] in either status. That memory makes the
/// trigger stand back for good once it has seen scylla-operator's cleanup, even in a moment where
/// neither sign is there (a status rebuilt, every Job pruned).
pub fn operator_cleanup(
    cluster: &ClusterFacts,
    datacenter_conditions: &[ConditionFacts],
    jobs: &[Job],
) -> OperatorCleanup {
    let conditions = || cluster.conditions.iter().chain(datacenter_conditions);
    let remembered =
        conditions().any(|c| c.type_ == PROGRESSING && c.reason == coexistence::SCYLLA_OPERATOR_CLEANS_UP);
    OperatorCleanup::observed(
        conditions().map(|c| c.type_.as_str()),
        jobs.iter().filter_map(operator_job).collect(),
    )
    .or_remembered(remembered)
}

/// The conditions in a ScyllaDBDatacenter's status.
pub fn datacenter_conditions(datacenter: &crate::scylla::ScyllaDBDatacenter) -> Vec<ConditionFacts> {
    datacenter.status.iter().flat_map(|s| s.conditions.iter()).map(condition_facts).collect()
}

/// One of scylla-operator's cleanup Jobs as the coexistence rules read it; `None` for a Job being
/// deleted or one not named `cleanup-<node>`.
pub fn operator_job(job: &Job) -> Option<OperatorJob> {
    if job.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let name = job.metadata.name.clone()?;
    let labels = job.metadata.labels.clone().unwrap_or_default();
    let node = labels
        .get(coexistence::NODE_JOB_LABEL)
        .cloned()
        .or_else(|| coexistence::node_of_job(&name).map(str::to_owned))?;
    let status = job.status.clone().unwrap_or_default();
    let failed =
        status.conditions.unwrap_or_default().iter().any(|c| c.type_ == "Failed" && c.status == "True");
    let phase = if status.completion_time.is_some() {
        JobPhase::Completed
    } else if failed {
        JobPhase::Failed
    } else {
        JobPhase::Running
    };
    Some(OperatorJob {
        name,
        node,
        ring_hash: job.annotations().get(keys::CLEANUP_TOKEN_RING_HASH).cloned(),
        phase,
    })
}

/// The members that are not leaving: a member Service being deleted belongs to a node that is.
pub fn current_members(services: &[Service]) -> Vec<MemberFacts> {
    services.iter().filter(|s| s.metadata.deletion_timestamp.is_none()).map(member_facts).collect()
}

pub fn cluster_facts(cluster: &ScyllaCluster) -> ClusterFacts {
    let status = cluster.status.clone().unwrap_or_default();
    ClusterFacts {
        namespace: cluster.metadata.namespace.clone().unwrap_or_default(),
        name: cluster.metadata.name.clone().unwrap_or_default(),
        generation: cluster.metadata.generation,
        observed_generation: status.observed_generation,
        conditions: status.conditions.iter().map(condition_facts).collect(),
        annotations: cluster.metadata.annotations.clone().unwrap_or_default(),
        single_datacenter: cluster.spec.external_seeds.is_empty(),
        spec_members: cluster.spec.datacenter.racks.iter().map(|r| i64::from(r.members)).sum(),
        status_members: status
            .racks
            .as_ref()
            .and_then(Value::as_object)
            .filter(|racks| !racks.is_empty())
            // Every rack must say: one without `members` tells nothing of the whole.
            .and_then(|racks| {
                racks.values().map(|r| r.get("members").and_then(Value::as_i64)).sum::<Option<i64>>()
            }),
    }
}

fn condition_facts(value: &Value) -> ConditionFacts {
    let field = |key: &str| value.get(key).and_then(Value::as_str).unwrap_or_default().to_owned();
    ConditionFacts {
        type_: field("type"),
        status: field("status"),
        reason: field("reason"),
        message: field("message"),
    }
}

fn member_facts(service: &Service) -> MemberFacts {
    let labels = service.metadata.labels.clone().unwrap_or_default();
    MemberFacts {
        service: service.metadata.name.clone().unwrap_or_default(),
        uid: service.metadata.uid.clone(),
        datacenter: labels.get(keys::SCYLLA_DATACENTER_LABEL).cloned(),
        rack: labels.get(keys::SCYLLA_RACK_LABEL).cloned(),
        // scylla-operator's default broadcast address; the pod IP where the cluster says so.
        address: service
            .spec
            .as_ref()
            .and_then(|s| s.cluster_ip.clone())
            .filter(|ip| !ip.is_empty() && ip != "None"),
        annotations: service.metadata.annotations.clone().unwrap_or_default(),
    }
}
