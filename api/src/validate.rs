//! A MaintenanceTask's spec, checked: the rules of the CRD's schema and CEL (for API servers that
//! do not run them, such as the in-memory one of the tests, and for objects written before a
//! rule existed) and what neither can say. Every mistake names the task and the field and says
//! what to do; all of them are reported at once, so that one edit fixes the task.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use groundskeeper_stores::etcd::plan::CompactTarget;
use groundskeeper_stores::etcd::plan::DefragPolicy;
use groundskeeper_stores::etcd::retention::NameTemplate;
use jiff::SignedDuration;
use kube::ResourceExt;

use crate::maintenance_task::{
    CleanupConfig, CompactConfig, DEFAULT_RETAIN_REVISIONS, DefragmentConfig, MAX_FILE_NAME_LEN,
    MAX_KEYSPACE_LEN, MAX_LIST_ITEMS, MAX_NAME_LEN, MAX_NODE_NAME_LEN, MaintenanceConfig, MaintenanceTask,
    MaintenanceTaskSpec, SNAPSHOT_FILE_NAME_PLACEHOLDERS, SnapshotConfig, TargetKind, TaskTarget, TaskType,
};
use crate::maintenance_task::{
    CopyConfig, DEFAULT_SNAPSHOT_FILE_NAME, DeltaConfig, RestoreConfig, RetentionPolicy, VerifyConfig,
};
use crate::snapshot_store::{
    SnapshotStoreSpec, Store, StoreEncoding, StoreUse, check_bucket, check_encoding, check_encoding_for,
    check_store,
};

/// One mistake in a task's spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// `MaintenanceTask <namespace>/<name>`.
    pub object: String,
    /// The field's path, e.g. `spec.config.compact.retainRevisions`.
    pub field: String,
    /// What is wrong and what to do.
    pub message: String,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}: {}", self.object, self.field, self.message)
    }
}

/// Several mistakes as one line each, joined by `; ` (for a condition or an error entry).
pub fn describe_errors(errors: &[FieldError]) -> String {
    errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
}

/// A task whose spec passed every check, with its defaults filled in.
#[derive(Debug, Clone, PartialEq)]
pub struct ValidTask {
    pub namespace: String,
    pub name: String,
    /// Of the kind the operation works on.
    pub target: TaskTarget,
    pub work: Work,
    /// How long the task is kept once finished.
    pub ttl_after_finished: SignedDuration,
    /// How long after its creation the task must have finished.
    pub deadline: Option<SignedDuration>,
}

/// What a task does, with its settings checked and defaulted.
#[derive(Debug, Clone, PartialEq)]
pub enum Work {
    Cleanup(Cleanup),
    Compact(Compact),
    Defragment(DefragPolicy),
    /// Compact, then defragment.
    Maintenance {
        compact: Compact,
        defragment: DefragPolicy,
    },
    Snapshot(Snapshot),
    Copy(Copy),
    Verify(Verify),
    Delta(Delta),
    Restore(Restore),
}

/// An incremental snapshot of a cluster, beside its full snapshots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delta {
    pub to: Store,
    /// How the delta is stored; its key also opens the store's encrypted full snapshots.
    pub encoding: StoreEncoding,
    /// The template of the cluster's full snapshots.
    pub file_name: String,
    /// `None`: where the newest full snapshot or delta of the cluster there ends.
    pub start_revision: Option<i64>,
}

/// A copy of a cluster's snapshots from one store to another.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Copy {
    pub from: Store,
    pub to: Store,
    pub file_name: String,
    pub only: Vec<String>,
}

/// A proof that a snapshot restores.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verify {
    pub from: Store,
    /// The key that opens the store's encrypted objects.
    pub encoding: StoreEncoding,
    /// `None`: the newest of the cluster's snapshots there (before `to_revision`, when given).
    pub object: Option<String>,
    pub file_name: String,
    /// Prove a restore to this revision: the full snapshot and the deltas after it replayed.
    pub to_revision: Option<i64>,
}

