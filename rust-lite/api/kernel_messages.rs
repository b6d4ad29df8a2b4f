// SPDX-License-Identifier: GPL-2.0

//! The kernel C API's messaging family (`include/rdma/lite_api.h`): the
//! original LITE's `liteapi_send_message`, `liteapi_send_reply` and
//! `liteapi_send_reply_opt` with their variants, and the handlers that
//! receive them (`liteapi_reg_*_handler`). The messages travel as calls to
//! the handlers' ports ([`crate::internal::kernel_messages`]).

use crate::internal::node_id::NodeId;
use core::{
    ffi::{c_char, c_int, c_void},
    marker::PhantomData,
    ptr::NonNull,
};
use kernel::{
    bindings,
    error::{from_result, to_result},
    prelude::*,
    sync::Arc,
};

use super::{
    kernel_api::{kernel_slice, kernel_slice_mut},
    rust_api::{call_into, target},
};
use crate::{
    errno,
    internal::{
        kernel_messages::{pieces, Answer, Handler, Kind, MAX_REPLY},
        node::node,
        qos::priority::Priority,
        rpc::{payload::ToKernel, ring_protocol::MAX_MESSAGE_SIZE},
    },
};

/// `liteapi_reg_send_handler`'s handler: the message, its length and the
/// sender's node id.
pub(crate) type SendHandlerFn = unsafe extern "C" fn(*mut c_char, u32, c_int) -> c_int;

/// `liteapi_reg_send_reply_handler`'s handler: the message, its length, the
/// reply buffer (`LITE_KMSG_MAX_REPLY` bytes), the reply's length to set
/// and the sender's node id.
pub(crate) type SendReplyHandlerFn =
    unsafe extern "C" fn(*mut c_char, u32, *mut c_char, *mut u32, c_int) -> c_int;

/// `liteapi_reg_send_reply_opt_handler`'s handler: the message, its length,
/// where to store the address of the handler's own reply, the reply's
/// length to set and the sender's node id.
pub(crate) type SendReplyOptHandlerFn =
    unsafe extern "C" fn(*mut c_char, u32, *mut *mut c_void, *mut u32, c_int) -> c_int;

/// One piece of an atomic kernel message, `struct atomic_struct`; its
/// fields are read and written by LITE's C helpers, which know its layout.
#[repr(C)]
pub(crate) struct AtomicPiece {
    _opaque: [u8; 0],
}

/// `liteapi_reg_atomic_send_handler`'s handler: the pieces, their number,
/// the reply buffer (`LITE_KMSG_MAX_REPLY` bytes), the reply's length to
/// set and the sender's node id.
pub(crate) type AtomicSendHandlerFn =
    unsafe extern "C" fn(*mut AtomicPiece, u32, *mut c_char, *mut u32, c_int) -> c_int;

/// `liteapi_reg_atomic_single_send_handler`'s handler: the pieces, their
/// number and the sender's node id.
pub(crate) type AtomicSingleSendHandlerFn =
    unsafe extern "C" fn(*mut AtomicPiece, u32, c_int) -> c_int;

/// What an opt handler returns when it keeps the call for
/// `liteapi_reply_message` (`LITE_KMSG_REPLY_LATER`).
const REPLY_LATER: c_int = 1;

/// A handler's return value as a result: a negative errno fails the call
/// with it (`EINVAL` for one out of range).
fn handler_result(ret: c_int) -> Result {
    match ret {
        0.. => Ok(()),
        // PANIC: `MAX_ERRNO` is a small constant.
        ret if ret >= -(bindings::MAX_ERRNO as c_int) => Err(Error::from_errno(ret)),
        _ => Err(EINVAL),
    }
}

/// A `send` handler from C.
struct SendHandler(SendHandlerFn);

impl Handler for SendHandler {
    fn code(&self) -> usize {
        self.0 as usize
    }

