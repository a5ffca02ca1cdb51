//! Snapshots in object stores: S3 and S3-compatible stores, Google Cloud Storage and Azure Blob
//! Storage, through the `object_store` crate (its own request signing; ring for TLS).
//!
//! A [`BucketLocation`] is a URL (`s3://BUCKET[/PREFIX]`, `gs://BUCKET[/PREFIX]`,
//! `az://CONTAINER[/PREFIX]`), settings that are no secret (`endpoint`, `region`, `allow_http`,
//! `account_name` ..., by `object_store`'s configuration key names) and, optionally, a folder (a
//! mounted Secret) with one file per credential, named by its key (`AWS_ACCESS_KEY_ID`,
//! `AWS_SECRET_ACCESS_KEY`, `GOOGLE_SERVICE_ACCOUNT_KEY`, `AZURE_STORAGE_ACCOUNT_KEY` ...). A
//! setting or a credential file the store does not know is refused (bad input, naming it); a
//! secret given as a setting is refused too, since settings are part of the Job's arguments.
//! Credential values are never logged nor put in a result: every message from the store is
//! cleaned of them before it is shown.
//!
//! Snapshots are the objects directly under the prefix whose names the cluster's file name
//! template gives (`stores::etcd::retention`), as on a claim. Each carries user metadata:
//! `sha256` (of the whole object), `revision`, `keys`, `cluster`, `member`.
//!
//! Writes are multipart uploads of [`PART_BYTES`] parts, at most [`PARTS_IN_FLIGHT`] at a time,
//! completed only when the caller says the bytes are whole, aborted otherwise: a multipart upload
//! that was never completed is no object, so nothing under the object's name is ever incomplete.
//! (An upload of a run killed outright stays in the bucket as an incomplete upload, invisible to
//! listings and reads, until the bucket's lifecycle rule for incomplete uploads removes it.)

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use groundskeeper_protocol::operation::BucketLocation;
use groundskeeper_stores::etcd::retention::{self, NameTemplate};
use object_store::path::Path as ObjectPath;
use object_store::{
    Attribute, Attributes, ClientOptions, GetOptions, ObjectStore, ObjectStoreExt, PutMultipartOptions,
    RetryConfig, WriteMultipart,
};

use super::codec::{self, Decoder, Encoded, Key};
use crate::run::Failure;

mod metadata;
use metadata::Sealer;

/// User metadata a snapshot object carries.
pub(crate) const META_SHA256: &str = "sha256";
pub(crate) const META_REVISION: &str = "revision";
pub(crate) const META_KEYS: &str = "keys";
pub(crate) const META_CLUSTER: &str = "cluster";
pub(crate) const META_MEMBER: &str = "member";

/// Size of each part of a multipart upload. S3 takes at most 10 000 parts, so objects up to
/// 80 GB; etcd's databases stay far below that.
pub(crate) const PART_BYTES: usize = 8 * 1024 * 1024;
/// Parts uploaded at the same time: enough to keep a link busy while the next part fills, and
/// the upload's memory stays under (this + 1) × [`PART_BYTES`].
pub(crate) const PARTS_IN_FLIGHT: usize = 3;

/// An object downloaded into a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Downloaded {
    pub path: PathBuf,
    pub size_bytes: u64,
    /// SHA-256 of the bytes written, hex.
    pub sha256: String,
    /// The object's user metadata (`sha256`, `revision`, `keys`, `cluster`, `member` for a
    /// snapshot the runner wrote).
    pub metadata: BTreeMap<String, String>,
    /// A compressed or encrypted object: it was decoded on its way into the file, which holds
    /// this content (`size_bytes` and `sha256` are the object's).
    pub content: Option<Encoded>,
}

/// One of the cluster's snapshots in a bucket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StoredSnapshot {
    pub name: String,
    pub size_bytes: u64,
    pub last_modified: jiff::Timestamp,
    /// Its user metadata, when the listing asked for it (one HEAD per object).
    pub metadata: BTreeMap<String, String>,
}

/// Which kind of store a URL names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Provider {
    S3,
    Gcs,
    Azure,
    /// `object_store`'s in-memory store, for tests of this module.
    #[cfg(test)]
    Memory,
}

impl Provider {
    fn describe(self) -> &'static str {
        match self {
            Provider::S3 => "S3",
            Provider::Gcs => "Google Cloud Storage",
            Provider::Azure => "Azure Blob Storage",
            #[cfg(test)]
            Provider::Memory => "in-memory",
        }
    }

    /// What a person should check when the store refuses the credentials.
    fn credential_hint(self) -> &'static str {
        match self {
            Provider::S3 => "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN)",
            Provider::Gcs => "GOOGLE_SERVICE_ACCOUNT_KEY",
            Provider::Azure => "AZURE_STORAGE_ACCOUNT_KEY (or a SAS token, or a client secret)",
            #[cfg(test)]
            Provider::Memory => "nothing",
        }
    }
}

/// An opened bucket location.
pub(crate) struct Bucket {
    store: Arc<dyn ObjectStore>,
    provider: Provider,
    /// The URL as given, without a trailing `/`: objects are shown as `URL/NAME`.
    url: String,
    bucket: String,
    prefix: Option<ObjectPath>,
    credentials_dir: Option<String>,
    /// Credential values, to clean out of every message the store sends back.
    secrets: Vec<String>,
    /// What a metadata update needs beyond `object_store`'s API (see [`Bucket::replace_metadata`]).
    sealer: Sealer,
    /// The HTTP client of those updates.
    client: reqwest::Client,
}

impl std::fmt::Debug for Bucket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // No secrets.
        f.debug_struct("Bucket").field("url", &self.url).field("provider", &self.provider).finish()
    }
}

/// The stores' HTTP clients take the process's TLS provider: the binary installs ring first
/// thing; a library caller (a test) may not have. Installing it twice changes nothing.
fn install_tls_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// `object_store`'s retries, shorter than its defaults (10 over 3 minutes): a run that cannot
/// reach the store is retried by its Job anyway, and says so sooner.
fn retry_config() -> RetryConfig {
    RetryConfig { max_retries: 5, retry_timeout: Duration::from_secs(60), ..RetryConfig::default() }
}

/// Requests may take long (a part over a slow link), connections may not.
fn client_options() -> ClientOptions {
    ClientOptions::new().with_timeout(Duration::from_secs(300)).with_connect_timeout(Duration::from_secs(10))
}

