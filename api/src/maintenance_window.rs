//! Maintenance windows: the weekly times, in a time zone, when a target's automatic work may
//! start. `Mon-Fri 01:00-05:00`, `Sat,Sun 22:00-06:00` (past midnight: it ends the next day),
//! `* 02:00-04:00` (every day); `24:00` ends a window at midnight.
//!
//! Times are wall-clock times of the zone, with the rules of [`crate::maintenance_schedule::calendar`]
//! for daylight saving: a window that opens at a time the clock skips opens when the clock jumps.
//! Work in progress is never interrupted by a window closing: the windows say when work may
//! start, not when it must stop.

use jiff::civil::{Date, Weekday};
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::maintenance_schedule::calendar::{instant_of, time_zone_named};

/// Most windows a target may have.
pub const MAX_WINDOWS: usize = 32;
const MINUTES_A_DAY: u32 = 24 * 60;
const MINUTES_A_WEEK: u32 = 7 * MINUTES_A_DAY;
const DAYS: [(&str, Weekday); 7] = [
    ("mon", Weekday::Monday),
    ("tue", Weekday::Tuesday),
    ("wed", Weekday::Wednesday),
    ("thu", Weekday::Thursday),
    ("fri", Weekday::Friday),
    ("sat", Weekday::Saturday),
    ("sun", Weekday::Sunday),
];

/// The windows as a user writes them (an EtcdCluster's `spec.maintenanceWindows`; for a
/// ScyllaCluster, its annotations).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MaintenanceWindowsSpec {
    /// IANA time zone the windows are read in; default UTC.
    #[serde(default = "default_time_zone")]
    #[schemars(length(min = 1, max = 64))]
    pub time_zone: String,
    /// Weekly windows: days then a time range, e.g. `Mon-Fri 01:00-05:00`, `Sat,Sun 22:00-06:00`
    /// (past midnight), `* 02:00-04:00` (every day). They may not overlap.
    #[schemars(length(min = 1, max = MAX_WINDOWS))]
    pub windows: Vec<String>,
}

fn default_time_zone() -> String {
    "UTC".to_owned()
}

/// One weekly window, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Window {
    days: Vec<Weekday>,
    /// Minutes after midnight.
    start: u32,
    /// Length in minutes (1 to 1,440).
    length: u32,
}

/// Windows in their zone, checked.
#[derive(Debug, Clone)]
pub struct Windows {
    windows: Vec<Window>,
    time_zone: TimeZone,
}

/// Where the windows stand at a moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WindowState {
    /// A window is open since `opened` until `closes`.
    Open { opened: Timestamp, closes: Timestamp },
    /// None is open; the next opens at `opens`.
    Closed { opens: Timestamp },
}

impl Windows {
    /// Checks `spec`; each mistake as (field suffix, message), e.g. `("windows[1]", "...")`.
    pub fn new(spec: &MaintenanceWindowsSpec) -> Result<Self, Vec<(String, String)>> {
        let mut errors = Vec::new();
        let time_zone =
            time_zone_named(&spec.time_zone).map_err(|e| errors.push(("timeZone".to_owned(), e.to_string())));
        if spec.windows.is_empty() {
            errors.push((
                "windows".to_owned(),
                "is empty: give at least one window, e.g. \"Mon-Fri 01:00-05:00\", or leave the field out"
                    .to_owned(),
            ));
        }
        if spec.windows.len() > MAX_WINDOWS {
            errors.push((
                "windows".to_owned(),
                format!("{} windows: at most {MAX_WINDOWS}", spec.windows.len()),
            ));
        }
        let mut windows = Vec::new();
        for (i, text) in spec.windows.iter().enumerate() {
            match parse_window(text) {
                Ok(window) => windows.push((i, window)),
                Err(why) => errors.push((format!("windows[{i}]"), format!("{text:?}: {why}"))),
            }
        }
        for (a, (i, first)) in windows.iter().enumerate() {
            for (j, second) in windows.iter().skip(a + 1) {
                if overlap(first, second) {
                    errors.push((
                        format!("windows[{j}]"),
                        format!(
                            "{:?} overlaps windows[{i}] {:?}: join them into one window or move one",
                            spec.windows[*j], spec.windows[*i]
                        ),
                    ));
                }
            }
        }
        match time_zone {
            Ok(time_zone) if errors.is_empty() => {
                Ok(Windows { windows: windows.into_iter().map(|(_, w)| w).collect(), time_zone })
            }
            _ => Err(errors),
        }
    }

