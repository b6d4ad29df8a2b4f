//! Userspace interface to LITE, the Local Indirection TiEr for RDMA.
//!
//! LITE lets every process on a node allocate memory on other nodes of a
//! cluster (an LMR, "LITE memory region") and read and write it over RDMA
//! through system calls. [`sys`] holds the raw calls; the rest of this
//! crate wraps them in a safe API:
//!
//! ```no_run
//! use lite::{Lmr, Priority};
//!
//! let my_id = lite::join("10.0.0.1", lite::sys::CM_DEFAULT_PORT, 1)?;
//! lite::dist_barrier(2)?;
//! let peer = if my_id == 1 { 2 } else { 1 };
//! let lmr = Lmr::alloc(peer, 4096, 0, 0x5eed)?;
//! lmr.write(0, b"hello", Priority::None)?;
//! let mut back = [0u8; 5];
//! lmr.read(0, &mut back, Priority::None)?;
//! assert_eq!(&back, b"hello");
//! lmr.free()?;
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! Beyond plain reads and writes, LMRs can be filled and copied where the
//! memory lives ([`Lmr::memset`], [`Lmr::copy_to`], [`Lmr::move_to`]),
//! shared between processes and nodes by name ([`Lmr::publish`],
//! [`Lmr::ask`], [`Lmr::wrap`]), backed by this process's own memory
//! ([`Registration`]) and accessed asynchronously ([`Lmr::write_async`],
//! [`Lmr::read_async`], [`fence`]). Processes also exchange messages:
//! [`rpc`] has ports, calls with replies, one-way sends and multicast.
//! [`sync`] has atomic counters in remote memory, distributed locks and
//! the process's default priority.
//!
//! Errors are [`io::Error`]s carrying the kernel's errno, so
//! [`io::Error::raw_os_error`] gives the exact reason (see the uapi header
//! for what each errno means).

#![warn(missing_docs)]

use std::ffi::CString;
use std::io;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;

use libc::c_long;

pub mod dsm;
pub mod rpc;
pub mod sync;
pub mod sys;

pub use sys::LiteStats;

/// Turns a raw result into the value on success or the errno as an error.
pub fn check(ret: c_long) -> io::Result<u64> {
    if ret >= 0 {
        Ok(ret.unsigned_abs())
    } else {
        // Kernel errnos are small; anything else is reported as EIO rather
        // than truncated into an unrelated errno.
        let errno = i32::try_from(ret.unsigned_abs()).unwrap_or(libc::EIO);
        Err(io::Error::from_raw_os_error(errno))
    }
}

/// Like [`check`] for calls whose result is a node id or a node count.
fn check_u32(ret: c_long) -> io::Result<u32> {
    let value = check(ret)?;
    u32::try_from(value).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("kernel returned {value}, which does not fit a node number"),
        )
    })
}

/// Joins the cluster whose manager listens on `cm_ip:cm_port` (dotted
/// IPv4), using port `ib_port` of the node's RDMA device, and returns this
/// node's id (>= 1).
///
/// Membership belongs to the node, not the process: it outlives the caller
/// and a second join fails with `EISCONN`. A node that [`leave`]s (or
/// reboots) and joins again gets its earlier id back; the join fails with
/// `EADDRINUSE` while the manager still counts the node's earlier
/// incarnation as alive, and with `EAGAIN` while a manager that just
/// started waits for its members to come back (try again a few seconds
/// later in both cases).
///
/// Needs `CAP_NET_ADMIN`; without it the join fails with `EPERM` before
/// anything else is checked. Using LMRs, RPC and locks needs none.
pub fn join(cm_ip: &str, cm_port: u16, ib_port: u32) -> io::Result<u32> {
    // An embedded NUL would silently cut the address short.
    let cm_ip = CString::new(cm_ip).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: `cm_ip` is NUL-terminated and lives until the call returns.
    check_u32(unsafe { sys::join(cm_ip.as_ptr(), cm_port.into(), ib_port) })
}

