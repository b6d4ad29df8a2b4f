//! RPC and messaging between processes on the nodes of a cluster.
//!
//! A server opens a [`Port`] on its node; clients anywhere in the cluster
//! (this node included) [`call`] it and wait for the reply, post calls with
//! [`call_async`] and reap their replies later (up to
//! [`MAX_ASYNC_CALLS`](crate::sys::MAX_ASYNC_CALLS) in flight per process),
//! or [`send`] it one-way messages. Any thread of any process on the server's node may
//! [`receive`] from the port; each message goes to exactly one receiver,
//! in arrival order per client node, and nothing is dropped: a sender
//! whose ring on the server is full waits (or, with [`try_send`], fails
//! with `EAGAIN`).
//!
//! ```no_run
//! use lite::rpc::{self, Port};
//! use lite::Priority;
//!
//! // On node 1:
//! let port = Port::register(7, 4096, "upcase")?;
//! let mut buf = vec![0u8; 4096];
//! let request = port.receive(&mut buf, false)?;
//! let reply = buf[..request.len].to_ascii_uppercase();
//! if let Some(descriptor) = request.descriptor {
//!     descriptor.reply(&reply)?;
//! }
//!
//! // On any node:
//! let mut reply = [0u8; 16];
//! let len = rpc::call(1, 7, b"hello", &mut reply, Priority::None)?;
//! assert_eq!(&reply[..len], b"HELLO");
//! # Ok::<(), std::io::Error>(())
//! ```

use std::fmt;
use std::io;
use std::mem::ManuallyDrop;

use libc::c_long;

use crate::{byte_count, check, reap, Priority};

