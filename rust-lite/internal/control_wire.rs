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
    /// Result of a request that only reports success or failure
    /// ([`ControlMessage::FreeRequest`], [`ControlMessage::MemsetRequest`],
    /// [`ControlMessage::CopyRequest`], [`ControlMessage::RevokeRequest`]).
    StatusReply {
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
    /// Set `len` bytes at `offset` of chunk `chunk_id` (held by the
    /// receiver) to `byte`.
    MemsetRequest {
        /// Echoed in the reply.
        request_id: u64,
        /// The chunk, in the receiver's memory store.
        chunk_id: u64,
        /// First byte to set.
        offset: u64,
        /// Bytes to set.
        len: u64,
        /// The value.
        byte: u8,
    },
    /// Copy `len` bytes at `src_offset` of chunk `src_chunk_id` (held by the
    /// receiver) to the chunk `dst_chunk_id` held by `dst_node`, whose byte
    /// at the destination has remote address `dst_addr`.
    CopyRequest {
        /// Echoed in the reply.
        request_id: u64,
        /// The source chunk, in the receiver's memory store.
        src_chunk_id: u64,
        /// Offset in the source chunk.
        src_offset: u64,
        /// Bytes to copy.
        len: u64,
        /// Node holding the destination.
        dst_node: u32,
        /// The destination chunk in `dst_node`'s memory store.
        dst_chunk_id: u64,
        /// Remote address of the first destination byte.
        dst_addr: u64,
        /// Remote key covering the destination.
        dst_rkey: u32,
    },
    /// Map the LMR published under `name` on the receiver.
    AskRequest {
        /// Echoed in the reply.
        request_id: u64,
        /// The published name.
        name: u64,
        /// Permissions wanted.
        permission: u64,
        /// The password the name was published with.
        password: u64,
    },
    /// Result of an [`ControlMessage::AskRequest`]: what the asker needs to
    /// map the LMR; its chunk table is read with RDMA from `table_addr`.
    AskReply {
        /// The request this answers.
        request_id: u64,
        /// 0 or a negative errno.
        status: i32,
        /// The LMR's id on its owner, named again in revocations.
        lmr_id: u64,
        /// Size of the LMR in bytes.
        size: u64,
        /// Permissions granted.
        granted: u32,
        /// Remote address of the chunk table.
        table_addr: u64,
        /// Remote key covering the chunk table.
        table_rkey: u32,
        /// Bytes per chunk.
        chunk_size: u64,
        /// Offset of the LMR's first byte in its first chunk.
        lead: u64,
    },
    /// The sender's LMR `lmr_id` is going away: close every mapping of it.
    RevokeRequest {
        /// Echoed in the reply.
        request_id: u64,
        /// The LMR's id on the sender.
        lmr_id: u64,
    },
    /// Where the sender may write requests for `port` of the receiver.
    QueryPort {
        /// Echoed in the reply.
        request_id: u64,
        /// The receiver's port.
        port: u32,
        /// The sender holds no view of the ring and has nothing in flight
        /// to it: every request it wrote before has arrived ahead of this
        /// message, so the ring may start afresh if it was broken.
        fresh: bool,
    },
    /// Result of a [`ControlMessage::QueryPort`]: the ring the receiver
    /// keeps for the sender's requests to the port.
    QueryPortReply {
        /// The request this answers.
        request_id: u64,
        /// 0 or a negative errno.
        status: i32,
        /// Remote address of the ring.
        ring_addr: u64,
        /// Remote key covering the ring.
        ring_rkey: u32,
        /// Bytes of the ring.
        ring_size: u64,
        /// Largest message the port takes.
        max_size: u64,
        /// Position up to which the ring has been consumed.
        consumed: u64,
        /// Position after the last request that arrived: where the
        /// sender's next request goes.
        written: u64,
        /// How many times the ring was started afresh after breaking.
        epoch: u32,
    },
    /// The receiver's ring for `port` of the sender has been consumed up
    /// to position `consumed`.
    RingAck {
        /// The sender's port.
        port: u32,
        /// Bytes consumed since the ring was created.
        consumed: u64,
    },
    /// The request waiting in reply slot `slot` failed with `status`.
    RpcFailed {
        /// The receiver's reply slot.
        slot: u32,
        /// The slot's generation when the request was sent.
        generation: u32,
        /// A negative errno.
        status: i32,
    },
    /// `port` of the sender was unregistered: query it again before use.
    PortClosed {
        /// The sender's port.
        port: u32,
    },
    /// The sender found its ring for `port` of the receiver's requests
    /// corrupt in `epoch` and discarded every request from position
    /// `received` on, those still in flight included: their callers fail,
    /// and the receiver queries the port again before its next request.
    RingBroken {
        /// The sender's port.
        port: u32,
        /// The ring's epoch when it broke.
        epoch: u32,
        /// Requests before this position were handed to receivers.
        received: u64,
        /// The ring broke by fault injection, as its sender asked.
        injected: bool,
    },
    /// Create a lock kept by the receiver.
    CreateLock {
        /// Echoed in the reply.
        request_id: u64,
    },
    /// Where lock `number` of the receiver lives.
    AskLock {
        /// Echoed in the reply.
        request_id: u64,
        /// The lock's number on the receiver.
        number: u32,
    },
    /// Result of [`ControlMessage::CreateLock`] or
    /// [`ControlMessage::AskLock`].
    LockReply {
        /// The request this answers.
        request_id: u64,
        /// 0 or a negative errno.
        status: i32,
        /// The lock's number.
        number: u32,
        /// Remote address of the lock's 8-byte ticket word.
        addr: u64,
        /// Remote key covering it (with atomic access).
        rkey: u32,
    },
    /// The sender's waiter `waiter` drew `ticket` for lock `number` of the
    /// receiver: hand it the lock when its turn comes.
    ReserveLock {
        /// The lock's number on the receiver.
        number: u32,
        /// The ticket drawn.
        ticket: u64,
        /// Identifies the waiter on the sender.
        waiter: u64,
    },
    /// The holder of `ticket` released lock `number` of the receiver while
    /// later tickets were drawn: the next ticket's turn has come.
    ReleaseLock {
        /// The lock's number on the receiver.
        number: u32,
        /// The released ticket.
        ticket: u64,
    },
    /// Run an RDMA atomic on the sender's own memory at `addr` and report
    /// the old value: how a node runs atomics on its own memory, so they
    /// are executed by its device like every other node's.
    AtomicRequest {
        /// Echoed in the reply.
        request_id: u64,
        /// Remote address of the 8-byte word on the sender.
        addr: u64,
        /// The sender's remote key covering it.
        rkey: u32,
        /// Compare-and-swap (else fetch-and-add).
        compare_swap: bool,
        /// The expected value, or the addend.
        compare: u64,
        /// The new value of a compare-and-swap.
        swap: u64,
    },
    /// Result of an [`ControlMessage::AtomicRequest`].
    AtomicReply {
        /// The request this answers.
        request_id: u64,
        /// 0 or a negative errno.
        status: i32,
        /// The value the word held before.
        old: u64,
    },
    /// Waiter `waiter` of the receiver now holds lock `number` of `home`
    /// with `ticket`.
    AssignLock {
        /// The node keeping the lock.
        home: u32,
        /// The lock's number there.
        number: u32,
        /// The ticket whose turn it is.
        ticket: u64,
        /// The waiter, as named in its reservation.
        waiter: u64,
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
const KIND_STATUS_REPLY: u32 = 4;
const KIND_BARRIER: u32 = 5;
const KIND_MEMSET_REQUEST: u32 = 6;
const KIND_COPY_REQUEST: u32 = 7;
const KIND_ASK_REQUEST: u32 = 8;
const KIND_ASK_REPLY: u32 = 9;
const KIND_REVOKE_REQUEST: u32 = 10;
const KIND_QUERY_PORT: u32 = 11;
const KIND_QUERY_PORT_REPLY: u32 = 12;
const KIND_RING_ACK: u32 = 13;
const KIND_RPC_FAILED: u32 = 14;
const KIND_PORT_CLOSED: u32 = 15;
const KIND_CREATE_LOCK: u32 = 16;
const KIND_ASK_LOCK: u32 = 17;
const KIND_LOCK_REPLY: u32 = 18;
const KIND_RESERVE_LOCK: u32 = 19;
const KIND_RELEASE_LOCK: u32 = 20;
const KIND_ASSIGN_LOCK: u32 = 21;
const KIND_ATOMIC_REQUEST: u32 = 22;
const KIND_ATOMIC_REPLY: u32 = 23;
const KIND_RING_BROKEN: u32 = 24;

/// Two 32-bit values in one argument.
fn pack(high: u32, low: u32) -> u64 {
    (u64::from(high) << 32) | u64::from(low)
}

/// The two 32-bit values of a [`pack`]ed argument.
fn unpack(arg: u64) -> (u32, u32) {
    ((arg >> 32) as u32, arg as u32)
}

impl ControlMessage {
    /// Encodes the message.
    pub(crate) fn encode(&self) -> [u8; MESSAGE_LEN] {
        let (kind, status, request_id, args) = match *self {
            ControlMessage::AllocRequest { request_id, size } => {
                (KIND_ALLOC_REQUEST, 0, request_id, [size, 0, 0, 0, 0, 0])
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
                [chunk_id, addr, u64::from(rkey), 0, 0, 0],
            ),
            ControlMessage::FreeRequest {
                request_id,
                chunk_id,
            } => (KIND_FREE_REQUEST, 0, request_id, [chunk_id, 0, 0, 0, 0, 0]),
            ControlMessage::StatusReply { request_id, status } => {
                (KIND_STATUS_REPLY, status, request_id, [0; 6])
            }
            ControlMessage::Barrier {
                round,
                reply_wanted,
            } => (
                KIND_BARRIER,
                0,
                0,
                [round, u64::from(reply_wanted), 0, 0, 0, 0],
            ),
            ControlMessage::MemsetRequest {
                request_id,
                chunk_id,
                offset,
                len,
                byte,
            } => (
                KIND_MEMSET_REQUEST,
                0,
                request_id,
                [chunk_id, offset, len, u64::from(byte), 0, 0],
            ),
            ControlMessage::CopyRequest {
                request_id,
                src_chunk_id,
                src_offset,
                len,
                dst_node,
                dst_chunk_id,
                dst_addr,
                dst_rkey,
            } => (
                KIND_COPY_REQUEST,
                0,
                request_id,
                [
                    src_chunk_id,
                    src_offset,
                    len,
                    dst_chunk_id,
                    dst_addr,
                    pack(dst_node, dst_rkey),
                ],
            ),
            ControlMessage::AskRequest {
                request_id,
                name,
                permission,
                password,
            } => (
                KIND_ASK_REQUEST,
                0,
                request_id,
                [name, permission, password, 0, 0, 0],
            ),
            ControlMessage::AskReply {
                request_id,
                status,
                lmr_id,
                size,
                granted,
                table_addr,
                table_rkey,
                chunk_size,
                lead,
            } => (
                KIND_ASK_REPLY,
                status,
                request_id,
                [
                    lmr_id,
                    size,
                    table_addr,
                    pack(granted, table_rkey),
                    chunk_size,
                    lead,
                ],
            ),
            ControlMessage::RevokeRequest { request_id, lmr_id } => {
                (KIND_REVOKE_REQUEST, 0, request_id, [lmr_id, 0, 0, 0, 0, 0])
            }
            ControlMessage::QueryPort {
                request_id,
                port,
                fresh,
            } => (
                KIND_QUERY_PORT,
                0,
                request_id,
                [u64::from(port), u64::from(fresh), 0, 0, 0, 0],
            ),
            ControlMessage::QueryPortReply {
                request_id,
                status,
                ring_addr,
                ring_rkey,
                ring_size,
                max_size,
                consumed,
                written,
                epoch,
            } => (
                KIND_QUERY_PORT_REPLY,
                status,
                request_id,
                [
                    ring_addr,
                    pack(epoch, ring_rkey),
                    ring_size,
                    max_size,
                    consumed,
                    written,
                ],
            ),
            ControlMessage::RingAck { port, consumed } => {
                (KIND_RING_ACK, 0, 0, [u64::from(port), consumed, 0, 0, 0, 0])
            }
            ControlMessage::RpcFailed {
                slot,
                generation,
                status,
            } => (
                KIND_RPC_FAILED,
                status,
                0,
                [pack(generation, slot), 0, 0, 0, 0, 0],
            ),
            ControlMessage::PortClosed { port } => {
                (KIND_PORT_CLOSED, 0, 0, [u64::from(port), 0, 0, 0, 0, 0])
            }
            ControlMessage::RingBroken {
                port,
                epoch,
                received,
                injected,
            } => (
                KIND_RING_BROKEN,
                0,
                0,
                [pack(epoch, port), received, u64::from(injected), 0, 0, 0],
            ),
            ControlMessage::CreateLock { request_id } => (KIND_CREATE_LOCK, 0, request_id, [0; 6]),
            ControlMessage::AskLock { request_id, number } => (
                KIND_ASK_LOCK,
                0,
                request_id,
                [u64::from(number), 0, 0, 0, 0, 0],
            ),
            ControlMessage::LockReply {
                request_id,
                status,
                number,
                addr,
                rkey,
            } => (
                KIND_LOCK_REPLY,
                status,
                request_id,
                [u64::from(number), addr, u64::from(rkey), 0, 0, 0],
            ),
            ControlMessage::ReserveLock {
                number,
                ticket,
                waiter,
            } => (
                KIND_RESERVE_LOCK,
                0,
                0,
                [u64::from(number), ticket, waiter, 0, 0, 0],
            ),
            ControlMessage::ReleaseLock { number, ticket } => (
                KIND_RELEASE_LOCK,
                0,
                0,
                [u64::from(number), ticket, 0, 0, 0, 0],
            ),
            ControlMessage::AtomicRequest {
                request_id,
                addr,
                rkey,
                compare_swap,
                compare,
                swap,
            } => (
                KIND_ATOMIC_REQUEST,
                0,
                request_id,
                [
                    addr,
                    pack(u32::from(compare_swap), rkey),
                    compare,
                    swap,
                    0,
                    0,
                ],
            ),
            ControlMessage::AtomicReply {
                request_id,
                status,
                old,
            } => (KIND_ATOMIC_REPLY, status, request_id, [old, 0, 0, 0, 0, 0]),
            ControlMessage::AssignLock {
                home,
                number,
                ticket,
                waiter,
            } => (
                KIND_ASSIGN_LOCK,
                0,
                0,
                [pack(home, number), ticket, waiter, 0, 0, 0],
            ),
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
        let u32_at = |at: usize| {
            u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
        };
        let u64_at = |at: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&bytes[at..at + 8]);
            u64::from_le_bytes(b)
        };
        let kind = u32_at(0);
        let status = u32_at(4) as i32;
        let request_id = u64_at(8);
        let arg: [u64; 6] = core::array::from_fn(|i| u64_at(16 + 8 * i));
        let [arg0, arg1, arg2, arg3, arg4, arg5] = arg;
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
            KIND_STATUS_REPLY => ControlMessage::StatusReply { request_id, status },
            KIND_BARRIER => ControlMessage::Barrier {
                round: arg0,
                reply_wanted: arg1 != 0,
            },
            KIND_MEMSET_REQUEST => ControlMessage::MemsetRequest {
                request_id,
                chunk_id: arg0,
                offset: arg1,
                len: arg2,
                byte: arg3 as u8,
            },
            KIND_COPY_REQUEST => {
                let (dst_node, dst_rkey) = unpack(arg5);
                ControlMessage::CopyRequest {
                    request_id,
                    src_chunk_id: arg0,
                    src_offset: arg1,
                    len: arg2,
                    dst_node,
                    dst_chunk_id: arg3,
                    dst_addr: arg4,
                    dst_rkey,
                }
            }
            KIND_ASK_REQUEST => ControlMessage::AskRequest {
                request_id,
                name: arg0,
                permission: arg1,
                password: arg2,
            },
            KIND_ASK_REPLY => {
                let (granted, table_rkey) = unpack(arg3);
                ControlMessage::AskReply {
                    request_id,
                    status,
                    lmr_id: arg0,
                    size: arg1,
                    granted,
                    table_addr: arg2,
                    table_rkey,
                    chunk_size: arg4,
                    lead: arg5,
                }
            }
            KIND_REVOKE_REQUEST => ControlMessage::RevokeRequest {
                request_id,
                lmr_id: arg0,
            },
            KIND_QUERY_PORT => ControlMessage::QueryPort {
                request_id,
                port: arg0 as u32,
                fresh: arg1 != 0,
            },
            KIND_QUERY_PORT_REPLY => {
                let (epoch, ring_rkey) = unpack(arg1);
                ControlMessage::QueryPortReply {
                    request_id,
                    status,
                    ring_addr: arg0,
                    ring_rkey,
                    ring_size: arg2,
                    max_size: arg3,
                    consumed: arg4,
                    written: arg5,
                    epoch,
                }
            }
            KIND_RING_ACK => ControlMessage::RingAck {
                port: arg0 as u32,
                consumed: arg1,
            },
            KIND_RPC_FAILED => {
                let (generation, slot) = unpack(arg0);
                ControlMessage::RpcFailed {
                    slot,
                    generation,
                    status,
                }
            }
            KIND_PORT_CLOSED => ControlMessage::PortClosed { port: arg0 as u32 },
            KIND_RING_BROKEN => {
                let (epoch, port) = unpack(arg0);
                ControlMessage::RingBroken {
                    port,
                    epoch,
                    received: arg1,
                    injected: arg2 != 0,
                }
            }
            KIND_CREATE_LOCK => ControlMessage::CreateLock { request_id },
            KIND_ASK_LOCK => ControlMessage::AskLock {
                request_id,
                number: arg0 as u32,
            },
            KIND_LOCK_REPLY => ControlMessage::LockReply {
                request_id,
                status,
                number: arg0 as u32,
                addr: arg1,
                rkey: arg2 as u32,
            },
            KIND_RESERVE_LOCK => ControlMessage::ReserveLock {
                number: arg0 as u32,
                ticket: arg1,
                waiter: arg2,
            },
            KIND_RELEASE_LOCK => ControlMessage::ReleaseLock {
                number: arg0 as u32,
                ticket: arg1,
            },
            KIND_ATOMIC_REQUEST => {
                let (compare_swap, rkey) = unpack(arg1);
                ControlMessage::AtomicRequest {
                    request_id,
                    addr: arg0,
                    rkey,
                    compare_swap: compare_swap != 0,
                    compare: arg2,
                    swap: arg3,
                }
            }
            KIND_ATOMIC_REPLY => ControlMessage::AtomicReply {
                request_id,
                status,
                old: arg0,
            },
            KIND_ASSIGN_LOCK => {
                let (home, number) = unpack(arg0);
                ControlMessage::AssignLock {
                    home,
                    number,
                    ticket: arg1,
                    waiter: arg2,
                }
            }
            other => return Err(DecodeError::UnknownKind(other)),
        })
    }

    /// The request id of a request that wants a reply.
    pub(crate) fn request_id(&self) -> Option<u64> {
        let id = match *self {
            ControlMessage::AllocRequest { request_id, .. }
            | ControlMessage::FreeRequest { request_id, .. }
            | ControlMessage::MemsetRequest { request_id, .. }
            | ControlMessage::CopyRequest { request_id, .. }
            | ControlMessage::AskRequest { request_id, .. }
            | ControlMessage::RevokeRequest { request_id, .. }
            | ControlMessage::QueryPort { request_id, .. }
            | ControlMessage::CreateLock { request_id }
            | ControlMessage::AskLock { request_id, .. }
            | ControlMessage::AtomicRequest { request_id, .. } => request_id,
            _ => 0,
        };
        (id != 0).then_some(id)
    }

    /// The request id of a reply, if this is one.
    pub(crate) fn reply_id(&self) -> Option<u64> {
        match *self {
            ControlMessage::AllocReply { request_id, .. }
            | ControlMessage::StatusReply { request_id, .. }
            | ControlMessage::AskReply { request_id, .. }
            | ControlMessage::QueryPortReply { request_id, .. }
            | ControlMessage::LockReply { request_id, .. }
            | ControlMessage::AtomicReply { request_id, .. } => Some(request_id),
            _ => None,
        }
    }
}