/// Leaves the cluster gracefully, for the whole node.
///
/// From the start of the call, new LITE calls on this node fail with
/// `ENOTCONN`. Chunks this node holds for other nodes' LMRs are first
/// moved, with their bytes, to a third node by their owners; then
/// everything this node's processes hold is released (their LMRs are
/// freed and other nodes' mappings of them revoked), and the other nodes
/// count this node as gone. [`join`] makes it a member again, with the
/// same id; handles from before the leave are gone.
///
/// Fails with `ENOSPC` if some chunk could not move (no third node, or its
/// LMR is mapped by other nodes); the node then stays a member. With
/// `force`, the node leaves anyway and the data of those chunks is lost.
/// `ENOTCONN` if the node is not a member, `EALREADY` while a join or
/// leave is under way. Needs `CAP_NET_ADMIN`, like [`join`]: `EPERM`
/// without it, before anything else is checked.
pub fn leave(force: bool) -> io::Result<()> {
    check(sys::leave(leave_flags(force))).map(drop)
}

/// The `lite_leave` flags for [`leave`].
fn leave_flags(force: bool) -> u32 {
    if force {
        sys::LEAVE_FORCE
    } else {
        0
    }
}

/// Returns this node's id.
pub fn node_id() -> io::Result<u32> {
    check_u32(sys::get_node_id())
}

/// Returns the number of nodes connected to this one, this one included.
pub fn total_nodes() -> io::Result<u32> {
    check_u32(sys::get_total_node())
}

/// Blocks until `num` nodes, this one included, have entered the same
/// barrier round. Every call starts a new round on this node.
///
/// Fails with `EHOSTDOWN` if a member departed while the round was in
/// progress: every node waiting in that round fails it too, and each
/// node's next call is the next round for all of them. Fails with
/// `ETIMEDOUT` if the cluster had fewer than `num` members for 60 s of
/// the wait.
pub fn dist_barrier(num: u32) -> io::Result<()> {
    check(sys::dist_barrier(num)).map(drop)
}

/// Priority of a data operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum Priority {
    /// No preference.
    #[default]
    None,
    /// Latency sensitive: served ahead of low priority traffic.
    High,
    /// Background traffic: may be delayed in favour of high priority.
    Low,
}

impl Priority {
    /// Every priority, in the order of their raw values.
    pub const ALL: [Priority; 3] = [Priority::None, Priority::High, Priority::Low];

    /// The value the system calls expect.
    pub fn as_raw(self) -> u32 {
        match self {
            Priority::None => sys::PRIORITY_NONE,
            Priority::High => sys::PRIORITY_HIGH,
            Priority::Low => sys::PRIORITY_LOW,
        }
    }

    /// The priority with raw value `raw`, if it is one.
    pub fn from_raw(raw: u32) -> Option<Priority> {
        Priority::ALL.into_iter().find(|p| p.as_raw() == raw)
    }

    /// Lower-case name, for messages.
    pub fn name(self) -> &'static str {
        match self {
            Priority::None => "none",
            Priority::High => "high",
            Priority::Low => "low",
        }
    }
}

/// Blocks until every outstanding asynchronous operation of the process has
/// completed and reaps them all. Returns the error of the first one that
/// failed.
///
/// This also reaps operations whose [`AsyncOp`] or [`AsyncRead`] is still
/// alive: their ids are released, so those objects later report `EINVAL`
/// (and an [`AsyncRead`] leaves its buffer untouched). Prefer waiting on
/// the operations themselves; `fence` is for code that started operations
/// through [`sys`] directly.
pub fn fence() -> io::Result<()> {
    check(sys::fence()).map(drop)
}

/// Returns this node's LITE counters. Works before [`join`] (all zero).
pub fn stats() -> io::Result<LiteStats> {
    let mut stats = LiteStats::default();
    // SAFETY: `stats` is a live, exclusively borrowed `LiteStats` and the
    // size passed is exactly its size.
    let ret = unsafe { sys::get_stats(&mut stats, byte_count(size_of::<LiteStats>())) };
    check(ret).map(|_| stats)
}

/// Handle permissions ([`sys::PERM_READ`] and friends), as a bit set.
pub type Permission = u64;

