// SPDX-License-Identifier: GPL-2.0

//! Control messages of locks, between lockers and the lock's home node.

use crate::internal::core::wire::{control_messages, Status};
use crate::internal::node_id::NodeId;

control_messages! {
    /// A message between a lock's home and the nodes using the lock.
    pub(crate) enum LockMessage in Locks {
        /// Create a lock kept by the receiver.
        CreateLock = Request 1 {
            /// Echoed in the reply.
            request_id: u64 => Slot::RequestId,
        },
        /// Where lock `number` of the receiver lives.
        AskLock = Request 2 {
            /// Echoed in the reply.
            request_id: u64 => Slot::RequestId,
            /// The lock's number on the receiver.
            number: u32 => arg(0),
        },
        /// Result of [`LockMessage::CreateLock`] or [`LockMessage::AskLock`].
        LockReply = Reply 3 {
            /// The request this answers.
            request_id: u64 => Slot::RequestId,
            /// The outcome.
            status: Status => Slot::Status,
            /// The lock's number.
            number: u32 => arg(0),
            /// Remote address of the lock's 8-byte word.
            addr: u64 => arg(1),
            /// Remote key covering it (with atomic access).
            rkey: u32 => arg(2),
        },
        /// The sender's waiter `waiter` asks for lock `number` of the
        /// receiver, which it found taken.
        ReserveLock = Request 4 {
            /// Echoed in the reply.
            request_id: u64 => Slot::RequestId,
            /// The lock's number on the receiver.
            number: u32 => arg(0),
            /// Identifies the waiter on the sender.
            waiter: u64 => arg(1),
        },
        /// Result of [`LockMessage::ReserveLock`]: granted at once, or
        /// queued (then [`LockMessage::AssignLock`] comes in its turn).
        ReserveReply = Reply 7 {
            /// The request this answers.
            request_id: u64 => Slot::RequestId,
            /// The outcome.
            status: Status => Slot::Status,
            /// The lock's number on the sender.
            number: u32 => low(0),
            /// The number of the hold, when granted.
            hold: u32 => high(0),
            /// 1: the waiter holds the lock now; 0: it is queued.
            granted: u32 => low(1),
            /// 1: the last holder died holding the lock.
            owner_died: u32 => high(1),
            /// 1: the home manages the lock during the hold.
            managed: u32 => low(2),
            /// 1: others wait behind the new holder.
            contended: u32 => high(2),
        },
        /// The sender's hold `hold` of lock `number` of the receiver ends
        /// while waiters are queued: the next one's turn has come.
        ReleaseLock = Request 5 {
            /// Echoed in the (status) reply.
            request_id: u64 => Slot::RequestId,
            /// The lock's number on the receiver.
            number: u32 => arg(0),
            /// The number of the hold.
            hold: u32 => arg(1),
            /// 1: the hold was passed on for a waiter that never took it
            /// after its owner died; the next waiter is told.
            owner_died: u32 => arg(2),
        },
        /// Waiter `waiter` of the receiver now holds lock `number` of `home`.
        AssignLock = Notice 6 {
            /// The node keeping the lock.
            home: NodeId => high(0),
            /// The lock's number there.
            number: u32 => low(0),
            /// The number of the hold.
            hold: u32 => high(1),
            /// 1: the last holder died holding the lock.
            owner_died: u32 => low(1),
            /// The waiter, as named in its reservation.
            waiter: u64 => arg(2),
            /// 1: the home manages the lock during the hold.
            managed: u32 => low(3),
            /// 1: others wait behind the new holder.
            contended: u32 => high(3),
        },
    }
}
