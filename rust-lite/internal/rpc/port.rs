// SPDX-License-Identifier: GPL-2.0

//! The server side of RPC: registered ports and the rings clients write
//! their requests into.
//!
//! Each (port, client node) has its own ring, created when the client first
//! queries the port and kept for the node's lifetime (a client may still
//! hold its address). Requests in a ring are consumed in arrival order by
//! whichever receiver takes them; requests from this node's own processes
//! wait in a separate bounded queue. A receiver holds the port's lock while
//! it copies a message out, so the ring is consumed strictly in order and
//! its space can be acknowledged to the client.

use crate::internal::node_id::NodeId;
use kernel::{
    new_condvar, new_mutex,
    prelude::*,
    sync::{Arc, CondVar, Mutex},
};

use super::{
    client::LocalCall,
    ring_protocol::{
        Arrival, Broken, RequestHeader, RingFault, RingReader, FLAG_ACK_WANTED,
        FLAG_FAULT_INJECTED, HEADER_LEN, MAX_MESSAGE_SIZE, MAX_PORT_NAME, RING_SIZE,
    },
};
use crate::{
    internal::{core::limits::MAX_NODES, quota::Charge, util::ring::Ring},
    verbs::DmaBuffer,
};

/// Messages from this node's processes queued on one port.
const LOCAL_QUEUE: usize = 256;

// Broken rings are noted one bit per node.
const _: () = assert!(MAX_NODES <= u64::BITS as usize);

/// The bit of `node` (below [`MAX_NODES`]) in a set of nodes.
fn node_bit(node: usize) -> u64 {
    // PANIC: `MAX_NODES` is not 0, and the shift is below `MAX_NODES <= 64`
    // (checked at compile time above).
    1u64 << (node % MAX_NODES)
}

/// Where the answer to a request goes.
#[derive(Clone)]
pub(crate) enum ReplyTo {
    /// A caller on another node, waiting in reply slot `slot`.
    Remote {
        /// The caller's node.
        node: NodeId,
        /// The request's header, naming the reply buffer and slot.
        header: RequestHeader,
    },
    /// A caller on this node.
    Local(Arc<LocalCall>),
}

/// A request from a process of this node.
pub(crate) struct LocalMessage {
    /// The request's bytes.
    pub(crate) data: KVVec<u8>,
    /// The waiting caller, or `None` for a one-way message.
    pub(crate) call: Option<Arc<LocalCall>>,
}

/// The ring one client node writes its requests to one port into.
pub(crate) struct ServerRing {
    /// Written by the client with RDMA, read here.
    pub(crate) memory: DmaBuffer,
    /// What has arrived and been consumed.
    pub(crate) reader: RingReader,
    /// The ring broke and its sender has not been told yet.
    unreported: Option<Broken>,
}

impl ServerRing {
    /// The header of the request at ring offset `offset`.
    fn read_header(&self, offset: u64) -> Result<RequestHeader> {
        let mut bytes = [0u8; HEADER_LEN];
        self.memory.read_bytes(offset as usize, &mut bytes)?;
        Ok(RequestHeader::decode(&bytes))
    }
}

/// A message taken from a port.
pub(crate) struct Taken {
    /// Its bytes.
    pub(crate) data: KVVec<u8>,
    /// Who waits for the answer, if anyone.
    pub(crate) reply_to: Option<ReplyTo>,
    /// The sending node, or `None` for a process of this node.
    pub(crate) from: Option<NodeId>,
    /// A ring position to acknowledge to `(node, consumed)`.
    pub(crate) ack: Option<(NodeId, u64)>,
}

/// Why [`PortState::take`] returned no message.
pub(crate) enum Empty {
    /// Nothing is queued.
    Nothing,
    /// The next message is longer than the receiver's room.
    TooLong,
}

/// The state of one port.
pub(crate) struct PortState {
    /// Registering process (thread group id, 0 for kernel callers), or
    /// `None` while the port is not registered.
    pub(crate) owner: Option<i32>,
    /// Largest message accepted.
    pub(crate) max_size: u64,
    /// Informational name.
    pub(crate) name: [u8; MAX_PORT_NAME],
    /// Incremented by every unregistration, so blocked receivers notice.
    pub(crate) epoch: u64,
    /// The registration's part of its owner's quota.
    pub(crate) charge: Charge,
    rings: KVec<Option<ServerRing>>,
    /// Nodes whose ring broke and who have not been told (bit per node).
    broken_rings: u64,
    local: Ring<LocalMessage>,
    /// Where the round-robin over sources goes on (rings by node, then the
    /// local queue).
    cursor: usize,
}

