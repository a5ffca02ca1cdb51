//! What `snapshot-prove` and `restore-member` share: where the snapshot comes from (`--from`),
//! the etcd binaries they run (`etcd`, and `etcdutl` or a 3.4 `etcdctl` to restore), the
//! processes those run as, and the scratch folder they work in.
//!
//! Every process is killed and reaped when its guard is dropped, and the work folder is removed
//! when its guard is dropped, so a run that fails, panics or is stopped (SIGTERM drops the work
//! in flight) leaves nothing behind in the scratch folder.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use groundskeeper_protocol::operation::{BucketLocation, SnapshotStore};
use groundskeeper_stores::etcd::retention::{self, NameTemplate};

use super::bucket::Bucket;
use super::codec::{self, Key};
use super::snapshot::{Checked, check_file};
use crate::run::Failure;

/// `--etcd`'s fallback: the etcd binary's path.
pub const ETCD_ENV: &str = "GROUNDSKEEPER_ETCD";
/// `--etcdutl`'s fallback: etcdutl 3.5 (or a 3.4 etcdctl).
pub const ETCDUTL_ENV: &str = "GROUNDSKEEPER_ETCDUTL";

/// A tool's `version` that does not answer in this long is taken as not running.
const VERSION_TIMEOUT: Duration = Duration::from_secs(20);
/// How often a running process is looked at.
const POLL: Duration = Duration::from_millis(20);
/// Lines of a tool's log kept for a message.
const LOG_LINES: usize = 4;

/// Where the snapshot comes from: `--from PATH|URL [--from-option K=V].. [--from-credentials
/// DIR]`, as the protocol renders a [`SnapshotStore`].
#[derive(clap::Args, Debug, Clone)]
pub struct FromArgs {
    /// The snapshots' folder (an absolute path) or bucket (`s3://BUCKET[/PREFIX]`,
    /// `gs://…`, `az://…`).
    #[arg(long = "from", value_name = "PATH|URL")]
    pub from: String,
    /// A setting of the bucket (`endpoint=…`, `region=…`, `allow_http=true` …); repeatable.
    #[arg(long = "from-option", value_name = "KEY=VALUE")]
    pub from_options: Vec<String>,
    /// A folder whose files hold the bucket's credentials, each named by its key.
    #[arg(long = "from-credentials", value_name = "DIR")]
    pub from_credentials: Option<PathBuf>,
}

impl FromArgs {
    /// The store as the arguments name it: a folder for an absolute path, else a bucket.
    pub fn store(&self) -> SnapshotStore {
        named_store(&self.from, &self.from_options, self.from_credentials.as_deref())
    }

    /// The store, checked: a folder takes no bucket options; a bucket is a URL with options
    /// `KEY=VALUE`.
    pub(crate) fn checked_store(&self) -> Result<SnapshotStore, Failure> {
        checked_named_store("from", &self.from, &self.from_options, self.from_credentials.as_deref())
    }
}

/// Where snapshots go: `--to PATH|URL [--to-option K=V].. [--to-credentials DIR]`, as the
/// protocol renders a [`SnapshotStore`].
#[derive(clap::Args, Debug, Clone)]
pub struct ToArgs {
    /// The destination folder (an absolute path) or bucket (`s3://BUCKET[/PREFIX]`, `gs://…`,
    /// `az://…`).
    #[arg(long = "to", value_name = "PATH|URL")]
    pub to: String,
    /// A setting of the destination bucket (`endpoint=…`, `region=…`, `allow_http=true` …);
    /// repeatable.
    #[arg(long = "to-option", value_name = "KEY=VALUE")]
    pub to_options: Vec<String>,
    /// A folder whose files hold the destination bucket's credentials, each named by its key.
    #[arg(long = "to-credentials", value_name = "DIR")]
    pub to_credentials: Option<PathBuf>,
}

impl ToArgs {
    /// See [`FromArgs::store`].
    pub fn store(&self) -> SnapshotStore {
        named_store(&self.to, &self.to_options, self.to_credentials.as_deref())
    }

    /// See [`FromArgs::checked_store`].
    pub(crate) fn checked_store(&self) -> Result<SnapshotStore, Failure> {
        checked_named_store("to", &self.to, &self.to_options, self.to_credentials.as_deref())
    }
}

