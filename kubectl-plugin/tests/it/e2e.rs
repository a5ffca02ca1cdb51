//! The `kubectl-groundskeeper` binary end to end, against the in-memory Kubernetes API through a
//! kubeconfig written for it, its output checked as text:
//! - with real etcd (3.4 and 3.5), the etcd trigger and the task controller, and the Job
//!   controller/kubelet stand-in running `groundskeeper-job` in-process: `task create --wait`
//!   while the task runs (exit code and progress lines), a Failed and a Rejected task (their exit
//!   codes), Ctrl-C while waiting (the task goes on), `task list`, `task describe`, `task cancel`
//!   of a running task (its Job goes), and
//!   `etcd status` (versions, raft terms, last maintenance);
//! - with scylla-operator's objects (the stand-in) and the task controller: `scylla
//!   cleanup-status` telling groundskeeper's Job from scylla-operator's;
//! - the errors: no such cluster or task, CRDs not installed, RBAC forbidden, no kubeconfig or
//!   context, a config the checks refuse.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use groundskeeper_api::maintenance_task::{MaintenanceTask, TaskState};
use groundskeeper_controller::runtime::context::{Context, ControllerConfig};
use groundskeeper_controller::runtime::metrics::Metrics;
use groundskeeper_e2e::apiserver::rbac::{CONTROLLER_TOKEN, Grants, controller_grants, load_manifests};
use groundskeeper_e2e::apiserver::{ApiServer, PatchFormat, ResourceId};
use groundskeeper_e2e::etcd_cluster::{self, ClusterOptions, EtcdVersion, etcd_or_skip};
use groundskeeper_e2e::kubelet::{Container, JobSimulator, Termination};
use groundskeeper_e2e::scylla_operator::{ScyllaOperator, scylla_clusters};
use groundskeeper_job::cli::{Cli, Command};
use groundskeeper_protocol::keys;
use k8s_openapi::api::batch::v1::Job;
use serde_json::json;
use tokio::sync::{oneshot, watch};

pub(crate) const NAMESPACE: &str = "etcd";
const CLUSTER: &str = "main";
/// Guards against a scenario that never settles; not a performance bound.
const GUARD: Duration = Duration::from_secs(120);

/// Bearer token of a person bound to the ClusterRole of `manifests/addons/kubectl-plugin-user/`.
const PLUGIN_USER_TOKEN: &str = "plugin-user-token";

/// What `manifests/addons/kubectl-plugin-user/` grants ServiceAccount `people/alice` once its ClusterRole is
/// bound to her in `namespaces` (RoleBindings, as the manifest's comment shows).
fn plugin_user(namespaces: &[&str]) -> Grants {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../manifests/addons/kubectl-plugin-user");
    let mut manifests = load_manifests(&dir).expect("manifests/addons/kubectl-plugin-user/");
    for namespace in namespaces {
        manifests.push(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "alice-groundskeeper", "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "groundskeeper-plugin-user"},
            "subjects": [{"kind": "ServiceAccount", "name": "alice", "namespace": "people"}],
        }));
    }
    Grants::for_service_account(&manifests, "people", "alice")
}

fn tasks() -> ResourceId {
    ResourceId::new("groundskeeper.dev", "v1alpha1", "maintenancetasks")
}

fn etcd_clusters() -> ResourceId {
    ResourceId::new("groundskeeper.dev", "v1alpha1", "etcdclusters")
}

/// What one run of the plugin did.
#[derive(Debug)]
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

/// Runs the plugin with `args`, its kubeconfig from `KUBECONFIG` (as kubectl users have it).
async fn plugin(kubeconfig: &Path, args: &[&str]) -> Run {
    plugin_with_env(args, &[("KUBECONFIG", kubeconfig.as_os_str())]).await
}