impl PortState {
    fn new() -> Result<Self> {
        let mut rings = KVec::with_capacity(MAX_NODES, GFP_KERNEL)?;
        for _ in 0..MAX_NODES {
            rings.push(None, GFP_KERNEL)?;
        }
        Ok(PortState {
            owner: None,
            max_size: 0,
            name: [0; MAX_PORT_NAME],
            epoch: 0,
            charge: Charge::none(),
            rings,
            broken_rings: 0,
            local: Ring::new(LOCAL_QUEUE)?,
            cursor: 0,
        })
    }

    /// The ring of `node`, created (taking `memory`) if it has none yet.
    pub(crate) fn ring_for(
        &mut self,
        node: NodeId,
        memory: &mut Option<DmaBuffer>,
    ) -> Result<&mut ServerRing> {
        let slot = self.rings.get_mut(node.index()).ok_or(EINVAL)?;
        if slot.is_none() {
            let memory = memory.take().ok_or(ENOMEM)?;
            *slot = Some(ServerRing {
                memory,
                reader: RingReader::new(RING_SIZE),
                unreported: None,
            });
        }
        slot.as_mut().ok_or(ENOMEM)
    }

    /// Whether `node` already has a ring.
    pub(crate) fn has_ring(&self, node: NodeId) -> bool {
        matches!(self.rings.get(node.index()), Some(Some(_)))
    }

    /// Nodes that have a ring (to tell them of an unregistration).
    pub(crate) fn ring_nodes(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.rings
            .iter()
            .enumerate()
            .filter(|(_, r)| r.is_some())
            .map(|(node, _)| NodeId::new(node as u32))
    }

    /// Records a write of `bytes` bytes with immediate into the ring of
    /// `node` at ring offset `offset`. Returns whether a request was queued;
    /// a write that breaks the ring is reported by [`PortState::broken`].
    ///
    /// # Errors
    ///
    /// `EINVAL` if `node` has no ring (it skipped the query that makes one).
    pub(crate) fn arrived(&mut self, node: NodeId, offset: u64, bytes: u64) -> Result<bool> {
        let ring = self
            .rings
            .get_mut(node.index())
            .and_then(Option::as_mut)
            .ok_or(EINVAL)?;
        let fault = match ring.reader.arrive(offset, bytes) {
            Ok(Arrival::Request { offset, len }) => {
                // The header is checked now, while the sender's writes are
                // still in step with the ring, so that a lie in it breaks
                // the ring before the request is read.
                match ring.read_header(offset) {
                    Ok(header) if u64::from(header.len) == len => return Ok(true),
                    Ok(header) if header.flags & FLAG_FAULT_INJECTED != 0 => RingFault::Injected,
                    _ => RingFault::BadHeader,
                }
            }
            Ok(Arrival::Discarded) => {
                // Reported again for every discarded write, so that a sender
                // that missed the first report learns of it all the same.
                ring.unreported = ring.reader.broken();
                self.broken_rings |= node_bit(node.index());
                return Ok(false);
            }
            Err(fault) => fault,
        };
        self.break_ring(node.index(), fault);
        Ok(false)
    }

    /// Breaks the ring of `node`: its waiting requests are discarded and its
    /// sender is to be told, so that their callers fail at once.
    fn break_ring(&mut self, node: usize, fault: RingFault) {
        if let Some(Some(ring)) = self.rings.get_mut(node) {
            let broken = ring.reader.break_ring(fault);
            if broken.injected {
                pr_notice!(
                    "node {}'s request ring broken by fault injection: discarding {} requests\n",
                    node,
                    broken.discarded
                );
            } else {
                pr_err!(
                    "node {} corrupted its request ring ({:?}): discarding {} requests\n",
                    node,
                    fault,
                    broken.discarded
                );
            }
            ring.unreported = Some(broken);
            self.broken_rings |= node_bit(node);
        }
    }

    /// Takes the next broken ring whose sender has not been told yet, as
    /// `(node, what was discarded)`.
    pub(crate) fn broken(&mut self) -> Option<(NodeId, Broken)> {
        while self.broken_rings != 0 {
            let node = self.broken_rings.trailing_zeros() as usize;
            self.broken_rings &= !node_bit(node);
            if let Some(Some(ring)) = self.rings.get_mut(node) {
                if let Some(broken) = ring.unreported.take() {
                    return Some((NodeId::new(node as u32), broken));
                }
            }
        }
        None
    }

    /// Queues a local request, or gives it back if the queue is full.
    pub(crate) fn push_local(&mut self, message: LocalMessage) -> Result<(), LocalMessage> {
        self.local.push(message)
    }

    /// Whether a message is waiting for a receiver.
    pub(crate) fn has_queued(&self) -> bool {
        self.local.peek().is_some()
            || self
                .rings
                .iter()
                .flatten()
                .any(|ring| ring.reader.pending() > 0)
    }

