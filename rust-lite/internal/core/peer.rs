// SPDX-License-Identifier: GPL-2.0

//! Another node of the cluster and the connection to it.

use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use kernel::{prelude::*, sync::Arc};

use super::wire::Frame;
use crate::{
    errno,
    internal::{node_id::NodeId, util::clock::now_ms},
    verbs::{CompletionQueue, Connection, DmaBuffer, PortConfig, ProtectionDomain, RemoteEnd},
};

/// A peer node.
///
/// One RC connection per peer is shared by every process on this node, as
/// in the original LITE; it carries both one-sided RDMA and control messages.
///
/// A peer is connected once, and gone (fenced) at most once afterwards: a
/// node that rejoins gets a new `Peer` with a new connection, so nothing of
/// its earlier incarnation can arrive through the new one.
pub(crate) struct Peer {
    /// The peer's node id.
    pub(crate) node: NodeId,
    /// The manager's count of this node id's joins, for this peer.
    pub(crate) incarnation: u32,
    /// The connection to the peer.
    pub(crate) conn: Connection,
    connected: AtomicBool,
    /// The connection failed and the manager was told.
    failed: AtomicBool,
    /// The manager declared the peer dead (or it left): its connection is
    /// fenced and every operation on it fails with `EHOSTDOWN`.
    gone: AtomicBool,
    /// When the peer last showed it lives ([`now_ms`]): a message from it
    /// arrived, or its device acknowledged an operation; 0 if never. The
    /// manager asks for it before it declares a silent node dead.
    last_heard_ms: AtomicU64,
}

impl Peer {
    /// Creates the connection to `node`, not yet connected.
    pub(crate) fn new(
        node: NodeId,
        incarnation: u32,
        pd: &Arc<ProtectionDomain>,
        recv_cq: &Arc<CompletionQueue>,
        port: &PortConfig,
    ) -> Result<Arc<Self>> {
        Ok(Arc::new(
            Peer {
                node,
                incarnation,
                conn: Connection::new(pd, recv_cq, port, node.get())?,
                connected: AtomicBool::new(false),
                failed: AtomicBool::new(false),
                gone: AtomicBool::new(false),
                last_heard_ms: AtomicU64::new(0),
            },
            GFP_KERNEL,
        )?)
    }

    /// Connects to the peer's queue pair; the peer is usable afterwards.
    pub(crate) fn connect(&self, remote: &RemoteEnd, port: &PortConfig) -> Result {
        self.conn.connect(remote, port)?;
        self.connected.store(true, Ordering::Release);
        Ok(())
    }

    /// Notes that the connection failed; returns whether this is the first
    /// time it is noted.
    pub(crate) fn note_failure(&self) -> bool {
        !self.failed.swap(true, Ordering::AcqRel)
    }

    /// Records that the peer just showed it lives.
    pub(crate) fn heard(&self) {
        self.last_heard_ms.store(now_ms(), Ordering::Relaxed);
    }

    /// How long ago the peer last showed it lives, in ms, or `None` if it
    /// never did.
    pub(crate) fn heard_ms_ago(&self) -> Option<u64> {
        match self.last_heard_ms.load(Ordering::Relaxed) {
            0 => None,
            at => Some(now_ms().saturating_sub(at)),
        }
    }

    /// Whether the connection is up (connected and not gone).
    pub(crate) fn is_connected(&self) -> bool {
        self.connected.load(Ordering::Acquire) && !self.is_gone()
    }

    /// Whether the peer is gone.
    pub(crate) fn is_gone(&self) -> bool {
        self.gone.load(Ordering::Acquire)
    }

    /// Marks the peer gone and fences its connection; returns whether this
    /// call did it (each peer is fenced once).
    pub(crate) fn fence(&self) -> bool {
        if self.gone.swap(true, Ordering::AcqRel) {
            return false;
        }
        if let Err(e) = self.conn.fence() {
            pr_err!(
                "cannot fence the connection to node {}: {:?}\n",
                self.node,
                e
            );
        }
        true
    }

    /// `error`, or `EHOSTDOWN` if it came from the peer being gone (a
    /// request flushed by the fence fails with `EIO`).
    pub(crate) fn explain(&self, error: Error) -> Error {
        if self.is_gone() {
            errno::EHOSTDOWN()
        } else {
            error
        }
    }

