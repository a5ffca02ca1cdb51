//! What a user would watch with `kubectl get -w`: one line per object whenever what matters about
//! it changes (MaintenanceTasks, Jobs, finished pods with their termination message, member
//! Services' ring hashes,
//! groundskeeper's conditions, the EtcdCluster's status, Events).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use groundskeeper_e2e::apiserver::{ApiServer, Change, ChangeKind};
use groundskeeper_protocol::keys;
use serde_json::Value;

use crate::say;

/// The printer of the timeline, and how far it got.
pub struct Timeline {
    pub task: tokio::task::JoinHandle<()>,
    /// The resourceVersion of the last change printed (or skipped).
    shown_up_to: Arc<AtomicU64>,
}

impl Timeline {
    /// Waits (briefly) until every change committed so far is on screen, so a step's heading
    /// does not come before the lines of the step before it.
    pub async fn catch_up(&self, server: &ApiServer) {
        let committed = server.revision();
        for _ in 0..100 {
            if self.shown_up_to.load(Ordering::Acquire) >= committed {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }
}

/// Prints the timeline of every change on `server` until the server is gone.
pub fn spawn(server: &ApiServer) -> Timeline {
    let mut changes = server.subscribe();
    let shown_up_to = Arc::new(AtomicU64::new(server.revision()));
    let progress = shown_up_to.clone();
    let task = tokio::spawn(async move {
        // Last line shown per object and aspect: a change that alters nothing shown is skipped.
        let mut shown: HashMap<String, String> = HashMap::new();
        loop {
            let change = match changes.next().await {
                Ok(Some(change)) => change,
                Ok(None) => return,
                Err(lagged) => {
                    say::line(format!("(watch: {lagged})"));
                    continue;
                }
            };
            for (key, line) in describe(&change) {
                if shown.get(&key) != Some(&line) {
                    say::line(&line);
                    shown.insert(key, line);
                }
            }
            progress.store(change.revision, Ordering::Release);
        }
    });
    Timeline { task, shown_up_to }
}

/// (object key, line) pairs for what this change shows.
fn describe(change: &Change) -> Vec<(String, String)> {
    let object = &change.object;
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    let key = |aspect: &str| format!("{}/{name}/{aspect}", change.resource.plural);
    let line = match change.resource.plural.as_str() {
        "jobs" => job_line(change.kind, object),
        "maintenancetasks" => task_line(change.kind, object),
        "pods" => finished_pod_line(object),
        "services" => member_service_line(object),
        "scylladbdatacenters" | "scyllaclusters" => {
            conditions_line(&singular(&change.resource.plural), name, object, "Cleanup")
        }
        "etcdclusters" => {
            let status = etcd_status_line(name, object).map(|l| (key("status"), l));
            let conditions =
                conditions_line("etcdcluster", name, object, "Defrag").map(|l| (key("conditions"), l));
            return status.into_iter().chain(conditions).collect();
        }
        "events" if change.kind == ChangeKind::Added => event_line(object),
        _ => None,
    };
    line.map(|l| (key(""), l)).into_iter().collect()
}

fn singular(plural: &str) -> String {
    plural.trim_end_matches('s').to_owned()
}

/// `mtask/<name>  <type> of <target> (<origin>)  <state> <progress>`, as `kubectl get mtask` shows it.
fn task_line(kind: ChangeKind, task: &Value) -> Option<String> {
    let name = task["metadata"]["name"].as_str()?;
    let spec = &task["spec"];
    let origin = task["metadata"]["labels"][keys::ORIGIN_LABEL].as_str().unwrap_or("manual");
    let what = format!(
        "{} of {} ({origin})",
        spec["type"].as_str().unwrap_or("?"),
        spec["target"]["name"].as_str().unwrap_or("?")
    );
    let status = &task["status"];
    let state = match kind {
        ChangeKind::Deleted => "deleted".to_owned(),
        _ => format!(
            "{} {}",
            status["state"].as_str().unwrap_or("(new)"),
            status["progress"].as_str().unwrap_or("")
        ),
    };
    Some(format!("mtask/{name:<35} {what:<40} {}", state.trim_end()))
}

fn job_line(kind: ChangeKind, job: &Value) -> Option<String> {
    let name = job["metadata"]["name"].as_str()?;
    let labels = &job["metadata"]["labels"];
    let operation = labels[keys::OPERATION_LABEL].as_str().unwrap_or("?");
    let target = labels[keys::NODE_LABEL].as_str().or(labels[keys::TARGET_LABEL].as_str()).unwrap_or("?");
    let status = &job["status"];
    let state = if kind == ChangeKind::Deleted {
        "deleted".to_owned()
    } else if let Some(finished) = final_condition(status) {
        finished
    } else if status["active"].as_i64().unwrap_or(0) > 0 {
        "Running   0/1".to_owned()
    } else if kind == ChangeKind::Added {
        format!("created by groundskeeper: {operation} of {target}")
    } else {
        return None;
    };
    Some(format!("job/{name:<36} {state}"))
}

fn final_condition(status: &Value) -> Option<String> {
    let conditions = status["conditions"].as_array()?;
    let done = |type_: &str| conditions.iter().find(|c| c["type"] == type_ && c["status"] == "True");
    if done("Complete").is_some() {
        let took = seconds_between(&status["startTime"], &status["completionTime"]);
        return Some(format!("Complete  1/1  {took}"));
    }
    let failed = done("Failed")?;
    Some(format!(
        "Failed: {}: {}",
        failed["reason"].as_str().unwrap_or_default(),
        failed["message"].as_str().unwrap_or_default()
    ))
}

fn seconds_between(start: &Value, end: &Value) -> String {
    let parse = |v: &Value| v.as_str()?.parse::<jiff::Timestamp>().ok();
    match (parse(start), parse(end)) {
        (Some(start), Some(end)) => format!("{}s", end.as_second() - start.as_second()),
        _ => String::new(),
    }
}

/// A pod that ended, with what the runner left in its termination message.
fn finished_pod_line(pod: &Value) -> Option<String> {
    let phase = pod["status"]["phase"].as_str()?;
    if phase != "Succeeded" && phase != "Failed" {
        return None;
    }
    let name = pod["metadata"]["name"].as_str()?;
    let terminated = &pod["status"]["containerStatuses"][0]["state"]["terminated"];
    let exit_code = terminated["exitCode"].as_i64().unwrap_or(-1);
    let message = terminated["message"].as_str().unwrap_or_default();
    Some(format!(
        "pod/{name:<36} {phase}, exit {exit_code}; termination message: {}",
        summarize_result(message)
    ))
}

/// `outcome: message` of a result JSON (the runner's termination message), else the text.
fn summarize_result(message: &str) -> String {
    match serde_json::from_str::<Value>(message) {
        Ok(result) => format!(
            "{} ({} ms): {}",
            result["outcome"].as_str().unwrap_or("?"),
            result["durationMs"].as_u64().unwrap_or_default(),
            result["message"].as_str().unwrap_or_default()
        ),
        Err(_) => message.to_owned(),
    }
}

/// A Scylla node's ring hashes: whether it is clean for the ring it sees.
fn member_service_line(service: &Value) -> Option<String> {
    let labels = &service["metadata"]["labels"];
    if labels[keys::SCYLLA_SERVICE_TYPE_LABEL] != keys::SCYLLA_SERVICE_TYPE_MEMBER {
        return None;
    }
    let name = service["metadata"]["name"].as_str()?;
    let annotations = &service["metadata"]["annotations"];
    let current = annotations[keys::CURRENT_TOKEN_RING_HASH].as_str().unwrap_or_default();
    let state = match annotations[keys::LAST_CLEANED_UP_TOKEN_RING_HASH].as_str() {
        None => format!("ring {}, joined: not cleaned for any ring yet", say::short_hash(current)),
        Some(last) if last == current => format!("ring {}, clean for it", say::short_hash(current)),
        Some(last) => format!(
            "ring {}, last cleaned for ring {}: needs cleanup",
            say::short_hash(current),
            say::short_hash(last)
        ),
    };
    Some(format!("service/{name:<32} {state}"))
}

/// The conditions whose type starts with `prefix` (groundskeeper's own), other controllers'
/// left out.
fn conditions_line(kind: &str, name: &str, object: &Value, prefix: &str) -> Option<String> {
    let ours: Vec<String> = object["status"]["conditions"]
        .as_array()?
        .iter()
        .filter(|c| c["type"].as_str().is_some_and(|t| t.starts_with(prefix)))
        .map(|c| {
            format!(
                "{}={} ({})",
                c["type"].as_str().unwrap_or_default(),
                c["status"].as_str().unwrap_or_default(),
                c["reason"].as_str().unwrap_or_default()
            )
        })
        .collect();
    (!ours.is_empty()).then(|| format!("{kind}/{name} conditions: {}", ours.join(", ")))
}

/// Members with their sizes and fragmentation, as the controller last observed them.
fn etcd_status_line(name: &str, cluster: &Value) -> Option<String> {
    let status = &cluster["status"];
    let members: Vec<String> = status["members"]
        .as_array()?
        .iter()
        .map(|m| {
            let leader = if m["leader"] == true { "*" } else { "" };
            format!(
                "{}{leader} {} ({:.0}% fragmented)",
                m["name"].as_str().unwrap_or_default(),
                say::mib(m["dbSize"].as_i64().unwrap_or_default()),
                m["fragmentationPercent"].as_f64().unwrap_or_default()
            )
        })
        .collect();
    let task =
        status["activeTask"].as_str().map(|t| format!(", task {t} queued or running")).unwrap_or_default();
    Some(format!(
        "etcdcluster/{name} {}/{} healthy: {}{task}",
        status["healthyMembers"].as_i64().unwrap_or_default(),
        status["memberCount"].as_i64().unwrap_or_default(),
        members.join(", ")
    ))
}

fn event_line(event: &Value) -> Option<String> {
    let regarding = &event["regarding"];
    Some(format!(
        "event {} {} on {}/{}: {}",
        event["type"].as_str()?,
        event["reason"].as_str()?,
        regarding["kind"].as_str().unwrap_or_default().to_lowercase(),
        regarding["name"].as_str().unwrap_or_default(),
        event["note"].as_str().unwrap_or_default()
    ))
}