    /// Takes the next message if it fits in `room` bytes, going round the
    /// sources so that no client node starves the others.
    pub(crate) fn take(&mut self, room: u64) -> Result<Result<Taken, Empty>> {
        // PANIC: a small constant plus 1.
        let sources = MAX_NODES + 1;
        for step in 0..sources {
            // PANIC: `cursor < sources` (only set modulo `sources`) and `step
            // < sources`, so the sum is small; `sources` is not 0.
            let source = (self.cursor + step) % sources;
            let taken = if source == MAX_NODES {
                self.take_local(room)
            } else {
                self.take_from_ring(source, room)?
            };
            match taken {
                Err(Empty::Nothing) => continue,
                other => {
                    // PANIC: `source < sources`.
                    self.cursor = (source + 1) % sources;
                    return Ok(other);
                }
            }
        }
        Ok(Err(Empty::Nothing))
    }

    fn take_local(&mut self, room: u64) -> Result<Taken, Empty> {
        match self.local.peek() {
            None => return Err(Empty::Nothing),
            Some(message) if message.data.len() as u64 > room => return Err(Empty::TooLong),
            Some(_) => {}
        }
        let message = self.local.pop().ok_or(Empty::Nothing)?;
        Ok(Taken {
            data: message.data,
            reply_to: message.call.map(ReplyTo::Local),
            from: None,
            ack: None,
        })
    }

    /// The next request in the ring of `node`, whatever its size.
    pub(crate) fn take_from_node(&mut self, node: NodeId) -> Result<Result<Taken, Empty>> {
        self.take_from_ring(node.index(), u64::MAX)
    }

    /// The next request in the ring of `node`.
    fn take_from_ring(&mut self, node: usize, room: u64) -> Result<Result<Taken, Empty>> {
        let Some(Some(ring)) = self.rings.get_mut(node) else {
            return Ok(Err(Empty::Nothing));
        };
        let Some(at) = ring.reader.next_offset() else {
            return Ok(Err(Empty::Nothing));
        };
        let header = ring.read_header(at)?;
        let len = u64::from(header.len);
        if len > room {
            return Ok(Err(Empty::TooLong));
        }
        if len > MAX_MESSAGE_SIZE {
            self.break_ring(node, RingFault::BadLength);
            return Ok(Err(Empty::Nothing));
        }
        // Read before the request is consumed, so that running out of
        // memory leaves it queued instead of losing it; a read past the
        // ring's end fails without consuming anything.
        // PANIC: `at` is a ring offset, below `RING_SIZE`, so adding
        // `HEADER_LEN` does not overflow.
        let data = ring.memory.copied(at as usize + HEADER_LEN, len as usize)?;
        let ack = match ring
            .reader
            .consume(len, header.flags & FLAG_ACK_WANTED != 0)
        {
            Ok(ack) => ack,
            Err(fault) => {
                // Rewritten since it arrived: not something a correct
                // sender does.
                self.break_ring(node, fault);
                return Ok(Err(Empty::Nothing));
            }
        };
        let reply_to = header.wants_reply().then_some(ReplyTo::Remote {
            node: NodeId::new(node as u32),
            header,
        });
        Ok(Ok(Taken {
            data,
            reply_to,
            from: Some(NodeId::new(node as u32)),
            ack: ack.map(|position| (NodeId::new(node as u32), position)),
        }))
    }

    /// Forgets the ring of `node`, which is gone, with the requests queued
    /// in it (nobody waits for their answers any more); returns the ring,
    /// to be freed once the port's lock is released.
    pub(crate) fn forget_node(&mut self, node: NodeId) -> Option<ServerRing> {
        self.broken_rings &= !node_bit(node.index());
        self.rings.get_mut(node.index())?.take()
    }

    /// Takes every queued message, for failing their callers.
    pub(crate) fn drain(&mut self) -> Result<KVec<Taken>> {
        let mut all = KVec::new();
        loop {
            match self.take(u64::MAX)? {
                Ok(taken) => all.push(taken, GFP_KERNEL)?,
                Err(_) => return Ok(all),
            }
        }
    }
}

/// One port.
#[pin_data]
pub(crate) struct Port {
    /// Its state.
    /// Lock class `lite:port`: see the lock order in [`crate::internal::core`].
    #[pin]
    pub(crate) state: Mutex<PortState>,
    /// Signalled when a message arrives or the port is unregistered.
    #[pin]
    pub(crate) arrived: CondVar,
    /// Signalled when local messages are taken.
    #[pin]
    pub(crate) room: CondVar,
}

impl Port {
    /// An unregistered port.
    pub(crate) fn new() -> Result<impl PinInit<Self, Error>> {
        let state = PortState::new()?;
        Ok(try_pin_init!(Port {
            state <- new_mutex!(state, "lite:port"),
            arrived <- new_condvar!("lite:port_arrived"),
            room <- new_condvar!("lite:port_room"),
        }))
    }
}
