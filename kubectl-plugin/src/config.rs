//! `--config key=value` and `--config-file`: the config of a task's type, read against the
//! MaintenanceTask CRD's own schema (the fields and their types the API server knows), so that a
//! typo or a wrong type is refused here, naming the field, before anything is created.
//!
//! `--from`, `--to` and their bucket settings, `--object` and a restore's flags are fields of the
//! config too ([`store_settings`]): they replace what the document says of the same fields, and
//! `--config` settings apply on top of both.

use kube::CustomResourceExt;
use serde_json::{Map, Value, json};

use groundskeeper_api::maintenance_task::{MaintenanceTask, TaskConfig, TaskType};
use groundskeeper_api::snapshot_store::bucket_name;

use crate::cli::StoreArgs;

/// The `spec.config.<member>` schema of `task_type`, from the CRD.
fn member_schema(member: &str) -> Value {
    let crd = serde_json::to_value(MaintenanceTask::crd()).expect("the CRD serialises");
    crd.pointer(&format!(
        "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/config/properties/{member}"
    ))
    .cloned()
    .unwrap_or(Value::Null)
}

fn fields_of(schema: &Value) -> Vec<String> {
    schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default()
}

fn type_of(schema: &Value) -> &str {
    schema.get("type").and_then(Value::as_str).unwrap_or("")
}

/// An object whose keys are free (a map), not named fields.
fn is_map(schema: &Value) -> bool {
    type_of(schema) == "object"
        && schema.get("properties").is_none()
        && schema.get("additionalProperties").is_some_and(Value::is_object)
}

/// The config of `task_type` from an optional document, the fields the store flags set
/// ([`store_settings`], replacing the document's) and `key=value` settings (applied on top).
pub fn task_config(
    task_type: &TaskType,
    document: Option<&str>,
    flags: &Map<String, Value>,
    settings: &[String],
) -> Result<TaskConfig, String> {
    let Some(member) = task_type.config_member() else {
        return Err(format!("unknown task type {task_type}"));
    };
    let schema = member_schema(member);
    let path = format!("spec.config.{member}");
    let mut config = match document {
        Some(text) => {
            let value: Value = serde_saphyr::from_str(text)
                .map_err(|e| format!("--config-file: not a YAML or JSON document: {e}"))?;
            match value {
                Value::Object(_) => {}
                Value::Null => {}
                _ => return Err(format!("--config-file: {path} must be a mapping of its fields")),
            }
            check_document(&value, &schema, &path)?;
            value
        }
        None => Value::Null,
    };
    if config.is_null() && (document.is_some() || !flags.is_empty() || !settings.is_empty()) {
        config = Value::Object(Map::new());
    }
    for (field, value) in flags {
        object_of(&mut config).insert(field.clone(), value.clone());
    }
    for setting in settings {
        set(&mut config, &schema, &path, setting)?;
    }
    stores_given(task_type, &config)?;
    if config.is_null() {
        return Ok(TaskConfig::default());
    }
    let wrapped = Value::Object(Map::from_iter([(member.to_owned(), config)]));
    serde_json::from_value(wrapped).map_err(|e| format!("{path}: {e}"))
}

/// A store as written on the command line: `pvc/NAME`, or a bucket's URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreArg {
    Claim(String),
    Bucket(String),
}

impl StoreArg {
    fn is_bucket(&self) -> bool {
        matches!(self, StoreArg::Bucket(_))
    }
}

/// `pvc/NAME` (or `persistentvolumeclaim/NAME`) or `s3://BUCKET[/PREFIX]`, `gs://…`, `az://…`.
pub fn parse_store(flag: &str, text: &str) -> Result<StoreArg, String> {
    if text.contains("://") {
        return bucket_name(text)
            .map(|_| StoreArg::Bucket(text.to_owned()))
            .map_err(|why| format!("{flag} {text}: {why}"));
    }
    let claim = text.split_once('/').and_then(|(kind, name)| {
        matches!(
            kind.to_ascii_lowercase().as_str(),
            "pvc" | "persistentvolumeclaim" | "persistentvolumeclaims"
        )
        .then_some(name)
    });
    match claim {
        Some(name) if !name.is_empty() && !name.contains('/') => Ok(StoreArg::Claim(name.to_owned())),
        _ => Err(format!(
            "{flag} {text}: expected pvc/NAME (a PersistentVolumeClaim in the task's namespace) or a bucket \
             URL: s3://BUCKET[/PREFIX], gs://BUCKET[/PREFIX] or az://CONTAINER[/PREFIX]"
        )),
    }
}

