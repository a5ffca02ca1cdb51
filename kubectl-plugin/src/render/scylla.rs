//! `scylla cleanup-status`: per node of a ScyllaCluster, the ring hashes, whether it needs a
//! cleanup and why, and the cleanup Jobs (groundskeeper's and scylla-operator's, told apart).

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Service;
use kube::ResourceExt;
use serde::Serialize;

use groundskeeper_api::scylla::ScyllaCluster;
use groundskeeper_api::scylla::coexistence::{NODE_JOB_TYPE_CLEANUP, NODE_JOB_TYPE_LABEL};
use groundskeeper_api::scylla::facts::{
    ClusterFacts, ConditionFacts, MemberFacts, cluster_facts, current_members, looks_like_ring_hash,
    operator_cleanup, precondition_failures, sorted_members,
};
use groundskeeper_protocol::keys;

use super::{age, indent, table};

/// Label scylla-operator puts on its per-node Jobs, and its value on cleanup Jobs.
pub const SCYLLA_OPERATOR_NODE_JOB_TYPE: &str = "scylla-operator.scylladb.com/node-job-type";
pub const SCYLLA_OPERATOR_CLEANUP: &str = "Cleanup";

/// One node, as the screen shows it (and `-o json|yaml` prints it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeCleanup {
    pub node: String,
    pub datacenter: String,
    pub rack: String,
    pub current_ring_hash: Option<String>,
    pub last_cleaned_ring_hash: Option<String>,
    /// `yes`, `no` or `unknown`.
    pub needs_cleanup: String,
    pub why: String,
    /// Cleanup Jobs of this node still running.
    pub running_jobs: Vec<String>,
}

/// A cleanup Job of the cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CleanupJob {
    pub name: String,
    pub node: String,
    /// `groundskeeper` or `scylla-operator`.
    pub by: String,
    /// groundskeeper's: the task it runs for.
    pub task: Option<String>,
    /// `Running`, `Succeeded` or `Failed`.
    pub state: String,
    pub ring_hash: Option<String>,
    #[serde(skip)]
    pub created: Option<Timestamp>,
}

/// The whole view, for `-o json|yaml`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CleanupStatus {
    pub namespace: String,
    pub cluster: String,
    /// Why no cleanup may start now (empty: it may).
    pub blocked_by: Vec<String>,
    /// Who cleans the cluster after a ring change: scylla-operator's own cleanup controller
    /// (groundskeeper's automatic trigger then stands back), or groundskeeper.
    pub cleaned_by: String,
    pub nodes: Vec<NodeCleanup>,
    pub jobs: Vec<CleanupJob>,
}

/// Whether a node needs a cleanup, and why, from its annotations.
pub fn need_of(member: &MemberFacts) -> (&'static str, String) {
    let current = member.annotations.get(keys::CURRENT_TOKEN_RING_HASH);
    let last = member.annotations.get(keys::LAST_CLEANED_UP_TOKEN_RING_HASH);
    match (current, last) {
        (Some(c), _) if !looks_like_ring_hash(c) => (
            "unknown",
            "current-token-ring-hash is not a ring hash; remove it so it is computed again".into(),
        ),
        (None, _) => (
            "unknown",
            "no current ring hash yet: the node is joining, or its hash was not observed yet".into(),
        ),
        (Some(_), None) => (
            "maybe",
            "never recorded as cleaned: seeded with the current hash if it joined alone, cleaned once if \
             it joined together with others (what each held cannot be known)"
                .into(),
        ),
        (Some(_), Some(l)) if l == keys::NEVER_CLEANED_UP => {
            ("yes", "marked NeverCleanedUp: needs one cleanup".into())
        }
        (Some(_), Some(l)) if !looks_like_ring_hash(l) => (
            "unknown",
            format!("last-cleaned-up-token-ring-hash is neither a ring hash nor {}", keys::NEVER_CLEANED_UP),
        ),
        (Some(c), Some(l)) if c == l => ("no", "cleaned for the current ring".into()),
        (Some(_), Some(_)) => (
            "yes",
            "the ring changed since its last cleanup (unless only nodes left, which the controller settles)"
                .into(),
        ),
    }
}

fn job_state(job: &Job) -> &'static str {
    let conditions = job.status.as_ref().and_then(|s| s.conditions.clone()).unwrap_or_default();
    let is = |type_: &str| conditions.iter().any(|c| c.type_ == type_ && c.status == "True");
    if is("Complete") {
        "Succeeded"
    } else if is("Failed") {
        "Failed"
    } else {
        "Running"
    }
}

