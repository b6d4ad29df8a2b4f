// SPDX-License-Identifier: GPL-2.0

//! Permissions of LMR handles (`LITE_PERM_*`).

use kernel::prelude::*;

/// A set of permissions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Permission(u64);

impl Permission {
    /// Read the LMR.
    pub(crate) const READ: Permission = Permission(0x1);
    /// Write the LMR.
    pub(crate) const WRITE: Permission = Permission(0x2);
    /// Publish the LMR under a name.
    pub(crate) const SHARE: Permission = Permission(0x4);
    /// Free or deregister the LMR; only its creator has it.
    pub(crate) const ADMIN: Permission = Permission(0x8);
    /// Atomic operations on the LMR.
    pub(crate) const ATOMIC: Permission = Permission(0x10);
    /// What a name can grant: everything but ADMIN.
    pub(crate) const SHAREABLE: Permission = Permission(0x1 | 0x2 | 0x4 | 0x10);
    /// Every permission bit.
    pub(crate) const ALL: Permission = Permission(0x1f);

    /// Permissions from a user's bits.
    ///
    /// # Errors
    ///
    /// `EINVAL` for bits outside `allowed`.
    pub(crate) fn from_bits(bits: u64, allowed: Permission) -> Result<Self> {
        if bits & !allowed.0 != 0 {
            return Err(EINVAL);
        }
        Ok(Permission(bits))
    }

    /// The raw bits.
    pub(crate) const fn bits(self) -> u64 {
        self.0
    }

    /// Whether every permission of `other` is in `self`.
    pub(crate) fn contains(self, other: Permission) -> bool {
        self.0 & other.0 == other.0
    }

    /// Checks that `self` includes `needed`.
    ///
    /// # Errors
    ///
    /// `EPERM` if a permission is missing.
    pub(crate) fn require(self, needed: Permission) -> Result {
        if self.contains(needed) {
            Ok(())
        } else {
            Err(EPERM)
        }
    }

    /// Permissions in both sets.
    pub(crate) fn intersect(self, other: Permission) -> Permission {
        Permission(self.0 & other.0)
    }

    /// Permissions in either set.
    pub(crate) fn union(self, other: Permission) -> Permission {
        Permission(self.0 | other.0)
    }

    /// Whether the set is empty.
    pub(crate) fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// What `lite_ask_lmr` grants: the requested permissions that both the
    /// published name and the LMR allow, never ADMIN.
    ///
    /// # Errors
    ///
    /// `EPERM` if nothing requested is granted.
    pub(crate) fn grant(
        requested: Permission,
        published: Permission,
        lmr: Permission,
    ) -> Result<Permission> {
        let granted = requested
            .intersect(published)
            .intersect(lmr)
            .intersect(Permission::SHAREABLE);
        if granted.is_empty() {
            Err(EPERM)
        } else {
            Ok(granted)
        }
    }
}
