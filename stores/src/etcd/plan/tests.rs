#![allow(clippy::type_complexity)] // tables of cases

use super::*;

const MB: i64 = 1_000_000;

fn policy() -> DefragPolicy {
    DefragPolicy { min_defrag_bytes: 100 * MB, max_fragmented_percent: 45.0 }
}

/// A healthy voting member led by `leader`, `size` bytes of which `in_use` are in use.
fn member(id: u64, leader: u64, size: i64, in_use: i64) -> MemberObservation {
    MemberObservation {
        id,
        name: format!("m{id}"),
        is_learner: false,
        status: Ok(MemberStatus {
            db_size: size,
            db_size_in_use: in_use,
            leader,
            raft_term: 7,
            raft_index: 1000,
            raft_applied_index: 1000,
            errors: vec![],
            version: "3.5.23".into(),
            db_size_quota: 0,
        }),
    }
}

fn on_version(mut m: MemberObservation, version: &str) -> MemberObservation {
    m.status.as_mut().unwrap().version = version.into();
    m
}

fn learner(mut m: MemberObservation) -> MemberObservation {
    m.is_learner = true;
    m
}

fn applied(mut m: MemberObservation, index: u64) -> MemberObservation {
    m.status.as_mut().unwrap().raft_applied_index = index;
    m
}

fn with_error(mut m: MemberObservation, error: &str) -> MemberObservation {
    m.status.as_mut().unwrap().errors.push(error.into());
    m
}

fn unreachable(mut m: MemberObservation) -> MemberObservation {
    m.status = Err("connection refused".into());
    m
}

fn sees_leader(mut m: MemberObservation, leader: u64) -> MemberObservation {
    m.status.as_mut().unwrap().leader = leader;
    m
}

/// Three members led by 1, every one over both thresholds.
fn fragmented_trio() -> Vec<MemberObservation> {
    vec![member(1, 1, 200 * MB, 10 * MB), member(2, 1, 200 * MB, 10 * MB), member(3, 1, 200 * MB, 10 * MB)]
}

fn always() -> PlanOptions {
    PlanOptions { leader_turn: LeaderTurnPolicy::Always, ..PlanOptions::default() }
}

fn never() -> PlanOptions {
    PlanOptions { leader_turn: LeaderTurnPolicy::Never, ..PlanOptions::default() }
}

fn order(plan: &DefragPlan) -> Vec<(u64, MemberAction)> {
    plan.members.iter().map(|m| (m.id, m.action.clone())).collect()
}

#[test]
fn thresholds_both_must_be_reached_and_are_inclusive() {
    use MemberAction::*;
    // (db size, in use, expected action for a follower)
    let cases = [
        (100 * MB, 55 * MB, Defrag),    // exactly 100 MB and exactly 45 %
        (100 * MB - 1, 0, Skip),        // one byte under the size minimum, 100 % free
        (100 * MB, 55 * MB + 1, Skip),  // a hair under 45 %
        (1_000 * MB, 549 * MB, Defrag), // 45.1 %
        (1_000 * MB, 560 * MB, Skip),   // 44 %
        (200 * MB, 200 * MB, Skip),     // not fragmented at all
        (0, 0, Skip),                   // empty db (no division by zero)
        (200 * MB, 300 * MB, Skip),     // in-use over size (racy status): not fragmented
    ];
    for (size, in_use, want) in cases {
        let members = vec![member(1, 1, 1, 1), member(2, 1, size, in_use), member(3, 1, 1, 1)];
        let plan = plan_defrag(&policy(), &PlanOptions::default(), &members).unwrap();
        let got = plan.members.iter().find(|m| m.id == 2).unwrap();
        assert_eq!(got.action, want, "size {size} in use {in_use}: {}", got.reason);
    }
}

