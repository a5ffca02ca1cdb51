//! End to end, the ownership rule through the whole controller: the trigger reads ring views
//! through the agent stand-ins of a modelled cluster (Scylla's placement, and what each node
//! still holds data for), submits Cleanup tasks naming per node the keyspaces it lost ranges of,
//! the task controller runs their Jobs (the runner against the same stand-ins), and each success
//! is recorded. The measurement: 3 keyspaces (NetworkTopologyStrategy RF 3, one whose RF
//! goes 3 → 2, one on tablets) plus Scylla's SimpleStrategy system keyspaces, one datacenter
//! scaled 3 → 6 → 3 one node at a time, then the RF change. The same scenario runs twice: with
//! ownership known, and with nodes that do not offer `describe_ring` (the ring-hash rule
//! decides). Missed cleanups are the model's ground truth: (node, keyspace) pairs still holding
//! data of ranges the node no longer replicates once everything settled.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use groundskeeper_controller::Config;
use groundskeeper_controller::runtime::context::ControllerConfig;
use groundskeeper_controller::scylla::config::Config as ScyllaConfig;
use groundskeeper_controller::scylla::job::node_address;
use groundskeeper_e2e::apiserver::rbac::controller_grants;
use groundskeeper_e2e::apiserver::{ApiServer, Changes, PatchFormat};
use groundskeeper_e2e::kubelet::{Container, JobSimulator, Termination};
use groundskeeper_e2e::scylla_agent::cluster::{Cluster, Strategy};
use groundskeeper_e2e::scylla_agent::{AgentSpec, ScyllaAgent};
use groundskeeper_e2e::scylla_operator::{ScyllaOperator, scylla_clusters, services, settled_conditions};
use groundskeeper_job::cli::{Cli, Command};
use groundskeeper_protocol::{keys, ring_hash};
use serde_json::json;

use crate::harness::{Controllers, Part, api_server, maintenance_tasks, wait_until};

const NAMESPACE: &str = "scylla";
const CLUSTER: &str = "basic";
const DATACENTER: &str = "dc1";
const AGENT_TOKEN: &str = "agent-token";
/// Guards against a scenario that never converges; not a performance bound.
const CONVERGENCE_GUARD: Duration = Duration::from_secs(120);
/// The six nodes: (rack, ordinal, address). Ordinals 1 join in the scale-out and leave again.
const NODES: [Node; 6] = [
    ("a", 0, "10.0.1.0"),
    ("b", 0, "10.0.1.1"),
    ("c", 0, "10.0.1.2"),
    ("a", 1, "10.0.1.3"),
    ("b", 1, "10.0.1.4"),
    ("c", 1, "10.0.1.5"),
];

fn operator() -> ScyllaOperator {
    ScyllaOperator {
        namespace: NAMESPACE.into(),
        cluster: CLUSTER.into(),
        datacenter: DATACENTER.into(),
        cleanup: None,
    }
}

/// A cleanup Job's container: the runner in-process with the Job's arguments, pointed at the
/// node's agent stand-in.
async fn run_cleanup(container: Container, agents: Arc<BTreeMap<String, (String, u16)>>) -> Termination {
    let parsed = Cli::try_parse_args(container.args.clone()).expect("the Job's args parse");
    let Command::Cleanup(mut cleanup) = parsed.command else {
        panic!("{:?} is not a cleanup", container.args);
    };
    let (host, port) = agents[&cleanup.node_address].clone();
    let result_file = tempfile::NamedTempFile::new().unwrap();
    cleanup.node_address = host;
    cleanup.agent_port = port;
    cleanup.auth_token_file = container.files.required(&cleanup.auth_token_file);
    cleanup.result_file = result_file.path().to_path_buf();
    cleanup.poll_interval = Duration::from_millis(20);
    let result = groundskeeper_job::scylla::cleanup::run(&cleanup).await;
    Termination {
        exit_code: groundskeeper_job::run::exit_code(&result),
        message: result.to_termination_message(),
    }
}

