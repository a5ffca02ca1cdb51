//! etcd's flags: the fleet bound and the two discoveries (Arktos StorageClusters, etcd-operator's
//! clusters), flattened into the controller's command line by the crate's root, each default
//! written once (in its `#[arg]`), and their checks. The code of the folder reads them with
//! [`Config::of`].

use std::sync::Arc;

use super::model::MIN_PERIODIC_RETENTION;
use crate::runtime::context::{Context, flag_defaults};
use crate::runtime::error::{Error, Result};

/// etcd's part of the controller's configuration.
#[derive(Clone, Debug, PartialEq, Eq, clap::Args)]
#[group(id = "etcd_config")]
pub struct Config {
    /// Most clusters of one fleet of partitioned etcd clusters (`spec.partition.fleet`) in
    /// maintenance at once; the tasks of the others wait for a slot.
    #[arg(long, env = "GROUNDSKEEPER_FLEET_MAX_CONCURRENT", default_value_t = 1)]
    pub fleet_max_concurrent: usize,
    #[command(flatten)]
    pub storage_clusters: StorageClusterDiscovery,
    #[command(flatten)]
    pub etcd_operator_clusters: EtcdOperatorDiscovery,
}

/// Arktos `StorageCluster` discovery: each StorageCluster (`/api/v1/storageclusters`) is looked
/// after as an EtcdCluster of one fleet, made and kept in step by the controller.
#[derive(Clone, Debug, PartialEq, Eq, clap::Args)]
pub struct StorageClusterDiscovery {
    /// Maintain every StorageCluster as a Partitioned EtcdCluster (`storagecluster-<name>`,
    /// owned by it), with `storageClusterId` as its cluster id and `serviceAddress` as its
    /// endpoint. Needs the extra rules of manifests/addons/storage-cluster-discovery/.
    #[arg(long = "discover-storage-clusters", env = "GROUNDSKEEPER_DISCOVER_STORAGE_CLUSTERS")]
    pub enabled: bool,
    /// Namespace of the EtcdClusters made for StorageClusters (one the controller looks after).
    #[arg(
        long = "storage-cluster-namespace",
        env = "GROUNDSKEEPER_STORAGE_CLUSTER_NAMESPACE",
        default_value = "groundskeeper"
    )]
    pub namespace: String,
    /// Their fleet (`spec.partition.fleet`).
    #[arg(
        long = "storage-cluster-fleet",
        env = "GROUNDSKEEPER_STORAGE_CLUSTER_FLEET",
        default_value = "arktos"
    )]
    pub fleet: String,
    /// Client TLS Secret (in that namespace, keys ca.crt, tls.crt, tls.key) for their members,
    /// reached over https. Absent: plain http.
    #[arg(long = "storage-cluster-tls-secret", env = "GROUNDSKEEPER_STORAGE_CLUSTER_TLS_SECRET")]
    pub tls_secret: Option<String>,
    /// History their compaction keeps, as a duration (`1h`): compaction by time. Absent:
    /// groundskeeper does not compact them (Arktos's API server does), it defragments only.
    #[arg(
        long = "storage-cluster-compaction-retention",
        env = "GROUNDSKEEPER_STORAGE_CLUSTER_COMPACTION_RETENTION"
    )]
    pub compaction_retention: Option<String>,
}

/// etcd-operator discovery: each `EtcdCluster` of SIG etcd's operator (`operator.etcd.io`) in
/// the namespaces looked after is looked after as a groundskeeper EtcdCluster beside it, made and
/// kept in step by the controller.
#[derive(Clone, Debug, PartialEq, Eq, clap::Args)]
pub struct EtcdOperatorDiscovery {
    /// Maintain every etcd-operator EtcdCluster (operator.etcd.io) as an EtcdCluster
    /// `etcd-operator-<name>` in its namespace (owned by it), reached on the operator's client
    /// Service. Needs the extra rules of manifests/addons/etcd-operator-discovery/.
    #[arg(
        id = "discover_etcd_operator_clusters",
        long = "discover-etcd-operator-clusters",
        env = "GROUNDSKEEPER_DISCOVER_ETCD_OPERATOR_CLUSTERS"
    )]
    pub enabled: bool,
    /// History their compaction keeps, as a duration (`1h`): compaction by time, set when the
    /// EtcdCluster is made. Absent: groundskeeper does not compact them, it defragments only.
    #[arg(
        id = "etcd_operator_compaction_retention",
        long = "etcd-operator-compaction-retention",
        env = "GROUNDSKEEPER_ETCD_OPERATOR_COMPACTION_RETENTION"
    )]
    pub compaction_retention: Option<String>,
}

impl Default for Config {
    fn default() -> Self {
        flag_defaults()
    }
}

impl Default for StorageClusterDiscovery {
    fn default() -> Self {
        flag_defaults()
    }
}

impl Default for EtcdOperatorDiscovery {
    fn default() -> Self {
        flag_defaults()
    }
}