/// A folder for an absolute path, else a bucket with its options and credentials folder.
fn named_store(text: &str, options: &[String], credentials: Option<&Path>) -> SnapshotStore {
    if text.starts_with('/') {
        return SnapshotStore::Folder(text.to_owned());
    }
    SnapshotStore::Bucket(BucketLocation {
        url: text.to_owned(),
        options: options
            .iter()
            .map(|option| match option.split_once('=') {
                Some((key, value)) => (key.to_owned(), value.to_owned()),
                None => (option.clone(), String::new()),
            })
            .collect(),
        credentials_dir: credentials.map(|p| p.to_string_lossy().into_owned()),
    })
}

/// [`named_store`], checked, its mistakes naming `--FLAG`, `--FLAG-option` and
/// `--FLAG-credentials`.
fn checked_named_store(
    flag: &str,
    text: &str,
    options: &[String],
    credentials: Option<&Path>,
) -> Result<SnapshotStore, Failure> {
    let bad = |why: String| Failure::bad_input(format!("--{flag} {text}: {why}"));
    let store = named_store(text, options, credentials);
    match &store {
        SnapshotStore::Folder(_) if !options.is_empty() || credentials.is_some() => Err(bad(format!(
            "a folder takes no --{flag}-option or --{flag}-credentials (those are for a bucket)"
        ))),
        SnapshotStore::Folder(_) => Ok(store),
        SnapshotStore::Bucket(bucket) => {
            if !bucket.url.contains("://") {
                return Err(bad(
                    "neither an absolute folder path nor a bucket URL (s3://, gs://, az://)".into()
                ));
            }
            if let Some(option) = options.iter().find(|o| !o.contains('=')) {
                return Err(bad(format!("--{flag}-option {option:?} is not KEY=VALUE")));
            }
            Ok(store)
        }
    }
}

/// The etcd binaries a proof runs, as flags; each falls back on its environment variable, then
/// on `PATH`.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ToolArgs {
    /// The etcd binary the throwaway member runs (default: $GROUNDSKEEPER_ETCD, else `etcd` on
    /// PATH).
    #[arg(long)]
    pub etcd: Option<PathBuf>,
    /// The tool that restores the snapshot: etcdutl 3.5, or a 3.4 etcdctl (default:
    /// $GROUNDSKEEPER_ETCDUTL, else `etcdutl` on PATH, else a 3.4 `etcdctl` on PATH).
    #[arg(long)]
    pub etcdutl: Option<PathBuf>,
}

/// An etcd binary that ran and said its version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EtcdBinary {
    pub path: PathBuf,
    pub version: String,
}

/// Which tool restores: they take the same `snapshot restore` flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RestoreKind {
    Etcdutl,
    /// etcdctl 3.4, with `ETCDCTL_API=3` (3.5 moved the restore to etcdutl).
    Etcdctl,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RestoreTool {
    pub path: PathBuf,
    pub kind: RestoreKind,
    pub version: String,
}

impl std::fmt::Display for RestoreTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = match self.kind {
            RestoreKind::Etcdutl => "etcdutl",
            RestoreKind::Etcdctl => "etcdctl",
        };
        write!(f, "{name} {} ({})", self.version, self.path.display())
    }
}

const ETCD_HINT: &str = "the groundskeeper-job image carries etcd 3.5 as /usr/local/bin/etcd; elsewhere \
     install etcd 3.5 (https://github.com/etcd-io/etcd/releases) and give its path with --etcd or \
     GROUNDSKEEPER_ETCD";
const RESTORE_HINT: &str = "the groundskeeper-job image carries etcdutl 3.5 as /usr/local/bin/etcdutl; \
     elsewhere install etcdutl from the same etcd 3.5 release (or etcdctl 3.4) and give its path \
     with --etcdutl or GROUNDSKEEPER_ETCDUTL";

/// The etcd binary: `--etcd`, else `$GROUNDSKEEPER_ETCD`, else `etcd` on `PATH`. Bad input, with
/// what to install, when none runs.
pub(crate) fn find_etcd(flag: Option<&Path>) -> Result<EtcdBinary, Failure> {
    let (path, named_by) = match named(flag, ETCD_ENV) {
        Some(named) => named,
        None => match on_path("etcd") {
            Some(path) => (path, "PATH".to_owned()),
            None => return Err(Failure::bad_input(format!("no etcd binary on PATH: {ETCD_HINT}"))),
        },
    };
    let out = bounded_output(Command::new(&path).arg("--version"));
    let version = out.as_deref().ok().and_then(|text| after_prefix(text, "etcd Version: "));
    match version {
        Some(version) => Ok(EtcdBinary { path, version }),
        None => Err(Failure::bad_input(format!(
            "etcd {} (from {named_by}) does not run or is not etcd ({}): {ETCD_HINT}",
            path.display(),
            out.err().unwrap_or_else(|| "no `etcd Version:` in its --version".into())
        ))),
    }
}

