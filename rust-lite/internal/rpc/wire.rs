// SPDX-License-Identifier: GPL-2.0

//! Control messages of RPC: setting up and flow-controlling the rings that
//! carry requests, and failing calls.

use crate::internal::core::wire::{control_messages, Status};

control_messages! {
    /// A message between an RPC client node and a server node.
    pub(crate) enum RpcMessage in Rpc {
        /// Where the sender may write requests for `port` of the receiver.
        QueryPort = Request 1 {
            /// Echoed in the reply.
            request_id: u64 => Slot::RequestId,
            /// The receiver's port.
            port: u32 => arg(0),
            /// The sender holds no view of the ring and has nothing in
            /// flight to it: every request it wrote before has arrived ahead
            /// of this message, so the ring may start afresh if it was
            /// broken.
            fresh: bool => arg(1),
        },
        /// Result of a [`RpcMessage::QueryPort`]: the ring the receiver
        /// keeps for the sender's requests to the port.
        QueryPortReply = Reply 2 {
            /// The request this answers.
            request_id: u64 => Slot::RequestId,
            /// The outcome.
            status: Status => Slot::Status,
            /// Remote address of the ring.
            ring_addr: u64 => arg(0),
            /// How many times the ring was started afresh after breaking.
            epoch: u32 => high(1),
            /// Remote key covering the ring.
            ring_rkey: u32 => low(1),
            /// Bytes of the ring.
            ring_size: u64 => arg(2),
            /// Largest message the port takes.
            max_size: u64 => arg(3),
            /// Position up to which the ring has been consumed.
            consumed: u64 => arg(4),
            /// Position after the last request that arrived: where the
            /// sender's next request goes.
            written: u64 => arg(5),
        },
        /// The receiver's ring for `port` of the sender has been consumed up
        /// to position `consumed`.
        RingAck = Notice 3 {
            /// The sender's port.
            port: u32 => arg(0),
            /// Bytes consumed since the ring was created.
            consumed: u64 => arg(1),
        },
        /// The request waiting in reply slot `slot` failed with `status`.
        RpcFailed = Notice 4 {
            /// A negative errno.
            status: Status => Slot::Status,
            /// The slot's generation when the request was sent.
            generation: u32 => high(0),
            /// The receiver's reply slot.
            slot: u32 => low(0),
        },
        /// `port` of the sender was unregistered: query it again before use.
        PortClosed = Notice 5 {
            /// The sender's port.
            port: u32 => arg(0),
        },
        /// The sender found its ring for `port` of the receiver's requests
        /// corrupt in `epoch` and discarded every request from position
        /// `received` on, those still in flight included: their callers
        /// fail, and the receiver queries the port again before its next
        /// request.
        RingBroken = Notice 6 {
            /// The ring's epoch when it broke.
            epoch: u32 => high(0),
            /// The sender's port.
            port: u32 => low(0),
            /// Requests before this position were handed to receivers.
            received: u64 => arg(1),
            /// The ring broke by fault injection, as its sender asked.
            injected: bool => arg(2),
        },
    }
}
