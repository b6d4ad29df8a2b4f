//! LITE's system calls by name and number, and the raw way to issue them.

use libc::{c_long, c_ulong};
use lite::sys;

/// One LITE system call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Syscall {
    Join,
    GetNodeId,
    GetTotalNode,
    AllocRemote,
    RdmaWrite,
    RdmaRead,
    Free,
    DistBarrier,
    RemoteMemset,
    Memcpy,
    Memmove,
    WrapAlloc,
    AddAskMrTable,
    AskLmr,
    UmapLmr,
    RegisterLmr,
    DeregisterLmr,
    RdmaWriteAsync,
    RdmaReadAsync,
    AsyncWait,
    Fence,
    GetStats,
    RegisterApplication,
    UnregisterApplication,
    QueryPort,
    SendReplyImm,
    Send,
    ReceiveMessage,
    ReplyMessage,
    ReplyAndReceiveMessage,
    SendReplyMulticast,
    FetchAdd,
    CompareSwp,
    CreateLock,
    AskLock,
    Lock,
    Unlock,
    SetPriority,
    Leave,
    SendReplyImmAsync,
}

/// Number of LITE system calls.
pub(crate) const SYSCALLS: usize = 40;

impl Syscall {
    /// Every call, in system call number order.
    pub(crate) const ALL: [Syscall; SYSCALLS] = [
        Syscall::Join,
        Syscall::GetNodeId,
        Syscall::GetTotalNode,
        Syscall::AllocRemote,
        Syscall::RdmaWrite,
        Syscall::RdmaRead,
        Syscall::Free,
        Syscall::DistBarrier,
        Syscall::RemoteMemset,
        Syscall::Memcpy,
        Syscall::Memmove,
        Syscall::WrapAlloc,
        Syscall::AddAskMrTable,
        Syscall::AskLmr,
        Syscall::UmapLmr,
        Syscall::RegisterLmr,
        Syscall::DeregisterLmr,
        Syscall::RdmaWriteAsync,
        Syscall::RdmaReadAsync,
        Syscall::AsyncWait,
        Syscall::Fence,
        Syscall::GetStats,
        Syscall::RegisterApplication,
        Syscall::UnregisterApplication,
        Syscall::QueryPort,
        Syscall::SendReplyImm,
        Syscall::Send,
        Syscall::ReceiveMessage,
        Syscall::ReplyMessage,
        Syscall::ReplyAndReceiveMessage,
        Syscall::SendReplyMulticast,
        Syscall::FetchAdd,
        Syscall::CompareSwp,
        Syscall::CreateLock,
        Syscall::AskLock,
        Syscall::Lock,
        Syscall::Unlock,
        Syscall::SetPriority,
        Syscall::Leave,
        Syscall::SendReplyImmAsync,
    ];

    /// Position in [`Syscall::ALL`].
    pub(crate) fn index(self) -> usize {
        self as usize
    }

    /// The call at position `index` of [`Syscall::ALL`].
    pub(crate) fn from_index(index: usize) -> Option<Syscall> {
        Syscall::ALL.get(index).copied()
    }

