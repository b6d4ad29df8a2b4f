// SPDX-License-Identifier: GPL-2.0

//! Completion queues.

use core::{
    ffi::c_void,
    pin::Pin,
    ptr::{null_mut, NonNull},
};
use kernel::{
    bindings, c_str,
    error::from_err_ptr,
    prelude::*,
    sync::{Arc, UniqueArc},
};

use super::Device;
use crate::sys::wait::{Sleep, WaitQueue};

/// Most completions taken from the device per poll call.
pub(crate) const POLL_BATCH: usize = 8;

/// One completed work request.
#[derive(Clone, Copy, Default)]
pub(crate) struct WorkCompletion {
    /// The identifier the work request was posted with.
    pub(crate) wr_id: u64,
    /// `enum ib_wc_status`; 0 is success.
    pub(crate) status: u32,
    /// `enum ib_wc_opcode`.
    pub(crate) opcode: u32,
    /// Bytes received (for receives and writes with immediate).
    pub(crate) byte_len: u32,
    /// The immediate value of a received write with immediate.
    pub(crate) imm: Option<u32>,
}

impl WorkCompletion {
    /// Whether the work request succeeded.
    pub(crate) fn succeeded(&self) -> bool {
        self.status == bindings::ib_wc_status_IB_WC_SUCCESS
    }

    /// The immediate value if this completes a received RDMA write with
    /// immediate (which consumed a receive buffer without writing to it).
    pub(crate) fn write_imm(&self) -> Option<u32> {
        if self.opcode == bindings::ib_wc_opcode_IB_WC_RECV_RDMA_WITH_IMM {
            self.imm
        } else {
            None
        }
    }
}

/// A completion queue.
///
/// Tasks waiting for completions sleep on the queue's wait queue, which the
/// device's completion event wakes after [`CompletionQueue::arm`]; nobody
/// has to spin while the device works.
///
/// # Invariants
///
/// Once [`CompletionQueue::new`] has returned the object, `ptr` is a CQ
/// created on `_device` and owned by this object, whose completion handler
/// context is this object's address (stable: the object lives in an `Arc`).
/// Before that, `ptr` may be dangling; such an object is only dropped.
pub(crate) struct CompletionQueue {
    ptr: NonNull<bindings::ib_cq>,
    events: Pin<KBox<WaitQueue>>,
    _device: Arc<Device>,
}

