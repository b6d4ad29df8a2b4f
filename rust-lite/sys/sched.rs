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

/// Marks the current task as about to sleep interruptibly.
///
/// A wake-up between this call and [`sleep`] is not lost: it makes the task
/// runnable again, so `sleep` returns at once.
pub(crate) fn prepare_to_sleep() {
    // SAFETY: Only changes the state of the current task.
    unsafe { bindings::set_current_state_interruptible() };
}

/// Marks the current task as running again without sleeping.
pub(crate) fn cancel_sleep() {
    // SAFETY: Only changes the state of the current task.
    unsafe { bindings::set_current_state_running() };
}

/// Sleeps until woken or for at most `ms` milliseconds, after [`prepare_to_sleep`].
pub(crate) fn sleep_timeout_ms(ms: u32) {
    let jiffies = kernel::time::msecs_to_jiffies(ms);
    let jiffies = i64::try_from(jiffies).unwrap_or(i64::MAX);
    // SAFETY: Called from process context without spinlocks held.
    unsafe { bindings::schedule_timeout(jiffies as _) };
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
