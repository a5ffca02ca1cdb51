//! etcd-operator discovery (`--discover-etcd-operator-clusters`): every `EtcdCluster` of SIG
//! etcd's operator (`operator.etcd.io/v1alpha1`) is looked after as a groundskeeper EtcdCluster,
//! through the same path as any other. The operator runs and scales its members; it neither
//! compacts, defragments nor snapshots them.
//!
//! For operator EtcdCluster `<name>` in namespace N (one the controller looks after), the
//! controller makes EtcdCluster `etcd-operator-<name>` in N, labelled with the source's name and
//! owned by it (deleting the source deletes ours, its tasks and their Jobs). It keeps two fields
//! in step with the source and nothing else:
//!
//! * `spec.endpoints`: the operator's client Service,
//!   `<scheme>://<name>.N.svc.cluster.local:<port>`: the headless Service the operator names
//!   after the cluster, which resolves to the member pods however the operator makes them (a
//!   StatefulSet or one Pod per member), under the name its certificates are issued for by
//!   default. https when `spec.tls` is set, port 2379, unless `spec.etcdOptions` sets
//!   `--listen-client-urls` (its first address off loopback decides). The members are listed
//!   through it, and those that did not answer there are reached on the client URLs they
//!   advertise;
//! * `spec.tls`: the client certificate Secret the operator makes, `<name>-client-tls`, when the
//!   members serve https.
//!
//! The rest of the spec (policy, Job limits, windows) starts from the controller's flags and is
//! the user's afterwards. An EtcdCluster of that name not made for the source is never touched.
//! A source whose fields give no client address gets a Warning Event naming the field, and no
//! EtcdCluster; fixing it is enough.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};

use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Api, Resource, ResourceExt};
use serde_json::json;

use groundskeeper_protocol::keys;

use super::config::{Config, EtcdOperatorDiscovery};
use crate::jobs::bounded_name;
use crate::runtime::context::Context;
use crate::runtime::error::{Error, Result};
use crate::runtime::reconciler::{self, Reconciler};
use crate::runtime::scope;
use groundskeeper_api::etcd_cluster::{
    CompactionMode, EtcdClientTls, EtcdCluster, EtcdClusterSpec, EtcdCompactionPolicy, EtcdMaintenancePolicy,
};
use groundskeeper_api::official_etcd_cluster::{
    DEFAULT_CLIENT_PORT, GROUP, LISTEN_CLIENT_URLS, OperatorEtcdCluster,
};

/// This controller's name in metrics and logs.
pub(crate) const CONTROLLER: &str = "etcd-operator-clusters";
/// Label on an EtcdCluster made for an etcd-operator EtcdCluster: the source's name.
pub(crate) const SOURCE_LABEL: &str = "groundskeeper.dev/etcd-operator-cluster";
/// Prefix of the EtcdCluster's name.
pub(crate) const NAME_PREFIX: &str = "etcd-operator-";
/// Warning Event reason on a source that cannot be maintained.
pub(crate) const INVALID_SOURCE: &str = "InvalidEtcdOperatorCluster";

/// Runs the discovery in every namespace looked after until the watch streams end (returns at
/// once when it is off).
pub async fn run(ctx: Arc<Context>) {
    if !Config::of(&ctx).etcd_operator_clusters.enabled {
        return;
    }
    scope::in_each_namespace(&ctx, |namespace| run_in(ctx.clone(), namespace)).await;
}

async fn run_in(ctx: Arc<Context>, namespace: Option<String>) {
    let sources = scope::api::<OperatorEtcdCluster>(&ctx.client, namespace.as_deref());
    let ours = scope::api::<EtcdCluster>(&ctx.client, namespace.as_deref());
    // One of ours changed or deleted by hand: its source puts it back at once.
    let controller = Controller::new(sources, watcher::Config::default()).watches(
        ours,
        watcher::Config::default().labels(SOURCE_LABEL),
        |cluster: EtcdCluster| {
            let source = cluster.labels().get(SOURCE_LABEL)?;
            Some(ObjectRef::new(source).within(&cluster.namespace()?))
        },
    );
    reconciler::run(controller, ctx, CONTROLLER, reconcile).await;
}

/// Where the members serve clients, from the source's fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ClientAddress {
    pub https: bool,
    pub port: u16,
}

