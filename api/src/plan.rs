//! A task's plan before it runs: which nodes or members, in which order, what each does, what is
//! skipped and why, and how long each is expected to take. The same pure functions serve the
//! controller (the plan in a task's status, the approval gate, the window fit of a cleanup) and
//! the kubectl plugin's dry run (`task plan`), so what a person reviews is what runs.
//!
//! Expected durations come from the node's or member's own earlier runs, per byte
//! ([`estimate`]): the median seconds per byte of its last runs times its size now. Without
//! history the defaults below apply, and the plan says so.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::EtcdCluster;
use crate::etcd_cluster::EtcdMemberStatus;
use crate::maintenance_window::WindowState;
use crate::scylla::facts::{ClusterFacts, MemberFacts, sorted_members};
use crate::snapshot_store::Store;
use crate::validate::{Cleanup, Compact, Restore, Snapshot, Verify, Work};
use groundskeeper_protocol::keys;
use groundskeeper_stores::etcd::leader_turn::{
    DEFAULT_IN_PLACE_BUDGET, LeaderTurnDecision, LeaderTurnFacts, MeasuredDefrag, RateFrom, TurnChoice,
    decide_leader_turn,
};
use groundskeeper_stores::etcd::plan::{
    CompactTarget, DefragPolicy, MemberAction, MemberObservation, MemberStatus, PlanOptions, plan_defrag,
};

/// A Scylla node cleanup without history is expected to take this long (30 minutes): cleanup
/// rewrites every SSTable of the keyspaces it cleans, and a node's load is not known before its
/// first cleanup reports it.
pub const DEFAULT_CLEANUP_SECONDS: i64 = 1800;
/// An etcd member without defragmentation history is expected to defragment at this rate (the
/// runner's own default, which it applies to the window too).
pub use groundskeeper_stores::etcd::plan::DEFAULT_DEFRAG_BYTES_PER_SECOND;
/// A snapshot streams the db at about this rate (same reasoning, no history kept).
pub const DEFAULT_SNAPSHOT_BYTES_PER_SECOND: f64 = 50.0 * 1024.0 * 1024.0;
/// Runs kept per node or member for the estimate.
pub const MAX_SAMPLES: usize = 5;

/// The plan of a task, as written to `status.plan` and shown by `task plan`.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskPlan {
    /// Names this plan's steps (not its estimates): approving a task means setting its
    /// `groundskeeper.dev/approved-plan` annotation to this id. Twelve hex digits.
    pub id: String,
    /// The plan in one line.
    pub summary: String,
    /// In the order they run (nodes of different racks may run at the same time, within the
    /// task's bounds).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<PlanStep>,
    /// The steps' expected seconds added up (an upper bound when nodes run side by side).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_seconds: Option<i64>,
}

/// One step of a plan: one node, one member, or the whole cluster.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlanStep {
    /// Member Service (Scylla), member (etcd), or `cluster` for cluster-wide work.
    pub name: String,
    /// `Cleanup`, `Compact`, `Defragment`, `MoveLeaderThenDefragment`, `Snapshot` or `Skip`.
    pub action: String,
    /// Cleanup: the keyspaces; empty: every keyspace that can hold stale data, as the node lists
    /// them when its turn comes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub keyspaces: Vec<String>,
    /// How long the step is expected to take, in seconds (`estimate` says from what); absent when
    /// none is made: a member skipped, a compaction, a copy, a restore's steps after its proof.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_seconds: Option<i64>,
    /// Where the expectation comes from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimate: Option<String>,
    /// Why it is skipped, or what it does in detail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// One earlier run on a node or member: its size then (bytes) and how long it took.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkSample {
    /// The size worked on, in bytes: a member's db size before its defrag, a node's load as its
    /// cleanup reported it. Absent when not known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<i64>,
    /// How long the run took, in seconds: a defrag from its call to the member's answer, a cleanup
    /// its Job's run.
    pub seconds: f64,
}

/// An expected duration and where it comes from.
#[derive(Debug, Clone, PartialEq)]
pub struct Estimate {
    pub seconds: i64,
    pub from: String,
}