impl Bucket {
    /// Opens a location: parses its URL, applies its settings and reads its credentials folder.
    /// Nothing is asked of the store yet.
    pub(crate) fn open(location: &BucketLocation) -> Result<Self, Failure> {
        install_tls_provider();
        let url = location.url.trim_end_matches('/').to_owned();
        let (provider, bucket, prefix) = parse_url(&url)?;
        let bad = |why: String| Failure::bad_input(format!("bucket {url}: {why}"));
        if !bucket.chars().all(|c| c.is_ascii_graphic()) {
            return Err(bad("the bucket name holds a character bucket names never hold".into()));
        }
        for (key, value) in &location.options {
            // Settings end up in URLs and headers: printable ASCII without spaces.
            let spaced = value.contains(' ').then(|| "holds a space".to_owned());
            if let Some(why) = check_header_value(value).err().or(spaced) {
                return Err(bad(format!("option {key}: its value {why}; give one word of printable ASCII")));
            }
            check_url_option(key, value).map_err(bad)?;
            if is_secret_key(key) {
                return Err(bad(format!(
                    "option {key} is a secret: put it in the credentials folder (a mounted Secret), \
                     never in the options, which are part of the Job's arguments"
                )));
            }
        }
        let credentials = match &location.credentials_dir {
            Some(dir) => read_credentials(Path::new(dir)).map_err(bad)?,
            None => Vec::new(),
        };
        let secrets = credentials.iter().filter(|c| is_secret_key(&c.key)).map(|c| c.value.clone()).collect();
        let (store, sealer): (Arc<dyn ObjectStore>, Sealer) = match provider {
            Provider::S3 => build_s3(&bucket, location, &credentials).map_err(bad)?,
            Provider::Gcs => build_gcs(&bucket, location, &credentials).map_err(bad)?,
            Provider::Azure => build_azure(&bucket, location, &credentials).map_err(bad)?,
            #[cfg(test)]
            Provider::Memory => unreachable!("no URL names the in-memory store"),
        };
        let client = http_client(location).map_err(bad)?;
        Ok(Self {
            store,
            provider,
            url,
            bucket,
            prefix,
            credentials_dir: location.credentials_dir.clone(),
            secrets,
            sealer,
            client,
        })
    }

    /// A bucket over `object_store`'s in-memory store, for tests.
    #[cfg(test)]
    pub(crate) fn in_memory(url: &str) -> Self {
        install_tls_provider();
        Self {
            store: Arc::new(object_store::memory::InMemory::new()),
            provider: Provider::Memory,
            url: url.to_owned(),
            bucket: "memory".into(),
            prefix: None,
            credentials_dir: None,
            secrets: vec![],
            sealer: Sealer::Memory,
            client: reqwest::Client::new(),
        }
    }

    /// The location as a URL, for messages and results.
    pub(crate) fn url(&self) -> &str {
        &self.url
    }

    /// An object's URL, for messages and results.
    pub(crate) fn object_url(&self, name: &str) -> String {
        format!("{}/{name}", self.url)
    }

    fn path(&self, name: &str) -> Result<ObjectPath, Failure> {
        let bad = || {
            Failure::bad_input(format!(
                "{}: {name:?} cannot be an object name (empty, holds '/', or characters object \
                 stores do not take)",
                self.object_url(name)
            ))
        };
        if name.is_empty() || name.contains('/') || name == "." || name == ".." {
            return Err(bad());
        }
        let full = match &self.prefix {
            Some(prefix) => format!("{prefix}/{name}"),
            None => name.to_owned(),
        };
        ObjectPath::parse(&full).map_err(|_| bad())
    }

    /// Whether a snapshot may be written under `name`: a valid name whose key, and its staging
    /// object's, fit the stores' key limit. Bad input otherwise, found before anything is written
    /// or asked of etcd.
    pub(crate) fn check_new_name(&self, name: &str) -> Result<(), Failure> {
        let staging = self.path(&staging_name(name))?;
        self.path(name)?;
        let key_bytes = staging.as_ref().len();
        if key_bytes > MAX_KEY_BYTES {
            let prefix = self.prefix.as_ref().map_or(0, |p| p.as_ref().len() + 1);
            return Err(Failure::bad_input(format!(
                "{}: the object name is {} bytes long; with the prefix and the staging object's \
                 `.NAME.partial` it would make a {key_bytes}-byte key, and object stores take at most \
                 {MAX_KEY_BYTES}: give a name of at most {} bytes",
                self.url,
                name.len(),
                MAX_KEY_BYTES - prefix - ".".len() - ".partial".len()
            )));
        }
        Ok(())
    }