#[test]
fn a_nospace_alarm_waives_both_thresholds() {
    let alarm = "memberID:1 alarm:NOSPACE ";
    let cases = [
        ("stale in-use figure, alarm raised", with_error(member(1, 1, 200 * MB, 200 * MB), alarm), true),
        // A small quota (or a small cluster) fills under the size minimum: still full, still cured.
        ("alarm raised, db under the minimum", with_error(member(1, 1, 8 * MB, 8 * MB), alarm), true),
        (
            "alarm raised by another member",
            with_error(member(1, 1, 5 * MB, 5 * MB), "memberID:2 alarm:NOSPACE "),
            true,
        ),
        ("no alarm, db under the minimum", member(1, 1, 50 * MB, 0), false),
        ("no alarm, not fragmented", member(1, 1, 200 * MB, 200 * MB), false),
        (
            "another alarm does not count",
            with_error(member(1, 1, 200 * MB, 200 * MB), "memberID:1 alarm:CORRUPT "),
            false,
        ),
    ];
    for (name, m, want) in cases {
        let (got, why) = needs_defrag(&policy(), m.status.as_ref().unwrap());
        assert_eq!(got, want, "{name}: {why}");
    }
}

#[test]
fn reasons_state_the_facts_and_the_threshold_that_decided() {
    let (yes, why) = needs_defrag(&policy(), &member(1, 1, 200 * MB, 10 * MB).status.unwrap());
    assert!(yes);
    assert!(why.contains("95.0% fragmented"), "{why}");
    let (no, why) = needs_defrag(&policy(), &member(1, 1, 50 * MB, 0).status.unwrap());
    assert!(!no);
    assert!(why.contains("under the 100000000 bytes minimum"), "{why}");
    let (no, why) = needs_defrag(&policy(), &member(1, 1, 200 * MB, 190 * MB).status.unwrap());
    assert!(!no);
    assert!(why.contains("under the 45% fragmentation threshold"), "{why}");
}

#[test]
fn followers_first_by_name_then_the_leader_then_the_skipped() {
    use MemberAction::*;
    let cases: Vec<(&str, Vec<MemberObservation>, PlanOptions, Vec<(u64, MemberAction)>)> = vec![
        (
            "Auto: the leader's turn is decided at its turn",
            fragmented_trio(),
            PlanOptions::default(),
            vec![(2, Defrag), (3, Defrag), (1, LeaderDecidedAtTurn)],
        ),
        (
            "Always: leader 1 moves leadership before its turn",
            fragmented_trio(),
            always(),
            vec![(2, Defrag), (3, Defrag), (1, MoveLeaderThenDefrag)],
        ),
        (
            "leader in the middle of the list still goes last",
            vec![member(1, 2, 200 * MB, 0), member(2, 2, 200 * MB, 0), member(3, 2, 200 * MB, 0)],
            always(),
            vec![(1, Defrag), (3, Defrag), (2, MoveLeaderThenDefrag)],
        ),
        (
            "Never: leader last, no transfer",
            fragmented_trio(),
            never(),
            vec![(2, Defrag), (3, Defrag), (1, Defrag)],
        ),
        (
            "a member under the threshold is left alone, listed last",
            vec![member(1, 1, 200 * MB, 0), member(2, 1, 20 * MB, 0), member(3, 1, 200 * MB, 0)],
            always(),
            vec![(3, Defrag), (1, MoveLeaderThenDefrag), (2, Skip)],
        ),
        (
            "the leader under the threshold is not moved",
            vec![member(1, 1, 20 * MB, 0), member(2, 1, 200 * MB, 0), member(3, 1, 200 * MB, 0)],
            PlanOptions::default(),
            vec![(2, Defrag), (3, Defrag), (1, Skip)],
        ),
        (
            "a fragmented learner is never defragmented",
            vec![
                member(1, 1, 200 * MB, 0),
                member(2, 1, 200 * MB, 0),
                member(3, 1, 200 * MB, 0),
                learner(member(4, 1, 200 * MB, 0)),
            ],
            PlanOptions::default(),
            vec![(2, Defrag), (3, Defrag), (1, LeaderDecidedAtTurn), (4, Skip)],
        ),
        (
            "single member allowed: defragmented in place, nobody to hand over to",
            vec![member(1, 1, 200 * MB, 0)],
            PlanOptions { allow_single_member: true, ..PlanOptions::default() },
            vec![(1, Defrag)],
        ),
        (
            "single voter plus a learner: a learner cannot take leadership",
            vec![member(1, 1, 200 * MB, 0), learner(member(2, 1, 200 * MB, 0))],
            PlanOptions { allow_single_member: true, ..PlanOptions::default() },
            vec![(1, Defrag), (2, Skip)],
        ),
        (
            "nothing over the thresholds: an empty plan",
            vec![member(1, 1, 20 * MB, 0), member(2, 1, 200 * MB, 200 * MB), member(3, 1, 0, 0)],
            PlanOptions::default(),
            vec![(1, Skip), (2, Skip), (3, Skip)],
        ),
    ];
    for (name, members, options, want) in cases {
        let plan = plan_defrag(&policy(), &options, &members).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(order(&plan), want, "{name}");
        assert_eq!(plan.is_empty(), want.iter().all(|(_, a)| *a == Skip), "{name}");
    }
}

