//! The OpenAPI v3 documents: `/openapi/v3` (the index of group-versions, each with its
//! `serverRelativeURL`) and `/openapi/v3/apis/{group}/{version}` (or `/openapi/v3/api/v1`).
//!
//! What kubectl reads there: `kubectl explain` finds a kind's schema by its
//! `x-kubernetes-group-version-kind` among `components.schemas` and follows `$ref`s in the same
//! document; `kubectl apply`/`create` look for a `fieldValidation` query parameter on the kind's
//! PATCH operation and, finding it, leave validation to the server (without it they would
//! validate on the client against `/openapi/v2`, which this server does not serve).
//!
//! A custom resource's schema is its CRD's `openAPIV3Schema` with `apiVersion`, `kind` and
//! `metadata` (a reference to ObjectMeta) added, as apiextensions-apiserver publishes it; the
//! built-ins' come from k8s-openapi's own schemas. Paths carry the operations kubectl needs, not
//! every parameter of the real documents.

use std::hash::{Hash, Hasher};

use schemars::JsonSchema;
use schemars::generate::{SchemaGenerator, SchemaSettings};
use serde_json::{Map, Value, json};

use super::resources::{Registry, ResourceType};

const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

/// The URL path segment of a group-version: `api/v1` or `apis/batch/v1`.
fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() { format!("api/{version}") } else { format!("apis/{group}/{version}") }
}

/// `/openapi/v3`: every group-version served, with the URL of its document.
pub(crate) fn index(registry: &Registry) -> Value {
    let mut paths = Map::new();
    let mut seen: Vec<(String, String)> = Vec::new();
    for rt in registry.all() {
        let gv = (rt.id.group.clone(), rt.id.version.clone());
        if seen.contains(&gv) {
            continue;
        }
        seen.push(gv.clone());
        let path = gv_path(&gv.0, &gv.1);
        // Names the document's content without building it: the types served there.
        let kinds: Vec<String> = registry
            .all()
            .filter(|rt| rt.id.group == gv.0 && rt.id.version == gv.1)
            .map(|rt| format!("{}/{}", rt.id.plural, rt.kind))
            .collect();
        let hash = content_hash(&json!(kinds));
        paths.insert(path.clone(), json!({ "serverRelativeURL": format!("/openapi/v3/{path}?hash={hash}") }));
    }
    json!({ "paths": paths })
}

fn content_hash(document: &Value) -> String {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    document.to_string().hash(&mut hasher);
    format!("{:016X}", hasher.finish())
}

/// The document of one group-version, or `None` when nothing is served there.
pub(crate) fn document(registry: &Registry, group: &str, version: &str) -> Option<Value> {
    let types: Vec<&ResourceType> =
        registry.all().filter(|rt| rt.id.group == group && rt.id.version == version).collect();
    if types.is_empty() {
        return None;
    }
    let mut generator = SchemaGenerator::new(SchemaSettings::openapi3());
    generator.subschema_for::<k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>();
    let mut own_schemas = Map::new();
    let mut paths = Map::new();
    for rt in &types {
        let (name, schema) = schema_of(rt, &mut generator);
        own_schemas.insert(name.clone(), schema);
        add_paths(&mut paths, rt, &name);
    }
    let mut schemas: Map<String, Value> = generator.take_definitions(true);
    for (name, mut schema) in own_schemas {
        // A built-in's schema is in the generator's definitions too: keep one, with its GVK.
        if let Some(generated) = schemas.remove(&name) {
            schema = merge_gvk(generated, schema);
        }
        schemas.insert(name, schema);
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": { "title": "Kubernetes", "version": "v1.33.0" },
        "paths": paths,
        "components": { "schemas": schemas },
    }))
}

fn gvk(rt: &ResourceType) -> Value {
    json!([{ "group": rt.id.group, "version": rt.id.version, "kind": rt.kind }])
}