    /// Starts reading object `name`: its size and user metadata now, its bytes as they arrive.
    pub(crate) async fn read(&self, name: &str) -> Result<Reading<'_>, Failure> {
        let path = self.path(name)?;
        let result = self
            .store
            .get_opts(&path, GetOptions::default())
            .await
            .map_err(|e| self.failure("read", Some(name), e))?;
        Ok(Reading {
            bucket: self,
            name: name.to_owned(),
            size: result.meta.size,
            metadata: user_metadata(&result.attributes),
            stream: result.into_stream(),
        })
    }

    /// Downloads object `name` of the bucket into a file at `into`: whatever is at `into` is
    /// replaced, the file is created anew, written as the object streams in (never held in memory
    /// whole), hashed on the way and fsynced. An object whose recorded `sha256` metadata does not
    /// match its bytes is refused (bad input: it is damaged) and the file removed; so is a missing
    /// object or bucket, and credentials the store refuses. A network failure or a server error is
    /// retryable. The file is removed whenever the download fails.
    pub(crate) async fn download(
        &self,
        name: &str,
        into: &Path,
        key: Option<&Key>,
    ) -> Result<Downloaded, Failure> {
        let mut reading = self.read(name).await?;
        let metadata = reading.metadata.clone();
        let expected_size = reading.size;
        let mut file = Download::create(into)?;
        let mut decoder = Decoder::new(self.object_url(name), key);
        let mut size = 0u64;
        let mut write = |bytes: &[u8]| file.write(bytes);
        while let Some(chunk) = reading.next().await? {
            decoder.push(&chunk, &mut write)?;
            size += chunk.len() as u64;
        }
        if size != expected_size {
            return Err(Failure::retryable(format!(
                "{}: {size} bytes arrived of the {expected_size} the store announced; the read was \
                 cut short",
                self.object_url(name)
            )));
        }
        let encoded = decoder.finish(&mut write)?;
        let sha256 = encoded.stored_sha256.clone();
        if let Some(recorded) = metadata.get(META_SHA256)
            && *recorded != sha256
        {
            return Err(Failure::bad_input(format!(
                "{}: its bytes hash to sha256 {sha256}, but its metadata records {recorded}: the \
                 object is damaged; take a new snapshot, or copy it again from a good copy",
                self.object_url(name)
            )));
        }
        if let Some(recorded) = metadata.get(codec::META_CONTENT_SHA256)
            && encoded.encoding.is_some()
            && *recorded != encoded.content_sha256
        {
            return Err(Failure::bad_input(format!(
                "{}: it decodes to content with sha256 {}, but its metadata records {recorded}: the \
                 object is damaged or was replaced; take a new snapshot, or copy it again from a good copy",
                self.object_url(name),
                encoded.content_sha256
            )));
        }
        file.finish()?;
        let content = encoded.encoding.is_some().then_some(encoded);
        Ok(Downloaded { path: into.to_owned(), size_bytes: size, sha256, metadata, content })
    }

    /// An object's size and user metadata; `None` when there is no such object.
    pub(crate) async fn head(&self, name: &str) -> Result<Option<(u64, BTreeMap<String, String>)>, Failure> {
        let path = self.path(name)?;
        let options = GetOptions { head: true, ..GetOptions::default() };
        match self.store.get_opts(&path, options).await {
            Ok(result) => Ok(Some((result.meta.size, user_metadata(&result.attributes)))),
            Err(object_store::Error::NotFound { .. }) => {
                // A missing bucket answers a HEAD as a missing object does: tell them apart.
                self.check_bucket_exists().await?;
                Ok(None)
            }
            Err(e) => Err(self.failure("read", Some(name), e)),
        }
    }

    /// Names of the objects directly under the prefix.
    pub(crate) async fn list_names(&self) -> Result<Vec<(String, u64, jiff::Timestamp)>, Failure> {
        let listing = self
            .store
            .list_with_delimiter(self.prefix.as_ref())
            .await
            .map_err(|e| self.failure("list", None, e))?;
        Ok(listing
            .objects
            .into_iter()
            .filter_map(|meta| {
                let name = meta.location.filename()?.to_owned();
                let modified = jiff::Timestamp::from_second(meta.last_modified.timestamp()).ok()?;
                Some((name, meta.size, modified))
            })
            .collect())
    }

    /// The cluster's snapshots in the bucket (the objects directly under its prefix whose whole
    /// name `template` gives the cluster), oldest first by the time in their names; with their
    /// user metadata when `with_metadata` (one HEAD request per snapshot).
    pub(crate) async fn list_snapshots(
        &self,
        template: &NameTemplate,
        with_metadata: bool,
    ) -> Result<Vec<StoredSnapshot>, Failure> {
        let objects = self.list_names().await?;
        let names: Vec<String> = objects.iter().map(|(name, _, _)| name.clone()).collect();
        // Retention's selection with nothing kept is every snapshot of the cluster, oldest first.
        let ordered = retention::select(template, &names, "", 1).delete;
        let mut snapshots = Vec::with_capacity(ordered.len());
        for name in ordered {
            let Some((_, size, modified)) = objects.iter().find(|(n, _, _)| *n == name) else { continue };
            let metadata = match with_metadata {
                true => self.head(&name).await?.map(|(_, m)| m).unwrap_or_default(),
                false => BTreeMap::new(),
            };
            snapshots.push(StoredSnapshot { size_bytes: *size, last_modified: *modified, metadata, name });
        }
        Ok(snapshots)
    }

    /// Deletes an object (gone already is fine).
    pub(crate) async fn delete(&self, name: &str) -> Result<(), Failure> {
        let path = self.path(name)?;
        match self.store.delete(&path).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(self.failure("delete", Some(name), e)),
        }
    }

    /// Copies object `from` to `to` (`size` bytes) inside the store, with `metadata` (see
    /// [`metadata`]): how a snapshot gets what is known only once it was streamed. What was under
    /// `to` is replaced whole, or left as it was when this fails.
    async fn copy_with_metadata(
        &self,
        from: &str,
        to: &str,
        size: u64,
        metadata: &BTreeMap<String, String>,
    ) -> Result<(), Failure> {
        let (from_path, to_path) = (self.path(from)?, self.path(to)?);
        let copy = metadata::Copy { from: from_path.as_ref(), to: to_path.as_ref(), size };
        let copied = self
            .sealer
            .copy_with_metadata(&self.client, copy, metadata)
            .await
            .map_err(|e| self.request_failure("record the metadata of", to, e))?;
        if copied {
            return Ok(());
        }
        // No copy that sets metadata: recorded on the staging object, which the store's own copy
        // carries over.
        self.replace_metadata(from, size, metadata).await?;
        self.store.copy(&from_path, &to_path).await.map_err(|e| self.failure("write", Some(to), e))
    }

    /// Replaces the user metadata of object `name` (`size` bytes) with `metadata`, inside the
    /// store.
    async fn replace_metadata(
        &self,
        name: &str,
        size: u64,
        metadata: &BTreeMap<String, String>,
    ) -> Result<(), Failure> {
        let path = self.path(name)?;
        #[cfg(test)]
        if let Sealer::Memory = self.sealer {
            let bytes = self.store.get(&path).await.map_err(|e| self.failure("read", Some(name), e))?;
            let bytes = bytes.bytes().await.map_err(|e| self.failure("read", Some(name), e))?;
            let mut attributes = Attributes::new();
            for (key, value) in metadata {
                attributes.insert(Attribute::Metadata(key.clone().into()), value.clone().into());
            }
            let options = object_store::PutOptions { attributes, ..Default::default() };
            self.store
                .put_opts(&path, bytes.into(), options)
                .await
                .map_err(|e| self.failure("write", Some(name), e))?;
            return Ok(());
        }
        self.sealer
            .replace(&self.client, path.as_ref(), size, metadata)
            .await
            .map_err(|e| self.request_failure("record the metadata of", name, e))
    }

    /// A failed metadata update, classified as [`Bucket::failure`] classifies the store's.
    fn request_failure(&self, action: &str, name: &str, error: metadata::RequestError) -> Failure {
        let text = self.redact(&error.message);
        let what = self.object_url(name);
        match error.status.map(|s| s.as_u16()) {
            Some(401 | 403) => Failure::bad_input(format!(
                "cannot {action} {what}: the {} store refused the request ({}); check {} and that they \
                 may read and write objects in bucket {}",
                self.provider.describe(),
                s3_error_code(&text).unwrap_or_else(|| "access denied".into()),
                self.credentials_described(),
                self.bucket
            )),
            Some(404) => Failure::bad_input(format!(
                "cannot {action} {what}: the store says there is no such object or bucket ({})",
                s3_error_code(&text).unwrap_or_else(|| "not found".into())
            )),
            _ => Failure::retryable(format!("cannot {action} {what}: {text}")),
        }
    }

    fn credentials_described(&self) -> String {
        match &self.credentials_dir {
            Some(dir) => format!("the credentials in {dir} ({})", self.provider.credential_hint()),
            None => "the Job's ambient credentials (no credentials folder was given)".to_owned(),
        }
    }

    /// Starts a multipart upload of snapshot `name` with `metadata`, into its staging object.
    /// Nothing is under `name` until [`Staged::publish`].
    pub(crate) async fn start_upload(
        &self,
        name: &str,
        metadata: &BTreeMap<String, String>,
    ) -> Result<Upload<'_>, Failure> {
        self.check_new_name(name)?;
        let path = self.path(&staging_name(name))?;
        let mut attributes = Attributes::new();
        attributes.insert(Attribute::ContentType, "application/octet-stream".into());
        for (key, value) in metadata {
            attributes.insert(Attribute::Metadata(key.clone().into()), value.clone().into());
        }
        let options = PutMultipartOptions { attributes, ..PutMultipartOptions::default() };
        let upload = self
            .store
            .put_multipart_opts(&path, options)
            .await
            .map_err(|e| self.failure("write", Some(&staging_name(name)), e))?;
        Ok(Upload {
            bucket: self,
            name: name.to_owned(),
            writer: Some(WriteMultipart::new_with_chunk_size(upload, PART_BYTES)),
        })
    }

    /// Whether the bucket exists (a listing of its prefix answers); `Err` when it does not or
    /// cannot be reached.
    pub(crate) async fn check_bucket_exists(&self) -> Result<(), Failure> {
        self.store
            .list_with_delimiter(self.prefix.as_ref())
            .await
            .map(drop)
            .map_err(|e| self.failure("list", None, e))
    }

    /// A failure of the store's, classified: credentials refused and a missing bucket or object
    /// are bad input (a retry would not help), anything else (the network, a server error) is
    /// retryable. Credential values are cleaned out of the store's words.
    pub(crate) fn failure(&self, action: &str, name: Option<&str>, error: object_store::Error) -> Failure {
        let text = self.redact(&error.to_string());
        let code = s3_error_code(&text);
        let what = match name {
            Some(name) => self.object_url(name),
            None => self.url.clone(),
        };
        let credentials = self.credentials_described();
        let missing_bucket = code.as_deref() == Some("NoSuchBucket")
            || code.as_deref() == Some("ContainerNotFound")
            || (matches!(error, object_store::Error::NotFound { .. }) && name.is_none());
        if missing_bucket {
            return Failure::bad_input(format!(
                "cannot {action} {what}: bucket {} does not exist at this endpoint; check the \
                 bucket's name and the endpoint/region options, and create the bucket",
                self.bucket
            ));
        }
        // object_store reports a refused listing as a generic error: the status and the S3 code
        // tell it apart from a network failure.
        let refused = matches!(
            error,
            object_store::Error::PermissionDenied { .. } | object_store::Error::Unauthenticated { .. }
        ) || code.as_deref().is_some_and(|c| CREDENTIAL_CODES.contains(&c))
            || text.contains("403 Forbidden")
            || text.contains("401 Unauthorized");
        match error {
            _ if refused => Failure::bad_input(format!(
                "cannot {action} {what}: the {} store refused the request ({}); check {credentials} \
                     and that they may {action} in bucket {}",
                self.provider.describe(),
                code.as_deref().unwrap_or("access denied"),
                self.bucket
            )),
            object_store::Error::NotFound { .. } => Failure::bad_input(format!(
                "cannot {action} {what}: no such object in bucket {}",
                self.bucket
            )),
            _ => Failure::retryable(format!("cannot {action} {what}: {text}")),
        }
    }

    /// `text` without any credential value.
    fn redact(&self, text: &str) -> String {
        let mut text = text.to_owned();
        for secret in self.secrets.iter().filter(|s| s.len() >= 4) {
            text = text.replace(secret.as_str(), "[redacted]");
        }
        text
    }
}

