// SPDX-License-Identifier: GPL-2.0

//! What quotas count: the resources, and amounts of each.

use core::fmt::{self, Write};

/// A resource a user's quota limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Resource {
    /// Bytes of LMRs allocated, wherever their chunks are.
    RemoteMemory = 0,
    /// Bytes of this node's memory pinned by registrations.
    PinnedMemory = 1,
    /// LMRs created.
    Lmrs = 2,
    /// Names published.
    Names = 3,
    /// RPC ports registered.
    RpcPorts = 4,
    /// Locks created.
    Locks = 5,
}

impl Resource {
    /// Number of resources.
    pub(crate) const COUNT: usize = 6;

    /// Every resource, in the order of their indices.
    pub(crate) const ALL: [Resource; Resource::COUNT] = [
        Resource::RemoteMemory,
        Resource::PinnedMemory,
        Resource::Lmrs,
        Resource::Names,
        Resource::RpcPorts,
        Resource::Locks,
    ];

    /// Its name in `/sys/kernel/debug/lite/quotas`.
    pub(crate) const fn name(self) -> &'static str {
        match self {
            Resource::RemoteMemory => "remote_memory",
            Resource::PinnedMemory => "pinned_memory",
            Resource::Lmrs => "lmrs",
            Resource::Names => "names",
            Resource::RpcPorts => "rpc_ports",
            Resource::Locks => "locks",
        }
    }

    /// The resource called `name`.
    pub(crate) fn from_name(name: &[u8]) -> Option<Resource> {
        Resource::ALL
            .into_iter()
            .find(|r| r.name().as_bytes() == name)
    }
}

/// A limit that never refuses.
pub(crate) const UNLIMITED: u64 = u64::MAX;

/// One amount per resource: what a user holds, a limit, or a charge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Amounts([u64; Resource::COUNT]);

impl Amounts {
    /// Nothing of anything.
    pub(crate) const ZERO: Amounts = Amounts([0; Resource::COUNT]);

    /// What every user may hold unless the administrator says otherwise.
    pub(crate) const DEFAULT_LIMITS: Amounts =
        Amounts([1 << 30, UNLIMITED, 65536, 4096, 1024, 4096]);

    /// No limit on anything.
    pub(crate) const UNLIMITED: Amounts = Amounts([UNLIMITED; Resource::COUNT]);

    /// `amount` of `resource` and nothing else.
    pub(crate) const fn of(resource: Resource, amount: u64) -> Amounts {
        Amounts::ZERO.with(resource, amount)
    }

    /// These amounts with `resource` set to `amount`.
    pub(crate) const fn with(mut self, resource: Resource, amount: u64) -> Amounts {
        // PANIC: every resource's index is below `Resource::COUNT`.
        self.0[resource as usize] = amount;
        self
    }

    /// The amount of `resource`.
    pub(crate) const fn get(&self, resource: Resource) -> u64 {
        // PANIC: as in `with`.
        self.0[resource as usize]
    }

    /// Whether every amount is 0.
    pub(crate) fn is_zero(&self) -> bool {
        self.0.iter().all(|&a| a == 0)
    }

    /// These amounts plus `more`, if that stays within `limits`; otherwise
    /// the first resource that would exceed its limit.
    pub(crate) fn plus_within(
        &self,
        more: &Amounts,
        limits: &Amounts,
    ) -> Result<Amounts, Resource> {
        let mut sum = *self;
        for resource in Resource::ALL {
            let add = more.get(resource);
            if add == 0 {
                continue;
            }
            match self.get(resource).checked_add(add) {
                Some(total) if total <= limits.get(resource) => {
                    sum = sum.with(resource, total);
                }
                _ => return Err(resource),
            }
        }
        Ok(sum)
    }

    /// These amounts less `less`, none below 0.
    pub(crate) fn minus(&self, less: &Amounts) -> Amounts {
        let mut rest = *self;
        for resource in Resource::ALL {
            rest = rest.with(
                resource,
                self.get(resource).saturating_sub(less.get(resource)),
            );
        }
        rest
    }

    /// Writes ` name=value` for every resource.
    pub(crate) fn write_text(&self, out: &mut impl Write) -> fmt::Result {
        for resource in Resource::ALL {
            write!(out, " {}=", resource.name())?;
            write_value(out, self.get(resource))?;
        }
        Ok(())
    }
}

/// Whether `limit` allows `held + more`.
pub(crate) fn within(held: u64, more: u64, limit: u64) -> bool {
    limit == UNLIMITED || held.checked_add(more).is_some_and(|total| total <= limit)
}

/// Writes a limit: its number, or `unlimited`.
pub(crate) fn write_value(out: &mut impl Write, value: u64) -> fmt::Result {
    if value == UNLIMITED {
        out.write_str("unlimited")
    } else {
        write!(out, "{value}")
    }
}
