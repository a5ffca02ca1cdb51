//! Bursts of ring changes, end to end against a modelled cluster: scylla-operator 1.22's
//! parallel bootstrap (3 → 9) and parallel decommission (9 → 6), then a scale-out (6 → 9) with a
//! scale-in (9 → 6) asked for while the first cleanups run. The stand-in plays scylla-operator:
//! the spec, the member Services (seeded as its version does), the status, and each node's
//! sidecar reporting the ring on its own poll (so members disagree for a while after each
//! change); where its version has one, its cleanup controller syncs on its own clock and each
//! burst starts at another offset from that clock.
//!
//! Counted per burst, against the model's ground truth (the nodes holding data of ranges they no
//! longer replicate once the burst ended): the node cleanups of each side, nodes cleaned twice
//! for the burst, and nodes left holding stale data once everything settled. Beside
//! scylla-operator's cleanup, Jobs of the two sides never run on one node at once (checked on
//! every Job change).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use groundskeeper_controller::Config;
use groundskeeper_controller::runtime::context::ControllerConfig;
use groundskeeper_controller::scylla::config::Config as ScyllaConfig;
use groundskeeper_controller::scylla::job::node_address;
use groundskeeper_e2e::apiserver::rbac::controller_grants;
use groundskeeper_e2e::apiserver::{ApiServer, PatchFormat, ResourceId};
use groundskeeper_e2e::kubelet::JobSimulator;
use groundskeeper_e2e::scylla_agent::cluster::{Cluster, Strategy};
use groundskeeper_e2e::scylla_agent::{AgentSpec, ScyllaAgent};
use groundskeeper_e2e::scylla_operator::{
    CleanupController, ScyllaOperator, Seeding, scylla_clusters, scylla_datacenters, services,
};
use groundskeeper_protocol::{keys, ring_hash};
use k8s_openapi::api::batch::v1::Job;
use serde_json::{Value, json};
use tokio::task::JoinHandle;

use crate::harness::{Controllers, Part, api_server, maintenance_tasks, wait_until};
use crate::scylla_cleanup::{
    JobWatch, check_jobs_untouched_and_never_overlapping, job_finished, node_label, run_cleanup,
};
use groundskeeper_api::scylla::coexistence::is_reserved_job_name;

const NAMESPACE: &str = "scylla";
const CLUSTER: &str = "burst";
const DATACENTER: &str = "dc1";
const AGENT_TOKEN: &str = "agent-token";
/// Guards against a scenario that never converges; not a performance bound.
const CONVERGENCE_GUARD: Duration = Duration::from_secs(120);
/// How often each node's sidecar stand-in reads the ring (scylla-operator's: 30 s, 5 s while a
/// node joins), each node at its own offset.
const SIDECAR_POLL: Duration = Duration::from_millis(300);
/// The trigger's quiet period here (10 s by default): longer than a sidecar poll, as the default
/// is longer than the 5 s poll while nodes join.
const QUIET_PERIOD: Duration = Duration::from_millis(800);
/// The trigger's schema watch here (20 s by default).
const SCHEMA_CHECK: Duration = Duration::from_millis(300);
/// scylla-operator's cleanup controller's own clock here.
const OPERATOR_SYNC: Duration = Duration::from_millis(400);
/// Between two nodes of a parallel bootstrap or decommission (Scylla's topology coordinator runs
/// them one after another, quickly).
const STEP: Duration = Duration::from_millis(40);
/// Nine node slots: (rack, ordinal, address).
const SLOTS: [Slot; 9] = [
    ("a", 0, "10.0.2.0"),
    ("b", 0, "10.0.2.1"),
    ("c", 0, "10.0.2.2"),
    ("a", 1, "10.0.2.3"),
    ("b", 1, "10.0.2.4"),
    ("c", 1, "10.0.2.5"),
    ("a", 2, "10.0.2.6"),
    ("b", 2, "10.0.2.7"),
    ("c", 2, "10.0.2.8"),
];

type Slot = (&'static str, i64, &'static str);

