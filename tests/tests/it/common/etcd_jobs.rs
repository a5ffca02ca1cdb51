//! Runs the etcd Jobs of the simulated kubelet through the runner itself (shared by the
//! scenarios with real etcd clusters).

use std::path::{Path, PathBuf};

use groundskeeper_e2e::etcd_cluster::{EtcdVersion, find_etcd, find_restore_tool};
use groundskeeper_e2e::kubelet::{Container, MountedFiles, Termination};
use groundskeeper_job::cli::{Cli, Command};
use groundskeeper_job::etcd::etcd_tools::{FromArgs, ToArgs};
use groundskeeper_stores::etcd::connect::EndpointArgs;
use tokio::sync::{oneshot, watch};

/// Runs a maintenance Job's container once `gate` is open: `groundskeeper-job`'s subcommand
/// entry point (what its `main` calls) with the Job's own arguments, every path they name inside
/// the pod replaced by what stands for it here (see [`PodPaths`]), the result file standing for
/// the termination message. On a thread of its own, as it builds its own runtime like the binary.
/// A Job deleted while its container waits at the gate is killed ([`Container::wait_for_gate`]).
pub async fn run_etcd_job(container: Container, mut gate: watch::Receiver<bool>) -> Termination {
    if !container.wait_for_gate(&mut gate).await {
        return Termination::killed();
    }
    let job = container.job["metadata"]["name"].as_str().unwrap_or_default().to_owned();
    let args = container.args;
    let command = Cli::try_parse_args(args.clone())
        .unwrap_or_else(|e| panic!("Job {job}: its args {args:?} do not parse as groundskeeper-job's: {e}"))
        .command;
    let paths = PodPaths::new(&container.files);
    let termination_log = tempfile::NamedTempFile::new().expect("a temp file");
    let result_file = termination_log.path().to_owned();
    let (exited, exit_code) = oneshot::channel();
    let run: Box<dyn FnOnce() -> i32 + Send> = match command {
        Command::Defrag(mut args) => {
            paths.connection(&mut args.connection);
            args.result_file = result_file;
            Box::new(move || groundskeeper_job::etcd::defrag::main(args))
        }
        Command::Compact(mut args) => {
            paths.connection(&mut args.connection);
            args.result_file = result_file;
            Box::new(move || groundskeeper_job::etcd::compact::main(args))
        }
        Command::Snapshot(mut args) => {
            paths.connection(&mut args.connection);
            args.output = args.output.map(|o| paths.local(&o));
            args.to_credentials = args.to_credentials.map(|c| paths.local(&c));
            paths.key(&mut args.encoding.encryption_key);
            args.result_file = result_file;
            Box::new(move || groundskeeper_job::etcd::snapshot::main(args))
        }
        Command::SnapshotDelta(mut args) => {
            paths.connection(&mut args.connection);
            paths.to(&mut args.to);
            paths.key(&mut args.encoding.encryption_key);
            args.result_file = result_file;
            Box::new(move || groundskeeper_job::etcd::delta::main(args))
        }
        Command::SnapshotCopy(mut args) => {
            paths.from(&mut args.from);
            paths.to(&mut args.to);
            args.result_file = result_file;
            Box::new(move || groundskeeper_job::etcd::copy::main(args))
        }
        Command::SnapshotProve(mut args) => {
            paths.from(&mut args.from);
            paths.key(&mut args.key.encryption_key);
            args.scratch_dir = paths.local(&args.scratch_dir);
            args.tools.etcd = args.tools.etcd.or_else(|| find_etcd(EtcdVersion::V3_5).ok());
            args.tools.etcdutl = args.tools.etcdutl.or_else(restore_tool);
            args.result_file = result_file;
            Box::new(move || groundskeeper_job::etcd::prove::main(args))
        }
        Command::SnapshotReplay(mut args) => {
            paths.from(&mut args.from);
            paths.key(&mut args.encoding.encryption_key);
            args.scratch_dir = paths.local(&args.scratch_dir);
            args.tools.etcd = args.tools.etcd.or_else(|| find_etcd(EtcdVersion::V3_5).ok());
            args.tools.etcdutl = args.tools.etcdutl.or_else(restore_tool);
            args.result_file = result_file;
            Box::new(move || groundskeeper_job::etcd::delta::replay::main(args))
        }
        Command::RestoreMember(mut args) => {
            paths.from(&mut args.from);
            paths.key(&mut args.key.encryption_key);
            args.data_dir = paths.local(&args.data_dir);
            args.scratch_dir = paths.local(&args.scratch_dir);
            args.etcdutl = args.etcdutl.or_else(restore_tool);
            args.result_file = result_file;
            Box::new(move || groundskeeper_job::etcd::restore_member::main(args))
        }
        _ => panic!("Job {job}: {args:?} is not a subcommand these scenarios run"),
    };
    std::thread::spawn(move || {
        let _ = exited.send(run());
    });
    let exit_code = exit_code.await.expect("the runner ends with an exit code");
    drop(paths);
    Termination {
        exit_code,
        message: std::fs::read_to_string(termination_log.path()).expect("the result file"),
    }
}

/// etcdutl 3.5, what the Job image carries.
fn restore_tool() -> Option<PathBuf> {
    let etcd = find_etcd(EtcdVersion::V3_5).ok()?;
    find_restore_tool(EtcdVersion::V3_5, &etcd).ok()
}

/// The pod's file system as the scenario stands it up: mounted files and claims where the Job
/// simulator put them, a Secret mounted as a folder as a folder of its files, and anything else
/// (an `emptyDir`, such as the scratch folder) in a folder of the pod's own, removed with it.
struct PodPaths<'a> {
    files: &'a MountedFiles,
    own: tempfile::TempDir,
}

impl<'a> PodPaths<'a> {
    fn new(files: &'a MountedFiles) -> Self {
        Self {
            files,
            own: tempfile::Builder::new().prefix("groundskeeper-pod-fs-").tempdir().expect("a temp dir"),
        }
    }

    /// What stands for `path` inside the pod.
    fn local(&self, path: &Path) -> PathBuf {
        if let Some(local) = self.files.resolve(path) {
            return local;
        }
        let inside = self.own.path().join(path.strip_prefix("/").unwrap_or(path));
        let files: Vec<&Path> = self.files.mount_paths().filter(|m| m.parent() == Some(path)).collect();
        std::fs::create_dir_all(&inside).expect("a folder of the pod's");
        for file in files {
            let local = self.files.required(file);
            std::fs::copy(local, inside.join(file.file_name().expect("a file name"))).expect("a Secret file");
        }
        inside
    }

    /// The encryption key's file, from the key's Secret mounted as a folder.
    fn key(&self, file: &mut Option<PathBuf>) {
        if let Some(path) = file.as_mut() {
            *path = self.files.required(path);
        }
    }

    fn connection(&self, connection: &mut EndpointArgs) {
        for path in [&mut connection.cacert, &mut connection.cert, &mut connection.key] {
            if let Some(p) = path.as_mut() {
                *p = self.files.required(p);
            }
        }
    }

    fn from(&self, from: &mut FromArgs) {
        if from.from.starts_with('/') {
            from.from = self.local(Path::new(&from.from)).display().to_string();
        }
        from.from_credentials = from.from_credentials.as_ref().map(|c| self.local(c));
    }

    fn to(&self, to: &mut ToArgs) {
        if to.to.starts_with('/') {
            to.to = self.local(Path::new(&to.to)).display().to_string();
        }
        to.to_credentials = to.to_credentials.as_ref().map(|c| self.local(c));
    }
}
