//! How a Cleanup task moves forward, node by node: a pure function from the task's planned
//! nodes and their Jobs to the next state of each node, the nodes to start within the bounds,
//! and the task's end once every node is over.
//!
//! Every node has at most one Job (its index in `status.nodes` is the Job's step), so a node is
//! never cleaned twice by one task; the plan is written to the task's status before any Job
//! exists, so a restarted controller finds the same plan and the same Jobs.

use std::collections::{BTreeMap, BTreeSet};

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::model::{BAD_INPUT, NODE_FAILED};
use super::settings::Limits;
use groundskeeper_api::maintenance_task::{NodeProgress, NodeState};
use groundskeeper_api::scylla::coexistence::Hold;

/// What a node's Job says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeJob {
    Running,
    Succeeded { keyspaces: Vec<String>, message: String },
    Failed { message: String, retryable: bool },
}

/// How a Cleanup task ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum End {
    Completed { summary: String },
    Failed { code: &'static str, description: String },
}

/// One pass over a running Cleanup task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pass {
    /// Every node's progress after this pass.
    pub nodes: Vec<NodeProgress>,
    /// Nodes whose Job is to be created now (indexes into `nodes`, marked Running already).
    pub start: Vec<usize>,
    /// Nodes whose Job succeeded since the last pass: their result is to be recorded.
    pub succeeded: Vec<usize>,
    /// Nodes whose Job failed since the last pass: to be reported.
    pub failed: Vec<usize>,
    pub end: Option<End>,
}

/// The next state of a Cleanup task's nodes. `jobs` maps a node's index to its Job's name and
/// state; `racks` gives each current member's (datacenter, rack) — a planned node missing there
/// has left the cluster; `job_name` names the Job of a node index.
pub fn step(
    nodes: Vec<NodeProgress>,
    jobs: &BTreeMap<usize, (String, NodeJob)>,
    racks: &BTreeMap<String, (String, String)>,
    limits: Limits,
    job_name: impl Fn(usize) -> String,
    now: Timestamp,
) -> Pass {
    step_holding(nodes, jobs, racks, limits, &Holds::default(), job_name, now)
}

/// Nodes of a Cleanup task that another cleaner looks after (see
/// [`groundskeeper_api::scylla::coexistence`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Holds {
    /// Nodes that may not start now: why, and the ring the other cleaner cleans them for.
    pub held: BTreeMap<String, Hold>,
    /// Nodes the other cleaner has cleaned for the ring they waited for: nothing left to do.
    pub cleaned_by_other: BTreeSet<String>,
    /// Nodes interrupted by a topology change that the new ring no longer owes a cleanup (clean
    /// for their current ring): nothing left to do.
    pub no_longer_owed: BTreeSet<String>,
}

/// Which pending nodes may start now (indexes into `nodes`, in order), given those running and
/// the bounds. A node whose rack is unknown never starts.
pub(crate) fn to_start(
    nodes: &[NodeProgress],
    racks: &BTreeMap<String, (String, String)>,
    limits: Limits,
) -> Vec<usize> {
    let mut per_rack: BTreeMap<&(String, String), u32> = BTreeMap::new();
    let mut total = 0u32;
    for node in nodes.iter().filter(|n| n.state == NodeState::Running) {
        total += 1;
        if let Some(rack) = racks.get(&node.name) {
            *per_rack.entry(rack).or_default() += 1;
        }
    }
    let mut start = Vec::new();
    for (index, node) in nodes.iter().enumerate() {
        if node.state != NodeState::Pending || limits.per_cluster.is_some_and(|max| total >= max) {
            continue;
        }
        let Some(rack) = racks.get(&node.name) else {
            continue;
        };
        let in_rack = per_rack.entry(rack).or_default();
        if *in_rack >= limits.per_rack {
            continue;
        }
        *in_rack += 1;
        total += 1;
        start.push(index);
    }
    start
}

