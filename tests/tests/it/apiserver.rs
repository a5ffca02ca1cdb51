//! The in-memory Kubernetes API, exercised through kube's own client, watcher and reflector.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use groundskeeper_e2e::apiserver::{ApiServer, ChangeKind, ResourceId};
use groundskeeper_e2e::wait::{eventually, within};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Service};
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
    PostParams, PropagationPolicy, WatchEvent, WatchParams,
};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Error, Resource, ResourceExt};
use serde_json::{Value, json};

fn config_map(name: &str, labels: &[(&str, &str)]) -> ConfigMap {
    serde_json::from_value(json!({
        "metadata": {
            "name": name,
            "labels": labels.iter().map(|(k, v)| (k.to_string(), json!(v))).collect::<serde_json::Map<_, _>>(),
        },
        "data": { "k": "v" },
    }))
    .unwrap()
}

fn api_error(result: Result<impl std::fmt::Debug, Error>) -> (u16, String, String) {
    match result {
        Err(Error::Api(status)) => (status.code, status.reason.clone(), status.message.clone()),
        other => panic!("expected an API error, got {other:?}"),
    }
}

fn scylla_clusters(client: kube::Client) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("scylla.scylladb.com", "v1", "ScyllaCluster");
    Api::namespaced_with(client, "default", &ApiResource::from_gvk_with_plural(&gvk, "scyllaclusters"))
}

#[tokio::test]
async fn config_map_crud_with_kubes_client() {
    let server = ApiServer::start().await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(server.client());

    let created = api.create(&PostParams::default(), &config_map("one", &[])).await.unwrap();
    let meta = &created.metadata;
    assert_eq!(meta.namespace.as_deref(), Some("default"));
    assert!(meta.uid.as_deref().is_some_and(|uid| uid.len() == 36));
    assert!(meta.creation_timestamp.is_some());
    assert_eq!(meta.generation, None, "ConfigMaps have no generation");
    let rv: u64 = meta.resource_version.as_deref().unwrap().parse().unwrap();

    let fetched = api.get("one").await.unwrap();
    assert_eq!(fetched.metadata.uid, created.metadata.uid);

    let mut changed = fetched.clone();
    changed.data = Some(BTreeMap::from([("k".to_string(), "w".to_string())]));
    let replaced = api.replace("one", &PostParams::default(), &changed).await.unwrap();
    let new_rv: u64 = replaced.resource_version().unwrap().parse().unwrap();
    assert!(new_rv > rv);
    assert_eq!(replaced.metadata.creation_timestamp, created.metadata.creation_timestamp);

    // Writing the same object again changes nothing, not even the resourceVersion.
    let same = api.replace("one", &PostParams::default(), &replaced).await.unwrap();
    assert_eq!(same.resource_version(), replaced.resource_version());

    let (code, reason, message) =
        api_error(api.create(&PostParams::default(), &config_map("one", &[])).await);
    assert_eq!((code, reason.as_str()), (409, "AlreadyExists"));
    assert_eq!(message, "configmaps \"one\" already exists");

    let mut generated = config_map("", &[]);
    generated.metadata.name = None;
    generated.metadata.generate_name = Some("gen-".into());
    let generated = api.create(&PostParams::default(), &generated).await.unwrap();
    assert!(generated.name_any().starts_with("gen-") && generated.name_any().len() == 9);

    let mut nameless = config_map("", &[]);
    nameless.metadata.name = None;
    let (code, reason, _) = api_error(api.create(&PostParams::default(), &nameless).await);
    assert_eq!((code, reason.as_str()), (422, "Invalid"));

    api.delete("one", &DeleteParams::default()).await.unwrap();
    let (code, reason, message) = api_error(api.get("one").await);
    assert_eq!((code, reason.as_str()), (404, "NotFound"));
    assert_eq!(message, "configmaps \"one\" not found");
    assert_eq!(api.get_opt("one").await.unwrap(), None);

    let everywhere: Api<ConfigMap> = Api::all(server.client());
    assert_eq!(everywhere.list(&ListParams::default()).await.unwrap().items.len(), 1);
}