async fn plugin_with_env(args: &[&str], env: &[(&str, &std::ffi::OsStr)]) -> Run {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_kubectl-groundskeeper"));
    command
        .args(args)
        .env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for (key, value) in env {
        command.env(key, value);
    }
    let output = tokio::time::timeout(GUARD, command.output())
        .await
        .unwrap_or_else(|_| panic!("kubectl-groundskeeper {args:?} did not end"))
        .expect("the plugin runs");
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// Starts the plugin without waiting for it to end.
fn spawn_plugin(kubeconfig: &Path, args: &[&str]) -> tokio::process::Child {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_kubectl-groundskeeper"))
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .env_remove("KUBERNETES_SERVICE_HOST")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the plugin starts")
}

/// Waits for a running plugin to end by itself.
async fn finished(child: tokio::process::Child) -> Run {
    let output = tokio::time::timeout(GUARD, child.wait_with_output())
        .await
        .expect("the plugin ends")
        .expect("its output");
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// Sends SIGINT (Ctrl-C) to a running plugin and collects what it did.
async fn interrupt(child: tokio::process::Child) -> Run {
    let pid = child.id().expect("still running") as libc::pid_t;
    // SAFETY: kill(2) on the pid of a child this test started and has not reaped.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0);
    finished(child).await
}

fn kubeconfig(server: &ApiServer, dir: &Path, name: &str, token: Option<&str>) -> PathBuf {
    let path = dir.join(name);
    server.write_kubeconfig(&path, token, NAMESPACE).expect("the kubeconfig is written");
    path
}

async fn wait_for(what: &str, done: impl FnMut() -> bool) {
    groundskeeper_e2e::wait::wait_until(what, GUARD, Duration::from_millis(50), done, String::new).await;
}

pub(crate) fn task_of(server: &ApiServer, name: &str) -> Option<MaintenanceTask> {
    server.get_as(Some(NAMESPACE), name)
}

/// Runs an etcd Job's container once `gate` is open: `groundskeeper-job`'s subcommand entry
/// point with the Job's own arguments, the result file standing for the termination message. A Job
/// deleted while its container waits at the gate is killed ([`Container::wait_for_gate`]).
async fn run_etcd_job(container: Container, mut gate: watch::Receiver<bool>) -> Termination {
    if !container.wait_for_gate(&mut gate).await {
        return Termination::killed();
    }
    let args = container.args;
    let command = Cli::try_parse_args(args.clone())
        .unwrap_or_else(|e| panic!("{args:?} do not parse as groundskeeper-job's: {e}"))
        .command;
    let termination_log = tempfile::NamedTempFile::new().expect("a temp file");
    let result_file = termination_log.path().to_owned();
    let run: Box<dyn FnOnce() -> i32 + Send> = match command {
        Command::Defrag(mut args) => {
            args.result_file = result_file;
            Box::new(move || groundskeeper_job::etcd::defrag::main(args))
        }
        Command::Compact(mut args) => {
            args.result_file = result_file;
            Box::new(move || groundskeeper_job::etcd::compact::main(args))
        }
        _ => panic!("{args:?}: not a step of the tasks this scenario creates"),
    };
    let (exited, exit_code) = oneshot::channel();
    std::thread::spawn(move || {
        let _ = exited.send(run());
    });
    let exit_code = exit_code.await.expect("the runner ends with an exit code");
    Termination {
        exit_code,
        message: std::fs::read_to_string(termination_log.path()).expect("the result file"),
    }
}

/// A fragmented etcd cluster, its EtcdCluster (automatic maintenance off: only the plugin's
/// tasks run), both controllers, and the Job simulator behind a gate.
pub(crate) struct EtcdScenario {
    pub(crate) server: Arc<ApiServer>,
    _etcd: etcd_cluster::EtcdCluster,
    _jobs: JobSimulator,
    gate: watch::Sender<bool>,
    controllers: Vec<tokio::task::JoinHandle<()>>,
    pub(crate) dir: tempfile::TempDir,
    pub(crate) kubeconfig: PathBuf,
}

impl Drop for EtcdScenario {
    fn drop(&mut self) {
        for controller in &self.controllers {
            controller.abort();
        }
    }
}

impl EtcdScenario {
    pub(crate) async fn start(version: EtcdVersion) -> Option<EtcdScenario> {
        let binary = etcd_or_skip(version)?;
        let _ = rustls::crypto::ring::default_provider().install_default();
        let etcd = etcd_cluster::EtcdCluster::start(&binary, ClusterOptions::default())
            .await
            .expect("the etcd cluster starts");
        etcd.churn(4_000_000).await.expect("churn");
        // The plugin runs with what the plugin's ClusterRole grants, bound in this namespace.
        let server = Arc::new(
            ApiServer::builder()
                .authorize(CONTROLLER_TOKEN, controller_grants())
                .authorize(PLUGIN_USER_TOKEN, plugin_user(&[NAMESPACE]))
                .start()
                .await
                .expect("the API server starts"),
        );
        let cluster = json!({
            "apiVersion": "groundskeeper.dev/v1alpha1",
            "kind": "EtcdCluster",
            "metadata": {"name": CLUSTER, "namespace": NAMESPACE},
            "spec": {"endpoints": etcd.client_urls(), "policy": {"enabled": false, "checkInterval": "10s"}},
        });
        server.create(&etcd_clusters(), Some(NAMESPACE), cluster).expect("the EtcdCluster");
        let (gate, opened) = watch::channel(false);
        let jobs =
            JobSimulator::builder(server.clone(), move |container| run_etcd_job(container, opened.clone()))
                .spawn();
        let ctx = Arc::new(Context::new(
            server.client_with_token(CONTROLLER_TOKEN),
            ControllerConfig::default(),
            Arc::new(Metrics::new()),
        ));
        let controllers = vec![
            tokio::spawn(groundskeeper_controller::etcd::controller::run(ctx.clone())),
            tokio::spawn(groundskeeper_controller::run_task_controller(ctx)),
        ];
        let dir = tempfile::tempdir().expect("a temp dir");
        let kubeconfig = kubeconfig(&server, dir.path(), "config", Some(PLUGIN_USER_TOKEN));
        Some(EtcdScenario { server, _etcd: etcd, _jobs: jobs, gate, controllers, dir, kubeconfig })
    }

    async fn plugin(&self, args: &[&str]) -> Run {
        plugin(&self.kubeconfig, args).await
    }

    pub(crate) fn hold_jobs(&self, held: bool) {
        self.gate.send_replace(!held);
    }

    fn job_exists(&self, name: &str) -> bool {
        self.server.get(&ResourceId::of::<Job>(), Some(NAMESPACE), name).is_some()
    }
}

/// The plugin drives a cluster's maintenance from the terminal, as a person would.
async fn the_plugin_drives_an_etcd_clusters_maintenance(version: EtcdVersion) {
    let Some(scenario) = EtcdScenario::start(version).await else {
        return;
    };
    wait_for("the members observed", || {
        scenario
            .server
            .get_as::<groundskeeper_api::EtcdCluster>(Some(NAMESPACE), CLUSTER)
            .and_then(|c| c.status)
            .is_some_and(|s| s.members.len() == 3)
    })
    .await;

    // A defragmentation, followed to its end: progress as plain lines (stdout is a pipe).
    scenario.hold_jobs(false);
    let run = scenario
        .plugin(&["task", "create", "defragment", "--target", CLUSTER, "--name", "defrag-now", "--wait"])
        .await;
    assert_eq!(run.code, 0, "{run:?}");
    let out = &run.stdout;
    assert!(
        out.starts_with("maintenancetask.groundskeeper.dev/defrag-now created; waiting for it to end"),
        "{out}"
    );
    assert!(out.contains(" task defrag-now: InProgress\n"), "{out}");
    assert_eq!(out.matches(": Succeeded").count(), 3, "one line per member, once: {out}");
    assert!(
        out.trim_end()
            .lines()
            .last()
            .is_some_and(|l| l.starts_with("task defrag-now Completed: defragmented 3 member(s),")),
        "{out}"
    );

    // A compaction to a revision in the future fails in its Job: exit code 3 and the reason.
    let run = scenario
        .plugin(&[
            "task",
            "create",
            "compact",
            "--target",
            CLUSTER,
            "--name",
            "too-far",
            "--config",
            "revision=999999999",
            "--wait",
        ])
        .await;
    assert_eq!(run.code, 3, "{run:?}");
    assert!(run.stdout.contains("task too-far Failed: JobFailed: step 1 (Job too-far-0) failed"), "{run:?}");

    // With Jobs held, a running task, a duplicate of it (Rejected: exit code 4), and one queued.
    scenario.hold_jobs(true);
    let run = scenario.plugin(&["task", "create", "defragment", "--target", CLUSTER, "--name", "held"]).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout
            .starts_with("maintenancetask.groundskeeper.dev/held created (Defragment on EtcdCluster/main)"),
        "{run:?}"
    );
    wait_for("its Job created", || scenario.job_exists("held-0")).await;
    // Someone else follows the running task (until it is cancelled below).
    let follower = spawn_plugin(&scenario.kubeconfig, &["task", "wait", "held"]);
    // Waiting on a queued task, then Ctrl-C: the task stays, and the plugin says how to follow it.
    let waiting = spawn_plugin(
        &scenario.kubeconfig,
        &[
            "task",
            "create",
            "compact",
            "--target",
            CLUSTER,
            "--name",
            "queued",
            "--config",
            "retainRevisions=10",
            "--wait",
        ],
    );
    wait_for("the queued task seen by the controller", || {
        task_of(&scenario.server, "queued").and_then(|t| t.status).and_then(|s| s.state)
            == Some(TaskState::Pending)
    })
    .await;
    // Give the watch time to deliver the Pending state before the interrupt.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let run = interrupt(waiting).await;
    assert_eq!(run.code, 130, "{run:?}");
    assert!(run.stdout.contains(" task queued: waiting: "), "{run:?}");
    assert!(
        run.stdout.contains("stopped waiting; task queued goes on.\n  follow it:  kubectl groundskeeper task wait -n etcd queued\n  see it:     kubectl groundskeeper task describe -n etcd queued\n  cancel it:  kubectl groundskeeper task cancel -n etcd queued\n"),
        "{run:?}"
    );
    assert!(task_of(&scenario.server, "queued").is_some(), "the task goes on");
    let run = scenario
        .plugin(&["task", "create", "defragment", "--target", CLUSTER, "--name", "again", "--wait"])
        .await;
    assert_eq!(run.code, 4, "{run:?}");
    assert!(run.stdout.contains("task again Rejected: Duplicate:"), "{run:?}");

    let run = scenario.plugin(&["task", "list"]).await;
    assert_eq!(run.code, 0, "{run:?}");
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert!(
        lines[0].starts_with("NAME ") && lines[0].contains("QUEUE") && lines[0].ends_with("AGE"),
        "{lines:?}"
    );
    let row = |name: &str| {
        lines
            .iter()
            .find(|l| l.starts_with(&format!("{name} ")))
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .unwrap_or_else(|| panic!("no row {name} in {lines:?}"))
    };
    assert_eq!(row("held")[1..5], ["Defragment", "EtcdCluster/main", "InProgress", "running"]);
    assert_eq!(row("queued")[1..5], ["Compact", "EtcdCluster/main", "Pending", "1"]);
    assert_eq!(row("defrag-now")[3..6], ["Completed", "-", "3/3"]);
    assert_eq!(row("defrag-now")[6], "manual");
    let position = |name: &str| lines.iter().position(|l| l.starts_with(&format!("{name} "))).unwrap();
    assert!(
        position("held") < position("queued") && position("queued") < position("defrag-now"),
        "queue order: {lines:?}"
    );

    let run = scenario.plugin(&["task", "describe", "defrag-now"]).await;
    assert_eq!(run.code, 0, "{run:?}");
    let out = &run.stdout;
    for wanted in [
        "Name:      defrag-now\n",
        "State:     Completed (3/3 done)\n",
        "Timeline:\n",
        "   created\n",
        "   started\n",
        "   Completed\n",
        "Errors:\n  none\n",
    ] {
        assert!(out.contains(wanted), "missing {wanted:?} in\n{out}");
    }
    assert_eq!(out.matches("   Succeeded   defrag-now-0   ").count(), 3, "{out}");
    assert!(out.contains(" MiB ("), "sizes in MiB beside bytes: {out}");
    let run = scenario.plugin(&["task", "describe", "defrag-now", "-o", "yaml"]).await;
    assert_eq!(run.code, 0, "{run:?}");
    let printed: MaintenanceTask = serde_saphyr::from_str(&run.stdout).expect("the task as YAML");
    assert_eq!(printed.status.and_then(|s| s.progress).as_deref(), Some("3/3"));
    // Across namespaces takes more than the namespace's binding: a cluster admin's kubeconfig.
    let admin = kubeconfig(&scenario.server, scenario.dir.path(), "admin", None);
    let run = plugin(&admin, &["task", "list", "-A"]).await;
    assert!(run.stdout.starts_with("NAMESPACE   NAME "), "{run:?}");
    assert!(run.stdout.contains("\netcd        defrag-now   "), "{run:?}");
    let run = scenario.plugin(&["task", "describe", "too-far"]).await;
    assert!(run.stdout.contains("JobFailed"), "{run:?}");

    let run = scenario.plugin(&["etcd", "status", CLUSTER]).await;
    assert_eq!(run.code, 0, "{run:?}");
    let out = &run.stdout;
    for wanted in [
        "EtcdCluster etcd/main\n",
        "  Members:      3 (3 healthy)\n",
        "RAFT TERM",
        "  Last:         Failed ",
        ", task too-far: ",
        "  Active task:  held\n",
        "Tasks:\n",
        "  held     Defragment   EtcdCluster/main   InProgress   running",
    ] {
        assert!(out.contains(wanted), "missing {wanted:?} in\n{out}");
    }
    let members: Vec<&str> =
        out.lines().filter(|l| l.contains("http://127.0.0.1") && !l.contains("Endpoints:")).collect();
    assert_eq!(members.len(), 3, "{out}");
    assert_eq!(members.iter().filter(|l| l.contains(" leader ")).count(), 1, "{out}");
    for member in &members {
        let cells: Vec<&str> = member.split_whitespace().collect();
        assert!(
            cells[5].starts_with("3.4.") || cells[5].starts_with("3.5."),
            "an etcd version in {member:?}"
        );
        let term: i64 = cells[6].parse().unwrap_or_else(|_| panic!("a raft term in {member:?}"));
        assert!(term >= 1, "{member}");
    }

    // Cancelling the running task deletes it and its Job; the queued one runs next.
    let run = scenario.plugin(&["task", "cancel", "held"]).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout.starts_with("task held cancelled: it was InProgress; deleted with its Job(s) held-0"),
        "{run:?}"
    );
    wait_for("its Job deleted with it", || !scenario.job_exists("held-0")).await;
    assert!(task_of(&scenario.server, "held").is_none());
    let run = finished(follower).await;
    assert_eq!(run.code, 5, "who waited on it is told: {run:?}");
    assert!(
        run.stdout
            .ends_with("task held was deleted before it ended (cancelled, or its namespace went away)\n"),
        "{run:?}"
    );
    let run = scenario.plugin(&["task", "cancel", "defrag-now"]).await;
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("task defrag-now is already Completed: nothing to cancel"), "{run:?}");
    scenario.hold_jobs(false);
    wait_for("the queued task runs next", || {
        task_of(&scenario.server, "queued").and_then(|t| t.status).and_then(|s| s.state)
            == Some(TaskState::Completed)
    })
    .await;
}

