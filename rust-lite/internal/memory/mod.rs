// SPDX-License-Identifier: GPL-2.0

//! Remote memory: LMRs and the chunks that hold their bytes on any node
//! (`lite_alloc_remote`), and moving bytes in and out of them
//! (`lite_rdma_write`, `lite_rdma_read`).
//!
//! An LMR created on this node is recorded in the node's LMR table until it
//! is destroyed (see [`Sharing::destroy_lmr`](super::sharing::Sharing)),
//! which first revokes every mapping other nodes hold of it.

pub(crate) mod chunk;
pub(crate) mod handle;
pub(crate) mod lmr;
pub(crate) mod migration;
pub(crate) mod ops;
pub(crate) mod ops_wire;
pub(crate) mod permission;
pub(crate) mod registration;
pub(crate) mod transfer;
pub(crate) mod wire;

use crate::internal::node_id::NodeId;
use kernel::{
    new_mutex,
    prelude::*,
    sync::{Arc, Mutex},
};

use self::{
    chunk::{check_range, check_size, chunk_count, chunk_len, spread_target, Geometry},
    handle::{LmrHandle, Password},
    lmr::{ChunkRef, Lmr, LmrParts, Origin, Place, ALLOC_ATOMIC, ALLOC_FLAGS, ATOMIC_SIZE},
    permission::Permission,
    transfer::{transfer_lmr, Direction},
    wire::MemoryMessage,
};
use super::{
    core::{
        limits::MAX_NODES,
        peer::Peer,
        subsystem::{Handling, Subsystem},
        wire::{Frame, Status},
        Core,
    },
    process::{HandleEntry, Process, Role},
    qos::{
        admission,
        op_stats::{OpKind, OpTimer},
    },
    quota::{
        self,
        amounts::{Amounts, Resource},
        keep_by_payer, Charge,
    },
    util::{clock::now_ms, slot_table::SlotTable},
};
use crate::errno;

/// How long chunks held for a node that is gone are kept before they are
/// freed, in milliseconds: transfers another node started into them before
/// it heard of the death end well within this.
pub(crate) const ORPHAN_GRACE_MS: u64 = 5000;

/// `lite_alloc_remote` target meaning "spread over the other nodes".
pub(crate) const NODE_SPREAD: NodeId = NodeId::NONE;

/// Remote memory of a joined node.
#[pin_data]
pub(crate) struct RemoteMemory {
    core: Arc<Core>,
    /// LMRs created on this node, by LMR id.
    /// Lock class `lite:lmrs`: see the lock order in [`crate::internal::core`].
    #[pin]
    lmrs: Mutex<SlotTable<Arc<Lmr>>>,
    /// Charges of LMRs whose memory is kept after they went (a mapper did
    /// not confirm their revocation), for as long as the membership.
    #[pin]
    kept_charges: Mutex<KVec<Charge>>,
}

