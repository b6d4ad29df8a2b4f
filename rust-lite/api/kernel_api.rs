// SPDX-License-Identifier: GPL-2.0

//! The kernel C API (`include/rdma/lite_api.h`): LITE for other kernel code.
//!
//! These keep the original LITE's `liteapi_*` names and argument order and
//! work on kernel buffers; `lite_api.c` exports them. Every function
//! returns a non-negative value or a negative errno, as documented in the
//! header.

use crate::internal::node_id::NodeId;
use core::ffi::{c_char, c_int, c_long, c_uint, c_void, CStr};
use kernel::{error::from_result, prelude::*};

use super::rust_api::{Place, Session};
use crate::{
    internal::{
        async_io::{op::AsyncBuffer, AsyncData, AsyncDataOp},
        atomics::AtomicOp,
        locks::lockers::LockId,
        memory::{
            handle::{LmrHandle, Password},
            ops::CopyEnd,
            registration::KernelRegion,
            transfer::KernelSource,
        },
        node::node,
        qos::priority::Priority,
        quota::Payer,
        rpc::{payload::ToKernel, Target},
        util::address::parse_ipv4,
    },
    verbs::{KernelBuffer, PinnedPages},
};

/// Joins the cluster whose manager listens on `server_ip:eth_port`, using
/// port `ib_port` (0: the first active one) of the RDMA device chosen as
/// for `lite_join` (see [`Node::join`]). Returns the node id.
///
/// [`Node::join`]: crate::internal::node::Node::join
///
/// # Safety
///
/// `server_ip` must be null or point to a NUL-terminated string that stays
/// valid, and that nothing else writes, until the call returns.
#[no_mangle]
pub(crate) unsafe extern "C" fn liteapi_establish_conn(
    server_ip: *const c_char,
    eth_port: c_int,
    ib_port: c_int,
) -> c_int {
    from_result(|| {
        if server_ip.is_null() {
            return Err(EINVAL);
        }
        // SAFETY: `server_ip` is non-null (checked above), so by this
        // function's `# Safety` section it points to a NUL-terminated string
        // that stays valid and unwritten until the call returns; `text`, which
        // borrows it, is dropped before then.
        let text = unsafe { CStr::from_ptr(server_ip) };
        let addr = parse_ipv4(text.to_bytes()).ok_or(EINVAL)?;
        let port = u16::try_from(eth_port)
            .ok()
            .filter(|&p| p != 0)
            .ok_or(EINVAL)?;
        let ib_port = u32::try_from(ib_port).map_err(|_| EINVAL)?;
        Ok(node()?.join(addr, port, ib_port)?.get() as c_int)
    })
}

/// This node's id.
#[no_mangle]
pub(crate) extern "C" fn liteapi_get_node_id() -> c_int {
    from_result(|| Ok(node()?.cluster()?.core.node_id().get() as c_int))
}

/// Leaves the cluster gracefully (see `lite_leave`).
#[no_mangle]
pub(crate) extern "C" fn liteapi_leave(flags: u32) -> c_int {
    from_result(|| {
        super::syscalls::leave(flags)?;
        Ok(0)
    })
}

/// Number of nodes this node is connected to, itself included.
#[no_mangle]
pub(crate) extern "C" fn liteapi_get_total_node() -> c_int {
    from_result(|| Ok(node()?.cluster()?.core.total_nodes() as c_int))
}

/// Number of peers this node is connected to (the original LITE's count of
/// live connections).
#[no_mangle]
pub(crate) extern "C" fn liteapi_num_connected_nodes() -> c_int {
    from_result(|| Ok(node()?.cluster()?.core.total_nodes().saturating_sub(1) as c_int))
}

/// Allocates an LMR of `size` bytes on `node_id` (0: spread over the other
/// nodes) and returns its handle.
#[no_mangle]
pub(crate) extern "C" fn liteapi_alloc_remote_mem(
    node_id: c_uint,
    size: u64,
    flags: c_uint,
    password: u64,
) -> c_long {
    from_result(|| {
        let cluster = node()?.cluster()?;
        let password = Password::from_raw(password);
        let process = &cluster.kernel_process;
        let handle =
            cluster
                .memory
                .alloc_remote(process, NodeId::new(node_id), size, flags, password)?;
        c_long::try_from(handle.raw()).map_err(|_| EINVAL)
    })
}

/// Builds a slice from a C buffer, allowing a null pointer for zero bytes.
///
/// # Safety
///
/// Unless `size` is 0, `buf` must be null or point to `size` readable bytes
/// of one allocation that stay valid, and that nothing writes, for `'a`.
pub(super) unsafe fn kernel_slice<'a>(buf: *const c_void, size: u64) -> Result<&'a [u8]> {
    let len = usize::try_from(size).map_err(|_| EINVAL)?;
    if len == 0 {
        return Ok(&[]);
    }
    if buf.is_null() {
        return Err(EFAULT);
    }
    // SAFETY: `len` is `size`, which is not 0, and `buf` is non-null (both
    // checked above), so by this function's `# Safety` section `buf` points
    // to `len` readable bytes of one allocation (so `len <= isize::MAX`)
    // that stay valid and unwritten for `'a`; `u8` needs no alignment.
    Ok(unsafe { core::slice::from_raw_parts(buf.cast::<u8>(), len) })
}

