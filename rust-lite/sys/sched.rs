// SPDX-License-Identifier: GPL-2.0

//! Scheduling primitives.

use kernel::bindings;

/// Lets other runnable tasks on this CPU run if the scheduler wants to.
///
/// Busy-waiting code must call this: with a non-preemptible kernel, a task
/// that spins without yielding would starve the very work (for example the
/// Soft-RoCE workers) it is waiting for.
pub(crate) fn cond_resched() {
    // SAFETY: Called from process context, as all of LITE's waiting code is.
    unsafe { bindings::cond_resched() };
}

/// Sleeps for about `ms` milliseconds; signals do not end the sleep.
pub(crate) fn sleep_uninterruptible_ms(ms: u32) {
    // SAFETY: Called from process context without spinlocks held.
    unsafe { bindings::msleep(ms) };
}

/// Thread group id (the process id) of the calling task.
///
/// Read in C: the `task_struct` layout is only known to C code.
pub(crate) fn current_tgid() -> i32 {
    // SAFETY: Reads a field of the current task, which is always valid.
    unsafe { bindings::lite_current_tgid() }
}

/// Sleeps for about `us` microseconds (a little longer, so timers can be
/// coalesced); signals do not end the sleep.
pub(crate) fn sleep_us(us: u32) {
    let min = usize::try_from(us.max(1)).unwrap_or(usize::MAX / 2);
    let max = min + min / 4 + 1;
    // SAFETY: Called from process context without spinlocks held.
    unsafe { bindings::usleep_range_state(min, max, bindings::TASK_UNINTERRUPTIBLE) };
}

/// Process id of the calling thread (its thread id, as `gettid()` says).
pub(crate) fn current_pid() -> i32 {
    // SAFETY: Reads a field of the current task, which is always valid.
    unsafe { bindings::lite_current_pid() }
}
