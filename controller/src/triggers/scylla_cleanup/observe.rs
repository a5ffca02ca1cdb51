//! Reading a ScyllaCluster, its member Services, our cleanup Jobs and the agent token Secret into
//! a [`Snapshot`]. The API reads are thin; [`build_snapshot`] is pure. Objects that make no sense
//! become [`Finding`]s, never panics.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Secret, Service};
use kube::Api;
use kube::api::ListParams;
use serde_json::Value;

use groundskeeper_protocol::{OperationKind, keys};

use super::decide::{
    ClusterFacts, ConditionFacts, Finding, JobFacts, JobState, MemberFacts, SecretState, Snapshot,
};
use crate::api::scylla::ScyllaCluster;
use crate::execution::{self, JobObservation};
use crate::runtime::error::{Error, Result};

/// `groundskeeper.dev/operation` of cleanup Jobs.
pub const OPERATION: OperationKind = OperationKind::Cleanup;

/// Label selector of the member Services (one per node) of ScyllaCluster `cluster`.
pub fn member_selector(cluster: &str) -> String {
    format!(
        "{}={cluster},{}={}",
        keys::SCYLLA_CLUSTER_LABEL,
        keys::SCYLLA_SERVICE_TYPE_LABEL,
        keys::SCYLLA_SERVICE_TYPE_MEMBER
    )
}

/// Name of the Secret scylla-operator keeps the agent token of `cluster` in.
pub fn agent_token_secret_name(cluster: &str) -> String {
    format!("{cluster}-auth-token")
}

/// What `apply` needs besides the snapshot: the objects themselves.
#[derive(Debug, Clone)]
pub struct Observed {
    pub snapshot: Snapshot,
    pub services: Vec<Service>,
}

/// The member Services (one per Scylla node) of the ScyllaCluster `namespace/cluster`.
pub async fn list_member_services(
    client: &kube::Client,
    namespace: &str,
    cluster: &str,
) -> Result<Vec<Service>> {
    let selector = member_selector(cluster);
    let services: Api<Service> = Api::namespaced(client.clone(), namespace);
    Ok(services
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(Error::kube(format!(
            "list member Services in {namespace} with {selector}"
        )))?
        .items)
}

/// Reads everything the decision for `cluster` needs.
pub async fn observe(
    client: &kube::Client,
    cluster: &ScyllaCluster,
    now: jiff::Timestamp,
) -> Result<Observed> {
    let namespace = cluster.metadata.namespace.clone().unwrap_or_default();
    let name = cluster.metadata.name.clone().unwrap_or_default();
    let services = list_member_services(client, &namespace, &name).await?;
    let job_selector = execution::job_selector(OPERATION, &name);
    let job_list = execution::list_jobs(client, &namespace, &job_selector).await?;
    let pods = if job_list.is_empty() {
        Vec::new()
    } else {
        execution::list_pods(client, &namespace, &job_selector).await?
    };
    let observations: Vec<(Job, JobObservation)> = job_list
        .into_iter()
        .map(|job| {
            let observation = execution::observe(&job, &pods);
            (job, observation)
        })
        .collect();
    let agent_token = read_secret_state(client, &namespace, &name).await?;
    let snapshot = build_snapshot(cluster, &services, &observations, agent_token, now);
    Ok(Observed { snapshot, services })
}

/// Whether the agent token Secret exists and holds its key. The token itself is not kept.
pub async fn read_secret_state(client: &kube::Client, namespace: &str, cluster: &str) -> Result<SecretState> {
    let (name, secret) = get_agent_token_secret(client, namespace, cluster).await?;
    Ok(secret_state(&name, secret.as_ref()))
}

/// The cluster's agent token Secret (`<cluster>-auth-token`) with its name; `None` if absent.
pub async fn get_agent_token_secret(
    client: &kube::Client,
    namespace: &str,
    cluster: &str,
) -> Result<(String, Option<Secret>)> {
    let name = agent_token_secret_name(cluster);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let secret = secrets
        .get_opt(&name)
        .await
        .map_err(Error::kube(format!("get Secret {namespace}/{name}")))?;
    Ok((name, secret))
}

pub fn secret_state(name: &str, secret: Option<&Secret>) -> SecretState {
    let Some(secret) = secret else {
        return SecretState::Missing {
            name: name.to_owned(),
        };
    };
    let key = keys::SCYLLA_AGENT_TOKEN_SECRET_KEY;
    let has_key = secret.data.as_ref().is_some_and(|d| d.contains_key(key))
        || secret.string_data.as_ref().is_some_and(|d| d.contains_key(key));
    if has_key {
        SecretState::Present
    } else {
        SecretState::MissingKey {
            name: name.to_owned(),
            key: key.to_owned(),
        }
    }
}

