// SPDX-License-Identifier: GPL-2.0

//! Joining the cluster through the cluster manager, and staying in it.
//!
//! The node keeps its TCP connection to the manager open after joining.
//! Kernel threads use it: `lite_cm` reads everything the manager sends and
//! does nothing slow itself: it answers what is answered at once (the
//! manager's heartbeat answers, its probes of suspected peers) and queues
//! the rest (requests to connect to nodes joining later, deaths of nodes)
//! for `lite_cm_events`, which handles them in order, however long a
//! peer's departure or a connection takes. `lite_heartbeat` tells the
//! manager every [`HEARTBEAT_MS`] that this node lives and which peers'
//! connections failed. The cluster's periodic work has a thread of its
//! own, `lite_housekeep`, so that freeing large buffers never delays a
//! heartbeat. Only the manager declares a node dead; [`view`] decides which
//! of its messages apply.
//!
//! The manager is heard from whenever `lite_cm` reads a frame, so the
//! silence measured is the silence of the connection, not the time some
//! handling takes. A node that hears nothing from the manager for
//! [`MANAGER_TIMEOUT_MS`] asks it once more and waits
//! [`SILENCE_CONFIRM_MS`] for anything to arrive (a node that was only
//! slow reads what is pending first); if nothing does (or its connection
//! breaks and cannot be resumed), it is cut off from the cluster, which
//! expels it in about the same time: it fences itself, so its callers get
//! `EHOSTDOWN` instead of using peers that no longer count it as a member.
//! Membership thus belongs to the node, not to the process that called
//! `lite_join`.

pub(crate) mod channel;
pub(crate) mod view;

use crate::internal::node_id::NodeId;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use kernel::{
    c_str, new_mutex,
    prelude::*,
    sync::{Arc, Mutex},
};

use self::channel::ManagerChannel;
use self::view::{MembershipView, Verdict};
use super::{
    cluster::Cluster,
    cm_wire::{Endpoint, Hello, Message, Resume, NEVER_HEARD},
    core::limits::MAX_NODES,
    util::{
        clock::now_ms,
        workers::{self, Job, Workers},
    },
};
use crate::{
    errno,
    sys::{kthread, sched, secret::Secret},
    verbs::{PortConfig, RemoteEnd},
};

/// How often this node tells the manager it lives, in milliseconds
/// (debugfs `heartbeat_ms`).
pub(crate) static HEARTBEAT_MS: AtomicU32 = AtomicU32::new(500);

/// How long this node may hear nothing from the manager before it counts
/// itself cut off and fences itself, in milliseconds (debugfs
/// `manager_timeout_ms`); the manager's own `--dead-after-ms` should match.
pub(crate) static MANAGER_TIMEOUT_MS: AtomicU32 = AtomicU32::new(3000);

/// How long a node that heard nothing from the manager for
/// [`MANAGER_TIMEOUT_MS`] waits for an answer to one more heartbeat before
/// it counts itself cut off, in ms.
const SILENCE_CONFIRM_MS: u32 = 1000;

/// How often it looks, in ms.
const SILENCE_POLL_MS: u32 = 50;

/// Frames of the manager read but not handled yet: a join brings two per
/// newcomer, a death one. When full, `lite_cm` waits: nothing is dropped.
const EVENT_BACKLOG: usize = 4 * MAX_NODES;

/// How often a node whose manager connection broke tries to resume, in ms.
const RESUME_RETRY_MS: u32 = 200;

/// How often a node cut off from the cluster tries to join again, in ms.
const REJOIN_INTERVAL_MS: u64 = 1000;

/// How long a leaving node waits for the manager to confirm, in ms.
const LEAVE_CONFIRM_MS: u32 = 5000;

/// How often it looks, in ms.
const LEAVE_POLL_MS: u32 = 20;

/// Interval of the cluster's periodic work (`lite_housekeep`).
const HOUSEKEEPING_MS: u32 = 500;

/// The settings above, by their debugfs id, with their bounds.
const SETTINGS: [(&AtomicU32, u32, u32); 2] = [
    (&HEARTBEAT_MS, 50, 10_000),
    (&MANAGER_TIMEOUT_MS, 500, 600_000),
];

