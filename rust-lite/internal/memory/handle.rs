// SPDX-License-Identifier: GPL-2.0

//! The values by which callers name and unlock LMRs.

/// A process's handle to an LMR (`lite_alloc_remote`, `lite_ask_lmr`, ...):
/// meaningful only to the process it was given to, like a file descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LmrHandle(u64);

impl LmrHandle {
    /// The handle a caller passed.
    pub(crate) const fn from_raw(raw: u64) -> Self {
        LmrHandle(raw)
    }

    /// The handle as callers see it.
    pub(crate) const fn raw(self) -> u64 {
        self.0
    }
}

/// The password an LMR was created or published with; data operations and
/// mappers must present it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct Password(u64);

impl Password {
    /// The password a caller passed.
    pub(crate) const fn from_raw(raw: u64) -> Self {
        Password(raw)
    }

    /// The password as it travels to the LMR's owner.
    pub(crate) const fn raw(self) -> u64 {
        self.0
    }
}

impl core::fmt::Debug for Password {
    // Passwords do not appear in logs.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("Password(..)")
    }
}
