// SPDX-License-Identifier: GPL-2.0

//! The core of a joined node: its device and port, its peers and their
//! connections, the shared receive completion queue, staging buffers,
//! control requests waiting for replies, and the chunks it holds for others.
//!
//! Subsystems (remote memory, sharing, RPC, locks, ...) take the core by
//! reference and own everything else; the core moves their control messages
//! as [`Frame`]s without knowing what they mean.
//!
//! # Lock order
//!
//! LITE's locks are named by their lockdep classes. These are all the
//! nestings there are (outer lock first); lockdep checks them in the debug
//! kernel the tests run, which reach each of them, and the test command
//! fails if lockdep sees a nesting of LITE's locks that is not listed here:
//!
//! - `lite:processes` → `lite:handles`
//! - `lite:processes` → `lite:async_ops`
//!   (statistics count every process's handles and operations)
//! - `lite:names` → `lite:lmr_users`
//!   (an ask is answered under the names' lock only for an LMR that is open
//!   and not paused)
//! - `lite:membership` → `lite:peers`
//!   (a node fencing itself takes its peers as its view marks them gone)
//! - `lite:server_node` → `lite:remote_keys`
//!   (a request is posted under its view of the server's ring, so requests
//!   reach the ring in the order their space was reserved; posting
//!   translates the ring's key)
//! - `lite:lock_home` → `lite:peers`
//! - `lite:lock_home` → `lite:requests`
//!   (a lock's home changes the lock's words with compare-and-swaps that a
//!   peer performs, see below)
//! - `lite:keys_sending` → `lite:region_keys`
//! - `lite:keys_sending` → `lite:translated_keys`
//! - `lite:keys_sending` → `lite:region_registrations`
//! - `lite:keys_sending` → `lite:jobs`
//! - `lite:region_registrations` → `lite:registrar`
//!   (new keys are made, and peers asked to take them, while no key table
//!   is being sent; each region is registered anew under its own lock)
//! - `lite:remote_pool` → `lite:pool_segment`
//!   (a buffer is carved out of a segment the pool keeps)
//!
//! Condition variables (`new_condvar!`) are left out: each one's wait
//! queue is taken under the mutex it is used with, to wait or to wake.
//! Every other lock is taken with none of LITE's locks held. What gives
//! something back when dropped (a pool buffer, a quota charge, a name's
//! table, an LMR's chunks) is dropped after the lock that held it is
//! released, and allocations happen before spinlocks are taken.
//!
//! No lock is held across a wait for a peer, except these, each bounded:
//!
//! - `lite:lock_home`, across the compare-and-swaps on the lock words of
//!   the locks homed here: a node reaches its own words through a peer,
//!   and the home's queue must change with its words. Each request waits
//!   at most `REPLY_TIMEOUT_MS`, and fails with `EHOSTDOWN` once the peer
//!   is declared gone.
//! - `lite:server_node`, while a request is posted: for the server's first
//!   key table (at most `FIRST_TABLE_WAIT_MS`) and for a free send slot,
//!   which frees when the server's device acknowledges an earlier request,
//!   the connection's retries run out, or the server is declared gone.
//! - `lite:cm_link`, across a send to the cluster manager, bounded by the
//!   connection's user timeout (the manager timeout).
//!
//! `lite:keys_sending`, `lite:region_registrations` and `lite:registrar`
//! are held while this node's device registers a memory region, at most
//! `REGISTER_TIMEOUT_MS` each.

pub(crate) mod chunk_memory;
pub(crate) mod device;
pub(crate) mod limits;
pub(crate) mod memory_store;
pub(crate) mod peer;
pub(crate) mod requests;
pub(crate) mod subsystem;
pub(crate) mod wire;

use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use kernel::{
    c_str, new_mutex,
    prelude::*,
    sync::{Arc, Mutex},
};

use self::{
    device::DeviceContext,
    limits::MAX_NODES,
    memory_store::MemoryStore,
    peer::Peer,
    requests::{Requests, MAX_PENDING},
    subsystem::Subsystem,
    wire::{Frame, MESSAGE_LEN},
};
use super::node_id::NodeId;
use super::quota::Quotas;
use super::util::workers::{self, Job, Workers};
use crate::{
    errno,
    verbs::{
        split_recv_wr_id, CompletionQueue, KeyRegistry, PortConfig, RemotePool, StagingPool,
        WorkCompletion, RECV_DEPTH,
    },
};