/// Builds a mutable slice from a C buffer, allowing a null pointer for zero
/// bytes.
///
/// # Safety
///
/// Unless `size` is 0, `buf` must be null or point to `size` writable bytes
/// of one allocation that stay valid, and that nothing else reads or writes,
/// for `'a`.
pub(super) unsafe fn kernel_slice_mut<'a>(buf: *mut c_void, size: u64) -> Result<&'a mut [u8]> {
    let len = usize::try_from(size).map_err(|_| EINVAL)?;
    if len == 0 {
        return Ok(&mut []);
    }
    if buf.is_null() {
        return Err(EFAULT);
    }
    let bytes = buf.cast::<u8>();
    // SAFETY: `len` is `size`, which is not 0, and `buf` is non-null (both
    // checked above), so by this function's `# Safety` section `bytes`
    // points to `len` writable bytes of one allocation that nothing else
    // accesses. The caller's buffer may be uninitialised: zeroing it makes
    // every byte a valid `u8` before a slice covers it.
    unsafe { core::ptr::write_bytes(bytes, 0, len) };
    // SAFETY: As above, `bytes` points to `len` writable bytes of one
    // allocation (so `len <= isize::MAX`), now initialised, that stay valid
    // and that nothing else accesses for `'a`; `u8` needs no alignment.
    Ok(unsafe { core::slice::from_raw_parts_mut(bytes, len) })
}

/// Writes `size` bytes from `buf` into LMR `lh` at `offset`.
///
/// # Safety
///
/// Unless `size` is 0, `buf` must point to `size` readable bytes (one
/// buffer) that stay valid, and that nothing writes, until the call
/// returns.
#[no_mangle]
pub(crate) unsafe extern "C" fn liteapi_rdma_write_offset(
    lh: u64,
    buf: *const c_void,
    size: u64,
    priority: c_uint,
    offset: u64,
    password: u64,
) -> c_int {
    from_result(|| {
        // SAFETY: Unless `size` is 0, `buf` points to `size` readable bytes
        // of one buffer that stay valid and unwritten until this call returns
        // (this function's `# Safety` section); `data` is only used during
        // the transfer below, so its lifetime ends before then.
        let data = unsafe { kernel_slice(buf, size) }?;
        let at = Place {
            offset,
            priority,
            password,
        };
        Session::current()?.write(lh, at, data)?;
        Ok(0)
    })
}

/// Reads `size` bytes of LMR `lh` at `offset` into `buf`.
///
/// # Safety
///
/// Unless `size` is 0, `buf` must point to `size` writable bytes (one
/// buffer) that stay valid, and that nothing else reads or writes, until the
/// call returns.
#[no_mangle]
pub(crate) unsafe extern "C" fn liteapi_rdma_read_offset(
    lh: u64,
    buf: *mut c_void,
    size: u64,
    priority: c_uint,
    offset: u64,
    password: u64,
) -> c_int {
    from_result(|| {
        // SAFETY: Unless `size` is 0, `buf` points to `size` writable bytes
        // of one buffer that stay valid, and that nothing else accesses,
        // until this call returns (this function's `# Safety` section);
        // `data` is only used during the transfer below, so its lifetime ends
        // before then.
        let data = unsafe { kernel_slice_mut(buf, size) }?;
        let at = Place {
            offset,
            priority,
            password,
        };
        Session::current()?.read(lh, at, data)?;
        Ok(0)
    })
}

/// The password of kernel callers' handle `lh`, for the calls that, as in
/// the original LITE, take none.
fn own_password(lh: u64) -> Result<u64> {
    let cluster = node()?.cluster()?;
    let (_, _, password, _) = cluster.kernel_process.handle(LmrHandle::from_raw(lh))?;
    Ok(password.raw())
}

/// Writes `size` bytes from `buf` at the start of LMR `lh`, checking the
/// handle's permission but no password.
///
/// # Safety
///
/// As for [`liteapi_rdma_write_offset`].
#[no_mangle]
pub(crate) unsafe extern "C" fn liteapi_rdma_write(
    lh: u64,
    buf: *const c_void,
    size: u64,
    priority: c_uint,
) -> c_int {
    match own_password(lh) {
        // SAFETY: `buf` and `size` are as this function's `# Safety` section
        // requires, which is what `liteapi_rdma_write_offset` requires.
        Ok(password) => unsafe { liteapi_rdma_write_offset(lh, buf, size, priority, 0, password) },
        Err(e) => e.to_errno(),
    }
}

/// Reads `size` bytes from the start of LMR `lh` into `buf`, checking the
/// handle's permission but no password.
///
/// # Safety
///
/// As for [`liteapi_rdma_read_offset`].
#[no_mangle]
pub(crate) unsafe extern "C" fn liteapi_rdma_read(
    lh: u64,
    buf: *mut c_void,
    size: u64,
    priority: c_uint,
) -> c_int {
    match own_password(lh) {
        // SAFETY: `buf` and `size` are as this function's `# Safety` section
        // requires, which is what `liteapi_rdma_read_offset` requires.
        Ok(password) => unsafe { liteapi_rdma_read_offset(lh, buf, size, priority, 0, password) },
        Err(e) => e.to_errno(),
    }
}

/// Frees LMR `lh`, revoking its mappings.
#[no_mangle]
pub(crate) extern "C" fn liteapi_free(lh: u64) -> c_int {
    from_result(|| {
        Session::current()?.free(lh)?;
        Ok(0)
    })
}

/// Revokes LMR `lh` (needs ADMIN): the original's name for [`liteapi_free`].
#[no_mangle]
pub(crate) extern "C" fn liteapi_deregister_mr(lh: u64) -> c_int {
    liteapi_free(lh)
}

