// SPDX-License-Identifier: GPL-2.0

//! A node's membership in a LITE cluster: its peers and shared state.

use core::sync::atomic::Ordering;
use kernel::{
    c_str, new_mutex,
    prelude::*,
    sync::{Arc, Mutex},
};

use super::{
    async_io::IoJob,
    barrier::Barrier,
    control::Requests,
    control_wire::{ControlMessage, MESSAGE_LEN},
    lmr::{Lmr, Origin},
    lock::{LockId, Locks},
    lock_home::LockHome,
    memory_store::MemoryStore,
    names::NameTable,
    op_stats::COUNTERS,
    peer::Peer,
    process::{Process, Processes, Role},
    rpc::Rpc,
    sharing::{Mappings, NameValue},
    slot_table::SlotTable,
    stats::Stats,
    workers::{self, Job, Workers},
    DeviceContext, MAX_NODES,
};
use crate::{
    errno,
    verbs::{
        split_recv_wr_id, CompletionQueue, PortConfig, StagingPool, WorkCompletion, RECV_DEPTH,
    },
};

/// Peers by node id.
struct PeerTable {
    peers: [Option<Arc<Peer>>; MAX_NODES],
}

/// Everything a joined node shares between its users.
#[pin_data]
pub(crate) struct Cluster {
    /// This node's id (from 1).
    pub(crate) node_id: u32,
    /// The device, its protection domain and port.
    pub(crate) device: Arc<DeviceContext>,
    /// The port in use.
    pub(crate) port: PortConfig,
    /// Receive completions of every connection, polled by one thread.
    pub(crate) recv_cq: Arc<CompletionQueue>,
    /// Buffers for the bytes of requests, replies and atomics.
    #[pin]
    pub(crate) staging: StagingPool,
    #[pin]
    peers: Mutex<PeerTable>,
    /// Control requests waiting for replies.
    #[pin]
    pub(crate) requests: Requests,
    /// The distributed barrier.
    #[pin]
    pub(crate) barrier: Barrier,
    /// Chunks held for other nodes.
    #[pin]
    pub(crate) store: MemoryStore,
    /// LMRs created on this node, by LMR id.
    #[pin]
    pub(crate) lmrs: Mutex<SlotTable<Arc<Lmr>>>,
    /// Names published on this node.
    #[pin]
    pub(crate) names: Mutex<NameTable<NameValue>>,
    /// Mappings of other nodes' LMRs.
    #[pin]
    pub(crate) mappings: Mutex<Mappings>,
    /// Per-process state.
    #[pin]
    pub(crate) processes: Processes,
    /// The state shared by kernel callers of the C API.
    pub(crate) kernel_process: Arc<Process>,
    /// Peers' requests that take time (memset, copy, revocation).
    #[pin]
    pub(crate) control_jobs: Workers<ControlJob>,
    /// Asynchronous transfers.
    #[pin]
    pub(crate) io_jobs: Workers<IoJob>,
    /// Ports and calls.
    #[pin]
    pub(crate) rpc: Rpc,
    /// Locks this node keeps.
    #[pin]
    pub(crate) lock_home: LockHome,
    /// Locks this node's threads use.
    #[pin]
    pub(crate) locks: Locks,
}

/// Threads serving peers' requests.
const CONTROL_WORKERS: usize = 4;

/// Threads running asynchronous transfers.
const IO_WORKERS: usize = 8;

/// Queued peer requests: bounded by the requests all peers may have
/// outstanding at once, so the polling thread never waits for room.
const CONTROL_QUEUE: usize = MAX_NODES * super::control::MAX_PENDING;

/// Queued asynchronous transfers before submitters wait.
const IO_QUEUE: usize = 1024;

/// A peer's request, or this node's own work, run by a worker thread.
pub(crate) struct ControlJob {
    /// The peer that asked, `None` for this node's own work.
    peer: Option<Arc<Peer>>,
    message: ControlMessage,
}

