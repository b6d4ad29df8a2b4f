//! The cluster manager: node id assignment, queue pair brokering and
//! membership.
//!
//! Each accepted connection gets a thread that first authenticates the
//! node by the cluster's secret ([`Channel::accept`]): a node whose proof
//! is wrong is refused with `EKEYREJECTED` and dropped, which is logged.
//! Every frame after that goes through the connection's [`Channel`], so it
//! is tagged when written and its tag checked when read; a frame whose tag
//! is wrong ends the connection (logged, and for a member a death like any
//! other end of its connection). The thread then reads the node's first
//! frame: a `Hello` (a join) or a `Resume` (a member reconnecting, see
//! below). The join itself runs under the registry lock, so that every
//! pair of nodes is connected exactly once and ids follow join order.
//!
//! Ids: a node that is new to the manager gets the next unused id (1, 2,
//! 3, … in join order). The registry remembers, for every id it handed
//! out, the port GID of the node it last went to. A node that crashed and
//! rebooted does not know its old id (its `Hello` has `rejoin_id` 0) but
//! comes back with the same GID (RoCE derives GIDs from IP addresses), so
//! a `Hello` with `rejoin_id` 0 whose GID was recorded for an id that no
//! live member has gets that id back as its next incarnation; if several
//! such ids have that GID, the one handed out most recently. A `Hello`
//! with `rejoin_id` other than 0 gets that id back as its next incarnation
//! if it was handed out before and no live member has it, even from
//! another GID (the node moved; the change is logged). Any other node gets
//! a new id, so an id only goes back to the node that had it, and the
//! incarnation tells its queue pairs from those of the earlier one. No
//! two live members share a GID, since RDMA addressing would be
//! ambiguous: a `Hello` with the GID of a live member is refused with
//! `EADDRINUSE`, whatever its `rejoin_id`, and the member is left alone.
//!
//! Once a node has joined, a reader thread owns the reading side of its
//! connection. It records when the node was last heard from, answers its
//! heartbeats with the current epoch, hands its suspicions, its answers to
//! probes and its `Leave` to the monitor and passes every other frame (the
//! node's answers while a later node joins) to the join through a channel.
//! The monitor thread declares a member dead when its connection breaks,
//! when a peer suspects it and it has been silent for longer than
//! [`ManagerConfig::suspect_grace`], or when it stays silent through a
//! suspicion (every surviving member is then sent `NodeDead`):
//!
//! - a member silent for longer than [`ManagerConfig::dead_after`] is
//!   suspected, not dead: the manager asks every other member when it last
//!   heard from the suspect over its RDMA connection (`Probe`), and does so
//!   again every [`PROBE_INTERVAL`] (or every quarter of `dead_after` if
//!   that is shorter) while the suspicion lasts;
//! - any frame from the suspect refutes the suspicion, and so does a peer
//!   that heard from it within the last half of `dead_after`: a node whose
//!   link to the manager stalls while it serves its peers is not dead;
//! - a suspect silent for [`ManagerConfig::suspicion`] more, that no peer
//!   heard from meanwhile, is declared dead: a node that stops is declared
//!   dead within `dead_after` + `suspicion` (3.8 s by default) plus the
//!   monitor's [`MONITOR_INTERVAL`] of its last frame; a suspect that only
//!   its peers hear from is declared dead after [`VOUCHED_LIMIT_FACTOR`]
//!   times that limit, since a node cut off from the manager fences itself
//!   and stops serving its peers long before;
//! - when at least half of the members (and two or more) are late at once
//!   (silent for longer than half of `dead_after`), the host rather than a
//!   node is slow: `dead_after` counts [`SLOW_HOST_FACTOR`] times as long
//!   until they are on time again. This is logged, and so is every silence
//!   longer than half of `dead_after`, every suspicion and its end.
//!
//! Leaving: a member that sends `Leave` with its own id and incarnation
//! leaves gracefully. It is removed like a dead member (one new epoch, a
//! `NodeDead` to every other member), and is sent that same `NodeDead`
//! too, as the confirmation it waits for; only then is its connection shut
//! down, so the end of the connection that follows is no second death. A
//! `Leave` naming another node or incarnation is logged and ignored. The
//! id stays the node's: it gets it back as its next incarnation when it
//! joins again, by `rejoin_id` or by its GID, as after a death.
//!
//! Resuming: a member whose connection to the manager broke (the manager
//! restarted, or the connection was reset) connects again and sends
//! `Resume` with its id, incarnation, newest epoch and GID, under the same
//! `hello_timeout` as a `Hello`. It keeps its id, its incarnation and its
//! queue pairs to the other members: nobody is paired, and nobody hears of
//! it. Under the registry lock, the manager
//!
//! - takes a live member of that incarnation (its connection broke, but
//!   the manager has not declared it dead yet: it only does so once its
//!   end of the connection ends, or after a silence) back over the new
//!   connection: the old one is shut down, and its end, which its reader
//!   reports, is no death, since every connection is numbered and only the
//!   end of a member's current one counts. Its last-heard time starts
//!   afresh;
//! - adopts a node whose id it never handed out while the start-up grace
//!   runs (see below): a member of the cluster the manager ran before it
//!   restarted. It becomes a live member with the incarnation and GID it
//!   names, its GID is recorded for a later rejoin by GID, and new ids are
//!   handed out above its id from then on;
//! - refuses anything else with `EHOSTDOWN`: an id this manager declared
//!   dead (or that left) since, a live id of another incarnation, a member
//!   that is leaving, an unknown id once the grace is over, an invalid id.
//!   The node then counts itself cut off and joins again;
//! - refuses a `Resume` with the GID of another live member with
//!   `EADDRINUSE`, as a `Hello`.
//!
//! A member that resumed is answered `Resumed` with the manager's epoch,
//! first raised to the node's epoch if that is newer: epochs never go
//! back, also across a restart of the manager, as nodes drop news whose
//! epoch is not newer than what they applied. A resume is no membership
//! change, so it does not move the epoch. From then on the member is
//! watched like any other: heartbeats, silence, suspicions, `Leave`.
//!
//! Start-up grace: for the first [`ManagerConfig::startup_grace`] after it
//! starts (by default [`ManagerConfig::dead_after`]: a member that has not
//! resumed by then would be dead anyway), the manager refuses every
//! `Hello` with `EAGAIN`, so that no id of a member that has yet to resume
//! goes to a new node. A node that joins during that window must join
//! again after it (`lite_join` fails with `EAGAIN`). A manager that starts
//! a new cluster can be given no grace.
//!
//! What a restarted manager cannot know: it learns its members from their
//! resumes only. A member the earlier manager had declared dead and that
//! resumes within the grace is taken back, and an id of the earlier
//! cluster whose node died before the restart and that is above every
//! resumed id may go to a new node as incarnation 1 again.
//!
//! [`ClusterManager::shutdown`] stops a manager as its end would (tests
//! restart a manager with it): no more connections are taken, every
//! member's connection is shut down and nobody is declared dead.
//!
//! Locks: the registry, then one member's send lock or last-heard time.
//! Reader threads never take the registry lock, so heartbeats are answered
//! and recorded while a join holds it. The monitor does need the registry,
//! so a death it would notice during a join is only declared once the join
//! ends, with the silence measured up to then; a member that fails the
//! join itself is removed at once. A member that sends `Leave` during a
//! join is marked as leaving at once by its reader, which also wakes a
//! join waiting for its answer: the join pairs no newcomer with it and
//! removes it as leaving (not as failed). Deaths and departures are
//! announced after the join, with epochs newer than the one the join ended
//! at, so the newcomer hears of them like every other member.

use std::collections::{BTreeMap, VecDeque};
use std::fmt::{self, Display};
use std::io;
use std::mem::size_of;
use std::net::{Ipv6Addr, Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::mpsc::{
    self, Receiver, RecvTimeoutError, Sender, SyncSender, TryRecvError, TrySendError,
};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::thread;
use std::time::{Duration, Instant};

use lite::sys::MAX_NODES;

use crate::auth::ClusterSecret;
use crate::cm_wire::{Endpoint, Hello, Kind, Message, Resume, NEVER_HEARD};
use crate::frame::{Channel, Inbound, Outbound, ProtocolError};

/// Tunables of a [`ClusterManager`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ManagerConfig {
    /// Longest a node may take to answer one request during a join, and
    /// to accept one frame.
    pub io_timeout: Duration,
    /// Longest a new connection may take to send its `Hello` (or its
    /// `Resume`).
    pub hello_timeout: Duration,
    /// Longest a member may stay silent (nodes send a heartbeat every
    /// 500 ms) before it is suspected (see the module docs). With
    /// [`ManagerConfig::suspicion`], the TCP user timeout of every
    /// connection, so unacknowledged data cannot keep a dead node's
    /// connection alive for longer.
    pub dead_after: Duration,
    /// Silence through which a member suspected after
    /// [`ManagerConfig::dead_after`] may still show it lives, before it is
    /// declared dead (see the module docs).
    pub suspicion: Duration,
    /// Silence after which a member that a peer suspects is declared dead
    /// at once instead of after [`ManagerConfig::dead_after`]; a suspected
    /// member heard from more recently is left alone, since only the
    /// manager decides who is dead.
    pub suspect_grace: Duration,
    /// How long after it starts the manager refuses joins (with `EAGAIN`),
    /// so that the members of the cluster an earlier manager ran resume
    /// first and none of their ids goes to another node; `None` stands
    /// for [`ManagerConfig::dead_after`], after which a member that has
    /// not resumed would count as dead anyway. `Some(Duration::ZERO)`
    /// takes joins at once (a new cluster, or tests).
    pub startup_grace: Option<Duration>,
}

