//! `observe_job`: where a Job stands, and its result read back from the newest terminated pod.

use groundskeeper_controller::jobs::observe::observe;
use groundskeeper_controller::jobs::{Attempts, JobState, ResultError, observe_job};
use groundskeeper_protocol::result::CleanupReport;
use groundskeeper_protocol::{JobResult, Outcome, Report};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

const JOB_UID: &str = "uid-job";

fn job(conditions: Value, active: i32, failed: i32) -> Job {
    serde_json::from_value(json!({
        "metadata": {
            "name": "cleanup-sc-dc-r1-0", "namespace": "scylla", "uid": JOB_UID,
            "labels": {"groundskeeper.dev/operation": "cleanup"},
            "annotations": {"internal.scylla-operator.scylladb.com/cleanup-token-ring-hash": "h=="},
        },
        "status": {"conditions": conditions, "active": active, "failed": failed},
    }))
    .unwrap()
}

fn condition(type_: &str, reason: &str) -> Value {
    json!({"type": type_, "status": "True", "reason": reason, "message": format!("{type_} because {reason}")})
}

fn result(outcome: Outcome, node: &str) -> JobResult {
    let report = CleanupReport { node: node.into(), ..Default::default() };
    JobResult::new(Report::Cleanup(report), outcome, "2026-01-01T00:00:00Z".into(), 5)
}

/// A pod of the Job created at `created`, its container terminated with `message` (or running).
fn pod(name: &str, created: &str, terminated: Option<(i32, &str)>) -> Pod {
    let state = match terminated {
        Some((exit_code, message)) => {
            json!({"terminated": {"exitCode": exit_code, "reason": "Error", "message": message}})
        }
        None => json!({"running": {}}),
    };
    serde_json::from_value(json!({
        "metadata": {
            "name": name, "namespace": "scylla", "creationTimestamp": created,
            "labels": {"batch.kubernetes.io/job-name": "cleanup-sc-dc-r1-0", "job-name": "cleanup-sc-dc-r1-0"},
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "cleanup-sc-dc-r1-0",
                                 "uid": JOB_UID, "controller": true}],
        },
        "status": {"containerStatuses": [{
            "name": "groundskeeper-job", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
            "state": state,
        }]},
    }))
    .unwrap()
}

fn message(outcome: Outcome, node: &str) -> String {
    result(outcome, node).to_termination_message()
}

#[test]
fn states_from_conditions() {
    let ok = message(Outcome::Succeeded, "n1");
    let failed = message(Outcome::Failed, "n1");
    let succeeded_pod = [pod("p1", "2026-01-01T00:00:00Z", Some((0, &ok)))];
    let failed_pod = [pod("p1", "2026-01-01T00:00:00Z", Some((2, &failed)))];
    struct Case {
        name: &'static str,
        conditions: Value,
        pods: &'static str,
        want: &'static str,
        want_reason: &'static str,
    }
    let cases = [
        Case { name: "no conditions", conditions: json!([]), pods: "none", want: "running", want_reason: "" },
        Case {
            name: "only a False Failed condition",
            conditions: json!([{"type": "Failed", "status": "False"}]),
            pods: "none",
            want: "running",
            want_reason: "",
        },
        Case {
            name: "suspended is still running",
            conditions: json!([condition("Suspended", "JobSuspended")]),
            pods: "none",
            want: "running",
            want_reason: "",
        },
        Case {
            name: "complete",
            conditions: json!([
                condition("SuccessCriteriaMet", "CompletionsReached"),
                condition("Complete", "CompletionsReached")
            ]),
            pods: "succeeded",
            want: "succeeded",
            want_reason: "CompletionsReached",
        },
        Case {
            name: "success criteria met, pods not yet gone",
            conditions: json!([condition("SuccessCriteriaMet", "CompletionsReached")]),
            pods: "succeeded",
            want: "succeeded",
            want_reason: "CompletionsReached",
        },
        Case {
            name: "failed on bad input",
            conditions: json!([
                condition("FailureTarget", "PodFailurePolicy"),
                condition("Failed", "PodFailurePolicy")
            ]),
            pods: "failed",
            want: "failed",
            want_reason: "PodFailurePolicy",
        },
        Case {
            name: "failure target set, pods still terminating",
            conditions: json!([condition("FailureTarget", "BackoffLimitExceeded")]),
            pods: "failed",
            want: "failed",
            want_reason: "BackoffLimitExceeded",
        },
        Case {
            name: "deadline exceeded",
            conditions: json!([condition("Failed", "DeadlineExceeded")]),
            pods: "failed",
            want: "failed",
            want_reason: "DeadlineExceeded",
        },
    ];
    for case in cases {
        let pods: &[Pod] = match case.pods {
            "succeeded" => &succeeded_pod,
            "failed" => &failed_pod,
            _ => &[],
        };
        let state = observe_job(&job(case.conditions, 0, 0), pods);
        match (case.want, &state) {
            ("running", JobState::Running(_)) => {}
            ("succeeded", JobState::Succeeded(finished)) => {
                assert_eq!(finished.reason, case.want_reason, "{}", case.name);
                assert_eq!(finished.result.as_ref().unwrap().outcome, Outcome::Succeeded, "{}", case.name);
            }
            ("failed", JobState::Failed(finished)) => {
                assert_eq!(finished.reason, case.want_reason, "{}", case.name);
                assert!(finished.message.contains(case.want_reason), "{}", case.name);
                assert_eq!(finished.result.as_ref().unwrap().outcome, Outcome::Failed, "{}", case.name);
            }
            _ => panic!("{}: wanted {}, got {state:?}", case.name, case.want),
        }
    }
}