/// Sets `size` bytes of LMR `lh` at `offset` to `byte`.
#[no_mangle]
pub(crate) extern "C" fn liteapi_remote_memset(
    lh: u64,
    offset: u64,
    size: u64,
    byte: c_int,
) -> c_int {
    from_result(|| {
        let cluster = node()?.cluster()?;
        let byte = u32::try_from(byte).map_err(|_| EINVAL)?;
        let lh = LmrHandle::from_raw(lh);
        cluster
            .memory_ops
            .memset(&cluster.kernel_process, lh, offset, size, byte)?;
        Ok(0)
    })
}

/// Copies `size` bytes from `src_lh` at `src_offset` to `dst_lh` at `dst_offset`.
#[no_mangle]
pub(crate) extern "C" fn liteapi_rdma_mr_memcpy(
    src_lh: u64,
    src_offset: u64,
    dst_lh: u64,
    dst_offset: u64,
    size: u64,
) -> c_int {
    from_result(|| {
        let cluster = node()?.cluster()?;
        let process = &cluster.kernel_process;
        let (from, to) = (
            CopyEnd::new(src_lh, src_offset),
            CopyEnd::new(dst_lh, dst_offset),
        );
        cluster.memory_ops.copy(process, from, to, size, false)?;
        Ok(0)
    })
}

/// [`liteapi_rdma_mr_memcpy`] that is correct for overlapping ranges.
#[no_mangle]
pub(crate) extern "C" fn liteapi_rdma_mr_memmov(
    src_lh: u64,
    src_offset: u64,
    dst_lh: u64,
    dst_offset: u64,
    size: u64,
) -> c_int {
    from_result(|| {
        let cluster = node()?.cluster()?;
        let process = &cluster.kernel_process;
        let (from, to) = (
            CopyEnd::new(src_lh, src_offset),
            CopyEnd::new(dst_lh, dst_offset),
        );
        cluster.memory_ops.copy(process, from, to, size, true)?;
        Ok(0)
    })
}

/// Creates an LMR on this node holding `size` bytes of `data`, published
/// under `identifier`; returns its handle.
///
/// # Safety
///
/// Unless `size` is 0, `data` must point to `size` readable bytes (one
/// buffer) that stay valid, and that nothing writes, until the call
/// returns.
#[no_mangle]
pub(crate) unsafe extern "C" fn liteapi_wrapup_alloc_for_remote_access(
    data: *const c_void,
    size: u64,
    identifier: u64,
    password: u64,
) -> c_long {
    from_result(|| {
        let cluster = node()?.cluster()?;
        // SAFETY: Unless `size` is 0, `data` points to `size` readable bytes
        // of one buffer that stay valid and unwritten until this call returns
        // (this function's `# Safety` section); `bytes` is only used by
        // `wrap_alloc` below, so its lifetime ends before then.
        let bytes = unsafe { kernel_slice(data, size) }?;
        let mut source = KernelSource { rest: bytes };
        let handle = cluster.sharing.wrap_alloc(
            &cluster.kernel_process,
            &mut source,
            size,
            identifier,
            Password::from_raw(password),
        )?;
        c_long::try_from(handle.raw()).map_err(|_| EINVAL)
    })
}

/// Publishes LMR `lh` under `identifier`, granting at most `permission`.
#[no_mangle]
pub(crate) extern "C" fn liteapi_add_askmr_table(
    identifier: u64,
    lh: u64,
    permission: u64,
    password: u64,
) -> c_int {
    from_result(|| {
        Session::current()?.publish(identifier, lh, permission, password)?;
        Ok(0)
    })
}

/// Maps the LMR published as `identifier` on node `owner`; returns a handle.
#[no_mangle]
pub(crate) extern "C" fn liteapi_ask_mr(
    owner: c_uint,
    identifier: u64,
    permission: u64,
    password: u64,
) -> c_long {
    from_result(|| {
        let owner = NodeId::new(owner);
        let handle = Session::current()?.map_published(owner, identifier, permission, password)?;
        c_long::try_from(handle).map_err(|_| EINVAL)
    })
}

/// Drops mapping `lh`.
#[no_mangle]
pub(crate) extern "C" fn liteapi_umap_lmr(lh: u64) -> c_int {
    from_result(|| {
        Session::current()?.unmap(lh)?;
        Ok(0)
    })
}

/// Queues the asynchronous transfer of `data`; returns its operation id.
fn submit_async(
    lh: u64,
    data: AsyncData<'_>,
    size: u64,
    priority: c_uint,
    offset: u64,
    password: u64,
) -> Result<c_long> {
    let cluster = node()?.cluster()?;
    let op = AsyncDataOp {
        handle: LmrHandle::from_raw(lh),
        data,
        len: size,
        offset,
        priority,
        password: Password::from_raw(password),
    };
    let id = cluster.async_io.submit_async(&cluster.kernel_process, op)?;
    c_long::try_from(id).map_err(|_| EINVAL)
}

