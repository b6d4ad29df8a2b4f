//! End-to-end tests of joins: a real manager on a loopback port and fake
//! nodes that speak the wire protocol from threads.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::sync::{mpsc, Arc};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use lite::sys::MAX_NODES;

use crate::cm_wire::{Endpoint, Hello, Message, HEADER_LEN, MAX_FRAME_LEN};
use crate::frame::{read_message, write_message, ProtocolError};
use crate::manager::set_next_id;
use crate::{ClusterManager, ManagerConfig};

/// Upper bound on any single wait in these tests, so a bug fails instead
/// of hanging.
const TEST_TIMEOUT: Duration = Duration::from_secs(10);

const FAKE_MTU: u16 = 1024;

fn start_manager(config: ManagerConfig) -> (Arc<ClusterManager>, SocketAddr) {
    let manager = Arc::new(ClusterManager::bind("127.0.0.1:0", config).expect("bind loopback"));
    let address = manager.local_addr().expect("bound address");
    let runner = Arc::clone(&manager);
    thread::spawn(move || runner.run());
    (manager, address)
}

fn quick_config() -> ManagerConfig {
    ManagerConfig {
        io_timeout: Duration::from_secs(5),
        hello_timeout: Duration::from_secs(5),
    }
}

/// Queue pair number fake node `owner` reports for its QP towards `peer`;
/// unique per ordered pair so misrouted endpoints are caught.
fn fake_qpn(owner: u32, peer: u32) -> u32 {
    0x1000 * owner + peer
}

fn fake_psn(owner: u32, peer: u32) -> u32 {
    0x0050_0000 + fake_qpn(owner, peer)
}

/// IPv4-mapped GID of fake node `owner`, as RoCE would report it.
fn fake_gid(owner: u32) -> [u8; 16] {
    let last = u8::try_from(owner).expect("small node ids");
    Ipv4Addr::new(10, 0, 0, last).to_ipv6_mapped().octets()
}

fn fake_endpoint(owner: u32, peer: u32) -> Endpoint {
    Endpoint {
        peer,
        qpn: fake_qpn(owner, peer),
        psn: fake_psn(owner, peer),
        lid: 0,
        mtu: FAKE_MTU,
        gid: fake_gid(owner),
    }
}

/// How a fake node behaves.
#[derive(Debug, Clone, Copy)]
enum Behavior {
    /// Answers everything; leaves once connected to `peers` nodes.
    Cooperate { peers: usize },
    /// Leaves right after its own join completed.
    LeaveAfterJoin,
    /// Leaves right after receiving its id.
    LeaveAfterWelcome,
    /// Joins, then answers every later Connect with `status` and leaves.
    FailLaterConnects { status: i32 },
    /// Joins, then answers the next request with a frame with a bad magic.
    CorruptLaterAnswers,
    /// Joins, then ignores every request until the manager hangs up.
    SilentAfterJoin,
}

/// What a fake node saw.
#[derive(Debug, Default)]
struct FakeReport {
    id: u32,
    total_nodes: u32,
    prepared: BTreeSet<u32>,
    connected: BTreeMap<u32, Endpoint>,
}

struct FakeNode {
    joined: mpsc::Receiver<(u32, u32)>,
    thread: JoinHandle<FakeReport>,
}

impl FakeNode {
    fn spawn(manager: SocketAddr, behavior: Behavior) -> Self {
        let (joined_tx, joined) = mpsc::channel();
        let thread = thread::spawn(move || run_fake_node(manager, behavior, &joined_tx));
        FakeNode { joined, thread }
    }

    /// Waits for the join to complete; returns (id, total nodes).
    fn wait_joined(&self) -> (u32, u32) {
        self.joined
            .recv_timeout(TEST_TIMEOUT)
            .expect("fake node never completed its join")
    }

    fn finish(self) -> FakeReport {
        self.thread.join().expect("fake node failed")
    }
}

