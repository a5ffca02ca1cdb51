//! The layering of `controller/src`, checked on every test run so that it cannot decay: generic
//! layers across, one folder per data store, imports in one direction only.
//!
//! * the generic layers, lowest first: `runtime` → `jobs` → `conditions` → `tasks` → `schedules`. Each may use
//!   the ones below it, never one above it, and none of them may use a data store: neither the
//!   folders `etcd` and `scylla`, nor what the shared crates know of one data store
//!   (`groundskeeper_stores`, `groundskeeper_api::{etcd_cluster, storage_cluster,
//!   official_etcd_cluster, scylla}`);
//! * the data stores `etcd` and `scylla` use the generic layers and never each other (nor what the
//!   shared crates know of the other);
//! * `lib.rs` is the one place that names both data stores: it hands each one's task target to the
//!   task controller. `main.rs` and `bin/` are programs on top.
//!
//! Paths are resolved the way the compiler resolves them: `crate::x`, `super::…` from the file's
//! own module, and grouped imports (`use crate::{a, b::c}`).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

const GENERIC: [&str; 5] = ["runtime", "jobs", "conditions", "tasks", "schedules"];
const STORES: [&str; 2] = ["etcd", "scylla"];

/// What a data store's code may not name of the other one in the shared crates.
fn foreign_paths(store: &str) -> &'static [&'static str] {
    match store {
        "etcd" => &["groundskeeper_api::scylla", "groundskeeper_stores::scylla"],
        "scylla" => &[
            "groundskeeper_api::etcd_cluster",
            "groundskeeper_api::storage_cluster",
            "groundskeeper_api::official_etcd_cluster",
            "groundskeeper_stores::etcd",
        ],
        _ => &[],
    }
}

/// What generic code may not name in the shared crates: anything of one data store.
const GENERIC_FORBIDDEN_PATHS: [&str; 5] = [
    "groundskeeper_stores",
    "groundskeeper_api::scylla",
    "groundskeeper_api::etcd_cluster",
    "groundskeeper_api::storage_cluster",
    "groundskeeper_api::official_etcd_cluster",
];

/// One forbidden use: the file, the module it names, and why that is not allowed.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Violation {
    file: String,
    uses: String,
    rule: String,
}

/// The violations of one file at `relative` (to `src/`) with content `source`.
fn check_file(relative: &str, source: &str) -> Vec<Violation> {
    let module = module_path(relative);
    let Some(top) = module.first().cloned() else {
        return Vec::new();
    };
    let code = strip_comments(source);
    let mut violations = BTreeSet::new();
    let mut forbid = |uses: String, rule: String| {
        violations.insert(Violation { file: relative.to_owned(), uses, rule });
    };
    for used in used_top_modules(&module, &code) {
        if used == top {
            continue;
        }
        if let Some(rank) = GENERIC.iter().position(|g| *g == top) {
            if STORES.contains(&used.as_str()) {
                forbid(format!("crate::{used}"), format!("`{top}` is generic: it may not use a data store"));
            } else if let Some(used_rank) = GENERIC.iter().position(|g| *g == used)
                && used_rank > rank
            {
                forbid(format!("crate::{used}"), format!("`{top}` is below `{used}`: it may not use it"));
            }
        } else if STORES.contains(&top.as_str()) && STORES.contains(&used.as_str()) {
            forbid(
                format!("crate::{used}"),
                format!("the data stores `{top}` and `{used}` never use each other"),
            );
        }
    }
    let external: &[&str] =
        if GENERIC.contains(&top.as_str()) { &GENERIC_FORBIDDEN_PATHS } else { foreign_paths(&top) };
    for path in external {
        if mentions_path(&code, path) {
            forbid(
                path.to_string(),
                format!("`{top}` may not use what the shared crates know of another data store"),
            );
        }
    }
    violations.into_iter().collect()
}

/// The module path of a file under `src/`: `tasks/controller.rs` → `[tasks, controller]`;
/// `lib.rs`, `main.rs` and `bin/` are the crate's root and programs: `[]`.
fn module_path(relative: &str) -> Vec<String> {
    if relative == "lib.rs" || relative == "main.rs" || relative.starts_with("bin/") {
        return Vec::new();
    }
    let without = relative.trim_end_matches(".rs");
    let mut parts: Vec<String> = without.split('/').map(str::to_owned).collect();
    if parts.last().is_some_and(|last| last == "mod") {
        parts.pop();
    }
    parts
}

/// The top-level modules `code`, in module `module`, names through `crate::` or `super::`.
fn used_top_modules(module: &[String], code: &str) -> BTreeSet<String> {
    let mut used = BTreeSet::new();
    for (start, _) in code.match_indices("crate::") {
        if is_path_start(code, start) {
            used.extend(first_segments(&code[start + "crate::".len()..]));
        }
    }
    for (start, _) in code.match_indices("super::") {
        if !is_path_start(code, start) {
            continue;
        }
        let mut rest = &code[start..];
        let mut up = 0;
        while let Some(after) = rest.strip_prefix("super::") {
            up += 1;
            rest = after;
        }
        // `super` of a file's module is its parent; at the top level the crate's root.
        let base = module.len().saturating_sub(up);
        match module.get(..base) {
            Some([first, ..]) => {
                used.insert(first.clone());
            }
            _ => used.extend(first_segments(rest)),
        }
    }
    used
}

