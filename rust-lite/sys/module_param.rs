// SPDX-License-Identifier: GPL-2.0

//! LITE's module parameters, declared in C (`lite_helpers.c`: the 6.12
//! `module!` macro takes none) and read here.

use kernel::{bindings, str::CStr};

extern "C" {
    /// `lite_helpers.c`: copies the `device` parameter into the `len` bytes
    /// at `buf`, NUL-terminated, under the parameters' lock.
    fn lite_device_param(buf: *mut u8, len: usize);
}

/// Room for a device name with its NUL (`IB_DEVICE_NAME_MAX`).
const NAME_LEN: usize = bindings::IB_DEVICE_NAME_MAX as usize;

/// The `device` parameter: the name of the RDMA device to join with.
///
/// # Invariants
///
/// `bytes[..=len]` is the name followed by its NUL, with no NUL within.
pub(crate) struct DeviceParam {
    bytes: [u8; NAME_LEN],
    len: usize,
}

impl DeviceParam {
    /// The parameter's current value.
    pub(crate) fn read() -> Self {
        let mut bytes = [0u8; NAME_LEN];
        // SAFETY: `bytes` is valid for `NAME_LEN` writable bytes.
        unsafe { lite_device_param(bytes.as_mut_ptr(), NAME_LEN) };
        Self::from_value(&bytes)
    }

    /// The parameter holding `value` up to its first NUL (all of it if
    /// none), without surrounding blanks (a value written with `echo` ends
    /// in a newline), cut to the longest device name.
    pub(crate) fn from_value(value: &[u8]) -> Self {
        let end = value.iter().position(|&b| b == 0).unwrap_or(value.len());
        // PANIC: `end` is at most `value.len()`.
        let value = &value[..end];
        let first = value.iter().position(|b| !b.is_ascii_whitespace());
        let last = value.iter().rposition(|b| !b.is_ascii_whitespace());
        let value = match (first, last) {
            // PANIC: `first <= last < value.len()`, both found in `value`.
            (Some(first), Some(last)) => &value[first..=last],
            _ => &[],
        };
        let len = value.len().min(NAME_LEN - 1);
        let mut bytes = [0u8; NAME_LEN];
        // PANIC: `len` is below `NAME_LEN` and at most `value.len()`.
        bytes[..len].copy_from_slice(&value[..len]);
        // INVARIANT: `value` holds no NUL (it ends before the first), and
        // `bytes[len]` is 0.
        DeviceParam { bytes, len }
    }

    /// The device name, or `None` if the parameter is empty (any device).
    pub(crate) fn name(&self) -> Option<&CStr> {
        if self.len == 0 {
            return None;
        }
        // PANIC: `len < NAME_LEN` (type invariant).
        CStr::from_bytes_with_nul(&self.bytes[..=self.len]).ok()
    }
}