    /// Sends a control message.
    pub(crate) fn send(&self, frame: &Frame) -> Result {
        self.on_connection(|conn| conn.send_message(&frame.encode()))
    }

    /// Sends a control message without waiting for the peer's device to
    /// acknowledge it ([`Connection::post_message`]): a message that fails
    /// breaks the connection, which makes the peer a suspect, but its
    /// sender does not learn of it. For messages whose loss the receiver
    /// notices (a reply its request waits for).
    pub(crate) fn post(&self, frame: &Frame) -> Result {
        if self.is_gone() {
            return Err(errno::EHOSTDOWN());
        }
        // Not acknowledged yet: no sign of life.
        self.conn
            .post_message(&frame.encode())
            .map_err(|e| self.explain(e))
    }

    /// Fails at once if the peer is gone, else runs `op` on the connection,
    /// explaining its error; an operation that completed was acknowledged
    /// by the peer's device, which shows the peer lives.
    fn on_connection<T>(&self, op: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        if self.is_gone() {
            return Err(errno::EHOSTDOWN());
        }
        let done = op(&self.conn).map_err(|e| self.explain(e))?;
        self.heard();
        Ok(done)
    }

    /// [`Connection::rdma_write`], failing with `EHOSTDOWN` once the peer is gone.
    pub(crate) fn rdma_write(
        &self,
        local: &DmaBuffer,
        at: usize,
        len: usize,
        remote_addr: u64,
        rkey: u32,
    ) -> Result {
        self.on_connection(|conn| conn.rdma_write(local, at, len, remote_addr, rkey))
    }

    /// [`Connection::rdma_read`], failing with `EHOSTDOWN` once the peer is gone.
    pub(crate) fn rdma_read(
        &self,
        local: &DmaBuffer,
        at: usize,
        len: usize,
        remote_addr: u64,
        rkey: u32,
    ) -> Result {
        self.on_connection(|conn| conn.rdma_read(local, at, len, remote_addr, rkey))
    }

    /// [`Connection::rdma_write_imm`], failing with `EHOSTDOWN` once the peer is gone.
    pub(crate) fn rdma_write_imm(
        &self,
        local: &DmaBuffer,
        at: usize,
        len: usize,
        remote: (u64, u32),
        imm: u32,
    ) -> Result {
        self.on_connection(|conn| conn.rdma_write_imm(local, at, len, remote, imm))
    }

    /// [`Connection::rdma_write_imm_ordered`], failing with `EHOSTDOWN` once
    /// the peer is gone (`once_posted` is then told nothing was posted).
    pub(crate) fn rdma_write_imm_ordered(
        &self,
        local: &DmaBuffer,
        len: usize,
        remote: (u64, u32),
        imm: u32,
        once_posted: impl FnOnce(bool),
    ) -> Result {
        if self.is_gone() {
            once_posted(false);
            return Err(errno::EHOSTDOWN());
        }
        self.conn
            .rdma_write_imm_ordered(local, len, remote, imm, once_posted)
            .map_err(|e| self.explain(e))
    }

    /// [`Connection::rdma_write_imm_inline`], failing with `EHOSTDOWN` once
    /// the peer is gone (`once_posted` is then told nothing was posted).
    pub(crate) fn rdma_write_imm_inline(
        &self,
        bytes: &[u8],
        remote: (u64, u32),
        imm: u32,
        once_posted: impl FnOnce(bool),
    ) -> Result {
        if self.is_gone() {
            once_posted(false);
            return Err(errno::EHOSTDOWN());
        }
        self.conn
            .rdma_write_imm_inline(bytes, remote, imm, once_posted)
            .map_err(|e| self.explain(e))
    }

    /// [`Connection::fetch_add`], failing with `EHOSTDOWN` once the peer is gone.
    pub(crate) fn fetch_add(
        &self,
        result: &DmaBuffer,
        remote: (u64, u32),
        value: u64,
    ) -> Result<u64> {
        self.on_connection(|conn| conn.fetch_add(result, remote, value))
    }

    /// [`Connection::compare_swap`], failing with `EHOSTDOWN` once the peer is gone.
    pub(crate) fn compare_swap(
        &self,
        result: &DmaBuffer,
        remote: (u64, u32),
        expected: u64,
        new_value: u64,
    ) -> Result<u64> {
        self.on_connection(|conn| conn.compare_swap(result, remote, expected, new_value))
    }
}
