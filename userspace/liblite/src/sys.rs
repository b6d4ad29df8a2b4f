//! Raw LITE system calls.
//!
//! One function per system call, with the constants their arguments use.
//! The numbers and constants mirror `include/uapi/linux/lite.h`; a test
//! checks that they stay in step.
//!
//! Every function returns the raw result: a non-negative value on success
//! or a negative errno on failure, exactly as the kernel reports it. The C
//! library's `syscall()` turns a failure into `-1` plus `errno`; these
//! wrappers undo that so the caller sees the kernel's value.
//!
//! Functions that hand the kernel a user pointer are `unsafe`. The kernel
//! validates every pointer and fails with `-EFAULT` when it is not mapped,
//! which is why the tests may deliberately pass bogus addresses; the danger
//! is a pointer that *is* mapped but to memory the caller does not own.

use libc::{c_char, c_int, c_long, c_uint, c_ulong, c_void};

/// `lite_join`: join a cluster through its manager.
pub const SYS_LITE_JOIN: c_long = 548;
/// `lite_get_node_id`: this node's id.
pub const SYS_LITE_GET_NODE_ID: c_long = 549;
/// `lite_get_total_node`: number of connected nodes, this one included.
pub const SYS_LITE_GET_TOTAL_NODE: c_long = 550;
/// `lite_alloc_remote`: allocate an LMR on a node.
pub const SYS_LITE_ALLOC_REMOTE: c_long = 551;
/// `lite_rdma_write`: copy user memory into an LMR.
pub const SYS_LITE_RDMA_WRITE: c_long = 552;
/// `lite_rdma_read`: copy an LMR into user memory.
pub const SYS_LITE_RDMA_READ: c_long = 553;
/// `lite_free`: release an LMR.
pub const SYS_LITE_FREE: c_long = 554;
/// `lite_dist_barrier`: wait until a number of nodes reach the barrier.
pub const SYS_LITE_DIST_BARRIER: c_long = 555;

/// Target node for [`alloc_remote`] that spreads chunks over every other node.
pub const NODE_SPREAD: u32 = 0;

/// [`alloc_remote`] flag: the LMR is used for atomics (its size must be 8).
pub const ALLOC_ATOMIC: u32 = 0x1;

/// Data operation priority: no preference.
pub const PRIORITY_NONE: u32 = 0;
/// Data operation priority: latency sensitive.
pub const PRIORITY_HIGH: u32 = 1;
/// Data operation priority: background traffic.
pub const PRIORITY_LOW: u32 = 2;

/// Size of one LMR chunk; larger LMRs span several chunks.
pub const CHUNK_SIZE: u64 = 4 << 20;

/// Largest LMR one call may allocate.
pub const MAX_LMR_SIZE: u64 = 1 << 40;

/// Most nodes one cluster may hold; valid node ids are below this.
pub const MAX_NODES: u32 = 64;

/// Longest cluster manager address accepted by [`join`], NUL included.
pub const MAX_IP_LEN: usize = 16;

/// TCP port the cluster manager listens on by default.
pub const CM_DEFAULT_PORT: u16 = 18500;

/// Maps the C library convention (`-1` and `errno`) back to the kernel's
/// negative errno. `read_errno` is only called when the call failed, so
/// that a stale `errno` is never consulted.
fn kernel_result(ret: c_long, read_errno: impl FnOnce() -> c_int) -> c_long {
    if ret == -1 {
        -c_long::from(read_errno())
    } else {
        ret
    }
}

