//! `AgentClient` against the agent stand-in: the calls the controller's ring observer and the
//! cleanup runner make, and how failures are classified.

use std::time::Duration;

use groundskeeper_e2e::scylla_agent::cluster::{Cluster, Strategy};
use groundskeeper_e2e::scylla_agent::{AgentSpec, KeyspaceKind, ScyllaAgent};
use groundskeeper_stores::scylla::agent::{
    AgentClient, AgentConfig, AgentError, KeyspaceType, Replication, TaskState,
};
use groundskeeper_stores::scylla::token::AuthToken;

fn client(agent: &ScyllaAgent, token: &str, ca: bool) -> AgentClient {
    let _ = rustls::crypto::ring::default_provider().install_default();
    AgentClient::new(AgentConfig {
        host: agent.host(),
        port: agent.port(),
        token: AuthToken::new(token).unwrap(),
        ca_pem: ca.then(|| agent.ca_pem().as_bytes().to_vec()),
        request_timeout: Duration::from_secs(10),
    })
    .unwrap()
}

#[tokio::test]
async fn reads_the_ring_and_node_tokens() {
    let agent = ScyllaAgent::start(
        AgentSpec::default().ring(&["9", "-3", "4"]).node("10.0.0.1", &["9", "-3"]).node("10.0.0.2", &["4"]),
    )
    .await;
    let client = client(&agent, &agent.token(), true);

    assert_eq!(client.tokens().await.unwrap(), ["9", "-3", "4"], "Scylla's order, not sorted");
    assert_eq!(client.node_tokens("10.0.0.1").await.unwrap(), ["9", "-3"]);
    assert!(client.node_tokens("10.0.0.3").await.unwrap().is_empty(), "bootstrapping");

    agent.set_ring(vec!["1".into(), "2".into()]);
    agent.set_node_tokens("10.0.0.3", vec!["2".into()]);
    assert_eq!(client.tokens().await.unwrap(), ["1", "2"]);
    assert_eq!(client.node_tokens("10.0.0.3").await.unwrap(), ["2"]);
}

#[tokio::test]
async fn lists_keyspaces_by_type_and_replication() {
    let agent = ScyllaAgent::start(
        AgentSpec::default().keyspace("shop", KeyspaceKind::Vnodes).keyspace("events", KeyspaceKind::Tablets),
    )
    .await;
    let client = client(&agent, &agent.token(), false);
    for (keyspace_type, replication, expected) in [
        (
            KeyspaceType::All,
            Replication::All,
            &["system", "system_schema", "system_distributed", "system_traces", "shop", "events"][..],
        ),
        (
            KeyspaceType::NonLocalStrategy,
            Replication::Vnodes,
            &["system_distributed", "system_traces", "shop"][..],
        ),
        (KeyspaceType::NonLocalStrategy, Replication::Tablets, &["events"][..]),
        (KeyspaceType::User, Replication::All, &["shop", "events"][..]),
    ] {
        assert_eq!(
            client.keyspaces(keyspace_type, replication).await.unwrap(),
            expected,
            "{keyspace_type:?} {replication:?}"
        );
    }
}

#[tokio::test]
async fn a_wrong_token_is_unauthorized_and_not_retryable() {
    let agent = ScyllaAgent::start(AgentSpec::default()).await;
    let err = client(&agent, "wrong", false).tokens().await.unwrap_err();
    assert!(matches!(err, AgentError::Unauthorized { status: 401, .. }), "{err:?}");
    assert!(!err.is_retryable());
    assert!(!err.to_string().contains("wrong"));
    assert!(!agent.calls()[0].authorized);
}

#[tokio::test]
async fn scylla_errors_keep_their_message_and_class() {
    let agent = ScyllaAgent::start(
        AgentSpec::default().keyspace("moving", KeyspaceKind::Vnodes).topology_changing("moving"),
    )
    .await;
    let client = client(&agent, &agent.token(), false);

    let err = client.start_keyspace_cleanup("nope").await.unwrap_err();
    assert_eq!(
        err,
        AgentError::Server {
            request: "POST /tasks/compaction/keyspace_cleanup/nope".into(),
            status: 400,
            message: "Keyspace nope Does not exist".into(),
        }
    );
    assert!(!err.is_retryable());

    let err = client.keyspace_cleanup_blocking("moving").await.unwrap_err();
    assert!(matches!(err, AgentError::TopologyChanging { .. }), "{err:?}");
    assert!(err.is_retryable());
}

