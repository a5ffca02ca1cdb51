//! The EtcdCluster controller's API writes at the HTTP level: the Job it creates, the status it
//! writes, the Events, and the calls it does not make.

use groundskeeper_protocol::Operation;
use groundskeeper_protocol::operation::{CompactRequest, CompactTo, EtcdTarget};
use std::pin::pin;
use std::sync::Arc;

use groundskeeper_controller::api::etcd_cluster::{EtcdCluster, EtcdClusterStatus};
use groundskeeper_controller::runtime::context::{Context, ControllerConfig, JobLimits};
use groundskeeper_controller::runtime::metrics::Metrics;
use groundskeeper_controller::triggers::etcd::decide::{Input, Observed, decide};
use groundskeeper_controller::triggers::etcd::observe::ObservedMember;
use groundskeeper_controller::triggers::etcd::policy::Policy;
use groundskeeper_controller::triggers::etcd::reconcile::{
    apply, job_limits, maintenance_job, read_client_tls, reconcile_at, status_patch,
};
use groundskeeper_job::etcd::plan::{MemberObservation, MemberStatus};
use http::{Method, Request, Response, StatusCode};
use jiff::Timestamp;
use kube::client::Body;
use kube::runtime::controller::Action;
use serde_json::{Value, json};
use tower_test::mock::{self, Handle};

type MockHandle = Handle<Request<Body>, Response<Body>>;

/// One request the test expects (method and path; the query must contain `query` decoded), and
/// the answer it gets.
struct Exchange {
    method: Method,
    path: String,
    query: Option<String>,
    status: StatusCode,
    response: Value,
}

fn exchange(method: Method, path: &str, status: StatusCode, response: Value) -> Exchange {
    Exchange {
        method,
        path: path.to_owned(),
        query: None,
        status,
        response,
    }
}

/// Seen request: method, path, content type, body.
type Seen = (Method, String, String, Value);

/// A context whose API server answers `script` in order; the task returns the requests and the
/// handle, so that a test can check that nothing else was asked.
fn scripted(script: Vec<Exchange>) -> (Arc<Context>, tokio::task::JoinHandle<(Vec<Seen>, MockHandle)>) {
    let (service, handle) = mock::pair::<Request<Body>, Response<Body>>();
    let server = tokio::spawn(serve(handle, script));
    let client = kube::Client::new(service, "default");
    let ctx = Context::new(client, ControllerConfig::default(), Arc::new(Metrics::new()));
    (Arc::new(ctx), server)
}

async fn serve(mut handle: MockHandle, script: Vec<Exchange>) -> (Vec<Seen>, MockHandle) {
    let mut seen = Vec::new();
    for expected in script {
        let (request, send) = pin!(&mut handle)
            .next_request()
            .await
            .expect("the client stopped before the script ended");
        assert_eq!(request.method(), expected.method, "method of {}", request.uri());
        assert_eq!(request.uri().path(), expected.path);
        if let Some(query) = &expected.query {
            let got = percent_decode(request.uri().query().unwrap_or_default());
            assert!(got.contains(query.as_str()), "query {got:?} lacks {query:?}");
        }
        let content_type = request
            .headers()
            .get(http::header::CONTENT_TYPE)
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default();
        let (method, path) = (request.method().clone(), request.uri().path().to_owned());
        let bytes = request.into_body().collect_bytes().await.unwrap();
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).unwrap()
        };
        seen.push((method, path, content_type, body));
        let response = Response::builder()
            .status(expected.status)
            .body(Body::from(serde_json::to_vec(&expected.response).unwrap()))
            .unwrap();
        send.send_response(response);
    }
    (seen, handle)
}

