// SPDX-License-Identifier: GPL-2.0

//! Wire format of control messages between LITE nodes.
//!
//! Control messages travel as two-sided SEND/RECV messages over the RC
//! connection between two nodes, each exactly [`MESSAGE_LEN`] bytes,
//! little-endian:
//!
//! ```text
//! 0       4        8            16      24      32      40      48      56      64
//! | kind  | status | request_id | arg0  | arg1  | arg2  | arg3  | arg4  | arg5  |
//! ```
//!
//! `kind` names the subsystem that owns the message (its [`Family`]), whether
//! it is a request, a reply or a notice ([`Role`]), and which of the family's
//! messages it is. A request carries a non-zero `request_id` that its reply
//! echoes; a request with `request_id` 0 expects no reply.
//!
//! The core only moves [`Frame`]s: each subsystem declares its messages once
//! with [`control_messages!`], which gives their kinds, encoding and decoding.

use kernel::prelude::*;

use crate::errno;

/// Size of every control message.
pub(crate) const MESSAGE_LEN: usize = 64;

/// Argument words of a frame.
pub(crate) const ARGS: usize = 6;

/// The subsystem a control message belongs to, which decodes and answers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Family {
    /// Replies that carry only a status, answering any family's request.
    Status = 0,
    /// Chunks of remote memory.
    Memory = 1,
    /// Memory operations executed by the node holding the bytes.
    MemoryOps = 2,
    /// Names, mappings and revocations.
    Sharing = 3,
    /// RPC rings and ports.
    Rpc = 4,
    /// Atomics on a node's own memory.
    Atomics = 5,
    /// Locks.
    Locks = 6,
    /// The distributed barrier.
    Barrier = 7,
    /// The device access probe.
    Probe = 8,
    /// Keys of memory regions that changed.
    Keys = 9,
}

impl Family {
    /// Number of families; family values are below it.
    pub(crate) const COUNT: usize = 10;

    /// Every family, by value.
    pub(crate) const ALL: [Family; Family::COUNT] = [
        Family::Status,
        Family::Memory,
        Family::MemoryOps,
        Family::Sharing,
        Family::Rpc,
        Family::Atomics,
        Family::Locks,
        Family::Barrier,
        Family::Probe,
        Family::Keys,
    ];

    /// The family with value `value`.
    fn from_u8(value: u8) -> Option<Family> {
        Family::ALL.get(usize::from(value)).copied()
    }
}

/// What a control message is to the conversation it belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Role {
    /// Asks the receiver to do something; answered if its id is not 0.
    Request = 0,
    /// Answers the request whose id it carries.
    Reply = 1,
    /// Tells the receiver something; never answered.
    Notice = 2,
}

impl Role {
    fn from_u8(value: u8) -> Option<Role> {
        match value {
            0 => Some(Role::Request),
            1 => Some(Role::Reply),
            2 => Some(Role::Notice),
            _ => None,
        }
    }
}

/// The `kind` word of a frame: role, family and index within the family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Kind(u32);

impl Kind {
    /// The kind of message `index` of `family`.
    pub(crate) const fn new(family: Family, role: Role, index: u8) -> Kind {
        Kind(((role as u32) << 16) | ((family as u32) << 8) | index as u32)
    }

    /// The family, if the kind names a known one.
    pub(crate) fn family(self) -> Option<Family> {
        Family::from_u8((self.0 >> 8) as u8)
    }

    /// The role, if the kind names a known one.
    pub(crate) fn role(self) -> Option<Role> {
        Role::from_u8((self.0 >> 16) as u8)
    }
}

/// The outcome a reply reports: 0 or a negative errno.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Status(i32);

impl Status {
    /// Success.
    pub(crate) const OK: Status = Status(0);

    /// The status reporting `result`.
    pub(crate) fn of<T>(result: &Result<T>) -> Status {
        match result {
            Ok(_) => Status::OK,
            Err(e) => Status::from(*e),
        }
    }

    /// The result the status reports; a status that is neither 0 nor an
    /// errno is a protocol error.
    pub(crate) fn to_result(self) -> Result {
        match self.0 {
            0 => Ok(()),
            errno if (-MAX_ERRNO..0).contains(&errno) => Err(Error::from_errno(errno)),
            _ => Err(errno::EPROTO()),
        }
    }

    /// The error of a reply that is not the one its request expects: the
    /// errno it reports, or `EPROTO` if it reports none.
    pub(crate) fn to_error(self) -> Error {
        self.to_result().err().unwrap_or_else(errno::EPROTO)
    }
}

/// Largest errno value (`MAX_ERRNO`).
const MAX_ERRNO: i32 = 4095;