/// How an [`Lmr`] handle came to be, which decides how it is released.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LmrKind {
    /// Created by this process ([`Lmr::alloc`], [`Lmr::wrap`]); released
    /// with `lite_free`, which releases the memory itself.
    Owned,
    /// A mapping of memory published by someone else ([`Lmr::ask`]);
    /// released with `lite_umap_lmr`, which leaves the memory alone.
    Mapping,
}

/// An LMR: memory allocated by LITE on some node of the cluster, or a
/// mapping of one that was published by name.
///
/// Dropping an `Lmr` releases its handle: an owned LMR is freed, a mapping
/// is unmapped. Call [`Lmr::free`] or [`Lmr::unmap`] to see whether that
/// succeeded.
#[derive(Debug)]
pub struct Lmr {
    handle: u64,
    size: u64,
    password: u64,
    kind: LmrKind,
}

impl Lmr {
    /// Allocates `size` bytes on `node` ([`sys::NODE_SPREAD`] spreads the
    /// chunks over every other node). `flags` is 0 or [`sys::ALLOC_ATOMIC`];
    /// `password` guards every later read and write. `EDQUOT` if the
    /// caller's `remote_memory` or `lmrs` quota, or a serving node's limit
    /// for this node, would be exceeded.
    pub fn alloc(node: u32, size: u64, flags: u32, password: u64) -> io::Result<Lmr> {
        let handle = check(sys::alloc_remote(node, size, flags, password))?;
        Ok(Lmr {
            handle,
            size,
            password,
            kind: LmrKind::Owned,
        })
    }

    /// Creates an LMR on this node holding a copy of `data` and publishes
    /// it under `name` with READ | WRITE | SHARE, for [`Lmr::ask`] with
    /// `password`. Fails with `EEXIST` if `name` is already published on
    /// this node, `EDQUOT` if the caller's `remote_memory`, `lmrs` or
    /// `names` quota would be exceeded.
    pub fn wrap(data: &[u8], name: u64, password: u64) -> io::Result<Lmr> {
        let size = byte_count(data.len());
        // SAFETY: `data` is readable for its whole length during the call.
        let handle = check(unsafe { sys::wrap_alloc(data.as_ptr().cast(), size, name, password) })?;
        Ok(Lmr {
            handle,
            size,
            password,
            kind: LmrKind::Owned,
        })
    }

    /// Maps the LMR published under `name` on `node` (this node included).
    /// The mapping gets the requested `permission` restricted to what the
    /// name grants; `password` must be the one it was published with.
    ///
    /// The kernel does not report the size of a mapped LMR, so
    /// [`Lmr::size`] is 0 for the result; the publisher has to tell it.
    /// Once the owner frees or deregisters the memory, every operation on
    /// the mapping fails with `EKEYREVOKED`; dropping it is still fine.
    pub fn ask(node: u32, name: u64, permission: Permission, password: u64) -> io::Result<Lmr> {
        let handle = check(sys::ask_lmr(node, name, permission, password))?;
        Ok(Lmr {
            handle,
            size: 0,
            password,
            kind: LmrKind::Mapping,
        })
    }

    /// Publishes this LMR under `name` on this node, granting at most
    /// `permission` (any of READ | WRITE | SHARE | ATOMIC) to those who
    /// [`ask`](Lmr::ask) for it with this LMR's password. The name goes
    /// away when the LMR is freed. Only LMRs created on this node can be
    /// published (`EINVAL` otherwise, also for mappings); `EEXIST` if the
    /// name is taken; `EDQUOT` if the caller's `names` quota would be
    /// exceeded.
    pub fn publish(&self, name: u64, permission: Permission) -> io::Result<()> {
        check(sys::add_ask_mr_table(
            name,
            self.handle,
            permission,
            self.password,
        ))
        .map(drop)
    }

