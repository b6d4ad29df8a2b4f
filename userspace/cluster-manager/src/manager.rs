//! The cluster manager: node id assignment and queue pair brokering.
//!
//! Each accepted connection gets a thread that reads the node's `Hello`.
//! The join itself runs under one global lock, so that every pair of nodes
//! is connected exactly once and ids follow join order. During a join the
//! manager talks to every earlier node over the connection that node kept
//! open after its own join; nobody reads those connections otherwise, so a
//! node that went away is only noticed when the next join reaches it.

use std::collections::BTreeMap;
use std::io;
use std::net::{Ipv6Addr, Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread;
use std::time::Duration;

use lite::sys::MAX_NODES;

use crate::cm_wire::{Endpoint, Hello, Kind, Message};
use crate::frame::{read_message, write_message, ProtocolError};

/// Tunables of a [`ClusterManager`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ManagerConfig {
    /// Longest a node may take to answer one request during a join.
    pub io_timeout: Duration,
    /// Longest a new connection may take to send its `Hello`.
    pub hello_timeout: Duration,
}

impl Default for ManagerConfig {
    fn default() -> Self {
        // Generous: nodes may be emulated machines running debug kernels.
        ManagerConfig {
            io_timeout: Duration::from_secs(30),
            hello_timeout: Duration::from_secs(30),
        }
    }
}

/// A node that completed its join.
struct Member {
    stream: TcpStream,
}

/// Cluster membership, guarded by the global join lock.
struct Registry {
    /// Next id to hand out; ids are never reused so that a stale queue pair
    /// can never be mistaken for one belonging to a newer node.
    next_id: u32,
    /// Live members by id; ascending order is the order peers are paired in.
    members: BTreeMap<u32, Member>,
}

/// Which side of a pairing failed.
enum PairingError {
    /// The earlier node failed: drop it and go on with the join.
    Peer(ProtocolError),
    /// The joining node failed: abandon its join.
    Newcomer(ProtocolError),
}

impl Registry {
    fn new() -> Self {
        Registry {
            next_id: 1,
            members: BTreeMap::new(),
        }
    }

    /// Hands out the next id, or `None` once every id below [`MAX_NODES`]
    /// has been used.
    fn allocate_id(&mut self) -> Option<u32> {
        if self.next_id >= MAX_NODES {
            return None;
        }
        let id = self.next_id;
        self.next_id += 1;
        Some(id)
    }

    /// Removes a member and closes its connection so its node notices.
    fn drop_member(&mut self, id: u32, reason: &dyn std::fmt::Display) {
        if let Some(member) = self.members.remove(&id) {
            // The node may already be gone; there is nothing to report then.
            let _ = member.stream.shutdown(Shutdown::Both);
            log(format_args!("node {id} disconnected: {reason}"));
        }
    }

    /// Runs a whole join for a node that sent `hello` on `stream`.
    fn admit(&mut self, mut stream: TcpStream, address: SocketAddr, hello: Hello) {
        let Some(id) = self.allocate_id() else {
            log(format_args!(
                "rejected {address}: all {MAX_NODES} node ids are used"
            ));
            refuse(&mut stream, -libc::ENOSPC);
            return;
        };
        if let Err(e) = write_message(&mut stream, &Message::Welcome { node_id: id }) {
            log(format_args!(
                "join of node {id} from {address} abandoned: {e}"
            ));
            return;
        }

        let earlier: Vec<u32> = self.members.keys().copied().collect();
        let mut connected = Vec::with_capacity(earlier.len());
        for peer in earlier {
            match self.pair(peer, id, &mut stream) {
                Ok(()) => connected.push(peer),
                Err(PairingError::Peer(e)) => self.drop_member(peer, &e),
                Err(PairingError::Newcomer(e)) => {
                    log(format_args!(
                        "join of node {id} from {address} abandoned while pairing with node {peer}: {e}"
                    ));
                    refuse(&mut stream, e.errno());
                    return;
                }
            }
        }

        // Bounded by MAX_NODES, so the count always fits.
        let total_nodes = u32::try_from(self.members.len() + 1).unwrap_or(u32::MAX);
        if let Err(e) = write_message(&mut stream, &Message::JoinDone { total_nodes }) {
            log(format_args!(
                "join of node {id} from {address} abandoned: {e}"
            ));
            return;
        }
        log(format_args!(
            "node {id} joined from {address} (gid {}, lid {}), connected to nodes {connected:?}, now {total_nodes} live",
            Ipv6Addr::from(hello.gid),
            hello.lid
        ));
        self.members.insert(id, Member { stream });
    }

