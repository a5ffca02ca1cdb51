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

/// Every duration the CRDs' documentation shows as an example (`6h`, `1d`, `1w` in "as a
/// duration (…)") is one the controller takes: a unit the documentation promises is never refused.
#[test]
fn every_duration_the_crds_show_is_one_groundskeeper_takes() {
    fn descriptions<'a>(value: &'a serde_json::Value, found: &mut Vec<&'a str>) {
        match value {
            serde_json::Value::Object(map) => {
                if let Some(serde_json::Value::String(text)) = map.get("description") {
                    found.push(text);
                }
                map.values().for_each(|v| descriptions(v, found));
            }
            serde_json::Value::Array(items) => items.iter().for_each(|v| descriptions(v, found)),
            _ => {}
        }
    }
    let mut examples = Vec::new();
    for (file, crd) in groundskeeper_api::crds::all() {
        let crd = serde_json::to_value(&crd).unwrap();
        let mut found = Vec::new();
        descriptions(&crd, &mut found);
        for text in found {
            let text = text.replace('\n', " ");
            for (_, after) in text.match_indices("as a duration (").map(|(at, m)| text.split_at(at + m.len()))
            {
                let inside = after.split(')').next().unwrap_or_default();
                // Backticked tokens that start like a duration; `fullEvery` and the like are fields.
                for token in inside.split('`').skip(1).step_by(2) {
                    if token.starts_with(|c: char| c.is_ascii_digit()) || token.starts_with("PT") {
                        examples.push((file, token.to_owned()));
                    }
                }
            }
        }
    }
    assert!(examples.len() >= 10, "the CRDs show durations: found only {examples:?}");
    for (file, example) in &examples {
        assert!(
            groundskeeper_stores::duration::parse(example).is_ok(),
            "{file}: the documentation shows the duration `{example}`, which is refused"
        );
    }
}
