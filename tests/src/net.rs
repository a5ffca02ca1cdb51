//! Loopback addresses: for tests of what happens when nothing answers, and ports for servers a
//! test starts as processes of their own.
//!
//! Binding port 0, reading the port and closing the listener again does not give a port where
//! nothing listens: the kernel hands the same free port to the next server that binds port 0 (an
//! S3 or etcd stand-in of a test running beside), and a "dead" endpoint then answers. A
//! [`ClosedPort`] keeps its port bound, without listening, for as long as it lives: connections
//! to it are refused at once, and no other socket can take it.
//!
//! For the same reason a server started as a child process (etcd, s3s-fs, Prometheus), which binds
//! the port it is given itself, does not get a port picked that way: [`free_ports`] reserves ports
//! below the kernel's ephemeral range (where no `bind` to port 0 and no outgoing connection ever
//! lands), each behind a lock file every test process of the machine respects.

use std::fs::{File, TryLockError};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener};
use std::sync::Mutex;

use socket2::{Domain, Protocol, Socket, Type};

/// A loopback TCP port that refuses every connection while this value lives.
pub struct ClosedPort {
    socket: Socket,
}

impl ClosedPort {
    pub fn new() -> ClosedPort {
        let socket = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP)).expect("a TCP socket");
        let loopback = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0));
        socket.bind(&loopback.into()).expect("a loopback port");
        ClosedPort { socket }
    }

    pub fn addr(&self) -> SocketAddr {
        self.socket.local_addr().expect("its address").as_socket().expect("an IP address")
    }

    pub fn port(&self) -> u16 {
        self.addr().port()
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr())
    }
}

impl Default for ClosedPort {
    fn default() -> Self {
        Self::new()
    }
}

/// How many ports below the ephemeral range [`free_ports`] picks from.
const RESERVED_SPAN: u16 = 10_000;

/// Reservations of this process: held until it exits (the kernel then releases their locks).
static RESERVED: Mutex<Vec<File>> = Mutex::new(Vec::new());

/// `n` distinct loopback ports for servers the test starts as other processes, free now and
/// reserved for this process's life: below the kernel's ephemeral ports (no server binding port 0
/// and no outgoing connection can take them while the server starts), and locked by a file in the
/// temp folder against the other test processes of the machine.
pub fn free_ports(n: usize) -> Result<Vec<u16>, String> {
    let (first, end) = reserved_range();
    let span = u32::from(end - first);
    let start = std::process::id().wrapping_mul(2_654_435_761)
        ^ std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    let folder = std::env::temp_dir().join("groundskeeper-test-ports");
    std::fs::create_dir_all(&folder).map_err(|e| format!("{}: {e}", folder.display()))?;
    let mut reserved = RESERVED.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let mut ports = Vec::with_capacity(n);
    for step in 0..span {
        if ports.len() == n {
            break;
        }
        let port = first + ((start.wrapping_add(step)) % span) as u16;
        let lock = folder.join(format!("{port}.lock"));
        let file = File::create(&lock).map_err(|e| format!("{}: {e}", lock.display()))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => continue,
            Err(TryLockError::Error(e)) => return Err(format!("{}: {e}", lock.display())),
        }
        // Not in use by anything outside the tests either.
        if TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_err() {
            continue;
        }
        reserved.push(file);
        ports.push(port);
    }
    if ports.len() < n {
        return Err(format!("only {} of {n} free ports between {first} and {end}", ports.len()));
    }
    Ok(ports)
}

/// `[first, end)`: the ports just below the kernel's ephemeral range.
fn reserved_range() -> (u16, u16) {
    let ephemeral_start = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next().and_then(|low| low.parse::<u16>().ok()))
        .unwrap_or(32_768);
    let end = ephemeral_start.max(1024 + RESERVED_SPAN);
    (end - RESERVED_SPAN, end)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_ports_are_distinct_below_the_ephemeral_range_and_kept_from_other_processes() {
        let (first, end) = reserved_range();
        let ports = free_ports(6).unwrap();
        let distinct: std::collections::BTreeSet<u16> = ports.iter().copied().collect();
        assert_eq!(distinct.len(), 6, "{ports:?}");
        assert!(ports.iter().all(|p| (first..end).contains(p)), "{ports:?} not in {first}..{end}");
        // Another process (here: another open file description) cannot lock them.
        let folder = std::env::temp_dir().join("groundskeeper-test-ports");
        for port in &ports {
            let other = File::open(folder.join(format!("{port}.lock"))).unwrap();
            assert!(matches!(other.try_lock(), Err(TryLockError::WouldBlock)), "port {port}");
        }
        // And this process never hands one out twice.
        let more = free_ports(6).unwrap();
        assert!(more.iter().all(|p| !ports.contains(p)), "{ports:?} then {more:?}");
        // A server binding port 0 never gets one of them.
        let kernel_picked = TcpListener::bind("127.0.0.1:0").unwrap();
        let picked = kernel_picked.local_addr().unwrap().port();
        assert!(!(first..end).contains(&picked), "the kernel picked {picked}");
    }

    #[test]
    fn connections_are_refused_and_the_port_stays_taken() {
        let closed = ClosedPort::new();
        let refused = std::net::TcpStream::connect(closed.addr()).unwrap_err();
        assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused, "{refused}");
        let taken = std::net::TcpListener::bind(closed.addr()).unwrap_err();
        assert_eq!(taken.kind(), std::io::ErrorKind::AddrInUse, "{taken}");
    }

    /// No source in the workspace takes a port from a listener it drops in the same statement
    /// (the port is free again at once, for whichever server binds port 0 next).
    #[test]
    fn no_port_is_taken_from_a_listener_dropped_at_once() {
        let pattern =
            regex::Regex::new(r#"TcpListener::bind\("127\.0\.0\.1:0"\)[^;]*\.local_addr\(\)"#).unwrap();
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_owned();
        let mut found = Vec::new();
        let mut folders = vec![root.clone()];
        while let Some(folder) = folders.pop() {
            for entry in std::fs::read_dir(&folder).unwrap().flatten() {
                let path = entry.path();
                let name = entry.file_name().to_string_lossy().into_owned();
                if path.is_dir() {
                    if !name.starts_with('.') && name != "target" {
                        folders.push(path);
                    }
                } else if name.ends_with(".rs") && path != std::path::Path::new(file!()) {
                    let text = std::fs::read_to_string(&path).unwrap_or_default();
                    let single_line = text.replace('\n', " ");
                    if pattern.is_match(&single_line) && !path.ends_with("tests/src/net.rs") {
                        found.push(path.strip_prefix(&root).unwrap_or(&path).display().to_string());
                    }
                }
            }
        }
        assert!(found.is_empty(), "use groundskeeper_e2e::net::ClosedPort instead in: {found:?}");
    }
}