impl RemoteMemory {
    /// Remote memory over `core`, with no LMR yet.
    pub(crate) fn new(core: Arc<Core>) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(RemoteMemory {
                core,
                lmrs <- new_mutex!(SlotTable::new(), "lite:lmrs"),
                kept_charges <- new_mutex!(KVec::new(), "lite:kept_charges"),
            }),
            GFP_KERNEL,
        )
    }

    /// LMRs created on this node, and how many of them are registered memory.
    pub(crate) fn count(&self) -> (usize, usize) {
        let lmrs = self.lmrs.lock();
        let registered = lmrs
            .values()
            .filter(|l| matches!(l.origin, Origin::Registered | Origin::KernelRegistered))
            .count();
        (lmrs.len(), registered)
    }

    /// Keeps `charge` for the rest of the membership: the memory it is for
    /// is not released.
    pub(crate) fn keep_charge(&self, charge: Charge) {
        if charge.is_none() {
            return;
        }
        let refused = keep_by_payer(&mut self.kept_charges.lock(), charge);
        // Without memory for it, the charge goes back early, outside the
        // lock.
        drop(refused);
    }

    /// Removes LMR `lmr_id` from the node's table.
    pub(crate) fn forget(&self, lmr_id: u64) {
        let removed = self.lmrs.lock().remove(lmr_id);
        drop(removed);
    }

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
    /// is not a member; `EDQUOT` beyond the caller's quota or a serving
    /// node's limit for this node; `ENOMEM` if a node is out of memory.
    pub(crate) fn alloc_remote(
        &self,
        process: &Process,
        target: NodeId,
        size: u64,
        flags: u32,
        password: Password,
    ) -> Result<LmrHandle> {
        check_size(size)?;
        if flags & !ALLOC_FLAGS != 0 || (flags & ALLOC_ATOMIC != 0 && size != ATOMIC_SIZE) {
            return Err(EINVAL);
        }
        if target.index() >= MAX_NODES {
            return Err(EINVAL);
        }
        let spread_over = if target == NODE_SPREAD {
            let mut peers = self.core.connected_peers()?;
            if peers.is_empty() {
                peers.push(self.core.node_id(), GFP_KERNEL)?;
            }
            Some(peers)
        } else {
            if target != self.core.node_id() {
                self.core.peer(target)?;
            }
            None
        };
        let charge = self.core.quotas.charge(
            process.payer(),
            Amounts::of(Resource::RemoteMemory, size).with(Resource::Lmrs, 1),
        )?;
        let count = chunk_count(size);
        let slot = Lmr::reserve()?;
        let mut chunks = KVec::with_capacity(count, GFP_KERNEL)?;
        for index in 0..count {
            let node = match &spread_over {
                Some(nodes) => spread_target(nodes, index).ok_or(EINVAL)?,
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
            LmrParts {
                size,
                geometry: Geometry::ALLOCATED,
                permission,
                origin: Origin::Allocated,
                chunks,
                charge,
            },
        );
        self.adopt(process, lmr, password)
    }

    /// Records `lmr`, just created on this node, and gives `process` an
    /// owner handle to it; releases the LMR's memory if that fails.
    pub(crate) fn adopt(
        &self,
        process: &Process,
        lmr: Arc<Lmr>,
        password: Password,
    ) -> Result<LmrHandle> {
        let inserted = self.lmrs.lock().insert(lmr.clone());
        let lmr_id = match inserted {
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
            // Nobody else has seen the LMR: no name, no mapping to revoke.
            lmr.close(crate::errno::EKEYREVOKED());
            self.forget(lmr_id);
            self.release_chunks(&lmr.chunks);
        })
    }

    /// Allocates a chunk of `len` bytes for this node on `node`.
    pub(crate) fn alloc_chunk(&self, node: NodeId, len: u64) -> Result<ChunkRef> {
        if node == self.core.node_id() {
            let (chunk_id, memory) =
                self.core
                    .store
                    .allocate(&self.core.pool, node, len, quota::amounts::UNLIMITED)?;
            let (addr, rkey) = memory.remote_range(0, memory.len())?;
            let place = Place {
                node,
                chunk_id,
                addr,
                rkey,
            };
            return Ok(ChunkRef::new(place, len, Some(memory)));
        }
        let peer = self.core.peer(node)?;
        let reply = self.core.requests.call(&peer, |request_id| {
            MemoryMessage::AllocRequest {
                request_id,
                size: len,
            }
            .to_frame()
        })?;
        match MemoryMessage::from_frame(&reply) {
            Some(MemoryMessage::AllocReply {
                status,
                chunk_id,
                addr,
                rkey,
                ..
            }) => {
                status.to_result()?;
                let place = Place {
                    node,
                    chunk_id,
                    addr,
                    rkey,
                };
                Ok(ChunkRef::new(place, len, None))
            }
            _ => Err(reply.status().to_error()),
        }
    }

    /// Gives back the chunks of an LMR to the nodes holding them.
    pub(crate) fn release_chunks(&self, chunks: &[ChunkRef]) {
        let own = self.core.node_id();
        for chunk in chunks {
            if chunk.is_lost() {
                // Went with its node.
                continue;
            }
            if chunk.node() == own {
                if let Err(e) = self.core.store.release(own, chunk.chunk_id()) {
                    pr_warn!("cannot release a local chunk: {:?}\n", e);
                }
                continue;
            }
            let chunk_id = chunk.chunk_id();
            let result = self.core.peer(chunk.node()).and_then(|peer| {
                self.core
                    .requests
                    .call_uninterruptible(&peer, |request_id| {
                        MemoryMessage::FreeRequest {
                            request_id,
                            chunk_id,
                        }
                        .to_frame()
                    })
            });
            match result.and_then(|reply| reply.status().to_result()) {
                Ok(()) => {}
                // The holder is gone, and the chunk with it.
                Err(e) if e == errno::EHOSTDOWN() => {}
                Err(e) => pr_warn!("cannot free a chunk on node {}: {:?}\n", chunk.node(), e),
            }
        }
    }

    /// Holder side of an [`MemoryMessage::AllocRequest`].
    fn answer_alloc(&self, from: NodeId, request_id: u64, size: u64) -> Frame {
        let allocated = self
            .core
            .store
            .allocate(
                &self.core.pool,
                from,
                size,
                self.core.quotas.node_limit(from),
            )
            .and_then(|(chunk_id, memory)| Ok((chunk_id, memory.remote_range(0, memory.len())?)));
        let reply = match allocated {
            Ok((chunk_id, (addr, rkey))) => MemoryMessage::AllocReply {
                request_id,
                status: Status::OK,
                chunk_id,
                addr,
                rkey,
            },
            Err(e) => MemoryMessage::AllocReply {
                request_id,
                status: e.into(),
                chunk_id: 0,
                addr: 0,
                rkey: 0,
            },
        };
        reply.to_frame()
    }
}

