// SPDX-License-Identifier: GPL-2.0

//! Memory the RDMA device can read and write.

use core::{
    ffi::c_void,
    ptr::NonNull,
    sync::atomic::{AtomicU64, Ordering},
};
use kernel::{
    bindings,
    prelude::*,
    sync::Arc,
    uaccess::{UserPtr, UserSliceReader, UserSliceWriter},
};

use super::{remote_pool::Segment, shared_memory, Device};

/// Largest buffer: one physically contiguous allocation of the page allocator.
pub(crate) const MAX_DMA_BUFFER: usize = 4 << 20;

/// Buffers alive on this node, for `/sys/kernel/debug/lite/resources`.
static LIVE_BUFFERS: AtomicU64 = AtomicU64::new(0);

/// Number of DMA buffers allocated on this node and not yet freed.
pub(crate) fn live_dma_buffers() -> u64 {
    LIVE_BUFFERS.load(Ordering::Relaxed)
}

/// Where the bytes of a [`DmaBuffer`] come from.
enum Backing {
    /// Pages of its own, which no peer can reach.
    Pages,
    /// Pages of a segment of the remote memory pool, which peers reach
    /// through the segment's memory region.
    Segment {
        segment: Arc<Segment>,
        /// Offset of the buffer in the segment.
        at: usize,
    },
}

/// Zeroed, physically contiguous kernel memory mapped for DMA on a device.
///
/// The memory is shared with the device and, through it, with other nodes,
/// so Rust code never holds references into it while it may be shared: it
/// is only accessed through copies ([`DmaBuffer::write_bytes`],
/// [`DmaBuffer::read_bytes`]), or through `&mut self` methods when the
/// caller owns the buffer exclusively (a staging buffer between operations).
///
/// # Invariants
///
/// `cpu` points to `len` (1 to [`MAX_DMA_BUFFER`]) bytes and `dma` is their
/// DMA mapping on `device`. With [`Backing::Pages`], the bytes are an
/// allocation of `alloc_pages_exact` and the mapping are owned by this
/// object; with [`Backing::Segment`], they are the pages at `at` of the
/// segment's memory, reserved for this object in the segment's page map,
/// and the segment (held) keeps them allocated and mapped. No Rust reference
/// into those bytes exists except the one `slice_mut` makes for
/// [`Backing::Pages`], whose lifetime is bounded by a `&mut self` borrow.
pub(crate) struct DmaBuffer {
    cpu: NonNull<u8>,
    len: usize,
    dma: u64,
    device: Arc<Device>,
    backing: Backing,
}

// SAFETY: The buffer is plain kernel memory and a DMA mapping, or pages of a
// pool segment, none tied to a thread; `drop` may unmap and free them, or
// give them back to the segment, from any thread in process context.
// `Arc<Device>` and `Arc<Segment>` are `Send`.
unsafe impl Send for DmaBuffer {}
// SAFETY: Through `&self`, the fields are only read (they never change after
// `new`), and the bytes are only reached through the C copies of
// `shared_memory` (`write_bytes`, `read_bytes`, `fill`, `copy_from`, and
// `cpu_range` for `PinnedPages`), never through a Rust reference (type
// invariant). Every value the bytes may hold is valid, the device may write
// them at any time, and concurrent copies from several threads happen
// outside Rust's memory model, as the device's accesses do (see
// `shared_memory`): sharing `&DmaBuffer` between threads is sound.
unsafe impl Sync for DmaBuffer {}

