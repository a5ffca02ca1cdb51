//! Snapshot file names and retention: a name template (`{cluster}`, `{time}`) rendered for one
//! snapshot, and, in a folder that other clusters' snapshots and unrelated files may share, which
//! files are this cluster's snapshots and which of them to delete so that the last N remain.
//!
//! A file is a snapshot of the cluster only when its whole name is the template rendered for that
//! cluster at some valid time: `{cluster}` must match the cluster's name exactly and `{time}` a
//! time in [`TIME_FORMAT`] (16 characters, fixed shape). So with `{cluster}-{time}.db` the files
//! of `main-2` (`main-2-20260101T000000Z.db`) are never taken for files of `main`, and nothing
//! else on the volume is ever a candidate. Snapshots are ordered by the time in their name (not
//! their mtime, which a copy or a restore from backup changes). A template without `{time}` names
//! every snapshot of a cluster alike: each one replaces the last, and there is nothing to delete.
//!
//! [`select`] orders and counts a cluster's snapshots; [`policy`] decides what a retention policy
//! keeps of its snapshots and deltas; [`apply`] lists a folder, deletes what the policy selected
//! and says what it did.

use std::path::Path;

use jiff::Timestamp;

pub mod policy;

/// The placeholders a template may hold.
pub const CLUSTER: &str = "{cluster}";
pub const TIME: &str = "{time}";
/// How `{time}` is rendered: UTC, to the second, e.g. `20260102T150405Z`.
pub const TIME_FORMAT: &str = "%Y%m%dT%H%M%SZ";
/// Length of a rendered `{time}`.
const TIME_LEN: usize = 16;
/// Longest snapshot file name: most file systems take 255 bytes, and the temporary file a run
/// writes first is named `.NAME.partial`.
pub const MAX_FILE_NAME_LEN: usize = 255 - ".".len() - ".partial".len();

/// One part of a template with `{cluster}` already replaced.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Text(String),
    Time,
}

/// A file name template for one cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameTemplate {
    parts: Vec<Part>,
}

/// A file that is one of the cluster's snapshots.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Snapshot<'a> {
    /// `None`: the template has no `{time}`.
    time: Option<Timestamp>,
    name: &'a str,
}

impl NameTemplate {
    /// The template with `{cluster}` replaced by `cluster`. `Err` says what is wrong with either.
    pub fn parse(template: &str, cluster: &str) -> Result<Self, String> {
        if cluster.is_empty() || cluster.contains(['/', '{', '}']) || cluster.contains('\0') {
            return Err(format!(
                "cluster name {cluster:?} cannot be part of a file name (empty, or holds '/', a brace or NUL)"
            ));
        }
        if template.is_empty() {
            return Err("the file name template is empty".into());
        }
        if template.contains('/') || template.contains('\0') {
            return Err(format!(
                "file name template {template:?} holds '/' or NUL: give a file name, not a path"
            ));
        }
        let mut parts = Vec::new();
        let mut rest = template;
        while !rest.is_empty() {
            let next = [CLUSTER, TIME].iter().filter_map(|p| rest.find(p).map(|at| (at, *p))).min();
            let (text, after) = match next {
                Some((at, placeholder)) => {
                    (&rest[..at], Some((placeholder, &rest[at + placeholder.len()..])))
                }
                None => (rest, None),
            };
            if text.contains(['{', '}']) {
                return Err(format!(
                    "file name template {template:?} holds a brace that is not part of {CLUSTER} or {TIME}"
                ));
            }
            push_text(&mut parts, text);
            match after {
                Some((CLUSTER, tail)) => {
                    push_text(&mut parts, cluster);
                    rest = tail;
                }
                Some((_, tail)) => {
                    parts.push(Part::Time);
                    rest = tail;
                }
                None => rest = "",
            }
        }
        let parsed = Self { parts };
        let example = parsed.render(Timestamp::UNIX_EPOCH);
        if example == "." || example == ".." {
            return Err(format!("file name template {template:?} names a folder"));
        }
        if example.len() > MAX_FILE_NAME_LEN {
            return Err(format!(
                "file name template {template:?} renders to {} characters for cluster {cluster}; \
                 the most is {MAX_FILE_NAME_LEN} (file systems take 255, and the temporary \
                 file's name adds 9)",
                example.len()
            ));
        }
        Ok(parsed)
    }

