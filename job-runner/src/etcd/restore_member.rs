//! `groundskeeper-job restore-member`: one member's data restored from a snapshot, on its own
//! data volume, while the cluster is stopped.
//!
//! Beside the member's data folder `DATA` (all on one volume, so every move is a rename):
//! * `DATA` + `--keep-old-suffix`: the old data, moved aside, never deleted. Moved once: when it
//!   is already there (an earlier attempt moved it), it is kept as it is.
//! * `DATA.partial-restore`: where etcd's tool restores the snapshot; renamed to `DATA` once
//!   complete and on disk. A run that finds one left by a killed attempt removes it and restores
//!   again.
//! * `DATA.groundskeeper-restore.json`: the marker, naming the cluster token and the snapshot.
//!   Written `pending` just before the rename and `done` after it, so a run repeated after a kill
//!   knows a finished restore (and does nothing) from a half-finished one (redone).
//!
//! Nothing else on the volume is touched. The snapshot is fetched and checked (etcd's trailer,
//! bbolt's meta pages, `--expect-sha256`) before anything is moved.

use std::path::{Path, PathBuf};
use std::time::Duration;

use groundskeeper_protocol::operation::SnapshotStore;
use groundskeeper_protocol::result::RestoreMemberReport;
use groundskeeper_protocol::{JobResult, Outcome, Report};
use serde::{Deserialize, Serialize};

use super::codec::{Encoded, Key};
use super::compact::runtime;
use super::etcd_tools::{self, FromArgs, RestoreFlags, RestoreTool, WorkDir, is_not_writable, sync_dir};
use crate::run::{self, Failure, RunClock, StopSignal};

/// Where the snapshot is restored before it is renamed into place: `DATA` + this.
pub const PARTIAL_SUFFIX: &str = ".partial-restore";
/// The marker beside the data folder: `DATA` + this (written through `DATA` + this + `.tmp`).
pub const MARKER_SUFFIX: &str = ".groundskeeper-restore.json";
/// Every bookkeeping name of the runner's beside the data folder but the partial restore starts
/// with `DATA` + this; no `--keep-old-suffix` may.
const RESERVED_PREFIX: &str = ".groundskeeper-";

#[derive(clap::Args, Debug, Clone)]
pub struct RestoreMemberArgs {
    #[command(flatten)]
    pub key: crate::etcd::codec::KeyArgs,
    #[command(flatten)]
    pub from: FromArgs,
    /// The snapshot's name in the folder or bucket.
    #[arg(long)]
    pub object: String,
    /// The SHA-256 the whole snapshot file must have; another file is refused before anything
    /// is touched.
    #[arg(long)]
    pub expect_sha256: Option<String>,
    /// The member's data folder (etcd's --data-dir), one level below its volume's mount point.
    #[arg(long)]
    pub data_dir: PathBuf,
    /// The member's name (etcd's --name).
    #[arg(long)]
    pub name: String,
    /// Every member as NAME=PEER_URL, comma-separated.
    #[arg(long)]
    pub initial_cluster: String,
    /// This member's peer URL(s), comma-separated.
    #[arg(long)]
    pub initial_advertise_peer_urls: String,
    /// The restored cluster's new token: it never joins members of the old one.
    #[arg(long)]
    pub initial_cluster_token: String,
    /// The old data folder is moved to DATA_DIR + this (e.g. `.pre-restore-TASK`).
    #[arg(long)]
    pub keep_old_suffix: String,
    /// A writable folder for the download and the restore's log; what the run puts there is
    /// removed when it ends.
    #[arg(long)]
    pub scratch_dir: PathBuf,
    /// The tool that restores: etcdutl 3.5, or a 3.4 etcdctl (default: $GROUNDSKEEPER_ETCDUTL,
    /// else `etcdutl` on PATH, else a 3.4 `etcdctl` on PATH).
    #[arg(long)]
    pub etcdutl: Option<PathBuf>,
    /// Where to write the result JSON.
    #[arg(long, default_value = run::DEFAULT_RESULT_FILE)]
    pub result_file: PathBuf,
    /// The pod's terminationGracePeriodSeconds. A stop kills the restore; the old data stays
    /// moved aside and the next run restores again.
    #[arg(long, default_value_t = groundskeeper_protocol::exit::TERMINATION_GRACE_PERIOD_SECONDS)]
    pub grace_period_seconds: u64,
}