/// The flags each type takes, beyond the bucket settings.
fn flags_of(task_type: &TaskType) -> &'static [&'static str] {
    match task_type {
        TaskType::Snapshot => &["--to", "--compression", "--encryption-secret"],
        TaskType::Copy => &["--from", "--to"],
        TaskType::Verify => &["--from", "--object", "--encryption-secret"],
        TaskType::Delta => &["--to", "--compression", "--encryption-secret"],
        TaskType::Restore => &[
            "--from",
            "--object",
            "--yes",
            "--override-quorum-check",
            "--to-revision",
            "--to-time",
            "--compression",
            "--encryption-secret",
        ],
        _ => &[],
    }
}

/// The fields of `task_type`'s config that the store flags set: `--from`/`--to` as stores (a
/// claim, or a bucket with `--endpoint`, `--region`, `--credentials-secret`), `--object`, and a
/// restore's `confirm: true` (the plugin asks for the confirmation itself, or takes `--yes`) and
/// `overrideQuorumCheck`. A flag the type does not take is refused, naming the types that do.
pub fn store_settings(task_type: &TaskType, args: &StoreArgs) -> Result<Map<String, Value>, String> {
    let given: Vec<(&str, bool)> = vec![
        ("--from", args.from.is_some()),
        ("--to", args.to.is_some()),
        ("--object", args.object.is_some()),
        ("--yes", args.yes),
        ("--override-quorum-check", args.override_quorum_check),
        ("--to-revision", args.to_revision.is_some()),
        ("--to-time", args.to_time.is_some()),
        ("--compression", args.compression.is_some()),
        ("--encryption-secret", args.encryption_secret.is_some()),
    ];
    let taken = flags_of(task_type);
    if let Some((flag, _)) = given.iter().find(|(flag, set)| *set && !taken.contains(flag)) {
        let types: Vec<&str> = TaskType::KNOWN
            .iter()
            .filter(|t| flags_of(&TaskType::parse(t)).contains(flag))
            .copied()
            .collect();
        return Err(format!("{flag} is for {} tasks, not {task_type}", types.join(", ")));
    }
    let from = args.from.as_deref().map(|t| parse_store("--from", t)).transpose()?;
    let to = args.to.as_deref().map(|t| parse_store("--to", t)).transpose()?;
    let buckets = from.iter().chain(to.iter()).any(StoreArg::is_bucket);
    for (flag, set) in [
        ("--endpoint", args.endpoint.is_some()),
        ("--region", args.region.is_some()),
        ("--credentials-secret", args.credentials_secret.is_some()),
    ] {
        if set && !buckets {
            return Err(format!(
                "{flag} is a setting of a bucket, and neither --from nor --to names one (s3://…, gs://…, az://…)"
            ));
        }
    }
    let encoding = encoding_value(task_type, args, from.is_some() || to.is_some())?;
    let mut fields = Map::new();
    match (task_type, &to) {
        (TaskType::Snapshot, Some(StoreArg::Claim(claim))) => {
            fields.insert("persistentVolumeClaim".to_owned(), json!(claim));
        }
        (TaskType::Snapshot, Some(StoreArg::Bucket(url))) => {
            fields.insert("bucket".to_owned(), bucket_value(url, args));
        }
        (_, Some(store)) => {
            fields.insert("to".to_owned(), with_encoding(store_value(store, args), &encoding));
        }
        (_, None) => {}
    }
    if *task_type == TaskType::Snapshot {
        fields.extend(encoding.clone());
    }
    if let Some(store) = &from {
        fields.insert("from".to_owned(), with_encoding(store_value(store, args), &encoding));
    }
    if let Some(object) = &args.object {
        fields.insert("object".to_owned(), json!(object));
    }
    if *task_type == TaskType::Restore {
        fields.insert("confirm".to_owned(), json!(true));
    }
    if args.override_quorum_check {
        fields.insert("overrideQuorumCheck".to_owned(), json!(true));
    }
    if let Some(revision) = args.to_revision {
        fields.insert("toRevision".to_owned(), json!(revision));
    }
    if let Some(time) = &args.to_time {
        fields.insert("toTime".to_owned(), json!(time));
    }
    Ok(fields)
}

