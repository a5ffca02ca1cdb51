//! `groundskeeper-job snapshot` and `snapshot verify` against real etcd 3.4 and 3.5: a snapshot
//! taken while a writer keeps writing is restored with etcd's own tool (`etcdctl snapshot
//! restore` for 3.4, `etcdutl snapshot restore` for 3.5) into a fresh member, which holds every
//! key written up to the snapshot's revision and none after it. A missing etcd skips a test, a
//! missing restore tool skips its restore part, each with a message (under `CI=true` both fail).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use etcd_client::GetOptions;
use groundskeeper_e2e::etcd_cluster::{
    ClusterOptions, EtcdCluster, EtcdVersion, RestoreFrom, etcd_or_skip, restore_tool_or_skip,
};
use groundskeeper_e2e::etcd_writes::{WritePlan, Writes};
use groundskeeper_protocol::result::SnapshotReport;
use groundskeeper_protocol::{JobResult, Outcome, Report, exit};

const BIN: &str = env!("CARGO_BIN_EXE_groundskeeper-job");

async fn cluster(version: EtcdVersion, options: ClusterOptions) -> Option<(EtcdCluster, PathBuf)> {
    let binary = etcd_or_skip(version)?;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cluster = EtcdCluster::start(&binary, options).await.expect("the etcd cluster starts");
    Some((cluster, binary))
}