    /// Whether names hold a time (else every snapshot of the cluster has the same name).
    pub fn has_time(&self) -> bool {
        self.parts.contains(&Part::Time)
    }

    /// The file name of a snapshot taken at `time`.
    pub fn render(&self, time: Timestamp) -> String {
        let time = time.strftime(TIME_FORMAT).to_string();
        self.parts
            .iter()
            .map(|part| match part {
                Part::Text(text) => text.as_str(),
                Part::Time => time.as_str(),
            })
            .collect()
    }

    /// The time `name` was rendered at; `None` when it is not this template's or the template
    /// holds no `{time}`.
    pub fn time_of(&self, name: &str) -> Option<Timestamp> {
        self.matches(name).flatten()
    }

    /// Whether `name` is this template rendered at some time.
    pub fn is_snapshot_name(&self, name: &str) -> bool {
        self.matches(name).is_some()
    }

    /// `Some` when `name` is this template rendered at some time: that time (the first `{time}`'s;
    /// every `{time}` must hold the same one), or `Some(None)` for a template without `{time}`.
    fn matches(&self, name: &str) -> Option<Option<Timestamp>> {
        let mut rest = name;
        let mut time: Option<Timestamp> = None;
        for part in &self.parts {
            match part {
                Part::Text(text) => rest = rest.strip_prefix(text.as_str())?,
                Part::Time => {
                    let found = parse_time(rest.get(..TIME_LEN)?)?;
                    if time.is_some_and(|t| t != found) {
                        return None;
                    }
                    time = Some(found);
                    rest = &rest[TIME_LEN..];
                }
            }
        }
        rest.is_empty().then_some(time)
    }

    /// `Some` when `name` is the temporary file of an interrupted run writing one of this
    /// template's names (`.NAME.partial`, as the snapshot command names it).
    fn matches_partial(&self, name: &str) -> bool {
        name.strip_prefix('.')
            .and_then(|n| n.strip_suffix(".partial"))
            .is_some_and(|n| self.matches(n).is_some())
    }
}

fn push_text(parts: &mut Vec<Part>, text: &str) {
    if text.is_empty() {
        return;
    }
    match parts.last_mut() {
        Some(Part::Text(last)) => last.push_str(text),
        _ => parts.push(Part::Text(text.to_owned())),
    }
}

/// A rendered `{time}`: exactly [`TIME_FORMAT`]'s shape and a real time.
fn parse_time(text: &str) -> Option<Timestamp> {
    let shape = text.len() == TIME_LEN
        && text.bytes().enumerate().all(|(i, b)| match i {
            8 => b == b'T',
            15 => b == b'Z',
            _ => b.is_ascii_digit(),
        });
    if !shape {
        return None;
    }
    jiff::fmt::strtime::parse(TIME_FORMAT, text)
        .ok()?
        .to_datetime()
        .ok()?
        .to_zoned(jiff::tz::TimeZone::UTC)
        .ok()
        .map(|z| z.timestamp())
}

/// What retention deletes in a folder.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selection {
    /// This cluster's snapshots beyond the newest `retain`, oldest first.
    pub delete: Vec<String>,
    /// Temporary files of this cluster's interrupted runs.
    pub partials: Vec<String>,
}

