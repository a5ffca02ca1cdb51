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
//! Inside each data store's folder the files are stages in one order (see [`stages`]): `model`
//! at the bottom, then `observe` → `decide` → `apply`/`record` → `job` → `task` → `controller`,
//! with every other file of the folder placed in that order by name. A file may use the files of
//! its own stage and of the stages before it, never one after it, and the imports inside a folder
//! form no cycle. And `docs/architecture.md`, the map of those folders, names each of their files.
//!
//! Paths are resolved the way the compiler resolves them: `crate::x`, `super::…` from the file's
//! own module (or from the inline module it is written in, such as `mod tests { … }`), and
//! grouped imports (`use crate::{a, b::c}`).

use std::collections::{BTreeMap, BTreeSet};
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

/// The stages of a data store's folder, lowest first, each with its files (named as paths in the
/// folder, without `.rs`). A file may use the files of its own stage and of the stages before
/// it. `etcd/restore/` holds a Restore's files in the same order, each in the stage of its name
/// (`restore` itself: the folder's own tests, at its top). A file's unit tests (`x/tests.rs`,
/// `mod tests { … }`) are part of the file.
fn stages(store: &str) -> &'static [(&'static str, &'static [&'static str])] {
    match store {
        "etcd" => &[
            ("model", &["model", "config", "restore/model"]),
            ("rules", &["policy", "sampler", "backups", "partition", "fleet", "fleet_slot", "quorum"]),
            ("metrics", &["metrics"]),
            ("observe", &["observe", "restore/observe"]),
            ("decide", &["decide", "restore/decide"]),
            ("apply/record", &["apply", "record", "snapshot_record", "task_progress", "restore/apply"]),
            ("job", &["job", "snapshot_steps", "restore/job"]),
            ("task", &["task", "restore/task", "restore"]),
            ("discovery", &["discovery", "operator_discovery"]),
            ("controller", &["controller"]),
        ],
        "scylla" => &[
            ("model", &["model", "config"]),
            ("rules", &["settings", "members_record", "ownership", "ring_quiet"]),
            ("metrics", &["metrics"]),
            ("agent", &["agent", "ownership_reader"]),
            ("observe", &["observe"]),
            ("condition texts", &["condition_texts"]),
            ("decide", &["decide"]),
            ("apply/record", &["apply", "record"]),
            ("job", &["job"]),
            ("node steps", &["node_steps"]),
            ("task", &["task"]),
            ("controller", &["ring_observer", "controller"]),
        ],
        _ => &[],
    }
}

/// Each file of `store` with the index and name of its stage.
fn ranks(store: &str) -> BTreeMap<&'static str, (usize, &'static str)> {
    stages(store)
        .iter()
        .enumerate()
        .flat_map(|(rank, (stage, files))| files.iter().map(move |file| (*file, (rank, *stage))))
        .collect()
}

/// The stages of `store` in order, for messages: `model → rules → …`.
fn stage_order(store: &str) -> String {
    stages(store).iter().map(|(stage, _)| *stage).collect::<Vec<_>>().join(" → ")
}

/// The file a path in a store's folder (`restore/decide.rs`, `task/tests.rs`) belongs to, as
/// [`stages`] names it (`restore/decide`, `task`); `None` for a folder's `mod.rs`, which only
/// declares the folder's modules.
fn unit_of(in_store: &str) -> Option<String> {
    let mut parts: Vec<&str> = in_store.trim_end_matches(".rs").split('/').collect();
    if parts.last() == Some(&"mod") {
        return None;
    }
    if parts.len() > 1 && parts.last() == Some(&"tests") {
        parts.pop();
    }
    Some(parts.join("/"))
}

/// Where inline modules (`mod tests { … }`) start and end in `code`, with their names.
fn inline_modules(code: &str) -> Vec<(usize, usize, String)> {
    let mut found = Vec::new();
    for (start, _) in code.match_indices("mod ") {
        if !is_path_start(code, start) {
            continue;
        }
        let rest = &code[start + "mod ".len()..];
        let Some(name) = ident(rest.trim_start()) else { continue };
        let after = rest.trim_start()[name.len()..].trim_start();
        if !after.starts_with('{') {
            continue;
        }
        let open = code.len() - after.len();
        let mut depth = 0;
        let mut end = code.len();
        for (i, c) in code[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + i;
                        break;
                    }
                }
                _ => {}
            }
        }
        found.push((open, end, name));
    }
    found
}

