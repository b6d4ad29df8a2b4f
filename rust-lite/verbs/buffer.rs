// SPDX-License-Identifier: GPL-2.0

//! Memory the RDMA device can read and write.

use core::{ffi::c_void, ptr::NonNull};
use kernel::{
    bindings,
    prelude::*,
    sync::Arc,
    uaccess::{UserSliceReader, UserSliceWriter},
};

use super::Device;

/// Largest buffer: one physically contiguous allocation of the page allocator.
pub(crate) const MAX_DMA_BUFFER: usize = 4 << 20;

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
/// `cpu` points to `len` bytes from `alloc_pages_exact`, owned by this
/// object, and `dma` is their DMA mapping on `device`.
pub(crate) struct DmaBuffer {
    cpu: NonNull<u8>,
    len: usize,
    dma: u64,
    device: Arc<Device>,
}

// SAFETY: The buffer is plain memory owned by this object; cross-thread use
// goes through raw copies or `&mut self`.
unsafe impl Send for DmaBuffer {}
// SAFETY: `&self` methods only copy bytes in and out through raw pointers.
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
        // SAFETY: Plain page allocation; the result is checked below.
        let cpu = unsafe { bindings::alloc_pages_exact_noprof(len, gfp) }.cast::<u8>();
        let cpu = NonNull::new(cpu).ok_or(ENOMEM)?;
        // SAFETY: `device` is valid (its type invariant) and `cpu` points to
        // `len` bytes of kernel memory.
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
            // SAFETY: `cpu` was allocated above with this length and is unused.
            unsafe { bindings::free_pages_exact(cpu.as_ptr().cast::<c_void>(), len) };
            return Err(ENOMEM);
        }
        // INVARIANT: Allocated and mapped above.
        Ok(DmaBuffer {
            cpu,
            len,
            dma,
            device: device.clone(),
        })
    }

    /// Length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// DMA address of byte `at`, after checking that `[at, at + len)` is inside the buffer.
    pub(crate) fn dma_range(&self, at: usize, len: usize) -> Result<u64> {
        self.check(at, len)?;
        Ok(self.dma + at as u64)
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
        // SAFETY: The range is inside the owned allocation (checked above)
        // and `data` cannot overlap it: no references into the buffer exist.
        unsafe {
            core::ptr::copy_nonoverlapping(data.as_ptr(), self.cpu.as_ptr().add(at), data.len())
        };
        Ok(())
    }

    /// Copies bytes at `at` out of the buffer into `out`.
    pub(crate) fn read_bytes(&self, at: usize, out: &mut [u8]) -> Result {
        self.check(at, out.len())?;
        // SAFETY: The range is inside the owned allocation (checked above)
        // and `out` cannot overlap it: no references into the buffer exist.
        unsafe {
            core::ptr::copy_nonoverlapping(self.cpu.as_ptr().add(at), out.as_mut_ptr(), out.len())
        };
        Ok(())
    }

    /// Sets `[at, at + len)` to `byte`.
    pub(crate) fn fill(&self, at: usize, len: usize, byte: u8) -> Result {
        let ptr = self.cpu_range(at, len)?;
        // SAFETY: `cpu_range` checked that the range is inside the owned
        // allocation; no references into the buffer exist.
        unsafe { core::ptr::write_bytes(ptr, byte, len) };
        Ok(())
    }

    /// CPU address of byte `at`, after checking that `[at, at + len)` is
    /// inside the buffer. Only for raw copies within this module's types.
    pub(super) fn cpu_range(&self, at: usize, len: usize) -> Result<*mut u8> {
        self.check(at, len)?;
        // SAFETY: `at <= self.len`, so the result stays inside the allocation.
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
        // SAFETY: Both ranges are inside owned allocations (checked above);
        // `copy` handles overlap.
        unsafe { core::ptr::copy(src.cpu.as_ptr().add(src_at), self.cpu.as_ptr().add(at), len) };
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
        self.check(at, len)?;
        // SAFETY: The range is inside the owned allocation. `&mut self` means
        // no operation that lets the device touch this buffer is under way
        // (those borrow the buffer until they complete), so the reference is
        // exclusive for its lifetime.
        Ok(unsafe { core::slice::from_raw_parts_mut(self.cpu.as_ptr().add(at), len) })
    }
}

impl Drop for DmaBuffer {
    fn drop(&mut self) {
        // SAFETY: `dma` is the mapping created in `new` on `device`, and the
        // memory was allocated there with `len` bytes (type invariant).
        unsafe {
            bindings::ib_dma_unmap_single(
                self.device.as_ptr(),
                self.dma,
                self.len,
                bindings::dma_data_direction_DMA_BIDIRECTIONAL,
            );
            bindings::free_pages_exact(self.cpu.as_ptr().cast::<c_void>(), self.len);
        }
    }
}
