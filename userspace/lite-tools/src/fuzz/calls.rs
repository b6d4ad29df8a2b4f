//! LITE's system calls by name and number, and the raw way to issue them.

use libc::{
    c_long, c_ulong, EACCES, EADDRINUSE, EAGAIN, EALREADY, ECONNREFUSED, ECONNRESET, EDEADLK,
    EDQUOT, EEXIST, EFAULT, EHOSTDOWN, EHOSTUNREACH, EINTR, EINVAL, EIO, EISCONN, EKEYREJECTED,
    EKEYREVOKED, EMSGSIZE, ENODEV, ENOENT, ENOKEY, ENOSPC, ENOTCONN, EOWNERDEAD, EPERM, EPROTO,
    ESHUTDOWN, ETIMEDOUT,
};
use lite::sys;

/// In system call number order; the errors are those the uapi header
/// documents besides the common ones.
macro_rules! syscalls {
    ($($call:ident: $number:ident, $name:literal, $arity:literal, [$($errno:ident),*];)*) => {
        /// One LITE system call.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub(crate) enum Syscall {
            $($call,)*
        }

        impl Syscall {
            /// In system call number order.
            pub(crate) const ALL: [Syscall; SYSCALLS] = [$(Syscall::$call,)*];

            /// `__NR_lite_*`.
            pub(crate) fn number(self) -> c_long {
                match self {
                    $(Syscall::$call => sys::$number,)*
                }
            }

            /// E.g. `lite_rdma_write`.
            pub(crate) fn name(self) -> &'static str {
                match self {
                    $(Syscall::$call => $name,)*
                }
            }

            /// For printing the call.
            pub(crate) fn arity(self) -> usize {
                match self {
                    $(Syscall::$call => $arity,)*
                }
            }

            /// Besides [`COMMON`](super::errnos::COMMON).
            pub(crate) fn documented(self) -> &'static [i32] {
                match self {
                    $(Syscall::$call => &[$($errno),*],)*
                }
            }
        }
    };
}

