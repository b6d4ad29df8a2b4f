// SPDX-License-Identifier: GPL-2.0

//! The cluster's secret, from the kernel keyring, and HMAC-SHA256 from the
//! kernel's crypto API: what authenticates a node and its cluster manager
//! to each other.

use core::ptr::{addr_of_mut, null};
use kernel::{bindings, c_str, error::from_err_ptr, prelude::*, str::CStr};

use crate::internal::cm_wire::{MAC_LEN, MAX_SECRET_LEN};

extern "C" {
    /// `lite_helpers.c`: HMAC-SHA256 of `len` bytes at `data` with the
    /// `keylen`-byte `key`, into the 32 bytes at `out`.
    fn lite_hmac_sha256(
        key: *const u8,
        keylen: u32,
        data: *const u8,
        len: u32,
        out: *mut u8,
    ) -> core::ffi::c_int;
}

/// The cluster's secret: the payload of the "user" key `lite:cluster`.
///
/// Wiped from memory when dropped.
///
/// # Invariants
///
/// `1 <= len <= MAX_SECRET_LEN`.
#[derive(Clone)]
pub(crate) struct Secret {
    bytes: [u8; MAX_SECRET_LEN],
    len: usize,
}

impl Secret {
    /// Reads the secret from the calling task's keyrings.
    ///
    /// # Errors
    ///
    /// `ENOKEY` if there is no `lite:cluster` key, `EINVAL` if it is empty
    /// or longer than [`MAX_SECRET_LEN`], or the key's own error (revoked,
    /// expired, no permission to search for it).
    pub(crate) fn from_keyring() -> Result<Self> {
        let mut bytes = [0u8; MAX_SECRET_LEN];
        let len = read_user_key(c_str!("lite:cluster"), &mut bytes)?;
        if len == 0 {
            return Err(EINVAL);
        }
        // INVARIANT: `len` is positive and at most `MAX_SECRET_LEN` (the
        // length of `bytes`, which `read_user_key` does not exceed).
        Ok(Secret { bytes, len })
    }

    /// The HMAC-SHA256 of `data` keyed with the secret.
    pub(crate) fn hmac(&self, data: &[u8]) -> Result<[u8; MAC_LEN]> {
        // PANIC: `len <= MAX_SECRET_LEN` (type invariant).
        hmac_sha256(&self.bytes[..self.len], data)
    }
}

impl Drop for Secret {
    fn drop(&mut self) {
        wipe(&mut self.bytes);
    }
}

/// Copies the payload of the "user" key `description` in the calling task's
/// keyrings into `buf`; returns its length.
///
/// # Errors
///
/// `ENOKEY` if there is no such key, `EINVAL` if its payload is longer
/// than `buf`, or the key's own error (revoked, expired, no permission).
fn read_user_key(description: &CStr, buf: &mut [u8]) -> Result<usize> {
    // SAFETY: `key_type_user` is the kernel's "user" key type, which lives
    // as long as the kernel; `description` is a NUL-terminated string that
    // lives for the call; a null callout asks for no upcall.
    let key = unsafe {
        bindings::request_key(
            addr_of_mut!(bindings::key_type_user),
            description.as_char_ptr(),
            null(),
        )
    };
    let key = from_err_ptr(key)?;
    // SAFETY: `key` is a valid key that this function holds a reference to
    // until `key_put` below; its payload is read under its semaphore, as
    // `user_key_payload_locked` requires.
    unsafe {
        bindings::down_read(addr_of_mut!((*key).sem));
        let payload = bindings::user_key_payload_locked(key);
        let read = if payload.is_null() {
            Err(crate::errno::EKEYREVOKED())
        } else {
            let len = usize::from((*payload).datalen);
            match buf.get_mut(..len) {
                Some(dst) => {
                    // The payload's `len` bytes follow its header.
                    let data = (*payload).data.as_ptr().cast::<u8>();
                    dst.copy_from_slice(core::slice::from_raw_parts(data, len));
                    Ok(len)
                }
                None => Err(EINVAL),
            }
        };
        bindings::up_read(addr_of_mut!((*key).sem));
        bindings::key_put(key);
        read
    }
}

/// Overwrites `bytes` with zeros in a way the compiler keeps, for keys
/// that should not linger in freed memory.
pub(crate) fn wipe(bytes: &mut [u8]) {
    for byte in bytes.iter_mut() {
        // SAFETY: `byte` is a valid, aligned, exclusively borrowed `u8`; a
        // volatile write keeps the compiler from eliding the wipe.
        unsafe { core::ptr::write_volatile(byte, 0) };
    }
}

/// HMAC-SHA256 of `data` keyed with `key`.
///
/// # Errors
///
/// `EINVAL` for inputs beyond 4 GiB, or the crypto API's error (`ENOENT` if
/// the kernel has no HMAC-SHA256, `ENOMEM`).
pub(crate) fn hmac_sha256(key: &[u8], data: &[u8]) -> Result<[u8; MAC_LEN]> {
    let key_len = u32::try_from(key.len()).map_err(|_| EINVAL)?;
    let data_len = u32::try_from(data.len()).map_err(|_| EINVAL)?;
    let mut out = [0u8; MAC_LEN];
    // SAFETY: `key` and `data` are readable for the lengths passed and
    // `out` is writable for the 32 bytes SHA-256 produces; the helper uses
    // them only during the call.
    let ret = unsafe {
        lite_hmac_sha256(
            key.as_ptr(),
            key_len,
            data.as_ptr(),
            data_len,
            out.as_mut_ptr(),
        )
    };
    if ret < 0 {
        return Err(Error::from_errno(ret));
    }
    Ok(out)
}

/// `N` random bytes from the kernel's random number generator.
pub(crate) fn random_bytes<const N: usize>() -> [u8; N] {
    let mut out = [0u8; N];
    // SAFETY: `out` is writable for `N` bytes, filled during the call.
    unsafe { bindings::get_random_bytes(out.as_mut_ptr().cast(), N) };
    out
}
