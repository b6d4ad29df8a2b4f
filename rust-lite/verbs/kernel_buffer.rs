// SPDX-License-Identifier: GPL-2.0

//! Memory a kernel caller of the C API lends LITE to receive the data of an
//! asynchronous read.

use core::ptr::NonNull;
use kernel::prelude::*;

/// Where a kernel caller's asynchronous read delivers its data.
///
/// # Invariants
///
/// `ptr` points to `len` bytes that are valid for writes and that nothing
/// but this buffer accesses until the buffer is dropped (when the read is
/// reaped or cancelled).
pub(crate) struct KernelBuffer {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: By the type invariant, the bytes belong to the buffer until it is
// dropped, whichever thread that happens on. The type is not `Sync`: its one
// access, a write, needs `&mut self`.
unsafe impl Send for KernelBuffer {}

impl KernelBuffer {
    /// Wraps `len` bytes at `ptr`.
    ///
    /// # Errors
    ///
    /// `EFAULT` for a null `ptr` with a non-zero `len`.
    ///
    /// # Safety
    ///
    /// Unless `len` is 0, `ptr` must point to `len` bytes of one allocation
    /// that are valid for writes and that nothing but the returned buffer
    /// accesses from this call until the buffer is dropped: until the
    /// asynchronous read using it is reaped, or cancelled when its process
    /// exits.
    pub(crate) unsafe fn new(ptr: *mut u8, len: usize) -> Result<Self> {
        let ptr = match NonNull::new(ptr) {
            Some(ptr) => ptr,
            None if len == 0 => NonNull::dangling(),
            None => return Err(EFAULT),
        };
        // INVARIANT: With `len` 0, the dangling `ptr` is valid for writes of
        // 0 bytes. Otherwise `ptr` is the caller's non-null pointer (checked
        // above), which by this function's `# Safety` section points to `len`
        // writable bytes that only this buffer accesses until it is dropped.
        Ok(KernelBuffer { ptr, len })
    }

    /// Copies `data`, which must not be longer than the buffer, to its
    /// start.
    ///
    /// # Errors
    ///
    /// `EINVAL` if `data` is longer than the buffer.
    pub(crate) fn write_from(&mut self, data: &[u8]) -> Result {
        if data.len() > self.len {
            return Err(EINVAL);
        }
        // SAFETY: `ptr` is valid for `len >= data.len()` writes and accessed
        // only through this buffer (type invariant), so `data`, a Rust slice,
        // does not overlap it.
        unsafe { core::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.as_ptr(), data.len()) };
        Ok(())
    }
}
