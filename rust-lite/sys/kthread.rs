// SPDX-License-Identifier: GPL-2.0

//! Kernel threads, and waiting for all of them before LITE unloads.
//!
//! LITE may be a module: its code must not be freed while one of its threads
//! still runs it. Every thread started here is recorded in a registry, and
//! [`stop_all`] waits until each has exited; a thread that has exited runs
//! only core kernel code (`kthread()` returns into it from [`trampoline`]).

use core::{ffi::c_void, ptr::NonNull};
use kernel::{
    bindings, c_str, error::from_err_ptr, new_mutex, prelude::*, str::CStr, sync::Arc, sync::Mutex,
};

use super::set_once::SetOnce;

/// What a new thread starts with.
struct Start<T> {
    data: Arc<T>,
    body: fn(Arc<T>),
}

/// A counted reference to a kernel thread's task.
///
/// # Invariants
///
/// `task` is a valid task on which this object owns one reference, taken
/// with `get_task_struct` and dropped with `put_task_struct`.
struct ThreadRef {
    task: NonNull<bindings::task_struct>,
}

// SAFETY: A task reference may be dropped, and the task looked at, from any
// thread: `put_task_struct` and `kthread_stop` have no thread affinity.
unsafe impl Send for ThreadRef {}

impl ThreadRef {
    /// Whether the thread has exited (its task is a zombie or dead); it then
    /// runs no more of LITE's code.
    fn has_exited(&self) -> bool {
        // SAFETY: `task` is valid (type invariant). `exit_state` is set once,
        // by the exiting task itself; a stale read only makes the caller keep
        // the entry a little longer.
        let state =
            unsafe { core::ptr::read_volatile(&raw const (*self.task.as_ptr()).exit_state) };
        state != 0
    }

    /// Waits until the thread has exited.
    ///
    /// The thread must be about to end on its own: it does not look at
    /// `kthread_should_stop()`, so this waits for as long as it runs.
    fn wait_for_exit(self) {
        // SAFETY: `task` is a kernel thread made by `kthread_create_on_node`
        // and held by this object (type invariant), so it stays valid even
        // if the thread has exited already, as `kthread_stop` requires of
        // threads that may end on their own.
        unsafe { bindings::kthread_stop(self.task.as_ptr()) };
    }
}

impl Drop for ThreadRef {
    fn drop(&mut self) {
        // SAFETY: This object owns one reference on `task` (type invariant),
        // dropped here once.
        unsafe { bindings::put_task_struct(self.task.as_ptr()) };
    }
}

/// The threads that may still run LITE's code.
#[pin_data]
struct Registry {
    /// Lock class `lite:threads`: see the lock order in [`crate::internal::core`].
    #[pin]
    threads: Mutex<KVec<ThreadRef>>,
}

static REGISTRY: SetOnce<Registry> = SetOnce::new();

/// Creates the registry of threads; called once when LITE initialises.
pub(crate) fn init() -> Result {
    let registry = Arc::pin_init(
        pin_init!(Registry {
            threads <- new_mutex!(KVec::new(), "lite:threads"),
        }),
        GFP_KERNEL,
    )?;
    REGISTRY.set(registry).map_err(|_| EBUSY)?;
    Ok(())
}

/// Waits until every thread [`spawn`] started has exited, then drops the
/// registry; called as LITE unloads, once nothing can start threads any more.
///
/// # Safety
///
/// Nothing may call [`spawn`] any more: no LITE code runs but this call and
/// the threads it waits for, which must all be about to end.
pub(crate) unsafe fn stop_all() {
    let Some(registry) = REGISTRY.get() else {
        return;
    };
    let threads = core::mem::take(&mut *registry.threads.lock());
    for thread in threads {
        thread.wait_for_exit();
    }
    // SAFETY: By this function's safety requirements no LITE code uses the
    // registry any more, and `registry` is not used after this.
    drop(unsafe { REGISTRY.release() });
}

/// Starts a kernel thread named `name` that runs `body(data)` and then exits.
///
/// # Errors
///
/// `ENODEV` once LITE is unloading, or the error that stopped the thread
/// from being created.
pub(crate) fn spawn<T: Send + Sync + 'static>(
    name: &'static CStr,
    data: Arc<T>,
    body: fn(Arc<T>),
) -> Result {
    let registry = REGISTRY.get().ok_or(ENODEV)?;
    let mut threads = registry.threads.lock();
    // Threads that ended need no waiting for: keep only the others, with
    // room for the new one, so recording it below cannot fail.
    let mut running = KVec::with_capacity(threads.len() + 1, GFP_KERNEL)?;
    for thread in core::mem::take(&mut *threads) {
        if !thread.has_exited() {
            running.push(thread, GFP_KERNEL)?;
        }
    }
    *threads = running;
    let start = KBox::into_raw(KBox::new(Start { data, body }, GFP_KERNEL)?);
    // SAFETY: `trampoline::<T>` matches the thread function type and is
    // given `start`, a `KBox<Start<T>>` given up just above, as its safety
    // section requires; the thread only runs it after a successful return.
    // The format is a NUL-terminated literal with one `%s` directive, and its
    // one argument is `name`, a NUL-terminated string that `'static` keeps
    // alive (the kernel copies it into the task anyway).
    let task = unsafe {
        bindings::kthread_create_on_node(
            Some(trampoline::<T>),
            start.cast::<c_void>(),
            bindings::NUMA_NO_NODE,
            c_str!("%s").as_char_ptr(),
            name.as_char_ptr(),
        )
    };
    let task = match from_err_ptr(task).and_then(|task| NonNull::new(task).ok_or(ENOMEM)) {
        Ok(task) => task,
        Err(e) => {
            // SAFETY: `start` came from `KBox::into_raw` above. On failure
            // the new thread, if it exists at all, exits without calling
            // `trampoline` (`kthread()` checks `create->done` first), so
            // ownership of `start` never passed to it and is taken back once.
            drop(unsafe { KBox::from_raw(start) });
            return Err(e);
        }
    };
    // SAFETY: `task` was just returned by a successful
    // `kthread_create_on_node`, so it is a valid task that cannot have
    // exited: a new kthread sleeps uninterruptibly until woken below.
    // Taking a reference keeps it valid after the thread exits.
    unsafe { bindings::get_task_struct(task.as_ptr()) };
    // INVARIANT: `task` is valid and the reference taken just above is
    // handed over to the `ThreadRef`.
    let thread = ThreadRef { task };
    // SAFETY: `task` is valid (see above) and sleeps until this wake-up.
    unsafe { bindings::wake_up_process(task.as_ptr()) };
    // Does not allocate: `running` was made with room for one more.
    threads.push(thread, GFP_KERNEL)?;
    Ok(())
}

/// Entry point of a thread started by [`spawn`]: runs the body, then exits.
///
/// # Safety
///
/// `start` must come from [`KBox::into_raw`] on a `KBox<Start<T>>` whose
/// ownership is handed to this call; it must not be used by anyone else
/// afterwards.
unsafe extern "C" fn trampoline<T: Send + Sync + 'static>(start: *mut c_void) -> i32 {
    // SAFETY: By the safety requirements, `start` is an owned
    // `KBox<Start<T>>` turned into a raw pointer, handed over to us once.
    let start = unsafe { KBox::from_raw(start.cast::<Start<T>>()) };
    let body = start.body;
    let data = start.data.clone();
    drop(start);
    body(data);
    0
}
