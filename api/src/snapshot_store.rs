//! Where an etcd cluster's snapshots are kept: a PersistentVolumeClaim (a folder in the Job) or a
//! bucket of an object store (S3 and S3-compatible stores, Google Cloud Storage, Azure Blob
//! Storage), as tasks name them, and the checks of what a person wrote.
//!
//! Credentials are never written in a task: a bucket names a Secret in the task's namespace whose
//! keys are the store's credential names (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, ...); the
//! Job mounts it read-only and the runner reads it there.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Longest bucket URL.
pub const MAX_URL_LEN: usize = 1024;
/// Most options a bucket may set.
pub const MAX_OPTIONS: usize = 32;
/// URL schemes of the stores a bucket may be on.
pub const BUCKET_SCHEMES: &[&str] = &["s3", "gs", "az"];

/// A store of snapshots: exactly one of `persistentVolumeClaim` and `bucket`.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotStoreSpec {
    /// A PersistentVolumeClaim in the task's namespace (never created for you).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = crate::maintenance_task::MAX_NAME_LEN))]
    pub persistent_volume_claim: Option<String>,
    /// A bucket, or a prefix in one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bucket: Option<BucketSpec>,
    /// How snapshots and deltas written into this store are compressed: `zstd` (level 3, a
    /// standard zstd frame, which `zstd -d` reads by hand; about 3.7 times smaller for a db of
    /// Kubernetes objects) or `none` (the default: as etcd sends them). Readers tell each
    /// object's encoding from its first bytes, so plain and compressed ones may sit side by side.
    /// Only where something is written: refused on a Copy's stores (a copy carries objects as
    /// they are), a Verify's and a Restore's `from` (unless the Restore saves a replayed snapshot:
    /// `toRevision`, `toTime`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compression: Option<Compression>,
    /// Objects written are encrypted with the 32-byte key (raw, 64 hex digits or base64) in a
    /// Secret (AES-256-GCM, client-side, before a byte leaves the Job), and encrypted objects
    /// read are opened with it. The key is mounted into the Job only: never read by the
    /// controller, never logged; objects and the catalog name only its id. Refused on a Copy's
    /// stores (encrypted objects are copied as they are, needing no key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encryption: Option<EncryptionSpec>,
}

/// How a store's snapshots and deltas are compressed: `none` (as etcd sends them) or `zstd`
/// (level 3, a standard zstd frame).
#[derive(Serialize, Deserialize, Debug, Clone, Copy, Default, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    /// As etcd sends them.
    #[default]
    None,
    /// zstd, level 3.
    Zstd,
}

/// A bounded string of the two values (CEL rules over the spec need every string bounded).
impl JsonSchema for Compression {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Compression".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({"type": "string", "enum": ["none", "zstd"], "maxLength": 4})
    }
}

/// The key a store's snapshots and deltas are encrypted with (AES-256-GCM): in a Secret of the
/// task's namespace, mounted read-only into the Job, never read by the controller.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EncryptionSpec {
    /// A Secret in the task's namespace holding 32 random bytes, as they are, as 64 hex digits or
    /// as base64 (`kubectl create secret generic backup-key --from-literal=key="$(openssl rand
    /// -base64 32)"`). Objects written with another key keep needing that one: keep it until
    /// retention removed them.
    #[schemars(length(min = 1, max = 253), regex(pattern = SECRET_NAME_PATTERN))]
    pub secret_name: String,
    /// The Secret's data key that holds it. Absent: `key`.
    #[serde(default = "default_encryption_key")]
    #[schemars(length(min = 1, max = 253), regex(pattern = SECRET_KEY_PATTERN))]
    pub key: String,
}

/// A Secret's name: a DNS-1123 subdomain.
pub const SECRET_NAME_PATTERN: &str = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";
/// A Secret's data key.
pub const SECRET_KEY_PATTERN: &str = r"^[-._a-zA-Z0-9]+$";

/// `encryption.key` when absent.
pub const DEFAULT_ENCRYPTION_KEY: &str = "key";

fn default_encryption_key() -> String {
    DEFAULT_ENCRYPTION_KEY.to_owned()
}

