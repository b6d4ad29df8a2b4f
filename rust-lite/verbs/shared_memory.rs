// SPDX-License-Identifier: GPL-2.0

//! Copies into and out of memory shared with the device and other nodes.
//!
//! LMR chunks, RPC rings and lock words are written at any time by the
//! device (on behalf of peers' RDMA) and by every local thread using the
//! LMR, with nothing ordering them: RDMA gives no ordering between
//! concurrent accesses to the same bytes, and LITE promises none either
//! (callers that need it use locks or atomics). Such memory is therefore
//! treated like I/O memory: it is only ever reached through the C library's
//! `memcpy`, `memmove` and `memset`, outside Rust's memory model, and never
//! through a Rust reference. Concurrent overlapping copies may then leave
//! torn bytes, exactly as a peer's RDMA landing meanwhile would, but they
//! are not Rust data races.

use core::{
    ffi::{c_int, c_void},
    mem::MaybeUninit,
};
use kernel::{bindings, prelude::*, uaccess::UserPtr};

/// Copies `src` to `dst`.
///
/// # Safety
///
/// `dst` must be valid for writes of `src.len()` bytes of shared memory for
/// the duration of the call, and no Rust reference may cover those bytes
/// (so `src` cannot overlap them).
pub(super) unsafe fn copy_in(dst: *mut u8, src: &[u8]) {
    // SAFETY: `src` is valid for reads of its length; `dst` is valid for
    // writes of as many bytes and does not overlap it (caller's contract).
    unsafe {
        bindings::memcpy(
            dst.cast::<c_void>(),
            src.as_ptr().cast::<c_void>(),
            src.len(),
        )
    };
}

/// Copies `dst.len()` bytes at `src` into `dst`.
///
/// # Safety
///
/// `src` must be valid for reads of `dst.len()` bytes of shared memory for
/// the duration of the call, and no Rust reference may cover those bytes
/// (so `dst` cannot overlap them).
pub(super) unsafe fn copy_out(dst: &mut [u8], src: *const u8) {
    // SAFETY: `dst` is valid for writes of its length; `src` is valid for
    // reads of as many bytes and does not overlap it (caller's contract).
    unsafe {
        bindings::memcpy(
            dst.as_mut_ptr().cast::<c_void>(),
            src.cast::<c_void>(),
            dst.len(),
        )
    };
}

/// Copies `dst.len()` bytes at `src` into `dst`, which need not be
/// initialised; all of `dst` is initialised afterwards.
///
/// # Safety
///
/// As [`copy_out`].
pub(super) unsafe fn copy_out_uninit(dst: &mut [MaybeUninit<u8>], src: *const u8) {
    // SAFETY: `dst` is valid for writes of its length (`MaybeUninit` bytes
    // may be written through a pointer); `src` is valid for reads of as
    // many bytes and does not overlap it (caller's contract).
    unsafe {
        bindings::memcpy(
            dst.as_mut_ptr().cast::<c_void>(),
            src.cast::<c_void>(),
            dst.len(),
        )
    };
}

/// Copies `len` bytes at `src` to the user address `dst`.
///
/// # Errors
///
/// `EFAULT` if the user memory cannot be written (some bytes may have been).
///
/// # Safety
///
/// `src` must be valid for reads of `len` bytes of shared memory for the
/// duration of the call, and no Rust reference may cover them.
pub(super) unsafe fn copy_to_user(dst: UserPtr, src: *const u8, len: usize) -> Result {
    // SAFETY: `src` is valid for reads of `len` bytes (caller's contract);
    // `copy_to_user` checks the user range itself and may fault on it, which
    // it reports as bytes left uncopied.
    let left = unsafe { bindings::copy_to_user(dst as *mut c_void, src.cast::<c_void>(), len) };
    if left != 0 {
        return Err(EFAULT);
    }
    Ok(())
}

/// Copies `len` bytes at `src` to `dst`; the ranges may overlap.
///
/// # Safety
///
/// `src` must be valid for reads and `dst` for writes of `len` bytes of
/// shared memory for the duration of the call, and no Rust reference may
/// cover either range.
pub(super) unsafe fn copy_within(dst: *mut u8, src: *const u8, len: usize) {
    // SAFETY: Both ranges are valid for `len` bytes (caller's contract);
    // `memmove` handles overlap.
    unsafe { bindings::memmove(dst.cast::<c_void>(), src.cast::<c_void>(), len) };
}

/// Sets `len` bytes at `dst` to `byte`.
///
/// # Safety
///
/// `dst` must be valid for writes of `len` bytes of shared memory for the
/// duration of the call, and no Rust reference may cover them.
pub(super) unsafe fn fill(dst: *mut u8, byte: u8, len: usize) {
    // SAFETY: `dst` is valid for writes of `len` bytes (caller's contract).
    unsafe { bindings::memset(dst.cast::<c_void>(), c_int::from(byte), len) };
}
