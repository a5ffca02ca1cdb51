//! `groundskeeper-job snapshot-prove` against real etcd 3.4 and 3.5 snapshots: a snapshot of a
//! throwaway cluster holding known keys is restored into a throwaway member (etcdctl 3.4's or
//! etcdutl 3.5's `snapshot restore`, then that version's etcd) and proven: the right revision and
//! key count. Damaged copies, a wrong checksum and wrong expectations are refused (exit 2); a
//! stopped proof leaves nothing in the scratch folder and no process behind; a 3.4 snapshot is
//! proven with 3.5's etcdutl and etcd (what the Job image carries). A missing etcd or restore
//! tool skips a test, saying so (under `CI=true` it fails).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use etcd_client::GetOptions;
use groundskeeper_e2e::etcd_cluster::{
    ClusterOptions, EtcdCluster, EtcdVersion, binary_version, etcd_or_skip, restore_tool_or_skip,
};
use groundskeeper_protocol::result::{ErrorKind, ProveReport, SnapshotReport};
use groundskeeper_protocol::{JobResult, Outcome, Report, exit};

pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_groundskeeper-job");
pub(crate) const TEMPLATE: &str = "{cluster}-{time}.db";

/// The etcd binary of a version and the tool that restores its snapshots.
#[derive(Debug, Clone)]
pub(crate) struct Tools {
    pub etcd: PathBuf,
    pub restore: PathBuf,
}

impl Tools {
    /// `--etcd E --etcdutl T`.
    pub fn flags(&self) -> Vec<String> {
        vec!["--etcd".into(), path(&self.etcd), "--etcdutl".into(), path(&self.restore)]
    }
}

/// Both binaries of `version`, or `None` after saying why the test is skipped.
pub(crate) fn tools_or_skip(version: EtcdVersion) -> Option<Tools> {
    let etcd = etcd_or_skip(version)?;
    let restore = restore_tool_or_skip(version, &etcd)?;
    Some(Tools { etcd, restore })
}

pub(crate) fn path(p: &Path) -> String {
    p.display().to_string()
}

pub(crate) fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| (*a).to_owned()).collect()
}

/// Runs the binary (without blocking the runtime); its exit code, result and stderr.
pub(crate) async fn run(
    args: &[String],
    envs: &[(&str, &str)],
    result_file: &Path,
) -> (i32, JobResult, String) {
    let _ = std::fs::remove_file(result_file);
    let out = tokio::process::Command::new(BIN)
        .args(args)
        .arg("--result-file")
        .arg(result_file)
        .env_remove("GROUNDSKEEPER_ETCD")
        .env_remove("GROUNDSKEEPER_ETCDUTL")
        .envs(envs.iter().copied())
        .output()
        .await
        .expect("groundskeeper-job runs");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let json = std::fs::read_to_string(result_file)
        .unwrap_or_else(|e| panic!("no result file ({e}); stderr:\n{stderr}"));
    let result = JobResult::parse(&json).unwrap_or_else(|e| panic!("bad result ({e}): {json}"));
    (out.status.code().expect("exited"), result, stderr)
}

/// A started cluster, or `None` when its etcd is missing.
pub(crate) async fn cluster(version: EtcdVersion, members: usize) -> Option<EtcdCluster> {
    let binary = etcd_or_skip(version)?;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let options = ClusterOptions { members, ..ClusterOptions::default() };
    Some(EtcdCluster::start(&binary, options).await.expect("the etcd cluster starts"))
}

/// Writes `k/000`..`k/{n-1}` (value = key), overwrites the first five and deletes `k/001`:
/// `n - 1` keys, and history besides. Returns the number of keys the cluster holds.
pub(crate) async fn write_known_keys(cluster: &EtcdCluster, n: usize) -> i64 {
    let mut client = cluster.client(None).await.unwrap();
    for i in 0..n {
        let key = format!("k/{i:03}");
        client.put(key.as_str(), key.as_str(), None).await.unwrap();
    }
    for i in 0..5.min(n) {
        let key = format!("k/{i:03}");
        client.put(key.as_str(), key.as_str(), None).await.unwrap();
    }
    client.delete("k/001", None).await.unwrap();
    let all = GetOptions::new().with_range(vec![0u8]).with_count_only();
    client.get(vec![0u8], Some(all)).await.unwrap().count()
}

