// SPDX-License-Identifier: GPL-2.0

//! The 8-byte word of a lock, in its home node's memory, which every node
//! reaches with RDMA atomics.
//!
//! The word names the node holding the lock, so that the home can end the
//! hold of a node that died, and says whether the home manages the lock
//! (someone waits, or a thread of the home's own node uses it), so that a
//! holder's release and a taker's compare-and-swap fail and go through the
//! home:
//!
//! ```text
//!  63            48 47            24 23           1     0
//! | holder node + 1 |   hold number   |    (zero)    | managed |
//! ```
//!
//! 0 is free. A word with no holder but a hold number is free too, but its
//! last holder died: the next taker is told so ([`LockWord::ORPHANED`]).
//! The hold number tells one hold of a node apart from a later one, so a
//! stale release is recognised; holds taken without the home (the word was
//! free) have number 0, the home numbers those it hands over from 1. While
//! the lock is managed, only the home changes the word, and the holder it
//! names may be an earlier one: the home keeps the current one.

/// Bits of the hold number.
use crate::internal::node_id::NodeId;

const HOLD_BITS: u32 = 24;
const HOLD_MASK: u64 = (1 << HOLD_BITS) - 1;
const HOLD_SHIFT: u32 = 24;
const HOLDER_SHIFT: u32 = 48;
const MANAGED: u64 = 1;

/// A lock word's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LockWord(pub(crate) u64);

/// Who holds a lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Hold {
    /// The holder's node.
    pub(crate) node: NodeId,
    /// Number of this hold (0: taken without the home).
    pub(crate) number: u32,
}

impl LockWord {
    /// Free, and nobody died holding it.
    pub(crate) const FREE: LockWord = LockWord(0);

    /// Free, and its last holder died holding it.
    pub(crate) const ORPHANED: LockWord = LockWord(1 << HOLD_SHIFT);

    /// Held by `hold`, managed by the home if `managed`.
    pub(crate) fn held(hold: Hold, managed: bool) -> LockWord {
        LockWord(
            ((u64::from(hold.node.get()) + 1) << HOLDER_SHIFT)
                | ((u64::from(hold.number) & HOLD_MASK) << HOLD_SHIFT)
                | if managed { MANAGED } else { 0 },
        )
    }

    /// The same word, managed by the home.
    pub(crate) fn managed(self) -> LockWord {
        LockWord(self.0 | MANAGED)
    }

    /// The hold the word names, if the lock is held.
    pub(crate) fn hold(self) -> Option<Hold> {
        let node = (self.0 >> HOLDER_SHIFT) as u32;
        (node != 0).then(|| Hold {
            node: NodeId::new(node - 1),
            number: ((self.0 >> HOLD_SHIFT) & HOLD_MASK) as u32,
        })
    }

    /// Whether the home manages the lock.
    pub(crate) fn is_managed(self) -> bool {
        self.0 & MANAGED != 0
    }

    /// Whether the lock can be taken (free or orphaned).
    #[cfg(CONFIG_LITE_KUNIT_TEST)]
    pub(crate) fn is_free(self) -> bool {
        self.hold().is_none()
    }
}

/// The number of the hold after `number`, for hand-overs by the home
/// (never 0, which holds taken without the home use).
pub(crate) fn next_hold_number(number: u32) -> u32 {
    let next = (u64::from(number.wrapping_add(1)) & HOLD_MASK) as u32;
    if next == 0 {
        1
    } else {
        next
    }
}