#[test]
fn running_counts_attempts() {
    let state = observe_job(&job(json!([]), 1, 2), &[]);
    assert_eq!(state, JobState::Running(Attempts { active: 1, failed: 2 }));
}

#[test]
fn the_newest_terminated_pod_wins() {
    let first = message(Outcome::Failed, "first-attempt");
    let second = message(Outcome::Succeeded, "second-attempt");
    let pods = [
        pod("p-b", "2026-01-01T00:05:00Z", Some((0, &second))),
        pod("p-a", "2026-01-01T00:00:00Z", Some((1, &first))),
        // Newest of all, but still running: it has no result yet.
        pod("p-c", "2026-01-01T00:09:00Z", None),
    ];
    let JobState::Succeeded(finished) =
        observe_job(&job(json!([condition("Complete", "CompletionsReached")]), 0, 1), &pods)
    else {
        panic!("expected success");
    };
    let Report::Cleanup(report) = finished.result.unwrap().report else {
        panic!("expected a cleanup report")
    };
    assert_eq!(report.node, "second-attempt");
}

#[test]
fn unreadable_results_are_errors_naming_the_pod() {
    let complete = || job(json!([condition("Complete", "CompletionsReached")]), 0, 0);
    let cases: Vec<(&str, Vec<Pod>, ResultError)> = vec![
        (
            "malformed",
            vec![pod("p1", "2026-01-01T00:00:00Z", Some((0, "panicked at src/main.rs")))],
            ResultError::Malformed {
                job: "scylla/cleanup-sc-dc-r1-0".into(),
                pod: "p1".into(),
                error: "expected value at line 1 column 1".into(),
            },
        ),
        (
            "empty message",
            vec![pod("p1", "2026-01-01T00:00:00Z", Some((137, "")))],
            ResultError::Empty {
                job: "scylla/cleanup-sc-dc-r1-0".into(),
                pod: "p1".into(),
                exit_code: 137,
                reason: "Error".into(),
            },
        ),
        ("no pods left", vec![], ResultError::NoPod { job: "scylla/cleanup-sc-dc-r1-0".into() }),
        (
            "no pod terminated",
            vec![pod("p1", "2026-01-01T00:00:00Z", None)],
            ResultError::NotTerminated { job: "scylla/cleanup-sc-dc-r1-0".into() },
        ),
    ];
    for (name, pods, want) in cases {
        let JobState::Succeeded(finished) = observe_job(&complete(), &pods) else {
            panic!("{name}: the Job's conditions decide the state, not its pods");
        };
        let err = finished.result.unwrap_err();
        assert_eq!(err, want, "{name}");
        let text = err.to_string();
        assert!(text.contains("scylla/cleanup-sc-dc-r1-0"), "{name}: {text}");
    }
    let err = ResultError::Malformed { job: "scylla/j".into(), pod: "p1".into(), error: "e".into() };
    assert!(err.to_string().contains("pod p1"));
}

#[test]
fn pods_of_another_job_or_an_older_job_of_the_same_name_are_ignored() {
    let stale = message(Outcome::Failed, "old-job");
    let mut old_job_pod = pod("p-old", "2026-01-01T00:09:00Z", Some((1, &stale)));
    old_job_pod.metadata.owner_references.as_mut().unwrap()[0].uid = "uid-of-a-deleted-job".into();
    let mut other_job_pod = pod("p-other", "2026-01-01T00:09:00Z", Some((1, &stale)));
    other_job_pod
        .metadata
        .labels
        .as_mut()
        .unwrap()
        .insert("batch.kubernetes.io/job-name".into(), "other".into());
    let ours = message(Outcome::Succeeded, "this-job");
    let pods = [old_job_pod, other_job_pod, pod("p-new", "2026-01-01T00:01:00Z", Some((0, &ours)))];
    let JobState::Succeeded(finished) =
        observe_job(&job(json!([condition("Complete", "CompletionsReached")]), 0, 0), &pods)
    else {
        panic!("expected success");
    };
    let Report::Cleanup(report) = finished.result.unwrap().report else { panic!() };
    assert_eq!(report.node, "this-job");
}

#[test]
fn observation_carries_identity_and_annotations() {
    let observation = observe(&job(json!([]), 1, 0), &[]);
    assert_eq!(observation.namespace, "scylla");
    assert_eq!(observation.name, "cleanup-sc-dc-r1-0");
    assert_eq!(
        observation.annotations["internal.scylla-operator.scylladb.com/cleanup-token-ring-hash"],
        "h=="
    );
    assert_eq!(observation.labels["groundskeeper.dev/operation"], "cleanup");
    assert!(!observation.deleting);
}