/// [`step`] beside another cleaner: a held node (scylla-operator cleans it or is about to: see
/// [`groundskeeper_api::scylla::coexistence::node_turn`]) that has not started stays
/// pending with the reason as its message and the ring it waits for in `waitedForRing`, and
/// takes no place within the bounds; a pending node the other cleaner has since cleaned for that
/// ring is skipped (a second cleanup for one ring change is never run); a node already running
/// is followed as ever.
pub(crate) fn step_holding(
    mut nodes: Vec<NodeProgress>,
    jobs: &BTreeMap<usize, (String, NodeJob)>,
    racks: &BTreeMap<String, (String, String)>,
    limits: Limits,
    holds: &Holds,
    job_name: impl Fn(usize) -> String,
    now: Timestamp,
) -> Pass {
    let mut pass =
        Pass { nodes: Vec::new(), start: Vec::new(), succeeded: Vec::new(), failed: Vec::new(), end: None };
    for (index, node) in nodes.iter_mut().enumerate() {
        if node.state.is_finished() {
            continue;
        }
        match jobs.get(&index) {
            Some((job, state)) => follow_job(index, node, job, state, now, &mut pass),
            None if !racks.contains_key(&node.name) => {
                node.state = NodeState::Skipped;
                node.completed_at = Some(Time(now));
                node.message = Some("its member Service is gone: the node left the cluster".into());
            }
            None if node.state == NodeState::Running => {
                // Deleted by hand before it finished: the node still needs its cleanup.
                node.state = NodeState::Pending;
                node.message = Some(format!(
                    "its Job {} disappeared before it finished: it runs again",
                    node.job.as_deref().unwrap_or("?")
                ));
            }
            None => {}
        }
    }
    let held = &holds.held;
    for node in nodes.iter_mut().filter(|n| n.state == NodeState::Pending) {
        if let Some(hold) = held.get(&node.name) {
            node.message = Some(hold.why.clone());
            if hold.ring.is_some() {
                node.waited_for_ring = hold.ring.clone();
            }
        } else if holds.no_longer_owed.contains(&node.name) {
            node.state = NodeState::Skipped;
            node.completed_at = Some(Time(now));
            node.message = Some(
                "interrupted by a topology change, and no longer owed a cleanup: it is clean for its \
                 current ring"
                    .to_owned(),
            );
        } else if holds.cleaned_by_other.contains(&node.name) {
            node.state = NodeState::Skipped;
            node.completed_at = Some(Time(now));
            node.message = Some(format!(
                "cleaned by scylla-operator for the ring it waited for ({}…): no second cleanup",
                node.waited_for_ring.as_deref().unwrap_or_default().chars().take(12).collect::<String>()
            ));
        }
    }
    // Held nodes are left out of the choice only: running ones still count within the bounds.
    let choosable: Vec<NodeProgress> = nodes
        .iter()
        .map(|n| match n.state {
            NodeState::Pending if held.contains_key(&n.name) => {
                NodeProgress { state: NodeState::Skipped, ..n.clone() }
            }
            _ => n.clone(),
        })
        .collect();
    for index in to_start(&choosable, racks, limits) {
        let node = &mut nodes[index];
        node.state = NodeState::Running;
        node.job = Some(job_name(index));
        node.started_at = Some(Time(now));
        node.message = Some("cleaning".into());
        pass.start.push(index);
    }
    pass.end = end_of(&nodes, jobs);
    pass.nodes = nodes;
    pass
}

fn follow_job(
    index: usize,
    node: &mut NodeProgress,
    job: &str,
    state: &NodeJob,
    now: Timestamp,
    pass: &mut Pass,
) {
    node.job = Some(job.to_owned());
    match state {
        NodeJob::Running => {
            node.state = NodeState::Running;
            node.started_at.get_or_insert(Time(now));
        }
        NodeJob::Succeeded { keyspaces, message } => {
            node.state = NodeState::Succeeded;
            node.completed_at = Some(Time(now));
            node.keyspaces_cleaned = keyspaces.clone();
            node.message = Some(message.clone());
            pass.succeeded.push(index);
        }
        NodeJob::Failed { message, .. } => {
            node.state = NodeState::Failed;
            node.completed_at = Some(Time(now));
            node.message = Some(message.clone());
            pass.failed.push(index);
        }
    }
}

/// The task's end once no node is pending or running: Failed when a node failed (`BadInput`
/// when no retry can fix one of them), else Completed.
fn end_of(nodes: &[NodeProgress], jobs: &BTreeMap<usize, (String, NodeJob)>) -> Option<End> {
    if !nodes.iter().all(|n| n.state.is_finished()) {
        return None;
    }
    let failed: Vec<(usize, &NodeProgress)> =
        nodes.iter().enumerate().filter(|(_, n)| n.state == NodeState::Failed).collect();
    if failed.is_empty() {
        return Some(End::Completed { summary: summary(nodes) });
    }
    let hopeless = failed
        .iter()
        .any(|(i, _)| matches!(jobs.get(i), Some((_, NodeJob::Failed { retryable: false, .. }))));
    let each: Vec<String> = failed
        .iter()
        .map(|(_, n)| {
            let job = n.job.as_deref().unwrap_or("?");
            format!("{} ({}; see `kubectl logs job/{job}`)", n.name, n.message.as_deref().unwrap_or("failed"))
        })
        .collect();
    Some(End::Failed {
        code: if hopeless { BAD_INPUT } else { NODE_FAILED },
        description: format!(
            "cleanup failed on {} of {} nodes: {}",
            failed.len(),
            nodes.len(),
            each.join("; ")
        ),
    })
}

/// One line for a completed Cleanup task.
fn summary(nodes: &[NodeProgress]) -> String {
    let cleaned: Vec<&str> =
        nodes.iter().filter(|n| n.state == NodeState::Succeeded).map(|n| n.name.as_str()).collect();
    let skipped = |by_operator: bool| {
        nodes
            .iter()
            .filter(|n| n.state == NodeState::Skipped && n.waited_for_ring.is_some() == by_operator)
            .count()
    };
    let (skipped, by_operator) = (skipped(false), skipped(true));
    let mut keyspaces: Vec<&str> =
        nodes.iter().flat_map(|n| n.keyspaces_cleaned.iter().map(String::as_str)).collect();
    keyspaces.sort_unstable();
    keyspaces.dedup();
    let mut line = match cleaned.len() {
        0 => "no node cleaned".to_owned(),
        n => format!("cleaned {n} node(s): {}", cleaned.join(", ")),
    };
    if !keyspaces.is_empty() {
        line.push_str(&format!(" (keyspaces {})", keyspaces.join(", ")));
    }
    if by_operator > 0 {
        line.push_str(&format!("; {by_operator} cleaned by scylla-operator meanwhile"));
    }
    if skipped > 0 {
        line.push_str(&format!("; {skipped} skipped (left the cluster)"));
    }
    line
}

#[cfg(test)]
mod tests;
