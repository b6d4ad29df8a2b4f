// SPDX-License-Identifier: GPL-2.0

//! Names under which a node publishes its LMRs (`lite_add_ask_mr_table`),
//! and the chunk table a mapper reads to reach a published LMR.

use crate::internal::node_id::NodeId;
use kernel::prelude::*;

use crate::internal::{
    memory::{handle::Password, permission::Permission},
    util::vec::put_or_return,
    wire_layout::{self, wire_layout, WireField},
};

/// One published name.
pub(crate) struct Published<T> {
    /// The 64-bit name.
    pub(crate) name: u64,
    /// The LMR's id on this node.
    pub(crate) lmr_id: u64,
    /// What the name grants at most.
    pub(crate) permission: Permission,
    /// What a mapper must present.
    pub(crate) password: Password,
    /// What the node keeps with the name.
    pub(crate) value: T,
}

/// The names published on a node.
pub(crate) struct NameTable<T> {
    entries: KVec<Option<Published<T>>>,
}

impl<T> NameTable<T> {
    /// No names.
    pub(crate) const fn new() -> Self {
        NameTable {
            entries: KVec::new(),
        }
    }

    /// Publishes `entry`. A refused entry comes back, so that the caller
    /// drops what it holds after releasing its lock.
    ///
    /// # Errors
    ///
    /// `EEXIST` if its name is taken, `ENOMEM`.
    pub(crate) fn insert(&mut self, entry: Published<T>) -> Result<(), (Error, Published<T>)> {
        if self.find(entry.name).is_some() {
            return Err((EEXIST, entry));
        }
        put_or_return(&mut self.entries, entry)
    }

    /// The entry published under `name`.
    pub(crate) fn find(&self, name: u64) -> Option<&Published<T>> {
        self.entries.iter().flatten().find(|e| e.name == name)
    }

    /// Every entry.
    pub(crate) fn all(&self) -> impl Iterator<Item = &Published<T>> {
        self.entries.iter().flatten()
    }

    /// Every entry of LMR `lmr_id`.
    pub(crate) fn of_lmr(&self, lmr_id: u64) -> impl Iterator<Item = &Published<T>> {
        self.entries
            .iter()
            .flatten()
            .filter(move |e| e.lmr_id == lmr_id)
    }

    /// Takes one entry of LMR `lmr_id` out of the table, for the caller to
    /// drop after releasing its lock.
    pub(crate) fn take_of_lmr(&mut self, lmr_id: u64) -> Option<Published<T>> {
        self.entries
            .iter_mut()
            .find(|slot| slot.as_ref().is_some_and(|e| e.lmr_id == lmr_id))
            .and_then(Option::take)
    }

    /// Number of names.
    pub(crate) fn len(&self) -> usize {
        self.entries.iter().flatten().count()
    }
}

/// Bytes per entry of a chunk table.
pub(crate) const DESCRIPTOR_LEN: usize = 32;

wire_layout! {
    /// How a mapper reaches one chunk, as stored in a chunk table: these
    /// fields in this order, little-endian.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub(crate) struct ChunkDescriptor {
        /// Node holding the chunk.
        pub(crate) node: NodeId,
        /// Remote key covering it.
        pub(crate) rkey: u32,
        /// Its id in that node's memory store.
        pub(crate) chunk_id: u64,
        /// Its remote address.
        pub(crate) addr: u64,
        /// Its length.
        pub(crate) len: u64,
    }
}

const _: () = assert!(<ChunkDescriptor as WireField>::LEN == DESCRIPTOR_LEN);

impl ChunkDescriptor {
    /// Encodes the descriptor.
    pub(crate) fn encode(&self) -> [u8; DESCRIPTOR_LEN] {
        wire_layout::encode(self)
    }

    /// Decodes a descriptor.
    pub(crate) fn decode(bytes: &[u8; DESCRIPTOR_LEN]) -> Self {
        wire_layout::decode(bytes)
    }
}

/// Bytes of the chunk table of an LMR with `chunks` chunks, if it fits in
/// `max` bytes.
pub(crate) fn table_len(chunks: usize, max: usize) -> Option<usize> {
    chunks
        .checked_mul(DESCRIPTOR_LEN)
        .filter(|&len| len > 0 && len <= max)
}