/// After the client is gone: no request beyond the script was made.
async fn assert_no_more_requests(
    ctx: Arc<Context>,
    server: tokio::task::JoinHandle<(Vec<Seen>, MockHandle)>,
) -> Vec<Seen> {
    drop(ctx);
    let (seen, mut handle) = server.await.unwrap();
    if let Some((request, _)) = pin!(&mut handle).next_request().await {
        panic!("unexpected request {} {}", request.method(), request.uri());
    }
    seen
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Ok(byte) = u8::from_str_radix(&text[i + 1..i + 3], 16)
        {
            out.push(byte);
            i += 3;
            continue;
        }
        out.push(if bytes[i] == b'+' { b' ' } else { bytes[i] });
        i += 1;
    }
    String::from_utf8(out).unwrap()
}

fn now() -> Timestamp {
    "2026-03-01T12:00:00Z".parse().unwrap()
}

fn cluster(spec: Value, status: Option<EtcdClusterStatus>) -> EtcdCluster {
    let mut cluster: EtcdCluster = serde_json::from_value(json!({
        "apiVersion": "groundskeeper.dev/v1alpha1",
        "kind": "EtcdCluster",
        "metadata": {"name": "main", "namespace": "etcd", "uid": "uid-main", "generation": 2},
        "spec": spec,
    }))
    .unwrap();
    cluster.status = status;
    cluster
}

fn tls_spec() -> Value {
    json!({
        "endpoints": ["https://etcd-0:2379", "https://etcd-1:2379", "https://etcd-2:2379"],
        "tls": {"secretName": "etcd-client"},
    })
}

fn member(id: u64, size: i64, in_use: i64) -> ObservedMember {
    ObservedMember {
        endpoint: format!("https://etcd-{}:2379", id - 1),
        member: MemberObservation {
            id,
            name: format!("etcd-{}", id - 1),
            is_learner: false,
            status: Ok(MemberStatus {
                db_size: size,
                db_size_in_use: in_use,
                leader: 1,
                raft_term: 2,
                raft_index: 10,
                raft_applied_index: 10,
                errors: vec![],
            }),
        },
        revision: Some(500),
    }
}

fn fragmented() -> Observed {
    Observed::Members(vec![
        member(1, 20_000_000, 19_000_000),
        member(2, 300_000_000, 30_000_000),
        member(3, 20_000_000, 19_000_000),
    ])
}

fn job_created(name: &str) -> Value {
    json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": "etcd", "uid": "job-uid"}})
}

fn event_created() -> Value {
    json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e", "namespace": "etcd"}, "eventTime": "2026-03-01T12:00:00.000000Z"})
}

fn cluster_json() -> Value {
    json!({"apiVersion": "groundskeeper.dev/v1alpha1", "kind": "EtcdCluster",
           "metadata": {"name": "main", "namespace": "etcd", "uid": "uid-main"}, "spec": {"endpoints": ["http://x:2379"]}})
}

async fn decide_and_apply(ctx: &Context, cluster: &EtcdCluster, observed: &Observed) -> Action {
    let policy = Policy::from_spec(&cluster.spec);
    let previous = cluster.status.clone().unwrap_or_default();
    let decision = decide(&Input {
        cluster: "main",
        generation: Some(2),
        policy: policy.as_ref(),
        enabled: true,
        observed,
        jobs: &[],
        previous: &previous,
        now: now(),
    });
    apply(cluster, ctx, &policy, observed, decision, now())
        .await
        .unwrap()
}