/// Takes a snapshot with the runner's own `snapshot`; its report.
pub(crate) async fn snapshot(cluster: &EtcdCluster, output: &Path) -> SnapshotReport {
    let args = strings(&["snapshot", "--endpoints", &cluster.endpoints_flag(), "--output", &path(output)]);
    let result_file = output.with_extension("result.json");
    let (code, result, stderr) = run(&args, &[], &result_file).await;
    let _ = std::fs::remove_file(&result_file);
    assert_eq!(code, exit::SUCCESS, "{result:?}\n{stderr}");
    match result.report {
        Report::Snapshot(report) => report,
        other => panic!("not a snapshot report: {other:?}"),
    }
}

fn prove_report(result: &JobResult) -> &ProveReport {
    match &result.report {
        Report::SnapshotProve(report) => report,
        other => panic!("not a proof: {other:?}"),
    }
}

/// Names in a folder (hidden ones too), sorted.
pub(crate) fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// `snapshot-prove` of the folder's snapshots of cluster `main`, with `extra` flags.
fn prove_args(folder: &Path, scratch: &Path, tools: &Tools, extra: &[&str]) -> Vec<String> {
    let mut args = strings(&[
        "snapshot-prove",
        "--from",
        &path(folder),
        "--file-name-template",
        TEMPLATE,
        "--cluster",
        "main",
        "--scratch-dir",
        &path(scratch),
    ]);
    args.extend(tools.flags());
    args.extend(strings(extra));
    args
}

/// A snapshot folder with an older and a newer snapshot of `main` and a newer file of another
/// cluster; returns the folder, the newer snapshot's report and the keys it holds.
async fn folder_with_snapshots(cluster: &EtcdCluster, dir: &Path) -> (PathBuf, SnapshotReport, i64) {
    let folder = dir.join("snapshots");
    std::fs::create_dir(&folder).unwrap();
    cluster.client(None).await.unwrap().put("early", "1", None).await.unwrap();
    snapshot(cluster, &folder.join("main-20260101T000000Z.db")).await;
    let keys = write_known_keys(cluster, 50).await;
    let newest = snapshot(cluster, &folder.join("main-20260102T000000Z.db")).await;
    std::fs::write(folder.join("other-20260109T000000Z.db"), "another cluster's file").unwrap();
    (folder, newest, keys)
}

groundskeeper_e2e::for_each_etcd_version!(
    the_newest_snapshot_is_proven_with_its_revision_and_keys,
    damaged_snapshots_and_wrong_expectations_are_not_proven,
    a_snapshot_in_a_bucket_is_proven_by_its_recorded_metadata,
);

