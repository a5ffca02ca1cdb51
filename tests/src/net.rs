//! Loopback addresses for tests of what happens when nothing answers.
//!
//! Binding port 0, reading the port and closing the listener again does not give a port where
//! nothing listens: the kernel hands the same free port to the next server that binds port 0 (an
//! S3 or etcd stand-in of a test running beside), and a "dead" endpoint then answers. A
//! [`ClosedPort`] keeps its port bound, without listening, for as long as it lives: connections
//! to it are refused at once, and no other socket can take it.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};

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

#[cfg(test)]
mod tests {
    use super::*;

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