impl ControlJob {
    /// Work of this node itself, described as a message.
    pub(crate) fn local(message: ControlMessage) -> Self {
        ControlJob {
            peer: None,
            message,
        }
    }
}

impl Job for ControlJob {
    fn run(self, cluster: &Cluster) {
        let from = self.peer.as_ref().map_or(cluster.node_id, |p| p.node);
        let reply = match self.message {
            // The one request answered with a value rather than a status.
            ControlMessage::AtomicRequest { .. } => cluster.atomic_for_peer(from, self.message),
            message => {
                let status = cluster.execute_request(from, message);
                if let (None, Err(e)) = (&self.peer, &status) {
                    pr_err!("{:?} failed: {:?}\n", message, e);
                }
                message
                    .request_id()
                    .map(|request_id| ControlMessage::StatusReply {
                        request_id,
                        status: status.map_or_else(|e| e.to_errno(), |()| 0),
                    })
            }
        };
        if let (Some(peer), Some(reply)) = (self.peer, reply) {
            if let Err(e) = peer.send(&reply) {
                pr_err!("cannot answer node {}: {:?}\n", peer.node, e);
            }
        }
    }
}

impl Cluster {
    /// Creates the state of a node that was just assigned `node_id`.
    pub(crate) fn new(
        node_id: u32,
        device: Arc<DeviceContext>,
        port: PortConfig,
    ) -> Result<Arc<Self>> {
        let cq_entries = RECV_DEPTH * MAX_NODES as u32;
        let recv_cq = CompletionQueue::new(device.device.clone(), cq_entries)?;
        let kernel_process = Process::new(0)?;
        let control_jobs = Workers::new(CONTROL_QUEUE)?;
        let io_jobs = Workers::new(IO_QUEUE)?;
        let rpc = Rpc::new()?;
        let lock_home = LockHome::new(&device.device)?;
        let staging = StagingPool::new(device.device.clone());
        let cluster = Arc::pin_init(
            try_pin_init!(Cluster {
                node_id,
                device,
                port,
                recv_cq,
                staging <- staging,
                peers <- new_mutex!(PeerTable { peers: [const { None }; MAX_NODES] }, "lite:peers"),
                requests <- Requests::new(),
                barrier <- Barrier::new(),
                store <- MemoryStore::new(),
                lmrs <- new_mutex!(SlotTable::new(), "lite:lmrs"),
                names <- new_mutex!(NameTable::new(), "lite:names"),
                mappings <- new_mutex!(Mappings::new(), "lite:mappings"),
                processes <- Processes::new(),
                kernel_process,
                control_jobs <- control_jobs,
                io_jobs <- io_jobs,
                rpc <- rpc,
                lock_home <- lock_home,
                locks <- Locks::new(),
            }? Error),
            GFP_KERNEL,
        )?;
        workers::start(&cluster, c_str!("lite_control"), CONTROL_WORKERS, |c| {
            c.control_jobs.serve(&c)
        })?;
        workers::start(&cluster, c_str!("lite_io"), IO_WORKERS, |c| {
            c.io_jobs.serve(&c)
        })?;
        Ok(cluster)
    }

    /// The state of the calling process, created on first use.
    pub(crate) fn current_process(&self) -> Result<Arc<Process>> {
        let tgid = crate::sys::sched::current_tgid();
        self.processes.get_or_create(tgid)
    }

    /// Releases everything process `tgid` holds: its asynchronous
    /// operations are cancelled or completed, callers waiting on its RPC
    /// descriptors are failed and its ports unregistered, LMRs it created
    /// are freed (revoking their mappings), its mappings dropped.
    pub(crate) fn process_exit(&self, tgid: i32) {
        self.release_locks_of(tgid);
        let Some(process) = self.processes.remove(tgid) else {
            return;
        };
        self.drain_async(&process);
        self.release_rpc(&process);
        loop {
            let entry = {
                let mut handles = process.handles.lock();
                handles.first_id().and_then(|id| handles.remove(id))
            };
            let Some(entry) = entry else {
                break;
            };
            match entry.role {
                Role::Owner { lmr_id } => {
                    self.destroy_lmr(lmr_id, &entry.lmr);
                }
                Role::Mapping {
                    mapping_id: Some(id),
                } => {
                    let dropped = self.mappings.lock().table_remove(id);
                    drop(dropped);
                }
                Role::Mapping { mapping_id: None } => {}
            }
        }
    }