/// Queues a write of `size` bytes of `buf` into LMR `lh` at `offset` and
/// returns the operation's id for [`liteapi_rdma_asywait`]. The bytes are
/// copied before the call returns.
///
/// # Safety
///
/// Unless `size` is 0, `buf` must point to `size` readable bytes (one
/// buffer) that stay valid, and that nothing writes, until the call
/// returns.
#[no_mangle]
pub(crate) unsafe extern "C" fn liteapi_rdma_asywrite_offset(
    lh: u64,
    buf: *const c_void,
    size: u64,
    priority: c_uint,
    offset: u64,
    password: u64,
) -> c_long {
    from_result(|| {
        // SAFETY: Unless `size` is 0, `buf` points to `size` readable bytes
        // of one buffer that stay valid and unwritten until this call returns
        // (this function's `# Safety` section), and the slice is dropped
        // before it returns: the submission copies the bytes.
        let bytes = unsafe { kernel_slice(buf, size) }?;
        submit_async(
            lh,
            AsyncData::WriteFromKernel(bytes),
            size,
            priority,
            offset,
            password,
        )
    })
}

/// Queues a read of `size` bytes of LMR `lh` at `offset` and returns the
/// operation's id. The bytes reach `buf` when the operation is reaped by
/// [`liteapi_rdma_asywait`] or [`liteapi_rdma_asyfence`].
///
/// # Safety
///
/// Unless `size` is 0, `buf` must point to `size` writable bytes (one
/// buffer) that stay valid, and that nothing else reads or writes, until
/// the operation is reaped: by [`liteapi_rdma_asywait`] on the returned id,
/// or by [`liteapi_rdma_asyfence`] called by any kernel caller (kernel
/// callers share their operations). If the call fails, `buf` is not used
/// after it returns.
#[no_mangle]
pub(crate) unsafe extern "C" fn liteapi_rdma_asyread_offset(
    lh: u64,
    buf: *mut c_void,
    size: u64,
    priority: c_uint,
    offset: u64,
    password: u64,
) -> c_long {
    from_result(|| {
        let len = usize::try_from(size).map_err(|_| EINVAL)?;
        // SAFETY: `len` is `size`. Unless it is 0, `buf` points to `len`
        // writable bytes of one buffer that only LITE accesses until the
        // operation is reaped, when the buffer is dropped, or until this call
        // returns if it fails, dropping it (this function's `# Safety`
        // section), as `KernelBuffer::new` requires.
        let buffer = unsafe { KernelBuffer::new(buf.cast::<u8>(), len) }?;
        let data = AsyncData::ReadInto(AsyncBuffer::Kernel(buffer));
        submit_async(lh, data, size, priority, offset, password)
    })
}

/// Reaps asynchronous operation `op` (flags: `LITE_ASYNC_NOWAIT`).
#[no_mangle]
pub(crate) extern "C" fn liteapi_rdma_asywait(op: u64, flags: c_uint) -> c_int {
    from_result(|| {
        let cluster = node()?.cluster()?;
        let len = cluster
            .async_io
            .async_wait(&cluster.kernel_process, op, flags)?;
        c_int::try_from(len).map_err(|_| EINVAL)
    })
}

/// Reaps every outstanding asynchronous operation of kernel callers and
/// returns the first error among them.
#[no_mangle]
pub(crate) extern "C" fn liteapi_rdma_asyfence() -> c_int {
    from_result(|| {
        let cluster = node()?.cluster()?;
        cluster.async_io.fence(&cluster.kernel_process)?;
        Ok(0)
    })
}

/// Makes `size` bytes of kernel memory at `addr` an LMR held by this node,
/// allowing `permission`; returns its owner handle.
///
/// # Safety
///
/// `addr` must point to `size` bytes of directly mapped or vmalloc memory.
/// Every page the region touches, in whole and not only the region, is
/// reached by this node and other nodes page by page: those pages must stay
/// allocated (and, for vmalloc memory, mapped to the same pages) until
/// [`liteapi_deregister_mr`] on the handle has returned 0, must hold nothing
/// the caller cannot let other nodes read and overwrite at any time (use
/// page-aligned allocations), and the caller may only access them as such
/// shared memory, never through references that assume exclusive access.
#[no_mangle]
pub(crate) unsafe extern "C" fn liteapi_register_lmr_with_virt_addr(
    addr: *mut c_void,
    size: u64,
    permission: u64,
    password: u64,
) -> c_long {
    from_result(|| {
        let cluster = node()?.cluster()?;
        let region = KernelRegion::new(addr as usize, size, permission)?;
        let start = addr.cast::<u8>().wrapping_sub(addr as usize - region.start);
        // SAFETY: `start` is the page-aligned start of the caller's region
        // and `region.count` pages cover it. By this function's contract,
        // those whole pages are directly mapped or vmalloc memory that stays
        // allocated and mapped until the LMR is deregistered with its memory
        // released (which drops the pages), that other nodes may read and
        // overwrite, that no Rust reference covers, and that is not a
        // `DmaBuffer`'s (it is the caller's own memory).
        let pages =
            unsafe { PinnedPages::kernel(&cluster.core.device().device, start, region.count) }?;
        let process = &cluster.kernel_process;
        let password = Password::from_raw(password);
        let handle = cluster
            .registration
            .register_kernel(process, &region, pages, password)?;
        c_long::try_from(handle.raw()).map_err(|_| EINVAL)
    })
}

/// Waits until `num` nodes have entered the same barrier round.
#[no_mangle]
pub(crate) extern "C" fn liteapi_dist_barrier(num: c_uint) -> c_int {
    from_result(|| {
        node()?.cluster()?.barrier.dist_barrier(num)?;
        Ok(0)
    })
}

/// `struct lite_lock` of `<uapi/linux/lite.h>`.
#[repr(C)]
pub(crate) struct LiteLock {
    home: u32,
    number: u32,
}

impl From<LockId> for LiteLock {
    fn from(id: LockId) -> Self {
        LiteLock {
            home: id.home.get(),
            number: id.number,
        }
    }
}