/// The scheme and port of the members' client listener: `--listen-client-urls` in
/// `spec.etcdOptions` when set, else the operator's default.
pub(crate) fn client_address(source: &OperatorEtcdCluster) -> std::result::Result<ClientAddress, String> {
    match listen_option(&source.spec.etcd_options) {
        Some((index, urls)) => listened_address(&format!("spec.etcdOptions[{index}]"), urls),
        None => Ok(ClientAddress { https: source.spec.tls.is_some(), port: DEFAULT_CLIENT_PORT }),
    }
}

/// The index and value of the last `--listen-client-urls` (etcd reads the last of a repeated
/// flag), written `--flag=value` or `--flag value` as the operator accepts them.
fn listen_option(options: &[String]) -> Option<(usize, &str)> {
    options.iter().enumerate().rev().find_map(|(index, option)| {
        let (flag, value) = option.trim().split_once(['=', ' '])?;
        (flag == LISTEN_CLIENT_URLS).then(|| (index, value.trim()))
    })
}

/// Scheme and port of the first of `urls` (comma-separated) that is not on loopback.
fn listened_address(field: &str, urls: &str) -> std::result::Result<ClientAddress, String> {
    let parsed: Vec<(bool, &str, &str)> = urls
        .split(',')
        .map(|url| parse_listen_url(url.trim()).ok_or(url.trim()))
        .collect::<std::result::Result<_, _>>()
        .map_err(|url| {
            format!("{field}: {LISTEN_CLIENT_URLS} {url:?} is not an http:// or https:// URL with a port")
        })?;
    let (https, _, port) = parsed.into_iter().find(|(_, host, _)| !is_loopback(host)).ok_or_else(|| {
        format!(
            "{field}: {LISTEN_CLIENT_URLS} {urls:?} listens on loopback only: no client reaches the members"
        )
    })?;
    let port = port
        .parse::<u16>()
        .ok()
        .filter(|p| *p > 0)
        .ok_or_else(|| format!("{field}: port {port:?} is not a port"))?;
    Ok(ClientAddress { https, port })
}

/// `(https, host, port)` of `scheme://host:port[/]`.
fn parse_listen_url(url: &str) -> Option<(bool, &str, &str)> {
    let (scheme, rest) = url.split_once("://")?;
    let https = match scheme {
        "http" => false,
        "https" => true,
        _ => return None,
    };
    let (host, port) = rest.trim_end_matches('/').rsplit_once(':')?;
    (!host.is_empty() && !port.is_empty()).then_some((https, host, port))
}

fn is_loopback(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host == "localhost" || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Whether `name` can name a Service (a DNS-1035 label), as the operator's client Service must.
fn is_service_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    (1..=63).contains(&bytes.len())
        && bytes[0].is_ascii_lowercase()
        && bytes.iter().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && !name.ends_with('-')
}

/// The EtcdCluster a source stands for, or why there is none.
pub(crate) fn desired_cluster(
    source: &OperatorEtcdCluster,
    settings: &EtcdOperatorDiscovery,
) -> std::result::Result<EtcdCluster, String> {
    let name = source.name_any();
    let namespace = source.namespace().unwrap_or_default();
    let what = format!("EtcdCluster {namespace}/{name} ({GROUP})");
    let invalid = |why: String| format!("{what}: {why}; it is not maintained until it is fixed");
    if !is_service_name(&name) {
        return Err(invalid(format!(
            "metadata.name {name:?} cannot name the operator's client Service (a DNS label: at most \
             63 lowercase letters, digits and '-', starting with a letter)"
        )));
    }
    let address = client_address(source).map_err(invalid)?;
    if address.https && source.spec.tls.is_none() {
        return Err(invalid(format!(
            "spec.tls is absent but spec.etcdOptions has the members serve https \
             ({LISTEN_CLIENT_URLS}): without spec.tls the operator makes no client certificate \
             (Secret {})",
            OperatorEtcdCluster::client_tls_secret(&name)
        )));
    }
    let scheme = if address.https { "https" } else { "http" };
    let mut cluster = EtcdCluster::new(
        &bounded_name(&format!("{NAME_PREFIX}{name}"), ""),
        EtcdClusterSpec {
            endpoints: vec![format!("{scheme}://{name}.{namespace}.svc.cluster.local:{}", address.port)],
            tls: address
                .https
                .then(|| EtcdClientTls { secret_name: OperatorEtcdCluster::client_tls_secret(&name) }),
            policy: EtcdMaintenancePolicy {
                compaction: settings.compaction_retention.as_ref().map(|retention| EtcdCompactionPolicy {
                    mode: CompactionMode::Periodic,
                    retention: retention.clone(),
                }),
                ..EtcdMaintenancePolicy::default()
            },
            job: Default::default(),
            backup: None,
            partition: None,
            maintenance_windows: None,
            stateful_set: None,
        },
    );
    cluster.metadata = ObjectMeta {
        name: cluster.metadata.name.take(),
        namespace: Some(namespace),
        labels: Some(BTreeMap::from([
            (keys::MANAGED_BY_LABEL.to_owned(), keys::MANAGED_BY.to_owned()),
            (SOURCE_LABEL.to_owned(), name),
        ])),
        owner_references: Some(vec![owner_reference(source)]),
        ..ObjectMeta::default()
    };
    Ok(cluster)
}

