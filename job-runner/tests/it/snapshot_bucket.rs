//! `groundskeeper-job snapshot --to URL` and `snapshot-copy` against real etcd 3.4 and 3.5 and a
//! real S3 server (s3s-fs from crates.io, which checks request signatures): the object, its
//! metadata and the result; a run killed mid-upload leaves nothing under the object's name;
//! retention on a shared bucket; copies between buckets and from a folder, again, and after a
//! killed copy; wrong credentials and a missing bucket (exit 2, naming the bucket). A missing
//! etcd or s3s-fs skips a test with a message (under `CI=true` both fail; `cargo xtask test`
//! provides both).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use groundskeeper_e2e::etcd_cluster::{ClusterOptions, EtcdCluster, EtcdVersion, etcd_or_skip};
use groundskeeper_e2e::etcd_writes::{WritePlan, Writes};
use groundskeeper_e2e::s3_server::{S3Server, s3s_fs_or_skip, write_credentials};
use groundskeeper_protocol::result::{CopyReport, SnapshotReport};
use groundskeeper_protocol::{JobResult, Report, exit};
use sha2::Digest;

const BIN: &str = env!("CARGO_BIN_EXE_groundskeeper-job");
const TEMPLATE: &str = "{cluster}-{time}.db";
/// A db whose snapshot takes three parts of the upload or more: long enough to be stopped in the
/// middle.
const BIG_DB: u64 = 28_000_000;

/// A cluster, a server with bucket `snapshots`, and a folder with its credentials.
struct Stand {
    cluster: EtcdCluster,
    s3: S3Server,
    dir: tempfile::TempDir,
    credentials: PathBuf,
}

async fn stand(version: EtcdVersion) -> Option<Stand> {
    stand_of(version, ClusterOptions::default().members).await
}

/// A stand whose cluster has `members` members: one where only the snapshot's size matters
/// (a large db fills three times faster on one member).
async fn stand_of(version: EtcdVersion, members: usize) -> Option<Stand> {
    let s3s_fs = s3s_fs_or_skip()?;
    let binary = etcd_or_skip(version)?;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let options = ClusterOptions { members, ..ClusterOptions::default() };
    let cluster = EtcdCluster::start(&binary, options).await.expect("the etcd cluster starts");
    let s3 = S3Server::start(&s3s_fs).expect("s3s-fs starts");
    s3.create_bucket("snapshots").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let credentials = dir.path().join("credentials");
    s3.write_credentials(&credentials).unwrap();
    Some(Stand { cluster, s3, dir, credentials })
}

impl Stand {
    /// `snapshot --to s3://snapshots/etcd --object NAME`, with retention when `retain` is set.
    fn snapshot_args(&self, url: &str, name: &str, retain: Option<u32>) -> Vec<String> {
        let mut args = vec![
            "snapshot".to_owned(),
            "--endpoints".into(),
            self.cluster.endpoints_flag(),
            "--to".into(),
            url.into(),
            "--object".into(),
            name.into(),
            "--to-credentials".into(),
            self.credentials.display().to_string(),
        ];
        args.extend(self.s3.option_args("to"));
        if let Some(retain) = retain {
            args.extend(["--retain".into(), retain.to_string()]);
            args.extend(["--file-name-template".into(), TEMPLATE.into(), "--cluster".into(), "main".into()]);
        }
        args
    }

    fn result_file(&self) -> PathBuf {
        self.dir.path().join("result.json")
    }
}

/// Runs the binary (without blocking the runtime); returns its exit code, the result it wrote
/// and its stderr.
async fn run(args: &[String], result_file: &Path) -> (i32, JobResult, String) {
    let _ = std::fs::remove_file(result_file);
    let out = tokio::process::Command::new(BIN)
        .args(args)
        .arg("--result-file")
        .arg(result_file)
        .output()
        .await
        .expect("groundskeeper-job runs");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    eprintln!("{stderr}");
    let json = std::fs::read_to_string(result_file)
        .unwrap_or_else(|e| panic!("no result file ({e}); stderr:\n{stderr}"));
    let result = JobResult::parse(&json).unwrap_or_else(|e| panic!("bad result ({e}): {json}"));
    (out.status.code().expect("exited"), result, stderr)
}

fn snapshot_report(result: &JobResult) -> &SnapshotReport {
    match &result.report {
        Report::Snapshot(report) => report,
        other => panic!("not a snapshot report: {other:?}"),
    }
}