/// A restore of a cluster from a snapshot, confirmed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restore {
    pub from: Store,
    /// The key that opens the store's encrypted objects; a restore to a point in time saves its
    /// snapshot there so.
    pub encoding: StoreEncoding,
    /// `None`: the newest proven snapshot of that store in the cluster's catalog.
    pub object: Option<String>,
    pub quorum_lost_for: SignedDuration,
    pub override_quorum_check: bool,
    /// A point in time: the revision the full snapshot and its deltas are replayed to.
    pub to_revision: Option<i64>,
    /// A point in time as a time: resolved to the revision of the newest backup written at or
    /// before it (see [`crate::restore::revision_at`]).
    pub to_time: Option<jiff::Timestamp>,
}

/// A cleanup of a ScyllaCluster.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cleanup {
    /// Empty: every keyspace that needs it.
    pub keyspaces: Vec<String>,
    /// Member Service names; empty: every node.
    pub nodes: Vec<String>,
    /// `None`: the cluster's annotation, else 1.
    pub max_concurrent_per_rack: Option<u32>,
    /// `None`: the cluster's annotation, else no bound beyond the per-rack one.
    pub max_concurrent: Option<u32>,
    /// Nodes that clean something else than `keyspaces`, by member Service name.
    pub per_node: BTreeMap<String, NodeWork>,
}

/// What one node of a cleanup cleans.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeWork {
    /// Empty: every keyspace that can hold stale data.
    pub keyspaces: Vec<String>,
    pub mark_node_clean: bool,
}

impl Cleanup {
    /// What `node` cleans: its own entry, else the task's keyspaces (and Scylla's flag left).
    pub fn work_of(&self, node: &str) -> NodeWork {
        self.per_node
            .get(node)
            .cloned()
            .unwrap_or_else(|| NodeWork { keyspaces: self.keyspaces.clone(), mark_node_clean: false })
    }
}

/// A compaction of an etcd cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Compact {
    pub target: CompactTarget,
    pub physical: bool,
}

/// A snapshot of an etcd cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// The claim when it goes to a claim (the store's own name, kept for the callers that only
    /// know claims).
    pub persistent_volume_claim: String,
    /// Where it goes: the claim, or a bucket.
    pub store: Store,
    /// Prove it restores once written.
    pub verify: bool,
    /// The template, `{cluster}` and `{time}` not yet replaced.
    pub file_name: String,
    pub retain: u32,
    /// `retention`, checked.
    pub rules: RetentionRules,
    /// Compressed, encrypted, both or neither.
    pub encoding: StoreEncoding,
}

/// A retention policy beyond the count, checked, as the runner's flags take it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RetentionRules {
    pub keep_within: Option<String>,
    /// `EVERY:FOR`.
    pub tiers: Vec<String>,
    pub keep_deltas_for: Option<String>,
    pub max_total_bytes: Option<u64>,
}

/// `MaintenanceTask <namespace>/<name>`, as errors and messages name a task.
pub fn task_display_name(task: &MaintenanceTask) -> String {
    match task.namespace() {
        Some(namespace) => format!("MaintenanceTask {namespace}/{}", task.name_any()),
        None => format!("MaintenanceTask {}", task.name_any()),
    }
}

/// The task's spec checked, or every mistake in it.
pub fn validate(task: &MaintenanceTask) -> Result<ValidTask, Vec<FieldError>> {
    let mut check = Check { object: task_display_name(task), errors: Vec::new() };
    let spec = &task.spec;
    check_type(&mut check, &spec.task_type);
    check_target(&mut check, &spec.target, &spec.task_type);
    check_config_union(&mut check, spec);
    let ttl = check_ttl(&mut check, spec.ttl_seconds_after_finished);
    if let Some(seconds) = spec.ttl_seconds_after_failed.filter(|s| *s < 0) {
        check.error(
            "spec.ttlSecondsAfterFailed",
            format!("{seconds} is negative: give 0 (delete as soon as failed) or more"),
        );
    }
    let deadline = check_deadline(&mut check, spec.deadline_seconds);
    let work = check_work(&mut check, spec);
    match (work, check.errors.is_empty()) {
        (Some(work), true) => Ok(ValidTask {
            namespace: task.namespace().unwrap_or_default(),
            name: task.name_any(),
            target: spec.target.clone(),
            work,
            ttl_after_finished: ttl,
            deadline,
        }),
        _ => Err(check.errors),
    }
}

/// The mistakes found so far in one task.
struct Check {
    object: String,
    errors: Vec<FieldError>,
}

impl Check {
    fn error(&mut self, field: impl Into<String>, message: impl Into<String>) {
        self.errors.push(FieldError {
            object: self.object.clone(),
            field: field.into(),
            message: message.into(),
        });
    }