/// A restore as asked for, checked.
#[derive(Debug, Clone)]
pub(crate) struct Restore {
    pub store: SnapshotStore,
    pub object: String,
    pub expect_sha256: Option<String>,
    pub layout: Layout,
    pub flags: RestoreFlags,
    pub scratch: PathBuf,
    /// Opens an encrypted snapshot.
    pub key: Option<Key>,
    pub tool: RestoreTool,
}

impl RestoreMemberArgs {
    pub(crate) fn restore(&self) -> Result<Restore, Failure> {
        let flags = RestoreFlags {
            name: self.name.clone(),
            initial_cluster: self.initial_cluster.clone(),
            initial_advertise_peer_urls: self.initial_advertise_peer_urls.clone(),
            initial_cluster_token: self.initial_cluster_token.clone(),
        };
        check_membership(&flags)?;
        if self.object.is_empty() || self.object.contains('/') {
            return Err(Failure::bad_input(format!(
                "--object {:?}: give the snapshot's name in its folder or bucket",
                self.object
            )));
        }
        Ok(Restore {
            store: self.from.checked_store()?,
            object: self.object.clone(),
            expect_sha256: etcd_tools::checked_sha256(self.expect_sha256.as_deref())?,
            layout: Layout::new(&self.data_dir, &self.keep_old_suffix)?,
            flags,
            scratch: self.scratch_dir.clone(),
            key: self.key.key()?,
            tool: etcd_tools::find_restore_tool(self.etcdutl.as_deref())?,
        })
    }
}

/// The member's flags agree with each other: its name is in the initial cluster with exactly
/// its advertised peer URLs (etcd's restore would refuse them otherwise, less clearly).
fn check_membership(flags: &RestoreFlags) -> Result<(), Failure> {
    let bad = |why: String| Failure::bad_input(why);
    if flags.name.is_empty() || flags.initial_cluster_token.is_empty() {
        return Err(bad("--name and --initial-cluster-token must not be empty".into()));
    }
    let mut own: Vec<&str> = Vec::new();
    for entry in flags.initial_cluster.split(',') {
        let Some((name, url)) = entry.split_once('=').filter(|(n, u)| !n.is_empty() && u.contains("://"))
        else {
            return Err(bad(format!(
                "--initial-cluster: {entry:?} is not NAME=PEER_URL (e.g. etcd-0=https://etcd-0.etcd:2380)"
            )));
        };
        if name == flags.name {
            own.push(url);
        }
    }
    let mut advertised: Vec<&str> = flags.initial_advertise_peer_urls.split(',').collect();
    own.sort_unstable();
    advertised.sort_unstable();
    if own.is_empty() {
        return Err(bad(format!("--initial-cluster does not name member {:?} (--name)", flags.name)));
    }
    if own != advertised {
        return Err(bad(format!(
            "--initial-advertise-peer-urls {} is not what --initial-cluster gives member {}: {}",
            flags.initial_advertise_peer_urls,
            flags.name,
            own.join(",")
        )));
    }
    Ok(())
}

/// The paths beside the member's data folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Layout {
    pub data: PathBuf,
    pub old: PathBuf,
    pub partial: PathBuf,
    pub marker: PathBuf,
    pub parent: PathBuf,
}