fn run_fake_node(
    manager: SocketAddr,
    behavior: Behavior,
    joined_tx: &mpsc::Sender<(u32, u32)>,
) -> FakeReport {
    let mut stream = TcpStream::connect(manager).expect("connect to manager");
    stream
        .set_read_timeout(Some(TEST_TIMEOUT))
        .expect("set timeout");
    let hello = Hello {
        gid: [0xfe; 16],
        lid: 0,
    };
    write_message(&mut stream, &Message::Hello(hello)).expect("send Hello");
    let mut report = FakeReport::default();
    match read_message(&mut stream).expect("read Welcome") {
        Message::Welcome { node_id } => report.id = node_id,
        other => panic!("expected Welcome, got {other:?}"),
    }
    if let Behavior::LeaveAfterWelcome = behavior {
        return report;
    }

    let id = report.id;
    let mut joined = false;
    loop {
        if let Behavior::Cooperate { peers } = behavior {
            if joined && report.connected.len() == peers {
                return report;
            }
        }
        let message = match read_message(&mut stream) {
            Ok(message) => message,
            Err(ProtocolError::Closed) if matches!(behavior, Behavior::SilentAfterJoin) => {
                return report;
            }
            Err(e) => panic!("fake node {id}: {e}"),
        };
        if joined {
            match behavior {
                Behavior::CorruptLaterAnswers => {
                    let mut garbage = [0u8; MAX_FRAME_LEN];
                    garbage[..HEADER_LEN].copy_from_slice(b"JUNKJUNKJUNK");
                    stream.write_all(&garbage).expect("send garbage");
                    return report;
                }
                Behavior::SilentAfterJoin => continue,
                _ => {}
            }
        }
        match message {
            Message::Prepare { peer } => {
                assert!(
                    report.prepared.insert(peer),
                    "node {id}: Prepare for {peer} twice"
                );
                write_message(&mut stream, &Message::QpInfo(fake_endpoint(id, peer)))
                    .expect("send QpInfo");
            }
            Message::Connect(endpoint) => {
                let peer = endpoint.peer;
                assert!(
                    report.prepared.contains(&peer),
                    "node {id}: Connect for {peer} without Prepare"
                );
                let status = match behavior {
                    Behavior::FailLaterConnects { status } if joined => status,
                    _ => 0,
                };
                write_message(&mut stream, &Message::Connected { peer, status })
                    .expect("send Connected");
                if status != 0 {
                    return report;
                }
                assert!(
                    report.connected.insert(peer, endpoint).is_none(),
                    "node {id}: Connect for {peer} twice"
                );
            }
            Message::JoinDone { total_nodes } => {
                assert!(!joined, "node {id}: second JoinDone");
                joined = true;
                report.total_nodes = total_nodes;
                joined_tx
                    .send((id, total_nodes))
                    .expect("test still waiting");
                if let Behavior::LeaveAfterJoin = behavior {
                    return report;
                }
            }
            other => panic!("node {id}: unexpected {other:?}"),
        }
    }
}

/// Asserts that `report` was connected to exactly `peers`, each with the
/// endpoint that peer created for it.
fn assert_connected_to(report: &FakeReport, peers: &[u32]) {
    let connected: Vec<u32> = report.connected.keys().copied().collect();
    assert_eq!(connected, peers, "peers of node {}", report.id);
    for (&peer, endpoint) in &report.connected {
        assert_eq!(
            *endpoint,
            Endpoint {
                peer,
                ..fake_endpoint(peer, report.id)
            },
            "endpoint node {} received for node {peer}",
            report.id
        );
    }
}

/// Expects the manager to answer with `Failure{errno}` and hang up.
fn assert_refused(stream: &mut TcpStream, errno: i32) {
    stream
        .set_read_timeout(Some(TEST_TIMEOUT))
        .expect("set timeout");
    assert_eq!(
        read_message(stream).expect("Failure frame"),
        Message::Failure { errno }
    );
    assert!(matches!(read_message(stream), Err(ProtocolError::Closed)));
}

#[test]
fn three_nodes_get_ids_in_join_order_and_a_full_mesh() {
    let (manager, address) = start_manager(quick_config());
    let mut nodes = Vec::new();
    for expected in 1..=3 {
        let node = FakeNode::spawn(address, Behavior::Cooperate { peers: 2 });
        assert_eq!(node.wait_joined(), (expected, expected));
        nodes.push(node);
    }
    assert_eq!(manager.live_nodes(), vec![1, 2, 3]);
    let reports: Vec<FakeReport> = nodes.into_iter().map(FakeNode::finish).collect();
    for report in &reports {
        let others: Vec<u32> = (1..=3).filter(|&id| id != report.id).collect();
        assert_connected_to(report, &others);
        assert_eq!(report.prepared.iter().copied().collect::<Vec<_>>(), others);
    }
    let ids: Vec<u32> = reports.iter().map(|r| r.id).collect();
    assert_eq!(ids, vec![1, 2, 3]);
    let totals: Vec<u32> = reports.iter().map(|r| r.total_nodes).collect();
    assert_eq!(totals, vec![1, 2, 3]);
}

