//! Debian's `prometheus` package (Prometheus 2.42): its `promtool` checks the alert and recording
//! rules of `manifests/monitoring/` and runs their unit tests; its server, `prometheus`, scrapes a
//! running controller with those rules loaded in the monitoring scenario
//! (`tests/tests/it/monitoring.rs`).
//!
//! Lookup, each binary on its own: its variable (`GROUNDSKEEPER_PROMTOOL`,
//! `GROUNDSKEEPER_PROMETHEUS`; taken as it is), what an earlier run fetched into
//! `target/tools/prometheus/`, then the binary on PATH. The tests look in the same places
//! (`tests/src/prometheus.rs`).
//!
//! Fetching, only when one of the two is found nowhere: `apt-get download` (after
//! `apt-get update` when run as root) and `dpkg-deb -x` into `target/tools/prometheus.partial/`,
//! renamed to `target/tools/prometheus/` once both of its binaries run, so an interrupted fetch
//! leaves nothing that looks usable. Nothing is installed on the system, so no Prometheus service
//! starts.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::etcd::{fetch_debian_package, remove_folder};

const PACKAGE: &str = "prometheus";

/// One binary of the package.
#[derive(Clone, Copy)]
pub struct Tool {
    /// Its file name in `usr/bin/`, and the first word of its `--version`.
    pub name: &'static str,
    /// How the tests are told where it is.
    pub env_var: &'static str,
}

pub const PROMTOOL: Tool = Tool { name: "promtool", env_var: "GROUNDSKEEPER_PROMTOOL" };
pub const SERVER: Tool = Tool { name: "prometheus", env_var: "GROUNDSKEEPER_PROMETHEUS" };
const TOOLS: [Tool; 2] = [PROMTOOL, SERVER];

/// Each tool found or fetched, with the variable that hands it to the tests; a tool missing is
/// left out after saying why (its tests then skip, or fail under `CI=true`).
pub fn ensure(tools: &Path) -> Vec<(&'static str, PathBuf)> {
    let folder = tools.join(PACKAGE);
    let fetched = |tool: Tool| folder.join("usr/bin").join(tool.name);
    let mut found: Vec<(Tool, Option<PathBuf>)> =
        TOOLS.iter().map(|tool| (*tool, find(*tool, &fetched(*tool)))).collect();
    // A variable that names a binary that does not run is the user's to fix: no fetch for it.
    let wanted: Vec<Tool> = found
        .iter()
        .filter(|(tool, path)| path.is_none() && std::env::var_os(tool.env_var).is_none())
        .map(|(tool, _)| *tool)
        .collect();
    if !wanted.is_empty() {
        let names: Vec<&str> = wanted.iter().map(|t| t.name).collect();
        println!(
            "xtask: {} not found on this machine; fetching Debian's {PACKAGE} package into {}",
            names.join(" and "),
            folder.display()
        );
        match fetch(&folder) {
            Ok(()) => {
                for (tool, path) in
                    found.iter_mut().filter(|(t, p)| p.is_none() && std::env::var_os(t.env_var).is_none())
                {
                    *path = version(*tool, &fetched(*tool)).map(|v| {
                        println!("xtask: {}: {} ({v})", tool.name, fetched(*tool).display());
                        fetched(*tool)
                    });
                }
            }
            Err(why) => eprintln!(
                "xtask: could not fetch {}: {why}\nxtask: to get them: run this as root, or `apt-get \
                 install prometheus`, or set {} and {} to the binaries. Until then the tests that \
                 need them skip (under CI=true they fail).",
                names.join(" and "),
                PROMTOOL.env_var,
                SERVER.env_var
            ),
        }
    }
    found.into_iter().filter_map(|(tool, path)| Some((tool.env_var, path?))).collect()
}

/// `tool` where its variable says, else fetched earlier, else on PATH; `None` after saying why
/// when the variable names one that does not run.
fn find(tool: Tool, fetched: &Path) -> Option<PathBuf> {
    if let Some(path) = std::env::var_os(tool.env_var) {
        let binary = PathBuf::from(path);
        return match version(tool, &binary) {
            Some(v) => {
                println!("xtask: {}: {} ({v}, from {})", tool.name, binary.display(), tool.env_var);
                Some(binary)
            }
            None => {
                eprintln!("xtask: {}={} does not run; fix or unset it", tool.env_var, binary.display());
                None
            }
        };
    }
    let found =
        [fetched.to_path_buf(), PathBuf::from(tool.name)].into_iter().find(|c| version(tool, c).is_some())?;
    println!("xtask: {}: {}", tool.name, found.display());
    Some(found)
}

/// Downloads and unpacks the package into `<folder>.partial`, then renames it into place.
fn fetch(folder: &Path) -> Result<(), String> {
    let partial = folder.with_extension("partial");
    remove_folder(&partial)?;
    remove_folder(folder)?;
    std::fs::create_dir_all(&partial).map_err(|e| format!("cannot create {}: {e}", partial.display()))?;
    fetch_debian_package(&partial, PACKAGE)?;
    for tool in TOOLS {
        version(tool, &partial.join("usr/bin").join(tool.name))
            .ok_or_else(|| format!("{} holds no {} that runs", partial.display(), tool.name))?;
    }
    std::fs::rename(&partial, folder)
        .map_err(|e| format!("cannot rename {} to {}: {e}", partial.display(), folder.display()))
}

/// The first line the binary's `--version` prints (`promtool, version 2.42.0+ds …`), if it runs
/// and is `tool`.
fn version(tool: Tool, binary: &Path) -> Option<String> {
    let output = Command::new(binary).arg("--version").output().ok()?;
    if !output.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&output.stdout);
    text.lines()
        .next()
        .map(|line| line.trim().to_owned())
        .filter(|line| line.starts_with(&format!("{},", tool.name)))
}
