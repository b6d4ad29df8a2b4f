// SPDX-License-Identifier: GPL-2.0

//! Wire format of RPC: immediate values and the request header.
//!
//! A request is one RDMA write with immediate into the server's ring for
//! (port, client node); the 32-bit immediate says which port and where in
//! the ring. A reply is one RDMA write with immediate straight into the
//! caller's reply buffer; its immediate names the caller's reply slot:
//!
//! ```text
//! request: 1 | port (7) | ring offset / RING_ALIGN (24)
//! reply:   0 1 | generation (14) | slot (16)
//! ```
//!
//! Ports below [`MAX_PORTS`] are the applications'; the ones above, up to
//! [`PORTS`], carry the kernel messages of `liteapi_send_message` and its
//! family, one port per kind of handler.

use kernel::prelude::*;

use crate::internal::wire_layout::{self, wire_layout, WireField};

/// Ports per node that applications register (`LITE_MAX_PORTS`).
pub(crate) const MAX_PORTS: u32 = 64;

/// Ports a node serves: the applications' and, from [`MAX_PORTS`] on, one
/// for each kind of kernel message handler.
pub(crate) const PORTS: u32 = MAX_PORTS + KERNEL_MESSAGE_PORTS;

/// Ports of kernel message handlers (`liteapi_reg_*_handler`, and the two
/// of LITE-DSM), numbered from [`MAX_PORTS`].
pub(crate) const KERNEL_MESSAGE_PORTS: u32 = 7;

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
const PORT_MASK: u32 = (1 << 7) - 1;
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
                if port >= PORTS || offset % RING_ALIGN != 0 || units > u64::from(OFFSET_MASK) {
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

    /// Decodes an immediate; `None` for a port no node serves.
    pub(crate) fn decode(imm: u32) -> Option<Self> {
        if imm & REQUEST_BIT != 0 {
            let port = (imm >> PORT_SHIFT) & PORT_MASK;
            return (port < PORTS).then_some(Imm::Request {
                port,
                // PANIC: below `2^24 * RING_ALIGN`, far from `u64::MAX`.
                offset: u64::from(imm & OFFSET_MASK) * RING_ALIGN,
            });
        }
        (imm & REPLY_BIT != 0).then_some(Imm::Reply {
            slot: imm & ((1 << SLOT_BITS) - 1),
            generation: (imm >> SLOT_BITS) & GENERATION_MASK,
        })
    }
}

/// The next generation of a reply slot (generations wrap within 14 bits).
pub(crate) fn next_generation(generation: u32) -> u32 {
    generation.wrapping_add(1) & GENERATION_MASK
}

/// `RequestHeader::flags`: no reply is wanted.
pub(crate) const FLAG_ONE_WAY: u16 = 0x1;
/// `RequestHeader::flags`: the sender is running low on ring space and
/// wants to hear once this message has been consumed (see
/// [`RingReader::consume`]).
pub(crate) const FLAG_ACK_WANTED: u16 = 0x4;
/// `RequestHeader::flags`: the header lies about its length on purpose
/// (fault injection through debugfs), so the ring's breaking is expected.
pub(crate) const FLAG_FAULT_INJECTED: u16 = 0x8;

wire_layout! {
    /// The header in front of every message in a ring: these fields in this
    /// order, little-endian, then zeros up to [`HEADER_LEN`].
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
}

impl RequestHeader {
    /// The header's bytes.
    pub(crate) fn encode(&self) -> [u8; HEADER_LEN] {
        wire_layout::encode(self)
    }

    /// Decodes a header.
    pub(crate) fn decode(bytes: &[u8; HEADER_LEN]) -> Self {
        wire_layout::decode(bytes)
    }

    /// Whether the sender wants a reply.
    pub(crate) fn wants_reply(&self) -> bool {
        self.flags & FLAG_ONE_WAY == 0
    }
}

/// Bytes a message of `len` payload bytes takes in a ring.
pub(crate) fn footprint(len: u64) -> u64 {
    // PANIC: callers pass lengths of at most `MAX_MESSAGE_SIZE`, so the
    // footprint is a small number; `RING_ALIGN` is not 0.
    (HEADER_LEN as u64 + len).div_ceil(RING_ALIGN) * RING_ALIGN
}