/// Reads setting `id` (0 `heartbeat_ms`, 1 `manager_timeout_ms`).
pub(crate) fn setting(id: u32) -> Option<u32> {
    let (value, _, _) = SETTINGS.get(id as usize)?;
    Some(value.load(Ordering::Relaxed))
}

/// Changes setting `id` (see [`setting`]).
///
/// # Errors
///
/// `EINVAL` for an unknown id or a value out of the setting's bounds.
pub(crate) fn set_setting(id: u32, new_value: u64) -> Result {
    let (value, min, max) = SETTINGS.get(id as usize).ok_or(EINVAL)?;
    let new_value = u32::try_from(new_value).map_err(|_| EINVAL)?;
    if new_value < *min || new_value > *max {
        return Err(EINVAL);
    }
    value.store(new_value, Ordering::Relaxed);
    Ok(())
}

/// Writes the settings as `name value` lines.
pub(crate) fn write_settings(out: &mut impl core::fmt::Write) -> core::fmt::Result {
    writeln!(out, "heartbeat_ms {}", HEARTBEAT_MS.load(Ordering::Relaxed))?;
    writeln!(
        out,
        "manager_timeout_ms {}",
        MANAGER_TIMEOUT_MS.load(Ordering::Relaxed)
    )
}

/// Connects to the manager at `addr:port`, authenticates with `secret`
/// and introduces this node; returns the connection, the node id and the
/// incarnation the manager assigns. `rejoin_id` is the id this node had
/// before (0 if none).
pub(crate) fn hello(
    addr: [u8; 4],
    port: u16,
    port_config: &PortConfig,
    rejoin_id: u32,
    secret: &Secret,
) -> Result<(ManagerChannel, u32, u32)> {
    let timeout = MANAGER_TIMEOUT_MS.load(Ordering::Relaxed);
    let channel = ManagerChannel::open(addr, port, timeout, secret)?;
    channel.send(&Message::Hello(Hello {
        gid: port_config.gid,
        lid: port_config.lid,
        rejoin_id,
    }))?;
    match channel.receive()? {
        Message::Welcome {
            node_id,
            incarnation,
        } if node_id != 0 && (node_id as usize) < MAX_NODES && incarnation != 0 => {
            Ok((channel, node_id, incarnation))
        }
        Message::Failure { errno } if errno < 0 => Err(Error::from_errno(errno)),
        _ => Err(errno::EPROTO()),
    }
}

/// A joined node's link to the manager.
#[pin_data]
pub(crate) struct Membership {
    cluster: Arc<Cluster>,
    /// The manager's address and port, to connect again.
    manager: ([u8; 4], u16),
    /// The connection to the manager. Locked for each frame sent, which
    /// serialises the frames of the two threads (and of the join); replaced
    /// when the node resumes over a new connection.
    /// Lock class `lite:cm_link`: see the lock order in [`crate::internal::core`].
    #[pin]
    link: Mutex<Arc<ManagerChannel>>,
    /// The cluster's secret, to authenticate again when resuming.
    secret: Secret,
    #[pin]
    view: Mutex<MembershipView>,
    /// Frames of the manager that `lite_cm_events` handles in order.
    #[pin]
    events: Workers<ManagerEvent>,
    /// When the manager was last heard from ([`now_ms`]): when `lite_cm`
    /// last read a frame.
    last_heard_ms: AtomicU64,
    /// The node leaves: the manager's verdict on it is expected.
    leaving: AtomicBool,
    /// `lite_cm` read the manager's verdict on this node (its death, or
    /// the confirmation of its leave), which `lite_cm_events` applies:
    /// the end of the connection that follows is no reason to resume.
    verdict_read: AtomicBool,
    /// The membership ended: the threads stop.
    stopped: AtomicBool,
    /// Joins the cluster again; called while this node is cut off.
    rejoin: fn(),
}

