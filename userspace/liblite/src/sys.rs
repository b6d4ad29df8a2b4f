//! Raw LITE system calls.
//!
//! One function per system call, with the constants their arguments use.
//! The numbers, constants and structures are generated from
//! `include/uapi/linux/lite.h` when the crate is built.
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

/// The ABI as `include/uapi/linux/lite.h` declares it, generated from the
/// header at build time (`build.rs`). The names below give it Rust names
/// and types; the values and layouts come from here only.
#[allow(
    dead_code,
    missing_docs,
    non_camel_case_types,
    non_upper_case_globals,
    clippy::all,
    clippy::pedantic
)]
mod uapi {
    include!(concat!(env!("OUT_DIR"), "/uapi.rs"));
}

// The narrowing casts below keep every value.
const _: () = assert!(uapi::LITE_CM_DEFAULT_PORT <= u16::MAX as u32);

/// `lite_join`: join a cluster through its manager.
pub const SYS_LITE_JOIN: c_long = uapi::__NR_lite_join as c_long;
/// `lite_get_node_id`: this node's id.
pub const SYS_LITE_GET_NODE_ID: c_long = uapi::__NR_lite_get_node_id as c_long;
/// `lite_get_total_node`: number of connected nodes, this one included.
pub const SYS_LITE_GET_TOTAL_NODE: c_long = uapi::__NR_lite_get_total_node as c_long;
/// `lite_alloc_remote`: allocate an LMR on a node.
pub const SYS_LITE_ALLOC_REMOTE: c_long = uapi::__NR_lite_alloc_remote as c_long;
/// `lite_rdma_write`: copy user memory into an LMR.
pub const SYS_LITE_RDMA_WRITE: c_long = uapi::__NR_lite_rdma_write as c_long;
/// `lite_rdma_read`: copy an LMR into user memory.
pub const SYS_LITE_RDMA_READ: c_long = uapi::__NR_lite_rdma_read as c_long;
/// `lite_free`: release an LMR.
pub const SYS_LITE_FREE: c_long = uapi::__NR_lite_free as c_long;
/// `lite_dist_barrier`: wait until a number of nodes reach the barrier.
pub const SYS_LITE_DIST_BARRIER: c_long = uapi::__NR_lite_dist_barrier as c_long;
/// `lite_remote_memset`: set a range of an LMR to one byte value.
pub const SYS_LITE_REMOTE_MEMSET: c_long = uapi::__NR_lite_remote_memset as c_long;
/// `lite_memcpy`: copy between LMRs (overlap unspecified).
pub const SYS_LITE_MEMCPY: c_long = uapi::__NR_lite_memcpy as c_long;
/// `lite_memmove`: copy between LMRs, correct for overlapping ranges.
pub const SYS_LITE_MEMMOVE: c_long = uapi::__NR_lite_memmove as c_long;
/// `lite_wrap_alloc`: create an LMR holding a copy of user data and publish it.
pub const SYS_LITE_WRAP_ALLOC: c_long = uapi::__NR_lite_wrap_alloc as c_long;
/// `lite_add_ask_mr_table`: publish an LMR under a name.
pub const SYS_LITE_ADD_ASK_MR_TABLE: c_long = uapi::__NR_lite_add_ask_mr_table as c_long;
/// `lite_ask_lmr`: map an LMR published under a name.
pub const SYS_LITE_ASK_LMR: c_long = uapi::__NR_lite_ask_lmr as c_long;
/// `lite_umap_lmr`: drop a mapping made by `lite_ask_lmr`.
pub const SYS_LITE_UMAP_LMR: c_long = uapi::__NR_lite_umap_lmr as c_long;
/// `lite_register_lmr`: make user memory an LMR.
pub const SYS_LITE_REGISTER_LMR: c_long = uapi::__NR_lite_register_lmr as c_long;
/// `lite_deregister_lmr`: revoke a registered LMR and unpin its pages.
pub const SYS_LITE_DEREGISTER_LMR: c_long = uapi::__NR_lite_deregister_lmr as c_long;
/// `lite_rdma_write_async`: start a write without waiting for it.
pub const SYS_LITE_RDMA_WRITE_ASYNC: c_long = uapi::__NR_lite_rdma_write_async as c_long;
/// `lite_rdma_read_async`: start a read without waiting for it.
pub const SYS_LITE_RDMA_READ_ASYNC: c_long = uapi::__NR_lite_rdma_read_async as c_long;
/// `lite_async_wait`: reap one asynchronous operation.
pub const SYS_LITE_ASYNC_WAIT: c_long = uapi::__NR_lite_async_wait as c_long;
/// `lite_fence`: reap every outstanding asynchronous operation.
pub const SYS_LITE_FENCE: c_long = uapi::__NR_lite_fence as c_long;
/// `lite_get_stats`: copy this node's counters.
pub const SYS_LITE_GET_STATS: c_long = uapi::__NR_lite_get_stats as c_long;
/// `lite_register_application`: open an RPC port.
pub const SYS_LITE_REGISTER_APPLICATION: c_long = uapi::__NR_lite_register_application as c_long;
/// `lite_unregister_application`: close an RPC port.
pub const SYS_LITE_UNREGISTER_APPLICATION: c_long =
    uapi::__NR_lite_unregister_application as c_long;