impl ManagerConfig {
    /// The start-up grace in force: [`ManagerConfig::startup_grace`], or
    /// [`ManagerConfig::dead_after`] if that is `None`.
    pub fn grace(&self) -> Duration {
        self.startup_grace.unwrap_or(self.dead_after)
    }
}

impl Default for ManagerConfig {
    fn default() -> Self {
        ManagerConfig {
            // Generous: nodes may be emulated machines running debug kernels.
            io_timeout: Duration::from_secs(30),
            hello_timeout: Duration::from_secs(30),
            // Six missed heartbeats: a busy emulated node is not mistaken
            // for a dead one, and a dead one is noticed in seconds.
            dead_after: Duration::from_secs(3),
            // A node paused for 2.5 s (its last heartbeat up to 500 ms
            // before, its first after the pause late: silences of up to
            // 3.15 s measured) is not dead; one killed is declared dead
            // 3.8 s after its last frame, and its peers' callers released
            // well within the 4.5 s the failure test allows.
            suspicion: Duration::from_millis(800),
            suspect_grace: Duration::from_secs(1),
            startup_grace: None,
        }
    }
}

/// How often the monitor looks for silent members.
const MONITOR_INTERVAL: Duration = Duration::from_millis(100);

/// How often the peers of a suspected member are asked about it, at most.
const PROBE_INTERVAL: Duration = Duration::from_millis(500);

/// How many times longer `dead_after` counts while the host is slow (see
/// the module docs).
const SLOW_HOST_FACTOR: u32 = 2;

/// How many times longer than `dead_after` + `suspicion` a suspect that
/// only its peers hear from stays a member.
const VOUCHED_LIMIT_FACTOR: u32 = 3;

/// Idle seconds before TCP sends the first keepalive probe.
const KEEPALIVE_IDLE_SECS: libc::c_int = 1;

/// Seconds between TCP keepalive probes.
const KEEPALIVE_INTERVAL_SECS: libc::c_int = 1;

/// Unanswered keepalive probes after which TCP drops the connection.
const KEEPALIVE_PROBES: libc::c_int = 3;

/// Frames a member may send that no join has asked for yet. A join asks
/// for one answer at a time, so a longer backlog means the node is not
/// following the protocol.
const REPLY_BACKLOG: usize = 4;

/// A frame a member's reader passed on, or why its reader stopped.
type Reply = Result<Message, ProtocolError>;

/// Numbers the member connections of this process, so that the end of a
/// connection a member replaced when it resumed is told from the end of
/// its current one.
static CONNECTIONS: AtomicU64 = AtomicU64::new(1);

/// The parts of a member's connection that its reader thread shares.
struct Link {
    /// The member's node id.
    node: u32,
    /// The member's incarnation.
    incarnation: u32,
    /// Tells this connection from the member's earlier ones (see
    /// [`CONNECTIONS`]).
    connection: u64,
    /// The connection; the reader thread has its own handle for reading.
    stream: TcpStream,
    /// Tags the frames written to the node; held while writing one: the
    /// join, heartbeat acknowledgements and `NodeDead` announcements all
    /// write, frames must not mix, and they must leave in the order of
    /// their sequence numbers.
    sending: Mutex<Outbound>,
    /// When the node was last heard from (any frame counts).
    last_heard: Mutex<Instant>,
    /// A silence longer than this many ms, though shorter than
    /// `dead_after`, is logged when it ends: near misses show how close a
    /// slow node came to being declared dead. Half of `dead_after`, which
    /// may change while the manager runs.
    late_after_ms: AtomicU64,
    /// Set by the reader thread when the node sent a valid `Leave`; never
    /// cleared (a node that left joins again on a new connection).
    leaving: AtomicBool,
}

impl Link {
    /// Writes one whole frame.
    fn send(&self, message: &Message) -> io::Result<()> {
        lock(&self.sending).write(&mut &self.stream, message)
    }

    /// Records that the node was just heard from; returns the silence
    /// this ended.
    fn heard(&self) -> Duration {
        let now = Instant::now();
        let mut last_heard = lock(&self.last_heard);
        let silence = now.saturating_duration_since(*last_heard);
        *last_heard = now;
        silence
    }

    /// How long the node has been silent.
    fn silence(&self) -> Duration {
        lock(&self.last_heard).elapsed()
    }

    /// Follows a change of `dead_after` (see
    /// [`ClusterManager::set_dead_after`]).
    fn follow(&self, config: &ManagerConfig) -> io::Result<()> {
        self.late_after_ms
            .store(millis(config.dead_after / 2), Ordering::Relaxed);
        set_user_timeout(&self.stream, config)
    }

    /// Whether the node asked to leave the cluster.
    fn is_leaving(&self) -> bool {
        self.leaving.load(Ordering::SeqCst)
    }

    /// Shuts the connection down: the node notices, and the reader thread
    /// reads the end of the stream and stops. Needs no lock, so it never
    /// waits for a write stuck on a node that does not read.
    fn close(&self) {
        // The node may already be gone; there is nothing to report then.
        let _ = self.stream.shutdown(Shutdown::Both);
    }
}

/// A node that completed its join.
struct Member {
    /// Shared with the member's reader thread.
    link: Arc<Link>,
    /// Frames the reader passed on for the join, or why it stopped.
    replies: Receiver<Reply>,
    /// Set while the member is suspected (see the module docs).
    suspicion: Option<Suspicion>,
}

/// What the manager knows of a suspected member.
#[derive(Debug, Clone, Copy)]
struct Suspicion {
    /// When the suspicion began.
    since: Instant,
    /// When its peers were last asked about it.
    probed: Instant,
    /// The latest time a peer heard from it, if one did within half of
    /// `dead_after` of answering.
    vouched: Option<Instant>,
}

impl Member {
    /// Makes `channel`, whose node finished its join as `node`, a member:
    /// starts the reader thread that owns reading it from now on.
    fn start(
        node: u32,
        incarnation: u32,
        channel: Channel<TcpStream>,
        events: Sender<Event>,
        epoch: Arc<AtomicU32>,
        dead_after: Duration,
    ) -> io::Result<Self> {
        let (stream, outbound, inbound) = channel.into_parts();
        // Silence is judged by the monitor: a quiet stream is no reason to
        // stop reading it.
        stream.set_read_timeout(None)?;
        let reading = stream.try_clone()?;
        let link = Arc::new(Link {
            node,
            incarnation,
            connection: CONNECTIONS.fetch_add(1, Ordering::Relaxed),
            stream,
            sending: Mutex::new(outbound),
            last_heard: Mutex::new(Instant::now()),
            late_after_ms: AtomicU64::new(millis(dead_after / 2)),
            leaving: AtomicBool::new(false),
        });
        let (replies_tx, replies) = mpsc::sync_channel(REPLY_BACKLOG);
        let reader = Reader {
            link: Arc::clone(&link),
            stream: reading,
            inbound,
            replies: replies_tx,
            events,
            epoch,
        };
        thread::Builder::new()
            .name(format!("node {node} reader"))
            .spawn(move || reader.run())?;
        Ok(Member {
            link,
            replies,
            suspicion: None,
        })
    }

    /// Drops answers that arrived while no join asked for one (a node
    /// answering a request the manager gave up on), so that they are not
    /// taken for answers to the next request; fails if the reader stopped.
    fn discard_stale_replies(&self) -> Result<(), ProtocolError> {
        loop {
            match self.replies.try_recv() {
                Ok(Ok(message)) => log(format_args!(
                    "node {}: discarded unrequested {:?}",
                    self.link.node,
                    message.kind()
                )),
                Ok(Err(e)) => return Err(e),
                Err(TryRecvError::Empty) => return Ok(()),
                Err(TryRecvError::Disconnected) => return Err(ProtocolError::Closed),
            }
        }
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        // Ends the reader thread with the membership.
        self.link.close();
    }
}

/// What a member's reader thread owns.
struct Reader {
    /// Shared with the member's registry entry.
    link: Arc<Link>,
    /// Reading handle of the member's connection.
    stream: TcpStream,
    /// Checks the tags of the member's frames.
    inbound: Inbound,
    /// Where frames for the join go.
    replies: SyncSender<Reply>,
    /// Where connection losses, suspicions and departures go (to the
    /// monitor).
    events: Sender<Event>,
    /// The manager's membership epoch, for heartbeat acknowledgements.
    epoch: Arc<AtomicU32>,
}

