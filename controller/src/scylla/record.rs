//! A node's finished cleanup written back to the ScyllaCluster: its member Service's
//! `last-cleaned-up-token-ring-hash` (and the members record beside it), its ownership record
//! (what it replicates now, for the keyspaces it cleaned), and Events on the cluster naming the
//! node.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Service;
use kube::api::{Patch, PatchParams};
use kube::{Api, Resource};
use serde_json::{Value, json};

use groundskeeper_protocol::JobResult;
use groundskeeper_protocol::keys;
use groundskeeper_protocol::result::{KeyspaceStatus, Report};

use crate::runtime::context::{Context, PlannedEvent, related};
use crate::runtime::error::{Error, Result};
use crate::scylla::decide::owned_by;
use crate::scylla::members_record::MembersRecord;
use crate::scylla::ownership::{OWNED_AT_LAST_CLEANUP, OwnershipRecord, RecordState, RingView};
use groundskeeper_api::scylla::ScyllaCluster;
use groundskeeper_api::scylla::facts::{MemberFacts, looks_like_ring_hash};

/// What to record on a node whose cleanup Job for ring `job_hash` succeeded: the hash and the
/// members record to write, or `None` when there is nothing to write — the Job knew no ring
/// (the node had no hash yet), the node already records that hash, or it records its current
/// hash (it is clean for the newest ring: never move it back to an older one).
pub fn cleaned_record(
    job_hash: Option<&str>,
    current: Option<&str>,
    last_cleaned: Option<&str>,
    settled: Option<&MembersRecord>,
) -> Option<(String, Option<MembersRecord>)> {
    let job_hash = job_hash.filter(|h| looks_like_ring_hash(h))?;
    if last_cleaned == Some(job_hash) || (last_cleaned.is_some() && last_cleaned == current) {
        return None;
    }
    let record = settled.filter(|r| r.ring_hash == job_hash).cloned();
    Some((job_hash.to_owned(), record))
}

/// The ownership record of a node whose cleanup of `cleaned` for ring `job_hash` succeeded, or
/// why none is written: pure. `last_cleaned`: the node's `last-cleaned-…` once this cleanup is
/// recorded (the hash written for it, else the one it carries), kept in the record so that the
/// trigger tells this write from a cleanup by someone else.
pub fn ownership_after_cleanup(
    views: &Result<Vec<RingView>, String>,
    member: &MemberFacts,
    job_hash: Option<&String>,
    current: Option<&String>,
    cleaned: &[String],
    last_cleaned: Option<&str>,
) -> std::result::Result<String, String> {
    if job_hash.is_none() || job_hash != current {
        return Err("the node's ring changed since its Job was created".into());
    }
    let now = owned_by(views, member)?;
    let previous =
        match RecordState::from_annotation(member.annotations.get(OWNED_AT_LAST_CLEANUP).map(String::as_str))
        {
            RecordState::Present(record) => Some(record),
            _ => None,
        };
    let cleaned: BTreeSet<String> = cleaned.iter().cloned().collect();
    // What the node replicates now stands for what it replicated when the cleanup was decided:
    // the ring is the same (same hash). A replication factor lowered while the Job ran, after it
    // cleaned that keyspace, is the one change this cannot see (the decision's view is not kept).
    OwnershipRecord::after_cleanup(previous.as_ref(), &now, &now, &cleaned, last_cleaned)
        .to_annotation()
        .map_err(|err| err.to_string())
}

/// The keyspaces a cleanup result says were cleaned.
pub fn keyspaces_cleaned(result: &JobResult) -> Vec<String> {
    match &result.report {
        Report::Cleanup(report) => report
            .keyspaces
            .iter()
            .filter(|k| k.status == KeyspaceStatus::Cleaned)
            .map(|k| k.name.clone())
            .collect(),
        _ => Vec::new(),
    }
}

/// The JSON merge patch recording `hash` as the node's last-cleaned ring, with its members
/// record (or removing a record that no longer describes that ring).
pub fn last_cleaned_patch(hash: &str, members: Option<&MembersRecord>) -> Value {
    json!({
        "metadata": {
            "annotations": {
                keys::LAST_CLEANED_UP_TOKEN_RING_HASH: hash,
                keys::CLEANED_FOR_MEMBERS: members.map(MembersRecord::to_annotation),
            }
        }
    })
}

