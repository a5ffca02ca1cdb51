//! `manifests/install/namespaced/` is what the generator makes for the examples' namespaces, and the
//! Deployment reads the namespaces from the ConfigMap it holds.

use std::path::Path;

use groundskeeper_controller::runtime::deploy::{
    CONTROLLER_NAMESPACE, NAME, NAMESPACES_KEY, namespaced_rbac,
};
use serde_json::Value;

fn manifest(relative: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../manifests").join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}

#[test]
fn checked_in_namespaced_rbac_matches_the_generator() {
    let generated = namespaced_rbac(&["scylla".into(), "etcd".into()]).unwrap();
    assert!(
        manifest("install/namespaced/rbac.yaml") == generated,
        "manifests/install/namespaced/rbac.yaml is out of date: run `cargo run -p \
         groundskeeper-controller --bin namespaced-rbac -- scylla etcd > \
         manifests/install/namespaced/rbac.yaml` and commit the result"
    );
}

#[test]
fn the_deployment_reads_the_namespaces_from_that_config_map() {
    let deployment: Value = serde_saphyr::from_str(&manifest("base/deployment.yaml")).unwrap();
    assert_eq!(deployment["metadata"]["namespace"], CONTROLLER_NAMESPACE);
    let env = deployment["spec"]["template"]["spec"]["containers"][0]["env"].as_array().unwrap();
    let namespaces = env
        .iter()
        .find(|e| e["name"] == "GROUNDSKEEPER_NAMESPACES")
        .expect("GROUNDSKEEPER_NAMESPACES in the Deployment");
    let source = &namespaces["valueFrom"]["configMapKeyRef"];
    assert_eq!(source["name"], NAME);
    assert_eq!(source["key"], NAMESPACES_KEY);
    assert_eq!(source["optional"], true, "cluster-wide mode has no ConfigMap: the variable is then unset");
}