/// The source as owner, for garbage collection only: not its controller (the operator does
/// not manage our object, groundskeeper does), and without blockOwnerDeletion (that would take a
/// finalizers rule on the operator's resource).
fn owner_reference(
    source: &OperatorEtcdCluster,
) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
    let mut owner = source.owner_ref(&()).unwrap_or_default();
    owner.controller = Some(false);
    owner.block_owner_deletion = None;
    owner
}

/// What to do about the EtcdCluster of that name as it is.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Step {
    Create,
    /// Rewrite the fields the source decides (a JSON merge patch of the spec).
    Update(serde_json::Value),
    /// In step already.
    Keep,
    /// It exists but was not made for this source.
    NotOurs,
}

/// The step that brings `existing` in line with `desired`: only endpoints and TLS are compared.
pub(crate) fn step(desired: &EtcdCluster, existing: Option<&EtcdCluster>) -> Step {
    let Some(existing) = existing else {
        return Step::Create;
    };
    if existing.labels().get(SOURCE_LABEL) != desired.labels().get(SOURCE_LABEL) {
        return Step::NotOurs;
    }
    let (want, have) = (&desired.spec, &existing.spec);
    if want.endpoints == have.endpoints && want.tls == have.tls {
        return Step::Keep;
    }
    Step::Update(json!({"spec": {"endpoints": want.endpoints, "tls": want.tls}}))
}

/// One reconciliation of one source.
pub async fn reconcile(
    source: Arc<OperatorEtcdCluster>,
    reconciler: Arc<Reconciler<OperatorEtcdCluster>>,
) -> Result<Action> {
    let ctx = &reconciler.ctx;
    let _timer = ctx.metrics.reconcile_started(CONTROLLER);
    if source.meta().deletion_timestamp.is_some() {
        // Ours is its dependent: the garbage collector removes it.
        return Ok(Action::await_change());
    }
    let desired = match desired_cluster(&source, &Config::of(ctx).etcd_operator_clusters) {
        Ok(desired) => desired,
        Err(why) => {
            tracing::warn!(source = %reconciler::describe(source.as_ref()), %why, "not maintained");
            warn(ctx, &source, &why).await;
            reconciler.succeeded(&source);
            return Ok(Action::await_change());
        }
    };
    bring_in_step(ctx, &source, &desired).await?;
    reconciler.succeeded(&source);
    Ok(Action::requeue(ctx.config.requeue_idle))
}

