//! The real `kubectl` beside the plugin, as a person works: the plugin found by kubectl's own
//! lookup on the PATH (`kubectl plugin list`, `kubectl groundskeeper …`), a task applied with
//! `kubectl apply`, watched with `kubectl get -w` from Pending (awaiting approval, said in its
//! column) to Completed, approved with `kubectl groundskeeper task approve`, waited for with
//! `kubectl wait --for=condition=Ready` and deleted. Real etcd 3.5, both
//! controllers and the Job simulator (see `e2e.rs`); the newest installed kubectl.

use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use groundskeeper_api::maintenance_task::TaskState;
use groundskeeper_e2e::etcd_cluster::{CLUSTER_TURNS, EtcdVersion};
use groundskeeper_e2e::kubectl::{Kubectl, newest_or_skip};
use groundskeeper_e2e::wait::eventually;
use tokio::io::AsyncBufReadExt;

use super::e2e::{EtcdScenario, NAMESPACE, task_of};

const TASK: &str = r#"{
  "apiVersion": "groundskeeper.dev/v1alpha1",
  "kind": "MaintenanceTask",
  "metadata": {"name": "reviewed-compact", "namespace": "etcd"},
  "spec": {
    "target": {"kind": "EtcdCluster", "name": "main"},
    "type": "Compact",
    "config": {"compact": {"retainRevisions": 10}},
    "requireApproval": true
  }
}"#;

/// The lines a running command has printed so far, collected as they come.
fn collect_lines(stdout: tokio::process::ChildStdout) -> Arc<Mutex<Vec<String>>> {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let sink = lines.clone();
    tokio::spawn(async move {
        let mut reader = tokio::io::BufReader::new(stdout).lines();
        while let Ok(Some(line)) = reader.next_line().await {
            sink.lock().unwrap().push(line);
        }
    });
    lines
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_watches_a_task_from_awaiting_approval_to_completed_and_finds_the_plugin() {
    let test = "kubectl_watches_a_task_from_awaiting_approval_to_completed_and_finds_the_plugin";
    let Some(binary) = newest_or_skip(test) else { return };
    let _one = CLUSTER_TURNS.lock().await;
    let Some(scenario) = EtcdScenario::start(EtcdVersion::V3_5).await else { return };
    let mut kubectl = Kubectl::new(binary, &scenario.kubeconfig, scenario.dir.path());
    let plugin = Path::new(env!("CARGO_BIN_EXE_kubectl-groundskeeper"));
    kubectl.path_prefix = vec![plugin.parent().expect("the plugin's folder").to_path_buf()];

    let listed = kubectl.run(&["plugin", "list"]).await;
    assert!(listed.stdout.contains(&plugin.display().to_string()), "{listed:#?}");

    kubectl.run_with_input(&["apply", "-f", "-"], TASK).await.ok("kubectl apply");
    let mut watcher = kubectl
        .command(&["get", "mtask", "reviewed-compact", "-n", NAMESPACE, "-w"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl get -w starts");
    let seen = collect_lines(watcher.stdout.take().expect("piped"));

    let waiting = || {
        task_of(&scenario.server, "reviewed-compact")
            .and_then(|t| t.status)
            .and_then(|s| s.waiting_for)
            .is_some_and(|w| w == "AwaitingApproval")
    };
    eventually("the task awaiting approval", waiting).await;
    let row = kubectl.run(&["get", "mtask", "reviewed-compact", "-n", NAMESPACE]).await.ok("get");
    let cells: Vec<&str> = row.lines().nth(1).unwrap_or_default().split_whitespace().collect();
    assert_eq!(&cells[..5], ["reviewed-compact", "Compact", "main", "Pending", "AwaitingApproval"], "{row}");

    scenario.hold_jobs(false);
    let approved =
        kubectl.run(&["groundskeeper", "task", "approve", "reviewed-compact", "-n", NAMESPACE]).await;
    assert_eq!(approved.code, 0, "the plugin, run by kubectl: {approved:#?}");
    eventually("the task Completed", || {
        task_of(&scenario.server, "reviewed-compact").and_then(|t| t.status).and_then(|s| s.state)
            == Some(TaskState::Completed)
    })
    .await;
    eventually("kubectl get -w showing it Completed", || {
        seen.lock().unwrap().iter().any(|line| line.contains("Completed"))
    })
    .await;
    watcher.kill().await.expect("the watch stops");
    let lines = seen.lock().unwrap().clone();
    assert!(lines[0].contains("NAME") && lines[0].contains("WAITING FOR"), "a header first: {lines:#?}");
    let pending = lines.iter().position(|l| l.contains("Pending") && l.contains("AwaitingApproval"));
    let completed = lines.iter().position(|l| l.contains("Completed"));
    assert!(
        pending.is_some() && pending < completed,
        "Pending (awaiting approval), then Completed: {lines:#?}"
    );
    assert!(lines.iter().skip(1).all(|l| !l.contains("NAME")), "the header once: {lines:#?}");

    let waited = kubectl
        .run(&["wait", "--for=condition=Ready", "mtask/reviewed-compact", "-n", NAMESPACE, "--timeout=60s"])
        .await
        .ok("kubectl wait");
    assert!(waited.contains("condition met"), "{waited}");
    let deleted = kubectl.run(&["delete", "mtask", "reviewed-compact", "-n", NAMESPACE]).await.ok("delete");
    assert!(deleted.contains("deleted"), "{deleted}");
    assert!(task_of(&scenario.server, "reviewed-compact").is_none());
}