impl Membership {
    /// The link of `cluster`'s node (`incarnation`) over `channel`, before
    /// its join completes. Once the node is cut off from the cluster (not when
    /// it leaves), `rejoin` is called every [`REJOIN_INTERVAL_MS`] until it
    /// ends this membership by joining again.
    pub(crate) fn new(
        cluster: Arc<Cluster>,
        manager: ([u8; 4], u16),
        channel: ManagerChannel,
        secret: Secret,
        incarnation: u32,
        rejoin: fn(),
    ) -> Result<Arc<Self>> {
        let node_id = cluster.core.node_id();
        let channel = Arc::new(channel, GFP_KERNEL)?;
        Arc::pin_init(
            try_pin_init!(Membership {
                cluster,
                manager,
                link <- new_mutex!(channel, "lite:cm_link"),
                secret,
                view <- new_mutex!(MembershipView::new(node_id, incarnation, 0), "lite:membership"),
                events <- Workers::new(EVENT_BACKLOG)?,
                last_heard_ms: AtomicU64::new(now_ms()),
                leaving: AtomicBool::new(false),
                verdict_read: AtomicBool::new(false),
                stopped: AtomicBool::new(false),
                rejoin,
            }? Error),
            GFP_KERNEL,
        )
    }

    fn send(&self, message: &Message) -> Result {
        self.link.lock().send(message)
    }

    /// The current connection to the manager.
    fn channel(&self) -> Arc<ManagerChannel> {
        self.link.lock().clone()
    }

    /// After the connection to the manager broke: connects again and
    /// resumes this node's membership, within [`MANAGER_TIMEOUT_MS`] of
    /// the last time the manager was heard from; returns the new
    /// connection.
    ///
    /// # Errors
    ///
    /// `EHOSTDOWN` if the manager counts this node as gone (or it was
    /// fenced or stopped meanwhile), `ETIMEDOUT` if the manager could not
    /// be reached in time.
    fn resume(&self) -> Result<Arc<ManagerChannel>> {
        loop {
            if self.is_fenced() || self.stopped.load(Ordering::Acquire) {
                return Err(errno::EHOSTDOWN());
            }
            if self.manager_silent() {
                return Err(errno::ETIMEDOUT());
            }
            match self.try_resume() {
                Ok(channel) => return Ok(channel),
                Err(e) if e == errno::EHOSTDOWN() => return Err(e),
                Err(_) => sched::sleep_uninterruptible_ms(RESUME_RETRY_MS),
            }
        }
    }

    fn try_resume(&self) -> Result<Arc<ManagerChannel>> {
        let (addr, port) = self.manager;
        let timeout = MANAGER_TIMEOUT_MS.load(Ordering::Relaxed);
        // Only the manager's authenticated word ends the membership: a
        // failure to connect and authenticate is retried, whatever it is.
        let channel = ManagerChannel::open(addr, port, timeout, &self.secret)
            .map_err(|_| errno::ETIMEDOUT())?;
        let channel = Arc::new(channel, GFP_KERNEL)?;
        let (incarnation, epoch) = {
            let view = self.view.lock();
            (view.own_incarnation(), view.epoch())
        };
        channel.send(&Message::Resume(Resume {
            node_id: self.node_id().get(),
            incarnation,
            epoch,
            gid: self.cluster.core.port().gid,
        }))?;
        match channel.receive()? {
            Message::Resumed { epoch } => {
                self.view.lock().manager_epoch_seen(epoch);
                self.last_heard_ms.store(now_ms(), Ordering::Relaxed);
                *self.link.lock() = channel.clone();
                pr_info!(
                    "node {} resumed its membership with the cluster manager\n",
                    self.node_id()
                );
                Ok(channel)
            }
            Message::Failure { errno } if errno < 0 => Err(Error::from_errno(errno)),
            _ => Err(errno::EPROTO()),
        }
    }

    /// Connects to every node already in the cluster, as the manager
    /// directs; returns the number of nodes once the manager reports the
    /// join complete.
    pub(crate) fn complete_join(&self) -> Result<u32> {
        loop {
            match self.channel().receive()? {
                Message::JoinDone { total_nodes, epoch } => {
                    self.view.lock().join_done(epoch);
                    return Ok(total_nodes);
                }
                Message::Failure { errno } if errno < 0 => return Err(Error::from_errno(errno)),
                message => self.serve(message)?,
            }
        }
    }

    fn node_id(&self) -> NodeId {
        self.cluster.core.node_id()
    }

