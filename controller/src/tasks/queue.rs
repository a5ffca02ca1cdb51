//! The queue of one target's tasks: first in, first out, one at a time, no duplicates.
//!
//! Order is by creation time, ties broken by name (creation times have whole seconds, so two
//! tasks created together are common), except that a type that goes first (a Restore: the
//! cluster is down, and the other tasks wait for it to be healthy) is placed before the other
//! waiting tasks. A running task holds the target: everything waiting
//! stands behind it, whatever its own creation time. Of the waiting tasks, the first one is the
//! head, the only one that may start; a waiting task of the same type as a task ahead of it that
//! is still waiting or running asks for work that is already coming, and is a duplicate.
//!
//! Only tasks still in play are placed: final tasks and tasks the lifecycle turns away in the
//! same pass (invalid, target gone, out of time) are left out, so that they block nobody.

use std::cmp::Ordering;

use jiff::Timestamp;

use groundskeeper_api::maintenance_task::TaskType;

/// Where a task is before it is placed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    /// Its work runs.
    Running,
    /// Its work has not started.
    Waiting,
}

/// One task of the target's queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueEntry {
    pub name: String,
    pub created: Timestamp,
    pub task_type: TaskType,
    pub standing: Standing,
}

/// Where a task stands in its target's queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// Running: it holds the target.
    Running,
    /// First in line and nothing runs: it may start.
    Head,
    /// Waits behind `head` (the running task, or the head), with `ahead` tasks in front of it.
    Behind { head: String, head_running: bool, ahead: usize },
    /// Asks for what `of`, ahead of it and still waiting or running, will do.
    Duplicate { of: String, of_running: bool },
}

/// Queue order: creation time, then name.
pub(crate) fn queue_order(a: (&Timestamp, &str), b: (&Timestamp, &str)) -> Ordering {
    a.0.cmp(b.0).then_with(|| a.1.cmp(b.1))
}

/// The indices of `entries` in queue order.
pub(crate) fn in_queue_order(entries: &[QueueEntry]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..entries.len()).collect();
    order.sort_by(|&a, &b| {
        let first = |i: usize| !entries[i].task_type.goes_first();
        first(a).cmp(&first(b)).then_with(|| {
            queue_order((&entries[a].created, &entries[a].name), (&entries[b].created, &entries[b].name))
        })
    });
    order
}

/// The place of every entry, in the order given.
pub fn place(entries: &[QueueEntry]) -> Vec<Place> {
    let order = in_queue_order(entries);
    let mut places = vec![Place::Running; entries.len()];
    // Tasks in front, in the order they will run: the running ones, then the accepted waiters.
    let mut in_line: Vec<usize> =
        order.iter().copied().filter(|&i| entries[i].standing == Standing::Running).collect();
    for i in order.into_iter().filter(|&i| entries[i].standing == Standing::Waiting) {
        places[i] = place_waiting(entries, &in_line, i);
        if !matches!(places[i], Place::Duplicate { .. }) {
            in_line.push(i);
        }
    }
    places
}

fn place_waiting(entries: &[QueueEntry], in_line: &[usize], i: usize) -> Place {
    let running = |j: usize| entries[j].standing == Standing::Running;
    if let Some(&j) = in_line.iter().find(|&&j| entries[j].task_type == entries[i].task_type) {
        return Place::Duplicate { of: entries[j].name.clone(), of_running: running(j) };
    }
    match in_line.first() {
        None => Place::Head,
        Some(&head) => Place::Behind {
            head: entries[head].name.clone(),
            head_running: running(head),
            ahead: in_line.len(),
        },
    }
}

#[cfg(test)]
mod tests;