    fn handle(&self, message: &mut [u8], from: NodeId, _answer: &mut dyn Answer) -> Result {
        // SAFETY: The function was registered with
        // `liteapi_reg_send_handler`, whose contract makes it callable with a
        // message buffer of the given length, valid for the call, and a node
        // id; its module cannot go before it is unregistered
        // (`liteapi_reg_send_handler`'s contract). The length fits in a `u32`:
        // messages are at most `LITE_MAX_MESSAGE_SIZE` bytes.
        let ret = unsafe {
            (self.0)(
                message.as_mut_ptr().cast(),
                message.len() as u32,
                from.get() as c_int,
            )
        };
        handler_result(ret)
    }
}

/// A `send_reply` handler from C.
struct SendReplyHandler(SendReplyHandlerFn);

impl Handler for SendReplyHandler {
    fn code(&self) -> usize {
        self.0 as usize
    }

    fn handle(&self, message: &mut [u8], from: NodeId, answer: &mut dyn Answer) -> Result {
        answer_from_buffer(answer, |reply, reply_len| {
            // SAFETY: As for `SendHandler`, with
            // `liteapi_reg_send_reply_handler`'s contract: `reply` has
            // `MAX_REPLY` writable bytes and `reply_len` is a writable
            // `u32`, both valid for the call.
            unsafe {
                (self.0)(
                    message.as_mut_ptr().cast(),
                    message.len() as u32,
                    reply,
                    reply_len,
                    from.get() as c_int,
                )
            }
        })
    }
}

/// Runs `handler` with a reply buffer of `MAX_REPLY` bytes and the reply's
/// length, then sends the caller what it wrote there.
fn answer_from_buffer(
    answer: &mut dyn Answer,
    handler: impl FnOnce(*mut c_char, *mut u32) -> c_int,
) -> Result {
    let mut reply = KVVec::from_elem(0u8, MAX_REPLY, GFP_KERNEL)?;
    let mut reply_len = 0u32;
    handler_result(handler(reply.as_mut_ptr().cast(), &mut reply_len))?;
    let reply = reply.get(..reply_len as usize).ok_or(errno::EMSGSIZE())?;
    answer.reply(reply)
}

/// A `send_reply_opt` handler from C.
struct SendReplyOptHandler(SendReplyOptHandlerFn);

impl Handler for SendReplyOptHandler {
    fn code(&self) -> usize {
        self.0 as usize
    }

    fn handle(&self, message: &mut [u8], from: NodeId, answer: &mut dyn Answer) -> Result {
        let mut reply: *mut c_void = core::ptr::null_mut();
        let mut reply_len = 0u32;
        // SAFETY: As for `SendHandler`, with
        // `liteapi_reg_send_reply_opt_handler`'s contract: `reply` and
        // `reply_len` are writable for the call.
        let ret = unsafe {
            (self.0)(
                message.as_mut_ptr().cast(),
                message.len() as u32,
                &mut reply,
                &mut reply_len,
                from.get() as c_int,
            )
        };
        if ret == REPLY_LATER {
            return Ok(());
        }
        handler_result(ret)?;
        // SAFETY: By `liteapi_reg_send_reply_opt_handler`'s contract, a
        // handler returning 0 stored in `reply` the address of `reply_len`
        // readable bytes (one buffer) that stay valid and unwritten until
        // the handler's next call, or a null pointer with a length of 0.
        let reply = unsafe { kernel_slice(reply, u64::from(reply_len)) }?;
        answer.reply(reply)
    }
}

/// The pieces of a received atomic message, as the C handlers take them.
///
/// # Invariants
///
/// `list` is a `kvmalloc` allocation of `count` pieces owned by this
/// object; once [`PieceList::new`] has returned it, each piece is set to a
/// range of the message it was built from.
struct PieceList<'a> {
    list: NonNull<AtomicPiece>,
    count: u32,
    _message: PhantomData<&'a mut [u8]>,
}