#[tokio::test]
async fn follows_a_task_to_its_end() {
    let agent = ScyllaAgent::start(AgentSpec::default().polls_until_done(2)).await;
    let client = client(&agent, &agent.token(), false);

    let id = client.start_keyspace_cleanup("system_distributed").await.unwrap();
    let first = client.task_status(&id).await.unwrap();
    assert_eq!(first.state, TaskState::Running);
    assert_eq!(first.keyspace, "system_distributed");
    assert!(first.progress_completed < first.progress_total);
    let last = client.wait_task(&id, None).await.unwrap();
    assert_eq!(last.state, TaskState::Done);
    assert_eq!(last.progress_completed, last.progress_total);
    assert!(client.mark_node_as_clean().await.unwrap());
}

#[tokio::test]
async fn an_old_node_offers_neither_the_task_api_nor_mark_node_as_clean() {
    let agent = ScyllaAgent::start(AgentSpec::default().old_node()).await;
    let client = client(&agent, &agent.token(), false);

    let err = client.start_keyspace_cleanup("system_traces").await.unwrap_err();
    assert!(matches!(err, AgentError::NotFound { .. }), "{err:?}");
    assert!(!client.mark_node_as_clean().await.unwrap());
    client.keyspace_cleanup_blocking("system_traces").await.unwrap();
    assert_eq!(agent.cleaned_keyspaces(), ["system_traces"]);
}

/// Two nodes of one modelled cluster: both see the same ring, scale-out and replication change
/// included, and answer `describe_ring` and `ownership` for it.
#[tokio::test]
async fn nodes_of_one_cluster_answer_the_ring_and_ownership_from_one_model() {
    let cluster = Cluster::new(11, 4);
    cluster.join("10.0.0.1", "dc1", "r1").unwrap();
    cluster.join("10.0.0.2", "dc1", "r2").unwrap();
    cluster.create_keyspace("shop", Strategy::nts(&[("dc1", 1)]));
    cluster.create_keyspace("events", Strategy::tablets(&[("dc1", 2)]));
    let one = ScyllaAgent::start(AgentSpec::default().member_of(&cluster, "10.0.0.1")).await;
    let two = ScyllaAgent::start(AgentSpec::default().member_of(&cluster, "10.0.0.2")).await;
    let (one, two) = (client(&one, &one.token(), false), client(&two, &two.token(), false));

    let ring = one.tokens().await.unwrap();
    assert_eq!(ring.len(), 8);
    assert_eq!(two.tokens().await.unwrap(), ring);
    assert_eq!(
        one.keyspaces(KeyspaceType::NonLocalStrategy, Replication::Vnodes).await.unwrap(),
        ["system_distributed", "system_traces", "shop"]
    );

    let rows = one.describe_ring("shop").await.unwrap();
    assert_eq!(rows.len(), 8);
    for row in &rows {
        assert_eq!(row.endpoints.len(), 1, "RF 1: {row:?}");
        let owner = &row.endpoints[0];
        assert!(two.node_tokens(owner).await.unwrap().contains(&row.end_token), "{row:?}");
        assert_eq!(row.endpoint_details[0].host, *owner);
        assert_eq!(row.endpoint_details[0].datacenter, "dc1");
    }
    let shares = two.effective_ownership("shop").await.unwrap();
    let total: f64 = shares.iter().map(|m| m.value.parse::<f64>().unwrap()).sum();
    assert!((total - 1.0).abs() < 1e-5, "{shares:?}");

    cluster.join("10.0.0.3", "dc1", "r3").unwrap();
    cluster.alter_keyspace("shop", Strategy::nts(&[("dc1", 2)])).unwrap();
    assert_eq!(two.tokens().await.unwrap().len(), 12);
    let rows = two.describe_ring("shop").await.unwrap();
    assert!(rows.iter().all(|r| r.endpoints.len() == 2), "{rows:?}");

    let err = one.describe_ring("events").await.unwrap_err();
    assert!(
        matches!(&err, AgentError::Server { status: 500, message, .. } if message.contains("per-table")),
        "{err:?}"
    );
    let err = one.describe_ring("nope").await.unwrap_err();
    assert!(matches!(err, AgentError::Server { status: 400, .. }), "{err:?}");
}

#[tokio::test]
async fn a_node_without_describe_ring_answers_404() {
    let cluster = Cluster::new(1, 2);
    cluster.join("10.0.0.1", "dc1", "r1").unwrap();
    let agent =
        ScyllaAgent::start(AgentSpec::default().member_of(&cluster, "10.0.0.1").without_describe_ring())
            .await;
    let client = client(&agent, &agent.token(), false);
    let err = client.describe_ring("system_traces").await.unwrap_err();
    assert!(matches!(err, AgentError::NotFound { .. }), "{err:?}");
    assert!(!err.is_retryable());
}