/// Runs an atomic operation on the kernel callers' handle `lh` and stores
/// the old value into `out`.
///
/// # Safety
///
/// `out` must be null or point to a writable, 8-byte aligned `u64` that
/// stays valid, and that nothing else reads or writes, until the call
/// returns.
unsafe fn kernel_atomic(lh: u64, out: *mut u64, op: AtomicOp, priority: c_uint) -> c_int {
    from_result(|| {
        if out.is_null() {
            return Err(EINVAL);
        }
        let cluster = node()?.cluster()?;
        let lh = LmrHandle::from_raw(lh);
        let old = cluster
            .atomics
            .atomic(&cluster.kernel_process, lh, op, priority)?;
        // SAFETY: `out` is non-null (checked above), so by this function's
        // `# Safety` section it points to a writable, aligned `u64` that is
        // still valid and accessed by nothing else.
        unsafe { out.write(old) };
        Ok(0)
    })
}

/// Adds `value` to the 8-byte LMR `lh`; its previous value goes to `*out`.
///
/// # Safety
///
/// `out` must be null or point to a writable, 8-byte aligned `u64` that
/// stays valid, and that nothing else reads or writes, until the call
/// returns.
#[no_mangle]
pub(crate) unsafe extern "C" fn liteapi_rdma_fetch_and_add(
    lh: u64,
    out: *mut u64,
    value: u64,
    priority: c_uint,
) -> c_int {
    // SAFETY: `out` is null or points to a writable, aligned `u64` that only
    // this call accesses until it returns (this function's `# Safety`
    // section), as `kernel_atomic` requires.
    unsafe { kernel_atomic(lh, out, AtomicOp::FetchAdd(value), priority) }
}

/// Replaces the 8-byte LMR `lh`'s value with `new_value` if it is
/// `expected`; its previous value goes to `*out`.
///
/// # Safety
///
/// `out` must be null or point to a writable, 8-byte aligned `u64` that
/// stays valid, and that nothing else reads or writes, until the call
/// returns.
#[no_mangle]
pub(crate) unsafe extern "C" fn liteapi_rdma_compare_and_swp(
    lh: u64,
    out: *mut u64,
    expected: u64,
    new_value: u64,
    priority: c_uint,
) -> c_int {
    let op = AtomicOp::CompareSwap {
        expected,
        new_value,
    };
    // SAFETY: `out` is null or points to a writable, aligned `u64` that only
    // this call accesses until it returns (this function's `# Safety`
    // section), as `kernel_atomic` requires.
    unsafe { kernel_atomic(lh, out, op, priority) }
}

/// Creates a lock kept by `home`; fills `*lock` and returns its number.
///
/// # Safety
///
/// `lock` must be null or point to a writable, aligned `struct lite_lock`
/// that stays valid, and that nothing else reads or writes, until the call
/// returns.
#[no_mangle]
pub(crate) unsafe extern "C" fn liteapi_create_lock(home: c_uint, lock: *mut LiteLock) -> c_int {
    from_result(|| {
        if lock.is_null() {
            return Err(EINVAL);
        }
        let id = node()?
            .cluster()?
            .locks
            .create_lock(Payer::Kernel, NodeId::new(home))?;
        // SAFETY: `lock` is non-null (checked above), so by this function's
        // `# Safety` section it points to a writable, aligned
        // `struct lite_lock`, whose layout `LiteLock` has, that is still valid
        // and accessed by nothing else.
        unsafe { lock.write(id.into()) };
        c_int::try_from(id.number).map_err(|_| EINVAL)
    })
}

/// Fills `*lock` for lock `number` of `home`.
///
/// # Safety
///
/// `lock` must be null or point to a writable, aligned `struct lite_lock`
/// that stays valid, and that nothing else reads or writes, until the call
/// returns.
#[no_mangle]
pub(crate) unsafe extern "C" fn liteapi_ask_lock(
    home: c_uint,
    number: c_uint,
    lock: *mut LiteLock,
) -> c_int {
    from_result(|| {
        if lock.is_null() {
            return Err(EINVAL);
        }
        let id = node()?
            .cluster()?
            .locks
            .ask_lock(NodeId::new(home), number)?;
        // SAFETY: `lock` is non-null (checked above), so by this function's
        // `# Safety` section it points to a writable, aligned
        // `struct lite_lock`, whose layout `LiteLock` has, that is still valid
        // and accessed by nothing else.
        unsafe { lock.write(id.into()) };
        Ok(0)
    })
}

/// The lock `lock` points to.
///
/// # Safety
///
/// `lock` must be null or point to a readable, aligned `struct lite_lock`
/// that stays valid, and that nothing writes, until the call returns.
unsafe fn lock_id(lock: *const LiteLock) -> Result<LockId> {
    if lock.is_null() {
        return Err(EINVAL);
    }
    // SAFETY: `lock` is non-null (checked above), so by this function's
    // `# Safety` section it points to a readable, aligned `struct lite_lock`
    // (the layout of `LiteLock`, whose fields any bits are valid for) that
    // nothing writes while the reference, used only below, lives.
    let lock = unsafe { &*lock };
    Ok(LockId {
        home: NodeId::new(lock.home),
        number: lock.number,
    })
}

