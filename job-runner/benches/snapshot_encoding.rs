//! Compressed and encrypted backups: what zstd and AES-256-GCM cost and save on a snapshot of a
//! db of Kubernetes-like objects, and on the deltas of a workload, with the runner itself against
//! one real etcd 3.5 member.
//!
//! ```sh
//! cargo bench -p groundskeeper-job --bench snapshot_encoding
//! ```
//!
//! The member is filled with `GROUNDSKEEPER_BENCH_DB_MB` (default 1000) of values shaped like the
//! objects an API server keeps (JSON with names, labels, uids, timestamps and a spec; one value in
//! five carries a random base64 blob, as Secrets and ConfigMaps with certificates do: that part
//! does not compress), written by a deterministic generator. Then, `GROUNDSKEEPER_BENCH_ROUNDS`
//! rounds (default 2), one snapshot into a folder of each encoding (plain, `zstd`, `aes-256-gcm`,
//! `zstd+aes-256-gcm`), in a rotating order: wall time (stream, encode, write, read back and
//! check whole), bytes stored, and the runner's own peak memory. A restore (`snapshot-prove`:
//! decode, restore, start, check) of the plain and of the compressed and encrypted snapshot.
//! Then 10 steps of a workload of 3,000 puts of such objects (30 s at 100 writes/s), each taken
//! as a delta twice over the same revisions, plain and `zstd+aes-256-gcm`: bytes stored per hour
//! for hourly full snapshots alone and with a delta every 30 s, each plain and compressed.
//!
//! etcd 3.5 and etcdutl are found where `cargo xtask test` put them (`target/tools/`), or through
//! `GROUNDSKEEPER_ETCD_3_5`.

use std::path::{Path, PathBuf};

use etcd_client::{Txn, TxnOp};
use groundskeeper_e2e::etcd_cluster::{ClusterOptions, EtcdCluster, EtcdVersion, find_etcd};
use groundskeeper_e2e::measure::{JobRun, env_number, flush_disk, median, mib, run_job};
use groundskeeper_protocol::Report;

const TEMPLATE: &str = "{cluster}-{time}.db";
const DELTA_EVERY_SECONDS: u64 = 30;
const FULL_EVERY_SECONDS: u64 = 3600;
const PUTS_PER_DELTA: u64 = 3_000;
const DELTAS: u64 = 10;

/// The encodings measured: a name and the runner's flags.
const ENCODINGS: [(&str, &[&str]); 4] = [
    ("plain", &[]),
    ("zstd", &["--compression", "zstd"]),
    ("aes-256-gcm", &["--encryption-key", "KEY"]),
    ("zstd+aes-256-gcm", &["--compression", "zstd", "--encryption-key", "KEY"]),
];

fn runner() -> String {
    std::env::var("GROUNDSKEEPER_JOB_BIN")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_groundskeeper-job").to_owned())
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| (*a).to_owned()).collect()
}

/// A small deterministic generator (xorshift), so every run fills the same db.
struct Generator(u64);

impl Generator {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn hex(&mut self, len: usize) -> String {
        (0..len).map(|_| char::from(b"0123456789abcdef"[(self.next() % 16) as usize])).collect()
    }

    fn base64(&mut self, len: usize) -> String {
        const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        (0..len).map(|_| char::from(ALPHABET[(self.next() % 64) as usize])).collect()
    }

    /// An object as an API server stores it (JSON here), about 1.5 to 4 KiB; one in five with a
    /// random blob of 2 KiB.
    fn object(&mut self, i: u64) -> String {
        let kinds = ["Pod", "ConfigMap", "Secret", "Deployment", "Service", "Lease", "Event"];
        let kind = kinds[(self.next() % kinds.len() as u64) as usize];
        let app = ["api", "web", "worker", "cache", "ingest", "billing"][(self.next() % 6) as usize];
        let uid =
            format!("{}-{}-4{}-a{}-{}", self.hex(8), self.hex(4), self.hex(3), self.hex(3), self.hex(12));
        let blob = if self.next().is_multiple_of(5) { self.base64(2048) } else { String::new() };
        let replicas = self.next() % 7;
        let containers: String = (0..1 + self.next() % 3)
            .map(|c| {
                format!(
                    "{{\"name\":\"{app}-{c}\",\"image\":\"registry.example.com/{app}:v1.{}.{}\",\
                     \"resources\":{{\"requests\":{{\"cpu\":\"{}m\",\"memory\":\"{}Mi\"}}}},\
                     \"env\":[{{\"name\":\"LOG_LEVEL\",\"value\":\"info\"}},{{\"name\":\"REGION\",\"value\":\"eu-west-1\"}}]}}",
                    self.next() % 20,
                    self.next() % 100,
                    100 * (1 + self.next() % 8),
                    128 * (1 + self.next() % 16)
                )
            })
            .collect::<Vec<_>>()
            .join(",");
        format!(
            "{{\"apiVersion\":\"v1\",\"kind\":\"{kind}\",\"metadata\":{{\"name\":\"{app}-{i:07}\",\
             \"namespace\":\"team-{}\",\"uid\":\"{uid}\",\"resourceVersion\":\"{}\",\
             \"creationTimestamp\":\"2026-11-{:02}T{:02}:{:02}:{:02}Z\",\"labels\":{{\"app\":\"{app}\",\
             \"tier\":\"backend\",\"pod-template-hash\":\"{}\"}},\"annotations\":{{\"checksum/config\":\"{}\"}}}},\
             \"spec\":{{\"replicas\":{replicas},\"containers\":[{containers}]}},\"data\":\"{blob}\"}}",
            self.next() % 40,
            self.next() % 10_000_000,
            1 + self.next() % 28,
            self.next() % 24,
            self.next() % 60,
            self.next() % 60,
            self.hex(10),
            self.hex(64)
        )
    }
}

