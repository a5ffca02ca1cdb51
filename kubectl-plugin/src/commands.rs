//! Each command: read what it needs (thin), render (pure), print; the exit code.

use std::io::{IsTerminal, Read, Write};

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Service;
use kube::ResourceExt;
use kube::api::ObjectMeta;
use serde::Serialize;

use groundskeeper_api::EtcdCluster;
use groundskeeper_api::MaintenanceSchedule;
use groundskeeper_api::maintenance_suspension::{
    MaintenanceSuspension, MaintenanceSuspensionSpec, RunningTasks, SUSPENDED_BY_ANNOTATION,
};
use groundskeeper_api::maintenance_task::{
    DEFAULT_TTL_SECONDS_AFTER_FINISHED, MaintenanceTask, MaintenanceTaskSpec, TargetKind, TaskState,
    TaskTarget, TaskType,
};
use groundskeeper_api::maintenance_window::{windows_from_annotations, windows_of};
use groundskeeper_api::plan::{cleanup_plan, etcd_plan};
use groundskeeper_api::scylla::facts::member_selector;
use groundskeeper_api::scylla::facts::{ConditionFacts, datacenter_conditions};
use groundskeeper_api::scylla::facts::{cluster_facts, current_members};
use groundskeeper_api::scylla::{ScyllaCluster, ScyllaDBDatacenter};
use groundskeeper_api::snapshot_catalog::newest_proven;
use groundskeeper_api::validate::{ValidTask, Work, describe_errors, validate};
use groundskeeper_protocol::keys;
use groundskeeper_protocol::names::bounded_name;

use crate::access::Access;
use crate::cli::{
    Cli, Command, CreateArgs, EtcdCommand, ListArgs, Output, ScheduleCommand, ScyllaCommand, SnapshotCommand,
    TaskCommand, parse_etcd_cluster, parse_target_kind,
};
use crate::error::Error;
use crate::render;
use crate::render::restore::Proposal;
use crate::wait;

/// Exit code of `task create restore` when the restore was not confirmed: nothing was created.
pub const EXIT_NOT_CONFIRMED: i32 = 6;

/// Runs the command; the exit code on success.
pub async fn run(cli: Cli) -> Result<i32, Error> {
    let access = Access::connect(&cli.global).await?;
    let output = cli.global.output;
    if access.all_namespaces && !matches!(cli.command, Command::Task(TaskCommand::List(_))) {
        return Err(Error::Invalid(
            "-A/--all-namespaces is for `task list` only: name the namespace with -n".into(),
        ));
    }
    match cli.command {
        Command::Task(TaskCommand::Create(args)) => create(&access, *args, output).await,
        Command::Task(TaskCommand::List(args)) => list(&access, args, output).await,
        Command::Task(TaskCommand::Describe { name }) => describe(&access, &name, output).await,
        Command::Task(TaskCommand::Wait { name }) => wait_for_task(&access, &name, output).await,
        Command::Task(TaskCommand::Cancel { name }) => cancel(&access, &name).await,
        Command::Task(TaskCommand::Plan(args)) => plan(&access, *args, output).await,
        Command::Task(TaskCommand::Approve { name, plan }) => approve(&access, &name, plan.as_deref()).await,
        Command::Etcd(EtcdCommand::Status { name }) => etcd_status(&access, &name, output).await,
        Command::Snapshot(SnapshotCommand::List { target }) => snapshot_list(&access, &target, output).await,
        Command::Scylla(ScyllaCommand::CleanupStatus { name }) => {
            cleanup_status(&access, &name, output).await
        }
        Command::Suspend(args) => suspend(&access, args, output).await,
        Command::Resume { target } => resume(&access, &target).await,
        Command::Schedule(ScheduleCommand::List) => schedule_list(&access, output).await,
        Command::Schedule(ScheduleCommand::Describe { name, next }) => {
            schedule_describe(&access, &name, next, output).await
        }
    }
}

/// The target of `suspend` and `resume`: `KIND/NAME`, the kind spelled as `task list --target`
/// takes it.
fn suspension_target(text: &str) -> Result<TaskTarget, Error> {
    let (kind, name) = text.split_once('/').ok_or_else(|| {
        Error::Invalid(format!("{text:?}: give KIND/NAME, e.g. etcdcluster/main or scyllacluster/db"))
    })?;
    let kind = parse_target_kind(kind).ok_or_else(|| {
        Error::Invalid(format!("{text:?}: unknown kind {kind:?}: EtcdCluster or ScyllaCluster"))
    })?;
    if name.is_empty() {
        return Err(Error::Invalid(format!("{text:?}: no name after the kind")));
    }
    Ok(TaskTarget { kind, name: name.to_owned() })
}

/// The suspension `suspend` makes, checked as the controller checks it.
pub fn new_suspension(
    args: &crate::cli::SuspendArgs,
    namespace: &str,
    now: Timestamp,
) -> Result<MaintenanceSuspension, Error> {
    let target = suspension_target(&args.target)?;
    let until = match (&args.duration, &args.until) {
        (Some(text), _) => {
            let duration = groundskeeper_stores::duration::parse(text)
                .map_err(|why| Error::Invalid(format!("--for: {why}")))?;
            if !duration.is_positive() {
                return Err(Error::Invalid(format!("--for {text:?}: must be more than zero")));
            }
            Some(now.checked_add(duration).map_err(|e| Error::Invalid(format!("--for {text:?}: {e}")))?)
        }
        (None, Some(text)) => {
            let until: Timestamp = text.parse().map_err(|e| {
                Error::Invalid(format!("--until {text:?}: not a time like 2026-11-25T06:00:00Z ({e})"))
            })?;
            if until <= now {
                return Err(Error::Invalid(format!(
                    "--until {text}: in the past (it is {now}): a suspension in the past suspends nothing"
                )));
            }
            Some(until)
        }
        (None, None) => None,
    };
    if args.reason.trim().is_empty() {
        return Err(Error::Invalid("--reason is empty: say why, for whoever finds the tasks waiting".into()));
    }
    let by = args.by.clone().or_else(|| std::env::var("USER").ok()).unwrap_or_else(|| "someone".to_owned());
    let mut suspension = MaintenanceSuspension::new(
        "",
        MaintenanceSuspensionSpec {
            target: target.clone(),
            reason: args.reason.clone(),
            until: until.map(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time),
            allow_task_types: args.allow.clone(),
            running_tasks: if args.stop_running { RunningTasks::Stop } else { RunningTasks::Wait },
        },
    );
    suspension.metadata = ObjectMeta {
        generate_name: Some(bounded_name(&target.name, "-suspension-")),
        namespace: Some(namespace.to_owned()),
        annotations: Some([(SUSPENDED_BY_ANNOTATION.to_owned(), by)].into()),
        ..ObjectMeta::default()
    };
    Ok(suspension)
}

