// SPDX-License-Identifier: GPL-2.0

//! Sharing LMRs by name (`lite_wrap_alloc`, `lite_add_ask_mr_table`,
//! `lite_ask_lmr`, `lite_umap_lmr`) and revoking mappings.
//!
//! The owner publishes an LMR under a 64-bit name with the permissions the
//! name grants and a password. A mapper on another node asks the owner,
//! which checks the password, notes the mapper and answers with the
//! location of a chunk table the mapper reads with RDMA; the mapper then
//! reaches the chunks directly. When the owner frees or deregisters the
//! LMR, it asks every node that mapped it to close its mappings and waits
//! for the answers before the memory is released: a mapping never reads
//! stale data nor writes into freed memory, it fails with `EKEYREVOKED`.

mod moves;
pub(crate) mod names;
pub(crate) mod wire;

use crate::internal::node_id::NodeId;
use kernel::{
    new_mutex,
    prelude::*,
    sync::{Arc, Mutex},
};

use self::{
    names::{table_len, ChunkDescriptor, NameTable, Published, DESCRIPTOR_LEN},
    wire::SharingMessage,
};
use super::{
    core::{
        limits::MAX_NODES,
        peer::Peer,
        subsystem::{Handling, Subsystem},
        wire::{Frame, Status},
        Core,
    },
    memory::{
        chunk::{self, spans, Geometry},
        handle::{LmrHandle, Password},
        lmr::{ChunkRef, HeldPause, Lmr, LmrParts, Origin, Place},
        permission::Permission,
        transfer::{Direction, Source, MAX_PIECE},
        DataOp, RemoteMemory,
    },
    process::{HandleEntry, Process, Role},
    quota::{
        amounts::{Amounts, Resource},
        Charge,
    },
    util::slot_table::SlotTable,
};
use crate::{
    errno,
    verbs::{DmaBuffer, MAX_DMA_BUFFER},
};

/// Revocations remembered, so that a mapping being built when its LMR is
/// revoked is refused.
const TOMBSTONES: usize = 256;

/// What a node keeps with a published name.
pub(crate) struct NameValue {
    lmr: Arc<Lmr>,
    /// The LMR's chunk table, read by mappers.
    table: DmaBuffer,
    /// The name's part of its publisher's quota.
    _charge: Charge,
}

/// Mappings of one LMR paused while its owner moves chunks.
struct HeldMappings {
    owner: NodeId,
    lmr_id: u64,
    /// When the owner asked (ms of the monotonic clock).
    since_ms: u64,
    pauses: KVec<HeldPause>,
}

/// Mappings of other nodes' LMRs held by this node's processes.
pub(crate) struct Mappings {
    table: SlotTable<Arc<Lmr>>,
    /// Recently revoked `(owner, lmr_id)` pairs.
    tombstones: [(NodeId, u64); TOMBSTONES],
    next_tombstone: usize,
    /// Mappings paused for their owners.
    held: KVec<Option<HeldMappings>>,
    /// Moves announced so far, and the last ones `(owner, lmr_id, move)`:
    /// a mapping built from a chunk table read across a move is refused.
    moves: u64,
    recent_moves: [(NodeId, u64, u64); TOMBSTONES],
}

impl Mappings {
    /// No mapping.
    pub(crate) const fn new() -> Self {
        Mappings {
            table: SlotTable::new(),
            tombstones: [(NodeId::NONE, 0); TOMBSTONES],
            next_tombstone: 0,
            held: KVec::new(),
            moves: 0,
            recent_moves: [(NodeId::NONE, 0, 0); TOMBSTONES],
        }
    }

    /// Moves announced so far.
    pub(crate) fn moves(&self) -> u64 {
        self.moves
    }

    /// Notes that the owner of `(owner, lmr_id)` moves its chunks.
    pub(crate) fn note_move(&mut self, owner: NodeId, lmr_id: u64) {
        self.moves = self.moves.wrapping_add(1);
        // PANIC: the remainder is below `TOMBSTONES`, the array's length.
        self.recent_moves[(self.moves % TOMBSTONES as u64) as usize] = (owner, lmr_id, self.moves);
    }

