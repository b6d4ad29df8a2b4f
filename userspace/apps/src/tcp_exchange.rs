//! [`Exchange`] over TCP sockets: what a user would write without LITE.
//!
//! Every pair of ranks shares one TCP connection (a full mesh). Rank `r`
//! listens on its host's port; it connects to every lower rank and accepts
//! every higher one, so each pair connects exactly once. A short hello in
//! both directions carries the ranks, so accepted connections are placed by
//! rank rather than by arrival order, and a wrong host list is caught at
//! once instead of mixing up data later.
//!
//! An all-to-all writes one length-prefixed message (`u64` little-endian
//! length, then the bytes) to every peer while reading one from every
//! peer, each on its own thread: a rank that only wrote, or wrote before
//! reading, would deadlock with a peer doing the same once the parts
//! outgrow the socket buffers.

use std::io::{self, Read, Write};
use std::net::{
    IpAddr, Ipv4Addr, Ipv6Addr, Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs,
};
use std::thread::{self, sleep};
use std::time::{Duration, Instant};

use crate::exchange::{check_parts, Exchange};

/// How long a rank keeps trying to reach a lower rank that is not
/// listening yet (ranks are started one after the other).
const CONNECT_PATIENCE: Duration = Duration::from_secs(120);

/// How long a rank waits for its higher ranks to connect, once it reached
/// its lower ones. Longer than [`CONNECT_PATIENCE`]: the higher ranks may
/// themselves be waiting for other ranks first.
const ACCEPT_PATIENCE: Duration = Duration::from_secs(180);

/// Limit of one connection attempt, so an unreachable host is retried
/// rather than waited on for the system's (minutes-long) default.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(5);

/// Pause between connection attempts and between polls for connections.
const RETRY_PAUSE: Duration = Duration::from_millis(50);

/// Limit of the hello exchange on a fresh connection.
const HELLO_TIMEOUT: Duration = Duration::from_secs(30);

/// Longest a read or write of an exchange may block: generous, since a
/// rank may compute for a long time between exchanges, but finite, so a
/// peer that vanished without closing its socket cannot hang the others.
const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(600);

/// Identifies a hello of this protocol (and its version).
const HELLO_MAGIC: u64 = 0x4c49_5445_5443_5001;

/// Size of an encoded [`Hello`].
const HELLO_LEN: usize = 16;

/// What each end of a new connection tells the other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Hello {
    /// The sender's rank.
    rank: u32,
    /// How many ranks the sender thinks there are.
    nodes: u32,
}

impl Hello {
    fn encode(self) -> [u8; HELLO_LEN] {
        let mut bytes = [0u8; HELLO_LEN];
        bytes[..8].copy_from_slice(&HELLO_MAGIC.to_le_bytes());
        bytes[8..12].copy_from_slice(&self.rank.to_le_bytes());
        bytes[12..].copy_from_slice(&self.nodes.to_le_bytes());
        bytes
    }

    /// `None` unless `bytes` is a hello of this protocol.
    fn decode(bytes: &[u8; HELLO_LEN]) -> Option<Hello> {
        let magic = u64::from_le_bytes(bytes[..8].try_into().ok()?);
        let rank = u32::from_le_bytes(bytes[8..12].try_into().ok()?);
        let nodes = u32::from_le_bytes(bytes[12..].try_into().ok()?);
        (magic == HELLO_MAGIC).then_some(Hello { rank, nodes })
    }
}

/// A full mesh of TCP connections between the ranks of an application.
///
/// Dropping it closes every connection.
#[derive(Debug)]
pub struct TcpMesh {
    rank: usize,
    /// The connection to each rank, indexed by rank; `None` for this one.
    peers: Vec<Option<TcpStream>>,
    /// Set once an exchange failed: the streams may then be in the middle
    /// of a message, so they are shut and no further exchange is tried.
    broken: bool,
}