/// Every path `rest` names, groups expanded: `a::{b, c::d}` → `[a, b]`, `[a, c, d]`; a glob or
/// `self` ends the path where it stands.
fn expand_paths(rest: &str) -> Vec<Vec<String>> {
    let rest = rest.trim_start();
    if let Some(group) = rest.strip_prefix('{') {
        let mut items = Vec::new();
        let mut depth = 0;
        let mut item_start = 0;
        for (i, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => {
                    items.push(&group[item_start..i]);
                    break;
                }
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    items.push(&group[item_start..i]);
                    item_start = i + 1;
                }
                _ => {}
            }
        }
        return items.into_iter().filter(|item| !item.trim().is_empty()).flat_map(expand_paths).collect();
    }
    let Some(name) = ident(rest) else {
        return vec![Vec::new()];
    };
    match rest[name.len()..].strip_prefix("::") {
        Some(more) => expand_paths(more)
            .into_iter()
            .map(|mut tail| {
                tail.insert(0, name.clone());
                tail
            })
            .collect(),
        None => vec![vec![name]],
    }
}

/// The module paths `code`, the file of module `module`, names through `crate::` and `super::`,
/// from the crate's root: `super::{a, b::C}` in `[etcd, x]` → `[etcd, a]`, `[etcd, b, C]`.
fn used_paths(module: &[String], code: &str) -> Vec<Vec<String>> {
    let inline = inline_modules(code);
    let mut used = Vec::new();
    for (start, _) in code.match_indices("crate::") {
        if is_path_start(code, start) {
            used.extend(expand_paths(&code[start + "crate::".len()..]));
        }
    }
    for (start, _) in code.match_indices("super::") {
        if !is_path_start(code, start) {
            continue;
        }
        let mut here = module.to_vec();
        here.extend(
            inline.iter().filter(|(open, end, _)| *open < start && start < *end).map(|m| m.2.clone()),
        );
        let mut rest = &code[start..];
        while let Some(after) = rest.strip_prefix("super::") {
            here.pop();
            rest = after;
        }
        used.extend(expand_paths(rest).into_iter().map(|tail| here.iter().cloned().chain(tail).collect()));
    }
    used
}

/// The file of `store` a module path names (the longest of `files` it starts with), if any.
fn file_named(store: &str, path: &[String], files: &BTreeSet<String>) -> Option<String> {
    if path.first().map(String::as_str) != Some(store) {
        return None;
    }
    (2..=path.len()).rev().map(|n| path[1..n].join("/")).find(|unit| files.contains(unit))
}

/// Whether `path` names a folder of `store` itself (`[etcd]`, `[etcd, restore]`), not a file in
/// it: what it then uses of the folder is out of sight.
fn names_folder(store: &str, path: &[String], files: &BTreeSet<String>) -> bool {
    if path.first().map(String::as_str) != Some(store) {
        return false;
    }
    let folder = path[1..].join("/");
    if folder.is_empty() {
        return true;
    }
    files.iter().any(|f| f.starts_with(&format!("{folder}/")))
        && file_named(store, path, files).is_none_or(|file| file == folder)
}

/// The files of its own store the file at `relative` (to `src/`) uses, and the uses that break
/// the stage order. `files`: every file of the store, as [`stages`] names them.
fn check_stages(
    relative: &str,
    source: &str,
    files: &BTreeSet<String>,
) -> (BTreeSet<String>, Vec<Violation>) {
    let module = module_path(relative);
    let (Some(store), Some(in_store)) = (module.first(), relative.split_once('/').map(|(_, rest)| rest))
    else {
        return (BTreeSet::new(), Vec::new());
    };
    let Some(unit) = unit_of(in_store).filter(|_| STORES.contains(&store.as_str())) else {
        return (BTreeSet::new(), Vec::new());
    };
    let ranks = ranks(store);
    let code = strip_comments(source);
    let mut used = BTreeSet::new();
    let mut violations = BTreeSet::new();
    for path in used_paths(&module, &code) {
        if names_folder(store, &path, files) {
            violations.insert(Violation {
                file: relative.to_owned(),
                uses: format!("crate::{}", path.join("::")),
                rule: "a folder of a data store only declares its files: name the file used".to_owned(),
            });
            continue;
        }
        let Some(target) = file_named(store, &path, files) else { continue };
        if target == unit {
            continue;
        }
        if let (Some(&(from, from_stage)), Some(&(to, to_stage))) =
            (ranks.get(unit.as_str()), ranks.get(target.as_str()))
            && to > from
        {
            violations.insert(Violation {
                file: relative.to_owned(),
                uses: format!("crate::{store}::{}", target.replace('/', "::")),
                rule: format!(
                    "stage `{from_stage}` may not use `{store}/{target}.rs` of the later stage \
                     `{to_stage}`: {}",
                    stage_order(store)
                ),
            });
        }
        used.insert(target);
    }
    (used, violations.into_iter().collect())
}