    pub fn time_zone(&self) -> &TimeZone {
        &self.time_zone
    }

    /// Where the windows stand at `now`.
    pub fn state_at(&self, now: Timestamp) -> WindowState {
        let today = now.to_zoned(self.time_zone.clone()).date();
        let mut opens: Option<Timestamp> = None;
        // A window that opened yesterday may still be open (past midnight); the next one opens
        // within a week.
        for offset in -1..=8 {
            let Some(date) = today.checked_add(SignedDuration::from_hours(24 * offset)).ok() else {
                continue;
            };
            for window in self.windows.iter().filter(|w| w.days.contains(&date.weekday())) {
                let Some((start, end)) = self.instants(window, date) else { continue };
                if start <= now && now < end {
                    return WindowState::Open { opened: start, closes: end };
                }
                if start > now && opens.is_none_or(|o| start < o) {
                    opens = Some(start);
                }
            }
        }
        WindowState::Closed { opens: opens.expect("a window opens every week") }
    }

    /// The instants a window opening on `date` opens and closes.
    fn instants(&self, window: &Window, date: Date) -> Option<(Timestamp, Timestamp)> {
        let midnight = date.to_datetime(jiff::civil::Time::midnight());
        let start = midnight.checked_add(SignedDuration::from_mins(i64::from(window.start))).ok()?;
        let end = start.checked_add(SignedDuration::from_mins(i64::from(window.length))).ok()?;
        Some((instant_of(&self.time_zone, start)?, instant_of(&self.time_zone, end)?))
    }

    /// `Sat 2026-11-28 22:00 CET`: an instant in the windows' zone, for people.
    pub fn local(&self, at: Timestamp) -> String {
        at.to_zoned(self.time_zone.clone()).strftime("%a %Y-%m-%d %H:%M %Z").to_string()
    }
}

/// The windows of an object, checked, with every mistake in one line naming `object` and the
/// field under `prefix` (e.g. `spec.maintenanceWindows`); `None` when it has none.
pub fn windows_of(
    spec: Option<&MaintenanceWindowsSpec>,
    object: &str,
    prefix: &str,
) -> Option<Result<Windows, String>> {
    let spec = spec?;
    Some(Windows::new(spec).map_err(|errors| {
        errors
            .iter()
            .map(|(field, why)| format!("{object}: {prefix}.{field}: {why}"))
            .collect::<Vec<_>>()
            .join("; ")
    }))
}

/// A ScyllaCluster's windows from its annotations ([`groundskeeper_protocol::keys::MAINTENANCE_WINDOWS`],
/// `;`-separated, and [`groundskeeper_protocol::keys::MAINTENANCE_TIME_ZONE`]).
pub fn windows_from_annotations(
    annotations: &std::collections::BTreeMap<String, String>,
    object: &str,
) -> Option<Result<Windows, String>> {
    use groundskeeper_protocol::keys::{MAINTENANCE_TIME_ZONE, MAINTENANCE_WINDOWS};
    let windows = annotations.get(MAINTENANCE_WINDOWS)?;
    let spec = MaintenanceWindowsSpec {
        time_zone: annotations.get(MAINTENANCE_TIME_ZONE).cloned().unwrap_or_else(default_time_zone),
        windows: windows.split(';').map(str::trim).filter(|w| !w.is_empty()).map(str::to_owned).collect(),
    };
    Some(Windows::new(&spec).map_err(|errors| {
        errors
            .iter()
            .map(|(field, why)| {
                let key = if field == "timeZone" { MAINTENANCE_TIME_ZONE } else { MAINTENANCE_WINDOWS };
                format!("{object}: metadata.annotations[{key}]: {field}: {why}")
            })
            .collect::<Vec<_>>()
            .join("; ")
    }))
}

