//! Snapshots off the cluster: the wall time of `groundskeeper-job snapshot --to s3://…` (etcd's
//! stream straight into a multipart upload to a local S3 server, s3s-fs) against a plain file
//! copy of the same size, side by side in one run, with the runner's peak memory while it
//! uploads. Also timed: the runner writing the same snapshot to a file, and `snapshot-copy` of
//! that file into the bucket (which reads the copy back to check it).
//!
//! ```sh
//! cargo bench -p groundskeeper-job --bench snapshot_upload
//! ```
//!
//! etcd 3.5 and s3s-fs are found where `cargo xtask test` put them (`target/tools/`), or through
//! `GROUNDSKEEPER_ETCD_3_5` and `GROUNDSKEEPER_S3S_FS`. One etcd 3.5 member filled with `GROUNDSKEEPER_BENCH_SNAPSHOT_MB` of live data (default
//! 1000), `GROUNDSKEEPER_BENCH_ROUNDS` rounds (default 3), each contender once per round in a
//! rotating order; medians are compared. Goals: the upload within 1.5× the file copy's time, and
//! the runner's peak RSS under 64 MiB.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use groundskeeper_e2e::etcd_cluster::{ClusterOptions, EtcdCluster, EtcdVersion, find_etcd};
use groundskeeper_e2e::measure::{env_number, flush_disk, run_measured};
use groundskeeper_e2e::s3_server::{S3Server, find_s3s_fs};
use groundskeeper_protocol::Report;

const UPLOAD_RATIO_GOAL: f64 = 1.5;
const PEAK_RSS_GOAL_MIB: f64 = 64.0;
const TEMPLATE: &str = "{cluster}-{time}.db";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Contender {
    /// `snapshot --to s3://…`.
    Upload,
    /// `snapshot --output FILE`.
    ToFile,
    /// A plain copy of the snapshot file, fsynced.
    FileCopy,
    /// `snapshot-copy` of the snapshot file into the bucket.
    Copy,
    /// etcd's own `etcdctl snapshot save FILE`: how fast etcd sends a snapshot.
    EtcdctlSave,
    /// The snapshot file uploaded in-process with object_store alone (8 MiB parts, 3 in flight,
    /// as the runner uploads): the upload without etcd.
    PlainUpload,
}

const CONTENDERS: [Contender; 6] = [
    Contender::Upload,
    Contender::ToFile,
    Contender::FileCopy,
    Contender::Copy,
    Contender::EtcdctlSave,
    Contender::PlainUpload,
];

impl Contender {
    fn label(self) -> &'static str {
        match self {
            Contender::Upload => "runner: snapshot --to s3:// (stream → multipart upload)",
            Contender::ToFile => "runner: snapshot --output FILE (stream → file, fsynced)",
            Contender::FileCopy => "plain file copy of the snapshot (fsynced)",
            Contender::Copy => "runner: snapshot-copy FILE → s3:// (upload + read-back)",
            Contender::EtcdctlSave => "etcdctl 3.5 snapshot save FILE (etcd's own client)",
            Contender::PlainUpload => "object_store multipart upload of the file alone (no etcd)",
        }
    }
}

#[derive(Default)]
struct Figures {
    walls: Vec<Duration>,
    peak_rss_kib: i64,
}

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let etcd = match find_etcd(EtcdVersion::V3_5) {
        Ok(etcd) => etcd,
        Err(why) => {
            println!("skipped: {why}");
            std::process::exit(1);
        }
    };
    let s3s_fs = match find_s3s_fs() {
        Ok(binary) => binary,
        Err(why) => {
            println!("skipped: {why}");
            std::process::exit(1);
        }
    };
    let megabytes = env_number("GROUNDSKEEPER_BENCH_SNAPSHOT_MB", 1000);
    let rounds = env_number("GROUNDSKEEPER_BENCH_ROUNDS", 3) as usize;
    let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
    let options = ClusterOptions { members: 1, ..ClusterOptions::default() };
    let cluster = runtime.block_on(EtcdCluster::start(&etcd, options)).expect("etcd starts");
    let started = Instant::now();
    runtime.block_on(cluster.fill(megabytes * 1_000_000)).expect("fill");
    println!("filled {megabytes} MB in {:.1} s", started.elapsed().as_secs_f64());
    let s3 = S3Server::start(&s3s_fs).expect("s3s-fs starts");
    s3.create_bucket("bench").unwrap();
    let work = tempfile::Builder::new().prefix("groundskeeper-bench-upload-").tempdir().unwrap();
    let credentials = work.path().join("credentials");
    s3.write_credentials(&credentials).unwrap();
    let etcdctl = etcd.with_file_name("etcdctl");
    let bench = Bench {
        cluster: &cluster,
        s3: &s3,
        work: work.path().to_owned(),
        credentials,
        etcdctl,
        runtime: &runtime,
    };

    // A first snapshot to a file: what the copies copy, and its size.
    let source = bench.work.join(name(0));
    bench.run_runner(&bench.to_file_args(&source));
    let size = std::fs::metadata(&source).unwrap().len();
    let mut figures: Vec<Figures> = CONTENDERS.iter().map(|_| Figures::default()).collect();
    for round in 0..rounds {
        for k in 0..CONTENDERS.len() {
            let at = (round + k) % CONTENDERS.len();
            let (wall, rss) = bench.once(CONTENDERS[at], &source, round + 1);
            figures[at].walls.push(wall);
            figures[at].peak_rss_kib = figures[at].peak_rss_kib.max(rss);
        }
    }
    report(&cluster.version, size, rounds, &figures);
}