impl TcpMesh {
    /// Connects rank `rank` to every other rank of `hosts` (one entry per
    /// rank: an IP address or host name, listening on `port`, or
    /// `"host:port"` to give that rank its own port).
    ///
    /// Returns once all connections are up. Lower ranks that are not
    /// listening yet are retried for up to two minutes.
    ///
    /// # Errors
    ///
    /// `EINVAL` if `rank` is not below `hosts.len()` or an entry cannot be
    /// parsed; `EPROTO` if a peer disagrees on the ranks; `ETIMEDOUT` if a
    /// higher rank did not connect in time; the socket's error otherwise.
    pub fn connect(hosts: &[String], rank: usize, port: u16) -> io::Result<TcpMesh> {
        let nodes = hosts.len();
        if rank >= nodes || u32::try_from(nodes).is_err() {
            return Err(einval());
        }
        let endpoints = hosts
            .iter()
            .map(|host| endpoint(host, port))
            .collect::<io::Result<Vec<_>>>()?;
        let start = Instant::now();
        // Listen before connecting anywhere, so that higher ranks reaching
        // this one early are queued instead of refused. The last rank has
        // nobody to accept.
        let listener = if rank + 1 < nodes {
            Some(listen_on(endpoints[rank])?)
        } else {
            None
        };
        let mut peers: Vec<Option<TcpStream>> = (0..nodes).map(|_| None).collect();
        for (lower, address) in endpoints.iter().enumerate().take(rank) {
            let stream = connect_with_retries(*address, start + CONNECT_PATIENCE)?;
            greet(&stream, rank, lower, nodes)?;
            peers[lower] = Some(stream);
        }
        if let Some(listener) = listener {
            accept_higher(
                &listener,
                rank,
                &mut peers,
                Instant::now() + ACCEPT_PATIENCE,
            )?;
        }
        for stream in peers.iter().flatten() {
            stream.set_read_timeout(Some(EXCHANGE_TIMEOUT))?;
            stream.set_write_timeout(Some(EXCHANGE_TIMEOUT))?;
        }
        Ok(TcpMesh {
            rank,
            peers,
            broken: false,
        })
    }

    /// Shuts every connection, so that peers blocked on this rank fail
    /// instead of waiting for data that will not come.
    fn break_mesh(&mut self) {
        self.broken = true;
        for stream in self.peers.iter().flatten() {
            let _ = stream.shutdown(Shutdown::Both);
        }
    }
}

impl Exchange for TcpMesh {
    fn rank(&self) -> usize {
        self.rank
    }

    fn nodes(&self) -> usize {
        self.peers.len()
    }

    /// # Errors
    ///
    /// `EINVAL` for a wrong number of parts; `ENOTCONN` once an earlier
    /// exchange failed; the socket's error (a peer that closed its end
    /// gives `UnexpectedEof` or `EPIPE`/`ECONNRESET`).
    fn all_to_all(&mut self, mut outgoing: Vec<Vec<u8>>) -> io::Result<Vec<Vec<u8>>> {
        check_parts(&outgoing, self.nodes())?;
        if self.broken {
            return Err(io::Error::from_raw_os_error(libc::ENOTCONN));
        }
        let own = std::mem::take(&mut outgoing[self.rank]);
        let result = exchange_parts(&self.peers, &outgoing);
        match result {
            Ok(mut incoming) => {
                incoming[self.rank] = own;
                Ok(incoming)
            }
            Err(e) => {
                self.break_mesh();
                Err(e)
            }
        }
    }

    fn barrier(&mut self) -> io::Result<()> {
        let nothing = vec![Vec::new(); self.nodes()];
        self.all_to_all(nothing).map(drop)
    }

    fn transport(&self) -> &'static str {
        "tcp"
    }
}

/// Sends `outgoing[p]` to every peer `p` while receiving one message from
/// each; returns the received ones indexed by rank (empty for this rank).
fn exchange_parts(peers: &[Option<TcpStream>], outgoing: &[Vec<u8>]) -> io::Result<Vec<Vec<u8>>> {
    thread::scope(|scope| {
        let mut writers = Vec::new();
        let mut readers = Vec::new();
        for (stream, part) in peers.iter().zip(outgoing) {
            let Some(stream) = stream else {
                continue;
            };
            writers.push(
                thread::Builder::new()
                    .name("tcp-send".into())
                    .spawn_scoped(scope, move || {
                        shut_on_error(stream, send_message(stream, part))
                    })?,
            );
            readers.push(
                thread::Builder::new()
                    .name("tcp-receive".into())
                    .spawn_scoped(scope, move || {
                        shut_on_error(stream, receive_message(stream))
                    })?,
            );
        }
        let mut first_error = None;
        for writer in writers {
            if let Err(e) = joined(writer.join()) {
                first_error.get_or_insert(e);
            }
        }
        let mut received = readers.into_iter().map(|reader| joined(reader.join()));
        let mut incoming = Vec::with_capacity(peers.len());
        for stream in peers {
            let part = match stream.as_ref().and_then(|_| received.next()) {
                Some(Ok(part)) => part,
                Some(Err(e)) => {
                    first_error.get_or_insert(e);
                    Vec::new()
                }
                // This rank's own slot, filled by the caller.
                None => Vec::new(),
            };
            incoming.push(part);
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(incoming),
        }
    })
}