/// Writes `hash` (and the members record) as member Service `service`'s last-cleaned ring.
pub(crate) async fn patch_service(
    client: &kube::Client,
    namespace: &str,
    service: &str,
    hash: &str,
    members: Option<&MembersRecord>,
) -> Result<()> {
    let api: Api<Service> = Api::namespaced(client.clone(), namespace);
    api.patch(service, &PatchParams::default(), &Patch::Merge(&last_cleaned_patch(hash, members)))
        .await
        .map_err(Error::kube(format!(
            "patch annotation {} of Service {namespace}/{service}",
            keys::LAST_CLEANED_UP_TOKEN_RING_HASH
        )))?;
    Ok(())
}

/// Records a node cleaned by `job` (when [`cleaned_record`] finds something to write) and tells
/// it in an Event on the cluster.
pub async fn node_cleaned(
    ctx: &Context,
    cluster: &ScyllaCluster,
    service: &str,
    job: &str,
    record: Option<(String, Option<MembersRecord>)>,
) -> Result<()> {
    let namespace = cluster.metadata.namespace.clone().unwrap_or_default();
    if let Some((hash, members)) = &record {
        patch_service(&ctx.client, &namespace, service, hash, members.as_ref()).await?;
    }
    let note = format!("node {service} cleaned up by Job {job}");
    let node = related("v1", "Service", &namespace, service);
    let event = PlannedEvent { warning: false, reason: "NodeCleanedUp", note, related: Some(node) };
    ctx.publish_events(&cluster.object_ref(&()), "Cleanup", &[event]).await;
    Ok(())
}

/// Adds a node's cleanup by Job `job` (its size, its duration) to the history on its member
/// Service, from which its next cleanup's duration is expected; once per Job. The history is an
/// estimate's input only: a write that fails is logged, and the pass goes on.
pub async fn cleanup_sample(
    ctx: &Context,
    namespace: &str,
    member: &groundskeeper_api::scylla::facts::MemberFacts,
    sample: groundskeeper_api::plan::WorkSample,
    job: &str,
) {
    let Some(value) = groundskeeper_api::plan::cleanup_history_with(&member.annotations, sample, job) else {
        return;
    };
    let patch = serde_json::json!({"metadata": {"annotations": {keys::CLEANUP_HISTORY: value}}});
    let api: Api<Service> = Api::namespaced(ctx.client.clone(), namespace);
    if let Err(err) = api.patch(&member.service, &PatchParams::default(), &Patch::Merge(&patch)).await {
        tracing::warn!(%namespace, service = %member.service, "the node's cleanup history was not recorded: {err}");
    }
}

/// Tells in an Event on the cluster that a node's cleanup was stopped for a topology change.
pub async fn node_interrupted(ctx: &Context, cluster: &ScyllaCluster, service: &str, job: &str, why: &str) {
    let namespace = cluster.metadata.namespace.clone().unwrap_or_default();
    let note = format!(
        "cleanup Job {job} of node {service} stopped: {why}; the node is cleaned again once the cluster settles, if still owed"
    );
    let node = related("v1", "Service", &namespace, service);
    let event = PlannedEvent { warning: false, reason: "CleanupInterrupted", note, related: Some(node) };
    ctx.publish_events(&cluster.object_ref(&()), "Cleanup", &[event]).await;
}