    fn errors_at(&mut self, errors: Vec<(String, String)>) {
        for (field, message) in errors {
            self.error(field, message);
        }
    }
}

fn check_type(check: &mut Check, task_type: &TaskType) {
    if let TaskType::Unknown(name) = task_type {
        check.error(
            "spec.type",
            format!("{name:?} is not a task type: use one of {}", TaskType::KNOWN.join(", ")),
        );
    }
}

fn check_target(check: &mut Check, target: &TaskTarget, task_type: &TaskType) {
    check_object_name(
        check,
        "spec.target.name",
        &target.name,
        "is empty: name the ScyllaCluster or EtcdCluster to work on, in this namespace",
    );
    if let TargetKind::Unknown(kind) = &target.kind {
        check.error(
            "spec.target.kind",
            format!("{kind:?} is not a target kind: use ScyllaCluster or EtcdCluster"),
        );
    } else if let Some(wanted) = task_type.target_kind()
        && wanted != target.kind
    {
        check.error("spec.target.kind", wrong_kind_message(task_type, &target.kind));
    }
}

fn wrong_kind_message(task_type: &TaskType, kind: &TargetKind) -> String {
    match task_type {
        TaskType::Cleanup => format!(
            "type Cleanup works on a ScyllaCluster, not an {kind}: point spec.target at a ScyllaCluster, \
             or choose an etcd type (Compact, Defragment, Maintenance, Snapshot, Copy, Verify, Restore)"
        ),
        other => format!(
            "type {other} works on an EtcdCluster, not a {kind}: point spec.target at an EtcdCluster, \
             or choose type Cleanup"
        ),
    }
}

/// A name that must be a non-empty Kubernetes object name of at most 253 characters;
/// `when_empty` says what to do when it is empty.
fn check_object_name(check: &mut Check, field: &str, name: &str, when_empty: &str) {
    if name.is_empty() {
        check.error(field, when_empty);
    } else if name.len() > MAX_NAME_LEN {
        check.error(field, format!("is {} characters long; the most is {MAX_NAME_LEN}", name.len()));
    }
}

/// Only the `spec.config` member named after the type may be set.
fn check_config_union(check: &mut Check, spec: &MaintenanceTaskSpec) {
    let Some(allowed) = spec.task_type.config_member() else {
        return; // the unknown type is reported already; which member would fit cannot be said
    };
    for member in spec.config.members_set() {
        if member != allowed {
            check.error(
                format!("spec.config.{member}"),
                format!(
                    "is set but spec.type is {}: remove it (only spec.config.{allowed} may be set)",
                    spec.task_type
                ),
            );
        }
    }
}

fn check_ttl(check: &mut Check, seconds: i64) -> SignedDuration {
    if seconds < 0 {
        check.error(
            "spec.ttlSecondsAfterFinished",
            format!("{seconds} is negative: give 0 (delete as soon as finished) or more"),
        );
    }
    SignedDuration::from_secs(seconds.max(0))
}

fn check_deadline(check: &mut Check, seconds: Option<i64>) -> Option<SignedDuration> {
    let seconds = seconds?;
    if seconds < 1 {
        check.error(
            "spec.deadlineSeconds",
            format!("{seconds} is not positive: give 1 or more, or leave it out for no deadline"),
        );
        return None;
    }
    Some(SignedDuration::from_secs(seconds))
}

/// The operation of the task's type, from its config member (or the type's defaults).
fn check_work(check: &mut Check, spec: &MaintenanceTaskSpec) -> Option<Work> {
    let config = &spec.config;
    let operation = match &spec.task_type {
        TaskType::Cleanup => Work::Cleanup(check_cleanup(check, &config.cleanup.clone().unwrap_or_default())),
        TaskType::Compact => Work::Compact(check_compact(
            check,
            "spec.config.compact",
            &config.compact.clone().unwrap_or_default(),
        )?),
        TaskType::Defragment => Work::Defragment(check_defragment(
            check,
            "spec.config.defragment",
            &config.defragment.clone().unwrap_or_default(),
        )),
        TaskType::Maintenance => check_maintenance(check, &config.maintenance.clone().unwrap_or_default())?,
        TaskType::Snapshot => Work::Snapshot(check_snapshot(
            check,
            &spec.target.name,
            &config.snapshot.clone().unwrap_or_default(),
        )),
        TaskType::Copy => {
            Work::Copy(check_copy(check, &spec.target.name, &config.copy.clone().unwrap_or_default())?)
        }
        TaskType::Verify => {
            Work::Verify(check_verify(check, &spec.target.name, &config.verify.clone().unwrap_or_default())?)
        }
        TaskType::Delta => {
            Work::Delta(check_delta(check, &spec.target.name, &config.delta.clone().unwrap_or_default())?)
        }
        TaskType::Restore => Work::Restore(check_restore(check, config.restore.as_ref())?),
        TaskType::Unknown(_) => return None,
    };
    Some(operation)
}

