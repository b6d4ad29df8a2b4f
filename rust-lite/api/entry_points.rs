// SPDX-License-Identifier: GPL-2.0

//! Opening and closing LITE's C entry points: its system call operations,
//! registered with the entry points in the core kernel, and its debugfs
//! files (`lite_syscall_ops.c`, `lite_debugfs.c`).

use kernel::{error::to_result, prelude::*};

extern "C" {
    fn lite_syscall_ops_register() -> core::ffi::c_int;
    fn lite_syscall_ops_unregister();
    fn lite_debugfs_create();
    fn lite_debugfs_remove();
}

/// LITE's system calls reach it while this exists.
///
/// # Invariants
///
/// LITE's system call operations are registered with the core kernel.
pub(crate) struct SyscallEntry(());

impl SyscallEntry {
    /// Makes LITE's system calls reach it.
    ///
    /// # Errors
    ///
    /// `EBUSY` if another LITE's operations are registered.
    pub(crate) fn open() -> Result<Self> {
        // SAFETY: The operations are a static table of LITE's backends,
        // unregistered in `drop` before LITE's code goes away.
        to_result(unsafe { lite_syscall_ops_register() })?;
        // INVARIANT: Registered just above.
        Ok(SyscallEntry(()))
    }
}

impl Drop for SyscallEntry {
    fn drop(&mut self) {
        // SAFETY: The operations are registered (type invariant). Once this
        // returns no call reaches them except those already under way, which
        // hold LITE's module; its exit only runs once none does.
        unsafe { lite_syscall_ops_unregister() };
    }
}

/// `/sys/kernel/debug/lite/` exists while this does.
pub(crate) struct DebugfsFiles(());

impl DebugfsFiles {
    /// Creates the files; LITE works without them if debugfs cannot.
    pub(crate) fn create() -> Self {
        // SAFETY: Creates files whose callbacks call LITE's debugfs
        // backends, removed in `drop`.
        unsafe { lite_debugfs_create() };
        DebugfsFiles(())
    }
}

impl Drop for DebugfsFiles {
    fn drop(&mut self) {
        // SAFETY: Removing waits for the callbacks under way to return, so
        // none runs once this returns.
        unsafe { lite_debugfs_remove() };
    }
}
