//! The command line: `kubectl groundskeeper task|snapshot|schedule|etcd|scylla …` with kubectl's
//! usual flags.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use groundskeeper_api::maintenance_task::{TargetKind, TaskType};

#[derive(Parser, Debug)]
#[command(
    name = "kubectl-groundskeeper",
    bin_name = "kubectl groundskeeper",
    version,
    about = "Maintenance of etcd and Scylla clusters with groundskeeper: tasks, and one screen per cluster.",
    after_help = "Exit codes: 0 done (a waited-for task Completed); 1 error (API, kubeconfig, bad input); \
                  2 wrong usage; 3 the task Failed; 4 the task was Rejected; 5 the task was deleted \
                  while waited for; 6 a restore was not confirmed (nothing was created); 130 \
                  interrupted (the task goes on)."
)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
}

/// kubectl's flags, accepted before or after the subcommand.
#[derive(Args, Debug, Clone, Default)]
pub struct Global {
    /// Namespace (default: the kubeconfig context's, else `default`).
    #[arg(short = 'n', long, global = true)]
    pub namespace: Option<String>,
    /// Every namespace (task list only).
    #[arg(short = 'A', long, global = true)]
    pub all_namespaces: bool,
    /// The kubeconfig context to use (default: the current context).
    #[arg(long, global = true)]
    pub context: Option<String>,
    /// The kubeconfig file (default: $KUBECONFIG, else ~/.kube/config).
    #[arg(long, global = true)]
    pub kubeconfig: Option<PathBuf>,
    /// Print the objects instead of the text view.
    #[arg(short = 'o', long, global = true, value_enum)]
    pub output: Option<Output>,
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    Json,
    Yaml,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// MaintenanceTasks: create (and follow), list, describe, cancel.
    #[command(subcommand)]
    Task(TaskCommand),
    /// EtcdClusters.
    #[command(subcommand)]
    Etcd(EtcdCommand),
    /// An EtcdCluster's snapshots, as its status records them.
    #[command(subcommand)]
    Snapshot(SnapshotCommand),
    /// ScyllaClusters.
    #[command(subcommand)]
    Scylla(ScyllaCommand),
    /// MaintenanceSchedules: list, describe (with their next runs).
    #[command(subcommand)]
    Schedule(ScheduleCommand),
    /// Suspend a cluster's maintenance: its tasks wait (running ones too with --stop-running),
    /// except the types --allow names; it ends by itself after --for / at --until.
    Suspend(SuspendArgs),
    /// Resume a cluster's maintenance: delete its suspensions.
    Resume {
        /// KIND/NAME: `etcdcluster/main`, `scyllacluster/db`.
        target: String,
    },
}

#[derive(Args, Debug)]
pub struct SuspendArgs {
    /// KIND/NAME: `etcdcluster/main`, `scyllacluster/db`.
    pub target: String,
    /// Why (shown on every task that waits).
    #[arg(long)]
    pub reason: String,
    /// How long, e.g. `2h`, `30m`, `1h30m`.
    #[arg(long = "for", value_name = "DURATION", conflicts_with = "until")]
    pub duration: Option<String>,
    /// Until when (RFC 3339, e.g. `2026-11-25T06:00:00Z`). Neither: until `resume`.
    #[arg(long)]
    pub until: Option<String>,
    /// Task types that go on meanwhile (repeatable), e.g. `--allow snapshot`.
    #[arg(long = "allow", value_parser = parse_task_type)]
    pub allow: Vec<TaskType>,
    /// Stop tasks that are running (their Jobs are deleted); without it they finish.
    #[arg(long)]
    pub stop_running: bool,
    /// Who suspends, as tasks will name them (default: $USER).
    #[arg(long)]
    pub by: Option<String>,
}