#[test]
fn the_plan_records_who_led_and_the_term() {
    let plan = plan_defrag(&policy(), &PlanOptions::default(), &fragmented_trio()).unwrap();
    assert_eq!(plan.leader, 1);
    assert_eq!(plan.raft_term, 7);
    let leader = plan.members.iter().find(|m| m.id == 1).unwrap();
    assert!(leader.was_leader);
    assert_eq!(leader.id_hex(), "1");
    assert!(plan.members.iter().filter(|m| m.id != 1).all(|m| !m.was_leader));
}

#[test]
fn refuses_unless_every_member_is_healthy_and_the_cluster_is_ha() {
    let trio = fragmented_trio;
    let cases: Vec<(&str, Vec<MemberObservation>, PlanOptions, Option<&str>)> = vec![
        ("healthy trio", trio(), PlanOptions::default(), None),
        (
            "one member unreachable",
            vec![trio()[0].clone(), unreachable(trio()[1].clone()), trio()[2].clone()],
            PlanOptions::default(),
            Some("member m2 (2) is not healthy: unreachable: connection refused"),
        ),
        (
            "one member sees no leader",
            vec![trio()[0].clone(), trio()[1].clone(), sees_leader(trio()[2].clone(), 0)],
            PlanOptions::default(),
            Some("member m3 (3) is not healthy: sees no leader"),
        ),
        (
            "a CORRUPT alarm",
            vec![
                with_error(trio()[0].clone(), "memberID:1 alarm:CORRUPT "),
                trio()[1].clone(),
                trio()[2].clone(),
            ],
            PlanOptions::default(),
            Some("reports errors: memberID:1 alarm:CORRUPT"),
        ),
        (
            "a NOSPACE alarm is what we cure: not unhealthy",
            vec![
                with_error(trio()[0].clone(), "memberID:1 alarm:NOSPACE "),
                trio()[1].clone(),
                trio()[2].clone(),
            ],
            PlanOptions::default(),
            None,
        ),
        (
            "members disagree on the leader",
            vec![trio()[0].clone(), trio()[1].clone(), sees_leader(trio()[2].clone(), 3)],
            PlanOptions::default(),
            Some("disagree on the leader"),
        ),
        (
            "the leader everybody sees is not a member",
            vec![
                sees_leader(trio()[0].clone(), 9),
                sees_leader(trio()[1].clone(), 9),
                sees_leader(trio()[2].clone(), 9),
            ],
            PlanOptions::default(),
            Some("disagree on the leader"),
        ),
        (
            "two members",
            vec![trio()[0].clone(), trio()[1].clone()],
            PlanOptions::default(),
            Some("2 voting member(s)"),
        ),
        (
            "three members of which one learner",
            vec![trio()[0].clone(), trio()[1].clone(), learner(trio()[2].clone())],
            PlanOptions::default(),
            Some("2 voting member(s)"),
        ),
        ("one member", vec![trio()[0].clone()], PlanOptions::default(), Some("1 voting member(s)")),
        (
            "one member, allowed",
            vec![trio()[0].clone()],
            PlanOptions { allow_single_member: true, ..PlanOptions::default() },
            None,
        ),
        ("no members", vec![], PlanOptions::default(), Some("the member list is empty")),
    ];
    for (name, members, options, want) in cases {
        let got = plan_defrag(&policy(), &options, &members);
        match (want, got) {
            (None, Ok(_)) => {}
            (Some(want), Err(refusal)) => {
                assert!(refusal.to_string().contains(want), "{name}: {refusal}")
            }
            (want, got) => panic!("{name}: wanted {want:?}, got {got:?}"),
        }
    }
}

