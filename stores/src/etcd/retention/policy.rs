//! Retention by policy: which of a cluster's full snapshots and deltas in one store to keep, by
//! count, by age, by tiers (one full snapshot per period for a while) and by total size.
//!
//! A delta restores only on top of the full snapshot it follows and every delta between the two
//! (its *chain*): deltas are kept and deleted by whole chains, and a chain's full snapshot is kept
//! with it. So no rule ever leaves a delta that cannot be replayed, and a point in time inside the
//! kept chains can always be restored.
//!
//! The rules, applied when a full snapshot was just written (the newest, always kept):
//! * `keep_last`: the newest N full snapshots, the new one included;
//! * `keep_within`: every full snapshot written in the last D;
//! * each tier (`every`, `keep_for`): of the full snapshots written in the last `keep_for`, the
//!   newest of each `every`-long period (periods aligned on the Unix epoch, UTC);
//! * a full snapshot kept by any rule is kept (they add up, as restic's and borg's `--keep-*`);
//! * deltas: with `keep_deltas_for`, the chains that reach into the last D (a point in time of the
//!   last D is restorable), with their full snapshots; without, the chains of the kept full
//!   snapshots. A delta older than every full snapshot belongs to no chain and goes;
//! * `max_total_bytes` last: while the kept backups weigh more, the oldest kept full snapshot goes
//!   with its chain. The newest full snapshot and its chain never go; when they alone weigh more,
//!   the selection says so.
//!
//! [`select`] is pure: the caller lists the store and deletes what it returns.

use std::collections::BTreeSet;

use jiff::{SignedDuration, Timestamp};

/// One tier: the newest full snapshot of each `every`-long period, for the last `keep_for`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tier {
    pub every: SignedDuration,
    pub keep_for: SignedDuration,
}

/// What to keep of a cluster's backups in one store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// The newest full snapshots kept, the one just written included (at least 1).
    pub keep_last: u32,
    pub keep_within: Option<SignedDuration>,
    pub tiers: Vec<Tier>,
    pub keep_deltas_for: Option<SignedDuration>,
    pub max_total_bytes: Option<u64>,
}

impl Policy {
    /// The newest `keep_last` full snapshots and their chains, nothing else.
    pub fn keep_last(keep_last: u32) -> Self {
        Self { keep_last, keep_within: None, tiers: Vec::new(), keep_deltas_for: None, max_total_bytes: None }
    }

    /// Refuses a policy that keeps less than it seems to say: `Err` as (rule, why).
    pub fn check(&self) -> Result<(), (String, String)> {
        if self.keep_last < 1 {
            return Err((
                "keepLast".into(),
                "0 keeps no full snapshot, and every delta needs one: keep 1 or more".into(),
            ));
        }
        for (at, tier) in self.tiers.iter().enumerate() {
            if !tier.every.is_positive() {
                return Err((format!("tiers[{at}].every"), format!("{:#} is not positive", tier.every)));
            }
            if tier.keep_for <= tier.every {
                return Err((
                    format!("tiers[{at}].for"),
                    format!(
                        "{:#} is not longer than every {:#}: the tier would keep at most one full \
                         snapshot; keep it for several periods",
                        tier.keep_for, tier.every
                    ),
                ));
            }
        }
        for (rule, duration) in [("keepWithin", self.keep_within), ("keepDeltasFor", self.keep_deltas_for)] {
            if let Some(duration) = duration.filter(|d| !d.is_positive()) {
                return Err((rule.into(), format!("{duration:#} is not positive")));
            }
        }
        if self.max_total_bytes == Some(0) {
            return Err(("maxTotalSize".into(), "0 bytes keeps nothing: give a size such as 50Gi".into()));
        }
        Ok(())
    }
}

/// A full snapshot or a delta.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Full,
    Delta,
}

/// One of the cluster's backups in the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backup {
    pub name: String,
    /// The time in its name; `None` for a full snapshot named by a template without `{time}`
    /// (ordered before every time).
    pub time: Option<Timestamp>,
    pub size: u64,
    pub kind: Kind,
}

/// What [`select`] chose.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selection {
    /// Full snapshots to delete, oldest first.
    pub delete_full: Vec<String>,
    /// Deltas to delete, oldest first.
    pub delete_deltas: Vec<String>,
    /// Bytes of what is kept.
    pub kept_bytes: u64,
    /// Set when what is kept weighs more than `max_total_bytes` and nothing more may go (the
    /// newest full snapshot and its chain): those bytes.
    pub over_limit: Option<u64>,
}

