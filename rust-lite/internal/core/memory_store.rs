// SPDX-License-Identifier: GPL-2.0

//! The chunks this node holds: for its own LMRs and on behalf of peers.

use crate::internal::node_id::NodeId;
use kernel::{new_mutex, prelude::*, sync::Arc, sync::Mutex};

use core::fmt::{self, Write};

use super::{chunk_memory::ChunkMemory, limits::MAX_NODES};
use crate::internal::{quota::amounts::within, util::slot_table::SlotTable};
use crate::verbs::{RemotePool, MAX_DMA_BUFFER};

struct HeldChunk {
    owner: NodeId,
    memory: Arc<ChunkMemory>,
    /// When the chunk is to be freed because its owner is gone
    /// ([`now_ms`](crate::internal::util::clock::now_ms)), 0 while the
    /// owner lives.
    orphaned_until_ms: u64,
}

struct StoreState {
    chunks: SlotTable<HeldChunk>,
    /// Bytes of the chunks held for each node, by node id (orphans aside:
    /// a node that comes back is not charged for its predecessor's).
    bytes_for: [u64; MAX_NODES],
}

impl StoreState {
    fn insert(&mut self, chunk: HeldChunk) -> Result<u64> {
        let (owner, len) = (chunk.owner, chunk.memory.len() as u64);
        let id = self.chunks.insert(chunk)?;
        if let Some(bytes) = self.bytes_for.get_mut(owner.index()) {
            *bytes = bytes.saturating_add(len);
        }
        Ok(id)
    }

    fn remove(&mut self, id: u64) -> Option<HeldChunk> {
        let chunk = self.chunks.remove(id)?;
        if chunk.orphaned_until_ms == 0 {
            self.uncount(&chunk);
        }
        Some(chunk)
    }

    /// Takes `chunk` out of the bytes held for its owner.
    fn uncount(&mut self, chunk: &HeldChunk) {
        if let Some(bytes) = self.bytes_for.get_mut(chunk.owner.index()) {
            *bytes = bytes.saturating_sub(chunk.memory.len() as u64);
        }
    }

    fn bytes_held_for(&self, owner: NodeId) -> u64 {
        self.bytes_for.get(owner.index()).copied().unwrap_or(0)
    }
}

/// Memory held by this node, each chunk owned by the node whose LMR it is
/// part of and named by a chunk id in control messages.
#[pin_data]
pub(crate) struct MemoryStore {
    /// Lock class `lite:memory_store`: see the lock order in [`crate::internal::core`].
    #[pin]
    chunks: Mutex<StoreState>,
}