#[derive(Subcommand, Debug)]
pub enum ScheduleCommand {
    /// The schedules: expression, time zone, last and next run, what they made.
    #[command(alias = "ls")]
    List,
    /// One schedule: its next runs in its time zone and in UTC, its tasks, why a run was skipped.
    Describe {
        name: String,
        /// How many of the next runs to show.
        #[arg(long, default_value_t = 5)]
        next: usize,
    },
}

#[derive(Subcommand, Debug)]
pub enum TaskCommand {
    /// Create a task, and with --wait follow it to its end.
    Create(Box<CreateArgs>),
    /// The tasks, in queue order per target.
    #[command(alias = "ls")]
    List(ListArgs),
    /// One task: timeline, per-node progress, errors.
    Describe { name: String },
    /// Follow an existing task until it ends (as `create --wait` does); the exit code says how.
    Wait { name: String },
    /// Cancel a task: delete it, and with it its Jobs.
    Cancel { name: String },
    /// The plan of a task as `task create` would make it, without creating it (a dry run): which
    /// nodes or members, in which order, what is skipped and why, expected durations.
    Plan(Box<CreateArgs>),
    /// Approve the plan a task awaits approval for (its `status.plan.id`); it starts once its
    /// target, windows and queue allow.
    Approve {
        name: String,
        /// The plan id you reviewed: refused if the task's plan has changed since.
        #[arg(long)]
        plan: Option<String>,
    },
}

#[derive(Subcommand, Debug)]
pub enum SnapshotCommand {
    /// Every snapshot of the cluster in every store, newest first per store: revision, keys,
    /// size, SHA-256 and whether it was proven to restore; the last proof and the quorum above.
    #[command(alias = "ls")]
    List {
        /// The EtcdCluster: NAME or etcdcluster/NAME.
        target: String,
    },
}

#[derive(Args, Debug)]
pub struct CreateArgs {
    /// Cleanup (ScyllaCluster); Compact, Defragment, Maintenance, Snapshot, Copy, Verify or
    /// Restore (EtcdCluster).
    #[arg(value_parser = parse_task_type)]
    pub task_type: TaskType,
    /// The cluster: KIND/NAME (`etcdcluster/main`, `scyllacluster/db`) or NAME alone (the kind
    /// follows from the type).
    #[arg(long)]
    pub target: String,
    /// A setting of the type's config, `key=value` (repeatable): e.g. `retainRevisions=1000`,
    /// `maxFragmentedPercent=30`, `keyspaces=ks1,ks2`, `compact.physical=true` (Maintenance),
    /// `persistentVolumeClaim=etcd-backups`, `retain=3`.
    #[arg(long = "config", value_name = "KEY=VALUE")]
    pub config: Vec<String>,
    /// The type's config as a YAML or JSON document (`-`: standard input); `--config` settings
    /// apply on top.
    #[arg(long, value_name = "FILE")]
    pub config_file: Option<PathBuf>,
    /// Name of the task (default: generated from the target and type).
    #[arg(long)]
    pub name: Option<String>,
    /// Fail the task if it has not finished this many seconds after its creation.
    #[arg(long, value_name = "SECONDS")]
    pub deadline: Option<i64>,
    /// Start only inside the target's maintenance windows (as automatic tasks do); without it
    /// the task starts as soon as its target may take work.
    #[arg(long)]
    pub wait_for_window: bool,
    /// Wait for approval of its plan (`task approve NAME`) before starting.
    #[arg(long)]
    pub require_approval: bool,
    /// Follow the task until it ends; the exit code says how it ended.
    #[arg(long)]
    pub wait: bool,
    #[command(flatten)]
    pub stores: StoreArgs,
}

