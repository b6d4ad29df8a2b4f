// SPDX-License-Identifier: GPL-2.0

//! The client's side of RPC: calls, one-way messages and multicasts to
//! other nodes' ports (and this node's own), the queries that find a remote
//! port's ring, and the notices servers send back about rings and calls.
//!
//! A request is written into the server's ring with a write with
//! immediate, at a place reserved in this node's view of the ring
//! ([`PortView`]); the reply arrives in a reply slot ([`ReplySlots`](super::client::ReplySlots)).

use crate::internal::node_id::NodeId;
use kernel::prelude::*;

use super::{
    call_in_flight::CallInFlight,
    check_size,
    client::{
        ClaimedSlot, LocalCall, Outcome, Pending, PortView, RemotePort, SentRequest, ServerNode,
    },
    outgoing::Outgoing,
    payload::{Payload, ReplyDestination, ToKernel},
    port::LocalMessage,
    ring_protocol::{
        check_port, check_served_port, Imm, RequestHeader, RingWriter, FLAG_ACK_WANTED,
        FLAG_ONE_WAY, HEADER_LEN, MAX_MESSAGE_SIZE, RING_SIZE,
    },
    view_of,
    wire::RpcMessage,
    Rpc, Target,
};
use crate::{
    errno,
    internal::{
        core::{limits::MAX_NODES, peer::Peer},
        qos::{
            admission,
            op_stats::{OpKind, OpTimer},
        },
    },
    verbs::INLINE_MAX,
};

/// Where a request to another node goes.
#[derive(Clone, Copy)]
struct Route<'a> {
    /// The server node.
    peer: &'a Peer,
    /// What this node knows of the server's ports.
    server: &'a ServerNode,
    /// The server's port and the send's flags.
    target: &'a Target,
}

impl Rpc {
    /// `lite_query_port`: learns where to send requests for `port` of
    /// `node`; returns the port's largest message size.
    ///
    /// # Errors
    ///
    /// `EINVAL` bad port, `EHOSTUNREACH`, `ECONNREFUSED` not registered.
    pub(crate) fn query_port(&self, node: NodeId, port: u32) -> Result<u64> {
        self.learn_port(node, check_port(port)?)
    }

    /// Learns where to send requests for any port `node` serves, as
    /// [`Rpc::query_port`] does for an application's.
    fn learn_port(&self, node: NodeId, port: u32) -> Result<u64> {
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

    /// Sends a request (`max_reply` is `None` for a one-way message) and
    /// returns what to wait on.
    fn start_call(
        &self,
        node: NodeId,
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
        let route = Route {
            peer: &peer,
            server,
            target,
        };
        let sent = self.post_request(&route, message, slot.as_ref());
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
        route: &Route<'_>,
        message: Payload<'_>,
        reply_slot: Option<&ClaimedSlot>,
    ) -> Result {
        let Route { peer, target, .. } = *route;
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
            return self.post_assembled(route, header, outgoing, reply_slot);
        }
        self.core.staging.with(total, |buffer| {
            message.copy_to_buffer(buffer, HEADER_LEN)?;
            let outgoing = Outgoing::Staged { buffer, len: total };
            self.post_assembled(route, header, outgoing, reply_slot)
        })
    }

    /// Reserves ring space for the request in `outgoing` (its message
    /// written after the header's room), writes `header` in and posts it.
    fn post_assembled(
        &self,
        route: &Route<'_>,
        mut header: RequestHeader,
        mut outgoing: Outgoing<'_>,
        reply_slot: Option<&ClaimedSlot>,
    ) -> Result {
        let Route {
            peer,
            server,
            target,
        } = *route;
        let node = peer.node;
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
                self.learn_port(node, target.port)?;
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
        #[cfg(CONFIG_LITE_FAULT_INJECTION)]
        if super::fault_injection::take_bad_header(node) {
            header.len = header.len.wrapping_add(1);
            header.flags |= super::ring_protocol::FLAG_FAULT_INJECTED;
        }
        let imm = Imm::Request {
            port: target.port,
            offset: reservation.offset,
        }
        .encode();
        let prepared = outgoing.write(0, &header.encode());
        let Some(imm) = imm.filter(|_| prepared.is_ok()) else {
            unposted(&mut ports);
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
                    unposted(&mut ports);
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
            Pending::Local(call) => destination.take_local(call.wait()?),
            Pending::Remote(slot) => self
                .slots
                .wait(slot, |buffer, len| destination.take_from_slot(buffer, len)),
            Pending::OneWay => destination.take_local(KVVec::new()),
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
        node: NodeId,
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
        node: NodeId,
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
    pub(crate) fn send_one_way(
        &self,
        node: NodeId,
        target: &Target,
        message: Payload<'_>,
    ) -> Result {
        let admission = admission::admit(target.priority);
        let timer = OpTimer::start(OpKind::RpcSend, target.priority);
        let sent = self.start_call(node, target, message, None).map(|_| ());
        timer.finish(admission, message.len() as u64, sent)
    }

    /// `lite_send_reply_multicast`: calls every node of `nodes` at once and
    /// gathers the replies (or errors) in order.
    pub(crate) fn multicast(
        &self,
        nodes: impl ExactSizeIterator<Item = NodeId>,
        target: &Target,
        message: Payload<'_>,
        max_reply: u64,
    ) -> Result<KVec<Result<KVVec<u8>>>> {
        if nodes.len() == 0 || nodes.len() > MAX_NODES {
            return Err(EINVAL);
        }
        check_size(message.len())?;
        let _admission = admission::admit(target.priority);
        let mut pending = KVec::with_capacity(nodes.len(), GFP_KERNEL)?;
        let mut results = KVec::with_capacity(nodes.len(), GFP_KERNEL)?;
        for node in nodes {
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

    /// Handles RPC notices from `node` (polling thread).
    pub(super) fn on_notice(&self, node: NodeId, message: RpcMessage) {
        match message {
            RpcMessage::RingAck { port, consumed } => {
                if let (Ok(server), Ok(port)) = (self.server(node), check_served_port(port)) {
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
                if let (Ok(server), Ok(port)) = (self.server(node), check_served_port(port)) {
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
                if let (Ok(server), Ok(port)) = (self.server(node), check_served_port(port)) {
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
                            "node {} discarded injected bad requests to port {}: {} calls fail\n",
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
