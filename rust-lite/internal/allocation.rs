// SPDX-License-Identifier: GPL-2.0

//! Creating and freeing LMRs (`lite_alloc_remote`, `lite_free`).

use kernel::{prelude::*, sync::Arc};

use super::{
    chunk::{self, chunk_count, chunk_len},
    cluster::Cluster,
    control_wire::ControlMessage,
    lmr::{Chunk, Lmr, ALLOC_ATOMIC, ALLOC_FLAGS, ATOMIC_SIZE},
    MAX_NODES, NODE_SPREAD,
};
use crate::{errno, verbs::DmaBuffer};

impl Cluster {
    /// Allocates an LMR of `size` bytes on `target` and returns its handle.
    ///
    /// `target` is a node id (this node included) or [`NODE_SPREAD`] to
    /// spread the chunks round robin over every other node (over this node
    /// if it is alone).
    ///
    /// # Errors
    ///
    /// `EINVAL` for a bad size, flags or node id; `EHOSTUNREACH` if `target`
    /// is not a member; `ENOMEM` if a node is out of memory.
    pub(crate) fn alloc_remote(&self, target: u32, size: u64, flags: u32, password: u64) -> Result<u64> {
        chunk::check_size(size)?;
        if flags & !ALLOC_FLAGS != 0 || (flags & ALLOC_ATOMIC != 0 && size != ATOMIC_SIZE) {
            return Err(EINVAL);
        }
        if target as usize >= MAX_NODES {
            return Err(EINVAL);
        }
        let spread_over = if target == NODE_SPREAD {
            let mut peers = self.connected_peers()?;
            if peers.is_empty() {
                peers.push(self.node_id, GFP_KERNEL)?;
            }
            Some(peers)
        } else {
            if target != self.node_id {
                self.peer(target)?;
            }
            None
        };
        let count = chunk_count(size);
        let mut chunks = KVec::with_capacity(count, GFP_KERNEL)?;
        for index in 0..count {
            let node = match &spread_over {
                Some(nodes) => chunk::spread_target(nodes, index).ok_or(EINVAL)?,
                None => target,
            };
            match self.alloc_chunk(node, chunk_len(size, index)) {
                Ok(chunk) => chunks.push(chunk, GFP_KERNEL)?,
                Err(e) => {
                    self.release_chunks(&chunks);
                    return Err(e);
                }
            }
        }
        let lmr = Lmr::new(size, flags, password, chunks)?;
        let inserted = self.lmrs.lock().insert(lmr.clone());
        inserted.inspect_err(|_| self.release_chunks(&lmr.chunks))
    }

    fn alloc_chunk(&self, node: u32, len: u64) -> Result<Chunk> {
        if node == self.node_id {
            let len = usize::try_from(len).map_err(|_| EINVAL)?;
            return Ok(Chunk::Local(DmaBuffer::new(&self.device.device, len)?));
        }
        let peer = self.peer(node)?;
        let reply = self.requests.call(&peer, |request_id| ControlMessage::AllocRequest {
            request_id,
            size: len,
        })?;
        match reply {
            ControlMessage::AllocReply {
                status: 0,
                chunk_id,
                addr,
                rkey,
                ..
            } => Ok(Chunk::Remote {
                node,
                chunk_id,
                addr,
                rkey,
            }),
            ControlMessage::AllocReply { status, .. } if status < 0 => Err(Error::from_errno(status)),
            _ => Err(errno::EPROTO()),
        }
    }

    /// Gives back the remote chunks of an LMR; local ones go with the LMR.
    fn release_chunks(&self, chunks: &[Chunk]) {
        for chunk in chunks {
            let Chunk::Remote { node, chunk_id, .. } = *chunk else {
                continue;
            };
            let result = self.peer(node).and_then(|peer| {
                self.requests.call(&peer, |request_id| ControlMessage::FreeRequest {
                    request_id,
                    chunk_id,
                })
            });
            match result {
                Ok(ControlMessage::FreeReply { status: 0, .. }) => {}
                Ok(other) => pr_warn!("node {} refused to free a chunk: {:?}\n", node, other),
                Err(e) => pr_warn!("cannot free a chunk on node {}: {:?}\n", node, e),
            }
        }
    }

    /// Looks up the LMR named by `handle`.
    ///
    /// # Errors
    ///
    /// `EBADF` if no LMR has that handle.
    pub(crate) fn lmr(&self, handle: u64) -> Result<Arc<Lmr>> {
        self.lmrs.lock().get(handle).cloned().ok_or(EBADF)
    }

    /// `lite_free`: releases the LMR once operations under way have finished.
    ///
    /// # Errors
    ///
    /// `EBADF` if no LMR has that handle.
    pub(crate) fn free(&self, handle: u64) -> Result {
        let lmr = self.lmrs.lock().remove(handle).ok_or(EBADF)?;
        lmr.close();
        self.release_chunks(&lmr.chunks);
        Ok(())
    }
}
