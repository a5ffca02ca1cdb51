//! Scylla: a settled 3-node cluster is scaled out to 6; groundskeeper cleans the 3 old nodes, at
//! most one per rack at a time, and leaves the new ones alone.

use std::time::{Duration, Instant};

use groundskeeper_e2e::scylla_operator::{Racks, ring_hash_of, scylla_datacenters, services};
use groundskeeper_protocol::keys;

use crate::stage::{AGENT_TOKEN, Stage};
use crate::wait_until;

pub const BEFORE: &Racks = &[("a", 2), ("b", 1)];
pub const AFTER: &Racks = &[("a", 4), ("b", 2)];
/// Guards against a walk-through that never settles; not a performance bound.
const GUARD: Duration = Duration::from_secs(60);
const PROGRESSING: &str = "CleanupControllerProgressing";

/// One node after the walk-through, for the final table.
pub struct NodeRow {
    pub name: String,
    pub new_in_scale_out: bool,
    pub cleaned_keyspaces: Vec<String>,
    pub clean_for_new_ring: bool,
}

pub struct ScyllaOutcome {
    pub nodes: Vec<NodeRow>,
    /// From the scale-out until every node is clean and the controller reports it.
    pub took: Duration,
}

pub async fn walk(stage: &Stage) -> Result<ScyllaOutcome, String> {
    let scylla = &stage.scylla;
    stage
        .step(format!(
            "ScyllaCluster {}/{}: 3 nodes (rack a: 2, rack b: 1), each clean for the ring it sees",
            scylla.namespace, scylla.cluster
        ))
        .await;
    scylla
        .create(&stage.server, BEFORE, true, AGENT_TOKEN)
        .map_err(|e| format!("creating the ScyllaCluster: {e}"))?;
    wait_until("groundskeeper's first look at the cluster", GUARD, || progressing(stage).is_some()).await?;

    stage
        .step(
            "scale-out 3 → 6 (rack a: 4, rack b: 2), written as scylla-operator would: the new spec, \
         3 new member Services, the new ring hash on every node, the status",
        )
        .await;
    let started = Instant::now();
    scylla
        .scale_out(&stage.server, BEFORE, AFTER)
        .map_err(|e| format!("scaling the ScyllaCluster out: {e}"))?;
    let new_hash = ring_hash_of(6);
    wait_until(
        "every old node cleaned for the new ring and CleanupControllerProgressing=False",
        GUARD,
        || {
            let old_nodes_clean = scylla
                .member_names(BEFORE)
                .iter()
                .all(|n| last_cleaned(stage, n).as_deref() == Some(new_hash.as_str()));
            old_nodes_clean && progressing(stage).as_deref() == Some("False")
        },
    )
    .await?;
    Ok(ScyllaOutcome { nodes: node_rows(stage, &new_hash), took: started.elapsed() })
}

fn node_rows(stage: &Stage, new_hash: &str) -> Vec<NodeRow> {
    let old = stage.scylla.member_names(BEFORE);
    stage
        .scylla
        .member_names(AFTER)
        .into_iter()
        .map(|name| NodeRow {
            new_in_scale_out: !old.contains(&name),
            cleaned_keyspaces: stage.agents[&name].cleaned_keyspaces(),
            clean_for_new_ring: last_cleaned(stage, &name).as_deref() == Some(new_hash),
            name,
        })
        .collect()
}

fn last_cleaned(stage: &Stage, member: &str) -> Option<String> {
    let service = stage.server.get(&services(), Some(&stage.scylla.namespace), member)?;
    service["metadata"]["annotations"][keys::LAST_CLEANED_UP_TOKEN_RING_HASH].as_str().map(str::to_owned)
}

/// The status of groundskeeper's Progressing condition, on the ScyllaDBDatacenter (where
/// scylla-operator keeps other controllers' conditions).
fn progressing(stage: &Stage) -> Option<String> {
    let scylla = &stage.scylla;
    let datacenter = stage.server.get(&scylla_datacenters(), Some(&scylla.namespace), &scylla.cluster)?;
    let conditions = datacenter["status"]["conditions"].as_array()?;
    conditions.iter().find(|c| c["type"] == PROGRESSING).and_then(|c| c["status"].as_str()).map(str::to_owned)
}

/// Keyspaces a node's cleanup went through, for the table.
pub fn keyspaces(row: &NodeRow) -> String {
    if row.cleaned_keyspaces.is_empty() { "-".to_owned() } else { row.cleaned_keyspaces.join(", ") }
}