    /// Writes `data` into the LMR starting at `offset`; returns once the
    /// data has reached the remote memory.
    pub fn write(&self, offset: u64, data: &[u8], priority: Priority) -> io::Result<()> {
        // SAFETY: `data` is readable for its whole length during the call.
        let ret = unsafe {
            sys::rdma_write(
                self.handle,
                data.as_ptr().cast(),
                byte_count(data.len()),
                offset,
                priority.as_raw(),
                self.password,
            )
        };
        check(ret).map(drop)
    }

    /// Fills `buf` with the LMR's bytes starting at `offset`.
    pub fn read(&self, offset: u64, buf: &mut [u8], priority: Priority) -> io::Result<()> {
        // SAFETY: `buf` is exclusively borrowed and writable for its whole
        // length during the call.
        let ret = unsafe {
            sys::rdma_read(
                self.handle,
                buf.as_mut_ptr().cast(),
                byte_count(buf.len()),
                offset,
                priority.as_raw(),
                self.password,
            )
        };
        check(ret).map(drop)
    }

    /// Sets `size` bytes starting at `offset` to `byte`, on the nodes that
    /// hold them (no data crosses the network from here).
    pub fn memset(&self, offset: u64, size: u64, byte: u8) -> io::Result<()> {
        check(sys::remote_memset(self.handle, offset, size, byte.into())).map(drop)
    }

    /// Copies `size` bytes from this LMR at `src_offset` into `dst` at
    /// `dst_offset` (`dst` may be this LMR). The nodes holding the source
    /// send the bytes straight to the nodes holding the destination. The
    /// result is unspecified if the ranges overlap; use [`Lmr::move_to`].
    pub fn copy_to(
        &self,
        src_offset: u64,
        dst: &Lmr,
        dst_offset: u64,
        size: u64,
    ) -> io::Result<()> {
        check(sys::memcpy(
            self.handle,
            src_offset,
            dst.handle,
            dst_offset,
            size,
        ))
        .map(drop)
    }

    /// Like [`Lmr::copy_to`], but correct when the ranges overlap.
    pub fn move_to(
        &self,
        src_offset: u64,
        dst: &Lmr,
        dst_offset: u64,
        size: u64,
    ) -> io::Result<()> {
        check(sys::memmove(
            self.handle,
            src_offset,
            dst.handle,
            dst_offset,
            size,
        ))
        .map(drop)
    }

    /// Starts writing `data` (at most [`sys::MAX_ASYNC_SIZE`] bytes) into
    /// the LMR at `offset` without waiting for it to arrive. The kernel
    /// copies `data` before returning, so it is free again at once.
    ///
    /// Blocks while [`sys::MAX_ASYNC_OPS`] operations of the process are
    /// outstanding.
    pub fn write_async(&self, offset: u64, data: &[u8], priority: Priority) -> io::Result<AsyncOp> {
        // SAFETY: `data` is readable for its whole length during the call,
        // and the kernel has taken the bytes when it returns.
        let ret = unsafe {
            sys::rdma_write_async(
                self.handle,
                data.as_ptr().cast(),
                byte_count(data.len()),
                offset,
                priority.as_raw(),
                self.password,
            )
        };
        Ok(AsyncOp::new(check(ret)?))
    }