/// Acquires `*lock` for the calling thread.
///
/// # Safety
///
/// `lock` must be null or point to a readable, aligned `struct lite_lock`
/// that stays valid, and that nothing writes, until the call returns.
#[no_mangle]
pub(crate) unsafe extern "C" fn liteapi_lock(lock: *const LiteLock) -> c_int {
    from_result(|| {
        // SAFETY: `lock` is null or points to a readable, aligned
        // `struct lite_lock` that stays valid and unwritten until this call
        // returns (this function's `# Safety` section), so until `lock_id`
        // returns.
        let id = unsafe { lock_id(lock) }?;
        node()?.cluster()?.locks.lock(id)?.to_result()?;
        Ok(0)
    })
}

/// Releases `*lock`, held by the calling thread.
///
/// # Safety
///
/// `lock` must be null or point to a readable, aligned `struct lite_lock`
/// that stays valid, and that nothing writes, until the call returns.
#[no_mangle]
pub(crate) unsafe extern "C" fn liteapi_unlock(lock: *const LiteLock) -> c_int {
    from_result(|| {
        // SAFETY: `lock` is null or points to a readable, aligned
        // `struct lite_lock` that stays valid and unwritten until this call
        // returns (this function's `# Safety` section), so until `lock_id`
        // returns.
        let id = unsafe { lock_id(lock) }?;
        node()?.cluster()?.locks.unlock(id)?;
        Ok(0)
    })
}

/// Sets the kernel callers' default priority; returns the previous one.
#[no_mangle]
pub(crate) extern "C" fn liteapi_set_priority(priority: c_uint) -> c_int {
    from_result(|| {
        let priority = Priority::from_raw(priority)?;
        let cluster = node()?.cluster()?;
        Ok(cluster.kernel_process.default_priority.set(priority).raw() as c_int)
    })
}

/// Copies `data` into `out`, which must have room for it.
fn deliver(out: &mut [u8], data: &[u8]) -> Result {
    out.get_mut(..data.len())
        .ok_or(crate::errno::EMSGSIZE())?
        .copy_from_slice(data);
    Ok(())
}

/// Opens `port` for messages of at most `max_size` bytes; the port belongs
/// to kernel callers.
///
/// # Safety
///
/// Unless `name_len` is 0, `name` must point to `name_len` readable bytes
/// (one buffer) that stay valid, and that nothing writes, until the call
/// returns.
#[no_mangle]
pub(crate) unsafe extern "C" fn liteapi_register_application(
    port: c_uint,
    max_size: u64,
    name: *const c_char,
    name_len: u64,
) -> c_int {
    from_result(|| {
        let cluster = node()?.cluster()?;
        // SAFETY: Unless `name_len` is 0, `name` points to `name_len`
        // readable bytes of one buffer that stay valid and unwritten until
        // this call returns (this function's `# Safety` section); the slice is
        // only used by `register_application` below, before then.
        let name = unsafe { kernel_slice(name.cast::<c_void>(), name_len) }?;
        cluster
            .rpc
            .register_application(&cluster.kernel_process, port, max_size, name)?;
        Ok(0)
    })
}

/// Closes a port registered by kernel callers.
#[no_mangle]
pub(crate) extern "C" fn liteapi_unregister_application(port: c_uint) -> c_int {
    from_result(|| {
        let cluster = node()?.cluster()?;
        cluster
            .rpc
            .unregister_application(cluster.kernel_process.tgid, port)?;
        Ok(0)
    })
}

/// Connects to `port` on `node_id`; returns the port's largest message size.
#[no_mangle]
pub(crate) extern "C" fn liteapi_query_port(node_id: c_uint, port: c_uint) -> c_long {
    from_result(|| {
        let cluster = node()?.cluster()?;
        Ok(cluster.rpc.query_port(NodeId::new(node_id), port)? as c_long)
    })
}

/// Calls `port_priority` on `node_id` with `size` bytes of `msg`; the reply
/// (at most `max_reply` bytes) goes to `reply`. Returns its length.
///
/// # Safety
///
/// Until the call returns, and unless the respective size is 0: `msg` must
/// point to `size` readable bytes (one buffer) that stay valid and that
/// nothing writes, and `reply` to `max_reply` writable bytes (one buffer)
/// that stay valid, that nothing else reads or writes, and that do not
/// overlap those of `msg`.
#[no_mangle]
pub(crate) unsafe extern "C" fn liteapi_send_reply_imm(
    node_id: c_uint,
    port_priority: c_uint,
    msg: *const c_void,
    size: u64,
    reply: *mut c_void,
    max_reply: u64,
) -> c_long {
    from_result(|| {
        let cluster = node()?.cluster()?;
        let target =
            Target::unpack(port_priority)?.with_default(&cluster.kernel_process.default_priority);
        // SAFETY: Unless `size` is 0, `msg` points to `size` readable bytes
        // of one buffer that stay valid and unwritten until this call
        // returns (this function's `# Safety` section); `message` is only
        // used in this call.
        let message = unsafe { kernel_slice(msg, size) }?;
        // SAFETY: Unless `max_reply` is 0, `reply` points to `max_reply`
        // writable bytes of one buffer that stay valid, and that nothing else
        // accesses, until this call returns; they do not overlap `message`
        // (this function's `# Safety` section). `out` is only used in this
        // call.
        let out = unsafe { kernel_slice_mut(reply, max_reply) }?;
        let answer = cluster.rpc.call(
            NodeId::new(node_id),
            &target,
            message.into(),
            max_reply,
            ToKernel,
        )?;
        deliver(out, &answer)?;
        Ok(answer.len() as c_long)
    })
}

