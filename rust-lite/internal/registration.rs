// SPDX-License-Identifier: GPL-2.0

//! Making a process's own memory an LMR (`lite_register_lmr`).
//!
//! The pages are pinned and each becomes a chunk of the LMR held by this
//! node, so other nodes reach them with RDMA like any other chunk once the
//! LMR is published. `lite_deregister_lmr` is `lite_free` of such an LMR:
//! mappings are revoked before the pages are unpinned.

use kernel::{prelude::*, sync::Arc, uaccess::UserPtr};

use super::{
    chunk::Geometry,
    chunk_memory::ChunkMemory,
    cluster::Cluster,
    lmr::{ChunkRef, Lmr, Origin},
    permission::Permission,
    process::Process,
};
use crate::verbs::{PinnedPages, PAGE_SIZE};

/// Largest region `lite_register_lmr` accepts (`LITE_MAX_REGISTER_SIZE`).
pub(crate) const MAX_REGISTER_SIZE: u64 = 64 << 20;

impl Cluster {
    /// `lite_register_lmr`: makes `size` bytes at `buf` of the calling
    /// process an LMR allowing `permission`, and returns its owner handle.
    ///
    /// # Errors
    ///
    /// `EINVAL` bad size or permission bits, `EFAULT` memory not mapped
    /// writable, `ENOMEM`.
    pub(crate) fn register(
        &self,
        process: &Process,
        buf: UserPtr,
        size: u64,
        permission: u64,
        password: u64,
    ) -> Result<u64> {
        let permission = Permission::from_bits(permission, Permission::SHAREABLE)?;
        if size == 0 || size > MAX_REGISTER_SIZE {
            return Err(EINVAL);
        }
        let len = usize::try_from(size).map_err(|_| EINVAL)?;
        buf.checked_add(len).ok_or(EFAULT)?;
        let lead = buf % PAGE_SIZE;
        let start = buf - lead;
        let count = (lead + len).div_ceil(PAGE_SIZE);
        let pages = Arc::new(
            PinnedPages::pin(&self.device.device, start, count)?,
            GFP_KERNEL,
        )?;
        let mut chunks = KVec::with_capacity(count, GFP_KERNEL)?;
        for index in 0..count {
            match self.page_chunk(&pages, index) {
                Ok(chunk) => chunks.push(chunk, GFP_KERNEL)?,
                Err(e) => {
                    self.release_chunks(&chunks);
                    return Err(e);
                }
            }
        }
        let geometry = Geometry::new(PAGE_SIZE as u64, lead as u64)?;
        let lmr = Lmr::new(size, geometry, permission, Origin::Registered, chunks)?;
        self.adopt(process, lmr, password)
    }

    fn page_chunk(&self, pages: &Arc<PinnedPages>, index: usize) -> Result<ChunkRef> {
        let memory = Arc::new(
            ChunkMemory::Page {
                pages: pages.clone(),
                index,
            },
            GFP_KERNEL,
        )?;
        let addr = memory.dma_range(0, PAGE_SIZE)?;
        let chunk_id = self.store.insert(self.node_id, memory.clone())?;
        Ok(ChunkRef {
            node: self.node_id,
            chunk_id,
            addr,
            rkey: self.device.pd.global_rkey(),
            len: PAGE_SIZE as u64,
            local: Some(memory),
        })
    }
}
