//! groundskeeper's operator: observes Scylla and etcd clusters, decides what maintenance is due,
//! and runs it as Jobs of `groundskeeper-job`.
//!
//! Generic layers across, one folder per data store (see `docs/architecture.md`):
//!
//! * [`runtime`]: what every controller runs on (context, errors, leader election, metrics);
//! * [`jobs`]: a planned operation turned into a Job, and a finished Job read back;
//! * [`conditions`]: status conditions written beside other controllers';
//! * [`tasks`]: the MaintenanceTask queue, lifecycle and the one controller that creates Jobs;
//! * [`schedules`]: MaintenanceTasks made on a cron schedule, through the same queue;
//! * [`etcd`] and [`scylla`]: each data store's pipeline (observe → decide → apply), what a task
//!   means on its clusters (`task.rs`, `job.rs`) and what a finished Job records (`record.rs`).
//!
//! The direction is one way: a data store uses the generic layers, never the other way round, and
//! the two data stores never use each other. The one place that names both is this file, which
//! hands each data store's [`tasks::target::Target`] to the task controller.

pub mod conditions;
pub mod etcd;
pub mod jobs;
pub mod runtime;
pub mod schedules;
pub mod scylla;
pub mod tasks;

use std::sync::Arc;

use runtime::context::{Context, ControllerConfig};

/// The controller's configuration, read once at start-up: the generic flags and each data
/// store's, flattened into one command line. The generic part is the context's
/// ([`Context::config`]); each store's is reached through [`Context::store_config`]
/// ([`etcd::config::Config::of`], [`scylla::config::Config::of`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, clap::Args)]
pub struct Config {
    #[command(flatten)]
    pub controller: ControllerConfig,
    #[command(flatten)]
    pub etcd: etcd::config::Config,
    #[command(flatten)]
    pub scylla: scylla::config::Config,
}

impl Config {
    /// A context with this configuration, each data store's part set for its code to read.
    pub fn context(self, client: kube::Client, metrics: Arc<runtime::metrics::Metrics>) -> Context {
        Context::new(client, self.controller, metrics)
            .with_store_config(self.etcd)
            .with_store_config(self.scylla)
    }
}

/// The generic flags alone, each data store's at their defaults.
impl From<ControllerConfig> for Config {
    fn from(controller: ControllerConfig) -> Self {
        Config { controller, ..Config::default() }
    }
}

/// Checks the controller's flags, the generic ones and each data store's: a wrong value stops the
/// controller at start-up with the flag named.
pub fn check_config(config: &Config) -> runtime::error::Result<()> {
    config.controller.validate()?;
    config.etcd.validate(&config.controller.namespaces)?;
    config.scylla.validate()
}

/// Every kind of target the task controller runs tasks on.
pub fn task_targets() -> tasks::target::Targets {
    tasks::target::Targets::new([
        Arc::new(etcd::task::EtcdTarget) as Arc<dyn tasks::target::Target>,
        Arc::new(scylla::task::ScyllaTarget),
    ])
}

/// Runs the task controller for every kind of target until the process is told to stop.
pub async fn run_task_controller(ctx: Arc<Context>) {
    tasks::controller::run(ctx, task_targets()).await;
}

/// The controller's metrics with one made-up observation in every family, so that the
/// exposition holds a series of each: what the alert rules and dashboards may name, and what
/// `promtool check metrics` lints (their tests read it). Nothing here runs in the controller.
pub fn sample_metrics() -> runtime::metrics::Metrics {
    let metrics = runtime::metrics::Metrics::new();
    sample_counted(&metrics);
    sample_scraped(&metrics);
    metrics
}