impl Config {
    /// The configuration the controller runs with (its defaults in a context made for a test).
    pub fn of(ctx: &Context) -> Arc<Config> {
        ctx.store_config::<Config>()
    }

    /// Checks what clap cannot, given the namespaces looked after (`--namespaces`): a wrong value
    /// stops the controller at start-up with the flag named.
    pub fn validate(&self, namespaces: &[String]) -> Result<()> {
        if self.fleet_max_concurrent == 0 {
            return Err(Error::Config(
                "--fleet-max-concurrent (GROUNDSKEEPER_FLEET_MAX_CONCURRENT): must be at least 1, \
                 or no cluster of a fleet would ever be maintained"
                    .into(),
            ));
        }
        self.storage_clusters.validate(namespaces)?;
        self.etcd_operator_clusters.validate()
    }
}

impl StorageClusterDiscovery {
    /// The checks of the StorageCluster discovery's flags, when it is on.
    fn validate(&self, namespaces: &[String]) -> Result<()> {
        if !self.enabled {
            return Ok(());
        }
        if !crate::runtime::deploy::is_namespace_name(&self.namespace) {
            return Err(Error::Config(format!(
                "--storage-cluster-namespace: {:?} is not a namespace name",
                self.namespace
            )));
        }
        let watched: Vec<&str> = namespaces.iter().map(|n| n.trim()).filter(|n| !n.is_empty()).collect();
        if !watched.is_empty() && !watched.contains(&self.namespace.as_str()) {
            return Err(Error::Config(format!(
                "--storage-cluster-namespace {} is not among --namespaces ({}): the EtcdClusters \
                 made for StorageClusters would not be maintained; add it to --namespaces",
                self.namespace,
                watched.join(",")
            )));
        }
        if self.fleet.trim().is_empty() {
            return Err(Error::Config("--storage-cluster-fleet: must name the fleet".into()));
        }
        if let Some(retention) = &self.compaction_retention {
            check_retention_flag("--storage-cluster-compaction-retention", retention)?;
        }
        Ok(())
    }
}

impl EtcdOperatorDiscovery {
    /// The checks of the etcd-operator discovery's flags, when it is on.
    fn validate(&self) -> Result<()> {
        let Some(retention) = self.compaction_retention.as_ref().filter(|_| self.enabled) else {
            return Ok(());
        };
        check_retention_flag("--etcd-operator-compaction-retention", retention)
    }
}

/// A discovery's compaction retention flag: a duration of at least [`MIN_PERIODIC_RETENTION`],
/// or an error naming the flag.
fn check_retention_flag(flag: &str, retention: &str) -> Result<()> {
    let min = MIN_PERIODIC_RETENTION;
    groundskeeper_stores::duration::parse_at_least(retention, min).map(|_| ()).map_err(|_| {
        Error::Config(format!(
            "{flag}: {retention:?} is not a duration of at least {min:#} (write e.g. \"1h\")"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fleet_bound_is_at_least_one() {
        let config = Config { fleet_max_concurrent: 0, ..Config::default() };
        let err = config.validate(&[]).unwrap_err().to_string();
        assert!(err.contains("--fleet-max-concurrent"), "{err}");
        Config::default().validate(&[]).unwrap();
    }

    #[test]
    fn invalid_discovery_flags_are_named() {
        type Breakage = fn(&mut Config, &mut Vec<String>);
        let cases: [(&str, Breakage); 3] = [
            (
                "--storage-cluster-namespace groundskeeper is not among --namespaces (etcd)",
                |c, namespaces| {
                    c.storage_clusters.enabled = true;
                    *namespaces = vec!["etcd".into()];
                },
            ),
            ("--storage-cluster-compaction-retention: \"5m\" is not a duration of at least 10m", |c, _| {
                c.storage_clusters.enabled = true;
                c.storage_clusters.compaction_retention = Some("5m".into());
            }),
            ("--storage-cluster-fleet", |c, _| {
                c.storage_clusters.enabled = true;
                c.storage_clusters.fleet = " ".into();
            }),
        ];
        for (wanted, break_it) in cases {
            let mut config = Config::default();
            let mut namespaces = Vec::new();
            break_it(&mut config, &mut namespaces);
            let err = config.validate(&namespaces).unwrap_err().to_string();
            assert!(err.contains(wanted), "{wanted}: {err}");
        }
        assert!(Config::default().validate(&[]).is_ok());
    }

    #[test]
    fn the_compaction_flag_is_checked_only_when_discovery_is_on() {
        let config = |enabled, retention: &str| Config {
            etcd_operator_clusters: EtcdOperatorDiscovery {
                enabled,
                compaction_retention: Some(retention.into()),
            },
            ..Config::default()
        };
        let err = config(true, "5m").validate(&[]).unwrap_err().to_string();
        assert!(
            err.contains("--etcd-operator-compaction-retention: \"5m\" is not a duration of at least 10m"),
            "{err}"
        );
        assert!(config(true, "1h").validate(&[]).is_ok());
        assert!(config(false, "5m").validate(&[]).is_ok());
        assert!(Config::default().validate(&[]).is_ok());
    }
}
