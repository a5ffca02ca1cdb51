//! A Restore task: an etcd cluster run as a StatefulSet brought back from a snapshot after it lost
//! its quorum for good, in visible steps that survive a controller restart.
//!
//! ```text
//! CheckingSnapshot ─▶ ScalingDown ─▶ RestoringMembers ─▶ ScalingUp ─▶ WaitingForMembers ─▶ Done
//!  (Job 0: prove)     (replicas 0,    (Jobs 1..N: one     (replicas     (every member healthy,
//!                      pods gone)      per member claim)   as before)    revision ≥ snapshot's)
//! ```
//!
//! Where it stands is in the task's `status.restore` only, and each step's outcome is read again
//! from what it left (the Jobs, by their deterministic names; the StatefulSet; the members), so a
//! controller that restarts anywhere goes on from there. The replicas to scale back to are
//! recorded in the status one pass before the StatefulSet is scaled down, so that a restart
//! between the two never takes 0 for them. A failure stops at its step with the data intact
//! (each member's old data is moved aside by its Job, never deleted) and the status says how to
//! go on or back.
//!
//! Its files follow the order of the folder they are in: [`model`] (what its steps share),
//! [`observe`] (the StatefulSet, its pods, the members, the Jobs' states), [`decide`] (pure:
//! whether it may start, each step forward), [`apply`] (the StatefulSet scaled), [`job`] (the Job
//! of a step: the proof, a member's restore) and [`task`] (one pass of the task: [`task::advance`]
//! reads, decides, applies and writes around the pure [`decide::admission`] and
//! [`decide::decide`]).

pub(crate) mod apply;
pub(crate) mod decide;
pub(crate) mod job;
pub(crate) mod model;
pub(crate) mod observe;
pub(crate) mod task;

#[cfg(test)]
mod tests;
