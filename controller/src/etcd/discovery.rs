//! Arktos `StorageCluster` discovery (`--discover-storage-clusters`): every StorageCluster is
//! looked after as a `Partitioned` EtcdCluster of one fleet, through the same path as any other.
//!
//! For StorageCluster `<name>` the controller makes EtcdCluster `storagecluster-<name>` in
//! `--storage-cluster-namespace`, labelled with the StorageCluster's name and owned by it
//! (deleting the StorageCluster deletes the EtcdCluster, its tasks and their Jobs):
//! `spec.endpoints` = `serviceAddress` (`http://` added, `https://` with
//! `--storage-cluster-tls-secret`), `spec.partition` = fleet `--storage-cluster-fleet`, cluster id
//! `storageClusterId`, revision scheme `Partitioned`. A change of the StorageCluster rewrites
//! those fields and nothing else: the rest of the spec (policy, Job limits) starts from the
//! controller's flags and is the user's to tune afterwards. An EtcdCluster of that name made by
//! someone else is never touched. A StorageCluster whose fields are not valid gets a Warning
//! Event and no EtcdCluster; fixing it is enough.
//!
//! The EtcdCluster trigger then does the rest: collisions of ids, clock skew, compaction by
//! time, the fleet bound.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Api, Resource, ResourceExt};
use serde_json::json;

use groundskeeper_protocol::keys;

use super::config::{Config, StorageClusterDiscovery};
use crate::jobs::bounded_name;
use crate::runtime::context::{Context, PlannedEvent};
use crate::runtime::error::{Error, Result};
use crate::runtime::reconciler::{self, Reconciler};
use groundskeeper_api::etcd_cluster::{
    CompactionMode, EtcdClientTls, EtcdCluster, EtcdClusterSpec, EtcdCompactionPolicy, EtcdMaintenancePolicy,
    EtcdPartition, RevisionScheme,
};
use groundskeeper_api::storage_cluster::StorageCluster;

/// This controller's name in metrics and logs.
pub(crate) const CONTROLLER: &str = "storage-clusters";
/// Label on an EtcdCluster made for a StorageCluster: the StorageCluster's name.
pub(crate) const STORAGE_CLUSTER_LABEL: &str = "groundskeeper.dev/storage-cluster";
/// Prefix of the EtcdCluster's name.
pub(crate) const NAME_PREFIX: &str = "storagecluster-";
/// Warning Event reason on a StorageCluster that cannot be maintained.
pub(crate) const INVALID_STORAGE_CLUSTER: &str = "InvalidStorageCluster";

/// Runs the discovery until the watch stream ends (returns at once when it is off).
pub async fn run(ctx: Arc<Context>) {
    if !Config::of(&ctx).storage_clusters.enabled {
        return;
    }
    let storage_clusters = Api::<StorageCluster>::all(ctx.client.clone());
    let controller = Controller::new(storage_clusters, watcher::Config::default());
    reconciler::run(controller, ctx, CONTROLLER, reconcile).await;
}

/// The EtcdCluster a StorageCluster stands for, or why there is none.
pub(crate) fn desired_cluster(
    storage: &StorageCluster,
    settings: &StorageClusterDiscovery,
) -> std::result::Result<EtcdCluster, String> {
    let name = storage.name_any();
    let what = format!("StorageCluster {name}");
    let id_text = storage.storage_cluster_id.trim();
    let cluster_id = id_text.parse::<i32>().ok().filter(|id| (0..=63).contains(id)).ok_or_else(|| {
        format!(
            "{what}: storageClusterId {id_text:?} is not a whole number from 0 to 63; it is \
                 not maintained until it is"
        )
    })?;
    let address = storage.service_address.trim();
    if address.is_empty() || address.contains(char::is_whitespace) || address.contains(',') {
        return Err(format!(
            "{what}: serviceAddress {address:?} is not one etcd client address (host:port); it is \
             not maintained until it is"
        ));
    }
    let scheme = if settings.tls_secret.is_some() { "https" } else { "http" };
    let endpoint = if address.contains("://") { address.to_owned() } else { format!("{scheme}://{address}") };
    let mut cluster = EtcdCluster::new(
        &bounded_name(&format!("{NAME_PREFIX}{name}"), ""),
        EtcdClusterSpec {
            endpoints: vec![endpoint],
            tls: settings.tls_secret.as_ref().map(|secret| EtcdClientTls { secret_name: secret.clone() }),
            policy: EtcdMaintenancePolicy {
                compaction: settings.compaction_retention.as_ref().map(|retention| EtcdCompactionPolicy {
                    mode: CompactionMode::Periodic,
                    retention: retention.clone(),
                }),
                ..EtcdMaintenancePolicy::default()
            },
            job: Default::default(),
            // Left to the user, as the policy is: discovery keeps only its own fields in step.
            maintenance_windows: None,
            stateful_set: None,
            backup: None,
            partition: Some(EtcdPartition {
                fleet: settings.fleet.clone(),
                cluster_id,
                revision_scheme: RevisionScheme::Partitioned,
                max_clock_skew_ms: None,
            }),
        },
    );
    cluster.metadata = ObjectMeta {
        name: cluster.metadata.name.take(),
        namespace: Some(settings.namespace.clone()),
        labels: Some(BTreeMap::from([
            (keys::MANAGED_BY_LABEL.to_owned(), keys::MANAGED_BY.to_owned()),
            (STORAGE_CLUSTER_LABEL.to_owned(), name),
        ])),
        // No blockOwnerDeletion: that would take a finalizers rule on StorageClusters.
        owner_references: storage.controller_owner_ref(&()).map(|mut owner| {
            owner.block_owner_deletion = None;
            vec![owner]
        }),
        ..ObjectMeta::default()
    };
    Ok(cluster)
}

