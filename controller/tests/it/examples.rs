//! The examples under `manifests/examples/` are what the code accepts and builds: they are read
//! through the same types, so they cannot drift from them.

use std::path::PathBuf;

use groundskeeper_api::EtcdCluster;
use groundskeeper_api::MaintenanceTask;
use groundskeeper_api::maintenance_task::TaskType;
use groundskeeper_api::validate::{Compact, describe_errors};
use groundskeeper_api::validate::{Work, validate};
use groundskeeper_controller::etcd::policy::Policy;
use groundskeeper_controller::jobs::CONTAINER_NAME;
use groundskeeper_job::cli::{Cli, Command};
use groundskeeper_protocol::exit;
use groundskeeper_protocol::keys::{ORIGIN_LABEL, ORIGIN_MANUAL};
use groundskeeper_stores::etcd::plan::CompactTarget;
use k8s_openapi::api::batch::v1::Job;
use kube::ResourceExt;
use serde_json::Value;

fn example(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../manifests/examples").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}

#[test]
fn the_etcd_cluster_example_is_a_valid_spec() {
    let cluster: EtcdCluster =
        serde_saphyr::from_str(&example("etcdcluster.yaml")).expect("EtcdCluster example parses");
    if let Err(errors) = Policy::from_spec(&cluster.spec) {
        panic!("the EtcdCluster example is rejected: {errors}");
    }
}

#[test]
fn the_partitioned_etcd_cluster_example_is_a_valid_spec() {
    let cluster: EtcdCluster =
        serde_saphyr::from_str(&example("etcdcluster-partitioned.yaml")).expect("EtcdCluster example parses");
    let policy = Policy::from_spec(&cluster.spec)
        .unwrap_or_else(|errors| panic!("the partitioned EtcdCluster example is rejected: {errors}"));
    let partition = policy.partition.expect("a partition");
    assert_eq!(
        (partition.fleet.as_str(), partition.cluster_id, partition.max_clock_skew_ms),
        ("arktos", 1, Some(3000))
    );
}

#[test]
fn the_cleanup_job_example_follows_the_job_conventions() {
    let job: Job = serde_saphyr::from_str(&example("cleanup-one-node-job.yaml")).expect("Job example parses");
    let spec = job.spec.expect("spec");
    let rules = spec.pod_failure_policy.expect("podFailurePolicy").rules;
    let fail_job = rules.iter().find(|r| r.action == "FailJob").expect("a FailJob rule");
    let on_exit = fail_job.on_exit_codes.as_ref().expect("onExitCodes");
    assert_eq!(on_exit.values, vec![exit::BAD_INPUT], "FailJob must match the bad-input exit code");
    assert_eq!(on_exit.container_name.as_deref(), Some(CONTAINER_NAME));

    let pod = spec.template.spec.expect("pod spec");
    assert_eq!(pod.automount_service_account_token, Some(false));
    assert_eq!(pod.restart_policy.as_deref(), Some("Never"));
    let container = &pod.containers[0];
    assert_eq!(container.name, CONTAINER_NAME);
    let args = container.args.clone().unwrap_or_default();
    assert_eq!(args.first().map(String::as_str), Some("cleanup"));
    let parsed = Cli::try_parse_args(args);
    assert!(
        matches!(parsed, Ok(Cli { command: Command::Cleanup(_) })),
        "the runner rejects the example's arguments: {:?}",
        parsed.err()
    );
    let security = container.security_context.as_ref().expect("container securityContext");
    assert_eq!(security.read_only_root_filesystem, Some(true));
    assert_eq!(security.allow_privilege_escalation, Some(false));
    assert_eq!(security.capabilities.as_ref().and_then(|c| c.drop.clone()), Some(vec!["ALL".to_owned()]));
    let mounts = container.volume_mounts.clone().unwrap_or_default();
    assert!(mounts.iter().any(|m| m.mount_path == "/etc/scylla-agent" && m.read_only == Some(true)));
}

/// The MaintenanceTask examples and the type each asks for.
const TASK_EXAMPLES: &[(&str, TaskType)] = &[
    ("task-cleanup.yaml", TaskType::Cleanup),
    ("task-compact.yaml", TaskType::Compact),
    ("task-defragment.yaml", TaskType::Defragment),
    ("task-maintenance.yaml", TaskType::Maintenance),
    ("task-snapshot.yaml", TaskType::Snapshot),
    ("task-delta.yaml", TaskType::Delta),
];

/// A task example read through the CRD's types, every field of the file known to them.
fn task_example(file: &str) -> MaintenanceTask {
    let text = example(file);
    let task: MaintenanceTask =
        serde_saphyr::from_str(&text).unwrap_or_else(|err| panic!("{file} does not parse: {err}"));
    let as_written: Value = serde_saphyr::from_str(&text).expect("YAML");
    let read_back = serde_json::to_value(&task).expect("a task serializes");
    assert_fields_known(file, "", &as_written, &read_back);
    task
}

/// Every field of `written` is in `read` with the same value: none was dropped as unknown (a
/// misspelt field would be, and the example would silently mean something else).
fn assert_fields_known(file: &str, path: &str, written: &Value, read: &Value) {
    match (written, read) {
        (Value::Object(written), Value::Object(read)) => {
            for (key, value) in written {
                let field = format!("{path}.{key}");
                let read_value =
                    read.get(key).unwrap_or_else(|| panic!("{file}: {field} is not a field of the type"));
                assert_fields_known(file, &field, value, read_value);
            }
        }
        (Value::Array(written), Value::Array(read)) if written.len() == read.len() => {
            for (i, (w, r)) in written.iter().zip(read).enumerate() {
                assert_fields_known(file, &format!("{path}[{i}]"), w, r);
            }
        }
        (Value::Number(w), Value::Number(r)) => assert_eq!(w.as_f64(), r.as_f64(), "{file}: {path}"),
        _ => assert_eq!(written, read, "{file}: {path}"),
    }
}

#[test]
fn the_task_examples_are_valid_manual_tasks() {
    for (file, task_type) in TASK_EXAMPLES {
        let task = task_example(file);
        assert_eq!(&task.spec.task_type, task_type, "{file}");
        assert_eq!(
            task.labels().get(ORIGIN_LABEL).map(String::as_str),
            Some(ORIGIN_MANUAL),
            "{file}: label {ORIGIN_LABEL}"
        );
        assert_eq!(
            task.spec.config.members_set(),
            vec![task_type.config_member().unwrap()],
            "{file} shows the settings of its type"
        );
        if let Err(errors) = validate(&task) {
            panic!("{file} is rejected: {}", describe_errors(&errors));
        }
    }
}

#[test]
fn the_compact_example_keeps_ten_thousand_revisions() {
    let task = validate(&task_example("task-compact.yaml")).expect("valid");
    assert!(
        matches!(task.work, Work::Compact(Compact { target: CompactTarget::RetainRevisions(10_000), .. })),
        "{:?}",
        task.work
    );
}

const SCHEDULE_EXAMPLES: [&str; 2] = ["schedule-nightly-snapshot.yaml", "schedule-weekly-maintenance.yaml"];

/// The schedule examples pass every check, their tasks' too, and run when they say.
#[test]
fn the_schedule_examples_are_valid_and_run_when_they_say() {
    use groundskeeper_api::MaintenanceSchedule;
    use groundskeeper_api::maintenance_schedule::validate::validate_schedule;
    // (file, a time, the run after it)
    let runs = [
        // Berlin, spring forward: 02:30 does not exist, the run happens at the jump (03:00 CEST).
        ("schedule-nightly-snapshot.yaml", "2026-03-28T12:00:00Z", "2026-03-29T01:00:00Z"),
        // Sunday 04:00 in New York (EST, UTC-5) after a Tuesday.
        ("schedule-weekly-maintenance.yaml", "2026-11-24T12:00:00Z", "2026-11-29T09:00:00Z"),
    ];
    for (file, after, next) in runs {
        let schedule: MaintenanceSchedule =
            serde_saphyr::from_str(&example(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        let valid = validate_schedule(&schedule)
            .unwrap_or_else(|errors| panic!("{file}: {}", describe_errors(&errors)));
        let next_run = valid.calendar.next_after(after.parse().unwrap()).expect("a next run");
        assert_eq!(next_run, next.parse().unwrap(), "{file}");
    }
}

/// CI validates the other manifests against Kubernetes' own schemas and skips custom resources
/// (apiVersion groundskeeper.dev/…): each of those must be checked here instead.
#[test]
fn every_custom_resource_example_is_checked_here() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../manifests/examples");
    let mut checked: Vec<&str> = TASK_EXAMPLES.iter().map(|(file, _)| *file).collect();
    checked.push("etcdcluster.yaml");
    checked.push("etcdcluster-partitioned.yaml");
    checked.extend(SCHEDULE_EXAMPLES);
    for entry in std::fs::read_dir(&dir).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        let custom = example(&name).lines().any(|line| line.starts_with("apiVersion: groundskeeper.dev/"));
        assert!(
            !custom || checked.contains(&name.as_str()),
            "manifests/examples/{name} is a custom resource that no test reads: add it to this file"
        );
    }
}