/// How messages name a file of `store`: `etcd/job.rs`, or `etcd/restore/` for a folder's own.
fn shown(store: &str, unit: &str, files: &BTreeSet<String>) -> String {
    if files.iter().any(|f| f.starts_with(&format!("{unit}/"))) {
        format!("{store}/{unit}/")
    } else {
        format!("{store}/{unit}.rs")
    }
}

/// The files of `store` that have no stage, the stages that name no file, and the cycles among
/// the files' uses (`uses`: each file's uses of the store's other files).
fn check_store(
    store: &str,
    files: &BTreeSet<String>,
    uses: &BTreeMap<String, BTreeSet<String>>,
) -> Vec<Violation> {
    let ranks = ranks(store);
    let mut violations = Vec::new();
    for file in files.iter().filter(|f| !ranks.contains_key(f.as_str())) {
        violations.push(Violation {
            file: shown(store, file, files),
            uses: "-".to_owned(),
            rule: format!("it has no stage: place it in `stages`: {}", stage_order(store)),
        });
    }
    for named in ranks.keys().filter(|f| !files.contains(**f)) {
        violations.push(Violation {
            file: format!("{store}/{named}.rs"),
            uses: "-".to_owned(),
            rule: "`stages` names a file that does not exist".to_owned(),
        });
    }
    // A cycle, if any, through each file: depth first along its uses of its own stage (a use of
    // an earlier stage cannot close one, a use of a later one is refused above).
    let same_stage = |from: &String, to: &String| {
        ranks.get(from.as_str()).map(|r| r.0) == ranks.get(to.as_str()).map(|r| r.0)
    };
    let mut reported = BTreeSet::new();
    for start in files {
        let mut stack = vec![(start.clone(), vec![start.clone()])];
        let mut seen = BTreeSet::new();
        while let Some((at, path)) = stack.pop() {
            for next in uses.get(&at).into_iter().flatten().filter(|next| same_stage(&at, next)) {
                if next == start {
                    let members: BTreeSet<String> = path.iter().cloned().collect();
                    if reported.insert(members) {
                        let cycle: Vec<String> =
                            path.iter().chain([start]).map(|f| shown(store, f, files)).collect();
                        violations.push(Violation {
                            file: shown(store, start, files),
                            uses: format!(
                                "crate::{store}::{}",
                                path[1.min(path.len() - 1)].replace('/', "::")
                            ),
                            rule: format!("a cycle: {}; imports go one way", cycle.join(" → ")),
                        });
                    }
                } else if seen.insert(next.clone()) {
                    let mut longer = path.clone();
                    longer.push(next.clone());
                    stack.push((next.clone(), longer));
                }
            }
        }
    }
    violations
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

/// The files of each data store's folder, by their path in it, with their code.
fn store_sources(src: &Path, store: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    rust_files(&src.join(store), &mut found);
    found
        .iter()
        .map(|file| {
            let relative = file.strip_prefix(src).unwrap().to_string_lossy().replace('\\', "/");
            (relative, std::fs::read_to_string(file).unwrap())
        })
        .collect()
}

#[test]
fn each_data_store_keeps_its_stage_order() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut violations = Vec::new();
    for store in STORES {
        let sources = store_sources(&src, store);
        let in_store = |relative: &str| relative.split_once('/').map(|(_, rest)| rest.to_owned());
        let files: BTreeSet<String> =
            sources.iter().filter_map(|(relative, _)| unit_of(&in_store(relative)?)).collect();
        let mut uses = BTreeMap::new();
        for (relative, source) in &sources {
            let (used, broken) = check_stages(relative, source, &files);
            violations.extend(broken);
            if let Some(unit) = in_store(relative).and_then(|r| unit_of(&r)) {
                uses.entry(unit).or_insert_with(BTreeSet::new).extend(used);
            }
        }
        violations.extend(check_store(store, &files, &uses));
    }
    assert!(
        violations.is_empty(),
        "the stages of the data stores' folders:\n{}",
        violations
            .iter()
            .map(|v| format!("  {}: uses {} ({})", v.file, v.uses, v.rule))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// The stage order's checker: each use of a later stage is caught, each allowed use passes.
#[test]
fn uses_of_a_later_stage_are_caught() {
    let cases: [(&str, &str, Option<&str>); 16] = [
        ("etcd/observe.rs", "use super::decide::{ClusterTaskView, Observed};", Some("crate::etcd::decide")),
        ("etcd/decide.rs", "use crate::etcd::record::is_maintenance;", Some("crate::etcd::record")),
        (
            "scylla/job.rs",
            "let start = super::task::to_start(&nodes, &racks, limits);",
            Some("crate::scylla::task"),
        ),
        (
            "scylla/node_steps.rs",
            "use crate::scylla::{settings::Limits, task::to_start};",
            Some("crate::scylla::task"),
        ),
        ("etcd/restore/decide.rs", "use super::job::step_of_restore;", Some("crate::etcd::restore::job")),
        ("etcd/restore/observe.rs", "use super::super::decide::Observed;", Some("crate::etcd::decide")),
        ("etcd/model.rs", "use super::{observe, policy::Policy};", Some("crate::etcd::policy")),
        ("etcd/task.rs", "use super::restore;", Some("crate::etcd::restore")),
        (
            "scylla/observe.rs",
            "mod tests {\n    use super::super::decide::Plan;\n}",
            Some("crate::scylla::decide"),
        ),
        ("etcd/decide.rs", "use super::{model::Observed, observe::cluster_revision, quorum};", None),
        ("etcd/task.rs", "use super::restore::{model::Admission, task::advance};", None),
        (
            "etcd/restore/observe.rs",
            "use super::super::observe::observe_members;\nuse super::model::ReadyPods;",
            None,
        ),
        ("scylla/record.rs", "use super::apply::patch_service;\nuse crate::scylla::decide::owned_by;", None),
        ("etcd/policy.rs", "fn f() {}\n#[cfg(test)]\nmod tests {\n    use super::*;\n}", None),
        ("etcd/task/tests.rs", "use super::*;\nuse crate::etcd::job::Step;", None),
        ("scylla/apply.rs", "/// see [`super::task`]", None),
    ];
    for (file, source, forbidden) in cases {
        let store = file.split('/').next().unwrap();
        let files: BTreeSet<String> = ranks(store).into_keys().map(str::to_owned).collect();
        let (_, broken) = check_stages(file, source, &files);
        let found: Vec<String> = broken.into_iter().map(|v| v.uses).collect();
        match forbidden {
            Some(uses) => assert!(
                found.iter().any(|f| f == uses),
                "{file}: `{source}` must be refused for {uses}: {found:?}"
            ),
            None => assert!(found.is_empty(), "{file}: `{source}` must pass: {found:?}"),
        }
    }
    // A cycle inside one stage is caught too.
    let files: BTreeSet<String> = ["apply", "record"].map(str::to_owned).into();
    let uses = BTreeMap::from([
        ("apply".to_owned(), BTreeSet::from(["record".to_owned()])),
        ("record".to_owned(), BTreeSet::from(["apply".to_owned()])),
    ]);
    let cycles: Vec<Violation> =
        check_store("etcd", &files, &uses).into_iter().filter(|v| v.rule.starts_with("a cycle")).collect();
    assert_eq!(cycles.len(), 1, "{cycles:?}");
}

/// The folders under `dir`, at any depth.
fn folders(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|err| panic!("read {}: {err}", dir.display())) {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            found.push(path.clone());
            folders(&path, found);
        }
    }
}