impl DmaBuffer {
    /// Allocates `len` zeroed bytes (1 to [`MAX_DMA_BUFFER`]) and maps them on `device`.
    ///
    /// # Errors
    ///
    /// `EINVAL` for a bad length, `ENOMEM` if memory or a mapping is unavailable.
    pub(crate) fn new(device: &Arc<Device>, len: usize) -> Result<Self> {
        if len == 0 || len > MAX_DMA_BUFFER {
            return Err(EINVAL);
        }
        let gfp = bindings::GFP_KERNEL | bindings::__GFP_ZERO | bindings::__GFP_NOWARN;
        // SAFETY: Plain page allocation of a non-zero size within the page
        // allocator's largest order, in process context (`GFP_KERNEL`); the
        // result is checked below.
        let cpu = unsafe { bindings::alloc_pages_exact_noprof(len, gfp) }.cast::<u8>();
        let cpu = NonNull::new(cpu).ok_or(ENOMEM)?;
        // SAFETY: `device` is valid (its type invariant) and `cpu` points to
        // `len` bytes of directly mapped kernel memory owned here.
        let dma = unsafe {
            bindings::ib_dma_map_single(
                device.as_ptr(),
                cpu.as_ptr().cast::<c_void>(),
                len,
                bindings::dma_data_direction_DMA_BIDIRECTIONAL,
            )
        };
        // SAFETY: `dma` was just returned by `ib_dma_map_single` on `device`.
        if unsafe { bindings::ib_dma_mapping_error(device.as_ptr(), dma) } != 0 {
            // SAFETY: `cpu` was allocated above with this length, is not
            // mapped (the mapping failed) and is not used afterwards.
            unsafe { bindings::free_pages_exact(cpu.as_ptr().cast::<c_void>(), len) };
            return Err(ENOMEM);
        }
        LIVE_BUFFERS.fetch_add(1, Ordering::Relaxed);
        // INVARIANT: Allocated and mapped above, owned from here on.
        Ok(DmaBuffer {
            cpu,
            len,
            dma,
            device: device.clone(),
            backing: Backing::Pages,
        })
    }

    /// A buffer of `len` bytes at `at` of `memory`, the memory of `segment`,
    /// whose pages from `at` on the caller reserved for it in the segment's
    /// page map; they are given back when the buffer is dropped.
    pub(super) fn carved(
        segment: Arc<Segment>,
        memory: &DmaBuffer,
        at: usize,
        len: usize,
    ) -> Result<Self> {
        if len == 0 {
            return Err(EINVAL);
        }
        let cpu = NonNull::new(memory.cpu_range(at, len)?).ok_or(EINVAL)?;
        let dma = memory.dma_range(at, len)?;
        LIVE_BUFFERS.fetch_add(1, Ordering::Relaxed);
        // INVARIANT: `[at, at + len)` is inside `memory` (checked by
        // `cpu_range`), whose pages there the caller reserved for this buffer,
        // and `segment`, which owns `memory`, is held.
        Ok(DmaBuffer {
            cpu,
            len,
            dma,
            device: memory.device.clone(),
            backing: Backing::Segment { segment, at },
        })
    }

    /// The address and key peers use to reach `[at, at + len)` of the
    /// buffer, after checking that the range is inside it.
    ///
    /// # Errors
    ///
    /// `EINVAL` for a range outside the buffer, or a buffer that is not from
    /// the remote memory pool (no peer can reach it).
    pub(crate) fn remote_range(&self, at: usize, len: usize) -> Result<(u64, u32)> {
        match &self.backing {
            Backing::Segment { segment, .. } => Ok((self.dma_range(at, len)?, segment.rkey())),
            Backing::Pages => Err(EINVAL),
        }
    }

    /// Length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// DMA address of byte `at`, after checking that `[at, at + len)` is inside the buffer.
    pub(crate) fn dma_range(&self, at: usize, len: usize) -> Result<u64> {
        self.check(at, len)?;
        // `at <= len` and the mapping covers `len` bytes, so this does not
        // overflow in practice; checked anyway rather than risk a panic.
        self.dma.checked_add(at as u64).ok_or(EINVAL)
    }