    /// The node's counters (`lite_get_stats`).
    pub(crate) fn stats(&self) -> Stats {
        let (lmrs, registrations) = {
            let lmrs = self.lmrs.lock();
            let registered = lmrs
                .values()
                .filter(|l| matches!(l.origin, Origin::Registered | Origin::KernelRegistered))
                .count();
            (lmrs.len(), registered)
        };
        let mapping_handles = |p: &Process| {
            p.handles
                .lock()
                .values()
                .filter(|e| matches!(e.role, Role::Mapping { .. }))
                .count()
        };
        // One lock at a time: each count is taken in its own statement.
        let mappings = self.processes.sum(mapping_handles) + mapping_handles(&self.kernel_process);
        let handles = self.processes.sum(|p| p.handles.lock().len());
        let kernel_handles = self.kernel_process.handles.lock().len();
        let ops = self.processes.sum(|p| p.ops.lock().len());
        let kernel_ops = self.kernel_process.ops.lock().len();
        let published_names = self.names.lock().len();
        let connections = self.connected_peers().map_or(0, |peers| peers.len());
        let rpc_ports = self.registered_ports();
        Stats {
            lmrs: lmrs as u64,
            registrations: registrations as u64,
            mappings: mappings as u64,
            published_names: published_names as u64,
            held_chunks: self.store.len() as u64,
            handles: (handles + kernel_handles) as u64,
            processes: self.processes.count() as u64,
            async_in_flight: (ops + kernel_ops) as u64,
            connections: connections as u64,
            rpc_ports: rpc_ports as u64,
            locks: self.kept_locks() as u64,
            lock_acquires: COUNTERS.lock_acquires.load(Ordering::Relaxed),
            lock_waits: COUNTERS.lock_waits.load(Ordering::Relaxed),
            atomics: COUNTERS.atomics.load(Ordering::Relaxed),
            qos_throttled: COUNTERS.qos_throttled.load(Ordering::Relaxed),
        }
    }

    /// Creates the connection to `node`, to be connected later.
    ///
    /// # Errors
    ///
    /// `EINVAL` for a node id out of range or this node's own id, `EEXIST`
    /// if the node is already connected.
    pub(crate) fn prepare_peer(&self, node: u32) -> Result<Arc<Peer>> {
        let index = node as usize;
        if node == 0 || node == self.node_id || index >= MAX_NODES {
            return Err(EINVAL);
        }
        if self.peers.lock().peers[index]
            .as_ref()
            .is_some_and(|p| p.is_connected())
        {
            return Err(EEXIST);
        }
        // Create the QP without holding the lock.
        let peer = Peer::new(node, &self.device.pd, &self.recv_cq, &self.port)?;
        let old = self.peers.lock().peers[index].replace(peer.clone());
        drop(old);
        Ok(peer)
    }

    /// The peer `node`, whether connected or not.
    pub(crate) fn peer_entry(&self, node: u32) -> Option<Arc<Peer>> {
        self.peers.lock().peers.get(node as usize)?.clone()
    }

    /// The connected peer `node`.
    ///
    /// # Errors
    ///
    /// `EINVAL` for an id beyond [`MAX_NODES`], `EHOSTUNREACH` if the node is
    /// not a connected member of the cluster.
    pub(crate) fn peer(&self, node: u32) -> Result<Arc<Peer>> {
        if node as usize >= MAX_NODES {
            return Err(EINVAL);
        }
        match self.peer_entry(node) {
            Some(peer) if peer.is_connected() => Ok(peer),
            _ => Err(errno::EHOSTUNREACH()),
        }
    }

