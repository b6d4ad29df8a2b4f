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
    handle::{LmrHandle, Password},
    lmr::{ChunkRef, Lmr, LmrParts, Origin, Place},
    permission::Permission,
    RemoteMemory,
};
use crate::{
    internal::{
        core::{chunk_memory::ChunkMemory, subsystem::Subsystem, Core},
        process::Process,
        quota::{
            amounts::{Amounts, Resource},
            Charge,
        },
    },
    verbs::{PinnedPages, PAGE_SIZE},
};

/// Largest region `lite_register_lmr` accepts (`LITE_MAX_REGISTER_SIZE`).
pub(crate) const MAX_REGISTER_SIZE: u64 = 64 << 20;

/// Checks the size and permission bits of a region to register.
fn check_region(size: u64, permission: u64) -> Result<Permission> {
    if size == 0 || size > MAX_REGISTER_SIZE {
        return Err(EINVAL);
    }
    Permission::from_bits(permission, Permission::SHAREABLE)
}

/// A region of kernel memory a kernel caller asked to register, checked.
pub(crate) struct KernelRegion {
    /// Address of the first whole page.
    pub(crate) start: usize,
    /// Pages the region touches.
    pub(crate) count: usize,
    lead: usize,
    size: u64,
    permission: Permission,
}

impl KernelRegion {
    /// The region of `size` bytes at `addr`, to be registered allowing
    /// `permission`.
    ///
    /// # Errors
    ///
    /// `EINVAL` bad size, permission bits or a range that wraps, `EFAULT`
    /// null address.
    pub(crate) fn new(addr: usize, size: u64, permission: u64) -> Result<Self> {
        let permission = check_region(size, permission)?;
        if addr == 0 {
            return Err(EFAULT);
        }
        let len = usize::try_from(size).map_err(|_| EINVAL)?;
        addr.checked_add(len).ok_or(EINVAL)?;
        // PANIC: `PAGE_SIZE` is not 0; `lead <= addr`, and `lead + len <=
        // addr + len`, which was checked not to overflow.
        let lead = addr % PAGE_SIZE;
        Ok(KernelRegion {
            start: addr - lead,
            count: (lead + len).div_ceil(PAGE_SIZE),
            lead,
            size,
            permission,
        })
    }
}

/// What becomes of registered pages: the LMR's bytes start `lead` bytes
/// into the first page and run for `size` bytes.
struct Region {
    lead: usize,
    size: u64,
    permission: Permission,
    origin: Origin,
}

/// Registration of memory this node's callers already have.
pub(crate) struct Registration {
    core: Arc<Core>,
    memory: Arc<RemoteMemory>,
}

impl Registration {
    /// Registration over `core`, recording LMRs in `memory`.
    pub(crate) fn new(core: Arc<Core>, memory: Arc<RemoteMemory>) -> Result<Arc<Self>> {
        Ok(Arc::new(Registration { core, memory }, GFP_KERNEL)?)
    }

    /// `lite_register_lmr`: makes `size` bytes at `buf` of the calling
    /// process an LMR allowing `permission`, and returns its owner handle.
    ///
    /// # Errors
    ///
    /// `EINVAL` bad size or permission bits, `EFAULT` memory not mapped
    /// writable, `EDQUOT` beyond the caller's pinned memory or LMR quota,
    /// `ENOMEM` (also beyond the process's `RLIMIT_MEMLOCK`).
    pub(crate) fn register(
        &self,
        process: &Process,
        buf: UserPtr,
        size: u64,
        permission: u64,
        password: Password,
    ) -> Result<LmrHandle> {
        let permission = check_region(size, permission)?;
        let len = usize::try_from(size).map_err(|_| EINVAL)?;
        buf.checked_add(len).ok_or(EFAULT)?;
        // PANIC: `PAGE_SIZE` is not 0; `lead <= buf`, and `lead + len <=
        // buf + len`, which was checked not to overflow.
        let lead = buf % PAGE_SIZE;
        let start = buf - lead;
        let count = (lead + len).div_ceil(PAGE_SIZE);
        let pinned_bytes = (count as u64).checked_mul(PAGE_SIZE as u64).ok_or(EINVAL)?;
        let charge = self.core.quotas.charge(
            process.payer(),
            Amounts::of(Resource::PinnedMemory, pinned_bytes).with(Resource::Lmrs, 1),
        )?;
        let pages = PinnedPages::pin(&self.core.device().device, start, count)?;
        let region = Region {
            lead,
            size,
            permission,
            origin: Origin::Registered,
        };
        self.register_pages(process, pages, region, password, charge)
    }

    /// `liteapi_register_lmr_with_virt_addr`: makes the pages of `region`,
    /// taken by the kernel caller, an LMR and returns its owner handle.
    ///
    /// # Errors
    ///
    /// `EINVAL` if the pages are not those of `region`, `ENOMEM`.
    pub(crate) fn register_kernel(
        &self,
        process: &Process,
        region: &KernelRegion,
        pages: PinnedPages,
        password: Password,
    ) -> Result<LmrHandle> {
        if pages.count() != region.count {
            return Err(EINVAL);
        }
        let region = Region {
            lead: region.lead,
            size: region.size,
            permission: region.permission,
            origin: Origin::KernelRegistered,
        };
        self.register_pages(process, pages, region, password, Charge::none())
    }
    /// Turns `pages` into the LMR `region` describes, held by this node and
    /// holding `charge`.
    fn register_pages(
        &self,
        process: &Process,
        mut pages: PinnedPages,
        region: Region,
        password: Password,
        charge: Charge,
    ) -> Result<LmrHandle> {
        let Region {
            lead,
            size,
            permission,
            origin,
        } = region;
        let count = pages.count();
        // Peers reach these pages, and nothing around them, through a
        // memory region of their own.
        pages.register(self.core.pool.registrar())?;
        let geometry = Geometry::new(PAGE_SIZE as u64, lead as u64)?;
        let slot = Lmr::reserve()?;
        let pages = Arc::new(pages, GFP_KERNEL)?;
        let mut chunks = KVec::with_capacity(count, GFP_KERNEL)?;
        for index in 0..count {
            match self.page_chunk(&pages, index) {
                Ok(chunk) => chunks.push(chunk, GFP_KERNEL)?,
                Err(e) => {
                    self.memory.release_chunks(&chunks);
                    return Err(e);
                }
            }
        }
        let lmr = Lmr::new(
            slot,
            LmrParts {
                size,
                geometry,
                permission,
                origin,
                chunks,
                charge,
            },
        );
        self.memory.adopt(process, lmr, password)
    }

    fn page_chunk(&self, pages: &Arc<PinnedPages>, index: usize) -> Result<ChunkRef> {
        let memory = Arc::new(
            ChunkMemory::Page {
                pages: pages.clone(),
                index,
            },
            GFP_KERNEL,
        )?;
        let (addr, rkey) = memory.remote_range(0, PAGE_SIZE)?;
        let chunk_id = self
            .core
            .store
            .insert(self.core.node_id(), memory.clone())?;
        let place = Place {
            node: self.core.node_id(),
            chunk_id,
            addr,
            rkey,
        };
        Ok(ChunkRef::new(place, PAGE_SIZE as u64, Some(memory)))
    }
}

/// Registered memory stays on this node: peers coming and going do not
/// change it.
impl Subsystem for Registration {}