async fn suspend(
    access: &Access,
    args: crate::cli::SuspendArgs,
    output: Option<Output>,
) -> Result<i32, Error> {
    let namespace = access.namespace.clone();
    let suspension = new_suspension(&args, &namespace, Timestamp::now())?;
    let target = &suspension.spec.target;
    check_target(access, &namespace, &target.kind, &target.name).await?;
    let created = access.create(&namespace, &suspension).await?;
    match output {
        Some(format) => print_object(format, &created)?,
        None => {
            let until = created
                .spec
                .until
                .as_ref()
                .map_or_else(|| "until resumed".to_owned(), |t| format!("until {}", t.0));
            println!(
                "maintenance of {}/{} suspended {until} (maintenancesuspension.groundskeeper.dev/{}); {}; resume: kubectl groundskeeper resume -n {namespace} {}",
                target.kind,
                target.name,
                created.name_any(),
                if args.stop_running { "running tasks are stopped" } else { "running tasks finish" },
                args.target
            );
        }
    }
    Ok(0)
}

async fn resume(access: &Access, text: &str) -> Result<i32, Error> {
    let namespace = access.namespace.clone();
    let target = suspension_target(text)?;
    let suspensions: Vec<MaintenanceSuspension> = access.list(Some(&namespace), None).await?;
    let ours: Vec<&MaintenanceSuspension> = suspensions.iter().filter(|s| s.spec.target == target).collect();
    if ours.is_empty() {
        println!("{}/{} is not suspended: nothing to resume", target.kind, target.name);
        return Ok(0);
    }
    for suspension in &ours {
        access.delete::<MaintenanceSuspension>(&namespace, &suspension.name_any()).await?;
    }
    let names: Vec<String> = ours.iter().map(|s| s.name_any()).collect();
    println!(
        "maintenance of {}/{} resumed: deleted {}; its waiting tasks start in turn",
        target.kind,
        target.name,
        names.join(", ")
    );
    Ok(0)
}

async fn schedule_list(access: &Access, output: Option<Output>) -> Result<i32, Error> {
    let schedules: Vec<MaintenanceSchedule> = access.list(Some(&access.namespace), None).await?;
    match output {
        Some(format) => print_object(format, &list_of(&schedules))?,
        None => print!("{}", render::schedule::list(&schedules, Timestamp::now())),
    }
    Ok(0)
}

async fn schedule_describe(
    access: &Access,
    name: &str,
    next: usize,
    output: Option<Output>,
) -> Result<i32, Error> {
    let namespace = access.namespace.clone();
    let schedule = access.get::<MaintenanceSchedule>(&namespace, name).await.map_err(|e| {
        e.with_hint(format!("list them with `kubectl groundskeeper schedule list -n {namespace}`"))
    })?;
    match output {
        Some(format) => print_object(format, &schedule)?,
        None => print!("{}", render::schedule::describe(&schedule, Timestamp::now(), next)),
    }
    Ok(0)
}

/// The object as JSON or YAML.
pub fn print_object<T: Serialize>(format: Output, object: &T) -> Result<(), Error> {
    let text = match format {
        Output::Json => serde_json::to_string_pretty(object).map(|t| t + "\n").map_err(|e| e.to_string()),
        Output::Yaml => serde_saphyr::to_string(object).map_err(|e| e.to_string()),
    }
    .map_err(|e| Error::Invalid(format!("cannot print the object: {e}")))?;
    print!("{text}");
    Ok(())
}

fn list_of<T: Serialize>(items: &[T]) -> serde_json::Value {
    serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items})
}

fn not_found_hint(kind: &str, plural: &str, namespace: &str) -> String {
    format!(
        "list the {kind}s there with `kubectl get {plural} -n {namespace}`, or pick the namespace with -n"
    )
}

/// The task `task create` sends, checked as the controller will check it.
pub fn new_task(
    args: &CreateArgs,
    namespace: &str,
    document: Option<&str>,
) -> Result<MaintenanceTask, Error> {
    let (kind, target) = crate::cli::parse_target(&args.target, &args.task_type).map_err(Error::Invalid)?;
    let flags = crate::config::store_settings(&args.task_type, &args.stores).map_err(Error::Invalid)?;
    let config = crate::config::task_config(&args.task_type, document, &flags, &args.config)
        .map_err(Error::Invalid)?;
    let type_name = args.task_type.as_str().to_ascii_lowercase();
    let task = MaintenanceTask {
        metadata: ObjectMeta {
            name: args.name.clone(),
            generate_name: args.name.is_none().then(|| bounded_name(&target, &format!("-{type_name}-"))),
            namespace: Some(namespace.to_owned()),
            labels: Some([(keys::ORIGIN_LABEL.to_owned(), keys::ORIGIN_MANUAL.to_owned())].into()),
            ..ObjectMeta::default()
        },
        spec: MaintenanceTaskSpec {
            target: TaskTarget { kind, name: target },
            task_type: args.task_type.clone(),
            config,
            ttl_seconds_after_finished: DEFAULT_TTL_SECONDS_AFTER_FINISHED,
            ttl_seconds_after_failed: None,
            deadline_seconds: args.deadline,
            wait_for_window: args.wait_for_window,
            require_approval: args.require_approval,
        },
        status: None,
    };
    validate(&task).map_err(|errors| Error::Invalid(describe_errors(&errors)))?;
    Ok(task)
}

fn read_config_file(path: &std::path::Path) -> Result<String, Error> {
    if path.as_os_str() == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|e| Error::Invalid(format!("--config-file -: cannot read standard input: {e}")))?;
        return Ok(text);
    }
    std::fs::read_to_string(path)
        .map_err(|e| Error::Invalid(format!("--config-file {}: {e}", path.display())))
}

