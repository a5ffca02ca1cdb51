//! What a pass of a Restore reads: the StatefulSet and its pods, the members' data claims, the
//! members once they are back, and what each step's Job left.

use groundskeeper_api::EtcdCluster;
use groundskeeper_api::restore::{RestorePhase, RestoreStatus};

use super::super::model::Observed;
use super::super::observe::{cluster_revision, observe_members};
use super::super::policy::Policy;
use super::model::{ReadyPods, RestoreFacts, StepJob};
use crate::jobs::JobState;

/// What a Job's state says for [`super::decide::decide`].
pub(crate) fn step_job(state: &JobState, failure: impl FnOnce() -> String) -> StepJob {
    match state {
        JobState::Running(_) => StepJob::Running,
        JobState::Succeeded(finished) => {
            StepJob::Succeeded(finished.result.as_ref().ok().map(|r| Box::new(r.report.clone())))
        }
        JobState::Failed(_) => StepJob::Failed(failure()),
    }
}

/// The StatefulSet's Ready pods of its replicas, as its status reports them.
pub(crate) fn ready_pods(
    stateful_set: Option<&k8s_openapi::api::apps::v1::StatefulSet>,
) -> Option<ReadyPods> {
    let set = stateful_set?;
    let replicas = set.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    let ready = set.status.as_ref().and_then(|s| s.ready_replicas).unwrap_or(0);
    Some(ReadyPods { ready, replicas })
}

/// The members' data claims that do not exist.
pub(crate) async fn missing_claims(
    ctx: &crate::runtime::context::Context,
    namespace: &str,
    status: &RestoreStatus,
) -> crate::runtime::error::Result<Vec<String>> {
    let api = kube::Api::<k8s_openapi::api::core::v1::PersistentVolumeClaim>::namespaced(
        ctx.client.clone(),
        namespace,
    );
    let mut missing = Vec::new();
    for member in &status.members {
        let found = api.get_opt(&member.claim).await.map_err(crate::runtime::error::Error::kube(format!(
            "get PersistentVolumeClaim {namespace}/{}",
            member.claim
        )))?;
        if found.is_none() {
            missing.push(member.claim.clone());
        }
    }
    Ok(missing)
}

pub(crate) async fn read_stateful_set(
    ctx: &crate::runtime::context::Context,
    namespace: &str,
    name: &str,
) -> crate::runtime::error::Result<Option<k8s_openapi::api::apps::v1::StatefulSet>> {
    kube::Api::<k8s_openapi::api::apps::v1::StatefulSet>::namespaced(ctx.client.clone(), namespace)
        .get_opt(name)
        .await
        .map_err(crate::runtime::error::Error::kube(format!("get StatefulSet {namespace}/{name}")))
}

/// The data claims' template: the spec's, else the StatefulSet's only one.
pub(crate) fn claim_template(
    spec: &groundskeeper_api::etcd_cluster::EtcdStatefulSet,
    stateful_set: Option<&k8s_openapi::api::apps::v1::StatefulSet>,
) -> Result<String, String> {
    if let Some(template) = &spec.data_volume_claim_template {
        return Ok(template.clone());
    }
    let templates: Vec<String> = stateful_set
        .and_then(|s| s.spec.as_ref())
        .and_then(|s| s.volume_claim_templates.as_ref())
        .map(|t| t.iter().filter_map(|c| c.metadata.name.clone()).collect())
        .unwrap_or_default();
    match templates.as_slice() {
        [only] => Ok(only.clone()),
        [] => Err(format!(
            "StatefulSet {} has no volumeClaimTemplates (or is gone): its members' data claims cannot be \
             named; set spec.statefulSet.dataVolumeClaimTemplate",
            spec.name
        )),
        many => Err(format!(
            "StatefulSet {} has several volumeClaimTemplates ({}): name the members' data one in \
             spec.statefulSet.dataVolumeClaimTemplate",
            spec.name,
            many.join(", ")
        )),
    }
}

pub(crate) async fn read_facts(
    ctx: &crate::runtime::context::Context,
    namespace: &str,
    cluster: &EtcdCluster,
    stateful_set: Option<&k8s_openapi::api::apps::v1::StatefulSet>,
    phase: RestorePhase,
) -> crate::runtime::error::Result<RestoreFacts> {
    let mut facts = RestoreFacts {
        replicas: stateful_set.map(|s| s.spec.as_ref().and_then(|spec| spec.replicas).unwrap_or(1)),
        ..RestoreFacts::default()
    };
    if let Some(stateful_set) = stateful_set {
        facts.pods = count_pods(ctx, namespace, stateful_set).await?;
    }
    if phase == RestorePhase::WaitingForMembers {
        let policy = match Policy::from_spec(&cluster.spec) {
            Ok(policy) => policy,
            Err(errors) => {
                facts.members_unreachable = Some(format!("the EtcdCluster's spec is invalid: {errors}"));
                return Ok(facts);
            }
        };
        match observe_members(&ctx.client, namespace, &policy).await {
            Observed::Members(members) => {
                facts.healthy_members = members
                    .iter()
                    .filter(|m| m.member.id != 0 && m.member.unhealthy_because().is_none())
                    .count();
                facts.revision = cluster_revision(&members);
            }
            Observed::Failed(why) => facts.members_unreachable = Some(why),
            Observed::NotAttempted => {}
        }
    }
    Ok(facts)
}

/// The StatefulSet's pods that still exist (by its selector).
async fn count_pods(
    ctx: &crate::runtime::context::Context,
    namespace: &str,
    stateful_set: &k8s_openapi::api::apps::v1::StatefulSet,
) -> crate::runtime::error::Result<usize> {
    let labels = stateful_set.spec.as_ref().and_then(|s| s.selector.match_labels.clone()).unwrap_or_default();
    let selector = labels.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",");
    let pods = kube::Api::<k8s_openapi::api::core::v1::Pod>::namespaced(ctx.client.clone(), namespace)
        .list(&kube::api::ListParams::default().labels(&selector))
        .await
        .map_err(crate::runtime::error::Error::kube(format!("list pods in {namespace} with {selector}")))?;
    Ok(pods.items.len())
}