    /// Ids of the connected peers, ascending.
    pub(crate) fn connected_peers(&self) -> Result<KVec<u32>> {
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
        1 + peers
            .peers
            .iter()
            .flatten()
            .filter(|p| p.is_connected())
            .count() as u32
    }

    /// `lite_dist_barrier`: waits until `num` nodes entered the same round.
    pub(crate) fn dist_barrier(&self, num: u32) -> Result {
        if num == 0 || num as usize > MAX_NODES {
            return Err(EINVAL);
        }
        let round = self.barrier.enter(self.node_id);
        loop {
            let message = ControlMessage::Barrier {
                round,
                reply_wanted: true,
            };
            for node in self.connected_peers()?.iter() {
                if let Ok(peer) = self.peer(*node) {
                    // A peer that cannot be reached now is retried on the
                    // next resend; it cannot count towards `num` meanwhile.
                    let _ = peer.send(&message);
                }
            }
            match self.barrier.wait(round, num as usize)? {
                super::barrier::WaitOutcome::Done => return Ok(()),
                super::barrier::WaitOutcome::Resend => continue,
            }
        }
    }

    /// Handles one receive completion (called by the polling thread).
    pub(crate) fn handle_receive(&self, wc: &WorkCompletion) {
        let (node, index) = split_recv_wr_id(wc.wr_id);
        let Some(peer) = self.peer_entry(node) else {
            return;
        };
        if !wc.succeeded() {
            // The connection failed or is being torn down; its receive
            // buffers are not reposted.
            return;
        }
        if let Some(imm) = wc.write_imm() {
            // An RPC request or reply: its bytes are already where they
            // belong; only the receive buffer goes back.
            if let Err(e) = peer.conn.repost_receive(index) {
                pr_err!("lost a receive buffer of node {}: {:?}\n", node, e);
            }
            self.rpc_arrived(node, imm, wc.byte_len);
            return;
        }
        let mut bytes = [0u8; MESSAGE_LEN];
        if peer.conn.take_message(index, &mut bytes).is_err() {
            pr_err!("lost a receive buffer of the connection to node {}\n", node);
            return;
        }
        match ControlMessage::decode(&bytes) {
            Ok(message) => self.handle_message(&peer, message),
            Err(e) => pr_warn!("node {} sent an unknown message: {:?}\n", node, e),
        }
    }

    /// Runs a request handed to a worker by [`Cluster::handle_message`].
    fn execute_request(&self, from: u32, message: ControlMessage) -> Result {
        match message {
            ControlMessage::MemsetRequest {
                chunk_id,
                offset,
                len,
                byte,
                ..
            } => self.execute_memset(chunk_id, offset, len, byte),
            ControlMessage::CopyRequest {
                src_chunk_id,
                src_offset,
                len,
                dst_node,
                dst_chunk_id,
                dst_addr,
                dst_rkey,
                ..
            } => self.execute_copy(
                src_chunk_id,
                src_offset,
                len,
                dst_node,
                dst_chunk_id,
                dst_addr,
                dst_rkey,
            ),
            ControlMessage::RevokeRequest { lmr_id, .. } => self.close_mappings(from, lmr_id),
            ControlMessage::AssignLock {
                home,
                number,
                ticket,
                ..
            } => self.pass_abandoned_turn(LockId { home, number }, ticket),
            _ => Err(EINVAL),
        }
    }

