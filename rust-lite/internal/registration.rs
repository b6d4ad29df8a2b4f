// SPDX-License-Identifier: GPL-2.0

//! Making a process's own memory an LMR (`lite_register_lmr`), or a kernel
//! caller's (`liteapi_register_lmr_with_virt_addr`).
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

/// Checks the size and permission bits of a region to register.
fn check_region(size: u64, permission: u64) -> Result<Permission> {
    if size == 0 || size > MAX_REGISTER_SIZE {
        return Err(EINVAL);
    }
    Permission::from_bits(permission, Permission::SHAREABLE)
}

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
        let permission = check_region(size, permission)?;
        let len = usize::try_from(size).map_err(|_| EINVAL)?;
        buf.checked_add(len).ok_or(EFAULT)?;
        let lead = buf % PAGE_SIZE;
        let start = buf - lead;
        let count = (lead + len).div_ceil(PAGE_SIZE);
        let pages = PinnedPages::pin(&self.device.device, start, count)?;
        self.register_pages(
            process,
            pages,
            lead,
            size,
            permission,
            Origin::Registered,
            password,
        )
    }

    /// `liteapi_register_lmr_with_virt_addr`: makes `size` bytes of kernel
    /// memory at `addr` an LMR allowing `permission`, and returns its owner
    /// handle.
    ///
    /// # Errors
    ///
    /// `EINVAL` bad size, permission bits or address (not directly mapped
    /// nor vmalloc memory), `EFAULT` null address, `ENOMEM`.
    ///
    /// # Safety
    ///
    /// The memory must stay allocated until the LMR is destroyed with its
    /// memory released ([`Cluster::free`] returned `Ok`).
    pub(crate) unsafe fn register_kernel(
        &self,
        process: &Process,
        addr: *mut u8,
        size: u64,
        permission: u64,
        password: u64,
    ) -> Result<u64> {
        let permission = check_region(size, permission)?;
        if addr.is_null() {
            return Err(EFAULT);
        }
        let len = usize::try_from(size).map_err(|_| EINVAL)?;
        (addr as usize).checked_add(len).ok_or(EINVAL)?;
        let lead = addr as usize % PAGE_SIZE;
        let count = (lead + len).div_ceil(PAGE_SIZE);
        let start = addr.wrapping_sub(lead);
        // SAFETY: The pages stay allocated until the LMR's memory is
        // released (guaranteed by the caller); the chunks holding them are
        // dropped no earlier.
        let pages = unsafe { PinnedPages::kernel(&self.device.device, start, count) }?;
        let origin = Origin::KernelRegistered;
        self.register_pages(process, pages, lead, size, permission, origin, password)
    }

    /// Turns `pages`, whose first `lead` bytes are not part of the region,
    /// into an LMR of `size` bytes held by this node.
    #[expect(clippy::too_many_arguments, reason = "one per property of the region")]
    fn register_pages(
        &self,
        process: &Process,
        pages: PinnedPages,
        lead: usize,
        size: u64,
        permission: Permission,
        origin: Origin,
        password: u64,
    ) -> Result<u64> {
        let count = pages.count();
        let geometry = Geometry::new(PAGE_SIZE as u64, lead as u64)?;
        let slot = Lmr::reserve()?;
        let pages = Arc::new(pages, GFP_KERNEL)?;
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
        let lmr = Lmr::new(slot, size, geometry, permission, origin, chunks);
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