/// An object being read: its size and metadata, then its bytes piece by piece.
pub(crate) struct Reading<'a> {
    bucket: &'a Bucket,
    name: String,
    pub size: u64,
    pub metadata: BTreeMap<String, String>,
    stream: futures::stream::BoxStream<'static, object_store::Result<bytes::Bytes>>,
}

impl Reading<'_> {
    /// The next piece (`None` at the end), or why the read broke (retryable).
    pub(crate) async fn next(&mut self) -> Result<Option<bytes::Bytes>, Failure> {
        match self.stream.next().await {
            None => Ok(None),
            Some(Ok(chunk)) => Ok(Some(chunk)),
            Some(Err(e)) => Err(self.bucket.failure("read", Some(&self.name), e)),
        }
    }
}

/// A multipart upload under way, into the hidden staging object of a snapshot ([`staging_name`]):
/// nothing is ever written under the snapshot's own name but by [`Staged::publish`]. Dropped
/// without [`Upload::complete`] or [`Upload::abort`], it is aborted in the background (best
/// effort: a process that exits at once leaves it incomplete).
#[derive(Debug)]
pub(crate) struct Upload<'a> {
    bucket: &'a Bucket,
    name: String,
    writer: Option<WriteMultipart>,
}

impl<'a> Upload<'a> {
    /// Adds bytes, waiting while [`PARTS_IN_FLIGHT`] parts are on their way.
    pub(crate) async fn write(&mut self, bytes: &[u8]) -> Result<(), Failure> {
        let writer = self.writer.as_mut().expect("open until completed or aborted");
        writer
            .wait_for_capacity(PARTS_IN_FLIGHT)
            .await
            .map_err(|e| self.bucket.failure("write", Some(&staging_name(&self.name)), e))?;
        writer.write(bytes);
        Ok(())
    }

    /// Uploads what is left and completes the upload: the staging object appears, whole; the
    /// snapshot's name is not touched yet.
    pub(crate) async fn complete(mut self) -> Result<Staged<'a>, Failure> {
        let writer = self.writer.take().expect("open until completed or aborted");
        let staging = staging_name(&self.name);
        writer.finish().await.map_err(|e| self.bucket.failure("write", Some(&staging), e))?;
        Ok(Staged { bucket: self.bucket, name: std::mem::take(&mut self.name), staging })
    }

    /// Gives the upload up: its parts are deleted, no object appears.
    pub(crate) async fn abort(mut self) -> Result<(), Failure> {
        let writer = self.writer.take().expect("open until completed or aborted");
        writer
            .abort()
            .await
            .map_err(|e| self.bucket.failure("abort the upload of", Some(&staging_name(&self.name)), e))
    }
}

/// A whole snapshot in its staging object, waiting to be published under its name.
#[derive(Debug)]
pub(crate) struct Staged<'a> {
    bucket: &'a Bucket,
    name: String,
    staging: String,
}

impl Staged<'_> {
    /// Copies the staging object to the snapshot's name with `metadata`, inside the store, then
    /// deletes the staging object. The copy replaces what was under the name whole or not at
    /// all: when it fails, a snapshot that was there before is still there, as it was.
    pub(crate) async fn publish(self, size: u64, metadata: &BTreeMap<String, String>) -> Result<(), Failure> {
        let published = self.bucket.copy_with_metadata(&self.staging, &self.name, size, metadata).await;
        match tokio::time::timeout(CLEAN_UP_WAIT, self.bucket.delete(&self.staging)).await {
            Ok(Ok(())) => {}
            _ => tracing::warn!(
                object = %self.bucket.object_url(&self.staging),
                "the staging object could not be deleted: the next run of this cluster's retention deletes it"
            ),
        }
        published
    }
}

