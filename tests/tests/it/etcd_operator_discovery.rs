//! SIG etcd's etcd-operator clusters (`operator.etcd.io/v1alpha1` EtcdClusters) discovered as
//! groundskeeper EtcdClusters on the in-memory Kubernetes API, with the controllers unchanged and
//! the RBAC of `manifests/` plus `manifests/addons/etcd-operator-discovery/`: made beside the
//! source and owned by it, reached on the operator's client Service, their endpoints and TLS kept
//! in step with the source while the rest of the spec stays as the user left it; a name taken by
//! someone else is left alone; a source that gives no client address is told; a deleted source
//! takes its EtcdCluster. No etcd is needed: what is checked is what the discovery writes.

use std::time::Duration;

use groundskeeper_api::EtcdCluster;
use groundskeeper_controller::Config;
use groundskeeper_controller::etcd::config::{Config as EtcdConfig, EtcdOperatorDiscovery};
use groundskeeper_e2e::apiserver::rbac::controller_grants_with_etcd_operator_discovery;
use groundskeeper_e2e::apiserver::{ApiServer, PatchFormat, ResourceId};
use serde_json::{Value, json};

use crate::harness::{Controllers, Part, api_server, etcd_clusters, wait_until};

/// Guards against a scenario that never converges; not a performance bound.
const GUARD: Duration = Duration::from_secs(30);
const NAMESPACE: &str = "etcd";
/// The label naming the source, and the Warning's reason, as docs/protocol.md and
/// docs/etcd-maintenance.md give them.
const SOURCE_LABEL: &str = "groundskeeper.dev/etcd-operator-cluster";
const INVALID_SOURCE: &str = "InvalidEtcdOperatorCluster";

fn operator_clusters() -> ResourceId {
    ResourceId::new("operator.etcd.io", "v1alpha1", "etcdclusters")
}

fn operator_cluster(name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "operator.etcd.io/v1alpha1", "kind": "EtcdCluster",
        "metadata": { "name": name, "namespace": NAMESPACE },
        "spec": spec,
    })
}

fn ours(server: &ApiServer, source: &str) -> Option<EtcdCluster> {
    server.get_as(Some(NAMESPACE), &format!("etcd-operator-{source}"))
}

fn warned(server: &ApiServer, about: &str, saying: &str) -> bool {
    server.list(&ResourceId::new("events.k8s.io", "v1", "events"), Some(NAMESPACE)).iter().any(|e| {
        e["regarding"]["name"] == about
            && e["regarding"]["apiVersion"] == "operator.etcd.io/v1alpha1"
            && e["type"] == "Warning"
            && e["reason"] == INVALID_SOURCE
            && e["note"].as_str().is_some_and(|note| note.contains(saying))
    })
}

async fn wait_for(what: &str, server: &ApiServer, done: impl FnMut() -> bool) {
    let diagnose = || format!("{:#?}", server.list(&etcd_clusters(), Some(NAMESPACE)));
    wait_until(what, GUARD, Duration::from_millis(50), done, diagnose).await;
}

