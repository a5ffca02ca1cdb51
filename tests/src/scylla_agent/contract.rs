//! The stand-in against Scylla's own API description: every route it serves exists there with
//! that method, path parameters and query parameters, returns the type the reference names, and
//! the JSON objects it builds use only the reference model's properties.

use super::*;

fn reference(file: &str) -> Value {
    let dir = crate::reference::scylla_dir(file).expect("checked by the test");
    serde_json::from_str(&crate::reference::read(&dir, file)).unwrap_or_else(|e| panic!("{file}: {e}"))
}

/// The reference file describing a path: `/task_manager/...` is in `task_manager.json`.
fn file_for(path: &str) -> String {
    let first = path.trim_start_matches('/').split('/').next().unwrap();
    format!("{first}.json")
}

fn operation(route: &Route) -> Value {
    let doc = reference(&file_for(route.path));
    let api = doc["apis"]
        .as_array()
        .unwrap()
        .iter()
        .find(|api| api["path"] == route.path)
        .unwrap_or_else(|| panic!("{} is not in {}", route.path, file_for(route.path)))
        .clone();
    api["operations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|op| op["method"] == route.method)
        .unwrap_or_else(|| panic!("{} {} is not in the reference", route.method, route.path))
        .clone()
}

fn parameters(op: &Value, param_type: &str) -> Vec<(String, bool)> {
    op["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["paramType"] == param_type)
        .map(|p| (p["name"].as_str().unwrap().to_owned(), p["required"] == true))
        .collect()
}

fn reference_return_type(op: &Value) -> String {
    let ty = op["type"].as_str().unwrap();
    match ty {
        "array" => format!("array<{}>", op["items"]["type"].as_str().unwrap()),
        _ => ty.to_owned(),
    }
}

#[test]
fn every_route_exists_in_the_reference_with_its_method_and_parameters() {
    if crate::reference::scylla_dir("every_route_exists_in_the_reference_with_its_method_and_parameters")
        .is_none()
    {
        return;
    }
    for route in ROUTES {
        let op = operation(route);
        let what = format!("{} {}", route.method, route.path);

        let path_params: Vec<String> = route
            .path
            .split('/')
            .filter_map(|s| s.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
            .map(str::to_owned)
            .collect();
        let reference_path: Vec<String> = parameters(&op, "path").into_iter().map(|p| p.0).collect();
        assert_eq!(path_params, reference_path, "{what}: path parameters");

        let reference_query = parameters(&op, "query");
        for name in route.query {
            assert!(
                reference_query.iter().any(|(n, _)| n == name),
                "{what}: query parameter {name} is not in the reference"
            );
        }
        for (name, required) in &reference_query {
            let enforced = REQUIRED_QUERY.contains(&(route.path, name.as_str()));
            assert_eq!(*required, enforced, "{what}: is {name} required?");
            if *required {
                assert!(route.query.contains(&name.as_str()), "{what}: {name} not accepted");
            }
        }

        assert_eq!(route.returns, reference_return_type(&op), "{what}: return type");
    }
}

fn model_properties(file: &str, model: &str) -> Vec<String> {
    let doc = reference(file);
    doc["models"][model]["properties"]
        .as_object()
        .unwrap_or_else(|| panic!("{file}: no model {model}"))
        .keys()
        .cloned()
        .collect()
}

fn assert_fields_in_model(value: &Value, file: &str, model: &str) {
    let properties = model_properties(file, model);
    for key in value.as_object().unwrap().keys() {
        assert!(properties.contains(key), "{model}: {key} is not in {file}");
    }
}

fn enum_values(file: &str, model: &str, property: &str) -> Vec<String> {
    let doc = reference(file);
    doc["models"][model]["properties"][property]["enum"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn response_objects_use_the_reference_models() {
    if crate::reference::scylla_dir("response_objects_use_the_reference_models").is_none() {
        return;
    }
    let task = Task {
        id: task_id(7),
        keyspace: "ks".into(),
        state: "running",
        error: String::new(),
        polls: 1,
        stale: false,
    };
    let status = task_status_json(&task, 3);
    assert_fields_in_model(&status, "task_manager.json", "task_status");
    assert_fields_in_model(&task_stats_json(&task), "task_manager.json", "task_stats");
    for state in ["created", "running", "done", "failed"] {
        assert!(enum_values("task_manager.json", "task_status", "state").contains(&state.to_owned()));
    }

    let summary = json!({
        "id": task_id(0), "ks": "k", "cf": "t", "completed": 1, "total": 2,
        "task_type": CLEANUP_COMPACTION_TYPE, "unit": "bytes",
    });
    assert_fields_in_model(&summary, "compaction_manager.json", "summary");
}

#[test]
fn keyspace_filters_are_the_reference_enums() {
    if crate::reference::scylla_dir("keyspace_filters_are_the_reference_enums").is_none() {
        return;
    }
    let op = operation(ROUTES.iter().find(|r| r.path == "/storage_service/keyspaces").unwrap());
    let values = |name: &str| -> Vec<String> {
        op["parameters"].as_array().unwrap().iter().find(|p| p["name"] == name).unwrap()["enum"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(values("type"), ["all", "user", "non_local_strategy"]);
    assert_eq!(values("replication"), ["all", "vnodes", "tablets"]);
}

#[test]
fn stop_compaction_types_are_the_documented_ones() {
    if crate::reference::scylla_dir("stop_compaction_types_are_the_documented_ones").is_none() {
        return;
    }
    let op = operation(ROUTES.iter().find(|r| r.path == "/compaction_manager/stop_compaction").unwrap());
    let description = op["parameters"][0]["description"].as_str().unwrap();
    assert!(description.contains("CLEANUP"), "{description}");
}

#[test]
fn routes_match_paths_and_extract_parameters() {
    let (route, params) = route(&Method::POST, "/tasks/compaction/keyspace_cleanup/ks1").unwrap();
    assert_eq!(route.path, "/tasks/compaction/keyspace_cleanup/{keyspace}");
    assert_eq!(params["keyspace"], "ks1");
    assert!(super::route(&Method::GET, "/tasks/compaction/keyspace_cleanup/ks1").is_none());
    assert!(super::route(&Method::GET, "/storage_service/tokens/").is_none());
    assert_eq!(percent_decode("a%2Fb%3A"), "a/b:");
}

/// Checks `value` against a model of `file` recursively: every property the model lists is
/// present with the model's JSON type (nested models and arrays of them included), and nothing
/// else is.
fn assert_matches_model(value: &Value, file: &str, model: &str) {
    let doc = reference(file);
    let properties =
        doc["models"][model]["properties"].as_object().unwrap_or_else(|| panic!("{file}: no model {model}"));
    let object = value.as_object().unwrap_or_else(|| panic!("{model}: not an object: {value}"));
    let mut names: Vec<&String> = object.keys().collect();
    names.sort();
    let mut expected: Vec<&String> = properties.keys().collect();
    expected.sort();
    assert_eq!(names, expected, "{model}: properties");
    for (name, property) in properties {
        let field = &object[name];
        assert_matches_type(field, property, file, &format!("{model}.{name}"));
    }
}

fn assert_matches_type(value: &Value, property: &Value, file: &str, what: &str) {
    match property["type"].as_str().unwrap() {
        "string" => assert!(value.is_string(), "{what}: {value} is not a string"),
        "array" => {
            let items = value.as_array().unwrap_or_else(|| panic!("{what}: not an array"));
            for item in items {
                assert_matches_type(item, &property["items"], file, what);
            }
        }
        model => assert_matches_model(value, file, model),
    }
}

#[test]
fn describe_ring_answers_token_ranges_of_the_reference_model() {
    if crate::reference::scylla_dir("describe_ring_answers_token_ranges_of_the_reference_model").is_none() {
        return;
    }
    let cluster = cluster::Cluster::new(3, 4);
    cluster.join("10.0.0.1", "dc1", "r1").unwrap();
    cluster.join("10.0.0.2", "dc1", "r2").unwrap();
    cluster.join("10.0.0.3", "dc2", "r1").unwrap();
    cluster.create_keyspace("ks", cluster::Strategy::nts(&[("dc1", 2), ("dc2", 1)]));
    let route = ROUTES.iter().find(|r| r.path == "/storage_service/describe_ring/{keyspace}").unwrap();
    assert_eq!(route.returns, "array<token_range>");
    let rows = cluster.describe_ring_json("ks", "10.0.0.1").unwrap();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 12, "one row per token");
    for row in rows {
        assert_matches_model(row, "storage_service.json", "token_range");
        for token in ["start_token", "end_token"] {
            let text = row[token].as_str().unwrap();
            assert_eq!(text.parse::<i64>().unwrap().to_string(), text, "{token}: decimal int64");
        }
        assert_eq!(row["endpoints"].as_array().unwrap().len(), 3);
    }
}

#[test]
fn describe_ring_takes_only_the_reference_parameters() {
    if crate::reference::scylla_dir("describe_ring_takes_only_the_reference_parameters").is_none() {
        return;
    }
    let op =
        operation(ROUTES.iter().find(|r| r.path == "/storage_service/describe_ring/{keyspace}").unwrap());
    // `table` (tablets of one table) is optional and groundskeeper never sends it: the stand-in
    // refuses it like any parameter it does not serve.
    assert_eq!(parameters(&op, "query"), [("table".to_owned(), false)]);
}

#[test]
fn ownership_answers_mappers_of_the_reference_model() {
    if crate::reference::scylla_dir("ownership_answers_mappers_of_the_reference_model").is_none() {
        return;
    }
    let cluster = cluster::Cluster::new(5, 8);
    cluster.join("10.0.0.1", "dc1", "r1").unwrap();
    cluster.join("10.0.0.2", "dc1", "r1").unwrap();
    cluster.join("10.0.0.3", "dc1", "r1").unwrap();
    cluster.create_keyspace("ks", cluster::Strategy::Simple { rf: 2 });
    let shares = cluster.effective_ownership("ks", "10.0.0.1").unwrap();
    let total: f32 = shares.iter().map(|(_, s)| s).sum();
    assert!((total - 2.0).abs() < 1e-5, "RF 2: the shares add up to 2, got {total}");
    let row = json!({"key": shares[0].0, "value": shares[0].1.to_string()});
    assert_matches_model(&row, "storage_service.json", "mapper");
    let route = ROUTES.iter().find(|r| r.path == "/storage_service/ownership/{keyspace}").unwrap();
    assert_eq!(route.returns, "array<mapper>");
}