async fn the_newest_snapshot_is_proven_with_its_revision_and_keys(version: EtcdVersion) {
    let Some(tools) = tools_or_skip(version) else { return };
    let Some(cluster) = cluster(version, 3).await else { return };
    let dir = tempfile::tempdir().unwrap();
    let (folder, taken, keys) = folder_with_snapshots(&cluster, dir.path()).await;
    drop(cluster);
    assert_eq!(keys, 50, "49 k/ keys and `early`");
    let scratch = dir.path().join("scratch");
    std::fs::create_dir(&scratch).unwrap();
    let snapshot_file = folder.join("main-20260102T000000Z.db");
    let before = (
        std::fs::read(&snapshot_file).unwrap(),
        std::fs::metadata(&snapshot_file).unwrap().modified().unwrap(),
    );
    let result_file = dir.path().join("result.json");

    let keys_text = keys.to_string();
    let args = prove_args(&folder, &scratch, &tools, &["--expect-keys", &keys_text]);
    let started = Instant::now();
    let (code, result, stderr) = run(&args, &[], &result_file).await;
    eprintln!("{stderr}\n{}", serde_json::to_string_pretty(&result).unwrap());
    assert_eq!(code, exit::SUCCESS, "{result:?}");
    assert_eq!(result.outcome, Outcome::Succeeded);
    let report = prove_report(&result);
    eprintln!(
        "{version}: proof of {} bytes in {:?} (fetch {} ms, restore {} ms, start {} ms)",
        report.size_bytes,
        started.elapsed(),
        report.fetch_ms,
        report.restore_ms,
        report.start_ms
    );
    assert!(report.proven);
    assert_eq!(report.object, "main-20260102T000000Z.db", "the newest of main's snapshots");
    assert_eq!(report.path, path(&snapshot_file));
    assert_eq!(report.size_bytes, taken.size_bytes);
    assert_eq!(report.sha256, taken.sha256);
    assert_eq!(report.revision, taken.revision);
    assert_eq!(report.expected_revision, taken.revision);
    assert_eq!((report.keys, report.expected_keys), (Some(keys), Some(keys)));
    assert!(report.etcd_version.as_deref().unwrap().starts_with(version.prefix()), "{report:?}");
    assert!(result.message.as_deref().unwrap().contains("keys as recorded"), "{:?}", result.message);
    for step in [
        "fetching the snapshot",
        "restoring into a throwaway member",
        "starting the throwaway member",
        "checking what the member serves",
    ] {
        assert!(stderr.contains(step), "progress on stderr: {step}");
    }
    // Nothing left in the scratch folder, the snapshot read and never written.
    assert_eq!(listing(&scratch), Vec::<String>::new());
    let after = (
        std::fs::read(&snapshot_file).unwrap(),
        std::fs::metadata(&snapshot_file).unwrap().modified().unwrap(),
    );
    assert!(before == after, "the snapshot is left as it was");

    // No key count recorded (a folder has no metadata): proven, and the message says the count
    // was not compared. The tools found through the environment this time.
    let args: Vec<String> = prove_args(&folder, &scratch, &tools, &[]).into_iter().take(9).collect();
    let envs = [
        ("GROUNDSKEEPER_ETCD", tools.etcd.to_str().unwrap()),
        ("GROUNDSKEEPER_ETCDUTL", tools.restore.to_str().unwrap()),
    ];
    let (code, result, _) = run(&args, &envs, &result_file).await;
    assert_eq!(code, exit::SUCCESS, "{result:?}");
    let report = prove_report(&result);
    assert_eq!((report.keys, report.expected_keys), (Some(keys), None));
    assert!(
        result.message.as_deref().unwrap().contains("no count was recorded: not compared"),
        "{:?}",
        result.message
    );

    // A snapshot named explicitly: the older one, at its own revision, with one key.
    let args = prove_args(
        &folder,
        &scratch,
        &tools,
        &["--object", "main-20260101T000000Z.db", "--expect-keys", "1"],
    );
    let (code, result, _) = run(&args, &[], &result_file).await;
    assert_eq!(code, exit::SUCCESS, "{result:?}");
    let report = prove_report(&result);
    assert!(report.revision.unwrap() < taken.revision.unwrap(), "{report:?}");
    assert_eq!(report.keys, Some(1));
    assert_eq!(listing(&scratch), Vec::<String>::new());
}

