//! The examples under `manifests/examples/` are what the code accepts and builds: they are read
//! through the same types, so they cannot drift from them.

use std::path::PathBuf;

use groundskeeper_controller::api::EtcdCluster;
use groundskeeper_controller::execution::CONTAINER_NAME;
use groundskeeper_controller::triggers::etcd::policy::Policy;
use groundskeeper_job::cli::{Cli, Command};
use groundskeeper_protocol::exit;
use k8s_openapi::api::batch::v1::Job;

fn example(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../manifests/examples")
        .join(name);
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
fn the_cleanup_job_example_follows_the_job_conventions() {
    let job: Job = serde_saphyr::from_str(&example("cleanup-one-node-job.yaml")).expect("Job example parses");
    let spec = job.spec.expect("spec");
    let rules = spec.pod_failure_policy.expect("podFailurePolicy").rules;
    let fail_job = rules
        .iter()
        .find(|r| r.action == "FailJob")
        .expect("a FailJob rule");
    let on_exit = fail_job.on_exit_codes.as_ref().expect("onExitCodes");
    assert_eq!(
        on_exit.values,
        vec![exit::BAD_INPUT],
        "FailJob must match the bad-input exit code"
    );
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
        matches!(
            parsed,
            Ok(Cli {
                command: Command::Cleanup(_)
            })
        ),
        "the runner rejects the example's arguments: {:?}",
        parsed.err()
    );
    let security = container
        .security_context
        .as_ref()
        .expect("container securityContext");
    assert_eq!(security.read_only_root_filesystem, Some(true));
    assert_eq!(security.allow_privilege_escalation, Some(false));
    assert_eq!(
        security.capabilities.as_ref().and_then(|c| c.drop.clone()),
        Some(vec!["ALL".to_owned()])
    );
    let mounts = container.volume_mounts.clone().unwrap_or_default();
    assert!(
        mounts
            .iter()
            .any(|m| m.mount_path == "/etc/scylla-agent" && m.read_only == Some(true))
    );
}