/// The target must exist: a task on a cluster that is not there would only be Rejected.
async fn check_target(access: &Access, namespace: &str, kind: &TargetKind, name: &str) -> Result<(), Error> {
    let found = match kind {
        TargetKind::EtcdCluster => access.get::<EtcdCluster>(namespace, name).await.map(|_| ()),
        TargetKind::ScyllaCluster => access.get::<ScyllaCluster>(namespace, name).await.map(|_| ()),
        TargetKind::Unknown(_) => Ok(()),
    };
    found.map_err(|e| {
        let plural = match kind {
            TargetKind::ScyllaCluster => "scyllaclusters",
            _ => "etcdclusters",
        };
        e.with_hint(not_found_hint(kind.as_str(), plural, namespace))
    })
}

/// The EtcdCluster `namespace/name`, or an error saying how to find it.
async fn get_etcd_cluster(access: &Access, namespace: &str, name: &str) -> Result<EtcdCluster, Error> {
    access
        .get(namespace, name)
        .await
        .map_err(|e| e.with_hint(not_found_hint("EtcdCluster", "etcdclusters", namespace)))
}

/// What `task create restore` shows before asking: the snapshot, its proof, the quorum, the
/// revisions lost and the plan, as `api::plan::etcd_plan` makes it from the cluster now. `Err`
/// when no plan can be made (the controller would reject the task for the same reason).
pub fn restore_proposal(
    task: &MaintenanceTask,
    cluster: &EtcdCluster,
    now: Timestamp,
) -> Result<String, Error> {
    let work = validate(task).map_err(|errors| Error::Invalid(describe_errors(&errors)))?.work;
    let Work::Restore(restore) = &work else {
        return Err(Error::Invalid(format!("task {} is not a Restore", task.spec.task_type)));
    };
    let target = format!("{}/{}", cluster.namespace().unwrap_or_default(), cluster.name_any());
    let plan = etcd_plan(&work, cluster, &target).map_err(|why| {
        Error::Invalid(format!("no restore plan can be made, so nothing was created: {why}"))
    })?;
    let store = restore.from.display();
    let catalog = cluster.status.as_ref().map(|s| s.snapshots.as_slice()).unwrap_or_default();
    let to_revision = groundskeeper_api::restore::target_revision(restore, catalog, now).map_err(|why| {
        Error::Invalid(format!("no restore plan can be made, so nothing was created: {why}"))
    })?;
    let proposal = Proposal {
        cluster,
        store: &store,
        object: restore.object.as_deref(),
        override_quorum_check: restore.override_quorum_check,
        to_revision,
        to_time: restore.to_time,
        plan: &plan,
    };
    Ok(render::restore::proposal(&proposal, now))
}

/// The snapshot the proposal showed, written into the task when none was named: what a person
/// confirms is what runs, not whatever is newest when the controller starts it. The proposal
/// shows the newest proven snapshot of the store by the same rule.
pub fn pin_snapshot(task: &mut MaintenanceTask, cluster: &EtcdCluster) {
    let Ok(ValidTask { work: Work::Restore(valid), .. }) = validate(task) else { return };
    if valid.object.is_some() {
        return;
    }
    let snapshots = cluster.status.as_ref().map(|s| s.snapshots.as_slice()).unwrap_or_default();
    let to_revision =
        groundskeeper_api::restore::target_revision(&valid, snapshots, jiff::Timestamp::MAX).ok().flatten();
    let newest = match to_revision {
        Some(revision) => {
            groundskeeper_api::restore::full_at_or_before(snapshots, &valid.from.display(), revision)
        }
        None => newest_proven(snapshots, &valid.from.display()),
    };
    if let (Some(newest), Some(restore)) = (newest, task.spec.config.restore.as_mut()) {
        restore.object = Some(newest.object.clone());
    }
}

/// How a restore gets its confirmation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Confirmation {
    /// `--yes` on the command line.
    Given,
    /// Typed at a prompt: standard input is a terminal.
    Ask,
    /// Neither is possible: nothing is created.
    Missing,
}

pub fn confirmation(yes: bool, stdin_is_terminal: bool) -> Confirmation {
    match (yes, stdin_is_terminal) {
        (true, _) => Confirmation::Given,
        (false, true) => Confirmation::Ask,
        (false, false) => Confirmation::Missing,
    }
}

/// Shows a restore's proposal and asks for the confirmation; `Ok(false)` when not confirmed.
/// With `-o`, what is said to the person goes to standard error (standard output carries the
/// object).
async fn confirm_restore(
    access: &Access,
    task: &mut MaintenanceTask,
    yes: bool,
    to_stderr: bool,
) -> Result<bool, Error> {
    let namespace = access.namespace.clone();
    let cluster = get_etcd_cluster(access, &namespace, &task.spec.target.name).await?;
    let text = restore_proposal(task, &cluster, Timestamp::now())?;
    pin_snapshot(task, &cluster);
    let mut out: Box<dyn Write> =
        if to_stderr { Box::new(std::io::stderr()) } else { Box::new(std::io::stdout()) };
    let _ = writeln!(out, "{text}");
    let store = validate(task).ok().and_then(|v| match v.work {
        Work::Restore(restore) => Some(restore.from.display()),
        _ => None,
    });
    let target = format!("{namespace}/{}", task.spec.target.name);
    match confirmation(yes, std::io::stdin().is_terminal()) {
        Confirmation::Given => Ok(true),
        Confirmation::Missing => {
            eprintln!(
                "not confirmed, nothing was created: standard input is not a terminal to type \"yes\" at; \
                 give --yes to confirm the restore of EtcdCluster {target}"
            );
            Ok(false)
        }
        Confirmation::Ask => {
            let _ = write!(out, "{}", render::restore::prompt(&target, store.as_deref().unwrap_or("?")));
            let _ = out.flush();
            let answer = tokio::task::spawn_blocking(|| {
                let mut line = String::new();
                std::io::stdin().read_line(&mut line).map(|_| line)
            })
            .await
            .map_err(|e| Error::Invalid(format!("cannot read the answer: {e}")))?
            .map_err(|e| Error::Invalid(format!("cannot read the answer from standard input: {e}")))?;
            if render::restore::confirms(&answer) {
                return Ok(true);
            }
            eprintln!("not confirmed (the answer was not \"yes\"): nothing was created");
            Ok(false)
        }
    }
}

