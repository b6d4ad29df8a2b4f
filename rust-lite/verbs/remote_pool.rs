// SPDX-License-Identifier: GPL-2.0

//! The pool of memory peers can reach: every LMR chunk, RPC ring, reply
//! slot, lock word and sharing table of a node is carved from it.
//!
//! The pool grows by segments, each one allocation of the page allocator's
//! largest order registered as one memory region. Buffers are whole pages of
//! a segment, so the number of memory regions follows the memory in use, not
//! the number of LMRs, and the rest of the node's memory has no key a peer
//! could use.
//!
//! Each segment's region changes its key with the node's other regions
//! when a peer is fenced ([`super::region_keys`]), buffers in use included.
//!
//! A key covers its whole segment: a peer that was handed one buffer of a
//! segment can reach the other buffers of that segment too. The device
//! keeps peers out of everything else; LITE's software keeps them to what
//! they were handed.

use core::sync::atomic::{AtomicU64, Ordering};
use kernel::{new_mutex, new_spinlock, prelude::*, sync::Arc, sync::Mutex, sync::SpinLock};

use super::{
    memory_region::Registrar,
    region_keys::{KeyRegistry, KeyedRegion},
    Device, DmaBuffer, PortConfig, ProtectionDomain, MAX_DMA_BUFFER, PAGE_SIZE,
};

/// Bytes of a segment, when the page allocator has them in one piece.
const SEGMENT_SIZE: usize = MAX_DMA_BUFFER;

/// Pages of a segment.
const SEGMENT_PAGES: usize = SEGMENT_SIZE / PAGE_SIZE;

/// Words of a segment's page map.
const MAP_WORDS: usize = SEGMENT_PAGES.div_ceil(64);

/// Empty segments kept registered, so that a node allocating and freeing
/// LMRs does not register and release a region each time.
const SPARE_SEGMENTS: usize = 1;

/// Bytes of all segments, for `/sys/kernel/debug/lite/resources`.
static POOL_BYTES: AtomicU64 = AtomicU64::new(0);

/// Bytes of memory this node's pools hold.
pub(crate) fn pool_bytes() -> u64 {
    POOL_BYTES.load(Ordering::Relaxed)
}

/// Which pages of a segment are handed out.
///
/// # Invariants
///
/// `pages <= SEGMENT_PAGES`; bit `i` of `used` (`i < pages`) is set while
/// page `i` belongs to a buffer, and `in_use` counts the set bits.
struct PageMap {
    used: [u64; MAP_WORDS],
    pages: usize,
    in_use: usize,
}

impl PageMap {
    fn is_used(&self, page: usize) -> bool {
        // PANIC: callers pass `page < self.pages <= SEGMENT_PAGES`, so the
        // word index is below `MAP_WORDS`.
        self.used[page / 64] & (1 << (page % 64)) != 0
    }

    fn set(&mut self, first: usize, count: usize, used: bool) {
        for page in first..first + count {
            // PANIC: `page < self.pages <= SEGMENT_PAGES` (callers).
            let word = &mut self.used[page / 64];
            if used {
                *word |= 1 << (page % 64);
            } else {
                *word &= !(1 << (page % 64));
            }
        }
    }

    /// Takes the first run of `count` free pages; returns its first page.
    fn take(&mut self, count: usize) -> Option<usize> {
        if count == 0 || count > self.pages - self.in_use {
            return None;
        }
        let mut run = 0;
        for page in 0..self.pages {
            if self.is_used(page) {
                run = 0;
                continue;
            }
            run += 1;
            if run == count {
                let first = page + 1 - count;
                self.set(first, count, true);
                self.in_use += count;
                return Some(first);
            }
        }
        None
    }

    /// Gives back `count` pages from `first`, taken by [`PageMap::take`].
    fn give_back(&mut self, first: usize, count: usize) {
        if first
            .checked_add(count)
            .is_some_and(|end| end <= self.pages)
        {
            self.set(first, count, false);
            self.in_use = self.in_use.saturating_sub(count);
        }
    }
}

/// Memory and the region registered over all of it.
///
/// # Invariants
///
/// `region` is registered over all of `memory`, which outlives it (field
/// order: the region is dropped first).
struct RegisteredMemory {
    region: KeyedRegion,
    memory: DmaBuffer,
}

/// One segment: pages registered as one memory region.
///
/// # Invariants
///
/// `registered.memory` holds `map.pages` pages.
#[pin_data(PinnedDrop)]
pub(crate) struct Segment {
    registered: RegisteredMemory,
    /// Lock class `lite:pool_segment`: see the lock order in [`crate::internal::core`].
    #[pin]
    map: SpinLock<PageMap>,
}

impl Segment {
    /// Allocates and registers a segment of at least `min_len` bytes.
    fn new(registrar: &Registrar, device: &Arc<Device>, min_len: usize) -> Result<Arc<Self>> {
        // Smaller pieces when memory is fragmented, down to what is needed.
        let mut len = SEGMENT_SIZE;
        let memory = loop {
            match DmaBuffer::new(device, len) {
                Ok(memory) => break memory,
                Err(e) if len / 2 < min_len || len <= PAGE_SIZE => return Err(e),
                Err(_) => len /= 2,
            }
        };
        let dma = memory.dma_range(0, len)?;
        // The device maps a limited number of pages per region: larger
        // pages, as the memory is contiguous and aligned to its size.
        let mut page_size = PAGE_SIZE;
        while len / page_size > registrar.max_region_pages() && page_size < len {
            page_size *= 2;
        }
        if dma % page_size as u64 != 0 {
            return Err(EINVAL);
        }
        // SAFETY: `[dma, dma + len)` is the mapping of `memory`, which
        // `RegisteredMemory` keeps mapped until after the region is dropped
        // (field order); its bytes are only reached through raw copies.
        let region = unsafe { registrar.register_keyed(&[dma], len, page_size, dma)? };
        let registered = RegisteredMemory { region, memory };
        let map = PageMap {
            used: [0; MAP_WORDS],
            pages: len / PAGE_SIZE,
            in_use: 0,
        };
        let segment = Arc::pin_init(
            pin_init!(Segment {
                registered,
                map <- new_spinlock!(map, "lite:pool_segment"),
            }),
            GFP_KERNEL,
        )?;
        POOL_BYTES.fetch_add(len as u64, Ordering::Relaxed);
        Ok(segment)
    }