/// Whether `page` names `name` (`etcd/job.rs`) on its own, not as the tail of a longer path.
fn names(page: &str, name: &str) -> bool {
    page.match_indices(name).any(|(at, _)| {
        page[..at].chars().next_back().is_none_or(|c| !(c.is_alphanumeric() || "_/".contains(c)))
    })
}

/// docs/architecture.md is the map of the data stores' folders: it names each of their files
/// (`etcd/job.rs`, `etcd/restore/job.rs`; a file's unit tests, `tests.rs`, go with it) and each
/// of their folders (`etcd/restore/`, or the file it holds the tests of: `etcd/task.rs`).
#[test]
fn the_architecture_page_names_every_file_of_the_data_stores() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let src = root.join("src");
    let page = std::fs::read_to_string(root.join("../docs/architecture.md")).expect("docs/architecture.md");
    let mut missing = Vec::new();
    for store in STORES {
        let mut files = Vec::new();
        rust_files(&src.join(store), &mut files);
        for file in files.iter().filter(|f| !f.ends_with("tests.rs")) {
            let name = file.strip_prefix(&src).unwrap().to_string_lossy().replace('\\', "/");
            if !names(&page, &name) {
                missing.push(format!("`{name}`"));
            }
        }
        let mut dirs = Vec::new();
        folders(&src.join(store), &mut dirs);
        for dir in dirs {
            let name = dir.strip_prefix(&src).unwrap().to_string_lossy().replace('\\', "/");
            if !names(&page, &format!("{name}/")) && !names(&page, &format!("{name}.rs")) {
                missing.push(format!("`{name}/`"));
            }
        }
    }
    assert!(missing.is_empty(), "docs/architecture.md does not name {}", missing.join(", "));
}
