// SPDX-License-Identifier: GPL-2.0

//! Priorities carried by data operations.

use kernel::prelude::*;

/// Priority of an operation, as passed to the system calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Priority {
    /// No preference (`LITE_PRIORITY_NONE`).
    None,
    /// Latency-sensitive work (`LITE_PRIORITY_HIGH`).
    High,
    /// Background work (`LITE_PRIORITY_LOW`).
    Low,
}

impl Priority {
    /// Decodes a priority value.
    ///
    /// # Errors
    ///
    /// `EINVAL` for an unknown value.
    pub(crate) fn from_raw(raw: u32) -> Result<Self> {
        match raw {
            0 => Ok(Priority::None),
            1 => Ok(Priority::High),
            2 => Ok(Priority::Low),
            _ => Err(EINVAL),
        }
    }
}