/// One `lite_rdma_write` or `lite_rdma_read`, as both the system calls and
/// the kernel C API describe it.
pub(crate) struct DataOp<'a> {
    /// The LMR.
    pub(crate) handle: LmrHandle,
    /// Which way the bytes go, and where from or to.
    pub(crate) direction: Direction<'a>,
    /// Bytes to move.
    pub(crate) len: u64,
    /// Offset in the LMR.
    pub(crate) offset: u64,
    /// Priority, or `LITE_PRIORITY_NONE` for the process's default.
    pub(crate) priority: u32,
    /// The LMR's password.
    pub(crate) password: Password,
}

impl RemoteMemory {
    /// `lite_rdma_write` / `lite_rdma_read` on a handle of `process`.
    ///
    /// # Errors
    ///
    /// `EINVAL` bad range or priority, handle errors (`EBADF`, `EACCES`,
    /// `EPERM`, `EKEYREVOKED`), `EFAULT`, `EIO`.
    pub(crate) fn transfer(&self, process: &Process, op: DataOp<'_>) -> Result {
        let DataOp {
            handle,
            direction,
            len,
            offset,
            priority,
            password,
        } = op;
        let priority = process.default_priority.resolve(priority)?;
        let (needed, kind) = match direction {
            Direction::Write(_) => (Permission::WRITE, OpKind::Write),
            Direction::Read(_) => (Permission::READ, OpKind::Read),
        };
        let lmr = process.checked(handle, password, needed)?;
        check_range(lmr.size, offset, len)?;
        let _use = lmr.begin()?;
        let admission = admission::admit(priority);
        let timer = OpTimer::start(kind, priority);
        let moved = transfer_lmr(&self.core, &lmr, direction, len, offset);
        timer.finish(admission, len, moved)
    }
}

impl RemoteMemory {
    /// Marks the chunks of this node's LMRs held by `node`, which went, as
    /// lost.
    fn lose_chunks_on(&self, node: NodeId) {
        let lmrs = self.lmrs.lock();
        for lmr in lmrs.values() {
            lmr.lose_chunks_on(node);
        }
    }

    /// Frees the chunks held for gone nodes whose grace period ended
    /// (called periodically).
    pub(crate) fn free_orphans(&self) {
        match self.core.store.free_orphans(now_ms()) {
            Ok(0) => {}
            Ok(freed) => pr_info!("freed {} chunks held for gone nodes\n", freed),
            Err(e) => pr_warn!("cannot free chunks held for gone nodes: {:?}\n", e),
        }
    }
}

impl Subsystem for RemoteMemory {
    /// Chunks of this node's LMRs that the gone node held are lost
    /// (operations on them fail with `EHOSTDOWN`). Chunks held for the gone
    /// node's LMRs are freed after [`ORPHAN_GRACE_MS`]: a third node may
    /// still be finishing a transfer through a mapping of such an LMR when it
    /// hears of the death, and the memory must not be reused under it.
    fn on_peer_gone(&self, node: NodeId) {
        self.lose_chunks_on(node);
        let until = now_ms().saturating_add(ORPHAN_GRACE_MS);
        match self.core.store.orphan(node, until) {
            Ok(0) => {}
            Ok(count) => pr_info!(
                "{} chunks held for node {} are freed in {} ms\n",
                count,
                node,
                ORPHAN_GRACE_MS
            ),
            Err(e) => pr_warn!("cannot release the chunks of node {}: {:?}\n", node, e),
        }
    }

    fn on_message(&self, peer: &Arc<Peer>, frame: &Frame) -> Handling {
        let reply = match MemoryMessage::from_frame(frame) {
            Some(MemoryMessage::AllocRequest { request_id, size }) => {
                Some(self.answer_alloc(peer.node, request_id, size))
            }
            Some(MemoryMessage::FreeRequest {
                request_id,
                chunk_id,
            }) => {
                let status = Status::of(&self.core.store.release(peer.node, chunk_id));
                (request_id != 0).then(|| Frame::status_reply(request_id, status))
            }
            // The requester gave up waiting: give the chunk back.
            Some(MemoryMessage::AllocReply {
                status: Status::OK,
                chunk_id,
                ..
            }) => Some(
                MemoryMessage::FreeRequest {
                    request_id: 0,
                    chunk_id,
                }
                .to_frame(),
            ),
            Some(MemoryMessage::AllocReply { .. }) | None => None,
        };
        reply.map_or(Handling::Done, Handling::Answer)
    }
}