async fn damaged_snapshots_and_wrong_expectations_are_not_proven(version: EtcdVersion) {
    let Some(tools) = tools_or_skip(version) else { return };
    let Some(cluster) = cluster(version, 1).await else { return };
    let dir = tempfile::tempdir().unwrap();
    let (folder, taken, keys) = folder_with_snapshots(&cluster, dir.path()).await;
    drop(cluster);
    let scratch = dir.path().join("scratch");
    std::fs::create_dir(&scratch).unwrap();
    let result_file = dir.path().join("result.json");
    let good = std::fs::read(folder.join("main-20260102T000000Z.db")).unwrap();
    let mut flipped = good.clone();
    flipped[good.len() / 3] ^= 0x01;
    std::fs::write(folder.join("main-20260103T000000Z.db"), &flipped).unwrap();
    std::fs::write(folder.join("main-20260104T000000Z.db"), &good[..good.len() - 4096]).unwrap();
    std::fs::write(folder.join("main-20260105T000000Z.db"), &good[..good.len() / 2]).unwrap();

    let revision = taken.revision.unwrap();
    let wrong_sha = "0".repeat(64);
    let (more_keys, later, earlier) =
        ((keys + 1).to_string(), (revision + 1).to_string(), (revision - 1).to_string());
    let newest_good = "main-20260102T000000Z.db";
    for (extra, says) in [
        (vec!["--object", "main-20260103T000000Z.db"], "does not match"),
        (vec!["--object", "main-20260104T000000Z.db"], "does not match"),
        // The newest of the cluster's, when none is named: the one cut short.
        (vec![], "not the size of a snapshot"),
        (vec!["--object", "missing.db"], "cannot open it"),
        (vec!["--object", newest_good, "--expect-sha256", &wrong_sha], "its SHA-256 is"),
        (
            vec!["--object", newest_good, "--expect-keys", &more_keys],
            &format!("it held {keys} keys, not the recorded {more_keys}"),
        ),
        (
            vec!["--object", newest_good, "--expect-revision", &later],
            &format!("it served revision {revision}, not the recorded {later}"),
        ),
        (
            vec!["--object", newest_good, "--expect-revision", &earlier],
            &format!("it served revision {revision}, not the recorded {earlier}"),
        ),
    ] {
        let args = prove_args(&folder, &scratch, &tools, &extra);
        let (code, result, stderr) = run(&args, &[], &result_file).await;
        assert_eq!(code, exit::BAD_INPUT, "{extra:?}: {result:?}");
        assert_eq!(result.outcome, Outcome::Failed, "{extra:?}");
        assert!(!prove_report(&result).proven, "{extra:?}");
        let message = result.message.unwrap();
        assert!(message.contains(says), "{extra:?}: {message}");
        assert!(stderr.contains(says), "{extra:?}: the reason reaches stderr");
        assert_eq!(listing(&scratch), Vec::<String>::new(), "{extra:?}: the scratch folder is emptied");
    }
}

