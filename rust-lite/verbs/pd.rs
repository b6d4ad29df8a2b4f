// SPDX-License-Identifier: GPL-2.0

//! The protection domain, with one key covering all of the node's memory.

use core::ptr::NonNull;
use kernel::{bindings, c_str, error::from_err_ptr, prelude::*, sync::Arc};

use super::Device;

/// A protection domain with one memory region covering all of the node's
/// memory for remote reads, writes and atomics.
///
/// As in the original LITE, one local key and one remote key cover all of the
/// node's memory, so no memory region is registered with the device per LMR:
/// the device holds no per-LMR state, and protection is enforced by LITE
/// itself (only addresses of live LMR chunks and locks are ever handed to
/// peers).
///
/// # Invariants
///
/// `ptr` is a protection domain allocated on `device` and owned by this
/// object; `global_mr` is a DMA memory region of that domain, owned by this
/// object. Neither is changed after `new`, so their `local_dma_lkey` and
/// `rkey` are fixed.
pub(crate) struct ProtectionDomain {
    ptr: NonNull<bindings::ib_pd>,
    global_mr: NonNull<bindings::ib_mr>,
    device: Arc<Device>,
}

/// What peers may do through the global key: read, write and atomics.
const GLOBAL_ACCESS: u32 = bindings::ib_access_flags_IB_ACCESS_LOCAL_WRITE
    | bindings::ib_access_flags_IB_ACCESS_REMOTE_READ
    | bindings::ib_access_flags_IB_ACCESS_REMOTE_WRITE
    | bindings::ib_access_flags_IB_ACCESS_REMOTE_ATOMIC;

// SAFETY: A PD and its memory region are not tied to a thread: they may be
// used and released (`drop`) from any thread in process context.
unsafe impl Send for ProtectionDomain {}
// SAFETY: `&self` methods only read fields fixed at creation
// (`local_dma_lkey`, the region's `rkey`, `device`), and the other verbs
// wrappers only pass `as_ptr` to `ib_create_qp_kernel`, which locks on its
// own (it only bumps the PD's atomic use count).
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
        // SAFETY: `pd` was just allocated on `device` (non-null, not an
        // error) and is not shared yet; the access flags are valid.
        let mr = from_err_ptr(unsafe { bindings::lite_get_dma_mr(pd, GLOBAL_ACCESS as i32) });
        let global_mr = match mr.ok().and_then(NonNull::new) {
            Some(mr) => mr,
            None => {
                // SAFETY: `pd` was allocated above and is owned here; no
                // memory region or QP was created in it (the region failed),
                // so nothing uses it and it is not used afterwards.
                unsafe { bindings::ib_dealloc_pd_user(pd, core::ptr::null_mut()) };
                return Err(mr.err().unwrap_or(ENOMEM));
            }
        };
        // INVARIANT: Both were allocated above and are owned from here on.
        Ok(ProtectionDomain {
            ptr,
            global_mr,
            device,
        })
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

    /// Remote key peers use to reach this node's memory.
    pub(crate) fn global_rkey(&self) -> u32 {
        // SAFETY: `global_mr` is valid by the type invariant, and its key is
        // never changed (the region is never re-registered or invalidated).
        unsafe { (*self.global_mr.as_ptr()).rkey }
    }
}

impl Drop for ProtectionDomain {
    fn drop(&mut self) {
        // SAFETY: The region is owned by this object (type invariant) and no
        // queue pair is left to use its keys (each holds an `Arc` to the PD).
        unsafe { bindings::ib_dereg_mr_user(self.global_mr.as_ptr(), core::ptr::null_mut()) };
        // SAFETY: The PD is owned by this object (type invariant); every QP
        // created in it holds an `Arc` to it, so none is left, and its only
        // memory region was released above.
        unsafe { bindings::ib_dealloc_pd_user(self.ptr.as_ptr(), core::ptr::null_mut()) };
    }
}