type Node = (&'static str, i64, &'static str);

/// The racks of `members`, with their sizes.
fn racks_of(members: &[Node]) -> Vec<(&'static str, i64)> {
    ["a", "b", "c"]
        .into_iter()
        .filter_map(|r| {
            let count = members.iter().filter(|(rack, _, _)| *rack == r).count();
            (count > 0).then_some((r, count as i64))
        })
        .collect()
}

/// What one run of the scenario counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Counts {
    node_cleanups: usize,
    keyspace_cleanups: usize,
    missed: usize,
}

struct Scenario {
    server: Arc<ApiServer>,
    model: Cluster,
    agents: BTreeMap<String, ScyllaAgent>,
    jobs: JobSimulator,
    controllers: Controllers,
    /// Nodes in the ring now, as (rack, ordinal, address).
    members: Vec<Node>,
    /// The agents answer describe_ring.
    ownership: bool,
    /// Every message the cluster's CleanupControllerProgressing condition has had, in order: a
    /// message may last one trigger pass only, too short to be sure to catch by polling.
    progressing_messages: Arc<Mutex<Vec<String>>>,
}

impl Scenario {
    async fn start(ownership: bool) -> Scenario {
        let server = api_server(controller_grants()).await;
        let model = Cluster::new(42, 8);
        let mut agents = BTreeMap::new();
        let mut addresses = BTreeMap::new();
        for (rack, ordinal, address) in NODES {
            let mut spec =
                AgentSpec { token: AGENT_TOKEN.into(), ..AgentSpec::default() }.member_of(&model, address);
            if !ownership {
                spec = spec.without_describe_ring();
            }
            let agent = ScyllaAgent::start(spec).await;
            let service = operator().member_name(rack, ordinal);
            addresses.insert(node_address(NAMESPACE, &service), (agent.host(), agent.port()));
            agents.insert(service, agent);
        }
        let operator = operator();
        server.create_as(&operator.agent_token_secret(AGENT_TOKEN)).unwrap();
        let mut cluster = operator.cluster_object(&[]);
        if !ownership {
            // With seeds outside the cluster groundskeeper cannot tell a scale-in from other ring
            // changes, so its ring-hash rule cleans every node whose hash moved: scylla-operator's.
            cluster["spec"]["externalSeeds"] = json!(["10.0.9.9"]);
        }
        server.create(&scylla_clusters(), Some(NAMESPACE), cluster).unwrap();
        let agents_of_jobs = Arc::new(addresses.clone());
        let jobs =
            JobSimulator::builder(server.clone(), move |c| run_cleanup(c, agents_of_jobs.clone())).spawn();
        let progressing_messages = Arc::new(Mutex::new(Vec::new()));
        let recorder =
            tokio::spawn(record_progressing_messages(server.subscribe(), progressing_messages.clone()));
        let config = Config {
            controller: ControllerConfig {
                requeue_busy: Duration::from_secs(1),
                // A replication change moves no Kubernetes object: the idle resync is what sees it.
                requeue_idle: Duration::from_secs(1),
                ..ControllerConfig::default()
            },
            scylla: ScyllaConfig {
                agent_endpoints: addresses,
                // One ring change at a time here: no wait for the ring to be quiet.
                cleanup_ring_quiet_period: Duration::ZERO,
                ..ScyllaConfig::default()
            },
            ..Config::default()
        };
        let mut controllers = Controllers::start(&server, config, &[Part::ScyllaCleanup, Part::Tasks]);
        controllers.own(recorder);
        Scenario {
            server,
            model,
            agents,
            jobs,
            controllers,
            members: Vec::new(),
            ownership,
            progressing_messages,
        }
    }

    fn current_hash(&self) -> String {
        let ring: Vec<String> = self.model.ring().iter().map(i64::to_string).collect();
        ring_hash(&ring).unwrap()
    }

