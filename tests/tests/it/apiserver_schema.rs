//! The in-memory API holds custom resources to their CRDs as kube-apiserver does: unknown fields
//! pruned (`fieldValidation`), defaults applied, the OpenAPI checks and the CEL rules of
//! `manifests/crds/`, answered with the real 422 `Invalid` Status; `dryRun=All` stores nothing.

use groundskeeper_e2e::apiserver::{ApiError, ApiServer, PatchFormat, ResourceId};
use http::{Method, Request};
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use serde_json::{Value, json};

const NS: &str = "default";

fn own(plural: &str) -> ResourceId {
    ResourceId::new("groundskeeper.dev", "v1alpha1", plural)
}

fn tasks() -> ResourceId {
    own("maintenancetasks")
}

fn task(name: &str, spec: Value) -> Value {
    json!({ "apiVersion": "groundskeeper.dev/v1alpha1", "kind": "MaintenanceTask", "metadata": { "name": name }, "spec": spec })
}

fn compact_spec() -> Value {
    json!({ "target": { "kind": "EtcdCluster", "name": "main" }, "type": "Compact", "config": { "compact": { "retainRevisions": 100 } } })
}

/// A valid object of each groundskeeper kind, by plural.
fn valid(plural: &str, name: &str) -> Value {
    let spec = match plural {
        "maintenancetasks" => compact_spec(),
        "etcdclusters" => json!({ "endpoints": ["http://etcd-0:2379"] }),
        "maintenanceschedules" => {
            json!({ "schedule": "30 2 * * *", "taskTemplate": { "spec": compact_spec() } })
        }
        "maintenancesuspensions" => {
            json!({ "target": { "kind": "EtcdCluster", "name": "main" }, "reason": "a release" })
        }
        other => panic!("no valid {other}"),
    };
    json!({ "metadata": { "name": name }, "spec": spec })
}

fn refused(result: Result<Value, ApiError>) -> Value {
    result.expect_err("the write is refused").to_status()
}

/// `(field, reason, message)` of each cause of a 422 Status.
fn causes(status: &Value) -> Vec<(String, String, String)> {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    status["details"]["causes"]
        .as_array()
        .unwrap_or_else(|| panic!("no causes: {status:#}"))
        .iter()
        .map(|c| (text(&c["field"]), text(&c["reason"]), text(&c["message"])))
        .collect()
}

fn set(object: &mut Value, path: &[&str], value: Value) {
    let Some((last, parents)) = path.split_last() else { return };
    let mut at = object;
    for key in parents {
        at = if let Some(index) = key.strip_suffix("[]") {
            let list = &mut at[index];
            if !list.is_array() {
                *list = json!([{}]);
            }
            &mut list[0]
        } else {
            if !at[*key].is_object() {
                at[*key] = json!({});
            }
            &mut at[*key]
        };
    }
    match last.strip_suffix("[]") {
        Some(index) => at[index] = json!([value]),
        None => at[*last] = value,
    }
}