/// Posts a call of `size` bytes of `msg` to `port_priority` on `node_id`
/// and returns its operation id: [`liteapi_rdma_asywait`] on it (or
/// [`liteapi_rdma_asyfence`]) waits for the reply, stores it into `reply`
/// (at most `max_reply` bytes) and returns its length.
///
/// # Safety
///
/// Unless `size` is 0, `msg` must point to `size` readable bytes (one
/// buffer) that stay valid, and that nothing writes, until the call returns.
/// Unless `max_reply` is 0, `reply` must point to `max_reply` writable bytes
/// (one buffer) that only LITE accesses until the operation is reaped, or
/// until this call returns if it fails.
#[no_mangle]
pub(crate) unsafe extern "C" fn liteapi_send_reply_imm_async(
    node_id: c_uint,
    port_priority: c_uint,
    msg: *const c_void,
    size: u64,
    reply: *mut c_void,
    max_reply: u64,
) -> c_long {
    from_result(|| {
        let cluster = node()?.cluster()?;
        let target =
            Target::unpack(port_priority)?.with_default(&cluster.kernel_process.default_priority);
        if target.nonblocking {
            return Err(EINVAL);
        }
        // SAFETY: Unless `size` is 0, `msg` points to `size` readable bytes
        // of one buffer that stay valid and unwritten until this call
        // returns (this function's `# Safety` section); `message` is only
        // used in this call.
        let message = unsafe { kernel_slice(msg, size) }?;
        let room = usize::try_from(max_reply).map_err(|_| EINVAL)?;
        // SAFETY: Unless `max_reply` is 0, `reply` points to `room` writable
        // bytes of one buffer that only LITE accesses until the operation is
        // reaped (when the buffer is dropped), or until this call returns if
        // it fails (dropping it), as `KernelBuffer::new` requires.
        let buffer = unsafe { KernelBuffer::new(reply.cast::<u8>(), room) }?;
        let id = cluster.async_io.submit_call(
            &cluster.kernel_process,
            AsyncBuffer::Kernel(buffer),
            || {
                cluster
                    .rpc
                    .call_async(NodeId::new(node_id), &target, message.into(), max_reply)
            },
        )?;
        c_long::try_from(id).map_err(|_| EINVAL)
    })
}

/// Sends `size` bytes of `msg` to `port_priority` on `node_id`, one way.
///
/// # Safety
///
/// Unless `size` is 0, `msg` must point to `size` readable bytes (one
/// buffer) that stay valid, and that nothing writes, until the call
/// returns.
#[no_mangle]
pub(crate) unsafe extern "C" fn liteapi_send(
    node_id: c_uint,
    port_priority: c_uint,
    msg: *const c_void,
    size: u64,
) -> c_int {
    from_result(|| {
        let cluster = node()?.cluster()?;
        let target =
            Target::unpack(port_priority)?.with_default(&cluster.kernel_process.default_priority);
        // SAFETY: Unless `size` is 0, `msg` points to `size` readable bytes
        // of one buffer that stay valid and unwritten until this call
        // returns (this function's `# Safety` section); `message` is only
        // used by `send_one_way` below, before then.
        let message = unsafe { kernel_slice(msg, size) }?;
        cluster
            .rpc
            .send_one_way(NodeId::new(node_id), &target, message.into())?;
        Ok(0)
    })
}

/// Takes the next message of `port` into `buf` (room `max_size`); stores
/// its descriptor (0 for one-way) in `*descriptor` and returns its length.
///
/// # Safety
///
/// Until the call returns: unless `max_size` is 0, `buf` must point to
/// `max_size` writable bytes (one buffer) that stay valid and that nothing
/// else reads or writes; `descriptor` must point to a writable, 8-byte
/// aligned `u64` that stays valid and that nothing else reads or writes.
#[no_mangle]
pub(crate) unsafe extern "C" fn liteapi_receive_message(
    port: c_uint,
    buf: *mut c_void,
    max_size: u64,
    descriptor: *mut u64,
    flags: c_uint,
) -> c_long {
    from_result(|| {
        let cluster = node()?.cluster()?;
        if descriptor.is_null() {
            return Err(EFAULT);
        }
        // SAFETY: Unless `max_size` is 0, `buf` points to `max_size` writable
        // bytes of one buffer that stay valid, and that nothing else
        // accesses, until this call returns (this function's `# Safety`
        // section); `out` is only used by `receive` below, before then.
        let out = unsafe { kernel_slice_mut(buf, max_size) }?;
        let process = &cluster.kernel_process;
        let (len, id) = cluster
            .rpc
            .receive(process, port, max_size, flags, |data| deliver(out, data))?;
        // SAFETY: `descriptor` is non-null (checked above) and, by this
        // function's `# Safety` section, points to a writable, aligned `u64`
        // that is still valid and accessed by nothing else; `out`, which may
        // cover it, is no longer used.
        unsafe { descriptor.write(id) };
        Ok(len as c_long)
    })
}

/// Answers `descriptor` with `size` bytes of `buf`.
///
/// # Safety
///
/// Unless `size` is 0, `buf` must point to `size` readable bytes (one
/// buffer) that stay valid, and that nothing writes, until the call
/// returns.
#[no_mangle]
pub(crate) unsafe extern "C" fn liteapi_reply_message(
    buf: *const c_void,
    size: u64,
    descriptor: u64,
) -> c_int {
    from_result(|| {
        let cluster = node()?.cluster()?;
        // SAFETY: Unless `size` is 0, `buf` points to `size` readable bytes
        // of one buffer that stay valid and unwritten until this call
        // returns (this function's `# Safety` section); the slice is only
        // used by `Rpc::reply` below, before then.
        let reply = unsafe { kernel_slice(buf, size) }?;
        cluster
            .rpc
            .reply(&cluster.kernel_process, descriptor, reply.into())?;
        Ok(0)
    })
}