impl Reader {
    /// Reads the member's frames until its connection fails (or the
    /// manager shuts it down), then reports the loss to the monitor.
    fn run(mut self) {
        let reason = loop {
            let message = match self.inbound.read(&mut self.stream) {
                Ok(message) => message,
                Err(e) => {
                    let reason = e.to_string();
                    // A join waiting for an answer learns at once. A full
                    // backlog or a member already removed needs no news.
                    let _ = self.replies.try_send(Err(e));
                    break reason;
                }
            };
            let silence = self.link.heard();
            let late_after_ms = self.link.late_after_ms.load(Ordering::Relaxed);
            if millis(silence) > late_after_ms {
                log(format_args!(
                    "node {} was silent for {} ms (late; dead after {} ms)",
                    self.link.node,
                    silence.as_millis(),
                    late_after_ms * 2
                ));
            }
            match message {
                // The connection identifies the node, so the id it claims
                // is not checked.
                Message::Heartbeat { .. } => {
                    let ack = Message::HeartbeatAck {
                        epoch: self.epoch.load(Ordering::SeqCst),
                    };
                    if let Err(e) = self.link.send(&ack) {
                        break format!("cannot acknowledge a heartbeat: {e}");
                    }
                }
                Message::Suspect { peer, incarnation } => {
                    log(format_args!(
                        "node {} suspects node {peer} (incarnation {incarnation})",
                        self.link.node
                    ));
                    // The monitor outlives readers unless the manager is
                    // gone, and then nobody cares.
                    let _ = self.events.send(Event::Suspect {
                        reporter: self.link.node,
                        peer,
                        incarnation,
                    });
                }
                Message::Leave {
                    node_id,
                    incarnation,
                } => self.leave(node_id, incarnation),
                Message::ProbeReply {
                    peer,
                    incarnation,
                    heard_ms_ago,
                } => {
                    // See `Suspect`: only fails when nobody cares.
                    let _ = self.events.send(Event::ProbeReply {
                        reporter: self.link.node,
                        peer,
                        incarnation,
                        heard_ms_ago,
                    });
                }
                other => match self.replies.try_send(Ok(other)) {
                    Ok(()) => {}
                    Err(TrySendError::Full(_)) => {
                        break format!("sent more than {REPLY_BACKLOG} unrequested frames");
                    }
                    // The member was removed; the shutdown that came with
                    // it ends this loop at the next read.
                    Err(TrySendError::Disconnected(_)) => {}
                },
            }
        };
        let _ = self.events.send(Event::ConnectionLost {
            node: self.link.node,
            incarnation: self.link.incarnation,
            connection: self.link.connection,
            reason,
        });
    }

    /// Handles a `Leave` the member sent, naming `node_id` and
    /// `incarnation`: if that is the member, marks it as leaving, wakes a
    /// join waiting for its answer and tells the monitor, which removes it
    /// and confirms. Anything else is logged and ignored. Reading goes on:
    /// the member stays one, heartbeats answered, until the monitor (or a
    /// join) removes it and shuts its connection down.
    fn leave(&self, node_id: u32, incarnation: u32) {
        let link = &self.link;
        if node_id != link.node || incarnation != link.incarnation {
            log(format_args!(
                "node {} (incarnation {}): Leave of node {node_id} (incarnation {incarnation}) ignored: not this member",
                link.node, link.incarnation
            ));
            return;
        }
        if link.leaving.swap(true, Ordering::SeqCst) {
            log(format_args!(
                "node {} (incarnation {}): repeated Leave ignored",
                link.node, link.incarnation
            ));
            return;
        }
        // A join waiting for an answer from this member stops waiting; one
        // that asks later finds the member leaving. Without a join, the
        // member is removed (with this channel) soon.
        let _ = self.replies.try_send(Err(ProtocolError::Leaving));
        // See `Suspect`: only fails when nobody cares.
        let _ = self.events.send(Event::Leave {
            node: link.node,
            incarnation: link.incarnation,
        });
    }
}

/// News for the monitor from the reader threads.
enum Event {
    /// Reading a member's connection failed or reached its end.
    ConnectionLost {
        /// The member.
        node: u32,
        /// Its incarnation, so that news about an earlier incarnation of a
        /// node that rejoined is not applied to the new one.
        incarnation: u32,
        /// Which of its connections (see [`Link::connection`]): the end of
        /// one the member replaced when it resumed is no death.
        connection: u64,
        /// What happened.
        reason: String,
    },
    /// A member reports that its connection to `peer` failed.
    Suspect {
        /// The member reporting.
        reporter: u32,
        /// The node suspected.
        peer: u32,
        /// The incarnation of `peer` the failed connection was to.
        incarnation: u32,
    },
    /// A member answered a probe about `peer`.
    ProbeReply {
        /// The member answering.
        reporter: u32,
        /// The suspected node.
        peer: u32,
        /// Its incarnation, as in the probe.
        incarnation: u32,
        /// Milliseconds since `reporter` last heard from `peer`, or
        /// [`NEVER_HEARD`].
        heard_ms_ago: u32,
    },
    /// A member sent a `Leave` naming itself (its reader checked that).
    Leave {
        /// The member.
        node: u32,
        /// Its incarnation, as for [`Event::ConnectionLost`].
        incarnation: u32,
    },
}

/// A node whose death (or departure) is still to be announced.
struct Death {
    /// The dead node.
    node: u32,
    /// Its incarnation that died.
    incarnation: u32,
    /// For a node that left: its membership, kept (and so its connection
    /// kept open) until it is sent the `NodeDead` that confirms its
    /// departure; dropping it then shuts the connection down.
    leaver: Option<Member>,
}

/// Cluster membership, guarded by the registry lock that also serialises
/// joins.
struct Registry {
    /// Timeouts and liveness thresholds.
    config: ManagerConfig,
    /// Next id to hand out to a new node. An id is only handed out again
    /// to the node that had it (see the module docs), as its next
    /// incarnation, so that a stale queue pair can never be mistaken for
    /// one belonging to a different node or incarnation.
    next_id: u32,
    /// Every id handed out so far.
    ids: BTreeMap<u32, IdRecord>,
    /// How many times an id was handed out; stamps [`IdRecord::handed_out`].
    assignments: u64,
    /// Live members by id; ascending order is the order peers are paired in.
    members: BTreeMap<u32, Member>,
    /// Membership epoch: incremented (under this lock) on every join and
    /// every death or departure, never decremented. Shared with reader
    /// threads, which read it without this lock for heartbeat
    /// acknowledgements.
    epoch: Arc<AtomicU32>,
    /// Handed to each member's reader thread.
    events: Sender<Event>,
    /// Nodes declared dead whose death is not announced yet.
    unannounced: VecDeque<Death>,
    /// When the manager started; joins wait for the start-up grace to
    /// pass (see [`ManagerConfig::startup_grace`]).
    started: Instant,
    /// Set by [`ClusterManager::shutdown`]: the manager takes no node any
    /// more, and its monitor stops.
    closed: bool,
    /// Whether many members were late at once at the last check (see the
    /// module docs).
    host_slow: bool,
}

/// What the registry remembers about an id it handed out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct IdRecord {
    /// How many times the id was handed out (its latest incarnation).
    incarnation: u32,
    /// Port GID of the node the id was last handed to. While the id is a
    /// live member's, the member's GID.
    gid: [u8; 16],
    /// When the id was last handed out, as [`Registry::assignments`] then:
    /// the larger, the more recent.
    handed_out: u64,
}

/// Why a joining node gets no id, or a resuming one no membership.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refusal {
    /// Every id below [`MAX_NODES`] was handed out, none to this node.
    NoIdLeft,
    /// The live member `node` has the GID the node claims.
    GidInUse {
        /// The member.
        node: u32,
    },
    /// A join during the start-up grace, which has `left` to run.
    StartingUp {
        /// How much of the grace is left.
        left: Duration,
    },
    /// A resume naming no live member.
    Gone(Gone),
}

/// Why the node a `Resume` names is no member (any more).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Gone {
    /// Id 0, an id from [`MAX_NODES`] on, or incarnation 0.
    Invalid,
    /// The id is live as incarnation `live`, not the one named.
    OtherIncarnation {
        /// The live incarnation.
        live: u32,
    },
    /// The member sent `Leave`.
    Leaving,
    /// The id was handed out (or resumed) here and is no member now: the
    /// manager declared its incarnation `latest` dead, or it left.
    NotLive {
        /// The id's latest incarnation here.
        latest: u32,
    },
    /// The id was never handed out here, and the start-up grace is over.
    Unknown,
}

impl Refusal {
    /// The errno the node is told.
    fn errno(self) -> i32 {
        match self {
            Refusal::NoIdLeft => -libc::ENOSPC,
            Refusal::GidInUse { .. } => -libc::EADDRINUSE,
            Refusal::StartingUp { .. } => -libc::EAGAIN,
            Refusal::Gone(_) => -libc::EHOSTDOWN,
        }
    }
}

impl Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::NoIdLeft => write!(f, "all {MAX_NODES} node ids are used"),
            Refusal::GidInUse { node } => write!(f, "live node {node} has that gid"),
            Refusal::StartingUp { left } => write!(
                f,
                "starting up: the members of an earlier manager may resume for {} ms more; joins must be retried after that",
                left.as_millis()
            ),
            Refusal::Gone(Gone::Invalid) => write!(f, "no such node id or incarnation"),
            Refusal::Gone(Gone::OtherIncarnation { live }) => {
                write!(f, "the live node is incarnation {live}")
            }
            Refusal::Gone(Gone::Leaving) => write!(f, "the node is leaving"),
            Refusal::Gone(Gone::NotLive { latest }) => write!(
                f,
                "no live member: its incarnation {latest} was declared dead or left"
            ),
            Refusal::Gone(Gone::Unknown) => {
                write!(f, "unknown id, and the start-up grace is over")
            }
        }
    }
}

/// How a `Resume` is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Resumption {
    /// A live member replaces its connection.
    Reconnect,
    /// A member of the cluster an earlier manager ran, during the
    /// start-up grace.
    Adopt,
}

/// Which side of a pairing failed.
enum PairingError {
    /// The earlier node failed: drop it and go on with the join.
    Peer(ProtocolError),
    /// The joining node failed: abandon its join.
    Newcomer(ProtocolError),
}