/// Of the regular files `files` in a snapshot folder, those to delete so that `retain` snapshots
/// of the cluster remain, `keep` (the snapshot just written) always among them; and the cluster's
/// leftover temporary files. Files that are not the cluster's snapshots are never selected.
pub fn select(template: &NameTemplate, files: &[String], keep: &str, retain: u32) -> Selection {
    let mut snapshots: Vec<Snapshot> = files
        .iter()
        .filter(|name| name.as_str() != keep)
        .filter_map(|name| template.matches(name).map(|time| Snapshot { time, name: name.as_str() }))
        .collect();
    // Newest first; equal times (a template without {time}) by name, for a stable answer.
    snapshots.sort_by(|a, b| b.cmp(a));
    let others_kept = (retain.max(1) - 1) as usize;
    let mut delete: Vec<String> = snapshots.iter().skip(others_kept).map(|s| s.name.to_owned()).collect();
    delete.reverse();
    let mut partials: Vec<String> =
        files.iter().filter(|name| template.matches_partial(name)).cloned().collect();
    partials.sort();
    Selection { delete, partials }
}

/// The cluster's backups in one store and what decides them: which names are its full snapshots
/// (the template), which are its deltas (`delta_time`: the time a delta's name holds), the
/// policy, and the time it is applied at.
pub struct Scope<'a> {
    pub template: &'a NameTemplate,
    pub delta_time: &'a dyn Fn(&str) -> Option<Timestamp>,
    pub policy: &'a policy::Policy,
    pub now: Timestamp,
}

impl Scope<'_> {
    /// Of a store's listing (name, size), what the policy deletes (`keep`, the full snapshot
    /// just written, stays) and the temporary files of the cluster's interrupted runs. Names that
    /// are neither the cluster's snapshots nor its deltas are never selected.
    pub fn select(&self, listed: &[(String, u64)], keep: &str) -> (policy::Selection, Vec<String>) {
        let backups: Vec<policy::Backup> = listed
            .iter()
            .filter_map(|(name, size)| {
                let (time, kind) = match (self.delta_time)(name) {
                    Some(time) => (Some(time), policy::Kind::Delta),
                    None => (self.template.matches(name)?, policy::Kind::Full),
                };
                Some(policy::Backup { name: name.clone(), time, size: *size, kind })
            })
            .collect();
        let mut partials: Vec<String> = listed
            .iter()
            .map(|(name, _)| name)
            .filter(|name| self.template.matches_partial(name))
            .cloned()
            .collect();
        partials.sort();
        (policy::select(&backups, keep, self.policy, self.now), partials)
    }
}

/// What [`apply`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Applied {
    /// Full snapshots deleted, oldest first.
    pub deleted: Vec<String>,
    /// Deltas deleted, oldest first.
    pub deleted_deltas: Vec<String>,
    pub removed_partials: Vec<String>,
    /// Bytes of the cluster's backups left (what could not be deleted included).
    pub kept_bytes: u64,
    /// See [`policy::Selection::over_limit`].
    pub over_limit: Option<u64>,
    /// `<file>: <why>` for each file that could not be deleted.
    pub errors: Vec<String>,
}

