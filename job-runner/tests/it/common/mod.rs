//! What the runner's tests and benchmarks against real etcd share. (A helper of
//! `groundskeeper-e2e` cannot build the runner's types: that crate links its own copy of the
//! runner, whose `DefragArgs` is another type than the one under test here.)

use std::path::Path;

use groundskeeper_e2e::etcd_cluster::EtcdCluster;
use groundskeeper_job::etcd::defrag::DefragArgs;
use groundskeeper_stores::etcd::connect::EndpointArgs;

/// The runner's defrag arguments for `cluster` (its endpoints and, with TLS, its client files)
/// with the given thresholds and a hand-run's defaults otherwise, the result written to
/// `result_file`.
pub fn defrag_args(
    cluster: &EtcdCluster,
    result_file: &Path,
    min_defrag_bytes: i64,
    max_fragmented_percent: f64,
) -> DefragArgs {
    let tls = cluster.tls();
    DefragArgs {
        connection: EndpointArgs {
            endpoints: cluster.client_urls(),
            cacert: tls.map(|t| t.ca.clone()),
            cert: tls.map(|t| t.client_cert.clone()),
            key: tls.map(|t| t.client_key.clone()),
        },
        min_defrag_bytes,
        max_fragmented_percent,
        compact_retain_revisions: None,
        compact_not_past: None,
        leader_turn: groundskeeper_protocol::operation::LeaderTurnPolicy::Auto,
        no_move_leader: false,
        leader_in_place_budget_seconds: None,
        refuse_affected_versions: false,
        quota_backend_bytes: None,
        catch_up_timeout_seconds: 30,
        allow_single_member: false,
        dry_run: false,
        not_after: None,
        window_opened: None,
        expected_rates: Vec::new(),
        defrag_call_timeout_ms: 60_000,
        member_timeout_seconds: 60,
        result_file: result_file.to_owned(),
        grace_period_seconds: groundskeeper_protocol::exit::TERMINATION_GRACE_PERIOD_SECONDS,
    }
}