/// The restore tool: `--etcdutl`, else `$GROUNDSKEEPER_ETCDUTL` (either may name etcdutl or a
/// 3.4 etcdctl), else `etcdutl` on `PATH`, else a 3.4 `etcdctl` on `PATH`.
pub(crate) fn find_restore_tool(flag: Option<&Path>) -> Result<RestoreTool, Failure> {
    if let Some((path, named_by)) = named(flag, ETCDUTL_ENV) {
        return identify_restore_tool(&path).map_err(|why| {
            Failure::bad_input(format!("{} (from {named_by}): {why}: {RESTORE_HINT}", path.display()))
        });
    }
    let found = ["etcdutl", "etcdctl"]
        .iter()
        .filter_map(|name| on_path(name))
        .find_map(|path| identify_restore_tool(&path).ok());
    found.ok_or_else(|| {
        Failure::bad_input(format!(
            "no etcdutl, nor a 3.4 etcdctl, on PATH to restore snapshots with: {RESTORE_HINT}"
        ))
    })
}

/// What a candidate restore tool is, by its `version`.
fn identify_restore_tool(path: &Path) -> Result<RestoreTool, String> {
    let text = bounded_output(Command::new(path).arg("version").env("ETCDCTL_API", "3"))?;
    if let Some(version) = after_prefix(&text, "etcdutl version: ") {
        return Ok(RestoreTool { path: path.to_owned(), kind: RestoreKind::Etcdutl, version });
    }
    match after_prefix(&text, "etcdctl version: ") {
        Some(version) if version.starts_with("3.4.") => {
            Ok(RestoreTool { path: path.to_owned(), kind: RestoreKind::Etcdctl, version })
        }
        Some(version) => Err(format!(
            "is etcdctl {version}; from etcd 3.5 on snapshots are restored by etcdutl, not etcdctl"
        )),
        None => Err("its `version` names neither etcdutl nor etcdctl".into()),
    }
}

/// The path a flag or an environment variable names, and which named it.
fn named(flag: Option<&Path>, env: &str) -> Option<(PathBuf, String)> {
    if let Some(path) = flag {
        let name = if env == ETCD_ENV { "--etcd" } else { "--etcdutl" };
        return Some((path.to_owned(), name.to_owned()));
    }
    std::env::var_os(env).filter(|v| !v.is_empty()).map(|v| (PathBuf::from(v), env.to_owned()))
}

fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join(name)).find(|p| p.is_file())
}

fn after_prefix(text: &str, prefix: &str) -> Option<String> {
    text.lines().find_map(|l| l.trim().strip_prefix(prefix).map(|v| v.trim().to_owned()))
}

/// A short command's stdout, or why it failed; it is killed after [`VERSION_TIMEOUT`]. Its
/// output is piped, not written to a file: the root file system may be read-only.
fn bounded_output(command: &mut Command) -> Result<String, String> {
    use std::io::Read;
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| e.to_string())?;
    let deadline = Instant::now() + VERSION_TIMEOUT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() <= deadline => std::thread::sleep(POLL),
            waited => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(match waited {
                    Err(e) => e.to_string(),
                    _ => format!("no answer in {}s", VERSION_TIMEOUT.as_secs()),
                });
            }
        }
    };
    // A version is a few lines: it fits the pipe, so the child never waited on a full one.
    let mut text = String::new();
    if let Some(mut stdout) = child.stdout.take() {
        let _ = stdout.read_to_string(&mut text);
    }
    if !status.success() {
        return Err(format!("exited with {status}"));
    }
    Ok(text)
}

/// A child process, killed (SIGKILL) and reaped when dropped unless it has exited. Its stdout
/// and stderr go to a log file.
pub(crate) struct Process {
    child: Option<Child>,
    pub log: PathBuf,
}

