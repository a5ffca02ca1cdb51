//! The S3 server the snapshot tests upload to: `s3s-fs` 0.14.1 from crates.io, an S3 API over a
//! folder that checks SigV4 signatures (so wrong credentials are refused as a real store refuses
//! them). Written by others, it keeps the tests honest about what an S3 store accepts.
//!
//! Lookup: `GROUNDSKEEPER_S3S_FS` (taken as it is), then what an earlier run built into
//! `target/tools/s3s-fs/`. Fetching, only when neither is there: `cargo install s3s-fs --version
//! 0.14.1 --features binary --locked` into `target/tools/s3s-fs.partial/`, renamed to
//! `target/tools/s3s-fs/` once the binary runs, so an interrupted build leaves nothing that looks
//! usable. It needs only the Rust toolchain (about 1.5 minutes on two cores). The tests look in
//! the same places (`tests/src/s3_server.rs`).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::process;

/// How the tests are told where the binary is.
pub const ENV_VAR: &str = "GROUNDSKEEPER_S3S_FS";
const CRATE: &str = "s3s-fs";
const VERSION: &str = "0.14.1";

/// The binary, found or built; `None` after saying why there is none (the tests that need it
/// then skip, saying so).
pub fn ensure(tools: &Path) -> Option<PathBuf> {
    if let Some(path) = std::env::var_os(ENV_VAR) {
        let binary = PathBuf::from(path);
        return match binary_version(&binary) {
            Some(version) => {
                println!("xtask: {CRATE}: {} ({version}, from {ENV_VAR})", binary.display());
                Some(binary)
            }
            None => {
                eprintln!("xtask: {ENV_VAR}={} does not run; fix or unset it", binary.display());
                None
            }
        };
    }
    let folder = tools.join(CRATE);
    let binary = folder.join("bin").join(CRATE);
    if let Some(version) = binary_version(&binary).filter(|v| v.ends_with(VERSION)) {
        println!("xtask: {CRATE}: {} ({version})", binary.display());
        return Some(binary);
    }
    println!(
        "xtask: {CRATE} {VERSION} not found; building it from crates.io into {} (about 1.5 minutes)",
        folder.display()
    );
    match fetch(&folder) {
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
    }
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
    install
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
