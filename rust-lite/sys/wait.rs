// SPDX-License-Identifier: GPL-2.0

//! Wait queues that can be woken from any context, including a device's
//! completion handler running under its own spinlock with interrupts off.
//!
//! The kernel crate's `CondVar` ties every wait to a lock the waker also
//! takes; a completion handler cannot take LITE's locks, so waiters here
//! re-check a condition after queueing themselves instead.

use core::pin::Pin;
use kernel::{bindings, prelude::*, types::Opaque};

/// How a waiting task sleeps.
#[derive(Clone, Copy)]
pub(crate) enum Sleep {
    /// Signals do not end the sleep: the caller has device work in flight
    /// that must finish before its memory can be released.
    Uninterruptible,
    /// An idle kernel thread: uninterruptible, but not counted as load.
    Idle,
}

impl Sleep {
    fn state(self) -> i32 {
        match self {
            Sleep::Uninterruptible => bindings::TASK_UNINTERRUPTIBLE as i32,
            Sleep::Idle => bindings::TASK_IDLE as i32,
        }
    }
}

/// A kernel `wait_queue_head`.
///
/// # Invariants
///
/// `head` is initialised and, being pinned, never moves.
#[pin_data]
pub(crate) struct WaitQueue {
    #[pin]
    head: Opaque<bindings::wait_queue_head>,
}

// SAFETY: A wait queue head is designed to be used from any thread; all
// access goes through the kernel's functions, which take its spinlock.
unsafe impl Send for WaitQueue {}
// SAFETY: See above.
unsafe impl Sync for WaitQueue {}

impl WaitQueue {
    /// An empty wait queue.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(WaitQueue {
            // SAFETY: `slot` is valid for writes and pinned; the helper
            // initialises every field of the head.
            head <- Opaque::ffi_init(|slot| unsafe { bindings::lite_init_waitqueue_head(slot) }),
        })
    }

    /// A wait queue in its own allocation, for objects that cannot be
    /// pinned themselves.
    pub(crate) fn new_boxed() -> Result<Pin<KBox<Self>>> {
        KBox::pin_init(Self::new(), GFP_KERNEL)
    }

    /// Wakes every waiting task. Callable from any context.
    pub(crate) fn wake_all(&self) {
        // SAFETY: `head` is initialised (type invariant).
        unsafe { bindings::lite_wake_up_all(self.head.get()) };
    }

    /// Sleeps until `ready()` returns `true`.
    ///
    /// `ready` runs after the task is queued and marked as sleeping, so a
    /// wake-up between its check and the sleep is not lost; it must not
    /// sleep itself (spinlocks and atomics are fine). It is re-run after
    /// every wake-up and at least every `recheck_ms` milliseconds.
    pub(crate) fn wait_until(&self, how: Sleep, recheck_ms: u32, mut ready: impl FnMut() -> bool) {
        let jiffies = kernel::time::msecs_to_jiffies(recheck_ms);
        let jiffies = i64::try_from(jiffies).unwrap_or(i64::MAX).max(1);
        let entry = Opaque::<bindings::wait_queue_entry>::uninit();
        // SAFETY: `entry` lives on this stack frame, does not move, and is
        // removed from the queue by `finish_wait` before the frame ends.
        unsafe { bindings::init_wait_entry(entry.get(), 0) };
        loop {
            // SAFETY: `head` is initialised (type invariant) and `entry` was
            // initialised above.
            unsafe { bindings::prepare_to_wait_event(self.head.get(), entry.get(), how.state()) };
            if ready() {
                break;
            }
            // SAFETY: Process context without spinlocks held, as required
            // of every caller.
            unsafe { bindings::schedule_timeout(jiffies as _) };
        }
        // SAFETY: Sets the task running and unlinks `entry` if still queued.
        unsafe { bindings::finish_wait(self.head.get(), entry.get()) };
    }
}