    /// Carves `len` bytes (whole pages) for a buffer, if they fit.
    fn carve(self: &Arc<Self>, len: usize) -> Option<DmaBuffer> {
        let pages = len.div_ceil(PAGE_SIZE);
        let first = self.map.lock().take(pages)?;
        match DmaBuffer::carved(
            self.clone(),
            &self.registered.memory,
            first * PAGE_SIZE,
            len,
        ) {
            Ok(buffer) => Some(buffer),
            Err(_) => {
                self.give_back(first * PAGE_SIZE, len);
                None
            }
        }
    }

    /// Gives back the pages of a buffer of `len` bytes at `at`.
    pub(super) fn give_back(&self, at: usize, len: usize) {
        self.map
            .lock()
            .give_back(at / PAGE_SIZE, len.div_ceil(PAGE_SIZE));
    }

    /// The key peers name the segment by.
    pub(super) fn rkey(&self) -> u32 {
        self.registered.region.identity()
    }

    fn is_empty(&self) -> bool {
        self.map.lock().in_use == 0
    }
}

#[pinned_drop]
impl PinnedDrop for Segment {
    fn drop(self: Pin<&mut Self>) {
        POOL_BYTES.fetch_sub(self.registered.memory.len() as u64, Ordering::Relaxed);
    }
}

/// The node's pool of memory peers can reach.
#[pin_data]
pub(crate) struct RemotePool {
    #[pin]
    registrar: Registrar,
    /// Lock class `lite:remote_pool`: see the lock order in [`crate::internal::core`].
    #[pin]
    segments: Mutex<KVec<Arc<Segment>>>,
    device: Arc<Device>,
}

impl RemotePool {
    /// An empty pool registering its segments in `pd`, through `port`, as
    /// regions of `keys`.
    pub(crate) fn new(
        pd: &Arc<ProtectionDomain>,
        port: &PortConfig,
        keys: &Arc<KeyRegistry>,
    ) -> Result<impl PinInit<Self, Error>> {
        let registrar = Registrar::new(pd, port, keys)?;
        let device = pd.device().clone();
        Ok(try_pin_init!(RemotePool {
            registrar <- registrar,
            segments <- new_mutex!(KVec::new(), "lite:remote_pool"),
            device,
        }? Error))
    }

    /// The registrar, for memory registered outside the pool.
    pub(crate) fn registrar(&self) -> &Registrar {
        &self.registrar
    }

    /// A zeroed buffer of `len` bytes (1 to [`MAX_DMA_BUFFER`]) that peers
    /// can reach with [`DmaBuffer::remote_range`].
    ///
    /// # Errors
    ///
    /// `EINVAL` for a bad length, `ENOMEM` if memory is short.
    pub(crate) fn allocate(&self, len: usize) -> Result<DmaBuffer> {
        if len == 0 || len > MAX_DMA_BUFFER {
            return Err(EINVAL);
        }
        let found = {
            let segments = self.segments.lock();
            segments.iter().find_map(|segment| segment.carve(len))
        };
        let buffer = match found {
            Some(buffer) => buffer,
            None => {
                let segment = Segment::new(&self.registrar, &self.device, len)?;
                let buffer = segment.carve(len).ok_or(ENOMEM)?;
                self.segments.lock().push(segment, GFP_KERNEL)?;
                buffer
            }
        };
        // Pages come back from earlier buffers with their old bytes.
        buffer.fill(0, len, 0)?;
        Ok(buffer)
    }

    /// Releases empty segments beyond [`SPARE_SEGMENTS`].
    pub(crate) fn trim(&self) {
        let mut segments = self.segments.lock();
        let count = segments.len();
        let (Ok(mut kept), Ok(mut released)) = (
            KVec::with_capacity(count, GFP_KERNEL),
            KVec::with_capacity(count, GFP_KERNEL),
        ) else {
            return;
        };
        let mut spare = 0;
        for segment in core::mem::take(&mut *segments) {
            let keep = !segment.is_empty() || {
                spare += 1;
                spare <= SPARE_SEGMENTS
            };
            // Both have room for every segment, so neither push fails.
            // Segments are carved only under `segments`, so one that is
            // empty stays empty once it is out of the list.
            let _ = if keep {
                kept.push(segment, GFP_KERNEL)
            } else {
                released.push(segment, GFP_KERNEL)
            };
        }
        *segments = kept;
        drop(segments);
        // Deregistered and freed here, outside the lock, unless a buffer
        // that was just dropped still holds its segment: its thread then
        // releases it.
        drop(released);
    }

    /// Number of segments and their bytes.
    pub(crate) fn usage(&self) -> (usize, u64) {
        let segments = self.segments.lock();
        let bytes = segments
            .iter()
            .map(|s| s.registered.memory.len() as u64)
            .sum();
        (segments.len(), bytes)
    }
}
