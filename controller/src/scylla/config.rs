//! Scylla's flags: the ring observer's interval, the cleanup trigger's quiet period and schema
//! checks, and where the agents are reached, flattened into the controller's command line by the
//! crate's root, each default written once (in its `#[arg]`). The code of the folder reads them
//! with [`Config::of`].

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::runtime::context::{Context, flag_defaults, parse_seconds};
use crate::runtime::error::Result;

/// Scylla's part of the controller's configuration.
#[derive(Clone, Debug, PartialEq, Eq, clap::Args)]
#[group(id = "scylla_config")]
pub struct Config {
    /// How often the ring observer recomputes token-ring hashes where nothing else writes them.
    #[arg(long, env = "GROUNDSKEEPER_RING_OBSERVER_INTERVAL", value_parser = parse_seconds, default_value = "30")]
    pub ring_observer_interval: Duration,
    /// How long a ScyllaCluster's ring must stay unchanged before an automatic cleanup task is
    /// submitted: a burst of ring changes is cleaned up once, for the ring it ends with.
    #[arg(
        long,
        env = "GROUNDSKEEPER_CLEANUP_RING_QUIET_PERIOD",
        value_parser = parse_seconds,
        default_value = "10"
    )]
    pub cleanup_ring_quiet_period: Duration,
    /// How often the cleanup trigger asks each ScyllaCluster whose ring views it reads for its
    /// schema version: a replication change is noticed within this (plus one pass).
    #[arg(
        long,
        env = "GROUNDSKEEPER_CLEANUP_SCHEMA_CHECK_INTERVAL",
        value_parser = parse_seconds,
        default_value = "20"
    )]
    pub cleanup_schema_check_interval: Duration,
    /// Where the controller reaches a Scylla Manager Agent instead of its member Service's DNS
    /// name (`<service>.<namespace>.svc` → host and port). Empty in a deployment; set by
    /// scenarios whose agents listen elsewhere. Never a flag.
    #[arg(skip)]
    pub agent_endpoints: BTreeMap<String, (String, u16)>,
}

impl Default for Config {
    fn default() -> Self {
        flag_defaults()
    }
}

impl Config {
    /// The configuration the controller runs with (its defaults in a context made for a test).
    pub fn of(ctx: &Context) -> Arc<Config> {
        ctx.store_config::<Config>()
    }

    /// Checks what clap cannot: nothing yet (every value clap accepts is one the trigger can
    /// run with), kept so that each store's flags are checked the same way.
    pub fn validate(&self) -> Result<()> {
        Ok(())
    }
}
