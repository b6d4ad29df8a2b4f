// SPDX-License-Identifier: GPL-2.0

//! Kernel threads.

use core::{ffi::c_void, ptr::NonNull};
use kernel::{
    bindings, error::from_err_ptr, prelude::*, str::CStr, sync::Arc, task::Task, types::ARef,
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
    // SAFETY: `trampoline::<T>` takes ownership of `start` when it runs; the
    // name is a NUL-terminated string without format directives.
    let task = unsafe {
        bindings::kthread_create_on_node(
            Some(trampoline::<T>),
            start.cast::<c_void>(),
            bindings::NUMA_NO_NODE,
            name.as_char_ptr(),
        )
    };
    let task = match from_err_ptr(task) {
        Ok(task) => task,
        Err(e) => {
            // SAFETY: The thread was not created, so `start` is still ours.
            drop(unsafe { KBox::from_raw(start) });
            return Err(e);
        }
    };
    // SAFETY: `task` is a valid, not yet running task returned above; taking
    // a reference keeps it valid after the thread exits.
    unsafe { bindings::get_task_struct(task) };
    // SAFETY: We own the reference taken just above; `Task` wraps `task_struct`.
    let task = unsafe { ARef::from_raw(NonNull::new_unchecked(task.cast::<Task>())) };
    task.wake_up();
    Ok(task)
}

unsafe extern "C" fn trampoline<T: Send + Sync + 'static>(start: *mut c_void) -> i32 {
    // SAFETY: `spawn` passes a `KBox<Start<T>>` it gave up ownership of.
    let start = unsafe { KBox::from_raw(start.cast::<Start<T>>()) };
    let body = start.body;
    let data = start.data.clone();
    drop(start);
    body(data);
    0
}
