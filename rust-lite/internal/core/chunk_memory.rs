// SPDX-License-Identifier: GPL-2.0

//! The memory behind one chunk: allocated by LITE or pinned user pages.

use kernel::{prelude::*, sync::Arc};

use crate::verbs::{DmaBuffer, PinnedPages};

/// Largest copy between two chunks made through a bounce buffer.
const BOUNCE_LEN: usize = 4096;

/// Memory of one chunk, held by the node it lives on.
pub(crate) enum ChunkMemory {
    /// Contiguous memory allocated by LITE.
    Buffer(DmaBuffer),
    /// One pinned page of a registered user buffer.
    Page {
        /// The pinned pages of the registration.
        pages: Arc<PinnedPages>,
        /// Which of them.
        index: usize,
    },
}

impl ChunkMemory {
    /// Length in bytes.
    pub(crate) fn len(&self) -> usize {
        match self {
            ChunkMemory::Buffer(buffer) => buffer.len(),
            ChunkMemory::Page { .. } => crate::verbs::PAGE_SIZE,
        }
    }

    /// The address and key peers reach `[at, at + len)` with, after checking
    /// the range.
    pub(crate) fn remote_range(&self, at: usize, len: usize) -> Result<(u64, u32)> {
        match self {
            ChunkMemory::Buffer(buffer) => buffer.remote_range(at, len),
            ChunkMemory::Page { pages, index } => pages.remote_range(*index, at, len),
        }
    }

    /// Sets `[at, at + len)` to `byte`.
    pub(crate) fn fill(&self, at: usize, len: usize, byte: u8) -> Result {
        match self {
            ChunkMemory::Buffer(buffer) => buffer.fill(at, len, byte),
            ChunkMemory::Page { pages, index } => pages.fill(*index, at, len, byte),
        }
    }

    /// Copies `len` bytes at `at` into `staging` at 0.
    pub(crate) fn copy_to_buffer(&self, at: usize, staging: &DmaBuffer, len: usize) -> Result {
        match self {
            ChunkMemory::Buffer(buffer) => staging.copy_from(0, buffer, at, len),
            ChunkMemory::Page { pages, index } => pages.copy_to_buffer(*index, at, staging, 0, len),
        }
    }

    /// Copies `len` bytes of `staging` at 0 into this memory at `at`.
    pub(crate) fn copy_from_buffer(&self, at: usize, staging: &DmaBuffer, len: usize) -> Result {
        match self {
            ChunkMemory::Buffer(buffer) => buffer.copy_from(at, staging, 0, len),
            ChunkMemory::Page { pages, index } => {
                pages.copy_from_buffer(*index, at, staging, 0, len)
            }
        }
    }

    /// Copies `len` bytes of `src` at `src_at` into this memory at `at`; the
    /// two may be the same memory with overlapping ranges.
    pub(crate) fn copy_from(
        &self,
        at: usize,
        src: &ChunkMemory,
        src_at: usize,
        len: usize,
    ) -> Result {
        if let (ChunkMemory::Buffer(dst), ChunkMemory::Buffer(src)) = (self, src) {
            return dst.copy_from(at, src, src_at, len);
        }
        // A page chunk is one page long, so a copy involving one fits the
        // bounce buffer whole, which keeps overlapping copies correct.
        if len > BOUNCE_LEN {
            return Err(EINVAL);
        }
        let mut bounce = KVec::from_elem(0u8, len, GFP_KERNEL)?;
        src.read_bytes(src_at, &mut bounce)?;
        self.write_bytes(at, &bounce)
    }

    /// Copies bytes at `at` into `out`.
    pub(crate) fn read_bytes(&self, at: usize, out: &mut [u8]) -> Result {
        match self {
            ChunkMemory::Buffer(buffer) => buffer.read_bytes(at, out),
            ChunkMemory::Page { pages, index } => pages.read_bytes(*index, at, out),
        }
    }

    /// Copies `data` into this memory at `at`.
    pub(crate) fn write_bytes(&self, at: usize, data: &[u8]) -> Result {
        match self {
            ChunkMemory::Buffer(buffer) => buffer.write_bytes(at, data),
            ChunkMemory::Page { pages, index } => pages.write_bytes(*index, at, data),
        }
    }

    /// The LITE buffer behind this memory, if it is one, so RDMA can read
    /// from it directly.
    pub(crate) fn as_buffer(&self) -> Option<&DmaBuffer> {
        match self {
            ChunkMemory::Buffer(buffer) => Some(buffer),
            ChunkMemory::Page { .. } => None,
        }
    }
}
