// SPDX-License-Identifier: GPL-2.0

//! Reading strings and the system calls' argument structs from userspace.
//!
//! The structs are the ones `include/uapi/linux/lite.h` declares, as
//! bindgen generates them: their layout is declared once, in that header.

use kernel::{
    bindings,
    prelude::*,
    types::{AsBytes, FromBytes},
    uaccess::{UserPtr, UserSlice},
};

/// A uapi struct copied from or to userspace.
///
/// A local wrapper, so that the kernel crate's byte-copy traits can be
/// implemented for the bindgen-generated types.
#[repr(transparent)]
pub(crate) struct UserStruct<T>(T);

/// Implements [`FromBytes`] and [`AsBytes`] for uapi structs that consist
/// of integer fields only, with no padding between or after them.
macro_rules! plain_user_structs {
    ($($name:ident),* $(,)?) => {$(
        // SAFETY: The struct (see the `const` below) has only integer
        // fields, so every bit pattern is valid, and no interior
        // mutability.
        unsafe impl FromBytes for UserStruct<bindings::$name> {}
        // SAFETY: As above, and its size is the sum of its fields' (no
        // padding, checked below), so a value has no uninitialised bytes.
        unsafe impl AsBytes for UserStruct<bindings::$name> {}
    )*};
}
plain_user_structs!(lite_receive, lite_multicast, lite_lock);

// The structs above have no padding: their sizes are those of their fields.
const _: () = assert!(core::mem::size_of::<bindings::lite_receive>() == 3 * 8 + 2 * 4);
const _: () = assert!(core::mem::size_of::<bindings::lite_multicast>() == 6 * 8 + 2 * 4);
const _: () = assert!(core::mem::size_of::<bindings::lite_lock>() == 2 * 4);

/// Copies a `T` (a uapi struct listed above) in from `ptr`.
///
/// # Errors
///
/// `EFAULT` if the memory cannot be read.
pub(crate) fn read_struct<T>(ptr: UserPtr) -> Result<T>
where
    UserStruct<T>: FromBytes,
{
    let len = core::mem::size_of::<T>();
    let value: UserStruct<T> = UserSlice::new(ptr, len).reader().read()?;
    Ok(value.0)
}

/// Copies `value` (a uapi struct listed above) out to `ptr`.
///
/// # Errors
///
/// `EFAULT` if the memory cannot be written.
pub(crate) fn write_struct<T>(ptr: UserPtr, value: T) -> Result
where
    UserStruct<T>: AsBytes,
{
    let len = core::mem::size_of::<T>();
    UserSlice::new(ptr, len).writer().write(&UserStruct(value))
}

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