/// Creates or patches ours, or tells that the name is taken.
async fn bring_in_step(ctx: &Context, source: &OperatorEtcdCluster, desired: &EtcdCluster) -> Result<()> {
    let (namespace, name) = (desired.namespace().unwrap_or_default(), desired.name_any());
    let api = Api::<EtcdCluster>::namespaced(ctx.client.clone(), &namespace);
    let existing =
        api.get_opt(&name).await.map_err(Error::kube(format!("get EtcdCluster {namespace}/{name}")))?;
    let source_name = source.name_any();
    match step(desired, existing.as_ref()) {
        Step::Create => {
            api.create(&PostParams::default(), desired)
                .await
                .map_err(Error::kube(format!("create EtcdCluster {namespace}/{name}")))?;
            tracing::info!(%namespace, source = %source_name, cluster = %name, "made an EtcdCluster for an etcd-operator EtcdCluster");
        }
        Step::Update(patch) => {
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(Error::kube(format!("update EtcdCluster {namespace}/{name}")))?;
            tracing::info!(%namespace, source = %source_name, cluster = %name, "brought an EtcdCluster in step with its etcd-operator EtcdCluster");
        }
        Step::Keep => {}
        Step::NotOurs => {
            let why = format!(
                "EtcdCluster {namespace}/{source_name} ({GROUP}): EtcdCluster {namespace}/{name} \
                 (groundskeeper.dev) exists and was not made for it (label {SOURCE_LABEL}); it is \
                 left alone and this cluster is not maintained until it is renamed or removed"
            );
            warn(ctx, source, &why).await;
        }
    }
    Ok(())
}