#[tokio::test]
async fn an_unsupported_value_is_refused_with_the_real_status() {
    let server = ApiServer::start().await.unwrap();
    let mut spec = compact_spec();
    spec["type"] = json!("Vacuum");
    let status = refused(server.create(&tasks(), Some(NS), task("vacuum", spec)));
    assert_eq!(
        status,
        json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "reason": "Invalid", "code": 422,
            "message": "MaintenanceTask.groundskeeper.dev \"vacuum\" is invalid: [spec.type: Unsupported value: \"Vacuum\": supported values: \"Cleanup\", \"Compact\", \"Defragment\", \"Maintenance\", \"Snapshot\", \"Copy\", \"Verify\", \"Delta\", \"Restore\", <nil>: Invalid value: \"null\": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation]",
            "details": { "name": "vacuum", "group": "groundskeeper.dev", "kind": "MaintenanceTask", "causes": [
                { "reason": "FieldValueNotSupported", "field": "spec.type", "message": "Unsupported value: \"Vacuum\": supported values: \"Cleanup\", \"Compact\", \"Defragment\", \"Maintenance\", \"Snapshot\", \"Copy\", \"Verify\", \"Delta\", \"Restore\"" },
                { "reason": "FieldValueInvalid", "field": "<nil>", "message": "Invalid value: \"null\": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation" },
            ]},
        })
    );
    assert!(server.get(&tasks(), Some(NS), "vacuum").is_none());

    // Over HTTP the body is the same.
    let request = Request::post(format!("/apis/groundskeeper.dev/v1alpha1/namespaces/{NS}/maintenancetasks"))
        .header("content-type", "application/json")
        .body(task("vacuum", json!({ "target": { "kind": "EtcdCluster", "name": "main" }, "type": "Compact", "deadlineSeconds": 0 })).to_string().into_bytes())
        .unwrap();
    let (code, _, body) = send(&server, request).await;
    assert_eq!(code, 422);
    assert_eq!(
        body["message"],
        "MaintenanceTask.groundskeeper.dev \"vacuum\" is invalid: spec.deadlineSeconds: Invalid value: 0: spec.deadlineSeconds in body should be greater than or equal to 1"
    );
    assert_eq!(
        causes(&body),
        [(
            "spec.deadlineSeconds".into(),
            "FieldValueInvalid".into(),
            "Invalid value: 0: spec.deadlineSeconds in body should be greater than or equal to 1".into()
        )]
    );
}

