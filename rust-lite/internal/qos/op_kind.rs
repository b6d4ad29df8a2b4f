// SPDX-License-Identifier: GPL-2.0

//! The operation types of the per-operation counters, and their names in
//! `/sys/kernel/debug/lite/stats`.
//!
//! This module is plain `core` Rust: the kernel prints the counters with
//! these names, and the userspace tools (`userspace/lite-tools`, module
//! `debugfs`) compile this very file to parse them, so the two sides cannot
//! disagree on the names or their order.

/// What kind of operation a counter counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpKind {
    /// `lite_rdma_read`.
    Read,
    /// `lite_rdma_write`.
    Write,
    /// `lite_rdma_read_async` (counted when started).
    ReadAsync,
    /// `lite_rdma_write_async` (counted when started).
    WriteAsync,
    /// `lite_fetch_add`, `lite_compare_swp`.
    Atomic,
    /// `lite_remote_memset`.
    Memset,
    /// `lite_memcpy`, `lite_memmove`.
    Memcpy,
    /// `lite_send_reply_imm` (round trip).
    RpcCall,
    /// `lite_send`.
    RpcSend,
    /// `lite_reply_message`.
    RpcReply,
    /// `lite_lock` (time to acquire).
    Lock,
    /// `lite_send_reply_imm_async` (counted when posted).
    RpcCallAsync,
}

impl OpKind {
    /// Every kind, in table order: `OpKind::ALL[i] as usize == i`.
    pub const ALL: [OpKind; 12] = [
        OpKind::Read,
        OpKind::Write,
        OpKind::ReadAsync,
        OpKind::WriteAsync,
        OpKind::Atomic,
        OpKind::Memset,
        OpKind::Memcpy,
        OpKind::RpcCall,
        OpKind::RpcSend,
        OpKind::RpcReply,
        OpKind::Lock,
        OpKind::RpcCallAsync,
    ];

    /// Name in the counters' text.
    pub fn name(self) -> &'static str {
        match self {
            OpKind::Read => "read",
            OpKind::Write => "write",
            OpKind::ReadAsync => "read_async",
            OpKind::WriteAsync => "write_async",
            OpKind::Atomic => "atomic",
            OpKind::Memset => "memset",
            OpKind::Memcpy => "memcpy",
            OpKind::RpcCall => "rpc_call",
            OpKind::RpcSend => "rpc_send",
            OpKind::RpcReply => "rpc_reply",
            OpKind::Lock => "lock",
            OpKind::RpcCallAsync => "rpc_call_async",
        }
    }
}

// Counter tables are indexed by `kind as usize` and sized by `ALL.len()`:
// `ALL` must list the kinds in declaration order.
const _: () = {
    let mut i = 0;
    while i < OpKind::ALL.len() {
        assert!(OpKind::ALL[i] as usize == i);
        i += 1;
    }
};
