//! The README's first command, `cargo xtask demo`, runs `examples/demo`: it must walk through to
//! its before/after table, with `--keep` stay up to be explored with kubectl, and leave nothing
//! behind; and on a real SIGINT it must stop its etcd members and remove its temporary folders.
//!
//! The example's binary is the one `cargo test` builds next to the tests
//! (`target/debug/examples/demo`). A missing etcd binary skips these tests with a message, except
//! under `CI=true`.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use groundskeeper_e2e::etcd_cluster::{CLUSTER_TURNS, EtcdVersion, etcd_or_skip, find_etcd};

/// The demo promises to end within two minutes on a 2-core machine.
const DEMO_LIMIT: Duration = Duration::from_secs(120);

/// `target/debug/examples/demo`, built by `cargo test` with the tests.
fn demo_binary() -> PathBuf {
    let test = std::env::current_exe().expect("the test's own path");
    let profile_dir = test.parent().and_then(Path::parent).expect("tests run from target/<profile>/deps/");
    let demo = profile_dir.join("examples").join("demo");
    assert!(
        demo.exists(),
        "{} is missing: `cargo test --workspace` builds it; alone, build it with \
         `cargo build -p groundskeeper-e2e --example demo`",
        demo.display()
    );
    demo
}

/// Either etcd will do (3.5 first, as `cargo xtask demo` picks); `None` when the test is skipped.
fn any_etcd() -> Option<(EtcdVersion, PathBuf)> {
    [EtcdVersion::V3_5, EtcdVersion::V3_4]
        .into_iter()
        .find_map(|version| find_etcd(version).ok().map(|binary| (version, binary)))
        .or_else(|| etcd_or_skip(EtcdVersion::V3_5).map(|binary| (EtcdVersion::V3_5, binary)))
}

fn start_demo((version, etcd): &(EtcdVersion, PathBuf), args: &[&str]) -> Child {
    Command::new(demo_binary())
        .args(args)
        .env(version.env_var(), etcd)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("the demo starts")
}

/// The demo's output lines, as they come.
fn lines_of(stdout: ChildStdout) -> mpsc::Receiver<String> {
    let (send, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if send.send(line).is_err() {
                return;
            }
        }
    });
    lines
}

/// Every line until one contains `wanted` (included); panics after `limit`.
fn read_until(lines: &mpsc::Receiver<String>, wanted: &str, limit: Duration) -> Vec<String> {
    let deadline = std::time::Instant::now() + limit;
    let mut seen = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match lines.recv_timeout(left) {
            Ok(line) => {
                let found = line.contains(wanted);
                seen.push(line);
                if found {
                    return seen;
                }
            }
            Err(_) => panic!("no line with {wanted:?} within {limit:?}; output so far:\n{}", seen.join("\n")),
        }
    }
}

/// The etcd data folder the demo names when it describes what runs.
fn etcd_data_dir(lines: &[String]) -> PathBuf {
    lines
        .iter()
        .find_map(|l| l.split("(data in ").nth(1))
        .and_then(|rest| rest.strip_suffix(')'))
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("the demo names its etcd data folder:\n{}", lines.join("\n")))
}

/// Process ids of `pid`'s children (the etcd members), from /proc.
fn children_of(pid: u32) -> Vec<u32> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).expect("the demo's tasks");
    tasks
        .filter_map(Result::ok)
        .filter_map(|task| std::fs::read_to_string(task.path().join("children")).ok())
        .flat_map(|ids| ids.split_whitespace().filter_map(|id| id.parse().ok()).collect::<Vec<_>>())
        .collect()
}