/// The calling thread's `errno`; `EIO` in the impossible case that the C
/// library reports a failure without one.
fn current_errno() -> c_int {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// Issues one system call and returns the kernel's raw result.
///
/// # Safety
///
/// Any pointer among `args` must satisfy the contract of system call `nr`.
unsafe fn lite_syscall(nr: c_long, args: [c_ulong; 6]) -> c_long {
    // Every argument travels as a full register-width value: `syscall()` is
    // variadic and reads six longs, so narrower types would leave the upper
    // halves of the registers unspecified.
    let ret = unsafe { libc::syscall(nr, args[0], args[1], args[2], args[3], args[4], args[5]) };
    kernel_result(ret, current_errno)
}

/// Joins the cluster whose manager listens on `cm_ip:cm_port`, using port
/// `ib_port` of the node's RDMA device. Returns the node id (>= 1).
///
/// # Safety
///
/// `cm_ip` must point to a NUL-terminated string that stays valid for the
/// duration of the call, or be an address the kernel rejects with
/// `-EFAULT` (null or unmapped).
pub unsafe fn join(cm_ip: *const c_char, cm_port: c_uint, ib_port: c_uint) -> c_long {
    unsafe {
        lite_syscall(
            SYS_LITE_JOIN,
            [cm_ip as c_ulong, cm_port.into(), ib_port.into(), 0, 0, 0],
        )
    }
}

/// Returns this node's id.
pub fn get_node_id() -> c_long {
    // SAFETY: the call takes no pointers.
    unsafe { lite_syscall(SYS_LITE_GET_NODE_ID, [0; 6]) }
}

/// Returns the number of connected nodes, this one included.
pub fn get_total_node() -> c_long {
    // SAFETY: the call takes no pointers.
    unsafe { lite_syscall(SYS_LITE_GET_TOTAL_NODE, [0; 6]) }
}

/// Allocates an LMR of `size` bytes on `node` ([`NODE_SPREAD`] spreads it
/// over every other node) and returns its handle (> 0).
pub fn alloc_remote(node: c_uint, size: u64, flags: c_uint, password: u64) -> c_long {
    // SAFETY: the call takes no pointers.
    unsafe {
        lite_syscall(
            SYS_LITE_ALLOC_REMOTE,
            [node.into(), size, flags.into(), password, 0, 0],
        )
    }
}

/// Copies `size` bytes from `buf` into the LMR `handle` at `offset`.
/// Returns 0 once the data has reached the remote memory.
///
/// # Safety
///
/// `buf` must be valid for reads of `size` bytes for the duration of the
/// call, or be an address the kernel rejects with `-EFAULT`.
pub unsafe fn rdma_write(
    handle: u64,
    buf: *const c_void,
    size: u64,
    offset: u64,
    priority: c_uint,
    password: u64,
) -> c_long {
    unsafe {
        lite_syscall(
            SYS_LITE_RDMA_WRITE,
            [
                handle,
                buf as c_ulong,
                size,
                offset,
                priority.into(),
                password,
            ],
        )
    }
}

/// Copies `size` bytes of the LMR `handle` starting at `offset` into `buf`.
/// Returns 0 once the data is in `buf`.
///
/// # Safety
///
/// `buf` must be valid for writes of `size` bytes and not accessed by
/// anything else during the call, or be an address the kernel rejects with
/// `-EFAULT`. The kernel writes through it as if it were a `&mut [u8]`.
pub unsafe fn rdma_read(
    handle: u64,
    buf: *mut c_void,
    size: u64,
    offset: u64,
    priority: c_uint,
    password: u64,
) -> c_long {
    unsafe {
        lite_syscall(
            SYS_LITE_RDMA_READ,
            [
                handle,
                buf as c_ulong,
                size,
                offset,
                priority.into(),
                password,
            ],
        )
    }
}

/// Releases the LMR `handle` and the memory behind it. Returns 0.
pub fn free(handle: u64) -> c_long {
    // SAFETY: the call takes no pointers.
    unsafe { lite_syscall(SYS_LITE_FREE, [handle, 0, 0, 0, 0, 0]) }
}

/// Blocks until `num` nodes, this one included, have entered the same
/// barrier round. Returns 0.
pub fn dist_barrier(num: c_uint) -> c_long {
    // SAFETY: the call takes no pointers.
    unsafe { lite_syscall(SYS_LITE_DIST_BARRIER, [num.into(), 0, 0, 0, 0, 0]) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn success_values_pass_through_without_reading_errno() {
        for value in [0, 1, 42, c_long::MAX] {
            assert_eq!(
                kernel_result(value, || panic!("errno read on success")),
                value
            );
        }
    }

    #[test]
    fn minus_one_becomes_negative_errno() {
        assert_eq!(
            kernel_result(-1, || libc::ENOTCONN),
            -c_long::from(libc::ENOTCONN)
        );
        assert_eq!(kernel_result(-1, || libc::EFAULT), -14);
    }

    #[test]
    fn real_failing_syscall_reports_kernel_errno() {
        // close(-1) fails with EBADF on every Linux kernel.
        let ret = unsafe { lite_syscall(libc::SYS_close, [c_ulong::MAX, 0, 0, 0, 0, 0]) };
        assert_eq!(ret, -c_long::from(libc::EBADF));
    }

    #[test]
    fn real_successful_syscall_returns_its_value() {
        let pid = unsafe { lite_syscall(libc::SYS_getpid, [0; 6]) };
        assert_eq!(pid, c_long::from(std::process::id()));
    }
}
