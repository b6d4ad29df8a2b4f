// SPDX-License-Identifier: GPL-2.0

//! Control messages of sharing: mapping a published LMR and revoking
//! mappings.

use crate::internal::core::wire::{control_messages, Status};

control_messages! {
    /// A message between an LMR's owner and a node mapping it.
    pub(crate) enum SharingMessage in Sharing {
        /// Map the LMR published under `name` on the receiver.
        AskRequest = Request 1 {
            /// Echoed in the reply.
            request_id: u64 => Slot::RequestId,
            /// The published name.
            name: u64 => arg(0),
            /// Permissions wanted.
            permission: u64 => arg(1),
            /// The password the name was published with.
            password: u64 => arg(2),
        },
        /// Result of an [`SharingMessage::AskRequest`]: what the asker needs
        /// to map the LMR; its chunk table is read with RDMA from
        /// `table_addr`.
        AskReply = Reply 2 {
            /// The request this answers.
            request_id: u64 => Slot::RequestId,
            /// The outcome.
            status: Status => Slot::Status,
            /// The LMR's id on its owner, named again in revocations.
            lmr_id: u64 => arg(0),
            /// Size of the LMR in bytes.
            size: u64 => arg(1),
            /// Remote address of the chunk table.
            table_addr: u64 => arg(2),
            /// Permissions granted.
            granted: u32 => high(3),
            /// Remote key covering the chunk table.
            table_rkey: u32 => low(3),
            /// Bytes per chunk.
            chunk_size: u64 => arg(4),
            /// Offset of the LMR's first byte in its first chunk.
            lead: u64 => arg(5),
        },
        /// The sender's LMR `lmr_id` is going away: close every mapping of
        /// it; answered with a status.
        RevokeRequest = Request 3 {
            /// Echoed in the reply.
            request_id: u64 => Slot::RequestId,
            /// The LMR's id on the sender.
            lmr_id: u64 => arg(0),
        },
        /// The sender leaves the cluster: move every chunk it holds for the
        /// receiver's LMRs to other nodes; answered with a status once done.
        EvacuateRequest = Request 4 {
            /// Echoed in the reply.
            request_id: u64 => Slot::RequestId,
        },
        /// The sender is about to move chunks of its LMR `lmr_id`: pause
        /// every mapping of it (waiting for their operations) until
        /// [`SharingMessage::ResumeMappings`]; answered with a status.
        HoldMappings = Request 5 {
            /// Echoed in the reply.
            request_id: u64 => Slot::RequestId,
            /// The LMR's id on the sender.
            lmr_id: u64 => arg(0),
        },
        /// The chunks of the sender's LMR `lmr_id` moved: read their places
        /// from the chunk table at `table_addr` and resume the mappings
        /// paused by [`SharingMessage::HoldMappings`]; answered with a
        /// status.
        ResumeMappings = Request 6 {
            /// Echoed in the reply.
            request_id: u64 => Slot::RequestId,
            /// The LMR's id on the sender.
            lmr_id: u64 => arg(0),
            /// Remote address of the chunk table.
            table_addr: u64 => arg(1),
            /// Remote key covering it.
            table_rkey: u32 => low(2),
        },
    }
}