#[test]
fn transfer_goes_to_the_most_caught_up_healthy_voting_follower() {
    let cases: Vec<(&str, Vec<MemberObservation>, Option<u64>)> = vec![
        ("all caught up: first by name", fragmented_trio(), Some(2)),
        (
            "the most caught up wins",
            vec![member(1, 1, 0, 0), applied(member(2, 1, 0, 0), 990), applied(member(3, 1, 0, 0), 999)],
            Some(3),
        ),
        (
            "exactly at the lag limit counts",
            vec![member(1, 1, 0, 0), applied(member(2, 1, 0, 0), 900), applied(member(3, 1, 0, 0), 10)],
            Some(2),
        ),
        (
            "one past the lag limit does not",
            vec![member(1, 1, 0, 0), applied(member(2, 1, 0, 0), 899), applied(member(3, 1, 0, 0), 10)],
            None,
        ),
        (
            "a learner never takes leadership",
            vec![member(1, 1, 0, 0), learner(member(2, 1, 0, 0)), applied(member(3, 1, 0, 0), 0)],
            None,
        ),
        (
            "an unreachable follower is not chosen",
            vec![member(1, 1, 0, 0), unreachable(member(2, 1, 0, 0)), member(3, 1, 0, 0)],
            Some(3),
        ),
        ("no followers at all", vec![member(1, 1, 0, 0)], None),
        ("leader unknown", vec![member(2, 1, 0, 0), member(3, 1, 0, 0)], None),
    ];
    for (name, members, want) in cases {
        assert_eq!(choose_transfer_target(&members, 1, DEFAULT_MAX_APPLY_LAG), want, "{name}");
    }
}

