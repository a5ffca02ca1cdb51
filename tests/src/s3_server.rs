//! A throwaway S3 server on loopback for tests and benchmarks: `s3s-fs` (crates.io, not written
//! here), an S3 API over a folder that checks SigV4 signatures, so wrong credentials are refused
//! as a real store refuses them (a server that accepts any credentials could not test that).
//!
//! The server's data is a temporary folder: a bucket is a folder in it, an object a file in its
//! bucket's folder, the parts of an upload under way `.upload_id-*.part-*` files at the top.
//! Dropping the server kills it and removes the folder. Its port is picked by binding port 0;
//! if another process takes it before s3s-fs binds it, the server is started again on a new one.
//!
//! The binary is found through `GROUNDSKEEPER_S3S_FS`, then where `cargo xtask test` builds it
//! (`target/tools/s3s-fs/bin/s3s-fs`), then `s3s-fs` on `PATH`.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use groundskeeper_protocol::operation::BucketLocation;

/// How the tests are told where the binary is (`cargo xtask test` sets it).
pub const ENV_VAR: &str = "GROUNDSKEEPER_S3S_FS";
/// The access key the server takes.
pub const ACCESS_KEY: &str = "groundskeeper-test";
/// The region clients sign for (s3s-fs takes any).
pub const REGION: &str = "us-east-1";

const START_ATTEMPTS: usize = 5;
const READY_TIMEOUT: Duration = Duration::from_secs(20);

/// The s3s-fs binary, or why none was found.
pub fn find_s3s_fs() -> Result<PathBuf, String> {
    let runs = |binary: &Path| {
        Command::new(binary)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if let Some(path) = std::env::var_os(ENV_VAR) {
        let binary = PathBuf::from(path);
        return if runs(&binary) {
            Ok(binary)
        } else {
            Err(format!("{ENV_VAR}={} does not run ({})", binary.display(), install_hint()))
        };
    }
    let fetched = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/tools/s3s-fs/bin/s3s-fs");
    let on_path = std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).map(|dir| dir.join("s3s-fs")).collect::<Vec<_>>())
        .unwrap_or_default();
    std::iter::once(fetched)
        .chain(on_path)
        .find(|binary| runs(binary))
        .ok_or_else(|| format!("the S3 server s3s-fs was not found ({})", install_hint()))
}

fn install_hint() -> String {
    format!(
        "`cargo xtask test` builds it into target/tools/; or `cargo install s3s-fs --version 0.14.1 \
         --features binary --locked` and point {ENV_VAR} at the binary"
    )
}

/// The binary for a test, or `None` after printing why the test is skipped. Under CI
/// (`CI=true`) a missing binary fails the test instead.
pub fn s3s_fs_or_skip() -> Option<PathBuf> {
    match find_s3s_fs() {
        Ok(path) => Some(path),
        Err(why) if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("{why}; CI=true, so a missing S3 server fails the test")
        }
        Err(why) => {
            eprintln!("skipped: {why}");
            None
        }
    }
}

/// A running s3s-fs. Drop kills it and removes its data.
pub struct S3Server {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub endpoint: String,
    pub access_key: String,
    pub secret_key: String,
    log: PathBuf,
    root: PathBuf,
    // Last, so the server is killed before its data goes.
    dir: tempfile::TempDir,
}

impl S3Server {
    /// Starts a server with fresh credentials and no bucket, and waits until it accepts
    /// connections.
    pub fn start(binary: &Path) -> Result<Self, String> {
        let mut last_error = String::new();
        for _ in 0..START_ATTEMPTS {
            let dir =
                tempfile::Builder::new().prefix("groundskeeper-s3-").tempdir().map_err(|e| e.to_string())?;
            let root = dir.path().join("data");
            std::fs::create_dir(&root).map_err(|e| format!("{}: {e}", root.display()))?;
            let log = dir.path().join("s3s-fs.log");
            let port = crate::net::free_ports(1)?[0];
            // A secret of the run's own: nothing else signs for this server.
            let secret_key = format!("secret-{}-{}", std::process::id(), port);
            let log_file = std::fs::File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
            let child = Command::new(binary)
                .args(["--host", "127.0.0.1", "--port", &port.to_string()])
                .args(["--access-key", ACCESS_KEY, "--secret-key", &secret_key])
                .arg(&root)
                .env("RUST_LOG", "s3s_fs=info,s3s=warn")
                .stdin(Stdio::null())
                .stdout(log_file.try_clone().map_err(|e| e.to_string())?)
                .stderr(log_file)
                .spawn()
                .map_err(|e| format!("cannot start {}: {e}", binary.display()))?;
            let mut server = Self {
                child,
                endpoint: format!("http://127.0.0.1:{port}"),
                access_key: ACCESS_KEY.to_owned(),
                secret_key,
                log,
                root,
                dir,
            };
            match server.wait_ready(port) {
                Ok(()) => return Ok(server),
                // Someone took the port between the pick and the server's bind: a new one.
                Err(err) if server.log_text().contains("in use") => last_error = err,
                Err(err) => return Err(format!("{err}\n--- s3s-fs log ---\n{}", server.log_text())),
            }
        }
        Err(format!("could not start s3s-fs in {START_ATTEMPTS} attempts: {last_error}"))
    }