impl Layout {
    /// Checks the data folder: an absolute path in a writable folder, a folder itself (or not
    /// there yet), and not a mount point (a mount point cannot be renamed).
    fn new(data_dir: &Path, keep_old_suffix: &str) -> Result<Self, Failure> {
        let bad = |why: String| Failure::bad_input(format!("--data-dir {}: {why}", data_dir.display()));
        let data = normalised(data_dir).map_err(bad)?;
        let (Some(parent), Some(name)) = (data.parent(), data.file_name()) else {
            return Err(bad("names no folder".into()));
        };
        check_suffix(keep_old_suffix, name.len())?;
        let text = data.display().to_string();
        let layout = Self {
            data: data.clone(),
            old: PathBuf::from(format!("{text}{keep_old_suffix}")),
            partial: PathBuf::from(format!("{text}{PARTIAL_SUFFIX}")),
            marker: PathBuf::from(format!("{text}{MARKER_SUFFIX}")),
            parent: parent.to_owned(),
        };
        let parent_meta =
            std::fs::metadata(parent).map_err(|e| bad(format!("its folder {}: {e}", parent.display())))?;
        if !parent_meta.is_dir() {
            return Err(bad(format!("{} is not a folder", parent.display())));
        }
        writable(parent).map_err(|e| {
            bad(format!(
                "its folder {} is not writable ({e}): the old data is moved aside and the restored \
                 data written beside it, on the member's volume",
                parent.display()
            ))
        })?;
        match std::fs::symlink_metadata(&layout.data) {
            Ok(m) if m.is_symlink() => {
                return Err(bad(
                    "is a symbolic link: moving it aside would leave the data where it is; give the \
                     folder it points to"
                        .into(),
                ));
            }
            Ok(m) if !m.is_dir() => return Err(bad("is not a folder".into())),
            Ok(m) => {
                use std::os::unix::fs::MetadataExt;
                if m.dev() != parent_meta.dev() {
                    return Err(bad(
                        "is a mount point, which cannot be moved aside: mount the member's volume one \
                         level up and give the data folder inside it"
                            .into(),
                    ));
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(bad(e.to_string())),
        }
        Ok(layout)
    }
}

/// `path` as an absolute path without `.` components or trailing slashes; a path with `..` is
/// refused (through a symbolic link it may not mean the folder it seems to).
fn normalised(path: &Path) -> Result<PathBuf, String> {
    use std::path::Component;
    if !path.is_absolute() {
        return Err("give an absolute path".into());
    }
    let mut normal = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => return Err("give a path without `..`".into()),
            Component::CurDir => {}
            other => normal.push(other),
        }
    }
    Ok(normal)
}

/// `--keep-old-suffix`: part of a file name, one the runner's own names beside the data folder
/// (all starting with [`PARTIAL_SUFFIX`] or [`RESERVED_PREFIX`]) can never be, and short enough
/// for a file name after `name_len` bytes.
fn check_suffix(suffix: &str, name_len: usize) -> Result<(), Failure> {
    let bad = |why: &str| {
        Failure::bad_input(format!(
            "--keep-old-suffix {suffix:?}: {why}; give a suffix of a file name such as .pre-restore-TASK"
        ))
    };
    if suffix.is_empty() || suffix.contains('/') || suffix.chars().any(char::is_control) {
        return Err(bad("empty, or holds '/' or a control character"));
    }
    if suffix.starts_with(PARTIAL_SUFFIX) || suffix.starts_with(RESERVED_PREFIX) {
        return Err(bad(&format!(
            "names starting with {PARTIAL_SUFFIX} or {RESERVED_PREFIX} are the runner's own beside the data folder"
        )));
    }
    if name_len + suffix.len() > 255 {
        return Err(bad("the old data's folder name would be longer than 255 bytes"));
    }
    Ok(())
}