/// `compression` and `encryption` as the flags give them: on a Snapshot task's config itself, on
/// the store of the others (so a Delta needs --to, a Verify or Restore --from).
fn encoding_value(
    task_type: &TaskType,
    args: &StoreArgs,
    has_store: bool,
) -> Result<Map<String, Value>, String> {
    let mut fields = Map::new();
    if let Some(compression) = &args.compression {
        fields.insert("compression".to_owned(), json!(compression));
    }
    if let Some(text) = &args.encryption_secret {
        let (secret, key) = match text.split_once('/') {
            Some((secret, key)) => (secret, Some(key)),
            None => (text.as_str(), None),
        };
        if secret.is_empty() || key.is_some_and(str::is_empty) {
            return Err(format!(
                "--encryption-secret {text}: expected SECRET or SECRET/KEY (the Secret holding the \
                 key, and its data key: default key)"
            ));
        }
        let mut encryption = Map::from_iter([("secretName".to_owned(), json!(secret))]);
        if let Some(key) = key {
            encryption.insert("key".to_owned(), json!(key));
        }
        fields.insert("encryption".to_owned(), Value::Object(encryption));
    }
    if !fields.is_empty() && *task_type != TaskType::Snapshot && !has_store {
        let flag = if *task_type == TaskType::Delta { "--to" } else { "--from" };
        let given = if args.compression.is_some() { "--compression" } else { "--encryption-secret" };
        return Err(format!(
            "{given} is a setting of the store: name it with {flag} (pvc/NAME or a bucket URL)"
        ));
    }
    Ok(fields)
}

/// A store's JSON with `compression` and `encryption` set.
fn with_encoding(mut store: Value, encoding: &Map<String, Value>) -> Value {
    if let Value::Object(map) = &mut store {
        map.extend(encoding.clone());
    }
    store
}

/// A `SnapshotStoreSpec` as JSON.
fn store_value(store: &StoreArg, args: &StoreArgs) -> Value {
    match store {
        StoreArg::Claim(claim) => json!({"persistentVolumeClaim": claim}),
        StoreArg::Bucket(url) => json!({"bucket": bucket_value(url, args)}),
    }
}

/// A `BucketSpec` as JSON: the URL with the bucket settings given.
fn bucket_value(url: &str, args: &StoreArgs) -> Value {
    let mut bucket = Map::from_iter([("url".to_owned(), json!(url))]);
    for (field, value) in [
        ("endpoint", &args.endpoint),
        ("region", &args.region),
        ("credentialsSecret", &args.credentials_secret),
    ] {
        if let Some(value) = value {
            bucket.insert(field.to_owned(), json!(value));
        }
    }
    Value::Object(bucket)
}

/// The stores a type cannot do without, said in the flags' terms (the controller's own check
/// would name `spec.config` fields a person did not write).
fn stores_given(task_type: &TaskType, config: &Value) -> Result<(), String> {
    let needed: &[(&str, &str)] = match task_type {
        TaskType::Copy => &[("from", "where the snapshots are"), ("to", "where they go")],
        TaskType::Restore => &[("from", "where the snapshot is")],
        _ => &[],
    };
    for (field, what) in needed {
        if config.get(field).is_none() {
            return Err(format!(
                "a {task_type} task needs --{field} STORE ({what}): pvc/NAME or a bucket URL such as \
                 s3://BUCKET/PREFIX"
            ));
        }
    }
    Ok(())
}

/// Refuses fields the schema does not know, anywhere in the document (a map's keys, such as a
/// bucket's `options`, are its own).
fn check_document(value: &Value, schema: &Value, path: &str) -> Result<(), String> {
    let Value::Object(map) = value else {
        return Ok(());
    };
    if is_map(schema) {
        return Ok(());
    }
    let known = fields_of(schema);
    for (key, inner) in map {
        let Some(field) = schema.pointer(&format!("/properties/{key}")) else {
            return Err(format!(
                "--config-file: {path} has no field {key:?}; its fields: {}",
                known.join(", ")
            ));
        };
        if type_of(field) == "object" {
            check_document(inner, field, &format!("{path}.{key}"))?;
        }
    }
    Ok(())
}