/// The hidden name a snapshot is uploaded under before it is published under `name`: the
/// same name a folder gives its temporary file (`.NAME.partial`), so the cluster's retention
/// knows both as its leftovers and never as snapshots.
pub(crate) fn staging_name(name: &str) -> String {
    format!(".{name}.partial")
}

/// Longest wait for an abort or a clean-up delete: the store may be what failed.
pub(crate) const CLEAN_UP_WAIT: Duration = Duration::from_secs(10);

/// Longest object key, prefix included, that S3, Google Cloud Storage and Azure Blob Storage
/// all take (1,024 bytes of UTF-8).
pub(crate) const MAX_KEY_BYTES: usize = 1024;

impl Drop for Upload<'_> {
    fn drop(&mut self) {
        if let Some(writer) = self.writer.take()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(async move {
                let _ = writer.abort().await;
            });
        }
    }
}

/// The file a download writes, removed unless finished.
struct Download {
    path: PathBuf,
    file: Option<File>,
}

impl Download {
    fn create(path: &Path) -> Result<Self, Failure> {
        let failure = |e: std::io::Error| {
            let message = format!("cannot create {}: {e}", path.display());
            match e.kind() {
                std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::NotFound => {
                    Failure::bad_input(message)
                }
                _ => Failure::retryable(message),
            }
        };
        match std::fs::remove_file(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(failure(e)),
            _ => {}
        }
        let file = OpenOptions::new().write(true).create_new(true).open(path).map_err(failure)?;
        Ok(Self { path: path.to_owned(), file: Some(file) })
    }

    fn write(&mut self, bytes: &[u8]) -> Result<(), Failure> {
        let file = self.file.as_mut().expect("open until finished");
        file.write_all(bytes)
            .map_err(|e| Failure::retryable(format!("cannot write {}: {e}", self.path.display())))
    }

    fn finish(mut self) -> Result<(), Failure> {
        let file = self.file.take().expect("open until finished");
        let synced = file.sync_all();
        if let Err(e) = synced {
            let _ = std::fs::remove_file(&self.path);
            return Err(Failure::retryable(format!("cannot fsync {}: {e}", self.path.display())));
        }
        Ok(())
    }
}

impl Drop for Download {
    fn drop(&mut self) {
        if self.file.take().is_some() {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

fn user_metadata(attributes: &Attributes) -> BTreeMap<String, String> {
    attributes
        .iter()
        .filter_map(|(attribute, value)| match attribute {
            Attribute::Metadata(key) => Some((key.to_string(), value.to_string())),
            _ => None,
        })
        .collect()
}

/// `s3://BUCKET[/PREFIX]` and the like: the provider, the bucket and the prefix.
fn parse_url(url: &str) -> Result<(Provider, String, Option<ObjectPath>), Failure> {
    let bad = |why: &str| {
        Failure::bad_input(format!(
            "bucket URL {url:?}: {why}; give s3://BUCKET[/PREFIX], gs://BUCKET[/PREFIX] or \
             az://CONTAINER[/PREFIX]"
        ))
    };
    let (scheme, rest) = url.split_once("://").ok_or_else(|| bad("no scheme"))?;
    let provider = match scheme {
        "s3" | "s3a" => Provider::S3,
        "gs" => Provider::Gcs,
        "az" | "azure" => Provider::Azure,
        _ => return Err(bad(&format!("{scheme}:// is not a store the runner writes to"))),
    };
    let (bucket, prefix) = match rest.split_once('/') {
        Some((bucket, prefix)) => (bucket, Some(prefix)),
        None => (rest, None),
    };
    if bucket.is_empty() || bucket.contains(['?', '#', '@', ':']) {
        return Err(bad("no bucket name, or one with characters bucket names never hold"));
    }
    let prefix = match prefix.filter(|p| !p.is_empty()) {
        None => None,
        Some(prefix) => Some(ObjectPath::parse(prefix).map_err(|_| {
            bad(&format!("the prefix {prefix:?} has an empty part (`//`), `.` or `..`, or characters object stores do not take"))
        })?),
    };
    Ok((provider, bucket.to_owned(), prefix))
}

/// A credential from the credentials folder: its key (the file name, lowercased) and value.
struct Credential {
    key: String,
    file: PathBuf,
    value: String,
}

/// What a credentials file may hold: a mounted Secret holds at most 1 MiB.
const MAX_CREDENTIAL_BYTES: u64 = 1024 * 1024;

/// Each regular file of the folder (symbolic links followed, as a mounted Secret's files are
/// links; hidden entries such as the Secret volume's `..data` skipped) is one credential, read
/// with a bound and checked ([`check_credential`]) before any client sees it.
fn read_credentials(dir: &Path) -> Result<Vec<Credential>, String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("credentials folder {}: {e}", dir.display()))?;
    let mut credentials = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| format!("credentials folder {}: {e}", dir.display()))?;
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            return Err(format!("credentials folder {}: a file name that is not UTF-8", dir.display()));
        };
        if name.starts_with('.') {
            continue;
        }
        let file = entry.path();
        match std::fs::metadata(&file) {
            Ok(m) if m.is_file() => {}
            Ok(_) => continue,
            Err(e) => return Err(format!("credentials file {}: {e}", file.display())),
        }
        let value = read_bounded(&file)?;
        // A Secret made from a file often ends with a newline that is no part of the key.
        let value = value.trim_end_matches(['\n', '\r']).to_owned();
        let key = name.to_ascii_lowercase();
        check_credential(&key, &value)
            .map_err(|why| format!("credentials file {}: {why}", file.display()))?;
        credentials.push(Credential { key, file, value });
    }
    credentials.sort_by(|a, b| a.key.cmp(&b.key));
    Ok(credentials)
}

/// A credentials file's text, refused past [`MAX_CREDENTIAL_BYTES`] without reading it whole.
fn read_bounded(file: &Path) -> Result<String, String> {
    use std::io::Read;
    let mut bytes = Vec::new();
    std::fs::File::open(file)
        .and_then(|f| f.take(MAX_CREDENTIAL_BYTES + 1).read_to_end(&mut bytes))
        .map_err(|e| format!("credentials file {}: cannot read it: {e}", file.display()))?;
    if bytes.len() as u64 > MAX_CREDENTIAL_BYTES {
        return Err(format!(
            "credentials file {}: longer than {} MiB ({MAX_CREDENTIAL_BYTES} bytes), more than a \
             Secret holds: is it the right file?",
            file.display(),
            MAX_CREDENTIAL_BYTES / (1024 * 1024)
        ));
    }
    String::from_utf8(bytes).map_err(|_| format!("credentials file {}: not UTF-8 text", file.display()))
}