impl Process {
    /// Starts `command` with stdout (and stderr, unless the command sets it) into `log`.
    pub fn spawn(command: &mut Command, log: &Path) -> std::io::Result<Self> {
        let file = std::fs::File::create(log)?;
        let child = command.stdout(file.try_clone()?).stderr(file).spawn()?;
        Ok(Self { child: Some(child), log: log.to_owned() })
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    pub fn try_wait(&mut self) -> std::io::Result<Option<ExitStatus>> {
        match self.child.as_mut() {
            Some(child) => {
                let status = child.try_wait()?;
                if status.is_some() {
                    self.child = None;
                }
                Ok(status)
            }
            None => Ok(Some(std::os::unix::process::ExitStatusExt::from_raw(0))),
        }
    }

    /// Waits until it exits, at most `timeout`; `None` when it still runs.
    pub async fn wait(&mut self, timeout: Duration) -> std::io::Result<Option<ExitStatus>> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.try_wait()? {
                return Ok(Some(status));
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// SIGTERM, then SIGKILL when it has not exited within `grace`. True when SIGTERM was enough.
    pub async fn stop(&mut self, grace: Duration) -> bool {
        if let Some(pid) = self.pid() {
            // SAFETY: kill(2) on the pid of a child this guard started and has not reaped, so
            // the pid is still ours.
            unsafe {
                libc::kill(pid as libc::pid_t, libc::SIGTERM);
            }
        }
        if matches!(self.wait(grace).await, Ok(Some(_))) {
            return true;
        }
        self.kill();
        false
    }

    /// SIGKILL and reap.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// The last lines of its log, the error lines first when etcd wrote some, for a message.
    pub fn log_tail(&self) -> String {
        log_tail(&self.log)
    }

    /// Whether the process got as far as writing `marker` to its log: a tool that exits without
    /// it never began its work (it failed to load or to start), so its failure says nothing of
    /// its input.
    pub fn logged(&self, marker: &str) -> bool {
        use std::io::Read;
        let mut text = Vec::new();
        let read = std::fs::File::open(&self.log).and_then(|f| f.take(MAX_LOG_SCAN).read_to_end(&mut text));
        read.is_ok() && String::from_utf8_lossy(&text).contains(marker)
    }
}

/// How much of a tool's log [`Process::logged`] looks through: its start is what matters.
const MAX_LOG_SCAN: u64 = 4 * 1024 * 1024;

/// What etcdutl 3.5 and etcdctl 3.4 log when their restore begins reading the snapshot.
pub(crate) const RESTORE_STARTED: &str = "restoring snapshot";

/// Whether a tool that exited with `status` failed by itself rather than on its input: killed by
/// a signal (out of memory, say), not found or not executable by the shell or the loader (126,
/// 127), out of disk, or exited before it `began` its work. Such a failure is retryable and never
/// held against a snapshot.
pub(crate) fn tool_failed(status: ExitStatus, began: bool, tail: &str) -> bool {
    status.code().is_none_or(|code| code == 126 || code == 127)
        || !began
        || tail.to_ascii_lowercase().contains("no space left")
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A log's last lines for a message: etcd's error and fatal lines when there are some, else the
/// last lines; each cut to 400 characters.
pub(crate) fn log_tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let serious: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| {
            [
                "\"level\":\"fatal\"",
                "\"level\":\"panic\"",
                "\"level\":\"error\"",
                "Error:",
                "\terror\t",
                "\tfatal\t",
            ]
            .iter()
            .any(|mark| l.contains(mark))
        })
        .collect();
    let chosen = if serious.is_empty() { &lines } else { &serious };
    let start = chosen.len().saturating_sub(LOG_LINES);
    chosen[start..].iter().map(|l| cut(l, 400)).collect::<Vec<_>>().join(" | ")
}

/// `line`, at most `max` bytes of it (on a character boundary), marked when cut.
fn cut(line: &str, max: usize) -> String {
    if line.len() <= max {
        return line.to_owned();
    }
    let mut end = max;
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &line[..end])
}

/// A folder of this run's own in the scratch folder, removed with everything in it when
/// dropped. Folders an earlier run of the same operation left there (it was killed outright)
/// are removed first: they are nobody's any more.
pub(crate) struct WorkDir {
    path: PathBuf,
}