struct Bench<'a> {
    cluster: &'a EtcdCluster,
    s3: &'a S3Server,
    work: PathBuf,
    credentials: PathBuf,
    etcdctl: PathBuf,
    runtime: &'a tokio::runtime::Runtime,
}

fn name(round: usize) -> String {
    format!("main-2026010{}T000000Z.db", round.min(9))
}

impl Bench<'_> {
    fn runner() -> String {
        std::env::var("GROUNDSKEEPER_JOB_BIN")
            .unwrap_or_else(|_| env!("CARGO_BIN_EXE_groundskeeper-job").to_owned())
    }

    fn bucket_args(&self, flag: &str) -> Vec<String> {
        let mut args = vec![format!("--{flag}-credentials"), self.credentials.display().to_string()];
        args.extend(self.s3.option_args(flag));
        args
    }

    fn to_file_args(&self, output: &Path) -> Vec<String> {
        vec![
            "snapshot".into(),
            "--endpoints".into(),
            self.cluster.endpoints_flag(),
            "--output".into(),
            output.display().to_string(),
        ]
    }

    /// Runs the runner to its end; its wall time and peak RSS (KiB), as the runner reads its own
    /// `VmHWM` (the child's `ru_maxrss` is not used: on Linux it starts from the bench process's
    /// own peak, which an in-process contender raises). Panics when it fails.
    fn run_runner(&self, args: &[String]) -> (Duration, i64) {
        let run = groundskeeper_e2e::measure::run_job(&Self::runner(), &self.work, args);
        if let Report::SnapshotCopy(copy) = &run.result.report {
            assert_eq!(copy.copied.len(), 1, "{copy:?}");
        }
        (run.wall, (run.peak_bytes / 1024) as i64)
    }

    fn once(&self, contender: Contender, source: &Path, round: usize) -> (Duration, i64) {
        flush_disk();
        let measured = match contender {
            Contender::Upload => {
                let mut args: Vec<String> = vec![
                    "snapshot".into(),
                    "--endpoints".into(),
                    self.cluster.endpoints_flag(),
                    "--to".into(),
                    "s3://bench/upload".into(),
                    "--object".into(),
                    name(round),
                ];
                args.extend(self.bucket_args("to"));
                self.run_runner(&args)
            }
            Contender::ToFile => self.run_runner(&self.to_file_args(&self.work.join(name(round)))),
            Contender::FileCopy => {
                let copy = self.work.join(format!("copy-{}", name(round)));
                let started = Instant::now();
                std::fs::copy(source, &copy).expect("a copy");
                std::fs::File::open(&copy).and_then(|f| f.sync_all()).expect("fsync");
                (started.elapsed(), 0)
            }
            Contender::EtcdctlSave => {
                let output = self.work.join(name(round));
                let measured = run_measured(
                    Command::new(&self.etcdctl)
                        .env("ETCDCTL_API", "3")
                        .args(["--endpoints", &self.cluster.endpoints_flag(), "snapshot", "save"])
                        .arg(&output)
                        .stdout(Stdio::null())
                        .stderr(Stdio::null()),
                )
                .expect("etcdctl runs");
                assert_eq!(measured.exit_code, 0, "etcdctl snapshot save failed");
                (measured.wall, 0)
            }
            Contender::PlainUpload => {
                let started = Instant::now();
                self.runtime.block_on(self.plain_upload(source, &format!("plain/{}", name(round))));
                (started.elapsed(), 0)
            }
            Contender::Copy => {
                let folder = self.work.join(format!("copy-source-{round}"));
                std::fs::create_dir_all(&folder).unwrap();
                std::fs::hard_link(source, folder.join(name(round))).expect("a link to the snapshot");
                let mut args: Vec<String> = vec![
                    "snapshot-copy".into(),
                    "--from".into(),
                    folder.display().to_string(),
                    "--to".into(),
                    "s3://bench/copy".into(),
                    "--file-name-template".into(),
                    TEMPLATE.into(),
                    "--cluster".into(),
                    "main".into(),
                ];
                args.extend(self.bucket_args("to"));
                let measured = self.run_runner(&args);
                std::fs::remove_dir_all(&folder).unwrap();
                measured
            }
        };
        self.clean_up(round);
        measured
    }

    /// The file into the bucket through object_store, as the runner's uploads go (8 MiB parts,
    /// at most 3 in flight), read from the file 1 MiB at a time.
    async fn plain_upload(&self, source: &Path, key: &str) {
        use object_store::aws::AmazonS3Builder;
        use object_store::{ObjectStoreExt, WriteMultipart};
        use tokio::io::AsyncReadExt;
        let store = AmazonS3Builder::new()
            .with_bucket_name("bench")
            .with_endpoint(&self.s3.endpoint)
            .with_region(groundskeeper_e2e::s3_server::REGION)
            .with_allow_http(true)
            .with_access_key_id(&self.s3.access_key)
            .with_secret_access_key(&self.s3.secret_key)
            .build()
            .expect("an S3 client");
        let upload = store.put_multipart(&key.into()).await.expect("an upload");
        let mut writer = WriteMultipart::new_with_chunk_size(upload, 8 * 1024 * 1024);
        let mut file = tokio::fs::File::open(source).await.expect("the snapshot file");
        let mut buffer = vec![0; 1024 * 1024];
        loop {
            let read = file.read(&mut buffer).await.expect("a read");
            if read == 0 {
                break;
            }
            writer.wait_for_capacity(3).await.expect("a part uploaded");
            writer.write(&buffer[..read]);
        }
        writer.finish().await.expect("the upload completed");
    }

    /// What a round wrote, removed: the disk holds one round at a time.
    fn clean_up(&self, round: usize) {
        for prefix in ["upload", "copy", "plain"] {
            let _ = std::fs::remove_file(self.s3.object_file("bench", &format!("{prefix}/{}", name(round))));
        }
        let _ = std::fs::remove_file(self.work.join(name(round)));
        let _ = std::fs::remove_file(self.work.join(format!("copy-{}", name(round))));
    }
}

