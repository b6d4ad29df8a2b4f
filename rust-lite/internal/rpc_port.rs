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

use kernel::{
    new_condvar, new_mutex,
    prelude::*,
    sync::{Arc, CondVar, Mutex},
};

use super::{
    ring::Ring,
    rpc_client::LocalCall,
    rpc_wire::{
        RequestHeader, RingReader, FLAG_ACK_WANTED, FLAG_PAD, HEADER_LEN, MAX_PORT_NAME, RING_SIZE,
    },
    MAX_NODES,
};
use crate::verbs::DmaBuffer;

/// Messages from this node's processes queued on one port.
const LOCAL_QUEUE: usize = 256;

/// Where the answer to a request goes.
pub(crate) enum ReplyTo {
    /// A caller on another node, waiting in reply slot `slot`.
    Remote {
        /// The caller's node.
        node: u32,
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
}

/// A message taken from a port.
pub(crate) struct Taken {
    /// Its bytes.
    pub(crate) data: KVVec<u8>,
    /// Who waits for the answer, if anyone.
    pub(crate) reply_to: Option<ReplyTo>,
    /// A ring position to acknowledge to `(node, consumed)`.
    pub(crate) ack: Option<(u32, u64)>,
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
    rings: KVec<Option<ServerRing>>,
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
            rings,
            local: Ring::new(LOCAL_QUEUE)?,
            cursor: 0,
        })
    }

    /// The ring of `node`, created (with `memory`) if it has none yet.
    pub(crate) fn ring_for(&mut self, node: u32, memory: Option<DmaBuffer>) -> Result<&ServerRing> {
        let slot = self.rings.get_mut(node as usize).ok_or(EINVAL)?;
        if slot.is_none() {
            let memory = memory.ok_or(ENOMEM)?;
            *slot = Some(ServerRing {
                memory,
                reader: RingReader::new(RING_SIZE),
            });
        }
        slot.as_ref().ok_or(ENOMEM)
    }

    /// Whether `node` already has a ring.
    pub(crate) fn has_ring(&self, node: u32) -> bool {
        matches!(self.rings.get(node as usize), Some(Some(_)))
    }

    /// Nodes that have a ring (to tell them of an unregistration).
    pub(crate) fn ring_nodes(&self) -> impl Iterator<Item = u32> + '_ {
        self.rings
            .iter()
            .enumerate()
            .filter(|(_, r)| r.is_some())
            .map(|(node, _)| node as u32)
    }

    /// Records a request that arrived in the ring of `node`.
    pub(crate) fn arrived(&mut self, node: u32) -> Result {
        let ring = self
            .rings
            .get_mut(node as usize)
            .and_then(Option::as_mut)
            // The client skipped the query that creates the ring.
            .ok_or(EINVAL)?;
        ring.reader.arrived();
        Ok(())
    }

    /// Queues a local request, or gives it back if the queue is full.
    pub(crate) fn push_local(&mut self, message: LocalMessage) -> Result<(), LocalMessage> {
        self.local.push(message)
    }

    /// Takes the next message if it fits in `room` bytes, going round the
    /// sources so that no client node starves the others.
    pub(crate) fn take(&mut self, room: u64) -> Result<Result<Taken, Empty>> {
        let sources = MAX_NODES + 1;
        for step in 0..sources {
            let source = (self.cursor + step) % sources;
            let taken = if source == MAX_NODES {
                self.take_local(room)
            } else {
                self.take_from_ring(source, room)?
            };
            match taken {
                Err(Empty::Nothing) => continue,
                other => {
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
            ack: None,
        })
    }

    /// The next request in the ring of `node`, whatever its size.
    pub(crate) fn take_from_node(&mut self, node: u32) -> Result<Result<Taken, Empty>> {
        self.take_from_ring(node as usize, u64::MAX)
    }

    /// The next request in the ring of `node`; pads are skipped.
    fn take_from_ring(&mut self, node: usize, room: u64) -> Result<Result<Taken, Empty>> {
        let Some(Some(ring)) = self.rings.get_mut(node) else {
            return Ok(Err(Empty::Nothing));
        };
        loop {
            if ring.reader.pending() == 0 {
                return Ok(Err(Empty::Nothing));
            }
            let at = ring.reader.next_offset();
            let mut bytes = [0u8; HEADER_LEN];
            ring.memory.read_bytes(at as usize, &mut bytes)?;
            let header = RequestHeader::decode(&bytes);
            if header.flags & FLAG_PAD != 0 {
                ring.reader.skip_pad();
                continue;
            }
            let len = u64::from(header.len);
            if at + HEADER_LEN as u64 + len > RING_SIZE {
                // Not something a correct client writes: drop the ring's
                // backlog rather than read past its end.
                pr_err!(
                    "node {} wrote a malformed request; dropping its queue\n",
                    node
                );
                while ring.reader.pending() > 0 {
                    ring.reader.consume(0, true);
                }
                return Ok(Err(Empty::Nothing));
            }
            if len > room {
                return Ok(Err(Empty::TooLong));
            }
            let mut data = KVVec::from_elem(0u8, len as usize, GFP_KERNEL)?;
            ring.memory
                .read_bytes(at as usize + HEADER_LEN, &mut data)?;
            let ack = ring
                .reader
                .consume(len, header.flags & FLAG_ACK_WANTED != 0)
                .map(|consumed| (node as u32, consumed));
            let reply_to = header.wants_reply().then_some(ReplyTo::Remote {
                node: node as u32,
                header,
            });
            return Ok(Ok(Taken {
                data,
                reply_to,
                ack,
            }));
        }
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