impl WorkDir {
    pub fn create(scratch: &Path, operation: &str) -> Result<Self, Failure> {
        let bad = |why: String| Failure::bad_input(format!("--scratch-dir {}: {why}", scratch.display()));
        match std::fs::metadata(scratch) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => return Err(bad("is not a folder".into())),
            Err(e) => return Err(bad(format!("{e}; give a writable folder (an emptyDir)"))),
        }
        let prefix = format!(".groundskeeper-{operation}-");
        if let Ok(entries) = std::fs::read_dir(scratch) {
            for entry in entries.filter_map(Result::ok) {
                let name = entry.file_name().to_string_lossy().into_owned();
                if name.starts_with(&prefix) && entry.file_type().is_ok_and(|t| t.is_dir()) {
                    tracing::info!(folder = %entry.path().display(), "removing what an earlier, killed run left in the scratch folder");
                    let _ = std::fs::remove_dir_all(entry.path());
                }
            }
        }
        let path = scratch.join(format!("{prefix}{}", std::process::id()));
        std::fs::create_dir(&path).map_err(|e| {
            let message = format!("cannot create a folder in it: {e}");
            if is_not_writable(&e) { bad(message) } else { Failure::retryable(message) }
        })?;
        Ok(Self { path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.path)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(folder = %self.path.display(), error = %e, "could not remove the scratch folder");
        }
    }
}

/// Permission denied or a read-only file system: retrying on the same volume cannot help.
pub(crate) fn is_not_writable(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::PermissionDenied || e.raw_os_error() == Some(libc::EROFS)
}

/// A snapshot fetched and checked (size, etcd's trailer, bbolt's meta pages, the revision).
#[derive(Debug, Clone)]
pub(crate) struct Fetched {
    /// The file to restore: in place for a folder, downloaded into the work folder for a bucket.
    pub path: PathBuf,
    pub object: String,
    /// The snapshot as a person finds it: its path, or the bucket URL and name.
    pub location: String,
    /// The object's metadata (`revision`, `keys`, `sha256` …); empty for a folder.
    pub metadata: BTreeMap<String, String>,
    pub checked: Checked,
}

/// The snapshot a run works on: `object` when given, else the cluster's newest in the store
/// (by the time in its name), with where it is (a path or an object URL). Known before anything
/// is read, so that a run failing on the snapshot's bytes names it in its result.
pub(crate) async fn choose(
    store: &SnapshotStore,
    object: Option<&str>,
    template: Option<&NameTemplate>,
) -> Result<(String, String), Failure> {
    match store {
        SnapshotStore::Folder(folder) => {
            let folder = PathBuf::from(folder);
            let object = match object {
                Some(name) => checked_name(name)?.to_owned(),
                None => newest_in_folder(&folder, template)?,
            };
            Ok((folder.join(&object).display().to_string(), object))
        }
        SnapshotStore::Bucket(location) => {
            let bucket = Bucket::open(location)?;
            let object = match (object, template) {
                (Some(name), _) => checked_name(name)?.to_owned(),
                (None, Some(template)) => newest_in_bucket(&bucket, template).await?,
                (None, None) => {
                    return Err(Failure::bad_input(
                        "no --object, and no template to find the newest snapshot by",
                    ));
                }
            };
            Ok((bucket.object_url(&object), object))
        }
    }
}

/// Finds the snapshot (`object`, else the cluster's newest by `template`), downloads it into
/// `work` when it is in a bucket, and checks it as `snapshot verify` does. A folder's file is
/// only read, never written. Bad input when there is no such snapshot or etcd would refuse it.
pub(crate) async fn fetch(
    store: &SnapshotStore,
    object: Option<&str>,
    template: Option<&NameTemplate>,
    work: &Path,
    key: Option<&Key>,
) -> Result<Fetched, Failure> {
    let (_, object) = choose(store, object, template).await?;
    match store {
        SnapshotStore::Folder(folder) => {
            let path = PathBuf::from(folder).join(&object);
            if codec::is_encoded_file(&path) {
                return fetch_encoded_file(path, object, work, key).await;
            }
            tracing::info!(snapshot = %path.display(), "checking the snapshot in its folder");
            let checked = check_in_background(path.clone()).await?;
            Ok(Fetched {
                location: path.display().to_string(),
                path,
                object,
                metadata: BTreeMap::new(),
                checked,
            })
        }
        SnapshotStore::Bucket(bucket) => fetch_from_bucket(bucket, object, work, key).await,
    }
}

/// A compressed or encrypted snapshot in a folder, decoded into the work folder (etcd's tools
/// restore plain files only) and checked there.
async fn fetch_encoded_file(
    path: PathBuf,
    object: String,
    work: &Path,
    key: Option<&Key>,
) -> Result<Fetched, Failure> {
    let location = path.display().to_string();
    let plain = work.join("snapshot.db");
    tracing::info!(snapshot = %location, "decoding the snapshot into the scratch folder");
    let (from, to, key) = (path.clone(), plain.clone(), key.cloned());
    let content =
        tokio::task::spawn_blocking(move || codec::decode_file(&from, &to, key.as_ref()))
            .await
            .map_err(|e| Failure::retryable(format!("the snapshot's decoding did not finish: {e}")))??;
    let checked = check_in_background(plain.clone()).await.map_err(|failure| Failure {
        message: failure.message.replace(&plain.display().to_string(), &location),
        ..failure
    })?;
    let checked =
        checked.of_stored(Some(content)).map_err(|why| Failure::retryable(format!("{location}: {why}")))?;
    Ok(Fetched { path: plain, object, location, metadata: BTreeMap::new(), checked })
}