#[tokio::test]
async fn label_and_field_selectors() {
    let server = ApiServer::start().await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(server.client());
    for (name, labels) in [
        ("a", vec![("app", "scylla"), ("rack", "r1")]),
        ("b", vec![("app", "scylla"), ("rack", "r2")]),
        ("c", vec![("app", "etcd")]),
        ("d", vec![]),
    ] {
        api.create(&PostParams::default(), &config_map(name, &labels)).await.unwrap();
    }
    let other: Api<ConfigMap> = Api::namespaced(server.client(), "other");
    other.create(&PostParams::default(), &config_map("a", &[("app", "scylla")])).await.unwrap();

    let cases = [
        ("app=scylla", vec!["a", "b"]),
        ("app==scylla,rack=r2", vec!["b"]),
        ("app!=scylla", vec!["c", "d"]),
        ("rack in (r1,r3)", vec!["a"]),
        ("rack notin (r1)", vec!["b", "c", "d"]),
        ("rack", vec!["a", "b"]),
        ("!rack", vec!["c", "d"]),
    ];
    for (selector, want) in cases {
        let list = api.list(&ListParams::default().labels(selector)).await.unwrap();
        let names: Vec<String> = list.items.iter().map(ResourceExt::name_any).collect();
        assert_eq!(names, want, "labelSelector {selector}");
    }
    let by_name = api.list(&ListParams::default().fields("metadata.name=c")).await.unwrap();
    assert_eq!(by_name.items.len(), 1);
    let everywhere: Api<ConfigMap> = Api::all(server.client());
    let in_other = everywhere.list(&ListParams::default().fields("metadata.namespace=other")).await.unwrap();
    assert_eq!(in_other.items.len(), 1);
    let (code, _, message) = api_error(api.list(&ListParams::default().fields("data.k=v")).await);
    assert_eq!(code, 400);
    assert!(message.contains("field label not supported"), "{message}");
    let (code, _, _) = api_error(api.list(&ListParams::default().labels("app in (x")).await);
    assert_eq!(code, 400);

    let first = api.list(&ListParams::default().limit(3)).await.unwrap();
    assert_eq!(first.items.len(), 3);
    let token = first.metadata.continue_.clone().expect("a continue token");
    let rest = api.list(&ListParams::default().limit(3).continue_token(&token)).await.unwrap();
    let names: Vec<String> = rest.items.iter().map(ResourceExt::name_any).collect();
    assert_eq!(names, vec!["d"]);
    assert_eq!(rest.metadata.continue_, None);
}

#[tokio::test]
async fn optimistic_concurrency_on_update_and_patch() {
    let server = ApiServer::start().await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(server.client());
    let stale = api.create(&PostParams::default(), &config_map("cm", &[])).await.unwrap();
    api.patch("cm", &PatchParams::default(), &Patch::Merge(json!({ "data": { "k": "fresh" } })))
        .await
        .unwrap();

    let (code, reason, message) = api_error(api.replace("cm", &PostParams::default(), &stale).await);
    assert_eq!((code, reason.as_str()), (409, "Conflict"));
    assert!(message.contains("the object has been modified"), "{message}");

    let stale_rv = stale.resource_version().unwrap();
    let guarded = json!({ "metadata": { "resourceVersion": stale_rv }, "data": { "k": "lost" } });
    let (code, reason, _) = api_error(api.patch("cm", &PatchParams::default(), &Patch::Merge(guarded)).await);
    assert_eq!((code, reason.as_str()), (409, "Conflict"));

    // Without a resourceVersion an update is unconditional, as the real API allows.
    let mut blind = stale.clone();
    blind.metadata.resource_version = None;
    let written = api.replace("cm", &PostParams::default(), &blind).await.unwrap();
    assert_eq!(written.data.unwrap()["k"], "v");

    let current = api.get("cm").await.unwrap();
    let guarded =
        json!({ "metadata": { "resourceVersion": current.resource_version() }, "data": { "k": "ok" } });
    api.patch("cm", &PatchParams::default(), &Patch::Merge(guarded)).await.unwrap();

    let dp = DeleteParams {
        preconditions: Some(kube::api::Preconditions { resource_version: Some(stale_rv), uid: None }),
        ..DeleteParams::default()
    };
    let (code, _, message) = api_error(api.delete("cm", &dp).await);
    assert_eq!(code, 409);
    assert!(message.contains("Precondition failed"), "{message}");
}

