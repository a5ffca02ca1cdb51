//! The command line of `groundskeeper-job`, in the library so that whatever builds a Job's
//! arguments (the controller, its tests, the scenarios) parses them with the binary's own parser.

use std::path::{Path, PathBuf};

use groundskeeper_protocol::{OperationKind, Report};

use clap::{Parser, Subcommand};
#[cfg(test)]
use groundskeeper_protocol::operation::LeaderTurnPolicy;
use groundskeeper_protocol::operation::{
    CleanupRequest, CompactRequest, CompactTo, CopyRequest, DefragRequest, DeltaRequest, EtcdTarget,
    EtcdTlsFiles, Operation, ProveRequest, ReplayRequest, RestoreMemberRequest, SnapshotOutput,
    SnapshotRequest, SnapshotRetention,
};

use groundskeeper_stores::etcd::connect::EndpointArgs;

use crate::etcd::compact::CompactArgs;
use crate::etcd::copy::CopyArgs;
use crate::etcd::defrag::DefragArgs;
use crate::etcd::delta::DeltaArgs;
use crate::etcd::delta::replay::ReplayArgs;
use crate::etcd::prove::ProveArgs;
use crate::etcd::restore_member::RestoreMemberArgs;
use crate::etcd::snapshot::SnapshotArgs;
use crate::revision::RevisionArgs;
use crate::scylla::cleanup::CleanupArgs;

#[derive(Parser)]
#[command(name = "groundskeeper-job", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Read a token ring (JSON array of token strings, as `GET /storage_service/tokens` returns
    /// it) on stdin and print its hash, as scylla-operator writes it into annotations.
    RingHash,
    /// Defragment the etcd members over the thresholds, one at a time, followers first, moving
    /// leadership away before the leader's turn (no election).
    Defrag(DefragArgs),
    /// Compact etcd's MVCC history (idempotent).
    Compact(CompactArgs),
    /// Stream a snapshot of the keyspace from a healthy member (a follower when there is one)
    /// into a file, checking etcd's SHA-256 trailer, written atomically. `snapshot verify FILE`
    /// checks a snapshot file on its own.
    Snapshot(SnapshotArgs),
    /// Copy a cluster's snapshots from one folder or bucket to another, checking every one's
    /// SHA-256 on both sides; those already there with the same SHA-256 are left as they are, so
    /// a run again (or after a killed one) copies only what is missing.
    SnapshotCopy(CopyArgs),
    /// Prove that a snapshot restores: fetch it (named, or the cluster's newest), check it,
    /// restore it into a throwaway etcd member in the scratch folder and check that the member
    /// serves the recorded revision and holds the recorded number of keys.
    SnapshotProve(ProveArgs),
    /// Restore one member's data folder from a snapshot while the cluster is stopped: the old
    /// data is moved aside (never deleted), the snapshot restored with the member's name, peer
    /// URL and a new cluster token. Run again, a finished restore is left as it is.
    RestoreMember(RestoreMemberArgs),
    /// An incremental snapshot: every change etcd made after a start revision (the end of the
    /// newest full snapshot or delta in the store) up to the cluster's revision now, read from
    /// etcd's history with a watch and written to a folder or bucket, nothing under its name
    /// until whole. A start etcd compacted fails with HistoryCompacted (exit 2).
    SnapshotDelta(DeltaArgs),
    /// Replay a full snapshot and its deltas in order up to a revision in a throwaway etcd member
    /// in the scratch folder, each original transaction as one transaction at its own revision,
    /// and report what the member serves there (revision, keys, the keyspace's SHA-256).
    SnapshotReplay(ReplayArgs),
    /// Clean one Scylla node through its Scylla Manager Agent: drop data for token ranges the
    /// node no longer owns, keyspace by keyspace, with progress on stderr.
    Cleanup(CleanupArgs),
    /// Encode or decode a composite revision of a partitioned etcd cluster (bits 0–12 event
    /// number, 13–18 cluster id, 19–62 Unix time in ms). Prints the answer; writes no result.
    Revision(RevisionArgs),
}

