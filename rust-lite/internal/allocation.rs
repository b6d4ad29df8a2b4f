// SPDX-License-Identifier: GPL-2.0

//! Creating and releasing LMRs (`lite_alloc_remote`, `lite_free`).

use kernel::{prelude::*, sync::Arc};

use super::{
    chunk::{self, chunk_count, chunk_len, Geometry},
    cluster::Cluster,
    control_wire::ControlMessage,
    lmr::{ChunkRef, Lmr, Origin, ALLOC_ATOMIC, ALLOC_FLAGS, ATOMIC_SIZE},
    permission::Permission,
    process::{HandleEntry, Process, Role},
    MAX_NODES, NODE_SPREAD,
};
use crate::errno;

impl Cluster {
    /// `lite_alloc_remote`: allocates an LMR of `size` bytes on `target` for
    /// `process` and returns its handle.
    ///
    /// `target` is a node id (this node included) or [`NODE_SPREAD`] to
    /// spread the chunks round robin over every other node (over this node
    /// if it is alone).
    ///
    /// # Errors
    ///
    /// `EINVAL` for a bad size, flags or node id; `EHOSTUNREACH` if `target`
    /// is not a member; `ENOMEM` if a node is out of memory.
    pub(crate) fn alloc_remote(
        &self,
        process: &Process,
        target: u32,
        size: u64,
        flags: u32,
        password: u64,
    ) -> Result<u64> {
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
        let slot = Lmr::reserve()?;
        let mut chunks = KVec::with_capacity(count, GFP_KERNEL)?;
        for index in 0..count {
            let node = match &spread_over {
                Some(nodes) => chunk::spread_target(nodes, index).ok_or(EINVAL)?,
                None => target,
            };
            // `chunks` has room for every chunk, so pushing cannot fail.
            match self.alloc_chunk(node, chunk_len(size, index)) {
                Ok(chunk) => chunks.push(chunk, GFP_KERNEL)?,
                Err(e) => {
                    self.release_chunks(&chunks);
                    return Err(e);
                }
            }
        }
        let mut permission = Permission::READ
            .union(Permission::WRITE)
            .union(Permission::SHARE);
        if flags & ALLOC_ATOMIC != 0 {
            permission = permission.union(Permission::ATOMIC);
        }
        let lmr = Lmr::new(
            slot,
            size,
            Geometry::ALLOCATED,
            permission,
            Origin::Allocated,
            chunks,
        );
        self.adopt(process, lmr, password)
    }

    /// Records `lmr`, just created on this node, and gives `process` an
    /// owner handle to it; releases the LMR's memory if that fails.
    pub(crate) fn adopt(&self, process: &Process, lmr: Arc<Lmr>, password: u64) -> Result<u64> {
        let lmr_id = match self.lmrs.lock().insert(lmr.clone()) {
            Ok(id) => id,
            Err(e) => {
                self.release_chunks(&lmr.chunks);
                return Err(e);
            }
        };
        let entry = HandleEntry {
            lmr: lmr.clone(),
            permission: lmr.permission.union(Permission::ADMIN),
            password,
            role: Role::Owner { lmr_id },
        };
        process.insert(entry).inspect_err(|_| {
            self.destroy_lmr(lmr_id, &lmr);
        })
    }

    fn alloc_chunk(&self, node: u32, len: u64) -> Result<ChunkRef> {
        let rkey = self.device.pd.global_rkey();
        if node == self.node_id {
            let (chunk_id, memory) = self
                .store
                .allocate(&self.device.device, self.node_id, len)?;
            return Ok(ChunkRef {
                node,
                chunk_id,
                addr: memory.dma_range(0, memory.len())?,
                rkey,
                len,
                local: Some(memory),
            });
        }
        let peer = self.peer(node)?;
        let reply = self
            .requests
            .call(&peer, |request_id| ControlMessage::AllocRequest {
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
            } => Ok(ChunkRef {
                node,
                chunk_id,
                addr,
                rkey,
                len,
                local: None,
            }),
            ControlMessage::AllocReply { status, .. } if status < 0 => {
                Err(Error::from_errno(status))
            }
            _ => Err(errno::EPROTO()),
        }
    }

    /// Gives back the chunks of an LMR to the nodes holding them.
    pub(crate) fn release_chunks(&self, chunks: &[ChunkRef]) {
        for chunk in chunks {
            if chunk.node == self.node_id {
                if let Err(e) = self.store.release(self.node_id, chunk.chunk_id) {
                    pr_warn!("cannot release a local chunk: {:?}\n", e);
                }
                continue;
            }
            let chunk_id = chunk.chunk_id;
            let result = self.peer(chunk.node).and_then(|peer| {
                self.requests.call_uninterruptible(&peer, |request_id| {
                    ControlMessage::FreeRequest {
                        request_id,
                        chunk_id,
                    }
                })
            });
            match result {
                Ok(ControlMessage::StatusReply { status: 0, .. }) => {}
                Ok(other) => pr_warn!("node {} refused to free a chunk: {:?}\n", chunk.node, other),
                Err(e) => pr_warn!("cannot free a chunk on node {}: {:?}\n", chunk.node, e),
            }
        }
    }

    /// `lite_free` / `lite_deregister_lmr`: releases the LMR behind an owner
    /// handle of `process`, revoking every mapping of it first.
    ///
    /// # Errors
    ///
    /// `EBADF` unknown handle, `EPERM` without ADMIN.
    pub(crate) fn free(&self, process: &Process, handle: u64) -> Result {
        let (lmr, permission, _, role) = process.handle(handle)?;
        permission.require(Permission::ADMIN)?;
        let Role::Owner { lmr_id } = role else {
            return Err(EPERM);
        };
        process.handles.lock().remove(handle).ok_or(EBADF)?;
        let released = self.destroy_lmr(lmr_id, &lmr);
        if !released && lmr.origin == Origin::KernelRegistered {
            // The kernel caller owns the memory and must not free it.
            return Err(errno::ETIMEDOUT());
        }
        Ok(())
    }

    /// Closes LMR `lmr_id` of this node for everyone and releases its memory.
    ///
    /// Operations under way finish first; handles of other processes and
    /// mappings on other nodes fail with `EKEYREVOKED` afterwards. If a node
    /// that mapped the LMR does not confirm the revocation, the memory is
    /// kept rather than freed under a possible writer. Returns whether the
    /// memory was released.
    pub(crate) fn destroy_lmr(&self, lmr_id: u64, lmr: &Arc<Lmr>) -> bool {
        lmr.close(errno::EKEYREVOKED());
        self.unpublish(lmr_id);
        let registered = self.lmrs.lock().remove(lmr_id);
        drop(registered);
        if self.revoke_mappings(lmr_id, lmr.mappers()) {
            self.release_chunks(&lmr.chunks);
            true
        } else {
            pr_warn!(
                "LMR {:#x}: a mapper did not confirm revocation; its memory is kept\n",
                lmr_id
            );
            false
        }
    }
}