/// `lite_query_port`: connect to a port on a node and learn its message size.
pub const SYS_LITE_QUERY_PORT: c_long = uapi::__NR_lite_query_port as c_long;
/// `lite_send_reply_imm`: blocking RPC.
pub const SYS_LITE_SEND_REPLY_IMM: c_long = uapi::__NR_lite_send_reply_imm as c_long;
/// `lite_send_reply_imm_async`: post an RPC call, reap its reply later.
pub const SYS_LITE_SEND_REPLY_IMM_ASYNC: c_long = uapi::__NR_lite_send_reply_imm_async as c_long;
/// `lite_send`: one-way message.
pub const SYS_LITE_SEND: c_long = uapi::__NR_lite_send as c_long;
/// `lite_receive_message`: take the next message of a port.
pub const SYS_LITE_RECEIVE_MESSAGE: c_long = uapi::__NR_lite_receive_message as c_long;
/// `lite_reply_message`: answer a received request.
pub const SYS_LITE_REPLY_MESSAGE: c_long = uapi::__NR_lite_reply_message as c_long;
/// `lite_reply_and_receive_message`: answer, then take the next message.
pub const SYS_LITE_REPLY_AND_RECEIVE_MESSAGE: c_long =
    uapi::__NR_lite_reply_and_receive_message as c_long;
/// `lite_send_reply_multicast`: the same RPC to several nodes at once.
pub const SYS_LITE_SEND_REPLY_MULTICAST: c_long = uapi::__NR_lite_send_reply_multicast as c_long;
/// `lite_fetch_add`: atomically add to an 8-byte LMR.
pub const SYS_LITE_FETCH_ADD: c_long = uapi::__NR_lite_fetch_add as c_long;
/// `lite_compare_swp`: atomically compare and swap an 8-byte LMR.
pub const SYS_LITE_COMPARE_SWP: c_long = uapi::__NR_lite_compare_swp as c_long;
/// `lite_create_lock`: create a distributed lock kept by a node.
pub const SYS_LITE_CREATE_LOCK: c_long = uapi::__NR_lite_create_lock as c_long;
/// `lite_ask_lock`: look up an existing distributed lock.
pub const SYS_LITE_ASK_LOCK: c_long = uapi::__NR_lite_ask_lock as c_long;
/// `lite_lock`: acquire a distributed lock.
pub const SYS_LITE_LOCK: c_long = uapi::__NR_lite_lock as c_long;
/// `lite_unlock`: release a distributed lock.
pub const SYS_LITE_UNLOCK: c_long = uapi::__NR_lite_unlock as c_long;
/// `lite_set_priority`: set the calling process's default priority.
pub const SYS_LITE_SET_PRIORITY: c_long = uapi::__NR_lite_set_priority as c_long;
/// `lite_leave`: leave the cluster gracefully.
pub const SYS_LITE_LEAVE: c_long = uapi::__NR_lite_leave as c_long;
/// `lite_dsm_open`: open a LITE-DSM region, a descriptor to map.
pub const SYS_LITE_DSM_OPEN: c_long = uapi::__NR_lite_dsm_open as c_long;

/// Most distributed locks one home node can keep ([`create_lock`] fails
/// with `-ENOSPC` beyond).
pub const MAX_LOCKS: u32 = uapi::LITE_MAX_LOCKS;

/// Number of RPC ports per node; ports are `0..MAX_PORTS`.
pub const MAX_PORTS: u32 = uapi::LITE_MAX_PORTS;
/// Largest message a port can accept ([`register_application`]'s `max_size`).
pub const MAX_MESSAGE_SIZE: u64 = uapi::LITE_MAX_MESSAGE_SIZE as u64;
/// Longest port name, in bytes.
pub const MAX_PORT_NAME: usize = uapi::LITE_MAX_PORT_NAME as usize;
/// How long [`send_reply_imm`] waits for a reply before `-ETIMEDOUT`.
pub const RPC_TIMEOUT_MS: u32 = uapi::LITE_RPC_TIMEOUT_MS;
/// [`send`] flag, or'ed into `port_priority`: fail with `-EAGAIN` instead
/// of blocking while the server's ring is full.
pub const SEND_NONBLOCK: u32 = uapi::LITE_SEND_NONBLOCK;
/// [`receive_message`] flag: fail with `-EAGAIN` instead of blocking while
/// the port is empty.
pub const RECV_NONBLOCK: u32 = uapi::LITE_RECV_NONBLOCK;

/// [`dsm_open`] flag: create the region on this node if it does not exist.
pub const DSM_CREATE: u32 = uapi::LITE_DSM_CREATE;

/// [`leave`] flag: leave even if a chunk held for another node could not
/// move (its data is lost) instead of failing with `-ENOSPC`.
pub const LEAVE_FORCE: u32 = uapi::LITE_LEAVE_FORCE;