/// The result of a joined thread; a panic in it becomes `EIO`.
fn joined<T>(outcome: thread::Result<io::Result<T>>) -> io::Result<T> {
    outcome.unwrap_or_else(|_| Err(io::Error::from_raw_os_error(libc::EIO)))
}

/// Passes `result` through, shutting `stream` if it failed: the thread
/// moving data the other way then fails at once instead of blocking until
/// its timeout.
fn shut_on_error<T>(stream: &TcpStream, result: io::Result<T>) -> io::Result<T> {
    if result.is_err() {
        let _ = stream.shutdown(Shutdown::Both);
    }
    result
}

/// Writes one message: its length, then its bytes.
fn send_message(mut stream: &TcpStream, part: &[u8]) -> io::Result<()> {
    let len = u64::try_from(part.len()).map_err(|_| einval())?;
    stream.write_all(&len.to_le_bytes())?;
    stream.write_all(part)?;
    stream.flush()
}

/// Reads one message written by [`send_message`].
fn receive_message(mut stream: &TcpStream) -> io::Result<Vec<u8>> {
    let mut header = [0u8; 8];
    stream.read_exact(&mut header)?;
    let len = u64::from_le_bytes(header);
    let expected = usize::try_from(len).map_err(|_| io::Error::from_raw_os_error(libc::EPROTO))?;
    let mut part = Vec::new();
    // A garbled length must fail, not abort the process on allocation.
    part.try_reserve_exact(expected)
        .map_err(|_| io::Error::from_raw_os_error(libc::ENOMEM))?;
    stream.take(len).read_to_end(&mut part)?;
    if part.len() != expected {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "peer closed the connection in the middle of a message",
        ));
    }
    Ok(part)
}

/// The address of a rank given as `host` ("ip", "name", "ip:port",
/// "name:port" or "[ipv6]:port"), using `default_port` without a port.
fn endpoint(host: &str, default_port: u16) -> io::Result<SocketAddr> {
    if host.is_empty() {
        return Err(einval());
    }
    if let Ok(address) = host.parse::<SocketAddr>() {
        return Ok(address);
    }
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, default_port));
    }
    let (name, port) = match host.rsplit_once(':') {
        Some((name, port)) => (name, port.parse::<u16>().map_err(|_| einval())?),
        None => (host, default_port),
    };
    if name.is_empty() {
        return Err(einval());
    }
    (name, port)
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| io::Error::from_raw_os_error(libc::EADDRNOTAVAIL))
}

/// Listens on `own`'s port on every interface of its family: the host
/// name other ranks use need not be an address of a local interface
/// (e.g. behind NAT), and the port is what tells ranks apart.
fn listen_on(own: SocketAddr) -> io::Result<TcpListener> {
    let any: IpAddr = match own {
        SocketAddr::V4(_) => Ipv4Addr::UNSPECIFIED.into(),
        SocketAddr::V6(_) => Ipv6Addr::UNSPECIFIED.into(),
    };
    TcpListener::bind(SocketAddr::new(any, own.port()))
}

/// Connects to `address`, retrying until `deadline` while nobody listens
/// there yet.
fn connect_with_retries(address: SocketAddr, deadline: Instant) -> io::Result<TcpStream> {
    loop {
        match TcpStream::connect_timeout(&address, ATTEMPT_TIMEOUT) {
            Ok(stream) => {
                stream.set_nodelay(true)?;
                return Ok(stream);
            }
            Err(e) if Instant::now() >= deadline => return Err(e),
            Err(_) => sleep(RETRY_PAUSE),
        }
    }
}

/// The hello exchange on a connection this rank opened to rank `lower`.
fn greet(stream: &TcpStream, rank: usize, lower: usize, nodes: usize) -> io::Result<()> {
    let mine = hello(rank, nodes)?;
    stream.set_read_timeout(Some(HELLO_TIMEOUT))?;
    stream.set_write_timeout(Some(HELLO_TIMEOUT))?;
    let mut writer = stream;
    writer.write_all(&mine.encode())?;
    let theirs = read_hello(stream)?;
    if theirs != hello(lower, nodes)? {
        return Err(io::Error::from_raw_os_error(libc::EPROTO));
    }
    Ok(())
}