/// The whole life of a discovered cluster, and the sources that are not maintained.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_operator_clusters_are_discovered_kept_in_step_and_go_with_their_source() {
    let server = api_server(controller_grants_with_etcd_operator_discovery()).await;
    let source = server
        .create(
            &operator_clusters(),
            Some(NAMESPACE),
            operator_cluster("main", json!({"size": 3, "version": "v3.5.21"})),
        )
        .unwrap();
    // https without spec.tls: the operator makes no client certificate.
    let broken = json!({"size": 1, "version": "v3.5.21", "etcdOptions": ["--listen-client-urls=https://0.0.0.0:2379"]});
    server.create(&operator_clusters(), Some(NAMESPACE), operator_cluster("broken", broken)).unwrap();
    // The name of the EtcdCluster "taken" stands for is someone else's.
    let foreign = json!({
        "apiVersion": "groundskeeper.dev/v1alpha1", "kind": "EtcdCluster",
        "metadata": { "name": "etcd-operator-taken", "namespace": NAMESPACE },
        "spec": { "endpoints": ["http://elsewhere:2379"], "policy": { "maxFragmentedPercent": 20 } },
    });
    let foreign = server.create(&etcd_clusters(), Some(NAMESPACE), foreign).unwrap();
    server
        .create(&operator_clusters(), Some(NAMESPACE), operator_cluster("taken", json!({"size": 3})))
        .unwrap();

    let config = Config {
        etcd: EtcdConfig {
            etcd_operator_clusters: EtcdOperatorDiscovery {
                enabled: true,
                ..EtcdOperatorDiscovery::default()
            },
            ..EtcdConfig::default()
        },
        ..Config::default()
    };
    let _controllers = Controllers::start(&server, config, &[Part::Etcd]);

    // Made beside its source, owned by it (not as its controller), labelled with its name.
    wait_for("main's EtcdCluster made", &server, || ours(&server, "main").is_some()).await;
    let main = ours(&server, "main").unwrap();
    assert_eq!(main.spec.endpoints, ["http://main.etcd.svc.cluster.local:2379"]);
    assert_eq!(main.spec.tls, None);
    assert_eq!(main.metadata.labels.as_ref().unwrap()[SOURCE_LABEL], "main");
    let owner = &main.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.api_version.as_str(), owner.kind.as_str(), owner.name.as_str()),
        ("operator.etcd.io/v1alpha1", "EtcdCluster", "main")
    );
    assert_eq!(Some(owner.uid.as_str()), source["metadata"]["uid"].as_str());
    assert_eq!(owner.controller, Some(false));

    // Not maintained, and told: the broken source and the one whose name is taken.
    wait_for("a Warning about the broken source", &server, || {
        warned(&server, "broken", "spec.tls is absent but spec.etcdOptions has the members serve https")
    })
    .await;
    wait_for("a Warning about the taken name", &server, || {
        warned(
            &server,
            "taken",
            "EtcdCluster etcd/etcd-operator-taken (groundskeeper.dev) exists and was not made for it",
        )
    })
    .await;
    assert!(ours(&server, "broken").is_none());
    // Its spec and metadata are as its maker left them (its status is the EtcdCluster controller's).
    let untouched = |still: &Value| {
        still["spec"] == foreign["spec"]
            && ["labels", "ownerReferences", "generation"]
                .iter()
                .all(|k| still["metadata"][k] == foreign["metadata"][k])
    };
    let still = server.get(&etcd_clusters(), Some(NAMESPACE), "etcd-operator-taken").unwrap();
    assert!(untouched(&still), "{still:#}");

    // The user tunes the policy; the source turns TLS on: endpoints and TLS follow, the policy stays.
    let tuned = json!({"spec": {"policy": {"maxFragmentedPercent": 30, "checkInterval": "1h"}}});
    server
        .patch(&etcd_clusters(), Some(NAMESPACE), "etcd-operator-main", PatchFormat::Merge, &tuned, false)
        .unwrap();
    let tls = json!({"spec": {"tls": {"provider": "auto"}}});
    server.patch(&operator_clusters(), Some(NAMESPACE), "main", PatchFormat::Merge, &tls, false).unwrap();
    wait_for("main's EtcdCluster over TLS", &server, || {
        ours(&server, "main").is_some_and(|c| {
            c.spec.endpoints == ["https://main.etcd.svc.cluster.local:2379"]
                && c.spec.tls.is_some_and(|t| t.secret_name == "main-client-tls")
        })
    })
    .await;
    let main = ours(&server, "main").unwrap();
    assert_eq!(
        (main.spec.policy.max_fragmented_percent, main.spec.policy.check_interval.as_str()),
        (30.0, "1h"),
        "the user's policy is left alone"
    );

    // Endpoints edited by hand are the source's: put back.
    let moved = json!({"spec": {"endpoints": ["http://somewhere:2379"]}});
    server
        .patch(&etcd_clusters(), Some(NAMESPACE), "etcd-operator-main", PatchFormat::Merge, &moved, false)
        .unwrap();
    wait_for("main's endpoints put back", &server, || {
        ours(&server, "main")
            .is_some_and(|c| c.spec.endpoints == ["https://main.etcd.svc.cluster.local:2379"])
    })
    .await;

    // The broken source fixed: maintained.
    let fixed = json!({"spec": {"tls": {"provider": "auto"}}});
    server.patch(&operator_clusters(), Some(NAMESPACE), "broken", PatchFormat::Merge, &fixed, false).unwrap();
    wait_for("broken's EtcdCluster made once fixed", &server, || {
        ours(&server, "broken")
            .is_some_and(|c| c.spec.endpoints == ["https://broken.etcd.svc.cluster.local:2379"])
    })
    .await;

    // Deleting the source deletes ours (its dependent); the foreign one stays.
    server.delete(&operator_clusters(), Some(NAMESPACE), "main").unwrap();
    wait_for("main's EtcdCluster gone", &server, || ours(&server, "main").is_none()).await;
    let still = server.get(&etcd_clusters(), Some(NAMESPACE), "etcd-operator-taken").unwrap();
    assert!(untouched(&still), "{still:#}");
}
