//! Every way docs/install.md installs groundskeeper, as the real `kubectl kustomize` renders it:
//! the overlays of `manifests/install/` as they are, each with every add-on, the controller moved
//! to another namespace, and other namespaces looked after with the generator's output. Each
//! rendering holds only kinds known here, grants no wildcard, puts every object in its namespace,
//! is exactly the checked-in files (the Deployment with only its add-ons' flags added), and
//! grants the controller what the scenarios run it with (`groundskeeper_e2e::apiserver::rbac`).
//! Then `kubectl apply -k` of each, as a client dry run and for real, goes to the in-memory API
//! server: kubectl maps kinds to resources through a server's discovery even with
//! `--dry-run=client`, and that server serves no OpenAPI, hence `--validate=false` (the schemas
//! are checked by `kubernetes-validate` in `.ci/run`).
//!
//! Needs kubectl on PATH (kustomize is built into it); without, the tests skip saying so, and
//! under CI=true they fail.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use clap::Parser;
use groundskeeper_controller::Config;
use groundskeeper_controller::runtime::deploy::{
    CONTROLLER_NAMESPACE, NAME, NAMESPACES_KEY, namespaced_rbac,
};
use groundskeeper_e2e::apiserver::rbac::{
    CONTROLLER_SERVICE_ACCOUNT, Grants, controller_grants, controller_grants_namespaced, load_manifests,
};
use groundskeeper_e2e::apiserver::{ApiServer, ResourceType};
use serde_json::Value;

/// Every kind an install may hold: API version, kind, plural, namespaced.
const KINDS: &[(&str, &str, &str, bool)] = &[
    ("v1", "Namespace", "namespaces", false),
    ("v1", "ServiceAccount", "serviceaccounts", true),
    ("v1", "Service", "services", true),
    ("v1", "ConfigMap", "configmaps", true),
    ("apps/v1", "Deployment", "deployments", true),
    ("rbac.authorization.k8s.io/v1", "Role", "roles", true),
    ("rbac.authorization.k8s.io/v1", "RoleBinding", "rolebindings", true),
    ("rbac.authorization.k8s.io/v1", "ClusterRole", "clusterroles", false),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "clusterrolebindings", false),
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition", "customresourcedefinitions", false),
    ("monitoring.coreos.com/v1", "ServiceMonitor", "servicemonitors", true),
    ("monitoring.coreos.com/v1", "PrometheusRule", "prometheusrules", true),
];

const ADDONS: &[&str] = &[
    "addons/servicemonitor",
    "monitoring",
    "addons/storage-cluster-discovery",
    "addons/etcd-operator-discovery",
    "addons/kubectl-plugin-user",
];

/// Which RBAC mode, and how it is made.
#[derive(Clone, Copy)]
enum Mode {
    /// `manifests/install/cluster-wide/`.
    ClusterWide,
    /// `manifests/install/namespaced/`: the generator's output for the examples' namespaces.
    Namespaced,
    /// `manifests/base/` beside the generator's output for these namespaces, as docs/install.md
    /// shows for namespaces of one's own.
    Generated(&'static [&'static str]),
}

/// One way to install, as a user's kustomization says it.
struct Variant {
    name: &'static str,
    mode: Mode,
    /// Add-ons (kustomize Components), as folders of `manifests/`.
    components: &'static [&'static str],
    /// kustomize's `namespace:`: where the controller runs instead of `groundskeeper`.
    namespace: Option<&'static str>,
}

impl Variant {
    fn controller_namespace(&self) -> &'static str {
        self.namespace.unwrap_or(CONTROLLER_NAMESPACE)
    }

    /// The namespaces looked after; empty: every one.
    fn watched(&self) -> Vec<&'static str> {
        match self.mode {
            Mode::ClusterWide => Vec::new(),
            Mode::Namespaced => vec!["etcd", "scylla"],
            Mode::Generated(namespaces) => namespaces.to_vec(),
        }
    }

    fn with(&self, addon: &str) -> bool {
        self.components
            .iter()
            .any(|c| *c == addon || (addon == "addons/metrics" && *c == "addons/servicemonitor"))
    }

    /// The folders of `manifests/` whose files hold what this installs, unchanged but for the
    /// Deployment's flags.
    fn sources(&self) -> Vec<&'static str> {
        let mut sources = vec!["crds", "base"];
        match self.mode {
            Mode::ClusterWide => sources.push("install/cluster-wide"),
            Mode::Namespaced => sources.push("install/namespaced"),
            Mode::Generated(_) => {}
        }
        sources.extend(self.components.iter().copied());
        // The ServiceMonitor add-on brings the metrics one with it.
        if self.with("addons/metrics") && !sources.contains(&"addons/metrics") {
            sources.push("addons/metrics");
        }
        sources
    }
}