/// Accepts a connection from every rank above `rank` into `peers`.
fn accept_higher(
    listener: &TcpListener,
    rank: usize,
    peers: &mut [Option<TcpStream>],
    deadline: Instant,
) -> io::Result<()> {
    let nodes = peers.len();
    let mine = hello(rank, nodes)?;
    // Polled, so that a higher rank that never comes ends in ETIMEDOUT
    // rather than a hang.
    listener.set_nonblocking(true)?;
    let mut missing = nodes - rank - 1;
    while missing > 0 {
        let stream = match listener.accept() {
            Ok((stream, _)) => stream,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if Instant::now() >= deadline {
                    return Err(io::Error::from_raw_os_error(libc::ETIMEDOUT));
                }
                sleep(RETRY_PAUSE);
                continue;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        stream.set_nonblocking(false)?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(HELLO_TIMEOUT))?;
        stream.set_write_timeout(Some(HELLO_TIMEOUT))?;
        // Something other than a rank (a port scanner, a client of
        // something else) is dropped; a rank that disagrees about the
        // mesh is an error.
        let Ok(theirs) = read_hello(&stream) else {
            continue;
        };
        let from = theirs.rank as usize;
        if theirs.nodes != mine.nodes || from <= rank || from >= nodes || peers[from].is_some() {
            return Err(io::Error::from_raw_os_error(libc::EPROTO));
        }
        let mut writer = &stream;
        writer.write_all(&mine.encode())?;
        peers[from] = Some(stream);
        missing -= 1;
    }
    Ok(())
}

fn hello(rank: usize, nodes: usize) -> io::Result<Hello> {
    Ok(Hello {
        rank: u32::try_from(rank).map_err(|_| einval())?,
        nodes: u32::try_from(nodes).map_err(|_| einval())?,
    })
}

/// Reads a hello; `EPROTO` if the peer sent something else.
fn read_hello(mut stream: &TcpStream) -> io::Result<Hello> {
    let mut bytes = [0u8; HELLO_LEN];
    stream.read_exact(&mut bytes)?;
    Hello::decode(&bytes).ok_or_else(|| io::Error::from_raw_os_error(libc::EPROTO))
}

