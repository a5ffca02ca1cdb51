//! When a schedule's runs fall: a cron expression read on the wall clock of an IANA time zone.
//!
//! The expression is POSIX/Vixie cron (five fields, Sunday 0 or 7, names like `MON` and `JAN`,
//! and `@hourly`, `@daily`, `@weekly`, `@monthly`, `@yearly`; a day of month and a day of week
//! both restricted match either), parsed and matched by `croner`, on wall-clock times only. The
//! time zone and its daylight-saving changes are jiff's (its time zone database is built in, so
//! an image without `/usr/share/zoneinfo` knows every zone):
//!
//! * a run whose wall-clock time does not exist (the clock jumps from 02:00 to 03:00, a run at
//!   02:30) happens once, at the first instant after the jump; several such runs are one run;
//! * a run whose wall-clock time happens twice (the clock goes back from 03:00 to 02:00, a run at
//!   02:30) happens once, the first time.
//!
//! Two crates and not one because none does both well: the cron crates that use jiff number the
//! days of the week from Sunday = 1 and require a seconds field (Quartz style), so `0 3 * * 1-5`
//! would not mean what every crontab and Kubernetes CronJob means by it; croner follows POSIX but
//! speaks chrono, and is given chrono only as a calendar without time zones here.

use chrono::{NaiveDate, NaiveDateTime, TimeZone as _, Utc};
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use jiff::civil::DateTime;
use jiff::tz::{AmbiguousOffset, TimeZone};
use jiff::{SignedDuration, Timestamp};

/// The longest expression accepted (a bound for the CRD's validation rules).
pub const MAX_EXPRESSION_LEN: usize = 256;
/// How many wall-clock candidates one question may look at before giving up; a run skipped by a
/// time-zone change is followed by another within a few candidates.
const CANDIDATE_LIMIT: usize = 64;

/// A schedule's expression in its time zone, checked.
#[derive(Debug, Clone)]
pub struct Calendar {
    cron: Cron,
    time_zone: TimeZone,
}

/// Why an expression or a time zone cannot be used, in words for the field's error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CalendarError {
    #[error(
        "{0:?} is not a cron expression: {1}; use five fields (minute hour day-of-month month day-of-week), e.g. \"0 3 * * *\", or @daily, @weekly, @monthly"
    )]
    Expression(String, String),
    #[error("{0:?} never happens (no date matches it)")]
    Never(String),
    #[error(
        "{0:?} is not a time zone this controller knows; use an IANA name such as \"UTC\", \"Europe/Berlin\" or \"America/New_York\""
    )]
    TimeZone(String),
}

impl Calendar {
    /// Parses `expression` and looks `time_zone` up (an IANA name).
    pub fn new(expression: &str, time_zone: &str) -> Result<Self, CalendarError> {
        if expression.len() > MAX_EXPRESSION_LEN {
            let why = format!("longer than {MAX_EXPRESSION_LEN} characters");
            return Err(CalendarError::Expression(expression.chars().take(40).collect(), why));
        }
        let parser = CronParser::builder().seconds(Seconds::Disallowed).year(Year::Disallowed).build();
        let cron = parser
            .parse(expression)
            .map_err(|err| CalendarError::Expression(expression.to_owned(), err.to_string()))?;
        let time_zone = time_zone_named(time_zone)?;
        let calendar = Self { cron, time_zone };
        // Feb 30th parses but never comes: say so now rather than never run.
        let probe = "2000-01-01T00:00:00Z".parse::<Timestamp>().expect("a valid timestamp");
        match calendar.next_after(probe) {
            Some(_) => Ok(calendar),
            None => Err(CalendarError::Never(expression.to_owned())),
        }
    }

    /// The time zone the expression is read in.
    pub fn time_zone(&self) -> &TimeZone {
        &self.time_zone
    }

    /// The first run strictly after `after`.
    pub fn next_after(&self, after: Timestamp) -> Option<Timestamp> {
        let mut wall = self.latest_wall_at(after);
        for _ in 0..CANDIDATE_LIMIT {
            wall = self.next_wall_time(wall)?;
            let run = self.instant_of(wall)?;
            // Past the latest wall-clock time standing for an instant at or before `after`, every
            // candidate is a new run; this only guards that rule.
            if run > after {
                return Some(run);
            }
        }
        None
    }

    /// The latest run at or before `now`, if one is later than `since` (a run that already
    /// happened, or the schedule's creation).
    pub fn latest_due(&self, since: Timestamp, now: Timestamp) -> Option<Timestamp> {
        if now <= since {
            return None; // the clock went back, or nothing has passed
        }
        let mut wall = self.latest_wall_at(now);
        let mut inclusive = true;
        for _ in 0..CANDIDATE_LIMIT {
            wall = self.previous_wall_time(wall, inclusive)?;
            inclusive = false;
            let run = self.instant_of(wall)?;
            if run <= now {
                return (run > since).then_some(run);
            }
        }
        None
    }

