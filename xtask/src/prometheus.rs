//! promtool, which checks the alert and recording rules of `manifests/monitoring/` and runs their
//! unit tests: Debian's `prometheus` package (Prometheus 2.42 with promtool).
//!
//! Lookup: `GROUNDSKEEPER_PROMTOOL` (taken as it is), what an earlier run fetched into
//! `target/tools/prometheus/`, then `promtool` on PATH. The test looks in the same places
//! (`controller/tests/it/monitoring_rules.rs`).
//!
//! Fetching, only when none is found: `apt-get download` (after `apt-get update` when run as
//! root) and `dpkg-deb -x` into `target/tools/prometheus.partial/`, renamed to
//! `target/tools/prometheus/` once its promtool runs, so an interrupted fetch leaves nothing that
//! looks usable. Nothing is installed on the system, so no Prometheus service starts.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::etcd::{fetch_debian_package, remove_folder};

/// How the tests are told where promtool is.
pub const ENV_VAR: &str = "GROUNDSKEEPER_PROMTOOL";
const PACKAGE: &str = "prometheus";

/// promtool, found or fetched; `None` after saying why there is none (the rules' test then
/// skips, or fails under `CI=true`).
pub fn ensure(tools: &Path) -> Option<PathBuf> {
    if let Some(path) = std::env::var_os(ENV_VAR) {
        let binary = PathBuf::from(path);
        return match version(&binary) {
            Some(v) => {
                println!("xtask: promtool: {} ({v}, from {ENV_VAR})", binary.display());
                Some(binary)
            }
            None => {
                eprintln!("xtask: {ENV_VAR}={} does not run; fix or unset it", binary.display());
                None
            }
        };
    }
    let folder = tools.join(PACKAGE);
    let fetched = folder.join("usr/bin/promtool");
    if let Some(found) =
        [fetched.clone(), PathBuf::from("promtool")].into_iter().find(|c| version(c).is_some())
    {
        println!("xtask: promtool: {}", found.display());
        return Some(found);
    }
    println!(
        "xtask: promtool not found on this machine; fetching Debian's {PACKAGE} package into {}",
        folder.display()
    );
    match fetch(&folder).and_then(|()| {
        version(&fetched).ok_or_else(|| format!("the fetched {} does not run", fetched.display()))
    }) {
        Ok(v) => {
            println!("xtask: promtool: {} ({v})", fetched.display());
            Some(fetched)
        }
        Err(why) => {
            eprintln!(
                "xtask: could not fetch promtool: {why}\nxtask: to get it: run this as root, or \
                 `apt-get install prometheus`, or set {ENV_VAR} to a promtool binary. Until then \
                 the rules' tests skip (under CI=true they fail)."
            );
            None
        }
    }
}

/// Downloads and unpacks the package into `<folder>.partial`, then renames it into place.
fn fetch(folder: &Path) -> Result<(), String> {
    let partial = folder.with_extension("partial");
    remove_folder(&partial)?;
    remove_folder(folder)?;
    std::fs::create_dir_all(&partial).map_err(|e| format!("cannot create {}: {e}", partial.display()))?;
    fetch_debian_package(&partial, PACKAGE)?;
    version(&partial.join("usr/bin/promtool"))
        .ok_or_else(|| format!("{} holds no promtool that runs", partial.display()))?;
    std::fs::rename(&partial, folder)
        .map_err(|e| format!("cannot rename {} to {}: {e}", partial.display(), folder.display()))
}

/// The first line promtool's `--version` prints (`promtool, version 2.42.0+ds …`), if it runs.
fn version(binary: &Path) -> Option<String> {
    let output = Command::new(binary).arg("--version").output().ok()?;
    if !output.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&output.stdout);
    text.lines().next().map(|line| line.trim().to_owned()).filter(|line| line.starts_with("promtool"))
}
