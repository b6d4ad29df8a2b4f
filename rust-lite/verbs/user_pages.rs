// SPDX-License-Identifier: GPL-2.0

//! Memory pinned in place and mapped for the RDMA device: pages of a
//! process, or pages of a kernel caller that keeps them allocated.

use core::{ffi::c_void, ptr::null_mut};
use kernel::{bindings, prelude::*, sync::Arc};

use super::{Device, DmaBuffer};

/// Bytes per page.
pub(crate) const PAGE_SIZE: usize = kernel::page::PAGE_SIZE;

/// Who keeps the pages of [`PinnedPages`] in place.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Holder {
    /// A long-term pin of user pages, owned by the object.
    UserPin,
    /// The kernel caller that registered them.
    KernelCaller,
}

/// Pages pinned (or kept by their kernel owner) and mapped for DMA.
///
/// Like [`DmaBuffer`], the memory is shared with the device (and with the
/// process or kernel code that owns it), so it is only ever accessed
/// through raw copies.
///
/// # Invariants
///
/// With `holder == UserPin`, every entry of `pages` is a page pinned by
/// `pin_user_pages_fast` with `FOLL_LONGTERM`, and the pin is owned by this
/// object; with `KernelCaller`, every page stays allocated while this object
/// lives. `dma[i]` is the DMA mapping of the whole page `pages[i]` on
/// `device`.
pub(crate) struct PinnedPages {
    pages: KVec<*mut bindings::page>,
    dma: KVec<u64>,
    holder: Holder,
    device: Arc<Device>,
}

// SAFETY: The pages are pinned memory owned by this object; every access
// goes through raw copies.
unsafe impl Send for PinnedPages {}
// SAFETY: `&self` methods only copy bytes in and out through raw pointers.
unsafe impl Sync for PinnedPages {}

impl PinnedPages {
    /// Pins `count` pages of the current process starting at the
    /// page-aligned user address `start`, for reading and writing.
    ///
    /// # Errors
    ///
    /// `EINVAL` for an unaligned start or no pages, `EFAULT` if a page is not
    /// mapped writable, `ENOMEM` if memory or a mapping is unavailable.
    pub(crate) fn pin(device: &Arc<Device>, start: usize, count: usize) -> Result<Self> {
        if start % PAGE_SIZE != 0 || count == 0 || count > i32::MAX as usize {
            return Err(EINVAL);
        }
        let mut pages = KVec::<*mut bindings::page>::from_elem(null_mut(), count, GFP_KERNEL)?;
        let mut pinned = 0usize;
        let flags = bindings::FOLL_WRITE | bindings::FOLL_LONGTERM;
        while pinned < count {
            let address = start + pinned * PAGE_SIZE;
            // SAFETY: `pages[pinned..]` has room for `count - pinned` entries.
            let ret = unsafe {
                bindings::pin_user_pages_fast(
                    address,
                    (count - pinned) as i32,
                    flags,
                    pages.as_mut_ptr().add(pinned),
                )
            };
            if ret <= 0 {
                Self::unpin(&mut pages[..pinned]);
                return Err(if ret < 0 {
                    Error::from_errno(ret as i32)
                } else {
                    EFAULT
                });
            }
            pinned += ret as usize;
        }
        // INVARIANT: Every page was pinned above.
        Self::map(device, pages, Holder::UserPin)
    }

    /// Takes `count` pages of kernel memory starting at the page-aligned
    /// address `start`.
    ///
    /// # Errors
    ///
    /// `EINVAL` for an unaligned start, no pages, or an address that is
    /// neither directly mapped nor vmalloc memory; `ENOMEM`.
    ///
    /// # Safety
    ///
    /// The pages must stay allocated until the returned object is dropped.
    pub(crate) unsafe fn kernel(
        device: &Arc<Device>,
        start: *mut u8,
        count: usize,
    ) -> Result<Self> {
        if start as usize % PAGE_SIZE != 0 || count == 0 {
            return Err(EINVAL);
        }
        let mut pages = KVec::with_capacity(count, GFP_KERNEL)?;
        for index in 0..count {
            let address = (start as usize)
                .checked_add(index * PAGE_SIZE)
                .ok_or(EINVAL)?;
            // SAFETY: The helper only translates the address; it returns
            // null for one it cannot translate.
            let page = unsafe { bindings::lite_kernel_addr_to_page(address as *const c_void) };
            if page.is_null() {
                return Err(EINVAL);
            }
            pages.push(page, GFP_KERNEL)?;
        }
        // INVARIANT: The caller keeps the pages allocated.
        Self::map(device, pages, Holder::KernelCaller)
    }

    /// Maps `pages`, held as `holder` says, for DMA on `device`; releases
    /// them on failure.
    fn map(
        device: &Arc<Device>,
        mut pages: KVec<*mut bindings::page>,
        holder: Holder,
    ) -> Result<Self> {
        let release = |pages: &mut [*mut bindings::page]| {
            if holder == Holder::UserPin {
                Self::unpin(pages);
            }
        };
        let mut dma = match KVec::with_capacity(pages.len(), GFP_KERNEL) {
            Ok(dma) => dma,
            Err(e) => {
                release(&mut pages);
                return Err(e.into());
            }
        };
        for (i, &page) in pages.iter().enumerate() {
            // SAFETY: `page` is pinned above; `device` is valid.
            let addr = unsafe {
                bindings::ib_dma_map_page(
                    device.as_ptr(),
                    page,
                    0,
                    PAGE_SIZE,
                    bindings::dma_data_direction_DMA_BIDIRECTIONAL,
                )
            };
            // SAFETY: `addr` was just returned by `ib_dma_map_page` on `device`.
            let failed = unsafe { bindings::ib_dma_mapping_error(device.as_ptr(), addr) } != 0;
            if failed || dma.push(addr, GFP_KERNEL).is_err() {
                Self::unmap(device, &dma[..i.min(dma.len())]);
                release(&mut pages);
                return Err(ENOMEM);
            }
        }
        // INVARIANT: Every page is held as `holder` says and was mapped above.
        Ok(PinnedPages {
            pages,
            dma,
            holder,
            device: device.clone(),
        })
    }

