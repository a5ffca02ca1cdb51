//! The real `kubectl`, driven against the in-memory API server as a user would drive it.
//!
//! Every installed minor version is found: `kubectl` on the PATH, and `kubectl.1.27` …
//! `kubectl.1.33` beside the one the Debian package `kubectl` installs (the folder `dpkg -L
//! kubectl` lists). Without any, a test says that it is skipped and why; under `CI=true` it fails
//! instead.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

/// One installed kubectl binary and the minor version it reports.
#[derive(Clone, Debug)]
pub struct KubectlBinary {
    pub path: PathBuf,
    /// `27` for 1.27.
    pub minor: u32,
}

/// The oldest minor version tested.
pub const OLDEST_MINOR: u32 = 27;

/// Every installed kubectl from 1.27 on, oldest first, one per minor version; or `None` after
/// saying why the test skips (a panic under `CI=true`).
pub fn installed_or_skip(test: &str) -> Option<Vec<KubectlBinary>> {
    let mut found: Vec<KubectlBinary> = Vec::new();
    for path in candidates() {
        if let Some(minor) = minor_version(&path)
            && minor >= OLDEST_MINOR
            && !found.iter().any(|k| k.minor == minor)
        {
            found.push(KubectlBinary { path, minor });
        }
    }
    found.sort_by_key(|k| k.minor);
    if found.is_empty() {
        let why =
            "no kubectl (1.27 or newer) is installed: neither on the PATH nor beside the Debian package's";
        if std::env::var("CI").is_ok_and(|ci| ci == "true") {
            panic!("{test}: {why}; under CI=true the kubectl tests must run");
        }
        println!("skipped: {test}: {why}");
        return None;
    }
    Some(found)
}

/// The newest installed kubectl, or `None` after saying why (see [`installed_or_skip`]).
pub fn newest_or_skip(test: &str) -> Option<KubectlBinary> {
    installed_or_skip(test).and_then(|all| all.into_iter().last())
}

fn candidates() -> Vec<PathBuf> {
    let mut paths = vec![PathBuf::from("kubectl")];
    let listed = std::process::Command::new("dpkg").args(["-L", "kubectl"]).stderr(Stdio::null()).output();
    if let Ok(output) = listed {
        for line in String::from_utf8_lossy(&output.stdout).lines() {
            let path = Path::new(line.trim());
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            if name == "kubectl" || name.starts_with("kubectl.1.") {
                paths.push(path.to_path_buf());
            }
        }
    }
    paths
}

/// The minor version `kubectl version --client -o json` reports, if it runs.
fn minor_version(path: &Path) -> Option<u32> {
    let output = std::process::Command::new(path)
        .args(["version", "--client", "-o", "json"])
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let version: serde_json::Value = serde_json::from_slice(&output.stdout).ok()?;
    let minor = version["clientVersion"]["minor"].as_str()?;
    minor.trim_end_matches('+').parse().ok()
}

/// What one kubectl command did.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// The output of a command that must succeed, or a panic showing what it said.
    pub fn ok(self, what: &str) -> String {
        assert_eq!(self.code, 0, "{what}: {self:#?}");
        self.stdout
    }
}

/// A kubectl binary with a kubeconfig and a discovery cache of its own.
#[derive(Clone, Debug)]
pub struct Kubectl {
    pub binary: KubectlBinary,
    pub kubeconfig: PathBuf,
    pub cache_dir: PathBuf,
    /// Folders put in front of the PATH (where `kubectl` looks for plugins).
    pub path_prefix: Vec<PathBuf>,
}

/// Bounds every kubectl command: none should take more than a few seconds.
const GUARD: Duration = Duration::from_secs(60);

impl Kubectl {
    pub fn new(binary: KubectlBinary, kubeconfig: &Path, work: &Path) -> Self {
        let cache_dir = work.join(format!("kubectl-cache-1.{}", binary.minor));
        Kubectl { binary, kubeconfig: kubeconfig.to_path_buf(), cache_dir, path_prefix: Vec::new() }
    }

    /// The command, its kubeconfig and cache set (in the environment: kubectl takes no flag
    /// before a plugin's name), the PATH extended.
    pub fn command(&self, args: &[&str]) -> tokio::process::Command {
        let mut command = tokio::process::Command::new(&self.binary.path);
        command.args(args).env("KUBECACHEDIR", &self.cache_dir).env_remove("KUBERNETES_SERVICE_HOST");
        if !self.path_prefix.is_empty() {
            let mut path = self.path_prefix.clone();
            path.extend(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()));
            command.env("PATH", std::env::join_paths(path).expect("PATH entries join"));
        }
        command.env("KUBECONFIG", &self.kubeconfig).kill_on_drop(true);
        command
    }

    /// Runs `kubectl ARGS` with `stdin` as its input.
    pub async fn run_with_input(&self, args: &[&str], stdin: &str) -> Run {
        use tokio::io::AsyncWriteExt;
        let mut child = self
            .command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("kubectl starts");
        let mut input = child.stdin.take().expect("stdin is piped");
        input.write_all(stdin.as_bytes()).await.expect("kubectl reads its input");
        drop(input);
        self.finish(args, child).await
    }

    /// Runs `kubectl ARGS`.
    pub async fn run(&self, args: &[&str]) -> Run {
        let child = self
            .command(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("kubectl starts");
        self.finish(args, child).await
    }

    async fn finish(&self, args: &[&str], child: tokio::process::Child) -> Run {
        let output = tokio::time::timeout(GUARD, child.wait_with_output())
            .await
            .unwrap_or_else(|_| {
                panic!("kubectl 1.{} {args:?} did not finish in {GUARD:?}", self.binary.minor)
            })
            .expect("kubectl runs");
        Run {
            code: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }
}