/// Who cleans the cluster after ring changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Setup {
    /// scylla-operator without a cleanup controller of its own (before 1.10): groundskeeper's
    /// trigger cleans, and new member Services carry no `last-cleaned-…`.
    Groundskeeper,
    /// scylla-operator's cleanup controller seeding as `Seeding` says; groundskeeper stands back.
    BesideScyllaOperator(Seeding),
}

/// What one burst did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct BurstCounts {
    name: &'static str,
    /// Nodes holding stale data when the ring stopped changing (ground truth).
    stale_nodes: BTreeSet<String>,
    /// Those, and nodes that held stale data between the burst's ring changes (its first ring
    /// may be quiet long enough for their cleanup to start).
    stale_during: BTreeSet<String>,
    /// Completed node cleanups of each side, per node.
    by_groundskeeper: BTreeMap<String, usize>,
    by_scylla_operator: BTreeMap<String, usize>,
    /// Nodes still holding stale data once everything settled.
    missed: BTreeSet<String>,
    /// From the last ring change (the model) to the first groundskeeper cleanup task created for
    /// it, when one was.
    detection: Option<Duration>,
}

impl BurstCounts {
    fn cleanups(&self) -> usize {
        self.by_groundskeeper.values().sum::<usize>() + self.by_scylla_operator.values().sum::<usize>()
    }

    /// Nodes whose cleanups this burst add up to more than one.
    fn doubles(&self) -> BTreeSet<String> {
        let mut per_node: BTreeMap<&String, usize> = BTreeMap::new();
        for (node, n) in self.by_groundskeeper.iter().chain(&self.by_scylla_operator) {
            *per_node.entry(node).or_default() += n;
        }
        per_node.into_iter().filter(|(_, n)| *n > 1).map(|(node, _)| node.clone()).collect()
    }

    fn cleaned(&self) -> BTreeSet<String> {
        self.by_groundskeeper.keys().chain(self.by_scylla_operator.keys()).cloned().collect()
    }

    /// Nodes cleaned that never held stale data during the burst.
    fn needless(&self) -> BTreeSet<String> {
        self.cleaned().difference(&self.stale_during).cloned().collect()
    }
}

struct Scenario {
    server: Arc<ApiServer>,
    model: Cluster,
    agents: BTreeMap<String, ScyllaAgent>,
    jobs: JobSimulator,
    _controllers: Controllers,
    operator: ScyllaOperator,
    operator_cleanup: Option<CleanupController>,
    /// Nodes in the ring now.
    members: Vec<Slot>,
    /// Every Job change, beside scylla-operator's cleanup.
    watch: Option<JobWatch>,
    background: Vec<JoinHandle<()>>,
}

impl Drop for Scenario {
    fn drop(&mut self) {
        for task in &self.background {
            task.abort();
        }
    }
}

fn member_name(rack: &str, ordinal: i64) -> String {
    format!("{CLUSTER}-{DATACENTER}-{rack}-{ordinal}")
}