/// The expected duration of a run on something of `bytes_now` bytes (when known), from its own
/// earlier runs: the median seconds per byte times `bytes_now`; without sizes, the median
/// duration; without history, `default_rate` (bytes per second) when the size is known, else
/// `default_seconds`. At least one second.
pub fn estimate(
    samples: &[WorkSample],
    bytes_now: Option<i64>,
    default_rate: Option<f64>,
    default_seconds: i64,
) -> Estimate {
    let runs = |n: usize| if n == 1 { "1 earlier run".to_owned() } else { format!("{n} earlier runs") };
    let per_byte: Vec<f64> = samples
        .iter()
        .filter_map(|s| s.bytes.filter(|b| *b > 0).map(|b| s.seconds / b as f64))
        .filter(|r| r.is_finite())
        .collect();
    if let (Some(bytes), Some(per_byte_median)) = (bytes_now, median(per_byte.clone())) {
        let seconds = (per_byte_median * bytes as f64).ceil() as i64;
        let rate = if per_byte_median > 0.0 { 1.0 / per_byte_median } else { f64::INFINITY };
        return Estimate {
            seconds: seconds.max(1),
            from: format!(
                "{} at {}/s, the median rate of {}",
                human_bytes(bytes),
                human_rate(rate),
                runs(per_byte.len())
            ),
        };
    }
    let durations: Vec<f64> = samples.iter().map(|s| s.seconds).filter(|s| s.is_finite()).collect();
    if let Some(median) = median(durations.clone()) {
        return Estimate {
            seconds: (median.ceil() as i64).max(1),
            from: format!("the median duration of {} (sizes unknown)", runs(durations.len())),
        };
    }
    match (bytes_now, default_rate) {
        (Some(bytes), Some(rate)) if rate > 0.0 => Estimate {
            seconds: ((bytes as f64 / rate).ceil() as i64).max(1),
            from: format!("{} at the default {}/s (no history)", human_bytes(bytes), human_rate(rate)),
        },
        _ => Estimate {
            seconds: default_seconds.max(1),
            from: format!("the default {} (no history)", human_seconds(default_seconds)),
        },
    }
}

/// The median rate (bytes per second) of the runs whose size is known; `None` without any.
pub fn median_rate(samples: &[WorkSample]) -> Option<f64> {
    let rates: Vec<f64> = samples
        .iter()
        .filter_map(|s| Some(s.bytes.filter(|b| *b > 0)? as f64 / s.seconds))
        .filter(|r| r.is_finite() && *r > 0.0)
        .collect();
    median(rates)
}

fn median(mut values: Vec<f64>) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let middle = values.len() / 2;
    Some(if values.len() % 2 == 1 { values[middle] } else { (values[middle - 1] + values[middle]) / 2.0 })
}

/// A node's cleanup history as its member Service's [`keys::CLEANUP_HISTORY`] annotation holds
/// it (`<bytes or ?>:<seconds>@<job>`, the Job optional); entries that cannot be read are left
/// out.
pub fn cleanup_history(annotations: &std::collections::BTreeMap<String, String>) -> Vec<WorkSample> {
    history_entries(annotations).filter_map(|(sample, _)| sample).collect()
}

/// Each entry of the annotation: its sample when it can be read, and the Job that made it.
fn history_entries(
    annotations: &std::collections::BTreeMap<String, String>,
) -> impl Iterator<Item = (Option<WorkSample>, Option<&str>)> {
    annotations.get(keys::CLEANUP_HISTORY).into_iter().flat_map(|text| text.split(',')).map(|entry| {
        let (sample, job) = match entry.trim().split_once('@') {
            Some((sample, job)) => (sample, Some(job)),
            None => (entry.trim(), None),
        };
        (parse_sample(sample), job)
    })
}

fn parse_sample(text: &str) -> Option<WorkSample> {
    let (bytes, seconds) = text.split_once(':')?;
    let seconds: f64 = seconds.parse().ok().filter(|s: &f64| s.is_finite() && *s >= 0.0)?;
    let bytes = match bytes {
        "?" => None,
        b => Some(b.parse::<i64>().ok().filter(|b| *b >= 0)?),
    };
    Some(WorkSample { bytes, seconds })
}

/// The annotation's value with `sample` (of Job `job`) added last and only the newest
/// [`MAX_SAMPLES`] readable entries kept; `None` when that Job's run is recorded already (a pass
/// that records, then fails before its status is written, records it again: once is enough).
pub fn cleanup_history_with(
    annotations: &std::collections::BTreeMap<String, String>,
    sample: WorkSample,
    job: &str,
) -> Option<String> {
    let mut entries: Vec<(WorkSample, Option<&str>)> =
        history_entries(annotations).filter_map(|(sample, job)| Some((sample?, job))).collect();
    if entries.iter().any(|(_, recorded)| *recorded == Some(job)) {
        return None;
    }
    entries.push((sample, Some(job)));
    let skip = entries.len().saturating_sub(MAX_SAMPLES);
    let text = entries[skip..]
        .iter()
        .map(|(s, job)| {
            let bytes = s.bytes.map_or("?".to_owned(), |b| b.to_string());
            let job = job.map(|j| format!("@{j}")).unwrap_or_default();
            format!("{bytes}:{:.1}{job}", s.seconds)
        })
        .collect::<Vec<_>>()
        .join(",");
    Some(text)
}

