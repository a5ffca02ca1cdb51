//! A delta's name: `{cluster}-{time}-{start}-{end}.delta`, `{time}` as the full snapshots'
//! templates render it (UTC, `20060102T150405Z`), the revisions zero-padded to 19 digits (any
//! i64) so that names sort by time, then by revision. `main-20260102T150405Z-0000000000000001200-
//! 0000000000000001350.delta` holds `main`'s changes after revision 1200 up to 1350. Like the
//! full snapshots' names, a name is the cluster's only when it is whole: `main-2-…` is never
//! `main`'s.

use groundskeeper_stores::etcd::retention::{MAX_FILE_NAME_LEN, TIME_FORMAT};
use jiff::Timestamp;

const SUFFIX: &str = ".delta";
const DIGITS: usize = 19;
const TIME_LEN: usize = 16;

/// A delta of one cluster, as its name says.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct DeltaName {
    pub time: Timestamp,
    pub start_revision: i64,
    pub end_revision: i64,
}

impl DeltaName {
    /// The name for cluster `cluster`.
    pub fn render(&self, cluster: &str) -> String {
        format!(
            "{cluster}-{}-{:0DIGITS$}-{:0DIGITS$}{SUFFIX}",
            self.time.strftime(TIME_FORMAT),
            self.start_revision,
            self.end_revision
        )
    }

    /// `Some` when `name` is a delta's name of cluster `cluster`.
    pub fn parse(cluster: &str, name: &str) -> Option<Self> {
        let rest = name.strip_prefix(cluster)?.strip_prefix('-')?.strip_suffix(SUFFIX)?;
        if rest.len() != TIME_LEN + 1 + DIGITS + 1 + DIGITS {
            return None;
        }
        let (time, rest) = rest.split_at(TIME_LEN);
        let time = jiff::fmt::strtime::parse(TIME_FORMAT, time)
            .ok()?
            .to_datetime()
            .ok()?
            .to_zoned(jiff::tz::TimeZone::UTC)
            .ok()?
            .timestamp();
        let revision = |text: &str| -> Option<i64> {
            (text.len() == DIGITS && text.bytes().all(|b| b.is_ascii_digit())).then(|| text.parse().ok())?
        };
        let rest = rest.strip_prefix('-')?;
        let (start, end) = rest.split_once('-')?;
        let parsed = Self { time, start_revision: revision(start)?, end_revision: revision(end)? };
        (parsed.start_revision < parsed.end_revision && parsed.render(cluster) == name).then_some(parsed)
    }
}

/// Whether a cluster's name makes delta names file systems and object stores take.
pub fn check_cluster(cluster: &str) -> Result<(), String> {
    if cluster.is_empty() || cluster.contains(['/', '{', '}', '\0']) {
        return Err(format!("cluster name {cluster:?} cannot be part of a file name"));
    }
    let example =
        DeltaName { time: Timestamp::UNIX_EPOCH, start_revision: 0, end_revision: 1 }.render(cluster);
    if example.len() > MAX_FILE_NAME_LEN {
        return Err(format!(
            "cluster name {cluster:?} makes delta names longer than {MAX_FILE_NAME_LEN} bytes"
        ));
    }
    Ok(())
}

/// The cluster's deltas among `names`, ordered by their start revision, then end.
pub fn deltas_of(cluster: &str, names: &[String]) -> Vec<(DeltaName, String)> {
    let mut found: Vec<(DeltaName, String)> =
        names.iter().filter_map(|n| DeltaName::parse(cluster, n).map(|d| (d, n.clone()))).collect();
    found.sort_by_key(|(d, name)| (d.start_revision, d.end_revision, name.clone()));
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_say_their_revisions_and_are_the_clusters_only_whole() {
        let time: Timestamp = "2026-01-02T15:04:05Z".parse().unwrap();
        let delta = DeltaName { time, start_revision: 1200, end_revision: 1350 };
        let name = delta.render("main");
        assert_eq!(name, "main-20260102T150405Z-0000000000000001200-0000000000000001350.delta");
        assert_eq!(DeltaName::parse("main", &name), Some(delta.clone()));
        assert_eq!(DeltaName::parse("mai", &name), None);
        assert_eq!(DeltaName::parse("main-2", &delta.render("main")), None);
        assert_eq!(DeltaName::parse("main", &delta.render("main-2")), None);
        assert_eq!(DeltaName::parse("main", &format!(".{name}.partial")), None);
        assert_eq!(DeltaName::parse("main", "main-20260102T150405Z.db"), None);
        let names = vec![
            DeltaName { start_revision: 1350, end_revision: 1400, ..delta.clone() }.render("main"),
            name.clone(),
            "notes.txt".into(),
        ];
        let found = deltas_of("main", &names);
        assert_eq!(found.iter().map(|(d, _)| d.start_revision).collect::<Vec<_>>(), [1200, 1350]);
        assert!(check_cluster("main").is_ok());
        assert!(check_cluster("a/b").is_err());
    }
}
