// SPDX-License-Identifier: GPL-2.0

//! How an LMR is cut into chunks, and how an access is cut into pieces.
//!
//! An LMR of `size` bytes is a sequence of chunks of [`CHUNK_SIZE`] bytes
//! (the last one shorter), each held by one node. An access to
//! `[offset, offset + len)` becomes one piece per chunk it touches, further
//! cut to at most `max_piece` bytes so a staging buffer can carry it.

use crate::internal::node_id::NodeId;
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
    // PANIC: `CHUNK_SIZE` is not 0.
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
pub(crate) fn spread_target(nodes: &[NodeId], index: usize) -> Option<NodeId> {
    if nodes.is_empty() {
        return None;
    }
    // PANIC: `nodes` is not empty (checked above).
    nodes.get(index % nodes.len()).copied()
}

/// Cuts `len` bytes into consecutive `(start, len)` spans of at most `max`
/// bytes (at least 1), for moving a range in bounded RDMA operations.
pub(crate) fn spans(len: usize, max: usize) -> impl Iterator<Item = (usize, usize)> {
    let max = max.max(1);
    // PANIC: `max >= 1`, so `step_by` accepts it, and every `start` is
    // below `len`.
    (0..len)
        .step_by(max)
        .map(move |start| (start, max.min(len - start)))
}

/// How an LMR's bytes are laid out over its chunks.
///
/// Byte `offset` of the LMR is byte `(lead + offset) % chunk_size` of chunk
/// `(lead + offset) / chunk_size`: allocated LMRs start at the beginning of
/// their first chunk, registered user memory wherever it starts in its
/// first page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Geometry {
    /// Bytes per chunk (at least 1).
    pub(crate) chunk_size: u64,
    /// Offset of the LMR's first byte in its first chunk (below `chunk_size`).
    pub(crate) lead: u64,
}

impl Geometry {
    /// The layout of allocated LMRs.
    pub(crate) const ALLOCATED: Geometry = Geometry {
        chunk_size: CHUNK_SIZE,
        lead: 0,
    };

    /// A layout, checked: `chunk_size` at least 1, `lead` below it.
    pub(crate) fn new(chunk_size: u64, lead: u64) -> Result<Self> {
        if chunk_size == 0 || lead >= chunk_size {
            return Err(EINVAL);
        }
        Ok(Geometry { chunk_size, lead })
    }

    /// Number of chunks an LMR of `size` bytes spans.
    pub(crate) fn chunk_count(&self, size: u64) -> Option<usize> {
        let span = size.checked_add(self.lead)?;
        // PANIC: `chunk_size >= 1`: every `Geometry` comes from
        // `Geometry::new`, which checks it, or is `ALLOCATED`.
        usize::try_from(span.div_ceil(self.chunk_size)).ok()
    }

    /// Chunk index and offset in it of LMR byte `offset`.
    pub(crate) fn locate(&self, offset: u64) -> Option<(usize, u64)> {
        let position = offset.checked_add(self.lead)?;
        let index = usize::try_from(position.checked_div(self.chunk_size)?).ok()?;
        Some((index, position.checked_rem(self.chunk_size)?))
    }
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

/// Iterator over the pieces of an access; see [`pieces_in`].
pub(crate) struct Pieces {
    offset: u64,
    end: u64,
    start: u64,
    max_piece: u64,
    chunk_size: u64,
}

/// [`pieces_in`] for an allocated LMR.
#[cfg(CONFIG_LITE_KUNIT_TEST)]
pub(crate) fn pieces(offset: u64, len: u64, max_piece: u64) -> Pieces {
    pieces_in(Geometry::ALLOCATED, offset, len, max_piece)
}

/// Cuts the access `[offset, offset + len)` of an LMR laid out as
/// `geometry` into pieces of at most `max_piece` bytes (at least 1) that
/// never cross a chunk boundary: `chunk_offset` is the offset inside the
/// chunk, lead included.
///
/// The range must have been checked with [`check_range`].
pub(crate) fn pieces_in(geometry: Geometry, offset: u64, len: u64, max_piece: u64) -> Pieces {
    let start = offset.saturating_add(geometry.lead);
    Pieces {
        offset: start,
        end: start.saturating_add(len),
        start,
        max_piece: max_piece.max(1),
        chunk_size: geometry.chunk_size.max(1),
    }
}

impl Iterator for Pieces {
    type Item = Piece;

