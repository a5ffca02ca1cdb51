//! The before/after tables at the end of the walk-through.

use crate::etcd_walk::EtcdOutcome;
use crate::say;
use crate::scylla_walk::{self, NodeRow, ScyllaOutcome};

pub fn print(scylla: &ScyllaOutcome, etcd: &EtcdOutcome) {
    print_etcd(etcd);
    println!();
    print_scylla(scylla);
    println!();
    println!(
        "scale-out to every node clean: {:.1} s; end of churn to maintenance recorded: {:.1} s \
         (includes waiting for the controller's next check)",
        scylla.took.as_secs_f64(),
        etcd.took.as_secs_f64()
    );
}

fn print_etcd(etcd: &EtcdOutcome) {
    println!("etcd {}; the EtcdCluster's status records: {}", etcd.version, etcd.recorded);
    println!("{:<8} {:>28} {:>28} {:>28}", "member", "db size before", "db size after", "reclaimed");
    let mut totals = (0, 0);
    for before in &etcd.before {
        let Some(after) = etcd.after.iter().find(|a| a.name == before.name) else {
            continue;
        };
        row(&before.name, before.db_size, after.db_size);
        totals = (totals.0 + before.db_size, totals.1 + after.db_size);
    }
    row("all", totals.0, totals.1);
}

fn row(name: &str, before: i64, after: i64) {
    println!(
        "{name:<8} {:>28} {:>28} {:>28}",
        say::mib_and_bytes(before),
        say::mib_and_bytes(after),
        say::mib_and_bytes(before - after)
    );
}

fn print_scylla(scylla: &ScyllaOutcome) {
    let (joined, old): (Vec<_>, Vec<_>) = scylla.nodes.iter().partition(|n| n.new_in_scale_out);
    let cleaned = |nodes: &[&NodeRow]| nodes.iter().filter(|n| !n.cleaned_keyspaces.is_empty()).count();
    let joiners = if cleaned(&joined) == 0 {
        format!("the {} nodes that joined hold no stale data and were left alone", joined.len())
    } else {
        format!(
            "{} of the {} nodes that joined too: they joined together, so what each held before the \
             others joined cannot be known, and each was cleaned once",
            cleaned(&joined),
            joined.len()
        )
    };
    println!(
        "Scylla: {} of the {} nodes there before the scale-out cleaned; {joiners}",
        cleaned(&old),
        old.len()
    );
    println!("{:<24} {:<18} {:<42} clean for the new ring", "node", "in the ring", "keyspaces cleaned");
    for node in &scylla.nodes {
        let since = if node.new_in_scale_out { "joined now" } else { "before scale-out" };
        let clean = match (node.clean_for_new_ring, node.new_in_scale_out, node.cleaned_keyspaces.is_empty())
        {
            (true, true, true) => "yes (seeded: nothing to clean)",
            (true, true, false) => "yes (joined together: cleaned once)",
            (true, false, _) => "yes (cleaned)",
            (false, ..) => "no",
        };
        println!("{:<24} {since:<18} {:<42} {clean}", node.name, scylla_walk::keyspaces(node));
    }
}
