//! Helpers shared by several scenarios.

pub mod etcd_jobs;
pub mod s3;