    fn next(&mut self) -> Option<Piece> {
        if self.offset >= self.end {
            return None;
        }
        // PANIC: `chunk_size >= 1` (clamped in `pieces_in`), so
        // `chunk_offset < chunk_size`; `start <= offset < end` (`offset`
        // starts at `start` and only grows), and `offset + len <= end`.
        let chunk = self.offset / self.chunk_size;
        let chunk_offset = self.offset % self.chunk_size;
        let len = (self.chunk_size - chunk_offset)
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

/// A part of a copy that lies inside one source and one destination chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CopyPiece {
    /// Source chunk index.
    pub(crate) src_chunk: usize,
    /// Offset in the source chunk.
    pub(crate) src_at: u64,
    /// Destination chunk index.
    pub(crate) dst_chunk: usize,
    /// Offset in the destination chunk.
    pub(crate) dst_at: u64,
    /// Bytes in this piece.
    pub(crate) len: u64,
}

/// Iterator over the pieces of a copy; see [`copy_pieces`].
pub(crate) struct CopyPieces {
    src: Geometry,
    dst: Geometry,
    src_offset: u64,
    dst_offset: u64,
    /// Bytes not yet covered.
    remaining: u64,
    backward: bool,
}

/// Cuts a copy of `len` bytes from `src_offset` of an LMR laid out as `src`
/// to `dst_offset` of one laid out as `dst` into pieces that each stay
/// inside one source and one destination chunk.
///
/// With `backward` the pieces come from the end of the range to its start,
/// which keeps a copy to a higher offset of the same memory correct when the
/// ranges overlap. Ranges must have been checked with [`check_range`].
pub(crate) fn copy_pieces(
    src: Geometry,
    src_offset: u64,
    dst: Geometry,
    dst_offset: u64,
    len: u64,
    backward: bool,
) -> CopyPieces {
    CopyPieces {
        src,
        dst,
        src_offset,
        dst_offset,
        remaining: len,
        backward,
    }
}

impl CopyPieces {
    /// The piece starting `done` bytes into the copy, at most `limit` bytes.
    fn piece_at(&self, done: u64, limit: u64) -> Option<CopyPiece> {
        let (src_chunk, src_at) = self.src.locate(self.src_offset.checked_add(done)?)?;
        let (dst_chunk, dst_at) = self.dst.locate(self.dst_offset.checked_add(done)?)?;
        // PANIC: `locate` returns offsets below the chunk size.
        let len = limit
            .min(self.src.chunk_size - src_at)
            .min(self.dst.chunk_size - dst_at);
        Some(CopyPiece {
            src_chunk,
            src_at,
            dst_chunk,
            dst_at,
            len,
        })
    }

    /// Start of the last piece ending at `end` (exclusive), relative to the copy.
    fn last_piece_start(&self, end: u64) -> Option<u64> {
        let last = end.checked_sub(1)?;
        let (_, src_at) = self.src.locate(self.src_offset.checked_add(last)?)?;
        let (_, dst_at) = self.dst.locate(self.dst_offset.checked_add(last)?)?;
        // Bytes of the piece before `last` in each chunk, `last` included.
        // PANIC: `locate` returns offsets below a chunk size, so adding 1
        // does not overflow, and `back <= end`.
        let back = (src_at + 1).min(dst_at + 1).min(end);
        Some(end - back)
    }
}

impl Iterator for CopyPieces {
    type Item = CopyPiece;

    fn next(&mut self) -> Option<CopyPiece> {
        if self.remaining == 0 {
            return None;
        }
        // PANIC: `last_piece_start(end)` is at most `end`. A piece is at
        // most `limit <= remaining` bytes long. `src_offset + remaining` and
        // `dst_offset + remaining` stay the ends of the ranges the caller
        // checked with `check_range`, so advancing the offsets by at most
        // `remaining` does not overflow.
        let piece = if self.backward {
            let start = self.last_piece_start(self.remaining)?;
            self.piece_at(start, self.remaining - start)?
        } else {
            let piece = self.piece_at(0, self.remaining)?;
            self.src_offset += piece.len;
            self.dst_offset += piece.len;
            piece
        };
        if piece.len == 0 {
            return None;
        }
        // PANIC: `piece.len <= remaining` (see above).
        self.remaining -= piece.len;
        Some(piece)
    }
}
