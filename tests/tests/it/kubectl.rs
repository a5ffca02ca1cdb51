//! The real `kubectl` against the in-memory API, as users meet groundskeeper's resources: every
//! example applies, each CRD rule and enum refuses bad input with kubectl's error naming the
//! field, `get` prints the printer columns, `explain` reads the schemas, a task's spec cannot be
//! edited. Each installed minor version from 1.27 on applies the examples and reads them back; the
//! refusals run with the newest (they are the server's answers, the same for every client).
//!
//! A task seen going from Pending to Completed with `kubectl get -w`, and the plugin found by
//! kubectl's own lookup, are in the plugin's tests (`kubectl-plugin/tests/it/kubectl.rs`).

use std::path::{Path, PathBuf};

use groundskeeper_e2e::apiserver::ApiServer;
use groundskeeper_e2e::kubectl::{Kubectl, KubectlBinary, installed_or_skip, newest_or_skip};
use serde_json::{Value, json};

const NAMESPACE: &str = "etcd";

fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../manifests/examples")
}

fn examples() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(examples_dir())
        .expect("manifests/examples")
        .map(|entry| entry.expect("an entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    files
}

/// An API server and a kubectl of `binary` configured for it, in a folder of their own.
async fn kubectl_for(binary: KubectlBinary) -> (ApiServer, Kubectl, tempfile::TempDir) {
    let server = ApiServer::builder().start().await.expect("the in-memory API server starts");
    let work = tempfile::tempdir().expect("a temp dir");
    let config = work.path().join("kubeconfig");
    server.write_kubeconfig(&config, None, NAMESPACE).expect("the kubeconfig");
    let kubectl = Kubectl::new(binary, &config, work.path());
    (server, kubectl, work)
}

/// Every example applies with every installed kubectl (a second apply changes nothing), and
/// `get` shows each kind's printer columns.
#[tokio::test]
async fn every_example_applies_with_every_kubectl() {
    let Some(binaries) = installed_or_skip("every_example_applies_with_every_kubectl") else { return };
    for binary in binaries {
        let minor = binary.minor;
        let (_server, kubectl, _work) = kubectl_for(binary).await;
        // The folder at once, as users apply it: one line per object.
        let dir = examples_dir();
        let dir = dir.to_str().unwrap();
        let created = kubectl.run(&["apply", "-f", dir]).await.ok(&format!("1.{minor}: apply {dir}"));
        assert_eq!(
            created.lines().filter(|l| l.ends_with(" created")).count(),
            examples().len(),
            "1.{minor}: {created}"
        );
        let again = kubectl.run(&["apply", "-f", dir]).await.ok(&format!("1.{minor}: apply again"));
        assert!(
            again.lines().all(|l| l.ends_with(" unchanged")),
            "1.{minor}: a second apply changes nothing: {again}"
        );
        let tasks = kubectl.run(&["get", "mtask", "-n", NAMESPACE]).await.ok("get mtask");
        let header = tasks.lines().next().unwrap_or_default();
        for column in ["NAME", "TYPE", "TARGET", "STATE", "PROGRESS", "AGE"] {
            assert!(header.contains(column), "1.{minor}: {column} in {tasks}");
        }
        assert!(tasks.contains("compact-now") && tasks.contains("Compact"), "1.{minor}: {tasks}");
        let clusters =
            kubectl.run(&["get", "etcdclusters.groundskeeper.dev", "-n", NAMESPACE]).await.ok("get");
        assert!(
            clusters.lines().next().unwrap_or_default().contains("MAX FRAGMENTATION"),
            "1.{minor}: {clusters}"
        );
        let schedules = kubectl.run(&["get", "msched", "-n", NAMESPACE]).await.ok("get msched");
        assert!(
            schedules.contains("30 2 * * *") && schedules.contains("Europe/Berlin"),
            "1.{minor}: {schedules}"
        );
    }
}

/// What `kubectl get` prints in its columns for a task the controller has written a status for.
#[tokio::test]
async fn get_prints_the_columns_of_a_task_with_its_status() {
    let Some(binary) = newest_or_skip("get_prints_the_columns_of_a_task_with_its_status") else { return };
    let (server, kubectl, _work) = kubectl_for(binary).await;
    let task = example_object("task-compact.yaml");
    kubectl.run_with_input(&["apply", "-f", "-"], &task.to_string()).await.ok("apply");
    let status = json!({"status": {"state": "InProgress", "progress": "1/3"}});
    server
        .patch(
            &groundskeeper_e2e::apiserver::ResourceId::new(
                "groundskeeper.dev",
                "v1alpha1",
                "maintenancetasks",
            ),
            Some(NAMESPACE),
            "compact-now",
            groundskeeper_e2e::apiserver::PatchFormat::Merge,
            &status,
            true,
        )
        .expect("the status is written");
    let out = kubectl.run(&["get", "mtask", "compact-now"]).await.ok("get");
    let row: Vec<&str> = out.lines().nth(1).unwrap_or_default().split_whitespace().collect();
    assert_eq!(&row[..5], ["compact-now", "Compact", "main", "InProgress", "1/3"], "{out}");
    let wide = kubectl.run(&["get", "mtask", "compact-now", "-o", "wide"]).await.ok("get -o wide");
    assert!(wide.contains("InProgress"), "{wide}");
    let described = kubectl.run(&["describe", "mtask", "compact-now"]).await.ok("describe");
    assert!(described.contains("Retain Revisions:") && described.contains("InProgress"), "{described}");
}

/// `kubectl explain` reads the CRDs' schemas, down to a field and its enum.
#[tokio::test]
async fn explain_shows_the_fields_of_each_kind() {
    let Some(binaries) = installed_or_skip("explain_shows_the_fields_of_each_kind") else { return };
    for binary in binaries {
        let minor = binary.minor;
        let (_server, kubectl, _work) = kubectl_for(binary).await;
        let out = kubectl.run(&["explain", "maintenancetasks.spec"]).await.ok(&format!("1.{minor}: explain"));
        for field in ["requireApproval", "target", "type", "config"] {
            assert!(out.contains(field), "1.{minor}: {field} in {out}");
        }
        let out = kubectl.run(&["explain", "mtask.spec.type"]).await.ok("explain a field");
        assert!(out.contains("Compact") || out.contains("compaction"), "1.{minor}: {out}");
        let out = kubectl.run(&["explain", "etcdcluster.spec.policy.compaction.mode"]).await.ok("explain");
        assert!(out.contains("FIELD: mode <string>") && out.contains("retention"), "1.{minor}: {out}");
        let out = kubectl.run(&["explain", "job.spec.backoffLimit"]).await.ok("explain a built-in");
        assert!(out.contains("backoffLimit"), "1.{minor}: {out}");
    }
}

/// An example manifest as JSON.
fn example_object(file: &str) -> Value {
    let text = std::fs::read_to_string(examples_dir().join(file)).expect("the example");
    serde_saphyr::from_str(&text).expect("the example is YAML")
}

fn suspension() -> Value {
    json!({
        "apiVersion": "groundskeeper.dev/v1alpha1",
        "kind": "MaintenanceSuspension",
        "metadata": {"name": "freeze", "namespace": NAMESPACE},
        "spec": {"target": {"kind": "EtcdCluster", "name": "main"}, "reason": "release week"},
    })
}

/// One bad manifest: what to change in a good one, and what kubectl must say.
struct Refusal {
    what: &'static str,
    object: Value,
    /// Every one must be in kubectl's error: the field's path and the rule's message.
    says: Vec<String>,
}

fn with(mut object: Value, pointer: &str, value: Value) -> Value {
    let (parent, field) = pointer.rsplit_once('/').expect("a pointer with a parent");
    let parent =
        if parent.is_empty() { &mut object } else { object.pointer_mut(parent).expect("the parent exists") };
    parent[field] = value;
    object
}

fn refusal(what: &'static str, object: Value, says: &[&str]) -> Refusal {
    Refusal { what, object, says: says.iter().map(|s| s.to_string()).collect() }
}

const TYPES: [&str; 9] =
    ["Cleanup", "Compact", "Defragment", "Maintenance", "Snapshot", "Copy", "Verify", "Delta", "Restore"];

/// The rules a task's spec has, the same in a schedule's `taskTemplate.spec` (at `base`).
fn task_spec_refusals(good: &Value, base: &str, field: &str, out: &mut Vec<Refusal>) {
    out.push(refusal(
        "an unknown task type",
        with(good.clone(), &format!("{base}/type"), json!("Vacuum")),
        &[&format!("{field}.type"), "Unsupported value: \"Vacuum\""],
    ));
    out.push(refusal(
        "an unknown target kind",
        with(good.clone(), &format!("{base}/target/kind"), json!("Deployment")),
        &[&format!("{field}.target.kind"), "Unsupported value: \"Deployment\""],
    ));
    out.push(refusal(
        "a Cleanup of an EtcdCluster",
        with(
            with(good.clone(), &format!("{base}/type"), json!("Cleanup")),
            &format!("{base}/config"),
            json!({}),
        ),
        &[&format!("{field}.target.kind"), "type Cleanup needs target kind ScyllaCluster"],
    ));
    for config in TYPES {
        let member = config.to_lowercase();
        // A type other than the config's own, of the same target kind.
        let other = if config == "Compact" { "Defragment" } else { "Compact" };
        let mut object = with(good.clone(), &format!("{base}/type"), json!(other));
        // Structurally valid, so that the rule is reached (the API skips the CEL rules of an
        // object with schema errors).
        let store = json!({"persistentVolumeClaim": "snapshots"});
        let settings = match config {
            "Copy" => json!({"from": store, "to": {"bucket": {"url": "s3://offsite/etcd"}}}),
            "Restore" => json!({"from": store}),
            _ => json!({}),
        };
        object = with(object, &format!("{base}/config"), json!({ member.clone(): settings }));
        if config == "Cleanup" {
            object = with(object, &format!("{base}/target/kind"), json!("EtcdCluster"));
        }
        out.push(Refusal {
            what: "a config member of another type",
            object,
            says: vec![
                format!("{field}.config.{member}"),
                format!("config.{member} is only for type {config}"),
            ],
        });
    }
    let mut restore = with(good.clone(), &format!("{base}/type"), json!("Restore"));
    restore = with(
        restore,
        &format!("{base}/config"),
        json!({"restore": {"confirm": false, "from": {"persistentVolumeClaim": "snapshots"}}}),
    );
    out.push(refusal(
        "a Restore not confirmed",
        restore,
        &[&format!("{field}.config.restore"), "confirm it with config.restore.confirm: true"],
    ));
    let compact = with(good.clone(), &format!("{base}/type"), json!("Compact"));
    out.push(refusal(
        "both retainRevisions and revision",
        with(compact, &format!("{base}/config"), json!({"compact": {"retainRevisions": 10, "revision": 5}})),
        &[&format!("{field}.config.compact"), "give one of retainRevisions and revision, not both"],
    ));
    let maintenance = with(good.clone(), &format!("{base}/type"), json!("Maintenance"));
    out.push(refusal(
        "both retainRevisions and revision in a Maintenance",
        with(
            maintenance,
            &format!("{base}/config"),
            json!({"maintenance": {"compact": {"retainRevisions": 10, "revision": 5}}}),
        ),
        &[
            &format!("{field}.config.maintenance.compact"),
            "give one of retainRevisions and revision, not both",
        ],
    ));
}

fn refusals() -> Vec<Refusal> {
    let mut out = Vec::new();
    let task = example_object("task-compact.yaml");
    task_spec_refusals(&task, "/spec", "spec", &mut out);
    let schedule = example_object("schedule-nightly-snapshot.yaml");
    task_spec_refusals(&schedule, "/spec/taskTemplate/spec", "spec.taskTemplate.spec", &mut out);
    out.push(refusal(
        "an unknown concurrency policy",
        with(schedule.clone(), "/spec/concurrencyPolicy", json!("Sometimes")),
        &["spec.concurrencyPolicy", "Unsupported value: \"Sometimes\""],
    ));
    let cluster = example_object("etcdcluster.yaml");
    out.push(refusal(
        "an unknown compaction mode",
        with(cluster.clone(), "/spec/policy/compaction/mode", json!("hourly")),
        &["spec.policy.compaction.mode", "Unsupported value: \"hourly\""],
    ));
    out.push(refusal(
        "an unknown leader turn",
        with(cluster.clone(), "/spec/policy/leaderTurn", json!("Sometimes")),
        &["spec.policy.leaderTurn", "Unsupported value: \"Sometimes\""],
    ));
    let partitioned = example_object("etcdcluster-partitioned.yaml");
    out.push(refusal(
        "an unknown revision scheme",
        with(partitioned, "/spec/partition/revisionScheme", json!("Random")),
        &["spec.partition.revisionScheme", "Unsupported value: \"Random\""],
    ));
    out.push(refusal(
        "an unknown task type allowed during a suspension",
        with(suspension(), "/spec/allowTaskTypes", json!(["Snapshot", "Vacuum"])),
        &["spec.allowTaskTypes[1]", "Unsupported value: \"Vacuum\""],
    ));
    out.push(refusal(
        "an unknown way to treat running tasks",
        with(suspension(), "/spec/runningTasks", json!("Pause")),
        &["spec.runningTasks", "Unsupported value: \"Pause\""],
    ));
    out.push(refusal(
        "a suspension of an unknown kind",
        with(suspension(), "/spec/target/kind", json!("Deployment")),
        &["spec.target.kind", "Unsupported value: \"Deployment\""],
    ));
    out.push(refusal(
        "a suspension without a reason",
        with(suspension(), "/spec/reason", json!("")),
        &["spec.reason"],
    ));
    out
}

/// Each rule of the CRDs and each enum refuses bad input at `kubectl apply`, with kubectl's error
/// naming the field and saying the rule's message; nothing is stored.
#[tokio::test]
async fn bad_input_is_refused_naming_the_field() {
    let Some(binary) = newest_or_skip("bad_input_is_refused_naming_the_field") else { return };
    let (server, kubectl, _work) = kubectl_for(binary).await;
    let revision = server.revision();
    let cases = refusals();
    assert!(cases.len() >= 35, "{} cases", cases.len());
    for case in cases {
        let run = kubectl.run_with_input(&["apply", "-f", "-"], &case.object.to_string()).await;
        assert_ne!(run.code, 0, "{}: accepted: {run:#?}", case.what);
        for text in &case.says {
            assert!(run.stderr.contains(text.as_str()), "{}: {text:?} not in {}", case.what, run.stderr);
        }
        assert!(run.stderr.contains("is invalid"), "{}: {}", case.what, run.stderr);
    }
    assert_eq!(server.revision(), revision, "a refused object is never stored");
}

/// A task's spec cannot change once created (the CRD's transition rule): `kubectl apply` of an
/// edited task is refused saying what to do, `kubectl edit`-style patches too; labels may change.
#[tokio::test]
async fn a_tasks_spec_cannot_be_edited() {
    let Some(binary) = newest_or_skip("a_tasks_spec_cannot_be_edited") else { return };
    let (_server, kubectl, _work) = kubectl_for(binary).await;
    let task = example_object("task-compact.yaml");
    kubectl.run_with_input(&["apply", "-f", "-"], &task.to_string()).await.ok("apply");
    let edited = with(task.clone(), "/spec/config/compact/retainRevisions", json!(5));
    let run = kubectl.run_with_input(&["apply", "-f", "-"], &edited.to_string()).await;
    assert_ne!(run.code, 0, "{run:#?}");
    assert!(run.stderr.contains("spec: Invalid value: \"object\": spec is immutable"), "{}", run.stderr);
    let run = kubectl
        .run(&[
            "patch",
            "mtask",
            "compact-now",
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"deadlineSeconds":60}}"#,
        ])
        .await;
    assert_ne!(run.code, 0, "{run:#?}");
    assert!(run.stderr.contains("delete this MaintenanceTask and create a new one"), "{}", run.stderr);
    kubectl.run(&["label", "mtask", "compact-now", "team=storage"]).await.ok("a label may change");
}

