// SPDX-License-Identifier: GPL-2.0

//! Wire format of RPC: immediate values and the request header.
//!
//! A request is one RDMA write with immediate into the server's ring for
//! (port, client node); the 32-bit immediate says which port and where in
//! the ring. A reply is one RDMA write with immediate straight into the
//! caller's reply buffer; its immediate names the caller's reply slot:
//!
//! ```text
//! request: 1 0 | port (6) | ring offset / RING_ALIGN (24)
//! reply:   0 1 | generation (14) | slot (16)
//! ```

use kernel::prelude::*;

/// Ports per node (`LITE_MAX_PORTS`).
pub(crate) const MAX_PORTS: u32 = 64;

/// Largest message (`LITE_MAX_MESSAGE_SIZE`).
pub(crate) const MAX_MESSAGE_SIZE: u64 = 256 << 10;

/// Longest port name (`LITE_MAX_PORT_NAME`).
pub(crate) const MAX_PORT_NAME: usize = 32;

/// Bytes of the ring a server keeps for each (port, client node): room for
/// four messages of the largest size.
pub(crate) const RING_SIZE: u64 = 4 * (MAX_MESSAGE_SIZE + RING_ALIGN);

/// Every message starts at a multiple of this in its ring.
pub(crate) const RING_ALIGN: u64 = 64;

/// Bytes of [`RequestHeader`] in front of every message.
pub(crate) const HEADER_LEN: usize = 32;

const REQUEST_BIT: u32 = 1 << 31;
const REPLY_BIT: u32 = 1 << 30;
const PORT_SHIFT: u32 = 24;
const OFFSET_MASK: u32 = (1 << PORT_SHIFT) - 1;
const SLOT_BITS: u32 = 16;
const GENERATION_MASK: u32 = (1 << 14) - 1;

/// What a received write with immediate carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Imm {
    /// A request landed in the ring of `port` at byte `offset`.
    Request {
        /// The server port.
        port: u32,
        /// Where the request starts in the ring.
        offset: u64,
    },
    /// A reply landed in reply slot `slot`.
    Reply {
        /// The caller's reply slot.
        slot: u32,
        /// The slot's generation when the request was sent.
        generation: u32,
    },
}

impl Imm {
    /// The 32-bit immediate, or `None` if a field is out of range.
    pub(crate) fn encode(self) -> Option<u32> {
        match self {
            Imm::Request { port, offset } => {
                let units = offset / RING_ALIGN;
                if port >= MAX_PORTS || offset % RING_ALIGN != 0 || units > u64::from(OFFSET_MASK) {
                    return None;
                }
                Some(REQUEST_BIT | (port << PORT_SHIFT) | units as u32)
            }
            Imm::Reply { slot, generation } => {
                if slot >= 1 << SLOT_BITS || generation > GENERATION_MASK {
                    return None;
                }
                Some(REPLY_BIT | (generation << SLOT_BITS) | slot)
            }
        }
    }

    /// Decodes an immediate.
    pub(crate) fn decode(imm: u32) -> Option<Self> {
        match imm & (REQUEST_BIT | REPLY_BIT) {
            REQUEST_BIT => Some(Imm::Request {
                port: (imm >> PORT_SHIFT) & (MAX_PORTS - 1),
                offset: u64::from(imm & OFFSET_MASK) * RING_ALIGN,
            }),
            REPLY_BIT => Some(Imm::Reply {
                slot: imm & ((1 << SLOT_BITS) - 1),
                generation: (imm >> SLOT_BITS) & GENERATION_MASK,
            }),
            _ => None,
        }
    }
}

/// The next generation of a reply slot (generations wrap within 14 bits).
pub(crate) fn next_generation(generation: u32) -> u32 {
    (generation + 1) & GENERATION_MASK
}

/// `RequestHeader::flags`: no reply is wanted.
pub(crate) const FLAG_ONE_WAY: u16 = 0x1;
/// `RequestHeader::flags`: not a message; the sender wrapped to the ring's
/// start and the rest of the ring is unused.
pub(crate) const FLAG_PAD: u16 = 0x2;
/// `RequestHeader::flags`: the sender is running low on ring space and
/// wants to hear once this message has been consumed (see
/// [`RingReader::consume`]).
pub(crate) const FLAG_ACK_WANTED: u16 = 0x4;

/// The header in front of every message in a ring, little-endian:
///
/// ```text
/// 0     4       6      8          12         16          24     26     28    32
/// | len | flags | port | max_reply | reply_rkey | reply_addr | slot | gen | pad |
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct RequestHeader {
    /// Payload bytes after the header.
    pub(crate) len: u32,
    /// `FLAG_*`.
    pub(crate) flags: u16,
    /// The server port.
    pub(crate) port: u16,
    /// Room in the caller's reply buffer.
    pub(crate) max_reply: u32,
    /// Remote key of the caller's reply buffer.
    pub(crate) reply_rkey: u32,
    /// Address of the caller's reply buffer.
    pub(crate) reply_addr: u64,
    /// The caller's reply slot.
    pub(crate) slot: u16,
    /// The slot's generation.
    pub(crate) generation: u16,
}

impl RequestHeader {
    /// The header's bytes.
    pub(crate) fn encode(&self) -> [u8; HEADER_LEN] {
        let mut out = [0u8; HEADER_LEN];
        out[0..4].copy_from_slice(&self.len.to_le_bytes());
        out[4..6].copy_from_slice(&self.flags.to_le_bytes());
        out[6..8].copy_from_slice(&self.port.to_le_bytes());
        out[8..12].copy_from_slice(&self.max_reply.to_le_bytes());
        out[12..16].copy_from_slice(&self.reply_rkey.to_le_bytes());
        out[16..24].copy_from_slice(&self.reply_addr.to_le_bytes());
        out[24..26].copy_from_slice(&self.slot.to_le_bytes());
        out[26..28].copy_from_slice(&self.generation.to_le_bytes());
        out
    }

