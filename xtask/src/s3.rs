//! The S3 server the snapshot tests upload to: `s3s-fs` 0.14.1 from crates.io, an S3 API over a
//! folder that checks SigV4 signatures (so wrong credentials are refused as a real store refuses
//! them). Written by others, it keeps the tests honest about what an S3 store accepts.
//!
//! Lookup: `GROUNDSKEEPER_S3S_FS` (taken as it is), then what an earlier run built into
//! `target/tools/s3s-fs/`. Fetching, only when neither is there: `cargo install s3s-fs --version
//! 0.14.1 --features binary --locked` into `target/tools/s3s-fs.partial/`, renamed to
//! `target/tools/s3s-fs/` once the binary runs, so an interrupted build leaves nothing that looks
//! usable. It needs only the Rust toolchain; the build (about three minutes on two cores) runs
//! beside the build of the tests. The tests look in the same places (`tests/src/s3_server.rs`).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::process;

/// How the tests are told where the binary is.
pub const ENV_VAR: &str = "GROUNDSKEEPER_S3S_FS";
const CRATE: &str = "s3s-fs";
const VERSION: &str = "0.14.1";

/// The binary, found or being built: a build from crates.io takes minutes, so it runs beside the
/// build of the tests (see [`Lookup::wait`]).
pub enum Lookup {
    /// At hand, or `None` when it cannot be had (said why already).
    Done(Option<PathBuf>),
    /// `cargo install` running in a thread of its own.
    Building(std::thread::JoinHandle<Option<PathBuf>>),
}

impl Lookup {
    /// Whether the binary is still being built.
    pub fn is_building(&self) -> bool {
        matches!(self, Lookup::Building(_))
    }

    /// The binary, once at hand; `None` after saying why there is none (the tests that need it
    /// then skip, saying so).
    pub fn wait(self) -> Option<PathBuf> {
        match self {
            Lookup::Done(binary) => binary,
            Lookup::Building(build) => build.join().unwrap_or_else(|_| {
                eprintln!("xtask: the build of {CRATE} panicked (see above)");
                None
            }),
        }
    }
}

/// The binary if it is at hand; else its build from crates.io, started in the background.
pub fn ensure(tools: &Path) -> Lookup {
    if let Some(path) = std::env::var_os(ENV_VAR) {
        let binary = PathBuf::from(path);
        return Lookup::Done(match binary_version(&binary) {
            Some(version) => {
                println!("xtask: {CRATE}: {} ({version}, from {ENV_VAR})", binary.display());
                Some(binary)
            }
            None => {
                eprintln!("xtask: {ENV_VAR}={} does not run; fix or unset it", binary.display());
                None
            }
        });
    }
    let folder = tools.join(CRATE);
    let binary = folder.join("bin").join(CRATE);
    if let Some(version) = binary_version(&binary).filter(|v| v.ends_with(VERSION)) {
        println!("xtask: {CRATE}: {} ({version})", binary.display());
        return Lookup::Done(Some(binary));
    }
    println!(
        "xtask: {CRATE} {VERSION} not found; building it from crates.io into {} beside the tests' \
         build (a few minutes on two cores)",
        folder.display()
    );
    Lookup::Building(std::thread::spawn(move || match fetch(&folder) {
        Ok(version) => {
            println!("xtask: {CRATE}: {} ({version})", binary.display());
            Some(binary)
        }
        Err(why) => {
            eprintln!(
                "xtask: could not build {CRATE}: {why}\nxtask: to get it: `cargo install {CRATE} \
                 --version {VERSION} --features binary --locked`, then set {ENV_VAR} to the \
                 binary. Until then the tests that upload snapshots to a bucket skip."
            );
            None
        }
    }))
}

/// `cargo install` into `<folder>.partial`, checked, then renamed into place.
fn fetch(folder: &Path) -> Result<String, String> {
    let partial = folder.with_extension("partial");
    for stale in [&partial, folder] {
        match std::fs::remove_dir_all(stale) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(format!("cannot remove {}: {e}", stale.display()));
            }
            _ => {}
        }
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut install = Command::new(cargo);
    process::without_cargo_run_env(&mut install)
        .args(["install", CRATE, "--version", VERSION, "--features", "binary", "--locked", "--quiet"])
        .arg("--root")
        .arg(&partial)
        // Built on its own, in a folder of cargo's choosing, not in this project's target.
        .env_remove("CARGO_TARGET_DIR");
    process::output(install)?;
    let built = partial.join("bin").join(CRATE);
    let version = binary_version(&built)
        .filter(|v| v.ends_with(VERSION))
        .ok_or_else(|| format!("the built {} does not report version {VERSION}", built.display()))?;
    std::fs::rename(&partial, folder)
        .map_err(|e| format!("cannot rename {} to {}: {e}", partial.display(), folder.display()))?;
    Ok(version)
}

/// What `s3s-fs --version` prints (`s3s-fs 0.14.1`), if it runs.
fn binary_version(binary: &Path) -> Option<String> {
    let output = Command::new(binary).arg("--version").stderr(Stdio::null()).output().ok()?;
    if !output.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    (!text.is_empty()).then_some(text)
}
