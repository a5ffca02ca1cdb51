//! One typed request from the controller to `groundskeeper-job`: the controller renders an
//! [`Operation`] into a Job's container arguments ([`Operation::to_args`]) and the runner parses
//! them with its own command line. A test on the runner's side parses every rendering back, so
//! the flag names live here once and cannot drift from the runner's parser.

use std::fmt;

/// The kind of work, as the runner's subcommand, the Jobs' `groundskeeper.dev/operation` label
/// and the result's `operation` field name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OperationKind {
    Cleanup,
    Defrag,
    Compact,
    Snapshot,
}

impl OperationKind {
    pub const ALL: [OperationKind; 4] = [Self::Cleanup, Self::Defrag, Self::Compact, Self::Snapshot];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Cleanup => "cleanup",
            Self::Defrag => "defrag",
            Self::Compact => "compact",
            Self::Snapshot => "snapshot",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.as_str() == name)
    }
}

impl fmt::Display for OperationKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A piece of work for one `groundskeeper-job` run.
#[derive(Debug, Clone, PartialEq)]
pub enum Operation {
    Cleanup(CleanupRequest),
    Defrag(DefragRequest),
    Compact(CompactRequest),
    Snapshot(SnapshotRequest),
}

/// Clean one Scylla node through its Scylla Manager Agent.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CleanupRequest {
    /// Host name or IP address of the node's agent.
    pub node_address: String,
    /// Path of the mounted agent token file (`auth-token.yaml`).
    pub auth_token_file: String,
    /// Path of a CA bundle for the agent's certificate; `None` accepts its self-signed one.
    pub agent_ca_file: Option<String>,
    /// Only these keyspaces; empty: every keyspace that can hold stale data.
    pub keyspaces: Vec<String>,
    /// The keyspaces listed are all the node holds stale data for: reset Scylla's own cleanup
    /// flag once they are clean.
    pub mark_node_clean: bool,
}

/// Where an etcd cluster is and the mounted client TLS files, if any.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct EtcdTarget {
    pub endpoints: Vec<String>,
    pub tls: Option<EtcdTlsFiles>,
}

/// Paths of the mounted PEM files.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct EtcdTlsFiles {
    pub ca: String,
    pub cert: String,
    pub key: String,
}

/// Defragment the members over the thresholds, one at a time, leader last.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DefragRequest {
    pub etcd: EtcdTarget,
    pub min_defrag_bytes: i64,
    pub max_fragmented_percent: f64,
    /// Compact to current − N first.
    pub compact_retain_revisions: Option<i64>,
    /// Whether leadership moves before the leader's defrag.
    pub leader_turn: LeaderTurnPolicy,
    /// `Auto`: the leader is defragmented in place when its predicted defrag takes at most this
    /// many seconds; `None`: the runner's default.
    pub leader_in_place_budget_seconds: Option<u64>,
    /// Members on an etcd version whose defrag can corrupt data when it overlaps a snapshot
    /// apply are skipped instead of defragmented once caught up.
    pub refuse_affected_versions: bool,
    /// The members' storage quota (`--quota-backend-bytes`), from the spec: a `NOSPACE` alarm is
    /// disarmed once a member's db is under it (etcd 3.6.6 and later report their own).
    pub quota_backend_bytes: Option<i64>,
    pub allow_single_member: bool,
    /// The end of the maintenance window the task runs in (RFC 3339): no member is started
    /// whose expected defrag would end after it (it is left for the next window).
    pub not_after: Option<String>,
    /// When that window opened (RFC 3339): a member expected to take longer than the whole window
    /// may then still start as the first of the run, so that it is not left out for ever.
    pub window_opened: Option<String>,
    /// Expected defrag rate per member name (bytes per second, from its earlier defrags);
    /// members not listed are expected at the runner's default rate.
    pub expected_rates: Vec<(String, f64)>,
}

/// Whether leadership moves away from the leader before its defrag.
///
/// A leader defragmenting in place blocks every write of the cluster for its defrag, with no
/// election; a transfer costs clients the requests in flight at the leader (`leader changed`,
/// dropped proposals). Which hurts less depends on how long the defrag takes: see
/// `docs/etcd-maintenance.md`, "The leader's turn".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum LeaderTurnPolicy {
    /// In place when its predicted defrag (from this run's followers) fits the budget, else
    /// leadership moves first.
    #[default]
    Auto,
    /// Leadership always moves first.
    Always,
    /// Never: the leader is defragmented last, in place.
    Never,
}

impl LeaderTurnPolicy {
    pub const ALL: [LeaderTurnPolicy; 3] = [Self::Auto, Self::Always, Self::Never];

    /// As the runner's `--leader-turn` flag and the result spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Always => "always",
            Self::Never => "never",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.as_str().eq_ignore_ascii_case(text))
    }
}

impl fmt::Display for LeaderTurnPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How far a compaction goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompactTo {
    /// Keep the last N revisions.
    RetainRevisions(i64),
    /// Exactly this revision.
    Revision(i64),
}

/// Compact the MVCC history.
#[derive(Debug, Clone, PartialEq)]
pub struct CompactRequest {
    pub etcd: EtcdTarget,
    pub to: CompactTo,
    /// Wait until the compaction reached the backend, so a defrag right after reclaims the pages.
    pub physical: bool,
}