/// Fails with `EINVAL` for a port number that would not fit the 16 bits
/// [`sys::port_priority`](crate::sys::port_priority) gives it, so that it
/// cannot spill into the priority (the kernel rejects every port from
/// [`MAX_PORTS`](crate::sys::MAX_PORTS) on anyway).
fn port_priority(port: u32, priority: Priority) -> io::Result<u32> {
    if port > 0xffff {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    Ok(crate::sys::port_priority(port, priority.as_raw()))
}

/// A length the kernel returned, as a `usize`.
fn check_len(ret: c_long) -> io::Result<usize> {
    let len = check(ret)?;
    usize::try_from(len).map_err(|_| io::Error::from_raw_os_error(libc::EOVERFLOW))
}

/// An open RPC port of this process. Dropping it closes the port:
/// receivers blocked on it fail with `ESHUTDOWN` and requests not yet
/// received fail with `ECONNREFUSED` for their callers. The kernel also
/// closes it when the process exits.
#[derive(Debug)]
pub struct Port {
    number: u32,
    max_size: u64,
}

impl Port {
    /// Opens port `number` (below [`MAX_PORTS`](crate::sys::MAX_PORTS)) on
    /// this node for messages of at most `max_size` bytes (1 to
    /// [`MAX_MESSAGE_SIZE`](crate::sys::MAX_MESSAGE_SIZE)). `name` (at most
    /// [`MAX_PORT_NAME`](crate::sys::MAX_PORT_NAME) bytes) is
    /// informational. `EADDRINUSE` if the port is taken; `EDQUOT` if the
    /// caller's `rpc_ports` quota would be exceeded.
    pub fn register(number: u32, max_size: u64, name: &str) -> io::Result<Port> {
        // SAFETY: `name` is readable for its whole length during the call.
        let ret = unsafe {
            crate::sys::register_application(
                number,
                max_size,
                name.as_ptr().cast(),
                byte_count(name.len()),
            )
        };
        check(ret)?;
        Ok(Port { number, max_size })
    }

    /// The port number.
    pub fn number(&self) -> u32 {
        self.number
    }

    /// Largest message the port accepts.
    pub fn max_size(&self) -> u64 {
        self.max_size
    }

    /// Takes the next message of this port; see [`receive`].
    pub fn receive(&self, buf: &mut [u8], nonblocking: bool) -> io::Result<Received> {
        receive(self.number, buf, nonblocking)
    }

    /// Closes the port and reports whether the kernel did.
    pub fn unregister(self) -> io::Result<()> {
        let port = std::mem::ManuallyDrop::new(self);
        check(crate::sys::unregister_application(port.number)).map(drop)
    }
}

impl Drop for Port {
    fn drop(&mut self) {
        // Nothing useful can be done with an error here; `unregister`
        // reports it.
        let _ = crate::sys::unregister_application(self.number);
    }
}

/// Connects to `port` on `node` and returns the largest message it
/// accepts. Optional: the first send to a port does the same.
/// `ECONNREFUSED` if the port is not open there.
pub fn query_port(node: u32, port: u32) -> io::Result<u64> {
    check(crate::sys::query_port(node, port))
}

/// Calls `port` on `node` (this node included) with `msg` and waits for the
/// reply, which is stored at the start of `reply`; returns its length.
///
/// Errors: `ECONNREFUSED` the port is not open (or was closed before the
/// request was received), `EMSGSIZE` `msg` is larger than the port
/// accepts, `ECONNRESET` the receiving process exited without replying,
/// `EPROTO` the server found this node's ring for the port corrupt and
/// discarded the request unread, `ETIMEDOUT` no reply within [`RPC_TIMEOUT_MS`](crate::sys::RPC_TIMEOUT_MS),
/// `EINTR` a signal arrived (the request may still be served).
pub fn call(
    node: u32,
    port: u32,
    msg: &[u8],
    reply: &mut [u8],
    priority: Priority,
) -> io::Result<usize> {
    let port_priority = port_priority(port, priority)?;
    // SAFETY: `msg` is readable and `reply` exclusively borrowed and
    // writable for their whole lengths during the call.
    let ret = unsafe {
        crate::sys::send_reply_imm(
            node,
            port_priority,
            msg.as_ptr().cast(),
            byte_count(msg.len()),
            reply.as_mut_ptr().cast(),
            byte_count(reply.len()),
        )
    };
    check_len(ret)
}

/// Posts the call [`call`] would make and returns at once; the reply is
/// stored at the start of `reply` when the call is reaped
/// ([`AsyncCall::wait`], [`AsyncCall::poll`], or dropping it). One thread
/// may keep up to [`MAX_ASYNC_CALLS`](crate::sys::MAX_ASYNC_CALLS) calls in
/// flight; beyond that, `EAGAIN`. Errors of posting are returned here
/// (`ECONNREFUSED`, `EMSGSIZE`, ...), those of the call by the reap.
pub fn call_async<'a>(
    node: u32,
    port: u32,
    msg: &[u8],
    reply: &'a mut [u8],
    priority: Priority,
) -> io::Result<AsyncCall<'a>> {
    let port_priority = port_priority(port, priority)?;
    // The kernel writes the reply when the call is reaped, which may be
    // after this value is forgotten (`lite_fence`): it writes into memory
    // of its own, freed only once the call is known to be reaped.
    let mut bounce = ManuallyDrop::new(vec![0u8; reply.len()].into_boxed_slice());
    // SAFETY: `msg` is readable for its whole length during the call;
    // `bounce` stays allocated and untouched until the call is reaped
    // (see `Drop for AsyncCall`), and is leaked if that never happens.
    let ret = unsafe {
        crate::sys::send_reply_imm_async(
            node,
            port_priority,
            msg.as_ptr().cast(),
            byte_count(msg.len()),
            bounce.as_mut_ptr().cast(),
            byte_count(bounce.len()),
        )
    };
    match check(ret) {
        Ok(op) => Ok(AsyncCall {
            op,
            outcome: None,
            bounce,
            reply: Some(reply),
            delivered: false,
        }),
        Err(e) => {
            // SAFETY: the call failed, so the kernel never uses `bounce`.
            unsafe { ManuallyDrop::drop(&mut bounce) };
            Err(e)
        }
    }
}

/// A call posted by [`call_async`], holding the reply buffer borrowed
/// until it is reaped. Dropping an unreaped call waits for it (the buffer
/// receives the reply if it came).
#[derive(Debug)]
#[must_use = "dropping an asynchronous call waits for its reply"]
pub struct AsyncCall<'a> {
    op: u64,
    /// `None` until reaped; then the raw result (the reply's length).
    outcome: Option<c_long>,
    /// Where the kernel stores the reply; freed only once the call is
    /// known to be reaped (see `Drop`).
    bounce: ManuallyDrop<Box<[u8]>>,
    /// The caller's buffer; `None` once handed back.
    reply: Option<&'a mut [u8]>,
    /// Whether the reply has been copied into `reply`.
    delivered: bool,
}