impl Registry {
    /// An empty registry at epoch 0; `events` goes to the monitor.
    fn new(config: ManagerConfig, events: Sender<Event>) -> Self {
        Registry {
            config,
            next_id: 1,
            ids: BTreeMap::new(),
            assignments: 0,
            members: BTreeMap::new(),
            epoch: Arc::new(AtomicU32::new(0)),
            events,
            unannounced: VecDeque::new(),
            started: Instant::now(),
            closed: false,
            host_slow: false,
        }
    }

    /// What is left of the start-up grace, if it still runs.
    fn grace_left(&self) -> Option<Duration> {
        self.config
            .grace()
            .checked_sub(self.started.elapsed())
            .filter(|left| !left.is_zero())
    }

    /// Hands out the next new id, or `None` once every id below
    /// [`MAX_NODES`] has been used.
    fn allocate_id(&mut self) -> Option<u32> {
        if self.next_id >= MAX_NODES {
            return None;
        }
        let id = self.next_id;
        self.next_id += 1;
        Some(id)
    }

    /// The live member whose port GID is `gid`, if any.
    fn live_member_with_gid(&self, gid: &[u8; 16]) -> Option<u32> {
        self.members
            .keys()
            .copied()
            .find(|id| self.ids.get(id).is_some_and(|record| record.gid == *gid))
    }

    /// The id most recently handed to a node with port GID `gid` among
    /// those no live member has, if any.
    fn former_id_of(&self, gid: &[u8; 16]) -> Option<u32> {
        self.ids
            .iter()
            .filter(|&(id, record)| record.gid == *gid && !self.members.contains_key(id))
            .max_by_key(|&(_, record)| record.handed_out)
            .map(|(&id, _)| id)
    }

    /// Picks the id and incarnation of the node that sent `hello`, as the
    /// module docs describe, and records its GID for that id.
    fn assign_id(&mut self, hello: &Hello) -> Result<(u32, u32), Refusal> {
        if let Some(node) = self.live_member_with_gid(&hello.gid) {
            return Err(Refusal::GidInUse { node });
        }
        let former = if hello.rejoin_id == 0 {
            self.former_id_of(&hello.gid)
        } else {
            Some(hello.rejoin_id)
                .filter(|id| self.ids.contains_key(id) && !self.members.contains_key(id))
        };
        let handed_out = self.assignments + 1;
        if let Some((id, record)) = former.and_then(|id| Some((id, self.ids.get_mut(&id)?))) {
            if record.gid != hello.gid {
                log(format_args!(
                    "node {id} rejoins from gid {}, was gid {}",
                    Ipv6Addr::from(hello.gid),
                    Ipv6Addr::from(record.gid)
                ));
            }
            record.incarnation = record.incarnation.saturating_add(1);
            record.gid = hello.gid;
            record.handed_out = handed_out;
            self.assignments = handed_out;
            return Ok((id, record.incarnation));
        }
        let id = self.allocate_id().ok_or(Refusal::NoIdLeft)?;
        self.ids.insert(
            id,
            IdRecord {
                incarnation: 1,
                gid: hello.gid,
                handed_out,
            },
        );
        self.assignments = handed_out;
        Ok((id, 1))
    }

    /// The current membership epoch.
    fn epoch(&self) -> u32 {
        self.epoch.load(Ordering::SeqCst)
    }

    /// Moves to the next epoch and returns it.
    fn advance_epoch(&mut self) -> u32 {
        // Four billion membership changes do not happen; saturating keeps
        // the epoch from ever going back if they did.
        let next = self.epoch().saturating_add(1);
        self.epoch.store(next, Ordering::SeqCst);
        next
    }

    /// Queues the announcement of the death of `node`; logs the decision.
    fn mark_dead(&mut self, node: u32, incarnation: u32, reason: &dyn Display) {
        log(format_args!(
            "node {node} (incarnation {incarnation}) declared dead: {reason}"
        ));
        self.unannounced.push_back(Death {
            node,
            incarnation,
            leaver: None,
        });
    }

    /// Removes member `node` if it still is `incarnation`, because it
    /// leaves, and queues the announcement, to be sent to it too before its
    /// connection is shut down. Returns whether it was removed.
    fn depart(&mut self, node: u32, incarnation: u32) -> bool {
        match self.members.get(&node) {
            Some(member) if member.link.incarnation == incarnation => {}
            // Removed already (a join found it leaving, or it died first).
            _ => return false,
        }
        let leaver = self.members.remove(&node);
        log(format_args!("node {node} (incarnation {incarnation}) left"));
        self.unannounced.push_back(Death {
            node,
            incarnation,
            leaver,
        });
        true
    }

    /// Removes member `node` if it still is `incarnation`, closes its
    /// connection so its node notices, and queues the announcement.
    /// Returns whether it was removed.
    fn remove_member(&mut self, node: u32, incarnation: u32, reason: &dyn Display) -> bool {
        match self.members.get(&node) {
            Some(member) if member.link.incarnation == incarnation => {}
            // Gone already, or news about an earlier incarnation.
            _ => return false,
        }
        // Dropping the member closes its connection.
        self.members.remove(&node);
        self.mark_dead(node, incarnation, reason);
        true
    }

    /// Removes a member and announces its death (and any it leads to).
    fn declare_dead(&mut self, node: u32, incarnation: u32, reason: &dyn Display) {
        if self.remove_member(node, incarnation, reason) {
            self.announce_deaths();
        }
    }

    /// Tells every member about every queued death, one new epoch each,
    /// and a node that left about its own departure too, after which its
    /// connection is shut down. A member that cannot be told is removed in
    /// turn and announced later in the same loop, so a cascade needs
    /// neither recursion nor a second pass; it ends because every member is
    /// removed at most once.
    fn announce_deaths(&mut self) {
        while let Some(death) = self.unannounced.pop_front() {
            let epoch = self.advance_epoch();
            let news = Message::NodeDead {
                node: death.node,
                incarnation: death.incarnation,
                epoch,
            };
            let mut told = Vec::with_capacity(self.members.len());
            let mut unreachable = Vec::new();
            for (&id, member) in &self.members {
                match member.link.send(&news) {
                    Ok(()) => told.push(id),
                    Err(e) => unreachable.push((id, member.link.incarnation, e)),
                }
            }
            match death.leaver {
                Some(leaver) => {
                    // The whole frame is written before the shutdown that
                    // dropping `leaver` does, so the node reads its
                    // confirmation before the end of the connection.
                    let confirmed = leaver.link.send(&news);
                    drop(leaver);
                    match confirmed {
                        Ok(()) => log(format_args!(
                            "epoch {epoch}: told nodes {told:?} and node {} itself that node {} (incarnation {}) left",
                            death.node, death.node, death.incarnation
                        )),
                        Err(e) => log(format_args!(
                            "epoch {epoch}: told nodes {told:?} that node {} (incarnation {}) left; cannot confirm it to the node: {e}",
                            death.node, death.incarnation
                        )),
                    }
                }
                None => log(format_args!(
                    "epoch {epoch}: told nodes {told:?} that node {} (incarnation {}) is dead",
                    death.node, death.incarnation
                )),
            }
            for (id, incarnation, e) in unreachable {
                self.remove_member(
                    id,
                    incarnation,
                    &format_args!("cannot deliver NodeDead: {e}"),
                );
            }
        }
    }

    /// The `dead_after` in force: longer while the host is slow, which it
    /// is taken to be when at least half of the members, two or more, are
    /// late at once (`silences` are every member's).
    fn dead_after_now(&mut self, silences: &[Duration]) -> Duration {
        let late_after = self.config.dead_after / 2;
        let late = silences.iter().filter(|&&s| s > late_after).count();
        let host_slow = late >= 2 && late * 2 >= silences.len();
        if host_slow != self.host_slow {
            self.host_slow = host_slow;
            if host_slow {
                log(format_args!(
                    "{late} of {} members are late at once: the host is slow; dead after {} ms until they are on time",
                    silences.len(),
                    (self.config.dead_after * SLOW_HOST_FACTOR).as_millis()
                ));
            } else {
                log(format_args!(
                    "members on time again; dead after {} ms",
                    self.config.dead_after.as_millis()
                ));
            }
        }
        if host_slow {
            self.config.dead_after * SLOW_HOST_FACTOR
        } else {
            self.config.dead_after
        }
    }

