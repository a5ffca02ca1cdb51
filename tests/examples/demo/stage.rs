//! Everything the walk-through runs on, started in order and stopped by dropping it: the
//! in-memory Kubernetes API, a real 3-member etcd, the Scylla agent stand-ins, the timeline
//! printer, the simulated Job controller + kubelet, and groundskeeper's controllers.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use groundskeeper_e2e::apiserver::ApiServer;
use groundskeeper_e2e::apiserver::rbac::{CONTROLLER_TOKEN, controller_grants};
use groundskeeper_e2e::etcd_cluster::{ClusterOptions, EtcdCluster};
use groundskeeper_e2e::kubelet::JobSimulator;
use groundskeeper_e2e::scylla_agent::{AgentSpec, KeyspaceKind, ScyllaAgent};
use groundskeeper_e2e::scylla_operator::{Racks, ScyllaOperator, ring};
use tokio::task::JoinHandle;

use crate::jobs::{self, AgentAddresses};
use crate::say;
use crate::watch::{self, Timeline};

/// The token scylla-operator put in the agents' Secret (the Jobs mount it).
pub const AGENT_TOKEN: &str = "demo-agent-token";
/// How often the controller looks again while its Jobs run (the controller's default is 15 s;
/// shorter here so a finished Job is noticed within a second).
const REQUEUE_WHILE_BUSY: Duration = Duration::from_secs(1);
/// Polls of a cleanup task before it is done, and how long each `wait_task` lasts: a few
/// visible progress steps per keyspace.
const CLEANUP_POLLS: u32 = 3;
const CLEANUP_POLL_WAIT: Duration = Duration::from_millis(300);

pub struct Stage {
    pub server: Arc<ApiServer>,
    pub etcd: EtcdCluster,
    /// Member Service name → the agent stand-in playing that Scylla node.
    pub agents: BTreeMap<String, ScyllaAgent>,
    pub scylla: ScyllaOperator,
    timeline: Timeline,
    _jobs: JobSimulator,
    /// The controllers; aborted on drop.
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for Stage {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
        self.timeline.task.abort();
        // The fields go next: the API server, then etcd (members killed, data removed), the
        // agents and the Job simulator (with the Jobs it was running).
    }
}

impl Stage {
    /// Starts everything; `nodes` are the Scylla nodes to stand in for (the cluster after its
    /// scale-out).
    pub async fn start(etcd_binary: &Path, scylla: ScyllaOperator, nodes: &Racks) -> Result<Stage, String> {
        let server = Arc::new(
            ApiServer::builder()
                .authorize(CONTROLLER_TOKEN, controller_grants())
                .start()
                .await
                .map_err(|e| format!("the in-memory Kubernetes API did not start: {e}"))?,
        );
        let etcd_options = ClusterOptions { client_tls: true, ..ClusterOptions::default() };
        let etcd = EtcdCluster::start(etcd_binary, etcd_options).await?;
        let agents = start_agents(&scylla, nodes).await;
        let timeline = watch::spawn(&server);
        let addresses: AgentAddresses = Arc::new(
            agents.iter().map(|(name, agent)| (name.clone(), (agent.host(), agent.port()))).collect(),
        );
        let jobs = JobSimulator::builder(server.clone(), move |container| {
            jobs::run_container(container, addresses.clone())
        })
        .spawn();
        Ok(Stage { tasks: start_controllers(&server), server, etcd, agents, scylla, timeline, _jobs: jobs })
    }

    /// A step of the walk-through, once the timeline shows everything before it.
    pub async fn step(&self, text: impl std::fmt::Display) {
        self.timeline.catch_up(&self.server).await;
        say::step(text);
    }

    /// What runs, where, and what stands in for what.
    pub fn describe(&self) {
        let etcd = &self.etcd;
        say::line(format!(
            "Kubernetes API  in-memory stand-in on {} (groundskeeper-e2e's apiserver)",
            self.server.url()
        ));
        say::line(format!(
            "etcd            real etcd {}, {} members with client TLS on {} (data in {})",
            etcd.version,
            etcd.len(),
            etcd.endpoints_flag(),
            etcd.dir().display()
        ));
        say::line(format!(
            "Scylla nodes    {} Scylla Manager Agent stand-ins on 127.0.0.1 (HTTPS, bearer token, Scylla's REST API; no Scylla behind them)",
            self.agents.len()
        ));
        say::line(format!(
            "controller      groundskeeper's scylla-cleanup and etcd controllers, in this process, \
             with the ServiceAccount token of manifests/base/ and manifests/install/cluster-wide/ (every request authorized as RBAC would); \
             looking again every {}s while Jobs run (default 15s)",
            REQUEUE_WHILE_BUSY.as_secs()
        ));
        say::line(
            "Jobs            a simulated Job controller + kubelet: each Job's pod runs its container's \
             own args through groundskeeper-job, in this process; the result comes back through the \
             pod's termination message",
        );
    }
}

async fn start_agents(scylla: &ScyllaOperator, nodes: &Racks) -> BTreeMap<String, ScyllaAgent> {
    let mut agents = BTreeMap::new();
    for name in scylla.member_names(nodes) {
        let spec = AgentSpec {
            token: AGENT_TOKEN.to_owned(),
            ring: ring(nodes.iter().map(|(_, m)| m).sum()),
            ..AgentSpec::default()
        }
        .keyspace("app", KeyspaceKind::Vnodes)
        .keyspace("app_tablets", KeyspaceKind::Tablets)
        .polls_until_done(CLEANUP_POLLS)
        .wait_task_delay(CLEANUP_POLL_WAIT);
        agents.insert(name, ScyllaAgent::start(spec).await);
    }
    agents
}

/// groundskeeper's controllers as `groundskeeper-controller` runs them, without leader election
/// (one replica), acting with the ServiceAccount token that manifests/base/ and manifests/install/cluster-wide/ grant.
fn start_controllers(server: &ApiServer) -> Vec<JoinHandle<()>> {
    use groundskeeper_controller::runtime::context::ControllerConfig;
    use groundskeeper_controller::runtime::metrics::Metrics;
    use groundskeeper_controller::{Config, etcd, scylla};

    let config = Config {
        controller: ControllerConfig { requeue_busy: REQUEUE_WHILE_BUSY, ..ControllerConfig::default() },
        scylla: scylla::config::Config {
            // The demo's sidecars report a ring change at once: 2 s of quiet ring stand for the
            // default 10 s, which covers real sidecars' polls.
            cleanup_ring_quiet_period: Duration::from_secs(2),
            ..scylla::config::Config::default()
        },
        ..Config::default()
    };
    let client = server.client_with_token(CONTROLLER_TOKEN);
    let ctx = Arc::new(config.context(client, Arc::new(Metrics::new())));
    vec![
        tokio::spawn(scylla::controller::run(ctx.clone())),
        tokio::spawn(etcd::controller::run(ctx.clone())),
        tokio::spawn(groundskeeper_controller::run_task_controller(ctx)),
    ]
}
