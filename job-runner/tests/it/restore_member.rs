//! `groundskeeper-job restore-member` against real etcd 3.4 and 3.5 snapshots, on folders that
//! stand for members' volumes holding old data: the old data is moved aside intact, each
//! member's data restored with one new initial cluster and token, and three real members started
//! on the restored folders form a new cluster holding the keys written before the snapshot. A
//! repeated run does nothing; a run killed in the middle is finished by the next; bad input
//! leaves the volume as it was. A missing etcd or restore tool skips a test, saying so.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use etcd_client::{Client, ConnectOptions, GetOptions};
use groundskeeper_e2e::etcd_cluster::EtcdVersion;
use groundskeeper_protocol::result::{ErrorReason, RestoreMemberReport};
use groundskeeper_protocol::{JobResult, Outcome, Report, exit};

use crate::prove::{BIN, cluster, listing, path, run, snapshot, strings, tools_or_skip, write_known_keys};

const SUFFIX: &str = ".pre-restore-t1";

/// A folder standing for one member's volume: `data` holds its old data, `keep.txt` is
/// something else on the volume that must never be touched.
struct Volume {
    root: PathBuf,
    data: PathBuf,
}

impl Volume {
    fn with_old_data(parent: &Path, name: &str) -> Self {
        let root = parent.join(format!("volume-{name}"));
        let data = root.join("data");
        std::fs::create_dir_all(data.join("member/snap")).unwrap();
        std::fs::create_dir_all(data.join("member/wal")).unwrap();
        std::fs::write(data.join("member/snap/db"), format!("old database of {name}")).unwrap();
        std::fs::write(data.join("member/wal/0.wal"), format!("old wal of {name}")).unwrap();
        std::fs::write(root.join("keep.txt"), "not etcd's").unwrap();
        Self { root, data }
    }

    fn old(&self) -> PathBuf {
        PathBuf::from(format!("{}{SUFFIX}", self.data.display()))
    }

    fn partial(&self) -> PathBuf {
        PathBuf::from(format!("{}.partial-restore", self.data.display()))
    }

    fn marker(&self) -> PathBuf {
        PathBuf::from(format!("{}.groundskeeper-restore.json", self.data.display()))
    }
}

/// Every file under `dir` with its bytes, by relative path: what "left as it was" compares.
fn fingerprint(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, into: &mut BTreeMap<String, Vec<u8>>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            let relative = entry.path().strip_prefix(root).unwrap().display().to_string();
            if entry.file_type().unwrap().is_dir() {
                into.insert(format!("{relative}/"), vec![]);
                walk(root, &entry.path(), into);
            } else {
                into.insert(relative, std::fs::read(entry.path()).unwrap());
            }
        }
    }
    let mut files = BTreeMap::new();
    walk(dir, dir, &mut files);
    files
}

/// One member of the new cluster: name, client port, peer URL.
struct NewMember {
    name: String,
    client_port: u16,
    peer_url: String,
}

/// A new cluster's members on free loopback ports, and its `--initial-cluster`.
fn new_cluster(n: usize) -> (Vec<NewMember>, String) {
    let ports = groundskeeper_e2e::net::free_ports(2 * n).unwrap();
    let port = |i: usize| ports[i];
    let members: Vec<NewMember> = (0..n)
        .map(|i| NewMember {
            name: format!("m{i}"),
            client_port: port(2 * i),
            peer_url: format!("http://127.0.0.1:{}", port(2 * i + 1)),
        })
        .collect();
    let initial = members.iter().map(|m| format!("{}={}", m.name, m.peer_url)).collect::<Vec<_>>().join(",");
    (members, initial)
}

struct Restore<'a> {
    folder: &'a Path,
    object: &'a str,
    data: &'a Path,
    member: &'a NewMember,
    initial_cluster: &'a str,
    token: &'a str,
    scratch: &'a Path,
    tool: &'a Path,
}

