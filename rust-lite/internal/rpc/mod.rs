// SPDX-License-Identifier: GPL-2.0

//! RPC and messaging over RDMA write with immediate
//! (`lite_register_application` … `lite_send_reply_multicast`).
//!
//! A call is two writes with immediate: the request into the ring the
//! server keeps for (port, this node), the reply straight into the caller's
//! reply slot. The polling thread sees both arrive as receive completions.
//! Flow control is by ring space: the server acknowledges consumed space,
//! and a sender whose ring is full waits (or gets `EAGAIN`), so nothing is
//! ever overwritten or dropped. Calls to this node's own ports skip RDMA.
//!
//! Requests and replies of up to [`INLINE_MAX`] bytes travel inline in
//! their work request, which is posted but not waited for: a caller goes
//! straight to waiting for its reply, a server to its next request. Such a
//! write can only fail by breaking the connection, which the node learns
//! from the connection's flushed receives; a call waiting for its reply
//! then fails when the peer is declared gone, or at its timeout.
//!
//! The client's operations are in [`calls`], the server's in [`serving`];
//! [`client`] and [`port`] hold the state each side keeps.

use crate::internal::node_id::NodeId;
use core::pin::Pin;

pub(crate) mod call_in_flight;
mod calls;
pub(crate) mod client;
#[cfg(CONFIG_LITE_FAULT_INJECTION)]
pub(crate) mod fault_injection;
pub(crate) mod outgoing;
pub(crate) mod payload;
pub(crate) mod port;
pub(crate) mod ring_protocol;
mod serving;
pub(crate) mod wire;

use kernel::{prelude::*, sync::Arc};

use self::{
    client::{Outcome, PortView, ReplySlots, ServerNode},
    port::Port,
    ring_protocol::{check_port, check_served_port, Imm, MAX_MESSAGE_SIZE, PORTS},
    wire::RpcMessage,
};
use super::{
    core::{
        limits::MAX_NODES,
        peer::Peer,
        subsystem::{Handling, Subsystem},
        wire::Frame,
        Core,
    },
    qos::priority::{DefaultPriority, Priority},
};
#[cfg(doc)]
use crate::verbs::INLINE_MAX;

/// `lite_send` flag (in `port_priority`): fail with `EAGAIN` rather than
/// wait for ring space.
pub(crate) const SEND_NONBLOCK: u32 = 0x8000_0000;

/// `lite_receive_message` flag: fail with `EAGAIN` rather than wait.
pub(crate) const RECV_NONBLOCK: u32 = 0x1;

/// RPC state of a node: its ports (server side) and what it knows of other
/// nodes' ports (client side).
#[pin_data]
pub(crate) struct Rpc {
    core: Arc<Core>,
    ports: KVec<Pin<KBox<Port>>>,
    servers: KVec<Pin<KBox<ServerNode>>>,
    /// Shared with the asynchronous calls waiting in them.
    slots: Arc<ReplySlots>,
}

impl Rpc {
    /// RPC over `core`, with no port registered and none known.
    pub(crate) fn new(core: Arc<Core>) -> Result<Arc<Self>> {
        let mut ports = KVec::with_capacity(PORTS as usize, GFP_KERNEL)?;
        for _ in 0..PORTS {
            ports.push(KBox::pin_init(Port::new()?, GFP_KERNEL)?, GFP_KERNEL)?;
        }
        let mut servers = KVec::with_capacity(MAX_NODES, GFP_KERNEL)?;
        for _ in 0..MAX_NODES {
            servers.push(KBox::pin_init(ServerNode::new()?, GFP_KERNEL)?, GFP_KERNEL)?;
        }
        let slots = Arc::pin_init(ReplySlots::new()?, GFP_KERNEL)?;
        Arc::pin_init(
            try_pin_init!(Rpc {
                core,
                ports,
                servers,
                slots,
            }? Error),
            GFP_KERNEL,
        )
    }

    fn port(&self, port: u32) -> Result<&Port> {
        // PANIC: `check_served_port` admits only numbers below `PORTS`,
        // and there is a port for each.
        Ok(&self.ports[check_served_port(port)? as usize])
    }

    fn server(&self, node: NodeId) -> Result<&ServerNode> {
        self.servers.get(node.index()).map(|s| &**s).ok_or(EINVAL)
    }
}

/// The target of a send: port, priority and flags packed as in
/// `LITE_PORT_PRIORITY(port, priority) | LITE_SEND_NONBLOCK`.
pub(crate) struct Target {
    /// The port.
    pub(crate) port: u32,
    /// Fail with `EAGAIN` rather than wait for room.
    pub(crate) nonblocking: bool,
    /// The send's priority ([`Priority::None`] until the caller's default
    /// is applied with [`Target::with_default`]).
    pub(crate) priority: Priority,
}