/// Unknown fields: `kubectl apply` (strict field validation by default) refuses them naming the
/// field; with `--validate=false` the server drops them and the object has none.
#[tokio::test]
async fn unknown_fields_are_refused_or_pruned() {
    let Some(binary) = newest_or_skip("unknown_fields_are_refused_or_pruned") else { return };
    let (_server, kubectl, _work) = kubectl_for(binary).await;
    let mut task = with(example_object("task-compact.yaml"), "/spec/retries", json!(3));
    task["spec"].as_object_mut().unwrap().remove("ttlSecondsAfterFinished");
    let run = kubectl.run_with_input(&["apply", "-f", "-"], &task.to_string()).await;
    assert_ne!(run.code, 0, "{run:#?}");
    assert!(run.stderr.contains("unknown field \"spec.retries\""), "{}", run.stderr);
    let run = kubectl.run_with_input(&["apply", "--validate=warn", "-f", "-"], &task.to_string()).await;
    assert_eq!(run.code, 0, "{run:#?}");
    assert!(run.stderr.contains("unknown field \"spec.retries\""), "a warning: {}", run.stderr);
    let stored = kubectl.run(&["get", "mtask", "compact-now", "-o", "json"]).await.ok("get");
    let stored: Value = serde_json::from_str(&stored).expect("JSON");
    assert!(stored["spec"].get("retries").is_none(), "pruned: {stored:#}");
    assert_eq!(stored["spec"]["ttlSecondsAfterFinished"], json!(3600), "defaulted: {stored:#}");
}