fn parse_window(text: &str) -> Result<Window, String> {
    let form = "write days then a time range, e.g. \"Mon-Fri 01:00-05:00\", \"Sat,Sun 22:00-06:00\" or \"* 02:00-04:00\"";
    let mut parts = text.split_whitespace();
    let (Some(days), Some(range), None) = (parts.next(), parts.next(), parts.next()) else {
        return Err(form.to_owned());
    };
    let days = parse_days(days).map_err(|why| format!("{why}; {form}"))?;
    let (start, end) = range.split_once('-').ok_or_else(|| form.to_owned())?;
    let start = parse_time(start, false)?;
    let end = parse_time(end, true)?;
    if start == end {
        return Err("the window has no length: its end is its start".to_owned());
    }
    // An end before the start is the next day's.
    let length = if end > start { end - start } else { end + MINUTES_A_DAY - start };
    Ok(Window { days, start, length })
}

fn parse_days(text: &str) -> Result<Vec<Weekday>, String> {
    if text == "*" {
        return Ok(DAYS.iter().map(|(_, d)| *d).collect());
    }
    let index = |name: &str| {
        DAYS.iter()
            .position(|(n, _)| n.eq_ignore_ascii_case(name))
            .ok_or_else(|| format!("{name:?} is not a day: use Mon, Tue, Wed, Thu, Fri, Sat, Sun or *"))
    };
    let mut days = Vec::new();
    for part in text.split(',') {
        match part.split_once('-') {
            Some((from, to)) => {
                let (from, to) = (index(from)?, index(to)?);
                // Fri-Mon wraps over the weekend.
                let mut i = from;
                loop {
                    days.push(DAYS[i].1);
                    if i == to {
                        break;
                    }
                    i = (i + 1) % 7;
                }
            }
            None => days.push(DAYS[index(part)?].1),
        }
    }
    days.sort_by_key(|d| d.to_monday_zero_offset());
    days.dedup();
    Ok(days)
}

/// `HH:MM` as minutes after midnight; `24:00` only as an end.
fn parse_time(text: &str, end: bool) -> Result<u32, String> {
    let bad = || format!("{text:?} is not a time: use HH:MM, 00:00 to 23:59 (24:00 as an end)");
    let (hours, minutes) = text.split_once(':').ok_or_else(bad)?;
    if hours.len() != 2 || minutes.len() != 2 {
        return Err(bad());
    }
    let (hours, minutes): (u32, u32) =
        (hours.parse().map_err(|_| bad())?, minutes.parse().map_err(|_| bad())?);
    match (hours, minutes) {
        (24, 0) if end => Ok(MINUTES_A_DAY),
        (0..=23, 0..=59) => Ok(hours * 60 + minutes),
        _ => Err(bad()),
    }
}

/// Whether two windows share a minute of the week.
fn overlap(a: &Window, b: &Window) -> bool {
    let spans = |w: &Window| -> Vec<(i64, i64)> {
        w.days
            .iter()
            .map(|d| {
                let start =
                    i64::from(d.to_monday_zero_offset()) * i64::from(MINUTES_A_DAY) + i64::from(w.start);
                (start, start + i64::from(w.length))
            })
            .collect()
    };
    let week = i64::from(MINUTES_A_WEEK);
    spans(a).iter().any(|&(a0, a1)| {
        spans(b).iter().any(|&(b0, b1)| {
            // Within the week, and across its end (Sunday night into Monday).
            [-week, 0, week].iter().any(|&shift| a0 < b1 + shift && b0 + shift < a1)
        })
    })
}

#[cfg(test)]
mod tests;
