// SPDX-License-Identifier: GPL-2.0

//! Scheduling primitives.

use kernel::bindings;

/// Lets other runnable tasks on this CPU run if the scheduler wants to.
///
/// Busy-waiting code must call this: with a non-preemptible kernel, a task
/// that spins without yielding would starve the very work (for example the
/// Soft-RoCE workers) it is waiting for.
///
/// Must be called from process context without spinlocks held, as all of
/// LITE's waiting code is; elsewhere the kernel warns (`might_sleep`).
pub(crate) fn cond_resched() {
    // SAFETY: `cond_resched` has no memory-safety requirements; the context
    // it must be called from (process context, no spinlocks) is required of
    // this function's callers above, and breaking that is a warned-about
    // bug, not undefined behaviour.
    unsafe { bindings::cond_resched() };
}

/// Says that the caller may sleep: with `CONFIG_DEBUG_ATOMIC_SLEEP`, the
/// kernel warns when it is reached in atomic context.
pub(crate) fn might_sleep() {
    // SAFETY: `might_sleep` only checks (and may report) the calling
    // context; it has no memory-safety requirements.
    unsafe { bindings::might_sleep() };
}

/// Says that the calling task holds no lock: with lockdep, the kernel
/// reports the locks it holds if it does.
pub(crate) fn assert_no_locks_held() {
    // Without lockdep the check is an empty inline function.
    #[cfg(CONFIG_LOCKDEP)]
    // SAFETY: `debug_check_no_locks_held` only reads the calling task's
    // lockdep state; it has no memory-safety requirements.
    unsafe {
        bindings::debug_check_no_locks_held()
    };
}

/// Sleeps for about `ms` milliseconds; signals do not end the sleep.
///
/// Must be called from process context without spinlocks held.
pub(crate) fn sleep_uninterruptible_ms(ms: u32) {
    // SAFETY: `msleep` takes a plain number and has no memory-safety
    // requirements; it sleeps, which is only allowed in the context this
    // function's callers must be in (see above).
    unsafe { bindings::msleep(ms) };
}

/// Thread group id (the process id) of the calling task.
///
/// Read in C: the `task_struct` layout is only known to C code.
pub(crate) fn current_tgid() -> i32 {
    // SAFETY: The helper only reads the pid of `current`, which is valid
    // for as long as the calling code runs, in any context.
    unsafe { bindings::lite_current_tgid() }
}

/// Sleeps for about `us` microseconds (a little longer, so timers can be
/// coalesced); signals do not end the sleep.
///
/// Must be called from process context without spinlocks held.
pub(crate) fn sleep_us(us: u32) {
    let min = usize::try_from(us.max(1)).unwrap_or(usize::MAX / 2);
    let max = min.saturating_add(min / 4).saturating_add(1);
    // SAFETY: `usleep_range_state` takes plain numbers and a valid task
    // state and has no memory-safety requirements; it sleeps, which is only
    // allowed in the context this function's callers must be in (see above).
    unsafe { bindings::usleep_range_state(min, max, bindings::TASK_UNINTERRUPTIBLE) };
}

/// Process id of the calling thread (its thread id, as `gettid()` says).
pub(crate) fn current_pid() -> i32 {
    // SAFETY: The helper only reads the pid of `current`, which is valid
    // for as long as the calling code runs, in any context.
    unsafe { bindings::lite_current_pid() }
}
