// SPDX-License-Identifier: GPL-2.0

//! Control messages of the distributed barrier.

use crate::internal::core::wire::control_messages;

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
    }
}