/// Handle permission: read (sync and async reads, source of memcpy/memmove).
pub const PERM_READ: u64 = uapi::LITE_PERM_READ as u64;
/// Handle permission: write (sync and async writes, memset, destination of
/// memcpy/memmove).
pub const PERM_WRITE: u64 = uapi::LITE_PERM_WRITE as u64;
/// Handle permission: publish the LMR with [`add_ask_mr_table`].
pub const PERM_SHARE: u64 = uapi::LITE_PERM_SHARE as u64;
/// Handle permission: free or deregister the LMR (only its creator has it).
pub const PERM_ADMIN: u64 = uapi::LITE_PERM_ADMIN as u64;
/// Handle permission: atomic operations on 8-byte LMRs.
pub const PERM_ATOMIC: u64 = uapi::LITE_PERM_ATOMIC as u64;

/// [`async_wait`] flag: fail with `-EAGAIN` instead of blocking.
pub const ASYNC_NOWAIT: u32 = uapi::LITE_ASYNC_NOWAIT;

/// Most asynchronous operations one process may have outstanding.
pub const MAX_ASYNC_OPS: u32 = uapi::LITE_MAX_ASYNC_OPS;

/// Most [`send_reply_imm_async`] calls one process may have unreaped.
pub const MAX_ASYNC_CALLS: u32 = uapi::LITE_MAX_ASYNC_CALLS;

/// Largest single asynchronous transfer.
pub const MAX_ASYNC_SIZE: u64 = uapi::LITE_MAX_ASYNC_SIZE as u64;

/// Largest region [`register_lmr`] accepts.
pub const MAX_REGISTER_SIZE: u64 = uapi::LITE_MAX_REGISTER_SIZE as u64;

/// Target node for [`alloc_remote`] that spreads chunks over every other node.
pub const NODE_SPREAD: u32 = uapi::LITE_NODE_SPREAD;

/// [`alloc_remote`] flag: the LMR is used for atomics (its size must be 8).
pub const ALLOC_ATOMIC: u32 = uapi::LITE_ALLOC_ATOMIC;

/// Data operation priority: no preference.
pub const PRIORITY_NONE: u32 = uapi::LITE_PRIORITY_NONE;
/// Data operation priority: latency sensitive.
pub const PRIORITY_HIGH: u32 = uapi::LITE_PRIORITY_HIGH;
/// Data operation priority: background traffic.
pub const PRIORITY_LOW: u32 = uapi::LITE_PRIORITY_LOW;

/// Size of one LMR chunk; larger LMRs span several chunks.
pub const CHUNK_SIZE: u64 = uapi::LITE_CHUNK_SIZE as u64;

/// Largest LMR one call may allocate.
pub const MAX_LMR_SIZE: u64 = uapi::LITE_MAX_LMR_SIZE;

/// Most nodes one cluster may hold; valid node ids are below this.
pub const MAX_NODES: u32 = uapi::LITE_MAX_NODES;

/// Longest cluster manager address accepted by [`join`], NUL included.
pub const MAX_IP_LEN: usize = uapi::LITE_MAX_IP_LEN as usize;

/// TCP port the cluster manager listens on by default.
pub const CM_DEFAULT_PORT: u16 = uapi::LITE_CM_DEFAULT_PORT as u16;

/// Node counters returned by [`get_stats`]; `struct lite_stats` in C.
///
/// Fields are only ever appended, so a shorter copy of an older layout is a
/// prefix of this one.
pub type LiteStats = uapi::lite_stats;

/// A distributed lock: the node that keeps it and its number there;
/// `struct lite_lock` in C. Filled in by [`create_lock`] and [`ask_lock`].
pub type LiteLock = uapi::lite_lock;

/// The `port_priority` argument of the sends: `LITE_PORT_PRIORITY(port,
/// priority)` in C. `port` must be below 2^16 (any valid port is), or it
/// spills into the priority bits.
pub const fn port_priority(port: u32, priority: u32) -> u32 {
    port | (priority << 16)
}

/// The receive half of [`reply_and_receive_message`]; `struct lite_receive`
/// in C.
pub type LiteReceive = uapi::lite_receive;

/// Arguments of [`send_reply_multicast`]; `struct lite_multicast` in C.
/// The addresses are user pointers carried as integers.
pub type LiteMulticast = uapi::lite_multicast;

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
/// A node that left (or rebooted) gets its earlier id back, as a new
/// incarnation; `-EADDRINUSE` while the manager still counts the earlier
/// incarnation as alive (try again once it declared it dead), `-EAGAIN`
/// while a manager that just started waits for the members of its cluster
/// to come back (try again a few seconds later). `-EPERM` if the caller
/// lacks `CAP_NET_ADMIN`, checked before anything else.
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

