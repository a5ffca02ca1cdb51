//! The controllers' clock: the system's, or one a test sets and moves, so that a day of
//! schedules runs in seconds. Every decision that time drives reads it through the context.

use std::sync::{Arc, Mutex};

use jiff::{SignedDuration, Timestamp};

/// Where the time comes from.
#[derive(Clone)]
pub struct Clock {
    manual: Option<Arc<Mutex<Timestamp>>>,
}

impl std::fmt::Debug for Clock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.manual {
            None => f.write_str("Clock::system"),
            Some(_) => write!(f, "Clock::manual({})", self.now()),
        }
    }
}

impl Default for Clock {
    fn default() -> Self {
        Self::system()
    }
}

impl Clock {
    pub fn system() -> Self {
        Self { manual: None }
    }

    /// A clock that stands at `start` until [`Clock::set`] or [`Clock::advance`] moves it.
    pub fn manual(start: Timestamp) -> Self {
        Self { manual: Some(Arc::new(Mutex::new(start))) }
    }

    pub fn now(&self) -> Timestamp {
        match &self.manual {
            None => Timestamp::now(),
            Some(time) => *time.lock().unwrap_or_else(|p| p.into_inner()),
        }
    }

    /// Sets a manual clock (backwards too); the system clock cannot be set.
    pub fn set(&self, time: Timestamp) {
        let manual = self.manual.as_ref().expect("only a manual clock can be set");
        *manual.lock().unwrap_or_else(|p| p.into_inner()) = time;
    }

    /// Moves a manual clock by `by` (negative: backwards).
    pub fn advance(&self, by: SignedDuration) {
        self.set(self.now().checked_add(by).expect("a clock within jiff's range"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_moves_only_when_told_and_is_shared_by_its_clones() {
        let start: Timestamp = "2026-11-24T00:00:00Z".parse().unwrap();
        let clock = Clock::manual(start);
        let seen_by_a_controller = clock.clone();
        assert_eq!(seen_by_a_controller.now(), start);
        clock.advance(SignedDuration::from_hours(25));
        assert_eq!(seen_by_a_controller.now(), "2026-11-25T01:00:00Z".parse::<Timestamp>().unwrap());
        clock.advance(SignedDuration::from_hours(-2));
        assert_eq!(seen_by_a_controller.now(), "2026-11-24T23:00:00Z".parse::<Timestamp>().unwrap());
        assert!(Clock::system().now() > start - SignedDuration::from_hours(24 * 365));
    }
}