/// How a store's objects are written and opened, checked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoreEncoding {
    /// Compress what is written (zstd, level [`ZSTD_LEVEL`]).
    pub compress: bool,
    /// Encrypt what is written, open what is read.
    pub encryption: Option<EncryptionSpec>,
}

/// The zstd level of `compression: zstd`.
pub const ZSTD_LEVEL: i32 = 3;

/// What a store is used for, as far as its encoding goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreUse {
    /// Snapshots or deltas are written into it (and read from it): both fields apply.
    Written,
    /// Only read: every object is decoded by its first bytes, so `compression` means nothing;
    /// `encryption` opens encrypted ones.
    Read,
    /// Copied from or into: objects are carried as they are, needing neither.
    Copied,
}

/// What is wrong with the `compression` and `encryption` of a store written into, at `field`,
/// each as (field, message); the encoding when nothing is.
pub fn check_encoding(
    compression: Option<Compression>,
    encryption: Option<&EncryptionSpec>,
    field: &str,
) -> Result<StoreEncoding, Vec<(String, String)>> {
    check_encoding_for(compression, encryption, field, StoreUse::Written)
}

/// What is wrong with a store's `compression` and `encryption` at `field` for `store_use`,
/// each as (field, message); the encoding when nothing is.
pub fn check_encoding_for(
    compression: Option<Compression>,
    encryption: Option<&EncryptionSpec>,
    field: &str,
    store_use: StoreUse,
) -> Result<StoreEncoding, Vec<(String, String)>> {
    let mut errors = Vec::new();
    let compress = compression == Some(Compression::Zstd);
    match store_use {
        StoreUse::Copied => {
            if compress {
                errors.push((
                    format!("{field}.compression"),
                    "a copy carries objects as they are; compressed ones stay so: remove it".to_owned(),
                ));
            }
            if encryption.is_some() {
                errors.push((
                    format!("{field}.encryption"),
                    "a copy carries objects as they are; encrypted ones stay so and need no key to be \
                     copied: remove it"
                        .to_owned(),
                ));
            }
        }
        StoreUse::Read if compress => errors.push((
            format!("{field}.compression"),
            "this store is only read, and every object is decoded by its first bytes (plain, zstd or \
             encrypted) whatever it was written with: remove it (keep encryption to open encrypted ones)"
                .to_owned(),
        )),
        StoreUse::Read | StoreUse::Written => {}
    }
    if let Some(encryption) = encryption.filter(|_| store_use != StoreUse::Copied) {
        if !is_dns_subdomain(&encryption.secret_name) {
            errors.push((
                format!("{field}.encryption.secretName"),
                format!(
                    "{:?} is not a Secret's name (a DNS-1123 subdomain: lower-case letters, digits, '-' \
                     and '.', at most 253): name the Secret that holds the key, in this namespace",
                    encryption.secret_name
                ),
            ));
        }
        let key_ok = !encryption.key.is_empty()
            && encryption.key.len() <= 253
            && encryption.key.chars().all(|c| c.is_ascii_alphanumeric() || "-._".contains(c));
        if !key_ok {
            errors.push((
                format!("{field}.encryption.key"),
                format!(
                    "{:?} is not a Secret's data key (letters, digits, '-', '_' and '.', at most 253): \
                     give the key under which the Secret holds it, or leave it out for \"key\"",
                    encryption.key
                ),
            ));
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok(StoreEncoding {
        compress: compress && store_use == StoreUse::Written,
        encryption: encryption.cloned().filter(|_| store_use != StoreUse::Copied),
    })
}

fn is_dns_subdomain(name: &str) -> bool {
    let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    let label_ok = |label: &str| {
        label.chars().all(|c| alnum(c) || c == '-') && label.starts_with(alnum) && label.ends_with(alnum)
    };
    !name.is_empty() && name.len() <= 253 && name.split('.').all(label_ok)
}

/// A bucket of an object store, or a prefix in it.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BucketSpec {
    /// `s3://BUCKET[/PREFIX]` (S3 and S3-compatible stores: MinIO, Ceph, R2 ...),
    /// `gs://BUCKET[/PREFIX]` (Google Cloud Storage) or `az://CONTAINER[/PREFIX]` (Azure Blob
    /// Storage). Snapshots are objects directly under the prefix.
    #[schemars(length(min = 1, max = MAX_URL_LEN))]
    pub url: String,
    /// The store's endpoint, for S3-compatible stores other than AWS
    /// (`https://minio.backup.svc:9000`). `http://` endpoints are allowed (say so knowingly).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = MAX_URL_LEN))]
    pub endpoint: Option<String>,
    /// The region (S3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub region: Option<String>,
    /// Other settings of the store that are not secret, by the names of the `object_store`
    /// crate's configuration keys (`virtual_hosted_style_request`, `azure_storage_account_name`,
    /// ...). Credentials go in `credentialsSecret`, never here.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(length(max = MAX_OPTIONS))]
    pub options: BTreeMap<String, String>,
    /// A Secret in the task's namespace whose keys are the store's credentials
    /// (`AWS_ACCESS_KEY_ID` and `AWS_SECRET_ACCESS_KEY`, optionally `AWS_SESSION_TOKEN`;
    /// `GOOGLE_SERVICE_ACCOUNT_KEY`; `AZURE_STORAGE_ACCOUNT_NAME` and
    /// `AZURE_STORAGE_ACCOUNT_KEY`), mounted read-only into the Job. Absent: the pod's own
    /// identity (instance profile, workload identity).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = crate::maintenance_task::MAX_NAME_LEN))]
    pub credentials_secret: Option<String>,
}

/// A store, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Store {
    Claim(String),
    Bucket(BucketSpec),
}

