//! The before/after tables at the end of the walk-through.

use crate::etcd_walk::EtcdOutcome;
use crate::say;
use crate::scylla_walk::{self, ScyllaOutcome};

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
    let old: Vec<_> = scylla.nodes.iter().filter(|n| !n.new_in_scale_out).collect();
    let cleaned = old.iter().filter(|n| !n.cleaned_keyspaces.is_empty()).count();
    println!(
        "Scylla: {cleaned} of {} nodes cleaned; the {} nodes that joined hold no stale data and were left alone",
        scylla.nodes.len(),
        scylla.nodes.len() - old.len()
    );
    println!("{:<24} {:<18} {:<42} clean for the new ring", "node", "in the ring", "keyspaces cleaned");
    for node in &scylla.nodes {
        let since = if node.new_in_scale_out { "joined now" } else { "before scale-out" };
        let clean = match (node.clean_for_new_ring, node.new_in_scale_out) {
            (true, true) => "yes (seeded: nothing to clean)",
            (true, false) => "yes (cleaned)",
            (false, _) => "no",
        };
        println!("{:<24} {since:<18} {:<42} {clean}", node.name, scylla_walk::keyspaces(node));
    }
}
