// SPDX-License-Identifier: GPL-2.0

//! Moving the chunks of this node's LMRs off a node that leaves the
//! cluster, so that a graceful leave loses no data.
//!
//! The owner of an LMR moves its chunks itself, while the LMR is paused (no
//! operation of this node runs on it and none starts): it allocates a chunk
//! on another node, copies the bytes through a staging buffer (an RDMA
//! read from the leaving node, an RDMA write to the new one), points the
//! LMR at the new chunk and frees the old one. A chunk never moves to this
//! node (its chunks here are local memory, which a chunk reference cannot
//! become) nor to the leaving node.

use crate::internal::node_id::NodeId;
use kernel::{prelude::*, sync::Arc};

use super::{
    lmr::{ChunkRef, Lmr, LmrPause, Place},
    transfer::staging_buffer,
    RemoteMemory,
};

impl RemoteMemory {
    /// This node's LMRs with a chunk on `node`, with their ids.
    pub(crate) fn lmrs_with_chunks_on(&self, node: NodeId) -> Result<KVec<(u64, Arc<Lmr>)>> {
        let lmrs = self.lmrs.lock();
        let mut ids = KVec::with_capacity(lmrs.len(), GFP_KERNEL)?;
        lmrs.ids_into(&mut ids)?;
        let mut found = KVec::new();
        for id in ids.iter() {
            if let Some(lmr) = lmrs.get(*id) {
                if lmr
                    .chunks
                    .iter()
                    .any(|c| c.local.is_none() && c.node() == node)
                {
                    found.push((*id, lmr.clone()), GFP_KERNEL)?;
                }
            }
        }
        Ok(found)
    }

    /// Moves every chunk of `lmr` on `leaving` to one of `targets` (round
    /// robin from `*next`), while `pause` holds the LMR; returns how many
    /// moved. A chunk that cannot move stays where it is.
    ///
    /// # Errors
    ///
    /// `ENOSPC` if `targets` is empty, else the first error of a move (the
    /// chunks moved before it stay moved).
    pub(crate) fn move_chunks_off(
        &self,
        lmr: &Lmr,
        pause: &LmrPause<'_>,
        leaving: NodeId,
        targets: &[NodeId],
        next: &mut usize,
    ) -> Result<usize> {
        let mut moved = 0;
        for chunk in lmr.chunks.iter() {
            if chunk.local.is_some() || chunk.node() != leaving {
                continue;
            }
            let target = targets
                .get(*next % targets.len().max(1))
                .copied()
                .ok_or(ENOSPC)?;
            *next = next.wrapping_add(1);
            self.move_chunk(chunk, pause, target)?;
            // PANIC: at most one per chunk of the LMR.
            moved += 1;
        }
        Ok(moved)
    }

    /// Moves `chunk` to `target` (see the module documentation).
    fn move_chunk(&self, chunk: &ChunkRef, pause: &LmrPause<'_>, target: NodeId) -> Result {
        let old = chunk.place();
        let new = self.alloc_chunk(target, chunk.len)?;
        if let Err(e) = self.copy_chunk(old, new.place(), chunk.len) {
            self.release_chunks(core::slice::from_ref(&new));
            return Err(e);
        }
        chunk.relocate(new.place(), pause);
        // The old chunk is freed on the leaving node, which still serves.
        self.release_chunks(&[ChunkRef::new(old, chunk.len, None)]);
        Ok(())
    }

    /// Copies `len` bytes from the chunk at `from` to the one at `to`.
    fn copy_chunk(&self, from: Place, to: Place, len: u64) -> Result {
        let source = self.core.peer(from.node)?;
        let destination = self.core.peer(to.node)?;
        let staging = staging_buffer(&self.core, len)?;
        let piece = staging.len() as u64;
        let mut done = 0u64;
        while done < len {
            let n = piece.min(len - done);
            let n_bytes = usize::try_from(n).map_err(|_| EINVAL)?;
            let read_at = from.addr.checked_add(done).ok_or(EINVAL)?;
            let write_at = to.addr.checked_add(done).ok_or(EINVAL)?;
            source.rdma_read(&staging, 0, n_bytes, read_at, from.rkey)?;
            destination.rdma_write(&staging, 0, n_bytes, write_at, to.rkey)?;
            // PANIC: `n <= len - done`, so the sum is at most `len`.
            done += n;
        }
        Ok(())
    }
}