    /// Answers one request of the manager about a peer.
    fn serve(&self, message: Message) -> Result {
        let core = &self.cluster.core;
        match message {
            Message::Prepare { peer, incarnation } => {
                let reply = match core.prepare_peer(NodeId::new(peer), incarnation) {
                    Ok(prepared) => {
                        let (qpn, psn) = prepared.conn.endpoint();
                        Message::QpInfo(Endpoint {
                            peer,
                            qpn,
                            psn,
                            lid: core.port().lid,
                            mtu: core.port().mtu_bytes(),
                            gid: core.port().gid,
                        })
                    }
                    Err(e) => Message::Failure {
                        errno: e.to_errno(),
                    },
                };
                self.send(&reply)
            }
            Message::Connect(remote) => {
                let status = match core.peer_entry(NodeId::new(remote.peer)) {
                    Some(peer) => {
                        let end = RemoteEnd {
                            qpn: remote.qpn,
                            psn: remote.psn,
                            lid: remote.lid,
                            mtu: remote.mtu,
                            gid: remote.gid,
                        };
                        match peer.connect(&end, core.port()) {
                            Ok(()) => {
                                pr_info!(
                                    "node {} connected to node {} (incarnation {})\n",
                                    core.node_id(),
                                    remote.peer,
                                    peer.incarnation
                                );
                                self.view
                                    .lock()
                                    .connected(NodeId::new(remote.peer), peer.incarnation);
                                self.cluster.peer_joined(NodeId::new(remote.peer));
                                0
                            }
                            Err(e) => e.to_errno(),
                        }
                    }
                    None => EINVAL.to_errno(),
                };
                self.send(&Message::Connected {
                    peer: remote.peer,
                    status,
                })
            }
            _ => Err(errno::EPROTO()),
        }
    }

    /// Takes one frame the manager sent after the join, on `lite_cm`:
    /// answers what needs no waiting and queues the rest for
    /// `lite_cm_events`.
    fn take(&self, message: Message) -> Result {
        self.last_heard_ms.store(now_ms(), Ordering::Relaxed);
        match message {
            Message::HeartbeatAck { epoch } => {
                self.view.lock().manager_epoch_seen(epoch);
                Ok(())
            }
            Message::Probe { peer, incarnation } => self.send(&Message::ProbeReply {
                peer,
                incarnation,
                heard_ms_ago: self.heard_ms_ago(NodeId::new(peer), incarnation),
            }),
            message => {
                if let Message::NodeDead {
                    node, incarnation, ..
                } = message
                {
                    if node == self.node_id().get()
                        && incarnation == self.view.lock().own_incarnation()
                    {
                        self.verdict_read.store(true, Ordering::Release);
                    }
                }
                // Gives it back only once the membership stopped.
                self.events
                    .submit(ManagerEvent(message))
                    .map_err(|_| errno::EHOSTDOWN())
            }
        }
    }

    /// How long ago incarnation `incarnation` of `node` last showed it
    /// lives over its connection, in ms, as a probe's answer carries it.
    fn heard_ms_ago(&self, node: NodeId, incarnation: u32) -> u32 {
        self.cluster
            .core
            .peer_entry(node)
            .filter(|peer| peer.incarnation == incarnation)
            .and_then(|peer| peer.heard_ms_ago())
            .map_or(NEVER_HEARD, |ms| {
                u32::try_from(ms)
                    .unwrap_or(NEVER_HEARD - 1)
                    .min(NEVER_HEARD - 1)
            })
    }

    /// Handles one frame the manager sent after the join, on
    /// `lite_cm_events`: the deaths of nodes and the connections to new
    /// ones, which may take long.
    fn handle(&self, message: Message) -> Result {
        match message {
            Message::NodeDead {
                node,
                incarnation,
                epoch,
            } => {
                let node = NodeId::new(node);
                let verdict = self.view.lock().node_dead(node, incarnation, epoch);
                match verdict {
                    Verdict::PeerDead => {
                        pr_notice!(
                            "the cluster manager declared node {} (incarnation {}) dead, epoch {}\n",
                            node,
                            incarnation,
                            epoch
                        );
                        self.cluster.peer_gone(node, Some(incarnation));
                    }
                    Verdict::SelfDead => {
                        self.fence_self("the cluster manager declared this node dead");
                    }
                    Verdict::Unknown | Verdict::Stale | Verdict::Invalid => {}
                }
                Ok(())
            }
            message => self.serve(message),
        }
    }