/// Where a message of footprint `need` goes when the ring's next free
/// position is `position`: there, or at the start of the next lap if it does
/// not fit before the ring's end. Returns the message's position.
///
/// Writer and reader both place messages with this rule, so the reader
/// knows where each message starts from its ring offset alone and nothing
/// marks the unused end of a lap.
fn place(size: u64, position: u64, need: u64) -> u64 {
    // PANIC: `size > 0`: a writer calls this only once `need <= size`, and
    // every footprint is at least `RING_ALIGN`; a reader's size is a ring's
    // size, not 0. `position % size < size`. Positions stay far below
    // `u64::MAX` (see `RingWriter::reserve` and `RingReader::arrive`), so
    // adding at most `size` does not overflow.
    let tail = size - position % size;
    if need > tail {
        position + tail
    } else {
        position
    }
}

/// A sender's view of a server ring. Positions count bytes since the ring
/// was created and never wrap; the ring offset is the position modulo the
/// ring size.
///
/// # Invariants
///
/// `acked <= head <= acked + size`: the writer never has more than the ring
/// unacknowledged.
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
    /// Position of the message; the server reports what it discarded in
    /// positions, so a caller can tell whether its request was among them.
    pub(crate) position: u64,
    /// Whether the message must carry [`FLAG_ACK_WANTED`]: more than half
    /// the ring is unacknowledged after it.
    pub(crate) ack_wanted: bool,
    /// The writer's head before and after the reservation.
    heads: (u64, u64),
}

/// Largest position a ring may report: far beyond any ring's lifetime, and
/// far enough from `u64::MAX` that no position arithmetic overflows.
const MAX_POSITION: u64 = u64::MAX / 4;

impl RingWriter {
    /// A ring the receiver has consumed up to position `consumed` and
    /// received requests up to position `written`, with nothing of this
    /// writer's in flight; `None` if those positions are inconsistent.
    pub(crate) fn resuming(size: u64, consumed: u64, written: u64) -> Option<Self> {
        // PANIC: the subtraction runs only when `written >= consumed`.
        if written < consumed || written - consumed > size || written > MAX_POSITION {
            return None;
        }
        Some(RingWriter {
            size,
            head: written,
            acked: consumed,
        })
    }

    /// Reserves room for a message of `len` payload bytes, or returns
    /// `None` until the receiver has consumed enough.
    pub(crate) fn reserve(&mut self, len: u64) -> Option<Reservation> {
        let need = footprint(len);
        if need > self.size {
            return None;
        }
        let position = place(self.size, self.head, need);
        // PANIC: `acked <= head <= position` (type invariant, and `place`
        // only moves forward). `head` starts at most at `MAX_POSITION` and
        // grows by the bytes this node reserves in the ring (unused lap ends
        // included), so `position + need` would need some 2^63 bytes of
        // requests to overflow. `size >= need > 0` (checked above).
        if position + need - self.acked > self.size {
            return None;
        }
        let offset = position.checked_rem(self.size)?;
        let head_before = self.head;
        self.head = position + need;
        // PANIC: `acked <= head` (as above).
        Some(Reservation {
            offset,
            position,
            heads: (head_before, self.head),
            // A message and the unused end of a lap before it take at most
            // half the ring, so a writer that finds no room has more than
            // half of it unacknowledged, and so had its last message
            // flagged: the reader's answer to that flag is what wakes it.
            ack_wanted: self.head - self.acked > self.size / 2,
        })
    }

    /// Takes back `reservation`, the last one made, whose message was never
    /// posted: the next message goes where it would have, as the receiver
    /// expects.
    pub(crate) fn cancel(&mut self, reservation: &Reservation) {
        let (before, after) = reservation.heads;
        if self.head == after {
            self.head = before;
        }
    }

    /// Records that the receiver consumed everything before `consumed`.
    pub(crate) fn acknowledge(&mut self, consumed: u64) {
        if consumed > self.acked && consumed <= self.head {
            self.acked = consumed;
        }
    }
}

/// Why a receiver stopped trusting its ring: something a correct sender
/// never writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RingFault {
    /// A request landed somewhere other than where the next one goes.
    Misplaced,
    /// A request is shorter than its header or longer than any message.
    BadLength,
    /// A request's header disagrees with the bytes that arrived.
    BadHeader,
    /// More was written than the ring holds unconsumed.
    Overrun,
    /// A header lied about its length as asked by fault injection.
    Injected,
}

