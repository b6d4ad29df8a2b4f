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
}

/// Bytes of `struct lite_stats`.
pub(crate) const STATS_LEN: usize = 8 * 8;

impl Stats {
    /// The counters as `struct lite_stats` lays them out (native endian).
    pub(crate) fn to_bytes(self) -> [u8; STATS_LEN] {
        let fields = [
            self.lmrs,
            self.registrations,
            self.mappings,
            self.published_names,
            self.held_chunks,
            self.handles,
            self.processes,
            self.async_in_flight,
        ];
        let mut out = [0u8; STATS_LEN];
        for (i, field) in fields.iter().enumerate() {
            out[i * 8..i * 8 + 8].copy_from_slice(&field.to_ne_bytes());
        }
        out
    }
}
