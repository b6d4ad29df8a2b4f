// SPDX-License-Identifier: GPL-2.0

//! Kernel TCP client sockets.

use core::ptr::{addr_of_mut, null_mut, NonNull};
use kernel::{bindings, error::to_result, prelude::*};

/// A connected kernel TCP socket.
///
/// # Invariants
///
/// `sock` is a socket created by `sock_create_kern` and owned by this
/// object (released in `drop`); it is connected once [`TcpStream::connect`]
/// has returned it.
pub(crate) struct TcpStream {
    sock: NonNull<bindings::socket>,
}

// SAFETY: A kernel socket is not tied to the thread that created it: it may
// be used and released (`drop`) from any thread in process context.
unsafe impl Send for TcpStream {}
// SAFETY: The `&self` methods only call `kernel_sendmsg`, `kernel_recvmsg`
// and `kernel_sock_shutdown`, which serialise on the socket's own lock
// (`lock_sock` in `tcp_sendmsg`/`tcp_recvmsg`/`inet_shutdown`), so calls
// from several threads do not race on socket state. Their buffers are the
// callers' own. Concurrent senders (or receivers) could interleave their
// bytes, which breaks message framing but not memory safety; LITE
// serialises each stream's senders and has one receiver.
unsafe impl Sync for TcpStream {}

impl TcpStream {
    /// Connects to `addr:port` (IPv4) in the initial network namespace.
    ///
    /// # Errors
    ///
    /// What `connect(2)` would return, e.g. `ECONNREFUSED`, `ETIMEDOUT`,
    /// `ENETUNREACH`, or `ERESTARTSYS` if interrupted by a signal.
    ///
    /// A peer that stops acknowledging is noticed within about
    /// `silence_ms`: the connect, every send and every receive then fail
    /// (`TCP_USER_TIMEOUT`, and keepalive probes every second while the
    /// connection is idle).
    pub(crate) fn connect(addr: [u8; 4], port: u16, silence_ms: u32) -> Result<Self> {
        let mut sock: *mut bindings::socket = null_mut();
        // SAFETY: `init_net` is the initial namespace, which is never freed;
        // the family, type and protocol are valid constants; `sock` is a
        // valid out-parameter for the duration of the call.
        to_result(unsafe {
            bindings::sock_create_kern(
                addr_of_mut!(bindings::init_net),
                bindings::AF_INET as i32,
                bindings::sock_type_SOCK_STREAM as i32,
                bindings::IPPROTO_TCP as i32,
                &mut sock,
            )
        })?;
        let sock = NonNull::new(sock).ok_or(ENOMEM)?;
        // INVARIANT: Created above and owned from here on; released by
        // `drop` if connecting fails.
        let this = TcpStream { sock };
        this.watch_liveness(silence_ms);
        let mut sin = bindings::sockaddr_in {
            sin_family: bindings::AF_INET as u16,
            sin_port: port.to_be(),
            sin_addr: bindings::in_addr {
                s_addr: u32::from_ne_bytes(addr),
            },
            ..Default::default()
        };
        // SAFETY: `sock` is valid (type invariant); `sin` is an initialised
        // `sockaddr_in` that lives for the call, and the length passed is
        // its size.
        to_result(unsafe {
            bindings::kernel_connect(
                this.sock.as_ptr(),
                (&mut sin as *mut bindings::sockaddr_in).cast::<bindings::sockaddr>(),
                core::mem::size_of::<bindings::sockaddr_in>() as i32,
                0,
            )
        })?;
        Ok(this)
    }