    /// Suspects members silent for longer than the `dead_after` in force,
    /// probes their peers, ends the suspicion of those heard from again,
    /// and declares dead those that stayed silent through it (see the
    /// module docs).
    fn judge_silences(&mut self) {
        let now = Instant::now();
        let silences: Vec<(u32, u32, Duration)> = self
            .members
            .iter()
            .map(|(&id, member)| (id, member.link.incarnation, member.link.silence()))
            .collect();
        let all: Vec<Duration> = silences.iter().map(|&(_, _, silence)| silence).collect();
        let limit = self.dead_after_now(&all);
        let deadline = limit + self.config.suspicion;
        let vouched_deadline = deadline * VOUCHED_LIMIT_FACTOR;
        let vouch_window = self.config.dead_after / 2;
        // Often enough that a peer's answer is renewed before it is too old
        // to count.
        let probe_interval = PROBE_INTERVAL.min(vouch_window / 2);
        let mut probes = Vec::new();
        let mut dead = Vec::new();
        for (id, incarnation, silence) in silences {
            let Some(member) = self.members.get_mut(&id) else {
                continue;
            };
            if silence <= limit {
                if let Some(suspicion) = member.suspicion.take() {
                    log(format_args!(
                        "node {id} (incarnation {incarnation}) refuted the suspicion after {} ms: heard from again",
                        now.saturating_duration_since(suspicion.since).as_millis()
                    ));
                }
                continue;
            }
            let Some(suspicion) = &mut member.suspicion else {
                log(format_args!(
                    "node {id} (incarnation {incarnation}) suspected: silent for {} ms (limit {} ms); asking its peers",
                    silence.as_millis(),
                    limit.as_millis()
                ));
                member.suspicion = Some(Suspicion {
                    since: now,
                    probed: now,
                    vouched: None,
                });
                probes.push((id, incarnation));
                continue;
            };
            let vouched = suspicion
                .vouched
                .is_some_and(|at| now.saturating_duration_since(at) <= vouch_window);
            if (silence > deadline && !vouched) || silence > vouched_deadline {
                dead.push((id, incarnation, silence, suspicion.vouched.is_some()));
            } else if now.saturating_duration_since(suspicion.probed) >= probe_interval {
                suspicion.probed = now;
                probes.push((id, incarnation));
            }
        }
        for (peer, incarnation) in probes {
            self.probe(peer, incarnation);
        }
        for (id, incarnation, silence, vouched) in dead {
            let peers = if vouched {
                "only its peers heard from it"
            } else {
                "no peer heard from it"
            };
            self.declare_dead(
                id,
                incarnation,
                &format_args!("silent for {} ms, {peers}", silence.as_millis()),
            );
        }
    }

    /// Asks every member but `peer` when it last heard from `peer`.
    fn probe(&self, peer: u32, incarnation: u32) {
        let probe = Message::Probe { peer, incarnation };
        for (&id, member) in &self.members {
            if id != peer {
                // A member that cannot be asked has its own connection
                // trouble, which its reader reports.
                let _ = member.link.send(&probe);
            }
        }
    }

    /// Notes `reporter`'s answer to a probe about `peer`: a recent sign of
    /// life holds off its death (see the module docs).
    fn note_probe_reply(&mut self, reporter: u32, peer: u32, incarnation: u32, heard_ms_ago: u32) {
        let vouch_window = self.config.dead_after / 2;
        let Some(member) = self.members.get_mut(&peer) else {
            return;
        };
        let Some(suspicion) = member.suspicion.as_mut() else {
            return;
        };
        if member.link.incarnation != incarnation || heard_ms_ago == NEVER_HEARD {
            return;
        }
        let heard_ago = Duration::from_millis(heard_ms_ago.into());
        if heard_ago > vouch_window {
            return;
        }
        let at = Instant::now()
            .checked_sub(heard_ago)
            .unwrap_or_else(Instant::now);
        if suspicion.vouched.is_none_or(|earlier| earlier < at) {
            log(format_args!(
                "node {reporter} heard from suspected node {peer} (incarnation {incarnation}) {heard_ms_ago} ms ago"
            ));
            suspicion.vouched = Some(at);
        }
    }

    /// Applies news from a reader thread.
    fn handle(&mut self, event: Event) {
        match event {
            Event::ConnectionLost {
                node,
                incarnation,
                connection,
                reason,
            } => match self.members.get(&node) {
                Some(member) if member.link.connection == connection => self.declare_dead(
                    node,
                    incarnation,
                    &format_args!("connection lost: {reason}"),
                ),
                Some(member) if member.link.incarnation == incarnation => log(format_args!(
                    "node {node} (incarnation {incarnation}): the connection it replaced ended: {reason}"
                )),
                // Removed already, or news about an earlier incarnation.
                _ => {}
            },
            Event::Suspect {
                reporter,
                peer,
                incarnation,
            } => self.judge_suspicion(reporter, peer, incarnation),
            Event::Leave { node, incarnation } => {
                if self.depart(node, incarnation) {
                    self.announce_deaths();
                }
            }
            Event::ProbeReply {
                reporter,
                peer,
                incarnation,
                heard_ms_ago,
            } => self.note_probe_reply(reporter, peer, incarnation, heard_ms_ago),
        }
    }

    /// Declares `peer` dead if it is the suspected incarnation and has been
    /// silent for longer than the grace; a node that still heartbeats may
    /// merely have lost one connection, which is not the manager's to fix.
    fn judge_suspicion(&mut self, reporter: u32, peer: u32, incarnation: u32) {
        let silence = match self.members.get(&peer) {
            Some(member) if member.link.incarnation == incarnation => member.link.silence(),
            Some(member) => {
                log(format_args!(
                    "suspicion of node {peer} (incarnation {incarnation}) by node {reporter} ignored: the live node {peer} is incarnation {}",
                    member.link.incarnation
                ));
                return;
            }
            None => {
                log(format_args!(
                    "suspicion of node {peer} (incarnation {incarnation}) by node {reporter} ignored: not a live member"
                ));
                return;
            }
        };
        if silence > self.config.suspect_grace {
            self.declare_dead(
                peer,
                incarnation,
                &format_args!(
                    "suspected by node {reporter}, silent for {} ms",
                    silence.as_millis()
                ),
            );
        } else {
            log(format_args!(
                "suspicion of node {peer} by node {reporter} ignored: heard from {} ms ago",
                silence.as_millis()
            ));
        }
    }

    /// Whether member `node` sent a valid `Leave`.
    fn is_leaving(&self, node: u32) -> bool {
        self.members
            .get(&node)
            .is_some_and(|member| member.link.is_leaving())
    }

    /// Runs a whole join for a node that sent `hello` on `channel`, then
    /// announces the deaths found on the way, now that the newcomer is a
    /// member (or gone).
    fn admit(&mut self, channel: Channel<TcpStream>, address: SocketAddr, hello: Hello) {
        if self.closed {
            log(format_args!("rejected {address}: shutting down"));
            let _ = channel.stream().shutdown(Shutdown::Both);
            return;
        }
        self.join(channel, address, hello);
        self.announce_deaths();
    }

    /// Assigns the newcomer its id, pairs it with every member and makes
    /// it a member.
    fn join(&mut self, mut channel: Channel<TcpStream>, address: SocketAddr, hello: Hello) {
        let assigned = match self.grace_left() {
            Some(left) => Err(Refusal::StartingUp { left }),
            None => self.assign_id(&hello),
        };
        let (id, incarnation) = match assigned {
            Ok(assigned) => assigned,
            Err(refusal) => {
                log(format_args!(
                    "rejected {address} (gid {}, rejoin id {}): {refusal}",
                    Ipv6Addr::from(hello.gid),
                    hello.rejoin_id
                ));
                refuse(&mut channel, refusal.errno());
                return;
            }
        };
        let welcome = Message::Welcome {
            node_id: id,
            incarnation,
        };
        if let Err(e) = channel.send(&welcome) {
            log(format_args!(
                "join of node {id} from {address} abandoned: {e}"
            ));
            return;
        }

        let mut newcomer = Newcomer {
            channel: &mut channel,
            epoch: Arc::clone(&self.epoch),
        };
        let earlier: Vec<u32> = self.members.keys().copied().collect();
        let mut connected = Vec::with_capacity(earlier.len());
        for peer in earlier {
            let Some(peer_incarnation) = self.members.get(&peer).map(|m| m.link.incarnation) else {
                continue;
            };
            match self.pair(peer, id, incarnation, &mut newcomer) {
                Ok(()) => connected.push(peer),
                Err(PairingError::Peer(_)) if self.is_leaving(peer) => {
                    // Whatever went wrong, the node is on its way out: it
                    // leaves, and is confirmed so after the join.
                    self.depart(peer, peer_incarnation);
                }
                Err(PairingError::Peer(e)) => {
                    self.remove_member(
                        peer,
                        peer_incarnation,
                        &format_args!("failed while node {id} joined: {e}"),
                    );
                }
                Err(PairingError::Newcomer(e)) => {
                    log(format_args!(
                        "join of node {id} from {address} abandoned while pairing with node {peer}: {e}"
                    ));
                    refuse(&mut channel, e.errno());
                    // `peer` at least was asked to prepare for the
                    // newcomer, and earlier ones may be connected to it.
                    self.mark_dead(id, incarnation, &format_args!("join abandoned: {e}"));
                    return;
                }
            }
        }

        let member = match Member::start(
            id,
            incarnation,
            channel,
            self.events.clone(),
            Arc::clone(&self.epoch),
            self.config.dead_after,
        ) {
            Ok(member) => member,
            Err(e) => {
                // The channel went into `Member::start` and was closed with it.
                log(format_args!(
                    "join of node {id} from {address} abandoned: cannot start its reader: {e}"
                ));
                if !connected.is_empty() {
                    self.mark_dead(id, incarnation, &format_args!("join abandoned: {e}"));
                }
                return;
            }
        };
        // Bounded by MAX_NODES, so the count always fits.
        let total_nodes = u32::try_from(self.members.len() + 1).unwrap_or(u32::MAX);
        // The epoch only moves once the node knows it has joined.
        let epoch = self.epoch().saturating_add(1);
        if let Err(e) = member.link.send(&Message::JoinDone { total_nodes, epoch }) {
            log(format_args!(
                "join of node {id} from {address} abandoned: {e}"
            ));
            if !connected.is_empty() {
                self.mark_dead(id, incarnation, &format_args!("join abandoned: {e}"));
            }
            return;
        }
        self.epoch.store(epoch, Ordering::SeqCst);
        log(format_args!(
            "node {id} (incarnation {incarnation}) joined from {address} (gid {}, lid {}), connected to nodes {connected:?}, now {total_nodes} live, epoch {epoch}",
            Ipv6Addr::from(hello.gid),
            hello.lid
        ));
        self.members.insert(id, member);
    }

