// SPDX-License-Identifier: GPL-2.0

//! Control messages of the device access probe: a node asks a peer for a
//! queue pair of its own and for targets, tries accesses through it, and
//! asks what became of the targets.

use crate::internal::core::wire::{control_messages, Status};

/// A live buffer of the pool, with its current key.
pub(crate) const TARGET_LIVE: u32 = 0;

/// The address and key of a region released since.
pub(crate) const TARGET_RELEASED: u32 = 1;

/// A live buffer, with the key it had before the target replaced its keys.
pub(crate) const TARGET_REPLACED: u32 = 2;

control_messages! {
    /// The device access probe between a prober and a target node.
    pub(crate) enum ProbeMessage in Probe {
        /// Create a queue pair for the sender's probe, connected to the
        /// sender's endpoint, and targets to try.
        Open = Request 1 {
            /// Echoed in the reply.
            request_id: u64 => Slot::RequestId,
            /// The sender's queue pair number.
            qpn: u32 => low(0),
            /// Its initial packet sequence number.
            psn: u32 => high(0),
            /// First half of its port GID.
            gid_high: u64 => arg(1),
            /// Second half of its port GID.
            gid_low: u64 => arg(2),
            /// Its port LID (InfiniBand).
            lid: u32 => low(3),
            /// Its path MTU in bytes.
            mtu: u32 => high(3),
            /// What to offer: [`TARGET_LIVE`], [`TARGET_RELEASED`] or
            /// [`TARGET_REPLACED`].
            target: u32 => low(4),
        },
        /// Answer to a [`ProbeMessage::Open`].
        Opened = Reply 2 {
            /// The request this answers.
            request_id: u64 => Slot::RequestId,
            /// The outcome.
            status: Status => Slot::Status,
            /// The target's queue pair number.
            qpn: u32 => low(0),
            /// Its initial packet sequence number.
            psn: u32 => high(0),
            /// Address of the target buffer (or of the released region).
            target_addr: u64 => arg(1),
            /// Its key.
            target_rkey: u32 => low(2),
            /// The target's port LID (high 16 bits) and path MTU (low 16).
            lid_mtu: u32 => high(2),
            /// Address of memory outside every region of the target.
            canary_addr: u64 => arg(3),
            /// First half of the target's port GID.
            gid_high: u64 => arg(4),
            /// Second half of its port GID.
            gid_low: u64 => arg(5),
        },
        /// Report on the targets, and close the probe's queue pair.
        Verify = Request 3 {
            /// Echoed in the reply.
            request_id: u64 => Slot::RequestId,
        },
        /// Answer to a [`ProbeMessage::Verify`].
        Verdict = Reply 4 {
            /// The request this answers.
            request_id: u64 => Slot::RequestId,
            /// The outcome.
            status: Status => Slot::Status,
            /// The target buffer holds the probe's pattern.
            target_written: bool => arg(0),
            /// The memory outside every region holds what it held.
            canary_intact: bool => arg(1),
        },
    }
}