/// Which of `backups` to delete under `policy` at `now`; `keep` (the full snapshot just written)
/// is always kept.
pub fn select(backups: &[Backup], keep: &str, policy: &Policy, now: Timestamp) -> Selection {
    let fulls = newest_first(backups, Kind::Full);
    let chains = chains(&fulls, backups);
    let mut kept: BTreeSet<usize> = kept_by_rules(&fulls, keep, policy, now);
    let mut kept_chains: BTreeSet<usize> = match policy.keep_deltas_for {
        Some(within) => reaching_into(&fulls, now - within),
        None => kept.clone(),
    };
    kept.extend(kept_chains.iter().copied());
    let weight = |kept: &BTreeSet<usize>, kept_chains: &BTreeSet<usize>| -> u64 {
        let full_bytes: u64 = kept.iter().map(|&at| fulls[at].size).sum();
        let delta_bytes: u64 = kept_chains.iter().flat_map(|&at| &chains[at]).map(|d| d.size).sum();
        full_bytes + delta_bytes
    };
    let mut over_limit = None;
    if let Some(limit) = policy.max_total_bytes {
        // Oldest first; never the newest (index 0) nor the one just written.
        while weight(&kept, &kept_chains) > limit {
            let oldest = kept.iter().rev().copied().find(|&at| at != 0 && fulls[at].name != keep);
            match oldest {
                Some(at) => {
                    kept.remove(&at);
                    kept_chains.remove(&at);
                }
                None => {
                    over_limit = Some(weight(&kept, &kept_chains));
                    break;
                }
            }
        }
    }
    let mut delete_full: Vec<&Backup> =
        fulls.iter().enumerate().filter(|(at, _)| !kept.contains(at)).map(|(_, b)| *b).collect();
    let kept_deltas: BTreeSet<&str> =
        kept_chains.iter().flat_map(|&at| &chains[at]).map(|d| d.name.as_str()).collect();
    let mut delete_deltas: Vec<&Backup> =
        backups.iter().filter(|b| b.kind == Kind::Delta && !kept_deltas.contains(b.name.as_str())).collect();
    delete_full.sort_by(|a, b| (a.time, &a.name).cmp(&(b.time, &b.name)));
    delete_deltas.sort_by(|a, b| (a.time, &a.name).cmp(&(b.time, &b.name)));
    Selection {
        kept_bytes: weight(&kept, &kept_chains),
        delete_full: delete_full.into_iter().map(|b| b.name.clone()).collect(),
        delete_deltas: delete_deltas.into_iter().map(|b| b.name.clone()).collect(),
        over_limit,
    }
}

/// The backups of `kind`, newest first (by time, then name, for a stable answer).
fn newest_first(backups: &[Backup], kind: Kind) -> Vec<&Backup> {
    let mut found: Vec<&Backup> = backups.iter().filter(|b| b.kind == kind).collect();
    found.sort_by(|a, b| (b.time, &b.name).cmp(&(a.time, &a.name)));
    found
}

/// Each full snapshot's chain (same index as `fulls`): the deltas written at or after it and
/// before the next full snapshot.
fn chains<'a>(fulls: &[&Backup], backups: &'a [Backup]) -> Vec<Vec<&'a Backup>> {
    let mut chains = vec![Vec::new(); fulls.len()];
    for delta in backups.iter().filter(|b| b.kind == Kind::Delta) {
        // `fulls` is newest first: the first at or before the delta is its base.
        if let Some(at) = fulls.iter().position(|full| full.time <= delta.time) {
            chains[at].push(delta);
        }
    }
    chains
}

/// The full snapshots (indexes into `fulls`) kept by the count, age and tier rules.
fn kept_by_rules(fulls: &[&Backup], keep: &str, policy: &Policy, now: Timestamp) -> BTreeSet<usize> {
    let mut kept = BTreeSet::new();
    match fulls.iter().position(|f| f.name == keep) {
        Some(just_written) => kept.insert(just_written),
        // Not listed (yet): the newest stays, a run never leaves the store without a full snapshot.
        None if !fulls.is_empty() => kept.insert(0),
        None => false,
    };
    // The one just written counts as one of the newest `keep_last`.
    let others = (policy.keep_last.max(1) - 1) as usize;
    kept.extend(fulls.iter().enumerate().filter(|(_, f)| f.name != keep).take(others).map(|(at, _)| at));
    if let Some(within) = policy.keep_within {
        let since = now - within;
        kept.extend(fulls.iter().enumerate().filter(|(_, f)| f.time >= Some(since)).map(|(at, _)| at));
    }
    for tier in &policy.tiers {
        let since = now - tier.keep_for;
        let every = tier.every.as_secs().max(1);
        let mut periods = BTreeSet::new();
        for (at, full) in fulls.iter().enumerate() {
            let Some(time) = full.time.filter(|t| *t >= since) else { continue };
            // Newest first: the first of each period is its newest.
            if periods.insert(time.as_second().div_euclid(every)) {
                kept.insert(at);
            }
        }
    }
    kept
}

/// The full snapshots whose chains reach into the time after `since`: the newest, and each one
/// the next of which was written after `since`.
fn reaching_into(fulls: &[&Backup], since: Timestamp) -> BTreeSet<usize> {
    (0..fulls.len()).filter(|&at| at == 0 || fulls[at - 1].time > Some(since)).collect()
}

/// A size as Kubernetes quantities write it (`50Gi`, `500M`, `1073741824`), in bytes.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let digits = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(digits);
    let multiplier: u64 = match unit {
        "" => 1,
        "k" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        "T" => 1_000_000_000_000,
        "P" => 1_000_000_000_000_000,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        "Pi" => 1 << 50,
        _ => 0,
    };
    let bytes = number.parse::<u64>().ok().filter(|_| multiplier > 0).and_then(|n| n.checked_mul(multiplier));
    bytes.ok_or_else(|| {
        format!("{text:?} is not a size: write a whole number with a unit such as 500Mi, 50Gi or 1Ti")
    })
}

#[cfg(test)]
mod tests;