    /// Connects the queue pairs between the member `peer` and the joining
    /// node `newcomer_id`, in the order the wire protocol prescribes.
    fn pair(
        &mut self,
        peer: u32,
        newcomer_id: u32,
        newcomer: &mut TcpStream,
    ) -> Result<(), PairingError> {
        let Some(member) = self.members.get_mut(&peer) else {
            return Ok(());
        };
        let peer_stream = &mut member.stream;

        let peer_endpoint = prepare(peer_stream, newcomer_id).map_err(PairingError::Peer)?;
        let newcomer_endpoint = prepare(newcomer, peer).map_err(PairingError::Newcomer)?;
        connect(peer_stream, newcomer_id, newcomer_endpoint).map_err(PairingError::Peer)?;
        connect(newcomer, peer, peer_endpoint).map_err(PairingError::Newcomer)?;
        log(format_args!(
            "node {newcomer_id} (qpn {}) <-> node {peer} (qpn {}) connected",
            newcomer_endpoint.qpn, peer_endpoint.qpn
        ));
        Ok(())
    }
}

/// Asks `stream`'s node to create a queue pair for `peer`; returns its endpoint.
fn prepare(stream: &mut TcpStream, peer: u32) -> Result<Endpoint, ProtocolError> {
    write_message(stream, &Message::Prepare { peer })?;
    match expect(stream, Kind::QpInfo)? {
        Message::QpInfo(endpoint) if endpoint.peer == peer => Ok(endpoint),
        Message::QpInfo(endpoint) => Err(ProtocolError::WrongPeer {
            expected: peer,
            received: endpoint.peer,
        }),
        other => Err(unexpected(Kind::QpInfo, &other)),
    }
}

/// Tells `stream`'s node to connect its queue pair for `peer` to
/// `remote_endpoint` (the endpoint `peer` created for that node).
fn connect(
    stream: &mut TcpStream,
    peer: u32,
    remote_endpoint: Endpoint,
) -> Result<(), ProtocolError> {
    // In a Connect, `peer` names the owner of the endpoint.
    let endpoint = Endpoint {
        peer,
        ..remote_endpoint
    };
    write_message(stream, &Message::Connect(endpoint))?;
    match expect(stream, Kind::Connected)? {
        Message::Connected { peer: answered, .. } if answered != peer => {
            Err(ProtocolError::WrongPeer {
                expected: peer,
                received: answered,
            })
        }
        Message::Connected { status: 0, .. } => Ok(()),
        Message::Connected { status, .. } => Err(ProtocolError::ConnectFailed { peer, status }),
        other => Err(unexpected(Kind::Connected, &other)),
    }
}

/// Reads the next frame and insists on `kind`; a `Failure` frame becomes
/// [`ProtocolError::Refused`].
fn expect(stream: &mut TcpStream, kind: Kind) -> Result<Message, ProtocolError> {
    match read_message(stream)? {
        message if message.kind() == kind => Ok(message),
        Message::Failure { errno } => Err(ProtocolError::Refused { errno }),
        other => Err(unexpected(kind, &other)),
    }
}

fn unexpected(expected: Kind, received: &Message) -> ProtocolError {
    ProtocolError::Unexpected {
        expected,
        received: received.kind(),
    }
}

/// Tells a node its request failed; it is about to be disconnected, so a
/// failure to deliver the news changes nothing.
fn refuse(stream: &mut TcpStream, errno: i32) {
    let _ = write_message(stream, &Message::Failure { errno });
    let _ = stream.shutdown(Shutdown::Both);
}

/// Writes one event line to stderr.
fn log(event: std::fmt::Arguments<'_>) {
    eprintln!("lite-cm: {event}");
}

