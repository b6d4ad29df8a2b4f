//! End-to-end tests of joins and membership: a real manager on a loopback
//! port and fake nodes that speak the wire protocol from threads, each
//! authenticated with the cluster's secret first.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use lite::sys::MAX_NODES;

use crate::cm_wire::{Endpoint, Hello, Message, Resume, HEADER_LEN, MAX_FRAME_LEN, NEVER_HEARD};
use crate::frame::{read_message, write_message, Channel, Inbound, Outbound, ProtocolError};
use crate::manager::set_next_id;
use crate::{ClusterManager, ClusterSecret, ManagerConfig};

/// Upper bound on any single wait in these tests, so a bug fails instead
/// of hanging.
const TEST_TIMEOUT: Duration = Duration::from_secs(10);

/// How often heartbeating fake nodes send a heartbeat; well below every
/// `dead_after` used here.
const FAKE_HEARTBEAT: Duration = Duration::from_millis(100);

/// `dead_after` of the tests that wait for a silence to be noticed: short
/// so that they run quickly, yet six heartbeats long.
const SHORT_DEAD_AFTER: Duration = Duration::from_millis(600);

/// `suspicion` of these tests' managers.
const SHORT_SUSPICION: Duration = Duration::from_millis(400);

/// Slack for the monitor's period and a busy machine when a death is
/// expected within some time.
const DETECTION_MARGIN: Duration = Duration::from_secs(1);

const FAKE_MTU: u16 = 1024;

/// The secret of the managers and fake nodes of these tests.
fn cluster_secret() -> ClusterSecret {
    ClusterSecret::new(b"join tests".to_vec()).expect("valid secret")
}

fn start_manager(config: ManagerConfig) -> (Arc<ClusterManager>, SocketAddr) {
    start_manager_with(config, cluster_secret())
}

fn start_manager_with(
    config: ManagerConfig,
    secret: ClusterSecret,
) -> (Arc<ClusterManager>, SocketAddr) {
    let manager =
        Arc::new(ClusterManager::bind("127.0.0.1:0", config, secret).expect("bind loopback"));
    let address = manager.local_addr().expect("bound address");
    let runner = Arc::clone(&manager);
    thread::spawn(move || runner.run());
    (manager, address)
}

fn quick_config() -> ManagerConfig {
    ManagerConfig {
        io_timeout: Duration::from_secs(5),
        hello_timeout: Duration::from_secs(5),
        // Longer than any test, so that fake nodes that do not heartbeat
        // stay members until they leave.
        dead_after: Duration::from_secs(60),
        suspicion: SHORT_SUSPICION,
        suspect_grace: Duration::from_secs(1),
        // Joins right after the start, as if no manager ran before.
        startup_grace: Some(Duration::ZERO),
    }
}