fn copy_report(result: &JobResult) -> &CopyReport {
    match &result.report {
        Report::SnapshotCopy(report) => report,
        other => panic!("not a copy report: {other:?}"),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn sha256_of(path: &Path) -> String {
    hex(&sha2::Sha256::digest(std::fs::read(path).unwrap()))
}

/// `snapshot verify FILE`'s report.
fn verify(file: &Path) -> SnapshotReport {
    let out = std::process::Command::new(BIN).args(["snapshot", "verify"]).arg(file).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let result = JobResult::parse(&String::from_utf8_lossy(&out.stdout)).unwrap();
    snapshot_report(&result).clone()
}

/// Names of the regular files in a folder, sorted (an s3s-fs bucket's objects).
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn name(day: u32) -> String {
    format!("main-202601{day:02}T000000Z.db")
}

groundskeeper_e2e::for_each_etcd_version!(
    a_snapshot_under_writes_is_uploaded_with_its_metadata,
    retention_on_a_shared_bucket_deletes_only_the_clusters_oldest,
    tiered_retention_keeps_whole_chains_in_a_bucket_and_a_size_limit_in_a_folder,
);

async fn a_snapshot_under_writes_is_uploaded_with_its_metadata(version: EtcdVersion) {
    let Some(stand) = stand(version).await else { return };
    // More than one part (8 MiB), so the upload is a real multipart one.
    stand.cluster.fill(20_000_000).await.expect("fill");
    let writes =
        Writes::start(stand.cluster.client(None).await.expect("a client"), WritePlan::distinct_keys());
    tokio::time::sleep(Duration::from_millis(300)).await;
    let args = stand.snapshot_args("s3://snapshots/etcd", &name(1), Some(3));
    let (code, result, _) = run(&args, &stand.result_file()).await;
    writes.stop().await;
    assert_eq!(code, exit::SUCCESS, "{result:?}");
    let report = snapshot_report(&result).clone();
    eprintln!("{}", serde_json::to_string_pretty(&result).unwrap());

    // The object: whole (etcd's trailer), its hash and size in the result.
    let object = stand.s3.object_file("snapshots", &format!("etcd/{}", name(1)));
    let bytes = std::fs::read(&object).unwrap();
    assert_eq!(report.path, format!("s3://snapshots/etcd/{}", name(1)));
    assert_eq!(report.size_bytes, bytes.len() as u64);
    assert!(report.size_bytes > 16 * 1024 * 1024, "{}", report.size_bytes);
    let (db, trailer) = bytes.split_at(bytes.len() - 32);
    assert_eq!(sha2::Sha256::digest(db).as_slice(), trailer, "etcd's trailer");
    assert_eq!(report.sha256.as_deref(), Some(sha256_of(&object).as_str()));
    assert_eq!(report.db_sha256.as_deref(), Some(hex(trailer).as_str()));
    assert!(!report.from_leader);
    // The revision read from the stream is the one the file holds (read from the file by
    // `snapshot verify`, as etcdutl reads it).
    let on_file = verify(&object);
    let revision = report.revision.expect("the revision");
    assert_eq!(on_file.revision, Some(revision));
    // The keys at that revision: the bulk, the writer's keys up to it.
    let mut client = stand.cluster.client(None).await.unwrap();
    let options = etcd_client::GetOptions::new().with_all_keys().with_count_only().with_revision(revision);
    let keys = client.get("", Some(options)).await.unwrap().count();
    assert_eq!(report.keys, Some(keys));
    assert!(keys > 8, "{keys}");
    // The metadata, as the store keeps it.
    let metadata = stand.s3.object_metadata("snapshots", &format!("etcd/{}", name(1)));
    let want: BTreeMap<String, String> = [
        ("sha256", report.sha256.clone().unwrap()),
        ("revision", revision.to_string()),
        ("keys", keys.to_string()),
        ("cluster", "main".to_owned()),
        ("member", report.member.clone().unwrap()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    assert_eq!(metadata, want);
    // Nothing else in the bucket, no upload left.
    assert_eq!(listing(&stand.s3.object_file("snapshots", "etcd")), [name(1)]);
    assert!(stand.s3.upload_parts().is_empty(), "{:?}", stand.s3.upload_parts());
    let message = result.message.unwrap();
    assert!(message.contains("uploaded to s3://snapshots/etcd/") && message.contains("keys"), "{message}");
}

async fn retention_on_a_shared_bucket_deletes_only_the_clusters_oldest(version: EtcdVersion) {
    let Some(stand) = stand(version).await else { return };
    let prefix = stand.s3.object_file("snapshots", "etcd");
    std::fs::create_dir_all(&prefix).unwrap();
    // Older snapshots of this cluster, another cluster's, an unrelated object, and one of this
    // cluster's under another prefix: only the first kind is ever deleted.
    let others = [
        "main-2-20260101T000000Z.db".to_owned(),
        "other-20260101T000000Z.db".to_owned(),
        "notes.txt".to_owned(),
        format!("{}.bak", name(1)),
    ];
    for object in [name(1), name(2), name(3)].iter().chain(&others) {
        std::fs::write(prefix.join(object), b"not a snapshot, never read").unwrap();
    }
    std::fs::create_dir_all(prefix.join("deeper")).unwrap();
    std::fs::write(prefix.join("deeper").join(name(1)), b"x").unwrap();

    let (code, result, _) =
        run(&stand.snapshot_args("s3://snapshots/etcd", &name(9), Some(2)), &stand.result_file()).await;
    assert_eq!(code, exit::SUCCESS, "{result:?}");
    let report = snapshot_report(&result);
    assert_eq!(report.deleted, [name(1), name(2)]);
    assert_eq!(report.deleted_count, 2);
    assert!(report.retention_errors.is_empty(), "{:?}", report.retention_errors);
    let mut left = listing(&prefix);
    left.retain(|n| !n.starts_with('.'));
    let mut want: Vec<String> = others.to_vec();
    want.extend([name(3), name(9)]);
    want.sort();
    assert_eq!(left, want);
    assert!(
        prefix.join("deeper").join(name(1)).exists(),
        "objects under a deeper prefix are not the cluster's"
    );
    assert!(result.message.unwrap().contains("deleted 2 older snapshot(s)"));
}

/// `main-{time}.db` at `at`.
fn full_at(at: jiff::Timestamp) -> String {
    format!("main-{}.db", at.strftime("%Y%m%dT%H%M%SZ"))
}

/// The name the runner gives a delta of `cluster` written at `at` (revisions after `start` up to
/// `end`).
fn delta_at(cluster: &str, at: jiff::Timestamp, start: i64, end: i64) -> String {
    format!("{cluster}-{}-{start:019}-{end:019}.delta", at.strftime("%Y%m%dT%H%M%SZ"))
}

/// Ten days of history under the prefix (a full snapshot every 6 hours, 1000 bytes, three deltas
/// after each, 100 bytes; a delta older than all of them; another cluster's backups), then a real
/// snapshot with a tiered policy: of the full snapshots, the newest two, and per UTC day of the
/// last 3 days the newest stay; of the deltas, the chains that restore any point of the last 8
/// hours, with their full snapshots. Whole chains only: every delta left follows a full snapshot
/// that is left, with every delta between. Then in a folder, a size limit the new snapshot alone
/// passes: everything older goes and the result says so.
async fn tiered_retention_keeps_whole_chains_in_a_bucket_and_a_size_limit_in_a_folder(version: EtcdVersion) {
    const HOUR: i64 = 3_600;
    let Some(stand) = stand(version).await else { return };
    let prefix = stand.s3.object_file("snapshots", "etcd");
    std::fs::create_dir_all(&prefix).unwrap();
    let now = jiff::Timestamp::now();
    // 30 minutes off the 6-hour steps: no rule's boundary falls within seconds of a backup.
    let full_time = |k: i64| now - jiff::SignedDuration::from_secs(k * 6 * HOUR - HOUR / 2);
    let mut fulls = Vec::new();
    let mut deltas = Vec::new();
    for k in 1..=40 {
        let at = full_time(k);
        fulls.push((k, at, full_at(at)));
        for d in 1..=3 {
            let revision = 1_000 * (41 - k) + 10 * d;
            deltas.push((
                k,
                delta_at("main", at + jiff::SignedDuration::from_secs(d * HOUR), revision, revision + 10),
            ));
        }
    }
    let orphan = delta_at("main", full_time(41), 1, 5);
    let others = [delta_at("main-2", full_time(30), 1, 5), "main-2-20260101T000000Z.db".to_owned()];
    for (_, _, name) in &fulls {
        std::fs::write(prefix.join(name), vec![b'f'; 1000]).unwrap();
    }
    for (_, name) in &deltas {
        std::fs::write(prefix.join(name), vec![b'd'; 100]).unwrap();
    }
    for name in others.iter().chain([&orphan]) {
        std::fs::write(prefix.join(name), b"x").unwrap();
    }

    let new_at = jiff::Timestamp::now();
    let new_name = full_at(new_at);
    let mut args = stand.snapshot_args("s3://snapshots/etcd", &new_name, Some(2));
    args.extend(["--keep-tier", "1d:3d", "--keep-deltas-for", "8h"].map(String::from));
    let (code, result, _) = run(&args, &stand.result_file()).await;
    assert_eq!(code, exit::SUCCESS, "{result:?}");
    let report = snapshot_report(&result).clone();
    assert!(report.retention_errors.is_empty(), "{:?}", report.retention_errors);

    // What the policy promises, from the history written.
    let day = |t: jiff::Timestamp| t.as_second().div_euclid(86_400);
    let mut newest_of_day: BTreeMap<i64, String> = BTreeMap::new();
    // Oldest first, the new one last: each day ends with its newest.
    for (_, at, name) in fulls.iter().rev() {
        if *at >= now - jiff::SignedDuration::from_hours(72) {
            newest_of_day.insert(day(*at), name.clone());
        }
    }
    newest_of_day.insert(day(new_at), new_name.clone());
    // Chains reaching into the last 8 hours: those of k = 1 (followed by the new one) and k = 2
    // (followed by k = 1, 5h30m ago).
    let chained = [1, 2];
    let mut want: Vec<String> = vec![new_name.clone(), fulls[0].2.clone()];
    want.extend(newest_of_day.values().cloned());
    want.extend(fulls.iter().filter(|(k, _, _)| chained.contains(k)).map(|(_, _, n)| n.clone()));
    want.extend(deltas.iter().filter(|(k, _)| chained.contains(k)).map(|(_, n)| n.clone()));
    want.extend(others.iter().cloned());
    want.sort();
    want.dedup();
    let mut left = listing(&prefix);
    left.retain(|n| !n.starts_with('.'));
    assert_eq!(left, want);
    assert_eq!(
        report.deleted_deltas_count as usize,
        deltas.len() - 6 + 1,
        "every delta but two chains, and the orphan"
    );
    // (The names may be shortened to fit the termination message; the count stays.)
    assert!(!prefix.join(&orphan).exists(), "a delta older than every full snapshot replays on none");
    let kept_bytes: u64 = left
        .iter()
        .filter(|n| !others.contains(n))
        .map(|n| std::fs::metadata(prefix.join(n)).unwrap().len())
        .sum();
    assert_eq!(report.kept_bytes, Some(kept_bytes));
    let message = result.message.unwrap();
    assert!(
        message.contains("one per 24h for 72h, deltas for 8h") && message.contains("delta(s) no rule keeps"),
        "{message}"
    );

    // A folder whose limit the new snapshot alone passes.
    let folder = stand.dir.path().join("folder");
    std::fs::create_dir_all(&folder).unwrap();
    for (_, _, name) in fulls.iter().take(3) {
        std::fs::write(folder.join(name), vec![b'f'; 1000]).unwrap();
    }
    let new_name = full_at(jiff::Timestamp::now());
    let args: Vec<String> = [
        "snapshot",
        "--endpoints",
        &stand.cluster.endpoints_flag(),
        "--output",
        &folder.join(&new_name).display().to_string(),
        "--retain",
        "5",
        "--file-name-template",
        TEMPLATE,
        "--cluster",
        "main",
        "--max-total-bytes",
        "1",
    ]
    .map(String::from)
    .to_vec();
    let (code, result, _) = run(&args, &stand.result_file()).await;
    assert_eq!(code, exit::SUCCESS, "{result:?}");
    let report = snapshot_report(&result);
    assert_eq!(listing(&folder), [new_name]);
    assert_eq!(report.deleted_count, 3);
    assert_eq!(report.over_limit_bytes, Some(report.size_bytes));
    assert!(result.message.unwrap().contains("over the limit"));

    // Rules that keep less than they seem to, or cannot be read: bad input, naming the flag.
    for (extra, says) in [
        (&["--keep-tier", "1d"][..], "--keep-tier \"1d\" is not EVERY:FOR"),
        (&["--keep-tier", "1d:12h"], "--keep-tier: 12h is not longer than every 24h"),
        (&["--keep-deltas-for", "soon"], "--keep-deltas-for: \"soon\" is not a duration"),
    ] {
        let mut args = args.clone();
        args.extend(extra.iter().map(|s| s.to_string()));
        let (code, result, _) = run(&args, &stand.result_file()).await;
        assert_eq!(code, exit::BAD_INPUT, "{extra:?}: {result:?}");
        let message = result.message.unwrap_or_default();
        assert!(message.contains(says), "{extra:?}: {message}");
    }
}

/// A run killed outright (SIGKILL) while its upload is under way: nothing appears under the
/// object's name; the next run to the same name succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_killed_mid_upload_leaves_nothing_under_the_objects_name() {
    let _one = groundskeeper_e2e::etcd_cluster::CLUSTER_TURNS.lock().await;
    let Some(stand) = stand_of(EtcdVersion::V3_5, 1).await else { return };
    stand.cluster.fill(BIG_DB).await.expect("fill");
    let args = stand.snapshot_args("s3://snapshots", &name(1), None);
    let mut child = tokio::process::Command::new(BIN)
        .args(&args)
        .arg("--result-file")
        .arg(stand.result_file())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Killed once the first parts reached the server.
    let deadline = Instant::now() + Duration::from_secs(60);
    while stand.s3.upload_parts().is_empty() {
        assert!(Instant::now() < deadline, "no upload started: {}", stand.s3.log_text());
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    child.start_kill().unwrap();
    child.wait().await.unwrap();
    assert!(!stand.s3.object_file("snapshots", &name(1)).exists(), "nothing under the object's name");
    assert!(listing(&stand.s3.object_file("snapshots", "")).iter().all(|n| n.starts_with('.')));
    assert!(!stand.s3.upload_parts().is_empty(), "the killed run's upload is left incomplete, as no object");

    let (code, result, _) = run(&args, &stand.result_file()).await;
    assert_eq!(code, exit::SUCCESS, "{result:?}");
    assert_eq!(verify(&stand.s3.object_file("snapshots", &name(1))).sha256, snapshot_report(&result).sha256);
}

/// SIGTERM mid-upload: the upload is aborted (its parts deleted), the result says so, retryable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_run_aborts_its_upload() {
    let _one = groundskeeper_e2e::etcd_cluster::CLUSTER_TURNS.lock().await;
    let Some(stand) = stand_of(EtcdVersion::V3_5, 1).await else { return };
    stand.cluster.fill(BIG_DB).await.expect("fill");
    let args = stand.snapshot_args("s3://snapshots", &name(1), None);
    let child = tokio::process::Command::new(BIN)
        .args(&args)
        .arg("--result-file")
        .arg(stand.result_file())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while stand.s3.upload_parts().is_empty() {
        assert!(Instant::now() < deadline, "no upload started");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // SAFETY: kill(2) on the child's pid, which it still has (not reaped yet).
    unsafe { libc::kill(child.id().unwrap() as i32, libc::SIGTERM) };
    let out = child.wait_with_output().await.unwrap();
    assert_eq!(out.status.code(), Some(exit::RETRYABLE), "{}", String::from_utf8_lossy(&out.stderr));
    let result = JobResult::parse(&std::fs::read_to_string(stand.result_file()).unwrap()).unwrap();
    assert_eq!(result.stopped_by.as_deref(), Some("SIGTERM"));
    assert!(result.message.unwrap().contains("upload aborted"));
    assert!(!stand.s3.object_file("snapshots", &name(1)).exists());
    assert!(stand.s3.upload_parts().is_empty(), "aborted: {:?}", stand.s3.upload_parts());
}

/// Wrong credentials and a missing bucket: exit 2 before etcd is asked anything, the message
/// naming the bucket and what to check, and no secret in it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_credentials_and_a_missing_bucket_are_bad_input_naming_the_bucket() {
    let Some(s3s_fs) = s3s_fs_or_skip() else { return };
    let s3 = S3Server::start(&s3s_fs).unwrap();
    s3.create_bucket("snapshots").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good");
    s3.write_credentials(&good).unwrap();
    let wrong = dir.path().join("wrong");
    write_credentials(&wrong, &s3.access_key, "a-wrong-secret").unwrap();
    let unknown = dir.path().join("unknown");
    write_credentials(&unknown, "nobody", "a-wrong-secret").unwrap();
    // No etcd answers here: the bucket is checked first, so these never get that far.
    let args = |url: &str, credentials: &Path| {
        let mut args: Vec<String> = [
            "snapshot",
            "--endpoints",
            "http://127.0.0.1:1",
            "--to",
            url,
            "--object",
            &name(1),
            "--to-credentials",
            &credentials.display().to_string(),
        ]
        .map(str::to_owned)
        .to_vec();
        args.extend(s3.option_args("to"));
        args
    };
    let result_file = dir.path().join("result.json");
    for (url, credentials, says) in [
        ("s3://snapshots", &wrong, "check the credentials in"),
        ("s3://snapshots", &unknown, "check the credentials in"),
        ("s3://missing", &good, "bucket missing does not exist"),
    ] {
        let (code, result, stderr) = run(&args(url, credentials), &result_file).await;
        assert_eq!(code, exit::BAD_INPUT, "{url} {credentials:?}: {result:?}");
        let message = result.message.unwrap();
        assert!(message.contains(says), "{message}");
        let bucket = url.trim_start_matches("s3://");
        assert!(message.contains(&format!("bucket {bucket}")), "names the bucket: {message}");
        assert!(!message.contains("a-wrong-secret") && !stderr.contains("a-wrong-secret"), "{message}");
        assert!(!message.contains(&s3.secret_key) && !stderr.contains(&s3.secret_key));
    }
    // An unreachable store is worth a retry (exit 1).
    let mut unreachable = args("s3://snapshots", &good);
    let endpoint = unreachable.iter().position(|a| a.starts_with("endpoint=")).unwrap();
    unreachable[endpoint] = "endpoint=http://127.0.0.1:1".into();
    let (code, result, _) = run(&unreachable, &result_file).await;
    assert_eq!(code, exit::RETRYABLE, "{result:?}");
}

/// `snapshot-copy` arguments from `from` to `to` (each a folder path or a URL on the test
/// server), with the server's options and credentials for a bucket side.
fn copy_args(stand_s3: &S3Server, credentials: &Path, from: &str, to: &str, only: &[String]) -> Vec<String> {
    let mut args = vec!["snapshot-copy".to_owned()];
    for (flag, store) in [("from", from), ("to", to)] {
        args.extend([format!("--{flag}"), store.to_owned()]);
        if !store.starts_with('/') {
            args.extend([format!("--{flag}-credentials"), credentials.display().to_string()]);
            args.extend(stand_s3.option_args(flag));
        }
    }
    args.extend(["--file-name-template".into(), TEMPLATE.into(), "--cluster".into(), "main".into()]);
    for name in only {
        args.extend(["--only".into(), name.clone()]);
    }
    args
}

/// Every byte of `a` and `b` the same.
fn same_bytes(a: &Path, b: &Path) -> bool {
    std::fs::read(a).unwrap() == std::fs::read(b).unwrap()
}

/// Bucket to bucket, folder to bucket and bucket to folder: every snapshot of the cluster copied
/// whole with its metadata, nothing else; a second run copies nothing; a name taken by other
/// bytes in the destination is never overwritten (exit 2, the others copied).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copies_between_stores_are_checked_whole_and_a_second_run_copies_nothing() {
    let _one = groundskeeper_e2e::etcd_cluster::CLUSTER_TURNS.lock().await;
    let Some(stand) = stand(EtcdVersion::V3_5).await else { return };
    stand.s3.create_bucket("copies").unwrap();
    stand.cluster.fill(12_000_000).await.expect("fill");
    for day in [1, 2] {
        let (code, result, _) =
            run(&stand.snapshot_args("s3://snapshots/etcd", &name(day), None), &stand.result_file()).await;
        assert_eq!(code, exit::SUCCESS, "{result:?}");
    }
    // Not the cluster's: never copied.
    let source_prefix = stand.s3.object_file("snapshots", "etcd");
    std::fs::write(source_prefix.join("other-20260101T000000Z.db"), b"another cluster's").unwrap();
    std::fs::write(source_prefix.join("notes.txt"), b"notes").unwrap();

    // Bucket to bucket, with the source's metadata.
    let to_bucket = copy_args(&stand.s3, &stand.credentials, "s3://snapshots/etcd", "s3://copies/main", &[]);
    let (code, result, _) = run(&to_bucket, &stand.result_file()).await;
    assert_eq!(code, exit::SUCCESS, "{result:?}");
    let report = copy_report(&result).clone();
    assert_eq!(report.source_count, 2);
    let copied: Vec<&str> = report.copied.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(copied, [name(1), name(2)]);
    let destination = stand.s3.object_file("copies", "main");
    assert_eq!(listing(&destination), [name(1), name(2)]);
    for copied in &report.copied {
        let source = source_prefix.join(&copied.name);
        assert!(same_bytes(&source, &destination.join(&copied.name)), "{}", copied.name);
        assert_eq!(copied.sha256, sha256_of(&source));
        let metadata = stand.s3.object_metadata("copies", &format!("main/{}", copied.name));
        assert_eq!(metadata, stand.s3.object_metadata("snapshots", &format!("etcd/{}", copied.name)));
        assert_eq!(metadata.get("revision").cloned(), copied.revision.map(|r| r.to_string()));
        assert_eq!(metadata.get("keys").cloned(), copied.keys.map(|k| k.to_string()));
    }
    assert_eq!(report.bytes_copied, report.copied.iter().map(|c| c.size_bytes).sum::<u64>());
    assert!(stand.s3.upload_parts().is_empty());

    // Again: nothing copied, both found.
    let (code, result, _) = run(&to_bucket, &stand.result_file()).await;
    assert_eq!(code, exit::SUCCESS, "{result:?}");
    let again = copy_report(&result);
    assert!(again.copied.is_empty(), "{again:?}");
    assert_eq!(again.already_there, [name(1), name(2)]);
    assert!(result.message.unwrap().contains("2 already there"));

    // Bucket to a folder (a claim), then that folder to a third place: a prefix of its own.
    let folder = stand.dir.path().join("claim");
    std::fs::create_dir(&folder).unwrap();
    // A name taken by other bytes: left as it is, reported, the other copied.
    std::fs::write(folder.join(name(1)), b"someone else's file").unwrap();
    let to_folder =
        copy_args(&stand.s3, &stand.credentials, "s3://copies/main", &folder.display().to_string(), &[]);
    let (code, result, _) = run(&to_folder, &stand.result_file()).await;
    assert_eq!(code, exit::BAD_INPUT, "{result:?}");
    let report = copy_report(&result);
    assert_eq!(report.copied.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(), [name(2)]);
    assert_eq!(report.failed.len(), 1, "{:?}", report.failed);
    assert!(report.failed[0].contains("already holds other bytes"), "{:?}", report.failed);
    assert_eq!(std::fs::read(folder.join(name(1))).unwrap(), b"someone else's file");
    assert!(same_bytes(&folder.join(name(2)), &source_prefix.join(name(2))));
    std::fs::remove_file(folder.join(name(1))).unwrap();
    let (code, result, _) = run(&to_folder, &stand.result_file()).await;
    assert_eq!(code, exit::SUCCESS, "{result:?}");
    assert_eq!(copy_report(&result).already_there, [name(2)]);
    assert_eq!(verify(&folder.join(name(1))).sha256, Some(sha256_of(&source_prefix.join(name(1)))));
    assert_eq!(listing(&folder), [name(1), name(2)], "no temporary file left");

    // A folder to a bucket: the SHA-256 and the revision, read from the file, recorded.
    let from_folder = copy_args(
        &stand.s3,
        &stand.credentials,
        &folder.display().to_string(),
        "s3://copies/from-claim",
        &[name(2)],
    );
    let (code, result, _) = run(&from_folder, &stand.result_file()).await;
    assert_eq!(code, exit::SUCCESS, "{result:?}");
    let report = copy_report(&result);
    assert_eq!(report.copied.len(), 1);
    let metadata = stand.s3.object_metadata("copies", &format!("from-claim/{}", name(2)));
    assert_eq!(metadata.get("sha256"), Some(&sha256_of(&folder.join(name(2)))));
    assert_eq!(
        metadata.get("revision").cloned(),
        verify(&folder.join(name(2))).revision.map(|r| r.to_string())
    );
    assert_eq!(listing(&stand.s3.object_file("copies", "from-claim")), [name(2)]);
}

/// A snapshot whose bytes no longer match the SHA-256 its object records is not copied: bad
/// input naming it, nothing under its name in the destination.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_snapshot_is_not_copied() {
    let _one = groundskeeper_e2e::etcd_cluster::CLUSTER_TURNS.lock().await;
    let Some(stand) = stand(EtcdVersion::V3_5).await else { return };
    stand.s3.create_bucket("copies").unwrap();
    let (code, result, _) =
        run(&stand.snapshot_args("s3://snapshots", &name(1), None), &stand.result_file()).await;
    assert_eq!(code, exit::SUCCESS, "{result:?}");
    let object = stand.s3.object_file("snapshots", &name(1));
    let mut bytes = std::fs::read(&object).unwrap();
    bytes[5000] ^= 0xff;
    std::fs::write(&object, bytes).unwrap();
    let args = copy_args(&stand.s3, &stand.credentials, "s3://snapshots", "s3://copies", &[]);
    let (code, result, _) = run(&args, &stand.result_file()).await;
    assert_eq!(code, exit::BAD_INPUT, "{result:?}");
    let report = copy_report(&result);
    assert!(report.copied.is_empty());
    assert!(report.failed[0].contains(&format!("s3://snapshots/{}", name(1))), "{:?}", report.failed);
    assert!(!stand.s3.object_file("copies", &name(1)).exists());
    assert!(stand.s3.upload_parts().is_empty(), "the upload was aborted");
}

/// A copy killed outright in the middle of an object: nothing incomplete under any name; the
/// next run copies what is missing and leaves what was done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_copy_is_finished_by_the_next_run() {
    let _one = groundskeeper_e2e::etcd_cluster::CLUSTER_TURNS.lock().await;
    let Some(stand) = stand_of(EtcdVersion::V3_5, 1).await else { return };
    stand.cluster.fill(BIG_DB).await.expect("fill");
    let folder = stand.dir.path().join("claim");
    std::fs::create_dir(&folder).unwrap();
    let mut args = stand.snapshot_args("s3://snapshots", &name(1), None);
    args.truncate(3);
    args.extend(["--output".into(), folder.join(name(1)).display().to_string()]);
    let (code, result, _) = run(&args, &stand.result_file()).await;
    assert_eq!(code, exit::SUCCESS, "{result:?}");
    // Three snapshots of the cluster (the same bytes under three times).
    for day in [2, 3] {
        std::fs::copy(folder.join(name(1)), folder.join(name(day))).unwrap();
    }
    let copy =
        copy_args(&stand.s3, &stand.credentials, &folder.display().to_string(), "s3://snapshots/copy", &[]);
    let mut child = tokio::process::Command::new(BIN)
        .args(&copy)
        .arg("--result-file")
        .arg(stand.result_file())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Killed once the second object's upload is under way.
    let destination = stand.s3.object_file("snapshots", "copy");
    let deadline = Instant::now() + Duration::from_secs(120);
    while !destination.join(name(1)).exists() || stand.s3.upload_parts().is_empty() {
        assert!(
            Instant::now() < deadline,
            "the copy did not get to its second object: {}",
            stand.s3.log_text()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    child.start_kill().unwrap();
    child.wait().await.unwrap();
    let whole = sha256_of(&folder.join(name(1)));
    let present: Vec<String> = listing(&destination).into_iter().filter(|n| !n.starts_with('.')).collect();
    assert!(present.len() < 3, "killed before the end: {present:?}");
    for name in &present {
        assert_eq!(sha256_of(&destination.join(name)), whole, "{name} is whole or absent");
    }

    let (code, result, _) = run(&copy, &stand.result_file()).await;
    assert_eq!(code, exit::SUCCESS, "{result:?}");
    let report = copy_report(&result);
    assert_eq!(report.already_there, present, "what the killed run finished is left as it is");
    assert_eq!(report.copied.len() + report.already_there.len(), 3);
    for day in [1, 2, 3] {
        assert_eq!(sha256_of(&destination.join(name(day))), whole);
    }
}

/// `args` with the store's endpoint option pointed at `endpoint`.
fn through(mut args: Vec<String>, endpoint: &str) -> Vec<String> {
    for arg in &mut args {
        if arg.starts_with("endpoint=") {
            *arg = format!("endpoint={endpoint}");
        }
    }
    args
}

/// A snapshot taken again under a name that holds a good one, whose metadata copy the store
/// answers with a server error: the run fails (retryable) and the good snapshot is still there,
/// byte for byte with its metadata; nothing else is left. Once the store answers, the retry
/// replaces it. A copy into a bucket whose metadata copy fails leaves nothing under the name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_good_snapshot_is_never_lost_when_its_bookkeeping_fails() {
    use groundskeeper_e2e::s3_fault_proxy::{Fault, FaultProxy, is_copy};
    let Some(stand) = stand(EtcdVersion::V3_5).await else { return };
    let proxy = FaultProxy::start(&stand.s3.endpoint).unwrap();
    let key = format!("etcd/{}", name(1));
    let args = through(stand.snapshot_args("s3://snapshots/etcd", &name(1), None), &proxy.endpoint);
    let (code, result, _) = run(&args, &stand.result_file()).await;
    assert_eq!(code, exit::SUCCESS, "{result:?}");
    let good = std::fs::read(stand.s3.object_file("snapshots", &key)).unwrap();
    let good_metadata = stand.s3.object_metadata("snapshots", &key);
    assert_eq!(good_metadata.get("sha256"), snapshot_report(&result).sha256.as_ref());

    stand.cluster.client(None).await.unwrap().put("after", "the first snapshot", None).await.unwrap();
    proxy.fail(Fault::server_error(is_copy));
    let (code, result, _) = run(&args, &stand.result_file()).await;
    assert_eq!(code, exit::RETRYABLE, "{result:?}");
    assert!(proxy.failed() > 0, "the metadata copy was asked for");
    assert_eq!(
        std::fs::read(stand.s3.object_file("snapshots", &key)).unwrap(),
        good,
        "the good snapshot is kept"
    );
    assert_eq!(stand.s3.object_metadata("snapshots", &key), good_metadata);
    assert_eq!(listing(&stand.s3.object_file("snapshots", "etcd")), vec![name(1)], "nothing else is left");
    assert!(stand.s3.upload_parts().is_empty(), "{:?}", stand.s3.upload_parts());

    proxy.heal();
    let (code, result, _) = run(&args, &stand.result_file()).await;
    assert_eq!(code, exit::SUCCESS, "{result:?}");
    let newer = std::fs::read(stand.s3.object_file("snapshots", &key)).unwrap();
    assert_ne!(newer, good, "the retry replaced it");
    assert_eq!(
        stand.s3.object_metadata("snapshots", &key).get("sha256"),
        snapshot_report(&result).sha256.as_ref()
    );

    // A folder's snapshot (no recorded SHA-256) copied into the bucket, its metadata copy failing.
    let folder = stand.dir.path().join("claim");
    std::fs::create_dir(&folder).unwrap();
    std::fs::write(folder.join(name(2)), &newer).unwrap();
    proxy.fail(Fault::server_error(is_copy));
    let copy = through(
        [
            vec!["snapshot-copy".to_owned(), "--from".into(), folder.display().to_string()],
            vec!["--to".into(), "s3://snapshots/copies".into(), "--to-credentials".into()],
            vec![stand.credentials.display().to_string(), "--file-name-template".into(), TEMPLATE.into()],
            vec!["--cluster".into(), "main".into()],
            stand.s3.option_args("to"),
        ]
        .concat(),
        &proxy.endpoint,
    );
    let (code, result, _) = run(&copy, &stand.result_file()).await;
    assert_eq!(code, exit::RETRYABLE, "{result:?}");
    let copies = stand.s3.object_file("snapshots", "copies");
    assert!(!copies.exists() || listing(&copies).is_empty(), "{:?}", listing(&copies));
    assert_eq!(std::fs::read(folder.join(name(2))).unwrap(), newer, "the source is untouched");
}

/// Credentials and settings no HTTP header can carry (a line break inside, a control character,
/// non-ASCII), a credentials file larger than a Secret, an object name longer than a key: bad
/// input naming the file, the option or the name, found before etcd is asked (the endpoints
/// here answer nothing); never a panic, never the value in the result or the log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_credentials_settings_and_names_are_refused_naming_them() {
    let Some(binary) = s3s_fs_or_skip() else { return };
    let s3 = S3Server::start(&binary).unwrap();
    s3.create_bucket("snapshots").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let result_file = dir.path().join("result.json");
    let snapshot_to = |credentials: &Path, object: &str, options: Vec<String>| -> Vec<String> {
        let mut args = vec![
            "snapshot".to_owned(),
            "--endpoints".into(),
            "http://127.0.0.1:1".into(),
            "--to".into(),
            "s3://snapshots/etcd".into(),
            "--object".into(),
            object.into(),
            "--to-credentials".into(),
            credentials.display().to_string(),
        ];
        args.extend(options);
        args
    };
    let secret = "Sekr3tValueNeverShown";
    let cases: Vec<(&str, String, &str)> = vec![
        ("AWS_ACCESS_KEY_ID", format!("{}\r\nX-Injected: 1", s3.access_key), "line break"),
        ("AWS_ACCESS_KEY_ID", format!("{}\nsecond line", s3.access_key), "line break"),
        ("AWS_SECRET_ACCESS_KEY", format!("{secret}\r\n{secret}"), "line break"),
        ("AWS_SESSION_TOKEN", format!("{secret}\u{0}"), "control character"),
        ("AWS_ACCESS_KEY_ID", format!("{}é", s3.access_key), "not ASCII"),
        ("AWS_SECRET_ACCESS_KEY", "\n".to_owned(), "empty"),
    ];
    for (i, (file, value, says)) in cases.iter().enumerate() {
        let credentials = dir.path().join(format!("credentials-{i}"));
        s3.write_credentials(&credentials).unwrap();
        std::fs::write(credentials.join(file), value).unwrap();
        let (code, result, stderr) =
            run(&snapshot_to(&credentials, &name(1), s3.option_args("to")), &result_file).await;
        let what = format!("{file} = {value:?}");
        assert_eq!(code, exit::BAD_INPUT, "{what}: {result:?}");
        let message = result.message.clone().unwrap();
        assert!(
            message.contains(&credentials.join(file).display().to_string()) && message.contains(says),
            "{what}: {message}"
        );
        assert!(!stderr.contains("panicked"), "{what}: {stderr}");
        let json = serde_json::to_string(&result).unwrap();
        assert!(!json.contains(secret) && !stderr.contains(secret), "{what}: the value is shown");
    }
    let credentials = dir.path().join("credentials");
    s3.write_credentials(&credentials).unwrap();

    // A settings value with a line break.
    let mut options = s3.option_args("to");
    let region = options.iter_mut().find(|o| o.starts_with("region=")).unwrap();
    region.push_str("\r\nX-Injected: 1");
    let (code, result, stderr) = run(&snapshot_to(&credentials, &name(1), options), &result_file).await;
    assert_eq!(code, exit::BAD_INPUT, "{result:?}");
    assert!(result.message.as_deref().unwrap().contains("option region"), "{result:?}");
    assert!(!stderr.contains("panicked"), "{stderr}");

    // Settings that are no URL (the store's client would panic on its first request), or hold a
    // space: bad input naming the option.
    for (option, says) in [
        ("endpoint=minio.backup:9000", "option endpoint: not a URL"),
        ("endpoint=http://127.0.0.1:9000/a b", "option endpoint"),
        ("region=us east-1", "option region"),
    ] {
        let key = option.split('=').next().unwrap();
        let mut options: Vec<String> = s3
            .options()
            .into_iter()
            .filter(|(k, _)| k != key)
            .flat_map(|(k, v)| ["--to-option".to_owned(), format!("{k}={v}")])
            .collect();
        options.extend(["--to-option".to_owned(), option.to_owned()]);
        let (code, result, stderr) = run(&snapshot_to(&credentials, &name(1), options), &result_file).await;
        assert_eq!(code, exit::BAD_INPUT, "{option}: {result:?}\n{stderr}");
        assert!(result.message.as_deref().unwrap().contains(says), "{option}: {result:?}");
        assert!(!stderr.contains("panicked"), "{option}: {stderr}");
    }

    // A credentials file larger than any Secret: refused without being read whole.
    let big = dir.path().join("big");
    s3.write_credentials(&big).unwrap();
    let file = std::fs::File::create(big.join("AWS_SESSION_TOKEN")).unwrap();
    file.set_len(64 * 1024 * 1024).unwrap();
    let (code, result, _) = run(&snapshot_to(&big, &name(1), s3.option_args("to")), &result_file).await;
    assert_eq!(code, exit::BAD_INPUT, "{result:?}");
    assert!(result.message.as_deref().unwrap().contains("longer than 1 MiB"), "{result:?}");

    // An object name longer than the stores' key limit.
    let long = format!("{}.db", "n".repeat(1100));
    let (code, result, _) = run(&snapshot_to(&credentials, &long, s3.option_args("to")), &result_file).await;
    assert_eq!(code, exit::BAD_INPUT, "{result:?}");
    assert!(result.message.as_deref().unwrap().contains("at most 1024"), "{result:?}");
}