impl<'a> PieceList<'a> {
    /// The pieces of `message`, laid out as [`pieces`] says.
    fn new(message: &'a mut [u8]) -> Result<Self> {
        let ranges = pieces::ranges(message)?;
        let count = u32::try_from(ranges.len()).map_err(|_| EINVAL)?;
        // SAFETY: `lite_atomic_pieces` only allocates.
        let list = NonNull::new(unsafe { lite_atomic_pieces(count) }).ok_or(ENOMEM)?;
        // INVARIANT: `list` was allocated above for `count` pieces; it is
        // freed by `Drop` if filling it fails, and each piece is set below.
        let pieces = PieceList {
            list,
            count,
            _message: PhantomData,
        };
        for (i, range) in (0..count).zip(ranges.iter()) {
            let piece = message.get_mut(range.clone()).ok_or(EINVAL)?;
            // SAFETY: `list` holds `count` pieces and `i < count`; the piece
            // points into `message`, which outlives the list (`'a`).
            unsafe {
                lite_set_atomic_piece(list.as_ptr(), i, piece.as_mut_ptr().cast(), piece.len())
            };
        }
        Ok(pieces)
    }
}

impl Drop for PieceList<'_> {
    fn drop(&mut self) {
        // SAFETY: `list` is from `lite_atomic_pieces`, a `kvmalloc`
        // allocation owned by this object (type invariant), freed once here.
        unsafe { bindings::kvfree(self.list.as_ptr().cast()) };
    }
}

/// An `atomic_send` handler from C.
struct AtomicSendHandler(AtomicSendHandlerFn);

impl Handler for AtomicSendHandler {
    fn code(&self) -> usize {
        self.0 as usize
    }

    fn handle(&self, message: &mut [u8], from: NodeId, answer: &mut dyn Answer) -> Result {
        let pieces = PieceList::new(message)?;
        answer_from_buffer(answer, |reply, reply_len| {
            // SAFETY: As for `SendReplyHandler`, with
            // `liteapi_reg_atomic_send_handler`'s contract: `pieces.list`
            // holds `pieces.count` pieces of the message, valid for the call.
            unsafe {
                (self.0)(
                    pieces.list.as_ptr(),
                    pieces.count,
                    reply,
                    reply_len,
                    from.get() as c_int,
                )
            }
        })
    }
}

/// An `atomic_single_send` handler from C.
struct AtomicSingleSendHandler(AtomicSingleSendHandlerFn);

impl Handler for AtomicSingleSendHandler {
    fn code(&self) -> usize {
        self.0 as usize
    }

    fn handle(&self, message: &mut [u8], from: NodeId, _answer: &mut dyn Answer) -> Result {
        let pieces = PieceList::new(message)?;
        // SAFETY: As for `AtomicSendHandler`, with
        // `liteapi_reg_atomic_single_send_handler`'s contract.
        let ret = unsafe { (self.0)(pieces.list.as_ptr(), pieces.count, from.get() as c_int) };
        handler_result(ret)
    }
}

/// Registers `handler` for `kind`, or unregisters `kind`'s handler if it is
/// `None`.
fn register<H: Handler + 'static>(kind: Kind, handler: Option<H>) -> c_int {
    from_result(|| {
        let cluster = node()?.cluster()?;
        match handler {
            Some(handler) => {
                let handler: Arc<dyn Handler> = Arc::new(handler, GFP_KERNEL)?;
                cluster.kernel_messages.register(kind, handler)?
            }
            None => cluster.kernel_messages.unregister(kind)?,
        }
        Ok(0)
    })
}

/// Registers the handler of one-way kernel messages, or unregisters it
/// (null).
///
/// # Safety
///
/// `handler` must be callable with a buffer of the given length, valid for
/// the call, until it is unregistered (which waits for a call in flight).
#[no_mangle]
pub(crate) unsafe extern "C" fn liteapi_reg_send_handler(handler: Option<SendHandlerFn>) -> c_int {
    register(Kind::Send, handler.map(SendHandler))
}

