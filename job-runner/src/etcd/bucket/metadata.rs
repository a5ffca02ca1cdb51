//! Replacing an object's user metadata once it is written.
//!
//! Stores take an object's metadata when its upload starts, but what a snapshot's metadata says
//! (its SHA-256, the revision it holds, the keys at that revision) is known only once the whole
//! stream went by. `object_store` has no call that changes metadata afterwards, so this module
//! makes the one request each store has for it, signed by `object_store`'s own signers
//! ([`AwsAuthorizer`], [`AzureAuthorizer`], GCS's bearer token) with the credentials the store
//! was opened with:
//!
//! * S3: `CopyObject` of the object onto itself with `x-amz-metadata-directive: REPLACE` (S3
//!   copies up to 5 GiB in one request); larger objects are copied onto themselves part by part
//!   (`UploadPartCopy`) in a multipart upload that carries the metadata. The copy happens inside
//!   the store: no byte of the object travels.
//! * Google Cloud Storage: the same copy onto itself through its XML API
//!   (`x-goog-metadata-directive: REPLACE`).
//! * Azure Blob Storage: `Set Blob Metadata`.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, StatusCode};
use object_store::aws::{AwsAuthorizer, AwsCredentialProvider};
use object_store::azure::{AzureAuthorizer, AzureCredentialProvider};
use object_store::client::HttpRequestBody;
use object_store::gcp::GcpCredentialProvider;

/// S3 copies at most this much in one `CopyObject`.
const S3_COPY_LIMIT: u64 = 5 * 1024 * 1024 * 1024;
/// Parts of a multipart copy onto itself.
const S3_COPY_PART: u64 = 1024 * 1024 * 1024;
/// Attempts of a request that failed on the network or with a server error.
const ATTEMPTS: u32 = 4;

/// A request's failure: the HTTP status when the store answered, and what it said.
#[derive(Debug)]
pub(super) struct RequestError {
    pub status: Option<StatusCode>,
    pub message: String,
}

/// What each store needs to replace an object's metadata.
pub(super) enum Sealer {
    S3(S3),
    Gcs(Gcs),
    Azure(Azure),
    /// The in-memory store of the tests: rewritten through `object_store` (small objects only).
    #[cfg(test)]
    Memory,
}

pub(super) struct S3 {
    /// `https://s3.REGION.amazonaws.com/BUCKET`, or the endpoint's equivalent.
    pub bucket_endpoint: String,
    pub bucket: String,
    pub region: String,
    pub credentials: AwsCredentialProvider,
    /// Server-side encryption settings, sent again with the copy so it is stored alike.
    pub encryption_headers: Vec<(String, String)>,
    /// Copies above this size go part by part (S3's limit; lower in tests).
    pub copy_limit: u64,
    pub copy_part: u64,
}

pub(super) struct Gcs {
    /// `https://storage.googleapis.com` or the configured base URL.
    pub base_url: String,
    pub bucket: String,
    pub credentials: GcpCredentialProvider,
}

pub(super) struct Azure {
    /// `https://ACCOUNT.blob.core.windows.net/CONTAINER` or the endpoint's equivalent.
    pub container_url: String,
    pub account: String,
    pub credentials: AzureCredentialProvider,
}

