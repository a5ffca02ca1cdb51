//! Compressed and encrypted snapshots and deltas against real etcd 3.4 and 3.5 and a real S3
//! server (s3s-fs): written with `--compression zstd` and `--encryption-key`, in a folder and in a
//! bucket, beside plain ones; verified, proven, replayed to a point in time (exactly the keyspace
//! the cluster had there), saved encrypted, copied as they are and proven from the copy. A wrong
//! or missing key is exit 2 naming the key id the object needs; a byte changed in a sealed file is
//! exit 2; bad flags are exit 2 naming the flag. A missing etcd or s3s-fs skips a test, saying so
//! (under `CI=true` it fails).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use etcd_client::Client;
use groundskeeper_e2e::etcd_cluster::EtcdVersion;
use groundskeeper_job::etcd::delta::replay::keyspace_digest;
use groundskeeper_protocol::result::{
    CopyReport, DeltaReport, ErrorReason, ProveReport, ReplayReport, SnapshotReport,
};
use groundskeeper_protocol::{JobResult, Report, exit};

use crate::prove::{BucketWithSnapshots, TEMPLATE, cluster, path, run, snapshot, strings, tools_or_skip};

groundskeeper_e2e::for_each_etcd_version!(encoded_backups_restore_exactly_and_a_wrong_key_is_named,);

const SEALED: &[u8] = b"GKSEAL1\n";
const ZSTD: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

fn report_of<T: Clone>(result: &JobResult, pick: impl Fn(&Report) -> Option<&T>) -> T {
    pick(&result.report).cloned().unwrap_or_else(|| panic!("another report: {result:?}"))
}

/// The cause the result gives its failure, where the controller tells it apart.
fn reason(result: &JobResult) -> Option<ErrorReason> {
    result.error.as_ref().and_then(|e| e.reason)
}

fn snapshot_report(result: &JobResult) -> SnapshotReport {
    report_of(result, |r| if let Report::Snapshot(s) = r { Some(s) } else { None })
}

fn delta_report(result: &JobResult) -> DeltaReport {
    report_of(result, |r| if let Report::SnapshotDelta(s) = r { Some(s) } else { None })
}

fn replay_report(result: &JobResult) -> ReplayReport {
    report_of(result, |r| if let Report::SnapshotReplay(s) = r { Some(s) } else { None })
}

fn prove_report(result: &JobResult) -> ProveReport {
    report_of(result, |r| if let Report::SnapshotProve(s) = r { Some(s) } else { None })
}

fn copy_report(result: &JobResult) -> CopyReport {
    report_of(result, |r| if let Report::SnapshotCopy(s) = r { Some(s) } else { None })
}

/// Two key files: 32 raw bytes, and another key as base64 with a line end (as a Secret made
/// with `--from-literal=key=$(openssl rand -base64 32)` holds it).
fn key_files(dir: &Path) -> (String, String) {
    let raw = dir.join("key-raw");
    std::fs::write(&raw, [0x5au8; 32]).unwrap();
    let base64 = dir.join("key-base64");
    std::fs::write(&base64, "AQgPFh0kKzI5QEdOVVxjanF4f4aNlJuiqbC3vsXM0+A=\n").unwrap();
    (path(&raw), path(&base64))
}

async fn write_keys(client: &mut Client, prefix: &str, n: usize) {
    // Values that compress as a real keyspace does (repeated structure, some variety).
    for i in 0..n {
        let value = format!(
            "{{\"kind\":\"ConfigMap\",\"name\":\"{prefix}-{i}\",\"data\":\"{}\"}}",
            "x".repeat(i % 300)
        );
        client.put(format!("{prefix}/{i:05}"), value, None).await.unwrap();
    }
}

