//! `groundskeeper-job snapshot-delta` and `snapshot-replay` against real etcd 3.4 and 3.5, into a
//! folder and into a real S3 server (s3s-fs): while a workload writes and deletes (single puts,
//! a multi-op transaction, keys with leases, a lease revoked), a full snapshot then two deltas are
//! taken, each starting where the store's newest ended; replaying them to several revisions gives
//! exactly the keyspace a range at that revision read from the live cluster (keys, values, create
//! and mod revisions, versions). A run with nothing new is skipped; a start etcd compacted fails
//! with HistoryCompacted and writes nothing; a killed run leaves nothing under a delta's name, a
//! stopped one (SIGTERM) aborts its upload; bad input exits 2 naming the flag. A missing etcd or
//! s3s-fs skips a test, saying so (under `CI=true` it fails).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use etcd_client::{Client, PutOptions, Txn, TxnOp};
use groundskeeper_e2e::etcd_cluster::{EtcdCluster, EtcdVersion};
use groundskeeper_job::etcd::delta::replay::keyspace_digest;
use groundskeeper_protocol::result::{DeltaFailureReason, DeltaReport, ReplayReport};
use groundskeeper_protocol::{JobResult, Outcome, Report, exit};

use crate::prove::{
    BIN, BucketWithSnapshots, TEMPLATE, Tools, cluster, listing, path, run, snapshot, strings, tools_or_skip,
};

groundskeeper_e2e::for_each_etcd_version!(fulls_and_deltas_replay_to_the_keyspace_of_every_revision,);

fn delta_report(result: &JobResult) -> &DeltaReport {
    match &result.report {
        Report::SnapshotDelta(report) => report,
        other => panic!("not a delta: {other:?}"),
    }
}

fn replay_report(result: &JobResult) -> &ReplayReport {
    match &result.report {
        Report::SnapshotReplay(report) => report,
        other => panic!("not a replay: {other:?}"),
    }
}

/// Where deltas go and come from: `--to`/`--from` and their options.
enum Store<'a> {
    Folder(PathBuf),
    Bucket(&'a BucketWithSnapshots),
}

impl Store<'_> {
    fn flags(&self, name: &str) -> Vec<String> {
        match self {
            Store::Folder(folder) => vec![format!("--{name}"), path(folder)],
            Store::Bucket(bucket) => bucket.flags(name),
        }
    }
}

async fn delta(
    cluster: &EtcdCluster,
    store: &Store<'_>,
    extra: &[&str],
    result_file: &Path,
) -> (i32, JobResult, String) {
    let mut args = strings(&["snapshot-delta", "--endpoints", &cluster.endpoints_flag()]);
    args.extend(store.flags("to"));
    args.extend(strings(&["--file-name-template", TEMPLATE, "--cluster", "main"]));
    args.extend(strings(extra));
    run(&args, &[], result_file).await
}

async fn replay(
    store: &Store<'_>,
    tools: &Tools,
    scratch: &Path,
    to: i64,
    result_file: &Path,
) -> (i32, JobResult, String) {
    let mut args = strings(&["snapshot-replay"]);
    args.extend(store.flags("from"));
    args.extend(strings(&["--file-name-template", TEMPLATE, "--cluster", "main", "--scratch-dir"]));
    args.push(path(scratch));
    args.extend(strings(&["--to-revision", &to.to_string()]));
    args.extend(tools.flags());
    run(&args, &[], result_file).await
}

async fn revision(client: &mut Client) -> i64 {
    client.get("x", None).await.unwrap().header().unwrap().revision()
}