/// A manager that notices silence quickly.
fn short_silence_config() -> ManagerConfig {
    ManagerConfig {
        dead_after: SHORT_DEAD_AFTER,
        ..quick_config()
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

/// A port GID no fake node had before (in any test), for a `Hello`: the
/// manager refuses a GID a live node has and gives a known one its old id.
fn fresh_gid() -> [u8; 16] {
    static HOSTS: AtomicU32 = AtomicU32::new(1);
    let host = HOSTS.fetch_add(1, Ordering::SeqCst);
    let [.., high, low] = host.to_be_bytes();
    Ipv4Addr::new(10, 1, high, low).to_ipv6_mapped().octets()
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

/// Connects to the manager at `address` and authenticates as a node
/// holding `secret`.
fn authenticate_with(
    address: SocketAddr,
    secret: &ClusterSecret,
) -> Result<Channel<TcpStream>, ProtocolError> {
    let stream = TcpStream::connect(address).expect("connect to manager");
    stream
        .set_read_timeout(Some(TEST_TIMEOUT))
        .expect("set timeout");
    Channel::connect(stream, secret)
}

/// Connects to the manager at `address` as a node holding the secret.
fn authenticated(address: SocketAddr) -> Channel<TcpStream> {
    authenticate_with(address, &cluster_secret()).expect("authenticate with the manager")
}

/// The writing side of a fake node's connection, shared by the node and
/// heartbeat threads.
struct NodeWriter {
    stream: TcpStream,
    outbound: Outbound,
    /// When the node last sent a frame: the manager's silence clock for
    /// it starts no later than this.
    last_sent: Option<Instant>,
}

impl NodeWriter {
    fn send(&mut self, message: &Message) -> io::Result<()> {
        self.outbound.write(&mut self.stream, message)?;
        self.last_sent = Some(Instant::now());
        Ok(())
    }
}

/// The reading side of a fake node's connection.
struct NodeReader {
    stream: TcpStream,
    inbound: Inbound,
}

impl NodeReader {
    fn receive(&mut self) -> Result<Message, ProtocolError> {
        self.inbound.read(&mut self.stream)
    }
}

/// How a fake node behaves.
#[derive(Debug, Clone, Copy)]
enum Behavior {
    /// Answers everything until the test or the manager ends its connection.
    Cooperate,
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
    /// Joins, then answers the next `Prepare` with a `Leave` and waits for
    /// the manager to confirm and hang up.
    LeaveWhenPrepared,
}

/// How a fake node starts.
#[derive(Debug, Clone, Copy)]
struct Setup {
    behavior: Behavior,
    /// The id asked for in `Hello`.
    rejoin_id: u32,
    /// The GID sent in `Hello`; a [`fresh_gid`] when `None`.
    gid: Option<[u8; 16]>,
    /// Whether the node heartbeats, every [`FAKE_HEARTBEAT`], once joined.
    heartbeat: bool,
    /// Resume this membership instead of joining (`gid` and `rejoin_id`
    /// are then unused).
    resume: Option<Resume>,
    /// What the node answers to every probe: how long ago it heard from
    /// the suspect ([`NEVER_HEARD`] by default); `None`: no answer.
    heard_ms_ago: Option<u32>,
}

impl Setup {
    fn new(behavior: Behavior) -> Self {
        Setup {
            behavior,
            rejoin_id: 0,
            gid: None,
            heartbeat: false,
            resume: None,
            heard_ms_ago: Some(NEVER_HEARD),
        }
    }

    fn hearing_peers(self, heard_ms_ago: u32) -> Self {
        Setup {
            heard_ms_ago: Some(heard_ms_ago),
            ..self
        }
    }

    fn ignoring_probes(self) -> Self {
        Setup {
            heard_ms_ago: None,
            ..self
        }
    }

    fn resuming(self, resume: Resume) -> Self {
        Setup {
            resume: Some(resume),
            ..self
        }
    }

    fn heartbeating(self) -> Self {
        Setup {
            heartbeat: true,
            ..self
        }
    }

    fn rejoining(self, rejoin_id: u32) -> Self {
        Setup { rejoin_id, ..self }
    }

    fn with_gid(self, gid: [u8; 16]) -> Self {
        Setup {
            gid: Some(gid),
            ..self
        }
    }
}

/// What a fake node learnt when its join completed; for a node that
/// resumed, what it resumed as, `total_nodes` 0 and the epoch of
/// `Resumed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Joined {
    id: u32,
    incarnation: u32,
    total_nodes: u32,
    epoch: u32,
}

impl Joined {
    /// What the first version of the protocol told a node: its id and the
    /// size of the cluster.
    fn id_and_total(self) -> (u32, u32) {
        (self.id, self.total_nodes)
    }
}

/// A `NodeDead` a fake node received.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Death {
    node: u32,
    incarnation: u32,
    epoch: u32,
}

/// What a fake node saw.
#[derive(Debug, Default)]
struct FakeReport {
    id: u32,
    incarnation: u32,
    total_nodes: u32,
    /// Every `Prepare`, as (peer, incarnation), in arrival order.
    prepared: Vec<(u32, u32)>,
    /// Endpoints received by `Connect`, by (peer, incarnation).
    connected: BTreeMap<(u32, u32), Endpoint>,
    /// Every `NodeDead`, in arrival order.
    deaths: Vec<Death>,
    /// Every `Prepare` and `NodeDead`, in arrival order.
    timeline: Vec<Message>,
    /// Every `Probe`, as (peer, incarnation), in arrival order.
    probes: Vec<(u32, u32)>,
}

/// Where a fake node reports to the test while it runs.
struct Reporting {
    /// The end of the join.
    joined: Sender<Joined>,
    /// Every `NodeDead`.
    deaths: Sender<Death>,
    /// The epoch of every `HeartbeatAck`.
    acks: Sender<u32>,
}

/// A fake node running on its own thread, and what the test needs to
/// watch it and end it.
struct FakeNode {
    /// Whether the behaviour leaves on its own (the test must not end the
    /// connection before it has played its part).
    ends_by_itself: bool,
    /// Writing half, shared with the node and heartbeat threads.
    writer: Arc<Mutex<NodeWriter>>,
    /// Handle the test ends the connection with.
    control: TcpStream,
    /// Tells the heartbeat thread to stop.
    stop: Arc<AtomicBool>,
    /// See [`Reporting`].
    joined: Receiver<Joined>,
    /// See [`Reporting`].
    deaths: Receiver<Death>,
    /// See [`Reporting`].
    acks: Receiver<u32>,
    /// Returns what the node saw once its connection ends.
    thread: JoinHandle<FakeReport>,
}

impl FakeNode {
    fn spawn(manager: SocketAddr, behavior: Behavior) -> Self {
        Self::spawn_with(manager, Setup::new(behavior))
    }

    fn spawn_with(manager: SocketAddr, setup: Setup) -> Self {
        let setup = Setup {
            gid: Some(setup.gid.unwrap_or_else(fresh_gid)),
            ..setup
        };
        let ends_by_itself = matches!(
            setup.behavior,
            Behavior::LeaveAfterJoin
                | Behavior::LeaveAfterWelcome
                | Behavior::FailLaterConnects { .. }
                | Behavior::CorruptLaterAnswers
                | Behavior::LeaveWhenPrepared
        );
        let (stream, outbound, inbound) = authenticated(manager).into_parts();
        let control = stream.try_clone().expect("clone stream");
        let writer = Arc::new(Mutex::new(NodeWriter {
            stream: stream.try_clone().expect("clone stream"),
            outbound,
            last_sent: None,
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let (joined_tx, joined) = mpsc::channel();
        let (deaths_tx, deaths) = mpsc::channel();
        let (acks_tx, acks) = mpsc::channel();
        let reporting = Reporting {
            joined: joined_tx,
            deaths: deaths_tx,
            acks: acks_tx,
        };
        let node_writer = Arc::clone(&writer);
        let node_stop = Arc::clone(&stop);
        let mut reading = NodeReader { stream, inbound };
        let thread = thread::spawn(move || {
            let report = run_fake_node(&mut reading, node_writer, setup, &node_stop, &reporting);
            // The test holds clones of the stream: end the connection here,
            // so that a node leaving is seen at once.
            let _ = reading.stream.shutdown(Shutdown::Both);
            report
        });
        FakeNode {
            ends_by_itself,
            writer,
            control,
            stop,
            joined,
            deaths,
            acks,
            thread,
        }
    }

    /// Waits for the join to complete.
    fn wait_joined(&self) -> Joined {
        self.joined
            .recv_timeout(TEST_TIMEOUT)
            .expect("fake node never completed its join")
    }

    /// Waits up to `within` for the next `NodeDead`.
    fn wait_death(&self, within: Duration) -> Option<Death> {
        match self.deaths.recv_timeout(within) {
            Ok(death) => Some(death),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => panic!("fake node stopped"),
        }
    }

    /// Asserts that no `NodeDead` arrives within `within`.
    fn assert_no_death(&self, within: Duration) {
        assert_eq!(self.wait_death(within), None, "unexpected NodeDead");
    }

    /// Waits for a `HeartbeatAck` carrying `epoch`.
    fn wait_ack(&self, epoch: u32) {
        let deadline = Instant::now() + TEST_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.acks.recv_timeout(left) {
                Ok(acked) if acked == epoch => return,
                Ok(_) => {}
                Err(e) => panic!("no HeartbeatAck with epoch {epoch}: {e}"),
            }
        }
    }

    /// Waits for the node's connection to end, as it does when the manager
    /// hangs up.
    fn wait_disconnected(&self) {
        let deadline = Instant::now() + TEST_TIMEOUT;
        while !self.thread.is_finished() {
            assert!(
                Instant::now() < deadline,
                "the manager never ended the connection"
            );
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// Stops the heartbeats without closing the connection, as when the
    /// connection broke on the node's side only.
    /// Stops the heartbeats; returns when the node last sent a frame, the
    /// start of its silence. No heartbeat follows: the heartbeat thread
    /// looks at `stop` under the writer's lock.
    fn stop_heartbeats(&self) -> Instant {
        let writer = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        self.stop.store(true, Ordering::SeqCst);
        writer.last_sent.unwrap_or_else(Instant::now)
    }

    /// When the node last sent a frame: a lower bound for when the
    /// manager's silence clock for it started.
    fn last_sent(&self) -> Instant {
        let writer = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        writer.last_sent.unwrap_or_else(Instant::now)
    }

    /// Sends `Leave` as the node that joined as `joined`.
    fn leave(&self, joined: Joined) {
        self.send(&Message::Leave {
            node_id: joined.id,
            incarnation: joined.incarnation,
        });
    }

    /// Sends a frame as the node.
    fn send(&self, message: &Message) {
        let mut writer = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        writer.send(message).expect("send as fake node");
    }

    /// Ends the node (unless it leaves on its own) and returns what it saw.
    fn finish(self) -> FakeReport {
        self.stop.store(true, Ordering::SeqCst);
        if !self.ends_by_itself {
            // Already closed if the manager ended it.
            let _ = self.control.shutdown(Shutdown::Both);
        }
        self.thread.join().expect("fake node failed")
    }
}

/// Whether a read failed because the connection ended, as it does when the
/// test or the manager ends it.
fn connection_ended(e: &ProtocolError) -> bool {
    match e {
        ProtocolError::Closed => true,
        ProtocolError::Io(e) => e.kind() == io::ErrorKind::ConnectionReset,
        _ => false,
    }
}

/// Sends a heartbeat every [`FAKE_HEARTBEAT`] until told to stop or the
/// connection fails.
fn send_heartbeats(writer: &Mutex<NodeWriter>, id: u32, applied: &AtomicU32, stop: &AtomicBool) {
    loop {
        let heartbeat = Message::Heartbeat {
            node_id: id,
            epoch: applied.load(Ordering::SeqCst),
        };
        let mut writer = writer.lock().unwrap_or_else(PoisonError::into_inner);
        if stop.load(Ordering::SeqCst) || writer.send(&heartbeat).is_err() {
            return;
        }
        drop(writer);
        thread::sleep(FAKE_HEARTBEAT);
    }
}

/// Plays a node on `reading` (and `writer`, a clone of it) as `setup`
/// says, until the connection ends or the behaviour leaves.
fn run_fake_node(
    reading: &mut NodeReader,
    writer: Arc<Mutex<NodeWriter>>,
    setup: Setup,
    stop: &Arc<AtomicBool>,
    reporting: &Reporting,
) -> FakeReport {
    let send = |message: &Message| {
        let mut writer = writer.lock().unwrap_or_else(PoisonError::into_inner);
        writer.send(message)
    };
    // Newest epoch received, for heartbeats.
    let applied = Arc::new(AtomicU32::new(0));
    let start_heartbeats = |id: u32| {
        if setup.heartbeat {
            let writer = Arc::clone(&writer);
            let applied = Arc::clone(&applied);
            let stop = Arc::clone(stop);
            thread::spawn(move || send_heartbeats(&writer, id, &applied, &stop));
        }
    };
    let behavior = setup.behavior;
    let mut report = FakeReport::default();
    let mut joined = false;
    if let Some(resume) = setup.resume {
        send(&Message::Resume(resume)).expect("send Resume");
        let epoch = match reading.receive().expect("read Resumed") {
            Message::Resumed { epoch } => epoch,
            other => panic!("expected Resumed, got {other:?}"),
        };
        report.id = resume.node_id;
        report.incarnation = resume.incarnation;
        joined = true;
        applied.store(epoch, Ordering::SeqCst);
        let _ = reporting.joined.send(Joined {
            id: resume.node_id,
            incarnation: resume.incarnation,
            total_nodes: 0,
            epoch,
        });
        start_heartbeats(resume.node_id);
    } else {
        let hello = Hello {
            gid: setup.gid.expect("spawn_with picks a GID"),
            lid: 0,
            rejoin_id: setup.rejoin_id,
        };
        send(&Message::Hello(hello)).expect("send Hello");
        match reading.receive().expect("read Welcome") {
            Message::Welcome {
                node_id,
                incarnation,
            } => {
                report.id = node_id;
                report.incarnation = incarnation;
            }
            other => panic!("expected Welcome, got {other:?}"),
        }
        if let Behavior::LeaveAfterWelcome = behavior {
            return report;
        }
    }

    let id = report.id;
    // Incarnation of each peer as of its latest Prepare.
    let mut incarnations = BTreeMap::new();
    loop {
        let message = match reading.receive() {
            Ok(message) => message,
            Err(e) if connection_ended(&e) => return report,
            Err(e) => panic!("fake node {id}: {e}"),
        };
        if let Message::Prepare { .. } | Message::NodeDead { .. } = message {
            report.timeline.push(message);
        }
        // Membership news is recorded whatever the behaviour; the test may
        // have stopped listening, which is fine.
        match message {
            Message::NodeDead {
                node,
                incarnation,
                epoch,
            } => {
                assert!(joined, "node {id}: NodeDead before JoinDone");
                let death = Death {
                    node,
                    incarnation,
                    epoch,
                };
                report.deaths.push(death);
                applied.fetch_max(epoch, Ordering::SeqCst);
                let _ = reporting.deaths.send(death);
                continue;
            }
            Message::HeartbeatAck { epoch } => {
                let _ = reporting.acks.send(epoch);
                continue;
            }
            Message::Probe { peer, incarnation } => {
                report.probes.push((peer, incarnation));
                let answer = setup
                    .heard_ms_ago
                    .filter(|_| !matches!(behavior, Behavior::SilentAfterJoin));
                if let Some(heard_ms_ago) = answer {
                    send(&Message::ProbeReply {
                        peer,
                        incarnation,
                        heard_ms_ago,
                    })
                    .expect("send ProbeReply");
                }
                continue;
            }
            _ => {}
        }
        if joined {
            match behavior {
                Behavior::CorruptLaterAnswers => {
                    let mut garbage = [0u8; MAX_FRAME_LEN];
                    garbage[..HEADER_LEN].copy_from_slice(b"JUNKJUNKJUNK");
                    let mut writer = writer.lock().unwrap_or_else(PoisonError::into_inner);
                    writer.stream.write_all(&garbage).expect("send garbage");
                    return report;
                }
                Behavior::SilentAfterJoin => continue,
                Behavior::LeaveWhenPrepared => {
                    if let Message::Prepare { .. } = message {
                        send(&Message::Leave {
                            node_id: id,
                            incarnation: report.incarnation,
                        })
                        .expect("send Leave");
                        continue;
                    }
                }
                _ => {}
            }
        }
        match message {
            Message::Prepare { peer, incarnation } => {
                assert!(
                    !report.prepared.contains(&(peer, incarnation)),
                    "node {id}: Prepare for {peer} (incarnation {incarnation}) twice"
                );
                report.prepared.push((peer, incarnation));
                incarnations.insert(peer, incarnation);
                send(&Message::QpInfo(fake_endpoint(id, peer))).expect("send QpInfo");
            }
            Message::Connect(endpoint) => {
                let peer = endpoint.peer;
                let Some(&incarnation) = incarnations.get(&peer) else {
                    panic!("node {id}: Connect for {peer} without Prepare");
                };
                let status = match behavior {
                    Behavior::FailLaterConnects { status } if joined => status,
                    _ => 0,
                };
                send(&Message::Connected { peer, status }).expect("send Connected");
                if status != 0 {
                    return report;
                }
                assert!(
                    report
                        .connected
                        .insert((peer, incarnation), endpoint)
                        .is_none(),
                    "node {id}: Connect for {peer} (incarnation {incarnation}) twice"
                );
            }
            Message::JoinDone { total_nodes, epoch } => {
                assert!(!joined, "node {id}: second JoinDone");
                joined = true;
                report.total_nodes = total_nodes;
                applied.fetch_max(epoch, Ordering::SeqCst);
                let _ = reporting.joined.send(Joined {
                    id,
                    incarnation: report.incarnation,
                    total_nodes,
                    epoch,
                });
                if let Behavior::LeaveAfterJoin = behavior {
                    return report;
                }
                start_heartbeats(id);
            }
            other => panic!("node {id}: unexpected {other:?}"),
        }
    }
}

/// Asserts that `report` was connected to exactly `peers` (all of them
/// first incarnations), each with the endpoint that peer created for it.
fn assert_connected_to(report: &FakeReport, peers: &[u32]) {
    let expected: Vec<(u32, u32)> = peers.iter().map(|&peer| (peer, 1)).collect();
    assert_connected_to_incarnations(report, &expected);
}

/// Asserts that `report` was connected to exactly `peers`, given as (id,
/// incarnation), each with the endpoint that peer created for it.
fn assert_connected_to_incarnations(report: &FakeReport, peers: &[(u32, u32)]) {
    let connected: Vec<(u32, u32)> = report.connected.keys().copied().collect();
    assert_eq!(connected, peers, "peers of node {}", report.id);
    for (&(peer, _), endpoint) in &report.connected {
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

/// A `Prepare` for `peer`, whose incarnation is `incarnation`.
fn prepare(peer: u32, incarnation: u32) -> Message {
    Message::Prepare { peer, incarnation }
}

/// Expects the manager to answer with `Failure{errno}` and hang up.
fn assert_refused(channel: &mut Channel<TcpStream>, errno: i32) {
    assert_eq!(
        channel.receive().expect("Failure frame"),
        Message::Failure { errno }
    );
    assert_closed(channel);
}

/// Expects the manager to hang up without another frame.
fn assert_closed(channel: &mut Channel<TcpStream>) {
    let end = channel.receive();
    assert!(
        matches!(&end, Err(e) if connection_ended(e)),
        "expected the end of the connection, got {end:?}"
    );
}

#[test]
fn three_nodes_get_ids_in_join_order_and_a_full_mesh() {
    let (manager, address) = start_manager(quick_config());
    let mut nodes = Vec::new();
    for expected in 1..=3 {
        let node = FakeNode::spawn(address, Behavior::Cooperate);
        assert_eq!(
            node.wait_joined(),
            Joined {
                id: expected,
                incarnation: 1,
                total_nodes: expected,
                epoch: expected,
            }
        );
        nodes.push(node);
    }
    assert_eq!(manager.live_nodes(), vec![1, 2, 3]);
    assert_eq!(manager.epoch(), 3);
    let reports: Vec<FakeReport> = nodes.into_iter().map(FakeNode::finish).collect();
    for report in &reports {
        let others: Vec<u32> = (1..=3).filter(|&id| id != report.id).collect();
        assert_connected_to(report, &others);
        let prepared: Vec<(u32, u32)> = others.iter().map(|&peer| (peer, 1)).collect();
        assert_eq!(report.prepared, prepared);
    }
    let ids: Vec<u32> = reports.iter().map(|r| r.id).collect();
    assert_eq!(ids, vec![1, 2, 3]);
    let totals: Vec<u32> = reports.iter().map(|r| r.total_nodes).collect();
    assert_eq!(totals, vec![1, 2, 3]);
}

#[test]
fn departed_nodes_are_announced_and_new_gids_get_new_ids() {
    let (manager, address) = start_manager(quick_config());
    let first = FakeNode::spawn(address, Behavior::Cooperate);
    assert_eq!(first.wait_joined().id_and_total(), (1, 1));
    let leaver = FakeNode::spawn(address, Behavior::LeaveAfterJoin);
    assert_eq!(leaver.wait_joined().id_and_total(), (2, 2));
    assert_connected_to(&leaver.finish(), &[1]);
    let gone = Death {
        node: 2,
        incarnation: 1,
        epoch: 3,
    };
    assert_eq!(first.wait_death(TEST_TIMEOUT), Some(gone));

    let third = FakeNode::spawn(address, Behavior::Cooperate);
    assert_eq!(third.wait_joined().id_and_total(), (3, 2));
    assert_eq!(manager.live_nodes(), vec![1, 3]);

    // A newcomer that vanishes mid-join is abandoned, and its id is spent.
    // Node 1 was already asked to prepare for it, so every member hears
    // that it is dead.
    let vanishing = FakeNode::spawn(address, Behavior::LeaveAfterWelcome).finish();
    assert_eq!(vanishing.id, 4);
    let abandoned = Death {
        node: 4,
        incarnation: 1,
        epoch: 5,
    };
    assert_eq!(first.wait_death(TEST_TIMEOUT), Some(abandoned));
    assert_eq!(third.wait_death(TEST_TIMEOUT), Some(abandoned));

    let fifth = FakeNode::spawn(address, Behavior::Cooperate);
    let joined = fifth.wait_joined();
    assert_eq!(joined.id_and_total(), (5, 3));
    assert_eq!(joined.epoch, 6);
    assert_eq!(manager.live_nodes(), vec![1, 3, 5]);

    let first = first.finish();
    assert_connected_to(&first, &[2, 3, 5]);
    assert!(
        first.prepared.contains(&(4, 1)),
        "node 1 was asked to prepare for node 4"
    );
    assert_connected_to(&third.finish(), &[1, 5]);
    assert_connected_to(&fifth.finish(), &[1, 3]);
}

fn assert_failing_peer_is_dropped(behavior: Behavior, config: ManagerConfig) {
    let (manager, address) = start_manager(config);
    let first = FakeNode::spawn(address, Behavior::Cooperate);
    assert_eq!(first.wait_joined().id_and_total(), (1, 1));
    let failing = FakeNode::spawn(address, behavior);
    assert_eq!(failing.wait_joined().id_and_total(), (2, 2));
    let third = FakeNode::spawn(address, Behavior::Cooperate);
    let joined = third.wait_joined();
    assert_eq!(joined.id_and_total(), (3, 2));
    assert_eq!(manager.live_nodes(), vec![1, 3]);
    // The death found during the join is announced after it, with a newer
    // epoch, to the newcomer too.
    let dropped = Death {
        node: 2,
        incarnation: 1,
        epoch: joined.epoch + 1,
    };
    assert_eq!(first.wait_death(TEST_TIMEOUT), Some(dropped));
    assert_eq!(third.wait_death(TEST_TIMEOUT), Some(dropped));
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
    let mut channel = authenticated(address);
    channel
        .stream_mut()
        .write_all(&frame[..len])
        .expect("send bad frame");
    assert_refused(&mut channel, -libc::EPROTO);

    let node = FakeNode::spawn(address, Behavior::Cooperate);
    assert_eq!(node.wait_joined().id_and_total(), (1, 1));
    assert_eq!(manager.live_nodes(), vec![1]);
    assert_eq!(node.finish().id, 1);
}

#[test]
fn join_must_start_with_hello() {
    let (manager, address) = start_manager(quick_config());
    let mut channel = authenticated(address);
    let done = Message::JoinDone {
        total_nodes: 1,
        epoch: 1,
    };
    channel.send(&done).expect("send");
    assert_refused(&mut channel, -libc::EPROTO);
    assert!(manager.live_nodes().is_empty());
    assert_eq!(manager.epoch(), 0);
}

#[test]
fn full_cluster_refuses_with_enospc() {
    let (manager, address) = start_manager(quick_config());
    set_next_id(&manager, MAX_NODES - 1);
    let last = FakeNode::spawn(address, Behavior::Cooperate);
    assert_eq!(last.wait_joined().id_and_total(), (MAX_NODES - 1, 1));

    let mut channel = authenticated(address);
    channel
        .send(&Message::Hello(Hello::default()))
        .expect("send Hello");
    assert_refused(&mut channel, -libc::ENOSPC);
    assert_eq!(manager.live_nodes(), vec![MAX_NODES - 1]);
    last.finish();
}

#[test]
fn a_node_with_another_secret_is_refused_with_ekeyrejected_and_spends_no_id() {
    let (manager, address) = start_manager(quick_config());
    let other = ClusterSecret::new(b"another cluster".to_vec()).expect("valid secret");
    match authenticate_with(address, &other) {
        Err(e @ ProtocolError::Refused { .. }) => assert_eq!(e.errno(), -libc::EKEYREJECTED),
        Err(e) => panic!("expected a refusal, got {e}"),
        Ok(_) => panic!("a node with another secret was let in"),
    }

    // By hand: the refusal carries no tag, and the connection ends.
    let mut stream = TcpStream::connect(address).expect("connect");
    stream
        .set_read_timeout(Some(TEST_TIMEOUT))
        .expect("set timeout");
    let Message::Challenge { nonce } = read_message(&mut stream).expect("Challenge") else {
        panic!("the manager must open with a Challenge");
    };
    let guess = Message::Auth {
        nonce,
        proof: [0x5a; 32],
    };
    write_message(&mut stream, &guess).expect("send Auth");
    assert_eq!(
        read_message(&mut stream).expect("Failure frame"),
        Message::Failure {
            errno: -libc::EKEYREJECTED
        }
    );
    assert!(matches!(
        read_message(&mut stream),
        Err(ProtocolError::Closed)
    ));

    assert!(manager.live_nodes().is_empty());
    assert_eq!(manager.epoch(), 0);
    let node = FakeNode::spawn(address, Behavior::Cooperate);
    assert_eq!(node.wait_joined().id_and_total(), (1, 1));
    node.finish();
}

#[test]
fn a_node_that_skips_the_authentication_is_dropped() {
    let (manager, address) = start_manager(quick_config());
    let mut stream = TcpStream::connect(address).expect("connect");
    stream
        .set_read_timeout(Some(TEST_TIMEOUT))
        .expect("set timeout");
    assert_eq!(
        read_message(&mut stream).expect("Challenge").kind(),
        crate::cm_wire::Kind::Challenge
    );
    let hello = Message::Hello(Hello {
        gid: fresh_gid(),
        lid: 0,
        rejoin_id: 0,
    });
    write_message(&mut stream, &hello).expect("send Hello");
    assert!(matches!(
        read_message(&mut stream),
        Err(ProtocolError::Closed)
    ));
    assert!(manager.live_nodes().is_empty());
}

/// Joins as the node after members `peers` over `channel`, answering the
/// pairing with fake endpoints; what the join told.
fn join_by_hand(channel: &mut Channel<TcpStream>, peers: &[u32]) -> Joined {
    let hello = Hello {
        gid: fresh_gid(),
        lid: 0,
        rejoin_id: 0,
    };
    channel.send(&Message::Hello(hello)).expect("send Hello");
    let Message::Welcome {
        node_id: id,
        incarnation,
    } = channel.receive().expect("Welcome")
    else {
        panic!("expected Welcome");
    };
    for &peer in peers {
        assert!(matches!(
            channel.receive().expect("Prepare"),
            Message::Prepare { peer: asked, .. } if asked == peer
        ));
        channel
            .send(&Message::QpInfo(fake_endpoint(id, peer)))
            .expect("send QpInfo");
        assert!(matches!(
            channel.receive().expect("Connect"),
            Message::Connect(endpoint) if endpoint.peer == peer
        ));
        channel
            .send(&Message::Connected { peer, status: 0 })
            .expect("send Connected");
    }
    let Message::JoinDone { total_nodes, epoch } = channel.receive().expect("JoinDone") else {
        panic!("expected JoinDone");
    };
    Joined {
        id,
        incarnation,
        total_nodes,
        epoch,
    }
}

#[test]
fn a_tampered_frame_closes_the_connection() {
    let (manager, address) = start_manager(quick_config());

    // A Hello whose GID was changed on the way: no answer, no id spent.
    let mut channel = authenticated(address);
    let mut hello = channel.seal(&Message::Hello(Hello {
        gid: fresh_gid(),
        lid: 0,
        rejoin_id: 0,
    }));
    hello[HEADER_LEN] ^= 0x01;
    channel.stream_mut().write_all(&hello).expect("send");
    assert_closed(&mut channel);
    assert!(manager.live_nodes().is_empty());
    assert_eq!(manager.epoch(), 0);

    // A member's heartbeat whose epoch was changed: its connection ends,
    // so it is dead to the others.
    let observer = FakeNode::spawn(address, Behavior::Cooperate);
    assert_eq!(observer.wait_joined().id, 1);
    let mut member = authenticated(address);
    let joined = join_by_hand(&mut member, &[1]);
    assert_eq!(joined.id_and_total(), (2, 2));
    let mut heartbeat = member.seal(&Message::Heartbeat {
        node_id: 2,
        epoch: joined.epoch,
    });
    heartbeat[HEADER_LEN + 4] ^= 0x80;
    member.stream_mut().write_all(&heartbeat).expect("send");
    assert_closed(&mut member);
    assert_eq!(
        observer.wait_death(TEST_TIMEOUT),
        Some(Death {
            node: 2,
            incarnation: 1,
            epoch: joined.epoch + 1,
        })
    );
    assert_eq!(manager.live_nodes(), vec![1]);
    observer.finish();
}

#[test]
fn a_replayed_frame_closes_the_connection() {
    let (manager, address) = start_manager(quick_config());
    let observer = FakeNode::spawn(address, Behavior::Cooperate);
    assert_eq!(observer.wait_joined().id, 1);
    let mut member = authenticated(address);
    let joined = join_by_hand(&mut member, &[1]);
    let heartbeat = member.seal(&Message::Heartbeat {
        node_id: joined.id,
        epoch: joined.epoch,
    });
    member.stream_mut().write_all(&heartbeat).expect("send");
    // The epoch it carries may still be the one before this join: what
    // matters here is that the first copy is answered.
    assert!(matches!(
        member.receive().expect("HeartbeatAck"),
        Message::HeartbeatAck { .. }
    ));
    // The very same bytes again.
    member
        .stream_mut()
        .write_all(&heartbeat)
        .expect("send again");
    assert_closed(&mut member);
    assert_eq!(
        observer.wait_death(TEST_TIMEOUT),
        Some(Death {
            node: joined.id,
            incarnation: 1,
            epoch: joined.epoch + 1,
        })
    );
    assert_eq!(manager.live_nodes(), vec![1]);
    observer.finish();
}

#[test]
fn heartbeating_member_stays_alive_past_dead_after() {
    let (manager, address) = start_manager(short_silence_config());
    let node = FakeNode::spawn_with(address, Setup::new(Behavior::Cooperate).heartbeating());
    assert_eq!(node.wait_joined().id_and_total(), (1, 1));
    thread::sleep(SHORT_DEAD_AFTER * 3);
    assert_eq!(manager.live_nodes(), vec![1]);
    assert_eq!(manager.epoch(), 1);
    assert!(node.finish().deaths.is_empty());
}

#[test]
fn heartbeat_ack_carries_the_current_epoch() {
    let (manager, address) = start_manager(quick_config());
    let first = FakeNode::spawn_with(address, Setup::new(Behavior::Cooperate).heartbeating());
    assert_eq!(first.wait_joined().epoch, 1);
    first.wait_ack(1);

    let second = FakeNode::spawn(address, Behavior::Cooperate);
    assert_eq!(second.wait_joined().epoch, 2);
    first.wait_ack(2);

    second.finish();
    assert_eq!(
        first.wait_death(TEST_TIMEOUT),
        Some(Death {
            node: 2,
            incarnation: 1,
            epoch: 3,
        })
    );
    first.wait_ack(3);
    assert_eq!(manager.epoch(), 3);
    first.finish();
}

#[test]
fn silent_member_is_declared_dead_and_every_survivor_told_once() {
    let (manager, address) = start_manager(short_silence_config());
    let beating = Setup::new(Behavior::Cooperate).heartbeating();
    let first = FakeNode::spawn_with(address, beating);
    assert_eq!(first.wait_joined().id, 1);
    let second = FakeNode::spawn_with(address, beating);
    assert_eq!(second.wait_joined().id, 2);
    let silent = FakeNode::spawn(address, Behavior::Cooperate);
    let joined = silent.wait_joined();
    let silent_since = silent.last_sent();
    assert_eq!(joined.id_and_total(), (3, 3));

    let expected = Death {
        node: 3,
        incarnation: 1,
        epoch: joined.epoch + 1,
    };
    let death = first.wait_death(SHORT_DEAD_AFTER + DETECTION_MARGIN);
    let noticed_after = silent_since.elapsed();
    assert_eq!(death, Some(expected));
    assert!(
        noticed_after >= SHORT_DEAD_AFTER / 2,
        "declared dead after only {noticed_after:?} of silence"
    );
    assert_eq!(second.wait_death(TEST_TIMEOUT), Some(expected));
    assert_eq!(manager.live_nodes(), vec![1, 2]);
    assert_eq!(manager.epoch(), expected.epoch);

    // Exactly one announcement: nothing more while the survivors go on
    // heartbeating.
    first.assert_no_death(SHORT_DEAD_AFTER);
    second.assert_no_death(Duration::ZERO);
    assert_eq!(manager.live_nodes(), vec![1, 2]);

    // The manager hung up on the silent node, which ends it.
    let silent = silent.finish();
    assert_eq!(silent.id, 3);
    assert!(silent.deaths.is_empty());
    first.finish();
    second.finish();
}

#[test]
fn a_silent_member_is_suspected_and_its_peers_asked_before_it_is_declared_dead() {
    let (_manager, address) = start_manager(short_silence_config());
    let observer = FakeNode::spawn_with(address, Setup::new(Behavior::Cooperate).heartbeating());
    assert_eq!(observer.wait_joined().id, 1);
    let silent = FakeNode::spawn(address, Behavior::Cooperate);
    let joined = silent.wait_joined();
    let silent_since = silent.last_sent();

    // Suspected after `dead_after`, dead only after the suspicion too.
    let earliest_death = silent_since + SHORT_DEAD_AFTER + SHORT_SUSPICION;
    observer.assert_no_death(earliest_death.saturating_duration_since(Instant::now()));
    let death = observer.wait_death(DETECTION_MARGIN);
    assert_eq!(
        death,
        Some(Death {
            node: 2,
            incarnation: 1,
            epoch: joined.epoch + 1,
        })
    );
    assert!(silent_since.elapsed() >= SHORT_DEAD_AFTER + SHORT_SUSPICION);
    let report = observer.finish();
    assert!(
        report.probes.first() == Some(&(2, 1)),
        "the observer was asked about the suspect: {:?}",
        report.probes
    );
    silent.finish();
}

#[test]
fn a_frame_from_a_suspect_refutes_the_suspicion() {
    let (manager, address) = start_manager(short_silence_config());
    let observer = FakeNode::spawn_with(address, Setup::new(Behavior::Cooperate).heartbeating());
    assert_eq!(observer.wait_joined().id, 1);
    let slow = FakeNode::spawn(address, Behavior::Cooperate);
    let joined = slow.wait_joined();
    thread::sleep(SHORT_DEAD_AFTER + SHORT_SUSPICION / 2);
    // Late, within the suspicion: one heartbeat keeps it a member.
    slow.send(&Message::Heartbeat {
        node_id: joined.id,
        epoch: joined.epoch,
    });
    observer.assert_no_death(SHORT_DEAD_AFTER);
    assert_eq!(manager.live_nodes(), vec![1, 2]);
    // Silent again from then on: suspected anew, and dead.
    assert_eq!(
        observer
            .wait_death(SHORT_SUSPICION + DETECTION_MARGIN)
            .map(|d| d.node),
        Some(2)
    );
    observer.finish();
    slow.finish();
}

#[test]
fn a_suspect_its_peers_hear_from_stays_a_member_for_longer() {
    let (manager, address) = start_manager(short_silence_config());
    let hearing = Setup::new(Behavior::Cooperate)
        .heartbeating()
        .hearing_peers(10);
    let observer = FakeNode::spawn_with(address, hearing);
    assert_eq!(observer.wait_joined().id, 1);
    let unheard = FakeNode::spawn(address, Behavior::Cooperate);
    assert_eq!(unheard.wait_joined().id, 2);
    let silent_since = unheard.last_sent();

    // Twice the limit of a suspect nobody hears from: still a member.
    observer.assert_no_death((SHORT_DEAD_AFTER + SHORT_SUSPICION) * 2);
    assert_eq!(manager.live_nodes(), vec![1, 2]);
    // Yet not for ever.
    let limit = (SHORT_DEAD_AFTER + SHORT_SUSPICION) * 3;
    assert_eq!(
        observer
            .wait_death(limit + DETECTION_MARGIN)
            .map(|d| d.node),
        Some(2)
    );
    assert!(silent_since.elapsed() >= limit);
    observer.finish();
    unheard.finish();
}

#[test]
fn dead_after_doubles_while_half_of_the_members_are_late() {
    let (manager, address) = start_manager(short_silence_config());
    let observer = FakeNode::spawn_with(address, Setup::new(Behavior::Cooperate).heartbeating());
    assert_eq!(observer.wait_joined().id, 1);
    // Late nodes answer no probe either: each would show the other lives.
    let late = Setup::new(Behavior::Cooperate)
        .heartbeating()
        .ignoring_probes();
    let first = FakeNode::spawn_with(address, late);
    assert_eq!(first.wait_joined().id, 2);
    let second = FakeNode::spawn_with(address, late);
    assert_eq!(second.wait_joined().id, 3);
    let silent_since = first.stop_heartbeats().min(second.stop_heartbeats());

    // Two of three late at once: the host is slow, not the nodes.
    observer.assert_no_death(SHORT_DEAD_AFTER * 2);
    assert_eq!(manager.live_nodes(), vec![1, 2, 3]);
    let first_death = observer.wait_death(SHORT_SUSPICION + DETECTION_MARGIN);
    assert!(matches!(first_death, Some(Death { node: 2 | 3, .. })));
    assert!(silent_since.elapsed() >= SHORT_DEAD_AFTER * 2 + SHORT_SUSPICION);
    observer.finish();
    first.finish();
    second.finish();
}

#[test]
fn a_shorter_dead_after_set_while_running_applies_to_members_at_once() {
    let (manager, address) = start_manager(quick_config());
    let observer = FakeNode::spawn_with(address, Setup::new(Behavior::Cooperate).heartbeating());
    assert_eq!(observer.wait_joined().id, 1);
    let silent = FakeNode::spawn(address, Behavior::Cooperate);
    assert_eq!(silent.wait_joined().id, 2);
    thread::sleep(SHORT_DEAD_AFTER);
    // Silent for longer than the new limit already, yet alive under the old.
    assert_eq!(manager.live_nodes(), vec![1, 2]);
    assert_eq!(
        manager.set_dead_after(SHORT_DEAD_AFTER),
        quick_config().dead_after
    );
    assert_eq!(
        observer
            .wait_death(SHORT_SUSPICION + DETECTION_MARGIN)
            .map(|d| d.node),
        Some(2)
    );
    observer.finish();
    silent.finish();
}

#[test]
fn closed_connection_is_declared_dead_at_once() {
    let dead_after = Duration::from_secs(6);
    let (manager, address) = start_manager(ManagerConfig {
        dead_after,
        ..quick_config()
    });
    let first = FakeNode::spawn(address, Behavior::Cooperate);
    assert_eq!(first.wait_joined().id, 1);
    let leaver = FakeNode::spawn(address, Behavior::LeaveAfterJoin);
    assert_eq!(leaver.wait_joined().id, 2);
    leaver.finish();
    assert_eq!(
        first.wait_death(dead_after / 4),
        Some(Death {
            node: 2,
            incarnation: 1,
            epoch: 3,
        }),
        "no NodeDead within {:?} of the connection closing",
        dead_after / 4
    );
    assert_eq!(manager.live_nodes(), vec![1]);
    first.finish();
}

#[test]
fn rejoin_by_id_gets_the_same_id_as_the_next_incarnation_even_from_a_new_gid() {
    let (manager, address) = start_manager(quick_config());
    let first = FakeNode::spawn(address, Behavior::Cooperate);
    assert_eq!(first.wait_joined().id, 1);
    let leaver = FakeNode::spawn(address, Behavior::LeaveAfterJoin);
    assert_eq!(leaver.wait_joined().id, 2);
    leaver.finish();
    assert_eq!(
        first.wait_death(TEST_TIMEOUT),
        Some(Death {
            node: 2,
            incarnation: 1,
            epoch: 3,
        })
    );

    // From another GID than the node that left (the node moved).
    let rejoiner = FakeNode::spawn_with(address, Setup::new(Behavior::Cooperate).rejoining(2));
    assert_eq!(
        rejoiner.wait_joined(),
        Joined {
            id: 2,
            incarnation: 2,
            total_nodes: 2,
            epoch: 4,
        }
    );
    // A later newcomer is told the incarnation of every member.
    let third = FakeNode::spawn(address, Behavior::Cooperate);
    assert_eq!(third.wait_joined().id_and_total(), (3, 3));
    assert_eq!(manager.live_nodes(), vec![1, 2, 3]);

    let third = third.finish();
    assert_eq!(third.prepared, vec![(1, 1), (2, 2)]);
    assert_connected_to_incarnations(&third, &[(1, 1), (2, 2)]);
    let rejoiner = rejoiner.finish();
    assert_eq!(rejoiner.incarnation, 2);
    assert_eq!(rejoiner.prepared, vec![(1, 1), (3, 1)]);
    assert_connected_to_incarnations(&rejoiner, &[(1, 1), (3, 1)]);
    let first = first.finish();
    assert_eq!(first.prepared, vec![(2, 1), (2, 2), (3, 1)]);
    assert_connected_to_incarnations(&first, &[(2, 1), (2, 2), (3, 1)]);
}

#[test]
fn rejoin_of_a_live_or_unknown_id_gets_a_fresh_id() {
    let (manager, address) = start_manager(quick_config());
    let first = FakeNode::spawn(address, Behavior::Cooperate);
    assert_eq!(first.wait_joined().id, 1);
    let mut nodes = vec![first];
    for (rejoin_id, expected_id) in [(1, 2), (40, 3), (MAX_NODES + 1, 4)] {
        let node = FakeNode::spawn_with(
            address,
            Setup::new(Behavior::Cooperate).rejoining(rejoin_id),
        );
        let joined = node.wait_joined();
        assert_eq!(
            (joined.id, joined.incarnation),
            (expected_id, 1),
            "rejoin_id {rejoin_id}"
        );
        nodes.push(node);
    }
    assert_eq!(manager.live_nodes(), vec![1, 2, 3, 4]);
    let last = nodes.pop().expect("four nodes").finish();
    assert_eq!(last.prepared, vec![(1, 1), (2, 1), (3, 1)]);
    for node in nodes {
        node.finish();
    }
}

#[test]
fn rebooted_node_with_the_same_gid_gets_its_id_back() {
    let (manager, address) = start_manager(quick_config());
    let first = FakeNode::spawn(address, Behavior::Cooperate);
    assert_eq!(first.wait_joined().id, 1);
    let gid = fresh_gid();
    let crashing = FakeNode::spawn_with(address, Setup::new(Behavior::Cooperate).with_gid(gid));
    assert_eq!(crashing.wait_joined().id, 2);
    let third = FakeNode::spawn(address, Behavior::Cooperate);
    assert_eq!(third.wait_joined().id_and_total(), (3, 3));

    // Node 2 crashes: its connection ends.
    let crashed = crashing.finish();
    assert_eq!(crashed.timeline, vec![prepare(1, 1), prepare(3, 1)]);
    assert_connected_to(&crashed, &[1, 3]);
    let crash = Death {
        node: 2,
        incarnation: 1,
        epoch: 4,
    };
    assert_eq!(first.wait_death(TEST_TIMEOUT), Some(crash));
    assert_eq!(third.wait_death(TEST_TIMEOUT), Some(crash));
    assert_eq!(manager.live_nodes(), vec![1, 3]);

    // It reboots knowing nothing but its GID, and gets its id back.
    let rebooted = FakeNode::spawn_with(address, Setup::new(Behavior::Cooperate).with_gid(gid));
    assert_eq!(
        rebooted.wait_joined(),
        Joined {
            id: 2,
            incarnation: 2,
            total_nodes: 3,
            epoch: 5,
        }
    );
    assert_eq!(manager.live_nodes(), vec![1, 2, 3]);
    assert_eq!(manager.epoch(), 5);

    // Let every NodeDead arrive before the next node goes, so that each
    // node saw a known sequence.
    let rebooted = rebooted.finish();
    let reboot_ended = Death {
        node: 2,
        incarnation: 2,
        epoch: 6,
    };
    assert_eq!(first.wait_death(TEST_TIMEOUT), Some(reboot_ended));
    assert_eq!(third.wait_death(TEST_TIMEOUT), Some(reboot_ended));
    let first = first.finish();
    assert_eq!(
        third.wait_death(TEST_TIMEOUT),
        Some(Death {
            node: 1,
            incarnation: 1,
            epoch: 7,
        })
    );
    let third = third.finish();

    // The new incarnation was paired with every live member, which heard
    // of the crash exactly once, before that.
    assert_eq!(rebooted.id, 2);
    assert_eq!(rebooted.incarnation, 2);
    assert_eq!(rebooted.timeline, vec![prepare(1, 1), prepare(3, 1)]);
    assert_connected_to(&rebooted, &[1, 3]);
    assert_eq!(
        first.timeline,
        vec![
            prepare(2, 1),
            prepare(3, 1),
            dead(crash),
            prepare(2, 2),
            dead(reboot_ended),
        ]
    );
    assert_connected_to_incarnations(&first, &[(2, 1), (2, 2), (3, 1)]);
    assert_eq!(
        third.timeline,
        vec![
            prepare(1, 1),
            prepare(2, 1),
            dead(crash),
            prepare(2, 2),
            dead(reboot_ended),
            dead(Death {
                node: 1,
                incarnation: 1,
                epoch: 7,
            }),
        ]
    );
    assert_connected_to_incarnations(&third, &[(1, 1), (2, 1), (2, 2)]);
}

#[test]
fn new_gid_gets_a_new_id_while_a_known_one_gets_its_old_id() {
    let (manager, address) = start_manager(quick_config());
    let first = FakeNode::spawn(address, Behavior::Cooperate);
    assert_eq!(first.wait_joined().id, 1);
    let gid = fresh_gid();
    let leaver = FakeNode::spawn_with(address, Setup::new(Behavior::LeaveAfterJoin).with_gid(gid));
    assert_eq!(leaver.wait_joined().id, 2);
    leaver.finish();
    assert_eq!(
        first.wait_death(TEST_TIMEOUT),
        Some(Death {
            node: 2,
            incarnation: 1,
            epoch: 3,
        })
    );

    // Id 2 is free, but goes to no other GID.
    let stranger = FakeNode::spawn(address, Behavior::Cooperate);
    let joined = stranger.wait_joined();
    assert_eq!(
        (joined.id, joined.incarnation, joined.total_nodes),
        (3, 1, 2)
    );
    let returning = FakeNode::spawn_with(address, Setup::new(Behavior::Cooperate).with_gid(gid));
    let joined = returning.wait_joined();
    assert_eq!(
        (joined.id, joined.incarnation, joined.total_nodes),
        (2, 2, 3)
    );
    assert_eq!(manager.live_nodes(), vec![1, 2, 3]);

    assert_connected_to_incarnations(&returning.finish(), &[(1, 1), (3, 1)]);
    assert_connected_to_incarnations(&stranger.finish(), &[(1, 1), (2, 2)]);
    assert_connected_to_incarnations(&first.finish(), &[(2, 1), (2, 2), (3, 1)]);
}

#[test]
fn hello_with_the_gid_of_a_live_member_is_refused_with_eaddrinuse() {
    let (manager, address) = start_manager(quick_config());
    let gid = fresh_gid();
    let member = FakeNode::spawn_with(
        address,
        Setup::new(Behavior::Cooperate).with_gid(gid).heartbeating(),
    );
    assert_eq!(member.wait_joined().id, 1);
    member.wait_ack(1);

    // Whether or not it asks for an id, and whichever.
    for rejoin_id in [0, 1, 2] {
        let mut channel = authenticated(address);
        let hello = Hello {
            gid,
            lid: 0,
            rejoin_id,
        };
        channel.send(&Message::Hello(hello)).expect("send Hello");
        assert_refused(&mut channel, -libc::EADDRINUSE);
    }

    // The member is unaffected: still live, still answered, not asked to
    // prepare for anyone, and no id was spent.
    assert_eq!(manager.live_nodes(), vec![1]);
    assert_eq!(manager.epoch(), 1);
    member.assert_no_death(Duration::from_millis(300));
    // Acknowledgements arriving from now on answer heartbeats sent after
    // the refusals.
    while member.acks.try_recv().is_ok() {}
    member.wait_ack(1);
    let next = FakeNode::spawn(address, Behavior::Cooperate);
    let joined = next.wait_joined();
    assert_eq!(
        (joined.id, joined.incarnation, joined.total_nodes),
        (2, 1, 2)
    );
    assert_eq!(joined.epoch, 2);

    let member = member.finish();
    assert_eq!(member.timeline, vec![prepare(2, 1)]);
    assert_connected_to(&member, &[2]);
    assert_connected_to(&next.finish(), &[1]);
}

/// A manager that notices silence slowly but believes suspicions quickly.
fn suspicion_config() -> ManagerConfig {
    ManagerConfig {
        dead_after: Duration::from_secs(6),
        suspect_grace: Duration::from_millis(400),
        ..quick_config()
    }
}

#[test]
fn suspect_of_a_silent_node_declares_it_dead_early() {
    let config = suspicion_config();
    let (manager, address) = start_manager(config);
    let reporter = FakeNode::spawn_with(address, Setup::new(Behavior::Cooperate).heartbeating());
    assert_eq!(reporter.wait_joined().id, 1);
    let silent = FakeNode::spawn(address, Behavior::Cooperate);
    let joined = silent.wait_joined();
    let silent_since = Instant::now();
    assert_eq!(joined.id, 2);
    thread::sleep(config.suspect_grace + Duration::from_millis(200));

    // News about another incarnation, or about no member, changes nothing.
    reporter.send(&Message::Suspect {
        peer: 2,
        incarnation: 2,
    });
    reporter.send(&Message::Suspect {
        peer: 9,
        incarnation: 1,
    });
    reporter.assert_no_death(Duration::from_millis(300));
    assert_eq!(manager.live_nodes(), vec![1, 2]);

    reporter.send(&Message::Suspect {
        peer: 2,
        incarnation: 1,
    });
    assert_eq!(
        reporter.wait_death(DETECTION_MARGIN),
        Some(Death {
            node: 2,
            incarnation: 1,
            epoch: joined.epoch + 1,
        })
    );
    assert!(silent_since.elapsed() < config.dead_after / 2);
    assert_eq!(manager.live_nodes(), vec![1]);
    silent.finish();
    reporter.finish();
}

#[test]
fn suspect_of_a_heartbeating_node_is_ignored() {
    let config = suspicion_config();
    let (manager, address) = start_manager(config);
    let beating = Setup::new(Behavior::Cooperate).heartbeating();
    let reporter = FakeNode::spawn_with(address, beating);
    assert_eq!(reporter.wait_joined().id, 1);
    let suspected = FakeNode::spawn_with(address, beating);
    assert_eq!(suspected.wait_joined().id, 2);
    thread::sleep(config.suspect_grace + Duration::from_millis(200));

    reporter.send(&Message::Suspect {
        peer: 2,
        incarnation: 1,
    });
    reporter.assert_no_death(config.suspect_grace * 2);
    assert_eq!(manager.live_nodes(), vec![1, 2]);
    assert_eq!(manager.epoch(), 2);
    reporter.finish();
    suspected.finish();
}

/// `NodeDead` as the manager sends it, for comparing timelines.
fn dead(death: Death) -> Message {
    Message::NodeDead {
        node: death.node,
        incarnation: death.incarnation,
        epoch: death.epoch,
    }
}

#[test]
fn member_that_leaves_is_confirmed_and_announced_once() {
    let (manager, address) = start_manager(quick_config());
    let beating = Setup::new(Behavior::Cooperate).heartbeating();
    let first = FakeNode::spawn_with(address, beating);
    assert_eq!(first.wait_joined().id, 1);
    let leaver = FakeNode::spawn_with(address, beating);
    let joined = leaver.wait_joined();
    assert_eq!(joined.id_and_total(), (2, 2));
    let third = FakeNode::spawn(address, Behavior::Cooperate);
    assert_eq!(third.wait_joined().id_and_total(), (3, 3));

    leaver.leave(joined);
    let left = Death {
        node: 2,
        incarnation: 1,
        epoch: 4,
    };
    // The leaver is told too: that is its confirmation.
    assert_eq!(leaver.wait_death(TEST_TIMEOUT), Some(left));
    assert_eq!(first.wait_death(TEST_TIMEOUT), Some(left));
    assert_eq!(third.wait_death(TEST_TIMEOUT), Some(left));
    assert_eq!(manager.live_nodes(), vec![1, 3]);
    assert_eq!(manager.epoch(), 4);
    // Then the manager hangs up on it.
    leaver.wait_disconnected();
    let leaver = leaver.finish();
    assert_eq!(leaver.deaths, vec![left]);

    // The end of its connection is no second death.
    first.assert_no_death(Duration::from_millis(500));
    third.assert_no_death(Duration::ZERO);
    assert_eq!(manager.live_nodes(), vec![1, 3]);
    assert_eq!(manager.epoch(), 4);
    while first.acks.try_recv().is_ok() {}
    first.wait_ack(4);

    // A later newcomer is not paired with it.
    let fourth = FakeNode::spawn(address, Behavior::Cooperate);
    let joined = fourth.wait_joined();
    assert_eq!((joined.id, joined.total_nodes, joined.epoch), (4, 3, 5));
    let fourth = fourth.finish();
    assert_eq!(fourth.prepared, vec![(1, 1), (3, 1)]);
    assert_connected_to(&fourth, &[1, 3]);
    assert!(fourth.deaths.is_empty());

    let first = first.finish();
    assert_eq!(
        first.timeline[..4],
        [prepare(2, 1), prepare(3, 1), dead(left), prepare(4, 1)]
    );
    assert_connected_to(&first, &[2, 3, 4]);
    let third = third.finish();
    assert_eq!(third.deaths.first(), Some(&left));
    assert_connected_to(&third, &[1, 2, 4]);
}

#[test]
fn leave_naming_another_node_or_incarnation_is_ignored() {
    let (manager, address) = start_manager(quick_config());
    let beating = Setup::new(Behavior::Cooperate).heartbeating();
    let first = FakeNode::spawn_with(address, beating);
    assert_eq!(first.wait_joined().id, 1);
    let second = FakeNode::spawn_with(address, beating);
    let joined = second.wait_joined();
    assert_eq!(joined.id_and_total(), (2, 2));

    for (node_id, incarnation) in [(2, 2), (2, 0), (1, 1), (9, 1)] {
        second.send(&Message::Leave {
            node_id,
            incarnation,
        });
    }
    second.assert_no_death(Duration::from_millis(300));
    first.assert_no_death(Duration::ZERO);
    assert_eq!(manager.live_nodes(), vec![1, 2]);
    assert_eq!(manager.epoch(), 2);

    // Still answered, and still paired with a newcomer.
    while second.acks.try_recv().is_ok() {}
    second.wait_ack(2);
    let third = FakeNode::spawn(address, Behavior::Cooperate);
    let later = third.wait_joined();
    assert_eq!((later.id, later.total_nodes, later.epoch), (3, 3, 3));

    // Its own Leave still works.
    second.leave(joined);
    let left = Death {
        node: 2,
        incarnation: 1,
        epoch: 4,
    };
    assert_eq!(second.wait_death(TEST_TIMEOUT), Some(left));
    assert_eq!(first.wait_death(TEST_TIMEOUT), Some(left));
    assert_eq!(third.wait_death(TEST_TIMEOUT), Some(left));
    second.wait_disconnected();
    assert_eq!(manager.live_nodes(), vec![1, 3]);

    let second = second.finish();
    assert_eq!(
        second.timeline,
        vec![prepare(1, 1), prepare(3, 1), dead(left)]
    );
    assert_connected_to(&second, &[1, 3]);
    assert_connected_to(&third.finish(), &[1, 2]);
    assert_connected_to(&first.finish(), &[2, 3]);
}

#[test]
fn node_that_left_rejoins_as_its_next_incarnation() {
    let (manager, address) = start_manager(quick_config());
    let first = FakeNode::spawn(address, Behavior::Cooperate);
    assert_eq!(first.wait_joined().id, 1);
    let gid = fresh_gid();
    let leaver = FakeNode::spawn_with(address, Setup::new(Behavior::Cooperate).with_gid(gid));
    let joined = leaver.wait_joined();
    assert_eq!(joined.id_and_total(), (2, 2));
    let third = FakeNode::spawn(address, Behavior::Cooperate);
    assert_eq!(third.wait_joined().id_and_total(), (3, 3));

    leaver.leave(joined);
    let left = Death {
        node: 2,
        incarnation: 1,
        epoch: 4,
    };
    assert_eq!(leaver.wait_death(TEST_TIMEOUT), Some(left));
    assert_eq!(first.wait_death(TEST_TIMEOUT), Some(left));
    assert_eq!(third.wait_death(TEST_TIMEOUT), Some(left));
    leaver.wait_disconnected();
    assert_eq!(leaver.finish().deaths, vec![left]);

    // It joins again asking for its id, as a node that left does.
    let rejoined = FakeNode::spawn_with(
        address,
        Setup::new(Behavior::Cooperate).with_gid(gid).rejoining(2),
    );
    let joined = rejoined.wait_joined();
    assert_eq!(
        joined,
        Joined {
            id: 2,
            incarnation: 2,
            total_nodes: 3,
            epoch: 5,
        }
    );
    assert_eq!(manager.live_nodes(), vec![1, 2, 3]);

    // It leaves again, and comes back knowing only its GID.
    rejoined.leave(joined);
    let left_again = Death {
        node: 2,
        incarnation: 2,
        epoch: 6,
    };
    assert_eq!(rejoined.wait_death(TEST_TIMEOUT), Some(left_again));
    assert_eq!(first.wait_death(TEST_TIMEOUT), Some(left_again));
    assert_eq!(third.wait_death(TEST_TIMEOUT), Some(left_again));
    rejoined.wait_disconnected();
    let rejoined = rejoined.finish();
    let rebooted = FakeNode::spawn_with(address, Setup::new(Behavior::Cooperate).with_gid(gid));
    assert_eq!(
        rebooted.wait_joined(),
        Joined {
            id: 2,
            incarnation: 3,
            total_nodes: 3,
            epoch: 7,
        }
    );
    assert_eq!(manager.live_nodes(), vec![1, 2, 3]);

    // Each incarnation was paired with every live member.
    assert_eq!(
        rejoined.timeline,
        vec![prepare(1, 1), prepare(3, 1), dead(left_again)]
    );
    assert_connected_to(&rejoined, &[1, 3]);
    let rebooted = rebooted.finish();
    assert_eq!(rebooted.prepared, vec![(1, 1), (3, 1)]);
    assert_connected_to(&rebooted, &[1, 3]);
    let first = first.finish();
    assert_eq!(first.prepared, vec![(2, 1), (3, 1), (2, 2), (2, 3)]);
    assert!(first.deaths.starts_with(&[left, left_again]));
    assert_connected_to_incarnations(&first, &[(2, 1), (2, 2), (2, 3), (3, 1)]);
    let third = third.finish();
    assert_eq!(third.prepared, vec![(1, 1), (2, 1), (2, 2), (2, 3)]);
    assert!(third.deaths.starts_with(&[left, left_again]));
    assert_connected_to_incarnations(&third, &[(1, 1), (2, 1), (2, 2), (2, 3)]);
}

#[test]
fn leave_instead_of_an_answer_during_a_join_ends_the_pairing_at_once() {
    let config = quick_config();
    let (manager, address) = start_manager(config);
    let first = FakeNode::spawn(address, Behavior::Cooperate);
    assert_eq!(first.wait_joined().id, 1);
    let leaver = FakeNode::spawn(address, Behavior::LeaveWhenPrepared);
    assert_eq!(leaver.wait_joined().id_and_total(), (2, 2));

    // Node 2 answers the Prepare for node 3 with a Leave: the join does
    // not wait for an answer that will not come, nor pairs node 3 with it.
    let started = Instant::now();
    let third = FakeNode::spawn(address, Behavior::Cooperate);
    let joined = third.wait_joined();
    let took = started.elapsed();
    assert!(
        took < config.io_timeout / 2,
        "the join waited {took:?} for a node that left"
    );
    assert_eq!((joined.id, joined.total_nodes, joined.epoch), (3, 2, 3));

    // The departure is announced after the join, to the newcomer too, and
    // confirmed to the leaver, once.
    let left = Death {
        node: 2,
        incarnation: 1,
        epoch: 4,
    };
    assert_eq!(leaver.wait_death(TEST_TIMEOUT), Some(left));
    assert_eq!(first.wait_death(TEST_TIMEOUT), Some(left));
    assert_eq!(third.wait_death(TEST_TIMEOUT), Some(left));
    leaver.wait_disconnected();
    first.assert_no_death(Duration::from_millis(500));
    third.assert_no_death(Duration::ZERO);
    assert_eq!(manager.live_nodes(), vec![1, 3]);
    assert_eq!(manager.epoch(), 4);

    let leaver = leaver.finish();
    assert_eq!(
        leaver.timeline,
        vec![prepare(1, 1), prepare(3, 1), dead(left)]
    );
    assert_connected_to(&leaver, &[1]);
    let third = third.finish();
    assert_eq!(third.prepared, vec![(1, 1)]);
    assert_connected_to(&third, &[1]);
    assert_eq!(third.deaths, vec![left]);
    assert_connected_to(&first.finish(), &[2, 3]);
}

/// Opens an authenticated connection to the manager and sends `first` on
/// it.
fn connect_with(address: SocketAddr, first: &Message) -> Channel<TcpStream> {
    let mut channel = authenticated(address);
    channel.send(first).expect("send first frame");
    channel
}

/// A `Resume` frame.
fn resume(node_id: u32, incarnation: u32, epoch: u32, gid: [u8; 16]) -> Message {
    Message::Resume(Resume {
        node_id,
        incarnation,
        epoch,
        gid,
    })
}

/// A heartbeating fake node that resumes the membership `resume` names.
fn spawn_resuming(address: SocketAddr, resume: Resume) -> FakeNode {
    FakeNode::spawn_with(
        address,
        Setup::new(Behavior::Cooperate)
            .heartbeating()
            .resuming(resume),
    )
}

#[test]
fn member_whose_connection_broke_resumes_and_is_never_declared_dead() {
    let (manager, address) = start_manager(short_silence_config());
    let beating = Setup::new(Behavior::Cooperate).heartbeating();
    let first = FakeNode::spawn_with(address, beating);
    assert_eq!(first.wait_joined().id, 1);
    let gid = fresh_gid();
    let broken = FakeNode::spawn_with(address, beating.with_gid(gid));
    let joined = broken.wait_joined();
    assert_eq!((joined.id, joined.incarnation, joined.epoch), (2, 1, 2));

    // The connection breaks on the node's side only: the node falls silent
    // on it, and resumes over a new one well within `dead_after`.
    broken.stop_heartbeats();
    thread::sleep(SHORT_DEAD_AFTER / 2);
    let resumed = spawn_resuming(
        address,
        Resume {
            node_id: 2,
            incarnation: 1,
            epoch: joined.epoch,
            gid,
        },
    );
    assert_eq!(
        resumed.wait_joined(),
        Joined {
            id: 2,
            incarnation: 1,
            total_nodes: 0,
            epoch: 2,
        }
    );
    // The manager hangs up on the old connection, and its end is no death:
    // nobody hears of one, long after the old connection's last heartbeat.
    broken.wait_disconnected();
    first.assert_no_death(SHORT_DEAD_AFTER * 2);
    resumed.assert_no_death(Duration::ZERO);
    assert_eq!(manager.live_nodes(), vec![1, 2]);
    assert_eq!(manager.epoch(), 2);
    // Its heartbeats over the new connection are answered.
    while resumed.acks.try_recv().is_ok() {}
    resumed.wait_ack(2);

    // A newcomer is paired with it over the new connection.
    let third = FakeNode::spawn(address, Behavior::Cooperate);
    let later = third.wait_joined();
    assert_eq!((later.id, later.total_nodes, later.epoch), (3, 3, 3));
    let third = third.finish();
    assert_eq!(third.prepared, vec![(1, 1), (2, 1)]);
    assert_connected_to(&third, &[1, 2]);
    let third_gone = Death {
        node: 3,
        incarnation: 1,
        epoch: 4,
    };
    assert_eq!(first.wait_death(TEST_TIMEOUT), Some(third_gone));
    assert_eq!(resumed.wait_death(TEST_TIMEOUT), Some(third_gone));

    let resumed = resumed.finish();
    assert_eq!(resumed.timeline, vec![prepare(3, 1), dead(third_gone)]);
    assert_connected_to(&resumed, &[3]);
    // Only the end of its current connection is the resumed node's death.
    let resumed_gone = Death {
        node: 2,
        incarnation: 1,
        epoch: 5,
    };
    assert_eq!(first.wait_death(TEST_TIMEOUT), Some(resumed_gone));
    let broken = broken.finish();
    assert_eq!(broken.timeline, vec![prepare(1, 1)]);
    let first = first.finish();
    assert_eq!(
        first.timeline,
        vec![
            prepare(2, 1),
            prepare(3, 1),
            dead(third_gone),
            dead(resumed_gone)
        ]
    );
    assert_connected_to(&first, &[2, 3]);
}

/// A manager that notices silence quickly and starts with a grace long
/// enough for a few resumes on a busy machine.
fn restart_config() -> ManagerConfig {
    ManagerConfig {
        dead_after: SHORT_DEAD_AFTER,
        startup_grace: Some(Duration::from_secs(2)),
        ..quick_config()
    }
}

/// Sleeps until the grace of a manager started before `started` is over.
fn wait_out_the_grace(started: Instant, config: &ManagerConfig) {
    let over = started + config.grace() + Duration::from_millis(50);
    thread::sleep(over.saturating_duration_since(Instant::now()));
}

#[test]
fn restarted_manager_learns_its_members_from_their_resumes() {
    let config = restart_config();
    let grace = config.grace();
    let (first_manager, first_address) = start_manager(config);
    let started = Instant::now();
    // The grace holds for this manager too.
    let mut early = connect_with(first_address, &Message::Hello(Hello::default()));
    assert_refused(&mut early, -libc::EAGAIN);
    wait_out_the_grace(started, &config);

    // Nodes 1, 2 (its second incarnation) and 3 join the first manager.
    let gids = [fresh_gid(), fresh_gid(), fresh_gid()];
    let beating = Setup::new(Behavior::Cooperate).heartbeating();
    let first = FakeNode::spawn_with(first_address, beating.with_gid(gids[0]));
    assert_eq!(first.wait_joined().id, 1);
    let crashing = FakeNode::spawn_with(
        first_address,
        Setup::new(Behavior::LeaveAfterJoin).with_gid(gids[1]),
    );
    assert_eq!(crashing.wait_joined().id, 2);
    crashing.finish();
    let crash = Death {
        node: 2,
        incarnation: 1,
        epoch: 3,
    };
    assert_eq!(first.wait_death(TEST_TIMEOUT), Some(crash));
    let second = FakeNode::spawn_with(first_address, beating.with_gid(gids[1]));
    assert_eq!(
        second.wait_joined(),
        Joined {
            id: 2,
            incarnation: 2,
            total_nodes: 2,
            epoch: 4,
        }
    );
    let third = FakeNode::spawn_with(first_address, beating.with_gid(gids[2]));
    assert_eq!(
        third.wait_joined(),
        Joined {
            id: 3,
            incarnation: 1,
            total_nodes: 3,
            epoch: 5,
        }
    );
    assert_eq!(first_manager.live_nodes(), vec![1, 2, 3]);
    assert_eq!(first_manager.epoch(), 5);

    // The manager goes: every member's connection ends, nobody is dead.
    first_manager.shutdown();
    for node in [&first, &second, &third] {
        node.wait_disconnected();
    }
    assert!(
        TcpStream::connect(first_address).is_err(),
        "a manager that was shut down still takes connections"
    );
    assert!(first_manager.live_nodes().is_empty());
    let first = first.finish();
    assert_eq!(first.deaths, vec![crash]);
    assert_eq!(second.finish().deaths, vec![]);
    assert_eq!(third.finish().deaths, vec![]);

    // Another manager starts with the same configuration, and the members
    // resume with it, each with the newest epoch it applied.
    let restarting = Instant::now();
    let (manager, address) = start_manager(config);
    let restarted = Instant::now();
    let first = spawn_resuming(
        address,
        Resume {
            node_id: 1,
            incarnation: 1,
            epoch: crash.epoch,
            gid: gids[0],
        },
    );
    assert_eq!(
        first.wait_joined(),
        Joined {
            id: 1,
            incarnation: 1,
            total_nodes: 0,
            epoch: 3,
        }
    );
    let third = spawn_resuming(
        address,
        Resume {
            node_id: 3,
            incarnation: 1,
            epoch: 5,
            gid: gids[2],
        },
    );
    assert_eq!(third.wait_joined().epoch, 5);
    // The epoch never goes back, whatever the order of the resumes.
    let second = spawn_resuming(
        address,
        Resume {
            node_id: 2,
            incarnation: 2,
            epoch: 4,
            gid: gids[1],
        },
    );
    assert_eq!(
        second.wait_joined(),
        Joined {
            id: 2,
            incarnation: 2,
            total_nodes: 0,
            epoch: 5,
        }
    );
    assert_eq!(manager.live_nodes(), vec![1, 2, 3]);
    assert_eq!(manager.epoch(), 5);

    // Still within the grace: a join is refused for now, an earlier
    // incarnation of a live node is no member, and a GID is not shared.
    assert!(
        restarting.elapsed() < grace,
        "the resumes took longer than the grace of {grace:?}"
    );
    let mut join = connect_with(address, &Message::Hello(Hello::default()));
    assert_refused(&mut join, -libc::EAGAIN);
    let mut stale = connect_with(address, &resume(2, 1, 5, gids[1]));
    assert_refused(&mut stale, -libc::EHOSTDOWN);
    let mut clash = connect_with(address, &resume(7, 1, 5, gids[0]));
    assert_refused(&mut clash, -libc::EADDRINUSE);
    assert!(
        restarting.elapsed() < grace,
        "the refusals took longer than the grace of {grace:?}"
    );
    assert_eq!(manager.live_nodes(), vec![1, 2, 3]);
    assert_eq!(manager.epoch(), 5);

    // After the grace, a join gets the next id, and is paired with every
    // member, of the incarnation it resumed as.
    wait_out_the_grace(restarted, &config);
    let fourth = FakeNode::spawn_with(address, beating);
    assert_eq!(
        fourth.wait_joined(),
        Joined {
            id: 4,
            incarnation: 1,
            total_nodes: 4,
            epoch: 6,
        }
    );
    assert_eq!(manager.live_nodes(), vec![1, 2, 3, 4]);

    // A resumed member that falls silent dies like any other.
    third.stop_heartbeats();
    let silent = Death {
        node: 3,
        incarnation: 1,
        epoch: 7,
    };
    assert_eq!(
        first.wait_death(SHORT_DEAD_AFTER + DETECTION_MARGIN),
        Some(silent)
    );
    assert_eq!(second.wait_death(TEST_TIMEOUT), Some(silent));
    assert_eq!(fourth.wait_death(TEST_TIMEOUT), Some(silent));
    third.wait_disconnected();
    assert_eq!(manager.live_nodes(), vec![1, 2, 4]);
    assert_eq!(manager.epoch(), 7);

    let third = third.finish();
    assert_eq!(third.timeline, vec![prepare(4, 1)]);
    assert_connected_to(&third, &[4]);
    let fourth = fourth.finish();
    assert_eq!(fourth.prepared, vec![(1, 1), (2, 2), (3, 1)]);
    assert_connected_to_incarnations(&fourth, &[(1, 1), (2, 2), (3, 1)]);
    assert_eq!(fourth.deaths, vec![silent]);
    for node in [first, second] {
        let node = node.finish();
        assert_eq!(node.timeline[..2], [prepare(4, 1), dead(silent)]);
        assert_connected_to(&node, &[4]);
    }
}

#[test]
fn resume_within_the_grace_adopts_unknown_ids_but_not_dead_incarnations() {
    let config = ManagerConfig {
        startup_grace: Some(Duration::from_secs(60)),
        ..quick_config()
    };
    let (manager, address) = start_manager(config);
    let gid = fresh_gid();
    let fifth = spawn_resuming(
        address,
        Resume {
            node_id: 5,
            incarnation: 3,
            epoch: 9,
            gid,
        },
    );
    assert_eq!(
        fifth.wait_joined(),
        Joined {
            id: 5,
            incarnation: 3,
            total_nodes: 0,
            epoch: 9,
        }
    );
    let sixth = spawn_resuming(
        address,
        Resume {
            node_id: 6,
            incarnation: 1,
            epoch: 2,
            gid: fresh_gid(),
        },
    );
    assert_eq!(sixth.wait_joined().epoch, 9);
    assert_eq!(manager.live_nodes(), vec![5, 6]);
    assert_eq!(manager.epoch(), 9);
    let mut join = connect_with(address, &Message::Hello(Hello::default()));
    assert_refused(&mut join, -libc::EAGAIN);

    // Node 5 dies: no resume brings it back, in the grace or not.
    fifth.finish();
    let gone = Death {
        node: 5,
        incarnation: 3,
        epoch: 10,
    };
    assert_eq!(sixth.wait_death(TEST_TIMEOUT), Some(gone));
    for incarnation in [3, 4] {
        let mut late = connect_with(address, &resume(5, incarnation, 10, gid));
        assert_refused(&mut late, -libc::EHOSTDOWN);
    }
    // Nor are invalid ids or incarnations taken.
    for (node_id, incarnation) in [(0, 1), (MAX_NODES, 1), (7, 0)] {
        let mut invalid = connect_with(address, &resume(node_id, incarnation, 1, fresh_gid()));
        assert_refused(&mut invalid, -libc::EHOSTDOWN);
    }
    sixth.assert_no_death(Duration::from_millis(300));
    assert_eq!(manager.live_nodes(), vec![6]);
    assert_eq!(manager.epoch(), 10);
    let sixth = sixth.finish();
    assert_eq!(sixth.timeline, vec![dead(gone)]);
}

#[test]
fn resume_of_a_node_declared_dead_is_refused_and_it_joins_again() {
    let (manager, address) = start_manager(quick_config());
    let first = FakeNode::spawn(address, Behavior::Cooperate);
    assert_eq!(first.wait_joined().id, 1);
    let gid = fresh_gid();
    let crashing = FakeNode::spawn_with(address, Setup::new(Behavior::Cooperate).with_gid(gid));
    let joined = crashing.wait_joined();
    assert_eq!((joined.id, joined.epoch), (2, 2));
    crashing.finish();
    let crash = Death {
        node: 2,
        incarnation: 1,
        epoch: 3,
    };
    assert_eq!(first.wait_death(TEST_TIMEOUT), Some(crash));

    let mut late = connect_with(address, &resume(2, 1, joined.epoch, gid));
    assert_refused(&mut late, -libc::EHOSTDOWN);
    first.assert_no_death(Duration::from_millis(300));
    assert_eq!(manager.live_nodes(), vec![1]);
    assert_eq!(manager.epoch(), 3);

    // Cut off, the node joins again, as its next incarnation.
    let rejoined = FakeNode::spawn_with(
        address,
        Setup::new(Behavior::Cooperate).with_gid(gid).rejoining(2),
    );
    assert_eq!(
        rejoined.wait_joined(),
        Joined {
            id: 2,
            incarnation: 2,
            total_nodes: 2,
            epoch: 4,
        }
    );
    assert_connected_to_incarnations(&rejoined.finish(), &[(1, 1)]);
    assert_connected_to_incarnations(&first.finish(), &[(2, 1), (2, 2)]);
}

#[test]
fn resume_of_an_unknown_id_after_the_grace_is_refused() {
    let (manager, address) = start_manager(quick_config());
    let mut stranger = connect_with(address, &resume(1, 1, 7, fresh_gid()));
    assert_refused(&mut stranger, -libc::EHOSTDOWN);
    assert!(manager.live_nodes().is_empty());
    // A refused resume moves no epoch and reserves no id.
    assert_eq!(manager.epoch(), 0);
    let node = FakeNode::spawn(address, Behavior::Cooperate);
    assert_eq!(
        node.wait_joined(),
        Joined {
            id: 1,
            incarnation: 1,
            total_nodes: 1,
            epoch: 1,
        }
    );
    node.finish();
}