/// How late into a window a node counts as "the first thing in it": a node that would not fit a
/// window entered this late counts as longer than the window (5 minutes), so that a node about
/// as long as the window is not left out for ever by the few seconds a pass takes to come.
pub const LATE_START_SLACK_SECONDS: i64 = 300;

/// Whether a run expected to take `expected` seconds may start at `now` given the windows:
/// `Ok` when it ends before the window closes. A run too long for the window as a whole (its
/// length less [`LATE_START_SLACK_SECONDS`]) starts only as the first thing in a window
/// (`nothing_since_opening`: no work of the task started since the window opened and none runs),
/// so that it is never left out for ever. `Err` says why it waits for the next window, in words
/// that do not change from one pass to the next (the window's close, not a countdown), so that a
/// status that repeats it is not rewritten every pass.
pub fn fits_window(
    state: &WindowState,
    now: jiff::Timestamp,
    expected: i64,
    nothing_since_opening: impl Fn(jiff::Timestamp) -> bool,
    local: impl Fn(jiff::Timestamp) -> String,
) -> Result<(), String> {
    match state {
        WindowState::Closed { opens } => {
            Err(format!("left for the next maintenance window, which opens {}", local(*opens)))
        }
        WindowState::Open { opened, closes } => {
            let left = closes.duration_since(now).as_secs();
            if expected <= left {
                return Ok(());
            }
            let length = closes.duration_since(*opened).as_secs();
            if expected > length - LATE_START_SLACK_SECONDS && nothing_since_opening(*opened) {
                return Ok(());
            }
            Err(format!(
                "left for the next maintenance window: expected {}, which would run past this one's end ({})",
                human_seconds(expected),
                local(*closes)
            ))
        }
    }
}

/// The plan's id: a hash of what its steps do (names, actions, keyspaces, skips), not of their
/// estimates, so that a plan approved stays approved while only its estimates move.
pub fn plan_id(steps: &[PlanStep]) -> String {
    let mut hash = Sha256::new();
    for step in steps {
        hash.update(step.name.as_bytes());
        hash.update([0]);
        hash.update(step.action.as_bytes());
        hash.update([0]);
        for keyspace in &step.keyspaces {
            hash.update(keyspace.as_bytes());
            hash.update([1]);
        }
        hash.update([2]);
    }
    hash.finalize().iter().take(6).map(|b| format!("{b:02x}")).collect()
}

/// A plan of `steps` with its id, its summary and its total.
pub fn plan_of(summary: String, steps: Vec<PlanStep>) -> TaskPlan {
    let expected: Vec<i64> = steps.iter().filter_map(|s| s.expected_seconds).collect();
    TaskPlan {
        id: plan_id(&steps),
        summary,
        expected_seconds: (!expected.is_empty()).then(|| expected.iter().sum()),
        steps,
    }
}

/// The nodes a Cleanup cleans, in cleaning order (datacenter, rack, ordinal): the ones it names,
/// else every member of the cluster. `Err` names a node that is not a member (the task fails with
/// it when it starts), and the members there are.
pub fn cleanup_nodes<'a>(
    cleanup: &Cleanup,
    cluster: &ClusterFacts,
    members: &'a [MemberFacts],
) -> Result<Vec<&'a MemberFacts>, String> {
    let sorted = sorted_members(members);
    let unknown: Vec<&str> = cleanup
        .nodes
        .iter()
        .filter(|n| !members.iter().any(|m| &m.service == *n))
        .map(String::as_str)
        .collect();
    if !unknown.is_empty() {
        let known: Vec<&str> = sorted.iter().map(|m| m.service.as_str()).collect();
        return Err(format!(
            "spec.config.cleanup.nodes: {} not a member Service of ScyllaCluster {}/{} (its members: {}); \
             create a new task naming members only",
            unknown.join(", "),
            cluster.namespace,
            cluster.name,
            if known.is_empty() { "none".to_owned() } else { known.join(", ") }
        ));
    }
    Ok(sorted
        .into_iter()
        .filter(|m| cleanup.nodes.is_empty() || cleanup.nodes.contains(&m.service))
        .collect())
}