/// Threads serving peers' requests that may block.
const CONTROL_WORKERS: usize = 4;

/// Queued peer requests: bounded by the requests all peers may have
/// outstanding at once, so the polling thread never waits for room.
const CONTROL_QUEUE: usize = MAX_NODES * MAX_PENDING;

/// Peers by node id.
struct PeerTable {
    peers: [Option<Arc<Peer>>; MAX_NODES],
}

/// A peer's request that may block, run by a worker thread on behalf of the
/// subsystem it belongs to.
pub(crate) struct ControlJob {
    subsystem: Arc<dyn Subsystem>,
    peer: Arc<Peer>,
    frame: Frame,
}

impl Job for ControlJob {
    type Context = ();

    fn run(self, (): &()) {
        if let Some(reply) = self.subsystem.serve(&self.peer, &self.frame) {
            if let Err(e) = self.peer.send(&reply) {
                pr_err!("cannot answer node {}: {:?}\n", self.peer.node, e);
            }
        }
    }
}

/// What one receive completion brought.
pub(crate) enum Received {
    /// A control message from a peer.
    Message(Arc<Peer>, Frame),
    /// An RPC request or reply written with immediate data.
    Rpc {
        /// The node that wrote it.
        node: NodeId,
        /// The immediate data.
        imm: u32,
        /// Bytes written.
        len: u32,
    },
    /// The connection to `node` failed while the peer was not known to be
    /// gone: nothing more will arrive from it. Reported once per connection.
    PeerFailed(NodeId),
    /// Nothing to hand on.
    Nothing,
}

/// The core of a joined node.
#[pin_data]
pub(crate) struct Core {
    node_id: NodeId,
    device: Arc<DeviceContext>,
    port: PortConfig,
    recv_cq: Arc<CompletionQueue>,
    /// Buffers for the bytes of requests, replies and atomics.
    #[pin]
    pub(crate) staging: StagingPool,
    /// Lock class `lite:peers`: see the lock order in [`crate::internal::core`].
    #[pin]
    peers: Mutex<PeerTable>,
    /// Control requests waiting for replies.
    #[pin]
    pub(crate) requests: Requests,
    /// Chunks held for this and other nodes.
    #[pin]
    pub(crate) store: MemoryStore,
    /// The memory peers can reach: chunks, rings, reply slots, lock words
    /// and tables are carved from it.
    #[pin]
    pub(crate) pool: RemotePool,
    /// The memory of the RPC rings this node keeps for its ports' clients:
    /// a pool of its own, as rings live as long as the node once made.
    #[pin]
    pub(crate) ring_pool: RemotePool,
    #[pin]
    control_jobs: Workers<ControlJob>,
    /// What this node's users may hold, and what other nodes' LMRs may
    /// hold here (the node's, shared by its memberships).
    pub(crate) quotas: Arc<Quotas>,
    /// Peers whose connection failed, one bit per node id, until the
    /// membership thread reports them to the manager.
    suspects: AtomicU64,
    /// The membership ended: the node's threads for it stop.
    closed: AtomicBool,
}

impl Core {
    /// Creates the core of a node that was just assigned `node_id`.
    pub(crate) fn new(
        node_id: NodeId,
        device: Arc<DeviceContext>,
        port: PortConfig,
        quotas: Arc<Quotas>,
    ) -> Result<Arc<Self>> {
        // PANIC: a product of two small constants, far below `u32::MAX`.
        let cq_entries = RECV_DEPTH * MAX_NODES as u32;
        let recv_cq = CompletionQueue::new(device.device.clone(), cq_entries)?;
        let control_jobs = Workers::new(CONTROL_QUEUE)?;
        let staging = StagingPool::new(device.device.clone());
        // Both pools' regions change keys together.
        let keys = KeyRegistry::new()?;
        let pool = RemotePool::new(&device.pd, &port, &keys)?;
        let ring_pool = RemotePool::new(&device.pd, &port, &keys)?;
        let core = Arc::pin_init(
            try_pin_init!(Core {
                node_id,
                device,
                port,
                recv_cq,
                staging <- staging,
                peers <- new_mutex!(PeerTable { peers: [const { None }; MAX_NODES] }, "lite:peers"),
                requests <- Requests::new(),
                store <- MemoryStore::new(),
                pool <- pool,
                ring_pool <- ring_pool,
                control_jobs <- control_jobs,
                quotas,
                suspects: AtomicU64::new(0),
                closed: AtomicBool::new(false),
            }? Error),
            GFP_KERNEL,
        )?;
        workers::start(&core, c_str!("lite_control"), CONTROL_WORKERS, |core| {
            core.control_jobs.serve(&())
        })?;
        Ok(core)
    }