async fn encoded_backups_restore_exactly_and_a_wrong_key_is_named(version: EtcdVersion) {
    let Some(tools) = tools_or_skip(version) else { return };
    let dir = tempfile::tempdir().unwrap();
    let Some(bucket) = BucketWithSnapshots::start(dir.path()) else { return };
    let Some(cluster) = cluster(version, 1).await else { return };
    let (key, other_key) = key_files(dir.path());
    let result_file = dir.path().join("result.json");
    let scratch = dir.path().join("scratch");
    let folder = dir.path().join("snapshots");
    for d in [&scratch, &folder] {
        std::fs::create_dir(d).unwrap();
    }
    let mut client = cluster.client(None).await.unwrap();
    write_keys(&mut client, "base", 400).await;
    let sealed_flags = ["--compression", "zstd", "--encryption-key", key.as_str()];

    // A full snapshot into the folder, compressed and encrypted: a sealed file, smaller than the
    // snapshot it holds, whose stored and content hashes both are reported.
    let file = folder.join("main-20260101T000000Z.db");
    let mut args = strings(&["snapshot", "--endpoints", &cluster.endpoints_flag(), "--output", &path(&file)]);
    args.extend(strings(&sealed_flags));
    let (code, result, stderr) = run(&args, &[], &result_file).await;
    assert_eq!(code, exit::SUCCESS, "{result:?}\n{stderr}");
    let full = snapshot_report(&result);
    let stored = std::fs::read(&file).unwrap();
    assert!(stored.starts_with(SEALED), "a sealed file");
    assert_eq!(full.stored.encoding.as_deref(), Some("zstd+aes-256-gcm"), "{full:?}");
    let key_id = full.stored.key_id.clone().expect("the key's id is recorded");
    assert_eq!(full.size_bytes, stored.len() as u64);
    assert_eq!(full.sha256.as_deref(), Some(sha256_hex(&stored).as_str()), "sha256 is of the bytes stored");
    let content = full.stored.content_bytes.unwrap();
    assert!(content > 2 * full.size_bytes, "compressed: {content} → {} bytes", full.size_bytes);
    assert!(result.message.as_deref().unwrap().contains("times smaller"), "{:?}", result.message);
    assert!(
        !stderr.contains("WlpaWlpa") && !String::from_utf8_lossy(&stored).contains("ZZZZZZZZ"),
        "the key is nowhere"
    );

    // `snapshot verify` decodes with the key; without it, or with another, exit 2 naming the id.
    let verify = |extra: &[&str]| {
        let mut args = strings(&["snapshot", "verify", &path(&file)]);
        args.extend(strings(extra));
        args
    };
    let (code, result, stderr) = run(&verify(&["--encryption-key", &key]), &[], &result_file).await;
    assert_eq!(code, exit::SUCCESS, "{result:?}\n{stderr}");
    assert_eq!(snapshot_report(&result).revision, full.revision);
    let (code, result, stderr) = run(&verify(&[]), &[], &result_file).await;
    assert_eq!((code, reason(&result)), (exit::BAD_INPUT, Some(ErrorReason::KeyMissing)));
    assert!(stderr.contains(&key_id) && stderr.contains("--encryption-key"), "{stderr}");
    let (code, result, stderr) = run(&verify(&["--encryption-key", &other_key]), &[], &result_file).await;
    assert_eq!((code, reason(&result)), (exit::BAD_INPUT, Some(ErrorReason::KeyMismatch)));
    assert!(stderr.contains(&key_id) && stderr.contains(&other_key), "names both keys: {stderr}");

    // Decoded by hand into a plain file etcd's own tools restore: its hash is the content's.
    let plain_file = dir.path().join("plain.db");
    let decode = |extra: &[&str]| {
        let mut args = strings(&["snapshot", "decode", &path(&file), "--output", &path(&plain_file)]);
        args.extend(strings(extra));
        args
    };
    let (code, result, _) = run(&decode(&["--encryption-key", &other_key]), &[], &result_file).await;
    assert_eq!((code, reason(&result)), (exit::BAD_INPUT, Some(ErrorReason::KeyMismatch)), "{result:?}");
    assert!(!plain_file.exists(), "nothing left behind");
    let (code, result, stderr) = run(&decode(&["--encryption-key", &key]), &[], &result_file).await;
    assert_eq!(code, exit::SUCCESS, "{result:?}\n{stderr}");
    assert_eq!(snapshot_report(&result).revision, full.revision);
    let decoded = std::fs::read(&plain_file).unwrap();
    assert_eq!(Some(sha256_hex(&decoded)), full.stored.content_sha256);
    assert_eq!(decoded.len() as u64, content);

    // A full snapshot into the bucket, compressed only: a standard zstd frame anyone can read.
    let mut args = strings(&[
        "snapshot",
        "--endpoints",
        &cluster.endpoints_flag(),
        "--object",
        "main-20260101T000000Z.db",
    ]);
    args.extend(bucket.flags("to"));
    args.extend(strings(&["--compression", "zstd"]));
    let (code, result, stderr) = run(&args, &[], &result_file).await;
    assert_eq!(code, exit::SUCCESS, "{result:?}\n{stderr}");
    let zstd_full = snapshot_report(&result);
    let object =
        std::fs::read(bucket.server.object_file("backups", "etcd/main-20260101T000000Z.db")).unwrap();
    assert!(object.starts_with(&ZSTD));
    let plain = zstd::stream::decode_all(object.as_slice()).unwrap();
    assert_eq!(Some(plain.len() as u64), zstd_full.stored.content_bytes);
    assert_eq!(zstd_full.stored.content_sha256.as_deref(), Some(sha256_hex(&plain).as_str()));
    assert_eq!(zstd_full.stored.key_id, None);

    // Under writes, deltas on both stores: encrypted in the bucket (whose full is compressed
    // only: one store holds both), and encrypted in the folder.
    let stop = Arc::new(AtomicBool::new(false));
    let writer = workload(cluster.client(None).await.unwrap(), stop.clone());
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut deltas = Vec::new();
    for (store, flags) in
        [(folder_flags(&folder, "to"), sealed_flags.to_vec()), (bucket.flags("to"), sealed_flags.to_vec())]
    {
        let mut args = strings(&["snapshot-delta", "--endpoints", &cluster.endpoints_flag()]);
        args.extend(store);
        args.extend(strings(&["--file-name-template", TEMPLATE, "--cluster", "main"]));
        args.extend(strings(&flags));
        let (code, result, stderr) = run(&args, &[], &result_file).await;
        assert_eq!(code, exit::SUCCESS, "{result:?}\n{stderr}");
        let delta = delta_report(&result);
        assert_eq!(delta.stored.encoding.as_deref(), Some("zstd+aes-256-gcm"), "{delta:?}");
        assert!(delta.transactions > 0, "{delta:?}");
        deltas.push(delta);
    }
    stop.store(true, Ordering::Relaxed);
    writer.await.unwrap();
    let on_disk = std::fs::read(folder.join(deltas[0].object.as_ref().unwrap())).unwrap();
    assert!(on_disk.starts_with(SEALED), "the delta file is sealed");
    assert_eq!(Some(sha256_hex(&on_disk)), deltas[0].sha256);

    // Replays to points inside each delta hold exactly the cluster's keyspace there; the key is
    // needed, and a wrong one is named.
    for (store, delta) in [(folder_flags(&folder, "from"), &deltas[0]), (bucket.flags("from"), &deltas[1])] {
        let to = (delta.start_revision + delta.end_revision) / 2 + 1;
        let replay = |extra: &[&str]| {
            let mut args = strings(&["snapshot-replay"]);
            args.extend(store.clone());
            args.extend(strings(&[
                "--file-name-template",
                TEMPLATE,
                "--cluster",
                "main",
                "--scratch-dir",
                &path(&scratch),
            ]));
            args.extend(strings(&["--to-revision", &to.to_string()]));
            args.extend(tools.flags());
            args.extend(strings(extra));
            args
        };
        let (code, result, stderr) = run(&replay(&["--encryption-key", &key]), &[], &result_file).await;
        assert_eq!(code, exit::SUCCESS, "to {to}: {result:?}\n{stderr}");
        let report = replay_report(&result);
        let (keys, digest) = keyspace_digest(&mut client, to).await.unwrap();
        assert!(report.replayed && report.revisions_exact, "{report:?}");
        assert_eq!(
            (report.keys, report.keys_sha256.as_deref()),
            (Some(keys), Some(digest.as_str())),
            "to {to}"
        );
        let (code, result, _) = run(&replay(&["--encryption-key", &other_key]), &[], &result_file).await;
        assert_eq!((code, reason(&result)), (exit::BAD_INPUT, Some(ErrorReason::KeyMismatch)), "{result:?}");
        assert!(result.message.unwrap().contains(&key_id));
    }

    // Saved encrypted as a full snapshot of its own (what a Restore to a point in time restores),
    // then proven alone from the bucket, with the key.
    let to = deltas[1].end_revision;
    let mut args = strings(&["snapshot-replay"]);
    args.extend(bucket.flags("from"));
    args.extend(strings(&[
        "--file-name-template",
        TEMPLATE,
        "--cluster",
        "main",
        "--scratch-dir",
        &path(&scratch),
    ]));
    args.extend(strings(&["--to-revision", &to.to_string(), "--save-as", "main-20260102T000000Z.db"]));
    args.extend(strings(&sealed_flags));
    args.extend(tools.flags());
    let (code, result, stderr) = run(&args, &[], &result_file).await;
    assert_eq!(code, exit::SUCCESS, "{result:?}\n{stderr}");
    let saved = replay_report(&result).saved.expect("saved");
    assert_eq!(saved.stored.encoding.as_deref(), Some("zstd+aes-256-gcm"), "{saved:?}");
    let prove = |store: Vec<String>, extra: &[&str]| {
        let mut args = strings(&["snapshot-prove"]);
        args.extend(store);
        args.extend(strings(&[
            "--file-name-template",
            TEMPLATE,
            "--cluster",
            "main",
            "--scratch-dir",
            &path(&scratch),
        ]));
        args.extend(tools.flags());
        args.extend(strings(extra));
        args
    };
    let (code, result, stderr) =
        run(&prove(bucket.flags("from"), &["--encryption-key", &key]), &[], &result_file).await;
    assert_eq!(code, exit::SUCCESS, "{result:?}\n{stderr}");
    let proof = prove_report(&result);
    assert!(proof.proven && proof.revision == Some(to), "{proof:?}");
    assert_eq!(
        (proof.sha256.as_deref(), proof.stored.key_id.as_deref()),
        (Some(saved.sha256.as_str()), Some(key_id.as_str()))
    );
    let (code, result, _) = run(&prove(bucket.flags("from"), &[]), &[], &result_file).await;
    assert_eq!(
        (code, reason(&result)),
        (exit::BAD_INPUT, Some(ErrorReason::KeyMissing)),
        "no key: {result:?}"
    );
    assert!(!prove_report(&result).proven);

    // Copied as they are, with no key: the folder's sealed files into the bucket under another
    // prefix (their encoding recorded in the objects' metadata), then proven from there.
    let mut args = strings(&["snapshot-copy", "--from", &path(&folder), "--to", "s3://backups/offsite"]);
    args.extend(bucket.server.option_args("to"));
    args.extend(strings(&[
        "--to-credentials",
        &path(&bucket.credentials),
        "--file-name-template",
        TEMPLATE,
        "--cluster",
        "main",
    ]));
    let (code, result, stderr) = run(&args, &[], &result_file).await;
    assert_eq!(code, exit::SUCCESS, "{result:?}\n{stderr}");
    let copied = copy_report(&result);
    assert_eq!(copied.copied.len(), 1, "the full snapshot (deltas are not copied): {copied:?}");
    assert_eq!(copied.copied[0].sha256, full.sha256.clone().unwrap(), "the same bytes");
    assert_eq!(copied.copied[0].stored.key_id.as_deref(), Some(key_id.as_str()), "{copied:?}");
    let offsite =
        std::fs::read(bucket.server.object_file("backups", "offsite/main-20260101T000000Z.db")).unwrap();
    assert_eq!(offsite, stored, "carried as it is");
    let mut from_offsite = vec!["--from".to_owned(), "s3://backups/offsite".to_owned()];
    from_offsite.extend(bucket.server.option_args("from"));
    from_offsite.extend(["--from-credentials".to_owned(), path(&bucket.credentials)]);
    let (code, result, stderr) =
        run(&prove(from_offsite, &["--encryption-key", &key]), &[], &result_file).await;
    assert_eq!(code, exit::SUCCESS, "{result:?}\n{stderr}");
    assert_eq!(prove_report(&result).revision, full.revision);

    // A byte changed inside the sealed file: it does not open (exit 2), the proof says so.
    let mut damaged = stored.clone();
    let at = damaged.len() / 2;
    damaged[at] ^= 0x10;
    std::fs::write(&file, &damaged).unwrap();
    let (code, result, _) =
        run(&prove(folder_flags(&folder, "from"), &["--encryption-key", &key]), &[], &result_file).await;
    assert_eq!((code, reason(&result)), (exit::BAD_INPUT, None), "{result:?}");
    assert!(result.message.unwrap().contains("does not authenticate"));
    assert!(std::fs::read_dir(&scratch).unwrap().next().is_none(), "the scratch folder is emptied");

    // A plain snapshot beside them still restores, key or no key.
    let plain_file = folder.join("main-20260103T000000Z.db");
    snapshot(&cluster, &plain_file).await;
    let (code, result, stderr) =
        run(&prove(folder_flags(&folder, "from"), &["--encryption-key", &key]), &[], &result_file).await;
    assert_eq!(code, exit::SUCCESS, "{result:?}\n{stderr}");
    assert!(prove_report(&result).stored.is_plain());
}