async fn warn(ctx: &Context, source: &OperatorEtcdCluster, why: &str) {
    super::discovery::warn_source(ctx, &source.object_ref(&()), INVALID_SOURCE, why).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use groundskeeper_api::official_etcd_cluster::{OperatorEtcdClusterSpec, OperatorTls};

    fn source(name: &str, tls: bool, options: &[&str]) -> OperatorEtcdCluster {
        let mut source = OperatorEtcdCluster::new(
            name,
            OperatorEtcdClusterSpec {
                size: Some(3),
                version: Some("v3.5.21".into()),
                tls: tls.then(OperatorTls::default),
                etcd_options: options.iter().map(|o| (*o).to_owned()).collect(),
            },
        );
        source.metadata.namespace = Some("etcd".into());
        source.metadata.uid = Some(format!("uid-{name}"));
        source
    }

    fn settings() -> EtcdOperatorDiscovery {
        EtcdOperatorDiscovery { enabled: true, ..EtcdOperatorDiscovery::default() }
    }

    #[test]
    fn a_source_becomes_an_etcd_cluster_beside_it_reached_on_its_client_service() {
        // (tls, etcdOptions, endpoint, client TLS Secret)
        let cases: [(bool, &[&str], &str, Option<&str>); 6] = [
            (false, &[], "http://main.etcd.svc.cluster.local:2379", None),
            (true, &[], "https://main.etcd.svc.cluster.local:2379", Some("main-client-tls")),
            (
                true,
                &["--listen-client-urls=http://0.0.0.0:2379"],
                "http://main.etcd.svc.cluster.local:2379",
                None,
            ),
            (
                true,
                &["--listen-client-urls=https://127.0.0.1:2379,https://0.0.0.0:2479"],
                "https://main.etcd.svc.cluster.local:2479",
                Some("main-client-tls"),
            ),
            (
                false,
                &["--listen-client-urls http://0.0.0.0:1", "--auto-compaction-retention=1h"],
                "http://main.etcd.svc.cluster.local:1",
                None,
            ),
            // etcd reads the last of a repeated flag.
            (
                false,
                &["--listen-client-urls=http://0.0.0.0:1", "--listen-client-urls=http://[::]:2"],
                "http://main.etcd.svc.cluster.local:2",
                None,
            ),
        ];
        for (tls, options, endpoint, secret) in cases {
            let cluster = desired_cluster(&source("main", tls, options), &settings()).unwrap();
            assert_eq!(cluster.spec.endpoints, [endpoint], "{tls} {options:?}");
            assert_eq!(cluster.spec.tls.map(|t| t.secret_name).as_deref(), secret, "{tls} {options:?}");
        }
        let cluster = desired_cluster(&source("main", false, &[]), &settings()).unwrap();
        assert_eq!(cluster.name_any(), "etcd-operator-main");
        assert_eq!(cluster.namespace().as_deref(), Some("etcd"));
        assert_eq!(cluster.labels()[SOURCE_LABEL], "main");
        assert_eq!(cluster.labels()[keys::MANAGED_BY_LABEL], keys::MANAGED_BY);
        let owner = &cluster.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.api_version.as_str(), owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str()),
            ("operator.etcd.io/v1alpha1", "EtcdCluster", "main", "uid-main")
        );
        assert_eq!((owner.controller, owner.block_owner_deletion), (Some(false), None));
        assert_eq!((cluster.spec.partition.clone(), cluster.spec.policy.compaction.clone()), (None, None));
        crate::etcd::policy::Policy::from_spec(&cluster.spec).expect("a valid spec");

        let compacting = EtcdOperatorDiscovery { compaction_retention: Some("1h".into()), ..settings() };
        let cluster = desired_cluster(&source("main", true, &[]), &compacting).unwrap();
        assert_eq!(cluster.spec.policy.compaction.unwrap().mode, CompactionMode::Periodic);
        crate::etcd::policy::Policy::from_spec(
            &desired_cluster(&source("main", true, &[]), &settings()).unwrap().spec,
        )
        .expect("a valid https spec");

        let long = "a".repeat(63);
        let cluster = desired_cluster(&source(&long, false, &[]), &settings()).unwrap();
        assert!(cluster.name_any().len() <= 63 && cluster.name_any().starts_with(NAME_PREFIX));
    }

    #[test]
    fn a_source_that_gives_no_client_address_is_named_with_its_field() {
        let cases: [(&str, bool, &[&str], &str); 7] = [
            ("Main", false, &[], "metadata.name \"Main\" cannot name the operator's client Service"),
            ("a.b", false, &[], "metadata.name \"a.b\""),
            (
                "main",
                false,
                &["--listen-client-urls=unix://etcd:0"],
                "spec.etcdOptions[0]: --listen-client-urls \"unix://etcd:0\" is not an http:// or https:// URL with a port",
            ),
            (
                "main",
                false,
                &["--name=x", "--listen-client-urls=http://0.0.0.0"],
                "spec.etcdOptions[1]: --listen-client-urls \"http://0.0.0.0\"",
            ),
            (
                "main",
                false,
                &["--listen-client-urls=http://127.0.0.1:2379,http://localhost:2379"],
                "listens on loopback only",
            ),
            (
                "main",
                false,
                &["--listen-client-urls=http://0.0.0.0:99999"],
                "spec.etcdOptions[0]: port \"99999\" is not a port",
            ),
            (
                "main",
                false,
                &["--listen-client-urls=https://0.0.0.0:2379"],
                "spec.tls is absent but spec.etcdOptions has the members serve https (--listen-client-urls): without spec.tls the operator makes no client certificate (Secret main-client-tls)",
            ),
        ];
        for (name, tls, options, wanted) in cases {
            let err = desired_cluster(&source(name, tls, options), &settings()).unwrap_err();
            assert!(
                err.starts_with(&format!("EtcdCluster etcd/{name} (operator.etcd.io): "))
                    && err.contains(wanted),
                "{wanted}: {err}"
            );
        }
    }

    #[test]
    fn only_endpoints_and_tls_are_kept_in_step_and_only_on_our_own_object() {
        let desired = desired_cluster(&source("main", false, &[]), &settings()).unwrap();
        let mut tuned = desired.clone();
        tuned.spec.policy.max_fragmented_percent = 30.0;
        tuned.spec.policy.allow_single_member = true;
        let mut foreign = tuned.clone();
        foreign.metadata.labels = None;
        let mut other_source = tuned.clone();
        other_source.metadata.labels.as_mut().unwrap().insert(SOURCE_LABEL.into(), "other".into());
        let with_tls = desired_cluster(&source("main", true, &[]), &settings()).unwrap();
        let cases = [
            ("missing", &desired, None, Step::Create),
            ("the user's tuning stays", &desired, Some(&tuned), Step::Keep),
            ("no label", &desired, Some(&foreign), Step::NotOurs),
            ("another source's", &desired, Some(&other_source), Step::NotOurs),
            (
                "TLS turned on",
                &with_tls,
                Some(&tuned),
                Step::Update(json!({"spec": {
                    "endpoints": ["https://main.etcd.svc.cluster.local:2379"],
                    "tls": {"secretName": "main-client-tls"},
                }})),
            ),
            (
                "TLS turned off",
                &desired,
                Some(&with_tls),
                Step::Update(
                    json!({"spec": {"endpoints": ["http://main.etcd.svc.cluster.local:2379"], "tls": null}}),
                ),
            ),
        ];
        for (what, desired, existing, wanted) in cases {
            assert_eq!(step(desired, existing), wanted, "{what}");
        }
    }
}
