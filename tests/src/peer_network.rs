//! The peer network of a throwaway etcd cluster, with faults: each member's peer port sits
//! behind a TCP proxy, so a test can cut a member off from its peers or slow its peer traffic
//! down, while its client port keeps answering (`Status` still works, as it does for a member
//! whose peer network failed).
//!
//! etcd's peer traffic is HTTP: every raft connection starts with a request carrying
//! `X-PeerURLs: <the dialler's advertised peer URLs>`. The proxy in front of member B reads that
//! header, so a connection is known by both ends (who dialled, whom it reaches), and a fault on
//! member A
//! applies to every connection A takes part in, whichever side dialled: raft messages flow both
//! ways on streams the receiver opens and on requests the sender opens, so cutting one direction
//! alone would not part A from the others.

use std::collections::{HashMap, HashSet};
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A fault on one member's peer traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// Every connection it takes part in is cut, and new ones are refused.
    Cut,
    /// Every byte to or from it is delayed to this many bytes per second.
    Slow(u64),
}

#[derive(Default)]
struct State {
    /// Each member's advertised peer address (`127.0.0.1:port`), by member index.
    advertised: Vec<String>,
    faults: HashMap<usize, Fault>,
    /// Open connections: the members they join, and both sockets (to cut them).
    open: Vec<(HashSet<usize>, TcpStream, TcpStream)>,
}

impl State {
    fn fault_of(&self, ends: &HashSet<usize>) -> Option<Fault> {
        let faults = ends.iter().filter_map(|i| self.faults.get(i).copied());
        faults.min_by_key(|f| match f {
            Fault::Cut => 0,
            Fault::Slow(rate) => *rate,
        })
    }

    /// The member whose advertised peer URLs these are.
    fn index_of(&self, peer_urls: &str) -> Option<usize> {
        peer_urls.split(',').find_map(|url| {
            let address = url.trim().trim_start_matches("http://").trim_start_matches("https://");
            self.advertised.iter().position(|known| known == address)
        })
    }
}

/// The proxies in front of every member's peer port.
pub struct PeerNetwork {
    /// What each member advertises to its peers (the proxy's address).
    pub advertised: Vec<SocketAddr>,
    state: Arc<Mutex<State>>,
    stopped: Arc<AtomicBool>,
}

impl PeerNetwork {
    /// One proxy per member: `listen[i]` is where the proxy listens (and what member `i`
    /// advertises), `upstream[i]` where member `i` listens for peers.
    pub fn start(listeners: Vec<TcpListener>, upstream: Vec<SocketAddr>) -> std::io::Result<Self> {
        let advertised = listeners.iter().map(TcpListener::local_addr).collect::<Result<Vec<_>, _>>()?;
        let state = Arc::new(Mutex::new(State {
            advertised: advertised.iter().map(ToString::to_string).collect(),
            ..State::default()
        }));
        let stopped = Arc::new(AtomicBool::new(false));
        for (member, (listener, to)) in listeners.into_iter().zip(upstream).enumerate() {
            let (state, stopped) = (state.clone(), stopped.clone());
            std::thread::spawn(move || accept_loop(member, listener, to, state, stopped));
        }
        Ok(Self { advertised, state, stopped })
    }

    /// Parts member `i` from its peers: its open peer connections are cut and new ones refused.
    pub fn cut(&self, i: usize) {
        self.set(i, Some(Fault::Cut));
    }

    /// Slows every peer connection of member `i` to `bytes_per_second` each way: a member on a
    /// congested link, which falls behind the leader while still hearing from it.
    pub fn slow(&self, i: usize, bytes_per_second: u64) {
        self.set(i, Some(Fault::Slow(bytes_per_second.max(1))));
    }

    /// Member `i`'s peer traffic flows freely again.
    pub fn heal(&self, i: usize) {
        self.set(i, None);
    }

    fn set(&self, i: usize, fault: Option<Fault>) {
        let mut state = self.state.lock().expect("peer network");
        match fault {
            Some(fault) => state.faults.insert(i, fault),
            None => state.faults.remove(&i),
        };
        if fault == Some(Fault::Cut) {
            state.open.retain(|(ends, a, b)| {
                let cut = ends.contains(&i);
                if cut {
                    let _ = a.shutdown(Shutdown::Both);
                    let _ = b.shutdown(Shutdown::Both);
                }
                !cut
            });
        }
    }
}

impl Drop for PeerNetwork {
    fn drop(&mut self) {
        self.stopped.store(true, Ordering::SeqCst);
        let state = self.state.lock().expect("peer network");
        for (_, a, b) in &state.open {
            let _ = a.shutdown(Shutdown::Both);
            let _ = b.shutdown(Shutdown::Both);
        }
        // Wake the accept loops so they see the stop.
        for addr in &self.advertised {
            let _ = TcpStream::connect_timeout(addr, Duration::from_millis(100));
        }
    }
}

fn accept_loop(
    member: usize,
    listener: TcpListener,
    upstream: SocketAddr,
    state: Arc<Mutex<State>>,
    stopped: Arc<AtomicBool>,
) {
    for incoming in listener.incoming() {
        if stopped.load(Ordering::SeqCst) {
            return;
        }
        let Ok(client) = incoming else { continue };
        let state = state.clone();
        std::thread::spawn(move || {
            let _ = relay(member, client, upstream, state);
        });
    }
}

