// SPDX-License-Identifier: GPL-2.0

//! Privileges of the calling task.

use kernel::bindings;

/// Whether the calling task may change the node's membership and its
/// cluster-wide settings: it has `CAP_NET_ADMIN`, as configuring network
/// links needs. Using LMRs, RPC and locks needs no privilege.
pub(crate) fn may_administer() -> bool {
    // PANIC: `CAP_NET_ADMIN` is 12, far below `i32::MAX`.
    let cap = bindings::CAP_NET_ADMIN as i32;
    // SAFETY: `capable` only reads the credentials of `current`, which stay
    // valid for as long as the calling code runs, and notes the check for
    // auditing; it has no other requirement.
    unsafe { bindings::capable(cap) }
}

/// The real uid of the calling task, as the initial user namespace sees it
/// (the user LITE's quotas charge).
pub(crate) fn current_uid() -> u32 {
    // SAFETY: `lite_current_uid` only reads the credentials of `current`,
    // which stay valid for as long as the calling code runs.
    unsafe { bindings::lite_current_uid() }
}
