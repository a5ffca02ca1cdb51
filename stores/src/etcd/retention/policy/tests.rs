use super::*;

const MIN: i64 = 60;
const HOUR: i64 = 3_600;
const DAY: i64 = 86_400;

fn at(seconds: i64) -> Timestamp {
    Timestamp::from_second(1_780_000_000 + seconds).unwrap()
}

fn full(name: &str, seconds: i64, size: u64) -> Backup {
    Backup { name: name.into(), time: Some(at(seconds)), size, kind: Kind::Full }
}

fn delta(name: &str, seconds: i64, size: u64) -> Backup {
    Backup { name: name.into(), time: Some(at(seconds)), size, kind: Kind::Delta }
}

fn hours(h: i64) -> SignedDuration {
    SignedDuration::from_hours(h)
}

/// Full snapshots f0 (oldest) … f3 an hour apart, each followed by two deltas (fNa, fNb), and
/// one delta older than every full snapshot.
fn store() -> Vec<Backup> {
    let mut backups = vec![delta("orphan", -10 * MIN, 1)];
    for n in 0..4 {
        backups.push(full(&format!("f{n}"), n * HOUR, 100));
        backups.push(delta(&format!("f{n}a"), n * HOUR + 10 * MIN, 10));
        backups.push(delta(&format!("f{n}b"), n * HOUR + 20 * MIN, 10));
    }
    backups
}

/// (case, policy, now in seconds, full snapshots deleted, deltas deleted, over the limit).
#[test]
#[allow(clippy::type_complexity)] // a table of cases
fn whole_chains_are_kept_or_deleted_by_each_rule() {
    let policy = |f: &dyn Fn(&mut Policy)| {
        let mut p = Policy::keep_last(2);
        f(&mut p);
        p
    };
    let cases: Vec<(&str, Policy, i64, Vec<&str>, Vec<&str>, Option<u64>)> = vec![
        (
            "the newest two and their chains; the orphan goes",
            Policy::keep_last(2),
            3 * HOUR + 30 * MIN,
            vec!["f0", "f1"],
            vec!["orphan", "f0a", "f0b", "f1a", "f1b"],
            None,
        ),
        (
            "keepWithin 2h30m adds f1",
            policy(&|p| p.keep_within = Some(SignedDuration::from_mins(150))),
            3 * HOUR + 30 * MIN,
            vec!["f0"],
            vec!["orphan", "f0a", "f0b"],
            None,
        ),
        (
            "deltas for the last 30m: only the newest chain; f0 and f1 go, f2 stays without deltas",
            policy(&|p| p.keep_deltas_for = Some(SignedDuration::from_mins(30))),
            3 * HOUR + 30 * MIN,
            vec!["f0", "f1"],
            vec!["orphan", "f0a", "f0b", "f1a", "f1b", "f2a", "f2b"],
            None,
        ),
        (
            "deltas for the last 3h: every chain reaching into them, and their full snapshots",
            policy(&|p| p.keep_deltas_for = Some(hours(3))),
            3 * HOUR + 30 * MIN,
            vec![],
            vec!["orphan"],
            None,
        ),
        (
            "a tier of one per 2h for 4h keeps the newest of each period: f3 (period 2–4h), f1 (0–2h)",
            Policy { tiers: vec![Tier { every: hours(2), keep_for: hours(4) }], ..Policy::keep_last(1) },
            3 * HOUR + 30 * MIN,
            vec!["f0", "f2"],
            vec!["orphan", "f0a", "f0b", "f2a", "f2b"],
            None,
        ),
        (
            "250 bytes: the two newest chains weigh 240",
            Policy { max_total_bytes: Some(250), ..Policy::keep_last(4) },
            3 * HOUR + 30 * MIN,
            vec!["f0", "f1"],
            vec!["orphan", "f0a", "f0b", "f1a", "f1b"],
            None,
        ),
        (
            "100 bytes: only the newest chain, which alone weighs 120",
            Policy { max_total_bytes: Some(100), ..Policy::keep_last(4) },
            3 * HOUR + 30 * MIN,
            vec!["f0", "f1", "f2"],
            vec!["orphan", "f0a", "f0b", "f1a", "f1b", "f2a", "f2b"],
            Some(120),
        ),
    ];
    for (case, policy, now, full, deltas, over) in cases {
        let selection = select(&store(), "f3", &policy, at(now));
        assert_eq!(selection.delete_full, full, "{case}");
        assert_eq!(selection.delete_deltas, deltas, "{case}");
        assert_eq!(selection.over_limit, over, "{case}");
    }
}

