// SPDX-License-Identifier: GPL-2.0

//! The server's side of RPC: ports that processes register and receive
//! from, the rings they keep for each client node, and replies.
//!
//! A port's requests arrive in its rings (one per client node) and wait in
//! its queue ([`Port`]) until a receiver takes them; the ring space they
//! used is acknowledged to the client once they are taken, and a receiver's
//! reply goes straight into the caller's reply slot.

use crate::internal::node_id::NodeId;
use kernel::prelude::*;

use super::{
    payload::Payload,
    port::{Empty, Port, ReplyTo, Taken},
    ring_protocol::{check_port, Broken, Imm, MAX_MESSAGE_SIZE, MAX_PORT_NAME, PORTS, RING_SIZE},
    wire::RpcMessage,
    Rpc, RECV_NONBLOCK,
};
use crate::{
    errno,
    internal::{
        core::wire::Status,
        process::Process,
        qos::{
            admission,
            op_stats::{OpKind, OpTimer},
            priority::Priority,
        },
        quota::{
            amounts::{Amounts, Resource},
            Charge,
        },
    },
    verbs::INLINE_MAX,
};

/// A message [`Rpc::receive_on_port`] took.
pub(crate) struct Received {
    /// Its length.
    pub(crate) len: usize,
    /// The descriptor its answer goes to, or 0 for a one-way message.
    pub(crate) descriptor: u64,
    /// The node that sent it.
    pub(crate) from: NodeId,
}

impl Rpc {
    /// `lite_register_application`: opens application port `port` for
    /// messages of at most `max_size` bytes, owned by process `owner`.
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
        self.register_port(process, check_port(port)?, max_size, name)
    }

    /// Opens any port this node serves, as [`Rpc::register_application`]
    /// does an application's.
    pub(crate) fn register_port(
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

    /// `lite_unregister_application`: closes `port`, failing the callers
    /// of requests not yet received and waking blocked receivers.
    ///
    /// # Errors
    ///
    /// `EINVAL` bad port, `ENOENT` not registered, `EPERM` registered by
    /// another process.
    pub(crate) fn unregister_application(&self, owner: i32, port_number: u32) -> Result {
        self.unregister_port(owner, check_port(port_number)?)
    }

    /// Closes any port this node serves, as
    /// [`Rpc::unregister_application`] does an application's.
    pub(crate) fn unregister_port(&self, owner: i32, port_number: u32) -> Result {
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

    fn acknowledge(&self, port: u32, ack: Option<(NodeId, u64)>) {
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
    fn report_broken_rings(
        &self,
        port_number: u32,
        port: &Port,
        mut first: Option<(NodeId, Broken)>,
    ) {
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

    /// Answers a peer's [`RpcMessage::QueryPort`] (polling thread).
    pub(super) fn answer_query_port(
        &self,
        node: NodeId,
        request_id: u64,
        port: u32,
        fresh: bool,
    ) -> RpcMessage {
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
        // Allocate outside the lock; a racing query's ring wins, and the
        // memory not used goes back after the lock is released (`state` is
        // dropped first).
        let mut memory = if needs_ring {
            match self.core.ring_pool.allocate(RING_SIZE as usize) {
                Ok(memory) => Some(memory),
                Err(e) => return fail(e),
            }
        } else {
            None
        };
        let mut state = port_ref.state.lock();
        let max_size = state.max_size;
        match state.ring_for(node, &mut memory) {
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
        let port_number = check_port(port_number)?;
        self.receive_on_port(process, port_number, room, flags, deliver)
            .map(|received| (received.len, received.descriptor))
    }

    /// Takes the next message of any port this node serves, as
    /// [`Rpc::receive`] does of an application's, and says who sent it.
    pub(crate) fn receive_on_port(
        &self,
        process: &Process,
        port_number: u32,
        room: u64,
        flags: u32,
        deliver: impl FnOnce(&[u8]) -> Result,
    ) -> Result<Received> {
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
        Ok(Received {
            len,
            descriptor,
            from: taken.from.unwrap_or(self.core.node_id()),
        })
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

    /// Fails the caller waiting on `descriptor` of `process` with `error`
    /// (a kernel handler that cannot answer).
    ///
    /// # Errors
    ///
    /// `ENOENT` not an unanswered descriptor of `process`.
    pub(crate) fn fail(&self, process: &Process, descriptor: u64, error: Error) -> Result {
        let reply_to = process
            .descriptors
            .lock()
            .remove(descriptor)
            .ok_or(ENOENT)?;
        self.fail_caller(reply_to, error);
        Ok(())
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
        for port in 0..PORTS {
            let owned = self
                .port(port)
                .is_ok_and(|p| p.state.lock().owner == Some(process.tgid));
            if owned {
                let _ = self.unregister_port(process.tgid, port);
            }
        }
    }

    pub(super) fn request_arrived(&self, node: NodeId, port_number: u32, offset: u64, bytes: u64) {
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
}
