// SPDX-License-Identifier: GPL-2.0

//! Wire format of control messages between LITE nodes.
//!
//! Control messages travel as two-sided SEND/RECV messages over the RC
//! connection between two nodes, each exactly [`MESSAGE_LEN`] bytes,
//! little-endian:
//!
//! ```text
//! 0       4        8            16      24      32      40          64
//! | kind  | status | request_id | arg0  | arg1  | arg2  | reserved  |
//! ```
//!
//! A request carries a non-zero `request_id` that its reply echoes; a
//! request with `request_id` 0 expects no reply.

/// Size of every control message.
pub(crate) const MESSAGE_LEN: usize = 64;

/// A decoded control message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ControlMessage {
    /// Allocate a chunk of `size` bytes for the sender.
    AllocRequest {
        /// Echoed in the reply.
        request_id: u64,
        /// Bytes to allocate.
        size: u64,
    },
    /// Result of an [`ControlMessage::AllocRequest`].
    AllocReply {
        /// The request this answers.
        request_id: u64,
        /// 0 or a negative errno.
        status: i32,
        /// Identifies the chunk in later requests.
        chunk_id: u64,
        /// Remote address of the chunk.
        addr: u64,
        /// Remote key covering the chunk.
        rkey: u32,
    },
    /// Release a chunk allocated for the sender.
    FreeRequest {
        /// Echoed in the reply; 0 if no reply is wanted.
        request_id: u64,
        /// The chunk to release.
        chunk_id: u64,
    },
    /// Result of a [`ControlMessage::FreeRequest`].
    FreeReply {
        /// The request this answers.
        request_id: u64,
        /// 0 or a negative errno.
        status: i32,
    },
    /// The sender has entered barrier round `round`.
    Barrier {
        /// The sender's latest round.
        round: u64,
        /// Whether the receiver should answer with its own round if it has
        /// already reached `round` (answers never ask for an answer).
        reply_wanted: bool,
    },
}

/// Why a message could not be decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DecodeError {
    /// Unknown `kind`.
    UnknownKind(u32),
}

const KIND_ALLOC_REQUEST: u32 = 1;
const KIND_ALLOC_REPLY: u32 = 2;
const KIND_FREE_REQUEST: u32 = 3;
const KIND_FREE_REPLY: u32 = 4;
const KIND_BARRIER: u32 = 5;

impl ControlMessage {
    /// Encodes the message.
    pub(crate) fn encode(&self) -> [u8; MESSAGE_LEN] {
        let (kind, status, request_id, args) = match *self {
            ControlMessage::AllocRequest { request_id, size } => {
                (KIND_ALLOC_REQUEST, 0, request_id, [size, 0, 0])
            }
            ControlMessage::AllocReply {
                request_id,
                status,
                chunk_id,
                addr,
                rkey,
            } => (
                KIND_ALLOC_REPLY,
                status,
                request_id,
                [chunk_id, addr, u64::from(rkey)],
            ),
            ControlMessage::FreeRequest {
                request_id,
                chunk_id,
            } => (KIND_FREE_REQUEST, 0, request_id, [chunk_id, 0, 0]),
            ControlMessage::FreeReply { request_id, status } => {
                (KIND_FREE_REPLY, status, request_id, [0, 0, 0])
            }
            ControlMessage::Barrier {
                round,
                reply_wanted,
            } => (KIND_BARRIER, 0, 0, [round, u64::from(reply_wanted), 0]),
        };
        let mut out = [0u8; MESSAGE_LEN];
        out[0..4].copy_from_slice(&kind.to_le_bytes());
        out[4..8].copy_from_slice(&status.to_le_bytes());
        out[8..16].copy_from_slice(&request_id.to_le_bytes());
        for (i, arg) in args.iter().enumerate() {
            let at = 16 + 8 * i;
            out[at..at + 8].copy_from_slice(&arg.to_le_bytes());
        }
        out
    }

    /// Decodes a message.
    pub(crate) fn decode(bytes: &[u8; MESSAGE_LEN]) -> Result<Self, DecodeError> {
        let u32_at = |at: usize| u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]);
        let u64_at = |at: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&bytes[at..at + 8]);
            u64::from_le_bytes(b)
        };
        let kind = u32_at(0);
        let status = u32_at(4) as i32;
        let request_id = u64_at(8);
        let (arg0, arg1, arg2) = (u64_at(16), u64_at(24), u64_at(32));
        Ok(match kind {
            KIND_ALLOC_REQUEST => ControlMessage::AllocRequest {
                request_id,
                size: arg0,
            },
            KIND_ALLOC_REPLY => ControlMessage::AllocReply {
                request_id,
                status,
                chunk_id: arg0,
                addr: arg1,
                rkey: arg2 as u32,
            },
            KIND_FREE_REQUEST => ControlMessage::FreeRequest {
                request_id,
                chunk_id: arg0,
            },
            KIND_FREE_REPLY => ControlMessage::FreeReply { request_id, status },
            KIND_BARRIER => ControlMessage::Barrier {
                round: arg0,
                reply_wanted: arg1 != 0,
            },
            other => return Err(DecodeError::UnknownKind(other)),
        })
    }

    /// The request id of a reply, if this is one.
    pub(crate) fn reply_id(&self) -> Option<u64> {
        match *self {
            ControlMessage::AllocReply { request_id, .. }
            | ControlMessage::FreeReply { request_id, .. } => Some(request_id),
            _ => None,
        }
    }
}