/// The plan of a Cleanup: its nodes ([`cleanup_nodes`]), each with its keyspaces and its
/// expected duration from its own history.
pub fn cleanup_plan(
    cleanup: &Cleanup,
    cluster: &ClusterFacts,
    members: &[MemberFacts],
) -> Result<TaskPlan, String> {
    let bounds = crate::scylla::limits::limits(cleanup, cluster).describe();
    let steps: Vec<PlanStep> = cleanup_nodes(cleanup, cluster, members)?
        .into_iter()
        .map(|member| cleanup_step(cleanup, member))
        .collect();
    let summary = match steps.len() {
        0 => "no node to clean".to_owned(),
        n => format!("clean {n} node(s) of ScyllaCluster {}/{}, {bounds}", cluster.namespace, cluster.name),
    };
    Ok(plan_of(summary, steps))
}

fn cleanup_step(cleanup: &Cleanup, member: &MemberFacts) -> PlanStep {
    let work = cleanup.work_of(&member.service);
    let estimate = node_cleanup_estimate(&member.annotations);
    let rack = match (&member.datacenter, &member.rack) {
        (Some(dc), Some(rack)) => format!("datacenter {dc}, rack {rack}"),
        _ => "rack unknown: it does not start until its labels are there".to_owned(),
    };
    let keyspaces = if work.keyspaces.is_empty() {
        "every keyspace that can hold stale data".to_owned()
    } else {
        format!("keyspaces {}", work.keyspaces.join(", "))
    };
    PlanStep {
        name: member.service.clone(),
        action: "Cleanup".to_owned(),
        keyspaces: work.keyspaces,
        expected_seconds: Some(estimate.seconds),
        estimate: Some(estimate.from),
        note: Some(format!("{rack}; {keyspaces}")),
    }
}

/// A node's expected cleanup, from the history on its member Service (its size: its load at its
/// last cleanup that reported one).
pub fn node_cleanup_estimate(annotations: &std::collections::BTreeMap<String, String>) -> Estimate {
    let history = cleanup_history(annotations);
    let bytes_now = history.iter().rev().find_map(|s| s.bytes);
    estimate(&history, bytes_now, None, DEFAULT_CLEANUP_SECONDS)
}