/// Registers the handler of kernel calls answered from LITE's buffer, or
/// unregisters it (null).
///
/// # Safety
///
/// As for [`liteapi_reg_send_handler`], with a reply buffer of
/// `LITE_KMSG_MAX_REPLY` bytes and a writable length.
#[no_mangle]
pub(crate) unsafe extern "C" fn liteapi_reg_send_reply_handler(
    handler: Option<SendReplyHandlerFn>,
) -> c_int {
    register(Kind::SendReply, handler.map(SendReplyHandler))
}

/// Registers the handler of kernel calls answered from the handler's own
/// buffer or later, or unregisters it (null).
///
/// # Safety
///
/// As for [`liteapi_reg_send_handler`]; a handler returning 0 must store
/// in its third argument the address of as many readable bytes as it
/// stores in its fourth (one buffer, or null for 0), valid until its next
/// call.
#[no_mangle]
pub(crate) unsafe extern "C" fn liteapi_reg_send_reply_opt_handler(
    handler: Option<SendReplyOptHandlerFn>,
) -> c_int {
    register(Kind::SendReplyOpt, handler.map(SendReplyOptHandler))
}

/// Registers the handler of atomic kernel calls, or unregisters it (null).
///
/// # Safety
///
/// As for [`liteapi_reg_send_reply_handler`], with the message as a list
/// of pieces valid for the call.
#[no_mangle]
pub(crate) unsafe extern "C" fn liteapi_reg_atomic_send_handler(
    handler: Option<AtomicSendHandlerFn>,
) -> c_int {
    register(Kind::AtomicSend, handler.map(AtomicSendHandler))
}

/// Registers the handler of one-way atomic kernel messages, or unregisters
/// it (null).
///
/// # Safety
///
/// As for [`liteapi_reg_send_handler`], with the message as a list of
/// pieces valid for the call.
#[no_mangle]
pub(crate) unsafe extern "C" fn liteapi_reg_atomic_single_send_handler(
    handler: Option<AtomicSingleSendHandlerFn>,
) -> c_int {
    register(Kind::AtomicSingleSend, handler.map(AtomicSingleSendHandler))
}

/// Takes the call the calling `send_reply_opt` handler is handling, to be
/// answered later with `liteapi_reply_message`; returns its descriptor.
#[no_mangle]
pub(crate) extern "C" fn liteapi_defer_reply() -> i64 {
    match node()
        .and_then(|node| node.cluster())
        .and_then(|cluster| cluster.kernel_messages.defer_answer())
    {
        Ok(descriptor) => descriptor as i64,
        Err(e) => e.to_errno().into(),
    }
}

/// A node id from C.
fn node_of(raw: c_int) -> Result<NodeId> {
    Ok(NodeId::new(u32::try_from(raw).map_err(|_| EINVAL)?))
}

/// A priority from C.
fn priority_of(raw: c_int) -> Result<Priority> {
    Priority::from_raw(u32::try_from(raw).map_err(|_| EINVAL)?)
}

/// A message length from C.
fn length(size: c_int) -> Result<u64> {
    match u64::try_from(size) {
        Ok(0) | Err(_) => Err(EINVAL),
        Ok(size) => Ok(size),
    }
}

/// Sends a one-way kernel message.
///
/// # Safety
///
/// `addr` must point to `size` readable bytes (one buffer) that stay valid,
/// and that nothing writes, until the call returns.
unsafe fn send_message(
    node_id: c_int,
    addr: *const c_void,
    size: c_int,
    priority: Priority,
) -> c_int {
    from_result(|| {
        let cluster = node()?.cluster()?;
        let target = target(&cluster, Kind::Send, priority);
        // SAFETY: `addr` points to `size` readable bytes that stay valid and
        // unwritten until this call returns (this function's `# Safety`
        // section); the slice is only used in this call.
        let message = unsafe { kernel_slice(addr, length(size)?) }?;
        let node = node_of(node_id)?;
        cluster.rpc.send_one_way(node, &target, message.into())?;
        Ok(0)
    })
}

