// SPDX-License-Identifier: GPL-2.0

//! Control messages of the distributed barrier.

use crate::internal::core::wire::{control_messages, Status};

control_messages! {
    /// A node's progress through barrier rounds.
    pub(crate) enum BarrierMessage in Barrier {
        /// The sender has entered barrier round `round`.
        Entered = Notice 1 {
            /// The sender's latest round.
            round: u64 => arg(0),
            /// Whether the receiver should answer with its own round if it
            /// has already reached `round` (answers never ask for an answer).
            reply_wanted: bool => arg(1),
        },
        /// Which round did the receiver last finish? Asked by a node's
        /// first barrier after it joined.
        RoundQuery = Request 2 {
            /// Echoed in the reply.
            request_id: u64 => Slot::RequestId,
        },
        /// Answer to [`BarrierMessage::RoundQuery`].
        RoundReply = Reply 3 {
            /// The request this answers.
            request_id: u64 => Slot::RequestId,
            /// Always OK.
            status: Status => Slot::Status,
            /// The last round whose barrier call returned on the sender.
            finished: u64 => arg(0),
        },
        /// A departure interrupted barrier round `round` on the sender:
        /// the receiver fails it too.
        Interrupted = Notice 4 {
            /// The interrupted round.
            round: u64 => arg(0),
        },
    }
}