impl From<Error> for Status {
    fn from(e: Error) -> Status {
        Status(e.to_errno())
    }
}

/// Where a field travels in a [`Frame`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Slot {
    /// The status word of a reply.
    Status,
    /// The request id.
    RequestId,
    /// A whole argument word.
    Arg(usize),
    /// The high 32 bits of an argument word.
    High(usize),
    /// The low 32 bits of an argument word.
    Low(usize),
}

/// Argument word `index`; declaring an index beyond [`ARGS`] fails to
/// compile, as slots are evaluated in constant context.
pub(crate) const fn arg(index: usize) -> Slot {
    // PANIC: only evaluated in constant context (`control_messages!`), where
    // a failing assertion is a compile error.
    assert!(index < ARGS);
    Slot::Arg(index)
}

/// The high half of argument word `index`.
pub(crate) const fn high(index: usize) -> Slot {
    // PANIC: only evaluated in constant context (`control_messages!`), where
    // a failing assertion is a compile error.
    assert!(index < ARGS);
    Slot::High(index)
}

/// The low half of argument word `index`.
pub(crate) const fn low(index: usize) -> Slot {
    // PANIC: only evaluated in constant context (`control_messages!`), where
    // a failing assertion is a compile error.
    assert!(index < ARGS);
    Slot::Low(index)
}

/// A value that travels in a slot of a frame.
pub(crate) trait WireValue: Sized {
    /// The value as a word (truncated to its slot's width when stored).
    fn to_wire(self) -> u64;
    /// The value from a word.
    fn from_wire(word: u64) -> Self;
}

impl WireValue for u64 {
    fn to_wire(self) -> u64 {
        self
    }
    fn from_wire(word: u64) -> Self {
        word
    }
}

impl WireValue for u32 {
    fn to_wire(self) -> u64 {
        u64::from(self)
    }
    fn from_wire(word: u64) -> Self {
        word as u32
    }
}

impl WireValue for u8 {
    fn to_wire(self) -> u64 {
        u64::from(self)
    }
    fn from_wire(word: u64) -> Self {
        word as u8
    }
}

impl WireValue for bool {
    fn to_wire(self) -> u64 {
        u64::from(self)
    }
    fn from_wire(word: u64) -> Self {
        word != 0
    }
}

impl WireValue for Status {
    fn to_wire(self) -> u64 {
        u64::from(self.0 as u32)
    }
    fn from_wire(word: u64) -> Self {
        Status(word as u32 as i32)
    }
}

/// One control message as it travels: header and argument words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Frame {
    kind: Kind,
    status: u32,
    request_id: u64,
    args: [u64; ARGS],
}

impl Frame {
    /// A frame of `kind` with every other word 0.
    pub(crate) const fn new(kind: Kind) -> Frame {
        Frame {
            kind,
            status: 0,
            request_id: 0,
            args: [0; ARGS],
        }
    }

    /// A reply to request `request_id` that reports only `status`.
    pub(crate) fn status_reply(request_id: u64, status: Status) -> Frame {
        let mut frame = Frame::new(STATUS_REPLY);
        frame.put(Slot::RequestId, request_id);
        frame.put(Slot::Status, status);
        frame
    }

    /// The kind.
    pub(crate) fn kind(&self) -> Kind {
        self.kind
    }

    /// The request id: of the request itself, or of the request a reply answers.
    pub(crate) fn request_id(&self) -> u64 {
        self.request_id
    }

    /// The status word, meaningful in replies.
    pub(crate) fn status(&self) -> Status {
        Status::from_wire(u64::from(self.status))
    }

    /// Whether this is a request that wants a reply.
    pub(crate) fn wants_reply(&self) -> bool {
        self.kind.role() == Some(Role::Request) && self.request_id != 0
    }

    /// Stores `value` in `slot`.
    pub(crate) fn put<T: WireValue>(&mut self, slot: Slot, value: T) {
        let word = value.to_wire();
        match slot {
            Slot::Status => self.status = word as u32,
            Slot::RequestId => self.request_id = word,
            Slot::Arg(i) => {
                if let Some(arg) = self.args.get_mut(i) {
                    *arg = word;
                }
            }
            Slot::High(i) => {
                if let Some(arg) = self.args.get_mut(i) {
                    *arg = (*arg & 0xffff_ffff) | (word << 32);
                }
            }
            Slot::Low(i) => {
                if let Some(arg) = self.args.get_mut(i) {
                    *arg = (*arg & !0xffff_ffff) | (word & 0xffff_ffff);
                }
            }
        }
    }