async fn create(access: &Access, args: CreateArgs, output: Option<Output>) -> Result<i32, Error> {
    let namespace = access.namespace.clone();
    let document = args.config_file.as_deref().map(read_config_file).transpose()?;
    let mut task = new_task(&args, &namespace, document.as_deref())?;
    if task.spec.task_type == TaskType::Restore {
        if !confirm_restore(access, &mut task, args.stores.yes, output.is_some()).await? {
            return Ok(EXIT_NOT_CONFIRMED);
        }
    } else {
        check_target(access, &namespace, &task.spec.target.kind, &task.spec.target.name).await?;
    }
    let created = access.create(&namespace, &task).await?;
    let name = created.name_any();
    if !args.wait {
        match output {
            Some(format) => print_object(format, &created)?,
            None => println!(
                "maintenancetask.groundskeeper.dev/{name} created ({} on {}/{})\nfollow it: kubectl groundskeeper task wait -n {namespace} {name}",
                created.spec.task_type, created.spec.target.kind, created.spec.target.name
            ),
        }
        return Ok(0);
    }
    if output.is_none() {
        println!(
            "maintenancetask.groundskeeper.dev/{name} created; waiting for it to end (Ctrl-C stops waiting, not the task)"
        );
    }
    let (code, last) = wait::follow(access, &namespace, &name, output.is_some()).await?;
    if let (Some(format), Some(task)) = (output, last) {
        print_object(format, &task)?;
    }
    Ok(code)
}

async fn list(access: &Access, args: ListArgs, output: Option<Output>) -> Result<i32, Error> {
    let namespace = (!access.all_namespaces).then_some(access.namespace.as_str());
    let mut tasks: Vec<MaintenanceTask> = access.list(namespace, None).await?;
    if let Some(target) = &args.target {
        let (kind, name) = match target.split_once('/') {
            Some((kind, name)) => (
                Some(parse_target_kind(kind).ok_or_else(|| {
                    Error::Invalid(format!(
                        "--target {target}: unknown kind {kind:?}: EtcdCluster or ScyllaCluster"
                    ))
                })?),
                name,
            ),
            None => (None, target.as_str()),
        };
        tasks
            .retain(|t| t.spec.target.name == name && kind.as_ref().is_none_or(|k| *k == t.spec.target.kind));
    }
    match output {
        Some(format) => print_object(format, &list_of(&tasks))?,
        None => print!("{}", render::task::list(&tasks, Timestamp::now(), access.all_namespaces)),
    }
    Ok(0)
}

async fn get_task(access: &Access, namespace: &str, name: &str) -> Result<MaintenanceTask, Error> {
    access
        .get::<MaintenanceTask>(namespace, name)
        .await
        .map_err(|e| {
            e.with_hint(format!(
                "list them with `kubectl groundskeeper task list -n {namespace}` (a finished task is deleted after its ttlSecondsAfterFinished)"
            ))
        })
}

async fn describe(access: &Access, name: &str, output: Option<Output>) -> Result<i32, Error> {
    let task = get_task(access, &access.namespace, name).await?;
    match output {
        Some(format) => print_object(format, &task)?,
        None => print!("{}", render::task::describe(&task, Timestamp::now())),
    }
    Ok(0)
}

async fn wait_for_task(access: &Access, name: &str, output: Option<Output>) -> Result<i32, Error> {
    let namespace = access.namespace.clone();
    get_task(access, &namespace, name).await?;
    let (code, last) = wait::follow(access, &namespace, name, output.is_some()).await?;
    if let (Some(format), Some(task)) = (output, last) {
        print_object(format, &task)?;
    }
    Ok(code)
}

/// `task plan`: the plan `task create` with the same arguments would run, made from the target
/// as it is now; nothing is created.
async fn plan(access: &Access, args: CreateArgs, output: Option<Output>) -> Result<i32, Error> {
    let namespace = access.namespace.clone();
    let document = args.config_file.as_deref().map(read_config_file).transpose()?;
    let task = new_task(&args, &namespace, document.as_deref())?;
    let work = validate(&task).map_err(|errors| Error::Invalid(describe_errors(&errors)))?.work;
    let name = task.spec.target.name.clone();
    let plan = match &task.spec.target.kind {
        TargetKind::ScyllaCluster => {
            let cluster: ScyllaCluster = access
                .get(&namespace, &name)
                .await
                .map_err(|e| e.with_hint(not_found_hint("ScyllaCluster", "scyllaclusters", &namespace)))?;
            let services: Vec<Service> = access.list(Some(&namespace), Some(&member_selector(&name))).await?;
            match &work {
                Work::Cleanup(cleanup) => {
                    cleanup_plan(cleanup, &cluster_facts(&cluster), &current_members(&services))
                }
                _ => Err("only a Cleanup task runs on a ScyllaCluster".to_owned()),
            }
        }
        TargetKind::EtcdCluster => {
            let cluster = get_etcd_cluster(access, &namespace, &name).await?;
            if matches!(work, Work::Restore(_)) && output.is_none() {
                print!("{}", restore_proposal(&task, &cluster, Timestamp::now())?);
                println!("(a dry run: nothing was created; `task create` with the same arguments asks for the confirmation and runs it)");
                return Ok(0);
            }
            etcd_plan(&work, &cluster, &format!("{namespace}/{name}"))
        }
        TargetKind::Unknown(kind) => Err(format!("no plan for a target of kind {kind}")),
    }
    .map_err(Error::Invalid)?;
    match output {
        Some(format) => print_object(format, &plan)?,
        None => {
            print!("{}", render::plan::plan(&plan));
            println!("(a dry run: nothing was created; `task create` with the same arguments runs it)");
        }
    }
    Ok(0)
}

/// `task approve`: sets the task's approved plan to the plan in its status (or refuses when the
/// plan given is not that plan any more).
async fn approve(access: &Access, name: &str, reviewed: Option<&str>) -> Result<i32, Error> {
    let namespace = access.namespace.clone();
    let task = get_task(access, &namespace, name).await?;
    let id = approvable_plan(&task, reviewed)?;
    let patch = serde_json::json!({"metadata": {"annotations": {keys::APPROVED_PLAN: id}}});
    access.merge_patch::<MaintenanceTask>(&namespace, name, &patch).await?;
    println!(
        "maintenancetask.groundskeeper.dev/{name}: plan {id} approved; it starts once its target, \
         windows and queue allow (kubectl groundskeeper task wait -n {namespace} {name})"
    );
    Ok(0)
}