#[tokio::test]
async fn patch_formats() {
    let server = ApiServer::start().await.unwrap();
    let pods: Api<Pod> = Api::default_namespaced(server.client());
    let pod: Pod = serde_json::from_value(json!({
        "metadata": { "name": "p", "labels": { "a": "1", "b": "2" }, "finalizers": ["x"] },
        "spec": { "containers": [
            { "name": "main", "image": "img:1", "env": [{ "name": "A", "value": "1" }] },
            { "name": "side", "image": "side:1" }
        ]},
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let pp = PatchParams::default();

    let merged = pods
        .patch("p", &pp, &Patch::Merge(json!({ "metadata": { "labels": { "a": null, "c": "3" } } })))
        .await
        .unwrap();
    assert_eq!(merged.labels(), &BTreeMap::from([("b".into(), "2".into()), ("c".into(), "3".into())]));

    let ops: json_patch::Patch = serde_json::from_value(json!([
        { "op": "test", "path": "/metadata/labels/b", "value": "2" },
        { "op": "replace", "path": "/metadata/labels/b", "value": "two" },
        { "op": "add", "path": "/metadata/annotations", "value": { "n": "1" } }
    ]))
    .unwrap();
    let patched = pods.patch("p", &pp, &Patch::Json::<()>(ops)).await.unwrap();
    assert_eq!(patched.labels()["b"], "two");
    assert_eq!(patched.annotations()["n"], "1");
    let failing: json_patch::Patch =
        serde_json::from_value(json!([{ "op": "test", "path": "/metadata/labels/b", "value": "2" }]))
            .unwrap();
    let (code, _, _) = api_error(pods.patch("p", &pp, &Patch::Json::<()>(failing)).await);
    assert_eq!(code, 422);

    let strategic = pods
        .patch(
            "p",
            &pp,
            &Patch::Strategic(json!({ "spec": { "containers": [
                { "name": "main", "env": [{ "name": "B", "value": "2" }] },
                { "name": "side", "$patch": "delete" }
            ]}})),
        )
        .await
        .unwrap();
    let containers = strategic.spec.unwrap().containers;
    assert_eq!(containers.len(), 1);
    assert_eq!(containers[0].image.as_deref(), Some("img:1"));
    let env: Vec<String> = containers[0].env.iter().flatten().map(|e| e.name.clone()).collect();
    assert_eq!(env, vec!["A", "B"]);

    let applied = pods.patch("p", &PatchParams::apply("test"), &Patch::Apply(json!({}))).await;
    let (code, reason, message) = api_error(applied);
    assert_eq!((code, reason.as_str()), (415, "UnsupportedMediaType"));
    assert!(message.contains("server-side apply"), "{message}");

    let clusters = scylla_clusters(server.client());
    let sc: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "scylla.scylladb.com/v1", "kind": "ScyllaCluster",
        "metadata": { "name": "sc" }, "spec": { "version": "6.2.0" }
    }))
    .unwrap();
    clusters.create(&PostParams::default(), &sc).await.unwrap();
    let smp = clusters.patch("sc", &pp, &Patch::Strategic(json!({ "spec": { "version": "6.2.1" } }))).await;
    let (code, _, _) = api_error(smp);
    assert_eq!(code, 415, "custom resources take no strategic merge patch");
}