// SAFETY: A CQ is not tied to a thread: it may be polled, armed and destroyed
// (`drop`) from any thread in process context.
unsafe impl Send for CompletionQueue {}
// SAFETY: `&self` methods call `ib_poll_cq` and `ib_req_notify_cq`, which
// providers serialise per CQ with the CQ's own spinlock (rxe `cq_lock`, mlx5
// `cq->lock`, taken with interrupts disabled), so concurrent calls do not
// race on the CQ; each poll writes only into the caller's own arrays. On top
// of that, LITE has one poller per CQ at a time (`Connection::polling` for a
// send CQ, the poller thread for the shared receive CQ), so no completion is
// handed to the wrong thread. The wait queue is `Sync`, and the QPs that pass
// `as_ptr` to `ib_create_qp_kernel` only take a reference on the CQ.
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
                events: WaitQueue::new_boxed()?,
                _device: device.clone(),
            },
            GFP_KERNEL,
        )?;
        let attr = bindings::ib_cq_init_attr {
            cqe: entries,
            comp_vector: 0,
            flags: 0,
        };
        // Made from a unique borrow and used for the write below, so it
        // stays usable for the completion handler after the object is shared.
        let raw: *mut Self = &mut *this;
        let context = raw.cast::<c_void>();
        // SAFETY: `device` is valid by its type invariant, `attr` is valid for
        // the call, `completion_event` has the handler's signature and
        // `context` is what it expects: it points into the `UniqueArc`, which
        // stays at the same address (it becomes the returned `Arc`) and
        // outlives the CQ, which is destroyed in `drop`. The CQ is not armed,
        // so the handler cannot run before `new` returns.
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
        let cq = NonNull::new(cq).ok_or(ENOMEM)?;
        // INVARIANT: The CQ was just created on `device` with this object as
        // context and is owned from here on.
        // SAFETY: `raw` points to the object inside `this`, which nothing
        // else can reach yet (the handler cannot run, see above).
        unsafe { (*raw).ptr = cq };
        Ok(this.into())
    }

    pub(super) fn as_ptr(&self) -> *mut bindings::ib_cq {
        self.ptr.as_ptr()
    }

    /// The CQ's completion handler; runs in interrupt context.
    ///
    /// # Safety
    ///
    /// Only for the IB core: `context` must be the context `new` registered
    /// with the CQ, that is a pointer to a live `CompletionQueue`.
    unsafe extern "C" fn completion_event(_cq: *mut bindings::ib_cq, context: *mut c_void) {
        // SAFETY: `context` is the `CompletionQueue` passed at creation (see
        // the safety requirements), alive until the CQ is destroyed in its
        // `drop`, after which no events arrive. Only a shared reference is
        // made, and `wake_all` may be called from interrupt context.
        let this = unsafe { &*(context as *const CompletionQueue) };
        this.events.wake_all();
    }

    /// Sleeps until `ready()` holds; see [`WaitQueue::wait_until`].
    ///
    /// A completion event (requested with [`CompletionQueue::arm`]) or
    /// [`CompletionQueue::wake_waiters`] wakes the sleeper to re-check.
    pub(crate) fn wait_until(&self, how: Sleep, recheck_ms: u32, ready: impl FnMut() -> bool) {
        self.events.wait_until(how, recheck_ms, ready);
    }

    /// Wakes every task in [`CompletionQueue::wait_until`].
    pub(crate) fn wake_waiters(&self) {
        self.events.wake_all();
    }

    /// Takes up to [`POLL_BATCH`] completions; returns how many were written to `out`.
    pub(crate) fn poll(&self, out: &mut [WorkCompletion; POLL_BATCH]) -> usize {
        // SAFETY: `ib_wc` is plain data for which all-zero bytes are valid.
        let mut wcs: [bindings::ib_wc; POLL_BATCH] = unsafe { core::mem::zeroed() };
        // SAFETY: `ptr` is valid (type invariant) and `wcs` has room for
        // `POLL_BATCH` entries, which fits in an `i32`; the provider locks the
        // CQ itself.
        let n =
            unsafe { bindings::ib_poll_cq(self.ptr.as_ptr(), POLL_BATCH as i32, wcs.as_mut_ptr()) };
        let n = usize::try_from(n).unwrap_or(0).min(POLL_BATCH);
        for (wc, slot) in wcs.iter().zip(out.iter_mut()).take(n) {
            *slot = WorkCompletion {
                // SAFETY: LITE posts every work request with a `wr_id`, never
                // a `wr_cqe`, so the `u64` view of the union is the live one.
                wr_id: unsafe { wc.__bindgen_anon_1.wr_id },
                status: wc.status,
                opcode: wc.opcode,
                byte_len: wc.byte_len,
                imm: (wc.wc_flags & bindings::ib_wc_flags_IB_WC_WITH_IMM as i32 != 0)
                    // SAFETY: With `IB_WC_WITH_IMM` set, the device filled
                    // the union's `imm_data` member.
                    .then(|| u32::from_be(unsafe { wc.ex.imm_data })),
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
        // SAFETY: `ptr` is valid by the type invariant and `flags` is a valid
        // combination; the provider locks the CQ itself.
        unsafe { bindings::ib_req_notify_cq(self.ptr.as_ptr(), flags) != 0 }
    }
}

impl Drop for CompletionQueue {
    fn drop(&mut self) {
        // `new` may fail after allocating the object but before the CQ exists.
        if self.ptr != NonNull::dangling() {
            // SAFETY: The CQ is owned by this object (type invariant); every QP
            // using it holds an `Arc` to it, so none is left, and no task can
            // be polling it (that needs a reference to this object). No
            // completion event runs after destruction, so `context` is not
            // used once the object is freed.
            unsafe { bindings::ib_destroy_cq_user(self.ptr.as_ptr(), null_mut()) };
        }
    }
}
