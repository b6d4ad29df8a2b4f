// SPDX-License-Identifier: GPL-2.0

//! Safe wrappers over the kernel services LITE needs beyond verbs that the
//! 6.12 `kernel` crate does not wrap: kernel threads, scheduling primitives,
//! wait queues woken from completion handlers and kernel TCP sockets (for the cluster manager connection).

pub(crate) mod kthread;
pub(crate) mod sched;
pub(crate) mod tcp;
pub(crate) mod wait;