#[tokio::test]
async fn a_due_defrag_creates_one_job_then_writes_the_status_and_an_event() {
    let cluster = cluster(tls_spec(), None);
    let (ctx, server) = scripted(vec![
        exchange(
            Method::POST,
            "/apis/batch/v1/namespaces/etcd/jobs",
            StatusCode::CREATED,
            job_created("main-maint-1"),
        ),
        exchange(
            Method::PATCH,
            "/apis/groundskeeper.dev/v1alpha1/namespaces/etcd/etcdclusters/main/status",
            StatusCode::OK,
            cluster_json(),
        ),
        exchange(
            Method::POST,
            "/apis/events.k8s.io/v1/namespaces/etcd/events",
            StatusCode::CREATED,
            event_created(),
        ),
    ]);
    let action = decide_and_apply(&ctx, &cluster, &fragmented()).await;
    assert_eq!(action, Action::requeue(std::time::Duration::from_secs(600)));
    let seen = assert_no_more_requests(ctx, server).await;

    let job = &seen[0].3;
    assert_eq!(job["metadata"]["name"], "main-maint-1");
    let labels = &job["metadata"]["labels"];
    assert_eq!(labels["groundskeeper.dev/operation"], "defrag");
    assert_eq!(labels["groundskeeper.dev/target"], "main");
    assert_eq!(labels["groundskeeper.dev/attempt"], "1");
    assert_eq!(job["metadata"]["ownerReferences"][0]["uid"], "uid-main");
    assert_eq!(job["metadata"]["ownerReferences"][0]["kind"], "EtcdCluster");
    let pod = &job["spec"]["template"]["spec"];
    let args: Vec<&str> = pod["containers"][0]["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(
        &args[..3],
        [
            "defrag",
            "--endpoints",
            "https://etcd-0:2379,https://etcd-1:2379,https://etcd-2:2379"
        ]
    );
    assert!(args.contains(&"/etc/groundskeeper/etcd-tls/tls.key"));
    let mounts = pod["containers"][0]["volumeMounts"].as_array().unwrap();
    for key in ["ca.crt", "tls.crt", "tls.key"] {
        let mount = mounts
            .iter()
            .find(|m| m["mountPath"] == format!("/etc/groundskeeper/etcd-tls/{key}"))
            .unwrap_or_else(|| panic!("{key} not mounted: {mounts:?}"));
        assert_eq!(mount["readOnly"], true);
    }
    let volumes = pod["volumes"].as_array().unwrap();
    assert!(
        volumes
            .iter()
            .all(|v| v.get("secret").is_none() || v["secret"]["secretName"] == "etcd-client")
    );
    assert_eq!(job["spec"]["backoffLimit"], JobLimits::default().backoff_limit);

    let (_, _, content_type, patch) = &seen[1];
    assert_eq!(content_type, "application/merge-patch+json");
    let status = &patch["status"];
    assert_eq!(status["activeJob"], "main-maint-1");
    assert_eq!(status["lastAttempt"], 1);
    assert_eq!(status["observedGeneration"], 2);
    assert_eq!(status["members"][1]["name"], "etcd-1");
    assert_eq!(status["members"][1]["fragmentationPercent"], 90.0);
    let conditions = status["conditions"].as_array().unwrap();
    let progressing = conditions
        .iter()
        .find(|c| c["type"] == "DefragControllerProgressing")
        .unwrap();
    assert_eq!(progressing["status"], "True");
    assert_eq!(progressing["reason"], "JobCreated");
    assert_eq!(progressing["lastTransitionTime"], "2026-03-01T12:00:00Z");

    let event = &seen[2].3;
    assert_eq!(event["reason"], "MaintenanceJobCreated");
    assert_eq!(event["regarding"]["name"], "main");
}

#[tokio::test]
async fn a_racing_create_takes_the_existing_job_and_publishes_no_event() {
    let cluster = cluster(tls_spec(), None);
    let conflict = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 409,
                          "reason": "AlreadyExists", "message": "jobs.batch \"main-maint-1\" already exists"});
    let (ctx, server) = scripted(vec![
        exchange(
            Method::POST,
            "/apis/batch/v1/namespaces/etcd/jobs",
            StatusCode::CONFLICT,
            conflict,
        ),
        exchange(
            Method::GET,
            "/apis/batch/v1/namespaces/etcd/jobs/main-maint-1",
            StatusCode::OK,
            job_created("main-maint-1"),
        ),
        exchange(
            Method::PATCH,
            "/apis/groundskeeper.dev/v1alpha1/namespaces/etcd/etcdclusters/main/status",
            StatusCode::OK,
            cluster_json(),
        ),
    ]);
    decide_and_apply(&ctx, &cluster, &fragmented()).await;
    let seen = assert_no_more_requests(ctx, server).await;
    assert_eq!(seen[2].3["status"]["activeJob"], "main-maint-1");
}