impl<'a> AsyncCall<'a> {
    /// The operation id the kernel assigned.
    pub fn id(&self) -> u64 {
        self.op
    }

    /// Waits for the reply; returns its length and hands the buffer back.
    pub fn wait(mut self) -> io::Result<(usize, &'a mut [u8])> {
        let len = self.reap_with(0)?;
        Ok((len, self.reply.take().unwrap_or_default()))
    }

    /// Checks for the reply without blocking: `Ok(None)` while the call is
    /// in flight, the reply's length once it came (the buffer then holds
    /// it), the call's error if it failed.
    pub fn poll(&mut self) -> io::Result<Option<usize>> {
        if self.outcome.is_none() {
            let ret = reap(self.op, crate::sys::ASYNC_NOWAIT);
            if ret == -c_long::from(libc::EAGAIN) {
                return Ok(None);
            }
            self.outcome = Some(ret);
        }
        self.finish().map(Some)
    }

    fn reap_with(&mut self, flags: u32) -> io::Result<usize> {
        if self.outcome.is_none() {
            self.outcome = Some(reap(self.op, flags));
        }
        self.finish()
    }

    /// The outcome of the reaped call; copies the reply out once.
    fn finish(&mut self) -> io::Result<usize> {
        let len = check_len(self.outcome.unwrap_or(0))?;
        if !self.delivered {
            let reply = self.reply.as_deref_mut().and_then(|r| r.get_mut(..len));
            if let (Some(reply), Some(data)) = (reply, self.bounce.get(..len)) {
                reply.copy_from_slice(data);
            }
            self.delivered = true;
        }
        Ok(len)
    }
}

impl Drop for AsyncCall<'_> {
    fn drop(&mut self) {
        // Reaping releases the id whatever the outcome, so afterwards the
        // kernel no longer writes into `bounce`.
        let _ = self.reap_with(0);
        // SAFETY: `bounce` is not used again.
        unsafe { ManuallyDrop::drop(&mut self.bounce) };
    }
}

fn send_raw(node: u32, port: u32, msg: &[u8], priority: Priority, flags: u32) -> io::Result<()> {
    let port_priority = port_priority(port, priority)? | flags;
    // SAFETY: `msg` is readable for its whole length during the call.
    let ret = unsafe {
        crate::sys::send(
            node,
            port_priority,
            msg.as_ptr().cast(),
            byte_count(msg.len()),
        )
    };
    check(ret).map(drop)
}

/// Sends `msg` one-way to `port` on `node`; returns once it is in the
/// server's ring, waiting while the ring is full. Errors as [`call`].
pub fn send(node: u32, port: u32, msg: &[u8], priority: Priority) -> io::Result<()> {
    send_raw(node, port, msg, priority, 0)
}

/// Like [`send`], but fails with `EAGAIN` ([`io::ErrorKind::WouldBlock`])
/// instead of waiting while the server's ring is full.
pub fn try_send(node: u32, port: u32, msg: &[u8], priority: Priority) -> io::Result<()> {
    send_raw(node, port, msg, priority, crate::sys::SEND_NONBLOCK)
}

/// A message taken from a port.
#[derive(Debug)]
#[must_use = "a request's caller waits until its descriptor is answered"]
pub struct Received {
    /// Its length; the bytes are at the start of the receive buffer.
    pub len: usize,
    /// How to answer it: `None` for a one-way message.
    pub descriptor: Option<Descriptor>,
}

impl Received {
    fn new(len: c_long, descriptor: u64) -> io::Result<Received> {
        Ok(Received {
            len: check_len(len)?,
            descriptor: (descriptor != 0).then_some(Descriptor(descriptor)),
        })
    }
}

fn receive_flags(nonblocking: bool) -> u32 {
    if nonblocking {
        crate::sys::RECV_NONBLOCK
    } else {
        0
    }
}