/// The cleanup Jobs of `cluster` among `jobs`: groundskeeper's (its labels) and
/// scylla-operator's (`node-job-type: Cleanup`, named `cleanup-<member>`).
pub fn cleanup_jobs(cluster: &str, jobs: &[Job]) -> Vec<CleanupJob> {
    let mut found: Vec<CleanupJob> = jobs
        .iter()
        .filter_map(|job| {
            let labels = job.labels();
            let label = |key: &str| labels.get(key).map(String::as_str);
            let (by, node, task) = if label(keys::MANAGED_BY_LABEL) == Some(keys::MANAGED_BY)
                && label(keys::OPERATION_LABEL) == Some("cleanup")
                && label(keys::TARGET_LABEL) == Some(cluster)
            {
                (
                    "groundskeeper",
                    label(keys::NODE_LABEL).unwrap_or_default().to_owned(),
                    label(keys::TASK_LABEL).map(str::to_owned),
                )
            } else if label(SCYLLA_OPERATOR_NODE_JOB_TYPE) == Some(SCYLLA_OPERATOR_CLEANUP)
                && label(keys::SCYLLA_CLUSTER_LABEL) == Some(cluster)
            {
                let name = job.name_any();
                let node = name.strip_prefix("cleanup-").unwrap_or(&name).to_owned();
                ("scylla-operator", node, None)
            } else {
                return None;
            };
            Some(CleanupJob {
                name: job.name_any(),
                node,
                by: by.to_owned(),
                task,
                state: job_state(job).to_owned(),
                ring_hash: job.annotations().get(keys::CLEANUP_TOKEN_RING_HASH).cloned(),
                created: job.metadata.creation_timestamp.as_ref().map(|t| t.0),
            })
        })
        .collect();
    found.sort_by(|a, b| (&a.node, &a.name).cmp(&(&b.node, &b.name)));
    found
}

/// The view of `cluster` from its member Services and the namespace's Jobs.
/// `datacenter_conditions`: the conditions of the cluster's ScyllaDBDatacenter (where
/// scylla-operator writes its Job controller's first), empty where there is none.
pub fn cleanup_status(
    cluster: &ScyllaCluster,
    datacenter_conditions: &[ConditionFacts],
    services: &[Service],
    jobs: &[Job],
) -> CleanupStatus {
    let facts = cluster_facts(cluster);
    let members = current_members(services);
    let all_jobs = jobs;
    let jobs = cleanup_jobs(&facts.name, jobs);
    let nodes = sorted_members(&members)
        .into_iter()
        .map(|member| {
            let (needs, why) = need_of(member);
            NodeCleanup {
                node: member.service.clone(),
                datacenter: member.datacenter.clone().unwrap_or_default(),
                rack: member.rack.clone().unwrap_or_default(),
                current_ring_hash: member.annotations.get(keys::CURRENT_TOKEN_RING_HASH).cloned(),
                last_cleaned_ring_hash: member
                    .annotations
                    .get(keys::LAST_CLEANED_UP_TOKEN_RING_HASH)
                    .cloned(),
                needs_cleanup: needs.to_owned(),
                why,
                running_jobs: jobs
                    .iter()
                    .filter(|j| j.node == member.service && j.state == "Running")
                    .map(|j| format!("{} ({})", j.name, j.by))
                    .collect(),
            }
        })
        .collect();
    CleanupStatus {
        namespace: facts.namespace.clone(),
        cluster: facts.name.clone(),
        blocked_by: precondition_failures(&facts),
        cleaned_by: cleaned_by(&facts, datacenter_conditions, all_jobs),
        nodes,
        jobs,
    }
}

/// Who cleans `cluster` after a ring change, as the controller's coexistence rules see it.
fn cleaned_by(cluster: &ClusterFacts, datacenter_conditions: &[ConditionFacts], jobs: &[Job]) -> String {
    let theirs: Vec<Job> = jobs
        .iter()
        .filter(|job| {
            let labels = job.labels();
            labels.get(NODE_JOB_TYPE_LABEL).map(String::as_str) == Some(NODE_JOB_TYPE_CLEANUP)
                && labels.get(keys::SCYLLA_CLUSTER_LABEL) == Some(&cluster.name)
        })
        .cloned()
        .collect();
    match operator_cleanup(cluster, datacenter_conditions, &theirs).active {
        Some(signal) => format!(
            "scylla-operator's own cleanup controller ({}): groundskeeper's automatic ring-hash \
             trigger stands back; manual tasks wait for the nodes it still owes",
            signal.describe()
        ),
        None => "groundskeeper (no sign of scylla-operator's own cleanup controller)".to_owned(),
    }
}