/// Writes and deletes until told to stop: puts of new and old keys, deletes, every tenth round a
/// transaction of three puts and a delete.
fn workload(mut client: Client, prefix: &'static str, stop: Arc<AtomicBool>) -> tokio::task::JoinHandle<u64> {
    tokio::spawn(async move {
        let mut round = 0u64;
        while !stop.load(Ordering::Relaxed) {
            let key = format!("{prefix}/{:04}", round % 40);
            client.put(key.as_str(), format!("v{round}"), None).await.unwrap();
            if round % 3 == 2 {
                client.delete(format!("{prefix}/{:04}", (round + 7) % 40), None).await.unwrap();
            }
            if round % 10 == 9 {
                let ops = vec![
                    TxnOp::put(format!("{prefix}/txn-a"), format!("a{round}"), None),
                    TxnOp::put(format!("{prefix}/txn-b"), format!("b{round}"), None),
                    TxnOp::put(format!("{prefix}/txn-c/{round}"), "c", None),
                    TxnOp::delete(format!("{prefix}/{:04}", (round + 1) % 40), None),
                ];
                client.txn(Txn::new().and_then(ops)).await.unwrap();
            }
            round += 1;
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        round
    })
}

async fn fulls_and_deltas_replay_to_the_keyspace_of_every_revision(version: EtcdVersion) {
    let Some(tools) = tools_or_skip(version) else { return };
    let dir = tempfile::tempdir().unwrap();
    let Some(bucket) = BucketWithSnapshots::start(dir.path()) else { return };
    let Some(cluster) = cluster(version, 1).await else { return };
    let result_file = dir.path().join("result.json");
    let scratch = dir.path().join("scratch");
    std::fs::create_dir(&scratch).unwrap();
    let folder = dir.path().join("snapshots");
    std::fs::create_dir(&folder).unwrap();
    let mut client = cluster.client(None).await.unwrap();

    // Before the full snapshots: keys, one with a lease that outlives the test.
    let kept = client.lease_grant(600, None).await.unwrap().id();
    client.put("leased/kept", "1", Some(PutOptions::new().with_lease(kept))).await.unwrap();
    for i in 0..20 {
        client.put(format!("base/{i:02}"), format!("{i}"), None).await.unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let writer = workload(cluster.client(None).await.unwrap(), "w", stop.clone());
    tokio::time::sleep(Duration::from_millis(200)).await;

    snapshot(&cluster, &folder.join("main-20260101T000000Z.db")).await;
    bucket.snapshot(&cluster, "main-20260101T000000Z.db", &result_file).await;

    // Between the full snapshots and the first deltas: a lease granted and revoked, a new one
    // with a key, a multi-op transaction of this test's own.
    let revoked = client.lease_grant(600, None).await.unwrap().id();
    client.put("leased/revoked-a", "1", Some(PutOptions::new().with_lease(revoked))).await.unwrap();
    client.put("leased/revoked-b", "1", Some(PutOptions::new().with_lease(revoked))).await.unwrap();
    let fresh = client.lease_grant(600, None).await.unwrap().id();
    client.put("leased/fresh", "1", Some(PutOptions::new().with_lease(fresh))).await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut deltas = Vec::new();
    for store in [Store::Folder(folder.clone()), Store::Bucket(&bucket)] {
        let (code, result, stderr) = delta(&cluster, &store, &[], &result_file).await;
        assert_eq!(code, exit::SUCCESS, "{result:?}\n{stderr}");
        deltas.push(delta_report(&result).clone());
    }
    client.lease_revoke(revoked).await.unwrap();
    client.delete("base/", Some(etcd_client::DeleteOptions::new().with_prefix())).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    for store in [Store::Folder(folder.clone()), Store::Bucket(&bucket)] {
        let (code, result, stderr) = delta(&cluster, &store, &[], &result_file).await;
        assert_eq!(code, exit::SUCCESS, "{result:?}\n{stderr}");
        deltas.push(delta_report(&result).clone());
    }
    stop.store(true, Ordering::Relaxed);
    let rounds = writer.await.unwrap();
    assert!(rounds > 20, "the workload ran all along: {rounds} rounds");

    // Each delta starts where the store's newest full snapshot or delta ended, and ends at the
    // cluster's revision when it started.
    let (f1, b1, f2, b2) = (&deltas[0], &deltas[1], &deltas[2], &deltas[3]);
    for (first, second) in [(f1, f2), (b1, b2)] {
        assert_eq!(second.start_revision, first.end_revision, "{second:?}");
        assert!(first.start_from.as_deref().unwrap().ends_with(".db"), "{first:?}");
        assert!(second.start_from.as_deref().unwrap().ends_with(".delta"), "{second:?}");
        for delta in [first, second] {
            assert!(delta.events >= delta.transactions && delta.transactions > 0, "{delta:?}");
            assert_eq!(
                delta.transactions as i64,
                delta.end_revision - delta.start_revision,
                "one per revision"
            );
            assert!(delta.sha256.as_ref().is_some_and(|s| s.len() == 64), "{delta:?}");
            assert!(delta.size_bytes > 0 && delta.failure_reason.is_none(), "{delta:?}");
        }
    }
    let delta_files: Vec<String> = listing(&folder).into_iter().filter(|n| n.ends_with(".delta")).collect();
    assert_eq!(delta_files.len(), 2, "{:?}", listing(&folder));
    assert!(listing(&folder).iter().all(|n| !n.ends_with(".partial")), "{:?}", listing(&folder));
    let on_disk = std::fs::read(folder.join(f1.object.as_ref().unwrap())).unwrap();
    assert_eq!(on_disk.len() as u64, f1.size_bytes);
    assert!(on_disk.starts_with(b"GKDELTA\n"));
    let stored = bucket.server.object_file("backups", &format!("etcd/{}", b2.object.as_ref().unwrap()));
    assert_eq!(std::fs::metadata(&stored).unwrap().len(), b2.size_bytes);

    // Nothing new since the last delta: nothing to do, nothing written. (A first run catches up
    // with what the workload wrote after the bucket's last delta.)
    let bucket_store = Store::Bucket(&bucket);
    let (code, result, _) = delta(&cluster, &bucket_store, &[], &result_file).await;
    assert_eq!((code, result.outcome), (exit::SUCCESS, Outcome::Succeeded), "{result:?}");
    let (code, result, _) = delta(&cluster, &bucket_store, &[], &result_file).await;
    assert_eq!((code, result.outcome), (exit::SUCCESS, Outcome::Skipped), "{result:?}");
    assert_eq!(delta_report(&result).object, None, "{result:?}");

    // Replays to revisions in and at the end of each delta hold exactly what the cluster held
    // there (read before any compaction).
    for (store, first, second) in [(Store::Folder(folder.clone()), f1, f2), (Store::Bucket(&bucket), b1, b2)]
    {
        let targets = [
            first.start_revision,
            (first.start_revision + first.end_revision) / 2,
            first.end_revision,
            (second.start_revision + second.end_revision) / 2 + 1,
            second.end_revision,
        ];
        for to in targets {
            let started = Instant::now();
            let (code, result, stderr) = replay(&store, &tools, &scratch, to, &result_file).await;
            assert_eq!(code, exit::SUCCESS, "to {to}: {result:?}\n{stderr}");
            let report = replay_report(&result);
            let (keys, sha256) = keyspace_digest(&mut client, to).await.unwrap();
            assert!(report.replayed && report.revisions_exact, "{report:?}");
            assert_eq!(report.revision, Some(to), "{report:?}");
            assert_eq!(
                (report.keys, report.keys_sha256.as_deref()),
                (Some(keys), Some(sha256.as_str())),
                "to {to}"
            );
            eprintln!(
                "replayed to {to}: {} transaction(s), {} event(s) in {} ms ({} ms in all)",
                report.transactions,
                report.events,
                report.replay_ms,
                started.elapsed().as_millis()
            );
            assert_eq!(listing(&scratch), Vec::<String>::new(), "the scratch folder is emptied");
        }
    }
    // The lease granted after the full snapshot is granted in the member under its id.
    let (_, result, _) =
        replay(&Store::Folder(folder.clone()), &tools, &scratch, f2.end_revision, &result_file).await;
    assert!(replay_report(&result).leases_granted >= 1, "{result:?}");
    // Saved as a full snapshot of its own (what a Restore to a point in time restores): replayed
    // from alone, it serves that revision with exactly the keyspace the cluster had there.
    // Each store's own first delta: the workload writes between the two full snapshots, so the
    // bucket's may hold a later revision than the folder's.
    for (store, first) in [(Store::Folder(folder.clone()), f1), (Store::Bucket(&bucket), b1)] {
        let to = (first.start_revision + first.end_revision) / 2;
        let mut args = strings(&["snapshot-replay"]);
        args.extend(store.flags("from"));
        args.extend(strings(&["--file-name-template", TEMPLATE, "--cluster", "main", "--scratch-dir"]));
        args.push(path(&scratch));
        args.extend(strings(&["--to-revision", &to.to_string(), "--save-as", "pit.db"]));
        args.extend(tools.flags());
        let (code, result, stderr) = run(&args, &[], &result_file).await;
        assert_eq!(code, exit::SUCCESS, "{result:?}\n{stderr}");
        let saved = replay_report(&result).saved.clone().expect("the snapshot saved");
        assert_eq!((saved.object.as_str(), saved.revision), ("pit.db", Some(to)), "{saved:?}");
        assert!(saved.sha256.len() == 64 && saved.size_bytes > 0, "{saved:?}");
        let mut args = strings(&["snapshot-replay"]);
        args.extend(store.flags("from"));
        args.extend(strings(&["--object", "pit.db", "--file-name-template", TEMPLATE, "--cluster", "main"]));
        args.extend(strings(&["--scratch-dir", &path(&scratch), "--to-revision", &to.to_string()]));
        args.extend(tools.flags());
        let (code, result, stderr) = run(&args, &[], &result_file).await;
        assert_eq!(code, exit::SUCCESS, "{result:?}\n{stderr}");
        let again = replay_report(&result);
        let (keys, sha256) = keyspace_digest(&mut client, to).await.unwrap();
        assert_eq!((again.snapshot_revision, again.deltas.len()), (Some(to), 0), "{again:?}");
        assert_eq!((again.keys, again.keys_sha256.as_deref()), (Some(keys), Some(sha256.as_str())));
    }
    // A name that is not a plain file name is refused before anything is read.
    let mut args = strings(&["snapshot-replay", "--from", &path(&folder)]);
    args.extend(strings(&[
        "--file-name-template",
        TEMPLATE,
        "--cluster",
        "main",
        "--scratch-dir",
        &path(&scratch),
    ]));
    args.extend(strings(&["--save-as", "../escape.db"]));
    args.extend(tools.flags());
    let (code, result, _) = run(&args, &[], &result_file).await;
    assert_eq!(code, exit::BAD_INPUT, "{result:?}");
    assert!(result.message.unwrap_or_default().contains("--save-as"));

    // Past what the deltas hold: bad input naming the missing revision.
    let (code, result, _) =
        replay(&Store::Folder(folder.clone()), &tools, &scratch, f2.end_revision + 1_000, &result_file).await;
    assert_eq!(code, exit::BAD_INPUT, "{result:?}");
    assert!(result.message.unwrap().contains(&format!("holds revision {}", f2.end_revision + 1)));

    // A killed run leaves nothing under a delta's name: only its hidden partial file.
    let kill_folder = dir.path().join("killed");
    std::fs::create_dir(&kill_folder).unwrap();
    let full = snapshot(&cluster, &kill_folder.join("main-20260101T000000Z.db")).await;
    let before = full.revision.unwrap();
    assert_eq!(before, revision(&mut client).await, "nothing writes any more");
    let value = "x".repeat(1000);
    for batch in 0..400 {
        let ops: Vec<TxnOp> =
            (0..100).map(|i| TxnOp::put(format!("big/{batch:03}/{i:03}"), value.as_str(), None)).collect();
        client.txn(Txn::new().and_then(ops)).await.unwrap();
    }
    let mut child = std::process::Command::new(BIN)
        .args(strings(&[
            "snapshot-delta",
            "--endpoints",
            &cluster.endpoints_flag(),
            "--to",
            &path(&kill_folder),
        ]))
        .args(strings(&["--file-name-template", TEMPLATE, "--cluster", "main", "--start-revision"]))
        .arg(before.to_string())
        .arg("--result-file")
        .arg(dir.path().join("killed.json"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !listing(&kill_folder).iter().any(|n| n.ends_with(".partial")) {
        assert!(child.try_wait().unwrap().is_none(), "the run ended before it was killed");
        assert!(Instant::now() < deadline, "no partial file appeared");
        std::thread::sleep(Duration::from_millis(2));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let left = listing(&kill_folder);
    assert!(
        left.iter().all(|n| n.ends_with(".db") || (n.starts_with('.') && n.ends_with(".partial"))),
        "{left:?}"
    );
    // A stopped run (SIGTERM) into the bucket aborts its upload: no new object, retryable.
    let delta_objects = || -> Vec<String> {
        listing(&bucket.server.object_file("backups", "etcd"))
            .into_iter()
            .filter(|n| n.ends_with(".delta"))
            .collect()
    };
    let objects_before = delta_objects();
    let stopped_file = dir.path().join("stopped.json");
    let mut args = strings(&["snapshot-delta", "--endpoints", &cluster.endpoints_flag()]);
    args.extend(bucket.flags("to"));
    args.extend(strings(&["--file-name-template", TEMPLATE, "--cluster", "main", "--start-revision"]));
    args.extend([before.to_string(), "--result-file".into(), path(&stopped_file)]);
    let child = tokio::process::Command::new(BIN)
        .args(&args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while bucket.server.upload_parts().is_empty() {
        assert!(Instant::now() < deadline, "no upload started");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // SAFETY: kill(2) on the child's pid, which it still has (not reaped yet).
    unsafe { libc::kill(child.id().unwrap() as i32, libc::SIGTERM) };
    let out = child.wait_with_output().await.unwrap();
    assert_eq!(out.status.code(), Some(exit::RETRYABLE), "{}", String::from_utf8_lossy(&out.stderr));
    let result = JobResult::parse(&std::fs::read_to_string(&stopped_file).unwrap()).unwrap();
    assert_eq!(result.stopped_by.as_deref(), Some("SIGTERM"), "{result:?}");
    assert!(result.message.unwrap().contains("nothing was written under its name"));
    assert_eq!(delta_objects(), objects_before);
    assert!(bucket.server.upload_parts().is_empty(), "aborted: {:?}", bucket.server.upload_parts());

    // The next run takes the whole of it (40,000 changes of 1 kB values in 400 transactions),
    // and a replay brings it back.
    let store = Store::Folder(kill_folder.clone());
    let (code, result, stderr) = delta(&cluster, &store, &[], &result_file).await;
    assert_eq!(code, exit::SUCCESS, "{result:?}\n{stderr}");
    let big = delta_report(&result).clone();
    assert_eq!((big.start_revision, big.transactions, big.events), (before, 400, 40_000), "{big:?}");
    // The killed run's hidden leftover is never taken for a delta: the replay below starts from
    // the full snapshot and this delta alone.
    let names = listing(&kill_folder);
    assert_eq!(names.iter().filter(|n| n.ends_with(".delta")).count(), 1, "{names:?}");
    let (code, result, stderr) = replay(&store, &tools, &scratch, big.end_revision, &result_file).await;
    assert_eq!(code, exit::SUCCESS, "{result:?}\n{stderr}");
    let replayed = replay_report(&result).clone();
    let (keys, sha256) = keyspace_digest(&mut client, big.end_revision).await.unwrap();
    assert_eq!((replayed.keys, replayed.keys_sha256), (Some(keys), Some(sha256)));
    eprintln!(
        "etcd {version:?}: a delta of {} changes in {} transactions: {} bytes ({} bytes per 1000 \
         changes), read in {} ms; replayed in {} ms",
        big.events,
        big.transactions,
        big.size_bytes,
        big.size_bytes * 1000 / big.events,
        big.read_duration_ms,
        replayed.replay_ms
    );

    // A start etcd compacted: HistoryCompacted, exit 2, nothing written.
    let now = revision(&mut client).await;
    client.compact(now, None).await.unwrap();
    let before = listing(&folder);
    let start = f2.end_revision.to_string();
    let (code, result, _) =
        delta(&cluster, &Store::Folder(folder.clone()), &["--start-revision", &start], &result_file).await;
    assert_eq!(code, exit::BAD_INPUT, "{result:?}");
    let report = delta_report(&result);
    assert_eq!(report.failure_reason, Some(DeltaFailureReason::HistoryCompacted), "{report:?}");
    assert_eq!(report.compact_revision, Some(now), "{report:?}");
    assert!(result.message.as_deref().unwrap().contains("HistoryCompacted"), "{result:?}");
    assert_eq!(listing(&folder), before, "nothing written");
    let (code, result, _) =
        delta(&cluster, &Store::Bucket(&bucket), &["--start-revision", &start], &result_file).await;
    assert_eq!(code, exit::BAD_INPUT, "{result:?}");
    assert_eq!(delta_report(&result).failure_reason, Some(DeltaFailureReason::HistoryCompacted));
}

/// Mistakes in the arguments are found before etcd is asked: exit 2, the flag named.
#[tokio::test]
async fn bad_input_exits_2_naming_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let result_file = dir.path().join("result.json");
    let folder = path(dir.path());
    let base = [
        "snapshot-delta",
        "--endpoints",
        "http://127.0.0.1:1",
        "--file-name-template",
        TEMPLATE,
        "--cluster",
        "main",
    ];
    for (extra, says) in [
        (vec!["--to", &folder, "--start-revision", "10", "--end-revision", "5"], "--end-revision 5"),
        (vec!["--to", &folder, "--start-revision=-1"], "--start-revision -1"),
        (vec!["--to", "ftp://somewhere/x"], "--to ftp://somewhere/x"),
        (vec!["--to", "relative/folder"], "--to relative/folder"),
        (vec!["--to", "/no/such/folder"], "--to /no/such/folder"),
    ] {
        let mut args = strings(&base);
        args.extend(strings(&extra));
        let (code, result, _) = run(&args, &[], &result_file).await;
        assert_eq!(code, exit::BAD_INPUT, "{extra:?}: {result:?}");
        let message = result.message.unwrap();
        assert!(message.contains(says), "{extra:?}: {message}");
        assert!(matches!(result.report, Report::SnapshotDelta(_)));
    }
    let args = strings(&[
        "snapshot-replay",
        "--from",
        &folder,
        "--file-name-template",
        TEMPLATE,
        "--cluster",
        "main",
        "--to-revision",
        "0",
        "--scratch-dir",
        &folder,
    ]);
    let (code, result, _) = run(&args, &[], &result_file).await;
    assert_eq!(code, exit::BAD_INPUT, "{result:?}");
    assert!(result.message.unwrap().contains("--to-revision 0"));
}

/// Values large enough that a page of 1,000 keys is more than a gRPC message (4 MiB): 80 keys of
/// 100 KiB in the full snapshot, 40 more in the delta. The replay's check of the keyspace reads
/// smaller pages and gives exactly the live cluster's digest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyspace_of_large_values_is_replayed_and_checked_whole() {
    let Some(tools) = tools_or_skip(EtcdVersion::V3_5) else { return };
    let Some(cluster) = cluster(EtcdVersion::V3_5, 1).await else { return };
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("snapshots");
    let scratch = dir.path().join("scratch");
    std::fs::create_dir(&folder).unwrap();
    std::fs::create_dir(&scratch).unwrap();
    let result_file = dir.path().join("result.json");
    let mut client = cluster.client(None).await.unwrap();
    let value = "x".repeat(100 * 1024);
    for i in 0..80 {
        client.put(format!("large/{i:03}"), value.as_str(), None).await.unwrap();
    }
    snapshot(&cluster, &folder.join("main-20260101T000000Z.db")).await;
    for i in 80..120 {
        client.put(format!("large/{i:03}"), value.as_str(), None).await.unwrap();
    }
    let store = Store::Folder(folder.clone());
    let (code, result, stderr) = delta(&cluster, &store, &[], &result_file).await;
    assert_eq!(code, exit::SUCCESS, "{result:?}\n{stderr}");
    let to = delta_report(&result).end_revision;
    let (code, result, stderr) = replay(&store, &tools, &scratch, to, &result_file).await;
    assert_eq!(code, exit::SUCCESS, "{result:?}\n{stderr}");
    let report = replay_report(&result);
    let (keys, sha256) = keyspace_digest(&mut client, to).await.unwrap();
    assert_eq!(keys, 120);
    assert_eq!(
        (report.keys, report.keys_sha256.as_deref()),
        (Some(keys), Some(sha256.as_str())),
        "{report:?}"
    );
}