#[test]
fn departed_nodes_are_skipped_and_ids_are_never_reused() {
    let (manager, address) = start_manager(quick_config());
    let first = FakeNode::spawn(address, Behavior::Cooperate { peers: 3 });
    assert_eq!(first.wait_joined(), (1, 1));
    let leaver = FakeNode::spawn(address, Behavior::LeaveAfterJoin);
    assert_eq!(leaver.wait_joined(), (2, 2));
    assert_connected_to(&leaver.finish(), &[1]);

    // Node 2 is gone: the join of node 3 notices and goes on without it.
    let third = FakeNode::spawn(address, Behavior::Cooperate { peers: 2 });
    assert_eq!(third.wait_joined(), (3, 2));
    assert_eq!(manager.live_nodes(), vec![1, 3]);

    // A newcomer that vanishes mid-join is abandoned, and its id is spent.
    let vanishing = FakeNode::spawn(address, Behavior::LeaveAfterWelcome).finish();
    assert_eq!(vanishing.id, 4);

    let fifth = FakeNode::spawn(address, Behavior::Cooperate { peers: 2 });
    assert_eq!(fifth.wait_joined(), (5, 3));
    assert_eq!(manager.live_nodes(), vec![1, 3, 5]);

    let first = first.finish();
    assert_connected_to(&first, &[2, 3, 5]);
    assert!(
        first.prepared.contains(&4),
        "node 1 was asked to prepare for node 4"
    );
    assert_connected_to(&third.finish(), &[1, 5]);
    assert_connected_to(&fifth.finish(), &[1, 3]);
}

fn assert_failing_peer_is_dropped(behavior: Behavior, config: ManagerConfig) {
    let (manager, address) = start_manager(config);
    let first = FakeNode::spawn(address, Behavior::Cooperate { peers: 2 });
    assert_eq!(first.wait_joined(), (1, 1));
    let failing = FakeNode::spawn(address, behavior);
    assert_eq!(failing.wait_joined(), (2, 2));
    let third = FakeNode::spawn(address, Behavior::Cooperate { peers: 1 });
    assert_eq!(third.wait_joined(), (3, 2));
    assert_eq!(manager.live_nodes(), vec![1, 3]);
    assert_connected_to(&failing.finish(), &[1]);
    assert_connected_to(&first.finish(), &[2, 3]);
    assert_connected_to(&third.finish(), &[1]);
}

#[test]
fn peer_reporting_a_failed_connect_is_dropped() {
    assert_failing_peer_is_dropped(
        Behavior::FailLaterConnects { status: -libc::EIO },
        quick_config(),
    );
}

#[test]
fn peer_sending_a_malformed_frame_is_dropped() {
    assert_failing_peer_is_dropped(Behavior::CorruptLaterAnswers, quick_config());
}

#[test]
fn peer_that_stops_answering_is_dropped_after_the_timeout() {
    let config = ManagerConfig {
        io_timeout: Duration::from_millis(300),
        ..quick_config()
    };
    assert_failing_peer_is_dropped(Behavior::SilentAfterJoin, config);
}

#[test]
fn bad_magic_is_rejected_without_spending_an_id() {
    let (manager, address) = start_manager(quick_config());
    let mut frame = [0u8; MAX_FRAME_LEN];
    let len = Message::Hello(Hello::default()).encode(&mut frame);
    frame[0] = b'X';
    let mut stream = TcpStream::connect(address).expect("connect");
    stream.write_all(&frame[..len]).expect("send bad frame");
    assert_refused(&mut stream, -libc::EPROTO);

    let node = FakeNode::spawn(address, Behavior::Cooperate { peers: 0 });
    assert_eq!(node.wait_joined(), (1, 1));
    assert_eq!(node.finish().id, 1);
    assert_eq!(manager.live_nodes(), vec![1]);
}

#[test]
fn join_must_start_with_hello() {
    let (manager, address) = start_manager(quick_config());
    let mut stream = TcpStream::connect(address).expect("connect");
    write_message(&mut stream, &Message::JoinDone { total_nodes: 1 }).expect("send");
    assert_refused(&mut stream, -libc::EPROTO);
    assert!(manager.live_nodes().is_empty());
}

#[test]
fn full_cluster_refuses_with_enospc() {
    let (manager, address) = start_manager(quick_config());
    set_next_id(&manager, MAX_NODES - 1);
    let last = FakeNode::spawn(address, Behavior::Cooperate { peers: 0 });
    assert_eq!(last.wait_joined(), (MAX_NODES - 1, 1));
    last.finish();

    let mut stream = TcpStream::connect(address).expect("connect");
    write_message(&mut stream, &Message::Hello(Hello::default())).expect("send Hello");
    assert_refused(&mut stream, -libc::ENOSPC);
    assert_eq!(manager.live_nodes(), vec![MAX_NODES - 1]);
}