#[test]
fn the_one_just_written_stays_whatever_its_name_sorts_as() {
    // A template without {time}: no times; the snapshot just written is kept and counts as one.
    let backups = vec![
        Backup { name: "a.db".into(), time: None, size: 1, kind: Kind::Full },
        Backup { name: "z.db".into(), time: None, size: 1, kind: Kind::Full },
    ];
    let selection = select(&backups, "a.db", &Policy::keep_last(1), at(0));
    assert_eq!(selection.delete_full, ["z.db"]);
    assert_eq!(selection.kept_bytes, 1);
}

#[test]
fn policies_that_keep_less_than_they_seem_to_are_refused_naming_the_rule() {
    let tier = |every, keep_for| Policy { tiers: vec![Tier { every, keep_for }], ..Policy::keep_last(1) };
    for (policy, rule, says) in [
        (Policy::keep_last(0), "keepLast", "keeps no full snapshot"),
        (tier(hours(24), hours(24)), "tiers[0].for", "at most one full snapshot"),
        (tier(hours(0), hours(24)), "tiers[0].every", "not positive"),
        (Policy { keep_deltas_for: Some(hours(0)), ..Policy::keep_last(1) }, "keepDeltasFor", "not positive"),
        (Policy { max_total_bytes: Some(0), ..Policy::keep_last(1) }, "maxTotalSize", "keeps nothing"),
    ] {
        let (found, why) = policy.check().unwrap_err();
        assert_eq!(found, rule);
        assert!(why.contains(says), "{rule}: {why}");
    }
    assert_eq!(tier(hours(1), hours(168)).check(), Ok(()));
}

#[test]
fn sizes_read_as_kubernetes_quantities() {
    for (text, bytes) in
        [("1024", 1024), ("500Mi", 500 << 20), ("50Gi", 50 << 30), ("2G", 2_000_000_000), ("1Ti", 1 << 40)]
    {
        assert_eq!(parse_size(text), Ok(bytes), "{text}");
    }
    for text in ["", "Gi", "1.5Gi", "10GB", "-1", "99999999999Pi"] {
        assert!(parse_size(text).unwrap_err().contains("not a size"), "{text:?}");
    }
}

/// A store's history, checked against the policy's promises rather than its implementation:
/// 45 days of a full snapshot every 6 hours and a delta every 30 minutes, the selection applied
/// after each full snapshot as a run does, then, from what was ever written:
/// * every delta left can be replayed (the full snapshot it follows and every delta between are
///   there), and every point of the last `keepDeltasFor` can be restored;
/// * the newest `keepLast`, every one of the last `keepWithin` and, per tier, one of each period
///   of the last `for` that had any are there;
/// * the store does not grow without bound (what the rules allow, nothing more).
#[test]
fn a_month_of_backups_keeps_every_promise_and_no_more() {
    let policy = Policy {
        keep_last: 3,
        keep_within: Some(hours(12)),
        tiers: vec![
            Tier { every: hours(24), keep_for: hours(7 * 24) },
            Tier { every: hours(7 * 24), keep_for: hours(28 * 24) },
        ],
        keep_deltas_for: Some(hours(36)),
        max_total_bytes: None,
    };
    let full_every = 6 * HOUR;
    let delta_every = 30 * MIN;
    let mut written: Vec<Backup> = Vec::new();
    let mut store: Vec<Backup> = Vec::new();
    for step in 0..(45 * DAY / delta_every) {
        let now = step * delta_every;
        let is_full = now % full_every == 0;
        let backup = if is_full {
            full(&format!("full-{now}"), now, 1_000)
        } else {
            delta(&format!("delta-{now}"), now, 10)
        };
        written.push(backup.clone());
        store.push(backup.clone());
        if !is_full {
            continue;
        }
        let selection = select(&store, &backup.name, &policy, at(now));
        let gone: BTreeSet<&String> = selection.delete_full.iter().chain(&selection.delete_deltas).collect();
        store.retain(|b| !gone.contains(&b.name));
        check_promises(&written, &store, &policy, now, full_every, delta_every);
    }
}