    /// This node's id (from 1).
    pub(crate) fn node_id(&self) -> NodeId {
        self.node_id
    }

    /// The device and its protection domain.
    pub(crate) fn device(&self) -> &Arc<DeviceContext> {
        &self.device
    }

    /// The port in use.
    pub(crate) fn port(&self) -> &PortConfig {
        &self.port
    }

    /// Receive completions of every connection, polled by one thread.
    pub(crate) fn recv_cq(&self) -> &Arc<CompletionQueue> {
        &self.recv_cq
    }

    /// Creates the connection to `node`, to be connected later.
    ///
    /// # Errors
    ///
    /// `EINVAL` for a node id out of range or this node's own id, `EEXIST`
    /// if the node is already connected.
    pub(crate) fn prepare_peer(&self, node: NodeId, incarnation: u32) -> Result<Arc<Peer>> {
        let index = node.index();
        if !node.is_member_id() || node == self.node_id {
            return Err(EINVAL);
        }
        // PANIC: `index` was checked against `MAX_NODES` above.
        if self.peers.lock().peers[index]
            .as_ref()
            .is_some_and(|p| p.is_connected())
        {
            return Err(EEXIST);
        }
        // Create the QP without holding the lock.
        let peer = Peer::new(
            node,
            incarnation,
            &self.device.pd,
            &self.recv_cq,
            &self.port,
        )?;
        // PANIC: as above.
        let old = self.peers.lock().peers[index].replace(peer.clone());
        drop(old);
        Ok(peer)
    }

    /// The peer `node`, whether connected or not.
    pub(crate) fn peer_entry(&self, node: NodeId) -> Option<Arc<Peer>> {
        self.peers.lock().peers.get(node.index())?.clone()
    }