impl S3 {
    pub(super) fn new(
        builder: &object_store::aws::AmazonS3Builder,
        bucket: &str,
        credentials: AwsCredentialProvider,
    ) -> Result<Self, String> {
        use object_store::aws::AmazonS3ConfigKey as Key;
        let value = |key: Key| builder.get_config_value(&key);
        let region = value(Key::Region).unwrap_or_else(|| "us-east-1".to_owned());
        let virtual_hosted = value(Key::VirtualHostedStyleRequest).is_some_and(|v| v == "true");
        let bucket_endpoint = match (value(Key::Endpoint), virtual_hosted) {
            (Some(endpoint), true) => endpoint,
            (Some(endpoint), false) => format!("{}/{bucket}", endpoint.trim_end_matches('/')),
            (None, true) => format!("https://{bucket}.s3.{region}.amazonaws.com"),
            (None, false) => format!("https://s3.{region}.amazonaws.com/{bucket}"),
        };
        // The encryption keys' type is not exported: they are named as the options name them.
        let encryption = |name: &str| name.parse::<Key>().ok().and_then(|key| builder.get_config_value(&key));
        if encryption("aws_sse_customer_key_base64").is_some() {
            return Err("server-side encryption with a customer key (SSE-C) is not supported for \
                        snapshots: use SSE-S3 or SSE-KMS (aws_server_side_encryption)"
                .into());
        }
        let encryption_headers = [
            ("aws_server_side_encryption", "x-amz-server-side-encryption"),
            ("aws_sse_kms_key_id", "x-amz-server-side-encryption-aws-kms-key-id"),
            ("aws_sse_bucket_key_enabled", "x-amz-server-side-encryption-bucket-key-enabled"),
        ]
        .into_iter()
        .filter_map(|(option, header)| encryption(option).map(|value| (header.to_owned(), value)))
        .collect();
        Ok(Self {
            bucket_endpoint,
            bucket: bucket.to_owned(),
            region,
            credentials,
            encryption_headers,
            copy_limit: S3_COPY_LIMIT,
            copy_part: S3_COPY_PART,
        })
    }
}

/// An object copied inside the store: from the full key `from` to the full key `to` (prefix
/// included), `size` bytes long.
#[derive(Debug, Clone, Copy)]
pub(super) struct Copy<'a> {
    pub from: &'a str,
    pub to: &'a str,
    pub size: u64,
}

impl Sealer {
    /// Copies `copy.from` to `copy.to` inside the store with `metadata` as the copy's user
    /// metadata, in one request that either replaces what was under `copy.to` whole or leaves it
    /// as it was (S3 and GCS). `Ok(false)`: this store has no such copy (Azure, the in-memory
    /// store): the caller records the metadata on `copy.from` ([`Sealer::replace`]) and copies it
    /// through `object_store`, which keeps the metadata.
    pub(super) async fn copy_with_metadata(
        &self,
        client: &reqwest::Client,
        copy: Copy<'_>,
        metadata: &BTreeMap<String, String>,
    ) -> Result<bool, RequestError> {
        match self {
            Sealer::S3(s3) if copy.size > s3.copy_limit => s3.copy_in_parts(client, copy, metadata).await?,
            Sealer::S3(s3) => s3.copy_object(client, copy, metadata).await?,
            Sealer::Gcs(gcs) => gcs.copy_object(client, copy, metadata).await?,
            Sealer::Azure(_) => return Ok(false),
            #[cfg(test)]
            Sealer::Memory => return Ok(false),
        }
        Ok(true)
    }

    /// Replaces the user metadata of the object at `key` (its full key in the bucket, prefix
    /// included), `size` bytes long, with `metadata`.
    pub(super) async fn replace(
        &self,
        client: &reqwest::Client,
        key: &str,
        size: u64,
        metadata: &BTreeMap<String, String>,
    ) -> Result<(), RequestError> {
        let onto_itself = Copy { from: key, to: key, size };
        match self {
            Sealer::Azure(azure) => azure.set_metadata(client, key, metadata).await,
            #[cfg(test)]
            Sealer::Memory => unreachable!("the in-memory store is rewritten by the caller"),
            _ => self.copy_with_metadata(client, onto_itself, metadata).await.map(drop),
        }
    }
}

impl S3 {
    fn object_url(&self, key: &str) -> String {
        format!("{}/{}", self.bucket_endpoint, encode_key(key))
    }

    fn copy_source(&self, key: &str) -> String {
        format!("{}/{}", encode_segment(&self.bucket), encode_key(key))
    }

    fn metadata_headers(&self, metadata: &BTreeMap<String, String>) -> Vec<(String, String)> {
        let mut headers = vec![("content-type".to_owned(), "application/octet-stream".to_owned())];
        headers.extend(metadata.iter().map(|(k, v)| (format!("x-amz-meta-{k}"), v.clone())));
        headers.extend(self.encryption_headers.iter().cloned());
        headers
    }