    fn unmap(device: &Arc<Device>, dma: &[u64]) {
        for &addr in dma {
            // SAFETY: `addr` is a page mapping made by `pin` on `device`.
            unsafe {
                bindings::ib_dma_unmap_page(
                    device.as_ptr(),
                    addr,
                    PAGE_SIZE,
                    bindings::dma_data_direction_DMA_BIDIRECTIONAL,
                )
            };
        }
    }

    fn unpin(pages: &mut [*mut bindings::page]) {
        if pages.is_empty() {
            return;
        }
        // SAFETY: Every entry is a page pinned by `pin_user_pages_fast`.
        unsafe { bindings::unpin_user_pages(pages.as_mut_ptr(), pages.len() as _) };
    }

    /// Number of pages.
    pub(crate) fn count(&self) -> usize {
        self.pages.len()
    }

    /// DMA address of byte `at` of page `index`, after checking that
    /// `[at, at + len)` lies inside that page.
    pub(crate) fn dma_range(&self, index: usize, at: usize, len: usize) -> Result<u64> {
        check(at, len)?;
        Ok(self.dma.get(index).ok_or(EINVAL)? + at as u64)
    }

    /// Runs `f` with the CPU address of byte `at` of page `index`, after
    /// checking that `[at, at + len)` lies inside that page.
    fn with_mapped<R>(
        &self,
        index: usize,
        at: usize,
        len: usize,
        f: impl FnOnce(*mut u8) -> R,
    ) -> Result<R> {
        check(at, len)?;
        let page = *self.pages.get(index).ok_or(EINVAL)?;
        // SAFETY: `page` is pinned for the life of `self`.
        let base = unsafe { bindings::kmap_local_page(page) }.cast::<u8>();
        // SAFETY: `at < PAGE_SIZE`, checked above.
        let result = f(unsafe { base.add(at) });
        // SAFETY: `base` was mapped just above, and mappings are released in
        // reverse order.
        unsafe { bindings::kunmap_local(base.cast::<c_void>()) };
        Ok(result)
    }

    /// Copies `data` into page `index` at `at`.
    pub(crate) fn write_bytes(&self, index: usize, at: usize, data: &[u8]) -> Result {
        self.with_mapped(index, at, data.len(), |dst| {
            // SAFETY: `dst` points to `data.len()` mapped bytes of a pinned
            // page, which no Rust reference covers.
            unsafe { core::ptr::copy_nonoverlapping(data.as_ptr(), dst, data.len()) }
        })
    }

    /// Copies bytes of page `index` at `at` into `out`.
    pub(crate) fn read_bytes(&self, index: usize, at: usize, out: &mut [u8]) -> Result {
        self.with_mapped(index, at, out.len(), |src| {
            // SAFETY: `src` points to `out.len()` mapped bytes of a pinned page.
            unsafe { core::ptr::copy_nonoverlapping(src, out.as_mut_ptr(), out.len()) }
        })
    }

    /// Sets `len` bytes of page `index` at `at` to `byte`.
    pub(crate) fn fill(&self, index: usize, at: usize, len: usize, byte: u8) -> Result {
        self.with_mapped(index, at, len, |dst| {
            // SAFETY: `dst` points to `len` mapped bytes of a pinned page.
            unsafe { core::ptr::write_bytes(dst, byte, len) }
        })
    }

    /// Copies `len` bytes of page `index` at `at` into `buffer` at `buffer_at`.
    pub(crate) fn copy_to_buffer(
        &self,
        index: usize,
        at: usize,
        buffer: &DmaBuffer,
        buffer_at: usize,
        len: usize,
    ) -> Result {
        let dst = buffer.cpu_range(buffer_at, len)?;
        self.with_mapped(index, at, len, |src| {
            // SAFETY: Both ranges were checked; a page and a buffer never overlap.
            unsafe { core::ptr::copy_nonoverlapping(src, dst, len) }
        })
    }

    /// Copies `len` bytes of `buffer` at `buffer_at` into page `index` at `at`.
    pub(crate) fn copy_from_buffer(
        &self,
        index: usize,
        at: usize,
        buffer: &DmaBuffer,
        buffer_at: usize,
        len: usize,
    ) -> Result {
        let src = buffer.cpu_range(buffer_at, len)?;
        self.with_mapped(index, at, len, |dst| {
            // SAFETY: Both ranges were checked; a page and a buffer never overlap.
            unsafe { core::ptr::copy_nonoverlapping(src, dst, len) }
        })
    }
}

fn check(at: usize, len: usize) -> Result {
    match at.checked_add(len) {
        Some(end) if end <= PAGE_SIZE => Ok(()),
        _ => Err(EINVAL),
    }
}

impl Drop for PinnedPages {
    fn drop(&mut self) {
        Self::unmap(&self.device, &self.dma);
        if self.holder == Holder::UserPin {
            Self::unpin(&mut self.pages);
        }
    }
}
