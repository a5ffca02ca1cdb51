//! How the controller reaches a node's Scylla Manager Agent: the agent token Secret
//! scylla-operator keeps for the cluster (its name, the Secret read, the token in it), and the
//! address and client settings of a node's agent.

use k8s_openapi::api::core::v1::Secret;
use kube::Api;

use groundskeeper_protocol::keys;
use groundskeeper_stores::scylla::agent::AgentConfig;
use groundskeeper_stores::scylla::token::AuthToken;

use super::config::Config;
use crate::runtime::error::{Error, Result};

/// Name of the Secret scylla-operator keeps the agent token of `cluster` in.
pub(crate) fn agent_token_secret_name(cluster: &str) -> String {
    format!("{cluster}-auth-token")
}

/// The cluster's agent token Secret (`<cluster>-auth-token`) with its name; `None` if absent.
pub(crate) async fn get_agent_token_secret(
    client: &kube::Client,
    namespace: &str,
    cluster: &str,
) -> Result<(String, Option<Secret>)> {
    let name = agent_token_secret_name(cluster);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let secret =
        secrets.get_opt(&name).await.map_err(Error::kube(format!("get Secret {namespace}/{name}")))?;
    Ok((name, secret))
}

/// The agent token from the cluster's Secret. Errors name the Secret and key, never the content.
pub(crate) async fn read_token(client: &kube::Client, namespace: &str, cluster: &str) -> Result<AuthToken> {
    let (name, secret) = get_agent_token_secret(client, namespace, cluster).await?;
    token_from_secret(namespace, &name, secret.as_ref())
}

pub fn token_from_secret(namespace: &str, name: &str, secret: Option<&Secret>) -> Result<AuthToken> {
    let key = keys::SCYLLA_AGENT_TOKEN_SECRET_KEY;
    let invalid = |message: String| Error::InvalidObject {
        object: format!("Secret {namespace}/{name}"),
        field: format!("data[{key}]"),
        message,
    };
    let secret = secret.ok_or_else(|| invalid("the Secret does not exist".into()))?;
    let bytes = secret.data.as_ref().and_then(|d| d.get(key)).ok_or_else(|| invalid("missing".into()))?;
    let text = std::str::from_utf8(&bytes.0).map_err(|_| invalid("not UTF-8 text".into()))?;
    AuthToken::from_yaml(text).map_err(invalid)
}

/// Address the Job reaches the node's agent at: the member Service's DNS name `<svc>.<ns>.svc`.
/// Not the ClusterIP: the name works for headless member Services too (`exposeOptions.nodeService
/// .type: Headless`), and it is what a person reads in the Job's arguments. The search path of the
/// pod completes it with the cluster's domain, whatever that is.
pub fn node_address(namespace: &str, service: &str) -> String {
    format!("{service}.{namespace}.svc")
}

/// How the controller reaches the agent of member `service`: its DNS name on the agent port,
/// unless the configuration says otherwise ([`Config::agent_endpoints`]).
pub(crate) fn agent_config(config: &Config, namespace: &str, service: &str, token: AuthToken) -> AgentConfig {
    let name = node_address(namespace, service);
    let mut agent = AgentConfig::new(name.clone(), token);
    if let Some((host, port)) = config.agent_endpoints.get(&name) {
        agent.host = host.clone();
        agent.port = *port;
    }
    agent
}