    /// The value in `slot`.
    pub(crate) fn take<T: WireValue>(&self, slot: Slot) -> T {
        let word = match slot {
            Slot::Status => u64::from(self.status),
            Slot::RequestId => self.request_id,
            Slot::Arg(i) => self.args.get(i).copied().unwrap_or(0),
            Slot::High(i) => self.args.get(i).map_or(0, |a| a >> 32),
            Slot::Low(i) => self.args.get(i).map_or(0, |a| a & 0xffff_ffff),
        };
        T::from_wire(word)
    }

    /// The frame as bytes.
    pub(crate) fn encode(&self) -> [u8; MESSAGE_LEN] {
        let mut out = [0u8; MESSAGE_LEN];
        let words = Iterator::chain(core::iter::once(self.request_id), self.args.iter().copied());
        // PANIC: `out` is `MESSAGE_LEN` (64) bytes, so it splits at 8, and
        // `header` is 8 bytes: both 4-byte ranges are in it.
        let (header, rest) = out.split_at_mut(8);
        header[..4].copy_from_slice(&self.kind.0.to_le_bytes());
        header[4..].copy_from_slice(&self.status.to_le_bytes());
        // A plain loop rather than `zip`, whose length computation divides
        // by the chunk size.
        let mut chunks = rest.chunks_exact_mut(8);
        for word in words {
            let Some(chunk) = chunks.next() else { break };
            chunk.copy_from_slice(&word.to_le_bytes());
        }
        out
    }

    /// The frame in `bytes`.
    pub(crate) fn decode(bytes: &[u8; MESSAGE_LEN]) -> Frame {
        // PANIC: `bytes` is `MESSAGE_LEN` (64) bytes, so it splits at 8.
        let (header, rest) = bytes.split_at(8);
        let u32_at = |at: usize| {
            let mut b = [0u8; 4];
            // PANIC: called below with `at` 0 and 4 only, and `header` is
            // 8 bytes, so both 4-byte ranges are in it.
            b.copy_from_slice(&header[at..at + 4]);
            u32::from_le_bytes(b)
        };
        let mut words = [0u64; 1 + ARGS];
        let mut chunks = rest.chunks_exact(8);
        for word in words.iter_mut() {
            let Some(chunk) = chunks.next() else { break };
            let mut b = [0u8; 8];
            b.copy_from_slice(chunk);
            *word = u64::from_le_bytes(b);
        }
        let [request_id, args @ ..] = words;
        Frame {
            kind: Kind(u32_at(0)),
            status: u32_at(4),
            request_id,
            args,
        }
    }
}

/// Kind of the reply that carries only a status.
pub(crate) const STATUS_REPLY: Kind = Kind::new(Family::Status, Role::Reply, 1);

/// Declares the control messages of one family: an enum with one variant
/// per message, each with its role, its index in the family and the slot
/// of every field; `to_frame` and `from_frame` come from this declaration
/// alone.
macro_rules! control_messages {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident in $family:ident {
            $(
                $(#[$vmeta:meta])*
                $variant:ident = $role:ident $index:literal {
                    $( $(#[$fmeta:meta])* $field:ident : $ty:ty => $slot:expr ),* $(,)?
                }
            ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        $vis enum $name {
            $(
                $(#[$vmeta])*
                $variant { $( $(#[$fmeta])* $field: $ty, )* },
            )+
        }

        impl $name {
            /// The family these messages belong to.
            #[allow(dead_code)]
            $vis const FAMILY: $crate::internal::core::wire::Family =
                $crate::internal::core::wire::Family::$family;

            /// The message as a frame.
            $vis fn to_frame(self) -> $crate::internal::core::wire::Frame {
                #[allow(unused_imports)]
                use $crate::internal::core::wire::{arg, high, low, Slot};
                use $crate::internal::core::wire::{Family, Frame, Kind, Role};
                match self {
                    $(
                        $name::$variant { $( $field ),* } => {
                            #[allow(unused_mut)]
                            let mut frame =
                                Frame::new(Kind::new(Family::$family, Role::$role, $index));
                            $( {
                                const SLOT: Slot = $slot;
                                frame.put(SLOT, $field);
                            } )*
                            frame
                        }
                    )+
                }
            }

            /// The message in `frame`, if it is one of this family's.
            $vis fn from_frame(frame: &$crate::internal::core::wire::Frame) -> Option<Self> {
                #[allow(unused_imports)]
                use $crate::internal::core::wire::{arg, high, low, Slot};
                use $crate::internal::core::wire::{Family, Kind, Role};
                $(
                    if frame.kind() == Kind::new(Family::$family, Role::$role, $index) {
                        return Some($name::$variant {
                            $( $field: {
                                const SLOT: Slot = $slot;
                                frame.take(SLOT)
                            }, )*
                        });
                    }
                )+
                None
            }
        }
    };
}
pub(crate) use control_messages;
