// SPDX-License-Identifier: GPL-2.0

//! Atomic operations on 8-byte LMRs (`lite_fetch_add`, `lite_compare_swp`).
//!
//! Both are RDMA atomics executed by the device of the node holding the
//! word, also when that is this node (a peer posts them for it), so every
//! node's atomics on one LMR are atomic with respect to each other.

pub(crate) mod wire;

use crate::internal::node_id::NodeId;
use core::sync::atomic::Ordering;
use kernel::{prelude::*, sync::Arc};

use self::wire::AtomicMessage;
use super::{
    core::{
        peer::Peer,
        subsystem::{Handling, Subsystem},
        wire::{Frame, Status},
        Core,
    },
    memory::{chunk::pieces_in, handle::LmrHandle, lmr::ATOMIC_SIZE, permission::Permission},
    process::Process,
    qos::{
        admission,
        op_stats::{self, OpKind, OpTimer},
    },
};
use crate::errno;

/// An atomic operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AtomicOp {
    /// Add the value (modulo 2^64).
    FetchAdd(u64),
    /// Replace `expected` with `new_value`.
    CompareSwap {
        /// The value the word must hold.
        expected: u64,
        /// What it is replaced with.
        new_value: u64,
    },
}

/// The 8-byte word an atomic operates on: its node and remote address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AtomicTarget {
    /// Node holding the word.
    pub(crate) node: NodeId,
    /// Remote address of the word.
    pub(crate) addr: u64,
    /// Remote key covering it.
    pub(crate) rkey: u32,
}

/// Atomics of a joined node.
pub(crate) struct Atomics {
    core: Arc<Core>,
}

impl Atomics {
    /// Atomics over `core`.
    pub(crate) fn new(core: Arc<Core>) -> Result<Arc<Self>> {
        Ok(Arc::new(Atomics { core }, GFP_KERNEL)?)
    }

    /// `lite_fetch_add` / `lite_compare_swp` on a handle of `process`;
    /// returns the value the LMR held before.
    ///
    /// # Errors
    ///
    /// `EBADF`, `EPERM` (no ATOMIC), `EINVAL` (not an 8-byte aligned LMR, bad
    /// priority), `EKEYREVOKED`, `EHOSTUNREACH`, `EIO`.
    pub(crate) fn atomic(
        &self,
        process: &Process,
        handle: LmrHandle,
        op: AtomicOp,
        priority: u32,
    ) -> Result<u64> {
        let priority = process.default_priority.resolve(priority)?;
        let lmr = process.permitted(handle, Permission::ATOMIC)?;
        if lmr.size != ATOMIC_SIZE {
            return Err(EINVAL);
        }
        let _use = lmr.begin()?;
        let piece = pieces_in(lmr.geometry, 0, ATOMIC_SIZE, ATOMIC_SIZE)
            .next()
            .ok_or(EINVAL)?;
        if piece.len != ATOMIC_SIZE {
            return Err(EINVAL);
        }
        let chunk = lmr.chunks.get(piece.chunk).ok_or(EINVAL)?;
        let target = AtomicTarget {
            node: chunk.reach()?,
            addr: chunk.addr().checked_add(piece.chunk_offset).ok_or(EINVAL)?,
            rkey: chunk.rkey(),
        };
        if target.addr % ATOMIC_SIZE != 0 {
            return Err(EINVAL);
        }
        let admission = admission::admit(priority);
        let timer = OpTimer::start(OpKind::Atomic, priority);
        let result = self.atomic_on(target, op);
        timer.finish(admission, ATOMIC_SIZE, result)
    }

    /// Runs `op` on the word at `target`; returns its previous value.
    pub(crate) fn atomic_on(&self, target: AtomicTarget, op: AtomicOp) -> Result<u64> {
        op_stats::COUNTERS.atomics.fetch_add(1, Ordering::Relaxed);
        if target.node == self.core.node_id() {
            return self.atomic_by_peer(target, op);
        }
        let peer = self.core.peer(target.node)?;
        let remote = (target.addr, target.rkey);
        self.core
            .staging
            .with(ATOMIC_SIZE as usize, |result| match op {
                AtomicOp::FetchAdd(value) => peer.fetch_add(result, remote, value),
                AtomicOp::CompareSwap {
                    expected,
                    new_value,
                } => peer.compare_swap(result, remote, expected, new_value),
            })
    }

    /// Runs `op` on this node's own memory: a peer posts it as an RDMA
    /// atomic, so this node's device executes it like every other node's
    /// atomics on the word. The device's atomics are not atomic with respect
    /// to CPU instructions.
    ///
    /// # Errors
    ///
    /// `EHOSTUNREACH` if no peer is connected.
    fn atomic_by_peer(&self, target: AtomicTarget, op: AtomicOp) -> Result<u64> {
        let helper = self
            .core
            .connected_peers()?
            .first()
            .copied()
            .ok_or_else(errno::EHOSTUNREACH)?;
        let peer = self.core.peer(helper)?;
        let (compare_swap, compare, swap) = match op {
            AtomicOp::FetchAdd(value) => (false, value, 0),
            AtomicOp::CompareSwap {
                expected,
                new_value,
            } => (true, expected, new_value),
        };
        // Not interruptible: once sent, the operation may have happened, and
        // its result (a lock taken, say) must not be lost.
        let reply = self
            .core
            .requests
            .call_uninterruptible(&peer, |request_id| {
                AtomicMessage::AtomicRequest {
                    request_id,
                    addr: target.addr,
                    rkey: target.rkey,
                    compare_swap,
                    compare,
                    swap,
                }
                .to_frame()
            })?;
        match AtomicMessage::from_frame(&reply) {
            Some(AtomicMessage::AtomicReply { status, old, .. }) => {
                status.to_result().map(|()| old)
            }
            _ => Err(reply.status().to_error()),
        }
    }

    /// Runs a peer's [`AtomicMessage::AtomicRequest`] on that peer's own
    /// memory (never on a third node's) and builds the reply.
    fn atomic_for_peer(&self, from: NodeId, request: AtomicMessage) -> Option<Frame> {
        let AtomicMessage::AtomicRequest {
            request_id,
            addr,
            rkey,
            compare_swap,
            compare,
            swap,
        } = request
        else {
            return None;
        };
        let op = if compare_swap {
            AtomicOp::CompareSwap {
                expected: compare,
                new_value: swap,
            }
        } else {
            AtomicOp::FetchAdd(compare)
        };
        let target = AtomicTarget {
            node: from,
            addr,
            rkey,
        };
        let done = if from == self.core.node_id() {
            Err(EINVAL)
        } else {
            self.atomic_on(target, op)
        };
        let reply = AtomicMessage::AtomicReply {
            request_id,
            status: Status::of(&done),
            old: done.unwrap_or(0),
        };
        Some(reply.to_frame())
    }
}

impl Subsystem for Atomics {
    fn on_message(&self, _peer: &Arc<Peer>, frame: &Frame) -> Handling {
        // The atomic waits for the device: a worker runs it.
        match AtomicMessage::from_frame(frame) {
            Some(AtomicMessage::AtomicRequest { .. }) => Handling::Defer,
            Some(AtomicMessage::AtomicReply { .. }) | None => Handling::Done,
        }
    }

    fn serve(&self, peer: &Arc<Peer>, frame: &Frame) -> Option<Frame> {
        self.atomic_for_peer(peer.node, AtomicMessage::from_frame(frame)?)
    }
}