/// A ring hash, short enough for a table: its first 12 characters.
fn short_hash(hash: &Option<String>) -> String {
    match hash {
        Some(h) if h.chars().count() > 12 => format!("{}…", h.chars().take(12).collect::<String>()),
        Some(h) => h.clone(),
        None => "-".to_owned(),
    }
}

/// The screen.
pub fn render(view: &CleanupStatus, now: Timestamp) -> String {
    let mut out = format!("ScyllaCluster {}/{}\n", view.namespace, view.cluster);
    if view.blocked_by.is_empty() {
        out.push_str("  Cleanup may start: yes (the cluster is settled)\n");
    } else {
        out.push_str(&format!("  Cleanup may start: no: {}\n", view.blocked_by.join("; ")));
    }
    out.push_str(&format!("  Cleaned by: {}\n", view.cleaned_by));
    let needing = view.nodes.iter().filter(|n| n.needs_cleanup == "yes").count();
    out.push_str(&format!("  Nodes needing cleanup: {needing} of {}\n", view.nodes.len()));
    out.push_str("\nNodes:\n");
    if view.nodes.is_empty() {
        out.push_str("  no member Services found\n");
    } else {
        let rows: Vec<Vec<String>> = view
            .nodes
            .iter()
            .map(|n| {
                vec![
                    n.node.clone(),
                    format!("{}/{}", n.datacenter, n.rack),
                    short_hash(&n.current_ring_hash),
                    short_hash(&n.last_cleaned_ring_hash),
                    n.needs_cleanup.clone(),
                    if n.running_jobs.is_empty() { "-".to_owned() } else { n.running_jobs.join(", ") },
                    n.why.clone(),
                ]
            })
            .collect();
        out.push_str(&indent(&table(
            &["NODE", "DC/RACK", "CURRENT RING", "LAST CLEANED", "NEEDS CLEANUP", "RUNNING JOB", "WHY"],
            &rows,
        )));
    }
    out.push_str("\nCleanup Jobs:\n");
    if view.jobs.is_empty() {
        out.push_str("  none\n");
    } else {
        let rows: Vec<Vec<String>> = view
            .jobs
            .iter()
            .map(|j| {
                vec![
                    j.name.clone(),
                    j.node.clone(),
                    match &j.task {
                        Some(task) => format!("{} (task {task})", j.by),
                        None => j.by.clone(),
                    },
                    j.state.clone(),
                    short_hash(&j.ring_hash),
                    j.created.map(|c| age(now, c)).unwrap_or_else(|| "-".into()),
                ]
            })
            .collect();
        out.push_str(&indent(&table(&["NAME", "NODE", "BY", "STATE", "FOR RING", "AGE"], &rows)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const H1: &str =
        "znqy/aBReVlJDtCopwdiTnIM/tKxDLyBD1vT1hPmz5EYmdT7+UkkYYNPRleGTwkiVwsMedQOnzz9VJGQYMEcNg==";
    const H2: &str =
        "AAAA/aBReVlJDtCopwdiTnIM/tKxDLyBD1vT1hPmz5EYmdT7+UkkYYNPRleGTwkiVwsMedQOnzz9VJGQYMEcNg==";

    fn member(name: &str, annotations: &[(&str, &str)]) -> MemberFacts {
        MemberFacts {
            service: name.into(),
            datacenter: Some("dc".into()),
            rack: Some("a".into()),
            annotations: annotations.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            ..MemberFacts::default()
        }
    }

    #[test]
    fn why_a_node_needs_cleanup_or_not() {
        let cur = keys::CURRENT_TOKEN_RING_HASH;
        let last = keys::LAST_CLEANED_UP_TOKEN_RING_HASH;
        type Annotations<'a> = &'a [(&'a str, &'a str)];
        let cases: &[(Annotations, &str, &str)] = &[
            (&[(cur, H1), (last, H1)], "no", "cleaned for the current ring"),
            (&[(cur, H2), (last, H1)], "yes", "the ring changed since its last cleanup"),
            (&[(cur, H1), (last, "NeverCleanedUp")], "yes", "NeverCleanedUp"),
            (&[(cur, H1)], "maybe", "joined alone"),
            (&[(last, H1)], "unknown", "no current ring hash yet"),
            (&[(cur, "junk"), (last, H1)], "unknown", "not a ring hash"),
            (&[(cur, H1), (last, "junk")], "unknown", "neither a ring hash nor NeverCleanedUp"),
        ];
        for (annotations, needs, why) in cases {
            let (got_needs, got_why) = need_of(&member("n", annotations));
            assert_eq!(got_needs, *needs, "{annotations:?}");
            assert!(got_why.contains(why), "{annotations:?}: {got_why}");
        }
    }

    fn job(name: &str, labels: serde_json::Value, complete: bool) -> Job {
        let conditions = if complete { json!([{"type": "Complete", "status": "True"}]) } else { json!([]) };
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "scylla", "labels": labels, "creationTimestamp": "2026-11-23T20:00:00Z",
                         "annotations": {keys::CLEANUP_TOKEN_RING_HASH: H1}},
            "status": {"conditions": conditions}
        }))
        .unwrap()
    }

    #[test]
    fn jobs_of_groundskeeper_and_of_scylla_operator_are_told_apart() {
        let jobs = vec![
            job(
                "t-0",
                json!({"app.kubernetes.io/managed-by": "groundskeeper", "groundskeeper.dev/operation": "cleanup",
                              "groundskeeper.dev/target": "db", "groundskeeper.dev/node": "db-dc-a-0", "groundskeeper.dev/task": "t"}),
                false,
            ),
            job(
                "cleanup-db-dc-a-1",
                json!({"scylla-operator.scylladb.com/node-job-type": "Cleanup", "scylla/cluster": "db"}),
                true,
            ),
            job(
                "cleanup-other-dc-a-0",
                json!({"scylla-operator.scylladb.com/node-job-type": "Cleanup", "scylla/cluster": "other"}),
                false,
            ),
            job("unrelated", json!({"app": "x"}), false),
        ];
        let got = cleanup_jobs("db", &jobs);
        let brief: Vec<(&str, &str, &str, Option<&str>, &str)> = got
            .iter()
            .map(|j| (j.name.as_str(), j.node.as_str(), j.by.as_str(), j.task.as_deref(), j.state.as_str()))
            .collect();
        assert_eq!(
            brief,
            vec![
                ("t-0", "db-dc-a-0", "groundskeeper", Some("t"), "Running"),
                ("cleanup-db-dc-a-1", "db-dc-a-1", "scylla-operator", None, "Succeeded"),
            ]
        );
    }

    /// scylla-operator's own cleanup is named from its ScyllaDBDatacenter's conditions too, where
    /// it writes them first.
    #[test]
    fn who_cleans_is_told_from_the_datacenters_conditions_too() {
        let cluster = ClusterFacts { name: "basic".into(), ..ClusterFacts::default() };
        assert!(cleaned_by(&cluster, &[], &[]).starts_with("groundskeeper"));
        let condition =
            ConditionFacts { type_: "JobControllerProgressing".into(), ..ConditionFacts::default() };
        let theirs = cleaned_by(&cluster, &[condition], &[]);
        assert!(theirs.starts_with("scylla-operator's own cleanup controller"), "{theirs}");
    }

    #[test]
    fn the_screen() {
        let view = CleanupStatus {
            namespace: "scylla".into(),
            cluster: "db".into(),
            blocked_by: vec![],
            cleaned_by: "groundskeeper".into(),
            nodes: vec![NodeCleanup {
                node: "db-dc-a-0".into(),
                datacenter: "dc".into(),
                rack: "a".into(),
                current_ring_hash: Some(H2.into()),
                last_cleaned_ring_hash: Some(H1.into()),
                needs_cleanup: "yes".into(),
                why: "the ring changed".into(),
                running_jobs: vec!["t-0 (groundskeeper)".into()],
            }],
            jobs: vec![CleanupJob {
                name: "t-0".into(),
                node: "db-dc-a-0".into(),
                by: "groundskeeper".into(),
                task: Some("t".into()),
                state: "Running".into(),
                ring_hash: Some(H2.into()),
                created: Some("2026-11-23T20:00:00Z".parse().unwrap()),
            }],
        };
        let got = render(&view, "2026-11-23T20:03:00Z".parse().unwrap());
        assert_eq!(
            got,
            "\
ScyllaCluster scylla/db
  Cleanup may start: yes (the cluster is settled)
  Cleaned by: groundskeeper
  Nodes needing cleanup: 1 of 1

Nodes:
  NODE        DC/RACK   CURRENT RING    LAST CLEANED    NEEDS CLEANUP   RUNNING JOB           WHY
  db-dc-a-0   dc/a      AAAA/aBReVlJ…   znqy/aBReVlJ…   yes             t-0 (groundskeeper)   the ring changed

Cleanup Jobs:
  NAME   NODE        BY                       STATE     FOR RING        AGE
  t-0    db-dc-a-0   groundskeeper (task t)   Running   AAAA/aBReVlJ…   3m
"
        );
    }
}
