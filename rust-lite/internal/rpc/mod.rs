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

use core::{
    pin::Pin,
    sync::atomic::{AtomicU32, Ordering},
};
pub(crate) mod call_in_flight;
pub(crate) mod client;
pub(crate) mod outgoing;
pub(crate) mod payload;
pub(crate) mod port;
pub(crate) mod ring_protocol;
pub(crate) mod wire;

use kernel::{prelude::*, sync::Arc};

use self::{
    call_in_flight::CallInFlight,
    client::{
        ClaimedSlot, LocalCall, Outcome, Pending, PortView, RemotePort, ReplySlots, SentRequest,
        ServerNode,
    },
    outgoing::Outgoing,
    payload::{Payload, ReplyDestination, ToKernel},
    port::{Empty, LocalMessage, Port, ReplyTo, Taken},
    ring_protocol::{
        check_port, Broken, Imm, RequestHeader, RingWriter, FLAG_ACK_WANTED, FLAG_FAULT_INJECTED,
        FLAG_ONE_WAY, HEADER_LEN, MAX_MESSAGE_SIZE, MAX_PORTS, MAX_PORT_NAME, RING_SIZE,
    },
    wire::RpcMessage,
};
use super::{
    core::{
        limits::MAX_NODES,
        peer::Peer,
        subsystem::{Handling, Subsystem},
        wire::{Frame, Status},
        Core,
    },
    process::Process,
    qos::{
        admission,
        op_stats::{OpKind, OpTimer},
        priority::{DefaultPriority, Priority},
    },
    quota::{
        amounts::{Amounts, Resource},
        Charge,
    },
};
use crate::{errno, verbs::INLINE_MAX};

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
        let mut ports = KVec::with_capacity(MAX_PORTS as usize, GFP_KERNEL)?;
        for _ in 0..MAX_PORTS {
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
        // PANIC: `check_port` admits only numbers below `MAX_PORTS`, and
        // there is a port for each.
        Ok(&self.ports[check_port(port)? as usize])
    }

    fn server(&self, node: u32) -> Result<&ServerNode> {
        self.servers.get(node as usize).map(|s| &**s).ok_or(EINVAL)
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
    // PANIC: every port number reaching here passed `check_port`, and a
    // server node keeps a view for each of the `MAX_PORTS` ports.
    &mut ports[port as usize]
}

/// Node whose next request gets a header that lies about its length
/// (fault injection through debugfs), or 0 for none.
static BAD_HEADER_TO: AtomicU32 = AtomicU32::new(0);

/// Makes the next request this node posts to `node` carry a header whose
/// length disagrees with its bytes, flagged as injected, so that the server
/// breaks the ring and its callers fail with `EPROTO`; 0 disarms.
pub(crate) fn inject_bad_header(node: u32) {
    BAD_HEADER_TO.store(node, Ordering::Relaxed);
}