/// What [`RingReader::arrive`] made of a write into the ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Arrival {
    /// A request of `len` payload bytes at ring offset `offset`.
    Request {
        /// Where its header starts.
        offset: u64,
        /// Its payload bytes.
        len: u64,
    },
    /// The ring is broken: the write is discarded until the sender starts
    /// afresh.
    Discarded,
}

/// A receiver's view of its ring: where every request lies, checked as it
/// arrives, so a reader never takes its framing from bytes a sender could
/// have written wrongly.
///
/// # Invariants
///
/// `acked <= consumed <= written <= consumed + size`; `pending` requests
/// lie between `consumed` and `written`, with at most one unused lap end
/// among them (at `wrap_at`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RingReader {
    size: u64,
    consumed: u64,
    written: u64,
    acked: u64,
    /// Requests arrived and not consumed.
    pending: u32,
    /// Position of the unused end of a lap among the pending requests.
    wrap_at: Option<u64>,
    /// A consumed message asked for an acknowledgment not yet sent.
    ack_wanted: bool,
    /// Why the ring was found corrupt in this epoch, if it was: everything
    /// is discarded until the sender starts afresh.
    broken_by: Option<RingFault>,
    epoch: u32,
}

/// What a receiver discarded when its ring broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Broken {
    /// The ring's epoch.
    pub(crate) epoch: u32,
    /// Requests before this position were handed to receivers; every
    /// request from it on is discarded.
    pub(crate) received: u64,
    /// Requests that had arrived and were discarded.
    pub(crate) discarded: u32,
    /// The ring broke by fault injection.
    pub(crate) injected: bool,
}

impl RingReader {
    /// An empty ring of `size` bytes.
    pub(crate) fn new(size: u64) -> Self {
        RingReader {
            size,
            consumed: 0,
            written: 0,
            acked: 0,
            pending: 0,
            wrap_at: None,
            ack_wanted: false,
            broken_by: None,
            epoch: 0,
        }
    }

    /// Records a write of `bytes` bytes (header and payload) with
    /// immediate for ring offset `offset`.
    ///
    /// # Errors
    ///
    /// The write is not where the sender's next request goes, or does not
    /// fit: the caller breaks the ring with [`RingReader::break_ring`].
    pub(crate) fn arrive(&mut self, offset: u64, bytes: u64) -> Result<Arrival, RingFault> {
        if self.broken_by.is_some() {
            return Ok(Arrival::Discarded);
        }
        let len = bytes
            .checked_sub(HEADER_LEN as u64)
            .filter(|&len| len <= MAX_MESSAGE_SIZE)
            .ok_or(RingFault::BadLength)?;
        let need = footprint(len);
        let position = place(self.size, self.written, need);
        // PANIC: `size`, a ring's size, is not 0. `consumed <= written <=
        // position` (type invariant). Positions start at 0 and grow with the
        // bytes written to the ring (unused lap ends included), never more
        // than a ring ahead of `consumed`: `position + need` would need some
        // 2^64 bytes of requests to overflow.
        if position % self.size != offset {
            return Err(RingFault::Misplaced);
        }
        if position + need - self.consumed > self.size {
            return Err(RingFault::Overrun);
        }
        if position != self.written {
            // The overrun check keeps a second lap end from lying among the
            // pending requests: it would take more than a ring's worth.
            self.wrap_at = Some(self.written);
        }
        // PANIC: as above.
        self.written = position + need;
        self.pending = self.pending.saturating_add(1);
        Ok(Arrival::Request { offset, len })
    }

    /// Bytes consumed since the ring was created.
    pub(crate) fn consumed(&self) -> u64 {
        self.consumed
    }

    /// Position after the last request that arrived.
    pub(crate) fn written(&self) -> u64 {
        self.written
    }

    /// How many times the ring started afresh after breaking.
    pub(crate) fn epoch(&self) -> u32 {
        self.epoch
    }

    /// Requests waiting.
    pub(crate) fn pending(&self) -> u32 {
        self.pending
    }

