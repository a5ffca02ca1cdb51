//! Durations as people write them in specs and flags: `30s`, `10m`, `1h30m`, `1d`, `2w`, or ISO
//! 8601 `PT1H`/`P1D`. Days are 24 hours and weeks 7 days here (intervals and ages, never calendar
//! arithmetic); months and years are refused, as their length varies.
//!
//! One parser for every duration groundskeeper reads, so that a unit the documentation shows
//! (`fullEvery: 1d`) is never refused by one field and taken by another.

use jiff::{SignedDuration, Span, SpanRelativeTo};

/// The duration `text` gives; `Err` says why it is none, with examples.
pub fn parse(text: &str) -> Result<SignedDuration, String> {
    let text = text.trim();
    let span: Span = text.parse().map_err(|_| {
        format!("{text:?} is not a duration (write e.g. \"30s\", \"10m\", \"1h30m\", \"7d\")")
    })?;
    if span.get_years() != 0 || span.get_months() != 0 {
        return Err(format!(
            "{text:?} counts months or years, whose length varies: give days or weeks (\"30d\", \"52w\")"
        ));
    }
    span.to_duration(SpanRelativeTo::days_are_24_hours())
        .map_err(|e| format!("{text:?} is not a duration groundskeeper can use ({e})"))
}

/// `parse`, refusing a duration shorter than `min`: `Err` names the minimum.
pub fn parse_at_least(text: &str, min: SignedDuration) -> Result<SignedDuration, String> {
    let duration = parse(text)?;
    if duration < min {
        return Err(format!("{:?} is shorter than the minimum {min:#}", text.trim()));
    }
    Ok(duration)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_and_weeks_are_24_and_168_hours() {
        for (text, seconds) in [
            ("30s", 30),
            ("10m", 600),
            ("1h30m", 5_400),
            (" 6h ", 21_600),
            ("1d", 86_400),
            ("2d12h", 216_000),
            ("1w", 604_800),
            ("1 week 1 day", 691_200),
            ("PT1H", 3_600),
            ("P1D", 86_400),
            ("P2W", 1_209_600),
            ("90 seconds", 90),
        ] {
            assert_eq!(parse(text).map(|d| d.as_secs()), Ok(seconds), "{text:?}");
        }
    }

    #[test]
    fn months_years_and_words_are_refused_saying_why() {
        for (text, says) in [
            ("1mo", "months or years"),
            ("P1Y", "months or years"),
            ("soon", "not a duration"),
            ("", "not a duration"),
            ("10", "not a duration"),
        ] {
            let error = parse(text).unwrap_err();
            assert!(error.contains(says), "{text:?}: {error}");
        }
        assert!(parse_at_least("5m", SignedDuration::from_mins(10)).unwrap_err().contains("minimum 10m"));
        assert_eq!(parse_at_least("1d", SignedDuration::from_mins(10)), Ok(SignedDuration::from_hours(24)));
    }
}