impl Scenario {
    async fn start(setup: Setup) -> Scenario {
        let server = api_server(controller_grants()).await;
        let model = Cluster::new(7, 8);
        let mut agents = BTreeMap::new();
        let mut addresses = BTreeMap::new();
        for (rack, ordinal, address) in SLOTS {
            // A keyspace's cleanup lasts a few status polls: the scale-in of the third burst
            // comes while cleanups run.
            let spec = AgentSpec { token: AGENT_TOKEN.into(), polls_until_done: 10, ..AgentSpec::default() }
                .member_of(&model, address);
            let agent = ScyllaAgent::start(spec).await;
            let service = member_name(rack, ordinal);
            addresses.insert(node_address(NAMESPACE, &service), (agent.host(), agent.port()));
            agents.insert(service, agent);
        }
        let cleanup = match setup {
            Setup::Groundskeeper => None,
            Setup::BesideScyllaOperator(seeding) => Some(seeding),
        };
        let operator = ScyllaOperator {
            namespace: NAMESPACE.into(),
            cluster: CLUSTER.into(),
            datacenter: DATACENTER.into(),
            cleanup,
        };
        // Versions with a cleanup controller have the ScyllaDBDatacenter (and write their Job
        // controller's conditions there too); older ones do not.
        operator.create(&server, &[], cleanup.is_some(), AGENT_TOKEN).unwrap();
        let watch = cleanup.map(|_| JobWatch::start(&server));
        let agents_of_jobs = Arc::new(addresses.clone());
        let jobs = JobSimulator::builder(server.clone(), move |c| run_cleanup(c, agents_of_jobs.clone()))
            .group_by(|job| node_label(job).to_owned())
            .spawn();
        let operator_cleanup =
            operator.cleanup.map(|_| operator.run_cleanup_controller_every(server.clone(), OPERATOR_SYNC));
        let config = Config {
            controller: ControllerConfig {
                requeue_busy: Duration::from_secs(1),
                // The idle resync stays at its default (300 s): only the schema watch can notice
                // a replication change within a scenario.
                ..ControllerConfig::default()
            },
            scylla: ScyllaConfig {
                agent_endpoints: addresses,
                cleanup_ring_quiet_period: QUIET_PERIOD,
                cleanup_schema_check_interval: SCHEMA_CHECK,
                ..ScyllaConfig::default()
            },
            ..Config::default()
        };
        let controllers = Controllers::start(&server, config, &[Part::ScyllaCleanup, Part::Tasks]);
        let background = vec![tokio::spawn(sidecars(server.clone(), model.clone()))];
        Scenario {
            server,
            model,
            agents,
            jobs,
            _controllers: controllers,
            operator,
            operator_cleanup,
            members: Vec::new(),
            watch,
            background,
        }
    }

    fn racks(members: &[Slot]) -> Vec<(&'static str, i64)> {
        ["a", "b", "c"]
            .into_iter()
            .filter_map(|r| {
                let count = members.iter().filter(|(rack, ..)| *rack == r).count() as i64;
                (count > 0).then_some((r, count))
            })
            .collect()
    }

    /// The new spec, and scylla-operator's status while its StatefulSets roll.
    fn ask_for(&self, after: &[Slot]) {
        self.operator.take_spec(&self.server, &Self::racks(after)).unwrap();
        self.write_status(&Self::racks(&self.members), true);
    }