groundskeeper_e2e::for_each_etcd_version!(the_plugin_drives_an_etcd_clusters_maintenance);

/// `scylla cleanup-status` after a scale-out, with a Cleanup task's Job (groundskeeper's,
/// held running) and one of scylla-operator's own cleanup Jobs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scylla_cleanup_status_tells_the_jobs_apart() {
    let server = Arc::new(
        ApiServer::builder()
            .authorize(CONTROLLER_TOKEN, controller_grants())
            .authorize(PLUGIN_USER_TOKEN, plugin_user(&["scylla"]))
            .start()
            .await
            .expect("the API server starts"),
    );
    let operator = ScyllaOperator {
        namespace: "scylla".into(),
        cluster: "db".into(),
        datacenter: "dc".into(),
        cleanup: None,
    };
    let before: &[(&str, i64)] = &[("a", 2)];
    let after: &[(&str, i64)] = &[("a", 3)];
    operator.create(&server, before, true, "token").expect("the cluster");
    operator.scale_out(&server, before, after).expect("the scale-out");
    // The second node is already clean for the new ring, so it is not scylla-operator's to clean
    // and a manual task may clean it again beside scylla-operator's Job on the first node (a node
    // scylla-operator still owes a cleanup waits for it instead).
    let services = ResourceId::of::<k8s_openapi::api::core::v1::Service>();
    let second = server.get(&services, Some("scylla"), "db-dc-a-1").expect("the second member Service");
    let current = second["metadata"]["annotations"][keys::CURRENT_TOKEN_RING_HASH].clone();
    server
        .patch(
            &services,
            Some("scylla"),
            "db-dc-a-1",
            PatchFormat::Merge,
            &json!({"metadata": {"annotations": {keys::LAST_CLEANED_UP_TOKEN_RING_HASH: current}}}),
            false,
        )
        .expect("the second node recorded clean");
    // scylla-operator's own cleanup Job for the first node, as its controller names and labels it.
    let theirs = json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "cleanup-db-dc-a-0", "namespace": "scylla",
                     "labels": {"scylla-operator.scylladb.com/node-job-type": "Cleanup", "scylla/cluster": "db"}},
        "spec": {"template": {"spec": {"containers": [{"name": "cleanup", "image": "scylladb/scylla"}], "restartPolicy": "OnFailure"}}},
    });
    server.create(&ResourceId::of::<Job>(), Some("scylla"), theirs).expect("scylla-operator's Job");
    // groundskeeper's Jobs never finish here: the status shows them running.
    let _jobs =
        JobSimulator::builder(server.clone(), |_container| std::future::pending::<Termination>()).spawn();
    let ctx = Arc::new(Context::new(
        server.client_with_token(CONTROLLER_TOKEN),
        ControllerConfig::default(),
        Arc::new(Metrics::new()),
    ));
    let controller = tokio::spawn(groundskeeper_controller::run_task_controller(ctx));
    let dir = tempfile::tempdir().expect("a temp dir");
    let config = kubeconfig(&server, dir.path(), "config", Some(PLUGIN_USER_TOKEN));

    let run = plugin(
        &config,
        &[
            "-n",
            "scylla",
            "task",
            "create",
            "cleanup",
            "--target",
            "scyllacluster/db",
            "--name",
            "clean",
            "--config",
            "nodes=db-dc-a-1",
        ],
    )
    .await;
    assert_eq!(run.code, 0, "{run:?}");
    wait_for("groundskeeper's cleanup Job", || {
        server.get(&ResourceId::of::<Job>(), Some("scylla"), "clean-0").is_some()
    })
    .await;

    let run = plugin(&config, &["scylla", "cleanup-status", "db", "-n", "scylla"]).await;
    controller.abort();
    assert_eq!(run.code, 0, "{run:?}");
    let out = &run.stdout;
    assert!(out.starts_with("ScyllaCluster scylla/db\n  Cleanup may start: yes"), "{out}");
    assert!(
        out.contains(
            "  Cleaned by: scylla-operator's own cleanup controller (its cleanup Job \
             cleanup-db-dc-a-0 exists): groundskeeper's automatic ring-hash trigger stands back"
        ),
        "{out}"
    );
    assert!(out.contains("  Nodes needing cleanup: 1 of 3\n"), "{out}");
    let node = |name: &str| {
        out.lines()
            .find(|l| l.starts_with(&format!("  {name} ")))
            .unwrap_or_else(|| panic!("no line for {name} in\n{out}"))
    };
    assert!(
        node("db-dc-a-0").contains("   yes   ")
            && node("db-dc-a-0").contains("cleanup-db-dc-a-0 (scylla-operator)"),
        "{out}"
    );
    assert!(node("db-dc-a-0").contains("the ring changed since its last cleanup"), "{out}");
    assert!(node("db-dc-a-1").contains("clean-0 (groundskeeper)"), "{out}");
    assert!(node("db-dc-a-2").contains("   maybe   ") && node("db-dc-a-2").contains("joined alone"), "{out}");
    assert!(out.contains("  clean-0             db-dc-a-1   groundskeeper (task clean)   Running"), "{out}");
    assert!(out.contains("  cleanup-db-dc-a-0   db-dc-a-0   scylla-operator              Running"), "{out}");

    let run = plugin(&config, &["-n", "scylla", "scylla", "cleanup-status", "db", "-o", "json"]).await;
    let view: serde_json::Value = serde_json::from_str(&run.stdout).expect("JSON");
    assert_eq!(view["nodes"][1]["runningJobs"], json!(["clean-0 (groundskeeper)"]));
}

