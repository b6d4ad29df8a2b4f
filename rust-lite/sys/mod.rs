// SPDX-License-Identifier: GPL-2.0

//! Safe wrappers over the kernel services LITE needs beyond verbs that the
//! 6.12 `kernel` crate does not wrap: privileges and the caller's uid, the
//! amount of RAM, kernel threads, scheduling primitives,
//! wait queues woken from completion handlers, kernel TCP sockets (for the
//! cluster manager connection), the cluster secret and HMAC-SHA256 (which
//! authenticate that connection), and objects that are set once and live for
//! the rest of the kernel's life, and memory that processes map and the
//! kernel takes back page by page.

pub(crate) mod cred;
pub(crate) mod kthread;
pub(crate) mod module_param;
pub(crate) mod ram;
pub(crate) mod sched;
pub(crate) mod secret;
pub(crate) mod set_once;
pub(crate) mod shared_mapping;
pub(crate) mod tcp;
pub(crate) mod wait;