/// Where snapshots come from and go to (snapshot, copy, verify, restore), and a restore's
/// confirmation.
#[derive(Args, Debug, Default, Clone)]
pub struct StoreArgs {
    /// The store the snapshots are read from (copy, verify, restore): `pvc/NAME` or a bucket URL
    /// (`s3://BUCKET[/PREFIX]`, `gs://…`, `az://…`).
    #[arg(long, value_name = "STORE")]
    pub from: Option<String>,
    /// The store they are written to (snapshot, copy), in the same forms.
    #[arg(long, value_name = "STORE")]
    pub to: Option<String>,
    /// The endpoint of the bucket(s) named by --from/--to, for S3-compatible stores other than
    /// AWS (`https://minio.backup.svc:9000`). Two buckets with different settings: --config-file.
    #[arg(long, value_name = "URL")]
    pub endpoint: Option<String>,
    /// The region of the bucket(s) named by --from/--to (S3).
    #[arg(long)]
    pub region: Option<String>,
    /// The Secret holding the credentials of the bucket(s) named by --from/--to (keys
    /// `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, ...; see docs/snapshots.md).
    #[arg(long, value_name = "SECRET")]
    pub credentials_secret: Option<String>,
    /// The snapshot's name in the --from store (verify, restore). Absent: verify takes the
    /// newest, restore the newest proven to restore.
    #[arg(long, value_name = "NAME")]
    pub object: Option<String>,
    /// Restore: confirm on the command line instead of typing `yes` at the prompt (needed when
    /// standard input is not a terminal).
    #[arg(long, visible_alias = "confirm")]
    pub yes: bool,
    /// Restore although the quorum is not lost (to go back to a snapshot on purpose).
    #[arg(long)]
    pub override_quorum_check: bool,
    /// Restore to this revision (a point in time): the newest full snapshot at or before it and
    /// the deltas after it, replayed up to it.
    #[arg(long, value_name = "REVISION", conflicts_with = "to_time")]
    pub to_revision: Option<i64>,
    /// Restore to the cluster as of this time (RFC 3339, 2026-11-29T10:30:00Z): the revision of
    /// the newest backup written at or before it, shown before you confirm.
    #[arg(long, value_name = "TIME")]
    pub to_time: Option<String>,
    /// How what is written is compressed (snapshot, delta; a restore with --to-revision or
    /// --to-time, for the snapshot it saves): `zstd` or `none` (the default).
    #[arg(long, value_name = "zstd|none", value_parser = ["zstd", "none"])]
    pub compression: Option<String>,
    /// The Secret (in the task's namespace) holding the encryption key, and its data key
    /// (default `key`): what is written is encrypted with it, encrypted objects read are opened
    /// with it (snapshot, delta, verify, restore; never a copy, which carries objects as they
    /// are). Only mounted into the Job: the plugin and the controller never read it.
    #[arg(long, value_name = "SECRET[/KEY]")]
    pub encryption_secret: Option<String>,
}

#[derive(Args, Debug)]
pub struct ListArgs {
    /// Only the tasks of this cluster (NAME or KIND/NAME).
    #[arg(long)]
    pub target: Option<String>,
}

#[derive(Subcommand, Debug)]
pub enum EtcdCommand {
    /// One screen for an EtcdCluster: members, compaction, maintenance, queued tasks, conditions.
    Status { name: String },
}

#[derive(Subcommand, Debug)]
pub enum ScyllaCommand {
    /// Per node: current and last-cleaned ring hash, whether it needs a cleanup and why, cleanup Jobs.
    CleanupStatus { name: String },
}

/// A task type, as written or in any case (`defragment`, `Defragment`).
pub fn parse_task_type(text: &str) -> Result<TaskType, String> {
    TaskType::KNOWN
        .iter()
        .find(|known| known.eq_ignore_ascii_case(text))
        .map(|known| TaskType::parse(known))
        .ok_or_else(|| format!("unknown task type {text:?}: one of {}", TaskType::KNOWN.join(", ")))
}