    /// As [`DmaBuffer::dma_range`], after also checking that the buffer is
    /// mapped on `device`, for a work request posted there: its DMA addresses
    /// mean nothing to another device.
    pub(super) fn dma_range_on(&self, device: &Device, at: usize, len: usize) -> Result<u64> {
        if !device.is(self.device.as_ptr()) {
            return Err(EINVAL);
        }
        self.dma_range(at, len)
    }

    fn check(&self, at: usize, len: usize) -> Result {
        match at.checked_add(len) {
            Some(end) if end <= self.len => Ok(()),
            _ => Err(EINVAL),
        }
    }

    /// Copies `data` into the buffer at `at`.
    pub(crate) fn write_bytes(&self, at: usize, data: &[u8]) -> Result {
        self.check(at, data.len())?;
        // SAFETY: The range is inside the owned allocation (checked above),
        // so `add` stays in bounds and the destination is valid for writes;
        // `data` cannot overlap it, as no reference into the buffer exists
        // while `&self` is shared (type invariant). See the `Sync` impl on
        // concurrent copies.
        unsafe { shared_memory::copy_in(self.cpu.as_ptr().add(at), data) };
        Ok(())
    }

    /// Copies bytes at `at` out of the buffer into `out`.
    pub(crate) fn read_bytes(&self, at: usize, out: &mut [u8]) -> Result {
        self.check(at, out.len())?;
        // SAFETY: The range is inside the owned allocation (checked above),
        // so `add` stays in bounds and the source is valid for reads of
        // initialised bytes (zeroed at allocation); `out` cannot overlap it,
        // as no reference into the buffer exists while `&self` is shared
        // (type invariant). See the `Sync` impl on concurrent copies.
        unsafe { shared_memory::copy_out(out, self.cpu.as_ptr().add(at)) };
        Ok(())
    }

    /// A copy of the `len` bytes at `at`, in a vector not zeroed first.
    ///
    /// # Errors
    ///
    /// `EINVAL` for a range outside the buffer, `ENOMEM`.
    pub(crate) fn copied(&self, at: usize, len: usize) -> Result<KVVec<u8>> {
        let src = self.cpu_range(at, len)?;
        let mut copy = KVVec::with_capacity(len, GFP_KERNEL)?;
        // PANIC: `with_capacity(len)` gives a spare capacity of at least `len`.
        let spare = &mut copy.spare_capacity_mut()[..len];
        // SAFETY: `cpu_range` checked that the range is inside the owned
        // allocation, so `src` is valid for reads of `len` bytes; `spare`
        // is fresh kernel memory that cannot overlap it, and no reference
        // into the buffer exists while `&self` is shared (type invariant).
        unsafe { shared_memory::copy_out_uninit(spare, src) };
        // SAFETY: The copy above initialised the first `len` bytes, within
        // the capacity.
        unsafe { copy.set_len(len) };
        Ok(copy)
    }

    /// Copies the `len` bytes at `at` to the user address `dst`. Unlike
    /// [`DmaBuffer::copy_to_user`], this works on memory peers may write.
    ///
    /// # Errors
    ///
    /// `EINVAL` for a range outside the buffer, `EFAULT` if the user memory
    /// cannot be written.
    pub(crate) fn write_to_user(&self, at: usize, dst: UserPtr, len: usize) -> Result {
        let src = self.cpu_range(at, len)?;
        // SAFETY: `cpu_range` checked that the range is inside the owned
        // allocation, so it is valid for reads of `len` bytes; no reference
        // into the buffer exists while `&self` is shared (type invariant).
        unsafe { shared_memory::copy_to_user(dst, src, len) }
    }

    /// Sets `[at, at + len)` to `byte`.
    pub(crate) fn fill(&self, at: usize, len: usize, byte: u8) -> Result {
        let ptr = self.cpu_range(at, len)?;
        // SAFETY: `cpu_range` checked that the range is inside the owned
        // allocation, so it is valid for writes; no reference into the
        // buffer exists while `&self` is shared (type invariant).
        unsafe { shared_memory::fill(ptr, byte, len) };
        Ok(())
    }