const VARIANTS: &[Variant] = &[
    Variant { name: "cluster-wide", mode: Mode::ClusterWide, components: &[], namespace: None },
    Variant { name: "namespaced", mode: Mode::Namespaced, components: &[], namespace: None },
    Variant {
        name: "cluster-wide-metrics",
        mode: Mode::ClusterWide,
        components: &["addons/metrics"],
        namespace: None,
    },
    Variant { name: "cluster-wide-addons", mode: Mode::ClusterWide, components: ADDONS, namespace: None },
    Variant { name: "namespaced-addons", mode: Mode::Namespaced, components: ADDONS, namespace: None },
    Variant {
        name: "cluster-wide-in-ops",
        mode: Mode::ClusterWide,
        components: ADDONS,
        namespace: Some("ops"),
    },
    Variant {
        name: "namespaced-own-namespaces",
        mode: Mode::Generated(&["team-a", "team-b"]),
        components: &["addons/servicemonitor"],
        namespace: None,
    },
];

fn manifests_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../manifests").canonicalize().expect("manifests/ exists")
}

/// `kubectl` on PATH, or `None` after saying why the test skips (a failure under CI=true).
fn kubectl_or_skip() -> Option<&'static str> {
    let found = std::process::Command::new("kubectl").args(["version", "--client"]).output();
    match found {
        Ok(output) if output.status.success() => Some("kubectl"),
        _ if std::env::var("CI").is_ok_and(|ci| ci == "true") => {
            panic!("kubectl is not on PATH; CI=true, so the install checks must run")
        }
        _ => {
            eprintln!("skipped: kubectl is not on PATH (it renders the kustomizations)");
            None
        }
    }
}

/// A folder `kubectl apply -k` is given, and the scratch folder it was written in, if any
/// (removed when dropped).
struct Kustomization {
    path: PathBuf,
    _scratch: Option<tempfile::TempDir>,
}

/// The folder `kubectl apply -k` is given for `variant`: an overlay of `manifests/install/` as
/// it is, or a kustomization written as docs/install.md shows (beside a link to `manifests/`), in
/// a scratch folder of its own (tests run side by side, each writing the same variants).
fn kustomization_of(variant: &Variant) -> Kustomization {
    let manifests = manifests_dir();
    match variant.mode {
        Mode::ClusterWide if variant.components.is_empty() && variant.namespace.is_none() => {
            return Kustomization { path: manifests.join("install/cluster-wide"), _scratch: None };
        }
        Mode::Namespaced if variant.components.is_empty() && variant.namespace.is_none() => {
            return Kustomization { path: manifests.join("install/namespaced"), _scratch: None };
        }
        _ => {}
    }
    let scratch = tempfile::Builder::new()
        .prefix(&format!("install-kustomize-{}-", variant.name))
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    let dir = scratch.path().to_owned();
    std::os::unix::fs::symlink(&manifests, dir.join("manifests")).unwrap();
    let mut resources = Vec::new();
    match variant.mode {
        Mode::ClusterWide => resources.push("manifests/install/cluster-wide".to_owned()),
        Mode::Namespaced => resources.push("manifests/install/namespaced".to_owned()),
        Mode::Generated(namespaces) => {
            let namespaces: Vec<String> = namespaces.iter().map(|n| (*n).to_owned()).collect();
            std::fs::write(dir.join("rbac.yaml"), namespaced_rbac(&namespaces).unwrap()).unwrap();
            resources.extend(["manifests/base".to_owned(), "rbac.yaml".to_owned()]);
        }
    }
    let mut text = String::from("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n");
    if let Some(namespace) = variant.namespace {
        text.push_str(&format!("namespace: {namespace}\n"));
    }
    text.push_str("resources:\n");
    for resource in resources {
        text.push_str(&format!("  - {resource}\n"));
    }
    if !variant.components.is_empty() {
        text.push_str("components:\n");
        for component in variant.components {
            text.push_str(&format!("  - manifests/{component}\n"));
        }
    }
    std::fs::write(dir.join("kustomization.yaml"), text).unwrap();
    Kustomization { path: dir, _scratch: Some(scratch) }
}