/// access(2) for writing: permission, and a read-only file system (which root meets too).
fn writable(path: &Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())?;
    // SAFETY: a valid NUL-terminated path; access only reads.
    match unsafe { libc::access(c.as_ptr(), libc::W_OK) } {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

fn exists(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
enum MarkerState {
    /// Written just before the restored folder is renamed into place.
    Pending,
    /// The restored folder is in place.
    Done,
}

/// What the marker beside the data folder records.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Marker {
    state: MarkerState,
    name: String,
    initial_cluster_token: String,
    object: String,
    sha256: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    revision: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    old_data_moved_to: Option<String>,
}

impl Marker {
    fn read(path: &Path) -> Option<Self> {
        let text = std::fs::read_to_string(path).ok()?;
        match serde_json::from_str(&text) {
            Ok(marker) => Some(marker),
            Err(e) => {
                tracing::warn!(marker = %path.display(), error = %e, "the restore marker does not read: ignored");
                None
            }
        }
    }

    /// Written whole or not at all: a temporary file, fsynced, renamed, the folder fsynced.
    fn write(&self, path: &Path, parent: &Path) -> Result<(), Failure> {
        use std::io::Write;
        let temporary = PathBuf::from(format!("{}.tmp", path.display()));
        let text = serde_json::to_string_pretty(self).expect("a marker serialises");
        let written = std::fs::File::create(&temporary)
            .and_then(|mut f| f.write_all(text.as_bytes()).and_then(|()| f.sync_all()))
            .and_then(|()| std::fs::rename(&temporary, path))
            .and_then(|()| sync_dir(parent));
        written.map_err(|e| io_failure(&format!("cannot write the marker {}", path.display()), &e))
    }
}

/// Permission and read-only trouble is bad input; anything else may pass on retry.
fn io_failure(what: &str, e: &std::io::Error) -> Failure {
    let message = format!("{what}: {e}");
    if is_not_writable(e) { Failure::bad_input(message) } else { Failure::retryable(message) }
}

/// Restores the member's data; stops at once on a stop (the tool is killed, the old data stays
/// moved aside, the next run restores again).
pub(crate) async fn run_restore(restore: &Restore, stop: &StopSignal) -> JobResult {
    let clock = RunClock::start();
    let mut report = RestoreMemberReport {
        member: restore.flags.name.clone(),
        data_dir: restore.layout.data.display().to_string(),
        object: restore.object.clone(),
        initial_cluster_token: restore.flags.initial_cluster_token.clone(),
        ..RestoreMemberReport::default()
    };
    let outcome = tokio::select! {
        outcome = restore_member(restore, &mut report) => outcome,
        stop = stop.requested() => Err(stop.failure(
            "the restore was abandoned; the old data stays moved aside and the next run restores again",
        )),
    };
    let failure = outcome.err();
    let mut result = clock.finish(Report::RestoreMember(report.clone()), Outcome::Succeeded, failure);
    if result.outcome == Outcome::Failed {
        result.stopped_by = stop.get().map(|s| s.signal.to_owned());
    }
    if result.message.is_none() {
        let old = match &report.old_data_moved_to {
            Some(old) => format!("the old data kept in {old}"),
            None => "there was no old data".to_owned(),
        };
        let done = if report.already_restored { "already restored by an earlier run" } else { "restored" };
        result.message = Some(format!(
            "member {} {done} from {} (revision {}, sha256 {}) into {} with cluster token {}; {old}",
            report.member,
            report.object,
            report.revision.map_or_else(|| "unknown".to_owned(), |r| r.to_string()),
            report.sha256.as_deref().unwrap_or_default(),
            report.data_dir,
            report.initial_cluster_token,
        ));
    }
    result
}

async fn restore_member(restore: &Restore, report: &mut RestoreMemberReport) -> Result<(), Failure> {
    let layout = &restore.layout;
    let _lock = VolumeLock::acquire(layout)?;
    if let Some(marker) = finished(restore)? {
        report.sha256 = Some(marker.sha256.clone());
        report.revision = marker.revision;
        report.old_data_moved_to = marker.old_data_moved_to.clone();
        report.already_restored = marker.state == MarkerState::Done;
        if marker.state == MarkerState::Pending {
            tracing::info!(data = %layout.data.display(), "an earlier run renamed the restored data into place; recording it");
            Marker { state: MarkerState::Done, ..marker }.write(&layout.marker, &layout.parent)?;
        } else {
            tracing::info!(data = %layout.data.display(), "already restored with this cluster token: nothing to do");
        }
        return Ok(());
    }
    // First, so that it is removed last.
    let work = WorkDir::create(&restore.scratch, "restore-member")?;
    tracing::info!(object = %restore.object, "fetching the snapshot");
    let fetched =
        etcd_tools::fetch(&restore.store, Some(&restore.object), None, work.path(), restore.key.as_ref())
            .await?;
    etcd_tools::check_sha256(&fetched, restore.expect_sha256.as_deref())?;
    report.sha256 = Some(fetched.checked.sha256.clone());
    report.stored = fetched.checked.content.as_ref().map(Encoded::stored_as).unwrap_or_default();
    report.revision = fetched.checked.revision;

    let old = move_old_aside(layout)?;
    report.old_data_moved_to = old.as_ref().map(|p| p.display().to_string());
    restore_into_place(restore, &fetched, &work, report).await.map_err(|failure| Failure {
        message: format!("{}; {}", failure.message, how_to_go_on(layout, old.as_deref())),
        ..failure
    })
}

/// One run at a time on a member's volume (a Job retried while its first pod still runs): an
/// exclusive `flock` on the folder that holds the data folder (the volume's mount point), held
/// until the run ends; the kernel releases it when the process dies. Nothing is written for it.
struct VolumeLock {
    _folder: std::fs::File,
}

impl VolumeLock {
    fn acquire(layout: &Layout) -> Result<Self, Failure> {
        use std::os::fd::AsRawFd;
        let folder = std::fs::File::open(&layout.parent)
            .map_err(|e| io_failure(&format!("cannot open {} to lock it", layout.parent.display()), &e))?;
        // SAFETY: a valid open descriptor; flock only takes a lock on it.
        if unsafe { libc::flock(folder.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
            return Ok(Self { _folder: folder });
        }
        let e = std::io::Error::last_os_error();
        if e.kind() == std::io::ErrorKind::WouldBlock {
            return Err(Failure::retryable(format!(
                "another restore is running on the volume of {} (it holds the lock on {}): this run \
                 changed nothing; run it again once that one has ended",
                layout.data.display(),
                layout.parent.display()
            )));
        }
        Err(io_failure(&format!("cannot lock {}", layout.parent.display()), &e))
    }
}

/// What a person can do when a restore stopped after the old data was moved aside.
fn how_to_go_on(layout: &Layout, old: Option<&Path>) -> String {
    match old {
        Some(old) => format!(
            "the member's old data is kept in {}: run the restore again to finish it, or rename {} \
             back to {} (after removing {} if it is there) to go back",
            old.display(),
            old.display(),
            layout.data.display(),
            layout.partial.display()
        ),
        None => "there was no old data; run the restore again to finish it".to_owned(),
    }
}

/// Restores into the temporary folder, then renames it into place with the marker around it.
async fn restore_into_place(
    restore: &Restore,
    fetched: &etcd_tools::Fetched,
    work: &WorkDir,
    report: &RestoreMemberReport,
) -> Result<(), Failure> {
    let layout = &restore.layout;
    if exists(&layout.partial) {
        tracing::info!(partial = %layout.partial.display(), "removing what a killed restore left");
        std::fs::remove_dir_all(&layout.partial)
            .map_err(|e| io_failure(&format!("cannot remove {}", layout.partial.display()), &e))?;
    }
    tracing::info!(tool = %restore.tool, into = %layout.partial.display(), "restoring the member's data");
    etcd_tools::restore(
        &restore.tool,
        &fetched.path,
        &layout.partial,
        &restore.flags,
        &work.path().join("restore.log"),
        etcd_tools::restore_timeout(fetched.checked.content_size()),
    )
    .await?;
    etcd_tools::sync_tree(&layout.partial)
        .map_err(|e| io_failure(&format!("cannot fsync {}", layout.partial.display()), &e))?;
    let mut marker = Marker {
        state: MarkerState::Pending,
        name: restore.flags.name.clone(),
        initial_cluster_token: restore.flags.initial_cluster_token.clone(),
        object: restore.object.clone(),
        sha256: fetched.checked.sha256.clone(),
        revision: fetched.checked.revision,
        old_data_moved_to: report.old_data_moved_to.clone(),
    };
    marker.write(&layout.marker, &layout.parent)?;
    std::fs::rename(&layout.partial, &layout.data).and_then(|()| sync_dir(&layout.parent)).map_err(|e| {
        io_failure(&format!("cannot rename {} to {}", layout.partial.display(), layout.data.display()), &e)
    })?;
    marker.state = MarkerState::Done;
    marker.write(&layout.marker, &layout.parent)?;
    tracing::info!(data = %layout.data.display(), "restored");
    Ok(())
}

/// The marker of a restore with this token that reached its rename: done, or pending with the
/// restored folder in place. `None` when there is none (or it is another token's, or the data
/// folder is not the restored one). A restore with this token from another snapshot is refused.
fn finished(restore: &Restore) -> Result<Option<Marker>, Failure> {
    let layout = &restore.layout;
    let Some(marker) = Marker::read(&layout.marker) else { return Ok(None) };
    if marker.initial_cluster_token != restore.flags.initial_cluster_token
        || marker.name != restore.flags.name
    {
        return Ok(None);
    }
    let same = match &restore.expect_sha256 {
        Some(sha) => marker.sha256 == *sha,
        None => marker.object == restore.object,
    };
    if !same {
        return Err(Failure::bad_input(format!(
            "{} was restored with cluster token {} from {} (sha256 {}), not from {}: a restore from \
             another snapshot needs a new cluster token",
            layout.data.display(),
            marker.initial_cluster_token,
            marker.object,
            marker.sha256,
            restore.object
        )));
    }
    // The rename happened exactly when the restored folder is gone from its temporary name.
    let in_place = std::fs::metadata(&layout.data).is_ok_and(|m| m.is_dir()) && !exists(&layout.partial);
    Ok(in_place.then_some(marker))
}

/// Moves the data folder aside, unless an earlier attempt did; returns where the old data is.
/// Refuses when both are there: the data folder is then neither the old data nor this restore.
fn move_old_aside(layout: &Layout) -> Result<Option<PathBuf>, Failure> {
    match (exists(&layout.old), exists(&layout.data)) {
        (true, false) => {
            tracing::info!(old = %layout.old.display(), "the old data was moved aside by an earlier run; kept as it is");
            Ok(Some(layout.old.clone()))
        }
        (true, true) => Err(Failure::bad_input(format!(
            "both {} and {} are there: the old data was moved aside by an earlier run, and something \
             made a new data folder since (was the member started?). Nothing was changed; move {} \
             away by hand and run again",
            layout.data.display(),
            layout.old.display(),
            layout.data.display()
        ))),
        (false, true) => {
            tracing::info!(from = %layout.data.display(), to = %layout.old.display(), "moving the old data aside");
            std::fs::rename(&layout.data, &layout.old).and_then(|()| sync_dir(&layout.parent)).map_err(
                |e| {
                    io_failure(
                        &format!("cannot move {} to {}", layout.data.display(), layout.old.display()),
                        &e,
                    )
                },
            )?;
            Ok(Some(layout.old.clone()))
        }
        (false, false) => Ok(None),
    }
}

/// `groundskeeper-job restore-member`: runs, reports, and returns the exit code.
pub fn main(args: RestoreMemberArgs) -> i32 {
    let clock = RunClock::start();
    let prepared = (|| {
        let grace =
            run::check_wait("--grace-period-seconds", Duration::from_secs(args.grace_period_seconds))?;
        Ok::<_, Failure>((args.restore()?, grace))
    })();
    let result = match prepared {
        Ok((restore, grace)) => runtime().block_on(async {
            let stop = StopSignal::listen_or_warn(grace);
            run_restore(&restore, &stop).await
        }),
        Err(failure) => clock.finish(
            Report::RestoreMember(RestoreMemberReport {
                member: args.name.clone(),
                data_dir: args.data_dir.display().to_string(),
                object: args.object.clone(),
                initial_cluster_token: args.initial_cluster_token.clone(),
                ..RestoreMemberReport::default()
            }),
            Outcome::Failed,
            Some(failure),
        ),
    };
    if let Some(error) = &result.error {
        tracing::error!("member not restored: {}", error.message);
    }
    run::report(&result, &args.result_file);
    run::exit_code(&result)
}

#[cfg(test)]
mod tests {
    use super::*;
    use groundskeeper_protocol::result::ErrorKind;

    fn flags(name: &str, cluster: &str, peers: &str) -> RestoreFlags {
        RestoreFlags {
            name: name.into(),
            initial_cluster: cluster.into(),
            initial_advertise_peer_urls: peers.into(),
            initial_cluster_token: "t".into(),
        }
    }

    #[test]
    fn the_members_flags_must_agree() {
        let cluster = "a=http://a:2380,b=http://b:2380,b=http://b2:2380";
        assert!(check_membership(&flags("a", cluster, "http://a:2380")).is_ok());
        assert!(check_membership(&flags("b", cluster, "http://b2:2380,http://b:2380")).is_ok());
        for (name, cluster, peers, says) in [
            ("c", cluster, "http://c:2380", "does not name member"),
            ("a", cluster, "http://b:2380", "is not what --initial-cluster gives"),
            ("a", "a:2380", "http://a:2380", "is not NAME=PEER_URL"),
            ("", cluster, "http://a:2380", "must not be empty"),
        ] {
            let failure = check_membership(&flags(name, cluster, peers)).unwrap_err();
            assert_eq!(failure.kind, ErrorKind::BadInput);
            assert!(failure.message.contains(says), "{name} {cluster} {peers}: {}", failure.message);
        }
    }

    #[test]
    fn the_layout_is_beside_the_data_folder() {
        let volume = tempfile::tempdir().unwrap();
        let data = volume.path().join("data");
        let layout = Layout::new(&data, ".pre-restore-t1").unwrap();
        assert_eq!(layout.old, volume.path().join("data.pre-restore-t1"));
        assert_eq!(layout.partial, volume.path().join("data.partial-restore"));
        assert_eq!(layout.marker, volume.path().join("data.groundskeeper-restore.json"));
        assert_eq!(layout.parent, volume.path());
        std::fs::write(&data, "a file").unwrap();
        for (dir, suffix, says) in [
            (data.clone(), ".old", "is not a folder"),
            (volume.path().join("missing/data"), ".old", "its folder"),
            (PathBuf::from("data"), ".old", "absolute"),
            (volume.path().join("d"), "", "--keep-old-suffix"),
            (volume.path().join("d"), "a/b", "--keep-old-suffix"),
            (volume.path().join("d"), PARTIAL_SUFFIX, "--keep-old-suffix"),
        ] {
            let failure = Layout::new(&dir, suffix).unwrap_err();
            assert_eq!(failure.kind, ErrorKind::BadInput);
            assert!(failure.message.contains(says), "{dir:?} {suffix}: {}", failure.message);
        }
    }

    #[test]
    fn old_data_is_moved_once_and_never_over_something_new() {
        let volume = tempfile::tempdir().unwrap();
        let data = volume.path().join("data");
        std::fs::create_dir(&data).unwrap();
        std::fs::write(data.join("db"), "old").unwrap();
        let layout = Layout::new(&data, ".old").unwrap();
        assert_eq!(move_old_aside(&layout).unwrap(), Some(layout.old.clone()));
        assert_eq!(std::fs::read_to_string(layout.old.join("db")).unwrap(), "old");
        // Again: kept where it is.
        assert_eq!(move_old_aside(&layout).unwrap(), Some(layout.old.clone()));
        // A new data folder beside it: refused, both left.
        std::fs::create_dir(&data).unwrap();
        let failure = move_old_aside(&layout).unwrap_err();
        assert_eq!(failure.kind, ErrorKind::BadInput);
        assert!(data.exists() && layout.old.join("db").exists());
        // Nothing at all: nothing to keep.
        let empty = Layout::new(&volume.path().join("other"), ".old").unwrap();
        assert_eq!(move_old_aside(&empty).unwrap(), None);
    }
}
