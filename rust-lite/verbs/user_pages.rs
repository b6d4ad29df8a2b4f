// SPDX-License-Identifier: GPL-2.0

//! User memory pinned in place and mapped for the RDMA device.

use core::{ffi::c_void, ptr::null_mut};
use kernel::{bindings, prelude::*, sync::Arc};

use super::{Device, DmaBuffer};

/// Bytes per page.
pub(crate) const PAGE_SIZE: usize = kernel::page::PAGE_SIZE;

/// Pages of a process's memory, pinned and mapped for DMA.
///
/// Like [`DmaBuffer`], the memory is shared with the device (and with the
/// process that owns it), so it is only ever accessed through raw copies.
///
/// # Invariants
///
/// Every entry of `pages` is a page pinned by `pin_user_pages_fast` with
/// `FOLL_LONGTERM`, and the pin is owned by this object; `dma[i]` is the
/// DMA mapping of the whole page `pages[i]` on `device`.
pub(crate) struct PinnedPages {
    pages: KVec<*mut bindings::page>,
    dma: KVec<u64>,
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
        let mut dma = KVec::with_capacity(count, GFP_KERNEL)?;
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
                Self::unpin(&mut pages);
                return Err(ENOMEM);
            }
        }
        // INVARIANT: Every page was pinned and mapped above.
        Ok(PinnedPages {
            pages,
            dma,
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
        Self::unpin(&mut self.pages);
    }
}