/// Leaves the cluster gracefully. Returns 0.
///
/// New calls on this node get `-ENOTCONN` from the start of the call on;
/// calls under way finish. The owners of the chunks this node holds for
/// other nodes' LMRs first move them, with their bytes, to a third node;
/// then everything this node's processes hold is released, and the
/// cluster manager tells the other nodes, which count this node as gone.
/// A later [`join`] makes the node a member again with the same id.
///
/// `flags` is 0 or [`LEAVE_FORCE`]. `-ENOTCONN` if the node is not a
/// member, `-EALREADY` while a join or leave is under way, `-ENOSPC` if a
/// chunk could not move (no third node, or its LMR is mapped by other
/// nodes) and [`LEAVE_FORCE`] was not given (the node stays a member),
/// `-EINVAL` for unknown flags, `-EPERM` if the caller lacks
/// `CAP_NET_ADMIN` (checked before anything else).
pub fn leave(flags: c_uint) -> c_long {
    // SAFETY: the call takes no pointers.
    unsafe { lite_syscall(SYS_LITE_LEAVE, [flags.into(), 0, 0, 0, 0, 0]) }
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
/// over every other node) and returns its handle (> 0). `-EDQUOT` if the
/// caller's `remote_memory` or `lmrs` quota, or a serving node's limit for
/// this node, would be exceeded.
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

/// Sets `size` bytes of the LMR `handle` at `offset` to `byte` (0..=255,
/// else `-EINVAL`). Needs WRITE. Returns 0.
pub fn remote_memset(handle: u64, offset: u64, size: u64, byte: c_uint) -> c_long {
    // SAFETY: the call takes no pointers.
    unsafe {
        lite_syscall(
            SYS_LITE_REMOTE_MEMSET,
            [handle, offset, size, byte.into(), 0, 0],
        )
    }
}

/// Copies `size` bytes from `src_handle` at `src_offset` to `dst_handle`
/// at `dst_offset` (the same or different LMRs, on any nodes). The result
/// is unspecified for overlapping ranges; use [`memmove`] for those. The
/// source needs READ, the destination WRITE. Returns 0.
pub fn memcpy(
    src_handle: u64,
    src_offset: u64,
    dst_handle: u64,
    dst_offset: u64,
    size: u64,
) -> c_long {
    // SAFETY: the call takes no pointers.
    unsafe {
        lite_syscall(
            SYS_LITE_MEMCPY,
            [src_handle, src_offset, dst_handle, dst_offset, size, 0],
        )
    }
}

/// Like [`memcpy`], but correct for overlapping ranges. Returns 0.
pub fn memmove(
    src_handle: u64,
    src_offset: u64,
    dst_handle: u64,
    dst_offset: u64,
    size: u64,
) -> c_long {
    // SAFETY: the call takes no pointers.
    unsafe {
        lite_syscall(
            SYS_LITE_MEMMOVE,
            [src_handle, src_offset, dst_handle, dst_offset, size, 0],
        )
    }
}

/// Creates an LMR on this node holding a copy of `size` bytes at `data`
/// and publishes it under `name` with READ | WRITE | SHARE. Returns its
/// handle (> 0); `-EEXIST` if `name` is already published on this node;
/// `-EDQUOT` if the caller's `remote_memory`, `lmrs` or `names` quota
/// would be exceeded.
///
/// # Safety
///
/// `data` must be valid for reads of `size` bytes for the duration of the
/// call, or be an address the kernel rejects with `-EFAULT`.
pub unsafe fn wrap_alloc(data: *const c_void, size: u64, name: u64, password: u64) -> c_long {
    unsafe {
        lite_syscall(
            SYS_LITE_WRAP_ALLOC,
            [data as c_ulong, size, name, password, 0, 0],
        )
    }
}

/// Publishes the LMR `handle` under `name` on this node, granting at most
/// `permission` (READ | WRITE | SHARE | ATOMIC; ADMIN is never granted).
/// Needs SHARE and the handle's `password`; only LMRs created on this node
/// can be published (`-EINVAL` for a mapping). `-EEXIST` if the name is
/// taken; `-EDQUOT` if the caller's `names` quota would be exceeded.
/// Returns 0.
pub fn add_ask_mr_table(name: u64, handle: u64, permission: u64, password: u64) -> c_long {
    // SAFETY: the call takes no pointers.
    unsafe {
        lite_syscall(
            SYS_LITE_ADD_ASK_MR_TABLE,
            [name, handle, permission, password, 0, 0],
        )
    }
}

/// Maps the LMR published under `name` on `node` (this node included) and
/// returns a new handle (> 0) whose permissions are `permission` restricted
/// to what the name grants. `password` must be the one the name was
/// published with and becomes the new handle's password. `-ENOENT` no such
/// name; `-EACCES` wrong password; `-EPERM` nothing requested is granted.
pub fn ask_lmr(node: c_uint, name: u64, permission: u64, password: u64) -> c_long {
    // SAFETY: the call takes no pointers.
    unsafe {
        lite_syscall(
            SYS_LITE_ASK_LMR,
            [node.into(), name, permission, password, 0, 0],
        )
    }
}

/// Drops a mapping made by [`ask_lmr`], also after it was revoked. The
/// handle is gone afterwards. `-EINVAL` for a handle that is not a
/// mapping. Returns 0.
pub fn umap_lmr(handle: u64) -> c_long {
    // SAFETY: the call takes no pointers.
    unsafe { lite_syscall(SYS_LITE_UMAP_LMR, [handle, 0, 0, 0, 0, 0]) }
}

/// Makes `size` bytes of this process's memory at `buf` (at most
/// [`MAX_REGISTER_SIZE`]) an LMR that other nodes can map once published.
/// `permission` (any of READ | WRITE | SHARE | ATOMIC) is what the LMR
/// allows; the handle also gets ADMIN. The pages stay pinned until
/// [`deregister_lmr`]. Returns the handle (> 0). `-EDQUOT` if the caller's
/// `pinned_memory` or `lmrs` quota would be exceeded; `-ENOMEM` if the
/// pages would exceed the process's `RLIMIT_MEMLOCK` (unless it has
/// `CAP_IPC_LOCK`).
///
/// # Safety
///
/// `buf` must be valid for reads and writes of `size` bytes until the
/// handle is deregistered (or the process exits), and nothing may rely on
/// its contents staying unchanged in the meantime: remote nodes may read
/// and write it at any time. Alternatively it may be an address the
/// kernel rejects with `-EFAULT`.
pub unsafe fn register_lmr(buf: *mut c_void, size: u64, permission: u64, password: u64) -> c_long {
    unsafe {
        lite_syscall(
            SYS_LITE_REGISTER_LMR,
            [buf as c_ulong, size, permission, password, 0, 0],
        )
    }
}

/// Revokes the LMR `handle`: every mapping of it fails with `-EKEYREVOKED`
/// from then on; operations under way finish first, then the pages are
/// unpinned. Needs ADMIN. For allocated LMRs it is [`free`]. Returns 0.
pub fn deregister_lmr(handle: u64) -> c_long {
    // SAFETY: the call takes no pointers.
    unsafe { lite_syscall(SYS_LITE_DEREGISTER_LMR, [handle, 0, 0, 0, 0, 0]) }
}

/// Starts copying `size` bytes (at most [`MAX_ASYNC_SIZE`]) from `buf`
/// into the LMR `handle` at `offset` and returns the operation id (> 0)
/// without waiting. The data is taken from `buf` before the call returns.
/// Blocks while [`MAX_ASYNC_OPS`] operations are outstanding. Reap the id
/// with [`async_wait`] or [`fence`].
///
/// # Safety
///
/// `buf` must be valid for reads of `size` bytes for the duration of the
/// call, or be an address the kernel rejects with `-EFAULT`.
pub unsafe fn rdma_write_async(
    handle: u64,
    buf: *const c_void,
    size: u64,
    offset: u64,
    priority: c_uint,
    password: u64,
) -> c_long {
    unsafe {
        lite_syscall(
            SYS_LITE_RDMA_WRITE_ASYNC,
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

/// Starts copying `size` bytes (at most [`MAX_ASYNC_SIZE`]) of the LMR
/// `handle` at `offset` into `buf` and returns the operation id (> 0)
/// without waiting. The data is stored into `buf` when the operation is
/// reaped by [`async_wait`] or [`fence`]. Blocks while [`MAX_ASYNC_OPS`]
/// operations are outstanding.
///
/// # Safety
///
/// `buf` must be valid for writes of `size` bytes, and not accessed by
/// anything else, from the call until the operation has been reaped (by
/// [`async_wait`], [`fence`] or process exit), or be an address the kernel
/// rejects with `-EFAULT`. The kernel writes through it as if it were a
/// `&mut [u8]` at reap time.
pub unsafe fn rdma_read_async(
    handle: u64,
    buf: *mut c_void,
    size: u64,
    offset: u64,
    priority: c_uint,
    password: u64,
) -> c_long {
    unsafe {
        lite_syscall(
            SYS_LITE_RDMA_READ_ASYNC,
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

/// Reaps asynchronous operation `op`: 0 if it succeeded (the reply's
/// length for a [`send_reply_imm_async`] call), its negative errno if it
/// failed; the id is released either way. With
/// [`ASYNC_NOWAIT`] in `flags`, `-EAGAIN` if it has not completed yet (the
/// id stays valid). `-EINVAL` for an unknown id or flags.
///
/// Reaping a read or a call stores its data into the buffer given to
/// [`rdma_read_async`] or [`send_reply_imm_async`]; that is covered by
/// that call's safety contract.
pub fn async_wait(op: u64, flags: c_uint) -> c_long {
    // SAFETY: the call takes no pointers of its own.
    unsafe { lite_syscall(SYS_LITE_ASYNC_WAIT, [op, flags.into(), 0, 0, 0, 0]) }
}

/// Waits for and reaps every outstanding asynchronous operation of the
/// process. Returns 0, or the error of the first failed operation.
pub fn fence() -> c_long {
    // SAFETY: the call takes no pointers of its own.
    unsafe { lite_syscall(SYS_LITE_FENCE, [0; 6]) }
}

/// Copies `min(size, size_of::<LiteStats>())` bytes of this node's counters
/// into `stats`. `-EINVAL` if `size` is smaller than 8. Works before join
/// (all counters 0). Returns 0.
///
/// # Safety
///
/// `stats` must be valid for writes of `size` bytes (capped at the size
/// of [`LiteStats`]) for the duration of the call, or be an address the
/// kernel rejects with `-EFAULT`.
pub unsafe fn get_stats(stats: *mut LiteStats, size: u64) -> c_long {
    unsafe { lite_syscall(SYS_LITE_GET_STATS, [stats as c_ulong, size, 0, 0, 0, 0]) }
}

/// Opens `port` (< [`MAX_PORTS`]) on this node for messages of at most
/// `max_size` bytes (1..=[`MAX_MESSAGE_SIZE`]); the `name_len` bytes at
/// `name` (at most [`MAX_PORT_NAME`], no NUL needed) are informational.
/// Returns 0. `-EADDRINUSE` if the port is registered; `-EDQUOT` if the
/// caller's `rpc_ports` quota would be exceeded. The port is closed when
/// the calling process exits.
///
/// # Safety
///
/// `name` must be valid for reads of `name_len` bytes for the duration of
/// the call, or be an address the kernel rejects with `-EFAULT`.
pub unsafe fn register_application(
    port: c_uint,
    max_size: u64,
    name: *const c_char,
    name_len: u64,
) -> c_long {
    unsafe {
        lite_syscall(
            SYS_LITE_REGISTER_APPLICATION,
            [port.into(), max_size, name as c_ulong, name_len, 0, 0],
        )
    }
}

/// Closes `port`: receivers blocked on it return `-ESHUTDOWN`, requests
/// not received yet fail with `-ECONNREFUSED`. Returns 0. `-ENOENT` not
/// registered, `-EPERM` registered by another process.
pub fn unregister_application(port: c_uint) -> c_long {
    // SAFETY: the call takes no pointers.
    unsafe {
        lite_syscall(
            SYS_LITE_UNREGISTER_APPLICATION,
            [port.into(), 0, 0, 0, 0, 0],
        )
    }
}

/// Connects to `port` on `node` and returns its `max_size`. Optional:
/// sends connect on first use. `-ECONNREFUSED` if the port is not
/// registered there.
pub fn query_port(node: c_uint, port: c_uint) -> c_long {
    // SAFETY: the call takes no pointers.
    unsafe { lite_syscall(SYS_LITE_QUERY_PORT, [node.into(), port.into(), 0, 0, 0, 0]) }
}

/// Blocking RPC: sends the `size` bytes at `msg` to the port in
/// `port_priority` (see [`port_priority`]) on `node` (this node included),
/// waits for the reply and stores it into `reply`. Returns the reply's
/// length (at most `max_reply`).
///
/// # Safety
///
/// `msg` must be valid for reads of `size` bytes and `reply` valid for
/// writes of `max_reply` bytes, not accessed by anything else, for the
/// duration of the call; either may instead be an address the kernel
/// rejects with `-EFAULT`.
pub unsafe fn send_reply_imm(
    node: c_uint,
    port_priority: c_uint,
    msg: *const c_void,
    size: u64,
    reply: *mut c_void,
    max_reply: u64,
) -> c_long {
    unsafe {
        lite_syscall(
            SYS_LITE_SEND_REPLY_IMM,
            [
                node.into(),
                port_priority.into(),
                msg as c_ulong,
                size,
                reply as c_ulong,
                max_reply,
            ],
        )
    }
}

/// Posts the RPC [`send_reply_imm`] would make and returns an operation id
/// (> 0) without waiting; [`async_wait`] on it returns the reply's length
/// once the reply is in `reply`, or the call's error. `-EAGAIN` with
/// [`MAX_ASYNC_OPS`] operations or [`MAX_ASYNC_CALLS`] calls unreaped.
///
/// # Safety
///
/// `msg` must be valid for reads of `size` bytes for the duration of the
/// call. `reply` must stay valid for writes of `max_reply` bytes, and not
/// be accessed by anything else, until the operation is reaped (or the
/// process exits); either may instead be an address the kernel rejects
/// with `-EFAULT` (for `reply`, when the operation is reaped).
pub unsafe fn send_reply_imm_async(
    node: c_uint,
    port_priority: c_uint,
    msg: *const c_void,
    size: u64,
    reply: *mut c_void,
    max_reply: u64,
) -> c_long {
    unsafe {
        lite_syscall(
            SYS_LITE_SEND_REPLY_IMM_ASYNC,
            [
                node.into(),
                port_priority.into(),
                msg as c_ulong,
                size,
                reply as c_ulong,
                max_reply,
            ],
        )
    }
}

/// One-way message: sends the `size` bytes at `msg` to the port in
/// `port_priority` on `node`. Returns 0 once the message is in the
/// server's ring; blocks while the ring is full, or fails with `-EAGAIN`
/// with [`SEND_NONBLOCK`] in `port_priority`.
///
/// # Safety
///
/// `msg` must be valid for reads of `size` bytes for the duration of the
/// call, or be an address the kernel rejects with `-EFAULT`.
pub unsafe fn send(node: c_uint, port_priority: c_uint, msg: *const c_void, size: u64) -> c_long {
    unsafe {
        lite_syscall(
            SYS_LITE_SEND,
            [
                node.into(),
                port_priority.into(),
                msg as c_ulong,
                size,
                0,
                0,
            ],
        )
    }
}

/// Takes the next message of `port` into `buf` and returns its length;
/// `*descriptor` becomes its reply descriptor (0 for a one-way message).
/// Blocks until a message arrives unless `flags` has [`RECV_NONBLOCK`]
/// (then `-EAGAIN`). `-EMSGSIZE` if the next message is longer than
/// `max_size` (it stays queued); `-ESHUTDOWN` if the port was closed while
/// waiting.
///
/// # Safety
///
/// `buf` must be valid for writes of `max_size` bytes and `descriptor` for
/// a write of a `u64`, neither accessed by anything else during the call;
/// either may instead be an address the kernel rejects with `-EFAULT`.
pub unsafe fn receive_message(
    port: c_uint,
    buf: *mut c_void,
    max_size: u64,
    descriptor: *mut u64,
    flags: c_uint,
) -> c_long {
    unsafe {
        lite_syscall(
            SYS_LITE_RECEIVE_MESSAGE,
            [
                port.into(),
                buf as c_ulong,
                max_size,
                descriptor as c_ulong,
                flags.into(),
                0,
            ],
        )
    }
}

/// Answers the request behind `descriptor` with the `size` bytes at `buf`.
/// Returns 0. `-ENOENT` if `descriptor` is not an unanswered descriptor of
/// this process; `-EMSGSIZE` if `size` exceeds the caller's `max_reply`
/// (the descriptor stays valid).
///
/// # Safety
///
/// `buf` must be valid for reads of `size` bytes for the duration of the
/// call, or be an address the kernel rejects with `-EFAULT`.
pub unsafe fn reply_message(buf: *const c_void, size: u64, descriptor: u64) -> c_long {
    unsafe {
        lite_syscall(
            SYS_LITE_REPLY_MESSAGE,
            [buf as c_ulong, size, descriptor, 0, 0, 0],
        )
    }
}

/// [`reply_message`], then [`receive_message`] with the arguments in
/// `*next` (`next.descriptor` receives the new descriptor). Returns the
/// new message's length; if the reply fails, its error, and nothing is
/// received.
///
/// # Safety
///
/// As [`reply_message`] for `buf`; `next` must be valid for reads and
/// writes of a [`LiteReceive`], and its `buf` valid for writes of its
/// `max_size` bytes, during the call (or be addresses the kernel rejects
/// with `-EFAULT`).
pub unsafe fn reply_and_receive_message(
    buf: *const c_void,
    size: u64,
    descriptor: u64,
    next: *mut LiteReceive,
) -> c_long {
    unsafe {
        lite_syscall(
            SYS_LITE_REPLY_AND_RECEIVE_MESSAGE,
            [buf as c_ulong, size, descriptor, next as c_ulong, 0, 0],
        )
    }
}

/// Sends one request to `call.count` nodes (at most [`MAX_NODES`]) at once
/// and waits for every reply: reply `i` goes to `call.replies + i *
/// call.max_reply` and its length (or negative errno) to
/// `call.lengths[i]`. Returns the number of nodes that replied, or a
/// negative errno if the arguments are invalid.
///
/// # Safety
///
/// `call` must be valid for reads of a [`LiteMulticast`], and the
/// addresses in it valid for the reads and writes it describes (`nodes`
/// and `msg` read, `lengths` and `replies` written), during the call; any
/// of them may instead be an address the kernel rejects with `-EFAULT`.
pub unsafe fn send_reply_multicast(call: *mut LiteMulticast) -> c_long {
    unsafe {
        lite_syscall(
            SYS_LITE_SEND_REPLY_MULTICAST,
            [call as c_ulong, 0, 0, 0, 0, 0],
        )
    }
}

/// Atomically adds `value` (modulo 2^64) to the 8-byte LMR `handle` and
/// stores the value it held before into `*old`. Needs ATOMIC; `-EINVAL`
/// if the LMR is not exactly 8 bytes at an 8-byte aligned address. No
/// password is checked. Returns 0.
///
/// # Safety
///
/// `old` must be valid for a write of a `u64` and not accessed by anything
/// else during the call, or be an address the kernel rejects with
/// `-EFAULT`.
pub unsafe fn fetch_add(handle: u64, old: *mut u64, value: u64, priority: c_uint) -> c_long {
    unsafe {
        lite_syscall(
            SYS_LITE_FETCH_ADD,
            [handle, old as c_ulong, value, priority.into(), 0, 0],
        )
    }
}

/// Atomically replaces the value of the 8-byte LMR `handle` with
/// `new_value` if it equals `expected`; `*old` receives the value it held
/// before either way, so the swap happened if and only if `*old ==
/// expected`. Needs ATOMIC. Returns 0.
///
/// # Safety
///
/// As [`fetch_add`] for `old`.
pub unsafe fn compare_swp(
    handle: u64,
    old: *mut u64,
    expected: u64,
    new_value: u64,
    priority: c_uint,
) -> c_long {
    unsafe {
        lite_syscall(
            SYS_LITE_COMPARE_SWP,
            [
                handle,
                old as c_ulong,
                expected,
                new_value,
                priority.into(),
                0,
            ],
        )
    }
}

/// Creates a distributed lock kept by node `home` (this node included),
/// fills in `*lock` and returns the lock's number. `-ENOSPC` if `home`
/// keeps [`MAX_LOCKS`] locks already; `-EDQUOT` if the caller's `locks`
/// quota would be exceeded (a lock stays charged for as long as this node
/// is a member).
///
/// # Safety
///
/// `lock` must be valid for a write of a [`LiteLock`] and not accessed by
/// anything else during the call, or be an address the kernel rejects
/// with `-EFAULT`.
pub unsafe fn create_lock(home: c_uint, lock: *mut LiteLock) -> c_long {
    unsafe {
        lite_syscall(
            SYS_LITE_CREATE_LOCK,
            [home.into(), lock as c_ulong, 0, 0, 0, 0],
        )
    }
}

/// Fills in `*lock` for the existing lock `number` kept by `home`.
/// Returns 0. `-ENOENT` if there is no such lock.
///
/// # Safety
///
/// As [`create_lock`] for `lock`.
pub unsafe fn ask_lock(home: c_uint, number: c_uint, lock: *mut LiteLock) -> c_long {
    unsafe {
        lite_syscall(
            SYS_LITE_ASK_LOCK,
            [home.into(), number.into(), lock as c_ulong, 0, 0, 0],
        )
    }
}

/// Acquires the lock `*lock` for the calling thread, in the order callers
/// on all nodes asked (FIFO). Returns 0, or `-EOWNERDEAD` when the lock is
/// held all the same but its previous holder's node died or left while
/// holding it (the next taker is told once; unlock it as usual).
/// `-ENOENT` unknown lock, `-EDEADLK` the thread holds it already,
/// `-EINTR` a signal arrived while waiting, `-EHOSTDOWN` the lock's home
/// node is gone.
///
/// # Safety
///
/// `lock` must be valid for reads of a [`LiteLock`] during the call, or be
/// an address the kernel rejects with `-EFAULT`.
pub unsafe fn lock(lock: *const LiteLock) -> c_long {
    unsafe { lite_syscall(SYS_LITE_LOCK, [lock as c_ulong, 0, 0, 0, 0, 0]) }
}

/// Releases the lock `*lock`. Returns 0. `-EPERM` if the calling thread
/// does not hold it, `-ENOENT` unknown lock.
///
/// # Safety
///
/// As [`lock`].
pub unsafe fn unlock(lock: *const LiteLock) -> c_long {
    unsafe { lite_syscall(SYS_LITE_UNLOCK, [lock as c_ulong, 0, 0, 0, 0, 0]) }
}

/// Sets the calling process's default priority (used by operations that
/// pass [`PRIORITY_NONE`]) and returns the previous default. `-EINVAL` for
/// an unknown priority.
pub fn set_priority(priority: c_uint) -> c_long {
    // SAFETY: the call takes no pointers.
    unsafe { lite_syscall(SYS_LITE_SET_PRIORITY, [priority.into(), 0, 0, 0, 0, 0]) }
}

/// Opens LITE-DSM region `name` of node `node` (created on this node, of
/// `size` bytes, with [`DSM_CREATE`]) and returns a file descriptor to map
/// with `MAP_SHARED`. `-ENOENT` no such region, `-EACCES` a wrong
/// password, `-EINVAL` bad flags or size or creation on another node,
/// `-EEXIST` the name is taken by an LMR of `node`, `-ENOTCONN` before a
/// join.
pub fn dsm_open(node: c_uint, name: u64, size: u64, flags: c_uint, password: u64) -> c_long {
    let args = [
        node.into(),
        name as c_ulong,
        size as c_ulong,
        flags.into(),
        password as c_ulong,
        0,
    ];
    // SAFETY: the call takes no pointers.
    unsafe { lite_syscall(SYS_LITE_DSM_OPEN, args) }
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
    fn lite_stats_has_the_c_layout() {
        assert_eq!(std::mem::size_of::<LiteStats>(), 120);
        assert_eq!(std::mem::align_of::<LiteStats>(), 8);
        assert_eq!(std::mem::offset_of!(LiteStats, lmrs), 0);
        assert_eq!(std::mem::offset_of!(LiteStats, async_in_flight), 56);
        assert_eq!(std::mem::offset_of!(LiteStats, connections), 64);
        assert_eq!(std::mem::offset_of!(LiteStats, qos_throttled), 112);
    }

    #[test]
    fn lite_lock_has_the_c_layout() {
        use std::mem::{align_of, offset_of, size_of};
        assert_eq!((size_of::<LiteLock>(), align_of::<LiteLock>()), (8, 4));
        assert_eq!(offset_of!(LiteLock, home), 0);
        assert_eq!(offset_of!(LiteLock, number), 4);
    }

    #[test]
    fn rpc_structs_have_the_c_layout() {
        use std::mem::{align_of, offset_of, size_of};
        assert_eq!(
            (size_of::<LiteReceive>(), align_of::<LiteReceive>()),
            (32, 8)
        );
        assert_eq!(offset_of!(LiteReceive, port), 24);
        assert_eq!(offset_of!(LiteReceive, flags), 28);
        assert_eq!(size_of::<LiteMulticast>(), 56);
        assert_eq!(offset_of!(LiteMulticast, count), 48);
        assert_eq!(offset_of!(LiteMulticast, port_priority), 52);
    }

    #[test]
    fn port_priority_packs_like_the_c_macro() {
        assert_eq!(port_priority(10, PRIORITY_NONE), 10);
        assert_eq!(port_priority(63, PRIORITY_LOW), 0x2_003f);
        assert_eq!(port_priority(5, PRIORITY_HIGH) | SEND_NONBLOCK, 0x8001_0005);
    }

    #[test]
    fn real_successful_syscall_returns_its_value() {
        let pid = unsafe { lite_syscall(libc::SYS_getpid, [0; 6]) };
        assert_eq!(pid, c_long::from(std::process::id()));
    }
}