/// Reads the first request's head, learns who dialled, and relays both ways while no fault
/// forbids it.
fn relay(
    member: usize,
    mut client: TcpStream,
    upstream: SocketAddr,
    state: Arc<Mutex<State>>,
) -> std::io::Result<()> {
    client.set_read_timeout(Some(Duration::from_secs(10)))?;
    let head = read_head(&mut client)?;
    client.set_read_timeout(None)?;
    let mut ends = HashSet::from([member]);
    {
        let state = state.lock().expect("peer network");
        if let Some(from) = header(&head, "x-peerurls").and_then(|urls| state.index_of(&urls)) {
            ends.insert(from);
        }
        if state.fault_of(&ends) == Some(Fault::Cut) {
            return Ok(()); // dropped: the dialler sees its connection closed
        }
    }
    let mut server = TcpStream::connect(upstream)?;
    server.write_all(&head)?;
    state.lock().expect("peer network").open.push((ends.clone(), client.try_clone()?, server.try_clone()?));
    let (back_from, back_to) = (server.try_clone()?, client.try_clone()?);
    let (back_state, back_ends) = (state.clone(), ends.clone());
    std::thread::spawn(move || pump(back_from, back_to, &back_state, &back_ends));
    pump(client, server, &state, &ends);
    // Closed: its sockets are no longer anyone's to cut.
    let mut state = state.lock().expect("peer network");
    state.open.retain(|(_, a, _)| a.peer_addr().is_ok());
    Ok(())
}

/// Copies `from` to `to` until either closes or a cut comes; under a slow fault, paces the bytes.
fn pump(mut from: TcpStream, mut to: TcpStream, state: &Mutex<State>, ends: &HashSet<usize>) {
    let mut buffer = [0u8; 4096];
    loop {
        let n = match from.read(&mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let fault = state.lock().expect("peer network").fault_of(ends);
        match fault {
            Some(Fault::Cut) => break,
            Some(Fault::Slow(rate)) => std::thread::sleep(Duration::from_secs_f64(n as f64 / rate as f64)),
            None => {}
        }
        if to.write_all(&buffer[..n]).is_err() {
            break;
        }
    }
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
}

/// The bytes up to and including the blank line that ends the request head (at most 64 KiB).
fn read_head(stream: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if head.len() > 64 * 1024 || stream.read(&mut byte)? == 0 {
            return Err(std::io::Error::other("no HTTP request head"));
        }
        head.push(byte[0]);
    }
    Ok(head)
}

/// A header's value from a request head (names compared without case).
fn header(head: &[u8], name: &str) -> Option<String> {
    String::from_utf8_lossy(head).lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        key.trim().eq_ignore_ascii_case(name).then(|| value.trim().to_owned())
    })
}

/// A TCP address in front of several members' client ports, new connections going to the
/// members in the order `picks` gives (indexes into `members`, cycled): what a Kubernetes Service
/// in front of every member looks like to a client, picking at random. Lives as long as the
/// process (the tests that use it are short).
pub fn shared_endpoint(members: Vec<SocketAddr>, picks: Vec<usize>) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let address = listener.local_addr()?;
    std::thread::spawn(move || {
        for (n, incoming) in listener.incoming().enumerate() {
            let Ok(client) = incoming else { continue };
            let member = members[picks[n % picks.len()] % members.len()];
            let Ok(server) = TcpStream::connect(member) else { continue };
            let (Ok(client_back), Ok(server_back)) = (client.try_clone(), server.try_clone()) else {
                continue;
            };
            let free = Arc::new(Mutex::new(State::default()));
            let ends = HashSet::new();
            let back = free.clone();
            std::thread::spawn(move || pump(server_back, client_back, &back, &HashSet::new()));
            std::thread::spawn(move || pump(client, server, &free, &ends));
        }
    });
    Ok(address)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dialler_is_read_from_the_request_head() {
        let head = b"GET /raft/stream/message/8e9e05c52164694d HTTP/1.1\r\nHost: x\r\nX-Peerurls: http://127.0.0.1:4001\r\n\r\n";
        assert_eq!(header(head, "x-peerurls").as_deref(), Some("http://127.0.0.1:4001"));
        assert_eq!(header(head, "x-missing"), None);
        let state =
            State { advertised: vec!["127.0.0.1:4000".into(), "127.0.0.1:4001".into()], ..State::default() };
        assert_eq!(state.index_of("http://127.0.0.1:4001"), Some(1));
        assert_eq!(state.index_of("http://10.0.0.1:1,http://127.0.0.1:4000"), Some(0));
        assert_eq!(state.index_of("http://127.0.0.1:9"), None);
    }

    #[test]
    fn a_cut_outranks_a_slow_link_and_the_slowest_link_wins() {
        let mut state = State::default();
        state.faults.insert(0, Fault::Slow(1000));
        state.faults.insert(1, Fault::Slow(10));
        assert_eq!(state.fault_of(&HashSet::from([0, 1])), Some(Fault::Slow(10)));
        state.faults.insert(2, Fault::Cut);
        assert_eq!(state.fault_of(&HashSet::from([0, 2])), Some(Fault::Cut));
        assert_eq!(state.fault_of(&HashSet::from([3])), None);
    }
}
