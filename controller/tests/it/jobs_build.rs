//! `build_job`: every maintenance Job gets the same hardening, labels, limits and scheduling.

use groundskeeper_protocol::OperationKind;
use groundskeeper_protocol::operation::{CleanupRequest, Operation};
use std::collections::BTreeMap;

use groundskeeper_controller::jobs::{MaintenanceJob, Scheduling, SecretFile, build_job, job_selector};
use groundskeeper_controller::runtime::context::JobLimits;
use groundskeeper_protocol::{exit, keys};
use k8s_openapi::api::core::v1::{
    NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, Toleration,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use serde_json::{Value, json};

fn cleanup_plan() -> MaintenanceJob {
    MaintenanceJob {
        namespace: "scylla".into(),
        name: "cleanup-sc-dc-r1-0".into(),
        owner: OwnerReference {
            api_version: "scylla.scylladb.com/v1".into(),
            kind: "ScyllaCluster".into(),
            name: "sc".into(),
            uid: "uid-sc".into(),
            controller: None,
            block_owner_deletion: Some(true),
        },
        operation: Operation::Cleanup(CleanupRequest {
            node_address: "sc-dc-r1-0.scylla.svc".into(),
            auth_token_file: "/etc/groundskeeper/agent/auth-token.yaml".into(),
            agent_ca_file: None,
            keyspaces: Vec::new(),
            mark_node_clean: false,
        }),
        target: "sc".into(),
        node: Some("sc-dc-r1-0".into()),
        extra_labels: BTreeMap::from([("scylla/rack".to_owned(), "r1".to_owned())]),
        annotations: BTreeMap::from([(keys::CLEANUP_TOKEN_RING_HASH.to_owned(), "hash==".to_owned())]),
        image: "registry.example/groundskeeper-job:1.0".into(),
        image_pull_policy: "IfNotPresent".into(),
        secret_files: vec![SecretFile {
            secret_name: "sc-auth-token".into(),
            key: keys::SCYLLA_AGENT_TOKEN_SECRET_KEY.into(),
            mount_path: "/etc/groundskeeper/agent/auth-token.yaml".into(),
        }],
        claim_volumes: Vec::new(),
        secret_folders: Vec::new(),
        scratch: None,
        scheduling: Scheduling {
            tolerations: vec![Toleration {
                key: Some("role".into()),
                operator: Some("Equal".into()),
                value: Some("scylla".into()),
                effect: Some("NoSchedule".into()),
                toleration_seconds: None,
            }],
            node_affinity: Some(NodeAffinity {
                required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                    node_selector_terms: vec![NodeSelectorTerm {
                        match_expressions: Some(vec![NodeSelectorRequirement {
                            key: "pool".into(),
                            operator: "In".into(),
                            values: Some(vec!["scylla".into()]),
                        }]),
                        match_fields: None,
                    }],
                }),
                preferred_during_scheduling_ignored_during_execution: None,
            }),
            node_selector: BTreeMap::from([("kubernetes.io/os".to_owned(), "linux".to_owned())]),
            ..Default::default()
        },
        resources: None,
        limits: JobLimits {
            backoff_limit: 4,
            active_deadline_seconds: 3600,
            ttl_seconds_after_finished: 600,
        },
    }
}

fn built() -> Value {
    serde_json::to_value(build_job(&cleanup_plan())).unwrap()
}

#[test]
fn job_identity_owner_labels_and_annotations() {
    let job = built();
    let meta = &job["metadata"];
    assert_eq!(meta["name"], "cleanup-sc-dc-r1-0");
    assert_eq!(meta["namespace"], "scylla");
    assert_eq!(meta["ownerReferences"][0]["controller"], true, "the owner always controls the Job");
    assert_eq!(meta["ownerReferences"][0]["kind"], "ScyllaCluster");
    assert_eq!(meta["ownerReferences"][0]["uid"], "uid-sc");
    let expected_labels = json!({
        "app.kubernetes.io/managed-by": "groundskeeper",
        "groundskeeper.dev/operation": "cleanup",
        "groundskeeper.dev/target": "sc",
        "groundskeeper.dev/node": "sc-dc-r1-0",
        "scylla/rack": "r1",
    });
    assert_eq!(meta["labels"], expected_labels);
    let template = &job["spec"]["template"]["metadata"];
    assert_eq!(template["labels"], expected_labels, "pods carry the Job's labels");
    for annotations in [&meta["annotations"], &template["annotations"]] {
        assert_eq!(annotations[keys::CLEANUP_TOKEN_RING_HASH], "hash==");
    }
}

#[test]
fn the_label_selector_matches_the_labels() {
    let labels = cleanup_plan().labels();
    for requirement in job_selector(OperationKind::Cleanup, "sc").split(',') {
        let (key, value) = requirement.split_once('=').unwrap();
        assert_eq!(labels.get(key).map(String::as_str), Some(value), "{requirement}");
    }
}