/// Puts objects until `bytes` of values were written, in transactions of at most 1 MB.
async fn fill(cluster: &EtcdCluster, generator: &mut Generator, bytes: u64) -> u64 {
    let mut client = cluster.client(None).await.expect("a client");
    let (mut written, mut i) = (0u64, 0u64);
    while written < bytes {
        let mut ops = Vec::new();
        let mut batch = 0;
        // etcd takes at most 128 operations and 1.5 MiB in one request.
        while batch < 1_000_000 && ops.len() < 100 {
            let value = generator.object(i);
            batch += value.len();
            ops.push(TxnOp::put(format!("/registry/objects/{i:08}"), value, None));
            i += 1;
        }
        written += batch as u64;
        client.txn(Txn::new().and_then(ops)).await.expect("a fill transaction");
    }
    i
}

struct Taken {
    wall: f64,
    stored: u64,
    content: u64,
    peak: u64,
}

fn take_snapshot(work: &Path, endpoints: &str, file: &Path, flags: &[String]) -> Taken {
    flush_disk();
    let mut args = strings(&["snapshot", "--endpoints", endpoints, "--output", &file.display().to_string()]);
    args.extend(flags.iter().cloned());
    let JobRun { wall, peak_bytes, result } = run_job(&runner(), work, &args);
    let Report::Snapshot(report) = &result.report else { panic!("a snapshot report") };
    Taken {
        wall: wall.as_secs_f64(),
        stored: report.size_bytes,
        content: report.stored.content_bytes.unwrap_or(report.size_bytes),
        peak: peak_bytes,
    }
}