/// The plan of an etcd task on `cluster` as its status last observed it. `Err` when nothing can
/// be planned from what is known (no member observed yet).
pub fn etcd_plan(work: &Work, cluster: &EtcdCluster, target: &str) -> Result<TaskPlan, String> {
    let status = cluster.status.clone().unwrap_or_default();
    if status.members.is_empty() {
        return Err(format!(
            "EtcdCluster {target} has no member in its status yet: the plan is made once the \
             controller has observed it"
        ));
    }
    let policy = &cluster.spec.policy;
    let options = PlanOptions {
        leader_turn: policy.leader_turn_policy(),
        in_place_budget: policy
            .leader_in_place_budget_seconds
            .map_or(DEFAULT_IN_PLACE_BUDGET, std::time::Duration::from_secs),
        allow_single_member: policy.allow_single_member,
        refuse_affected_versions: policy.refuse_affected_versions,
        ..PlanOptions::default()
    };
    let mut steps = Vec::new();
    let summary = match work {
        Work::Compact(compact) => {
            steps.push(compact_step(compact));
            format!("compact EtcdCluster {target} once, through any member")
        }
        Work::Defragment(defrag) => defrag_steps(defrag, &options, cluster, target, &mut steps)?,
        Work::Maintenance { compact, defragment } => {
            steps.push(compact_step(compact));
            let defrag = defrag_steps(defragment, &options, cluster, target, &mut steps)?;
            format!("compact, then {defrag}")
        }
        Work::Snapshot(snapshot) => {
            steps.push(snapshot_step(snapshot, cluster));
            if snapshot.verify {
                steps.push(proof_step(&snapshot.store.display(), "the snapshot just written", cluster));
            }
            let proof = if snapshot.verify { ", then prove it restores" } else { "" };
            format!("snapshot EtcdCluster {target} to {}{proof}", store_words(&snapshot.store))
        }
        Work::Copy(copy) => {
            steps.push(PlanStep {
                name: "cluster".to_owned(),
                action: "Copy".to_owned(),
                note: Some(format!(
                    "copy {} from {} to {}, checking each one's SHA-256 on both sides; those already \
                     there are left as they are",
                    if copy.only.is_empty() {
                        "every snapshot of the cluster".to_owned()
                    } else {
                        copy.only.join(", ")
                    },
                    copy.from.display(),
                    copy.to.display()
                )),
                ..PlanStep::default()
            });
            format!(
                "copy EtcdCluster {target}'s snapshots from {} to {}",
                copy.from.display(),
                copy.to.display()
            )
        }
        Work::Verify(Verify { to_revision: Some(to), from, object, .. }) => {
            let which = object
                .clone()
                .unwrap_or_else(|| format!("the newest full snapshot at or before revision {to}"));
            steps.push(PlanStep {
                name: "cluster".to_owned(),
                action: "Replay".to_owned(),
                note: Some(format!(
                    "restore {which} from {} into a throwaway member inside the Job, replay the \
                     cluster's deltas after it up to revision {to}, each transaction at its original \
                     revision, and check that the member serves revision {to}",
                    from.display()
                )),
                ..PlanStep::default()
            });
            format!("prove that EtcdCluster {target} restores to revision {to} from {}", from.display())
        }
        Work::Verify(verify) => {
            let which = verify.object.clone().unwrap_or_else(|| "the newest snapshot".to_owned());
            steps.push(proof_step(&verify.from.display(), &which, cluster));
            format!("prove that {which} of EtcdCluster {target} in {} restores", verify.from.display())
        }
        Work::Delta(delta) => {
            let start = delta.start_revision.map_or_else(
                || "where the newest snapshot or delta there ends".to_owned(),
                |revision| format!("after revision {revision}"),
            );
            steps.push(PlanStep {
                name: "cluster".to_owned(),
                action: "Delta".to_owned(),
                note: Some(format!(
                    "read every change from etcd's history, starting {start}, up to the cluster's \
                     revision when the Job starts, through any member; a start etcd compacted away \
                     fails and writes nothing (take a full snapshot)"
                )),
                ..PlanStep::default()
            });
            format!("save EtcdCluster {target}'s changes as a delta to {}", store_words(&delta.to))
        }
        Work::Restore(restore) => return restore_plan(restore, cluster, target),
        Work::Cleanup(_) => return Err("a Cleanup task cleans a ScyllaCluster".to_owned()),
    };
    Ok(plan_of(summary, steps))
}

fn compact_step(compact: &Compact) -> PlanStep {
    let to = match compact.target {
        CompactTarget::RetainRevisions(keep) => {
            format!("to the current revision − {keep} (keep the last {keep})")
        }
        CompactTarget::Revision(revision) => format!("to revision {revision}"),
    };
    let physical = if compact.physical { ", waiting until the backend has freed the pages" } else { "" };
    PlanStep {
        name: "cluster".to_owned(),
        action: "Compact".to_owned(),
        note: Some(format!("{to}{physical}; a compaction takes seconds and blocks no member")),
        ..PlanStep::default()
    }
}

fn store_words(store: &Store) -> String {
    match store {
        Store::Claim(claim) => format!("claim {claim}"),
        Store::Bucket(bucket) => format!("bucket {}", bucket.url),
    }
}

/// A proof: the snapshot restored into a throwaway member in the Job, which is started and
/// checked (at the snapshot rate, twice: fetch, then restore and start).
fn proof_step(store: &str, which: &str, cluster: &EtcdCluster) -> PlanStep {
    let bytes = cluster.status.as_ref().and_then(|s| s.members.iter().filter_map(|m| m.db_size).max());
    let estimate = estimate(&[], bytes.map(|b| b * 2), Some(DEFAULT_SNAPSHOT_BYTES_PER_SECOND), 60);
    PlanStep {
        name: "cluster".to_owned(),
        action: "Verify".to_owned(),
        expected_seconds: Some(estimate.seconds + 10),
        estimate: Some(format!("{}, and about 10 s to start the member", estimate.from)),
        note: Some(format!(
            "restore {which} from {store} into a throwaway member inside the Job, start it and check \
             the revision and the number of keys recorded when it was taken; the cluster is not touched"
        )),
        ..PlanStep::default()
    }
}

/// The deltas of `store` in the catalog that chain from revision `from` up to `to`, in order
/// (each starting where the one before ended): what a replay to `to` will apply, as far as the
/// catalog knows; the runner reads the store itself.
pub fn deltas_up_to<'a>(
    catalog: &'a [crate::snapshot_catalog::SnapshotRecord],
    store: &str,
    from: i64,
    to: i64,
) -> Vec<&'a crate::snapshot_catalog::SnapshotRecord> {
    let mut chain = Vec::new();
    let mut at = from;
    while at < to {
        let next = catalog
            .iter()
            .filter(|r| {
                r.store == store && r.start_revision == Some(at) && r.revision.is_some_and(|e| e > at)
            })
            .max_by_key(|r| r.revision);
        let Some(next) = next else { break };
        at = next.revision.unwrap_or(at);
        chain.push(next);
    }
    chain
}