/// Why a credential's value cannot be used, if it cannot; the value is never part of the answer.
/// Values travel in HTTP headers and signatures, where a line break or another control character
/// would be refused by the client (some clients panic on it): each must be one line of printable
/// ASCII. A service account key is JSON, where line breaks are fine.
fn check_credential(key: &str, value: &str) -> Result<(), String> {
    if value.trim().is_empty() {
        return Err("it is empty; put the credential's value in the Secret".into());
    }
    if key.ends_with("service_account_key") || key.ends_with("application_credentials") {
        return match value.chars().position(|c| c.is_control() && !c.is_ascii_whitespace()) {
            Some(at) => {
                Err(format!("holds a control character at character {at}: it is not the JSON key file"))
            }
            None => Ok(()),
        };
    }
    check_header_value(value).map_err(|why| {
        format!(
            "{why}; a credential is one line of printable ASCII (a Secret made from a file with \
             Windows line ends, or with the value on several lines, holds more): write the value \
             again, e.g. with `kubectl create secret generic ... --from-literal`"
        )
    })
}

/// A setting that is a URL (`endpoint`, `aws_endpoint_url_s3`, `base_url`, `proxy_url` …): the
/// store's client builds its requests from it without checking it, and panics on one that is no
/// URL, so it is checked here: a scheme, a host, nothing a URL cannot hold. The value is not shown
/// (it may carry user-info).
fn check_url_option(key: &str, value: &str) -> Result<(), String> {
    let key = key.to_ascii_lowercase();
    if !(key.ends_with("endpoint") || key.contains("endpoint_url") || key.ends_with("_url") || key == "url") {
        return Ok(());
    }
    let uri = value.parse::<http::Uri>().map_err(|e| format!("option {key}: not a URL ({e})"))?;
    match (uri.scheme_str(), uri.host()) {
        (Some("http" | "https"), Some(host)) if !host.is_empty() && !value.contains(' ') => Ok(()),
        _ => Err(format!(
            "option {key}: not a URL like https://HOST[:PORT] (a scheme, http or https, and a host)"
        )),
    }
}

/// A value that goes into an HTTP header as it is: printable ASCII, no space at either end.
fn check_header_value(value: &str) -> Result<(), String> {
    let bad = value.char_indices().find(|(_, c)| !(c.is_ascii_graphic() || *c == ' '));
    match bad {
        Some((at, '\n' | '\r')) => Err(format!("holds a line break at byte {at}")),
        Some((at, c)) if c.is_control() => Err(format!("holds a control character at byte {at}")),
        Some((at, _)) => Err(format!("holds a character that is not ASCII at byte {at}")),
        None if value.trim() != value => Err("starts or ends with a space".into()),
        None => Ok(()),
    }
}

/// Configuration keys that hold secrets: never accepted as options.
fn is_secret_key(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    [
        "secret_access_key",
        "session_token",
        "token",
        "service_account_key",
        "access_key",
        "account_key",
        "client_secret",
        "sas_key",
        "sas_token",
        "master_key",
    ]
    .iter()
    .any(|secret| key == *secret || key.ends_with(&format!("_{secret}")))
}

/// Applies settings then credentials to a builder through its `with_config`, refusing keys the
/// store does not know.
fn configure<B, K>(
    mut builder: B,
    provider: Provider,
    location: &BucketLocation,
    credentials: &[Credential],
    with_config: impl Fn(B, K, String) -> B,
) -> Result<B, String>
where
    K: std::str::FromStr,
{
    for (key, value) in &location.options {
        let parsed = key.to_ascii_lowercase().parse::<K>().map_err(|_| {
            format!(
                "option {key}: not a setting of {} stores (give object_store's configuration key \
                 names, such as endpoint, region, allow_http)",
                provider.describe()
            )
        })?;
        builder = with_config(builder, parsed, value.clone());
    }
    for credential in credentials {
        let parsed = credential.key.parse::<K>().map_err(|_| {
            format!(
                "credentials file {}: {} is not a credential of {} stores (expected files such as {})",
                credential.file.display(),
                credential.key.to_ascii_uppercase(),
                provider.describe(),
                provider.credential_hint()
            )
        })?;
        builder = with_config(builder, parsed, credential.value.clone());
    }
    Ok(builder)
}

fn build_s3(
    bucket: &str,
    location: &BucketLocation,
    credentials: &[Credential],
) -> Result<(Arc<dyn ObjectStore>, Sealer), String> {
    use object_store::aws::AmazonS3Builder;
    let builder = match location.credentials_dir {
        Some(_) => AmazonS3Builder::new(),
        // Ambient credentials: the pod's web identity or instance role, as AWS's SDKs find them.
        None => AmazonS3Builder::from_env(),
    };
    let builder =
        builder.with_bucket_name(bucket).with_retry(retry_config()).with_client_options(client_options());
    let builder = configure(builder, Provider::S3, location, credentials, |b: AmazonS3Builder, k, v| {
        b.with_config(k, v)
    })?;
    let store = builder.clone().build().map_err(|e| format!("cannot set up the S3 client: {e}"))?;
    let sealer = metadata::S3::new(&builder, bucket, store.credentials().clone())?;
    Ok((Arc::new(store), Sealer::S3(sealer)))
}

fn build_gcs(
    bucket: &str,
    location: &BucketLocation,
    credentials: &[Credential],
) -> Result<(Arc<dyn ObjectStore>, Sealer), String> {
    use object_store::gcp::GoogleCloudStorageBuilder;
    let builder = match location.credentials_dir {
        Some(_) => GoogleCloudStorageBuilder::new(),
        None => GoogleCloudStorageBuilder::from_env(),
    };
    let builder =
        builder.with_bucket_name(bucket).with_retry(retry_config()).with_client_options(client_options());
    let builder =
        configure(builder, Provider::Gcs, location, credentials, |b: GoogleCloudStorageBuilder, k, v| {
            b.with_config(k, v)
        })?;
    let base_url = builder
        .get_config_value(&object_store::gcp::GoogleConfigKey::BaseUrl)
        .unwrap_or_else(|| "https://storage.googleapis.com".to_owned());
    let store = builder.build().map_err(|e| format!("cannot set up the Google Cloud Storage client: {e}"))?;
    let credentials = store.credentials().clone();
    Ok((Arc::new(store), Sealer::Gcs(metadata::Gcs { base_url, bucket: bucket.to_owned(), credentials })))
}