/// A target kind as kubectl users write it: the kind, its plural or short name, any case.
pub fn parse_target_kind(text: &str) -> Option<TargetKind> {
    match text.to_ascii_lowercase().as_str() {
        "etcdcluster" | "etcdclusters" | "etcdc" | "etcdcluster.groundskeeper.dev" => {
            Some(TargetKind::EtcdCluster)
        }
        "scyllacluster" | "scyllaclusters" | "scyllacluster.scylla.scylladb.com" => {
            Some(TargetKind::ScyllaCluster)
        }
        _ => None,
    }
}

/// `--target`: KIND/NAME, or NAME with the kind the type works on.
pub fn parse_target(text: &str, task_type: &TaskType) -> Result<(TargetKind, String), String> {
    let (kind, name) = match text.split_once('/') {
        Some((kind, name)) => {
            let kind = parse_target_kind(kind).ok_or_else(|| {
                format!("--target {text}: unknown kind {kind:?}: EtcdCluster or ScyllaCluster")
            })?;
            (kind, name)
        }
        None => {
            let kind = task_type
                .target_kind()
                .ok_or_else(|| format!("--target {text}: give the kind, as KIND/NAME"))?;
            (kind, text)
        }
    };
    if name.is_empty() || name.contains('/') {
        return Err(format!("--target {text}: expected KIND/NAME or NAME"));
    }
    if let Some(wanted) = task_type.target_kind()
        && wanted != kind
    {
        return Err(format!("--target {text}: a {task_type} task works on a {wanted}, not a {kind}"));
    }
    Ok((kind, name.to_owned()))
}