/// The first step of a Restore to a point in time: the full snapshot and its deltas replayed up to
/// the revision in a throwaway member, which is checked and whose snapshot is saved.
fn replay_plan_step(store: &str, full: &str, from: Option<i64>, to: i64, cluster: &EtcdCluster) -> PlanStep {
    let catalog = cluster.status.as_ref().map(|s| s.snapshots.as_slice()).unwrap_or_default();
    let deltas = from.map(|from| deltas_up_to(catalog, store, from, to)).unwrap_or_default();
    let reached = deltas.last().and_then(|d| d.revision).or(from).unwrap_or_default();
    let changes: i64 = deltas.iter().filter_map(|d| d.changes).sum();
    let named: Vec<&str> = deltas.iter().map(|d| d.object.as_str()).collect();
    let reach = if reached >= to {
        format!("recovery point: revision {to}")
    } else {
        format!(
            "the catalog's deltas reach revision {reached} only: the replay reads the store, and fails \
             naming the first revision no delta holds"
        )
    };
    let mut step = proof_step(store, full, cluster);
    step.action = "Replay".to_owned();
    step.note = Some(format!(
        "restore {full} (revision {}) from {store} into a throwaway member inside the Job, replay {} \
         delta(s) on it up to revision {to} ({changes} change(s){}), check it serves revision {to}, and \
         save its snapshot in {store} as the cluster's newest full snapshot; {reach}; the cluster is \
         not touched",
        from.map_or_else(|| "?".to_owned(), |r| r.to_string()),
        deltas.len(),
        if named.is_empty() { String::new() } else { format!(": {}", named.join(", ")) },
    ));
    step
}

/// A Restore's steps, as far as the status tells them before it starts.
fn restore_plan(restore: &Restore, cluster: &EtcdCluster, target: &str) -> Result<TaskPlan, String> {
    let Some(sts) = &cluster.spec.stateful_set else {
        return Err(format!(
            "EtcdCluster {target} has no spec.statefulSet: a Restore needs to know the StatefulSet that \
             runs the members"
        ));
    };
    let template = sts.data_volume_claim_template.clone().unwrap_or_else(|| "<data template>".to_owned());
    let store = restore.from.display();
    let catalog = cluster.status.as_ref().map(|s| s.snapshots.as_slice()).unwrap_or_default();
    // A time in the future is refused when the task starts; the plan shows what it resolves to.
    let to_revision = crate::restore::target_revision(restore, catalog, jiff::Timestamp::MAX)?;
    let resolved = crate::restore::resolve_restore(
        cluster,
        &store,
        restore.object.as_deref(),
        to_revision,
        &sts.name,
        &template,
    )?;
    let full_revision = resolved.record.as_ref().and_then(|r| r.revision);
    let first = match to_revision {
        Some(to_revision) => replay_plan_step(&store, &resolved.object, full_revision, to_revision, cluster),
        None => proof_step(&store, &resolved.object, cluster),
    };
    // To a point in time the members get the snapshot the replay saves, at that revision.
    let revision = to_revision.or(full_revision);
    let restored = match to_revision {
        Some(to) => format!("the snapshot the replay saves at revision {to}"),
        None => resolved.object.clone(),
    };
    let mut steps = vec![first];
    steps.push(PlanStep {
        name: sts.name.clone(),
        action: "ScaleDown".to_owned(),
        note: Some(format!("scale StatefulSet {} to 0 and wait until its pods are gone", sts.name)),
        ..PlanStep::default()
    });
    for member in &resolved.members {
        steps.push(PlanStep {
            name: member.name.clone(),
            action: "RestoreMember".to_owned(),
            note: Some(format!(
                "on claim {}: move the data aside (kept, not deleted), restore {} as member {} at {} \
                 with a new cluster token",
                member.claim, restored, member.name, member.peer_url
            )),
            ..PlanStep::default()
        });
    }
    steps.push(PlanStep {
        name: sts.name.clone(),
        action: "ScaleUp".to_owned(),
        note: Some("scale the StatefulSet back to its replicas".to_owned()),
        ..PlanStep::default()
    });
    steps.push(PlanStep {
        name: "cluster".to_owned(),
        action: "WaitForMembers".to_owned(),
        note: Some(format!(
            "until every member is healthy at revision {} or later",
            revision.map_or_else(|| "the snapshot's".to_owned(), |r| r.to_string())
        )),
        ..PlanStep::default()
    });
    let lost_revisions = match to_revision {
        Some(to) => resolved.last_revision_with_quorum.map(|last| (last - to).max(0)),
        None => resolved.lost_revisions(),
    };
    let lost = match lost_revisions {
        Some(lost) => format!("; the {lost} revision(s) written after it are lost"),
        None => "; writes after the snapshot are lost".to_owned(),
    };
    let summary = format!(
        "restore EtcdCluster {target} ({} members of StatefulSet {}) from {} in {}{}{lost}",
        resolved.members.len(),
        sts.name,
        match to_revision {
            Some(_) => format!("{} and its deltas", resolved.object),
            None => resolved.object.clone(),
        },
        store,
        revision.map(|r| format!(" (revision {r})")).unwrap_or_default()
    );
    Ok(plan_of(summary, steps))
}