    fn handle_message(&self, peer: &Arc<Peer>, message: ControlMessage) {
        let reply = match message {
            ControlMessage::AllocRequest { request_id, size } => {
                let allocated = self
                    .store
                    .allocate(&self.device.device, peer.node, size)
                    .and_then(|(chunk_id, memory)| {
                        Ok((chunk_id, memory.dma_range(0, memory.len())?))
                    });
                Some(match allocated {
                    Ok((chunk_id, addr)) => ControlMessage::AllocReply {
                        request_id,
                        status: 0,
                        chunk_id,
                        addr,
                        rkey: self.device.pd.global_rkey(),
                    },
                    Err(e) => ControlMessage::AllocReply {
                        request_id,
                        status: e.to_errno(),
                        chunk_id: 0,
                        addr: 0,
                        rkey: 0,
                    },
                })
            }
            ControlMessage::FreeRequest {
                request_id,
                chunk_id,
            } => {
                let status = match self.store.release(peer.node, chunk_id) {
                    Ok(()) => 0,
                    Err(e) => e.to_errno(),
                };
                (request_id != 0).then_some(ControlMessage::StatusReply { request_id, status })
            }
            ControlMessage::AskRequest {
                request_id,
                name,
                permission,
                password,
            } => Some(self.answer_ask(peer.node, request_id, name, permission, password)),
            ControlMessage::QueryPort {
                request_id,
                port,
                fresh,
            } => Some(self.answer_query_port(peer.node, request_id, port, fresh)),
            ControlMessage::RingAck { .. }
            | ControlMessage::RpcFailed { .. }
            | ControlMessage::PortClosed { .. }
            | ControlMessage::RingBroken { .. } => {
                self.rpc_control(peer.node, message);
                None
            }
            ControlMessage::CreateLock { .. } | ControlMessage::AskLock { .. } => {
                self.answer_lock_request(message)
            }
            ControlMessage::ReserveLock { .. } | ControlMessage::ReleaseLock { .. } => {
                self.lock_home_message(peer.node, message);
                None
            }
            ControlMessage::AssignLock {
                home,
                number,
                ticket,
                waiter,
            } => {
                // Only the lock's home hands it over.
                if home == peer.node {
                    self.lock_handed(LockId { home, number }, ticket, waiter);
                }
                None
            }
            ControlMessage::MemsetRequest { .. }
            | ControlMessage::CopyRequest { .. }
            | ControlMessage::RevokeRequest { .. }
            | ControlMessage::AtomicRequest { .. } => {
                // These may block (on RDMA, or on operations that need this
                // very thread to deliver their replies): workers run them.
                let job = ControlJob {
                    peer: Some(peer.clone()),
                    message,
                };
                if let Err(job) = self.control_jobs.try_submit(job) {
                    pr_err!("too many requests from node {}; refusing one\n", peer.node);
                    job.message
                        .request_id()
                        .map(|request_id| ControlMessage::StatusReply {
                            request_id,
                            status: EBUSY.to_errno(),
                        })
                } else {
                    None
                }
            }
            ControlMessage::AllocReply { .. }
            | ControlMessage::StatusReply { .. }
            | ControlMessage::AskReply { .. }
            | ControlMessage::QueryPortReply { .. }
            | ControlMessage::LockReply { .. }
            | ControlMessage::AtomicReply { .. } => {
                if let Some(ControlMessage::AllocReply {
                    status: 0,
                    chunk_id,
                    ..
                }) = self.requests.complete(message)
                {
                    // The requester gave up waiting: give the chunk back.
                    Some(ControlMessage::FreeRequest {
                        request_id: 0,
                        chunk_id,
                    })
                } else {
                    None
                }
            }
            ControlMessage::Barrier {
                round,
                reply_wanted,
            } => {
                self.barrier.arrived(peer.node, round);
                // A node that finished `round` before the sender joined or
                // heard of it would otherwise never tell the sender.
                let own = self.barrier.own_round();
                (reply_wanted && own >= round).then_some(ControlMessage::Barrier {
                    round: own,
                    reply_wanted: false,
                })
            }
        };
        if let Some(reply) = reply {
            if let Err(e) = peer.send(&reply) {
                pr_err!("cannot answer node {}: {:?}\n", peer.node, e);
            }
        }
    }
}