    /// Starts reading `buf.len()` bytes (at most [`sys::MAX_ASYNC_SIZE`])
    /// of the LMR at `offset` into `buf` without waiting. `buf` stays
    /// borrowed until the returned operation is reaped with
    /// [`AsyncRead::wait`] or [`AsyncRead::poll`] (or dropped, which waits).
    ///
    /// The kernel delivers the data into a buffer owned by the operation,
    /// which is copied into `buf` when it is reaped: that way memory the
    /// kernel still writes to is never handed back to the program, even if
    /// the [`AsyncRead`] is leaked with [`std::mem::forget`].
    ///
    /// Blocks while [`sys::MAX_ASYNC_OPS`] operations of the process are
    /// outstanding.
    pub fn read_async<'a>(
        &self,
        offset: u64,
        buf: &'a mut [u8],
        priority: Priority,
    ) -> io::Result<AsyncRead<'a>> {
        let mut bounce = vec![0u8; buf.len()].into_boxed_slice();
        // SAFETY: `bounce` is writable for its whole length and owned by the
        // returned operation, whose `Drop` reaps the operation before freeing
        // it; if the operation is leaked, so is `bounce`, so the kernel
        // never writes into memory that was returned to the allocator. On
        // failure no operation was started and `bounce` is not referenced.
        let ret = unsafe {
            sys::rdma_read_async(
                self.handle,
                bounce.as_mut_ptr().cast(),
                byte_count(bounce.len()),
                offset,
                priority.as_raw(),
                self.password,
            )
        };
        let op = check(ret)?;
        Ok(AsyncRead {
            op: AsyncOp::new(op),
            bounce: ManuallyDrop::new(bounce),
            buf: Some(buf),
            delivered: false,
        })
    }

    /// The handle the kernel assigned; valid until the LMR is released.
    pub fn handle(&self) -> u64 {
        self.handle
    }

    /// Size in bytes (0 for a mapping: the kernel does not report it).
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Password given at allocation (or when asking for a mapping).
    pub fn password(&self) -> u64 {
        self.password
    }

    /// Whether this process created the LMR or mapped it by name.
    pub fn kind(&self) -> LmrKind {
        self.kind
    }

    /// Frees the LMR and reports whether the kernel did.
    ///
    /// A mapping cannot be freed: for one this fails with `EINVAL` and
    /// unmaps it instead (see [`Lmr::unmap`]).
    pub fn free(self) -> io::Result<()> {
        if self.kind != LmrKind::Owned {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        // Drop must not free the handle a second time.
        let lmr = ManuallyDrop::new(self);
        check(sys::free(lmr.handle)).map(drop)
    }

    /// Drops a mapping made by [`Lmr::ask`] (also one that was revoked) and
    /// reports whether the kernel did.
    ///
    /// An LMR this process created is not a mapping: for one this fails
    /// with `EINVAL` and frees it instead (see [`Lmr::free`]).
    pub fn unmap(self) -> io::Result<()> {
        if self.kind != LmrKind::Mapping {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        let lmr = ManuallyDrop::new(self);
        check(sys::umap_lmr(lmr.handle)).map(drop)
    }
}

impl Drop for Lmr {
    fn drop(&mut self) {
        // Nothing useful can be done with an error here; `free` and `unmap`
        // report it.
        let _ = match self.kind {
            LmrKind::Owned => sys::free(self.handle),
            LmrKind::Mapping => sys::umap_lmr(self.handle),
        };
    }
}

/// Reaps operation `op`, retrying if a signal interrupts the wait.
pub(crate) fn reap(op: u64, flags: u32) -> c_long {
    loop {
        let ret = sys::async_wait(op, flags);
        if ret != -c_long::from(libc::EINTR) {
            return ret;
        }
    }
}

/// An asynchronous operation started by [`Lmr::write_async`].
///
/// Dropping an operation that was not reaped waits for it (and ignores its
/// outcome), so operations never pile up against
/// [`sys::MAX_ASYNC_OPS`].
#[derive(Debug)]
#[must_use = "dropping an asynchronous operation waits for it"]
pub struct AsyncOp {
    op: u64,
    /// `None` while in flight; the raw result once reaped.
    outcome: Option<c_long>,
}

impl AsyncOp {
    fn new(op: u64) -> AsyncOp {
        AsyncOp { op, outcome: None }
    }

    /// The operation id the kernel assigned.
    pub fn id(&self) -> u64 {
        self.op
    }

    /// Waits for the operation and returns its outcome.
    pub fn wait(mut self) -> io::Result<()> {
        self.wait_raw()
    }

    /// Checks whether the operation completed, without blocking:
    /// `Ok(false)` while it is in flight, `Ok(true)` once it succeeded, its
    /// error once it failed. Once finished it keeps reporting the same.
    pub fn poll(&mut self) -> io::Result<bool> {
        if self.outcome.is_none() {
            let ret = reap(self.op, sys::ASYNC_NOWAIT);
            if ret == -c_long::from(libc::EAGAIN) {
                return Ok(false);
            }
            self.outcome = Some(ret);
        }
        self.finished().map(|()| true)
    }

    fn wait_raw(&mut self) -> io::Result<()> {
        if self.outcome.is_none() {
            self.outcome = Some(reap(self.op, 0));
        }
        self.finished()
    }

    fn finished(&self) -> io::Result<()> {
        check(self.outcome.unwrap_or(0)).map(drop)
    }
}

impl Drop for AsyncOp {
    fn drop(&mut self) {
        let _ = self.wait_raw();
    }
}

/// An asynchronous read started by [`Lmr::read_async`], holding the
/// destination buffer borrowed until it is reaped.
///
/// Dropping an unreaped read waits for it, and the buffer receives the data
/// if it succeeded.
#[derive(Debug)]
#[must_use = "dropping an asynchronous read waits for it"]
pub struct AsyncRead<'a> {
    op: AsyncOp,
    /// Where the kernel stores the data; freed only once the operation is
    /// known to be reaped (see `Drop`).
    bounce: ManuallyDrop<Box<[u8]>>,
    /// The caller's buffer; `None` once [`AsyncRead::wait`] handed it back.
    buf: Option<&'a mut [u8]>,
    /// Whether the data has been copied into `buf`.
    delivered: bool,
}