/// Applies one `key=value` (key with dots for nested fields) to `config`.
fn set(config: &mut Value, schema: &Value, path: &str, setting: &str) -> Result<(), String> {
    let Some((key, text)) = setting.split_once('=') else {
        return Err(format!("--config {setting}: expected KEY=VALUE, e.g. {}", example(schema)));
    };
    let parts: Vec<&str> = key.split('.').collect();
    let mut field_schema = schema;
    let mut field_path = path.to_owned();
    for (i, part) in parts.iter().enumerate() {
        // A map (a bucket's `options`) takes any key.
        let entry = if is_map(field_schema) { field_schema.get("additionalProperties") } else { None };
        let Some(field) = entry.or_else(|| field_schema.pointer(&format!("/properties/{part}"))) else {
            return Err(format!(
                "--config {setting}: {field_path} has no field {part:?}; its fields: {}",
                fields_of(field_schema).join(", ")
            ));
        };
        field_path = format!("{field_path}.{part}");
        if i + 1 < parts.len() && type_of(field) != "object" {
            return Err(format!("--config {setting}: {field_path} has no fields"));
        }
        if i + 1 == parts.len() && is_map(field) {
            return Err(format!("--config {setting}: {field_path} takes entries: {key}.NAME=VALUE"));
        }
        field_schema = field;
    }
    let value = typed(field_schema, text)
        .map_err(|wanted| format!("--config {setting}: {field_path} takes {wanted}, not {text:?}"))?;
    let mut target = config;
    for part in &parts[..parts.len() - 1] {
        target = object_of(target).entry(part.to_string()).or_insert_with(|| Value::Object(Map::new()));
    }
    object_of(target).insert(parts[parts.len() - 1].to_owned(), value);
    Ok(())
}

/// `value` as a mapping, made one if it was not (an empty field in a document).
fn object_of(value: &mut Value) -> &mut Map<String, Value> {
    if !value.is_object() {
        *value = Value::Object(Map::new());
    }
    value.as_object_mut().expect("made an object just above")
}

/// `text` as the schema's type, or what it takes.
fn typed(field: &Value, text: &str) -> Result<Value, String> {
    match type_of(field) {
        "integer" => text.parse::<i64>().map(Value::from).map_err(|_| "an integer".to_owned()),
        "number" => text
            .parse::<f64>()
            .ok()
            .filter(|n| n.is_finite())
            .map(Value::from)
            .ok_or_else(|| "a number".to_owned()),
        "boolean" => match text {
            "true" => Ok(Value::Bool(true)),
            "false" => Ok(Value::Bool(false)),
            _ => Err("true or false".to_owned()),
        },
        "array" => Ok(Value::Array(
            text.split(',').filter(|s| !s.is_empty()).map(|s| Value::String(s.to_owned())).collect(),
        )),
        "object" => Err(format!("fields of its own (KEY.FIELD=VALUE: {})", fields_of(field).join(", "))),
        _ => Ok(Value::String(text.to_owned())),
    }
}

