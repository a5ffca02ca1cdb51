//! The fleet bound: at most `--fleet-max-concurrent` clusters of one fleet of partitioned etcd
//! clusters are in maintenance at once, so that the Kubernetes API they serve together never
//! loses more than that many of its stores to a defragmentation (or the load of a compaction)
//! at a time.
//!
//! A cluster is in maintenance while one of its maintenance tasks is InProgress (its status says
//! so before its first Job is created) or has a Job and is not final. Both are read from the
//! API every time, never remembered, so a controller restart finds the same holders. A task
//! whose cluster would exceed the bound waits (its `Queued` condition names the holders); the
//! caller makes the read and the start of a task one step for the fleet (see
//! [`crate::tasks::controller`]).

/// A maintenance task of some cluster of the fleet, as the bound needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FleetTask {
    /// `namespace/name` of its EtcdCluster.
    pub cluster: String,
    pub task: String,
    /// Its state is InProgress.
    pub in_progress: bool,
    /// It is Completed, Failed or Rejected.
    pub finished: bool,
    /// One of its Jobs exists.
    pub has_job: bool,
}

impl FleetTask {
    fn holds_a_slot(&self) -> bool {
        !self.finished && (self.in_progress || self.has_job)
    }
}

/// The clusters of the fleet (other than `me`) in maintenance, each as `namespace/name`
/// (MaintenanceTask `task`), sorted.
pub(crate) fn holders(me: &str, tasks: &[FleetTask]) -> Vec<String> {
    let mut holders: Vec<(&str, &str)> = tasks
        .iter()
        .filter(|t| t.cluster != me && t.holds_a_slot())
        .map(|t| (t.cluster.as_str(), t.task.as_str()))
        .collect();
    holders.sort();
    holders.dedup_by(|a, b| a.0 == b.0);
    holders.into_iter().map(|(cluster, task)| format!("{cluster} (MaintenanceTask {task})")).collect()
}

/// Why a task of `me` may not start now, or `None` when a slot of `fleet` is free for it.
pub(crate) fn slot_wait(me: &str, fleet: &str, max_concurrent: usize, tasks: &[FleetTask]) -> Option<String> {
    let holders = holders(me, tasks);
    (holders.len() >= max_concurrent).then(|| {
        format!(
            "fleet {fleet}: {} of {max_concurrent} maintenance slots taken by EtcdCluster {}; \
             waits for a slot (controller flag --fleet-max-concurrent)",
            holders.len(),
            holders.join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(cluster: &str, name: &str, in_progress: bool, finished: bool, has_job: bool) -> FleetTask {
        FleetTask { cluster: cluster.into(), task: name.into(), in_progress, finished, has_job }
    }

    #[test]
    fn a_slot_is_free_while_fewer_clusters_than_the_bound_are_in_maintenance() {
        let me = "etcd/tenant-1";
        let cases: Vec<(&str, Vec<FleetTask>, usize, Option<&str>)> = vec![
            ("an idle fleet", vec![], 1, None),
            ("only tasks that wait", vec![task("etcd/tenant-2", "t2", false, false, false)], 1, None),
            (
                "another cluster runs a task",
                vec![task("etcd/tenant-2", "t2", true, false, true)],
                1,
                Some("1 of 1 maintenance slots taken by EtcdCluster etcd/tenant-2 (MaintenanceTask t2)"),
            ),
            (
                "InProgress before its first Job exists",
                vec![task("etcd/tenant-2", "t2", true, false, false)],
                1,
                Some("taken by EtcdCluster etcd/tenant-2"),
            ),
            (
                "a Job of a task not final (its status write lags)",
                vec![task("etcd/tenant-2", "t2", false, false, true)],
                1,
                Some("taken by EtcdCluster etcd/tenant-2"),
            ),
            (
                "finished tasks hold nothing, even with their Jobs kept",
                vec![task("etcd/tenant-2", "t2", false, true, true)],
                1,
                None,
            ),
            ("my own running task is no other cluster's", vec![task(me, "t1", true, false, true)], 1, None),
            ("two slots, one taken", vec![task("etcd/tenant-2", "t2", true, false, true)], 2, None),
            (
                "two slots, both taken; one cluster counts once",
                vec![
                    task("etcd/tenant-2", "t2", true, false, true),
                    task("etcd/tenant-2", "t2b", true, false, true),
                    task("other/system", "s", true, false, true),
                ],
                2,
                Some(
                    "fleet arktos: 2 of 2 maintenance slots taken by EtcdCluster etcd/tenant-2 \
                     (MaintenanceTask t2), other/system (MaintenanceTask s); waits for a slot",
                ),
            ),
        ];
        for (name, tasks, max, expected) in cases {
            let got = slot_wait(me, "arktos", max, &tasks);
            match expected {
                None => assert_eq!(got, None, "{name}"),
                Some(part) => assert!(got.as_deref().is_some_and(|g| g.contains(part)), "{name}: {got:?}"),
            }
        }
    }
}