/// One observation of each series counted as things happen.
fn sample_counted(metrics: &runtime::metrics::Metrics) {
    use groundskeeper_protocol::{JobResult, Outcome, Report, result::DefragReport};
    drop(metrics.reconcile_started("etcd"));
    metrics.reconcile_failed("etcd", &runtime::error::Error::Config("sample".into()));
    metrics.job_created("defrag");
    metrics.job_finished("defrag", "succeeded");
    metrics.set_leader(true);
    let member: groundskeeper_api::etcd_cluster::EtcdMemberStatus = serde_json::from_value(serde_json::json!(
        {"name": "etcd-0", "id": "1", "endpoint": "http://etcd-0:2379", "dbSize": 300, "fragmentationPercent": 50.0}
    ))
    .expect("a member status");
    let etcd = metrics.family::<etcd::metrics::EtcdMetrics>();
    etcd.observed("etcd", "main", std::slice::from_ref(&member), &[]);
    let defragmented =
        serde_json::from_value(serde_json::json!({"name": "etcd-0", "id": "1", "dbSizeBefore": 300,
        "dbSizeAfter": 100, "defragmented": true, "durationMs": 1500, "wasLeader": false, "reason": ""}))
        .expect("a member's defrag");
    let report = Report::Defrag(DefragReport { members: vec![defragmented], ..Default::default() });
    etcd.recorded("etcd", "main", &JobResult::new(report, Outcome::Succeeded, "sample".into(), 1));
    let partition = serde_json::from_value(serde_json::json!(
        {"clockSkewMs": 5, "busiestMillisecond": {"timestampMs": 1, "eventNumber": 3, "budgetUsed": "0.0%"}}
    ))
    .expect("a partition status");
    etcd.partition("etcd", "main", Some(&partition));
    let tasks = metrics.family::<tasks::metrics::TaskMetrics>();
    tasks.finished("Defragment", "Completed", 60.0);
    tasks.queued("etcd", "main", std::collections::BTreeMap::from([("Compact".to_owned(), 1)]));
    let schedules = metrics.family::<schedules::metrics::ScheduleMetrics>();
    schedules.created(1.0);
    schedules.skipped("ConcurrencyForbid");
    let hash = |c: char| format!("{}==", c.to_string().repeat(86));
    let member = groundskeeper_api::scylla::facts::MemberFacts {
        service: "basic-dc-rack-0".into(),
        uid: None,
        datacenter: None,
        rack: None,
        address: None,
        annotations: [
            (groundskeeper_protocol::keys::CURRENT_TOKEN_RING_HASH.to_owned(), hash('A')),
            (groundskeeper_protocol::keys::LAST_CLEANED_UP_TOKEN_RING_HASH.to_owned(), hash('B')),
        ]
        .into(),
    };
    let degraded = scylla::decide::ConditionPlan {
        type_: groundskeeper_api::scylla::facts::DEGRADED,
        status: false,
        reason: "AsExpected".into(),
        message: String::new(),
    };
    let now = jiff::Timestamp::now();
    metrics.family::<scylla::metrics::ScyllaMetrics>().observed("scylla", "basic", &degraded, &[member], now);
}

