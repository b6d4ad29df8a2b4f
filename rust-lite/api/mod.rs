// SPDX-License-Identifier: GPL-2.0

//! LITE's API unit (the original `lite_api`): the system call backends and
//! the kernel C API. This is where errors become errno values and where
//! user and C pointers become safe Rust types.

mod dsm_syscalls;
pub(crate) mod entry_points;
pub(crate) mod kernel_api;
pub(crate) mod kernel_messages;
mod rpc_syscalls;
pub(crate) mod rust_api;
mod sync_syscalls;
mod syscalls;
mod user;