/// Sends `size` bytes of `addr` to the send handler of `node_id`.
///
/// # Safety
///
/// As for [`send_message`].
#[no_mangle]
pub(crate) unsafe extern "C" fn liteapi_send_message(
    node_id: c_int,
    addr: *const c_void,
    size: c_int,
) -> c_int {
    // SAFETY: As this function's `# Safety` section requires.
    unsafe { send_message(node_id, addr, size, Priority::None) }
}

/// [`liteapi_send_message`] at `priority`.
///
/// # Safety
///
/// As for [`send_message`].
#[no_mangle]
pub(crate) unsafe extern "C" fn liteapi_send_message_priority(
    node_id: c_int,
    addr: *const c_void,
    size: c_int,
    priority: c_int,
) -> c_int {
    let priority = match priority_of(priority) {
        Ok(priority) => priority,
        Err(e) => return e.to_errno(),
    };
    // SAFETY: As this function's `# Safety` section requires.
    unsafe { send_message(node_id, addr, size, priority) }
}

/// [`liteapi_send_message`] with a datagram's promise: no reply, no order
/// with the sender's other messages. `msg_type`, the original's message
/// type, must be 0.
///
/// # Safety
///
/// As for [`send_message`].
#[no_mangle]
pub(crate) unsafe extern "C" fn liteapi_send_message_UD(
    node_id: c_int,
    addr: *const c_void,
    size: c_int,
    msg_type: c_int,
) -> c_int {
    if msg_type != 0 {
        return EINVAL.to_errno();
    }
    // SAFETY: As this function's `# Safety` section requires.
    unsafe { send_message(node_id, addr, size, Priority::None) }
}

/// Calls the send-reply handler of `node_id` with `size` bytes of `msg`;
/// the reply goes to `ack_msg`, which has room for `LITE_KMSG_MAX_REPLY`
/// bytes. Returns the reply's length.
///
/// # Safety
///
/// `msg` must point to `size` readable bytes (one buffer) that nothing
/// writes, and `ack_msg` to `LITE_KMSG_MAX_REPLY` writable bytes (one
/// buffer, not overlapping `msg`) that nothing else reads or writes, both
/// valid until the call returns.
#[no_mangle]
pub(crate) unsafe extern "C" fn liteapi_send_reply(
    node_id: c_int,
    msg: *const c_void,
    size: c_int,
    ack_msg: *mut c_void,
) -> c_int {
    from_result(|| {
        let cluster = node()?.cluster()?;
        let target = target(&cluster, Kind::SendReply, Priority::None);
        // SAFETY: `msg` points to `size` readable bytes that stay valid and
        // unwritten until this call returns (this function's `# Safety`
        // section); the slice is only used in this call.
        let message = unsafe { kernel_slice(msg, length(size)?) }?;
        // SAFETY: `ack_msg` points to `MAX_REPLY` writable bytes, not
        // overlapping `msg`, that only this call accesses until it returns
        // (this function's `# Safety` section); the slice is only used in
        // this call.
        let out = unsafe { kernel_slice_mut(ack_msg, MAX_REPLY as u64) }?;
        call_into(&cluster, node_of(node_id)?, &target, message, out)
    })
}

/// [`liteapi_send_reply`] with the original's datagram name; it travels,
/// and is answered, like [`liteapi_send_reply`].
///
/// # Safety
///
/// As for [`liteapi_send_reply`].
#[no_mangle]
pub(crate) unsafe extern "C" fn liteapi_send_reply_UD(
    node_id: c_int,
    msg: *const c_void,
    size: c_int,
    output: *mut c_void,
) -> c_int {
    // SAFETY: As this function's `# Safety` section requires.
    unsafe { liteapi_send_reply(node_id, msg, size, output) }
}