/// A cluster manager bound to a TCP address.
pub struct ClusterManager {
    listener: TcpListener,
    config: ManagerConfig,
    registry: Arc<Mutex<Registry>>,
}

impl ClusterManager {
    /// Binds the listening socket.
    pub fn bind(address: impl ToSocketAddrs, config: ManagerConfig) -> io::Result<Self> {
        Ok(ClusterManager {
            listener: TcpListener::bind(address)?,
            config,
            registry: Arc::new(Mutex::new(Registry::new())),
        })
    }

    /// Address the manager listens on (useful when bound to port 0).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Ids of the nodes currently in the cluster, ascending.
    pub fn live_nodes(&self) -> Vec<u32> {
        lock(&self.registry).members.keys().copied().collect()
    }

    /// Accepts nodes, each connection on its own thread, until the
    /// listening socket fails; returns that failure.
    pub fn run(&self) -> io::Error {
        match self.local_addr() {
            Ok(address) => log(format_args!("listening on {address}")),
            Err(e) => return e,
        }
        loop {
            let (stream, address) = match self.listener.accept() {
                Ok(accepted) => accepted,
                Err(e) if is_transient_accept_error(&e) => {
                    log(format_args!("accept failed: {e}"));
                    // Out of descriptors or similar: let connections drain.
                    thread::sleep(Duration::from_millis(100));
                    continue;
                }
                Err(e) => return e,
            };
            let registry = Arc::clone(&self.registry);
            let config = self.config;
            let spawned = thread::Builder::new()
                .name(format!("join {address}"))
                .spawn(move || serve_connection(&registry, config, stream, address));
            if let Err(e) = spawned {
                log(format_args!("cannot serve {address}: {e}"));
            }
        }
    }
}

fn is_transient_accept_error(e: &io::Error) -> bool {
    !matches!(
        e.raw_os_error(),
        Some(libc::EBADF | libc::EINVAL | libc::ENOTSOCK | libc::EOPNOTSUPP)
    )
}

/// Locks the registry; a panic in another join leaves it usable because
/// every mutation is a single map insert or remove.
fn lock(registry: &Mutex<Registry>) -> MutexGuard<'_, Registry> {
    registry.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Serves one connection: reads its `Hello`, then runs the join.
fn serve_connection(
    registry: &Mutex<Registry>,
    config: ManagerConfig,
    mut stream: TcpStream,
    address: SocketAddr,
) {
    let configured = stream
        .set_nodelay(true)
        .and_then(|()| stream.set_read_timeout(Some(config.hello_timeout)))
        .and_then(|()| stream.set_write_timeout(Some(config.io_timeout)));
    if let Err(e) = configured {
        log(format_args!(
            "rejected {address}: cannot configure socket: {e}"
        ));
        return;
    }
    let hello = match expect(&mut stream, Kind::Hello) {
        Ok(Message::Hello(hello)) => hello,
        Ok(other) => {
            let e = unexpected(Kind::Hello, &other);
            log(format_args!("rejected {address}: {e}"));
            refuse(&mut stream, e.errno());
            return;
        }
        Err(e) => {
            log(format_args!("rejected {address}: {e}"));
            refuse(&mut stream, e.errno());
            return;
        }
    };
    if let Err(e) = stream.set_read_timeout(Some(config.io_timeout)) {
        log(format_args!(
            "rejected {address}: cannot configure socket: {e}"
        ));
        return;
    }
    lock(registry).admit(stream, address, hello);
}

/// Lets tests jump ahead in the id space without 63 joins.
#[cfg(test)]
pub(crate) fn set_next_id(manager: &ClusterManager, next_id: u32) {
    lock(&manager.registry).next_id = next_id;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_start_at_one_and_stop_below_max_nodes() {
        let mut registry = Registry::new();
        let ids: Vec<u32> = std::iter::from_fn(|| registry.allocate_id()).collect();
        assert_eq!(ids.first(), Some(&1));
        assert_eq!(ids.last(), Some(&(MAX_NODES - 1)));
        assert_eq!(ids.len(), (MAX_NODES - 1) as usize);
        assert!(ids.windows(2).all(|pair| pair[1] == pair[0] + 1));
        assert_eq!(registry.allocate_id(), None);
    }
}
