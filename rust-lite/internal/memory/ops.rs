// SPDX-License-Identifier: GPL-2.0

//! Memory-like operations on LMRs (`lite_remote_memset`, `lite_memcpy`,
//! `lite_memmove`), each part executed by the node holding the bytes.
//!
//! The caller cuts the range into pieces that stay inside one chunk (one
//! source and one destination chunk for a copy). A piece in a chunk this
//! node holds is done here; any other piece is sent as a request to the
//! node holding the (source) chunk, which sets the bytes itself or copies
//! them straight to the node holding the destination, so data never makes
//! a round trip through the caller.

use crate::internal::node_id::NodeId;
use kernel::{prelude::*, sync::Arc};

use super::{
    chunk::{check_range, copy_pieces, pieces_in, spans},
    handle::LmrHandle,
    lmr::{begin_both, Lmr},
    ops_wire::MemoryOpMessage,
    permission::Permission,
    transfer::{staging_buffer, MAX_PIECE},
};
use crate::internal::{
    core::{
        chunk_memory::ChunkMemory,
        peer::Peer,
        subsystem::{Handling, Subsystem},
        wire::{Frame, Status},
        Core,
    },
    process::Process,
};

/// One end of a copy: a place in an LMR.
#[derive(Clone, Copy)]
pub(crate) struct CopyEnd {
    /// The caller's handle of the LMR.
    pub(crate) handle: LmrHandle,
    /// The offset in the LMR.
    pub(crate) offset: u64,
}

impl CopyEnd {
    /// `offset` of the LMR of raw handle `handle`.
    pub(crate) fn new(handle: u64, offset: u64) -> Self {
        CopyEnd {
            handle: LmrHandle::from_raw(handle),
            offset,
        }
    }
}

/// Memory operations of a joined node, on its callers' LMRs and, for other
/// nodes, on the chunks it holds.
pub(crate) struct MemoryOps {
    core: Arc<Core>,
}

impl MemoryOps {
    /// Memory operations over `core`.
    pub(crate) fn new(core: Arc<Core>) -> Result<Arc<Self>> {
        Ok(Arc::new(MemoryOps { core }, GFP_KERNEL)?)
    }

    /// `lite_remote_memset`: sets `len` bytes at `offset` of `handle` to `byte`.
    ///
    /// # Errors
    ///
    /// `EINVAL` byte above 255 or bad range; handle errors; errors of the
    /// nodes holding the bytes.
    pub(crate) fn memset(
        &self,
        process: &Process,
        handle: LmrHandle,
        offset: u64,
        len: u64,
        byte: u32,
    ) -> Result {
        let byte = u8::try_from(byte).map_err(|_| EINVAL)?;
        let lmr = process.permitted(handle, Permission::WRITE)?;
        check_range(lmr.size, offset, len)?;
        let _use = lmr.begin()?;
        for piece in pieces_in(lmr.geometry, offset, len, u64::MAX) {
            let chunk = lmr.chunks.get(piece.chunk).ok_or(EINVAL)?;
            let at = usize::try_from(piece.chunk_offset).map_err(|_| EINVAL)?;
            let piece_len = usize::try_from(piece.len).map_err(|_| EINVAL)?;
            match &chunk.local {
                Some(memory) => memory.fill(at, piece_len, byte)?,
                None => {
                    let peer = self.core.peer(chunk.reach()?)?;
                    let reply = self.core.requests.call(&peer, |request_id| {
                        MemoryOpMessage::MemsetRequest {
                            request_id,
                            chunk_id: chunk.chunk_id(),
                            offset: piece.chunk_offset,
                            len: piece.len,
                            byte,
                        }
                        .to_frame()
                    })?;
                    reply.status().to_result()?;
                }
            }
        }
        Ok(())
    }

    /// `lite_memcpy` (`overlap_safe` false) and `lite_memmove` (true):
    /// copies `len` bytes from `from` to `to`.
    ///
    /// # Errors
    ///
    /// `EINVAL` bad ranges; handle errors; errors of the nodes doing the copy.
    pub(crate) fn copy(
        &self,
        process: &Process,
        from: CopyEnd,
        to: CopyEnd,
        len: u64,
        overlap_safe: bool,
    ) -> Result {
        let (src_offset, dst_offset) = (from.offset, to.offset);
        let src = process.permitted(from.handle, Permission::READ)?;
        let dst = process.permitted(to.handle, Permission::WRITE)?;
        check_range(src.size, src_offset, len)?;
        check_range(dst.size, dst_offset, len)?;
        let _uses = begin_both(&src, &dst)?;
        let backward = overlap_safe && same_memory(&src, &dst) && dst_offset > src_offset;
        for piece in copy_pieces(
            src.geometry,
            src_offset,
            dst.geometry,
            dst_offset,
            len,
            backward,
        ) {
            let from = src.chunks.get(piece.src_chunk).ok_or(EINVAL)?;
            let to = dst.chunks.get(piece.dst_chunk).ok_or(EINVAL)?;
            let dst_addr = to.addr().checked_add(piece.dst_at).ok_or(EINVAL)?;
            match &from.local {
                Some(memory) => {
                    let target = match to.local.as_deref() {
                        Some(memory) => CopyTarget::Local(memory, piece.dst_at),
                        None => CopyTarget::Remote {
                            node: to.reach()?,
                            addr: dst_addr,
                            rkey: to.rkey(),
                        },
                    };
                    self.copy_out(memory, piece.src_at, piece.len, target)?;
                }
                None => {
                    let peer = self.core.peer(from.reach()?)?;
                    let dst_node = to.reach()?;
                    let reply = self.core.requests.call(&peer, |request_id| {
                        MemoryOpMessage::CopyRequest {
                            request_id,
                            src_chunk_id: from.chunk_id(),
                            src_offset: piece.src_at,
                            len: piece.len,
                            dst_node,
                            dst_chunk_id: to.chunk_id(),
                            dst_addr,
                            dst_rkey: to.rkey(),
                        }
                        .to_frame()
                    })?;
                    reply.status().to_result()?;
                }
            }
        }
        Ok(())
    }