    /// Ring offset of the next request, past the unused end of a lap, or
    /// `None` if none is waiting.
    pub(crate) fn next_offset(&mut self) -> Option<u64> {
        if self.pending == 0 {
            return None;
        }
        // PANIC: `size` is not 0; `consumed % size < size`, and positions
        // stay far below `u64::MAX` (see `arrive`).
        if self.wrap_at == Some(self.consumed) {
            self.consumed += self.size - self.consumed % self.size;
            self.wrap_at = None;
        }
        Some(self.consumed % self.size)
    }

    /// Consumes the next request, whose header says it has `len` payload
    /// bytes and whose sender set [`FLAG_ACK_WANTED`] if `ack_wanted`.
    ///
    /// Returns the position to acknowledge if an acknowledgment is due:
    /// when a quarter of the ring has been consumed since the last one, or
    /// when the ring is empty and a consumed message asked for one. A
    /// sender with plenty of room is not sent one for every message, which
    /// would cost a round trip per call.
    ///
    /// # Errors
    ///
    /// The header's length runs past what arrived (or past the end of the
    /// lap), or the last waiting request does not end where the writes
    /// did: the caller breaks the ring.
    pub(crate) fn consume(&mut self, len: u64, ack_wanted: bool) -> Result<Option<u64>, RingFault> {
        // PANIC: `consumed` stays far below `u64::MAX` (see `arrive`), and a
        // footprint is small.
        let end = self.consumed + footprint(len);
        let limit = match self.wrap_at {
            Some(wrap) if wrap > self.consumed => wrap,
            _ => self.written,
        };
        if self.pending == 0 || end > limit || (self.pending == 1 && end != self.written) {
            return Err(RingFault::BadHeader);
        }
        self.consumed = end;
        // PANIC: `pending > 0` (checked above); `acked <= consumed` (type
        // invariant).
        self.pending -= 1;
        self.ack_wanted |= ack_wanted;
        let due = self.consumed - self.acked >= self.size / 4
            || (self.pending == 0 && self.ack_wanted && self.consumed != self.acked);
        if due {
            self.acked = self.consumed;
            self.ack_wanted = false;
            Ok(Some(self.consumed))
        } else {
            Ok(None)
        }
    }

    /// Stops trusting the ring: every waiting request is discarded, and so
    /// is every write until [`RingReader::start_afresh`].
    pub(crate) fn break_ring(&mut self, fault: RingFault) -> Broken {
        let discarded = if self.broken_by.is_some() {
            0
        } else {
            self.pending
        };
        self.broken_by.get_or_insert(fault);
        self.pending = 0;
        self.wrap_at = None;
        Broken {
            discarded,
            ..self.report()
        }
    }

    /// What the sender is told while the ring is broken.
    fn report(&self) -> Broken {
        Broken {
            epoch: self.epoch,
            received: self.consumed,
            discarded: 0,
            injected: self.broken_by == Some(RingFault::Injected),
        }
    }

    /// What the sender is told while the ring is broken, or `None` while it
    /// is not.
    pub(crate) fn broken(&self) -> Option<Broken> {
        self.broken_by.map(|_| self.report())
    }

    /// Whether the ring is broken.
    #[cfg(CONFIG_LITE_KUNIT_TEST)]
    pub(crate) fn is_broken(&self) -> bool {
        self.broken_by.is_some()
    }

    /// The sender holds no view of the ring and has nothing in flight: a
    /// broken ring starts a new epoch, empty at the consumed position (so
    /// positions never go back and late acknowledgments stay harmless).
    /// Everything consumed counts as acknowledged, since the sender is
    /// told so.
    pub(crate) fn start_afresh(&mut self) {
        if self.broken_by.take().is_some() {
            self.epoch = self.epoch.wrapping_add(1);
            self.written = self.consumed;
            self.pending = 0;
            self.wrap_at = None;
        }
        self.acked = self.consumed;
        self.ack_wanted = false;
    }
}

/// Checks a port number from an application.
pub(crate) fn check_port(port: u32) -> Result<u32> {
    if port < MAX_PORTS {
        Ok(port)
    } else {
        Err(EINVAL)
    }
}

/// Checks a port number from a peer or from LITE itself: an application's
/// port or a kernel message handler's.
pub(crate) fn check_served_port(port: u32) -> Result<u32> {
    if port < PORTS {
        Ok(port)
    } else {
        Err(EINVAL)
    }
}
