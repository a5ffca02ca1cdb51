//! etcd: an EtcdCluster points at the real 3-member etcd; churn fragments it; on its next check
//! the controller submits one maintenance task, whose Job defragments the members one at a time.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use groundskeeper_e2e::apiserver::ResourceId;
use groundskeeper_e2e::etcd_cluster::{ClusterTls, MemberState};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use serde_json::{Value, json};

use crate::stage::Stage;
use crate::{say, wait_until};

const NAMESPACE: &str = "etcd";
const CLUSTER: &str = "main";
const TLS_SECRET: &str = "etcd-client";
/// Data that stays, so a defrag has something to copy.
const LIVE_BYTES: u64 = 8 * 1024 * 1024;
/// Churn until every db is this big; after the compaction most of it is free pages.
const CHURNED_DB_BYTES: i64 = 64 * 1024 * 1024;
/// The EtcdCluster's thresholds (production defaults: 100 MB and 45 %).
const MIN_DEFRAG_BYTES: i64 = 32 * 1024 * 1024;
const MAX_FRAGMENTED_PERCENT: f64 = 45.0;
/// The shortest check interval the controller accepts.
const CHECK_INTERVAL: &str = "10s";
/// Guards against a walk-through that never settles; not a performance bound.
const GUARD: Duration = Duration::from_secs(60);
const PROGRESSING: &str = "DefragControllerProgressing";

pub struct EtcdOutcome {
    pub version: String,
    /// Every member right after the churn, and after the maintenance.
    pub before: Vec<MemberState>,
    pub after: Vec<MemberState>,
    /// The controller's record of the maintenance: outcome and message.
    pub recorded: String,
    /// From the end of the churn until the result is recorded.
    pub took: Duration,
}

fn etcd_clusters() -> ResourceId {
    ResourceId::new("groundskeeper.dev", "v1alpha1", "etcdclusters")
}

pub async fn walk(stage: &Stage) -> Result<EtcdOutcome, String> {
    let etcd = &stage.etcd;
    stage.step(format!(
        "EtcdCluster {NAMESPACE}/{CLUSTER} for the 3 members: client TLS from Secret {NAMESPACE}/{TLS_SECRET}, \
         defrag at {} and {MAX_FRAGMENTED_PERCENT}% fragmented, checked every {CHECK_INTERVAL}",
        say::mib(MIN_DEFRAG_BYTES)
    )).await;
    etcd.fill(LIVE_BYTES).await?;
    create_etcd_cluster(stage)?;
    wait_until("the controller's first observation of the members", GUARD, || observed_members(stage) == 3)
        .await?;

    stage
        .step(format!(
            "churn: overwriting 16 keys of 128 KiB until every db is {}, then compacting the history, \
         so most of each db is free pages",
            say::mib(CHURNED_DB_BYTES)
        ))
        .await;
    let churn = etcd.churn(CHURNED_DB_BYTES).await?;
    let before = etcd.states().await?;
    say::line(format!(
        "churned: {} overwritten, history compacted to revision {}; as etcd reports it now:",
        say::mib_and_bytes(churn.bytes_written as i64),
        churn.compacted_revision
    ));
    for member in &before {
        say::line(format!("  {}", member_line(member)));
    }

    stage
        .step(format!(
            "waiting for the controller's next check (at most {CHECK_INTERVAL} away): it should submit one \
         maintenance task (MaintenanceTask, origin automatic), run as one Job"
        ))
        .await;
    let started = Instant::now();
    wait_until("the maintenance recorded and DefragControllerProgressing=False", GUARD, || {
        maintenance_recorded(stage)
    })
    .await?;
    Ok(EtcdOutcome {
        version: etcd.version.clone(),
        before,
        after: etcd.states().await?,
        recorded: recorded_outcome(stage),
        took: started.elapsed(),
    })
}

fn member_line(m: &MemberState) -> String {
    let free = m.db_size - m.db_size_in_use;
    format!(
        "{}{}: db {}, in use {}, free {} ({:.0}%)",
        m.name,
        if m.is_leader() { " (leader)" } else { "" },
        say::mib(m.db_size),
        say::mib(m.db_size_in_use),
        say::mib(free),
        100.0 * free as f64 / m.db_size.max(1) as f64
    )
}

fn create_etcd_cluster(stage: &Stage) -> Result<(), String> {
    let tls = stage.etcd.tls().ok_or("the demo's etcd serves TLS")?;
    stage.server.create_as(&tls_secret(tls)?).map_err(|e| format!("creating the TLS Secret: {e}"))?;
    let cluster = json!({
        "apiVersion": "groundskeeper.dev/v1alpha1",
        "kind": "EtcdCluster",
        "metadata": { "name": CLUSTER, "namespace": NAMESPACE },
        "spec": {
            "endpoints": stage.etcd.client_urls(),
            "tls": { "secretName": TLS_SECRET },
            "policy": {
                "checkInterval": CHECK_INTERVAL,
                "minDefragBytes": MIN_DEFRAG_BYTES,
                "maxFragmentedPercent": MAX_FRAGMENTED_PERCENT,
            }
        }
    });
    stage
        .server
        .create(&etcd_clusters(), Some(NAMESPACE), cluster)
        .map_err(|e| format!("creating the EtcdCluster: {e}"))?;
    Ok(())
}

/// The client certificate the Jobs mount, under the keys the EtcdCluster's `spec.tls` expects.
fn tls_secret(tls: &ClusterTls) -> Result<Secret, String> {
    let read = |path: &std::path::Path| {
        std::fs::read(path).map(ByteString).map_err(|e| format!("{}: {e}", path.display()))
    };
    Ok(Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(TLS_SECRET.into()),
            namespace: Some(NAMESPACE.into()),
            ..Default::default()
        },
        data: Some(BTreeMap::from([
            ("ca.crt".to_owned(), read(&tls.ca)?),
            ("tls.crt".to_owned(), read(&tls.client_cert)?),
            ("tls.key".to_owned(), read(&tls.client_key)?),
        ])),
        type_: Some("kubernetes.io/tls".into()),
        ..Default::default()
    })
}

fn status(stage: &Stage) -> Value {
    stage
        .server
        .get(&etcd_clusters(), Some(NAMESPACE), CLUSTER)
        .map(|cluster| cluster["status"].clone())
        .unwrap_or(Value::Null)
}

fn observed_members(stage: &Stage) -> usize {
    status(stage)["members"].as_array().map_or(0, Vec::len)
}

fn maintenance_recorded(stage: &Stage) -> bool {
    let status = status(stage);
    let progressing_false = status["conditions"]
        .as_array()
        .is_some_and(|cs| cs.iter().any(|c| c["type"] == PROGRESSING && c["status"] == "False"));
    status["lastMaintenanceTime"].is_string() && progressing_false
}

fn recorded_outcome(stage: &Stage) -> String {
    let status = status(stage);
    format!(
        "{}: {}",
        status["lastMaintenanceOutcome"].as_str().unwrap_or("?"),
        status["lastMaintenanceMessage"].as_str().unwrap_or_default()
    )
}
