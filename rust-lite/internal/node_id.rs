// SPDX-License-Identifier: GPL-2.0

//! Node ids: which node of the cluster something is on, comes from or goes to.

use core::fmt;

use super::core::{limits::MAX_NODES, wire::WireValue};
use super::wire_layout::WireField;

/// The id the cluster manager gave a node when it joined (from 1; 0 is no
/// node). Ids come from the manager, from peers and from users, so a
/// `NodeId` may name no node of the cluster: tables look it up with
/// [`NodeId::index`] and a checked access.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug, Default)]
pub(crate) struct NodeId(u32);

impl NodeId {
    /// No node: where a node id is still to be set, or has gone.
    pub(crate) const NONE: Self = Self(0);

    /// The id numbered `raw`, as the manager, a peer or a user wrote it.
    pub(crate) const fn new(raw: u32) -> Self {
        Self(raw)
    }

    /// The id as a number, for the wire, users and messages.
    pub(crate) const fn get(self) -> u32 {
        self.0
    }

    /// The id as an index into tables of [`MAX_NODES`] entries (which may
    /// be beyond them).
    pub(crate) const fn index(self) -> usize {
        self.0 as usize
    }

    /// Whether the id is one a member can have: from 1, below [`MAX_NODES`].
    pub(crate) const fn is_member_id(self) -> bool {
        self.0 != 0 && self.index() < MAX_NODES
    }

    /// This node's bit in a set of nodes kept as one bit per id, or `None`
    /// for an id beyond such a set.
    pub(crate) fn bit(self) -> Option<u64> {
        1u64.checked_shl(self.0)
    }

    /// Every id a table of [`MAX_NODES`] entries has room for, ascending.
    pub(crate) fn all() -> impl Iterator<Item = NodeId> {
        // PANIC: `MAX_NODES` is a small constant, far below `u32::MAX`.
        (0..MAX_NODES as u32).map(NodeId)
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl WireValue for NodeId {
    fn to_wire(self) -> u64 {
        u64::from(self.0)
    }
    fn from_wire(word: u64) -> Self {
        // Node ids travel in 32-bit slots.
        Self(word as u32)
    }
}

impl WireField for NodeId {
    const LEN: usize = u32::LEN;

    fn put(&self, out: &mut [u8]) {
        self.0.put(out);
    }

    fn get(bytes: &[u8]) -> Self {
        Self(u32::get(bytes))
    }
}