fn example(schema: &Value) -> String {
    fields_of(schema).first().map(|f| format!("{f}=…")).unwrap_or_else(|| "field=value".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use groundskeeper_api::maintenance_task::{CompactConfig, DefragmentConfig, SnapshotConfig};

    fn settings(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn settings_take_the_schema_types() {
        let config = task_config(
            &TaskType::Compact,
            None,
            &Map::new(),
            &settings(&["retainRevisions=1000", "physical=true"]),
        )
        .unwrap();
        assert_eq!(
            config.compact,
            Some(CompactConfig { retain_revisions: Some(1000), revision: None, physical: true })
        );
        let config =
            task_config(&TaskType::Defragment, None, &Map::new(), &settings(&["maxFragmentedPercent=30.5"]))
                .unwrap();
        assert_eq!(
            config.defragment,
            Some(DefragmentConfig { min_defrag_bytes: 0, max_fragmented_percent: 30.5 })
        );
        let config = task_config(
            &TaskType::Cleanup,
            None,
            &Map::new(),
            &settings(&["keyspaces=ks1,ks2", "maxConcurrent=2"]),
        )
        .unwrap();
        let cleanup = config.cleanup.unwrap();
        assert_eq!(cleanup.keyspaces, vec!["ks1", "ks2"]);
        assert_eq!(cleanup.max_concurrent, Some(2));
        let config = task_config(
            &TaskType::Maintenance,
            None,
            &Map::new(),
            &settings(&["compact.retainRevisions=5", "defragment.minDefragBytes=7"]),
        )
        .unwrap();
        let maintenance = config.maintenance.unwrap();
        assert_eq!(maintenance.compact.unwrap().retain_revisions, Some(5));
        assert_eq!(maintenance.defragment.unwrap().min_defrag_bytes, 7);
    }

    #[test]
    fn nothing_given_is_the_types_defaults() {
        assert!(task_config(&TaskType::Defragment, None, &Map::new(), &[]).unwrap().is_empty());
        let config = task_config(&TaskType::Snapshot, None, &Map::new(), &settings(&["retain=3"])).unwrap();
        assert_eq!(config.snapshot, Some(SnapshotConfig { retain: 3, ..SnapshotConfig::default() }));
    }

    #[test]
    fn a_document_then_settings_on_top() {
        let document = "persistentVolumeClaim: backups\nretain: 2\n";
        let config =
            task_config(&TaskType::Snapshot, Some(document), &Map::new(), &settings(&["retain=4"])).unwrap();
        let snapshot = config.snapshot.unwrap();
        assert_eq!(snapshot.persistent_volume_claim.as_deref(), Some("backups"));
        assert_eq!(snapshot.retain, 4);
        let json = r#"{"retainRevisions": 10}"#;
        let config = task_config(&TaskType::Compact, Some(json), &Map::new(), &[]).unwrap();
        assert_eq!(config.compact.unwrap().retain_revisions, Some(10));
    }

    #[test]
    fn mistakes_name_the_field() {
        let cases: &[(TaskType, Option<&str>, &[&str], &str)] = &[
            (
                TaskType::Compact,
                None,
                &["retain=5"],
                "--config retain=5: spec.config.compact has no field \"retain\"; its fields: physical, retainRevisions, revision",
            ),
            (
                TaskType::Compact,
                None,
                &["retainRevisions=many"],
                "spec.config.compact.retainRevisions takes an integer, not \"many\"",
            ),
            (TaskType::Compact, None, &["physical=yes"], "spec.config.compact.physical takes true or false"),
            (TaskType::Defragment, None, &["maxFragmentedPercent"], "expected KEY=VALUE"),
            (
                TaskType::Maintenance,
                None,
                &["compact=1"],
                "spec.config.maintenance.compact takes fields of its own",
            ),
            (
                TaskType::Maintenance,
                None,
                &["compact.bogus=1"],
                "spec.config.maintenance.compact has no field \"bogus\"",
            ),
            (
                TaskType::Snapshot,
                Some("retian: 3"),
                &[],
                "--config-file: spec.config.snapshot has no field \"retian\"",
            ),
            (TaskType::Snapshot, Some("- a"), &[], "must be a mapping"),
            (TaskType::Snapshot, Some("retain: x"), &[], "spec.config.snapshot: "),
        ];
        for (task_type, document, given, wanted) in cases {
            let err = task_config(task_type, *document, &Map::new(), &settings(given)).unwrap_err();
            assert!(err.contains(wanted), "{given:?} {document:?}: {err}");
        }
    }

    fn stores(line: &[&str]) -> StoreArgs {
        use clap::Parser;
        let mut argv = vec!["kubectl-groundskeeper", "task", "create", "restore", "--target", "main"];
        argv.extend(line);
        match crate::cli::Cli::try_parse_from(argv).unwrap().command {
            crate::cli::Command::Task(crate::cli::TaskCommand::Create(args)) => args.stores,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn stores_as_people_write_them() {
        let cases: &[(&str, Result<StoreArg, &str>)] = &[
            ("pvc/backups", Ok(StoreArg::Claim("backups".into()))),
            ("PersistentVolumeClaim/backups", Ok(StoreArg::Claim("backups".into()))),
            ("s3://b/etcd/main", Ok(StoreArg::Bucket("s3://b/etcd/main".into()))),
            ("gs://b", Ok(StoreArg::Bucket("gs://b".into()))),
            ("az://container/p", Ok(StoreArg::Bucket("az://container/p".into()))),
            ("backups", Err("--from backups: expected pvc/NAME")),
            ("pvc/", Err("expected pvc/NAME")),
            ("pvc/a/b", Err("expected pvc/NAME")),
            ("file:///x", Err("--from file:///x: \"file:///x\": scheme \"file\" is not one of s3, gs, az")),
            ("s3:///p", Err("names no bucket")),
        ];
        for (text, wanted) in cases {
            match (parse_store("--from", text), wanted) {
                (Ok(got), Ok(want)) => assert_eq!(&got, want, "{text}"),
                (Err(why), Err(part)) => assert!(why.contains(part), "{text}: {why}"),
                (got, want) => panic!("{text}: got {got:?}, wanted {want:?}"),
            }
        }
    }

    #[test]
    fn store_flags_become_the_types_fields() {
        type Case = (TaskType, &'static [&'static str], serde_json::Value);
        let cases: &[Case] = &[
            (TaskType::Snapshot, &["--to", "pvc/snaps"], json!({"persistentVolumeClaim": "snaps"})),
            (
                TaskType::Snapshot,
                &[
                    "--to",
                    "s3://b/etcd",
                    "--endpoint",
                    "http://minio:9000",
                    "--region",
                    "eu",
                    "--credentials-secret",
                    "s3-keys",
                ],
                json!({"bucket": {"url": "s3://b/etcd", "endpoint": "http://minio:9000", "region": "eu", "credentialsSecret": "s3-keys"}}),
            ),
            (
                TaskType::Copy,
                &["--from", "pvc/snaps", "--to", "gs://b", "--credentials-secret", "gcs"],
                json!({"from": {"persistentVolumeClaim": "snaps"}, "to": {"bucket": {"url": "gs://b", "credentialsSecret": "gcs"}}}),
            ),
            (
                TaskType::Copy,
                &["--from", "s3://a", "--to", "s3://b", "--region", "eu"],
                json!({"from": {"bucket": {"url": "s3://a", "region": "eu"}}, "to": {"bucket": {"url": "s3://b", "region": "eu"}}}),
            ),
            (
                TaskType::Verify,
                &["--from", "s3://b", "--object", "main-1.db"],
                json!({"from": {"bucket": {"url": "s3://b"}}, "object": "main-1.db"}),
            ),
            (
                TaskType::Restore,
                &["--from", "pvc/snaps", "--override-quorum-check", "--yes"],
                json!({"from": {"persistentVolumeClaim": "snaps"}, "confirm": true, "overrideQuorumCheck": true}),
            ),
            (TaskType::Restore, &[], json!({"confirm": true})),
            (TaskType::Defragment, &[], json!({})),
            (
                TaskType::Snapshot,
                &["--to", "s3://b", "--compression", "zstd", "--encryption-secret", "backup-key"],
                json!({"bucket": {"url": "s3://b"}, "compression": "zstd", "encryption": {"secretName": "backup-key"}}),
            ),
            (
                TaskType::Delta,
                &["--to", "pvc/snaps", "--compression", "zstd", "--encryption-secret", "backup-key/aes.key"],
                json!({"to": {"persistentVolumeClaim": "snaps", "compression": "zstd",
                              "encryption": {"secretName": "backup-key", "key": "aes.key"}}}),
            ),
            (
                TaskType::Verify,
                &["--from", "pvc/snaps", "--encryption-secret", "backup-key"],
                json!({"from": {"persistentVolumeClaim": "snaps", "encryption": {"secretName": "backup-key"}}}),
            ),
            (
                TaskType::Restore,
                &[
                    "--from",
                    "pvc/snaps",
                    "--to-revision",
                    "9",
                    "--compression",
                    "zstd",
                    "--encryption-secret",
                    "k",
                ],
                json!({"from": {"persistentVolumeClaim": "snaps", "compression": "zstd", "encryption": {"secretName": "k"}},
                       "confirm": true, "toRevision": 9}),
            ),
        ];
        for (task_type, line, wanted) in cases {
            let got = store_settings(task_type, &stores(line)).unwrap();
            assert_eq!(Value::Object(got), *wanted, "{task_type} {line:?}");
        }
    }

    #[test]
    fn store_flags_a_type_does_not_take_are_refused() {
        let cases: &[(TaskType, &[&str], &str)] = &[
            (
                TaskType::Defragment,
                &["--from", "pvc/x"],
                "--from is for Copy, Verify, Restore tasks, not Defragment",
            ),
            (
                TaskType::Snapshot,
                &["--from", "pvc/x"],
                "--from is for Copy, Verify, Restore tasks, not Snapshot",
            ),
            (TaskType::Verify, &["--to", "pvc/x"], "--to is for Snapshot, Copy, Delta tasks, not Verify"),
            (TaskType::Copy, &["--yes"], "--yes is for Restore tasks, not Copy"),
            (
                TaskType::Copy,
                &["--from", "pvc/a", "--to", "pvc/b", "--encryption-secret", "k"],
                "--encryption-secret is for Snapshot, Verify, Delta, Restore tasks, not Copy",
            ),
            (
                TaskType::Copy,
                &["--from", "pvc/a", "--to", "pvc/b", "--compression", "zstd"],
                "--compression is for Snapshot, Delta, Restore tasks, not Copy",
            ),
            (
                TaskType::Verify,
                &["--compression", "zstd"],
                "--compression is for Snapshot, Delta, Restore tasks",
            ),
            (
                TaskType::Verify,
                &["--encryption-secret", "k"],
                "--encryption-secret is a setting of the store: name it with --from",
            ),
            (
                TaskType::Delta,
                &["--to", "pvc/a", "--encryption-secret", "k/"],
                "expected SECRET or SECRET/KEY",
            ),
            (TaskType::Copy, &["--object", "a.db"], "--object is for Verify, Restore tasks, not Copy"),
            (TaskType::Verify, &["--override-quorum-check"], "--override-quorum-check is for Restore tasks"),
            (
                TaskType::Restore,
                &["--from", "pvc/x", "--endpoint", "http://m:9000"],
                "--endpoint is a setting of a bucket, and neither --from nor --to names one",
            ),
            (TaskType::Restore, &["--from", "backups"], "--from backups: expected pvc/NAME"),
        ];
        for (task_type, line, wanted) in cases {
            let err = store_settings(task_type, &stores(line)).unwrap_err();
            assert!(err.contains(wanted), "{task_type} {line:?}: {err}");
        }
    }

    #[test]
    fn flags_replace_the_document_and_settings_apply_on_top() {
        let document = "from:\n  persistentVolumeClaim: old\nto:\n  bucket:\n    url: s3://b\n    options:\n      virtual_hosted_style_request: \"false\"\n";
        let flags = store_settings(
            &TaskType::Copy,
            &StoreArgs { from: Some("pvc/new".into()), ..StoreArgs::default() },
        )
        .unwrap();
        let config = task_config(
            &TaskType::Copy,
            Some(document),
            &flags,
            &settings(&["to.bucket.options.aws_allow_http=true", "only=a.db,b.db"]),
        )
        .unwrap();
        let copy = config.copy.unwrap();
        assert_eq!(copy.from.persistent_volume_claim.as_deref(), Some("new"));
        let bucket = copy.to.bucket.unwrap();
        assert_eq!(bucket.options.get("virtual_hosted_style_request").map(String::as_str), Some("false"));
        assert_eq!(bucket.options.get("aws_allow_http").map(String::as_str), Some("true"));
        assert_eq!(copy.only, ["a.db", "b.db"]);
        let err = task_config(&TaskType::Copy, Some(document), &flags, &settings(&["to.bucket.options=x"]))
            .unwrap_err();
        assert!(
            err.contains("spec.config.copy.to.bucket.options takes entries: to.bucket.options.NAME=VALUE"),
            "{err}"
        );
    }

    #[test]
    fn a_copy_and_a_restore_need_their_stores() {
        let restore = store_settings(&TaskType::Restore, &StoreArgs::default()).unwrap();
        let err = task_config(&TaskType::Restore, None, &restore, &[]).unwrap_err();
        assert!(err.contains("a Restore task needs --from STORE (where the snapshot is)"), "{err}");
        let err =
            task_config(&TaskType::Copy, None, &Map::new(), &settings(&["from.persistentVolumeClaim=x"]))
                .unwrap_err();
        assert!(err.contains("a Copy task needs --to STORE (where they go)"), "{err}");
        // The stores may come from the document instead.
        let config =
            task_config(&TaskType::Restore, Some("from:\n  persistentVolumeClaim: s\n"), &restore, &[])
                .unwrap();
        assert!(config.restore.unwrap().confirm);
    }
}
