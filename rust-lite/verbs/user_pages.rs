// SPDX-License-Identifier: GPL-2.0

//! Memory pinned in place and mapped for the RDMA device: pages of a
//! process, or pages of a kernel caller that keeps them allocated.

use core::{
    ffi::c_void,
    ptr::{addr_of_mut, null_mut, NonNull},
};
use kernel::{bindings, page::PAGE_SHIFT, prelude::*, sync::Arc};

use super::{memory_region::Registrar, region_keys::KeyedRegion, shared_memory, Device, DmaBuffer};

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
/// object; with `KernelCaller`, every page stays allocated, and may be read
/// and written through this object, while it lives (the contract of
/// [`PinnedPages::kernel`]). `dma.len() == pages.len()`, and `dma[i]` is the
/// DMA mapping of the whole page `pages[i]` on `device`, owned by this
/// object. `regions`, once registered, cover those mappings in order, each
/// `region_pages` of them (the last one the rest). No Rust reference into
/// the pages is ever made.
pub(crate) struct PinnedPages {
    pages: KVec<*mut bindings::page>,
    dma: KVec<u64>,
    holder: Holder,
    device: Arc<Device>,
    regions: KVec<KeyedRegion>,
    region_pages: usize,
    /// With `UserPin`, the pages counted against the process's
    /// `RLIMIT_MEMLOCK`; given back after they are unpinned.
    pinned_vm: Option<PinnedVmCharge>,
}

// SAFETY: The page pointers, pins and DMA mappings are not tied to a thread;
// `drop` may unmap and unpin them from any thread in process context.
// `Arc<Device>` is `Send`.
unsafe impl Send for PinnedPages {}
// SAFETY: Through `&self`, the fields are only read (they never change after
// construction), and the pages' bytes are only reached through the C copies
// of `shared_memory` inside a `kmap_local_page` mapping of the calling
// thread, never through a Rust reference (type invariant). Every value they
// may hold is valid; the owning process or kernel caller, the device and
// other threads may write them at any time, outside Rust's memory model (see
// `shared_memory`): sharing `&PinnedPages` between threads is sound.
unsafe impl Sync for PinnedPages {}

impl PinnedPages {
    /// Pins `count` pages of the current process starting at the
    /// page-aligned user address `start`, for reading and writing.
    ///
    /// # Errors
    ///
    /// `EINVAL` for an unaligned start or no pages, `EFAULT` if a page is not
    /// mapped writable, `ENOMEM` if memory or a mapping is unavailable or
    /// the pages would exceed the process's `RLIMIT_MEMLOCK`.
    pub(crate) fn pin(device: &Arc<Device>, start: usize, count: usize) -> Result<Self> {
        if start % PAGE_SIZE != 0 || count == 0 || count > i32::MAX as usize {
            return Err(EINVAL);
        }
        // Counted before pinning, as `ibv_reg_mr` does.
        let pinned_vm = PinnedVmCharge::new(count)?;
        let mut pages = KVec::<*mut bindings::page>::from_elem(null_mut(), count, GFP_KERNEL)?;
        let mut pinned = 0usize;
        let flags = bindings::FOLL_WRITE | bindings::FOLL_LONGTERM;
        while pinned < count {
            // PANIC: `pinned < count <= i32::MAX`, so the product is below
            // 2^43; the sum does not overflow either: it is `start` when
            // `pinned == 0`, and otherwise the end of `pinned` pages of user
            // memory that were just pinned, which is below the top of the
            // user address space.
            let address = start + pinned * PAGE_SIZE;
            // SAFETY: `pages` has `count` entries, so `add(pinned)` stays in
            // bounds and leaves room for the `count - pinned` entries (a
            // positive number that fits in an `i32`) the call may write.
            // `pin_user_pages_fast` only touches the current process's page
            // tables, which any user address is checked against.
            let ret = unsafe {
                bindings::pin_user_pages_fast(
                    address,
                    (count - pinned) as i32,
                    flags,
                    pages.as_mut_ptr().add(pinned),
                )
            };
            if ret <= 0 {
                // PANIC: `pinned < count == pages.len()`.
                let done = &mut pages[..pinned];
                // SAFETY: The first `pinned` entries were pinned above and
                // are not used again.
                unsafe { Self::unpin(done) };
                return Err(if ret < 0 {
                    Error::from_errno(ret as i32)
                } else {
                    EFAULT
                });
            }
            // PANIC: `0 < ret <= count - pinned` (the call pins at most the
            // pages asked for), so `pinned` stays at most `count`.
            pinned += ret as usize;
        }
        // INVARIANT: Every page was pinned above with `FOLL_LONGTERM`, and
        // the pins are handed to `map`.
        let mut pinned = Self::map(device, pages, Holder::UserPin)?;
        pinned.pinned_vm = Some(pinned_vm);
        Ok(pinned)
    }