fn build_azure(
    container: &str,
    location: &BucketLocation,
    credentials: &[Credential],
) -> Result<(Arc<dyn ObjectStore>, Sealer), String> {
    use object_store::azure::MicrosoftAzureBuilder;
    let builder = match location.credentials_dir {
        Some(_) => MicrosoftAzureBuilder::new(),
        None => MicrosoftAzureBuilder::from_env(),
    };
    let builder = builder
        .with_container_name(container)
        .with_retry(retry_config())
        .with_client_options(client_options());
    let builder =
        configure(builder, Provider::Azure, location, credentials, |b: MicrosoftAzureBuilder, k, v| {
            b.with_config(k, v)
        })?;
    let (account, account_url) = azure_account_url(&builder)?;
    let store = builder.build().map_err(|e| format!("cannot set up the Azure Blob Storage client: {e}"))?;
    let container_url = format!("{}/{container}", account_url.trim_end_matches('/'));
    let credentials = store.credentials().clone();
    Ok((Arc::new(store), Sealer::Azure(metadata::Azure { container_url, account, credentials })))
}

/// The storage account and its blob endpoint, as `object_store` works them out.
fn azure_account_url(
    builder: &object_store::azure::MicrosoftAzureBuilder,
) -> Result<(String, String), String> {
    use object_store::azure::AzureConfigKey as Key;
    if builder.get_config_value(&Key::UseEmulator).is_some_and(|v| v == "true") {
        // Azurite's well-known account, where object_store looks for it.
        let url =
            std::env::var("AZURITE_BLOB_STORAGE_URL").unwrap_or_else(|_| "http://127.0.0.1:10000".into());
        return Ok(("devstoreaccount1".into(), format!("{}/devstoreaccount1", url.trim_end_matches('/'))));
    }
    let account = builder
        .get_config_value(&Key::AccountName)
        .ok_or("no storage account: give the option account_name (or AZURE_STORAGE_ACCOUNT_NAME)")?;
    let url = builder.get_config_value(&Key::Endpoint).unwrap_or_else(|| {
        if builder.get_config_value(&Key::UseFabricEndpoint).is_some_and(|v| v == "true") {
            format!("https://{account}.blob.fabric.microsoft.com")
        } else {
            format!("https://{account}.blob.core.windows.net")
        }
    });
    Ok((account, url))
}

/// The HTTP client of metadata updates, with the store's settings that concern it.
fn http_client(location: &BucketLocation) -> Result<reqwest::Client, String> {
    let insecure = location
        .options
        .iter()
        .any(|(k, v)| k.to_ascii_lowercase().ends_with("allow_invalid_certificates") && v == "true");
    reqwest::Client::builder()
        .timeout(Duration::from_secs(600))
        .connect_timeout(Duration::from_secs(10))
        .danger_accept_invalid_certs(insecure)
        .build()
        .map_err(|e| format!("cannot set up an HTTP client: {e}"))
}

/// S3 error codes that mean the credentials were refused.
const CREDENTIAL_CODES: &[&str] = &[
    "SignatureDoesNotMatch",
    "InvalidAccessKeyId",
    "AccessDenied",
    "InvalidToken",
    "ExpiredToken",
    "AuthorizationHeaderMalformed",
];