/// A password in the store's endpoint URL is never shown, even when the store cannot be reached.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_password_in_the_endpoint_is_never_shown() {
    let dir = tempfile::tempdir().unwrap();
    let credentials = dir.path().join("credentials");
    write_credentials(&credentials, "access", "not-a-real-secret").unwrap();
    let closed = groundskeeper_e2e::net::ClosedPort::new();
    let unreachable = closed.addr();
    let args: Vec<String> = [
        "snapshot",
        "--endpoints",
        "http://127.0.0.1:1",
        "--to",
        "s3://snapshots/etcd",
        "--object",
        "main.db",
        "--to-credentials",
        &credentials.display().to_string(),
        "--to-option",
        &format!("endpoint=http://user:Hunter2Password@{unreachable}"),
        "--to-option",
        "allow_http=true",
        "--to-option",
        "region=us-east-1",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let (code, result, stderr) = run(&args, &dir.path().join("result.json")).await;
    assert_eq!(code, exit::RETRYABLE, "{result:?}");
    let json = serde_json::to_string(&result).unwrap();
    assert!(json.contains(&unreachable.to_string()), "the endpoint is named: {json}");
    assert!(!json.contains("Hunter2Password") && !stderr.contains("Hunter2Password"), "{json}\n{stderr}");

    // A password in the store's URL itself: refused, and not in any field of the result.
    let mut args = args;
    let to = args.iter().position(|a| a == "--to").unwrap() + 1;
    args[to] = "s3://AKIA:Hunter3Password@snapshots/etcd".into();
    let (code, result, stderr) = run(&args, &dir.path().join("result.json")).await;
    assert_eq!(code, exit::BAD_INPUT, "{result:?}");
    let json = serde_json::to_string(&result).unwrap();
    assert!(!json.contains("Hunter3Password") && !stderr.contains("Hunter3Password"), "{json}\n{stderr}");
}