/// A built-in's generated schema with the GVK extension of the placeholder built for it.
fn merge_gvk(mut generated: Value, placeholder: Value) -> Value {
    if let (Some(object), Some(gvk)) =
        (generated.as_object_mut(), placeholder.get("x-kubernetes-group-version-kind"))
    {
        object.insert("x-kubernetes-group-version-kind".into(), gvk.clone());
    }
    generated
}

/// The schema's name in `components.schemas`, and the schema.
fn schema_of(rt: &ResourceType, generator: &mut SchemaGenerator) -> (String, Value) {
    if let Some(schema) = rt.crd().and_then(|crd| crd.schema()) {
        let name = format!("{}.{}.{}", reversed(&rt.id.group), rt.id.version, rt.kind);
        return (name, custom_resource_schema(rt, schema));
    }
    let name = builtin_schema(rt, generator).unwrap_or_else(|| {
        format!(
            "{}.{}.{}",
            reversed(if rt.id.group.is_empty() { "core" } else { &rt.id.group }),
            rt.id.version,
            rt.kind
        )
    });
    let mut placeholder = json!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
        "properties": {
            "apiVersion": { "type": "string" },
            "kind": { "type": "string" },
            "metadata": { "allOf": [{ "$ref": format!("#/components/schemas/{OBJECT_META}") }] },
        },
    });
    placeholder["x-kubernetes-group-version-kind"] = gvk(rt);
    (name, placeholder)
}

/// `groundskeeper.dev` → `dev.groundskeeper`, as the API names CRD schemas.
fn reversed(group: &str) -> String {
    group.split('.').rev().collect::<Vec<_>>().join(".")
}

fn custom_resource_schema(rt: &ResourceType, schema: &Value) -> Value {
    let mut schema = schema.clone();
    let properties = schema
        .as_object_mut()
        .map(|o| o.entry("properties").or_insert_with(|| json!({})))
        .and_then(Value::as_object_mut);
    if let Some(properties) = properties {
        properties.insert(
            "apiVersion".into(),
            json!({ "type": "string", "description": "APIVersion defines the versioned schema of this representation of an object." }),
        );
        properties.insert(
            "kind".into(),
            json!({ "type": "string", "description": "Kind is a string value representing the REST resource this object represents." }),
        );
        properties.insert(
            "metadata".into(),
            json!({
                "description": "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata",
                "allOf": [{ "$ref": format!("#/components/schemas/{OBJECT_META}") }],
            }),
        );
    }
    schema["x-kubernetes-group-version-kind"] = gvk(rt);
    schema
}

/// Generates the built-in's schema (and what it refers to) into `generator`; its name.
fn builtin_schema(rt: &ResourceType, generator: &mut SchemaGenerator) -> Option<String> {
    use k8s_openapi::api::{apps, batch, coordination, core, events};
    fn add<T: JsonSchema>(generator: &mut SchemaGenerator) -> Option<String> {
        generator.subschema_for::<T>();
        Some(T::schema_name().into_owned())
    }
    match (rt.id.group.as_str(), rt.id.version.as_str(), rt.kind.as_str()) {
        ("", "v1", "Pod") => add::<core::v1::Pod>(generator),
        ("", "v1", "Service") => add::<core::v1::Service>(generator),
        ("", "v1", "Secret") => add::<core::v1::Secret>(generator),
        ("", "v1", "ConfigMap") => add::<core::v1::ConfigMap>(generator),
        ("", "v1", "PersistentVolumeClaim") => add::<core::v1::PersistentVolumeClaim>(generator),
        ("", "v1", "Event") => add::<core::v1::Event>(generator),
        ("", "v1", "Namespace") => add::<core::v1::Namespace>(generator),
        ("", "v1", "ServiceAccount") => add::<core::v1::ServiceAccount>(generator),
        ("batch", "v1", "Job") => add::<batch::v1::Job>(generator),
        ("apps", "v1", "StatefulSet") => add::<apps::v1::StatefulSet>(generator),
        ("apps", "v1", "Deployment") => add::<apps::v1::Deployment>(generator),
        ("coordination.k8s.io", "v1", "Lease") => add::<coordination::v1::Lease>(generator),
        ("events.k8s.io", "v1", "Event") => add::<events::v1::Event>(generator),
        _ => None,
    }
}

