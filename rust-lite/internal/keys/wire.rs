// SPDX-License-Identifier: GPL-2.0

//! Control messages of key changes: a node sends its table of replaced
//! keys in parts, each with up to [`PAIRS_PER_PART`] pairs of identity
//! (high 32 bits) and current key (low 32 bits).

use crate::internal::core::wire::control_messages;

/// Pairs one part carries.
pub(crate) const PAIRS_PER_PART: usize = 5;

/// The part starts a table.
pub(crate) const FIRST_PART: u32 = 1;

/// The part ends a table, which is in force once it arrived.
pub(crate) const LAST_PART: u32 = 2;

control_messages! {
    /// A node's table of replaced keys.
    pub(crate) enum KeysMessage in Keys {
        /// Part of the sender's table. The last part of a table that
        /// replaced keys asks for an answer, sent once the table is in
        /// force: the sender then releases the old keys.
        KeyTablePart = Request 1 {
            /// Echoed in the answer (0: no answer).
            request_id: u64 => Slot::RequestId,
            /// First pair.
            pair0: u64 => arg(0),
            /// Second pair.
            pair1: u64 => arg(1),
            /// Third pair.
            pair2: u64 => arg(2),
            /// Fourth pair.
            pair3: u64 => arg(3),
            /// Fifth pair.
            pair4: u64 => arg(4),
            /// Pairs in use, from the first.
            count: u32 => low(5),
            /// [`FIRST_PART`] and [`LAST_PART`].
            flags: u32 => high(5),
        },
    }
}
