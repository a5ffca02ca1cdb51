use super::*;

use Standing::{Running, Waiting};
use TaskType::{Compact, Defragment, Restore, Snapshot};

fn at(second: i64) -> Timestamp {
    Timestamp::from_second(1_900_000_000 + second).unwrap()
}

fn entry(name: &str, second: i64, task_type: TaskType, standing: Standing) -> QueueEntry {
    QueueEntry { name: name.into(), created: at(second), task_type, standing }
}

fn behind(head: &str, head_running: bool, ahead: usize) -> Place {
    Place::Behind { head: head.into(), head_running, ahead }
}

fn duplicate(of: &str, of_running: bool) -> Place {
    Place::Duplicate { of: of.into(), of_running }
}

#[test]
fn places() {
    let cases: Vec<(&str, Vec<QueueEntry>, Vec<Place>)> = vec![
        ("an empty queue", vec![], vec![]),
        ("a lone waiting task is the head", vec![entry("a", 0, Compact, Waiting)], vec![Place::Head]),
        (
            "first in, first out",
            vec![
                entry("b", 5, Defragment, Waiting),
                entry("a", 1, Compact, Waiting),
                entry("c", 9, Snapshot, Waiting),
            ],
            vec![behind("a", false, 1), Place::Head, behind("a", false, 2)],
        ),
        (
            "a restore goes before the waiting tasks, not before a running one",
            vec![
                entry("defrag", 0, Defragment, Waiting),
                entry("restore", 9, Restore, Waiting),
                entry("compact", 1, Compact, Running),
            ],
            vec![behind("compact", true, 2), behind("compact", true, 1), Place::Running],
        ),
        (
            "a tie on creation time is broken by name",
            vec![entry("zeta", 3, Compact, Waiting), entry("alpha", 3, Defragment, Waiting)],
            vec![behind("alpha", false, 1), Place::Head],
        ),
        (
            "a running task holds the target, even when created after the waiting ones",
            vec![entry("old", 0, Compact, Waiting), entry("running", 7, Defragment, Running)],
            vec![behind("running", true, 1), Place::Running],
        ),
        (
            "the same type as a waiting task ahead is a duplicate",
            vec![entry("first", 0, Compact, Waiting), entry("second", 1, Compact, Waiting)],
            vec![Place::Head, duplicate("first", false)],
        ),
        (
            "the same type as the running task is a duplicate",
            vec![entry("running", 0, Compact, Running), entry("again", 1, Compact, Waiting)],
            vec![Place::Running, duplicate("running", true)],
        ),
        (
            "a duplicate holds no place: the one after it counts one fewer ahead",
            vec![
                entry("a", 0, Compact, Waiting),
                entry("dup", 1, Compact, Waiting),
                entry("c", 2, Defragment, Waiting),
                entry("dup2", 3, Defragment, Waiting),
            ],
            vec![Place::Head, duplicate("a", false), behind("a", false, 1), duplicate("c", false)],
        ),
        (
            "of two duplicates the later is the duplicate, ties by name",
            vec![entry("b", 4, Snapshot, Waiting), entry("a", 4, Snapshot, Waiting)],
            vec![duplicate("a", false), Place::Head],
        ),
        (
            "different types queue behind each other",
            vec![
                entry("r", 0, Snapshot, Running),
                entry("x", 1, Compact, Waiting),
                entry("y", 2, Defragment, Waiting),
            ],
            vec![Place::Running, behind("r", true, 1), behind("r", true, 2)],
        ),
    ];
    for (name, entries, wanted) in cases {
        assert_eq!(place(&entries), wanted, "{name}");
    }
}

#[test]
fn queue_order_is_creation_then_name() {
    let entries = vec![
        entry("b", 2, Compact, Waiting),
        entry("c", 1, Compact, Waiting),
        entry("a", 2, Compact, Waiting),
    ];
    let names: Vec<_> = in_queue_order(&entries).into_iter().map(|i| entries[i].name.as_str()).collect();
    assert_eq!(names, vec!["c", "a", "b"]);
}