    /// The system call number (`__NR_lite_*`).
    pub(crate) fn number(self) -> c_long {
        match self {
            Syscall::Join => sys::SYS_LITE_JOIN,
            Syscall::GetNodeId => sys::SYS_LITE_GET_NODE_ID,
            Syscall::GetTotalNode => sys::SYS_LITE_GET_TOTAL_NODE,
            Syscall::AllocRemote => sys::SYS_LITE_ALLOC_REMOTE,
            Syscall::RdmaWrite => sys::SYS_LITE_RDMA_WRITE,
            Syscall::RdmaRead => sys::SYS_LITE_RDMA_READ,
            Syscall::Free => sys::SYS_LITE_FREE,
            Syscall::DistBarrier => sys::SYS_LITE_DIST_BARRIER,
            Syscall::RemoteMemset => sys::SYS_LITE_REMOTE_MEMSET,
            Syscall::Memcpy => sys::SYS_LITE_MEMCPY,
            Syscall::Memmove => sys::SYS_LITE_MEMMOVE,
            Syscall::WrapAlloc => sys::SYS_LITE_WRAP_ALLOC,
            Syscall::AddAskMrTable => sys::SYS_LITE_ADD_ASK_MR_TABLE,
            Syscall::AskLmr => sys::SYS_LITE_ASK_LMR,
            Syscall::UmapLmr => sys::SYS_LITE_UMAP_LMR,
            Syscall::RegisterLmr => sys::SYS_LITE_REGISTER_LMR,
            Syscall::DeregisterLmr => sys::SYS_LITE_DEREGISTER_LMR,
            Syscall::RdmaWriteAsync => sys::SYS_LITE_RDMA_WRITE_ASYNC,
            Syscall::RdmaReadAsync => sys::SYS_LITE_RDMA_READ_ASYNC,
            Syscall::AsyncWait => sys::SYS_LITE_ASYNC_WAIT,
            Syscall::Fence => sys::SYS_LITE_FENCE,
            Syscall::GetStats => sys::SYS_LITE_GET_STATS,
            Syscall::RegisterApplication => sys::SYS_LITE_REGISTER_APPLICATION,
            Syscall::UnregisterApplication => sys::SYS_LITE_UNREGISTER_APPLICATION,
            Syscall::QueryPort => sys::SYS_LITE_QUERY_PORT,
            Syscall::SendReplyImm => sys::SYS_LITE_SEND_REPLY_IMM,
            Syscall::SendReplyImmAsync => sys::SYS_LITE_SEND_REPLY_IMM_ASYNC,
            Syscall::Send => sys::SYS_LITE_SEND,
            Syscall::ReceiveMessage => sys::SYS_LITE_RECEIVE_MESSAGE,
            Syscall::ReplyMessage => sys::SYS_LITE_REPLY_MESSAGE,
            Syscall::ReplyAndReceiveMessage => sys::SYS_LITE_REPLY_AND_RECEIVE_MESSAGE,
            Syscall::SendReplyMulticast => sys::SYS_LITE_SEND_REPLY_MULTICAST,
            Syscall::FetchAdd => sys::SYS_LITE_FETCH_ADD,
            Syscall::CompareSwp => sys::SYS_LITE_COMPARE_SWP,
            Syscall::CreateLock => sys::SYS_LITE_CREATE_LOCK,
            Syscall::AskLock => sys::SYS_LITE_ASK_LOCK,
            Syscall::Lock => sys::SYS_LITE_LOCK,
            Syscall::Unlock => sys::SYS_LITE_UNLOCK,
            Syscall::SetPriority => sys::SYS_LITE_SET_PRIORITY,
            Syscall::Leave => sys::SYS_LITE_LEAVE,
        }
    }

