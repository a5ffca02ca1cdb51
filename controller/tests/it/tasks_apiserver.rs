//! MaintenanceTasks against the in-memory API server, with the controller's own token: the
//! resource is served, `manifests/` grants what running tasks takes (create, list, status
//! writes, delete) and no more, and the pure queue and lifecycle drive a real round of writes.

use groundskeeper_api::MaintenanceTask;
use groundskeeper_api::maintenance_task::{QUEUED, READY};
use groundskeeper_api::maintenance_task::{TaskState, TaskType};
use groundskeeper_controller::tasks::{
    Decision, TargetFacts, TargetTasks, apply_decision, complete, decide, group_by_target,
};
use groundskeeper_e2e::apiserver::ApiServer;
use groundskeeper_e2e::apiserver::rbac::{CONTROLLER_TOKEN, controller_grants};
use groundskeeper_e2e::fixtures;
use jiff::Timestamp;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Error, ResourceExt};
use serde_json::json;

const NAMESPACE: &str = "etcd";

fn task(name: &str, task_type: &str) -> MaintenanceTask {
    serde_json::from_value(fixtures::task(NAMESPACE, name, task_type).origin("automatic").json()).unwrap()
}

async fn server() -> (ApiServer, Api<MaintenanceTask>) {
    let server = ApiServer::builder().authorize(CONTROLLER_TOKEN, controller_grants()).start().await.unwrap();
    let tasks = Api::namespaced(server.client_with_token(CONTROLLER_TOKEN), NAMESPACE);
    (server, tasks)
}

/// One round: list, decide per target, write every status that changed, delete what expired.
async fn reconcile(tasks: &Api<MaintenanceTask>, facts: TargetFacts, now: Timestamp) {
    let listed = tasks.list(&ListParams::default()).await.unwrap().items;
    for (key, views) in group_by_target(&listed, now) {
        let input = TargetTasks {
            target: key.target,
            facts: facts.clone(),
            tasks: views,
            window: None,
            suspensions: Vec::new(),
        };
        for decided in decide(&input, now).decisions {
            if decided.decision == Decision::Delete {
                tasks.delete(&decided.name, &DeleteParams::default()).await.unwrap();
                continue;
            }
            let task = listed.iter().find(|t| t.name_any() == decided.name).unwrap();
            let before = task.status.clone().unwrap_or_default();
            let after = apply_decision(before.clone(), &decided.decision, task.metadata.generation, now);
            if after != before {
                let patch = Patch::Merge(json!({ "status": after }));
                tasks.patch_status(&decided.name, &PatchParams::default(), &patch).await.unwrap();
            }
        }
    }
}

fn state_of(task: &MaintenanceTask) -> Option<TaskState> {
    task.status.as_ref().and_then(|s| s.state)
}

fn condition(task: &MaintenanceTask, type_: &str) -> (String, String, String) {
    let c = task
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == type_))
        .unwrap_or_else(|| panic!("{}: no {type_} condition", task.name_any()));
    (c.status.clone(), c.reason.clone(), c.message.clone())
}

#[tokio::test]
async fn a_round_of_decisions_is_written_with_the_controllers_rights() {
    let (_server, tasks) = server().await;
    for (name, task_type) in [("compact-1", "Compact"), ("defrag-1", "Defragment"), ("compact-2", "Compact")]
    {
        tasks.create(&PostParams::default(), &task(name, task_type)).await.unwrap();
    }
    let now = Timestamp::now();
    reconcile(&tasks, TargetFacts::Ready, now).await;

    let compact = tasks.get_status("compact-1").await.unwrap();
    assert_eq!(state_of(&compact), Some(TaskState::InProgress));
    assert_eq!(condition(&compact, QUEUED).1, "Started");
    let defrag = tasks.get_status("defrag-1").await.unwrap();
    assert_eq!(state_of(&defrag), Some(TaskState::Pending));
    let (status, reason, message) = condition(&defrag, QUEUED);
    assert_eq!((status.as_str(), reason.as_str()), ("True", "QueuedBehindTask"));
    assert!(message.starts_with("queued behind MaintenanceTask compact-1"), "{message}");
    let duplicate = tasks.get_status("compact-2").await.unwrap();
    assert_eq!(state_of(&duplicate), Some(TaskState::Rejected));
    assert_eq!(duplicate.status.as_ref().unwrap().last_errors[0].code, "Duplicate");

    // Deciding again at once writes nothing new: every status read back equals what the
    // decisions produce.
    let versions =
        |list: Vec<MaintenanceTask>| -> Vec<_> { list.iter().map(|t| t.resource_version()).collect() };
    let before = versions(tasks.list(&ListParams::default()).await.unwrap().items);
    reconcile(&tasks, TargetFacts::Ready, now).await;
    assert_eq!(versions(tasks.list(&ListParams::default()).await.unwrap().items), before);

    // The running task completes (status written back with its resourceVersion); the queue
    // moves on to the next.
    let mut compact = tasks.get_status("compact-1").await.unwrap();
    compact.status = Some(complete(compact.status.unwrap(), "compacted", Some(1), now));
    let compact = tasks.replace_status("compact-1", &PostParams::default(), &compact).await.unwrap();
    assert_eq!(condition(&compact, READY).0, "True");
    reconcile(&tasks, TargetFacts::Ready, now).await;
    assert_eq!(state_of(&tasks.get("defrag-1").await.unwrap()), Some(TaskState::InProgress));

    // An hour later (the default TTL) the finished tasks are deleted; the running one stays.
    let later = now.checked_add(jiff::SignedDuration::from_secs(3600)).unwrap();
    reconcile(&tasks, TargetFacts::Ready, later).await;
    let left: Vec<_> =
        tasks.list(&ListParams::default()).await.unwrap().items.iter().map(ResourceExt::name_any).collect();
    assert_eq!(left, vec!["defrag-1"]);
}

#[tokio::test]
async fn the_controller_cannot_rewrite_a_task_spec() {
    let (_server, tasks) = server().await;
    let mut created = tasks.create(&PostParams::default(), &task("compact-1", "Compact")).await.unwrap();
    created.spec.task_type = TaskType::Defragment;
    let refused = tasks.replace("compact-1", &PostParams::default(), &created).await.unwrap_err();
    assert!(matches!(&refused, Error::Api(status) if status.code == 403), "{refused:?}");
}

#[tokio::test]
async fn a_task_of_a_missing_target_is_rejected_saying_so() {
    let (_server, tasks) = server().await;
    tasks.create(&PostParams::default(), &task("compact-1", "Compact")).await.unwrap();
    reconcile(&tasks, TargetFacts::Missing, Timestamp::now()).await;
    let rejected = tasks.get("compact-1").await.unwrap();
    assert_eq!(state_of(&rejected), Some(TaskState::Rejected));
    let (_, reason, message) = condition(&rejected, READY);
    assert_eq!(reason, "TargetNotFound");
    assert!(message.contains("EtcdCluster main does not exist"), "{message}");
}
