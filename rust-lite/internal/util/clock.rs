// SPDX-License-Identifier: GPL-2.0

//! The monotonic clock in milliseconds.

use kernel::time::Ktime;

/// Milliseconds since boot (monotonic).
pub(crate) fn now_ms() -> u64 {
    u64::try_from(Ktime::ktime_get().to_ns() / 1_000_000).unwrap_or(0)
}