/// Stream a snapshot of the keyspace from one healthy member (a follower when there is one) into
/// a file, written atomically.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SnapshotRequest {
    pub etcd: EtcdTarget,
    /// Path of the snapshot file to write (its folder must exist, on the volume it goes to).
    pub output: String,
    /// Old snapshots of the same cluster to delete from the output's folder once the new one is
    /// complete and checked; `None`: delete nothing.
    pub retention: Option<SnapshotRetention>,
}

/// Which files in a snapshot folder are snapshots of one cluster, and how many of them to keep.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotRetention {
    /// Snapshots of the cluster to keep, the new one included (at least 1).
    pub retain: u32,
    /// The file name template the cluster's snapshots are named by (`{cluster}`, `{time}`).
    pub file_name_template: String,
    /// The value of `{cluster}`.
    pub cluster: String,
}

impl Operation {
    pub fn kind(&self) -> OperationKind {
        match self {
            Self::Cleanup(_) => OperationKind::Cleanup,
            Self::Defrag(_) => OperationKind::Defrag,
            Self::Compact(_) => OperationKind::Compact,
            Self::Snapshot(_) => OperationKind::Snapshot,
        }
    }

    /// The container arguments of `groundskeeper-job`, subcommand first.
    pub fn to_args(&self) -> Vec<String> {
        let mut args = Args(vec![self.kind().as_str().to_owned()]);
        match self {
            Self::Cleanup(request) => request.render(&mut args),
            Self::Defrag(request) => request.render(&mut args),
            Self::Compact(request) => request.render(&mut args),
            Self::Snapshot(request) => request.render(&mut args),
        }
        args.0
    }
}

/// Flags being rendered.
struct Args(Vec<String>);

impl Args {
    fn flag(&mut self, name: &str) {
        self.0.push(format!("--{name}"));
    }

    fn value(&mut self, name: &str, value: impl ToString) {
        self.flag(name);
        self.0.push(value.to_string());
    }

    fn switch(&mut self, name: &str, on: bool) {
        if on {
            self.flag(name);
        }
    }
}

impl CleanupRequest {
    fn render(&self, args: &mut Args) {
        args.value("node-address", &self.node_address);
        args.value("auth-token-file", &self.auth_token_file);
        if let Some(ca) = &self.agent_ca_file {
            args.value("agent-ca-file", ca);
        }
        for keyspace in &self.keyspaces {
            args.value("keyspace", keyspace);
        }
        if self.mark_node_clean {
            args.flag("mark-node-clean");
        }
    }
}

impl EtcdTarget {
    fn render(&self, args: &mut Args) {
        args.value("endpoints", self.endpoints.join(","));
        if let Some(tls) = &self.tls {
            args.value("cacert", &tls.ca);
            args.value("cert", &tls.cert);
            args.value("key", &tls.key);
        }
    }
}

impl DefragRequest {
    fn render(&self, args: &mut Args) {
        self.etcd.render(args);
        args.value("min-defrag-bytes", self.min_defrag_bytes);
        args.value("max-fragmented-percent", self.max_fragmented_percent);
        if self.leader_turn != LeaderTurnPolicy::default() {
            args.value("leader-turn", self.leader_turn.as_str());
        }
        if let Some(budget) = self.leader_in_place_budget_seconds {
            args.value("leader-in-place-budget-seconds", budget);
        }
        args.switch("refuse-affected-versions", self.refuse_affected_versions);
        if let Some(quota) = self.quota_backend_bytes {
            args.value("quota-backend-bytes", quota);
        }
        args.switch("allow-single-member", self.allow_single_member);
        if let Some(keep) = self.compact_retain_revisions {
            args.value("compact-retain-revisions", keep);
        }
        if let Some(not_after) = &self.not_after {
            args.value("not-after", not_after);
        }
        if let Some(opened) = &self.window_opened {
            args.value("window-opened", opened);
        }
        for (member, rate) in &self.expected_rates {
            args.value("expected-rate", format!("{member}={}", rate.round()));
        }
    }
}

impl CompactRequest {
    fn render(&self, args: &mut Args) {
        self.etcd.render(args);
        args.switch("physical", self.physical);
        match self.to {
            CompactTo::RetainRevisions(keep) => args.value("retain-revisions", keep),
            CompactTo::Revision(revision) => args.value("revision", revision),
        }
    }
}

impl SnapshotRequest {
    fn render(&self, args: &mut Args) {
        self.etcd.render(args);
        args.value("output", &self.output);
        if let Some(retention) = &self.retention {
            args.value("retain", retention.retain);
            args.value("file-name-template", &retention.file_name_template);
            args.value("cluster", &retention.cluster);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_round_trip_through_their_names() {
        for kind in OperationKind::ALL {
            assert_eq!(OperationKind::parse(kind.as_str()), Some(kind));
        }
        assert_eq!(OperationKind::parse("restore"), None);
    }

    #[test]
    fn rendering_puts_the_subcommand_first_and_omits_what_is_unset() {
        let compact = Operation::Compact(CompactRequest {
            etcd: EtcdTarget { endpoints: vec!["http://a:2379".into(), "http://b:2379".into()], tls: None },
            to: CompactTo::Revision(42),
            physical: true,
        });
        assert_eq!(
            compact.to_args(),
            ["compact", "--endpoints", "http://a:2379,http://b:2379", "--physical", "--revision", "42"]
        );
        let cleanup = Operation::Cleanup(CleanupRequest {
            node_address: "n.ns.svc".into(),
            auth_token_file: "/t.yaml".into(),
            ..CleanupRequest::default()
        });
        assert_eq!(
            cleanup.to_args(),
            ["cleanup", "--node-address", "n.ns.svc", "--auth-token-file", "/t.yaml"]
        );
    }
}