fn run(kubectl: &str, args: &[&str], dir: &Path) -> String {
    let output = std::process::Command::new(kubectl).args(args).arg(dir).output().expect("kubectl runs");
    assert!(
        output.status.success(),
        "kubectl {} {}: {}",
        args.join(" "),
        dir.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("kubectl writes UTF-8")
}

fn render(kubectl: &str, dir: &Path) -> Vec<Value> {
    let text = run(kubectl, &["kustomize"], dir);
    let documents: Vec<Value> = serde_saphyr::from_str_multiple(&text).expect("kustomize writes YAML");
    documents.into_iter().filter(|d| !d.is_null()).collect()
}

fn str_at<'a>(object: &'a Value, pointer: &str) -> &'a str {
    object.pointer(pointer).and_then(Value::as_str).unwrap_or_default()
}

/// `Kind namespace/name`, for messages and sorting.
fn id(object: &Value) -> String {
    format!(
        "{} {}/{}",
        str_at(object, "/kind"),
        str_at(object, "/metadata/namespace"),
        str_at(object, "/metadata/name")
    )
}

fn kind_of(object: &Value) -> &'static (&'static str, &'static str, &'static str, bool) {
    KINDS
        .iter()
        .find(|(version, kind, _, _)| {
            str_at(object, "/apiVersion") == *version && str_at(object, "/kind") == *kind
        })
        .unwrap_or_else(|| panic!("{}: a kind no install should hold", id(object)))
}

#[test]
fn every_variant_renders_what_the_files_say() {
    let Some(kubectl) = kubectl_or_skip() else { return };
    for variant in VARIANTS {
        let rendered = render(kubectl, &kustomization_of(variant).path);
        check_kinds_and_wildcards(variant, &rendered);
        check_namespaces(variant, &rendered);
        check_same_objects(variant, &rendered);
        check_grants(variant, &rendered);
        check_deployment(variant, &rendered);
        check_metrics_scrape(variant, &rendered);
    }
}

fn check_kinds_and_wildcards(variant: &Variant, rendered: &[Value]) {
    for object in rendered {
        kind_of(object);
        for rule in object.get("rules").and_then(Value::as_array).into_iter().flatten() {
            for key in ["apiGroups", "resources", "verbs", "resourceNames", "nonResourceURLs"] {
                let values = rule.get(key).and_then(Value::as_array).into_iter().flatten();
                for value in values.filter_map(Value::as_str) {
                    assert!(
                        !value.contains('*'),
                        "{}: {}: a wildcard in {key}: {rule}",
                        variant.name,
                        id(object)
                    );
                }
            }
        }
    }
}