    /// Whether `(owner, lmr_id)` moved chunks after `moves_before` (or
    /// may have: too many moves to tell).
    pub(crate) fn moved_since(&self, owner: NodeId, lmr_id: u64, moves_before: u64) -> bool {
        let since = self.moves.wrapping_sub(moves_before);
        since >= TOMBSTONES as u64
            || self.recent_moves.iter().any(|&(o, l, m)| {
                let after = m.wrapping_sub(moves_before);
                o == owner && l == lmr_id && after != 0 && after <= since
            })
    }

    /// Removes mapping `id`.
    pub(crate) fn table_remove(&mut self, id: u64) -> Option<Arc<Lmr>> {
        self.table.remove(id)
    }

    fn is_revoked(&self, owner: NodeId, lmr_id: u64) -> bool {
        self.tombstones.contains(&(owner, lmr_id))
    }

    fn bury(&mut self, owner: NodeId, lmr_id: u64) {
        // PANIC: `next_tombstone < TOMBSTONES` (only set modulo it), the
        // length of `tombstones`.
        self.tombstones[self.next_tombstone] = (owner, lmr_id);
        self.next_tombstone = (self.next_tombstone + 1) % TOMBSTONES;
    }
}

/// Sharing of a joined node: the names it publishes, the mappings its
/// processes hold of other nodes' LMRs, and the end of an LMR's life.
#[pin_data]
pub(crate) struct Sharing {
    core: Arc<Core>,
    memory: Arc<RemoteMemory>,
    /// Names published on this node.
    /// Lock class `lite:names`: see the lock order in [`crate::internal::core`].
    #[pin]
    names: Mutex<NameTable<NameValue>>,
    /// Mappings of other nodes' LMRs.
    #[pin]
    mappings: Mutex<Mappings>,
}

