use super::*;

/// `(start, end]` intervals as a table writes them.
type Intervals = &'static [(i64, i64)];
/// A node's ranges now, or why they are unknown.
type Now<'a> = Result<&'a BTreeMap<String, RangeSet>, &'a str>;

fn set(intervals: &[(i64, i64)]) -> RangeSet {
    RangeSet::from_intervals(intervals.to_vec())
}

fn mapper(key: &str, value: &str) -> Mapper {
    Mapper { key: key.into(), value: value.into() }
}

#[test]
fn ring_ranges_unwrap_and_merge() {
    let cases: &[(Intervals, Intervals)] = &[
        (&[(10, 20), (20, 30)], &[(10, 30)]),
        (&[(30, 10)], &[(i64::MIN, 10), (30, i64::MAX)]),
        (&[(5, 5)], &[(i64::MIN, i64::MAX)]),
        (&[(40, 10), (10, 20), (20, 40)], &[(i64::MIN, i64::MAX)]),
        (&[(i64::MAX, 3)], &[(i64::MIN, 3)]),
        (&[(20, 30), (-5, 0)], &[(-5, 0), (20, 30)]),
    ];
    for (ring, expected) in cases {
        assert_eq!(RangeSet::from_ring_ranges(ring.iter().copied()).intervals(), *expected, "{ring:?}");
    }
}

#[test]
fn minus_and_subset() {
    let cases: &[(Intervals, Intervals, Intervals)] = &[
        (&[(0, 100)], &[(0, 100)], &[]),
        (&[(0, 100)], &[(10, 20), (30, 40)], &[(0, 10), (20, 30), (40, 100)]),
        (&[(0, 10), (20, 30)], &[(5, 25)], &[(0, 5), (25, 30)]),
        (&[(0, 10), (20, 30)], &[(-10, 0), (30, 50)], &[(0, 10), (20, 30)]),
        (&[(0, 10)], &[], &[(0, 10)]),
        (&[], &[(0, 10)], &[]),
        (&[(i64::MIN, i64::MAX)], &[(0, 1)], &[(i64::MIN, 0), (1, i64::MAX)]),
    ];
    for (a, b, expected) in cases {
        let lost = set(a).minus(&set(b));
        assert_eq!(lost.intervals(), *expected, "{a:?} − {b:?}");
        assert_eq!(set(a).is_subset_of(&set(b)), expected.is_empty());
    }
}

#[test]
fn range_sets_round_trip_through_their_encoding() {
    let cases: &[&[(i64, i64)]] = &[
        &[],
        &[(i64::MIN, i64::MAX)],
        &[(i64::MIN, -1), (0, 1), (2, i64::MAX)],
        &[(-9_000_000_000_000_000_000, -8_999_999_999_999_999_999), (7, 9)],
    ];
    for intervals in cases {
        let ranges = set(intervals);
        assert_eq!(RangeSet::decode(&ranges.encode()).unwrap(), ranges, "{intervals:?}");
    }
}

#[test]
fn broken_encodings_are_refused() {
    let encode = |bytes: &[u8]| base64::engine::general_purpose::STANDARD.encode(bytes);
    let cases: &[(String, &str)] = &[
        ("%%%".into(), "not base64"),
        (encode(&[2, 0, 5]), "cut short"),
        (encode(&[1, 0, 5, 9]), "after the last range"),
        (encode(&[1, 0, 0]), "non-empty"),
        (encode(&[2, 0, 5, 0, 5]), "disjoint"),
        (encode(&[1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 1]), "too large"),
    ];
    for (text, message) in cases {
        let err = RangeSet::decode(text).unwrap_err();
        assert!(err.contains(message), "{text}: {err}");
    }
}

