// SPDX-License-Identifier: GPL-2.0

//! A node's counters (`lite_get_stats`, `struct lite_stats`).

/// The counters, in the order of `struct lite_stats`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Stats {
    /// LMRs created on this node and not released.
    pub(crate) lmrs: u64,
    /// Of which registered user memory.
    pub(crate) registrations: u64,
    /// Mapping handles made by `lite_ask_lmr`.
    pub(crate) mappings: u64,
    /// Names published on this node.
    pub(crate) published_names: u64,
    /// Chunks this node holds, for any node.
    pub(crate) held_chunks: u64,
    /// Handles open in all processes (and kernel callers).
    pub(crate) handles: u64,
    /// Processes with LITE state.
    pub(crate) processes: u64,
    /// Asynchronous operations not yet reaped.
    pub(crate) async_in_flight: u64,
    /// RC connections (queue pairs) to peers.
    pub(crate) connections: u64,
    /// RPC ports registered on this node.
    pub(crate) rpc_ports: u64,
    /// Distributed locks kept by this node.
    pub(crate) locks: u64,
    /// `lite_lock` calls that acquired here.
    pub(crate) lock_acquires: u64,
    /// Of which waited for another holder.
    pub(crate) lock_waits: u64,
    /// Atomic operations issued here.
    pub(crate) atomics: u64,
    /// Low-priority operations that waited for high-priority ones.
    pub(crate) qos_throttled: u64,
}

/// Number of counters in `struct lite_stats`.
const FIELDS: usize = 15;

/// Bytes of `struct lite_stats`.
pub(crate) const STATS_LEN: usize = 8 * FIELDS;

// The uapi header declares the layout; the counters above follow it.
const _: () = assert!(STATS_LEN == core::mem::size_of::<kernel::bindings::lite_stats>());

impl Stats {
    /// Every counter with its `struct lite_stats` field name, in order.
    pub(crate) fn named(&self) -> [(&'static str, u64); FIELDS] {
        [
            ("lmrs", self.lmrs),
            ("registrations", self.registrations),
            ("mappings", self.mappings),
            ("published_names", self.published_names),
            ("held_chunks", self.held_chunks),
            ("handles", self.handles),
            ("processes", self.processes),
            ("async_in_flight", self.async_in_flight),
            ("connections", self.connections),
            ("rpc_ports", self.rpc_ports),
            ("locks", self.locks),
            ("lock_acquires", self.lock_acquires),
            ("lock_waits", self.lock_waits),
            ("atomics", self.atomics),
            ("qos_throttled", self.qos_throttled),
        ]
    }

    /// The counters as `struct lite_stats` lays them out (native endian).
    pub(crate) fn to_bytes(self) -> [u8; STATS_LEN] {
        let mut out = [0u8; STATS_LEN];
        for (i, (_, value)) in self.named().iter().enumerate() {
            // PANIC: `i < FIELDS` and `out` is `8 * FIELDS` bytes.
            out[i * 8..i * 8 + 8].copy_from_slice(&value.to_ne_bytes());
        }
        out
    }
}