/// Every `enum` of every groundskeeper CRD refuses a value it does not list, at its own path
/// (status fields through `/status`).
#[tokio::test]
async fn every_enum_of_the_crds_refuses_a_value_it_does_not_list() {
    let server = ApiServer::start().await.unwrap();
    let mut checked = 0;
    for plural in ["etcdclusters", "maintenanceschedules", "maintenancesuspensions", "maintenancetasks"] {
        let crd = crd(plural);
        let mut enums = Vec::new();
        enum_paths(&crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"], &mut Vec::new(), &mut enums);
        for path in enums {
            let name = format!("enum-{checked}");
            let mut object = valid(plural, &name);
            set(&mut object, &path.iter().map(String::as_str).collect::<Vec<_>>(), json!("NotListed"));
            let result = if path[0] == "status" {
                server.create(&own(plural), Some(NS), valid(plural, &name)).unwrap();
                server.replace_status(&own(plural), Some(NS), &name, object)
            } else {
                server.create(&own(plural), Some(NS), object)
            };
            let field = path.join(".").replace("[]", "[0]");
            let status = refused(result);
            assert!(
                causes(&status).iter().any(|(f, reason, message)| *f == field
                    && reason == "FieldValueNotSupported"
                    && message.starts_with("Unsupported value: \"NotListed\": supported values: ")),
                "{plural} {field}: {status:#}"
            );
            checked += 1;
        }
    }
    assert!(checked >= 17, "{checked} enums");
}

fn crd(plural: &str) -> Value {
    let path = format!("{}/../manifests/crds/{plural}.groundskeeper.dev.yaml", env!("CARGO_MANIFEST_DIR"));
    serde_saphyr::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn enum_paths(schema: &Value, path: &mut Vec<String>, found: &mut Vec<Vec<String>>) {
    if schema.get("enum").is_some() {
        found.push(path.clone());
    }
    for (key, child) in schema["properties"].as_object().into_iter().flatten() {
        path.push(key.clone());
        enum_paths(child, path, found);
        path.pop();
    }
    if schema["items"].is_object() {
        let last = path.pop().unwrap_or_default();
        path.push(format!("{last}[]"));
        enum_paths(&schema["items"], path, found);
        path.pop();
        path.push(last);
    }
}

/// One violating spec per CEL rule of the MaintenanceTask CRD (besides immutability), with the
/// field and message the API answers; the same rules guard a schedule's task template.
fn rule_violations() -> Vec<(Value, &'static str, &'static str)> {
    let target = |kind: &str| json!({ "kind": kind, "name": "main" });
    let config_for_other_type = |member: &str, config: Value| {
        let other = if member == "compact" { "Defragment" } else { "Compact" };
        json!({ "target": target("EtcdCluster"), "type": other, "config": { member: config } })
    };
    let bucket = json!({ "bucket": { "url": "s3://b" } });
    let mut cases = vec![(
        json!({ "target": target("EtcdCluster"), "type": "Cleanup" }),
        "target.kind",
        "type Cleanup needs target kind ScyllaCluster",
    )];
    for (member, config) in [
        ("cleanup", json!({})),
        ("compact", json!({})),
        ("defragment", json!({})),
        ("maintenance", json!({})),
        ("snapshot", json!({})),
        ("copy", json!({ "from": bucket, "to": bucket })),
        ("verify", json!({})),
        ("restore", json!({ "from": bucket, "confirm": true })),
    ] {
        let message: &'static str = format!("config.{member} is only for type").leak();
        let field: &'static str = format!("config.{member}").leak();
        cases.push((config_for_other_type(member, config), field, message));
    }
    cases.push((
        json!({ "target": target("EtcdCluster"), "type": "Restore", "config": { "restore": { "from": bucket } } }),
        "config.restore",
        "a Restore replaces the data of every member: confirm it with config.restore.confirm: true",
    ));
    let both = json!({ "retainRevisions": 1, "revision": 5 });
    cases.push((
        json!({ "target": target("EtcdCluster"), "type": "Compact", "config": { "compact": both } }),
        "config.compact",
        "give one of retainRevisions and revision, not both",
    ));
    cases.push((
        json!({ "target": target("EtcdCluster"), "type": "Maintenance", "config": { "maintenance": { "compact": both } } }),
        "config.maintenance.compact",
        "give one of retainRevisions and revision, not both",
    ));
    let claim = |extra: Value| {
        let mut store = json!({ "persistentVolumeClaim": "snaps" });
        store.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        store
    };
    let key = json!({ "encryption": { "secretName": "backup-key" } });
    cases.push((
        json!({ "target": target("EtcdCluster"), "type": "Copy",
                "config": { "copy": { "from": claim(key.clone()), "to": bucket } } }),
        "config.copy.from",
        "a copy carries objects as they are; compressed or encrypted ones stay so",
    ));
    cases.push((
        json!({ "target": target("EtcdCluster"), "type": "Copy",
                "config": { "copy": { "from": bucket, "to": claim(json!({ "compression": "zstd" })) } } }),
        "config.copy.to",
        "a copy carries objects as they are; compressed or encrypted ones stay so",
    ));
    cases.push((
        json!({ "target": target("EtcdCluster"), "type": "Verify",
                "config": { "verify": { "from": claim(json!({ "compression": "zstd" })) } } }),
        "config.verify.from.compression",
        "a Verify only reads",
    ));
    cases.push((
        json!({ "target": target("EtcdCluster"), "type": "Restore",
                "config": { "restore": { "confirm": true, "from": claim(json!({ "compression": "zstd" })) } } }),
        "config.restore.from.compression",
        "a Restore only reads",
    ));
    cases
}

#[tokio::test]
async fn every_cel_rule_refuses_what_it_forbids() {
    let server = ApiServer::start().await.unwrap();
    for (i, (spec, field, message)) in rule_violations().into_iter().enumerate() {
        let status = refused(server.create(&tasks(), Some(NS), task(&format!("t{i}"), spec.clone())));
        assert_eq!(status["reason"], "Invalid");
        let found = causes(&status);
        assert!(
            found.iter().any(|(f, reason, m)| *f == format!("spec.{field}")
                && reason == "FieldValueInvalid"
                && m.starts_with(&format!("Invalid value: \"object\": {message}"))),
            "spec.{field}: {status:#}"
        );
        let mut schedule = valid("maintenanceschedules", &format!("s{i}"));
        schedule["spec"]["taskTemplate"]["spec"] = spec;
        let status = refused(server.create(&own("maintenanceschedules"), Some(NS), schedule));
        assert!(
            causes(&status).iter().any(|(f, _, m)| *f == format!("spec.taskTemplate.spec.{field}")
                && m.starts_with(&format!("Invalid value: \"object\": {message}"))),
            "schedule spec.taskTemplate.spec.{field}: {status:#}"
        );
    }
}

#[tokio::test]
async fn a_task_spec_is_immutable_its_metadata_and_status_are_not() {
    let server = ApiServer::start().await.unwrap();
    let created = server.create(&tasks(), Some(NS), task("t", compact_spec())).unwrap();
    let mut changed = created.clone();
    changed["spec"]["config"]["compact"]["retainRevisions"] = json!(5);
    let status = refused(server.replace(&tasks(), Some(NS), "t", changed));
    assert_eq!(
        status["message"],
        "MaintenanceTask.groundskeeper.dev \"t\" is invalid: spec: Invalid value: \"object\": spec is immutable: delete this MaintenanceTask and create a new one"
    );
    assert_eq!(causes(&status)[0].0, "spec");
    let patch = json!({ "spec": { "deadlineSeconds": 60 } });
    assert!(server.patch(&tasks(), Some(NS), "t", PatchFormat::Merge, &patch, false).is_err());

    let labels = json!({ "metadata": { "labels": { "a": "b" } } });
    server.patch(&tasks(), Some(NS), "t", PatchFormat::Merge, &labels, false).unwrap();
    let state = json!({ "status": { "state": "InProgress" } });
    let written = server.patch(&tasks(), Some(NS), "t", PatchFormat::Merge, &state, true).unwrap();
    assert_eq!(written["status"]["state"], "InProgress");
}

#[tokio::test]
async fn types_required_fields_bounds_and_lengths_are_checked() {
    let server = ApiServer::start().await.unwrap();
    let spec = json!({
        "type": "Compact",
        "target": { "kind": "EtcdCluster", "name": "" },
        "ttlSecondsAfterFinished": "an hour",
        "requireApproval": "yes",
        "config": { "compact": { "retainRevisions": -1, "revision": 2.5 } },
    });
    let status = refused(server.create(&tasks(), Some(NS), task("bad", spec)));
    let text = |s: &str| s.to_string();
    assert_eq!(
        causes(&status),
        [
            (
                text("spec.config.compact.retainRevisions"),
                text("FieldValueInvalid"),
                text(
                    "Invalid value: -1: spec.config.compact.retainRevisions in body should be greater than or equal to 0"
                )
            ),
            (
                text("spec.config.compact.revision"),
                text("FieldValueTypeInvalid"),
                text(
                    "Invalid value: \"float64\": spec.config.compact.revision in body must be of type int64: \"float64\""
                )
            ),
            (
                text("spec.requireApproval"),
                text("FieldValueTypeInvalid"),
                text(
                    "Invalid value: \"string\": spec.requireApproval in body must be of type boolean: \"string\""
                )
            ),
            (
                text("spec.target.name"),
                text("FieldValueInvalid"),
                text("Invalid value: \"\": spec.target.name in body should be at least 1 chars long")
            ),
            (
                text("spec.ttlSecondsAfterFinished"),
                text("FieldValueTypeInvalid"),
                text(
                    "Invalid value: \"string\": spec.ttlSecondsAfterFinished in body must be of type integer: \"string\""
                )
            ),
            (
                text("<nil>"),
                text("FieldValueInvalid"),
                text(
                    "Invalid value: \"null\": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"
                )
            ),
        ]
    );
    let status = refused(server.create(&tasks(), Some(NS), task("bare", json!({ "type": "Compact" }))));
    assert_eq!(causes(&status)[0], (text("spec.target"), text("FieldValueRequired"), text("Required value")));
    let status = refused(server.create(&tasks(), Some(NS), json!({ "metadata": { "name": "nospec" } })));
    assert_eq!(
        status["message"],
        "MaintenanceTask.groundskeeper.dev \"nospec\" is invalid: [spec: Required value, <nil>: Invalid value: \"null\": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation]"
    );
    let mut long = compact_spec();
    long["target"]["name"] = json!("x".repeat(254));
    let status = refused(server.create(&tasks(), Some(NS), task("long", long)));
    assert_eq!(
        causes(&status)[0],
        (
            text("spec.target.name"),
            text("FieldValueTooLong"),
            text("Too long: may not be more than 253 bytes")
        )
    );

    let cluster = json!({ "metadata": { "name": "c" }, "spec": { "endpoints": [], "partition": { "clusterId": 64, "fleet": "f" } } });
    let status = refused(server.create(&own("etcdclusters"), Some(NS), cluster));
    assert_eq!(
        causes(&status),
        [
            (
                text("spec.endpoints"),
                text("FieldValueInvalid"),
                text("Invalid value: 0: spec.endpoints in body should have at least 1 items")
            ),
            (
                text("spec.partition.clusterId"),
                text("FieldValueInvalid"),
                text(
                    "Invalid value: 64: spec.partition.clusterId in body should be less than or equal to 63"
                )
            ),
        ]
    );
}

#[tokio::test]
async fn unknown_fields_are_pruned_and_defaults_applied() {
    let server = ApiServer::start().await.unwrap();
    let mut spec = compact_spec();
    spec["retries"] = json!(3);
    spec["target"]["namespace"] = json!("elsewhere");
    spec["deadlineSeconds"] = Value::Null; // nullable: kept as null
    spec["requireApproval"] = Value::Null; // not nullable, no default: dropped
    spec["ttlSecondsAfterFinished"] = Value::Null; // not nullable, a default: defaulted
    let mut object = task("t", spec);
    object["metadata"]["colour"] = json!("blue");
    object["status"] = json!({ "state": "Completed" });
    let created = server.create(&tasks(), Some(NS), object).unwrap();
    assert_eq!(created["spec"].get("retries"), None);
    assert_eq!(created["spec"]["target"], json!({ "kind": "EtcdCluster", "name": "main" }));
    assert_eq!(created["spec"]["deadlineSeconds"], Value::Null);
    assert!(created["spec"]["deadlineSeconds"].is_null() && created["spec"].get("deadlineSeconds").is_some());
    assert_eq!(created["spec"].get("requireApproval"), None);
    assert_eq!(created["spec"]["ttlSecondsAfterFinished"], 3600);
    assert_eq!(created["metadata"].get("colour"), None);
    assert_eq!(created.get("status"), None, "status is the status subresource's");

    let status = json!({ "status": { "state": "InProgress", "mood": "fine", "nodes": [{ "name": "n", "state": "Running", "extra": 1 }] } });
    let written = server.patch(&tasks(), Some(NS), "t", PatchFormat::Merge, &status, true).unwrap();
    assert_eq!(
        written["status"],
        json!({ "state": "InProgress", "nodes": [{ "name": "n", "state": "Running" }] })
    );

    // A default object gets its own fields' defaults; a nullable object absent stays absent.
    let cluster = server.create(&own("etcdclusters"), Some(NS), valid("etcdclusters", "c")).unwrap();
    assert_eq!(
        cluster["spec"]["policy"],
        json!({ "allowSingleMember": false, "checkInterval": "10m", "enabled": true, "maxFragmentedPercent": 45.0, "minDefragBytes": 100_000_000, "moveLeader": true })
    );
    assert_eq!(cluster["spec"]["job"], json!({}));
    assert_eq!(cluster["spec"].get("maintenanceWindows"), None);
    let windows = json!({ "spec": { "maintenanceWindows": { "windows": ["* 02:00-04:00"] } } });
    let patched =
        server.patch(&own("etcdclusters"), Some(NS), "c", PatchFormat::Merge, &windows, false).unwrap();
    assert_eq!(patched["spec"]["maintenanceWindows"]["timeZone"], "UTC");
}

/// `(status code, Warning headers, body)` of a raw request.
async fn send(server: &ApiServer, request: Request<Vec<u8>>) -> (u16, Vec<String>, Value) {
    let response = server.client().send(request.map(Into::into)).await.unwrap();
    let code = response.status().as_u16();
    let warnings =
        response.headers().get_all("warning").iter().map(|v| v.to_str().unwrap().to_string()).collect();
    let bytes = response.into_body().collect_bytes().await.unwrap();
    (code, warnings, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

fn post_task(query: &str, body: &Value) -> Request<Vec<u8>> {
    Request::builder()
        .method(Method::POST)
        .uri(format!("/apis/groundskeeper.dev/v1alpha1/namespaces/{NS}/maintenancetasks{query}"))
        .header("content-type", "application/json")
        .body(body.to_string().into_bytes())
        .unwrap()
}

#[tokio::test]
async fn field_validation_strict_warn_and_ignore() {
    let server = ApiServer::start().await.unwrap();
    let mut spec = compact_spec();
    spec["retries"] = json!(3);
    spec["target"]["zone"] = json!("a");

    let (code, _, body) =
        send(&server, post_task("?fieldValidation=Strict", &task("strict", spec.clone()))).await;
    assert_eq!(code, 400);
    assert_eq!(body["reason"], "BadRequest");
    assert_eq!(
        body["message"],
        "MaintenanceTask in version \"v1alpha1\" cannot be handled as a MaintenanceTask: strict decoding error: unknown field \"spec.retries\", unknown field \"spec.target.zone\""
    );
    assert!(server.get(&tasks(), Some(NS), "strict").is_none());

    let (code, warnings, body) = send(&server, post_task("", &task("warned", spec.clone()))).await;
    assert_eq!(code, 201, "Warn is the default: {body:#}");
    assert_eq!(
        warnings,
        ["299 - \"unknown field \\\"spec.retries\\\"\"", "299 - \"unknown field \\\"spec.target.zone\\\"\""]
    );
    assert_eq!(body["spec"].get("retries"), None);

    let (code, warnings, body) =
        send(&server, post_task("?fieldValidation=Ignore", &task("ignored", spec))).await;
    assert_eq!((code, warnings.len()), (201, 0));
    assert_eq!(body["spec"]["target"], json!({ "kind": "EtcdCluster", "name": "main" }));

    // A patch's strict decoding error names only the fields.
    let api = tasks_api(&server);
    let patch = json!({ "metadata": { "labels": { "a": "b" } }, "spec": { "retries": 1 } });
    let params = PatchParams::default().validation_strict();
    let error = api.patch("warned", &params, &Patch::Merge(&patch)).await.unwrap_err();
    let kube::Error::Api(status) = error else { panic!("{error:?}") };
    assert_eq!(
        (status.code, status.message.as_str()),
        (400, "strict decoding error: unknown field \"spec.retries\"")
    );
}

fn tasks_api(server: &ApiServer) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("groundskeeper.dev", "v1alpha1", "MaintenanceTask");
    Api::namespaced_with(server.client(), NS, &ApiResource::from_gvk_with_plural(&gvk, "maintenancetasks"))
}

#[tokio::test]
async fn a_dry_run_checks_everything_and_stores_nothing() {
    let server = ApiServer::start().await.unwrap();
    let api = tasks_api(&server);
    let dry = PostParams { dry_run: true, ..PostParams::default() };
    let object: DynamicObject = serde_json::from_value(task("t", compact_spec())).unwrap();
    let revision = server.revision();
    let mut changes = server.subscribe();

    let answered = api.create(&dry, &object).await.unwrap();
    assert_eq!(answered.data["spec"]["ttlSecondsAfterFinished"], 3600, "defaulted");
    assert!(answered.metadata.uid.is_some());
    assert_eq!(answered.metadata.resource_version, None);
    assert!(server.get(&tasks(), Some(NS), "t").is_none());
    let mut bad = object.clone();
    bad.data["spec"]["type"] = json!("Vacuum");
    let kube::Error::Api(status) = api.create(&dry, &bad).await.unwrap_err() else { panic!() };
    assert_eq!(status.code, 422);
    assert_eq!(server.revision(), revision, "no resourceVersion consumed");

    let created = api.create(&PostParams::default(), &object).await.unwrap();
    let revision = server.revision();
    let mut labelled = created.clone();
    labelled.metadata.labels = Some([("a".to_string(), "b".to_string())].into());
    let answered = api.replace("t", &dry, &labelled).await.unwrap();
    assert_eq!(answered.metadata.labels, labelled.metadata.labels);
    let patch = Patch::Merge(json!({ "spec": { "type": "Defragment", "config": null } }));
    let kube::Error::Api(status) =
        api.patch("t", &PatchParams::default().dry_run(), &patch).await.unwrap_err()
    else {
        panic!()
    };
    assert!(status.message.contains("spec is immutable"), "{}", status.message);
    let dry_delete = DeleteParams { dry_run: true, ..DeleteParams::default() };
    api.delete("t", &dry_delete).await.unwrap();
    assert_eq!(server.revision(), revision);
    let stored = server.get(&tasks(), Some(NS), "t").unwrap();
    assert_eq!(stored["metadata"].get("labels"), None);

    // Only the real create was published.
    let first = groundskeeper_e2e::wait::within("the next change", changes.next()).await.unwrap().unwrap();
    assert_eq!(first.object["metadata"]["name"], "t");
    let next = tokio::time::timeout(std::time::Duration::from_millis(200), changes.next()).await;
    assert!(next.is_err(), "no other change: {next:?}");
}

#[tokio::test]
async fn status_writes_are_held_to_the_status_schema() {
    let server = ApiServer::start().await.unwrap();
    server.create(&tasks(), Some(NS), task("t", compact_spec())).unwrap();
    let bad = json!({ "status": { "state": "Done", "startedAt": "yesterday", "progress": 3 } });
    let status = refused(server.patch(&tasks(), Some(NS), "t", PatchFormat::Merge, &bad, true));
    let text = |s: &str| s.to_string();
    assert_eq!(
        causes(&status),
        [
            (
                text("status.progress"),
                text("FieldValueTypeInvalid"),
                text("Invalid value: \"integer\": progress in body must be of type string: \"integer\"")
            ),
            (
                text("status.startedAt"),
                text("FieldValueTypeInvalid"),
                text(
                    "Invalid value: \"yesterday\": startedAt in body must be of type date-time: \"yesterday\""
                )
            ),
            (
                text("status.state"),
                text("FieldValueNotSupported"),
                text(
                    "Unsupported value: \"Done\": supported values: \"Pending\", \"InProgress\", \"Completed\", \"Failed\", \"Rejected\""
                )
            ),
            (
                text("<nil>"),
                text("FieldValueInvalid"),
                text(
                    "Invalid value: \"null\": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"
                )
            ),
        ]
    );
    // On the main endpoint the status is ignored, whatever it holds.
    let mut object = server.get(&tasks(), Some(NS), "t").unwrap();
    object["status"] = json!({ "state": "Done" });
    let replaced = server.replace(&tasks(), Some(NS), "t", object).unwrap();
    assert_eq!(replaced.get("status"), None);
}

/// Without scylla-operator's CRDs (no reference folder) its types have no schema; with them a
/// ScyllaCluster is held to scylla-operator's.
#[tokio::test]
async fn scylla_clusters_are_held_to_scylla_operators_crd_when_it_is_there() {
    let server = ApiServer::start().await.unwrap();
    let clusters = ResourceId::new("scylla.scylladb.com", "v1", "scyllaclusters");
    let rack = json!({ "name": "r", "members": "three" });
    let object = json!({ "metadata": { "name": "c" }, "spec": { "datacenter": { "name": "dc", "racks": [rack] }, "colour": 1 } });
    if groundskeeper_e2e::reference::scylla_dir(
        "scylla_clusters_are_held_to_scylla_operators_crd_when_it_is_there",
    )
    .is_none()
    {
        server.create(&clusters, Some(NS), object).unwrap();
        return;
    }
    let status = refused(server.create(&clusters, Some(NS), object.clone()));
    assert_eq!(
        causes(&status)[0],
        (
            "spec.datacenter.racks[0].members".to_string(),
            "FieldValueTypeInvalid".to_string(),
            "Invalid value: \"string\": spec.datacenter.racks[0].members in body must be of type integer: \"string\"".to_string()
        ),
        "{status:#}"
    );
    let mut fixed = object;
    fixed["spec"]["datacenter"]["racks"][0]["members"] = json!(1);
    let created = server.create(&clusters, Some(NS), fixed).unwrap();
    assert_eq!(created["spec"].get("colour"), None, "pruned");
}