/// The plan id `task approve` may set on `task`, or why not.
pub fn approvable_plan(task: &MaintenanceTask, reviewed: Option<&str>) -> Result<String, Error> {
    let name = task.name_any();
    if !task.spec.require_approval {
        return Err(Error::Invalid(format!(
            "task {name} does not ask for approval (spec.requireApproval is false): it needs none"
        )));
    }
    let state = render::task::state_of(task);
    if state != TaskState::Pending {
        return Err(Error::Invalid(format!("task {name} is {state}: only a Pending task can be approved")));
    }
    let plan = task.status.as_ref().and_then(|s| s.plan.as_ref());
    let id = match plan {
        Some(plan) if !plan.id.is_empty() => plan.id.clone(),
        Some(plan) => {
            return Err(Error::Invalid(format!("task {name} has no plan to approve: {}", plan.summary)));
        }
        None => {
            return Err(Error::Invalid(format!(
                "task {name} has no plan yet: the controller writes it once it has seen the task; try again in a moment"
            )));
        }
    };
    match reviewed {
        Some(reviewed) if reviewed.trim() != id => Err(Error::Invalid(format!(
            "task {name}'s plan is now {id}, not {reviewed}: it changed since you reviewed it; \
             review it again (`kubectl groundskeeper task describe {name}`) and approve {id}"
        ))),
        _ => Ok(id),
    }
}

/// Cancelling is deleting: the controller has no "cancelled" state. A Pending task leaves the
/// queue; a running task's Jobs are deleted with it (its owner references), so their pods get
/// SIGTERM and the runner stops what it can stop.
async fn cancel(access: &Access, name: &str) -> Result<i32, Error> {
    let namespace = access.namespace.clone();
    let task = get_task(access, &namespace, name).await?;
    let state = render::task::state_of(&task);
    if state.is_final() {
        return Err(Error::Invalid(format!(
            "task {name} is already {state}: nothing to cancel (it is deleted {}s after it finished; \
             `kubectl delete maintenancetask -n {namespace} {name}` removes it now)",
            task.spec.ttl_seconds_after_finished
        )));
    }
    let selector = format!("{}={}", keys::TASK_LABEL, bounded_name(name, ""));
    let jobs: Vec<Job> = access.list(Some(&namespace), Some(&selector)).await?;
    access.delete::<MaintenanceTask>(&namespace, name).await?;
    print!("{}", cancelled(&task, state, &jobs));
    Ok(0)
}

/// What `task cancel` did, for people.
pub fn cancelled(task: &MaintenanceTask, state: TaskState, jobs: &[Job]) -> String {
    let name = task.name_any();
    let target = format!("{}/{}", task.spec.target.kind, task.spec.target.name);
    if state == TaskState::Pending || jobs.is_empty() {
        return format!(
            "task {name} cancelled: it was {state} and no Job of it had started; it left the queue of {target}\n"
        );
    }
    let names: Vec<String> = jobs.iter().map(|j| j.name_any()).collect();
    let done: Vec<String> = task
        .status
        .as_ref()
        .map(|s| {
            s.nodes
                .iter()
                .filter(|n| n.state.is_finished())
                .map(|n| format!("{} ({:?})", n.name, n.state))
                .collect()
        })
        .unwrap_or_default();
    let mut out = format!(
        "task {name} cancelled: it was InProgress; deleted with its Job(s) {} (their pods get SIGTERM; the runner stops what it can stop)\n",
        names.join(", ")
    );
    if matches!(task.spec.task_type, TaskType::Defragment | TaskType::Maintenance) {
        out.push_str(
            "  a member already being defragmented finishes: etcd cannot stop a defragmentation once begun\n",
        );
    }
    if !done.is_empty() {
        out.push_str(&format!("  already done, and kept: {}\n", done.join(", ")));
    }
    out
}

#[derive(Serialize)]
struct EtcdStatusView<'a> {
    cluster: &'a EtcdCluster,
    tasks: Vec<MaintenanceTask>,
}

/// `snapshot list`: the cluster's catalog, from its status.
async fn snapshot_list(access: &Access, target: &str, output: Option<Output>) -> Result<i32, Error> {
    let name = parse_etcd_cluster(target).map_err(Error::Invalid)?;
    let cluster = get_etcd_cluster(access, &access.namespace, &name).await?;
    match output {
        Some(format) => print_object(format, &render::snapshot::view(&cluster))?,
        None => print!("{}", render::snapshot::list(&cluster, Timestamp::now())),
    }
    Ok(0)
}

async fn etcd_status(access: &Access, name: &str, output: Option<Output>) -> Result<i32, Error> {
    let namespace = access.namespace.clone();
    let cluster = get_etcd_cluster(access, &namespace, name).await?;
    let tasks: Vec<MaintenanceTask> = access.list(Some(&namespace), None).await?;
    match output {
        Some(format) => print_object(
            format,
            &EtcdStatusView { cluster: &cluster, tasks: render::etcd::tasks_of(&cluster, &tasks) },
        )?,
        None => {
            print!("{}", render::etcd::status(&cluster, &tasks, Timestamp::now()));
            let spec = cluster.spec.maintenance_windows.as_ref();
            let object = format!("EtcdCluster {namespace}/{name}");
            let target = TaskTarget { kind: TargetKind::EtcdCluster, name: name.to_owned() };
            print!(
                "{}",
                render::schedule::target_timing(
                    spec.map(|s| format!("{} ({})", s.windows.join("; "), s.time_zone)),
                    windows_of(spec, &object, "spec.maintenanceWindows"),
                    &suspensions_in(access, &namespace).await?,
                    &schedules_in(access, &namespace).await?,
                    &target,
                    Timestamp::now(),
                )
            );
        }
    }
    Ok(0)
}

/// The schedules of `namespace` for a status screen: none where their CRD is not installed yet,
/// or where the plugin's role predates them (the rest of the screen is still worth showing).
async fn schedules_in(access: &Access, namespace: &str) -> Result<Vec<MaintenanceSchedule>, Error> {
    match access.list::<MaintenanceSchedule>(Some(namespace), None).await {
        Ok(schedules) => Ok(schedules),
        Err(Error::CrdMissing { .. } | Error::Forbidden { .. }) => Ok(Vec::new()),
        Err(err) => Err(err),
    }
}

/// The suspensions of `namespace` for a status screen, as [`schedules_in`] reads schedules.
async fn suspensions_in(access: &Access, namespace: &str) -> Result<Vec<MaintenanceSuspension>, Error> {
    match access.list::<MaintenanceSuspension>(Some(namespace), None).await {
        Ok(suspensions) => Ok(suspensions),
        Err(Error::CrdMissing { .. } | Error::Forbidden { .. }) => Ok(Vec::new()),
        Err(err) => Err(err),
    }
}