impl Cli {
    /// Parses a Job's container arguments (subcommand first, without the program name).
    pub fn try_parse_args<I, S>(args: I) -> Result<Cli, clap::Error>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Cli::try_parse_from(
            std::iter::once("groundskeeper-job".to_owned()).chain(args.into_iter().map(Into::into)),
        )
    }
}

impl Command {
    /// The typed request these arguments carry: what the controller rendered, read back. `None`
    /// for commands that are not maintenance operations.
    pub fn operation(&self) -> Option<Operation> {
        match self {
            // Not rendered by the controller.
            Command::RingHash | Command::Revision(_) => None,
            Command::Cleanup(args) => Some(Operation::Cleanup(CleanupRequest {
                node_address: args.node_address.clone(),
                auth_token_file: path_text(&args.auth_token_file),
                agent_ca_file: args.agent_ca_file.as_deref().map(path_text),
                keyspaces: args.keyspaces.clone(),
                mark_node_clean: args.mark_node_clean,
            })),
            Command::Defrag(args) => Some(Operation::Defrag(DefragRequest {
                etcd: etcd_target(&args.connection),
                min_defrag_bytes: args.min_defrag_bytes,
                max_fragmented_percent: args.max_fragmented_percent,
                compact_retain_revisions: args.compact_retain_revisions,
                compact_not_past: args.compact_not_past,
                leader_turn: args.leader_turn_policy(),
                leader_in_place_budget_seconds: args.leader_in_place_budget_seconds,
                refuse_affected_versions: args.refuse_affected_versions,
                quota_backend_bytes: args.quota_backend_bytes,
                allow_single_member: args.allow_single_member,
                not_after: args.not_after.clone(),
                window_opened: args.window_opened.clone(),
                expected_rates: args
                    .expected_rates
                    .iter()
                    .filter_map(|r| {
                        let (member, rate) = r.rsplit_once('=')?;
                        Some((member.to_owned(), rate.parse().ok()?))
                    })
                    .collect(),
            })),
            Command::Compact(args) => Some(Operation::Compact(CompactRequest {
                etcd: etcd_target(&args.connection),
                to: match (args.retain_revisions, args.revision) {
                    (_, Some(revision)) => CompactTo::Revision(revision),
                    (keep, None) => CompactTo::RetainRevisions(keep.unwrap_or_default()),
                },
                physical: args.physical,
                not_past: args.not_past,
            })),
            Command::Snapshot(args) if args.check.is_some() => None,
            Command::Snapshot(args) => Some(Operation::Snapshot(SnapshotRequest {
                etcd: etcd_target(&args.connection),
                output: match (args.bucket_location(), &args.object) {
                    (Some(bucket), Some(name)) => SnapshotOutput::Object { bucket, name: name.clone() },
                    _ => SnapshotOutput::File(args.output.as_deref().map(path_text).unwrap_or_default()),
                },
                retention: match (args.retain, &args.file_name_template, &args.cluster) {
                    (Some(retain), Some(template), Some(cluster)) => Some(SnapshotRetention {
                        retain,
                        file_name_template: template.clone(),
                        cluster: cluster.clone(),
                        keep_within: args.keep_within.clone(),
                        tiers: args.keep_tiers.clone(),
                        keep_deltas_for: args.keep_deltas_for.clone(),
                        max_total_bytes: args.max_total_bytes,
                    }),
                    _ => None,
                },
                encoding: args.encoding.operation(),
            })),
            Command::SnapshotCopy(args) => Some(Operation::SnapshotCopy(CopyRequest {
                from: args.from.store(),
                to: args.to.store(),
                file_name_template: args.file_name_template.clone(),
                cluster: args.cluster.clone(),
                only: args.only.clone(),
            })),
            Command::SnapshotProve(args) => Some(Operation::SnapshotProve(ProveRequest {
                from: args.from.store(),
                object: args.object.clone(),
                file_name_template: args.file_name_template.clone(),
                cluster: args.cluster.clone(),
                expect_revision: args.expect_revision,
                expect_keys: args.expect_keys,
                expect_sha256: args.expect_sha256.clone(),
                scratch_dir: path_text(&args.scratch_dir),
                encryption_key_file: args.key.file(),
            })),
            Command::SnapshotDelta(args) => Some(Operation::SnapshotDelta(DeltaRequest {
                etcd: etcd_target(&args.connection),
                to: args.to.store(),
                file_name_template: args.file_name_template.clone(),
                cluster: args.cluster.clone(),
                start_revision: args.start_revision,
                end_revision: args.end_revision,
                encoding: args.encoding.operation(),
            })),
            Command::SnapshotReplay(args) => Some(Operation::SnapshotReplay(ReplayRequest {
                from: args.from.store(),
                object: args.object.clone(),
                file_name_template: args.file_name_template.clone(),
                cluster: args.cluster.clone(),
                to_revision: args.to_revision,
                expect_keys: args.expect_keys,
                scratch_dir: path_text(&args.scratch_dir),
                save_as: args.save_as.clone(),
                encoding: args.encoding.operation(),
            })),
            Command::RestoreMember(args) => Some(Operation::RestoreMember(RestoreMemberRequest {
                from: args.from.store(),
                object: args.object.clone(),
                expect_sha256: args.expect_sha256.clone(),
                data_dir: path_text(&args.data_dir),
                name: args.name.clone(),
                initial_cluster: args.initial_cluster.clone(),
                initial_advertise_peer_urls: args.initial_advertise_peer_urls.clone(),
                initial_cluster_token: args.initial_cluster_token.clone(),
                keep_old_suffix: args.keep_old_suffix.clone(),
                scratch_dir: path_text(&args.scratch_dir),
                encryption_key_file: args.key.file(),
            })),
        }
    }
}

