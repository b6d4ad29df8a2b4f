// SPDX-License-Identifier: GPL-2.0

//! The node's memory.

use kernel::bindings;

/// Bytes of RAM the kernel manages.
pub(crate) fn total_ram_bytes() -> u64 {
    // SAFETY: `totalram_pages` only reads a global counter.
    let pages = unsafe { bindings::totalram_pages() };
    (pages as u64) << bindings::PAGE_SHIFT
}
