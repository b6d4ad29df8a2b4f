// SPDX-License-Identifier: GPL-2.0

//! Memory a kernel caller of the C API lends LITE for an asynchronous
//! transfer.

use core::ptr::NonNull;
use kernel::prelude::*;

/// A kernel caller's buffer for an asynchronous transfer.
///
/// # Invariants
///
/// `ptr` points to `len` bytes that are valid for reads and writes, and not
/// accessed by others, until the operation is reaped (for reads) or
/// submitted (for writes).
pub(crate) struct KernelBuffer {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: By the contract of `KernelBuffer::new`, the bytes belong to the
// buffer until the operation using it ends, whichever thread that runs on.
// The type is not `Sync`: writing needs `&mut self`, reading happens only
// in the submitting thread before the buffer is handed on.
unsafe impl Send for KernelBuffer {}

impl KernelBuffer {
    /// Wraps `len` bytes at `ptr`.
    ///
    /// # Safety
    ///
    /// Unless `len` is 0, `ptr` must point to `len` bytes that stay valid
    /// and untouched by others until the operation using the buffer is
    /// reaped (a read), or until it is submitted (a write).
    pub(crate) unsafe fn new(ptr: *mut u8, len: usize) -> Result<Self> {
        let ptr = match NonNull::new(ptr) {
            Some(ptr) => ptr,
            None if len == 0 => NonNull::dangling(),
            None => return Err(EFAULT),
        };
        // INVARIANT: Guaranteed by the caller.
        Ok(KernelBuffer { ptr, len })
    }

    /// Copies the buffer's bytes into `out`, which must be as long.
    pub(crate) fn read_into(&self, out: &mut [u8]) -> Result {
        if out.len() != self.len {
            return Err(EINVAL);
        }
        // SAFETY: `ptr` is valid for `len` reads (type invariant), and `out`
        // is a distinct Rust buffer of that length.
        unsafe { core::ptr::copy_nonoverlapping(self.ptr.as_ptr(), out.as_mut_ptr(), self.len) };
        Ok(())
    }

    /// Copies `data`, which must be as long, into the buffer.
    pub(crate) fn write_from(&mut self, data: &[u8]) -> Result {
        if data.len() != self.len {
            return Err(EINVAL);
        }
        // SAFETY: `ptr` is valid for `len` writes (type invariant), and
        // `data` is a distinct Rust buffer of that length.
        unsafe { core::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.as_ptr(), self.len) };
        Ok(())
    }
}