/// The S3 error code in a store's message (`<Code>NoSuchBucket</Code>`), if any.
fn s3_error_code(text: &str) -> Option<String> {
    let start = text.find("<Code>")? + "<Code>".len();
    let end = text[start..].find("</Code>")? + start;
    Some(text[start..end].to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha2::{Digest, Sha256};

    fn stream_of(db: &[u8]) -> Vec<u8> {
        let mut bytes = db.to_vec();
        bytes.extend_from_slice(&Sha256::digest(db));
        bytes
    }

    async fn put(bucket: &Bucket, name: &str, bytes: &[u8], metadata: &[(&str, &str)]) {
        let metadata = metadata.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let mut upload = bucket.start_upload(name, &metadata).await.unwrap();
        for chunk in bytes.chunks(1000) {
            upload.write(chunk).await.unwrap();
        }
        upload.complete().await.unwrap().publish(bytes.len() as u64, &metadata).await.unwrap();
    }

    #[tokio::test]
    async fn a_download_streams_hashes_and_checks_the_recorded_sha256() {
        let bucket = Bucket::in_memory("s3://b/p");
        let bytes = stream_of(&[7u8; 4096]);
        let sha = super::super::snapshot::hex(&Sha256::digest(&bytes));
        put(&bucket, "good.db", &bytes, &[(META_SHA256, &sha), (META_REVISION, "12")]).await;
        put(&bucket, "bad.db", &bytes, &[(META_SHA256, &"0".repeat(64))]).await;
        let dir = tempfile::tempdir().unwrap();
        let into = dir.path().join("good.db");
        std::fs::write(&into, b"an old file").unwrap();
        let got = bucket.download("good.db", &into, None).await.unwrap();
        assert_eq!(got.size_bytes, bytes.len() as u64);
        assert_eq!(got.sha256, sha);
        assert_eq!(got.metadata.get(META_REVISION).map(String::as_str), Some("12"));
        assert_eq!(std::fs::read(&into).unwrap(), bytes);

        let into = dir.path().join("bad.db");
        let failure = bucket.download("bad.db", &into, None).await.unwrap_err();
        assert_eq!(failure.kind, groundskeeper_protocol::result::ErrorKind::BadInput);
        assert!(
            failure.message.contains("s3://b/p/bad.db") && failure.message.contains("damaged"),
            "{}",
            failure.message
        );
        assert!(!into.exists(), "a refused download leaves no file");

        let failure = bucket.download("none.db", &dir.path().join("none.db"), None).await.unwrap_err();
        assert_eq!(failure.kind, groundskeeper_protocol::result::ErrorKind::BadInput);
        assert!(failure.message.contains("no such object"), "{}", failure.message);
    }

    #[tokio::test]
    async fn listing_finds_only_the_clusters_snapshots_oldest_first() {
        let bucket = Bucket::in_memory("s3://b");
        for name in [
            "main-20260103T000000Z.db",
            "main-20260101T000000Z.db",
            "main-2-20260102T000000Z.db",
            "notes.txt",
        ] {
            put(&bucket, name, b"x", &[(META_CLUSTER, "main")]).await;
        }
        let template = NameTemplate::parse("{cluster}-{time}.db", "main").unwrap();
        let listed = bucket.list_snapshots(&template, true).await.unwrap();
        let names: Vec<&str> = listed.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["main-20260101T000000Z.db", "main-20260103T000000Z.db"]);
        assert_eq!(listed[0].metadata.get(META_CLUSTER).map(String::as_str), Some("main"));
        assert_eq!(listed[0].size_bytes, 1);
    }

    #[test]
    fn urls_settings_and_credentials_are_checked_naming_what_is_wrong() {
        for (url, says) in [
            ("http://b", "not a store"),
            ("s3://", "no bucket"),
            ("b/p", "no scheme"),
            ("s3://b/a//c", "empty part"),
        ] {
            let failure = parse_url(url).unwrap_err();
            assert!(failure.message.contains(says), "{url}: {}", failure.message);
        }
        let (provider, bucket, prefix) = parse_url("gs://b/x/y").unwrap();
        assert_eq!((provider, bucket.as_str(), prefix.unwrap().as_ref()), (Provider::Gcs, "b", "x/y"));

        let location = |options: &[(&str, &str)], dir: Option<&Path>| BucketLocation {
            url: "s3://b/p".into(),
            options: options.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            credentials_dir: dir.map(|d| d.display().to_string()),
        };
        let failure = Bucket::open(&location(&[("colour", "blue")], None)).unwrap_err();
        assert!(failure.message.contains("option colour"), "{}", failure.message);
        let failure = Bucket::open(&location(&[("aws_secret_access_key", "s3cr3t")], None)).unwrap_err();
        assert!(
            failure.message.contains("is a secret") && !failure.message.contains("s3cr3t"),
            "{}",
            failure.message
        );

        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("AWS_ACCESS_KEY_ID"), "id\n").unwrap();
        std::fs::write(dir.path().join("AWS_SECRET_ACCESS_KEY"), "s3cr3t-value\n").unwrap();
        std::fs::create_dir(dir.path().join("..data")).unwrap();
        let opened = Bucket::open(&location(
            &[("endpoint", "http://127.0.0.1:1"), ("allow_http", "true")],
            Some(dir.path()),
        ));
        let opened = opened.unwrap();
        assert_eq!(opened.redact("x s3cr3t-value y"), "x [redacted] y");
        std::fs::write(dir.path().join("PASSWORD"), "hunter2").unwrap();
        let failure = Bucket::open(&location(&[], Some(dir.path()))).unwrap_err();
        assert!(
            failure.message.contains("PASSWORD") && !failure.message.contains("hunter2"),
            "{}",
            failure.message
        );
    }

    /// Against a real S3 server (s3s-fs, which checks signatures): an upload with metadata reads
    /// back whole; wrong credentials and a missing bucket are bad input naming the bucket.
    #[tokio::test]
    async fn s3_uploads_read_back_and_refusals_name_the_bucket() {
        use groundskeeper_e2e::s3_server::{S3Server, s3s_fs_or_skip, write_credentials};
        let Some(binary) = s3s_fs_or_skip() else { return };
        let server = S3Server::start(&binary).unwrap();
        server.create_bucket("snapshots").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let credentials = dir.path().join("credentials");
        server.write_credentials(&credentials).unwrap();
        let bucket = Bucket::open(&server.location("s3://snapshots/etcd/main", &credentials)).unwrap();
        // Two parts and a bit, so the upload is a real multipart one.
        let bytes: Vec<u8> = (0..PART_BYTES * 2 + 1000).map(|i| (i % 251) as u8).collect();
        let sha = super::super::snapshot::hex(&Sha256::digest(&bytes));
        put(&bucket, "main-20260101T000000Z.db", &bytes, &[(META_SHA256, &sha), (META_KEYS, "3")]).await;
        let into = dir.path().join("got.db");
        let got = bucket.download("main-20260101T000000Z.db", &into, None).await.unwrap();
        assert_eq!((got.size_bytes, got.sha256.as_str()), (bytes.len() as u64, sha.as_str()));
        assert_eq!(got.metadata.get(META_KEYS).map(String::as_str), Some("3"));
        assert!(server.upload_parts().is_empty(), "{:?}", server.upload_parts());

        // Metadata replaced inside the store, in one copy and part by part.
        let mut bucket = bucket;
        for limit in [u64::MAX, 6 * 1024 * 1024] {
            if let Sealer::S3(s3) = &mut bucket.sealer {
                (s3.copy_limit, s3.copy_part) = (limit, 6 * 1024 * 1024);
            }
            let recorded: BTreeMap<String, String> =
                [(META_SHA256, sha.as_str()), (META_REVISION, &limit.to_string())]
                    .into_iter()
                    .map(|(k, v)| (k.to_owned(), v.to_owned()))
                    .collect();
            bucket.replace_metadata("main-20260101T000000Z.db", bytes.len() as u64, &recorded).await.unwrap();
            let got = bucket.download("main-20260101T000000Z.db", &into, None).await.unwrap();
            assert_eq!(got.metadata, recorded, "copy limit {limit}");
            assert_eq!(got.sha256, sha, "copy limit {limit}");
        }
        assert!(server.upload_parts().is_empty(), "{:?}", server.upload_parts());

        // Published from the staging object in one copy and part by part; no staging object left.
        for (limit, name) in
            [(u64::MAX, "main-20260104T000000Z.db"), (6 * 1024 * 1024, "main-20260105T000000Z.db")]
        {
            if let Sealer::S3(s3) = &mut bucket.sealer {
                (s3.copy_limit, s3.copy_part) = (limit, 6 * 1024 * 1024);
            }
            put(&bucket, name, &bytes, &[(META_SHA256, &sha), (META_KEYS, "4")]).await;
            let got = bucket.download(name, &into, None).await.unwrap();
            assert_eq!((got.size_bytes, got.sha256.as_str()), (bytes.len() as u64, sha.as_str()), "{name}");
            assert_eq!(got.metadata.get(META_KEYS).map(String::as_str), Some("4"), "{name}");
            assert_eq!(bucket.head(&staging_name(name)).await.unwrap(), None, "{name}");
        }
        assert!(server.upload_parts().is_empty(), "{:?}", server.upload_parts());

        // An aborted upload leaves nothing.
        let mut upload = bucket.start_upload("main-20260102T000000Z.db", &BTreeMap::new()).await.unwrap();
        upload.write(&bytes).await.unwrap();
        upload.abort().await.unwrap();
        assert_eq!(bucket.head("main-20260102T000000Z.db").await.unwrap(), None);

        let wrong = dir.path().join("wrong");
        write_credentials(&wrong, &server.access_key, "not-the-secret").unwrap();
        let refused = Bucket::open(&server.location("s3://snapshots", &wrong)).unwrap();
        let failure = refused.download("main-20260101T000000Z.db", &into, None).await.unwrap_err();
        assert_eq!(failure.kind, groundskeeper_protocol::result::ErrorKind::BadInput, "{}", failure.message);
        assert!(failure.message.contains("bucket snapshots"), "{}", failure.message);
        assert!(failure.message.contains("check the credentials in"), "{}", failure.message);
        assert!(!failure.message.contains("not-the-secret"), "{}", failure.message);

        let missing = Bucket::open(&server.location("s3://nowhere", &credentials)).unwrap();
        let failure = missing.check_bucket_exists().await.unwrap_err();
        assert_eq!(failure.kind, groundskeeper_protocol::result::ErrorKind::BadInput, "{}", failure.message);
        assert!(failure.message.contains("bucket nowhere does not exist"), "{}", failure.message);
    }
}