impl MemoryStore {
    /// An empty store.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(MemoryStore {
            chunks <- new_mutex!(
                StoreState { chunks: SlotTable::new(), bytes_for: [0; MAX_NODES] },
                "lite:memory_store"
            ),
        })
    }

    /// Allocates a zeroed chunk of `size` bytes for `owner`, whose chunks
    /// may hold at most `limit` bytes here in all.
    ///
    /// Returns the chunk id and the memory.
    ///
    /// # Errors
    ///
    /// `EINVAL` for a size of 0 or above one chunk, `EDQUOT` beyond `limit`,
    /// `ENOMEM` if memory is short.
    pub(crate) fn allocate(
        &self,
        pool: &RemotePool,
        owner: NodeId,
        size: u64,
        limit: u64,
    ) -> Result<(u64, Arc<ChunkMemory>)> {
        let len = usize::try_from(size).map_err(|_| EINVAL)?;
        if len == 0 || len > MAX_DMA_BUFFER {
            return Err(EINVAL);
        }
        // Refused before allocating, and checked again when inserting.
        if !within(self.bytes_held_for(owner), size, limit) {
            return Err(crate::errno::EDQUOT());
        }
        // Allocate (and zero) before taking the lock.
        let memory = Arc::new(ChunkMemory::Buffer(pool.allocate(len)?), GFP_KERNEL)?;
        let id = {
            let mut state = self.chunks.lock();
            if !within(state.bytes_held_for(owner), size, limit) {
                return Err(crate::errno::EDQUOT());
            }
            state.insert(HeldChunk {
                owner,
                memory: memory.clone(),
                orphaned_until_ms: 0,
            })?
        };
        Ok((id, memory))
    }

    /// Holds `memory` for `owner` and returns its chunk id.
    pub(crate) fn insert(&self, owner: NodeId, memory: Arc<ChunkMemory>) -> Result<u64> {
        self.chunks.lock().insert(HeldChunk {
            owner,
            memory,
            orphaned_until_ms: 0,
        })
    }

    /// Bytes of the chunks held for `owner`.
    pub(crate) fn bytes_held_for(&self, owner: NodeId) -> u64 {
        self.chunks.lock().bytes_held_for(owner)
    }

    /// Writes `served node N remote_memory=BYTES` for every node other than
    /// `own` this node holds chunks for.
    pub(crate) fn write_served(&self, own: NodeId, out: &mut impl Write) -> fmt::Result {
        let bytes_for = self.chunks.lock().bytes_for;
        for (node, bytes) in bytes_for.iter().enumerate() {
            if *bytes != 0 && node != own.index() {
                writeln!(out, "served node {node} remote_memory={bytes}")?;
            }
        }
        Ok(())
    }

    /// The memory of chunk `id`.
    ///
    /// # Errors
    ///
    /// `ENOENT` if there is no such chunk.
    pub(crate) fn get(&self, id: u64) -> Result<Arc<ChunkMemory>> {
        self.chunks
            .lock()
            .chunks
            .get(id)
            .map(|c| c.memory.clone())
            .ok_or(ENOENT)
    }

    /// Releases chunk `id` of `owner`.
    ///
    /// # Errors
    ///
    /// `ENOENT` if there is no such chunk, `EPERM` if it belongs to another node.
    pub(crate) fn release(&self, owner: NodeId, id: u64) -> Result {
        let chunk = {
            let mut state = self.chunks.lock();
            match state.chunks.get(id) {
                None => return Err(ENOENT),
                Some(chunk) if chunk.owner != owner => return Err(EPERM),
                Some(_) => state.remove(id),
            }
        };
        // Freed here, outside the lock (unless a copy still uses it).
        drop(chunk);
        Ok(())
    }

    /// Marks every chunk held for `owner`, a node that is gone, to be freed
    /// by [`MemoryStore::free_orphans`] from `until_ms` on; returns how many.
    pub(crate) fn orphan(&self, owner: NodeId, until_ms: u64) -> Result<usize> {
        let mut ids = KVec::new();
        let mut state = self.chunks.lock();
        // Collected under the lock: the store may change at any time.
        ids.reserve(state.chunks.len(), GFP_KERNEL)?;
        state.chunks.ids_into(&mut ids)?;
        let mut marked = 0;
        for id in ids.iter() {
            if let Some(chunk) = state.chunks.get_mut(*id) {
                if chunk.owner == owner && chunk.orphaned_until_ms == 0 {
                    chunk.orphaned_until_ms = until_ms.max(1);
                    // PANIC: at most one per chunk held.
                    marked += 1;
                }
            }
        }
        // Orphans no longer count for their owner's id.
        if let Some(bytes) = state.bytes_for.get_mut(owner.index()) {
            *bytes = 0;
        }
        Ok(marked)
    }

    /// Frees the orphaned chunks whose time came by `now_ms`; returns how
    /// many.
    pub(crate) fn free_orphans(&self, now_ms: u64) -> Result<usize> {
        let mut ids = KVec::new();
        let mut freed = KVec::new();
        let mut state = self.chunks.lock();
        ids.reserve(state.chunks.len(), GFP_KERNEL)?;
        freed.reserve(state.chunks.len(), GFP_KERNEL)?;
        state.chunks.ids_into(&mut ids)?;
        for id in ids.iter() {
            let due = state
                .chunks
                .get(*id)
                .is_some_and(|c| c.orphaned_until_ms != 0 && c.orphaned_until_ms <= now_ms);
            if due {
                if let Some(chunk) = state.remove(*id) {
                    // Room was reserved above, so this does not allocate.
                    freed.push(chunk, GFP_NOWAIT)?;
                }
            }
        }
        drop(state);
        // Freed here, outside the lock (unless a copy still uses one).
        Ok(freed.len())
    }

    /// Owners of the chunks held for other nodes than `own`, one bit per
    /// node id.
    pub(crate) fn other_owners(&self, own: NodeId) -> u64 {
        self.chunks
            .lock()
            .chunks
            .values()
            .filter(|c| c.owner != own && c.orphaned_until_ms == 0)
            .fold(0, |owners, c| owners | c.owner.bit().unwrap_or(0))
    }

    /// Number of chunks held for `owner` (not orphaned).
    pub(crate) fn count_owned_by(&self, owner: NodeId) -> usize {
        self.chunks
            .lock()
            .chunks
            .values()
            .filter(|c| c.owner == owner && c.orphaned_until_ms == 0)
            .count()
    }

    /// Number of chunks held.
    pub(crate) fn len(&self) -> usize {
        self.chunks.lock().chunks.len()
    }
}