fn folder_flags(folder: &Path, name: &str) -> Vec<String> {
    vec![format!("--{name}"), path(folder)]
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// Puts and deletes until told to stop.
fn workload(mut client: Client, stop: Arc<AtomicBool>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut round = 0u64;
        while !stop.load(Ordering::Relaxed) {
            client.put(format!("w/{:03}", round % 50), format!("value {round}"), None).await.unwrap();
            if round % 4 == 3 {
                client.delete(format!("w/{:03}", (round + 9) % 50), None).await.unwrap();
            }
            round += 1;
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
}

/// Bad flags are exit 2 naming the flag (or the key's file), before etcd or a store is asked;
/// a key file's content is never shown.
#[tokio::test]
async fn bad_encoding_flags_are_refused_naming_them() {
    let dir = tempfile::tempdir().unwrap();
    let result_file = dir.path().join("result.json");
    let short_key = dir.path().join("short");
    std::fs::write(&short_key, "c2VjcmV0LXZhbHVl\n").unwrap();
    let output = path(&dir.path().join("main.db"));
    let snapshot = |extra: &[&str]| {
        let mut args = strings(&["snapshot", "--endpoints", "http://127.0.0.1:9", "--output", &output]);
        args.extend(strings(extra));
        args
    };
    let short = path(&short_key);
    let missing = path(&dir.path().join("missing"));
    for (args, names) in [
        (snapshot(&["--compression", "gzip"]), "--compression \"gzip\""),
        (snapshot(&["--compression", "zstd", "--compression-level", "22"]), "--compression-level 22"),
        (snapshot(&["--encryption-key", &short]), short.as_str()),
        (snapshot(&["--encryption-key", &missing]), missing.as_str()),
        (
            strings(&[
                "snapshot-prove",
                "--from",
                &path(dir.path()),
                "--file-name-template",
                TEMPLATE,
                "--cluster",
                "main",
                "--scratch-dir",
                &path(dir.path()),
                "--encryption-key",
                &short,
            ]),
            short.as_str(),
        ),
    ] {
        let (code, result, stderr) = run(&args, &[], &result_file).await;
        assert_eq!(code, exit::BAD_INPUT, "{args:?}: {result:?}\n{stderr}");
        let message = result.message.unwrap_or_default();
        assert!(message.contains(names), "{args:?}: {message}");
        assert!(!message.contains("c2VjcmV0") && !stderr.contains("c2VjcmV0"), "never the key: {message}");
    }
}