    /// scylla-operator's status at the newest generation: rolling, or settled.
    fn write_status(&self, racks: &[(&'static str, i64)], rolling: bool) {
        let ns = Some(NAMESPACE);
        let generation = self.server.get(&scylla_clusters(), ns, CLUSTER).unwrap()["metadata"]["generation"]
            .as_i64()
            .unwrap();
        let mut status = self.operator.cluster_status(generation, racks);
        if rolling {
            for condition in status["status"]["conditions"].as_array_mut().unwrap() {
                if condition["type"] == "StatefulSetControllerProgressing"
                    || condition["type"] == "Progressing"
                {
                    condition["status"] = "True".into();
                }
            }
        }
        self.server.patch(&scylla_clusters(), ns, CLUSTER, PatchFormat::Merge, &status, true).unwrap();
        if self.operator.cleanup.is_some() {
            // Its Job controller's conditions on the ScyllaDBDatacenter too, among the others there.
            let sdc = self.server.get(&scylla_datacenters(), ns, CLUSTER).unwrap();
            let mut conditions: Vec<Value> =
                sdc["status"]["conditions"].as_array().cloned().unwrap_or_default();
            conditions.retain(|c| !c["type"].as_str().unwrap_or_default().starts_with("JobController"));
            conditions.extend(
                status["status"]["conditions"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|c| c["type"].as_str().unwrap_or_default().starts_with("JobController"))
                    .cloned(),
            );
            let patch = json!({ "status": { "observedGeneration": generation, "conditions": conditions } });
            self.server.patch(&scylla_datacenters(), ns, CLUSTER, PatchFormat::Merge, &patch, true).unwrap();
        }
    }

    /// scylla-operator 1.22's parallel bootstrap: every new member Service at once (seeded as its
    /// version does), the nodes joining one right after another, then the status settling.
    async fn bootstrap(&mut self, slots: &[Slot]) {
        let after: Vec<Slot> = self.members.iter().chain(slots).copied().collect();
        self.ask_for(&after);
        let seed = (self.operator.cleanup == Some(Seeding::NeverCleanedUp)).then_some(keys::NEVER_CLEANED_UP);
        for &(rack, ordinal, address) in slots {
            let mut service = self.operator.member_service(rack, ordinal, "", seed);
            // No ring hash before the node has joined: its sidecar writes it then.
            service["metadata"]["annotations"].as_object_mut().unwrap().remove(keys::CURRENT_TOKEN_RING_HASH);
            service["spec"]["clusterIP"] = address.into();
            self.server.create(&services(), Some(NAMESPACE), service).unwrap();
        }
        for &(rack, ordinal, address) in slots {
            tokio::time::sleep(STEP).await;
            self.model.join(address, DATACENTER, rack).unwrap();
            if self.operator.cleanup == Some(Seeding::CurrentHash) {
                self.seeded_before_the_next_joins(&member_name(rack, ordinal)).await;
            }
        }
        self.members = after;
        tokio::time::sleep(STEP).await;
        self.write_status(&Self::racks(&self.members), false);
    }

    /// scylla-operator 1.10 – 1.21 seeds a node that joined with the first ring its sidecar
    /// reports, on the Service's own change, and bootstraps one node at a time, each longer than
    /// that: each node is seeded for a ring before the next one joins. Without that order (a node
    /// first reporting after the next joined) it takes as clean a node that handed ranges to the
    /// next, and nobody cleans it: the gap its `NeverCleanedUp` seeding closes
    /// (docs/scylla-cleanup.md). Its stand-in here seeds on its cleanup clock, so the next join
    /// waits for that.
    async fn seeded_before_the_next_joins(&self, service: &str) {
        let seeded = |s: &Scenario| {
            s.server.get(&services(), Some(NAMESPACE), service).is_some_and(|svc| {
                svc["metadata"]["annotations"][keys::LAST_CLEANED_UP_TOKEN_RING_HASH].is_string()
            })
        };
        wait_until(
            &format!("scylla-operator seeding {service}"),
            CONVERGENCE_GUARD,
            Duration::from_millis(10),
            || seeded(self),
            || self.diagnose(),
        )
        .await;
    }

    /// scylla-operator's parallel decommission: the nodes leave one right after another, their
    /// member Services deleted, then the status settles.
    async fn decommission(&mut self, slots: &[Slot]) {
        let after: Vec<Slot> = self.members.iter().filter(|m| !slots.contains(m)).copied().collect();
        self.ask_for(&after);
        for &(rack, ordinal, address) in slots {
            tokio::time::sleep(STEP).await;
            self.model.decommission(address).unwrap();
            self.server.delete(&services(), Some(NAMESPACE), &member_name(rack, ordinal)).unwrap();
        }
        self.members = after;
        tokio::time::sleep(STEP).await;
        self.write_status(&Self::racks(&self.members), false);
    }

    fn stale_nodes(&self) -> BTreeSet<String> {
        let by_address: BTreeMap<&str, String> =
            SLOTS.iter().map(|(rack, ordinal, address)| (*address, member_name(rack, *ordinal))).collect();
        self.model.stale().into_iter().map(|(address, _)| by_address[address.as_str()].clone()).collect()
    }

    /// Completed cleanups so far per node and side: Jobs that exited 0. The simulator groups
    /// Jobs by node; `cleanup-…` names are scylla-operator's alone.
    async fn completed(&self) -> (BTreeMap<String, usize>, BTreeMap<String, usize>) {
        let log = self.jobs.log_synced().await;
        let nodes: BTreeMap<&String, &String> = log.created.iter().map(|(job, node)| (job, node)).collect();
        let (mut ours, mut theirs) = (BTreeMap::new(), BTreeMap::new());
        for (job, _) in log.finished.iter().filter(|(_, code)| *code == 0) {
            let node = nodes.get(job).unwrap_or_else(|| panic!("Job {job} finished, never created"));
            let side = if is_reserved_job_name(job) { &mut theirs } else { &mut ours };
            *side.entry((*node).clone()).or_insert(0) += 1;
        }
        (ours, theirs)
    }

    fn unfinished_work(&self) -> bool {
        let tasks = self.server.list(&maintenance_tasks(), Some(NAMESPACE));
        let tasks_open =
            tasks.iter().any(|t| !matches!(t["status"]["state"].as_str(), Some("Completed" | "Failed")));
        let jobs_open =
            self.server.list(&ResourceId::of::<Job>(), Some(NAMESPACE)).iter().any(|j| !job_finished(j));
        tasks_open || jobs_open
    }

    /// Every member reports the model's ring, and every node is recorded clean for it.
    fn all_clean_for_the_ring(&self) -> bool {
        let ring: Vec<String> = self.model.ring().iter().map(i64::to_string).collect();
        let hash = ring_hash(&ring).unwrap();
        self.members.iter().all(|(rack, ordinal, _)| {
            let service = self.server.get(&services(), Some(NAMESPACE), &member_name(rack, *ordinal));
            let annotations = service.map(|s| s["metadata"]["annotations"].clone()).unwrap_or_default();
            annotations[keys::CURRENT_TOKEN_RING_HASH] == hash.as_str()
                && annotations[keys::LAST_CLEANED_UP_TOKEN_RING_HASH] == hash.as_str()
        })
    }

    /// What a scenario that does not converge shows: Jobs, tasks, each member's annotations.
    fn diagnose(&self) -> String {
        let tasks: Vec<(Value, Value)> = self
            .server
            .list(&maintenance_tasks(), Some(NAMESPACE))
            .iter()
            .map(|t| (t["metadata"]["name"].clone(), t["status"]["state"].clone()))
            .collect();
        let members: Vec<(String, Value)> = self
            .server
            .list(&services(), Some(NAMESPACE))
            .iter()
            .map(|s| {
                (
                    s["metadata"]["name"].as_str().unwrap_or_default().to_owned(),
                    s["metadata"]["annotations"].clone(),
                )
            })
            .collect();
        let sc = self.server.get(&scylla_clusters(), Some(NAMESPACE), CLUSTER).unwrap_or_default();
        format!(
            "jobs: {:#?}\ntasks: {tasks:?}\nmembers: {members:#?}\nstatus: {:#}\nstale: {:?}\nring: {}",
            self.jobs.log(),
            sc["status"],
            self.model.stale(),
            self.model.ring().len()
        )
    }

    /// Until every node is recorded clean for the ring, nothing is left to run, and that stays
    /// so past the trigger's quiet period and a sync of scylla-operator's.
    async fn settle(&self) {
        loop {
            wait_until(
                "every node clean for the ring and nothing left to run",
                CONVERGENCE_GUARD,
                Duration::from_millis(20),
                || self.all_clean_for_the_ring() && !self.unfinished_work(),
                || self.diagnose(),
            )
            .await;
            tokio::time::sleep(QUIET_PERIOD + OPERATOR_SYNC + Duration::from_millis(300)).await;
            if self.all_clean_for_the_ring() && !self.unfinished_work() {
                return;
            }
        }
    }

    /// Waits until scylla-operator's cleanup controller has just synced, then `offset` more:
    /// each burst meets its clock at another phase.
    async fn at_offset_from_operator_sync(&self, offset: Duration) {
        if let Some(operator) = &self.operator_cleanup {
            let syncs = operator.syncs();
            wait_until(
                "a sync of scylla-operator",
                CONVERGENCE_GUARD,
                Duration::from_millis(1),
                || operator.syncs() > syncs,
                String::new,
            )
            .await;
            tokio::time::sleep(offset).await;
        }
    }

    /// The time from `changed_at` to the first automatic task created after it.
    fn detection_since(&self, changed_at: jiff::Timestamp) -> Option<Duration> {
        self.server
            .list(&maintenance_tasks(), Some(NAMESPACE))
            .iter()
            .filter(|t| t["metadata"]["labels"][keys::ORIGIN_LABEL] == keys::ORIGIN_AUTOMATIC)
            .filter_map(|t| t["metadata"]["creationTimestamp"].as_str()?.parse::<jiff::Timestamp>().ok())
            .filter(|created| *created >= changed_at)
            .min()
            .map(|created| Duration::try_from(created.duration_since(changed_at)).unwrap_or_default())
    }

    /// Plays `burst`, which ends when the ring stops changing; returns the nodes that held stale
    /// data between its ring changes.
    async fn play(&mut self, burst: Burst) -> BTreeSet<String> {
        match burst {
            Burst::Bootstrap(slots) => self.bootstrap(slots).await,
            Burst::Decommission(slots) => self.decommission(slots).await,
            Burst::OutThenIn(slots) => {
                self.bootstrap(slots).await;
                let between = self.stale_nodes();
                let cleaning = |s: &Scenario| s.agents.values().any(|a| !a.running_cleanups().is_empty());
                wait_until(
                    "a cleanup running",
                    CONVERGENCE_GUARD,
                    Duration::from_millis(5),
                    || cleaning(self),
                    || format!("jobs: {:#?}", self.jobs.log()),
                )
                .await;
                self.decommission(slots).await;
                return between;
            }
        }
        BTreeSet::new()
    }

    /// Plays `burst` at `offset` from scylla-operator's sync, then settles and counts.
    async fn measure(&mut self, name: &'static str, offset: Duration, burst: Burst) -> BurstCounts {
        self.at_offset_from_operator_sync(offset).await;
        let (ours_before, theirs_before) = self.completed().await;
        let between = self.play(burst).await;
        let changed_at = jiff::Timestamp::now();
        let stale_nodes = self.stale_nodes();
        self.settle().await;
        let (ours, theirs) = self.completed().await;
        BurstCounts {
            name,
            stale_during: between.union(&stale_nodes).cloned().collect(),
            stale_nodes,
            by_groundskeeper: since(ours, &ours_before),
            by_scylla_operator: since(theirs, &theirs_before),
            missed: self.stale_nodes(),
            detection: self.detection_since(changed_at),
        }
    }
}

/// A burst of ring changes.
#[derive(Debug, Clone, Copy)]
enum Burst {
    Bootstrap(&'static [Slot]),
    Decommission(&'static [Slot]),
    /// These nodes join, and are decommissioned again while the first cleanups run.
    OutThenIn(&'static [Slot]),
}

/// The counts of `after` that `before` did not have yet.
fn since(after: BTreeMap<String, usize>, before: &BTreeMap<String, usize>) -> BTreeMap<String, usize> {
    after
        .into_iter()
        .map(|(node, n)| {
            let new = n - before.get(&node).copied().unwrap_or(0);
            (node, new)
        })
        .filter(|(_, n)| *n > 0)
        .collect()
}

/// Each member's sidecar: once its node has joined, it reads the model's ring every
/// [`SIDECAR_POLL`], at an offset of its own, and writes the hash when it changed.
async fn sidecars(server: Arc<ApiServer>, model: Cluster) {
    let mut next: BTreeMap<String, Instant> = BTreeMap::new();
    loop {
        let now = Instant::now();
        for service in server.list(&services(), Some(NAMESPACE)) {
            let name = service["metadata"]["name"].as_str().unwrap_or_default().to_owned();
            let address = service["spec"]["clusterIP"].as_str().unwrap_or_default().to_owned();
            let offset = SIDECAR_POLL.mul_f64((address.len() + name.len()) as f64 % 7.0 / 7.0);
            let due = *next.entry(name.clone()).or_insert(now + offset);
            if now < due || model.node_tokens(&address).is_empty() {
                continue;
            }
            next.insert(name.clone(), now + SIDECAR_POLL);
            let ring: Vec<String> = model.ring().iter().map(i64::to_string).collect();
            let hash = ring_hash(&ring).unwrap();
            if service["metadata"]["annotations"][keys::CURRENT_TOKEN_RING_HASH] != hash.as_str() {
                let patch = json!({ "metadata": { "annotations": { keys::CURRENT_TOKEN_RING_HASH: hash } } });
                let _ = server.patch(&services(), Some(NAMESPACE), &name, PatchFormat::Merge, &patch, false);
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The three bursts, each starting at another offset from scylla-operator's sync; with the
/// scenario, for the checks only it can make.
async fn bursts(setup: Setup) -> (Scenario, Vec<BurstCounts>) {
    let mut scenario = Scenario::start(setup).await;
    scenario.bootstrap(&SLOTS[..3]).await;
    scenario.model.create_keyspace("app", Strategy::nts(&[(DATACENTER, 3)]));
    scenario.settle().await;
    let quarter = OPERATOR_SYNC / 4;
    let plays = [
        ("parallel bootstrap 3 → 9", quarter, Burst::Bootstrap(&SLOTS[3..])),
        ("parallel decommission 9 → 6", quarter * 2, Burst::Decommission(&SLOTS[6..])),
        ("6 → 9, then 9 → 6 while cleanups run", quarter * 3, Burst::OutThenIn(&SLOTS[6..])),
    ];
    let mut counts = Vec::new();
    for (name, offset, burst) in plays {
        counts.push(scenario.measure(name, offset, burst).await);
    }
    (scenario, counts)
}

fn report(setup: Setup, counts: &[BurstCounts]) {
    eprintln!("{setup:?}");
    let line = |cells: [String; 9]| {
        eprintln!(
            "{:<38} | {:>12} | {:>12} | {:>13} | {:>15} | {:>8} | {:>7} | {:>6} | {:>9}",
            cells[0], cells[1], cells[2], cells[3], cells[4], cells[5], cells[6], cells[7], cells[8]
        )
    };
    line(
        [
            "burst",
            "stale at end",
            "stale during",
            "groundskeeper",
            "scylla-operator",
            "needless",
            "doubles",
            "missed",
            "detection",
        ]
        .map(str::to_owned),
    );
    for c in counts {
        line([
            c.name.to_owned(),
            c.stale_nodes.len().to_string(),
            c.stale_during.len().to_string(),
            c.by_groundskeeper.values().sum::<usize>().to_string(),
            c.by_scylla_operator.values().sum::<usize>().to_string(),
            c.needless().len().to_string(),
            c.doubles().len().to_string(),
            c.missed.len().to_string(),
            c.detection.map_or("-".to_owned(), |d| format!("{} ms", d.as_millis())),
        ]);
    }
}

/// Where groundskeeper cleans: one round per burst, exactly the nodes that held stale data (the
/// ownership rule reads what each node lost; the quiet ring keeps an intermediate ring from
/// being cleaned), each once, none missed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_ring_changes_is_cleaned_once_for_the_ring_it_ends_with() {
    let (_, counts) = bursts(Setup::Groundskeeper).await;
    report(Setup::Groundskeeper, &counts);
    let joined: BTreeSet<String> =
        SLOTS[3..].iter().map(|(rack, ordinal, _)| member_name(rack, *ordinal)).collect();
    for c in &counts {
        assert!(c.missed.is_empty(), "{}: {c:#?}", c.name);
        assert!(c.doubles().is_empty(), "{}: {c:#?}", c.name);
        assert!(c.stale_nodes.is_subset(&c.cleaned()), "{}: {c:#?}", c.name);
        // A needless cleanup only of a node that joined together with others (what it held
        // cannot be known: it is cleaned once).
        assert!(c.needless().is_subset(&joined), "{}: {c:#?}", c.name);
        assert!(c.by_scylla_operator.is_empty());
    }
    assert!(counts.iter().any(|c| c.cleanups() > 0), "the bursts left stale data to clean: {counts:#?}");
}

/// Beside scylla-operator's own cleanup (both seedings), its clock met at three phases: the
/// trigger stands back from the start, no node is cleaned by both sides for one burst, no Job
/// of one side runs beside the other's on a node, nothing is missed.
async fn beside_scylla_operator(seeding: Seeding) {
    let setup = Setup::BesideScyllaOperator(seeding);
    let (scenario, counts) = bursts(setup).await;
    report(setup, &counts);
    let pruned = scenario.operator_cleanup.as_ref().unwrap().log().deleted;
    // A node decommissioned while scylla-operator cleans it has its running Job pruned.
    check_jobs_untouched_and_never_overlapping(scenario.watch.as_ref().unwrap(), &pruned, true);
    for c in &counts {
        assert!(c.missed.is_empty(), "{}: {c:#?}", c.name);
        let both: Vec<&String> =
            c.by_groundskeeper.keys().filter(|n| c.by_scylla_operator.contains_key(*n)).collect();
        assert!(both.is_empty(), "{}: cleaned by both sides: {both:?}: {c:#?}", c.name);
        assert!(c.by_groundskeeper.is_empty(), "{}: the ring-hash trigger stands back: {c:#?}", c.name);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bursts_beside_scylla_operator_seeding_never_cleaned_up() {
    beside_scylla_operator(Seeding::NeverCleanedUp).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bursts_beside_scylla_operator_seeding_the_current_hash() {
    beside_scylla_operator(Seeding::CurrentHash).await;
}

/// A replication change moves no Kubernetes object: the trigger's schema watch notices it (the
/// idle resync is 300 s here, beyond the scenario's guard), and the nodes that lost replicas of
/// that keyspace, and only those, are cleaned once, for that keyspace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replication_change_is_noticed_by_the_schema_watch() {
    let mut scenario = Scenario::start(Setup::Groundskeeper).await;
    scenario.bootstrap(&SLOTS[..3]).await;
    scenario.model.create_keyspace("app", Strategy::nts(&[(DATACENTER, 3)]));
    scenario.settle().await;
    scenario.bootstrap(&SLOTS[3..6]).await;
    scenario.settle().await;
    assert!(
        scenario.stale_nodes().is_empty(),
        "after the scale-out: {:?}\n{}",
        scenario.model.stale(),
        scenario.diagnose()
    );
    let (before, _) = scenario.completed().await;
    let tasks_before = scenario.server.list(&maintenance_tasks(), Some(NAMESPACE)).len();
    let changed = Instant::now();
    scenario.model.alter_keyspace("app", Strategy::nts(&[(DATACENTER, 2)])).unwrap();
    let stale = scenario.stale_nodes();
    assert!(!stale.is_empty(), "lowering the RF leaves replicas behind");
    wait_until(
        "a cleanup task for the replication change",
        CONVERGENCE_GUARD,
        Duration::from_millis(10),
        || scenario.server.list(&maintenance_tasks(), Some(NAMESPACE)).len() > tasks_before,
        || scenario.diagnose(),
    )
    .await;
    let detection = changed.elapsed();
    scenario.settle().await;
    let (after, _) = scenario.completed().await;
    let cleaned: BTreeSet<String> = since(after, &before).into_keys().collect();
    eprintln!(
        "replication change noticed after {} ms (schema watch every {} ms); cleaned {cleaned:?}",
        detection.as_millis(),
        SCHEMA_CHECK.as_millis()
    );
    assert_eq!(cleaned, stale, "the nodes that lost replicas, and only those");
    assert!(
        scenario.stale_nodes().is_empty(),
        "left stale: {:?}\n{}",
        scenario.model.stale(),
        scenario.diagnose()
    );
    let newest = |t: &Value| {
        let created = t["metadata"]["creationTimestamp"].as_str().unwrap_or_default().to_owned();
        (created, t["metadata"]["name"].as_str().unwrap_or_default().to_owned())
    };
    let task =
        scenario.server.list(&maintenance_tasks(), Some(NAMESPACE)).into_iter().max_by_key(newest).unwrap();
    let per_node = task["spec"]["config"]["cleanup"]["perNode"].as_array().cloned().unwrap_or_default();
    assert!(
        per_node.iter().all(|n| n["keyspaces"] == json!(["app"])),
        "only the keyspace whose replication changed: {task:#}"
    );
}