syscalls! {
    Join: SYS_LITE_JOIN, "lite_join", 3, [
        EPERM, EISCONN, EALREADY, EADDRINUSE, EAGAIN, ENODEV, ECONNREFUSED, ETIMEDOUT, EPROTO,
        ENOKEY, EKEYREJECTED
    ];
    GetNodeId: SYS_LITE_GET_NODE_ID, "lite_get_node_id", 0, [];
    GetTotalNode: SYS_LITE_GET_TOTAL_NODE, "lite_get_total_node", 0, [];
    AllocRemote: SYS_LITE_ALLOC_REMOTE, "lite_alloc_remote", 4, [EDQUOT];
    RdmaWrite: SYS_LITE_RDMA_WRITE, "lite_rdma_write", 6, [];
    RdmaRead: SYS_LITE_RDMA_READ, "lite_rdma_read", 6, [];
    Free: SYS_LITE_FREE, "lite_free", 1, [];
    DistBarrier: SYS_LITE_DIST_BARRIER, "lite_dist_barrier", 1, [EINVAL, EINTR, ETIMEDOUT];
    RemoteMemset: SYS_LITE_REMOTE_MEMSET, "lite_remote_memset", 4, [EINVAL];
    Memcpy: SYS_LITE_MEMCPY, "lite_memcpy", 5, [];
    Memmove: SYS_LITE_MEMMOVE, "lite_memmove", 5, [];
    WrapAlloc: SYS_LITE_WRAP_ALLOC, "lite_wrap_alloc", 4, [EEXIST, EDQUOT];
    AddAskMrTable: SYS_LITE_ADD_ASK_MR_TABLE, "lite_add_ask_mr_table", 4, [EEXIST, EINVAL, EDQUOT];
    AskLmr: SYS_LITE_ASK_LMR, "lite_ask_lmr", 4, [ENOENT, EACCES, EPERM, EINVAL, EAGAIN];
    UmapLmr: SYS_LITE_UMAP_LMR, "lite_umap_lmr", 1, [EINVAL];
    RegisterLmr: SYS_LITE_REGISTER_LMR, "lite_register_lmr", 4, [EFAULT, EDQUOT];
    DeregisterLmr: SYS_LITE_DEREGISTER_LMR, "lite_deregister_lmr", 1, [EKEYREVOKED];
    RdmaWriteAsync: SYS_LITE_RDMA_WRITE_ASYNC, "lite_rdma_write_async", 6, [EAGAIN, EIO];
    RdmaReadAsync: SYS_LITE_RDMA_READ_ASYNC, "lite_rdma_read_async", 6, [EAGAIN, EIO];
    // A call's errors come with its reap.
    AsyncWait: SYS_LITE_ASYNC_WAIT, "lite_async_wait", 2,
        [EAGAIN, EINVAL, ECONNREFUSED, EMSGSIZE, ECONNRESET, EPROTO, ETIMEDOUT];
    Fence: SYS_LITE_FENCE, "lite_fence", 0, [ECONNREFUSED, EMSGSIZE, ECONNRESET, EPROTO, ETIMEDOUT];
    GetStats: SYS_LITE_GET_STATS, "lite_get_stats", 2, [EINVAL];
    RegisterApplication: SYS_LITE_REGISTER_APPLICATION, "lite_register_application", 4,
        [EADDRINUSE, EDQUOT];
    UnregisterApplication: SYS_LITE_UNREGISTER_APPLICATION, "lite_unregister_application", 1,
        [ENOENT, EPERM];
    QueryPort: SYS_LITE_QUERY_PORT, "lite_query_port", 2, [ECONNREFUSED];
    SendReplyImm: SYS_LITE_SEND_REPLY_IMM, "lite_send_reply_imm", 6,
        [ECONNREFUSED, EMSGSIZE, ECONNRESET, EPROTO, ETIMEDOUT, EINTR];
    Send: SYS_LITE_SEND, "lite_send", 4,
        [EAGAIN, ECONNREFUSED, EMSGSIZE, ECONNRESET, EPROTO, ETIMEDOUT, EINTR];
    ReceiveMessage: SYS_LITE_RECEIVE_MESSAGE, "lite_receive_message", 5,
        [EAGAIN, EMSGSIZE, ENOENT, ESHUTDOWN, EINTR];
    ReplyMessage: SYS_LITE_REPLY_MESSAGE, "lite_reply_message", 3, [ENOENT, EMSGSIZE];
    ReplyAndReceiveMessage: SYS_LITE_REPLY_AND_RECEIVE_MESSAGE, "lite_reply_and_receive_message", 4,
        [ENOENT, EMSGSIZE, EAGAIN, ESHUTDOWN, EINTR];
    SendReplyMulticast: SYS_LITE_SEND_REPLY_MULTICAST, "lite_send_reply_multicast", 1, [];
    FetchAdd: SYS_LITE_FETCH_ADD, "lite_fetch_add", 4, [];
    CompareSwp: SYS_LITE_COMPARE_SWP, "lite_compare_swp", 5, [EHOSTUNREACH, EINVAL, EPERM];
    CreateLock: SYS_LITE_CREATE_LOCK, "lite_create_lock", 2, [ENOSPC, EDQUOT];
    AskLock: SYS_LITE_ASK_LOCK, "lite_ask_lock", 3, [ENOENT];
    Lock: SYS_LITE_LOCK, "lite_lock", 1, [ENOENT, EDEADLK, EINTR, EHOSTDOWN, EAGAIN, EOWNERDEAD];
    Unlock: SYS_LITE_UNLOCK, "lite_unlock", 1, [ENOENT, EPERM];
    SetPriority: SYS_LITE_SET_PRIORITY, "lite_set_priority", 1, [];
    Leave: SYS_LITE_LEAVE, "lite_leave", 1, [EPERM, ENOTCONN, EALREADY, ENOSPC, EINVAL];
    SendReplyImmAsync: SYS_LITE_SEND_REPLY_IMM_ASYNC, "lite_send_reply_imm_async", 6,
        [ECONNREFUSED, EMSGSIZE, EINTR, EAGAIN];
    DsmOpen: SYS_LITE_DSM_OPEN, "lite_dsm_open", 5, [EINVAL, ENOENT, EACCES, EEXIST, EDQUOT];
}