impl<'a> AsyncRead<'a> {
    /// The operation id the kernel assigned.
    pub fn id(&self) -> u64 {
        self.op.id()
    }

    /// Waits for the read; on success the buffer holds the data and is
    /// handed back.
    pub fn wait(mut self) -> io::Result<&'a mut [u8]> {
        self.op.wait_raw()?;
        self.deliver();
        Ok(self.buf.take().unwrap_or_default())
    }

    /// Checks whether the read completed, without blocking: `Ok(false)`
    /// while it is in flight, `Ok(true)` once it succeeded (the buffer then
    /// holds the data; [`AsyncRead::wait`] hands it back at once), its
    /// error once it failed.
    pub fn poll(&mut self) -> io::Result<bool> {
        let done = self.op.poll()?;
        if done {
            self.deliver();
        }
        Ok(done)
    }

    /// Copies the received data into the caller's buffer, once. Only
    /// called after a successful reap.
    fn deliver(&mut self) {
        if !self.delivered {
            if let Some(buf) = self.buf.as_deref_mut() {
                buf.copy_from_slice(&self.bounce);
            }
            self.delivered = true;
        }
    }
}

impl Drop for AsyncRead<'_> {
    fn drop(&mut self) {
        // Reaping releases the id whatever the outcome (an unknown id,
        // EINVAL, means something else reaped it already), so afterwards
        // the kernel no longer writes into `bounce`.
        if self.op.wait_raw().is_ok() {
            self.deliver();
        }
        // SAFETY: `bounce` is not used again.
        unsafe { ManuallyDrop::drop(&mut self.bounce) };
    }
}

/// Memory of this process registered as an LMR, so that other nodes can
/// map it (after [`Registration::publish`]) and read or write it directly.
///
/// The buffer stays borrowed for as long as it is registered; dropping the
/// registration deregisters it: every mapping of it is revoked
/// (`EKEYREVOKED`), operations under way finish, and the pages are
/// unpinned, after which the buffer is the program's again.
#[derive(Debug)]
pub struct Registration<'a> {
    handle: u64,
    size: u64,
    password: u64,
    /// The registered memory, which remote nodes may access; only its
    /// borrow is kept, never a reference that could observe the changes.
    _buf: PhantomData<&'a mut [u8]>,
}