#[test]
fn records_group_keyspaces_with_identical_ranges_and_round_trip() {
    let record = OwnershipRecord {
        keyspaces: BTreeMap::from([
            ("a".to_owned(), set(&[(0, 10)])),
            ("b".to_owned(), set(&[(0, 10)])),
            ("c".to_owned(), set(&[(5, 50)])),
            ("d".to_owned(), RangeSet::default()),
        ]),
        last_cleaned: None,
    };
    let text = record.to_annotation().unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(json["version"], 1);
    assert_eq!(json["groups"].as_array().unwrap().len(), 3, "{text}");
    assert_eq!(OwnershipRecord::from_annotation(&text).unwrap(), record);

    for (bad, message) in [
        ("{", "EOF"),
        (r#"{"version":2,"groups":[]}"#, "version 2"),
        (r#"{"version":1,"groups":[{"keyspaces":["x"],"ranges":"!"}]}"#, "ranges of x"),
    ] {
        let err = OwnershipRecord::from_annotation(bad).unwrap_err().to_string();
        assert!(err.contains(OWNED_AT_LAST_CLEANUP) && err.contains(message), "{err}");
    }
}

#[test]
fn a_record_over_the_limit_is_refused_with_its_size() {
    // 10,000 keyspaces of 48 characters, each with ranges of its own.
    let keyspaces = (0..10_000).map(|i| (format!("{i:0>48}"), set(&[(i, i + 1)]))).collect();
    let err = OwnershipRecord { keyspaces, last_cleaned: None }.to_annotation().unwrap_err();
    let RecordError::TooLarge { bytes, limit } = err else { panic!("{err:?}") };
    assert!(bytes > limit);
    assert!(err.to_string().contains("KiB"), "{err}");
}

#[test]
fn keyspaces_with_equal_share_lists_form_one_group() {
    let shares = BTreeMap::from([
        ("a".to_owned(), vec![mapper("10.0.0.1", "0.5"), mapper("10.0.0.2", "0.5")]),
        ("b".to_owned(), vec![mapper("10.0.0.2", "0.5"), mapper("10.0.0.1", "0.5")]),
        ("c".to_owned(), vec![mapper("10.0.0.1", "1"), mapper("10.0.0.2", "1")]),
        ("d".to_owned(), vec![mapper("10.0.0.1", "0.5"), mapper("10.0.0.2", "0.50001")]),
    ]);
    let groups = replication_groups(&shares);
    let groups: Vec<Vec<&str>> = groups.iter().map(|g| g.iter().map(String::as_str).collect()).collect();
    assert_eq!(groups, [vec!["a", "b"], vec!["c"], vec!["d"]]);
}

#[test]
fn describe_ring_rows_become_each_nodes_ranges() {
    use groundskeeper_stores::scylla::agent::EndpointDetail;
    let row = |start: &str, end: &str, endpoints: &[(&str, &str)]| TokenRange {
        start_token: start.into(),
        end_token: end.into(),
        endpoints: endpoints.iter().map(|(e, _)| (*e).into()).collect(),
        endpoint_details: endpoints
            .iter()
            .map(|(e, dc)| EndpointDetail { host: (*e).into(), datacenter: (*dc).into(), rack: "r1".into() })
            .collect(),
    };
    let rows = [row("-5", "7", &[("B", "dc2"), ("A", "dc1")]), row("7", "-5", &[("A", "dc1")])];
    let keyspaces = BTreeSet::from(["ks".to_owned()]);
    let view = RingView::from_describe_ring(keyspaces.clone(), &rows).unwrap();
    assert_eq!(view.ranges_of("A"), set(&[(i64::MIN, i64::MAX)]));
    assert_eq!(view.ranges_of("B"), set(&[(-5, 7)]));
    assert_eq!(view.nodes["B"].datacenter, "dc2");
    assert!(view.ranges_of("C").is_empty());
    assert_eq!(node_ownership(&[view], "B")["ks"], set(&[(-5, 7)]));

    let err = RingView::from_describe_ring(keyspaces.clone(), &[row("x", "7", &[])]).unwrap_err();
    assert_eq!(err.to_string(), r#"describe_ring ks: start_token "x" is not a decimal int64 token"#);
    assert!(RingView::from_describe_ring(keyspaces, &[]).is_err());
}

#[test]
fn the_decision_says_why_ownership_cannot_decide() {
    let now = BTreeMap::from([("a".to_owned(), set(&[(0, 10)])), ("b".to_owned(), set(&[(0, 10)]))]);
    let record = OwnershipRecord {
        keyspaces: BTreeMap::from([("a".to_owned(), set(&[(0, 20)]))]),
        last_cleaned: None,
    };
    let cases: Vec<(RecordState, Now, NodeDecision)> = vec![
        (
            RecordState::Present(record.clone()),
            Err("GET /storage_service/describe_ring/a: not offered by this node (HTTP 404)"),
            NodeDecision::RingHash {
                reason: FallbackReason::OwnershipUnknown {
                    message: "GET /storage_service/describe_ring/a: not offered by this node (HTTP 404)"
                        .into(),
                },
            },
        ),
        (RecordState::Missing, Ok(&now), NodeDecision::RingHash { reason: FallbackReason::NoRecord }),
        (
            RecordState::from_annotation(Some("nonsense")),
            Ok(&now),
            NodeDecision::RingHash {
                reason: FallbackReason::RecordUnreadable {
                    message: OwnershipRecord::from_annotation("nonsense").unwrap_err().to_string(),
                },
            },
        ),
        (
            RecordState::Present(record),
            Ok(&now),
            NodeDecision::Ownership {
                clean: BTreeMap::from([("a".to_owned(), Lost { ranges: set(&[(10, 20)]) })]),
                fallback: BTreeMap::from([("b".to_owned(), FallbackReason::KeyspaceNotRecorded)]),
            },
        ),
    ];
    for (record, now, expected) in cases {
        assert_eq!(decide_node(&record, now), expected, "{record:?}");
    }
}

#[test]
fn the_record_after_a_cleanup_never_forgets_data_still_held() {
    let previous = OwnershipRecord {
        keyspaces: BTreeMap::from([
            ("cleaned".to_owned(), set(&[(0, 30)])),
            ("kept".to_owned(), set(&[(0, 30)])),
            ("dropped".to_owned(), set(&[(0, 30)])),
        ]),
        last_cleaned: None,
    };
    let decided =
        BTreeMap::from([("cleaned".to_owned(), set(&[(0, 10)])), ("kept".to_owned(), set(&[(0, 40)]))]);
    let now = BTreeMap::from([
        ("cleaned".to_owned(), set(&[(5, 15)])),
        ("kept".to_owned(), set(&[(0, 40)])),
        ("new".to_owned(), set(&[(100, 200)])),
    ]);
    let cleaned = BTreeSet::from(["cleaned".to_owned()]);
    let after = OwnershipRecord::after_cleanup(Some(&previous), &decided, &now, &cleaned, Some("h2"));
    assert_eq!(
        after.keyspaces,
        BTreeMap::from([
            ("cleaned".to_owned(), set(&[(0, 15)])),
            ("kept".to_owned(), set(&[(0, 40)])),
            ("new".to_owned(), set(&[(100, 200)])),
        ])
    );
}

#[test]
fn ownership_and_the_ring_hash_rule_together() {
    let lost = |keyspaces: &[&str]| -> BTreeMap<String, Lost> {
        keyspaces.iter().map(|k| ((*k).to_owned(), Lost { ranges: set(&[(0, 1 << 62)]) })).collect()
    };
    let unknown = |keyspaces: &[&str]| -> BTreeMap<String, FallbackReason> {
        keyspaces.iter().map(|k| ((*k).to_owned(), FallbackReason::KeyspaceNotRecorded)).collect()
    };
    let only = |keyspaces: &[&str]| CleanScope::Only(keyspaces.iter().map(|k| (*k).to_owned()).collect());
    let no_record = NodeDecision::RingHash { reason: FallbackReason::NoRecord };
    // (case, decision, ring changed, expected scope and flag reset: None for no cleanup)
    type Expected = Option<(CleanScope, bool)>;
    let cases: Vec<(&str, NodeDecision, bool, Expected)> = vec![
        ("no record, ring moved: the whole node", no_record.clone(), true, Some((CleanScope::All, false))),
        ("no record, ring still", no_record, false, None),
        (
            "scale-in: nothing lost although the ring moved",
            NodeDecision::Ownership { clean: lost(&[]), fallback: unknown(&[]) },
            true,
            None,
        ),
        (
            "RF lowered, ring still: that keyspace, and the flag reset",
            NodeDecision::Ownership { clean: lost(&["app"]), fallback: unknown(&[]) },
            false,
            Some((only(&["app"]), true)),
        ),
        (
            "a new keyspace and a moved ring: it is cleaned too",
            NodeDecision::Ownership { clean: lost(&["app"]), fallback: unknown(&["fresh"]) },
            true,
            Some((only(&["app", "fresh"]), true)),
        ),
        (
            "a new keyspace, ring still: not cleaned, and the flag left to Scylla",
            NodeDecision::Ownership { clean: lost(&["app"]), fallback: unknown(&["fresh"]) },
            false,
            Some((only(&["app"]), false)),
        ),
    ];
    for (name, decision, ring_changed, expected) in cases {
        let plan = plan_node(&decision, ring_changed);
        match (plan, expected) {
            (NodePlan::Nothing, None) => {}
            (NodePlan::Clean { scope, mark_node_clean, why }, Some((expected_scope, expected_mark))) => {
                assert_eq!((scope, mark_node_clean), (expected_scope, expected_mark), "{name}");
                assert!(!why.is_empty(), "{name}");
            }
            (plan, expected) => panic!("{name}: {plan:?}, expected {expected:?}"),
        }
    }
    let plan = plan_node(&NodeDecision::Ownership { clean: lost(&["app"]), fallback: unknown(&[]) }, false);
    let NodePlan::Clean { why, .. } = plan else { panic!() };
    assert_eq!(why, "app: no longer replicates 25.00% of the ring");
}

#[test]
fn a_record_grows_with_what_the_node_gains_and_seeds_new_keyspaces() {
    let record = OwnershipRecord {
        keyspaces: BTreeMap::from([("a".to_owned(), set(&[(0, 10)]))]),
        last_cleaned: None,
    };
    let same = BTreeMap::from([("a".to_owned(), set(&[(2, 8)]))]);
    assert_eq!(record.widened(&same), None, "nothing gained");
    let gained = BTreeMap::from([("a".to_owned(), set(&[(5, 20)])), ("b".to_owned(), set(&[(1, 2)]))]);
    let widened = record.widened(&gained).unwrap();
    assert_eq!(
        widened.keyspaces,
        BTreeMap::from([("a".to_owned(), set(&[(0, 20)])), ("b".to_owned(), set(&[(1, 2)]))])
    );
}

/// How a record follows its node's last-cleaned annotation: only a move from the record's basis
/// to the current ring, beside scylla-operator, is someone else's whole-node cleanup; a seed,
/// groundskeeper's own writes and a move to an older ring never shrink a record.
#[test]
fn a_record_is_reset_only_after_someone_else_cleaned_the_node_for_its_current_ring() {
    let never = groundskeeper_protocol::keys::NEVER_CLEANED_UP;
    #[allow(clippy::type_complexity)] // a table of cases
    let cases: Vec<(&str, Option<&str>, Option<&str>, Option<&str>, bool, BasisChange)> = vec![
        ("unchanged", Some("h1"), Some("h1"), Some("h2"), true, BasisChange::Same),
        (
            "scylla-operator cleaned it for the current ring",
            Some("h1"),
            Some("h2"),
            Some("h2"),
            true,
            BasisChange::CleanedElsewhere,
        ),
        (
            "NeverCleanedUp, then cleaned by scylla-operator",
            Some(never),
            Some("h2"),
            Some("h2"),
            true,
            BasisChange::CleanedElsewhere,
        ),
        (
            "recorded for an older ring: wait for the current one's cleanup",
            Some("h1"),
            Some("h2"),
            Some("h3"),
            true,
            BasisChange::Same,
        ),
        ("a person asks for a cleanup", Some("h1"), Some(never), Some("h1"), true, BasisChange::Same),
        ("annotation removed: nothing to follow", Some("h1"), None, Some("h1"), true, BasisChange::Same),
        (
            "seeded by scylla-operator after the record (no basis): no cleanup",
            None,
            Some("h2"),
            Some("h2"),
            true,
            BasisChange::Rebase,
        ),
        (
            "groundskeeper writes last-cleaned itself: never someone else's cleanup",
            Some("h1"),
            Some("h2"),
            Some("h2"),
            false,
            BasisChange::Same,
        ),
        (
            "groundskeeper's own seed of a joined node, no basis: left to its own writes",
            None,
            Some("h2"),
            Some("h2"),
            false,
            BasisChange::Same,
        ),
        ("groundskeeper, unchanged", Some("h2"), Some("h2"), Some("h2"), false, BasisChange::Same),
    ];
    for (name, basis, last, current, outside, expected) in cases {
        assert_eq!(basis_change(basis, last, current, outside), expected, "{name}");
    }
}

#[test]
fn the_record_keeps_its_basis_through_the_annotation_and_widening() {
    let record = OwnershipRecord {
        keyspaces: BTreeMap::from([("a".to_owned(), set(&[(0, 10)]))]),
        last_cleaned: Some("h1".into()),
    };
    let text = record.to_annotation().unwrap();
    assert_eq!(OwnershipRecord::from_annotation(&text).unwrap(), record);
    let wider = record.widened(&BTreeMap::from([("a".to_owned(), set(&[(5, 20)]))])).unwrap();
    assert_eq!(wider.last_cleaned.as_deref(), Some("h1"));
    // A record written before the basis was kept reads as "not known".
    let old = r#"{"version":1,"groups":[]}"#;
    assert_eq!(OwnershipRecord::from_annotation(old).unwrap().last_cleaned, None);
}