    /// CPU address of byte `at`, after checking that `[at, at + len)` is
    /// inside the buffer. Only for raw copies within this module's types.
    pub(super) fn cpu_range(&self, at: usize, len: usize) -> Result<*mut u8> {
        self.check(at, len)?;
        // SAFETY: `at <= at + len <= self.len` (checked above), so the result
        // is inside the allocation or one past its end.
        Ok(unsafe { self.cpu.as_ptr().add(at) })
    }

    /// Copies `len` bytes from `src` at `src_at` into this buffer at `at`.
    ///
    /// The buffers may be the same one and the ranges may overlap.
    pub(crate) fn copy_from(
        &self,
        at: usize,
        src: &DmaBuffer,
        src_at: usize,
        len: usize,
    ) -> Result {
        self.check(at, len)?;
        src.check(src_at, len)?;
        // SAFETY: Both ranges are inside owned allocations (checked above),
        // so both `add`s stay in bounds, the source is valid for reads and
        // the destination for writes; `copy_within` handles overlap, which happens
        // only when `src` is `self`. No reference into either buffer exists
        // while they are shared (type invariant).
        unsafe {
            shared_memory::copy_within(self.cpu.as_ptr().add(at), src.cpu.as_ptr().add(src_at), len)
        };
        Ok(())
    }

    /// Fills `[at, at + len)` from userspace.
    ///
    /// # Errors
    ///
    /// `EFAULT` if the user memory cannot be read.
    pub(crate) fn fill_from_user(
        &mut self,
        at: usize,
        reader: &mut UserSliceReader,
        len: usize,
    ) -> Result {
        reader.read_slice(self.slice_mut(at, len)?)
    }

    /// Copies `[at, at + len)` to userspace.
    ///
    /// # Errors
    ///
    /// `EFAULT` if the user memory cannot be written.
    pub(crate) fn copy_to_user(
        &mut self,
        at: usize,
        writer: &mut UserSliceWriter,
        len: usize,
    ) -> Result {
        writer.write_slice(self.slice_mut(at, len)?)
    }

    fn slice_mut(&mut self, at: usize, len: usize) -> Result<&mut [u8]> {
        if !matches!(self.backing, Backing::Pages) {
            // Peers may write pool memory at any time.
            return Err(EINVAL);
        }
        self.check(at, len)?;
        // SAFETY: The range is inside the owned allocation (checked above)
        // and initialised (zeroed at allocation). `&mut self` means no other
        // access through this object is under way, and no work request this
        // node posted on it is either (`Connection` borrows the buffer until
        // the request's completion), so nothing else touches the bytes while
        // the returned borrow, bounded by `&mut self`, lives. Peers cannot
        // reach them either: they have their own pages (checked above), which
        // no memory region covers.
        Ok(unsafe { core::slice::from_raw_parts_mut(self.cpu.as_ptr().add(at), len) })
    }
}

/// Dropping a buffer may sleep: the last buffer of a segment the pool
/// released deregisters the segment's memory region.
impl Drop for DmaBuffer {
    fn drop(&mut self) {
        LIVE_BUFFERS.fetch_sub(1, Ordering::Relaxed);
        match &self.backing {
            Backing::Segment { segment, at } => segment.give_back(*at, self.len),
            // SAFETY: `dma` is the mapping created in `new` on `device`, and
            // the memory was allocated there with `len` bytes, both owned by
            // this object (type invariant). No work request on it is in
            // flight (they borrow the buffer until they complete), no memory
            // region covers it, and neither is used again.
            Backing::Pages => unsafe {
                bindings::ib_dma_unmap_single(
                    self.device.as_ptr(),
                    self.dma,
                    self.len,
                    bindings::dma_data_direction_DMA_BIDIRECTIONAL,
                );
                bindings::free_pages_exact(self.cpu.as_ptr().cast::<c_void>(), self.len);
            },
        }
    }
}
