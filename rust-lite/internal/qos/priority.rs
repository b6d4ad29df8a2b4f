// SPDX-License-Identifier: GPL-2.0

//! Priorities carried by data operations and RPC sends.

use core::sync::atomic::{AtomicU32, Ordering};
use kernel::prelude::*;

/// Priority of an operation, as passed to the system calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Priority {
    /// No preference (`LITE_PRIORITY_NONE`): neither throttled nor
    /// protected. In a call, it stands for the process's default.
    None,
    /// Latency-sensitive work (`LITE_PRIORITY_HIGH`).
    High,
    /// Background work (`LITE_PRIORITY_LOW`), throttled while high-priority
    /// work runs.
    Low,
}

/// Number of priorities, for per-priority counters.
pub(crate) const PRIORITIES: usize = 3;

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

    /// The value the system calls use.
    pub(crate) fn raw(self) -> u32 {
        match self {
            Priority::None => 0,
            Priority::High => 1,
            Priority::Low => 2,
        }
    }

    /// Index for per-priority tables.
    pub(crate) fn index(self) -> usize {
        self.raw() as usize
    }

    /// Name used in the counters' text.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Priority::None => "none",
            Priority::High => "high",
            Priority::Low => "low",
        }
    }

    /// Every priority, in index order.
    pub(crate) const ALL: [Priority; PRIORITIES] = [Priority::None, Priority::High, Priority::Low];
}

/// A process's default priority (`lite_set_priority`).
pub(crate) struct DefaultPriority(AtomicU32);

impl DefaultPriority {
    /// [`Priority::None`] until set.
    pub(crate) const fn new() -> Self {
        DefaultPriority(AtomicU32::new(0))
    }

    /// Sets the default; returns the previous one.
    pub(crate) fn set(&self, priority: Priority) -> Priority {
        let old = self.0.swap(priority.raw(), Ordering::Relaxed);
        Priority::from_raw(old).unwrap_or(Priority::None)
    }

    /// The priority of a call that passed `raw`: the default for
    /// `LITE_PRIORITY_NONE`.
    ///
    /// # Errors
    ///
    /// `EINVAL` for an unknown value.
    pub(crate) fn resolve(&self, raw: u32) -> Result<Priority> {
        Ok(self.apply(Priority::from_raw(raw)?))
    }

    /// `priority`, or the default for [`Priority::None`].
    pub(crate) fn apply(&self, priority: Priority) -> Priority {
        match priority {
            Priority::None => {
                Priority::from_raw(self.0.load(Ordering::Relaxed)).unwrap_or(Priority::None)
            }
            explicit => explicit,
        }
    }
}
