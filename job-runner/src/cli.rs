//! The command line of `groundskeeper-job`, in the library so that whatever builds a Job's
//! arguments (the controller, its tests, the scenarios) parses them with the binary's own parser.

use clap::{Parser, Subcommand};

use crate::etcd::compact::CompactArgs;
use crate::etcd::defrag::DefragArgs;
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
    /// Clean one Scylla node through its Scylla Manager Agent: drop data for token ranges the
    /// node no longer owns, keyspace by keyspace, with progress on stderr.
    Cleanup(CleanupArgs),
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