    /// Decides whether the node that sent `resume` may resume its
    /// membership, and how, as the module docs describe.
    fn judge_resume(&self, resume: &Resume) -> Result<Resumption, Refusal> {
        let id = resume.node_id;
        if !(1..MAX_NODES).contains(&id) || resume.incarnation == 0 {
            return Err(Refusal::Gone(Gone::Invalid));
        }
        let resumption = match self.members.get(&id) {
            Some(member) if member.link.incarnation != resume.incarnation => {
                return Err(Refusal::Gone(Gone::OtherIncarnation {
                    live: member.link.incarnation,
                }));
            }
            Some(member) if member.link.is_leaving() => return Err(Refusal::Gone(Gone::Leaving)),
            Some(_) => Resumption::Reconnect,
            None => match self.ids.get(&id) {
                Some(record) => {
                    return Err(Refusal::Gone(Gone::NotLive {
                        latest: record.incarnation,
                    }));
                }
                None if self.grace_left().is_none() => return Err(Refusal::Gone(Gone::Unknown)),
                None => Resumption::Adopt,
            },
        };
        match self.live_member_with_gid(&resume.gid) {
            Some(node) if node != id => Err(Refusal::GidInUse { node }),
            _ => Ok(resumption),
        }
    }

    /// Resumes the membership that the node that sent `resume`, the first
    /// frame on `channel`, claims, or refuses it; see the module docs.
    fn resume(&mut self, mut channel: Channel<TcpStream>, address: SocketAddr, resume: Resume) {
        let Resume {
            node_id: id,
            incarnation,
            gid,
            ..
        } = resume;
        if self.closed {
            log(format_args!("rejected {address}: shutting down"));
            let _ = channel.stream().shutdown(Shutdown::Both);
            return;
        }
        let resumption = match self.judge_resume(&resume) {
            Ok(resumption) => resumption,
            Err(refusal) => {
                log(format_args!(
                    "refused to resume node {id} (incarnation {incarnation}) from {address} (gid {}): {refusal}",
                    Ipv6Addr::from(gid)
                ));
                refuse(&mut channel, refusal.errno());
                return;
            }
        };
        // Epochs never go back, also across a restart of the manager: a
        // node drops news whose epoch is not newer than what it applied.
        self.epoch.fetch_max(resume.epoch, Ordering::SeqCst);
        let epoch = self.epoch();
        if let Err(e) = channel.send(&Message::Resumed { epoch }) {
            log(format_args!(
                "resume of node {id} (incarnation {incarnation}) from {address} abandoned: {e}"
            ));
            return;
        }
        let member = match Member::start(
            id,
            incarnation,
            channel,
            self.events.clone(),
            Arc::clone(&self.epoch),
            self.config.dead_after,
        ) {
            Ok(member) => member,
            Err(e) => {
                // The node finds its new connection closed and resumes
                // again; nothing changed meanwhile.
                log(format_args!(
                    "resume of node {id} (incarnation {incarnation}) from {address} abandoned: cannot start its reader: {e}"
                ));
                return;
            }
        };
        match resumption {
            Resumption::Reconnect => {
                if let Some(record) = self.ids.get_mut(&id) {
                    if record.gid != gid {
                        log(format_args!(
                            "node {id} resumes from gid {}, was gid {}",
                            Ipv6Addr::from(gid),
                            Ipv6Addr::from(record.gid)
                        ));
                        record.gid = gid;
                    }
                }
                log(format_args!(
                    "node {id} (incarnation {incarnation}) resumed from {address} over a new connection, epoch {epoch}"
                ));
            }
            Resumption::Adopt => {
                // Its id is the node's: remembered for a rejoin by GID, and
                // never handed out to a new node.
                let handed_out = self.assignments + 1;
                self.assignments = handed_out;
                self.ids.insert(
                    id,
                    IdRecord {
                        incarnation,
                        gid,
                        handed_out,
                    },
                );
                self.next_id = self.next_id.max(id + 1);
                log(format_args!(
                    "node {id} (incarnation {incarnation}) resumed from {address} (gid {}), a member of the cluster of an earlier manager; now {} live, epoch {epoch}",
                    Ipv6Addr::from(gid),
                    self.members.len() + 1
                ));
            }
        }
        // A live member's earlier connection goes with its old entry: it is
        // shut down, and its end is no death (see `Event::ConnectionLost`).
        self.members.insert(id, member);
    }

    /// Stops taking nodes and closes every member's connection without
    /// declaring anyone dead: the members resume with the next manager.
    fn close(&mut self) {
        self.closed = true;
        let nodes: Vec<u32> = self.members.keys().copied().collect();
        // Dropping a member shuts its connection down.
        self.members.clear();
        self.unannounced.clear();
        log(format_args!(
            "shut down: closed the connections of nodes {nodes:?} without declaring them dead"
        ));
    }

    /// Connects the queue pairs between the member `peer` and the joining
    /// node `newcomer_id`, in the order the wire protocol prescribes.
    fn pair(
        &self,
        peer: u32,
        newcomer_id: u32,
        newcomer_incarnation: u32,
        newcomer: &mut Newcomer<'_>,
    ) -> Result<(), PairingError> {
        let Some(member) = self.members.get(&peer) else {
            return Ok(());
        };
        // No queue pairs for a node on its way out.
        if member.link.is_leaving() {
            return Err(PairingError::Peer(ProtocolError::Leaving));
        }
        member.discard_stale_replies().map_err(PairingError::Peer)?;
        let mut earlier = EarlierMember {
            member,
            io_timeout: self.config.io_timeout,
        };

        let peer_endpoint =
            prepare(&mut earlier, newcomer_id, newcomer_incarnation).map_err(PairingError::Peer)?;
        let newcomer_endpoint =
            prepare(newcomer, peer, member.link.incarnation).map_err(PairingError::Newcomer)?;
        connect(&mut earlier, newcomer_id, newcomer_endpoint).map_err(PairingError::Peer)?;
        connect(newcomer, peer, peer_endpoint).map_err(PairingError::Newcomer)?;
        log(format_args!(
            "node {newcomer_id} (qpn {}) <-> node {peer} (qpn {}) connected",
            newcomer_endpoint.qpn, peer_endpoint.qpn
        ));
        Ok(())
    }
}

/// A node the join talks to.
trait Counterpart {
    /// Sends one frame.
    fn send(&mut self, message: &Message) -> Result<(), ProtocolError>;
    /// Waits for the node's next answer.
    fn receive(&mut self) -> Result<Message, ProtocolError>;
}

/// The joining node, whose connection the join reads itself.
struct Newcomer<'a> {
    /// The newcomer's connection.
    channel: &'a mut Channel<TcpStream>,
    /// For acknowledging heartbeats sent before the join ends.
    epoch: Arc<AtomicU32>,
}

impl Counterpart for Newcomer<'_> {
    fn send(&mut self, message: &Message) -> Result<(), ProtocolError> {
        Ok(self.channel.send(message)?)
    }

    fn receive(&mut self) -> Result<Message, ProtocolError> {
        loop {
            match self.channel.receive()? {
                // A node may start its heartbeats as soon as it has its id.
                Message::Heartbeat { .. } => {
                    let ack = Message::HeartbeatAck {
                        epoch: self.epoch.load(Ordering::SeqCst),
                    };
                    self.channel.send(&ack)?;
                }
                message => return Ok(message),
            }
        }
    }
}

/// A member, whose answers come through its reader thread.
struct EarlierMember<'a> {
    /// The member.
    member: &'a Member,
    /// Longest to wait for one answer.
    io_timeout: Duration,
}

impl Counterpart for EarlierMember<'_> {
    fn send(&mut self, message: &Message) -> Result<(), ProtocolError> {
        Ok(self.member.link.send(message)?)
    }

    fn receive(&mut self) -> Result<Message, ProtocolError> {
        match self.member.replies.recv_timeout(self.io_timeout) {
            Ok(reply) => reply,
            Err(RecvTimeoutError::Timeout) => {
                Err(ProtocolError::Io(io::ErrorKind::TimedOut.into()))
            }
            Err(RecvTimeoutError::Disconnected) => Err(ProtocolError::Closed),
        }
    }
}

/// Asks `node` to create a queue pair for `peer`, whose incarnation is
/// `incarnation`; returns its endpoint.
fn prepare(
    node: &mut impl Counterpart,
    peer: u32,
    incarnation: u32,
) -> Result<Endpoint, ProtocolError> {
    node.send(&Message::Prepare { peer, incarnation })?;
    match expect(node, Kind::QpInfo)? {
        Message::QpInfo(endpoint) if endpoint.peer == peer => Ok(endpoint),
        Message::QpInfo(endpoint) => Err(ProtocolError::WrongPeer {
            expected: peer,
            received: endpoint.peer,
        }),
        other => Err(unexpected(Kind::QpInfo, &other)),
    }
}