#[test]
fn limits_and_failure_policy() {
    let spec = &built()["spec"];
    assert_eq!(spec["backoffLimit"], 4);
    assert_eq!(spec["activeDeadlineSeconds"], 3600);
    assert_eq!(spec["ttlSecondsAfterFinished"], 600);
    assert_eq!(
        spec["podFailurePolicy"],
        json!({"rules": [
            {"action": "FailJob", "onExitCodes": {
                "containerName": "groundskeeper-job", "operator": "In", "values": [exit::BAD_INPUT]}},
            {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
        ]})
    );
    assert_eq!(spec["template"]["spec"]["restartPolicy"], "Never", "podFailurePolicy requires Never");
    // The runner's default grace period: it writes its result before SIGKILL only if the pod
    // gives it as long as it assumes.
    assert_eq!(
        spec["template"]["spec"]["terminationGracePeriodSeconds"],
        exit::TERMINATION_GRACE_PERIOD_SECONDS
    );
}

#[test]
fn pod_is_restricted_and_has_no_api_credentials() {
    let pod = &built()["spec"]["template"]["spec"];
    assert_eq!(pod["automountServiceAccountToken"], false);
    assert_eq!(
        pod["securityContext"],
        json!({
            "runAsNonRoot": true, "runAsUser": 65532, "runAsGroup": 65532, "fsGroup": 65532,
            "seccompProfile": {"type": "RuntimeDefault"},
        })
    );
    let containers = pod["containers"].as_array().unwrap();
    assert_eq!(containers.len(), 1);
    let container = &containers[0];
    assert_eq!(container["name"], "groundskeeper-job");
    assert_eq!(container["image"], "registry.example/groundskeeper-job:1.0");
    assert_eq!(container["imagePullPolicy"], "IfNotPresent");
    assert_eq!(
        container["args"],
        json!([
            "cleanup",
            "--node-address",
            "sc-dc-r1-0.scylla.svc",
            "--auth-token-file",
            "/etc/groundskeeper/agent/auth-token.yaml"
        ])
    );
    assert_eq!(container["terminationMessagePath"], "/dev/termination-log");
    assert_eq!(container["terminationMessagePolicy"], "File");
    let security = &container["securityContext"];
    assert_eq!(security["readOnlyRootFilesystem"], true);
    assert_eq!(security["allowPrivilegeEscalation"], false);
    assert_eq!(security["capabilities"], json!({"drop": ["ALL"]}));
    assert_eq!(security["runAsNonRoot"], true);
}

#[test]
fn secret_is_mounted_read_only_and_tmp_is_a_small_empty_dir() {
    let pod = &built()["spec"]["template"]["spec"];
    let volumes = pod["volumes"].as_array().unwrap();
    let mounts = pod["containers"][0]["volumeMounts"].as_array().unwrap();
    let tmp = volumes.iter().find(|v| v["emptyDir"].is_object()).expect("an emptyDir volume");
    assert_eq!(tmp["emptyDir"]["sizeLimit"], "64Mi");
    let tmp_mount = mounts.iter().find(|m| m["name"] == tmp["name"]).unwrap();
    assert_eq!(tmp_mount["mountPath"], "/tmp");

    let secret = volumes.iter().find(|v| v["secret"].is_object()).expect("a secret volume");
    assert_eq!(secret["secret"]["secretName"], "sc-auth-token");
    assert_eq!(secret["secret"]["items"], json!([{"key": "auth-token.yaml", "path": "auth-token.yaml"}]));
    let secret_mount = mounts.iter().find(|m| m["name"] == secret["name"]).unwrap();
    assert_eq!(secret_mount["readOnly"], true);
    assert_eq!(secret_mount["mountPath"], "/etc/groundskeeper/agent/auth-token.yaml");
    assert_eq!(secret_mount["subPath"], "auth-token.yaml");
}

#[test]
fn scheduling_is_copied() {
    let pod = &built()["spec"]["template"]["spec"];
    assert_eq!(pod["tolerations"][0]["key"], "role");
    assert_eq!(pod["tolerations"][0]["effect"], "NoSchedule");
    assert_eq!(
        pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
            [0]["matchExpressions"][0]["key"],
        "pool"
    );
    assert!(pod["affinity"].get("podAffinity").is_none());
    assert_eq!(pod["nodeSelector"], json!({"kubernetes.io/os": "linux"}));
}

#[test]
fn empty_scheduling_and_no_node_leave_the_fields_out() {
    let plan = MaintenanceJob {
        node: None,
        annotations: BTreeMap::new(),
        scheduling: Scheduling::default(),
        secret_files: vec![],
        claim_volumes: Vec::new(),
        secret_folders: Vec::new(),
        scratch: None,
        ..cleanup_plan()
    };
    let job = serde_json::to_value(build_job(&plan)).unwrap();
    let pod = &job["spec"]["template"]["spec"];
    for absent in ["tolerations", "affinity", "nodeSelector"] {
        assert!(pod.get(absent).is_none(), "{absent} should be absent: {pod}");
    }
    assert!(job["metadata"]["labels"].get(keys::NODE_LABEL).is_none());
    assert!(job["metadata"].get("annotations").is_none());
    assert_eq!(pod["volumes"].as_array().unwrap().len(), 1, "only /tmp");
}

#[test]
fn the_job_round_trips_through_the_typed_api() {
    // What the API server would read back: no field is lost in (de)serialisation.
    let job = build_job(&cleanup_plan());
    let json = serde_json::to_string(&job).unwrap();
    let back: k8s_openapi::api::batch::v1::Job = serde_json::from_str(&json).unwrap();
    assert_eq!(back, job);
}