#[tokio::test]
async fn status_subresource_and_generation() {
    let server = ApiServer::start().await.unwrap();
    let clusters = scylla_clusters(server.client());
    let sc: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "scylla.scylladb.com/v1", "kind": "ScyllaCluster",
        "metadata": { "name": "sc" },
        "spec": { "version": "6.2.0" },
        "status": { "observedGeneration": 7 }
    }))
    .unwrap();
    let created = clusters.create(&PostParams::default(), &sc).await.unwrap();
    assert_eq!(created.metadata.generation, Some(1));
    assert!(created.data.get("status").is_none(), "status is dropped on create");

    let pp = PatchParams::default();
    let on_main = clusters
        .patch("sc", &pp, &Patch::Merge(json!({ "status": { "observedGeneration": 1 } })))
        .await
        .unwrap();
    assert!(on_main.data.get("status").is_none(), "status is ignored on the main endpoint");
    assert_eq!(on_main.resource_version(), created.resource_version(), "nothing changed");

    // A condition has all that scylla-operator's CRD requires of one.
    let condition = json!({ "type": "Available", "status": "True", "reason": "AsExpected", "message": "", "lastTransitionTime": "2025-01-01T00:00:00Z" });
    let status = json!({ "status": { "observedGeneration": 1, "conditions": [condition] } });
    let with_status = clusters.patch_status("sc", &pp, &Patch::Merge(status)).await.unwrap();
    assert_eq!(with_status.data["status"]["observedGeneration"], 1);
    assert_eq!(with_status.metadata.generation, Some(1), "status writes keep the generation");

    let labelled = clusters
        .patch("sc", &pp, &Patch::Merge(json!({ "metadata": { "labels": { "x": "y" } } })))
        .await
        .unwrap();
    assert_eq!(labelled.metadata.generation, Some(1), "metadata writes keep the generation");

    let spec_changed =
        clusters.patch("sc", &pp, &Patch::Merge(json!({ "spec": { "version": "6.2.1" } }))).await.unwrap();
    assert_eq!(spec_changed.metadata.generation, Some(2));
    assert_eq!(spec_changed.data["status"]["observedGeneration"], 1);

    // The status endpoint changes only status.
    let sneaky = json!({ "spec": { "version": "9.9.9" }, "status": { "observedGeneration": 2 } });
    let status_only = clusters.patch_status("sc", &pp, &Patch::Merge(sneaky)).await.unwrap();
    assert_eq!(status_only.data["spec"]["version"], "6.2.1");
    assert_eq!(status_only.data["status"]["observedGeneration"], 2);
    let mut replaced = status_only.clone();
    replaced.data["status"] = json!({ "observedGeneration": 3 });
    let replaced = clusters.replace_status("sc", &PostParams::default(), &replaced).await.unwrap();
    assert_eq!(replaced.data["status"]["observedGeneration"], 3);

    // Built-ins: a Job tracks generation, a Service has none; ConfigMaps have no /status.
    let jobs: Api<Job> = Api::default_namespaced(server.client());
    let job: Job = serde_json::from_value(json!({
        "metadata": { "name": "j" },
        "spec": { "template": { "spec": { "restartPolicy": "Never", "containers": [{ "name": "c", "image": "i" }] } } }
    }))
    .unwrap();
    let job = jobs.create(&PostParams::default(), &job).await.unwrap();
    assert_eq!(job.metadata.generation, Some(1));
    let spec = job.spec.as_ref().unwrap();
    assert_eq!((spec.backoff_limit, spec.completions, spec.parallelism), (Some(6), Some(1), Some(1)));
    let template_labels = spec.template.metadata.as_ref().unwrap().labels.as_ref().unwrap();
    assert_eq!(template_labels["job-name"], "j");
    assert_eq!(template_labels["batch.kubernetes.io/controller-uid"], job.uid().unwrap());
    let immutable = jobs
        .patch(
            "j",
            &pp,
            &Patch::Merge(json!({ "spec": { "template": { "spec": { "restartPolicy": "OnFailure" } } } })),
        )
        .await;
    assert_eq!(api_error(immutable).0, 422);
    let done =
        json!({ "status": { "succeeded": 1, "conditions": [{ "type": "Complete", "status": "True" }] } });
    let job = jobs.patch_status("j", &pp, &Patch::Merge(done)).await.unwrap();
    assert_eq!(job.status.unwrap().succeeded, Some(1));

    let services: Api<Service> = Api::default_namespaced(server.client());
    let svc: Service =
        serde_json::from_value(json!({ "metadata": { "name": "s" }, "spec": { "clusterIP": "None" } }))
            .unwrap();
    assert_eq!(services.create(&PostParams::default(), &svc).await.unwrap().metadata.generation, None);

    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    cms.create(&PostParams::default(), &config_map("cm", &[])).await.unwrap();
    let (code, _, _) = api_error(cms.patch_status("cm", &pp, &Patch::Merge(json!({ "status": {} }))).await);
    assert_eq!(code, 404);
}