impl Sharing {
    /// Sharing over `core` of the LMRs in `memory`, with nothing published.
    pub(crate) fn new(core: Arc<Core>, memory: Arc<RemoteMemory>) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Sharing {
                core,
                memory,
                names <- new_mutex!(NameTable::new(), "lite:names"),
                mappings <- new_mutex!(Mappings::new(), "lite:mappings"),
            }),
            GFP_KERNEL,
        )
    }

    /// Names published on this node.
    pub(crate) fn published_names(&self) -> usize {
        self.names.lock().len()
    }

    /// Drops mapping `mapping_id`, of a handle that went away.
    pub(crate) fn drop_mapping(&self, mapping_id: u64) {
        let dropped = self.mappings.lock().table_remove(mapping_id);
        drop(dropped);
    }

    /// `lite_free` / `lite_deregister_lmr`: releases the LMR behind an owner
    /// handle of `process`, revoking every mapping of it first.
    ///
    /// # Errors
    ///
    /// `EBADF` unknown handle, `EPERM` without ADMIN.
    pub(crate) fn free(&self, process: &Process, handle: LmrHandle) -> Result {
        let (lmr, permission, _, role) = process.handle(handle)?;
        permission.require(Permission::ADMIN)?;
        let Role::Owner { lmr_id } = role else {
            return Err(EPERM);
        };
        process.remove(handle).ok_or(EBADF)?;
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
        self.memory.forget(lmr_id);
        if self.revoke_mappings(lmr_id, lmr.mappers()) {
            self.memory.release_chunks(&lmr.chunks);
            true
        } else {
            // The memory stays, and so does its creator's charge.
            self.memory.keep_charge(lmr.take_charge());
            pr_warn!(
                "LMR {:#x}: a mapper did not confirm revocation; its memory is kept\n",
                lmr_id
            );
            false
        }
    }

    /// `lite_add_ask_mr_table`: publishes the LMR of `handle` under `name`.
    ///
    /// # Errors
    ///
    /// `EINVAL` bits beyond READ|WRITE|SHARE|ATOMIC, a mapping's handle or an
    /// LMR too large to publish; `EBADF`, `EACCES`, `EPERM` (no SHARE);
    /// `EEXIST` name taken; `EDQUOT` beyond the caller's names quota.
    pub(crate) fn publish(
        &self,
        process: &Process,
        name: u64,
        handle: LmrHandle,
        permission: u64,
        password: Password,
    ) -> Result {
        let permission = Permission::from_bits(permission, Permission::SHAREABLE)?;
        let (lmr, lmr_id) = process.owned(handle, password, Permission::SHARE)?;
        let charge = self
            .core
            .quotas
            .charge(process.payer(), Amounts::of(Resource::Names, 1))?;
        let table = self.chunk_table(&lmr)?;
        let _use = lmr.begin()?;
        let inserted = self.names.lock().insert(Published {
            name,
            lmr_id,
            permission,
            password,
            value: NameValue {
                lmr: lmr.clone(),
                table,
                _charge: charge,
            },
        });
        // A refused entry's buffer and charge go back outside the lock.
        inserted.map_err(|(e, _refused)| e)
    }

    /// A buffer holding the chunk table of `lmr`, which peers can read.
    fn chunk_table(&self, lmr: &Lmr) -> Result<DmaBuffer> {
        let len = table_len(lmr.chunks.len(), MAX_DMA_BUFFER).ok_or(EINVAL)?;
        let table = self.core.pool.allocate(len)?;
        write_chunk_table(&table, lmr)?;
        Ok(table)
    }

    /// Removes every name of LMR `lmr_id`.
    pub(crate) fn unpublish(&self, lmr_id: u64) {
        loop {
            // Each entry's buffer and charge go back outside the lock.
            let taken = self.names.lock().take_of_lmr(lmr_id);
            if taken.is_none() {
                break;
            }
        }
    }

    /// `lite_wrap_alloc`: an LMR on this node holding `size` bytes from
    /// `data`, published under `name` with READ|WRITE|SHARE.
    pub(crate) fn wrap_alloc(
        &self,
        process: &Process,
        data: &mut dyn Source,
        size: u64,
        name: u64,
        password: Password,
    ) -> Result<LmrHandle> {
        if self.names.lock().find(name).is_some() {
            return Err(EEXIST);
        }
        let handle = self
            .memory
            .alloc_remote(process, self.core.node_id(), size, 0, password)?;
        let shared = Permission::READ
            .union(Permission::WRITE)
            .union(Permission::SHARE);
        let write = DataOp {
            handle,
            direction: Direction::Write(data),
            len: size,
            offset: 0,
            priority: 0,
            password,
        };
        let filled = self
            .memory
            .transfer(process, write)
            .and_then(|()| self.publish(process, name, handle, shared.bits(), password));
        match filled {
            Ok(()) => Ok(handle),
            Err(e) => {
                let _ = self.free(process, handle);
                Err(e)
            }
        }
    }

    /// `lite_ask_lmr`: maps the LMR published as `name` on `owner` and
    /// returns a new handle of `process` for it.
    ///
    /// # Errors
    ///
    /// `EINVAL` unknown permission bits or node id, `EHOSTUNREACH`, `ENOENT`
    /// unknown name, `EACCES` wrong password, `EPERM` nothing granted,
    /// `EKEYREVOKED` revoked while being mapped, `EAGAIN` its chunks are
    /// moving (or moved while being mapped), `EPROTO`.
    pub(crate) fn ask_lmr(
        &self,
        process: &Process,
        owner: NodeId,
        name: u64,
        permission: u64,
        password: Password,
    ) -> Result<LmrHandle> {
        let requested = Permission::from_bits(permission, Permission::ALL)?;
        if owner.index() >= MAX_NODES {
            return Err(EINVAL);
        }
        if owner == self.core.node_id() {
            let (lmr, granted) = {
                let names = self.names.lock();
                let entry = names.find(name).ok_or(ENOENT)?;
                if entry.password != password {
                    return Err(EACCES);
                }
                let lmr = &entry.value.lmr;
                let granted = Permission::grant(requested, entry.permission, lmr.permission)?;
                (lmr.clone(), granted)
            };
            drop(lmr.begin()?);
            return process.insert(HandleEntry {
                lmr,
                permission: granted,
                password,
                role: Role::Mapping { mapping_id: None },
            });
        }
        let peer = self.core.peer(owner)?;
        let moves_before = self.mappings.lock().moves();
        let reply = self.core.requests.call(&peer, |request_id| {
            SharingMessage::AskRequest {
                request_id,
                name,
                permission: requested.bits(),
                password: password.raw(),
            }
            .to_frame()
        })?;
        let Some(SharingMessage::AskReply {
            status,
            lmr_id,
            size,
            granted,
            table_addr,
            table_rkey,
            chunk_size,
            lead,
            ..
        }) = SharingMessage::from_frame(&reply)
        else {
            return Err(errno::EPROTO());
        };
        status.to_result()?;
        let granted = Permission::from_bits(u64::from(granted), Permission::SHAREABLE)
            .map_err(|_| errno::EPROTO())?;
        let geometry = Geometry::new(chunk_size, lead).map_err(|_| errno::EPROTO())?;
        chunk::check_size(size).map_err(|_| errno::EPROTO())?;
        let count = geometry.chunk_count(size).ok_or(errno::EPROTO())?;
        let chunks = self.read_chunk_table(&peer, table_addr, table_rkey, count)?;
        let lmr = Lmr::new(
            Lmr::reserve()?,
            LmrParts {
                size,
                geometry,
                permission: granted,
                origin: Origin::Mapped { owner, lmr_id },
                chunks,
                charge: Charge::none(),
            },
        );
        let mapping_id = {
            let mut mappings = self.mappings.lock();
            if mappings.is_revoked(owner, lmr_id) {
                return Err(errno::EKEYREVOKED());
            }
            // The chunk table read may predate a move: the caller asks
            // again.
            if mappings.moved_since(owner, lmr_id, moves_before) {
                return Err(EAGAIN);
            }
            mappings.table.insert(lmr.clone())?
        };
        process
            .insert(HandleEntry {
                lmr,
                permission: granted,
                password,
                role: Role::Mapping {
                    mapping_id: Some(mapping_id),
                },
            })
            .inspect_err(|_| {
                let dropped = self.mappings.lock().table_remove(mapping_id);
                drop(dropped);
            })
    }

    /// Reads `count` chunk descriptors at `addr` on `peer`.
    fn read_chunk_table(
        &self,
        peer: &Peer,
        addr: u64,
        rkey: u32,
        count: usize,
    ) -> Result<KVec<ChunkRef>> {
        let len = table_len(count, MAX_DMA_BUFFER).ok_or(errno::EPROTO())?;
        let table = DmaBuffer::new(&self.core.device().device, len)?;
        for (at, n) in spans(len, MAX_PIECE as usize) {
            // `addr` comes from the peer.
            let from = addr.checked_add(at as u64).ok_or_else(errno::EPROTO)?;
            peer.rdma_read(&table, at, n, from, rkey)?;
        }
        let mut chunks = KVec::with_capacity(count, GFP_KERNEL)?;
        let mut bytes = [0u8; DESCRIPTOR_LEN];
        for index in 0..count {
            // PANIC: `index < count`, and `table_len` checked that `count *
            // DESCRIPTOR_LEN` does not overflow.
            table.read_bytes(index * DESCRIPTOR_LEN, &mut bytes)?;
            let d = ChunkDescriptor::decode(&bytes);
            if d.node == NodeId::NONE {
                // Its node went: the owner marks such chunks with node 0.
                chunks.push(ChunkRef::new_lost(d.len), GFP_KERNEL)?;
                continue;
            }
            let local = if d.node == self.core.node_id() {
                Some(
                    self.core
                        .store
                        .get(d.chunk_id)
                        .map_err(|_| errno::EKEYREVOKED())?,
                )
            } else {
                self.core.peer(d.node)?;
                None
            };
            let place = Place {
                node: d.node,
                chunk_id: d.chunk_id,
                addr: d.addr,
                rkey: d.rkey,
            };
            chunks.push(ChunkRef::new(place, d.len, local), GFP_KERNEL)?;
        }
        Ok(chunks)
    }

    /// `lite_umap_lmr`: drops a mapping of `process`.
    ///
    /// # Errors
    ///
    /// `EBADF` unknown handle, `EINVAL` if the handle is not a mapping.
    pub(crate) fn umap(&self, process: &Process, handle: LmrHandle) -> Result {
        let (_, _, _, role) = process.handle(handle)?;
        let Role::Mapping { mapping_id } = role else {
            return Err(EINVAL);
        };
        let entry = process.remove(handle).ok_or(EBADF)?;
        if let Some(id) = mapping_id {
            self.drop_mapping(id);
        }
        drop(entry);
        Ok(())
    }

    /// Asks every node in `mappers` (one bit per node id) to close its
    /// mappings of LMR `lmr_id`; returns whether all of them confirmed.
    pub(crate) fn revoke_mappings(&self, lmr_id: u64, mappers: u64) -> bool {
        let mut confirmed = true;
        // A node that left cannot reach the memory any more.
        for peer in self.core.peers_among(mappers) {
            let node = peer.node;
            let reply = self
                .core
                .requests
                .call_uninterruptible(&peer, |request_id| {
                    SharingMessage::RevokeRequest { request_id, lmr_id }.to_frame()
                });
            match reply.and_then(|reply| reply.status().to_result()) {
                Ok(()) => continue,
                // Gone while asked: its connection is fenced, so it cannot
                // reach the memory any more either.
                Err(e) if e == errno::EHOSTDOWN() => continue,
                Err(_) => {
                    pr_warn!(
                        "node {} did not confirm the revocation of LMR {:#x}\n",
                        node,
                        lmr_id
                    );
                    confirmed = false;
                }
            }
        }
        confirmed
    }

    /// Owner side of `lite_ask_lmr`: answers an [`SharingMessage::AskRequest`].
    fn answer_ask(
        &self,
        from: NodeId,
        request_id: u64,
        name: u64,
        permission: u64,
        password: Password,
    ) -> SharingMessage {
        let refused = |status: Error| SharingMessage::AskReply {
            request_id,
            status: status.into(),
            lmr_id: 0,
            size: 0,
            granted: 0,
            table_addr: 0,
            table_rkey: 0,
            chunk_size: 0,
            lead: 0,
        };
        let Ok(requested) = Permission::from_bits(permission, Permission::ALL) else {
            return refused(EINVAL);
        };
        let names = self.names.lock();
        let Some(entry) = names.find(name) else {
            return refused(ENOENT);
        };
        if entry.password != password {
            return refused(EACCES);
        }
        let lmr = &entry.value.lmr;
        let granted = match Permission::grant(requested, entry.permission, lmr.permission) {
            Ok(granted) => granted,
            Err(e) => return refused(e),
        };
        let Ok((table_addr, table_rkey)) =
            entry.value.table.remote_range(0, entry.value.table.len())
        else {
            return refused(EINVAL);
        };
        // Noted before answering: a revocation or a move from now on
        // includes `from`. Never waits: this runs on the polling thread.
        if let Err(e) = lmr.add_mapper_if_open(from) {
            return refused(e);
        }
        SharingMessage::AskReply {
            request_id,
            status: Status::OK,
            lmr_id: entry.lmr_id,
            size: lmr.size,
            granted: granted.bits() as u32,
            table_addr,
            table_rkey,
            chunk_size: lmr.geometry.chunk_size,
            lead: lmr.geometry.lead,
        }
    }

    /// Mapper side of a revocation: closes every mapping of LMR `lmr_id` of
    /// `owner`, waiting for operations on them to finish.
    fn close_mappings(&self, owner: NodeId, lmr_id: u64) -> Result {
        self.close_mappings_where(
            |origin| origin == Origin::Mapped { owner, lmr_id },
            Some((owner, lmr_id)),
            errno::EKEYREVOKED(),
        )
    }

    /// Closes with `error` every mapping whose origin `matches` (burying
    /// `tombstone`, if any, first), waiting for operations on them to finish.
    fn close_mappings_where(
        &self,
        matches: impl Fn(Origin) -> bool,
        tombstone: Option<(NodeId, u64)>,
        error: Error,
    ) -> Result {
        let mut closing = KVec::new();
        {
            let mut mappings = self.mappings.lock();
            if let Some((owner, lmr_id)) = tombstone {
                mappings.bury(owner, lmr_id);
            }
            let mut ids = KVec::with_capacity(mappings.table.len(), GFP_KERNEL)?;
            mappings.table.ids_into(&mut ids)?;
            for id in ids.iter() {
                if let Some(lmr) = mappings.table.get(*id) {
                    if matches(lmr.origin) {
                        closing.push(lmr.clone(), GFP_KERNEL)?;
                    }
                }
            }
        }
        for lmr in closing.iter() {
            lmr.close(error);
        }
        Ok(())
    }
}

