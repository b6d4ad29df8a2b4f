// SPDX-License-Identifier: GPL-2.0

//! Control messages of locks, between lockers and the lock's home node.

use crate::internal::core::wire::{control_messages, Status};

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
            /// Remote address of the lock's 8-byte ticket word.
            addr: u64 => arg(1),
            /// Remote key covering it (with atomic access).
            rkey: u32 => arg(2),
        },
        /// The sender's waiter `waiter` drew `ticket` for lock `number` of
        /// the receiver: hand it the lock when its turn comes.
        ReserveLock = Notice 4 {
            /// The lock's number on the receiver.
            number: u32 => arg(0),
            /// The ticket drawn.
            ticket: u64 => arg(1),
            /// Identifies the waiter on the sender.
            waiter: u64 => arg(2),
        },
        /// The holder of `ticket` released lock `number` of the receiver
        /// while later tickets were drawn: the next ticket's turn has come.
        ReleaseLock = Notice 5 {
            /// The lock's number on the receiver.
            number: u32 => arg(0),
            /// The released ticket.
            ticket: u64 => arg(1),
        },
        /// Waiter `waiter` of the receiver now holds lock `number` of `home`
        /// with `ticket`.
        AssignLock = Notice 6 {
            /// The node keeping the lock.
            home: u32 => high(0),
            /// The lock's number there.
            number: u32 => low(0),
            /// The ticket whose turn it is.
            ticket: u64 => arg(1),
            /// The waiter, as named in its reservation.
            waiter: u64 => arg(2),
        },
    }
}