/// Tells `node` to connect its queue pair for `peer` to `remote_endpoint`
/// (the endpoint `peer` created for that node).
fn connect(
    node: &mut impl Counterpart,
    peer: u32,
    remote_endpoint: Endpoint,
) -> Result<(), ProtocolError> {
    // In a Connect, `peer` names the owner of the endpoint.
    let endpoint = Endpoint {
        peer,
        ..remote_endpoint
    };
    node.send(&Message::Connect(endpoint))?;
    match expect(node, Kind::Connected)? {
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

/// Waits for the next answer and insists on `kind`; a `Failure` frame
/// becomes [`ProtocolError::Refused`].
fn expect(node: &mut impl Counterpart, kind: Kind) -> Result<Message, ProtocolError> {
    match node.receive()? {
        message if message.kind() == kind => Ok(message),
        Message::Failure { errno } => Err(ProtocolError::Refused { errno }),
        other => Err(unexpected(kind, &other)),
    }
}

/// The error for `received` arriving where `expected` was due.
fn unexpected(expected: Kind, received: &Message) -> ProtocolError {
    ProtocolError::Unexpected {
        expected,
        received: received.kind(),
    }
}

/// Tells a node its request failed; it is about to be disconnected, so a
/// failure to deliver the news changes nothing.
fn refuse(channel: &mut Channel<TcpStream>, errno: i32) {
    let _ = channel.send(&Message::Failure { errno });
    let _ = channel.stream().shutdown(Shutdown::Both);
}

/// Writes one event line to stderr.
fn log(event: fmt::Arguments<'_>) {
    eprintln!("lite-cm: {event}");
}

/// A cluster manager bound to a TCP address.
pub struct ClusterManager {
    /// Where nodes connect.
    listener: TcpListener,
    /// Handed to every connection's thread; `dead_after` may change while
    /// the manager runs.
    config: Mutex<ManagerConfig>,
    /// What nodes must prove they hold; handed to every connection's thread.
    secret: Arc<ClusterSecret>,
    /// Membership; the monitor thread holds a weak reference.
    registry: Arc<Mutex<Registry>>,
    /// The registry's epoch, readable while a join holds the registry.
    epoch: Arc<AtomicU32>,
    /// Set by [`ClusterManager::shutdown`].
    stopping: AtomicBool,
}

impl ClusterManager {
    /// Binds the listening socket and starts the thread that watches
    /// members; it ends soon after the manager is dropped. Only nodes that
    /// hold `secret` get past the authentication.
    pub fn bind(
        address: impl ToSocketAddrs,
        config: ManagerConfig,
        secret: ClusterSecret,
    ) -> io::Result<Self> {
        let listener = TcpListener::bind(address)?;
        let (events_tx, events) = mpsc::channel();
        let registry = Registry::new(config, events_tx);
        let epoch = Arc::clone(&registry.epoch);
        let registry = Arc::new(Mutex::new(registry));
        let watched = Arc::downgrade(&registry);
        thread::Builder::new()
            .name("membership monitor".into())
            .spawn(move || monitor(&watched, &events))?;
        Ok(ClusterManager {
            listener,
            config: Mutex::new(config),
            secret: Arc::new(secret),
            registry,
            epoch,
            stopping: AtomicBool::new(false),
        })
    }

    /// Stops the manager as if its process ended: [`ClusterManager::run`]
    /// returns, the listening socket takes no more connections, every
    /// member's connection is shut down and the membership monitor stops.
    /// Nobody is declared dead: the members resume with the next manager.
    /// Connections that have yet to send their first frame are refused
    /// once they do.
    pub fn shutdown(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        // SAFETY: the descriptor is open while `self.listener` is borrowed.
        // Shutting a listening socket down ends it as a listener, and wakes
        // an `accept` waiting on it (with `EINVAL`).
        if unsafe { libc::shutdown(self.listener.as_raw_fd(), libc::SHUT_RDWR) } != 0 {
            log(format_args!(
                "cannot shut the listening socket down: {}",
                io::Error::last_os_error()
            ));
        }
        lock(&self.registry).close();
    }

    /// Address the manager listens on (useful when bound to port 0).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Ids of the nodes currently in the cluster, ascending.
    pub fn live_nodes(&self) -> Vec<u32> {
        lock(&self.registry).members.keys().copied().collect()
    }

    /// Membership epoch: how many joins, deaths and departures the manager
    /// has seen.
    pub fn epoch(&self) -> u32 {
        self.epoch.load(Ordering::SeqCst)
    }

    /// Changes [`ManagerConfig::dead_after`] from now on: for judging
    /// members' silences, for the log of late heartbeats and for the TCP
    /// user timeout of every connection, current and later. Returns the
    /// value it replaces.
    pub fn set_dead_after(&self, dead_after: Duration) -> Duration {
        let config = {
            let mut config = lock(&self.config);
            config.dead_after = dead_after;
            *config
        };
        let mut registry = lock(&self.registry);
        let earlier = registry.config.dead_after;
        registry.config = ManagerConfig {
            dead_after,
            ..registry.config
        };
        for (id, member) in &registry.members {
            if let Err(e) = member.link.follow(&config) {
                log(format_args!(
                    "node {id}: cannot change its TCP user timeout: {e}"
                ));
            }
        }
        earlier
    }

    /// Accepts nodes, each connection on its own thread, until the
    /// listening socket fails or [`ClusterManager::shutdown`] is called;
    /// returns that failure (or says the manager was shut down).
    pub fn run(&self) -> io::Error {
        let config = *lock(&self.config);
        let grace = match config.grace() {
            Duration::ZERO => String::new(),
            grace => format!(
                "; joins wait {} ms for the members of an earlier manager to resume",
                grace.as_millis()
            ),
        };
        match self.local_addr() {
            Ok(address) => log(format_args!(
                "listening on {address}; nodes silent for {} ms are suspected, for {} ms more dead{grace}",
                config.dead_after.as_millis(),
                config.suspicion.as_millis()
            )),
            Err(e) => return e,
        }
        loop {
            let accepted = self.listener.accept();
            if self.stopping.load(Ordering::SeqCst) {
                return io::Error::other("the manager was shut down");
            }
            let (stream, address) = match accepted {
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
            let config = *lock(&self.config);
            let secret = Arc::clone(&self.secret);
            let spawned = thread::Builder::new()
                .name(format!("join {address}"))
                .spawn(move || serve_connection(&registry, config, &secret, stream, address));
            if let Err(e) = spawned {
                log(format_args!("cannot serve {address}: {e}"));
            }
        }
    }
}

/// Whether an `accept` failure may pass (rather than meaning the listening
/// socket is unusable).
fn is_transient_accept_error(e: &io::Error) -> bool {
    !matches!(
        e.raw_os_error(),
        Some(libc::EBADF | libc::EINVAL | libc::ENOTSOCK | libc::EOPNOTSUPP)
    )
}

/// Locks a mutex; a panic in another thread leaves the data usable
/// because no critical section leaves it half-changed.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The monitor thread: applies the readers' news and declares silent
/// members dead, until the manager is gone. It waits for the registry lock
/// like a join, so while a join runs, its checks wait for the join to end.
fn monitor(registry: &Weak<Mutex<Registry>>, events: &Receiver<Event>) {
    let mut next_check = Instant::now() + MONITOR_INTERVAL;
    loop {
        let event = match events.recv_timeout(next_check.saturating_duration_since(Instant::now()))
        {
            Ok(event) => Some(event),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => return,
        };
        let Some(registry) = registry.upgrade() else {
            return;
        };
        let mut registry = lock(&registry);
        if registry.closed {
            return;
        }
        if let Some(event) = event {
            registry.handle(event);
        }
        // Also after an event, so that a stream of events cannot put the
        // check off.
        if Instant::now() >= next_check {
            registry.judge_silences();
            next_check = Instant::now() + MONITOR_INTERVAL;
        }
    }
}

/// Sets an integer socket option.
fn set_socket_option(
    stream: &TcpStream,
    level: libc::c_int,
    option: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    // Lossless: the size of a C int.
    let len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: the descriptor is open while `stream` is borrowed, and the
    // option value points at a live c_int of the length given.
    let result = unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            level,
            option,
            (&raw const value).cast(),
            len,
        )
    };
    if result == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Configures a new connection: timeouts for the `Hello` and for writes,
/// and TCP-level detection of a node that vanished without closing its
/// connection (keepalive probes when idle, the user timeout when data
/// stays unacknowledged).
fn configure_socket(stream: &TcpStream, config: &ManagerConfig) -> io::Result<()> {
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(config.hello_timeout))?;
    stream.set_write_timeout(Some(config.io_timeout))?;
    set_socket_option(stream, libc::SOL_SOCKET, libc::SO_KEEPALIVE, 1)?;
    set_socket_option(
        stream,
        libc::IPPROTO_TCP,
        libc::TCP_KEEPIDLE,
        KEEPALIVE_IDLE_SECS,
    )?;
    set_socket_option(
        stream,
        libc::IPPROTO_TCP,
        libc::TCP_KEEPINTVL,
        KEEPALIVE_INTERVAL_SECS,
    )?;
    set_socket_option(
        stream,
        libc::IPPROTO_TCP,
        libc::TCP_KEEPCNT,
        KEEPALIVE_PROBES,
    )?;
    set_user_timeout(stream, config)
}

/// Sets the TCP user timeout of `stream`: data unacknowledged for as long
/// as a silent member takes to be declared dead ends the connection.
fn set_user_timeout(stream: &TcpStream, config: &ManagerConfig) -> io::Result<()> {
    let user_timeout_ms = libc::c_int::try_from(millis(config.dead_after + config.suspicion))
        .unwrap_or(libc::c_int::MAX)
        // 0 would mean the system default.
        .max(1);
    set_socket_option(
        stream,
        libc::IPPROTO_TCP,
        libc::TCP_USER_TIMEOUT,
        user_timeout_ms,
    )
}

/// `duration` in whole milliseconds, saturating.
fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// How a connection introduces itself.
enum Introduction {
    /// A node joins.
    Hello(Hello),
    /// A member resumes.
    Resume(Resume),
}

/// Serves one connection: authenticates the node, then reads its `Hello`
/// and runs the join, or reads its `Resume` and resumes the membership.
fn serve_connection(
    registry: &Mutex<Registry>,
    config: ManagerConfig,
    secret: &ClusterSecret,
    stream: TcpStream,
    address: SocketAddr,
) {
    if let Err(e) = configure_socket(&stream, &config) {
        log(format_args!(
            "rejected {address}: cannot configure socket: {e}"
        ));
        return;
    }
    // Under the same `hello_timeout` as the first frame.
    let mut channel = match Channel::accept(stream, secret) {
        Ok(channel) => channel,
        Err(e @ ProtocolError::WrongProof) => {
            log(format_args!(
                "rejected {address}: {e} (the node holds another secret); refused with EKEYREJECTED"
            ));
            return;
        }
        Err(e) => {
            log(format_args!(
                "rejected {address}: authentication failed: {e}"
            ));
            return;
        }
    };
    let introduction = match channel.receive() {
        Ok(Message::Hello(hello)) => Introduction::Hello(hello),
        Ok(Message::Resume(resume)) => Introduction::Resume(resume),
        Ok(other) => {
            let e = unexpected(Kind::Hello, &other);
            log(format_args!("rejected {address}: {e}"));
            refuse(&mut channel, e.errno());
            return;
        }
        Err(e @ ProtocolError::BadTag) => {
            // Nothing more is said on a connection someone tampers with.
            log(format_args!("rejected {address}: {e}; connection closed"));
            let _ = channel.stream().shutdown(Shutdown::Both);
            return;
        }
        Err(e) => {
            log(format_args!("rejected {address}: {e}"));
            refuse(&mut channel, e.errno());
            return;
        }
    };
    if let Err(e) = channel.stream().set_read_timeout(Some(config.io_timeout)) {
        log(format_args!(
            "rejected {address}: cannot configure socket: {e}"
        ));
        return;
    }
    match introduction {
        Introduction::Hello(hello) => lock(registry).admit(channel, address, hello),
        Introduction::Resume(resume) => lock(registry).resume(channel, address, resume),
    }
}

/// Lets tests jump ahead in the id space without 63 joins.
#[cfg(test)]
pub(crate) fn set_next_id(manager: &ClusterManager, next_id: u32) {
    lock(&manager.registry).next_id = next_id;
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;

    fn registry() -> Registry {
        let (events, _) = mpsc::channel();
        Registry::new(ManagerConfig::default(), events)
    }

    #[test]
    fn ids_start_at_one_and_stop_below_max_nodes() {
        let mut registry = registry();
        let ids: Vec<u32> = std::iter::from_fn(|| registry.allocate_id()).collect();
        assert_eq!(ids.first(), Some(&1));
        assert_eq!(ids.last(), Some(&(MAX_NODES - 1)));
        assert_eq!(ids.len(), (MAX_NODES - 1) as usize);
        assert!(ids.windows(2).all(|pair| pair[1] == pair[0] + 1));
        assert_eq!(registry.allocate_id(), None);
    }

    /// IPv4-mapped GID of the host 10.0.0.`host`, as RoCE would report it.
    fn gid(host: u8) -> [u8; 16] {
        Ipv4Addr::new(10, 0, 0, host).to_ipv6_mapped().octets()
    }

    fn hello(host: u8, rejoin_id: u32) -> Hello {
        Hello {
            gid: gid(host),
            lid: 0,
            rejoin_id,
        }
    }

    /// Makes `id`, handed out by `registry`, a live member over an
    /// authenticated loopback connection; returns the node's end of it.
    fn make_live(registry: &mut Registry, id: u32) -> Channel<TcpStream> {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        let address = listener.local_addr().expect("bound address");
        let secret = ClusterSecret::new(b"secret".to_vec()).expect("valid secret");
        let node_secret = secret.clone();
        let node = thread::spawn(move || {
            let stream = TcpStream::connect(address).expect("connect");
            Channel::connect(stream, &node_secret).expect("node authenticates")
        });
        let (manager_end, _) = listener.accept().expect("accept");
        let manager_end = Channel::accept(manager_end, &secret).expect("manager authenticates");
        let node_end = node.join().expect("node thread");
        let member = Member::start(
            id,
            registry.ids[&id].incarnation,
            manager_end,
            registry.events.clone(),
            Arc::clone(&registry.epoch),
            registry.config.dead_after,
        )
        .expect("start member");
        registry.members.insert(id, member);
        node_end
    }

    #[test]
    fn only_ids_handed_out_before_come_back_as_new_incarnations() {
        let mut registry = registry();
        assert_eq!(registry.assign_id(&hello(1, 0)), Ok((1, 1)));
        // Asked for by id, it comes back even from another GID.
        assert_eq!(registry.assign_id(&hello(2, 1)), Ok((1, 2)));
        assert_eq!(registry.assign_id(&hello(3, 1)), Ok((1, 3)));
        assert_eq!(registry.ids[&1].gid, gid(3));
        // Never handed out: a new id, not the one asked for.
        assert_eq!(registry.assign_id(&hello(4, 7)), Ok((2, 1)));
        assert_eq!(registry.assign_id(&hello(5, MAX_NODES + 1)), Ok((3, 1)));
        assert_eq!(registry.assign_id(&hello(6, 2)), Ok((2, 2)));
        // Id 1 moved away from the first GID, which is new again.
        assert_eq!(registry.assign_id(&hello(1, 0)), Ok((4, 1)));
        assert_eq!(registry.assign_id(&hello(3, 0)), Ok((1, 4)));
    }

    #[test]
    fn a_known_gid_gets_the_id_it_had_most_recently() {
        let mut registry = registry();
        assert_eq!(registry.former_id_of(&gid(1)), None);
        assert_eq!(registry.assign_id(&hello(1, 0)), Ok((1, 1)));
        assert_eq!(registry.assign_id(&hello(2, 0)), Ok((2, 1)));
        assert_eq!(registry.former_id_of(&gid(1)), Some(1));
        assert_eq!(registry.former_id_of(&gid(2)), Some(2));
        assert_eq!(registry.assign_id(&hello(1, 0)), Ok((1, 2)));
        assert_eq!(registry.assign_id(&hello(2, 0)), Ok((2, 2)));
        assert_eq!(registry.assign_id(&hello(9, 0)), Ok((3, 1)));

        // Ids 3 and 4 both went to the GID of host 5 last: the one handed
        // out more recently comes back.
        assert_eq!(registry.assign_id(&hello(5, 0)), Ok((4, 1)));
        assert_eq!(registry.assign_id(&hello(5, 3)), Ok((3, 2)));
        assert_eq!(registry.former_id_of(&gid(5)), Some(3));
        assert_eq!(registry.assign_id(&hello(5, 0)), Ok((3, 3)));
        assert_eq!(registry.assign_id(&hello(5, 4)), Ok((4, 2)));
        assert_eq!(registry.assign_id(&hello(5, 0)), Ok((4, 3)));
        assert_eq!(registry.former_id_of(&gid(9)), None);
        assert_eq!(registry.next_id, 5);
    }

    #[test]
    fn the_gid_of_a_live_member_is_refused() {
        let mut registry = registry();
        assert_eq!(registry.assign_id(&hello(1, 0)), Ok((1, 1)));
        let _node = make_live(&mut registry, 1);
        assert_eq!(registry.live_member_with_gid(&gid(1)), Some(1));
        assert_eq!(registry.live_member_with_gid(&gid(2)), None);
        assert_eq!(registry.former_id_of(&gid(1)), None);
        for rejoin_id in [0, 1, 5] {
            assert_eq!(
                registry.assign_id(&hello(1, rejoin_id)),
                Err(Refusal::GidInUse { node: 1 }),
                "rejoin_id {rejoin_id}"
            );
        }
        // Nothing was handed out.
        assert_eq!(registry.ids[&1].incarnation, 1);
        assert_eq!(registry.assignments, 1);
        assert_eq!(registry.next_id, 2);
        // The live id itself goes to nobody else.
        assert_eq!(registry.assign_id(&hello(2, 1)), Ok((2, 1)));

        registry.members.remove(&1);
        assert_eq!(registry.live_member_with_gid(&gid(1)), None);
        assert_eq!(registry.assign_id(&hello(1, 0)), Ok((1, 2)));
    }

    #[test]
    fn a_full_id_space_still_takes_rejoins() {
        let mut registry = registry();
        registry.next_id = MAX_NODES - 1;
        assert_eq!(registry.assign_id(&hello(1, 0)), Ok((MAX_NODES - 1, 1)));
        assert_eq!(registry.assign_id(&hello(2, 0)), Err(Refusal::NoIdLeft));
        assert_eq!(registry.assign_id(&hello(1, 0)), Ok((MAX_NODES - 1, 2)));
        assert_eq!(
            registry.assign_id(&hello(3, MAX_NODES - 1)),
            Ok((MAX_NODES - 1, 3))
        );
    }
}