/// Runs the binary (without blocking the runtime, so a writer task keeps writing); returns its
/// exit code and the result it wrote.
async fn run(args: &[String], result_file: &Path) -> (i32, JobResult) {
    let _ = std::fs::remove_file(result_file);
    let out = tokio::process::Command::new(BIN)
        .args(args)
        .arg("--result-file")
        .arg(result_file)
        .output()
        .await
        .expect("groundskeeper-job runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("{stderr}");
    let json = std::fs::read_to_string(result_file)
        .unwrap_or_else(|e| panic!("no result file ({e}); stderr:\n{stderr}"));
    let result = JobResult::parse(&json).unwrap_or_else(|e| panic!("bad result ({e}): {json}"));
    (out.status.code().expect("exited"), result)
}

fn snapshot_args(cluster: &EtcdCluster, output: &Path) -> Vec<String> {
    let mut args = vec![
        "snapshot".to_owned(),
        "--endpoints".into(),
        cluster.endpoints_flag(),
        "--output".into(),
        output.display().to_string(),
    ];
    args.extend(cluster.tls_flags());
    args
}

/// `snapshot verify FILE`: exit code, and the JSON it printed.
fn verify(file: &Path) -> (i32, JobResult, String) {
    let out = std::process::Command::new(BIN)
        .args(["snapshot", "verify"])
        .arg(file)
        .output()
        .expect("groundskeeper-job runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let result = JobResult::parse(&stdout).unwrap_or_else(|e| panic!("bad result ({e}): {stdout}"));
    (out.status.code().expect("exited"), result, stderr)
}

fn snapshot_report(result: &JobResult) -> &SnapshotReport {
    match &result.report {
        Report::Snapshot(report) => report,
        other => panic!("not a snapshot report: {other:?}"),
    }
}

/// Names in a folder, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// What etcd's own tool says of a snapshot file (`snapshot status -w json`).
fn tool_status(tool: &Path, file: &Path) -> serde_json::Value {
    let out = std::process::Command::new(tool)
        .args(["snapshot", "status", "-w", "json"])
        .arg(file)
        .env("ETCDCTL_API", "3")
        .output()
        .expect("the restore tool runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("status JSON")
}

groundskeeper_e2e::for_each_etcd_version!(
    a_snapshot_under_writes_restores_every_key_up_to_its_revision,
    verify_accepts_a_good_snapshot_and_refuses_damaged_copies,
    a_lone_member_over_tls_is_snapshotted_as_the_leader,
    a_stopped_run_leaves_no_file,
    links_are_replaced_never_written_through,
);

async fn a_snapshot_under_writes_restores_every_key_up_to_its_revision(version: EtcdVersion) {
    let Some((cluster, etcd)) = cluster(version, ClusterOptions::default()).await else {
        return;
    };
    // Some bulk, so the stream takes more than one message.
    cluster.fill(1_000_000).await.expect("fill");
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("main.db");
    let writes = Writes::start(cluster.client(None).await.expect("a client"), WritePlan::distinct_keys());
    tokio::time::sleep(Duration::from_millis(300)).await;

    let leader_before = cluster.leader().await.unwrap();
    let (code, result) = run(&snapshot_args(&cluster, &output), &dir.path().join("result.json")).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let written = writes.stop().await.puts;
    assert_eq!(code, exit::SUCCESS, "{result:?}");
    assert_eq!(result.outcome, Outcome::Succeeded);
    let report = snapshot_report(&result).clone();
    eprintln!("{}", serde_json::to_string_pretty(&result).unwrap());

    // From a follower, with sizes, hashes and a revision the file agrees with.
    assert!(!report.from_leader, "{report:?}");
    assert_ne!(report.member.as_deref(), Some(leader_before.name.as_str()));
    let bytes = std::fs::read(&output).unwrap();
    assert_eq!(report.size_bytes, bytes.len() as u64);
    assert!(report.size_bytes > 1_000_000);
    assert!((report.size_mib - report.size_bytes as f64 / 1048576.0).abs() < 0.01);
    use sha2::Digest;
    let (db, trailer) = bytes.split_at(bytes.len() - 32);
    assert_eq!(sha2::Sha256::digest(db).as_slice(), trailer, "etcd's trailer");
    assert_eq!(report.sha256.as_deref(), Some(hex(&sha2::Sha256::digest(&bytes)).as_str()));
    assert_eq!(report.db_sha256.as_deref(), Some(hex(trailer).as_str()));
    let revision = report.revision.expect("the snapshot's revision");
    assert!(result.duration_ms >= report.stream_duration_ms);
    // Only the snapshot is left in its folder (and the result file): no temporary file.
    assert_eq!(listing(dir.path()), ["main.db", "result.json"]);
    // The writer wrote on both sides of the snapshot.
    let (before, after): (Vec<_>, Vec<_>) = written.iter().partition(|(_, r)| *r <= revision);
    assert!(!before.is_empty() && !after.is_empty(), "{} before, {} after", before.len(), after.len());

    let Some(tool) = restore_tool_or_skip(version, &etcd) else {
        return;
    };
    // etcd's own tool reads the same revision and database size.
    let status = tool_status(&tool, &output);
    assert_eq!(status["revision"], revision, "{status}");
    assert_eq!(status["totalSize"], report.size_bytes - 32, "{status}");
    drop(cluster);

    let restored = EtcdCluster::start(
        &etcd,
        ClusterOptions {
            members: 1,
            restore_from: Some(RestoreFrom { tool, snapshot: output.clone() }),
            ..ClusterOptions::default()
        },
    )
    .await
    .expect("a member starts on the restored data");
    let mut client = restored.client(None).await.unwrap();
    let got = client.get("w/", Some(GetOptions::new().with_prefix())).await.unwrap();
    let keys: Vec<(String, String)> = got
        .kvs()
        .iter()
        .map(|kv| (kv.key_str().unwrap().to_owned(), kv.value_str().unwrap().to_owned()))
        .collect();
    let want: Vec<(String, String)> = before.iter().map(|(k, _)| (k.clone(), k.clone())).collect();
    assert_eq!(keys, want, "exactly the keys written up to revision {revision}");
    let live = client.get("live/", Some(GetOptions::new().with_prefix().with_count_only())).await.unwrap();
    assert_eq!(live.count(), 8, "the bulk written before");
    let state = restored.state(0).await.unwrap();
    assert_eq!(state.revision, revision, "the restored member starts at the snapshot's revision");
}

async fn verify_accepts_a_good_snapshot_and_refuses_damaged_copies(version: EtcdVersion) {
    let Some((cluster, etcd)) = cluster(version, ClusterOptions::default()).await else {
        return;
    };
    cluster.fill(300_000).await.expect("fill");
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.db");
    let (code, result) = run(&snapshot_args(&cluster, &good), &dir.path().join("result.json")).await;
    assert_eq!(code, exit::SUCCESS, "{result:?}");
    let taken = snapshot_report(&result).clone();
    drop(cluster);

    let (code, checked, stderr) = verify(&good);
    assert_eq!(code, exit::SUCCESS, "{checked:?} {stderr}");
    let report = snapshot_report(&checked);
    assert!(report.verify_only);
    assert_eq!(report.size_bytes, taken.size_bytes);
    assert_eq!(report.sha256, taken.sha256);
    assert_eq!(report.revision, taken.revision);
    assert!(checked.message.as_deref().unwrap().contains("trailer matches"));

    let bytes = std::fs::read(&good).unwrap();
    let truncated = dir.path().join("truncated.db");
    std::fs::write(&truncated, &bytes[..bytes.len() / 2]).unwrap();
    let flipped = dir.path().join("flipped.db");
    let mut damaged = bytes.clone();
    damaged[bytes.len() / 3] ^= 0x01;
    std::fs::write(&flipped, &damaged).unwrap();
    // Cut exactly where a snapshot's size could end (512 × n + 32): only the hash tells.
    let cut_to_size = dir.path().join("cut.db");
    std::fs::write(&cut_to_size, &bytes[..bytes.len() - 4096]).unwrap();
    for (file, says) in [
        (&truncated, "not the size of a snapshot"),
        (&flipped, "does not match"),
        (&cut_to_size, "does not match"),
    ] {
        let (code, result, stderr) = verify(file);
        assert_eq!(code, exit::BAD_INPUT, "{file:?}: {result:?}");
        assert_eq!(result.outcome, Outcome::Failed);
        let message = result.message.unwrap();
        assert!(message.contains(says), "{file:?}: {message}");
        assert!(stderr.contains(says), "{file:?}: the message reaches stderr too: {stderr}");
    }
    let (code, _, _) = verify(&dir.path().join("missing.db"));
    assert_eq!(code, exit::BAD_INPUT);

    // etcd's own restore refuses the same copies and takes the good one.
    let Some(tool) = restore_tool_or_skip(version, &etcd) else {
        return;
    };
    for (file, ok) in [(&good, true), (&truncated, false), (&flipped, false), (&cut_to_size, false)] {
        let data = dir.path().join(format!("restored-{}", file.file_name().unwrap().to_string_lossy()));
        let out = std::process::Command::new(&tool)
            .args(["snapshot", "restore"])
            .arg(file)
            .arg("--data-dir")
            .arg(&data)
            .env("ETCDCTL_API", "3")
            .stdout(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(
            out.status.success(),
            ok,
            "{} restoring {file:?}: {}",
            tool.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        let _ = std::fs::remove_dir_all(&data);
    }
}

async fn a_lone_member_over_tls_is_snapshotted_as_the_leader(version: EtcdVersion) {
    let options = ClusterOptions { members: 1, client_tls: true, ..ClusterOptions::default() };
    let Some((cluster, _)) = cluster(version, options).await else {
        return;
    };
    cluster.client(None).await.unwrap().put("k", "v", None).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("tls.db");
    let (code, result) = run(&snapshot_args(&cluster, &output), &dir.path().join("result.json")).await;
    assert_eq!(code, exit::SUCCESS, "{result:?}");
    let report = snapshot_report(&result);
    assert!(report.from_leader, "no follower to take it from: {report:?}");
    assert_eq!(report.member.as_deref(), Some("m0"));
    assert!(result.message.as_deref().unwrap().contains("the leader"));
    let (code, _, stderr) = verify(&output);
    assert_eq!(code, exit::SUCCESS, "{stderr}");

    // Without the CA, https endpoints are bad input and nothing is written.
    let args: Vec<String> =
        snapshot_args(&cluster, &dir.path().join("other.db")).into_iter().take(5).collect();
    let (code, result) = run(&args, &dir.path().join("result.json")).await;
    assert_eq!(code, exit::BAD_INPUT, "{result:?}");
    assert!(!dir.path().join("other.db").exists());
}

/// SIGTERM while the stream waits on a frozen member: the run ends at once, retryable, and
/// neither the snapshot nor its temporary file is left.
async fn a_stopped_run_leaves_no_file(version: EtcdVersion) {
    let Some((cluster, _)) = cluster(version, ClusterOptions::default()).await else {
        return;
    };
    cluster.fill(4_000_000).await.expect("fill");
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("stopped.db");
    let partial = dir.path().join(".stopped.db.partial");
    let result_file = dir.path().join("result.json");
    let mut child = std::process::Command::new(BIN)
        .args(snapshot_args(&cluster, &output))
        .arg("--result-file")
        .arg(&result_file)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    // The temporary file appears once a member is chosen; freeze every member then.
    let deadline = Instant::now() + Duration::from_secs(20);
    while !partial.exists() {
        assert!(Instant::now() < deadline, "no temporary file appeared");
        assert!(child.try_wait().unwrap().is_none(), "the run ended before it was stopped");
        std::thread::sleep(Duration::from_millis(1));
    }
    for i in 0..cluster.len() {
        cluster.pause(i);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(child.try_wait().unwrap().is_none(), "the run waits on the frozen member");
    assert!(!output.exists());
    // SAFETY: kill(2) on the pid of a child this test started and has not reaped.
    unsafe {
        libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
    }
    let stopped = Instant::now();
    let status = child.wait().unwrap();
    for i in 0..cluster.len() {
        cluster.resume(i);
    }
    assert!(stopped.elapsed() < Duration::from_secs(5), "{:?}", stopped.elapsed());
    assert_eq!(status.code(), Some(exit::RETRYABLE));
    let result = JobResult::parse(&std::fs::read_to_string(&result_file).unwrap()).unwrap();
    assert_eq!(result.stopped_by.as_deref(), Some("SIGTERM"));
    assert!(result.message.unwrap().contains("temporary file removed"));
    assert_eq!(listing(dir.path()), ["result.json"], "no snapshot, no temporary file");
}

/// A dead endpoint: retryable, and no file at all. A folder that does not exist: bad input.
#[tokio::test]
async fn a_dead_endpoint_or_a_missing_folder_leaves_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let closed = groundskeeper_e2e::net::ClosedPort::new();
    let endpoint = closed.url();
    let output = dir.path().join("dead.db");
    let result_file = dir.path().join("result.json");
    let args = |output: &Path| {
        ["snapshot", "--endpoints", endpoint.as_str(), "--output"]
            .map(str::to_owned)
            .into_iter()
            .chain([output.display().to_string()])
            .collect::<Vec<_>>()
    };
    let (code, result) = run(&args(&output), &result_file).await;
    assert_eq!(code, exit::RETRYABLE, "{result:?}");
    assert!(result.message.unwrap().contains("no etcd endpoint answered"));
    assert_eq!(listing(dir.path()), ["result.json"]);

    let (code, result) = run(&args(&dir.path().join("missing/dead.db")), &result_file).await;
    assert_eq!(code, exit::BAD_INPUT, "{result:?}");
    assert!(result.message.unwrap().contains("--output"));
    let (code, _) = run(&args(dir.path()), &result_file).await;
    assert_eq!(code, exit::BAD_INPUT, "a folder as --output");
    assert_eq!(listing(dir.path()), ["result.json"]);
}

/// `--output` naming a FIFO, a socket, a device node (where this user may make one), a folder, or
/// a symbolic link leading out of its folder: exit 2 before anything is asked of etcd, and the
/// file is left as it was. All made in a scratch folder, never the system's own.
#[tokio::test]
async fn special_files_and_links_out_of_the_folder_are_refused() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().join("snapshots");
    std::fs::create_dir(&dir).unwrap();
    let outside = scratch.path().join("outside.txt");
    std::fs::write(&outside, "not a snapshot").unwrap();
    let fifo = dir.join("fifo.db");
    make_node(&fifo, libc::S_IFIFO | 0o600, 0).expect("mkfifo");
    let _socket = std::os::unix::net::UnixListener::bind(dir.join("socket.db")).unwrap();
    std::os::unix::fs::symlink(&outside, dir.join("out.db")).unwrap();
    std::os::unix::fs::symlink("../outside.txt", dir.join("relative-out.db")).unwrap();
    std::os::unix::fs::symlink(&fifo, dir.join("to-fifo.db")).unwrap();
    let mut cases = vec![
        ("fifo.db", "is a FIFO, not a regular file"),
        ("socket.db", "is a socket, not a regular file"),
        ("out.db", "is a symbolic link to"),
        ("relative-out.db", "outside its folder"),
        ("to-fifo.db", "which is a FIFO"),
    ];
    // A device node like /dev/null's (1, 3), made here: only root may.
    match make_node(&dir.join("null.db"), libc::S_IFCHR | 0o600, libc::makedev(1, 3)) {
        Ok(()) => cases.push(("null.db", "is a character device, not a regular file")),
        Err(e) => eprintln!("skipped: the device-node case (mknod needs root: {e})"),
    }
    let result_file = scratch.path().join("result.json");
    for (name, why) in cases {
        let output = dir.join(name);
        let before = std::fs::symlink_metadata(&output).unwrap().file_type();
        let args = ["snapshot", "--endpoints", "http://127.0.0.1:1", "--output"]
            .map(str::to_owned)
            .into_iter()
            .chain([output.display().to_string()])
            .collect::<Vec<_>>();
        let (code, result) = run(&args, &result_file).await;
        assert_eq!(code, exit::BAD_INPUT, "{name}: {result:?}");
        let message = result.message.unwrap();
        assert!(message.contains("--output") && message.contains(why), "{name}: {message}");
        assert_eq!(std::fs::symlink_metadata(&output).unwrap().file_type(), before, "{name} left as it was");
    }
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "not a snapshot");
    assert!(!listing(&dir).iter().any(|n| n.ends_with(".partial")), "{:?}", listing(&dir));
}

/// `snapshot verify` on a FIFO refuses at once (opening it would wait for a writer forever).
#[tokio::test]
async fn verify_refuses_what_is_not_a_regular_file() {
    let scratch = tempfile::tempdir().unwrap();
    let fifo = scratch.path().join("fifo.db");
    make_node(&fifo, libc::S_IFIFO | 0o600, 0).expect("mkfifo");
    let checked =
        tokio::time::timeout(Duration::from_secs(60), tokio::task::spawn_blocking(move || verify(&fifo)))
            .await
            .expect("verify answers instead of waiting on the FIFO")
            .unwrap();
    let (code, result, _) = checked;
    assert_eq!(code, exit::BAD_INPUT, "{result:?}");
    assert!(result.message.unwrap().contains("is a FIFO, not a regular file"));
}

/// mknod(2) in a scratch folder.
fn make_node(path: &Path, mode: libc::mode_t, device: libc::dev_t) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path; mknod only creates the node.
    match unsafe { libc::mknod(path.as_ptr(), mode, device) } {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

/// A symbolic link at the output's name, staying in the folder, is replaced by the snapshot (the
/// file it pointed to is untouched); a link planted at the temporary file's name is removed, not
/// written through. Then an earlier regular snapshot is replaced, atomically, as before.
async fn links_are_replaced_never_written_through(version: EtcdVersion) {
    let Some((cluster, _)) = cluster(version, ClusterOptions::default()).await else {
        return;
    };
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().join("snapshots");
    std::fs::create_dir(&dir).unwrap();
    let outside = scratch.path().join("outside.txt");
    std::fs::write(&outside, "not a snapshot").unwrap();
    let earlier = dir.join("earlier.db");
    std::fs::write(&earlier, "an earlier file").unwrap();
    let output = dir.join("latest.db");
    std::os::unix::fs::symlink("earlier.db", &output).unwrap();
    std::os::unix::fs::symlink(&outside, dir.join(".latest.db.partial")).unwrap();
    let result_file = scratch.path().join("result.json");

    for round in ["over the link", "over the earlier snapshot"] {
        let (code, result) = run(&snapshot_args(&cluster, &output), &result_file).await;
        assert_eq!(code, exit::SUCCESS, "{round}: {result:?}");
        assert!(std::fs::symlink_metadata(&output).unwrap().is_file(), "{round}: a regular file now");
        let (code, _, _) = verify(&output);
        assert_eq!(code, exit::SUCCESS, "{round}: the snapshot checks");
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "not a snapshot", "{round}");
        assert_eq!(std::fs::read_to_string(&earlier).unwrap(), "an earlier file", "{round}");
        assert_eq!(listing(&dir), ["earlier.db", "latest.db"], "{round}");
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