    /// Decodes a header.
    pub(crate) fn decode(bytes: &[u8; HEADER_LEN]) -> Self {
        let u16_at = |at: usize| u16::from_le_bytes([bytes[at], bytes[at + 1]]);
        let u32_at = |at: usize| {
            u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
        };
        let mut addr = [0u8; 8];
        addr.copy_from_slice(&bytes[16..24]);
        RequestHeader {
            len: u32_at(0),
            flags: u16_at(4),
            port: u16_at(6),
            max_reply: u32_at(8),
            reply_rkey: u32_at(12),
            reply_addr: u64::from_le_bytes(addr),
            slot: u16_at(24),
            generation: u16_at(26),
        }
    }

    /// Whether the sender wants a reply.
    pub(crate) fn wants_reply(&self) -> bool {
        self.flags & FLAG_ONE_WAY == 0
    }
}

/// Bytes a message of `len` payload bytes takes in a ring.
pub(crate) fn footprint(len: u64) -> u64 {
    (HEADER_LEN as u64 + len).div_ceil(RING_ALIGN) * RING_ALIGN
}

/// A sender's view of a server ring. Positions count bytes since the ring
/// was created and never wrap; the ring offset is the position modulo the
/// ring size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RingWriter {
    size: u64,
    head: u64,
    acked: u64,
}

/// Where [`RingWriter::reserve`] placed a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Reservation {
    /// Ring offset of the message.
    pub(crate) offset: u64,
    /// Ring offset of a pad header to write first, if the message wrapped.
    pub(crate) pad_at: Option<u64>,
    /// Whether the message must carry [`FLAG_ACK_WANTED`]: more than half
    /// the ring is unacknowledged after it.
    pub(crate) ack_wanted: bool,
}

impl RingWriter {
    /// A ring the receiver has consumed up to position `consumed`, with
    /// nothing of this writer's in flight.
    pub(crate) fn starting_at(size: u64, consumed: u64) -> Self {
        RingWriter {
            size,
            head: consumed,
            acked: consumed,
        }
    }

    /// Reserves room for a message of `len` payload bytes, or returns
    /// `None` until the receiver has consumed enough.
    pub(crate) fn reserve(&mut self, len: u64) -> Option<Reservation> {
        let need = footprint(len);
        if need > self.size {
            return None;
        }
        let offset = self.head % self.size;
        let tail = self.size - offset;
        let (pad, at) = if need > tail { (tail, 0) } else { (0, offset) };
        if self.head + pad + need - self.acked > self.size {
            return None;
        }
        self.head += pad + need;
        Some(Reservation {
            offset: at,
            pad_at: (pad > 0).then_some(offset),
            // A message and its pad take at most half the ring, so a writer
            // that finds no room has more than half of it unacknowledged,
            // and so had its last message flagged: the reader's answer to
            // that flag is what wakes it.
            ack_wanted: self.head - self.acked > self.size / 2,
        })
    }

    /// Records that the receiver consumed everything before `consumed`.
    pub(crate) fn acknowledge(&mut self, consumed: u64) {
        if consumed > self.acked && consumed <= self.head {
            self.acked = consumed;
        }
    }
}

/// A receiver's view of its ring: messages are consumed in arrival order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RingReader {
    size: u64,
    consumed: u64,
    acked: u64,
    /// Messages arrived and not consumed.
    pending: u32,
    /// A consumed message asked for an acknowledgement not yet sent.
    ack_wanted: bool,
}

impl RingReader {
    /// An empty ring of `size` bytes.
    pub(crate) fn new(size: u64) -> Self {
        RingReader {
            size,
            consumed: 0,
            acked: 0,
            pending: 0,
            ack_wanted: false,
        }
    }

    /// Records the arrival of one message.
    pub(crate) fn arrived(&mut self) {
        self.pending = self.pending.saturating_add(1);
    }

    /// Bytes consumed since the ring was created.
    pub(crate) fn consumed(&self) -> u64 {
        self.consumed
    }

    /// Messages waiting.
    pub(crate) fn pending(&self) -> u32 {
        self.pending
    }

    /// Ring offset where the next message (or pad) starts.
    pub(crate) fn next_offset(&self) -> u64 {
        self.consumed % self.size
    }

    /// Skips the pad at the current offset: the next message is at the
    /// ring's start.
    pub(crate) fn skip_pad(&mut self) {
        self.consumed += self.size - self.next_offset();
    }

    /// Consumes the next message, of `len` payload bytes, whose sender set
    /// [`FLAG_ACK_WANTED`] if `ack_wanted`.
    ///
    /// Returns the position to acknowledge if an acknowledgement is due:
    /// when a quarter of the ring has been consumed since the last one, or
    /// when the ring is empty and a consumed message asked for one. A
    /// sender with plenty of room is not sent one for every message, which
    /// would cost a round trip per call.
    pub(crate) fn consume(&mut self, len: u64, ack_wanted: bool) -> Option<u64> {
        self.consumed += footprint(len);
        self.pending = self.pending.saturating_sub(1);
        self.ack_wanted |= ack_wanted;
        let due = self.consumed - self.acked >= self.size / 4
            || (self.pending == 0 && self.ack_wanted && self.consumed != self.acked);
        if due {
            self.acked = self.consumed;
            self.ack_wanted = false;
            Some(self.consumed)
        } else {
            None
        }
    }
}

/// Checks a port number from a caller.
pub(crate) fn check_port(port: u32) -> Result<u32> {
    if port < MAX_PORTS {
        Ok(port)
    } else {
        Err(EINVAL)
    }
}