    async fn send(
        &self,
        client: &reqwest::Client,
        method: Method,
        url: String,
        headers: Vec<(String, String)>,
        body: Bytes,
    ) -> Result<String, RequestError> {
        let credentials = &self.credentials;
        let region = &self.region;
        with_retries(|| {
            let (method, url, headers, body) = (method.clone(), url.clone(), headers.clone(), body.clone());
            async move {
                let credential = credentials.get_credential().await.map_err(|e| RequestError {
                    status: None,
                    message: format!("cannot get the credentials: {e}"),
                })?;
                let mut request = http_request(method, &url, &headers, body)?;
                AwsAuthorizer::new(&credential, "s3", region).try_authorize(&mut request, None).map_err(
                    |e| RequestError { status: None, message: format!("cannot sign the request: {e}") },
                )?;
                execute(client, request).await
            }
        })
        .await
    }

    /// `CopyObject`, the metadata replaced. S3 may answer 200 with an error in the body when a
    /// copy fails late: the body is read for one.
    async fn copy_object(
        &self,
        client: &reqwest::Client,
        copy: Copy<'_>,
        metadata: &BTreeMap<String, String>,
    ) -> Result<(), RequestError> {
        let mut headers = self.metadata_headers(metadata);
        headers.push(("x-amz-copy-source".into(), self.copy_source(copy.from)));
        headers.push(("x-amz-metadata-directive".into(), "REPLACE".into()));
        let body = self.send(client, Method::PUT, self.object_url(copy.to), headers, Bytes::new()).await?;
        s3_body_error(&body)
    }

    /// A multipart upload onto `copy.to`, carrying the metadata, whose parts are copies of
    /// `copy.from`'s ranges; aborted when any step fails. Nothing is under `copy.to` until the
    /// upload completes.
    async fn copy_in_parts(
        &self,
        client: &reqwest::Client,
        copy: Copy<'_>,
        metadata: &BTreeMap<String, String>,
    ) -> Result<(), RequestError> {
        let url = self.object_url(copy.to);
        let created = self
            .send(
                client,
                Method::POST,
                format!("{url}?uploads"),
                self.metadata_headers(metadata),
                Bytes::new(),
            )
            .await?;
        let upload_id = xml_text(&created, "UploadId").ok_or_else(|| RequestError {
            status: None,
            message: format!("the store's answer to CreateMultipartUpload names no upload: {created}"),
        })?;
        let upload = format!("uploadId={}", encode_segment(&upload_id));
        let copied = self.copy_parts(client, copy, &upload).await;
        let completed = match copied {
            Ok(etags) => {
                let body = complete_body(&etags);
                self.send(client, Method::POST, format!("{url}?{upload}"), vec![], Bytes::from(body))
                    .await
                    .and_then(|answer| s3_body_error(&answer))
            }
            Err(e) => Err(e),
        };
        if completed.is_err() {
            let _ = self.send(client, Method::DELETE, format!("{url}?{upload}"), vec![], Bytes::new()).await;
        }
        completed
    }

    async fn copy_parts(
        &self,
        client: &reqwest::Client,
        copy: Copy<'_>,
        upload: &str,
    ) -> Result<Vec<String>, RequestError> {
        let url = self.object_url(copy.to);
        let mut etags = Vec::new();
        let mut start = 0;
        while start < copy.size {
            let end = (start + self.copy_part).min(copy.size) - 1;
            let number = etags.len() + 1;
            let headers = vec![
                ("x-amz-copy-source".to_owned(), self.copy_source(copy.from)),
                ("x-amz-copy-source-range".to_owned(), format!("bytes={start}-{end}")),
            ];
            let answer = self
                .send(
                    client,
                    Method::PUT,
                    format!("{url}?partNumber={number}&{upload}"),
                    headers,
                    Bytes::new(),
                )
                .await?;
            s3_body_error(&answer)?;
            let etag = xml_text(&answer, "ETag").ok_or_else(|| RequestError {
                status: None,
                message: format!("the store's answer to UploadPartCopy names no ETag: {answer}"),
            })?;
            etags.push(etag);
            start = end + 1;
        }
        Ok(etags)
    }
}