    /// The peers still reachable among `nodes` (one bit per node id), this
    /// node left out, in id order.
    pub(crate) fn peers_among(&self, nodes: u64) -> impl Iterator<Item = Arc<Peer>> + '_ {
        NodeId::all()
            .filter(move |&node| node.bit().is_some_and(|bit| nodes & bit != 0))
            .filter(move |&node| node != self.node_id())
            .filter_map(move |node| self.peer(node).ok())
    }

    /// The connected peer `node`.
    ///
    /// # Errors
    ///
    /// `EINVAL` for an id beyond [`MAX_NODES`], `EHOSTDOWN` if the node was
    /// a member and is gone, `EHOSTUNREACH` if it is not a connected member
    /// of the cluster.
    pub(crate) fn peer(&self, node: NodeId) -> Result<Arc<Peer>> {
        if node.index() >= MAX_NODES {
            return Err(EINVAL);
        }
        match self.peer_entry(node) {
            Some(peer) if peer.is_connected() => Ok(peer),
            Some(peer) if peer.is_gone() => Err(errno::EHOSTDOWN()),
            _ => Err(errno::EHOSTUNREACH()),
        }
    }

    /// Fences peer `node` (declared dead, or leaving): its connection stops
    /// and every control request waiting for it fails with `EHOSTDOWN`.
    /// Returns the peer if this call fenced it, `None` if it was unknown or
    /// already fenced, or belongs to another `incarnation` than the one
    /// named (`None` names whichever is current).
    pub(crate) fn fence_peer(&self, node: NodeId, incarnation: Option<u32>) -> Option<Arc<Peer>> {
        let peer = self.peer_entry(node)?;
        if incarnation.is_some_and(|i| i != peer.incarnation) || !peer.fence() {
            return None;
        }
        self.requests.fail_node(node);
        Some(peer)
    }

    /// Notes that the connection to `node` failed, for the manager to hear.
    pub(crate) fn suspect(&self, node: NodeId) {
        if let Some(bit) = node.bit() {
            self.suspects.fetch_or(bit, Ordering::AcqRel);
        }
    }

    /// Ends the membership: every peer is fenced, and the core's threads
    /// end once they ran what was queued. Threads of subsystems check
    /// [`Core::is_closed`].
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
        if let Ok(peers) = self.connected_peers() {
            for node in peers.iter() {
                self.fence_peer(*node, None);
            }
        }
        self.control_jobs.close();
        // Wakes the polling thread, which then ends.
        self.recv_cq.wake_waiters();
    }

    /// Whether the membership ended.
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Takes the peers noted by [`Core::suspect`] since the last call.
    pub(crate) fn take_suspects(&self) -> u64 {
        self.suspects.swap(0, Ordering::AcqRel)
    }

    /// Ids of the connected peers, ascending.
    pub(crate) fn connected_peers(&self) -> Result<KVec<NodeId>> {
        let mut ids = KVec::with_capacity(MAX_NODES, GFP_KERNEL)?;
        let peers = self.peers.lock();
        for peer in peers.peers.iter().flatten() {
            if peer.is_connected() {
                // Capacity was reserved above, so this does not allocate.
                ids.push(peer.node, GFP_NOWAIT)?;
            }
        }
        Ok(ids)
    }

    /// Nodes in the cluster as this node sees it: itself and its connected peers.
    pub(crate) fn total_nodes(&self) -> u32 {
        let peers = self.peers.lock();
        // PANIC: at most `MAX_NODES` peers, so the sum fits in a `u32`.
        1 + peers
            .peers
            .iter()
            .flatten()
            .filter(|p| p.is_connected())
            .count() as u32
    }

    /// Takes what one receive completion brought (called by the polling
    /// thread); the receive buffer goes back to its connection.
    pub(crate) fn receive(&self, wc: &WorkCompletion) -> Received {
        let (node, index) = split_recv_wr_id(wc.wr_id);
        let node = NodeId::new(node);
        let Some(peer) = self.peer_entry(node) else {
            return Received::Nothing;
        };
        if !wc.succeeded() {
            // The connection failed or is being torn down; its receive
            // buffers are not reposted.
            if peer.is_connected() && peer.note_failure() {
                return Received::PeerFailed(node);
            }
            return Received::Nothing;
        }
        peer.heard();
        if let Some(imm) = wc.write_imm() {
            // An RPC request or reply: its bytes are already where they
            // belong; only the receive buffer goes back.
            if let Err(e) = peer.conn.repost_receive(index) {
                pr_err!("lost a receive buffer of node {}: {:?}\n", node, e);
            }
            return Received::Rpc {
                node,
                imm,
                len: wc.byte_len,
            };
        }
        let mut bytes = [0u8; MESSAGE_LEN];
        if peer.conn.take_message(index, &mut bytes).is_err() {
            pr_err!("lost a receive buffer of the connection to node {}\n", node);
            return Received::Nothing;
        }
        Received::Message(peer, Frame::decode(&bytes))
    }

    /// Has a worker thread run `subsystem`'s handling of `frame` from `peer`,
    /// for a request that may block (on RDMA, or on operations that need the
    /// polling thread to deliver their replies).
    ///
    /// Returns the reply refusing the request if too many are queued.
    pub(crate) fn defer(
        &self,
        subsystem: Arc<dyn Subsystem>,
        peer: &Arc<Peer>,
        frame: Frame,
    ) -> Option<Frame> {
        let job = ControlJob {
            subsystem,
            peer: peer.clone(),
            frame,
        };
        match self.control_jobs.try_submit(job) {
            Ok(()) => None,
            Err(job) => {
                pr_err!("too many requests from node {}; refusing one\n", peer.node);
                job.frame
                    .wants_reply()
                    .then(|| Frame::status_reply(job.frame.request_id(), EBUSY.into()))
            }
        }
    }
}