    /// Copies `len` bytes at `src_at` of `src` (held here) to `target`.
    fn copy_out(&self, src: &ChunkMemory, src_at: u64, len: u64, target: CopyTarget<'_>) -> Result {
        let src_at = usize::try_from(src_at).map_err(|_| EINVAL)?;
        let len = usize::try_from(len).map_err(|_| EINVAL)?;
        let (node, addr, rkey) = match target {
            CopyTarget::Local(dst, dst_at) => {
                let dst_at = usize::try_from(dst_at).map_err(|_| EINVAL)?;
                return dst.copy_from(dst_at, src, src_at, len);
            }
            CopyTarget::Remote { node, addr, rkey } => (node, addr, rkey),
        };
        let peer = self.core.peer(node)?;
        // `src_at`, `len` and `addr` come from a peer's request when this
        // node executes a copy for it: offsets are added with a check.
        if let Some(buffer) = src.as_buffer() {
            for (at, n) in spans(len, MAX_PIECE as usize) {
                let from = src_at.checked_add(at).ok_or(EINVAL)?;
                let to = addr.checked_add(at as u64).ok_or(EINVAL)?;
                peer.rdma_write(buffer, from, n, to, rkey)?;
            }
            return Ok(());
        }
        // Pinned user pages are not a LITE buffer: stage them.
        let staging = staging_buffer(&self.core, len as u64)?;
        for (at, n) in spans(len, staging.len()) {
            let from = src_at.checked_add(at).ok_or(EINVAL)?;
            let to = addr.checked_add(at as u64).ok_or(EINVAL)?;
            src.copy_to_buffer(from, &staging, n)?;
            peer.rdma_write(&staging, 0, n, to, rkey)?;
        }
        Ok(())
    }

    /// Holder side of a [`MemoryOpMessage::MemsetRequest`].
    fn execute_memset(&self, chunk_id: u64, offset: u64, len: u64, byte: u8) -> Result {
        let memory = self.core.store.get(chunk_id)?;
        let at = usize::try_from(offset).map_err(|_| EINVAL)?;
        let len = usize::try_from(len).map_err(|_| EINVAL)?;
        memory.fill(at, len, byte)
    }

    /// Holder side of a [`MemoryOpMessage::CopyRequest`].
    fn execute_copy(
        &self,
        src_chunk_id: u64,
        src_offset: u64,
        len: u64,
        dst: CopyDestination,
    ) -> Result {
        let src = self.core.store.get(src_chunk_id)?;
        if dst.node == self.core.node_id() {
            let local = self.core.store.get(dst.chunk_id)?;
            let dst_at = dst
                .addr
                .checked_sub(local.remote_range(0, 0)?.0)
                .ok_or(EINVAL)?;
            return self.copy_out(&src, src_offset, len, CopyTarget::Local(&local, dst_at));
        }
        let target = CopyTarget::Remote {
            node: dst.node,
            addr: dst.addr,
            rkey: dst.rkey,
        };
        self.copy_out(&src, src_offset, len, target)
    }
}

impl Subsystem for MemoryOps {
    fn on_message(&self, _peer: &Arc<Peer>, frame: &Frame) -> Handling {
        // Both may wait for RDMA: a worker runs them.
        match MemoryOpMessage::from_frame(frame) {
            Some(_) => Handling::Defer,
            None => Handling::Done,
        }
    }

    fn serve(&self, _peer: &Arc<Peer>, frame: &Frame) -> Option<Frame> {
        let (request_id, done) = match MemoryOpMessage::from_frame(frame)? {
            MemoryOpMessage::MemsetRequest {
                request_id,
                chunk_id,
                offset,
                len,
                byte,
            } => (request_id, self.execute_memset(chunk_id, offset, len, byte)),
            MemoryOpMessage::CopyRequest {
                request_id,
                src_chunk_id,
                src_offset,
                len,
                dst_node,
                dst_chunk_id,
                dst_addr,
                dst_rkey,
            } => (
                request_id,
                self.execute_copy(
                    src_chunk_id,
                    src_offset,
                    len,
                    CopyDestination {
                        node: dst_node,
                        chunk_id: dst_chunk_id,
                        addr: dst_addr,
                        rkey: dst_rkey,
                    },
                ),
            ),
        };
        (request_id != 0).then(|| Frame::status_reply(request_id, Status::of(&done)))
    }
}

/// Where a [`MemoryOpMessage::CopyRequest`] sends its bytes.
struct CopyDestination {
    /// The node holding the destination chunk.
    node: NodeId,
    /// The destination chunk in `node`'s memory store.
    chunk_id: u64,
    /// Remote address of the first destination byte.
    addr: u64,
    /// Remote key covering it.
    rkey: u32,
}

/// Where [`MemoryOps::copy_out`] puts the bytes.
enum CopyTarget<'a> {
    /// Memory this node holds, at an offset.
    Local(&'a ChunkMemory, u64),
    /// Memory on another node, reached with RDMA.
    Remote {
        /// The node holding it.
        node: NodeId,
        /// Remote address of the first byte.
        addr: u64,
        /// Remote key covering it.
        rkey: u32,
    },
}

/// Whether two LMRs are views of the same memory.
fn same_memory(a: &Lmr, b: &Lmr) -> bool {
    match (a.chunks.first(), b.chunks.first()) {
        (Some(x), Some(y)) => x.node() == y.node() && x.chunk_id() == y.chunk_id(),
        _ => false,
    }
}