/// A ServiceAccount that may only read EtcdClusters in `etcd`.
fn etcd_reader() -> Grants {
    let manifests = vec![
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
               "metadata": {"name": "etcd-reader", "namespace": NAMESPACE},
               "rules": [{"apiGroups": ["groundskeeper.dev"], "resources": ["etcdclusters"], "verbs": ["get", "list"]}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": "etcd-reader", "namespace": NAMESPACE},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "etcd-reader"},
               "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": NAMESPACE}]}),
    ];
    Grants::for_service_account(&manifests, NAMESPACE, "reader")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_say_what_is_wrong_and_what_to_do() {
    let server = ApiServer::builder()
        .authorize("reader-token", etcd_reader())
        .authorize(PLUGIN_USER_TOKEN, plugin_user(&[NAMESPACE]))
        .start()
        .await
        .expect("the API server starts");
    server
        .create(
            &etcd_clusters(),
            Some(NAMESPACE),
            json!({"apiVersion": "groundskeeper.dev/v1alpha1", "kind": "EtcdCluster",
                   "metadata": {"name": CLUSTER, "namespace": NAMESPACE},
                   "spec": {"endpoints": ["http://127.0.0.1:1"]}}),
        )
        .expect("the EtcdCluster");
    let dir = tempfile::tempdir().expect("a temp dir");
    let admin = kubeconfig(&server, dir.path(), "admin", None);
    let reader = kubeconfig(&server, dir.path(), "reader", Some("reader-token"));

    let failure = |run: &Run, wanted: &str| {
        assert_eq!(run.code, 1, "{run:?}");
        assert!(run.stderr.contains(wanted), "wanted {wanted:?} in {run:?}");
    };
    // No such cluster, no such task.
    failure(
        &plugin(&admin, &["etcd", "status", "nope"]).await,
        "error: EtcdCluster \"nope\" not found in namespace \"etcd\": list the EtcdClusters there with `kubectl get etcdclusters -n etcd`",
    );
    failure(
        &plugin(&admin, &["task", "create", "defragment", "--target", "nope"]).await,
        "EtcdCluster \"nope\" not found in namespace \"etcd\"",
    );
    failure(
        &plugin(&admin, &["task", "describe", "nope", "-n", "other"]).await,
        "MaintenanceTask \"nope\" not found in namespace \"other\": list them with `kubectl groundskeeper task list -n other`",
    );
    // A config the checks refuse: nothing is created.
    failure(
        &plugin(&admin, &["task", "create", "compact", "--target", CLUSTER, "--config", "retain=5"]).await,
        "--config retain=5: spec.config.compact has no field \"retain\"; its fields: physical, retainRevisions, revision",
    );
    assert!(server.list(&tasks(), Some(NAMESPACE)).is_empty());
    // RBAC: the verb and resource that are missing.
    failure(
        &plugin(&reader, &["task", "list"]).await,
        "not allowed to list maintenancetasks.groundskeeper.dev in namespace etcd",
    );
    failure(
        &plugin(&reader, &["task", "create", "defragment", "--target", CLUSTER]).await,
        "not allowed to create maintenancetasks.groundskeeper.dev in namespace etcd: maintenancetasks.groundskeeper.dev is forbidden: User \"system:serviceaccount:etcd:reader\" cannot create resource \"maintenancetasks\"",
    );
    // The plugin's ClusterRole bound in one namespace: enough there, not everywhere.
    let user = kubeconfig(&server, dir.path(), "user", Some(PLUGIN_USER_TOKEN));
    let run = plugin(&user, &["task", "list"]).await;
    assert_eq!(run.code, 0, "{run:?}");
    failure(
        &plugin(&user, &["task", "list", "-A"]).await,
        "not allowed to list maintenancetasks.groundskeeper.dev in all namespaces",
    );
    // No kubeconfig, an unknown context.
    let home = dir.path().join("empty-home");
    std::fs::create_dir_all(&home).unwrap();
    let run = plugin_with_env(&["task", "list"], &[("HOME", home.as_os_str())]).await;
    failure(&run, "no cluster to talk to");
    failure(&run, "Set KUBECONFIG or --kubeconfig");
    failure(
        &plugin(&admin, &["task", "list", "--context", "elsewhere"]).await,
        "cannot use the kubeconfig context \"elsewhere\"",
    );
    let run = plugin_with_env(&["task", "list", "--kubeconfig", admin.to_str().unwrap()], &[]).await;
    assert_eq!(run.code, 0, "--kubeconfig works without KUBECONFIG: {run:?}");

    // The CRDs not installed.
    let bare = ApiServer::builder()
        .without(&tasks())
        .without(&etcd_clusters())
        .without(&scylla_clusters())
        .start()
        .await
        .expect("the API server starts");
    let bare_config = kubeconfig(&bare, dir.path(), "bare", None);
    failure(
        &plugin(&bare_config, &["task", "list"]).await,
        "the MaintenanceTask resource type is not served by this cluster: the CRD maintenancetasks.groundskeeper.dev is not installed. Install groundskeeper's CRDs: `kubectl apply -f manifests/crds/`",
    );
    failure(
        &plugin(&bare_config, &["etcd", "status", CLUSTER]).await,
        "the CRD etcdclusters.groundskeeper.dev is not installed",
    );
    failure(
        &plugin(&bare_config, &["scylla", "cleanup-status", "db"]).await,
        "the CRD scyllaclusters.scylla.scylladb.com is not installed. ScyllaClusters come with scylla-operator",
    );
}