#[tokio::test]
async fn watcher_sees_adds_modifies_deletes_and_recovers_from_410() {
    let server = ApiServer::start().await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(server.client());
    api.create(&PostParams::default(), &config_map("before", &[("app", "x")])).await.unwrap();

    let config = watcher::Config::default().labels("app=x");
    let mut events = watcher(api.clone(), config).boxed();
    let mut next = async || loop {
        match within("the watcher's next event", events.try_next()).await {
            Ok(Some(event)) => return event,
            Ok(None) => panic!("the watcher ended"),
            // The watcher reports a 410 as an error and then lists again.
            Err(watcher::Error::WatchError(status)) if status.code == 410 => continue,
            Err(error) => panic!("watcher error: {error}"),
        }
    };
    let name = |event: &watcher::Event<ConfigMap>| match event {
        watcher::Event::Apply(o) | watcher::Event::Delete(o) | watcher::Event::InitApply(o) => o.name_any(),
        watcher::Event::Init => "<init>".into(),
        watcher::Event::InitDone => "<init done>".into(),
    };
    assert!(matches!(next().await, watcher::Event::Init));
    assert_eq!(name(&next().await), "before");
    assert!(matches!(next().await, watcher::Event::InitDone));

    api.create(&PostParams::default(), &config_map("added", &[("app", "x")])).await.unwrap();
    api.create(&PostParams::default(), &config_map("unselected", &[("app", "y")])).await.unwrap();
    let event = next().await;
    assert!(matches!(&event, watcher::Event::Apply(o) if o.name_any() == "added"), "{event:?}");

    api.patch("added", &PatchParams::default(), &Patch::Merge(json!({ "data": { "k": "2" } })))
        .await
        .unwrap();
    let event = next().await;
    assert!(matches!(&event, watcher::Event::Apply(o) if o.data.as_ref().unwrap()["k"] == "2"), "{event:?}");

    // An object that starts matching the selector arrives as an addition, one that stops as a deletion.
    api.patch(
        "unselected",
        &PatchParams::default(),
        &Patch::Merge(json!({ "metadata": { "labels": { "app": "x" } } })),
    )
    .await
    .unwrap();
    assert!(matches!(next().await, watcher::Event::Apply(o) if o.name_any() == "unselected"));
    api.patch(
        "unselected",
        &PatchParams::default(),
        &Patch::Merge(json!({ "metadata": { "labels": { "app": "z" } } })),
    )
    .await
    .unwrap();
    assert!(matches!(next().await, watcher::Event::Delete(o) if o.name_any() == "unselected"));

    api.delete("before", &DeleteParams::default()).await.unwrap();
    assert!(matches!(next().await, watcher::Event::Delete(o) if o.name_any() == "before"));

    server.expire_watches();
    assert!(matches!(next().await, watcher::Event::Init), "a 410 makes the watcher list again");
    assert_eq!(name(&next().await), "added");
    assert!(matches!(next().await, watcher::Event::InitDone));
    api.create(&PostParams::default(), &config_map("after", &[("app", "x")])).await.unwrap();
    assert!(matches!(next().await, watcher::Event::Apply(o) if o.name_any() == "after"));
}

#[tokio::test]
async fn watch_from_a_compacted_resource_version_gets_410_in_the_stream() {
    let server = ApiServer::builder().history_limit(2).start().await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(server.client());
    let first = api.create(&PostParams::default(), &config_map("a", &[])).await.unwrap();
    for name in ["b", "c", "d"] {
        api.create(&PostParams::default(), &config_map(name, &[])).await.unwrap();
    }
    let old = first.resource_version().unwrap();
    let mut stream = api.watch(&WatchParams::default(), &old).await.unwrap().boxed();
    match within("the next watch event", stream.try_next()).await.unwrap() {
        Some(WatchEvent::Error(status)) => {
            assert_eq!((status.code, status.reason.as_str()), (410, "Expired"));
            assert!(status.message.starts_with("too old resource version"), "{}", status.message);
        }
        other => panic!("expected a 410 ERROR event, got {other:?}"),
    }

    // Within the history, a watch replays what happened after the given resourceVersion.
    let recent = (server.revision() - 2).to_string();
    let mut stream = api.watch(&WatchParams::default(), &recent).await.unwrap().boxed();
    match within("the next watch event", stream.try_next()).await.unwrap() {
        Some(WatchEvent::Added(cm)) => assert_eq!(cm.name_any(), "c"),
        other => panic!("expected the replayed addition of c, got {other:?}"),
    }
}