/// Downloads snapshot `object` into the work folder, with its metadata, and checks the file.
async fn fetch_from_bucket(
    location: &BucketLocation,
    object: String,
    work: &Path,
    key: Option<&Key>,
) -> Result<Fetched, Failure> {
    let bucket = Bucket::open(location)?;
    let location = bucket.object_url(&object);
    tracing::info!(object = %location, "downloading the snapshot");
    let downloaded = bucket.download(&object, &work.join("snapshot.db"), key).await?;
    tracing::info!(object = %location, bytes = downloaded.size_bytes, "downloaded; checking it");
    // A refusal names the object, not the file in the scratch folder.
    let checked = check_in_background(downloaded.path.clone()).await.map_err(|failure| Failure {
        message: failure.message.replace(&downloaded.path.display().to_string(), &location),
        ..failure
    })?;
    let arrived = downloaded.content.as_ref().map_or(&downloaded.sha256, |c| &c.content_sha256);
    if checked.sha256 != *arrived {
        return Err(Failure::retryable(format!(
            "{location}: the file downloaded reads back with sha256 {}, not the {arrived} that arrived",
            checked.sha256
        )));
    }
    let checked = checked
        .of_stored(downloaded.content)
        .map_err(|why| Failure::retryable(format!("{location}: {why}")))?;
    Ok(Fetched { path: downloaded.path, object, location, metadata: downloaded.metadata, checked })
}

/// The cluster's newest snapshot in a bucket, by the time in its name.
async fn newest_in_bucket(bucket: &Bucket, template: &NameTemplate) -> Result<String, Failure> {
    let mut snapshots = bucket.list_snapshots(template, false).await?;
    let newest = snapshots.pop().ok_or_else(|| {
        Failure::bad_input(format!(
            "--from {}: no snapshot of the cluster there (no object named by its --file-name-template)",
            bucket.url()
        ))
    })?;
    Ok(newest.name)
}

/// Reads the whole file off the runtime's thread, so a stop is still seen meanwhile.
async fn check_in_background(path: PathBuf) -> Result<Checked, Failure> {
    tokio::task::spawn_blocking(move || check_file(&path))
        .await
        .map_err(|e| Failure::retryable(format!("the snapshot check did not finish: {e}")))?
}

/// A snapshot's name in a store: a file name, not a path.
fn checked_name(name: &str) -> Result<&str, Failure> {
    if name.is_empty() || name == "." || name == ".." || name.contains('/') || name.contains('\0') {
        return Err(Failure::bad_input(format!(
            "--object {name:?}: give the snapshot's file name, not a path"
        )));
    }
    Ok(name)
}

/// The cluster's newest snapshot in a folder, by the time in its name.
fn newest_in_folder(folder: &Path, template: Option<&NameTemplate>) -> Result<String, Failure> {
    let template = template
        .ok_or_else(|| Failure::bad_input("no --object, and no template to find the newest snapshot by"))?;
    let entries = std::fs::read_dir(folder).map_err(|e| {
        Failure::bad_input(format!("--from {}: cannot list the folder: {e}", folder.display()))
    })?;
    let files: Vec<String> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    newest(template, &files).ok_or_else(|| {
        Failure::bad_input(format!(
            "--from {}: no snapshot of the cluster there (no file named by its --file-name-template)",
            folder.display()
        ))
    })
}

/// The newest of `names` that are the cluster's snapshots. Retention's selection, asked to keep
/// none besides a name that is no file, lists every snapshot of the cluster oldest first.
pub(crate) fn newest(template: &NameTemplate, names: &[String]) -> Option<String> {
    retention::select(template, names, "", 1).delete.pop()
}

/// `--expect-sha256`, checked: 64 hex digits, compared in lower case.
pub(crate) fn checked_sha256(flag: Option<&str>) -> Result<Option<String>, Failure> {
    let Some(sha) = flag else { return Ok(None) };
    if sha.len() != 64 || !sha.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(Failure::bad_input(format!(
            "--expect-sha256 {sha:?}: not a SHA-256 (64 hex digits, as sha256sum prints it)"
        )));
    }
    Ok(Some(sha.to_ascii_lowercase()))
}