/// The conditions of the ScyllaDBDatacenter of the same name: none where there is no such
/// object, its kind is not served (scylla-operator before 1.15), or the plugin's role predates
/// reading it (the rest of the screen is still worth showing).
async fn datacenter_conditions_in(
    access: &Access,
    namespace: &str,
    name: &str,
) -> Result<Vec<ConditionFacts>, Error> {
    match access.get::<ScyllaDBDatacenter>(namespace, name).await {
        Ok(datacenter) => Ok(datacenter_conditions(&datacenter)),
        Err(Error::NotFound { .. } | Error::CrdMissing { .. } | Error::Forbidden { .. }) => Ok(Vec::new()),
        Err(err) => Err(err),
    }
}

async fn cleanup_status(access: &Access, name: &str, output: Option<Output>) -> Result<i32, Error> {
    let namespace = access.namespace.clone();
    let cluster: ScyllaCluster = access
        .get(&namespace, name)
        .await
        .map_err(|e| e.with_hint(not_found_hint("ScyllaCluster", "scyllaclusters", &namespace)))?;
    let services: Vec<Service> = access.list(Some(&namespace), Some(&member_selector(name))).await?;
    let jobs: Vec<Job> = access.list(Some(&namespace), None).await?;
    let datacenter = datacenter_conditions_in(access, &namespace, name).await?;
    let view = render::scylla::cleanup_status(&cluster, &datacenter, &services, &jobs);
    match output {
        Some(format) => print_object(format, &view)?,
        None => {
            print!("{}", render::scylla::render(&view, Timestamp::now()));
            let object = format!("ScyllaCluster {namespace}/{name}");
            let annotations = cluster.annotations();
            let text = annotations.get(keys::MAINTENANCE_WINDOWS).map(|w| {
                let zone = annotations.get(keys::MAINTENANCE_TIME_ZONE).map_or("UTC", String::as_str);
                format!("{w} ({zone})")
            });
            let target = TaskTarget { kind: TargetKind::ScyllaCluster, name: name.to_owned() };
            print!(
                "{}",
                render::schedule::target_timing(
                    text,
                    windows_from_annotations(annotations, &object),
                    &suspensions_in(access, &namespace).await?,
                    &schedules_in(access, &namespace).await?,
                    &target,
                    Timestamp::now(),
                )
            );
        }
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use serde_json::json;

    fn create_args(line: &[&str]) -> CreateArgs {
        let mut argv = vec!["kubectl-groundskeeper", "task", "create"];
        argv.extend(line);
        match Cli::try_parse_from(argv).unwrap().command {
            Command::Task(TaskCommand::Create(args)) => *args,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_new_task_is_manual_named_after_its_target_and_checked() {
        let task = new_task(
            &create_args(&["defragment", "--target", "main", "--config", "maxFragmentedPercent=20"]),
            "etcd",
            None,
        )
        .unwrap();
        assert_eq!(task.metadata.generate_name.as_deref(), Some("main-defragment-"));
        assert_eq!(task.labels().get(keys::ORIGIN_LABEL).map(String::as_str), Some("manual"));
        assert_eq!(task.spec.config.defragment.unwrap().max_fragmented_percent, 20.0);
        let named = new_task(
            &create_args(&["snapshot", "--target", "etcdcluster/main", "--name", "before-upgrade"]),
            "etcd",
            None,
        )
        .unwrap();
        assert_eq!(named.metadata.name.as_deref(), Some("before-upgrade"));
        // The controller's own checks run before anything is sent.
        let err = new_task(
            &create_args(&[
                "compact",
                "--target",
                "main",
                "--config",
                "retainRevisions=5",
                "--config",
                "revision=9",
            ]),
            "etcd",
            None,
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("spec.config.compact"), "{err}");
        let err = new_task(
            &create_args(&["snapshot", "--target", "main", "--config", "fileName=a/b"]),
            "etcd",
            None,
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("spec.config.snapshot.fileName"), "{err}");
    }

    fn task(state: &str, nodes: serde_json::Value) -> MaintenanceTask {
        serde_json::from_value(json!({
            "metadata": {"name": "t", "namespace": "etcd"},
            "spec": {"target": {"kind": "EtcdCluster", "name": "main"}, "type": "Defragment"},
            "status": {"state": state, "nodes": nodes},
        }))
        .unwrap()
    }

    #[test]
    fn cancelling_says_what_happened() {
        let pending = cancelled(&task("Pending", json!([])), TaskState::Pending, &[]);
        assert_eq!(
            pending,
            "task t cancelled: it was Pending and no Job of it had started; it left the queue of EtcdCluster/main\n"
        );
        let job: Job = serde_json::from_value(json!({"metadata": {"name": "t-0"}})).unwrap();
        let running = cancelled(
            &task(
                "InProgress",
                json!([{"name": "m0", "state": "Succeeded"}, {"name": "m1", "state": "Running"}]),
            ),
            TaskState::InProgress,
            &[job],
        );
        assert_eq!(
            running,
            "task t cancelled: it was InProgress; deleted with its Job(s) t-0 (their pods get SIGTERM; the runner stops what it can stop)\n  a member already being defragmented finishes: etcd cannot stop a defragmentation once begun\n  already done, and kept: m0 (Succeeded)\n"
        );
    }

    fn suspend_args(line: &[&str]) -> crate::cli::SuspendArgs {
        let mut argv = vec!["kubectl-groundskeeper", "suspend"];
        argv.extend(line);
        match Cli::try_parse_from(argv).unwrap().command {
            Command::Suspend(args) => args,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_suspension_is_for_a_while_with_a_reason_and_never_in_the_past() {
        let now: Timestamp = "2026-11-24T10:00:00Z".parse().unwrap();
        let args = suspend_args(&[
            "etcdcluster/main",
            "--for",
            "2h",
            "--reason",
            "incident",
            "--allow",
            "snapshot",
            "--stop-running",
            "--by",
            "alice",
        ]);
        let suspension = new_suspension(&args, "etcd", now).unwrap();
        assert_eq!(
            suspension.spec.until.as_ref().map(|t| t.0),
            Some("2026-11-24T12:00:00Z".parse().unwrap())
        );
        assert_eq!(suspension.spec.running_tasks, RunningTasks::Stop);
        assert_eq!(suspension.spec.allow_task_types, vec![TaskType::Snapshot]);
        assert_eq!(suspension.annotations().get(SUSPENDED_BY_ANNOTATION).map(String::as_str), Some("alice"));
        assert_eq!(suspension.metadata.generate_name.as_deref(), Some("main-suspension-"));
        for (line, want) in [
            (vec!["main", "--reason", "x"], "give KIND/NAME"),
            (vec!["etcdcluster/main", "--reason", " "], "--reason is empty"),
            (
                vec!["etcdcluster/main", "--reason", "x", "--until", "2026-11-24T09:00:00Z"],
                "a suspension in the past",
            ),
            (vec!["etcdcluster/main", "--reason", "x", "--for", "soon"], "not a duration"),
            (vec!["etcdcluster/main", "--reason", "x", "--for", "0s"], "must be more than zero"),
        ] {
            let err = new_suspension(&suspend_args(&line), "etcd", now).unwrap_err().to_string();
            assert!(err.contains(want), "{line:?}: {err}");
        }
    }

    fn restorable_cluster(quorum_lost: bool) -> EtcdCluster {
        let member = |name: &str, healthy: bool| json!({"name": name, "id": "1", "endpoint": format!("http://{name}.etcd:2379"), "healthy": healthy});
        let known =
            |name: &str| json!({"name": name, "id": "1", "peerURLs": [format!("http://{name}.etcd:2380")]});
        let mut status = json!({
            "lastObservedTime": "2026-11-23T20:59:00Z", "memberCount": 3, "healthyMembers": 1,
            "lastRevisionWithQuorum": 1350,
            "members": [member("etcd-0", true), member("etcd-1", false), member("etcd-2", false)],
            "membership": [known("etcd-0"), known("etcd-1"), known("etcd-2")],
            "snapshots": [{"store": "s3://b/etcd", "object": "main-1.db", "revision": 1100, "keys": 320,
                           "proof": {"store": "s3://b/etcd", "object": "main-1.db", "proven": true, "revision": 1100}}]
        });
        if quorum_lost {
            status["quorumLostSince"] = json!("2026-11-23T20:40:00Z");
        }
        serde_json::from_value(json!({
            "apiVersion": "groundskeeper.dev/v1alpha1", "kind": "EtcdCluster",
            "metadata": {"name": "main", "namespace": "etcd"},
            "spec": {"endpoints": ["http://etcd-0.etcd:2379"], "statefulSet": {"name": "etcd", "dataVolumeClaimTemplate": "data"}},
            "status": status,
        }))
        .unwrap()
    }

    #[test]
    fn a_restore_task_is_confirmed_in_its_spec_and_carries_the_flags() {
        let task = new_task(
            &create_args(&[
                "restore",
                "--target",
                "main",
                "--from",
                "s3://b/etcd",
                "--object",
                "main-1.db",
                "--override-quorum-check",
                "--endpoint",
                "http://minio:9000",
            ]),
            "etcd",
            None,
        )
        .unwrap();
        assert_eq!(task.metadata.generate_name.as_deref(), Some("main-restore-"));
        let restore = task.spec.config.restore.unwrap();
        assert!(restore.confirm, "the plugin's own confirmation stands for the spec's");
        assert!(restore.override_quorum_check);
        assert_eq!(restore.object.as_deref(), Some("main-1.db"));
        let bucket = restore.from.bucket.unwrap();
        assert_eq!(
            (bucket.url.as_str(), bucket.endpoint.as_deref()),
            ("s3://b/etcd", Some("http://minio:9000"))
        );
        let err =
            new_task(&create_args(&["restore", "--target", "main"]), "etcd", None).unwrap_err().to_string();
        assert!(err.contains("a Restore task needs --from STORE"), "{err}");
        // The controller's own checks of a store run before anything is sent.
        let err = new_task(
            &create_args(&["copy", "--target", "main", "--from", "pvc/a", "--to", "pvc/a"]),
            "etcd",
            None,
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("spec.config.copy.to"), "{err}");
        let copy = new_task(
            &create_args(&[
                "copy",
                "--target",
                "main",
                "--from",
                "pvc/a",
                "--to",
                "s3://b",
                "--credentials-secret",
                "keys",
            ]),
            "etcd",
            None,
        )
        .unwrap();
        assert_eq!(
            copy.spec.config.copy.unwrap().to.bucket.unwrap().credentials_secret.as_deref(),
            Some("keys")
        );
    }

    #[test]
    fn a_restore_is_confirmed_by_flag_or_at_a_terminal_only() {
        let cases = [
            (true, true, Confirmation::Given),
            (true, false, Confirmation::Given),
            (false, true, Confirmation::Ask),
            (false, false, Confirmation::Missing),
        ];
        for (yes, terminal, wanted) in cases {
            assert_eq!(confirmation(yes, terminal), wanted, "--yes {yes}, terminal {terminal}");
        }
        let args = create_args(&["restore", "--target", "main", "--from", "pvc/x", "--confirm"]);
        assert!(args.stores.yes, "--confirm is --yes");
    }

    #[test]
    fn the_restore_proposal_is_the_plan_of_the_cluster_now() {
        let now: Timestamp = "2026-11-23T21:00:00Z".parse().unwrap();
        let task =
            new_task(&create_args(&["restore", "--target", "main", "--from", "s3://b/etcd"]), "etcd", None)
                .unwrap();
        let text = restore_proposal(&task, &restorable_cluster(true), now).unwrap();
        for wanted in [
            "Restore of EtcdCluster etcd/main\n",
            "  Snapshot:       main-1.db in s3://b/etcd\n",
            "  Quorum:         LOST since 2026-11-23T20:40:00Z (20m ago) (1 of 3 members healthy)\n",
            "  Revisions lost: 250 (the snapshot is at revision 1100; the last revision seen with quorum was 1350)\n",
            "Plan:\n  restore EtcdCluster etcd/main (3 members of StatefulSet etcd) from main-1.db in s3://b/etcd (revision 1100); the 250 revision(s) written after it are lost\n",
            "ScaleDown",
            "RestoreMember",
            "data-etcd-2",
            "WaitForMembers",
        ] {
            assert!(text.contains(wanted), "missing {wanted:?} in\n{text}");
        }
        // No plan, no task: what the controller would reject on is said first.
        let mut no_sts = restorable_cluster(true);
        no_sts.spec.stateful_set = None;
        let err = restore_proposal(&task, &no_sts, now).unwrap_err().to_string();
        assert!(err.contains("no restore plan can be made, so nothing was created"), "{err}");
        assert!(err.contains("spec.statefulSet"), "{err}");
        let elsewhere =
            new_task(&create_args(&["restore", "--target", "main", "--from", "pvc/other"]), "etcd", None)
                .unwrap();
        let err = restore_proposal(&elsewhere, &restorable_cluster(true), now).unwrap_err().to_string();
        assert!(err.contains("no snapshot in pvc/other proven to restore"), "{err}");
    }

    /// To a point in time: the proposal shows the full snapshot, the deltas the replay applies and
    /// the recovery point, counts the revisions lost from it, and pins the full snapshot; a
    /// revision before the oldest full snapshot is refused, naming the field.
    #[test]
    fn a_restore_to_a_point_in_time_shows_its_chain_and_pins_its_full_snapshot() {
        let now: Timestamp = "2026-11-23T21:00:00Z".parse().unwrap();
        let mut cluster = restorable_cluster(true);
        let delta = |start: i64, end: i64| {
            serde_json::from_value(
                json!({"store": "s3://b/etcd", "object": format!("main-{start}-{end}.delta"),
                                          "startRevision": start, "revision": end, "changes": 50}),
            )
            .unwrap()
        };
        let catalog = &mut cluster.status.as_mut().unwrap().snapshots;
        catalog.push(delta(1100, 1200));
        catalog.push(delta(1200, 1300));
        let args = |to: &str| {
            new_task(
                &create_args(&["restore", "--target", "main", "--from", "s3://b/etcd", "--to-revision", to]),
                "etcd",
                None,
            )
            .unwrap()
        };
        let mut task = args("1250");
        assert_eq!(task.spec.config.restore.as_ref().unwrap().to_revision, Some(1250));
        let text = restore_proposal(&task, &cluster, now).unwrap();
        for wanted in [
            "  Point in time:  revision 1250: the full snapshot (revision 1100) and 2 delta(s) 1100→1200, 1200→1300; recovery point revision 1250\n",
            "  Revisions lost: 100 (the snapshot is at revision 1250; the last revision seen with quorum was 1350)\n",
            "Replay",
            "replay 2 delta(s) on it up to revision 1250 (100 change(s): main-1100-1200.delta, main-1200-1300.delta)",
        ] {
            assert!(text.contains(wanted), "missing {wanted:?} in\n{text}");
        }
        pin_snapshot(&mut task, &cluster);
        assert_eq!(task.spec.config.restore.as_ref().unwrap().object.as_deref(), Some("main-1.db"));
        let beyond = restore_proposal(&args("1400"), &cluster, now).unwrap();
        assert!(beyond.contains("reach revision 1300 only"), "{beyond}");
        let err = restore_proposal(&args("1000"), &cluster, now).unwrap_err().to_string();
        assert!(
            err.contains("spec.config.restore.toRevision 1000 is before the oldest full snapshot"),
            "{err}"
        );
    }

    /// `--to-time`: the proposal names the time and the revision of the newest backup written by
    /// then, and pins that backup's full snapshot; a time to come is refused before anything is
    /// created, and `--to-revision` beside it is refused by the flags.
    #[test]
    fn a_restore_to_a_time_shows_the_revision_it_resolves_to() {
        let now: Timestamp = "2026-11-23T21:00:00Z".parse().unwrap();
        let mut cluster = restorable_cluster(true);
        let catalog = &mut cluster.status.as_mut().unwrap().snapshots;
        catalog[0].written_at = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            "2026-11-23T20:00:00Z".parse().unwrap(),
        ));
        catalog.push(
            serde_json::from_value(json!({"store": "s3://b/etcd", "object": "main-1100-1200.delta",
                "startRevision": 1100, "revision": 1200, "writtenAt": "2026-11-23T20:10:00Z"}))
            .unwrap(),
        );
        catalog.push(
            serde_json::from_value(json!({"store": "s3://b/etcd", "object": "main-1200-1300.delta",
                "startRevision": 1200, "revision": 1300, "writtenAt": "2026-11-23T20:20:00Z"}))
            .unwrap(),
        );
        let args = |time: &str| {
            new_task(
                &create_args(&["restore", "--target", "main", "--from", "s3://b/etcd", "--to-time", time]),
                "etcd",
                None,
            )
            .unwrap()
        };
        let mut task = args("2026-11-23T20:15:00Z");
        assert_eq!(
            task.spec.config.restore.as_ref().unwrap().to_time.as_deref(),
            Some("2026-11-23T20:15:00Z")
        );
        let text = restore_proposal(&task, &cluster, now).unwrap();
        let wanted =
            "  Point in time:  as of 2026-11-23T20:15:00Z, the newest backup written by then: revision 1200";
        assert!(text.contains(wanted), "missing {wanted:?} in\n{text}");
        pin_snapshot(&mut task, &cluster);
        assert_eq!(task.spec.config.restore.as_ref().unwrap().object.as_deref(), Some("main-1.db"));
        let future = restore_proposal(&args("2026-11-24T00:00:00Z"), &cluster, now).unwrap_err().to_string();
        assert!(future.contains("is in the future"), "{future}");
        let both = [
            "kubectl-groundskeeper",
            "task",
            "create",
            "restore",
            "--target",
            "main",
            "--from",
            "s3://b/etcd",
        ]
        .into_iter()
        .chain(["--to-time", "2026-11-23T20:15:00Z", "--to-revision", "1200"]);
        assert!(Cli::try_parse_from(both).is_err(), "one point in time");
    }

    /// The snapshot shown is the one the task names once confirmed; one named by hand stays.
    #[test]
    fn the_confirmed_snapshot_is_pinned_in_the_task() {
        let mut task =
            new_task(&create_args(&["restore", "--target", "main", "--from", "s3://b/etcd"]), "etcd", None)
                .unwrap();
        pin_snapshot(&mut task, &restorable_cluster(true));
        assert_eq!(task.spec.config.restore.as_ref().unwrap().object.as_deref(), Some("main-1.db"));
        let mut named = new_task(
            &create_args(&["restore", "--target", "main", "--from", "s3://b/etcd", "--object", "x.db"]),
            "etcd",
            None,
        )
        .unwrap();
        pin_snapshot(&mut named, &restorable_cluster(true));
        assert_eq!(named.spec.config.restore.unwrap().object.as_deref(), Some("x.db"));
    }
}