impl Target {
    /// Unpacks `port_priority`.
    ///
    /// # Errors
    ///
    /// `EINVAL` for a bad port, priority or unknown bits.
    pub(crate) fn unpack(port_priority: u32) -> Result<Self> {
        let nonblocking = port_priority & SEND_NONBLOCK != 0;
        let rest = port_priority & !SEND_NONBLOCK;
        let port = check_port(rest & 0xffff)?;
        let priority = Priority::from_raw(rest >> 16)?;
        Ok(Target {
            port,
            nonblocking,
            priority,
        })
    }

    /// The target with the caller's default priority applied.
    pub(crate) fn with_default(mut self, default: &DefaultPriority) -> Self {
        self.priority = default.apply(self.priority);
        self
    }
}

/// The view of `port` among a server node's ports.
fn view_of(ports: &mut KVec<PortView>, port: u32) -> &mut PortView {
    // PANIC: every port number reaching here passed `check_port` or
    // `check_served_port`, and a server node keeps a view for each of the
    // `PORTS` ports.
    &mut ports[port as usize]
}

/// Checks a message size.
fn check_size(len: usize) -> Result {
    if len == 0 || len as u64 > MAX_MESSAGE_SIZE {
        Err(EINVAL)
    } else {
        Ok(())
    }
}

impl Rpc {
    /// Gives the reply buffers idle reply slots keep back to the pool.
    pub(crate) fn release_kept_reply_buffers(&self) {
        self.slots.release_kept_buffers();
    }

    /// Reply buffers kept by idle reply slots.
    pub(crate) fn kept_reply_buffers(&self) -> usize {
        self.slots.kept_buffers()
    }

    /// Reply slots of this node's calls whose replies are not consumed yet.
    pub(crate) fn reply_slots_in_use(&self) -> usize {
        self.slots.in_use()
    }

    /// Ports registered on this node.
    pub(crate) fn registered_ports(&self) -> usize {
        // One port lock at a time.
        self.ports
            .iter()
            .filter(|p| p.state.lock().owner.is_some())
            .count()
    }

    /// Rings this node keeps for its ports' clients.
    pub(crate) fn rings(&self) -> usize {
        // One port lock at a time.
        self.ports
            .iter()
            .map(|p| p.state.lock().ring_nodes().count())
            .sum()
    }

    /// A write with immediate of `byte_len` bytes arrived from `node`
    /// (polling thread).
    pub(crate) fn arrived(&self, node: NodeId, imm: u32, byte_len: u32) {
        match Imm::decode(imm) {
            Some(Imm::Request { port, offset }) => {
                self.request_arrived(node, port, offset, u64::from(byte_len))
            }
            Some(Imm::Reply { slot, generation }) => {
                self.slots
                    .answer(slot as usize, generation, Outcome::Replied(byte_len));
            }
            None => pr_warn!("node {} sent an unknown immediate {:#x}\n", node, imm),
        }
    }
}

impl Rpc {
    /// Forgets what this node knew of `node`'s ports (waking senders that
    /// wait for room in them, whose next query fails) and what its ports
    /// kept for `node`.
    fn forget_node(&self, node: NodeId) {
        if let Ok(server) = self.server(node) {
            let mut ports = server.ports.lock();
            for view in ports.iter_mut() {
                if view.remote.is_some() {
                    view.drop_remote();
                }
            }
            drop(ports);
            server.room.notify_all();
        }
        for port in self.ports.iter() {
            let ring = port.state.lock().forget_node(node);
            // Freed here, outside the port's lock.
            drop(ring);
        }
    }
}

impl Subsystem for Rpc {
    /// Calls to the gone node's ports fail with `EHOSTDOWN`, the rings its
    /// ports keep for this node are forgotten, and the rings this node's
    /// ports keep for it are freed with the requests queued in them; a
    /// receiver answering a request it took from it gets `EHOSTDOWN`.
    fn on_peer_gone(&self, node: NodeId) {
        self.slots.fail_node(node);
        self.forget_node(node);
    }

    fn on_message(&self, peer: &Arc<Peer>, frame: &Frame) -> Handling {
        match RpcMessage::from_frame(frame) {
            Some(RpcMessage::QueryPort {
                request_id,
                port,
                fresh,
            }) => {
                let reply = self.answer_query_port(peer.node, request_id, port, fresh);
                Handling::Answer(reply.to_frame())
            }
            Some(RpcMessage::QueryPortReply { .. }) | None => Handling::Done,
            Some(notice) => {
                self.on_notice(peer.node, notice);
                Handling::Done
            }
        }
    }
}
