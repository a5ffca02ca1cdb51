//! `groundskeeper-job revision encode|decode`: composite revisions of partitioned etcd clusters
//! (see [`groundskeeper_protocol::revision`]), computed locally.
//!
//! Like `ring-hash`, these print their answer on stdout and write no result file: they reach no
//! data store and no Job runs them. A value out of range is bad input (exit 2), refused by the
//! argument parser with a message naming the field and its range.

use clap::{Args, Subcommand};
use groundskeeper_protocol::exit;
use groundskeeper_protocol::revision::{CompositeRevision, Field};
use serde::Serialize;

#[derive(Args, Debug, Clone, PartialEq, Eq)]
pub struct RevisionArgs {
    #[command(subcommand)]
    pub command: RevisionCommand,
}

#[derive(Subcommand, Debug, Clone, PartialEq, Eq)]
pub enum RevisionCommand {
    /// Print the decimal revision made of a time, a cluster id and an event number.
    Encode(EncodeArgs),
    /// Print a revision's parts as JSON: {"timestampMs","clusterId","event","time"}.
    Decode(DecodeArgs),
}

#[derive(Args, Debug, Clone, PartialEq, Eq)]
pub struct EncodeArgs {
    /// Unix time in milliseconds, 0 to 2^44 − 1 (17592186044415).
    #[arg(long, allow_negative_numbers = true, value_parser = timestamp_ms)]
    pub timestamp_ms: u64,
    /// The etcd cluster's id, 0 to 63.
    #[arg(long, allow_negative_numbers = true, value_parser = cluster_id)]
    pub cluster_id: u8,
    /// Event number within the millisecond, 0 to 8191.
    #[arg(long, allow_negative_numbers = true, value_parser = event)]
    pub event: u16,
}

#[derive(Args, Debug, Clone, PartialEq, Eq)]
pub struct DecodeArgs {
    /// A revision, 0 to 2^63 − 1, in decimal.
    #[arg(allow_negative_numbers = true, value_parser = revision)]
    pub revision: i64,
}

/// What `revision decode` prints.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Decoded {
    pub timestamp_ms: u64,
    pub cluster_id: u8,
    pub event: u16,
    /// The time as RFC 3339, UTC, to the millisecond.
    pub time: String,
}

impl From<CompositeRevision> for Decoded {
    fn from(parts: CompositeRevision) -> Self {
        let time = i64::try_from(parts.timestamp_ms)
            .ok()
            .and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok())
            .expect("44 bits of milliseconds (until the year 2527) are within jiff's range");
        Self {
            timestamp_ms: parts.timestamp_ms,
            cluster_id: parts.cluster_id,
            event: parts.event,
            time: format!("{time:.3}"),
        }
    }
}

/// The line `revision` prints, or the message it refuses with.
pub fn output(args: &RevisionArgs) -> Result<String, String> {
    match &args.command {
        RevisionCommand::Encode(args) => CompositeRevision {
            timestamp_ms: args.timestamp_ms,
            cluster_id: args.cluster_id,
            event: args.event,
        }
        .encode()
        .map(|revision| revision.to_string())
        .map_err(|err| err.to_string()),
        RevisionCommand::Decode(args) => CompositeRevision::decode(args.revision)
            .map(|parts| serde_json::to_string(&Decoded::from(parts)).expect("always serialises"))
            .map_err(|err| err.to_string()),
    }
}

/// Runs `revision`: the answer on stdout, exit 0; else the reason on stderr, exit 2.
pub fn main(args: RevisionArgs) -> i32 {
    match output(&args) {
        Ok(line) => {
            println!("{line}");
            exit::SUCCESS
        }
        Err(message) => {
            eprintln!("error: {message}");
            exit::BAD_INPUT
        }
    }
}

fn timestamp_ms(text: &str) -> Result<u64, String> {
    Field::TimestampMs.parse(text).map_err(|err| err.to_string())
}

fn cluster_id(text: &str) -> Result<u8, String> {
    Ok(Field::ClusterId.parse(text).map_err(|err| err.to_string())? as u8)
}

fn event(text: &str) -> Result<u16, String> {
    Ok(Field::Event.parse(text).map_err(|err| err.to_string())? as u16)
}

fn revision(text: &str) -> Result<i64, String> {
    Ok(Field::Revision.parse(text).map_err(|err| err.to_string())? as i64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};

    fn run(line: &str) -> Result<String, String> {
        let cli = Cli::try_parse_args(line.split(' ')).map_err(|err| err.to_string())?;
        let Command::Revision(args) = cli.command else {
            panic!("{line}: not `revision`");
        };
        output(&args)
    }

    #[test]
    fn encodes_and_decodes_through_the_command_line() {
        assert_eq!(
            run("revision encode --timestamp-ms 1735689600000 --cluster-id 5 --event 42").as_deref(),
            Ok("910001229004841002")
        );
        assert_eq!(
            run("revision decode 910001229004841002").as_deref(),
            Ok(r#"{"timestampMs":1735689600000,"clusterId":5,"event":42,"time":"2025-01-01T00:00:00.000Z"}"#)
        );
        assert_eq!(
            run("revision decode 9223372036854775807").as_deref(),
            Ok(
                r#"{"timestampMs":17592186044415,"clusterId":63,"event":8191,"time":"2527-06-23T06:20:44.415Z"}"#
            )
        );
        assert_eq!(
            run("revision decode 0").as_deref(),
            Ok(r#"{"timestampMs":0,"clusterId":0,"event":0,"time":"1970-01-01T00:00:00.000Z"}"#)
        );
    }

    #[test]
    fn out_of_range_arguments_do_not_parse_and_say_why() {
        for (line, expected) in [
            ("revision encode --timestamp-ms 0 --cluster-id 64 --event 0", "cluster id 64"),
            ("revision encode --timestamp-ms 0 --cluster-id -1 --event 0", "cluster id -1"),
            ("revision encode --timestamp-ms 0 --cluster-id 0 --event 8192", "event number 8192"),
            ("revision encode --timestamp-ms 17592186044416 --cluster-id 0 --event 0", "timestamp in ms"),
            ("revision decode -1", "revision -1 is out of range"),
            ("revision decode x", "revision \"x\" is not a whole number"),
        ] {
            let err = Cli::try_parse_args(line.split(' ')).err().unwrap_or_else(|| panic!("{line}"));
            assert_eq!(err.kind(), clap::error::ErrorKind::ValueValidation, "{line}");
            assert!(err.to_string().contains(expected), "{line}: {err}");
        }
    }
}