fn main() {
    let etcd = match find_etcd(EtcdVersion::V3_5) {
        Ok(etcd) => etcd,
        Err(why) => {
            println!("skipped: {why}");
            std::process::exit(1);
        }
    };
    let etcdutl: PathBuf = etcd.with_file_name("etcdutl");
    let db_mb = env_number("GROUNDSKEEPER_BENCH_DB_MB", 1000);
    let rounds = env_number("GROUNDSKEEPER_BENCH_ROUNDS", 2) as usize;
    let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
    let options = ClusterOptions { members: 1, ..ClusterOptions::default() };
    let cluster = runtime.block_on(EtcdCluster::start(&etcd, options)).expect("etcd starts");
    let mut generator = Generator(0x9e37_79b9_7f4a_7c15);
    let objects = runtime.block_on(fill(&cluster, &mut generator, db_mb * 1_000_000));
    let work = tempfile::Builder::new().prefix("groundskeeper-bench-encoding-").tempdir().unwrap();
    let key = work.path().join("key");
    std::fs::write(&key, [0x42u8; 32]).unwrap();
    let key_arg = key.display().to_string();
    let flags_of = |flags: &[&str]| -> Vec<String> {
        flags.iter().map(|f| if *f == "KEY" { key_arg.clone() } else { (*f).to_owned() }).collect()
    };
    let endpoints = cluster.endpoints_flag();

    // Full snapshots, each encoding once a round, in a rotating order.
    let mut taken: Vec<Vec<Taken>> = ENCODINGS.iter().map(|_| Vec::new()).collect();
    for round in 0..rounds {
        for k in 0..ENCODINGS.len() {
            let e = (round + k) % ENCODINGS.len();
            let folder = work.path().join(format!("full-{e}"));
            std::fs::create_dir_all(&folder).unwrap();
            let file = folder.join("main-20260101T000000Z.db");
            taken[e].push(take_snapshot(work.path(), &endpoints, &file, &flags_of(ENCODINGS[e].1)));
        }
    }
    // A restore of the plain and of the compressed and encrypted snapshot (the last taken of each).
    let scratch = work.path().join("scratch");
    std::fs::create_dir(&scratch).unwrap();
    let mut restores = Vec::new();
    for e in [0, 3] {
        flush_disk();
        let mut args = strings(&[
            "snapshot-prove",
            "--from",
            &work.path().join(format!("full-{e}")).display().to_string(),
        ]);
        args.extend(strings(&["--file-name-template", TEMPLATE, "--cluster", "main"]));
        args.extend(strings(&["--scratch-dir", &scratch.display().to_string()]));
        args.extend(strings(&[
            "--etcd",
            &etcd.display().to_string(),
            "--etcdutl",
            &etcdutl.display().to_string(),
        ]));
        args.extend(flags_of(&["--encryption-key", "KEY"]));
        let JobRun { wall, peak_bytes, result } = run_job(&runner(), work.path(), &args);
        let Report::SnapshotProve(report) = &result.report else { panic!("a proof report") };
        assert!(report.proven, "{report:?}");
        restores.push((wall.as_secs_f64(), peak_bytes));
    }

    // Deltas of a workload, each span taken plain and compressed and encrypted.
    let mut client = runtime.block_on(cluster.client(None)).expect("a client");
    let mut delta_bytes: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    let mut delta_walls: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    let mut start = runtime.block_on(client.get("x", None)).unwrap().header().unwrap().revision();
    for step in 0..DELTAS {
        runtime.block_on(async {
            for p in 0..PUTS_PER_DELTA {
                let i = (step * PUTS_PER_DELTA + p) % objects;
                client
                    .put(format!("/registry/objects/{i:08}"), generator.object(i), None)
                    .await
                    .expect("a put");
            }
        });
        let end = runtime.block_on(client.get("x", None)).unwrap().header().unwrap().revision();
        for (d, e) in [(0usize, 0usize), (1, 3)] {
            let folder = work.path().join(format!("deltas-{e}"));
            std::fs::create_dir_all(&folder).unwrap();
            let mut args = strings(&[
                "snapshot-delta",
                "--endpoints",
                &endpoints,
                "--to",
                &folder.display().to_string(),
            ]);
            args.extend(strings(&["--file-name-template", TEMPLATE, "--cluster", "main"]));
            args.extend(strings(&[
                "--start-revision",
                &start.to_string(),
                "--end-revision",
                &end.to_string(),
            ]));
            args.extend(flags_of(ENCODINGS[e].1));
            let JobRun { wall, result, .. } = run_job(&runner(), work.path(), &args);
            let Report::SnapshotDelta(report) = &result.report else { panic!("a delta report") };
            delta_bytes[d].push(report.size_bytes as f64);
            delta_walls[d].push(wall.as_secs_f64());
        }
        start = end;
    }

    println!(
        "etcd {} member, {db_mb} MB of Kubernetes-like objects ({objects} objects, one in five with 2 KiB of random base64); {rounds} rounds",
        cluster.version
    );
    println!(
        "| encoding | wall (each round) | median | throughput of the snapshot | stored | ratio | runner peak memory |"
    );
    println!("|---|---|---|---|---|---|---|");
    let content = taken[0][0].content;
    for (e, (name, _)) in ENCODINGS.iter().enumerate() {
        let walls: Vec<f64> = taken[e].iter().map(|t| t.wall).collect();
        let stored = taken[e].last().unwrap().stored;
        let peak = taken[e].iter().map(|t| t.peak).max().unwrap();
        let wall = median(&walls);
        println!(
            "| {name} | {} s | {wall:.2} s | {:.1} MiB/s | {} | {:.2}× | {} |",
            walls.iter().map(|w| format!("{w:.2}")).collect::<Vec<_>>().join(", "),
            content as f64 / (1024.0 * 1024.0) / wall,
            mib(stored),
            content as f64 / stored as f64,
            mib(peak)
        );
    }
    println!("snapshot content (etcd's stream): {}", mib(content));
    println!(
        "restore (snapshot-prove: fetch, decode, restore, start, check): plain {:.2} s ({} peak); zstd+aes-256-gcm {:.2} s ({} peak)",
        restores[0].0,
        mib(restores[0].1),
        restores[1].0,
        mib(restores[1].1)
    );
    let per_hour = FULL_EVERY_SECONDS / DELTA_EVERY_SECONDS;
    let (plain_delta, sealed_delta) = (median(&delta_bytes[0]) as u64, median(&delta_bytes[1]) as u64);
    let (plain_full, sealed_full) = (taken[0].last().unwrap().stored, taken[3].last().unwrap().stored);
    println!(
        "{DELTAS} deltas of {PUTS_PER_DELTA} puts: plain median {} in {:.2} s; zstd+aes-256-gcm median {} in {:.2} s ({:.2}×)",
        mib(plain_delta),
        median(&delta_walls[0]),
        mib(sealed_delta),
        median(&delta_walls[1]),
        plain_delta as f64 / sealed_delta as f64
    );
    println!(
        "bytes per hour: full only plain {}, compressed {}; full + {per_hour} deltas plain {}, compressed {}",
        mib(plain_full),
        mib(sealed_full),
        mib(plain_full + per_hour * plain_delta),
        mib(sealed_full + per_hour * sealed_delta)
    );
}
