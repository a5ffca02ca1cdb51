use super::*;

fn at(text: &str) -> Timestamp {
    text.parse().unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn calendar(expression: &str, zone: &str) -> Calendar {
    Calendar::new(expression, zone).unwrap_or_else(|e| panic!("{expression} in {zone}: {e}"))
}

/// (case, expression, zone, after, the runs that follow, in order)
#[test]
#[allow(clippy::type_complexity)] // a table of cases
fn runs_follow_the_wall_clock_through_daylight_saving_and_leap_days() {
    let cases: &[(&str, &str, &str, &str, &[&str])] = &[
        (
            "every night, UTC",
            "0 3 * * *",
            "UTC",
            "2026-11-24T10:00:00Z",
            &["2026-11-25T03:00:00Z", "2026-11-26T03:00:00Z"],
        ),
        (
            "Berlin, spring forward: 02:30 does not exist, runs once at the jump (03:00 CEST)",
            "30 2 * * *",
            "Europe/Berlin",
            "2026-03-28T12:00:00Z",
            &["2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"],
        ),
        (
            "Berlin, fall back: 02:30 happens twice, runs the first time only",
            "30 2 * * *",
            "Europe/Berlin",
            "2026-10-24T12:00:00Z",
            &["2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"],
        ),
        (
            "New York, spring forward: four runs in the missing hour are one run",
            "*/15 2 * * *",
            "America/New_York",
            "2026-03-07T12:00:00Z",
            &["2026-03-08T07:00:00Z", "2026-03-09T06:00:00Z", "2026-03-09T06:15:00Z"],
        ),
        (
            "New York, fall back: 01:30 happens twice, runs the first time only",
            "30 1 * * *",
            "America/New_York",
            "2026-10-31T12:00:00Z",
            &["2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"],
        ),
        (
            "New York, fall back: every 30 minutes goes on through the repeated hour once",
            "*/30 1 * * *",
            "America/New_York",
            "2026-11-01T05:10:00Z",
            &["2026-11-01T05:30:00Z", "2026-11-02T06:00:00Z"],
        ),
        (
            "leap day, UTC",
            "0 0 29 2 *",
            "UTC",
            "2026-01-01T00:00:00Z",
            &["2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z"],
        ),
        (
            "weekdays are POSIX: 1-5 is Monday to Friday (after a Saturday)",
            "0 3 * * 1-5",
            "UTC",
            "2026-11-28T12:00:00Z",
            &["2026-11-30T03:00:00Z", "2026-12-01T03:00:00Z"],
        ),
        ("Sunday is 0 and 7", "0 3 * * 7", "UTC", "2026-11-24T00:00:00Z", &["2026-11-29T03:00:00Z"]),
        (
            "day of month and day of week both set: either matches (POSIX)",
            "0 0 1 * SUN",
            "UTC",
            "2026-11-24T00:00:00Z",
            &["2026-11-29T00:00:00Z", "2026-12-01T00:00:00Z", "2026-12-06T00:00:00Z"],
        ),
        ("a nickname", "@weekly", "UTC", "2026-11-24T00:00:00Z", &["2026-11-29T00:00:00Z"]),
    ];
    for (case, expression, zone, after, runs) in cases {
        let calendar = calendar(expression, zone);
        let mut from = at(after);
        for run in *runs {
            let next = calendar.next_after(from).unwrap_or_else(|| panic!("{case}: no run after {from}"));
            assert_eq!(next, at(run), "{case}: after {from}");
            from = next;
        }
    }
}

/// (case, expression, zone, since: the last run or the schedule's creation, now, what is due)
#[test]
#[allow(clippy::type_complexity)] // a table of cases
fn only_the_latest_missed_run_is_due_and_never_twice() {
    let cases: &[(&str, &str, &str, &str, &str, Option<&str>)] = &[
        ("not yet", "0 3 * * *", "UTC", "2026-11-24T03:00:00Z", "2026-11-25T02:59:59Z", None),
        (
            "on time",
            "0 3 * * *",
            "UTC",
            "2026-11-24T03:00:00Z",
            "2026-11-25T03:00:00Z",
            Some("2026-11-25T03:00:00Z"),
        ),
        (
            "three nights missed: the latest only, no backfill",
            "0 3 * * *",
            "UTC",
            "2026-11-21T03:00:00Z",
            "2026-11-24T10:00:00Z",
            Some("2026-11-24T03:00:00Z"),
        ),
        (
            "the clock went back before the last run",
            "0 3 * * *",
            "UTC",
            "2026-11-24T03:00:00Z",
            "2026-11-24T02:00:00Z",
            None,
        ),
        (
            "the clock went back a day: the run of that day already happened",
            "0 3 * * *",
            "UTC",
            "2026-11-25T03:00:00Z",
            "2026-11-24T04:00:00Z",
            None,
        ),
        (
            "Berlin, fall back: the second 02:30 is not due again",
            "30 2 * * *",
            "Europe/Berlin",
            "2026-10-25T00:30:00Z",
            "2026-10-25T01:45:00Z",
            None,
        ),
        (
            "Berlin, spring forward: the skipped 02:30 is due from the jump",
            "30 2 * * *",
            "Europe/Berlin",
            "2026-03-28T01:30:00Z",
            "2026-03-29T01:10:00Z",
            Some("2026-03-29T01:00:00Z"),
        ),
        (
            "New York, spring forward: the missing hour's runs are one, at the jump",
            "*/15 2 * * *",
            "America/New_York",
            "2026-03-07T07:45:00Z",
            "2026-03-08T07:20:00Z",
            Some("2026-03-08T07:00:00Z"),
        ),
        (
            "seconds after the minute still see it",
            "*/5 * * * *",
            "UTC",
            "2026-11-24T10:00:00Z",
            "2026-11-24T10:05:42Z",
            Some("2026-11-24T10:05:00Z"),
        ),
        (
            "leap day",
            "0 0 29 2 *",
            "UTC",
            "2026-01-01T00:00:00Z",
            "2028-03-01T00:00:00Z",
            Some("2028-02-29T00:00:00Z"),
        ),
    ];
    for (case, expression, zone, since, now, due) in cases {
        let got = calendar(expression, zone).latest_due(at(since), at(now));
        assert_eq!(got, due.map(at), "{case}");
    }
}

#[test]
fn bad_expressions_and_zones_say_what_to_write() {
    let cases = [
        ("61 * * * *", "UTC", "is not a cron expression"),
        ("0 0 3 * * *", "UTC", "is not a cron expression"),
        ("", "UTC", "is not a cron expression"),
        ("every night", "UTC", "is not a cron expression"),
        ("0 0 30 2 *", "UTC", "never happens"),
        ("0 3 * * *", "Mars/Olympus_Mons", "is not a time zone"),
        ("0 3 * * *", "+02:00", "is not a time zone"),
        ("0 3 * * *", "", "is not a time zone"),
    ];
    for (expression, zone, want) in cases {
        let err = Calendar::new(expression, zone).unwrap_err().to_string();
        assert!(err.contains(want), "{expression:?} in {zone:?}: {err}");
    }
    let long = "0 ".repeat(200);
    assert!(Calendar::new(&long, "UTC").unwrap_err().to_string().contains("longer than 256"));
}

/// The runs in `(from, to]` found without the calendar: every minute walked forward with the time
/// zone database. A minute is a run when its wall-clock time matches the expression and has not
/// been seen yet (a repeated time runs the first time), or when the clock jumped over wall-clock
/// times that match (the run is at the jump).
fn runs_by_brute_force(expression: &str, zone: &TimeZone, from: Timestamp, to: Timestamp) -> Vec<Timestamp> {
    let parser = CronParser::builder().seconds(Seconds::Disallowed).year(Year::Disallowed).build();
    let cron = parser.parse(expression).unwrap();
    let matches = |wall: DateTime| cron.is_time_matching(&utc_of(wall).unwrap()).unwrap();
    let minute = SignedDuration::from_mins(1);
    // Walls seen in the few hours before `from` count as seen: a fold is at most a few hours long.
    let mut t = from - SignedDuration::from_hours(4);
    let mut seen = std::collections::HashSet::new();
    let mut previous = zone.to_datetime(t - minute);
    let mut runs = Vec::new();
    while t <= to {
        let wall = zone.to_datetime(t);
        let mut run = matches(wall) && !seen.contains(&wall);
        // Wall-clock minutes the clock jumped over between the previous minute and this one.
        let mut skipped = previous.checked_add(minute).unwrap();
        while skipped < wall && !run {
            run = matches(skipped);
            skipped = skipped.checked_add(minute).unwrap();
        }
        if run && t > from {
            runs.push(t);
        }
        seen.insert(wall);
        previous = wall;
        t += minute;
    }
    runs
}

/// `latest_due` and `next_after` agree with the brute-force walk around every clock change of
/// 2026 in zones with one-hour, half-hour and two-hour changes, and around Samoa's skipped day,
/// asked at every fifth minute from three hours before each change to three hours after.
#[test]
fn latest_and_next_runs_agree_with_a_minute_by_minute_walk_around_every_clock_change() {
    let zones = [
        ("Europe/Berlin", "2026-01-01T00:00:00Z"),
        ("America/New_York", "2026-01-01T00:00:00Z"),
        ("Australia/Lord_Howe", "2026-01-01T00:00:00Z"),
        ("Antarctica/Troll", "2026-01-01T00:00:00Z"),
        ("America/St_Johns", "2026-01-01T00:00:00Z"),
        ("Pacific/Apia", "2011-06-01T00:00:00Z"),
    ];
    let expressions =
        ["30 2 * * *", "*/15 * * * *", "* * * * *", "0 * * * *", "45 1 * * *", "10 3 * * 0", "0 0 * * *"];
    let mut checked = 0;
    for (zone_name, year_start) in zones {
        let zone = TimeZone::get(zone_name).unwrap();
        let transitions: Vec<Timestamp> =
            zone.following(at(year_start)).take(2).map(|t| t.timestamp()).collect();
        assert_eq!(transitions.len(), 2, "{zone_name} changes its clock");
        for expression in expressions {
            let calendar = calendar(expression, zone_name);
            for transition in &transitions {
                let first = *transition - SignedDuration::from_hours(3);
                let last = *transition + SignedDuration::from_hours(3);
                let since = first - SignedDuration::from_hours(48);
                let runs =
                    runs_by_brute_force(expression, &zone, since, last + SignedDuration::from_hours(8 * 24));
                let mut now = first;
                while now <= last {
                    let latest = runs.iter().rev().find(|r| **r <= now).copied();
                    let next = runs.iter().find(|r| **r > now).copied();
                    let case = format!("{expression} in {zone_name} at {now}");
                    assert_eq!(calendar.latest_due(since, now), latest, "latest_due: {case}");
                    assert_eq!(calendar.next_after(now), next, "next_after: {case}");
                    checked += 1;
                    now += SignedDuration::from_mins(5);
                }
            }
        }
    }
    assert_eq!(checked, 6 * 2 * 7 * 73, "every case was asked");
}