    /// Whether this node was cut off (or left): it is no member any more.
    pub(crate) fn is_fenced(&self) -> bool {
        self.view.lock().is_fenced()
    }

    /// Whether this node leaves (or left) the cluster on purpose.
    pub(crate) fn is_leaving(&self) -> bool {
        self.leaving.load(Ordering::Acquire)
    }

    /// Cuts this node off: every peer is fenced and the manager connection
    /// closed. Runs once; later calls do nothing.
    fn fence_self(&self, why: &str) {
        let peers = {
            let mut view = self.view.lock();
            if view.is_fenced() {
                return;
            }
            view.fence_all();
            self.cluster.core.connected_peers()
        };
        if !self.leaving.load(Ordering::Acquire) {
            pr_warn!(
                "node {} is cut off from the cluster ({}); operations on other nodes fail with EHOSTDOWN until it joins again\n",
                self.node_id(),
                why
            );
        }
        if let Ok(peers) = peers {
            for node in peers.iter() {
                self.cluster.peer_gone(*node, None);
            }
        }
        self.channel().shutdown();
    }

    /// Whether the manager has been silent for longer than allowed.
    fn manager_silent(&self) -> bool {
        let silence = now_ms().saturating_sub(self.last_heard_ms.load(Ordering::Relaxed));
        silence > u64::from(MANAGER_TIMEOUT_MS.load(Ordering::Relaxed))
    }

    /// Whether the manager, silent for longer than allowed, stays silent
    /// after one more heartbeat and [`SILENCE_CONFIRM_MS`]: a frame that
    /// was pending when this node was slow (or `lite_cm` had not run yet)
    /// is read meanwhile and ends the silence.
    fn manager_stays_silent(&self) -> bool {
        // A failed send breaks the connection, which `lite_cm` resumes.
        let _ = self.beat();
        let mut waited = 0;
        while waited < SILENCE_CONFIRM_MS {
            sched::sleep_uninterruptible_ms(SILENCE_POLL_MS);
            waited += SILENCE_POLL_MS;
            if !self.manager_silent() || self.stopped.load(Ordering::Acquire) {
                return false;
            }
        }
        true
    }

    /// One heartbeat: reports failed connections, then says this node lives.
    fn beat(&self) -> Result {
        let suspects = self.cluster.core.take_suspects();
        for node in NodeId::all() {
            if !node.bit().is_some_and(|bit| suspects & bit != 0) {
                continue;
            }
            let incarnation = self.view.lock().suspect(node);
            if let Some(incarnation) = incarnation {
                self.send(&Message::Suspect {
                    peer: node.get(),
                    incarnation,
                })?;
            }
        }
        let epoch = self.view.lock().epoch();
        self.send(&Message::Heartbeat {
            node_id: self.node_id().get(),
            epoch,
        })
    }

    /// Writes the membership and its settings as text (debugfs
    /// `membership`).
    pub(crate) fn write_text(&self, out: &mut impl core::fmt::Write) -> core::fmt::Result {
        let silence = now_ms().saturating_sub(self.last_heard_ms.load(Ordering::Relaxed));
        self.view.lock().write_text(out)?;
        let core = &self.cluster.core;
        writeln!(out, "device {}", core.device().device.name())?;
        writeln!(out, "port {}", core.port().port)?;
        writeln!(out, "manager_last_heard_ms_ago {}", silence)
    }

    /// Ends this membership: the node is fenced, the cluster's threads end
    /// and the manager connection is closed.
    pub(crate) fn stop(&self) {
        self.stopped.store(true, Ordering::Release);
        self.leaving.store(true, Ordering::Release);
        self.events.close();
        self.fence_self("stopped");
        self.cluster.shutdown();
        self.channel().shutdown();
    }

