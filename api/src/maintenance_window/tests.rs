use super::*;

fn windows(zone: &str, list: &[&str]) -> Windows {
    let spec = MaintenanceWindowsSpec {
        time_zone: zone.into(),
        windows: list.iter().map(|w| (*w).into()).collect(),
    };
    Windows::new(&spec).unwrap_or_else(|e| panic!("{list:?}: {e:?}"))
}

fn at(text: &str) -> Timestamp {
    text.parse().unwrap()
}

/// The state with an open window's opening left out (the table says when windows close; the
/// opening is checked on its own below).
fn closing_only(state: WindowState) -> WindowState {
    match state {
        WindowState::Open { closes, .. } => WindowState::Open { opened: Timestamp::UNIX_EPOCH, closes },
        closed => closed,
    }
}

/// (case, zone, windows, now, the state then)
#[test]
fn windows_open_and_close_on_the_wall_clock_of_their_zone() {
    let open = |closes: &str| WindowState::Open { opened: Timestamp::UNIX_EPOCH, closes: at(closes) };
    let closed = |opens: &str| WindowState::Closed { opens: at(opens) };
    let cases: Vec<(&str, &str, Vec<&str>, &str, WindowState)> = vec![
        (
            "inside a weekday window",
            "UTC",
            vec!["Mon-Fri 01:00-05:00"],
            "2026-11-24T02:00:00Z",
            open("2026-11-24T05:00:00Z"),
        ),
        (
            "at its end it is closed",
            "UTC",
            vec!["Mon-Fri 01:00-05:00"],
            "2026-11-24T05:00:00Z",
            closed("2026-11-25T01:00:00Z"),
        ),
        (
            "Friday evening: next is Monday",
            "UTC",
            vec!["Mon-Fri 01:00-05:00"],
            "2026-11-27T12:00:00Z",
            closed("2026-11-30T01:00:00Z"),
        ),
        (
            "past midnight, on the next day",
            "UTC",
            vec!["Sat,Sun 22:00-06:00"],
            "2026-11-30T03:00:00Z",
            open("2026-11-30T06:00:00Z"),
        ),
        ("every day", "UTC", vec!["* 02:00-04:00"], "2026-11-24T10:00:00Z", closed("2026-11-25T02:00:00Z")),
        ("a whole day", "UTC", vec!["Sun 00:00-24:00"], "2026-11-29T23:59:00Z", open("2026-11-30T00:00:00Z")),
        (
            "Berlin local time (CET, UTC+1)",
            "Europe/Berlin",
            vec!["Mon-Fri 01:00-05:00"],
            "2026-11-24T00:30:00Z",
            open("2026-11-24T04:00:00Z"),
        ),
        (
            "Berlin, spring forward: a window opening at 02:30 opens at the jump",
            "Europe/Berlin",
            vec!["Sun 02:30-05:00"],
            "2026-03-28T12:00:00Z",
            closed("2026-03-29T01:00:00Z"),
        ),
        (
            "New York, fall back: 01:00-03:00 lasts three hours of real time",
            "America/New_York",
            vec!["Sun 01:00-03:00"],
            "2026-11-01T07:30:00Z",
            open("2026-11-01T08:00:00Z"),
        ),
        (
            "two windows: the nearer opens",
            "UTC",
            vec!["Sat 10:00-12:00", "Wed 03:00-04:00"],
            "2026-11-24T10:00:00Z",
            closed("2026-11-25T03:00:00Z"),
        ),
    ];
    for (case, zone, list, now, want) in cases {
        assert_eq!(closing_only(windows(zone, &list).state_at(at(now))), want, "{case}");
    }
}

#[test]
fn bad_windows_name_the_entry_and_say_what_to_write() {
    let cases: Vec<(Vec<&str>, &str, &str)> = vec![
        (vec!["Mon-Fri 01:00-01:00"], "windows[0]", "has no length"),
        (vec!["Mon-Fri 1:00-05:00"], "windows[0]", "is not a time"),
        (vec!["Mon-Fri 01:00-25:00"], "windows[0]", "is not a time"),
        (vec!["Mon-Fri 24:00-02:00"], "windows[0]", "is not a time"),
        (vec!["Moonday 01:00-02:00"], "windows[0]", "is not a day"),
        (vec!["every night"], "windows[0]", "write days then a time range"),
        (vec!["Mon-Fri 01:00-05:00", "Wed 04:00-06:00"], "windows[1]", "overlaps windows[0]"),
        (vec!["Sun 23:00-02:00", "Mon 01:00-03:00"], "windows[1]", "overlaps windows[0]"),
        (vec![], "windows", "is empty"),
    ];
    for (list, field, message) in cases {
        let spec = MaintenanceWindowsSpec {
            time_zone: "UTC".into(),
            windows: list.iter().map(|w| (*w).into()).collect(),
        };
        let errors = Windows::new(&spec).unwrap_err();
        assert!(errors.iter().any(|(f, m)| f == field && m.contains(message)), "{list:?}: {errors:?}");
    }
    let spec =
        MaintenanceWindowsSpec { time_zone: "Mars/Base".into(), windows: vec!["* 01:00-02:00".into()] };
    assert_eq!(Windows::new(&spec).unwrap_err()[0].0, "timeZone");
    // Adjacent windows are not overlapping ones.
    windows("UTC", &["Mon 01:00-02:00", "Mon 02:00-03:00", "Sun 22:00-24:00", "Mon 00:00-01:00"]);
}

#[test]
fn a_scylla_clusters_windows_come_from_its_annotations() {
    use groundskeeper_protocol::keys::{MAINTENANCE_TIME_ZONE, MAINTENANCE_WINDOWS};
    let annotations = std::collections::BTreeMap::from([
        (MAINTENANCE_WINDOWS.to_owned(), "Mon-Fri 01:00-05:00; Sat 22:00-06:00".to_owned()),
        (MAINTENANCE_TIME_ZONE.to_owned(), "Europe/Berlin".to_owned()),
    ]);
    let windows = windows_from_annotations(&annotations, "ScyllaCluster db/basic").unwrap().unwrap();
    assert_eq!(
        windows.state_at(at("2026-11-24T00:30:00Z")),
        WindowState::Open { opened: at("2026-11-24T00:00:00Z"), closes: at("2026-11-24T04:00:00Z") }
    );
    assert!(windows_from_annotations(&Default::default(), "x").is_none());
    let bad =
        std::collections::BTreeMap::from([(MAINTENANCE_WINDOWS.to_owned(), "Mon 03:00-03:00".to_owned())]);
    let why = windows_from_annotations(&bad, "ScyllaCluster db/basic").unwrap().unwrap_err();
    assert!(
        why.starts_with(
            "ScyllaCluster db/basic: metadata.annotations[groundskeeper.dev/maintenance-windows]: windows[0]"
        ),
        "{why}"
    );
}