/// Refuses a fetched snapshot whose SHA-256 is not the one expected.
pub(crate) fn check_sha256(fetched: &Fetched, expected: Option<&str>) -> Result<(), Failure> {
    let recorded = fetched.metadata.get("sha256").map(|s| s.to_ascii_lowercase());
    for (what, want) in
        [("--expect-sha256", expected.map(str::to_owned)), ("the object's metadata", recorded)]
    {
        if let Some(want) = want
            && want != fetched.checked.sha256
        {
            return Err(Failure::bad_input(format!(
                "snapshot {}: its SHA-256 is {}, not {want} as {what} says: another file, or damaged",
                fetched.location, fetched.checked.sha256
            )));
        }
    }
    Ok(())
}

/// The member flags a restore writes into the data folder.
#[derive(Debug, Clone)]
pub(crate) struct RestoreFlags {
    pub name: String,
    pub initial_cluster: String,
    pub initial_advertise_peer_urls: String,
    pub initial_cluster_token: String,
}

/// Restores `snapshot` into `data_dir` (which must not exist) with `tool`, its output in `log`;
/// gives up after `timeout`. A tool that ran and refused the snapshot is bad input (the file was
/// checked, so it is the snapshot etcd cannot restore), unless the disk was full.
pub(crate) async fn restore(
    tool: &RestoreTool,
    snapshot: &Path,
    data_dir: &Path,
    flags: &RestoreFlags,
    log: &Path,
    timeout: Duration,
) -> Result<(), Failure> {
    let mut command = Command::new(&tool.path);
    command
        .args(["snapshot", "restore"])
        .arg(snapshot)
        .arg(format!("--data-dir={}", data_dir.display()))
        .arg(format!("--name={}", flags.name))
        .arg(format!("--initial-cluster={}", flags.initial_cluster))
        .arg(format!("--initial-advertise-peer-urls={}", flags.initial_advertise_peer_urls))
        .arg(format!("--initial-cluster-token={}", flags.initial_cluster_token))
        .stdin(Stdio::null());
    if tool.kind == RestoreKind::Etcdctl {
        command.env("ETCDCTL_API", "3");
    }
    let mut process = Process::spawn(&mut command, log)
        .map_err(|e| Failure::retryable(format!("cannot run {tool}: {e}")))?;
    let status = process.wait(timeout).await.map_err(|e| Failure::retryable(format!("{tool}: {e}")))?;
    let Some(status) = status else {
        return Err(Failure::retryable(format!(
            "{tool} did not finish restoring {} within {}s; stopped",
            snapshot.display(),
            timeout.as_secs()
        )));
    };
    if status.success() {
        return Ok(());
    }
    let tail = process.log_tail();
    if tool_failed(status, process.logged(RESTORE_STARTED), &tail) {
        return Err(Failure::retryable(format!(
            "{tool} failed before it could restore {} ({status}): {tail}; the tool or the machine \
             failed, not the snapshot: {RESTORE_HINT}",
            snapshot.display()
        )));
    }
    Err(Failure::bad_input(format!("{tool} could not restore {}: {status}: {tail}", snapshot.display())))
}

/// How long a restore may take: two minutes, and a minute more per GiB.
pub(crate) fn restore_timeout(size: u64) -> Duration {
    Duration::from_secs(120 + 60 * size.div_ceil(1 << 30))
}

/// fsyncs every file and folder under `root`, and `root` itself: what a restore tool wrote is
/// on disk before it is renamed into place.
pub(crate) fn sync_tree(root: &Path) -> std::io::Result<()> {
    let metadata = std::fs::symlink_metadata(root)?;
    if metadata.is_dir() {
        for entry in std::fs::read_dir(root)? {
            sync_tree(&entry?.path())?;
        }
    } else if !metadata.is_file() {
        return Ok(());
    }
    std::fs::File::open(root)?.sync_all()
}