impl<'a> Registration<'a> {
    /// Registers `buf` (at most [`sys::MAX_REGISTER_SIZE`] bytes),
    /// allowing `permission` (any of READ | WRITE | SHARE | ATOMIC), runs
    /// `f` with the registration and deregisters it afterwards, also when
    /// `f` panics. Returns what `f` returned.
    ///
    /// This is the safe way to register memory: `f` only borrows the
    /// registration, so it cannot be leaked while `buf` is in use.
    pub fn scope<R>(
        buf: &mut [u8],
        permission: Permission,
        password: u64,
        f: impl FnOnce(&Registration<'_>) -> R,
    ) -> io::Result<R> {
        // SAFETY: the registration is dropped at the end of this function
        // (or while unwinding out of it) and `f` cannot move it out.
        let registration = unsafe { Registration::new(buf, permission, password) }?;
        Ok(f(&registration))
    }

    /// Registers `buf` (at most [`sys::MAX_REGISTER_SIZE`] bytes),
    /// allowing `permission` (any of READ | WRITE | SHARE | ATOMIC). The
    /// handle also gets ADMIN. `EDQUOT` if the caller's `pinned_memory` or
    /// `lmrs` quota would be exceeded; `ENOMEM` if the pages would exceed
    /// the process's `RLIMIT_MEMLOCK` (unless it has `CAP_IPC_LOCK`).
    ///
    /// # Safety
    ///
    /// The registration must be dropped (or [`deregister`]ed) before `buf`
    /// is used again: if it is leaked (e.g. with [`std::mem::forget`]) the
    /// borrow of `buf` ends while remote nodes can still read and write
    /// it. [`Registration::scope`] guarantees this.
    ///
    /// [`deregister`]: Registration::deregister
    pub unsafe fn new(
        buf: &'a mut [u8],
        permission: Permission,
        password: u64,
    ) -> io::Result<Registration<'a>> {
        let size = byte_count(buf.len());
        // SAFETY: `buf` is exclusively borrowed for 'a, and the caller
        // guarantees the registration ends before that borrow does.
        let ret = unsafe { sys::register_lmr(buf.as_mut_ptr().cast(), size, permission, password) };
        Ok(Registration {
            handle: check(ret)?,
            size,
            password,
            _buf: PhantomData,
        })
    }

    /// Publishes the registered memory under `name` on this node, granting
    /// at most `permission` to those who [`Lmr::ask`] for it with this
    /// registration's password. Needs SHARE; `EEXIST` if the name is taken,
    /// `EDQUOT` if the caller's `names` quota would be exceeded.
    /// The name goes away when the registration ends.
    pub fn publish(&self, name: u64, permission: Permission) -> io::Result<()> {
        check(sys::add_ask_mr_table(
            name,
            self.handle,
            permission,
            self.password,
        ))
        .map(drop)
    }

    /// The LMR handle of the registered memory.
    pub fn handle(&self) -> u64 {
        self.handle
    }

    /// Size of the registered memory in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Password given at registration.
    pub fn password(&self) -> u64 {
        self.password
    }

    /// Deregisters the memory and reports whether the kernel did.
    pub fn deregister(self) -> io::Result<()> {
        let registration = ManuallyDrop::new(self);
        check(sys::deregister_lmr(registration.handle)).map(drop)
    }
}

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        // Nothing useful can be done with an error here; `deregister`
        // reports it.
        let _ = sys::deregister_lmr(self.handle);
    }
}

