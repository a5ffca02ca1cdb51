//! What a member's etcd version changes for its maintenance: pure rules on the version string its
//! `Status` reports.
//!
//! * A defrag that overlaps the apply of a snapshot the leader sent can corrupt the member's data
//!   on etcd before 3.5.23 and on 3.6.0–3.6.4 (fixed by etcd #20650 and #20653; 3.4 never got the
//!   fix). Such a member is defragmented only when it is caught up with the leader right before
//!   its turn (a member within a few entries of the leader is sent no snapshot), or not at all
//!   when the cluster refuses those versions.
//! * `Status.dbSizeQuota` is right only from 3.6.6; before, the quota comes from the spec.

use std::fmt;

/// `major.minor.patch` of an etcd server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ServerVersion {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
}

impl ServerVersion {
    pub const fn new(major: u32, minor: u32, patch: u32) -> Self {
        Self { major, minor, patch }
    }

    /// `3.5.17`, `v3.6.0`, `3.6.0-rc.2` (a pre-release counts as its release).
    pub fn parse(text: &str) -> Option<Self> {
        let text = text.trim().trim_start_matches('v');
        let core = text.split(['-', '+']).next()?;
        let mut parts = core.split('.').map(|p| p.parse::<u32>().ok());
        let version = Self::new(parts.next()??, parts.next()??, parts.next()??);
        parts.next().is_none().then_some(version)
    }
}

impl fmt::Display for ServerVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// The first 3.5 release whose defrag cannot corrupt data when it overlaps a snapshot apply.
pub const DEFRAG_RACE_FIXED_3_5: ServerVersion = ServerVersion::new(3, 5, 23);
/// The same on 3.6.
pub const DEFRAG_RACE_FIXED_3_6: ServerVersion = ServerVersion::new(3, 6, 5);
/// The first release whose `Status.dbSizeQuota` can be trusted.
pub const QUOTA_IN_STATUS_FROM: ServerVersion = ServerVersion::new(3, 6, 6);

/// Why a member's defrag is risky on its version, and what fixes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DefragRisk {
    /// The version as the member reported it (empty when it reported none).
    pub version: String,
    /// The release to upgrade to.
    pub fixed_in: ServerVersion,
}

impl fmt::Display for DefragRisk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let version = if self.version.is_empty() {
            "an unknown etcd version".to_owned()
        } else {
            format!("etcd {}", self.version)
        };
        write!(
            f,
            "{version}: a defrag that overlaps a snapshot apply can corrupt the member's data \
             (etcd #20650, #20653); fixed in {}",
            self.fixed_in
        )?;
        if self.fixed_in == DEFRAG_RACE_FIXED_3_5 && self.version.starts_with("3.6") {
            write!(f, " / {DEFRAG_RACE_FIXED_3_6}")?;
        }
        Ok(())
    }
}

/// The defrag risk of a member reporting `version`; `None` on a fixed release. A version that
/// cannot be read is taken as affected: the rule only ever adds care.
pub fn defrag_risk(version: &str) -> Option<DefragRisk> {
    let risk = |fixed_in| Some(DefragRisk { version: version.trim().to_owned(), fixed_in });
    let Some(v) = ServerVersion::parse(version) else {
        return risk(DEFRAG_RACE_FIXED_3_5);
    };
    match (v.major, v.minor) {
        (major, _) if major > 3 => None,
        (3, minor) if minor >= 7 => None,
        (3, 6) if v >= DEFRAG_RACE_FIXED_3_6 => None,
        (3, 6) => risk(DEFRAG_RACE_FIXED_3_6),
        (3, 5) if v >= DEFRAG_RACE_FIXED_3_5 => None,
        // 3.5 before the fix, 3.4 and older (never fixed there): the 3.5 release is the way out.
        _ => risk(DEFRAG_RACE_FIXED_3_5),
    }
}

/// The storage quota to judge a `NOSPACE` cure by: the member's `Status.dbSizeQuota` from
/// [`QUOTA_IN_STATUS_FROM`] on (when it reports one), else the quota the spec states.
pub fn trusted_quota(version: &str, status_quota: i64, spec_quota: Option<i64>) -> Option<i64> {
    let trusted = ServerVersion::parse(version).is_some_and(|v| v >= QUOTA_IN_STATUS_FROM);
    if trusted && status_quota > 0 { Some(status_quota) } else { spec_quota.filter(|q| *q > 0) }
}

/// Whether a member's metrics say its defrag does not block: etcd's `NonBlockingDefrag`
/// feature gate (3.8 and OpenShift's etcd), which copies the data in the background and blocks
/// only ~100 ms at the end, is on. etcd reports its gates as
/// `etcd_server_feature_enabled{name="…",stage="…"} 1`.
pub fn reports_non_blocking_defrag(metrics: &str) -> bool {
    metrics.lines().any(|line| {
        line.starts_with("etcd_server_feature_enabled{")
            && line.contains("name=\"NonBlockingDefrag\"")
            && line.rsplit_once(' ').is_some_and(|(_, value)| value.trim().parse::<f64>() == Ok(1.0))
    })
}

