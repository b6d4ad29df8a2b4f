// SPDX-License-Identifier: GPL-2.0

//! The protection domain.

use core::ptr::NonNull;
use kernel::{bindings, c_str, error::from_err_ptr, prelude::*, sync::Arc};

use super::Device;

/// The node's protection domain: its queue pairs and memory regions.
///
/// It holds no memory region of its own: peers reach only the regions LITE
/// registers for memory it hands out (see `RemotePool`), while local work
/// requests use the domain's local DMA key.
///
/// # Invariants
///
/// `ptr` is a protection domain allocated on `device` and owned by this
/// object; its `local_dma_lkey` is fixed.
pub(crate) struct ProtectionDomain {
    ptr: NonNull<bindings::ib_pd>,
    device: Arc<Device>,
}

// SAFETY: A PD is not tied to a thread: it may be used and released
// (`drop`) from any thread in process context.
unsafe impl Send for ProtectionDomain {}
// SAFETY: `&self` methods only read fields fixed at creation
// (`local_dma_lkey`, `device`), and the other verbs wrappers only pass
// `as_ptr` to `ib_create_qp_kernel` and `ib_alloc_mr`, which lock on their
// own (they only bump the PD's atomic use count).
unsafe impl Sync for ProtectionDomain {}

impl ProtectionDomain {
    /// Allocates the PD on `device`.
    pub(crate) fn new(device: Arc<Device>) -> Result<Self> {
        // SAFETY: `device` is a valid registered device (its type invariant);
        // no flags are requested and the caller name is a static string.
        let pd = from_err_ptr(unsafe {
            bindings::__ib_alloc_pd(device.as_ptr(), 0, c_str!("lite").as_char_ptr())
        })?;
        let ptr = NonNull::new(pd).ok_or(ENOMEM)?;
        // INVARIANT: Allocated above and owned from here on.
        Ok(ProtectionDomain { ptr, device })
    }

    /// The device the PD belongs to.
    pub(crate) fn device(&self) -> &Arc<Device> {
        &self.device
    }

    pub(super) fn as_ptr(&self) -> *mut bindings::ib_pd {
        self.ptr.as_ptr()
    }

    /// Local key for scatter/gather entries pointing at kernel memory.
    pub(crate) fn local_dma_lkey(&self) -> u32 {
        // SAFETY: `ptr` is valid by the type invariant, and the field is set
        // when the PD is allocated and never changed.
        unsafe { (*self.ptr.as_ptr()).local_dma_lkey }
    }
}

impl Drop for ProtectionDomain {
    fn drop(&mut self) {
        // SAFETY: The PD is owned by this object (type invariant); every QP
        // and memory region created in it holds an `Arc` to it, so none is
        // left.
        unsafe { bindings::ib_dealloc_pd_user(self.ptr.as_ptr(), core::ptr::null_mut()) };
    }
}
