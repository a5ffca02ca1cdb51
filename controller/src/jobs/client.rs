//! The thin API layer around Jobs: create, list, read back, delete. No decisions here.

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{DeleteParams, ListParams, PostParams};

use super::observe::{JOB_NAME_LABEL, JobObservation, observe};
use super::spec::{MaintenanceJob, build_job};
use crate::runtime::error::{Error, Result};

/// What [`create_job`] did.
#[derive(Clone, Debug, PartialEq)]
pub enum Created {
    /// The Job was created now.
    New(Job),
    /// A Job of that name existed already (an earlier reconciliation made it, or another replica
    /// raced us): this is it, as it is now.
    Existing(Job),
}

impl Created {
    pub fn job(&self) -> &Job {
        match self {
            Created::New(job) | Created::Existing(job) => job,
        }
    }

    pub fn is_new(&self) -> bool {
        matches!(self, Created::New(_))
    }
}

/// Creates the Job for a planned action. A Job of the same name that exists already is fetched
/// and returned as [`Created::Existing`]: Job names are per action, so it is the same action.
pub async fn create_job(client: &kube::Client, plan: &MaintenanceJob) -> Result<Created> {
    let api: Api<Job> = Api::namespaced(client.clone(), &plan.namespace);
    let what = format!("Job {}/{}", plan.namespace, plan.name);
    match api.create(&PostParams::default(), &build_job(plan)).await {
        Ok(job) => Ok(Created::New(job)),
        Err(kube::Error::Api(status)) if status.code == 409 => {
            let job = api.get(&plan.name).await.map_err(Error::kube(format!("get existing {what}")))?;
            Ok(Created::Existing(job))
        }
        Err(err) => Err(Error::kube(format!("create {what}"))(err)),
    }
}

/// Jobs in `namespace` matching a label selector (see [`super::job_selector`]).
pub async fn list_jobs(client: &kube::Client, namespace: &str, selector: &str) -> Result<Vec<Job>> {
    let api: Api<Job> = Api::namespaced(client.clone(), namespace);
    let list = api
        .list(&ListParams::default().labels(selector))
        .await
        .map_err(Error::kube(format!("list Jobs in {namespace} with {selector}")))?;
    Ok(list.items)
}

/// Pods in `namespace` matching a label selector.
pub async fn list_pods(client: &kube::Client, namespace: &str, selector: &str) -> Result<Vec<Pod>> {
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let list = api
        .list(&ListParams::default().labels(selector))
        .await
        .map_err(Error::kube(format!("list Pods in {namespace} with {selector}")))?;
    Ok(list.items)
}

/// The pods of one Job.
pub async fn list_job_pods(client: &kube::Client, namespace: &str, job_name: &str) -> Result<Vec<Pod>> {
    list_pods(client, namespace, &format!("{JOB_NAME_LABEL}={job_name}")).await
}

/// Every Job matching `selector`, observed with its pods. Two list calls in all: the pods carry
/// the Jobs' labels, so one pod list serves every Job.
pub async fn observe_jobs(
    client: &kube::Client,
    namespace: &str,
    selector: &str,
) -> Result<Vec<JobObservation>> {
    let jobs = list_jobs(client, namespace, selector).await?;
    if jobs.is_empty() {
        return Ok(Vec::new());
    }
    let pods = list_pods(client, namespace, selector).await?;
    Ok(jobs.iter().map(|job| observe(job, &pods)).collect())
}

/// Deletes a Job and, in the background, its pods. False when it was gone already.
pub async fn delete_job(client: &kube::Client, namespace: &str, name: &str) -> Result<bool> {
    let api: Api<Job> = Api::namespaced(client.clone(), namespace);
    match api.delete(name, &DeleteParams::background()).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(false),
        Err(err) => Err(Error::kube(format!("delete Job {namespace}/{name}"))(err)),
    }
}