/// No etcd, no restore tool, a 3.5 etcdctl given as the restore tool, no scratch folder: bad
/// input before anything is fetched, saying what to install or give.
#[tokio::test]
async fn missing_tools_are_bad_input_saying_what_to_install() {
    let dir = tempfile::tempdir().unwrap();
    let result_file = dir.path().join("result.json");
    let empty_path = dir.path().join("bin");
    std::fs::create_dir(&empty_path).unwrap();
    let base = strings(&[
        "snapshot-prove",
        "--from",
        &path(dir.path()),
        "--file-name-template",
        TEMPLATE,
        "--cluster",
        "main",
        "--scratch-dir",
        &path(dir.path()),
    ]);
    let with = |extra: &[&str]| base.iter().cloned().chain(strings(extra)).collect::<Vec<_>>();
    let no_path = [("PATH", empty_path.to_str().unwrap())];
    let (code, result, _) = run(&with(&["--etcd", "/nonexistent/etcd"]), &[], &result_file).await;
    assert_eq!(code, exit::BAD_INPUT, "{result:?}");
    let message = result.message.unwrap();
    assert!(
        message.contains("/nonexistent/etcd (from --etcd) does not run")
            && message.contains("install etcd 3.5"),
        "{message}"
    );
    let (code, result, _) = run(&base, &no_path, &result_file).await;
    assert_eq!(code, exit::BAD_INPUT, "{result:?}");
    assert!(result.message.unwrap().contains("no etcd binary on PATH"));

    let Some(etcd) = etcd_or_skip(EtcdVersion::V3_5) else { return };
    let (code, result, _) = run(&with(&["--etcd", &path(&etcd)]), &no_path, &result_file).await;
    assert_eq!(code, exit::BAD_INPUT, "{result:?}");
    let message = result.message.unwrap();
    assert!(
        message.contains("no etcdutl, nor a 3.4 etcdctl, on PATH") && message.contains("--etcdutl"),
        "{message}"
    );
    // etcd 3.5's own etcdctl no longer restores.
    let etcdctl = etcd.with_file_name("etcdctl");
    if etcdctl.exists() {
        let (code, result, _) =
            run(&with(&["--etcd", &path(&etcd), "--etcdutl", &path(&etcdctl)]), &[], &result_file).await;
        assert_eq!(code, exit::BAD_INPUT, "{result:?}");
        assert!(result.message.unwrap().contains("snapshots are restored by etcdutl, not etcdctl"));
    }
    let Some(tool) = restore_tool_or_skip(EtcdVersion::V3_5, &etcd) else { return };
    let mut args = with(&["--etcd", &path(&etcd), "--etcdutl", &path(&tool)]);
    args[8] = path(&dir.path().join("missing"));
    let (code, result, _) = run(&args, &[], &result_file).await;
    assert_eq!(code, exit::BAD_INPUT, "{result:?}");
    assert!(result.message.unwrap().contains("--scratch-dir"));
}

/// etcd 3.5's etcdutl restores a 3.4 snapshot, and etcd 3.5 serves it: the Job image carries
/// only 3.5's tools, for clusters on either version.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_3_4_snapshot_is_proven_with_3_5s_etcdutl_and_etcd() {
    let _one = groundskeeper_e2e::etcd_cluster::CLUSTER_TURNS.lock().await;
    let Some(tools) = tools_or_skip(EtcdVersion::V3_5) else { return };
    assert_eq!(binary_version(&tools.etcd).map(|v| v.starts_with("3.5.")), Some(true));
    let Some(cluster) = cluster(EtcdVersion::V3_4, 1).await else { return };
    let dir = tempfile::tempdir().unwrap();
    let (folder, taken, keys) = folder_with_snapshots(&cluster, dir.path()).await;
    drop(cluster);
    let scratch = dir.path().join("scratch");
    std::fs::create_dir(&scratch).unwrap();
    let keys_text = keys.to_string();
    let args = prove_args(&folder, &scratch, &tools, &["--expect-keys", &keys_text]);
    let (code, result, stderr) = run(&args, &[], &dir.path().join("result.json")).await;
    assert_eq!(code, exit::SUCCESS, "{result:?}\n{stderr}");
    let report = prove_report(&result);
    assert!(report.proven);
    assert_eq!(report.revision, taken.revision);
    assert_eq!(report.keys, Some(keys));
    assert!(report.etcd_version.as_deref().unwrap().starts_with("3.5."));
    assert!(result.message.unwrap().contains("etcdutl 3.5."));
}

