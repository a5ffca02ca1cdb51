//! The EtcdCluster spec, checked: typed durations and counts, with every mistake named by its
//! field so that the user can fix them all at once (the controller reports them in the
//! `DefragControllerDegraded` condition and creates no Job).

use jiff::SignedDuration;

use groundskeeper_api::etcd_cluster::{
    CompactionMode, EtcdBackupPolicy, EtcdClusterSpec, EtcdJobLimits, EtcdMaintenancePolicy, EtcdPartition,
    LeaderTurn, RevisionScheme,
};
use groundskeeper_api::maintenance_task::{DEFAULT_SNAPSHOT_FILE_NAME, DEFAULT_SNAPSHOT_RETAIN};
use groundskeeper_api::snapshot_store::{Store, StoreEncoding, check_encoding, check_store};
use groundskeeper_api::validate::file_name_errors;
use groundskeeper_protocol::operation::LeaderTurnPolicy;

/// Shortest `checkInterval`: observing more often only loads the members.
pub(crate) const MIN_CHECK_INTERVAL: SignedDuration = SignedDuration::from_secs(10);
pub(crate) use super::model::MIN_PERIODIC_RETENTION;

/// The spec, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    pub endpoints: Vec<String>,
    /// Name of the client TLS Secret.
    pub tls_secret: Option<String>,
    pub enabled: bool,
    pub check_interval: SignedDuration,
    pub min_defrag_bytes: i64,
    pub max_fragmented_percent: f64,
    pub allow_single_member: bool,
    /// `leaderTurn`, with `moveLeader: false` read as `Never`.
    pub leader_turn: LeaderTurnPolicy,
    pub leader_in_place_budget_seconds: Option<u64>,
    pub refuse_affected_versions: bool,
    pub quota_backend_bytes: Option<i64>,
    pub compaction: Option<Compaction>,
    pub job: EtcdJobLimits,
    /// Its place in a fleet of partitioned clusters, if any.
    pub partition: Option<EtcdPartition>,
    /// Backups on their own (`spec.backup`).
    pub backup: Option<Backup>,
}

/// `spec.backup`, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Backup {
    /// `None`: the claim `<cluster>-snapshots`.
    pub to: Option<Store>,
    /// How the policy's snapshots and deltas are written (`spec.backup.to`'s compression and
    /// encryption), which its tasks inherit.
    pub encoding: StoreEncoding,
    /// Template of the full snapshots' names.
    pub file_name: String,
    pub full_every: SignedDuration,
    /// `None`: full snapshots only (and compaction is not held back).
    pub delta_every: Option<SignedDuration>,
    /// Full snapshots kept.
    pub retain: i32,
    /// Retention beyond `retain` (checked).
    pub retention: Option<groundskeeper_api::maintenance_task::RetentionPolicy>,
    /// Failed tasks of the policy kept.
    pub failed_history_limit: usize,
}

impl Backup {
    /// The store, for the cluster named `cluster`.
    pub fn store(&self, cluster: &str) -> Store {
        self.to.clone().unwrap_or_else(|| Store::Claim(format!("{cluster}-snapshots")))
    }
}

/// Shortest `spec.backup.fullEvery`: a full snapshot reads the whole db.
pub(crate) const MIN_FULL_EVERY: SignedDuration = SignedDuration::from_mins(10);
/// Shortest `spec.backup.deltaEvery`: every delta is a Job (a pod started); etcd-backup-restore's
/// default is 20 s.
pub(crate) const MIN_DELTA_EVERY: SignedDuration = SignedDuration::from_secs(5);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compaction {
    /// Keep history for this long (etcd's `periodic` mode).
    Periodic { retention: SignedDuration },
    /// Keep this many revisions (etcd's `revision` mode).
    Revision { keep: i64 },
}

/// Everything wrong with a spec, each entry naming its field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", .0.join("; "))]
pub struct SpecErrors(pub Vec<String>);