/// `--dry-run=server` runs every check and stores nothing.
#[tokio::test]
async fn a_server_dry_run_checks_and_stores_nothing() {
    let Some(binary) = newest_or_skip("a_server_dry_run_checks_and_stores_nothing") else { return };
    let (server, kubectl, _work) = kubectl_for(binary).await;
    let revision = server.revision();
    let task = example_object("task-compact.yaml");
    let out = kubectl
        .run_with_input(&["apply", "--dry-run=server", "-f", "-"], &task.to_string())
        .await
        .ok("a server dry run");
    assert!(out.contains("(server dry run)"), "{out}");
    let bad = with(task, "/spec/type", json!("Vacuum"));
    let run = kubectl.run_with_input(&["apply", "--dry-run=server", "-f", "-"], &bad.to_string()).await;
    assert!(run.stderr.contains("spec.type: Unsupported value"), "{run:#?}");
    assert_eq!(server.revision(), revision, "nothing stored");
}

/// A `date` printer column shows an age (`5m`): a time in the future shows as `<invalid>` in
/// kubectl. Every date column of the CRDs reads a time that is past when written; a suspension's
/// end, in the future, is printed as it is.
#[tokio::test]
async fn date_columns_show_ages_and_a_suspensions_end_shows_its_time() {
    const PAST_TIMES: [&str; 3] =
        [".metadata.creationTimestamp", ".status.lastScheduleTime", ".status.lastMaintenanceTime"];
    let crds = Path::new(env!("CARGO_MANIFEST_DIR")).join("../manifests/crds");
    for entry in std::fs::read_dir(&crds).expect("manifests/crds") {
        let path = entry.expect("an entry").path();
        if !path.to_string_lossy().ends_with(".groundskeeper.dev.yaml") {
            continue;
        }
        let crd: Value = serde_saphyr::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        for column in crd["spec"]["versions"][0]["additionalPrinterColumns"].as_array().unwrap() {
            if column["type"] == "date" {
                let path_ = column["jsonPath"].as_str().unwrap();
                assert!(
                    PAST_TIMES.contains(&path_),
                    "{}: column {} is a date: is {path_} always in the past? A future time needs type string",
                    path.display(),
                    column["name"]
                );
            }
        }
    }
    let Some(binary) = newest_or_skip("date_columns_show_ages_and_a_suspensions_end_shows_its_time") else {
        return;
    };
    let (_server, kubectl, _work) = kubectl_for(binary).await;
    let until = "2099-12-05T00:00:00Z";
    let freeze = with(suspension(), "/spec/until", json!(until));
    kubectl.run_with_input(&["apply", "-f", "-"], &freeze.to_string()).await.ok("apply");
    let out = kubectl.run(&["get", "msusp", "freeze"]).await.ok("get msusp");
    let row: Vec<&str> = out.lines().nth(1).unwrap_or_default().split_whitespace().collect();
    assert_eq!(&row[..4], ["freeze", "main", until, "Wait"], "the end as a time, the default shown: {out}");
}