fn snapshot_step(snapshot: &Snapshot, cluster: &EtcdCluster) -> PlanStep {
    let members = cluster.status.as_ref().map(|s| s.members.as_slice()).unwrap_or_default();
    let source = members
        .iter()
        .filter(|m| m.healthy && !m.leader && !m.learner)
        .min_by(|a, b| a.name.cmp(&b.name))
        .or_else(|| members.iter().find(|m| m.leader));
    let bytes = source.and_then(|m| m.db_size);
    let estimate = estimate(&[], bytes, Some(DEFAULT_SNAPSHOT_BYTES_PER_SECOND), 60);
    PlanStep {
        name: source.map_or("a healthy follower".to_owned(), |m| m.name.clone()),
        action: "Snapshot".to_owned(),
        expected_seconds: Some(estimate.seconds),
        estimate: Some(estimate.from),
        note: Some(format!(
            "stream the db from a healthy follower to {} in {}, keep the newest {}{}",
            snapshot.file_name,
            store_words(&snapshot.store),
            snapshot.retain,
            retention_words(&snapshot.rules)
        )),
        ..PlanStep::default()
    }
}

/// `, one per 1h for 7d, deltas for 1d, at most 53687091200 bytes`: the rules beyond the count.
fn retention_words(rules: &crate::validate::RetentionRules) -> String {
    let mut words = String::new();
    if let Some(within) = &rules.keep_within {
        words.push_str(&format!(", every one of the last {within}"));
    }
    for tier in &rules.tiers {
        let (every, keep_for) = tier.split_once(':').unwrap_or((tier, ""));
        words.push_str(&format!(", one per {every} for {keep_for}"));
    }
    if let Some(within) = &rules.keep_deltas_for {
        words.push_str(&format!(", deltas for {within}"));
    }
    if let Some(bytes) = rules.max_total_bytes {
        words.push_str(&format!(", at most {bytes} bytes ({:.2} MiB)", bytes as f64 / (1024.0 * 1024.0)));
    }
    words
}