#[tokio::test]
async fn streaming_list_watcher_and_bookmarks() {
    let server = ApiServer::builder().bookmark_interval(Duration::from_millis(50)).start().await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(server.client());
    api.create(&PostParams::default(), &config_map("a", &[])).await.unwrap();
    let mut events = watcher(api.clone(), watcher::Config::default().streaming_lists()).boxed();
    assert!(matches!(
        within("the next watch event", events.try_next()).await.unwrap(),
        Some(watcher::Event::Init)
    ));
    assert!(
        matches!(within("the next watch event", events.try_next()).await.unwrap(), Some(watcher::Event::InitApply(o)) if o.name_any() == "a")
    );
    assert!(matches!(
        within("the next watch event", events.try_next()).await.unwrap(),
        Some(watcher::Event::InitDone)
    ));

    let mut raw = api.watch(&WatchParams::default(), &server.revision().to_string()).await.unwrap().boxed();
    match within("the next watch event", raw.try_next()).await.unwrap() {
        Some(WatchEvent::Bookmark(bookmark)) => {
            assert_eq!(bookmark.metadata.resource_version, server.revision().to_string())
        }
        other => panic!("expected a bookmark, got {other:?}"),
    }
}

#[tokio::test]
async fn reflector_store_follows_the_server() {
    let server = ApiServer::start().await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(server.client());
    let (reader, writer) = reflector::store();
    let stream = reflector(writer, watcher(api.clone(), watcher::Config::default())).applied_objects();
    let task = tokio::spawn(stream.for_each(|_| async {}));
    reader.wait_until_ready().await.unwrap();

    api.create(&PostParams::default(), &config_map("a", &[])).await.unwrap();
    api.create(&PostParams::default(), &config_map("b", &[])).await.unwrap();
    eventually("the reflector holding a and b", || reader.state().len() == 2).await;
    api.delete("a", &DeleteParams::default()).await.unwrap();
    eventually("the reflector holding b alone", || reader.state().len() == 1).await;
    server.expire_watches();
    api.patch("b", &PatchParams::default(), &Patch::Merge(json!({ "data": { "k": "after-410" } })))
        .await
        .unwrap();
    eventually("the reflector seeing the patch made after the 410", || {
        reader.state().first().is_some_and(|cm| cm.data.as_ref().unwrap()["k"] == "after-410")
    })
    .await;
    task.abort();
}

fn pod_owned_by(job: &Job, name: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {
            "name": name,
            "ownerReferences": [{
                "apiVersion": "batch/v1", "kind": "Job", "name": job.name_any(),
                "uid": job.uid().unwrap(), "controller": true, "blockOwnerDeletion": true
            }]
        },
        "spec": { "containers": [{ "name": "c", "image": "i" }] }
    }))
    .unwrap()
}

#[tokio::test]
async fn owner_references_are_garbage_collected() {
    let server = ApiServer::start().await.unwrap();
    let jobs: Api<Job> = Api::default_namespaced(server.client());
    let pods: Api<Pod> = Api::default_namespaced(server.client());
    let job_spec = |name: &str| -> Job {
        serde_json::from_value(json!({
            "metadata": { "name": name },
            "spec": { "template": { "spec": { "restartPolicy": "Never", "containers": [{ "name": "c", "image": "i" }] } } }
        }))
        .unwrap()
    };
    let background = jobs.create(&PostParams::default(), &job_spec("background")).await.unwrap();
    let orphaning = jobs.create(&PostParams::default(), &job_spec("orphaning")).await.unwrap();
    pods.create(&PostParams::default(), &pod_owned_by(&background, "bg-pod")).await.unwrap();
    pods.create(&PostParams::default(), &pod_owned_by(&orphaning, "orphan-pod")).await.unwrap();

    jobs.delete("background", &DeleteParams::background()).await.unwrap();
    assert_eq!(pods.get_opt("bg-pod").await.unwrap(), None);

    // Over the API a Job's default propagation is Orphan.
    jobs.delete("orphaning", &DeleteParams::default()).await.unwrap();
    let orphan = pods.get("orphan-pod").await.unwrap();
    assert!(orphan.owner_references().is_empty());

    let dp =
        DeleteParams { propagation_policy: Some(PropagationPolicy::Foreground), ..DeleteParams::default() };
    let third = jobs.create(&PostParams::default(), &job_spec("third")).await.unwrap();
    pods.create(&PostParams::default(), &pod_owned_by(&third, "third-pod")).await.unwrap();
    jobs.delete("third", &dp).await.unwrap();
    assert_eq!(pods.get_opt("third-pod").await.unwrap(), None);
}

