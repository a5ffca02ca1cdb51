//! The CRDs under `manifests/crds/` are what the Rust types generate.

use std::path::Path;

#[test]
fn checked_in_crds_match_the_types() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../manifests/crds");
    for (file, crd) in groundskeeper_api::crds::all() {
        let path = dir.join(file);
        let checked_in = std::fs::read_to_string(&path).unwrap_or_else(|err| {
            panic!("{}: {err}; run `cargo run -p groundskeeper-controller --bin crdgen`", path.display())
        });
        assert!(
            checked_in == groundskeeper_api::crds::to_yaml(&crd),
            "{} is out of date: run `cargo run -p groundskeeper-controller --bin crdgen` and commit the result",
            path.display()
        );
    }
}

#[test]
fn no_stray_crd_files() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../manifests/crds");
    let known: Vec<_> = groundskeeper_api::crds::all().into_iter().map(|(f, _)| f.to_owned()).collect();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        assert!(
            known.contains(&name) || name == "kustomization.yaml",
            "manifests/crds/{name} is not generated from any type"
        );
    }
}

/// kustomize installs the CRDs its kustomization lists: every generated one, and nothing else.
#[test]
fn the_kustomization_lists_every_crd() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../manifests/crds/kustomization.yaml");
    let kustomization: serde_json::Value =
        serde_saphyr::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let mut listed: Vec<&str> =
        kustomization["resources"].as_array().unwrap().iter().filter_map(|r| r.as_str()).collect();
    listed.sort_unstable();
    let mut generated: Vec<&str> = groundskeeper_api::crds::all().into_iter().map(|(f, _)| f).collect();
    generated.sort_unstable();
    assert_eq!(listed, generated, "{}: list exactly the generated CRDs", path.display());
}