impl Gcs {
    /// A copy through the XML API, the metadata replaced.
    async fn copy_object(
        &self,
        client: &reqwest::Client,
        copy: Copy<'_>,
        metadata: &BTreeMap<String, String>,
    ) -> Result<(), RequestError> {
        let url = format!(
            "{}/{}/{}",
            self.base_url.trim_end_matches('/'),
            encode_segment(&self.bucket),
            encode_key(copy.to)
        );
        let mut headers = vec![
            ("content-type".to_owned(), "application/octet-stream".to_owned()),
            (
                "x-goog-copy-source".to_owned(),
                format!("{}/{}", encode_segment(&self.bucket), encode_key(copy.from)),
            ),
            ("x-goog-metadata-directive".to_owned(), "REPLACE".to_owned()),
        ];
        headers.extend(metadata.iter().map(|(k, v)| (format!("x-goog-meta-{k}"), v.clone())));
        let credentials = &self.credentials;
        with_retries(|| {
            let (url, headers) = (url.clone(), headers.clone());
            async move {
                let credential = credentials.get_credential().await.map_err(|e| RequestError {
                    status: None,
                    message: format!("cannot get the credentials: {e}"),
                })?;
                let mut request = http_request(Method::PUT, &url, &headers, Bytes::new())?;
                let bearer =
                    http::HeaderValue::from_str(&format!("Bearer {}", credential.bearer)).map_err(|_| {
                        RequestError { status: None, message: "the access token is no header value".into() }
                    })?;
                request.headers_mut().insert(http::header::AUTHORIZATION, bearer);
                execute(client, request).await
            }
        })
        .await
        .map(drop)
    }
}

impl Azure {
    async fn set_metadata(
        &self,
        client: &reqwest::Client,
        key: &str,
        metadata: &BTreeMap<String, String>,
    ) -> Result<(), RequestError> {
        let url = format!("{}/{}?comp=metadata", self.container_url.trim_end_matches('/'), encode_key(key));
        let headers: Vec<(String, String)> =
            metadata.iter().map(|(k, v)| (format!("x-ms-meta-{k}"), v.clone())).collect();
        let credentials = &self.credentials;
        let account = &self.account;
        with_retries(|| {
            let (url, headers) = (url.clone(), headers.clone());
            async move {
                let credential = credentials.get_credential().await.map_err(|e| RequestError {
                    status: None,
                    message: format!("cannot get the credentials: {e}"),
                })?;
                let mut request = http_request(Method::PUT, &url, &headers, Bytes::new())?;
                AzureAuthorizer::new(&credential, account).try_authorize(&mut request).map_err(|e| {
                    RequestError { status: None, message: format!("cannot sign the request: {e}") }
                })?;
                execute(client, request).await
            }
        })
        .await
        .map(drop)
    }
}

/// Runs `attempt` until it succeeds, fails for good (the store answered below 500, other than
/// 408 and 429), or [`ATTEMPTS`] are spent.
async fn with_retries<F, Fut>(mut attempt: F) -> Result<String, RequestError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<String, RequestError>>,
{
    let mut wait = Duration::from_millis(200);
    let mut tries = 0;
    loop {
        tries += 1;
        match attempt().await {
            Ok(body) => return Ok(body),
            Err(e) if tries >= ATTEMPTS || !retryable(e.status) => return Err(e),
            Err(_) => {
                tokio::time::sleep(wait).await;
                wait *= 4;
            }
        }
    }
}

fn retryable(status: Option<StatusCode>) -> bool {
    match status {
        None => true,
        Some(status) => {
            status.is_server_error()
                || status == StatusCode::REQUEST_TIMEOUT
                || status == StatusCode::TOO_MANY_REQUESTS
        }
    }
}

fn http_request(
    method: Method,
    url: &str,
    headers: &[(String, String)],
    body: Bytes,
) -> Result<http::Request<HttpRequestBody>, RequestError> {
    let mut builder = http::Request::builder().method(method).uri(url);
    for (name, value) in headers {
        builder = builder.header(name.as_str(), value.as_str());
    }
    builder
        .body(HttpRequestBody::from(body))
        .map_err(|e| RequestError { status: None, message: format!("cannot build the request: {e}") })
}