fn check_cleanup(check: &mut Check, config: &CleanupConfig) -> Cleanup {
    check_name_list(
        check,
        "spec.config.cleanup.keyspaces",
        &config.keyspaces,
        MAX_KEYSPACE_LEN,
        "leave the list empty to clean every keyspace that needs it",
    );
    check_name_list(
        check,
        "spec.config.cleanup.nodes",
        &config.nodes,
        MAX_NODE_NAME_LEN,
        "leave the list empty to clean every node",
    );
    for (i, node) in config.nodes.iter().enumerate() {
        if !node.is_empty() && !is_dns_label(node) {
            check.error(
                format!("spec.config.cleanup.nodes[{i}]"),
                format!(
                    "{node:?} is not a member Service name (lowercase letters, digits and '-', \
                     e.g. \"<cluster>-<dc>-<rack>-0\")"
                ),
            );
        }
    }
    let per_node = check_per_node(check, config);
    Cleanup {
        keyspaces: config.keyspaces.clone(),
        nodes: config.nodes.clone(),
        per_node,
        max_concurrent_per_rack: check_concurrency(
            check,
            "spec.config.cleanup.maxConcurrentPerRack",
            config.max_concurrent_per_rack,
        ),
        max_concurrent: check_concurrency(check, "spec.config.cleanup.maxConcurrent", config.max_concurrent),
    }
}

/// `spec.config.cleanup.perNode`: each node once, named in `nodes`, its keyspaces a name list.
fn check_per_node(check: &mut Check, config: &CleanupConfig) -> BTreeMap<String, NodeWork> {
    let mut per_node = BTreeMap::new();
    for (i, entry) in config.per_node.iter().enumerate() {
        let field = format!("spec.config.cleanup.perNode[{i}]");
        if !config.nodes.contains(&entry.node) {
            check.error(
                format!("{field}.node"),
                format!(
                    "{:?} is not listed in spec.config.cleanup.nodes: list the node there too, or remove its entry",
                    entry.node
                ),
            );
        }
        check_name_list(
            check,
            &format!("{field}.keyspaces"),
            &entry.keyspaces,
            MAX_KEYSPACE_LEN,
            "leave the list empty to clean every keyspace that needs it",
        );
        let work = NodeWork { keyspaces: entry.keyspaces.clone(), mark_node_clean: entry.mark_node_clean };
        if per_node.insert(entry.node.clone(), work).is_some() {
            check.error(format!("{field}.node"), format!("{:?} has two entries: give one", entry.node));
        }
    }
    per_node
}

/// A list of names: bounded, none empty, too long or given twice.
fn check_name_list(check: &mut Check, field: &str, names: &[String], max_len: usize, when_empty: &str) {
    if names.len() > MAX_LIST_ITEMS {
        check
            .error(field, format!("lists {} names; the most is {MAX_LIST_ITEMS}: {when_empty}", names.len()));
    }
    let mut seen = BTreeSet::new();
    for (i, name) in names.iter().enumerate() {
        let item = format!("{field}[{i}]");
        if name.is_empty() {
            check.error(item, format!("is empty: give a name, or {when_empty}"));
        } else if name.len() > max_len {
            check.error(item, format!("is {} characters long; the most is {max_len}", name.len()));
        } else if !seen.insert(name) {
            check.error(item, format!("{name:?} is listed twice: list it once"));
        }
    }
}

/// Lowercase letters, digits and '-', starting with a letter and ending with a letter or digit,
/// as Service names are.
fn is_dns_label(name: &str) -> bool {
    let bytes = name.as_bytes();
    let inner_ok = bytes.iter().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-');
    inner_ok && bytes.first().is_some_and(u8::is_ascii_lowercase) && bytes.last().is_some_and(|b| *b != b'-')
}