/// The empty report of the maintenance subcommand in raw arguments (program name excluded), for
/// a run whose arguments do not parse; `None` when there is none.
pub fn empty_report_for(args: &[String]) -> Option<Report> {
    match OperationKind::parse(args.first()?)? {
        OperationKind::Cleanup => Some(Report::Cleanup(Default::default())),
        OperationKind::Defrag => Some(Report::Defrag(Default::default())),
        OperationKind::Compact => Some(Report::Compact(Default::default())),
        OperationKind::Snapshot => Some(Report::Snapshot(Default::default())),
        OperationKind::SnapshotCopy => Some(Report::SnapshotCopy(Default::default())),
        OperationKind::SnapshotProve => Some(Report::SnapshotProve(Default::default())),
        OperationKind::RestoreMember => Some(Report::RestoreMember(Default::default())),
        OperationKind::SnapshotDelta => Some(Report::SnapshotDelta(Default::default())),
        OperationKind::SnapshotReplay => Some(Report::SnapshotReplay(Default::default())),
    }
}

/// The `--result-file` named in raw arguments, else the default (the termination message).
pub fn result_file_in(args: &[String]) -> PathBuf {
    let named = args.iter().enumerate().find_map(|(i, arg)| match arg.strip_prefix("--result-file") {
        Some(rest) if rest.starts_with('=') => Some(rest[1..].to_owned()),
        Some("") => args.get(i + 1).cloned(),
        _ => None,
    });
    PathBuf::from(named.unwrap_or_else(|| crate::run::DEFAULT_RESULT_FILE.to_owned()))
}

fn etcd_target(args: &EndpointArgs) -> EtcdTarget {
    let tls = match (&args.cacert, &args.cert, &args.key) {
        (Some(ca), Some(cert), Some(key)) => {
            Some(EtcdTlsFiles { ca: path_text(ca), cert: path_text(cert), key: path_text(key) })
        }
        _ => None,
    };
    EtcdTarget { endpoints: args.endpoints.clone(), tls }
}