/// Length of a slice as the `u64` the system calls take.
fn byte_count(len: usize) -> u64 {
    // usize is at most 64 bits on every target LITE runs on.
    len as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_passes_values_through() {
        assert_eq!(check(0).ok(), Some(0));
        assert_eq!(check(7).ok(), Some(7));
        assert_eq!(check(c_long::MAX).ok(), Some(c_long::MAX as u64));
    }

    #[test]
    fn check_maps_negative_errno_to_os_error() {
        let err = check(-c_long::from(libc::ENOTCONN)).err();
        assert_eq!(err.and_then(|e| e.raw_os_error()), Some(libc::ENOTCONN));
        let err = check(-28).err();
        assert_eq!(err.and_then(|e| e.raw_os_error()), Some(libc::ENOSPC));
    }

    #[test]
    fn check_never_truncates_huge_negative_values_into_other_errnos() {
        let err = check(c_long::MIN).err();
        assert_eq!(err.and_then(|e| e.raw_os_error()), Some(libc::EIO));
        let err = check(-(1 << 33) - 2).err();
        assert_eq!(err.and_then(|e| e.raw_os_error()), Some(libc::EIO));
    }

    #[test]
    fn only_a_forced_leave_sets_the_force_flag() {
        assert_eq!(leave_flags(false), 0);
        assert_eq!(leave_flags(true), sys::LEAVE_FORCE);
    }

    #[test]
    fn node_numbers_beyond_u32_are_rejected() {
        assert!(check_u32(1 << 32).is_err());
        assert_eq!(check_u32(3).ok(), Some(3));
        assert_eq!(
            check_u32(-c_long::from(libc::EISCONN))
                .err()
                .and_then(|e| e.raw_os_error()),
            Some(libc::EISCONN)
        );
    }

    #[test]
    fn join_rejects_embedded_nul_without_calling_the_kernel() {
        let err = join("10.0.0.1\0junk", sys::CM_DEFAULT_PORT, 1).err();
        assert_eq!(err.and_then(|e| e.raw_os_error()), Some(libc::EINVAL));
    }

    #[test]
    fn priorities_map_to_uapi_values() {
        assert_eq!(Priority::None.as_raw(), 0);
        assert_eq!(Priority::High.as_raw(), 1);
        assert_eq!(Priority::Low.as_raw(), 2);
        assert_eq!(Priority::default(), Priority::None);
        for (raw, priority) in Priority::ALL.iter().enumerate() {
            assert_eq!(priority.as_raw() as usize, raw);
        }
    }

    // The tests below never reach LITE: handles are made up, and the few
    // system calls that happen (from Drop) fail harmlessly with ENOSYS on
    // a kernel without LITE.

    fn fake_lmr(kind: LmrKind) -> Lmr {
        Lmr {
            handle: u64::MAX,
            size: 0,
            password: 0,
            kind,
        }
    }

    #[test]
    fn mappings_cannot_be_freed_and_owned_lmrs_cannot_be_unmapped() {
        let err = fake_lmr(LmrKind::Mapping).free().err();
        assert_eq!(err.and_then(|e| e.raw_os_error()), Some(libc::EINVAL));
        let err = fake_lmr(LmrKind::Owned).unmap().err();
        assert_eq!(err.and_then(|e| e.raw_os_error()), Some(libc::EINVAL));
    }

    #[test]
    fn reaped_operations_keep_reporting_their_outcome() {
        let mut ok = AsyncOp {
            op: 1,
            outcome: Some(0),
        };
        assert!(ok.poll().unwrap());
        assert!(ok.poll().unwrap());
        assert!(ok.wait().is_ok());
        let mut failed = AsyncOp {
            op: 2,
            outcome: Some(-c_long::from(libc::EIO)),
        };
        for _ in 0..2 {
            let err = failed.poll().err();
            assert_eq!(err.and_then(|e| e.raw_os_error()), Some(libc::EIO));
        }
        let err = failed.wait().err();
        assert_eq!(err.and_then(|e| e.raw_os_error()), Some(libc::EIO));
    }

    #[test]
    fn completed_reads_copy_the_data_once_and_hand_the_buffer_back() {
        let mut buf = [0u8; 4];
        let mut read = AsyncRead {
            op: AsyncOp {
                op: 3,
                outcome: Some(0),
            },
            bounce: ManuallyDrop::new(Box::new(*b"data")),
            buf: Some(&mut buf),
            delivered: false,
        };
        assert!(read.poll().unwrap());
        read.bounce.copy_from_slice(b"late");
        assert_eq!(read.wait().unwrap(), b"data");
        assert_eq!(&buf, b"data");
    }

    #[test]
    fn failed_reads_leave_the_buffer_alone() {
        let mut buf = [7u8; 4];
        let read = AsyncRead {
            op: AsyncOp {
                op: 4,
                outcome: Some(-c_long::from(libc::EKEYREVOKED)),
            },
            bounce: ManuallyDrop::new(Box::new([0u8; 4])),
            buf: Some(&mut buf),
            delivered: false,
        };
        let err = read.wait().err();
        assert_eq!(err.and_then(|e| e.raw_os_error()), Some(libc::EKEYREVOKED));
        assert_eq!(buf, [7; 4]);
    }
}
