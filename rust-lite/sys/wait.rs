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
/// `head` is initialised (by `init_waitqueue_head`) and, being pinned, never
/// moves while the object exists.
#[pin_data]
pub(crate) struct WaitQueue {
    #[pin]
    head: Opaque<bindings::wait_queue_head>,
}

// SAFETY: A wait queue head is not tied to a thread; moving the (pinned)
// owner to another thread leaves it where it is.
unsafe impl Send for WaitQueue {}
// SAFETY: `&self` only reaches the head through `wake_up_all`,
// `prepare_to_wait_event` and `finish_wait`, which take the head's spinlock
// with interrupts disabled, so they may run concurrently on any CPU and in
// any context.
unsafe impl Sync for WaitQueue {}

impl WaitQueue {
    /// An empty wait queue.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(WaitQueue {
            // SAFETY: `slot` is valid for writes and pinned (`ffi_init`
            // guarantees both); the helper initialises every field of the
            // head, including its lock and lockdep class.
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
        // SAFETY: `head` is initialised and does not move (type invariant);
        // `wake_up_all` takes its lock with interrupts disabled, so it may be
        // called from any context.
        unsafe { bindings::lite_wake_up_all(self.head.get()) };
    }

    /// Sleeps until `ready()` returns `true`.
    ///
    /// `ready` runs after the task is queued and marked as sleeping, so a
    /// wake-up between its check and the sleep is not lost; it must not
    /// sleep itself (spinlocks and atomics are fine). It is re-run after
    /// every wake-up and at least every `recheck_ms` milliseconds.
    ///
    /// Must be called from process context without spinlocks held: it
    /// sleeps.
    pub(crate) fn wait_until(&self, how: Sleep, recheck_ms: u32, mut ready: impl FnMut() -> bool) {
        let jiffies = kernel::time::msecs_to_jiffies(recheck_ms);
        let jiffies = i64::try_from(jiffies).unwrap_or(i64::MAX).max(1);
        let entry = Opaque::<bindings::wait_queue_entry>::uninit();
        // SAFETY: `entry.get()` is valid for writes; `init_wait_entry`
        // initialises every field (owner `current`, autoremove wake
        // function, empty list link). `entry` is never moved (only borrowed)
        // and is unlinked by `finish_wait` before this frame ends; a kernel
        // panic does not unwind, so no early exit skips that.
        unsafe { bindings::init_wait_entry(entry.get(), 0) };
        loop {
            // SAFETY: `head` is initialised and pinned (type invariant);
            // `entry` was initialised above, stays at this address and
            // belongs to the current task; the state is a valid
            // uninterruptible task state, so no signal check applies.
            unsafe { bindings::prepare_to_wait_event(self.head.get(), entry.get(), how.state()) };
            if ready() {
                break;
            }
            // SAFETY: `schedule_timeout` takes a plain number (`jiffies` is
            // positive) and has no memory-safety requirements; sleeping is
            // allowed because callers must be in process context without
            // spinlocks (see above).
            unsafe { bindings::schedule_timeout(jiffies as _) };
        }
        // SAFETY: `head` is initialised (type invariant) and `entry` was
        // initialised above and is only linked into `head`, if at all;
        // `finish_wait` sets the task running and unlinks `entry` under the
        // head's lock, after which nothing refers to `entry`.
        unsafe { bindings::finish_wait(self.head.get(), entry.get()) };
    }
}
