// SPDX-License-Identifier: GPL-2.0

//! Control messages of memory operations, executed by the node holding the
//! bytes; each is answered with a status.

use crate::internal::core::wire::control_messages;
use crate::internal::node_id::NodeId;

control_messages! {
    /// A memory operation on chunks the receiver holds.
    pub(crate) enum MemoryOpMessage in MemoryOps {
        /// Set `len` bytes at `offset` of chunk `chunk_id` (held by the
        /// receiver) to `byte`.
        MemsetRequest = Request 1 {
            /// Echoed in the reply.
            request_id: u64 => Slot::RequestId,
            /// The chunk, in the receiver's memory store.
            chunk_id: u64 => arg(0),
            /// First byte to set.
            offset: u64 => arg(1),
            /// Bytes to set.
            len: u64 => arg(2),
            /// The value.
            byte: u8 => arg(3),
        },
        /// Copy `len` bytes at `src_offset` of chunk `src_chunk_id` (held by
        /// the receiver) to the chunk `dst_chunk_id` held by `dst_node`,
        /// whose byte at the destination has remote address `dst_addr`.
        CopyRequest = Request 2 {
            /// Echoed in the reply.
            request_id: u64 => Slot::RequestId,
            /// The source chunk, in the receiver's memory store.
            src_chunk_id: u64 => arg(0),
            /// Offset in the source chunk.
            src_offset: u64 => arg(1),
            /// Bytes to copy.
            len: u64 => arg(2),
            /// The destination chunk in `dst_node`'s memory store.
            dst_chunk_id: u64 => arg(3),
            /// Remote address of the first destination byte.
            dst_addr: u64 => arg(4),
            /// Node holding the destination.
            dst_node: NodeId => high(5),
            /// Remote key covering the destination.
            dst_rkey: u32 => low(5),
        },
    }
}
