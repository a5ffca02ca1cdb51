//! The one path from a planned action to a Job of groundskeeper-job, and from its pod back to a
//! result. Knows no data store: what a Job does is a [`groundskeeper_protocol::Operation`].
//!
//! A controller plans a [`MaintenanceJob`] (pure), [`create_job`] turns it into a Job through
//! [`build_job`], [`observe_jobs`] reads Jobs and their pods back, and [`observe_job`] (pure)
//! says where each stands, with the runner's result.

pub mod client;
pub mod observe;
pub mod spec;

pub use client::{Created, create_job, delete_job, list_job_pods, list_jobs, list_pods, observe_jobs};
pub use groundskeeper_protocol::names::{bounded_name, name_hash};
pub use observe::{
    Attempts, Finished, JOB_NAME_LABEL, JobObservation, JobState, LEGACY_JOB_NAME_LABEL, ResultError,
    observe_job, read_result,
};
pub use spec::{
    CONTAINER_NAME, ClaimVolume, MaintenanceJob, Scheduling, ScratchVolume, SecretFile, SecretFolder,
    build_job, job_selector,
};