/// The paths of one type: its collection and its items (and `/status`), each operation with the
/// type's GVK and, where the real API has them, `dryRun` and `fieldValidation`.
fn add_paths(paths: &mut Map<String, Value>, rt: &ResourceType, schema: &str) {
    let prefix = format!("/{}", gv_path(&rt.id.group, &rt.id.version));
    let collection = if rt.namespaced {
        format!("{prefix}/namespaces/{{namespace}}/{}", rt.id.plural)
    } else {
        format!("{prefix}/{}", rt.id.plural)
    };
    let reference = json!({ "$ref": format!("#/components/schemas/{schema}") });
    let op = |action: &str, writes: bool| operation(rt, action, writes, &reference);
    paths.insert(
        collection.clone(),
        json!({ "get": op("list", false), "post": op("post", true), "delete": op("deletecollection", false) }),
    );
    let item = format!("{collection}/{{name}}");
    paths.insert(
        item.clone(),
        json!({ "get": op("get", false), "put": op("put", true), "patch": op("patch", true), "delete": op("delete", false) }),
    );
    if rt.status_subresource {
        paths.insert(
            format!("{item}/status"),
            json!({ "get": op("get", false), "put": op("put", true), "patch": op("patch", true) }),
        );
    }
}

fn operation(rt: &ResourceType, action: &str, writes: bool, reference: &Value) -> Value {
    let query = |name: &str, description: &str| json!({ "name": name, "in": "query", "description": description, "schema": { "type": "string", "uniqueItems": true } });
    let mut parameters = vec![query("pretty", "If 'true', then the output is pretty printed.")];
    if writes || action.starts_with("delete") {
        parameters
            .push(query("dryRun", "When present, indicates that modifications should not be persisted."));
    }
    if writes {
        parameters.push(query(
            "fieldManager",
            "fieldManager is a name associated with the actor or entity that is making these changes.",
        ));
        parameters.push(query(
            "fieldValidation",
            "fieldValidation instructs the server on how to handle objects in the request containing unknown or duplicate fields. Valid values are: Ignore, Warn, Strict.",
        ));
    }
    let content = json!({ "application/json": { "schema": reference } });
    json!({
        "operationId": format!("{action}{}", rt.kind),
        "parameters": parameters,
        "responses": { "200": { "description": "OK", "content": content } },
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": { "group": rt.id.group, "version": rt.id.version, "kind": rt.kind },
    })
}

/// `/openapi/v2` as kubectl asks for it (protobuf, `application/com.github.proto-openapi.spec.v2@v1.0+protobuf`):
/// a document with no paths and no definitions. kubectl 1.27 refuses to apply without one; with
/// it, kubectl takes the patch strategies of the built-ins from its own compiled-in types, and
/// leaves validation to the server (the `fieldValidation` parameter of the v3 documents).
/// The real API answers it as `application/octet-stream` (`@` is not allowed in a media type).
pub(crate) const EMPTY_V2_PROTOBUF_CONTENT_TYPE: &str = "application/octet-stream";

/// The bytes of gnostic's `openapi_v2.Document { swagger: "2.0", info: { title, version }, paths: {} }`:
/// field 1 (string), field 2 (message Info: field 1 title, field 2 version), field 8 (message
/// Paths, empty). Hand-encoded: three length-delimited fields do not warrant a protobuf stack.
pub(crate) fn empty_v2_protobuf() -> Vec<u8> {
    fn field(number: u8, bytes: &[u8]) -> Vec<u8> {
        let mut out = vec![(number << 3) | 2, u8::try_from(bytes.len()).expect("short fields")];
        out.extend_from_slice(bytes);
        out
    }
    let info = [field(1, b"Kubernetes"), field(2, b"v1.33.0")].concat();
    [field(1, b"2.0"), field(2, &info), field(8, &[])].concat()
}
