// SPDX-License-Identifier: GPL-2.0

//! The node's memory.

use kernel::bindings;

/// Bytes of RAM the kernel manages.
pub(crate) fn total_ram_bytes() -> u64 {
    // SAFETY: `lite_total_ram_bytes` only reads a global counter.
    unsafe { bindings::lite_total_ram_bytes() }
}