fn check_concurrency(check: &mut Check, field: &str, value: Option<i32>) -> Option<u32> {
    let value = value?;
    match u32::try_from(value) {
        Ok(value) if value >= 1 => Some(value),
        _ => {
            check.error(
                field,
                format!(
                    "{value} is not positive: give 1 or more, or leave it out for the cluster's own setting"
                ),
            );
            None
        }
    }
}

fn check_compact(check: &mut Check, field: &str, config: &CompactConfig) -> Option<Compact> {
    let target = match (config.retain_revisions, config.revision) {
        (Some(_), Some(_)) => {
            check.error(
                field,
                "retainRevisions and revision are both set: give one of them (retainRevisions keeps \
                 the last N revisions, revision compacts to exactly that one)",
            );
            return None;
        }
        (Some(keep), None) if keep < 0 => {
            check.error(format!("{field}.retainRevisions"), format!("{keep} is negative: give 0 or more"));
            return None;
        }
        (None, Some(revision)) if revision < 1 => {
            check.error(format!("{field}.revision"), format!("{revision} is not a revision: give 1 or more"));
            return None;
        }
        (Some(keep), None) => CompactTarget::RetainRevisions(keep),
        (None, Some(revision)) => CompactTarget::Revision(revision),
        (None, None) => CompactTarget::RetainRevisions(DEFAULT_RETAIN_REVISIONS),
    };
    Some(Compact { target, physical: config.physical })
}

fn check_defragment(check: &mut Check, field: &str, config: &DefragmentConfig) -> DefragPolicy {
    if config.min_defrag_bytes < 0 {
        check.error(
            format!("{field}.minDefragBytes"),
            format!("{} is negative: give 0 (any size) or more", config.min_defrag_bytes),
        );
    }
    if !(0.0..=100.0).contains(&config.max_fragmented_percent) {
        check.error(
            format!("{field}.maxFragmentedPercent"),
            format!(
                "{} is not between 0 and 100: give a share of the db in %",
                config.max_fragmented_percent
            ),
        );
    }
    DefragPolicy {
        min_defrag_bytes: config.min_defrag_bytes,
        max_fragmented_percent: config.max_fragmented_percent,
    }
}

fn check_maintenance(check: &mut Check, config: &MaintenanceConfig) -> Option<Work> {
    let compact =
        check_compact(check, "spec.config.maintenance.compact", &config.compact.clone().unwrap_or_default());
    let defragment = check_defragment(
        check,
        "spec.config.maintenance.defragment",
        &config.defragment.clone().unwrap_or_default(),
    );
    Some(Work::Maintenance { compact: compact?, defragment })
}

fn check_snapshot(check: &mut Check, target_name: &str, config: &SnapshotConfig) -> Snapshot {
    let persistent_volume_claim = match &config.persistent_volume_claim {
        Some(claim) => {
            check_object_name(
                check,
                "spec.config.snapshot.persistentVolumeClaim",
                claim,
                "is empty: name a PersistentVolumeClaim in this namespace, or leave it out for \
                 <target name>-snapshots",
            );
            claim.clone()
        }
        None => format!("{target_name}-snapshots"),
    };
    check_file_name(check, "spec.config.snapshot.fileName", target_name, &config.file_name);
    let store = match &config.bucket {
        Some(bucket) => match check_bucket(bucket, "spec.config.snapshot.bucket") {
            Ok(bucket) => Store::Bucket(bucket),
            Err(errors) => {
                check.errors_at(errors);
                Store::Claim(persistent_volume_claim.clone())
            }
        },
        None => Store::Claim(persistent_volume_claim.clone()),
    };
    if config.bucket.is_some() && config.persistent_volume_claim.is_some() {
        check.error(
            "spec.config.snapshot",
            "sets both persistentVolumeClaim and bucket: keep the one the snapshot goes to",
        );
    }
    if config.retain < 1 {
        check.error(
            "spec.config.snapshot.retain",
            format!("{} is not positive: give 1 or more (the snapshot just taken counts)", config.retain),
        );
    }
    let (rules, errors) =
        retention_rules("spec.config.snapshot", config.retain, config.retention.as_ref(), &config.file_name);
    for (field, message) in errors {
        check.error(field, message);
    }
    let encoding =
        match check_encoding(config.compression, config.encryption.as_ref(), "spec.config.snapshot") {
            Ok(encoding) => encoding,
            Err(errors) => {
                check.errors_at(errors);
                StoreEncoding::default()
            }
        };
    Snapshot {
        persistent_volume_claim,
        store,
        verify: config.verify,
        file_name: config.file_name.clone(),
        retain: u32::try_from(config.retain).unwrap_or(0),
        rules,
        encoding,
    }
}