    /// scylla-operator takes a new spec for `racks` (a new generation it has not observed yet:
    /// no cleanup may start while the nodes join or leave).
    fn change_spec(&mut self, racks: &[(&'static str, i64)]) {
        let spec = json!({ "spec": operator().cluster_object(racks)["spec"] });
        self.server
            .patch(&scylla_clusters(), Some(NAMESPACE), CLUSTER, PatchFormat::Merge, &spec, false)
            .unwrap();
    }

    /// scylla-operator has observed the newest generation and the cluster is settled.
    fn settled_status(&self) {
        let ns = Some(NAMESPACE);
        let generation = self.server.get(&scylla_clusters(), ns, CLUSTER).unwrap()["metadata"]["generation"]
            .as_i64()
            .unwrap_or(1);
        let mut status = operator().cluster_status(generation, &racks_of(&self.members));
        status["status"]["conditions"] = settled_conditions(generation);
        self.server.patch(&scylla_clusters(), ns, CLUSTER, PatchFormat::Merge, &status, true).unwrap();
    }

    /// Every node's sidecar reports the model's ring.
    fn sidecars_report(&self) {
        let hash = self.current_hash();
        for (rack, ordinal, _) in &self.members {
            let sidecar = json!({ "metadata": { "annotations": { keys::CURRENT_TOKEN_RING_HASH: hash } } });
            let name = operator().member_name(rack, *ordinal);
            self.server
                .patch(&services(), Some(NAMESPACE), &name, PatchFormat::Merge, &sidecar, false)
                .unwrap();
        }
    }

    /// Nodes join one at a time under one spec change, each seen joined (seeded) before the
    /// next; the cluster settles after the last.
    async fn scale_out(&mut self, nodes: &[Node]) {
        let mut after = self.members.clone();
        after.extend_from_slice(nodes);
        self.change_spec(&racks_of(&after));
        for &(rack, ordinal, address) in nodes {
            self.model.join(address, DATACENTER, rack).unwrap();
            self.members.push((rack, ordinal, address));
            let mut service = operator().member_service(rack, ordinal, &self.current_hash(), None);
            service["spec"]["clusterIP"] = address.into();
            self.server.create(&services(), Some(NAMESPACE), service).unwrap();
            self.sidecars_report();
            let name = operator().member_name(rack, ordinal);
            self.wait_for(&format!("{name} seeded"), |s| {
                s.annotation(&name, keys::LAST_CLEANED_UP_TOKEN_RING_HASH).is_some()
            })
            .await;
        }
        self.settled_status();
        self.settle().await;
    }

    /// Nodes are decommissioned one at a time under one spec change, their member Services
    /// deleted; the cluster settles after the last.
    async fn scale_in(&mut self, nodes: &[Node]) {
        let after: Vec<Node> = self.members.iter().copied().filter(|m| !nodes.contains(m)).collect();
        self.change_spec(&racks_of(&after));
        for &(rack, ordinal, address) in nodes {
            let seen_before = self.progressing_messages.lock().unwrap().len();
            self.model.decommission(address).unwrap();
            self.members.retain(|m| m.2 != address);
            let name = operator().member_name(rack, ordinal);
            self.server.delete(&services(), Some(NAMESPACE), &name).unwrap();
            self.sidecars_report();
            if self.ownership {
                // Each remaining node only gained ranges: recorded clean, and the condition says so.
                // The sidecars report the new ring one Service at a time, so a pass may see only
                // some of them: the nodes may be named over several messages.
                self.wait_for("the condition naming every remaining node as having lost no range", |s| {
                    let named = named_lost_nothing(&s.progressing_messages.lock().unwrap()[seen_before..]);
                    s.members
                        .iter()
                        .all(|(rack, ordinal, _)| named.contains(&operator().member_name(rack, *ordinal)))
                })
                .await;
            } else {
                let before = self.reconciliations();
                self.wait_for("a trigger pass", |s| s.reconciliations() > before).await;
            }
        }
        self.settled_status();
        self.settle().await;
    }

    fn annotation(&self, service: &str, key: &str) -> Option<String> {
        let svc = self.server.get(&services(), Some(NAMESPACE), service)?;
        svc["metadata"]["annotations"][key].as_str().map(str::to_owned)
    }

    fn reconciliations(&self) -> u64 {
        self.controllers
            .metrics
            .encode()
            .lines()
            .filter(|l| l.contains("reconcile_duration_seconds_count") && l.contains("scylla-cleanup"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .sum()
    }

    fn unfinished_tasks(&self) -> usize {
        self.server
            .list(&maintenance_tasks(), Some(NAMESPACE))
            .iter()
            .filter(|t| !matches!(t["status"]["state"].as_str(), Some("Completed" | "Failed")))
            .count()
    }

    /// Every member recorded clean (cleaned or found clean) for the ring the model has now.
    fn clean_for_the_ring(&self) -> bool {
        let hash = self.current_hash();
        self.members.iter().all(|(rack, ordinal, _)| {
            let name = operator().member_name(rack, *ordinal);
            self.annotation(&name, keys::LAST_CLEANED_UP_TOKEN_RING_HASH).as_deref() == Some(hash.as_str())
        })
    }

    /// Until every member is recorded clean for the ring, then the trigger has passed twice more
    /// with no task left unfinished: then whatever it would submit for this ring and these
    /// replication settings, it has, and that has run. Passes alone cannot tell: under load the
    /// trigger's cache may show the cluster's settled status only some passes after it was
    /// written, and the cleanups a ring change calls for would then land in the next phase.
    async fn settle(&self) {
        self.wait_for("every member recorded clean for the ring", Scenario::clean_for_the_ring).await;
        loop {
            let before = self.reconciliations();
            self.wait_for("two more trigger passes", |s| s.reconciliations() >= before + 2).await;
            self.wait_for("no unfinished task", |s| s.unfinished_tasks() == 0).await;
            if self.reconciliations() >= before + 2 && self.unfinished_tasks() == 0 {
                let again = self.reconciliations();
                self.wait_for("one more trigger pass", |s| s.reconciliations() > again).await;
                if self.unfinished_tasks() == 0 {
                    return;
                }
            }
        }
    }

    async fn wait_for(&self, what: &str, mut done: impl FnMut(&Scenario) -> bool) {
        wait_until(
            what,
            CONVERGENCE_GUARD,
            Duration::from_millis(20),
            || done(self),
            || format!("jobs: {:#?}", self.jobs.log()),
        )
        .await;
    }

    async fn counts(&self) -> Counts {
        Counts {
            node_cleanups: self.jobs.log_synced().await.created.len(),
            keyspace_cleanups: self.agents.values().map(|a| a.cleaned_keyspaces().len()).sum(),
            missed: self.model.stale().len(),
        }
    }
}

/// The nodes `messages` name as recorded clean by the ownership rule for losing no range.
fn named_lost_nothing(messages: &[String]) -> BTreeSet<String> {
    const NAMES_FOLLOW: &str = "recorded clean for the new ring: ";
    messages
        .iter()
        .filter_map(|message| {
            let (_, rest) = message.split_once("ownership rule: ")?;
            let (_, names) = rest.split_once(NAMES_FOLLOW)?;
            Some(names.split(';').next().unwrap_or_default().to_owned())
        })
        .flat_map(|names| names.split(", ").map(str::to_owned).collect::<Vec<_>>())
        .collect()
}

/// Records each new message of the ScyllaCluster's CleanupControllerProgressing condition.
async fn record_progressing_messages(mut changes: Changes, messages: Arc<Mutex<Vec<String>>>) {
    loop {
        let change = match changes.next().await {
            Ok(Some(change)) => change,
            Ok(None) => return,
            Err(lagged) => panic!("{lagged}: a condition message may have been missed"),
        };
        if change.resource != scylla_clusters() || change.object["metadata"]["name"] != CLUSTER {
            continue;
        }
        let message = change.object["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["type"] == "CleanupControllerProgressing")
            .and_then(|c| c["message"].as_str());
        let mut seen = messages.lock().unwrap();
        if let Some(message) = message
            && seen.last().map(String::as_str) != Some(message)
        {
            seen.push(message.to_owned());
        }
    }
}

/// Runs the scenario; the counts after each phase, since the first three nodes settled.
async fn measure(ownership: bool) -> Vec<(&'static str, Counts)> {
    let mut scenario = Scenario::start(ownership).await;
    let mut phases = Vec::new();
    scenario.scale_out(&NODES[..3]).await;
    scenario.model.create_keyspace("app", Strategy::nts(&[(DATACENTER, 3)]));
    scenario.model.create_keyspace("shrinking", Strategy::nts(&[(DATACENTER, 3)]));
    scenario.model.create_keyspace("events", Strategy::tablets(&[(DATACENTER, 3)]));
    scenario.settle().await;
    let start = scenario.counts().await;
    let since_start = |c: Counts| Counts {
        node_cleanups: c.node_cleanups - start.node_cleanups,
        keyspace_cleanups: c.keyspace_cleanups - start.keyspace_cleanups,
        missed: c.missed,
    };
    scenario.scale_out(&NODES[3..]).await;
    phases.push(("3 → 6", since_start(scenario.counts().await)));
    let leaving: Vec<Node> = NODES[3..].iter().rev().copied().collect();
    scenario.scale_in(&leaving).await;
    phases.push(("6 → 3", since_start(scenario.counts().await)));
    scenario.model.alter_keyspace("shrinking", Strategy::nts(&[(DATACENTER, 2)])).unwrap();
    scenario.settle().await;
    phases.push(("RF 3 → 2", since_start(scenario.counts().await)));
    // Nodes cleaned only where they lost ranges had Scylla's own flag reset as well (perNode
    // markNodeClean → --mark-node-clean): what they cleaned is all the stale data they held.
    for (node, agent) in &scenario.agents {
        if !agent.cleaned_keyspaces().is_empty() {
            assert!(agent.marked_clean(), "{node}: cleaned {:?}, flag not reset", agent.cleaned_keyspaces());
        }
    }
    phases
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ownership_halves_the_scaling_cleanups_and_misses_nothing() {
    let ring_hash = measure(false).await;
    let ownership = measure(true).await;
    eprintln!("phase      | ring-hash rule: nodes keyspaces missed | ownership rule: nodes keyspaces missed");
    for (hash, own) in ring_hash.iter().zip(&ownership) {
        eprintln!(
            "{:<10} | {:>5} {:>5} {:>5} | {:>5} {:>5} {:>5}",
            hash.0,
            hash.1.node_cleanups,
            hash.1.keyspace_cleanups,
            hash.1.missed,
            own.1.node_cleanups,
            own.1.keyspace_cleanups,
            own.1.missed
        );
    }
    let (hash, own) = (&ring_hash[2].1, &ownership[2].1);
    assert!(ownership.iter().all(|(_, c)| c.missed == 0), "ownership misses nothing: {ownership:#?}");
    assert!(hash.missed > 0, "the ring-hash rule never sees the RF change: {ring_hash:#?}");
    // Through the scaling (3 → 6 → 3) at most half the ring-hash rule's keyspace cleanups: the
    // scale-in cleans nobody, and the condition says why.
    let (hash_scaling, own_scaling) = (&ring_hash[1].1, &ownership[1].1);
    assert!(
        own_scaling.keyspace_cleanups * 2 <= hash_scaling.keyspace_cleanups,
        "{ownership:#?} vs {ring_hash:#?}"
    );
    assert_eq!(own_scaling.node_cleanups, ownership[0].1.node_cleanups, "{ownership:#?}");
    // The RF change: cleanups the ring-hash rule never makes, on the nodes that lost replicas.
    assert!(own.node_cleanups > own_scaling.node_cleanups, "{ownership:#?}");
    assert!(own.keyspace_cleanups < hash.keyspace_cleanups, "{ownership:#?} vs {ring_hash:#?}");
}