/// Lists `folder`'s regular files (symbolic links and folders are left alone), deletes what
/// `scope` selects, and fsyncs the folder so the deletions last.
pub fn apply(folder: &Path, scope: &Scope, keep: &str) -> Applied {
    let mut applied = Applied::default();
    let entries = match std::fs::read_dir(folder) {
        Ok(entries) => entries,
        Err(e) => {
            applied.errors.push(format!("{}: cannot list it: {e}", folder.display()));
            return applied;
        }
    };
    let listed: Vec<(String, u64)> = entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let meta = entry.metadata().ok().filter(|m| m.is_file())?;
            Some((entry.file_name().into_string().ok()?, meta.len()))
        })
        .collect();
    let (selection, partials) = scope.select(&listed, keep);
    let mut left_bytes = 0;
    // `backup`: a snapshot or delta, whose bytes stay counted when it cannot be deleted (a
    // temporary file is no backup).
    let mut remove =
        |name: &String, done: &mut Vec<String>, backup: bool| match std::fs::remove_file(folder.join(name)) {
            Ok(()) => done.push(name.clone()),
            // Gone already (deleted by hand meanwhile): nothing left to do.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                if backup {
                    left_bytes += listed.iter().find(|(n, _)| n == name).map_or(0, |(_, size)| *size);
                }
                applied.errors.push(format!("{name}: {e}"));
            }
        };
    let (mut deleted, mut deltas, mut removed) = (Vec::new(), Vec::new(), Vec::new());
    for name in &selection.delete_full {
        remove(name, &mut deleted, true);
    }
    for name in &selection.delete_deltas {
        remove(name, &mut deltas, true);
    }
    for name in &partials {
        remove(name, &mut removed, false);
    }
    applied.kept_bytes = selection.kept_bytes + left_bytes;
    applied.over_limit = selection.over_limit;
    applied.deleted = deleted;
    applied.deleted_deltas = deltas;
    applied.removed_partials = removed;
    let changed = !applied.deleted.is_empty()
        || !applied.deleted_deltas.is_empty()
        || !applied.removed_partials.is_empty();
    if changed && let Err(e) = std::fs::File::open(folder).and_then(|d| d.sync_all()) {
        applied.errors.push(format!("{}: cannot fsync the folder: {e}", folder.display()));
    }
    applied
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_render_the_cluster_and_the_time() {
        let at: Timestamp = "2026-01-02T15:04:05Z".parse().unwrap();
        for (template, cluster, wanted) in [
            ("{cluster}-{time}.db", "main", "main-20260102T150405Z.db"),
            ("{time}_{cluster}", "a", "20260102T150405Z_a"),
            ("etcd.db", "main", "etcd.db"),
            ("{cluster}.db", "main", "main.db"),
            ("{cluster}{time}{cluster}", "x", "x20260102T150405Zx"),
        ] {
            let parsed = NameTemplate::parse(template, cluster).unwrap();
            assert_eq!(parsed.render(at), wanted, "{template}");
        }
    }

    #[test]
    fn bad_templates_and_cluster_names_are_refused_saying_why() {
        for (template, cluster, says) in [
            ("", "main", "empty"),
            ("a/{time}", "main", "'/'"),
            ("{cluster}-{date}.db", "main", "brace"),
            ("{cluster}-{time", "main", "brace"),
            ("{cluster}", "..", "names a folder"),
            ("{cluster}.db", "", "cannot be part of a file name"),
            ("{cluster}.db", "a/b", "cannot be part of a file name"),
            (&format!("{}{{time}}", "x".repeat(231)), "main", "the most is 246"),
        ] {
            let err = NameTemplate::parse(template, cluster).unwrap_err();
            assert!(err.contains(says), "{template:?} {cluster:?}: {err}");
        }
    }

    /// The selection, table-driven: (case, template, cluster, files, keep, retain, deleted,
    /// partials removed).
    #[test]
    #[allow(clippy::type_complexity)] // a table of cases
    fn only_this_clusters_oldest_snapshots_and_its_leftovers_are_selected() {
        let t = |d: u32| format!("202601{d:02}T000000Z");
        let main = |d: u32| format!("main-{}.db", t(d));
        let cases: Vec<(&str, &str, &str, Vec<String>, String, u32, Vec<String>, Vec<String>)> = vec![
            (
                "keeps the newest, deletes the oldest first",
                "{cluster}-{time}.db",
                "main",
                vec![main(3), main(1), main(4), main(2)],
                main(4),
                2,
                vec![main(1), main(2)],
                vec![],
            ),
            (
                "fewer than retain: nothing",
                "{cluster}-{time}.db",
                "main",
                vec![main(1), main(2)],
                main(2),
                5,
                vec![],
                vec![],
            ),
            (
                "retain 1 keeps only the new one",
                "{cluster}-{time}.db",
                "main",
                vec![main(1), main(2), main(3)],
                main(3),
                1,
                vec![main(1), main(2)],
                vec![],
            ),
            (
                "a cluster whose name extends this one's is not this one",
                "{cluster}-{time}.db",
                "main",
                vec![
                    main(1),
                    main(2),
                    format!("main-2-{}.db", t(1)),
                    format!("main-{}.db.bak", t(1)),
                    format!("other-{}.db", t(1)),
                    "notes.txt".into(),
                    format!("main-{}.db", "20261399T000000Z"),
                    format!("main-{}.db", "2026010xT000000Z"),
                ],
                main(2),
                1,
                vec![main(1)],
                vec![],
            ),
            (
                "this one's name is a prefix of the other's, time first",
                "{time}-{cluster}.db",
                "main",
                vec![format!("{}-main.db", t(1)), format!("{}-main-2.db", t(1)), format!("{}-main.db", t(2))],
                format!("{}-main.db", t(2)),
                1,
                vec![format!("{}-main.db", t(1))],
                vec![],
            ),
            (
                "ordered by the time in the name, not by the name",
                "{cluster}-snap-{time}",
                "a",
                vec![
                    format!("a-snap-{}", "20251231T235959Z"),
                    format!("a-snap-{}", "20260101T000000Z"),
                    format!("a-snap-{}", "20240101T000000Z"),
                ],
                format!("a-snap-{}", "20260101T000000Z"),
                2,
                vec![format!("a-snap-{}", "20240101T000000Z")],
                vec![],
            ),
            (
                "leftover temporary files of this cluster only",
                "{cluster}-{time}.db",
                "main",
                vec![
                    main(2),
                    format!(".{}.partial", main(1)),
                    format!(".main-2-{}.db.partial", t(1)),
                    ".notes.partial".into(),
                ],
                main(2),
                5,
                vec![],
                vec![format!(".{}.partial", main(1))],
            ),
            (
                "no {time}: one name, nothing to delete",
                "{cluster}.db",
                "main",
                vec!["main.db".into(), "main-2.db".into(), ".main.db.partial".into()],
                "main.db".into(),
                1,
                vec![],
                vec![".main.db.partial".into()],
            ),
            (
                "two {time}s must agree",
                "{cluster}-{time}-{time}",
                "c",
                vec![
                    format!("c-{}-{}", t(1), t(2)),
                    format!("c-{}-{}", t(1), t(1)),
                    format!("c-{}-{}", t(3), t(3)),
                ],
                format!("c-{}-{}", t(3), t(3)),
                1,
                vec![format!("c-{}-{}", t(1), t(1))],
                vec![],
            ),
        ];
        for (case, template, cluster, files, keep, retain, deleted, partials) in cases {
            let template = NameTemplate::parse(template, cluster).unwrap();
            let selection = select(&template, &files, &keep, retain);
            assert_eq!(selection.delete, deleted, "{case}");
            assert_eq!(selection.partials, partials, "{case}");
        }
    }

    #[test]
    fn apply_deletes_only_regular_files_it_selected() {
        let dir = tempfile::tempdir().unwrap();
        let template = NameTemplate::parse("{cluster}-{time}.db", "main").unwrap();
        for name in [
            "main-20260101T000000Z.db",
            "main-20260102T000000Z.db",
            "main-20260103T000000Z.db",
            ".main-20260102T000000Z.db.partial",
            "main-2-20260101T000000Z.db",
        ] {
            std::fs::write(dir.path().join(name), b"x").unwrap();
        }
        // A folder with a matching name is not a snapshot: left alone.
        std::fs::create_dir(dir.path().join("main-20250101T000000Z.db")).unwrap();
        let policy = policy::Policy::keep_last(2);
        let not_deltas = |_: &str| None;
        let scope = Scope {
            template: &template,
            delta_time: &not_deltas,
            policy: &policy,
            now: Timestamp::UNIX_EPOCH,
        };
        let applied = apply(dir.path(), &scope, "main-20260103T000000Z.db");
        assert_eq!(applied.deleted, ["main-20260101T000000Z.db"]);
        assert_eq!(applied.removed_partials, [".main-20260102T000000Z.db.partial"]);
        assert!(applied.errors.is_empty(), "{:?}", applied.errors);
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(
            left,
            [
                "main-2-20260101T000000Z.db",
                "main-20250101T000000Z.db",
                "main-20260102T000000Z.db",
                "main-20260103T000000Z.db"
            ]
        );
    }
}