/// The defragmentation's steps (the runner's own rule, [`plan_defrag`], on the observed sizes),
/// and its summary; `Err` when the runner would refuse the cluster as it stands (then no plan can
/// be approved: one without steps would approve nothing in particular).
fn defrag_steps(
    defrag: &DefragPolicy,
    options: &PlanOptions,
    cluster: &EtcdCluster,
    target: &str,
    steps: &mut Vec<PlanStep>,
) -> Result<String, String> {
    let members = cluster.status.as_ref().map(|s| s.members.clone()).unwrap_or_default();
    let leader =
        members.iter().find(|m| m.leader).and_then(|m| u64::from_str_radix(&m.id, 16).ok()).unwrap_or(0);
    let observed: Vec<MemberObservation> = members
        .iter()
        .map(|m| MemberObservation {
            id: u64::from_str_radix(&m.id, 16).unwrap_or(0),
            name: m.name.clone(),
            is_learner: m.learner,
            status: if m.healthy {
                Ok(MemberStatus {
                    db_size: m.db_size.unwrap_or(0),
                    db_size_in_use: m.db_size_in_use.unwrap_or(0),
                    leader,
                    version: m.version.clone().unwrap_or_default(),
                    ..MemberStatus::default()
                })
            } else {
                Err(m.message.clone().unwrap_or_else(|| "not healthy".to_owned()))
            },
        })
        .collect();
    let plan = plan_defrag(defrag, options, &observed).map_err(|refusal| {
        format!("EtcdCluster {target} cannot be defragmented as things stand: {refusal}")
    })?;
    let mut count = 0;
    for member in &plan.members {
        let history = members.iter().find(|m| m.name == member.name).map(|m| m.defrag_history.clone());
        let turn = (member.action == MemberAction::LeaderDecidedAtTurn)
            .then(|| predicted_leader_turn(options, &members, member.db_size));
        let action = match (&member.action, &turn) {
            (MemberAction::Defrag, _) => "Defragment",
            (MemberAction::MoveLeaderThenDefrag, _) => "MoveLeaderThenDefragment",
            (MemberAction::LeaderDecidedAtTurn, Some(t)) if t.choice == TurnChoice::TransferFirst => {
                "MoveLeaderThenDefragment"
            }
            (MemberAction::LeaderDecidedAtTurn, _) => "Defragment",
            (MemberAction::Skip, _) => "Skip",
        };
        let history = history.unwrap_or_default();
        let estimate = member.will_defrag().then(|| match &turn {
            // A leader without history of its own is expected to take what the followers predict.
            Some(turn) if history.is_empty() && turn.rate_from != RateFrom::Default => Estimate {
                seconds: turn.predicted.as_secs_f64().ceil().max(1.0) as i64,
                from: "predicted from the followers' last defrags".to_owned(),
            },
            _ => estimate(&history, Some(member.db_size), Some(DEFAULT_DEFRAG_BYTES_PER_SECOND), 60),
        });
        count += usize::from(member.will_defrag());
        let role = match &turn {
            Some(turn) => format!(
                "leader; {} (decided again at its turn, on this run's followers); ",
                turn.reason.replace("this run's followers", "the followers' last defrags")
            ),
            None if member.was_leader => "leader; ".to_owned(),
            None => String::new(),
        };
        steps.push(PlanStep {
            name: member.name.clone(),
            action: action.to_owned(),
            expected_seconds: estimate.as_ref().map(|e| e.seconds),
            estimate: estimate.map(|e| e.from),
            note: Some(format!("{role}{}", member.reason)),
            ..PlanStep::default()
        });
    }
    Ok(format!(
        "defragment {count} of {} member(s) of EtcdCluster {target}, followers first, one at a time \
         (from the sizes last observed; the Job checks them again)",
        plan.members.len()
    ))
}

/// The leader's turn as the followers' last defrags predict it (`Auto`); the runner decides
/// again at the leader's turn on what this run's followers took.
fn predicted_leader_turn(
    options: &PlanOptions,
    members: &[EtcdMemberStatus],
    leader_db_size: i64,
) -> LeaderTurnDecision {
    let measured: Vec<MeasuredDefrag> = members
        .iter()
        .filter(|m| !m.leader && !m.learner)
        .filter_map(|m| m.defrag_history.last())
        .filter_map(|s| {
            let duration = std::time::Duration::try_from_secs_f64(s.seconds).ok()?;
            Some(MeasuredDefrag { bytes: s.bytes?, duration })
        })
        .collect();
    decide_leader_turn(&LeaderTurnFacts {
        policy: options.leader_turn,
        budget: options.in_place_budget,
        leader_db_size,
        measured: &measured,
        earlier_rate: None,
        non_blocking: false,
    })
}

/// `1.50 GiB`, `12.0 MiB`, `512 B`.
pub fn human_bytes(bytes: i64) -> String {
    let b = bytes as f64;
    const KIB: f64 = 1024.0;
    if b >= KIB * KIB * KIB {
        format!("{:.2} GiB", b / (KIB * KIB * KIB))
    } else if b >= KIB * KIB {
        format!("{:.1} MiB", b / (KIB * KIB))
    } else if b >= KIB {
        format!("{:.1} KiB", b / KIB)
    } else {
        format!("{bytes} B")
    }
}

fn human_rate(bytes_per_second: f64) -> String {
    if !bytes_per_second.is_finite() {
        return "∞ B".to_owned();
    }
    human_bytes(bytes_per_second.round() as i64)
}

/// `2h 05m`, `42m 10s`, `9s`.
pub fn human_seconds(seconds: i64) -> String {
    let s = seconds.max(0);
    match (s / 3600, (s % 3600) / 60, s % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, s) => format!("{m}m {s:02}s"),
        (h, m, _) => format!("{h}h {m:02}m"),
    }
}

#[cfg(test)]
mod tests;