    /// Leaves the cluster gracefully (see [`Node::leave`]).
    ///
    /// [`Node::leave`]: crate::internal::node::Node::leave
    pub(crate) fn leave(&self, force: bool) -> Result {
        if self.is_fenced() {
            return Err(errno::EHOSTDOWN());
        }
        let held = self.cluster.evacuate()?;
        if held > 0 && !force {
            pr_warn!(
                "{} chunks held for other nodes could not move; not leaving\n",
                held
            );
            return Err(ENOSPC);
        }
        self.leaving.store(true, Ordering::Release);
        self.cluster.release_all();
        let incarnation = self.view.lock().own_incarnation();
        let told = self.send(&Message::Leave {
            node_id: self.node_id().get(),
            incarnation,
        });
        if told.is_ok() {
            // The manager answers with its verdict on this node; peers
            // learn of the leave from it, not from broken connections.
            let mut waited = 0;
            while !self.is_fenced() && waited < LEAVE_CONFIRM_MS {
                sched::sleep_uninterruptible_ms(LEAVE_POLL_MS);
                waited += LEAVE_POLL_MS;
            }
        }
        self.stop();
        Ok(())
    }

    /// Starts the two threads that keep this node in the cluster.
    pub(crate) fn keep(self: &Arc<Self>) -> Result {
        self.last_heard_ms.store(now_ms(), Ordering::Relaxed);
        workers::start(self, c_str!("lite_cm_events"), 1, |membership| {
            membership.events.serve(&membership)
        })?;
        kthread::spawn(c_str!("lite_cm"), self.clone(), listen)?;
        kthread::spawn(c_str!("lite_heartbeat"), self.clone(), heartbeat)?;
        kthread::spawn(c_str!("lite_housekeep"), self.clone(), housekeep)?;
        Ok(())
    }
}

/// The `lite_cm` thread: reads the manager's frames; when the connection
/// breaks, resumes over a new one, or fences the node if it cannot.
fn listen(membership: Arc<Membership>) {
    let mut channel = membership.channel();
    loop {
        let result = channel
            .receive()
            .and_then(|message| membership.take(message));
        let Err(e) = result else {
            continue;
        };
        if membership.is_fenced()
            || membership.stopped.load(Ordering::Acquire)
            || membership.verdict_read.load(Ordering::Acquire)
        {
            return;
        }
        if e == errno::EPROTO() {
            pr_warn!("the cluster manager broke the protocol\n");
        }
        channel.shutdown();
        match membership.resume() {
            Ok(resumed) => channel = resumed,
            Err(e) => {
                pr_warn!("lost the cluster manager ({:?})\n", e);
                membership.fence_self("lost the cluster manager");
                return;
            }
        }
    }
}

/// The `lite_housekeep` thread: does the cluster's periodic work until the
/// membership ends.
fn housekeep(membership: Arc<Membership>) {
    loop {
        sched::sleep_uninterruptible_ms(HOUSEKEEPING_MS);
        if membership.stopped.load(Ordering::Acquire) {
            return;
        }
        membership.cluster.housekeeping();
    }
}

/// The `lite_heartbeat` thread: beats until this node is fenced, then
/// tries to join again if it was cut off, until the membership ends.
fn heartbeat(membership: Arc<Membership>) {
    let mut cut_off_since_ms = None;
    loop {
        sched::sleep_uninterruptible_ms(HEARTBEAT_MS.load(Ordering::Relaxed));
        if membership.stopped.load(Ordering::Acquire) {
            return;
        }
        if membership.is_fenced() {
            if membership.is_leaving() {
                continue;
            }
            let now = now_ms();
            let since = *cut_off_since_ms.get_or_insert(now);
            if now.saturating_sub(since) >= REJOIN_INTERVAL_MS {
                cut_off_since_ms = Some(now);
                (membership.rejoin)();
            }
            continue;
        }
        if membership.manager_silent() && membership.manager_stays_silent() {
            membership.fence_self("the cluster manager is silent");
        } else {
            // A failed send breaks the connection, which the `lite_cm`
            // thread then resumes; the silence check above bounds it.
            let _ = membership.beat();
        }
    }
}

/// A frame of the manager that `lite_cm_events` handles.
struct ManagerEvent(Message);

impl Job for ManagerEvent {
    type Context = Membership;

    fn run(self, membership: &Membership) {
        // A fenced node is no member: what the manager asked of the member
        // it was is moot.
        if membership.is_fenced() {
            return;
        }
        if let Err(e) = membership.handle(self.0) {
            if e == errno::EPROTO() {
                pr_warn!("the cluster manager broke the protocol\n");
            }
            // `lite_cm` sees the connection end and resumes over a new one
            // (or fences this node), as for a failure it met itself.
            membership.channel().shutdown();
        }
    }
}