#[tokio::test]
async fn an_unreachable_member_writes_degraded_and_creates_no_job() {
    let cluster = cluster(tls_spec(), None);
    let mut members = vec![
        member(1, 20_000_000, 19_000_000),
        member(2, 300_000_000, 30_000_000),
    ];
    members.push(ObservedMember {
        endpoint: "https://etcd-2:2379".into(),
        member: MemberObservation {
            id: 3,
            name: "etcd-2".into(),
            is_learner: false,
            status: Err("https://etcd-2:2379: cannot connect: connection refused".into()),
        },
        revision: None,
    });
    let (ctx, server) = scripted(vec![exchange(
        Method::PATCH,
        "/apis/groundskeeper.dev/v1alpha1/namespaces/etcd/etcdclusters/main/status",
        StatusCode::OK,
        cluster_json(),
    )]);
    decide_and_apply(&ctx, &cluster, &Observed::Members(members)).await;
    let seen = assert_no_more_requests(ctx, server).await;
    let status = &seen[0].3["status"];
    let degraded = status["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "DefragControllerDegraded")
        .unwrap();
    assert_eq!(degraded["status"], "True");
    assert!(
        degraded["message"]
            .as_str()
            .unwrap()
            .contains("member etcd-2 (https://etcd-2:2379): unreachable")
    );
    assert_eq!(status["members"][2]["healthy"], false);
    assert_eq!(status.get("activeJob"), None);
}

#[tokio::test]
async fn an_invalid_spec_is_reported_without_asking_etcd() {
    let cluster = cluster(
        json!({"endpoints": ["http://etcd-0:2379"], "policy": {"checkInterval": "10x"}}),
        None,
    );
    let (ctx, server) = scripted(vec![
        Exchange {
            query: Some(
                "groundskeeper.dev/target=main,groundskeeper.dev/operation in (defrag,compact)".into(),
            ),
            ..exchange(
                Method::GET,
                "/apis/batch/v1/namespaces/etcd/jobs",
                StatusCode::OK,
                json!({"apiVersion": "batch/v1", "kind": "JobList", "metadata": {}, "items": []}),
            )
        },
        exchange(
            Method::PATCH,
            "/apis/groundskeeper.dev/v1alpha1/namespaces/etcd/etcdclusters/main/status",
            StatusCode::OK,
            cluster_json(),
        ),
    ]);
    reconcile_at(&cluster, &ctx, now()).await.unwrap();
    let seen = assert_no_more_requests(ctx, server).await;
    let conditions = seen[1].3["status"]["conditions"].as_array().unwrap().clone();
    let degraded = conditions
        .iter()
        .find(|c| c["type"] == "DefragControllerDegraded")
        .unwrap();
    assert_eq!(degraded["reason"], "InvalidSpec");
    assert!(
        degraded["message"]
            .as_str()
            .unwrap()
            .contains(r#"spec.policy.checkInterval: "10x" is not a duration"#)
    );
}

#[tokio::test]
async fn a_reconcile_before_the_check_is_due_lists_jobs_and_writes_nothing() {
    let status = EtcdClusterStatus {
        observed_generation: Some(2),
        next_check_time: Some((now() + jiff::SignedDuration::from_mins(4)).into()),
        ..Default::default()
    };
    let cluster = cluster(json!({"endpoints": ["http://etcd-0:2379"]}), Some(status));
    let (ctx, server) = scripted(vec![exchange(
        Method::GET,
        "/apis/batch/v1/namespaces/etcd/jobs",
        StatusCode::OK,
        json!({"apiVersion": "batch/v1", "kind": "JobList", "metadata": {}, "items": []}),
    )]);
    let action = reconcile_at(&cluster, &ctx, now()).await.unwrap();
    assert_eq!(action, Action::requeue(std::time::Duration::from_secs(240)));
    assert_no_more_requests(ctx, server).await;
}

#[tokio::test]
async fn the_tls_secret_is_read_and_a_missing_key_is_named_without_the_content() {
    let secret = |data: Value| json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "etcd-client", "namespace": "etcd"}, "data": data});
    // base64 of "CA", "CERT", "KEY".
    let full = json!({"ca.crt": "Q0E=", "tls.crt": "Q0VSVA==", "tls.key": "S0VZ"});
    let (ctx, server) = scripted(vec![
        exchange(
            Method::GET,
            "/api/v1/namespaces/etcd/secrets/etcd-client",
            StatusCode::OK,
            secret(full),
        ),
        exchange(
            Method::GET,
            "/api/v1/namespaces/etcd/secrets/etcd-client",
            StatusCode::OK,
            secret(json!({"ca.crt": "Q0E=", "tls.crt": "Q0VSVA=="})),
        ),
    ]);
    let tls = read_client_tls(&ctx.client, "etcd", "etcd-client").await.unwrap();
    assert_eq!(
        (tls.ca.as_slice(), tls.cert.as_slice(), tls.key.as_slice()),
        (&b"CA"[..], &b"CERT"[..], &b"KEY"[..])
    );
    assert!(
        !format!("{tls:?}").contains("KEY"),
        "Debug must not print key material"
    );
    let err = read_client_tls(&ctx.client, "etcd", "etcd-client")
        .await
        .unwrap_err();
    assert!(err.contains("Secret etcd/etcd-client"), "{err}");
    assert!(err.contains("no key \"tls.key\""), "{err}");
    assert!(!err.contains("CERT"), "{err}");
    assert_no_more_requests(ctx, server).await;
}