/// Tells in a Warning Event on the cluster that the cleanup of a node failed.
pub async fn node_failed(ctx: &Context, cluster: &ScyllaCluster, service: &str, job: &str, message: &str) {
    let namespace = cluster.metadata.namespace.clone().unwrap_or_default();
    let note = format!("cleanup Job {job} of node {service} failed: {message}");
    let failed = related("batch/v1", "Job", &namespace, job);
    let event = PlannedEvent { warning: true, reason: "CleanupFailed", note, related: Some(failed) };
    ctx.publish_events(&cluster.object_ref(&()), "Cleanup", &[event]).await;
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn h(n: u8) -> String {
        format!("{}==", char::from(b'A' + n).to_string().repeat(86))
    }

    /// (case, Job's ring, node's current ring, node's last-cleaned ring, what is recorded)
    type Case = (&'static str, Option<String>, Option<String>, Option<String>, Option<String>);

    #[test]
    fn what_a_success_records() {
        let settled = MembersRecord { ring_hash: h(1), members: BTreeSet::from(["u1".to_owned()]) };
        let never = Some(keys::NEVER_CLEANED_UP.to_owned());
        let cases: Vec<Case> = vec![
            ("records the Job's ring", Some(h(1)), Some(h(1)), Some(h(0)), Some(h(1))),
            ("already recorded", Some(h(1)), Some(h(1)), Some(h(1)), None),
            ("clean for a newer ring: not moved back", Some(h(1)), Some(h(2)), Some(h(2)), None),
            ("ring moved during the Job: the Job's ring", Some(h(1)), Some(h(2)), Some(h(0)), Some(h(1))),
            ("NeverCleanedUp is replaced", Some(h(1)), Some(h(1)), never, Some(h(1))),
            ("a Job without a ring records nothing", None, Some(h(1)), Some(h(0)), None),
            ("a malformed Job ring records nothing", Some("x".into()), Some(h(1)), Some(h(0)), None),
        ];
        for (name, job, current, last, expected) in cases {
            let got = cleaned_record(job.as_deref(), current.as_deref(), last.as_deref(), Some(&settled));
            assert_eq!(got.as_ref().map(|(hash, _)| hash), expected.as_ref(), "{name}");
            if let Some((hash, record)) = got {
                // The members record goes with the hash every member agreed on, and only then.
                assert_eq!(record.is_some(), hash == settled.ring_hash, "{name}");
            }
        }
    }

    /// A view where `ks` and `other` are replicated alike: node 10.0.0.1 holds (0, 100].
    fn views() -> Result<Vec<RingView>, String> {
        use crate::scylla::ownership::{NodeRanges, RangeSet};
        let nodes = BTreeMap::from([(
            "10.0.0.1".to_owned(),
            NodeRanges { datacenter: "dc1".into(), ranges: RangeSet::from_intervals(vec![(0, 100)]) },
        )]);
        Ok(vec![RingView {
            keyspaces: BTreeSet::from(["ks".to_owned(), "other".to_owned()]),
            nodes,
            ring: 0,
        }])
    }

    /// (case, the Job's ring, the node's current ring, the ring views read)
    type RecordCase<'a> = (&'a str, Option<&'a String>, Option<&'a String>, Result<Vec<RingView>, String>);

    #[test]
    fn the_ownership_record_after_a_cleanup() {
        use crate::scylla::ownership::RangeSet;
        let previous = OwnershipRecord {
            keyspaces: BTreeMap::from([
                ("ks".to_owned(), RangeSet::from_intervals(vec![(-50, 100)])),
                ("other".to_owned(), RangeSet::from_intervals(vec![(-50, 100)])),
            ]),
            last_cleaned: Some(h(0)),
        };
        let member = MemberFacts {
            service: "basic-dc1-a-0".into(),
            address: Some("10.0.0.1".into()),
            annotations: BTreeMap::from([(
                OWNED_AT_LAST_CLEANUP.to_owned(),
                previous.to_annotation().unwrap(),
            )]),
            ..MemberFacts::default()
        };
        let (h1, h2) = (h(1), h(2));
        let cleaned = ["ks".to_owned()];
        let written =
            ownership_after_cleanup(&views(), &member, Some(&h1), Some(&h1), &cleaned, Some(&h1)).unwrap();
        let record = OwnershipRecord::from_annotation(&written).unwrap();
        // It stands for the cleanup just recorded, so the trigger takes it for no one else's.
        assert_eq!(record.last_cleaned.as_deref(), Some(h1.as_str()));
        // The cleaned keyspace shrinks to what the node replicates; the other keeps what it held.
        assert_eq!(record.keyspaces["ks"], RangeSet::from_intervals(vec![(0, 100)]));
        assert_eq!(record.keyspaces["other"], RangeSet::from_intervals(vec![(-50, 100)]));
        let cases: Vec<RecordCase<'_>> = vec![
            ("the ring moved since the Job was made", Some(&h1), Some(&h2), views()),
            ("a Job without a ring", None, Some(&h1), views()),
            ("ownership unknown", Some(&h1), Some(&h1), Err("agent unreachable".into())),
        ];
        for (name, job, current, views) in cases {
            assert!(
                ownership_after_cleanup(&views, &member, job, current, &cleaned, current.map(|h| h.as_str()))
                    .is_err(),
                "{name}: the record is left as it was"
            );
        }
    }
}