/// `schedule list` and `schedule describe` as the plugin's user sees them: the next run in the
/// schedule's own zone, its tasks, a schedule that does not exist.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schedules_are_listed_and_described_with_their_next_runs() {
    let server = ApiServer::builder()
        .authorize(PLUGIN_USER_TOKEN, plugin_user(&[NAMESPACE]))
        .start()
        .await
        .expect("the API server starts");
    let schedules = ResourceId::new("groundskeeper.dev", "v1alpha1", "maintenanceschedules");
    let schedule = json!({
        "apiVersion": "groundskeeper.dev/v1alpha1", "kind": "MaintenanceSchedule",
        "metadata": {"name": "nightly-snapshot", "namespace": NAMESPACE},
        "spec": {"schedule": "30 2 * * *", "timeZone": "Europe/Berlin", "concurrencyPolicy": "Forbid",
                 "taskTemplate": {"spec": {"target": {"kind": "EtcdCluster", "name": CLUSTER}, "type": "Snapshot"}}}
    });
    server.create(&schedules, Some(NAMESPACE), schedule).expect("the schedule");
    let status = json!({"status": {
        "lastScheduleTime": "2026-11-24T01:30:00Z",
        "recentTasks": [{"name": "nightly-snapshot-29400000", "scheduledTime": "2026-11-24T01:30:00Z", "state": "Completed"}]
    }});
    server.patch(&schedules, Some(NAMESPACE), "nightly-snapshot", PatchFormat::Merge, &status, true).unwrap();
    let dir = tempfile::tempdir().expect("a temp dir");
    let user = kubeconfig(&server, dir.path(), "user", Some(PLUGIN_USER_TOKEN));

    let run = plugin(&user, &["schedule", "list"]).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("nightly-snapshot"), "{run:?}");
    assert!(run.stdout.contains("Snapshot EtcdCluster/main"), "{run:?}");
    assert!(run.stdout.contains("02:30 CE"), "the next run in Berlin time: {run:?}");

    let run = plugin(&user, &["schedule", "describe", "nightly-snapshot", "--next", "2"]).await;
    assert_eq!(run.code, 0, "{run:?}");
    for want in
        ["Schedule:      30 2 * * * (Europe/Berlin)", "Next runs:", "nightly-snapshot-29400000", "Completed"]
    {
        assert!(run.stdout.contains(want), "{want:?} missing: {run:?}");
    }
    let run = plugin(&user, &["schedule", "describe", "nope"]).await;
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("list them with `kubectl groundskeeper schedule list -n etcd`"), "{run:?}");
}