#[tokio::test]
async fn finalizers_delay_deletion() {
    let server = ApiServer::start().await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(server.client());
    let mut cm = config_map("held", &[]);
    cm.metadata.finalizers = Some(vec!["groundskeeper.dev/test".into()]);
    api.create(&PostParams::default(), &cm).await.unwrap();
    let mut changes = server.subscribe();

    api.delete("held", &DeleteParams::default()).await.unwrap();
    let held = api.get("held").await.unwrap();
    assert!(held.metadata.deletion_timestamp.is_some());
    assert_eq!(within("the next change", changes.next()).await.unwrap().unwrap().kind, ChangeKind::Modified);

    api.patch("held", &PatchParams::default(), &Patch::Merge(json!({ "metadata": { "finalizers": null } })))
        .await
        .unwrap();
    assert_eq!(api.get_opt("held").await.unwrap(), None);
    assert_eq!(within("the next change", changes.next()).await.unwrap().unwrap().kind, ChangeKind::Deleted);
}

#[tokio::test]
async fn discovery_and_event_recorder() {
    let server = ApiServer::start().await.unwrap();
    let client = server.client();
    let discovery = kube::discovery::Discovery::new(client.clone()).run().await.unwrap();
    let groups: Vec<String> = discovery.groups().map(|g| g.name().to_string()).collect();
    for group in ["", "batch", "scylla.scylladb.com", "coordination.k8s.io"] {
        assert!(groups.iter().any(|g| g == group), "group {group:?} in {groups:?}");
    }
    let version = client.apiserver_version().await.unwrap();
    assert_eq!((version.major.as_str(), version.minor.as_str()), ("1", "33"));

    use kube::runtime::events::{Event, EventType, Recorder, Reporter};
    let services: Api<Service> = Api::default_namespaced(client.clone());
    let svc: Service = serde_json::from_value(json!({ "metadata": { "name": "s" } })).unwrap();
    let svc = services.create(&PostParams::default(), &svc).await.unwrap();
    let recorder = Recorder::new(client.clone(), Reporter::from("groundskeeper-test"));
    let event = Event {
        type_: EventType::Normal,
        reason: "Cleaned".into(),
        note: Some("node cleaned".into()),
        action: "Cleanup".into(),
        secondary: None,
    };
    recorder.publish(&event, &svc.object_ref(&())).await.unwrap();
    recorder.publish(&event, &svc.object_ref(&())).await.unwrap();
    let events = server.list(&ResourceId::new("events.k8s.io", "v1", "events"), Some("default"));
    assert_eq!(events.len(), 1, "the second publish patches the first event's series");
    let series: &Value = &events[0]["series"];
    assert_eq!(series["count"], 2);
    assert_eq!(events[0]["regarding"]["name"], "s");
}

#[tokio::test]
async fn hooks_share_the_rules_of_the_http_api() {
    let server = ApiServer::start().await.unwrap();
    let cm_id = ResourceId::of::<ConfigMap>();
    let mut changes = server.subscribe();
    let created = server
        .create(&cm_id, Some("default"), json!({ "metadata": { "name": "direct" }, "data": { "a": "1" } }))
        .unwrap();
    assert_eq!(created["kind"], "ConfigMap");
    let change = within("the next change", changes.next()).await.unwrap().unwrap();
    assert_eq!((change.kind, change.resource.clone()), (ChangeKind::Added, cm_id.clone()));

    let api: Api<ConfigMap> = Api::default_namespaced(server.client());
    assert_eq!(api.get("direct").await.unwrap().data.unwrap()["a"], "1");
    let typed: ConfigMap = server.get_as(Some("default"), "direct").unwrap();
    assert_eq!(typed.metadata.uid.as_deref(), created["metadata"]["uid"].as_str());

    let mut stale = created.clone();
    stale["data"]["a"] = json!("2");
    server.replace(&cm_id, Some("default"), "direct", stale.clone()).unwrap();
    assert_eq!(server.replace(&cm_id, Some("default"), "direct", stale).unwrap_err().code, 409);
    server.delete(&cm_id, Some("default"), "direct").unwrap();
    assert!(server.get(&cm_id, Some("default"), "direct").is_none());
}
