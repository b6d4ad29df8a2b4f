// SPDX-License-Identifier: GPL-2.0

//! Control messages of atomics: a node asks a peer to run an RDMA atomic on
//! the node's own memory.

use crate::internal::core::wire::{control_messages, Status};

control_messages! {
    /// An atomic run by a peer on the sender's memory.
    pub(crate) enum AtomicMessage in Atomics {
        /// Run an RDMA atomic on the sender's own memory at `addr` and report
        /// the old value: how a node runs atomics on its own memory, so they
        /// are executed by its device like every other node's.
        AtomicRequest = Request 1 {
            /// Echoed in the reply.
            request_id: u64 => Slot::RequestId,
            /// Remote address of the 8-byte word on the sender.
            addr: u64 => arg(0),
            /// Compare-and-swap (else fetch-and-add).
            compare_swap: bool => high(1),
            /// The sender's remote key covering it.
            rkey: u32 => low(1),
            /// The expected value, or the addend.
            compare: u64 => arg(2),
            /// The new value of a compare-and-swap.
            swap: u64 => arg(3),
        },
        /// Result of an [`AtomicMessage::AtomicRequest`].
        AtomicReply = Reply 2 {
            /// The request this answers.
            request_id: u64 => Slot::RequestId,
            /// The outcome.
            status: Status => Slot::Status,
            /// The value the word held before.
            old: u64 => arg(0),
        },
    }
}