impl Sharing {
    /// Leaving side of a graceful leave: asks the owner of every chunk this
    /// node holds for another node to move it; returns how many chunks are
    /// still held for nodes that live.
    pub(crate) fn evacuate_held_chunks(&self) -> Result<usize> {
        let own = self.core.node_id();
        let owners = self.core.store.other_owners(own);
        // Owners that are gone: their chunks are freed after their grace
        // period.
        for peer in self.core.peers_among(owners) {
            let node = peer.node;
            let reply = self
                .core
                .requests
                .call_uninterruptible(&peer, |request_id| {
                    SharingMessage::EvacuateRequest { request_id }.to_frame()
                });
            if let Err(e) = reply.and_then(|reply| reply.status().to_result()) {
                pr_warn!(
                    "node {} could not move its chunks off this node: {:?}\n",
                    node,
                    e
                );
            }
        }
        let owners = self.core.store.other_owners(own);
        let mut held = 0;
        for node in NodeId::all() {
            // PANIC: the sum counts chunks held, objects in memory, far
            // below `usize::MAX`.
            if node.bit().is_some_and(|bit| owners & bit != 0) && self.core.peer(node).is_ok() {
                held += self.core.store.count_owned_by(node);
            }
        }
        Ok(held)
    }

    /// Owner side of a graceful leave: moves the chunks of this node's LMRs
    /// off `leaving` (see [`moves`] for LMRs other nodes mapped). The rest of
    /// an LMR whose move failed stays.
    ///
    /// # Errors
    ///
    /// `ENOSPC` if no other node can take them, or the first error of a
    /// move.
    fn evacuate_for(&self, leaving: NodeId) -> Result {
        let lmrs = self.memory.lmrs_with_chunks_on(leaving)?;
        let peers = self.core.connected_peers()?;
        let mut targets = KVec::with_capacity(peers.len(), GFP_KERNEL)?;
        for &node in peers.iter().filter(|&&node| node != leaving) {
            targets.push(node, GFP_KERNEL)?;
        }
        let mut next = 0usize;
        let mut first_error = None;
        for (lmr_id, lmr) in lmrs.iter() {
            let moved = self.evacuate_lmr(*lmr_id, lmr, leaving, &targets, &mut next);
            if let Err(e) = moved {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    fn evacuate_lmr(
        &self,
        lmr_id: u64,
        lmr: &Lmr,
        leaving: NodeId,
        targets: &[NodeId],
        next: &mut usize,
    ) -> Result {
        let pause = match lmr.pause() {
            Ok(pause) => pause,
            // Being freed: its chunks go with it.
            Err(_) => return Ok(()),
        };
        // Asks are refused while paused, so no mapper can appear now.
        let mappers = lmr.mappers();
        let mut usable = KVec::with_capacity(targets.len(), GFP_KERNEL)?;
        for &node in targets.iter() {
            if !node.bit().is_some_and(|bit| mappers & bit != 0) {
                usable.push(node, GFP_KERNEL)?;
            }
        }
        let held = self.hold_mappers(lmr_id, lmr, mappers)?;
        let moved = self
            .memory
            .move_chunks_off(lmr, &pause, leaving, &usable, next);
        // Mappers to come read the new places.
        if let Err(e) = self.rewrite_chunk_table(lmr_id, lmr) {
            pr_warn!(
                "cannot update the chunk table of LMR {:#x}: {:?}\n",
                lmr_id,
                e
            );
        }
        self.resume_mappers(lmr_id, lmr, &held);
        drop(pause);
        moved.map(|_| ())
    }

    /// Writes the current chunk places of `lmr` into the chunk tables of
    /// its published names (their length does not change).
    fn rewrite_chunk_table(&self, lmr_id: u64, lmr: &Lmr) -> Result {
        let names = self.names.lock();
        for entry in names.of_lmr(lmr_id) {
            write_chunk_table(&entry.value.table, lmr)?;
        }
        Ok(())
    }
}

impl Subsystem for Sharing {
    /// Chunks of mappings held by the gone node are lost; mappings of the
    /// gone node's LMRs are closed (their holders get `EHOSTDOWN`); its own
    /// mappings of this node's LMRs need no revoking any more, as its
    /// connection is fenced.
    fn on_peer_gone(&self, node: NodeId) {
        self.drop_held_mappings(Some(node));
        // Mappings of third nodes' LMRs may have chunks there too.
        for lmr in self.mappings.lock().table.values() {
            lmr.lose_chunks_on(node);
        }
        // The chunk tables of published LMRs that lost chunks (marked by
        // the memory subsystem, which hears of the death first) must not
        // lead mappers to come to the old places.
        {
            let names = self.names.lock();
            for entry in names.all() {
                let lmr = &entry.value.lmr;
                if lmr.chunks.iter().any(|c| c.is_lost()) {
                    if let Err(e) = write_chunk_table(&entry.value.table, lmr) {
                        pr_warn!("cannot update a chunk table: {:?}\n", e);
                    }
                }
            }
        }
        let closed = self.close_mappings_where(
            |origin| matches!(origin, Origin::Mapped { owner, .. } if owner == node),
            None,
            errno::EHOSTDOWN(),
        );
        if let Err(e) = closed {
            pr_warn!(
                "cannot close the mappings of node {}'s LMRs: {:?}\n",
                node,
                e
            );
        }
    }

    fn on_message(&self, peer: &Arc<Peer>, frame: &Frame) -> Handling {
        match SharingMessage::from_frame(frame) {
            Some(SharingMessage::AskRequest {
                request_id,
                name,
                permission,
                password,
            }) => {
                let password = Password::from_raw(password);
                let reply = self.answer_ask(peer.node, request_id, name, permission, password);
                Handling::Answer(reply.to_frame())
            }
            // Closing a mapping waits for the operations on it, moving
            // chunks for RDMA.
            Some(
                SharingMessage::RevokeRequest { .. }
                | SharingMessage::EvacuateRequest { .. }
                | SharingMessage::HoldMappings { .. }
                | SharingMessage::ResumeMappings { .. },
            ) => Handling::Defer,
            Some(SharingMessage::AskReply { .. }) | None => Handling::Done,
        }
    }

    fn serve(&self, peer: &Arc<Peer>, frame: &Frame) -> Option<Frame> {
        let (request_id, result) = match SharingMessage::from_frame(frame)? {
            SharingMessage::RevokeRequest { request_id, lmr_id } => {
                (request_id, self.close_mappings(peer.node, lmr_id))
            }
            SharingMessage::EvacuateRequest { request_id } => {
                (request_id, self.evacuate_for(peer.node))
            }
            SharingMessage::HoldMappings { request_id, lmr_id } => {
                (request_id, self.hold_mappings(peer.node, lmr_id))
            }
            SharingMessage::ResumeMappings {
                request_id,
                lmr_id,
                table_addr,
                table_rkey,
            } => (
                request_id,
                self.resume_mappings(peer.node, lmr_id, table_addr, table_rkey),
            ),
            _ => return None,
        };
        (request_id != 0).then(|| Frame::status_reply(request_id, Status::of(&result)))
    }
}

/// Writes the chunk table of `lmr` into `table`.
///
/// A lost chunk is written with node 0 (the manager, which holds no chunk)
/// and no place, so no mapper reaches for its old place.
fn write_chunk_table(table: &DmaBuffer, lmr: &Lmr) -> Result {
    for (index, chunk) in lmr.chunks.iter().enumerate() {
        let descriptor = if chunk.is_lost() {
            ChunkDescriptor {
                node: NodeId::NONE,
                rkey: 0,
                chunk_id: 0,
                addr: 0,
                len: chunk.len,
            }
        } else {
            ChunkDescriptor {
                node: chunk.node(),
                rkey: chunk.rkey(),
                chunk_id: chunk.chunk_id(),
                addr: chunk.addr(),
                len: chunk.len,
            }
        };
        let at = index.checked_mul(DESCRIPTOR_LEN).ok_or(EINVAL)?;
        // A table too short for the LMR fails here, in `write_bytes`.
        table.write_bytes(at, &descriptor.encode())?;
    }
    Ok(())
}
