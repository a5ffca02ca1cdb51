//! Leader election against the in-memory API: two replicas contend for one Lease; only one acts
//! at a time, and the other takes over when the leader gives the Lease up or stops renewing it.
//!
//! The waits below are bounds against a scenario that never settles, not performance checks.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use groundskeeper_controller::runtime::leader::{LeaderElectionConfig, run_as_leader};
use groundskeeper_e2e::apiserver::ApiServer;
use groundskeeper_e2e::apiserver::rbac::{CONTROLLER_TOKEN, controller_grants};
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

const BOUND: Duration = Duration::from_secs(20);
/// The Lease the Deployment's replicas contend for, as `manifests/` name it: the Role grants
/// get and update on this name only.
const NAMESPACE: &str = "groundskeeper";
const LEASE: &str = "groundskeeper-controller";

/// A server that authorizes the replicas as `manifests/` authorizes the controller.
async fn server() -> ApiServer {
    ApiServer::builder().authorize(CONTROLLER_TOKEN, controller_grants()).start().await.unwrap()
}

fn config(identity: &str) -> LeaderElectionConfig {
    let mut config = LeaderElectionConfig::new(NAMESPACE.into(), LEASE.into(), identity.into());
    config.lease_duration = Duration::from_secs(1);
    config.renew_deadline = Duration::from_millis(700);
    config.retry_period = Duration::from_millis(50);
    config
}

/// A replica whose work marks it active until told to stop.
struct Replica {
    active: Arc<AtomicBool>,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

fn replica(server: &ApiServer, identity: &str) -> Replica {
    let active = Arc::new(AtomicBool::new(false));
    let (stop, stopped) = oneshot::channel::<()>();
    let work = {
        let active = active.clone();
        async move {
            active.store(true, Ordering::SeqCst);
            let _ = stopped.await;
            active.store(false, Ordering::SeqCst);
        }
    };
    let (client, config) = (server.client_with_token(CONTROLLER_TOKEN), config(identity));
    let task = tokio::spawn(async move {
        run_as_leader(client, config, work).await.expect("leadership is not lost in this scenario");
    });
    Replica { active, stop: Some(stop), task }
}

async fn until(what: &str, condition: impl Fn() -> bool) {
    groundskeeper_e2e::wait::wait_until(what, BOUND, Duration::from_millis(20), condition, String::new).await;
}

async fn holder(server: &ApiServer) -> Option<String> {
    let leases: Api<Lease> = Api::namespaced(server.client(), NAMESPACE);
    leases.get(LEASE).await.ok()?.spec?.holder_identity
}

#[tokio::test]
async fn one_leader_at_a_time_and_a_clean_hand_over() {
    let server = server().await;
    let mut a = replica(&server, "a");
    until("a leads", || a.active.load(Ordering::SeqCst)).await;
    let b = replica(&server, "b");

    // Over several lease durations, b never acts while a renews.
    for _ in 0..30 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!b.active.load(Ordering::SeqCst), "b acts while a holds the lease");
    }
    assert_eq!(holder(&server).await.as_deref(), Some("a"));

    // a finishes its work and gives the lease up; b takes over.
    a.stop.take().unwrap().send(()).unwrap();
    a.task.await.unwrap();
    until("b leads after a released", || b.active.load(Ordering::SeqCst)).await;
    assert_eq!(holder(&server).await.as_deref(), Some("b"));
    let lease: Api<Lease> = Api::namespaced(server.client(), NAMESPACE);
    let transitions = lease.get(LEASE).await.unwrap().spec.unwrap().lease_transitions;
    assert_eq!(transitions, Some(1));
}

#[tokio::test]
async fn a_leader_that_stops_renewing_is_replaced_after_the_lease_expires() {
    let server = server().await;
    let a = replica(&server, "a");
    until("a leads", || a.active.load(Ordering::SeqCst)).await;
    let b = replica(&server, "b");

    // a dies without releasing: its lease stays, unrenewed.
    a.task.abort();
    let _ = a.task.await;
    assert_eq!(holder(&server).await.as_deref(), Some("a"));
    until("b leads after a's lease expired", || b.active.load(Ordering::SeqCst)).await;
    assert_eq!(holder(&server).await.as_deref(), Some("b"));
}

#[tokio::test]
async fn a_leader_whose_lease_is_taken_stops_acting() {
    let server = server().await;
    let active = Arc::new(AtomicBool::new(false));
    let work = {
        let active = active.clone();
        async move {
            active.store(true, Ordering::SeqCst);
            std::future::pending::<()>().await
        }
    };
    let leader = tokio::spawn(run_as_leader(server.client_with_token(CONTROLLER_TOKEN), config("a"), work));
    until("a leads", || active.load(Ordering::SeqCst)).await;

    // Someone else writes itself in as holder (a replica that believed the lease expired).
    // The leader renews all the while, so the intruder retries on conflict as any writer would.
    let leases: Api<Lease> = Api::namespaced(server.client(), NAMESPACE);
    loop {
        let mut lease = leases.get(LEASE).await.unwrap();
        lease.spec.as_mut().unwrap().holder_identity = Some("intruder".into());
        match leases.replace(LEASE, &Default::default(), &lease).await {
            Ok(_) => break,
            Err(kube::Error::Api(status)) if status.code == 409 => continue,
            Err(err) => panic!("the intruder could not write the lease: {err}"),
        }
    }

    let outcome = tokio::time::timeout(BOUND, leader).await.expect("a notices").unwrap();
    let err = outcome.expect_err("a must stop with an error");
    assert!(err.to_string().contains("now held by intruder"), "{err}");
}