/// Cluster-scoped kinds have no namespace; the controller's own objects are in its namespace;
/// its Roles are in the namespaces it looks after and nowhere else; every binding is to its
/// ServiceAccount; namespaced mode's ConfigMap lists those namespaces.
fn check_namespaces(variant: &Variant, rendered: &[Value]) {
    let ours = variant.controller_namespace();
    let watched = variant.watched();
    for object in rendered {
        let (_, kind, _, namespaced) = kind_of(object);
        let namespace = str_at(object, "/metadata/namespace");
        let name = str_at(object, "/metadata/name");
        let is_controller_role = matches!(*kind, "Role" | "RoleBinding") && name == NAME;
        match (namespaced, is_controller_role) {
            (false, _) => assert_eq!(namespace, "", "{}: {} is cluster-scoped", variant.name, id(object)),
            (true, true) => {
                assert!(watched.contains(&namespace), "{}: {} not looked after", variant.name, id(object))
            }
            (true, false) => assert_eq!(namespace, ours, "{}: {}", variant.name, id(object)),
        }
        for subject in object.get("subjects").and_then(Value::as_array).into_iter().flatten() {
            let subject = (str_at(subject, "/kind"), str_at(subject, "/namespace"), str_at(subject, "/name"));
            assert_eq!(subject, ("ServiceAccount", ours, NAME), "{}: {}", variant.name, id(object));
        }
    }
    let namespaces: Vec<&str> = rendered
        .iter()
        .filter(|o| str_at(o, "/kind") == "Namespace")
        .map(|o| str_at(o, "/metadata/name"))
        .collect();
    assert_eq!(namespaces, [ours], "{}: the one Namespace made is the controller's", variant.name);
    let roles: BTreeSet<&str> = rendered
        .iter()
        .filter(|o| str_at(o, "/kind") == "Role" && str_at(o, "/metadata/name") == NAME)
        .map(|o| str_at(o, "/metadata/namespace"))
        .collect();
    assert_eq!(
        roles,
        watched.iter().copied().collect(),
        "{}: a Role in each namespace looked after",
        variant.name
    );
    let listed = rendered
        .iter()
        .find(|o| str_at(o, "/kind") == "ConfigMap" && str_at(o, "/metadata/name") == NAME)
        .map(|config_map| str_at(config_map, &format!("/data/{NAMESPACES_KEY}")).to_owned());
    let expected = (!watched.is_empty()).then(|| watched.join(","));
    assert_eq!(listed, expected, "{}: the namespaces the Deployment is told", variant.name);
}

/// The objects of the checked-in files (the generator's output for [`Mode::Generated`]), each
/// exactly as rendered: kustomize changed nothing but the Deployment (compared in
/// [`check_deployment`]) and, for another controller namespace, the namespaces.
fn check_same_objects(variant: &Variant, rendered: &[Value]) {
    let mut expected = files_of(variant);
    let mut got: Vec<Value> = rendered.iter().map(|o| in_default_namespace(variant, o)).collect();
    let not_deployment = |o: &Value| str_at(o, "/kind") != "Deployment";
    expected.retain(not_deployment);
    got.retain(not_deployment);
    expected.sort_by_key(id);
    got.sort_by_key(id);
    let ids = |objects: &[Value]| objects.iter().map(id).collect::<Vec<_>>();
    assert_eq!(ids(&got), ids(&expected), "{}: the objects installed", variant.name);
    for (got, expected) in got.iter().zip(&expected) {
        if let Some(difference) = first_difference(got, expected, "") {
            panic!("{}: {} differs from its file at {difference}", variant.name, id(got));
        }
    }
}

/// Where `got` and `expected` first differ, and how; numbers compare by value (kustomize
/// writes the CRDs' `45.0` as `45`, the same number to the API).
fn first_difference(got: &Value, expected: &Value, at: &str) -> Option<String> {
    match (got, expected) {
        (Value::Number(a), Value::Number(b)) if a.as_f64() == b.as_f64() => None,
        (Value::Object(a), Value::Object(b)) => {
            let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            keys.into_iter().find_map(|key| {
                let (a, b) = (a.get(key).unwrap_or(&Value::Null), b.get(key).unwrap_or(&Value::Null));
                first_difference(a, b, &format!("{at}/{key}"))
            })
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            a.iter().zip(b).enumerate().find_map(|(i, (a, b))| first_difference(a, b, &format!("{at}/{i}")))
        }
        _ if got == expected => None,
        _ => Some(format!("{at}: {got} instead of {expected}")),
    }
}

/// Every object of the files `variant` is made of.
fn files_of(variant: &Variant) -> Vec<Value> {
    let manifests = manifests_dir();
    let mut objects: Vec<Value> = variant
        .sources()
        .into_iter()
        .flat_map(|dir| load_manifests(&manifests.join(dir)).unwrap_or_else(|e| panic!("{dir}: {e}")))
        .filter(|o| o.get("kind").is_some())
        .collect();
    if let Mode::Generated(namespaces) = variant.mode {
        let namespaces: Vec<String> = namespaces.iter().map(|n| (*n).to_owned()).collect();
        let generated: Vec<Value> =
            serde_saphyr::from_str_multiple(&namespaced_rbac(&namespaces).unwrap()).unwrap();
        objects.extend(generated);
    }
    objects
}

