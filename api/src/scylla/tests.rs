//! The partial views against scylla-operator's real CRDs (the reference files beside the repository, see `groundskeeper_e2e::reference`):
//! example objects valid against the CRD deserialise, and every field the views model exists in
//! the CRD's schema at the same path.

use serde_json::{Value, json};

use super::{ScyllaCluster, ScyllaDBDatacenter};

fn schema(file: &str, version: &str) -> Value {
    let dir = groundskeeper_e2e::reference::scylla_dir(file).expect("checked by the test");
    let text = groundskeeper_e2e::reference::read(&dir, file);
    let crd: Value = serde_saphyr::from_str(&text).unwrap_or_else(|err| panic!("parse {file}: {err}"));
    crd["spec"]["versions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == version)
        .unwrap_or_else(|| panic!("{file}: no version {version}"))["schema"]["openAPIV3Schema"]
        .clone()
}

/// Structural check of `value` against an OpenAPI v3 schema: every field exists in the schema,
/// required fields are present, types and enums match. `metadata` is the API server's.
fn validate(schema: &Value, value: &Value, path: &str) -> Result<(), String> {
    let fail = |what: String| Err(format!("{path}: {what}"));
    if schema["x-kubernetes-int-or-string"] == true {
        return if value.is_i64() || value.is_string() {
            Ok(())
        } else {
            fail(format!("not an int or string: {value}"))
        };
    }
    if let Some(allowed) = schema["enum"].as_array()
        && !allowed.contains(value)
    {
        return fail(format!("{value} is not one of {allowed:?}"));
    }
    match schema["type"].as_str() {
        Some("object") => {
            let Some(object) = value.as_object() else {
                return fail(format!("not an object: {value}"));
            };
            for required in schema["required"].as_array().into_iter().flatten() {
                if !object.contains_key(required.as_str().unwrap()) {
                    return fail(format!("missing required field {required}"));
                }
            }
            for (key, field) in object {
                let field_path = format!("{path}.{key}");
                if path.is_empty() && key == "metadata" {
                    continue;
                }
                if let Some(field_schema) = schema["properties"].get(key) {
                    validate(field_schema, field, &field_path)?;
                } else if let Some(values) = schema.get("additionalProperties").filter(|v| v.is_object()) {
                    validate(values, field, &field_path)?;
                } else if schema["x-kubernetes-preserve-unknown-fields"] != true {
                    return fail(format!("field {key} is not in the schema"));
                }
            }
            Ok(())
        }
        Some("array") => {
            let Some(items) = value.as_array() else {
                return fail(format!("not a list: {value}"));
            };
            for (i, item) in items.iter().enumerate() {
                validate(&schema["items"], item, &format!("{path}[{i}]"))?;
            }
            Ok(())
        }
        Some("string") if !value.is_string() => fail(format!("not a string: {value}")),
        Some("integer") if !value.is_i64() => fail(format!("not an integer: {value}")),
        Some("boolean") if !value.is_boolean() => fail(format!("not a boolean: {value}")),
        _ => Ok(()),
    }
}

fn placement(zone: &str) -> Value {
    json!({
        "tolerations": [{"key": "role", "operator": "Equal", "value": "scylla", "effect": "NoSchedule"}],
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": [zone]}]}]}},
        "podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "podAffinityTerm": {
            "topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "scylla"}}}}]},
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
            "topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"scylla/cluster": "sc"}}}]},
    })
}

fn conditions() -> Value {
    json!([
        {"type": "Available", "status": "True", "reason": "AsExpected", "message": "",
         "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 4},
        {"type": "StatefulSetControllerProgressing", "status": "False", "reason": "AsExpected", "message": "",
         "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 4},
    ])
}

/// A ScyllaCluster as `kubectl get -o json` shows it, with many fields the view does not model.
fn scylla_cluster_example() -> Value {
    json!({
        "apiVersion": "scylla.scylladb.com/v1", "kind": "ScyllaCluster",
        "metadata": {"name": "sc", "namespace": "scylla", "generation": 4, "uid": "u", "resourceVersion": "77",
                     "annotations": {"groundskeeper.dev/cleanup-max-concurrent-per-rack": "2"}},
        "spec": {
            "version": "2025.1.0", "agentVersion": "3.5.0", "developerMode": false,
            "automaticOrphanedNodeCleanup": true,
            "externalSeeds": ["10.1.0.1"],
            "exposeOptions": {"broadcastOptions": {"nodes": {"type": "PodIP"}, "clients": {"type": "PodIP"}}},
            "datacenter": {"name": "dc1", "racks": [
                {"name": "r1", "members": 3, "placement": placement("a"),
                 "storage": {"capacity": "10Gi", "storageClassName": "fast"},
                 "resources": {"requests": {"cpu": "1", "memory": "4Gi"}},
                 "agentResources": {"requests": {"cpu": "50m"}}},
                {"name": "r2", "members": 0, "storage": {"capacity": "10Gi"}},
            ]},
        },
        "status": {"observedGeneration": 4, "members": 3, "readyMembers": 3, "availableMembers": 3,
                   "rackCount": 2, "conditions": conditions(),
                   "racks": {"r1": {"members": 3, "readyMembers": 3, "availableMembers": 3, "stale": false}}},
    })
}

fn scylla_datacenter_example() -> Value {
    json!({
        "apiVersion": "scylla.scylladb.com/v1alpha1", "kind": "ScyllaDBDatacenter",
        "metadata": {"name": "sc", "namespace": "scylla", "generation": 9, "resourceVersion": "80"},
        "spec": {
            "clusterName": "sc", "datacenterName": "dc1",
            "scyllaDB": {"image": "docker.io/scylladb/scylla:2025.1.0"},
            "scyllaDBManagerAgent": {"image": "docker.io/scylladb/scylla-manager-agent:3.5.0"},
            "rackTemplate": {"nodes": 3, "placement": placement("a")},
            "racks": [{"name": "r1"}, {"name": "r2", "nodes": 2, "placement": placement("b")}],
        },
        "status": {"observedGeneration": 9, "currentNodes": 5, "readyNodes": 5, "conditions": conditions()},
    })
}

#[test]
fn scylla_cluster_example_is_valid_and_reads() {
    if groundskeeper_e2e::reference::scylla_dir("scylla_cluster_example_is_valid_and_reads").is_none() {
        return;
    }
    let crd = schema("scyllaclusters.crd.yaml", "v1");
    let example = scylla_cluster_example();
    validate(&crd, &example, "").unwrap();
    let cluster: ScyllaCluster = serde_json::from_value(example).unwrap();
    assert_eq!(cluster.metadata.generation, Some(4));
    assert_eq!(cluster.spec.datacenter.name, "dc1");
    let racks = &cluster.spec.datacenter.racks;
    assert_eq!((racks[0].name.as_str(), racks[0].members), ("r1", 3));
    assert_eq!((racks[1].name.as_str(), racks[1].members, racks[1].placement.is_none()), ("r2", 0, true));
    let placement = racks[0].placement.as_ref().unwrap();
    assert_eq!(placement.tolerations[0].key.as_deref(), Some("role"));
    assert!(placement.node_affinity.is_some() && placement.pod_affinity.is_some());
    assert!(placement.pod_anti_affinity.is_some());
    let status = cluster.status.as_ref().unwrap();
    assert_eq!(status.observed_generation, Some(4));
    assert_eq!(status.condition_status("Available"), Some("True"));
    assert_eq!(status.condition_status("StatefulSetControllerProgressing"), Some("False"));
    assert_eq!(status.condition_status("Degraded"), None);
    assert_eq!(cluster.rack("r2").map(|r| r.members), Some(0));
}

#[test]
fn scylla_datacenter_example_is_valid_and_reads() {
    if groundskeeper_e2e::reference::scylla_dir("scylla_datacenter_example_is_valid_and_reads").is_none() {
        return;
    }
    let crd = schema("scylladbdatacenters.crd.yaml", "v1alpha1");
    let example = scylla_datacenter_example();
    validate(&crd, &example, "").unwrap();
    let datacenter: ScyllaDBDatacenter = serde_json::from_value(example).unwrap();
    assert_eq!(datacenter.datacenter_name(), "dc1");
    assert_eq!(datacenter.spec.cluster_name, "sc");
    assert_eq!(datacenter.spec.rack_template.as_ref().unwrap().nodes, Some(3));
    assert_eq!(datacenter.spec.racks[1].nodes, Some(2));
    assert!(datacenter.spec.racks[0].placement.is_none());
    assert_eq!(datacenter.status.unwrap().observed_generation, Some(9));
}

#[test]
fn every_field_the_views_model_is_in_the_crd_schema() {
    if groundskeeper_e2e::reference::scylla_dir("every_field_the_views_model_is_in_the_crd_schema").is_none()
    {
        return;
    }
    // Serialising a view gives exactly the fields it models, at the paths it reads them from.
    for (file, version, modelled) in [
        (
            "scyllaclusters.crd.yaml",
            "v1",
            serde_json::to_value(serde_json::from_value::<ScyllaCluster>(scylla_cluster_example()).unwrap())
                .unwrap(),
        ),
        (
            "scylladbdatacenters.crd.yaml",
            "v1alpha1",
            serde_json::to_value(
                serde_json::from_value::<ScyllaDBDatacenter>(scylla_datacenter_example()).unwrap(),
            )
            .unwrap(),
        ),
    ] {
        validate(&schema(file, version), &modelled, "").unwrap_or_else(|err| panic!("{file}: {err}"));
    }
}

#[test]
fn the_schema_check_rejects_paths_that_do_not_exist() {
    if groundskeeper_e2e::reference::scylla_dir("the_schema_check_rejects_paths_that_do_not_exist").is_none()
    {
        return;
    }
    let crd = schema("scyllaclusters.crd.yaml", "v1");
    let mut wrong = scylla_cluster_example();
    wrong["spec"]["datacenter"]["racks"][0]["nodes"] = json!(3); // `nodes` is the v1alpha1 name
    let err = validate(&crd, &wrong, "").unwrap_err();
    assert!(err.contains(".spec.datacenter.racks[0]: field nodes is not in the schema"), "{err}");
}

#[test]
fn sparse_and_unexpected_objects_still_read() {
    let cases = [
        json!({}),
        json!({"metadata": {"name": "sc"}}),
        json!({"metadata": {"name": "sc"}, "spec": {}, "status": {}}),
        json!({"metadata": {"name": "sc"}, "spec": {"datacenter": {"racks": [{}]}, "somethingNew": {"x": 1}},
               "status": {"conditions": [{"type": "Available"}, "odd"]}}),
    ];
    for case in cases {
        let cluster: ScyllaCluster =
            serde_json::from_value(case.clone()).unwrap_or_else(|err| panic!("{case}: {err}"));
        assert!(cluster.spec.datacenter.name.is_empty());
        let _: ScyllaDBDatacenter =
            serde_json::from_value(case.clone()).unwrap_or_else(|err| panic!("{case}: {err}"));
    }
    let no_dc_name: ScyllaDBDatacenter = serde_json::from_value(json!({"metadata": {"name": "sc"}})).unwrap();
    assert_eq!(no_dc_name.datacenter_name(), "sc", "an empty datacenterName means the object's name");
}

#[test]
fn views_are_addressed_like_the_crds() {
    use kube::Resource;
    assert_eq!(ScyllaCluster::api_version(&()), "scylla.scylladb.com/v1");
    assert_eq!(
        ScyllaCluster::url_path(&(), Some("ns")),
        "/apis/scylla.scylladb.com/v1/namespaces/ns/scyllaclusters"
    );
    assert_eq!(ScyllaDBDatacenter::api_version(&()), "scylla.scylladb.com/v1alpha1");
    assert_eq!(ScyllaDBDatacenter::kind(&()), "ScyllaDBDatacenter");
    assert_eq!(ScyllaDBDatacenter::plural(&()), "scylladbdatacenters");
}

/// (case, generation, observed, spec members, member Services, progressing, a topology change?)
#[test]
#[allow(clippy::type_complexity)] // a table of cases
fn a_topology_change_is_a_scale_not_yet_carried_out_or_statefulsets_rolling() {
    use crate::scylla::facts::{ClusterFacts, ConditionFacts, topology_change};
    let cases: Vec<(&str, Option<i64>, Option<i64>, i64, usize, Option<&str>, Option<&str>)> = vec![
        ("settled", Some(2), Some(2), 3, 3, Some("False"), None),
        (
            "a scale asked for",
            Some(3),
            Some(2),
            6,
            3,
            Some("False"),
            Some("the spec asks for 6 members, 3 member Services"),
        ),
        ("a scale-in asked for", Some(3), Some(2), 2, 3, None, Some("asks for 2 members")),
        ("another spec edit: no scale", Some(3), Some(2), 3, 3, Some("False"), None),
        (
            "rolling out",
            Some(2),
            Some(2),
            3,
            3,
            Some("True"),
            Some("StatefulSetControllerProgressing: RollingOut"),
        ),
        ("no condition", Some(2), Some(2), 3, 3, None, None),
    ];
    // Members joining or leaving seen only in the racks' status: the spec observed, no condition.
    let joining = ClusterFacts {
        generation: Some(2),
        observed_generation: Some(2),
        spec_members: 6,
        status_members: Some(4),
        ..ClusterFacts::default()
    };
    let why = topology_change(&joining, 6).expect("a topology change");
    assert!(why.contains("its racks have 4 members, the spec asks for 6"), "{why}");
    let settled = ClusterFacts { status_members: Some(6), ..joining.clone() };
    assert_eq!(topology_change(&settled, 6), None);
    for (case, generation, observed, spec_members, services, progressing, want) in cases {
        let cluster = ClusterFacts {
            generation,
            observed_generation: observed,
            spec_members,
            conditions: progressing
                .map(|status| ConditionFacts {
                    type_: "StatefulSetControllerProgressing".into(),
                    status: status.into(),
                    reason: "RollingOut".into(),
                    message: String::new(),
                })
                .into_iter()
                .collect(),
            ..ClusterFacts::default()
        };
        let got = topology_change(&cluster, services);
        match (got, want) {
            (None, None) => {}
            (Some(why), Some(words)) => assert!(why.contains(words), "{case}: {why}"),
            (got, want) => panic!("{case}: {got:?}, want {want:?}"),
        }
    }
}

/// scylla-operator writes its Job controller's conditions on the ScyllaDBDatacenter first (and
/// older versions there alone): found there, they tell that its cleanup controller runs even
/// before any of its Jobs exists. Once seen, the trigger's own condition remembers it: a moment
/// without any sign does not hand the cluster back to the ring-hash trigger.
#[test]
fn scylla_operators_cleanup_is_seen_from_its_datacenters_conditions_and_remembered() {
    use crate::scylla::coexistence::{SCYLLA_OPERATOR_CLEANS_UP, Signal};
    use crate::scylla::facts::{
        ClusterFacts, ConditionFacts, PROGRESSING, datacenter_conditions, operator_cleanup,
    };
    let datacenter: ScyllaDBDatacenter = serde_json::from_value(json!({
        "metadata": {"name": "basic", "namespace": "scylla"},
        "spec": {"clusterName": "basic"},
        "status": {"conditions": [{"type": "Available", "status": "True"},
                                  {"type": "JobControllerDegraded", "status": "False"}]}
    }))
    .unwrap();
    let conditions = datacenter_conditions(&datacenter);
    let types: Vec<&str> = conditions.iter().map(|c| c.type_.as_str()).collect();
    assert_eq!(types, ["Available", "JobControllerDegraded"]);
    let cluster = ClusterFacts { name: "basic".into(), ..ClusterFacts::default() };
    assert_eq!(operator_cleanup(&cluster, &[], &[]).active, None, "nothing on the ScyllaCluster");
    assert_eq!(
        operator_cleanup(&cluster, &conditions, &[]).active,
        Some(Signal::JobControllerCondition("JobControllerDegraded".into()))
    );
    let ours = |reason: &str| ConditionFacts {
        type_: PROGRESSING.into(),
        status: "False".into(),
        reason: reason.into(),
        message: String::new(),
    };
    // (case, the ScyllaCluster's conditions, the ScyllaDBDatacenter's, the signal)
    type Case = (&'static str, Vec<ConditionFacts>, Vec<ConditionFacts>, Option<Signal>);
    let cases: Vec<Case> = vec![
        (
            "remembered on the datacenter",
            vec![],
            vec![ours(SCYLLA_OPERATOR_CLEANS_UP)],
            Some(Signal::Remembered),
        ),
        (
            "remembered on the cluster",
            vec![ours(SCYLLA_OPERATOR_CLEANS_UP)],
            vec![],
            Some(Signal::Remembered),
        ),
        ("our condition for another reason", vec![], vec![ours("Idle")], None),
        (
            "a live sign comes first",
            vec![],
            [conditions.clone(), vec![ours(SCYLLA_OPERATOR_CLEANS_UP)]].concat(),
            Some(Signal::JobControllerCondition("JobControllerDegraded".into())),
        ),
    ];
    for (case, on_cluster, on_datacenter, want) in cases {
        let cluster = ClusterFacts { conditions: on_cluster, ..cluster.clone() };
        assert_eq!(operator_cleanup(&cluster, &on_datacenter, &[]).active, want, "{case}");
    }
}