/// `retention` of a snapshot config or backup policy at `field` (`spec.config.snapshot`,
/// `spec.backup`), with its `retain` and file name template: the rules as the runner takes them,
/// and each mistake as (field, message). `retain` below 1 is the caller's to report.
pub fn retention_rules(
    field: &str,
    retain: i32,
    retention: Option<&RetentionPolicy>,
    template: &str,
) -> (RetentionRules, Vec<(String, String)>) {
    use groundskeeper_stores::duration;
    use groundskeeper_stores::etcd::retention::policy::{Policy, Tier, parse_size};
    let Some(retention) = retention else {
        return (RetentionRules::default(), Vec::new());
    };
    let mut errors = Vec::new();
    let at = format!("{field}.retention");
    let mut parsed = |name: String, text: &str| match duration::parse(text) {
        Ok(d) => Some(d),
        Err(why) => {
            errors.push((name, why));
            None
        }
    };
    let keep_within = retention.keep_within.as_deref().map(|t| parsed(format!("{at}.keepWithin"), t));
    let keep_deltas_for =
        retention.keep_deltas_for.as_deref().map(|t| parsed(format!("{at}.keepDeltasFor"), t));
    let tiers: Vec<Option<Tier>> = retention
        .tiers
        .iter()
        .enumerate()
        .map(|(n, tier)| {
            let every = parsed(format!("{at}.tiers[{n}].every"), &tier.every);
            let keep_for = parsed(format!("{at}.tiers[{n}].for"), &tier.keep_for);
            Some(Tier { every: every?, keep_for: keep_for? })
        })
        .collect();
    let max_total_bytes = retention
        .max_total_size
        .as_deref()
        .map(|text| parse_size(text).map_err(|why| errors.push((format!("{at}.maxTotalSize"), why))).ok());
    if !template.contains(groundskeeper_stores::etcd::retention::TIME) {
        errors.push((
            at.clone(),
            format!(
                "needs {{time}} in {field}.fileName {template:?}: without it every snapshot has the \
                 same name and there is no time to keep them by"
            ),
        ));
    }
    if errors.is_empty() {
        let policy = Policy {
            keep_last: u32::try_from(retain).unwrap_or(1).max(1),
            keep_within: keep_within.flatten(),
            tiers: tiers.into_iter().flatten().collect(),
            keep_deltas_for: keep_deltas_for.flatten(),
            max_total_bytes: max_total_bytes.flatten(),
        };
        if let Err((rule, why)) = policy.check() {
            errors.push((format!("{at}.{rule}"), why));
        }
    }
    let rules = RetentionRules {
        keep_within: retention.keep_within.clone(),
        tiers: retention.tiers.iter().map(|t| format!("{}:{}", t.every.trim(), t.keep_for.trim())).collect(),
        keep_deltas_for: retention.keep_deltas_for.clone(),
        max_total_bytes: retention.max_total_size.as_deref().and_then(|t| parse_size(t).ok()),
    };
    (rules, errors)
}

fn check_file_name(check: &mut Check, field: &str, target_name: &str, template: &str) {
    let field = field.to_owned();
    let field = field.as_str();
    let without_placeholders = SNAPSHOT_FILE_NAME_PLACEHOLDERS
        .iter()
        .fold(template.to_owned(), |text, placeholder| text.replace(placeholder, ""));
    if template.is_empty() {
        check.error(field, "is empty: leave it out for \"{cluster}-{time}.db\"");
    } else if template.len() > MAX_FILE_NAME_LEN {
        check.error(field, format!("is {} characters long; the most is {MAX_FILE_NAME_LEN}", template.len()));
    } else if template.contains('/') {
        check.error(
            field,
            format!(
                "{template:?} holds a '/': give a file name; the volume is chosen by persistentVolumeClaim"
            ),
        );
    } else if without_placeholders.contains(['{', '}']) {
        check.error(
            field,
            format!("{template:?} holds a brace that is not part of {{cluster}} or {{time}}, the only placeholders"),
        );
    } else if !target_name.is_empty()
        && let Err(why) = NameTemplate::parse(template, target_name)
    {
        // What the runner will check too: the name rendered for this target is a plain file name
        // with room for its temporary file's.
        check.error(field, why);
    }
}