impl Store {
    /// How people and the EtcdCluster's snapshot catalog name the store: `pvc/NAME` or the
    /// bucket's URL.
    pub fn display(&self) -> String {
        match self {
            Store::Claim(claim) => format!("pvc/{claim}"),
            Store::Bucket(bucket) => bucket.url.trim_end_matches('/').to_owned(),
        }
    }
}

/// Option names that would carry a secret: refused in `options` (they belong in the Secret).
const SECRET_OPTION_WORDS: &[&str] = &["secret", "key", "token", "password", "sas", "credential"];

/// Option names that are settings although they contain one of [`SECRET_OPTION_WORDS`].
const NOT_SECRET_OPTIONS: &[&str] = &["aws_sse_kms_key_id", "sse_kms_key_id", "azure_storage_account_name"];

/// What is wrong with `spec` as a store, each as (field below `field`, message); the store when
/// nothing is.
pub fn check_store(spec: &SnapshotStoreSpec, field: &str) -> Result<Store, Vec<(String, String)>> {
    match (&spec.persistent_volume_claim, &spec.bucket) {
        (Some(claim), None) if !claim.is_empty() => Ok(Store::Claim(claim.clone())),
        (Some(_), None) => Err(vec![(
            format!("{field}.persistentVolumeClaim"),
            "is empty: name a PersistentVolumeClaim in this namespace".to_owned(),
        )]),
        (None, Some(bucket)) => check_bucket(bucket, &format!("{field}.bucket")).map(Store::Bucket),
        (Some(_), Some(_)) => {
            Err(vec![(field.to_owned(), "sets both persistentVolumeClaim and bucket: keep one".to_owned())])
        }
        (None, None) => {
            Err(vec![(field.to_owned(), "names no store: set persistentVolumeClaim or bucket".to_owned())])
        }
    }
}

/// What is wrong with a bucket, each as (field, message).
pub fn check_bucket(bucket: &BucketSpec, field: &str) -> Result<BucketSpec, Vec<(String, String)>> {
    let mut errors = Vec::new();
    if let Err(why) = bucket_name(&bucket.url) {
        errors.push((format!("{field}.url"), why));
    }
    if let Some(endpoint) = &bucket.endpoint
        && !(endpoint.starts_with("https://") || endpoint.starts_with("http://"))
    {
        errors.push((format!("{field}.endpoint"), format!("{endpoint:?} is not an http:// or https:// URL")));
    }
    for name in bucket.options.keys() {
        let lower = name.to_ascii_lowercase();
        if lower == "endpoint" || lower == "region" || lower == "aws_endpoint" || lower == "aws_region" {
            errors.push((
                format!("{field}.options.{name}"),
                "is a field of its own: set bucket.endpoint or bucket.region instead".to_owned(),
            ));
        } else if is_secret_option(&lower) {
            errors.push((
                format!("{field}.options.{name}"),
                "looks like a credential: put it in the Secret named by credentialsSecret, never in \
                 the task"
                    .to_owned(),
            ));
        }
    }
    if bucket.options.len() > MAX_OPTIONS {
        errors.push((format!("{field}.options"), format!("has more than {MAX_OPTIONS} entries")));
    }
    if errors.is_empty() { Ok(bucket.clone()) } else { Err(errors) }
}

