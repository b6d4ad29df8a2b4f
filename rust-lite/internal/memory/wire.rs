// SPDX-License-Identifier: GPL-2.0

//! Control messages of remote memory: chunks allocated for other nodes.

use crate::internal::core::wire::{control_messages, Status};

control_messages! {
    /// A message about chunks one node holds for another.
    pub(crate) enum MemoryMessage in Memory {
        /// Allocate a chunk of `size` bytes for the sender.
        AllocRequest = Request 1 {
            /// Echoed in the reply.
            request_id: u64 => Slot::RequestId,
            /// Bytes to allocate.
            size: u64 => arg(0),
        },
        /// Result of an [`MemoryMessage::AllocRequest`].
        AllocReply = Reply 2 {
            /// The request this answers.
            request_id: u64 => Slot::RequestId,
            /// The outcome.
            status: Status => Slot::Status,
            /// Identifies the chunk in later requests.
            chunk_id: u64 => arg(0),
            /// Remote address of the chunk.
            addr: u64 => arg(1),
            /// Remote key covering the chunk.
            rkey: u32 => arg(2),
        },
        /// Release a chunk allocated for the sender; answered with a status
        /// unless `request_id` is 0.
        FreeRequest = Request 3 {
            /// Echoed in the reply; 0 if no reply is wanted.
            request_id: u64 => Slot::RequestId,
            /// The chunk to release.
            chunk_id: u64 => arg(0),
        },
    }
}
