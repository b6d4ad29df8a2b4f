// SPDX-License-Identifier: GPL-2.0

//! The protection domain, with one key covering all of the node's memory.

use core::ptr::NonNull;
use kernel::{bindings, c_str, error::from_err_ptr, prelude::*, sync::Arc};

use super::Device;

/// A protection domain allocated with `IB_PD_UNSAFE_GLOBAL_RKEY`.
///
/// As in the original LITE, one local key and one remote key cover all of the
/// node's memory, so no memory region is registered with the device per LMR:
/// the device holds no per-LMR state, and protection is enforced by LITE
/// itself (only addresses of live LMR chunks are ever handed to peers).
///
/// # Invariants
///
/// `ptr` is a protection domain allocated on `device` and owned by this object.
pub(crate) struct ProtectionDomain {
    ptr: NonNull<bindings::ib_pd>,
    device: Arc<Device>,
}

// SAFETY: Verbs on a PD may be used from any thread.
unsafe impl Send for ProtectionDomain {}
// SAFETY: Shared references only read immutable fields or make thread-safe verbs calls.
unsafe impl Sync for ProtectionDomain {}

impl ProtectionDomain {
    /// Allocates the PD on `device`.
    pub(crate) fn new(device: Arc<Device>) -> Result<Self> {
        // SAFETY: `device` is a valid registered device (its type invariant).
        let pd = from_err_ptr(unsafe {
            bindings::__ib_alloc_pd(
                device.as_ptr(),
                bindings::ib_pd_flags_IB_PD_UNSAFE_GLOBAL_RKEY,
                c_str!("lite").as_char_ptr(),
            )
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
        // SAFETY: `ptr` is valid by the type invariant.
        unsafe { (*self.ptr.as_ptr()).local_dma_lkey }
    }

    /// Remote key peers use to reach this node's memory.
    pub(crate) fn global_rkey(&self) -> u32 {
        // SAFETY: `ptr` is valid by the type invariant.
        unsafe { (*self.ptr.as_ptr()).unsafe_global_rkey }
    }
}

impl Drop for ProtectionDomain {
    fn drop(&mut self) {
        // SAFETY: The PD is owned by this object (type invariant); every QP
        // created in it holds an `Arc` to it, so none is left.
        unsafe { bindings::ib_dealloc_pd_user(self.ptr.as_ptr(), core::ptr::null_mut()) };
    }
}