impl Policy {
    pub fn from_spec(spec: &EtcdClusterSpec) -> Result<Self, SpecErrors> {
        let mut errors = Vec::new();
        let endpoints = check_endpoints(spec, &mut errors);
        let policy = &spec.policy;
        let check_interval = parse_duration(
            "spec.policy.checkInterval",
            &policy.check_interval,
            MIN_CHECK_INTERVAL,
            &mut errors,
        );
        if policy.min_defrag_bytes < 0 {
            errors.push(format!("spec.policy.minDefragBytes: {} is negative", policy.min_defrag_bytes));
        }
        if !(0.0..=100.0).contains(&policy.max_fragmented_percent) {
            errors.push(format!(
                "spec.policy.maxFragmentedPercent: {} is not between 0 and 100",
                policy.max_fragmented_percent
            ));
        }
        check_leader_turn(policy, &mut errors);
        let compaction =
            policy.compaction.as_ref().and_then(|c| check_compaction(c.mode, &c.retention, &mut errors));
        check_job_limits(&spec.job, &mut errors);
        let backup = spec.backup.as_ref().and_then(|b| check_backup(b, compaction.as_ref(), &mut errors));
        if let Some(partition) = &spec.partition {
            check_partition(partition, compaction.as_ref(), &mut errors);
        }
        if let Some(tls) = &spec.tls
            && tls.secret_name.is_empty()
        {
            errors.push("spec.tls.secretName: must not be empty".to_owned());
        }
        if !errors.is_empty() {
            return Err(SpecErrors(errors));
        }
        Ok(Self {
            endpoints,
            tls_secret: spec.tls.as_ref().map(|t| t.secret_name.clone()),
            enabled: policy.enabled,
            check_interval: check_interval.expect("no errors means the interval parsed"),
            min_defrag_bytes: policy.min_defrag_bytes,
            max_fragmented_percent: policy.max_fragmented_percent,
            allow_single_member: policy.allow_single_member,
            leader_turn: policy.leader_turn_policy(),
            leader_in_place_budget_seconds: policy.leader_in_place_budget_seconds,
            refuse_affected_versions: policy.refuse_affected_versions,
            quota_backend_bytes: policy.quota_backend_bytes,
            compaction,
            job: spec.job.clone(),
            partition: spec.partition.clone(),
            backup,
        })
    }
}

/// `moveLeader: false` with a `leaderTurn` other than `Never` says two things at once; the budget
/// and the quota must be positive (the schema says so too, but a spec may predate it).
fn check_leader_turn(policy: &EtcdMaintenancePolicy, errors: &mut Vec<String>) {
    if let Some(turn) = policy.leader_turn.filter(|t| !policy.move_leader && *t != LeaderTurn::Never) {
        errors.push(format!(
            "spec.policy.moveLeader: false contradicts spec.policy.leaderTurn: {turn:?}; remove moveLeader \
             (leaderTurn: Never is what it meant)"
        ));
    }
    if let Some(budget) = policy.leader_in_place_budget_seconds.filter(|b| !(1..=3600).contains(b)) {
        errors.push(format!("spec.policy.leaderInPlaceBudgetSeconds: {budget} is not between 1 and 3600"));
    }
    if let Some(quota) = policy.quota_backend_bytes.filter(|q| *q <= 0) {
        errors.push(format!("spec.policy.quotaBackendBytes: {quota} must be more than 0"));
    }
}

fn check_endpoints(spec: &EtcdClusterSpec, errors: &mut Vec<String>) -> Vec<String> {
    if spec.endpoints.is_empty() {
        errors.push("spec.endpoints: at least one client URL is needed".to_owned());
    }
    for (i, endpoint) in spec.endpoints.iter().enumerate() {
        let scheme_ok = match (endpoint.split_once("://"), &spec.tls) {
            (Some(("https", rest)), Some(_)) | (Some(("http", rest)), None) => !rest.is_empty(),
            (Some(("https", _)), None) => {
                errors.push(format!(
                    "spec.endpoints[{i}]: {endpoint:?} is https but spec.tls names no client certificate Secret"
                ));
                continue;
            }
            (Some(("http", _)), Some(_)) => {
                errors.push(format!(
                    "spec.endpoints[{i}]: {endpoint:?} is plain http but spec.tls is set; use https"
                ));
                continue;
            }
            _ => false,
        };
        if !scheme_ok {
            errors.push(format!(
                "spec.endpoints[{i}]: {endpoint:?} is not an http:// or https:// URL with a host"
            ));
        }
    }
    spec.endpoints.clone()
}