/// One object in each cache whose series are read when scraped.
fn sample_scraped(metrics: &runtime::metrics::Metrics) {
    use groundskeeper_api::etcd_cluster::EtcdCluster;
    use groundskeeper_api::maintenance_schedule::MaintenanceSchedule;
    use groundskeeper_api::maintenance_task::MaintenanceTask;
    let target = serde_json::json!({"kind": "EtcdCluster", "name": "main"});
    let metadata = |name: &str| serde_json::json!({"name": name, "namespace": "etcd"});
    let task: MaintenanceTask = sample(serde_json::json!({"metadata": metadata("defrag-1"),
        "spec": {"target": target, "type": "Defragment"},
        "status": {"state": "InProgress", "startedAt": "2026-01-01T00:00:00Z",
                   "plan": {"id": "0123456789ab", "summary": "sample", "expectedSeconds": 60}}}));
    let schedule: MaintenanceSchedule = sample(serde_json::json!({"metadata": metadata("nightly"),
        "spec": {"schedule": "30 2 * * *", "taskTemplate": {"spec": {"target": target, "type": "Snapshot"}}},
        "status": {"lastScheduleTime": "2026-01-02T02:30:00Z", "lastSuccessfulTime": "2026-01-01T02:31:00Z",
                   "lastSkipped": {"scheduledTime": "2026-01-02T02:30:00Z", "reason": "ConcurrencyForbid", "message": ""}}}));
    let cluster: EtcdCluster = sample(serde_json::json!({"metadata": metadata("main"),
        "spec": {"endpoints": ["http://etcd-0:2379"], "policy": {"quotaBackendBytes": 2147483648_i64},
                 "backup": {"fullEvery": "6h", "deltaEvery": "30s"}},
        "status": {"backup": {"store": "pvc/backups", "recoveryPointRevision": 10,
                              "recoveryPointTime": "2026-01-01T00:00:00Z"},
                   "conditions": [{"type": "DefragControllerDegraded", "status": "False", "reason": "AsExpected",
                                   "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
                   "snapshots": [{"store": "pvc/backups", "object": "a.db", "writtenAt": "2026-01-01T00:00:00Z"}],
                   "lastSnapshotProof": {"store": "pvc/backups", "object": "a.db", "proven": true, "message": "",
                                         "at": "2026-01-01T00:10:00Z"}}}));
    let cleanup: MaintenanceTask =
        sample(serde_json::json!({"metadata": {"name": "cleanup-1", "namespace": "scylla"},
        "spec": {"target": {"kind": "ScyllaCluster", "name": "basic"}, "type": "Cleanup"},
        "status": {"state": "InProgress", "startedAt": "2026-01-01T00:00:00Z"}}));
    watch_one(metrics, task);
    watch_one(metrics, cleanup);
    watch_one(metrics, schedule);
    watch_one(metrics, cluster);
}

fn sample<K: serde::de::DeserializeOwned>(object: serde_json::Value) -> K {
    serde_json::from_value(object).expect("a sample object of its kind")
}

/// A cache holding `object` alone, counted and scraped as a controller's would be.
fn watch_one<K: runtime::metrics::ScrapedKind>(metrics: &runtime::metrics::Metrics, object: K) {
    let (cache, mut writer) = kube::runtime::reflector::store();
    writer.apply_watcher_event(&kube::runtime::watcher::Event::Apply(object));
    metrics.watch_objects("sample", cache.clone());
    metrics.family::<runtime::metrics::Scraped<K>>().watch(cache);
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        config: Config,
    }

    #[test]
    fn flag_defaults_are_the_default_config() {
        let cli = Cli::try_parse_from(["groundskeeper-controller"]).unwrap();
        assert_eq!(cli.config, Config::default());
        check_config(&cli.config).unwrap();
    }

    #[test]
    fn flags_override_the_defaults() {
        let cli = Cli::try_parse_from([
            "groundskeeper-controller",
            "--job-image=registry.example/job:1",
            "--job-backoff-limit=0",
            "--requeue-busy=5",
            "--ring-observer-interval=60",
        ])
        .unwrap();
        assert_eq!(cli.config.controller.job_image, "registry.example/job:1");
        assert_eq!(cli.config.controller.job_limits.backoff_limit, 0);
        assert_eq!(cli.config.controller.requeue_busy, Duration::from_secs(5));
        assert_eq!(cli.config.scylla.ring_observer_interval, Duration::from_secs(60));
        assert!(Cli::try_parse_from(["x", "--requeue-idle=5m"]).is_err(), "whole seconds only");
    }

    #[test]
    fn the_two_discoveries_have_flags_of_their_own() {
        let cli = Cli::try_parse_from([
            "groundskeeper-controller",
            "--discover-etcd-operator-clusters",
            "--etcd-operator-compaction-retention=1h",
        ])
        .unwrap();
        let operator = &cli.config.etcd.etcd_operator_clusters;
        assert!(operator.enabled);
        assert_eq!(operator.compaction_retention.as_deref(), Some("1h"));
        assert_eq!(cli.config.etcd.storage_clusters, etcd::config::StorageClusterDiscovery::default());
        let cli = Cli::try_parse_from(["x", "--discover-storage-clusters"]).unwrap();
        assert!(cli.config.etcd.storage_clusters.enabled && !cli.config.etcd.etcd_operator_clusters.enabled);
    }

    #[tokio::test]
    async fn each_store_reads_its_own_flags_from_the_context() {
        let cli =
            Cli::try_parse_from(["x", "--fleet-max-concurrent=3", "--cleanup-ring-quiet-period=7"]).unwrap();
        let (service, _handle) =
            tower_test::mock::pair::<http::Request<kube::client::Body>, http::Response<kube::client::Body>>();
        let client = kube::Client::new(service, "default");
        let ctx = cli.config.context(client, Arc::new(runtime::metrics::Metrics::new()));
        assert_eq!(etcd::config::Config::of(&ctx).fleet_max_concurrent, 3);
        assert_eq!(scylla::config::Config::of(&ctx).cleanup_ring_quiet_period, Duration::from_secs(7));
    }
}
