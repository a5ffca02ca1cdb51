//! What every end-to-end scenario stands on: the in-memory API server acting with what
//! `manifests/` grants the controller, the controllers themselves (each one started,
//! stopped and restarted on its own, as a crash and a new pod would), and the one way to wait
//! for the system to get somewhere. The Job simulator, the etcd clusters and the Scylla agents
//! are each scenario's own: what a Job's container runs is what a scenario is about.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use groundskeeper_controller::Config;
use groundskeeper_controller::runtime::clock::Clock;
use groundskeeper_controller::runtime::context::Context;
use groundskeeper_controller::runtime::metrics::Metrics;
use groundskeeper_e2e::apiserver::rbac::{CONTROLLER_TOKEN, Grants};
use groundskeeper_e2e::apiserver::{ApiServer, ResourceId};
use tokio::task::JoinHandle;

/// An API server whose controller token holds `grants` (see
/// `groundskeeper_e2e::apiserver::rbac::controller_grants`), with the process's TLS provider
/// installed.
pub async fn api_server(grants: Grants) -> Arc<ApiServer> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    Arc::new(
        ApiServer::builder()
            .authorize(CONTROLLER_TOKEN, grants)
            .start()
            .await
            .expect("the API server starts"),
    )
}

/// One of the controllers of `groundskeeper-controller`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Part {
    /// The EtcdCluster controller (and the StorageCluster discovery, when configured).
    Etcd,
    /// The Scylla cleanup trigger.
    ScyllaCleanup,
    /// The task controller, for every kind of target.
    Tasks,
    /// The MaintenanceSchedule controller.
    Schedules,
}

/// The controllers a scenario runs, each acting with the controller's token. Dropping them stops
/// them.
pub struct Controllers {
    server: Arc<ApiServer>,
    config: Config,
    /// The clock every controller started here reads (the system's unless set).
    clock: Clock,
    /// Shared by every controller started here, across restarts: counts survive a restart.
    pub metrics: Arc<Metrics>,
    running: BTreeMap<Part, JoinHandle<()>>,
    /// Other tasks of the scenario stopped with the controllers.
    others: Vec<JoinHandle<()>>,
}

impl Controllers {
    /// Starts `parts` against `server` with `config` (the generic flags alone, or every store's).
    pub fn start(server: &Arc<ApiServer>, config: impl Into<Config>, parts: &[Part]) -> Controllers {
        let mut controllers = Controllers {
            server: server.clone(),
            config: config.into(),
            clock: Clock::system(),
            metrics: Arc::new(Metrics::new()),
            running: BTreeMap::new(),
            others: Vec::new(),
        };
        for part in parts {
            controllers.spawn(*part);
        }
        controllers
    }

    /// Starts `parts` as [`Controllers::start`] does, all reading `clock`.
    pub fn start_with_clock(
        server: &Arc<ApiServer>,
        config: impl Into<Config>,
        clock: Clock,
        parts: &[Part],
    ) -> Controllers {
        let mut controllers = Controllers::start(server, config, &[]);
        controllers.clock = clock;
        for part in parts {
            controllers.spawn(*part);
        }
        controllers
    }

    /// A new context, as a new controller process would have: a new client with the controller's
    /// token, the scenario's configuration, the shared metrics.
    pub fn context(&self) -> Arc<Context> {
        let client = self.server.client_with_token(CONTROLLER_TOKEN);
        Arc::new(self.config.clone().context(client, self.metrics.clone()).with_clock(self.clock.clone()))
    }

    /// Starts `part` with a new context, replacing (aborting) a running one.
    pub fn spawn(&mut self, part: Part) {
        let ctx = self.context();
        let handle = match part {
            Part::Etcd => tokio::spawn(groundskeeper_controller::etcd::controller::run(ctx)),
            Part::ScyllaCleanup => tokio::spawn(groundskeeper_controller::scylla::controller::run(ctx)),
            Part::Tasks => tokio::spawn(groundskeeper_controller::run_task_controller(ctx)),
            Part::Schedules => tokio::spawn(groundskeeper_controller::schedules::controller::run(ctx)),
        };
        if let Some(old) = self.running.insert(part, handle) {
            old.abort();
        }
    }

    /// Stops `part` wherever it is, as a crash would, and waits until it is gone.
    pub async fn stop(&mut self, part: Part) {
        if let Some(handle) = self.running.remove(&part) {
            handle.abort();
            let _ = handle.await;
        }
    }

    /// Stops `part` and starts it again with nothing carried over but what the API holds.
    pub async fn restart(&mut self, part: Part) {
        self.stop(part).await;
        self.spawn(part);
    }

    /// Stops `handle` with the controllers.
    pub fn own(&mut self, handle: JoinHandle<()>) {
        self.others.push(handle);
    }
}

impl Drop for Controllers {
    fn drop(&mut self) {
        for handle in self.running.values().chain(&self.others) {
            handle.abort();
        }
    }
}

/// The one bounded wait (see `groundskeeper_e2e::wait`).
pub use groundskeeper_e2e::wait::wait_until;

/// The names of the objects of `resource` in `namespace`.
pub fn names(server: &ApiServer, resource: &ResourceId, namespace: &str) -> BTreeSet<String> {
    server
        .list(resource, Some(namespace))
        .iter()
        .filter_map(|object| object["metadata"]["name"].as_str().map(str::to_owned))
        .collect()
}

/// Jobs.
pub fn jobs() -> ResourceId {
    ResourceId::new("batch", "v1", "jobs")
}

/// MaintenanceTasks.
pub fn maintenance_tasks() -> ResourceId {
    ResourceId::new("groundskeeper.dev", "v1alpha1", "maintenancetasks")
}

/// MaintenanceSchedules.
pub fn maintenance_schedules() -> ResourceId {
    ResourceId::new("groundskeeper.dev", "v1alpha1", "maintenanceschedules")
}

/// EtcdClusters.
pub fn etcd_clusters() -> ResourceId {
    ResourceId::new("groundskeeper.dev", "v1alpha1", "etcdclusters")
}