/// Calls the send-reply-opt handler of `node_id` at `priority` with `size`
/// bytes of `msg`; stores in `*output` a buffer holding the reply, which
/// the caller frees with [`liteapi_free_recv_buf`], and returns its length.
///
/// # Safety
///
/// `msg` must point to `size` readable bytes (one buffer) that nothing
/// writes, and `output` be null or point to a writable pointer that
/// nothing else reads or writes, both valid until the call returns.
#[no_mangle]
pub(crate) unsafe extern "C" fn liteapi_send_reply_opt(
    node_id: c_int,
    msg: *const c_void,
    size: c_int,
    output: *mut *mut c_void,
    priority: c_int,
) -> c_int {
    from_result(|| {
        let cluster = node()?.cluster()?;
        if output.is_null() {
            return Err(EFAULT);
        }
        let priority = priority_of(priority)?;
        let target = target(&cluster, Kind::SendReplyOpt, priority);
        // SAFETY: `msg` points to `size` readable bytes that stay valid and
        // unwritten until this call returns (this function's `# Safety`
        // section); the slice is only used in this call.
        let message = unsafe { kernel_slice(msg, length(size)?) }?;
        let node = node_of(node_id)?;
        let reply = cluster
            .rpc
            .call(node, &target, message.into(), MAX_MESSAGE_SIZE, ToKernel)?;
        let len = reply.len() as c_int;
        let (buffer, _, capacity) = reply.into_raw_parts();
        // An empty reply owns no memory to hand over.
        let buffer = if capacity == 0 {
            core::ptr::null_mut()
        } else {
            buffer.cast::<c_void>()
        };
        // SAFETY: `output` is non-null (checked above) and points to a
        // writable pointer that only this call accesses (this function's
        // `# Safety` section).
        unsafe { output.write(buffer) };
        Ok(len)
    })
}

/// Gathers `length` pieces of `list` into one atomic message.
///
/// # Safety
///
/// `list` must be null or point to `length` pieces, each pointing to as
/// many readable bytes as it says (one buffer), all valid and unwritten
/// until the call returns.
unsafe fn gather(list: *const AtomicPiece, length: c_int) -> Result<KVVec<u8>> {
    if list.is_null() {
        return Err(EFAULT);
    }
    let max = MAX_MESSAGE_SIZE as usize;
    let count = u32::try_from(length).map_err(|_| EINVAL)?;
    // Bounds the pieces read before their lengths are known.
    if count == 0 || count as usize > pieces::max_pieces(max) {
        return Err(EINVAL);
    }
    let mut parts = KVec::with_capacity(count as usize, GFP_KERNEL)?;
    for i in 0..count {
        let mut at: *mut c_void = core::ptr::null_mut();
        let mut len = 0usize;
        // SAFETY: `list` points to `length` pieces (this function's
        // `# Safety` section) and `i < length`.
        unsafe { lite_atomic_piece(list, i, &mut at, &mut len) };
        // SAFETY: The piece points to `len` readable bytes, valid and
        // unwritten until the call returns (this function's `# Safety`
        // section); the slice is only used in this call.
        parts.push(unsafe { kernel_slice(at, len as u64) }?, GFP_KERNEL)?;
    }
    let lengths = || parts.iter().map(|part| part.len());
    let len = pieces::message_len(lengths(), max)?;
    let mut message = KVVec::from_elem(0u8, len, GFP_KERNEL)?;
    let mut rest = pieces::put_header(lengths(), &mut message)?;
    for part in parts.iter() {
        // PANIC: `message` is the header plus the parts' lengths
        // (`message_len`), and `rest` what follows the header.
        let (into, after) = rest.split_at_mut(part.len());
        into.copy_from_slice(part);
        rest = after;
    }
    Ok(message)
}

/// Calls the atomic send handler of `node_id` with the `length` pieces of
/// `list` as one message; the reply goes to `ack_msg`, which has room for
/// `LITE_KMSG_MAX_REPLY` bytes. Returns the reply's length.
///
/// # Safety
///
/// As for [`gather`], and `ack_msg` must point to `LITE_KMSG_MAX_REPLY`
/// writable bytes (one buffer, not overlapping the pieces) that nothing
/// else reads or writes until the call returns.
#[no_mangle]
pub(crate) unsafe extern "C" fn liteapi_atomic_send(
    node_id: c_int,
    list: *const AtomicPiece,
    length: c_int,
    ack_msg: *mut c_void,
) -> c_int {
    from_result(|| {
        let cluster = node()?.cluster()?;
        let target = target(&cluster, Kind::AtomicSend, Priority::None);
        // SAFETY: As this function's `# Safety` section requires.
        let message = unsafe { gather(list, length) }?;
        // SAFETY: As in `liteapi_send_reply`.
        let out = unsafe { kernel_slice_mut(ack_msg, MAX_REPLY as u64) }?;
        call_into(&cluster, node_of(node_id)?, &target, &message, out)
    })
}