/// The snapshot of one ScyllaCluster: pure.
pub fn build_snapshot(
    cluster: &ScyllaCluster,
    services: &[Service],
    jobs: &[(Job, JobObservation)],
    agent_token: SecretState,
    now: jiff::Timestamp,
) -> Snapshot {
    let facts = cluster_facts(cluster);
    let mut findings = Vec::new();
    let members = services
        .iter()
        // A member Service being deleted belongs to a node that is leaving.
        .filter(|s| s.metadata.deletion_timestamp.is_none())
        .map(member_facts)
        .collect();
    let jobs = jobs
        .iter()
        .filter_map(|(job, observation)| job_facts(&facts.namespace, job, observation, &mut findings))
        .collect();
    Snapshot {
        cluster: facts,
        members,
        jobs,
        agent_token,
        findings,
        now,
    }
}

fn cluster_facts(cluster: &ScyllaCluster) -> ClusterFacts {
    let status = cluster.status.clone().unwrap_or_default();
    ClusterFacts {
        namespace: cluster.metadata.namespace.clone().unwrap_or_default(),
        name: cluster.metadata.name.clone().unwrap_or_default(),
        generation: cluster.metadata.generation,
        observed_generation: status.observed_generation,
        conditions: status.conditions.iter().map(condition_facts).collect(),
        annotations: cluster.metadata.annotations.clone().unwrap_or_default(),
        single_datacenter: cluster.spec.external_seeds.is_empty(),
    }
}

fn condition_facts(value: &Value) -> ConditionFacts {
    let field = |key: &str| {
        value
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
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
        annotations: service.metadata.annotations.clone().unwrap_or_default(),
    }
}

fn job_facts(
    namespace: &str,
    job: &Job,
    observation: &JobObservation,
    findings: &mut Vec<Finding>,
) -> Option<JobFacts> {
    let Some(node) = observation.labels.get(keys::NODE_LABEL) else {
        findings.push(Finding {
            object: format!("Job {namespace}/{}", observation.name),
            message: format!(
                "has no label {}: cannot tell which node it cleans; delete it",
                keys::NODE_LABEL
            ),
        });
        return None;
    };
    // A Job being deleted still holds its node and its slot until it is gone, and is not acted
    // upon again.
    let state = if observation.deleting {
        JobState::Running
    } else {
        job_state(job, &observation.state)
    };
    Some(JobFacts {
        name: observation.name.clone(),
        node: node.clone(),
        ring_hash: observation
            .annotations
            .get(keys::CLEANUP_TOKEN_RING_HASH)
            .cloned(),
        state,
        failure_reported: observation.annotations.contains_key(keys::FAILURE_REPORTED),
    })
}

fn job_state(job: &Job, state: &execution::JobState) -> JobState {
    match state {
        execution::JobState::Running(_) => JobState::Running,
        // Exit code 0 is the runner's word: success (or nothing to do), result or not.
        execution::JobState::Succeeded(_) => JobState::Succeeded,
        execution::JobState::Failed(finished) => JobState::Failed {
            message: failure_message(finished),
            retryable: failure_retryable(finished),
            finished_at: finished_at(job),
        },
    }
}

/// What a person should read about a failed Job: the runner's own words first.
pub fn failure_message(finished: &execution::Finished) -> String {
    match &finished.result {
        Ok(result) => result
            .error
            .as_ref()
            .map(|e| e.message.clone())
            .or_else(|| result.message.clone())
            .unwrap_or_else(|| job_condition_text(finished)),
        Err(err) => format!("{} ({err})", job_condition_text(finished)),
    }
}

fn job_condition_text(finished: &execution::Finished) -> String {
    match (finished.reason.is_empty(), finished.message.is_empty()) {
        (true, true) => "the Job failed without saying why".to_owned(),
        (false, true) => finished.reason.clone(),
        (true, false) => finished.message.clone(),
        (false, false) => format!("{}: {}", finished.reason, finished.message),
    }
}

/// False when retrying cannot help: the runner said bad input, or the pod failure policy failed
/// the Job on the bad-input exit code.
pub fn failure_retryable(finished: &execution::Finished) -> bool {
    use groundskeeper_protocol::result::ErrorKind;
    let bad_input =
        matches!(&finished.result, Ok(r) if r.error.as_ref().is_some_and(|e| e.kind == ErrorKind::BadInput));
    !(bad_input || finished.reason == "PodFailurePolicy")
}

/// When the Job was decided failed: the transition time of its `FailureTarget` or `Failed` condition.
fn finished_at(job: &Job) -> Option<jiff::Timestamp> {
    let conditions = job.status.as_ref()?.conditions.as_ref()?;
    conditions
        .iter()
        .filter(|c| c.status == "True" && (c.type_ == "Failed" || c.type_ == "FailureTarget"))
        .filter_map(|c| c.last_transition_time.as_ref().map(|t| t.0))
        .min()
}

/// Member Services by name, for apply.
pub fn services_by_name(services: &[Service]) -> BTreeMap<String, &Service> {
    services
        .iter()
        .filter_map(|s| s.metadata.name.clone().map(|n| (n, s)))
        .collect()
}