/// Whether the request being posted to `node` is to carry a bad header
/// (once per arming).
fn take_bad_header(node: u32) -> bool {
    node != 0
        && BAD_HEADER_TO.load(Ordering::Relaxed) == node
        && BAD_HEADER_TO
            .compare_exchange(node, 0, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
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
    /// `lite_register_application`: opens `port` for messages of at most
    /// `max_size` bytes, owned by process `owner`.
    ///
    /// # Errors
    ///
    /// `EINVAL` bad port, size or name; `EADDRINUSE` port taken.
    pub(crate) fn register_application(
        &self,
        process: &Process,
        port: u32,
        max_size: u64,
        name: &[u8],
    ) -> Result {
        if max_size == 0 || max_size > MAX_MESSAGE_SIZE || name.len() > MAX_PORT_NAME {
            return Err(EINVAL);
        }
        let port = self.port(port)?;
        let charge = self
            .core
            .quotas
            .charge(process.payer(), Amounts::of(Resource::RpcPorts, 1))?;
        let mut state = port.state.lock();
        if state.owner.is_some() {
            return Err(errno::EADDRINUSE());
        }
        state.owner = Some(process.tgid);
        state.charge = charge;
        state.max_size = max_size;
        state.name = [0; MAX_PORT_NAME];
        // PANIC: `name.len() <= MAX_PORT_NAME` (checked above), the length
        // of `state.name`.
        state.name[..name.len()].copy_from_slice(name);
        Ok(())
    }

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

    /// `lite_unregister_application`: closes `port`, failing the callers
    /// of requests not yet received and waking blocked receivers.
    ///
    /// # Errors
    ///
    /// `EINVAL` bad port, `ENOENT` not registered, `EPERM` registered by
    /// another process.
    pub(crate) fn unregister_application(&self, owner: i32, port_number: u32) -> Result {
        let port = self.port(port_number)?;
        let (drained, nodes, charge) = {
            let mut state = port.state.lock();
            match state.owner {
                None => return Err(ENOENT),
                Some(o) if o != owner => return Err(EPERM),
                Some(_) => {}
            }
            state.owner = None;
            // Given back once the lock is released.
            let charge = core::mem::replace(&mut state.charge, Charge::none());
            // PANIC: one increment per unregistration; a `u64` does not run
            // out.
            state.epoch += 1;
            let drained = state.drain();
            let mut nodes = KVec::new();
            for node in state.ring_nodes() {
                // Without room to note a node it just re-queries later.
                let _ = nodes.push(node, GFP_KERNEL);
            }
            (drained, nodes, charge)
        };
        drop(charge);
        self.report_broken_rings(port_number, port, None);
        port.arrived.notify_all();
        port.room.notify_all();
        for taken in drained? {
            self.dispose(port_number, taken, errno::ECONNREFUSED());
        }
        for node in nodes {
            if let Ok(peer) = self.core.peer(node) {
                let _ = peer.send(&RpcMessage::PortClosed { port: port_number }.to_frame());
            }
        }
        Ok(())
    }

    /// Fails the caller of a message that will not be received, and
    /// acknowledges its ring space.
    fn dispose(&self, port: u32, taken: Taken, error: Error) {
        self.acknowledge(port, taken.ack);
        if let Some(reply_to) = taken.reply_to {
            self.fail_caller(reply_to, error);
        }
    }

    fn acknowledge(&self, port: u32, ack: Option<(u32, u64)>) {
        if let Some((node, consumed)) = ack {
            if let Ok(peer) = self.core.peer(node) {
                if let Err(e) = peer.send(&RpcMessage::RingAck { port, consumed }.to_frame()) {
                    pr_warn!("cannot acknowledge ring space to node {}: {:?}\n", node, e);
                }
            }
        }
    }

    fn fail_caller(&self, reply_to: ReplyTo, error: Error) {
        match reply_to {
            ReplyTo::Local(call) => call.answer(Err(error)),
            ReplyTo::Remote { node, header } => {
                let failed = RpcMessage::RpcFailed {
                    slot: u32::from(header.slot),
                    generation: u32::from(header.generation),
                    status: error.into(),
                }
                .to_frame();
                if let Ok(peer) = self.core.peer(node) {
                    let _ = peer.send(&failed);
                }
            }
        }
    }

    /// Tells the senders of `port`'s broken rings which requests were
    /// discarded, starting with `first` (taken under the port's lock by the
    /// caller), so that their callers fail at once rather than time out.
    fn report_broken_rings(&self, port_number: u32, port: &Port, mut first: Option<(u32, Broken)>) {
        loop {
            let Some((node, broken)) = first.take().or_else(|| port.state.lock().broken()) else {
                return;
            };
            let report = RpcMessage::RingBroken {
                port: port_number,
                epoch: broken.epoch,
                received: broken.received,
                injected: broken.injected,
            }
            .to_frame();
            if let Err(e) = self.core.peer(node).and_then(|peer| peer.send(&report)) {
                pr_err!(
                    "cannot tell node {} that its ring for port {} broke: {:?}\n",
                    node,
                    port_number,
                    e
                );
            }
        }
    }

    /// `lite_query_port`: learns where to send requests for `port` of
    /// `node`; returns the port's largest message size.
    ///
    /// # Errors
    ///
    /// `EINVAL` bad port, `EHOSTUNREACH`, `ECONNREFUSED` not registered.
    pub(crate) fn query_port(&self, node: u32, port: u32) -> Result<u64> {
        check_port(port)?;
        if node == self.core.node_id() {
            let state = self.port(port)?.state.lock();
            return match state.owner {
                Some(_) => Ok(state.max_size),
                None => Err(errno::ECONNREFUSED()),
            };
        }
        let peer = self.core.peer(node)?;
        let server = self.server(node)?;
        // A fresh query (no view of the ring, and no other query that may
        // make one) can be answered with where the next request goes:
        // nothing of this node's is in flight to the ring, and every request
        // written with an earlier view reaches the server ahead of the query.
        let (fresh, drops) = {
            let mut ports = server.ports.lock();
            let view = view_of(&mut ports, port);
            let fresh = view.remote.is_none() && !view.querying;
            view.querying |= fresh;
            (fresh, view.drops)
        };
        let answer = self.ask_port(&peer, port, fresh);
        if !fresh {
            return answer.map(|remote| remote.max_size);
        }
        let mut ports = server.ports.lock();
        let view = view_of(&mut ports, port);
        view.querying = false;
        let max_size = answer.map(|remote| {
            let max_size = remote.max_size;
            // Not installed if the view was dropped meanwhile: the answer
            // may describe the ring before requests written since.
            if view.remote.is_none() && view.drops == drops {
                view.remote = Some(remote);
            }
            max_size
        });
        drop(ports);
        // Senders wait for this query rather than make their own.
        server.room.notify_all();
        max_size
    }

    /// Asks `peer` about its `port` (`fresh` as in
    /// [`RpcMessage::QueryPort`]).
    fn ask_port(&self, peer: &Peer, port: u32, fresh: bool) -> Result<RemotePort> {
        let reply = self.core.requests.call(peer, |request_id| {
            RpcMessage::QueryPort {
                request_id,
                port,
                fresh,
            }
            .to_frame()
        })?;
        let Some(RpcMessage::QueryPortReply {
            status,
            ring_addr,
            ring_rkey,
            ring_size,
            max_size,
            consumed,
            written,
            epoch,
            ..
        }) = RpcMessage::from_frame(&reply)
        else {
            return Err(errno::EPROTO());
        };
        status.to_result()?;
        if ring_size != RING_SIZE || max_size == 0 || max_size > MAX_MESSAGE_SIZE {
            return Err(errno::EPROTO());
        }
        // Requests are written at `ring_addr` plus an offset in the ring: a
        // ring that wraps around the address space is a protocol error.
        if ring_addr.checked_add(RING_SIZE).is_none() {
            return Err(errno::EPROTO());
        }
        Ok(RemotePort {
            ring_addr,
            ring_rkey,
            max_size,
            epoch,
            writer: RingWriter::resuming(ring_size, consumed, written).ok_or_else(errno::EPROTO)?,
        })
    }

    /// Answers a peer's [`RpcMessage::QueryPort`] (polling thread).
    fn answer_query_port(&self, node: u32, request_id: u64, port: u32, fresh: bool) -> RpcMessage {
        let fail = |status: Error| RpcMessage::QueryPortReply {
            request_id,
            status: status.into(),
            ring_addr: 0,
            ring_rkey: 0,
            ring_size: 0,
            max_size: 0,
            consumed: 0,
            written: 0,
            epoch: 0,
        };
        let Ok(port_ref) = self.port(port) else {
            return fail(EINVAL);
        };
        let needs_ring = {
            let state = port_ref.state.lock();
            if state.owner.is_none() {
                return fail(errno::ECONNREFUSED());
            }
            !state.has_ring(node)
        };
        // Allocate outside the lock; a racing query's ring wins.
        let memory = if needs_ring {
            match self.core.ring_pool.allocate(RING_SIZE as usize) {
                Ok(memory) => Some(memory),
                Err(e) => return fail(e),
            }
        } else {
            None
        };
        let mut state = port_ref.state.lock();
        let max_size = state.max_size;
        match state.ring_for(node, memory) {
            Ok(ring) => match ring.memory.remote_range(0, RING_SIZE as usize) {
                Ok((ring_addr, ring_rkey)) => {
                    if fresh {
                        // This runs on the polling thread, which has seen
                        // every request the sender wrote before asking.
                        ring.reader.start_afresh();
                    }
                    RpcMessage::QueryPortReply {
                        request_id,
                        status: Status::OK,
                        ring_addr,
                        ring_rkey,
                        ring_size: RING_SIZE,
                        max_size,
                        consumed: ring.reader.consumed(),
                        written: ring.reader.written(),
                        epoch: ring.reader.epoch(),
                    }
                }
                Err(e) => fail(e),
            },
            Err(e) => fail(e),
        }
    }

    /// Sends a request (`max_reply` is `None` for a one-way message) and
    /// returns what to wait on.
    fn start_call(
        &self,
        node: u32,
        target: &Target,
        message: Payload<'_>,
        max_reply: Option<u64>,
    ) -> Result<Pending> {
        check_size(message.len())?;
        if node == self.core.node_id() {
            return self.start_local(target, message, max_reply);
        }
        let peer = self.core.peer(node)?;
        let server = self.server(node)?;
        let slot = match max_reply {
            Some(room) => {
                let room = usize::try_from(room.min(MAX_MESSAGE_SIZE)).map_err(|_| EINVAL)?;
                let pool = &self.core.pool;
                Some(self.slots.claim(room, |len| pool.allocate(len))?)
            }
            None => None,
        };
        let sent = self.post_request(&peer, server, node, target, message, slot.as_ref());
        match (sent, slot) {
            (Ok(()), Some(claimed)) => Ok(Pending::Remote(claimed.slot)),
            (Ok(()), None) => Ok(Pending::OneWay),
            (Err(e), Some(claimed)) => {
                self.slots.cancel(claimed.slot);
                Err(e)
            }
            (Err(e), None) => Err(e),
        }
    }

    fn post_request(
        &self,
        peer: &Peer,
        server: &ServerNode,
        node: u32,
        target: &Target,
        message: Payload<'_>,
        reply_slot: Option<&ClaimedSlot>,
    ) -> Result {
        let len = message.len();
        let mut header = RequestHeader {
            len: len as u32,
            port: target.port as u16,
            ..RequestHeader::default()
        };
        match reply_slot {
            Some(claimed) => {
                (header.reply_addr, header.reply_rkey) = claimed.reply_addr;
                header.max_reply = claimed.room as u32;
                header.slot = claimed.slot as u16;
                header.generation = claimed.generation as u16;
            }
            None => header.flags = FLAG_ONE_WAY,
        }
        // PANIC: `len <= MAX_MESSAGE_SIZE` (checked by `start_call`).
        let total = HEADER_LEN + len;
        if peer.conn.fits_inline(total) {
            let mut inline = [0u8; INLINE_MAX];
            // PANIC: `HEADER_LEN <= total <= max_inline() <= INLINE_MAX`
            // (`fits_inline`).
            message.copy_to(&mut inline[HEADER_LEN..total])?;
            let outgoing = Outgoing::Inline(&mut inline[..total]);
            return self.post_assembled(peer, server, node, target, header, outgoing, reply_slot);
        }
        self.core.staging.with(total, |buffer| {
            message.copy_to_buffer(buffer, HEADER_LEN)?;
            let outgoing = Outgoing::Staged { buffer, len: total };
            self.post_assembled(peer, server, node, target, header, outgoing, reply_slot)
        })
    }

    /// Reserves ring space for the request in `outgoing` (its message
    /// written after the header's room), writes `header` in and posts it.
    #[allow(clippy::too_many_arguments)]
    fn post_assembled(
        &self,
        peer: &Peer,
        server: &ServerNode,
        node: u32,
        target: &Target,
        mut header: RequestHeader,
        mut outgoing: Outgoing<'_>,
        reply_slot: Option<&ClaimedSlot>,
    ) -> Result {
        let len = header.len as usize;
        let mut ports = server.ports.lock();
        let (ring_addr, ring_rkey, epoch, reservation) = loop {
            let Some(remote) = view_of(&mut ports, target.port).remote.as_mut() else {
                if view_of(&mut ports, target.port).querying {
                    // Another thread's query is making the view.
                    if server.room.wait_interruptible(&mut ports) {
                        return Err(EINTR);
                    }
                    continue;
                }
                drop(ports);
                self.query_port(node, target.port)?;
                ports = server.ports.lock();
                continue;
            };
            if len as u64 > remote.max_size {
                return Err(errno::EMSGSIZE());
            }
            if let Some(reservation) = remote.writer.reserve(len as u64) {
                break (
                    remote.ring_addr,
                    remote.ring_rkey,
                    remote.epoch,
                    reservation,
                );
            }
            if target.nonblocking {
                return Err(EAGAIN);
            }
            if server.room.wait_interruptible(&mut ports) {
                return Err(EINTR);
            }
        };
        // A request that is not posted gives its ring space back before
        // the lock is released, or the next request would land where
        // the server does not expect one.
        let unposted = |ports: &mut KVec<PortView>| {
            if let Some(remote) = view_of(ports, target.port).remote.as_mut() {
                remote.writer.cancel(&reservation);
            }
        };
        if reservation.ack_wanted {
            header.flags |= FLAG_ACK_WANTED;
        }
        if take_bad_header(node) {
            header.len = header.len.wrapping_add(1);
            header.flags |= FLAG_FAULT_INJECTED;
        }
        let imm = Imm::Request {
            port: target.port,
            offset: reservation.offset,
        }
        .encode();
        let prepared = outgoing.write(0, &header.encode());
        let Some(imm) = imm.filter(|_| prepared.is_ok()) else {
            unposted(&mut *ports);
            return prepared.and(Err(EINVAL));
        };
        if let Some(claimed) = reply_slot {
            self.slots.record(
                claimed.slot,
                SentRequest {
                    node,
                    port: target.port,
                    epoch,
                    position: reservation.position,
                },
            );
        }
        // Posted under the lock so requests reach the ring in the order
        // their space was reserved; the lock is released once the
        // request is posted.
        // PANIC: `reservation.offset < RING_SIZE`, and `ask_port` checked
        // that `ring_addr + RING_SIZE` does not overflow.
        outgoing.post(
            peer,
            (ring_addr + reservation.offset, ring_rkey),
            imm,
            move |posted| {
                if !posted {
                    unposted(&mut *ports);
                }
                drop(ports);
            },
        )
    }

    fn start_local(
        &self,
        target: &Target,
        message: Payload<'_>,
        max_reply: Option<u64>,
    ) -> Result<Pending> {
        let port = self.port(target.port)?;
        let data = message.to_vec()?;
        let call = max_reply.map(LocalCall::new).transpose()?;
        let mut pending = LocalMessage {
            data,
            call: call.clone(),
        };
        let mut state = port.state.lock();
        loop {
            if state.owner.is_none() {
                return Err(errno::ECONNREFUSED());
            }
            if message.len() as u64 > state.max_size {
                return Err(errno::EMSGSIZE());
            }
            match state.push_local(pending) {
                Ok(()) => break,
                Err(back) => pending = back,
            }
            if target.nonblocking {
                return Err(EAGAIN);
            }
            if port.room.wait_interruptible(&mut state) {
                return Err(EINTR);
            }
        }
        drop(state);
        // One message: one receiver to wake (see `receive`).
        port.arrived.notify_one();
        // A one-way message has nobody to wait for.
        Ok(match call {
            Some(call) => Pending::Local(call),
            None => Pending::OneWay,
        })
    }

    /// Waits for the reply to `pending` and hands it to `destination`.
    fn finish_call<D: ReplyDestination>(
        &self,
        pending: Pending,
        destination: D,
    ) -> Result<D::Reply> {
        match pending {
            Pending::Local(call) => destination.from_local(call.wait()?),
            Pending::Remote(slot) => self
                .slots
                .wait(slot, |buffer, len| destination.from_slot(buffer, len)),
            Pending::OneWay => destination.from_local(KVVec::new()),
        }
    }

    /// `lite_send_reply_imm`: calls `node` and hands the reply to
    /// `destination`.
    ///
    /// # Errors
    ///
    /// See the UAPI header.
    pub(crate) fn call<D: ReplyDestination>(
        &self,
        node: u32,
        target: &Target,
        message: Payload<'_>,
        max_reply: u64,
        destination: D,
    ) -> Result<D::Reply> {
        let admission = admission::admit(target.priority);
        let timer = OpTimer::start(OpKind::RpcCall, target.priority);
        let answer = self
            .start_call(node, target, message, Some(max_reply))
            .and_then(|pending| self.finish_call(pending, destination));
        timer.finish(admission, message.len() as u64, answer)
    }

    /// `lite_send_reply_imm_async`: posts a call to `node` whose reply is
    /// reaped later. Errors of posting are returned here; those of the
    /// call, when it is reaped.
    pub(crate) fn call_async(
        &self,
        node: u32,
        target: &Target,
        message: Payload<'_>,
        max_reply: u64,
    ) -> Result<CallInFlight> {
        let admission = admission::admit(target.priority);
        let timer = OpTimer::start(OpKind::RpcCallAsync, target.priority);
        let posted = self
            .start_call(node, target, message, Some(max_reply))
            .and_then(|pending| CallInFlight::new(self.slots.clone(), pending));
        timer.finish(admission, message.len() as u64, posted)
    }

    /// `lite_send`: a one-way message.
    pub(crate) fn send_one_way(&self, node: u32, target: &Target, message: Payload<'_>) -> Result {
        let admission = admission::admit(target.priority);
        let timer = OpTimer::start(OpKind::RpcSend, target.priority);
        let sent = self.start_call(node, target, message, None).map(|_| ());
        timer.finish(admission, message.len() as u64, sent)
    }

    /// `lite_send_reply_multicast`: calls every node of `nodes` at once and
    /// gathers the replies (or errors) in order.
    pub(crate) fn multicast(
        &self,
        nodes: &[u32],
        target: &Target,
        message: Payload<'_>,
        max_reply: u64,
    ) -> Result<KVec<Result<KVVec<u8>>>> {
        if nodes.is_empty() || nodes.len() > MAX_NODES {
            return Err(EINVAL);
        }
        check_size(message.len())?;
        let _admission = admission::admit(target.priority);
        let mut pending = KVec::with_capacity(nodes.len(), GFP_KERNEL)?;
        let mut results = KVec::with_capacity(nodes.len(), GFP_KERNEL)?;
        for &node in nodes {
            pending.push(
                self.start_call(node, target, message, Some(max_reply)),
                GFP_KERNEL,
            )?;
        }
        for started in pending {
            results.push(
                started.and_then(|p| self.finish_call(p, ToKernel)),
                GFP_KERNEL,
            )?;
        }
        Ok(results)
    }

    /// `lite_receive_message`: takes the next message of `port` that fits
    /// in `room` bytes, hands its bytes to `deliver` and returns its length
    /// and descriptor (0 for a one-way message). If `deliver` fails, the
    /// message's caller gets that error too, so nothing is lost silently.
    ///
    /// # Errors
    ///
    /// `EINVAL` bad port or flags, `ENOENT` not registered, `EAGAIN` empty
    /// with [`RECV_NONBLOCK`], `EMSGSIZE` next message too long,
    /// `ESHUTDOWN` unregistered while waiting, `EINTR`, or `deliver`'s error.
    pub(crate) fn receive(
        &self,
        process: &Process,
        port_number: u32,
        room: u64,
        flags: u32,
        deliver: impl FnOnce(&[u8]) -> Result,
    ) -> Result<(usize, u64)> {
        if flags & !RECV_NONBLOCK != 0 {
            return Err(EINVAL);
        }
        let port = self.port(port_number)?;
        // Each arriving message wakes one receiver; one that leaves without
        // taking it (too long for its room, a signal), or takes one while
        // more wait, wakes the next, so no message waits while a receiver
        // sleeps, and a message does not wake every receiver of the port.
        let (taken, broken, more) = {
            let mut state = port.state.lock();
            if state.owner.is_none() {
                return Err(ENOENT);
            }
            let epoch = state.epoch;
            loop {
                if state.owner.is_none() || state.epoch != epoch {
                    return Err(errno::ESHUTDOWN());
                }
                let taken = match state.take(room) {
                    Ok(taken) => taken,
                    Err(e) => {
                        drop(state);
                        port.arrived.notify_one();
                        return Err(e);
                    }
                };
                let broken = state.broken();
                let empty = match taken {
                    Ok(taken) => break (taken, broken, state.has_queued()),
                    Err(empty) => empty,
                };
                if broken.is_some() {
                    drop(state);
                    self.report_broken_rings(port_number, port, broken);
                    // Something may have arrived while the lock was dropped.
                    state = port.state.lock();
                    continue;
                }
                if let Empty::TooLong = empty {
                    drop(state);
                    port.arrived.notify_one();
                    return Err(errno::EMSGSIZE());
                }
                if flags & RECV_NONBLOCK != 0 {
                    return Err(EAGAIN);
                }
                if port.arrived.wait_interruptible(&mut state) {
                    drop(state);
                    port.arrived.notify_one();
                    return Err(EINTR);
                }
            }
        };
        if more {
            port.arrived.notify_one();
        }
        port.room.notify_all();
        if broken.is_some() {
            self.report_broken_rings(port_number, port, broken);
        }
        self.acknowledge(port_number, taken.ack);
        let len = taken.data.len();
        if let Err(e) = deliver(&taken.data) {
            if let Some(reply_to) = taken.reply_to {
                self.fail_caller(reply_to, e);
            }
            return Err(e);
        }
        let descriptor = match taken.reply_to {
            None => 0,
            Some(reply_to) => {
                let inserted = process.descriptors.lock().insert_or_return(reply_to);
                match inserted {
                    Ok(id) => id,
                    Err((e, reply_to)) => {
                        self.fail_caller(reply_to, e);
                        return Err(e);
                    }
                }
            }
        };
        Ok((len, descriptor))
    }

    /// `lite_reply_message`: answers `descriptor` of `process` with `reply`.
    ///
    /// # Errors
    ///
    /// `ENOENT` not an unanswered descriptor of `process`, `EMSGSIZE` the
    /// reply exceeds the caller's room (the descriptor stays valid),
    /// `EHOSTUNREACH`, `EHOSTDOWN`, `EIO` (a reply too long to go inline
    /// that failed).
    pub(crate) fn reply(&self, process: &Process, descriptor: u64, reply: Payload<'_>) -> Result {
        // Replies are never throttled: a caller waits for each.
        let admission = admission::admit(Priority::None);
        let timer = OpTimer::start(OpKind::RpcReply, Priority::None);
        let sent = self.send_reply(process, descriptor, reply);
        timer.finish(admission, reply.len() as u64, sent)
    }

    /// The reply's bytes are copied in before the descriptor is taken: a
    /// reply that cannot be read (`EFAULT`) leaves it valid, as one that
    /// does not fit does.
    fn send_reply(&self, process: &Process, descriptor: u64, reply: Payload<'_>) -> Result {
        if reply.len() as u64 > MAX_MESSAGE_SIZE {
            return Err(errno::EMSGSIZE());
        }
        let reply_to = {
            let descriptors = process.descriptors.lock();
            let reply_to = descriptors.get(descriptor).ok_or(ENOENT)?;
            let room = match reply_to {
                ReplyTo::Local(call) => call.max_reply,
                ReplyTo::Remote { header, .. } => u64::from(header.max_reply),
            };
            if reply.len() as u64 > room {
                // The descriptor stays valid for a reply that fits.
                return Err(errno::EMSGSIZE());
            }
            reply_to.clone()
        };
        // Identifiers are generation-checked: what `take` removes is the
        // entry read above, unless another thread answered it meanwhile.
        let take = || process.descriptors.lock().remove(descriptor).ok_or(ENOENT);
        let (node, header) = match reply_to {
            ReplyTo::Local(call) => {
                let data = reply.to_vec()?;
                take()?;
                call.answer(Ok(data));
                return Ok(());
            }
            ReplyTo::Remote { node, header } => (node, header),
        };
        let imm = Imm::Reply {
            slot: u32::from(header.slot),
            generation: u32::from(header.generation),
        }
        .encode()
        .ok_or(EINVAL)?;
        let remote = (header.reply_addr, header.reply_rkey);
        let peer = match self.core.peer(node) {
            Ok(peer) => peer,
            Err(e) => {
                // Nobody to answer: the descriptor goes.
                let _ = take();
                return Err(e);
            }
        };
        if peer.conn.fits_inline(reply.len()) {
            let mut inline = [0u8; INLINE_MAX];
            // PANIC: `reply.len() <= max_inline() <= INLINE_MAX` (`fits_inline`).
            let inline = &mut inline[..reply.len()];
            reply.copy_to(inline)?;
            take()?;
            return peer.rdma_write_imm_inline(inline, remote, imm, |_| {});
        }
        self.core.staging.with(reply.len().max(1), |staging| {
            reply.copy_to_buffer(staging, 0)?;
            take()?;
            peer.rdma_write_imm(staging, 0, reply.len(), remote, imm)
        })
    }

    /// Releases the RPC state of an exiting process: callers waiting on its
    /// descriptors get `ECONNRESET`, its ports are unregistered.
    pub(crate) fn release_rpc(&self, process: &Process) {
        loop {
            let next = {
                let mut descriptors = process.descriptors.lock();
                descriptors.first_id().and_then(|id| descriptors.remove(id))
            };
            match next {
                Some(reply_to) => self.fail_caller(reply_to, errno::ECONNRESET()),
                None => break,
            }
        }
        for port in 0..MAX_PORTS {
            let owned = self
                .port(port)
                .is_ok_and(|p| p.state.lock().owner == Some(process.tgid));
            if owned {
                let _ = self.unregister_application(process.tgid, port);
            }
        }
    }

    /// A write with immediate of `byte_len` bytes arrived from `node`
    /// (polling thread).
    pub(crate) fn arrived(&self, node: u32, imm: u32, byte_len: u32) {
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

    fn request_arrived(&self, node: u32, port_number: u32, offset: u64, bytes: u64) {
        let Ok(port) = self.port(port_number) else {
            return;
        };
        let (queued, refused, broken) = {
            let mut state = port.state.lock();
            let queued = match state.arrived(node, offset, bytes) {
                Ok(queued) => queued,
                Err(e) => {
                    pr_warn!(
                        "node {} wrote to port {} without a ring: {:?}\n",
                        node,
                        port_number,
                        e
                    );
                    return;
                }
            };
            // A request sent before its sender heard of the unregistration.
            let refused = (queued && state.owner.is_none()).then(|| state.take_from_node(node));
            (queued, refused, state.broken())
        };
        if broken.is_some() {
            self.report_broken_rings(port_number, port, broken);
        }
        match refused {
            // One message: one receiver to wake (see `receive`).
            None if queued => port.arrived.notify_one(),
            Some(Ok(Ok(taken))) => self.dispose(port_number, taken, errno::ECONNREFUSED()),
            _ => {}
        }
    }

    /// Handles RPC notices from `node` (polling thread).
    fn on_notice(&self, node: u32, message: RpcMessage) {
        match message {
            RpcMessage::RingAck { port, consumed } => {
                if let (Ok(server), Ok(port)) = (self.server(node), check_port(port)) {
                    let mut ports = server.ports.lock();
                    if let Some(remote) = view_of(&mut ports, port).remote.as_mut() {
                        remote.writer.acknowledge(consumed);
                    }
                    drop(ports);
                    server.room.notify_all();
                }
            }
            RpcMessage::RpcFailed {
                slot,
                generation,
                status,
            } => {
                let error = status.to_error();
                self.slots
                    .answer(slot as usize, generation, Outcome::Failed(error));
            }
            RpcMessage::PortClosed { port } => {
                if let (Ok(server), Ok(port)) = (self.server(node), check_port(port)) {
                    view_of(&mut server.ports.lock(), port).drop_remote();
                    server.room.notify_all();
                }
            }
            RpcMessage::RingBroken {
                port,
                epoch,
                received,
                injected,
            } => {
                if let (Ok(server), Ok(port)) = (self.server(node), check_port(port)) {
                    {
                        let mut ports = server.ports.lock();
                        let view = view_of(&mut ports, port);
                        // A view of a later epoch is left alone: the report
                        // came late. Otherwise the drop also keeps an
                        // answer to a query under way, which may describe
                        // the broken ring, from being installed.
                        if !matches!(&view.remote, Some(r) if r.epoch != epoch) {
                            view.drop_remote();
                        }
                    }
                    server.room.notify_all();
                    let failed =
                        self.slots
                            .fail_discarded(node, port, epoch, received, errno::EPROTO());
                    if injected {
                        pr_notice!(
                            "node {} discarded this node's faulty requests to port {} as injected: {} callers fail\n",
                            node,
                            port,
                            failed
                        );
                    } else {
                        pr_err!(
                            "node {} discarded this node's requests to port {}: {} callers fail\n",
                            node,
                            port,
                            failed
                        );
                    }
                }
            }
            _ => {}
        }
    }
}

impl Rpc {
    /// Forgets what this node knew of `node`'s ports (waking senders that
    /// wait for room in them, whose next query fails) and what its ports
    /// kept for `node`.
    fn forget_node(&self, node: u32) {
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
    fn on_peer_gone(&self, node: u32) {
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