fn path_text(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use groundskeeper_protocol::operation::{BucketLocation, ObjectEncoding, SnapshotStore};

    fn etcd(tls: bool) -> EtcdTarget {
        EtcdTarget {
            endpoints: vec!["https://e-0:2379".into(), "https://e-1:2379".into()],
            tls: tls.then(|| EtcdTlsFiles {
                ca: "/tls/ca.crt".into(),
                cert: "/tls/tls.crt".into(),
                key: "/tls/tls.key".into(),
            }),
        }
    }

    #[test]
    fn arguments_that_do_not_parse_still_name_their_report_and_result_file() {
        let args = |line: &str| line.split(' ').map(str::to_owned).collect::<Vec<_>>();
        assert!(matches!(empty_report_for(&args("defrag --endpoints")), Some(Report::Defrag(_))));
        assert!(matches!(empty_report_for(&args("cleanup")), Some(Report::Cleanup(_))));
        assert!(matches!(empty_report_for(&args("snapshot --output")), Some(Report::Snapshot(_))));
        assert!(empty_report_for(&args("ring-hash")).is_none());
        assert!(empty_report_for(&args("revision decode -1")).is_none());
        assert!(empty_report_for(&[]).is_none());
        assert_eq!(result_file_in(&args("compact --result-file /r.json --port x")), PathBuf::from("/r.json"));
        assert_eq!(result_file_in(&args("compact --result-file=/r.json")), PathBuf::from("/r.json"));
        assert_eq!(
            result_file_in(&args("compact --revision x")),
            PathBuf::from(crate::run::DEFAULT_RESULT_FILE)
        );
    }

    /// `snapshot verify FILE` needs no endpoints, and a snapshot without them or `--output` is
    /// refused; verify is no operation a Job is rendered into.
    #[test]
    fn snapshot_verify_is_a_subcommand_of_its_own() {
        let cli = Cli::try_parse_args(["snapshot", "verify", "/s.db"]).unwrap();
        let Command::Snapshot(args) = &cli.command else { panic!("a snapshot command") };
        assert!(args.check.is_some());
        assert_eq!(cli.command.operation(), None);
        for refused in [
            &["snapshot", "--output", "/s.db"][..],
            &["snapshot", "--endpoints", "http://a:2379"],
            &["snapshot", "verify"],
            &["snapshot", "--endpoints", "http://a:2379", "verify", "/s.db"],
            // A bucket takes an object name, and excludes --output; its flags need --to.
            &["snapshot", "--endpoints", "http://a:2379", "--to", "s3://b"],
            &[
                "snapshot",
                "--endpoints",
                "http://a:2379",
                "--to",
                "s3://b",
                "--object",
                "s.db",
                "--output",
                "/s.db",
            ],
        ] {
            assert!(Cli::try_parse_args(refused.iter().copied()).is_err(), "{refused:?}");
        }
        // A bucket's flags beside --output: clap lets some through (--output conflicts with --to,
        // which relaxes what --to's flags require); the run refuses those (bad input, exit 2).
        for refused in [&["--object", "s.db"][..], &["--to-credentials", "/c"], &["--to-option", "a=b"]] {
            let args = ["snapshot", "--endpoints", "http://a:2379", "--output", "/s.db"];
            let Ok(cli) = Cli::try_parse_args(args.iter().chain(refused).copied()) else { continue };
            let Command::Snapshot(args) = &cli.command else { panic!("a snapshot command") };
            let failure = args.destination().unwrap_err();
            assert_eq!(failure.kind, groundskeeper_protocol::result::ErrorKind::BadInput, "{refused:?}");
        }
    }

    /// Retention flags come together and `--retain` is at least 1: anything else is refused by
    /// the parser (exit 2, see `main`); a template that does not name `--output` is bad input.
    #[test]
    fn retention_flags_are_checked() {
        let base = ["snapshot", "--endpoints", "http://a:2379", "--output", "/s/main-20260101T000000Z.db"];
        let parse = |extra: &[&str]| Cli::try_parse_args(base.iter().chain(extra).copied());
        for refused in [
            &["--retain", "0", "--file-name-template", "{cluster}-{time}.db", "--cluster", "main"][..],
            &["--retain", "-1", "--file-name-template", "{cluster}-{time}.db", "--cluster", "main"],
            &["--retain", "x", "--file-name-template", "{cluster}-{time}.db", "--cluster", "main"],
            &["--retain", "2"],
            &["--retain", "2", "--cluster", "main"],
            &["--file-name-template", "{cluster}-{time}.db", "--cluster", "main"],
        ] {
            assert!(parse(refused).is_err(), "{refused:?}");
        }
        let retention = |extra: &[&str]| {
            let Command::Snapshot(args) = parse(extra).unwrap().command else { panic!("a snapshot command") };
            args.retention()
        };
        let ok =
            retention(&["--retain", "2", "--file-name-template", "{cluster}-{time}.db", "--cluster", "main"]);
        assert_eq!(ok.unwrap().unwrap().retain, 2);
        assert_eq!(retention(&[]).unwrap(), None);
        for (extra, says) in [
            (
                &["--retain", "2", "--file-name-template", "{cluster}-{time}.db", "--cluster", "other"][..],
                "is not a name",
            ),
            (&["--retain", "2", "--file-name-template", "{cluster}-{day}.db", "--cluster", "main"], "brace"),
            (&["--retain", "2", "--file-name-template", "a/{time}", "--cluster", "main"], "'/'"),
        ] {
            let failure = retention(extra).unwrap_err();
            assert_eq!(failure.kind, groundskeeper_protocol::result::ErrorKind::BadInput);
            assert!(failure.message.contains(says), "{extra:?}: {}", failure.message);
        }
    }

    /// Every rendering the controller can make parses back, with the runner's own parser, into
    /// the very request it was made from.
    #[test]
    fn every_rendered_operation_parses_back_into_itself() {
        let operations = [
            Operation::Cleanup(CleanupRequest {
                node_address: "sc-dc-r1-0.scylla.svc".into(),
                auth_token_file: "/etc/groundskeeper/agent/auth-token.yaml".into(),
                agent_ca_file: None,
                keyspaces: vec![],
                mark_node_clean: false,
            }),
            Operation::Cleanup(CleanupRequest {
                node_address: "10.0.0.5".into(),
                auth_token_file: "/t.yaml".into(),
                agent_ca_file: Some("/ca.pem".into()),
                keyspaces: vec!["ks1".into(), "ks2".into()],
                mark_node_clean: true,
            }),
            Operation::Defrag(DefragRequest {
                etcd: etcd(true),
                min_defrag_bytes: 100_000_000,
                max_fragmented_percent: 45.5,
                compact_retain_revisions: Some(10_000),
                compact_not_past: Some(9_000),
                leader_turn: LeaderTurnPolicy::Never,
                leader_in_place_budget_seconds: Some(8),
                refuse_affected_versions: true,
                quota_backend_bytes: Some(2_147_483_648),
                allow_single_member: true,
                not_after: Some("2026-11-25T05:00:00Z".into()),
                window_opened: Some("2026-11-25T01:00:00Z".into()),
                expected_rates: vec![("etcd-0".into(), 52428800.0), ("etcd-1".into(), 1000.0)],
            }),
            Operation::Defrag(DefragRequest { etcd: etcd(false), ..DefragRequest::default() }),
            Operation::Compact(CompactRequest {
                etcd: etcd(true),
                to: CompactTo::Revision(77),
                physical: true,
                not_past: Some(70),
            }),
            Operation::Compact(CompactRequest {
                etcd: etcd(false),
                to: CompactTo::RetainRevisions(0),
                physical: false,
                not_past: None,
            }),
            Operation::Snapshot(SnapshotRequest {
                etcd: etcd(true),
                output: SnapshotOutput::File("/var/lib/snapshots/main-1767225600.db".into()),
                retention: None,
                encoding: ObjectEncoding { zstd_level: Some(3), encryption_key_file: None },
            }),
            Operation::Snapshot(SnapshotRequest {
                etcd: etcd(false),
                output: SnapshotOutput::File("s.db".into()),
                retention: None,
                encoding: ObjectEncoding::default(),
            }),
            Operation::Snapshot(SnapshotRequest {
                etcd: etcd(false),
                output: SnapshotOutput::File("/snapshots/main-20260101T000000Z.db".into()),
                retention: Some(SnapshotRetention {
                    retain: 3,
                    file_name_template: "{cluster}-{time}.db".into(),
                    cluster: "main".into(),
                    ..SnapshotRetention::default()
                }),
                encoding: ObjectEncoding {
                    zstd_level: Some(19),
                    encryption_key_file: Some("/keys/to/key".into()),
                },
            }),
            Operation::Snapshot(SnapshotRequest {
                etcd: etcd(true),
                output: SnapshotOutput::Object {
                    bucket: BucketLocation {
                        url: "s3://backups/etcd/main".into(),
                        options: vec![
                            ("endpoint".into(), "http://minio.backup:9000".into()),
                            ("allow_http".into(), "true".into()),
                            ("region".into(), "a=b".into()),
                        ],
                        credentials_dir: Some("/credentials/to".into()),
                    },
                    name: "main-20260101T000000Z.db".into(),
                },
                retention: Some(SnapshotRetention {
                    retain: 7,
                    file_name_template: "{cluster}-{time}.db".into(),
                    cluster: "main".into(),
                    keep_within: Some("2d".into()),
                    tiers: vec!["1h:7d".into(), "1d:30d".into()],
                    keep_deltas_for: Some("1d".into()),
                    max_total_bytes: Some(50 << 30),
                }),
                encoding: ObjectEncoding {
                    zstd_level: None,
                    encryption_key_file: Some("/keys/to/key".into()),
                },
            }),
            Operation::Snapshot(SnapshotRequest {
                etcd: etcd(false),
                output: SnapshotOutput::Object {
                    bucket: BucketLocation { url: "gs://b".into(), options: vec![], credentials_dir: None },
                    name: "s.db".into(),
                },
                retention: None,
                encoding: ObjectEncoding::default(),
            }),
            Operation::SnapshotCopy(CopyRequest {
                from: SnapshotStore::Folder("/snapshots/from".into()),
                to: SnapshotStore::Bucket(BucketLocation {
                    url: "s3://backups/etcd".into(),
                    options: vec![("endpoint".into(), "http://minio:9000".into())],
                    credentials_dir: Some("/credentials/to".into()),
                }),
                file_name_template: "{cluster}-{time}.db".into(),
                cluster: "main".into(),
                only: vec!["main-20260101T000000Z.db".into(), "main-20260102T000000Z.db".into()],
            }),
            Operation::SnapshotCopy(CopyRequest {
                from: SnapshotStore::Bucket(BucketLocation {
                    url: "gs://a".into(),
                    options: vec![],
                    credentials_dir: Some("/credentials/from".into()),
                }),
                to: SnapshotStore::Bucket(BucketLocation {
                    url: "az://b/p".into(),
                    options: vec![("account_name".into(), "acct".into())],
                    credentials_dir: None,
                }),
                file_name_template: "{cluster}.db".into(),
                cluster: "main".into(),
                only: vec![],
            }),
            Operation::SnapshotProve(ProveRequest {
                from: SnapshotStore::Folder("/snapshots".into()),
                object: None,
                file_name_template: "{cluster}-{time}.db".into(),
                cluster: "main".into(),
                expect_revision: None,
                expect_keys: None,
                expect_sha256: None,
                scratch_dir: "/scratch".into(),
                encryption_key_file: Some("/keys/from/key".into()),
            }),
            Operation::SnapshotProve(ProveRequest {
                from: SnapshotStore::Bucket(BucketLocation {
                    url: "s3://backups/etcd/main".into(),
                    options: vec![
                        ("endpoint".into(), "http://minio.backup:9000".into()),
                        ("allow_http".into(), "true".into()),
                    ],
                    credentials_dir: Some("/credentials/from".into()),
                }),
                object: Some("main-20260101T000000Z.db".into()),
                file_name_template: "{cluster}-{time}.db".into(),
                cluster: "main".into(),
                expect_revision: Some(1234),
                expect_keys: Some(0),
                expect_sha256: Some("ab".repeat(32)),
                scratch_dir: "/scratch".into(),
                encryption_key_file: None,
            }),
            Operation::SnapshotDelta(DeltaRequest {
                etcd: etcd(false),
                to: SnapshotStore::Folder("/snapshots".into()),
                file_name_template: "{cluster}-{time}.db".into(),
                cluster: "main".into(),
                start_revision: None,
                end_revision: None,
                encoding: ObjectEncoding { zstd_level: Some(3), encryption_key_file: None },
            }),
            Operation::SnapshotDelta(DeltaRequest {
                etcd: etcd(true),
                to: SnapshotStore::Bucket(BucketLocation {
                    url: "s3://backups/etcd".into(),
                    options: vec![("endpoint".into(), "http://minio:9000".into())],
                    credentials_dir: Some("/credentials/to".into()),
                }),
                file_name_template: "{cluster}-{time}.db".into(),
                cluster: "main".into(),
                start_revision: Some(0),
                end_revision: Some(4096),
                encoding: ObjectEncoding::default(),
            }),
            Operation::SnapshotReplay(ReplayRequest {
                from: SnapshotStore::Folder("/snapshots".into()),
                object: None,
                file_name_template: "{cluster}-{time}.db".into(),
                cluster: "main".into(),
                to_revision: None,
                expect_keys: None,
                scratch_dir: "/scratch".into(),
                save_as: Some("main-20260101T000000Z.db".into()),
                encoding: ObjectEncoding {
                    zstd_level: Some(19),
                    encryption_key_file: Some("/keys/to/key".into()),
                },
            }),
            Operation::SnapshotReplay(ReplayRequest {
                from: SnapshotStore::Bucket(BucketLocation {
                    url: "gs://backups/etcd".into(),
                    options: vec![],
                    credentials_dir: Some("/credentials/from".into()),
                }),
                object: Some("main-20260101T000000Z.db".into()),
                file_name_template: "{cluster}-{time}.db".into(),
                cluster: "main".into(),
                to_revision: Some(1234),
                expect_keys: Some(0),
                scratch_dir: "/scratch".into(),
                save_as: None,
                encoding: ObjectEncoding {
                    zstd_level: None,
                    encryption_key_file: Some("/keys/to/key".into()),
                },
            }),
            Operation::RestoreMember(RestoreMemberRequest {
                from: SnapshotStore::Bucket(BucketLocation {
                    url: "gs://backups".into(),
                    options: vec![],
                    credentials_dir: None,
                }),
                object: "main-20260101T000000Z.db".into(),
                expect_sha256: Some("cd".repeat(32)),
                data_dir: "/var/lib/etcd/data".into(),
                name: "etcd-0".into(),
                initial_cluster: "etcd-0=https://etcd-0.etcd:2380,etcd-1=https://etcd-1.etcd:2380".into(),
                initial_advertise_peer_urls: "https://etcd-0.etcd:2380".into(),
                initial_cluster_token: "main-restore-t1".into(),
                keep_old_suffix: ".pre-restore-t1".into(),
                scratch_dir: "/var/lib/etcd/.scratch".into(),
                encryption_key_file: Some("/keys/from/key".into()),
            }),
            Operation::RestoreMember(RestoreMemberRequest {
                from: SnapshotStore::Folder("/snapshots".into()),
                object: "main.db".into(),
                expect_sha256: None,
                data_dir: "/var/lib/etcd/data".into(),
                name: "etcd-1".into(),
                initial_cluster: "etcd-1=http://etcd-1:2380".into(),
                initial_advertise_peer_urls: "http://etcd-1:2380".into(),
                initial_cluster_token: "t".into(),
                keep_old_suffix: ".old".into(),
                scratch_dir: "/scratch".into(),
                encryption_key_file: None,
            }),
        ];
        let covered: std::collections::BTreeSet<&str> =
            operations.iter().map(|o| o.kind().as_str()).collect();
        let every: std::collections::BTreeSet<&str> = OperationKind::ALL.iter().map(|k| k.as_str()).collect();
        assert_eq!(covered, every, "every operation the controller can render is rendered here");
        for operation in operations {
            let args = operation.to_args();
            let cli = Cli::try_parse_args(args.clone()).unwrap_or_else(|e| panic!("{args:?}: {e}"));
            assert_eq!(cli.command.operation(), Some(operation), "{args:?}");
        }
    }
}
