//! Where a running task's steps stand, read from the Jobs of its steps: a pure function.
//!
//! A task's work is a list of steps, each one Job, run one after the other: step `i + 1` starts
//! only once step `i` succeeded; a failed step fails the task. Job names are deterministic per
//! task and step, so after a restart the same Jobs are found again and none is made twice.

use crate::jobs::JobState;

/// What to do next with a running task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StepsState {
    /// Step `i` has no Job yet: create it.
    Start(usize),
    /// Step `i`'s Job runs: wait.
    Running(usize),
    /// Step `i`'s Job failed: the task fails.
    Failed(usize),
    /// Every step succeeded.
    Done,
}

/// Where `count` steps stand, given the Jobs found: `(step, state)` pairs in any order.
pub(crate) fn steps_state(count: usize, jobs: &[(usize, &JobState)]) -> StepsState {
    for step in 0..count {
        match jobs.iter().find(|(s, _)| *s == step).map(|(_, state)| state) {
            None => return StepsState::Start(step),
            Some(JobState::Running(_)) => return StepsState::Running(step),
            Some(JobState::Failed(_)) => return StepsState::Failed(step),
            Some(JobState::Succeeded(_)) => {}
        }
    }
    StepsState::Done
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jobs::{Attempts, Finished, ResultError};

    fn finished() -> Finished {
        Finished {
            reason: String::new(),
            message: String::new(),
            result: Err(ResultError::NoPod { job: "j".into() }),
        }
    }

    #[test]
    #[allow(clippy::type_complexity)] // a table of cases
    fn steps_run_in_order_and_a_failure_stops_them() {
        let running = JobState::Running(Attempts::default());
        let ok = JobState::Succeeded(finished());
        let failed = JobState::Failed(finished());
        let cases: Vec<(&str, usize, Vec<(usize, &JobState)>, StepsState)> = vec![
            ("nothing yet", 2, vec![], StepsState::Start(0)),
            ("first runs", 2, vec![(0, &running)], StepsState::Running(0)),
            ("first done", 2, vec![(0, &ok)], StepsState::Start(1)),
            ("second runs", 2, vec![(1, &running), (0, &ok)], StepsState::Running(1)),
            ("all done", 2, vec![(0, &ok), (1, &ok)], StepsState::Done),
            ("first failed", 2, vec![(0, &failed)], StepsState::Failed(0)),
            ("second failed", 2, vec![(0, &ok), (1, &failed)], StepsState::Failed(1)),
            ("a stray later Job does not skip a step", 2, vec![(1, &ok)], StepsState::Start(0)),
            ("no steps", 0, vec![], StepsState::Done),
        ];
        for (name, count, jobs, wanted) in cases {
            assert_eq!(steps_state(count, &jobs), wanted, "{name}");
        }
    }
}