/// The mistakes of a snapshot file name template written in another object (an EtcdCluster's
/// `spec.backup.fileName`), each as (field, message): the checks a task's template gets.
pub fn file_name_errors(field: &str, target_name: &str, template: &str) -> Vec<(String, String)> {
    let mut check = Check { object: String::new(), errors: Vec::new() };
    check_file_name(&mut check, field, target_name, template);
    check.errors.into_iter().map(|e| (e.field, e.message)).collect()
}

/// A store as [`check_store`] sees it, its mistakes reported; `None` when it has any.
fn checked_store(check: &mut Check, spec: &SnapshotStoreSpec, field: &str) -> Option<Store> {
    match check_store(spec, field) {
        Ok(store) => Some(store),
        Err(errors) => {
            check.errors_at(errors);
            None
        }
    }
}

/// A store's `compression` and `encryption` for what the task does with it, their mistakes
/// reported.
fn checked_encoding(
    check: &mut Check,
    spec: &SnapshotStoreSpec,
    field: &str,
    store_use: StoreUse,
) -> Option<StoreEncoding> {
    match check_encoding_for(spec.compression, spec.encryption.as_ref(), field, store_use) {
        Ok(encoding) => Some(encoding),
        Err(errors) => {
            check.errors_at(errors);
            None
        }
    }
}

/// A copy carries objects as they are: compression or encryption on its stores would promise
/// a conversion it does not do.
fn refuse_encoding(check: &mut Check, spec: &SnapshotStoreSpec, field: &str) {
    for (set, name) in
        [(spec.compression.is_some(), "compression"), (spec.encryption.is_some(), "encryption")]
    {
        if set {
            check.error(
                format!("{field}.{name}"),
                "a copy carries snapshots as they are (compressed or encrypted ones stay so, and need no \
                 key): remove it",
            );
        }
    }
}

/// A template field that may be left out (then the default).
fn file_name_or_default(
    check: &mut Check,
    field: &str,
    target_name: &str,
    template: Option<&String>,
) -> String {
    let template = template.cloned().unwrap_or_else(|| DEFAULT_SNAPSHOT_FILE_NAME.to_owned());
    check_file_name(check, field, target_name, &template);
    template
}

fn check_copy(check: &mut Check, target_name: &str, config: &CopyConfig) -> Option<Copy> {
    let from = checked_store(check, &config.from, "spec.config.copy.from");
    let to = checked_store(check, &config.to, "spec.config.copy.to");
    refuse_encoding(check, &config.from, "spec.config.copy.from");
    refuse_encoding(check, &config.to, "spec.config.copy.to");
    let file_name =
        file_name_or_default(check, "spec.config.copy.fileName", target_name, config.file_name.as_ref());
    check_name_list(
        check,
        "spec.config.copy.only",
        &config.only,
        MAX_FILE_NAME_LEN,
        "leave it empty to copy every snapshot",
    );
    let (from, to) = (from?, to?);
    if from == to {
        check.error("spec.config.copy.to", "is the same store as from: name another one");
    }
    Some(Copy { from, to, file_name, only: config.only.clone() })
}

/// A store field that may be left out: then the claim `<target name>-snapshots`.
fn store_or_default_claim(
    check: &mut Check,
    spec: Option<&SnapshotStoreSpec>,
    target_name: &str,
    field: &str,
    store_use: StoreUse,
) -> Option<(Store, StoreEncoding)> {
    let default_claim = SnapshotStoreSpec {
        persistent_volume_claim: Some(format!("{target_name}-snapshots")),
        ..SnapshotStoreSpec::default()
    };
    let spec = spec.unwrap_or(&default_claim);
    let store = checked_store(check, spec, field);
    let encoding = checked_encoding(check, spec, field, store_use);
    Some((store?, encoding?))
}

