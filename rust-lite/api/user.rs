// SPDX-License-Identifier: GPL-2.0

//! Reading strings from userspace.

use kernel::{bindings, prelude::*, uaccess::UserPtr};

/// Copies the NUL-terminated string at `ptr` from userspace.
///
/// The string, NUL included, must fit in `N` bytes. Returns the bytes
/// before the NUL and their count.
///
/// # Errors
///
/// `EFAULT` if the memory cannot be read, `EINVAL` if no NUL comes within `N` bytes.
pub(crate) fn read_user_cstr<const N: usize>(ptr: UserPtr) -> Result<([u8; N], usize)> {
    let mut buf = [0u8; N];
    // SAFETY: `buf` is a writable kernel buffer of `N` bytes;
    // `strncpy_from_user` validates the user pointer itself and copies at
    // most `N` bytes.
    let copied = unsafe { bindings::strncpy_from_user(buf.as_mut_ptr(), ptr as *const _, N as _) };
    if copied < 0 {
        return Err(EFAULT);
    }
    let len = usize::try_from(copied).map_err(|_| EFAULT)?;
    if len >= N {
        return Err(EINVAL);
    }
    Ok((buf, len))
}