/// The EtcdCluster of `snapshot list`: NAME or etcdcluster/NAME.
pub fn parse_etcd_cluster(text: &str) -> Result<String, String> {
    let name = match text.split_once('/') {
        Some((kind, name)) => match parse_target_kind(kind) {
            Some(TargetKind::EtcdCluster) => name,
            _ => {
                return Err(format!("{text}: snapshots are an EtcdCluster's; give NAME or etcdcluster/NAME"));
            }
        },
        None => text,
    };
    if name.is_empty() || name.contains('/') {
        return Err(format!("{text}: expected NAME or etcdcluster/NAME"));
    }
    Ok(name.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_as_people_write_them() {
        type Wanted = Result<(TargetKind, &'static str), &'static str>;
        let cases: &[(&str, TaskType, Wanted)] = &[
            ("main", TaskType::Defragment, Ok((TargetKind::EtcdCluster, "main"))),
            ("etcdcluster/main", TaskType::Compact, Ok((TargetKind::EtcdCluster, "main"))),
            ("EtcdCluster/main", TaskType::Snapshot, Ok((TargetKind::EtcdCluster, "main"))),
            ("scyllaclusters/db", TaskType::Cleanup, Ok((TargetKind::ScyllaCluster, "db"))),
            ("db", TaskType::Cleanup, Ok((TargetKind::ScyllaCluster, "db"))),
            (
                "scyllacluster/db",
                TaskType::Defragment,
                Err("a Defragment task works on a EtcdCluster, not a ScyllaCluster"),
            ),
            ("pod/x", TaskType::Compact, Err("unknown kind \"pod\"")),
            ("etcdcluster/", TaskType::Compact, Err("expected KIND/NAME or NAME")),
        ];
        for (text, task_type, wanted) in cases {
            let got = parse_target(text, task_type);
            match (wanted, got) {
                (Ok((kind, name)), Ok((got_kind, got_name))) => {
                    assert_eq!((kind, *name), (&got_kind, got_name.as_str()), "{text}")
                }
                (Err(part), Err(message)) => assert!(message.contains(part), "{text}: {message}"),
                (wanted, got) => panic!("{text}: wanted {wanted:?}, got {got:?}"),
            }
        }
    }

    #[test]
    fn task_types_in_any_case() {
        assert_eq!(parse_task_type("defragment"), Ok(TaskType::Defragment));
        assert_eq!(parse_task_type("Snapshot"), Ok(TaskType::Snapshot));
        let err = parse_task_type("defrag").unwrap_err();
        assert!(
            err.contains("Cleanup, Compact, Defragment, Maintenance, Snapshot, Copy, Verify, Delta, Restore"),
            "{err}"
        );
        assert_eq!(parse_task_type("restore"), Ok(TaskType::Restore));
    }

    #[test]
    fn the_store_flags_parse() {
        let cli = Cli::try_parse_from([
            "kubectl-groundskeeper",
            "task",
            "create",
            "copy",
            "--target",
            "main",
            "--from",
            "pvc/snaps",
            "--to",
            "s3://b/etcd",
            "--endpoint",
            "http://minio:9000",
            "--region",
            "eu-west-1",
            "--credentials-secret",
            "s3-keys",
            "--wait",
        ])
        .unwrap();
        let Command::Task(TaskCommand::Create(args)) = cli.command else { panic!("{:?}", cli.command) };
        assert_eq!(args.task_type, TaskType::Copy);
        let stores = args.stores;
        assert_eq!(stores.from.as_deref(), Some("pvc/snaps"));
        assert_eq!(stores.to.as_deref(), Some("s3://b/etcd"));
        assert_eq!(stores.endpoint.as_deref(), Some("http://minio:9000"));
        assert_eq!(stores.region.as_deref(), Some("eu-west-1"));
        assert_eq!(stores.credentials_secret.as_deref(), Some("s3-keys"));
        assert!(!stores.yes && !stores.override_quorum_check);
        for confirm in ["--yes", "--confirm"] {
            let cli = Cli::try_parse_from([
                "kubectl-groundskeeper",
                "task",
                "create",
                "restore",
                "--target",
                "main",
                "--from",
                "s3://b",
                "--object",
                "main-1.db",
                "--override-quorum-check",
                confirm,
            ])
            .unwrap();
            let Command::Task(TaskCommand::Create(args)) = cli.command else { panic!("{:?}", cli.command) };
            assert_eq!(args.task_type, TaskType::Restore);
            assert_eq!(args.stores.object.as_deref(), Some("main-1.db"));
            assert!(args.stores.yes && args.stores.override_quorum_check, "{confirm}");
        }
        // `task plan` takes the same flags.
        let cli = Cli::try_parse_from([
            "kubectl-groundskeeper",
            "task",
            "plan",
            "verify",
            "--target",
            "main",
            "--from",
            "gs://b",
        ])
        .unwrap();
        assert!(
            matches!(cli.command, Command::Task(TaskCommand::Plan(ref a)) if a.stores.from.as_deref() == Some("gs://b"))
        );
    }

    #[test]
    fn snapshot_list_takes_an_etcd_cluster() {
        let cli = Cli::try_parse_from([
            "kubectl-groundskeeper",
            "snapshot",
            "list",
            "etcdcluster/main",
            "-o",
            "yaml",
        ])
        .unwrap();
        assert!(
            matches!(cli.command, Command::Snapshot(SnapshotCommand::List { ref target }) if target == "etcdcluster/main")
        );
        assert_eq!(cli.global.output, Some(Output::Yaml));
        assert!(Cli::try_parse_from(["kubectl-groundskeeper", "snapshot", "ls", "main"]).is_ok());
        let cases: &[(&str, Result<&str, &str>)] = &[
            ("main", Ok("main")),
            ("etcdcluster/main", Ok("main")),
            ("EtcdClusters/main", Ok("main")),
            ("scyllacluster/db", Err("snapshots are an EtcdCluster's")),
            ("etcdcluster/", Err("expected NAME or etcdcluster/NAME")),
        ];
        for (text, wanted) in cases {
            match (parse_etcd_cluster(text), wanted) {
                (Ok(got), Ok(want)) => assert_eq!(got, *want),
                (Err(why), Err(part)) => assert!(why.contains(part), "{text}: {why}"),
                (got, want) => panic!("{text}: got {got:?}, wanted {want:?}"),
            }
        }
    }
}
