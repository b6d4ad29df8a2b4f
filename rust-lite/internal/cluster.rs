// SPDX-License-Identifier: GPL-2.0

//! A node's membership in a LITE cluster: its peers and shared state.

use kernel::{
    new_mutex,
    prelude::*,
    sync::{Arc, Mutex},
};

use super::{
    barrier::Barrier,
    control::Requests,
    control_wire::{ControlMessage, MESSAGE_LEN},
    lmr::Lmr,
    memory_store::MemoryStore,
    peer::Peer,
    slot_table::SlotTable,
    DeviceContext, MAX_NODES,
};
use crate::{
    errno,
    verbs::{split_recv_wr_id, CompletionQueue, PortConfig, WorkCompletion, RECV_DEPTH},
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
    /// LMRs created on this node, by handle.
    #[pin]
    pub(crate) lmrs: Mutex<SlotTable<Arc<Lmr>>>,
}

impl Cluster {
    /// Creates the state of a node that was just assigned `node_id`.
    pub(crate) fn new(node_id: u32, device: Arc<DeviceContext>, port: PortConfig) -> Result<Arc<Self>> {
        let cq_entries = RECV_DEPTH * MAX_NODES as u32;
        let recv_cq = CompletionQueue::new(device.device.clone(), cq_entries)?;
        Arc::pin_init(
            pin_init!(Cluster {
                node_id,
                device,
                port,
                recv_cq,
                peers <- new_mutex!(PeerTable { peers: [const { None }; MAX_NODES] }, "lite:peers"),
                requests <- Requests::new(),
                barrier <- Barrier::new(),
                store <- MemoryStore::new(),
                lmrs <- new_mutex!(SlotTable::new(), "lite:lmrs"),
            }),
            GFP_KERNEL,
        )
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
        1 + peers.peers.iter().flatten().filter(|p| p.is_connected()).count() as u32
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

    fn handle_message(&self, peer: &Peer, message: ControlMessage) {
        let reply = match message {
            ControlMessage::AllocRequest { request_id, size } => {
                Some(match self.store.allocate(&self.device.device, peer.node, size) {
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
                (request_id != 0).then_some(ControlMessage::FreeReply { request_id, status })
            }
            ControlMessage::AllocReply { .. } | ControlMessage::FreeReply { .. } => {
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
