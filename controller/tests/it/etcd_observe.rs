//! The controller's observation of REAL etcd clusters (3.4 and 3.5, three members on loopback):
//! sizes, leader, learners and health as etcd reports them, members found through the member
//! list, a killed member reported with its endpoint, client TLS, and the decision taken on what
//! was observed. Skipped (with a message) where the etcd binary is missing, except under CI.

use groundskeeper_api::etcd_cluster::EtcdClusterSpec;
use groundskeeper_api::maintenance_task::TaskType;
use groundskeeper_controller::conditions::ConditionStatus;
use groundskeeper_controller::etcd::decide::{DEGRADED, Input, Observed, decide};
use groundskeeper_controller::etcd::observe::{ClientTls, ObservedMember, cluster_revision, observe_cluster};
use groundskeeper_controller::etcd::policy::Policy;
use groundskeeper_e2e::etcd_cluster::{ClusterOptions, EtcdCluster, EtcdVersion, etcd_or_skip};
use groundskeeper_stores::etcd::plan::fragmented_percent;

const MB: i64 = 1_000_000;

fn install_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

async fn start(version: EtcdVersion, client_tls: bool) -> Option<EtcdCluster> {
    install_provider();
    let binary = etcd_or_skip(version)?;
    let options = ClusterOptions { client_tls, ..Default::default() };
    Some(EtcdCluster::start(&binary, options).await.expect("cluster starts"))
}

fn decide_on(
    endpoints: &[String],
    members: Vec<ObservedMember>,
) -> groundskeeper_controller::etcd::decide::Decision {
    let spec: EtcdClusterSpec = serde_json::from_value(serde_json::json!({
        "endpoints": endpoints,
        "policy": {"minDefragBytes": MB, "maxFragmentedPercent": 45},
    }))
    .unwrap();
    let policy = Policy::from_spec(&spec).unwrap();
    decide(&Input {
        cluster: "real",
        generation: Some(1),
        policy: Ok(&policy),
        enabled: true,
        observed: &Observed::Members(members),
        tasks: &[],
        previous: &Default::default(),
        collisions: &[],
        suspensions: &[],
        windows: None,
        now: jiff::Timestamp::now(),
    })
}

async fn observes_sizes_leader_and_health(version: EtcdVersion) {
    let Some(cluster) = start(version, false).await else {
        return;
    };
    cluster.churn(4 * MB).await.expect("churn");
    // Only the first member in the spec: the others come from the member list.
    let endpoints = vec![cluster.client_urls()[0].clone()];
    let observed = observe_cluster(&endpoints, None).await;
    let states = cluster.states().await.unwrap();

    assert_eq!(observed.len(), 3, "{observed:#?}");
    for state in &states {
        let member = observed
            .iter()
            .find(|m| m.member.id == state.id)
            .unwrap_or_else(|| panic!("member {} not observed", state.name));
        assert_eq!(member.member.name, state.name);
        assert_eq!(member.endpoint, state.client_url);
        assert!(!member.member.is_learner);
        assert_eq!(member.member.unhealthy_because(), None, "{member:?}");
        let status = member.member.status.as_ref().unwrap();
        assert_eq!(status.leader, state.leader);
        // Sizes move with every write; the churn is over, so they agree closely.
        assert!(status.db_size >= 4 * MB, "{status:?}");
        // The churn guarantees half of what it overwrote shows as free pages: at least the
        // 45 % the decision below acts on, not necessarily more than half of the db.
        assert!(fragmented_percent(status) >= 45.0, "fragmented by the churn: {status:?}");
    }
    assert!(cluster_revision(&observed).unwrap() >= states[0].revision);

    let decision = decide_on(&endpoints, observed);
    let task = decision.submit.expect("every member is over 1 MB and 45 %");
    assert_eq!(task.task_type, TaskType::Defragment);
    assert_eq!(decision.status.members.iter().filter(|m| m.leader).count(), 1);
    assert_eq!(decision.status.healthy_members, Some(3));
}

#[tokio::test]
async fn observes_sizes_leader_and_health_etcd_3_4() {
    observes_sizes_leader_and_health(EtcdVersion::V3_4).await;
}

#[tokio::test]
async fn observes_sizes_leader_and_health_etcd_3_5() {
    observes_sizes_leader_and_health(EtcdVersion::V3_5).await;
}

#[tokio::test]
async fn a_killed_member_is_unhealthy_with_its_endpoint_and_blocks_tasks() {
    let Some(mut cluster) = start(EtcdVersion::V3_4, false).await else {
        return;
    };
    cluster.churn(2 * MB).await.expect("churn");
    let endpoints = cluster.client_urls();
    cluster.kill(2);
    let observed = observe_cluster(&endpoints, None).await;
    assert_eq!(observed.len(), 3, "{observed:#?}");
    let dead = observed
        .iter()
        .find(|m| m.endpoint == endpoints[2])
        .unwrap_or_else(|| panic!("no member observed at {}: {observed:#?}", endpoints[2]));
    assert_eq!(dead.member.name, cluster.name(2));
    assert!(dead.member.status.is_err(), "{dead:?}");

    let decision = decide_on(&endpoints, observed);
    assert_eq!(decision.submit, None);
    let degraded = decision.conditions.iter().find(|c| c.type_ == DEGRADED).unwrap();
    assert_eq!(degraded.status, ConditionStatus::True);
    assert!(degraded.message.contains(&endpoints[2]), "{}", degraded.message);
    assert_eq!(decision.status.healthy_members, Some(2));
}

#[tokio::test]
async fn an_endpoint_that_answers_nothing_is_reported_as_such() {
    install_provider();
    let closed = groundskeeper_e2e::net::ClosedPort::new();
    let endpoint = closed.url();
    let observed = observe_cluster(std::slice::from_ref(&endpoint), None).await;
    assert_eq!(observed.len(), 1);
    assert_eq!(observed[0].endpoint, endpoint);
    assert!(observed[0].member.status.is_err());
}

#[tokio::test]
async fn client_tls_from_the_secret_files_is_used() {
    let Some(cluster) = start(EtcdVersion::V3_4, true).await else {
        return;
    };
    let files = cluster.tls().expect("TLS cluster");
    let read = |path: &std::path::Path| std::fs::read(path).unwrap();
    let tls = ClientTls { ca: read(&files.ca), cert: read(&files.client_cert), key: read(&files.client_key) };
    let endpoints = cluster.client_urls();
    assert!(endpoints.iter().all(|e| e.starts_with("https://")));
    let observed = observe_cluster(&endpoints, Some(&tls)).await;
    assert_eq!(observed.len(), 3);
    assert!(observed.iter().all(|m| m.member.unhealthy_because().is_none()), "{observed:#?}");

    // Without the client certificate the members refuse the connection.
    let without = observe_cluster(&endpoints, None).await;
    assert!(without.iter().all(|m| m.member.status.is_err()), "{without:#?}");
}