#[test]
fn each_step_rechecks_health_and_who_leads() {
    use TurnChoice::{InPlace, TransferFirst};
    let options = PlanOptions::default();
    let single = PlanOptions { allow_single_member: true, ..PlanOptions::default() };
    let lagging = vec![member(1, 1, 0, 0), applied(member(2, 1, 0, 0), 10), applied(member(3, 1, 0, 0), 10)];
    let cases: Vec<(&str, u64, Vec<MemberObservation>, PlanOptions, TurnChoice, StepDecision)> = vec![
        ("a follower", 2, fragmented_trio(), options, TransferFirst, StepDecision::Defrag),
        (
            "the leader, transfer first",
            1,
            fragmented_trio(),
            options,
            TransferFirst,
            StepDecision::MoveLeaderTo { to: 2 },
        ),
        ("the leader, in place", 1, fragmented_trio(), options, InPlace, StepDecision::DefragLeader),
        (
            "planned as a follower, leads now: its turn decides",
            3,
            fragmented_trio().into_iter().map(|m| sees_leader(m, 3)).collect(),
            options,
            TransferFirst,
            StepDecision::MoveLeaderTo { to: 1 },
        ),
        (
            "planned as the leader, follows now: no transfer",
            1,
            fragmented_trio().into_iter().map(|m| sees_leader(m, 2)).collect(),
            options,
            TransferFirst,
            StepDecision::Defrag,
        ),
        (
            "single member leads",
            1,
            vec![member(1, 1, 0, 0)],
            single,
            TransferFirst,
            StepDecision::DefragLeader,
        ),
        (
            "a follower within the lag bound",
            2,
            vec![member(1, 1, 0, 0), applied(member(2, 1, 0, 0), 900), member(3, 1, 0, 0)],
            options,
            InPlace,
            StepDecision::Defrag,
        ),
    ];
    for (name, id, members, options, turn, want) in cases {
        assert_eq!(decide_step(id, &members, &options, turn), want, "{name}");
    }
    for (name, id, members, want) in [
        ("no caught-up follower for the transfer", 1, lagging.clone(), "no healthy follower within 100"),
        (
            "a member went down",
            2,
            vec![member(1, 1, 0, 0), member(2, 1, 0, 0), unreachable(member(3, 1, 0, 0))],
            "member m3 (3) is not healthy",
        ),
        (
            "a member sees no leader",
            2,
            vec![member(1, 1, 0, 0), member(2, 1, 0, 0), sees_leader(member(3, 1, 0, 0), 0)],
            "member m3 (3) is not healthy: sees no leader",
        ),
    ] {
        match decide_step(id, &members, &options, TransferFirst) {
            StepDecision::Stop(why) => assert!(why.contains(want), "{name}: {why}"),
            other => panic!("{name}: {other:?}"),
        }
    }
    match decide_step(2, &lagging, &options, InPlace) {
        StepDecision::Behind(why) => assert_eq!(
            why,
            "member m2 (2) has applied index 10, 990 entries behind the leader's commit index 1000 \
             (at most 100 allowed)"
        ),
        other => panic!("a follower far behind: {other:?}"),
    }
}

#[test]
fn affected_versions_are_named_and_refused_when_the_cluster_says_so() {
    let trio = || {
        vec![
            on_version(member(1, 1, 200 * MB, 0), "3.6.7"),
            on_version(member(2, 1, 200 * MB, 0), "3.5.12"),
            on_version(member(3, 1, 200 * MB, 0), "3.4.35"),
        ]
    };
    let plan = plan_defrag(&policy(), &PlanOptions::default(), &trio()).unwrap();
    assert_eq!(
        order(&plan),
        vec![(2, MemberAction::Defrag), (3, MemberAction::Defrag), (1, MemberAction::LeaderDecidedAtTurn)]
    );
    let reason =
        |plan: &DefragPlan, id: u64| plan.members.iter().find(|m| m.id == id).unwrap().reason.clone();
    assert!(
        reason(&plan, 2).contains("etcd 3.5.12: a defrag that overlaps a snapshot apply"),
        "{}",
        reason(&plan, 2)
    );
    assert!(reason(&plan, 2).contains("fixed in 3.5.23"), "{}", reason(&plan, 2));
    assert!(reason(&plan, 3).contains("when caught up with the leader right before its turn"));
    assert!(!reason(&plan, 1).contains("snapshot apply"), "3.6.7 is fixed: {}", reason(&plan, 1));
    let refusing = PlanOptions { refuse_affected_versions: true, ..PlanOptions::default() };
    let plan = plan_defrag(&policy(), &refusing, &trio()).unwrap();
    assert_eq!(
        order(&plan),
        vec![(1, MemberAction::LeaderDecidedAtTurn), (2, MemberAction::Skip), (3, MemberAction::Skip)]
    );
    assert!(reason(&plan, 3).contains("refused by the cluster's policy"), "{}", reason(&plan, 3));
    // A member under the thresholds is skipped for that, and its version is not mentioned.
    let small = vec![
        on_version(member(1, 1, 20 * MB, 0), "3.5.1"),
        member(2, 1, 20 * MB, 0),
        member(3, 1, 20 * MB, 0),
    ];
    let plan = plan_defrag(&policy(), &refusing, &small).unwrap();
    assert!(!reason(&plan, 1).contains("snapshot"), "{}", reason(&plan, 1));
}