/// The first segment of a path, or of each path in a group `{a::b, c}`.
fn first_segments(rest: &str) -> Vec<String> {
    if let Some(group) = rest.strip_prefix('{') {
        let mut depth = 1;
        let mut end = group.len();
        for (i, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = i;
                        break;
                    }
                }
                _ => {}
            }
        }
        let mut found = Vec::new();
        let mut depth = 0;
        let mut item_start = 0;
        let inner = &group[..end];
        for (i, c) in inner.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    found.extend(ident(inner[item_start..i].trim()));
                    item_start = i + 1;
                }
                _ => {}
            }
        }
        found.extend(ident(inner[item_start..].trim()));
        return found;
    }
    ident(rest).into_iter().collect()
}

fn ident(text: &str) -> Option<String> {
    let name: String = text.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
    (!name.is_empty() && name != "self").then_some(name)
}

/// Whether the path at `start` begins there (not inside a longer name like `my_crate::`).
fn is_path_start(code: &str, start: usize) -> bool {
    code[..start].chars().next_back().is_none_or(|c| !(c.is_alphanumeric() || c == '_' || c == ':'))
}

/// Whether `code` names `path` (`a::b`) directly or through a group (`use a::{b, …}`).
fn mentions_path(code: &str, path: &str) -> bool {
    let (head, tail) = match path.rsplit_once("::") {
        Some((head, tail)) => (head, Some(tail)),
        None => (path, None),
    };
    code.match_indices(head).any(|(start, _)| {
        if !is_path_start(code, start) {
            return false;
        }
        let rest = &code[start + head.len()..];
        match tail {
            None => rest.starts_with("::") || rest.starts_with(|c: char| !c.is_alphanumeric() && c != '_'),
            Some(tail) => rest
                .strip_prefix("::")
                .is_some_and(|rest| first_segments(rest).iter().any(|first| first == tail)),
        }
    })
}

/// The code without `//` comments (doc links name modules without using them).
fn strip_comments(source: &str) -> String {
    source.lines().map(|line| line.split("//").next().unwrap_or_default()).collect::<Vec<_>>().join("\n")
}

fn rust_files(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|err| panic!("read {}: {err}", dir.display())) {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, found);
        } else if path.extension().is_some_and(|e| e == "rs") {
            found.push(path);
        }
    }
}

#[test]
fn the_controller_keeps_its_layers() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut tops = BTreeSet::new();
    let mut violations = Vec::new();
    for file in &files {
        let relative = file.strip_prefix(&src).unwrap().to_string_lossy().replace('\\', "/");
        tops.extend(module_path(&relative).first().cloned());
        let source = std::fs::read_to_string(file).unwrap();
        violations.extend(check_file(&relative, &source));
    }
    let expected: BTreeSet<String> = GENERIC.iter().chain(STORES.iter()).map(|m| m.to_string()).collect();
    assert_eq!(tops, expected, "controller/src has exactly the generic layers and one folder per data store");
    assert!(
        violations.is_empty(),
        "forbidden imports:\n{}",
        violations
            .iter()
            .map(|v| format!("  {}: uses {} ({})", v.file, v.uses, v.rule))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// The checker itself: each forbidden import is caught, each allowed one passes.
#[test]
fn forbidden_imports_are_caught() {
    let cases: [(&str, &str, Option<&str>); 16] = [
        ("tasks/controller.rs", "use crate::etcd::policy::Policy;", Some("crate::etcd")),
        ("tasks/controller.rs", "use crate::{jobs, scylla::task};", Some("crate::scylla")),
        ("tasks/x/y.rs", "use super::super::super::etcd::task;", Some("crate::etcd")),
        ("runtime/context.rs", "use crate::tasks::metrics::TaskMetrics;", Some("crate::tasks")),
        ("jobs/spec.rs", "let x = crate::conditions::format_time(t);", Some("crate::conditions")),
        (
            "conditions/writer.rs",
            "use groundskeeper_api::scylla::ScyllaCluster;",
            Some("groundskeeper_api::scylla"),
        ),
        (
            "tasks/status.rs",
            "use groundskeeper_stores::etcd::plan::DefragPolicy;",
            Some("groundskeeper_stores"),
        ),
        (
            "tasks/status.rs",
            "use groundskeeper_api::{maintenance_task::X, etcd_cluster::Y};",
            Some("groundskeeper_api::etcd_cluster"),
        ),
        ("etcd/task.rs", "use crate::scylla::observe;", Some("crate::scylla")),
        (
            "scylla/task.rs",
            "use groundskeeper_stores::etcd::connect::Connection;",
            Some("groundskeeper_stores::etcd"),
        ),
        (
            "etcd/decide.rs",
            "use groundskeeper_api::scylla::facts::MemberFacts;",
            Some("groundskeeper_api::scylla"),
        ),
        ("tasks/controller.rs", "use crate::jobs::{self, JobState};\nuse crate::runtime::scope;", None),
        ("etcd/task.rs", "use crate::tasks::target::Target;\nuse groundskeeper_stores::etcd::plan::X;", None),
        ("tasks/controller.rs", "/// see [`crate::etcd`] for one such target", None),
        ("lib.rs", "Arc::new(etcd::task::EtcdTarget); use crate::scylla::task;", None),
        ("scylla/ownership/tests.rs", "use super::super::decide::Plan; use super::*;", None),
    ];
    for (file, source, forbidden) in cases {
        let found: Vec<String> = check_file(file, source).into_iter().map(|v| v.uses).collect();
        match forbidden {
            Some(uses) => assert!(
                found.iter().any(|f| f == uses),
                "{file}: `{source}` must be refused for {uses}: {found:?}"
            ),
            None => assert!(found.is_empty(), "{file}: `{source}` must pass: {found:?}"),
        }
    }
}