#[test]
fn the_status_patch_clears_fields_that_went_away() {
    let before = EtcdClusterStatus {
        active_job: Some("main-maint-1".into()),
        last_attempt: 1,
        ..Default::default()
    };
    let after = EtcdClusterStatus {
        last_attempt: 1,
        ..Default::default()
    };
    let patch = status_patch(&before, &after).unwrap();
    assert_eq!(patch["status"]["activeJob"], Value::Null);
    assert!(patch["status"].as_object().unwrap().contains_key("activeJob"));
    assert_eq!(patch["status"]["lastAttempt"], 1);
}

#[tokio::test]
async fn spec_job_limits_override_the_controllers() {
    let cluster = cluster(
        json!({"endpoints": ["http://etcd-0:2379"], "job": {"backoffLimit": 0, "activeDeadlineSeconds": 60}}),
        None,
    );
    let policy = Policy::from_spec(&cluster.spec).unwrap();
    let (service, _handle) = mock::pair::<Request<Body>, Response<Body>>();
    let ctx = Context::new(
        kube::Client::new(service, "default"),
        ControllerConfig::default(),
        Arc::new(Metrics::new()),
    );
    let limits = job_limits(Some(&policy), &JobLimits::default());
    assert_eq!(
        limits,
        JobLimits {
            backoff_limit: 0,
            active_deadline_seconds: 60,
            ttl_seconds_after_finished: JobLimits::default().ttl_seconds_after_finished,
        }
    );
    assert_eq!(job_limits(None, &JobLimits::default()), JobLimits::default());
    let planned = groundskeeper_controller::triggers::etcd::decide::PlannedJob {
        name: "main-maint-1".into(),
        attempt: 1,
        operation: Operation::Compact(CompactRequest {
            etcd: EtcdTarget::default(),
            to: CompactTo::Revision(1),
            physical: true,
        }),
        tls_secret: None,
        reason: "test".into(),
    };
    let job = maintenance_job(&cluster, &ctx, &planned, limits.clone()).unwrap();
    assert_eq!(job.limits, limits);
    assert!(job.secret_files.is_empty());
}