pub(crate) const SYSCALLS: usize = 41;

impl Syscall {
    pub(crate) fn index(self) -> usize {
        self as usize
    }

    pub(crate) fn from_index(index: usize) -> Option<Syscall> {
        Syscall::ALL.get(index).copied()
    }

    #[cfg(test)]
    pub(crate) fn from_name(name: &str) -> Option<Syscall> {
        Syscall::ALL.into_iter().find(|call| call.name() == name)
    }
}

/// The arguments after `given` are 0.
pub(crate) fn args(given: &[u64]) -> [u64; 6] {
    let mut args = [0; 6];
    args[..given.len()].copy_from_slice(given);
    args
}

/// E.g. `lite_free(0x100000001)`.
pub(crate) fn describe_call(call: Syscall, args: &[u64; 6]) -> String {
    let shown: Vec<String> = args[..call.arity()]
        .iter()
        .map(|&arg| {
            if arg < 4096 {
                arg.to_string()
            } else {
                format!("{arg:#x}")
            }
        })
        .collect();
    format!("{}({})", call.name(), shown.join(", "))
}

/// A value >= 0 or a negative errno.
///
/// # Safety
///
/// Every argument the call uses as a user pointer must be an address the
/// kernel rejects (null, kernel space, unmapped, or mapped without the
/// access the call needs), or point to memory that nothing in this
/// program reads or writes through a reference while the kernel may
/// access it, for as many bytes as the call may access.
pub(crate) unsafe fn raw_syscall(number: c_long, args: [u64; 6]) -> i64 {
    let [a, b, c, d, e, f] = args.map(|arg| arg as c_ulong);
    // SAFETY: the caller vouches for the pointers among `args`; every
    // argument is passed at full register width, as `syscall` reads six.
    let ret = unsafe { libc::syscall(number, a, b, c, d, e, f) };
    if ret == -1 {
        // SAFETY: reads the calling thread's errno, which the failed call set.
        -i64::from(unsafe { *libc::__errno_location() })
    } else {
        ret
    }
}

/// [`raw_syscall`] of a LITE call.
///
/// # Safety
///
/// As [`raw_syscall`].
pub(crate) unsafe fn issue(call: Syscall, args: [u64; 6]) -> i64 {
    // SAFETY: passed on to the caller.
    unsafe { raw_syscall(call.number(), args) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_call_has_its_number_in_order_and_prints_with_its_arguments() {
        for (index, call) in Syscall::ALL.into_iter().enumerate() {
            assert_eq!(call.index(), index);
            assert_eq!(Syscall::from_index(index), Some(call));
            assert_eq!(call.number(), sys::SYS_LITE_JOIN + index as c_long);
            assert_eq!(Syscall::from_name(call.name()), Some(call));
        }
        assert_eq!(Syscall::from_index(SYSCALLS), None);
        assert_eq!(Syscall::from_name("lite_nothing"), None);
        let args = [0x1_0000_0001, 16, 0, 0, 0, 0];
        let free = describe_call(Syscall::Free, &args);
        assert_eq!(free, "lite_free(0x100000001)");
        let write = describe_call(Syscall::RdmaWrite, &args);
        assert_eq!(write, "lite_rdma_write(0x100000001, 16, 0, 0, 0, 0)");
        assert_eq!(describe_call(Syscall::Fence, &args), "lite_fence()");
    }

    #[test]
    fn raw_results_are_the_kernels() {
        // SAFETY: getpid and close take no pointers.
        let pid = unsafe { raw_syscall(libc::SYS_getpid, [0; 6]) };
        assert_eq!(pid, i64::from(std::process::id()));
        // SAFETY: as above.
        let bad = unsafe { raw_syscall(libc::SYS_close, [u64::MAX, 0, 0, 0, 0, 0]) };
        assert_eq!(bad, -i64::from(libc::EBADF));
    }
}