/// Takes the next message of `port` (open on this node, by any process)
/// into `buf`. Waits for one unless `nonblocking`, which fails with
/// `EAGAIN` when the port is empty.
///
/// Errors: `EMSGSIZE` the next message is longer than `buf` (it stays
/// queued), `ENOENT` the port is not open, `ESHUTDOWN` it was closed while
/// waiting, `EINTR` a signal arrived.
pub fn receive(port: u32, buf: &mut [u8], nonblocking: bool) -> io::Result<Received> {
    let mut descriptor = 0u64;
    // SAFETY: `buf` and `descriptor` are exclusively borrowed and writable
    // during the call.
    let ret = unsafe {
        crate::sys::receive_message(
            port,
            buf.as_mut_ptr().cast(),
            byte_count(buf.len()),
            &mut descriptor,
            receive_flags(nonblocking),
        )
    };
    Received::new(ret, descriptor)
}

/// The right to answer one received request; a token of the receiving
/// process that the kernel checks on use.
///
/// The caller waits until the request is answered, the receiving process
/// exits (`ECONNRESET`) or the RPC times out, so a descriptor should not be
/// dropped unanswered.
#[derive(PartialEq, Eq, Hash)]
#[must_use = "the caller waits until the descriptor is answered"]
pub struct Descriptor(u64);

impl fmt::Debug for Descriptor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Descriptor({:#x})", self.0)
    }
}

impl Descriptor {
    /// A descriptor from its raw value, e.g. one received through [`crate::sys`].
    /// The kernel rejects values that are not unanswered descriptors of
    /// this process (`ENOENT`).
    pub fn from_raw(raw: u64) -> Descriptor {
        Descriptor(raw)
    }

    /// The raw value the kernel issued.
    pub fn raw(&self) -> u64 {
        self.0
    }

    /// Answers the request with `reply`.
    ///
    /// If `reply` is longer than the caller accepts (`EMSGSIZE`), the
    /// kernel keeps the descriptor valid and [`ReplyError::into_descriptor`]
    /// hands it back for a shorter reply.
    pub fn reply(self, reply: &[u8]) -> Result<(), ReplyError> {
        // SAFETY: `reply` is readable for its whole length during the call.
        let ret = unsafe {
            crate::sys::reply_message(reply.as_ptr().cast(), byte_count(reply.len()), self.0)
        };
        check(ret)
            .map(drop)
            .map_err(|error| ReplyError::new(error, self))
    }

    /// Answers the request with `reply`, then takes the next message of
    /// `port` into `buf` as [`receive`] does, in one system call. If the
    /// reply fails, nothing is received and the reply's error is returned;
    /// otherwise a failure is the receive's (see [`ReplyError`] for
    /// `EMSGSIZE`).
    pub fn reply_and_receive(
        self,
        reply: &[u8],
        port: u32,
        buf: &mut [u8],
        nonblocking: bool,
    ) -> Result<Received, ReplyError> {
        let mut next = crate::sys::LiteReceive {
            buf: buf.as_mut_ptr() as u64,
            max_size: byte_count(buf.len()),
            descriptor: 0,
            port,
            flags: receive_flags(nonblocking),
        };
        // SAFETY: `reply` is readable, `next` and the `buf` it points to
        // are exclusively borrowed and writable during the call.
        let ret = unsafe {
            crate::sys::reply_and_receive_message(
                reply.as_ptr().cast(),
                byte_count(reply.len()),
                self.0,
                &mut next,
            )
        };
        if ret < 0 {
            return Err(ReplyError::new(errno_error(ret), self));
        }
        Received::new(ret, next.descriptor).map_err(|error| ReplyError {
            error,
            descriptor: None,
        })
    }
}

/// The error of a negative raw result.
fn errno_error(ret: c_long) -> io::Error {
    check(ret)
        .err()
        .unwrap_or_else(|| io::Error::from_raw_os_error(libc::EIO))
}

/// A failed [`Descriptor::reply`] or [`Descriptor::reply_and_receive`];
/// converts into its [`io::Error`].
///
/// After `EMSGSIZE` the descriptor is handed back: the reply was longer
/// than the caller accepts, and the kernel keeps the descriptor valid for
/// a shorter one. From [`Descriptor::reply_and_receive`], `EMSGSIZE` may
/// instead mean that the reply went out and the next message did not fit
/// the buffer; the kernel then rejects the handed back descriptor with
/// `ENOENT`.
#[derive(Debug)]
pub struct ReplyError {
    error: io::Error,
    /// The descriptor, when the kernel kept it valid.
    descriptor: Option<Descriptor>,
}