fn is_secret_option(lower: &str) -> bool {
    !NOT_SECRET_OPTIONS.contains(&lower) && SECRET_OPTION_WORDS.iter().any(|word| lower.contains(word))
}

/// The bucket (or container) a URL names; `Err` says what is wrong.
pub fn bucket_name(url: &str) -> Result<&str, String> {
    let Some((scheme, rest)) = url.split_once("://") else {
        return Err(format!("{url:?} is not a URL: write s3://BUCKET/PREFIX (or gs://, az://)"));
    };
    if !BUCKET_SCHEMES.contains(&scheme) {
        return Err(format!(
            "{url:?}: scheme {scheme:?} is not one of s3, gs, az (for a volume, use persistentVolumeClaim)"
        ));
    }
    let bucket = rest.split('/').next().unwrap_or_default();
    if bucket.is_empty() {
        return Err(format!("{url:?} names no bucket: write {scheme}://BUCKET/PREFIX"));
    }
    if url.len() > MAX_URL_LEN {
        return Err(format!("is {} characters long; the most is {MAX_URL_LEN}", url.len()));
    }
    if rest.contains("//") || rest.contains(['?', '#']) {
        return Err(format!("{url:?}: no empty path segment, query or fragment (a prefix is a plain path)"));
    }
    Ok(bucket)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bucket(url: &str) -> BucketSpec {
        BucketSpec { url: url.into(), ..BucketSpec::default() }
    }

    #[test]
    fn a_store_is_exactly_one_of_a_claim_and_a_bucket() {
        let claim = SnapshotStoreSpec { persistent_volume_claim: Some("snaps".into()), ..Default::default() };
        assert_eq!(check_store(&claim, "f"), Ok(Store::Claim("snaps".into())));
        let both = SnapshotStoreSpec {
            persistent_volume_claim: Some("snaps".into()),
            bucket: Some(bucket("s3://b")),
            ..Default::default()
        };
        assert!(check_store(&both, "f").unwrap_err()[0].1.contains("both"));
        assert!(check_store(&SnapshotStoreSpec::default(), "f").unwrap_err()[0].1.contains("no store"));
    }

    #[test]
    fn bucket_urls_are_checked() {
        let cases = [
            ("s3://backups/etcd/main", Ok("backups")),
            ("gs://b", Ok("b")),
            ("az://container/p", Ok("container")),
            ("backups/etcd", Err("not a URL")),
            ("file:///snapshots", Err("not one of s3, gs, az")),
            ("s3:///prefix", Err("names no bucket")),
            ("s3://b//p", Err("empty path segment")),
            ("s3://b/p?x=1", Err("query")),
        ];
        for (url, expected) in cases {
            match (bucket_name(url), expected) {
                (Ok(name), Ok(want)) => assert_eq!(name, want, "{url}"),
                (Err(why), Err(want)) => assert!(why.contains(want), "{url}: {why}"),
                (got, want) => panic!("{url}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn credentials_are_refused_in_options_and_endpoints_are_urls() {
        let mut spec = bucket("s3://b");
        spec.endpoint = Some("minio:9000".into());
        spec.options.insert("aws_secret_access_key".into(), "x".into());
        spec.options.insert("virtual_hosted_style_request".into(), "true".into());
        spec.options.insert("aws_sse_kms_key_id".into(), "k".into());
        let errors = check_bucket(&spec, "spec.config.snapshot.bucket").unwrap_err();
        let fields: Vec<&str> = errors.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(
            fields,
            [
                "spec.config.snapshot.bucket.endpoint",
                "spec.config.snapshot.bucket.options.aws_secret_access_key"
            ]
        );
    }
}