fn check_verify(check: &mut Check, target_name: &str, config: &VerifyConfig) -> Option<Verify> {
    let from = store_or_default_claim(
        check,
        config.from.as_ref(),
        target_name,
        "spec.config.verify.from",
        StoreUse::Read,
    );
    let file_name =
        file_name_or_default(check, "spec.config.verify.fileName", target_name, config.file_name.as_ref());
    check_object(check, "spec.config.verify.object", config.object.as_deref());
    if let Some(revision) = config.to_revision.filter(|r| *r < 1) {
        check.error(
            "spec.config.verify.toRevision",
            format!("{revision} is not a revision (they start at 1): give the revision to restore to, or leave it out"),
        );
    }
    let (from, encoding) = from?;
    Some(Verify { from, encoding, object: config.object.clone(), file_name, to_revision: config.to_revision })
}

fn check_delta(check: &mut Check, target_name: &str, config: &DeltaConfig) -> Option<Delta> {
    let to = store_or_default_claim(
        check,
        config.to.as_ref(),
        target_name,
        "spec.config.delta.to",
        StoreUse::Written,
    );
    let file_name =
        file_name_or_default(check, "spec.config.delta.fileName", target_name, config.file_name.as_ref());
    if let Some(start) = config.start_revision.filter(|r| *r < 0) {
        check.error(
            "spec.config.delta.startRevision",
            format!(
                "{start} is negative: give a revision (0 for the whole history etcd still has), or \
                 leave it out to start where the newest snapshot or delta ends"
            ),
        );
    }
    let (to, encoding) = to?;
    Some(Delta { to, encoding, file_name, start_revision: config.start_revision })
}

fn check_restore(check: &mut Check, config: Option<&RestoreConfig>) -> Option<Restore> {
    let Some(config) = config else {
        check.error(
            "spec.config.restore",
            "is missing: a Restore needs config.restore.from (where the snapshot is) and \
             config.restore.confirm: true",
        );
        return None;
    };
    if !config.confirm {
        check.error(
            "spec.config.restore.confirm",
            "is not true: a Restore replaces every member's data with the snapshot's (writes after \
             it are lost); set confirm: true to say you mean it",
        );
    }
    if config.quorum_lost_for_seconds < 0 {
        check.error("spec.config.restore.quorumLostForSeconds", "is negative: give 0 or more");
    }
    check_object(check, "spec.config.restore.object", config.object.as_deref());
    if let Some(revision) = config.to_revision.filter(|r| *r < 1) {
        check.error("spec.config.restore.toRevision", format!("{revision}: revisions start at 1"));
    }
    let to_time = config.to_time.as_deref().and_then(|text| match text.trim().parse::<jiff::Timestamp>() {
        Ok(time) => Some(time),
        Err(_) => {
            check.error(
                "spec.config.restore.toTime",
                format!("{text:?} is not a time: write it as RFC 3339, e.g. 2026-11-29T10:30:00Z"),
            );
            None
        }
    });
    if config.to_revision.is_some() && config.to_time.is_some() {
        check.error(
            "spec.config.restore",
            "sets both toRevision and toTime: give the one point in time to restore to",
        );
    }
    // A restore to a point in time saves the replayed member's snapshot into `from`: a store
    // written into then, else only read.
    let saves = config.to_revision.is_some() || config.to_time.is_some();
    let store_use = if saves { StoreUse::Written } else { StoreUse::Read };
    let encoding = checked_encoding(check, &config.from, "spec.config.restore.from", store_use);
    let from = checked_store(check, &config.from, "spec.config.restore.from")?;
    Some(Restore {
        from,
        encoding: encoding?,
        object: config.object.clone(),
        quorum_lost_for: SignedDuration::from_secs(config.quorum_lost_for_seconds.max(0)),
        override_quorum_check: config.override_quorum_check,
        to_revision: config.to_revision,
        to_time,
    })
}

/// A snapshot's name in a store: a plain name, no folder.
fn check_object(check: &mut Check, field: &str, object: Option<&str>) {
    match object {
        Some("") => check.error(field, "is empty: name a snapshot, or leave it out"),
        Some(name) if name.contains('/') || name == "." || name == ".." => {
            check.error(field, format!("{name:?} is not a plain name: give the snapshot's name in the store"))
        }
        Some(name) if name.len() > MAX_FILE_NAME_LEN => {
            check.error(field, format!("is {} characters long; the most is {MAX_FILE_NAME_LEN}", name.len()))
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests;