/// How many physical compactions a member has finished since it started: the count of its
/// `etcd_debugging_mvcc_db_compaction_total_duration_milliseconds` histogram (etcd 3.4 to 3.6),
/// observed when a compaction's last batch is done. `None` when its metrics do not say.
pub fn compactions_finished(metrics: &str) -> Option<u64> {
    metrics.lines().find_map(|line| {
        let value =
            line.strip_prefix("etcd_debugging_mvcc_db_compaction_total_duration_milliseconds_count ")?;
        value.trim().parse::<f64>().ok().filter(|v| *v >= 0.0).map(|v| v as u64)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_with_or_without_v_and_pre_releases() {
        for (text, want) in [
            ("3.5.17", Some(ServerVersion::new(3, 5, 17))),
            ("v3.6.0", Some(ServerVersion::new(3, 6, 0))),
            ("3.6.0-rc.2", Some(ServerVersion::new(3, 6, 0))),
            (" 3.4.35 ", Some(ServerVersion::new(3, 4, 35))),
            ("3.5", None),
            ("3.5.x", None),
            ("3.5.1.2", None),
            ("", None),
        ] {
            assert_eq!(ServerVersion::parse(text), want, "{text:?}");
        }
    }

    #[test]
    fn the_defrag_snapshot_race_is_named_with_its_fix() {
        for (version, fixed_in) in [
            ("3.4.35", Some("3.5.23")),
            ("3.5.0", Some("3.5.23")),
            ("3.5.22", Some("3.5.23")),
            ("3.5.23", None),
            ("3.5.24", None),
            ("3.6.0", Some("3.6.5")),
            ("3.6.4", Some("3.6.5")),
            ("3.6.5", None),
            ("3.6.6", None),
            ("3.7.0", None),
            ("4.0.0", None),
            ("3.3.27", Some("3.5.23")),
            ("nonsense", Some("3.5.23")),
            ("", Some("3.5.23")),
        ] {
            let risk = defrag_risk(version);
            assert_eq!(
                risk.as_ref().map(|r| r.fixed_in.to_string()),
                fixed_in.map(str::to_owned),
                "{version:?}"
            );
        }
        let text = defrag_risk("3.5.12").unwrap().to_string();
        assert_eq!(
            text,
            "etcd 3.5.12: a defrag that overlaps a snapshot apply can corrupt the member's data \
             (etcd #20650, #20653); fixed in 3.5.23"
        );
        assert!(defrag_risk("").unwrap().to_string().starts_with("an unknown etcd version"));
    }

    #[test]
    fn a_non_blocking_defrag_is_read_from_the_feature_gate_metric() {
        let on = "# HELP etcd_server_feature_enabled Whether or not a feature is enabled\n\
                  etcd_server_feature_enabled{name=\"InitialCorruptCheck\",stage=\"ALPHA\"} 0\n\
                  etcd_server_feature_enabled{name=\"NonBlockingDefrag\",stage=\"BETA\"} 1\n";
        assert!(reports_non_blocking_defrag(on));
        assert!(!reports_non_blocking_defrag(&on.replace("\"BETA\"} 1", "\"BETA\"} 0")));
        assert!(!reports_non_blocking_defrag("etcd_server_version{server_version=\"3.5.17\"} 1\n"));
        assert!(!reports_non_blocking_defrag("# etcd_server_feature_enabled{name=\"NonBlockingDefrag\"} 1"));
    }

    #[test]
    fn finished_compactions_are_counted_from_the_histogram() {
        let metrics = "etcd_debugging_mvcc_db_compaction_total_duration_milliseconds_bucket{le=\"100\"} 2\n\
                       etcd_debugging_mvcc_db_compaction_total_duration_milliseconds_sum 37\n\
                       etcd_debugging_mvcc_db_compaction_total_duration_milliseconds_count 3\n";
        assert_eq!(compactions_finished(metrics), Some(3));
        assert_eq!(compactions_finished("etcd_server_version{server_version=\"3.5.1\"} 1\n"), None);
        assert_eq!(
            compactions_finished(
                "etcd_debugging_mvcc_db_compaction_total_duration_milliseconds_count 1e+06\n"
            ),
            Some(1_000_000)
        );
    }

    #[test]
    fn the_quota_in_status_is_trusted_from_3_6_6_only() {
        const GIB: i64 = 1 << 30;
        for (version, status, spec, want) in [
            ("3.6.6", 8 * GIB, Some(2 * GIB), Some(8 * GIB)),
            ("3.7.1", 8 * GIB, None, Some(8 * GIB)),
            ("3.6.5", 8 * GIB, Some(2 * GIB), Some(2 * GIB)),
            ("3.5.21", 2 * GIB, None, None),
            ("3.6.6", 0, Some(2 * GIB), Some(2 * GIB)),
            ("junk", 8 * GIB, None, None),
            ("3.4.35", 0, Some(0), None),
        ] {
            assert_eq!(trusted_quota(version, status, spec), want, "{version} {status} {spec:?}");
        }
    }
}