/// Sends a signed request; the body of a success, else its status and body.
async fn execute(
    client: &reqwest::Client,
    request: http::Request<HttpRequestBody>,
) -> Result<String, RequestError> {
    let (parts, body) = request.into_parts();
    let url = parts.uri.to_string();
    let body = body.as_bytes().cloned().unwrap_or_default();
    let response =
        client.request(parts.method, &url).headers(parts.headers).body(body).send().await.map_err(|e| {
            RequestError { status: None, message: format!("the request failed: {}", without_url(&e)) }
        })?;
    let status = response.status();
    let text = response.text().await.map_err(|e| RequestError {
        status: None,
        message: format!("the answer was cut short: {}", without_url(&e)),
    })?;
    if status.is_success() {
        Ok(text)
    } else {
        Err(RequestError { status: Some(status), message: format!("HTTP {status}: {}", text.trim()) })
    }
}

/// A reqwest error's words without its URL (an Azure SAS token travels in the query).
fn without_url(error: &reqwest::Error) -> String {
    let mut text = error.to_string();
    if let Some(url) = error.url() {
        text = text.replace(url.as_str(), "(the object's URL)");
    }
    text
}

/// An S3 error inside a 200 answer.
fn s3_body_error(body: &str) -> Result<(), RequestError> {
    if body.contains("<Error>") {
        return Err(RequestError {
            status: None,
            message: format!("the store answered with an error: {}", body.trim()),
        });
    }
    Ok(())
}

/// The text of the first `<TAG>` element of an XML answer (S3's answers are flat enough).
fn xml_text(body: &str, tag: &str) -> Option<String> {
    let open = format!("<{tag}>");
    let start = body.find(&open)? + open.len();
    let end = body[start..].find(&format!("</{tag}>"))? + start;
    Some(body[start..end].replace("&quot;", "\"").replace("&amp;", "&"))
}

fn complete_body(etags: &[String]) -> String {
    let parts: String = etags
        .iter()
        .enumerate()
        .map(|(i, etag)| {
            let etag = etag.replace('&', "&amp;").replace('"', "&quot;");
            format!("<Part><PartNumber>{}</PartNumber><ETag>{etag}</ETag></Part>", i + 1)
        })
        .collect();
    format!("<CompleteMultipartUpload>{parts}</CompleteMultipartUpload>")
}

/// An object key for a URL path: each segment percent-encoded, the `/`s kept.
fn encode_key(key: &str) -> String {
    key.split('/').map(encode_segment).collect::<Vec<_>>().join("/")
}

/// Percent-encodes everything but RFC 3986's unreserved characters.
fn encode_segment(segment: &str) -> String {
    segment
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_encoded_segment_by_segment() {
        assert_eq!(encode_key("etcd/main-20260101T000000Z.db"), "etcd/main-20260101T000000Z.db");
        assert_eq!(encode_key("a b/c+d"), "a%20b/c%2Bd");
    }

    #[test]
    fn s3_answers_are_read_for_what_matters() {
        let created = "<?xml version=\"1.0\"?><InitiateMultipartUploadResult><Bucket>b</Bucket>\
                       <UploadId>abc&amp;1</UploadId></InitiateMultipartUploadResult>";
        assert_eq!(xml_text(created, "UploadId").as_deref(), Some("abc&1"));
        let part = "<CopyPartResult><ETag>&quot;9b2c&quot;</ETag></CopyPartResult>";
        assert_eq!(xml_text(part, "ETag").as_deref(), Some("\"9b2c\""));
        assert_eq!(
            complete_body(&["\"a\"".into()]),
            "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>&quot;a&quot;</ETag></Part></CompleteMultipartUpload>"
        );
        assert!(s3_body_error("<Error><Code>InternalError</Code></Error>").is_err());
        assert!(s3_body_error("<CopyObjectResult/>").is_ok());
    }

    #[test]
    fn only_network_and_server_failures_are_retried() {
        assert!(retryable(None));
        assert!(retryable(Some(StatusCode::SERVICE_UNAVAILABLE)));
        assert!(retryable(Some(StatusCode::TOO_MANY_REQUESTS)));
        assert!(!retryable(Some(StatusCode::FORBIDDEN)));
        assert!(!retryable(Some(StatusCode::NOT_FOUND)));
    }
}