    /// Takes `count` pages of kernel memory starting at the page-aligned
    /// address `start`.
    ///
    /// The pages are not pinned or referenced: they stay the caller's. Each
    /// page is looked up once, here, through the direct map or the vmalloc
    /// page tables, and from then on is reached through its `struct page`
    /// only.
    ///
    /// # Errors
    ///
    /// `EINVAL` for an unaligned start, no pages, or an address that is
    /// neither directly mapped (`kmalloc`, the page allocator) nor vmalloc
    /// memory (checked page by page); `ENOMEM`.
    ///
    /// # Safety
    ///
    /// For as long as the returned object exists (and so for as long as
    /// any `Arc` it is put into has a reference):
    ///
    /// - every one of the `count` pages from `start` must be memory that is
    ///   allocated when this is called and stays allocated: not freed
    ///   (`kfree`, `free_pages`, `vfree`, ...) and not handed back to the
    ///   allocator in any other way, so that neither the page nor its
    ///   `struct page` is reused; for vmalloc memory, the area must also
    ///   not be remapped to other pages;
    /// - the pages must not be memory of a [`DmaBuffer`] (copies between the
    ///   two assume they never overlap);
    /// - the whole pages, not only the part the caller means to expose,
    ///   may be read and written at any time through the returned object
    ///   (its `write_bytes`, `fill`, `copy_from_buffer`, ... take any offset
    ///   within a page) and by the device and other nodes through the DMA
    ///   addresses it hands out: the caller must make sure users of the
    ///   object stay within memory it may overwrite, and must not hold Rust
    ///   references to any of those bytes meanwhile.
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
            let address = index
                .checked_mul(PAGE_SIZE)
                .and_then(|offset| (start as usize).checked_add(offset))
                .ok_or(EINVAL)?;
            // The translation stays valid because the caller keeps the memory
            // allocated (safety requirements).
            pages.push(kernel_page(address as *const c_void)?, GFP_KERNEL)?;
        }
        // INVARIANT: The caller keeps the pages allocated and lets this
        // object read and write them (safety requirements).
        Self::map(device, pages, Holder::KernelCaller)
    }

    /// Maps `pages`, held as `holder` says, for DMA on `device`; releases
    /// them on failure.
    ///
    /// Every entry of `pages` must be held as `holder` says (see the type
    /// invariants), and with `UserPin` the pins are handed over to this call.
    fn map(
        device: &Arc<Device>,
        mut pages: KVec<*mut bindings::page>,
        holder: Holder,
    ) -> Result<Self> {
        let release = |pages: &mut [*mut bindings::page]| {
            if holder == Holder::UserPin {
                // SAFETY: With `UserPin`, every entry is a page pinned by
                // `pin_user_pages_fast` whose pin was handed to `map`, and
                // `map` fails right after this, never using them again.
                unsafe { Self::unpin(pages) };
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
            // SAFETY: `page` is a valid page held as `holder` says for as
            // long as the mapping may exist (it is unmapped before the pages
            // are released); `device` is valid (its type invariant); the
            // offset and length cover exactly the page.
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
            // `push` cannot fail: capacity for every page was reserved above.
            if failed || dma.push(addr, GFP_KERNEL).is_err() {
                // PANIC: `min` keeps the bound within `dma.len()`.
                let mapped = &dma[..i.min(dma.len())];
                // SAFETY: `mapped` holds the mappings made on `device` by
                // earlier iterations, which are not used again.
                unsafe { Self::unmap(device, mapped) };
                release(&mut pages);
                return Err(ENOMEM);
            }
        }
        // INVARIANT: Every page is held as `holder` says and was mapped above,
        // one mapping per page, in order.
        Ok(PinnedPages {
            pages,
            dma,
            holder,
            device: device.clone(),
            regions: KVec::new(),
            region_pages: 0,
            pinned_vm: None,
        })
    }

    /// Unmaps page mappings.
    ///
    /// # Safety
    ///
    /// Every entry of `dma` must be a whole-page mapping made by
    /// `ib_dma_map_page` on `device` (in `map`), not yet unmapped and not
    /// used afterwards.
    unsafe fn unmap(device: &Arc<Device>, dma: &[u64]) {
        for &addr in dma {
            // SAFETY: `addr` is a live page mapping made on `device` (safety
            // requirements), unmapped with the size and direction it was
            // made with.
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

    /// Releases user page pins.
    ///
    /// # Safety
    ///
    /// Every entry of `pages` must be a page pinned by `pin_user_pages_fast`
    /// whose pin the caller owns and gives up here; the pages must not be
    /// used through these entries afterwards (nor mapped for DMA anymore).
    unsafe fn unpin(pages: &mut [*mut bindings::page]) {
        if pages.is_empty() {
            return;
        }
        // SAFETY: Every entry is a page pinned by `pin_user_pages_fast` whose
        // pin is ours to release (safety requirements); the pointer and
        // length describe exactly those entries.
        unsafe { bindings::unpin_user_pages(pages.as_mut_ptr(), pages.len() as _) };
    }

    /// Registers the pages as memory regions (as few as the device allows),
    /// so peers can reach them, and nothing around them, with
    /// [`PinnedPages::remote_range`].
    ///
    /// # Errors
    ///
    /// `EALREADY` if they are registered already, or the registrar's error.
    pub(crate) fn register(&mut self, registrar: &Registrar) -> Result {
        if !self.regions.is_empty() {
            return Err(crate::errno::EALREADY());
        }
        // At least 1 (`Device::max_region_pages`), as `chunks` needs.
        let per_region = registrar.max_region_pages();
        let mut regions = KVec::with_capacity(self.dma.len().div_ceil(per_region), GFP_KERNEL)?;
        for pages in self.dma.chunks(per_region) {
            let iova = *pages.first().ok_or(EINVAL)?;
            // SAFETY: Every entry of `dma` is a whole-page mapping on the
            // device owned by this object (type invariant), which `drop`
            // releases only after the regions; the pages are only reached
            // through raw copies.
            let region = unsafe { registrar.register_keyed(pages, PAGE_SIZE, PAGE_SIZE, iova)? };
            // Room for every region was reserved above.
            regions.push(region, GFP_KERNEL)?;
        }
        self.regions = regions;
        self.region_pages = per_region;
        Ok(())
    }

    /// The address and key peers use to reach `[at, at + len)` of page
    /// `index`, after checking that the range is inside that page.
    ///
    /// # Errors
    ///
    /// `EINVAL` for a range outside the page, or pages never registered.
    pub(crate) fn remote_range(&self, index: usize, at: usize, len: usize) -> Result<(u64, u32)> {
        check(at, len)?;
        if index >= self.dma.len() {
            return Err(EINVAL);
        }
        if self.region_pages == 0 {
            return Err(EINVAL);
        }
        // PANIC: `region_pages` is not 0 (checked above).
        let region = self.regions.get(index / self.region_pages).ok_or(EINVAL)?;
        // PANIC: as above; `index % region_pages < region_pages <= i32::MAX`
        // and `at <= PAGE_SIZE`, so this does not overflow a 64-bit `usize`.
        region.remote_range(
            ((index % self.region_pages) * PAGE_SIZE + at) as u64,
            len as u64,
        )
    }

    /// Number of pages.
    pub(crate) fn count(&self) -> usize {
        self.pages.len()
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
        // SAFETY: `page` is a valid page held for the life of `self` (type
        // invariant). The mapping is local to this thread and released
        // below, right after `f`, in the same frame.
        let base = unsafe { bindings::kmap_local_page(page) }.cast::<u8>();
        // SAFETY: `base` maps the whole page (`PAGE_SIZE` bytes) and
        // `at <= at + len <= PAGE_SIZE` (checked above), so the result is
        // inside the mapping or one past its end.
        let result = f(unsafe { base.add(at) });
        // SAFETY: `base` was returned by `kmap_local_page` just above; `f`
        // only copies bytes and leaves no other local mapping behind, so this
        // is the most recent one, as `kunmap_local` requires.
        unsafe { bindings::kunmap_local(base.cast::<c_void>()) };
        Ok(result)
    }

    /// Copies `data` into page `index` at `at`.
    pub(crate) fn write_bytes(&self, index: usize, at: usize, data: &[u8]) -> Result {
        self.with_mapped(index, at, data.len(), |dst| {
            // SAFETY: `dst` points to `data.len()` mapped bytes of a held
            // page (`with_mapped` checked the range), valid for writes; no
            // Rust reference covers them (type invariant), so `data` cannot
            // overlap them.
            unsafe { shared_memory::copy_in(dst, data) }
        })
    }

    /// Copies bytes of page `index` at `at` into `out`.
    pub(crate) fn read_bytes(&self, index: usize, at: usize, out: &mut [u8]) -> Result {
        self.with_mapped(index, at, out.len(), |src| {
            // SAFETY: `src` points to `out.len()` mapped bytes of a held page
            // (`with_mapped` checked the range), valid for reads; no Rust
            // reference covers them (type invariant), so `out` cannot overlap
            // them.
            unsafe { shared_memory::copy_out(out, src) }
        })
    }

    /// Sets `len` bytes of page `index` at `at` to `byte`.
    pub(crate) fn fill(&self, index: usize, at: usize, len: usize, byte: u8) -> Result {
        self.with_mapped(index, at, len, |dst| {
            // SAFETY: `dst` points to `len` mapped bytes of a held page
            // (`with_mapped` checked the range), valid for writes.
            unsafe { shared_memory::fill(dst, byte, len) }
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
            // SAFETY: `src` is `len` mapped bytes of a held page and `dst`
            // `len` bytes of `buffer`, which `&buffer` keeps allocated (both
            // ranges checked); a pinned or caller-held page is never part of
            // a `DmaBuffer`'s allocation, so they do not overlap.
            unsafe { shared_memory::copy_within(dst, src, len) }
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
            // SAFETY: `dst` is `len` mapped bytes of a held page and `src`
            // `len` bytes of `buffer`, which `&buffer` keeps allocated (both
            // ranges checked); a pinned or caller-held page is never part of
            // a `DmaBuffer`'s allocation, so they do not overlap.
            unsafe { shared_memory::copy_within(dst, src, len) }
        })
    }
}

/// The `struct page` of the kernel address `address`, in vmalloc memory or
/// the direct map.
///
/// # Errors
///
/// `EINVAL` for any other address.
fn kernel_page(address: *const c_void) -> Result<*mut bindings::page> {
    // SAFETY: These only compute with the address; none dereferences it.
    let page = unsafe {
        if bindings::is_vmalloc_addr(address) {
            bindings::vmalloc_to_page(address)
        } else if bindings::virt_addr_valid(address) {
            bindings::virt_to_page(address)
        } else {
            null_mut()
        }
    };
    if page.is_null() {
        Err(EINVAL)
    } else {
        Ok(page)
    }
}

/// Whether the calling task may pin memory beyond its `RLIMIT_MEMLOCK`.
fn may_lock_beyond_rlimit() -> bool {
    // SAFETY: `capable` only reads the calling task's credentials.
    unsafe { bindings::capable(bindings::CAP_IPC_LOCK as i32) }
}

fn check(at: usize, len: usize) -> Result {
    match at.checked_add(len) {
        Some(end) if end <= PAGE_SIZE => Ok(()),
        _ => Err(EINVAL),
    }
}

impl Drop for PinnedPages {
    fn drop(&mut self) {
        // Peers lose their way to the pages before they are unmapped.
        self.regions = KVec::new();
        // SAFETY: `dma` holds this object's live page mappings on `device`
        // (type invariant), and this object does not use them again. (This
        // node posts work requests only on `DmaBuffer`s; the addresses given
        // to other nodes are revoked by the LMR layer before the last
        // reference to the pages goes.)
        unsafe { Self::unmap(&self.device, &self.dma) };
        if self.holder == Holder::UserPin {
            // SAFETY: With `UserPin`, every entry is a page pinned by this
            // object (type invariant), unmapped just above and not used again.
            unsafe { Self::unpin(&mut self.pages) };
        }
    }
}

/// Pages counted against a process's `RLIMIT_MEMLOCK` (its `pinned_vm`,
/// as `ibv_reg_mr` counts them), given back when dropped.
///
/// # Invariants
///
/// `mm` is grabbed (`mmgrab`) and `pages` were added to its `pinned_vm`;
/// the reference and the count are this object's to give back.
struct PinnedVmCharge {
    mm: NonNull<bindings::mm_struct>,
    pages: usize,
}

// SAFETY: The reference to the mm and the count are not tied to a thread:
// they may be given back on any thread in process context.
unsafe impl Send for PinnedVmCharge {}
// SAFETY: Nothing is reached through `&PinnedVmCharge`.
unsafe impl Sync for PinnedVmCharge {}

impl PinnedVmCharge {
    /// Counts `pages` against the calling process's `RLIMIT_MEMLOCK`, as
    /// `ib_umem_get` does.
    ///
    /// # Errors
    ///
    /// `ENOMEM` beyond the limit (without `CAP_IPC_LOCK`), `EINVAL` for a
    /// count that does not fit, `EFAULT` for a task without user memory.
    fn new(pages: usize) -> Result<Self> {
        let count = i64::try_from(pages).map_err(|_| EINVAL)?;
        // SAFETY: `lite_current_mm` only reads the calling task's `mm`.
        let mm = NonNull::new(unsafe { bindings::lite_current_mm() }).ok_or(EFAULT)?;
        // SAFETY: `rlimit` only reads the calling task's limits.
        let limit = unsafe { bindings::rlimit(bindings::RLIMIT_MEMLOCK) } >> PAGE_SHIFT;
        // SAFETY: `mm` is the calling task's, which stays alive during the
        // call; `pinned_vm` is an atomic counter.
        let pinned = unsafe {
            bindings::atomic64_add_return(
                count,
                addr_of_mut!((*mm.as_ptr()).__bindgen_anon_1.pinned_vm),
            )
        };
        if pinned as u64 > limit as u64 && !may_lock_beyond_rlimit() {
            // SAFETY: As above; this takes back what was just added.
            unsafe {
                bindings::atomic64_sub(
                    count,
                    addr_of_mut!((*mm.as_ptr()).__bindgen_anon_1.pinned_vm),
                )
            };
            return Err(ENOMEM);
        }
        // SAFETY: `mm` is alive (above); the reference taken here is given
        // back by `drop`.
        unsafe { bindings::mmgrab(mm.as_ptr()) };
        // INVARIANT: The mm is grabbed and the pages counted; both are
        // handed to this object.
        Ok(PinnedVmCharge { mm, pages })
    }
}

impl Drop for PinnedVmCharge {
    fn drop(&mut self) {
        // The count fitted in an `i64` when it was added (`new`).
        let count = self.pages as i64;
        // SAFETY: The mm is grabbed and the pages counted by this object
        // (type invariant), given back exactly once, here.
        unsafe {
            bindings::atomic64_sub(
                count,
                addr_of_mut!((*self.mm.as_ptr()).__bindgen_anon_1.pinned_vm),
            );
            bindings::mmdrop(self.mm.as_ptr());
        }
    }
}