/// Sends the `length` pieces of `list` as one message to the atomic
/// single-send handler of `node_id`.
///
/// # Safety
///
/// As for [`gather`].
#[no_mangle]
pub(crate) unsafe extern "C" fn liteapi_atomic_single_send(
    node_id: c_int,
    list: *const AtomicPiece,
    length: c_int,
) -> c_int {
    from_result(|| {
        let cluster = node()?.cluster()?;
        let target = target(&cluster, Kind::AtomicSingleSend, Priority::None);
        // SAFETY: As this function's `# Safety` section requires.
        let message = unsafe { gather(list, length) }?;
        let node = node_of(node_id)?;
        cluster
            .rpc
            .send_one_way(node, &target, (&message[..]).into())?;
        Ok(0)
    })
}

/// Frees a reply [`liteapi_send_reply_opt`] returned.
///
/// # Safety
///
/// `buf` must be null or a reply buffer [`liteapi_send_reply_opt`] stored,
/// not freed yet, and not used after this call.
#[no_mangle]
pub(crate) unsafe extern "C" fn liteapi_free_recv_buf(buf: *mut c_void) {
    // SAFETY: `buf` is null or the buffer of a `KVVec` given up with
    // `into_raw_parts`, allocated by `kvmalloc`, which `kvfree` frees, and
    // not used again (this function's `# Safety` section).
    unsafe { bindings::kvfree(buf) };
}

extern "C" {
    fn lite_atomic_pieces(count: u32) -> *mut AtomicPiece;
    fn lite_atomic_piece(
        list: *const AtomicPiece,
        i: u32,
        vaddr: *mut *mut c_void,
        len: *mut usize,
    );
    fn lite_set_atomic_piece(list: *mut AtomicPiece, i: u32, vaddr: *mut c_void, len: usize);
    fn lite_watch_modules() -> c_int;
    fn lite_unwatch_modules();
    fn lite_within_module(addr: core::ffi::c_ulong, module: *const c_void) -> bool;
}

/// Watches modules going away, so that the handlers in their code are
/// unregistered before it is freed.
///
/// # Invariants
///
/// LITE's module notifier is registered while this object lives.
pub(crate) struct ModuleWatch(());

impl ModuleWatch {
    /// Registers LITE's module notifier.
    pub(crate) fn start() -> Result<Self> {
        // SAFETY: The notifier it registers only calls
        // `lite_rs_module_going`, which any going module may run; it is
        // unregistered before LITE's code goes (`Drop`).
        to_result(unsafe { lite_watch_modules() })?;
        Ok(ModuleWatch(()))
    }
}

impl Drop for ModuleWatch {
    fn drop(&mut self) {
        // SAFETY: The notifier is registered (type invariant), and is
        // unregistered once, here.
        unsafe { lite_unwatch_modules() };
    }
}

/// LITE's module notifier, for a module that is going: unregisters the
/// handlers in its code.
///
/// # Safety
///
/// `module` must be the module going, valid until the call returns.
#[no_mangle]
pub(crate) unsafe extern "C" fn lite_rs_module_going(module: *const c_void) {
    let Ok(cluster) = node().and_then(|node| node.cluster()) else {
        return;
    };
    cluster.kernel_messages.unregister_where(|code| {
        // SAFETY: `module` is valid until this call returns (this
        // function's `# Safety` section); `within_module` only compares
        // addresses.
        unsafe { lite_within_module(code as core::ffi::c_ulong, module) }
    });
}