/// `object` as it would be with the controller in `groundskeeper`: every mention of the
/// variant's own controller namespace put back.
fn in_default_namespace(variant: &Variant, object: &Value) -> Value {
    let Some(ours) = variant.namespace else { return object.clone() };
    let mut object = object.clone();
    let put_back = |value: Option<&mut Value>| {
        if let Some(value) = value.filter(|v| v.as_str() == Some(ours)) {
            *value = Value::from(CONTROLLER_NAMESPACE);
        }
    };
    put_back(object.pointer_mut("/metadata/namespace"));
    if str_at(&object, "/kind") == "Namespace" {
        put_back(object.pointer_mut("/metadata/name"));
    }
    for subject in object.get_mut("subjects").and_then(Value::as_array_mut).into_iter().flatten() {
        put_back(subject.get_mut("namespace"));
    }
    object
}

/// What the rendering grants the controller is what the files grant it, and for the two
/// overlays as they are, what every scenario runs the controller with.
fn check_grants(variant: &Variant, rendered: &[Value]) {
    let (_, name) = CONTROLLER_SERVICE_ACCOUNT;
    let ours = variant.controller_namespace();
    let got = Grants::for_service_account(rendered, ours, name);
    let renamed: Vec<Value> = rendered.iter().map(|o| in_default_namespace(variant, o)).collect();
    let from_files = Grants::for_service_account(&files_of(variant), CONTROLLER_NAMESPACE, name);
    assert!(
        Grants::for_service_account(&renamed, CONTROLLER_NAMESPACE, name).same_as(&from_files),
        "{}: the controller's grants differ from the files'",
        variant.name
    );
    let scenarios = match (variant.name, variant.mode) {
        ("cluster-wide", _) => controller_grants(),
        ("namespaced", _) => controller_grants_namespaced(),
        _ => return,
    };
    assert!(got.same_as(&scenarios), "{}: the scenarios run the controller with other grants", variant.name);
}

/// The controller's flags, as its binary reads them (the rest of its command line is its own).
#[derive(Parser)]
struct ControllerArgs {
    #[command(flatten)]
    config: Config,
    #[arg(long)]
    http_addr: std::net::SocketAddr,
}

/// The rendered Deployment is `manifests/base/deployment.yaml` with the add-ons' flags appended;
/// its command line is one the controller accepts, with each add-on's feature on.
fn check_deployment(variant: &Variant, rendered: &[Value]) {
    let deployments: Vec<&Value> = rendered.iter().filter(|o| str_at(o, "/kind") == "Deployment").collect();
    assert_eq!(deployments.len(), 1, "{}: one Deployment", variant.name);
    let got = in_default_namespace(variant, deployments[0]);
    let base = load_manifests(&manifests_dir().join("base")).unwrap();
    let mut expected = base.into_iter().find(|o| str_at(o, "/kind") == "Deployment").unwrap();
    let args = expected.pointer_mut("/spec/template/spec/containers/0/args").unwrap().as_array_mut().unwrap();
    let mut added = Vec::new();
    if variant.with("addons/storage-cluster-discovery") {
        added.extend(["--discover-storage-clusters", "--storage-cluster-namespace=$(POD_NAMESPACE)"]);
    }
    if variant.with("addons/etcd-operator-discovery") {
        added.push("--discover-etcd-operator-clusters");
    }
    args.extend(added.iter().map(|a| Value::from(*a)));
    if let Some(difference) = first_difference(&got, &expected, "") {
        panic!(
            "{}: the Deployment differs from manifests/base/ and its add-ons at {difference}",
            variant.name
        );
    }

    let config = controller_config(deployments[0]);
    groundskeeper_controller::check_config(&config).unwrap_or_else(|e| panic!("{}: {e}", variant.name));
    assert_eq!(
        config.etcd.storage_clusters.enabled,
        variant.with("addons/storage-cluster-discovery"),
        "{}",
        variant.name
    );
    assert_eq!(config.etcd.storage_clusters.namespace, variant.controller_namespace(), "{}", variant.name);
    assert_eq!(config.etcd.etcd_operator_clusters.enabled, variant.with("addons/etcd-operator-discovery"));
    let account = str_at(deployments[0], "/spec/template/spec/serviceAccountName");
    assert!(
        rendered
            .iter()
            .any(|o| str_at(o, "/kind") == "ServiceAccount" && str_at(o, "/metadata/name") == account),
        "{}: the Deployment runs as a ServiceAccount installed beside it",
        variant.name
    );
}