#[test]
fn caught_up_means_healthy_and_applied_the_leaders_index() {
    let cases = [
        ("applied everything", member(2, 1, 0, 0), 1000, true),
        ("within the lag", applied(member(2, 1, 0, 0), 950), 1000, true),
        ("behind", applied(member(2, 1, 0, 0), 800), 1000, false),
        ("ahead of a stale leader reading", member(2, 1, 0, 0), 900, true),
        ("no leader yet", sees_leader(member(2, 1, 0, 0), 0), 1000, false),
        ("unreachable", unreachable(member(2, 1, 0, 0)), 0, false),
    ];
    for (name, m, leader_index, want) in cases {
        assert_eq!(caught_up(&m, leader_index, DEFAULT_MAX_APPLY_LAG), want, "{name}");
    }
}

#[test]
fn nospace_alarms_are_disarmed_once_space_is_back() {
    let after = vec![member(1, 1, 50 * MB, 10 * MB), member(2, 1, 150 * MB, 10 * MB)];
    let cases: Vec<(&str, Vec<u64>, Vec<u64>, Option<i64>, Vec<u64>)> = vec![
        ("quota known: under it", vec![1, 2], vec![], Some(100 * MB), vec![1]),
        ("quota known: both under", vec![1, 2], vec![], Some(200 * MB), vec![1, 2]),
        ("quota unknown: only defragmented members", vec![1, 2], vec![2], None, vec![2]),
        ("quota 0 means unknown", vec![1, 2], vec![1], Some(0), vec![1]),
        ("no alarm, nothing to do", vec![], vec![1, 2], None, vec![]),
        ("alarm on a member not observed, quota known", vec![9], vec![], Some(100 * MB), vec![]),
    ];
    for (name, alarmed, defragmented, quota, want) in cases {
        assert_eq!(alarms_to_disarm(&alarmed, &after, &defragmented, quota), want, "{name}");
    }
}

#[test]
fn a_defrag_is_evident_only_when_the_free_pages_fell_to_half() {
    let sizes = |size: i64, in_use: i64| MemberStatus {
        db_size: size,
        db_size_in_use: in_use,
        ..MemberStatus::default()
    };
    let cases: Vec<(&str, MemberStatus, MemberStatus, bool)> = vec![
        ("untouched", sizes(9 * MB, 3 * MB), sizes(9 * MB, 3 * MB), false),
        ("defragmented", sizes(9 * MB, 3 * MB), sizes(3 * MB, 3 * MB), true),
        ("writes after the defrag", sizes(9 * MB, 3 * MB), sizes(4 * MB, 2 * MB), true),
        ("exactly half the free pages", sizes(10 * MB, 2 * MB), sizes(6 * MB, 2 * MB), true),
        ("just over half", sizes(10 * MB, 2 * MB), sizes(6 * MB + 1, 2 * MB), false),
        ("grew meanwhile", sizes(9 * MB, 3 * MB), sizes(12 * MB, 3 * MB), false),
        ("too little free to tell", sizes(5 * MB, 5 * MB - 1000), sizes(5 * MB, 5 * MB), false),
        ("in use above size (stale figures)", sizes(5 * MB, 6 * MB), sizes(MB, MB), false),
    ];
    for (name, before, after, want) in cases {
        assert_eq!(defrag_evident(&before, &after), want, "{name}");
    }
}