/// Answers `descriptor` with `size` bytes of `buf`, then waits for the next
/// message of `port` as [`liteapi_receive_message`] does.
///
/// # Safety
///
/// As for [`liteapi_reply_message`] (`buf`, `size`) and for
/// [`liteapi_receive_message`] (`recv_buf`, `max_size`, `recv_descriptor`).
#[no_mangle]
pub(crate) unsafe extern "C" fn liteapi_reply_and_receive_message(
    buf: *const c_void,
    size: u64,
    descriptor: u64,
    port: c_uint,
    recv_buf: *mut c_void,
    max_size: u64,
    recv_descriptor: *mut u64,
) -> c_long {
    // Nothing is answered for a call that could not receive.
    if recv_descriptor.is_null() {
        return EFAULT.to_errno().into();
    }
    // SAFETY: `buf` and `size` are as this function's `# Safety` section
    // requires, which is what `liteapi_reply_message` requires.
    let replied = unsafe { liteapi_reply_message(buf, size, descriptor) };
    if replied != 0 {
        return replied.into();
    }
    // SAFETY: `recv_buf`, `max_size` and `recv_descriptor` are as this
    // function's `# Safety` section requires, which is what
    // `liteapi_receive_message` requires.
    unsafe { liteapi_receive_message(port, recv_buf, max_size, recv_descriptor, 0) }
}

/// Calls `port_priority` on every node of `nodes[..count]` with `size`
/// bytes of `msg`; reply `i` goes to `replies + i * max_reply` and its
/// length (or negative errno) to `lengths[i]`. Returns how many replied.
///
/// # Safety
///
/// Until the call returns, each of these must stay valid:
///
/// - `nodes` must point to an array of `count` readable `unsigned int`s
///   that nothing writes;
/// - `lengths` must point to an array of `count` writable `s64`s that
///   nothing else reads or writes;
/// - unless `size` is 0, `msg` must point to `size` readable bytes (one
///   buffer) that nothing writes;
/// - unless `count * max_reply` is 0, `replies` must point to
///   `count * max_reply` writable bytes (one buffer) that nothing else reads
///   or writes;
///
/// and the memory of `lengths` and of `replies` must not overlap each other
/// or that of `nodes` or `msg`.
#[no_mangle]
pub(crate) unsafe extern "C" fn liteapi_send_reply_imm_multicast(
    count: c_uint,
    nodes: *const c_uint,
    port_priority: c_uint,
    msg: *const c_void,
    size: u64,
    replies: *mut c_void,
    max_reply: u64,
    lengths: *mut i64,
) -> c_int {
    from_result(|| {
        let cluster = node()?.cluster()?;
        let target =
            Target::unpack(port_priority)?.with_default(&cluster.kernel_process.default_priority);
        let count = count as usize;
        if count == 0 || count > crate::internal::core::limits::MAX_NODES {
            return Err(EINVAL);
        }
        if nodes.is_null() || lengths.is_null() {
            return Err(EFAULT);
        }
        // SAFETY: `nodes` is non-null (checked above), so by this function's
        // `# Safety` section it points to an array (aligned, one allocation)
        // of `count` readable `c_uint`s that stays valid and unwritten until
        // this call returns; `count <= MAX_NODES` (checked above) keeps its
        // size far below `isize::MAX`. The slice is only used in this call.
        let nodes = unsafe { core::slice::from_raw_parts(nodes, count) };
        // SAFETY: `lengths` is non-null (checked above), so by this
        // function's `# Safety` section it points to an array (aligned, one
        // allocation) of `count` writable `i64`s, which writable kernel memory
        // also makes readable, that stays valid until this call returns and
        // that nothing else accesses, not even through `nodes`, `msg` or
        // `replies`; `count <= MAX_NODES`. The slice is only used in this
        // call.
        let lengths = unsafe { core::slice::from_raw_parts_mut(lengths, count) };
        // SAFETY: Unless `size` is 0, `msg` points to `size` readable bytes
        // of one buffer that stay valid and unwritten until this call
        // returns (this function's `# Safety` section); `message` is only
        // used in this call.
        let message = unsafe { kernel_slice(msg, size) }?;
        let total = (count as u64).checked_mul(max_reply).ok_or(EINVAL)?;
        // SAFETY: `total` is `count * max_reply`. Unless it is 0, `replies`
        // points to `total` writable bytes of one buffer that stay valid,
        // and that nothing else accesses, until this call returns; they do
        // not overlap `nodes`, `lengths` or `message` (this function's
        // `# Safety` section). `out` is only used in this call.
        let out = unsafe { kernel_slice_mut(replies, total) }?;
        let results = cluster.rpc.multicast(
            nodes.iter().map(|&n| NodeId::new(n)),
            &target,
            message.into(),
            max_reply,
        )?;
        let mut replied = 0;
        for (i, result) in results.iter().enumerate() {
            let room = max_reply as usize;
            lengths[i] = match result {
                Ok(reply) => match deliver(&mut out[i * room..(i + 1) * room], reply) {
                    Ok(()) => {
                        replied += 1;
                        reply.len() as i64
                    }
                    Err(e) => i64::from(e.to_errno()),
                },
                Err(e) => i64::from(e.to_errno()),
            };
        }
        Ok(replied)
    })
}