/// SIGTERM while the proof waits for its member: the run ends at once (exit 1, `stoppedBy`),
/// the member is killed and the scratch folder emptied. The "etcd" here never answers (a
/// script standing in for it, so the proof is surely still waiting when the signal comes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_proof_kills_its_member_and_empties_the_scratch_folder() {
    let _one = groundskeeper_e2e::etcd_cluster::CLUSTER_TURNS.lock().await;
    let Some(tools) = tools_or_skip(EtcdVersion::V3_5) else { return };
    let Some(cluster) = cluster(EtcdVersion::V3_5, 1).await else { return };
    let dir = tempfile::tempdir().unwrap();
    let (folder, _, _) = folder_with_snapshots(&cluster, dir.path()).await;
    drop(cluster);
    let scratch = dir.path().join("scratch");
    std::fs::create_dir(&scratch).unwrap();
    let pid_file = dir.path().join("etcd.pid");
    let silent = dir.path().join("silent-etcd");
    std::fs::write(
        &silent,
        format!(
            "#!/bin/sh\n[ \"$1\" = --version ] && {{ echo 'etcd Version: 3.5.99'; exit 0; }}\necho $$ > {}\nexec sleep 600\n",
            pid_file.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&silent, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let stand_in = Tools { etcd: silent, restore: tools.restore.clone() };
    let result_file = dir.path().join("result.json");
    let mut child = tokio::process::Command::new(BIN)
        .args(prove_args(&folder, &scratch, &stand_in, &[]))
        .arg("--result-file")
        .arg(&result_file)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let member_pid = loop {
        if let Some(pid) = std::fs::read_to_string(&pid_file).ok().and_then(|p| p.trim().parse::<i32>().ok())
        {
            break pid;
        }
        assert!(Instant::now() < deadline, "the member was never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(
        listing(&scratch).iter().any(|n| n.starts_with(".groundskeeper-prove-")),
        "{:?}",
        listing(&scratch)
    );
    // SAFETY: kill(2) on our own child's pid.
    unsafe {
        libc::kill(child.id().unwrap() as libc::pid_t, libc::SIGTERM);
    }
    let stopped = Instant::now();
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait()).await.expect("exits").unwrap();
    assert!(stopped.elapsed() < Duration::from_secs(10), "{:?}", stopped.elapsed());
    assert_eq!(status.code(), Some(exit::RETRYABLE));
    let result = JobResult::parse(&std::fs::read_to_string(&result_file).unwrap()).unwrap();
    assert_eq!(result.stopped_by.as_deref(), Some("SIGTERM"));
    assert!(!prove_report(&result).proven);
    assert!(result.message.unwrap().contains("scratch folder emptied"));
    assert_eq!(listing(&scratch), Vec::<String>::new(), "nothing left in the scratch folder");
    assert!(!Path::new(&format!("/proc/{member_pid}")).exists(), "the member was killed and reaped");
}

/// `snapshot --to` a bucket of a local S3 server, then `snapshot-prove --from` that bucket.
pub(crate) struct BucketWithSnapshots {
    pub server: groundskeeper_e2e::s3_server::S3Server,
    pub url: String,
    pub credentials: PathBuf,
}

impl BucketWithSnapshots {
    /// A server with bucket `backups`; `None` after saying why when s3s-fs is missing.
    pub fn start(dir: &Path) -> Option<Self> {
        let binary = groundskeeper_e2e::s3_server::s3s_fs_or_skip()?;
        let server = groundskeeper_e2e::s3_server::S3Server::start(&binary).expect("the S3 server starts");
        server.create_bucket("backups").unwrap();
        let credentials = dir.join("credentials");
        server.write_credentials(&credentials).unwrap();
        Some(Self { server, url: "s3://backups/etcd".into(), credentials })
    }

    /// `--NAME URL --NAME-option … --NAME-credentials DIR`.
    pub fn flags(&self, name: &str) -> Vec<String> {
        let mut flags = vec![format!("--{name}"), self.url.clone()];
        flags.extend(self.server.option_args(name));
        flags.extend([format!("--{name}-credentials"), path(&self.credentials)]);
        flags
    }

    /// The runner's `snapshot --to` into object `name`.
    pub async fn snapshot(&self, cluster: &EtcdCluster, name: &str, result_file: &Path) -> SnapshotReport {
        let mut args = strings(&["snapshot", "--endpoints", &cluster.endpoints_flag(), "--object", name]);
        args.extend(self.flags("to"));
        let (code, result, stderr) = run(&args, &[], result_file).await;
        assert_eq!(code, exit::SUCCESS, "{result:?}\n{stderr}");
        match result.report {
            Report::Snapshot(report) => report,
            other => panic!("not a snapshot report: {other:?}"),
        }
    }
}

/// A snapshot in a bucket is proven against the revision and key count recorded in its metadata
/// when it was taken (no expectations given); a damaged object and a missing one are refused.
async fn a_snapshot_in_a_bucket_is_proven_by_its_recorded_metadata(version: EtcdVersion) {
    let Some(tools) = tools_or_skip(version) else { return };
    let dir = tempfile::tempdir().unwrap();
    let Some(bucket) = BucketWithSnapshots::start(dir.path()) else { return };
    let Some(cluster) = cluster(version, 1).await else { return };
    let result_file = dir.path().join("result.json");
    bucket.snapshot(&cluster, "main-20260101T000000Z.db", &result_file).await;
    let keys = write_known_keys(&cluster, 50).await;
    let taken = bucket.snapshot(&cluster, "main-20260102T000000Z.db", &result_file).await;
    assert_eq!(taken.keys, Some(keys), "the key count recorded with the snapshot");
    drop(cluster);
    let scratch = dir.path().join("scratch");
    std::fs::create_dir(&scratch).unwrap();
    let prove = |extra: &[&str]| {
        let mut args = strings(&["snapshot-prove"]);
        args.extend(bucket.flags("from"));
        args.extend(strings(&["--file-name-template", TEMPLATE, "--cluster", "main", "--scratch-dir"]));
        args.push(path(&scratch));
        args.extend(tools.flags());
        args.extend(strings(extra));
        args
    };

    let (code, result, stderr) = run(&prove(&[]), &[], &result_file).await;
    assert_eq!(code, exit::SUCCESS, "{result:?}\n{stderr}");
    let report = prove_report(&result);
    assert!(report.proven);
    assert_eq!(report.object, "main-20260102T000000Z.db", "the newest in the bucket");
    assert_eq!(report.path, format!("{}/main-20260102T000000Z.db", bucket.url));
    assert_eq!((report.revision, report.expected_revision), (taken.revision, taken.revision));
    assert_eq!(
        (report.keys, report.expected_keys),
        (Some(keys), Some(keys)),
        "keys compared with the metadata"
    );
    assert_eq!(report.sha256, taken.sha256);
    assert!(stderr.contains("downloading the snapshot"), "progress on stderr");
    assert_eq!(listing(&scratch), Vec::<String>::new(), "the download is removed too");

    // A byte flipped in the stored object: its bytes no longer match the recorded checksum.
    let stored = bucket.server.object_file("backups", "etcd/main-20260102T000000Z.db");
    let mut bytes = std::fs::read(&stored).unwrap();
    let at = bytes.len() / 3;
    bytes[at] ^= 0x01;
    std::fs::write(&stored, &bytes).unwrap();
    for (extra, says) in
        [(&[][..], "damaged"), (&["--object", "main-20260109T000000Z.db"], "main-20260109T000000Z.db")]
    {
        let (code, result, _) = run(&prove(extra), &[], &result_file).await;
        assert_eq!(code, exit::BAD_INPUT, "{extra:?}: {result:?}");
        assert!(!prove_report(&result).proven);
        let message = result.message.unwrap();
        assert!(message.contains(says), "{extra:?}: {message}");
        assert_eq!(listing(&scratch), Vec::<String>::new(), "{extra:?}");
    }
}

/// A tool that answers its version like the real one, then fails to load for any real work
/// (exit 127, the loader's words), as a broken binary in an image does.
fn broken_tool(dir: &Path, name: &str, real: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let script = dir.join(name);
    let text = format!(
        "#!/bin/sh\ncase \"$1\" in --version|version) exec {} \"$@\";; esac\n\
         echo \"{name}: error while loading shared libraries: libc.so.6: cannot open shared object file\" >&2\n\
         exit 127\n",
        real.display()
    );
    std::fs::write(&script, text).unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    script
}

/// A broken etcd or etcdutl (it answers `--version`, then fails to load) is the tool's failure,
/// retryable: a good snapshot is never reported as not restorable because of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_tool_never_marks_a_good_snapshot_bad() {
    let Some(tools) = tools_or_skip(EtcdVersion::V3_5) else { return };
    let Some(cluster) = cluster(EtcdVersion::V3_5, 1).await else { return };
    let dir = tempfile::tempdir().unwrap();
    let (folder, _, _) = folder_with_snapshots(&cluster, dir.path()).await;
    let scratch = dir.path().join("scratch");
    std::fs::create_dir(&scratch).unwrap();
    let result_file = dir.path().join("result.json");
    let broken_etcd = Tools { etcd: broken_tool(dir.path(), "etcd", &tools.etcd), ..tools.clone() };
    let broken_etcdutl =
        Tools { restore: broken_tool(dir.path(), "etcdutl", &tools.restore), ..tools.clone() };
    for (what, tools) in [("etcd", &broken_etcd), ("etcdutl", &broken_etcdutl)] {
        let (code, result, stderr) = run(&prove_args(&folder, &scratch, tools, &[]), &[], &result_file).await;
        assert_eq!(code, exit::RETRYABLE, "a broken {what}: {result:?}\n{stderr}");
        let error = result.error.as_ref().unwrap();
        assert_eq!(error.kind, ErrorKind::Retryable, "{what}");
        assert!(error.message.contains("not the snapshot"), "{what}: {}", error.message);
        assert!(!prove_report(&result).proven, "{what}");
        assert_eq!(listing(&scratch), Vec::<String>::new(), "{what}: the scratch folder is emptied");
    }
    // The same snapshot with working tools: proven.
    let (code, result, stderr) = run(&prove_args(&folder, &scratch, &tools, &[]), &[], &result_file).await;
    assert_eq!(code, exit::SUCCESS, "{result:?}\n{stderr}");
    assert!(prove_report(&result).proven);
}