fn check_compaction(mode: CompactionMode, retention: &str, errors: &mut Vec<String>) -> Option<Compaction> {
    const FIELD: &str = "spec.policy.compaction.retention";
    match mode {
        CompactionMode::Periodic => parse_duration(FIELD, retention, MIN_PERIODIC_RETENTION, errors)
            .map(|retention| Compaction::Periodic { retention }),
        CompactionMode::Revision => match retention.trim().parse::<i64>() {
            Ok(keep) if keep > 0 => Some(Compaction::Revision { keep }),
            _ => {
                errors.push(format!(
                    "{FIELD}: {retention:?} is not a positive number of revisions (mode revision)"
                ));
                None
            }
        },
    }
}

fn check_backup(
    backup: &EtcdBackupPolicy,
    compaction: Option<&Compaction>,
    errors: &mut Vec<String>,
) -> Option<Backup> {
    let before = errors.len();
    let to = backup.to.as_ref().and_then(|to| match check_store(to, "spec.backup.to") {
        Ok(store) => Some(store),
        Err(found) => {
            errors.extend(found.into_iter().map(|(field, message)| format!("{field}: {message}")));
            None
        }
    });
    let encoding = match backup.to.as_ref() {
        Some(to) => match check_encoding(to.compression, to.encryption.as_ref(), "spec.backup.to") {
            Ok(encoding) => encoding,
            Err(found) => {
                errors.extend(found.into_iter().map(|(field, message)| format!("{field}: {message}")));
                StoreEncoding::default()
            }
        },
        None => StoreEncoding::default(),
    };
    let file_name = backup.file_name.clone().unwrap_or_else(|| DEFAULT_SNAPSHOT_FILE_NAME.to_owned());
    // The cluster's name is not known here: the name rendered for it is checked by the task.
    for (field, message) in file_name_errors("spec.backup.fileName", "", &file_name) {
        errors.push(format!("{field}: {message}"));
    }
    let full_every = parse_duration("spec.backup.fullEvery", &backup.full_every, MIN_FULL_EVERY, errors);
    let delta_every = backup
        .delta_every
        .as_ref()
        .map(|text| parse_duration("spec.backup.deltaEvery", text, MIN_DELTA_EVERY, errors));
    if let (Some(full), Some(Some(delta))) = (full_every, delta_every)
        && delta >= full
    {
        errors.push(format!(
            "spec.backup.deltaEvery: {delta:#} is not shorter than spec.backup.fullEvery {full:#}: \
             a full snapshot would come first every time; take deltas more often or leave deltaEvery out"
        ));
    }
    if let (Some(Some(delta)), Some(Compaction::Periodic { retention })) = (delta_every, compaction)
        && delta >= *retention
    {
        errors.push(format!(
            "spec.backup.deltaEvery: {delta:#} is not shorter than spec.policy.compaction.retention \
             {retention:#}: compaction would be held back at every turn (it never passes the newest \
             backup); take deltas more often or keep history longer"
        ));
    }
    if let Some(limit) = backup.failed_history_limit.filter(|l| !(0..=100).contains(l)) {
        errors.push(format!("spec.backup.failedHistoryLimit: {limit} is out of range: give 0 to 100"));
    }
    if let Some(retain) = backup.retain.filter(|r| *r < 1) {
        errors.push(format!(
            "spec.backup.retain: {retain} keeps no full snapshot, and every delta needs one: keep 1 or more"
        ));
    }
    let retain = backup.retain.unwrap_or(DEFAULT_SNAPSHOT_RETAIN);
    let (_, retention_errors) = groundskeeper_api::validate::retention_rules(
        "spec.backup",
        retain,
        backup.retention.as_ref(),
        &file_name,
    );
    errors.extend(retention_errors.into_iter().map(|(field, message)| format!("{field}: {message}")));
    if backup.delta_every.is_none() && backup.retention.as_ref().is_some_and(|r| r.keep_deltas_for.is_some())
    {
        errors.push(
            "spec.backup.retention.keepDeltasFor: set, but spec.backup.deltaEvery is not: no delta is \
             taken; give deltaEvery, or leave keepDeltasFor out"
                .into(),
        );
    }
    if errors.len() > before {
        return None;
    }
    Some(Backup {
        to,
        encoding,
        file_name,
        full_every: full_every?,
        delta_every: delta_every.flatten(),
        retain,
        retention: backup.retention.clone(),
        failed_history_limit: usize::try_from(
            backup
                .failed_history_limit
                .unwrap_or(groundskeeper_api::etcd_cluster::DEFAULT_FAILED_HISTORY_LIMIT),
        )
        .unwrap_or(0),
    })
}