#[test]
fn a_transfer_is_judged_on_the_old_and_the_new_leader_only() {
    // Leadership moves from 1 to 2; member 3 is being defragmented meanwhile.
    let agreed =
        |from: MemberObservation, to: MemberObservation, third: MemberObservation| vec![from, to, third];
    let cases: Vec<(&str, Vec<MemberObservation>, Option<&str>)> = vec![
        ("both follow 2", agreed(member(1, 2, 1, 1), member(2, 2, 1, 1), member(3, 1, 1, 1)), None),
        (
            "the third member, blocked by its defrag, does not count",
            agreed(member(1, 2, 1, 1), member(2, 2, 1, 1), unreachable(member(3, 1, 1, 1))),
            None,
        ),
        (
            "the old leader still leads",
            agreed(member(1, 1, 1, 1), member(2, 2, 1, 1), member(3, 1, 1, 1)),
            Some("waiting"),
        ),
        (
            "the new leader died",
            agreed(member(1, 2, 1, 1), unreachable(member(2, 2, 1, 1)), member(3, 1, 1, 1)),
            Some("the new leader m2 (2): unreachable: connection refused"),
        ),
        (
            "the old leader died",
            agreed(unreachable(member(1, 1, 1, 1)), member(2, 2, 1, 1), member(3, 2, 1, 1)),
            Some("the old leader m1 (1): unreachable"),
        ),
        (
            "the new leader sees no leader (an election)",
            agreed(member(1, 2, 1, 1), member(2, 0, 1, 1), member(3, 1, 1, 1)),
            Some("the new leader m2 (2): sees no leader"),
        ),
        (
            "the new leader was removed",
            vec![member(1, 1, 1, 1), member(3, 1, 1, 1)],
            Some("the new leader 2 is no longer a member"),
        ),
    ];
    for (what, members, want) in cases {
        let seen = transfer_seen(&members, 1, 2);
        match (want, &seen) {
            (None, TransferSeen::Agreed) | (Some("waiting"), TransferSeen::Waiting) => {}
            (Some(want), TransferSeen::Unhealthy(why)) if why.starts_with(want) => {}
            _ => panic!("{what}: {seen:?}, wanted {want:?}"),
        }
    }
}

/// (case, db bytes, rate, seconds left, window length, first of the run, deferred?)
#[test]
fn a_member_starts_only_when_its_defrag_ends_inside_the_window() {
    let now: jiff::Timestamp = "2026-11-24T02:00:00Z".parse().unwrap();
    let mib = 1024 * 1024;
    let cases: Vec<(&str, i64, f64, i64, Option<i64>, bool, bool)> = vec![
        ("fits", 100 * mib, 10.0 * mib as f64, 60, Some(3600), false, false),
        ("ends exactly at the close", 100 * mib, 10.0 * mib as f64, 10, Some(3600), false, false),
        ("a second too long", 100 * mib, 10.0 * mib as f64, 9, Some(3600), false, true),
        ("no rate: the default 50 MiB/s", 100 * mib, 0.0, 1, Some(3600), false, true),
        ("longer than the window, first of the run", 100 * mib, 1.0 * mib as f64, 30, Some(60), true, false),
        ("longer than the window, not the first", 100 * mib, 1.0 * mib as f64, 30, Some(60), false, true),
        ("window opening unknown", 100 * mib, 1.0 * mib as f64, 30, None, true, true),
        (
            "longer than the window, first, window closed",
            100 * mib,
            1.0 * mib as f64,
            -30,
            Some(60),
            true,
            true,
        ),
        ("longer than the window, first, closing now", 100 * mib, 1.0 * mib as f64, 0, Some(60), true, true),
        ("fits in no time, window closed", 1, 10.0 * mib as f64, -1, Some(3600), true, true),
    ];
    for (case, bytes, rate, left, length, first, deferred) in cases {
        let not_after = now + jiff::SignedDuration::from_secs(left);
        let opened = length.map(|l| not_after - jiff::SignedDuration::from_secs(l));
        let got = defer_past_window(bytes, rate, now, not_after, opened, first);
        assert_eq!(got.is_some(), deferred, "{case}: {got:?}");
        if let Some(why) = got {
            assert!(why.starts_with("left for the next maintenance window: expected "), "{case}: {why}");
        }
    }
}