impl ReplyError {
    fn new(error: io::Error, descriptor: Descriptor) -> ReplyError {
        // Only a reply that is too long leaves the descriptor valid.
        let kept = error.raw_os_error() == Some(libc::EMSGSIZE);
        ReplyError {
            error,
            descriptor: kept.then_some(descriptor),
        }
    }

    /// The error.
    pub fn error(&self) -> &io::Error {
        &self.error
    }

    /// The descriptor, if it is still valid (after `EMSGSIZE`).
    pub fn into_descriptor(self) -> Option<Descriptor> {
        self.descriptor
    }
}

impl fmt::Display for ReplyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "reply failed: {}", self.error)
    }
}

impl std::error::Error for ReplyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

impl From<ReplyError> for io::Error {
    fn from(error: ReplyError) -> io::Error {
        error.error
    }
}

/// Calls `port` on every node of `nodes` at once with `msg` and waits for
/// every reply (each at most `max_reply` bytes). Returns one result per
/// node, in order: its reply, or why that node did not answer. Fails as a
/// whole only for invalid arguments (e.g. more than
/// [`MAX_NODES`](crate::sys::MAX_NODES) nodes, or none).
pub fn multicast(
    nodes: &[u32],
    port: u32,
    msg: &[u8],
    max_reply: usize,
    priority: Priority,
) -> io::Result<Vec<io::Result<Vec<u8>>>> {
    let count =
        u32::try_from(nodes.len()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let room = max_reply
        .checked_mul(nodes.len())
        .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOMEM))?;
    let mut replies = vec![0u8; room];
    let mut lengths = vec![0i64; nodes.len()];
    let mut call = crate::sys::LiteMulticast {
        nodes: nodes.as_ptr() as u64,
        lengths: lengths.as_mut_ptr() as u64,
        msg: msg.as_ptr() as u64,
        size: byte_count(msg.len()),
        replies: replies.as_mut_ptr() as u64,
        max_reply: byte_count(max_reply),
        count,
        port_priority: port_priority(port, priority)?,
    };
    // SAFETY: `call` describes `nodes` and `msg` (read) and `lengths` and
    // `replies` (written), all live and exclusively ours during the call,
    // with the lengths given.
    check(unsafe { crate::sys::send_reply_multicast(&mut call) })?;
    let reply = |index: usize, len: i64| -> io::Result<Vec<u8>> {
        let len = check_len(c_long::try_from(len).unwrap_or(-c_long::from(libc::EIO)))?;
        if len > max_reply {
            return Err(io::Error::from_raw_os_error(libc::EOVERFLOW));
        }
        Ok(replies[index * max_reply..][..len].to_vec())
    };
    Ok(lengths
        .iter()
        .enumerate()
        .map(|(index, &len)| reply(index, len))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_beyond_16_bits_never_reach_the_kernel() {
        let err = call(1, 0x1_0005, b"x", &mut [0u8; 4], Priority::High).err();
        assert_eq!(err.and_then(|e| e.raw_os_error()), Some(libc::EINVAL));
        assert_eq!(port_priority(5, Priority::Low).ok(), Some(0x2_0005));
    }

    #[test]
    fn descriptors_are_kept_only_after_emsgsize() {
        let error = ReplyError::new(io::Error::from_raw_os_error(libc::EMSGSIZE), Descriptor(9));
        assert_eq!(error.into_descriptor().map(|d| d.raw()), Some(9));
        let error = ReplyError::new(io::Error::from_raw_os_error(libc::ENOENT), Descriptor(9));
        assert_eq!(error.error().raw_os_error(), Some(libc::ENOENT));
        assert!(error.into_descriptor().is_none());
        let error: io::Error =
            ReplyError::new(io::Error::from_raw_os_error(libc::EMSGSIZE), Descriptor(1)).into();
        assert_eq!(error.raw_os_error(), Some(libc::EMSGSIZE));
    }

    #[test]
    fn one_way_messages_have_no_descriptor() {
        let one_way = Received::new(5, 0).expect("length");
        assert_eq!(one_way.len, 5);
        assert!(one_way.descriptor.is_none());
        let request = Received::new(3, 0x77).expect("length");
        assert_eq!(request.descriptor.map(|d| d.raw()), Some(0x77));
        let err = Received::new(-c_long::from(libc::EAGAIN), 0).err();
        assert_eq!(err.map(|e| e.kind()), Some(io::ErrorKind::WouldBlock));
    }
}