fn check_partition(partition: &EtcdPartition, compaction: Option<&Compaction>, errors: &mut Vec<String>) {
    if partition.fleet.trim().is_empty() {
        errors.push(
            "spec.partition.fleet: must name the fleet (the clusters serving one Kubernetes API)".into(),
        );
    }
    if !(0..=63).contains(&partition.cluster_id) {
        errors.push(format!(
            "spec.partition.clusterId: {} is out of range: it must be from 0 to 63",
            partition.cluster_id
        ));
    }
    if let Some(ms) = partition.max_clock_skew_ms
        && ms < 1
    {
        errors.push(format!(
            "spec.partition.maxClockSkewMs: {ms} is not positive (absent: 5000, the clock \
             difference between clusters Arktos tolerates)"
        ));
    }
    if partition.revision_scheme == RevisionScheme::Partitioned
        && matches!(compaction, Some(Compaction::Revision { .. }))
    {
        errors.push(
            "spec.policy.compaction.mode: revision counts mean nothing for composite revisions \
             (spec.partition.revisionScheme Partitioned: a revision is a time, a cluster id and an \
             event); keep history by time with mode periodic"
                .into(),
        );
    }
}

fn check_job_limits(job: &EtcdJobLimits, errors: &mut Vec<String>) {
    if let Some(seconds) = job.active_deadline_seconds
        && seconds < 1
    {
        errors.push(format!("spec.job.activeDeadlineSeconds: {seconds} is not positive"));
    }
    if let Some(limit) = job.backoff_limit
        && limit < 0
    {
        errors.push(format!("spec.job.backoffLimit: {limit} is negative"));
    }
    if let Some(seconds) = job.ttl_seconds_after_finished
        && seconds < 0
    {
        errors.push(format!("spec.job.ttlSecondsAfterFinished: {seconds} is negative"));
    }
}