fn median(values: &[Duration]) -> Duration {
    let mut sorted = values.to_vec();
    sorted.sort();
    sorted[sorted.len() / 2]
}

fn report(version: &str, size: u64, rounds: usize, figures: &[Figures]) {
    let mib = size as f64 / (1024.0 * 1024.0);
    println!("\netcd {version}, 1 member, snapshot of {mib:.1} MiB ({size} bytes), {rounds} rounds, medians");
    println!("| what | wall times (s) | median | MiB/s | peak RSS |");
    println!("|---|---|---|---|---|");
    for (contender, figures) in CONTENDERS.iter().zip(figures) {
        let walls: Vec<String> = figures.walls.iter().map(|w| format!("{:.2}", w.as_secs_f64())).collect();
        let median = median(&figures.walls).as_secs_f64();
        let rss = match figures.peak_rss_kib {
            0 => "—".to_owned(),
            kib => format!("{:.1} MiB ({} bytes)", kib as f64 / 1024.0, kib * 1024),
        };
        println!(
            "| {} | {} | {median:.2} s | {:.0} | {rss} |",
            contender.label(),
            walls.join(", "),
            mib / median
        );
    }
    let upload = median(&figures[0].walls).as_secs_f64();
    let copy = median(&figures[2].walls).as_secs_f64();
    let ratio = upload / copy;
    println!(
        "snapshot upload ÷ file copy: {ratio:.2} (goal ≤ {UPLOAD_RATIO_GOAL}): {}",
        if ratio <= UPLOAD_RATIO_GOAL { "met" } else { "NOT MET" }
    );
    let to_file = median(&figures[1].walls).as_secs_f64();
    let etcdctl = median(&figures[4].walls).as_secs_f64();
    let plain = median(&figures[5].walls).as_secs_f64();
    println!(
        "snapshot upload ÷ the same snapshot to a file: {:.2}; ÷ etcdctl snapshot save: {:.2}; \
         the upload alone ÷ file copy: {:.2}",
        upload / to_file,
        upload / etcdctl,
        plain / copy
    );
    let rss = figures[0].peak_rss_kib as f64 / 1024.0;
    println!(
        "runner's peak RSS while uploading: {rss:.1} MiB (goal < {PEAK_RSS_GOAL_MIB} MiB): {}",
        if rss < PEAK_RSS_GOAL_MIB { "met" } else { "NOT MET" }
    );
}