    fn wait_ready(&mut self, port: u16) -> Result<(), String> {
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!("s3s-fs exited at start ({status})"));
            }
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!("s3s-fs did not accept connections within {READY_TIMEOUT:?}"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The server's log, for failure messages.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Creates a bucket (a folder in the server's data folder: what s3s-fs takes a bucket for).
    pub fn create_bucket(&self, name: &str) -> Result<(), String> {
        let folder = self.root.join(name);
        std::fs::create_dir(&folder).map_err(|e| format!("bucket {name}: {e}"))
    }

    /// The file holding an object, to look at (or damage) it behind the server's back.
    pub fn object_file(&self, bucket: &str, key: &str) -> PathBuf {
        self.root.join(bucket).join(key)
    }

    /// An object's user metadata as the server keeps it (a JSON file beside the bucket's folder,
    /// named by the base64 of the bucket and key: s3s-fs 0.14's own layout); empty when it has
    /// none or no such object.
    pub fn object_metadata(&self, bucket: &str, key: &str) -> std::collections::BTreeMap<String, String> {
        let file = self.root.join(format!(
            ".bucket-{}.object-{}.metadata.json",
            base64_url(bucket.as_bytes()),
            base64_url(key.as_bytes())
        ));
        let Ok(text) = std::fs::read_to_string(file) else { return Default::default() };
        let json: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
        json["user_metadata"]
            .as_object()
            .map(|m| m.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned())).collect())
            .unwrap_or_default()
    }

    /// The parts of multipart uploads under way (none once every upload was completed or
    /// aborted).
    pub fn upload_parts(&self) -> Vec<PathBuf> {
        std::fs::read_dir(&self.root)
            .map(|entries| {
                entries
                    .filter_map(Result::ok)
                    .filter(|e| e.file_name().to_string_lossy().starts_with(".upload_id-"))
                    .map(|e| e.path())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The settings a client needs for this server (plain http, path-style requests).
    pub fn options(&self) -> Vec<(String, String)> {
        vec![
            ("endpoint".into(), self.endpoint.clone()),
            ("region".into(), REGION.into()),
            ("allow_http".into(), "true".into()),
        ]
    }

    /// `--to-option K=V` / `--from-option K=V` arguments for [`S3Server::options`].
    pub fn option_args(&self, flag: &str) -> Vec<String> {
        self.options()
            .into_iter()
            .flat_map(|(k, v)| [format!("--{flag}-option"), format!("{k}={v}")])
            .collect()
    }

    /// Writes a credentials folder with this server's keys into `dir` (created), as a mounted
    /// Secret holds them: one file per key.
    pub fn write_credentials(&self, dir: &Path) -> Result<(), String> {
        write_credentials(dir, &self.access_key, &self.secret_key)
    }

    /// A location in `bucket` (`s3://BUCKET[/PREFIX]`) with this server's settings and the
    /// credentials folder `credentials`.
    pub fn location(&self, url: &str, credentials: &Path) -> BucketLocation {
        BucketLocation {
            url: url.to_owned(),
            options: self.options(),
            credentials_dir: Some(credentials.display().to_string()),
        }
    }

    /// The server's folder (its data is in `data/`).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Writes `AWS_ACCESS_KEY_ID` and `AWS_SECRET_ACCESS_KEY` files into `dir` (created), each ending
/// with a newline as a Secret made from a file often does.
pub fn write_credentials(dir: &Path, access_key: &str, secret_key: &str) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for (name, value) in [("AWS_ACCESS_KEY_ID", access_key), ("AWS_SECRET_ACCESS_KEY", secret_key)] {
        let file = dir.join(name);
        std::fs::write(&file, format!("{value}\n")).map_err(|e| format!("{}: {e}", file.display()))?;
    }
    Ok(())
}

/// Base64, URL-safe alphabet, no padding (how s3s-fs names its metadata files).
fn base64_url(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

#[cfg(test)]
mod tests {
    #[test]
    fn base64_url_matches_the_reference() {
        assert_eq!(super::base64_url(b"snapshots"), "c25hcHNob3Rz");
        assert_eq!(super::base64_url(b"etcd/main-1.db"), "ZXRjZC9tYWluLTEuZGI");
        assert_eq!(super::base64_url(&[0xfb, 0xff]), "-_8");
    }
}
