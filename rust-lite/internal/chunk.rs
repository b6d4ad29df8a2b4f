// SPDX-License-Identifier: GPL-2.0

//! How an LMR is cut into chunks, and how an access is cut into pieces.
//!
//! An LMR of `size` bytes is a sequence of chunks of [`CHUNK_SIZE`] bytes
//! (the last one shorter), each held by one node. An access to
//! `[offset, offset + len)` becomes one piece per chunk it touches, further
//! cut to at most `max_piece` bytes so a staging buffer can carry it.

use kernel::prelude::*;

/// Bytes per chunk (the original LITE's `LITE_MEMORY_BLOCK`).
pub(crate) const CHUNK_SIZE: u64 = 4 << 20;

/// Largest LMR one allocation may create.
pub(crate) const MAX_LMR_SIZE: u64 = 1 << 40;

/// Checks an LMR size: 1 to [`MAX_LMR_SIZE`] bytes.
pub(crate) fn check_size(size: u64) -> Result {
    if size == 0 || size > MAX_LMR_SIZE {
        return Err(EINVAL);
    }
    Ok(())
}

/// Number of chunks of an LMR of `size` bytes.
pub(crate) fn chunk_count(size: u64) -> usize {
    size.div_ceil(CHUNK_SIZE) as usize
}

/// Length of chunk `index` of an LMR of `size` bytes (0 past the end).
pub(crate) fn chunk_len(size: u64, index: usize) -> u64 {
    let start = (index as u64).saturating_mul(CHUNK_SIZE);
    size.saturating_sub(start).min(CHUNK_SIZE)
}

/// Checks that `[offset, offset + len)` lies inside an LMR of `size` bytes.
///
/// # Errors
///
/// `EINVAL` if the range overflows or ends past the LMR.
pub(crate) fn check_range(size: u64, offset: u64, len: u64) -> Result {
    match offset.checked_add(len) {
        Some(end) if end <= size => Ok(()),
        _ => Err(EINVAL),
    }
}

/// Node holding chunk `index` when chunks are spread round robin over `nodes`.
pub(crate) fn spread_target(nodes: &[u32], index: usize) -> Option<u32> {
    if nodes.is_empty() {
        return None;
    }
    nodes.get(index % nodes.len()).copied()
}

/// A part of an access that lies inside one chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Piece {
    /// Index of the chunk.
    pub(crate) chunk: usize,
    /// Offset inside the chunk.
    pub(crate) chunk_offset: u64,
    /// Bytes in this piece.
    pub(crate) len: u64,
    /// Offset of the piece from the start of the access.
    pub(crate) data_offset: u64,
}

/// Iterator over the pieces of an access; see [`pieces`].
pub(crate) struct Pieces {
    offset: u64,
    end: u64,
    start: u64,
    max_piece: u64,
}

/// Cuts the access `[offset, offset + len)` into pieces of at most
/// `max_piece` bytes (at least 1) that never cross a chunk boundary.
///
/// The range must have been checked with [`check_range`].
pub(crate) fn pieces(offset: u64, len: u64, max_piece: u64) -> Pieces {
    Pieces {
        offset,
        end: offset.saturating_add(len),
        start: offset,
        max_piece: max_piece.max(1),
    }
}

impl Iterator for Pieces {
    type Item = Piece;

    fn next(&mut self) -> Option<Piece> {
        if self.offset >= self.end {
            return None;
        }
        let chunk = self.offset / CHUNK_SIZE;
        let chunk_offset = self.offset % CHUNK_SIZE;
        let len = (CHUNK_SIZE - chunk_offset)
            .min(self.end - self.offset)
            .min(self.max_piece);
        let piece = Piece {
            chunk: chunk as usize,
            chunk_offset,
            len,
            data_offset: self.offset - self.start,
        };
        self.offset += len;
        Some(piece)
    }
}