fn einval() -> io::Error {
    io::Error::from_raw_os_error(libc::EINVAL)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU16, Ordering};

    /// Ports for one test's ranks: a base derived from the process id, so
    /// that concurrent test runs on the machine rarely clash, plus a
    /// counter, so that the tests of this process never do.
    fn fresh_ports(count: u16) -> u16 {
        static NEXT: AtomicU16 = AtomicU16::new(0);
        let base = 20_000 + (std::process::id() % 2_000) as u16 * 16;
        base + NEXT.fetch_add(count, Ordering::Relaxed)
    }

    fn local_hosts(nodes: u16) -> Vec<String> {
        let base = fresh_ports(nodes);
        (0..nodes)
            .map(|r| format!("127.0.0.1:{}", base + r))
            .collect()
    }

    /// Runs `body` on every rank of a local mesh, one thread each.
    fn run_mesh<T: Send>(nodes: u16, body: impl Fn(&mut TcpMesh) -> T + Sync) -> Vec<T> {
        let hosts = local_hosts(nodes);
        thread::scope(|scope| {
            let handles: Vec<_> = (0..nodes as usize)
                .map(|rank| {
                    let (hosts, body) = (&hosts, &body);
                    scope.spawn(move || {
                        let mut mesh = TcpMesh::connect(hosts, rank, 1).expect("connects");
                        body(&mut mesh)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("rank ran"))
                .collect()
        })
    }

    /// A part whose bytes depend on sender, destination and round.
    fn part(from: usize, to: usize, round: usize, len: usize) -> Vec<u8> {
        (0..len)
            .map(|i| (i * 7 + from * 31 + to * 13 + round) as u8)
            .collect()
    }

    #[test]
    fn parts_of_every_size_reach_their_rank() {
        const NODES: usize = 3;
        let sizes = [0usize, 1, 1000, 5 << 20, 0, 3 << 20];
        let results = run_mesh(NODES as u16, |mesh| {
            assert_eq!((mesh.nodes(), mesh.transport()), (NODES, "tcp"));
            let me = mesh.rank();
            for (round, &base) in sizes.iter().enumerate() {
                // Sizes differ per pair, empty parts included.
                let len = |from: usize, to: usize| {
                    if (from + to).is_multiple_of(3) {
                        0
                    } else {
                        base + from
                    }
                };
                let out = (0..NODES)
                    .map(|to| part(me, to, round, len(me, to)))
                    .collect();
                let incoming = mesh.all_to_all(out).expect("exchange");
                for (from, got) in incoming.iter().enumerate() {
                    assert!(
                        *got == part(from, me, round, len(from, me)),
                        "round {round} from {from}"
                    );
                }
                mesh.barrier().expect("barrier");
            }
            let sum = mesh.all_sum_u64(me as u64 + 1).expect("sum");
            assert_eq!(sum, 6);
            mesh.rank()
        });
        assert_eq!(results, vec![0, 1, 2]);
    }

    #[test]
    fn a_single_rank_needs_no_network() {
        let hosts = vec!["127.0.0.1:1".to_string()];
        let mut mesh = TcpMesh::connect(&hosts, 0, 1).expect("no listener needed");
        let got = mesh.all_to_all(vec![b"self".to_vec()]).expect("exchange");
        assert_eq!(got, vec![b"self".to_vec()]);
        mesh.barrier().expect("barrier");
        let err = mesh.all_to_all(Vec::new()).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EINVAL));
    }

    #[test]
    fn bad_ranks_and_hosts_are_einval() {
        let hosts = local_hosts(2);
        for (hosts, rank) in [
            (hosts.clone(), 2),
            (Vec::new(), 0),
            (vec![String::new(), hosts[1].clone()], 1),
            (vec!["127.0.0.1:port".into(), hosts[1].clone()], 1),
            (vec!["localhost:99999".into(), hosts[1].clone()], 1),
        ] {
            let err = TcpMesh::connect(&hosts, rank, 1).unwrap_err();
            assert_eq!(
                err.raw_os_error(),
                Some(libc::EINVAL),
                "{hosts:?} rank {rank}"
            );
        }
    }

    #[test]
    fn a_wrong_number_of_parts_is_einval() {
        let results = run_mesh(2, |mesh| {
            let err = mesh.all_to_all(vec![Vec::new()]).unwrap_err();
            mesh.barrier().expect("still usable");
            err.raw_os_error()
        });
        assert_eq!(results, vec![Some(libc::EINVAL); 2]);
    }

    #[test]
    fn a_peer_that_leaves_mid_exchange_is_an_error_not_a_hang() {
        let results = run_mesh(3, |mesh| {
            mesh.barrier().expect("barrier");
            if mesh.rank() == 2 {
                // Leaves without taking part: its sockets close.
                return None;
            }
            let out = vec![vec![1u8; 1 << 20]; 3];
            let first = mesh.all_to_all(out.clone()).map(drop);
            let later = mesh.all_to_all(out).map(drop);
            Some((first.is_err(), later.unwrap_err().raw_os_error()))
        });
        assert_eq!(results[2], None);
        for result in &results[..2] {
            assert_eq!(*result, Some((true, Some(libc::ENOTCONN))));
        }
    }

    #[test]
    fn a_rank_in_a_different_mesh_is_refused() {
        let hosts = local_hosts(3);
        let (lower, higher) = thread::scope(|scope| {
            let lower = scope.spawn(|| TcpMesh::connect(&hosts[..2], 0, 1).map(drop));
            // Thinks there are three ranks where rank 0 knows of two.
            let higher = scope.spawn(|| TcpMesh::connect(&hosts, 1, 1).map(drop));
            (lower.join().expect("ran"), higher.join().expect("ran"))
        });
        assert_eq!(lower.unwrap_err().raw_os_error(), Some(libc::EPROTO));
        assert!(higher.is_err());
    }

    #[test]
    fn hellos_round_trip_and_foreign_bytes_are_refused() {
        let hello = Hello { rank: 5, nodes: 9 };
        assert_eq!(Hello::decode(&hello.encode()), Some(hello));
        let mut foreign = hello.encode();
        foreign[0] ^= 1;
        assert_eq!(Hello::decode(&foreign), None);
    }

    #[test]
    fn host_entries_take_an_optional_port() {
        assert_eq!(endpoint("10.0.0.2", 7).ok(), "10.0.0.2:7".parse().ok());
        assert_eq!(endpoint("10.0.0.2:9", 7).ok(), "10.0.0.2:9".parse().ok());
        assert_eq!(endpoint("::1", 7).ok(), "[::1]:7".parse().ok());
        assert_eq!(endpoint("[::1]:9", 7).ok(), "[::1]:9".parse().ok());
        assert_eq!(
            endpoint(":9", 7).unwrap_err().raw_os_error(),
            Some(libc::EINVAL)
        );
    }
}
