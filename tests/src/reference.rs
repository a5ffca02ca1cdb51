//! The real Scylla REST API description and scylla-operator's CRDs that the contract tests check
//! against. They are not part of this repository: they are looked for in a `reference/scylla/`
//! folder beside it (`../shared/reference/scylla/` of the workspace), or where
//! `GROUNDSKEEPER_REFERENCE_DIR` points (the folder holding `scylla/`).
//!
//! Without them a contract test says that it is skipped and why, and passes; under `CI=true` a
//! missing folder fails the test instead, so that CI never passes without checking the contract.

use std::path::PathBuf;

/// The folder with the Scylla reference files, or `None` (after saying so) when it is missing
/// outside CI. `test` names the test for the message.
pub fn scylla_dir(test: &str) -> Option<PathBuf> {
    let dir = match std::env::var_os("GROUNDSKEEPER_REFERENCE_DIR") {
        Some(dir) => PathBuf::from(dir).join("scylla"),
        None => PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/reference/scylla")),
    };
    if dir.is_dir() {
        return Some(dir);
    }
    let why = format!(
        "the Scylla reference files are not at {} (a clone without the reference folder beside it; \
         set GROUNDSKEEPER_REFERENCE_DIR to the folder holding scylla/)",
        dir.display()
    );
    if std::env::var("CI").is_ok_and(|ci| ci == "true") {
        panic!("{test}: {why}; under CI=true the contract tests must run");
    }
    println!("skipped: {test}: {why}");
    None
}

/// The content of reference file `file` of `dir`, or a panic naming it.
pub fn read(dir: &std::path::Path, file: &str) -> String {
    let path = dir.join(file);
    std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("read {}: {err}", path.display()))
}