    /// The C name, e.g. `lite_rdma_write`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Syscall::Join => "lite_join",
            Syscall::GetNodeId => "lite_get_node_id",
            Syscall::GetTotalNode => "lite_get_total_node",
            Syscall::AllocRemote => "lite_alloc_remote",
            Syscall::RdmaWrite => "lite_rdma_write",
            Syscall::RdmaRead => "lite_rdma_read",
            Syscall::Free => "lite_free",
            Syscall::DistBarrier => "lite_dist_barrier",
            Syscall::RemoteMemset => "lite_remote_memset",
            Syscall::Memcpy => "lite_memcpy",
            Syscall::Memmove => "lite_memmove",
            Syscall::WrapAlloc => "lite_wrap_alloc",
            Syscall::AddAskMrTable => "lite_add_ask_mr_table",
            Syscall::AskLmr => "lite_ask_lmr",
            Syscall::UmapLmr => "lite_umap_lmr",
            Syscall::RegisterLmr => "lite_register_lmr",
            Syscall::DeregisterLmr => "lite_deregister_lmr",
            Syscall::RdmaWriteAsync => "lite_rdma_write_async",
            Syscall::RdmaReadAsync => "lite_rdma_read_async",
            Syscall::AsyncWait => "lite_async_wait",
            Syscall::Fence => "lite_fence",
            Syscall::GetStats => "lite_get_stats",
            Syscall::RegisterApplication => "lite_register_application",
            Syscall::UnregisterApplication => "lite_unregister_application",
            Syscall::QueryPort => "lite_query_port",
            Syscall::SendReplyImm => "lite_send_reply_imm",
            Syscall::SendReplyImmAsync => "lite_send_reply_imm_async",
            Syscall::Send => "lite_send",
            Syscall::ReceiveMessage => "lite_receive_message",
            Syscall::ReplyMessage => "lite_reply_message",
            Syscall::ReplyAndReceiveMessage => "lite_reply_and_receive_message",
            Syscall::SendReplyMulticast => "lite_send_reply_multicast",
            Syscall::FetchAdd => "lite_fetch_add",
            Syscall::CompareSwp => "lite_compare_swp",
            Syscall::CreateLock => "lite_create_lock",
            Syscall::AskLock => "lite_ask_lock",
            Syscall::Lock => "lite_lock",
            Syscall::Unlock => "lite_unlock",
            Syscall::SetPriority => "lite_set_priority",
            Syscall::Leave => "lite_leave",
        }
    }

    /// The call named `name` (`lite_...`).
    #[cfg(test)]
    pub(crate) fn from_name(name: &str) -> Option<Syscall> {
        Syscall::ALL.into_iter().find(|call| call.name() == name)
    }

    /// How many arguments the call takes, for printing it.
    pub(crate) fn arity(self) -> usize {
        match self {
            Syscall::GetNodeId | Syscall::GetTotalNode | Syscall::Fence => 0,
            Syscall::Free
            | Syscall::DistBarrier
            | Syscall::UmapLmr
            | Syscall::DeregisterLmr
            | Syscall::UnregisterApplication
            | Syscall::SendReplyMulticast
            | Syscall::Lock
            | Syscall::Unlock
            | Syscall::SetPriority
            | Syscall::Leave => 1,
            Syscall::AsyncWait | Syscall::GetStats | Syscall::QueryPort | Syscall::CreateLock => 2,
            Syscall::Join | Syscall::ReplyMessage | Syscall::AskLock => 3,
            Syscall::AllocRemote
            | Syscall::RemoteMemset
            | Syscall::WrapAlloc
            | Syscall::AddAskMrTable
            | Syscall::AskLmr
            | Syscall::RegisterLmr
            | Syscall::RegisterApplication
            | Syscall::Send
            | Syscall::ReplyAndReceiveMessage
            | Syscall::FetchAdd => 4,
            Syscall::Memcpy | Syscall::Memmove | Syscall::ReceiveMessage | Syscall::CompareSwp => 5,
            Syscall::RdmaWrite
            | Syscall::RdmaRead
            | Syscall::RdmaWriteAsync
            | Syscall::RdmaReadAsync
            | Syscall::SendReplyImm
            | Syscall::SendReplyImmAsync => 6,
        }
    }
}

/// A call with its arguments as the registers carry them, for messages:
/// `lite_free(0x100000001)`.
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

/// Issues system call `number` with six register-width arguments and
/// returns the kernel's raw result: a value >= 0 or a negative errno.
///
/// # Safety
///
/// Every argument the call uses as a user pointer must be an address the
/// kernel rejects (null, kernel space, unmapped, or mapped without the
/// access the call needs), or point to memory that nothing in this
/// program reads or writes through a reference while the kernel may
/// access it, for as many bytes as the call may access.
pub(crate) unsafe fn raw_syscall(number: c_long, args: [u64; 6]) -> i64 {
    // SAFETY: the caller vouches for the pointers among `args`; every
    // argument is passed at full register width, as `syscall` reads six.
    let ret = unsafe {
        libc::syscall(
            number,
            args[0] as c_ulong,
            args[1] as c_ulong,
            args[2] as c_ulong,
            args[3] as c_ulong,
            args[4] as c_ulong,
            args[5] as c_ulong,
        )
    };
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
    fn every_call_has_its_number_in_order() {
        for (index, call) in Syscall::ALL.into_iter().enumerate() {
            assert_eq!(call.index(), index);
            assert_eq!(Syscall::from_index(index), Some(call));
            assert_eq!(call.number(), sys::SYS_LITE_JOIN + index as c_long);
            assert_eq!(Syscall::from_name(call.name()), Some(call));
        }
        assert_eq!(Syscall::from_index(SYSCALLS), None);
        assert_eq!(Syscall::from_name("lite_nothing"), None);
    }

    #[test]
    fn calls_print_with_their_arguments() {
        let args = [0x1_0000_0001, 16, 0, 0, 0, 0];
        assert_eq!(
            describe_call(Syscall::Free, &args),
            "lite_free(0x100000001)"
        );
        assert_eq!(
            describe_call(Syscall::RdmaWrite, &args),
            "lite_rdma_write(0x100000001, 16, 0, 0, 0, 0)"
        );
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
