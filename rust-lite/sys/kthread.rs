// SPDX-License-Identifier: GPL-2.0

//! Kernel threads.

use core::{ffi::c_void, ptr::NonNull};
use kernel::{
    bindings, c_str, error::from_err_ptr, prelude::*, str::CStr, sync::Arc, task::Task, types::ARef,
};

/// What a new thread starts with.
struct Start<T> {
    data: Arc<T>,
    body: fn(Arc<T>),
}

/// Starts a kernel thread named `name` that runs `body(data)` and then exits.
///
/// Returns a reference to the thread's task, which stays valid (though the
/// thread may have exited) for as long as the reference is held.
pub(crate) fn spawn<T: Send + Sync + 'static>(
    name: &'static CStr,
    data: Arc<T>,
    body: fn(Arc<T>),
) -> Result<ARef<Task>> {
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
    let task = match from_err_ptr(task) {
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
    unsafe { bindings::get_task_struct(task) };
    // SAFETY: `task` is non-null (a valid task, see above); `Task` is a
    // transparent wrapper of `task_struct`; the reference taken just above
    // is handed over to the `ARef`, which drops it with `put_task_struct`.
    let task = unsafe { ARef::from_raw(NonNull::new_unchecked(task.cast::<Task>())) };
    task.wake_up();
    Ok(task)
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