/// The controller container's arguments, `$(VAR)` expanded from its environment as the kubelet
/// does (the downward API's namespace is the Deployment's), parsed as the controller parses them.
fn controller_config(deployment: &Value) -> Config {
    let container = deployment.pointer("/spec/template/spec/containers/0").unwrap();
    let namespace = str_at(deployment, "/metadata/namespace");
    let env: Vec<(String, String)> = container["env"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| {
            let value = match (e.get("value"), str_at(e, "/valueFrom/fieldRef/fieldPath")) {
                (Some(value), _) => value.as_str()?.to_owned(),
                (None, "metadata.namespace") => namespace.to_owned(),
                _ => return None,
            };
            Some((format!("$({})", str_at(e, "/name")), value))
        })
        .collect();
    let args = container["args"].as_array().unwrap().iter().map(|a| {
        env.iter().fold(a.as_str().unwrap().to_owned(), |arg, (var, value)| arg.replace(var, value))
    });
    let parsed =
        ControllerArgs::try_parse_from(std::iter::once("groundskeeper-controller".to_owned()).chain(args))
            .unwrap_or_else(|e| panic!("the Deployment's arguments: {e}"));
    parsed.config
}

/// With the metrics add-on, its Service selects the controller's pods and reaches their `http`
/// port; the ServiceMonitor selects that Service and scrapes that port.
fn check_metrics_scrape(variant: &Variant, rendered: &[Value]) {
    let find = |kind: &'static str| rendered.iter().filter(move |o| str_at(o, "/kind") == kind);
    let services: Vec<&Value> = find("Service").collect();
    assert_eq!(
        services.len(),
        usize::from(variant.with("addons/metrics")),
        "{}: metrics Service",
        variant.name
    );
    let Some(service) = services.first() else { return };
    let deployment = find("Deployment").next().unwrap();
    let pod_labels = &deployment["spec"]["template"]["metadata"]["labels"];
    for (key, value) in service["spec"]["selector"].as_object().unwrap() {
        assert_eq!(&pod_labels[key], value, "{}: the Service selects the controller's pods", variant.name);
    }
    let port = &service["spec"]["ports"][0];
    let container_ports = &deployment["spec"]["template"]["spec"]["containers"][0]["ports"];
    assert!(
        container_ports.as_array().unwrap().iter().any(|p| p["name"] == port["targetPort"]),
        "{}: the Service's targetPort is a port of the container",
        variant.name
    );
    for monitor in find("ServiceMonitor") {
        for (key, value) in monitor["spec"]["selector"]["matchLabels"].as_object().unwrap() {
            assert_eq!(
                &service["metadata"]["labels"][key], value,
                "{}: ServiceMonitor selects it",
                variant.name
            );
        }
        assert_eq!(monitor["spec"]["endpoints"][0]["port"], port["name"], "{}", variant.name);
        assert_eq!(monitor["spec"]["endpoints"][0]["path"], "/metrics", "{}", variant.name);
        // The series carry the namespace of what they are about: a clash must not rename it.
        assert_eq!(monitor["spec"]["endpoints"][0]["honorLabels"], true, "{}", variant.name);
    }
}

