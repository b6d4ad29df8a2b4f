// SPDX-License-Identifier: GPL-2.0

//! Completion queues.

use core::{
    ffi::c_void,
    ptr::{null_mut, NonNull},
    sync::atomic::{AtomicPtr, Ordering},
};
use kernel::{
    bindings, c_str,
    error::from_err_ptr,
    prelude::*,
    sync::{Arc, UniqueArc},
    task::Task,
    types::ARef,
};

use super::Device;

/// Most completions taken from the device per poll call.
pub(crate) const POLL_BATCH: usize = 8;

/// One completed work request.
#[derive(Clone, Copy, Default)]
pub(crate) struct WorkCompletion {
    /// The identifier the work request was posted with.
    pub(crate) wr_id: u64,
    /// `enum ib_wc_status`; 0 is success.
    pub(crate) status: u32,
}

impl WorkCompletion {
    /// Whether the work request succeeded.
    pub(crate) fn succeeded(&self) -> bool {
        self.status == bindings::ib_wc_status_IB_WC_SUCCESS
    }
}

/// A completion queue.
///
/// A queue may name a task to wake when the device adds a completion after
/// [`CompletionQueue::arm`]; this lets LITE's polling thread sleep when idle.
///
/// # Invariants
///
/// `ptr` is a CQ created on `device` and owned by this object. `waker` is
/// null or a task pointer whose reference count this object holds one
/// reference of.
pub(crate) struct CompletionQueue {
    ptr: NonNull<bindings::ib_cq>,
    waker: AtomicPtr<bindings::task_struct>,
    _device: Arc<Device>,
}

// SAFETY: Polling and arming are thread-safe in the verbs API as LITE uses
// them (each queue has a single poller at a time, see `Connection`), and the
// waker is an atomic.
unsafe impl Send for CompletionQueue {}
// SAFETY: See above.
unsafe impl Sync for CompletionQueue {}

impl CompletionQueue {
    /// Creates a CQ with room for `entries` completions.
    ///
    /// The queue is pinned in an `Arc` because the device keeps a pointer to
    /// it as the completion handler's context.
    pub(crate) fn new(device: Arc<Device>, entries: u32) -> Result<Arc<Self>> {
        let mut this = UniqueArc::new(
            CompletionQueue {
                ptr: NonNull::dangling(),
                waker: AtomicPtr::new(null_mut()),
                _device: device.clone(),
            },
            GFP_KERNEL,
        )?;
        let attr = bindings::ib_cq_init_attr {
            cqe: entries,
            comp_vector: 0,
            flags: 0,
        };
        let context = (&*this as *const Self).cast_mut().cast::<c_void>();
        // SAFETY: `device` is valid by its type invariant, `attr` is valid for
        // the call, and `context` points into the `UniqueArc`, which stays at
        // the same address (it becomes the returned `Arc`) and outlives the
        // CQ, which is destroyed in `drop`.
        let cq = from_err_ptr(unsafe {
            bindings::__ib_create_cq(
                device.as_ptr(),
                Some(Self::completion_event),
                None,
                context,
                &attr,
                c_str!("lite").as_char_ptr(),
            )
        })?;
        // INVARIANT: The CQ was just created and is owned from here on.
        this.ptr = NonNull::new(cq).ok_or(ENOMEM)?;
        Ok(this.into())
    }

    pub(super) fn as_ptr(&self) -> *mut bindings::ib_cq {
        self.ptr.as_ptr()
    }

    unsafe extern "C" fn completion_event(_cq: *mut bindings::ib_cq, context: *mut c_void) {
        // SAFETY: `context` is the `CompletionQueue` passed at creation,
        // alive until the CQ is destroyed, and no events arrive after that.
        let this = unsafe { &*(context as *const CompletionQueue) };
        let task = this.waker.load(Ordering::Acquire);
        if !task.is_null() {
            // SAFETY: A non-null waker holds a task reference (type invariant).
            unsafe { bindings::wake_up_process(task) };
        }
    }

    /// Names the task to wake on completion events.
    pub(crate) fn set_waker(&self, task: ARef<Task>) {
        let raw = ARef::into_raw(task)
            .as_ptr()
            .cast::<bindings::task_struct>();
        let old = self.waker.swap(raw, Ordering::AcqRel);
        if let Some(old) = NonNull::new(old.cast::<Task>()) {
            // SAFETY: The old pointer carried one reference owned by us.
            drop(unsafe { ARef::from_raw(old) });
        }
    }

    /// Takes up to [`POLL_BATCH`] completions; returns how many were written to `out`.
    pub(crate) fn poll(&self, out: &mut [WorkCompletion; POLL_BATCH]) -> usize {
        // SAFETY: `ib_wc` is plain data for which all-zero bytes are valid.
        let mut wcs: [bindings::ib_wc; POLL_BATCH] = unsafe { core::mem::zeroed() };
        // SAFETY: `ptr` is valid (type invariant) and `wcs` has room for
        // `POLL_BATCH` entries.
        let n =
            unsafe { bindings::ib_poll_cq(self.ptr.as_ptr(), POLL_BATCH as i32, wcs.as_mut_ptr()) };
        let n = usize::try_from(n).unwrap_or(0).min(POLL_BATCH);
        for (wc, slot) in wcs.iter().zip(out.iter_mut()).take(n) {
            *slot = WorkCompletion {
                // SAFETY: LITE posts every work request with a `wr_id`, never
                // a `wr_cqe`, so the `u64` view of the union is the live one.
                wr_id: unsafe { wc.__bindgen_anon_1.wr_id },
                status: wc.status,
            };
        }
        n
    }

    /// Requests an event for the next completion.
    ///
    /// Returns `true` if completions may have arrived since the last poll,
    /// in which case the caller must poll again instead of sleeping.
    pub(crate) fn arm(&self) -> bool {
        let flags = bindings::ib_cq_notify_flags_IB_CQ_NEXT_COMP
            | bindings::ib_cq_notify_flags_IB_CQ_REPORT_MISSED_EVENTS;
        // SAFETY: `ptr` is valid by the type invariant.
        unsafe { bindings::ib_req_notify_cq(self.ptr.as_ptr(), flags) != 0 }
    }
}

impl Drop for CompletionQueue {
    fn drop(&mut self) {
        // `new` may fail after allocating the object but before the CQ exists.
        if self.ptr != NonNull::dangling() {
            // SAFETY: The CQ is owned by this object; every QP using it holds
            // an `Arc` to it, so none is left.
            unsafe { bindings::ib_destroy_cq_user(self.ptr.as_ptr(), null_mut()) };
        }
        if let Some(task) = NonNull::new(self.waker.load(Ordering::Acquire).cast::<Task>()) {
            // SAFETY: The waker carries one reference owned by us.
            drop(unsafe { ARef::from_raw(task) });
        }
    }
}