impl Restore<'_> {
    fn args(&self, extra: &[&str]) -> Vec<String> {
        let mut args = strings(&[
            "restore-member",
            "--from",
            &path(self.folder),
            "--object",
            self.object,
            "--data-dir",
            &path(self.data),
            "--name",
            &self.member.name,
            "--initial-cluster",
            self.initial_cluster,
            "--initial-advertise-peer-urls",
            &self.member.peer_url,
            "--initial-cluster-token",
            self.token,
            "--keep-old-suffix",
            SUFFIX,
            "--scratch-dir",
            &path(self.scratch),
            "--etcdutl",
            &path(self.tool),
        ]);
        args.extend(strings(extra));
        args
    }

    async fn run(&self, extra: &[&str], result_file: &Path) -> (i32, JobResult) {
        let (code, result, stderr) = run(&self.args(extra), &[], result_file).await;
        eprintln!("{stderr}");
        (code, result)
    }
}

fn restore_report(result: &JobResult) -> &RestoreMemberReport {
    match &result.report {
        Report::RestoreMember(report) => report,
        other => panic!("not a restore-member report: {other:?}"),
    }
}

/// etcd members started on restored folders; killed when dropped.
struct Running(Vec<Child>);

impl Drop for Running {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Starts one etcd per member on its restored data folder (the flags it was restored with) and
/// waits until all answer with one leader; returns them and a client of the whole cluster.
async fn start_restored(
    etcd: &Path,
    members: &[NewMember],
    data: &[PathBuf],
    initial_cluster: &str,
    token: &str,
    logs: &Path,
) -> (Running, Client) {
    let mut running = Running(Vec::new());
    for (member, data) in members.iter().zip(data) {
        let url = format!("http://127.0.0.1:{}", member.client_port);
        let log = std::fs::File::create(logs.join(format!("{}.log", member.name))).unwrap();
        let child = std::process::Command::new(etcd)
            .arg(format!("--name={}", member.name))
            .arg(format!("--data-dir={}", data.display()))
            .arg(format!("--listen-client-urls={url}"))
            .arg(format!("--advertise-client-urls={url}"))
            .arg(format!("--listen-peer-urls={}", member.peer_url))
            .arg(format!("--initial-advertise-peer-urls={}", member.peer_url))
            .arg(format!("--initial-cluster={initial_cluster}"))
            .arg(format!("--initial-cluster-token={token}"))
            .arg("--logger=zap")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        running.0.push(child);
    }
    let urls: Vec<String> = members.iter().map(|m| format!("http://127.0.0.1:{}", m.client_port)).collect();
    let options = ConnectOptions::new()
        .with_connect_timeout(Duration::from_secs(2))
        .with_timeout(Duration::from_secs(5));
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let mut leaders = Vec::new();
        for url in &urls {
            if let Ok(mut client) = Client::connect([url.as_str()], Some(options.clone())).await
                && let Ok(status) = client.status().await
            {
                leaders.push(status.leader());
            }
        }
        if leaders.len() == urls.len() && leaders[0] != 0 && leaders.iter().all(|l| *l == leaders[0]) {
            break;
        }
        for child in &mut running.0 {
            let exited = child.try_wait().unwrap();
            assert!(exited.is_none(), "a restored member exited ({exited:?}); logs in {}", logs.display());
        }
        assert!(Instant::now() < deadline, "the restored members did not form a cluster: {leaders:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let client = Client::connect(&urls, Some(options)).await.unwrap();
    (running, client)
}

/// The `k/` keys and values a cluster holds.
async fn known_keys(client: &mut Client) -> Vec<(String, String)> {
    let got = client.get("k/", Some(GetOptions::new().with_prefix())).await.unwrap();
    got.kvs()
        .iter()
        .map(|kv| (kv.key_str().unwrap().to_owned(), kv.value_str().unwrap().to_owned()))
        .collect()
}

/// What `write_known_keys(…, 50)` leaves.
fn expected_keys() -> Vec<(String, String)> {
    (0..50).filter(|i| *i != 1).map(|i| (format!("k/{i:03}"), format!("k/{i:03}"))).collect()
}

/// A snapshot of a cluster holding the known keys, in `dir/snapshots/main.db`; its revision and
/// SHA-256.
async fn snapshot_with_known_keys(
    version: EtcdVersion,
    members: usize,
    dir: &Path,
) -> Option<(PathBuf, i64, String)> {
    let cluster = cluster(version, members).await?;
    write_known_keys(&cluster, 50).await;
    let folder = dir.join("snapshots");
    std::fs::create_dir(&folder).unwrap();
    let taken = snapshot(&cluster, &folder.join("main.db")).await;
    Some((folder, taken.revision.unwrap(), taken.sha256.unwrap()))
}

groundskeeper_e2e::for_each_etcd_version!(
    three_members_restored_from_one_snapshot_start_as_a_new_cluster,
    a_killed_restore_is_finished_by_the_next_run,
    bad_input_leaves_the_volume_as_it_was,
    a_member_is_restored_from_a_bucket,
    a_member_is_restored_from_a_compressed_and_encrypted_snapshot,
);

/// A compressed and encrypted snapshot restores a member with its key (decoded into the scratch
/// folder first, checked against the stored SHA-256); without the key, or with another, nothing on
/// the volume is touched and the key id it needs is named.
async fn a_member_is_restored_from_a_compressed_and_encrypted_snapshot(version: EtcdVersion) {
    let Some(tools) = tools_or_skip(version) else { return };
    let dir = tempfile::tempdir().unwrap();
    let Some(source) = cluster(version, 1).await else { return };
    write_known_keys(&source, 50).await;
    let folder = dir.path().join("snapshots");
    std::fs::create_dir(&folder).unwrap();
    let key = dir.path().join("key");
    std::fs::write(&key, format!("{}\n", "ab".repeat(32))).unwrap();
    let other = dir.path().join("other-key");
    std::fs::write(&other, [7u8; 32]).unwrap();
    let result_file = dir.path().join("result.json");
    let mut args = strings(&["snapshot", "--endpoints", &source.endpoints_flag()]);
    args.extend(strings(&["--output", &path(&folder.join("main.db")), "--compression", "zstd"]));
    args.extend(strings(&["--encryption-key", &path(&key)]));
    let (code, result, stderr) = run(&args, &[], &result_file).await;
    assert_eq!(code, exit::SUCCESS, "{result:?}\n{stderr}");
    let Report::Snapshot(taken) = &result.report else { panic!("a snapshot report") };
    let (revision, sha256) = (taken.revision.unwrap(), taken.sha256.clone().unwrap());
    let key_id = taken.stored.key_id.clone().unwrap();
    drop(source);

    let scratch = dir.path().join("scratch");
    std::fs::create_dir(&scratch).unwrap();
    let (members, initial_cluster) = new_cluster(1);
    let volume = Volume::with_old_data(dir.path(), &members[0].name);
    let token = "main-restored-sealed";
    let restore = Restore {
        folder: &folder,
        object: "main.db",
        data: &volume.data,
        member: &members[0],
        initial_cluster: &initial_cluster,
        token,
        scratch: &scratch,
        tool: &tools.restore,
    };
    let untouched = fingerprint(&volume.root);
    for (extra, reason) in [
        (vec![], ErrorReason::KeyMissing),
        (vec!["--encryption-key".to_owned(), path(&other)], ErrorReason::KeyMismatch),
    ] {
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        let (code, result) = restore.run(&extra, &result_file).await;
        assert_eq!(code, exit::BAD_INPUT, "{result:?}");
        assert_eq!(result.error.as_ref().and_then(|e| e.reason), Some(reason), "{result:?}");
        assert!(result.message.unwrap().contains(&key_id));
        assert!(fingerprint(&volume.root) == untouched, "the volume as it was");
        assert_eq!(listing(&scratch), Vec::<String>::new());
    }
    let (code, result) =
        restore.run(&["--encryption-key", &path(&key), "--expect-sha256", &sha256], &result_file).await;
    assert_eq!(code, exit::SUCCESS, "{result:?}");
    let report = restore_report(&result);
    assert_eq!((report.revision, report.sha256.as_deref()), (Some(revision), Some(sha256.as_str())));
    assert_eq!(report.stored.encoding.as_deref(), Some("zstd+aes-256-gcm"));
    assert_eq!(listing(&scratch), Vec::<String>::new(), "the decoded file is removed");
    let (_running, mut client) = start_restored(
        &tools.etcd,
        &members,
        std::slice::from_ref(&volume.data),
        &initial_cluster,
        token,
        dir.path(),
    )
    .await;
    assert_eq!(known_keys(&mut client).await, expected_keys());
}

async fn three_members_restored_from_one_snapshot_start_as_a_new_cluster(version: EtcdVersion) {
    let Some(tools) = tools_or_skip(version) else { return };
    let dir = tempfile::tempdir().unwrap();
    let Some((folder, revision, sha256)) = snapshot_with_known_keys(version, 3, dir.path()).await else {
        return;
    };
    let scratch = dir.path().join("scratch");
    std::fs::create_dir(&scratch).unwrap();
    let result_file = dir.path().join("result.json");
    let (members, initial_cluster) = new_cluster(3);
    let token = "main-restored-t1";
    let volumes: Vec<Volume> = members.iter().map(|m| Volume::with_old_data(dir.path(), &m.name)).collect();
    let old_data: Vec<_> = volumes.iter().map(|v| fingerprint(&v.data)).collect();

    for (i, (member, volume)) in members.iter().zip(&volumes).enumerate() {
        let restore = Restore {
            folder: &folder,
            object: "main.db",
            data: &volume.data,
            member,
            initial_cluster: &initial_cluster,
            token,
            scratch: &scratch,
            tool: &tools.restore,
        };
        let (code, result) = restore.run(&["--expect-sha256", &sha256], &result_file).await;
        assert_eq!(code, exit::SUCCESS, "{result:?}");
        assert_eq!(result.outcome, Outcome::Succeeded);
        let report = restore_report(&result);
        assert_eq!(report.member, member.name);
        assert_eq!(report.data_dir, path(&volume.data));
        assert_eq!(report.old_data_moved_to, Some(path(&volume.old())));
        assert!(!report.already_restored);
        assert_eq!((report.revision, report.sha256.as_deref()), (Some(revision), Some(sha256.as_str())));
        assert_eq!(report.initial_cluster_token, token);
        // The old data moved aside whole, the rest of the volume untouched, the scratch emptied.
        assert_eq!(fingerprint(&volume.old()), old_data[i]);
        let old_name = format!("data{SUFFIX}");
        assert_eq!(
            listing(&volume.root),
            ["data", "data.groundskeeper-restore.json", old_name.as_str(), "keep.txt"]
        );
        assert_eq!(std::fs::read_to_string(volume.root.join("keep.txt")).unwrap(), "not etcd's");
        assert!(volume.data.join("member/snap/db").is_file() && volume.data.join("member/wal").is_dir());
        assert_eq!(listing(&scratch), Vec::<String>::new());
    }

    // Run again: nothing to do, nothing changed.
    let before = fingerprint(&volumes[0].root);
    let restore = Restore {
        folder: &folder,
        object: "main.db",
        data: &volumes[0].data,
        member: &members[0],
        initial_cluster: &initial_cluster,
        token,
        scratch: &scratch,
        tool: &tools.restore,
    };
    let (code, result) = restore.run(&[], &result_file).await;
    assert_eq!(code, exit::SUCCESS, "{result:?}");
    let report = restore_report(&result);
    assert!(report.already_restored, "{report:?}");
    assert_eq!(report.old_data_moved_to, Some(path(&volumes[0].old())));
    assert_eq!((report.revision, report.sha256.as_deref()), (Some(revision), Some(sha256.as_str())));
    assert!(result.message.unwrap().contains("already restored"));
    assert!(fingerprint(&volumes[0].root) == before, "a repeated run changes nothing");

    // The three restored folders start as one new cluster holding the keys.
    let data: Vec<PathBuf> = volumes.iter().map(|v| v.data.clone()).collect();
    let (_running, mut client) =
        start_restored(&tools.etcd, &members, &data, &initial_cluster, token, dir.path()).await;
    assert_eq!(known_keys(&mut client).await, expected_keys());
    let status = client.status().await.unwrap();
    assert!(status.header().unwrap().revision() >= revision, "{status:?}");
    let listed = client.member_list().await.unwrap();
    let mut names: Vec<(String, Vec<String>)> =
        listed.members().iter().map(|m| (m.name().to_owned(), m.peer_urls().to_vec())).collect();
    names.sort();
    let wanted: Vec<(String, Vec<String>)> =
        members.iter().map(|m| (m.name.clone(), vec![m.peer_url.clone()])).collect();
    assert_eq!(names, wanted, "a new cluster of exactly the restored members");
}

/// A restore tool that never finishes: it makes the data folder, half, then sleeps; its pid goes
/// into `pid_file`. It says it is etcdutl 3.5, so the runner takes it.
fn hanging_tool(dir: &Path, pid_file: &Path) -> PathBuf {
    let tool = dir.join("hanging-etcdutl");
    std::fs::write(
        &tool,
        format!(
            "#!/bin/sh\n\
             [ \"$1\" = version ] && {{ echo 'etcdutl version: 3.5.99'; exit 0; }}\n\
             for a in \"$@\"; do case \"$a\" in --data-dir=*) d=\"${{a#--data-dir=}}\";; esac; done\n\
             mkdir -p \"$d/member/snap\" && echo half > \"$d/member/snap/db\"\n\
             echo $$ > {}\n\
             exec sleep 600\n",
            pid_file.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&tool, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    tool
}

async fn a_killed_restore_is_finished_by_the_next_run(version: EtcdVersion) {
    let Some(tools) = tools_or_skip(version) else { return };
    let dir = tempfile::tempdir().unwrap();
    let Some((folder, revision, _)) = snapshot_with_known_keys(version, 1, dir.path()).await else { return };
    let scratch = dir.path().join("scratch");
    std::fs::create_dir(&scratch).unwrap();
    let result_file = dir.path().join("result.json");
    let (members, initial_cluster) = new_cluster(1);
    let token = "main-restored-t1";
    let volume = Volume::with_old_data(dir.path(), "m0");
    let old_data = fingerprint(&volume.data);
    let pid_file = dir.path().join("tool.pid");
    let hanging = hanging_tool(dir.path(), &pid_file);
    let restore = Restore {
        folder: &folder,
        object: "main.db",
        data: &volume.data,
        member: &members[0],
        initial_cluster: &initial_cluster,
        token,
        scratch: &scratch,
        tool: &tools.restore,
    };
    let killed = Restore { tool: &hanging, ..restore };

    // Killed outright (SIGKILL) while the restore is half done.
    let mut child = tokio::process::Command::new(BIN)
        .args(killed.args(&["--result-file", &path(&result_file)]))
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let tool_pid = loop {
        if let Some(pid) = std::fs::read_to_string(&pid_file).ok().and_then(|p| p.trim().parse::<i32>().ok())
        {
            break pid;
        }
        assert!(Instant::now() < deadline, "the restore never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    child.kill().await.unwrap();
    // SAFETY: kill(2) on the tool the killed run left behind (its pid, written by itself).
    unsafe {
        libc::kill(tool_pid, libc::SIGKILL);
    }
    assert!(!volume.data.exists(), "the old data was moved aside");
    assert_eq!(fingerprint(&volume.old()), old_data);
    assert!(volume.partial().join("member/snap/db").exists(), "a half restore left behind");
    assert!(!listing(&scratch).is_empty(), "the killed run's scratch folder stays");

    // The next run finishes it: the old data stays where it was moved, once.
    let (code, result) = restore.run(&[], &result_file).await;
    assert_eq!(code, exit::SUCCESS, "{result:?}");
    let report = restore_report(&result);
    assert!(!report.already_restored);
    assert_eq!(report.old_data_moved_to, Some(path(&volume.old())));
    assert_eq!(report.revision, Some(revision));
    assert_eq!(fingerprint(&volume.old()), old_data, "moved once, intact");
    assert!(!volume.partial().exists());
    assert_eq!(listing(&scratch), Vec::<String>::new(), "what the killed run left is removed too");
    let restored = fingerprint(&volume.data);
    assert_ne!(restored.get("member/snap/db").map(Vec::len), Some(5), "the half file is gone");

    // Killed between the rename and recording it: the marker says pending, the folder is in
    // place. The next run records it and touches nothing else.
    let marker = std::fs::read_to_string(volume.marker()).unwrap();
    assert!(marker.contains("\"done\""), "{marker}");
    std::fs::write(volume.marker(), marker.replace("\"done\"", "\"pending\"")).unwrap();
    let (code, result) = restore.run(&[], &result_file).await;
    assert_eq!(code, exit::SUCCESS, "{result:?}");
    assert!(!restore_report(&result).already_restored);
    assert!(std::fs::read_to_string(volume.marker()).unwrap().contains("\"done\""));
    assert!(fingerprint(&volume.data) == restored, "the restored folder left as it was");
    let (code, result) = restore.run(&[], &result_file).await;
    assert_eq!(code, exit::SUCCESS, "{result:?}");
    assert!(restore_report(&result).already_restored);

    let (_running, mut client) = start_restored(
        &tools.etcd,
        &members,
        std::slice::from_ref(&volume.data),
        &initial_cluster,
        token,
        dir.path(),
    )
    .await;
    assert_eq!(known_keys(&mut client).await, expected_keys());
}

async fn bad_input_leaves_the_volume_as_it_was(version: EtcdVersion) {
    let Some(tools) = tools_or_skip(version) else { return };
    let dir = tempfile::tempdir().unwrap();
    let Some((folder, _, sha256)) = snapshot_with_known_keys(version, 1, dir.path()).await else { return };
    let mut flipped = std::fs::read(folder.join("main.db")).unwrap();
    let at = flipped.len() / 3;
    flipped[at] ^= 0x01;
    std::fs::write(folder.join("flipped.db"), &flipped).unwrap();
    std::fs::copy(folder.join("main.db"), folder.join("other.db")).unwrap();
    let scratch = dir.path().join("scratch");
    std::fs::create_dir(&scratch).unwrap();
    let result_file = dir.path().join("result.json");
    let (members, initial_cluster) = new_cluster(1);
    let volume = Volume::with_old_data(dir.path(), "m0");
    let before = fingerprint(&volume.root);
    let missing_parent = dir.path().join("no-volume/data");
    let wrong_sha = "0".repeat(64);
    let alone = format!("m9={}", members[0].peer_url);
    for (object, data, cluster, extra, says) in [
        ("missing.db", &volume.data, initial_cluster.as_str(), vec![], "cannot open it"),
        (
            "main.db",
            &volume.data,
            initial_cluster.as_str(),
            vec!["--expect-sha256", wrong_sha.as_str()],
            "its SHA-256 is",
        ),
        ("flipped.db", &volume.data, initial_cluster.as_str(), vec![], "does not match"),
        ("main.db", &volume.data, alone.as_str(), vec![], "does not name member \"m0\""),
        ("main.db", &missing_parent, initial_cluster.as_str(), vec![], "--data-dir"),
    ] {
        let restore = Restore {
            folder: &folder,
            object,
            data,
            member: &members[0],
            initial_cluster: cluster,
            token: "t1",
            scratch: &scratch,
            tool: &tools.restore,
        };
        let (code, result) = restore.run(&extra, &result_file).await;
        assert_eq!(code, exit::BAD_INPUT, "{object} {extra:?}: {result:?}");
        let message = result.message.unwrap();
        assert!(message.contains(says), "{object} {extra:?}: {message}");
        assert!(fingerprint(&volume.root) == before, "{object} {extra:?}: the volume is left as it was");
        assert_eq!(listing(&scratch), Vec::<String>::new());
    }

    // Restored with token t1 from main.db: another snapshot with the same token is refused.
    let restore = Restore {
        folder: &folder,
        object: "main.db",
        data: &volume.data,
        member: &members[0],
        initial_cluster: &initial_cluster,
        token: "t1",
        scratch: &scratch,
        tool: &tools.restore,
    };
    let (code, result) = restore.run(&["--expect-sha256", &sha256], &result_file).await;
    assert_eq!(code, exit::SUCCESS, "{result:?}");
    let restored = fingerprint(&volume.root);
    let (code, result) = Restore { object: "other.db", ..restore }.run(&[], &result_file).await;
    assert_eq!(code, exit::BAD_INPUT, "{result:?}");
    assert!(result.message.unwrap().contains("needs a new cluster token"));
    assert!(fingerprint(&volume.root) == restored);

    // A data folder on a read-only volume (only checkable without root, which writes anyway).
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        eprintln!("skipped: the read-only volume case (root may write to a folder without write permission)");
        return;
    }
    let read_only = dir.path().join("read-only");
    std::fs::create_dir(&read_only).unwrap();
    std::fs::set_permissions(&read_only, std::os::unix::fs::PermissionsExt::from_mode(0o555)).unwrap();
    let data = read_only.join("data");
    let (code, result) = Restore { data: &data, token: "t2", ..restore }.run(&[], &result_file).await;
    assert_eq!(code, exit::BAD_INPUT, "{result:?}");
    assert!(result.message.unwrap().contains("is not writable"));
}

/// A member of a 3.4 cluster restored by 3.5's etcdutl (what the Job image carries) starts on
/// etcd 3.4 and holds the keys: the image serves restores of clusters on either version.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_3_4_member_restored_by_3_5s_etcdutl_starts_on_3_4() {
    let _one = groundskeeper_e2e::etcd_cluster::CLUSTER_TURNS.lock().await;
    let Some(v3_5) = tools_or_skip(EtcdVersion::V3_5) else { return };
    let Some(v3_4) = tools_or_skip(EtcdVersion::V3_4) else { return };
    let dir = tempfile::tempdir().unwrap();
    let Some((folder, revision, _)) = snapshot_with_known_keys(EtcdVersion::V3_4, 1, dir.path()).await else {
        return;
    };
    let scratch = dir.path().join("scratch");
    std::fs::create_dir(&scratch).unwrap();
    let (members, initial_cluster) = new_cluster(1);
    let volume = Volume::with_old_data(dir.path(), "m0");
    let restore = Restore {
        folder: &folder,
        object: "main.db",
        data: &volume.data,
        member: &members[0],
        initial_cluster: &initial_cluster,
        token: "t1",
        scratch: &scratch,
        tool: &v3_5.restore,
    };
    let (code, result) = restore.run(&[], &dir.path().join("result.json")).await;
    assert_eq!(code, exit::SUCCESS, "{result:?}");
    assert_eq!(restore_report(&result).revision, Some(revision));
    let (_running, mut client) = start_restored(
        &v3_4.etcd,
        &members,
        std::slice::from_ref(&volume.data),
        &initial_cluster,
        "t1",
        dir.path(),
    )
    .await;
    assert_eq!(known_keys(&mut client).await, expected_keys());
    let status = client.status().await.unwrap();
    assert!(status.version().starts_with("3.4."), "{status:?}");
    assert_eq!(status.header().unwrap().revision(), revision);
}

/// A member restored from a snapshot in a bucket (downloaded into the scratch folder, checked
/// against the recorded checksum, removed afterwards).
async fn a_member_is_restored_from_a_bucket(version: EtcdVersion) {
    let Some(tools) = tools_or_skip(version) else { return };
    let dir = tempfile::tempdir().unwrap();
    let Some(bucket) = crate::prove::BucketWithSnapshots::start(dir.path()) else { return };
    let Some(cluster) = cluster(version, 1).await else { return };
    write_known_keys(&cluster, 50).await;
    let result_file = dir.path().join("result.json");
    let taken = bucket.snapshot(&cluster, "main.db", &result_file).await;
    drop(cluster);
    let scratch = dir.path().join("scratch");
    std::fs::create_dir(&scratch).unwrap();
    let (members, initial_cluster) = new_cluster(1);
    let volume = Volume::with_old_data(dir.path(), "m0");
    let mut args = strings(&["restore-member"]);
    args.extend(bucket.flags("from"));
    args.extend(strings(&[
        "--object",
        "main.db",
        "--expect-sha256",
        taken.sha256.as_deref().unwrap(),
        "--data-dir",
        &path(&volume.data),
        "--name",
        "m0",
        "--initial-cluster",
        &initial_cluster,
        "--initial-advertise-peer-urls",
        &members[0].peer_url,
        "--initial-cluster-token",
        "t1",
        "--keep-old-suffix",
        SUFFIX,
        "--scratch-dir",
        &path(&scratch),
        "--etcdutl",
        &path(&tools.restore),
    ]));
    let (code, result, stderr) = run(&args, &[], &result_file).await;
    assert_eq!(code, exit::SUCCESS, "{result:?}\n{stderr}");
    let report = restore_report(&result);
    assert_eq!((report.revision, &report.sha256), (taken.revision, &taken.sha256));
    assert_eq!(listing(&scratch), Vec::<String>::new());
    let (_running, mut client) = start_restored(
        &tools.etcd,
        &members,
        std::slice::from_ref(&volume.data),
        &initial_cluster,
        "t1",
        dir.path(),
    )
    .await;
    assert_eq!(known_keys(&mut client).await, expected_keys());
}

/// `args` with `--keep-old-suffix` set to `suffix` instead of [`SUFFIX`].
fn with_suffix(mut args: Vec<String>, suffix: &str) -> Vec<String> {
    let at = args.iter().position(|a| a == "--keep-old-suffix").unwrap();
    args[at + 1] = suffix.to_owned();
    args
}

/// One run at a time on a volume: a run that finds the volume locked by another changes nothing
/// (retryable); two runs started together end with the volume restored once. Suffixes that are
/// the runner's own bookkeeping names are refused, and a data folder given as `DATA/.` is DATA.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_run_per_volume_and_names_that_cannot_collide() {
    use std::os::fd::AsRawFd;
    let version = EtcdVersion::V3_5;
    let Some(tools) = tools_or_skip(version) else { return };
    let dir = tempfile::tempdir().unwrap();
    let Some((folder, _, sha256)) = snapshot_with_known_keys(version, 1, dir.path()).await else { return };
    let scratch = dir.path().join("scratch");
    std::fs::create_dir(&scratch).unwrap();
    let (members, initial_cluster) = new_cluster(1);
    let volume = Volume::with_old_data(dir.path(), "m0");
    let before = fingerprint(&volume.root);
    let restore = Restore {
        folder: &folder,
        object: "main.db",
        data: &volume.data,
        member: &members[0],
        initial_cluster: &initial_cluster,
        token: "t1",
        scratch: &scratch,
        tool: &tools.restore,
    };
    let result_file = dir.path().join("result.json");

    // Another run holds the volume: nothing is touched.
    let held = std::fs::File::open(&volume.root).unwrap();
    // SAFETY: a valid open descriptor.
    assert_eq!(unsafe { libc::flock(held.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) }, 0);
    let (code, result) = restore.run(&[], &result_file).await;
    assert_eq!(code, exit::RETRYABLE, "{result:?}");
    assert!(result.message.as_deref().unwrap().contains("another restore is running"), "{result:?}");
    assert!(fingerprint(&volume.root) == before, "the volume is left as it was");
    drop(held);

    // Suffixes that would be the runner's own names, and paths that are not plain: refused.
    for suffix in [
        ".partial-restore",
        ".partial-restore-2",
        ".groundskeeper-restore.json.tmp",
        ".groundskeeper-x",
        "",
        "a/b",
    ] {
        let (code, result, _) = run(&with_suffix(restore.args(&[]), suffix), &[], &result_file).await;
        assert_eq!(code, exit::BAD_INPUT, "{suffix:?}: {result:?}");
        assert!(result.message.as_deref().unwrap().contains("--keep-old-suffix"), "{suffix:?}: {result:?}");
        assert!(fingerprint(&volume.root) == before, "{suffix:?}: the volume is left as it was");
    }
    let dotted = volume.root.join("data/../data");
    let (code, result) = Restore { data: &dotted, ..restore }.run(&[], &result_file).await;
    assert_eq!(code, exit::BAD_INPUT, "{result:?}");
    assert!(fingerprint(&volume.root) == before, "`..`: the volume is left as it was");

    // Two runs at once, on `DATA/.`: one restores, the other finishes nothing half-way.
    let data_dot = volume.data.join(".");
    let both = Restore { data: &data_dot, ..restore };
    let (first, second) = (dir.path().join("r1.json"), dir.path().join("r2.json"));
    let both_args = both.args(&[]);
    let ((code1, result1, _), (code2, result2, _)) =
        tokio::join!(run(&both_args, &[], &first), run(&both_args, &[], &second));
    let codes = [code1, code2];
    assert!(codes.contains(&exit::SUCCESS), "{result1:?}\n{result2:?}");
    assert!(codes.iter().all(|c| *c == exit::SUCCESS || *c == exit::RETRYABLE), "{result1:?}\n{result2:?}");
    // The volume: the old data moved aside beside DATA (never inside it), the restored data in
    // place, recorded done; a run now finds it restored.
    assert_eq!(
        listing(&volume.root),
        vec!["data", "data.groundskeeper-restore.json", "data.pre-restore-t1", "keep.txt"]
    );
    assert_eq!(std::fs::read(volume.old().join("member/snap/db")).unwrap(), b"old database of m0");
    assert!(volume.data.join("member/snap/db").exists());
    let (code, result) = restore.run(&[], &result_file).await;
    assert_eq!(code, exit::SUCCESS, "{result:?}");
    let report = restore_report(&result);
    assert!(report.already_restored, "{report:?}");
    assert_eq!(report.sha256.as_deref(), Some(sha256.as_str()));
}