    /// The latest wall-clock time whose run ([`instant_of`]) is at or before `at`. Runs follow
    /// wall-clock order (a repeated time is its first pass, a skipped one the jump), so this is
    /// where walking the calendar starts. It is `at`'s own wall-clock time, except during the
    /// second pass of a repeated period: every time of that period already stood for its first
    /// pass, so it is the end of the period (less a nanosecond). Starting from `at`'s wall clock
    /// there would miss the first passes of the times after it.
    fn latest_wall_at(&self, at: Timestamp) -> DateTime {
        let wall = self.time_zone.to_datetime(at);
        let AmbiguousOffset::Fold { before, after } = self.time_zone.to_ambiguous_timestamp(wall).offset()
        else {
            return wall;
        };
        if self.time_zone.to_offset(at) != after {
            return wall; // the first pass
        }
        // The clock went back at the transition before `at`: the repeated period ends at that
        // instant read with the offset before it.
        let Some(transition) = self.time_zone.preceding(at + SignedDuration::from_nanos(1)).next() else {
            return wall;
        };
        let end = before.to_datetime(transition.timestamp());
        end.checked_sub(SignedDuration::from_nanos(1)).unwrap_or(wall).max(wall)
    }

    /// The next wall-clock time the expression matches, strictly after `wall`.
    fn next_wall_time(&self, wall: DateTime) -> Option<DateTime> {
        let found = self.cron.find_next_occurrence(&utc_of(wall)?, false).ok()?;
        civil_of(found.naive_utc())
    }

    /// The latest wall-clock time the expression matches, at or before `wall` (strictly before
    /// unless `inclusive`).
    fn previous_wall_time(&self, wall: DateTime, inclusive: bool) -> Option<DateTime> {
        // Whole minutes only: the expression has no seconds field.
        let minute = wall.with().second(0).subsec_nanosecond(0).build().ok()?;
        let inclusive = inclusive || minute < wall;
        let found = self.cron.find_previous_occurrence(&utc_of(minute)?, inclusive).ok()?;
        civil_of(found.naive_utc())
    }

    fn instant_of(&self, wall: DateTime) -> Option<Timestamp> {
        instant_of(&self.time_zone, wall)
    }
}

/// The instant a wall-clock time stands for in `time_zone`: the first of two in a repeated hour,
/// and for a time skipped by the clock, the instant the clock jumped.
pub fn instant_of(time_zone: &TimeZone, wall: DateTime) -> Option<Timestamp> {
    match time_zone.to_ambiguous_timestamp(wall).offset() {
        AmbiguousOffset::Unambiguous { offset } => offset.to_timestamp(wall).ok(),
        AmbiguousOffset::Fold { before, .. } => before.to_timestamp(wall).ok(),
        AmbiguousOffset::Gap { after, .. } => {
            // With the offset after the jump the time reads as earlier than the jump itself.
            let before_jump = after.to_timestamp(wall).ok()?;
            time_zone.following(before_jump).next().map(|t| t.timestamp())
        }
    }
}

/// Calendars already built, by expression and time zone: building one (parsing the expression,
/// finding its first run) costs about 13 µs, deciding a schedule's runs 2 µs, and the same few
/// expressions come back on every pass. Holds at most [`Calendars::CAPACITY`]; beyond that it
/// starts again empty.
#[derive(Debug, Default)]
pub struct Calendars {
    built: std::sync::Mutex<std::collections::HashMap<(String, String), Result<Calendar, CalendarError>>>,
}

impl Calendars {
    pub const CAPACITY: usize = 10_000;

    /// [`Calendar::new`], remembered.
    pub fn get(&self, expression: &str, time_zone: &str) -> Result<Calendar, CalendarError> {
        let mut built = self.built.lock().unwrap_or_else(|p| p.into_inner());
        let key = (expression.to_owned(), time_zone.to_owned());
        if let Some(found) = built.get(&key) {
            return found.clone();
        }
        if built.len() >= Self::CAPACITY {
            built.clear();
        }
        let calendar = Calendar::new(expression, time_zone);
        built.insert(key, calendar.clone());
        calendar
    }
}

/// The IANA time zone `name`. A named zone only: an empty name or a fixed offset would be taken
/// by jiff for something else than the user meant.
pub fn time_zone_named(name: &str) -> Result<TimeZone, CalendarError> {
    if name.is_empty() || name.starts_with(['+', '-']) {
        return Err(CalendarError::TimeZone(name.to_owned()));
    }
    TimeZone::get(name).map_err(|_| CalendarError::TimeZone(name.to_owned()))
}

/// A wall-clock time as a chrono time in UTC: a calendar without daylight saving, which is all
/// croner is asked to know.
fn utc_of(wall: DateTime) -> Option<chrono::DateTime<Utc>> {
    let date = NaiveDate::from_ymd_opt(i32::from(wall.year()), wall.month() as u32, wall.day() as u32)?;
    let time = date.and_hms_opt(wall.hour() as u32, wall.minute() as u32, wall.second() as u32)?;
    Some(Utc.from_utc_datetime(&time))
}

fn civil_of(time: NaiveDateTime) -> Option<DateTime> {
    use chrono::{Datelike, Timelike};
    DateTime::new(
        i16::try_from(time.year()).ok()?,
        i8::try_from(time.month()).ok()?,
        i8::try_from(time.day()).ok()?,
        i8::try_from(time.hour()).ok()?,
        i8::try_from(time.minute()).ok()?,
        i8::try_from(time.second()).ok()?,
        0,
    )
    .ok()
}

#[cfg(test)]
mod tests;
