// SPDX-License-Identifier: GPL-2.0

//! Privileges of the calling task.

use core::{
    ptr::addr_of_mut,
    sync::atomic::{AtomicU32, Ordering},
};
use kernel::bindings;

/// No group: only `CAP_NET_ADMIN` administers.
const NO_GROUP: u32 = u32::MAX;

/// The group whose members may administer LITE besides holders of
/// `CAP_NET_ADMIN` (a gid of the initial user namespace), or [`NO_GROUP`].
static ADMIN_GROUP: AtomicU32 = AtomicU32::new(NO_GROUP);

/// Whether the calling task holds `CAP_NET_ADMIN`, as configuring network
/// links needs.
pub(crate) fn has_net_admin() -> bool {
    // PANIC: `CAP_NET_ADMIN` is 12, far below `i32::MAX`.
    let cap = bindings::CAP_NET_ADMIN as i32;
    // SAFETY: `capable` only reads the credentials of `current`, which stay
    // valid for as long as the calling code runs, and notes the check for
    // auditing; it has no other requirement.
    unsafe { bindings::capable(cap) }
}

/// Whether the calling task may change the node's membership and its
/// cluster-wide settings: it has `CAP_NET_ADMIN`, or belongs to the
/// administrators' group (see [`set_admin_group`]). Using LMRs, RPC and
/// locks needs no privilege.
pub(crate) fn may_administer() -> bool {
    let group = ADMIN_GROUP.load(Ordering::Relaxed);
    (group != NO_GROUP && in_group(group)) || has_net_admin()
}

/// Whether the calling task belongs to group `gid` of the initial user
/// namespace (as its fsgid or a supplementary group).
fn in_group(gid: u32) -> bool {
    // SAFETY: `init_user_ns` lives as long as the kernel, and `make_kgid`
    // only reads it.
    let group = unsafe { bindings::make_kgid(addr_of_mut!(bindings::init_user_ns), gid) };
    // SAFETY: `gid_valid` only compares a value; `in_group_p` only reads
    // the credentials of `current`, which stay valid for as long as the
    // calling code runs.
    unsafe { bindings::gid_valid(group) && bindings::in_group_p(group) != 0 }
}

/// The administrators' group, if there is one.
pub(crate) fn admin_group() -> Option<u32> {
    match ADMIN_GROUP.load(Ordering::Relaxed) {
        NO_GROUP => None,
        gid => Some(gid),
    }
}

/// Makes the members of group `gid` (of the initial user namespace)
/// administrators besides holders of `CAP_NET_ADMIN`; `None` leaves only
/// the latter.
pub(crate) fn set_admin_group(gid: Option<u32>) {
    ADMIN_GROUP.store(gid.unwrap_or(NO_GROUP), Ordering::Relaxed);
}

/// The real uid of the calling task, as the initial user namespace sees it
/// (the user LITE's quotas charge).
pub(crate) fn current_uid() -> u32 {
    // SAFETY: `current_uid` only reads the credentials of `current`, which
    // stay valid for as long as the calling code runs.
    let uid = unsafe { bindings::current_uid() };
    // SAFETY: `init_user_ns` lives as long as the kernel, and
    // `from_kuid_munged` only reads it.
    unsafe { bindings::from_kuid_munged(addr_of_mut!(bindings::init_user_ns), uid) }
}