    /// Sets the user timeout and keepalive described at [`TcpStream::connect`].
    fn watch_liveness(&self, silence_ms: u32) {
        let probes = silence_ms.div_ceil(1000).clamp(1, 127) as i32;
        // SAFETY: `sock` is valid (type invariant) and its `sk` is set by
        // `sock_create_kern` for the life of the socket; these setters take
        // the socket lock themselves and accept any value in range (the
        // keepalive ones check theirs and fail harmlessly otherwise).
        unsafe {
            let sk = (*self.sock.as_ptr()).sk;
            bindings::tcp_sock_set_user_timeout(sk, silence_ms as i32);
            bindings::sock_set_keepalive(sk);
            let _ = bindings::tcp_sock_set_keepidle(sk, 1);
            let _ = bindings::tcp_sock_set_keepintvl(sk, 1);
            let _ = bindings::tcp_sock_set_keepcnt(sk, probes);
        }
    }

    /// Shuts the connection down in both directions: a thread blocked
    /// receiving from it returns.
    pub(crate) fn shutdown(&self) {
        // SAFETY: `sock` is valid (type invariant); shutting down takes the
        // socket lock and may run concurrently with sends and receives,
        // which then fail.
        unsafe {
            bindings::kernel_sock_shutdown(
                self.sock.as_ptr(),
                bindings::sock_shutdown_cmd_SHUT_RDWR,
            );
        }
    }

    /// Sends all of `data`.
    pub(crate) fn send_all(&self, mut data: &[u8]) -> Result {
        while !data.is_empty() {
            let mut msg = bindings::msghdr {
                msg_flags: bindings::MSG_NOSIGNAL,
                ..Default::default()
            };
            let mut vec = bindings::kvec {
                iov_base: data.as_ptr().cast_mut().cast(),
                iov_len: data.len(),
            };
            // SAFETY: `sock` is valid (type invariant); `msg` and `vec` are
            // valid for the call and `vec` describes readable memory.
            let sent = unsafe {
                bindings::kernel_sendmsg(self.sock.as_ptr(), &mut msg, &mut vec, 1, data.len())
            };
            let sent = usize::try_from(to_result_len(sent)?).map_err(|_| EIO)?;
            if sent == 0 {
                // Nothing was sent and nothing failed: do not spin forever.
                return Err(EIO);
            }
            data = data.get(sent..).ok_or(EIO)?;
        }
        Ok(())
    }

    /// Fills `buf` completely from the stream.
    ///
    /// # Errors
    ///
    /// `EPIPE` if the peer closed the connection first.
    pub(crate) fn recv_exact(&self, buf: &mut [u8]) -> Result {
        let mut filled = 0;
        while filled < buf.len() {
            // PANIC: `filled < buf.len()` (loop condition).
            let rest = &mut buf[filled..];
            let mut msg = bindings::msghdr::default();
            let mut vec = bindings::kvec {
                iov_base: rest.as_mut_ptr().cast(),
                iov_len: rest.len(),
            };
            // SAFETY: `sock` is valid (type invariant); `msg` and `vec` are
            // valid for the call and `vec` describes writable memory.
            let got = unsafe {
                bindings::kernel_recvmsg(
                    self.sock.as_ptr(),
                    &mut msg,
                    &mut vec,
                    1,
                    rest.len(),
                    bindings::MSG_WAITALL as i32,
                )
            };
            let got = usize::try_from(to_result_len(got)?).map_err(|_| EIO)?;
            if got == 0 {
                return Err(EPIPE);
            }
            if got > rest.len() {
                return Err(EIO);
            }
            // PANIC: `got <= rest.len() == buf.len() - filled` (checked just
            // above), so the sum is at most `buf.len()`.
            filled += got;
        }
        Ok(())
    }
}

fn to_result_len(ret: i32) -> Result<i32> {
    to_result(ret).map(|()| ret)
}

impl Drop for TcpStream {
    fn drop(&mut self) {
        // SAFETY: The socket is owned by this object (type invariant) and no
        // call on it can be in progress (this is `&mut self`); it is not used
        // after `sock_release`.
        unsafe {
            bindings::kernel_sock_shutdown(
                self.sock.as_ptr(),
                bindings::sock_shutdown_cmd_SHUT_RDWR,
            );
            bindings::sock_release(self.sock.as_ptr());
        }
    }
}