/// What to do about the EtcdCluster of that name as it is.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    Create,
    /// Rewrite the fields the StorageCluster decides (a JSON merge patch of the spec).
    Update(serde_json::Value),
    InStep,
    /// It exists but was not made for this StorageCluster.
    NotOurs,
}

/// The step that brings `existing` in line with `desired`.
pub fn step(desired: &EtcdCluster, existing: Option<&EtcdCluster>) -> Step {
    let Some(existing) = existing else {
        return Step::Create;
    };
    let wanted_label = desired.labels().get(STORAGE_CLUSTER_LABEL);
    if existing.labels().get(STORAGE_CLUSTER_LABEL) != wanted_label {
        return Step::NotOurs;
    }
    let (want, have) = (&desired.spec, &existing.spec);
    let partition_differs = match (&want.partition, &have.partition) {
        (Some(w), Some(h)) => {
            (&w.fleet, w.cluster_id, w.revision_scheme) != (&h.fleet, h.cluster_id, h.revision_scheme)
        }
        _ => true,
    };
    if want.endpoints == have.endpoints && want.tls == have.tls && !partition_differs {
        return Step::InStep;
    }
    let partition = want
        .partition
        .as_ref()
        .map(|p| json!({"fleet": p.fleet, "clusterId": p.cluster_id, "revisionScheme": p.revision_scheme}));
    Step::Update(json!({"spec": {
        "endpoints": want.endpoints,
        "tls": want.tls,
        "partition": partition,
    }}))
}

/// One reconciliation of one StorageCluster.
pub async fn reconcile(
    storage: Arc<StorageCluster>,
    reconciler: Arc<Reconciler<StorageCluster>>,
) -> Result<Action> {
    let ctx = &reconciler.ctx;
    let _timer = ctx.metrics.reconcile_started(CONTROLLER);
    if storage.meta().deletion_timestamp.is_some() {
        // Its EtcdCluster is its dependent: the garbage collector removes it.
        return Ok(Action::await_change());
    }
    let desired = match desired_cluster(&storage, &Config::of(ctx).storage_clusters) {
        Ok(desired) => desired,
        Err(why) => {
            tracing::warn!(storage_cluster = %storage.name_any(), %why, "not maintained");
            warn(ctx, &storage, &why).await;
            reconciler.succeeded(&storage);
            return Ok(Action::await_change());
        }
    };
    let namespace = Config::of(ctx).storage_clusters.namespace.clone();
    let name = desired.name_any();
    let api = Api::<EtcdCluster>::namespaced(ctx.client.clone(), &namespace);
    let existing =
        api.get_opt(&name).await.map_err(Error::kube(format!("get EtcdCluster {namespace}/{name}")))?;
    match step(&desired, existing.as_ref()) {
        Step::Create => {
            api.create(&PostParams::default(), &desired)
                .await
                .map_err(Error::kube(format!("create EtcdCluster {namespace}/{name}")))?;
            tracing::info!(storage_cluster = %storage.name_any(), cluster = %name, "made an EtcdCluster for a StorageCluster");
        }
        Step::Update(patch) => {
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(Error::kube(format!("update EtcdCluster {namespace}/{name}")))?;
            tracing::info!(storage_cluster = %storage.name_any(), cluster = %name, "brought an EtcdCluster in step with its StorageCluster");
        }
        Step::InStep => {}
        Step::NotOurs => {
            let why = format!(
                "StorageCluster {}: EtcdCluster {namespace}/{name} exists and was not made for it \
                 (label {STORAGE_CLUSTER_LABEL}); it is left alone and this StorageCluster is not \
                 maintained until it is renamed or removed",
                storage.name_any()
            );
            warn(ctx, &storage, &why).await;
        }
    }
    reconciler.succeeded(&storage);
    Ok(Action::requeue(ctx.config.requeue_idle))
}

async fn warn(ctx: &Context, storage: &StorageCluster, why: &str) {
    warn_source(ctx, &storage.object_ref(&()), INVALID_STORAGE_CLUSTER, why).await;
}

