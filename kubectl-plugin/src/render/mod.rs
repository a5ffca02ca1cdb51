//! Text views: pure functions from objects (and an explicit `now`) to text.

pub mod etcd;
pub mod plan;
pub mod progress;
pub mod restore;
pub mod schedule;
pub mod scylla;
pub mod snapshot;
pub mod task;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// Columns separated by three spaces, each as wide as its widest cell, as kubectl prints them;
/// no trailing spaces.
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if i < widths.len() {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
    }
    let line = |cells: Vec<&str>| {
        let mut out = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                out.push_str(cell);
            } else {
                out.push_str(cell);
                out.push_str(&" ".repeat(widths[i] - cell.chars().count() + 3));
            }
        }
        out.trim_end().to_owned() + "\n"
    };
    let mut out = line(headers.to_vec());
    for row in rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    out
}

/// `64.3 MiB`.
pub fn mib(bytes: i64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

/// `64.3 MiB (67436544)`: readable, and exact.
pub fn size(bytes: Option<i64>) -> String {
    match bytes {
        Some(bytes) => format!("{} ({bytes})", mib(bytes)),
        None => "-".to_owned(),
    }
}

/// How long ago, as kubectl prints ages: `45s`, `12m`, `3h`, `5d`.
pub fn age(now: Timestamp, then: Timestamp) -> String {
    let seconds = now.duration_since(then).as_secs().max(0);
    match seconds {
        s if s < 120 => format!("{s}s"),
        s if s < 2 * 3600 => format!("{}m", s / 60),
        s if s < 2 * 86400 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86400),
    }
}

/// How long until, or how long ago: `in 4m`, `12m ago`.
pub fn relative(now: Timestamp, at: Timestamp) -> String {
    if at > now { format!("in {}", age(at, now)) } else { format!("{} ago", age(now, at)) }
}

/// `2026-11-23T20:31:05Z (3m ago)`.
pub fn when(now: Timestamp, at: Option<&Time>) -> String {
    match at {
        Some(at) => format!("{} ({})", at.0.round(jiff::Unit::Second).unwrap_or(at.0), relative(now, at.0)),
        None => "-".to_owned(),
    }
}

/// A duration in seconds as `1m05s`, `42s`, `2h03m`.
pub fn duration(seconds: i64) -> String {
    let seconds = seconds.max(0);
    match seconds {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m{:02}s", s / 60, s % 60),
        s => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}

/// Conditions as a table: type, status, reason, age, message.
pub fn conditions(now: Timestamp, conditions: &[Condition]) -> String {
    if conditions.is_empty() {
        return "  none\n".to_owned();
    }
    let rows: Vec<Vec<String>> = conditions
        .iter()
        .map(|c| {
            vec![
                c.type_.clone(),
                c.status.clone(),
                c.reason.clone(),
                age(now, c.last_transition_time.0),
                c.message.clone(),
            ]
        })
        .collect();
    indent(&table(&["TYPE", "STATUS", "REASON", "AGE", "MESSAGE"], &rows))
}

/// Every line two spaces in.
pub fn indent(text: &str) -> String {
    text.lines().map(|l| format!("  {l}\n")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_align_columns_and_trim_lines() {
        let got = table(
            &["NAME", "STATE", "NOTE"],
            &[
                vec!["a".into(), "Completed".into(), "".into()],
                vec!["longer-name".into(), "Pending".into(), "x".into()],
            ],
        );
        assert_eq!(
            got,
            "NAME          STATE       NOTE\na             Completed\nlonger-name   Pending     x\n"
        );
    }

    #[test]
    fn sizes_ages_and_durations() {
        assert_eq!(size(Some(67_436_544)), "64.3 MiB (67436544)");
        assert_eq!(size(None), "-");
        let now: Timestamp = "2026-11-23T20:00:00Z".parse().unwrap();
        for (then, wanted) in [
            ("2026-11-23T19:59:15Z", "45s"),
            ("2026-11-23T19:48:00Z", "12m"),
            ("2026-11-23T17:00:00Z", "3h"),
            ("2026-11-18T20:00:00Z", "5d"),
        ] {
            assert_eq!(age(now, then.parse().unwrap()), wanted);
        }
        assert_eq!(relative(now, "2026-11-23T20:04:00Z".parse().unwrap()), "in 4m");
        assert_eq!(relative(now, "2026-11-23T19:48:00Z".parse().unwrap()), "12m ago");
        assert_eq!(duration(65), "1m05s");
        assert_eq!(duration(7380), "2h03m");
    }
}