/// An in-memory API server that also serves the kinds an install creates.
async fn install_target() -> ApiServer {
    let mut builder = ApiServer::builder();
    for (version, kind, plural, namespaced) in KINDS {
        let (group, version) = version.split_once('/').unwrap_or(("", version));
        if !matches!(*kind, "Namespace" | "Service" | "ConfigMap") {
            builder =
                builder.resource(ResourceType::custom(group, version, plural, kind, *namespaced, false));
        }
    }
    builder.start().await.expect("the in-memory API server starts")
}

/// `kubectl apply -k` against `server`, with its own kubeconfig and discovery cache.
async fn apply(kubectl: &str, server: &ApiServer, dir: &Path, extra: &[&str]) -> String {
    let work = Path::new(env!("CARGO_TARGET_TMPDIR")).join("install-kustomize-kubectl");
    std::fs::create_dir_all(&work).unwrap();
    let config = work.join(format!("kubeconfig-{}", server.url().rsplit(':').next().unwrap()));
    server.write_kubeconfig(&config, None, "default").unwrap();
    let output = tokio::process::Command::new(kubectl)
        .arg("--kubeconfig")
        .arg(&config)
        .arg("--cache-dir")
        .arg(work.join("cache"))
        .args(["apply", "--validate=false", "-k"])
        .arg(dir)
        .args(extra)
        .output()
        .await
        .expect("kubectl runs");
    assert!(
        output.status.success(),
        "kubectl apply -k {} {extra:?}: {}",
        dir.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// `kubectl apply -k` works on each: the client dry run names every object and creates none;
/// applied for real, the API holds every object as rendered; applied again, nothing changes.
#[tokio::test]
async fn every_variant_applies_with_kubectl() {
    let Some(kubectl) = kubectl_or_skip() else { return };
    for variant in VARIANTS {
        let kustomization = kustomization_of(variant);
        let dir = kustomization.path.clone();
        let rendered = render(kubectl, &dir);
        let server = install_target().await;
        let names = apply(kubectl, &server, &dir, &["--dry-run=client", "-o", "name"]).await;
        let mut named: Vec<&str> = names.lines().collect();
        let mut expected: Vec<String> = rendered.iter().map(kubectl_name).collect();
        named.sort_unstable();
        expected.sort_unstable();
        assert_eq!(named, expected, "{}: what the dry run names", variant.name);
        assert!(
            stored(&server, &rendered).iter().all(Option::is_none),
            "{}: a dry run creates nothing",
            variant.name
        );

        apply(kubectl, &server, &dir, &[]).await;
        for (object, found) in rendered.iter().zip(stored(&server, &rendered)) {
            let found = found.unwrap_or_else(|| panic!("{}: {} was not created", variant.name, id(object)));
            for key in ["spec", "rules", "subjects", "roleRef", "data"] {
                let (found, object_key) =
                    (found.get(key).unwrap_or(&Value::Null), object.get(key).unwrap_or(&Value::Null));
                if let Some(difference) = first_difference(found, object_key, key) {
                    panic!("{}: {} as stored differs at {difference}", variant.name, id(object));
                }
            }
        }
        let again = apply(kubectl, &server, &dir, &[]).await;
        assert!(
            again.lines().all(|l| l.ends_with(" unchanged")),
            "{}: applied again:\n{again}",
            variant.name
        );
    }
}

/// How `kubectl -o name` names an object: `deployment.apps/groundskeeper-controller`.
fn kubectl_name(object: &Value) -> String {
    let (version, kind, _, _) = kind_of(object);
    let group = version.split_once('/').map(|(group, _)| format!(".{group}")).unwrap_or_default();
    format!("{}{group}/{}", kind.to_lowercase(), str_at(object, "/metadata/name"))
}

/// Each rendered object as the server holds it, if it does.
fn stored(server: &ApiServer, rendered: &[Value]) -> Vec<Option<Value>> {
    rendered
        .iter()
        .map(|object| {
            let (version, _, plural, _) = kind_of(object);
            let (group, version) = version.split_once('/').unwrap_or(("", version));
            let id = groundskeeper_e2e::apiserver::ResourceId::new(group, version, plural);
            let namespace = Some(str_at(object, "/metadata/namespace")).filter(|n| !n.is_empty());
            server.get(&id, namespace, str_at(object, "/metadata/name"))
        })
        .collect()
}
