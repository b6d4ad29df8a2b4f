// SPDX-License-Identifier: GPL-2.0

//! Chunks this node holds on behalf of other nodes' LMRs.

use kernel::{new_mutex, prelude::*, sync::Arc, sync::Mutex};

use super::slot_table::SlotTable;
use crate::verbs::{Device, DmaBuffer, MAX_DMA_BUFFER};

struct HeldChunk {
    owner: u32,
    _memory: DmaBuffer,
}

/// Memory lent to peers, each chunk owned by the node that asked for it.
#[pin_data]
pub(crate) struct MemoryStore {
    #[pin]
    chunks: Mutex<SlotTable<HeldChunk>>,
}

impl MemoryStore {
    /// An empty store.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(MemoryStore {
            chunks <- new_mutex!(SlotTable::new(), "lite:memory_store"),
        })
    }

    /// Allocates a zeroed chunk of `size` bytes for `owner`.
    ///
    /// Returns the chunk id and the chunk's address for RDMA.
    ///
    /// # Errors
    ///
    /// `EINVAL` for a size of 0 or above one chunk, `ENOMEM` if memory is short.
    pub(crate) fn allocate(&self, device: &Arc<Device>, owner: u32, size: u64) -> Result<(u64, u64)> {
        let len = usize::try_from(size).map_err(|_| EINVAL)?;
        if len == 0 || len > MAX_DMA_BUFFER {
            return Err(EINVAL);
        }
        // Allocate (and zero) before taking the lock.
        let memory = DmaBuffer::new(device, len)?;
        let addr = memory.dma_range(0, len)?;
        let id = self.chunks.lock().insert(HeldChunk {
            owner,
            _memory: memory,
        })?;
        Ok((id, addr))
    }

    /// Releases chunk `id` of `owner`.
    ///
    /// # Errors
    ///
    /// `ENOENT` if there is no such chunk, `EPERM` if it belongs to another node.
    pub(crate) fn release(&self, owner: u32, id: u64) -> Result {
        let chunk = {
            let mut chunks = self.chunks.lock();
            match chunks.get(id) {
                None => return Err(ENOENT),
                Some(chunk) if chunk.owner != owner => return Err(EPERM),
                Some(_) => chunks.remove(id),
            }
        };
        // Freed here, outside the lock.
        drop(chunk);
        Ok(())
    }
}
