//! `merge_conditions`: ours replaced or appended, everyone else's kept byte-for-byte.

use groundskeeper_controller::conditions::{Condition, ConditionStatus, merge_conditions};
use jiff::Timestamp;
use serde_json::{Value, json};

const EARLIER: &str = "2026-01-01T00:00:00Z";
const NOW: &str = "2026-02-02T12:34:56Z";

fn now() -> Timestamp {
    // Sub-second precision is dropped, as Kubernetes' metav1.Time does.
    "2026-02-02T12:34:56.789Z".parse().unwrap()
}

fn foreign_available() -> Value {
    json!({"type": "Available", "status": "True", "reason": "AsExpected", "message": "",
           "lastTransitionTime": "2025-12-24T10:00:00Z", "observedGeneration": 3,
           "someFutureField": {"kept": [1, 2]}})
}

fn ours_progressing(status: &str, reason: &str, time: &str, generation: i64) -> Value {
    json!({"type": "CleanupControllerProgressing", "status": status, "reason": reason, "message": "m",
           "lastTransitionTime": time, "observedGeneration": generation})
}

fn progressing(status: ConditionStatus, reason: &str, message: &str) -> Condition {
    Condition::new("CleanupControllerProgressing", status, reason, message)
}

#[test]
fn table() {
    struct Case {
        name: &'static str,
        existing: Vec<Value>,
        ours: Vec<Condition>,
        want: Vec<Value>,
    }
    let cases = [
        Case {
            name: "empty list: ours appended in the order given",
            existing: vec![],
            ours: vec![
                progressing(ConditionStatus::True, "CleaningUp", "cleaning 1 node"),
                Condition::new("CleanupControllerDegraded", false, "AsExpected", ""),
            ],
            want: vec![
                json!({"type": "CleanupControllerProgressing", "status": "True", "reason": "CleaningUp",
                       "message": "cleaning 1 node", "lastTransitionTime": NOW, "observedGeneration": 7}),
                json!({"type": "CleanupControllerDegraded", "status": "False", "reason": "AsExpected",
                       "message": "", "lastTransitionTime": NOW, "observedGeneration": 7}),
            ],
        },
        Case {
            name: "foreign entries kept as they are and where they are, unknown fields included",
            existing: vec![
                foreign_available(),
                ours_progressing("False", "AsExpected", EARLIER, 6),
                json!({"type": "Degraded", "status": "False"}),
            ],
            ours: vec![progressing(ConditionStatus::True, "CleaningUp", "m")],
            want: vec![
                foreign_available(),
                ours_progressing("True", "CleaningUp", NOW, 7),
                json!({"type": "Degraded", "status": "False"}),
            ],
        },
        Case {
            name: "status unchanged: the transition time stays, reason and generation follow",
            existing: vec![ours_progressing("True", "Waiting", EARLIER, 6)],
            ours: vec![progressing(ConditionStatus::True, "CleaningUp", "m")],
            want: vec![ours_progressing("True", "CleaningUp", EARLIER, 7)],
        },
        Case {
            name: "status changed: the transition time is now",
            existing: vec![ours_progressing("True", "CleaningUp", EARLIER, 7)],
            ours: vec![progressing(ConditionStatus::False, "AsExpected", "m")],
            want: vec![ours_progressing("False", "AsExpected", NOW, 7)],
        },
        Case {
            name: "an unparsable previous time is replaced",
            existing: vec![ours_progressing("True", "CleaningUp", "yesterday", 7)],
            ours: vec![progressing(ConditionStatus::True, "CleaningUp", "m")],
            want: vec![ours_progressing("True", "CleaningUp", NOW, 7)],
        },
        Case {
            name: "a duplicate of ours is dropped, the first one replaced in place",
            existing: vec![
                ours_progressing("True", "A", EARLIER, 7),
                foreign_available(),
                ours_progressing("False", "B", EARLIER, 7),
            ],
            ours: vec![progressing(ConditionStatus::True, "A", "m")],
            want: vec![ours_progressing("True", "A", EARLIER, 7), foreign_available()],
        },
        Case {
            name: "entries without a type are someone else's",
            existing: vec![json!({"status": "True"}), json!("not even an object")],
            ours: vec![],
            want: vec![json!({"status": "True"}), json!("not even an object")],
        },
    ];
    for case in cases {
        let merged = merge_conditions(&case.existing, &case.ours, Some(7), now());
        assert_eq!(merged, case.want, "{}", case.name);
    }
}

#[test]
fn merging_what_is_there_already_changes_nothing() {
    // The writer skips the write exactly when the merge returns the list it was given.
    let existing = vec![foreign_available(), ours_progressing("True", "CleaningUp", EARLIER, 7)];
    let merged =
        merge_conditions(&existing, &[progressing(ConditionStatus::True, "CleaningUp", "m")], Some(7), now());
    assert_eq!(merged, existing);
    let older_generation =
        merge_conditions(&existing, &[progressing(ConditionStatus::True, "CleaningUp", "m")], Some(8), now());
    assert_ne!(older_generation, existing, "a new generation is news");
}

#[test]
fn foreign_entries_survive_byte_for_byte() {
    let raw = r#"[{"type":"Available","status":"True","reason":"AsExpected","message":"","lastTransitionTime":"2025-12-24T10:00:00Z","observedGeneration":3,"x-unknown":{"n":1.5e3,"s":"é"}}]"#;
    let existing: Vec<Value> = serde_json::from_str(raw).unwrap();
    let merged =
        merge_conditions(&existing, &[progressing(ConditionStatus::False, "AsExpected", "")], None, now());
    assert_eq!(merged[0], existing[0]);
    assert!(merged[1].get("observedGeneration").is_none(), "no generation known: none written");
}

#[test]
fn long_messages_are_cut_to_the_schema_limit_on_a_char_boundary() {
    let long = "é".repeat(20_000); // 40 000 bytes
    let merged =
        merge_conditions(&[], &[progressing(ConditionStatus::True, "CleaningUp", &long)], Some(1), now());
    let message = merged[0]["message"].as_str().unwrap();
    assert!(message.len() <= 32768);
    assert!(message.len() >= 32766);
}