/// A duration as people write it (`10m`, `1h30m`, `1d`, or ISO 8601 `PT1H`), at least `min`: the
/// one parser of every duration groundskeeper reads.
fn parse_duration(
    field: &str,
    text: &str,
    min: SignedDuration,
    errors: &mut Vec<String>,
) -> Option<SignedDuration> {
    match groundskeeper_stores::duration::parse_at_least(text, min) {
        Ok(duration) => Some(duration),
        Err(why) => {
            errors.push(format!("{field}: {why}"));
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use groundskeeper_api::etcd_cluster::{EtcdClientTls, EtcdCompactionPolicy};

    fn spec() -> EtcdClusterSpec {
        serde_json::from_value(serde_json::json!({"endpoints": ["http://etcd-0:2379"]})).unwrap()
    }

    /// Every mistake of `spec.backup` named by its field, all at once.
    #[test]
    fn a_backup_policy_that_cannot_work_is_refused_naming_the_field() {
        let with = |backup: serde_json::Value, compaction: serde_json::Value| {
            let mut spec = spec();
            spec.backup = Some(serde_json::from_value(backup).unwrap());
            spec.policy.compaction = serde_json::from_value(compaction).unwrap();
            Policy::from_spec(&spec)
        };
        let periodic = serde_json::json!({"mode": "periodic", "retention": "10m"});
        let cases = [
            (
                serde_json::json!({"deltaEvery": "15m"}),
                periodic.clone(),
                "spec.backup.deltaEvery: 15m is not shorter than spec.policy.compaction.retention 10m",
            ),
            (
                serde_json::json!({"fullEvery": "1h", "deltaEvery": "2h"}),
                serde_json::Value::Null,
                "spec.backup.deltaEvery: 2h is not shorter than spec.backup.fullEvery 1h",
            ),
            (
                serde_json::json!({"deltaEvery": "1s"}),
                serde_json::Value::Null,
                "spec.backup.deltaEvery: \"1s\" is shorter than the minimum 5s",
            ),
            (
                serde_json::json!({"fullEvery": "often"}),
                serde_json::Value::Null,
                "spec.backup.fullEvery: \"often\" is not a duration",
            ),
            (
                serde_json::json!({"retain": 0}),
                serde_json::Value::Null,
                "spec.backup.retain: 0 keeps no full snapshot",
            ),
            (serde_json::json!({"to": {}}), serde_json::Value::Null, "spec.backup.to: names no store"),
            (
                serde_json::json!({"to": {"persistentVolumeClaim": "s", "encryption": {"secretName": "Key"}}}),
                serde_json::Value::Null,
                "spec.backup.to.encryption.secretName: \"Key\" is not a Secret's name",
            ),
            (
                serde_json::json!({"fileName": "a/{time}.db"}),
                serde_json::Value::Null,
                "spec.backup.fileName: ",
            ),
            (
                serde_json::json!({"failedHistoryLimit": -1}),
                serde_json::Value::Null,
                "spec.backup.failedHistoryLimit: -1 is out of range",
            ),
            (
                serde_json::json!({"retention": {"keepDeltasFor": "1d"}}),
                serde_json::Value::Null,
                "spec.backup.retention.keepDeltasFor: set, but spec.backup.deltaEvery is not",
            ),
            (
                serde_json::json!({"retention": {"tiers": [{"every": "1w", "for": "5d"}]}}),
                serde_json::Value::Null,
                "spec.backup.retention.tiers[0].for: 120h is not longer than every 168h",
            ),
            (
                serde_json::json!({"fileName": "etcd.db", "retention": {"maxTotalSize": "1Gi"}}),
                serde_json::Value::Null,
                "spec.backup.retention: needs {time} in spec.backup.fileName",
            ),
        ];
        for (backup, compaction, want) in cases {
            let errors = with(backup.clone(), compaction).expect_err(want).to_string();
            assert!(errors.contains(want), "{backup}: {errors}");
        }
        let fine = with(serde_json::json!({"deltaEvery": "30s"}), periodic).unwrap().backup.unwrap();
        assert_eq!(
            (fine.delta_every, fine.full_every, fine.retain),
            (Some(SignedDuration::from_secs(30)), SignedDuration::from_hours(6), 5)
        );
        let encoded = with(
            serde_json::json!({"to": {"persistentVolumeClaim": "s", "compression": "zstd",
                                      "encryption": {"secretName": "backup-key"}}}),
            serde_json::Value::Null,
        )
        .unwrap()
        .backup
        .unwrap();
        assert!(encoded.encoding.compress);
        assert_eq!(encoded.encoding.encryption.unwrap().key, "key");
        // Days, as the field's documentation shows them.
        let daily =
            with(serde_json::json!({"fullEvery": "1d"}), serde_json::Value::Null).unwrap().backup.unwrap();
        assert_eq!(daily.full_every, SignedDuration::from_hours(24));
    }

    #[test]
    fn a_partition_names_its_fleet_an_id_in_range_and_keeps_history_by_time() {
        let with =
            |partition: serde_json::Value, compaction: serde_json::Value| -> Result<Policy, SpecErrors> {
                let spec: EtcdClusterSpec = serde_json::from_value(serde_json::json!({
                    "endpoints": ["http://etcd-0:2379"],
                    "partition": partition,
                    "policy": {"compaction": compaction},
                }))
                .unwrap();
                Policy::from_spec(&spec)
            };
        let periodic = serde_json::json!({"mode": "periodic", "retention": "1h"});
        let revisions = serde_json::json!({"mode": "revision", "retention": "10000"});
        let ok = with(
            serde_json::json!({"fleet": "arktos", "clusterId": 63, "revisionScheme": "Partitioned"}),
            periodic.clone(),
        )
        .unwrap();
        assert_eq!(ok.partition.unwrap().cluster_id, 63);
        let sequential =
            with(serde_json::json!({"fleet": "arktos", "clusterId": 0}), revisions.clone()).unwrap();
        assert_eq!(sequential.partition.unwrap().revision_scheme, RevisionScheme::Sequential);
        let cases = [
            (
                serde_json::json!({"fleet": "arktos", "clusterId": 64}),
                periodic.clone(),
                "spec.partition.clusterId: 64 is out of range: it must be from 0 to 63",
            ),
            (
                serde_json::json!({"fleet": "arktos", "clusterId": -1}),
                periodic.clone(),
                "spec.partition.clusterId: -1 is out of range",
            ),
            (
                serde_json::json!({"fleet": "arktos", "clusterId": 1, "maxClockSkewMs": 0}),
                periodic.clone(),
                "spec.partition.maxClockSkewMs: 0 is not positive",
            ),
            (
                serde_json::json!({"fleet": " ", "clusterId": 1}),
                periodic.clone(),
                "spec.partition.fleet: must name the fleet",
            ),
            (
                serde_json::json!({"fleet": "arktos", "clusterId": 1, "revisionScheme": "Partitioned"}),
                revisions.clone(),
                "spec.policy.compaction.mode: revision counts mean nothing for composite revisions",
            ),
        ];
        for (partition, compaction, expected) in cases {
            let errors = with(partition.clone(), compaction).unwrap_err().to_string();
            assert!(errors.contains(expected), "{partition}: {errors}");
        }
    }

    #[test]
    fn defaults_are_valid() {
        let policy = Policy::from_spec(&spec()).unwrap();
        assert_eq!(policy.check_interval, SignedDuration::from_mins(10));
        assert!(!policy.allow_single_member, "a single member is not defragmented by default");
        assert_eq!(policy.compaction, None);
    }

    #[test]
    fn every_mistake_is_named_by_its_field() {
        type Edit = fn(&mut EtcdClusterSpec);
        let cases: &[(Edit, &str)] = &[
            (
                |s| s.policy.check_interval = "10x".into(),
                "spec.policy.checkInterval: \"10x\" is not a duration",
            ),
            (
                |s| s.policy.check_interval = "1s".into(),
                "spec.policy.checkInterval: \"1s\" is shorter than the minimum 10s",
            ),
            (
                |s| s.policy.max_fragmented_percent = 120.0,
                "spec.policy.maxFragmentedPercent: 120 is not between 0 and 100",
            ),
            (|s| s.policy.min_defrag_bytes = -1, "spec.policy.minDefragBytes: -1 is negative"),
            (|s| s.endpoints.clear(), "spec.endpoints: at least one client URL"),
            (
                |s| s.endpoints = vec!["etcd-0:2379".into()],
                "spec.endpoints[0]: \"etcd-0:2379\" is not an http:// or https:// URL",
            ),
            (
                |s| s.endpoints = vec!["https://etcd-0:2379".into()],
                "spec.endpoints[0]: \"https://etcd-0:2379\" is https but spec.tls names no",
            ),
            (
                |s| s.tls = Some(EtcdClientTls { secret_name: "etcd-client".into() }),
                "spec.endpoints[0]: \"http://etcd-0:2379\" is plain http but spec.tls is set",
            ),
            (
                |s| {
                    s.policy.compaction = Some(EtcdCompactionPolicy {
                        mode: CompactionMode::Periodic,
                        retention: "1000".into(),
                    })
                },
                "spec.policy.compaction.retention: \"1000\" is not a duration",
            ),
            (
                |s| {
                    s.policy.compaction =
                        Some(EtcdCompactionPolicy { mode: CompactionMode::Periodic, retention: "1m".into() })
                },
                "spec.policy.compaction.retention: \"1m\" is shorter than the minimum 10m",
            ),
            (
                |s| {
                    s.policy.compaction =
                        Some(EtcdCompactionPolicy { mode: CompactionMode::Revision, retention: "1h".into() })
                },
                "spec.policy.compaction.retention: \"1h\" is not a positive number of revisions",
            ),
            (|s| s.job.backoff_limit = Some(-1), "spec.job.backoffLimit: -1 is negative"),
        ];
        for (edit, wanted) in cases {
            let mut s = spec();
            edit(&mut s);
            let err = Policy::from_spec(&s).unwrap_err().to_string();
            assert!(err.contains(wanted), "wanted {wanted:?} in {err:?}");
        }
    }

    #[test]
    fn all_mistakes_are_reported_together() {
        let mut s = spec();
        s.policy.check_interval = "soon".into();
        s.policy.max_fragmented_percent = -1.0;
        assert_eq!(Policy::from_spec(&s).unwrap_err().0.len(), 2);
    }

    #[test]
    fn compaction_modes_parse_their_retention() {
        for (mode, retention, wanted) in [
            (
                CompactionMode::Periodic,
                "1h30m",
                Compaction::Periodic { retention: SignedDuration::from_mins(90) },
            ),
            (CompactionMode::Revision, "10000", Compaction::Revision { keep: 10000 }),
        ] {
            let mut s = spec();
            s.policy.compaction = Some(EtcdCompactionPolicy { mode, retention: retention.into() });
            assert_eq!(Policy::from_spec(&s).unwrap().compaction, Some(wanted));
        }
    }
}
