// SPDX-License-Identifier: GPL-2.0

//! The cluster's secret, from the kernel keyring, and HMAC-SHA256 from the
//! kernel's crypto API: what authenticates a node and its cluster manager
//! to each other.

use kernel::{bindings, prelude::*};

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
        // SAFETY: `bytes` is a writable buffer of the length passed, which
        // the helper only writes during the call.
        let read = unsafe {
            bindings::lite_read_cluster_secret(bytes.as_mut_ptr(), MAX_SECRET_LEN as u32)
        };
        let len = match read {
            read if read == -(bindings::EMSGSIZE as i32) => return Err(EINVAL),
            read if read < 0 => return Err(Error::from_errno(read)),
            0 => return Err(EINVAL),
            read => read as usize,
        };
        // INVARIANT: `len` is positive and at most `MAX_SECRET_LEN` (the
        // helper refuses longer keys).
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