fn check_promises(
    written: &[Backup],
    store: &[Backup],
    policy: &Policy,
    now: i64,
    full_every: i64,
    delta_every: i64,
) {
    let present = |name: &str| store.iter().any(|b| b.name == name);
    let time = |b: &Backup| b.time.unwrap().as_second() - at(0).as_second();
    let fulls: Vec<&Backup> = written.iter().filter(|b| b.kind == Kind::Full).collect();
    // A point in time restores when the newest full snapshot written at or before it is there
    // with every delta written between the two.
    let restorable = |point: i64| {
        let Some(base) = fulls.iter().rev().find(|f| time(f) <= point) else { return false };
        present(&base.name)
            && written
                .iter()
                .filter(|b| b.kind == Kind::Delta && time(b) > time(base) && time(b) <= point)
                .all(|d| present(&d.name))
    };
    for delta in store.iter().filter(|b| b.kind == Kind::Delta) {
        assert!(restorable(time(delta)), "at {now}: delta {} is left but cannot be replayed", delta.name);
    }
    let window = policy.keep_deltas_for.unwrap().as_secs();
    for point in (0..=now).rev().step_by(delta_every as usize).take_while(|p| *p >= now - window) {
        assert!(
            restorable(point),
            "at {now}: the point {point} of the last keepDeltasFor cannot be restored"
        );
    }
    for newest in fulls.iter().rev().take(policy.keep_last as usize) {
        assert!(present(&newest.name), "at {now}: {} is one of the newest keepLast", newest.name);
    }
    let within = policy.keep_within.unwrap().as_secs();
    for recent in fulls.iter().filter(|f| time(f) >= now - within) {
        assert!(present(&recent.name), "at {now}: {} is within keepWithin", recent.name);
    }
    for tier in &policy.tiers {
        let (every, keep_for) = (tier.every.as_secs(), tier.keep_for.as_secs());
        let period = |b: &Backup| b.time.unwrap().as_second().div_euclid(every);
        for recent in fulls.iter().filter(|f| time(f) >= now - keep_for) {
            assert!(
                store.iter().any(|b| b.kind == Kind::Full && period(b) == period(recent)),
                "at {now}: no full snapshot is left of the {every} s period of {}",
                recent.name
            );
        }
    }
    // No more than the rules allow: each rule's own count, plus the chains' full snapshots.
    let allowed_fulls = policy.keep_last as i64
        + within / full_every
        + 1
        + policy.tiers.iter().map(|t| t.keep_for.as_secs() / t.every.as_secs() + 1).sum::<i64>()
        + window / full_every
        + 2;
    let kept_fulls = store.iter().filter(|b| b.kind == Kind::Full).count() as i64;
    assert!(
        kept_fulls <= allowed_fulls,
        "at {now}: {kept_fulls} full snapshots left, at most {allowed_fulls}"
    );
    let allowed_deltas = (window / full_every + 2) * (full_every / delta_every);
    let kept_deltas = store.iter().filter(|b| b.kind == Kind::Delta).count() as i64;
    assert!(kept_deltas <= allowed_deltas, "at {now}: {kept_deltas} deltas left, at most {allowed_deltas}");
}

/// With a size limit, the same history never weighs more than the limit, except the newest full
/// snapshot and its chain alone (said in `over_limit`), and the oldest go first.
#[test]
fn a_size_limit_holds_from_the_oldest_and_says_when_the_newest_alone_is_over() {
    let policy = Policy { max_total_bytes: Some(5_000), ..Policy::keep_last(100) };
    let mut store: Vec<Backup> = Vec::new();
    for step in 0..400 {
        let now = step * 30 * MIN;
        // The db grows: a full snapshot of the last days weighs more than the limit.
        let backup = if step % 12 == 0 {
            full(&format!("full-{now:08}"), now, 200 + step as u64 * 12)
        } else {
            delta(&format!("delta-{now:08}"), now, 7)
        };
        store.push(backup.clone());
        if backup.kind == Kind::Delta {
            continue;
        }
        let selection = select(&store, &backup.name, &policy, at(now));
        let gone: BTreeSet<&String> = selection.delete_full.iter().chain(&selection.delete_deltas).collect();
        store.retain(|b| !gone.contains(&b.name));
        let weight: u64 = store.iter().map(|b| b.size).sum();
        assert_eq!(selection.kept_bytes, weight, "at {now}");
        match selection.over_limit {
            None => assert!(weight <= 5_000, "at {now}: {weight} bytes kept"),
            Some(over) => {
                assert_eq!(over, weight);
                assert_eq!(
                    store.iter().filter(|b| b.kind == Kind::Full).count(),
                    1,
                    "at {now}: only the newest"
                );
            }
        }
        // What is left is the newest: every full snapshot deleted is older than every one kept.
        let oldest_kept = store.iter().filter(|b| b.kind == Kind::Full).map(|b| b.time).min();
        assert!(selection.delete_full.iter().all(|name| {
            name.as_str()
                < format!("full-{:08}", oldest_kept.flatten().unwrap().as_second() - at(0).as_second())
                    .as_str()
        }));
    }
    assert!(store.iter().filter(|b| b.kind == Kind::Full).count() >= 1);
}

#[test]
fn a_store_without_full_snapshots_loses_only_its_orphan_deltas() {
    let backups = vec![delta("d1", 0, 5), delta("d2", MIN, 5)];
    let selection = select(
        &backups,
        "missing.db",
        &Policy { max_total_bytes: Some(1), ..Policy::keep_last(1) },
        at(HOUR),
    );
    assert_eq!(selection.delete_deltas, ["d1", "d2"]);
    assert_eq!((selection.kept_bytes, selection.over_limit), (0, None));
}