/// fsyncs a folder, so a rename or a new entry in it lasts.
pub(crate) fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;
    use groundskeeper_protocol::result::ErrorKind;

    fn from(args: &[&str]) -> FromArgs {
        #[derive(clap::Parser)]
        struct Wrap {
            #[command(flatten)]
            from: FromArgs,
        }
        use clap::Parser;
        Wrap::try_parse_from(std::iter::once("x").chain(args.iter().copied())).unwrap().from
    }

    #[test]
    fn a_store_is_a_folder_or_a_bucket_with_its_settings() {
        assert_eq!(
            from(&["--from", "/snapshots"]).checked_store().unwrap(),
            SnapshotStore::Folder("/snapshots".into())
        );
        let bucket = from(&[
            "--from",
            "s3://b/p",
            "--from-option",
            "endpoint=http://127.0.0.1:9000",
            "--from-option",
            "allow_http=true",
            "--from-credentials",
            "/creds",
        ]);
        assert_eq!(
            bucket.checked_store().unwrap(),
            SnapshotStore::Bucket(BucketLocation {
                url: "s3://b/p".into(),
                options: vec![
                    ("endpoint".into(), "http://127.0.0.1:9000".into()),
                    ("allow_http".into(), "true".into())
                ],
                credentials_dir: Some("/creds".into()),
            })
        );
        for (args, says) in [
            (&["--from", "snapshots"][..], "neither an absolute folder path nor a bucket URL"),
            (&["--from", "/s", "--from-option", "region=x"], "a folder takes no"),
            (&["--from", "s3://b", "--from-option", "region"], "not KEY=VALUE"),
        ] {
            let failure = from(args).checked_store().unwrap_err();
            assert_eq!(failure.kind, ErrorKind::BadInput);
            assert!(failure.message.contains(says), "{args:?}: {}", failure.message);
        }
    }

    #[test]
    fn the_newest_snapshot_is_the_clusters_latest_by_its_name() {
        let template = NameTemplate::parse("{cluster}-{time}.db", "main").unwrap();
        let names: Vec<String> = [
            "main-20260102T000000Z.db",
            "main-20260103T000000Z.db",
            "main-2-20260109T000000Z.db",
            "other-20260110T000000Z.db",
            ".main-20260111T000000Z.db.partial",
            "main-20260101T000000Z.db",
        ]
        .map(str::to_owned)
        .to_vec();
        assert_eq!(newest(&template, &names).as_deref(), Some("main-20260103T000000Z.db"));
        assert_eq!(newest(&template, &names[2..4]), None);
    }

    #[test]
    fn names_and_checksums_are_checked() {
        for bad in ["", ".", "..", "a/b", "/abs"] {
            assert_eq!(checked_name(bad).unwrap_err().kind, ErrorKind::BadInput, "{bad:?}");
        }
        assert_eq!(checked_name("main.db").unwrap(), "main.db");
        let sha = "AB".repeat(32);
        assert_eq!(checked_sha256(Some(&sha)).unwrap(), Some("ab".repeat(32)));
        assert_eq!(checked_sha256(None).unwrap(), None);
        for bad in ["ab", &"zz".repeat(32)] {
            assert_eq!(checked_sha256(Some(bad)).unwrap_err().kind, ErrorKind::BadInput);
        }
    }

    #[test]
    fn a_log_tail_prefers_etcds_errors_and_stays_short() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("etcd.log");
        let long = "x".repeat(1000);
        std::fs::write(
            &log,
            format!(
                "{{\"level\":\"info\",\"msg\":\"starting\"}}\n{{\"level\":\"fatal\",\"msg\":\"listen tcp: address already in use\"}}\n{long}\n"
            ),
        )
        .unwrap();
        assert_eq!(log_tail(&log), "{\"level\":\"fatal\",\"msg\":\"listen tcp: address already in use\"}");
        std::fs::write(&log, format!("a\nb\n{long}\n")).unwrap();
        let tail = log_tail(&log);
        assert!(tail.starts_with("a | b | xxx") && tail.len() < 420, "{tail}");
    }

    #[test]
    fn a_work_folder_goes_away_with_what_an_earlier_run_left() {
        let scratch = tempfile::tempdir().unwrap();
        let stale = scratch.path().join(".groundskeeper-prove-999999");
        std::fs::create_dir_all(stale.join("member")).unwrap();
        std::fs::write(scratch.path().join("keep.txt"), "not ours").unwrap();
        let work = WorkDir::create(scratch.path(), "prove").unwrap();
        assert!(!stale.exists());
        std::fs::write(work.path().join("f"), "x").unwrap();
        drop(work);
        let left: Vec<_> =
            std::fs::read_dir(scratch.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left, ["keep.txt"]);
        let missing = WorkDir::create(&scratch.path().join("missing"), "prove").err().unwrap();
        assert_eq!(missing.kind, ErrorKind::BadInput);
    }
}
