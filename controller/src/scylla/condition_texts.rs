//! The cleanup trigger's two conditions on the ScyllaCluster (`CleanupControllerProgressing`,
//! `CleanupControllerDegraded`), worded from what one pass decided: what is cleaned, what waits
//! and for what, what failed.

use std::collections::BTreeMap;
use std::time::Duration;

use groundskeeper_api::maintenance_task::TaskState;

use super::model::{ConditionPlan, Member, PassState, TaskFacts};
use groundskeeper_api::scylla::facts::{DEGRADED, PROGRESSING};

pub(super) fn progressing_condition(
    members: &[Member<'_>],
    state: &PassState,
    active: Option<&TaskFacts>,
    submitted: bool,
    blockers: &[String],
    retry_in: Option<Duration>,
) -> ConditionPlan {
    let needing = state.candidates.len();
    let mut parts = Vec::new();
    if needing > 0 {
        parts.push(format!("{needing} of {} nodes need cleanup", members.len()));
    }
    let (status, reason) = match active {
        Some(task) if task.state == TaskState::InProgress => {
            let progress = task.progress.as_deref().map(|p| format!(", {p} nodes done")).unwrap_or_default();
            parts.push(format!("cleanup task {} is running{progress}", task.name));
            (true, "CleanupRunning")
        }
        Some(task) => {
            let waiting = task.waiting_for.as_deref().map(|w| format!(": {w}")).unwrap_or_default();
            parts.push(format!("cleanup task {} is queued{waiting}", task.name));
            (true, "WaitingForPreconditions")
        }
        None if submitted => {
            parts.push("submitted a cleanup task".into());
            (true, "CleanupRunning")
        }
        None if needing > 0 => {
            if let Some(wait) = retry_in {
                parts.push(format!("the next cleanup task follows in {}s", wait.as_secs()));
            }
            parts.extend(blockers.iter().cloned());
            (true, "WaitingForPreconditions")
        }
        None => (false, "AsExpected"),
    };
    if !state.lost_nothing.is_empty() {
        parts.push(format!(
            "ownership rule: {} lost no range since the last cleanup, recorded clean for the new ring: {}",
            plural(state.lost_nothing.len(), "node", "nodes"),
            state.lost_nothing.join(", ")
        ));
    }
    if !state.joined_together.is_empty() {
        parts.push(format!(
            "{} joined together, so what each held before the others joined cannot be known: \
             marked NeverCleanedUp, each is cleaned once: {}",
            plural(state.joined_together.len(), "node", "nodes"),
            state.joined_together.join(", ")
        ));
    }
    if !state.clean_once.is_empty() {
        parts.push(format!(
            "{} to be cleaned once, whole (NeverCleanedUp: joined together with others, or asked \
             for): {}",
            plural(state.clean_once.len(), "node", "nodes"),
            state.clean_once.join(", ")
        ));
    }
    if !state.fallbacks.is_empty() {
        let mut by_reason: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (service, why) in &state.fallbacks {
            by_reason.entry(why).or_default().push(service);
        }
        let each: Vec<String> =
            by_reason.iter().map(|(why, services)| format!("{}: {why}", services.join(", "))).collect();
        parts.push(format!(
            "the ring-hash rule decides for {} where the ownership rule cannot ({})",
            plural(state.fallbacks.len(), "node", "nodes"),
            each.join("; ")
        ));
    }
    if !state.bootstrapping.is_empty() {
        parts.push(format!(
            "{} bootstrapping (no ring hash yet, not waited for once the ring has been quiet for {}s): {}",
            plural(state.bootstrapping.len(), "node", "nodes"),
            crate::scylla::ring_quiet::DISAGREEMENT_BOUND.as_secs(),
            state.bootstrapping.join(", ")
        ));
    }
    if parts.is_empty() {
        parts.push(format!("all {} nodes are clean", members.len()));
    } else if needing == 0 {
        parts.insert(0, "no node needs cleanup".into());
    }
    ConditionPlan { type_: PROGRESSING, status, reason: reason.into(), message: parts.join("; ") }
}

pub(super) fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

pub(super) fn degraded_condition(problems: &[(&'static str, String)]) -> ConditionPlan {
    match problems.first() {
        None => ConditionPlan {
            type_: DEGRADED,
            status: false,
            reason: "AsExpected".into(),
            message: String::new(),
        },
        Some((reason, _)) => ConditionPlan {
            type_: DEGRADED,
            status: true,
            reason: (*reason).into(),
            message: problems.iter().map(|(_, m)| m.as_str()).collect::<Vec<_>>().join("; "),
        },
    }
}