/// Proving the newest snapshot (no `--object`) whose bytes are damaged, in a folder and in a
/// bucket: the result names the snapshot that failed, so the failure is recorded against it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_proof_of_the_newest_snapshot_names_it() {
    let Some(tools) = tools_or_skip(EtcdVersion::V3_5) else { return };
    let dir = tempfile::tempdir().unwrap();
    let Some(bucket) = BucketWithSnapshots::start(dir.path()) else { return };
    let Some(cluster) = cluster(EtcdVersion::V3_5, 1).await else { return };
    let (folder, _, _) = folder_with_snapshots(&cluster, dir.path()).await;
    let result_file = dir.path().join("result.json");
    let newest = "main-20260102T000000Z.db";
    bucket.snapshot(&cluster, newest, &result_file).await;
    drop(cluster);
    let flip_last_byte = |file: &Path| {
        let mut bytes = std::fs::read(file).unwrap();
        *bytes.last_mut().unwrap() ^= 0x01;
        std::fs::write(file, bytes).unwrap();
    };
    flip_last_byte(&folder.join(newest));
    flip_last_byte(&bucket.server.object_file("backups", &format!("etcd/{newest}")));
    let scratch = dir.path().join("scratch");
    std::fs::create_dir(&scratch).unwrap();
    let mut from_bucket = strings(&["snapshot-prove"]);
    from_bucket.extend(bucket.flags("from"));
    from_bucket.extend(strings(&["--file-name-template", TEMPLATE, "--cluster", "main", "--scratch-dir"]));
    from_bucket.push(path(&scratch));
    from_bucket.extend(tools.flags());
    for (place, args) in [("folder", prove_args(&folder, &scratch, &tools, &[])), ("bucket", from_bucket)] {
        let (code, result, stderr) = run(&args, &[], &result_file).await;
        assert_eq!(code, exit::BAD_INPUT, "{place}: {result:?}\n{stderr}");
        let report = prove_report(&result);
        assert_eq!(report.object, newest, "{place}: {result:?}");
        assert!(report.path.ends_with(newest), "{place}: {result:?}");
        assert!(!report.proven);
    }
}