/// `task plan` shows what a task would do without creating one; `task approve` approves the plan
/// a task awaits approval for, and refuses a plan id that is not its plan any more (the controller
/// plays no part here: the plan in the task's status is written as the controller writes it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_is_shown_before_anything_runs_and_approved_by_its_id() {
    let server = ApiServer::builder()
        .authorize(PLUGIN_USER_TOKEN, plugin_user(&[NAMESPACE]))
        .start()
        .await
        .expect("the API server starts");
    let gib: i64 = 1 << 30;
    let member = |name: &str, id: &str, leader: bool, db: i64| {
        json!({"name": name, "id": id, "endpoint": format!("http://{name}:2379"), "dbSize": db,
               "dbSizeInUse": db / 4, "leader": leader, "healthy": true})
    };
    server
        .create(
            &etcd_clusters(),
            Some(NAMESPACE),
            json!({"apiVersion": "groundskeeper.dev/v1alpha1", "kind": "EtcdCluster",
                   "metadata": {"name": CLUSTER, "namespace": NAMESPACE},
                   "spec": {"endpoints": ["http://etcd-0:2379"]}}),
        )
        .unwrap();
    let status = json!({"status": {"members": [
        member("etcd-0", "a", true, gib), member("etcd-1", "b", false, gib), member("etcd-2", "c", false, 1_000_000)
    ]}});
    server.patch(&etcd_clusters(), Some(NAMESPACE), CLUSTER, PatchFormat::Merge, &status, true).unwrap();
    let dir = tempfile::tempdir().expect("a temp dir");
    let user = kubeconfig(&server, dir.path(), "user", Some(PLUGIN_USER_TOKEN));

    let run = plugin(
        &user,
        &["task", "plan", "defragment", "--target", CLUSTER, "--config", "minDefragBytes=100000000"],
    )
    .await;
    assert_eq!(run.code, 0, "{run:?}");
    let rows: Vec<&str> = run.stdout.lines().filter(|l| l.contains("etcd-")).collect();
    assert_eq!(rows.len(), 3, "{run:?}");
    assert!(rows[0].contains("etcd-1") && rows[0].contains("Defragment"), "followers first: {run:?}");
    assert!(rows[1].contains("etcd-0") && rows[1].contains("MoveLeaderThenDefragment"), "{run:?}");
    assert!(rows[2].contains("etcd-2") && rows[2].contains("Skip"), "{run:?}");
    assert!(run.stdout.contains("a dry run: nothing was created"), "{run:?}");
    assert!(server.list(&tasks(), Some(NAMESPACE)).is_empty(), "no task created");

    // A task awaiting approval, its plan written as the controller writes it.
    let run = plugin(
        &user,
        &["task", "create", "defragment", "--target", CLUSTER, "--name", "reviewed", "--require-approval"],
    )
    .await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(task_of(&server, "reviewed").unwrap().spec.require_approval);
    let run = plugin(&user, &["task", "approve", "reviewed"]).await;
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("has no plan yet"), "{run:?}");
    let plan = json!({"status": {"state": "Pending", "plan": {"id": "0123456789ab", "summary": "defragment 2 of 3 member(s)",
                      "steps": [{"name": "etcd-1", "action": "Defragment"}]}}});
    server.patch(&tasks(), Some(NAMESPACE), "reviewed", PatchFormat::Merge, &plan, true).unwrap();
    let run = plugin(&user, &["task", "describe", "reviewed"]).await;
    assert!(run.stdout.contains("plan id: 0123456789ab"), "{run:?}");
    assert!(run.stdout.contains("awaits approval: kubectl groundskeeper task approve"), "{run:?}");
    let run = plugin(&user, &["task", "approve", "reviewed", "--plan", "ffffffffffff"]).await;
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("plan is now 0123456789ab, not ffffffffffff"), "{run:?}");
    let run = plugin(&user, &["task", "approve", "reviewed", "--plan", "0123456789ab"]).await;
    assert_eq!(run.code, 0, "{run:?}");
    let approved = task_of(&server, "reviewed").unwrap();
    assert_eq!(
        approved
            .metadata
            .annotations
            .unwrap_or_default()
            .get("groundskeeper.dev/approved-plan")
            .map(String::as_str),
        Some("0123456789ab")
    );
}