/// A process that is still there (not exited, or exited and not yet reaped).
fn exists(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

fn wait_with_limit(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let deadline = std::time::Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().expect("the demo's status") {
            return status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("the demo did not end within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The walk-through to its end (the before/after table), then, kept up with `--keep`, explored
/// with the real kubectl through the kubeconfig it prints, and stopped by Ctrl-C leaving nothing
/// behind. Without `--keep` the walk-through ends right after the table (the same code path up
/// to there): the SIGINT test below and the README's `cargo xtask demo` run that way.
#[test]
fn the_demo_walks_through_then_stays_up_to_be_explored_and_leaves_nothing() {
    // Two demos at once would be six etcd members on two cores: they take turns.
    let _one = CLUSTER_TURNS.blocking_lock();
    let Some(etcd) = any_etcd() else {
        return;
    };
    let mut demo = start_demo(&etcd, &["--keep"]);
    let lines = lines_of(demo.stdout.take().expect("piped stdout"));
    let output = read_until(&lines, "Ctrl-C stops everything", DEMO_LIMIT);
    let text = output.join("\n");
    for expected in [
        "job/basic-cleanup-",
        // The automatic task's one Job: `<cluster>-defragment-<decision time>-0`.
        "logs job/main-defragment-",
        "-0 │ defragmenting",
        "before and after",
        "3 of the 3 nodes there before the scale-out cleaned",
        "reclaimed",
        "wall time:",
        "export KUBECONFIG=",
        "kubectl get etcdc,mtask,msched -n etcd",
    ] {
        assert!(text.contains(expected), "{expected:?} missing from:\n{text}");
    }
    let kubeconfig = output
        .iter()
        .find_map(|l| l.trim().strip_prefix("export KUBECONFIG="))
        .map(PathBuf::from)
        .expect("the kubeconfig is named");
    if let Some(kubectl) = groundskeeper_e2e::kubectl::newest_or_skip("the demo explored with kubectl") {
        let got = Command::new(&kubectl.path)
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(["get", "etcdc,mtask", "-n", "etcd"])
            .output()
            .expect("kubectl runs");
        let shown = String::from_utf8_lossy(&got.stdout);
        assert!(got.status.success(), "{got:?}");
        assert!(shown.contains("etcdcluster.groundskeeper.dev/main"), "{shown}");
        assert!(shown.contains("Completed"), "the demo's task, Completed: {shown}");
    }

    // SAFETY: kill(2) on our own child's pid.
    let sent = unsafe { libc::kill(demo.id() as libc::pid_t, libc::SIGINT) };
    assert_eq!(sent, 0, "SIGINT sent");
    let status = wait_with_limit(&mut demo, Duration::from_secs(20));
    let rest: Vec<String> = lines.iter().collect();
    assert!(status.success(), "Ctrl-C is the normal end of --keep: {status}:\n{}", rest.join("\n"));
    assert!(rest.iter().any(|l| l.contains("left behind: nothing")), "{}", rest.join("\n"));
    assert!(!etcd_data_dir(&output).exists(), "etcd data removed");
    assert!(!kubeconfig.exists(), "{} removed", kubeconfig.display());
}

#[test]
fn sigint_stops_the_etcd_members_and_removes_the_temporary_folders() {
    // Two demos at once would be six etcd members on two cores: they take turns.
    let _one = CLUSTER_TURNS.blocking_lock();
    let Some(etcd) = any_etcd() else {
        return;
    };
    let mut demo = start_demo(&etcd, &[]);
    let lines = lines_of(demo.stdout.take().expect("piped stdout"));
    // Once a cleanup Job runs, etcd is up and a pod has its Secret files mounted.
    let seen = read_until(&lines, "Running", Duration::from_secs(60));
    let data = etcd_data_dir(&seen);
    let members = children_of(demo.id());
    assert_eq!(members.len(), 3, "three etcd members: {members:?}");
    assert!(data.exists());

    // SAFETY: kill(2) on our own child's pid.
    let sent = unsafe { libc::kill(demo.id() as libc::pid_t, libc::SIGINT) };
    assert_eq!(sent, 0, "SIGINT sent");
    let status = wait_with_limit(&mut demo, Duration::from_secs(20));
    let rest: Vec<String> = lines.iter().collect();
    assert_eq!(status.code(), Some(130), "{status}:\n{}", rest.join("\n"));
    assert!(rest.iter().any(|l| l.contains("left behind: nothing")), "{}", rest.join("\n"));
    for member in members {
        assert!(!exists(member), "etcd member {member} stopped");
    }
    assert!(!data.exists(), "{} removed", data.display());
}