/// A Warning Event on a discovered source that cannot be maintained as it stands.
pub(crate) async fn warn_source(ctx: &Context, source: &ObjectReference, reason: &'static str, why: &str) {
    let event = PlannedEvent { warning: true, reason, note: why.to_owned(), related: None };
    ctx.publish_events(source, "Discover", &[event]).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn storage(name: &str, id: &str, address: &str) -> StorageCluster {
        StorageCluster {
            metadata: ObjectMeta {
                name: Some(name.into()),
                uid: Some(format!("uid-{name}")),
                ..ObjectMeta::default()
            },
            storage_cluster_id: id.into(),
            service_address: address.into(),
        }
    }

    fn settings() -> StorageClusterDiscovery {
        StorageClusterDiscovery { enabled: true, ..StorageClusterDiscovery::default() }
    }

    #[test]
    fn a_storage_cluster_becomes_a_partitioned_etcd_cluster_it_owns() {
        let cluster = desired_cluster(&storage("c1", "1", "172.30.0.122:2379"), &settings()).unwrap();
        assert_eq!(cluster.name_any(), "storagecluster-c1");
        assert_eq!(cluster.namespace().as_deref(), Some("groundskeeper"));
        assert_eq!(cluster.spec.endpoints, vec!["http://172.30.0.122:2379"]);
        let partition = cluster.spec.partition.clone().unwrap();
        assert_eq!(
            (partition.fleet.as_str(), partition.cluster_id, partition.revision_scheme),
            ("arktos", 1, RevisionScheme::Partitioned)
        );
        assert_eq!(cluster.spec.policy.compaction, None);
        let owner = &cluster.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.api_version.as_str(), owner.uid.as_str()),
            ("StorageCluster", "v1", "uid-c1")
        );
        assert_eq!(cluster.labels()[STORAGE_CLUSTER_LABEL], "c1");
        crate::etcd::policy::Policy::from_spec(&cluster.spec).expect("a valid spec");

        let tls = StorageClusterDiscovery {
            tls_secret: Some("etcd-client".into()),
            compaction_retention: Some("1h".into()),
            fleet: "tenants".into(),
            ..settings()
        };
        let cluster = desired_cluster(&storage("c2", "63", "etcd-2:2379"), &tls).unwrap();
        assert_eq!(cluster.spec.endpoints, vec!["https://etcd-2:2379"]);
        assert_eq!(cluster.spec.tls.unwrap().secret_name, "etcd-client");
        assert_eq!(cluster.spec.policy.compaction.unwrap().mode, CompactionMode::Periodic);
        // A full URL is taken as it is.
        let cluster = desired_cluster(&storage("c3", "0", "http://10.0.0.1:2379"), &settings()).unwrap();
        assert_eq!(cluster.spec.endpoints, vec!["http://10.0.0.1:2379"]);
    }

    #[test]
    fn invalid_fields_are_named() {
        for (id, address, wanted) in [
            ("64", "a:2379", "storageClusterId \"64\" is not a whole number from 0 to 63"),
            ("-1", "a:2379", "storageClusterId \"-1\""),
            ("", "a:2379", "storageClusterId \"\""),
            ("one", "a:2379", "storageClusterId \"one\""),
            ("1", "", "serviceAddress \"\" is not one etcd client address"),
            ("1", "a:2379,b:2379", "serviceAddress \"a:2379,b:2379\""),
        ] {
            let err = desired_cluster(&storage("bad", id, address), &settings()).unwrap_err();
            assert!(err.starts_with("StorageCluster bad: ") && err.contains(wanted), "{err}");
        }
    }

    #[test]
    fn only_the_fields_a_storage_cluster_decides_are_rewritten_and_only_on_our_own_object() {
        let desired = desired_cluster(&storage("c1", "1", "10.0.0.1:2379"), &settings()).unwrap();
        assert_eq!(step(&desired, None), Step::Create);
        let mut tuned = desired.clone();
        tuned.spec.policy.max_fragmented_percent = 30.0;
        tuned.spec.partition.as_mut().unwrap().max_clock_skew_ms = Some(1000);
        assert_eq!(step(&desired, Some(&tuned)), Step::InStep, "the user's tuning stays");

        let moved = desired_cluster(&storage("c1", "2", "10.0.0.9:2379"), &settings()).unwrap();
        let Step::Update(patch) = step(&moved, Some(&tuned)) else { panic!("an update") };
        assert_eq!(
            patch,
            json!({"spec": {
                "endpoints": ["http://10.0.0.9:2379"],
                "tls": null,
                "partition": {"fleet": "arktos", "clusterId": 2, "revisionScheme": "Partitioned"},
            }})
        );

        let mut foreign = tuned.clone();
        foreign.metadata.labels = None;
        assert_eq!(step(&desired, Some(&foreign)), Step::NotOurs);
    }
}
